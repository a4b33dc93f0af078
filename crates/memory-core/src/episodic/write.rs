//! Episodic writes: validation, screening, dedup, the cap, tombstones and
//! stale retirement.

use super::index::IndexAccess;
use super::{EpisodicRecord, NewEpisode};
use crate::audit::insert_event;
use crate::clock::now_ms;
use crate::constants::{
    EPISODIC_DEDUP_COSINE, EPISODIC_MAX_CHARS, EPISODIC_MAX_SOURCE_REF_CHARS, EPISODIC_MAX_TAG_CHARS,
    EPISODIC_MAX_TAGS, EPISODIC_MIN_CHARS,
};
use crate::error::{Rejected, Result};
use crate::store::EventRecord;
use crate::store::{EpisodicRow, StoreTx};
use crate::types::MemoryAuditAction;
use crate::validate;

pub(crate) const MEMORY_TYPE: &str = "episodic";
/// Dedup looks at this many nearest vectors first, then widens while every
/// one of them is a ghost above the threshold.
const DEDUP_PROBE: usize = 8;

/// The audit key of row `id`.
pub(crate) fn audit_key(id: i64) -> String {
    format!("episodic:{id}")
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

/// Whether `needle` occurs in `haystack` on word boundaries.
pub(crate) fn contains_phrase(haystack: &str, needle: &str) -> bool {
    let mut start = 0;
    while let Some(found) = haystack[start..].find(needle) {
        let at = start + found;
        let end = at + needle.len();
        let before_ok = haystack[..at].chars().next_back().is_none_or(|c| !c.is_alphanumeric());
        let after_ok = haystack[end..].chars().next().is_none_or(|c| !c.is_alphanumeric());
        if before_ok && after_ok {
            return true;
        }
        start = at + needle.chars().next().map_or(1, char::len_utf8);
    }
    false
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
