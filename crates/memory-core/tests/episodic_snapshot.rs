//! The episodic index snapshot: written beside `memory.db`, loaded by the
//! next process only when it holds exactly the table's active vectors in
//! the current space, of this database file at its current episodic
//! revision; rebuilt otherwise (never an error).

use std::sync::Arc;

use cairn_embedder::HashEmbedder;
use cairn_memory_core::constants::EPISODIC_INDEX_FILE_NAME;
use cairn_memory_core::{EpisodicOutcome, EpisodicQuery, MemoryConfig, MemoryDb, NewEpisode, RetrievalMode};
use cairn_memory_vector::constants::AUTO_CROSSOVER;

fn open(home: &std::path::Path, dim: usize) -> MemoryDb {
    MemoryDb::open_in_home(home, MemoryConfig::default()).unwrap().with_embedder(Arc::new(HashEmbedder::new(dim)))
}

fn text(i: usize) -> String {
    format!("snapshot row {i} about river {} and mountain {}", i % 89, i % 31)
}

/// Ids of a pure-vector search, best first.
fn search(db: &MemoryDb, query: &str) -> Vec<i64> {
    db.search_episodic(&EpisodicQuery::new(query).mode(RetrievalMode::PureVector).limit(5))
        .unwrap()
        .iter()
        .map(|hit| hit.id)
        .collect()
}

#[test]
fn a_saved_index_is_loaded_by_the_next_store_and_a_stale_one_is_rebuilt() {
    let home = tempfile::tempdir().unwrap();
    let rows = AUTO_CROSSOVER + 200;
    let file = home.path().join(EPISODIC_INDEX_FILE_NAME);
    let expected = {
        let db = open(home.path(), 32);
        for i in 0..rows {
            db.write_episodic(&NewEpisode::new(text(i)).defer_embedding(true)).unwrap();
        }
        assert_eq!(db.backfill_missing_embeddings(None).unwrap().embedded, rows);
        let status = db.build_episodic_index().unwrap();
        // The first build found no file and wrote one.
        assert_eq!((status.index_len, status.loaded_from_snapshot), (rows, false));
        assert!(file.exists());
        std::fs::remove_file(&file).unwrap();
        assert!(db.save_episodic_index().unwrap(), "an index above the crossover is written");
        assert!(file.exists());
        assert!(!db.save_episodic_index().unwrap(), "nothing changed since the last write");
        search(&db, &text(7))
    };

    // The next store loads the file and answers the same.
    let db = open(home.path(), 32);
    let status = db.build_episodic_index().unwrap();
    assert_eq!((status.index_len, status.ready, status.loaded_from_snapshot), (rows, true, true));
    assert_eq!(search(&db, &text(7)), expected);

    // A row written and deleted after the save: the same ids, but the table
    // moved on, so the file is not trusted.
    let late = db.write_episodic(&NewEpisode::new("a passing row about the sea")).unwrap();
    let EpisodicOutcome::Inserted { id, .. } = late else { panic!("{late:?}") };
    db.delete_episodic(id).unwrap();
    drop(db);
    let db = open(home.path(), 32);
    let status = db.build_episodic_index().unwrap();
    assert_eq!((status.index_len, status.loaded_from_snapshot), (rows, false));
    drop(db);

    // The same rows and revision in another database file (here: this
    // file given another identity) never take this file either.
    assert!(open(home.path(), 32).build_episodic_index().unwrap().loaded_from_snapshot);
    let connection = rusqlite::Connection::open(home.path().join("memory.db")).unwrap();
    connection.execute("UPDATE meta SET value = value + 1 WHERE name = 'store_id'", []).unwrap();
    drop(connection);
    let db = open(home.path(), 32);
    assert!(!db.build_episodic_index().unwrap().loaded_from_snapshot);
    assert_eq!(search(&db, &text(7)), expected);

    // A row written after the save: the file no longer matches the table.
    db.write_episodic(&NewEpisode::new("a late row about the sea")).unwrap();
    drop(db);
    let db = open(home.path(), 32);
    let status = db.build_episodic_index().unwrap();
    assert_eq!((status.index_len, status.loaded_from_snapshot), (rows + 1, false));
    assert_eq!(search(&db, &text(7)), expected);
    drop(db);

    // The rebuild rewrote the file; another embedding space never uses it.
    let db = open(home.path(), 24);
    assert_eq!(db.backfill_missing_embeddings(None).unwrap().embedded, rows + 1);
    let status = db.build_episodic_index().unwrap();
    assert_eq!((status.index_len, status.loaded_from_snapshot), (rows + 1, false));
    drop(db);

    // A damaged file is rebuilt over, not an error.
    let mut bytes = std::fs::read(&file).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&file, bytes).unwrap();
    let db = open(home.path(), 24);
    let status = db.build_episodic_index().unwrap();
    assert_eq!((status.index_len, status.loaded_from_snapshot), (rows + 1, false));
    drop(db);
    let db = open(home.path(), 24);
    assert!(db.build_episodic_index().unwrap().loaded_from_snapshot, "the rebuild wrote a good file");
}

#[test]
fn small_indexes_are_not_written() {
    let home = tempfile::tempdir().unwrap();
    let db = open(home.path(), 16);
    for i in 0..50 {
        db.write_episodic(&NewEpisode::new(text(i)).defer_embedding(true)).unwrap();
    }
    assert_eq!(db.backfill_missing_embeddings(None).unwrap().embedded, 50);
    assert_eq!(db.build_episodic_index().unwrap().index_len, 50);
    assert!(!db.save_episodic_index().unwrap());
    assert!(!home.path().join(EPISODIC_INDEX_FILE_NAME).exists());
}

/// Stores whose index holds one row while another process adds more rows
/// than that (an import, a bulk load) build their index again from the
/// table, which here means loading the other process's snapshot, instead
/// of adding the new rows one at a time: through a start-up build and
/// through a search.
#[test]
fn an_index_far_behind_the_table_is_built_again_rather_than_caught_up() {
    let home = tempfile::tempdir().unwrap();
    let rows = AUTO_CROSSOVER + 200;
    let (built, searched) = (open(home.path(), 32), open(home.path(), 32));
    built.write_episodic(&NewEpisode::new(text(0))).unwrap();
    assert_eq!(built.build_episodic_index().unwrap().index_len, 1);
    assert_eq!(search(&searched, &text(0)), vec![1]);
    {
        let other = open(home.path(), 32);
        for i in 1..rows {
            other.write_episodic(&NewEpisode::new(text(i)).defer_embedding(true)).unwrap();
        }
        assert_eq!(other.backfill_missing_embeddings(None).unwrap().embedded, rows - 1);
        assert!(!other.build_episodic_index().unwrap().loaded_from_snapshot);
        assert!(home.path().join(EPISODIC_INDEX_FILE_NAME).exists());
    }

    let status = built.build_episodic_index().unwrap();
    assert_eq!((status.index_len, status.loaded_from_snapshot), (rows, true));

    search(&searched, &text(7));
    let status = searched.build_episodic_index().unwrap();
    assert_eq!((status.index_len, status.loaded_from_snapshot), (rows, true));
    assert_eq!(search(&searched, &text(7)), search(&built, &text(7)));
}
