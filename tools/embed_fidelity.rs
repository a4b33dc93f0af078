//! Fidelity of the in-process embedder against sentence-transformers:
//! cosine between Cairn's vector and the reference vector for every row of
//! the embed-ref set (`sentences.jsonl` + `vectors.jsonl`, and the long
//! texts), embedded both one at a time and in sorted batches of 32.
//!
//! ```sh
//! cargo run --release -p cairn-tools --bin embed_fidelity -- \
//!     --model ~/.local/share/cairn/models/all-MiniLM-L6-v2 --refs ../shared/evaldata/embed-ref
//! ```

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use cairn_embedder::{CandleBert, EmbeddingBackend, cosine};
use serde_json::{Value, json};

fn read_rows(path: &Path) -> anyhow::Result<Vec<Value>> {
    std::fs::read_to_string(path)
        .with_context(|| format!("reading {}", path.display()))?
        .lines()
        .map(|line| Ok(serde_json::from_str(line)?))
        .collect()
}

fn check(model: &CandleBert, refs: &Path, texts_file: &str, vectors_file: &str) -> anyhow::Result<Value> {
    let texts: Vec<String> = read_rows(&refs.join(texts_file))?
        .iter()
        .map(|row| row["text"].as_str().unwrap_or_default().to_owned())
        .collect();
    let vectors: Vec<Vec<f32>> = read_rows(&refs.join(vectors_file))?
        .iter()
        .map(|row| serde_json::from_value(row["vector"].clone()))
        .collect::<Result<_, _>>()?;
    if texts.len() != vectors.len() {
        bail!("{texts_file} and {vectors_file} differ in length");
    }
    let borrowed: Vec<&str> = texts.iter().map(String::as_str).collect();
    let batch = model.embed_batch(&borrowed)?;
    let (mut min_batch, mut min_single, mut sum) = (f32::MAX, f32::MAX, 0.0f64);
    for ((text, reference), batched) in texts.iter().zip(&vectors).zip(&batch) {
        let single = model.embed(text)?;
        let batch_cosine = cosine(reference, batched);
        min_batch = min_batch.min(batch_cosine);
        min_single = min_single.min(cosine(reference, &single));
        sum += f64::from(batch_cosine);
    }
    Ok(json!({
        "set": texts_file, "rows": texts.len(), "min_cosine_batch32": min_batch,
        "min_cosine_single": min_single, "mean_cosine_batch32": sum / texts.len() as f64,
        "all_at_least_0.9999": min_batch >= 0.9999 && min_single >= 0.9999,
    }))
}

fn main() -> anyhow::Result<()> {
    let mut model = std::env::var_os("CAIRN_EMBED_MODEL_PATH").map(PathBuf::from);
    let mut refs = PathBuf::from("../shared/evaldata/embed-ref");
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--model" => model = Some(PathBuf::from(value()?)),
            "--refs" => refs = PathBuf::from(value()?),
            other => bail!("unknown flag {other}"),
        }
    }
    let model = CandleBert::load(model.context("pass --model DIR or set CAIRN_EMBED_MODEL_PATH")?)?;
    println!("{}", check(&model, &refs, "sentences.jsonl", "vectors.jsonl")?);
    println!("{}", check(&model, &refs, "long-sentences.jsonl", "long-vectors.jsonl")?);
    Ok(())
}
