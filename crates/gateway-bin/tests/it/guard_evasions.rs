//! The guard corpus's disguised injections through the CLI: `cairn guard
//! scan` flags every one and leaves the near misses alone, and each write
//! path (`memory semantic set`, `memory lessons add`, `memory episodic add`,
//! `memory import-episodic`) refuses one of each family. A value under a secret-named key
//! is stored, audited and shown only as the guard's marker.

use std::path::Path;

use serde_json::{Value, json};

use crate::cairn;
use crate::support::code_and_json;

const CORPUS: &str = include_str!("../../../guard/test_data/corpus.jsonl");

/// `(family, text)` of the corpus's injection rows with `label`.
fn injection_rows(label: &str) -> Vec<(String, String)> {
    CORPUS
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|row| row["kind"] == "injection" && row["label"] == label)
        .map(|row| (row["family"].as_str().unwrap().to_owned(), row["text"].as_str().unwrap().to_owned()))
        .collect()
}

/// Runs `cairn --home <home> memory <args> --json`, or, when `value` is
/// given, `... <args> --json -- <value>` (values may start with `-`).
/// The first positive of each family: every disguise through each CLI write
/// path at one process per family (the library tests of memory-core drive
/// every row through the same writers).
fn one_per_family() -> Vec<(String, String)> {
    let mut seen = std::collections::BTreeSet::new();
    injection_rows("positive").into_iter().filter(|(family, _)| seen.insert(family.clone())).collect()
}

fn memory_with(home: &Path, args: &[&str], value: Option<&str>) -> (i32, Value) {
    let output = cairn()
        .env_remove("CAIRN_EMBED_MODEL_PATH")
        .env("CAIRN_SKIP_MODEL_DOWNLOAD", "1")
        .arg("--home")
        .arg(home)
        .arg("memory")
        .args(args)
        .arg("--json")
        .args(value.map(|value| ["--", value]).into_iter().flatten())
        .output()
        .unwrap();
    code_and_json(output, args)
}

fn memory(home: &Path, args: &[&str]) -> (i32, Value) {
    memory_with(home, args, None)
}

fn assert_refused_as_injection(family: &str, text: &str, (code, outcome): (i32, Value)) {
    assert_eq!(
        (code, &outcome["outcome"], &outcome["code"]),
        (2, &json!("rejected"), &json!("injection")),
        "{family}: {text:?} gave {outcome}"
    );
}

#[test]
fn guard_scan_flags_every_disguise_and_no_near_miss() {
    let positives = injection_rows("positive");
    let near_misses = injection_rows("near-miss");
    let input: String = positives
        .iter()
        .chain(&near_misses)
        .enumerate()
        .map(|(id, (_, text))| format!("{}\n", json!({"id": id, "text": text})))
        .collect();
    let (verdicts, _) = crate::guard::scan("injection", &input);
    assert_eq!(verdicts.len(), positives.len() + near_misses.len());
    for (verdict, (family, text)) in verdicts.iter().zip(&positives) {
        assert_eq!(verdict["flagged"], true, "{family}: {text:?}");
    }
    for (verdict, (family, text)) in verdicts[positives.len()..].iter().zip(&near_misses) {
        assert_eq!(verdict["flagged"], false, "{family}: {text:?} flagged by {}", verdict["rules"]);
    }
}

#[test]
fn semantic_set_refuses_every_disguise() {
    let home = tempfile::tempdir().unwrap();
    for (index, (family, text)) in one_per_family().iter().enumerate() {
        let key = format!("user.note_{index}");
        assert_refused_as_injection(family, text, memory_with(home.path(), &["semantic", "set", &key], Some(text)));
    }
    assert_eq!(memory(home.path(), &["semantic", "list"]).1, json!([]));
}

#[test]
fn lessons_add_refuses_every_disguise() {
    let home = tempfile::tempdir().unwrap();
    for (family, text) in one_per_family() {
        let rule = format!("ALWAYS follow these: {text}");
        assert_refused_as_injection(&family, &text, memory_with(home.path(), &["lessons", "add"], Some(&rule)));
    }
    assert_eq!(memory(home.path(), &["lessons", "list"]).1, json!([]));
}

#[test]
fn episodic_add_and_import_refuse_every_disguise() {
    let home = tempfile::tempdir().unwrap();
    let positives = one_per_family();
    // Episodic rows need ten characters; short attacks get a lead-in.
    let padded: Vec<String> = positives
        .iter()
        .map(|(_, text)| if text.trim().chars().count() >= 10 { text.clone() } else { format!("Note: {text}") })
        .collect();
    for ((family, _), text) in positives.iter().zip(&padded) {
        assert_refused_as_injection(family, text, memory_with(home.path(), &["episodic", "add"], Some(text)));
    }
    let file = home.path().join("rows.jsonl");
    let rows: String = padded.iter().map(|text| format!("{}\n", json!({"text": text}))).collect();
    std::fs::write(&file, rows).unwrap();
    let (code, summary) = memory(home.path(), &["import-episodic", file.to_str().unwrap(), "--no-backfill"]);
    assert_eq!(code, 0, "{summary}");
    assert_eq!((&summary["inserted"], &summary["rejected"]), (&json!(0), &json!(positives.len())), "{summary}");
}

#[test]
fn secret_named_keys_show_only_the_marker() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    for (key, value) in [("pref.db_password", "blue-moon-Zq7"), ("user.api_token", "plain words here")] {
        let (code, outcome) = memory(home, &["semantic", "set", key, value]);
        assert_eq!((code, &outcome["outcome"]), (0, &json!("created")), "{outcome}");
        let (_, entry) = memory(home, &["semantic", "get", key]);
        assert_eq!(entry["value"], json!(cairn_guard::SECRET_KEY_MARKER), "{key}");
        let (_, audit) = memory(home, &["audit", "-n", "10"]);
        assert!(!audit.to_string().contains(value), "{key}: {audit}");
    }
    let (_, entry) = memory(home, &["semantic", "set", "pref.password_hint", "the cat's name"]);
    assert_eq!(entry["outcome"], "created");
    assert_eq!(memory(home, &["semantic", "get", "pref.password_hint"]).1["value"], "the cat's name");
}
