//! The crate's error type.

use std::path::PathBuf;

/// Everything that can go wrong in `cairn-memory-vector`.
///
/// Each variant says what the index was doing; an underlying cause, when
/// there is one, is kept as the `source`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VectorError {
    /// A vector (to add or to search with) has the wrong number of components.
    #[error("vector has {actual} dimensions, the index holds {expected}-dimensional vectors")]
    DimensionMismatch {
        /// Dimension of the index.
        expected: usize,
        /// Dimension of the vector that was passed in.
        actual: usize,
    },
    /// A vector contains NaN or an infinity.
    #[error("vector component {index} is not finite ({value})")]
    NonFinite {
        /// Position of the first offending component.
        index: usize,
        /// The offending value.
        value: f32,
    },
    /// A vector has zero length and so no direction to compare by cosine.
    #[error("vector has zero length and cannot be normalised")]
    ZeroVector,
    /// An index was asked to hold zero-dimensional vectors.
    #[error("an index needs a dimension of at least 1")]
    ZeroDimension,
    /// `add` was called with an id the index already holds.
    #[error("id {0} is already in the index")]
    DuplicateId(u64),
    /// `remove` was called with an id the index does not hold.
    #[error("id {0} is not in the index")]
    UnknownId(u64),
    /// A vector file's rows were written out of ascending id order.
    #[error("vector file rows must come in ascending id order: {id} came after {after}")]
    OutOfOrder {
        /// The row pushed.
        id: u64,
        /// The row pushed before it.
        after: u64,
    },
    /// A configuration value is outside its accepted range.
    #[error("invalid index configuration: {0}")]
    InvalidConfig(String),
    /// The HNSW graph library failed while inserting or building; the index
    /// was left as it was before the call.
    #[error("HNSW graph operation failed while {operation}: {message}")]
    Graph {
        /// What the index was doing.
        operation: &'static str,
        /// The library's panic or error message.
        message: String,
    },
    /// Reading or writing a snapshot failed at the file-system level.
    #[error("I/O error while {operation} {path}")]
    Io {
        /// What the index was doing.
        operation: &'static str,
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A snapshot file is damaged, truncated or of another format version.
    #[error("snapshot {path} is unreadable: {reason}")]
    CorruptSnapshot {
        /// The snapshot file.
        path: PathBuf,
        /// What was wrong with it.
        reason: String,
    },
    /// A snapshot is intact but describes other rows or another embedding
    /// space than the caller expects; the caller should rebuild.
    #[error("snapshot {path} does not match the caller's rows: {reason}")]
    SnapshotMismatch {
        /// The snapshot file.
        path: PathBuf,
        /// Which header field disagreed.
        reason: String,
    },
}

/// `Result` with this crate's [`VectorError`].
pub type Result<T, E = VectorError> = std::result::Result<T, E>;

impl VectorError {
    pub(crate) fn io(operation: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        VectorError::Io { operation, path: path.into(), source }
    }

    pub(crate) fn corrupt(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        VectorError::CorruptSnapshot { path: path.into(), reason: reason.into() }
    }

    pub(crate) fn mismatch(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        VectorError::SnapshotMismatch { path: path.into(), reason: reason.into() }
    }
}
