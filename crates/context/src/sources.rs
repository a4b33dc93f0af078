//! Where the builder's inputs come from: small traits, each with a plain
//! data implementation and an implementation over the memory stores.

use cairn_memory_core::ScopeFilter;
use std::path::PathBuf;
use std::sync::Arc;

use cairn_memory_core::{
    ContextSection, FilesContextCaps, JsonlLessonStore, Lesson, LessonBook, MemoryDb, MemoryFiles,
};
use serde::Serialize;

use crate::caps::Caps;
use crate::error::{ContextError, Result};

/// A memory text together with where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CitedText {
    /// The text as it should reach the prompt (the builder still cuts it
    /// to the section cap).
    pub text: String,
    /// Which file (and for history, which days) it was read from.
    pub citation: String,
    /// The source already cut the text to fit.
    pub truncated: bool,
}

impl CitedText {
    /// A whole text and its citation.
    pub fn new(text: impl Into<String>, citation: impl Into<String>) -> Self {
        Self { text: text.into(), citation: citation.into(), truncated: false }
    }
}

/// The Markdown layers: preferences, projects and decaying daily history.
pub trait MarkdownMemory: Send + Sync {
    /// The three sections, each ideally within its cap in `caps` (the
    /// builder cuts anything over it).
    /// History entries of a project other than those `scopes` admits are left out.
    fn markdown_sections(&self, caps: &Caps, scopes: &ScopeFilter) -> Result<MarkdownSections>;
}

/// Markdown sections given as data (already read, or built by a test).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MarkdownSections {
    /// Preferences section.
    pub preferences: Option<CitedText>,
    /// Projects section.
    pub projects: Option<CitedText>,
    /// Daily history section.
    pub recent_history: Option<CitedText>,
}

impl MarkdownMemory for MarkdownSections {
    fn markdown_sections(&self, _caps: &Caps, _scopes: &ScopeFilter) -> Result<MarkdownSections> {
        Ok(self.clone())
    }
}

/// Room left in each section's cap for its `[Title] (source: …)` line.
const CITATION_LINE_ROOM: usize = 120;

impl MarkdownMemory for MemoryFiles {
    fn markdown_sections(&self, caps: &Caps, scopes: &ScopeFilter) -> Result<MarkdownSections> {
        let files_caps = FilesContextCaps {
            preferences: caps.preferences.saturating_sub(CITATION_LINE_ROOM),
            projects: caps.projects.saturating_sub(CITATION_LINE_ROOM),
            history: caps.daily_history.saturating_sub(CITATION_LINE_ROOM),
            ..FilesContextCaps::default()
        };
        let context = self
            .get_context_in(&files_caps, scopes)
            .map_err(|source| ContextError::Memory { section: "the Markdown memory files", source })?;
        let cited = |section: Option<ContextSection>| {
            section.map(|section| CitedText {
                text: section.body,
                citation: section.source,
                truncated: section.truncated,
            })
        };
        Ok(MarkdownSections {
            preferences: cited(context.preferences),
            projects: cited(context.projects),
            recent_history: cited(context.history),
        })
    }
}

/// Semantic memory: renders the `[Semantic Memory]` block for a query.
pub trait SemanticMemory: Send + Sync {
    /// The block for `query`, at most `cap_chars` characters, lowest
    /// scoring entries left out first; empty when nothing fits.
    /// Only rows `scopes` admits are shown.
    fn semantic_block(&self, query: &str, cap_chars: usize, scopes: &ScopeFilter) -> Result<String>;
}

impl SemanticMemory for MemoryDb {
    fn semantic_block(&self, query: &str, cap_chars: usize, scopes: &ScopeFilter) -> Result<String> {
        self.semantic_context_in(query, cap_chars, scopes)
            .map_err(|source| ContextError::Memory { section: "semantic memory", source })
    }
}

/// Learned corrections, newest first.
pub trait LessonSource: Send + Sync {
    /// At most `limit` lessons.
    fn lessons(&self, limit: usize) -> Result<Vec<Lesson>>;
}

impl LessonSource for MemoryDb {
    fn lessons(&self, limit: usize) -> Result<Vec<Lesson>> {
        self.get_lessons(limit).map_err(|source| ContextError::Memory { section: "lessons", source })
    }
}

impl LessonSource for JsonlLessonStore {
    fn lessons(&self, limit: usize) -> Result<Vec<Lesson>> {
        let mut lessons =
            JsonlLessonStore::lessons(self).map_err(|source| ContextError::Memory { section: "lessons", source })?;
        lessons.truncate(limit);
        Ok(lessons)
    }
}

impl LessonSource for Vec<Lesson> {
    fn lessons(&self, limit: usize) -> Result<Vec<Lesson>> {
        Ok(self.iter().take(limit).cloned().collect())
    }
}

/// Lessons from the database when it holds any, from `lessons.jsonl`
/// otherwise (the rule of [`LessonBook`]), for hosts that keep both.
#[derive(Debug, Clone)]
pub struct LessonLayers {
    /// The database, when one is open.
    pub database: Option<Arc<MemoryDb>>,
    /// The JSONL fallback.
    pub jsonl: Arc<JsonlLessonStore>,
}

impl LessonSource for LessonLayers {
    fn lessons(&self, limit: usize) -> Result<Vec<Lesson>> {
        LessonBook::new(self.database.as_deref(), &self.jsonl)
            .lessons(limit)
            .map_err(|source| ContextError::Memory { section: "lessons", source })
    }
}

/// What a message asks of episodic memory (the store's own query type is
/// `cairn_memory_core::EpisodicQuery`).
#[derive(Debug, Clone, Copy)]
pub struct RecallQuery<'a> {
    /// The message text.
    pub text: &'a str,
    /// Its embedding, when the host already has it (saves an embed call).
    pub vector: Option<&'a [f32]>,
    /// Fragments wanted at most.
    pub limit: usize,
    /// Which memory scopes are read; `None` reads the global memory only.
    pub scopes: Option<&'a ScopeFilter>,
}

/// One recalled conversation fragment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EpisodicFragment {
    /// The fragment text as stored.
    pub text: String,
    /// Where it came from (date, conversation reference), if known.
    pub citation: Option<String>,
}

/// Episodic memory: relevant fragments for a message, best first.
pub trait EpisodicMemory: Send + Sync {
    /// Fragments admitted for the query, best first, at most `query.limit`.
    fn recall(&self, query: &RecallQuery<'_>) -> Result<Vec<EpisodicFragment>>;
}

/// Fragments given as data (already recalled by the host).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RecalledFragments(pub Vec<EpisodicFragment>);

impl EpisodicMemory for RecalledFragments {
    fn recall(&self, query: &RecallQuery<'_>) -> Result<Vec<EpisodicFragment>> {
        Ok(self.0.iter().take(query.limit).cloned().collect())
    }
}

/// Episodic memory from `memory.db`: the relevance-filtered, ranked
/// search the store offers for context (admission on the raw cosine, decay,
/// MMR), with the host's query vector when it has one. Each fragment is
/// cited with its date (UTC) and the caller's reference.
impl EpisodicMemory for MemoryDb {
    fn recall(&self, query: &RecallQuery<'_>) -> Result<Vec<EpisodicFragment>> {
        let mut search = cairn_memory_core::EpisodicQuery::new(query.text)
            .limit(query.limit)
            .relevance_filter(true)
            .scopes(query.scopes.cloned().unwrap_or(ScopeFilter::Visible(None)));
        search.vector = query.vector.map(<[f32]>::to_vec);
        let hits = self
            .search_episodic(&search)
            .map_err(|source| ContextError::Memory { section: "episodic memory", source })?;
        Ok(hits
            .into_iter()
            .map(|hit| {
                let date = jiff::Timestamp::from_millisecond(hit.created_at)
                    .ok()
                    .map(|timestamp| timestamp.to_zoned_datetime(jiff::tz::TimeZone::UTC).date().to_string());
                let citation = match (date, hit.source_ref) {
                    (Some(date), Some(reference)) => Some(format!("{date}, {reference}")),
                    (date, reference) => date.or(reference),
                };
                EpisodicFragment { text: hit.text, citation }
            })
            .collect())
    }
}

/// One steering file, read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SteeringDoc {
    /// Where it was read from.
    pub path: PathBuf,
    /// Its text.
    pub text: String,
}
