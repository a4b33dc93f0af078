//! [`Qwen3Embedder`]: Qwen3-Embedding checkpoints with last-token pooling.

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::qwen3::{Config, Model};
use tokenizers::Tokenizer;
use tracing::{debug, info_span};

use super::tokenize::{encode_all, load_tokenizer, read_json};
use crate::backend::{EmbeddingBackend, l2_normalize};
use crate::constants::{DEFAULT_MAX_SEQ_LENGTH, QWEN3_DEFAULT_INSTRUCTION};
use crate::error::{EmbedError, Result};

/// The end-of-text token Qwen3-Embedding pools on.
const END_OF_TEXT: &str = "<|endoftext|>";

/// Options for [`Qwen3Embedder::load_with`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Qwen3Options {
    /// Model id to report; defaults to the folder's name.
    pub model_id: Option<String>,
    /// Task description put in front of queries by [`Qwen3Embedder::embed_query`].
    pub instruction: String,
    /// Token limit per text.
    pub max_seq_length: usize,
}

impl Default for Qwen3Options {
    fn default() -> Self {
        Self {
            model_id: None,
            instruction: QWEN3_DEFAULT_INSTRUCTION.to_owned(),
            max_seq_length: DEFAULT_MAX_SEQ_LENGTH,
        }
    }
}

impl Qwen3Options {
    /// Sets the model id.
    pub fn model_id(mut self, model_id: impl Into<String>) -> Self {
        self.model_id = Some(model_id.into());
        self
    }

    /// Sets the query instruction.
    pub fn instruction(mut self, instruction: impl Into<String>) -> Self {
        self.instruction = instruction.into();
        self
    }
}

/// Qwen3-Embedding (e.g. the 0.6B, 1024-dim checkpoint): decoder-only,
/// pools the hidden state of the final `<|endoftext|>` token, L2-normalised.
/// Documents are embedded as they are; queries go through
/// [`embed_query`](Self::embed_query), which applies the model's
/// `Instruct: {task}\nQuery:{query}` convention.
pub struct Qwen3Embedder {
    model_id: String,
    dim: usize,
    instruction: String,
    end_of_text: u32,
    max_seq_length: usize,
    tokenizer: Tokenizer,
    model: Model,
}

impl std::fmt::Debug for Qwen3Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Qwen3Embedder").field("model_id", &self.model_id).field("dim", &self.dim).finish()
    }
}

/// Formats a query with an instruction, Qwen3-Embedding style.
pub fn format_query(instruction: &str, query: &str) -> String {
    format!("Instruct: {instruction}\nQuery:{query}")
}

impl Qwen3Embedder {
    /// Loads a Qwen3-Embedding folder (`config.json`, `tokenizer.json`,
    /// `model.safetensors`) with default options.
    pub fn load(dir: impl AsRef<Path>) -> Result<Self> {
        Self::load_with(dir, Qwen3Options::default())
    }

    /// Loads a Qwen3-Embedding folder.
    pub fn load_with(dir: impl AsRef<Path>, options: Qwen3Options) -> Result<Self> {
        let dir = dir.as_ref();
        let span = info_span!("qwen3_load", dir = %dir.display());
        let _entered = span.enter();
        let config_path = dir.join("config.json");
        let config: Config = read_json(&config_path)?;
        if config.hidden_size == 0 || config.num_hidden_layers == 0 {
            return Err(EmbedError::model_files(&config_path, "empty model"));
        }
        let max_seq_length = options.max_seq_length.min(config.max_position_embeddings).max(2);
        // One slot is kept for the end-of-text token appended below.
        let tokenizer = load_tokenizer(dir, max_seq_length - 1)?;
        let end_of_text = tokenizer
            .token_to_id(END_OF_TEXT)
            .ok_or_else(|| EmbedError::model_files(dir.join("tokenizer.json"), format!("no `{END_OF_TEXT}` token")))?;

        let weights_path = dir.join("model.safetensors");
        if !weights_path.is_file() {
            return Err(EmbedError::model_files(&weights_path, "missing model.safetensors"));
        }
        let data = std::fs::read(&weights_path).map_err(|source| EmbedError::io("reading", &weights_path, source))?;
        let device = Device::Cpu;
        let vb = VarBuilder::from_buffered_safetensors(data, DType::F32, &device)
            .map_err(|error| EmbedError::model_files(&weights_path, format!("unreadable safetensors: {error}")))?;
        // Qwen3-Embedding checkpoints store the bare model (`layers.0…`);
        // candle's model expects the causal-LM layout (`model.layers.0…`).
        let vb = if vb.contains_tensor("model.embed_tokens.weight") {
            vb
        } else if vb.contains_tensor("embed_tokens.weight") {
            vb.rename_f(|name| name.strip_prefix("model.").unwrap_or(name).to_owned())
        } else {
            return Err(EmbedError::model_files(&weights_path, "no `embed_tokens.weight` tensor"));
        };
        let model = Model::new(&config, vb)
            .map_err(|error| EmbedError::model_files(&weights_path, format!("building the model: {error}")))?;
        let model_id = options.model_id.unwrap_or_else(|| {
            dir.file_name()
                .map(|name| name.to_string_lossy().into_owned())
                .unwrap_or_else(|| "qwen3-embedding".to_owned())
        });
        debug!(%model_id, dim = config.hidden_size, "Qwen3 loaded");
        Ok(Self {
            model_id,
            dim: config.hidden_size,
            instruction: options.instruction,
            end_of_text,
            max_seq_length,
            tokenizer,
            model,
        })
    }

    /// Embeds a search query with the configured instruction prefix.
    pub fn embed_query(&self, query: &str) -> Result<Vec<f32>> {
        self.embed(&format_query(&self.instruction, query))
    }

    fn embed_ids(&self, mut ids: Vec<u32>) -> Result<Vec<f32>> {
        if ids.last() != Some(&self.end_of_text) {
            ids.truncate(self.max_seq_length - 1);
            ids.push(self.end_of_text);
        }
        let length = ids.len();
        let input = Tensor::from_vec(ids, (1, length), &Device::Cpu)?;
        // The model keeps a KV cache; a clone (shared weights) starts empty.
        let mut model = self.model.clone();
        let hidden = model.forward(&input, 0)?;
        let mut vector = hidden.narrow(1, length - 1, 1)?.flatten_all()?.to_vec1::<f32>()?;
        l2_normalize(&mut vector);
        Ok(vector)
    }
}

impl EmbeddingBackend for Qwen3Embedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn is_ready(&self) -> bool {
        true
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let span = info_span!("qwen3_embed_batch", model_id = %self.model_id, texts = texts.len());
        let _entered = span.enter();
        // Sequences run one at a time: no padding, so the last token is
        // always the pooled one.
        encode_all(&self.tokenizer, texts)?.into_iter().map(|ids| self.embed_ids(ids)).collect()
    }
}
