//! Speed and memory of the in-process embedder, measured the way the peer
//! script `embed_bench.py` measures onnxruntime: on `corpus_1k.jsonl`,
//! batch-1 latency per sentence (tokenization included) and batch-32
//! throughput over all sentences (sorted by length, then batched), repeated
//! `--runs` times; one JSON line per run, then the medians.
//!
//! ```sh
//! cargo run --release -p cairn-tools --bin embed_bench -- \
//!     --model ~/.local/share/cairn/models/all-MiniLM-L6-v2 \
//!     --corpus ../shared/tools/peers/data/corpus_1k.jsonl --runs 3
//! ```
//! Threads: the embedder uses `RAYON_NUM_THREADS` (default: all cores).
//! `--only b1` or `--only bs` runs one of the two measures (for profiling).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context as _, bail};
use cairn_embedder::{CandleBert, EmbeddingBackend};
use serde_json::json;

fn percentile(sorted: &[f64], q: f64) -> f64 {
    let k = (sorted.len() - 1) as f64 * q;
    let (lo, hi) = (k.floor() as usize, (k.floor() as usize + 1).min(sorted.len() - 1));
    sorted[lo] + (sorted[hi] - sorted[lo]) * (k - lo as f64)
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    percentile(values, 0.5)
}

fn rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn main() -> anyhow::Result<()> {
    let mut model = std::env::var_os("CAIRN_EMBED_MODEL_PATH").map(PathBuf::from);
    let mut corpus = PathBuf::from("../shared/tools/peers/data/corpus_1k.jsonl");
    let (mut runs, mut n1, mut batch_size) = (3usize, 1000usize, 32usize);
    let mut only: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--model" => model = Some(PathBuf::from(value()?)),
            "--corpus" => corpus = PathBuf::from(value()?),
            "--runs" => runs = value()?.parse()?,
            "--n1" => n1 = value()?.parse()?,
            "--bs" => batch_size = value()?.parse()?,
            "--only" => {
                let part = value()?;
                if part != "b1" && part != "bs" {
                    bail!("--only takes b1 or bs, not {part}");
                }
                only = Some(part);
            }
            other => bail!("unknown flag {other}"),
        }
    }
    let model = model.context("pass --model DIR or set CAIRN_EMBED_MODEL_PATH")?;
    let texts: Vec<String> = std::fs::read_to_string(&corpus)
        .with_context(|| format!("reading {}", corpus.display()))?
        .lines()
        .map(|line| {
            Ok(serde_json::from_str::<serde_json::Value>(line)?["text"].as_str().unwrap_or_default().to_owned())
        })
        .collect::<anyhow::Result<_>>()?;
    let rss_before = rss_mb();
    let started = Instant::now();
    let embedder = CandleBert::load_with(&model, cairn_embedder::CandleBertOptions::default().max_batch(batch_size))?;
    let load_s = started.elapsed().as_secs_f64();
    // Warm-up.
    embedder.embed_batch(&texts.iter().take(64).map(String::as_str).collect::<Vec<_>>())?;

    let (mut p50s, mut throughputs) = (Vec::new(), Vec::new());
    for run in 0..runs {
        let (single, batched) = (only.as_deref() != Some("bs"), only.as_deref() != Some("b1"));
        let mut latencies: Vec<f64> = Vec::with_capacity(n1);
        for text in texts.iter().take(if single { n1 } else { 1 }) {
            let start = Instant::now();
            embedder.embed(text)?;
            latencies.push(start.elapsed().as_secs_f64() * 1e3);
        }
        latencies.sort_by(f64::total_cmp);
        let mean = latencies.iter().sum::<f64>() / latencies.len() as f64;
        let all: Vec<&str> = texts.iter().map(String::as_str).collect();
        let start = Instant::now();
        let vectors = if batched { embedder.embed_batch(&all)? } else { vec![Vec::new(); all.len()] };
        let batch_s = start.elapsed().as_secs_f64();
        assert_eq!(vectors.len(), texts.len());
        let throughput = texts.len() as f64 / batch_s;
        let p50 = percentile(&latencies, 0.5);
        p50s.push(p50);
        throughputs.push(throughput);
        println!(
            "{}",
            json!({
                "engine": "cairn-candle", "run": run, "threads": candle_threads(),
                "load_s": load_s, "b1_p50_ms": p50, "b1_p95_ms": percentile(&latencies, 0.95), "b1_mean_ms": mean,
                "bs": batch_size, "bs_sent_per_s": throughput, "rss_mb": rss_mb(), "rss_before_load_mb": rss_before,
            })
        );
    }
    println!(
        "{}",
        json!({"engine": "cairn-candle", "summary": "median", "b1_p50_ms": median(&mut p50s),
               "bs_sent_per_s": median(&mut throughputs), "rss_mb": rss_mb()})
    );
    Ok(())
}

/// Threads candle's CPU kernels use (it reads `RAYON_NUM_THREADS`, else the core count).
fn candle_threads() -> usize {
    std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
}
