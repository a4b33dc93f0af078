//! Every write path refuses the guard corpus's disguised injections, and
//! values under secret-named keys never reach the store, the audit trail or
//! the prompt.
//!
//! The injections are the `injection` positives of
//! `crates/guard/test_data/corpus.jsonl` (homoglyphs, tag characters and
//! Hangul fillers, combining marks, split letters, leetspeak, base64 and
//! rot13 wrappers, other languages, synonyms, chat-template tokens with
//! spaces, Markdown exfiltration, ...). Each path gets the whole list.

use std::path::Path;

use cairn_memory_core::{
    ExportDocument, LessonCategory, MemoryConfig, MemoryDb, MemoryError, MemoryFiles, NewEpisode, Rejected, Source,
    export_memory, import_memory,
};
use serde_json::{Value, json};

const CORPUS: &str = include_str!("../../guard/test_data/corpus.jsonl");

/// `(family, text)` of every injection the guard must flag.
fn injections() -> Vec<(String, String)> {
    let rows: Vec<(String, String)> = CORPUS
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|row| row["kind"] == "injection" && row["label"] == "positive")
        .map(|row| (row["family"].as_str().unwrap().to_owned(), row["text"].as_str().unwrap().to_owned()))
        .collect();
    let families: std::collections::BTreeSet<&str> = rows.iter().map(|(family, _)| family.as_str()).collect();
    for family in [
        "homoglyphs",
        "invisible-characters",
        "combining-marks",
        "split-letters",
        "leetspeak",
        "base64-instructions",
        "rot13-wrapped",
        "other-languages",
        "override-synonyms",
        "chat-template-tokens",
        "markdown-exfiltration",
    ] {
        assert!(families.contains(family), "the corpus lost the {family} family");
    }
    rows
}

fn open(home: &Path) -> (MemoryDb, MemoryFiles) {
    (MemoryDb::open_in_home(home, MemoryConfig::default()).unwrap(), MemoryFiles::open(home).unwrap())
}

fn is_injection(error: &MemoryError) -> bool {
    matches!(error.rejection(), Some(Rejected::Injection { .. }))
}

/// Episodic rows need ten characters; short attacks get a harmless lead-in.
fn long_enough(text: &str) -> String {
    if text.trim().chars().count() >= 10 { text.to_owned() } else { format!("Note: {text}") }
}

#[test]
fn semantic_writes_refuse_every_disguised_injection() {
    let home = tempfile::tempdir().unwrap();
    let (db, _) = open(home.path());
    for (index, (family, text)) in injections().iter().enumerate() {
        let result = db.write_semantic(&format!("user.note_{index}"), &json!(text), 1.0, Source::UserExplicit);
        assert!(result.as_ref().is_err_and(is_injection), "{family}: {text:?} gave {result:?}");
    }
    assert!(db.list_semantic("").unwrap().is_empty());
}

#[test]
fn lessons_refuse_every_disguised_injection() {
    let home = tempfile::tempdir().unwrap();
    let (db, _) = open(home.path());
    for (family, text) in injections() {
        let result =
            db.write_lesson(&format!("ALWAYS follow these: {text}"), None, LessonCategory::Tool, Source::UserExplicit);
        assert!(result.as_ref().is_err_and(is_injection), "{family}: {text:?} gave {result:?}");
    }
    assert!(db.get_lessons(100).unwrap().is_empty());
    assert!(!db.lessons_context().unwrap().contains("follow these"));
}

#[test]
fn episodic_writes_refuse_every_disguised_injection() {
    let home = tempfile::tempdir().unwrap();
    let (db, _) = open(home.path());
    for (family, text) in injections() {
        let episode = NewEpisode::new(long_enough(&text));
        let result = db.write_episodic(&episode);
        assert!(result.as_ref().is_err_and(is_injection), "{family}: {text:?} gave {result:?}");
    }
    assert!(db.list_episodic(100, 0).unwrap().is_empty());
}

#[test]
fn memory_files_refuse_every_disguised_injection() {
    let home = tempfile::tempdir().unwrap();
    let (_, files) = open(home.path());
    for (family, text) in injections() {
        let preferences = files.write_preferences(&text);
        assert!(preferences.as_ref().is_err_and(is_injection), "{family}: {text:?} gave {preferences:?}");
        let history = files.append_history(&text);
        assert!(history.as_ref().is_err_and(is_injection), "{family}: {text:?} gave {history:?}");
    }
    assert!(files.preferences().unwrap().trim().is_empty());
    assert!(files.history_days().unwrap().is_empty());
}

#[test]
fn imports_refuse_every_disguised_injection() {
    let home = tempfile::tempdir().unwrap();
    let (db, files) = open(home.path());
    let injections = injections();
    let mut document: ExportDocument = export_memory(&db, &files).unwrap();
    document.semantic = injections
        .iter()
        .enumerate()
        .map(|(index, (_, text))| {
            serde_json::from_value(json!({
                "key": format!("user.imported_{index}"), "value": text, "confidence": 0.9,
                "source": "import", "updated_at": 0
            }))
            .unwrap()
        })
        .collect();
    document.lessons = injections
        .iter()
        .map(|(_, text)| {
            serde_json::from_value(json!({"rule": text, "not": null, "category": "tool", "source": "user_explicit"}))
                .unwrap()
        })
        .collect();
    document.episodic = injections
        .iter()
        .map(|(_, text)| {
            serde_json::from_value(json!({
                "text": long_enough(text), "importance": 0.5, "tags": [], "created_at": 0, "source": "import"
            }))
            .unwrap()
        })
        .collect();
    let report = import_memory(&db, &files, home.path(), &document, false).unwrap();
    assert_eq!(
        (report.counts.semantic_written, report.counts.lessons_written, report.counts.episodic_written),
        (0, 0, 0),
        "{report:#?}"
    );
    let refused = report.rejected.iter().filter(|row| row.code == "injection").count();
    assert_eq!(refused, 3 * injections.len(), "{report:#?}");
}

#[test]
fn secret_named_keys_store_only_the_marker() {
    let home = tempfile::tempdir().unwrap();
    let (db, _) = open(home.path());
    // (key, value, a part of the value that must never show).
    let secrets = [
        ("pref.db_password", json!("Zq7-blue-moon"), "Zq7-blue-moon"),
        ("user.api_token", json!("short-9Xq"), "short-9Xq"),
        ("user.github_token", json!({"value": "tok-4Rw", "scope": "repo"}), "tok-4Rw"),
        ("pref.wifi_passphrase", json!("correct horse battery staple"), "correct horse"),
        ("user.pin_password", json!(482_913), "482913"),
    ];
    for (key, value, _) in &secrets {
        db.write_semantic(key, value, 1.0, Source::UserExplicit).unwrap();
        let stored = db.get_semantic(key).unwrap().unwrap();
        assert_eq!(stored.value, json!(cairn_guard::SECRET_KEY_MARKER), "{key}");
    }
    // Metadata about a secret is not a secret.
    db.write_semantic("pref.password_hint", &json!("the cat's name"), 1.0, Source::UserExplicit).unwrap();
    assert_eq!(db.get_semantic("pref.password_hint").unwrap().unwrap().value, json!("the cat's name"));

    let audit = db.audit(100).unwrap();
    let context = db.semantic_context("password token passphrase", 10_000).unwrap();
    for (key, _, shown) in &secrets {
        for event in &audit {
            for field in [&event.old_value, &event.new_value].into_iter().flatten() {
                assert!(!field.contains(shown), "{key}: audit row shows {field:?}");
            }
        }
        assert!(!context.contains(shown), "{key}: prompt shows {shown:?} in {context:?}");
    }
    assert!(context.contains("the cat's name"), "{context}");
}
