//! `context.max_inject_chars`: an absolute ceiling on the context any host
//! receives, whatever the model's window, shown by `cairn config show` and
//! applied by `cairn context preview` (every entry point builds context the
//! same way).

use std::path::Path;

use serde_json::Value;

use crate::settings::run;

const KEY: &str = "context.max_inject_chars";

#[track_caller]
fn ok_json(home: &Path, args: &[&str]) -> Value {
    let output = run(home, args);
    assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

/// The key's entry in `cairn config show --json`: (value, source).
fn shown(home: &Path) -> (Value, Value) {
    let show = ok_json(home, &["config", "show", "--json"]);
    let entry = show["settings"].as_array().unwrap().iter().find(|entry| entry["key"] == KEY).expect(KEY).clone();
    (entry["value"].clone(), entry["source"].clone())
}

fn preview(home: &Path, model: &str) -> Value {
    ok_json(home, &["context", "preview", "--json", "--model", model])
}

/// A home whose session context is far over 5,000 characters at any
/// window: long preferences, projects and many lessons.
fn oversized_home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let memory = home.path().join("memory");
    std::fs::create_dir_all(memory.join("history")).unwrap();
    std::fs::write(memory.join("preferences.md"), format!("# Preferences\n\n{}", "- short answers\n".repeat(300)))
        .unwrap();
    std::fs::write(memory.join("projects.md"), format!("# Projects\n\n{}", "- cairn: a Rust workspace\n".repeat(300)))
        .unwrap();
    let output = run(home.path(), &["memory", "lessons", "add", "use ripgrep", "--not", "grep -r"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    home
}

#[test]
fn the_default_ceiling_is_shown_and_bounds_every_window() {
    let home = oversized_home();
    assert_eq!(shown(home.path()), (Value::from(24_000), Value::from("default")));
    for model in ["claude-sonnet-4.5", "brand-new-model", "gemini-2.5-pro"] {
        let build = preview(home.path(), model);
        assert_eq!(build["ceiling"], 24_000, "{model}: the default is below every window's ceiling");
        assert!(build["total_chars"].as_u64().unwrap() <= 24_000, "{model}");
    }
}

#[test]
fn a_configured_ceiling_is_read_shown_and_applied() {
    let home = oversized_home();
    let output = run(home.path(), &["config", "set", KEY, "5000"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(shown(home.path()), (Value::from(5_000), Value::from("file")));

    let build = preview(home.path(), "brand-new-model");
    assert_eq!(build["ceiling"], 5_000);
    let total = build["total_chars"].as_u64().unwrap();
    assert!(total <= 5_000, "{total}");
    let text = build["text"].as_str().unwrap();
    assert!(text.starts_with("[CRITICAL RULES]"), "the preamble survives the ceiling");
    assert!(text.contains("- use ripgrep — NOT: grep -r"), "the lessons survive the ceiling");
    let notices: Vec<&str> = build["notices"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(
        text.contains("…[context truncated at its budget]") || notices.iter().any(|notice| notice.contains("ceiling")),
        "the cut is visible: {notices:?}"
    );
}

#[test]
fn an_out_of_range_ceiling_is_refused_with_exit_2_and_nothing_changes() {
    let home = oversized_home();
    let output = run(home.path(), &["config", "set", KEY, "6000"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let before = std::fs::read_to_string(home.path().join("config.json")).unwrap();
    for value in ["10", "999", "1000001", "\"lots\"", "true"] {
        let output = run(home.path(), &["config", "set", KEY, value]);
        assert_eq!(output.status.code(), Some(2), "{value}: {}", String::from_utf8_lossy(&output.stdout));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.starts_with("refused:") && stderr.contains("max_inject_chars"), "{value}: {stderr}");
        assert_eq!(std::fs::read_to_string(home.path().join("config.json")).unwrap(), before, "{value}");
    }
    assert_eq!(shown(home.path()), (Value::from(6_000), Value::from("file")));
    assert_eq!(preview(home.path(), "brand-new-model")["ceiling"], 6_000);
}
