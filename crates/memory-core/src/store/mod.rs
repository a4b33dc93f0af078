//! The storage seam: the rows of the semantic layer, the lessons stored in
//! it, the audit trail and the revision counters, as small traits a
//! backend implements inside one of its transactions.
//!
//! Everything that decides (validation, the screen, the conflict ladder,
//! lesson dedup, the audit cap) lives above this seam, in one place for
//! every backend: [`crate::semantic::apply_write`] reads a row through
//! [`SemanticRows`], decides, and writes back through the same
//! transaction. A backend only stores and fetches rows, and makes one
//! write transaction atomic and isolated from every other writer, in this
//! process or another.
//!
//! Backends: SQLite (`memory.db`, [`sqlite::SqliteTx`], what
//! [`crate::MemoryDb`] runs on), an in-memory one that proves the seam in
//! tests ([`memory`]), and PostgreSQL, for many gateways on one store
//! ([`postgres`], tested against a real server).

#[cfg(test)]
pub(crate) mod memory;
#[cfg(test)]
pub(crate) mod postgres;
pub(crate) mod sqlite;
#[cfg(test)]
mod tests;

use crate::error::Result;
use crate::types::MemoryAuditAction;

/// One row of the semantic table, live or tombstoned. `value` is the
/// stored JSON text.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SemanticRow {
    pub(crate) key: String,
    pub(crate) value: String,
    pub(crate) confidence: f64,
    pub(crate) source: String,
    pub(crate) category: Option<String>,
    pub(crate) created_at: i64,
    pub(crate) updated_at: i64,
    pub(crate) is_deleted: bool,
    pub(crate) version: i64,
    /// The space the stored vector is in; `None` when there is none.
    pub(crate) embedding_space: Option<String>,
}

/// A new live value for a key: inserted, or replacing the stored row
/// (version + 1; `created_at` kept unless the row was a tombstone).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SemanticUpsert<'a> {
    pub(crate) key: &'a str,
    pub(crate) value: &'a str,
    pub(crate) confidence: f64,
    pub(crate) source: &'a str,
    pub(crate) category: Option<&'a str>,
    pub(crate) at: i64,
    /// The vector and its space; `None` stores the row without one.
    pub(crate) vector: Option<(&'a [f32], &'a str)>,
}

/// What identifies the content of a live row: a change bumps `version`, a
/// backfill moves `embedding_space`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SemanticHead {
    pub(crate) key: String,
    pub(crate) version: i64,
    pub(crate) embedding_space: Option<String>,
    pub(crate) updated_at: i64,
}

/// Counts of the semantic table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SemanticCounts {
    pub(crate) live: i64,
    pub(crate) deleted: i64,
    pub(crate) lessons: i64,
    /// Live rows with no vector in the asked space.
    pub(crate) missing_vectors: i64,
}

/// The rows of semantic memory (lessons are semantic rows under `lesson.`).
pub(crate) trait SemanticRows {
    /// The row of `key`, live or tombstoned.
    fn semantic_row(&mut self, key: &str) -> Result<Option<SemanticRow>>;
    /// Writes a live value (see [`SemanticUpsert`]) and its vector.
    fn upsert_semantic(&mut self, write: &SemanticUpsert<'_>) -> Result<()>;
    /// Replaces the vector of an unchanged row (its space moves with it).
    fn set_semantic_vector(&mut self, key: &str, vector: &[f32], space: &str) -> Result<()>;
    /// Stores a vector only if the live row still has `version`; whether it did.
    fn set_semantic_vector_if_version(&mut self, key: &str, version: i64, vector: &[f32], space: &str) -> Result<bool>;
    /// Tombstones a live row (version + 1, vector dropped).
    fn tombstone_semantic(&mut self, key: &str, at: i64) -> Result<()>;
    /// The stored vector of `key`, when it is in `space`.
    fn semantic_vector(&mut self, key: &str, space: &str) -> Result<Option<Vec<f32>>>;
    /// Live rows whose key starts with `prefix` (all for `""`), by key.
    fn live_semantic(&mut self, prefix: &str) -> Result<Vec<SemanticRow>>;
    /// The heads of every live row, by key (cheap: no values, no vectors).
    fn semantic_heads(&mut self) -> Result<Vec<SemanticHead>>;
    /// Live rows with no vector in `space`, by key, at most `limit`.
    fn semantic_missing_vectors(&mut self, space: &str, limit: usize) -> Result<Vec<SemanticRow>>;
    /// Counts of the table; `missing_vectors` against `space` (every live
    /// row counts as missing when `space` is `None`).
    fn semantic_counts(&mut self, space: Option<&str>) -> Result<SemanticCounts>;
}

/// An audit row to append.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NewEvent<'a> {
    pub(crate) at: i64,
    pub(crate) memory_type: &'a str,
    pub(crate) action: MemoryAuditAction,
    pub(crate) key: Option<&'a str>,
    pub(crate) old_value: Option<&'a str>,
    pub(crate) new_value: Option<&'a str>,
    pub(crate) source: Option<&'a str>,
    pub(crate) confidence: Option<f64>,
    pub(crate) detail: Option<&'a str>,
}

/// An audit row as stored; `action` is the stored name, parsed above the seam.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StoredEvent {
    pub(crate) id: i64,
    pub(crate) at: i64,
    pub(crate) memory_type: String,
    pub(crate) action: String,
    pub(crate) key: Option<String>,
    pub(crate) old_value: Option<String>,
    pub(crate) new_value: Option<String>,
    pub(crate) source: Option<String>,
    pub(crate) confidence: Option<f64>,
    pub(crate) detail: Option<String>,
}

/// The bounded audit trail. Ids only grow, so trimming everything at or
/// below `newest id - cap` keeps exactly the newest `cap` rows.
pub(crate) trait AuditLog {
    /// Appends `event` and trims the trail to the newest `cap` rows.
    fn append_event(&mut self, event: &NewEvent<'_>, cap: i64) -> Result<()>;
    /// The newest `limit` rows, newest first.
    fn newest_events(&mut self, limit: usize) -> Result<Vec<StoredEvent>>;
    /// How many rows the trail holds.
    fn event_count(&mut self) -> Result<i64>;
}

/// A counter that tells every reader (thread, process, gateway) that a
/// table changed, so caches derived from it rebuild.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Counter {
    /// The semantic table (search snapshots).
    Semantic,
}

impl Counter {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Counter::Semantic => "semantic_revision",
        }
    }
}

/// The revision counters.
pub(crate) trait Revisions {
    /// The counter's value (0 before its first bump).
    fn revision(&mut self, counter: Counter) -> Result<i64>;
    /// Adds one to the counter.
    fn bump_revision(&mut self, counter: Counter) -> Result<()>;
}

/// Everything a transaction of a backend offers.
pub(crate) trait StoreTx: SemanticRows + AuditLog + Revisions {}

impl<T: SemanticRows + AuditLog + Revisions> StoreTx for T {}

/// A store behind the seam: runs a closure in one transaction. A write
/// transaction is atomic (an error leaves the store as it was) and
/// serialised against every other writer of the same store.
pub(crate) trait Backend: Send + Sync {
    /// Runs `work` in a write transaction and commits it when `work` returns `Ok`.
    fn write_dyn(&self, operation: &'static str, work: &mut dyn FnMut(&mut dyn StoreTx) -> Result<()>) -> Result<()>;
    /// Runs `work` in a read transaction (one consistent view).
    fn read_dyn(&self, operation: &'static str, work: &mut dyn FnMut(&mut dyn StoreTx) -> Result<()>) -> Result<()>;
}

impl dyn Backend + '_ {
    /// [`Backend::write_dyn`] with a result.
    pub(crate) fn write<T>(
        &self,
        operation: &'static str,
        work: impl FnOnce(&mut dyn StoreTx) -> Result<T>,
    ) -> Result<T> {
        run(work, |body| self.write_dyn(operation, body))
    }

    /// [`Backend::read_dyn`] with a result.
    pub(crate) fn read<T>(
        &self,
        operation: &'static str,
        work: impl FnOnce(&mut dyn StoreTx) -> Result<T>,
    ) -> Result<T> {
        run(work, |body| self.read_dyn(operation, body))
    }
}

/// Adapts a one-shot closure with a result to the object-safe `FnMut` form
/// (a backend runs the body exactly once per transaction).
fn run<T>(
    work: impl FnOnce(&mut dyn StoreTx) -> Result<T>,
    transaction: impl FnOnce(&mut dyn FnMut(&mut dyn StoreTx) -> Result<()>) -> Result<()>,
) -> Result<T> {
    let mut work = Some(work);
    let mut output = None;
    transaction(&mut |tx| {
        let work = work.take().expect("a store transaction runs its body once");
        output = Some(work(tx)?);
        Ok(())
    })?;
    Ok(output.expect("a committed transaction ran its body"))
}

/// Little-endian `f32`s, the stored form of a vector in every backend.
pub(crate) fn vector_blob(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The vector of a stored blob; `None` when its length is not a multiple of 4.
pub(crate) fn blob_vector(blob: &[u8]) -> Option<Vec<f32>> {
    if !blob.len().is_multiple_of(4) {
        return None;
    }
    Some(blob.chunks_exact(4).map(|bytes| f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])).collect())
}
