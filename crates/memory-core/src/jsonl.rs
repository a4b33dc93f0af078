//! The `lessons.jsonl` fallback, for when no database is available, and
//! [`LessonBook`], which picks between it and the database.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::clock::now_ms;
use crate::constants::{MAX_JSONL_LESSONS, MAX_LESSONS_IN_CONTEXT};
use crate::db::MemoryDb;
use crate::error::{MemoryError, Rejected, Result};
use crate::lessons::{
    Dedup, DedupRule, Lesson, LessonCategory, LessonOutcome, ReplacedLesson, dedup, lesson_confidence, lesson_key,
    lesson_text, render_lessons,
};
use crate::types::{SkipReason, Source, WriteOutcome};

/// One line of `lessons.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Line {
    rule: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    not: Option<String>,
    #[serde(default = "default_category")]
    category: LessonCategory,
    #[serde(default = "default_source")]
    source: String,
    #[serde(default)]
    created_at: i64,
}

fn default_category() -> LessonCategory {
    LessonCategory::Knowledge
}

fn default_source() -> String {
    Source::UserExplicit.as_str().to_owned()
}

impl Line {
    fn lesson(&self) -> Lesson {
        let source: Source = self.source.parse().unwrap_or_else(|_| Source::Other("unknown".into()));
        Lesson {
            key: lesson_key(&self.rule, self.not.as_deref()),
            rule: self.rule.clone(),
            not: self.not.clone(),
            category: self.category,
            confidence: lesson_confidence(&source),
            source,
            updated_at: self.created_at,
            evidence: None,
        }
    }
}

/// Lessons in a JSONL file (`<home>/lessons.jsonl`): the store used only
/// when `memory.db` cannot be opened. Keeps at most 200 lessons (oldest
/// pruned), dedups by substring and topic overlap, and rewrites the file
/// atomically (temp file + rename) under an exclusive lock file, so
/// concurrent processes never lose each other's lessons.
#[derive(Debug, Clone)]
pub struct JsonlLessonStore {
    path: PathBuf,
}

impl JsonlLessonStore {
    /// A store over `path` (the file need not exist).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io(&self, operation: &'static str) -> impl FnOnce(std::io::Error) -> MemoryError + '_ {
        move |source| MemoryError::Io { operation, path: self.path.clone(), source }
    }

    fn read_lines(&self) -> Result<Vec<Line>> {
        let file = match File::open(&self.path) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(self.io("reading lessons")(error)),
        };
        let mut lines = Vec::new();
        for line in BufReader::new(file).lines() {
            let line = line.map_err(self.io("reading lessons"))?;
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Line>(&line) {
                Ok(parsed) if !parsed.rule.trim().is_empty() => lines.push(parsed),
                // A damaged line is skipped, not fatal: the rest are still the user's lessons.
                _ => tracing::warn!(path = %self.path.display(), "skipping an unreadable line of lessons.jsonl"),
            }
        }
        Ok(lines)
    }

    /// All lessons, newest first.
    pub fn lessons(&self) -> Result<Vec<Lesson>> {
        let mut lessons: Vec<Lesson> = self.read_lines()?.iter().map(Line::lesson).collect();
        lessons.reverse();
        Ok(lessons)
    }

    /// Adds a lesson with substring and topic-overlap dedup (no embeddings
    /// here), pruning the oldest beyond 200. The same rules as the database
    /// path refuse empty rules and injected instructions.
    pub fn add(
        &self,
        rule: &str,
        not: Option<&str>,
        category: LessonCategory,
        source: Source,
    ) -> Result<LessonOutcome> {
        let _span = tracing::debug_span!("jsonl_add_lesson").entered();
        source.validate()?;
        let rule = rule.split_whitespace().collect::<Vec<_>>().join(" ");
        let not = not.map(|not| not.split_whitespace().collect::<Vec<_>>().join(" ")).filter(|not| !not.is_empty());
        if rule.is_empty() {
            return Err(Rejected::EmptyLesson.into());
        }
        let text = lesson_text(&rule, not.as_deref());
        crate::validate::injection(&serde_json::Value::String(text.clone()))?;
        crate::validate::value(&serde_json::Value::String(text.clone()))?;
        let key = lesson_key(&rule, not.as_deref());
        let _lock = self.lock()?;
        let mut lines = self.read_lines()?;
        let candidates: Vec<crate::lessons::Candidate> = lines
            .iter()
            .map(|line| crate::lessons::Candidate {
                key: lesson_key(&line.rule, line.not.as_deref()),
                text: lesson_text(&line.rule, line.not.as_deref()),
                source: line.source.clone(),
                confidence: lesson_confidence(&line.source.parse().unwrap_or(Source::Migration)),
                vector: None,
            })
            .collect();
        if let Some(index) = candidates.iter().position(|candidate| candidate.key == key) {
            return Ok(LessonOutcome {
                outcome: WriteOutcome::Unchanged { key: candidates[index].key.clone() },
                replaced: Vec::new(),
            });
        }
        let replace = match dedup(&text, &rule, None, &candidates) {
            Dedup::Duplicate { existing_key } => {
                return Ok(LessonOutcome {
                    outcome: WriteOutcome::Skipped { key, reason: SkipReason::DuplicateLesson { existing_key } },
                    replaced: Vec::new(),
                });
            }
            Dedup::Write { replace } => replace,
        };
        let confidence = lesson_confidence(&source);
        for (index, _) in &replace {
            let candidate = &candidates[*index];
            if let Some(reason) = crate::semantic::ladder(candidate.confidence, &candidate.source, confidence, &source)
            {
                return Ok(LessonOutcome { outcome: WriteOutcome::Skipped { key, reason }, replaced: Vec::new() });
            }
        }
        let replaced: Vec<ReplacedLesson> = replace
            .iter()
            .map(|(index, rule): &(usize, DedupRule)| ReplacedLesson {
                key: candidates[*index].key.clone(),
                rule: *rule,
            })
            .collect();
        let mut drop: Vec<usize> = replace.iter().map(|(index, _)| *index).collect();
        drop.sort_unstable();
        for index in drop.into_iter().rev() {
            lines.remove(index);
        }
        lines.push(Line { rule, not, category, source: source.as_str().to_owned(), created_at: now_ms() });
        if lines.len() > MAX_JSONL_LESSONS {
            let excess = lines.len() - MAX_JSONL_LESSONS;
            lines.drain(..excess);
            tracing::debug!(pruned = excess, "pruned the oldest JSONL lessons");
        }
        self.write_lines(&lines)?;
        Ok(LessonOutcome { outcome: WriteOutcome::Created { key }, replaced })
    }

    /// Removes a lesson by key; false when there is none.
    pub fn remove(&self, key: &str) -> Result<bool> {
        let _lock = self.lock()?;
        let mut lines = self.read_lines()?;
        let before = lines.len();
        lines.retain(|line| lesson_key(&line.rule, line.not.as_deref()) != key);
        if lines.len() == before {
            return Ok(false);
        }
        self.write_lines(&lines)?;
        Ok(true)
    }

    /// The `[Learned corrections]` block with the 50 newest lessons.
    pub fn context(&self) -> Result<String> {
        let mut lessons = self.lessons()?;
        lessons.truncate(MAX_LESSONS_IN_CONTEXT);
        Ok(render_lessons(&lessons))
    }

    fn lock(&self) -> Result<cairn_files::LockFile> {
        cairn_files::LockFile::acquire(&self.path.with_extension("jsonl.lock")).map_err(MemoryError::files)
    }

    fn write_lines(&self, lines: &[Line]) -> Result<()> {
        let mut bytes = Vec::new();
        for line in lines {
            serde_json::to_writer(&mut bytes, line).expect("a lesson line serialises");
            bytes.push(b'\n');
        }
        cairn_files::write_atomic(&self.path, &bytes).map_err(MemoryError::files)
    }
}

/// Lessons from wherever they live: the database when one is open, the
/// JSONL file otherwise. When the database holds lessons the JSONL file is
/// ignored; when it holds none the file is still read (it is the source
/// migration reads from), but new lessons always go to the database.
#[derive(Debug, Clone, Copy)]
pub struct LessonBook<'a> {
    database: Option<&'a MemoryDb>,
    jsonl: &'a JsonlLessonStore,
}

impl<'a> LessonBook<'a> {
    /// A book over an optional database and the JSONL fallback.
    pub fn new(database: Option<&'a MemoryDb>, jsonl: &'a JsonlLessonStore) -> Self {
        Self { database, jsonl }
    }

    /// Writes to the database, or to the JSONL file when there is none.
    pub fn write(
        &self,
        rule: &str,
        not: Option<&str>,
        category: LessonCategory,
        source: Source,
    ) -> Result<LessonOutcome> {
        match self.database {
            Some(database) => database.write_lesson(rule, not, category, source),
            None => self.jsonl.add(rule, not, category, source),
        }
    }

    /// Up to `limit` lessons, newest first, from the layer that wins.
    pub fn lessons(&self, limit: usize) -> Result<Vec<Lesson>> {
        if let Some(database) = self.database {
            let lessons = database.get_lessons(limit)?;
            if !lessons.is_empty() {
                return Ok(lessons);
            }
        }
        let mut lessons = self.jsonl.lessons()?;
        lessons.truncate(limit);
        Ok(lessons)
    }

    /// Removes a lesson from the layer that holds it.
    pub fn remove(&self, key: &str, source: Source) -> Result<bool> {
        crate::lessons::require_lesson_key(key)?;
        match self.database {
            Some(database) => Ok(database.delete_lesson(key, source)? == crate::types::DeleteOutcome::Deleted),
            None => self.jsonl.remove(key),
        }
    }

    /// The `[Learned corrections]` block (≤ 50 lessons) from the layer that wins.
    pub fn context(&self) -> Result<String> {
        Ok(render_lessons(&self.lessons(MAX_LESSONS_IN_CONTEXT)?))
    }
}
