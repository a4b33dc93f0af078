//! `cairn skills`.

use std::process::Output;

use serde_json::Value;

use crate::cairn;

fn run(home: &std::path::Path, args: &[&str]) -> Output {
    cairn().arg("--home").arg(home).arg("skills").args(args).output().unwrap()
}

fn ok(home: &std::path::Path, args: &[&str]) -> String {
    let output = run(home, args);
    assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn create_list_match_set_inject_show_and_delete() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("deploy.md");
    std::fs::write(&file, "---\nname: deploy\ndescription: Ship it\ntriggers: deploy\n# keep\n---\nRun make deploy.\n")
        .unwrap();
    let created: Value =
        serde_json::from_str(&ok(home.path(), &["create", "Deploy", "--file", file.to_str().unwrap()])).unwrap();
    assert_eq!(created["created"], "deploy");
    ok(home.path(), &["create", "utils/tiny url", "--description", "Shorten URLs"]);

    let rows: Value = serde_json::from_str(&ok(home.path(), &["list", "--json"])).unwrap();
    let names: Vec<&str> = rows.as_array().unwrap().iter().map(|row| row["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["deploy", "utils/tiny-url"]);
    assert_eq!(rows[0]["deliveries"], Value::Null);

    let matched: Value = serde_json::from_str(&ok(home.path(), &["match", "please deploy now"])).unwrap();
    assert_eq!(matched["bodies"][0]["name"], "deploy");
    assert_eq!(matched["bodies"][0]["body"], "Run make deploy.");

    ok(home.path(), &["set-inject", "deploy", "false"]);
    let matched: Value = serde_json::from_str(&ok(home.path(), &["match", "deploy"])).unwrap();
    assert_eq!(matched["bodies"].as_array().unwrap().len(), 0);
    assert!(matched["hint_block"].as_str().unwrap().starts_with("[Relevant skills for this message]"));
    ok(home.path(), &["set-inject", "deploy", "true"]);
    assert_eq!(
        ok(home.path(), &["show", "deploy"]),
        "---\nname: deploy\ndescription: Ship it\ntriggers: deploy\n# keep\n---\nRun make deploy.\n"
    );

    let rows: Value = serde_json::from_str(&ok(home.path(), &["list", "--json"])).unwrap();
    assert!(rows[0]["deliveries"].is_null(), "`skills match` is a preview: it records no delivery");
    let audit = std::fs::read_to_string(home.path().join("skills-audit.jsonl")).unwrap();
    assert!(audit.lines().any(|line| line.contains("set_inject_on_trigger")), "{audit}");

    let hits = ok(home.path(), &["search", "shorten"]);
    assert!(hits.contains("utils/tiny-url"), "{hits}");
    ok(home.path(), &["delete", "utils/tiny-url"]);
    assert!(!home.path().join("skills/utils/tiny-url").exists());
}

#[test]
fn refusals_exit_non_zero_with_a_reason() {
    let home = tempfile::tempdir().unwrap();
    let output = run(home.path(), &["delete", "../x"]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("invalid skill name"));
    let output = run(home.path(), &["set-inject", "ghost", "false"]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("no skill named"));
}

#[test]
fn lint_reports_and_fails_on_errors() {
    let home = tempfile::tempdir().unwrap();
    let skills = home.path().join("skills");
    std::fs::create_dir_all(skills.join("good")).unwrap();
    std::fs::write(skills.join("good/SKILL.md"), "---\nname: good\ndescription: Fine\n---\nBody\n").unwrap();
    let text = ok(home.path(), &["lint"]);
    assert!(text.contains("good: ok"), "{text}");
    std::fs::create_dir_all(skills.join("bad")).unwrap();
    std::fs::write(skills.join("bad/SKILL.md"), "no frontmatter\n").unwrap();
    let output = run(home.path(), &["lint", "--json"]);
    assert!(!output.status.success());
    let reports: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(reports[0]["findings"][0]["rule"], "frontmatter");
}
