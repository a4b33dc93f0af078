//! Many threads on two store instances (two connections, as two processes
//! would have) writing, searching and deleting overlapping keys; afterwards
//! every live row must agree with the audit trail.

use std::collections::HashMap;
use std::sync::Arc;

use cairn_embedder::HashEmbedder;
use cairn_memory_core::{
    DeleteOutcome, LessonCategory, MemoryAuditAction, MemoryConfig, MemoryDb, MemoryError, Source, WriteOutcome,
    constants,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

const THREADS: usize = 8;
const OPS_PER_THREAD: usize = 1_000;
const KEYS: usize = 12;
/// Writes made before the contest, so the audit trail is trimmed during it.
const SEED_WRITES: usize = 5_000;

#[derive(Default)]
struct Tally {
    /// key → accepted changes (created, updated, deleted) this thread was told about.
    changes: HashMap<String, i64>,
    rejected: usize,
    skipped: usize,
    searches: usize,
}

fn contested_key(rng: &mut StdRng) -> String {
    format!("pref.shared_{}", rng.random_range(0..KEYS))
}

fn run_thread(db: Arc<MemoryDb>, thread: usize) -> Tally {
    let mut rng = StdRng::seed_from_u64(0x5eed_0000 + thread as u64);
    let mut tally = Tally::default();
    for op in 0..OPS_PER_THREAD {
        let roll = rng.random_range(0..100);
        if roll < 55 {
            let key = contested_key(&mut rng);
            let confidence = [0.5, 0.8, 0.85, 0.9, 0.95, 1.0][rng.random_range(0..6)];
            let source = if rng.random_bool(0.2) { Source::UserExplicit } else { Source::Consolidation };
            match db.write_semantic(&key, &json!({"thread": thread, "op": op}), confidence, source) {
                Ok(WriteOutcome::Created { key } | WriteOutcome::Updated { key }) => {
                    *tally.changes.entry(key).or_default() += 1
                }
                Ok(WriteOutcome::Skipped { .. }) => tally.skipped += 1,
                Ok(other) => panic!("unique values are never unchanged: {other:?}"),
                Err(MemoryError::Rejected(_)) => tally.rejected += 1,
                Err(other) => panic!("thread {thread} op {op}: store error {other}"),
            }
        } else if roll < 70 {
            let key = contested_key(&mut rng);
            match db.delete_semantic(&key, Source::UserExplicit).expect("delete") {
                DeleteOutcome::Deleted => *tally.changes.entry(key).or_default() += 1,
                DeleteOutcome::NotFound => {}
            }
        } else if roll < 85 {
            let hits = db.search_semantic("shared thread", 5).expect("search");
            assert!(hits.len() <= 5);
            tally.searches += 1;
        } else if roll < 97 {
            let block = db.semantic_context("pref shared", 2_000).expect("context");
            assert!(block.chars().count() <= 2_000);
            tally.searches += 1;
        } else {
            // Lessons share the write path; a handful keep them in the mix.
            let rule = format!("lesson word{} for thread{thread}", rng.random_range(0..4));
            db.write_lesson(&rule, None, LessonCategory::Tool, Source::UserExplicit).expect("lesson");
        }
    }
    tally
}

#[test]
fn eight_threads_keep_rows_and_audit_in_agreement() {
    let home = tempfile::tempdir().unwrap();
    let first = Arc::new(
        MemoryDb::open_in_home(home.path(), MemoryConfig::default())
            .unwrap()
            .with_embedder(Arc::new(HashEmbedder::new(32))),
    );
    for index in 0..SEED_WRITES {
        first.write_semantic(&format!("user.seed_{}", index % 50), &json!(index), 1.0, Source::UserExplicit).unwrap();
    }
    // A second instance on the same file: its own writer connection, like another process.
    let second = Arc::new(MemoryDb::open(first.path(), MemoryConfig::default()).unwrap());

    let handles: Vec<_> = (0..THREADS)
        .map(|thread| {
            let db = if thread % 2 == 0 { first.clone() } else { second.clone() };
            std::thread::spawn(move || run_thread(db, thread))
        })
        .collect();
    let tallies: Vec<Tally> = handles.into_iter().map(|handle| handle.join().expect("thread panicked")).collect();

    let stats = first.stats().unwrap();
    assert_eq!(stats.audit_events, constants::MAX_AUDIT_EVENTS, "trail is full and never over the cap");
    let events = first.audit(usize::MAX >> 1).unwrap();
    assert!(events.windows(2).all(|pair| pair[0].id > pair[1].id), "ids strictly increase");
    // The contest wrote fewer than 10,000 rows, so only seed rows were trimmed.
    assert!(events.iter().any(|event| event.key.as_deref() == Some("user.seed_0")));

    let mut told: HashMap<String, i64> = HashMap::new();
    for tally in &tallies {
        for (key, count) in &tally.changes {
            *told.entry(key.clone()).or_default() += count;
        }
    }
    assert!(tallies.iter().map(|tally| tally.rejected).sum::<usize>() > 0, "the 0.5 writes were refused");
    assert!(tallies.iter().map(|tally| tally.skipped).sum::<usize>() > 0, "the ladder skipped some writes");
    assert!(tallies.iter().map(|tally| tally.searches).sum::<usize>() > 0);

    let connection = rusqlite::Connection::open(first.path()).unwrap();
    for index in 0..KEYS {
        let key = format!("pref.shared_{index}");
        let changes: Vec<_> =
            events.iter().filter(|event| event.key.as_deref() == Some(&key) && event.action.is_change()).collect();
        // Every acknowledged change has its event, and no event lacks an acknowledgement.
        assert_eq!(changes.len() as i64, told.get(&key).copied().unwrap_or(0), "{key}: events vs acknowledgements");
        let Some(last) = changes.first() else { continue };
        let (value, is_deleted, version): (String, i64, i64) = connection
            .query_row("SELECT value, is_deleted, version FROM semantic_memory WHERE key = ?1", [&key], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?))
            })
            .unwrap();
        // No lost update: the row saw exactly as many changes as were acknowledged.
        assert_eq!(version, changes.len() as i64, "{key}: version vs change events");
        match last.action {
            MemoryAuditAction::Deleted => {
                assert_eq!(is_deleted, 1, "{key}");
                assert_eq!(first.get_semantic(&key).unwrap(), None);
            }
            _ => {
                assert_eq!(is_deleted, 0, "{key}");
                assert_eq!(Some(value.as_str()), last.new_value.as_deref(), "{key}: live row vs last event");
            }
        }
    }
    // A row says it has a vector exactly when one is stored.
    let mismatched: i64 = connection
        .query_row(
            "SELECT count(*) FROM semantic_memory m
             WHERE (m.embedding_space IS NOT NULL) != EXISTS (SELECT 1 FROM semantic_vectors v WHERE v.key = m.key)",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(mismatched, 0);
    assert_eq!(first.integrity_check().unwrap(), ["ok"]);
}
