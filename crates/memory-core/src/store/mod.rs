//! The storage seam: the rows of each layer, their vectors, the keyword
//! source, the audit trail and the revision counters, as small traits a
//! backend implements inside one of its transactions ([`StoreTx`] bundles
//! them).
//!
//! Everything that decides (validation, the screen, the conflict ladder,
//! lesson dedup, the audit cap) lives above this seam, in one place for
//! every backend: the semantic layer's `apply_write` reads a row through
//! [`SemanticRows`], decides, and writes back through the same
//! transaction. A backend only stores and fetches rows, and makes one
//! write transaction atomic and isolated from every other writer, in this
//! process or another.
//!
//! Backends: SQLite (`memory.db`, [`sqlite::SqliteTx`], what
//! `MemoryDb` runs on), an in-memory one that proves the seam in
//! tests and serves other crates' tests (`memory`, feature `in-memory`),
//! and PostgreSQL, for many gateways on one store
//! ([`postgres`], tested against a real server).

#[cfg(test)]
pub(crate) mod db_tests;
#[cfg(any(test, feature = "in-memory"))]
pub(crate) mod memory;
#[cfg(test)]
mod pg_concurrency_tests;
#[cfg(any(test, feature = "postgres"))]
pub(crate) mod postgres;
pub(crate) mod sqlite;
#[cfg(test)]
mod tests;

use cairn_embedder::EmbeddingBackend;

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
    /// Tombstones a live row (version + 1, vector dropped).
    fn tombstone_semantic(&mut self, key: &str, at: i64) -> Result<()>;
    /// Live rows whose key starts with `prefix` (all for `""`), by key.
    fn live_semantic(&mut self, prefix: &str) -> Result<Vec<SemanticRow>>;
    /// The heads of every live row, by key (cheap: no values, no vectors).
    fn semantic_heads(&mut self) -> Result<Vec<SemanticHead>>;
    /// Counts of the table; `missing_vectors` against `space` (every live
    /// row counts as missing when `space` is `None`).
    fn semantic_counts(&mut self, space: Option<&str>) -> Result<SemanticCounts>;
    /// Tombstoned rows, by key.
    fn deleted_semantic(&mut self) -> Result<Vec<SemanticRow>>;
    /// Inserts `row` exactly as given (times, version, tombstone flag),
    /// without a vector: an exact restore. A key already stored is a
    /// constraint error; `embedding_space` is ignored.
    fn insert_semantic_row(&mut self, row: &SemanticRow) -> Result<()>;
    /// Puts `row` back exactly as given (times, version, tombstone flag),
    /// replacing what `key` holds and dropping its vector: a revert.
    fn put_semantic_row(&mut self, row: &SemanticRow) -> Result<()>;
    /// Removes the row of `key` and its vector outright (no tombstone): a
    /// revert of the write that created it.
    fn remove_semantic_row(&mut self, key: &str) -> Result<()>;
}

/// The vectors of semantic rows, each tagged with the space it is in.
pub(crate) trait SemanticVectors {
    /// Replaces the vector of an unchanged row (its space moves with it).
    fn set_semantic_vector(&mut self, key: &str, vector: &[f32], space: &str) -> Result<()>;
    /// Stores a vector only if the live row still has `version`; whether it did.
    fn set_semantic_vector_if_version(&mut self, key: &str, version: i64, vector: &[f32], space: &str) -> Result<bool>;
    /// The stored vector of `key`, when it is in `space`.
    fn semantic_vector(&mut self, key: &str, space: &str) -> Result<Option<Vec<f32>>>;
    /// Live rows with no vector in `space`, by key, at most `limit`.
    fn semantic_missing_vectors(&mut self, space: &str, limit: usize) -> Result<Vec<SemanticRow>>;
}

/// What the audit trail is told about one event.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EventRecord<'a> {
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
    fn append_event(&mut self, at: i64, event: &EventRecord<'_>, cap: i64) -> Result<()>;
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
    /// The active episodic rows and their vectors (vector indexes). Bumped
    /// explicitly by the code above the seam.
    Episodic,
    /// The text of the active episodic rows (keyword indexes). The backend
    /// bumps it itself whenever a row becomes active or inactive
    /// ([`EpisodicRows::insert_episodic`], [`EpisodicRows::tombstone_episodic`]).
    EpisodicText,
    /// Not a counter: the store's random identity, set when it was created
    /// and never bumped (it ties index snapshots to their store).
    StoreId,
}

impl Counter {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Counter::Semantic => "semantic_revision",
            Counter::Episodic => "episodic_revision",
            Counter::EpisodicText => "episodic_text_revision",
            Counter::StoreId => "store_id",
        }
    }
}

/// The revision counters.
pub(crate) trait Revisions {
    /// The counter's value (0 before its first bump).
    fn revision(&mut self, counter: Counter) -> Result<i64>;
    /// The values of `counters`, in their order: one statement on a
    /// backend that asks a server.
    fn revisions(&mut self, counters: &[Counter]) -> Result<Vec<i64>> {
        counters.iter().map(|&counter| self.revision(counter)).collect()
    }
    /// Adds one to the counter and answers its new value.
    fn bump_revision(&mut self, counter: Counter) -> Result<i64>;
    /// Moves the counter on by the time the transaction commits (by one or
    /// more, however often it is asked), for a writer that needs no new value: a
    /// backend with concurrent writers bumps it with the commit, so the
    /// counter's row is not held while the rest of the transaction runs.
    fn bump_at_commit(&mut self, counter: Counter) -> Result<()> {
        self.bump_revision(counter).map(drop)
    }
}

/// A new episodic row, checked and screened above the seam.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NewEpisodicRow<'a> {
    pub(crate) text: &'a str,
    pub(crate) tags_json: &'a str,
    pub(crate) importance: f64,
    pub(crate) source: &'a str,
    pub(crate) created_at: i64,
    pub(crate) source_ref: Option<&'a str>,
    /// The scope's stored name.
    pub(crate) scope: &'a str,
    /// The stored vector blob ([`vector_blob`]) and its space.
    pub(crate) vector: Option<(&'a [u8], &'a str)>,
}

/// An episodic row as stored (without its vector).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EpisodicRow {
    pub(crate) id: i64,
    pub(crate) text: String,
    pub(crate) tags_json: String,
    pub(crate) importance: f64,
    pub(crate) created_at: i64,
    pub(crate) last_accessed: Option<i64>,
    pub(crate) source_ref: Option<String>,
    pub(crate) source: String,
    pub(crate) embedding_space: Option<String>,
    pub(crate) has_vector: bool,
    pub(crate) is_deleted: bool,
    /// The scope's stored name.
    pub(crate) scope: String,
}

/// Counts of the episodic table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct EpisodicCounts {
    pub(crate) live: i64,
    pub(crate) deleted: i64,
    /// Active rows with a vector in the asked space.
    pub(crate) with_vectors: i64,
}

/// The rows of episodic memory. Ids are assigned by the backend, grow, and
/// are never reused; a tombstoned row stays (`is_deleted`).
pub(crate) trait EpisodicRows {
    /// Inserts an active row and answers its id (bumps [`Counter::EpisodicText`]).
    fn insert_episodic(&mut self, row: &NewEpisodicRow<'_>) -> Result<i64>;
    /// Tombstones `id` if it is active and answers its text (bumps
    /// [`Counter::EpisodicText`] when it was active); `None` otherwise.
    fn tombstone_episodic(&mut self, id: i64) -> Result<Option<String>>;
    /// The lowest id among active rows with exactly `text`.
    fn episodic_with_text(&mut self, text: &str) -> Result<Option<i64>>;
    /// Whether `id` is an active row.
    fn episodic_is_active(&mut self, id: i64) -> Result<bool>;
    /// `limit` active rows in eviction order: lowest importance, then oldest, then lowest id.
    fn episodic_eviction_order(&mut self, limit: usize) -> Result<Vec<i64>>;
    /// Row `id`, active or tombstoned, and its vector blob when `vector_space`
    /// is given and the row's vector is in it.
    fn episodic_row(&mut self, id: i64, vector_space: Option<&str>) -> Result<Option<(EpisodicRow, Option<Vec<u8>>)>>;
    /// [`episodic_row`](Self::episodic_row) of each of `ids`, in one read
    /// where the backend can (a PostgreSQL search reads its hundred
    /// candidates in one round trip); ids with no row are left out.
    fn episodic_rows(
        &mut self,
        ids: &[i64],
        vector_space: Option<&str>,
    ) -> Result<Vec<(EpisodicRow, Option<Vec<u8>>)>> {
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            out.extend(self.episodic_row(*id, vector_space)?);
        }
        Ok(out)
    }
    /// Active rows, newest (`created_at`, then id) first, `limit` from `offset`.
    fn episodic_page(&mut self, limit: usize, offset: usize) -> Result<Vec<EpisodicRow>>;
    /// Ids of every active row.
    fn episodic_active_ids(&mut self) -> Result<Vec<i64>>;
    /// Counts; `with_vectors` in `space` (0 for `None`).
    fn episodic_counts(&mut self, space: Option<&str>) -> Result<EpisodicCounts>;
    /// Active rows with a vector in `space`, counted up to `limit`: a
    /// caller choosing how to build an index needs to know only whether
    /// there are more than that, and counting a million rows takes a
    /// server hundreds of milliseconds.
    fn episodic_vectors_up_to(&mut self, space: &str, limit: i64) -> Result<i64> {
        Ok(self.episodic_counts(Some(space))?.with_vectors.min(limit))
    }
    /// Active rows (`episodic_counts(None).live`), without counting the
    /// table where the backend keeps the count.
    fn episodic_live_count(&mut self) -> Result<i64> {
        Ok(self.episodic_counts(None)?.live)
    }
    /// Records `last_accessed` on rows: `(id, at)` pairs, one per row, in
    /// one statement where the backend can.
    fn touch_episodic(&mut self, touches: &[(i64, i64)]) -> Result<()>;
}

/// The vectors of episodic rows, for the vector indexes and the backfill.
pub(crate) trait EpisodicVectors {
    /// Active rows' `(id, vector blob)` in `space` (all, or those among `only`).
    fn episodic_vectors(&mut self, space: &str, only: Option<&[i64]>) -> Result<Vec<(i64, Vec<u8>)>>;
    /// Hands every active row's `(id, vector blob)` in `space` to `each`,
    /// one at a time: a backend that can streams them instead of holding
    /// them all (a million rows' blobs are 1.5 GB).
    fn each_episodic_vector(&mut self, space: &str, each: &mut dyn FnMut(i64, &[u8]) -> Result<()>) -> Result<()> {
        for (id, blob) in self.episodic_vectors(space, None)? {
            each(id, &blob)?;
        }
        Ok(())
    }
    /// Ids of the active rows with a vector in `space`.
    fn episodic_vector_ids(&mut self, space: &str) -> Result<Vec<i64>>;
    /// Active rows after `after_id` with no vector in `space` (all without a
    /// vector for `None`), by id, at most `limit`: `(id, text)`.
    fn episodic_missing_vectors(
        &mut self,
        space: Option<&str>,
        after_id: i64,
        limit: usize,
    ) -> Result<Vec<(i64, String)>>;
    /// How many active rows have no vector in `space` (no vector at all for `None`).
    fn episodic_missing_count(&mut self, space: Option<&str>) -> Result<i64>;
    /// Stores a vector on `id` if it is active and its text is still `text`; whether it did.
    fn set_episodic_vector(&mut self, id: i64, text: &str, blob: &[u8], space: &str) -> Result<bool>;
}

/// The keyword source: the text of the active episodic rows, for the
/// in-memory BM25 index, the stale-quote retirement and, where the backend
/// has one, its own keyword search.
pub(crate) trait EpisodicText {
    /// Active rows' `(id, text, tags JSON)` (all, or those among `only`).
    fn episodic_documents(&mut self, only: Option<&[i64]>) -> Result<Vec<(i64, String, String)>>;
    /// Active rows that may contain the lower-case phrase `needle` (of the
    /// alphanumeric `words`): a superset the caller confirms on the text.
    fn episodic_quoting(&mut self, needle: &str, words: &[String]) -> Result<Vec<(i64, String)>>;
    /// The backend's own keyword search (SQLite's FTS5, PostgreSQL's
    /// `episodic_keywords`): top `k` of a sanitised query, `(id, score)`
    /// with higher better. `None` when the backend has none (then
    /// [`Backend::searches_keywords`] is false and the in-memory keyword
    /// index is always built inline).
    fn episodic_keyword_hits(&mut self, fts_query: &str, k: usize) -> Result<Option<Vec<(i64, f64)>>>;
}

/// The consolidation state of one session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SessionRow {
    pub(crate) next_seq: i64,
    pub(crate) history_marker: i64,
    pub(crate) preferences_marker: i64,
    pub(crate) last_activity: i64,
    pub(crate) claim_owner: Option<i64>,
    pub(crate) claim_until: Option<i64>,
    /// Messages stored for the session.
    pub(crate) stored: i64,
    /// The scope's stored name (the project the session ran in).
    pub(crate) scope: String,
}

/// One stored transcript message.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TranscriptRow {
    pub(crate) seq: i64,
    pub(crate) created_at: i64,
    pub(crate) role: String,
    pub(crate) content: String,
    pub(crate) tool_calls_json: Option<String>,
}

/// A consolidation marker of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MarkerColumn {
    History,
    Preferences,
}

/// Session transcripts and their consolidation markers.
pub(crate) trait TranscriptRows {
    /// The state of `session_key`.
    fn session(&mut self, session_key: &str) -> Result<Option<SessionRow>>;
    /// Creates the session's state row (last activity `at`, in `scope`)
    /// unless it exists (an existing session keeps its scope).
    fn ensure_session(&mut self, session_key: &str, at: i64, scope: &str) -> Result<()>;
    /// Stores one message.
    fn insert_transcript(&mut self, session_key: &str, row: &TranscriptRow) -> Result<()>;
    /// Sets `next_seq` and raises `last_activity` to at least `at`.
    fn advance_session(&mut self, session_key: &str, next_seq: i64, at: i64) -> Result<()>;
    /// Messages with `from <= seq < to`, by seq.
    fn transcript_rows(&mut self, session_key: &str, from: i64, to: i64) -> Result<Vec<TranscriptRow>>;
    /// Deletes the messages below `seq`; answers how many.
    fn delete_transcript_below(&mut self, session_key: &str, seq: i64) -> Result<usize>;
    /// Sessions with unconsolidated history, idle since before `before`, least recently active first.
    fn idle_sessions(&mut self, before: i64) -> Result<Vec<String>>;
    /// Sets (or, with `None`, clears) the consolidation claim.
    fn set_claim(&mut self, session_key: &str, claim: Option<(i64, i64)>) -> Result<()>;
    /// Clears the claim if `owner` holds it.
    fn release_claim(&mut self, session_key: &str, owner: i64) -> Result<()>;
    /// Moves a marker from `from` to `to`; false when it was not at `from`.
    fn move_marker(&mut self, session_key: &str, marker: MarkerColumn, from: i64, to: i64) -> Result<bool>;
}

/// One decided item of a foreign import.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LedgerEntry<'a> {
    pub(crate) source: &'a str,
    pub(crate) path: &'a str,
    pub(crate) item_hash: &'a str,
    pub(crate) landed_as: &'a str,
    pub(crate) outcome: &'a str,
    pub(crate) target: Option<&'a str>,
    pub(crate) recorded_at: i64,
}

/// The import provenance ledger and the store's named settings.
pub(crate) trait LedgerRows {
    /// `(path, item hash)` of every item recorded for `source`.
    fn ledger_items(&mut self, source: &str) -> Result<Vec<(String, String)>>;
    /// How many lessons foreign imports (every source but
    /// [`EXPORT_LEDGER_SOURCE`](crate::constants::EXPORT_LEDGER_SOURCE)) have written.
    fn ledger_lessons_written(&mut self) -> Result<i64>;
    /// Records an item; one already recorded is kept as it is.
    fn record_ledger(&mut self, entry: &LedgerEntry<'_>) -> Result<()>;
    /// A named setting.
    fn setting(&mut self, name: &str) -> Result<Option<String>>;
    /// Sets a named setting.
    fn set_setting(&mut self, name: &str, value: &str) -> Result<()>;
}

/// What a forget removed, as fingerprints (never the text).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ForgottenRow {
    /// `fact` or `episode`.
    pub(crate) kind: String,
    /// The scope's stored name.
    pub(crate) scope: String,
    /// A fact's stored key.
    pub(crate) key: Option<String>,
    /// SHA-256 (hex) of the normalised text.
    pub(crate) fingerprint: String,
    /// Sorted little-endian `u64` hashes of the text's word shingles.
    pub(crate) shingles: Vec<u8>,
    pub(crate) at: i64,
}

/// One stored transcript message with its session (a forget's view).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SessionMessage {
    pub(crate) session_key: String,
    pub(crate) scope: String,
    pub(crate) row: TranscriptRow,
}

/// Forgetting: the fingerprints of what was forgotten, and the transcript
/// messages a forget may remove.
pub(crate) trait ForgetRows {
    /// Records one forgotten item.
    fn record_forgotten(&mut self, row: &ForgottenRow) -> Result<()>;
    /// Every forgotten item, oldest first.
    fn forgotten_rows(&mut self) -> Result<Vec<ForgottenRow>>;
    /// Every stored transcript message, by session and seq.
    fn session_messages(&mut self) -> Result<Vec<SessionMessage>>;
    /// Deletes the messages `(session_key, seq)`; answers how many went.
    fn delete_session_messages(&mut self, messages: &[(String, i64)]) -> Result<usize>;
}

/// The evidence of a row consolidation wrote: the session and message
/// range it came from and a verbatim quote of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EvidenceRow {
    pub(crate) session_key: String,
    pub(crate) first_seq: i64,
    pub(crate) last_seq: i64,
    pub(crate) quote: String,
}

/// Which table a row with evidence is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EvidenceLayer {
    /// `semantic_memory` (lessons included), by key.
    Semantic,
    /// `episodic_memories`, by id.
    Episodic,
}

impl EvidenceLayer {
    pub(crate) fn name(self) -> &'static str {
        match self {
            EvidenceLayer::Semantic => "semantic",
            EvidenceLayer::Episodic => "episodic",
        }
    }
}

/// The evidence of consolidated rows, beside the rows (`memory_evidence`):
/// one per `(layer, target)`, where the target is a semantic key or an
/// episodic id as text. Rows written without evidence have none.
pub(crate) trait EvidenceRows {
    /// The evidence of `target`.
    fn evidence(&mut self, layer: EvidenceLayer, target: &str) -> Result<Option<EvidenceRow>>;
    /// Every evidence row of `layer`, by target.
    fn layer_evidence(&mut self, layer: EvidenceLayer) -> Result<Vec<(String, EvidenceRow)>>;
    /// Stores the evidence of `target`, or removes it for `None`.
    fn set_evidence(&mut self, layer: EvidenceLayer, target: &str, evidence: Option<&EvidenceRow>) -> Result<()>;
}

/// A consolidation run as stored (`consolidation_runs`): its state and
/// its body, JSON that only the code above the seam reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunRow {
    pub(crate) id: i64,
    pub(crate) state: String,
    pub(crate) created_at: i64,
    pub(crate) updated_at: i64,
    pub(crate) body: String,
}

/// Consolidation runs: the changesets waiting for review and the record
/// of what each applied run changed (for a revert). Ids grow and are
/// never reused.
pub(crate) trait RunRows {
    /// Stores a new run and answers its id.
    fn insert_run(&mut self, state: &str, at: i64, body: &str) -> Result<i64>;
    /// Run `id`.
    fn run_row(&mut self, id: i64) -> Result<Option<RunRow>>;
    /// Every run, newest (highest id) first.
    fn run_rows(&mut self) -> Result<Vec<RunRow>>;
    /// Replaces the state and body of run `id`.
    fn update_run(&mut self, id: i64, state: &str, at: i64, body: &str) -> Result<()>;
    /// Deletes run `id`.
    fn delete_run(&mut self, id: i64) -> Result<()>;
}

/// Everything a transaction of a backend offers (each backend declares it
/// for its transaction type once the row traits are in place).
pub(crate) trait StoreTx:
    SemanticRows
    + SemanticVectors
    + AuditLog
    + Revisions
    + EpisodicRows
    + EpisodicVectors
    + EpisodicText
    + TranscriptRows
    + LedgerRows
    + ForgetRows
    + EvidenceRows
    + RunRows
{
    /// The changes of one accepted semantic write: the row (as
    /// [`SemanticRows::upsert_semantic`]), its evidence (cleared when
    /// `None`) and its audit row, the trail trimmed to `cap`. A backend may
    /// send them as one statement.
    fn write_semantic_change(
        &mut self,
        write: &SemanticUpsert<'_>,
        evidence: Option<&EvidenceRow>,
        at: i64,
        event: &EventRecord<'_>,
        cap: i64,
    ) -> Result<()> {
        self.upsert_semantic(write)?;
        self.set_evidence(EvidenceLayer::Semantic, write.key, evidence)?;
        self.append_event(at, event, cap)
    }

    /// The rows of `keys` (live or tombstoned; a key with no row is left
    /// out), each with its vector in `space` as [`SemanticVectors::semantic_vector`]
    /// answers it (none without a space), in the order of `keys`. A backend
    /// may read them in one statement.
    fn semantic_rows_with_vectors(
        &mut self,
        keys: &[&str],
        space: Option<&str>,
    ) -> Result<Vec<(SemanticRow, Option<Vec<f32>>)>> {
        let mut rows = Vec::with_capacity(keys.len());
        for key in keys {
            let Some(row) = self.semantic_row(key)? else { continue };
            let vector = match space {
                Some(space) => self.semantic_vector(key, space)?,
                None => None,
            };
            rows.push((row, vector));
        }
        Ok(rows)
    }
}

/// A store behind the seam: runs a closure in one transaction. A write
/// transaction is atomic (an error leaves the store as it was) and
/// serialised against every other writer of the same store.
pub(crate) trait Backend: Send + Sync {
    /// The backend's name: `"sqlite"`, `"postgres"` or `"memory"`.
    fn kind(&self) -> &'static str;
    /// The version of the schema the store is at.
    fn schema_version(&self) -> Result<i64>;
    /// The backend's own check of its files, `["ok"]` when sound; refused
    /// by a backend that has none.
    fn integrity_check(&self) -> Result<Vec<String>> {
        Err(crate::error::MemoryError::Unsupported { operation: "checking integrity", backend: self.kind() })
    }
    /// Runs `work` in a write transaction and commits it when `work` returns `Ok`.
    fn write_dyn(&self, operation: &'static str, work: &mut dyn FnMut(&mut dyn StoreTx) -> Result<()>) -> Result<()>;
    /// Runs `work` in a read transaction (one consistent view).
    fn read_dyn(&self, operation: &'static str, work: &mut dyn FnMut(&mut dyn StoreTx) -> Result<()>) -> Result<()>;
    /// What the backend's own check at open reported, when it found its
    /// files damaged: it then refuses every write.
    fn damage(&self) -> Option<&[String]> {
        None
    }
    /// Whether [`EpisodicRows::episodic_keyword_hits`] answers from an
    /// index of the backend's own, so the in-memory keyword index of a
    /// large store can be built in the background while searches go there.
    fn searches_keywords(&self) -> bool {
        false
    }
    /// Waits up to `timeout` for another process to announce a change, and
    /// answers the count of announcements heard (compare it with `seen`, the
    /// count of the previous call). A backend that announces nothing waits
    /// out the timeout and answers `seen`: its readers find changes through
    /// the revision counters when they read.
    fn wait_for_change(&self, seen: u64, timeout: std::time::Duration) -> u64 {
        std::thread::sleep(timeout);
        seen
    }
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

/// The vector space a backend produces: `<model id>#<dim>`.
pub(crate) fn space_signature(embedder: &dyn EmbeddingBackend) -> String {
    format!("{}#{}", embedder.model_id(), embedder.dim())
}
