use serde_json::{Value, json};

use crate::{DropReason, HookEvent, project_hook_array};

#[test]
fn command_actions_on_the_five_events_in_any_spelling() {
    let array = json!([
        {"name": "a", "trigger": "preToolUse", "matcher": "shell", "action": {"type": "command", "command": "/h/a"}},
        {"name": "b", "trigger": "pre_tool_use", "action": {"type": "command", "command": "/h/b"}},
        {"name": "c", "trigger": "PostToolUse", "action": {"type": "command", "command": "/h/c"}},
        {"name": "d", "trigger": "SessionStart", "action": {"type": "command", "command": "/h/d"}},
        {"name": "e", "trigger": "user_prompt_submit", "action": {"type": "runCommand", "command": "/h/e"}},
        {"name": "f", "trigger": "Stop", "action": {"type": "command", "command": "/h/f"}},
        {"name": "g", "trigger": "agentSpawn", "action": "command", "command": "/h/g"},
    ]);
    let projection = project_hook_array(&array);
    assert!(projection.dropped.is_empty(), "{:?}", projection.dropped);
    let got: Vec<(HookEvent, &str, Value)> =
        projection.hooks.iter().map(|hook| (hook.event, hook.location.as_str(), hook.entry.clone())).collect();
    use HookEvent::*;
    assert_eq!(
        got,
        vec![
            (PreToolUse, "hooks[0] (a)", json!({"command": "/h/a", "matcher": "shell"})),
            (PreToolUse, "hooks[1] (b)", json!({"command": "/h/b"})),
            (PostToolUse, "hooks[2] (c)", json!({"command": "/h/c"})),
            (AgentSpawn, "hooks[3] (d)", json!({"command": "/h/d"})),
            (UserPromptSubmit, "hooks[4] (e)", json!({"command": "/h/e"})),
            (Stop, "hooks[5] (f)", json!({"command": "/h/f"})),
            (AgentSpawn, "hooks[6] (g)", json!({"command": "/h/g"})),
        ]
    );
}

#[test]
fn every_exclusion_is_reported() {
    let array = json!([
        {"name": "off", "trigger": "preToolUse", "enabled": false, "action": {"type": "command", "command": "/h/a"}},
        {"name": "ask", "trigger": "preToolUse", "confirm": true, "action": {"type": "command", "command": "/h/b"}},
        {"name": "agent", "trigger": "preToolUse", "action": {"type": "agent", "prompt": "check tests"}},
        {"name": "save", "trigger": "PostFileSave", "action": {"type": "command", "command": "/h/c"}},
        {"name": "edit", "trigger": "fileEdited", "action": {"type": "command", "command": "/h/d"}},
        {"name": "odd", "trigger": "onLunch", "action": {"type": "command", "command": "/h/e"}},
        {"name": "none", "action": {"type": "command", "command": "/h/f"}},
        {"name": "empty", "trigger": "stop", "action": {"type": "command"}},
        "not an object",
    ]);
    let projection = project_hook_array(&array);
    assert!(projection.hooks.is_empty());
    let reasons: Vec<(&str, DropReason)> =
        projection.dropped.iter().map(|dropped| (dropped.location.as_str(), dropped.reason.clone())).collect();
    assert_eq!(
        reasons,
        vec![
            ("hooks[0] (off)", DropReason::Disabled),
            ("hooks[1] (ask)", DropReason::NeedsConfirmation),
            ("hooks[2] (agent)", DropReason::NotACommandAction { action: "agent".into() }),
            ("hooks[3] (save)", DropReason::UnsupportedTrigger { trigger: "PostFileSave".into() }),
            ("hooks[4] (edit)", DropReason::UnsupportedTrigger { trigger: "fileEdited".into() }),
            ("hooks[5] (odd)", DropReason::UnknownTrigger { trigger: "onLunch".into() }),
            ("hooks[6] (none)", DropReason::MissingTrigger),
            ("hooks[7] (empty)", DropReason::MissingCommand),
            ("hooks[8]", DropReason::NotAnObject),
        ]
    );
    assert_eq!(projection.dropped[0].command.as_deref(), Some("/h/a"));
}

#[test]
fn timeout_is_noted_and_versioned_files_are_read() {
    let file = json!({"version": "v1", "hooks": [
        {"name": "t", "trigger": "PreToolUse", "timeout": 5, "action": {"type": "command", "command": "/h/t"}}
    ]});
    let projection = project_hook_array(&file);
    assert_eq!(projection.hooks.len(), 1);
    assert_eq!(projection.hooks[0].entry, json!({"command": "/h/t"}));
    assert_eq!(projection.notices.len(), 1);
    assert!(projection.notices[0].message.contains("timeout"));
    let bad = project_hook_array(&json!({"version": "v1"}));
    assert_eq!(bad.dropped[0].reason, DropReason::NotHooks);
}
