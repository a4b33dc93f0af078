//! How a home's parts are put together, for every entry point: this
//! crate's [`Cairn`](crate::Cairn) and the `cairn` binary (gateway, CLI,
//! hooks, MCP) both open the store, guard the home's own files and build
//! the context over the same functions, so what they screen, protect and
//! return cannot drift apart.

use std::path::Path;
use std::sync::Arc;

use cairn_context::{ContextBuilder, EpisodicMemory, LessonLayers};
use cairn_guard::SensitivePaths;
use cairn_hooks::ConfigHooks;
use cairn_memory_core::{JsonlLessonStore, MemoryConfig, MemoryDb, MemoryFiles, constants};
use cairn_skills::SkillCatalog;

/// Where a home's rows live.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Storage {
    /// `<home>/memory.db` (SQLite), the default.
    #[default]
    Sqlite,
    /// A PostgreSQL database shared by many gateways (a libpq URL).
    #[cfg(feature = "postgres")]
    Postgres(String),
}

/// Opens the memory store of `home`.
///
/// # Errors
///
/// The store's own error when it cannot be opened.
pub fn open_memory(home: &Path, storage: &Storage, config: MemoryConfig) -> cairn_memory_core::Result<MemoryDb> {
    match storage {
        Storage::Sqlite => MemoryDb::open_in_home(home, config),
        #[cfg(feature = "postgres")]
        Storage::Postgres(url) => MemoryDb::open_postgres(url, home, config),
    }
}

/// The paths nothing may read on a model's behalf for `home`: credential
/// stores (`~` expanding to `user_home`), the system's secrets, and the
/// home's own token, settings, MCP definitions and raw stores.
#[must_use]
pub fn sensitive_paths(home: &Path, user_home: Option<&Path>) -> SensitivePaths {
    SensitivePaths::for_user(user_home.map(Path::to_path_buf)).with_gateway_home(home)
}

/// The lessons as the context reads them: the store, and
/// `<home>/lessons.jsonl` when the store is unavailable.
#[must_use]
pub fn lesson_layers(home: &Path, memory: Option<Arc<MemoryDb>>) -> LessonLayers {
    LessonLayers {
        database: memory,
        jsonl: Arc::new(JsonlLessonStore::new(home.join(constants::LESSONS_JSONL_FILE_NAME))),
    }
}

/// The opened parts a context builder reads; each is optional.
#[derive(Default)]
#[non_exhaustive]
pub struct ContextParts {
    /// Semantic facts, episodic memory and lessons.
    pub memory: Option<Arc<MemoryDb>>,
    /// The Markdown layers.
    pub files: Option<Arc<MemoryFiles>>,
    /// The skill catalog.
    pub skills: Option<Arc<SkillCatalog>>,
    /// Config hooks (auto-replies, transforms, context rules).
    pub hooks: Option<Arc<ConfigHooks>>,
    /// The absolute ceiling on what a context carries, in characters.
    pub max_inject_chars: Option<usize>,
}

impl ContextParts {
    /// Parts over `memory`, with nothing else yet.
    #[must_use]
    pub fn new(memory: Option<Arc<MemoryDb>>) -> Self {
        Self { memory, ..Self::default() }
    }

    /// With the Markdown layers.
    #[must_use]
    pub fn files(mut self, files: Option<Arc<MemoryFiles>>) -> Self {
        self.files = files;
        self
    }

    /// With the skill catalog.
    #[must_use]
    pub fn skills(mut self, skills: Option<Arc<SkillCatalog>>) -> Self {
        self.skills = skills;
        self
    }

    /// With the config hooks.
    #[must_use]
    pub fn hooks(mut self, hooks: Option<Arc<ConfigHooks>>) -> Self {
        self.hooks = hooks;
        self
    }

    /// With an absolute ceiling.
    #[must_use]
    pub fn max_inject_chars(mut self, chars: Option<usize>) -> Self {
        self.max_inject_chars = chars;
        self
    }
}

/// The context builder of `home` over `parts`.
#[must_use]
pub fn context_builder(home: &Path, parts: ContextParts) -> ContextBuilder {
    let mut builder = ContextBuilder::new().with_lessons(Arc::new(lesson_layers(home, parts.memory.clone())));
    if let Some(chars) = parts.max_inject_chars {
        builder = builder.with_max_inject_chars(chars);
    }
    if let Some(memory) = parts.memory {
        builder = builder.with_semantic(Arc::clone(&memory) as _);
        builder = builder.with_episodic(memory as Arc<dyn EpisodicMemory>);
    }
    if let Some(files) = parts.files {
        builder = builder.with_markdown(files as _);
    }
    if let Some(skills) = parts.skills {
        builder = builder.with_skills(skills);
    }
    if let Some(hooks) = parts.hooks {
        builder = builder.with_hooks(hooks);
    }
    builder
}
