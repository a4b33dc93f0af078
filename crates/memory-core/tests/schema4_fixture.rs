//! A store written at schema 4 opens with today's code, migrates to the
//! current schema and reads back unchanged.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use cairn_embedder::HashEmbedder;
use cairn_memory_core::{LessonCategory, MemoryConfig, MemoryDb, SCHEMA_VERSION, Source};
use serde_json::json;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/test_data/schema4/memory.db");

/// The ordinary (not virtual) tables.
fn tables(connection: &rusqlite::Connection) -> Vec<String> {
    connection
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%'")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// Every row of every ordinary table, sorted, by table name; with
/// `columns`, only those columns of the tables it names (what an older
/// schema had, when a later migration added columns).
fn dump(path: &Path, columns: Option<&BTreeMap<String, Vec<String>>>) -> BTreeMap<String, Vec<String>> {
    let connection = rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let tables = tables(&connection);
    let mut out = BTreeMap::new();
    for table in tables {
        let selected = match columns.and_then(|columns| columns.get(&table)) {
            Some(names) => names.iter().map(|name| format!("\"{name}\"")).collect::<Vec<_>>().join(", "),
            None => "*".to_owned(),
        };
        let mut statement = connection.prepare(&format!("SELECT {selected} FROM \"{table}\"")).unwrap();
        let columns = statement.column_count();
        let mut rows: Vec<String> = statement
            .query_map([], |row| {
                let values: Vec<rusqlite::types::Value> = (0..columns).map(|i| row.get(i)).collect::<Result<_, _>>()?;
                Ok(format!("{values:?}"))
            })
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        rows.sort();
        out.insert(table, rows);
    }
    out
}

/// The column names of every ordinary table.
fn columns(path: &Path) -> BTreeMap<String, Vec<String>> {
    let connection = rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let tables = tables(&connection);
    tables
        .into_iter()
        .map(|table| {
            let statement = connection.prepare(&format!("SELECT * FROM \"{table}\"")).unwrap();
            let names = statement.column_names().map(str::to_owned).collect();
            (table, names)
        })
        .collect()
}

fn user_version(path: &Path) -> i64 {
    let connection = rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    connection.query_row("PRAGMA user_version", [], |row| row.get(0)).unwrap()
}

#[test]
fn a_schema_4_store_opens_migrates_and_reads_back_unchanged() {
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join("memory.db");
    std::fs::copy(FIXTURE, &path).unwrap();
    assert_eq!(user_version(&path), 4);
    let before = dump(&path, None);
    let old_columns = columns(&path);
    assert_eq!(before["semantic_memory"].len(), 6, "four facts (one deleted) and two lessons");
    assert_eq!(before["episodic_memories"].len(), 4);
    assert_eq!(before["memory_events"].len(), 13);

    let db = MemoryDb::open(&path, MemoryConfig::default()).unwrap().with_embedder(Arc::new(HashEmbedder::new(64)));
    assert_eq!(user_version(&path), SCHEMA_VERSION);

    // Every row the old build wrote is still there, byte for byte, and a
    // column added since holds its default: the rows are global.
    let after = dump(&path, Some(&old_columns));
    for (table, rows) in &before {
        if table == "meta" {
            // The counters added since count the rows the old build wrote.
            let added: Vec<&String> = after[table].iter().filter(|row| !rows.contains(row)).collect();
            assert_eq!(
                added,
                ["[Text(\"episodic_deleted\"), Integer(0)]", "[Text(\"episodic_live\"), Integer(4)]"],
                "table meta gains the kept counts only"
            );
            assert!(rows.iter().all(|row| after[table].contains(row)), "table meta keeps its rows");
            continue;
        }
        assert_eq!(&after[table], rows, "table {table}");
    }
    let connection = rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let scopes: Vec<String> = connection
        .prepare("SELECT DISTINCT scope FROM episodic_memories")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(scopes, ["global"]);

    // And reads back through today's API as it was written.
    let facts = [
        ("pref.editor", json!("vim"), 1.0, Source::UserExplicit, 2),
        ("pref.theme", json!({"mode": "dark", "contrast": 2}), 0.9, Source::Consolidation, 1),
        ("project.cairn.language", json!("rust"), 0.85, Source::Other("importer".into()), 1),
    ];
    for (key, value, confidence, source, version) in facts {
        let entry = db.get_semantic(key).unwrap().unwrap();
        assert_eq!(
            (&entry.value, entry.confidence, &entry.source, entry.version),
            (&value, confidence, &source, version)
        );
        assert!(entry.has_vector, "{key}");
    }
    assert_eq!(db.get_semantic("pref.shell").unwrap(), None);

    let mut lessons: Vec<_> = db
        .get_lessons(10)
        .unwrap()
        .into_iter()
        .map(|lesson| (lesson.rule, lesson.not, lesson.category, lesson.source))
        .collect();
    lessons.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        lessons,
        [
            ("answer in British English".to_owned(), None, LessonCategory::Preference, Source::UserExplicit),
            (
                "run cargo fmt before committing".to_owned(),
                Some("commit unformatted code".to_owned()),
                LessonCategory::Tool,
                Source::TaskRunner
            ),
        ]
    );

    let day = 86_400_000_i64;
    let base = 1_764_000_000_000_i64;
    let mut episodes: Vec<_> = db
        .list_episodic(10, 0)
        .unwrap()
        .into_iter()
        .map(|record| (record.text, record.tags, record.importance, record.created_at, record.has_vector))
        .collect();
    episodes.sort_by_key(|episode| episode.3);
    let texts: Vec<_> = episodes.iter().map(|e| (e.0.as_str(), e.3, e.4)).collect();
    assert_eq!(
        texts,
        [
            ("Deployed the gateway to the staging host after the TLS fix", base, true),
            ("The user prefers short answers with code first", base + day, true),
            ("Benchmarks of the embedder ran at 12 ms per batch on two cores", base + 2 * day, true),
            ("Kept on the rolling log without a vector", base + 3 * day, false),
        ]
    );
    assert_eq!((&episodes[0].1, episodes[0].2), (&vec!["deploy".to_owned(), "tls".to_owned()], 0.7));

    // The stored vectors still find their rows.
    let hits =
        db.search_episodic(&db.episodic_query("Deployed the gateway to the staging host after the TLS fix")).unwrap();
    assert_eq!(hits[0].text, "Deployed the gateway to the staging host after the TLS fix");

    let audit = db.audit(100).unwrap();
    assert_eq!(audit.len(), 13);
    assert!(audit.iter().any(|event| event.key.as_deref() == Some("pref.shell")));
}
