//! Exclusive lock files.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

use crate::error::{FilesError, Result};

/// An exclusive advisory lock held on a lock file (`flock` on Unix,
/// `LockFileEx` on Windows). Dropping it closes the file, which releases
/// the lock; so does the process ending. The file itself stays, so every
/// process locks the same inode.
#[derive(Debug)]
pub struct LockFile {
    file: File,
    path: PathBuf,
}

impl LockFile {
    /// Opens `path` (creating it and its directory if needed, owner-only on
    /// Unix) and waits until the lock is held.
    pub fn acquire(path: &Path) -> Result<Self> {
        let file = open(path)?;
        file.lock().map_err(FilesError::io("locking", path))?;
        Ok(LockFile { file, path: path.to_owned() })
    }

    /// [`acquire`](Self::acquire) without waiting: `Ok(None)` when another
    /// handle holds the lock.
    pub fn try_acquire(path: &Path) -> Result<Option<Self>> {
        let file = open(path)?;
        match file.try_lock() {
            Ok(()) => Ok(Some(LockFile { file, path: path.to_owned() })),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(source)) => Err(FilesError::io("locking", path)(source)),
        }
    }

    /// The lock file, for a holder that records something in it.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn open(path: &Path) -> Result<File> {
    if let Some(parent) = path.parent().filter(|parent| !parent.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(FilesError::io("creating", parent))?;
    }
    let mut options = OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path).map_err(FilesError::io("opening", path))
}
