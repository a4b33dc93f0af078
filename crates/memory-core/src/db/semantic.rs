//! Semantic memory on [`MemoryDb`]: screened writes through the ladder of
//! [`crate::semantic`], reads, listing and deletes.

use crate::db::MemoryDb;
use crate::error::{MemoryError, Rejected, Result};
use crate::scope::{Scope, ScopeFilter, stored_key, stored_key_scope};
use crate::semantic::{PreparedWrite, apply_delete, embed_text, entry_from_row, memory_type};
use std::collections::HashMap;

use crate::store::{Counter, EvidenceLayer, EvidenceRow};
use crate::types::{DeleteOutcome, Evidence, SemanticEntry, Source, WriteOutcome};
use crate::validate;

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
            return Err(self.refuse(memory_type(key), key, "", source.as_str(), Some(confidence), rejected));
        }
        // A refusal records what was sent (only the marker under a secret-named key).
        let refuse = |rejected: Rejected| {
            let attempted =
                serde_json::to_string(secret_key_marker(key, value).as_ref().unwrap_or(value)).unwrap_or_default();
            self.refuse(memory_type(key), key, &attempted, source.as_str(), Some(confidence), rejected)
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
            Err(rejected) => {
                Err(self.refuse(memory_type(key), key, value_json, source.as_str(), Some(confidence), rejected))
            }
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
