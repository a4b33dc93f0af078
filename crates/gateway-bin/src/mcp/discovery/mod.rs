//! MCP servers the user already has: where they are defined, whether an
//! agent mounts them, and whether they answer.
//!
//! Sources, in the order a name is resolved when several define it:
//!
//! 1. the selected agent's spec (`mcpServers`), when an agent is selected;
//! 2. a project's `.kiro/settings/mcp.json` (`agent.project_dir` or `--project`);
//! 3. the user's `~/.kiro/settings/mcp.json`;
//! 4. `<home>/mcp.json`;
//! 5. every other agent spec (user and project agents directories).
//!
//! A source that is missing contributes nothing; a malformed one (not JSON,
//! not an object, `mcpServers` not an object, an entry of the wrong shape)
//! contributes nothing of what is malformed and says why, and never aborts
//! the listing. Environment and header values are never shown: a listed
//! server names their keys only, and its command line goes through the
//! credential redaction.
//!
//! The modules beside this one probe servers ([`probe`]), edit agent specs
//! byte-preservingly ([`edit`]: enable, disable, sync) and import servers
//! from other agents' configs ([`import`]).

pub(crate) mod cli;
pub(crate) mod edit;
pub(crate) mod import;
pub(crate) mod probe;

use std::path::{Path, PathBuf};

use cairn_agent_spec::{AgentCatalog, AgentSpec, McpServer, McpTransport, Pins, Scope, SpecFormat, SpecSeverity};
use cairn_guard::SensitivePaths;
use serde::Serialize;
use serde_json::{Value, json};

use crate::home::Home;

/// The name of Cairn's own server entry (as `cairn host install` writes it);
/// nothing imported may replace or shadow it.
pub(crate) const CAIRN_SERVER_NAME: &str = "cairn";
/// Largest config file read as a source (Claude Code's `~/.claude.json`
/// carries per-project state and grows large).
pub(crate) const MAX_SOURCE_BYTES: u64 = 16 * 1024 * 1024;
/// The data-home file of extra servers.
pub(crate) const HOME_MCP_FILE_NAME: &str = "mcp.json";
/// Where kiro-cli keeps its global and project server files.
pub(crate) const KIRO_SETTINGS_MCP: &str = ".kiro/settings/mcp.json";

/// What kind of file a source is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum SourceKind {
    /// An agent spec's `mcpServers`.
    AgentSpec,
    /// A project's `.kiro/settings/mcp.json`.
    KiroProject,
    /// `~/.kiro/settings/mcp.json`.
    KiroGlobal,
    /// `<home>/mcp.json`.
    CairnHome,
}

/// One source file and what it contributed.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SourceInfo {
    pub(crate) kind: SourceKind,
    pub(crate) path: PathBuf,
    /// The agent, for an agent spec.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) agent: Option<String>,
    /// User or project directory, for an agent spec.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) scope: Option<Scope>,
    pub(crate) exists: bool,
    /// Server names it defines (well-formed entries only).
    pub(crate) servers: Vec<String>,
    /// Why some or all of it was not read.
    pub(crate) problems: Vec<String>,
}

/// The agent whose grants the listing reports and whose spec is edited.
#[derive(Debug, Clone)]
pub(crate) struct SelectedAgent {
    pub(crate) name: String,
    pub(crate) path: PathBuf,
    pub(crate) scope: Scope,
    pub(crate) spec: AgentSpec,
    /// Several files declare the name and none is pinned.
    pub(crate) ambiguous: Vec<PathBuf>,
}

impl SelectedAgent {
    /// Why this spec may not be rewritten, or `None`.
    pub(crate) fn read_only_reason(&self) -> Option<(&'static str, String)> {
        if self.scope == Scope::Project {
            return Some((
                "project_spec_readonly",
                format!("{} belongs to a project checkout; it is never rewritten", self.path.display()),
            ));
        }
        if self.spec.format() != SpecFormat::Json {
            return Some((
                "markdown_spec_readonly",
                format!("{} is a Markdown spec; it is read-only here", self.path.display()),
            ));
        }
        if self.ambiguous.len() > 1 {
            let listed = self.ambiguous.iter().map(|path| path.display().to_string()).collect::<Vec<_>>().join(", ");
            return Some((
                "ambiguous_spec",
                format!("{listed} all declare `{}`; pin one (`cairn agent pin`) before editing", self.name),
            ));
        }
        None
    }
}

/// Where the sources are, resolved from the settings.
#[derive(Debug, Clone)]
pub(crate) struct Locations {
    pub(crate) catalog_dirs: cairn_agent_spec::AgentDirs,
    pub(crate) pins: Pins,
    pub(crate) kiro_project: Option<PathBuf>,
    pub(crate) kiro_global: Option<PathBuf>,
    pub(crate) cairn_home: PathBuf,
    /// The user's home directory (foreign configs live there).
    pub(crate) user_home: Option<PathBuf>,
    /// Agent specs and the config files of servers are read through the
    /// home's sensitive-path rules: the user's plus the home's secrets
    /// (which include `<home>/mcp.json`).
    pub(crate) sensitive: SensitivePaths,
    /// The home's own files this module reads and writes (`mcp.json`, the
    /// import ledger), at paths it builds itself: the user's rules only.
    pub(crate) own_file_reader: SensitivePaths,
}

impl Locations {
    /// The locations of `home`'s settings; `project` overrides `agent.project_dir`.
    pub(crate) fn from_home(home: &Home, project: Option<&Path>) -> anyhow::Result<Self> {
        let user_home = home.settings().user_home.clone();
        let project = home.project_dir(project);
        Ok(Self {
            catalog_dirs: home.agent_dirs(None, project.as_deref())?,
            pins: home.pins()?,
            kiro_project: project.map(|dir| dir.join(KIRO_SETTINGS_MCP)),
            kiro_global: user_home.as_ref().map(|dir| dir.join(KIRO_SETTINGS_MCP)),
            cairn_home: home.dir().to_owned(),
            own_file_reader: SensitivePaths::for_user(user_home.clone()),
            user_home,
            sensitive: home.sensitive().clone(),
        })
    }

    /// `<home>/mcp.json`.
    pub(crate) fn home_mcp_file(&self) -> PathBuf {
        self.cairn_home.join(HOME_MCP_FILE_NAME)
    }
}

/// Reads an untrusted config file: size-checked, then through the guarded
/// read. `Ok(None)` when it does not exist.
pub(crate) fn read_config_file(reader: &SensitivePaths, path: &Path) -> Result<Option<String>, String> {
    match std::fs::metadata(path) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(format!("cannot read: {error}")),
        Ok(meta) if !meta.is_file() => return Err("is not a regular file".to_owned()),
        Ok(meta) if meta.len() > MAX_SOURCE_BYTES => {
            return Err(format!("is {} bytes; files over {MAX_SOURCE_BYTES} bytes are not read", meta.len()));
        }
        Ok(_) => {}
    }
    reader.read_to_string(path).map(Some).map_err(|error| error.to_string())
}

/// A definition of a server in one source.
#[derive(Debug, Clone)]
pub(crate) struct Definition {
    pub(crate) source: usize,
    pub(crate) server: McpServer,
    /// The entry as written (sync copies it; never shown).
    pub(crate) raw: Value,
}

/// Every source, read once.
#[derive(Debug, Clone)]
pub(crate) struct Discovery {
    pub(crate) agent: Option<SelectedAgent>,
    /// What an edit may read the agent's spec through (the user's
    /// credential stores refused).
    pub(crate) spec_reader: SensitivePaths,
    pub(crate) sources: Vec<SourceInfo>,
    /// In precedence order (see the module docs).
    pub(crate) definitions: Vec<Definition>,
}

/// Servers of an `mcpServers` value, with the problems of the malformed
/// entries (parsed by the agent-spec crate's reader).
fn read_servers(value: &Value) -> (Vec<McpServer>, Vec<String>) {
    if !value.is_object() {
        return (Vec::new(), vec![format!("`mcpServers` is not an object; it contributes nothing")]);
    }
    let wrapper = json!({ "mcpServers": value });
    let spec = AgentSpec::from_json_str(&wrapper.to_string()).expect("an object serialises to a JSON object");
    (spec.mcp_servers(), server_problems(&spec))
}

fn server_problems(spec: &AgentSpec) -> Vec<String> {
    spec.diagnostics()
        .into_iter()
        .filter(|finding| finding.severity == SpecSeverity::Error && finding.path.starts_with("mcpServers"))
        .map(|finding| format!("{}: {}", finding.path, finding.message))
        .collect()
}

/// Reads an `mcp.json`-shaped file (`{"mcpServers": {...}}`).
fn read_mcp_file(reader: &SensitivePaths, kind: SourceKind, path: &Path) -> (SourceInfo, Vec<(McpServer, Value)>) {
    let mut info = SourceInfo {
        kind,
        path: path.to_owned(),
        agent: None,
        scope: None,
        exists: false,
        servers: Vec::new(),
        problems: Vec::new(),
    };
    let text = match read_config_file(reader, path) {
        Ok(None) => return (info, Vec::new()),
        Ok(Some(text)) => text,
        Err(problem) => {
            info.exists = path.exists();
            info.problems.push(problem);
            return (info, Vec::new());
        }
    };
    info.exists = true;
    let value: Value = match serde_json::from_str(&text) {
        Ok(value) => value,
        Err(error) => {
            info.problems.push(format!("not valid JSON ({error}); it contributes nothing"));
            return (info, Vec::new());
        }
    };
    let Value::Object(map) = value else {
        info.problems.push("not a JSON object; it contributes nothing".to_owned());
        return (info, Vec::new());
    };
    let Some(servers) = map.get("mcpServers") else { return (info, Vec::new()) };
    let (parsed, problems) = read_servers(servers);
    info.problems = problems;
    info.servers = parsed.iter().map(|server| server.name.clone()).collect();
    let with_raw = with_raw(parsed, servers);
    (info, with_raw)
}

fn with_raw(servers: Vec<McpServer>, map: &Value) -> Vec<(McpServer, Value)> {
    servers
        .into_iter()
        .map(|server| {
            let raw = map.get(&server.name).cloned().unwrap_or(Value::Null);
            (server, raw)
        })
        .collect()
}

impl Discovery {
    /// Reads every source; `agent` selects the agent whose spec comes first
    /// and whose grants are reported.
    /// The agent an edit (enable, disable, sync) applies to: the one named,
    /// else the only agent spec there is. With none, or several and none
    /// named, the edit is refused (`agent_required`) with the names to
    /// choose from.
    pub(crate) fn editing_agent(locations: &Locations, named: Option<&str>) -> Result<String, edit::EditRefused> {
        if let Some(name) = named {
            return Ok(name.to_owned());
        }
        let catalog = AgentCatalog::load(&locations.catalog_dirs, &locations.sensitive).map_err(|error| {
            edit::EditRefused::new("unreadable", format!("reading the agent spec directories: {error}"))
        })?;
        let names: Vec<String> = catalog.names().into_iter().collect();
        match names.as_slice() {
            [only] => Ok(only.clone()),
            [] => Err(edit::EditRefused::new(
                "agent_required",
                "there is no agent spec to edit: create one in kiro-cli (or the agents directory) first",
            )),
            several => Err(edit::EditRefused::new(
                "agent_required",
                format!("name the agent whose spec to edit: one of {}", several.join(", ")),
            )),
        }
    }

    pub(crate) fn load(locations: &Locations, agent: Option<&str>) -> anyhow::Result<Self> {
        let catalog = AgentCatalog::load(&locations.catalog_dirs, &locations.sensitive)
            .map_err(|error| anyhow::anyhow!("reading the agent spec directories: {error}"))?;
        let selected = match agent {
            None => None,
            Some(name) => {
                if !catalog.names().contains(name) {
                    return Err(UnknownAgent(name.to_owned()).into());
                }
                let resolved = catalog
                    .resolve(name, &locations.pins)
                    .map_err(|error| anyhow::anyhow!("agent `{name}` does not resolve: {error}"))?;
                let claimants = catalog.claimant_paths(name);
                let ambiguous = if locations.pins.contains_key(name) { Vec::new() } else { claimants };
                Some(SelectedAgent {
                    name: name.to_owned(),
                    path: resolved.path,
                    scope: resolved.scope,
                    spec: resolved.spec,
                    ambiguous,
                })
            }
        };
        let mut discovery = Self {
            agent: selected,
            spec_reader: locations.own_file_reader.clone(),
            sources: Vec::new(),
            definitions: Vec::new(),
        };
        let mut agent_sources: Vec<(SourceInfo, Vec<(McpServer, Value)>)> = Vec::new();
        for file in catalog.files() {
            if file.dropped_for_twin {
                continue;
            }
            let mut info = SourceInfo {
                kind: SourceKind::AgentSpec,
                path: file.path.clone(),
                agent: None,
                scope: Some(file.scope),
                exists: true,
                servers: Vec::new(),
                problems: Vec::new(),
            };
            let servers = match &file.spec {
                Ok(spec) => {
                    info.agent = spec.name().map(str::to_owned);
                    let servers = spec.mcp_servers();
                    info.problems = server_problems(spec);
                    info.servers = servers.iter().map(|server| server.name.clone()).collect();
                    with_raw(servers, spec.fields().get("mcpServers").unwrap_or(&Value::Null))
                }
                Err(error) => {
                    info.problems.push(format!("{error}; it contributes nothing"));
                    Vec::new()
                }
            };
            agent_sources.push((info, servers));
        }
        // The selected agent's own file first.
        if let Some(selected) = &discovery.agent
            && let Some(index) = agent_sources.iter().position(|(info, _)| info.path == selected.path)
        {
            let first = agent_sources.remove(index);
            discovery.push(first);
        }
        let files = [
            (SourceKind::KiroProject, locations.kiro_project.clone()),
            (SourceKind::KiroGlobal, locations.kiro_global.clone()),
            (SourceKind::CairnHome, Some(locations.home_mcp_file())),
        ];
        for (kind, path) in files {
            if let Some(path) = path {
                let reader =
                    if kind == SourceKind::CairnHome { &locations.own_file_reader } else { &locations.sensitive };
                discovery.push(read_mcp_file(reader, kind, &path));
            }
        }
        for source in agent_sources {
            discovery.push(source);
        }
        Ok(discovery)
    }

    fn push(&mut self, (info, servers): (SourceInfo, Vec<(McpServer, Value)>)) {
        let source = self.sources.len();
        self.sources.push(info);
        self.definitions.extend(servers.into_iter().map(|(server, raw)| Definition { source, server, raw }));
    }

    /// The effective definition of every name (the first in precedence
    /// order), in that order.
    pub(crate) fn effective(&self) -> Vec<&Definition> {
        let mut seen = std::collections::HashSet::new();
        self.definitions.iter().filter(|definition| seen.insert(definition.server.name.as_str())).collect()
    }

    /// The effective definition of `name`.
    pub(crate) fn find(&self, name: &str) -> Option<&Definition> {
        self.definitions.iter().find(|definition| definition.server.name == name)
    }

    /// The listing: each server with its provenance and, with an agent,
    /// whether that agent mounts it.
    pub(crate) fn listing(&self) -> Value {
        let servers: Vec<Value> = self.effective().into_iter().map(|definition| self.describe(definition)).collect();
        json!({
            "agent": self.agent.as_ref().map(|agent| json!({
                "name": agent.name,
                "path": agent.path,
                "scope": agent.scope,
                "editable": agent.read_only_reason().is_none(),
            })),
            "servers": servers,
            "sources": self.sources,
        })
    }

    fn source_ref(&self, index: usize) -> Value {
        let source = &self.sources[index];
        let mut out = json!({"kind": source.kind, "path": source.path});
        if let Some(agent) = &source.agent {
            out["agent"] = json!(agent);
        }
        out
    }

    fn describe(&self, definition: &Definition) -> Value {
        let server = &definition.server;
        let mut out = transport_view(&server.transport);
        out["name"] = json!(server.name);
        out["disabled"] = json!(server.disabled);
        out["source"] = self.source_ref(definition.source);
        out["also_defined_in"] = self
            .definitions
            .iter()
            .filter(|other| other.server.name == server.name && other.source != definition.source)
            .map(|other| self.source_ref(other.source))
            .collect();
        if let Some(agent) = &self.agent {
            let grants = agent.spec.granted_tools();
            let tools_entry = agent.spec.tools().entries().iter().any(|entry| names_server(entry, &server.name));
            let allowed_entry = agent.spec.allowed_tools().iter().any(|entry| names_server(entry, &server.name));
            let mounted = grants.mounts_server(&server.name);
            let muted = self.applied(agent, &server.name).filter(|applied| applied.server.disabled);
            // kiro-cli starts no server marked `disabled: true`, granted or not.
            out["enabled"] = json!(mounted && muted.is_none());
            if let Some(muted) = muted.filter(|_| mounted) {
                out["warning"] = json!(format!(
                    "`tools` grants `{}` but it is `disabled: true` in {}, so kiro-cli will not start it; `cairn mcp enable {} --agent {}` removes the flag from the agent spec",
                    server.name,
                    self.sources[muted.source].path.display(),
                    server.name,
                    agent.name,
                ));
            }
            out["in_tools"] = json!(tools_entry);
            out["in_allowed_tools"] = json!(allowed_entry);
            out["in_agent_spec"] = json!(agent.spec.mcp_servers().iter().any(|own| own.name == server.name));
        }
        out
    }
}

impl Discovery {
    /// The definition of `name` kiro-cli uses for `agent`: the agent spec's
    /// own, else, when the spec sets `includeMcpJson`, the project's and
    /// then the user's `.kiro/settings/mcp.json` one. `None` when none
    /// applies (`<home>/mcp.json` and other agents' specs never do).
    pub(crate) fn applied(&self, agent: &SelectedAgent, name: &str) -> Option<&Definition> {
        let includes_mcp_json = agent.spec.include_mcp_json().unwrap_or(false);
        self.definitions.iter().find(|definition| {
            let source = &self.sources[definition.source];
            definition.server.name == name
                && match source.kind {
                    SourceKind::AgentSpec => source.path == agent.path,
                    SourceKind::KiroProject | SourceKind::KiroGlobal => includes_mcp_json,
                    SourceKind::CairnHome => false,
                }
        })
    }
}

/// `@name` or `@name/...`.
pub(crate) fn names_server(entry: &str, server: &str) -> bool {
    entry
        .trim()
        .strip_prefix('@')
        .is_some_and(|rest| rest == server || rest.split_once('/').is_some_and(|(name, _)| name == server))
}

/// The transport fields a listing shows: command and arguments redacted,
/// environment and header keys without their values.
pub(crate) fn transport_view(transport: &McpTransport) -> Value {
    match transport {
        McpTransport::Local { command, args, env } => json!({
            "transport": "stdio",
            "command": cairn_guard::redact_all(command),
            "args": args.iter().map(|arg| cairn_guard::redact_all(arg).into_owned()).collect::<Vec<_>>(),
            "env_keys": env.0.keys().collect::<Vec<_>>(),
        }),
        McpTransport::Remote { url, headers } => json!({
            "transport": "http",
            "url": redact_url(url),
            "header_keys": headers.0.keys().collect::<Vec<_>>(),
        }),
    }
}

/// A URL for display: credentials and exfiltration shapes redacted, and
/// any query string or userinfo dropped.
pub(crate) fn redact_url(url: &str) -> String {
    let without_query = url.split(['?', '#']).next().unwrap_or_default();
    let without_userinfo = match without_query.split_once("://") {
        Some((scheme, rest)) => match rest.split_once('/') {
            Some((authority, path)) => {
                let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
                format!("{scheme}://{host}/{path}")
            }
            None => format!("{scheme}://{}", rest.rsplit_once('@').map_or(rest, |(_, host)| host)),
        },
        None => without_query.to_owned(),
    };
    let redacted = cairn_guard::redact_all(&without_userinfo).into_owned();
    if redacted.len() < url.len() && without_query.len() < url.len() { format!("{redacted}?…") } else { redacted }
}

/// A string a server or a foreign config controls, as a report shows it:
/// every control character (and bidirectional override) escaped as
/// `\u{1b}`, so it can neither act on a terminal nor split a line, then
/// credentials redacted.
pub(crate) fn shown(text: &str) -> String {
    let is_hostile = |c: char| {
        c.is_control() || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if is_hostile(c) {
            escaped.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            escaped.push(c);
        }
    }
    cairn_guard::redact_all(&escaped).into_owned()
}

/// The agent named on the command line or in a request does not exist.
#[derive(Debug, thiserror::Error)]
#[error("no agent named {0:?}")]
pub(crate) struct UnknownAgent(pub(crate) String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_references_match_whole_names_only() {
        assert!(names_server("@time", "time"));
        assert!(names_server("@time/get_current_time", "time"));
        assert!(names_server(" @time/* ", "time"));
        assert!(!names_server("@timer", "time"));
        assert!(!names_server("time", "time"));
    }

    #[test]
    fn shown_strings_cannot_act_on_a_terminal_or_leak_a_token() {
        assert_eq!(shown("plain name"), "plain name");
        assert_eq!(
            shown("a\u{1b}]0;owned\u{7}\u{1b}[2J\nb\u{202e}"),
            "a\\u{1b}]0;owned\\u{7}\\u{1b}[2J\\u{a}b\\u{202e}"
        );
        let token = shown("x ghp_Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa");
        assert!(!token.contains("ghp_Zx9") && token.contains("REDACTED"), "{token}");
    }

    #[test]
    fn displayed_urls_lose_queries_and_userinfo() {
        assert_eq!(redact_url("https://mcp.example.com/sse"), "https://mcp.example.com/sse");
        assert_eq!(redact_url("https://user:pw@mcp.example.com/x?token=abc"), "https://mcp.example.com/x?…");
        assert_eq!(redact_url("http://127.0.0.1:3001/mcp#frag"), "http://127.0.0.1:3001/mcp?…");
    }
}
