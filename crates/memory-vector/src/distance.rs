//! Vector validation, normalisation and the dot-product kernels.
//!
//! The kernels are written as chunked loops over 32 independent lanes so
//! the compiler turns them into packed SIMD on any target. On x86-64 a copy
//! compiled for AVX2 + FMA is picked at run time when the CPU has those
//! features; the portable copy is used otherwise, so the crate needs no
//! `-C target-cpu` flag.

use std::sync::OnceLock;

use crate::error::{Result, VectorError};

/// Width of the chunked accumulators. 32 `f32` lanes is four AVX registers
/// (eight SSE registers): enough independent sums to hide FMA latency.
const LANES: usize = 32;

/// Checks that `vector` has `dim` finite components and a non-zero length.
pub(crate) fn validate(vector: &[f32], dim: usize) -> Result<()> {
    if vector.len() != dim {
        return Err(VectorError::DimensionMismatch { expected: dim, actual: vector.len() });
    }
    if let Some((index, &value)) = vector.iter().enumerate().find(|(_, x)| !x.is_finite()) {
        return Err(VectorError::NonFinite { index, value });
    }
    Ok(())
}

/// The factor that scales `vector` to unit L2 length, unchecked: not
/// finite when a component is not or the vector has no length.
pub(crate) fn unit_scale_unchecked(vector: &[f32]) -> f32 {
    // The vectorised f32 sum, unless it overflowed or underflowed.
    let mut norm = f64::from(dot(vector, vector)).sqrt();
    if !norm.is_finite() || norm < f64::from(f32::MIN_POSITIVE) {
        norm = vector.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>().sqrt();
    }
    (1.0 / norm) as f32
}

/// Validates `vector` and returns it scaled to unit L2 length.
pub(crate) fn normalized(vector: &[f32], dim: usize) -> Result<Vec<f32>> {
    validate(vector, dim)?;
    // Accumulate in f64 so very small or very large inputs neither underflow
    // to zero nor overflow to infinity.
    let norm = vector.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>().sqrt();
    if norm == 0.0 || !norm.is_finite() {
        return Err(VectorError::ZeroVector);
    }
    Ok(vector.iter().map(|&x| (f64::from(x) / norm) as f32).collect())
}

#[inline(always)]
fn dot_body<const FMA: bool>(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f32; LANES];
    let mut chunks_a = a.chunks_exact(LANES);
    let mut chunks_b = b.chunks_exact(LANES);
    for (ca, cb) in (&mut chunks_a).zip(&mut chunks_b) {
        for lane in 0..LANES {
            acc[lane] = if FMA { ca[lane].mul_add(cb[lane], acc[lane]) } else { acc[lane] + ca[lane] * cb[lane] };
        }
    }
    let mut tail = 0.0f32;
    for (x, y) in chunks_a.remainder().iter().zip(chunks_b.remainder()) {
        tail += x * y;
    }
    // Pairwise reduction keeps the rounding error of the sum small.
    let mut width = LANES / 2;
    while width > 0 {
        for lane in 0..width {
            acc[lane] += acc[lane + width];
        }
        width /= 2;
    }
    acc[0] + tail
}

/// Integer dot product of `i16` weights with `i8` codes, in 16-wide chunks
/// (one AVX2 `vpmaddwd` each when compiled for it).
#[inline(always)]
fn dot_i16_i8_body(weights: &[i16], codes: &[i8]) -> i32 {
    const WIDTH: usize = 16;
    let n = weights.len().min(codes.len());
    let (weights, codes) = (&weights[..n], &codes[..n]);
    let mut acc = [0i32; WIDTH];
    let mut chunks_w = weights.chunks_exact(WIDTH);
    let mut chunks_c = codes.chunks_exact(WIDTH);
    for (cw, cc) in (&mut chunks_w).zip(&mut chunks_c) {
        for lane in 0..WIDTH {
            acc[lane] += i32::from(cw[lane]) * i32::from(cc[lane]);
        }
    }
    let tail: i32 =
        chunks_w.remainder().iter().zip(chunks_c.remainder()).map(|(&w, &c)| i32::from(w) * i32::from(c)).sum();
    acc.iter().sum::<i32>() + tail
}

fn dot_i16_i8_portable(weights: &[i16], codes: &[i8]) -> i32 {
    dot_i16_i8_body(weights, codes)
}

fn dot_i16_i8_rows_portable(weights: &[i16], rows: &[i8], out: &mut [i32]) {
    for (row, sum) in rows.chunks_exact(weights.len().max(1)).zip(out.iter_mut()) {
        *sum = dot_i16_i8_body(weights, row);
    }
}

fn dot_portable(a: &[f32], b: &[f32]) -> f32 {
    dot_body::<false>(a, b)
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    #[target_feature(enable = "avx2,fma")]
    fn dot_avx2(a: &[f32], b: &[f32]) -> f32 {
        super::dot_body::<true>(a, b)
    }

    /// `vpmovsxbw` widens 16 codes to `i16`, `vpmaddwd` multiplies them
    /// with 16 weights and adds adjacent pairs into 8 `i32` lanes.
    #[target_feature(enable = "avx2")]
    #[allow(unsafe_code)]
    fn dot_i16_i8_avx2(weights: &[i16], codes: &[i8]) -> i32 {
        use std::arch::x86_64::{
            __m128i, __m256i, _mm_add_epi32, _mm_cvtsi128_si32, _mm_loadu_si128, _mm_shuffle_epi32, _mm256_add_epi32,
            _mm256_castsi256_si128, _mm256_cvtepi8_epi16, _mm256_extracti128_si256, _mm256_loadu_si256,
            _mm256_madd_epi16, _mm256_setzero_si256,
        };
        let n = weights.len().min(codes.len());
        let (mut acc0, mut acc1) = (_mm256_setzero_si256(), _mm256_setzero_si256());
        let mut i = 0;
        // SAFETY: every load reads 16 codes or 16 weights starting at `i`,
        // and the loop conditions keep `i + 16` (or `i + 32`) within `n`,
        // the length of both slices; unaligned loads accept any address.
        unsafe {
            while i + 32 <= n {
                let c0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(codes.as_ptr().add(i).cast::<__m128i>()));
                let c1 = _mm256_cvtepi8_epi16(_mm_loadu_si128(codes.as_ptr().add(i + 16).cast::<__m128i>()));
                let w0 = _mm256_loadu_si256(weights.as_ptr().add(i).cast::<__m256i>());
                let w1 = _mm256_loadu_si256(weights.as_ptr().add(i + 16).cast::<__m256i>());
                acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(c0, w0));
                acc1 = _mm256_add_epi32(acc1, _mm256_madd_epi16(c1, w1));
                i += 32;
            }
            if i + 16 <= n {
                let c0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(codes.as_ptr().add(i).cast::<__m128i>()));
                let w0 = _mm256_loadu_si256(weights.as_ptr().add(i).cast::<__m256i>());
                acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(c0, w0));
                i += 16;
            }
        }
        let acc = _mm256_add_epi32(acc0, acc1);
        let half = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256::<1>(acc));
        let quarter = _mm_add_epi32(half, _mm_shuffle_epi32::<0b00_00_11_10>(half));
        let eighth = _mm_add_epi32(quarter, _mm_shuffle_epi32::<0b00_00_00_01>(quarter));
        let tail: i32 = weights[i..n].iter().zip(&codes[i..n]).map(|(&w, &c)| i32::from(w) * i32::from(c)).sum();
        _mm_cvtsi128_si32(eighth) + tail
    }

    #[target_feature(enable = "avx2")]
    fn dot_i16_i8_rows_avx2(weights: &[i16], rows: &[i8], out: &mut [i32]) {
        for (row, sum) in rows.chunks_exact(weights.len().max(1)).zip(out.iter_mut()) {
            *sum = dot_i16_i8_avx2(weights, row);
        }
    }

    #[allow(unsafe_code)]
    pub(super) fn dot_i16_i8_rows_checked(weights: &[i16], rows: &[i8], out: &mut [i32]) {
        // SAFETY: installed by `super::kernels()` only after `has_avx2_fma()`
        // confirmed AVX2.
        unsafe { dot_i16_i8_rows_avx2(weights, rows, out) }
    }

    #[allow(unsafe_code)]
    pub(super) fn dot_i16_i8_checked(weights: &[i16], codes: &[i8]) -> i32 {
        // SAFETY: installed by `super::kernels()` only after `has_avx2_fma()`
        // confirmed AVX2.
        unsafe { dot_i16_i8_avx2(weights, codes) }
    }

    pub(super) fn has_avx2_fma() -> bool {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
    }

    #[allow(unsafe_code)]
    pub(super) fn dot_checked(a: &[f32], b: &[f32]) -> f32 {
        // SAFETY: this function is only installed by `super::kernels()` after
        // `has_avx2_fma()` confirmed that the running CPU supports AVX2 and
        // FMA, the only precondition of calling a `target_feature` function.
        unsafe { dot_avx2(a, b) }
    }
}

type DotFn = fn(&[f32], &[f32]) -> f32;
type DotI8Fn = fn(&[i16], &[i8]) -> i32;
type DotI8RowsFn = fn(&[i16], &[i8], &mut [i32]);

struct Kernels {
    dot: DotFn,
    dot_i16_i8: DotI8Fn,
    dot_i16_i8_rows: DotI8RowsFn,
    name: &'static str,
}

fn kernels() -> &'static Kernels {
    static KERNELS: OnceLock<Kernels> = OnceLock::new();
    KERNELS.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        if x86::has_avx2_fma() {
            return Kernels {
                dot: x86::dot_checked,
                dot_i16_i8: x86::dot_i16_i8_checked,
                dot_i16_i8_rows: x86::dot_i16_i8_rows_checked,
                name: "avx2+fma",
            };
        }
        Kernels {
            dot: dot_portable,
            dot_i16_i8: dot_i16_i8_portable,
            dot_i16_i8_rows: dot_i16_i8_rows_portable,
            name: "portable",
        }
    })
}

/// Name of the dot-product kernel selected for this CPU (`"avx2+fma"` or
/// `"portable"`), for logs and benchmark reports.
pub fn kernel_name() -> &'static str {
    kernels().name
}

/// Dot product of two equally long slices (the cosine, for unit vectors).
///
/// Extra components of the longer slice are ignored.
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    (kernels().dot)(a, b)
}

/// `Σ weights[i] × codes[i]` over the common length, in `i32` (the caller
/// keeps the sum in range; see the `quant` module).
#[inline]
pub(crate) fn dot_i16_i8(weights: &[i16], codes: &[i8]) -> i32 {
    (kernels().dot_i16_i8)(weights, codes)
}

/// [`dot_i16_i8`] of `weights` with each `weights.len()`-wide row of
/// `rows`, into `out` (one sum per row), in one kernel call.
#[inline]
pub(crate) fn dot_i16_i8_rows(weights: &[i16], rows: &[i8], out: &mut [i32]) {
    (kernels().dot_i16_i8_rows)(weights, rows, out);
}

/// A seeded pseudo-random unit vector (xorshift components in
/// `[-0.5, 0.5)`), for tests.
#[cfg(test)]
pub(crate) fn random_unit(seed: u64, dim: usize) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let raw: Vec<f32> = (0..dim)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        })
        .collect();
    normalized(&raw, dim).expect("a random vector is not zero")
}

#[cfg(test)]
thread_local! {
    /// Test-only fault injection: when set to `Some(n)`, the `n`-th next
    /// HNSW similarity evaluation on this thread panics.
    pub(crate) static FAIL_AFTER_EVALS: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(a: &[f32], b: &[f32]) -> f64 {
        a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum()
    }

    #[test]
    fn kernels_agree_with_f64_reference_for_all_tail_lengths() {
        for len in [0usize, 1, 7, 31, 32, 33, 63, 64, 100, 384, 1024, 1031] {
            let a: Vec<f32> = (0..len).map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0).collect();
            let b: Vec<f32> = (0..len).map(|i| ((i * 53 % 97) as f32 - 48.0) / 48.0).collect();
            let expected = naive(&a, &b);
            let tolerance = 1e-4 * (len as f64).max(1.0);
            assert!((f64::from(dot(&a, &b)) - expected).abs() < tolerance, "len {len}");
            assert!((f64::from(dot_portable(&a, &b)) - expected).abs() < tolerance, "len {len}");
        }
    }

    #[test]
    fn integer_kernels_are_exact_for_all_tail_lengths() {
        for len in [0usize, 1, 15, 16, 17, 31, 32, 33, 48, 100, 384, 1031] {
            let weights: Vec<i16> = (0..len).map(|i| ((i * 7919 % 65_521) as i32 - 32_760) as i16).collect();
            let codes: Vec<i8> = (0..len).map(|i| ((i * 31 % 255) as i32 - 127) as i8).collect();
            let expected: i64 = weights.iter().zip(&codes).map(|(&w, &c)| i64::from(w) * i64::from(c)).sum();
            assert_eq!(i64::from(dot_i16_i8(&weights, &codes)), expected, "len {len}");
            assert_eq!(i64::from(dot_i16_i8_portable(&weights, &codes)), expected, "len {len}");
            // Three rows of `len` codes: the row kernels give each row's sum.
            let rows: Vec<i8> = codes.iter().chain(&codes).chain(&codes).map(|c| c.saturating_neg()).collect();
            let mut sums = [0i32; 3];
            if len > 0 {
                dot_i16_i8_rows(&weights, &rows, &mut sums);
                assert_eq!(sums.map(i64::from), [-expected; 3], "len {len}");
                dot_i16_i8_rows_portable(&weights, &rows, &mut sums);
                assert_eq!(sums.map(i64::from), [-expected; 3], "len {len}");
            }
        }
    }

    #[test]
    fn normalisation_produces_unit_vectors_and_rejects_bad_input() {
        let v = normalized(&[3.0, 4.0], 2).unwrap();
        assert_eq!(v, vec![0.6, 0.8]);
        let tiny = normalized(&[1e-30, 0.0], 2).unwrap();
        assert_eq!(tiny, vec![1.0, 0.0]);
        let huge = normalized(&[3e38, 3e38], 2).unwrap();
        assert!((dot(&huge, &huge) - 1.0).abs() < 1e-6);
        assert!(matches!(normalized(&[1.0], 2), Err(VectorError::DimensionMismatch { expected: 2, actual: 1 })));
        assert!(matches!(normalized(&[1.0, f32::NAN], 2), Err(VectorError::NonFinite { index: 1, .. })));
        assert!(matches!(normalized(&[f32::INFINITY, 0.0], 2), Err(VectorError::NonFinite { index: 0, .. })));
        assert!(matches!(normalized(&[0.0, 0.0], 2), Err(VectorError::ZeroVector)));
    }
}
