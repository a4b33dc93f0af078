//! Semantic memory: validated, screened, conflict-resolved key-value writes.
//! The rules and the conflict ladder, and [`MemoryDb`]'s methods that write,
//! read, list and delete entries through them.

use std::collections::HashMap;

use crate::audit::insert_event;
use crate::clock::now_ms;
use crate::constants::{CONFIDENCE_EQUAL_BAND, LESSON_PREFIX, MAX_AUDIT_EVENTS, MAX_SEMANTIC_VERSION};
use crate::db::MemoryDb;
use crate::error::{MemoryError, RefusedWrite, Rejected, Result};
use crate::scope::{Scope, ScopeFilter, stored_key, stored_key_scope};
use crate::store::EventRecord;
use crate::store::{Counter, EvidenceLayer, EvidenceRow, SemanticRow, SemanticUpsert, StoreTx};
use crate::types::{DeleteOutcome, Evidence, MemoryAuditAction, SemanticEntry, SkipReason, Source, WriteOutcome};
use crate::validate;

/// The stored state of a key, live or tombstoned.
#[derive(Debug, Clone)]
pub(crate) struct Existing {
    pub(crate) value: String,
    pub(crate) confidence: f64,
    pub(crate) source: String,
    pub(crate) is_deleted: bool,
    pub(crate) has_vector_in: Option<String>,
    pub(crate) version: i64,
}

impl Existing {
    /// Refuses a change that would take the row past
    /// [`MAX_SEMANTIC_VERSION`] (the backends add one to the stored version).
    pub(crate) fn check_next_version(&self, key: &str) -> Result<()> {
        if self.version.checked_add(1).is_none_or(|next| next > MAX_SEMANTIC_VERSION) {
            return Err(MemoryError::Rejected(Rejected::VersionExhausted {
                key: key.to_owned(),
                version: self.version,
                max: MAX_SEMANTIC_VERSION,
            }));
        }
        Ok(())
    }
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
    /// Where consolidation found the value (checked); a write without it
    /// clears any evidence an earlier value had.
    pub(crate) evidence: Option<&'a EvidenceRow>,
}

pub(crate) fn memory_type(key: &str) -> &'static str {
    if key.starts_with(LESSON_PREFIX) { "lesson" } else { "semantic" }
}

/// A refused semantic write, as its audit row records it.
fn refused<'a>(key: &'a str, attempted: &'a str, source: &'a Source, confidence: f64) -> RefusedWrite<'a> {
    RefusedWrite {
        memory_type: memory_type(key),
        key,
        attempted,
        source: source.as_str(),
        confidence: Some(confidence),
    }
}

/// The stored state of `key`, as the ladder sees it.
pub(crate) fn load_existing(tx: &mut dyn StoreTx, key: &str) -> Result<Option<Existing>> {
    Ok(tx.semantic_row(key)?.map(|row| Existing {
        value: row.value,
        confidence: row.confidence,
        source: row.source,
        is_deleted: row.is_deleted,
        has_vector_in: row.embedding_space,
        version: row.version,
    }))
}

/// Applies a prepared write inside the caller's transaction: reads the
/// stored state, runs the ladder, then upserts and records the event.
pub(crate) fn apply_write(tx: &mut dyn StoreTx, write: &PreparedWrite<'_>) -> Result<WriteOutcome> {
    apply_write_replacing(tx, write).map(|(outcome, _)| outcome)
}

/// [`apply_write`], also returning the live value the write replaced (the
/// stored text, as read under the write's lock) when it updated one.
pub(crate) fn apply_write_replacing(
    tx: &mut dyn StoreTx,
    write: &PreparedWrite<'_>,
) -> Result<(WriteOutcome, Option<String>)> {
    let existing = load_existing(tx, write.key)?;
    apply_to_existing(tx, write, existing)
}

/// The ladder and the write of [`apply_write_replacing`], against the
/// stored state `existing` read under the write's lock.
pub(crate) fn apply_to_existing(
    tx: &mut dyn StoreTx,
    write: &PreparedWrite<'_>,
    existing: Option<Existing>,
) -> Result<(WriteOutcome, Option<String>)> {
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
            Ok((WriteOutcome::Skipped { key, reason }, None))
        }
        Decision::Unchanged => {
            let existing = existing.expect("unchanged needs a stored value");
            if let Some((vector, space)) = &write.vector
                && existing.has_vector_in.as_deref() != Some(space.as_str())
            {
                tx.set_semantic_vector(write.key, vector, space)?;
                tx.bump_at_commit(Counter::Semantic)?;
            }
            Ok((WriteOutcome::Unchanged { key }, None))
        }
        Decision::Write => {
            if let Some(existing) = &existing {
                existing.check_next_version(write.key)?;
            }
            let live_before = existing.as_ref().filter(|existing| !existing.is_deleted);
            let action = if live_before.is_some() { MemoryAuditAction::Updated } else { MemoryAuditAction::Created };
            let old = live_before.map(|existing| cairn_guard::redact_all(&existing.value).into_owned());
            let new = cairn_guard::redact_all(write.value_text);
            tx.write_semantic_change(
                &SemanticUpsert {
                    key: write.key,
                    value: write.value_text,
                    confidence: write.confidence,
                    source: write.source.as_str(),
                    category: write.category,
                    at: now_ms(),
                    vector: write.vector.as_ref().map(|(vector, space)| (vector.as_slice(), space.as_str())),
                },
                write.evidence,
                now_ms(),
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
                MAX_AUDIT_EVENTS,
            )?;
            tx.bump_at_commit(Counter::Semantic)?;
            tracing::debug!(key = write.key, action = action.as_str(), "semantic write accepted");
            tracing::trace!(key = write.key, value = write.value_text, "semantic value");
            Ok(if action == MemoryAuditAction::Updated {
                (WriteOutcome::Updated { key }, live_before.map(|existing| existing.value.clone()))
            } else {
                (WriteOutcome::Created { key }, None)
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
    existing.check_next_version(key)?;
    tx.tombstone_semantic(key, now_ms())?;
    tx.set_evidence(EvidenceLayer::Semantic, key, None)?;
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
    tx.bump_at_commit(Counter::Semantic)?;
    tracing::debug!(key, "semantic entry tombstoned");
    Ok(DeleteOutcome::Deleted)
}

/// The public entry of a stored row; `space` is the current embedder's.
pub(crate) fn entry_from_row(
    row: SemanticRow,
    space: Option<&str>,
    evidence: Option<EvidenceRow>,
) -> Result<SemanticEntry> {
    let value = serde_json::from_str(&row.value).map_err(|error| MemoryError::CorruptRow {
        table: "semantic_memory",
        reason: format!("value of {} is not JSON: {error}", row.key),
    })?;
    let (key, scope) = crate::scope::split_stored_key(&row.key);
    let (key, scope) = (key.to_owned(), scope);
    Ok(SemanticEntry {
        has_vector: row.embedding_space.is_some() && row.embedding_space.as_deref() == space,
        key,
        scope,
        value,
        confidence: row.confidence,
        source: row.source.parse().unwrap_or(Source::Other(row.source)),
        created_at: row.created_at,
        updated_at: row.updated_at,
        version: row.version,
        evidence: evidence.map(crate::evidence::from_row),
    })
}

/// The text a semantic entry is embedded as.
pub(crate) fn embed_text(key: &str, value: &serde_json::Value) -> String {
    format!("{}: {}", key, validate::display_value(value))
}

/// A value that passed [`MemoryDb::check_write`], in the form it is stored.
pub(crate) struct StoredValue {
    /// The scrubbed value.
    pub(crate) value: serde_json::Value,
    /// Its compact JSON text.
    pub(crate) text: String,
    /// The value as the rules saw it, shown as text: what is checked
    /// against the forgotten items.
    pub(crate) shown: String,
}

/// The guard's marker, when `key` names a credential and `value` is not a
/// bare flag: the value that is stored, audited, embedded and shown instead.
fn secret_key_marker(key: &str, value: &serde_json::Value) -> Option<serde_json::Value> {
    (cairn_guard::is_secret_key(key) && !matches!(value, serde_json::Value::Bool(_) | serde_json::Value::Null))
        .then(|| serde_json::Value::String(cairn_guard::SECRET_KEY_MARKER.to_owned()))
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
        self.write_semantic_in(&Scope::Global, key, value, confidence, source)
    }

    /// [`write_semantic`](Self::write_semantic) into `scope`: the key names
    /// one row per scope, so two projects keep their own `project.` facts.
    pub fn write_semantic_in(
        &self,
        scope: &Scope,
        key: &str,
        value: &serde_json::Value,
        confidence: f64,
        source: Source,
    ) -> Result<WriteOutcome> {
        self.write_semantic_in_with_evidence(scope, key, value, confidence, source, None)
    }

    /// [`write_semantic`](Self::write_semantic) with the evidence
    /// consolidation found for the value (the global row).
    pub fn write_semantic_with_evidence(
        &self,
        key: &str,
        value: &serde_json::Value,
        confidence: f64,
        source: Source,
        evidence: Option<&Evidence>,
    ) -> Result<WriteOutcome> {
        self.write_semantic_in_with_evidence(&Scope::Global, key, value, confidence, source, evidence)
    }

    /// [`write_semantic_in`](Self::write_semantic_in) with the evidence
    /// consolidation found for the value (the one write path; `None` is a
    /// write without evidence, which clears what an earlier value had). The
    /// evidence is checked after the value's rules: a valid session key, an
    /// ordered message range, a quote of 1 to 300 characters that passes the
    /// injection screen ([`Rejected::InvalidEvidence`],
    /// [`Rejected::Injection`]); its quote is stored scrubbed like the value.
    /// The evidence is stored only when the write changes the row, under the
    /// row's stored key (`<key>@<project>` in a project).
    pub fn write_semantic_in_with_evidence(
        &self,
        scope: &Scope,
        key: &str,
        value: &serde_json::Value,
        confidence: f64,
        source: Source,
        evidence: Option<&Evidence>,
    ) -> Result<WriteOutcome> {
        let _span = tracing::debug_span!("write_semantic", key = %validate::cut(key, 100)).entered();
        if Scope::parse(scope.as_str()).is_none() {
            let rejected = Rejected::InvalidScope(validate::cut(scope.as_str(), 100));
            return Err(self.refuse(refused(key, "", &source, confidence), rejected));
        }
        // A refusal records what was sent (only the marker under a secret-named key).
        let refuse = |rejected: Rejected| {
            let attempted =
                serde_json::to_string(secret_key_marker(key, value).as_ref().unwrap_or(value)).unwrap_or_default();
            self.refuse(refused(key, &attempted, &source, confidence), rejected)
        };
        let checked = self.check_value(key, value, confidence, &source).and_then(|stored| {
            let evidence = evidence.map(crate::evidence::check).transpose()?;
            Ok((stored, evidence))
        });
        let (stored, evidence) = checked.map_err(refuse)?;
        // Embed before taking the write lock; skip building the text when there is no embedder.
        let vector = if self.embedder().is_some() { self.try_embed(&embed_text(key, &stored.value)) } else { None };
        let stored_key = &stored_key(key, scope);
        let written = self.rows().write("writing a semantic entry", |tx| {
            Self::apply_write_unless_forgotten(
                tx,
                &PreparedWrite {
                    key: stored_key,
                    value_text: &stored.text,
                    confidence,
                    source: &source,
                    category: None,
                    vector,
                    evidence: evidence.as_ref(),
                },
                &stored.shown,
                key,
            )
        })?;
        let (outcome, replaced) = written.map_err(refuse)?;
        let value = &stored.value;
        // A superseded value retires the episodic rows quoting it, after the
        // semantic lock is released.
        // The replaced value is the one read under the write's lock.
        let previous = replaced.map(|text| {
            serde_json::from_str(&text).map_or(text, |stored: serde_json::Value| validate::display_value(&stored))
        });
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
            Err(rejected) => Err(self.refuse(refused(key, value_json, &source, confidence), rejected)),
        }
    }

    /// The write rules every semantic row passes, whichever path writes it
    /// (a write, a lesson, a merge or foreign import, a restore): source,
    /// key, value size, confidence and the injection screen over the value
    /// as sent, its `<private>` spans already withheld, then the forgotten
    /// items. Returns the value as it is stored: credentials redacted and
    /// control characters other than line breaks and tabs removed from
    /// every string (after the screen, which sees the value as sent), and
    /// its size checked again. A value under a secret-named key
    /// (`pref.db_password`) is a credential whatever its shape: only the
    /// guard's marker is checked and stored.
    pub(crate) fn check_write(
        &self,
        key: &str,
        value: &serde_json::Value,
        confidence: f64,
        source: &Source,
    ) -> Result<StoredValue, Rejected> {
        let stored = self.check_value(key, value, confidence, source)?;
        match self.refuse_forgotten(&stored.shown, Some(key)) {
            Ok(verdict) => verdict?,
            // The write that follows meets the same store and reports its failure.
            Err(error) => tracing::warn!(%error, "could not read the forgotten items"),
        }
        Ok(stored)
    }

    /// [`check_write`](Self::check_write) but for the forgotten items,
    /// which the one write path checks inside its transaction instead.
    fn check_value(
        &self,
        key: &str,
        value: &serde_json::Value,
        confidence: f64,
        source: &Source,
    ) -> Result<StoredValue, Rejected> {
        source.validate()?;
        validate::key(key, &self.prefixes)?;
        let unmarked = validate::without_private(value);
        let value = unmarked.as_ref().unwrap_or(value);
        let marker = secret_key_marker(key, value);
        let value = marker.as_ref().unwrap_or(value);
        let text = validate::value(value)?;
        validate::confidence(confidence, source)?;
        validate::injection(value)?;
        let shown = validate::display_value(value);
        Ok(match validate::scrub_value(value) {
            Some(scrubbed) => {
                let text = validate::value(&scrubbed)?;
                StoredValue { value: scrubbed, text, shown }
            }
            None => StoredValue { value: value.clone(), text, shown },
        })
    }

    /// Tombstones `key` and records a `deleted` event; the row stays (so
    /// the audit trail and later writes can see it was deleted).
    pub fn delete_semantic(&self, key: &str, source: Source) -> Result<DeleteOutcome> {
        self.delete_semantic_in(&Scope::Global, key, source)
    }

    /// [`delete_semantic`](Self::delete_semantic) of the row of `key` in `scope`.
    pub fn delete_semantic_in(&self, scope: &Scope, key: &str, source: Source) -> Result<DeleteOutcome> {
        let _span = tracing::debug_span!("delete_semantic", key = %validate::cut(key, 100)).entered();
        source.validate()?;
        let key = &stored_key(key, scope);
        self.rows().write("deleting a semantic entry", |tx| apply_delete(tx, key, &source, None))
    }

    /// The live value under `key` (the global row).
    pub fn get_semantic(&self, key: &str) -> Result<Option<SemanticEntry>> {
        self.get_semantic_in(&Scope::Global, key)
    }

    /// The live value under `key` in `scope`.
    pub fn get_semantic_in(&self, scope: &Scope, key: &str) -> Result<Option<SemanticEntry>> {
        let space = self.space();
        let key = &stored_key(key, scope);
        let found = self.rows().read("reading a semantic entry", |tx| {
            let Some(row) = tx.semantic_row(key)?.filter(|row| !row.is_deleted) else { return Ok(None) };
            Ok(Some((row, tx.evidence(EvidenceLayer::Semantic, key)?)))
        })?;
        found.map(|(row, evidence)| entry_from_row(row, space.as_deref(), evidence)).transpose()
    }

    /// The live value a reader seeing `scopes` finds under `key`: its
    /// project's row before the global one.
    pub fn find_semantic(&self, scopes: &ScopeFilter, key: &str) -> Result<Option<SemanticEntry>> {
        let mut found = self.list_semantic_in(key, scopes)?;
        found.retain(|entry| entry.key == key);
        found.sort_by_key(|entry| entry.scope.is_global());
        Ok(found.into_iter().next())
    }

    /// Live entries whose key starts with `prefix` (all of them for `""`),
    /// by stored key (every scope).
    pub fn list_semantic(&self, prefix: &str) -> Result<Vec<SemanticEntry>> {
        self.list_semantic_in(prefix, &ScopeFilter::All)
    }

    /// [`list_semantic`](Self::list_semantic) of the rows `scopes` admits.
    pub fn list_semantic_in(&self, prefix: &str, scopes: &ScopeFilter) -> Result<Vec<SemanticEntry>> {
        let space = self.space();
        let (rows, mut evidence) = self.rows().read("listing semantic entries", |tx| {
            let rows = tx.live_semantic(prefix)?;
            let evidence: HashMap<String, EvidenceRow> =
                tx.layer_evidence(EvidenceLayer::Semantic)?.into_iter().collect();
            Ok((rows, evidence))
        })?;
        rows.into_iter()
            .filter(|row| scopes.admits(stored_key_scope(&row.key)))
            .map(|row| {
                let found = evidence.remove(&row.key);
                entry_from_row(row, space.as_deref(), found)
            })
            .collect()
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
                    tx.bump_at_commit(Counter::Semantic)?;
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
