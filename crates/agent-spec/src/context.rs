//! [`ResolveContext`]: everything resolution needs from outside the spec,
//! handed in by the caller (this crate reads no environment variables).

use std::collections::BTreeMap;
use std::path::PathBuf;

use cairn_guard::SensitivePaths;

/// Inputs for resolving prompts and resources.
#[derive(Debug, Clone)]
pub struct ResolveContext {
    /// The user's home directory (`~`, global steering).
    pub home: Option<PathBuf>,
    /// Variables `$VAR` / `${VAR}` expand from in a relative prompt path.
    pub env: BTreeMap<String, String>,
    /// The session's project directory: relative resources anchor here.
    pub project_dir: Option<PathBuf>,
    /// Which paths may never be read.
    pub sensitive: SensitivePaths,
    /// Add kiro-cli's inherited steering (global and project steering,
    /// `AGENTS.md`) to the spec's own `file://` resources.
    pub inherit_default_resources: bool,
}

impl ResolveContext {
    /// A context for a user whose home is `home`; the sensitive-path rules
    /// cover that home.
    pub fn new(home: Option<PathBuf>) -> Self {
        let sensitive = home.clone().map_or_else(SensitivePaths::default, SensitivePaths::with_home);
        Self { home, env: BTreeMap::new(), project_dir: None, sensitive, inherit_default_resources: true }
    }

    /// Sets the variables a prompt path may expand.
    #[must_use]
    pub fn with_env(mut self, env: impl IntoIterator<Item = (String, String)>) -> Self {
        self.env = env.into_iter().collect();
        self
    }

    /// Sets the session's project directory.
    #[must_use]
    pub fn with_project_dir(mut self, project_dir: impl Into<PathBuf>) -> Self {
        self.project_dir = Some(project_dir.into());
        self
    }

    /// Replaces the sensitive-path rules.
    #[must_use]
    pub fn with_sensitive(mut self, sensitive: SensitivePaths) -> Self {
        self.sensitive = sensitive;
        self
    }

    /// Turns kiro-cli's inherited steering defaults on or off.
    #[must_use]
    pub fn with_default_resources(mut self, inherit: bool) -> Self {
        self.inherit_default_resources = inherit;
        self
    }
}

/// The path text of a `file://` or `skill://` remainder: `/C:/x` (the form
/// a Windows file URI takes) reads as `C:/x`; nothing is percent-decoded.
pub(crate) fn uri_path_text(rest: &str) -> &str {
    let bytes = rest.as_bytes();
    let is_drive = bytes.len() >= 3
        && bytes[0] == b'/'
        && bytes[1].is_ascii_alphabetic()
        && bytes[2] == b':'
        && (bytes.len() == 3 || matches!(bytes[3], b'/' | b'\\'));
    if is_drive { &rest[1..] } else { rest }
}

/// True for `C:/...` or `C:\...`.
pub(crate) fn is_drive_path(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':'
}

pub(crate) use cairn_guard::lexical_normalize;
