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

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

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
/// Shortest hook deadline a user may set.
const MIN_DEADLINE_MS: u64 = 50;
/// Longest hook deadline a user may set (a host's own hook timeout is 60 s).
const MAX_DEADLINE_MS: u64 = 60_000;
/// Default `context.max_inject_chars`.
pub(crate) const DEFAULT_MAX_INJECT_CHARS: usize = 24_000;

/// The environment variables Cairn reads, all through [`Environment`].
pub(crate) mod env {
    pub(crate) const HOME: &str = "CAIRN_HOME";
    pub(crate) const SERVE_HOST: &str = "CAIRN_SERVE_HOST";
    pub(crate) const SERVE_PORT: &str = "CAIRN_SERVE_PORT";
    pub(crate) const HEARTBEAT_SECS: &str = "CAIRN_HEARTBEAT_SECS";
    pub(crate) const EMBED_MODEL_PATH: &str = "CAIRN_EMBED_MODEL_PATH";
    pub(crate) const EMBED_MODEL_URL: &str = "CAIRN_EMBED_MODEL_URL";
    pub(crate) const SKIP_MODEL_DOWNLOAD: &str = "CAIRN_SKIP_MODEL_DOWNLOAD";
    pub(crate) const LLM_BASE_URL: &str = "CAIRN_LLM_BASE_URL";
    pub(crate) const LLM_MODEL: &str = "CAIRN_LLM_MODEL";
    pub(crate) const LLM_API_KEY: &str = "CAIRN_LLM_API_KEY";
    pub(crate) const STORAGE_URL: &str = "CAIRN_STORAGE_URL";
    pub(crate) const HOST_START_GATEWAY: &str = "CAIRN_HOST_START_GATEWAY";
    /// Set by the host for one session (`1`, `true`, `yes`): nothing of it
    /// is recorded. Turns `memory.record_sessions` off, never on.
    pub(crate) const PRIVATE_SESSION: &str = "CAIRN_PRIVATE_SESSION";
    /// OpenClaw's own workspace variable, read for `import.openclaw_workspace`.
    pub(crate) const OPENCLAW_WORKSPACE_DIR: &str = "OPENCLAW_WORKSPACE_DIR";
    /// Every variable above.
    pub(crate) const ALL: &[&str] = &[
        HOME,
        SERVE_HOST,
        SERVE_PORT,
        HEARTBEAT_SECS,
        EMBED_MODEL_PATH,
        EMBED_MODEL_URL,
        SKIP_MODEL_DOWNLOAD,
        LLM_BASE_URL,
        LLM_MODEL,
        LLM_API_KEY,
        STORAGE_URL,
        HOST_START_GATEWAY,
        PRIVATE_SESSION,
        OPENCLAW_WORKSPACE_DIR,
    ];
}

/// `skills` keys this build accepts and does not use.
const UNSUPPORTED_SKILL_KEYS: &[(&str, &str)] =
    &[("judge_model", "near-duplicate auto skills are found by description-word overlap, with no model call")];

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

/// The `CAIRN_*` variables of this process, read once; empty means unset.
#[derive(Debug, Clone, Default)]
pub(crate) struct Environment {
    vars: BTreeMap<&'static str, String>,
}

impl Environment {
    /// Reads every variable in [`env::ALL`] from the process environment.
    pub(crate) fn capture() -> Self {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let vars = env::ALL
            .iter()
            .filter_map(|name| lookup(name).filter(|value| !value.trim().is_empty()).map(|value| (*name, value)))
            .collect();
        Self { vars }
    }

    #[cfg(test)]
    pub(crate) fn from_pairs(pairs: &[(&str, &str)]) -> Self {
        Self::from_lookup(|name| pairs.iter().find(|(key, _)| *key == name).map(|(_, value)| (*value).to_owned()))
    }

    fn get(&self, name: &'static str) -> Option<&str> {
        self.vars.get(name).map(|value| value.trim())
    }

    fn parse<T: std::str::FromStr>(&self, name: &'static str, what: &str) -> Result<Option<T>, ConfigError> {
        match self.get(name) {
            None => Ok(None),
            Some(text) => text
                .parse()
                .map(Some)
                .map_err(|_| ConfigError::Env { name, reason: format!("must be {what} (got {text:?})") }),
        }
    }

    /// `CAIRN_PRIVATE_SESSION`: whether this session asks to be kept out
    /// of memory, and a warning for a value that is neither yes nor no.
    /// An unclear value counts as yes: a typo must not record a session
    /// its user meant to keep private.
    fn private_session(&self) -> (bool, Option<String>) {
        match self.get(env::PRIVATE_SESSION).map(str::to_ascii_lowercase).as_deref() {
            None | Some("0" | "false" | "no" | "off") => (false, None),
            Some("1" | "true" | "yes" | "on") => (true, None),
            Some(other) => (
                true,
                Some(format!(
                    "environment variable {}: {other:?} is neither 1/true/yes nor 0/false/no; this session is \
                     treated as private (nothing recorded)",
                    env::PRIVATE_SESSION
                )),
            ),
        }
    }

    fn flag(&self, name: &'static str) -> Result<Option<bool>, ConfigError> {
        match self.get(name).map(str::to_ascii_lowercase).as_deref() {
            None => Ok(None),
            Some("1" | "true" | "yes" | "on") => Ok(Some(true)),
            Some("0" | "false" | "no" | "off") => Ok(Some(false)),
            Some(other) => Err(ConfigError::Env { name, reason: format!("must be 1 or 0 (got {other:?})") }),
        }
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

/// `memory`: the settings `PUT /api/memory/settings` edits live.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct MemorySettings {
    /// Hours of idleness before a session's history is consolidated.
    pub(crate) history_idle_hours: f64,
    /// Daily history files older than this many days are pruned.
    pub(crate) history_max_days: u64,
}

impl Default for MemorySettings {
    fn default() -> Self {
        Self { history_idle_hours: DEFAULT_HISTORY_IDLE_HOURS, history_max_days: DEFAULT_HISTORY_MAX_DAYS }
    }
}

impl MemorySettings {
    /// Applies a partial update (`{"history_idle_hours": 1.5}`), validating
    /// every key; on error nothing is changed.
    pub(crate) fn apply_update(&self, path: &Path, update: &Value) -> Result<Self, ConfigError> {
        let Some(map) = update.as_object() else {
            return Err(invalid(path, "memory", "must be a JSON object"));
        };
        let mut section = Section::new(path, "memory", map);
        let mut next = self.clone();
        if let Some(hours) = section.f64("history_idle_hours", 0.01, 24.0 * 365.0)? {
            next.history_idle_hours = hours;
        }
        if let Some(days) = section.u64("history_max_days", 1, 100_000)? {
            next.history_max_days = days;
        }
        let unknown = section.unknown();
        if let Some(key) = unknown.first() {
            return Err(invalid(path, key, "is not a memory setting"));
        }
        Ok(next)
    }
}

/// `embedding`: where the model comes from and the embed pool's size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct EmbeddingSection {
    pub(crate) model_path: Option<PathBuf>,
    /// The model path came from a flag or the environment (it wins over a
    /// model chosen through the API).
    pub(crate) model_path_explicit: bool,
    pub(crate) model_url: Option<String>,
    pub(crate) skip_download: bool,
    pub(crate) pool_workers: usize,
    pub(crate) pool_queue: usize,
}

/// `llm`: the OpenAI-compatible chat-completions endpoint for consolidation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct LlmSection {
    pub(crate) base_url: Option<String>,
    pub(crate) model: Option<String>,
    #[serde(skip)]
    pub(crate) api_key: Option<String>,
    pub(crate) timeout_secs: u64,
    pub(crate) max_retries: u32,
}

/// `server`: the listener and the heartbeat.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ServerSection {
    pub(crate) host: IpAddr,
    pub(crate) port: u16,
    pub(crate) allow_non_loopback: bool,
    pub(crate) max_body_bytes: u64,
    pub(crate) heartbeat_secs: u64,
    pub(crate) header_timeout_secs: u64,
    pub(crate) body_timeout_secs: u64,
    pub(crate) max_connections_per_client: u64,
}

/// `host`: how `cairn hook` and `cairn mcp serve` reach the home's gateway.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct HostSection {
    /// `host.context_deadline_ms`: the longest a context event (session
    /// start, prompt) waits for an answer before it answers from the
    /// in-process fallback or with nothing.
    pub(crate) context_deadline_ms: u64,
    /// `host.record_deadline_ms`: the same for recording events (tool
    /// calls, replies, session end) and tool decisions.
    pub(crate) record_deadline_ms: u64,
    /// `host.start_gateway`: a hook or MCP session that finds no gateway
    /// starts one in the background.
    pub(crate) start_gateway: bool,
}

/// `context`: what any host receives.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ContextSection {
    /// `context.max_inject_chars`: the absolute ceiling on the context a
    /// host receives, whatever the model's window.
    pub(crate) max_inject_chars: usize,
}

/// `skills`: the catalog settings.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct SkillsSection {
    pub(crate) max_triggered: usize,
    pub(crate) lazy_load: bool,
    pub(crate) extra_paths: Vec<PathBuf>,
    /// The auto-skill pipeline's settings.
    pub(crate) auto: AutoSkillSettings,
}

/// `skills.auto_*` and the other keys of the auto-skill pipeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct AutoSkillSettings {
    /// `skills.auto_create_from_sessions`: idle consolidation proposes skills.
    pub(crate) create_from_sessions: bool,
    /// `skills.approval_required`: candidates wait for review.
    pub(crate) approval_required: bool,
    /// `skills.auto_refine_on_deviation`: consolidation may refine a generated skill.
    pub(crate) refine_on_deviation: bool,
    /// `skills.auto_min_tool_calls`: messages with tool calls a session needs.
    pub(crate) min_tool_calls: usize,
    /// `skills.auto_similarity_threshold`: duplicate description overlap.
    pub(crate) similarity_threshold: f64,
    /// `skills.max_auto_skills`.
    pub(crate) max_auto_skills: usize,
    /// `skills.stale_after_days`.
    pub(crate) stale_after_days: u64,
    /// `skills.archive_after_days`.
    pub(crate) archive_after_days: u64,
    /// `skills.pending_ttl_days`: also how long a pending consolidation
    /// changeset waits for review.
    pub(crate) pending_ttl_days: u64,
    /// `skills.generate_scripts`: a candidate may carry a Python helper.
    pub(crate) generate_scripts: bool,
}

impl AutoSkillSettings {
    /// How long a pending review waits before it expires, in milliseconds:
    /// the pending-skill rule (`skills.pending_ttl_days`), which pending
    /// consolidation changesets follow too.
    pub(crate) fn pending_ttl_ms(&self) -> i64 {
        let days = i64::try_from(self.pending_ttl_days).unwrap_or(i64::MAX);
        days.saturating_mul(24 * 60 * 60 * 1_000)
    }

    /// The skills crate's configuration of the pipeline.
    pub(crate) fn pipeline(&self) -> cairn_skills::auto::AutoSkillsConfig {
        cairn_skills::auto::AutoSkillsConfig {
            approval_required: self.approval_required,
            similarity_threshold: self.similarity_threshold,
            max_auto_skills: self.max_auto_skills,
            stale_after_days: self.stale_after_days,
            archive_after_days: self.archive_after_days,
            pending_ttl_days: self.pending_ttl_days,
            generate_scripts: self.generate_scripts,
            ..cairn_skills::auto::AutoSkillsConfig::default()
        }
    }
}

/// `agent`: where agent specs live, which duplicates are pinned, and the
/// user's kiro-cli hooks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct AgentSection {
    pub(crate) agents_dir: Option<PathBuf>,
    pub(crate) project_dir: Option<PathBuf>,
    pub(crate) spec_pins: BTreeMap<String, String>,
    /// `agent.kiro_hooks`, handed to the hooks crate's merge as it is.
    pub(crate) kiro_hooks: Value,
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
}

fn invalid(path: &Path, key: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { path: path.to_owned(), key: key.to_owned(), reason: reason.into() }
}

/// Reads one section's keys, remembering which were consumed.
struct Section<'a> {
    path: &'a Path,
    name: &'a str,
    map: &'a Map<String, Value>,
    used: Vec<&'static str>,
}

impl<'a> Section<'a> {
    fn new(path: &'a Path, name: &'a str, map: &'a Map<String, Value>) -> Self {
        Self { path, name, map, used: Vec::new() }
    }

    fn of(path: &'a Path, root: &'a Map<String, Value>, name: &'a str) -> Result<Section<'a>, ConfigError> {
        static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
        match root.get(name) {
            None | Some(Value::Null) => Ok(Self::new(path, name, EMPTY.get_or_init(Map::new))),
            Some(Value::Object(map)) => Ok(Self::new(path, name, map)),
            Some(_) => Err(invalid(path, name, "must be a JSON object")),
        }
    }

    fn key(&self, key: &str) -> String {
        format!("{}.{key}", self.name)
    }

    fn get(&mut self, key: &'static str) -> Option<&'a Value> {
        self.used.push(key);
        self.map.get(key).filter(|value| !value.is_null())
    }

    fn bool(&mut self, key: &'static str) -> Result<Option<bool>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(value)) => Ok(Some(*value)),
            Some(other) => Err(invalid(self.path, &self.key(key), format!("must be true or false (got {other})"))),
        }
    }

    fn u64(&mut self, key: &'static str, min: u64, max: u64) -> Result<Option<u64>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(value) => match value.as_u64() {
                Some(number) if (min..=max).contains(&number) => Ok(Some(number)),
                _ => Err(invalid(
                    self.path,
                    &self.key(key),
                    format!("must be an integer from {min} to {max} (got {value})"),
                )),
            },
        }
    }

    fn f64(&mut self, key: &'static str, min: f64, max: f64) -> Result<Option<f64>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(value) => match value.as_f64() {
                Some(number) if number.is_finite() && (min..=max).contains(&number) => Ok(Some(number)),
                _ => Err(invalid(
                    self.path,
                    &self.key(key),
                    format!("must be a number from {min} to {max} (got {value})"),
                )),
            },
        }
    }

    fn string(&mut self, key: &'static str) -> Result<Option<String>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(text)) if text.trim().is_empty() => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.trim().to_owned())),
            Some(other) => Err(invalid(self.path, &self.key(key), format!("must be a string (got {other})"))),
        }
    }

    fn strings(&mut self, key: &'static str) -> Result<Option<Vec<String>>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| {
                    item.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| invalid(self.path, &self.key(key), format!("must list strings (got {item})")))
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(other) => Err(invalid(self.path, &self.key(key), format!("must be a list of strings (got {other})"))),
        }
    }

    fn unknown(&self) -> Vec<String> {
        self.map.keys().filter(|key| !self.used.contains(&key.as_str())).map(|key| self.key(key)).collect()
    }
}

/// Collects the effective values while they are resolved.
#[derive(Default)]
struct Recorder {
    entries: Vec<Entry>,
}

impl Recorder {
    /// Picks the first of flag, environment and file, else `default`, and
    /// records it under `key`.
    fn pick<T: Serialize>(&mut self, key: &str, flag: Option<T>, env: Option<T>, file: Option<T>, default: T) -> T {
        let (value, source) = match (flag, env, file) {
            (Some(value), _, _) => (value, Source::Flag),
            (None, Some(value), _) => (value, Source::Env),
            (None, None, Some(value)) => (value, Source::File),
            (None, None, None) => (default, Source::Default),
        };
        self.record(key, serde_json::to_value(&value).unwrap_or(Value::Null), source);
        value
    }

    fn record(&mut self, key: &str, value: Value, source: Source) {
        self.entries.push(Entry { key: key.to_owned(), value, source });
    }
}

/// `true` flags are given; `false` defers.
fn given(flag: bool) -> Option<bool> {
    flag.then_some(true)
}

/// Only the `hooks` section, parsed straight from the text so rule order is kept.
#[derive(Deserialize)]
struct HooksOnly {
    #[serde(default)]
    hooks: Option<cairn_hooks::HooksConfig>,
}

/// The auto-skill keys of the `skills` section, each type- and range-checked.
fn auto_skill_settings(section: &mut Section<'_>, recorder: &mut Recorder) -> Result<AutoSkillSettings, ConfigError> {
    use cairn_skills::constants as skill;
    let flag = |recorder: &mut Recorder, section: &mut Section<'_>, key: &'static str, default: bool| {
        section.bool(key).map(|value| recorder.pick(&format!("skills.{key}"), None, None, value, default))
    };
    let create_from_sessions = flag(recorder, section, "auto_create_from_sessions", false)?;
    let approval_required = flag(recorder, section, "approval_required", true)?;
    let refine_on_deviation = flag(recorder, section, "auto_refine_on_deviation", false)?;
    let generate_scripts = flag(recorder, section, "generate_scripts", true)?;
    let mut number = |recorder: &mut Recorder, key: &'static str, min: u64, max: u64, default: u64| {
        section.u64(key, min, max).map(|value| recorder.pick(&format!("skills.{key}"), None, None, value, default))
    };
    let min_tool_calls = number(recorder, "auto_min_tool_calls", 1, 1_000, 5)? as usize;
    let max_auto_skills = number(recorder, "max_auto_skills", 1, 10_000, skill::MAX_AUTO_SKILLS as u64)? as usize;
    let stale_after_days = number(recorder, "stale_after_days", 1, 3_650, skill::AUTO_STALE_AFTER_DAYS)?;
    let archive_after_days = number(recorder, "archive_after_days", 1, 3_650, skill::AUTO_ARCHIVE_AFTER_DAYS)?;
    let pending_ttl_days = number(recorder, "pending_ttl_days", 1, 3_650, skill::AUTO_PENDING_TTL_DAYS)?;
    let similarity_threshold = section.f64("auto_similarity_threshold", 0.05, 1.0)?;
    let similarity_threshold = recorder.pick(
        "skills.auto_similarity_threshold",
        None,
        None,
        similarity_threshold,
        skill::AUTO_SIMILARITY_THRESHOLD,
    );
    if archive_after_days <= stale_after_days {
        return Err(invalid(
            section.path,
            "skills.archive_after_days",
            format!(
                "must be greater than skills.stale_after_days ({stale_after_days}): a skill is stale before it is archived (got {archive_after_days})"
            ),
        ));
    }
    Ok(AutoSkillSettings {
        create_from_sessions,
        approval_required,
        refine_on_deviation,
        min_tool_calls,
        similarity_threshold,
        max_auto_skills,
        stale_after_days,
        archive_after_days,
        pending_ttl_days,
        generate_scripts,
    })
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
        mut recorder: Recorder,
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
        let from_file = |present: bool| if present { Source::File } else { Source::Default };

        let mut memory_section = Section::of(&path, &root, "memory")?;
        let defaults = MemorySettings::default();
        let memory = MemorySettings {
            history_idle_hours: recorder.pick(
                "memory.history_idle_hours",
                None,
                None,
                memory_section.f64("history_idle_hours", 0.01, 24.0 * 365.0)?,
                defaults.history_idle_hours,
            ),
            history_max_days: recorder.pick(
                "memory.history_max_days",
                None,
                None,
                memory_section.u64("history_max_days", 1, 100_000)?,
                defaults.history_max_days,
            ),
        };
        let extra_prefixes = memory_section.strings("extra_prefixes")?;
        for prefix in extra_prefixes.iter().flatten() {
            if !valid_prefix(prefix) {
                return Err(invalid(
                    &path,
                    "memory.extra_prefixes",
                    format!("entries must be lower-case words ending with a dot, such as \"team.\" (got {prefix:?})"),
                ));
            }
        }
        let extra_prefixes = recorder.pick("memory.extra_prefixes", None, None, extra_prefixes, Vec::new());
        let episodic_cap = recorder.pick(
            "memory.episodic_cap",
            None,
            None,
            memory_section.u64("episodic_cap", 1, MAX_EPISODIC_CAP)?,
            cairn_memory_core::constants::EPISODIC_DEFAULT_CAP as u64,
        );
        let separate_worktrees =
            recorder.pick("memory.separate_worktrees", None, None, memory_section.bool("separate_worktrees")?, false);
        let project_rule = if separate_worktrees {
            cairn_memory_core::ProjectRule::Worktree
        } else {
            cairn_memory_core::ProjectRule::Repository
        };
        let record_sessions_file = memory_section.bool("record_sessions")?;
        let (private_session, private_warning) = environment.private_session();
        warnings.extend(private_warning);
        // The environment can only turn recording off for its session.
        let record_sessions =
            recorder.pick("memory.record_sessions", None, private_session.then_some(false), record_sessions_file, true);
        let write_approval =
            recorder.pick("memory.write_approval", None, None, memory_section.bool("write_approval")?, false);
        let legacy_model_path = memory_section.string("embed_model_path")?;
        let legacy_model_url = memory_section.string("embed_model_url")?;
        if memory_section.get("migrated").is_some() {
            warnings.push(format!(
                "{}: `memory.migrated` is ignored: the migration state lives in the home's state file",
                path.display()
            ));
        }
        collect_unknown(&memory_section, &path, &mut warnings);

        let mut storage_section = Section::of(&path, &root, "storage")?;
        let (storage_url, storage_source) =
            match (environment.get(env::STORAGE_URL).map(str::to_owned), storage_section.string("url")?) {
                (Some(url), _) => (Some(url), Source::Env),
                (None, Some(url)) => (Some(url), Source::File),
                (None, None) => (None, Source::Default),
            };
        if let Some(url) = &storage_url {
            check_storage_url(url).map_err(|reason| match storage_source {
                Source::Env => ConfigError::Env { name: env::STORAGE_URL, reason },
                _ => invalid(&path, "storage.url", reason),
            })?;
        }
        // The URL may carry a password: shown without it.
        recorder.record(
            "storage.url",
            storage_url.as_deref().map_or(Value::Null, |url| Value::String(redact_url_password(url))),
            storage_source,
        );
        let postgres_pool_size = recorder.pick(
            "storage.postgres_pool_size",
            None,
            None,
            storage_section.u64("postgres_pool_size", 1, MAX_POSTGRES_POOL_SIZE)?,
            cairn_memory_core::constants::POSTGRES_DEFAULT_POOL_SIZE as u64,
        );
        collect_unknown(&storage_section, &path, &mut warnings);

        let mut skills_section = Section::of(&path, &root, "skills")?;
        let skills = SkillsSection {
            max_triggered: recorder.pick(
                "skills.max_triggered",
                None,
                None,
                skills_section.u64("max_triggered", 0, 100)?.map(|value| value as usize),
                cairn_skills::constants::MAX_TRIGGERED,
            ),
            lazy_load: recorder.pick("skills.lazy_load", None, None, skills_section.bool("lazy_load")?, false),
            extra_paths: recorder.pick(
                "skills.extra_paths",
                None,
                None,
                skills_section.strings("extra_paths")?.map(|paths| paths.into_iter().map(PathBuf::from).collect()),
                Vec::new(),
            ),
            auto: auto_skill_settings(&mut skills_section, &mut recorder)?,
        };
        for (key, why) in UNSUPPORTED_SKILL_KEYS {
            if skills_section.get(key).is_some() {
                warnings.push(format!("{}: `skills.{key}` is not used: {why} (ignored)", path.display()));
            }
        }
        collect_unknown(&skills_section, &path, &mut warnings);

        let hooks = match root.get("hooks") {
            None | Some(Value::Null) => cairn_hooks::HooksConfig::default(),
            Some(Value::Object(_)) => serde_json::from_str::<HooksOnly>(text)
                .map_err(|error| invalid(&path, "hooks", error.to_string()))?
                .hooks
                .unwrap_or_default(),
            Some(_) => return Err(invalid(&path, "hooks", "must be a JSON object")),
        };
        recorder.record(
            "hooks",
            serde_json::to_value(&hooks).unwrap_or(Value::Null),
            from_file(root.get("hooks").is_some_and(|hooks| !hooks.is_null())),
        );

        let mut agent_section = Section::of(&path, &root, "agent")?;
        let agents_dir = agent_section.string("agents_dir")?.map(PathBuf::from);
        let agents_dir = recorder.pick("agent.agents_dir", None, None, agents_dir.map(Some), None);
        let project_dir = agent_section.string("project_dir")?.map(PathBuf::from);
        let project_dir = recorder.pick("agent.project_dir", None, None, project_dir.map(Some), None);
        let spec_pins = match agent_section.get("spec_pins") {
            None => None,
            Some(value) => Some(
                serde_json::from_value::<BTreeMap<String, String>>(value.clone())
                    .map_err(|_| invalid(&path, "agent.spec_pins", "must map agent names to file names"))?,
            ),
        };
        let spec_pins = recorder.pick("agent.spec_pins", None, None, spec_pins, BTreeMap::new());
        let kiro_hooks = agent_section.get("kiro_hooks").cloned();
        let kiro_hooks = recorder.pick("agent.kiro_hooks", None, None, kiro_hooks, Value::Null);
        collect_unknown(&agent_section, &path, &mut warnings);

        let mut embedding_section = Section::of(&path, &root, "embedding")?;
        let file_model_path = embedding_section.string("model_path")?.or(legacy_model_path).map(PathBuf::from);
        let env_model_path = environment.get(env::EMBED_MODEL_PATH).map(PathBuf::from);
        let model_path_explicit = flags.model_path.is_some() || env_model_path.is_some();
        let model_path = recorder.pick(
            "embedding.model_path",
            flags.model_path.clone().map(Some),
            env_model_path.map(Some),
            file_model_path.map(Some),
            None,
        );
        let file_model_url = embedding_section.string("model_url")?.or(legacy_model_url);
        let model_url = recorder.pick(
            "embedding.model_url",
            flags.model_url.clone().filter(|url| !url.trim().is_empty()).map(Some),
            environment.get(env::EMBED_MODEL_URL).map(|url| Some(url.to_owned())),
            file_model_url.map(Some),
            None,
        );
        let embedding = EmbeddingSection {
            model_path,
            model_path_explicit,
            model_url,
            skip_download: recorder.pick(
                "embedding.skip_download",
                given(flags.skip_download),
                environment.flag(env::SKIP_MODEL_DOWNLOAD)?,
                embedding_section.bool("skip_download")?,
                false,
            ),
            pool_workers: recorder.pick(
                "embedding.pool_workers",
                None,
                None,
                embedding_section.u64("pool_workers", 1, 64)?,
                DEFAULT_POOL_WORKERS,
            ) as usize,
            pool_queue: recorder.pick(
                "embedding.pool_queue",
                None,
                None,
                embedding_section.u64("pool_queue", 0, 100_000)?,
                DEFAULT_POOL_QUEUE,
            ) as usize,
        };
        collect_unknown(&embedding_section, &path, &mut warnings);

        let mut llm_section = Section::of(&path, &root, "llm")?;
        let nonempty = |value: &Option<String>| value.clone().filter(|text| !text.trim().is_empty());
        let base_url = recorder.pick(
            "llm.base_url",
            nonempty(&flags.llm_base_url).map(Some),
            environment.get(env::LLM_BASE_URL).map(|url| Some(url.to_owned())),
            llm_section.string("base_url")?.map(Some),
            None,
        );
        if let Some(url) = &base_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(invalid(&path, "llm.base_url", format!("must be an http:// or https:// URL (got {url:?})")));
        }
        let model = recorder.pick(
            "llm.model",
            nonempty(&flags.llm_model).map(Some),
            environment.get(env::LLM_MODEL).map(|model| Some(model.to_owned())),
            llm_section.string("model")?.map(Some),
            None,
        );
        let (api_key, api_key_source) = match (
            nonempty(&flags.llm_api_key),
            environment.get(env::LLM_API_KEY).map(str::to_owned),
            llm_section.string("api_key")?,
        ) {
            (Some(key), _, _) => (Some(key), Source::Flag),
            (None, Some(key), _) => (Some(key), Source::Env),
            (None, None, Some(key)) => (Some(key), Source::File),
            (None, None, None) => (None, Source::Default),
        };
        recorder.record(
            "llm.api_key",
            if api_key.is_some() { Value::String("(set)".to_owned()) } else { Value::Null },
            api_key_source,
        );
        let llm = LlmSection {
            base_url,
            model,
            api_key,
            timeout_secs: recorder.pick(
                "llm.timeout_secs",
                None,
                None,
                llm_section.u64("timeout_secs", 1, 3_600)?,
                DEFAULT_LLM_TIMEOUT_SECS,
            ),
            max_retries: recorder.pick(
                "llm.max_retries",
                None,
                None,
                llm_section.u64("max_retries", 0, 10)?,
                DEFAULT_LLM_RETRIES,
            ) as u32,
        };
        collect_unknown(&llm_section, &path, &mut warnings);

        let mut server_section = Section::of(&path, &root, "server")?;
        let file_host = match server_section.string("host")? {
            None => None,
            Some(text) => Some(text.parse::<IpAddr>().map_err(|_| {
                invalid(&path, "server.host", format!("must be an IP address such as 127.0.0.1 (got {text:?})"))
            })?),
        };
        let host = recorder.pick(
            "server.host",
            flags.host,
            environment.parse(env::SERVE_HOST, "an IP address such as 127.0.0.1")?,
            file_host,
            IpAddr::from([127, 0, 0, 1]),
        );
        let port = recorder.pick(
            "server.port",
            flags.port,
            environment.parse(env::SERVE_PORT, "a port from 0 to 65535")?,
            server_section.u64("port", 0, 65_535)?.map(|port| port as u16),
            DEFAULT_PORT,
        );
        let allow_non_loopback = recorder.pick(
            "server.allow_non_loopback",
            given(flags.allow_non_loopback),
            None,
            server_section.bool("allow_non_loopback")?,
            false,
        );
        let max_body_bytes = recorder.pick(
            "server.max_body_bytes",
            None,
            None,
            server_section.u64("max_body_bytes", 1024, 1 << 30)?,
            DEFAULT_MAX_BODY_BYTES,
        );
        let env_heartbeat: Option<u64> = environment.parse(env::HEARTBEAT_SECS, "a whole number of seconds")?;
        if env_heartbeat == Some(0) {
            return Err(ConfigError::Env { name: env::HEARTBEAT_SECS, reason: "must be at least 1".to_owned() });
        }
        let heartbeat_secs = recorder.pick(
            "server.heartbeat_secs",
            flags.heartbeat_secs,
            env_heartbeat,
            server_section.u64("heartbeat_secs", 1, 86_400)?,
            DEFAULT_HEARTBEAT_SECS,
        );
        let header_timeout_secs = recorder.pick(
            "server.header_timeout_secs",
            None,
            None,
            server_section.u64("header_timeout_secs", 1, 3_600)?,
            DEFAULT_HEADER_TIMEOUT_SECS,
        );
        let body_timeout_secs = recorder.pick(
            "server.body_timeout_secs",
            None,
            None,
            server_section.u64("body_timeout_secs", 1, 3_600)?,
            DEFAULT_BODY_TIMEOUT_SECS,
        );
        let max_connections_per_client = recorder.pick(
            "server.max_connections_per_client",
            None,
            None,
            server_section.u64("max_connections_per_client", 1, 100_000)?,
            DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
        );
        let server = ServerSection {
            host,
            port,
            allow_non_loopback,
            max_body_bytes,
            heartbeat_secs,
            header_timeout_secs,
            body_timeout_secs,
            max_connections_per_client,
        };
        collect_unknown(&server_section, &path, &mut warnings);

        let mut host_section = Section::of(&path, &root, "host")?;
        let host = HostSection {
            context_deadline_ms: recorder.pick(
                "host.context_deadline_ms",
                None,
                None,
                host_section.u64("context_deadline_ms", MIN_DEADLINE_MS, MAX_DEADLINE_MS)?,
                DEFAULT_CONTEXT_DEADLINE_MS,
            ),
            record_deadline_ms: recorder.pick(
                "host.record_deadline_ms",
                None,
                None,
                host_section.u64("record_deadline_ms", MIN_DEADLINE_MS, MAX_DEADLINE_MS)?,
                DEFAULT_RECORD_DEADLINE_MS,
            ),
            start_gateway: recorder.pick(
                "host.start_gateway",
                None,
                environment.flag(env::HOST_START_GATEWAY)?,
                host_section.bool("start_gateway")?,
                true,
            ),
        };
        collect_unknown(&host_section, &path, &mut warnings);

        let mut context_section = Section::of(&path, &root, "context")?;
        let context = ContextSection {
            max_inject_chars: recorder.pick(
                "context.max_inject_chars",
                None,
                None,
                context_section.u64("max_inject_chars", 1_000, 1_000_000)?.map(|chars| chars as usize),
                DEFAULT_MAX_INJECT_CHARS,
            ),
        };
        collect_unknown(&context_section, &path, &mut warnings);

        let mut import_section = Section::of(&path, &root, "import")?;
        let openclaw_file = import_section.string("openclaw_workspace")?.map(PathBuf::from);
        if openclaw_file.as_ref().is_some_and(|dir| !dir.is_absolute()) {
            return Err(invalid(&path, "import.openclaw_workspace", "must be an absolute path"));
        }
        let openclaw_env = environment.get(env::OPENCLAW_WORKSPACE_DIR).map(PathBuf::from);
        if openclaw_env.as_ref().is_some_and(|dir| !dir.is_absolute()) {
            return Err(ConfigError::Env {
                name: env::OPENCLAW_WORKSPACE_DIR,
                reason: "must be an absolute path".to_owned(),
            });
        }
        let openclaw_workspace =
            recorder.pick("import.openclaw_workspace", None, openclaw_env.map(Some), openclaw_file.map(Some), None);
        collect_unknown(&import_section, &path, &mut warnings);

        let agent = AgentSection { agents_dir, project_dir, spec_pins, kiro_hooks };
        Ok(Self {
            openclaw_workspace,
            home,
            path,
            memory,
            storage_url,
            postgres_pool_size: usize::try_from(postgres_pool_size).expect("at most 1024"),
            episodic_cap: usize::try_from(episodic_cap).expect("at most 10,000,000"),
            project_rule,
            extra_prefixes,
            record_sessions,
            write_approval,
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

/// A `storage.url` is a PostgreSQL URL (`postgres://` or `postgresql://`
/// with a host); SQLite needs no URL (leave it unset).
fn check_storage_url(url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))
        .ok_or_else(|| format!("must be a postgres:// URL (got {:?})", redact_url_password(url)))?;
    let authority = rest.split(['/', '?']).next().unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or("");
    if host.is_empty() {
        return Err(format!("must name a host (got {:?})", redact_url_password(url)));
    }
    Ok(())
}

/// `url` with every password it carries replaced by `***`: the password of
/// its user-info (`postgres://user:pw@host/db`), the value of a query
/// parameter whose name (percent-decoded, any case) holds `password`
/// (`?password=pw`, libpq's query form, and `sslpassword`), and the same
/// keywords of a key/value conninfo (`host=h password=pw`, quoted or not).
/// Applied to everything that shows a storage URL: `config show`, `config
/// set`, refusals and connection errors.
pub(crate) fn redact_url_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return redact_conninfo_passwords(url) };
    // The user-info ends at the last `@` before the query, even when the
    // password holds a `/`.
    let query_start = rest.find(['?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(query_start);
    let authority = match authority.rsplit_once('@') {
        Some((user_info, host)) => match user_info.split_once(':') {
            Some((user, _password)) => format!("{user}:***@{host}"),
            None => authority.to_owned(),
        },
        None => authority.to_owned(),
    };
    let tail = match tail.split_once('?') {
        None => tail.to_owned(),
        Some((path, query)) => {
            let (query, fragment) = match query.split_once('#') {
                Some((query, fragment)) => (query, Some(fragment)),
                None => (query, None),
            };
            let parameters: Vec<String> = query
                .split('&')
                .map(|parameter| match parameter.split_once('=') {
                    Some((name, _)) if names_password(&percent_decode(name)) => format!("{name}=***"),
                    _ => parameter.to_owned(),
                })
                .collect();
            let fragment = fragment.map(|fragment| format!("#{fragment}")).unwrap_or_default();
            format!("{path}?{}{fragment}", parameters.join("&"))
        }
    };
    format!("{scheme}://{authority}{tail}")
}

fn names_password(name: &str) -> bool {
    name.to_ascii_lowercase().contains("password")
}

/// `%xx` escapes decoded (bytes that do not make UTF-8 are kept lossily).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let hex = |at: usize| bytes.get(at).and_then(|byte| (*byte as char).to_digit(16));
        match (bytes[index], hex(index + 1), hex(index + 2)) {
            (b'%', Some(high), Some(low)) => {
                out.push((high * 16 + low) as u8);
                index += 3;
            }
            (byte, _, _) => {
                out.push(byte);
                index += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A key/value conninfo (`host=h password='p w'`) with the value of every
/// password keyword replaced by `***`; other text is returned as it is.
fn redact_conninfo_passwords(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(equals) = rest.find('=') {
        // Spaces may stand between the keyword and `=`.
        let before = rest[..equals].trim_end();
        let keyword_start = before.rfind(|c: char| c.is_whitespace() || c == '?' || c == '&').map_or(0, |at| at + 1);
        let keyword = &before[keyword_start..];
        out.push_str(&rest[..=equals]);
        rest = &rest[equals + 1..];
        if !names_password(keyword) {
            continue;
        }
        // Spaces may surround `=`; the value is quoted (backslash escapes) or runs to whitespace.
        let spaces = rest.len() - rest.trim_start().len();
        out.push_str(&rest[..spaces]);
        rest = &rest[spaces..];
        let value_end = if let Some(quoted) = rest.strip_prefix('\'') {
            let mut escaped = false;
            let close = quoted.char_indices().find(|&(_, c)| {
                let closes = c == '\'' && !escaped;
                escaped = c == '\\' && !escaped;
                closes
            });
            close.map_or(rest.len(), |(at, _)| at + 2)
        } else {
            rest.find(char::is_whitespace).unwrap_or(rest.len())
        };
        out.push_str("***");
        rest = &rest[value_end..];
    }
    out.push_str(rest);
    out
}

/// `<data dir>/cairn`.
pub(crate) fn default_home() -> PathBuf {
    dirs::data_dir().unwrap_or_else(|| PathBuf::from(".")).join("cairn")
}

fn valid_prefix(prefix: &str) -> bool {
    prefix.len() >= 2
        && prefix.len() <= 50
        && prefix.ends_with('.')
        && prefix.starts_with(|first: char| first.is_ascii_lowercase())
        && prefix[..prefix.len() - 1]
            .chars()
            .all(|character| character.is_ascii_lowercase() || character.is_ascii_digit() || "_.".contains(character))
}

fn collect_unknown(section: &Section<'_>, path: &Path, warnings: &mut Vec<String>) {
    for key in section.unknown() {
        warnings.push(format!("{}: unknown key `{key}` (ignored)", path.display()));
    }
}

fn read_text(path: &Path) -> Result<String, ConfigError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(text),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(source) => Err(ConfigError::Read { path: path.to_owned(), source }),
    }
}

fn parse_root(path: &Path, text: &str) -> Result<Map<String, Value>, ConfigError> {
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str(text) {
        Ok(Value::Object(root)) => Ok(root),
        Ok(_) => Err(invalid(path, "(top level)", "must be a JSON object")),
        Err(source) => Err(ConfigError::Parse { path: path.to_owned(), source }),
    }
}

/// A JSON value whose objects keep their key order, for edits that must
/// leave the rest of the file as the user wrote it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum Ordered {
    Null(()),
    Bool(bool),
    Number(serde_json::Number),
    String(String),
    Array(Vec<Ordered>),
    Object(IndexMap<String, Ordered>),
}

/// Sets (or, with `None`, removes) the dotted `key` (`section.name`) in
/// `<home>/config.json`, keeping every other key and its order. The edited
/// file is validated as a whole first: an invalid value or an unknown key
/// is refused and the file is left as it was. Returns the settings the
/// new file resolves to (without flags or environment).
pub(crate) fn write_key(home: &Path, key: &str, value: Option<&str>) -> Result<Settings, ConfigError> {
    let path = home.join(CONFIG_FILE_NAME);
    let Some((section, name)) = key.split_once('.').filter(|(section, name)| !section.is_empty() && !name.is_empty())
    else {
        return Err(ConfigError::UnknownKey { key: key.to_owned() });
    };
    // Re-read and written under the file's edit lock: two `config set` at
    // once both land.
    let mut resolved = None;
    crate::locked_edit::edit_locked_owner_only(&path, |current: Option<String>| {
        let text = current.unwrap_or_default();
        let mut root: IndexMap<String, Ordered> = if text.trim().is_empty() {
            IndexMap::new()
        } else {
            serde_json::from_str(&text).map_err(|source| ConfigError::Parse { path: path.clone(), source })?
        };
        let entry = root.entry(section.to_owned()).or_insert_with(|| Ordered::Object(IndexMap::new()));
        let Ordered::Object(map) = entry else {
            return Err(invalid(&path, section, "must be a JSON object"));
        };
        match value {
            Some(value) => {
                // A value that is not JSON is taken as a string (`cairn config set llm.model gpt-x`).
                let parsed =
                    serde_json::from_str::<Ordered>(value).unwrap_or_else(|_| Ordered::String(value.to_owned()));
                map.insert(name.to_owned(), parsed);
            }
            None => {
                map.shift_remove(name);
            }
        }
        let mut next = serde_json::to_string_pretty(&root).expect("JSON values serialise");
        next.push('\n');
        let settings =
            Settings::resolve(home.to_owned(), path.clone(), &next, &Flags::default(), &Environment::default(), {
                let mut recorder = Recorder::default();
                recorder.record("home", Value::String(home.display().to_string()), Source::Default);
                recorder
            })?;
        let markers = [format!("`{key}`"), format!("section `{section}`")];
        if value.is_some()
            && settings.warnings.iter().any(|warning| markers.iter().any(|marker| warning.contains(marker)))
        {
            return Err(ConfigError::UnknownKey { key: key.to_owned() });
        }
        resolved = Some(settings);
        Ok(Some(next))
    })?;
    Ok(resolved.expect("the edit resolved the settings"))
}

/// Writes the memory settings into the file's `memory` section.
pub(crate) fn persist_memory_settings(home: &Path, settings: &MemorySettings) -> Result<(), ConfigError> {
    write_key(home, "memory.history_idle_hours", Some(&settings.history_idle_hours.to_string()))?;
    write_key(home, "memory.history_max_days", Some(&settings.history_max_days.to_string()))?;
    Ok(())
}

/// Writes `bytes` to an owner-only temporary sibling, syncs it, and renames
/// it over `path` (creating `path`'s directory first).
pub(crate) fn atomic_write(path: &Path, bytes: &[u8]) -> Result<(), ConfigError> {
    let write_error = |source| ConfigError::Write { path: path.to_owned(), source };
    std::fs::create_dir_all(cairn_files::parent_dir(path)).map_err(write_error)?;
    cairn_files::write_atomic(path, bytes).map_err(|error| write_error(error.into_io()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_with(text: &str, flags: &Flags, environment: &Environment) -> Result<Settings, ConfigError> {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join(CONFIG_FILE_NAME), text).unwrap();
        let flags = Flags { home: Some(home.path().to_owned()), ..flags.clone() };
        Settings::load(&flags, environment)
    }

    fn load(text: &str) -> Result<Settings, ConfigError> {
        load_with(text, &Flags::default(), &Environment::default())
    }

    fn error(text: &str) -> String {
        load(text).unwrap_err().to_string()
    }

    fn source(settings: &Settings, key: &str) -> Source {
        settings.entries.iter().find(|entry| entry.key == key).unwrap_or_else(|| panic!("no entry {key}")).source
    }

    #[test]
    fn defaults_without_a_file() {
        let home = tempfile::tempdir().unwrap();
        let flags = Flags { home: Some(home.path().to_owned()), ..Flags::default() };
        let settings = Settings::load(&flags, &Environment::default()).unwrap();
        assert_eq!(settings.server.port, DEFAULT_PORT);
        assert!(settings.server.host.is_loopback());
        assert_eq!(settings.memory, MemorySettings::default());
        assert!(settings.warnings.is_empty());
        assert_eq!(source(&settings, "home"), Source::Flag);
        assert_eq!(source(&settings, "server.port"), Source::Default);
    }

    #[test]
    fn every_invalid_value_names_the_file_and_key() {
        for (text, key) in [
            (r#"{"server": {"port": 70000}}"#, "`server.port`"),
            (r#"{"server": {"port": "80"}}"#, "`server.port`"),
            (r#"{"server": {"host": "localhost"}}"#, "`server.host`"),
            (r#"{"server": {"heartbeat_secs": 0}}"#, "`server.heartbeat_secs`"),
            (r#"{"server": {"max_body_bytes": 10}}"#, "`server.max_body_bytes`"),
            (r#"{"server": {"allow_non_loopback": "yes"}}"#, "`server.allow_non_loopback`"),
            (r#"{"memory": {"history_idle_hours": -1}}"#, "`memory.history_idle_hours`"),
            (r#"{"memory": {"history_max_days": 0}}"#, "`memory.history_max_days`"),
            (r#"{"memory": {"extra_prefixes": "team."}}"#, "`memory.extra_prefixes`"),
            (r#"{"memory": {"extra_prefixes": ["Team"]}}"#, "`memory.extra_prefixes`"),
            (r#"{"embedding": {"pool_workers": 0}}"#, "`embedding.pool_workers`"),
            (r#"{"llm": {"base_url": "ftp://x"}}"#, "`llm.base_url`"),
            (r#"{"llm": {"max_retries": 99}}"#, "`llm.max_retries`"),
            (r#"{"skills": {"max_triggered": -3}}"#, "`skills.max_triggered`"),
            (r#"{"skills": {"auto_create_from_sessions": "yes"}}"#, "`skills.auto_create_from_sessions`"),
            (r#"{"skills": {"approval_required": 0}}"#, "`skills.approval_required`"),
            (r#"{"skills": {"auto_refine_on_deviation": "on"}}"#, "`skills.auto_refine_on_deviation`"),
            (r#"{"skills": {"auto_min_tool_calls": 0}}"#, "`skills.auto_min_tool_calls`"),
            (r#"{"skills": {"auto_min_tool_calls": 2.5}}"#, "`skills.auto_min_tool_calls`"),
            (r#"{"skills": {"auto_similarity_threshold": 1.5}}"#, "`skills.auto_similarity_threshold`"),
            (r#"{"skills": {"auto_similarity_threshold": "high"}}"#, "`skills.auto_similarity_threshold`"),
            (r#"{"skills": {"max_auto_skills": 0}}"#, "`skills.max_auto_skills`"),
            (r#"{"skills": {"stale_after_days": 0}}"#, "`skills.stale_after_days`"),
            (r#"{"skills": {"archive_after_days": 99999}}"#, "`skills.archive_after_days`"),
            (r#"{"skills": {"stale_after_days": 60, "archive_after_days": 60}}"#, "`skills.archive_after_days`"),
            (r#"{"skills": {"pending_ttl_days": -1}}"#, "`skills.pending_ttl_days`"),
            (r#"{"skills": {"generate_scripts": "no"}}"#, "`skills.generate_scripts`"),
            (r#"{"agent": {"spec_pins": [1]}}"#, "`agent.spec_pins`"),
            (r#"{"storage": {"url": "sqlite:///tmp/memory.db"}}"#, "`storage.url`"),
            (r#"{"storage": {"url": "postgres:///cairn"}}"#, "`storage.url`"),
            (r#"{"storage": {"url": 5432}}"#, "`storage.url`"),
            (r#"{"storage": "postgres://db/cairn"}"#, "`storage`"),
            (r#"{"storage": {"postgres_pool_size": 0}}"#, "`storage.postgres_pool_size`"),
            (r#"{"storage": {"postgres_pool_size": -4}}"#, "`storage.postgres_pool_size`"),
            (r#"{"storage": {"postgres_pool_size": "8"}}"#, "`storage.postgres_pool_size`"),
            (r#"{"storage": {"postgres_pool_size": 2.5}}"#, "`storage.postgres_pool_size`"),
            (r#"{"storage": {"postgres_pool_size": 1025}}"#, "`storage.postgres_pool_size`"),
            (r#"{"memory": {"episodic_cap": 0}}"#, "`memory.episodic_cap`"),
            (r#"{"memory": {"write_approval": "yes"}}"#, "`memory.write_approval`"),
            (r#"{"memory": {"write_approval": 1}}"#, "`memory.write_approval`"),
            (r#"{"memory": {"episodic_cap": -1}}"#, "`memory.episodic_cap`"),
            (r#"{"memory": {"episodic_cap": "10000"}}"#, "`memory.episodic_cap`"),
            (r#"{"memory": {"episodic_cap": 1.5}}"#, "`memory.episodic_cap`"),
            (r#"{"memory": {"episodic_cap": 10000001}}"#, "`memory.episodic_cap`"),
            (r#"{"memory": {"episodic_cap": 1e30}}"#, "`memory.episodic_cap`"),
            (r#"{"hooks": {"transforms": 5}}"#, "`hooks`"),
            (r#"{"host": {"context_deadline_ms": 49}}"#, "`host.context_deadline_ms`"),
            (r#"{"host": {"context_deadline_ms": 60001}}"#, "`host.context_deadline_ms`"),
            (r#"{"host": {"record_deadline_ms": "fast"}}"#, "`host.record_deadline_ms`"),
            (r#"{"host": {"record_deadline_ms": 0}}"#, "`host.record_deadline_ms`"),
            (r#"{"host": {"start_gateway": "yes"}}"#, "`host.start_gateway`"),
            (r#"{"host": true}"#, "`host`"),
            (r#"{"context": {"max_inject_chars": 999}}"#, "`context.max_inject_chars`"),
            (r#"{"server": 5}"#, "`server`"),
            (r#"[1]"#, "`(top level)`"),
        ] {
            let message = error(text);
            assert!(message.contains(key), "{text}: {message}");
            assert!(message.contains(CONFIG_FILE_NAME), "{text}: {message}");
        }
        assert!(error("{nope").contains("not valid JSON"));
    }

    #[test]
    fn unknown_and_unsupported_keys_warn_once_each_and_load() {
        let settings = load(
            r#"{"server": {"prot": 1}, "colour": {}, "memory": {"migrated": true},
                "skills": {"judge_model": "small"}}"#,
        )
        .unwrap();
        assert_eq!(settings.warnings.len(), 4, "{:?}", settings.warnings);
        for key in ["`server.prot`", "`colour`", "`memory.migrated`", "`skills.judge_model`"] {
            assert_eq!(settings.warnings.iter().filter(|warning| warning.contains(key)).count(), 1, "{key}");
        }
    }

    #[test]
    fn flags_win_over_environment_over_file_over_default() {
        let text = r#"{"server": {"port": 9000, "heartbeat_secs": 30},
                       "llm": {"model": "file-model", "base_url": "http://127.0.0.1:1"}}"#;
        let environment = Environment::from_pairs(&[
            ("CAIRN_SERVE_PORT", "9100"),
            ("CAIRN_LLM_MODEL", "env-model"),
            ("CAIRN_HEARTBEAT_SECS", ""),
        ]);
        let flags = Flags { port: Some(0), ..Flags::default() };
        let settings = load_with(text, &flags, &environment).unwrap();
        assert_eq!((settings.server.port, source(&settings, "server.port")), (0, Source::Flag));
        assert_eq!(settings.server.heartbeat_secs, 30, "an empty variable is unset");
        assert_eq!(source(&settings, "server.heartbeat_secs"), Source::File);
        assert_eq!(settings.llm.model.as_deref(), Some("env-model"));
        assert_eq!(source(&settings, "llm.model"), Source::Env);
        assert_eq!(settings.llm.base_url.as_deref(), Some("http://127.0.0.1:1"));
        assert_eq!(source(&settings, "server.max_body_bytes"), Source::Default);
        let settings = load_with(text, &Flags::default(), &environment).unwrap();
        assert_eq!((settings.server.port, source(&settings, "server.port")), (9100, Source::Env));
    }

    #[test]
    fn host_settings_default_and_come_from_the_file_or_the_environment() {
        let defaults = load("{}").unwrap();
        assert_eq!(
            (defaults.host.context_deadline_ms, defaults.host.record_deadline_ms, defaults.host.start_gateway),
            (DEFAULT_CONTEXT_DEADLINE_MS, DEFAULT_RECORD_DEADLINE_MS, true)
        );
        let text = r#"{"host": {"context_deadline_ms": 1500, "record_deadline_ms": 300, "start_gateway": true}}"#;
        let file = load(text).unwrap();
        assert_eq!((file.host.context_deadline_ms, file.host.record_deadline_ms), (1500, 300));
        assert_eq!(source(&file, "host.record_deadline_ms"), Source::File);
        let off = Environment::from_pairs(&[("CAIRN_HOST_START_GATEWAY", "0")]);
        let env = load_with(text, &Flags::default(), &off).unwrap();
        assert!(!env.host.start_gateway, "the environment wins over the file");
        assert_eq!(source(&env, "host.start_gateway"), Source::Env);
    }

    #[test]
    fn record_sessions_defaults_on_and_the_private_session_variable_only_turns_it_off() {
        // (file, CAIRN_PRIVATE_SESSION, recorded, source, warned)
        let cases = [
            ("{}", None, true, Source::Default, false),
            (r#"{"memory": {"record_sessions": false}}"#, None, false, Source::File, false),
            (r#"{"memory": {"record_sessions": true}}"#, None, true, Source::File, false),
            ("{}", Some("1"), false, Source::Env, false),
            ("{}", Some("TRUE"), false, Source::Env, false),
            ("{}", Some("yes"), false, Source::Env, false),
            ("{}", Some("0"), true, Source::Default, false),
            ("{}", Some("no"), true, Source::Default, false),
            (r#"{"memory": {"record_sessions": false}}"#, Some("0"), false, Source::File, false),
            ("{}", Some("maybe"), false, Source::Env, true),
        ];
        for (text, value, recorded, from, warned) in cases {
            let pairs: Vec<(&str, &str)> = value.map(|value| ("CAIRN_PRIVATE_SESSION", value)).into_iter().collect();
            let settings = load_with(text, &Flags::default(), &Environment::from_pairs(&pairs)).unwrap();
            let case = format!("{text} {value:?}");
            assert_eq!(settings.record_sessions, recorded, "{case}");
            assert_eq!(source(&settings, "memory.record_sessions"), from, "{case}");
            let warning = settings.warnings.iter().any(|warning| warning.contains("CAIRN_PRIVATE_SESSION"));
            assert_eq!(warning, warned, "{case}: {:?}", settings.warnings);
        }
        let message = load(r#"{"memory": {"record_sessions": "no"}}"#).unwrap_err().to_string();
        assert!(message.contains("`memory.record_sessions`"), "{message}");
    }

    #[test]
    fn bad_environment_values_name_the_variable() {
        for (name, value) in [
            ("CAIRN_SERVE_PORT", "eighty"),
            ("CAIRN_SERVE_HOST", "localhost"),
            ("CAIRN_HEARTBEAT_SECS", "0"),
            ("CAIRN_SKIP_MODEL_DOWNLOAD", "maybe"),
            ("CAIRN_STORAGE_URL", "mysql://db/cairn"),
            ("CAIRN_HOST_START_GATEWAY", "maybe"),
        ] {
            let message =
                load_with("{}", &Flags::default(), &Environment::from_pairs(&[(name, value)])).unwrap_err().to_string();
            assert!(message.contains(name), "{message}");
        }
    }

    #[test]
    fn the_storage_url_comes_from_the_environment_or_the_file_and_is_shown_without_its_password() {
        let text = r#"{"storage": {"url": "postgres://cairn:hunter2@db.internal:5432/cairn"}}"#;
        let settings = load(text).unwrap();
        assert_eq!(settings.storage_url.as_deref(), Some("postgres://cairn:hunter2@db.internal:5432/cairn"));
        let shown = settings.entries.iter().find(|entry| entry.key == "storage.url").unwrap();
        assert_eq!(shown.value, Value::String("postgres://cairn:***@db.internal:5432/cairn".to_owned()));
        assert_eq!(shown.source, Source::File);
        let environment = Environment::from_pairs(&[("CAIRN_STORAGE_URL", "postgresql://other/cairn")]);
        let settings = load_with(text, &Flags::default(), &environment).unwrap();
        assert_eq!(settings.storage_url.as_deref(), Some("postgresql://other/cairn"));
        assert_eq!(source(&settings, "storage.url"), Source::Env);
        let settings = load("{}").unwrap();
        assert_eq!((settings.storage_url.as_deref(), source(&settings, "storage.url")), (None, Source::Default));
        let message = load(r#"{"storage": {"url": "postgres://cairn:hunter2@/cairn"}}"#).unwrap_err().to_string();
        assert!(!message.contains("hunter2"), "{message}");
        assert!(message.contains("must name a host"), "{message}");
        let message = load(r#"{"storage": {"url": "mysql://cairn:hunter2@db/cairn"}}"#).unwrap_err().to_string();
        assert!(message.contains("must be a postgres:// URL") && !message.contains("hunter2"), "{message}");
        let environment = Environment::from_pairs(&[("CAIRN_STORAGE_URL", "sqlite:///var/cairn/memory.db")]);
        let message = load_with("{}", &Flags::default(), &environment).unwrap_err().to_string();
        assert!(message.contains("CAIRN_STORAGE_URL"), "{message}");
    }

    #[test]
    fn the_episodic_cap_and_the_pool_size_default_and_come_from_the_file() {
        let settings = load("{}").unwrap();
        assert_eq!((settings.episodic_cap, source(&settings, "memory.episodic_cap")), (10_000, Source::Default));
        assert_eq!(
            (settings.postgres_pool_size, source(&settings, "storage.postgres_pool_size")),
            (8, Source::Default)
        );
        let settings =
            load(r#"{"memory": {"episodic_cap": 10000000}, "storage": {"postgres_pool_size": 1024}}"#).unwrap();
        assert_eq!(source(&settings, "memory.episodic_cap"), Source::File);
        assert_eq!(source(&settings, "storage.postgres_pool_size"), Source::File);
        let config = settings.memory_config();
        assert_eq!((config.episodic_cap, config.postgres_pool_size), (10_000_000, 1024));
        for (text, range) in [
            (r#"{"memory": {"episodic_cap": 0}}"#, "from 1 to 10000000"),
            (r#"{"storage": {"postgres_pool_size": 2000}}"#, "from 1 to 1024"),
        ] {
            let message = error(text);
            assert!(message.contains(range), "{text}: {message}");
        }
    }

    #[test]
    fn every_password_form_of_a_storage_url_is_redacted() {
        let cases = [
            ("postgres://cairn:UserinfoPw1@127.0.0.1:1/db", "postgres://cairn:***@127.0.0.1:1/db"),
            ("postgres://cairn@127.0.0.1:1/db?password=QueryPw123", "postgres://cairn@127.0.0.1:1/db?password=***"),
            (
                "postgres:///db?host=/run&password=QueryPassw0rdZ&sslmode=disable",
                "postgres:///db?host=/run&password=***&sslmode=disable",
            ),
            (
                "postgres://h/db?PassWord=a&%70assword=b&sslpassword=c#x",
                "postgres://h/db?PassWord=***&%70assword=***&sslpassword=***#x",
            ),
            ("postgres://u:pa/ss@h/db", "postgres://u:***@h/db"),
            ("host=h password=secret1 dbname=d", "host=h password=*** dbname=d"),
            ("host=h password = 'se cr\\'et' user=u", "host=h password = *** user=u"),
            ("postgresql://h/db?sslmode=require", "postgresql://h/db?sslmode=require"),
        ];
        for (url, shown) in cases {
            assert_eq!(redact_url_password(url), shown, "{url}");
        }
        for url in ["host=h password=secret1", "postgres:///db?password=QueryPassw0rdZ"] {
            let reason = check_storage_url(url).unwrap_err();
            assert!(!reason.contains("secret1") && !reason.contains("QueryPassw0rdZ"), "{reason}");
        }
    }

    #[test]
    fn the_model_path_is_one_setting_with_a_legacy_alias() {
        let settings = load(r#"{"memory": {"embed_model_path": "/models/old"}}"#).unwrap();
        assert_eq!(settings.embedding.model_path.as_deref(), Some(Path::new("/models/old")));
        assert!(!settings.embedding.model_path_explicit);
        let settings =
            load(r#"{"memory": {"embed_model_path": "/models/old"}, "embedding": {"model_path": "/models/new"}}"#)
                .unwrap();
        assert_eq!(settings.embedding.model_path.as_deref(), Some(Path::new("/models/new")));
        let environment = Environment::from_pairs(&[("CAIRN_EMBED_MODEL_PATH", "/models/env")]);
        let settings = load_with(r#"{"embedding": {"model_path": "/x"}}"#, &Flags::default(), &environment).unwrap();
        assert_eq!(settings.embedding.model_path.as_deref(), Some(Path::new("/models/env")));
        assert!(settings.embedding.model_path_explicit);
    }

    #[test]
    fn hooks_keep_their_file_order() {
        let settings = load(r#"{"hooks": {"transforms": {"zeta": "Z: ", "alpha": "A: "}}}"#).unwrap();
        let patterns: Vec<_> = settings.hooks.transforms.0.iter().map(|(pattern, _)| pattern.as_str()).collect();
        assert_eq!(patterns, ["zeta", "alpha"]);
    }

    #[test]
    fn write_key_keeps_other_keys_and_their_order() {
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join(CONFIG_FILE_NAME);
        let original = "{\n  \"server\": {\"port\": 1234, \"host\": \"127.0.0.1\"},\n  \"hooks\": {\"transforms\": {\"zeta\": \"Z\", \"alpha\": \"A\"}}\n}\n";
        std::fs::write(&path, original).unwrap();
        let settings = write_key(home.path(), "memory.history_idle_hours", Some("1.5")).unwrap();
        assert_eq!(settings.memory.history_idle_hours, 1.5);
        let written = std::fs::read_to_string(&path).unwrap();
        let order = |needle: &str| written.find(needle).unwrap_or_else(|| panic!("{needle} in {written}"));
        assert!(order("\"server\"") < order("\"hooks\"") && order("\"hooks\"") < order("\"memory\""));
        assert!(order("\"port\"") < order("\"host\""));
        assert!(order("\"zeta\"") < order("\"alpha\""));
        // The edit lock's file stays (every process must lock the same inode).
        let leftovers: Vec<_> = std::fs::read_dir(home.path())
            .unwrap()
            .flatten()
            .filter(|entry| entry.file_name() != ".config.json.lock")
            .collect();
        assert_eq!(leftovers.len(), 1, "no temporary file is left behind");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        }
    }

    #[test]
    fn write_key_refuses_bad_values_and_unknown_keys_and_leaves_the_file() {
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join(CONFIG_FILE_NAME);
        let original = "{\"server\": {\"port\": 1234}}\n";
        std::fs::write(&path, original).unwrap();
        for (key, value) in [
            ("server.port", "eighty"),
            ("server.port", "70000"),
            ("memory.history_max_days", "0"),
            ("server.prot", "1"),
            ("colour.x", "1"),
            ("nodot", "1"),
            ("llm.base_url", "ftp://x"),
        ] {
            assert!(write_key(home.path(), key, Some(value)).is_err(), "{key} = {value}");
            assert_eq!(std::fs::read_to_string(&path).unwrap(), original, "{key} = {value}");
        }
        write_key(home.path(), "llm.model", Some("gpt-x")).unwrap();
        let written: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(written["llm"]["model"], "gpt-x");
        write_key(home.path(), "llm.model", None).unwrap();
        let written: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert!(written["llm"].get("model").is_none());
    }

    #[test]
    fn settings_update_validates() {
        let path = Path::new("config.json");
        let settings = MemorySettings::default();
        let updated = settings.apply_update(path, &serde_json::json!({"history_idle_hours": 1.5})).unwrap();
        assert_eq!(updated.history_idle_hours, 1.5);
        assert_eq!(updated.history_max_days, DEFAULT_HISTORY_MAX_DAYS);
        for bad in [
            serde_json::json!({"history_idle_hours": "soon"}),
            serde_json::json!({"history_max_days": 0}),
            serde_json::json!({"colour": 1}),
            serde_json::json!([1]),
        ] {
            assert!(settings.apply_update(path, &bad).is_err(), "{bad}");
        }
    }
}
