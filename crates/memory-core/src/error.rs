//! The crate's error type and the typed reasons a write is refused.

use std::path::PathBuf;

/// Everything that can go wrong in `cairn-memory-core`.
///
/// A write the rules refuse is [`MemoryError::Rejected`], carrying a
/// [`Rejected`] reason the caller can show; every other variant is a fault
/// of the store itself (the storage backend, the file system, a corrupt row).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    /// The write broke one of the memory rules; nothing was stored.
    #[error("write refused: {0}")]
    Rejected(#[from] Rejected),
    /// The storage backend failed; [`StorageError::kind`] tells the cases
    /// a caller may act on (busy, damaged, full) apart.
    #[error("memory database error while {operation}")]
    Storage {
        /// What the store was doing.
        operation: &'static str,
        /// The backend's error.
        #[source]
        source: StorageError,
    },
    /// `memory.db` failed its integrity check at open: reads that still
    /// work are served, writes are refused until it is repaired.
    #[error(
        "memory.db at {path} is damaged ({problem}); writes are refused. Stop `cairn serve` and run `cairn memory repair` to rebuild it (the damaged file is kept)"
    )]
    Damaged {
        /// The database file.
        path: PathBuf,
        /// The first problem the check reported.
        problem: String,
    },
    /// `memory.db` is a zero-byte file while other state files of the home
    /// exist: the database was lost, and starting an empty one would
    /// silently drop the memory those files refer to.
    #[error(
        "memory.db at {path} is empty (0 bytes) but {beside} exist beside it: the database was lost or truncated. Restore it from a backup, or run `cairn memory repair --force` to start a new empty store"
    )]
    EmptyDatabase {
        /// The database file.
        path: PathBuf,
        /// The state files found beside it.
        beside: String,
    },
    /// A file or directory could not be read or written.
    #[error("I/O error while {operation} {path}")]
    Io {
        /// What the store was doing.
        operation: &'static str,
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The database was written by a newer Cairn with a schema this build does not know.
    #[error("memory.db has schema version {found}, this build understands up to {supported}")]
    SchemaTooNew {
        /// `PRAGMA user_version` of the file.
        found: i64,
        /// The newest schema this build can migrate to.
        supported: i64,
    },
    /// A stored row could not be decoded (the file was edited by hand or is damaged).
    #[error("corrupt row in {table}: {reason}")]
    CorruptRow {
        /// Table holding the row.
        table: &'static str,
        /// What was wrong with it.
        reason: String,
    },
    /// A configuration value is outside its accepted range.
    #[error("invalid memory configuration: {0}")]
    InvalidConfig(String),
    /// Calendar arithmetic left the supported date range.
    #[error("date error while {operation}")]
    Date {
        /// What the store was doing.
        operation: &'static str,
        /// The underlying error.
        #[source]
        source: jiff::Error,
    },
    /// The vector index refused an operation (a wrong-sized or non-finite vector).
    #[error("vector index error while {operation}")]
    Index {
        /// What the store was doing.
        operation: &'static str,
        /// The underlying error.
        #[source]
        source: cairn_memory_vector::VectorError,
    },
    /// The embedder failed while re-embedding or backfilling.
    #[error("embedding failed while {operation}: {reason}")]
    Embedding {
        /// What the store was doing.
        operation: &'static str,
        /// The embedder's message.
        reason: String,
    },
    /// The operation exists for one storage backend only (a SQLite file's
    /// integrity check, say) and this store is on another.
    #[error("{operation} is not available on the {backend} backend")]
    Unsupported {
        /// What was asked.
        operation: &'static str,
        /// The store's backend.
        backend: &'static str,
    },
    /// A model swap is already running; only one may run at a time.
    #[error("an embedding model swap is already running")]
    ReembedInProgress,
    /// The model behind consolidation failed to answer.
    #[error("the summarizer failed: {source}")]
    Summarizer {
        /// The summarizer's error.
        #[source]
        source: SummarizerError,
    },
    /// An import document is not one this build can read.
    #[error("cannot import: {0}")]
    InvalidImport(String),
    /// An exact restore writes into an empty store and home only; this
    /// one already holds what the message names. Nothing was written.
    #[error("cannot restore: the home already holds {0}; a restore needs an empty store (a merge import does not)")]
    RestoreTargetNotEmpty(String),
    /// The model's consolidation reply has no usable JSON object; nothing was written.
    #[error("consolidation reply refused: {reason}")]
    InvalidReply {
        /// What was wrong with it.
        reason: String,
    },
    /// Another consolidation run holds the session or moved its marker
    /// meanwhile; nothing was recorded for this run.
    #[error("session {session_key:?} is being consolidated by another run")]
    SessionBusy {
        /// The session.
        session_key: String,
    },
}

/// Result alias of the crate.
pub type Result<T, E = MemoryError> = std::result::Result<T, E>;

impl MemoryError {
    /// A failed shared file helper, as the I/O error it wraps.
    pub(crate) fn files(error: cairn_files::FilesError) -> MemoryError {
        let (operation, path, source) = error.into_parts();
        MemoryError::Io { operation, path, source }
    }

    /// The kind of backend failure, when this error is one.
    pub fn storage_kind(&self) -> Option<StorageErrorKind> {
        match self {
            MemoryError::Storage { source, .. } => Some(source.kind()),
            _ => None,
        }
    }

    /// The refusal of a write to `path`, damaged as `problems` report.
    pub(crate) fn damaged(path: &std::path::Path, problems: &[String]) -> MemoryError {
        MemoryError::Damaged { path: path.to_owned(), problem: problems.first().cloned().unwrap_or_default() }
    }

    /// True when the store is damaged or lost and must be repaired first.
    pub fn is_damaged_store(&self) -> bool {
        matches!(self, MemoryError::Damaged { .. } | MemoryError::EmptyDatabase { .. })
    }

    /// The refusal reason, when this error is a refused write.
    pub fn rejection(&self) -> Option<&Rejected> {
        match self {
            MemoryError::Rejected(rejected) => Some(rejected),
            _ => None,
        }
    }
}

/// A failure of the storage backend under the store, kept opaque so the
/// public API does not depend on one database engine.
///
/// [`kind`](Self::kind) sorts it into the cases callers act on; the
/// backend's own error is the [`source`](std::error::Error::source).
#[derive(Debug)]
pub struct StorageError {
    kind: StorageErrorKind,
    source: Box<dyn std::error::Error + Send + Sync + 'static>,
}

/// What kind of failure a [`StorageError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StorageErrorKind {
    /// Another writer holds the lock and the busy timeout ran out; the
    /// operation changed nothing and may be retried.
    Busy,
    /// The database file is damaged or is not a database.
    Corrupt,
    /// The operating system failed to read or write the database file.
    Io,
    /// The disk or the database is full.
    Full,
    /// A uniqueness, foreign-key or check constraint refused a row.
    Constraint,
    /// The operation was interrupted before it finished.
    Interrupted,
    /// Any other backend failure.
    Other,
}

impl StorageErrorKind {
    fn describe(self) -> &'static str {
        match self {
            StorageErrorKind::Busy => "the database is locked by another writer",
            StorageErrorKind::Corrupt => "the database file is damaged",
            StorageErrorKind::Io => "the database file could not be read or written",
            StorageErrorKind::Full => "the database or disk is full",
            StorageErrorKind::Constraint => "a database constraint refused the row",
            StorageErrorKind::Interrupted => "the database operation was interrupted",
            StorageErrorKind::Other => "the database failed",
        }
    }
}

impl StorageError {
    /// Wraps a backend's error as a failure of the given kind.
    pub fn new(kind: StorageErrorKind, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self { kind, source: Box::new(source) }
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> StorageErrorKind {
        self.kind
    }
}

impl std::fmt::Display for StorageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.kind.describe())
    }
}

impl std::error::Error for StorageError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.source)
    }
}

/// Why a write was refused. Each refusal is also recorded in the audit trail.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Rejected {
    /// The key does not match `^[a-z][a-z0-9_.]*[a-z0-9]$`.
    #[error("key {key:?} must match ^[a-z][a-z0-9_.]*[a-z0-9]$")]
    InvalidKey {
        /// The key (cut to 100 characters).
        key: String,
    },
    /// The key is longer than 100 characters.
    #[error("key is {chars} characters long, the limit is {max}")]
    KeyTooLong {
        /// Length of the key.
        chars: usize,
        /// The limit.
        max: usize,
    },
    /// The key does not start with an allowed prefix.
    #[error("key {key:?} does not start with an allowed prefix ({allowed})")]
    PrefixNotAllowed {
        /// The key.
        key: String,
        /// The allowed prefixes, comma separated.
        allowed: String,
    },
    /// The value is not valid JSON.
    #[error("value is not valid JSON: {reason}")]
    InvalidJson {
        /// The parser's message.
        reason: String,
    },
    /// The value's JSON is larger than 4,096 bytes.
    #[error("value is {bytes} bytes of JSON, the limit is {max}")]
    ValueTooLarge {
        /// Size of the compact JSON.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// The confidence is not a number in `[0, 1]`.
    #[error("confidence {confidence} is not a number between 0 and 1")]
    InvalidConfidence {
        /// The offending confidence.
        confidence: f64,
    },
    /// An automated write's confidence is under the 0.8 threshold.
    #[error("confidence {confidence} is below the {threshold} threshold for automated writes")]
    LowConfidence {
        /// The write's confidence.
        confidence: f64,
        /// The threshold.
        threshold: f64,
    },
    /// The value carries injected instructions.
    #[error("value looks like injected instructions (rule {rule})")]
    Injection {
        /// Name of the guard rule that fired.
        rule: &'static str,
    },
    /// The source name is empty or malformed.
    #[error("source {0:?} must match ^[a-z][a-z0-9_]{{0,31}}$")]
    InvalidSource(String),
    /// A lesson's rule is empty.
    #[error("a lesson needs a non-empty rule")]
    EmptyLesson,
    /// A lesson category other than `tool`, `preference`, `knowledge`.
    #[error("lesson category {0:?} is not one of tool, preference, knowledge")]
    InvalidCategory(String),
    /// A history entry has no text.
    #[error("a history entry needs non-empty text")]
    EmptyEntry,
    /// An episodic text is shorter than 10 or longer than 2,000 characters.
    #[error("episodic text is {chars} characters long, it must be {min} to {max}")]
    TextLength {
        /// Length of the trimmed text.
        chars: usize,
        /// Shortest accepted.
        min: usize,
        /// Longest accepted.
        max: usize,
    },
    /// An importance that is not a number.
    #[error("importance {0} is not a number")]
    InvalidImportance(f64),
    /// A `source_ref` that is too long or holds control characters.
    #[error("source_ref must be at most {max} characters without control characters")]
    InvalidSourceRef {
        /// The limit.
        max: usize,
    },
    /// A session key that is empty, too long or holds control characters.
    #[error("a session key must be 1 to {max} characters without control characters (got {chars})")]
    InvalidSessionKey {
        /// Its length.
        chars: usize,
        /// The limit.
        max: usize,
    },
    /// A `created_at` before 1970 or more than a day in the future.
    #[error("created_at {created_at} ms is outside 1970-01-01 to {latest} ms (a day from now)")]
    CreatedAtOutOfRange {
        /// The offending time, in milliseconds since the Unix epoch.
        created_at: i64,
        /// The latest accepted time.
        latest: i64,
    },
    /// A change of a row whose `version` is already at the highest a row
    /// may hold: refused rather than overflowing the column.
    #[error("{key} is at version {version}, the highest a row may hold is {max}; `cairn memory repair` resets it")]
    VersionExhausted {
        /// The key.
        key: String,
        /// Its stored version.
        version: i64,
        /// The highest version a row may hold.
        max: i64,
    },
    /// The text would bring back something a forget removed.
    #[error("this was forgotten (a {kind}) and is not stored again")]
    Forgotten {
        /// What was forgotten: `fact`, `lesson` or `episode`.
        kind: String,
    },
    /// A forget that names nothing to forget.
    #[error("a forget needs ids, keys, a query, a date range or one project")]
    NothingSelected,
    /// A scope name no scope can have.
    #[error("{0:?} is not a scope (global, or a project name)")]
    InvalidScope(String),
    /// A consolidated item came without evidence (a message range and a quote).
    #[error("a consolidated item needs evidence: the message range it came from and a verbatim quote")]
    MissingEvidence,
    /// The evidence of an item is malformed: an empty or too long quote, a
    /// range that is reversed or outside the consolidated messages.
    #[error("invalid evidence: {reason}")]
    InvalidEvidence {
        /// What was wrong.
        reason: String,
    },
    /// The quote of an item is not in the messages of its range (compared
    /// with whitespace and case folded).
    #[error("the quote is not in messages {from}..={to} of the transcript")]
    QuoteNotFound {
        /// First message of the range.
        from: u64,
        /// Last message of the range.
        to: u64,
    },
    /// The statement was abandoned later in the same transcript (the model
    /// said so, or a later message retracts it): a dead end, not a fact.
    #[error("the transcript later abandons this statement: {reason}")]
    UnresolvedHypothesis {
        /// Which rule decided it.
        reason: String,
    },
    /// No consolidation run has this id.
    #[error("there is no changeset {id}")]
    UnknownChangeset {
        /// The id asked for.
        id: i64,
    },
    /// A row number the changeset does not have.
    #[error("row {row} is out of range: the changeset has {rows} rows (numbered from 1)")]
    RowOutOfRange {
        /// The row asked for.
        row: usize,
        /// How many rows there are.
        rows: usize,
    },
    /// A row already approved or rejected.
    #[error("row {row} was already decided")]
    RowDecided {
        /// The row asked for.
        row: usize,
    },
    /// A changeset past its time to live.
    #[error("changeset {id} expired unreviewed; nothing of it can be written")]
    ChangesetExpired {
        /// Its id.
        id: i64,
    },
    /// A changeset (or run) no longer under review.
    #[error("changeset {id} is {state}, not pending")]
    ChangesetClosed {
        /// Its id.
        id: i64,
        /// Where it stands.
        state: String,
    },
    /// A revert found a row or file changed since the run wrote it.
    #[error("{what} changed after the run wrote it; nothing was reverted")]
    ChangedSince {
        /// The key or file.
        what: String,
    },
    /// No applied run to revert, or a count of 0.
    #[error("there is no consolidation run to revert (the count must be at least 1)")]
    NothingToRevert,
}

impl Rejected {
    /// Stable short name of the reason, used in audit rows and JSON output.
    pub fn code(&self) -> &'static str {
        match self {
            Rejected::InvalidKey { .. } => "invalid_key",
            Rejected::KeyTooLong { .. } => "key_too_long",
            Rejected::PrefixNotAllowed { .. } => "prefix_not_allowed",
            Rejected::InvalidJson { .. } => "invalid_json",
            Rejected::ValueTooLarge { .. } => "value_too_large",
            Rejected::InvalidConfidence { .. } => "invalid_confidence",
            Rejected::LowConfidence { .. } => "low_confidence",
            Rejected::Injection { .. } => "injection",
            Rejected::InvalidSource(_) => "invalid_source",
            Rejected::EmptyLesson => "empty_lesson",
            Rejected::InvalidCategory(_) => "invalid_category",
            Rejected::EmptyEntry => "empty_entry",
            Rejected::TextLength { .. } => "text_length",
            Rejected::InvalidImportance(_) => "invalid_importance",
            Rejected::InvalidSourceRef { .. } => "invalid_source_ref",
            Rejected::InvalidSessionKey { .. } => "invalid_session_key",
            Rejected::CreatedAtOutOfRange { .. } => "created_at_out_of_range",
            Rejected::VersionExhausted { .. } => "version_exhausted",
            Rejected::Forgotten { .. } => "forgotten",
            Rejected::NothingSelected => "nothing_selected",
            Rejected::InvalidScope(_) => "invalid_scope",
            Rejected::MissingEvidence => "missing_evidence",
            Rejected::InvalidEvidence { .. } => "invalid_evidence",
            Rejected::QuoteNotFound { .. } => "quote_not_found",
            Rejected::UnresolvedHypothesis { .. } => "unresolved_hypothesis",
            Rejected::UnknownChangeset { .. } => "unknown_changeset",
            Rejected::RowOutOfRange { .. } => "row_out_of_range",
            Rejected::RowDecided { .. } => "row_decided",
            Rejected::ChangesetExpired { .. } => "changeset_expired",
            Rejected::ChangesetClosed { .. } => "changeset_closed",
            Rejected::ChangedSince { .. } => "changed_since",
            Rejected::NothingToRevert => "nothing_to_revert",
        }
    }
}

/// A [`Summarizer`](crate::Summarizer) failure, as text the implementation chose.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SummarizerError(pub String);

/// A write being refused, as its audit row records it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RefusedWrite<'a> {
    /// The layer's audit type (`semantic`, `project`, `episodic`, `lesson`).
    pub(crate) memory_type: &'a str,
    /// The key written, or the layer's name for rows without one.
    pub(crate) key: &'a str,
    /// What was sent (cut to a snippet in the audit row).
    pub(crate) attempted: &'a str,
    /// The writer.
    pub(crate) source: &'a str,
    /// The confidence sent, if the layer has one.
    pub(crate) confidence: Option<f64>,
}
