//! Read-modify-write of a file that other processes edit too.
//!
//! Every file Cairn edits in place (agent specs, `mcp.json`, `config.json`,
//! a host's settings file) may be edited by several `cairn` processes at
//! once: two `cairn mcp enable` in parallel, a CLI beside the gateway. A
//! plain read, change and atomic rename loses all but the last writer's
//! change. [`edit_locked`] serialises them: it takes an exclusive lock on a
//! sibling lock file (`.<name>.lock`, never removed, so every process locks
//! the same inode), reads the file *under the lock*, hands the text to the
//! caller's edit and writes the result atomically before it lets go.
//!
//! The lock is advisory (`flock` on Unix, `LockFileEx` on Windows, through
//! std's `File::lock`): it orders Cairn's own writers, not an editor
//! the user runs by hand. It is taken per open file description, so two
//! threads of one process exclude each other as two processes do; an edit
//! must therefore never call `edit_locked` on the same path from inside
//! its closure.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cairn_files::LockFile;

/// Largest file an edit reads (a Claude Code `~/.claude.json` carries
/// per-project state and grows large; nothing Cairn edits is near this).
pub(crate) const MAX_EDITED_BYTES: u64 = 16 * 1024 * 1024;
/// How long an edit waits for another process's edit of the same file.
const LOCK_PATIENCE: Duration = Duration::from_secs(20);
/// How often a waiting edit tries the lock again.
const LOCK_POLL: Duration = Duration::from_millis(5);

/// Why a locked edit could not read or write its file. The edit's own
/// refusals come back as the caller's error type unchanged.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LockedEditError {
    #[error("locking {path} for an edit")]
    Lock {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is being edited by another process for more than {} s; try again", LOCK_PATIENCE.as_secs())]
    Busy { path: PathBuf },
    #[error("reading {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a regular file; it was left as it is")]
    NotRegular { path: PathBuf },
    #[error("{path} is {bytes} bytes; files over {MAX_EDITED_BYTES} bytes are not edited")]
    TooLarge { path: PathBuf, bytes: u64 },
    #[error("writing {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl LockedEditError {
    /// The file the edit was about.
    pub(crate) fn path(&self) -> &Path {
        match self {
            Self::Lock { path, .. }
            | Self::Busy { path }
            | Self::Read { path, .. }
            | Self::NotRegular { path }
            | Self::TooLarge { path, .. }
            | Self::Write { path, .. } => path,
        }
    }

    /// The edit failed before anything was read (the lock), or while
    /// writing; `false` when the existing file could not be read.
    pub(crate) fn is_write_side(&self) -> bool {
        matches!(self, Self::Lock { .. } | Self::Busy { .. } | Self::Write { .. })
    }
}

/// `.<name>.lock` beside `path`.
pub(crate) fn lock_path(path: &Path) -> PathBuf {
    let name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    path.parent().unwrap_or(Path::new(".")).join(format!(".{name}.lock"))
}

/// Edits `path` under an exclusive cross-process lock.
///
/// `edit` receives the file's text read under the lock (`None` when the
/// file does not exist) and returns the new text, or `None` to leave the
/// file alone; an error from `edit` is returned as it is and nothing is
/// written. The new text is written atomically (a synced temporary
/// sibling renamed over `path`), keeping an existing file's permissions,
/// and only when it differs. Returns whether the file was written.
///
/// The file must be a regular file (a symbolic link to one is followed
/// for the read and replaced by the write) of at most
/// [`MAX_EDITED_BYTES`] in UTF-8. The parent directory is created when
/// missing. Waits up to twenty seconds for another process's edit.
pub(crate) fn edit_locked<E>(
    path: &Path,
    edit: impl FnOnce(Option<String>) -> Result<Option<String>, E>,
) -> Result<bool, E>
where
    E: From<LockedEditError>,
{
    edit_with(path, true, edit)
}

/// [`edit_locked`] for a file that must stay owner-only whatever its mode
/// was (`config.json`, which may hold a key): written `0600`.
pub(crate) fn edit_locked_owner_only<E>(
    path: &Path,
    edit: impl FnOnce(Option<String>) -> Result<Option<String>, E>,
) -> Result<bool, E>
where
    E: From<LockedEditError>,
{
    edit_with(path, false, edit)
}

fn edit_with<E>(
    path: &Path,
    keep_mode: bool,
    edit: impl FnOnce(Option<String>) -> Result<Option<String>, E>,
) -> Result<bool, E>
where
    E: From<LockedEditError>,
{
    let _lock = acquire(path)?;
    let (current, mode) = read_current(path)?;
    let Some(next) = edit(current.clone())? else { return Ok(false) };
    if current.as_deref() == Some(next.as_str()) {
        return Ok(false);
    }
    write(path, next.as_bytes(), mode.filter(|_| keep_mode))?;
    Ok(true)
}

/// Takes the edit lock of `path`, polling while another edit holds it; the
/// returned lock file releases it when dropped.
fn acquire(path: &Path) -> Result<LockFile, LockedEditError> {
    let lock_path = lock_path(path);
    let started = Instant::now();
    loop {
        match LockFile::try_acquire(&lock_path) {
            Ok(Some(held)) => return Ok(held),
            Ok(None) if started.elapsed() < LOCK_PATIENCE => std::thread::sleep(LOCK_POLL),
            Ok(None) => return Err(LockedEditError::Busy { path: path.to_owned() }),
            Err(error) => return Err(LockedEditError::Lock { path: path.to_owned(), source: error.into_io() }),
        }
    }
}

/// The text and permissions of `path`, `(None, None)` when it is absent.
fn read_current(path: &Path) -> Result<(Option<String>, Option<std::fs::Permissions>), LockedEditError> {
    let failed = |source| LockedEditError::Read { path: path.to_owned(), source };
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok((None, None)),
        Err(error) => return Err(failed(error)),
    };
    if !metadata.is_file() {
        return Err(LockedEditError::NotRegular { path: path.to_owned() });
    }
    if metadata.len() > MAX_EDITED_BYTES {
        return Err(LockedEditError::TooLarge { path: path.to_owned(), bytes: metadata.len() });
    }
    let text = std::fs::read_to_string(path).map_err(failed)?;
    Ok((Some(text), Some(metadata.permissions())))
}

fn write(path: &Path, bytes: &[u8], mode: Option<std::fs::Permissions>) -> Result<(), LockedEditError> {
    let failed = |source| LockedEditError::Write { path: path.to_owned(), source };
    std::fs::create_dir_all(cairn_files::parent_dir(path)).map_err(failed)?;
    cairn_files::write_atomic(path, bytes).map_err(|error| failed(error.into_io()))?;
    if let Some(mode) = mode {
        std::fs::set_permissions(path, mode).map_err(failed)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::fs::File;

    use super::*;

    fn append(path: &Path, line: &str) -> Result<bool, LockedEditError> {
        edit_locked(path, |current: Option<String>| Ok(Some(format!("{}{line}\n", current.unwrap_or_default()))))
    }

    #[test]
    fn an_absent_file_reads_as_none_and_is_created() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/a.json");
        let mut seen = None;
        let written = edit_locked(&path, |current: Option<String>| {
            seen = Some(current.clone());
            Ok::<_, LockedEditError>(Some("{}\n".to_owned()))
        })
        .unwrap();
        assert!(written);
        assert_eq!(seen, Some(None));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{}\n");
        assert!(dir.path().join("sub/.a.json.lock").exists());
    }

    #[test]
    fn unchanged_text_and_refusals_write_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        std::fs::write(&path, "same").unwrap();
        assert!(!edit_locked(&path, |current: Option<String>| Ok::<_, LockedEditError>(current)).unwrap());
        assert!(!edit_locked(&path, |_| Ok::<_, LockedEditError>(None)).unwrap());
        let refused: Result<bool, anyhow::Error> = edit_locked(&path, |_| Err(anyhow::anyhow!("no")));
        assert_eq!(refused.unwrap_err().to_string(), "no");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "same");
    }

    #[cfg(unix)]
    #[test]
    fn an_existing_files_permissions_are_kept() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        std::fs::write(&path, "a").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        append(&path, "b").unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o644);
    }

    #[cfg(unix)]
    #[test]
    fn an_owner_only_edit_narrows_the_mode() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        std::fs::write(&path, "a").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        edit_locked_owner_only(&path, |_| Ok::<_, LockedEditError>(Some("b".to_owned()))).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    }

    #[test]
    fn directories_and_oversized_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(append(dir.path(), "x"), Err(LockedEditError::NotRegular { .. })));
        let big = dir.path().join("big");
        File::create(&big).unwrap().set_len(MAX_EDITED_BYTES + 1).unwrap();
        assert!(matches!(append(&big, "x"), Err(LockedEditError::TooLarge { .. })));
    }

    #[test]
    fn concurrent_edits_from_threads_are_all_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        std::thread::scope(|scope| {
            for thread in 0..8 {
                let path = &path;
                scope.spawn(move || {
                    for round in 0..10 {
                        append(path, &format!("{thread}.{round}")).unwrap();
                    }
                });
            }
        });
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 80);
    }
}
