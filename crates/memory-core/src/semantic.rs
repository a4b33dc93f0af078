//! Semantic memory: validated, screened, conflict-resolved key-value writes.

use crate::audit::insert_event;
use crate::clock::now_ms;
use crate::constants::{CONFIDENCE_EQUAL_BAND, LESSON_PREFIX, MAX_AUDIT_EVENTS, MAX_SEMANTIC_VERSION};
use crate::error::{MemoryError, Rejected, Result};
use crate::store::EventRecord;
use crate::store::{Counter, EvidenceLayer, EvidenceRow, SemanticRow, SemanticUpsert, StoreTx};
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
