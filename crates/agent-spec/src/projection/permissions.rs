//! `permissions` derived from `allowedTools`, `autoApprove` and
//! `toolsSettings`, under the governance ceiling, and merged with a
//! spec-written block.

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::spec::{AgentSpec, ToolsSettingsGroup};
use crate::tools::{AutoApprove, AutoApproveKind};

/// The first kiro-cli release that accepts a `permissions` key (older ones
/// refuse the whole file).
pub const SPEC_PERMISSIONS_MIN_KIRO_CLI: Version = Version(2, 23, 0);
/// The first engine bundle that accepts a `permissions` key.
pub const SPEC_PERMISSIONS_MIN_ENGINE: Version = Version(0, 66, 33);

/// Built-ins never auto-approved through `allowedTools`: a grant there
/// would skip the sensitive-path and denied-command checks.
pub const FILE_TOOL_BUILTINS: &[&str] = &["grep", "glob", "code", "fs_read", "fs_write", "execute_bash"];

/// Capabilities a relayed `allow` may never carry: an unscoped grant of the
/// shell or the file system.
pub const NEVER_RELAYED_ALLOW: &[&str] = &["shell", "fs_read", "fs_write", "filesystem", "all", "builtin"];

/// A `major.minor.patch` version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Version(pub u32, pub u32, pub u32);

impl Version {
    /// Parses `2.23.0`, `v2.23.0` or `kiro-cli 2.23.0-beta` (the first
    /// dotted number); `None` when there is none.
    pub fn parse(text: &str) -> Option<Self> {
        let start = text.find(|c: char| c.is_ascii_digit())?;
        let digits: String = text[start..].chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
        let mut parts = digits.split('.').filter(|part| !part.is_empty()).map(str::parse::<u32>);
        let major = parts.next()?.ok()?;
        let minor = parts.next().and_then(Result::ok).unwrap_or(0);
        let patch = parts.next().and_then(Result::ok).unwrap_or(0);
        Some(Self(major, minor, patch))
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// Whether the programs that read the spec file accept a `permissions`
/// key: kiro-cli from [`SPEC_PERMISSIONS_MIN_KIRO_CLI`] and, when the
/// engine bundle reads the file too, the engine from
/// [`SPEC_PERMISSIONS_MIN_ENGINE`]. An unknown version withholds.
pub fn spec_permissions_accepted(kiro_cli: Option<Version>, engine: Option<Option<Version>>) -> Result<(), String> {
    match kiro_cli {
        None => return Err("the kiro-cli version is unknown".to_owned()),
        Some(version) if version < SPEC_PERMISSIONS_MIN_KIRO_CLI => {
            return Err(format!("kiro-cli {version} predates {SPEC_PERMISSIONS_MIN_KIRO_CLI}"));
        }
        Some(_) => {}
    }
    match engine {
        None => Ok(()),
        Some(None) => Err("no engine bundle is installed".to_owned()),
        Some(Some(version)) if version < SPEC_PERMISSIONS_MIN_ENGINE => {
            Err(format!("the engine bundle {version} predates {SPEC_PERMISSIONS_MIN_ENGINE}"))
        }
        Some(Some(_)) => Ok(()),
    }
}

/// The governance ceiling: the grants an operator permits. `None` is a
/// host with no ceiling (every grant that passes the fixed rules stays).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ceiling(pub Option<BTreeSet<String>>);

impl Ceiling {
    /// A ceiling permitting exactly these grant names (`web_fetch`,
    /// `@server`, `@server/tool`).
    pub fn permitting<I: IntoIterator<Item = S>, S: Into<String>>(names: I) -> Self {
        Self(Some(names.into_iter().map(Into::into).collect()))
    }

    /// Whether a built-in grant is permitted.
    pub fn permits_builtin(&self, name: &str) -> bool {
        self.0.as_ref().is_none_or(|names| names.contains(name))
    }

    /// Whether a grant of `server` whole is permitted.
    pub fn permits_server(&self, server: &str) -> bool {
        self.0.as_ref().is_none_or(|names| names.contains(&format!("@{server}")))
    }

    /// Whether a grant of one tool is permitted (the whole server's grant
    /// covers it).
    pub fn permits_tool(&self, server: &str, tool: &str) -> bool {
        self.permits_server(server) || self.0.as_ref().is_none_or(|names| names.contains(&format!("@{server}/{tool}")))
    }
}

/// Allow, ask or deny.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Effect {
    /// Runs without a prompt.
    Allow,
    /// Prompts.
    Ask,
    /// Refused.
    Deny,
}

/// One `permissions.rules` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PermissionRule {
    /// `mcp`, `web_fetch`, `subagent`, `fs_read`, ...
    pub capability: String,
    /// Patterns the rule covers; empty means every resource.
    #[serde(rename = "match", skip_serializing_if = "Vec::is_empty")]
    pub matches: Vec<String>,
    /// Patterns excepted.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
    /// What happens.
    pub effect: Effect,
}

impl PermissionRule {
    fn new(capability: &str, matches: Vec<String>, effect: Effect) -> Self {
        Self { capability: capability.to_owned(), matches, exclude: Vec::new(), effect }
    }
}

/// A grant that did not become a rule, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WithheldGrant {
    /// Where it came from and how it was written (`allowedTools: fs_read`).
    pub grant: String,
    /// Why it was withheld.
    pub reason: String,
}

/// The derived and merged `permissions` value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Permissions {
    /// The rules, deny first, then ask, then allow.
    pub rules: Vec<PermissionRule>,
    /// Grants the derivation did not carry.
    pub withheld: Vec<WithheldGrant>,
    /// What the user should know about the merge.
    pub notices: Vec<String>,
}

impl Permissions {
    /// The `{"rules": [...]}` value.
    pub fn to_value(&self) -> Value {
        json!({ "rules": self.rules })
    }
}

fn builtin_capability(name: &str) -> &str {
    match name {
        "web_fetch" => "web_fetch",
        "web_search" => "web_search",
        "use_subagent" => "subagent",
        _ => "builtin",
    }
}

/// Derives `permissions` from `allowed_tools` (aliases already resolved)
/// and each enabled server's `autoApprove`, under `ceiling`, then merges
/// the spec's own `permissions` block and the rules `toolsSettings`
/// translates into.
pub fn derive_permissions(spec: &AgentSpec, allowed_tools: &[String], ceiling: &Ceiling) -> Permissions {
    let mut out = Permissions::default();
    let mut mcp_allow: BTreeSet<String> = BTreeSet::new();
    let mut builtin_allow: Vec<(String, String)> = Vec::new();
    let withhold = |out: &mut Permissions, grant: String, reason: &str| {
        out.withheld.push(WithheldGrant { grant, reason: reason.to_owned() });
    };
    for entry in AutoApprove::new(allowed_tools).entries() {
        let grant = format!("allowedTools: {}", entry.written);
        let whole_server = matches!(entry.kind, AutoApproveKind::Server { .. });
        if entry.wildcard && !whole_server {
            withhold(
                &mut out,
                grant,
                "a pattern cannot be judged by the ceiling, which judges exact names; approve the tools by name",
            );
            continue;
        }
        match &entry.kind {
            AutoApproveKind::AllBuiltins => {
                withhold(&mut out, grant, "`@builtin` grants the file tools, which are withheld")
            }
            AutoApproveKind::Builtin { name } if FILE_TOOL_BUILTINS.contains(&name.as_str()) => withhold(
                &mut out,
                grant,
                "file-tool built-ins are withheld: a grant would skip the sensitive-path and denied-command checks",
            ),
            AutoApproveKind::Builtin { name } if !ceiling.permits_builtin(name) => {
                withhold(&mut out, grant, "the governance ceiling does not permit it");
            }
            AutoApproveKind::Builtin { name } => {
                builtin_allow.push((builtin_capability(name).to_owned(), name.clone()))
            }
            AutoApproveKind::Server { server } if ceiling.permits_server(server) => {
                mcp_allow.insert(format!("{server}/*"));
            }
            AutoApproveKind::ServerTool { server, tool } if ceiling.permits_tool(server, tool) => {
                mcp_allow.insert(format!("{server}/{tool}"));
            }
            AutoApproveKind::Server { .. } | AutoApproveKind::ServerTool { .. } => {
                withhold(&mut out, grant, "the governance ceiling does not permit it");
            }
            AutoApproveKind::Unknown => withhold(&mut out, grant, "names no built-in and no MCP tool"),
            AutoApproveKind::BuiltinGlob { .. } | AutoApproveKind::McpGlob { .. } => {
                withhold(&mut out, grant, "a pattern cannot be judged by the ceiling");
            }
        }
    }
    for server in spec.mcp_servers().iter().filter(|server| !server.disabled) {
        for verb in &server.auto_approve {
            let grant = format!("mcpServers.{}.autoApprove: {verb}", server.name);
            if verb.contains(['*', '?']) {
                withhold(&mut out, grant, "a pattern cannot be judged by the ceiling; list the verbs by name");
            } else if ceiling.permits_tool(&server.name, verb) {
                mcp_allow.insert(format!("{}/{verb}", server.name));
            } else {
                withhold(&mut out, grant, "the governance ceiling does not permit it");
            }
        }
    }
    let mut allow = Vec::new();
    for (capability, name) in builtin_allow {
        if capability == "builtin" {
            allow.push(PermissionRule::new(&capability, vec![name], Effect::Allow));
        } else {
            allow.push(PermissionRule::new(&capability, Vec::new(), Effect::Allow));
        }
    }
    if !mcp_allow.is_empty() {
        allow.push(PermissionRule::new("mcp", mcp_allow.into_iter().collect(), Effect::Allow));
    }
    let mut rules = tools_settings_rules(spec, ceiling, &mut out.notices);
    let has_allowed_tools = spec.fields().contains_key("allowedTools");
    rules.extend(merge_user_block(spec.fields().get("permissions"), ceiling, has_allowed_tools, &mut out.notices));
    rules.extend(allow);
    rules.sort_by_key(|rule| std::cmp::Reverse(rule.effect));
    rules.dedup();
    out.rules = rules;
    out
}

/// An agent id with `*` as its only wildcard travels as a name pattern.
fn is_agent_pattern(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '*' | '/' | '.'))
}

fn string_list(value: Option<&Value>) -> Vec<String> {
    value.and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).map(str::to_owned).collect()
}

/// `toolsSettings` as rules: `deniedPaths` (read, glob, grep → `fs_read`;
/// write → `fs_write`), `deniedCommands` and `web_fetch.blocked` deny;
/// `subagent.availableAgents` a subagent deny over `*` with the names
/// excepted; `subagent.trustedAgents` a name-scoped subagent allow the
/// ceiling must permit.
fn tools_settings_rules(spec: &AgentSpec, ceiling: &Ceiling, notices: &mut Vec<String>) -> Vec<PermissionRule> {
    let mut rules = Vec::new();
    let mut read_denied = Vec::new();
    if let Some(setting) = spec.tools_setting(ToolsSettingsGroup::FsRead) {
        read_denied.extend(string_list(setting.value.get("deniedPaths")));
    }
    for key in ["glob", "grep"] {
        if let Some(value) = spec.tools_setting_raw(key) {
            read_denied.extend(string_list(value.get("deniedPaths")));
        }
    }
    if !read_denied.is_empty() {
        rules.push(PermissionRule::new("fs_read", read_denied, Effect::Deny));
    }
    if let Some(setting) = spec.tools_setting(ToolsSettingsGroup::FsWrite) {
        let denied = string_list(setting.value.get("deniedPaths"));
        if !denied.is_empty() {
            rules.push(PermissionRule::new("fs_write", denied, Effect::Deny));
        }
    }
    if let Some(setting) = spec.tools_setting(ToolsSettingsGroup::Shell) {
        let denied = string_list(setting.value.get("deniedCommands"));
        if !denied.is_empty() {
            rules.push(PermissionRule::new("shell", denied, Effect::Deny));
        }
    }
    if let Some(value) = spec.tools_setting_raw("web_fetch") {
        let blocked = string_list(value.get("blocked"));
        if !blocked.is_empty() {
            rules.push(PermissionRule::new("web_fetch", blocked, Effect::Deny));
        }
    }
    if let Some(setting) = spec.tools_setting(ToolsSettingsGroup::Subagent) {
        if let Some(available) = setting.value.get("availableAgents") {
            let names = string_list(Some(available));
            let (kept, dropped): (Vec<_>, Vec<_>) = names.into_iter().partition(|name| is_agent_pattern(name));
            for name in dropped {
                notices.push(format!(
                    "toolsSettings.{}.availableAgents: `{name}` is not an agent id with `*` as its only wildcard; it excepts nothing",
                    setting.key
                ));
            }
            let mut rule = PermissionRule::new("subagent", vec!["*".to_owned()], Effect::Deny);
            rule.exclude = kept;
            rules.push(rule);
        }
        let trusted: Vec<String> =
            string_list(setting.value.get("trustedAgents")).into_iter().filter(|name| is_agent_pattern(name)).collect();
        if !trusted.is_empty() {
            if ceiling.permits_builtin("use_subagent") {
                rules.push(PermissionRule::new("subagent", trusted, Effect::Allow));
            } else {
                notices.push(format!(
                    "toolsSettings.{}.trustedAgents: the governance ceiling does not permit sub-agent grants",
                    setting.key
                ));
            }
        }
    }
    rules
}

/// A spec-written `{"rules": [...]}` block, relayed as the merge allows:
/// refused whole when it does not fit the shape; deny and ask relayed;
/// allow relayed only where the ceiling permits it, never for the shell
/// or file-system families, and not at all for what the `allowedTools`
/// derivation governs when the spec has that list.
fn merge_user_block(
    block: Option<&Value>,
    ceiling: &Ceiling,
    has_allowed_tools: bool,
    notices: &mut Vec<String>,
) -> Vec<PermissionRule> {
    let Some(block) = block else { return Vec::new() };
    let parsed = parse_block(block);
    let Some(parsed) = parsed else {
        notices.push(
            "permissions: the block does not fit `{\"rules\": [{capability, match?, exclude?, effect}]}`; none of it is relayed"
                .to_owned(),
        );
        return Vec::new();
    };
    let mut kept = Vec::new();
    for (index, rule) in parsed.into_iter().enumerate() {
        if rule.effect != Effect::Allow {
            kept.push(rule);
            continue;
        }
        let reason = if NEVER_RELAYED_ALLOW.contains(&rule.capability.as_str()) {
            Some("an allow of the shell or the file system is never relayed")
        } else if has_allowed_tools
            && matches!(rule.capability.as_str(), "mcp" | "web_fetch" | "web_search" | "subagent")
        {
            Some("allowedTools governs this capability and is re-derived every projection")
        } else if !allow_permitted(&rule, ceiling) {
            Some("the governance ceiling does not permit it")
        } else {
            None
        };
        match reason {
            Some(reason) => notices.push(format!("permissions.rules[{index}]: not relayed ({reason})")),
            None => kept.push(rule),
        }
    }
    kept
}

fn allow_permitted(rule: &PermissionRule, ceiling: &Ceiling) -> bool {
    if rule.capability == "mcp" {
        rule.matches.iter().all(|pattern| mcp_pattern_permitted(pattern, ceiling))
    } else {
        ceiling.permits_builtin(&rule.capability)
    }
}

fn mcp_pattern_permitted(pattern: &str, ceiling: &Ceiling) -> bool {
    let Some((server, tool)) = pattern.split_once('/') else { return ceiling.permits_server(pattern) };
    if server.contains('*') {
        return ceiling.0.is_none();
    }
    if tool == "*" { ceiling.permits_server(server) } else { ceiling.permits_tool(server, tool) }
}

fn parse_block(block: &Value) -> Option<Vec<PermissionRule>> {
    let object = block.as_object()?;
    if object.keys().any(|key| key != "rules") {
        return None;
    }
    let rules = object.get("rules")?.as_array()?;
    rules.iter().map(|rule| parse_rule(rule.as_object()?)).collect()
}

fn parse_rule(rule: &Map<String, Value>) -> Option<PermissionRule> {
    if rule.keys().any(|key| !matches!(key.as_str(), "capability" | "match" | "exclude" | "effect")) {
        return None;
    }
    let capability = rule.get("capability")?.as_str()?.to_owned();
    let effect = match rule.get("effect")?.as_str()? {
        "allow" => Effect::Allow,
        "ask" => Effect::Ask,
        "deny" => Effect::Deny,
        _ => return None,
    };
    let patterns = |key: &str| -> Option<Vec<String>> {
        match rule.get(key) {
            None => Some(Vec::new()),
            Some(Value::String(one)) => Some(vec![one.clone()]),
            Some(Value::Array(items)) => items.iter().map(|item| item.as_str().map(str::to_owned)).collect(),
            Some(_) => None,
        }
    };
    Some(PermissionRule { capability, matches: patterns("match")?, exclude: patterns("exclude")?, effect })
}
