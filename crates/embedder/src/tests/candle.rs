//! The candle backends on tiny seeded models, and fidelity on the real
//! model when it is installed.

use std::path::PathBuf;

use crate::testing::{TINY_BERT_DIM, TINY_QWEN3_DIM, write_tiny_bert, write_tiny_qwen3};
use crate::{CandleBert, EmbedError, EmbeddingBackend, ModelInfo, ModelKind, Pooling, Qwen3Embedder, cosine};

fn tiny_bert() -> (tempfile::TempDir, CandleBert) {
    let dir = tempfile::tempdir().unwrap();
    let model_dir = dir.path().join("tiny-bert");
    write_tiny_bert(&model_dir, 7).unwrap();
    let model = CandleBert::load(&model_dir).unwrap();
    (dir, model)
}

fn assert_unit(vector: &[f32]) {
    let norm: f32 = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-4, "norm {norm}");
}

#[test]
fn tiny_bert_loads_and_embeds_deterministically() {
    let (_dir, model) = tiny_bert();
    assert_eq!(model.model_id(), "tiny-bert");
    assert_eq!(model.dim(), TINY_BERT_DIM);
    assert_eq!(model.pooling(), Pooling::Mean);
    let vector = model.embed("the cat sat on the mat").unwrap();
    assert_eq!(vector.len(), TINY_BERT_DIM);
    assert_unit(&vector);
    assert_eq!(vector, model.embed("the cat sat on the mat").unwrap());
    assert!(cosine(&vector, &model.embed("rust model vector search").unwrap()) < 0.9999);
}

#[test]
fn padded_batches_give_the_same_vectors_as_single_texts() {
    let (_dir, model) = tiny_bert();
    let texts = ["cat", "the dog sat on a mat and the cat sat", "", "memory skill hook", "fast"];
    let batch = model.embed_batch(&texts).unwrap();
    assert_eq!(batch.len(), texts.len());
    for (text, vector) in texts.iter().zip(&batch) {
        let single = model.embed(text).unwrap();
        assert!(cosine(&single, vector) > 0.99999, "{text:?}");
    }
    assert!(model.embed_batch(&[]).unwrap().is_empty());
}

#[test]
fn texts_are_truncated_at_max_seq_length_not_at_the_tokenizer_file_setting() {
    let (_dir, model) = tiny_bert();
    // max_seq_length 16 = [CLS] + 14 words + [SEP].
    let words: Vec<&str> = crate::testing::TINY_WORDS.iter().copied().cycle().take(40).collect();
    let first14 = words[..14].join(" ");
    let long = words.join(" ");
    let truncated = model.embed(&long).unwrap();
    assert!(cosine(&truncated, &model.embed(&first14).unwrap()) > 0.99999);
    assert!(cosine(&truncated, &model.embed(&words[..13].join(" ")).unwrap()) < 0.99999);
}

#[test]
fn cls_pooling_is_honoured() {
    let dir = tempfile::tempdir().unwrap();
    let model_dir = dir.path().join("tiny-cls");
    write_tiny_bert(&model_dir, 7).unwrap();
    std::fs::write(
        model_dir.join("1_Pooling/config.json"),
        r#"{"word_embedding_dimension": 32, "pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false}"#,
    )
    .unwrap();
    let cls = CandleBert::load(&model_dir).unwrap();
    assert_eq!(cls.pooling(), Pooling::Cls);
    let (_other, mean) = tiny_bert();
    let text = "cairn agent memory";
    assert!(cosine(&cls.embed(text).unwrap(), &mean.embed(text).unwrap()) < 0.9999);
}

#[test]
fn broken_model_folders_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let model_dir = dir.path().join("m");
    write_tiny_bert(&model_dir, 1).unwrap();
    std::fs::remove_file(model_dir.join("model.safetensors")).unwrap();
    let error = CandleBert::load(&model_dir).unwrap_err();
    assert!(
        matches!(error, EmbedError::ModelFiles { ref reason, .. } if reason.contains("model.safetensors")),
        "{error}"
    );

    write_tiny_bert(&model_dir, 1).unwrap();
    std::fs::write(model_dir.join("model.safetensors"), b"not safetensors").unwrap();
    let error = CandleBert::load(&model_dir).unwrap_err();
    assert!(matches!(error, EmbedError::ModelFiles { ref reason, .. } if reason.contains("safetensors")), "{error}");

    write_tiny_bert(&model_dir, 1).unwrap();
    std::fs::write(model_dir.join("1_Pooling/config.json"), r#"{"pooling_mode_max_tokens": true}"#).unwrap();
    let error = CandleBert::load(&model_dir).unwrap_err();
    assert!(matches!(error, EmbedError::ModelFiles { ref reason, .. } if reason.contains("pooling")), "{error}");

    write_tiny_bert(&model_dir, 1).unwrap();
    std::fs::write(model_dir.join("config.json"), b"{").unwrap();
    assert!(matches!(CandleBert::load(&model_dir).unwrap_err(), EmbedError::Json { .. }));

    let error = CandleBert::load(dir.path().join("absent")).unwrap_err();
    assert!(matches!(error, EmbedError::Io { .. }), "{error}");
}

#[test]
fn model_info_dispatches_on_model_type_and_loads_lazily() {
    let dir = tempfile::tempdir().unwrap();
    let bert_dir = dir.path().join("tiny-bert");
    write_tiny_bert(&bert_dir, 3).unwrap();
    let info = ModelInfo::read(&bert_dir).unwrap();
    assert_eq!((info.kind, info.dim, info.model_id.as_str()), (ModelKind::Bert, TINY_BERT_DIM, "tiny-bert"));
    let lazy = info.lazy();
    lazy.wait_ready(std::time::Duration::from_secs(60)).unwrap();
    assert_eq!(lazy.embed("cat").unwrap().len(), TINY_BERT_DIM);

    let other = dir.path().join("gpt");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("config.json"), r#"{"model_type": "gpt2", "hidden_size": 8}"#).unwrap();
    let error = ModelInfo::read(&other).unwrap_err();
    assert!(matches!(error, EmbedError::ModelFiles { ref reason, .. } if reason.contains("gpt2")), "{error}");
}

#[test]
fn qwen3_pools_the_last_token_with_query_instructions_at_1024_dims() {
    let dir = tempfile::tempdir().unwrap();
    let model_dir = dir.path().join("tiny-qwen3");
    write_tiny_qwen3(&model_dir, 11).unwrap();
    let info = ModelInfo::read(&model_dir).unwrap();
    assert_eq!((info.kind, info.dim), (ModelKind::Qwen3, TINY_QWEN3_DIM));
    let model = Qwen3Embedder::load(&model_dir).unwrap();
    assert_eq!(model.dim(), 1024);

    let document = model.embed("the cat sat on the mat").unwrap();
    assert_eq!(document.len(), 1024);
    assert_unit(&document);
    assert_eq!(document, model.embed("the cat sat on the mat").unwrap());
    let batch = model.embed_batch(&["cat", "the cat sat on the mat"]).unwrap();
    assert!(cosine(&batch[1], &document) > 0.99999);
    assert!(cosine(&batch[0], &document) < 0.9999);

    let query = model.embed_query("the cat sat on the mat").unwrap();
    assert_unit(&query);
    assert!(cosine(&query, &document) < 0.9999, "the instruction prefix changes the input");
    assert_eq!(crate::format_query("Find cats", "mat"), "Instruct: Find cats\nQuery:mat",);

    // The loader path through ModelInfo yields the same vectors.
    let loaded = info.load().unwrap();
    assert_eq!(loaded.embed("the cat sat on the mat").unwrap(), document);
}

// ---- fidelity on the real model -------------------------------------------

/// The installed all-MiniLM-L6-v2, if any: `CAIRN_EMBED_MODEL_PATH`, else
/// the binary's default install location.
fn real_model_dir() -> Option<PathBuf> {
    let candidates = [
        std::env::var_os("CAIRN_EMBED_MODEL_PATH").map(PathBuf::from),
        std::env::var_os("CAIRN_HOME").map(|home| PathBuf::from(home).join("models/all-MiniLM-L6-v2")),
        dirs::data_dir().map(|data| data.join("cairn/models/all-MiniLM-L6-v2")),
    ];
    candidates.into_iter().flatten().find(|dir| dir.join("model.safetensors").is_file())
}

/// `Some(dir)` when the real model is installed. When it is not, the test
/// fails under `CI=true` (CI must run the fidelity check, not pass it
/// silently) and otherwise says once on stderr that it is skipped.
fn require_model(dir: Option<PathBuf>) -> Option<PathBuf> {
    use std::io::Write as _;
    if dir.is_some() {
        return dir;
    }
    let message = "all-MiniLM-L6-v2 is not installed (run `cairn model fetch` or set CAIRN_EMBED_MODEL_PATH)";
    if std::env::var("CI").is_ok_and(|value| value.eq_ignore_ascii_case("true")) {
        panic!("CI=true and {message}");
    }
    // Straight to stderr, past the test harness's capture, so the skip is seen.
    let _ = writeln!(std::io::stderr(), "SKIPPED fidelity check: {message}");
    None
}

#[derive(serde::Deserialize)]
struct Reference {
    text: String,
    vector: Vec<f32>,
}

#[test]
fn real_model_matches_sentence_transformers_reference_vectors() {
    let Some(dir) = require_model(real_model_dir()) else { return };
    let model = CandleBert::load(&dir).unwrap();
    let data = include_str!("../../test_data/embed_ref_sample.jsonl");
    let references: Vec<Reference> = data.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert!(references.len() >= 8);
    let texts: Vec<&str> = references.iter().map(|reference| reference.text.as_str()).collect();
    let batch = model.embed_batch(&texts).unwrap();
    let mut worst = 1.0f32;
    for (reference, vector) in references.iter().zip(&batch) {
        let batch_cosine = cosine(&reference.vector, vector);
        let single_cosine = cosine(&reference.vector, &model.embed(&reference.text).unwrap());
        worst = worst.min(batch_cosine).min(single_cosine);
        assert!(
            batch_cosine >= 0.9999 && single_cosine >= 0.9999,
            "{batch_cosine} / {single_cosine}: {}",
            reference.text
        );
    }
    println!("fidelity on {} reference vectors from {}: min cosine {worst}", references.len(), dir.display());
}

// ---- the hand-tuned forward pass against candle's own BERT ----------------

/// candle-transformers' `BertModel` on the same folder, one text at a time,
/// mean-pooled and L2-normalised: the reference implementation the packed,
/// fused forward pass of [`CandleBert`] is held to.
fn candle_transformers_vectors(dir: &std::path::Path, texts: &[&str]) -> Vec<Vec<f32>> {
    use candle_core::{DType, Device, Tensor};
    use candle_transformers::models::bert::{BertModel, Config};
    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("config.json")).unwrap()).unwrap();
    let fields = config.as_object_mut().unwrap();
    // Training-only fields candle's config requires.
    fields.entry("hidden_dropout_prob").or_insert(serde_json::json!(0.0));
    fields.entry("initializer_range").or_insert(serde_json::json!(0.02));
    let config: Config = serde_json::from_value(config).unwrap();
    let sentence: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("sentence_bert_config.json")).unwrap()).unwrap();
    let max_tokens = sentence["max_seq_length"].as_u64().unwrap() as usize;
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let weights = candle_nn::VarBuilder::from_buffered_safetensors(bytes, DType::F32, &Device::Cpu).unwrap();
    let model = BertModel::load(weights, &config).unwrap();
    let tokenizer = crate::candle::tokenize::load_tokenizer(dir, max_tokens).unwrap();
    texts
        .iter()
        .map(|text| {
            let ids = tokenizer.encode(*text, true).unwrap().get_ids().to_vec();
            let input = Tensor::new(ids.as_slice(), &Device::Cpu).unwrap().unsqueeze(0).unwrap();
            let types = input.zeros_like().unwrap();
            let states = model.forward(&input, &types, None).unwrap();
            let mean = (states.sum(1).unwrap() / ids.len() as f64).unwrap();
            let mut vector: Vec<f32> = mean.squeeze(0).unwrap().to_vec1().unwrap();
            crate::l2_normalize(&mut vector);
            vector
        })
        .collect()
}

/// Min cosine between candle-transformers' vectors and [`CandleBert`]'s,
/// single and batched.
fn min_cosine_against_candle(dir: &std::path::Path, texts: &[&str]) -> f32 {
    let model = CandleBert::load(dir).unwrap();
    let reference = candle_transformers_vectors(dir, texts);
    let batch = model.embed_batch(texts).unwrap();
    let mut worst = 1.0f32;
    for ((text, expected), batched) in texts.iter().zip(&reference).zip(&batch) {
        worst = worst.min(cosine(expected, batched)).min(cosine(expected, &model.embed(text).unwrap()));
    }
    worst
}

#[test]
fn hand_tuned_forward_matches_candle_transformers_bert_on_the_tiny_model() {
    let dir = tempfile::tempdir().unwrap();
    let model_dir = dir.path().join("tiny-bert");
    write_tiny_bert(&model_dir, 5).unwrap();
    let long: String = crate::testing::TINY_WORDS.iter().copied().cycle().take(40).collect::<Vec<_>>().join(" ");
    // Enough texts for the chunks to run in parallel, and one past the
    // 16-token limit.
    let mut texts = vec!["cat", "the dog sat on a mat and the cat sat", "memory skill hook", long.as_str()];
    texts.extend(["rust model vector search"; 9]);
    let worst = min_cosine_against_candle(&model_dir, &texts);
    assert!(worst >= 0.99999, "min cosine {worst}");
}

#[test]
fn hand_tuned_forward_matches_candle_transformers_bert_on_the_real_model() {
    let Some(dir) = require_model(real_model_dir()) else { return };
    let data = include_str!("../../test_data/embed_ref_sample.jsonl");
    let references: Vec<Reference> = data.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    let texts: Vec<&str> = references.iter().map(|reference| reference.text.as_str()).collect();
    let worst = min_cosine_against_candle(&dir, &texts);
    assert!(worst >= 0.9999, "min cosine {worst}");
    println!("hand-tuned vs candle-transformers BERT on {} texts: min cosine {worst}", texts.len());
}
