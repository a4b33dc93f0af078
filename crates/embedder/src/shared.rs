//! [`SharedEmbedder`]: the process-wide embedder handle, its swap seam and
//! the vector-space generation.

use std::fmt;
use std::sync::{Arc, OnceLock};

use parking_lot::RwLock;
use tracing::{debug, info_span};

use crate::backend::EmbeddingBackend;
use crate::error::{EmbedError, Result};

/// Builds a backend. Must be cheap: wrap slow models in a
/// [`crate::LazyEmbedder`] so building only declares the model.
pub type BackendFactory = Arc<dyn Fn() -> Arc<dyn EmbeddingBackend> + Send + Sync>;

/// Which vector space the shared embedder currently produces.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct EmbeddingSpace {
    /// Increases by one on every swap that changes `model_id` or `dim`.
    pub generation: u64,
    /// The current backend's model id.
    pub model_id: String,
    /// The current backend's vector width.
    pub dim: usize,
}

/// A vector together with the space generation it was computed in. A store
/// commits it only if [`SharedEmbedder::is_current`] still holds.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SpacedVector {
    /// The unit vector.
    pub vector: Vec<f32>,
    /// [`EmbeddingSpace::generation`] when it was computed.
    pub generation: u64,
}

struct State {
    default_factory: BackendFactory,
    registered: Option<BackendFactory>,
    current: Arc<dyn EmbeddingBackend>,
    space: EmbeddingSpace,
}

/// A cloneable handle to one swappable backend. [`SharedEmbedder::global`]
/// is the process-wide instance; tests build their own with
/// [`SharedEmbedder::new`].
#[derive(Clone)]
pub struct SharedEmbedder {
    state: Arc<RwLock<State>>,
}

impl fmt::Debug for SharedEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedEmbedder").field("space", &self.space()).finish()
    }
}

/// Stand-in used until a default backend is configured.
#[derive(Debug)]
struct Unconfigured;

impl EmbeddingBackend for Unconfigured {
    fn model_id(&self) -> &str {
        "none"
    }
    fn dim(&self) -> usize {
        0
    }
    fn is_ready(&self) -> bool {
        false
    }
    fn embed_batch(&self, _texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        Err(EmbedError::NoBackend)
    }
}

impl SharedEmbedder {
    /// A handle whose default backend comes from `default_factory`
    /// (generation 1).
    pub fn new(default_factory: BackendFactory) -> Self {
        let current = default_factory();
        let space = EmbeddingSpace { generation: 1, model_id: current.model_id().to_owned(), dim: current.dim() };
        Self { state: Arc::new(RwLock::new(State { default_factory, registered: None, current, space })) }
    }

    /// The process-wide handle. Until [`set_default`](Self::set_default) or
    /// [`register_backend`](Self::register_backend) is called its backend
    /// answers [`EmbedError::NoBackend`].
    pub fn global() -> &'static SharedEmbedder {
        static GLOBAL: OnceLock<SharedEmbedder> = OnceLock::new();
        GLOBAL.get_or_init(|| SharedEmbedder::new(Arc::new(|| Arc::new(Unconfigured))))
    }

    /// Replaces the default factory (what `register_backend(None)` restores)
    /// and swaps to it unless a registered factory overrides it.
    pub fn set_default(&self, factory: BackendFactory) {
        self.state.write().default_factory = factory;
        self.reset();
    }

    /// Registers a factory that overrides the default (`None` restores the
    /// default) and swaps the backend.
    pub fn register_backend(&self, factory: Option<BackendFactory>) {
        self.state.write().registered = factory;
        self.reset();
    }

    /// Closes the current backend and builds a fresh one from the active
    /// factory. Bumps the space generation when the model id or dim changes.
    /// Returns the new space.
    pub fn reset(&self) -> EmbeddingSpace {
        let span = info_span!("shared_embedder_reset");
        let _entered = span.enter();
        let mut state = self.state.write();
        let factory = state.registered.clone().unwrap_or_else(|| Arc::clone(&state.default_factory));
        let next = factory();
        state.current.close();
        let changed = next.model_id() != state.space.model_id || next.dim() != state.space.dim;
        if changed {
            state.space = EmbeddingSpace {
                generation: state.space.generation + 1,
                model_id: next.model_id().to_owned(),
                dim: next.dim(),
            };
        }
        debug!(
            model_id = next.model_id(),
            dim = next.dim(),
            generation = state.space.generation,
            changed,
            "shared embedder swapped"
        );
        state.current = next;
        state.space.clone()
    }

    /// The current backend.
    pub fn backend(&self) -> Arc<dyn EmbeddingBackend> {
        Arc::clone(&self.state.read().current)
    }

    /// The current backend and the generation of its space, read together.
    pub fn backend_with_generation(&self) -> (Arc<dyn EmbeddingBackend>, u64) {
        let state = self.state.read();
        (Arc::clone(&state.current), state.space.generation)
    }

    /// The current vector space.
    pub fn space(&self) -> EmbeddingSpace {
        self.state.read().space.clone()
    }

    /// True when vectors from `generation` are still comparable with new ones.
    pub fn is_current(&self, generation: u64) -> bool {
        self.state.read().space.generation == generation
    }

    /// Embeds `text` with the current backend and tags it with its space.
    pub fn embed_in_space(&self, text: &str) -> Result<SpacedVector> {
        let (backend, generation) = self.backend_with_generation();
        Ok(SpacedVector { vector: backend.embed(text)?, generation })
    }

    /// Unloads the current backend's model (it reloads on next use).
    pub fn close(&self) {
        self.backend().close();
    }
}
