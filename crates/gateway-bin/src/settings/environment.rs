//! The `CAIRN_*` variables Cairn reads, captured once per process.

use std::collections::BTreeMap;

use super::ConfigError;

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

    pub(super) fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
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

    pub(super) fn get(&self, name: &'static str) -> Option<&str> {
        self.vars.get(name).map(|value| value.trim())
    }

    pub(super) fn parse<T: std::str::FromStr>(&self, name: &'static str, what: &str) -> Result<Option<T>, ConfigError> {
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
    pub(super) fn private_session(&self) -> (bool, Option<String>) {
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

    pub(super) fn flag(&self, name: &'static str) -> Result<Option<bool>, ConfigError> {
        match self.get(name).map(str::to_ascii_lowercase).as_deref() {
            None => Ok(None),
            Some("1" | "true" | "yes" | "on") => Ok(Some(true)),
            Some("0" | "false" | "no" | "off") => Ok(Some(false)),
            Some(other) => Err(ConfigError::Env { name, reason: format!("must be 1 or 0 (got {other:?})") }),
        }
    }
}
