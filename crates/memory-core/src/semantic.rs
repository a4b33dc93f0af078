//! Semantic memory: validated, screened, conflict-resolved key-value writes.

use crate::constants::{CONFIDENCE_EQUAL_BAND, LESSON_PREFIX};
use crate::db::{EventRecord, MemoryDb, insert_event, now_ms};
use crate::error::{MemoryError, Rejected, Result};
use crate::store::{Counter, SemanticRow, SemanticUpsert, StoreTx};
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

/// The stored state of `key`, as the ladder sees it.
pub(crate) fn load_existing(tx: &mut dyn StoreTx, key: &str) -> Result<Option<Existing>> {
    Ok(tx.semantic_row(key)?.map(|row| Existing {
        value: row.value,
        confidence: row.confidence,
        source: row.source,
        is_deleted: row.is_deleted,
        has_vector_in: row.embedding_space,
    }))
}

/// Applies a prepared write inside the caller's transaction: reads the
/// stored state, runs the ladder, then upserts and records the event.
pub(crate) fn apply_write(tx: &mut dyn StoreTx, write: &PreparedWrite<'_>) -> Result<WriteOutcome> {
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
                tx.set_semantic_vector(write.key, vector, space)?;
                tx.bump_revision(Counter::Semantic)?;
            }
            Ok(WriteOutcome::Unchanged { key })
        }
        Decision::Write => {
            tx.upsert_semantic(&SemanticUpsert {
                key: write.key,
                value: write.value_text,
                confidence: write.confidence,
                source: write.source.as_str(),
                category: write.category,
                at: now_ms(),
                vector: write.vector.as_ref().map(|(vector, space)| (vector.as_slice(), space.as_str())),
            })?;
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
            tx.bump_revision(Counter::Semantic)?;
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
    tx: &mut dyn StoreTx,
    key: &str,
    source: &Source,
    detail: Option<&str>,
) -> Result<DeleteOutcome> {
    let Some(existing) = load_existing(tx, key)?.filter(|existing| !existing.is_deleted) else {
        return Ok(DeleteOutcome::NotFound);
    };
    tx.tombstone_semantic(key, now_ms())?;
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
    tx.bump_revision(Counter::Semantic)?;
    tracing::debug!(key, "semantic entry tombstoned");
    Ok(DeleteOutcome::Deleted)
}

/// The public entry of a stored row; `space` is the current embedder's.
fn entry_from_row(row: SemanticRow, space: Option<&str>) -> Result<SemanticEntry> {
    let value = serde_json::from_str(&row.value).map_err(|error| MemoryError::CorruptRow {
        table: "semantic_memory",
        reason: format!("value of {} is not JSON: {error}", row.key),
    })?;
    Ok(SemanticEntry {
        has_vector: row.embedding_space.is_some() && row.embedding_space.as_deref() == space,
        key: row.key,
        value,
        confidence: row.confidence,
        source: row.source.parse().unwrap_or(Source::Other(row.source)),
        created_at: row.created_at,
        updated_at: row.updated_at,
        version: row.version,
    })
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
        let outcome = self.rows().write("writing a semantic entry", |tx| {
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
        self.rows().write("deleting a semantic entry", |tx| apply_delete(tx, key, &source, None))
    }

    /// The live value under `key`.
    pub fn get_semantic(&self, key: &str) -> Result<Option<SemanticEntry>> {
        let space = self.space();
        let row = self.rows().read("reading a semantic entry", |tx| tx.semantic_row(key))?;
        row.filter(|row| !row.is_deleted).map(|row| entry_from_row(row, space.as_deref())).transpose()
    }

    /// Live entries whose key starts with `prefix` (all of them for `""`), by key.
    pub fn list_semantic(&self, prefix: &str) -> Result<Vec<SemanticEntry>> {
        let space = self.space();
        let rows = self.rows().read("listing semantic entries", |tx| tx.live_semantic(prefix))?;
        rows.into_iter().map(|row| entry_from_row(row, space.as_deref())).collect()
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
            let pending = self
                .rows()
                .read("finding entries without vectors", |tx| tx.semantic_missing_vectors(&space, batch_size))?;
            if pending.is_empty() {
                break;
            }
            let mut vectors = Vec::with_capacity(pending.len());
            for row in &pending {
                let value: serde_json::Value =
                    serde_json::from_str(&row.value).map_err(|error| MemoryError::CorruptRow {
                        table: "semantic_memory",
                        reason: format!("value of {}: {error}", row.key),
                    })?;
                if let Some((vector, vector_space)) = self.try_embed(&embed_text(&row.key, &value)) {
                    vectors.push((row.key.clone(), row.version, vector, vector_space));
                }
            }
            if vectors.is_empty() {
                break;
            }
            let updated = self.rows().write("storing backfilled vectors", |tx| {
                let mut updated = 0;
                for (key, version, vector, vector_space) in &vectors {
                    if tx.set_semantic_vector_if_version(key, *version, vector, vector_space)? {
                        updated += 1;
                    }
                }
                if updated > 0 {
                    tx.bump_revision(Counter::Semantic)?;
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
