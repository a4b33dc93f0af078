//! The plain data types of the public API.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::Rejected;

/// Who or what made a write. Only [`Source::UserExplicit`] bypasses the
/// confidence gate and protects a row from being overwritten.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Source {
    /// The user said it (CLI, dashboard, "remember X").
    UserExplicit,
    /// Extracted by history consolidation.
    Consolidation,
    /// Carried over from Markdown or `lessons.jsonl`.
    Migration,
    /// Extracted after a failed task step.
    TaskRunner,
    /// Restored from an export or another agent.
    Import,
    /// Any other automated writer, by name (`^[a-z][a-z0-9_]{0,31}$`).
    Other(String),
}

impl Source {
    /// The stored name (`user_explicit`, `consolidation`, ...).
    pub fn as_str(&self) -> &str {
        match self {
            Source::UserExplicit => "user_explicit",
            Source::Consolidation => "consolidation",
            Source::Migration => "migration",
            Source::TaskRunner => "task_runner",
            Source::Import => "import",
            Source::Other(name) => name,
        }
    }

    /// True for [`Source::UserExplicit`].
    pub fn is_user_explicit(&self) -> bool {
        matches!(self, Source::UserExplicit)
    }

    pub(crate) fn validate(&self) -> Result<(), Rejected> {
        if let Source::Other(name) = self {
            let valid = !name.is_empty()
                && name.len() <= 32
                && name.as_bytes()[0].is_ascii_lowercase()
                && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
            if !valid {
                return Err(Rejected::InvalidSource(crate::text::cut(name, 64)));
            }
        }
        Ok(())
    }
}

impl FromStr for Source {
    type Err = Rejected;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        let source = match name {
            "user_explicit" => Source::UserExplicit,
            "consolidation" => Source::Consolidation,
            "migration" => Source::Migration,
            "task_runner" => Source::TaskRunner,
            "import" => Source::Import,
            other => Source::Other(other.to_owned()),
        };
        source.validate()?;
        Ok(source)
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Source {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// Where a consolidated row came from: the session, the range of its
/// messages (their `seq`, as the consolidation prompt numbered them, both
/// ends included) and a short verbatim quote of them that consolidation
/// found in the stored transcript before writing. Rows people write
/// directly carry none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// The session the row was consolidated from.
    pub session_key: String,
    /// `seq` of the first message of the range.
    pub from_message: u64,
    /// `seq` of the last message of the range.
    pub to_message: u64,
    /// The quote (at most [`MAX_EVIDENCE_QUOTE_CHARS`](crate::constants::MAX_EVIDENCE_QUOTE_CHARS)
    /// characters), redacted like every stored text.
    pub quote: String,
}

/// A live semantic entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SemanticEntry {
    /// Where the entry belongs.
    pub scope: crate::scope::Scope,
    /// The key, e.g. `pref.editor`.
    pub key: String,
    /// The value.
    pub value: serde_json::Value,
    /// Confidence of the write that set the value.
    pub confidence: f64,
    /// Source of the write that set the value.
    pub source: Source,
    /// When the key was first created (Unix milliseconds).
    pub created_at: i64,
    /// When the value last changed (Unix milliseconds).
    pub updated_at: i64,
    /// Number of accepted changes (creates, updates, deletes) the key has seen.
    pub version: i64,
    /// True when a vector in the current embedding space is stored.
    pub has_vector: bool,
    /// Where consolidation found the value; `None` for rows written
    /// otherwise (or before evidence was kept).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Evidence>,
}

/// What an accepted or skipped semantic write did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
#[non_exhaustive]
pub enum WriteOutcome {
    /// The key had no live value; it has one now.
    Created {
        /// The key written.
        key: String,
    },
    /// The key's value (or its confidence/source) was replaced.
    Updated {
        /// The key written.
        key: String,
    },
    /// The same value, confidence and source were already stored; nothing changed.
    Unchanged {
        /// The key.
        key: String,
    },
    /// The conflict ladder (or lesson dedup) kept the existing value; a
    /// `conflict_skip` event records why.
    Skipped {
        /// The key that kept its value.
        key: String,
        /// Why.
        reason: SkipReason,
    },
}

impl WriteOutcome {
    /// The key the outcome is about.
    pub fn key(&self) -> &str {
        match self {
            WriteOutcome::Created { key }
            | WriteOutcome::Updated { key }
            | WriteOutcome::Unchanged { key }
            | WriteOutcome::Skipped { key, .. } => key,
        }
    }

    /// True for a create or an update.
    pub fn is_change(&self) -> bool {
        matches!(self, WriteOutcome::Created { .. } | WriteOutcome::Updated { .. })
    }
}

/// Why the conflict ladder kept an existing value.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
#[non_exhaustive]
pub enum SkipReason {
    /// The stored value is user-explicit and the write is not.
    ProtectedUserExplicit,
    /// The stored value's confidence is more than 0.1 higher.
    LowerConfidence {
        /// Confidence of the stored value.
        existing: f64,
        /// Confidence of the refused write.
        attempted: f64,
    },
    /// An existing lesson already says this (substring or embedding match, and it is not shorter).
    DuplicateLesson {
        /// The lesson that was kept.
        existing_key: String,
    },
    /// An import met stored memory under this key (live or deleted) or a
    /// lesson it would replace: existing memory wins, an import never
    /// replaces or deletes it.
    ExistingWins {
        /// The stored entry that was kept.
        existing_key: String,
    },
}

impl SkipReason {
    /// Stable short name used in audit rows.
    pub fn code(&self) -> &'static str {
        match self {
            SkipReason::ProtectedUserExplicit => "protected_user_explicit",
            SkipReason::LowerConfidence { .. } => "lower_confidence",
            SkipReason::DuplicateLesson { .. } => "duplicate_lesson",
            SkipReason::ExistingWins { .. } => "existing_wins",
        }
    }
}

/// What a delete did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeleteOutcome {
    /// The live value was tombstoned and a `deleted` event recorded.
    Deleted,
    /// There was no live value under the key; nothing changed.
    NotFound,
}

/// What an audit row records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum MemoryAuditAction {
    /// A key got its first live value.
    Created,
    /// A live value was replaced.
    Updated,
    /// A live value was tombstoned.
    Deleted,
    /// The conflict ladder or lesson dedup kept the existing value.
    ConflictSkip,
    /// The value carried injected instructions and was refused.
    InjectionBlocked,
    /// The write broke a validation rule and was refused.
    Rejected,
    /// Markdown memory was migrated into the store (counts in `new_value`).
    Migration,
    /// An export document was restored exactly into an empty store
    /// (counts in `new_value`).
    Restored,
}

impl MemoryAuditAction {
    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryAuditAction::Created => "created",
            MemoryAuditAction::Updated => "updated",
            MemoryAuditAction::Deleted => "deleted",
            MemoryAuditAction::ConflictSkip => "conflict_skip",
            MemoryAuditAction::InjectionBlocked => "injection_blocked",
            MemoryAuditAction::Rejected => "rejected",
            MemoryAuditAction::Migration => "migration",
            MemoryAuditAction::Restored => "restored",
        }
    }

    pub(crate) fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "created" => MemoryAuditAction::Created,
            "updated" => MemoryAuditAction::Updated,
            "deleted" => MemoryAuditAction::Deleted,
            "conflict_skip" => MemoryAuditAction::ConflictSkip,
            "injection_blocked" => MemoryAuditAction::InjectionBlocked,
            "rejected" => MemoryAuditAction::Rejected,
            "migration" => MemoryAuditAction::Migration,
            "restored" => MemoryAuditAction::Restored,
            _ => return None,
        })
    }

    /// True for the actions that changed stored data.
    pub fn is_change(self) -> bool {
        matches!(self, MemoryAuditAction::Created | MemoryAuditAction::Updated | MemoryAuditAction::Deleted)
    }
}

/// One row of the audit trail. Values are stored after credential and
/// exfiltration-URL redaction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryAuditEvent {
    /// Monotonic row id.
    pub id: i64,
    /// When (Unix milliseconds).
    pub at: i64,
    /// `semantic` or `lesson` (and `episodic` once episodic writes exist).
    pub memory_type: String,
    /// What happened.
    pub action: MemoryAuditAction,
    /// The key concerned (cut to 100 characters for refused keys).
    pub key: Option<String>,
    /// The value before the change, as JSON text.
    pub old_value: Option<String>,
    /// The value written or refused, as JSON text (a redacted snippet for refusals).
    pub new_value: Option<String>,
    /// Source of the write.
    pub source: Option<String>,
    /// Confidence of the write.
    pub confidence: Option<f64>,
    /// Reason code for refusals and skips, or other context.
    pub detail: Option<String>,
}

/// A semantic search result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SemanticHit {
    /// Where the entry belongs.
    pub scope: crate::scope::Scope,
    /// The key.
    pub key: String,
    /// The value.
    pub value: serde_json::Value,
    /// Combined score in `[0, 1]`.
    pub score: f64,
    /// Keyword component in `[0, 1]`.
    pub keyword_score: f64,
    /// Cosine component, when both the query and the entry have vectors.
    pub vector_score: Option<f64>,
}

/// Counts describing the store.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryStats {
    /// Live semantic entries (lessons included).
    pub semantic_live: i64,
    /// Tombstoned semantic entries.
    pub semantic_deleted: i64,
    /// Live lessons.
    pub lessons: i64,
    /// Live semantic entries without a vector in the current embedding space.
    pub semantic_missing_vectors: i64,
    /// Live episodic rows.
    pub episodic_live: i64,
    /// Tombstoned episodic rows.
    pub episodic_deleted: i64,
    /// Rows in the audit trail.
    pub audit_events: i64,
    /// `PRAGMA user_version`.
    pub schema_version: i64,
    /// Model id of the configured embedder, if any.
    pub embedding_model: Option<String>,
    /// Whether that embedder is ready.
    pub embedder_ready: bool,
}
