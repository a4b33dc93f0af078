//! Scalar quantisation (SQ8) of unit vectors: the first pass of both
//! indexes reads these codes instead of the vectors.
//!
//! Each component is stored as one signed byte on a per-dimension grid:
//! `x ≈ mid[d] + code × step[d]`, with `mid` and `step` taken from the
//! range the vectors actually use (all-MiniLM-L6-v2 components span about
//! ±0.3, so a grid over ±1 would waste most of the byte). A code row is a
//! quarter of the `f32` row, so a pass over codes reads a quarter of the
//! memory. Codes only choose candidates: the HNSW graph re-scores the
//! candidates its walk kept with the full vectors, and the exact scan uses
//! [`PreparedQuery::error_bound`] to score in full every row that could
//! still be in the answer. Every returned cosine is computed on the full
//! vectors.
//!
//! A query is prepared once: `q · x ≈ Σ q[d]·mid[d] + Σ (q[d]·step[d]) ×
//! code[d]`. The first sum is a constant; the weights `q[d]·step[d]` are
//! rounded to `i16` on a scale chosen so the `i32` sum cannot overflow, and
//! the second sum is an integer dot product (see
//! [`dot_i16_i8`](crate::distance::dot_i16_i8)).

use crate::constants::{QUANT_MIN_TRAIN, QUANT_RETRAIN_MAX};
use crate::distance::{dot_i16_i8, dot_i16_i8_rows};

/// Largest code magnitude: codes lie in `-127..=127`.
const CODE_MAX: f32 = 127.0;

/// Smallest grid step, so a dimension every training vector agrees on
/// still has a usable grid.
const MIN_STEP: f32 = 1e-6;

/// The per-dimension grid.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sq8 {
    mid: Vec<f32>,
    step: Vec<f32>,
}

/// Slack added to [`PreparedQuery::error_bound`] for the rounding of the
/// `f32` sums on both sides.
const ROUNDING_SLACK: f32 = 1e-4;

/// A query prepared against one [`Sq8`] grid.
#[derive(Debug, Clone, Default)]
pub(crate) struct PreparedQuery {
    weights: Vec<i16>,
    scale: f32,
    offset: f32,
    bound: f32,
}

impl PreparedQuery {
    /// Approximate dot product of the query with the vector behind `code`.
    #[inline]
    pub(crate) fn sim(&self, code: &[i8]) -> f32 {
        self.offset + self.scale * dot_i16_i8(&self.weights, code) as f32
    }

    /// [`PreparedQuery::sim`] of each row of `codes` (row-major), into
    /// `out`; `sums` is scratch space of the same length.
    #[inline]
    pub(crate) fn sims_into(&self, codes: &[i8], sums: &mut [i32], out: &mut [f32]) {
        dot_i16_i8_rows(&self.weights, codes, sums);
        for (sim, &sum) in out.iter_mut().zip(sums.iter()) {
            *sim = self.offset + self.scale * sum as f32;
        }
    }

    /// A bound on `|sim(code) − query · vector|` for every vector that lies
    /// within the grid's range (was not clamped when coded).
    pub(crate) fn error_bound(&self) -> f32 {
        self.bound
    }
}

impl Sq8 {
    /// The grid covering `[-1, 1]` in every dimension: valid for any unit
    /// vector, used until there are vectors to learn a range from.
    pub(crate) fn full_range(dim: usize) -> Self {
        Sq8 { mid: vec![0.0; dim], step: vec![1.0 / CODE_MAX; dim] }
    }

    /// The grid spanning the range each dimension takes in `data`
    /// (row-major, `dim` columns). An empty `data` gives the full range.
    pub(crate) fn train(data: &[f32], dim: usize) -> Self {
        if data.len() < dim {
            return Sq8::full_range(dim);
        }
        let mut lo = vec![f32::INFINITY; dim];
        let mut hi = vec![f32::NEG_INFINITY; dim];
        for row in data.chunks_exact(dim) {
            for ((l, h), &x) in lo.iter_mut().zip(hi.iter_mut()).zip(row) {
                *l = l.min(x);
                *h = h.max(x);
            }
        }
        let mid = lo.iter().zip(&hi).map(|(l, h)| (l + h) / 2.0).collect();
        let step = lo.iter().zip(&hi).map(|(l, h)| ((h - l) / (2.0 * CODE_MAX)).max(MIN_STEP)).collect();
        Sq8 { mid, step }
    }

    /// Dimension of the grid.
    pub(crate) fn dim(&self) -> usize {
        self.mid.len()
    }

    /// Writes the codes of `vector` into `out` (both `dim` long). Values
    /// outside the trained range are clamped to its edge; the answer is
    /// whether every value was within it.
    pub(crate) fn encode_into(&self, vector: &[f32], out: &mut [i8]) -> bool {
        let mut within = true;
        for (((code, &x), &mid), &step) in out.iter_mut().zip(vector).zip(&self.mid).zip(&self.step) {
            let level = ((x - mid) / step).round();
            within &= level.abs() <= CODE_MAX;
            *code = level.clamp(-CODE_MAX, CODE_MAX) as i8;
        }
        within
    }

    /// Whether `vector × scale` codes to `code` within one level in every
    /// dimension (past the grid's edge, whether it lies beyond the same
    /// edge), without coding it: no division, no rounding.
    pub(crate) fn within_one_level(&self, code: &[i8], vector: &[f32], scale: f32) -> bool {
        let edge = CODE_MAX - 1.5;
        code.iter().zip(vector).zip(self.mid.iter().zip(&self.step)).all(|((&code, &x), (&mid, &step))| {
            let offset = x * scale - mid;
            let level = f32::from(code);
            if level >= CODE_MAX {
                offset >= edge * step
            } else if level <= -CODE_MAX {
                offset <= -edge * step
            } else {
                (offset - level * step).abs() <= 1.5 * step
            }
        })
    }

    /// Codes of every row of `data`, row-major.
    #[cfg(test)]
    pub(crate) fn encode_all(&self, data: &[f32]) -> Vec<i8> {
        let dim = self.dim();
        let mut codes = vec![0i8; data.len()];
        for (row, out) in data.chunks_exact(dim).zip(codes.chunks_exact_mut(dim)) {
            self.encode_into(row, out);
        }
        codes
    }

    /// Prepares `query` (a unit vector) for [`PreparedQuery::sim`], reusing
    /// the allocation of `into`.
    pub(crate) fn prepare_into(&self, query: &[f32], into: &mut PreparedQuery) {
        let dim = self.dim();
        // |Σ weight × code| ≤ dim × 127 × limit must fit in an i32.
        let limit = (f64::from(i32::MAX) / (f64::from(CODE_MAX) * dim.max(1) as f64)).min(f64::from(i16::MAX));
        let largest = query.iter().zip(&self.step).map(|(q, s)| (q * s).abs()).fold(0.0f32, f32::max);
        let factor = if largest > 0.0 { limit as f32 / largest } else { 1.0 };
        into.weights.clear();
        into.weights.extend(query.iter().zip(&self.step).map(|(q, s)| (q * s * factor).round() as i16));
        into.scale = 1.0 / factor;
        into.offset = query.iter().zip(&self.mid).map(|(q, m)| q * m).sum();
        // Two errors: each in-range component is off by at most half a
        // step, and each weight by at most half a unit of `scale` times a
        // code of at most 127.
        let grid: f32 = query.iter().zip(&self.step).map(|(q, s)| q.abs() * s).sum::<f32>() / 2.0;
        let weights = into.scale / 2.0 * CODE_MAX * dim as f32;
        into.bound = grid + weights + ROUNDING_SLACK;
    }

    /// `query · x` where `x` is the vector `code` stands for on this grid,
    /// in `f32`: finer than [`PreparedQuery::sim`], for a graph that keeps
    /// codes only.
    #[inline]
    pub(crate) fn decoded_dot(&self, query: &[f32], code: &[i8]) -> f32 {
        let mut sum = 0.0f32;
        for (((&q, &c), &mid), &step) in query.iter().zip(code).zip(&self.mid).zip(&self.step) {
            sum += q * (mid + f32::from(c) * step);
        }
        sum
    }

    /// The dot product of the two vectors `a` and `b` stand for.
    #[inline]
    pub(crate) fn code_dot(&self, a: &[i8], b: &[i8]) -> f32 {
        let mut sum = 0.0f32;
        for (((&x, &y), &mid), &step) in a.iter().zip(b).zip(&self.mid).zip(&self.step) {
            sum += (mid + f32::from(x) * step) * (mid + f32::from(y) * step);
        }
        sum
    }

    /// Writes the vector `code` stands for into `out`.
    pub(crate) fn decode_into(&self, code: &[i8], out: &mut Vec<f32>) {
        out.clear();
        out.extend(code.iter().zip(&self.mid).zip(&self.step).map(|((&c, &mid), &step)| mid + f32::from(c) * step));
    }

    /// The grid's two tables, for a snapshot.
    pub(crate) fn parts(&self) -> (&[f32], &[f32]) {
        (&self.mid, &self.step)
    }

    /// A grid from [`Sq8::parts`] output; `None` when the tables disagree
    /// in length or hold a step that is not a positive finite number.
    pub(crate) fn from_parts(mid: Vec<f32>, step: Vec<f32>) -> Option<Self> {
        let valid = mid.len() == step.len()
            && mid.iter().all(|m| m.is_finite())
            && step.iter().all(|s| s.is_finite() && *s > 0.0);
        valid.then_some(Sq8 { mid, step })
    }
}

/// The SQ8 codes of a table of unit vectors, kept in step with it: rows
/// are appended and swap-removed like the table's, and the grid is refitted
/// to the table when it has doubled since the last fit (up to
/// [`QUANT_RETRAIN_MAX`] rows) or when too many rows fall off the grid.
#[derive(Debug, Clone)]
pub(crate) struct CodeBook {
    dim: usize,
    quant: Sq8,
    codes: Vec<i8>,
    /// Per row, whether a value was clamped when it was coded.
    off_grid: Vec<bool>,
    off_grid_count: usize,
    /// Row count at the last fit (0: never fitted).
    trained_at: usize,
}

impl CodeBook {
    /// Codes for an empty table of `dim`-dimensional vectors.
    pub(crate) fn new(dim: usize) -> Self {
        CodeBook {
            dim,
            quant: Sq8::full_range(dim),
            codes: Vec::new(),
            off_grid: Vec::new(),
            off_grid_count: 0,
            trained_at: 0,
        }
    }

    /// Codes for a table restored with its grid (see [`CodeBook::parts`]).
    pub(crate) fn with_grid(quant: Sq8, trained_at: usize, table: &[f32]) -> Self {
        let mut book = CodeBook { trained_at, quant, ..CodeBook::new(0) };
        book.dim = book.quant.dim();
        book.recode(table);
        book
    }

    /// Codes restored with their grid, for a table that is not kept.
    pub(crate) fn with_codes(quant: Sq8, trained_at: usize, codes: Vec<i8>) -> Self {
        let dim = quant.dim();
        let rows = codes.len() / dim.max(1);
        CodeBook { dim, quant, codes, off_grid: vec![false; rows], off_grid_count: 0, trained_at }
    }

    /// Codes `rows` (row-major unit vectors) and appends them, for a table
    /// that is not kept: the grid is fitted to the first rows coded when
    /// there are enough of them and never refitted after (a row off the
    /// grid is clamped to its edge).
    pub(crate) fn extend_rows(&mut self, rows: &[f32]) {
        if self.trained_at == 0 && self.len() == 0 && rows.len() / self.dim >= QUANT_MIN_TRAIN {
            self.quant = Sq8::train(rows, self.dim);
            self.trained_at = rows.len() / self.dim;
        }
        let first = self.len();
        let added = rows.len() / self.dim;
        self.codes.resize((first + added) * self.dim, 0);
        for (index, row) in rows.chunks_exact(self.dim).enumerate() {
            let at = (first + index) * self.dim;
            let within = self.quant.encode_into(row, &mut self.codes[at..at + self.dim]);
            self.off_grid.push(!within);
            self.off_grid_count += usize::from(!within);
        }
    }

    /// The grid.
    #[inline]
    pub(crate) fn grid(&self) -> &Sq8 {
        &self.quant
    }

    /// Every code, row-major.
    pub(crate) fn all(&self) -> &[i8] {
        &self.codes
    }

    /// Codes of row `row`.
    #[inline]
    pub(crate) fn code(&self, row: usize) -> &[i8] {
        &self.codes[row * self.dim..(row + 1) * self.dim]
    }

    /// Codes of rows `rows`, row-major.
    #[inline]
    pub(crate) fn codes(&self, rows: std::ops::Range<usize>) -> &[i8] {
        &self.codes[rows.start * self.dim..rows.end * self.dim]
    }

    /// Whether row `row` was clamped when coded (its approximate score
    /// carries no error bound).
    #[inline]
    pub(crate) fn is_off_grid(&self, row: usize) -> bool {
        self.off_grid[row]
    }

    /// Number of coded rows.
    pub(crate) fn len(&self) -> usize {
        self.off_grid.len()
    }

    /// Codes the rows of `table` from `first` on, which were just appended
    /// to it; `table` is the whole table.
    pub(crate) fn extend(&mut self, table: &[f32], first: usize) {
        debug_assert_eq!(first, self.len());
        let len = table.len() / self.dim;
        let doubled = len >= QUANT_MIN_TRAIN && len >= 2 * self.trained_at && self.trained_at < QUANT_RETRAIN_MAX;
        if doubled {
            self.refit(table);
            return;
        }
        self.codes.resize(len * self.dim, 0);
        for row in first..len {
            let out = &mut self.codes[row * self.dim..(row + 1) * self.dim];
            let within = self.quant.encode_into(&table[row * self.dim..(row + 1) * self.dim], out);
            self.off_grid.push(!within);
            self.off_grid_count += usize::from(!within);
        }
        if self.off_grid_count > QUANT_MIN_TRAIN.max(len / 32) {
            self.refit(table);
        }
    }

    /// Fits the grid to the whole table and re-codes every row.
    fn refit(&mut self, table: &[f32]) {
        self.quant = Sq8::train(table, self.dim);
        self.trained_at = table.len() / self.dim;
        self.recode(table);
    }

    /// Moves the last row's codes into `row` and drops the last row, like
    /// `Vec::swap_remove` on the table.
    pub(crate) fn swap_remove(&mut self, row: usize) {
        let last = self.len() - 1;
        if row != last {
            self.codes.copy_within(last * self.dim..(last + 1) * self.dim, row * self.dim);
        }
        self.codes.truncate(last * self.dim);
        self.off_grid_count -= usize::from(self.off_grid[row]);
        self.off_grid.swap_remove(row);
    }

    /// Prepares `query` for [`PreparedQuery::sim`] against these codes.
    pub(crate) fn prepare_into(&self, query: &[f32], into: &mut PreparedQuery) {
        self.quant.prepare_into(query, into);
    }

    /// The grid and the row count it was fitted at, for a snapshot.
    pub(crate) fn parts(&self) -> (&Sq8, usize) {
        (&self.quant, self.trained_at)
    }

    /// Heap bytes.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.codes.capacity() + self.off_grid.capacity() + self.dim * 8
    }

    fn recode(&mut self, table: &[f32]) {
        let len = table.len() / self.dim.max(1);
        self.codes = vec![0; table.len()];
        self.off_grid.clear();
        for (row, out) in table.chunks_exact(self.dim).zip(self.codes.chunks_exact_mut(self.dim)) {
            self.off_grid.push(!self.quant.encode_into(row, out));
        }
        self.off_grid_count = self.off_grid.iter().filter(|&&off| off).count();
        debug_assert_eq!(self.off_grid.len(), len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distance::{dot, random_unit as unit};

    #[test]
    fn trained_codes_approximate_the_dot_product() {
        let dim = 384;
        let data: Vec<f32> = (0..500u64).flat_map(|i| unit(i, dim)).collect();
        let sq = Sq8::train(&data, dim);
        let codes = sq.encode_all(&data);
        let mut query = PreparedQuery::default();
        for q in 0..20u64 {
            let vector = unit(1_000 + q, dim);
            sq.prepare_into(&vector, &mut query);
            for (row, code) in data.chunks_exact(dim).zip(codes.chunks_exact(dim)).take(100) {
                let error = (query.sim(code) - dot(&vector, row)).abs();
                assert!(error < 0.01, "error {error}");
            }
        }
    }

    #[test]
    fn codes_keep_the_order_of_clearly_different_scores() {
        let dim = 64;
        let data: Vec<f32> = (0..200u64).flat_map(|i| unit(i, dim)).collect();
        let sq = Sq8::train(&data, dim);
        let codes = sq.encode_all(&data);
        let query = unit(9_999, dim);
        let mut prepared = PreparedQuery::default();
        sq.prepare_into(&query, &mut prepared);
        let scored: Vec<(f32, f32)> = data
            .chunks_exact(dim)
            .zip(codes.chunks_exact(dim))
            .map(|(row, code)| (dot(&query, row), prepared.sim(code)))
            .collect();
        for a in &scored {
            for b in &scored {
                if a.0 > b.0 + 0.05 {
                    assert!(a.1 > b.1, "exact {} > {} but coded {} <= {}", a.0, b.0, a.1, b.1);
                }
            }
        }
    }

    #[test]
    fn out_of_range_values_clamp_and_degenerate_dimensions_stay_usable() {
        // Every training vector agrees on dimension 1.
        let data = [0.6, 0.8, -0.6, 0.8];
        let sq = Sq8::train(&data, 2);
        let mut out = [0i8; 2];
        sq.encode_into(&[1.0, 0.0], &mut out);
        assert_eq!(out[0], 127, "beyond the trained range clamps to the edge");
        assert_eq!(out[1], -127);
        sq.encode_into(&[0.6, 0.8], &mut out);
        assert_eq!(out, [127, 0]);
        assert_eq!(Sq8::train(&[], 3), Sq8::full_range(3));
    }

    #[test]
    fn code_book_refits_on_doubling_and_follows_swap_removes() {
        let dim = 8;
        let mut table: Vec<f32> = Vec::new();
        let mut book = CodeBook::new(dim);
        for i in 0..200u64 {
            let first = table.len() / dim;
            table.extend(unit(i, dim));
            book.extend(&table, first);
            assert_eq!(book.len(), first + 1);
        }
        // Fitted at 64 and 128 rows; 200 < 256.
        assert_eq!(book.parts().1, 128);
        let fitted_at_128 = Sq8::train(&table[..128 * dim], dim);
        assert_eq!(book.parts().0, &fitted_at_128);
        for row in 0..200 {
            let mut expected = vec![0i8; dim];
            let within = fitted_at_128.encode_into(&table[row * dim..(row + 1) * dim], &mut expected);
            assert_eq!(book.code(row), &expected[..], "row {row}");
            assert_eq!(book.is_off_grid(row), !within, "row {row}");
        }
        // Removing row 5 moves row 199's codes and flag into it.
        let (code_199, off_199) = (book.code(199).to_vec(), book.is_off_grid(199));
        book.swap_remove(5);
        assert_eq!(book.len(), 199);
        assert_eq!((book.code(5), book.is_off_grid(5)), (&code_199[..], off_199));
    }

    #[test]
    fn code_book_refits_when_too_many_rows_fall_off_the_grid() {
        let dim = 4;
        // 128 rows inside a narrow band fix the grid...
        let mut table: Vec<f32> = (0..128).flat_map(|i| [0.5, 0.5, 0.5, 0.49 + i as f32 * 1e-4]).collect();
        let mut book = CodeBook::new(dim);
        book.extend(&table, 0);
        assert_eq!(book.parts().1, 128);
        // ...then rows far outside it arrive one at a time.
        for i in 0..65 {
            let first = table.len() / dim;
            table.extend([-0.5, 0.5, 0.5, 0.5 + i as f32 * 1e-4]);
            book.extend(&table, first);
        }
        // The 65th off-grid row passed the limit (64) and forced a refit
        // over all 193 rows, after which none is off the grid.
        assert_eq!(book.parts().1, 193);
        assert!((0..193).all(|row| !book.is_off_grid(row)));
    }

    #[test]
    fn a_zero_query_scores_zero_and_parts_round_trip() {
        let sq = Sq8::train(&[0.6, 0.8, -0.6, 0.8], 2);
        let mut prepared = PreparedQuery::default();
        sq.prepare_into(&[0.0, 0.0], &mut prepared);
        assert_eq!(prepared.sim(&[5, -7]), 0.0);
        let (mid, step) = sq.parts();
        assert_eq!(Sq8::from_parts(mid.to_vec(), step.to_vec()), Some(sq.clone()));
        assert_eq!(Sq8::from_parts(vec![0.0], vec![0.0]), None, "zero step");
        assert_eq!(Sq8::from_parts(vec![f32::NAN], vec![1.0]), None, "non-finite mid");
        assert_eq!(Sq8::from_parts(vec![0.0, 0.0], vec![1.0]), None, "length mismatch");
    }
}
