//! Fused CPU kernels for the BERT forward pass between the matrix products
//! (`matmul`): embedding lookup, residual + layer norm and attention over
//! unpadded sequences, in single passes over row-major `f32` buffers.

use rayon::prelude::*;

use super::team::SharedOut;

/// Rows per parallel task are chosen so a task has at least this many floats.
const MIN_FLOATS_PER_TASK: usize = 16 * 1024;

/// Runs `kernel(row_index, row)` over the `width`-wide rows of `buffer`, in
/// parallel when the buffer is big enough to pay for it.
fn for_each_row(buffer: &mut [f32], width: usize, kernel: impl Fn(usize, &mut [f32]) + Sync) {
    let rows = buffer.len() / width;
    let rows_per_task = MIN_FLOATS_PER_TASK.div_ceil(width).max(1);
    if rows <= rows_per_task {
        for (index, row) in buffer.chunks_exact_mut(width).enumerate() {
            kernel(index, row);
        }
        return;
    }
    buffer.par_chunks_mut(rows_per_task * width).enumerate().for_each(|(task, chunk)| {
        for (offset, row) in chunk.chunks_exact_mut(width).enumerate() {
            kernel(task * rows_per_task + offset, row);
        }
    });
}

/// Lanes of the partial sums below: independent accumulators let the
/// compiler vectorise a float reduction it may not reorder.
const LANES: usize = 8;

/// Sum of `values`, accumulated in [`LANES`] independent lanes.
#[inline(always)]
fn lane_sum(values: impl Iterator<Item = f32>) -> f32 {
    let mut lanes = [0.0f32; LANES];
    for (index, value) in values.enumerate() {
        lanes[index % LANES] += value;
    }
    lanes.iter().sum()
}

/// Dot product of two equally long slices, in [`LANES`] lanes.
#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; LANES];
    let (a_chunks, b_chunks) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: f32 = a_chunks.remainder().iter().zip(b_chunks.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in a_chunks.zip(b_chunks) {
        for lane in 0..LANES {
            lanes[lane] += x[lane] * y[lane];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// In place: `row = LayerNorm(row)` with `weight`, `bias`, `eps`.
fn layer_norm_row(row: &mut [f32], weight: &[f32], bias: &[f32], eps: f32) {
    let width = row.len() as f32;
    let mean = lane_sum(row.iter().copied()) / width;
    let variance = lane_sum(row.iter().map(|x| (x - mean) * (x - mean))) / width;
    let inverse = 1.0 / (variance + eps).sqrt();
    for ((x, w), b) in row.iter_mut().zip(weight).zip(bias) {
        *x = (*x - mean) * inverse * w + b;
    }
}

/// Layer-norm parameters.
pub(super) struct Norm {
    pub(super) weight: Vec<f32>,
    pub(super) bias: Vec<f32>,
    pub(super) eps: f32,
}

/// `out[r] = LayerNorm(product[r] + residual[r])`, written into `residual`
/// (the product already carries its bias).
pub(super) fn residual_norm(product: &[f32], residual: &mut [f32], norm: &Norm) {
    let width = norm.weight.len();
    for_each_row(residual, width, |row_index, row| {
        let source = &product[row_index * width..(row_index + 1) * width];
        for (x, p) in row.iter_mut().zip(source) {
            *x += p;
        }
        layer_norm_row(row, &norm.weight, &norm.bias, norm.eps);
    });
}

/// [`residual_norm`] for the rows of `residual` that start at row
/// `first_row` of `product`, on the calling thread.
pub(super) fn residual_norm_rows(product: &[f32], residual: &mut [f32], first_row: usize, norm: &Norm) {
    let width = norm.weight.len();
    for (offset, row) in residual.chunks_exact_mut(width).enumerate() {
        let start = (first_row + offset) * width;
        for (x, p) in row.iter_mut().zip(&product[start..start + width]) {
            *x += p;
        }
        layer_norm_row(row, &norm.weight, &norm.bias, norm.eps);
    }
}

/// Embedding lookup: `out[t] = LayerNorm(words[ids[t]] + positions[p(t)])`,
/// where `p(t)` restarts at 0 for every sequence.
pub(super) fn embed(
    ids: &[u32],
    lengths: &[usize],
    words: &[f32],
    positions: &[f32],
    width: usize,
    norm: &Norm,
) -> Vec<f32> {
    let mut position_of = Vec::with_capacity(ids.len());
    for &length in lengths {
        position_of.extend(0..length);
    }
    let mut out = vec![0.0f32; ids.len() * width];
    for_each_row(&mut out, width, |token, row| {
        let word = ids[token] as usize * width;
        let position = position_of[token] * width;
        for ((x, w), p) in row.iter_mut().zip(&words[word..word + width]).zip(&positions[position..position + width]) {
            *x = w + p;
        }
        layer_norm_row(row, &norm.weight, &norm.bias, norm.eps);
    });
    out
}

/// erf for f32, branch-free rational approximation (the one Eigen and XLA
/// use; error a few ulp), so the GELU loop vectorises.
#[inline(always)]
fn erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = x2 * -2.726_142_3e-10 + 2.770_681_4e-8;
    p = x2 * p + -2.101_024e-6;
    p = x2 * p + -5.692_506_4e-5;
    p = x2 * p + -7.349_906_3e-4;
    p = x2 * p + -2.954_600_1e-3;
    p = x2 * p + -1.609_603_3e-2;
    p *= x;
    let mut q = x2 * -1.456_607_2e-5 + -2.133_740_6e-4;
    q = x2 * q + -1.682_827e-3;
    q = x2 * q + -7.373_329e-3;
    q = x2 * q + -1.426_474e-2;
    p / q
}

/// Exact (erf-based) GELU.
#[inline(always)]
pub(super) fn gelu(v: f32) -> f32 {
    0.5 * v * (1.0 + erf(v * std::f32::consts::FRAC_1_SQRT_2))
}

/// Self-attention over unpadded sequences. `qkv` rows are
/// `[q (heads × head_dim) | k | v]` with their bias; the query part already
/// carries the `1/sqrt(head_dim)` scale. Writes the context rows
/// (`tokens × heads·head_dim`) into `out`. With `parallel`, large inputs
/// are split across (sequence, head) pairs.
pub(super) fn attention(
    qkv: &[f32],
    lengths: &[usize],
    heads: usize,
    head_dim: usize,
    out: &mut [f32],
    parallel: bool,
) {
    let hidden = heads * head_dim;
    assert_eq!(out.len() * 3, qkv.len(), "qkv and context shapes");
    let work: usize = lengths.iter().map(|length| length * length).sum::<usize>() * hidden;
    let parallel = parallel && work >= MIN_ATTENTION_PARALLEL_WORK && rayon::current_num_threads() > 1;
    let starts = sequence_starts(lengths);
    let out = SharedOut::new(out);
    let task = |scratch: &mut AttentionScratch, task: usize| {
        let (sequence, head) = (task / heads, task % heads);
        // SAFETY: each task writes one head's columns of one sequence's rows.
        #[allow(unsafe_code)]
        unsafe {
            attend_head(qkv, starts[sequence], lengths[sequence], hidden, head, head_dim, out, scratch)
        };
    };
    if parallel {
        (0..lengths.len() * heads).into_par_iter().for_each_init(AttentionScratch::default, task);
    } else {
        let mut scratch = AttentionScratch::default();
        (0..lengths.len() * heads).for_each(|t| task(&mut scratch, t));
    }
}

/// The first token of every sequence.
pub(super) fn sequence_starts(lengths: &[usize]) -> Vec<usize> {
    lengths
        .iter()
        .scan(0, |first, &length| {
            let start = *first;
            *first += length;
            Some(start)
        })
        .collect()
}

/// Below this much work (sum of length² × width) attention stays on one thread.
const MIN_ATTENTION_PARALLEL_WORK: usize = 64 * 1024;

/// Per-thread buffers reused across heads and sequences.
#[derive(Default)]
pub(super) struct AttentionScratch {
    keys: Vec<f32>,
    values: Vec<f32>,
    scores: Vec<f32>,
    context: Vec<f32>,
}

/// One head of one sequence (tokens `first .. first + length` of `qkv`):
/// the head's context goes to `out[token * hidden + head * head_dim ..]`.
///
/// # Safety
/// While it runs no other thread touches those elements of `out`.
#[allow(unsafe_code, clippy::too_many_arguments)]
pub(super) unsafe fn attend_head(
    qkv: &[f32],
    first: usize,
    length: usize,
    hidden: usize,
    head: usize,
    head_dim: usize,
    out: SharedOut<'_>,
    scratch: &mut AttentionScratch,
) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has AVX2 and FMA (just detected); the rest is the
        // caller's contract.
        return unsafe { attend_head_avx2(qkv, first, length, hidden, head, head_dim, out, scratch) };
    }
    // SAFETY: the caller's contract.
    unsafe { attend_head_body(qkv, first, length, hidden, head, head_dim, out, scratch) }
}

/// [`attend_head`] compiled for AVX2 + FMA (the lane sums and the weighted
/// sum of values in 256-bit vectors).
///
/// # Safety
/// The CPU has AVX2 and FMA; otherwise as [`attend_head`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(unsafe_code, clippy::too_many_arguments)]
unsafe fn attend_head_avx2(
    qkv: &[f32],
    first: usize,
    length: usize,
    hidden: usize,
    head: usize,
    head_dim: usize,
    out: SharedOut<'_>,
    scratch: &mut AttentionScratch,
) {
    // SAFETY: the caller's contract.
    unsafe { attend_head_body(qkv, first, length, hidden, head, head_dim, out, scratch) }
}

/// The body of [`attend_head`], inlined into each compiled form.
///
/// # Safety
/// As [`attend_head`].
#[inline(always)]
#[allow(unsafe_code, clippy::too_many_arguments)]
unsafe fn attend_head_body(
    qkv: &[f32],
    first: usize,
    length: usize,
    hidden: usize,
    head: usize,
    head_dim: usize,
    out: SharedOut<'_>,
    scratch: &mut AttentionScratch,
) {
    let stride = 3 * hidden;
    let rows = &qkv[first * stride..(first + length) * stride];
    let offset = head * head_dim;
    let AttentionScratch { keys, values, scores, context } = scratch;
    keys.clear();
    values.clear();
    for row in rows.chunks_exact(stride) {
        keys.extend_from_slice(&row[hidden + offset..hidden + offset + head_dim]);
        values.extend_from_slice(&row[2 * hidden + offset..2 * hidden + offset + head_dim]);
    }
    scores.clear();
    scores.resize(length, 0.0);
    context.clear();
    context.resize(head_dim, 0.0);
    for (query, row) in rows.chunks_exact(stride).enumerate() {
        let q = &row[offset..offset + head_dim];
        let mut max = f32::NEG_INFINITY;
        for (score, key) in scores.iter_mut().zip(keys.chunks_exact(head_dim)) {
            *score = dot(q, key);
            max = max.max(*score);
        }
        let mut sum = 0.0;
        for score in scores.iter_mut() {
            *score = (*score - max).exp();
            sum += *score;
        }
        let inverse = 1.0 / sum;
        context.fill(0.0);
        for (score, value) in scores.iter().zip(values.chunks_exact(head_dim)) {
            let weight = score * inverse;
            for (o, v) in context.iter_mut().zip(value) {
                *o += weight * v;
            }
        }
        // SAFETY: the caller's contract.
        unsafe { out.write((first + query) * hidden + offset, context) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_matches_the_series_definition() {
        // Reference values of erf.
        for (x, expected) in [
            (0.0f32, 0.0f32),
            (0.5, 0.520_499_9),
            (1.0, 0.842_700_8),
            (2.0, 0.995_322_3),
            (-1.5, -0.966_105_1),
            (5.0, 1.0),
        ] {
            assert!((erf(x) - expected).abs() < 2e-6, "erf({x}) = {} want {expected}", erf(x));
        }
    }

    #[test]
    fn attention_of_one_token_returns_its_value() {
        // One sequence of one token: softmax over one key is 1, context = v.
        let (heads, head_dim) = (2, 2);
        let qkv = [1.0, 2.0, 3.0, 4.0, 0.5, 0.5, 0.5, 0.5, 9.0, 8.0, 7.0, 6.0];
        for parallel in [false, true] {
            let mut out = vec![0.0; 4];
            attention(&qkv, &[1], heads, head_dim, &mut out, parallel);
            assert_eq!(out, vec![9.0, 8.0, 7.0, 6.0]);
        }
    }

    #[test]
    fn layer_norm_centres_and_scales() {
        let mut row = [1.0f32, 2.0, 3.0, 4.0];
        layer_norm_row(&mut row, &[1.0; 4], &[0.0; 4], 0.0);
        let mean: f32 = row.iter().sum::<f32>() / 4.0;
        let variance: f32 = row.iter().map(|x| x * x).sum::<f32>() / 4.0;
        assert!(mean.abs() < 1e-6 && (variance - 1.0).abs() < 1e-5);
    }
}
