//! Replacing a file whole: temporary file, sync, rename, directory sync.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

use crate::error::{FilesError, Result};

/// The longest part of the target's name a temporary file's name repeats,
/// so the temporary name stays within a file system's name limit.
const NAME_IN_TEMPORARY_MAX_BYTES: usize = 100;

/// Replaces `path` with `bytes`: a temporary file in the same directory,
/// synced, renamed over `path`, then the directory synced. Readers see the
/// old file or the new one, never a part; on any failure the old file is
/// untouched and the temporary file is removed. The new file is
/// owner-only (`0o600`) on Unix. The directory must exist.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut file = AtomicFile::create(path)?;
    file.write_all(bytes).map_err(FilesError::io("writing", path))?;
    file.commit()
}

/// A file being written under a temporary name beside its target, which
/// [`commit`](Self::commit) moves into place. Dropped uncommitted, it
/// removes the temporary file and leaves the target as it was.
#[derive(Debug)]
pub struct AtomicFile {
    temp: NamedTempFile,
    path: PathBuf,
}

impl AtomicFile {
    /// Creates the temporary file for `path` in `path`'s directory
    /// (owner-only on Unix). The directory must exist.
    pub fn create(path: &Path) -> Result<Self> {
        let dir = parent_dir(path);
        let temp = tempfile::Builder::new()
            .prefix(&temporary_prefix(path))
            .suffix(".tmp")
            .tempfile_in(dir)
            .map_err(FilesError::io("creating a temporary file in", dir))?;
        Ok(AtomicFile { temp, path: path.to_owned() })
    }

    /// The target this file replaces when committed.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The temporary file, for reading back what was written.
    pub fn as_file(&self) -> &File {
        self.temp.as_file()
    }

    /// The temporary file, for writers that take a `File`.
    pub fn as_file_mut(&mut self) -> &mut File {
        self.temp.as_file_mut()
    }

    /// Syncs the temporary file, renames it over the target and syncs the
    /// directory. On failure the target is untouched and the temporary file
    /// is removed.
    pub fn commit(self) -> Result<()> {
        let AtomicFile { temp, path } = self;
        temp.as_file().sync_all().map_err(FilesError::io("syncing", &path))?;
        temp.persist(&path).map_err(|error| FilesError::io("renaming a temporary file onto", &path)(error.error))?;
        sync_dir(parent_dir(&path));
        Ok(())
    }

    /// [`commit`](Self::commit), but never replacing: `Ok(false)` when the
    /// target exists (it is left as it is and the temporary file removed).
    pub fn commit_new(self) -> Result<bool> {
        let AtomicFile { temp, path } = self;
        temp.as_file().sync_all().map_err(FilesError::io("syncing", &path))?;
        match temp.persist_noclobber(&path) {
            Ok(_) => {
                sync_dir(parent_dir(&path));
                Ok(true)
            }
            Err(error) if error.error.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(error) => Err(FilesError::io("renaming a temporary file onto", &path)(error.error)),
        }
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.temp.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.temp.write_all(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.temp.flush()
    }
}

/// The directory `path` is in: its parent, or `.` for a bare file name.
pub fn parent_dir(path: &Path) -> &Path {
    path.parent().filter(|parent| !parent.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// Syncs a directory so a rename or a removal in it survives a crash. Best
/// effort: the change itself has happened, and not every platform or file
/// system can sync a directory, so a failure is not reported. Does nothing
/// off Unix.
pub fn sync_dir(dir: &Path) {
    #[cfg(unix)]
    if let Ok(handle) = File::open(dir) {
        let _ = handle.sync_all();
    }
    #[cfg(not(unix))]
    let _ = dir;
}

/// `.<target name>.`, the name cut to a bounded length at a character.
pub(crate) fn temporary_prefix(path: &Path) -> String {
    let name = path.file_name().map(|name| name.to_string_lossy()).unwrap_or_default();
    format!(".{}.", &name[..name.floor_char_boundary(NAME_IN_TEMPORARY_MAX_BYTES)])
}
