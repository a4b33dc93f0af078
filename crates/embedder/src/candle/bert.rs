//! [`CandleBert`]: sentence-transformers BERT folders (all-MiniLM-L6-v2,
//! bge-small, …) with a hand-written forward pass on candle tensors.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use serde::Deserialize;
use tokenizers::Tokenizer;
use tracing::{debug, info_span};

use super::tokenize::{encode_all, load_tokenizer, read_json};
use crate::backend::{EmbeddingBackend, l2_normalize};
use crate::constants::{DEFAULT_MAX_SEQ_LENGTH, MAX_BATCH};
use crate::error::{EmbedError, Result};

/// How token vectors become one sentence vector (from `1_Pooling/config.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Pooling {
    /// Average of the non-padding token vectors.
    Mean,
    /// The `[CLS]` token's vector.
    Cls,
}

/// Options for [`CandleBert::load_with`].
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct CandleBertOptions {
    /// Model id to report; defaults to the folder's name.
    pub model_id: Option<String>,
    /// Texts per forward pass; defaults to [`MAX_BATCH`].
    pub max_batch: Option<usize>,
}

impl CandleBertOptions {
    /// Sets the model id.
    pub fn model_id(mut self, model_id: impl Into<String>) -> Self {
        self.model_id = Some(model_id.into());
        self
    }

    /// Sets the texts per forward pass (at least 1).
    pub fn max_batch(mut self, max_batch: usize) -> Self {
        self.max_batch = Some(max_batch.max(1));
        self
    }
}

#[derive(Debug, Deserialize)]
struct BertConfig {
    hidden_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    intermediate_size: usize,
    #[serde(default = "default_eps")]
    layer_norm_eps: f64,
    max_position_embeddings: usize,
    #[serde(default = "default_hidden_act")]
    hidden_act: String,
    #[serde(default)]
    position_embedding_type: Option<String>,
}

fn default_eps() -> f64 {
    1e-12
}

fn default_hidden_act() -> String {
    "gelu".to_owned()
}

#[derive(Debug, Deserialize)]
struct PoolingConfig {
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
    #[serde(default)]
    pooling_mode_max_tokens: bool,
    #[serde(default)]
    pooling_mode_mean_sqrt_len_tokens: bool,
}

#[derive(Debug, Deserialize)]
struct SentenceBertConfig {
    max_seq_length: Option<usize>,
}

struct LayerNorm {
    weight: Tensor,
    bias: Tensor,
    eps: f32,
}

impl LayerNorm {
    fn forward(&self, xs: &Tensor) -> candle_core::Result<Tensor> {
        candle_nn::ops::layer_norm(xs, &self.weight, &self.bias, self.eps)
    }
}

/// A linear layer with its weight stored transposed (`in × out`), contiguous.
struct Linear {
    weight_t: Tensor,
    bias: Tensor,
}

impl Linear {
    fn forward(&self, xs: &Tensor) -> candle_core::Result<Tensor> {
        xs.matmul(&self.weight_t)?.broadcast_add(&self.bias)
    }
}

struct Layer {
    qkv: Linear,
    attention_out: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    output_norm: LayerNorm,
}

/// BERT encoder for sentence embeddings, CPU, f32.
///
/// Loads `config.json`, `tokenizer.json`, `model.safetensors`,
/// `1_Pooling/config.json` (mean or CLS pooling) and
/// `sentence_bert_config.json` (`max_seq_length`). Output vectors are
/// L2-normalised. `embed_batch` sorts its inputs by token count and runs
/// them in chunks of up to 32, padded with an attention mask.
pub struct CandleBert {
    model_id: String,
    dim: usize,
    heads: usize,
    max_batch: usize,
    pooling: Pooling,
    tokenizer: Tokenizer,
    word_embeddings: Tensor,
    position_embeddings: Tensor,
    embeddings_norm: LayerNorm,
    layers: Vec<Layer>,
    device: Device,
}

impl std::fmt::Debug for CandleBert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CandleBert")
            .field("model_id", &self.model_id)
            .field("dim", &self.dim)
            .field("layers", &self.layers.len())
            .field("pooling", &self.pooling)
            .finish()
    }
}

struct Weights {
    path: PathBuf,
    prefix: &'static str,
    tensors: HashMap<String, Tensor>,
}

impl Weights {
    fn take(&mut self, name: &str) -> Result<Tensor> {
        let full = format!("{}{name}", self.prefix);
        let tensor = self
            .tensors
            .remove(&full)
            .or_else(|| {
                // Old checkpoints name LayerNorm parameters gamma/beta.
                let legacy =
                    full.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta");
                self.tensors.remove(&legacy)
            })
            .ok_or_else(|| EmbedError::model_files(&self.path, format!("missing tensor `{full}`")))?;
        Ok(tensor.to_dtype(DType::F32)?)
    }

    fn linear(&mut self, name: &str) -> Result<Linear> {
        let weight = self.take(&format!("{name}.weight"))?;
        let bias = self.take(&format!("{name}.bias"))?;
        Ok(Linear { weight_t: weight.t()?.contiguous()?, bias })
    }

    fn layer_norm(&mut self, name: &str, eps: f64) -> Result<LayerNorm> {
        Ok(LayerNorm {
            weight: self.take(&format!("{name}.weight"))?,
            bias: self.take(&format!("{name}.bias"))?,
            eps: eps as f32,
        })
    }
}

impl CandleBert {
    /// Loads a sentence-transformers BERT folder with default options.
    pub fn load(dir: impl AsRef<Path>) -> Result<Self> {
        Self::load_with(dir, CandleBertOptions::default())
    }

    /// Loads a sentence-transformers BERT folder.
    pub fn load_with(dir: impl AsRef<Path>, options: CandleBertOptions) -> Result<Self> {
        let dir = dir.as_ref();
        let span = info_span!("candle_bert_load", dir = %dir.display());
        let _entered = span.enter();
        let config: BertConfig = read_json(&dir.join("config.json"))?;
        validate_config(dir, &config)?;
        let pooling = read_pooling(dir)?;
        let max_seq_length = read_max_seq_length(dir)?.min(config.max_position_embeddings);
        let tokenizer = load_tokenizer(dir, max_seq_length)?;

        let weights_path = dir.join("model.safetensors");
        if !weights_path.is_file() {
            return Err(EmbedError::model_files(&weights_path, "missing model.safetensors"));
        }
        let device = Device::Cpu;
        let tensors = candle_core::safetensors::load(&weights_path, &device)
            .map_err(|error| EmbedError::model_files(&weights_path, format!("unreadable safetensors: {error}")))?;
        let prefix = if tensors.contains_key("embeddings.word_embeddings.weight") {
            ""
        } else if tensors.contains_key("bert.embeddings.word_embeddings.weight") {
            "bert."
        } else {
            return Err(EmbedError::model_files(&weights_path, "no BERT embeddings tensor found"));
        };
        let mut weights = Weights { path: weights_path, prefix, tensors };

        let hidden = config.hidden_size;
        let head_dim = hidden / config.num_attention_heads;
        let word_embeddings = weights.take("embeddings.word_embeddings.weight")?;
        // Token type is always 0 for single sentences: fold its row into the
        // position table once.
        let token_type = weights.take("embeddings.token_type_embeddings.weight")?.get(0)?;
        let position_embeddings = weights
            .take("embeddings.position_embeddings.weight")?
            .broadcast_add(&token_type)?
            .narrow(0, 0, max_seq_length)?
            .contiguous()?;
        let embeddings_norm = weights.layer_norm("embeddings.LayerNorm", config.layer_norm_eps)?;

        let scale = 1.0 / (head_dim as f64).sqrt();
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for index in 0..config.num_hidden_layers {
            let base = format!("encoder.layer.{index}");
            // Fuse Q, K and V into one matmul; fold the attention scale into Q.
            let query = weights.linear(&format!("{base}.attention.self.query"))?;
            let key = weights.linear(&format!("{base}.attention.self.key"))?;
            let value = weights.linear(&format!("{base}.attention.self.value"))?;
            let qkv = Linear {
                weight_t: Tensor::cat(&[(query.weight_t * scale)?, key.weight_t, value.weight_t], 1)?.contiguous()?,
                bias: Tensor::cat(&[(query.bias * scale)?, key.bias, value.bias], 0)?,
            };
            layers.push(Layer {
                qkv,
                attention_out: weights.linear(&format!("{base}.attention.output.dense"))?,
                attention_norm: weights
                    .layer_norm(&format!("{base}.attention.output.LayerNorm"), config.layer_norm_eps)?,
                intermediate: weights.linear(&format!("{base}.intermediate.dense"))?,
                output: weights.linear(&format!("{base}.output.dense"))?,
                output_norm: weights.layer_norm(&format!("{base}.output.LayerNorm"), config.layer_norm_eps)?,
            });
        }
        let model_id = options.model_id.unwrap_or_else(|| folder_name(dir));
        debug!(%model_id, hidden, layers = layers.len(), max_seq_length, ?pooling, "BERT loaded");
        Ok(Self {
            model_id,
            dim: hidden,
            heads: config.num_attention_heads,
            max_batch: options.max_batch.unwrap_or(MAX_BATCH),
            pooling,
            tokenizer,
            word_embeddings,
            position_embeddings,
            embeddings_norm,
            layers,
            device,
        })
    }

    /// The pooling this model applies.
    pub fn pooling(&self) -> Pooling {
        self.pooling
    }

    /// Runs one padded chunk; `ids` are token ids per text (unpadded).
    fn forward_chunk(&self, ids: &[&[u32]]) -> Result<Vec<Vec<f32>>> {
        let batch = ids.len();
        let seq_len = ids.iter().map(|ids| ids.len()).max().unwrap_or(0);
        if batch == 0 {
            return Ok(Vec::new());
        }
        if seq_len == 0 {
            return Err(EmbedError::Tokenizer { message: "tokenizer produced no tokens".to_owned() });
        }
        let hidden = self.dim;
        let head_dim = hidden / self.heads;
        let mut flat_ids = Vec::with_capacity(batch * seq_len);
        let mut mask_bias = Vec::with_capacity(batch * seq_len);
        let mut padded = false;
        for row in ids {
            flat_ids.extend_from_slice(row);
            flat_ids.extend(std::iter::repeat_n(0u32, seq_len - row.len()));
            mask_bias.extend(std::iter::repeat_n(0.0f32, row.len()));
            mask_bias.extend(std::iter::repeat_n(-1e30f32, seq_len - row.len()));
            padded |= row.len() < seq_len;
        }
        let ids_tensor = Tensor::from_vec(flat_ids, batch * seq_len, &self.device)?;
        let mask = if padded { Some(Tensor::from_vec(mask_bias, (batch, 1, 1, seq_len), &self.device)?) } else { None };

        let positions = self.position_embeddings.narrow(0, 0, seq_len)?;
        let embedded = self
            .word_embeddings
            .index_select(&ids_tensor, 0)?
            .reshape((batch, seq_len, hidden))?
            .broadcast_add(&positions)?;
        let mut xs = self.embeddings_norm.forward(&embedded)?.reshape((batch * seq_len, hidden))?;

        for layer in &self.layers {
            let qkv = layer
                .qkv
                .forward(&xs)?
                .reshape((batch, seq_len, 3, self.heads, head_dim))?
                .permute((2, 0, 3, 1, 4))?
                .contiguous()?;
            let query = qkv.get(0)?;
            let key = qkv.get(1)?;
            let value = qkv.get(2)?;
            let mut scores = query.matmul(&key.t()?)?;
            if let Some(mask) = &mask {
                scores = scores.broadcast_add(mask)?;
            }
            let probs = candle_nn::ops::softmax_last_dim(&scores)?;
            let context = probs.matmul(&value)?.transpose(1, 2)?.contiguous()?.reshape((batch * seq_len, hidden))?;
            let attended = layer.attention_out.forward(&context)?;
            xs = layer.attention_norm.forward(&(attended + &xs)?)?;
            let intermediate = layer.intermediate.forward(&xs)?.gelu_erf()?;
            let output = layer.output.forward(&intermediate)?;
            xs = layer.output_norm.forward(&(output + &xs)?)?;
        }

        let token_vectors = xs.flatten_all()?.to_vec1::<f32>()?;
        let mut sentences = Vec::with_capacity(batch);
        for (row, row_ids) in ids.iter().enumerate() {
            let base = row * seq_len * hidden;
            let mut vector = vec![0.0f32; hidden];
            match self.pooling {
                Pooling::Cls => vector.copy_from_slice(&token_vectors[base..base + hidden]),
                Pooling::Mean => {
                    for token in 0..row_ids.len() {
                        let start = base + token * hidden;
                        for (acc, x) in vector.iter_mut().zip(&token_vectors[start..start + hidden]) {
                            *acc += x;
                        }
                    }
                    let count = row_ids.len() as f32;
                    for x in &mut vector {
                        *x /= count;
                    }
                }
            }
            l2_normalize(&mut vector);
            sentences.push(vector);
        }
        Ok(sentences)
    }
}

fn folder_name(dir: &Path) -> String {
    dir.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_else(|| "bert".to_owned())
}

fn validate_config(dir: &Path, config: &BertConfig) -> Result<()> {
    let path = dir.join("config.json");
    if config.num_attention_heads == 0 || !config.hidden_size.is_multiple_of(config.num_attention_heads) {
        return Err(EmbedError::model_files(&path, "hidden_size is not a multiple of num_attention_heads"));
    }
    if config.intermediate_size == 0 || config.num_hidden_layers == 0 {
        return Err(EmbedError::model_files(&path, "empty encoder"));
    }
    if !matches!(config.hidden_act.as_str(), "gelu") {
        return Err(EmbedError::model_files(&path, format!("unsupported hidden_act `{}`", config.hidden_act)));
    }
    if let Some(kind) = &config.position_embedding_type
        && kind != "absolute"
    {
        return Err(EmbedError::model_files(&path, format!("unsupported position_embedding_type `{kind}`")));
    }
    Ok(())
}

fn read_pooling(dir: &Path) -> Result<Pooling> {
    let path = dir.join("1_Pooling").join("config.json");
    if !path.is_file() {
        // Plain BERT folders without a sentence-transformers head: mean pooling.
        return Ok(Pooling::Mean);
    }
    let config: PoolingConfig = read_json(&path)?;
    match (
        config.pooling_mode_mean_tokens,
        config.pooling_mode_cls_token,
        config.pooling_mode_max_tokens || config.pooling_mode_mean_sqrt_len_tokens,
    ) {
        (true, false, false) => Ok(Pooling::Mean),
        (false, true, false) => Ok(Pooling::Cls),
        _ => Err(EmbedError::model_files(&path, "unsupported pooling (only one of mean or CLS is supported)")),
    }
}

fn read_max_seq_length(dir: &Path) -> Result<usize> {
    let path = dir.join("sentence_bert_config.json");
    if !path.is_file() {
        return Ok(DEFAULT_MAX_SEQ_LENGTH);
    }
    let config: SentenceBertConfig = read_json(&path)?;
    match config.max_seq_length {
        Some(0) => Err(EmbedError::model_files(&path, "max_seq_length is 0")),
        Some(length) => Ok(length),
        None => Ok(DEFAULT_MAX_SEQ_LENGTH),
    }
}

impl EmbeddingBackend for CandleBert {
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
        let span = info_span!("candle_bert_embed_batch", model_id = %self.model_id, texts = texts.len());
        let _entered = span.enter();
        let ids = encode_all(&self.tokenizer, texts)?;
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&index| std::cmp::Reverse(ids[index].len()));
        let mut vectors: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        for chunk in order.chunks(self.max_batch) {
            let chunk_ids: Vec<&[u32]> = chunk.iter().map(|&index| ids[index].as_slice()).collect();
            for (&index, vector) in chunk.iter().zip(self.forward_chunk(&chunk_ids)?) {
                vectors[index] = vector;
            }
        }
        Ok(vectors)
    }
}
