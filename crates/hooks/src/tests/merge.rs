use std::path::{Path, PathBuf};

use cairn_guard::SensitivePaths;
use serde_json::{Value, json};

use crate::constants::{MAX_OUTPUT_SIZE, MAX_TIMEOUT_MS, MAX_USER_HOOKS_PER_EVENT};
use crate::{DropReason, HookEntry, HookEvent, HookSet, HooksError, MergeOptions, MergeReport, merge_user_hooks};

/// A temp tree with a fake home (holding `.ssh/evil.sh`) and a hooks folder.
struct Fixture {
    _dir: tempfile::TempDir,
    home: PathBuf,
    hooks: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let hooks = dir.path().join("hooks");
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::create_dir_all(&hooks).unwrap();
        for path in [home.join(".ssh/evil.sh"), hooks.join("ok.sh"), hooks.join("other.sh")] {
            std::fs::write(path, "#!/bin/sh\nexit 0\n").unwrap();
        }
        Fixture { _dir: dir, home, hooks }
    }

    fn hook(&self, name: &str) -> String {
        self.hooks.join(name).to_str().unwrap().to_owned()
    }

    fn merge(&self, bundled: &HookSet, user: Value) -> MergeReport {
        merge_user_hooks(bundled, &user, &MergeOptions::new(SensitivePaths::with_home(&self.home)))
    }

    /// Merges one preToolUse entry and returns the reason it was dropped.
    #[track_caller]
    fn rejected(&self, entry: Value) -> DropReason {
        let report = self.merge(&HookSet::new(), json!({"preToolUse": [entry]}));
        assert!(report.hooks.is_empty(), "{entry} was kept");
        assert_eq!(report.dropped.len(), 1);
        assert_eq!(report.dropped[0].location, "preToolUse[0]");
        report.dropped[0].reason.clone()
    }

    #[track_caller]
    fn accepted(&self, entry: Value) -> HookEntry {
        let report = self.merge(&HookSet::new(), json!({"preToolUse": [entry]}));
        assert!(report.dropped.is_empty(), "{:?}", report.dropped);
        report.hooks.get(HookEvent::PreToolUse)[0].clone()
    }
}

#[test]
fn a_valid_entry_is_kept() {
    let fixture = Fixture::new();
    let entry = fixture.accepted(json!({"command": fixture.hook("ok.sh"), "matcher": "@git/status"}));
    assert_eq!(entry, HookEntry::new(fixture.hook("ok.sh")).with_matcher("@git/status"));
}

#[test]
fn command_rules() {
    let fixture = Fixture::new();
    assert_eq!(
        fixture.rejected(json!({"command": format!("{} --flag", fixture.hook("ok.sh"))})),
        DropReason::CommandCharacters
    );
    assert_eq!(
        fixture.rejected(json!({"command": format!("{};rm", fixture.hook("ok.sh"))})),
        DropReason::CommandCharacters
    );
    assert_eq!(fixture.rejected(json!({"command": "$(curl)"})), DropReason::CommandCharacters);
    assert_eq!(fixture.rejected(json!({"command": "hooks/ok.sh"})), DropReason::CommandNotAbsolute);
    assert_eq!(fixture.rejected(json!({"command": fixture.hook("missing.sh")})), DropReason::CommandNotFound);
    assert_eq!(fixture.rejected(json!({"command": fixture.hooks.to_str().unwrap()})), DropReason::CommandNotFound);
    assert_eq!(fixture.rejected(json!({"command": 42})), DropReason::CommandNotString);
    assert_eq!(fixture.rejected(json!({"matcher": "*"})), DropReason::MissingCommand);
    assert_eq!(fixture.rejected(json!("just a string")), DropReason::NotAnObject);
}

#[test]
fn sensitive_commands_are_refused_after_resolving() {
    let fixture = Fixture::new();
    let direct = fixture.home.join(".ssh/evil.sh");
    let traversal = fixture.hooks.join("../home/.ssh/evil.sh");
    let link = fixture.hooks.join("innocent.sh");
    #[cfg(unix)]
    std::os::unix::fs::symlink(&direct, &link).unwrap();
    for path in [direct.as_path(), traversal.as_path(), link.as_path()] {
        if !cfg!(unix) && path == link.as_path() {
            continue;
        }
        let reason = fixture.rejected(json!({"command": path.to_str().unwrap()}));
        assert!(
            matches!(&reason, DropReason::SensitiveCommand { reason } if reason.contains("SSH")),
            "{path:?}: {reason:?}"
        );
    }
    // A harmless symlink to a harmless file is fine.
    #[cfg(unix)]
    {
        let good_link = fixture.hooks.join("alias.sh");
        std::os::unix::fs::symlink(fixture.hooks.join("ok.sh"), &good_link).unwrap();
        fixture.accepted(json!({"command": good_link.to_str().unwrap()}));
    }
}

#[test]
fn matcher_rules() {
    let fixture = Fixture::new();
    let command = fixture.hook("ok.sh");
    assert_eq!(fixture.rejected(json!({"command": command, "matcher": 7})), DropReason::MatcherNotString);
    assert_eq!(fixture.rejected(json!({"command": command, "matcher": ["a"]})), DropReason::MatcherNotString);
    assert_eq!(fixture.rejected(json!({"command": command, "matcher": "fs_read;rm"})), DropReason::MatcherCharacters);
    assert_eq!(fixture.rejected(json!({"command": command, "matcher": "fs read"})), DropReason::MatcherCharacters);
    assert_eq!(fixture.rejected(json!({"command": command, "matcher": ""})), DropReason::MatcherCharacters);
    assert_eq!(
        fixture.rejected(json!({"command": command, "matcher": "a".repeat(201)})),
        DropReason::MatcherTooLong { length: 201 }
    );
    fixture.accepted(json!({"command": command, "matcher": "a".repeat(200)}));
    assert!(matches!(
        fixture.rejected(json!({"command": command, "matcher": "@*/tool"})),
        DropReason::MatcherInvalid { reason } if reason.contains("literal")
    ));
    for matcher in ["*", "fs_*", "@builtin", "@git/get_*", "mcp__git__status", "read", "execute_bash"] {
        fixture.accepted(json!({"command": command, "matcher": matcher}));
    }
}

#[test]
fn extra_keys_are_stripped_with_a_notice() {
    let fixture = Fixture::new();
    let report = fixture.merge(
        &HookSet::new(),
        json!({"preToolUse": [{
            "command": fixture.hook("ok.sh"), "matcher": "shell", "env": {"X": "1"}, "args": ["--evil"],
            "timeout_ms": 500, "max_output_size": 100, "fail_closed": true
        }]}),
    );
    let entry = &report.hooks.get(HookEvent::PreToolUse)[0];
    assert_eq!(
        serde_json::to_value(entry).unwrap(),
        json!({"command": fixture.hook("ok.sh"), "matcher": "shell", "timeout_ms": 500, "max_output_size": 100, "fail_closed": true})
    );
    assert_eq!(report.notices.len(), 1);
    assert_eq!(report.notices[0].message, "stripped keys: args, env");
}

#[test]
fn limits_are_clamped_or_ignored_with_a_notice() {
    let fixture = Fixture::new();
    let report = fixture.merge(
        &HookSet::new(),
        json!({"stop": [
            {"command": fixture.hook("ok.sh"), "timeout_ms": 10_000_000, "max_output_size": 10_000_000},
            {"command": fixture.hook("other.sh"), "timeout_ms": -5, "max_output_size": "big"}
        ]}),
    );
    let entries = report.hooks.get(HookEvent::Stop);
    assert_eq!(entries[0].timeout_ms, Some(MAX_TIMEOUT_MS));
    assert_eq!(entries[0].max_output_size, Some(MAX_OUTPUT_SIZE));
    assert_eq!(entries[1].timeout_ms, None);
    assert_eq!(entries[1].max_output_size, None);
    assert_eq!(report.notices.len(), 4, "{:?}", report.notices);
}

#[test]
fn bundled_first_then_user_deduplicated_by_command_and_matcher() {
    let fixture = Fixture::new();
    let bundled = HookSet::parse_bundled(&json!({
        "preToolUse": [{"command": "/opt/cairn/audit.sh --json", "matcher": "execute_bash"}],
        "agentSpawn": [{"command": fixture.hook("ok.sh")}]
    }))
    .unwrap();
    let report = fixture.merge(
        &bundled,
        json!({
            "preToolUse": [
                {"command": fixture.hook("ok.sh"), "matcher": "shell"},
                {"command": fixture.hook("ok.sh"), "matcher": "shell", "extra": 1},
                {"command": fixture.hook("ok.sh")},
                {"command": fixture.hook("other.sh"), "matcher": "shell"}
            ],
            "agentSpawn": [{"command": fixture.hook("ok.sh")}]
        }),
    );
    let commands = |event| -> Vec<(String, Option<String>)> {
        report.hooks.get(event).iter().map(|entry| (entry.command.clone(), entry.matcher.clone())).collect()
    };
    assert_eq!(
        commands(HookEvent::PreToolUse),
        vec![
            ("/opt/cairn/audit.sh --json".to_owned(), Some("execute_bash".to_owned())),
            (fixture.hook("ok.sh"), Some("shell".to_owned())),
            (fixture.hook("ok.sh"), None),
            (fixture.hook("other.sh"), Some("shell".to_owned())),
        ]
    );
    assert_eq!(commands(HookEvent::AgentSpawn), vec![(fixture.hook("ok.sh"), None)]);
    let dropped: Vec<(&str, &DropReason)> =
        report.dropped.iter().map(|dropped| (dropped.location.as_str(), &dropped.reason)).collect();
    assert_eq!(dropped, vec![("agentSpawn[0]", &DropReason::Duplicate), ("preToolUse[1]", &DropReason::Duplicate)]);
}

#[test]
fn malformed_shapes_are_skipped_with_a_reason() {
    let fixture = Fixture::new();
    let report = fixture.merge(
        &HookSet::new(),
        json!({"preToolUse": {"command": "x"}, "onSave": [], "PostToolUse": [{"command": fixture.hook("ok.sh")}]}),
    );
    assert_eq!(report.hooks.get(HookEvent::PostToolUse).len(), 1, "any spelling of an event key is read");
    let reasons: Vec<&DropReason> = report.dropped.iter().map(|dropped| &dropped.reason).collect();
    assert_eq!(reasons, vec![&DropReason::UnknownEvent, &DropReason::EventNotAList]);
    assert_eq!(fixture.merge(&HookSet::new(), json!(5)).dropped[0].reason, DropReason::NotHooks);
    assert!(fixture.merge(&HookSet::new(), Value::Null).dropped.is_empty());
}

#[test]
fn array_form_is_projected_then_validated() {
    let fixture = Fixture::new();
    let report = fixture.merge(
        &HookSet::new(),
        json!([
            {"name": "gate", "trigger": "PreToolUse", "matcher": "shell", "action": {"type": "command", "command": fixture.hook("ok.sh")}},
            {"name": "lint", "trigger": "PostFileSave", "action": {"type": "command", "command": "npm run lint"}},
            {"name": "bad", "trigger": "stop", "action": {"type": "command", "command": "npm run lint"}}
        ]),
    );
    assert_eq!(report.hooks.get(HookEvent::PreToolUse).len(), 1);
    let reasons: Vec<(&str, &DropReason)> =
        report.dropped.iter().map(|dropped| (dropped.location.as_str(), &dropped.reason)).collect();
    assert_eq!(
        reasons,
        vec![
            ("hooks[1] (lint)", &DropReason::UnsupportedTrigger { trigger: "PostFileSave".into() }),
            ("hooks[2] (bad)", &DropReason::CommandCharacters),
        ]
    );
}

#[test]
fn user_hooks_per_event_are_capped() {
    let fixture = Fixture::new();
    let entries: Vec<Value> = (0..=MAX_USER_HOOKS_PER_EVENT)
        .map(|index| json!({"command": fixture.hook("ok.sh"), "matcher": format!("tool_{index}")}))
        .collect();
    let report = fixture.merge(&HookSet::new(), json!({"postToolUse": entries}));
    assert_eq!(report.hooks.len(), MAX_USER_HOOKS_PER_EVENT);
    assert_eq!(report.dropped.last().unwrap().reason, DropReason::PerEventCap);
}

#[test]
fn bundled_sets_are_checked_whole() {
    for (bundled, key) in [
        (json!({"preToolUse": [{"command": ""}]}), "preToolUse[0].command"),
        (json!({"preToolUse": [{"command": "/x", "matcher": "@*/y"}]}), "preToolUse[0].matcher"),
        (json!({"onSave": []}), "onSave"),
        (json!({"stop": [{"command": "/x", "surprise": 1}]}), "stop"),
    ] {
        match HookSet::parse_bundled(&bundled) {
            Err(HooksError::InvalidBundled { key: got, .. }) => assert_eq!(got, key),
            other => panic!("{bundled}: {other:?}"),
        }
    }
    assert!(matches!(HookSet::parse_bundled_str("{"), Err(HooksError::Json { .. })));
}

#[test]
fn user_hooks_serialize_as_the_object_form() {
    let fixture = Fixture::new();
    let report = fixture.merge(&HookSet::new(), json!({"stop": [{"command": fixture.hook("ok.sh")}]}));
    assert_eq!(serde_json::to_value(&report.hooks).unwrap(), json!({"stop": [{"command": fixture.hook("ok.sh")}]}));
    assert!(Path::new(&fixture.hook("ok.sh")).is_file());
}
