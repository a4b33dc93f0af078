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
//! The kernel is plain Rust compiled three times (AVX-512, AVX2 + FMA and
//! the baseline), the widest the CPU supports chosen once at start.

use rayon::prelude::*;

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
            if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
                return Isa::Avx2;
            }
        }
        Isa::Base
    }

    /// Rows per register tile: the accumulators (rows × PANEL floats) must
    /// fit in the vector registers with room for the panel row.
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
        Self { inputs, outputs, panels, bias: padded_bias, isa: Isa::detect() }
    }

    /// Width of the layer's output rows.
    pub(super) fn outputs(&self) -> usize {
        self.outputs
    }

    fn panel_count(&self) -> usize {
        self.outputs.div_ceil(PANEL)
    }

    /// `out (rows × outputs) = epilogue(input (rows × inputs) · Wᵀ + bias)`.
    /// With `parallel`, a large enough product is split across the rayon
    /// pool: by row blocks when there are many rows, else by panels.
    pub(super) fn product(&self, input: &[f32], rows: usize, epilogue: Epilogue, out: &mut [f32], parallel: bool) {
        assert_eq!(input.len(), rows * self.inputs, "input shape");
        assert_eq!(out.len(), rows * self.outputs, "output shape");
        let threads = if parallel { rayon::current_num_threads() } else { 1 };
        let work = rows * self.inputs * self.outputs;
        if threads <= 1 || work < MIN_PARALLEL_WORK {
            self.block(input, rows, 0..self.panel_count(), epilogue, out, self.outputs, 0);
            return;
        }
        if rows >= 2 * ROW_BLOCK {
            out.par_chunks_mut(ROW_BLOCK * self.outputs).zip(input.par_chunks(ROW_BLOCK * self.inputs)).for_each(
                |(out, input)| {
                    let block_rows = input.len() / self.inputs;
                    self.block(input, block_rows, 0..self.panel_count(), epilogue, out, self.outputs, 0);
                },
            );
            return;
        }
        // Few rows: every thread takes a share of the panels and writes its
        // columns into its own buffer; the shares are then copied into place.
        let per_task = self.panel_count().div_ceil(threads);
        let shares: Vec<(usize, usize, Vec<f32>)> = (0..threads)
            .into_par_iter()
            .filter_map(|task| {
                let first = task * per_task;
                let last = ((task + 1) * per_task).min(self.panel_count());
                if first >= last {
                    return None;
                }
                let first_column = first * PANEL;
                let width = (last * PANEL).min(self.outputs) - first_column;
                let mut share = vec![0.0f32; rows * width];
                self.block(input, rows, first..last, epilogue, &mut share, width, first_column);
                Some((first_column, width, share))
            })
            .collect();
        for (first_column, width, share) in shares {
            for (row, values) in share.chunks_exact(width).enumerate() {
                let start = row * self.outputs + first_column;
                out[start..start + width].copy_from_slice(values);
            }
        }
    }

    /// One thread: the panels `panels` for all `rows`, into `out` whose
    /// rows are `ldc` wide and whose column 0 is output `first_column`.
    #[allow(clippy::too_many_arguments)]
    fn block(
        &self,
        input: &[f32],
        rows: usize,
        panels: std::ops::Range<usize>,
        epilogue: Epilogue,
        out: &mut [f32],
        ldc: usize,
        first_column: usize,
    ) {
        let job = Job { weight: self, input, rows, panels, gelu: epilogue == Epilogue::BiasGelu, ldc, first_column };
        match self.isa {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => x86::run_avx512(&job, out),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => x86::run_avx2(&job, out),
            _ => run_base(&job, out),
        }
    }
}

/// One thread's share of a product.
struct Job<'a> {
    weight: &'a PackedLinear,
    input: &'a [f32],
    rows: usize,
    panels: std::ops::Range<usize>,
    gelu: bool,
    ldc: usize,
    first_column: usize,
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::{
        __m256, __m512, _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_set1_ps, _mm256_setzero_ps, _mm256_storeu_ps,
        _mm512_fmadd_ps, _mm512_loadu_ps, _mm512_set1_ps, _mm512_setzero_ps, _mm512_storeu_ps,
    };

    use super::{Isa, Job, PANEL, Tile, for_each_tile, store};

    #[target_feature(enable = "avx512f,fma")]
    fn avx512(job: &Job<'_>, out: &mut [f32]) {
        for_each_tile(job, out, Isa::Avx512.max_rows(), |rows, tile| match rows {
            1 => tile512::<1>(tile),
            2 => tile512::<2>(tile),
            3 => tile512::<3>(tile),
            4 => tile512::<4>(tile),
            5 => tile512::<5>(tile),
            6 => tile512::<6>(tile),
            7 => tile512::<7>(tile),
            8 => tile512::<8>(tile),
            9 => tile512::<9>(tile),
            10 => tile512::<10>(tile),
            11 => tile512::<11>(tile),
            12 => tile512::<12>(tile),
            13 => tile512::<13>(tile),
            14 => tile512::<14>(tile),
            _ => unreachable!("AVX-512 tiles have 1 to 14 rows"),
        });
    }

    /// `ROWS` rows against one panel: one 16-lane accumulator per row.
    #[target_feature(enable = "avx512f,fma")]
    #[allow(unsafe_code)]
    fn tile512<const ROWS: usize>(mut tile: Tile<'_>) {
        let inputs = tile.inputs;
        assert!(tile.input.len() >= ROWS * inputs && tile.weights.len() == inputs * PANEL, "tile shape");
        let (input, weights) = (tile.input.as_ptr(), tile.weights.as_ptr());
        let mut acc: [__m512; ROWS] = [_mm512_setzero_ps(); ROWS];
        for k in 0..inputs {
            // SAFETY: `k < inputs`, so the panel row `k * PANEL .. + PANEL`
            // lies within `weights` (`inputs * PANEL` long) and every
            // `row * inputs + k` (row < ROWS) within `input` (asserted).
            unsafe {
                let w = _mm512_loadu_ps(weights.add(k * PANEL));
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
        store(&mut tile, &mut values);
    }

    #[target_feature(enable = "avx2,fma")]
    fn avx2(job: &Job<'_>, out: &mut [f32]) {
        for_each_tile(job, out, Isa::Avx2.max_rows(), |rows, tile| match rows {
            1 => tile256::<1>(tile),
            2 => tile256::<2>(tile),
            3 => tile256::<3>(tile),
            4 => tile256::<4>(tile),
            5 => tile256::<5>(tile),
            6 => tile256::<6>(tile),
            _ => unreachable!("AVX2 tiles have 1 to 6 rows"),
        });
    }

    /// `ROWS` rows against one panel: two 8-lane accumulators per row.
    #[target_feature(enable = "avx2,fma")]
    #[allow(unsafe_code)]
    fn tile256<const ROWS: usize>(mut tile: Tile<'_>) {
        let inputs = tile.inputs;
        assert!(tile.input.len() >= ROWS * inputs && tile.weights.len() == inputs * PANEL, "tile shape");
        let (input, weights) = (tile.input.as_ptr(), tile.weights.as_ptr());
        let mut acc: [[__m256; 2]; ROWS] = [[_mm256_setzero_ps(); 2]; ROWS];
        for k in 0..inputs {
            // SAFETY: as in `tile512`: the panel row and every input read
            // stay below the lengths asserted above.
            unsafe {
                let w0 = _mm256_loadu_ps(weights.add(k * PANEL));
                let w1 = _mm256_loadu_ps(weights.add(k * PANEL + 8));
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
        store(&mut tile, &mut values);
    }

    #[allow(unsafe_code)]
    pub(super) fn run_avx512(job: &Job<'_>, out: &mut [f32]) {
        // SAFETY: `PackedLinear` only selects `Isa::Avx512` after
        // `is_x86_feature_detected!` reported avx512f and fma.
        unsafe { avx512(job, out) }
    }

    #[allow(unsafe_code)]
    pub(super) fn run_avx2(job: &Job<'_>, out: &mut [f32]) {
        // SAFETY: `PackedLinear` only selects `Isa::Avx2` after
        // `is_x86_feature_detected!` reported avx2 and fma.
        unsafe { avx2(job, out) }
    }
}

/// Bias (and GELU) on a finished tile, then its columns into the output.
#[inline(always)]
fn store<const ROWS: usize>(tile: &mut Tile<'_>, values: &mut [[f32; PANEL]; ROWS]) {
    for (row, row_values) in values.iter_mut().enumerate() {
        for (a, &b) in row_values.iter_mut().zip(tile.bias) {
            let v = *a + b;
            *a = if tile.gelu { super::kernels::gelu(v) } else { v };
        }
        tile.out[row * tile.ldc..row * tile.ldc + tile.columns].copy_from_slice(&row_values[..tile.columns]);
    }
}

/// Cuts the rows into blocks and the blocks into near-equal tiles of at
/// most `max_rows`, then runs `kernel(tile_rows, tile)` for every (block,
/// panel, tile): a block's rows stay in cache while the panels stream by.
#[inline(always)]
fn for_each_tile(job: &Job<'_>, out: &mut [f32], max_rows: usize, mut kernel: impl FnMut(usize, Tile<'_>)) {
    let inputs = job.weight.inputs;
    let mut block_start = 0;
    while block_start < job.rows {
        let block_rows = (job.rows - block_start).min(ROW_BLOCK);
        let tiles = block_rows.div_ceil(max_rows);
        for panel in job.panels.clone() {
            let weights = &job.weight.panels[panel * inputs * PANEL..(panel + 1) * inputs * PANEL];
            let bias: &[f32; PANEL] =
                job.weight.bias[panel * PANEL..(panel + 1) * PANEL].try_into().expect("bias is padded to panels");
            let column = panel * PANEL;
            let columns = (job.weight.outputs - column).min(PANEL);
            let mut tile_start = block_start;
            for tile in 0..tiles {
                // Near-equal tiles: the first `block_rows % tiles` get one more row.
                let tile_rows = block_rows / tiles + usize::from(tile < block_rows % tiles);
                let input = &job.input[tile_start * inputs..(tile_start + tile_rows) * inputs];
                let out = &mut out[tile_start * job.ldc + column - job.first_column..];
                kernel(tile_rows, Tile { input, inputs, weights, bias, gelu: job.gelu, out, ldc: job.ldc, columns });
                tile_start += tile_rows;
            }
        }
        block_start += block_rows;
    }
}

/// The portable kernel (any CPU): tiles of up to three rows.
fn run_base(job: &Job<'_>, out: &mut [f32]) {
    for_each_tile(job, out, Isa::Base.max_rows(), |rows, tile| match rows {
        1 => tile_portable::<1>(tile),
        2 => tile_portable::<2>(tile),
        3 => tile_portable::<3>(tile),
        _ => unreachable!("portable tiles have 1 to 3 rows"),
    });
}

/// One register tile: `rows` input rows against one panel.
struct Tile<'a> {
    input: &'a [f32],
    inputs: usize,
    weights: &'a [f32],
    bias: &'a [f32; PANEL],
    gelu: bool,
    out: &'a mut [f32],
    ldc: usize,
    columns: usize,
}

fn tile_portable<const ROWS: usize>(mut tile: Tile<'_>) {
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
    store(&mut tile, &mut acc);
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
        // tile height, several row blocks, and both parallel splits.
        for &(rows, inputs, outputs) in
            &[(1, 3, 5), (7, 16, 16), (25, 40, 37), (130, 24, 50), (200, 64, 96), (31, 96, 200)]
        {
            let input = pseudo_random(rows * inputs, 1);
            let weight = pseudo_random(outputs * inputs, 2);
            let bias = pseudo_random(outputs, 3);
            let packed = PackedLinear::new(&weight, &bias, outputs, inputs);
            let expected = reference(&input, rows, &weight, &bias, outputs, inputs);
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
    fn every_compiled_kernel_agrees_with_the_baseline() {
        let (rows, inputs, outputs) = (29, 48, 40);
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
}
