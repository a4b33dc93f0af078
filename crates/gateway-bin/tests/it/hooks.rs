//! `cairn hooks check` and `cairn hooks run`.

use serde_json::{Value, json};

use crate::cairn;

fn script(dir: &std::path::Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    path.to_str().unwrap().to_owned()
}

fn run_json(home: &std::path::Path, args: &[&str]) -> Value {
    let output = cairn().arg("--home").arg(home).args(args).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn check_prints_the_merged_set_and_every_dropped_entry() {
    let home = tempfile::tempdir().unwrap();
    let gate = script(home.path(), "gate.sh", "exit 0");
    let config = json!({
        "hooks": {"auto_approve_tools": ["fs_read", "*search*"]},
        "agent": {"kiro_hooks": {"preToolUse": [
            {"command": gate, "matcher": "shell", "note": "x"},
            {"command": "relative.sh"},
            {"command": gate, "matcher": "shell"}
        ]}}
    });
    std::fs::write(home.path().join("config.json"), config.to_string()).unwrap();
    let report = run_json(home.path(), &["hooks", "check"]);
    assert_eq!(report["hooks"], json!({"preToolUse": [{"command": gate, "matcher": "shell"}]}));
    let reasons: Vec<&str> =
        report["dropped"].as_array().unwrap().iter().map(|d| d["reason"]["kind"].as_str().unwrap()).collect();
    assert_eq!(reasons, ["command_not_absolute", "duplicate"]);
    assert_eq!(report["config_hooks"]["rules"], 2);
    assert_eq!(report["config_hooks"]["warnings"][0]["key"], "auto_approve_tools[1]");
    assert_eq!(report["notices"][0]["message"], "stripped keys: note");
}

#[test]
fn check_refuses_a_bad_pattern_naming_its_key() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.json"), r#"{"hooks": {"auto_deny_tools": ["a*b"]}}"#).unwrap();
    let output = cairn().arg("--home").arg(home.path()).args(["hooks", "check"]).output().unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("auto_deny_tools[0]"));
}

#[test]
fn run_fires_matching_hooks_and_prints_the_decision() {
    let home = tempfile::tempdir().unwrap();
    let deny = script(home.path(), "deny.sh", "echo 'no shell today' >&2\nexit 2");
    let config = json!({
        "hooks": {"auto_deny_tools": ["fs_write"]},
        "agent": {"kiro_hooks": {"preToolUse": [{"command": deny, "matcher": "execute_bash"}]}}
    });
    std::fs::write(home.path().join("config.json"), config.to_string()).unwrap();
    let blocked =
        run_json(home.path(), &["hooks", "run", "PreToolUse", "--tool", "shell", "--input", r#"{"command":"ls"}"#]);
    assert_eq!(blocked["decision"], "block");
    assert_eq!(blocked["reason"], "no shell today");
    let other = run_json(home.path(), &["hooks", "run", "preToolUse", "--tool", "fs_write"]);
    assert_eq!(other["decision"], "allow");
    assert_eq!(other["runs"], json!([]));
    assert_eq!(other["config_decision"], json!({"decision": "deny", "pattern": "fs_write"}));
    let output = cairn().arg("--home").arg(home.path()).args(["hooks", "run", "onSave"]).output().unwrap();
    assert!(!output.status.success());
}
