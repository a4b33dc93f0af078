//! Four writer and four searcher threads on one store for 20 seconds.
//! Writers insert, delete and, through a small cap, evict; searchers run
//! every mode. No search may return a row tombstoned before it started;
//! at rest the vector index holds exactly the active rows that have
//! vectors, the keyword index exactly the active rows, and the file passes
//! `PRAGMA integrity_check` (FTS5 included).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use cairn_embedder::HashEmbedder;
use cairn_memory_core::{EpisodicOutcome, EpisodicQuery, MemoryConfig, MemoryDb, NewEpisode, RetrievalMode};

const WRITERS: usize = 4;
const SEARCHERS: usize = 4;
const RUN_FOR: Duration = Duration::from_secs(20);
const CAP: usize = 300;

const WORDS: &[&str] = &[
    "kite", "river", "garden", "piano", "harbour", "lantern", "meadow", "violin", "canyon", "orchard", "glacier",
    "bakery", "comet", "festival", "library", "marathon",
];

fn sentence(seed: usize) -> String {
    let pick = |k: usize| WORDS[(seed.wrapping_mul(2_654_435_761).wrapping_add(k * 40_503)) % WORDS.len()];
    format!("{} near the {} with a {} (note {seed})", pick(1), pick(2), pick(3))
}

#[test]
fn writers_and_searchers_never_see_tombstones() {
    let home = tempfile::tempdir().unwrap();
    let db = Arc::new(
        MemoryDb::open_in_home(home.path(), MemoryConfig::default())
            .unwrap()
            .with_embedder(Arc::new(HashEmbedder::new(48))),
    );
    let tombstoned: Arc<RwLock<HashSet<i64>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let searches = Arc::new(AtomicUsize::new(0));
    let writes = Arc::new(AtomicUsize::new(0));
    let mut threads = Vec::new();
    for writer in 0..WRITERS {
        let (db, tombstoned, stop, writes) = (db.clone(), tombstoned.clone(), stop.clone(), writes.clone());
        threads.push(std::thread::spawn(move || {
            let mut mine = Vec::new();
            let mut n = writer * 1_000_000;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let episode =
                    NewEpisode::new(sentence(n)).importance((n % 10) as f64 / 10.0).defer_embedding(n % 7 == 0);
                match db.write_episodic_capped(&episode, CAP).unwrap() {
                    EpisodicOutcome::Inserted { id, evicted, .. } => {
                        tombstoned.write().unwrap().extend(evicted);
                        mine.push(id);
                    }
                    EpisodicOutcome::Duplicate { .. } => {}
                    other => panic!("{other:?}"),
                }
                if n % 5 == 0
                    && let Some(id) = mine.pop()
                {
                    db.delete_episodic(id).unwrap();
                    tombstoned.write().unwrap().insert(id);
                }
                if n % 50 == 0 {
                    db.backfill_missing_embeddings(None).unwrap();
                }
                writes.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for searcher in 0..SEARCHERS {
        let (db, tombstoned, stop, searches) = (db.clone(), tombstoned.clone(), stop.clone(), searches.clone());
        threads.push(std::thread::spawn(move || {
            let modes = [RetrievalMode::Hybrid, RetrievalMode::PureVector, RetrievalMode::Keyword];
            let mut n = searcher;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let before: HashSet<i64> = tombstoned.read().unwrap().clone();
                let query =
                    EpisodicQuery::new(sentence(n * 31)).mode(modes[n % 3]).limit(20).relevance_filter(n % 2 == 0);
                for hit in db.search_episodic(&query).unwrap() {
                    assert!(!before.contains(&hit.id), "search returned tombstoned row {}", hit.id);
                }
                searches.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let started = Instant::now();
    while started.elapsed() < RUN_FOR {
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().unwrap();
    }

    assert!(writes.load(Ordering::Relaxed) > 0 && searches.load(Ordering::Relaxed) > 0);
    let stats = db.stats().unwrap();
    assert!(stats.episodic_live as usize <= CAP);
    db.backfill_missing_embeddings(None).unwrap();
    let status = db.build_episodic_index().unwrap();
    assert_eq!(status.index_len, status.active_with_vectors, "{status:?}");
    assert_eq!(status.active_with_vectors, status.active, "{status:?}");
    assert_eq!(status.keyword_index_len, Some(status.active), "{status:?}");
    assert_eq!(db.integrity_check().unwrap(), ["ok"]);
    eprintln!(
        "{} writes, {} searches in {RUN_FOR:?}",
        writes.load(Ordering::Relaxed),
        searches.load(Ordering::Relaxed)
    );
}

#[test]
fn a_second_handle_sees_the_first_handles_changes() {
    // Two handles on one file stand for two processes: each keeps its own
    // index and catches up through the revision counter.
    let home = tempfile::tempdir().unwrap();
    let open = || {
        MemoryDb::open_in_home(home.path(), MemoryConfig::default())
            .unwrap()
            .with_embedder(Arc::new(HashEmbedder::new(32)))
    };
    let (a, b) = (open(), open());
    let EpisodicOutcome::Inserted { id, .. } =
        a.write_episodic(&NewEpisode::new("the orchard behind the bakery")).unwrap()
    else {
        panic!()
    };
    let query = EpisodicQuery::new("orchard bakery").mode(RetrievalMode::PureVector);
    assert_eq!(b.search_episodic(&query).unwrap()[0].id, id);
    let keywords = EpisodicQuery::new("orchard bakery").mode(RetrievalMode::Keyword);
    assert_eq!(a.search_episodic(&keywords).unwrap()[0].id, id);
    b.delete_episodic(id).unwrap();
    assert!(a.search_episodic(&query).unwrap().is_empty());
    assert!(a.search_episodic(&keywords).unwrap().is_empty(), "the keyword index caught up with b's delete");
    let status = a.build_episodic_index().unwrap();
    assert_eq!((status.index_len, status.active_with_vectors), (0, 0));
}
