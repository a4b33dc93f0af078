//! Every tunable number of the crate, in one place.
//!
//! The ranking constants are the specification's exact values; the index
//! defaults were measured on the project's 2-core benchmark machine (see
//! `BENCHMARKS.md`, section "memory-vector").

/// Multiplier of the daily exponential decay: `exp(-0.03 × age_days)`.
pub const DECAY_RATE_PER_DAY: f32 = 0.03;
/// Base of the importance factor: `0.7 + 0.3 × importance`.
pub const IMPORTANCE_BASE: f32 = 0.7;
/// Weight of importance in the importance factor: `0.7 + 0.3 × importance`.
pub const IMPORTANCE_WEIGHT: f32 = 0.3;

/// Raw cosine an episodic memory needs to be injected into context.
pub const RELEVANCE_THRESHOLD: f32 = 0.55;
/// Relaxed raw-cosine threshold for texts longer than [`LONG_TEXT_CHARS`].
pub const LONG_TEXT_RELEVANCE_THRESHOLD: f32 = 0.42;
/// Texts with more characters than this use [`LONG_TEXT_RELEVANCE_THRESHOLD`].
pub const LONG_TEXT_CHARS: usize = 300;

/// all-MiniLM-L6-v2's gate for texts up to [`LONG_TEXT_CHARS`]: the 99th
/// percentile of the cosines between the lead sentences of news stories
/// that people rated unrelated (mean ≤ 2 of 5) in the Lee, Pincombe &
/// Welsh (2005) similarity corpus (1,000 pairs), so about 1 % of unrelated
/// short texts pass. `scripts/calibrate_gate.py` reproduces it.
pub const MINILM_RELEVANCE_THRESHOLD: f32 = 0.24;
/// all-MiniLM-L6-v2's gate above [`LONG_TEXT_CHARS`]: the 99th percentile
/// of the cosines between a story's lead sentence and the full text of a
/// story rated unrelated to it, same corpus (2,000 ordered pairs). Higher
/// than the short one: with this model a longer unrelated text shares more
/// generic content with a query, where the specification's model loses
/// cosine on long texts.
pub const MINILM_LONG_TEXT_RELEVANCE_THRESHOLD: f32 = 0.26;
/// all-MiniLM-L6-v2's abstention floor: a prompt none of whose candidates
/// reaches this raw cosine gets an empty context block. Chosen by
/// leave-one-conversation-out cross-validation over LoCoMo-dev and
/// longchat-dev (the highest floor that costs at most 0.01 of on-topic
/// context recall@8 on the training conversations; `BENCHMARKS.md`).
pub const MINILM_ABSTAIN_BELOW: f32 = 0.275;
/// all-MiniLM-L6-v2's abstention floor for a prompt that names nobody in a
/// conversation: where the stored texts are turns of named speakers and
/// the prompt names none of them (nor, in a user/assistant chat, speaks in
/// the first or second person), it gets an empty context block unless a
/// candidate reaches this raw cosine. Chosen by the same cross-validation
/// as [`MINILM_ABSTAIN_BELOW`] (`BENCHMARKS.md`).
pub const MINILM_ABSTAIN_UNNAMED_BELOW: f32 = 0.45;

/// Default MMR trade-off between relevance (1.0) and diversity (0.0).
pub const MMR_LAMBDA: f32 = 0.6;
/// Largest candidate pool MMR considers; the best-scored candidates are kept.
pub const MMR_MAX_POOL: usize = 1_000;

/// Live-vector count above which [`AutoIndex`](crate::AutoIndex) moves from
/// the exact scan to HNSW.
///
/// Measured with `tools/ann_bench.rs --sweep` on the peer corpus's
/// MiniLM vectors (single query thread pinned with `taskset`, see
/// `BENCHMARKS.md`), both indexes reading SQ8 codes: the exact scan's p50
/// and the HNSW p50 at recall@10 ≥ 0.99 are equal at about 2,000 vectors
/// (57 vs 56 µs); at 5,000 the exact scan takes 90 µs against 71 µs, at
/// 10,000 166 µs against 85 µs. Up to 5,000 the exact answer costs at most
/// ~20 µs more than the approximate one and needs no graph build, so the
/// switch happens there.
pub const AUTO_CROSSOVER: usize = 5_000;
/// [`AutoIndex`](crate::AutoIndex) goes back to the exact scan when the live
/// count falls below `AUTO_CROSSOVER / AUTO_HYSTERESIS_DIVISOR`, so a count
/// hovering around the crossover does not rebuild the graph again and again.
pub const AUTO_HYSTERESIS_DIVISOR: usize = 2;

/// Default HNSW out-degree `M` (level 0 keeps `2 × M` links).
pub const HNSW_DEFAULT_M: usize = 16;
/// Default HNSW `ef_construction`.
pub const HNSW_DEFAULT_EF_CONSTRUCTION: usize = 200;
/// Default HNSW `ef_search` (raised to `k` when `k` is larger). Measured
/// on all-MiniLM-L6-v2 vectors with `M` 16: recall@10 0.997 at 10k rows
/// and 0.992 at 100k (64 gives 0.993 and 0.984).
pub const HNSW_DEFAULT_EF_SEARCH: usize = 96;
/// Largest `M` accepted.
pub const HNSW_MAX_M: usize = 128;
/// Number of HNSW layers: node levels are capped at `HNSW_MAX_LAYERS - 1`.
pub const HNSW_MAX_LAYERS: usize = 16;
/// Seed of the hash that draws each HNSW node's level, so a build of the
/// same vectors in the same order gives the same layers.
pub const HNSW_LEVEL_SEED: u64 = 0x5eed_c0de_cafe_f00d;
/// Fraction of tombstoned slots above which the graph is rebuilt from the
/// live vectors.
pub const HNSW_REBUILD_TOMBSTONE_RATIO: f32 = 0.2;
/// Tombstones never trigger a rebuild below this absolute count.
pub const HNSW_REBUILD_MIN_TOMBSTONES: usize = 64;

/// Live-vector count above which [`FlatIndex`](crate::FlatIndex) splits one
/// query across the rayon pool.
pub const FLAT_PARALLEL_THRESHOLD: usize = 50_000;

/// Version of the on-disk snapshot format written by this crate.
pub const SNAPSHOT_FORMAT_VERSION: u32 = 3;

/// Row count from which an index fits its SQ8 code grid to the vectors it
/// holds (below it, the grid spans `[-1, 1]`).
pub const QUANT_MIN_TRAIN: usize = 64;

/// Row count after which the SQ8 grid is no longer refitted as the index
/// grows (it is refitted at every doubling below it, at every HNSW rebuild,
/// and whenever more than 1/32 of the rows fall off the grid).
pub const QUANT_RETRAIN_MAX: usize = 65_536;
