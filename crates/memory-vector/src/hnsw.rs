//! [`HnswIndex`]: approximate cosine search on an HNSW graph.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use crate::constants::{
    AUTO_CROSSOVER, FLAT_PARALLEL_THRESHOLD, HNSW_DEFAULT_EF_CONSTRUCTION, HNSW_DEFAULT_EF_SEARCH, HNSW_DEFAULT_M,
    HNSW_MAX_M, HNSW_REBUILD_MIN_TOMBSTONES, HNSW_REBUILD_TOMBSTONE_RATIO, SNAPSHOT_FORMAT_VERSION,
};
use crate::distance::normalized;
use crate::error::{Result, VectorError};
use crate::graph::{Graph, Stored};
use crate::index::{Hit, TopK, VectorIndex};
use crate::snapshot::{
    Decoder, Encoder, SnapshotExpectation, SnapshotHeader, SnapshotKind, id_checksum, read_snapshot, write_snapshot,
};

/// HNSW parameters. The defaults were measured on MiniLM vectors (see
/// `BENCHMARKS.md`): they reach recall@10 ≥ 0.99 at 10k and 100k.
#[derive(Debug, Clone, PartialEq)]
pub struct HnswConfig {
    /// Links per node and layer (`2 × m` on the ground layer), 2..=128.
    pub m: usize,
    /// Candidate list width while inserting.
    pub ef_construction: usize,
    /// Candidate list width while searching (raised to `k` when smaller).
    pub ef_search: usize,
    /// Fraction of tombstoned slots that triggers a rebuild.
    pub rebuild_tombstone_ratio: f32,
    /// Tombstone count below which no rebuild happens whatever the ratio.
    pub rebuild_min_tombstones: usize,
    /// Whether [`VectorIndex::remove`] rebuilds the graph itself once the
    /// threshold is passed. [`AutoIndex`](crate::AutoIndex) turns this off
    /// and rebuilds outside its lock instead.
    pub auto_rebuild: bool,
    /// Whether the graph keeps each vector in full beside its SQ8 codes.
    /// Without them it holds about a fifth of the memory per vector, and
    /// every similarity it returns is computed from the codes (within
    /// about 0.01 of the cosine for sentence-model vectors): a caller that
    /// needs exact cosines re-scores the hits from its own copy.
    pub full_vectors: bool,
}

impl Default for HnswConfig {
    fn default() -> Self {
        HnswConfig {
            m: HNSW_DEFAULT_M,
            ef_construction: HNSW_DEFAULT_EF_CONSTRUCTION,
            ef_search: HNSW_DEFAULT_EF_SEARCH,
            rebuild_tombstone_ratio: HNSW_REBUILD_TOMBSTONE_RATIO,
            rebuild_min_tombstones: HNSW_REBUILD_MIN_TOMBSTONES,
            auto_rebuild: true,
            full_vectors: true,
        }
    }
}

impl HnswConfig {
    /// Checks every field's range.
    pub fn validate(&self) -> Result<()> {
        if !(2..=HNSW_MAX_M).contains(&self.m) {
            return Err(VectorError::InvalidConfig(format!("m must be in 2..={HNSW_MAX_M}, got {}", self.m)));
        }
        if self.ef_construction == 0 || self.ef_search == 0 {
            return Err(VectorError::InvalidConfig("ef_construction and ef_search must be at least 1".into()));
        }
        if !(self.rebuild_tombstone_ratio > 0.0 && self.rebuild_tombstone_ratio <= 1.0) {
            return Err(VectorError::InvalidConfig(format!(
                "rebuild_tombstone_ratio must be in (0, 1], got {}",
                self.rebuild_tombstone_ratio
            )));
        }
        Ok(())
    }
}

/// Configuration of an [`AutoIndex`](crate::AutoIndex): the dimension, the
/// exact→HNSW crossover and the parameters of both backends.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexConfig {
    /// Vector dimension.
    pub dim: usize,
    /// Live count above which the HNSW graph replaces the exact scan.
    pub crossover: usize,
    /// HNSW parameters used above the crossover.
    pub hnsw: HnswConfig,
    /// Row count above which one exact query uses several threads.
    pub flat_parallel_threshold: usize,
    /// Live count above which a graph built or rebuilt keeps SQ8 codes
    /// only (see [`HnswConfig::full_vectors`]); unlimited by default.
    pub full_vectors_max: usize,
}

impl IndexConfig {
    /// Defaults for `dim`-dimensional vectors.
    pub fn new(dim: usize) -> Self {
        IndexConfig {
            dim,
            crossover: AUTO_CROSSOVER,
            hnsw: HnswConfig::default(),
            flat_parallel_threshold: FLAT_PARALLEL_THRESHOLD,
            full_vectors_max: usize::MAX,
        }
    }

    /// Whether an index of `rows` live vectors keeps SQ8 codes only: it is
    /// a graph (above the crossover) that does not keep its vectors in
    /// full (see [`IndexConfig::full_vectors_max`]). A caller that must
    /// re-score such an index's hits exactly knows so before building it.
    pub fn keeps_codes_only(&self, rows: usize) -> bool {
        rows > self.crossover && !self.graph_keeps_vectors(rows)
    }

    /// Whether a graph of `rows` live vectors keeps them in full beside
    /// their codes.
    pub(crate) fn graph_keeps_vectors(&self, rows: usize) -> bool {
        self.hnsw.full_vectors && rows <= self.full_vectors_max
    }

    /// Sets [`IndexConfig::full_vectors_max`].
    pub fn with_full_vectors_max(mut self, rows: usize) -> Self {
        self.full_vectors_max = rows;
        self
    }

    /// Sets the crossover.
    pub fn with_crossover(mut self, crossover: usize) -> Self {
        self.crossover = crossover;
        self
    }

    /// Sets the HNSW parameters.
    pub fn with_hnsw(mut self, hnsw: HnswConfig) -> Self {
        self.hnsw = hnsw;
        self
    }
}

/// Runs a closure that changes the graph, turning a panic inside it into a
/// typed error.
fn guarded<T>(operation: &'static str, f: impl FnOnce() -> T) -> Result<T> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        let message = if let Some(s) = payload.downcast_ref::<&str>() {
            (*s).to_owned()
        } else if let Some(s) = payload.downcast_ref::<String>() {
            s.clone()
        } else {
            "panic without message".to_owned()
        };
        tracing::warn!(operation, %message, "hnsw graph operation failed");
        VectorError::Graph { operation, message }
    })
}

fn new_graph(dim: usize, config: &HnswConfig) -> Graph {
    Graph::with_vectors(dim, config.m, config.ef_construction, config.full_vectors)
}

/// Approximate cosine index on an HNSW graph (see the `graph` module:
/// flat vector and link arrays, per-thread reusable search state).
///
/// Graph nodes are numbered by *slot*; a slot table maps them to the
/// caller's ids. Removal tombstones the slot (searches over-fetch and filter
/// it out) and, once tombstones pass
/// [`HnswConfig::rebuild_tombstone_ratio`], the graph is rebuilt from the
/// live vectors. An insert that fails inside the library consumes its slot
/// as a tombstone, so the slot table and the graph always agree.
pub struct HnswIndex {
    dim: usize,
    config: HnswConfig,
    /// Boxed: the graph's tables are large to move around by value.
    graph: Box<Graph>,
    slot_ids: Vec<u64>,
    live: Vec<bool>,
    slots: HashMap<u64, usize>,
    tombstones: usize,
}

impl fmt::Debug for HnswIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HnswIndex")
            .field("dim", &self.dim)
            .field("config", &self.config)
            .field("live", &self.slots.len())
            .field("tombstones", &self.tombstones)
            .finish_non_exhaustive()
    }
}

impl HnswIndex {
    /// An empty index.
    pub fn new(dim: usize, config: HnswConfig) -> Result<Self> {
        if dim == 0 {
            return Err(VectorError::ZeroDimension);
        }
        config.validate()?;
        let graph = Box::new(new_graph(dim, &config));
        Ok(HnswIndex {
            dim,
            config,
            graph,
            slot_ids: Vec::new(),
            live: Vec::new(),
            slots: HashMap::new(),
            tombstones: 0,
        })
    }

    /// Bulk build: validates every item, then inserts them in parallel on
    /// the current rayon pool. Nothing is built if any item is invalid.
    pub fn build(dim: usize, config: HnswConfig, items: &[(u64, &[f32])]) -> Result<Self> {
        let _span = tracing::debug_span!("hnsw_build", n = items.len()).entered();
        if dim == 0 {
            return Err(VectorError::ZeroDimension);
        }
        let mut seen = HashSet::with_capacity(items.len());
        let mut ids = Vec::with_capacity(items.len());
        let mut data = Vec::with_capacity(items.len() * dim);
        for (id, vector) in items {
            if !seen.insert(*id) {
                return Err(VectorError::DuplicateId(*id));
            }
            ids.push(*id);
            data.extend_from_slice(&normalized(vector, dim)?);
        }
        Self::from_normalized(dim, config, ids, data)
    }

    /// Builds from unique ids and their already normalised vectors
    /// (row-major in `data`).
    pub(crate) fn from_normalized(dim: usize, config: HnswConfig, ids: Vec<u64>, data: Vec<f32>) -> Result<Self> {
        config.validate()?;
        debug_assert_eq!(ids.len() * dim, data.len());
        let graph = Box::new(guarded("bulk inserting", || {
            Graph::build_owned(dim, config.m, config.ef_construction, data, config.full_vectors)
        })?);
        let slots = ids.iter().enumerate().map(|(slot, &id)| (id, slot)).collect();
        Ok(HnswIndex { dim, config, graph, live: vec![true; ids.len()], slot_ids: ids, slots, tombstones: 0 })
    }

    /// The configuration in use.
    pub fn config(&self) -> &HnswConfig {
        &self.config
    }

    /// Changes `ef_search` for later searches (values below 1 count as 1).
    pub fn set_ef_search(&mut self, ef_search: usize) {
        self.config.ef_search = ef_search.max(1);
    }

    /// Number of tombstoned slots still in the graph.
    pub fn tombstones(&self) -> usize {
        self.tombstones
    }

    /// Whether tombstones have passed the rebuild threshold.
    pub fn needs_rebuild(&self) -> bool {
        self.tombstones >= self.config.rebuild_min_tombstones.max(1)
            && self.tombstones as f32 > self.config.rebuild_tombstone_ratio * self.slot_ids.len() as f32
    }

    /// Live ids and their normalised vectors (row-major), in slot order;
    /// a graph that keeps codes only gives the vectors its codes stand for.
    pub(crate) fn live_vectors(&self) -> (Vec<u64>, Vec<f32>) {
        let mut ids = Vec::with_capacity(self.slots.len());
        let mut data = Vec::with_capacity(self.slots.len() * self.dim);
        let mut vector = Vec::with_capacity(self.dim);
        for slot in (0..self.graph.len()).filter(|&slot| self.live[slot]) {
            ids.push(self.slot_ids[slot]);
            self.graph.vector_into(slot, &mut vector);
            data.extend_from_slice(&vector);
        }
        (ids, data)
    }

    /// A fresh graph holding only the live vectors (tombstones dropped).
    pub fn rebuilt(&self) -> Result<HnswIndex> {
        let _span =
            tracing::debug_span!("hnsw_rebuild", live = self.slots.len(), tombstones = self.tombstones).entered();
        let (ids, data) = self.live_vectors();
        HnswIndex::from_normalized(self.dim, self.config.clone(), ids, data)
    }

    /// Approximate heap bytes of vectors, links and slot tables.
    pub fn memory_bytes(&self) -> usize {
        self.graph.memory_bytes() + self.slot_ids.capacity() * 9 + self.slots.capacity() * 24
    }

    fn normalized_query(&self, query: &[f32]) -> Result<Vec<f32>> {
        normalized(query, self.dim)
    }

    /// Adds an already normalised vector (internal fast path).
    pub(crate) fn add_normalized(&mut self, id: u64, unit: &[f32]) -> Result<()> {
        if self.slots.contains_key(&id) {
            return Err(VectorError::DuplicateId(id));
        }
        let slot = self.slot_ids.len();
        let outcome = guarded("inserting", || self.graph.insert(unit));
        debug_assert_eq!(self.graph.len(), slot + 1);
        // Whether or not the library finished, the slot is now taken: a
        // failed insert may have left a half-linked node carrying it.
        self.slot_ids.push(id);
        match outcome {
            Ok(()) => {
                self.live.push(true);
                self.slots.insert(id, slot);
                Ok(())
            }
            Err(e) => {
                self.live.push(false);
                self.tombstones += 1;
                Err(e)
            }
        }
    }

    /// Searches with an already normalised query.
    /// The similarity of `unit` to live row `id`, as searches score it.
    pub(crate) fn similarity_to(&self, unit: &[f32], id: u64) -> Option<f32> {
        let slot = *self.slots.get(&id)?;
        Some(self.graph.query_sim(unit, slot))
    }

    /// See [`AutoIndex::holds_vector`](crate::AutoIndex::holds_vector);
    /// `vector × scale` is a unit vector.
    pub(crate) fn holds_vector(&self, id: u64, vector: &[f32], scale: f32) -> Option<bool> {
        let slot = *self.slots.get(&id)?;
        Some(self.graph.holds_vector(slot, vector, scale))
    }

    /// Frees the full vectors, keeping the SQ8 codes (see
    /// [`HnswConfig::full_vectors`]).
    pub(crate) fn drop_vectors(&mut self) {
        self.graph.drop_vectors();
        self.config.full_vectors = false;
    }

    /// Whether the similarities this index returns are exact cosines (it
    /// keeps the full vectors) rather than computed from SQ8 codes.
    pub fn exact(&self) -> bool {
        self.graph.keeps_vectors()
    }

    pub(crate) fn search_normalized(&self, unit: &[f32], k: usize) -> Vec<Hit> {
        let live = self.slots.len();
        let want = k.min(live);
        if want == 0 {
            return Vec::new();
        }
        let total = self.slot_ids.len();
        // Over-fetch by the expected share of tombstones, with a margin.
        let dead_share = self.tombstones as f64 / total as f64;
        let mut fetch = if self.tombstones == 0 { k } else { (k as f64 / (1.0 - dead_share)).ceil() as usize * 2 + 8 };
        loop {
            fetch = fetch.min(total);
            let ef = self.config.ef_search.max(fetch);
            let neighbours = self.graph.search(unit, fetch, ef);
            let mut hits: Vec<Hit> = neighbours
                .iter()
                .map(|n| (n.node as usize, n.sim))
                .filter(|&(slot, _)| self.live.get(slot).copied().unwrap_or(false))
                .map(|(slot, cosine)| Hit { id: self.slot_ids[slot], cosine })
                .collect();
            if hits.len() >= want {
                hits.sort_by(Hit::rank_cmp);
                hits.truncate(k);
                return hits;
            }
            if fetch >= total {
                break;
            }
            fetch = fetch.saturating_mul(4);
        }
        // The graph could not produce enough live results (tiny or heavily
        // tombstoned graph): answer exactly instead of returning too few.
        tracing::debug!(live, k, "hnsw search fell back to an exact scan");
        self.exact_search(unit, k)
    }

    /// Exact scan over the live vectors stored in the graph.
    pub(crate) fn exact_search(&self, unit: &[f32], k: usize) -> Vec<Hit> {
        let mut top = TopK::new(k);
        for slot in (0..self.graph.len()).filter(|&slot| self.live[slot]) {
            top.push(Hit { id: self.slot_ids[slot], cosine: self.graph.query_sim(unit, slot) });
        }
        top.into_sorted()
    }

    /// Removes `id`, leaving any rebuild to the caller.
    pub(crate) fn tombstone(&mut self, id: u64) -> Result<()> {
        let slot = self.slots.remove(&id).ok_or(VectorError::UnknownId(id))?;
        self.live[slot] = false;
        self.tombstones += 1;
        Ok(())
    }

    /// Like [`VectorIndex::restore`], with explicit parameters for the
    /// fields the snapshot does not fix (rebuild policy; `ef_search` is
    /// taken from `config`).
    pub fn restore_with_config(path: &Path, expected: &SnapshotExpectation, config: HnswConfig) -> Result<Self> {
        let _span = tracing::debug_span!("hnsw_restore", path = %path.display()).entered();
        config.validate()?;
        let raw = match read_snapshot(path, SnapshotKind::Hnsw) {
            Err(VectorError::SnapshotMismatch { reason, .. }) if reason.starts_with("written by") => {
                read_snapshot(path, SnapshotKind::HnswCodes)?
            }
            other => other?,
        };
        let full_vectors = raw.header.kind == SnapshotKind::Hnsw;
        expected.check(&raw.header, path)?;
        let header = raw.header.clone();
        let mut d = Decoder::new(raw.body(), path);
        let m = d.u32("m")? as usize;
        let ef_construction = d.u32("ef_construction")? as usize;
        let _ef_search_at_snapshot = d.u32("ef_search")?;
        let n_slots = d.usize("slot count")?;
        let mut slot_ids = Vec::with_capacity(n_slots.min(1 << 28));
        let mut live = Vec::with_capacity(n_slots.min(1 << 28));
        for _ in 0..n_slots {
            slot_ids.push(d.u64("slot id")?);
            live.push(d.u8("slot state")? == 1);
        }
        let config = HnswConfig { m, ef_construction, full_vectors, ..config };
        config.validate().map_err(|e| VectorError::corrupt(path, e.to_string()))?;
        let mut slots = HashMap::with_capacity(header.count);
        for (slot, (&id, &is_live)) in slot_ids.iter().zip(&live).enumerate() {
            if is_live && slots.insert(id, slot).is_some() {
                return Err(VectorError::corrupt(path, format!("id {id} live in two slots")));
            }
        }
        if slots.len() != header.count || id_checksum(slots.keys().copied()) != header.id_checksum {
            return Err(VectorError::corrupt(path, "slot table does not match the header"));
        }
        let tombstones = n_slots - slots.len();
        let values =
            n_slots.checked_mul(header.dim).ok_or_else(|| VectorError::corrupt(path, "vector count overflows"))?;
        let stored = if full_vectors {
            Stored::Vectors(d.f32s(values, "vectors")?)
        } else {
            Stored::Codes(d.i8s(values, "codes")?)
        };
        // The graph holds exactly one node per slot.
        let graph = Box::new(
            Graph::decode(header.dim, m, ef_construction, stored, &mut d)
                .map_err(|reason| VectorError::corrupt(path, format!("graph: {reason}")))?,
        );
        if !d.is_empty() {
            return Err(VectorError::corrupt(path, "trailing bytes in body"));
        }
        Ok(HnswIndex { dim: header.dim, config, graph, slot_ids, live, slots, tombstones })
    }
}

impl VectorIndex for HnswIndex {
    fn dim(&self) -> usize {
        self.dim
    }

    fn len(&self) -> usize {
        self.slots.len()
    }

    fn contains(&self, id: u64) -> bool {
        self.slots.contains_key(&id)
    }

    fn ids(&self) -> Vec<u64> {
        self.slots.keys().copied().collect()
    }

    fn add(&mut self, id: u64, vector: &[f32]) -> Result<()> {
        let unit = normalized(vector, self.dim)?;
        self.add_normalized(id, &unit)
    }

    /// Validates everything first; an empty index is then built with
    /// parallel insertion, a non-empty one grows one insert at a time.
    fn add_batch(&mut self, items: &[(u64, &[f32])]) -> Result<()> {
        let mut seen = HashSet::with_capacity(items.len());
        let mut units = Vec::with_capacity(items.len());
        for (id, vector) in items {
            if self.slots.contains_key(id) || !seen.insert(*id) {
                return Err(VectorError::DuplicateId(*id));
            }
            units.push(normalized(vector, self.dim)?);
        }
        if self.slot_ids.is_empty() && !items.is_empty() {
            let ids = items.iter().map(|(id, _)| *id).collect();
            let data: Vec<f32> = units.concat();
            *self = HnswIndex::from_normalized(self.dim, self.config.clone(), ids, data)?;
            return Ok(());
        }
        for ((id, _), unit) in items.iter().zip(units) {
            self.add_normalized(*id, &unit)?;
        }
        Ok(())
    }

    fn remove(&mut self, id: u64) -> Result<()> {
        self.tombstone(id)?;
        if self.config.auto_rebuild && self.needs_rebuild() {
            *self = self.rebuilt()?;
        }
        Ok(())
    }

    fn search(&self, query: &[f32], k: usize) -> Result<Vec<Hit>> {
        let _span = tracing::trace_span!("hnsw_search", n = self.slots.len(), k).entered();
        let unit = self.normalized_query(query)?;
        Ok(self.search_normalized(&unit, k))
    }

    /// Writes one file, atomically: the header, the slot table, the
    /// vectors and the links.
    fn snapshot(&self, path: &Path, space: &str) -> Result<SnapshotHeader> {
        let _span = tracing::debug_span!("hnsw_snapshot", n = self.slot_ids.len()).entered();
        let header = SnapshotHeader {
            format_version: SNAPSHOT_FORMAT_VERSION,
            kind: if self.graph.keeps_vectors() { SnapshotKind::Hnsw } else { SnapshotKind::HnswCodes },
            dim: self.dim,
            count: self.slots.len(),
            id_checksum: id_checksum(self.slots.keys().copied()),
            space: space.to_owned(),
        };
        let n = self.slot_ids.len();
        let mut body = Encoder::with_capacity(64 + n * (9 + self.dim * 4 + (2 * self.config.m + 2) * 4));
        body.u32(self.config.m as u32);
        body.u32(self.config.ef_construction as u32);
        body.u32(self.config.ef_search as u32);
        body.u64(n as u64);
        for (&id, &is_live) in self.slot_ids.iter().zip(&self.live) {
            body.u64(id);
            body.u8(u8::from(is_live));
        }
        if self.graph.keeps_vectors() {
            body.f32s(self.graph.vectors());
        } else {
            body.i8s(self.graph.codes());
        }
        self.graph.encode_links(&mut body);
        write_snapshot(path, &header, &body.bytes)?;
        Ok(header)
    }

    fn restore(path: &Path, expected: &SnapshotExpectation) -> Result<Self> {
        HnswIndex::restore_with_config(path, expected, HnswConfig::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distance::dot;
    use crate::flat::FlatIndex;

    /// Deterministic pseudo-random unit-ish vectors in a few clusters.
    fn vector(seed: u64, dim: usize) -> Vec<f32> {
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(1);
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        };
        let centre = (seed % 7) as usize;
        (0..dim).map(|j| next() + if j % 7 == centre { 1.5 } else { 0.0 }).collect()
    }

    fn small_config() -> HnswConfig {
        HnswConfig { m: 8, ef_construction: 64, ef_search: 32, ..HnswConfig::default() }
    }

    #[test]
    fn config_ranges_are_checked() {
        for config in [
            HnswConfig { m: 1, ..HnswConfig::default() },
            HnswConfig { m: 300, ..HnswConfig::default() },
            HnswConfig { ef_search: 0, ..HnswConfig::default() },
            HnswConfig { rebuild_tombstone_ratio: 0.0, ..HnswConfig::default() },
            HnswConfig { rebuild_tombstone_ratio: f32::NAN, ..HnswConfig::default() },
        ] {
            assert!(matches!(HnswIndex::new(4, config), Err(VectorError::InvalidConfig(_))));
        }
        assert!(matches!(HnswIndex::new(0, HnswConfig::default()), Err(VectorError::ZeroDimension)));
    }

    #[test]
    fn bad_input_is_rejected_and_changes_nothing() {
        let mut index = HnswIndex::new(3, small_config()).unwrap();
        index.add(1, &[1.0, 0.0, 0.0]).unwrap();
        assert!(matches!(index.add(2, &[1.0, 0.0]), Err(VectorError::DimensionMismatch { .. })));
        assert!(matches!(index.add(2, &[f32::NAN, 0.0, 0.0]), Err(VectorError::NonFinite { .. })));
        assert!(matches!(index.add(2, &[0.0; 3]), Err(VectorError::ZeroVector)));
        assert!(matches!(index.add(1, &[0.0, 1.0, 0.0]), Err(VectorError::DuplicateId(1))));
        assert!(matches!(index.remove(7), Err(VectorError::UnknownId(7))));
        assert!(matches!(index.search(&[1.0, 0.0], 1), Err(VectorError::DimensionMismatch { .. })));
        assert_eq!((index.len(), index.slot_ids.len(), index.graph.len()), (1, 1, 1));
    }

    #[test]
    fn small_graph_is_exact_and_counts_are_full() {
        let dim = 16;
        let mut hnsw = HnswIndex::new(dim, small_config()).unwrap();
        let mut flat = FlatIndex::new(dim).unwrap();
        for id in 0..200u64 {
            hnsw.add(id, &vector(id, dim)).unwrap();
            flat.add(id, &vector(id, dim)).unwrap();
        }
        for q in 0..20u64 {
            let query = vector(1000 + q, dim);
            let got = hnsw.search(&query, 10).unwrap();
            let want = flat.search(&query, 10).unwrap();
            assert_eq!(got.len(), 10);
            let overlap = got.iter().filter(|h| want.iter().any(|w| w.id == h.id)).count();
            assert!(overlap >= 9, "query {q}: overlap {overlap}");
            for h in &got {
                let exact = dot(&normalized(&query, dim).unwrap(), flat.vector(h.id).unwrap());
                assert!((h.cosine - exact).abs() < 1e-5);
            }
        }
    }

    #[test]
    fn tombstones_are_never_returned_and_rebuild_drops_them() {
        let dim = 16;
        let config = HnswConfig { rebuild_min_tombstones: 10, rebuild_tombstone_ratio: 0.25, ..small_config() };
        let mut index = HnswIndex::new(dim, config).unwrap();
        for id in 0..100u64 {
            index.add(id, &vector(id, dim)).unwrap();
        }
        for id in 0..25u64 {
            index.remove(id).unwrap();
            assert!(!index.contains(id));
            let hits = index.search(&vector(id, dim), 100).unwrap();
            assert_eq!(hits.len(), 100 - id as usize - 1);
            assert!(hits.iter().all(|h| h.id > id));
        }
        // 25 of 100 slots dead is not above 25 %; the 26th removal rebuilds.
        assert_eq!(index.tombstones(), 25);
        index.remove(25).unwrap();
        assert_eq!(index.tombstones(), 0);
        assert_eq!(index.slot_ids.len(), 74);
        assert_eq!(index.graph.len(), 74);
        let hits = index.search(&vector(3, dim), 5).unwrap();
        assert_eq!(hits.len(), 5);
        assert!(hits.iter().all(|h| h.id > 25));
        // Removing everything leaves a searchable empty index.
        for id in 26..100u64 {
            index.remove(id).unwrap();
        }
        assert!(index.is_empty());
        assert_eq!(index.search(&vector(1, dim), 5).unwrap(), vec![]);
        index.add(500, &vector(500, dim)).unwrap();
        assert_eq!(index.search(&vector(1, dim), 5).unwrap().len(), 1);
    }

    #[test]
    fn an_insert_failing_half_way_leaves_slot_table_and_graph_in_agreement() {
        let dim = 8;
        let mut index = HnswIndex::new(dim, small_config()).unwrap();
        for id in 0..50u64 {
            index.add(id, &vector(id, dim)).unwrap();
        }
        // Make the library panic in the middle of linking the next node.
        crate::distance::FAIL_AFTER_EVALS.with(|c| c.set(Some(5)));
        let err = index.add(99, &vector(99, dim)).unwrap_err();
        assert!(matches!(err, VectorError::Graph { .. }), "{err}");
        assert!(!index.contains(99));
        assert_eq!(index.len(), 50);
        assert_eq!(index.slot_ids.len(), index.graph.len());
        for q in 0..10u64 {
            let hits = index.search(&vector(99 + q, dim), 60).unwrap();
            assert_eq!(hits.len(), 50);
            assert!(hits.iter().all(|h| h.id != 99));
        }
        // The id can be added again and is then found.
        index.add(99, &vector(99, dim)).unwrap();
        assert_eq!(index.search(&vector(99, dim), 1).unwrap()[0].id, 99);
        assert_eq!(index.slot_ids.len(), index.graph.len());
    }

    #[test]
    fn bulk_build_matches_incremental_contents() {
        let dim = 12;
        let vectors: Vec<Vec<f32>> = (0..300u64).map(|id| vector(id, dim)).collect();
        let items: Vec<(u64, &[f32])> = vectors.iter().enumerate().map(|(i, v)| (i as u64 * 3, v.as_slice())).collect();
        let index = HnswIndex::build(dim, small_config(), &items).unwrap();
        assert_eq!(index.len(), 300);
        let mut ids = index.ids();
        ids.sort_unstable();
        assert_eq!(ids, (0..300u64).map(|i| i * 3).collect::<Vec<_>>());
        assert_eq!(index.search(&vectors[7], 1).unwrap()[0].id, 21);
        let dup: Vec<(u64, &[f32])> = vec![(1, &vectors[0]), (1, &vectors[1])];
        assert!(matches!(HnswIndex::build(dim, small_config(), &dup), Err(VectorError::DuplicateId(1))));
    }

    #[test]
    fn snapshot_round_trip_with_tombstones() {
        let dim = 16;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("episodic.cvi");
        let config = HnswConfig { auto_rebuild: false, ..small_config() };
        let mut index = HnswIndex::new(dim, config.clone()).unwrap();
        for id in 0..150u64 {
            index.add(id, &vector(id, dim)).unwrap();
        }
        index.snapshot(&path, "test/16").unwrap();
        for id in 0..10u64 {
            index.remove(id).unwrap();
        }
        let header = index.snapshot(&path, "test/16").unwrap();
        assert_eq!(header.count, 140);
        // One file, replaced atomically: no temporary or older file remains.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);

        let expected = SnapshotExpectation::from_ids("test/16", dim, 10..150u64);
        let back = HnswIndex::restore_with_config(&path, &expected, config).unwrap();
        assert_eq!(back.len(), 140);
        assert_eq!(back.tombstones(), 10);
        assert_eq!(back.live_vectors(), index.live_vectors());
        for q in 0..10u64 {
            let query = vector(q, dim);
            assert_eq!(back.search(&query, 10).unwrap(), index.search(&query, 10).unwrap());
        }
        // The restored graph keeps growing like the original.
        let mut back = back;
        index.add(500, &vector(500, dim)).unwrap();
        back.add(500, &vector(500, dim)).unwrap();
        assert_eq!(back.search(&vector(500, dim), 5).unwrap(), index.search(&vector(500, dim), 5).unwrap());

        let stale = SnapshotExpectation::from_ids("test/16", dim, 0..150u64);
        assert!(matches!(HnswIndex::restore(&path, &stale), Err(VectorError::SnapshotMismatch { .. })));
        let other_model = SnapshotExpectation { space: "other/16".into(), ..expected.clone() };
        assert!(matches!(HnswIndex::restore(&path, &other_model), Err(VectorError::SnapshotMismatch { .. })));

        // A damaged or truncated file is reported, not a panic.
        let bytes = std::fs::read(&path).unwrap();
        let mut flipped = bytes.clone();
        flipped[bytes.len() / 2] ^= 0x40;
        std::fs::write(&path, &flipped).unwrap();
        assert!(matches!(HnswIndex::restore(&path, &expected), Err(VectorError::CorruptSnapshot { .. })));
        std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
        assert!(matches!(HnswIndex::restore(&path, &expected), Err(VectorError::CorruptSnapshot { .. })));
    }

    #[test]
    fn empty_index_snapshots_and_restores() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty.cvi");
        HnswIndex::new(4, small_config()).unwrap().snapshot(&path, "s").unwrap();
        let back = HnswIndex::restore(&path, &SnapshotExpectation::from_ids("s", 4, [])).unwrap();
        assert!(back.is_empty());
    }
}
