//! The linear layers of the BERT forward pass: `out = input · Wᵀ + bias`
//! (optionally followed by GELU) against weights packed once at load.
//!
//! Layout: the `outputs × inputs` weight is cut into panels of [`PANEL`]
//! output columns; a panel stores, for every input index `k`, its
//! [`PANEL`] weights next to each other, so the kernel reads each panel
//! front to back as one stream. A tile of up to `MAX_ROWS` input rows is
//! multiplied against a panel with the tile's accumulators held in
//! registers (one [`PANEL`]-wide vector per row); bias and GELU are applied
//! when the tile is stored. Small inputs (one sentence: a few dozen rows)
//! read every weight once per product, which is what bounds them; large
//! inputs are cut into row blocks that keep a panel and the block's rows
//! in cache.
//!
//! The kernel is plain Rust compiled three times (AVX-512, AVX2 + FMA +
//! F16C and the baseline), the widest the CPU supports chosen once at
//! start. Products of a few rows read a half-precision copy of the panels
//! (converted to `f32` in registers; all arithmetic stays `f32`).

use rayon::prelude::*;

use super::team::SharedOut;

/// Output columns per packed panel (one 512-bit vector of `f32`).
pub(super) const PANEL: usize = 16;

/// Rows per block when a large input is split across threads or cache blocks.
const ROW_BLOCK: usize = 64;

/// Below this many multiply-adds a product runs on the calling thread.
const MIN_PARALLEL_WORK: usize = 256 * 1024;

/// Instruction sets the kernel is compiled for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Isa {
    Avx512,
    Avx2,
    Base,
}

impl Isa {
    fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("fma") {
                return Isa::Avx512;
            }
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
                && std::arch::is_x86_feature_detected!("f16c")
            {
                return Isa::Avx2;
            }
        }
        Isa::Base
    }

    /// Rows per register tile: the accumulators (rows × PANEL floats) must
    /// fit in the vector registers with room for the panel row.
    /// Whether the kernel can read half-precision weights (AVX-512F or F16C).
    fn converts_half(self) -> bool {
        self != Isa::Base
    }

    fn max_rows(self) -> usize {
        match self {
            Isa::Avx512 => 14,
            Isa::Avx2 => 6,
            Isa::Base => 3,
        }
    }
}

/// What happens to a product's values as they are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Epilogue {
    /// `x + bias`.
    Bias,
    /// `gelu(x + bias)` (exact, erf-based).
    BiasGelu,
}

/// A linear layer's weight, packed into panels, and its bias.
pub(super) struct PackedLinear {
    inputs: usize,
    outputs: usize,
    /// `ceil(outputs / PANEL)` panels of `inputs × PANEL`, zero-padded.
    panels: Vec<f32>,
    /// The same panels rounded to IEEE half precision (`f16` bits), when
    /// the CPU converts them in hardware: products of a few rows read every
    /// weight once, so they are bound by the bytes streamed, and half the
    /// bytes keep a model's layers in the last-level cache.
    half_panels: Option<Vec<u16>>,
    /// Bias, zero-padded to a whole number of panels.
    bias: Vec<f32>,
    isa: Isa,
}

impl PackedLinear {
    /// Packs `weight` (`outputs × inputs`, row-major, as stored by PyTorch's
    /// `nn.Linear`) and `bias` (`outputs`).
    pub(super) fn new(weight: &[f32], bias: &[f32], outputs: usize, inputs: usize) -> Self {
        assert_eq!(weight.len(), outputs * inputs, "weight shape");
        assert_eq!(bias.len(), outputs, "bias shape");
        let panel_count = outputs.div_ceil(PANEL);
        let mut panels = vec![0.0f32; panel_count * inputs * PANEL];
        for (panel_index, panel) in panels.chunks_exact_mut(inputs * PANEL).enumerate() {
            for lane in 0..PANEL {
                let output = panel_index * PANEL + lane;
                if output >= outputs {
                    break;
                }
                let row = &weight[output * inputs..(output + 1) * inputs];
                for (k, &value) in row.iter().enumerate() {
                    panel[k * PANEL + lane] = value;
                }
            }
        }
        let mut padded_bias = bias.to_vec();
        padded_bias.resize(panel_count * PANEL, 0.0);
        let isa = Isa::detect();
        let half_panels =
            isa.converts_half().then(|| panels.iter().map(|&x| half::f16::from_f32(x).to_bits()).collect());
        Self { inputs, outputs, panels, half_panels, bias: padded_bias, isa }
    }

    /// Width of the layer's output rows.
    pub(super) fn outputs(&self) -> usize {
        self.outputs
    }

    /// `out (rows × outputs) = epilogue(input (rows × inputs) · Wᵀ + bias)`.
    /// With `parallel`, a large enough product is split across the rayon
    /// pool: by row blocks when there are many rows, else by panels.
    pub(super) fn product(&self, input: &[f32], rows: usize, epilogue: Epilogue, out: &mut [f32], parallel: bool) {
        assert_eq!(input.len(), rows * self.inputs, "input shape");
        assert_eq!(out.len(), rows * self.outputs, "output shape");
        let threads = if parallel { rayon::current_num_threads() } else { 1 };
        let work = rows * self.inputs * self.outputs;
        let half = rows <= HALF_MAX_ROWS;
        if threads <= 1 || work < MIN_PARALLEL_WORK {
            // SAFETY: this thread alone holds `out`.
            #[allow(unsafe_code)]
            unsafe {
                self.block(input, rows, 0..self.panel_count(), epilogue, SharedOut::new(out), half)
            };
            return;
        }
        if rows >= 2 * ROW_BLOCK {
            out.par_chunks_mut(ROW_BLOCK * self.outputs).zip(input.par_chunks(ROW_BLOCK * self.inputs)).for_each(
                |(out, input)| {
                    let block_rows = input.len() / self.inputs;
                    // SAFETY: every task holds its own rows of `out`.
                    #[allow(unsafe_code)]
                    unsafe {
                        self.block(input, block_rows, 0..self.panel_count(), epilogue, SharedOut::new(out), half)
                    };
                },
            );
            return;
        }
        // Few rows: every thread takes a share of the panels and writes its
        // columns straight into `out`.
        let per_task = self.panel_count().div_ceil(threads);
        let shared = SharedOut::new(out);
        (0..threads).into_par_iter().for_each(|task| {
            let panels = task * per_task..((task + 1) * per_task).min(self.panel_count());
            // SAFETY: the tasks' panel ranges, hence their columns, are disjoint.
            #[allow(unsafe_code)]
            unsafe {
                self.block(input, rows, panels, epilogue, shared, half)
            };
        });
    }

    /// The product for the columns of `panels` only, written into `out`
    /// (`rows × outputs`); one task of a shared pass.
    ///
    /// # Safety
    /// While it runs no other thread touches those columns of `out`.
    #[allow(unsafe_code)]
    pub(super) unsafe fn product_panels(
        &self,
        input: &[f32],
        rows: usize,
        panels: std::ops::Range<usize>,
        epilogue: Epilogue,
        out: SharedOut<'_>,
    ) {
        assert_eq!(input.len(), rows * self.inputs, "input shape");
        assert_eq!(out.len(), rows * self.outputs, "output shape");
        assert!(panels.end <= self.panel_count(), "panels of the layer");
        // SAFETY: the caller's contract.
        unsafe { self.block(input, rows, panels, epilogue, out, rows <= HALF_MAX_ROWS) }
    }

    /// Number of [`PANEL`]-wide column panels.
    pub(super) fn panel_count(&self) -> usize {
        self.outputs.div_ceil(PANEL)
    }

    /// One thread: the panels `panels` for all `rows`, into `out`
    /// (`rows × outputs`), from the half-precision panels when `half` (a
    /// product of at most [`HALF_MAX_ROWS`] rows) and there are any.
    ///
    /// # Safety
    /// While it runs no other thread touches the columns of `panels` in `out`.
    #[allow(unsafe_code)]
    unsafe fn block(
        &self,
        input: &[f32],
        rows: usize,
        panels: std::ops::Range<usize>,
        epilogue: Epilogue,
        out: SharedOut<'_>,
        half: bool,
    ) {
        assert!(input.len() >= rows * self.inputs && out.len() >= rows * self.outputs, "block shape");
        let job = Job { weight: self, input, rows, panels, gelu: epilogue == Epilogue::BiasGelu, out };
        match (self.isa, half.then_some(()).and(self.half_panels.as_deref())) {
            #[cfg(target_arch = "x86_64")]
            (Isa::Avx512, Some(half)) => x86::run_avx512_half(&job, half),
            #[cfg(target_arch = "x86_64")]
            (Isa::Avx512, None) => x86::run_avx512(&job),
            #[cfg(target_arch = "x86_64")]
            (Isa::Avx2, Some(half)) => x86::run_avx2_half(&job, half),
            #[cfg(target_arch = "x86_64")]
            (Isa::Avx2, None) => x86::run_avx2(&job),
            _ => run_base(&job),
        }
    }
}

/// Products of at most this many rows (one sentence, a few short ones) read
/// the half-precision weights; larger ones reuse every panel across many
/// rows from cache and read the `f32` weights.
pub(super) const HALF_MAX_ROWS: usize = ROW_BLOCK;

/// One thread's share of a product.
/// `out` is `rows × outputs`; the job alone writes the columns of `panels`.
struct Job<'a> {
    weight: &'a PackedLinear,
    input: &'a [f32],
    rows: usize,
    panels: std::ops::Range<usize>,
    gelu: bool,
    out: SharedOut<'a>,
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::{
        __m128i, __m256, __m256i, __m512, _mm_loadu_si128, _mm256_cvtph_ps, _mm256_fmadd_ps, _mm256_loadu_ps,
        _mm256_loadu_si256, _mm256_set1_ps, _mm256_setzero_ps, _mm256_storeu_ps, _mm512_cvtph_ps, _mm512_fmadd_ps,
        _mm512_loadu_ps, _mm512_set1_ps, _mm512_setzero_ps, _mm512_storeu_ps,
    };

    use super::{Isa, Job, PANEL, Tile, for_each_tile, store};

    /// How a kernel reads one panel row (`PANEL` weights) as `f32` vectors.
    #[allow(unsafe_code)]
    trait Weights512: Copy {
        /// # Safety
        /// `ptr.add(k * PANEL) .. + PANEL` must be readable.
        unsafe fn row(ptr: *const Self, k: usize) -> __m512;
    }

    impl Weights512 for f32 {
        #[inline(always)]
        #[allow(unsafe_code)]
        unsafe fn row(ptr: *const Self, k: usize) -> __m512 {
            // SAFETY: the caller guarantees the 16 floats are readable; the
            // kernels calling this are compiled with avx512f.
            unsafe { _mm512_loadu_ps(ptr.add(k * PANEL)) }
        }
    }

    impl Weights512 for u16 {
        #[inline(always)]
        #[allow(unsafe_code)]
        unsafe fn row(ptr: *const Self, k: usize) -> __m512 {
            // SAFETY: as above, 16 halves (32 bytes) are readable.
            unsafe { _mm512_cvtph_ps(_mm256_loadu_si256(ptr.add(k * PANEL).cast::<__m256i>())) }
        }
    }

    /// The AVX2 form: one panel row as two 8-lane vectors.
    #[allow(unsafe_code)]
    trait Weights256: Copy {
        /// # Safety
        /// `ptr.add(k * PANEL) .. + PANEL` must be readable.
        unsafe fn row(ptr: *const Self, k: usize) -> [__m256; 2];
    }

    impl Weights256 for f32 {
        #[inline(always)]
        #[allow(unsafe_code)]
        unsafe fn row(ptr: *const Self, k: usize) -> [__m256; 2] {
            // SAFETY: the caller guarantees the 16 floats are readable; the
            // kernels calling this are compiled with avx2.
            unsafe { [_mm256_loadu_ps(ptr.add(k * PANEL)), _mm256_loadu_ps(ptr.add(k * PANEL + 8))] }
        }
    }

    impl Weights256 for u16 {
        #[inline(always)]
        #[allow(unsafe_code)]
        unsafe fn row(ptr: *const Self, k: usize) -> [__m256; 2] {
            // SAFETY: as above, 16 halves are readable; the AVX2 kernels are
            // compiled with f16c.
            unsafe {
                let row = ptr.add(k * PANEL);
                [
                    _mm256_cvtph_ps(_mm_loadu_si128(row.cast::<__m128i>())),
                    _mm256_cvtph_ps(_mm_loadu_si128(row.add(8).cast::<__m128i>())),
                ]
            }
        }
    }

    macro_rules! tiles512 {
        ($job:expr, $panels:expr) => {
            for_each_tile($job, $panels, Isa::Avx512.max_rows(), |rows, tile| match rows {
                1 => tile512::<1, _>(tile),
                2 => tile512::<2, _>(tile),
                3 => tile512::<3, _>(tile),
                4 => tile512::<4, _>(tile),
                5 => tile512::<5, _>(tile),
                6 => tile512::<6, _>(tile),
                7 => tile512::<7, _>(tile),
                8 => tile512::<8, _>(tile),
                9 => tile512::<9, _>(tile),
                10 => tile512::<10, _>(tile),
                11 => tile512::<11, _>(tile),
                12 => tile512::<12, _>(tile),
                13 => tile512::<13, _>(tile),
                14 => tile512::<14, _>(tile),
                _ => unreachable!("AVX-512 tiles have 1 to 14 rows"),
            })
        };
    }

    macro_rules! tiles256 {
        ($job:expr, $panels:expr) => {
            for_each_tile($job, $panels, Isa::Avx2.max_rows(), |rows, tile| match rows {
                1 => tile256::<1, _>(tile),
                2 => tile256::<2, _>(tile),
                3 => tile256::<3, _>(tile),
                4 => tile256::<4, _>(tile),
                5 => tile256::<5, _>(tile),
                6 => tile256::<6, _>(tile),
                _ => unreachable!("AVX2 tiles have 1 to 6 rows"),
            })
        };
    }

    #[target_feature(enable = "avx512f,fma")]
    fn avx512(job: &Job<'_>) {
        tiles512!(job, &job.weight.panels);
    }

    #[target_feature(enable = "avx512f,fma")]
    fn avx512_half(job: &Job<'_>, half: &[u16]) {
        tiles512!(job, half);
    }

    /// `ROWS` rows against one panel: one 16-lane accumulator per row.
    #[target_feature(enable = "avx512f,fma")]
    #[allow(unsafe_code)]
    fn tile512<const ROWS: usize, W: Weights512>(tile: Tile<'_, W>) {
        let inputs = tile.inputs;
        assert!(tile.input.len() >= ROWS * inputs && tile.weights.len() == inputs * PANEL, "tile shape");
        let (input, weights) = (tile.input.as_ptr(), tile.weights.as_ptr());
        let mut acc: [__m512; ROWS] = [_mm512_setzero_ps(); ROWS];
        for k in 0..inputs {
            // SAFETY: `k < inputs`, so the panel row `k * PANEL .. + PANEL`
            // lies within `weights` (`inputs * PANEL` long) and every
            // `row * inputs + k` (row < ROWS) within `input` (asserted).
            unsafe {
                let w = W::row(weights, k);
                for (row, acc) in acc.iter_mut().enumerate() {
                    *acc = _mm512_fmadd_ps(_mm512_set1_ps(*input.add(row * inputs + k)), w, *acc);
                }
            }
        }
        let mut values = [[0.0f32; PANEL]; ROWS];
        for (row, acc) in acc.iter().enumerate() {
            // SAFETY: `values[row]` holds exactly 16 floats.
            unsafe { _mm512_storeu_ps(values[row].as_mut_ptr(), *acc) };
        }
        store(&tile, &mut values);
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    fn avx2(job: &Job<'_>) {
        tiles256!(job, &job.weight.panels);
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    fn avx2_half(job: &Job<'_>, half: &[u16]) {
        tiles256!(job, half);
    }

    /// `ROWS` rows against one panel: two 8-lane accumulators per row.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[allow(unsafe_code)]
    fn tile256<const ROWS: usize, W: Weights256>(tile: Tile<'_, W>) {
        let inputs = tile.inputs;
        assert!(tile.input.len() >= ROWS * inputs && tile.weights.len() == inputs * PANEL, "tile shape");
        let (input, weights) = (tile.input.as_ptr(), tile.weights.as_ptr());
        let mut acc: [[__m256; 2]; ROWS] = [[_mm256_setzero_ps(); 2]; ROWS];
        for k in 0..inputs {
            // SAFETY: as in `tile512`: the panel row and every input read
            // stay below the lengths asserted above.
            unsafe {
                let [w0, w1] = W::row(weights, k);
                for (row, acc) in acc.iter_mut().enumerate() {
                    let x = _mm256_set1_ps(*input.add(row * inputs + k));
                    acc[0] = _mm256_fmadd_ps(x, w0, acc[0]);
                    acc[1] = _mm256_fmadd_ps(x, w1, acc[1]);
                }
            }
        }
        let mut values = [[0.0f32; PANEL]; ROWS];
        for (row, acc) in acc.iter().enumerate() {
            // SAFETY: `values[row]` holds 16 floats: two stores of 8.
            unsafe {
                _mm256_storeu_ps(values[row].as_mut_ptr(), acc[0]);
                _mm256_storeu_ps(values[row].as_mut_ptr().add(8), acc[1]);
            }
        }
        store(&tile, &mut values);
    }

    #[allow(unsafe_code)]
    pub(super) fn run_avx512(job: &Job<'_>) {
        // SAFETY: `PackedLinear` only selects `Isa::Avx512` after
        // `is_x86_feature_detected!` reported avx512f and fma.
        unsafe { avx512(job) }
    }

    #[allow(unsafe_code)]
    pub(super) fn run_avx512_half(job: &Job<'_>, half: &[u16]) {
        // SAFETY: as for `run_avx512`.
        unsafe { avx512_half(job, half) }
    }

    #[allow(unsafe_code)]
    pub(super) fn run_avx2(job: &Job<'_>) {
        // SAFETY: `PackedLinear` only selects `Isa::Avx2` after
        // `is_x86_feature_detected!` reported avx2, fma and f16c.
        unsafe { avx2(job) }
    }

    #[allow(unsafe_code)]
    pub(super) fn run_avx2_half(job: &Job<'_>, half: &[u16]) {
        // SAFETY: as for `run_avx2`.
        unsafe { avx2_half(job, half) }
    }
}

/// Bias (and GELU) on a finished tile, then its columns into the output.
#[inline(always)]
fn store<const ROWS: usize, W>(tile: &Tile<'_, W>, values: &mut [[f32; PANEL]; ROWS]) {
    for (row, row_values) in values.iter_mut().enumerate() {
        for (a, &b) in row_values.iter_mut().zip(tile.bias) {
            let v = *a + b;
            *a = if tile.gelu { super::kernels::gelu(v) } else { v };
        }
        // SAFETY: the tile's columns lie in its job's panels, which only
        // this job writes (the contract of `PackedLinear::block`).
        #[allow(unsafe_code)]
        unsafe {
            let offset = tile.offset + row * tile.ldc;
            if tile.columns == PANEL {
                tile.out.write_array(offset, row_values);
            } else {
                tile.out.write(offset, &row_values[..tile.columns]);
            }
        };
    }
}

/// Cuts the rows into blocks and the blocks into near-equal tiles of at
/// most `max_rows`, then runs `kernel(tile_rows, tile)` for every (block,
/// panel, tile): a block's rows stay in cache while the panels stream by.
/// `all_panels` is the weight in panel layout (`f32` or half bits).
#[inline(always)]
fn for_each_tile<W>(job: &Job<'_>, all_panels: &[W], max_rows: usize, mut kernel: impl FnMut(usize, Tile<'_, W>)) {
    let inputs = job.weight.inputs;
    let mut block_start = 0;
    while block_start < job.rows {
        let block_rows = (job.rows - block_start).min(ROW_BLOCK);
        let tiles = block_rows.div_ceil(max_rows);
        for panel in job.panels.clone() {
            let weights = &all_panels[panel * inputs * PANEL..(panel + 1) * inputs * PANEL];
            let bias: &[f32; PANEL] =
                job.weight.bias[panel * PANEL..(panel + 1) * PANEL].try_into().expect("bias is padded to panels");
            let column = panel * PANEL;
            let columns = (job.weight.outputs - column).min(PANEL);
            let mut tile_start = block_start;
            for tile in 0..tiles {
                // Near-equal tiles: the first `block_rows % tiles` get one more row.
                let tile_rows = block_rows / tiles + usize::from(tile < block_rows % tiles);
                let input = &job.input[tile_start * inputs..(tile_start + tile_rows) * inputs];
                let (ldc, offset) = (job.weight.outputs, tile_start * job.weight.outputs + column);
                kernel(
                    tile_rows,
                    Tile { input, inputs, weights, bias, gelu: job.gelu, out: job.out, offset, ldc, columns },
                );
                tile_start += tile_rows;
            }
        }
        block_start += block_rows;
    }
}

/// The portable kernel (any CPU): tiles of up to three rows.
fn run_base(job: &Job<'_>) {
    for_each_tile(job, &job.weight.panels, Isa::Base.max_rows(), |rows, tile| match rows {
        1 => tile_portable::<1>(tile),
        2 => tile_portable::<2>(tile),
        3 => tile_portable::<3>(tile),
        _ => unreachable!("portable tiles have 1 to 3 rows"),
    });
}

/// One register tile: `rows` input rows against one panel of weights `W`.
struct Tile<'a, W> {
    input: &'a [f32],
    inputs: usize,
    weights: &'a [W],
    bias: &'a [f32; PANEL],
    gelu: bool,
    /// The product's output; the tile's row 0, column 0 is at `offset`.
    out: SharedOut<'a>,
    offset: usize,
    ldc: usize,
    columns: usize,
}

fn tile_portable<const ROWS: usize>(tile: Tile<'_, f32>) {
    let inputs = tile.inputs;
    let mut acc = [[0.0f32; PANEL]; ROWS];
    for (k, panel_row) in tile.weights.chunks_exact(PANEL).enumerate() {
        for (row, acc_row) in acc.iter_mut().enumerate() {
            let x = tile.input[row * inputs + k];
            for (a, &w) in acc_row.iter_mut().zip(panel_row) {
                *a += x * w;
            }
        }
    }
    store(&tile, &mut acc);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plain triple loop: the reference the packed kernel must match.
    fn reference(input: &[f32], rows: usize, weight: &[f32], bias: &[f32], outputs: usize, inputs: usize) -> Vec<f32> {
        let mut out = vec![0.0f32; rows * outputs];
        for r in 0..rows {
            for o in 0..outputs {
                let dot: f64 =
                    (0..inputs).map(|k| f64::from(input[r * inputs + k]) * f64::from(weight[o * inputs + k])).sum();
                out[r * outputs + o] = dot as f32 + bias[o];
            }
        }
        out
    }

    /// The weights a product of `rows` rows multiplies by: rounded to half
    /// precision when the kernel reads the half panels.
    fn effective_weights(packed: &PackedLinear, weight: &[f32], rows: usize) -> Vec<f32> {
        if packed.half_panels.is_some() && rows <= HALF_MAX_ROWS {
            weight.iter().map(|&w| half::f16::from_f32(w).to_f32()).collect()
        } else {
            weight.to_vec()
        }
    }

    fn pseudo_random(len: usize, seed: u32) -> Vec<f32> {
        let mut state = seed.wrapping_mul(2_654_435_761).max(1);
        (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                (state % 2001) as f32 / 1000.0 - 1.0
            })
            .collect()
    }

    #[test]
    fn packed_product_matches_the_triple_loop_for_every_shape_and_split() {
        // Shapes cover partial panels (outputs not a multiple of 16), every
        // tile height, several row blocks, both parallel splits, and both
        // sides of the half-precision bound.
        for &(rows, inputs, outputs) in &[
            (1, 3, 5),
            (7, 16, 16),
            (25, 40, 37),
            (HALF_MAX_ROWS, 24, 33),
            (HALF_MAX_ROWS + 1, 24, 33),
            (130, 24, 50),
            (200, 64, 96),
            (31, 96, 200),
        ] {
            let input = pseudo_random(rows * inputs, 1);
            let weight = pseudo_random(outputs * inputs, 2);
            let bias = pseudo_random(outputs, 3);
            let packed = PackedLinear::new(&weight, &bias, outputs, inputs);
            let expected = reference(&input, rows, &effective_weights(&packed, &weight, rows), &bias, outputs, inputs);
            for parallel in [false, true] {
                let mut out = vec![f32::NAN; rows * outputs];
                packed.product(&input, rows, Epilogue::Bias, &mut out, parallel);
                for (got, want) in out.iter().zip(&expected) {
                    assert!(
                        (got - want).abs() < 1e-4,
                        "{rows}×{inputs}×{outputs} parallel={parallel}: {got} vs {want}"
                    );
                }
                let mut activated = vec![f32::NAN; rows * outputs];
                packed.product(&input, rows, Epilogue::BiasGelu, &mut activated, parallel);
                for (got, want) in activated.iter().zip(&expected) {
                    assert!((got - super::super::kernels::gelu(*want)).abs() < 1e-4, "gelu {rows}×{inputs}×{outputs}");
                }
            }
        }
    }

    #[test]
    fn half_panels_round_every_weight_to_the_nearest_half() {
        let (inputs, outputs) = (5, 21);
        let weight = pseudo_random(outputs * inputs, 7);
        let packed = PackedLinear::new(&weight, &vec![0.0; outputs], outputs, inputs);
        let Some(half_panels) = &packed.half_panels else {
            assert_eq!(packed.isa, Isa::Base, "only the portable kernel has no half panels");
            return;
        };
        for (f32_value, &bits) in packed.panels.iter().zip(half_panels) {
            assert_eq!(bits, half::f16::from_f32(*f32_value).to_bits());
        }
    }

    #[test]
    fn every_compiled_kernel_agrees_with_the_baseline() {
        // Above the half-precision bound: every kernel reads the f32 panels.
        let (rows, inputs, outputs) = (HALF_MAX_ROWS + 29, 48, 40);
        let input = pseudo_random(rows * inputs, 4);
        let weight = pseudo_random(outputs * inputs, 5);
        let bias = pseudo_random(outputs, 6);
        let mut packed = PackedLinear::new(&weight, &bias, outputs, inputs);
        let detected = packed.isa;
        let mut results = Vec::new();
        for isa in [Isa::Base, Isa::Avx2, Isa::Avx512] {
            // Only instruction sets this CPU has (the detected one and below).
            let available = match detected {
                Isa::Avx512 => true,
                Isa::Avx2 => isa != Isa::Avx512,
                Isa::Base => isa == Isa::Base,
            };
            if !available {
                continue;
            }
            packed.isa = isa;
            let mut out = vec![0.0f32; rows * outputs];
            packed.product(&input, rows, Epilogue::Bias, &mut out, false);
            results.push(out);
        }
        for other in &results[1..] {
            for (a, b) in results[0].iter().zip(other) {
                assert!((a - b).abs() < 1e-4);
            }
        }
    }

    #[test]
    fn every_half_precision_kernel_matches_the_triple_loop_on_rounded_weights() {
        let (rows, inputs, outputs) = (29, 48, 40);
        let input = pseudo_random(rows * inputs, 8);
        let weight = pseudo_random(outputs * inputs, 9);
        let bias = pseudo_random(outputs, 10);
        let mut packed = PackedLinear::new(&weight, &bias, outputs, inputs);
        let rounded: Vec<f32> = weight.iter().map(|&w| half::f16::from_f32(w).to_f32()).collect();
        let expected = reference(&input, rows, &rounded, &bias, outputs, inputs);
        let kernels: &[Isa] = match packed.isa {
            Isa::Avx512 => &[Isa::Avx512, Isa::Avx2],
            Isa::Avx2 => &[Isa::Avx2],
            Isa::Base => &[],
        };
        for &isa in kernels {
            packed.isa = isa;
            let mut out = vec![f32::NAN; rows * outputs];
            packed.product(&input, rows, Epilogue::Bias, &mut out, false);
            for (got, want) in out.iter().zip(&expected) {
                assert!((got - want).abs() < 1e-4, "{isa:?}: {got} vs {want}");
            }
        }
    }
}
