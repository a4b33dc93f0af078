//! The questions other crates ask about tools: what is mounted (`tools`
//! minus `excludedTools`), what is auto-approved (`allowedTools`), and
//! which sub-agents may be spawned.

use std::collections::{BTreeMap, BTreeSet};

use globset::{GlobBuilder, GlobMatcher};
use regex::Regex;
use serde::Serialize;
use serde_json::Value;

use crate::constants::{BUILTIN_FAMILIES, BUILTIN_TAGS, BUILTIN_TOOLS, EXCLUSION_EXTRAS};

/// Reads a list of strings; `None` when the value is not exactly that.
pub(crate) fn read_string_list(value: Option<&Value>) -> Option<Vec<String>> {
    value?.as_array()?.iter().map(|item| item.as_str().map(str::to_owned)).collect()
}

/// The canonical spec name of a built-in tool, given its name or an alias.
pub fn canonical_builtin(name: &str) -> Option<&'static str> {
    BUILTIN_TOOLS
        .iter()
        .find(|(spec_name, aliases)| *spec_name == name || aliases.contains(&name))
        .map(|(spec_name, _)| *spec_name)
}

/// Every built-in tool's spec name.
pub fn builtin_names() -> impl Iterator<Item = &'static str> {
    BUILTIN_TOOLS.iter().map(|(spec_name, _)| *spec_name)
}

/// The ids a built-in is mounted with beside its own name.
pub fn builtin_family(spec_name: &str) -> &'static [&'static str] {
    BUILTIN_FAMILIES.iter().find(|(name, _)| *name == spec_name).map_or(&[], |(_, family)| family)
}

fn exclusion_extras(spec_name: &str) -> &'static [&'static str] {
    EXCLUSION_EXTRAS.iter().find(|(name, _)| *name == spec_name).map_or(&[], |(_, extras)| extras)
}

/// The one built-in `@builtin` does not select.
const NOT_IN_BUILTIN_GROUP: &str = "switch_to_execution";

fn has_wildcard(text: &str) -> bool {
    text.contains(['*', '?'])
}

fn glob(pattern: &str) -> Option<GlobMatcher> {
    GlobBuilder::new(pattern).literal_separator(false).build().ok().map(|glob| glob.compile_matcher())
}

/// `tools` as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolList {
    /// The key is absent: no tools (kiro-cli infers no default).
    Absent,
    /// Present but not a list of strings: no tools.
    Malformed,
    /// The entries.
    List(Vec<String>),
}

impl ToolList {
    pub(crate) fn read(value: Option<&Value>) -> Self {
        match value {
            None => Self::Absent,
            Some(value) => read_string_list(Some(value)).map_or(Self::Malformed, Self::List),
        }
    }

    /// The entries (none when absent or malformed).
    pub fn entries(&self) -> &[String] {
        match self {
            Self::List(entries) => entries,
            Self::Absent | Self::Malformed => &[],
        }
    }
}

/// One side (grant or exclusion) of a tool selection.
#[derive(Debug, Clone, Default)]
struct Selection {
    everything: bool,
    all_builtins: bool,
    all_mcp: bool,
    builtins: BTreeSet<&'static str>,
    builtin_globs: Vec<GlobMatcher>,
    servers: BTreeSet<String>,
    server_tools: BTreeMap<String, Vec<(String, Option<GlobMatcher>)>>,
    other: BTreeSet<String>,
}

impl Selection {
    fn new(entries: &[String]) -> Self {
        let mut selection = Self::default();
        for entry in entries {
            selection.add(entry.trim());
        }
        selection
    }

    fn add(&mut self, entry: &str) {
        if entry == "*" {
            self.everything = true;
        } else if matches!(entry, "@builtin" | "@builtin/" | "@builtin/*") {
            self.all_builtins = true;
        } else if entry == "@mcp" {
            self.all_mcp = true;
        } else if let Some(name) = entry.strip_prefix("@builtin/") {
            match canonical_builtin(name) {
                Some(spec_name) => {
                    self.builtins.insert(spec_name);
                }
                None if has_wildcard(name) => self.builtin_globs.extend(glob(name)),
                None => {
                    self.other.insert(entry.to_owned());
                }
            }
        } else if let Some(rest) = entry.strip_prefix('@') {
            let (server, tool) = rest.split_once('/').unwrap_or((rest, ""));
            if tool.is_empty() || tool == "*" {
                self.servers.insert(server.to_owned());
            } else {
                let matcher = has_wildcard(tool).then(|| glob(tool)).flatten();
                self.server_tools.entry(server.to_owned()).or_default().push((tool.to_owned(), matcher));
            }
        } else if let Some(spec_name) = canonical_builtin(entry) {
            self.builtins.insert(spec_name);
        } else if let Some((_, members)) = BUILTIN_TAGS.iter().find(|(tag, _)| *tag == entry) {
            self.builtins.extend(members.iter().copied());
        } else {
            self.other.insert(entry.to_owned());
        }
    }

    fn builtin(&self, spec_name: &str) -> bool {
        self.everything
            || (self.all_builtins && spec_name != NOT_IN_BUILTIN_GROUP)
            || self.builtins.contains(spec_name)
            || self.builtin_globs.iter().any(|glob| glob.is_match(spec_name))
    }

    fn mcp(&self, server: &str, tool: &str) -> bool {
        self.everything
            || self.all_mcp
            || self.servers.contains(server)
            || self.server_tools.get(server).is_some_and(|tools| {
                tools.iter().any(|(written, matcher)| match matcher {
                    Some(matcher) => matcher.is_match(tool),
                    None => written == tool,
                })
            })
    }
}

/// What a spec mounts: `tools` with `excludedTools` subtracted.
///
/// `"*"` (the whole value or an entry) mounts everything; `@builtin` every
/// built-in; `@server` one MCP server whole; `@server/tool` one tool of it
/// (a `*`/`?` tool part is a glob); a built-in name or alias mounts that
/// built-in. An exclusion reaches everything governed under the name.
#[derive(Debug, Clone)]
pub struct ToolGrants {
    granted: Selection,
    excluded: Selection,
}

/// A serialisable summary of [`ToolGrants`], for display.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GrantSummary {
    /// `"*"` was granted and not wholly excluded.
    pub everything: bool,
    /// Built-ins mounted, by spec name, with the ids they are mounted
    /// with beside their own name.
    pub builtins: BTreeMap<String, Vec<String>>,
    /// MCP servers mounted whole.
    pub servers: Vec<String>,
    /// MCP servers mounted for some tools only, with those tool patterns.
    pub server_tools: BTreeMap<String, Vec<String>>,
    /// Entries that are neither built-ins nor MCP references, kept as written.
    pub other: Vec<String>,
    /// Ids excluded beyond the built-ins (e.g. `delete_file` with `fs_write`).
    pub excluded_ids: Vec<String>,
}

impl ToolGrants {
    /// Builds the grants from `tools` and `excludedTools`.
    pub fn new(tools: &ToolList, excluded: &[String]) -> Self {
        Self { granted: Selection::new(tools.entries()), excluded: Selection::new(excluded) }
    }

    /// True when the built-in (spec name or alias) is mounted.
    pub fn grants_builtin(&self, name: &str) -> bool {
        match canonical_builtin(name) {
            Some(spec_name) => self.granted.builtin(spec_name) && !self.excluded.builtin(spec_name),
            None => self.grants_id(name),
        }
    }

    /// True when an engine tool id is mounted: a built-in's family member,
    /// or an entry kept as written.
    pub fn grants_id(&self, id: &str) -> bool {
        if self.excluded.everything || self.excluded.other.contains(id) {
            return false;
        }
        if let Some(spec_name) = canonical_builtin(id) {
            return self.grants_builtin(spec_name);
        }
        let excluded_by_family = builtin_names()
            .filter(|spec_name| self.excluded.builtin(spec_name))
            .any(|spec_name| builtin_family(spec_name).contains(&id) || exclusion_extras(spec_name).contains(&id));
        if excluded_by_family {
            return false;
        }
        let granted_by_family = builtin_names()
            .filter(|spec_name| self.granted.builtin(spec_name))
            .any(|spec_name| builtin_family(spec_name).contains(&id));
        granted_by_family || self.granted.everything || self.granted.other.contains(id)
    }

    /// True when the MCP tool `tool` of `server` is mounted.
    pub fn grants_mcp(&self, server: &str, tool: &str) -> bool {
        self.granted.mcp(server, tool) && !self.excluded.mcp(server, tool)
    }

    /// True when the server is mounted at all (whole or some tool), and
    /// not excluded whole.
    pub fn mounts_server(&self, server: &str) -> bool {
        let granted = self.granted.everything
            || self.granted.all_mcp
            || self.granted.servers.contains(server)
            || self.granted.server_tools.contains_key(server);
        let excluded = self.excluded.everything || self.excluded.all_mcp || self.excluded.servers.contains(server);
        granted && !excluded
    }

    /// True when nothing at all is mounted.
    pub fn is_empty(&self) -> bool {
        let summary = self.summary();
        !summary.everything
            && summary.builtins.is_empty()
            && summary.servers.is_empty()
            && summary.server_tools.is_empty()
            && summary.other.is_empty()
            && !(self.granted.all_mcp && !self.excluded.all_mcp && !self.excluded.everything)
    }

    /// The grants spelled out: built-ins with their families, servers.
    pub fn summary(&self) -> GrantSummary {
        let builtins = builtin_names()
            .filter(|spec_name| self.grants_builtin(spec_name))
            .map(|spec_name| {
                let family = builtin_family(spec_name).iter().map(|id| (*id).to_owned()).collect();
                (spec_name.to_owned(), family)
            })
            .collect();
        let servers = self.granted.servers.iter().filter(|server| self.mounts_server(server)).cloned().collect();
        let server_tools = self
            .granted
            .server_tools
            .iter()
            .filter(|(server, _)| self.mounts_server(server) && !self.granted.servers.contains(*server))
            .map(|(server, tools)| {
                let kept = tools
                    .iter()
                    .filter(|(written, matcher)| matcher.is_some() || self.grants_mcp(server, written))
                    .map(|(written, _)| written.clone())
                    .collect::<Vec<_>>();
                (server.clone(), kept)
            })
            .filter(|(_, tools)| !tools.is_empty())
            .collect();
        let other = self.granted.other.iter().filter(|id| self.grants_id(id)).cloned().collect();
        let excluded_ids = builtin_names()
            .filter(|spec_name| self.excluded.builtin(spec_name))
            .flat_map(|spec_name| exclusion_extras(spec_name).iter().map(|id| (*id).to_owned()))
            .collect();
        GrantSummary {
            everything: self.granted.everything && !self.excluded.everything,
            builtins,
            servers,
            server_tools,
            other,
            excluded_ids,
        }
    }
}

/// What one `allowedTools` entry auto-approves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AutoApproveKind {
    /// Every built-in (`@builtin`, `@builtin/`, `@builtin/*`).
    AllBuiltins,
    /// One built-in, by spec name.
    Builtin {
        /// Spec name.
        name: String,
    },
    /// A glob over built-in names (a pattern without `@`, or `@builtin/<glob>`).
    BuiltinGlob {
        /// The glob.
        pattern: String,
    },
    /// A whole MCP server (`@srv`, `@srv/`, `@srv/*`).
    Server {
        /// Server name.
        server: String,
    },
    /// One MCP tool (`@srv/tool`).
    ServerTool {
        /// Server name.
        server: String,
        /// Tool name.
        tool: String,
    },
    /// A glob tried against `@server` and `@server/tool`.
    McpGlob {
        /// The glob as written.
        pattern: String,
    },
    /// A name that is no built-in and has no `@`: approves nothing kiro-cli
    /// knows, kept as written.
    Unknown,
}

/// One `allowedTools` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AutoApproveEntry {
    /// As written.
    pub written: String,
    /// What it approves.
    pub kind: AutoApproveKind,
    /// True when the entry contains `*` or `?`: it approves tools by
    /// pattern, including ones added later.
    pub wildcard: bool,
}

/// What `allowedTools` auto-approves, matched as kiro-cli's classic
/// permission checker does: a built-in is matched only by entries without
/// `@` and by `@builtin/...`; an MCP tool only by `@` entries, tried
/// against `@server` and then `@server/tool`. Globs are case-sensitive and
/// `*` crosses `/`.
#[derive(Debug, Clone, Default)]
pub struct AutoApprove {
    entries: Vec<(AutoApproveEntry, Option<GlobMatcher>)>,
}

impl AutoApprove {
    /// Reads the entries.
    pub fn new(allowed_tools: &[String]) -> Self {
        let entries = allowed_tools
            .iter()
            .map(|written| {
                let entry = written.trim();
                let wildcard = has_wildcard(entry);
                let (kind, matcher) = classify_allowed(entry);
                (AutoApproveEntry { written: written.clone(), kind, wildcard }, matcher)
            })
            .collect();
        Self { entries }
    }

    /// The entries with what each approves.
    pub fn entries(&self) -> impl Iterator<Item = &AutoApproveEntry> {
        self.entries.iter().map(|(entry, _)| entry)
    }

    /// Entries that approve by pattern.
    pub fn wildcard_entries(&self) -> impl Iterator<Item = &AutoApproveEntry> {
        self.entries().filter(|entry| entry.wildcard)
    }

    /// True when calls of the built-in (name or alias) run without asking.
    pub fn approves_builtin(&self, name: &str) -> bool {
        let spec_name = canonical_builtin(name).unwrap_or(name);
        self.entries.iter().any(|(entry, matcher)| match &entry.kind {
            AutoApproveKind::AllBuiltins => true,
            AutoApproveKind::Builtin { name } => name == spec_name,
            AutoApproveKind::BuiltinGlob { .. } => matcher.as_ref().is_some_and(|m| m.is_match(spec_name)),
            _ => false,
        })
    }

    /// True when calls of the MCP tool run without asking.
    pub fn approves_mcp(&self, server: &str, tool: &str) -> bool {
        let whole = format!("@{server}");
        let full = format!("@{server}/{tool}");
        self.entries.iter().any(|(entry, matcher)| match &entry.kind {
            AutoApproveKind::Server { server: approved } => approved == server,
            AutoApproveKind::ServerTool { server: approved, tool: approved_tool } => {
                approved == server && approved_tool == tool
            }
            AutoApproveKind::McpGlob { .. } => {
                matcher.as_ref().is_some_and(|m| m.is_match(&whole) || m.is_match(&full))
            }
            _ => false,
        })
    }

    /// True when some entry approves the whole server.
    pub fn approves_whole_server(&self, server: &str) -> bool {
        self.entries
            .iter()
            .any(|(entry, _)| matches!(&entry.kind, AutoApproveKind::Server { server: s } if s == server))
    }
}

fn classify_allowed(entry: &str) -> (AutoApproveKind, Option<GlobMatcher>) {
    if matches!(entry, "@builtin" | "@builtin/" | "@builtin/*") {
        return (AutoApproveKind::AllBuiltins, None);
    }
    if let Some(name) = entry.strip_prefix("@builtin/") {
        return builtin_kind(name, entry);
    }
    if let Some(rest) = entry.strip_prefix('@') {
        let (server, tool) = rest.split_once('/').unwrap_or((rest, ""));
        if !has_wildcard(server) && (tool.is_empty() || tool == "*") {
            return (AutoApproveKind::Server { server: server.to_owned() }, None);
        }
        if !has_wildcard(entry) {
            return (AutoApproveKind::ServerTool { server: server.to_owned(), tool: tool.to_owned() }, None);
        }
        return (AutoApproveKind::McpGlob { pattern: entry.to_owned() }, glob(entry));
    }
    builtin_kind(entry, entry)
}

fn builtin_kind(name: &str, written: &str) -> (AutoApproveKind, Option<GlobMatcher>) {
    if has_wildcard(name) {
        return (AutoApproveKind::BuiltinGlob { pattern: name.to_owned() }, glob(name));
    }
    match canonical_builtin(name) {
        Some(spec_name) => (AutoApproveKind::Builtin { name: spec_name.to_owned() }, None),
        None => {
            tracing::debug!(entry = written, "allowedTools entry names no built-in");
            (AutoApproveKind::Unknown, None)
        }
    }
}

/// `availableAgents`: which agents this one may spawn. Entries are exact
/// names or globs where `*` matches any run of characters, anchored.
#[derive(Debug, Clone)]
pub struct SubagentAllowlist {
    patterns: Vec<String>,
    matchers: Vec<Regex>,
}

impl SubagentAllowlist {
    pub(crate) fn new(patterns: Vec<String>) -> Self {
        let matchers = patterns
            .iter()
            .filter(|pattern| pattern.contains('*'))
            .filter_map(|pattern| {
                let body = pattern.split('*').map(regex::escape).collect::<Vec<_>>().join(".*");
                Regex::new(&format!("^(?s:{body})$")).ok()
            })
            .collect();
        Self { patterns, matchers }
    }

    /// The entries as written.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// True when `agent` may be spawned. An empty list allows nobody.
    pub fn allows(&self, agent: &str) -> bool {
        self.patterns.iter().any(|pattern| pattern == agent) || self.matchers.iter().any(|regex| regex.is_match(agent))
    }
}
