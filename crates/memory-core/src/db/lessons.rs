//! Lessons on [`MemoryDb`]: writing, listing and rendering them through
//! the rules of [`crate::lessons`].

use crate::constants::MAX_LESSONS_IN_CONTEXT;
use crate::db::MemoryDb;
use crate::error::{Rejected, Result};
use crate::lessons::{
    Lesson, LessonCategory, LessonOutcome, LessonWrite, apply_lesson, clean, lesson_confidence, lesson_key,
    lesson_text, newest_lessons, render_lessons, require_lesson_key, stored_part,
};
use crate::types::{DeleteOutcome, Evidence, Source};

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
                return Err(self.refuse("lesson", &key, &text, source.as_str(), Some(confidence), rejected));
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
