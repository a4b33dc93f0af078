//! Many threads adding, removing and searching one AutoIndex at once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use cairn_memory_vector::{AutoBackend, AutoIndex, HnswConfig, IndexConfig, dot};

const DIM: usize = 16;

fn vector(id: u64) -> Vec<f32> {
    let mut state = id.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..DIM)
        .map(|j| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5 + if j as u64 == id % DIM as u64 { 1.0 } else { 0.0 }
        })
        .collect()
}

fn unit(v: &[f32]) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter().map(|x| x / norm).collect()
}

/// Event log shared by the threads. `clock` orders events: an id's add
/// *starts* at `add_started[id]`, its removal *completes* at
/// `removed_done[id]`. Ids are never reused.
#[derive(Default)]
struct Log {
    clock: AtomicU64,
    add_started: Mutex<HashMap<u64, u64>>,
    removed_done: Mutex<HashMap<u64, u64>>,
}

#[test]
fn concurrent_writers_and_readers_see_no_torn_state() {
    let config = IndexConfig::new(DIM).with_crossover(300).with_hnsw(HnswConfig {
        m: 8,
        ef_construction: 48,
        ef_search: 48,
        rebuild_tombstone_ratio: 0.15,
        rebuild_min_tombstones: 20,
        ..HnswConfig::default()
    });
    let index = Arc::new(AutoIndex::new(config).unwrap());
    let log = Arc::new(Log::default());
    let stop = Arc::new(AtomicBool::new(false));
    let next_id = Arc::new(AtomicU64::new(0));
    let saw_hnsw = Arc::new(AtomicBool::new(false));

    let mut writers = Vec::new();
    for writer in 0..3u64 {
        let (index, log, next_id) = (index.clone(), log.clone(), next_id.clone());
        writers.push(std::thread::spawn(move || {
            let mut mine = Vec::new();
            for step in 0..700u64 {
                let id = next_id.fetch_add(1, Ordering::SeqCst);
                log.add_started.lock().unwrap().insert(id, log.clock.fetch_add(1, Ordering::SeqCst));
                index.add(id, &vector(id)).unwrap();
                mine.push(id);
                // Remove about a third of what this writer added.
                if (step + writer) % 3 == 0 && mine.len() > 5 {
                    let victim = mine.swap_remove((step as usize * 7) % mine.len());
                    index.remove(victim).unwrap();
                    log.removed_done.lock().unwrap().insert(victim, log.clock.fetch_add(1, Ordering::SeqCst));
                }
            }
            // Then shrink back below half the crossover to exercise the way back.
            for victim in std::mem::take(&mut mine).into_iter().skip(40) {
                index.remove(victim).unwrap();
                log.removed_done.lock().unwrap().insert(victim, log.clock.fetch_add(1, Ordering::SeqCst));
            }
        }));
    }

    let mut readers = Vec::new();
    for reader in 0..4u64 {
        let (index, log, stop, saw_hnsw) = (index.clone(), log.clone(), stop.clone(), saw_hnsw.clone());
        readers.push(std::thread::spawn(move || {
            let mut searches = 0u64;
            let mut q = reader;
            while !stop.load(Ordering::SeqCst) {
                q += 4;
                let query = vector(q % 5000);
                let started = log.clock.fetch_add(1, Ordering::SeqCst);
                if index.backend() == AutoBackend::Hnsw {
                    saw_hnsw.store(true, Ordering::SeqCst);
                }
                let hits = index.search(&query, 10).unwrap();
                let finished = log.clock.fetch_add(1, Ordering::SeqCst);
                let adds = log.add_started.lock().unwrap();
                let removals = log.removed_done.lock().unwrap();
                for hit in &hits {
                    // Live at some point during the call: its add had begun
                    // before the search ended ...
                    let added = adds.get(&hit.id).copied().unwrap_or(u64::MAX);
                    assert!(added < finished, "id {} returned before its add began", hit.id);
                    // ... and it had not been removed before the search began.
                    if let Some(&removed) = removals.get(&hit.id) {
                        assert!(removed > started, "id {} returned after its removal completed", hit.id);
                    }
                    // The score belongs to that id's vector: no torn rows.
                    let exact = dot(&unit(&query), &unit(&vector(hit.id)));
                    assert!((hit.cosine - exact).abs() < 1e-4, "id {} score {} vs {}", hit.id, hit.cosine, exact);
                }
                assert!(hits.windows(2).all(|w| w[0].cosine >= w[1].cosine));
                searches += 1;
            }
            searches
        }));
    }

    for writer in writers {
        writer.join().unwrap();
    }
    stop.store(true, Ordering::SeqCst);
    let searches: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    assert!(searches > 0);
    assert!(saw_hnsw.load(Ordering::SeqCst), "the index never crossed into HNSW");

    // Final state agrees with the log exactly.
    let added = log.add_started.lock().unwrap().len();
    let removed = log.removed_done.lock().unwrap().len();
    assert_eq!(index.len(), added - removed);
    assert_eq!(index.backend(), AutoBackend::Flat);
    let removals = log.removed_done.lock().unwrap();
    for id in index.ids() {
        assert!(!removals.contains_key(&id));
    }
    let hits = index.search(&vector(1), 1000).unwrap();
    assert_eq!(hits.len(), index.len());
}
