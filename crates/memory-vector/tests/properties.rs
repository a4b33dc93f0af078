//! Property tests: HNSW and AutoIndex against FlatIndex as the oracle.

use std::collections::BTreeSet;

use cairn_memory_vector::{AutoIndex, FlatIndex, HnswConfig, HnswIndex, IndexConfig, VectorIndex};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const DIM: usize = 12;

/// A vector near one of eight cluster centres, derived from `seed`.
fn clustered(seed: u64) -> Vec<f32> {
    let mut rng = StdRng::seed_from_u64(seed);
    let centre = (seed % 8) as usize;
    (0..DIM).map(|j| rng.random_range(-0.4f32..0.4) + if j % 8 == centre { 1.0 } else { 0.0 }).collect()
}

#[derive(Debug, Clone)]
enum Op {
    Add(u64),
    /// Remove the live id at this position (modulo the live count).
    Remove(usize),
    Search {
        seed: u64,
        k: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0u64..400).prop_map(Op::Add),
        3 => any::<usize>().prop_map(Op::Remove),
        2 => (any::<u64>(), 1usize..30).prop_map(|(seed, k)| Op::Search { seed, k }),
    ]
}

fn small_hnsw() -> HnswConfig {
    HnswConfig {
        m: 8,
        ef_construction: 64,
        ef_search: 48,
        rebuild_tombstone_ratio: 0.2,
        rebuild_min_tombstones: 5,
        ..HnswConfig::default()
    }
}

/// Runs `ops` on `index` and on a FlatIndex, checking every search.
/// Returns (hits in common with the oracle, oracle hits) for recall.
fn run_against_oracle(index: &mut dyn VectorIndex, ops: &[Op]) -> (usize, usize) {
    let mut oracle = FlatIndex::new(DIM).unwrap();
    let mut removed = BTreeSet::new();
    let (mut found, mut expected) = (0, 0);
    for op in ops {
        match op {
            Op::Add(id) => {
                let vector = clustered(*id);
                let a = index.add(*id, &vector).is_ok();
                let b = oracle.add(*id, &vector).is_ok();
                assert_eq!(a, b, "add {id} disagreed");
                if a {
                    removed.remove(id);
                }
            }
            Op::Remove(pos) => {
                let live = oracle.ids();
                if live.is_empty() {
                    continue;
                }
                let id = live[pos % live.len()];
                index.remove(id).unwrap();
                oracle.remove(id).unwrap();
                removed.insert(id);
            }
            Op::Search { seed, k } => {
                let query = clustered(*seed);
                let got = index.search(&query, *k).unwrap();
                let want = oracle.search(&query, *k).unwrap();
                assert_eq!(got.len(), want.len(), "returned {} hits, min(k, live) is {}", got.len(), want.len());
                for hit in &got {
                    assert!(!removed.contains(&hit.id), "removed id {} returned", hit.id);
                    assert!(oracle.contains(hit.id), "id {} never live", hit.id);
                }
                found += got.iter().filter(|h| want.iter().any(|w| w.id == h.id)).count();
                expected += want.len();
            }
        }
        assert_eq!(index.len(), oracle.len());
    }
    (found, expected)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn hnsw_never_returns_removed_ids_nor_too_few(ops in proptest::collection::vec(op(), 1..400)) {
        let mut index = HnswIndex::new(DIM, small_hnsw()).unwrap();
        let (found, expected) = run_against_oracle(&mut index, &ops);
        if expected >= 50 {
            prop_assert!(found as f64 / expected as f64 >= 0.95, "recall {found}/{expected}");
        }
    }

    #[test]
    fn auto_index_never_returns_removed_ids_nor_too_few(ops in proptest::collection::vec(op(), 1..400)) {
        let config = IndexConfig::new(DIM).with_crossover(60).with_hnsw(small_hnsw());
        let mut index = AutoIndex::new(config).unwrap();
        let (found, expected) = run_against_oracle(&mut index, &ops);
        if expected >= 50 {
            prop_assert!(found as f64 / expected as f64 >= 0.95, "recall {found}/{expected}");
        }
    }
}

/// Recall through several tombstone rebuilds at a size where HNSW is
/// genuinely approximate.
#[test]
fn recall_stays_above_095_through_tombstone_rebuilds() {
    let n = 4000u64;
    let config = HnswConfig { rebuild_tombstone_ratio: 0.1, rebuild_min_tombstones: 50, ..small_hnsw() };
    let mut hnsw = HnswIndex::new(DIM, config).unwrap();
    let mut oracle = FlatIndex::new(DIM).unwrap();
    let vectors: Vec<Vec<f32>> = (0..n).map(clustered).collect();
    let rows: Vec<(u64, &[f32])> = vectors.iter().enumerate().map(|(i, v)| (i as u64, v.as_slice())).collect();
    hnsw.add_batch(&rows).unwrap();
    oracle.add_batch(&rows).unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    let mut next_id = n;
    let mut rebuilds_seen = 0;
    for round in 0..6 {
        // Remove ~8 % and add ~4 % per round.
        let live = oracle.ids();
        for _ in 0..(live.len() / 12) {
            let ids = oracle.ids();
            let id = ids[rng.random_range(0..ids.len())];
            let before = hnsw.tombstones();
            hnsw.remove(id).unwrap();
            oracle.remove(id).unwrap();
            if hnsw.tombstones() < before {
                rebuilds_seen += 1;
            }
        }
        for _ in 0..(live.len() / 25) {
            let v = clustered(next_id);
            hnsw.add(next_id, &v).unwrap();
            oracle.add(next_id, &v).unwrap();
            next_id += 1;
        }
        let (mut found, mut expected) = (0, 0);
        for q in 0..200u64 {
            let query = clustered(1_000_000 + round * 1000 + q);
            let got = hnsw.search(&query, 10).unwrap();
            let want = oracle.search(&query, 10).unwrap();
            assert_eq!(got.len(), 10);
            assert!(got.iter().all(|h| oracle.contains(h.id)));
            found += got.iter().filter(|h| want.iter().any(|w| w.id == h.id)).count();
            expected += want.len();
        }
        let recall = found as f64 / expected as f64;
        assert!(recall >= 0.95, "round {round}: recall {recall}");
    }
    assert!(rebuilds_seen >= 2, "expected rebuilds, saw {rebuilds_seen}");
}
