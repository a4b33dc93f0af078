//! Cairn's durable memory: one SQLite file, `memory.db`, holding structured
//! facts (semantic memory), learned corrections (lessons), episodic rows and
//! a bounded audit trail of every change and refusal.
//!
//! The main type is [`MemoryDb`]. A write passes the rules in order (key
//! format and prefix, value size, confidence gate, injection screen), then
//! meets the conflict ladder against the stored value inside one
//! `BEGIN IMMEDIATE` transaction, so neither threads nor processes lose an
//! update. Every outcome is typed ([`WriteOutcome`], [`Rejected`]) and every
//! change or refusal leaves an [`MemoryAuditEvent`].
//!
//! ```
//! use cairn_memory_core::{MemoryConfig, MemoryDb, Rejected, Source, WriteOutcome};
//! use serde_json::json;
//!
//! let home = tempfile::tempdir().unwrap();
//! let db = MemoryDb::open_in_home(home.path(), MemoryConfig::default()).unwrap();
//!
//! let outcome = db.write_semantic("pref.editor", &json!("helix"), 0.9, Source::Consolidation).unwrap();
//! assert!(matches!(outcome, WriteOutcome::Created { .. }));
//!
//! // Automated writes need confidence 0.8; the refusal is typed and audited.
//! let error = db.write_semantic("pref.theme", &json!("dark"), 0.5, Source::Consolidation).unwrap_err();
//! assert!(matches!(error.rejection(), Some(Rejected::LowConfidence { .. })));
//!
//! let block = db.semantic_context("which editor", 1_000).unwrap();
//! assert_eq!(block, "[Semantic Memory]\npref.editor: helix");
//! ```
//!
//! The human-editable half of memory is [`MemoryFiles`]: `preferences.md`,
//! `projects.md` (replaced atomically) and one append-only history file per
//! day under `<home>/memory/`, rendered into context with decaying age tiers
//! ([`MemoryFiles::recent_history`], [`MemoryFiles::get_context`]) and
//! searchable through a self-healing FTS5 index in `<home>/memory_index.db`
//! ([`MemoryFiles::search_files`]).
//!
//! Vectors come from any [`cairn_embedder::EmbeddingBackend`] given with
//! [`MemoryDb::with_embedder`]; this crate only uses the trait and never
//! pulls in a model runtime. A model that is not ready yet means entries are
//! written without vectors and [`MemoryDb::backfill_vectors`] adds them later.
//!
//! What it deliberately does not do: read configuration or environment
//! variables (the binary passes a [`MemoryConfig`]), hold any lock while text
//! is embedded, or keep credentials out of stored values (they are redacted
//! where values leave the store: context blocks and audit rows).

#![warn(missing_docs)]

mod audit;
mod bm25;
mod clock;
mod consolidate;
pub mod constants;
mod db;
mod episodic;
mod error;
mod evidence;
mod export;
mod files;
mod foreign;
mod forget;
mod jsonl;
mod keywords;
mod ledger;
mod lessons;
mod migrate;
mod report;
mod restore;
mod scope;
mod search;
mod semantic;
mod snapshot;
mod store;
mod text;
mod transcript;
mod types;
mod validate;

#[cfg(test)]
mod tests;

pub use consolidate::runs::{
    AppliedChange, ConsolidationRun, PriorRow, ProposedWrite, RevertReport, RowStatus, RunItem, RunState,
    approve_changeset, reject_changeset, revert_consolidation_runs,
};
pub use consolidate::{
    ConsolidationPath, ConsolidationReport, Consolidator, ConsolidatorConfig, CurrentSkill, ScriptedSummarizer,
    SkillGate, SkillProposal, SkillProposalKind, SkillProposer, Summarizer, SummarizerError,
};
pub use db::{Durability, MemoryConfig, MemoryDb};
pub use episodic::{
    Admission, BackfillProgress, BackfillReport, BackfillStep, EpisodicContext, EpisodicHit, EpisodicIndexStatus,
    EpisodicOutcome, EpisodicQuery, EpisodicRecord, Fusion, NewEpisode, ReembedProgress, ReembedStep, RetrievalMode,
    ScoreBreakdown, sanitize_fts_query,
};
pub use error::{MemoryError, Rejected, Result, StorageError, StorageErrorKind};
pub use export::{
    EXPORT_FORMAT, EXPORT_VERSION, ExportDocument, ExportedEpisode, ExportedFiles, ExportedLesson, ExportedSemantic,
    ExportedTombstone, ImportReport, ImportRow, export_memory, import_memory,
};
pub use files::{
    ContextSection, FileHit, FilesContext, FilesContextCaps, HISTORY_DIR, HistoryAppend, IndexReport, MEMORY_DIR,
    ManualZonedClock, MemoryFiles, PREFERENCES_FILE, PROJECTS_FILE, PruneReport, RecentHistory, SystemZonedClock,
    ZonedClock,
};
pub use foreign::{
    ForeignCategory, ForeignCounts, ForeignItem, ForeignReport, ForeignRoots, ForeignSelection, ForeignSkillWriter,
    ForeignSource, ImportDiagnostic, ItemOutcome, SkillWriteOutcome, apply_foreign, apply_foreign_with, scan_foreign,
    scan_foreign_with,
};
pub use forget::{
    FORGOTTEN_CONTAINMENT, ForgetCounts, ForgetReport, ForgetRequest, ForgottenItem, MIN_CONTAINMENT_SHINGLES,
    forget_memory,
};
pub use jsonl::{JsonlLessonStore, LessonBook};
pub use lessons::{
    DedupRule, Lesson, LessonCategory, LessonOutcome, ReplacedLesson, lesson_confidence, lesson_key, render_lessons,
};
pub use migrate::{MigrationReport, MigrationSource, is_migrated, migrate_at_start, migrate_from_markdown};
pub use report::{LayerCounts, RefusedItem};
pub use restore::{RESTORE_STAGING_DIR, RestoreStep, restore_memory, restore_memory_interrupted};
pub use scope::{GLOBAL_SCOPE, PROJECT_KEY_PREFIX, ProjectRule, Scope, ScopeFilter, project_named, project_of};
pub use store::sqlite::integrity::{RepairReport, TableSalvage, checkpoint_wal, repair_database};
pub use store::sqlite::schema::SCHEMA_VERSION;
pub use transcript::{StoredMessage, ToolCall, TranscriptAppend, TranscriptMessage, TranscriptState};
pub use types::{
    DeleteOutcome, Evidence, MemoryAuditAction, MemoryAuditEvent, MemoryStats, SemanticEntry, SemanticHit, SkipReason,
    Source, WriteOutcome,
};
