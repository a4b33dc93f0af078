//! Two `MemoryDb` handles on one file race preservation-mode (import)
//! episodic writes for the last free slot under the cap: exactly one wins,
//! the other is told the store is full, and the cap holds.

use std::sync::{Arc, Barrier};

use cairn_memory_core::{EpisodicOutcome, MemoryConfig, MemoryDb, NewEpisode};

const CAP: usize = 5;
const ROUNDS: usize = 12;

#[test]
fn two_stores_racing_for_the_last_preservation_slot_admit_exactly_one() {
    for round in 0..ROUNDS {
        let home = tempfile::tempdir().unwrap();
        let config = MemoryConfig { episodic_cap: CAP, ..MemoryConfig::default() };
        let stores: Vec<Arc<MemoryDb>> =
            (0..2).map(|_| Arc::new(MemoryDb::open_in_home(home.path(), config.clone()).unwrap())).collect();
        for index in 0..CAP - 1 {
            let episode = NewEpisode::new(format!("Existing fragment number {index} of round {round}"));
            assert!(matches!(stores[0].write_episodic(&episode).unwrap(), EpisodicOutcome::Inserted { .. }));
        }
        let barrier = Arc::new(Barrier::new(2));
        let threads: Vec<_> = stores
            .iter()
            .enumerate()
            .map(|(writer, store)| {
                let store = store.clone();
                let barrier = barrier.clone();
                std::thread::spawn(move || {
                    let episode = NewEpisode::new(format!("Imported fragment from writer {writer} in round {round}"))
                        .preserve(true);
                    barrier.wait();
                    store.write_episodic(&episode).unwrap()
                })
            })
            .collect();
        let outcomes: Vec<EpisodicOutcome> = threads.into_iter().map(|thread| thread.join().unwrap()).collect();
        let inserted = outcomes.iter().filter(|outcome| matches!(outcome, EpisodicOutcome::Inserted { .. })).count();
        let full = outcomes
            .iter()
            .filter(|outcome| matches!(outcome, EpisodicOutcome::StoreFull { cap } if *cap == CAP))
            .count();
        assert_eq!((inserted, full), (1, 1), "round {round}: {outcomes:?}");
        for store in &stores {
            let stats = store.stats().unwrap();
            assert_eq!(
                (stats.episodic_live, stats.episodic_deleted),
                (CAP as i64, 0),
                "round {round}: nothing evicted"
            );
        }
        // Nothing evicted: every existing row is still there.
        let texts: Vec<String> = stores[1].list_episodic(100, 0).unwrap().into_iter().map(|row| row.text).collect();
        assert_eq!(texts.iter().filter(|text| text.starts_with("Existing")).count(), CAP - 1);
    }
}
