//! Every setting of `cairn`, resolved once per invocation.
//!
//! Each value comes from the first of: a command-line flag, a `CAIRN_*`
//! environment variable (an empty one counts as unset), `<home>/config.json`,
//! or the built-in default, and [`Settings`] remembers which one it was
//! (`cairn config show`). The file's sections are `memory`, `storage`,
//! `skills`, `hooks`, `agent`, `embedding`, `llm` and `server`; every key is
//! validated with the file and key named in the error. An unknown key, or
//! a key this build does not act on, produces one warning naming it and is
//! otherwise ignored. This is the only module that reads or writes
//! `config.json`: writes ([`write_key`]) keep every other key and their
//! order, are validated before they land and replace the file atomically.

use std::net::IpAddr;
use std::path::PathBuf;

use serde::Serialize;
use serde_json::Value;

mod agent;
mod context;
mod embedding;
mod environment;
mod file;
mod hooks;
mod host;
mod import;
mod llm;
mod memory;
mod reader;
mod server;
mod skills;
mod storage;
#[cfg(test)]
mod tests;

pub(crate) use agent::AgentSection;
pub(crate) use context::ContextSection;
pub(crate) use embedding::EmbeddingSection;
pub(crate) use environment::{Environment, env};
pub(crate) use file::{Ordered, atomic_write, persist_memory_settings, write_key};
pub(crate) use host::HostSection;
pub(crate) use llm::LlmSection;
pub(crate) use memory::MemorySettings;
pub(crate) use server::ServerSection;
pub(crate) use skills::SkillsSection;
pub(crate) use storage::redact_url_password;

use reader::{Recorder, Resolver, parse_root, read_text};

/// The configuration file's name inside the home.
pub(crate) const CONFIG_FILE_NAME: &str = "config.json";
/// Port used when neither a flag, the environment nor the file sets one.
pub(crate) const DEFAULT_PORT: u16 = 8745;
/// Request bodies larger than this are refused with 413.
pub(crate) const DEFAULT_MAX_BODY_BYTES: u64 = 1024 * 1024;
/// Heartbeat period.
pub(crate) const DEFAULT_HEARTBEAT_SECS: u64 = 60;
/// Seconds a client has to send a request's headers.
pub(crate) const DEFAULT_HEADER_TIMEOUT_SECS: u64 = 10;
/// Seconds a client has to send a request's body.
pub(crate) const DEFAULT_BODY_TIMEOUT_SECS: u64 = 30;
/// Open connections one client address may hold at once.
pub(crate) const DEFAULT_MAX_CONNECTIONS_PER_CLIENT: u64 = 64;
/// Threads of the embed pool. They mostly wait: every embedding goes
/// through one batching worker, so more of them in flight means larger
/// forward passes, not more concurrent ones.
pub(crate) const DEFAULT_POOL_WORKERS: u64 = 8;
/// Jobs the embed pool queues before it refuses new work with 503.
pub(crate) const DEFAULT_POOL_QUEUE: u64 = 64;
/// Idle time after which a session's history is consolidated.
pub(crate) const DEFAULT_HISTORY_IDLE_HOURS: f64 = 3.0;
/// Daily history files older than this are pruned.
pub(crate) const DEFAULT_HISTORY_MAX_DAYS: u64 = 365;
/// The most active episodic rows `memory.episodic_cap` allows.
pub(crate) const MAX_EPISODIC_CAP: u64 = 10_000_000;
/// The most connections `storage.postgres_pool_size` allows.
pub(crate) const MAX_POSTGRES_POOL_SIZE: u64 = 1024;
/// Chat-completions request timeout.
pub(crate) const DEFAULT_LLM_TIMEOUT_SECS: u64 = 60;
/// Retries of a failed chat-completions request.
pub(crate) const DEFAULT_LLM_RETRIES: u64 = 2;
/// Default `host.context_deadline_ms`.
pub(crate) const DEFAULT_CONTEXT_DEADLINE_MS: u64 = 2_000;
/// Default `host.record_deadline_ms`.
pub(crate) const DEFAULT_RECORD_DEADLINE_MS: u64 = 500;
/// Default `context.max_inject_chars`.
pub(crate) const DEFAULT_MAX_INJECT_CHARS: usize = 24_000;

/// A configuration problem; the message names the file (or variable) and the key.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConfigError {
    #[error("reading {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not valid JSON")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{path}: `{key}` {reason}")]
    Invalid { path: PathBuf, key: String, reason: String },
    #[error("environment variable {name}: {reason}")]
    Env { name: &'static str, reason: String },
    #[error("`{key}` is not a setting Cairn reads (see `cairn config show`)")]
    UnknownKey { key: String },
    #[error("writing {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Where a value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Source {
    Flag,
    Env,
    File,
    Default,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Flag => "flag",
            Self::Env => "env",
            Self::File => "file",
            Self::Default => "default",
        })
    }
}

/// Values given on this invocation's command line; `None` (or `false`)
/// defers to the environment, the file and the default.
#[derive(Debug, Clone, Default)]
pub(crate) struct Flags {
    pub(crate) home: Option<PathBuf>,
    /// Another settings file instead of `<home>/config.json`.
    pub(crate) config_file: Option<PathBuf>,
    pub(crate) host: Option<IpAddr>,
    pub(crate) port: Option<u16>,
    pub(crate) allow_non_loopback: bool,
    pub(crate) heartbeat_secs: Option<u64>,
    pub(crate) model_path: Option<PathBuf>,
    pub(crate) model_url: Option<String>,
    pub(crate) skip_download: bool,
    pub(crate) llm_base_url: Option<String>,
    pub(crate) llm_model: Option<String>,
    pub(crate) llm_api_key: Option<String>,
}

/// One effective value and where it came from.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Entry {
    pub(crate) key: String,
    /// The value (secrets shown as `"(set)"`).
    pub(crate) value: Value,
    pub(crate) source: Source,
}

/// Every setting of this invocation, resolved.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// The Cairn home.
    pub(crate) home: PathBuf,
    /// `<home>/config.json`.
    pub(crate) path: PathBuf,
    pub(crate) memory: MemorySettings,
    /// `storage.url`: the PostgreSQL store shared by many gateways; `None`
    /// keeps the rows in `<home>/memory.db`.
    pub(crate) storage_url: Option<String>,
    /// `storage.postgres_pool_size`: connections the PostgreSQL store keeps open at most.
    pub(crate) postgres_pool_size: usize,
    /// `memory.episodic_cap`: active episodic rows kept before eviction.
    pub(crate) episodic_cap: usize,
    /// `memory.separate_worktrees`: each linked worktree of a repository is
    /// its own project (by default they share the repository's).
    pub(crate) project_rule: cairn_memory_core::ProjectRule,
    /// `memory.extra_prefixes`: accepted semantic key prefixes besides the built-in ones.
    pub(crate) extra_prefixes: Vec<String>,
    /// `memory.record_sessions`, turned off for this process by
    /// `CAIRN_PRIVATE_SESSION`: whether host hooks record the session
    /// (transcript, and so consolidation). Context is served either way.
    pub(crate) record_sessions: bool,
    /// `memory.write_approval`: every consolidation run waits as a pending
    /// changeset until a person approves it (off: runs write at once).
    pub(crate) write_approval: bool,
    pub(crate) skills: SkillsSection,
    /// The `hooks` section, parsed in file order.
    pub(crate) hooks: cairn_hooks::HooksConfig,
    pub(crate) agent: AgentSection,
    pub(crate) embedding: EmbeddingSection,
    pub(crate) llm: LlmSection,
    pub(crate) server: ServerSection,
    pub(crate) host: HostSection,
    pub(crate) context: ContextSection,
    /// `import.openclaw_workspace` (or `OPENCLAW_WORKSPACE_DIR`): the
    /// OpenClaw workspace `cairn import` reads when no flag names one; an
    /// absolute path.
    pub(crate) openclaw_workspace: Option<PathBuf>,
    /// One line per unknown or ignored key.
    pub(crate) warnings: Vec<String>,
    /// Every effective value, in resolution order.
    pub(crate) entries: Vec<Entry>,
    /// The flags these settings were resolved with.
    pub(crate) flags: Flags,
    /// The user's home directory, looked up once here: agent specs' `~`,
    /// the hosts' settings files and the foreign-import roots are under it.
    pub(crate) user_home: Option<PathBuf>,
}

impl Settings {
    /// Resolves every setting for this invocation.
    pub(crate) fn load(flags: &Flags, environment: &Environment) -> Result<Self, ConfigError> {
        let mut recorder = Recorder::default();
        let home = recorder.pick(
            "home",
            flags.home.clone(),
            environment.get(env::HOME).map(PathBuf::from),
            None,
            default_home(),
        );
        let path = flags.config_file.clone().unwrap_or_else(|| home.join(CONFIG_FILE_NAME));
        let text = read_text(&path)?;
        Self::resolve(home, path, &text, flags, environment, recorder)
    }

    /// The same invocation's settings read again (the file may have
    /// changed; flags and environment are this process's own).
    pub(crate) fn reload(&self) -> Result<Self, ConfigError> {
        let mut flags = self.flags.clone();
        flags.home = Some(self.home.clone());
        Self::load(&flags, &Environment::capture())
    }

    /// The keys whose effective value differs between `self` and `next`.
    pub(crate) fn changed_keys(&self, next: &Settings) -> Vec<String> {
        let before: std::collections::HashMap<&str, &Value> =
            self.entries.iter().map(|entry| (entry.key.as_str(), &entry.value)).collect();
        let mut changed: Vec<String> = next
            .entries
            .iter()
            .filter(|entry| before.get(entry.key.as_str()) != Some(&&entry.value))
            .map(|entry| entry.key.clone())
            .collect();
        // A secret is shown as "(set)": compare the values themselves.
        if self.llm.api_key != next.llm.api_key && !changed.iter().any(|key| key == "llm.api_key") {
            changed.push("llm.api_key".to_owned());
        }
        changed
    }

    fn resolve(
        home: PathBuf,
        path: PathBuf,
        text: &str,
        flags: &Flags,
        environment: &Environment,
        recorder: Recorder,
    ) -> Result<Self, ConfigError> {
        let root = parse_root(&path, text)?;
        let mut warnings = Vec::new();
        for key in root.keys() {
            if ![
                "memory",
                "storage",
                "skills",
                "hooks",
                "agent",
                "embedding",
                "llm",
                "server",
                "host",
                "context",
                "import",
            ]
            .contains(&key.as_str())
            {
                warnings.push(format!("{}: unknown section `{key}` (ignored)", path.display()));
            }
        }
        let mut r = Resolver { path: &path, root: &root, text, flags, environment, recorder, warnings };
        let memory = memory::resolve(&mut r)?;
        let storage = storage::resolve(&mut r)?;
        let skills = skills::resolve(&mut r)?;
        let hooks = hooks::resolve(&mut r)?;
        let agent = agent::resolve(&mut r)?;
        let embedding = embedding::resolve(&mut r, memory.legacy_model_path, memory.legacy_model_url)?;
        let llm = llm::resolve(&mut r)?;
        let server = server::resolve(&mut r)?;
        let host = host::resolve(&mut r)?;
        let context = context::resolve(&mut r)?;
        let openclaw_workspace = import::resolve(&mut r)?;
        let Resolver { recorder, warnings, .. } = r;
        Ok(Self {
            openclaw_workspace,
            home,
            path,
            memory: memory.settings,
            storage_url: storage.url,
            postgres_pool_size: usize::try_from(storage.postgres_pool_size).expect("at most 1024"),
            episodic_cap: usize::try_from(memory.episodic_cap).expect("at most 10,000,000"),
            project_rule: memory.project_rule,
            extra_prefixes: memory.extra_prefixes,
            record_sessions: memory.record_sessions,
            write_approval: memory.write_approval,
            skills,
            hooks,
            agent,
            embedding,
            llm,
            server,
            host,
            context,
            warnings,
            entries: recorder.entries,
            flags: flags.clone(),
            user_home: dirs::home_dir(),
        })
    }
    /// The semantic store's configuration.
    pub(crate) fn memory_config(&self) -> cairn_memory_core::MemoryConfig {
        cairn_memory_core::MemoryConfig {
            extra_prefixes: self.extra_prefixes.clone(),
            episodic_cap: self.episodic_cap,
            postgres_pool_size: self.postgres_pool_size,
            ..cairn_memory_core::MemoryConfig::default()
        }
    }

    /// Prints every warning once, on stderr.
    pub(crate) fn warn(&self) {
        for warning in &self.warnings {
            eprintln!("warning: {warning}");
        }
    }
}

/// `<data dir>/cairn`.
pub(crate) fn default_home() -> PathBuf {
    dirs::data_dir().unwrap_or_else(|| PathBuf::from(".")).join("cairn")
}
