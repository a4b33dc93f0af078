//! `mcpServers`: local (command) and remote (url) server entries.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Map, Value};

use crate::constants::{MCP_DEFAULT_TIMEOUT_MS, MCP_ENTRY_KEYS};
use crate::diagnostic::{Findings, SpecDiagnostic, type_name};
use crate::tools::read_string_list;

/// A string map whose values may be credentials: `Debug` shows the keys only.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SecretMap(pub BTreeMap<String, String>);

impl fmt::Debug for SecretMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.0.keys().map(|key| (key, "<redacted>"))).finish()
    }
}

/// How a server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpTransport {
    /// A child process speaking MCP over stdio.
    Local {
        /// Program to start.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Extra environment (values never logged).
        env: SecretMap,
    },
    /// A server reached over HTTP.
    Remote {
        /// Endpoint.
        url: String,
        /// Extra request headers (values never logged).
        headers: SecretMap,
    },
}

/// One `mcpServers` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServer {
    /// The key in `mcpServers`.
    pub name: String,
    /// Local or remote.
    pub transport: McpTransport,
    /// `type` as written (`stdio`, `http`, `registry`, ...), if any.
    pub declared_type: Option<String>,
    /// Request timeout in milliseconds.
    pub timeout_ms: u64,
    /// `disabled: true` mutes the server.
    pub disabled: bool,
    /// Tools of this server that are switched off.
    pub disabled_tools: Vec<String>,
    /// Tools listed in `autoApprove` (kiro-cli ignores the key).
    pub auto_approve: Vec<String>,
    /// Keys Cairn does not read, kept as written.
    pub other: Map<String, Value>,
}

pub(crate) fn read_mcp_servers(value: Option<&Value>, findings: &mut Findings) -> Vec<McpServer> {
    let servers = match value {
        None | Some(Value::Null) => return Vec::new(),
        Some(Value::Object(servers)) => servers,
        Some(other) => {
            findings.push(
                SpecDiagnostic::error(
                    "wrong-type",
                    "mcpServers",
                    format!("is {}; it must be an object keyed by server name", type_name(other)),
                )
                .rejected_by_kiro_cli(),
            );
            return Vec::new();
        }
    };
    servers
        .iter()
        .filter_map(|(name, entry)| read_server(name, entry, &format!("mcpServers.{name}"), findings))
        .collect()
}

fn read_server(name: &str, entry: &Value, path: &str, findings: &mut Findings) -> Option<McpServer> {
    let Value::Object(fields) = entry else {
        findings.push(
            SpecDiagnostic::error(
                "wrong-type",
                path,
                format!("is {}; a server entry is an object with `command` or `url`", type_name(entry)),
            )
            .rejected_by_kiro_cli(),
        );
        return None;
    };
    let mut ok = true;
    let mut string = |key: &str, findings: &mut Findings| match fields.get(key) {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text.clone()),
        Some(other) => {
            findings.push(
                SpecDiagnostic::error(
                    "wrong-type",
                    format!("{path}.{key}"),
                    format!("is {}; it must be a string", type_name(other)),
                )
                .rejected_by_kiro_cli(),
            );
            ok = false;
            None
        }
    };
    let command = string("command", findings);
    let url = string("url", findings);
    let declared_type = string("type", findings);
    let args = list(fields.get("args"), &format!("{path}.args"), &mut ok, findings);
    let disabled_tools = list(fields.get("disabledTools"), &format!("{path}.disabledTools"), &mut ok, findings);
    let auto_approve = list(fields.get("autoApprove"), &format!("{path}.autoApprove"), &mut ok, findings);
    let env = string_map(fields.get("env"), &format!("{path}.env"), &mut ok, findings);
    let headers = string_map(fields.get("headers"), &format!("{path}.headers"), &mut ok, findings);
    let disabled = read_disabled(fields.get("disabled"), path, &mut ok, findings);
    let timeout_ms = read_timeout(fields.get("timeout"), path, &mut ok, findings);
    if !auto_approve.is_empty() {
        findings.push(SpecDiagnostic::warning(
            "mcp-auto-approve-ignored",
            format!("{path}.autoApprove"),
            format!(
                "kiro-cli ignores `autoApprove`; to auto-approve a tool list it in allowedTools as `@{name}/<tool>`"
            ),
        ));
    }
    let other: Map<String, Value> = fields
        .iter()
        .filter(|(key, _)| !MCP_ENTRY_KEYS.contains(&key.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for key in other.keys() {
        findings.push(SpecDiagnostic::notice(
            "mcp-key-unread",
            format!("{path}.{key}"),
            "not read by Cairn (kept as written)",
        ));
    }
    if !ok {
        return None;
    }
    let transport = match (command, url) {
        (Some(command), url) => {
            if url.is_some() {
                findings.push(SpecDiagnostic::warning(
                    "mcp-both-transports",
                    path,
                    "has both `command` and `url`; it is started locally and `url` is ignored",
                ));
            }
            McpTransport::Local { command, args, env }
        }
        (None, Some(url)) => McpTransport::Remote { url, headers },
        (None, None) => {
            let message = if declared_type.as_deref() == Some("registry") {
                "is a registry pointer, which Cairn cannot start; it is skipped"
            } else {
                "has neither `command` (a local server) nor `url` (a remote one), so it cannot be started"
            };
            findings.push(SpecDiagnostic::error("mcp-no-transport", path, message));
            return None;
        }
    };
    if let Some(declared) = declared_type.as_deref() {
        check_declared_type(declared, &transport, path, findings);
    }
    Some(McpServer {
        name: name.to_owned(),
        transport,
        declared_type,
        timeout_ms,
        disabled,
        disabled_tools,
        auto_approve,
        other,
    })
}

/// A server's `disabled` flag (false when absent); any other type is an error.
fn read_disabled(value: Option<&Value>, path: &str, ok: &mut bool, findings: &mut Findings) -> bool {
    match value {
        None | Some(Value::Null) => false,
        Some(Value::Bool(flag)) => *flag,
        Some(other) => {
            findings.push(
                SpecDiagnostic::error(
                    "wrong-type",
                    format!("{path}.disabled"),
                    format!("is {}; write true or false", type_name(other)),
                )
                .rejected_by_kiro_cli(),
            );
            *ok = false;
            false
        }
    }
}

/// A server's `timeout` in milliseconds (the default when absent); anything
/// but a whole number is an error.
fn read_timeout(value: Option<&Value>, path: &str, ok: &mut bool, findings: &mut Findings) -> u64 {
    match value {
        None | Some(Value::Null) => MCP_DEFAULT_TIMEOUT_MS,
        Some(Value::Number(number)) if number.as_u64().is_some() => number.as_u64().unwrap_or(MCP_DEFAULT_TIMEOUT_MS),
        Some(other) => {
            findings.push(
                SpecDiagnostic::error(
                    "wrong-type",
                    format!("{path}.timeout"),
                    format!("is {}; write milliseconds as a whole number", type_name(other)),
                )
                .rejected_by_kiro_cli(),
            );
            *ok = false;
            MCP_DEFAULT_TIMEOUT_MS
        }
    }
}

/// Warns when the entry's `type` says another transport than the one it describes.
fn check_declared_type(declared: &str, transport: &McpTransport, path: &str, findings: &mut Findings) {
    let expected = match transport {
        McpTransport::Local { .. } => "stdio",
        McpTransport::Remote { .. } => "http",
    };
    let consistent = declared == expected || (expected == "http" && matches!(declared, "sse" | "streamable-http"));
    if !consistent {
        findings.push(SpecDiagnostic::warning(
            "mcp-type-mismatch",
            format!("{path}.type"),
            format!("says `{declared}` but the entry is a {expected} server"),
        ));
    }
}

fn list(value: Option<&Value>, path: &str, ok: &mut bool, findings: &mut Findings) -> Vec<String> {
    match value {
        None | Some(Value::Null) => Vec::new(),
        Some(value) => read_string_list(Some(value)).unwrap_or_else(|| {
            findings
                .push(SpecDiagnostic::error("wrong-type", path, "must be a list of strings").rejected_by_kiro_cli());
            *ok = false;
            Vec::new()
        }),
    }
}

fn string_map(value: Option<&Value>, path: &str, ok: &mut bool, findings: &mut Findings) -> SecretMap {
    match value {
        None | Some(Value::Null) => SecretMap::default(),
        Some(Value::Object(map)) => {
            let mut out = BTreeMap::new();
            for (key, value) in map {
                match value {
                    Value::String(text) => {
                        out.insert(key.clone(), text.clone());
                    }
                    other => {
                        findings.push(
                            SpecDiagnostic::error(
                                "wrong-type",
                                format!("{path}.{key}"),
                                format!("is {}; values must be strings", type_name(other)),
                            )
                            .rejected_by_kiro_cli(),
                        );
                        *ok = false;
                    }
                }
            }
            SecretMap(out)
        }
        Some(other) => {
            findings.push(
                SpecDiagnostic::error(
                    "wrong-type",
                    path,
                    format!("is {}; it must be an object of strings", type_name(other)),
                )
                .rejected_by_kiro_cli(),
            );
            *ok = false;
            SecretMap::default()
        }
    }
}
