//! Errors of the hooks crate.

/// What went wrong while loading hook configuration or running a hook.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HooksError {
    /// A pattern in the `hooks` config section is not usable.
    #[error("invalid pattern {pattern:?} at {key}: {reason}")]
    InvalidPattern {
        /// Where the pattern sits, e.g. `auto_approve_tools[2]` or `auto_replies["^hi"]`.
        key: String,
        /// The pattern as written.
        pattern: String,
        /// Why it was refused.
        reason: String,
    },
    /// A value in the `hooks` config section has the wrong shape.
    #[error("invalid hooks config at {key}: {reason}")]
    InvalidConfig {
        /// Where the value sits.
        key: String,
        /// What was expected.
        reason: String,
    },
    /// A bundled hook set is malformed. Bundled hooks ship with the host,
    /// so they are refused as a whole rather than skipped entry by entry.
    #[error("invalid bundled hooks at {key}: {reason}")]
    InvalidBundled {
        /// Where the bad value sits, e.g. `preToolUse[0].matcher`.
        key: String,
        /// What was wrong.
        reason: String,
    },
    /// A hook matcher cannot be understood.
    #[error("invalid hook matcher {matcher:?}: {reason}")]
    InvalidMatcher {
        /// The matcher as written.
        matcher: String,
        /// Why it was refused.
        reason: String,
    },
    /// An event name is not one of the five hook events.
    #[error("unknown hook event {name:?} (expected agentSpawn, userPromptSubmit, preToolUse, postToolUse or stop)")]
    UnknownEvent {
        /// The name as given.
        name: String,
    },
    /// Decoding JSON input failed.
    #[error("parsing {what}")]
    Json {
        /// What was being parsed.
        what: &'static str,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },
}

/// Result alias for this crate.
pub type Result<T, E = HooksError> = std::result::Result<T, E>;
