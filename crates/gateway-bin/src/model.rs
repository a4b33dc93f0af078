//! The embedding model's lifecycle inside the gateway: resolve or download
//! it in the background, load it lazily, and never make a request wait.
//! Until the model is resident, memory answers with keyword results and
//! writes land without vectors (the heartbeat backfills them later).

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use cairn_embedder::constants::{DEFAULT_MODEL_DIM, DEFAULT_MODEL_NAME};
use cairn_embedder::manager::{DownloadStatus, DownloadStep, ModelManager, RetryPolicy};
use cairn_embedder::{BatchingEmbedder, CachedEmbedder, EmbedError, EmbeddingBackend, LazyEmbedder, ModelInfo};
use parking_lot::Mutex;
use serde::Serialize;

/// Most texts one forward pass takes from concurrent requests.
const EMBED_BATCH: usize = 32;

/// The memory store's embedder: it declares the expected model's id and
/// width from the start, and answers `NotReady` until the model is wired
/// in and resident.
pub(crate) struct DeferredEmbedder {
    model_id: String,
    dim: usize,
    loaded: OnceLock<Loaded>,
}

/// A model as the gateway serves it: the cache over the batching worker
/// over the lazily loaded model.
pub(crate) struct Loaded {
    lazy: LazyEmbedder,
    cache: CachedEmbedder,
}

impl Loaded {
    /// The serving stack over `info`'s model; loading starts at once.
    pub(crate) fn start(info: &ModelInfo) -> Self {
        let lazy = info.lazy();
        // Concurrent requests' texts share forward passes (one at a time).
        let batching = BatchingEmbedder::new(Arc::new(lazy.clone()), EMBED_BATCH);
        let cache = CachedEmbedder::over(Arc::new(batching));
        lazy.start_loading();
        Self { lazy, cache }
    }
}

impl EmbeddingBackend for Loaded {
    fn model_id(&self) -> &str {
        self.lazy.model_id()
    }

    fn dim(&self) -> usize {
        self.lazy.dim()
    }

    fn is_ready(&self) -> bool {
        self.lazy.is_ready()
    }

    fn embed_batch(&self, texts: &[&str]) -> cairn_embedder::Result<Vec<Vec<f32>>> {
        self.lazy.embed_batch(texts)
    }

    fn embed(&self, text: &str) -> cairn_embedder::Result<Vec<f32>> {
        self.cache.embed(text)
    }

    fn close(&self) {
        self.lazy.close();
    }
}

impl DeferredEmbedder {
    fn new(model_id: String, dim: usize) -> Self {
        Self { model_id, dim, loaded: OnceLock::new() }
    }

    fn wired(&self) -> Option<&LazyEmbedder> {
        self.loaded.get().map(|loaded| &loaded.lazy)
    }
}

impl EmbeddingBackend for DeferredEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn is_ready(&self) -> bool {
        self.wired().is_some_and(EmbeddingBackend::is_ready)
    }

    fn embed_batch(&self, texts: &[&str]) -> cairn_embedder::Result<Vec<Vec<f32>>> {
        match self.wired() {
            Some(lazy) => lazy.embed_batch(texts),
            None => Err(EmbedError::NotReady { model_id: self.model_id.clone() }),
        }
    }

    fn embed(&self, text: &str) -> cairn_embedder::Result<Vec<f32>> {
        match self.loaded.get() {
            Some(loaded) => loaded.cache.embed(text),
            None => Err(EmbedError::NotReady { model_id: self.model_id.clone() }),
        }
    }

    fn close(&self) {
        if let Some(lazy) = self.wired() {
            lazy.close();
        }
    }
}

/// Where the model stands, for `/api/memory/embedding-status` and health.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub(crate) enum Phase {
    /// Waiting for the download manager.
    Downloading,
    /// The model folder is known; the weights are loading or resident.
    Wired { dir: PathBuf },
    /// No model and downloads are switched off.
    Absent { reason: String },
    /// The download or the model folder failed.
    Failed { error: String },
}

/// Why `enable` did not start anything.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EnableError {
    #[error("the model download is already in progress")]
    InProgress,
    #[error("no model is installed and downloads are disabled")]
    DownloadsDisabled,
    #[error("{0}")]
    Failed(String),
}

/// What `enable` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum EnableOutcome {
    Ready,
    Loading,
    Downloading,
}

/// Owns the download manager and the deferred embedder.
pub(crate) struct ModelLifecycle {
    manager: ModelManager,
    embedder: Arc<DeferredEmbedder>,
    phase: Mutex<Phase>,
}

impl std::fmt::Debug for ModelLifecycle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelLifecycle").field("phase", &*self.phase.lock()).finish_non_exhaustive()
    }
}

impl ModelLifecycle {
    /// Resolves the model folder (a few file checks, no network) and
    /// declares the vector space the store will use.
    pub(crate) fn new(manager: ModelManager) -> Self {
        let resolved = manager.resolve().ok().flatten().and_then(|resolved| ModelInfo::read(&resolved.dir).ok());
        let (model_id, dim) = match &resolved {
            Some(info) => (info.model_id.clone(), info.dim),
            None => (DEFAULT_MODEL_NAME.to_owned(), DEFAULT_MODEL_DIM),
        };
        Self {
            manager,
            embedder: Arc::new(DeferredEmbedder::new(model_id, dim)),
            phase: Mutex::new(Phase::Downloading),
        }
    }

    pub(crate) fn embedder(&self) -> Arc<DeferredEmbedder> {
        Arc::clone(&self.embedder)
    }

    pub(crate) fn phase(&self) -> Phase {
        self.phase.lock().clone()
    }

    /// Where the default model is (or will be) installed.
    pub(crate) fn default_model_dir(&self) -> PathBuf {
        self.manager.install_dir()
    }

    pub(crate) fn download_status(&self) -> DownloadStatus {
        self.manager.status()
    }

    /// Starts the background work: wire an installed model, or download
    /// one (6 attempts) and wire it when it lands. Never blocks.
    pub(crate) fn start(self: &Arc<Self>) {
        let lifecycle = Arc::clone(self);
        let spawned = std::thread::Builder::new().name("cairn-model".to_owned()).spawn(move || {
            match lifecycle.resolve_or_download(RetryPolicy::BACKGROUND) {
                Ok(_) | Err(EnableError::InProgress) => {}
                Err(error) => tracing::warn!(%error, "embedding model unavailable; memory uses keyword search"),
            }
        });
        if let Err(error) = spawned {
            *self.phase.lock() = Phase::Failed { error: format!("starting the model thread: {error}") };
        }
    }

    /// `POST /api/memory/enable-embeddings`: wire (or re-kick the load
    /// of) the model, or start a download (3 attempts) when it is absent.
    /// Never waits for the network or the weights.
    pub(crate) fn enable(self: &Arc<Self>) -> Result<EnableOutcome, EnableError> {
        if let Some(lazy) = self.embedder.wired() {
            lazy.start_loading();
            return Ok(if lazy.is_ready() { EnableOutcome::Ready } else { EnableOutcome::Loading });
        }
        let status = self.manager.status();
        if matches!(status.step, DownloadStep::Downloading | DownloadStep::Verifying | DownloadStep::WaitingRetry) {
            return Err(EnableError::InProgress);
        }
        match self.manager.resolve() {
            Ok(Some(resolved)) => {
                self.wire(resolved.dir)?;
                Ok(EnableOutcome::Loading)
            }
            Ok(None) => {
                let lifecycle = Arc::clone(self);
                let ticket = self.start_download(RetryPolicy::INTERACTIVE)?;
                std::thread::Builder::new()
                    .name("cairn-model".to_owned())
                    .spawn(move || {
                        lifecycle
                            .finish_download(ticket.wait().map_err(|error| format!("{:#}", anyhow::Error::new(error))))
                    })
                    .map_err(|error| EnableError::Failed(format!("starting the model thread: {error}")))?;
                Ok(EnableOutcome::Downloading)
            }
            Err(error) => Err(EnableError::Failed(error.to_string())),
        }
    }

    fn start_download(&self, policy: RetryPolicy) -> Result<cairn_embedder::manager::DownloadTicket, EnableError> {
        *self.phase.lock() = Phase::Downloading;
        self.manager.start_download(policy).map_err(|error| {
            let (phase, error) = match error {
                EmbedError::DownloadSkipped { .. } => (
                    Phase::Absent { reason: "no model is installed and downloads are disabled".to_owned() },
                    EnableError::DownloadsDisabled,
                ),
                other => (Phase::Failed { error: other.to_string() }, EnableError::Failed(other.to_string())),
            };
            *self.phase.lock() = phase;
            error
        })
    }

    fn resolve_or_download(&self, policy: RetryPolicy) -> Result<(), EnableError> {
        match self.manager.resolve() {
            Ok(Some(resolved)) => self.wire(resolved.dir),
            Ok(None) => {
                let ticket = self.start_download(policy)?;
                self.finish_download(ticket.wait().map_err(|error| format!("{:#}", anyhow::Error::new(error))));
                Ok(())
            }
            Err(error) => {
                *self.phase.lock() = Phase::Failed { error: error.to_string() };
                Err(EnableError::Failed(error.to_string()))
            }
        }
    }

    fn finish_download(&self, outcome: Result<PathBuf, String>) {
        match outcome {
            Ok(dir) => {
                if let Err(error) = self.wire(dir) {
                    tracing::warn!(%error, "downloaded model could not be wired");
                }
            }
            Err(error) => *self.phase.lock() = Phase::Failed { error },
        }
    }

    /// Plugs the model folder into the deferred embedder and starts loading.
    fn wire(&self, dir: PathBuf) -> Result<(), EnableError> {
        let info = ModelInfo::read(&dir).map_err(|error| {
            let error = error.to_string();
            *self.phase.lock() = Phase::Failed { error: error.clone() };
            EnableError::Failed(error)
        })?;
        if info.model_id != self.embedder.model_id || info.dim != self.embedder.dim {
            let error = format!(
                "model {} ({}-dim) does not match the declared vector space {} ({}-dim); restart to switch models",
                info.model_id, info.dim, self.embedder.model_id, self.embedder.dim
            );
            *self.phase.lock() = Phase::Failed { error: error.clone() };
            return Err(EnableError::Failed(error));
        }
        let _ = self.embedder.loaded.set(Loaded::start(&info));
        *self.phase.lock() = Phase::Wired { dir };
        Ok(())
    }

    /// `Some(error)` when the wired model failed to load.
    pub(crate) fn load_error(&self) -> Option<String> {
        let lazy = self.embedder.wired()?;
        match lazy.wait_ready(Duration::ZERO) {
            Err(error @ EmbedError::LoadFailed { .. }) => Some(error.to_string()),
            _ => None,
        }
    }
}
