//! Unit tests that need the crate's internals: the ledger table arrives in
//! a store created by an older build.

use rusqlite::Connection;

use crate::store::sqlite::schema;
use crate::{MemoryConfig, MemoryDb, SCHEMA_VERSION};

#[test]
fn a_version_5_store_opens_and_gains_the_ledger() {
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join("memory.db");
    {
        let connection = Connection::open(&path).unwrap();
        for index in 0..5 {
            connection.execute_batch(schema::migration(index)).unwrap();
        }
        connection.pragma_update(None, "user_version", 5).unwrap();
        connection
            .execute("INSERT INTO semantic_memory (key, value, confidence, source, created_at, updated_at) VALUES ('pref.x', '\"y\"', 1.0, 'user_explicit', 0, 0)", [])
            .unwrap();
    }
    let db = MemoryDb::open(&path, MemoryConfig::default()).unwrap();
    assert_eq!(db.stats().unwrap().schema_version, SCHEMA_VERSION);
    assert_eq!(SCHEMA_VERSION, 10);
    assert!(db.get_semantic("pref.x").unwrap().is_some());
    let row = crate::ledger::LedgerRow {
        source: "hermes",
        path: "/h/memories/MEMORY.md".to_owned(),
        item_hash: "ab".to_owned(),
        landed_as: "lesson",
        outcome: "written",
        target: Some("lesson.1".to_owned()),
    };
    db.record_import_provenance(&[row.clone(), row]).unwrap();
    let view = db.import_ledger(&["hermes"]).unwrap();
    assert!(view.contains("hermes", "/h/memories/MEMORY.md", "ab"));
    assert_eq!(view.lessons_written, 1);
    assert!(db.import_ledger(&["openclaw"]).unwrap().seen.is_empty());
}
