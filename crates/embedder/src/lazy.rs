//! [`LazyEmbedder`]: loads a backend on a background thread and never makes
//! a caller wait for it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use tracing::{debug, info_span, warn};

use crate::backend::EmbeddingBackend;
use crate::clock::{LoaderClock, SystemLoaderClock};
use crate::constants::LOAD_FAILURE_COOLDOWN;
use crate::error::{EmbedError, Result};

/// Builds the real backend; runs on the loader thread.
pub type LoadFn = dyn Fn() -> Result<Box<dyn EmbeddingBackend>> + Send + Sync;

enum LoadState {
    Idle,
    Loading,
    Ready(Arc<dyn EmbeddingBackend>),
    Failed { at: Duration, message: String },
}

struct Inner {
    model_id: String,
    dim: usize,
    loader: Box<LoadFn>,
    clock: Arc<dyn LoaderClock>,
    cooldown: Duration,
    state: Mutex<LoadState>,
    changed: Condvar,
}

/// Wraps a slow-to-load backend. The first use starts the load on a
/// background thread named `cairn-embed-load`; until the model is resident
/// every `embed` returns [`EmbedError::NotReady`] at once. A failed load is
/// retried only after [`LOAD_FAILURE_COOLDOWN`]; meanwhile calls get
/// [`EmbedError::LoadFailed`]. `close` drops the model; the next use reloads.
///
/// `model_id` and `dim` are declared up front (so stores can check the vector
/// space before the model is resident) and checked against the loaded backend.
#[derive(Clone)]
pub struct LazyEmbedder {
    inner: Arc<Inner>,
}

impl fmt::Debug for LazyEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LazyEmbedder")
            .field("model_id", &self.inner.model_id)
            .field("dim", &self.inner.dim)
            .field("ready", &self.is_ready())
            .finish()
    }
}

impl LazyEmbedder {
    /// A lazy backend that will call `loader` on first use.
    pub fn new(
        model_id: impl Into<String>,
        dim: usize,
        loader: impl Fn() -> Result<Box<dyn EmbeddingBackend>> + Send + Sync + 'static,
    ) -> Self {
        Self::with_clock(model_id, dim, loader, Arc::new(SystemLoaderClock::new()))
    }

    /// Like [`new`](Self::new) with an injected clock (the cooldown reads it).
    pub fn with_clock(
        model_id: impl Into<String>,
        dim: usize,
        loader: impl Fn() -> Result<Box<dyn EmbeddingBackend>> + Send + Sync + 'static,
        clock: Arc<dyn LoaderClock>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                model_id: model_id.into(),
                dim,
                loader: Box::new(loader),
                clock,
                cooldown: LOAD_FAILURE_COOLDOWN,
                state: Mutex::new(LoadState::Idle),
                changed: Condvar::new(),
            }),
        }
    }

    /// Starts the background load if nothing is loaded or loading (and no
    /// cooldown is running). Never blocks.
    pub fn start_loading(&self) {
        let mut state = self.inner.state.lock();
        self.kick_locked(&mut state);
    }

    /// Blocks until the model is resident, the load fails, or `timeout`
    /// passes. For synchronous callers (one-shot CLI, tests); never call it
    /// from an async runtime thread.
    pub fn wait_ready(&self, timeout: Duration) -> Result<()> {
        let deadline = std::time::Instant::now() + timeout;
        let mut state = self.inner.state.lock();
        self.kick_locked(&mut state);
        loop {
            match &*state {
                LoadState::Ready(_) => return Ok(()),
                LoadState::Failed { .. } => return Err(self.failed_error(&state)),
                LoadState::Idle | LoadState::Loading => {
                    if self.inner.changed.wait_until(&mut state, deadline).timed_out() {
                        return match &*state {
                            LoadState::Ready(_) => Ok(()),
                            LoadState::Failed { .. } => Err(self.failed_error(&state)),
                            _ => Err(self.not_ready()),
                        };
                    }
                }
            }
        }
    }

    fn not_ready(&self) -> EmbedError {
        EmbedError::NotReady { model_id: self.inner.model_id.clone() }
    }

    fn failed_error(&self, state: &LoadState) -> EmbedError {
        match state {
            LoadState::Failed { at, message } => {
                let elapsed = self.inner.clock.now().saturating_sub(*at);
                EmbedError::LoadFailed {
                    model_id: self.inner.model_id.clone(),
                    message: message.clone(),
                    retry_in: self.inner.cooldown.saturating_sub(elapsed),
                }
            }
            _ => self.not_ready(),
        }
    }

    /// Returns the resident backend, or the error a caller should see now
    /// (after starting a load when one is due).
    fn resident(&self) -> Result<Arc<dyn EmbeddingBackend>> {
        let mut state = self.inner.state.lock();
        if let LoadState::Ready(backend) = &*state {
            return Ok(Arc::clone(backend));
        }
        self.kick_locked(&mut state);
        match &*state {
            LoadState::Ready(backend) => Ok(Arc::clone(backend)),
            LoadState::Failed { .. } => Err(self.failed_error(&state)),
            LoadState::Idle | LoadState::Loading => Err(self.not_ready()),
        }
    }

    fn kick_locked(&self, state: &mut LoadState) {
        match state {
            LoadState::Ready(_) | LoadState::Loading => return,
            LoadState::Failed { at, .. } => {
                let elapsed = self.inner.clock.now().saturating_sub(*at);
                if elapsed < self.inner.cooldown {
                    return;
                }
                debug!(model_id = %self.inner.model_id, "load cooldown over, retrying");
            }
            LoadState::Idle => {}
        }
        *state = LoadState::Loading;
        let inner = Arc::clone(&self.inner);
        let spawned = std::thread::Builder::new().name("cairn-embed-load".to_owned()).spawn(move || Self::load(&inner));
        if let Err(error) = spawned {
            *state = LoadState::Failed {
                at: self.inner.clock.now(),
                message: format!("could not start the loader thread: {error}"),
            };
        }
    }

    fn load(inner: &Inner) {
        let span = info_span!("embedder_load", model_id = %inner.model_id);
        let _entered = span.enter();
        let loaded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (inner.loader)()));
        let outcome = match loaded {
            Ok(Ok(backend)) if backend.dim() != inner.dim => Err(error_chain(&EmbedError::DimensionMismatch {
                model_id: inner.model_id.clone(),
                expected: inner.dim,
                actual: backend.dim(),
            })),
            Ok(Ok(backend)) => Ok(backend),
            Ok(Err(error)) => Err(error_chain(&error)),
            Err(_) => Err("the model loader panicked".to_owned()),
        };
        let mut state = inner.state.lock();
        *state = match outcome {
            Ok(backend) => {
                debug!("model resident");
                LoadState::Ready(Arc::from(backend))
            }
            Err(message) => {
                warn!(%message, "model load failed; retrying after the cooldown");
                LoadState::Failed { at: inner.clock.now(), message }
            }
        };
        inner.changed.notify_all();
    }
}

/// Renders an error with its sources, `a: b: c`.
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

impl EmbeddingBackend for LazyEmbedder {
    fn model_id(&self) -> &str {
        &self.inner.model_id
    }

    fn dim(&self) -> usize {
        self.inner.dim
    }

    fn is_ready(&self) -> bool {
        matches!(&*self.inner.state.lock(), LoadState::Ready(_))
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.resident()?.embed_batch(texts)
    }

    fn embed(&self, text: &str) -> Result<Vec<f32>> {
        self.resident()?.embed(text)
    }

    fn close(&self) {
        let mut state = self.inner.state.lock();
        if let LoadState::Ready(backend) = &*state {
            backend.close();
            *state = LoadState::Idle;
            debug!(model_id = %self.inner.model_id, "model unloaded");
        }
    }
}
