//! The one error type of this crate.

use std::path::{Path, PathBuf};

/// A file operation that failed: what was being done, to which path.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FilesError {
    /// An I/O call failed.
    #[error("{operation} {}", path.display())]
    Io {
        /// What was being done ("creating a temporary file in", "syncing", …).
        operation: &'static str,
        /// The file or directory involved: the target, never the temporary name.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl FilesError {
    pub(crate) fn io(operation: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.to_owned();
        move |source| FilesError::Io { operation, path, source }
    }

    /// What was being done when the call failed.
    pub fn operation(&self) -> &'static str {
        match self {
            FilesError::Io { operation, .. } => operation,
        }
    }

    /// The file or directory involved.
    pub fn path(&self) -> &Path {
        match self {
            FilesError::Io { path, .. } => path,
        }
    }

    /// The operation, the path and the underlying I/O error, for a caller
    /// that reports them in its own error type.
    pub fn into_parts(self) -> (&'static str, PathBuf, std::io::Error) {
        match self {
            FilesError::Io { operation, path, source } => (operation, path, source),
        }
    }

    /// The underlying I/O error.
    pub fn into_io(self) -> std::io::Error {
        self.into_parts().2
    }
}

/// `Result` with [`FilesError`].
pub type Result<T, E = FilesError> = std::result::Result<T, E>;
