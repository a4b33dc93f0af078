//! The crate's one error type.

use std::path::PathBuf;
use std::time::Duration;

/// Result alias used throughout `cairn-embedder`.
pub type Result<T, E = EmbedError> = std::result::Result<T, E>;

/// Everything that can go wrong while loading a model, embedding text or
/// downloading model files.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmbedError {
    /// The model is not resident yet; a background load has been started (or
    /// is running). Callers degrade to keyword search and retry later.
    #[error("embedding model `{model_id}` is still loading")]
    NotReady {
        /// The model being loaded.
        model_id: String,
    },

    /// Loading the model failed; the next attempt happens after a cooldown.
    #[error("loading embedding model `{model_id}` failed: {message} (next attempt in {retry_in:?})")]
    LoadFailed {
        /// The model that failed to load.
        model_id: String,
        /// Why the load failed.
        message: String,
        /// Time left until a new load may be attempted.
        retry_in: Duration,
    },

    /// No embedding backend has been configured for the shared embedder.
    #[error("no embedding backend is configured")]
    NoBackend,

    /// The caller asked for a candle backend in a build without the `candle` feature.
    #[error("cairn-embedder was built without `candle`; the in-process model backends are unavailable")]
    CandleDisabled,

    /// A model folder is missing a file or declares something unusable.
    #[error("model folder {path}: {reason}")]
    ModelFiles {
        /// The offending folder or file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    /// Input the embedder cannot accept.
    #[error("invalid input: {reason}")]
    InvalidInput {
        /// What is wrong with the input.
        reason: String,
    },

    /// A backend returned vectors of the wrong width.
    #[error("backend `{model_id}` returned a {actual}-dim vector, expected {expected}")]
    DimensionMismatch {
        /// The backend.
        model_id: String,
        /// Declared dimension.
        expected: usize,
        /// Dimension received.
        actual: usize,
    },

    /// Tokenizing the input failed.
    #[error("tokenizing input failed: {message}")]
    Tokenizer {
        /// The tokenizer's message.
        message: String,
    },

    /// Running the model failed.
    #[cfg(feature = "candle")]
    #[error("running the model failed")]
    Inference(#[from] candle_core::Error),

    /// A file system operation failed.
    #[error("{context} {path}")]
    Io {
        /// What this layer was doing.
        context: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// A JSON file could not be parsed.
    #[error("parsing {path}")]
    Json {
        /// The file being parsed.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },

    /// A download URL is neither HTTPS nor a loopback HTTP address.
    #[error("refusing to download from `{url}`: only https:// URLs (or http:// on loopback) are allowed")]
    InsecureUrl {
        /// The refused URL.
        url: String,
    },

    /// The server answered with a non-success HTTP status.
    #[error("downloading {url}: HTTP status {status}")]
    HttpStatus {
        /// The URL requested.
        url: String,
        /// The status received.
        status: u16,
    },

    /// The transfer failed (connection, TLS, reading the body).
    #[error("downloading {url}: {message}")]
    Network {
        /// The URL requested.
        url: String,
        /// What failed.
        message: String,
    },

    /// The downloaded file is shorter than it must be.
    #[error("downloaded {url} is truncated: {bytes} bytes, expected at least {expected}")]
    Truncated {
        /// The URL requested.
        url: String,
        /// Bytes received.
        bytes: u64,
        /// Minimum (or announced) size.
        expected: u64,
    },

    /// A file's sha256 does not match its pin.
    #[error("sha256 mismatch for {what}: expected {expected}, got {actual}")]
    ChecksumMismatch {
        /// The file or URL checked.
        what: String,
        /// The pinned digest.
        expected: String,
        /// The digest computed.
        actual: String,
    },

    /// A downloaded archive could not be read or lacks a pinned member.
    #[error("reading archive {what}: {message}")]
    Archive {
        /// The archive.
        what: String,
        /// What is wrong.
        message: String,
    },

    /// The model is absent and downloads are switched off.
    #[error("model `{model}` is not installed and model downloads are disabled")]
    DownloadSkipped {
        /// The model that would have been downloaded.
        model: String,
    },

    /// Every download attempt failed.
    #[error("downloading model `{model}` failed after {attempts} attempt(s)")]
    DownloadFailed {
        /// The model being downloaded.
        model: String,
        /// How many attempts were made.
        attempts: u32,
        /// The last attempt's error.
        #[source]
        last: std::sync::Arc<EmbedError>,
    },
}

impl EmbedError {
    /// True for the "model not resident yet" result, the one callers should
    /// treat as "retry later" rather than as a failure.
    pub fn is_not_ready(&self) -> bool {
        matches!(self, EmbedError::NotReady { .. })
    }

    pub(crate) fn io(context: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        EmbedError::Io { context, path: path.into(), source }
    }

    pub(crate) fn model_files(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        EmbedError::ModelFiles { path: path.into(), reason: reason.into() }
    }
}
