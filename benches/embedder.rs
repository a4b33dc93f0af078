//! Criterion benches of the in-process embedder on the committed peer
//! corpus: batch-1 latency (tokenization included) and batch-32 throughput.
//!
//! Runs on all-MiniLM-L6-v2 when it is installed (`CAIRN_EMBED_MODEL_PATH`,
//! else `<data dir>/cairn/models/all-MiniLM-L6-v2`); otherwise on a tiny
//! seeded BERT so the bench always compiles and runs. The numbers compared
//! with onnxruntime in BENCHMARKS.md come from `tools/embed_bench.rs`,
//! which mirrors the peer script's protocol exactly.

use std::hint::black_box;
use std::path::PathBuf;

use cairn_embedder::{CandleBert, EmbeddingBackend};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const CORPUS: &str = include_str!("../crates/embedder/test_data/embed_ref_sample.jsonl");

fn texts() -> Vec<String> {
    CORPUS
        .lines()
        .map(|line| {
            let row: serde_json::Value = serde_json::from_str(line).expect("test data rows are JSON");
            row["text"].as_str().expect("rows have text").to_owned()
        })
        .collect()
}

fn model() -> (Option<tempfile::TempDir>, PathBuf, &'static str) {
    let installed = std::env::var_os("CAIRN_EMBED_MODEL_PATH")
        .map(PathBuf::from)
        .or_else(|| dirs::data_dir().map(|data| data.join("cairn/models/all-MiniLM-L6-v2")))
        .filter(|dir| dir.join("model.safetensors").is_file());
    match installed {
        Some(dir) => (None, dir, "minilm"),
        None => {
            eprintln!("all-MiniLM-L6-v2 not installed: benchmarking a tiny seeded BERT instead");
            let temp = tempfile::tempdir().expect("a temp dir");
            let dir = temp.path().join("tiny-bert");
            cairn_embedder::testing::write_tiny_bert(&dir, 1).expect("writing the tiny model");
            (Some(temp), dir, "tiny")
        }
    }
}

fn bench_embedder(c: &mut Criterion) {
    let (_temp, dir, label) = model();
    let embedder = CandleBert::load(&dir).expect("loading the model");
    // 32 texts: the sample rows repeated.
    let sample = texts();
    let batch: Vec<&str> = sample.iter().cycle().take(32).map(String::as_str).collect();

    let mut group = c.benchmark_group(format!("embedder/{label}"));
    group.sample_size(20);
    group.throughput(Throughput::Elements(1));
    group.bench_function("batch1", |b| {
        let mut index = 0;
        b.iter(|| {
            index = (index + 1) % sample.len();
            black_box(embedder.embed(&sample[index]).expect("embedding"))
        })
    });
    group.throughput(Throughput::Elements(batch.len() as u64));
    group.bench_function("batch32", |b| b.iter(|| black_box(embedder.embed_batch(&batch).expect("embedding"))));
    group.finish();
}

criterion_group!(benches, bench_embedder);
criterion_main!(benches);
