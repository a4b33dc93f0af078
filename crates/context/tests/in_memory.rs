//! The context builder over a store held in memory (memory-core's
//! `in-memory` feature) assembles what it assembles over a SQLite file:
//! the store is read through the same seam either way.

use std::sync::Arc;

use cairn_context::{ContextBuilder, SessionRequest};
use cairn_memory_core::{LessonCategory, MemoryConfig, MemoryDb, Source};
use serde_json::json;

fn filled(database: MemoryDb) -> Arc<MemoryDb> {
    let facts = [
        ("pref.editor", json!("helix"), 1.0, Source::UserExplicit),
        ("project.cairn.language", json!("Rust 2024"), 1.0, Source::UserExplicit),
        ("user.name", json!("Sam"), 0.9, Source::Consolidation),
    ];
    // A block lists equally relevant facts newest first: one write per
    // millisecond at least, so both stores hold the same order.
    for (key, value, confidence, source) in facts {
        database.write_semantic(key, &value, confidence, source).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(3));
    }
    database.write_lesson("run cargo fmt before committing", None, LessonCategory::Tool, Source::UserExplicit).unwrap();
    database
        .write_lesson("answer in English", Some("answer in French"), LessonCategory::Preference, Source::UserExplicit)
        .unwrap();
    Arc::new(database)
}

fn session_text(database: Arc<MemoryDb>, query: &str) -> String {
    let builder = ContextBuilder::new().with_semantic(database.clone()).with_lessons(database);
    builder.build_session_context(&SessionRequest { query, ..Default::default() }).text
}

#[test]
fn a_session_over_an_in_memory_store_reads_as_over_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let on_disk = filled(MemoryDb::open_in_home(dir.path(), MemoryConfig::default()).unwrap());
    let in_memory = filled(MemoryDb::open_in_memory(MemoryConfig::default()).unwrap());
    assert_eq!(in_memory.backend_kind(), "memory");
    for query in ["which editor does Sam use", "", "rust formatting"] {
        let expected = session_text(on_disk.clone(), query);
        assert!(expected.contains("helix") && expected.contains("run cargo fmt"), "{query:?}: {expected}");
        assert_eq!(session_text(in_memory.clone(), query), expected, "{query:?}");
    }
}
