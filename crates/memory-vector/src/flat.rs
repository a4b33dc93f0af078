//! [`FlatIndex`]: exact cosine search over one contiguous `Vec<f32>`.

use std::collections::HashMap;
use std::path::Path;

use rayon::prelude::*;

use crate::constants::{FLAT_PARALLEL_THRESHOLD, SNAPSHOT_FORMAT_VERSION};
use crate::distance::{dot, normalized};
use crate::error::{Result, VectorError};
use crate::index::{Hit, TopK, VectorIndex};
use crate::quant::{CodeBook, PreparedQuery};
use crate::snapshot::{
    Decoder, Encoder, SnapshotExpectation, SnapshotHeader, SnapshotKind, id_checksum, read_snapshot, write_snapshot,
};

/// Rows scored per block: the bound buffer stays in L1 and the block's
/// re-scoring pass reads it while it is hot.
const BLOCK_ROWS: usize = 1024;

/// Exact cosine index: every search considers every live vector.
///
/// Vectors live row-major in one `Vec<f32>`, with their SQ8 codes (a
/// quarter of the bytes; see the `quant` module) beside them; removal swaps
/// the last row into the hole and updates the id map and the codes in the
/// same step.
///
/// A search scores every row on its codes, which gives each row's cosine
/// within a bound `e` fixed per query. Rows whose upper bound
/// (`approx + e`) falls below the `k`-th best lower bound (`approx − e`)
/// cannot be in the answer; the rest, a few dozen rows at most on real
/// embeddings, are scored with the full vectors by the vectorised kernel
/// of [`dot`](crate::dot). The answer is therefore the exact top `k`, the
/// same as a full-precision scan's, for a quarter of the memory traffic.
/// Rows clamped by the code grid are always scored in full. Above
/// [`FLAT_PARALLEL_THRESHOLD`] rows one query is split across the rayon
/// pool.
#[derive(Debug, Clone)]
pub struct FlatIndex {
    dim: usize,
    ids: Vec<u64>,
    data: Vec<f32>,
    codes: CodeBook,
    positions: HashMap<u64, usize>,
    parallel_threshold: usize,
}

impl FlatIndex {
    /// An empty index of `dim`-dimensional vectors.
    pub fn new(dim: usize) -> Result<Self> {
        if dim == 0 {
            return Err(VectorError::ZeroDimension);
        }
        Ok(FlatIndex {
            dim,
            ids: Vec::new(),
            data: Vec::new(),
            codes: CodeBook::new(dim),
            positions: HashMap::new(),
            parallel_threshold: FLAT_PARALLEL_THRESHOLD,
        })
    }

    /// Sets the row count above which one query is split across threads
    /// (`usize::MAX` keeps every query on the calling thread).
    pub fn with_parallel_threshold(mut self, rows: usize) -> Self {
        self.parallel_threshold = rows.max(1);
        self
    }

    /// The stored (normalised) vector of `id`.
    pub fn vector(&self, id: u64) -> Option<&[f32]> {
        self.positions.get(&id).map(|&pos| self.row(pos))
    }

    /// Iterates over `(id, normalised vector)` pairs in storage order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &[f32])> + '_ {
        self.ids.iter().copied().zip(self.data.chunks_exact(self.dim))
    }

    /// Approximate heap bytes held by the index.
    pub fn memory_bytes(&self) -> usize {
        self.data.capacity() * 4 + self.codes.memory_bytes() + self.ids.capacity() * 8 + self.positions.capacity() * 24
    }

    fn row(&self, pos: usize) -> &[f32] {
        &self.data[pos * self.dim..(pos + 1) * self.dim]
    }

    /// Adds an already normalised vector (internal fast path).
    pub(crate) fn push_normalized(&mut self, id: u64, unit: &[f32]) -> Result<()> {
        debug_assert_eq!(unit.len(), self.dim);
        if self.positions.contains_key(&id) {
            return Err(VectorError::DuplicateId(id));
        }
        let row = self.ids.len();
        self.positions.insert(id, row);
        self.ids.push(id);
        self.data.extend_from_slice(unit);
        self.codes.extend(&self.data, row);
        Ok(())
    }

    /// Searches with an already normalised query.
    /// The stored (unit) vector of live row `id`.
    pub(crate) fn stored(&self, id: u64) -> Option<&[f32]> {
        let position = *self.positions.get(&id)?;
        Some(&self.data[position * self.dim..(position + 1) * self.dim])
    }

    pub(crate) fn search_normalized(&self, query: &[f32], k: usize) -> Vec<Hit> {
        let n = self.ids.len();
        if n == 0 || k == 0 {
            return Vec::new();
        }
        let mut prepared = PreparedQuery::default();
        self.codes.prepare_into(query, &mut prepared);
        if n >= self.parallel_threshold && rayon::current_num_threads() > 1 {
            let block = n.div_ceil(rayon::current_num_threads() * 4).max(BLOCK_ROWS);
            let tops: Vec<TopK> = (0..n.div_ceil(block))
                .into_par_iter()
                .map(|part| self.scan(query, &prepared, part * block..((part + 1) * block).min(n), k))
                .collect();
            let mut top = TopK::new(k);
            for part in tops {
                top.merge(part);
            }
            top.into_sorted()
        } else {
            self.scan(query, &prepared, 0..n, k).into_sorted()
        }
    }

    /// The exact top `k` of `rows`: each block is bounded on its codes,
    /// then the rows that may still make the top `k` are scored in full.
    ///
    /// Why it is exact: once `k` rows have a lower bound of at least `cut`,
    /// the `k`-th best cosine is at least `cut`, so a row whose upper bound
    /// is below `cut` is not in the answer. The cut only rises as blocks
    /// go by, so a row dropped early would also be dropped at the end.
    fn scan(&self, query: &[f32], prepared: &PreparedQuery, rows: std::ops::Range<usize>, k: usize) -> TopK {
        let error = prepared.error_bound();
        let mut lower_bounds = TopK::new(k);
        let mut top = TopK::new(k);
        let mut upper = [0.0f32; BLOCK_ROWS];
        let mut sums = [0i32; BLOCK_ROWS];
        let mut start = rows.start;
        while start < rows.end {
            let end = (start + BLOCK_ROWS).min(rows.end);
            let block = &mut upper[..end - start];
            prepared.sims_into(self.codes.codes(start..end), &mut sums[..end - start], block);
            for (row, bound) in (start..end).zip(block.iter_mut()) {
                let (high, low) = if self.codes.is_off_grid(row) {
                    let exact = dot(query, self.row(row));
                    (exact, exact)
                } else {
                    (*bound + error, *bound - error)
                };
                *bound = high;
                if lower_bounds.threshold().is_none_or(|floor| low >= floor) {
                    lower_bounds.push(Hit { id: row as u64, cosine: low });
                }
            }
            let cut = lower_bounds.threshold().unwrap_or(f32::NEG_INFINITY);
            for (row, &high) in (start..end).zip(&upper) {
                if high >= cut {
                    top.push(Hit { id: self.ids[row], cosine: dot(query, self.row(row)) });
                }
            }
            start = end;
        }
        top
    }
}

impl VectorIndex for FlatIndex {
    fn dim(&self) -> usize {
        self.dim
    }

    fn len(&self) -> usize {
        self.ids.len()
    }

    fn contains(&self, id: u64) -> bool {
        self.positions.contains_key(&id)
    }

    fn ids(&self) -> Vec<u64> {
        self.ids.clone()
    }

    fn add(&mut self, id: u64, vector: &[f32]) -> Result<()> {
        let unit = normalized(vector, self.dim)?;
        self.push_normalized(id, &unit)
    }

    /// Validates every item (dimension, values, duplicate ids, also within
    /// the batch) before adding any, so a failing batch adds nothing.
    fn add_batch(&mut self, items: &[(u64, &[f32])]) -> Result<()> {
        let mut seen = std::collections::HashSet::with_capacity(items.len());
        let mut units = Vec::with_capacity(items.len());
        for (id, vector) in items {
            if self.positions.contains_key(id) || !seen.insert(*id) {
                return Err(VectorError::DuplicateId(*id));
            }
            units.push(normalized(vector, self.dim)?);
        }
        self.ids.reserve(items.len());
        self.data.reserve(items.len() * self.dim);
        for ((id, _), unit) in items.iter().zip(units) {
            self.push_normalized(*id, &unit)?;
        }
        Ok(())
    }

    fn remove(&mut self, id: u64) -> Result<()> {
        let pos = self.positions.remove(&id).ok_or(VectorError::UnknownId(id))?;
        let last = self.ids.len() - 1;
        if pos != last {
            let moved = self.ids[last];
            self.ids[pos] = moved;
            self.data.copy_within(last * self.dim..(last + 1) * self.dim, pos * self.dim);
            self.positions.insert(moved, pos);
        }
        self.ids.truncate(last);
        self.data.truncate(last * self.dim);
        self.codes.swap_remove(pos);
        Ok(())
    }

    fn search(&self, query: &[f32], k: usize) -> Result<Vec<Hit>> {
        let _span = tracing::trace_span!("flat_search", n = self.ids.len(), k).entered();
        let unit = normalized(query, self.dim)?;
        Ok(self.search_normalized(&unit, k))
    }

    fn snapshot(&self, path: &Path, space: &str) -> Result<SnapshotHeader> {
        let _span = tracing::debug_span!("flat_snapshot", n = self.ids.len()).entered();
        let header = SnapshotHeader {
            format_version: SNAPSHOT_FORMAT_VERSION,
            kind: SnapshotKind::Flat,
            dim: self.dim,
            count: self.ids.len(),
            id_checksum: id_checksum(self.ids.iter().copied()),
            space: space.to_owned(),
        };
        let mut body = Encoder::with_capacity(self.ids.len() * (8 + 4 * self.dim) + 8);
        for &id in &self.ids {
            body.u64(id);
        }
        body.f32s(&self.data);
        write_snapshot(path, &header, &body.bytes)?;
        Ok(header)
    }

    fn restore(path: &Path, expected: &SnapshotExpectation) -> Result<Self> {
        let _span = tracing::debug_span!("flat_restore").entered();
        let raw = read_snapshot(path, SnapshotKind::Flat)?;
        expected.check(&raw.header, path)?;
        let header = &raw.header;
        let mut d = Decoder::new(raw.body(), path);
        let mut index = FlatIndex::new(header.dim)?;
        let mut ids = Vec::with_capacity(header.count);
        for _ in 0..header.count {
            ids.push(d.u64("id")?);
        }
        let data = d.f32s(
            header.count.checked_mul(header.dim).ok_or_else(|| VectorError::corrupt(path, "size overflows"))?,
            "vectors",
        )?;
        if !d.is_empty() {
            return Err(VectorError::corrupt(path, "trailing bytes in body"));
        }
        if id_checksum(ids.iter().copied()) != header.id_checksum {
            return Err(VectorError::corrupt(path, "stored ids do not match the header checksum"));
        }
        if let Some(bad) = data.iter().position(|x| !x.is_finite()) {
            return Err(VectorError::corrupt(path, format!("non-finite value at position {bad}")));
        }
        index.positions.reserve(ids.len());
        for (pos, &id) in ids.iter().enumerate() {
            if index.positions.insert(id, pos).is_some() {
                return Err(VectorError::corrupt(path, format!("id {id} stored twice")));
            }
        }
        index.ids = ids;
        index.data = data;
        index.codes.extend(&index.data, 0);
        Ok(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distance::random_unit;

    fn ids_of(hits: &[Hit]) -> Vec<u64> {
        hits.iter().map(|h| h.id).collect()
    }

    fn sample() -> FlatIndex {
        let mut index = FlatIndex::new(3).unwrap();
        index.add(10, &[1.0, 0.0, 0.0]).unwrap();
        index.add(11, &[0.0, 2.0, 0.0]).unwrap();
        index.add(12, &[1.0, 1.0, 0.0]).unwrap();
        index.add(13, &[0.0, 0.0, -5.0]).unwrap();
        index
    }

    #[test]
    fn search_ranks_by_cosine_and_normalises_inputs() {
        let index = sample();
        let hits = index.search(&[10.0, 0.0, 0.0], 3).unwrap();
        assert_eq!(ids_of(&hits), vec![10, 12, 11]);
        assert!((hits[0].cosine - 1.0).abs() < 1e-6);
        assert!((hits[1].cosine - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-6);
        assert_eq!(hits[2].cosine, 0.0);
        assert_eq!(index.search(&[1.0, 0.0, 0.0], 0).unwrap(), vec![]);
        assert_eq!(index.search(&[1.0, 0.0, 0.0], 99).unwrap().len(), 4);
    }

    #[test]
    fn ties_break_by_smaller_id() {
        let mut index = FlatIndex::new(2).unwrap();
        for id in [5, 3, 9, 1] {
            index.add(id, &[1.0, 1.0]).unwrap();
        }
        assert_eq!(ids_of(&index.search(&[1.0, 1.0], 3).unwrap()), vec![1, 3, 5]);
    }

    #[test]
    fn bad_input_is_rejected_and_changes_nothing() {
        let mut index = sample();
        assert!(matches!(index.add(20, &[1.0, 0.0]), Err(VectorError::DimensionMismatch { expected: 3, actual: 2 })));
        assert!(matches!(index.add(20, &[1.0, f32::NAN, 0.0]), Err(VectorError::NonFinite { index: 1, .. })));
        assert!(matches!(index.add(20, &[0.0, 0.0, 0.0]), Err(VectorError::ZeroVector)));
        assert!(matches!(index.add(10, &[0.0, 1.0, 0.0]), Err(VectorError::DuplicateId(10))));
        assert!(matches!(index.remove(99), Err(VectorError::UnknownId(99))));
        assert!(matches!(index.search(&[1.0], 1), Err(VectorError::DimensionMismatch { .. })));
        assert!(matches!(index.search(&[f32::INFINITY, 0.0, 0.0], 1), Err(VectorError::NonFinite { .. })));
        assert!(matches!(FlatIndex::new(0), Err(VectorError::ZeroDimension)));
        assert_eq!(index.len(), 4);
        // A batch with one bad item adds nothing.
        let good = [0.0, 1.0, 1.0];
        let bad = [0.0, 0.0, 0.0];
        assert!(index.add_batch(&[(30, &good), (31, &bad)]).is_err());
        assert!(matches!(index.add_batch(&[(30, &good), (30, &good)]), Err(VectorError::DuplicateId(30))));
        assert_eq!(index.len(), 4);
        assert!(!index.contains(30));
    }

    #[test]
    fn swap_remove_keeps_id_map_in_step() {
        let mut index = sample();
        index.remove(10).unwrap();
        assert!(!index.contains(10));
        assert_eq!(index.len(), 3);
        // 13 was the last row and moved into slot 0.
        assert_eq!(index.vector(13).unwrap(), &[0.0, 0.0, -1.0]);
        let hits = index.search(&[0.0, 0.0, -1.0], 1).unwrap();
        assert_eq!(ids_of(&hits), vec![13]);
        index.remove(13).unwrap();
        index.remove(11).unwrap();
        index.remove(12).unwrap();
        assert!(index.is_empty());
        assert_eq!(index.search(&[1.0, 0.0, 0.0], 5).unwrap(), vec![]);
        index.add(10, &[1.0, 0.0, 0.0]).unwrap();
        assert_eq!(ids_of(&index.search(&[1.0, 0.0, 0.0], 5).unwrap()), vec![10]);
    }

    /// Every row scored in full, ranked like the index ranks.
    fn full_scan(index: &FlatIndex, query: &[f32], k: usize) -> Vec<Hit> {
        let unit = normalized(query, index.dim).unwrap();
        let mut all: Vec<Hit> = index.iter().map(|(id, row)| Hit { id, cosine: dot(&unit, row) }).collect();
        all.sort_by(Hit::rank_cmp);
        all.truncate(k);
        all
    }

    /// Deterministic pseudo-random vectors in tight clusters, so many rows
    /// lie within the code error of each other.
    fn clustered(n: usize, dim: usize, seed: u64) -> Vec<Vec<f32>> {
        let base = seed * 1_000_000;
        let centres: Vec<Vec<f32>> = (0..8).map(|c| random_unit(base + c, dim)).collect();
        (0..n)
            .map(|i| {
                let noise = random_unit(base + 8 + i as u64, dim);
                centres[i % 8].iter().zip(noise).map(|(c, e)| c + 0.04 * e).collect()
            })
            .collect()
    }

    #[test]
    fn coded_scan_returns_the_full_precision_top_k() {
        let dim = 48;
        let rows = clustered(3_000, dim, 7);
        let mut serial = FlatIndex::new(dim).unwrap().with_parallel_threshold(usize::MAX);
        let mut parallel = FlatIndex::new(dim).unwrap().with_parallel_threshold(500);
        for (id, row) in rows.iter().enumerate() {
            serial.add(id as u64, row).unwrap();
            parallel.add(id as u64, row).unwrap();
        }
        let queries = clustered(40, dim, 99);
        for index in [&mut serial, &mut parallel] {
            for (round, query) in queries.iter().enumerate() {
                for k in [1, 10, 100] {
                    assert_eq!(index.search(query, k).unwrap(), full_scan(index, query, k), "query {round}, k {k}");
                }
                // Removal moves the last row's codes with its vector.
                index.remove((round * 53) as u64).unwrap();
            }
        }
    }

    #[test]
    fn rows_off_the_code_grid_are_still_found_exactly() {
        let dim = 16;
        let mut index = FlatIndex::new(dim).unwrap();
        // The grid is fitted to 64 rows: random ones and one that leans
        // towards the query below (cosine 0.60).
        let mut rows = clustered(63, dim, 3);
        let mut leaning = vec![0.5; dim];
        leaning[0] = 1.0;
        leaning[1] = 1.0;
        rows.push(leaning);
        for (id, row) in rows.iter().enumerate() {
            index.add(id as u64, row).unwrap();
        }
        // A later row lies far outside the grid in dimension 0, so its codes
        // are clamped and put its coded score well below the leaning row's,
        // although its true cosine (0.73) is the best.
        let mut outlier = vec![0.0; dim];
        outlier[0] = 0.999;
        outlier[1] = 0.04;
        index.add(100, &outlier).unwrap();
        let mut query = vec![0.0; dim];
        query[0] = 1.0;
        query[1] = 1.0;
        let hits = index.search(&query, 1).unwrap();
        assert_eq!(hits[0].id, 100, "{hits:?}");
        assert_eq!(index.search(&query, 5).unwrap(), full_scan(&index, &query, 5));
    }

    #[test]
    fn parallel_scan_matches_serial_scan() {
        let dim = 16;
        let mut serial = FlatIndex::new(dim).unwrap().with_parallel_threshold(usize::MAX);
        for id in 0..5000u64 {
            let v: Vec<f32> = (0..dim).map(|j| ((id * 31 + j as u64 * 17) % 97) as f32 - 48.0).collect();
            serial.add(id, &v).unwrap();
        }
        let parallel = serial.clone().with_parallel_threshold(1);
        let query: Vec<f32> = (0..dim).map(|j| j as f32 - 7.5).collect();
        assert_eq!(serial.search(&query, 25).unwrap(), parallel.search(&query, 25).unwrap());
    }

    #[test]
    fn snapshot_round_trip_and_mismatch() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("flat.cvi");
        let index = sample();
        let header = index.snapshot(&path, "test/3").unwrap();
        assert_eq!(header.count, 4);
        let expected = SnapshotExpectation::from_ids("test/3", 3, [13, 12, 11, 10]);
        let back = FlatIndex::restore(&path, &expected).unwrap();
        assert_eq!(back.ids(), index.ids());
        assert_eq!(back.search(&[1.0, 1.0, 0.0], 4).unwrap(), index.search(&[1.0, 1.0, 0.0], 4).unwrap());
        let other_space = SnapshotExpectation { space: "other/3".into(), ..expected.clone() };
        assert!(matches!(FlatIndex::restore(&path, &other_space), Err(VectorError::SnapshotMismatch { .. })));
        let other_rows = SnapshotExpectation::from_ids("test/3", 3, [10, 11, 12]);
        assert!(matches!(FlatIndex::restore(&path, &other_rows), Err(VectorError::SnapshotMismatch { .. })));
        std::fs::write(&path, b"garbage").unwrap();
        assert!(matches!(FlatIndex::restore(&path, &expected), Err(VectorError::CorruptSnapshot { .. })));
    }
}
