//! `cairn import scan|apply` and `POST /api/import/scan|apply`: foreign-agent
//! import from the fixture homes of `crates/memory-core/tests/data/foreign`
//! (Claude Code, Hermes, OpenClaw layouts), through the CLI and over HTTP.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::cairn;
use crate::serve::{start, tiny_model};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../memory-core/tests/data/foreign/home");

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A copy of the fixture user home in a temp dir.
fn user_home(dir: &Path) -> PathBuf {
    let home = dir.join("user");
    copy_tree(Path::new(FIXTURE), &home);
    home
}

fn source_flags(home: &Path) -> Vec<String> {
    vec![
        "--claude-home".into(),
        home.join(".claude").display().to_string(),
        "--hermes-home".into(),
        home.join(".hermes").display().to_string(),
        "--openclaw-workspace".into(),
        home.join(".openclaw/workspace").display().to_string(),
        "--project".into(),
        home.join("src/shop").display().to_string(),
    ]
}

fn run_json(cairn_home: &Path, args: &[String], env: &[(&str, &str)]) -> Value {
    let mut command = cairn();
    command.arg("--home").arg(cairn_home).args(args).env("CAIRN_SKIP_MODEL_DOWNLOAD", "1");
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("not JSON ({error}): {}", String::from_utf8_lossy(&output.stdout)))
}

fn args(words: &[&str], home: &Path) -> Vec<String> {
    let mut args: Vec<String> = words.iter().map(|word| (*word).to_owned()).collect();
    args.extend(source_flags(home));
    args
}

#[test]
fn import_scan_is_a_dry_run_and_apply_writes_once_then_embeds() {
    let dir = tempfile::tempdir().unwrap();
    let home = user_home(dir.path());
    let cairn_home = dir.path().join("cairn");
    let model = tiny_model(dir.path());
    let env = [("CAIRN_EMBED_MODEL_PATH", model.to_str().unwrap())];

    let scan = run_json(&cairn_home, &args(&["import", "scan", "--json"], &home), &env);
    assert_eq!(scan["dry_run"], true);
    let counts = &scan["counts"];
    assert_eq!((&counts["lessons"], &counts["semantic"], &counts["episodic"]), (&json!(13), &json!(5), &json!(14)));
    let stats = run_json(&cairn_home, &["memory".into(), "stats".into(), "--json".into()], &env);
    assert_eq!(stats["episodic_live"], 0, "a scan writes nothing: {stats}");

    let applied = run_json(&cairn_home, &args(&["import", "apply", "--json"], &home), &env);
    let counts = &applied["counts"];
    assert_eq!(applied["dry_run"], false);
    assert_eq!((&counts["lessons"], &counts["semantic"], &counts["episodic"]), (&json!(13), &json!(4), &json!(12)));
    assert_eq!(counts["exists"], 3, "two repeats of the staging note, one of user.name: {counts}");
    let backfill = &applied["timing"]["backfill"];
    assert_eq!((&backfill["embedded"], &backfill["remaining"]), (&json!(12), &json!(0)), "{backfill}");
    let items = applied["items"].as_array().unwrap();
    let credential = items.iter().find(|item| item["code"] == "credential").unwrap();
    assert!(!credential["preview"].as_str().unwrap().contains("ghp_"), "{credential}");
    assert!(applied["diagnostics"].as_array().unwrap().iter().any(|d| d["code"] == "unsupported_store"));

    let again = run_json(&cairn_home, &args(&["import", "apply", "--json"], &home), &env);
    let counts = &again["counts"];
    assert_eq!(
        (&counts["lessons"], &counts["semantic"], &counts["episodic"], &counts["exists"]),
        (&json!(0), &json!(0), &json!(0), &json!(0))
    );
    assert_eq!(again["timing"]["backfill"], Value::Null, "nothing new to embed");

    // One source only.
    let hermes = run_json(&cairn_home, &args(&["import", "scan", "--from", "hermes", "--json"], &home), &env);
    assert_eq!(hermes["sources"], json!(["hermes"]));
}

#[test]
fn import_refuses_unknown_sources_and_missing_directories() {
    let dir = tempfile::tempdir().unwrap();
    let output = cairn().arg("--home").arg(dir.path()).args(["import", "scan", "--from", "claude"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2), "clap refuses an unknown source");
    let output = cairn()
        .arg("--home")
        .arg(dir.path())
        .args(["import", "scan", "--hermes-home"])
        .arg(dir.path().join("missing"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("--hermes-home"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn import_text_report_names_every_entry() {
    let dir = tempfile::tempdir().unwrap();
    let home = user_home(dir.path());
    let output = cairn()
        .arg("--home")
        .arg(dir.path().join("cairn"))
        .args(args(&["import", "scan", "--from", "openclaw"], &home))
        .output()
        .unwrap();
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.starts_with("would import 3 lessons, 2 semantic, 6 episodic"), "{text}");
    assert!(text.contains("unsupported"), "{text}");
    assert!(text.contains("note persona"), "{text}");
}

#[test]
fn serve_import_scans_applies_once_and_backfills_off_the_request() {
    let dir = tempfile::tempdir().unwrap();
    let home = user_home(dir.path());
    let model = tiny_model(dir.path());
    let gateway = start(&["--model-path", model.to_str().unwrap(), "--heartbeat-secs", "3600"]);
    gateway.wait_for("/api/memory/embedding-status", "the model to load", |body| body["setup_step"] == "done");
    let body = json!({
        "from": "all",
        "claude_home": home.join(".claude"),
        "hermes_home": home.join(".hermes"),
        "openclaw_workspace": home.join(".openclaw/workspace"),
        "projects": [home.join("src/shop")],
    });

    let scan = gateway.send("POST", "/api/import/scan", &body);
    assert_eq!(scan.status, 200, "{}", scan.body);
    assert_eq!(scan.body["report"]["dry_run"], true);
    assert_eq!(gateway.get("/api/memory/stats").body["stats"]["episodic_live"], 0);

    let applied = gateway.send("POST", "/api/import/apply", &body);
    assert_eq!(applied.status, 200, "{}", applied.body);
    assert_eq!(applied.body["report"]["counts"]["episodic"], 12, "{}", applied.body);
    assert_eq!(applied.body["backfill"]["scheduled"], true);
    let status = gateway.wait_for("/api/import/status", "the backfill", |body| body["backfill"]["state"] == "done");
    assert_eq!(status["backfill"]["embedded"], 12, "{status}");

    let again = gateway.send("POST", "/api/import/apply", &body);
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(again.body["report"]["counts"]["episodic"], 0);
    assert_eq!(again.body["backfill"]["scheduled"], false);

    let bad = gateway.send("POST", "/api/import/scan", &json!({"from": "claude"}));
    assert_eq!((bad.status, bad.code()), (400, "invalid_source"), "{}", bad.body);
    let relative = gateway.send("POST", "/api/import/scan", &json!({"hermes_home": "relative/dir"}));
    assert_eq!((relative.status, relative.code()), (400, "invalid_path"), "{}", relative.body);
    let unknown = gateway.send("POST", "/api/import/scan", &json!({"sources": ["hermes"]}));
    assert_eq!(unknown.status, 422, "{}", unknown.body);
}
