//! `cairn import scan|apply` and `POST /api/import/scan|apply`: foreign-agent
//! import from the fixture homes of `crates/memory-core/tests/data/foreign`
//! (Claude Code, Hermes, OpenClaw layouts), through the CLI and over HTTP.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::cairn;
use crate::serve::{start, tiny_model};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../memory-core/tests/data/foreign/home");

/// A copy of the `fixture` user home in a temp dir.
fn user_home(fixture: &str, dir: &Path) -> PathBuf {
    let home = dir.join("user");
    cairn_files::copy_dir_atomic(Path::new(fixture), &home).unwrap();
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
    let home = user_home(FIXTURE, dir.path());
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
    let home = user_home(FIXTURE, dir.path());
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
    let home = user_home(FIXTURE, dir.path());
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

/// Skill folders, two instruction lines and an OpenClaw workspace kept
/// somewhere else than `~/.openclaw/workspace`.
const SKILLS_FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/data/import_skills");

/// Runs `cairn` with `HOME` at an empty directory: success, stdout, both streams.
fn run(cairn_home: &Path, empty_home: &Path, args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let mut command = cairn();
    command.arg("--home").arg(cairn_home).args(args).env("HOME", empty_home).env("CAIRN_SKIP_MODEL_DOWNLOAD", "1");
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    (output.status.success(), stdout.clone(), format!("{stdout}{}", String::from_utf8_lossy(&output.stderr)))
}

/// A temp dir holding the skills fixture, an empty `HOME` and the path of a Cairn home.
struct SkillsDirs {
    dir: tempfile::TempDir,
    fixture: PathBuf,
    empty: PathBuf,
    cairn_home: PathBuf,
}

/// Copies the skills fixture and makes the empty `HOME`; the Cairn home is left unmade.
fn skills_dirs() -> SkillsDirs {
    let dir = tempfile::tempdir().unwrap();
    let fixture = user_home(SKILLS_FIXTURE, dir.path());
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let cairn_home = dir.path().join("cairn");
    SkillsDirs { dir, fixture, empty, cairn_home }
}

fn by_path<'a>(items: &'a [Value], needle: &str) -> &'a Value {
    items.iter().find(|item| item["path"].as_str().unwrap().contains(needle)).unwrap_or_else(|| panic!("{needle}"))
}

#[test]
fn import_narrows_to_categories_and_items_and_brings_skills_into_imported() {
    let SkillsDirs { dir: _dir, fixture, empty, cairn_home } = skills_dirs();
    let claude = fixture.join("claude").display().to_string();
    let base = ["import", "scan", "--from", "claude-code", "--claude-home", &claude, "--json"];

    // A dry run of the skills only: every skill folder is listed with its id and decision.
    let (ok, out, all) = run(&cairn_home, &empty, &[&base[..], &["--only", "skills"]].concat(), &[]);
    assert!(ok, "{all}");
    let scan: Value = serde_json::from_str(out.trim()).unwrap();
    let items = scan["items"].as_array().unwrap();
    assert!(items.iter().all(|item| item["lands_as"] == "skill"), "{scan}");
    assert_eq!((&scan["counts"]["skills"], &scan["counts"]["not_selected"]), (&json!(1), &json!(2)), "{scan}");
    let deploy = by_path(items, "deploy-app");
    assert_eq!((&deploy["outcome"], &deploy["skill"]), (&json!("offered"), &json!("imported/claude-code/deploy-app")));
    let refusal = |needle: &str| {
        let item = by_path(items, needle);
        (item["outcome"].as_str().unwrap().to_owned(), item["code"].as_str().unwrap().to_owned())
    };
    assert_eq!(refusal("always-on"), ("refused".to_owned(), "skill_self_injecting".to_owned()));
    assert_eq!(refusal("sneaky"), ("refused".to_owned(), "injection".to_owned()));
    assert_eq!(refusal("no-frontmatter"), ("refused".to_owned(), "malformed_frontmatter".to_owned()));
    assert_eq!(refusal("leaky"), ("unsupported".to_owned(), "credential".to_owned()));
    let codes: Vec<&str> =
        scan["diagnostics"].as_array().unwrap().iter().map(|d| d["code"].as_str().unwrap()).collect();
    assert!(codes.contains(&"skill_name") && codes.contains(&"skill_files_not_imported"), "{codes:?}");
    assert!(!cairn_home.join("skills/imported").exists(), "a scan writes nothing");

    // The text listing shows each item's id first.
    let (ok, text, all) = run(
        &cairn_home,
        &empty,
        &["import", "scan", "--from", "claude-code", "--claude-home", &claude, "--only", "lessons"],
        &[],
    );
    assert!(
        ok && text.contains("2 lessons, 0 semantic, 0 episodic, 0 skills") && text.contains("5 not selected"),
        "{all}"
    );
    let lesson_id =
        text.lines().find(|line| line.contains("Always run the tests")).unwrap().split(' ').next().unwrap().to_owned();
    assert_eq!(lesson_id.len(), 12, "{text}");

    // Apply one skill and one lesson by id: nothing else is written.
    let id = deploy["id"].as_str().unwrap();
    let apply = [
        "import",
        "apply",
        "--from",
        "claude-code",
        "--claude-home",
        &claude,
        "--json",
        "--item",
        id,
        "--item",
        &lesson_id,
    ];
    let (ok, out, all) = run(&cairn_home, &empty, &apply, &[]);
    assert!(ok, "{all}");
    let applied: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!((&applied["counts"]["skills"], &applied["counts"]["lessons"]), (&json!(1), &json!(1)), "{applied}");
    assert_eq!(applied["counts"]["not_selected"], 5);
    let written = by_path(applied["items"].as_array().unwrap(), "deploy-app");
    assert_eq!(
        (&written["outcome"], &written["target"]),
        (&json!("written"), &json!("imported/claude-code/deploy-app"))
    );
    let skill_dir = cairn_home.join("skills/imported/claude-code/deploy-app");
    assert!(skill_dir.join("SKILL.md").is_file() && !skill_dir.join("scripts").exists(), "only SKILL.md is copied");
    let (ok, shown, all) = run(&cairn_home, &empty, &["skills", "show", "imported/claude-code/deploy-app"], &[]);
    assert!(ok && shown.contains("Watch the health check"), "{all}");
    assert!(!cairn_home.join("skills/imported/claude-code/always-on").exists());
    let (_, again, _) = run(&cairn_home, &empty, &apply, &[]);
    let again: Value = serde_json::from_str(again.trim()).unwrap();
    assert_eq!(again["counts"]["already_imported"], 2, "{again}");

    // Bad selections are refused before anything is read.
    let (ok, _, all) = run(&cairn_home, &empty, &[&base[..], &["--only", "skills,memories"]].concat(), &[]);
    assert!(!ok && all.contains("unknown category \"memories\""), "{all}");
    let (ok, _, all) = run(&cairn_home, &empty, &[&base[..], &["--item", "../etc"]].concat(), &[]);
    assert!(!ok && all.contains("not one a scan lists"), "{all}");
}

#[test]
fn the_openclaw_workspace_comes_from_the_setting_or_its_variable_validated() {
    let SkillsDirs { dir, fixture, empty, cairn_home } = skills_dirs();
    let workspace = fixture.join("openclaw-elsewhere/ws");
    let workspace_text = workspace.display().to_string();
    let scan = ["import", "scan", "--from", "openclaw", "--json"];

    // Without a setting, ~/.openclaw/workspace (absent under the empty HOME) gives nothing.
    let (ok, out, all) = run(&cairn_home, &empty, &scan, &[]);
    assert!(ok, "{all}");
    assert_eq!(serde_json::from_str::<Value>(out.trim()).unwrap()["items"], json!([]));

    // The variable OpenClaw itself uses.
    let (ok, out, all) = run(&cairn_home, &empty, &scan, &[("OPENCLAW_WORKSPACE_DIR", &workspace_text)]);
    assert!(ok, "{all}");
    let report: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!((&report["counts"]["episodic"], &report["counts"]["skills"]), (&json!(1), &json!(1)), "{report}");
    assert_eq!(report["items"][1]["skill"], "imported/openclaw/daily-report", "{report}");
    let (ok, _, all) = run(&cairn_home, &empty, &scan, &[("OPENCLAW_WORKSPACE_DIR", "relative/ws")]);
    assert!(!ok && all.contains("OPENCLAW_WORKSPACE_DIR") && all.contains("absolute"), "{all}");

    // The setting, validated when it is set and when it is used.
    let (ok, _, all) = run(&cairn_home, &empty, &["config", "set", "import.openclaw_workspace", "relative/ws"], &[]);
    assert!(!ok && all.contains("must be an absolute path"), "{all}");
    let (ok, _, all) = run(&cairn_home, &empty, &["config", "set", "import.openclaw_workspace", &workspace_text], &[]);
    assert!(ok, "{all}");
    let (ok, out, all) = run(&cairn_home, &empty, &scan, &[]);
    assert!(ok, "{all}");
    assert_eq!(serde_json::from_str::<Value>(out.trim()).unwrap()["counts"]["skills"], 1);
    // A flag still wins over the setting.
    let elsewhere = dir.path().join("other-ws");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let flagged = [&scan[..], &["--openclaw-workspace", elsewhere.to_str().unwrap()]].concat();
    let (ok, out, all) = run(&cairn_home, &empty, &flagged, &[]);
    assert!(ok, "{all}");
    assert_eq!(serde_json::from_str::<Value>(out.trim()).unwrap()["items"], json!([]));
    std::fs::remove_dir_all(&workspace).unwrap();
    let (ok, _, all) = run(&cairn_home, &empty, &scan, &[]);
    assert!(!ok && all.contains("import.openclaw_workspace") && all.contains("not a directory"), "{all}");
}

#[test]
fn serve_import_takes_a_selection_and_writes_skills_through_the_catalog() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = user_home(SKILLS_FIXTURE, dir.path());
    let gateway = start(&["--heartbeat-secs", "3600"]);
    let workspace = fixture.join("openclaw-elsewhere/ws");
    let body = json!({"from": "openclaw", "openclaw_workspace": workspace, "only": ["skills"]});
    let scan = gateway.send("POST", "/api/import/scan", &body);
    assert_eq!(scan.status, 200, "{}", scan.body);
    let items = scan.body["report"]["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{}", scan.body);
    let id = items[0]["id"].as_str().unwrap();
    let applied = gateway.send(
        "POST",
        "/api/import/apply",
        &json!({"from": "openclaw", "openclaw_workspace": workspace, "items": [id]}),
    );
    assert_eq!(applied.status, 200, "{}", applied.body);
    assert_eq!(applied.body["report"]["counts"]["skills"], 1, "{}", applied.body);
    assert_eq!(applied.body["report"]["counts"]["episodic"], 0, "the episodic entry was not selected");
    let skill = gateway.get("/api/skills/imported/openclaw/daily-report");
    assert_eq!(skill.status, 200, "{}", skill.body);
    assert!(skill.body["content"].as_str().unwrap().contains("tickets closed today"));
    for bad in [json!({"only": ["everything"]}), json!({"items": ["zzzzzzzzzzzz"]})] {
        let refused = gateway.send("POST", "/api/import/scan", &bad);
        assert_eq!((refused.status, refused.code()), (400, "invalid_selection"), "{}", refused.body);
    }
}
