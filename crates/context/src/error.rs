//! Errors of the context crate.

use std::path::PathBuf;

/// What went wrong while assembling context or keeping channel history.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ContextError {
    /// A channel id cannot name a buffer (it also names a file in observe mode).
    #[error("invalid channel id {id:?}: {reason}")]
    InvalidChannelId {
        /// The id as given (cut to 128 characters).
        id: String,
        /// Which rule it broke.
        reason: &'static str,
    },
    /// An observe-mode file would sit outside the history directory or on a
    /// sensitive path.
    #[error("refusing channel history file {path}: {reason}")]
    UnsafeChannelPath {
        /// The path that was refused.
        path: PathBuf,
        /// Why.
        reason: &'static str,
    },
    /// Reading or writing a file failed.
    #[error("{operation} {path}")]
    Io {
        /// What was being done.
        operation: &'static str,
        /// The file involved.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A memory store failed while a section was read from it.
    #[error("reading {section} from memory")]
    Memory {
        /// The section being read.
        section: &'static str,
        /// The cause.
        #[source]
        source: cairn_memory_core::MemoryError,
    },
    /// An agent spec could not be resolved.
    #[error("resolving agent {name:?}")]
    Agent {
        /// The agent name.
        name: String,
        /// The cause.
        #[source]
        source: cairn_agent_spec::AgentSpecError,
    },
    /// A source or compressor supplied by the host failed.
    #[error("{what} failed: {message}")]
    Source {
        /// Which source.
        what: &'static str,
        /// The host's description of the failure.
        message: String,
    },
}

/// Result alias of the context crate.
pub type Result<T, E = ContextError> = std::result::Result<T, E>;
