//! Every number the embedder's behaviour depends on, in one place.

use std::time::Duration;

/// Entries kept by the embedding cache ([`crate::CachedEmbedder`]).
pub const CACHE_CAPACITY: usize = 128;

/// The cache logs its hit/miss counters every this many misses.
pub const CACHE_STATS_EVERY_MISSES: u64 = 20;

/// A failed model load is retried only after this long.
pub const LOAD_FAILURE_COOLDOWN: Duration = Duration::from_secs(300);

/// Downloaded weight files and archives smaller than this are rejected as truncated.
pub const MIN_MODEL_BYTES: u64 = 1024 * 1024;

/// Download attempts for the long-lived background download.
pub const DOWNLOAD_ATTEMPTS_BACKGROUND: u32 = 6;

/// Download attempts for a request a person is waiting on.
pub const DOWNLOAD_ATTEMPTS_INTERACTIVE: u32 = 3;

/// First retry delay; doubles after each failed attempt.
pub const DOWNLOAD_RETRY_BASE: Duration = Duration::from_secs(60);

/// Upper bound of the retry delay.
pub const DOWNLOAD_RETRY_CAP: Duration = Duration::from_secs(30 * 60);

/// Byte progress is published at least every this many bytes.
pub const PROGRESS_EVERY_BYTES: u64 = 1024 * 1024;

/// Texts per forward pass inside `embed_batch` (inputs are sorted by length first).
pub const MAX_BATCH: usize = 32;

/// Token limit used when a model folder does not declare `max_seq_length`.
pub const DEFAULT_MAX_SEQ_LENGTH: usize = 512;

/// Name of the default model and of its folder under `<home>/models/`.
pub const DEFAULT_MODEL_NAME: &str = "all-MiniLM-L6-v2";

/// Width of the default model's vectors.
pub const DEFAULT_MODEL_DIM: usize = 384;

/// Qwen3-Embedding's default query instruction (its documented retrieval task).
pub const QWEN3_DEFAULT_INSTRUCTION: &str =
    "Given a web search query, retrieve relevant passages that answer the query";
