//! [`CachedEmbedder`]: an LRU in front of a backend or the shared embedder.

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use lru::LruCache;
use parking_lot::Mutex;
use tracing::{debug, trace};

use crate::backend::EmbeddingBackend;
use crate::constants::{CACHE_CAPACITY, CACHE_STATS_EVERY_MISSES};
use crate::error::Result;
use crate::shared::{SharedEmbedder, SpacedVector};

/// Hit/miss counters of a [`CachedEmbedder`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[non_exhaustive]
pub struct CacheStats {
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups that went to the backend (successful or not).
    pub misses: u64,
    /// Entries currently held.
    pub entries: usize,
}

/// `(text, model_id)` → vector.
type Entries = LruCache<(String, String), Arc<[f32]>>;

enum Source {
    Fixed(Arc<dyn EmbeddingBackend>),
    Shared(SharedEmbedder),
}

/// Caches vectors keyed by `(text, model_id)`, so after a backend swap the
/// old model's vectors are never served for the new one. Failures (including
/// "not ready") are not cached. Holds [`CACHE_CAPACITY`] entries by default.
pub struct CachedEmbedder {
    source: Source,
    entries: Mutex<Entries>,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl std::fmt::Debug for CachedEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedEmbedder").field("stats", &self.stats()).finish()
    }
}

impl CachedEmbedder {
    /// A cache in front of one fixed backend.
    pub fn over(backend: Arc<dyn EmbeddingBackend>) -> Self {
        Self::build(Source::Fixed(backend), CACHE_CAPACITY)
    }

    /// A cache in front of the shared embedder: every call goes to whichever
    /// backend is current, keyed by that backend's model id.
    pub fn over_shared(shared: SharedEmbedder) -> Self {
        Self::build(Source::Shared(shared), CACHE_CAPACITY)
    }

    /// Changes the capacity (at least one entry).
    pub fn with_capacity(self, capacity: usize) -> Self {
        Self::build(self.source, capacity)
    }

    fn build(source: Source, capacity: usize) -> Self {
        let capacity = NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN);
        Self {
            source,
            entries: Mutex::new(LruCache::new(capacity)),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The backend calls go to right now.
    pub fn backend(&self) -> Arc<dyn EmbeddingBackend> {
        match &self.source {
            Source::Fixed(backend) => Arc::clone(backend),
            Source::Shared(shared) => shared.backend(),
        }
    }

    /// Embeds `text`, from the cache when possible. Never blocks on a model
    /// load: a lazy backend answers [`crate::EmbedError::NotReady`] at once.
    pub fn embed(&self, text: &str) -> Result<Vec<f32>> {
        self.embed_with(&*self.backend(), text)
    }

    /// Embeds `text` and reports the space generation it was computed in
    /// (only meaningful over the shared embedder; a fixed backend reports 0).
    pub fn embed_in_space(&self, text: &str) -> Result<SpacedVector> {
        match &self.source {
            Source::Fixed(backend) => Ok(SpacedVector { vector: self.embed_with(&**backend, text)?, generation: 0 }),
            Source::Shared(shared) => {
                let (backend, generation) = shared.backend_with_generation();
                Ok(SpacedVector { vector: self.embed_with(&*backend, text)?, generation })
            }
        }
    }

    fn embed_with(&self, backend: &dyn EmbeddingBackend, text: &str) -> Result<Vec<f32>> {
        let key = (text.to_owned(), backend.model_id().to_owned());
        if let Some(vector) = self.entries.lock().get(&key) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            trace!(text, "embedding cache hit");
            return Ok(vector.to_vec());
        }
        let misses = self.misses.fetch_add(1, Ordering::Relaxed) + 1;
        if misses.is_multiple_of(CACHE_STATS_EVERY_MISSES) {
            let stats = self.stats();
            debug!(hits = stats.hits, misses = stats.misses, entries = stats.entries, "embedding cache stats");
        }
        let vector = backend.embed(text)?;
        self.entries.lock().put(key, Arc::from(vector.as_slice()));
        Ok(vector)
    }

    /// Current counters.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            entries: self.entries.lock().len(),
        }
    }

    /// Drops every entry (counters are kept).
    pub fn clear(&self) {
        self.entries.lock().clear();
    }
}
