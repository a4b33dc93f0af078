//! `cairn memory migrate|export|import` through the binary.

use std::path::Path;

use serde_json::{Value, json};

use crate::cairn;

fn run(home: &Path, args: &[&str]) -> (i32, String) {
    let output = cairn().arg("--home").arg(home).arg("memory").args(args).output().unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(output.status.code().is_some(), "{args:?} was killed: {}", String::from_utf8_lossy(&output.stderr));
    (output.status.code().unwrap(), stdout)
}

fn json_of(home: &Path, args: &[&str]) -> (i32, Value) {
    let (code, stdout) = run(home, args);
    (code, serde_json::from_str(stdout.trim()).unwrap_or_else(|error| panic!("{args:?}: {error}: {stdout:?}")))
}

#[test]
fn migrate_export_import_round_trip() {
    let legacy = tempfile::tempdir().unwrap();
    let memory = legacy.path().join("workspace/memory");
    std::fs::create_dir_all(memory.join("history")).unwrap();
    std::fs::write(memory.join("preferences.md"), "- editor: helix\n- theme: dark\n").unwrap();
    std::fs::write(memory.join("history/2026-01-02.md"), "\n#### 09:15\nSet up the Cairn repository today.\n").unwrap();
    std::fs::write(
        legacy.path().join("lessons.jsonl"),
        "{\"rule\": \"Run cargo fmt before committing\", \"category\": \"tool\"}\n",
    )
    .unwrap();

    let home = tempfile::tempdir().unwrap();
    let from = legacy.path().to_str().unwrap();
    let (code, report) = json_of(home.path(), &["migrate", "--from", from, "--json"]);
    assert_eq!(code, 0);
    assert_eq!(
        (&report["semantic_written"], &report["episodic_written"], &report["lessons_written"]),
        (&json!(2), &json!(1), &json!(1))
    );
    let (_, again) = json_of(home.path(), &["migrate", "--from", from, "--json"]);
    assert_eq!(again["already_migrated"], json!(true));

    let export = home.path().join("export.json");
    let (code, _) = run(home.path(), &["export", export.to_str().unwrap()]);
    assert_eq!(code, 0);
    let document: Value = serde_json::from_str(&std::fs::read_to_string(&export).unwrap()).unwrap();
    assert_eq!(document["format"], json!("cairn-memory-export"));

    let target = tempfile::tempdir().unwrap();
    let (code, dry) = json_of(target.path(), &["import", export.to_str().unwrap(), "--dry-run", "--json"]);
    assert_eq!((code, &dry["dry_run"], &dry["semantic_written"]), (0, &json!(true), &json!(2)));
    let (_, stats) = json_of(target.path(), &["stats", "--json"]);
    assert_eq!(stats["semantic_live"], json!(0));

    let (code, report) = json_of(target.path(), &["import", export.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0);
    assert_eq!((&report["semantic_written"], &report["lessons_written"]), (&json!(2), &json!(1)));
    let (_, source_stats) = json_of(home.path(), &["stats", "--json"]);
    let (_, target_stats) = json_of(target.path(), &["stats", "--json"]);
    for field in ["semantic_live", "lessons", "episodic_live"] {
        assert_eq!(source_stats[field], target_stats[field], "{field}");
    }
    let (_, again) = json_of(target.path(), &["import", export.to_str().unwrap(), "--json"]);
    assert_eq!(again["semantic_written"], json!(0));

    // Not an export document: exit 1.
    std::fs::write(home.path().join("bogus.json"), "{\"hello\": 1}").unwrap();
    let (code, _) = run(target.path(), &["import", home.path().join("bogus.json").to_str().unwrap()]);
    assert_eq!(code, 1);
}

#[test]
fn import_restore_keeps_every_row_as_exported_or_writes_nothing() {
    let home = tempfile::tempdir().unwrap();
    for args in [
        ["semantic", "set", "pref.editor", "helix", "--source", "consolidation", "--confidence", "0.85"].as_slice(),
        &["semantic", "set", "pref.theme", "dark"],
        &["semantic", "delete", "pref.theme"],
    ] {
        let (code, stdout) = run(home.path(), args);
        assert_eq!(code, 0, "{args:?}: {stdout}");
    }
    let export = home.path().join("export.json");
    assert_eq!(run(home.path(), &["export", export.to_str().unwrap()]).0, 0);

    // A document with one row that breaks a rule: exit 1, every refusal listed, nothing written.
    let mut spoiled: Value = serde_json::from_str(&std::fs::read_to_string(&export).unwrap()).unwrap();
    spoiled["semantic"][0]["confidence"] = json!(7.0);
    let spoiled_path = home.path().join("spoiled.json");
    std::fs::write(&spoiled_path, spoiled.to_string()).unwrap();
    let target = tempfile::tempdir().unwrap();
    let (code, stdout) = run(target.path(), &["import", spoiled_path.to_str().unwrap(), "--restore"]);
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("refused semantic pref.editor (invalid_confidence)"), "{stdout}");
    let (_, stats) = json_of(target.path(), &["stats", "--json"]);
    assert_eq!((&stats["semantic_live"], &stats["semantic_deleted"]), (&json!(0), &json!(0)), "{stats}");

    let (code, report) = json_of(target.path(), &["import", export.to_str().unwrap(), "--restore", "--json"]);
    assert_eq!(code, 0, "{report}");
    assert_eq!((&report["semantic_written"], &report["deleted_written"]), (&json!(1), &json!(1)), "{report}");
    let (_, entry) = json_of(target.path(), &["semantic", "get", "pref.editor", "--json"]);
    assert_eq!((&entry["source"], &entry["confidence"]), (&json!("consolidation"), &json!(0.85)), "{entry}");
    let again = home.path().join("again.json");
    assert_eq!(run(target.path(), &["export", again.to_str().unwrap()]).0, 0);
    let rows = |path: &Path| {
        let mut document: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        document.as_object_mut().unwrap().remove("exported_at");
        document
    };
    assert_eq!(rows(&again), rows(&export));
}
