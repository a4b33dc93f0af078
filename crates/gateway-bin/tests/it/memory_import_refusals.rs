//! `cairn memory import --json` answers every refusal, merge and
//! `--restore` alike, with one JSON object on stdout (`ok: false` and an
//! `error` with a stable code and a message) and exit status 1, and writes
//! nothing (issue 42 item 15).

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

use crate::cairn;

fn run(home: &Path, user: &Path, args: &[&str]) -> Output {
    cairn()
        .arg("--home")
        .arg(home)
        .args(args)
        .env("HOME", user)
        .env_remove("CAIRN_HOME")
        .env_remove("CAIRN_STORAGE_URL")
        .env("CAIRN_SKIP_MODEL_DOWNLOAD", "1")
        .output()
        .unwrap()
}

/// The one JSON object a refused import prints; checks exit 1 and the code.
fn refusal(home: &Path, user: &Path, file: &Path, restore: bool, code: &str) -> Value {
    let mut args = vec!["memory", "import", file.to_str().unwrap(), "--json"];
    if restore {
        args.push("--restore");
    }
    let output = run(home, user, &args);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{args:?}: {stdout} {stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{args:?}: one JSON object on stdout: {stdout:?} (stderr {stderr})");
    let value: Value =
        serde_json::from_str(lines[0]).unwrap_or_else(|error| panic!("{args:?}: not JSON ({error}): {stdout}"));
    assert_eq!(value["ok"], json!(false), "{args:?}: {value}");
    assert_eq!(value["error"]["code"], json!(code), "{args:?}: {value}");
    assert!(!value["error"]["message"].as_str().unwrap().is_empty(), "{args:?}: {value}");
    value
}

fn semantic_live(home: &Path, user: &Path) -> Value {
    let output = run(home, user, &["memory", "stats", "--json"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice::<Value>(&output.stdout).unwrap()["semantic_live"].clone()
}

fn document(semantic: Value) -> Value {
    json!({
        "format": "cairn-memory-export", "version": 2, "schema_version": 6, "exported_at": 1_767_225_600_000_i64,
        "semantic": semantic, "lessons": [], "episodic": [], "deleted": [],
        "files": {"preferences": "", "projects": "", "history": {}}
    })
}

fn fact(key: &str, value: &str, confidence: f64) -> Value {
    json!({
        "key": key, "value": value, "confidence": confidence, "source": "user_explicit",
        "updated_at": 1_767_225_600_000_i64, "created_at": 1_767_225_600_000_i64, "version": 1
    })
}

#[test]
fn every_refused_memory_import_prints_one_json_error_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let user = dir.path().join("user");
    std::fs::create_dir_all(&user).unwrap();
    let home = dir.path().join("cairn");
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    };

    let not_json = write("hello.json", "hello\n");
    let wrong_format = write("wrong.json", &json!({"format": "other", "version": 2}).to_string());
    let mut future = document(json!([]));
    future["version"] = json!(99);
    let future = write("future.json", &future.to_string());
    let missing = dir.path().join("missing.json");
    let credentials = write("user/.aws/credentials", "[default]\n");
    let spoiled = write("spoiled.json", &document(json!([fact("pref.editor", "helix", 7.0)])).to_string());

    for restore in [false, true] {
        refusal(&home, &user, &not_json, restore, "not_an_export_document");
        refusal(&home, &user, &missing, restore, "file_not_found");
        refusal(&home, &user, &credentials, restore, "sensitive_path");
        refusal(&home, &user, &future, restore, "invalid_import");
    }
    // A format that does not parse as a document at all, or one that does but names another format.
    let wrong = refusal(&home, &user, &wrong_format, false, "not_an_export_document");
    assert!(wrong["error"]["message"].as_str().unwrap().contains("wrong.json"), "{wrong}");

    // A restore refused for a row: the report and every distinct code.
    let refused = refusal(&home, &user, &spoiled, true, "restore_refused");
    assert_eq!(refused["error"]["codes"], json!(["invalid_confidence"]), "{refused}");
    assert_eq!(refused["rejected"][0]["code"], json!("invalid_confidence"), "{refused}");
    assert_eq!(semantic_live(&home, &user), json!(0), "nothing was written");

    // A restore into a home that already holds memory.
    let output = run(&home, &user, &["memory", "semantic", "set", "pref.a", "b"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let good = write("good.json", &document(json!([fact("pref.editor", "helix", 1.0)])).to_string());
    refusal(&home, &user, &good, true, "restore_target_not_empty");
    assert_eq!(semantic_live(&home, &user), json!(1), "the refused restore wrote nothing");

    // Accepted imports keep their report unchanged (no `error`).
    let output = run(&home, &user, &["memory", "import", good.to_str().unwrap(), "--json"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!((&report["semantic_written"], &report["error"]), (&json!(1), &Value::Null), "{report}");
}
