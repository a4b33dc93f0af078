//! Episodic writes: validation, screening, dedup, the cap, tombstones and
//! stale retirement.

use super::index::IndexAccess;
use super::{Episodic, EpisodicOutcome, EpisodicRecord, NewEpisode};
use crate::audit::insert_event;
use crate::clock::now_ms;
use crate::constants::{
    EPISODIC_DEDUP_COSINE, EPISODIC_MAX_CHARS, EPISODIC_MAX_SOURCE_REF_CHARS, EPISODIC_MAX_TAG_CHARS,
    EPISODIC_MAX_TAGS, EPISODIC_MIN_CHARS, STALE_QUOTE_MIN_CHARS,
};
use crate::error::{MemoryError, RefusedWrite, Rejected, Result};
use crate::scope::ScopeFilter;
use crate::store::EventRecord;
use crate::store::{
    Counter, EpisodicRow, EvidenceLayer, EvidenceRow, NewEpisodicRow, StoreTx, space_signature, vector_blob,
};
use crate::text::contains_phrase;
use crate::types::{DeleteOutcome, MemoryAuditAction};
use crate::validate;

pub(crate) const MEMORY_TYPE: &str = "episodic";
/// Dedup looks at this many nearest vectors first, then widens while every
/// one of them is a ghost above the threshold.
const DEDUP_PROBE: usize = 8;

/// The audit key of row `id`.
pub(crate) fn audit_key(id: i64) -> String {
    format!("episodic:{id}")
}

/// A refused episode, as its audit row records it.
fn refused<'a>(episode: &'a NewEpisode, attempted: &'a str) -> RefusedWrite<'a> {
    RefusedWrite {
        memory_type: MEMORY_TYPE,
        key: "episodic",
        attempted,
        source: episode.source.as_str(),
        confidence: None,
    }
}

/// Lower-cased tags of `[a-z0-9_.:-]`, cut to 32 characters, deduplicated,
/// at most 10; anything else in a tag is dropped.
pub(crate) fn sanitize_tags(tags: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for tag in tags {
        let clean: String = cairn_guard::strip_private(tag)
            .trim()
            .to_lowercase()
            .chars()
            .map(|c| if c.is_whitespace() { '-' } else { c })
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-'))
            .take(EPISODIC_MAX_TAG_CHARS)
            .collect();
        let clean = clean.trim_matches('-').to_owned();
        if !clean.is_empty() && !out.contains(&clean) {
            out.push(clean);
        }
        if out.len() == EPISODIC_MAX_TAGS {
            break;
        }
    }
    out
}

/// A write that passed the rules.
pub(crate) struct Checked {
    pub(crate) text: String,
    pub(crate) importance: f64,
    pub(crate) tags_json: String,
}

pub(crate) fn check(episode: &NewEpisode) -> Result<Checked, Rejected> {
    episode.source.validate()?;
    // Lengths count only the characters a reader sees (30 zero-width
    // spaces are no text at all).
    // What the user marked `<private>` is gone before any rule sees it.
    let unmarked = cairn_guard::strip_private(&episode.text);
    let raw = unmarked.trim();
    let length = |chars: usize| Rejected::TextLength { chars, min: EPISODIC_MIN_CHARS, max: EPISODIC_MAX_CHARS };
    let visible = validate::visible_chars(raw);
    if visible > EPISODIC_MAX_CHARS {
        return Err(length(visible));
    }
    if episode.importance.is_nan() {
        return Err(Rejected::InvalidImportance(episode.importance));
    }
    if let Some(source_ref) = &episode.source_ref
        && (source_ref.chars().count() > EPISODIC_MAX_SOURCE_REF_CHARS || source_ref.chars().any(char::is_control))
    {
        return Err(Rejected::InvalidSourceRef { max: EPISODIC_MAX_SOURCE_REF_CHARS });
    }
    if let Some(created_at) = episode.created_at {
        validate::created_at(created_at, now_ms())?;
    }
    // The screen sees the text as sent, before any redaction rewrites it.
    if let Some(finding) = cairn_guard::screen(raw) {
        return Err(Rejected::Injection { rule: finding.rule });
    }
    // Stored as a user will see it later: credentials redacted, control
    // characters gone.
    let text = validate::scrub_text(raw).map_or_else(|| raw.to_owned(), |scrubbed| scrubbed.trim().to_owned());
    let visible = validate::visible_chars(&text);
    if !(EPISODIC_MIN_CHARS..=EPISODIC_MAX_CHARS).contains(&visible) {
        return Err(length(visible));
    }
    let tags = sanitize_tags(&episode.tags);
    Ok(Checked {
        text,
        importance: episode.importance.clamp(0.0, 1.0),
        tags_json: serde_json::to_string(&tags).expect("strings serialise"),
    })
}

/// The first active row whose vector is above the dedup threshold; ghosts
/// (tombstoned rows whose vector an index still holds) are skipped.
pub(crate) fn find_near_duplicate(
    tx: &mut dyn StoreTx,
    access: &IndexAccess,
    vector: &[f32],
    space: &str,
) -> Result<Option<(i64, f32)>> {
    match access {
        IndexAccess::Ready(index, vectors) => {
            let mut probe = DEDUP_PROBE;
            let mut probes = super::index::Probes::default();
            loop {
                let hits = super::index::exact_hits(tx, index, vectors.as_deref(), space, vector, probe, &mut probes)?;
                for hit in &hits {
                    if hit.cosine <= EPISODIC_DEDUP_COSINE {
                        return Ok(None);
                    }
                    if tx.episodic_is_active(hit.id as i64)? {
                        return Ok(Some((hit.id as i64, hit.cosine)));
                    }
                }
                if hits.len() < probe {
                    return Ok(None);
                }
                probe *= 4;
            }
        }
        IndexAccess::Scan => {
            let best = super::search::scan(tx, space, vector, 1)?.into_iter().next();
            Ok(best.filter(|hit| hit.cosine > EPISODIC_DEDUP_COSINE).map(|hit| (hit.id as i64, hit.cosine)))
        }
    }
}

pub(crate) fn audit(
    tx: &mut dyn StoreTx,
    action: MemoryAuditAction,
    id: i64,
    old: Option<&str>,
    new: Option<&str>,
    source: &str,
    detail: &str,
) -> Result<()> {
    let key = audit_key(id);
    let old = old.map(validate::snippet);
    let new = new.map(validate::snippet);
    insert_event(
        tx,
        &EventRecord {
            memory_type: MEMORY_TYPE,
            action,
            key: Some(&key),
            old_value: old.as_deref(),
            new_value: new.as_deref(),
            source: Some(source),
            confidence: None,
            detail: Some(detail),
        },
    )
}

/// Tombstones `id` (if active) with an audit row; true when it was active.
pub(crate) fn tombstone(tx: &mut dyn StoreTx, id: i64, source: &str, detail: &str) -> Result<bool> {
    match tx.tombstone_episodic(id)? {
        Some(text) => {
            audit(tx, MemoryAuditAction::Deleted, id, Some(&text), None, source, detail)?;
            Ok(true)
        }
        None => Ok(false),
    }
}

pub(crate) fn record_from_row(row: EpisodicRow, space: Option<&str>) -> EpisodicRecord {
    EpisodicRecord {
        scope: crate::scope::Scope::parse(&row.scope).unwrap_or_default(),
        has_vector: row.has_vector && space.is_some() && row.embedding_space.as_deref() == space,
        id: row.id,
        tags: serde_json::from_str(&row.tags_json).unwrap_or_default(),
        text: row.text,
        importance: row.importance,
        created_at: row.created_at,
        last_accessed: row.last_accessed,
        source_ref: row.source_ref,
        source: row.source,
        evidence: None,
    }
}

/// What an episodic write's transaction decided.
pub(crate) enum Written {
    Duplicate { of: i64, cosine: f32 },
    Full,
    Inserted { id: i64, evicted: Vec<i64>, revisions: (i64, i64, i64, i64) },
}

/// The active row of `scope` that `text` duplicates: the same text, or a
/// vector above the dedup threshold. A row of another scope is not a
/// duplicate: its readers are others.
fn duplicate_in_scope(
    tx: &mut dyn StoreTx,
    text: &str,
    embedded: Option<&(Vec<f32>, String, usize)>,
    access: Option<&IndexAccess>,
    scope: &str,
) -> Result<Option<(i64, f32)>> {
    let duplicate = match (tx.episodic_with_text(text)?, embedded, access) {
        (Some(id), _, _) => Some((id, 1.0)),
        (None, Some((vector, space, _)), Some(access)) => find_near_duplicate(tx, access, vector, space)?,
        _ => None,
    };
    Ok(match duplicate {
        Some((of, cosine)) => {
            let same_scope = tx.episodic_row(of, None)?.is_some_and(|(row, _)| row.scope == scope);
            same_scope.then_some((of, cosine))
        }
        None => None,
    })
}

/// Audits an episode skipped as a duplicate of the active row `of`.
fn audit_duplicate(tx: &mut dyn StoreTx, of: i64, text: &str, source: &str) -> Result<()> {
    audit(tx, MemoryAuditAction::ConflictSkip, of, None, Some(text), source, &format!("duplicate_of:{of}"))
}

/// Audits an episode refused because the store is at its cap and the
/// writer asked to evict nothing.
fn audit_store_full(tx: &mut dyn StoreTx, text: &str, source: &str) -> Result<()> {
    let snippet = validate::snippet(text);
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
    )
}

/// Tombstones the `excess` rows the cap evicts first; returns those that were active.
fn evict(tx: &mut dyn StoreTx, excess: usize, source: &str) -> Result<Vec<i64>> {
    let mut evicted = Vec::new();
    for id in tx.episodic_eviction_order(excess)? {
        if tombstone(tx, id, source, "cap_eviction")? {
            evicted.push(id);
        }
    }
    Ok(evicted)
}

impl Checked {
    /// The row to insert for `episode`, with its vector and space if embedded.
    fn row<'a>(
        &'a self,
        episode: &'a NewEpisode,
        created_at: i64,
        vector: Option<(&'a [u8], &'a str)>,
    ) -> NewEpisodicRow<'a> {
        NewEpisodicRow {
            text: &self.text,
            tags_json: &self.tags_json,
            importance: self.importance,
            source: episode.source.as_str(),
            created_at,
            source_ref: episode.source_ref.as_deref(),
            scope: episode.scope.as_str(),
            vector,
        }
    }
}

impl Episodic<'_> {
    /// The work of [`MemoryDb::check_episode`](crate::MemoryDb::check_episode).
    pub(crate) fn check_episode(&self, episode: &NewEpisode) -> std::result::Result<(), crate::Rejected> {
        let checked = check(episode)?;
        if let Some(evidence) = &episode.evidence {
            crate::evidence::check(evidence)?;
        }
        match self.host.refuse_forgotten(&checked.text, None) {
            Ok(verdict) => verdict,
            // The write that follows meets the same store and reports its failure.
            Err(error) => {
                tracing::warn!(%error, "could not read the forgotten items");
                Ok(())
            }
        }
    }

    /// The work of [`MemoryDb::write_episodic`](crate::MemoryDb::write_episodic).
    pub(crate) fn write_episodic(&self, episode: &NewEpisode) -> Result<EpisodicOutcome> {
        self.write_episodic_capped(episode, self.episodic_config.cap)
    }

    /// The work of [`MemoryDb::write_episodic_capped`](crate::MemoryDb::write_episodic_capped).
    pub(crate) fn write_episodic_capped(&self, episode: &NewEpisode, cap: usize) -> Result<EpisodicOutcome> {
        let _span = tracing::debug_span!("write_episodic").entered();
        self.refuse_when_damaged()?;
        if cap == 0 {
            return Err(MemoryError::InvalidConfig("the episodic cap must be at least 1".to_owned()));
        }
        let (checked, evidence) = self.check_or_refuse(episode)?;
        let scope = episode.scope.as_str();
        // Embed first, outside every lock, remembering the space generation.
        let (mut embedded, generation) =
            if episode.defer_embedding { (None, 0) } else { self.embed_for_write(&checked.text) };
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
            if let Some((of, cosine)) =
                duplicate_in_scope(tx, &checked.text, embedded.as_ref(), access.as_ref(), scope)?
            {
                audit_duplicate(tx, of, &checked.text, source)?;
                body_done = true;
                return Ok(Written::Duplicate { of, cosine });
            }
            let active = tx.episodic_live_count()?;
            let mut evicted = Vec::new();
            if active as usize >= cap {
                if episode.preserve {
                    audit_store_full(tx, &checked.text, source)?;
                    body_done = true;
                    return Ok(Written::Full);
                }
                evicted = evict(tx, active as usize - cap + 1, source)?;
            }
            let blob = embedded.as_ref().map(|(vector, space, _)| (vector_blob(vector), space.as_str()));
            let vector = blob.as_ref().map(|(blob, space)| (blob.as_slice(), *space));
            let id = tx.insert_episodic(&checked.row(episode, created_at, vector))?;
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
            self.index_after_insert(
                access.as_ref(),
                id,
                embedded.as_ref().map(|(vector, _, _)| vector.as_slice()),
                &evicted,
            )?;
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

    /// The episode's checked text and evidence; a refusal (a rule, the
    /// evidence, a forgotten text) is recorded and returned.
    fn check_or_refuse(&self, episode: &NewEpisode) -> Result<(Checked, Option<EvidenceRow>)> {
        let checked = check(episode)
            .and_then(|checked| Ok((checked, episode.evidence.as_ref().map(crate::evidence::check).transpose()?)));
        let (checked, evidence) = match checked {
            Ok(checked) => checked,
            Err(rejected) => return Err(self.host.refuse(refused(episode, &episode.text), rejected)),
        };
        if let Err(rejected) = self.host.refuse_forgotten(&checked.text, None)? {
            return Err(self.host.refuse(refused(episode, &checked.text), rejected));
        }
        Ok((checked, evidence))
    }

    /// The vector of `text` in the configured embedder's space (none when
    /// the model is not ready or fails), and the space generation it was
    /// taken in.
    fn embed_for_write(&self, text: &str) -> (Option<(Vec<f32>, String, usize)>, u64) {
        let (embedder, generation) = self.embedder_with_generation();
        let Some(embedder) = embedder.filter(|embedder| embedder.is_ready()) else { return (None, generation) };
        let embedded = match embedder.embed(text) {
            Ok(mut vector) if vector.len() == embedder.dim() => {
                cairn_embedder::l2_normalize(&mut vector);
                Some((vector, space_signature(&*embedder), embedder.dim()))
            }
            Ok(vector) => {
                tracing::warn!(got = vector.len(), "embedder returned a wrong-sized vector");
                None
            }
            Err(error) => {
                tracing::debug!(%error, "embedding failed; storing without a vector");
                None
            }
        };
        (embedded, generation)
    }

    /// Keeps a ready index in step with an insert inside its transaction:
    /// the evicted rows out, the new vector in. Without a ready index an
    /// eviction leaves the index untrusted (rebuilt later).
    fn index_after_insert(
        &self,
        access: Option<&IndexAccess>,
        id: i64,
        vector: Option<&[f32]>,
        evicted: &[i64],
    ) -> Result<()> {
        if let Some(IndexAccess::Ready(index, _)) = access {
            for id in evicted {
                if index.contains(*id as u64) {
                    index.remove(*id as u64).map_err(|source| MemoryError::Index { operation: "evicting", source })?;
                }
            }
            if let Some(vector) = vector
                && let Err(source) = index.add(id as u64, vector)
            {
                self.distrust_index();
                return Err(MemoryError::Index { operation: "adding an episodic vector", source });
            }
        } else if !evicted.is_empty() {
            self.distrust_index();
        }
        Ok(())
    }

    /// The work of [`MemoryDb::delete_episodic`](crate::MemoryDb::delete_episodic).
    pub(crate) fn delete_episodic(&self, id: i64) -> Result<DeleteOutcome> {
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

    /// The work of [`MemoryDb::get_episodic`](crate::MemoryDb::get_episodic).
    pub(crate) fn get_episodic(&self, id: i64) -> Result<Option<EpisodicRecord>> {
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

    /// The work of [`MemoryDb::list_episodic`](crate::MemoryDb::list_episodic).
    pub(crate) fn list_episodic(&self, limit: usize, offset: usize) -> Result<Vec<EpisodicRecord>> {
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

    /// The work of [`MemoryDb::list_episodic_in`](crate::MemoryDb::list_episodic_in).
    pub(crate) fn list_episodic_in(
        &self,
        scopes: &ScopeFilter,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<EpisodicRecord>> {
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

    /// The work of [`MemoryDb::retire_stale_episodic`](crate::MemoryDb::retire_stale_episodic).
    pub(crate) fn retire_stale_episodic(&self, old_value: &str) -> Result<Vec<i64>> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_sanitised() {
        let tags: Vec<String> = ["  Trip ", "trip", "café au lait", "a\"b)c", "", "x".repeat(40).as_str()]
            .iter()
            .map(|t| t.to_string())
            .collect();
        assert_eq!(sanitize_tags(&tags), vec!["trip", "caf-au-lait", "abc", &"x".repeat(32)]);
        let many: Vec<String> = (0..20).map(|i| format!("t{i}")).collect();
        assert_eq!(sanitize_tags(&many).len(), EPISODIC_MAX_TAGS);
    }

    #[test]
    fn phrases_match_on_word_boundaries() {
        assert!(contains_phrase("i moved to berlin last year", "berlin"));
        assert!(!contains_phrase("i love berliners", "berlin"));
        assert!(contains_phrase("berlin", "berlin"));
        assert!(contains_phrase("xberlin, berlin.", "berlin"));
    }
}
