//! Every number the hooks crate works with, in one place.

use std::time::Duration;

/// How long a hook may run when its entry sets no `timeout_ms` (kiro-cli's default).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest `timeout_ms` an entry may ask for; larger values are clamped.
pub const MAX_TIMEOUT_MS: u64 = 600_000;

/// Default and ceiling for what is kept of one hook stream (stdout or
/// stderr), in UTF-8 bytes, after redaction. A larger `max_output_size` is
/// clamped to this.
pub const MAX_OUTPUT_SIZE: usize = 64 * 1024;

/// Raw bytes kept beyond the output cap so that redaction sees a secret
/// that straddles the cap whole before the text is cut.
pub const REDACTION_LOOKAHEAD: usize = 8 * 1024;

/// Appended to a stream that was cut.
pub const TRUNCATION_MARKER: &str = "\n... [truncated]";

/// Chunk size for draining a hook's pipes.
pub const READ_CHUNK: usize = 8 * 1024;

/// After a hook's process group is gone, how long the runner still waits
/// for its pipes to close (a descendant that left the group may hold
/// them) before it keeps what it has read.
pub const PIPE_DRAIN_GRACE: Duration = Duration::from_secs(2);

/// Longest accepted user-hook matcher, in characters.
pub const MAX_MATCHER_LEN: usize = 200;

/// Allowed characters of a user-hook command (the whole string).
pub const COMMAND_PATTERN: &str = r"^[a-zA-Z0-9/_.-]+$";

/// Allowed characters of a user-hook matcher (the whole string).
pub const MATCHER_PATTERN: &str = r"^[a-zA-Z0-9_.*@/-]+$";

/// At most this many user hooks are kept per event; the rest are dropped.
pub const MAX_USER_HOOKS_PER_EVENT: usize = 32;

/// At most this many user hooks are kept over all events.
pub const MAX_TOTAL_USER_HOOKS: usize = 128;

/// `USER_PROMPT` in a userPromptSubmit hook's environment is cut to this
/// many characters, control characters removed (as kiro-cli does).
pub const USER_PROMPT_ENV_MAX_CHARS: usize = 4096;

/// Compiled-size ceiling for one config-hook message pattern, in bytes.
pub const MESSAGE_PATTERN_SIZE_LIMIT: usize = 1 << 20;

/// Longest accepted config-hook message pattern, in characters.
pub const MAX_MESSAGE_PATTERN_LEN: usize = 1000;
