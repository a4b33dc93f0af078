//! Errors of the guard crate.

use std::path::PathBuf;

/// What went wrong while guarding a path or reading a file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GuardError {
    /// The path points at a credential store, a kernel interface or another
    /// location no Cairn component may read.
    #[error("refusing to read sensitive path {path}: {reason}")]
    SensitivePath {
        /// The path as resolved (after `~`, `..` and symlinks).
        path: PathBuf,
        /// Which rule classified it as sensitive.
        reason: &'static str,
    },
    /// The path could not be resolved (no home directory for `~`, no
    /// working directory for a relative path).
    #[error("cannot resolve path {path}: {reason}")]
    Unresolvable {
        /// The path as given.
        path: PathBuf,
        /// Why it could not be resolved.
        reason: &'static str,
    },
    /// Reading the file failed.
    #[error("reading {path}")]
    Io {
        /// The resolved path that was read.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid UTF-8 text.
    #[error("{path} is not valid UTF-8")]
    NotUtf8 {
        /// The resolved path that was read.
        path: PathBuf,
    },
}

/// Result alias for this crate.
pub type Result<T, E = GuardError> = std::result::Result<T, E>;
