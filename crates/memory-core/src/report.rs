//! What a bulk write reports: per layer, the rows it wrote and the rows it
//! left as they were, and the items it refused. A consolidation run and a
//! migration report the same counts in the same shape.

use serde::Serialize;

use crate::error::MemoryError;

/// Per layer, the rows a bulk write (a consolidation run, a migration)
/// wrote and the rows it left as they were. Serialized flat into the
/// report that holds it (`semantic_written`, `semantic_kept`, …).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LayerCounts {
    /// Semantic entries created or updated.
    pub semantic_written: usize,
    /// Semantic entries already present: unchanged, or kept by the conflict ladder.
    pub semantic_kept: usize,
    /// Episodic rows inserted.
    pub episodic_written: usize,
    /// Episodic items the store already held (duplicates) or had no room for.
    pub episodic_kept: usize,
    /// Lessons created or updated.
    pub lessons_written: usize,
    /// Lessons already present, or duplicates of stored ones.
    pub lessons_kept: usize,
}

impl LayerCounts {
    /// Counts a semantic write that `changed` the store, or left it as it was.
    pub(crate) fn semantic(&mut self, changed: bool) {
        *if changed { &mut self.semantic_written } else { &mut self.semantic_kept } += 1;
    }

    /// Counts an episodic write that `changed` the store, or left it as it was.
    pub(crate) fn episodic(&mut self, changed: bool) {
        *if changed { &mut self.episodic_written } else { &mut self.episodic_kept } += 1;
    }

    /// Counts a lesson write that `changed` the store, or left it as it was.
    pub(crate) fn lesson(&mut self, changed: bool) {
        *if changed { &mut self.lessons_written } else { &mut self.lessons_kept } += 1;
    }
}

/// An item that was not stored, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RefusedItem {
    /// `semantic`, `episodic`, `lesson`, `skill`, `history`, `preferences_update`, ...
    pub kind: &'static str,
    /// Stable reason code (a rejection code, `malformed`, ...).
    pub code: String,
    /// Human-readable reason.
    pub message: String,
}

impl RefusedItem {
    /// The item of `kind` a writer refused with `error`: the rejection's
    /// code, or `error` for a failure that is not a rule's.
    pub(crate) fn refused(kind: &'static str, error: &MemoryError) -> Self {
        let code = error.rejection().map(|rejected| rejected.code()).unwrap_or("error").to_owned();
        RefusedItem { kind, code, message: error.to_string() }
    }

    /// The item of `kind` that could not be read.
    pub(crate) fn malformed(kind: &'static str, message: impl Into<String>) -> Self {
        RefusedItem { kind, code: "malformed".to_owned(), message: message.into() }
    }
}

impl std::fmt::Display for RefusedItem {
    /// `refused <kind> (<code>): <message>`, as the CLI prints it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "refused {} ({}): {}", self.kind, self.code, self.message)
    }
}
