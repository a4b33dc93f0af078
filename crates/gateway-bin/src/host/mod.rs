//! The host surfaces: Claude Code and kiro-cli hooks, and the MCP
//! sessions they start, served by one resident gateway per home.
//!
//! `cairn hook <host> <event>` and `cairn mcp serve` are thin clients. A
//! hook reads the host's event from stdin and posts it, as it is, to the
//! home's running `cairn serve` (`POST /api/hooks/{host}/{event}`, over
//! loopback with the home's token); the gateway answers with the stdout,
//! stderr and exit status the host expects ([`HookAnswer`]), computed by
//! [`engine::answer`] over the gateway's own stores: the loaded model
//! (hybrid recall), the session pipeline (consolidation on both paths,
//! auto-skills) and the live settings. The client prints that answer.
//!
//! When no gateway answers, the client starts one in the background
//! (`host.start_gateway`, on by default; the home's instance lock keeps it
//! to one) and answers this event itself, from a bounded in-process
//! fallback: the same [`engine::answer`] over the home's stores opened
//! without the model, so recall is keyword-only, and the context says so.
//! Every event has a hard deadline (`host.context_deadline_ms`, default
//! 2 s, for context events; `host.record_deadline_ms`, default 0.5 s, for
//! recording events and tool decisions): a gateway or fallback that has not
//! answered by then leaves the host with no output and exit 0, so a dead or
//! hung gateway never holds a prompt.

pub(crate) mod client;
pub(crate) mod engine;
pub(crate) mod local;

use std::process::ExitCode;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::settings::Settings;

/// Which host is calling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum HostName {
    /// Claude Code (`settings.json` hooks).
    ClaudeCode,
    /// kiro-cli (agent spec hooks).
    KiroCli,
}

impl HostName {
    pub(crate) fn key(self) -> &'static str {
        match self {
            HostName::ClaudeCode => "claude-code",
            HostName::KiroCli => "kiro-cli",
        }
    }

    /// The surface the context builder writes for: an agent host with its
    /// own edit tools, which renders no buttons.
    pub(crate) fn surface(self) -> cairn_context::Surface {
        match self {
            HostName::ClaudeCode => cairn_context::Surface::ClaudeCode,
            HostName::KiroCli => cairn_context::Surface::KiroCli,
        }
    }

    /// The host named by `key` (`claude-code`, `kiro-cli`).
    pub(crate) fn from_key(key: &str) -> Option<Self> {
        [HostName::ClaudeCode, HostName::KiroCli].into_iter().find(|host| host.key() == key)
    }
}

/// What an event asks of Cairn, which sets its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventKind {
    /// Answers context (session start, prompt).
    Context,
    /// Decides a tool call.
    Decision,
    /// Only records (tool results, replies, session end).
    Record,
}

/// Claude Code events Cairn answers, in the order a session meets them.
pub(crate) const CLAUDE_EVENTS: &[&str] =
    &["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "SessionEnd"];
/// kiro-cli triggers Cairn answers.
pub(crate) const KIRO_EVENTS: &[&str] = &["agentSpawn", "userPromptSubmit", "preToolUse", "postToolUse", "stop"];

impl EventKind {
    /// The kind of `event` for `host`, or `None` for an event Cairn has no hook for.
    pub(crate) fn of(host: HostName, event: &str) -> Option<Self> {
        Some(match (host, event) {
            (HostName::ClaudeCode, "SessionStart" | "UserPromptSubmit")
            | (HostName::KiroCli, "agentSpawn" | "userPromptSubmit") => EventKind::Context,
            (HostName::ClaudeCode, "PreToolUse") | (HostName::KiroCli, "preToolUse") => EventKind::Decision,
            (HostName::ClaudeCode, "PostToolUse" | "Stop" | "SessionEnd")
            | (HostName::KiroCli, "postToolUse" | "stop") => EventKind::Record,
            _ => return None,
        })
    }

    /// How long a hook of this kind may take, from the settings.
    /// Whether the event appends to a transcript (a prompt, a tool call,
    /// a reply, a session's end).
    pub(crate) fn records(host: HostName, event: &str) -> bool {
        match host {
            HostName::ClaudeCode => matches!(event, "UserPromptSubmit" | "PostToolUse" | "Stop" | "SessionEnd"),
            HostName::KiroCli => matches!(event, "userPromptSubmit" | "postToolUse" | "stop"),
        }
    }

    pub(crate) fn deadline(self, settings: &Settings) -> Duration {
        Duration::from_millis(match self {
            EventKind::Context => settings.host.context_deadline_ms,
            EventKind::Decision | EventKind::Record => settings.host.record_deadline_ms,
        })
    }
}

/// How episodic memory was recalled for an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recall {
    /// Keywords and vectors (the model is loaded).
    Hybrid,
    /// Keywords only, and why.
    Keyword(&'static str),
}

/// What the host gets: its stdout, a stderr line and the exit status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct HookAnswer {
    /// Printed on stdout (context, or the host's JSON answer).
    #[serde(default)]
    pub(crate) stdout: Option<String>,
    /// Printed on stderr (a skipped event's reason, a block's reason).
    #[serde(default)]
    pub(crate) stderr: Option<String>,
    /// The exit status (0, or 2 for a kiro-cli block).
    #[serde(default)]
    pub(crate) exit: u8,
}

impl HookAnswer {
    /// `stdout`, exit 0.
    pub(crate) fn out(stdout: Option<String>) -> Self {
        Self { stdout, stderr: None, exit: 0 }
    }

    /// No output, one stderr line, exit 0.
    pub(crate) fn skip(reason: String) -> Self {
        Self { stdout: None, stderr: Some(format!("cairn hook: {}", reason.replace('\n', " "))), exit: 0 }
    }

    /// Prints the answer and gives the exit status.
    pub(crate) fn emit(&self) -> ExitCode {
        if let Some(stdout) = &self.stdout {
            println!("{stdout}");
        }
        if let Some(stderr) = &self.stderr {
            eprintln!("{stderr}");
        }
        ExitCode::from(self.exit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_installed_event_has_a_kind_and_others_have_none() {
        for event in CLAUDE_EVENTS {
            assert!(EventKind::of(HostName::ClaudeCode, event).is_some(), "{event}");
            assert!(EventKind::of(HostName::KiroCli, event).is_none(), "{event} is not a kiro-cli trigger");
        }
        for event in KIRO_EVENTS {
            assert!(EventKind::of(HostName::KiroCli, event).is_some(), "{event}");
        }
        assert_eq!(EventKind::of(HostName::ClaudeCode, "Notification"), None);
        assert_eq!(HostName::from_key("kiro-cli"), Some(HostName::KiroCli));
        assert_eq!(HostName::from_key("cursor"), None);
    }
}
