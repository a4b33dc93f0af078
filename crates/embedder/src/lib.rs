//! Text embeddings for Cairn: text in, L2-normalised `f32` vectors out, in
//! process and on the CPU.
//!
//! The seam is [`EmbeddingBackend`]. Around it this crate provides:
//!
//! - [`HashEmbedder`] and [`WordVectorEmbedder`], deterministic model-free backends for tests and benchmarks;
//! - with the `candle` feature (on by default), [`CandleBert`] for
//!   sentence-transformers BERT folders (the default model is
//!   all-MiniLM-L6-v2, 384-dim, mean pooling) and [`Qwen3Embedder`]
//!   (last-token pooling, query instructions);
//! - [`LazyEmbedder`], which loads a model on a background thread and answers
//!   [`EmbedError::NotReady`] instead of blocking while it loads;
//! - [`CachedEmbedder`], an LRU keyed by `(text, model_id)`;
//! - [`SharedEmbedder`], the process-wide swappable handle with a
//!   vector-space generation;
//! - [`ModelManager`], which finds an installed model or, with the
//!   `download` feature (on by default), downloads one over sha256-pinned
//!   HTTPS, with retries and a status snapshot. Without `download` the crate
//!   has no HTTP client and a download attempt fails with
//!   [`EmbedError::Network`].
//!
//! ```
//! use std::sync::Arc;
//! use cairn_embedder::{CachedEmbedder, EmbeddingBackend, HashEmbedder, SharedEmbedder};
//!
//! let shared = SharedEmbedder::new(Arc::new(|| Arc::new(HashEmbedder::new(32))));
//! let space = shared.space();
//! let cache = CachedEmbedder::over_shared(shared.clone());
//! let tagged = cache.embed_in_space("remember the milk").unwrap();
//! assert_eq!(tagged.vector.len(), 32);
//! assert!(shared.is_current(tagged.generation));
//!
//! // Swapping to a different model starts a new vector space.
//! shared.register_backend(Some(Arc::new(|| Arc::new(HashEmbedder::new(64)))));
//! assert!(!shared.is_current(space.generation));
//! ```
//!
//! What it does not do: read environment variables or configuration files
//! (callers pass [`ManagerConfig`]), store vectors, or run on a GPU.

#![warn(missing_docs)]

mod backend;
mod batching;
mod cache;
#[cfg(feature = "candle")]
mod candle;
mod clock;
pub mod constants;
mod error;
mod hash;
mod lazy;
pub mod manager;
mod model_dir;
mod shared;
pub mod testing;

#[cfg(test)]
mod tests;

pub use backend::{EmbeddingBackend, cosine, l2_normalize};
pub use batching::BatchingEmbedder;
pub use cache::{CacheStats, CachedEmbedder};
#[cfg(feature = "candle")]
pub use candle::{CandleBert, CandleBertOptions, Pooling, Qwen3Embedder, Qwen3Options, format_query};
pub use clock::{LoaderClock, ManualLoaderClock, SystemLoaderClock};
pub use error::{EmbedError, Result};
pub use hash::{HashEmbedder, WordVectorEmbedder};
pub use lazy::{LazyEmbedder, LoadFn};
pub use manager::{ManagerConfig, ModelManager};
pub use model_dir::{ModelInfo, ModelKind};
pub use shared::{BackendFactory, EmbeddingSpace, SharedEmbedder, SpacedVector};
