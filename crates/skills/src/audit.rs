//! Audit records for decisions that change what a model is guaranteed to
//! see: trigger matches, edits, deletions. The catalog hands them to an
//! [`AuditSink`] the host provides; records carry skill names and
//! outcomes, never message text or skill bodies.

use parking_lot::Mutex;
use serde::Serialize;

/// What was done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SkillAuditAction {
    /// One per message whose trigger pass or `$name` tokens matched skills.
    TriggerMatch,
    /// A skill was created.
    Create,
    /// A skill's `SKILL.md` was replaced.
    Update,
    /// Modelled frontmatter fields were edited.
    EditFields,
    /// `inject_on_trigger` was changed (or a change was refused).
    SetInjectOnTrigger,
    /// A skill directory was removed.
    Delete,
    /// Bundled skills were copied into the home.
    SeedBuiltins,
    /// A generated skill candidate was staged or made live (or refused).
    AutoSkillCreate,
    /// A generated skill was refined (or the refinement refused).
    AutoSkillRefine,
    /// A candidate was refused as a near-duplicate of a generated skill.
    AutoSkillDuplicate,
    /// A pending candidate was approved (or its approval refused).
    AutoSkillApprove,
    /// A pending candidate was rejected.
    AutoSkillReject,
    /// A pending candidate expired unreviewed.
    AutoSkillExpire,
    /// A generated skill turned stale for disuse.
    AutoSkillStale,
    /// A generated skill was archived.
    AutoSkillArchive,
    /// A generated skill's previous version was put back.
    AutoSkillRestore,
}

/// One audit record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkillAuditEvent {
    /// What was done.
    pub action: SkillAuditAction,
    /// The skills involved.
    pub skills: Vec<String>,
    /// `true` when the action took effect.
    pub ok: bool,
    /// Extra facts (how each matched skill was delivered, why a write was
    /// refused), already scrubbed of credentials.
    pub detail: String,
}

/// Where audit records go. Implementations must be cheap and must not fail
/// the caller.
pub trait AuditSink: Send + Sync + std::fmt::Debug {
    /// Stores one record.
    fn record(&self, event: SkillAuditEvent);
}

/// Drops every record.
#[derive(Debug, Default, Clone, Copy)]
pub struct NullAudit;

impl AuditSink for NullAudit {
    fn record(&self, _event: SkillAuditEvent) {}
}

/// Keeps records in memory (tests, the CLI's JSON output).
#[derive(Debug, Default)]
pub struct MemoryAudit {
    events: Mutex<Vec<SkillAuditEvent>>,
}

impl MemoryAudit {
    /// Takes the records collected so far.
    pub fn take(&self) -> Vec<SkillAuditEvent> {
        std::mem::take(&mut *self.events.lock())
    }
}

impl AuditSink for MemoryAudit {
    fn record(&self, event: SkillAuditEvent) {
        self.events.lock().push(event);
    }
}
