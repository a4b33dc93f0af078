//! `cairn context preview`: the assembled context of a home and its breakdown.

use std::path::Path;

use serde_json::{Value, json};

use crate::cairn;

fn run(home: &Path, args: &[&str]) -> (bool, String, String) {
    let output = cairn().arg("--home").arg(home).args(args).output().unwrap();
    (output.status.success(), String::from_utf8(output.stdout).unwrap(), String::from_utf8(output.stderr).unwrap())
}

fn preview_json(home: &Path, args: &[&str]) -> Value {
    let mut all = vec!["context", "preview", "--json"];
    all.extend_from_slice(args);
    let (ok, stdout, stderr) = run(home, &all);
    assert!(ok, "{stderr}");
    serde_json::from_str(stdout.trim()).unwrap()
}

fn section<'a>(build: &'a Value, name: &str) -> Option<&'a Value> {
    build["sections"].as_array().unwrap().iter().find(|section| section["name"] == name)
}

fn fixture_home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let path = home.path();
    for args in [
        vec!["memory", "semantic", "set", "pref.editor", "helix"],
        vec!["memory", "lessons", "add", "use ripgrep", "--not", "grep -r", "--category", "tool"],
    ] {
        let (ok, _, stderr) = run(path, &args);
        assert!(ok, "{args:?}: {stderr}");
    }
    std::fs::create_dir_all(path.join("memory/history")).unwrap();
    std::fs::write(path.join("memory/preferences.md"), "# Preferences\n\n- short answers\n").unwrap();
    let skill = path.join("skills/deploy");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: deploy\ndescription: Ship a release\ntriggers: deploy, release\n---\nRun make deploy.\n",
    )
    .unwrap();
    // The absolute ceiling (context_ceiling.rs) is raised above every window's
    // ceiling here, so these previews show the window scaling alone.
    let config = json!({
        "hooks": {"context_rules": {"deploy": "Deploys happen on Tuesdays."}, "auto_replies": {"^ping$": "pong"}},
        "context": {"max_inject_chars": 1_000_000}
    });
    std::fs::write(path.join("config.json"), config.to_string()).unwrap();
    home
}

#[test]
fn session_preview_scales_to_the_model_and_accounts_for_every_character() {
    let home = fixture_home();
    let build = preview_json(home.path(), &["--model", "claude-sonnet-4.5", "--query", "editor"]);
    assert_eq!(build["model_window"], 200_000);
    assert_eq!(build["caps"]["lessons"], 7_458);
    assert_eq!(build["ceiling"], 33_000);
    let text = build["text"].as_str().unwrap();
    assert!(text.starts_with("[CRITICAL RULES]"));
    assert!(text.contains("[Semantic Memory]\npref.editor: helix"));
    assert!(text.contains("- use ripgrep — NOT: grep -r"));
    assert!(text.contains("[Preferences] (source: memory/preferences.md)\n# Preferences"));
    assert!(text.contains("- deploy: Ship a release"));
    let sum: u64 = build["sections"].as_array().unwrap().iter().map(|section| section["chars"].as_u64().unwrap()).sum();
    assert_eq!(sum, build["total_chars"].as_u64().unwrap());
    assert_eq!(section(&build, "lessons").unwrap()["cap"], 7_458);

    // An unknown model never shrinks the budget.
    let build = preview_json(home.path(), &["--model", "brand-new-model"]);
    assert_eq!(build["model_window"], Value::Null);
    assert_eq!(build["caps"]["lessons"], 37_290);
    assert_eq!(build["ceiling"], 165_000);
}

#[test]
fn message_preview_shows_triggered_skills_context_rules_and_auto_replies() {
    let home = fixture_home();
    let build = preview_json(home.path(), &["--message", "--query", "please deploy the fix"]);
    let text = build["text"].as_str().unwrap();
    assert!(text.contains("[Context rules]\n- Deploys happen on Tuesdays."));
    assert!(text.contains("[Skill: deploy — "));
    assert!(text.contains("[OPTIONS]"));
    assert!(text.ends_with("please deploy the fix"));
    assert!(section(&build, "triggered_skills").is_some());

    let build = preview_json(home.path(), &["--message", "--query", "ping"]);
    assert_eq!(build["auto_reply"], json!({"pattern": "^ping$", "reply": "pong"}));
    assert_eq!(build["text"], "");
}

#[test]
fn text_preview_prints_the_breakdown_and_includes_the_agent() {
    let home = fixture_home();
    let agents = home.path().join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(agents.join("reviewer.json"), r#"{"name": "reviewer", "prompt": "Review diffs carefully."}"#)
        .unwrap();
    let agents_dir = agents.to_str().unwrap();
    let (ok, stdout, stderr) =
        run(home.path(), &["context", "preview", "--agent", "reviewer", "--agents-dir", agents_dir]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("Review diffs carefully."));
    assert!(stdout.contains("agent: reviewer"));
    let breakdown = stdout.split_once("--- breakdown: reference window (1,000,000 tokens)\n").unwrap().1;
    assert!(breakdown.starts_with("section"));
    assert!(breakdown.contains("agent_prompt"));
    assert!(breakdown.contains("lessons "));
    assert!(breakdown.contains("total "));

    let (ok, _, stderr) = run(home.path(), &["context", "preview", "--agent", "nobody", "--agents-dir", agents_dir]);
    assert!(!ok);
    assert!(stderr.contains("nobody"), "{stderr}");
}

#[test]
fn a_broken_config_is_a_clear_error() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.json"), "{not json").unwrap();
    let (ok, _, stderr) = run(home.path(), &["context", "preview"]);
    assert!(!ok);
    assert!(stderr.contains("config.json"), "{stderr}");
}
