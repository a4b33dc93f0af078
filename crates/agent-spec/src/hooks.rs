//! `hooks`: event-keyed lists of command entries.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::constants::{
    HOOK_DEFAULT_CACHE_TTL_SECONDS, HOOK_DEFAULT_MAX_OUTPUT_SIZE, HOOK_DEFAULT_TIMEOUT_MS, HOOK_ENTRY_KEYS, HOOK_EVENTS,
};
use crate::diagnostic::{Findings, SpecDiagnostic, type_name};

/// The five events kiro-cli fires hooks on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum SpecHookEvent {
    /// The agent starts.
    AgentSpawn,
    /// The user sends a prompt.
    UserPromptSubmit,
    /// Before a tool call (exit code 2 blocks it).
    PreToolUse,
    /// After a tool call.
    PostToolUse,
    /// The agent finishes its turn.
    Stop,
}

impl SpecHookEvent {
    /// Every event, in wire order.
    pub const ALL: [Self; 5] =
        [Self::AgentSpawn, Self::UserPromptSubmit, Self::PreToolUse, Self::PostToolUse, Self::Stop];

    /// The spelling in a spec.
    pub fn as_str(self) -> &'static str {
        HOOK_EVENTS[self as usize]
    }

    /// Parses the exact camelCase spelling.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|event| event.as_str() == text)
    }
}

/// One hook entry with kiro-cli's defaults applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SpecHookEntry {
    /// The shell command.
    pub command: String,
    /// Which tools it applies to (tool events); `None` means every tool.
    pub matcher: Option<String>,
    /// Time limit in milliseconds.
    pub timeout_ms: u64,
    /// Cap on captured output, in bytes.
    pub max_output_size: u64,
    /// How long a result may be reused; 0 disables caching.
    pub cache_ttl_seconds: u64,
}

/// The hooks of one spec, by event.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Hooks {
    /// Valid entries per event, in spec order.
    pub by_event: BTreeMap<SpecHookEvent, Vec<SpecHookEntry>>,
}

impl Hooks {
    /// The entries of one event.
    pub fn entries(&self, event: SpecHookEvent) -> &[SpecHookEntry] {
        self.by_event.get(&event).map_or(&[], Vec::as_slice)
    }

    /// True when no entry is valid.
    pub fn is_empty(&self) -> bool {
        self.by_event.values().all(Vec::is_empty)
    }
}

pub(crate) fn read_hooks(value: Option<&Value>, findings: &mut Findings) -> Hooks {
    let mut hooks = Hooks::default();
    let events = match value {
        None => return hooks,
        Some(Value::Object(events)) => events,
        Some(Value::Array(_)) => {
            findings.push(
                SpecDiagnostic::error(
                    "hooks-shape",
                    "hooks",
                    "is a list; it must be an object keyed by event (agentSpawn, userPromptSubmit, preToolUse, postToolUse, stop), each holding a list of entries",
                )
                .rejected_by_kiro_cli(),
            );
            return hooks;
        }
        Some(other) => {
            findings.push(
                SpecDiagnostic::error(
                    "hooks-shape",
                    "hooks",
                    format!("is {}; it must be an object keyed by event", type_name(other)),
                )
                .rejected_by_kiro_cli(),
            );
            return hooks;
        }
    };
    for (key, value) in events {
        let path = format!("hooks.{key}");
        let Some(event) = SpecHookEvent::parse(key) else {
            let hint = HOOK_EVENTS
                .iter()
                .find(|known| known.eq_ignore_ascii_case(key))
                .map(|known| format!("; spell it `{known}`"))
                .unwrap_or_else(|| format!("; use one of {}", HOOK_EVENTS.join(", ")));
            findings.push(
                SpecDiagnostic::error(
                    "hook-unknown-event",
                    path,
                    format!("`{key}` is not a hook event, so its hooks never run{hint}"),
                )
                .rejected_by_kiro_cli(),
            );
            continue;
        };
        let Value::Array(items) = value else {
            findings.push(
                SpecDiagnostic::error(
                    "hook-event-shape",
                    path,
                    format!("is {}; it must be a list of entries like [{{\"command\": \"...\"}}]", type_name(value)),
                )
                .rejected_by_kiro_cli(),
            );
            continue;
        };
        let entries = hooks.by_event.entry(event).or_default();
        for (index, item) in items.iter().enumerate() {
            if let Some(entry) = read_entry(item, &format!("{path}[{index}]"), findings) {
                entries.push(entry);
            }
        }
    }
    hooks.by_event.retain(|_, entries| !entries.is_empty());
    hooks
}

fn read_entry(item: &Value, path: &str, findings: &mut Findings) -> Option<SpecHookEntry> {
    let Value::Object(fields) = item else {
        findings.push(
            SpecDiagnostic::error(
                "hook-entry-shape",
                path,
                format!("is {}; an entry is an object with a `command`", type_name(item)),
            )
            .rejected_by_kiro_cli(),
        );
        return None;
    };
    let command = match fields.get("command") {
        Some(Value::String(command)) if !command.trim().is_empty() => Some(command.clone()),
        Some(Value::String(_)) => {
            findings.push(SpecDiagnostic::error(
                "hook-empty-command",
                format!("{path}.command"),
                "is empty, so the hook does nothing",
            ));
            None
        }
        Some(other) => {
            findings.push(
                SpecDiagnostic::error(
                    "wrong-type",
                    format!("{path}.command"),
                    format!("is {}; write the command as a string", type_name(other)),
                )
                .rejected_by_kiro_cli(),
            );
            None
        }
        None if fields.contains_key("hooks") => {
            findings.push(
                SpecDiagnostic::error(
                    "hook-missing-command",
                    path,
                    "uses Claude Code's nested {matcher, hooks: [...]} shape, which kiro-cli rejects; move each inner command into its own entry with `command` and `matcher`",
                )
                .rejected_by_kiro_cli(),
            );
            None
        }
        None => {
            findings.push(
                SpecDiagnostic::error(
                    "hook-missing-command",
                    path,
                    "has no `command`, and kiro-cli drops the whole file for it; add the command to run",
                )
                .rejected_by_kiro_cli(),
            );
            None
        }
    };
    let matcher = match fields.get("matcher") {
        None | Some(Value::Null) => None,
        Some(Value::String(matcher)) => Some(matcher.clone()),
        Some(other) => {
            findings.push(
                SpecDiagnostic::error(
                    "wrong-type",
                    format!("{path}.matcher"),
                    format!("is {}; write the matcher as a string", type_name(other)),
                )
                .rejected_by_kiro_cli(),
            );
            return None;
        }
    };
    let timeout_ms =
        read_u64(fields.get("timeout_ms"), HOOK_DEFAULT_TIMEOUT_MS, &format!("{path}.timeout_ms"), findings)?;
    let max_output_size = read_u64(
        fields.get("max_output_size"),
        HOOK_DEFAULT_MAX_OUTPUT_SIZE,
        &format!("{path}.max_output_size"),
        findings,
    )?;
    let cache_ttl_seconds = read_u64(
        fields.get("cache_ttl_seconds"),
        HOOK_DEFAULT_CACHE_TTL_SECONDS,
        &format!("{path}.cache_ttl_seconds"),
        findings,
    )?;
    for key in fields.keys() {
        if HOOK_ENTRY_KEYS.contains(&key.as_str()) || key == "hooks" {
            continue;
        }
        let message = match key.as_str() {
            "timeout" => "is ignored: the time limit is `timeout_ms`, in milliseconds".to_owned(),
            "description" | "name" => format!("`{key}` is ignored by kiro-cli (kept as written)"),
            _ => format!("unknown hook key `{key}`, ignored by kiro-cli (kept as written)"),
        };
        findings.push(SpecDiagnostic::warning("hook-key-ignored", format!("{path}.{key}"), message));
    }
    Some(SpecHookEntry { command: command?, matcher, timeout_ms, max_output_size, cache_ttl_seconds })
}

fn read_u64(value: Option<&Value>, default: u64, path: &str, findings: &mut Findings) -> Option<u64> {
    match value {
        None | Some(Value::Null) => Some(default),
        Some(Value::Number(number)) if number.as_u64().is_some() => number.as_u64(),
        Some(other) => {
            findings.push(
                SpecDiagnostic::error(
                    "wrong-type",
                    path,
                    format!("is {}; it must be a whole number of at least 0", describe(other)),
                )
                .rejected_by_kiro_cli(),
            );
            None
        }
    }
}

fn describe(value: &Value) -> String {
    match value {
        Value::Number(number) => format!("the number {number}"),
        other => type_name(other).to_owned(),
    }
}
