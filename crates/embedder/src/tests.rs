//! Unit tests of the seam, the lazy loader, the cache and the shared handle.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::{
    CachedEmbedder, EmbedError, EmbeddingBackend, HashEmbedder, LazyEmbedder, ManualLoaderClock, SharedEmbedder, cosine,
};

#[test]
fn hash_embedder_is_deterministic_normalised_and_similarity_preserving() {
    let embedder = HashEmbedder::new(128);
    assert_eq!(embedder.model_id(), "hash-128");
    assert_eq!(embedder.dim(), 128);
    assert!(embedder.is_ready());
    let a = embedder.embed("the cat sat on the mat").unwrap();
    assert_eq!(a, embedder.embed("the cat sat on the mat").unwrap());
    let norm: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-5, "norm {norm}");
    let near = embedder.embed("the cat sat on a mat").unwrap();
    let far = embedder.embed("quarterly revenue projections").unwrap();
    assert!(cosine(&a, &near) > cosine(&a, &far) + 0.3);
    let empty = embedder.embed("").unwrap();
    assert_eq!(empty.len(), 128);
    let batch = embedder.embed_batch(&["x", "the cat sat on the mat"]).unwrap();
    assert_eq!(batch[1], a);
}

/// A backend whose `embed` counts calls; optionally fails.
struct Counting {
    inner: HashEmbedder,
    calls: AtomicUsize,
    fail: bool,
}

impl EmbeddingBackend for Counting {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn is_ready(&self) -> bool {
        true
    }
    fn embed_batch(&self, texts: &[&str]) -> crate::Result<Vec<Vec<f32>>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.fail {
            return Err(EmbedError::NotReady { model_id: self.model_id().to_owned() });
        }
        self.inner.embed_batch(texts)
    }
}

#[test]
fn lazy_embed_answers_not_ready_while_a_slow_load_runs() {
    let (entered_tx, entered_rx) = mpsc::channel::<()>();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let release_rx = Mutex::new(release_rx);
    let lazy = LazyEmbedder::new("slow", 16, move || {
        entered_tx.send(()).unwrap();
        // The load cannot finish before the test releases it.
        release_rx.lock().unwrap().recv().unwrap();
        Ok(Box::new(HashEmbedder::new(16)) as Box<dyn EmbeddingBackend>)
    });
    assert!(!lazy.is_ready());

    let started = Instant::now();
    let first = lazy.embed("hello");
    let elapsed = started.elapsed();
    assert!(matches!(first, Err(EmbedError::NotReady { ref model_id }) if model_id == "slow"), "{first:?}");
    // The loader thread is now provably inside the load, blocked on the channel.
    entered_rx.recv_timeout(Duration::from_secs(30)).expect("the loader thread started");
    let second = lazy.embed_batch(&["a", "b"]);
    assert!(second.as_ref().is_err_and(EmbedError::is_not_ready), "{second:?}");
    assert!(!lazy.is_ready());
    println!("embed returned not-ready in {elapsed:?} while the load was blocked");

    assert!(lazy.wait_ready(Duration::from_millis(1)).unwrap_err().is_not_ready());
    release_tx.send(()).unwrap();
    lazy.wait_ready(Duration::from_secs(30)).unwrap();
    assert!(lazy.is_ready());
    assert_eq!(lazy.embed("hello").unwrap(), HashEmbedder::new(16).embed("hello").unwrap());
}

#[test]
fn lazy_failed_load_waits_for_the_cooldown_before_retrying() {
    let clock = Arc::new(ManualLoaderClock::new());
    let attempts = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&attempts);
    let lazy = LazyEmbedder::with_clock(
        "broken",
        8,
        move || {
            counter.fetch_add(1, Ordering::SeqCst);
            Err(EmbedError::model_files("/nowhere", "corrupt weights"))
        },
        clock.clone(),
    );
    let error = lazy.wait_ready(Duration::from_secs(30)).unwrap_err();
    assert!(
        matches!(error, EmbedError::LoadFailed { ref message, .. } if message.contains("corrupt weights")),
        "{error:?}"
    );
    assert_eq!(attempts.load(Ordering::SeqCst), 1);

    clock.advance(Duration::from_secs(299));
    for _ in 0..5 {
        let error = lazy.embed("x").unwrap_err();
        assert!(
            matches!(error, EmbedError::LoadFailed { retry_in, .. } if retry_in == Duration::from_secs(1)),
            "{error:?}"
        );
    }
    assert_eq!(attempts.load(Ordering::SeqCst), 1, "no reload during the cooldown");

    clock.advance(Duration::from_secs(1));
    let _ = lazy.wait_ready(Duration::from_secs(30));
    assert_eq!(attempts.load(Ordering::SeqCst), 2, "one reload after the cooldown");
}

#[test]
fn lazy_rejects_a_backend_of_the_wrong_width_and_reloads_after_close() {
    let wrong = LazyEmbedder::new("m", 8, || Ok(Box::new(HashEmbedder::new(4)) as Box<dyn EmbeddingBackend>));
    let error = wrong.wait_ready(Duration::from_secs(30)).unwrap_err();
    assert!(matches!(error, EmbedError::LoadFailed { ref message, .. } if message.contains("4-dim")), "{error:?}");

    let loads = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&loads);
    let lazy = LazyEmbedder::new("m", 8, move || {
        counter.fetch_add(1, Ordering::SeqCst);
        Ok(Box::new(HashEmbedder::new(8)) as Box<dyn EmbeddingBackend>)
    });
    lazy.wait_ready(Duration::from_secs(30)).unwrap();
    lazy.close();
    assert!(!lazy.is_ready());
    lazy.wait_ready(Duration::from_secs(30)).unwrap();
    assert_eq!(loads.load(Ordering::SeqCst), 2);
}

#[test]
fn lazy_survives_a_panicking_loader() {
    let lazy = LazyEmbedder::new("p", 8, || panic!("loader bug"));
    let error = lazy.wait_ready(Duration::from_secs(30)).unwrap_err();
    assert!(matches!(error, EmbedError::LoadFailed { ref message, .. } if message.contains("panicked")), "{error:?}");
}

#[test]
fn cache_counts_hits_and_misses_and_keys_on_model_id() {
    let backend = Arc::new(Counting { inner: HashEmbedder::new(8), calls: AtomicUsize::new(0), fail: false });
    let cache = CachedEmbedder::over(backend.clone());
    let first = cache.embed("alpha").unwrap();
    assert_eq!(cache.embed("alpha").unwrap(), first);
    cache.embed("beta").unwrap();
    let stats = cache.stats();
    assert_eq!((stats.hits, stats.misses, stats.entries), (1, 2, 2));
    assert_eq!(backend.calls.load(Ordering::SeqCst), 2);

    // Same text, another model: a miss, never the old model's vector.
    let shared = SharedEmbedder::new(Arc::new(|| Arc::new(HashEmbedder::new(8).with_model_id("one"))));
    let cache = CachedEmbedder::over_shared(shared.clone());
    let one = cache.embed("alpha").unwrap();
    shared.register_backend(Some(Arc::new(|| Arc::new(HashEmbedder::new(16).with_model_id("two")))));
    let two = cache.embed("alpha").unwrap();
    assert_eq!((one.len(), two.len()), (8, 16));
    assert_eq!(cache.stats().misses, 2);
}

#[test]
fn cache_does_not_keep_failures_and_is_bounded() {
    let failing = Arc::new(Counting { inner: HashEmbedder::new(8), calls: AtomicUsize::new(0), fail: true });
    let cache = CachedEmbedder::over(failing.clone());
    assert!(cache.embed("x").is_err());
    assert!(cache.embed("x").is_err());
    assert_eq!(failing.calls.load(Ordering::SeqCst), 2, "a failure is retried, not cached");
    assert_eq!(cache.stats().entries, 0);

    let cache = CachedEmbedder::over(Arc::new(HashEmbedder::new(4)));
    for index in 0..200 {
        cache.embed(&format!("text {index}")).unwrap();
    }
    assert_eq!(cache.stats().entries, crate::constants::CACHE_CAPACITY);
    let cache = cache.with_capacity(2);
    for text in ["a", "b", "c"] {
        cache.embed(text).unwrap();
    }
    assert_eq!(cache.stats().entries, 2);
}

#[test]
fn shared_embedder_bumps_the_generation_only_when_the_space_changes() {
    let shared = SharedEmbedder::new(Arc::new(|| Arc::new(HashEmbedder::new(8))));
    let first = shared.space();
    assert_eq!((first.generation, first.model_id.as_str(), first.dim), (1, "hash-8", 8));
    let tagged = shared.embed_in_space("x").unwrap();
    assert!(shared.is_current(tagged.generation));

    // A reset to the same model keeps the space.
    assert_eq!(shared.reset().generation, 1);
    // Another model id: a new space.
    shared.register_backend(Some(Arc::new(|| Arc::new(HashEmbedder::new(8).with_model_id("other")))));
    assert_eq!(shared.space().generation, 2);
    assert!(!shared.is_current(tagged.generation));
    // Another dim: a new space.
    shared.register_backend(Some(Arc::new(|| Arc::new(HashEmbedder::new(16).with_model_id("other")))));
    assert_eq!(shared.space().generation, 3);
    // `None` restores the default.
    shared.register_backend(None);
    let restored = shared.space();
    assert_eq!((restored.generation, restored.model_id.as_str()), (4, "hash-8"));
    assert_eq!(shared.backend().embed("x").unwrap(), tagged.vector);
}

#[test]
fn shared_embedder_closes_the_outgoing_backend() {
    let loads = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&loads);
    let lazy = LazyEmbedder::new("lazy", 8, move || {
        counter.fetch_add(1, Ordering::SeqCst);
        Ok(Box::new(HashEmbedder::new(8)) as Box<dyn EmbeddingBackend>)
    });
    let handle = lazy.clone();
    let shared = SharedEmbedder::new(Arc::new(move || Arc::new(handle.clone())));
    lazy.wait_ready(Duration::from_secs(30)).unwrap();
    shared.register_backend(Some(Arc::new(|| Arc::new(HashEmbedder::new(8)))));
    assert!(!lazy.is_ready(), "the swapped-out model was unloaded");
}

#[test]
fn the_unconfigured_global_embedder_says_so() {
    let global = SharedEmbedder::global();
    let error = global.backend().embed("x");
    // Another test may not touch the global; it starts unconfigured.
    assert!(matches!(error, Err(EmbedError::NoBackend)), "{error:?}");
}

#[cfg(feature = "candle")]
mod candle;
