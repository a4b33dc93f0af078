//! The five hook events and the trigger names users write for them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::HooksError;

/// A point in an agent's turn where hooks fire (kiro-cli's five triggers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum HookEvent {
    /// A session starts. Stdout of a passing hook becomes context.
    AgentSpawn,
    /// The user sent a prompt. Stdout of a passing hook becomes context.
    UserPromptSubmit,
    /// A tool is about to run. Exit 2 blocks the call.
    PreToolUse,
    /// A tool finished.
    PostToolUse,
    /// The agent finished its turn. Matchers do not apply.
    Stop,
}

impl HookEvent {
    /// All events, in the order the object form lists them.
    pub const ALL: [HookEvent; 5] = [
        HookEvent::AgentSpawn,
        HookEvent::UserPromptSubmit,
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::Stop,
    ];

    /// The camelCase name used as the object-form key and on a hook's stdin.
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::AgentSpawn => "agentSpawn",
            HookEvent::UserPromptSubmit => "userPromptSubmit",
            HookEvent::PreToolUse => "preToolUse",
            HookEvent::PostToolUse => "postToolUse",
            HookEvent::Stop => "stop",
        }
    }

    /// Whether a hook's matcher is consulted (tool events only).
    pub fn uses_matcher(self) -> bool {
        matches!(self, HookEvent::PreToolUse | HookEvent::PostToolUse)
    }

    /// Whether stdout of a passing hook is handed to the model as context.
    pub fn stdout_is_context(self) -> bool {
        matches!(self, HookEvent::AgentSpawn | HookEvent::UserPromptSubmit)
    }

    /// Whether a hook can stop the action (exit 2, or a failure of a
    /// `fail_closed` hook).
    pub fn can_block(self) -> bool {
        self == HookEvent::PreToolUse
    }
}

impl fmt::Display for HookEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for HookEvent {
    type Err = HooksError;

    /// Accepts the five events in any common spelling (`preToolUse`,
    /// `pre_tool_use`, `PreToolUse`, `pre-tool-use`) and the names other
    /// hosts use for the same moment (`SessionStart`, `promptSubmit`,
    /// `agentStop`).
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match classify_trigger(name) {
            Trigger::Event(event) => Ok(event),
            Trigger::Unsupported(_) | Trigger::Unknown => Err(HooksError::UnknownEvent { name: name.to_owned() }),
        }
    }
}

/// What a trigger name written in a hooks array stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// One of the five events hooks run on.
    Event(HookEvent),
    /// A trigger other hosts know (file, task and manual triggers) that has
    /// no event here; the canonical name is given.
    Unsupported(&'static str),
    /// Not a trigger name of any known host.
    Unknown,
}

/// The trigger alias table: a normalised spelling (lowercase, without `_`,
/// `-` or spaces) and what it stands for. Covers kiro-cli's camelCase
/// triggers, the Kiro IDE's names and the PascalCase names of the versioned
/// hooks files (and of Claude Code).
const TRIGGERS: &[(&str, Trigger)] = &[
    ("agentspawn", Trigger::Event(HookEvent::AgentSpawn)),
    ("sessionstart", Trigger::Event(HookEvent::AgentSpawn)),
    ("userpromptsubmit", Trigger::Event(HookEvent::UserPromptSubmit)),
    ("promptsubmit", Trigger::Event(HookEvent::UserPromptSubmit)),
    ("pretooluse", Trigger::Event(HookEvent::PreToolUse)),
    ("posttooluse", Trigger::Event(HookEvent::PostToolUse)),
    ("stop", Trigger::Event(HookEvent::Stop)),
    ("agentstop", Trigger::Event(HookEvent::Stop)),
    ("pretaskexec", Trigger::Unsupported("PreTaskExec")),
    ("pretaskexecution", Trigger::Unsupported("PreTaskExec")),
    ("posttaskexec", Trigger::Unsupported("PostTaskExec")),
    ("posttaskexecution", Trigger::Unsupported("PostTaskExec")),
    ("postfilecreate", Trigger::Unsupported("PostFileCreate")),
    ("filecreated", Trigger::Unsupported("PostFileCreate")),
    ("postfilesave", Trigger::Unsupported("PostFileSave")),
    ("fileedited", Trigger::Unsupported("PostFileSave")),
    ("filesaved", Trigger::Unsupported("PostFileSave")),
    ("postfiledelete", Trigger::Unsupported("PostFileDelete")),
    ("filedeleted", Trigger::Unsupported("PostFileDelete")),
    ("manual", Trigger::Unsupported("Manual")),
    ("usertriggered", Trigger::Unsupported("Manual")),
];

/// Looks a trigger name up in the alias table, in any spelling.
pub fn classify_trigger(name: &str) -> Trigger {
    let normalised: String =
        name.chars().filter(|c| !matches!(c, '_' | '-' | ' ')).flat_map(char::to_lowercase).collect();
    TRIGGERS.iter().find(|(spelling, _)| *spelling == normalised).map_or(Trigger::Unknown, |(_, trigger)| *trigger)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(name: &str, expect: Trigger) {
        assert_eq!(classify_trigger(name), expect, "trigger {name:?}");
    }

    #[test]
    fn every_spelling_of_the_five_events() {
        use HookEvent::*;
        for (spellings, event) in [
            (&["agentSpawn", "agent_spawn", "AgentSpawn", "SessionStart", "session-start"][..], AgentSpawn),
            (&["userPromptSubmit", "user_prompt_submit", "UserPromptSubmit", "promptSubmit"][..], UserPromptSubmit),
            (&["preToolUse", "pre_tool_use", "PreToolUse", "PRE_TOOL_USE"][..], PreToolUse),
            (&["postToolUse", "post_tool_use", "PostToolUse"][..], PostToolUse),
            (&["stop", "Stop", "agentStop", "agent_stop"][..], Stop),
        ] {
            for spelling in spellings {
                check(spelling, Trigger::Event(event));
                assert_eq!(spelling.parse::<HookEvent>().unwrap(), event);
            }
        }
    }

    #[test]
    fn other_hosts_triggers_are_known_but_unsupported() {
        check("fileEdited", Trigger::Unsupported("PostFileSave"));
        check("PostFileSave", Trigger::Unsupported("PostFileSave"));
        check("post_file_create", Trigger::Unsupported("PostFileCreate"));
        check("userTriggered", Trigger::Unsupported("Manual"));
        check("PreTaskExecution", Trigger::Unsupported("PreTaskExec"));
        check("onSomethingElse", Trigger::Unknown);
        assert!(matches!("fileEdited".parse::<HookEvent>(), Err(HooksError::UnknownEvent { .. })));
    }

    #[test]
    fn serde_uses_camel_case() {
        assert_eq!(serde_json::to_string(&HookEvent::PreToolUse).unwrap(), "\"preToolUse\"");
        for event in HookEvent::ALL {
            assert_eq!(event.as_str().parse::<HookEvent>().unwrap(), event);
        }
    }
}
