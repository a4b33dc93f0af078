//! Tiny model folders with seeded random weights, written on demand, so
//! tests (here and in other crates) exercise the real loading and inference
//! code without the real model. The vectors mean nothing; their shapes,
//! determinism and plumbing are what the fixtures prove.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use crate::error::{EmbedError, Result};

/// Words every tiny tokenizer knows (anything else maps to `[UNK]`).
pub const TINY_WORDS: &[&str] = &[
    "the", "a", "cat", "dog", "sat", "on", "mat", "memory", "skill", "hook", "rust", "cairn", "agent", "fast", "slow",
    "model", "vector", "text", "search", "file", "is", "and", "of", "to", "in",
];

/// Shape of a tiny BERT written by [`write_tiny_bert`].
pub const TINY_BERT_DIM: usize = 32;

/// Shape of a tiny Qwen3 written by [`write_tiny_qwen3`]: as wide as
/// Qwen3-Embedding-0.6B, but one layer and a toy vocabulary.
pub const TINY_QWEN3_DIM: usize = 1024;

struct Rng(u64);

impl Rng {
    fn next_f32(&mut self) -> f32 {
        // xorshift64*, mapped to [-1, 1).
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let bits = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40;
        (bits as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

struct SafeTensors {
    rng: Rng,
    tensors: BTreeMap<String, (Vec<usize>, Vec<f32>)>,
}

impl SafeTensors {
    fn new(seed: u64) -> Self {
        Self { rng: Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1), tensors: BTreeMap::new() }
    }

    fn random(&mut self, name: &str, shape: &[usize], scale: f32) {
        let count = shape.iter().product();
        let data = (0..count).map(|_| self.rng.next_f32() * scale).collect();
        self.tensors.insert(name.to_owned(), (shape.to_vec(), data));
    }

    fn constant(&mut self, name: &str, shape: &[usize], value: f32) {
        let count = shape.iter().product();
        self.tensors.insert(name.to_owned(), (shape.to_vec(), vec![value; count]));
    }

    /// Serialises in the safetensors format: u64 header length, JSON header, data.
    fn write(&self, path: &Path) -> Result<()> {
        let mut header = serde_json::Map::new();
        let mut data = Vec::new();
        for (name, (shape, values)) in &self.tensors {
            let start = data.len();
            for value in values {
                data.extend_from_slice(&value.to_le_bytes());
            }
            header.insert(name.clone(), json!({"dtype": "F32", "shape": shape, "data_offsets": [start, data.len()]}));
        }
        let mut header = serde_json::to_vec(&Value::Object(header)).expect("a JSON map serialises");
        while !header.len().is_multiple_of(8) {
            header.push(b' ');
        }
        let mut bytes = Vec::with_capacity(8 + header.len() + data.len());
        bytes.extend_from_slice(&(header.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&header);
        bytes.extend_from_slice(&data);
        write(path, &bytes)
    }
}

fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|source| EmbedError::io("creating", parent, source))?;
    }
    std::fs::write(path, bytes).map_err(|source| EmbedError::io("writing", path, source))
}

fn write_json(path: &Path, value: &Value) -> Result<()> {
    write(path, &serde_json::to_vec_pretty(value).expect("JSON values serialise"))
}

fn vocab(specials: &[&str]) -> serde_json::Map<String, Value> {
    specials.iter().chain(TINY_WORDS).enumerate().map(|(id, token)| ((*token).to_owned(), json!(id))).collect()
}

/// Writes a sentence-transformers-style BERT folder (2 layers, 32-dim, mean
/// pooling, WordPiece tokenizer over [`TINY_WORDS`]) with weights drawn from
/// `seed`.
pub fn write_tiny_bert(dir: &Path, seed: u64) -> Result<()> {
    let (hidden, layers, heads, intermediate, positions) = (TINY_BERT_DIM, 2, 4, 64, 64);
    let specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];
    let vocab = vocab(&specials);
    let vocab_size = vocab.len();
    write_json(
        &dir.join("config.json"),
        &json!({
            "architectures": ["BertModel"], "model_type": "bert", "hidden_act": "gelu",
            "hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
            "intermediate_size": intermediate, "max_position_embeddings": positions,
            "type_vocab_size": 2, "vocab_size": vocab_size, "layer_norm_eps": 1e-12,
            "pad_token_id": 0, "position_embedding_type": "absolute"
        }),
    )?;
    write_json(&dir.join("sentence_bert_config.json"), &json!({"max_seq_length": 16, "do_lower_case": false}))?;
    write_json(
        &dir.join("1_Pooling").join("config.json"),
        &json!({"word_embedding_dimension": hidden, "pooling_mode_cls_token": false,
                "pooling_mode_mean_tokens": true, "pooling_mode_max_tokens": false,
                "pooling_mode_mean_sqrt_len_tokens": false}),
    )?;
    let special = |token: &str, id: usize| {
        json!({"id": id, "content": token, "single_word": false, "lstrip": false,
               "rstrip": false, "normalized": false, "special": true})
    };
    write_json(
        &dir.join("tokenizer.json"),
        &json!({
            "version": "1.0",
            // Deliberately different from the model's limit: the backend must override it.
            "truncation": {"direction": "Right", "max_length": 128, "strategy": "LongestFirst", "stride": 0},
            "padding": {"strategy": {"Fixed": 128}, "direction": "Right", "pad_to_multiple_of": null,
                        "pad_id": 0, "pad_type_id": 0, "pad_token": "[PAD]"},
            "added_tokens": specials.iter().enumerate().map(|(id, token)| special(token, id)).collect::<Vec<_>>(),
            "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
                           "strip_accents": null, "lowercase": true},
            "pre_tokenizer": {"type": "BertPreTokenizer"},
            "post_processor": {
                "type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                           {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                         {"SpecialToken": {"id": "[SEP]", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}},
                         {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
                "special_tokens": {
                    "[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                    "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}
                }
            },
            "decoder": null,
            "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                      "max_input_chars_per_word": 100, "vocab": vocab}
        }),
    )?;
    let mut weights = SafeTensors::new(seed);
    weights.random("embeddings.word_embeddings.weight", &[vocab_size, hidden], 0.5);
    weights.random("embeddings.position_embeddings.weight", &[positions, hidden], 0.1);
    weights.random("embeddings.token_type_embeddings.weight", &[2, hidden], 0.1);
    weights.constant("embeddings.LayerNorm.weight", &[hidden], 1.0);
    weights.constant("embeddings.LayerNorm.bias", &[hidden], 0.0);
    for layer in 0..layers {
        let base = format!("encoder.layer.{layer}");
        for (name, rows, cols) in [
            ("attention.self.query", hidden, hidden),
            ("attention.self.key", hidden, hidden),
            ("attention.self.value", hidden, hidden),
            ("attention.output.dense", hidden, hidden),
            ("intermediate.dense", intermediate, hidden),
            ("output.dense", hidden, intermediate),
        ] {
            weights.random(&format!("{base}.{name}.weight"), &[rows, cols], 0.2);
            weights.random(&format!("{base}.{name}.bias"), &[rows], 0.05);
        }
        for norm in ["attention.output.LayerNorm", "output.LayerNorm"] {
            weights.constant(&format!("{base}.{norm}.weight"), &[hidden], 1.0);
            weights.constant(&format!("{base}.{norm}.bias"), &[hidden], 0.0);
        }
    }
    weights.write(&dir.join("model.safetensors"))
}

/// Writes a Qwen3-Embedding-style folder (1024-dim, one layer, WordLevel
/// tokenizer over [`TINY_WORDS`] plus `<|endoftext|>`, bare tensor names as
/// in the published checkpoints) with weights drawn from `seed`.
pub fn write_tiny_qwen3(dir: &Path, seed: u64) -> Result<()> {
    let (hidden, heads, kv_heads, head_dim, intermediate) = (TINY_QWEN3_DIM, 2, 1, 64, 64);
    let specials = ["<|endoftext|>", "[UNK]"];
    let vocab = vocab(&specials);
    let vocab_size = vocab.len();
    write_json(
        &dir.join("config.json"),
        &json!({
            "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": vocab_size,
            "hidden_size": hidden, "intermediate_size": intermediate, "num_hidden_layers": 1,
            "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": head_dim,
            "attention_bias": false, "max_position_embeddings": 128, "sliding_window": null,
            "max_window_layers": 1, "tie_word_embeddings": true, "rope_theta": 1000000.0,
            "rms_norm_eps": 1e-6, "use_sliding_window": false, "hidden_act": "silu"
        }),
    )?;
    write_json(
        &dir.join("tokenizer.json"),
        &json!({
            "version": "1.0", "truncation": null, "padding": null,
            "added_tokens": [{"id": 0, "content": "<|endoftext|>", "single_word": false, "lstrip": false,
                              "rstrip": false, "normalized": false, "special": true}],
            "normalizer": {"type": "Lowercase"},
            "pre_tokenizer": {"type": "Whitespace"},
            "post_processor": {
                "type": "TemplateProcessing",
                "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}],
                "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 0}},
                         {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}],
                "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [0], "tokens": ["<|endoftext|>"]}}
            },
            "decoder": null,
            "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"}
        }),
    )?;
    let mut weights = SafeTensors::new(seed);
    weights.random("embed_tokens.weight", &[vocab_size, hidden], 0.5);
    let base = "layers.0";
    weights.random(&format!("{base}.self_attn.q_proj.weight"), &[heads * head_dim, hidden], 0.05);
    weights.random(&format!("{base}.self_attn.k_proj.weight"), &[kv_heads * head_dim, hidden], 0.05);
    weights.random(&format!("{base}.self_attn.v_proj.weight"), &[kv_heads * head_dim, hidden], 0.05);
    weights.random(&format!("{base}.self_attn.o_proj.weight"), &[hidden, heads * head_dim], 0.05);
    weights.constant(&format!("{base}.self_attn.q_norm.weight"), &[head_dim], 1.0);
    weights.constant(&format!("{base}.self_attn.k_norm.weight"), &[head_dim], 1.0);
    weights.random(&format!("{base}.mlp.gate_proj.weight"), &[intermediate, hidden], 0.05);
    weights.random(&format!("{base}.mlp.up_proj.weight"), &[intermediate, hidden], 0.05);
    weights.random(&format!("{base}.mlp.down_proj.weight"), &[hidden, intermediate], 0.05);
    weights.constant(&format!("{base}.input_layernorm.weight"), &[hidden], 1.0);
    weights.constant(&format!("{base}.post_attention_layernorm.weight"), &[hidden], 1.0);
    weights.constant("norm.weight", &[hidden], 1.0);
    weights.write(&dir.join("model.safetensors"))
}
