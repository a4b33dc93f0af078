//! Tests that need the crate's internals: a ghost vector left in the index,
//! and a store written by schema version 1.

use std::sync::Arc;

use cairn_embedder::{EmbeddingBackend as _, HashEmbedder};
use rusqlite::Connection;

use super::{EpisodicOutcome, EpisodicQuery, NewEpisode, RetrievalMode};
use crate::{MemoryConfig, MemoryDb, SCHEMA_VERSION};

/// A connection of the test's own to the store's `memory.db`, for what no
/// API does (changing rows behind the store's back).
fn sql(db: &MemoryDb) -> Connection {
    let connection = Connection::open(db.path()).unwrap();
    connection.busy_timeout(std::time::Duration::from_secs(10)).unwrap();
    connection
}

fn store() -> (tempfile::TempDir, MemoryDb) {
    let home = tempfile::tempdir().unwrap();
    let db = MemoryDb::open_in_home(home.path(), MemoryConfig::default())
        .unwrap()
        .with_embedder(Arc::new(HashEmbedder::new(64)));
    (home, db)
}

#[test]
fn a_tombstoned_vector_still_in_the_index_is_never_a_duplicate() {
    let (_home, db) = store();
    let text = "We hiked the ridge trail above the lake on Sunday";
    let EpisodicOutcome::Inserted { id, .. } = db.write_episodic(&NewEpisode::new(text)).unwrap() else {
        panic!("first write inserts");
    };
    // Tombstone the row behind the index's back, exactly as the
    // specification's tombstone paths leave a ghost: the row is deleted,
    // its vector stays in the index, the index still counts as current.
    sql(&db).execute("UPDATE episodic_memories SET is_deleted = 1 WHERE id = ?1", [id]).unwrap();
    let index = db.current_index().expect("the write built an index");
    assert!(index.contains(id as u64), "the ghost is still in the index");
    // Same meaning, different text (so the exact-text check does not fire).
    let outcome = db.write_episodic(&NewEpisode::new(format!("{text}!"))).unwrap();
    assert!(matches!(outcome, EpisodicOutcome::Inserted { .. }), "{outcome:?}");
    // And the ghost never comes back from a search either.
    let hits = db.search_episodic(&EpisodicQuery::new(text).mode(RetrievalMode::PureVector)).unwrap();
    assert!(hits.iter().all(|hit| hit.id != id), "{hits:?}");
}

#[test]
fn a_version_1_store_migrates_and_keeps_its_rows() {
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join("memory.db");
    {
        let connection = Connection::open(&path).unwrap();
        connection.execute_batch(crate::store::sqlite::schema::migration(0)).unwrap();
        connection.pragma_update(None, "user_version", 1).unwrap();
        connection
            .execute(
                "INSERT INTO episodic_memories (text, tags, importance, created_at) VALUES (?1, '[\"trip\"]', 0.7, 0)",
                ["Running the Lisbon half marathon in spring"],
            )
            .unwrap();
    }
    let db = MemoryDb::open(&path, MemoryConfig::default()).unwrap();
    assert_eq!(db.stats().unwrap().schema_version, SCHEMA_VERSION);
    let rows = db.list_episodic(10, 0).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].source_ref, None);
    // The rebuilt keyword index stems: "runs" finds "Running".
    let hits = db.search_episodic(&EpisodicQuery::new("who runs marathons").mode(RetrievalMode::Keyword)).unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0].id, rows[0].id);
}

#[test]
fn a_failed_index_add_after_the_row_insert_rolls_the_row_back() {
    use cairn_embedder::EmbeddingBackend as _;

    let (_home, db) = store();
    let EpisodicOutcome::Inserted { id: first, .. } =
        db.write_episodic(&NewEpisode::new("The team moved the standup to nine thirty")).unwrap()
    else {
        panic!("first write inserts");
    };
    // The id the next insert will get is already in the index (a stale
    // entry), so the index refuses the add after the row is inserted.
    let next_id: i64 = sql(&db)
        .query_row("SELECT seq FROM sqlite_sequence WHERE name = 'episodic_memories'", [], |row| row.get::<_, i64>(0))
        .unwrap()
        + 1;
    let index = db.current_index().expect("the write built an index");
    let stale = HashEmbedder::new(64).embed("an unrelated stale vector about gardening").unwrap();
    index.add(next_id as u64, &stale).unwrap();
    let events_before = db.audit(1_000).unwrap().len();

    let text = "Booked the flights to Porto for the October conference";
    let error = db.write_episodic(&NewEpisode::new(text)).unwrap_err();
    assert!(matches!(error, crate::MemoryError::Index { .. }), "{error}");

    // The table is as before: no row, no audit row, no revision change seen as a write.
    let rows = db.list_episodic(10, 0).unwrap();
    assert_eq!(rows.iter().map(|row| row.id).collect::<Vec<_>>(), vec![first]);
    assert!(db.get_episodic(next_id).unwrap().is_none());
    assert_eq!(db.audit(1_000).unwrap().len(), events_before, "the created event rolled back too");
    assert_eq!(db.stats().unwrap().episodic_live, 1);

    // The index is rebuilt from the table: it holds exactly the active rows.
    let hits = db.search_episodic(&EpisodicQuery::new(text).mode(RetrievalMode::PureVector)).unwrap();
    assert!(hits.iter().all(|hit| hit.id == first), "{hits:?}");
    let rebuilt = db.current_index().expect("a search rebuilds the index");
    assert_eq!(rebuilt.ids(), vec![first as u64], "table and index agree");

    // And the same write now succeeds.
    let outcome = db.write_episodic(&NewEpisode::new(text)).unwrap();
    let EpisodicOutcome::Inserted { id, .. } = outcome else { panic!("{outcome:?}") };
    let index = db.current_index().unwrap();
    let mut ids = index.ids();
    ids.sort_unstable();
    assert_eq!(ids, vec![first as u64, id as u64]);
    assert_eq!(db.list_episodic(10, 0).unwrap().len(), 2);
}

/// A store whose index keeps codes only (more vectors than
/// `episodic_full_vectors_max`) still answers with exact cosines, finds a
/// near duplicate by its exact cosine and loads its codes-only snapshot.
#[test]
fn an_index_of_codes_only_keeps_every_cosine_exact() {
    let home = tempfile::tempdir().unwrap();
    let config = MemoryConfig { episodic_full_vectors_max: 1_000, ..MemoryConfig::default() };
    let embedder = Arc::new(cairn_embedder::WordVectorEmbedder::new(64));
    let db = MemoryDb::open_in_home(home.path(), config.clone()).unwrap().with_embedder(embedder.clone());
    let sentence = |i: usize| format!("row {i} says word{} and word{} near word{}", i % 97, i % 89, i % 83);
    // Just past the crossover, so a graph is built.
    let rows = cairn_memory_vector::constants::AUTO_CROSSOVER + 200;
    for i in 0..rows {
        db.write_episodic(&NewEpisode::new(sentence(i)).defer_embedding(true)).unwrap();
    }
    assert_eq!(db.backfill_missing_embeddings(None).unwrap().remaining, 0);
    let status = db.build_episodic_index().unwrap();
    assert_eq!(status.index_len, rows);
    let index = db.current_index().unwrap();
    assert!(!index.exact(), "{rows} vectors are above the limit of 1,000");

    let exact = |text: &str, query: &[f32]| {
        let mut stored = embedder.embed(text).unwrap();
        cairn_embedder::l2_normalize(&mut stored);
        cairn_memory_vector::dot(query, &stored)
    };
    for probe in [3, 1_234, 4_999] {
        let text = format!("{} and more", sentence(probe));
        let mut query = embedder.embed(&text).unwrap();
        cairn_embedder::l2_normalize(&mut query);
        let hits = db
            .search_episodic(&EpisodicQuery::new(text).mode(RetrievalMode::PureVector).limit(10).vector(query.clone()))
            .unwrap();
        assert!(!hits.is_empty());
        for hit in &hits {
            let cosine = hit.score.cosine.unwrap();
            assert!((cosine - exact(&hit.text, &query)).abs() < 1e-5, "hit {} scored {cosine} from codes", hit.id);
        }
    }
    // Hybrid searches read the rows of the graph's hits and of the keyword
    // hits together: every cosine is still exact, keyword-only rows
    // included, and a row tombstoned since is never returned.
    let hybrid = |text: &str, query: &[f32]| {
        db.search_episodic(
            &EpisodicQuery::new(text).mode(RetrievalMode::Hybrid).limit(60).vector(query.to_vec()).touch(false),
        )
        .unwrap()
    };
    let mut keyword_only = 0;
    let probes = [7, 2_345, 5_100];
    for probe in probes {
        let text = format!("{} and more", sentence(probe));
        let mut query = embedder.embed(&text).unwrap();
        cairn_embedder::l2_normalize(&mut query);
        let hits = hybrid(&text, &query);
        assert!(hits.iter().any(|hit| hit.text == sentence(probe)), "the row itself is found");
        for hit in &hits {
            let cosine = hit.score.cosine.unwrap();
            assert!((cosine - exact(&hit.text, &query)).abs() < 1e-5, "hit {} scored {cosine} from codes", hit.id);
            keyword_only += usize::from(hit.score.vector_rank.is_none() && hit.score.keyword_rank.is_some());
        }
        let top = hits[0].id;
        assert!(matches!(db.delete_episodic(top).unwrap(), crate::DeleteOutcome::Deleted));
        let after = hybrid(&text, &query);
        assert!(!after.is_empty() && after.iter().all(|hit| hit.id != top), "the tombstoned row {top} is gone");
    }
    assert!(keyword_only > 0, "some hits came from the keyword list alone");
    // A near duplicate is found, with its exact cosine.
    let outcome = db.write_episodic(&NewEpisode::new(format!("{}.", sentence(42)))).unwrap();
    let EpisodicOutcome::Duplicate { cosine, .. } = outcome else { panic!("a near duplicate: {outcome:?}") };
    let mut query = embedder.embed(&format!("{}.", sentence(42))).unwrap();
    cairn_embedder::l2_normalize(&mut query);
    assert!((cosine - exact(&sentence(42), &query)).abs() < 1e-5);

    // The snapshot holds codes only and a reopened store loads it.
    assert!(db.save_episodic_index().unwrap() || db.episodic_snapshot_path().unwrap().exists());
    drop(db);
    let reopened = MemoryDb::open_in_home(home.path(), config).unwrap().with_embedder(embedder);
    let status = reopened.build_episodic_index().unwrap();
    assert!(status.loaded_from_snapshot && status.index_len == rows - probes.len(), "{status:?}");
    assert!(!reopened.current_index().unwrap().exact());
}

/// Replaces every stored episodic vector by its opposite, behind the
/// store's back.
fn flip_stored_vectors_of(db: &MemoryDb) {
    let connection = sql(db);
    let blobs: Vec<(i64, Vec<u8>)> = connection
        .prepare("SELECT id, embedding FROM episodic_memories WHERE embedding IS NOT NULL")
        .unwrap()
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for (id, blob) in blobs {
        let flipped: Vec<u8> = blob
            .chunks_exact(4)
            .flat_map(|bytes| (-f32::from_le_bytes(bytes.try_into().unwrap())).to_le_bytes())
            .collect();
        connection.execute("UPDATE episodic_memories SET embedding = ?1 WHERE id = ?2", (flipped, id)).unwrap();
    }
}

/// A codes-only index re-scores its hits from the vector file written
/// beside its snapshot: not from the rows, which the test changes behind
/// the store's back to tell the two apart. A row the file lacks is read
/// from the store; a file that disagrees with the index's codes is not
/// believed; the file is written again once it lacks enough rows.
#[test]
fn a_codes_only_index_rescores_from_its_vector_file_and_distrusts_one_that_disagrees() {
    use crate::constants::{EPISODIC_VECTOR_FILE_STALE_ROWS, EPISODIC_VECTORS_FILE_NAME};
    let home = tempfile::tempdir().unwrap();
    let config = MemoryConfig { episodic_full_vectors_max: 1_000, ..MemoryConfig::default() };
    let embedder = Arc::new(cairn_embedder::WordVectorEmbedder::new(64));
    let open = || MemoryDb::open_in_home(home.path(), config.clone()).unwrap().with_embedder(embedder.clone());
    let db = open();
    let sentence = |i: usize| format!("row {i} says word{} and word{} near word{}", i % 97, i % 89, i % 83);
    let rows = cairn_memory_vector::constants::AUTO_CROSSOVER + 200;
    for i in 0..rows {
        db.write_episodic(&NewEpisode::new(sentence(i)).defer_embedding(true)).unwrap();
    }
    assert_eq!(db.backfill_missing_embeddings(None).unwrap().remaining, 0);
    db.build_episodic_index().unwrap();
    let file = home.path().join(EPISODIC_VECTORS_FILE_NAME);
    assert!(file.exists(), "building a codes-only index writes its vector file");
    assert!(!db.save_episodic_vector_file().unwrap(), "the file holds every row already");

    let unit = |text: &str| {
        let mut vector = embedder.embed(text).unwrap();
        cairn_embedder::l2_normalize(&mut vector);
        vector
    };
    let search = |db: &MemoryDb, text: &str| {
        db.search_episodic(&EpisodicQuery::new(text).mode(RetrievalMode::PureVector).limit(10).vector(unit(text)))
            .unwrap()
    };
    // Every stored vector is replaced by its opposite: a cosine read from
    // the rows changes sign, one read from the file does not.
    let flip_stored_vectors = || flip_stored_vectors_of(&db);
    let text = format!("{} and more", sentence(1_234));
    let before: Vec<(i64, f32)> = search(&db, &text).iter().map(|hit| (hit.id, hit.score.cosine.unwrap())).collect();
    assert!(before.iter().all(|(_, cosine)| *cosine > 0.0), "{before:?}");
    flip_stored_vectors();
    let from_file: Vec<(i64, f32)> = search(&db, &text).iter().map(|hit| (hit.id, hit.score.cosine.unwrap())).collect();
    assert_eq!(from_file, before, "the hits were re-scored from the file, not from the rows");
    flip_stored_vectors();

    // A row written after the file is re-scored from the store.
    let late = "a late row says word11 and word12 near word13";
    let EpisodicOutcome::Inserted { id: late_id, .. } = db.write_episodic(&NewEpisode::new(late)).unwrap() else {
        panic!("inserted")
    };
    let hit = search(&db, late).into_iter().find(|hit| hit.id == late_id).expect("the late row is found");
    assert!((hit.score.cosine.unwrap() - 1.0).abs() < 1e-5);

    // Written again once it lacks more rows than the limit.
    let mut inserted = 1;
    for i in 0.. {
        if inserted > EPISODIC_VECTOR_FILE_STALE_ROWS {
            break;
        }
        let text = format!("note {i}: word{} word{} word{} word{}", i % 101, i % 103, i % 107, i % 109);
        if inserted == EPISODIC_VECTOR_FILE_STALE_ROWS {
            assert!(!db.save_episodic_vector_file().unwrap(), "the file lacks {inserted} rows: not yet");
        }
        inserted +=
            usize::from(matches!(db.write_episodic(&NewEpisode::new(text)).unwrap(), EpisodicOutcome::Inserted { .. }));
    }
    assert!(db.save_episodic_vector_file().unwrap(), "the file lacked {inserted} rows");
    assert!(!db.save_episodic_vector_file().unwrap());
    assert!(db.save_episodic_index().unwrap());
    drop(db);

    // A file whose vectors are not its rows' (each row holding the next
    // row's vector) is not believed: the hits keep their exact cosines.
    let db = open();
    db.build_episodic_index().unwrap();
    let index = db.current_index().unwrap();
    let mut ids = index.ids();
    ids.sort_unstable();
    let signature = db
        .rows()
        .read("test", |tx| {
            crate::episodic::index::vector_file_signature(tx, &crate::store::space_signature(&*embedder))
        })
        .unwrap();
    let space = crate::store::space_signature(&*embedder);
    let mut fetch = |batch: &[i64]| {
        let shifted: Vec<i64> = batch.iter().map(|id| id + 1).collect();
        let vectors = db.rows().read("test", |tx| crate::episodic::index::load_vectors(tx, &space, Some(&shifted)))?;
        Ok(vectors.into_iter().map(|(id, vector)| (id - 1, vector)).collect())
    };
    crate::episodic::index::write_vector_file(&file, &signature, 64, &ids, None, &mut fetch).unwrap();
    drop(db);
    let db = open();
    db.build_episodic_index().unwrap();
    for probe in [3, 2_345, 4_999] {
        let text = format!("{} and more", sentence(probe));
        let query = unit(&text);
        let hits = search(&db, &text);
        assert!(!hits.is_empty());
        for hit in &hits {
            let exact = cairn_memory_vector::dot(&query, &unit(&hit.text));
            assert!((hit.score.cosine.unwrap() - exact).abs() < 1e-5, "hit {} kept a wrong cosine", hit.id);
        }
    }
    assert!(db.save_episodic_vector_file().unwrap(), "a file found untrue is written again");
    // The keyword lookup on a thread of its own, beside the vector lookup
    // and the read of the vector hits' rows (a store of 50,000 keyword
    // rows or more), finds what it finds on this one, scored the same.
    let mut db = db;
    type Scored = (i64, f64, Option<f32>, Option<usize>, Option<usize>, Option<f64>);
    let hybrid = |db: &MemoryDb, text: &str| -> Vec<Scored> {
        let query = EpisodicQuery::new(text).mode(RetrievalMode::Hybrid).limit(20).vector(unit(text)).touch(false);
        let hits = db.search_episodic(&query.clone().relevance_filter(true)).unwrap();
        let unfiltered = db.search_episodic(&query).unwrap();
        hits.into_iter()
            .chain(unfiltered)
            .map(|hit| {
                let score = &hit.score;
                (hit.id, score.score, score.cosine, score.vector_rank, score.keyword_rank, score.bm25)
            })
            .collect()
    };
    let probes: Vec<String> = [9, 1_500, 3_333, 5_050].iter().map(|i| format!("{} and more", sentence(*i))).collect();
    let serial: Vec<_> = probes.iter().map(|text| hybrid(&db, text)).collect();
    db.episodic_config.keyword_beside_rows = 0;
    let beside: Vec<_> = probes.iter().map(|text| hybrid(&db, text)).collect();
    assert!(serial.iter().all(|hits| hits.iter().any(|hit| hit.4.is_some())), "keyword hits are among them");
    assert_eq!(beside, serial);
    let text = format!("{} and more", sentence(77));
    flip_stored_vectors_of(&db);
    assert!(search(&db, &text).iter().all(|hit| hit.score.cosine.unwrap() > 0.0), "read from the new file");
}

/// Warming a reopened store builds both indexes before any search.
#[test]
fn warming_up_makes_both_indexes_ready_before_the_first_search() {
    let (home, db) = store();
    let texts = [
        "We hiked the ridge trail above the lake on Sunday",
        "The invoice for March is still unpaid",
        "Grandma's lasagna recipe needs two kinds of cheese",
        "The deploy to staging failed on a missing secret",
        "Our cat Miso hates the vacuum cleaner",
        "Book club meets every second Thursday at Lena's",
        "The car needs new winter tyres before December",
        "Piano lessons moved from Monday to Wednesday",
        "The flight to Lisbon leaves at seven in the morning",
        "Dentist appointment rescheduled to the fourteenth",
        "The garden shed roof leaks when it rains hard",
        "Quarterly planning slides are due on Friday",
    ];
    for text in texts {
        let outcome = db.write_episodic(&NewEpisode::new(text)).unwrap();
        assert!(matches!(outcome, EpisodicOutcome::Inserted { .. }), "{outcome:?}");
    }
    drop(db);
    let db = MemoryDb::open_in_home(home.path(), MemoryConfig::default())
        .unwrap()
        .with_embedder(Arc::new(HashEmbedder::new(64)));
    assert!(db.current_index().is_none() && db.keyword_index_len().is_none(), "nothing loaded on open");
    db.warm_up().unwrap();
    assert_eq!(db.current_index().map(|index| index.len()), Some(12));
    assert_eq!(db.keyword_index_len(), Some(12));
}

#[test]
fn a_search_records_last_accessed_in_a_batch_that_the_store_writes_when_it_closes() {
    let home = tempfile::tempdir().unwrap();
    let open = || {
        MemoryDb::open_in_home(home.path(), MemoryConfig::default())
            .unwrap()
            .with_embedder(Arc::new(HashEmbedder::new(64)))
    };
    let last_accessed =
        |db: &MemoryDb| db.list_episodic(10, 0).unwrap().iter().map(|e| e.last_accessed).collect::<Vec<_>>();
    let db = open();
    db.write_episodic(&NewEpisode::new("The ferry to the island leaves at nine")).unwrap();
    db.write_episodic(&NewEpisode::new("Quarterly taxes are due in April")).unwrap();
    assert_eq!(last_accessed(&db), [None, None]);

    let hits = db.search_episodic(&EpisodicQuery::new("ferry island").limit(1)).unwrap();
    assert_eq!(hits.len(), 1);
    // Not written by the search itself: it waits for its batch.
    assert_eq!(last_accessed(&db), [None, None]);
    // A search that does not touch adds nothing to it.
    db.search_episodic(&EpisodicQuery::new("taxes April").limit(1).touch(false)).unwrap();
    drop(db);

    let db = open();
    let mut touched: Vec<_> =
        db.list_episodic(10, 0).unwrap().into_iter().map(|e| (e.text, e.last_accessed.is_some())).collect();
    touched.sort();
    assert_eq!(
        touched,
        [
            ("Quarterly taxes are due in April".to_owned(), false),
            ("The ferry to the island leaves at nine".to_owned(), true)
        ]
    );
}

/// A search that finds no keyword index on a store too large to index
/// inline answers from the store's own keyword index (FTS5 here) and then
/// starts the in-memory build, so the build's reads of every text do not
/// compete with the search that found it missing.
#[test]
fn a_search_without_a_keyword_index_answers_from_the_store_and_then_starts_the_build() {
    let home = tempfile::tempdir().unwrap();
    let open = || {
        let mut db = MemoryDb::open_in_home(home.path(), MemoryConfig::default())
            .unwrap()
            .with_embedder(Arc::new(HashEmbedder::new(64)));
        db.episodic.keywords.inline_build_rows = 10;
        db
    };
    let db = open();
    let words = ["gull", "anchor", "lantern", "rope", "tide", "mast", "cargo", "pier", "buoy", "crane"];
    let mut inserted = 0;
    for (i, first) in words.iter().enumerate() {
        for second in &words[i + 1..] {
            let text = format!("The ferry by the harbour carried a {first} and a {second}");
            // Not embedded: the hash embedder would find some near duplicates.
            if let EpisodicOutcome::Inserted { .. } =
                db.write_episodic(&NewEpisode::new(text).defer_embedding(true)).unwrap()
            {
                inserted += 1;
            }
        }
    }
    assert!(inserted > 10, "{inserted} rows: more than the inline build takes");
    drop(db);

    let db = open();
    assert_eq!(db.keyword_index_len(), None, "nothing loaded on open");
    let hits = db.search_episodic(&EpisodicQuery::new("ferry harbour").mode(RetrievalMode::Keyword).limit(5)).unwrap();
    assert_eq!(hits.len(), 5, "answered from FTS5 while the index is missing");
    db.wait_for_keyword_index();
    assert_eq!(db.keyword_index_len(), Some(inserted), "the search started the build");
}
