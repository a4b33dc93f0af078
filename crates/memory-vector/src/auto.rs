//! [`AutoIndex`]: exact below the crossover, HNSW above, shareable by `&self`.

use std::path::Path;

use parking_lot::{Mutex, RwLock};

use crate::constants::AUTO_HYSTERESIS_DIVISOR;
use crate::distance::normalized;
use crate::error::{Result, VectorError};
use crate::flat::FlatIndex;
use crate::hnsw::{HnswConfig, HnswIndex, IndexConfig};
use crate::index::{Hit, VectorIndex};
use crate::snapshot::{SnapshotExpectation, SnapshotHeader, SnapshotKind, read_header};

/// Which structure currently answers an [`AutoIndex`]'s searches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AutoBackend {
    /// The exact scan ([`FlatIndex`]).
    Flat,
    /// The HNSW graph ([`HnswIndex`]).
    Hnsw,
}

/// How [`AutoIndex::open_or_rebuild`] obtained its index.
#[derive(Debug)]
#[non_exhaustive]
pub enum OpenOutcome {
    /// The snapshot matched the caller's rows and was loaded.
    Loaded,
    /// There was no snapshot; the index was built from the rows.
    BuiltFresh,
    /// The snapshot was unusable (the error says why); the index was
    /// rebuilt from the rows.
    Rebuilt(VectorError),
}

enum Inner {
    Flat(FlatIndex),
    Hnsw(HnswIndex),
}

impl Inner {
    fn as_index(&self) -> &dyn VectorIndex {
        match self {
            Inner::Flat(index) => index,
            Inner::Hnsw(index) => index,
        }
    }

    fn backend(&self) -> AutoBackend {
        match self {
            Inner::Flat(_) => AutoBackend::Flat,
            Inner::Hnsw(_) => AutoBackend::Hnsw,
        }
    }
}

/// A [`VectorIndex`] that is exact below [`IndexConfig::crossover`] live
/// vectors and HNSW above, switching transparently, and that many threads
/// can use at once through `&self`.
///
/// Concurrency: searches take a shared read lock, so readers never block
/// each other. Writers are serialised by a separate writer mutex and hold
/// the exclusive lock only for one insert or one tombstone. Expensive work —
/// moving to the graph at the crossover, tombstone rebuilds, moving back
/// below half the crossover — is built beside the live structure while
/// readers keep searching it, then swapped in under the exclusive lock
/// (an `O(1)` pointer swap). Other writers wait for such a rebuild; readers
/// do not.
pub struct AutoIndex {
    config: IndexConfig,
    state: RwLock<Inner>,
    writer: Mutex<()>,
}

impl std::fmt::Debug for AutoIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AutoIndex")
            .field("config", &self.config)
            .field("backend", &self.backend())
            .field("len", &self.len())
            .finish()
    }
}

impl AutoIndex {
    /// An empty index.
    pub fn new(config: IndexConfig) -> Result<Self> {
        let flat = Self::empty_flat(&config)?;
        config.hnsw.validate()?;
        Ok(AutoIndex { config, state: RwLock::new(Inner::Flat(flat)), writer: Mutex::new(()) })
    }

    /// Builds from `(id, vector)` rows in one go (parallel graph build above
    /// the crossover). All rows are validated first; nothing is built if
    /// one is invalid.
    pub fn build(config: IndexConfig, rows: &[(u64, &[f32])]) -> Result<Self> {
        let _span = tracing::debug_span!("auto_build", n = rows.len()).entered();
        let index = AutoIndex::new(config)?;
        index.add_batch(rows)?;
        Ok(index)
    }

    /// Builds from `ids` and their vectors laid out row-major in one buffer
    /// (`data.len() == ids.len() × dim`), normalised in place: one copy of
    /// the vectors where [`AutoIndex::build`] holds several, which is what a
    /// store of a million rows can afford. Nothing is built if an id
    /// repeats or a vector is invalid.
    pub fn build_flat(config: IndexConfig, ids: Vec<u64>, mut data: Vec<f32>) -> Result<Self> {
        let _span = tracing::debug_span!("auto_build_flat", n = ids.len()).entered();
        let dim = config.dim;
        if data.len() != ids.len() * dim {
            return Err(VectorError::InvalidConfig(format!(
                "{} ids for {} values of {dim}-dimensional vectors",
                ids.len(),
                data.len()
            )));
        }
        let mut seen = std::collections::HashSet::with_capacity(ids.len());
        if let Some(id) = ids.iter().find(|id| !seen.insert(**id)) {
            return Err(VectorError::DuplicateId(*id));
        }
        drop(seen);
        for row in data.chunks_exact_mut(dim.max(1)) {
            let unit = normalized(row, dim)?;
            row.copy_from_slice(&unit);
        }
        let index = AutoIndex::new(config)?;
        if !ids.is_empty() {
            let fresh = index.structure_for(ids, data)?;
            *index.state.write() = fresh;
        }
        Ok(index)
    }

    fn empty_flat(config: &IndexConfig) -> Result<FlatIndex> {
        Ok(FlatIndex::new(config.dim)?.with_parallel_threshold(config.flat_parallel_threshold))
    }

    /// The graph parameters for a graph of `rows` live vectors.
    fn hnsw_config(&self, rows: usize) -> HnswConfig {
        // Rebuilds happen here, outside the exclusive lock.
        let full_vectors = self.config.graph_keeps_vectors(rows);
        HnswConfig { auto_rebuild: false, full_vectors, ..self.config.hnsw.clone() }
    }

    /// Whether the similarities this index returns are exact cosines; not
    /// so once a graph of more than
    /// [`IndexConfig::full_vectors_max`] vectors keeps codes only.
    pub fn exact(&self) -> bool {
        match &*self.state.read() {
            Inner::Flat(_) => true,
            Inner::Hnsw(index) => index.exact(),
        }
    }

    /// The configuration in use.
    pub fn config(&self) -> &IndexConfig {
        &self.config
    }

    /// Which structure answers searches right now.
    pub fn backend(&self) -> AutoBackend {
        self.state.read().backend()
    }

    /// Vector dimension.
    pub fn dim(&self) -> usize {
        self.config.dim
    }

    /// Number of live vectors.
    pub fn len(&self) -> usize {
        self.state.read().as_index().len()
    }

    /// Whether no vector is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `id` is live.
    pub fn contains(&self, id: u64) -> bool {
        self.state.read().as_index().contains(id)
    }

    /// The live ids, in no particular order.
    pub fn ids(&self) -> Vec<u64> {
        self.state.read().as_index().ids()
    }

    /// Approximate heap bytes held by the index.
    pub fn memory_bytes(&self) -> usize {
        match &*self.state.read() {
            Inner::Flat(index) => index.memory_bytes(),
            Inner::Hnsw(index) => index.memory_bytes(),
        }
    }

    /// See [`VectorIndex::search`]. Takes only the shared lock.
    pub fn search(&self, query: &[f32], k: usize) -> Result<Vec<Hit>> {
        let unit = normalized(query, self.config.dim)?;
        let state = self.state.read();
        Ok(match &*state {
            Inner::Flat(index) => index.search_normalized(&unit, k),
            Inner::Hnsw(index) => index.search_normalized(&unit, k),
        })
    }

    /// The cosine between `query` and each of `ids`' stored vectors
    /// (`None` for an id that is not live), without a search. Takes only
    /// the shared lock.
    pub fn similarities(&self, query: &[f32], ids: &[u64]) -> Result<Vec<Option<f32>>> {
        let unit = normalized(query, self.config.dim)?;
        let state = self.state.read();
        Ok(ids
            .iter()
            .map(|id| match &*state {
                Inner::Flat(index) => index.stored(*id).map(|vector| crate::dot(&unit, vector)),
                Inner::Hnsw(index) => index.similarity_to(&unit, *id),
            })
            .collect())
    }

    /// Whether `vector` is the one row `id` was added with, as far as the
    /// index can tell (`None` when it does not hold the row): equal to the
    /// stored vector within float rounding, or, in an index that keeps
    /// codes only, encoding to the row's SQ8 codes within one level in
    /// every dimension. A caller reading full vectors from elsewhere (a
    /// file) checks them with this before trusting them. Takes only the
    /// shared lock.
    pub fn holds_vector(&self, id: u64, vector: &[f32]) -> Result<Option<bool>> {
        if vector.len() != self.config.dim {
            return Err(VectorError::DimensionMismatch { expected: self.config.dim, actual: vector.len() });
        }
        // A vector with a component that is not finite, or of no length,
        // is no row's: its scale is not finite and no comparison holds.
        let scale = crate::distance::unit_scale_unchecked(vector);
        let state = self.state.read();
        Ok(match &*state {
            Inner::Flat(index) => {
                index.stored(id).map(|stored| stored.iter().zip(vector).all(|(a, b)| (a - b * scale).abs() <= 1e-5))
            }
            Inner::Hnsw(index) => index.holds_vector(id, vector, scale),
        })
    }

    /// See [`VectorIndex::add`]. Holds the exclusive lock for one insert;
    /// the add that crosses the crossover also builds the graph, outside it.
    /// An insert that refits the SQ8 code grid (when the table has doubled,
    /// up to [`QUANT_RETRAIN_MAX`](crate::constants::QUANT_RETRAIN_MAX)
    /// rows, or when too many rows fell off the grid) re-codes every row
    /// under the lock, in time linear in the row count.
    pub fn add(&self, id: u64, vector: &[f32]) -> Result<()> {
        let unit = normalized(vector, self.config.dim)?;
        let _writer = self.writer.lock();
        {
            let mut state = self.state.write();
            match &mut *state {
                Inner::Flat(index) => index.push_normalized(id, &unit)?,
                Inner::Hnsw(index) => index.add_normalized(id, &unit)?,
            }
        }
        self.maintain()
    }

    /// Adds many rows. Every row is validated first (nothing is added if one
    /// is invalid or a duplicate). Into an empty index the rows are bulk
    /// built beside the live structure; otherwise they are inserted one at
    /// a time, each under its own short exclusive lock.
    pub fn add_batch(&self, rows: &[(u64, &[f32])]) -> Result<()> {
        let _span = tracing::debug_span!("auto_add_batch", n = rows.len()).entered();
        let mut seen = std::collections::HashSet::with_capacity(rows.len());
        let mut units = Vec::with_capacity(rows.len());
        let _writer = self.writer.lock();
        {
            let state = self.state.read();
            for (id, vector) in rows {
                if state.as_index().contains(*id) || !seen.insert(*id) {
                    return Err(VectorError::DuplicateId(*id));
                }
                units.push(normalized(vector, self.config.dim)?);
            }
        }
        if self.state.read().as_index().is_empty() {
            let ids: Vec<u64> = rows.iter().map(|(id, _)| *id).collect();
            let data: Vec<f32> = units.concat();
            let fresh = self.structure_for(ids, data)?;
            let old = std::mem::replace(&mut *self.state.write(), fresh);
            drop(old);
            return Ok(());
        }
        for ((id, _), unit) in rows.iter().zip(&units) {
            let mut state = self.state.write();
            match &mut *state {
                Inner::Flat(index) => index.push_normalized(*id, unit)?,
                Inner::Hnsw(index) => index.add_normalized(*id, unit)?,
            }
        }
        self.maintain()
    }

    /// A graph over these (normalised, unique) rows.
    fn graph_of(&self, ids: Vec<u64>, data: Vec<f32>) -> Result<Inner> {
        let config = self.hnsw_config(ids.len());
        Ok(Inner::Hnsw(HnswIndex::from_normalized(self.config.dim, config, ids, data)?))
    }

    /// Builds the right structure for these (normalised, unique) rows.
    fn structure_for(&self, ids: Vec<u64>, data: Vec<f32>) -> Result<Inner> {
        if ids.len() > self.config.crossover {
            self.graph_of(ids, data)
        } else {
            let mut flat = Self::empty_flat(&self.config)?;
            for (id, unit) in ids.iter().zip(data.chunks_exact(self.config.dim)) {
                flat.push_normalized(*id, unit)?;
            }
            Ok(Inner::Flat(flat))
        }
    }

    /// See [`VectorIndex::remove`]. Holds the exclusive lock for one
    /// tombstone (or one swap-remove).
    pub fn remove(&self, id: u64) -> Result<()> {
        let _writer = self.writer.lock();
        {
            let mut state = self.state.write();
            match &mut *state {
                Inner::Flat(index) => index.remove(id)?,
                Inner::Hnsw(index) => index.tombstone(id)?,
            }
        }
        self.maintain()
    }

    /// Switches structure or rebuilds when thresholds say so. Called with
    /// the writer mutex held, so nothing changes the contents meanwhile:
    /// the new structure is built under the shared lock (readers carry on)
    /// and swapped in under the exclusive one.
    fn maintain(&self) -> Result<()> {
        let replacement = {
            let state = self.state.read();
            match &*state {
                Inner::Flat(flat) if flat.len() > self.config.crossover => {
                    let _span = tracing::debug_span!("auto_to_hnsw", n = flat.len()).entered();
                    let ids: Vec<u64> = flat.iter().map(|(id, _)| id).collect();
                    let mut data = Vec::with_capacity(ids.len() * self.config.dim);
                    for (_, unit) in flat.iter() {
                        data.extend_from_slice(unit);
                    }
                    drop(state);
                    Some(self.graph_of(ids, data)?)
                }
                Inner::Hnsw(hnsw) if hnsw.len() < self.config.crossover / AUTO_HYSTERESIS_DIVISOR => {
                    let _span = tracing::debug_span!("auto_to_flat", n = hnsw.len()).entered();
                    let (ids, data) = hnsw.live_vectors();
                    drop(state);
                    let mut flat = Self::empty_flat(&self.config)?;
                    for (id, unit) in ids.iter().zip(data.chunks_exact(self.config.dim)) {
                        flat.push_normalized(*id, unit)?;
                    }
                    Some(Inner::Flat(flat))
                }
                Inner::Hnsw(hnsw) if hnsw.needs_rebuild() => {
                    let (ids, data) = hnsw.live_vectors();
                    drop(state);
                    Some(self.graph_of(ids, data)?)
                }
                _ => None,
            }
        };
        if let Some(fresh) = replacement {
            tracing::debug!(backend = ?fresh.backend(), "swapping in rebuilt index");
            let old = std::mem::replace(&mut *self.state.write(), fresh);
            drop(old);
        }
        Ok(())
    }

    /// Writes a snapshot of whichever structure is live (see
    /// [`VectorIndex::snapshot`]). Takes the writer mutex, so the snapshot
    /// is consistent; readers carry on.
    pub fn snapshot(&self, path: &Path, space: &str) -> Result<SnapshotHeader> {
        let _writer = self.writer.lock();
        let state = self.state.read();
        state.as_index().snapshot(path, space)
    }

    /// Loads a snapshot of either kind written by [`snapshot`](Self::snapshot),
    /// validated against `expected`.
    pub fn restore(path: &Path, expected: &SnapshotExpectation, config: IndexConfig) -> Result<Self> {
        let _span = tracing::debug_span!("auto_restore", path = %path.display()).entered();
        if config.dim != expected.dim {
            return Err(VectorError::InvalidConfig(format!(
                "index dimension {} differs from the expected {}",
                config.dim, expected.dim
            )));
        }
        let header = read_header(path)?;
        let inner = match header.kind {
            SnapshotKind::Flat => {
                Inner::Flat(FlatIndex::restore(path, expected)?.with_parallel_threshold(config.flat_parallel_threshold))
            }
            SnapshotKind::Hnsw | SnapshotKind::HnswCodes => {
                let hnsw = HnswConfig { auto_rebuild: false, ..config.hnsw.clone() };
                let mut index = HnswIndex::restore_with_config(path, expected, hnsw)?;
                // A snapshot with the full vectors, of more than this
                // configuration keeps them for: keep the codes only.
                if index.exact() && (!config.hnsw.full_vectors || index.len() > config.full_vectors_max) {
                    index.drop_vectors();
                }
                Inner::Hnsw(index)
            }
        };
        let index = AutoIndex { config, state: RwLock::new(inner), writer: Mutex::new(()) };
        {
            // A snapshot taken under another crossover may be the wrong kind.
            let _writer = index.writer.lock();
            index.maintain()?;
        }
        Ok(index)
    }

    /// Loads the snapshot at `path` if it matches `expected`; otherwise
    /// (missing, damaged, other rows or embedding space) builds the index
    /// from `rows()`, which should yield the caller's stored vectors.
    /// Never fails because of the snapshot; only invalid rows fail.
    pub fn open_or_rebuild<F>(
        path: &Path,
        expected: &SnapshotExpectation,
        config: IndexConfig,
        rows: F,
    ) -> Result<(Self, OpenOutcome)>
    where
        F: FnOnce() -> Vec<(u64, Vec<f32>)>,
    {
        let outcome = if path.exists() {
            match AutoIndex::restore(path, expected, config.clone()) {
                Ok(index) => return Ok((index, OpenOutcome::Loaded)),
                Err(e @ VectorError::InvalidConfig(_)) => return Err(e),
                Err(e) => {
                    tracing::info!(error = %e, "vector snapshot unusable, rebuilding from rows");
                    OpenOutcome::Rebuilt(e)
                }
            }
        } else {
            OpenOutcome::BuiltFresh
        };
        let owned = rows();
        let borrowed: Vec<(u64, &[f32])> = owned.iter().map(|(id, v)| (*id, v.as_slice())).collect();
        Ok((AutoIndex::build(config, &borrowed)?, outcome))
    }
}

impl VectorIndex for AutoIndex {
    fn dim(&self) -> usize {
        AutoIndex::dim(self)
    }
    fn len(&self) -> usize {
        AutoIndex::len(self)
    }
    fn contains(&self, id: u64) -> bool {
        AutoIndex::contains(self, id)
    }
    fn ids(&self) -> Vec<u64> {
        AutoIndex::ids(self)
    }
    fn add(&mut self, id: u64, vector: &[f32]) -> Result<()> {
        AutoIndex::add(self, id, vector)
    }
    fn add_batch(&mut self, items: &[(u64, &[f32])]) -> Result<()> {
        AutoIndex::add_batch(self, items)
    }
    fn remove(&mut self, id: u64) -> Result<()> {
        AutoIndex::remove(self, id)
    }
    fn search(&self, query: &[f32], k: usize) -> Result<Vec<Hit>> {
        AutoIndex::search(self, query, k)
    }
    fn snapshot(&self, path: &Path, space: &str) -> Result<SnapshotHeader> {
        AutoIndex::snapshot(self, path, space)
    }
    fn restore(path: &Path, expected: &SnapshotExpectation) -> Result<Self> {
        AutoIndex::restore(path, expected, IndexConfig::new(expected.dim))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vector(seed: u64, dim: usize) -> Vec<f32> {
        (0..dim).map(|j| (((seed + 1) * (j as u64 + 3) * 2_654_435_761) % 1000) as f32 / 500.0 - 1.0).collect()
    }

    fn config(dim: usize, crossover: usize) -> IndexConfig {
        IndexConfig::new(dim).with_crossover(crossover).with_hnsw(HnswConfig {
            m: 8,
            ef_construction: 64,
            ef_search: 64,
            rebuild_min_tombstones: 8,
            ..HnswConfig::default()
        })
    }

    #[test]
    fn switches_to_hnsw_above_crossover_and_back_below_half() {
        let dim = 8;
        let index = AutoIndex::new(config(dim, 40)).unwrap();
        for id in 0..40u64 {
            index.add(id, &vector(id, dim)).unwrap();
        }
        assert_eq!(index.backend(), AutoBackend::Flat);
        index.add(40, &vector(40, dim)).unwrap();
        assert_eq!(index.backend(), AutoBackend::Hnsw);
        assert_eq!(index.len(), 41);
        assert_eq!(index.search(&vector(17, dim), 1).unwrap()[0].id, 17);
        // Hysteresis: stays HNSW down to 20 live vectors.
        for id in 0..21u64 {
            index.remove(id).unwrap();
        }
        assert_eq!(index.backend(), AutoBackend::Hnsw);
        index.remove(21).unwrap();
        assert_eq!(index.backend(), AutoBackend::Flat);
        assert_eq!(index.len(), 19);
        let hits = index.search(&vector(30, dim), 100).unwrap();
        assert_eq!(hits.len(), 19);
        assert!(hits.iter().all(|h| h.id >= 22));
    }

    #[test]
    fn similarities_equal_the_exact_cosines_on_both_structures() {
        let dim = 8;
        let vectors: Vec<Vec<f32>> = (0..100u64).map(|i| vector(i, dim)).collect();
        let rows: Vec<(u64, &[f32])> = vectors.iter().enumerate().map(|(i, v)| (i as u64, v.as_slice())).collect();
        let unit = |v: &[f32]| {
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.iter().map(|x| x / norm).collect::<Vec<f32>>()
        };
        for crossover in [50, 500] {
            let index = AutoIndex::build(config(dim, crossover), &rows).unwrap();
            index.remove(7).unwrap();
            let query = vector(1_000, dim);
            let got = index.similarities(&query, &[3, 7, 99, 12_345]).unwrap();
            let exact = |id: usize| crate::dot(&unit(&query), &unit(&vectors[id]));
            assert!((got[0].unwrap() - exact(3)).abs() < 1e-5, "{:?}", index.backend());
            assert_eq!(got[1], None, "a removed id has no similarity");
            assert!((got[2].unwrap() - exact(99)).abs() < 1e-5);
            assert_eq!(got[3], None, "an unknown id has no similarity");
            assert!(matches!(index.similarities(&[1.0; 3], &[3]), Err(VectorError::DimensionMismatch { .. })));
        }
    }

    #[test]
    fn batch_build_picks_structure_and_validates_first() {
        let dim = 8;
        let vectors: Vec<Vec<f32>> = (0..100u64).map(|i| vector(i, dim)).collect();
        let rows: Vec<(u64, &[f32])> = vectors.iter().enumerate().map(|(i, v)| (i as u64, v.as_slice())).collect();
        let big = AutoIndex::build(config(dim, 50), &rows).unwrap();
        assert_eq!(big.backend(), AutoBackend::Hnsw);
        let small = AutoIndex::build(config(dim, 500), &rows).unwrap();
        assert_eq!(small.backend(), AutoBackend::Flat);
        let bad = [0.0f32; 8];
        let mut with_bad = rows.clone();
        with_bad.push((1000, &bad));
        let index = AutoIndex::new(config(dim, 50)).unwrap();
        assert!(matches!(index.add_batch(&with_bad), Err(VectorError::ZeroVector)));
        assert!(index.is_empty());
        assert!(matches!(index.add_batch(&[rows[0], rows[0]]), Err(VectorError::DuplicateId(0))));
        assert!(index.is_empty());
    }

    #[test]
    fn open_or_rebuild_loads_matching_and_rebuilds_stale_snapshots() {
        let dim = 8;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index.cvi");
        let rows: Vec<(u64, Vec<f32>)> = (0..80u64).map(|i| (i, vector(i, dim))).collect();
        let expected = SnapshotExpectation::from_ids("m/8", dim, rows.iter().map(|(id, _)| *id));

        let (index, outcome) = AutoIndex::open_or_rebuild(&path, &expected, config(dim, 50), || rows.clone()).unwrap();
        assert!(matches!(outcome, OpenOutcome::BuiltFresh));
        index.snapshot(&path, "m/8").unwrap();

        let (loaded, outcome) =
            AutoIndex::open_or_rebuild(&path, &expected, config(dim, 50), || unreachable!()).unwrap();
        assert!(matches!(outcome, OpenOutcome::Loaded), "{outcome:?}");
        assert_eq!(loaded.backend(), AutoBackend::Hnsw);
        assert_eq!(loaded.search(&vector(5, dim), 3).unwrap(), index.search(&vector(5, dim), 3).unwrap());

        // The caller's rows changed since the snapshot: rebuild.
        let fewer: Vec<(u64, Vec<f32>)> = rows[..60].to_vec();
        let expected_fewer = SnapshotExpectation::from_ids("m/8", dim, fewer.iter().map(|(id, _)| *id));
        let (rebuilt, outcome) =
            AutoIndex::open_or_rebuild(&path, &expected_fewer, config(dim, 50), || fewer.clone()).unwrap();
        assert!(matches!(outcome, OpenOutcome::Rebuilt(VectorError::SnapshotMismatch { .. })), "{outcome:?}");
        assert_eq!(rebuilt.len(), 60);

        // A damaged manifest: rebuild too.
        std::fs::write(&path, b"not a snapshot").unwrap();
        let (_, outcome) = AutoIndex::open_or_rebuild(&path, &expected, config(dim, 50), || rows.clone()).unwrap();
        assert!(matches!(outcome, OpenOutcome::Rebuilt(VectorError::CorruptSnapshot { .. })), "{outcome:?}");
    }

    #[test]
    fn restore_switches_kind_when_crossover_changed() {
        let dim = 8;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index.cvi");
        let rows: Vec<(u64, Vec<f32>)> = (0..80u64).map(|i| (i, vector(i, dim))).collect();
        let borrowed: Vec<(u64, &[f32])> = rows.iter().map(|(id, v)| (*id, v.as_slice())).collect();
        let flat = AutoIndex::build(config(dim, 500), &borrowed).unwrap();
        flat.snapshot(&path, "m/8").unwrap();
        let expected = SnapshotExpectation::from_ids("m/8", dim, 0..80u64);
        let restored = AutoIndex::restore(&path, &expected, config(dim, 50)).unwrap();
        assert_eq!(restored.backend(), AutoBackend::Hnsw);
        assert_eq!(restored.len(), 80);
    }

    /// Unit vectors in 24 clusters, as sentence embeddings group by topic.
    fn clustered(count: u64, dim: usize) -> Vec<(u64, Vec<f32>)> {
        (0..count)
            .map(|id| {
                let centre = crate::distance::random_unit(id % 24, dim);
                let noise = crate::distance::random_unit(1_000 + id, dim);
                let mixed: Vec<f32> = centre.iter().zip(&noise).map(|(c, n)| c + 0.6 * n).collect();
                (id, normalized(&mixed, dim).unwrap())
            })
            .collect()
    }

    fn borrowed(rows: &[(u64, Vec<f32>)]) -> Vec<(u64, &[f32])> {
        rows.iter().map(|(id, vector)| (*id, vector.as_slice())).collect()
    }

    #[test]
    fn a_graph_above_the_full_vectors_limit_keeps_codes_only_and_still_finds_the_neighbours() {
        let dim = 48;
        let rows = clustered(3_000, dim);
        let full = AutoIndex::build(config(dim, 100), &borrowed(&rows)).unwrap();
        let coded = AutoIndex::build(config(dim, 100).with_full_vectors_max(2_000), &borrowed(&rows)).unwrap();
        assert!(full.exact() && !coded.exact(), "3,000 vectors are above a limit of 2,000");
        assert!(
            full.memory_bytes() - coded.memory_bytes() >= rows.len() * dim * 4 * 95 / 100,
            "codes only: {} bytes against {}: the full vectors are not all gone",
            coded.memory_bytes(),
            full.memory_bytes()
        );
        let (mut found, mut found_full, mut wanted, mut worst_error) = (0, 0, 0, 0.0f32);
        for probe in 0..60u64 {
            let query = crate::distance::random_unit(50_000 + probe, dim);
            let exact: Vec<u64> = {
                let mut all: Vec<(u64, f32)> = rows.iter().map(|(id, v)| (*id, crate::dot(&query, v))).collect();
                all.sort_by(|a, b| b.1.total_cmp(&a.1));
                all.into_iter().take(10).map(|(id, _)| id).collect()
            };
            let hits = coded.search(&query, 10).unwrap();
            found += hits.iter().filter(|hit| exact.contains(&hit.id)).count();
            found_full += full.search(&query, 10).unwrap().iter().filter(|hit| exact.contains(&hit.id)).count();
            wanted += exact.len();
            for hit in &hits {
                let cosine = crate::dot(&query, &rows[hit.id as usize].1);
                worst_error = worst_error.max((hit.cosine - cosine).abs());
            }
            let scored = coded.similarities(&query, &[exact[0], 99_999]).unwrap();
            assert!((scored[0].unwrap() - crate::dot(&query, &rows[exact[0] as usize].1)).abs() < 0.02);
            assert_eq!(scored[1], None, "an unknown id has no similarity");
        }
        let (recall, recall_full) = (found as f64 / wanted as f64, found_full as f64 / wanted as f64);
        assert!(recall >= recall_full - 0.05, "recall@10 from codes alone {recall}, with the vectors {recall_full}");
        assert!(worst_error < 0.02, "a similarity from codes is off by {worst_error}");
    }

    #[test]
    fn an_index_knows_its_rows_vectors_from_any_other() {
        let dim = 48;
        let rows = clustered(3_000, dim);
        let small = AutoIndex::build(config(dim, 5_000), &borrowed(&rows[..200])).unwrap();
        let coded = AutoIndex::build(config(dim, 100).with_full_vectors_max(2_000), &borrowed(&rows)).unwrap();
        let full = AutoIndex::build(config(dim, 100), &borrowed(&rows)).unwrap();
        assert!(matches!(small.backend(), AutoBackend::Flat) && !coded.exact() && full.exact());
        // The configuration says beforehand which of them keeps codes only.
        for (index, rows) in [(&small, 200), (&coded, rows.len()), (&full, rows.len())] {
            assert_eq!(index.config().keeps_codes_only(rows), !index.exact());
        }
        for index in [&small, &coded, &full] {
            for (id, vector) in rows.iter().take(200) {
                assert_eq!(index.holds_vector(*id, vector).unwrap(), Some(true), "row {id}'s own vector");
                // Its neighbour in the same cluster, and a vector of the row scaled (the
                // index compares directions).
                let other = &rows[(*id as usize + 1) % 200].1;
                assert_eq!(index.holds_vector(*id, other).unwrap(), Some(false), "row {id} holds another vector");
                let scaled: Vec<f32> = vector.iter().map(|x| x * 3.0).collect();
                assert_eq!(index.holds_vector(*id, &scaled).unwrap(), Some(true));
            }
            // A vector nudged in one dimension by a tenth.
            let mut nudged = rows[7].1.clone();
            nudged[5] += 0.1;
            assert_eq!(index.holds_vector(7, &nudged).unwrap(), Some(false));
            let mut broken = rows[7].1.clone();
            broken[3] = f32::NAN;
            assert_eq!(index.holds_vector(7, &broken).unwrap(), Some(false), "a component that is not a number");
            assert_eq!(index.holds_vector(7, &vec![0.0; dim]).unwrap(), Some(false), "a vector of no length");
            assert_eq!(index.holds_vector(99_999, &rows[0].1).unwrap(), None, "an unknown id");
            assert!(index.holds_vector(7, &[1.0; 3]).is_err(), "a vector of another width");
        }
    }

    #[test]
    fn a_codes_only_graph_survives_a_snapshot_removals_and_a_rebuild() {
        let dim = 32;
        let rows = clustered(1_200, dim);
        let index = AutoIndex::build(config(dim, 100).with_full_vectors_max(500), &borrowed(&rows)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("codes.idx");
        let header = index.snapshot(&path, "space").unwrap();
        assert_eq!(header.kind, SnapshotKind::HnswCodes);
        assert_eq!(read_header(&path).unwrap().kind, SnapshotKind::HnswCodes);
        let expected = SnapshotExpectation::from_ids("space", dim, rows.iter().map(|(id, _)| *id));
        let restored = AutoIndex::restore(&path, &expected, config(dim, 100).with_full_vectors_max(500)).unwrap();
        assert!(!restored.exact());
        // A snapshot with the full vectors restored under a lower limit keeps codes only.
        let full = AutoIndex::build(config(dim, 100), &borrowed(&rows)).unwrap();
        full.snapshot(&path, "space").unwrap();
        let reloaded = AutoIndex::restore(&path, &expected, config(dim, 100).with_full_vectors_max(500)).unwrap();
        assert!(!reloaded.exact());
        assert!(reloaded.memory_bytes() + rows.len() * dim * 4 * 95 / 100 <= full.memory_bytes());
        assert_eq!(reloaded.search(&rows[5].1, 1).unwrap()[0].id, 5);
        index.snapshot(&path, "space").unwrap();
        let query = &rows[77].1;
        assert_eq!(restored.search(query, 5).unwrap(), index.search(query, 5).unwrap(), "the same answers");
        // Enough removals to rebuild; the rebuilt graph keeps codes only.
        for (id, _) in rows.iter().filter(|(id, _)| id % 3 == 0) {
            restored.remove(*id).unwrap();
        }
        assert_eq!(restored.len(), 800);
        assert!(!restored.exact());
        assert_eq!(restored.search(query, 1).unwrap()[0].id, 77);
        // Adding to it codes the new vector on the grid it has.
        restored.add(5_000, &rows[79].1).unwrap();
        let hits = restored.search(&rows[79].1, 2).unwrap();
        assert!(hits.iter().any(|hit| hit.id == 5_000) && hits.iter().any(|hit| hit.id == 79), "{hits:?}");
        // Below half the crossover it becomes an exact scan again.
        for id in 0..1_200u64 {
            if id % 3 != 0 && id > 45 {
                restored.remove(id).unwrap();
            }
        }
        assert_eq!(restored.backend(), AutoBackend::Flat);
        assert!(restored.exact());
    }

    #[test]
    fn a_flat_buffer_builds_the_same_index_as_rows_and_is_validated_first() {
        let dim = 16;
        let rows = clustered(6_000, dim);
        let ids: Vec<u64> = rows.iter().map(|(id, _)| *id).collect();
        // Not yet unit length: the build normalises in place.
        let data: Vec<f32> = rows.iter().flat_map(|(_, vector)| vector.iter().map(|x| x * 3.0)).collect();
        // A graph links its nodes in parallel, so two builds agree only when
        // each runs on one thread: the same rows in the same order then
        // give the same graph.
        let one_thread = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let (flat, built) = one_thread.install(|| {
            (
                AutoIndex::build_flat(config(dim, 100), ids.clone(), data.clone()).unwrap(),
                AutoIndex::build(config(dim, 100), &borrowed(&rows)).unwrap(),
            )
        });
        assert_eq!(flat.backend(), AutoBackend::Hnsw);
        for probe in [0usize, 17, 4_321] {
            let (a, b) = (flat.search(&rows[probe].1, 5).unwrap(), built.search(&rows[probe].1, 5).unwrap());
            assert_eq!(a.iter().map(|hit| hit.id).collect::<Vec<_>>(), b.iter().map(|hit| hit.id).collect::<Vec<_>>());
            assert!(a.iter().zip(&b).all(|(x, y)| (x.cosine - y.cosine).abs() < 1e-5));
        }
        let mut repeated = ids.clone();
        repeated[9] = repeated[3];
        assert!(matches!(
            AutoIndex::build_flat(config(dim, 100), repeated, data.clone()),
            Err(VectorError::DuplicateId(3))
        ));
        let mut zero = data.clone();
        zero[dim * 5..dim * 6].fill(0.0);
        assert!(matches!(AutoIndex::build_flat(config(dim, 100), ids.clone(), zero), Err(VectorError::ZeroVector)));
        assert!(AutoIndex::build_flat(config(dim, 100), ids[1..].to_vec(), data).is_err(), "a length mismatch");
        assert!(AutoIndex::build_flat(config(dim, 100), Vec::new(), Vec::new()).unwrap().is_empty());
    }
}
