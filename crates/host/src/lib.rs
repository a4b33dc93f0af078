//! One front door to Cairn for agent hosts.
//!
//! [`Cairn::open`] opens a home directory (the memory database, the
//! Markdown memory, the skill catalog, the config hooks and, when named,
//! an agent spec) from a [`Config`], and answers what a host asks each turn:
//!
//! - [`Cairn::session_context`]: the text in front of a new session (facts,
//!   lessons, Markdown memory, the skill catalog, the agent's prompt and the
//!   session's own stored turns as thread history);
//! - [`Cairn::message_context`]: the text of one message (episodic memory,
//!   triggered skills, hook context rules), or the hook's auto-reply;
//! - [`Cairn::remember`], [`Cairn::learn`] and [`Cairn::note`]: a semantic
//!   fact, a lesson and an episodic fragment, through the stores' own rules
//!   (injection screen, credential redaction, conflict ladder, dedup, audit);
//! - [`Cairn::search`]: hybrid episodic search;
//! - [`Cairn::record_turn`] and [`Cairn::consolidate_idle`]: the session
//!   transcript, consolidated into memory by the host's [`Summarizer`] (an
//!   LLM) when one is configured;
//! - [`Cairn::tool_decision`]: the config hooks' verdict on a tool call.
//!
//! The crates underneath stay usable on their own ([`Cairn::memory`],
//! [`Cairn::files`], [`Cairn::skills`], [`Cairn::builder`]).
//!
//! ```
//! use cairn_host::{Cairn, Config};
//!
//! let home = tempfile::tempdir()?;
//! let skill = home.path().join("skills/release");
//! std::fs::create_dir_all(&skill)?;
//! std::fs::write(skill.join("SKILL.md"), "---\nname: release\ndescription: How we cut a release\ntriggers: [release]\n---\nTag, build, publish.\n")?;
//!
//! let cairn = Cairn::open(Config::new(home.path()))?;
//! cairn.remember("user.name", "Ada")?;
//! cairn.learn("Run the tests before every commit", None)?;
//! cairn.note("We moved the billing service to Postgres 16 on Monday.")?;
//! cairn.record_turn("chat-1", "user", "Let us plan the billing release.")?;
//!
//! let session = cairn.session_context("chat-1", "billing")?;
//! assert!(session.text.contains("Ada") && session.text.contains("Run the tests before every commit"));
//! assert!(session.text.contains("Let us plan the billing release."));
//! let message = cairn.message_context("chat-1", "release the billing postgres")?;
//! assert!(message.text.contains("Postgres 16") && message.text.contains("Tag, build, publish."));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]

pub mod compose;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use cairn_agent_spec::{AgentCatalog, AgentDirs, Pins, ResolveContext};
use cairn_context::{AgentContext, ContextBuilder, MessageRequest, SessionRequest};
use cairn_hooks::ConfigHooks;
use cairn_memory_core::{MemoryDb, MemoryFiles, NewEpisode};
use cairn_skills::{SkillCatalog, SkillsConfig};

pub use cairn_context::{BuiltContext, SectionName, ThreadMessage};
pub use cairn_embedder::EmbeddingBackend;
pub use cairn_hooks::{HooksConfig, ToolDecision};
pub use cairn_memory_core::{
    ConsolidationReport, ConsolidatorConfig, EpisodicHit, EpisodicOutcome, LessonCategory, LessonOutcome, MemoryConfig,
    Source, Summarizer, SummarizerError, TranscriptMessage, WriteOutcome,
};

/// Stored turns of a session quoted as thread history in its session context.
pub const THREAD_MESSAGES: usize = 20;

/// What went wrong opening a home or serving a call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// A memory store refused the call or could not be read.
    #[error(transparent)]
    Memory(#[from] cairn_memory_core::MemoryError),
    /// The `hooks` configuration does not compile.
    #[error(transparent)]
    Hooks(#[from] cairn_hooks::HooksError),
    /// The agent spec directories could not be read.
    #[error(transparent)]
    AgentSpec(#[from] cairn_agent_spec::AgentSpecError),
    /// The named agent does not resolve.
    #[error(transparent)]
    Agent(#[from] cairn_context::ContextError),
    /// The home directory could not be created.
    #[error("creating the home directory {path}: {source}")]
    Home {
        /// The home.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// A `Result` with this crate's [`HostError`].
pub type Result<T, E = HostError> = std::result::Result<T, E>;

/// How [`Cairn::open`] opens a home.
#[derive(Clone)]
pub struct Config {
    home: PathBuf,
    memory: MemoryConfig,
    embedder: Option<Arc<dyn EmbeddingBackend>>,
    summarizer: Option<Arc<dyn Summarizer>>,
    consolidation: ConsolidatorConfig,
    hooks: HooksConfig,
    skill_paths: Vec<PathBuf>,
    project_dir: Option<PathBuf>,
    agent: Option<(String, PathBuf)>,
    user_home: Option<PathBuf>,
    environment: Vec<(String, String)>,
    model_window: Option<u64>,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("home", &self.home)
            .field("memory", &self.memory)
            .field("embedder", &self.embedder.as_ref().map(|embedder| embedder.model_id().to_owned()))
            .field("summarizer", &self.summarizer.is_some())
            .field("consolidation", &self.consolidation)
            .field("skill_paths", &self.skill_paths)
            .field("project_dir", &self.project_dir)
            .field("agent", &self.agent)
            .field("user_home", &self.user_home)
            .field("environment", &self.environment.iter().map(|(name, _)| name).collect::<Vec<_>>())
            .field("model_window", &self.model_window)
            .finish_non_exhaustive()
    }
}

impl Config {
    /// A home at `home` (created when missing) with the defaults: keyword
    /// search only (no embedder), no consolidation, no hooks, no agent,
    /// the reference model window.
    pub fn new(home: impl Into<PathBuf>) -> Self {
        Config {
            home: home.into(),
            memory: MemoryConfig::default(),
            embedder: None,
            summarizer: None,
            consolidation: ConsolidatorConfig::default(),
            hooks: HooksConfig::default(),
            skill_paths: Vec::new(),
            project_dir: None,
            agent: None,
            user_home: None,
            environment: Vec::new(),
            model_window: None,
        }
    }

    /// Embeds memory with `embedder` (hybrid search, semantic ranking).
    #[must_use]
    pub fn embedder(mut self, embedder: Arc<dyn EmbeddingBackend>) -> Self {
        self.embedder = Some(embedder);
        self
    }

    /// The memory store's settings (key prefixes, episodic cap, ranking).
    #[must_use]
    pub fn memory(mut self, memory: MemoryConfig) -> Self {
        self.memory = memory;
        self
    }

    /// Consolidates recorded turns into memory by asking `summarizer`,
    /// with `config`'s thresholds.
    #[must_use]
    pub fn consolidation(mut self, summarizer: Arc<dyn Summarizer>, config: ConsolidatorConfig) -> Self {
        self.summarizer = Some(summarizer);
        self.consolidation = config;
        self
    }

    /// The config hooks: tool approve/deny patterns, auto-replies,
    /// transforms, context rules.
    #[must_use]
    pub fn hooks(mut self, hooks: HooksConfig) -> Self {
        self.hooks = hooks;
        self
    }

    /// One more directory of skills (`<name>/SKILL.md`), after the home's own.
    #[must_use]
    pub fn skill_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.skill_paths.push(path.into());
        self
    }

    /// A project checkout: its skills and agent specs are read too.
    #[must_use]
    pub fn project_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.project_dir = Some(dir.into());
        self
    }

    /// The agent spec `name` from `agents_dir` (kiro-cli's `~/.kiro/agents`
    /// layout): its prompt and steering go into every session context.
    #[must_use]
    pub fn agent(mut self, name: impl Into<String>, agents_dir: impl Into<PathBuf>) -> Self {
        self.agent = Some((name.into(), agents_dir.into()));
        self
    }

    /// The user's home directory: what `~/` means in an agent spec's
    /// resources and steering. Cairn does not look it up itself.
    #[must_use]
    pub fn user_home(mut self, dir: impl Into<PathBuf>) -> Self {
        self.user_home = Some(dir.into());
        self
    }

    /// The variables an agent spec's prompt may name (`$NAME`, `${NAME}`);
    /// a name not given here makes the spec an error. Cairn reads no
    /// environment itself: pass `std::env::vars()` to offer the process's.
    #[must_use]
    pub fn environment(mut self, variables: impl IntoIterator<Item = (String, String)>) -> Self {
        self.environment = variables.into_iter().collect();
        self
    }

    /// The model's context window in tokens; section caps scale with it.
    #[must_use]
    pub fn model_window(mut self, tokens: u64) -> Self {
        self.model_window = Some(tokens);
        self
    }
}

/// An open Cairn home.
pub struct Cairn {
    home: PathBuf,
    memory: Arc<MemoryDb>,
    files: Arc<MemoryFiles>,
    skills: Arc<SkillCatalog>,
    hooks: Arc<ConfigHooks>,
    hook_warnings: Vec<String>,
    agent: Option<AgentContext>,
    builder: ContextBuilder,
    consolidator: Option<cairn_memory_core::Consolidator>,
    model_window: Option<u64>,
}

impl std::fmt::Debug for Cairn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cairn").field("home", &self.home).finish_non_exhaustive()
    }
}

impl Cairn {
    /// Opens (creating when missing) the home of `config`.
    pub fn open(config: Config) -> Result<Self> {
        let home = config.home;
        std::fs::create_dir_all(&home).map_err(|source| HostError::Home { path: home.clone(), source })?;
        let sensitive = compose::sensitive_paths(&home, config.user_home.as_deref());

        let mut memory = compose::open_memory(&home, &compose::Storage::Sqlite, config.memory)?;
        if let Some(embedder) = config.embedder {
            memory = memory.with_embedder(embedder);
        }
        let memory = Arc::new(memory);
        let files = Arc::new(MemoryFiles::open(&home)?);

        let mut skills_config = SkillsConfig::new(&home);
        skills_config.extra_paths = config.skill_paths;
        skills_config.project_dir = config.project_dir.clone();
        let skills = Arc::new(SkillCatalog::open(skills_config));

        let (hooks, warnings) = ConfigHooks::compile(&config.hooks)?;
        let hooks = Arc::new(hooks);
        let hook_warnings = warnings.into_iter().map(|warning| format!("hooks.{}: {}", warning.key, warning.message));

        let agent = match &config.agent {
            Some((name, agents_dir)) => {
                let mut dirs = AgentDirs::user(agents_dir);
                let mut resolve = ResolveContext::new(config.user_home.clone())
                    .with_env(config.environment.clone())
                    .with_sensitive(sensitive.clone());
                if let Some(project) = &config.project_dir {
                    dirs = dirs.with_project(project);
                    resolve = resolve.with_project_dir(project);
                }
                let catalog = AgentCatalog::load(&dirs, &sensitive)?;
                Some(AgentContext::resolve(&catalog, name, &Pins::new(), &resolve)?)
            }
            None => None,
        };

        let builder = compose::context_builder(
            &home,
            compose::ContextParts::new(Some(Arc::clone(&memory)))
                .files(Some(Arc::clone(&files)))
                .skills(Some(Arc::clone(&skills)))
                .hooks(Some(Arc::clone(&hooks))),
        );
        let consolidator = config.summarizer.map(|summarizer| {
            cairn_memory_core::Consolidator::new(
                &home,
                Arc::clone(&memory),
                Arc::clone(&files),
                summarizer,
                config.consolidation,
            )
        });
        Ok(Cairn {
            home,
            memory,
            files,
            skills,
            hooks,
            hook_warnings: hook_warnings.collect(),
            agent,
            builder,
            consolidator,
            model_window: config.model_window,
        })
    }

    /// The context of a new session `session_key`: facts ranked against
    /// `query` (the first message, or empty), lessons, Markdown memory, the
    /// skill catalog, the agent's prompt, and the session's last
    /// [`THREAD_MESSAGES`] recorded turns as thread history.
    pub fn session_context(&self, session_key: &str, query: &str) -> Result<BuiltContext> {
        let thread: Vec<ThreadMessage> = self
            .memory
            .transcript_tail(session_key, THREAD_MESSAGES)?
            .into_iter()
            .filter_map(|stored| match stored.message.role.as_str() {
                "user" => Some(ThreadMessage::user(stored.message.content)),
                "assistant" => Some(ThreadMessage::assistant(stored.message.content)),
                _ => None,
            })
            .collect();
        Ok(self.builder.build_session_context(&SessionRequest {
            model_window: self.model_window,
            query,
            agent: self.agent.as_ref(),
            thread: &thread,
            ..Default::default()
        }))
    }

    /// The context of one user `message` in `session_key`: episodic
    /// fragments, triggered skills and hook context rules around it, or the
    /// hook's auto-reply ([`BuiltContext::auto_reply`]) instead.
    pub fn message_context(&self, session_key: &str, message: &str) -> Result<BuiltContext> {
        let first_in_session = self.memory.transcript_state(session_key)?.is_none_or(|state| state.next_seq <= 1);
        Ok(self.builder.build_message(&MessageRequest {
            model_window: self.model_window,
            message,
            first_in_session,
            agent: self.agent.as_ref(),
            ..Default::default()
        }))
    }

    /// Stores a semantic fact the user stated (`user.name` → `"Ada"`).
    /// Keys are `pref.`, `project.`, `user.` or a configured prefix.
    pub fn remember(&self, key: &str, value: impl Into<serde_json::Value>) -> Result<WriteOutcome> {
        Ok(self.memory.write_semantic(key, &value.into(), 1.0, Source::UserExplicit)?)
    }

    /// Stores a lesson the user taught: `rule`, and what not to do instead.
    pub fn learn(&self, rule: &str, not: Option<&str>) -> Result<LessonOutcome> {
        Ok(self.memory.write_lesson(rule, not, LessonCategory::Preference, Source::UserExplicit)?)
    }

    /// Stores an episodic fragment (10 to 2,000 characters).
    pub fn note(&self, text: &str) -> Result<EpisodicOutcome> {
        Ok(self.memory.write_episodic(&NewEpisode { source: Source::UserExplicit, ..NewEpisode::new(text) })?)
    }

    /// Hybrid episodic search, best first, at most `limit` hits.
    pub fn search(&self, query: &str, limit: usize) -> Result<Vec<EpisodicHit>> {
        Ok(self.memory.search_episodic(&cairn_memory_core::EpisodicQuery::new(query).limit(limit))?)
    }

    /// Records one turn of `session_key` (`role` is `user`, `assistant` or
    /// `tool`). With a summarizer configured this feeds consolidation: the
    /// report of a run the turn fired, if any.
    pub fn record_turn(&self, session_key: &str, role: &str, content: &str) -> Result<Option<ConsolidationReport>> {
        self.record_message(session_key, TranscriptMessage::new(role, content))
    }

    /// [`record_turn`](Self::record_turn) for a message with tool calls.
    pub fn record_message(&self, session_key: &str, message: TranscriptMessage) -> Result<Option<ConsolidationReport>> {
        let now = now_ms();
        match &self.consolidator {
            Some(consolidator) => Ok(consolidator.record_messages(session_key, &[message], now)?),
            None => {
                self.memory.append_transcript_at(session_key, &[message], now)?;
                Ok(None)
            }
        }
    }

    /// Consolidates every session idle for the configured time (the
    /// history path: history, episodic fragments, lessons). Without a
    /// summarizer there is nothing to run.
    pub fn consolidate_idle(&self) -> Vec<(String, Result<ConsolidationReport>)> {
        match &self.consolidator {
            Some(consolidator) => consolidator
                .check_idle_sessions(now_ms())
                .into_iter()
                .map(|(session, report)| (session, report.map_err(HostError::from)))
                .collect(),
            None => Vec::new(),
        }
    }

    /// The config hooks' verdict on calling `tool` (deny wins over approve).
    pub fn tool_decision(&self, tool: &str) -> ToolDecision {
        self.hooks.tool_decision(tool)
    }

    /// Warnings from compiling the hooks configuration.
    pub fn hook_warnings(&self) -> &[String] {
        &self.hook_warnings
    }

    /// The home directory.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// The memory database (facts, lessons, episodic memory, transcripts, audit).
    pub fn memory(&self) -> &Arc<MemoryDb> {
        &self.memory
    }

    /// The Markdown memory (`memory/` files and history).
    pub fn files(&self) -> &Arc<MemoryFiles> {
        &self.files
    }

    /// The skill catalog.
    pub fn skills(&self) -> &Arc<SkillCatalog> {
        &self.skills
    }

    /// The context builder over this home's sources, for requests the
    /// methods above do not cover.
    pub fn builder(&self) -> &ContextBuilder {
        &self.builder
    }
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_millis() as i64)
}
