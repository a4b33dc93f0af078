//! `<home>/config.json` as `cairn serve` reads it: the `memory`, `skills`,
//! `hooks`, `agent`, `embedding`, `llm` and `server` sections, validated on
//! load with the file and key named in every error. Unknown keys are warned
//! about (and listed in `/api/health`), never fatal. Command-line flags and
//! environment variables (clap merges those two) win over the file.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

/// The configuration file's name inside the home.
pub(crate) const CONFIG_FILE_NAME: &str = "config.json";
/// Port used when neither a flag, the environment nor the file sets one.
pub(crate) const DEFAULT_PORT: u16 = 8745;
/// Request bodies larger than this are refused with 413.
pub(crate) const DEFAULT_MAX_BODY_BYTES: u64 = 1024 * 1024;
/// Heartbeat period.
pub(crate) const DEFAULT_HEARTBEAT_SECS: u64 = 60;
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
/// Chat-completions request timeout.
pub(crate) const DEFAULT_LLM_TIMEOUT_SECS: u64 = 60;
/// Retries of a failed chat-completions request.
pub(crate) const DEFAULT_LLM_RETRIES: u64 = 2;

/// A configuration problem; the message names the file and the key.
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
    #[error("writing {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
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
}

/// `skills`: the catalog settings.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct SkillsSection {
    pub(crate) max_triggered: usize,
    pub(crate) lazy_load: bool,
    pub(crate) extra_paths: Vec<PathBuf>,
}

/// `agent`: where agent specs live and which duplicates are pinned.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct AgentSection {
    pub(crate) agents_dir: Option<PathBuf>,
    pub(crate) project_dir: Option<PathBuf>,
    pub(crate) spec_pins: BTreeMap<String, String>,
}

/// The whole validated configuration.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct GatewayConfig {
    #[serde(skip)]
    pub(crate) path: PathBuf,
    pub(crate) memory: MemorySettings,
    /// `memory.extra_prefixes`: accepted semantic key prefixes besides the built-in ones.
    pub(crate) extra_prefixes: Vec<String>,
    pub(crate) skills: SkillsSection,
    /// The `hooks` section, handed to the hooks crate as it is.
    pub(crate) hooks: Value,
    pub(crate) agent: AgentSection,
    pub(crate) embedding: EmbeddingSection,
    pub(crate) llm: LlmSection,
    pub(crate) server: ServerSection,
    /// Unknown keys, as `section.key`.
    pub(crate) warnings: Vec<String>,
}

/// Values from the command line and the environment; `None` defers to the file.
#[derive(Debug, Clone, Default)]
pub(crate) struct Overrides {
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

    fn strings(&mut self, key: &'static str) -> Result<Vec<String>, ConfigError> {
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| {
                    item.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| invalid(self.path, &self.key(key), format!("must list strings (got {item})")))
                })
                .collect(),
            Some(other) => Err(invalid(self.path, &self.key(key), format!("must be a list of strings (got {other})"))),
        }
    }

    fn unknown(&self) -> Vec<String> {
        self.map.keys().filter(|key| !self.used.contains(&key.as_str())).map(|key| self.key(key)).collect()
    }
}

/// Sections whose keys other parts of Cairn own and read themselves.
const PASS_THROUGH_MEMORY_KEYS: &[&str] = &["embed_model_path", "embed_model_url", "migrated"];

impl GatewayConfig {
    /// Reads and validates `<home>/config.json` (a missing file means
    /// defaults), then applies the overrides.
    pub(crate) fn load(home: &Path, overrides: &Overrides) -> Result<Self, ConfigError> {
        let path = home.join(CONFIG_FILE_NAME);
        let root = read_json(&path)?;
        let Value::Object(root) = root else {
            return Err(invalid(&path, "(top level)", "must be a JSON object"));
        };
        let mut warnings = Vec::new();
        for key in root.keys() {
            if !["memory", "skills", "hooks", "agent", "embedding", "llm", "server"].contains(&key.as_str()) {
                warnings.push(format!("{}: unknown section `{key}` (ignored)", path.display()));
            }
        }

        let mut memory_section = Section::of(&path, &root, "memory")?;
        let defaults = MemorySettings::default();
        let memory = MemorySettings {
            history_idle_hours: memory_section
                .f64("history_idle_hours", 0.01, 24.0 * 365.0)?
                .unwrap_or(defaults.history_idle_hours),
            history_max_days: memory_section.u64("history_max_days", 1, 100_000)?.unwrap_or(defaults.history_max_days),
        };
        let extra_prefixes = memory_section.strings("extra_prefixes")?;
        let legacy_model_path = memory_section.string("embed_model_path")?;
        let legacy_model_url = memory_section.string("embed_model_url")?;
        memory_section.used.extend(PASS_THROUGH_MEMORY_KEYS);
        collect_unknown(&memory_section, &path, &mut warnings);

        let mut skills_section = Section::of(&path, &root, "skills")?;
        let skills = SkillsSection {
            max_triggered: skills_section
                .u64("max_triggered", 0, 100)?
                .map_or(cairn_skills::constants::MAX_TRIGGERED, |value| value as usize),
            lazy_load: skills_section.bool("lazy_load")?.unwrap_or(false),
            extra_paths: skills_section.strings("extra_paths")?.into_iter().map(PathBuf::from).collect(),
        };
        // The spec's auto-skill keys belong to a pipeline this binary does not run; they are kept, not warned about.
        skills_section.used.extend([
            "auto_create_from_sessions",
            "approval_required",
            "auto_refine_on_deviation",
            "auto_min_tool_calls",
            "auto_similarity_threshold",
            "max_auto_skills",
            "stale_after_days",
            "archive_after_days",
            "pending_ttl_days",
            "generate_scripts",
            "judge_model",
        ]);
        collect_unknown(&skills_section, &path, &mut warnings);

        let hooks = match root.get("hooks") {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(value @ Value::Object(_)) => value.clone(),
            Some(_) => return Err(invalid(&path, "hooks", "must be a JSON object")),
        };

        let mut agent_section = Section::of(&path, &root, "agent")?;
        let agents_dir = agent_section.string("agents_dir")?.map(PathBuf::from);
        let project_dir = agent_section.string("project_dir")?.map(PathBuf::from);
        let spec_pins = match agent_section.get("spec_pins") {
            None => BTreeMap::new(),
            Some(value) => serde_json::from_value::<BTreeMap<String, String>>(value.clone())
                .map_err(|_| invalid(&path, "agent.spec_pins", "must map agent names to file names"))?,
        };
        agent_section.used.push("kiro_hooks");
        collect_unknown(&agent_section, &path, &mut warnings);

        let mut embedding_section = Section::of(&path, &root, "embedding")?;
        let embedding = EmbeddingSection {
            model_path: overrides
                .model_path
                .clone()
                .or(embedding_section.string("model_path")?.map(PathBuf::from))
                .or(legacy_model_path.map(PathBuf::from)),
            model_url: overrides.model_url.clone().or(embedding_section.string("model_url")?).or(legacy_model_url),
            skip_download: overrides.skip_download || embedding_section.bool("skip_download")?.unwrap_or(false),
            pool_workers: embedding_section.u64("pool_workers", 1, 64)?.unwrap_or(DEFAULT_POOL_WORKERS) as usize,
            pool_queue: embedding_section.u64("pool_queue", 0, 100_000)?.unwrap_or(DEFAULT_POOL_QUEUE) as usize,
        };
        collect_unknown(&embedding_section, &path, &mut warnings);

        let mut llm_section = Section::of(&path, &root, "llm")?;
        let base_url = overrides.llm_base_url.clone().or(llm_section.string("base_url")?);
        if let Some(url) = &base_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(invalid(&path, "llm.base_url", format!("must be an http:// or https:// URL (got {url:?})")));
        }
        let llm = LlmSection {
            base_url,
            model: overrides.llm_model.clone().or(llm_section.string("model")?),
            api_key: overrides.llm_api_key.clone().or(llm_section.string("api_key")?),
            timeout_secs: llm_section.u64("timeout_secs", 1, 3_600)?.unwrap_or(DEFAULT_LLM_TIMEOUT_SECS),
            max_retries: llm_section.u64("max_retries", 0, 10)?.unwrap_or(DEFAULT_LLM_RETRIES) as u32,
        };
        collect_unknown(&llm_section, &path, &mut warnings);

        let mut server_section = Section::of(&path, &root, "server")?;
        let host = match overrides.host {
            Some(host) => host,
            None => match server_section.string("host")? {
                None => IpAddr::from([127, 0, 0, 1]),
                Some(text) => text.parse().map_err(|_| {
                    invalid(&path, "server.host", format!("must be an IP address such as 127.0.0.1 (got {text:?})"))
                })?,
            },
        };
        let server = ServerSection {
            host,
            port: match overrides.port {
                Some(port) => port,
                None => server_section.u64("port", 0, 65_535)?.map_or(DEFAULT_PORT, |port| port as u16),
            },
            allow_non_loopback: overrides.allow_non_loopback
                || server_section.bool("allow_non_loopback")?.unwrap_or(false),
            max_body_bytes: server_section.u64("max_body_bytes", 1024, 1 << 30)?.unwrap_or(DEFAULT_MAX_BODY_BYTES),
            heartbeat_secs: match overrides.heartbeat_secs {
                Some(secs) => secs,
                None => server_section.u64("heartbeat_secs", 1, 86_400)?.unwrap_or(DEFAULT_HEARTBEAT_SECS),
            },
        };
        collect_unknown(&server_section, &path, &mut warnings);

        let agent = AgentSection { agents_dir, project_dir, spec_pins };
        Ok(Self { path, memory, extra_prefixes, skills, hooks, agent, embedding, llm, server, warnings })
    }
}

fn collect_unknown(section: &Section<'_>, path: &Path, warnings: &mut Vec<String>) {
    for key in section.unknown() {
        warnings.push(format!("{}: unknown key `{key}` (ignored)", path.display()));
    }
}

fn read_json(path: &Path) -> Result<Value, ConfigError> {
    match std::fs::read_to_string(path) {
        Ok(text) if text.trim().is_empty() => Ok(Value::Object(Map::new())),
        Ok(text) => serde_json::from_str(&text).map_err(|source| ConfigError::Parse { path: path.to_owned(), source }),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Value::Object(Map::new())),
        Err(source) => Err(ConfigError::Read { path: path.to_owned(), source }),
    }
}

/// Sets (or, with `None`, removes) keys of one section of the file, keeping
/// every other key, through a temporary file renamed over the original.
pub(crate) fn persist_keys(path: &Path, section: &str, keys: &[(&str, Option<Value>)]) -> Result<(), ConfigError> {
    let mut root = read_json(path)?;
    if !root.is_object() {
        return Err(invalid(path, "(top level)", "must be a JSON object"));
    }
    let entry =
        root.as_object_mut().expect("checked above").entry(section).or_insert_with(|| Value::Object(Map::new()));
    let Some(map) = entry.as_object_mut() else {
        return Err(invalid(path, section, "must be a JSON object"));
    };
    for (key, value) in keys {
        match value {
            Some(value) => map.insert((*key).to_owned(), value.clone()),
            None => map.remove(*key),
        };
    }
    let mut text = serde_json::to_string_pretty(&root).expect("JSON values serialise");
    text.push('\n');
    atomic_write(path, text.as_bytes())
}

/// Writes the memory settings into the file's `memory` section.
pub(crate) fn persist_memory_settings(path: &Path, settings: &MemorySettings) -> Result<(), ConfigError> {
    persist_keys(
        path,
        "memory",
        &[
            ("history_idle_hours", Some(serde_json::json!(settings.history_idle_hours))),
            ("history_max_days", Some(serde_json::json!(settings.history_max_days))),
        ],
    )
}

/// Writes `bytes` to a temporary sibling, syncs it, and renames it over `path`.
pub(crate) fn atomic_write(path: &Path, bytes: &[u8]) -> Result<(), ConfigError> {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let write_error = |source| ConfigError::Write { path: path.to_owned(), source };
    let parent = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(write_error)?;
    let name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    let counter = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let temporary = parent.join(format!(".{name}.{}.{counter}.tmp", std::process::id()));
    let result = (|| {
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    result.map_err(write_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<GatewayConfig, ConfigError> {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join(CONFIG_FILE_NAME), text).unwrap();
        GatewayConfig::load(home.path(), &Overrides::default())
    }

    fn error(text: &str) -> String {
        load(text).unwrap_err().to_string()
    }

    #[test]
    fn defaults_without_a_file() {
        let home = tempfile::tempdir().unwrap();
        let config = GatewayConfig::load(home.path(), &Overrides::default()).unwrap();
        assert_eq!(config.server.port, DEFAULT_PORT);
        assert!(config.server.host.is_loopback());
        assert_eq!(config.memory, MemorySettings::default());
        assert!(config.warnings.is_empty());
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
            (r#"{"embedding": {"pool_workers": 0}}"#, "`embedding.pool_workers`"),
            (r#"{"llm": {"base_url": "ftp://x"}}"#, "`llm.base_url`"),
            (r#"{"llm": {"max_retries": 99}}"#, "`llm.max_retries`"),
            (r#"{"skills": {"max_triggered": -3}}"#, "`skills.max_triggered`"),
            (r#"{"agent": {"spec_pins": [1]}}"#, "`agent.spec_pins`"),
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
    fn unknown_keys_warn_and_load() {
        let config = load(r#"{"server": {"prot": 1}, "colour": {}, "memory": {"migrated": true}}"#).unwrap();
        assert_eq!(config.warnings.len(), 2, "{:?}", config.warnings);
        assert!(config.warnings.iter().any(|warning| warning.contains("`server.prot`")));
        assert!(config.warnings.iter().any(|warning| warning.contains("`colour`")));
    }

    #[test]
    fn overrides_win_over_the_file() {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(
            home.path().join(CONFIG_FILE_NAME),
            r#"{"server": {"port": 9000, "heartbeat_secs": 30}, "llm": {"model": "file-model", "base_url": "http://127.0.0.1:1"}}"#,
        )
        .unwrap();
        let overrides = Overrides { port: Some(0), llm_model: Some("flag-model".to_owned()), ..Overrides::default() };
        let config = GatewayConfig::load(home.path(), &overrides).unwrap();
        assert_eq!(config.server.port, 0);
        assert_eq!(config.server.heartbeat_secs, 30);
        assert_eq!(config.llm.model.as_deref(), Some("flag-model"));
        assert_eq!(config.llm.base_url.as_deref(), Some("http://127.0.0.1:1"));
    }

    #[test]
    fn settings_update_validates_and_persists_atomically() {
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join(CONFIG_FILE_NAME);
        std::fs::write(&path, r#"{"server": {"port": 1234}, "memory": {"migrated": true}}"#).unwrap();
        let settings = MemorySettings::default();
        let updated = settings.apply_update(&path, &serde_json::json!({"history_idle_hours": 1.5})).unwrap();
        assert_eq!(updated.history_idle_hours, 1.5);
        assert_eq!(updated.history_max_days, DEFAULT_HISTORY_MAX_DAYS);
        for bad in [
            serde_json::json!({"history_idle_hours": "soon"}),
            serde_json::json!({"history_max_days": 0}),
            serde_json::json!({"colour": 1}),
            serde_json::json!([1]),
        ] {
            assert!(settings.apply_update(&path, &bad).is_err(), "{bad}");
        }
        persist_memory_settings(&path, &updated).unwrap();
        let written: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(written["memory"]["history_idle_hours"], 1.5);
        assert_eq!(written["memory"]["migrated"], true);
        assert_eq!(written["server"]["port"], 1234);
        let leftovers: Vec<_> = std::fs::read_dir(home.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary file is left behind");
    }
}
