//! Lessons: user-taught corrections stored as `lesson.<hash>` semantic
//! entries, deduplicated on write and rendered as `[Learned corrections]`:
//! the rules, and [`MemoryDb`]'s methods that write, list and render them.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::audit::insert_event;
use crate::constants::{
    LESSON_CONFIDENCE_IMPORT, LESSON_CONFIDENCE_MIGRATION, LESSON_CONFIDENCE_USER, LESSON_EMBEDDING_DUPLICATE,
    LESSON_HASH_HEX_CHARS, LESSON_NOT_SEPARATOR, LESSON_PREFIX, LESSON_TOPIC_OVERLAP, LESSONS_BLOCK_HEADER,
    LESSONS_BLOCK_INSTRUCTION, MAX_LESSONS_IN_CONTEXT,
};
use crate::db::MemoryDb;
use crate::error::{MemoryError, RefusedWrite, Rejected, Result};
use crate::keywords;
use crate::semantic::{PreparedWrite, apply_delete, apply_write, ladder};
use crate::store::EventRecord;
use crate::store::{EvidenceLayer, EvidenceRow, SemanticRow, StoreTx};
use crate::types::{DeleteOutcome, Evidence, MemoryAuditAction, SkipReason, Source, WriteOutcome};
use crate::validate;

/// What a lesson is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LessonCategory {
    /// How to use a tool.
    Tool,
    /// What the user prefers.
    Preference,
    /// A fact to keep in mind.
    Knowledge,
}

impl LessonCategory {
    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            LessonCategory::Tool => "tool",
            LessonCategory::Preference => "preference",
            LessonCategory::Knowledge => "knowledge",
        }
    }
}

impl FromStr for LessonCategory {
    type Err = Rejected;

    fn from_str(name: &str) -> Result<Self, Rejected> {
        match name {
            "tool" => Ok(LessonCategory::Tool),
            "preference" => Ok(LessonCategory::Preference),
            "knowledge" => Ok(LessonCategory::Knowledge),
            other => Err(Rejected::InvalidCategory(crate::validate::cut(other, 64))),
        }
    }
}

impl fmt::Display for LessonCategory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A stored lesson.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Lesson {
    /// `lesson.<hash>`.
    pub key: String,
    /// What to do.
    pub rule: String,
    /// What not to do instead, if given.
    pub not: Option<String>,
    /// What it is about.
    pub category: LessonCategory,
    /// Who taught it.
    pub source: Source,
    /// 1.0, or 0.9 for migrated and imported lessons.
    pub confidence: f64,
    /// When it was stored (Unix milliseconds).
    pub updated_at: i64,
    /// Where consolidation found it; `None` for lessons taught otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence: Option<crate::types::Evidence>,
}

impl Lesson {
    /// `rule` or `rule — NOT: negative`.
    pub fn text(&self) -> String {
        lesson_text(&self.rule, self.not.as_deref())
    }
}

/// Which dedup rule matched an older lesson.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DedupRule {
    /// One text contains the other.
    Substring,
    /// At least half of the smaller keyword set is shared.
    TopicOverlap,
    /// Embedding cosine above 0.85.
    Embedding,
}

impl DedupRule {
    fn as_str(self) -> &'static str {
        match self {
            DedupRule::Substring => "substring",
            DedupRule::TopicOverlap => "topic_overlap",
            DedupRule::Embedding => "embedding",
        }
    }
}

/// An older lesson a new one replaced.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplacedLesson {
    /// Key of the tombstoned lesson.
    pub key: String,
    /// The rule that matched it.
    pub rule: DedupRule,
}

/// What [`MemoryDb::write_lesson`](crate::MemoryDb::write_lesson) did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LessonOutcome {
    /// The outcome for the new lesson's key.
    pub outcome: WriteOutcome,
    /// Older lessons tombstoned in the same transaction.
    pub replaced: Vec<ReplacedLesson>,
}

pub(crate) fn lesson_text(rule: &str, not: Option<&str>) -> String {
    match not {
        Some(not) => format!("{rule}{LESSON_NOT_SEPARATOR}{not}"),
        None => rule.to_owned(),
    }
}

/// Splits a stored lesson value back into rule and negative.
pub(crate) fn split_text(text: &str) -> (String, Option<String>) {
    match text.split_once(LESSON_NOT_SEPARATOR) {
        Some((rule, not)) => (rule.to_owned(), Some(not.to_owned())),
        None => (text.to_owned(), None),
    }
}

/// Lower-cased, whitespace collapsed: what substring dedup and the key hash see.
pub(crate) fn normalize(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

/// `lesson.<first 16 hex of sha256(normalised text)>`, over the text as it
/// is stored (credentials redacted, control characters removed): a rule
/// and the same rule with its credential redacted have one key.
pub fn lesson_key(rule: &str, not: Option<&str>) -> String {
    let rule = stored_part(rule);
    let not = not.map(stored_part).filter(|not| !not.is_empty());
    let digest = Sha256::digest(normalize(&lesson_text(&rule, not.as_deref())).as_bytes());
    format!("{LESSON_PREFIX}{}", &hex::encode(digest)[..LESSON_HASH_HEX_CHARS])
}

/// Confidence a lesson from `source` is stored with: 0.9 for a migrated or
/// imported lesson, 1.0 otherwise.
pub fn lesson_confidence(source: &Source) -> f64 {
    match source {
        Source::Migration => LESSON_CONFIDENCE_MIGRATION,
        Source::Import => LESSON_CONFIDENCE_IMPORT,
        _ => LESSON_CONFIDENCE_USER,
    }
}

/// Cleans a rule or negative: `<private>` spans withheld, trimmed, one line.
pub(crate) fn clean(text: &str) -> String {
    cairn_guard::strip_private(text).split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A rule or negative as it is stored, whatever path wrote it: one line,
/// credentials and exfiltration URLs redacted and control characters
/// removed, like every string of a semantic value
/// ([`validate::scrub_text`]). The injection screen sees the text before
/// this.
pub(crate) fn stored_part(text: &str) -> String {
    let line = clean(text);
    match validate::scrub_text(&line) {
        Some(scrubbed) => clean(&scrubbed),
        None => line,
    }
}

/// An existing lesson as dedup sees it.
pub(crate) struct Candidate {
    pub(crate) key: String,
    pub(crate) text: String,
    pub(crate) source: String,
    pub(crate) confidence: f64,
    pub(crate) vector: Option<Vec<f32>>,
}

/// The dedup verdict for a new lesson against the stored ones.
#[derive(Debug, PartialEq)]
pub(crate) enum Dedup {
    /// An existing lesson already covers it.
    Duplicate { existing_key: String },
    /// Write it, tombstoning these first.
    Write { replace: Vec<(usize, DedupRule)> },
}

/// Substring, then topic overlap, then embedding similarity, as the spec orders them.
pub(crate) fn dedup(text: &str, rule: &str, vector: Option<&[f32]>, candidates: &[Candidate]) -> Dedup {
    let normalized = normalize(text);
    let mut replace: Vec<(usize, DedupRule)> = Vec::new();
    let taken = |replace: &Vec<(usize, DedupRule)>, index: usize| replace.iter().any(|(i, _)| *i == index);
    for (index, candidate) in candidates.iter().enumerate() {
        let existing = normalize(&candidate.text);
        if existing.contains(&normalized) {
            return Dedup::Duplicate { existing_key: candidate.key.clone() };
        }
        if normalized.contains(&existing) {
            replace.push((index, DedupRule::Substring));
        }
    }
    let topic: BTreeSet<String> = keywords::stems(rule);
    for (index, candidate) in candidates.iter().enumerate() {
        if taken(&replace, index) {
            continue;
        }
        let (candidate_rule, _) = split_text(&candidate.text);
        if keywords::overlap(&topic, &keywords::stems(&candidate_rule)) >= LESSON_TOPIC_OVERLAP {
            replace.push((index, DedupRule::TopicOverlap));
        }
    }
    if let Some(vector) = vector {
        for (index, candidate) in candidates.iter().enumerate() {
            if taken(&replace, index) {
                continue;
            }
            let Some(existing) = &candidate.vector else { continue };
            if existing.len() == vector.len() && cairn_embedder::cosine(vector, existing) > LESSON_EMBEDDING_DUPLICATE {
                if text.chars().count() > candidate.text.chars().count() {
                    replace.push((index, DedupRule::Embedding));
                } else {
                    return Dedup::Duplicate { existing_key: candidate.key.clone() };
                }
            }
        }
    }
    Dedup::Write { replace }
}

/// The live lessons other than `except`, oldest first, with their vectors in `space`.
fn load_candidates(tx: &mut dyn StoreTx, space: Option<&str>, except: &str) -> Result<Vec<Candidate>> {
    let mut rows = tx.live_semantic(LESSON_PREFIX)?;
    rows.retain(|row| row.key != except);
    rows.sort_by(|a, b| a.updated_at.cmp(&b.updated_at).then_with(|| a.key.cmp(&b.key)));
    let mut candidates = Vec::with_capacity(rows.len());
    for row in rows {
        let text = match serde_json::from_str::<serde_json::Value>(&row.value) {
            Ok(serde_json::Value::String(text)) => text,
            _ => continue, // A hand-written non-string lesson value takes no part in dedup.
        };
        let vector = match (space, &row.embedding_space) {
            (Some(space), Some(entry_space)) if space == entry_space => tx.semantic_vector(&row.key, space)?,
            _ => None,
        };
        candidates.push(Candidate { key: row.key, text, source: row.source, confidence: row.confidence, vector });
    }
    Ok(candidates)
}

/// A lesson that passed the rules, with its vector computed.
pub(crate) struct LessonWrite<'a> {
    pub(crate) key: String,
    pub(crate) rule: &'a str,
    pub(crate) text: &'a str,
    pub(crate) value_text: &'a str,
    pub(crate) category: LessonCategory,
    pub(crate) source: &'a Source,
    pub(crate) confidence: f64,
    pub(crate) vector: Option<(Vec<f32>, String)>,
    /// The current embedder's space.
    pub(crate) space: Option<&'a str>,
    /// Where consolidation found it (checked).
    pub(crate) evidence: Option<&'a EvidenceRow>,
}

/// Dedup, replacement and the write of a lesson, inside the caller's transaction.
pub(crate) fn apply_lesson(tx: &mut dyn StoreTx, lesson: LessonWrite<'_>) -> Result<LessonOutcome> {
    let LessonWrite { key, rule, text, value_text, category, source, confidence, vector, space, evidence } = lesson;
    let candidates = load_candidates(tx, space, &key)?;
    let verdict = dedup(text, rule, vector.as_ref().map(|(vector, _)| vector.as_slice()), &candidates);
    let skip = |tx: &mut dyn StoreTx, key: String, reason: SkipReason| -> Result<LessonOutcome> {
        record_lesson_skip(tx, &key, value_text, source, confidence, &reason)?;
        Ok(LessonOutcome { outcome: WriteOutcome::Skipped { key, reason }, replaced: Vec::new() })
    };
    let replace = match verdict {
        Dedup::Duplicate { existing_key } => return skip(tx, key, SkipReason::DuplicateLesson { existing_key }),
        Dedup::Write { replace } => replace,
    };
    if *source == Source::Import
        && let Some((index, _)) = replace.first()
    {
        // An import never tombstones native memory: the stored lesson wins.
        let existing_key = candidates[*index].key.clone();
        return skip(tx, key, SkipReason::ExistingWins { existing_key });
    }
    for (index, _) in &replace {
        let candidate = &candidates[*index];
        if let Some(reason) = ladder(candidate.confidence, &candidate.source, confidence, source) {
            return skip(tx, key, reason);
        }
    }
    let mut replaced = Vec::new();
    for (index, dedup_rule) in replace {
        let old_key = &candidates[index].key;
        let detail = format!("replaced_by:{key} ({})", dedup_rule.as_str());
        if apply_delete(tx, old_key, source, Some(&detail))? == DeleteOutcome::Deleted {
            tracing::debug!(old = %old_key, new = %key, rule = dedup_rule.as_str(), "lesson replaced");
            replaced.push(ReplacedLesson { key: old_key.clone(), rule: dedup_rule });
        }
    }
    let outcome = apply_write(
        tx,
        &PreparedWrite {
            key: &key,
            value_text,
            confidence,
            source,
            category: Some(category.as_str()),
            vector,
            evidence,
        },
    )?;
    Ok(LessonOutcome { outcome, replaced })
}

fn record_lesson_skip(
    tx: &mut dyn StoreTx,
    key: &str,
    value_text: &str,
    source: &Source,
    confidence: f64,
    reason: &SkipReason,
) -> Result<()> {
    tracing::debug!(key, reason = reason.code(), "lesson skipped");
    let detail = match reason {
        SkipReason::DuplicateLesson { existing_key } | SkipReason::ExistingWins { existing_key } => {
            format!("{}:{existing_key}", reason.code())
        }
        other => other.code().to_owned(),
    };
    let new = cairn_guard::redact_all(value_text);
    insert_event(
        tx,
        &EventRecord {
            memory_type: "lesson",
            action: MemoryAuditAction::ConflictSkip,
            key: Some(key),
            old_value: None,
            new_value: Some(&new),
            source: Some(source.as_str()),
            confidence: Some(confidence),
            detail: Some(&detail),
        },
    )
}

/// The public form of a stored lesson row.
pub(crate) fn lesson_from_row(row: SemanticRow, evidence: Option<EvidenceRow>) -> Result<Lesson> {
    let value: serde_json::Value = serde_json::from_str(&row.value).map_err(|error| MemoryError::CorruptRow {
        table: "semantic_memory",
        reason: format!("value of {}: {error}", row.key),
    })?;
    let (rule, not) = split_text(&crate::validate::display_value(&value));
    Ok(Lesson {
        key: row.key,
        rule,
        not,
        // Lessons written directly through `write_semantic` carry no category.
        category: row.category.as_deref().and_then(|name| name.parse().ok()).unwrap_or(LessonCategory::Knowledge),
        source: row.source.parse().unwrap_or(Source::Other(row.source)),
        confidence: row.confidence,
        updated_at: row.updated_at,
        evidence: evidence.map(crate::evidence::from_row),
    })
}

/// Live lessons, newest first, at most `limit`.
pub(crate) fn newest_lessons(tx: &mut dyn StoreTx, limit: usize) -> Result<Vec<Lesson>> {
    let mut rows = tx.live_semantic(LESSON_PREFIX)?;
    rows.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then_with(|| a.key.cmp(&b.key)));
    rows.truncate(limit);
    rows.into_iter()
        .map(|row| {
            let evidence = tx.evidence(EvidenceLayer::Semantic, &row.key)?;
            lesson_from_row(row, evidence)
        })
        .collect()
}

/// Renders lessons as the `[Learned corrections]` block (redacted, one line each).
pub fn render_lessons(lessons: &[Lesson]) -> String {
    if lessons.is_empty() {
        return String::new();
    }
    let mut block = format!("{LESSONS_BLOCK_HEADER}\n{LESSONS_BLOCK_INSTRUCTION}");
    for lesson in lessons.iter().take(MAX_LESSONS_IN_CONTEXT) {
        let line = lesson.text().replace(['\n', '\r'], " ");
        block.push_str("\n- ");
        block.push_str(&cairn_guard::redact_all(&line));
    }
    block
}

/// Refuses a key outside the `lesson.` namespace, so lesson operations can
/// never touch other semantic entries.
pub(crate) fn require_lesson_key(key: &str) -> Result<()> {
    if key.starts_with(LESSON_PREFIX) {
        return Ok(());
    }
    Err(Rejected::PrefixNotAllowed { key: crate::validate::cut(key, 100), allowed: LESSON_PREFIX.into() }.into())
}

impl MemoryDb {
    /// Stores a lesson as a `lesson.<hash>` semantic entry with value
    /// `rule` or `rule — NOT: negative`, at confidence 1.0 (0.9 for
    /// [`Source::Migration`]). The rules and the injection screen see the
    /// text as sent; what is stored has credentials redacted and control
    /// characters removed, whichever surface or import wrote it.
    ///
    /// Before writing, in one transaction: a stored lesson containing the
    /// new text makes this a duplicate (skipped); stored lessons the new
    /// text contains, then lessons sharing at least half of the smaller
    /// keyword set, are replaced (tombstoned); then a stored lesson with
    /// embedding cosine above 0.85 is replaced when the new text is longer
    /// and makes this a duplicate otherwise. A replacement obeys the
    /// conflict ladder: only a user-explicit lesson replaces a
    /// user-explicit one. A [`Source::Import`] lesson never replaces: where
    /// it would, it is skipped ([`SkipReason::ExistingWins`](crate::SkipReason::ExistingWins)) and the stored
    /// lesson stays; it never overwrites or revives its own key either.
    pub fn write_lesson(
        &self,
        rule: &str,
        not: Option<&str>,
        category: LessonCategory,
        source: Source,
    ) -> Result<LessonOutcome> {
        self.write_lesson_with_evidence(rule, not, category, source, None)
    }

    /// [`write_lesson`](Self::write_lesson) with the evidence consolidation
    /// found for it (the one write path), checked and stored as
    /// [`write_semantic_with_evidence`](Self::write_semantic_with_evidence) does.
    pub fn write_lesson_with_evidence(
        &self,
        rule: &str,
        not: Option<&str>,
        category: LessonCategory,
        source: Source,
        evidence: Option<&Evidence>,
    ) -> Result<LessonOutcome> {
        let _span = tracing::debug_span!("write_lesson", category = category.as_str()).entered();
        // The rules and the screen see the lesson as sent; what is stored
        // (and keyed, deduplicated, embedded and shown) has credentials
        // redacted and control characters removed, on every path.
        let sent_rule = clean(rule);
        let sent_not = not.map(clean).filter(|not| !not.is_empty());
        let sent = serde_json::Value::String(lesson_text(&sent_rule, sent_not.as_deref()));
        let rule = stored_part(&sent_rule);
        let not = sent_not.as_deref().map(stored_part).filter(|not| !not.is_empty());
        let text = lesson_text(&rule, not.as_deref());
        let key = lesson_key(&rule, not.as_deref());
        let confidence = lesson_confidence(&source);
        let checked = if rule.is_empty() {
            Err(Rejected::EmptyLesson)
        } else {
            self.check_write(&key, &sent, confidence, &source)
                .and_then(|_| evidence.map(crate::evidence::check).transpose())
        };
        let evidence = match checked {
            Ok(evidence) => evidence,
            Err(rejected) => {
                return Err(self.refuse(
                    RefusedWrite {
                        memory_type: "lesson",
                        key: &key,
                        attempted: &text,
                        source: source.as_str(),
                        confidence: Some(confidence),
                    },
                    rejected,
                ));
            }
        };
        let value_text = serde_json::to_string(&text).expect("a string always serialises");
        // Embed before taking the write lock.
        let vector = self.try_embed(&text);
        let space = self.space();
        self.rows().write("writing a lesson", |tx| {
            apply_lesson(
                tx,
                LessonWrite {
                    key,
                    rule: &rule,
                    text: &text,
                    value_text: &value_text,
                    category,
                    source: &source,
                    confidence,
                    vector,
                    space: space.as_deref(),
                    evidence: evidence.as_ref(),
                },
            )
        })
    }

    /// Live lessons, newest first, at most `limit`.
    pub fn get_lessons(&self, limit: usize) -> Result<Vec<Lesson>> {
        self.rows().read("reading lessons", |tx| newest_lessons(tx, limit))
    }

    /// Tombstones a lesson by key.
    pub fn delete_lesson(&self, key: &str, source: Source) -> Result<DeleteOutcome> {
        require_lesson_key(key)?;
        self.delete_semantic(key, source)
    }

    /// The `[Learned corrections]` block with at most 50 lessons, newest
    /// first; an empty string when there are none.
    pub fn lessons_context(&self) -> Result<String> {
        Ok(render_lessons(&self.get_lessons(MAX_LESSONS_IN_CONTEXT)?))
    }
}
