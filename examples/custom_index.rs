//! Plugging a third-party vector engine in behind Cairn's `VectorIndex` seam.
//!
//! Every index Cairn ships (`FlatIndex`, `HnswIndex`, `AutoIndex`)
//! implements `cairn_memory_vector::VectorIndex`: add, remove, top-k
//! search, snapshot and restore, over stable row ids. Here the `hnsw_rs`
//! crate's graph answers the searches; a `FlatIndex` beside it keeps the
//! live vectors, so removal (which the graph does not support), the exact
//! fallback the trait promises and the snapshot come from Cairn's own code.
//! The program checks the adapter against the exact index on 2,000 random
//! vectors: recall@10, removal and a snapshot round trip.
//!
//! ```sh
//! cargo run --example custom_index
//! ```

use std::path::Path;

use cairn_memory_vector::{FlatIndex, Hit, Result, SnapshotExpectation, SnapshotHeader, VectorIndex};
use hnsw_rs::prelude::{DistCosine, Hnsw};
use rand::{Rng, SeedableRng, rngs::StdRng};

/// `hnsw_rs` for the search, Cairn's `FlatIndex` for the live set.
struct HnswRs {
    graph: Hnsw<'static, f32, DistCosine>,
    live: FlatIndex,
    removed: usize,
}

impl HnswRs {
    fn new(dim: usize) -> Result<Self> {
        Ok(HnswRs { graph: Hnsw::new(16, 10_000, 16, 200, DistCosine {}), live: FlatIndex::new(dim)?, removed: 0 })
    }
}

impl VectorIndex for HnswRs {
    fn dim(&self) -> usize {
        self.live.dim()
    }

    fn len(&self) -> usize {
        self.live.len()
    }

    fn contains(&self, id: u64) -> bool {
        self.live.contains(id)
    }

    fn ids(&self) -> Vec<u64> {
        self.live.ids()
    }

    fn add(&mut self, id: u64, vector: &[f32]) -> Result<()> {
        // The flat index validates (dimension, finite, non-zero, new id) first.
        self.live.add(id, vector)?;
        self.graph.insert((vector, id as usize));
        Ok(())
    }

    fn remove(&mut self, id: u64) -> Result<()> {
        self.live.remove(id)?;
        self.removed += 1;
        Ok(())
    }

    fn search(&self, query: &[f32], k: usize) -> Result<Vec<Hit>> {
        let want = k.min(self.len());
        let ef = (want + self.removed).max(64);
        let mut query = query.to_vec();
        cairn_embedder::l2_normalize(&mut query);
        // Scores come from the stored vectors, so they match the exact index.
        let mut hits: Vec<Hit> = self
            .graph
            .search(&query, want + self.removed, ef)
            .into_iter()
            .filter_map(|neighbour| {
                let id = neighbour.d_id as u64;
                self.live.vector(id).map(|stored| Hit { id, cosine: cairn_memory_vector::dot(&query, stored) })
            })
            .collect();
        if hits.len() < want {
            return self.live.search(&query, k);
        }
        hits.sort_by(Hit::rank_cmp);
        hits.truncate(want);
        Ok(hits)
    }

    fn snapshot(&self, path: &Path, space: &str) -> Result<SnapshotHeader> {
        self.live.snapshot(path, space)
    }

    fn restore(path: &Path, expected: &SnapshotExpectation) -> Result<Self> {
        let live = FlatIndex::restore(path, expected)?;
        let mut index = HnswRs::new(live.dim())?;
        for id in live.ids() {
            let vector = live.vector(id).expect("a live id has a vector").to_vec();
            index.add(id, &vector)?;
        }
        Ok(index)
    }
}

fn random_unit(rng: &mut StdRng, dim: usize) -> Vec<f32> {
    let mut vector: Vec<f32> = (0..dim).map(|_| rng.random_range(-1.0..1.0)).collect();
    cairn_embedder::l2_normalize(&mut vector);
    vector
}

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    const DIM: usize = 32;
    let mut rng = StdRng::seed_from_u64(7);
    let mut exact = FlatIndex::new(DIM)?;
    let mut graph = HnswRs::new(DIM)?;
    for id in 0..2_000u64 {
        let vector = random_unit(&mut rng, DIM);
        exact.add(id, &vector)?;
        graph.add(id, &vector)?;
    }
    for id in (0..2_000u64).step_by(10) {
        exact.remove(id)?;
        graph.remove(id)?;
    }

    let queries: Vec<Vec<f32>> = (0..100).map(|_| random_unit(&mut rng, DIM)).collect();
    let recall = |index: &dyn VectorIndex| -> Result<f64> {
        let mut found = 0;
        for query in &queries {
            let truth: Vec<u64> = exact.search(query, 10)?.iter().map(|hit| hit.id).collect();
            let got = index.search(query, 10)?;
            assert!(got.iter().all(|hit| hit.id % 10 != 0), "a removed id came back");
            found += got.iter().filter(|hit| truth.contains(&hit.id)).count();
        }
        Ok(found as f64 / (queries.len() * 10) as f64)
    };
    let graph_recall = recall(&graph)?;
    println!(
        "hnsw_rs behind VectorIndex: {} live vectors, recall@10 {graph_recall:.3} against the exact index",
        graph.len()
    );

    let dir = tempfile::tempdir()?;
    let path = dir.path().join("hnsw_rs.cvi");
    graph.snapshot(&path, "example/32")?;
    let restored = HnswRs::restore(&path, &SnapshotExpectation::from_ids("example/32", DIM, graph.ids()))?;
    let restored_recall = recall(&restored)?;
    println!("restored from its snapshot: {} live vectors, recall@10 {restored_recall:.3}", restored.len());

    assert_eq!((graph.len(), restored.len()), (1_800, 1_800));
    assert!(graph_recall >= 0.9 && restored_recall >= 0.9, "the graph finds the true neighbours");
    Ok(())
}
