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
    /// The path is not a regular file (a FIFO, a socket, a device, a
    /// directory): reading it could block forever or never end.
    #[error("{path} is not a regular file (it is a {kind})")]
    NotRegularFile {
        /// The resolved path.
        path: PathBuf,
        /// What it is instead (`FIFO`, `socket`, `directory`, ...).
        kind: &'static str,
    },
    /// The file is larger than the read's cap; nothing was read.
    #[error("{path} is larger than the {limit}-byte limit ({bytes} bytes)")]
    TooLarge {
        /// The resolved path.
        path: PathBuf,
        /// Its size (at least this many bytes).
        bytes: u64,
        /// The cap of this read.
        limit: u64,
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
