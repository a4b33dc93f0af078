//! Opening a model folder: what it is (cheap) and loading it (slow).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use crate::backend::EmbeddingBackend;
use crate::error::{EmbedError, Result};
use crate::lazy::LazyEmbedder;

/// The architectures Cairn can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ModelKind {
    /// BERT encoders (all-MiniLM-L6-v2, bge-small…): [`crate::CandleBert`].
    Bert,
    /// Qwen3-Embedding: [`crate::Qwen3Embedder`].
    Qwen3,
}

/// What a model folder declares, read without loading weights.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct ModelInfo {
    /// The folder.
    pub dir: PathBuf,
    /// Model id vectors are tagged with (the folder's name).
    pub model_id: String,
    /// Architecture.
    pub kind: ModelKind,
    /// Vector width.
    pub dim: usize,
}

#[derive(Deserialize)]
struct ConfigHead {
    model_type: Option<String>,
    hidden_size: Option<usize>,
}

impl ModelInfo {
    /// Reads `config.json` of the folder at `dir`.
    pub fn read(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        let path = dir.join("config.json");
        let bytes = std::fs::read(&path).map_err(|source| EmbedError::io("reading", &path, source))?;
        let head: ConfigHead =
            serde_json::from_slice(&bytes).map_err(|source| EmbedError::Json { path: path.clone(), source })?;
        let kind = match head.model_type.as_deref() {
            Some("bert") => ModelKind::Bert,
            Some("qwen3") => ModelKind::Qwen3,
            Some(other) => return Err(EmbedError::model_files(&path, format!("unsupported model_type `{other}`"))),
            None => return Err(EmbedError::model_files(&path, "no model_type")),
        };
        let dim =
            head.hidden_size.filter(|dim| *dim > 0).ok_or_else(|| EmbedError::model_files(&path, "no hidden_size"))?;
        let model_id = dir
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .ok_or_else(|| EmbedError::model_files(dir, "folder has no name"))?;
        Ok(Self { dir: dir.to_path_buf(), model_id, kind, dim })
    }

    /// Loads the model now (slow: reads the weights).
    pub fn load(&self) -> Result<Box<dyn EmbeddingBackend>> {
        load_backend(self)
    }

    /// A [`LazyEmbedder`] that loads this model on a background thread at first use.
    pub fn lazy(&self) -> LazyEmbedder {
        let info = self.clone();
        LazyEmbedder::new(self.model_id.clone(), self.dim, move || info.load())
    }

    /// Like [`lazy`](Self::lazy), as a shareable trait object.
    pub fn lazy_backend(&self) -> Arc<dyn EmbeddingBackend> {
        Arc::new(self.lazy())
    }
}

#[cfg(feature = "candle")]
fn load_backend(info: &ModelInfo) -> Result<Box<dyn EmbeddingBackend>> {
    match info.kind {
        ModelKind::Bert => Ok(Box::new(crate::CandleBert::load(&info.dir)?)),
        ModelKind::Qwen3 => Ok(Box::new(crate::Qwen3Embedder::load(&info.dir)?)),
    }
}

#[cfg(not(feature = "candle"))]
fn load_backend(_info: &ModelInfo) -> Result<Box<dyn EmbeddingBackend>> {
    Err(EmbedError::CandleDisabled)
}
