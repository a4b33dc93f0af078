//! Import never deletes or replaces native memory: existing lessons,
//! semantic entries (live or tombstoned) and episodic rows win every
//! conflict, and one import adds at most 50 lessons.

use std::path::Path;

use cairn_memory_core::{
    ExportDocument, LessonCategory, MemoryAuditAction, MemoryConfig, MemoryDb, MemoryFiles, NewEpisode, SkipReason,
    Source, WriteOutcome, export_memory, import_memory, lesson_key,
};
use serde_json::json;

fn open(home: &Path) -> (MemoryDb, MemoryFiles) {
    (MemoryDb::open_in_home(home, MemoryConfig::default()).unwrap(), MemoryFiles::open(home).unwrap())
}

/// An export document holding only `lessons` (rule, not).
fn lessons_document(lessons: &[(&str, Option<&str>)]) -> ExportDocument {
    let home = tempfile::tempdir().unwrap();
    let (db, files) = open(home.path());
    let mut document = export_memory(&db, &files).unwrap();
    document.lessons = lessons
        .iter()
        .map(|(rule, not)| {
            serde_json::from_value(json!({"rule": rule, "not": not, "category": "tool", "source": "user_explicit"}))
                .unwrap()
        })
        .collect();
    document
}

fn deletions(db: &MemoryDb) -> usize {
    db.audit(10_000).unwrap().iter().filter(|event| event.action == MemoryAuditAction::Deleted).count()
}

#[test]
fn an_imported_lesson_never_tombstones_a_stored_one() {
    let home = tempfile::tempdir().unwrap();
    let (db, files) = open(home.path());
    // Native lessons that are not user-explicit: the ones an import used to replace.
    let native = db.write_lesson("Run the tests", None, LessonCategory::Tool, Source::Consolidation).unwrap();
    let WriteOutcome::Created { key: native_key } = native.outcome else { panic!("{native:?}") };
    let topic = db
        .write_lesson("Deploy gateway releases on Tuesday", None, LessonCategory::Tool, Source::Consolidation)
        .unwrap();
    let WriteOutcome::Created { key: topic_key } = topic.outcome else { panic!("{topic:?}") };

    let document = lessons_document(&[
        // Contains the stored text: the substring rule would replace it.
        ("Run the tests before every push", None),
        // Shares the topic: the overlap rule would replace it.
        ("Deploy gateway releases on Tuesday mornings only", Some("on Fridays")),
        // Unrelated: written.
        ("Prefer ripgrep over grep for code search", None),
    ]);
    let report = import_memory(&db, &files, home.path(), &document, false).unwrap();
    assert_eq!(report.counts.lessons_written, 1, "{report:#?}");
    let skipped: Vec<(&str, &str, &str)> =
        report.skipped.iter().map(|row| (row.kind, row.code.as_str(), row.message.as_str())).collect();
    assert!(skipped.contains(&("lesson", "exists", &format!("the stored lesson {native_key} wins"))), "{skipped:?}");
    assert!(skipped.contains(&("lesson", "exists", &format!("the stored lesson {topic_key} wins"))), "{skipped:?}");

    // Both native lessons are live, nothing was tombstoned.
    let keys: Vec<String> = db.get_lessons(100).unwrap().into_iter().map(|lesson| lesson.key).collect();
    assert!(keys.contains(&native_key) && keys.contains(&topic_key), "{keys:?}");
    assert_eq!(keys.len(), 3);
    assert_eq!(deletions(&db), 0);
    // The imported lesson is stored below user-taught confidence.
    let imported = db.get_lessons(100).unwrap().into_iter().find(|lesson| lesson.rule.contains("ripgrep")).unwrap();
    assert_eq!((imported.source, imported.confidence), (Source::Import, 0.9));

    // A native lesson still replaces by the same rules (nothing changed there).
    let native_write =
        db.write_lesson("Run the tests before every push", None, LessonCategory::Tool, Source::Consolidation).unwrap();
    assert_eq!(native_write.replaced.len(), 1, "{native_write:?}");
}

#[test]
fn import_writes_neither_over_a_live_value_nor_over_a_deletion() {
    let home = tempfile::tempdir().unwrap();
    let (db, _files) = open(home.path());
    db.write_semantic("pref.editor", &json!("helix"), 0.85, Source::Consolidation).unwrap();
    // The ladder alone would let a 1.0 write replace a 0.85 one; an import may not.
    let outcome = db.write_semantic("pref.editor", &json!("emacs"), 1.0, Source::Import).unwrap();
    assert_eq!(
        outcome,
        WriteOutcome::Skipped {
            key: "pref.editor".to_owned(),
            reason: SkipReason::ExistingWins { existing_key: "pref.editor".to_owned() }
        }
    );
    assert_eq!(db.get_semantic("pref.editor").unwrap().unwrap().value, json!("helix"));

    // A deletion is memory too: an import does not revive the key.
    db.write_semantic("pref.theme", &json!("dark"), 0.9, Source::Consolidation).unwrap();
    db.delete_semantic("pref.theme", Source::UserExplicit).unwrap();
    let revived = db.write_semantic("pref.theme", &json!("dark"), 1.0, Source::Import).unwrap();
    assert!(matches!(revived, WriteOutcome::Skipped { reason: SkipReason::ExistingWins { .. }, .. }), "{revived:?}");
    assert!(db.get_semantic("pref.theme").unwrap().is_none());

    // The same holds for a lesson's key: a superseded lesson is not brought back.
    let old = db.write_lesson("Use the staging cluster", None, LessonCategory::Tool, Source::UserExplicit).unwrap();
    let WriteOutcome::Created { key } = old.outcome else { panic!("{old:?}") };
    db.delete_lesson(&key, Source::UserExplicit).unwrap();
    let again = db.write_lesson("Use the staging cluster", None, LessonCategory::Tool, Source::Import).unwrap();
    assert!(matches!(again.outcome, WriteOutcome::Skipped { .. }), "{again:?}");
    assert!(db.get_lessons(10).unwrap().is_empty());

    // A new key is written (the accepted case).
    let fresh = db.write_semantic("pref.font", &json!("iosevka"), 0.9, Source::Import).unwrap();
    assert!(matches!(fresh, WriteOutcome::Created { .. }), "{fresh:?}");
}

#[test]
fn import_never_evicts_an_episodic_row() {
    let home = tempfile::tempdir().unwrap();
    let config = MemoryConfig { episodic_cap: 2, ..MemoryConfig::default() };
    let db = MemoryDb::open_in_home(home.path(), config).unwrap();
    let files = MemoryFiles::open(home.path()).unwrap();
    for text in ["Native fragment one about the gateway.", "Native fragment two about the heartbeat."] {
        db.write_episodic(&NewEpisode::new(text).importance(0.1)).unwrap();
    }
    let mut document = lessons_document(&[]);
    document.episodic = vec![
        serde_json::from_value(json!({
            "text": "An imported fragment with a far higher importance.",
            "importance": 1.0, "created_at": 1_767_000_000_000_i64, "source": "consolidation"
        }))
        .unwrap(),
    ];
    let report = import_memory(&db, &files, home.path(), &document, false).unwrap();
    assert_eq!(report.counts.episodic_written, 0, "{report:#?}");
    assert_eq!(report.skipped[0].code, "store_full");
    let texts: Vec<String> = db.list_episodic(10, 0).unwrap().into_iter().map(|row| row.text).collect();
    assert_eq!(texts.len(), 2);
    assert!(texts.iter().all(|text| text.starts_with("Native")), "{texts:?}");
}

#[test]
fn one_import_adds_at_most_50_lessons() {
    let rules: Vec<String> = (0..60).map(|index| format!("Remember k{index:03}alpha and k{index:03}beta")).collect();
    let lessons: Vec<(&str, Option<&str>)> = rules.iter().map(|rule| (rule.as_str(), None)).collect();
    let document = lessons_document(&lessons);

    let home = tempfile::tempdir().unwrap();
    let (db, files) = open(home.path());
    let dry = import_memory(&db, &files, home.path(), &document, true).unwrap();
    assert_eq!(dry.counts.lessons_written, 50);
    assert!(db.get_lessons(100).unwrap().is_empty());

    let report = import_memory(&db, &files, home.path(), &document, false).unwrap();
    assert_eq!(report.counts.lessons_written, 50, "{report:#?}");
    let capped: Vec<&str> =
        report.skipped.iter().filter(|row| row.code == "lesson_cap").map(|row| row.id.as_str()).collect();
    assert_eq!(capped.len(), 10);
    // The first 50 in document order were taken, the last 10 left out.
    assert_eq!(capped[0], lesson_key(&rules[50], None));
    assert_eq!(db.get_lessons(100).unwrap().len(), 50);

    // A second import of the same document adds the remaining ten, no more.
    let second = import_memory(&db, &files, home.path(), &document, false).unwrap();
    assert_eq!(second.counts.lessons_written, 10, "{second:#?}");
    assert_eq!(db.get_lessons(100).unwrap().len(), 60);
}
