//! Semantic memory: validated, screened, conflict-resolved key-value writes.

use rusqlite::{OptionalExtension, Transaction, params};

use crate::constants::{CONFIDENCE_EQUAL_BAND, LESSON_PREFIX};
use crate::db::{EventRecord, MemoryDb, bump_semantic_revision, insert_event, now_ms};
use crate::error::{MemoryError, Rejected, Result};
use crate::types::{DeleteOutcome, MemoryAuditAction, SemanticEntry, SkipReason, Source, WriteOutcome};
use crate::validate;

/// The stored state of a key, live or tombstoned.
#[derive(Debug, Clone)]
pub(crate) struct Existing {
    pub(crate) value: String,
    pub(crate) confidence: f64,
    pub(crate) source: String,
    pub(crate) is_deleted: bool,
    pub(crate) has_vector_in: Option<String>,
}

/// What the conflict ladder decides for a write against the stored state.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Decision {
    Write,
    Unchanged,
    Skip(SkipReason),
}

/// Who wins between a stored live value and a new write:
/// user-explicit beats everything and only user-explicit overwrites
/// user-explicit; otherwise the higher confidence wins, and confidences
/// within 0.1 of each other are equal, so the newer write wins.
pub(crate) fn ladder(
    existing_confidence: f64,
    existing_source: &str,
    confidence: f64,
    source: &Source,
) -> Option<SkipReason> {
    let existing_user = existing_source == Source::UserExplicit.as_str();
    if source.is_user_explicit() {
        return None;
    }
    if existing_user {
        return Some(SkipReason::ProtectedUserExplicit);
    }
    // A small epsilon so 0.9 vs 0.8 (0.09999… in binary) counts as within the band.
    if confidence + CONFIDENCE_EQUAL_BAND + 1e-9 >= existing_confidence {
        None
    } else {
        Some(SkipReason::LowerConfidence { existing: existing_confidence, attempted: confidence })
    }
}

pub(crate) fn decide(
    key: &str,
    existing: Option<&Existing>,
    value: &str,
    confidence: f64,
    source: &Source,
) -> Decision {
    if *source == Source::Import && existing.is_some() {
        // Existing memory wins over an import, and so does its deletion:
        // an import never replaces a stored value or revives a tombstone.
        return Decision::Skip(SkipReason::ExistingWins { existing_key: key.to_owned() });
    }
    let Some(existing) = existing.filter(|existing| !existing.is_deleted) else {
        return Decision::Write;
    };
    if let Some(reason) = ladder(existing.confidence, &existing.source, confidence, source) {
        return Decision::Skip(reason);
    }
    if existing.value == value && existing.confidence == confidence && existing.source == source.as_str() {
        Decision::Unchanged
    } else {
        Decision::Write
    }
}

/// A write that passed validation, with its vector (if any) computed.
pub(crate) struct PreparedWrite<'a> {
    pub(crate) key: &'a str,
    pub(crate) value_text: &'a str,
    pub(crate) confidence: f64,
    pub(crate) source: &'a Source,
    pub(crate) category: Option<&'a str>,
    pub(crate) vector: Option<(Vec<f32>, String)>,
}

pub(crate) fn memory_type(key: &str) -> &'static str {
    if key.starts_with(LESSON_PREFIX) { "lesson" } else { "semantic" }
}

pub(crate) fn load_existing(tx: &Transaction<'_>, key: &str) -> Result<Option<Existing>> {
    tx.prepare_cached(
        "SELECT value, confidence, source, is_deleted, embedding_space FROM semantic_memory WHERE key = ?1",
    )
    .and_then(|mut statement| {
        statement
            .query_row([key], |row| {
                Ok(Existing {
                    value: row.get(0)?,
                    confidence: row.get(1)?,
                    source: row.get(2)?,
                    is_deleted: row.get::<_, i64>(3)? != 0,
                    has_vector_in: row.get(4)?,
                })
            })
            .optional()
    })
    .map_err(MemoryError::sqlite("reading a semantic entry"))
}

fn vector_blob(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Stores (or, for `None`, removes) the vector of `key`.
fn store_vector(tx: &Transaction<'_>, key: &str, vector: Option<&Vec<f32>>) -> Result<()> {
    match vector {
        Some(vector) => tx
            .prepare_cached("INSERT OR REPLACE INTO semantic_vectors (key, embedding) VALUES (?1, ?2)")
            .and_then(|mut statement| statement.execute(params![key, vector_blob(vector)])),
        None => tx
            .prepare_cached("DELETE FROM semantic_vectors WHERE key = ?1")
            .and_then(|mut statement| statement.execute([key])),
    }
    .map_err(MemoryError::sqlite("storing a vector"))?;
    Ok(())
}

pub(crate) fn blob_vector(blob: &[u8]) -> Option<Vec<f32>> {
    if !blob.len().is_multiple_of(4) {
        return None;
    }
    Some(blob.chunks_exact(4).map(|bytes| f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])).collect())
}

/// Applies a prepared write inside the caller's transaction: reads the
/// stored state, runs the ladder, then upserts and records the event.
pub(crate) fn apply_write(tx: &Transaction<'_>, write: &PreparedWrite<'_>) -> Result<WriteOutcome> {
    let existing = load_existing(tx, write.key)?;
    let key = write.key.to_owned();
    let memory_type = memory_type(write.key);
    match decide(write.key, existing.as_ref(), write.value_text, write.confidence, write.source) {
        Decision::Skip(reason) => {
            let existing = existing.expect("a skip needs a stored value");
            tracing::debug!(key = write.key, reason = reason.code(), "conflict ladder kept the stored value");
            let old = cairn_guard::redact_all(&existing.value);
            let new = cairn_guard::redact_all(write.value_text);
            insert_event(
                tx,
                &EventRecord {
                    memory_type,
                    action: MemoryAuditAction::ConflictSkip,
                    key: Some(write.key),
                    old_value: Some(&old),
                    new_value: Some(&new),
                    source: Some(write.source.as_str()),
                    confidence: Some(write.confidence),
                    detail: Some(reason.code()),
                },
            )?;
            Ok(WriteOutcome::Skipped { key, reason })
        }
        Decision::Unchanged => {
            let existing = existing.expect("unchanged needs a stored value");
            if let Some((vector, space)) = &write.vector
                && existing.has_vector_in.as_deref() != Some(space.as_str())
            {
                tx.prepare_cached("UPDATE semantic_memory SET embedding_space = ?2 WHERE key = ?1")
                    .and_then(|mut statement| statement.execute(params![write.key, space]))
                    .map_err(MemoryError::sqlite("storing a vector"))?;
                store_vector(tx, write.key, Some(vector))?;
                bump_semantic_revision(tx)?;
            }
            Ok(WriteOutcome::Unchanged { key })
        }
        Decision::Write => {
            let now = now_ms();
            let space = write.vector.as_ref().map(|(_, space)| space.as_str());
            tx.prepare_cached(
                "INSERT INTO semantic_memory
                    (key, value, confidence, source, category, created_at, updated_at, is_deleted, version,
                     embedding_space)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, 0, 1, ?7)
                 ON CONFLICT(key) DO UPDATE SET
                    value = excluded.value,
                    confidence = excluded.confidence,
                    source = excluded.source,
                    category = excluded.category,
                    created_at = CASE WHEN semantic_memory.is_deleted = 1
                                      THEN excluded.created_at ELSE semantic_memory.created_at END,
                    updated_at = excluded.updated_at,
                    is_deleted = 0,
                    version = semantic_memory.version + 1,
                    embedding_space = excluded.embedding_space",
            )
            .and_then(|mut statement| {
                statement.execute(params![
                    write.key,
                    write.value_text,
                    write.confidence,
                    write.source.as_str(),
                    write.category,
                    now,
                    space
                ])
            })
            .map_err(MemoryError::sqlite("writing a semantic entry"))?;
            store_vector(tx, write.key, write.vector.as_ref().map(|(vector, _)| vector))?;
            let live_before = existing.as_ref().filter(|existing| !existing.is_deleted);
            let action = if live_before.is_some() { MemoryAuditAction::Updated } else { MemoryAuditAction::Created };
            let old = live_before.map(|existing| cairn_guard::redact_all(&existing.value).into_owned());
            let new = cairn_guard::redact_all(write.value_text);
            insert_event(
                tx,
                &EventRecord {
                    memory_type,
                    action,
                    key: Some(write.key),
                    old_value: old.as_deref(),
                    new_value: Some(&new),
                    source: Some(write.source.as_str()),
                    confidence: Some(write.confidence),
                    detail: None,
                },
            )?;
            bump_semantic_revision(tx)?;
            tracing::debug!(key = write.key, action = action.as_str(), "semantic write accepted");
            tracing::trace!(key = write.key, value = write.value_text, "semantic value");
            Ok(if action == MemoryAuditAction::Updated {
                WriteOutcome::Updated { key }
            } else {
                WriteOutcome::Created { key }
            })
        }
    }
}

/// Tombstones a live key inside the caller's transaction.
pub(crate) fn apply_delete(
    tx: &Transaction<'_>,
    key: &str,
    source: &Source,
    detail: Option<&str>,
) -> Result<DeleteOutcome> {
    let Some(existing) = load_existing(tx, key)?.filter(|existing| !existing.is_deleted) else {
        return Ok(DeleteOutcome::NotFound);
    };
    tx.prepare_cached(
        "UPDATE semantic_memory SET is_deleted = 1, updated_at = ?2, version = version + 1, embedding_space = NULL
         WHERE key = ?1",
    )
    .and_then(|mut statement| statement.execute(params![key, now_ms()]))
    .map_err(MemoryError::sqlite("tombstoning a semantic entry"))?;
    store_vector(tx, key, None)?;
    let old = cairn_guard::redact_all(&existing.value);
    insert_event(
        tx,
        &EventRecord {
            memory_type: memory_type(key),
            action: MemoryAuditAction::Deleted,
            key: Some(key),
            old_value: Some(&old),
            new_value: None,
            source: Some(source.as_str()),
            confidence: None,
            detail,
        },
    )?;
    bump_semantic_revision(tx)?;
    tracing::debug!(key, "semantic entry tombstoned");
    Ok(DeleteOutcome::Deleted)
}

const ENTRY_COLUMNS: &str = "key, value, confidence, source, created_at, updated_at, version, embedding_space";

fn entry_from_row(row: &rusqlite::Row<'_>, space: Option<&str>) -> rusqlite::Result<(SemanticEntry, String)> {
    let value_text: String = row.get(1)?;
    let source: String = row.get(3)?;
    let entry_space: Option<String> = row.get(7)?;
    Ok((
        SemanticEntry {
            key: row.get(0)?,
            value: serde_json::Value::Null,
            confidence: row.get(2)?,
            source: source.parse().unwrap_or(Source::Other(source)),
            created_at: row.get(4)?,
            updated_at: row.get(5)?,
            version: row.get(6)?,
            has_vector: entry_space.is_some() && entry_space.as_deref() == space,
        },
        value_text,
    ))
}

fn finish_entry((mut entry, value_text): (SemanticEntry, String)) -> Result<SemanticEntry> {
    entry.value = serde_json::from_str(&value_text).map_err(|error| MemoryError::CorruptRow {
        table: "semantic_memory",
        reason: format!("value of {} is not JSON: {error}", entry.key),
    })?;
    Ok(entry)
}

impl MemoryDb {
    /// Writes `value` under `key`.
    ///
    /// The rules run in order: source name, key length, key format, key
    /// prefix, value size (compact JSON ≤ 4,096 bytes), confidence (in
    /// `[0, 1]`, and ≥ 0.8 unless `source` is user-explicit), injection
    /// screen. A broken rule returns [`MemoryError::Rejected`] and records a
    /// `rejected` (or `injection_blocked`) audit row with a redacted snippet;
    /// nothing else changes. An accepted write then meets the conflict
    /// ladder against the stored value, inside one `BEGIN IMMEDIATE`
    /// transaction, and returns what it did. What is stored (and shown
    /// later) has credentials redacted and control characters other than
    /// line breaks and tabs removed from every string.
    pub fn write_semantic(
        &self,
        key: &str,
        value: &serde_json::Value,
        confidence: f64,
        source: Source,
    ) -> Result<WriteOutcome> {
        let _span = tracing::debug_span!("write_semantic", key = %validate::cut(key, 100)).entered();
        // A value under a secret-named key (`pref.db_password`) is a
        // credential whatever its shape: only the guard's marker is stored,
        // audited, embedded and shown.
        let marker = serde_json::Value::String(cairn_guard::SECRET_KEY_MARKER.to_owned());
        let value = if cairn_guard::is_secret_key(key)
            && !matches!(value, serde_json::Value::Bool(_) | serde_json::Value::Null)
        {
            &marker
        } else {
            value
        };
        let value_text = match self.check_write(key, value, confidence, &source) {
            Ok(text) => text,
            Err(rejected) => {
                let attempted = serde_json::to_string(value).unwrap_or_default();
                return Err(self.refuse(
                    memory_type(key),
                    key,
                    &attempted,
                    source.as_str(),
                    Some(confidence),
                    rejected,
                ));
            }
        };
        // Stored as a user will see it later: credentials redacted and
        // control characters removed from every string (after the screen,
        // which sees the value as sent).
        let scrubbed = validate::scrub_value(value);
        let (value, value_text) = match &scrubbed {
            Some(clean) => (clean, serde_json::to_string(clean).expect("a serde_json::Value always serialises")),
            None => (value, value_text),
        };
        // Embed before taking the write lock; skip building the text when there is no embedder.
        let vector = if self.embedder().is_some() { self.try_embed(&embed_text(key, value)) } else { None };
        let previous = self.get_semantic(key)?.map(|entry| validate::display_value(&entry.value));
        let outcome = self.write("writing a semantic entry", |tx| {
            apply_write(
                tx,
                &PreparedWrite { key, value_text: &value_text, confidence, source: &source, category: None, vector },
            )
        })?;
        // A superseded value retires the episodic rows quoting it, after the
        // semantic lock is released.
        if matches!(outcome, WriteOutcome::Updated { .. })
            && let Some(previous) = previous
            && previous != validate::display_value(value)
            && let Err(error) = self.retire_stale_episodic(&previous)
        {
            tracing::warn!(%error, "could not retire episodic rows quoting a superseded value");
        }
        Ok(outcome)
    }

    /// Like [`write_semantic`](Self::write_semantic), with the value given
    /// as JSON text; text that is not JSON is refused as
    /// [`Rejected::InvalidJson`].
    pub fn write_semantic_json(
        &self,
        key: &str,
        value_json: &str,
        confidence: f64,
        source: Source,
    ) -> Result<WriteOutcome> {
        match validate::parse_json(value_json) {
            Ok(value) => self.write_semantic(key, &value, confidence, source),
            Err(rejected) => {
                Err(self.refuse(memory_type(key), key, value_json, source.as_str(), Some(confidence), rejected))
            }
        }
    }

    pub(crate) fn check_write(
        &self,
        key: &str,
        value: &serde_json::Value,
        confidence: f64,
        source: &Source,
    ) -> Result<String, Rejected> {
        source.validate()?;
        validate::key(key, &self.prefixes)?;
        let text = validate::value(value)?;
        validate::confidence(confidence, source)?;
        validate::injection(value)?;
        Ok(text)
    }

    /// Tombstones `key` and records a `deleted` event; the row stays (so
    /// the audit trail and later writes can see it was deleted).
    pub fn delete_semantic(&self, key: &str, source: Source) -> Result<DeleteOutcome> {
        let _span = tracing::debug_span!("delete_semantic", key = %validate::cut(key, 100)).entered();
        source.validate()?;
        self.write("deleting a semantic entry", |tx| apply_delete(tx, key, &source, None))
    }

    /// The live value under `key`.
    pub fn get_semantic(&self, key: &str) -> Result<Option<SemanticEntry>> {
        let space = self.space();
        let row = self.read("reading a semantic entry", |tx| {
            tx.prepare_cached(&format!("SELECT {ENTRY_COLUMNS} FROM semantic_memory WHERE key = ?1 AND is_deleted = 0"))
                .and_then(|mut statement| {
                    statement.query_row([key], |row| entry_from_row(row, space.as_deref())).optional()
                })
                .map_err(MemoryError::sqlite("reading a semantic entry"))
        })?;
        row.map(finish_entry).transpose()
    }

    /// Live entries whose key starts with `prefix` (all of them for `""`), by key.
    pub fn list_semantic(&self, prefix: &str) -> Result<Vec<SemanticEntry>> {
        let space = self.space();
        let rows = self.read("listing semantic entries", |tx| {
            let mut statement = tx
                .prepare_cached(&format!(
                    "SELECT {ENTRY_COLUMNS} FROM semantic_memory
                     WHERE is_deleted = 0 AND substr(key, 1, ?1) = ?2 ORDER BY key"
                ))
                .map_err(MemoryError::sqlite("listing semantic entries"))?;
            let rows = statement
                .query_map(params![prefix.len() as i64, prefix], |row| entry_from_row(row, space.as_deref()))
                .map_err(MemoryError::sqlite("listing semantic entries"))?;
            rows.collect::<Result<Vec<_>, _>>().map_err(MemoryError::sqlite("listing semantic entries"))
        })?;
        rows.into_iter().map(finish_entry).collect()
    }

    /// Computes vectors for live entries that have none in the current
    /// embedding space (written while the model was loading, or under
    /// another model). Embeds outside any lock, then stores each vector only
    /// if the entry has not changed meanwhile. Returns how many were stored;
    /// 0 when there is no ready embedder.
    pub fn backfill_vectors(&self, batch_size: usize) -> Result<usize> {
        let _span = tracing::debug_span!("backfill_vectors").entered();
        let Some(space) = self.space() else { return Ok(0) };
        let batch_size = batch_size.max(1);
        let mut stored = 0;
        loop {
            if !self.embedder().is_some_and(|embedder| embedder.is_ready()) {
                break;
            }
            let pending: Vec<(String, String, i64)> = self.read("finding entries without vectors", |tx| {
                let mut statement = tx
                    .prepare_cached(
                        "SELECT key, value, version FROM semantic_memory
                         WHERE is_deleted = 0 AND (embedding_space IS NULL OR embedding_space != ?1)
                         ORDER BY key LIMIT ?2",
                    )
                    .map_err(MemoryError::sqlite("finding entries without vectors"))?;
                let rows = statement
                    .query_map(params![space, batch_size as i64], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
                    .map_err(MemoryError::sqlite("finding entries without vectors"))?;
                rows.collect::<Result<Vec<_>, _>>().map_err(MemoryError::sqlite("finding entries without vectors"))
            })?;
            if pending.is_empty() {
                break;
            }
            let mut vectors = Vec::with_capacity(pending.len());
            for (key, value_text, version) in &pending {
                let value: serde_json::Value = serde_json::from_str(value_text).map_err(|error| {
                    MemoryError::CorruptRow { table: "semantic_memory", reason: format!("value of {key}: {error}") }
                })?;
                if let Some((vector, vector_space)) = self.try_embed(&embed_text(key, &value)) {
                    vectors.push((key.clone(), *version, vector, vector_space));
                }
            }
            if vectors.is_empty() {
                break;
            }
            let updated = self.write("storing backfilled vectors", |tx| {
                let mut updated = 0;
                for (key, version, vector, vector_space) in &vectors {
                    let changed = tx
                        .prepare_cached(
                            "UPDATE semantic_memory SET embedding_space = ?3
                             WHERE key = ?1 AND version = ?2 AND is_deleted = 0",
                        )
                        .and_then(|mut statement| statement.execute(params![key, version, vector_space]))
                        .map_err(MemoryError::sqlite("storing backfilled vectors"))?;
                    if changed > 0 {
                        store_vector(tx, key, Some(vector))?;
                        updated += 1;
                    }
                }
                if updated > 0 {
                    bump_semantic_revision(tx)?;
                }
                Ok(updated)
            })?;
            stored += updated;
            tracing::debug!(updated, "backfilled semantic vectors");
            if updated == 0 {
                break;
            }
        }
        Ok(stored)
    }
}

/// The text a semantic entry is embedded as.
pub(crate) fn embed_text(key: &str, value: &serde_json::Value) -> String {
    format!("{}: {}", key, validate::display_value(value))
}
