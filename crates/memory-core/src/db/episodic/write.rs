//! Episodic writes on [`MemoryDb`]: the checks, dedup, the cap and
//! tombstones of [`crate::episodic::write`], run in one write transaction.

use crate::audit::insert_event;
use crate::clock::now_ms;
use crate::constants::STALE_QUOTE_MIN_CHARS;
use crate::db::MemoryDb;
use crate::episodic::index::IndexAccess;
use crate::episodic::write::{
    MEMORY_TYPE, Written, audit, check, contains_phrase, find_near_duplicate, record_from_row, tombstone,
};
use crate::episodic::{EpisodicOutcome, EpisodicRecord, NewEpisode};
use crate::error::{MemoryError, Result};
use crate::scope::ScopeFilter;
use crate::store::EventRecord;
use crate::store::space_signature;
use crate::store::{Counter, EvidenceLayer, NewEpisodicRow, vector_blob};
use crate::types::{DeleteOutcome, MemoryAuditAction};
use crate::validate;

impl MemoryDb {
    /// The refusal [`write_episodic`](Self::write_episodic) would give
    /// `episode`, without writing or auditing anything: every rule of the
    /// write (the text, importance, `source_ref`, `created_at`, the
    /// injection screen, the evidence) and the forgotten items. What is
    /// left to the write is what depends on the rows at that moment:
    /// dedup and the cap. Dry runs of imports decide with this.
    pub fn check_episode(&self, episode: &NewEpisode) -> std::result::Result<(), crate::Rejected> {
        let checked = check(episode)?;
        if let Some(evidence) = &episode.evidence {
            crate::evidence::check(evidence)?;
        }
        match self.refuse_forgotten(&checked.text, None) {
            Ok(verdict) => verdict,
            // The write that follows meets the same store and reports its failure.
            Err(error) => {
                tracing::warn!(%error, "could not read the forgotten items");
                Ok(())
            }
        }
    }

    /// Writes one episodic row (see [`NewEpisode`] for the fields).
    ///
    /// Rules, in order: source name, text at most 2,000 visible characters,
    /// importance a number (then clamped to `[0, 1]`), `source_ref` length,
    /// `created_at` from 1970 to a day from now, injection screen (before
    /// any embedding), then, on the text as stored (credentials redacted,
    /// control characters removed), at least 10 visible characters;
    /// invisible characters (zero-width, bidi, tags) never count. Tags are
    /// sanitised. A refusal
    /// returns [`MemoryError::Rejected`] and records a `rejected` or
    /// `injection_blocked` audit row with a redacted snippet.
    ///
    /// Then, in one `BEGIN IMMEDIATE` transaction: an active row with the
    /// same text, or with a vector at cosine > 0.88, makes the write a
    /// [`EpisodicOutcome::Duplicate`] (`conflict_skip` audit row); tombstoned
    /// rows never count, even while an index still holds their vector. A
    /// store at its cap evicts the lowest importance, then oldest rows
    /// (`deleted` audit rows, detail `cap_eviction`), or, in preservation
    /// mode, refuses with [`EpisodicOutcome::StoreFull`]. The row, its
    /// vector and the index change together: an index failure rolls the
    /// row back.
    ///
    /// The vector is computed before the lock. If the embedder was swapped
    /// meanwhile, the row is stored without a vector for a later backfill.
    pub fn write_episodic(&self, episode: &NewEpisode) -> Result<EpisodicOutcome> {
        self.write_episodic_capped(episode, self.episodic_config.cap)
    }

    /// [`write_episodic`](Self::write_episodic) with another active-row cap
    /// than the configured one ([`crate::MemoryConfig::episodic_cap`]).
    pub fn write_episodic_capped(&self, episode: &NewEpisode, cap: usize) -> Result<EpisodicOutcome> {
        let _span = tracing::debug_span!("write_episodic").entered();
        self.refuse_when_damaged()?;
        if cap == 0 {
            return Err(MemoryError::InvalidConfig("the episodic cap must be at least 1".to_owned()));
        }
        let checked = check(episode)
            .and_then(|checked| Ok((checked, episode.evidence.as_ref().map(crate::evidence::check).transpose()?)));
        let (checked, evidence) = match checked {
            Ok(checked) => checked,
            Err(rejected) => {
                return Err(self.refuse(
                    MEMORY_TYPE,
                    "episodic",
                    &episode.text,
                    episode.source.as_str(),
                    None,
                    rejected,
                ));
            }
        };
        if let Err(rejected) = self.refuse_forgotten(&checked.text, None)? {
            return Err(self.refuse(MEMORY_TYPE, "episodic", &checked.text, episode.source.as_str(), None, rejected));
        }
        let scope = episode.scope.as_str();
        // Embed first, outside every lock, remembering the space generation.
        let (embedder, generation) = self.embedder_with_generation();
        let mut embedded: Option<(Vec<f32>, String, usize)> = None;
        if !episode.defer_embedding
            && let Some(embedder) = &embedder
            && embedder.is_ready()
        {
            match embedder.embed(&checked.text) {
                Ok(mut vector) if vector.len() == embedder.dim() => {
                    cairn_embedder::l2_normalize(&mut vector);
                    embedded = Some((vector, space_signature(&**embedder), embedder.dim()));
                }
                Ok(vector) => tracing::warn!(got = vector.len(), "embedder returned a wrong-sized vector"),
                Err(error) => tracing::debug!(%error, "embedding failed; storing without a vector"),
            }
        }
        let created_at = episode.created_at.unwrap_or_else(now_ms);
        let source = episode.source.as_str();

        let _episodic = self.lock_episodic();
        if embedded.is_some() && self.space_generation() != generation {
            tracing::debug!("embedding model swapped during the write; storing without a vector");
            embedded = None;
        }
        // Set once the body has run: a failure after it is the commit's.
        let mut body_done = false;
        let written = self.rows().write("writing an episodic row", |tx| {
            let access = match &embedded {
                Some((_, space, dim)) => Some(self.index_locked(tx, space, *dim)?),
                None => None,
            };
            let [before, text_before] = revisions(tx)?;
            let duplicate = match (tx.episodic_with_text(&checked.text)?, &embedded, &access) {
                (Some(id), _, _) => Some((id, 1.0)),
                (None, Some((vector, space, _)), Some(access)) => find_near_duplicate(tx, access, vector, space)?,
                _ => None,
            };
            // A row of another scope is not a duplicate: its readers are others.
            let duplicate = match duplicate {
                Some((of, cosine)) => {
                    let same_scope = tx.episodic_row(of, None)?.is_some_and(|(row, _)| row.scope == scope);
                    same_scope.then_some((of, cosine))
                }
                None => None,
            };
            if let Some((of, cosine)) = duplicate {
                audit(
                    tx,
                    MemoryAuditAction::ConflictSkip,
                    of,
                    None,
                    Some(&checked.text),
                    source,
                    &format!("duplicate_of:{of}"),
                )?;
                body_done = true;
                return Ok(Written::Duplicate { of, cosine });
            }
            let active = tx.episodic_live_count()?;
            let mut evicted = Vec::new();
            if active as usize >= cap {
                if episode.preserve {
                    let snippet = validate::snippet(&checked.text);
                    insert_event(
                        tx,
                        &EventRecord {
                            memory_type: MEMORY_TYPE,
                            action: MemoryAuditAction::Rejected,
                            key: Some("episodic"),
                            old_value: None,
                            new_value: Some(&snippet),
                            source: Some(source),
                            confidence: None,
                            detail: Some("store_full"),
                        },
                    )?;
                    body_done = true;
                    return Ok(Written::Full);
                }
                let excess = active as usize - cap + 1;
                for id in tx.episodic_eviction_order(excess)? {
                    if tombstone(tx, id, source, "cap_eviction")? {
                        evicted.push(id);
                    }
                }
            }
            let blob = embedded.as_ref().map(|(vector, _, _)| vector_blob(vector));
            let vector = match (&blob, &embedded) {
                (Some(blob), Some((_, space, _))) => Some((blob.as_slice(), space.as_str())),
                _ => None,
            };
            let id = tx.insert_episodic(&NewEpisodicRow {
                text: &checked.text,
                tags_json: &checked.tags_json,
                importance: checked.importance,
                source,
                created_at,
                source_ref: episode.source_ref.as_deref(),
                scope,
                vector,
            })?;
            if let Some(evidence) = &evidence {
                tx.set_evidence(EvidenceLayer::Episodic, &id.to_string(), Some(evidence))?;
            }
            audit(
                tx,
                MemoryAuditAction::Created,
                id,
                None,
                Some(&checked.text),
                source,
                episode.source_ref.as_deref().unwrap_or(""),
            )?;
            let after = tx.bump_revision(Counter::Episodic)?;
            let text_after = tx.revision(Counter::EpisodicText)?;
            // The index changes before the commit; a refusal rolls the row back.
            if let Some(IndexAccess::Ready(index, _)) = &access {
                for id in &evicted {
                    if index.contains(*id as u64) {
                        index
                            .remove(*id as u64)
                            .map_err(|source| MemoryError::Index { operation: "evicting", source })?;
                    }
                }
                if let Some((vector, _, _)) = &embedded
                    && let Err(source) = index.add(id as u64, vector)
                {
                    self.distrust_index();
                    return Err(MemoryError::Index { operation: "adding an episodic vector", source });
                }
            } else if !evicted.is_empty() {
                self.distrust_index();
            }
            body_done = true;
            Ok(Written::Inserted { id, evicted, revisions: (before, after, text_before, text_after) })
        });
        let written = match written {
            Ok(written) => written,
            Err(error) => {
                if body_done {
                    // The commit failed after the index changed.
                    self.distrust_index();
                }
                return Err(error);
            }
        };
        match written {
            Written::Duplicate { of, cosine } => Ok(EpisodicOutcome::Duplicate { of, cosine }),
            Written::Full => Ok(EpisodicOutcome::StoreFull { cap }),
            Written::Inserted { id, evicted, revisions: (before, after, text_before, text_after) } => {
                self.advance_revision(before, after);
                self.keywords_after_write(
                    text_before,
                    text_after,
                    Some((id, &checked.text, &checked.tags_json)),
                    &evicted,
                );
                Ok(EpisodicOutcome::Inserted { id, has_vector: embedded.is_some(), evicted })
            }
        }
    }

    /// Tombstones row `id` (a `deleted` audit row records it); its vector
    /// leaves the index in the same critical section.
    pub fn delete_episodic(&self, id: i64) -> Result<DeleteOutcome> {
        self.refuse_when_damaged()?;
        let deleted = self.tombstone_episodic(&[id], "user_explicit", "deleted")?;
        Ok(if deleted.is_empty() { DeleteOutcome::NotFound } else { DeleteOutcome::Deleted })
    }

    /// Tombstones the active rows among `ids`; returns those that were active.
    pub(crate) fn tombstone_episodic(&self, ids: &[i64], source: &str, detail: &str) -> Result<Vec<i64>> {
        let _episodic = self.lock_episodic();
        let changed = self.rows().write("tombstoning episodic rows", |tx| {
            let [before, text_before] = revisions(tx)?;
            let mut done = Vec::new();
            for id in ids {
                if tombstone(tx, *id, source, detail)? {
                    done.push(*id);
                }
            }
            if done.is_empty() {
                return Ok(None);
            }
            let after = tx.bump_revision(Counter::Episodic)?;
            let text_after = tx.revision(Counter::EpisodicText)?;
            Ok(Some((done, before, after, text_before, text_after)))
        })?;
        let Some((done, before, after, text_before, text_after)) = changed else { return Ok(Vec::new()) };
        // Still under the episodic lock: the index never outlives a committed
        // tombstone for longer than this critical section.
        if let Some(index) = self.current_index() {
            for id in &done {
                if index.contains(*id as u64)
                    && let Err(error) = index.remove(*id as u64)
                {
                    tracing::warn!(%error, "could not drop a tombstoned vector");
                    self.distrust_index();
                }
            }
        }
        self.advance_revision(before, after);
        self.keywords_after_write(text_before, text_after, None, &done);
        Ok(done)
    }

    /// One row, active or not.
    pub fn get_episodic(&self, id: i64) -> Result<Option<EpisodicRecord>> {
        let space = self.space();
        let found = self.rows().read("reading an episodic row", |tx| {
            let Some((row, _)) = tx.episodic_row(id, None)?.filter(|(row, _)| !row.is_deleted) else { return Ok(None) };
            Ok(Some((row, tx.evidence(EvidenceLayer::Episodic, &id.to_string())?)))
        })?;
        Ok(found.map(|(row, evidence)| EpisodicRecord {
            evidence: evidence.map(crate::evidence::from_row),
            ..record_from_row(row, space.as_deref())
        }))
    }

    /// Active rows, newest first, `limit` from `offset`.
    pub fn list_episodic(&self, limit: usize, offset: usize) -> Result<Vec<EpisodicRecord>> {
        let space = self.space();
        let (rows, mut evidence) = self.rows().read("listing episodic rows", |tx| {
            let rows = tx.episodic_page(limit, offset)?;
            let evidence: std::collections::HashMap<String, crate::store::EvidenceRow> =
                tx.layer_evidence(EvidenceLayer::Episodic)?.into_iter().collect();
            Ok((rows, evidence))
        })?;
        Ok(rows
            .into_iter()
            .map(|row| {
                let found = evidence.remove(&row.id.to_string());
                EpisodicRecord {
                    evidence: found.map(crate::evidence::from_row),
                    ..record_from_row(row, space.as_deref())
                }
            })
            .collect())
    }

    /// [`list_episodic`](Self::list_episodic) of the rows `scopes` admits.
    pub fn list_episodic_in(&self, scopes: &ScopeFilter, limit: usize, offset: usize) -> Result<Vec<EpisodicRecord>> {
        if !scopes.narrows() {
            return self.list_episodic(limit, offset);
        }
        let space = self.space();
        let rows = self.rows().read("listing episodic rows", |tx| tx.episodic_page(usize::MAX, 0))?;
        Ok(rows
            .into_iter()
            .filter(|row| scopes.admits(&row.scope))
            .skip(offset)
            .take(limit)
            .map(|row| record_from_row(row, space.as_deref()))
            .collect())
    }

    /// Tombstones the active episodic rows that quote `old_value` (a
    /// superseded semantic value), matched case-insensitively as a whole
    /// phrase; values under 4 characters retire nothing. Returns the ids.
    pub fn retire_stale_episodic(&self, old_value: &str) -> Result<Vec<i64>> {
        self.refuse_when_damaged()?;
        let needle = old_value.trim().to_lowercase();
        if needle.chars().filter(|c| c.is_alphanumeric()).count() < STALE_QUOTE_MIN_CHARS {
            return Ok(Vec::new());
        }
        let words: Vec<String> =
            needle.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_owned).collect();
        if words.is_empty() {
            return Ok(Vec::new());
        }
        // Candidates from the backend (a phrase query where it has a keyword
        // index), confirmed on the text itself.
        let candidates = self.rows().read("finding stale episodic rows", |tx| tx.episodic_quoting(&needle, &words))?;
        let quoting: Vec<i64> = candidates
            .into_iter()
            .filter(|(_, text)| contains_phrase(&text.to_lowercase(), &needle))
            .map(|(id, _)| id)
            .collect();
        if quoting.is_empty() {
            return Ok(quoting);
        }
        self.tombstone_episodic(&quoting, "stale_retirement", "stale_retirement")
    }
}

/// The episodic and text revisions, in one read.
pub(super) fn revisions(tx: &mut dyn crate::store::StoreTx) -> Result<[i64; 2]> {
    let read = tx.revisions(&[Counter::Episodic, Counter::EpisodicText])?;
    Ok([read[0], read[1]])
}
