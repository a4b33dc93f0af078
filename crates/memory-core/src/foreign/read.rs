//! Guarded access to another agent's files: only regular, non-symlink
//! files up to [`MAX_FOREIGN_FILE_BYTES`], read through
//! [`cairn_guard::safe_read_file`]; directories listed with a bound on the
//! entries consumed.
//!
//! One rule for every source: no symbolic link is followed anywhere between
//! a source root (`~/.claude`, a project, `~/.hermes`, an OpenClaw
//! workspace) and the file read, the file itself included. The root is the
//! user's own choice and may be a link. The components are checked before
//! and again after a read; a link that appears and disappears again between
//! the two checks is not seen (std has no `openat` walk).

use std::fs::Metadata;
use std::path::{Path, PathBuf};

use crate::constants::MAX_FOREIGN_FILE_BYTES;

/// Why a foreign file was not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The path is a symbolic link.
    Symlink,
    /// A directory between the source root and the path is a symbolic
    /// link (the field): nothing under it is read.
    SymlinkedDirectory(PathBuf),
    /// The path is not a plain path below its source root.
    OutsideRoot,
    /// The path is a directory, a device, a socket or a FIFO.
    NotRegular,
    /// The file is larger than the cap.
    TooLarge(u64),
    /// The guard classifies the path as sensitive.
    Sensitive(String),
    /// Not UTF-8 text.
    NotUtf8,
    /// The file changed between the check and the read.
    Changed,
    /// The operating system refused.
    Unreadable(String),
}

impl Refusal {
    pub(crate) fn code(&self) -> &'static str {
        match self {
            Refusal::Symlink | Refusal::SymlinkedDirectory(_) => "symlink",
            Refusal::OutsideRoot => "outside_root",
            Refusal::NotRegular => "not_regular_file",
            Refusal::TooLarge(_) => "file_too_large",
            Refusal::Sensitive(_) => "sensitive_path",
            Refusal::NotUtf8 => "not_utf8",
            Refusal::Changed => "changed_during_read",
            Refusal::Unreadable(_) => "read_failed",
        }
    }

    pub(crate) fn message(&self) -> String {
        match self {
            Refusal::Symlink => "symbolic links are not followed; nothing was read".to_owned(),
            Refusal::SymlinkedDirectory(_) => {
                "a symbolically linked directory; links are not followed, nothing under it was read".to_owned()
            }
            Refusal::OutsideRoot => "not a plain path below its source root; nothing was read".to_owned(),
            Refusal::NotRegular => "not a regular file".to_owned(),
            Refusal::TooLarge(bytes) => format!("{bytes} bytes, more than the {MAX_FOREIGN_FILE_BYTES} bytes read"),
            Refusal::Sensitive(reason) => format!("the guard refuses this path ({reason})"),
            Refusal::NotUtf8 => "not UTF-8 text".to_owned(),
            Refusal::Changed => "the file changed while it was read".to_owned(),
            Refusal::Unreadable(error) => error.clone(),
        }
    }
}

fn identity(metadata: &Metadata) -> (u64, u64) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        (metadata.dev(), metadata.ino())
    }
    #[cfg(not(unix))]
    {
        (metadata.len(), 0)
    }
}

/// Checks the directories between `root` and `path` (both excluded):
/// [`Refusal::SymlinkedDirectory`] names the first one that is a symbolic
/// link. A component that does not exist ends the walk (the caller's own
/// read or listing reports a missing path).
pub(crate) fn check_below_root(root: &Path, path: &Path) -> Result<(), Refusal> {
    let relative = path.strip_prefix(root).map_err(|_| Refusal::OutsideRoot)?;
    let mut components = relative.components().peekable();
    let mut current = root.to_path_buf();
    while let Some(component) = components.next() {
        let std::path::Component::Normal(name) = component else { return Err(Refusal::OutsideRoot) };
        if components.peek().is_none() {
            break;
        }
        current.push(name);
        match std::fs::symlink_metadata(&current) {
            Ok(metadata) if metadata.file_type().is_symlink() => {
                return Err(Refusal::SymlinkedDirectory(current));
            }
            Ok(_) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(error) => return Err(Refusal::Unreadable(error.to_string())),
        }
    }
    Ok(())
}

/// Reads a foreign text file below `root`: a regular file (not a symlink,
/// no symlinked directory between it and `root`) of at most
/// [`MAX_FOREIGN_FILE_BYTES`], through the guard's read, which is still
/// the same file afterwards.
pub(crate) fn read_text(root: &Path, path: &Path) -> Result<String, Refusal> {
    check_below_root(root, path)?;
    let before = std::fs::symlink_metadata(path).map_err(|error| Refusal::Unreadable(error.to_string()))?;
    if before.file_type().is_symlink() {
        return Err(Refusal::Symlink);
    }
    if !before.is_file() {
        return Err(Refusal::NotRegular);
    }
    if before.len() > MAX_FOREIGN_FILE_BYTES {
        return Err(Refusal::TooLarge(before.len()));
    }
    let text = cairn_guard::safe_read_file(path).map_err(|error| match error {
        cairn_guard::GuardError::SensitivePath { reason, .. } => Refusal::Sensitive(reason.to_owned()),
        cairn_guard::GuardError::NotUtf8 { .. } => Refusal::NotUtf8,
        other => Refusal::Unreadable(other.to_string()),
    })?;
    if text.len() as u64 > MAX_FOREIGN_FILE_BYTES {
        return Err(Refusal::TooLarge(text.len() as u64));
    }
    let after = std::fs::symlink_metadata(path).map_err(|_| Refusal::Changed)?;
    if after.file_type().is_symlink() || identity(&after) != identity(&before) {
        return Err(Refusal::Changed);
    }
    if check_below_root(root, path).is_err() {
        return Err(Refusal::Changed);
    }
    Ok(text)
}

/// What a directory entry is, without following links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EntryKind {
    File,
    Dir,
    Symlink,
    Other,
}

/// One directory entry.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) name: String,
    pub(crate) path: PathBuf,
    pub(crate) kind: EntryKind,
}

/// What a path below `root` is, without following links; `None` when it
/// does not exist. A symlinked directory between `root` and `path` is
/// refused before the path is looked at.
pub(crate) fn kind_of(root: &Path, path: &Path) -> Result<Option<EntryKind>, Refusal> {
    check_below_root(root, path)?;
    match std::fs::symlink_metadata(path) {
        Ok(metadata) => Ok(Some(kind(&metadata))),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(Refusal::Unreadable(error.to_string())),
    }
}

fn kind(metadata: &Metadata) -> EntryKind {
    let file_type = metadata.file_type();
    if file_type.is_symlink() {
        EntryKind::Symlink
    } else if file_type.is_dir() {
        EntryKind::Dir
    } else if file_type.is_file() {
        EntryKind::File
    } else {
        EntryKind::Other
    }
}

/// Lists `dir` without following links, consuming at most `max_consumed`
/// entries (the caller reads one more than it scans to see an overflow);
/// entries with UTF-8 names, sorted by name.
pub(crate) fn list_dir(dir: &Path, max_consumed: usize) -> std::io::Result<Vec<Entry>> {
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir)?.take(max_consumed) {
        let entry = entry?;
        let Ok(name) = entry.file_name().into_string() else { continue };
        let kind = entry.metadata().map(|metadata| kind(&metadata)).unwrap_or(EntryKind::Other);
        entries.push(Entry { name, path: entry.path(), kind });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(entries)
}
