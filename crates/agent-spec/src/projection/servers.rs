//! MCP server entries as each harness takes them, with credentials kept
//! out of every projected value.

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::mcp::{McpServer, McpTransport, SecretMap};

/// Cairn's own MCP server (`cairn mcp serve`), the one server
/// `managedToolPolicy` speaks about.
pub const CONTROL_PLANE_SERVERS: &[&str] = &["cairn"];

/// A server the projection does not mount, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WithheldServer {
    /// The `mcpServers` key.
    pub server: String,
    /// Why.
    pub reason: String,
}

/// One tool the projection refuses.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct DeniedTool {
    /// The server.
    pub server: String,
    /// The tool.
    pub tool: String,
    /// The rule as the harness writes it, where it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
}

/// A name as Claude Code writes it in a tool id: every character outside
/// `[A-Za-z0-9_-]` becomes `_`.
pub fn sanitize_claude_name(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect()
}

/// `mcp__<server>__<tool>`, both names sanitised.
pub fn claude_rule_name(server: &str, tool: &str) -> String {
    format!("mcp__{}__{}", sanitize_claude_name(server), sanitize_claude_name(tool))
}

/// opencode's fused tool name: `<server>_<tool>`, each name sanitised the
/// same way.
pub(crate) fn opencode_tool_name(server: &str, tool: &str) -> String {
    format!("{}_{}", sanitize_claude_name(server), sanitize_claude_name(tool))
}

pub(crate) fn is_control_plane(server: &str) -> bool {
    CONTROL_PLANE_SERVERS.contains(&server)
}

/// An environment-variable name for a value that must not be written out.
fn reference_name(key: &str) -> String {
    key.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '_' }).collect()
}

fn is_reference(value: &str) -> bool {
    value
        .strip_prefix("${")
        .and_then(|rest| rest.strip_suffix('}'))
        .is_some_and(|name| !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
}

/// What a projection may carry of a key/value map: a `${NAME}` reference
/// as written; a literal only when its key is not credential-shaped and
/// the credential redactor leaves it alone. Anything else becomes a
/// `${KEY}` reference the user sets in the harness's environment, and is
/// named (key only) in `notices`.
pub(crate) fn carried_map(
    server: &str,
    what: &str,
    map: &SecretMap,
    notices: &mut Vec<String>,
) -> Vec<(String, String)> {
    let mut replaced = Vec::new();
    let carried = map
        .0
        .iter()
        .map(|(key, value)| {
            if is_reference(value) {
                return (key.clone(), value.clone());
            }
            let redacted = cairn_guard::redact_all(value);
            if cairn_guard::is_secret_key(key) || redacted.as_ref() != value {
                replaced.push(key.clone());
                return (key.clone(), format!("${{{}}}", reference_name(key)));
            }
            (key.clone(), value.clone())
        })
        .collect();
    if !replaced.is_empty() {
        notices.push(format!(
            "mcpServers.{server}: {what} {} carried as environment references (set them where the harness starts)",
            replaced.join(", ")
        ));
    }
    carried
}

/// The ACP `session/new` element: `{name, command, args, env: [{name,
/// value}]}` or `{type: "http", name, url, headers: [{name, value}]}`.
pub(crate) fn acp_element(server: &McpServer, notices: &mut Vec<String>) -> Value {
    let pairs = |pairs: Vec<(String, String)>| -> Value {
        Value::Array(pairs.into_iter().map(|(name, value)| json!({ "name": name, "value": value })).collect())
    };
    match &server.transport {
        McpTransport::Local { command, args, env } => json!({
            "name": server.name,
            "command": command,
            "args": args,
            "env": pairs(carried_map(&server.name, "env", env, notices)),
        }),
        McpTransport::Remote { url, headers } => json!({
            "type": "http",
            "name": server.name,
            "url": url,
            "headers": pairs(carried_map(&server.name, "headers", headers, notices)),
        }),
    }
}

/// The `.mcp.json` / `--mcp-config` entry: `{type: "stdio", command, args,
/// env}` or `{type: "http", url, headers}`.
pub(crate) fn config_entry(server: &McpServer, notices: &mut Vec<String>) -> Value {
    let object = |pairs: Vec<(String, String)>| -> Value {
        Value::Object(pairs.into_iter().map(|(key, value)| (key, Value::String(value))).collect())
    };
    match &server.transport {
        McpTransport::Local { command, args, env } => {
            let mut entry = json!({ "type": "stdio", "command": command, "args": args });
            if !env.0.is_empty() {
                entry["env"] = object(carried_map(&server.name, "env", env, notices));
            }
            entry
        }
        McpTransport::Remote { url, headers } => {
            let mut entry = json!({ "type": "http", "url": url });
            if !headers.0.is_empty() {
                entry["headers"] = object(carried_map(&server.name, "headers", headers, notices));
            }
            entry
        }
    }
}

/// The entry in KAS's `customAgents` object: the spec's entry with headers withheld and env
/// filtered per key (a `${NAME}` reference, or a non-credential `true` /
/// `false` literal).
pub(crate) fn kas_entry(server: &McpServer, notices: &mut Vec<String>) -> Value {
    let mut entry = Map::new();
    match &server.transport {
        McpTransport::Local { command, args, env } => {
            entry.insert("command".into(), json!(command));
            entry.insert("args".into(), json!(args));
            let mut kept = Map::new();
            let mut withheld = Vec::new();
            for (key, value) in &env.0 {
                let boolean = value.eq_ignore_ascii_case("true") || value.eq_ignore_ascii_case("false");
                if is_reference(value) || (boolean && !cairn_guard::is_secret_key(key)) {
                    kept.insert(key.clone(), json!(value));
                } else {
                    withheld.push(key.clone());
                }
            }
            if !kept.is_empty() {
                entry.insert("env".into(), Value::Object(kept));
            }
            if !withheld.is_empty() {
                notices.push(format!(
                    "mcpServers.{}: env {} left out of the `customAgents` object (set them where KAS starts the server)",
                    server.name,
                    withheld.join(", ")
                ));
            }
        }
        McpTransport::Remote { url, headers } => {
            entry.insert("url".into(), json!(url));
            if !headers.0.is_empty() {
                notices.push(format!("mcpServers.{}: headers left out of the `customAgents` object", server.name));
            }
        }
    }
    if let Some(declared) = &server.declared_type {
        entry.insert("type".into(), json!(declared));
    }
    if !server.disabled_tools.is_empty() {
        entry.insert("disabledTools".into(), json!(server.disabled_tools));
    }
    entry.insert("timeout".into(), json!(server.timeout_ms));
    Value::Object(entry)
}

/// The spec's own entry, for kiro-cli (which reads the file): credentials
/// shown as references, never as values.
pub(crate) fn native_entry(server: &McpServer, notices: &mut Vec<String>) -> Value {
    let mut entry = config_entry(server, notices);
    if let Some(object) = entry.as_object_mut() {
        if server.declared_type.is_none() {
            object.remove("type");
        }
        if server.disabled {
            object.insert("disabled".into(), Value::Bool(true));
        }
        if !server.disabled_tools.is_empty() {
            object.insert("disabledTools".into(), json!(server.disabled_tools));
        }
    }
    entry
}
