//! [`CandleBert`]: sentence-transformers BERT folders (all-MiniLM-L6-v2,
//! bge-small, …) with a hand-written forward pass on candle tensors.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use serde::Deserialize;
use tokenizers::Tokenizer;
use tracing::{debug, info_span};

use rayon::prelude::*;

use super::kernels::{self, AttentionScratch, Norm};
use super::matmul::{Epilogue, PackedLinear};
use super::team::{SharedOut, Team};
use super::tokenize::{encode_all, load_tokenizer, read_json};
use crate::backend::{EmbeddingBackend, l2_normalize};
use crate::constants::{DEFAULT_MAX_SEQ_LENGTH, MAX_BATCH};

/// Below this many texts per thread, one forward pass splits its work
/// across threads instead of each thread taking whole texts.
const MIN_TEXTS_PER_THREAD: usize = 4;
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

struct Layer {
    qkv: PackedLinear,
    attention_out: PackedLinear,
    attention_norm: Norm,
    intermediate: PackedLinear,
    output: PackedLinear,
    output_norm: Norm,
}

/// BERT encoder for sentence embeddings, CPU, f32.
///
/// Loads `config.json`, `tokenizer.json`, `model.safetensors`,
/// `1_Pooling/config.json` (mean or CLS pooling) and
/// `sentence_bert_config.json` (`max_seq_length`). Output vectors are
/// L2-normalised. `embed_batch` sorts its inputs by token count and runs
/// them in chunks of up to 32 texts; no padding is computed: the linear
/// layers take every token as a row and attention runs per text.
pub struct CandleBert {
    model_id: String,
    dim: usize,
    heads: usize,
    max_batch: usize,
    pooling: Pooling,
    tokenizer: Tokenizer,
    word_embeddings: Vec<f32>,
    position_embeddings: Vec<f32>,
    embeddings_norm: Norm,
    layers: Vec<Layer>,
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

    /// Weight (`out × in`) and bias of a linear layer, as tensors.
    fn linear_parts(&mut self, name: &str) -> Result<(Tensor, Tensor)> {
        Ok((self.take(&format!("{name}.weight"))?, self.take(&format!("{name}.bias"))?))
    }

    fn linear(&mut self, name: &str) -> Result<PackedLinear> {
        let (weight, bias) = self.linear_parts(name)?;
        self.pack(&weight, &bias, name)
    }

    /// Packs a `out × in` weight and its `out` bias for the matrix kernel.
    fn pack(&self, weight: &Tensor, bias: &Tensor, name: &str) -> Result<PackedLinear> {
        let (outputs, inputs) = weight.dims2()?;
        if bias.dims() != [outputs] {
            return Err(EmbedError::model_files(&self.path, format!("`{name}` bias does not match its weight")));
        }
        let weight: Vec<f32> = weight.flatten_all()?.to_vec1()?;
        Ok(PackedLinear::new(&weight, &bias.to_vec1::<f32>()?, outputs, inputs))
    }

    fn layer_norm(&mut self, name: &str, eps: f64) -> Result<Norm> {
        Ok(Norm {
            weight: self.take(&format!("{name}.weight"))?.to_vec1()?,
            bias: self.take(&format!("{name}.bias"))?.to_vec1()?,
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
        let word_embeddings = weights.take("embeddings.word_embeddings.weight")?.flatten_all()?.to_vec1()?;
        // Token type is always 0 for single sentences: fold its row into the
        // position table once.
        let token_type = weights.take("embeddings.token_type_embeddings.weight")?.get(0)?;
        let position_embeddings = weights
            .take("embeddings.position_embeddings.weight")?
            .broadcast_add(&token_type)?
            .narrow(0, 0, max_seq_length)?
            .flatten_all()?
            .to_vec1()?;
        let embeddings_norm = weights.layer_norm("embeddings.LayerNorm", config.layer_norm_eps)?;

        let scale = 1.0 / (head_dim as f64).sqrt();
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for index in 0..config.num_hidden_layers {
            let base = format!("encoder.layer.{index}");
            // Fuse Q, K and V into one matmul; fold the attention scale into Q.
            let (query_weight, query_bias) = weights.linear_parts(&format!("{base}.attention.self.query"))?;
            let (key_weight, key_bias) = weights.linear_parts(&format!("{base}.attention.self.key"))?;
            let (value_weight, value_bias) = weights.linear_parts(&format!("{base}.attention.self.value"))?;
            let qkv = weights.pack(
                &Tensor::cat(&[(query_weight * scale)?, key_weight, value_weight], 0)?,
                &Tensor::cat(&[(query_bias * scale)?, key_bias, value_bias], 0)?,
                &format!("{base}.attention.self"),
            )?;
            if qkv.outputs() != 3 * hidden {
                return Err(EmbedError::model_files(
                    &weights.path,
                    format!("`{base}` attention is not hidden_size wide"),
                ));
            }
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
        })
    }

    /// The pooling this model applies.
    pub fn pooling(&self) -> Pooling {
        self.pooling
    }

    /// Runs one chunk of texts, unpadded: the linear layers see every
    /// token of every text as one row, attention runs per text. With
    /// `parallel`, the products and attention split across the rayon pool.
    fn forward_chunk(&self, ids: &[&[u32]], parallel: bool) -> Result<Vec<Vec<f32>>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        if ids.iter().any(|row| row.is_empty()) {
            return Err(EmbedError::Tokenizer { message: "tokenizer produced no tokens".to_owned() });
        }
        let hidden = self.dim;
        let head_dim = hidden / self.heads;
        let lengths: Vec<usize> = ids.iter().map(|row| row.len()).collect();
        let flat_ids: Vec<u32> = ids.iter().flat_map(|row| row.iter().copied()).collect();
        let tokens = flat_ids.len();
        let mut states = kernels::embed(
            &flat_ids,
            &lengths,
            &self.word_embeddings,
            &self.position_embeddings,
            hidden,
            &self.embeddings_norm,
        );
        // Scratch buffers, reused by every layer.
        let intermediate_width = self.layers.first().map_or(0, |layer| layer.intermediate.outputs());
        let mut qkv = vec![0.0f32; tokens * 3 * hidden];
        let mut context = vec![0.0f32; tokens * hidden];
        let mut projected = vec![0.0f32; tokens * hidden];
        let mut intermediate = vec![0.0f32; tokens * intermediate_width];
        let threads = if parallel { rayon::current_num_threads() } else { 1 };
        if threads > 1 {
            let buffers = Buffers {
                states: SharedOut::new(&mut states),
                qkv: SharedOut::new(&mut qkv),
                context: SharedOut::new(&mut context),
                projected: SharedOut::new(&mut projected),
                intermediate: SharedOut::new(&mut intermediate),
            };
            let team = Team::new(self.layers.len() * PHASES_PER_LAYER);
            rayon::in_place_scope(|scope| {
                for _ in 1..threads {
                    scope.spawn(|_| self.layers_shared(&team, &buffers, &lengths, threads));
                }
                self.layers_shared(&team, &buffers, &lengths, threads);
            });
        } else {
            for layer in &self.layers {
                layer.qkv.product(&states, tokens, Epilogue::Bias, &mut qkv, false);
                kernels::attention(&qkv, &lengths, self.heads, head_dim, &mut context, false);
                layer.attention_out.product(&context, tokens, Epilogue::Bias, &mut projected, false);
                kernels::residual_norm(&projected, &mut states, &layer.attention_norm);
                layer.intermediate.product(&states, tokens, Epilogue::BiasGelu, &mut intermediate, false);
                layer.output.product(&intermediate, tokens, Epilogue::Bias, &mut projected, false);
                kernels::residual_norm(&projected, &mut states, &layer.output_norm);
            }
        }

        let mut sentences = Vec::with_capacity(ids.len());
        let mut first = 0;
        for &length in &lengths {
            let rows = &states[first * hidden..(first + length) * hidden];
            let mut vector = match self.pooling {
                Pooling::Cls => rows[..hidden].to_vec(),
                Pooling::Mean => {
                    let mut sum = vec![0.0f32; hidden];
                    for row in rows.chunks_exact(hidden) {
                        for (acc, x) in sum.iter_mut().zip(row) {
                            *acc += x;
                        }
                    }
                    sum.iter_mut().for_each(|x| *x /= length as f32);
                    sum
                }
            };
            l2_normalize(&mut vector);
            sentences.push(vector);
            first += length;
        }
        Ok(sentences)
    }
}

/// Phases of one layer in [`CandleBert::layers_shared`].
const PHASES_PER_LAYER: usize = 7;

/// Rows per task of a shared layer norm.
const NORM_ROWS_PER_TASK: usize = 8;

/// The buffers of one forward pass, shared by the threads of a [`Team`].
struct Buffers<'a> {
    states: SharedOut<'a>,
    qkv: SharedOut<'a>,
    context: SharedOut<'a>,
    projected: SharedOut<'a>,
    intermediate: SharedOut<'a>,
}

impl CandleBert {
    /// The encoder layers as one pass shared by `threads` threads (each
    /// calls this): products split by column panels, attention by
    /// (sequence, head), layer norms by rows, with no fork or join
    /// between steps.
    #[allow(unsafe_code)]
    fn layers_shared(&self, team: &Team, buffers: &Buffers<'_>, lengths: &[usize], threads: usize) {
        let hidden = self.dim;
        let head_dim = hidden / self.heads;
        let tokens = buffers.states.len() / hidden;
        let starts = kernels::sequence_starts(lengths);
        let mut scratch = AttentionScratch::default();
        let norm_tasks = tokens.div_ceil(NORM_ROWS_PER_TASK);
        // Two tasks per thread, so a thread that starts late still finds work.
        let panel_tasks = 2 * threads;
        let panel_share = |linear: &PackedLinear, task: usize| {
            let per_task = linear.panel_count().div_ceil(panel_tasks);
            (task * per_task).min(linear.panel_count())..((task + 1) * per_task).min(linear.panel_count())
        };
        // Within a phase the tasks write disjoint parts of one buffer and
        // read only buffers that no task of the phase writes; `Team::phase`
        // runs the phases in order and publishes each one's writes.
        for (index, layer) in self.layers.iter().enumerate() {
            let phase = index * PHASES_PER_LAYER;
            let linear =
                |phase: usize, linear: &PackedLinear, epilogue: Epilogue, input: &SharedOut<'_>, out: SharedOut<'_>| {
                    team.phase(phase, panel_tasks, |task| {
                        // SAFETY: the tasks' panel ranges (columns of `out`)
                        // are disjoint; nobody writes `input` in this phase.
                        unsafe {
                            linear.product_panels(input.slice(), tokens, panel_share(linear, task), epilogue, out)
                        }
                    })
                };
            let norm = |phase: usize, norm: &kernels::Norm| {
                team.phase(phase, norm_tasks, |task| {
                    let rows = task * NORM_ROWS_PER_TASK..((task + 1) * NORM_ROWS_PER_TASK).min(tokens);
                    // SAFETY: every task holds its own rows of `states`;
                    // nobody writes `projected` in this phase.
                    unsafe {
                        let residual = buffers.states.slice_mut(rows.start * hidden..rows.end * hidden);
                        kernels::residual_norm_rows(buffers.projected.slice(), residual, rows.start, norm);
                    }
                })
            };
            linear(phase, &layer.qkv, Epilogue::Bias, &buffers.states, buffers.qkv);
            team.phase(phase + 1, lengths.len() * self.heads, |task| {
                let (sequence, head) = (task / self.heads, task % self.heads);
                // SAFETY: every task writes one head's columns of one
                // sequence's rows of `context`; nobody writes `qkv` here.
                unsafe {
                    kernels::attend_head(
                        buffers.qkv.slice(),
                        starts[sequence],
                        lengths[sequence],
                        hidden,
                        head,
                        head_dim,
                        buffers.context,
                        &mut scratch,
                    )
                }
            });
            linear(phase + 2, &layer.attention_out, Epilogue::Bias, &buffers.context, buffers.projected);
            norm(phase + 3, &layer.attention_norm);
            linear(phase + 4, &layer.intermediate, Epilogue::BiasGelu, &buffers.states, buffers.intermediate);
            linear(phase + 5, &layer.output, Epilogue::Bias, &buffers.intermediate, buffers.projected);
            norm(phase + 6, &layer.output_norm);
        }
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
        // Enough texts for every thread: whole chunks run in parallel, each
        // on one thread (no synchronisation inside a forward pass). Else one
        // chunk splits its products and attention across the threads.
        let threads = rayon::current_num_threads();
        let chunk_size = if order.len() >= threads * MIN_TEXTS_PER_THREAD && threads > 1 {
            self.max_batch.min(order.len().div_ceil(threads))
        } else {
            self.max_batch
        };
        let chunks: Vec<&[usize]> = order.chunks(chunk_size).collect();
        let run = |chunk: &&[usize], parallel: bool| -> Result<Vec<Vec<f32>>> {
            let chunk_ids: Vec<&[u32]> = chunk.iter().map(|&index| ids[index].as_slice()).collect();
            self.forward_chunk(&chunk_ids, parallel)
        };
        let results: Vec<Vec<Vec<f32>>> = if chunks.len() > 1 {
            chunks.par_iter().map(|chunk| run(chunk, false)).collect::<Result<_>>()?
        } else {
            chunks.iter().map(|chunk| run(chunk, true)).collect::<Result<_>>()?
        };
        let mut vectors: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        for (chunk, chunk_vectors) in chunks.iter().zip(results) {
            for (&index, vector) in chunk.iter().zip(chunk_vectors) {
                vectors[index] = vector;
            }
        }
        Ok(vectors)
    }
}
