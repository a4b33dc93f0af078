//! Helpers shared by the context crate's integration tests.

use cairn_memory_core::{Lesson, LessonCategory, Source, lesson_key};

/// `count` distinct knowledge lessons, each rule padded with `chars` filler characters.
pub fn long_lessons(count: usize, chars: usize) -> Vec<Lesson> {
    (0..count)
        .map(|index| {
            let rule = format!("lesson {index:02} {}", "x".repeat(chars));
            Lesson {
                key: lesson_key(&rule, None),
                rule,
                not: None,
                category: LessonCategory::Knowledge,
                source: Source::UserExplicit,
                confidence: 1.0,
                updated_at: index as i64,
                evidence: None,
            }
        })
        .collect()
}
