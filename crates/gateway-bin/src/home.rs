//! [`Home`]: what every entry point of `cairn` opens, opened the same way.
//!
//! Built from the resolved [`Settings`], it opens the memory store with the
//! configured [`MemoryConfig`](cairn_memory_core::MemoryConfig), the
//! Markdown files, the skill catalog with a real audit sink, the config
//! hooks and the merged user hooks, the agent catalog, and one context
//! builder; it also owns the sensitive-path set, which covers the home's
//! own secrets (`server.token`, `config.json`, the memory database) for
//! every guarded read in the CLI and in `serve`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use cairn_agent_spec::{AgentCatalog, AgentDirs, Pins, ResolveContext};
use cairn_context::{AgentContext, ContextBuilder};
use cairn_embedder::manager::{ManagerConfig, ModelSource};
use cairn_guard::SensitivePaths;
use cairn_hooks::{ConfigHooks, HookSet, MergeOptions, MergeReport, merge_user_hooks};
use cairn_host::compose::Storage;
use cairn_memory_core::{MemoryDb, MemoryFiles};
use cairn_skills::{SkillCatalog, SkillsConfig, SystemSkillClock};

use crate::settings::Settings;
use crate::skills_audit::JsonlAudit;

/// The skills audit trail inside the home.
pub(crate) const SKILLS_AUDIT_FILE_NAME: &str = "skills-audit.jsonl";

/// One Cairn home and its settings.
#[derive(Debug, Clone)]
pub(crate) struct Home {
    settings: Settings,
    sensitive: SensitivePaths,
}

/// Where a skill catalog reads from, beyond the settings.
#[derive(Debug, Clone, Default)]
pub(crate) struct SkillSources {
    /// A project checkout (overrides `agent.project_dir`).
    pub(crate) project: Option<PathBuf>,
    /// Bundled skills.
    pub(crate) builtin: Option<PathBuf>,
    /// More skill roots, after `skills.extra_paths`.
    pub(crate) extra_paths: Vec<PathBuf>,
    /// Record usage (matches, deliveries); previews pass `false`.
    pub(crate) record_usage: bool,
}

impl Home {
    /// The home of `settings`; its sensitive-path set is installed for the
    /// guard's process-wide reads too.
    pub(crate) fn new(settings: Settings) -> Self {
        owner_only_umask();
        // The guard's gateway-home rules cover the home's own secrets (token,
        // settings, MCP definitions, raw stores), for this binary and the
        // library front door alike.
        let sensitive = cairn_host::compose::sensitive_paths(&settings.home, settings.user_home.as_deref());
        sensitive.clone().install();
        Self { settings, sensitive }
    }

    /// The home directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.settings.home
    }

    /// The resolved settings.
    pub(crate) fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Paths no component may read on a model's behalf.
    pub(crate) fn sensitive(&self) -> &SensitivePaths {
        &self.sensitive
    }

    /// Creates the home directory (owner-only) when it does not exist; an
    /// existing one whose modes let others in is tightened (once per
    /// process), with a notice.
    pub(crate) fn ensure_dir(&self) -> anyhow::Result<()> {
        let dir = self.dir();
        if !dir.exists() {
            let mut builder = std::fs::DirBuilder::new();
            builder.recursive(true);
            #[cfg(unix)]
            std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
            builder.create(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        static TIGHTENED: std::sync::Once = std::sync::Once::new();
        TIGHTENED.call_once(|| tighten_home(dir));
        Ok(())
    }

    /// Opens the memory store with the configured key prefixes:
    /// `<home>/memory.db`, or the PostgreSQL store of `storage.url`.
    pub(crate) fn open_memory(&self) -> anyhow::Result<MemoryDb> {
        self.ensure_dir()?;
        let config = self.settings.memory_config();
        match &self.settings.storage_url {
            Some(url) => cairn_host::compose::open_memory(self.dir(), &Storage::Postgres(url.clone()), config)
                .with_context(|| {
                    format!("opening the PostgreSQL memory store at {}", crate::settings::redact_url_password(url))
                }),
            None => cairn_host::compose::open_memory(self.dir(), &Storage::Sqlite, config)
                .with_context(|| format!("opening the memory database in {}", self.dir().display())),
        }
    }

    /// Opens the Markdown memory layers.
    pub(crate) fn open_files(&self) -> anyhow::Result<MemoryFiles> {
        self.ensure_dir()?;
        MemoryFiles::open(self.dir())
            .with_context(|| format!("opening the Markdown memory in {}", self.dir().display()))
    }

    /// The skill catalog's configuration.
    pub(crate) fn skills_config(&self, sources: &SkillSources) -> SkillsConfig {
        let skills = &self.settings.skills;
        let mut config = SkillsConfig::new(self.dir());
        config.max_triggered = skills.max_triggered;
        config.lazy_load = skills.lazy_load;
        config.extra_paths = skills.extra_paths.iter().chain(&sources.extra_paths).cloned().collect();
        config.project_dir = sources.project.clone().or_else(|| self.settings.agent.project_dir.clone());
        config.builtin_dir = sources.builtin.clone();
        config.persist_usage = sources.record_usage;
        config
    }

    /// The skill catalog, auditing into `<home>/skills-audit.jsonl`.
    pub(crate) fn skills(&self, sources: &SkillSources) -> SkillCatalog {
        let audit = Arc::new(JsonlAudit { path: self.dir().join(SKILLS_AUDIT_FILE_NAME) });
        SkillCatalog::with_parts(self.skills_config(sources), Arc::new(SystemSkillClock), audit)
    }

    /// The skills audit trail, `<home>/skills-audit.jsonl`.
    pub(crate) fn skills_audit_path(&self) -> PathBuf {
        self.dir().join(SKILLS_AUDIT_FILE_NAME)
    }

    /// The auto-skill pipeline over `<home>/skills/auto`, auditing into
    /// `<home>/skills-audit.jsonl` like the catalog.
    pub(crate) fn auto_skills(&self) -> cairn_skills::auto::AutoSkills {
        let audit = Arc::new(JsonlAudit { path: self.dir().join(SKILLS_AUDIT_FILE_NAME) });
        cairn_skills::auto::AutoSkills::new(
            SkillsConfig::new(self.dir()).owned_dir(),
            self.settings.skills.auto.pipeline(),
            Arc::new(SystemSkillClock),
            audit,
        )
    }

    /// The config hooks (`hooks` in config.json) and their warnings.
    pub(crate) fn config_hooks(&self) -> anyhow::Result<(ConfigHooks, Vec<String>)> {
        let (hooks, warnings) = ConfigHooks::compile(&self.settings.hooks)
            .with_context(|| format!("compiling `hooks` in {}", self.settings.path.display()))?;
        let warnings =
            warnings.into_iter().map(|warning| format!("hooks.{}: {}", warning.key, warning.message)).collect();
        Ok((hooks, warnings))
    }

    /// `bundled` merged with the user's kiro-cli hooks (`agent.kiro_hooks`).
    pub(crate) fn user_hooks(&self, bundled: &HookSet) -> MergeReport {
        let options = MergeOptions::new(self.sensitive.clone());
        merge_user_hooks(bundled, &self.settings.agent.kiro_hooks, &options)
    }

    /// The user agents directory: `override_dir`, else `agent.agents_dir`,
    /// else `~/.kiro/agents`.
    pub(crate) fn agents_dir(&self, override_dir: Option<&Path>) -> anyhow::Result<PathBuf> {
        match override_dir.map(Path::to_owned).or_else(|| self.settings.agent.agents_dir.clone()) {
            Some(dir) => Ok(dir),
            None => Ok(self
                .settings
                .user_home
                .clone()
                .context("no home directory; pass --agents-dir or set agent.agents_dir")?
                .join(".kiro/agents")),
        }
    }

    /// The project checkout: `override_dir`, else `agent.project_dir`.
    pub(crate) fn project_dir(&self, override_dir: Option<&Path>) -> Option<PathBuf> {
        override_dir.map(Path::to_owned).or_else(|| self.settings.agent.project_dir.clone())
    }

    /// The agent spec directories.
    pub(crate) fn agent_dirs(&self, agents_dir: Option<&Path>, project: Option<&Path>) -> anyhow::Result<AgentDirs> {
        let mut dirs = AgentDirs::user(self.agents_dir(agents_dir)?);
        if let Some(project) = self.project_dir(project) {
            dirs = dirs.with_project(project);
        }
        Ok(dirs)
    }

    /// The agent catalog of those directories.
    pub(crate) fn agents(&self, agents_dir: Option<&Path>, project: Option<&Path>) -> anyhow::Result<AgentCatalog> {
        AgentCatalog::load(&self.agent_dirs(agents_dir, project)?, &self.sensitive)
            .context("reading the agent spec directories")
    }

    /// `agent.spec_pins`.
    pub(crate) fn pins(&self) -> anyhow::Result<Pins> {
        serde_json::from_value(serde_json::to_value(&self.settings.agent.spec_pins)?)
            .context("`agent.spec_pins` in config.json must map names to file names")
    }

    /// How agent prompts and resources are resolved (guarded reads).
    pub(crate) fn resolve_context(&self, project: Option<&Path>) -> ResolveContext {
        let mut context = ResolveContext::new(self.settings.user_home.clone())
            .with_env(std::env::vars())
            .with_sensitive(self.sensitive.clone());
        if let Some(project) = self.project_dir(project) {
            context = context.with_project_dir(project);
        }
        context
    }

    /// The prompt and steering of agent `name`.
    pub(crate) fn agent_context(
        &self,
        name: &str,
        agents_dir: Option<&Path>,
        project: Option<&Path>,
    ) -> anyhow::Result<AgentContext> {
        let catalog = self.agents(agents_dir, project)?;
        Ok(AgentContext::resolve(&catalog, name, &self.pins()?, &self.resolve_context(project))?)
    }

    /// The model manager's settings: flag or environment path first, then
    /// the configured one, then the installed default.
    pub(crate) fn model_manager_config(&self) -> ManagerConfig {
        let embedding = &self.settings.embedding;
        let mut source = ModelSource::default_model();
        if let Some(url) = &embedding.model_url {
            source = source.with_mirror_url(url.clone());
        }
        let (explicit, configured) = if embedding.model_path_explicit {
            (embedding.model_path.clone(), None)
        } else {
            (None, embedding.model_path.clone())
        };
        ManagerConfig::new(self.dir().join("models"))
            .explicit_path(explicit)
            .configured_path(configured)
            .source(source)
            .skip_download(embedding.skip_download)
    }

    /// The context builder over these parts; every entry point builds
    /// context through here, so `context.max_inject_chars` bounds what any
    /// host receives whatever the model's window.
    pub(crate) fn context_builder(&self, parts: ContextParts) -> ContextBuilder {
        cairn_host::compose::context_builder(
            self.dir(),
            cairn_host::compose::ContextParts::new(parts.memory)
                .files(parts.files)
                .skills(parts.skills)
                .hooks(parts.hooks)
                .max_inject_chars(Some(self.settings.context.max_inject_chars)),
        )
    }
}

/// The opened stores a context builder reads.
#[derive(Default)]
pub(crate) struct ContextParts {
    pub(crate) memory: Option<Arc<MemoryDb>>,
    pub(crate) files: Option<Arc<MemoryFiles>>,
    pub(crate) skills: Option<Arc<SkillCatalog>>,
    pub(crate) hooks: Option<Arc<ConfigHooks>>,
}

/// Everything Cairn creates from here on is owner-only (0700 directories,
/// 0600 files): SQLite's databases and journals, history files, indexes.
/// Set once, before any store is opened; hooks inherit it.
fn owner_only_umask() {
    #[cfg(unix)]
    {
        let _ = rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
    }
}

/// How deep the tightening walk goes below the home (models, skills and
/// history sit two or three levels down).
const TIGHTEN_DEPTH: usize = 4;
/// Most entries the tightening walk looks at.
const TIGHTEN_MAX_ENTRIES: usize = 100_000;

/// Takes group and other permissions off the home and what lies in it
/// (without following symlinks), and says so on stderr when it changed
/// anything.
fn tighten_home(home: &Path) {
    #[cfg(unix)]
    {
        let mut tightened = Vec::new();
        let mut seen = 0;
        tighten(home, TIGHTEN_DEPTH, &mut seen, &mut tightened);
        if !tightened.is_empty() {
            let shown: Vec<String> = tightened.iter().take(5).map(|path| path.display().to_string()).collect();
            let more = tightened.len().saturating_sub(shown.len());
            eprintln!(
                "cairn: made {} path(s) of the home owner-only (0700 / 0600) because others could read them: {}{}",
                tightened.len(),
                shown.join(", "),
                if more > 0 { format!(" and {more} more") } else { String::new() }
            );
        }
    }
    #[cfg(not(unix))]
    let _ = home;
}

#[cfg(unix)]
fn tighten(path: &Path, depth: usize, seen: &mut usize, tightened: &mut Vec<PathBuf>) {
    use std::os::unix::fs::PermissionsExt as _;
    *seen += 1;
    if *seen > TIGHTEN_MAX_ENTRIES {
        return;
    }
    let Ok(metadata) = std::fs::symlink_metadata(path) else { return };
    if metadata.file_type().is_symlink() {
        return;
    }
    let mode = metadata.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        match std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & !0o077)) {
            Ok(()) => tightened.push(path.to_owned()),
            Err(error) => tracing::warn!(%error, path = %path.display(), "cannot make a home path owner-only"),
        }
    }
    if metadata.is_dir()
        && depth > 0
        && let Ok(entries) = std::fs::read_dir(path)
    {
        for entry in entries.flatten() {
            tighten(&entry.path(), depth - 1, seen, tightened);
        }
    }
}
