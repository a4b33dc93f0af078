//! Issue 44's review and undo through the real binary: with
//! `memory.write_approval` a consolidation run is a pending changeset that
//! changes nothing until approved (whole or row by row, through the CLI,
//! MCP and HTTP), rejecting leaves the store as it was, every review rule
//! has its refusal, and reverting the last run restores `memory export`
//! byte for byte apart from `exported_at`.

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

use crate::cairn;
use crate::mcp::{connect, ok};
use crate::serve::start_in;
use crate::support::scripted_llm;

/// The recorded session, numbered from 0 as the prompt numbers it.
const TRANSCRIPT: &[(&str, &str)] = &[
    ("user", "I prefer tabs over spaces and my editor is helix."),
    ("assistant", "Noted: tabs, helix."),
    ("user", "Deploys go out on Tuesdays after the standup."),
    ("assistant", "Okay, Tuesday deploys."),
    ("user", "Reviews happen in the mornings."),
];

fn run(home: &Path, args: &[&str]) -> Output {
    cairn().arg("--home").arg(home).args(args).env("CAIRN_SKIP_MODEL_DOWNLOAD", "1").output().unwrap()
}

fn cli(home: &Path, args: &[&str]) -> String {
    let output = run(home, args);
    assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

fn cli_json(home: &Path, args: &[&str]) -> Value {
    let stdout = cli(home, args);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|_| panic!("{args:?} printed {stdout:?}"))
}

/// A command a rule refuses: exit 2 and the rule's code.
fn refused(home: &Path, args: &[&str]) -> String {
    let output = run(home, args);
    assert_eq!(output.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(answer["outcome"], "rejected", "{answer}");
    answer["code"].as_str().unwrap().to_owned()
}

/// `cairn memory export` as printed, with its `exported_at` value blanked.
fn export(home: &Path) -> String {
    let text = cli(home, &["memory", "export"]);
    let start = text.find("\"exported_at\"").expect("an export names its time");
    let value_start = start + text[start..].find(':').unwrap() + 1;
    let value_end = value_start + text[value_start..].find([',', '\n', '}']).unwrap();
    format!("{}0{}", &text[..value_start], &text[value_end..])
}

fn write_transcript(home: &Path) -> std::path::PathBuf {
    let transcript = home.join("chat.jsonl");
    let lines: Vec<String> =
        TRANSCRIPT.iter().map(|(role, content)| json!({"role": role, "content": content}).to_string()).collect();
    std::fs::write(&transcript, lines.join("\n")).unwrap();
    transcript
}

fn fact(key: &str, value: &str, from: u64, quote: &str) -> Value {
    json!({"key": key, "value": value, "confidence": 0.9, "evidence": {"from": from, "to": from, "quote": quote}})
}

/// The replies of one run: three facts; a history entry, a lesson and an episode.
pub(crate) fn replies(editor: &str) -> Vec<String> {
    vec![
        json!({"semantic": [
            fact("pref.indentation", "tabs", 0, "I prefer tabs over spaces"),
            fact("pref.editor", editor, 0, "my editor is helix"),
            fact("project.deploy_day", "tuesday", 2, "Deploys go out on Tuesdays"),
        ], "preferences_update": "# Preferences\n\n- tabs, helix\n"})
        .to_string(),
        json!({
            "history": "Agreed on Tuesday deploys.",
            "episodic": [{"text": "The team deploys on Tuesdays after the standup.", "evidence": {"from": 2, "to": 3, "quote": "Tuesdays after the standup"}}],
            "lessons": [{"rule": "Review code in the mornings", "category": "preference", "evidence": {"from": 4, "to": 4, "quote": "Reviews happen in the mornings"}}]
        })
        .to_string(),
    ]
}

/// `cairn memory consolidate --json` of [`TRANSCRIPT`] as a new session
/// (so its messages are numbered from 0), the model playing `replies`.
pub(crate) fn consolidate_with(home: &Path, replies: Vec<String>) -> Value {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static SESSION: AtomicUsize = AtomicUsize::new(0);
    let session = format!("chat-{}", SESSION.fetch_add(1, Ordering::SeqCst));
    let transcript = write_transcript(home);
    let (url, _prompts, server) = scripted_llm(replies);
    let output = cairn()
        .arg("--home")
        .arg(home)
        .args(["memory", "consolidate", "--session", &session, "--transcript"])
        .arg(&transcript)
        .args(["--llm-base-url", &url, "--llm-model", "scripted", "--json"])
        .env_remove("CAIRN_LLM_API_KEY")
        .output()
        .unwrap();
    server.join().unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(output.status.success(), "{stdout} {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_str(stdout.trim()).unwrap()
}

fn keys(home: &Path) -> Vec<String> {
    let listed = cli_json(home, &["memory", "semantic", "list", "--json"]);
    let mut keys: Vec<String> =
        listed.as_array().unwrap().iter().filter_map(|entry| entry["key"].as_str().map(str::to_owned)).collect();
    keys.sort();
    keys
}

#[test]
fn under_write_approval_a_run_waits_for_review_and_each_rule_refuses() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    std::fs::write(home.join("config.json"), r#"{"memory": {"write_approval": true}}"#).unwrap();
    let shown = cli(home, &["config", "show"]);
    assert!(shown.lines().any(|line| line.contains("memory.write_approval") && line.contains("true")), "{shown}");
    cli(home, &["memory", "semantic", "set", "pref.editor", "vim"]);
    let before = export(home);

    let report = consolidate_with(home, replies("helix"));
    assert_eq!(export(home), before, "nothing changes before approval: {report}");
    let facts = report["preferences"]["changeset"].as_i64().expect("a changeset");
    let history = report["history"]["changeset"].as_i64().expect("a changeset");
    assert_eq!((&report["preferences"]["pending"], &report["preferences"]["semantic_written"]), (&json!(4), &json!(0)));
    assert_eq!(report["history"]["pending"], json!(3), "{report}");

    let pending = cli_json(home, &["memory", "pending", "list", "--json"]);
    assert_eq!(pending.as_array().unwrap().len(), 2, "{pending}");
    let shown = cli_json(home, &["memory", "pending", "show", &facts.to_string(), "--json"]);
    let rows: Vec<(String, String, String)> = shown["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            (
                row["write"]["kind"].as_str().unwrap().to_owned(),
                row["ladder"].as_str().unwrap().to_owned(),
                row["screen"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let row = |kind: &str, ladder: &str| (kind.to_owned(), ladder.to_owned(), "passed".to_owned());
    assert_eq!(
        rows,
        [
            row("fact", "add"),
            row("fact", "skip:protected_user_explicit"),
            row("fact", "add"),
            row("preferences", "replace")
        ]
    );
    assert_eq!(shown["rows"][0]["write"]["evidence"]["quote"], "I prefer tabs over spaces", "{shown}");
    let plain = cli(home, &["memory", "pending", "show", &facts.to_string()]);
    assert!(plain.contains("messages 0..=0: \"I prefer tabs over spaces\""), "{plain}");

    // Every review rule has its refusal.
    assert_eq!(refused(home, &["memory", "pending", "show", "999", "--json"]), "unknown_changeset");
    assert_eq!(refused(home, &["memory", "pending", "approve", "999", "--json"]), "unknown_changeset");
    assert_eq!(refused(home, &["memory", "pending", "reject", "999", "--json"]), "unknown_changeset");
    let id = facts.to_string();
    for row in ["0", "5"] {
        assert_eq!(refused(home, &["memory", "pending", "approve", &id, "--row", row, "--json"]), "row_out_of_range");
    }
    assert_eq!(export(home), before, "a refused approval writes nothing");

    // Approving one row writes that row only.
    let approved = cli_json(home, &["memory", "pending", "approve", &id, "--row", "1", "--json"]);
    assert_eq!(approved["rows"][0]["outcome"], "created", "{approved}");
    assert_eq!(approved["state"], "pending");
    assert!(keys(home).contains(&"pref.indentation".to_owned()));
    assert!(!keys(home).iter().any(|key| key.starts_with("project.deploy_day")), "{:?}", keys(home));
    let entry = cli_json(home, &["memory", "semantic", "get", "pref.indentation", "--json"]);
    assert_eq!(entry["evidence"]["quote"], "I prefer tabs over spaces", "{entry}");
    assert_eq!(refused(home, &["memory", "pending", "approve", &id, "--row", "1", "--json"]), "row_decided");
    let after_row = export(home);
    let mut expected: Value = serde_json::from_str(&before).unwrap();
    let mut got: Value = serde_json::from_str(&after_row).unwrap();
    let added: Vec<Value> =
        got["semantic"].as_array().unwrap().iter().filter(|row| row["key"] == "pref.indentation").cloned().collect();
    assert_eq!(added.len(), 1);
    got["semantic"].as_array_mut().unwrap().retain(|row| row["key"] != "pref.indentation");
    expected["exported_at"] = json!(0);
    got["exported_at"] = json!(0);
    assert_eq!(got, expected, "approving row 1 wrote that row and nothing else");

    // Rejecting the rest, and the whole history changeset, leaves the store as it was.
    let closed = cli_json(home, &["memory", "pending", "reject", &id, "--json"]);
    assert_eq!(closed["state"], "applied", "{closed}");
    assert_eq!(refused(home, &["memory", "pending", "approve", &id, "--json"]), "changeset_closed");
    let rejected = cli_json(home, &["memory", "pending", "reject", &history.to_string(), "--json"]);
    assert_eq!(rejected["state"], "rejected", "{rejected}");
    assert_eq!(export(home), after_row, "rejecting writes nothing");
    assert_eq!(cli_json(home, &["memory", "pending", "list", "--json"]), json!([]));

    // A changeset past skills.pending_ttl_days expires, like a pending skill, and cannot be approved.
    let report = consolidate_with(home, replies("helix"));
    let stale = report["preferences"]["changeset"].as_i64().unwrap();
    let db = rusqlite::Connection::open(home.join("memory.db")).unwrap();
    db.execute("UPDATE consolidation_runs SET created_at = created_at - 31 * 86400000 WHERE id = ?1", [stale]).unwrap();
    drop(db);
    let stale = stale.to_string();
    assert_eq!(refused(home, &["memory", "pending", "approve", &stale, "--json"]), "changeset_expired");
    assert_eq!(cli_json(home, &["memory", "pending", "show", &stale, "--json"])["state"], "expired");

    // MCP: the same review.
    let report = consolidate_with(home, replies("helix"));
    let fresh = report["preferences"]["changeset"].as_i64().unwrap();
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
        let client = connect(home).await;
        let listed = ok(&client, "memory_pending_list", json!({})).await;
        let ids: Vec<i64> =
            listed["pending"].as_array().unwrap().iter().map(|run| run["id"].as_i64().unwrap()).collect();
        assert!(ids.contains(&fresh), "{listed}");
        let shown = ok(&client, "memory_pending_show", json!({"id": fresh})).await;
        assert_eq!(shown["rows"][2]["write"]["key"], "project.deploy_day", "{shown}");
        let (code, _) = crate::mcp::refused(&client, "memory_pending_approve", json!({"id": fresh, "rows": [9]})).await;
        assert_eq!(code, "row_out_of_range");
        let approved = ok(&client, "memory_pending_approve", json!({"id": fresh, "rows": [3]})).await;
        assert_eq!(approved["rows"][2]["status"], "approved", "{approved}");
        let rejected = ok(&client, "memory_pending_reject", json!({"id": fresh})).await;
        assert_eq!(rejected["state"], "applied", "{rejected}");
        let (code, _) = crate::mcp::refused(&client, "memory_pending_approve", json!({"id": 999})).await;
        assert_eq!(code, "unknown_changeset");
        client.cancel().await.unwrap();
    });
    assert!(keys(home).iter().any(|key| key.starts_with("project.deploy_day")), "{:?}", keys(home));
}

#[test]
fn a_bad_write_approval_value_is_refused_with_its_key() {
    let home = tempfile::tempdir().unwrap();
    for value in ["\"yes\"", "1", "null"] {
        std::fs::write(home.path().join("config.json"), format!(r#"{{"memory": {{"write_approval": {value}}}}}"#))
            .unwrap();
        let output = run(home.path(), &["config", "show"]);
        if value == "null" {
            // An explicit null is the default, like every other key.
            assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
            continue;
        }
        assert!(!output.status.success(), "{value} is not a bool");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("`memory.write_approval`"), "{stderr}");
    }
    // `config set` refuses a bad value and leaves the file as it was.
    std::fs::write(home.path().join("config.json"), "{}").unwrap();
    let output = run(home.path(), &["config", "set", "memory.write_approval", "maybe"]);
    assert_eq!(output.status.code(), Some(2), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(String::from_utf8_lossy(&output.stderr).contains("`memory.write_approval` must be true or false"));
    assert_eq!(std::fs::read_to_string(home.path().join("config.json")).unwrap(), "{}");
    cli(home.path(), &["config", "set", "memory.write_approval", "true"]);
    let shown = cli(home.path(), &["config", "show"]);
    assert!(shown.contains("memory.write_approval") && shown.contains("= true  (file)"), "{shown}");
}

#[test]
fn reverting_the_last_run_restores_the_export_byte_for_byte() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    // A first run writes the facts; the second updates one of them and adds more.
    consolidate_with(home, replies("helix"));
    cli(home, &["memory", "files", "append", "A note between the runs."]);
    let before = export(home);
    let mut second = replies("kakoune");
    second[0] = json!({"semantic": [
        fact("pref.editor", "kakoune", 0, "my editor is helix"),
        fact("pref.reviews", "mornings", 4, "Reviews happen in the mornings"),
    ], "preferences_update": "# Preferences\n\n- kakoune\n"})
    .to_string();
    second[1] = json!({
        "history": "A second summary.",
        "episodic": [{"text": "Reviews happen every morning before the standup.", "evidence": {"from": 4, "to": 4, "quote": "Reviews happen in the mornings"}}],
        "lessons": [{"rule": "Deploy on Tuesdays only", "category": "knowledge", "evidence": {"from": 2, "to": 2, "quote": "Deploys go out on Tuesdays"}}]
    })
    .to_string();
    let report = consolidate_with(home, second);
    assert_eq!(report["preferences"]["semantic_written"], json!(2), "{report}");
    assert!(report["history"]["history_appended"].as_bool().unwrap(), "{report}");
    assert_ne!(export(home), before);

    let runs = cli_json(home, &["memory", "runs", "list", "--json"]);
    assert_eq!(runs.as_array().unwrap().len(), 4, "two runs of two paths: {runs}");
    assert_eq!(refused(home, &["memory", "runs", "revert", "--runs", "0", "--json"]), "nothing_to_revert");
    let reverted = cli_json(home, &["memory", "runs", "revert", "--runs", "2", "--json"]);
    assert_eq!(reverted["runs"].as_array().unwrap().len(), 2, "{reverted}");
    assert_eq!(export(home), before, "the export is byte for byte what it was");

    // A run whose row moved on since is not reverted, and nothing changes.
    cli(home, &["memory", "semantic", "set", "pref.indentation", "spaces"]);
    let held = export(home);
    assert_eq!(refused(home, &["memory", "runs", "revert", "--json"]), "changed_since");
    assert_eq!(export(home), held);
}

#[test]
fn the_http_routes_review_and_revert() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.json"), r#"{"memory": {"write_approval": true}}"#).unwrap();
    let report = consolidate_with(home.path(), replies("helix"));
    let id = report["preferences"]["changeset"].as_i64().unwrap();
    let gateway = start_in(home, &["--heartbeat-secs", "3600"], &[]);
    let pending = gateway.get("/api/memory/pending").body;
    assert_eq!(pending["pending"].as_array().unwrap().len(), 2, "{pending}");
    assert_eq!(gateway.get(&format!("/api/memory/pending/{id}")).body["rows"][0]["ladder"], "add");
    let missing = gateway.get("/api/memory/pending/999");
    assert_eq!((missing.status, &missing.body["code"]), (404, &json!("unknown_changeset")), "{}", missing.body);
    let out_of_range = gateway.send("POST", &format!("/api/memory/pending/{id}/approve?rows=9"), &json!({}));
    assert_eq!((out_of_range.status, &out_of_range.body["code"]), (422, &json!("row_out_of_range")));
    let bad = gateway.send("POST", &format!("/api/memory/pending/{id}/approve?rows=two"), &json!({}));
    assert_eq!((bad.status, &bad.body["code"]), (400, &json!("invalid_rows")));
    let approved = gateway.send("POST", &format!("/api/memory/pending/{id}/approve?rows=1,3"), &json!({}));
    assert_eq!(approved.status, 200, "{}", approved.body);
    assert_eq!(approved.body["rows"][0]["outcome"], "created");
    let rejected = gateway.send("POST", &format!("/api/memory/pending/{id}/reject"), &json!({}));
    assert_eq!(rejected.body["state"], "applied", "{}", rejected.body);
    let runs = gateway.get("/api/memory/runs").body;
    assert!(runs["runs"].as_array().unwrap().iter().any(|run| run["id"] == id), "{runs}");
    let reverted = gateway.send("POST", "/api/memory/runs/revert?runs=1", &json!({}));
    assert_eq!(reverted.status, 200, "{}", reverted.body);
    assert_eq!(reverted.body["runs"], json!([id]));
    let entries = gateway.get("/api/memory/semantic?all_projects=true").body;
    assert_eq!(entries["entries"], json!([]), "the approved rows were reverted");
    let nothing = gateway.send("POST", "/api/memory/runs/revert?runs=1", &json!({}));
    assert_eq!((nothing.status, &nothing.body["code"]), (422, &json!("nothing_to_revert")));
}
