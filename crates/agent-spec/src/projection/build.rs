//! Building a [`AgentProjection`]: one spec, one backend.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::checkout::narrow_checkout_spec;
use super::permissions::{
    Ceiling, Permissions, SPEC_PERMISSIONS_MIN_KIRO_CLI, Version, derive_permissions, spec_permissions_accepted,
};
use super::rulings::ruling;
use super::servers::{
    DeniedTool, WithheldServer, acp_element, claude_rule_name, config_entry, is_control_plane, kas_entry, native_entry,
    opencode_tool_name,
};
use super::vocabulary::{
    AgentBackend, Concern, Disposition, PerToolDeny, ProjectionKind, Ruling, WithholdClass, ZeroToolBan,
};
use crate::discovery::Scope;
use crate::hooks::SpecHookEvent;
use crate::mcp::{McpServer, McpTransport};
use crate::resources::Resource;
use crate::spec::{AgentSpec, SpecFormat, ToolsSettingsGroup};
use crate::tools::{ToolGrants, ToolList, builtin_family, canonical_builtin};

/// At most this many sub-agents travel in one KAS `customAgents` batch
/// beside the chat's own agent.
pub const MAX_KAS_SUBAGENTS: usize = 8;

/// What the session supplies that the spec does not.
#[derive(Debug, Clone, Default)]
pub struct ProjectionOptions {
    /// The permission mode the session asked for (claude writes it; no
    /// harness takes the spec's). `None` is the harness default.
    pub permission_mode: Option<String>,
    /// The models the session may switch to (claude writes them).
    pub available_models: Vec<String>,
    /// The governance ceiling over auto-approval grants.
    pub ceiling: Ceiling,
    /// The installed kiro-cli's version, when known (the caller probes or
    /// is told it). Unknown leaves a spec's `permissions` block unjudged.
    pub kiro_cli_version: Option<Version>,
    /// `Some` when an engine bundle reads the spec too: its version, when
    /// one is installed.
    pub engine_version: Option<Option<Version>>,
    /// The harness advertised HTTP MCP servers on `initialize` (codex
    /// drops unadvertised transports).
    pub http_advertised: bool,
    /// The user consented to this checkout's hooks.
    pub checkout_hooks_consent: bool,
}

/// The spec being projected, with what its surroundings supply.
#[derive(Debug, Clone, Copy)]
pub struct ProjectionInput<'a> {
    /// The agent name.
    pub name: &'a str,
    /// The spec.
    pub spec: &'a AgentSpec,
    /// Where it was found.
    pub scope: Scope,
    /// The prompt, resolved (KAS inlines it); `None` when unresolved.
    pub prompt: Option<&'a str>,
    /// The other agents by name (the KAS sub-agent batch is drawn from them).
    pub peers: &'a BTreeMap<String, AgentSpec>,
}

/// One concern: whether the spec sets it, and the backend's ruling.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConcernReport {
    /// The spec (or the session) sets it.
    pub set: bool,
    /// The ruling.
    #[serde(flatten)]
    pub ruling: Ruling,
}

/// What one spec becomes on one backend.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentProjection {
    /// The agent.
    pub agent: String,
    /// The backend.
    pub backend: AgentBackend,
    /// How the spec reaches it.
    pub kind: ProjectionKind,
    /// False when the backend cannot use this spec at all (a Markdown spec
    /// where only JSON is read, a file kiro-cli's loader drops).
    pub spec_read: bool,
    /// Every concern, in vocabulary order.
    pub concerns: Vec<ConcernReport>,
    /// The MCP servers the session is given, in the backend's shape.
    pub mcp_servers: Vec<Value>,
    /// Declared servers that are not given, and why.
    pub withheld_servers: Vec<WithheldServer>,
    /// The per-tool deny set.
    pub deny: Vec<DeniedTool>,
    /// How far a per-tool restriction survives here.
    pub per_tool_deny: PerToolDeny,
    /// The harness's own settings: claude's `settings.local.json`,
    /// opencode's permission config, goose's environment, strands' launch
    /// file and arguments, the config options for `session/set_config_option`,
    /// the `allowedTools` grants kiro-cli would need for `autoApprove`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settings: Option<Value>,
    /// `permissions` derived and merged (KAS).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permissions: Option<Permissions>,
    /// The KAS `_meta.kiro.customAgents` batch: this agent first, then the
    /// sub-agents it may spawn. Cairn sends it nowhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wire: Option<Value>,
    /// Session options the harness is started with (claude's zero-tool
    /// session).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_options: Option<Value>,
    /// `tools` is an explicit empty list (not a missing key).
    pub zero_tools: bool,
    /// How that ban holds here.
    pub zero_tool_ban: ZeroToolBan,
    /// What the session-start notice names.
    pub notices: Vec<String>,
}

/// `toolAliases`: alias → `@server/tool`.
fn aliases(spec: &AgentSpec, notices: &mut Vec<String>) -> BTreeMap<String, String> {
    match spec.fields().get("toolAliases") {
        None => BTreeMap::new(),
        Some(Value::Object(map)) => map
            .iter()
            .filter_map(|(original, alias)| alias.as_str().map(|alias| (alias.to_owned(), original.clone())))
            .collect(),
        Some(_) => {
            notices.push("toolAliases: not an object; no `@alias` reference resolves".to_owned());
            BTreeMap::new()
        }
    }
}

fn resolve_aliases(entries: &[String], aliases: &BTreeMap<String, String>) -> Vec<String> {
    entries
        .iter()
        .map(|entry| {
            entry.strip_prefix('@').and_then(|alias| aliases.get(alias)).cloned().unwrap_or_else(|| entry.clone())
        })
        .collect()
}

/// `managedToolPolicy` as read for Cairn's own servers.
#[derive(Default)]
struct ManagedPolicy {
    unreadable: bool,
    exclude: Vec<String>,
    exclude_servers: BTreeSet<String>,
}

/// Only the mirrored projections apply it (to Cairn's own `cairn`
/// server); elsewhere the concern's ruling says nothing reads it, and an
/// unreadable policy is not named twice.
fn managed_policy(spec: &AgentSpec, backend: AgentBackend, notices: &mut Vec<String>) -> ManagedPolicy {
    let Some(value) = spec.fields().get("managedToolPolicy") else { return ManagedPolicy::default() };
    if backend.kind() != ProjectionKind::Mirrored {
        return ManagedPolicy::default();
    }
    let unreadable = |notices: &mut Vec<String>, why: &str| {
        notices.push(format!(
            "managedToolPolicy: {why}; the projection withholds Cairn's own `cairn` server whole until it is fixed"
        ));
        ManagedPolicy { unreadable: true, ..ManagedPolicy::default() }
    };
    let Value::Object(policy) = value else { return unreadable(notices, "not an object") };
    let list = |key: &str| -> Option<Vec<String>> {
        match policy.get(key) {
            None => Some(Vec::new()),
            Some(Value::Array(items)) => items.iter().map(|item| item.as_str().map(str::to_owned)).collect(),
            Some(_) => None,
        }
    };
    let Some(exclude) = list("exclude") else { return unreadable(notices, "`exclude` is not a list of tool names") };
    let Some(servers) = list("excludeServers") else {
        return unreadable(notices, "`excludeServers` is not a list of server names");
    };
    if policy.get("honourToolRefs").is_some_and(|value| !value.is_boolean()) {
        return unreadable(notices, "`honourToolRefs` is not a bool");
    }
    ManagedPolicy { unreadable: false, exclude, exclude_servers: servers.into_iter().collect() }
}

fn is_set(concern: Concern, spec: &AgentSpec, servers: &[McpServer], options: &ProjectionOptions) -> bool {
    let present = |key: &str| match spec.fields().get(key) {
        None | Some(Value::Null) => false,
        Some(Value::Array(items)) => !items.is_empty() || key == "tools",
        Some(Value::Object(map)) => !map.is_empty(),
        Some(_) => true,
    };
    match concern {
        Concern::McpServers => !servers.is_empty(),
        Concern::DisabledTools => servers.iter().any(|server| !server.disabled_tools.is_empty()),
        Concern::AutoApprove => servers.iter().any(|server| !server.auto_approve.is_empty()),
        Concern::Model => spec.model_pin().is_some(),
        Concern::AvailableModels => !options.available_models.is_empty(),
        Concern::PermissionsDefaultMode => options.permission_mode.is_some(),
        Concern::Prompt => spec.prompt().is_some(),
        Concern::Resources => !spec.resources().is_empty(),
        Concern::Hooks => !spec.hooks().is_empty(),
        Concern::Tools
        | Concern::ExcludedTools
        | Concern::AllowedTools
        | Concern::Permissions
        | Concern::ToolsSettings
        | Concern::ToolAliases
        | Concern::ManagedToolPolicy => present(concern.key()),
    }
}

fn class_name(class: WithholdClass) -> String {
    serde_json::to_value(class).ok().and_then(|value| value.as_str().map(str::to_owned)).unwrap_or_default()
}

/// Projects one spec onto one backend.
pub fn project(input: &ProjectionInput<'_>, backend: AgentBackend, options: &ProjectionOptions) -> AgentProjection {
    let mut notices = Vec::new();
    let narrowed;
    let spec = if input.scope == Scope::Project {
        match narrow_checkout_spec(input.spec, options.checkout_hooks_consent) {
            Ok(result) => {
                if !result.dropped.is_empty() {
                    notices.push(format!(
                        "checkout spec: only name, description, prompt, tools, excludedTools and model are taken; dropped {}",
                        result.dropped.join(", ")
                    ));
                }
                if result.hooks_kept {
                    notices.push("checkout spec: its hooks run because this checkout's hooks are turned on".to_owned());
                }
                narrowed = result.spec;
                &narrowed
            }
            Err(error) => {
                notices.push(format!("checkout spec could not be narrowed ({error}); nothing of it is projected"));
                return unread(input, backend, options, notices);
            }
        }
    } else {
        input.spec
    };
    if input.spec.format() == SpecFormat::Markdown && !backend.reads_markdown() {
        notices.push(format!(
            "{backend} does not read the Markdown form of a spec (only kas does); nothing of `{}` reaches it",
            input.name
        ));
        return unread(input, backend, options, notices);
    }

    let aliases = aliases(spec, &mut notices);
    let tools = match spec.tools() {
        ToolList::List(entries) => ToolList::List(resolve_aliases(&entries, &aliases)),
        other => other,
    };
    let allowed = resolve_aliases(&spec.allowed_tools(), &aliases);
    let excluded = resolve_aliases(&spec.excluded_tools(), &aliases);
    let grants = ToolGrants::new(&tools, &excluded);
    let zero_tools = matches!(&tools, ToolList::List(entries) if entries.is_empty());
    let servers = spec.mcp_servers();
    let policy = managed_policy(spec, backend, &mut notices);

    let mut out = AgentProjection { spec_read: true, zero_tools, ..blank(input.name, backend) };

    match backend.kind() {
        ProjectionKind::Native => native(spec, &servers, &allowed, options, &mut out, &mut notices),
        ProjectionKind::External => {
            kas(input, spec, &tools, &excluded, &allowed, &servers, options, &mut out, &mut notices);
        }
        ProjectionKind::Mirrored => {
            mirrored(spec, &tools, &grants, &excluded, &servers, &policy, options, &mut out, &mut notices);
        }
        ProjectionKind::Unprojected => {
            if !servers.is_empty() {
                notices.push(format!(
                    "mcpServers: Cairn projects nothing of the spec for {backend} beyond the model; the spec's servers and per-tool deny set do not reach it"
                ));
            }
            out.settings = spec.model_pin().map(|model| json!({ "config_options": config_options(Some(model), None) }));
        }
    }
    out.concerns = Concern::ALL
        .into_iter()
        .map(|concern| ConcernReport {
            set: is_set(concern, spec, &servers, options),
            ruling: ruling(backend, concern),
        })
        .collect();
    concern_notices(spec, backend, &out.concerns, &mut notices);
    if zero_tools {
        match backend.zero_tool_ban() {
            ZeroToolBan::Enforced { .. } => {}
            ZeroToolBan::Partial { why } | ZeroToolBan::NotEnforced { why } => {
                notices.push(format!("tools: [] does not fully hold on {backend}: {why}"));
            }
        }
    }
    dedup_in_order(&mut notices);
    out.notices = notices;
    out
}

/// The values for `session/set_config_option` after `session/new`.
fn config_options(model: Option<&str>, mode: Option<&str>) -> Value {
    let mut options = Map::new();
    if let Some(model) = model {
        options.insert("model".into(), json!(model));
    }
    if let Some(mode) = mode {
        options.insert("mode".into(), json!(mode));
    }
    Value::Object(options)
}

fn dedup_in_order(items: &mut Vec<String>) {
    let mut seen = BTreeSet::new();
    items.retain(|item| seen.insert(item.clone()));
}

/// A projection of nothing: the backend cannot use the spec.
fn unread(
    input: &ProjectionInput<'_>,
    backend: AgentBackend,
    options: &ProjectionOptions,
    notices: Vec<String>,
) -> AgentProjection {
    let servers = input.spec.mcp_servers();
    AgentProjection {
        concerns: Concern::ALL
            .into_iter()
            .map(|concern| ConcernReport {
                set: is_set(concern, input.spec, &servers, options),
                ruling: ruling(backend, concern),
            })
            .collect(),
        withheld_servers: servers
            .iter()
            .map(|server| WithheldServer { server: server.name.clone(), reason: "the spec is not read".to_owned() })
            .collect(),
        notices,
        ..blank(input.name, backend)
    }
}

/// The projection of `agent` for `backend` before anything of its spec is
/// read: nothing projected, no notice, the backend's own fixed rules.
fn blank(agent: &str, backend: AgentBackend) -> AgentProjection {
    AgentProjection {
        agent: agent.to_owned(),
        backend,
        kind: backend.kind(),
        spec_read: false,
        concerns: Vec::new(),
        mcp_servers: Vec::new(),
        withheld_servers: Vec::new(),
        deny: Vec::new(),
        per_tool_deny: backend.per_tool_deny(),
        settings: None,
        permissions: None,
        wire: None,
        session_options: None,
        zero_tools: false,
        zero_tool_ban: backend.zero_tool_ban(),
        notices: Vec::new(),
    }
}

fn concern_notices(spec: &AgentSpec, backend: AgentBackend, concerns: &[ConcernReport], notices: &mut Vec<String>) {
    for report in concerns.iter().filter(|report| report.set) {
        let key = report.ruling.concern.key();
        match report.ruling.disposition {
            Disposition::Delivered | Disposition::Translated => {}
            Disposition::Withheld { class: WithholdClass::ContextInstead } => {}
            Disposition::Withheld { class } => {
                notices.push(format!("{key}: not sent to {backend} ({}: {})", class_name(class), report.ruling.detail));
            }
            Disposition::NoChannel { channel } => {
                notices.push(format!("{key}: no channel on {backend} (needs {channel}): {}", report.ruling.detail));
            }
        }
    }
    let hooks = spec.hooks();
    if !hooks.entries(SpecHookEvent::PreToolUse).is_empty()
        && matches!(backend, AgentBackend::Claude | AgentBackend::Codex)
    {
        notices
            .push(format!("hooks.preToolUse: does not run on {backend}; nothing refuses the calls those hooks would"));
    }
    if !backend.reads_spec_steering() {
        let files: Vec<String> = spec
            .resources()
            .into_iter()
            .filter_map(|resource| match resource {
                Resource::File { uri } => Some(uri),
                Resource::Skill { .. } | Resource::KnowledgeBase { .. } => None,
            })
            .collect();
        if !files.is_empty() {
            notices.push(format!("resources: steering {} is not loaded on {backend}", files.join(", ")));
        }
    }
    if backend != AgentBackend::KiroCli {
        let unapplied = untranslated_tools_settings(spec, backend);
        if !unapplied.is_empty() {
            notices.push(format!(
                "toolsSettings: {} carried by nothing projected for {backend}, so they do not apply there",
                unapplied.join(", ")
            ));
        }
    }
}

/// `toolsSettings` entries no projected value carries, named as the spec
/// spells them: on KAS every entry its permissions rules do not translate
/// (`deniedPaths`, `deniedCommands`, `web_fetch.blocked`,
/// `subagent.availableAgents` and `trustedAgents` are); on every other
/// backend but kiro-cli (which reads them itself) every entry.
fn untranslated_tools_settings(spec: &AgentSpec, backend: AgentBackend) -> Vec<String> {
    let Some(Value::Object(settings)) = spec.fields().get("toolsSettings") else { return Vec::new() };
    let group_of = |key: &str| ToolsSettingsGroup::ALL.into_iter().find(|group| group.spellings().contains(&key));
    let mut out = Vec::new();
    for (key, value) in settings {
        let Some(entries) = value.as_object() else {
            out.push(key.clone());
            continue;
        };
        for entry in entries.keys() {
            let translated = backend == AgentBackend::Kas
                && match (group_of(key), entry.as_str()) {
                    (Some(ToolsSettingsGroup::Subagent), "availableAgents" | "trustedAgents") => true,
                    (Some(ToolsSettingsGroup::Shell), "deniedCommands") => true,
                    (Some(ToolsSettingsGroup::FsRead | ToolsSettingsGroup::FsWrite), "deniedPaths") => true,
                    (None, "deniedPaths") => matches!(key.as_str(), "glob" | "grep"),
                    (None, "blocked") => key == "web_fetch",
                    _ => false,
                };
            if !translated {
                out.push(format!("{key}.{entry}"));
            }
        }
    }
    out
}

fn native(
    spec: &AgentSpec,
    servers: &[McpServer],
    allowed: &[String],
    options: &ProjectionOptions,
    out: &mut AgentProjection,
    notices: &mut Vec<String>,
) {
    let mut drops = Vec::new();
    for diagnostic in spec.diagnostics().into_iter().filter(|diagnostic| diagnostic.kiro_cli_rejects) {
        // Whether kiro-cli refuses a `permissions` key depends on its version: judged below.
        if diagnostic.path == "permissions" {
            continue;
        }
        drops.push(format!("{}: {}", diagnostic.path, diagnostic.message));
    }
    if spec.fields().contains_key("permissions") {
        match spec_permissions_accepted(options.kiro_cli_version, options.engine_version) {
            Ok(()) => {}
            Err(_) if options.kiro_cli_version.is_none() => notices.push(format!(
                "permissions: the verdict on this block is withheld because the kiro-cli version is unknown: kiro-cli from {SPEC_PERMISSIONS_MIN_KIRO_CLI} reads it, an older release drops the whole file and runs its default agent; state the installed version to settle it"
            )),
            Err(reason) => drops.push(format!("permissions: {reason}, which refuses the whole file")),
        }
    }
    if !drops.is_empty() {
        out.spec_read = false;
        for drop in drops {
            notices.push(format!("kiro-cli drops the whole file and runs its default agent: {drop}"));
        }
    }
    out.mcp_servers = servers
        .iter()
        .map(|server| {
            let mut entry = native_entry(server, notices);
            if let Some(object) = entry.as_object_mut() {
                object.insert("name".into(), json!(server.name));
            }
            entry
        })
        .collect();
    for server in servers {
        for tool in &server.disabled_tools {
            out.deny.push(DeniedTool { server: server.name.clone(), tool: tool.clone(), rule: None });
        }
    }
    // kiro-cli ignores autoApprove; the `@server/tool` grants an edit of the
    // spec's allowedTools would need are listed, under the ceiling.
    let mut view: Vec<String> = allowed.to_vec();
    for server in servers.iter().filter(|server| !server.disabled) {
        for verb in &server.auto_approve {
            if verb.contains(['*', '?']) {
                notices.push(format!(
                    "mcpServers.{}.autoApprove: `{verb}` is a pattern, not a verb; it grants nothing",
                    server.name
                ));
            } else if options.ceiling.permits_tool(&server.name, verb) {
                view.push(format!("@{}/{verb}", server.name));
            } else {
                notices.push(format!(
                    "mcpServers.{}.autoApprove: `{verb}` withheld by the governance ceiling",
                    server.name
                ));
            }
        }
    }
    dedup_in_order(&mut view);
    out.settings = Some(json!({ "allowedTools": view }));
}

/// The KAS tool list: each built-in with its KAS family beside it.
fn kas_tools(entries: &[String], exclusion: bool) -> Vec<String> {
    let mut out = Vec::new();
    for entry in entries {
        out.push(entry.clone());
        if let Some(spec_name) = canonical_builtin(entry) {
            out.extend(builtin_family(spec_name).iter().map(|id| (*id).to_owned()));
            if exclusion && spec_name == "fs_write" {
                out.push("delete_file".to_owned());
            }
        }
    }
    dedup_in_order(&mut out);
    out
}

#[allow(clippy::too_many_arguments)]
fn kas_agent(
    name: &str,
    spec: &AgentSpec,
    prompt: Option<&str>,
    tools: &ToolList,
    excluded: &[String],
    allowed: &[String],
    ceiling: &Ceiling,
    notices: &mut Vec<String>,
) -> (Value, Permissions) {
    let mut agent = Map::new();
    agent.insert("name".into(), json!(name));
    if let Some(description) = spec.description() {
        agent.insert("description".into(), json!(description));
    }
    let prompt = match (prompt, spec.prompt()) {
        (Some(text), _) => text.to_owned(),
        (None, Some(value)) if value.file_uri_path().is_none() => value.text.to_owned(),
        (None, Some(_)) => {
            notices.push(format!("{name}: the file:// prompt was not resolved; it is written as \"\""));
            String::new()
        }
        (None, None) => String::new(),
    };
    agent.insert("prompt".into(), json!(prompt));
    match tools {
        ToolList::List(entries) => {
            agent.insert("tools".into(), json!(kas_tools(entries, false)));
        }
        ToolList::Absent | ToolList::Malformed => {
            notices.push(format!(
                "{name}: tools is absent or not a list; it is written as `tools: []`, which KAS reads as no tool access"
            ));
            agent.insert("tools".into(), json!([]));
        }
    }
    if !excluded.is_empty() {
        agent.insert("excludedTools".into(), json!(kas_tools(excluded, true)));
    }
    if let Some(model) = spec.model_pin() {
        agent.insert("model".into(), json!(model));
    }
    if let Some(welcome) = spec.welcome_message() {
        agent.insert("welcomeMessage".into(), json!(welcome));
    }
    let mut servers = Map::new();
    for server in spec.mcp_servers() {
        if server.disabled {
            continue;
        }
        servers.insert(server.name.clone(), kas_entry(&server, notices));
    }
    agent.insert("mcpServers".into(), Value::Object(servers));
    if matches!(spec.include_mcp_json(), Ok(false)) && spec_states_mcp_json(spec) {
        agent.insert("includeMcpJson".into(), json!(false));
    }
    if let Some(Value::Bool(powers)) = spec.fields().get("includePowers") {
        agent.insert("includePowers".into(), json!(powers));
    }
    let permissions = derive_permissions(spec, allowed, ceiling);
    agent.insert("permissions".into(), permissions.to_value());
    (Value::Object(agent), permissions)
}

fn spec_states_mcp_json(spec: &AgentSpec) -> bool {
    spec.fields().contains_key("includeMcpJson") || spec.fields().contains_key("useLegacyMcpJson")
}

#[allow(clippy::too_many_arguments)]
fn kas(
    input: &ProjectionInput<'_>,
    spec: &AgentSpec,
    tools: &ToolList,
    excluded: &[String],
    allowed: &[String],
    servers: &[McpServer],
    options: &ProjectionOptions,
    out: &mut AgentProjection,
    notices: &mut Vec<String>,
) {
    let (agent, permissions) =
        kas_agent(input.name, spec, input.prompt, tools, excluded, allowed, &options.ceiling, notices);
    for grant in &permissions.withheld {
        notices.push(format!("{}: not auto-approved ({})", grant.grant, grant.reason));
    }
    notices.extend(permissions.notices.iter().cloned());
    out.mcp_servers = agent["mcpServers"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, entry)| {
            let mut entry = entry.clone();
            entry["name"] = json!(name);
            entry
        })
        .collect();
    for server in servers {
        if server.disabled {
            out.withheld_servers.push(WithheldServer { server: server.name.clone(), reason: "disabled: true".into() });
        }
        for tool in &server.disabled_tools {
            out.deny.push(DeniedTool { server: server.name.clone(), tool: tool.clone(), rule: None });
        }
    }
    let mut batch = vec![agent];
    batch.extend(subagent_batch(input, spec, tools, excluded, &options.ceiling, notices));
    out.permissions = Some(permissions);
    out.wire = Some(json!({ "_meta": { "kiro": { "customAgents": batch } } }));
}

/// The sub-agents KAS must register beside the chat's agent, when it
/// mounts the sub-agent tool: each name `availableAgents` allows, drawn
/// from the other agents, at most [`MAX_KAS_SUBAGENTS`]. One the batch
/// cannot carry is named in `notices`.
fn subagent_batch(
    input: &ProjectionInput<'_>,
    spec: &AgentSpec,
    tools: &ToolList,
    excluded: &[String],
    ceiling: &Ceiling,
    notices: &mut Vec<String>,
) -> Vec<Value> {
    let grants = ToolGrants::new(tools, excluded);
    if !grants.grants_builtin("use_subagent") {
        return Vec::new();
    }
    let Some(allowlist) = spec.subagent_allowlist() else { return Vec::new() };
    for pattern in allowlist.patterns() {
        if !pattern.contains(['*', '?']) && !input.peers.contains_key(pattern) && pattern != input.name {
            notices.push(format!("sub-agent `{pattern}`: no spec declares it, so KAS cannot start it"));
        }
    }
    let mut carried = Vec::new();
    let mut over = Vec::new();
    for (name, peer) in input.peers {
        if name == input.name || !allowlist.allows(name) {
            continue;
        }
        if let Some(reason) = uncarriable(peer) {
            notices.push(format!("sub-agent `{name}`: not carried to KAS ({reason})"));
            continue;
        }
        if carried.len() == MAX_KAS_SUBAGENTS {
            over.push(name.clone());
            continue;
        }
        let peer_tools = peer.tools();
        let peer_excluded = peer.excluded_tools();
        let mut ignored = Vec::new();
        let (agent, _) =
            kas_agent(name, peer, None, &peer_tools, &peer_excluded, &peer.allowed_tools(), ceiling, &mut ignored);
        carried.push(agent);
    }
    if !over.is_empty() {
        notices.push(format!(
            "sub-agents past the batch limit of {MAX_KAS_SUBAGENTS} are not registered with KAS: {}",
            over.join(", ")
        ));
    }
    carried
}

/// Why a sub-agent is left out of the batch: a restriction the
/// `customAgents` object has no form for, so the sub-agent would run
/// wider than its spec states.
fn uncarriable(peer: &AgentSpec) -> Option<&'static str> {
    let shell_deny_by_default = peer
        .tools_setting(ToolsSettingsGroup::Shell)
        .is_some_and(|setting| setting.value.get("denyByDefault") == Some(&Value::Bool(true)));
    if shell_deny_by_default {
        return Some(
            "its shell allowlist (denyByDefault) has no form in the `customAgents` object, so its shell would run unrestricted",
        );
    }
    let write_deny = peer.tools_setting(ToolsSettingsGroup::FsWrite).is_some_and(|setting| {
        let action = setting.value.get("fallbackAction").or_else(|| setting.value.get("fallback_action"));
        action.and_then(Value::as_str) == Some("deny")
    });
    if write_deny {
        return Some(
            "its write allowlist (fallbackAction: deny) has no form in the `customAgents` object, so its writes would run unrestricted",
        );
    }
    if !peer.hooks().entries(SpecHookEvent::PreToolUse).is_empty() {
        return Some("its preToolUse hooks have no slot in the `customAgents` object, so nothing would run them");
    }
    None
}

#[allow(clippy::too_many_arguments)]
fn mirrored(
    spec: &AgentSpec,
    tools: &ToolList,
    grants: &ToolGrants,
    excluded: &[String],
    servers: &[McpServer],
    policy: &ManagedPolicy,
    options: &ProjectionOptions,
    out: &mut AgentProjection,
    notices: &mut Vec<String>,
) {
    let backend = out.backend;
    let summary = grants.summary();
    for (server, tools) in &summary.server_tools {
        notices.push(format!(
            "tools: {} mount the whole server `{server}` on {backend} (the allowlist matches server names); restrict it with disabledTools",
            tools.iter().map(|tool| format!("@{server}/{tool}")).collect::<Vec<_>>().join(", ")
        ));
    }
    if matches!(tools, ToolList::Absent | ToolList::Malformed) && !servers.is_empty() {
        notices.push("tools: absent or not a list, which is an empty allowlist: no server is mounted".to_owned());
    }
    let excluded_tools: Vec<(String, String)> = excluded
        .iter()
        .filter_map(|entry| {
            let (server, tool) = entry.strip_prefix('@')?.split_once('/')?;
            (!tool.is_empty() && !tool.contains(['*', '?'])).then(|| (server.to_owned(), tool.to_owned()))
        })
        .collect();
    let mut mounted: Vec<&McpServer> = Vec::new();
    for server in servers {
        let withhold = |reason: &str| WithheldServer { server: server.name.clone(), reason: reason.to_owned() };
        let control = is_control_plane(&server.name);
        let narrowed = !server.disabled_tools.is_empty()
            || excluded_tools.iter().any(|(name, _)| *name == server.name)
            || (control && !policy.exclude.is_empty());
        let reason = if server.disabled {
            Some("disabled: true".to_owned())
        } else if out.zero_tools {
            Some("tools: [] mounts nothing".to_owned())
        } else if !grants.mounts_server(&server.name) {
            Some("not mounted by tools".to_owned())
        } else if control && (policy.unreadable || policy.exclude_servers.contains(&server.name)) {
            Some("withheld by managedToolPolicy".to_owned())
        } else if backend == AgentBackend::Codex
            && matches!(server.transport, McpTransport::Remote { .. })
            && !options.http_advertised
        {
            Some("codex did not advertise HTTP servers; unadvertised transports are dropped".to_owned())
        } else if narrowed && backend == AgentBackend::Codex {
            Some("a narrowed server is withheld whole on codex: nothing projected for it refuses one tool (and codex approves readOnlyHint tools without asking)".to_owned())
        } else if narrowed && matches!(backend, AgentBackend::Goose | AgentBackend::Strands) {
            Some(format!("a narrowed server is withheld whole on {backend}: nothing projected for it refuses one tool"))
        } else {
            None
        };
        match reason {
            Some(reason) => out.withheld_servers.push(withhold(&reason)),
            None => mounted.push(server),
        }
    }
    for server in &mounted {
        let mut denied: Vec<String> = server.disabled_tools.clone();
        denied.extend(excluded_tools.iter().filter(|(name, _)| *name == server.name).map(|(_, tool)| tool.clone()));
        if is_control_plane(&server.name) {
            denied.extend(policy.exclude.iter().cloned());
        }
        for tool in denied {
            let rule = match backend {
                AgentBackend::Claude => Some(claude_rule_name(&server.name, &tool)),
                AgentBackend::Opencode | AgentBackend::Mimocode => Some(opencode_tool_name(&server.name, &tool)),
                _ => None,
            };
            out.deny.push(DeniedTool { server: server.name.clone(), tool, rule });
        }
    }
    out.deny.sort();
    out.deny.dedup();
    let model = spec.model_pin();
    match backend {
        AgentBackend::Strands => {
            let config: Map<String, Value> =
                mounted.iter().map(|server| (server.name.clone(), config_entry(server, notices))).collect();
            let mut args = Vec::new();
            if let Some(model) = model {
                args.extend(["--model".to_owned(), model.to_owned()]);
            }
            out.settings = Some(json!({ "mcp_config": { "mcpServers": config }, "args": args }));
        }
        _ => out.mcp_servers = mounted.iter().map(|server| acp_element(server, notices)).collect(),
    }
    deny_settings(backend, model, options, out);
}

/// The settings a mirrored backend is given beside its servers: the
/// model, and how its permissions deny the tools the spec takes away.
fn deny_settings(backend: AgentBackend, model: Option<&str>, options: &ProjectionOptions, out: &mut AgentProjection) {
    match backend {
        AgentBackend::Claude => {
            let mut permissions = Map::new();
            permissions.insert(
                "defaultMode".into(),
                json!(options.permission_mode.clone().unwrap_or_else(|| "default".to_owned())),
            );
            let deny: Vec<&str> = out.deny.iter().filter_map(|denied| denied.rule.as_deref()).collect();
            if !deny.is_empty() {
                permissions.insert("deny".into(), json!(deny));
            }
            let mut settings = Map::new();
            if let Some(model) = model {
                settings.insert("model".into(), json!(model));
            }
            if !options.available_models.is_empty() {
                settings.insert("availableModels".into(), json!(options.available_models));
            }
            settings.insert("permissions".into(), Value::Object(permissions));
            out.settings = Some(Value::Object(settings));
            if out.zero_tools {
                out.session_options =
                    Some(json!({ "_meta": { "claudeCode": { "options": { "tools": [], "strictMcpConfig": true } } } }));
            }
        }
        AgentBackend::Codex => {
            out.settings = Some(json!({ "config_options": config_options(model, Some("read-only")) }));
        }
        AgentBackend::Opencode | AgentBackend::Mimocode => {
            let rules: Map<String, Value> =
                out.deny.iter().filter_map(|denied| denied.rule.clone()).map(|rule| (rule, json!("deny"))).collect();
            let config = json!({ "permission": rules });
            out.settings = Some(if backend == AgentBackend::Mimocode {
                json!({ "env": { "MIMOCODE_CONFIG_CONTENT": config.to_string() }, "config_options": config_options(model, Some("ask")) })
            } else {
                json!({ "permission_config": config, "config_options": config_options(model, Some("ask")) })
            });
        }
        AgentBackend::Goose => {
            out.settings =
                Some(json!({ "env": { "GOOSE_MODE": "approve" }, "config_options": config_options(model, None) }));
        }
        AgentBackend::Strands
        | AgentBackend::KiroCli
        | AgentBackend::Kas
        | AgentBackend::Pi
        | AgentBackend::Deepseek => {}
    }
}
