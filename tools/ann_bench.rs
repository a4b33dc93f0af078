//! Nearest-neighbour benchmark of `cairn-memory-vector` on real embeddings.
//!
//! Reads base and query vectors from `.npy` files (f32, row-major, C order),
//! builds each index, and prints one JSON line per configuration: recall@10
//! against the exact answer (a brute-force scan of every row, sharing no
//! code with either index), p50/p99 latency of single queries, QPS, build
//! seconds and index bytes.
//!
//! ```sh
//! cargo run --release -p cairn-tools --bin ann_bench -- \
//!     --base ../shared/tools/peers/data/emb_100k.npy \
//!     --queries ../shared/tools/peers/data/emb_queries_1k.npy \
//!     --n 10000 --index flat,hnsw --m 16 --ef 16,32,48,64,96 --build-threads 2 --pin 0
//! ```
//!
//! `--pin CPU` pins the query thread (after the build) with `taskset`, so
//! the build can use several cores while queries run on one, like the
//! peers' `taskset -c 0` runs. `--persist DIR` also snapshots the HNSW
//! index and measures a reload. `--sweep 1000,2000,5000` measures exact vs
//! HNSW latency at several sizes (the AutoIndex crossover).

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail, ensure};
use cairn_memory_vector::{FlatIndex, Hit, HnswConfig, HnswIndex, SnapshotExpectation, VectorIndex, dot, kernel_name};
use serde_json::json;

const K: usize = 10;

/// A row-major f32 matrix read from a `.npy` file.
struct Matrix {
    rows: usize,
    cols: usize,
    data: Vec<f32>,
}

impl Matrix {
    fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.cols..(i + 1) * self.cols]
    }
}

/// Reads a little-endian f32 C-order 2-D `.npy` file (format 1.0–3.0),
/// keeping at most `limit` rows.
fn read_npy(path: &Path, limit: usize) -> Result<Matrix> {
    let mut file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut magic = [0u8; 8];
    file.read_exact(&mut magic)?;
    ensure!(&magic[..6] == b"\x93NUMPY", "{} is not a .npy file", path.display());
    let header_len = if magic[6] == 1 {
        let mut b = [0u8; 2];
        file.read_exact(&mut b)?;
        u16::from_le_bytes(b) as usize
    } else {
        let mut b = [0u8; 4];
        file.read_exact(&mut b)?;
        u32::from_le_bytes(b) as usize
    };
    let mut header = vec![0u8; header_len];
    file.read_exact(&mut header)?;
    let header = String::from_utf8_lossy(&header);
    ensure!(header.contains("'descr': '<f4'"), "{}: need little-endian f32, header {header}", path.display());
    ensure!(header.contains("'fortran_order': False"), "{}: need C order", path.display());
    let shape = header.split("'shape': (").nth(1).and_then(|s| s.split(')').next()).context("no shape")?;
    let dims: Vec<usize> =
        shape.split(',').filter(|s| !s.trim().is_empty()).map(|s| s.trim().parse()).collect::<Result<_, _>>()?;
    ensure!(dims.len() == 2, "{}: need a 2-D array, shape {dims:?}", path.display());
    let (rows, cols) = (dims[0].min(limit), dims[1]);
    let mut bytes = vec![0u8; rows * cols * 4];
    file.read_exact(&mut bytes)?;
    let data = bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    Ok(Matrix { rows, cols, data })
}

struct Args {
    base: PathBuf,
    queries: PathBuf,
    n: usize,
    indexes: Vec<String>,
    m: usize,
    ef_construction: usize,
    ef: Vec<usize>,
    build_threads: usize,
    pin: Option<usize>,
    persist: Option<PathBuf>,
    sweep: Vec<usize>,
    runs: usize,
}

fn parse_list(s: &str) -> Result<Vec<usize>> {
    s.split(',').map(|x| x.trim().parse::<usize>().with_context(|| format!("bad number {x:?}"))).collect()
}

fn parse_args() -> Result<Args> {
    let peers = PathBuf::from("../shared/tools/peers/data");
    let mut args = Args {
        base: peers.join("emb_100k.npy"),
        queries: peers.join("emb_queries_1k.npy"),
        n: 10_000,
        indexes: vec!["flat".into(), "hnsw".into()],
        m: 16,
        ef_construction: 200,
        ef: vec![16, 32, 48, 64, 96, 128],
        build_threads: 2,
        pin: None,
        persist: None,
        sweep: Vec::new(),
        runs: 1,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--base" => args.base = value()?.into(),
            "--queries" => args.queries = value()?.into(),
            "--n" => args.n = value()?.parse()?,
            "--index" => args.indexes = value()?.split(',').map(str::to_owned).collect(),
            "--m" => args.m = value()?.parse()?,
            "--ef-construction" => args.ef_construction = value()?.parse()?,
            "--ef" => args.ef = parse_list(&value()?)?,
            "--build-threads" => args.build_threads = value()?.parse()?,
            "--pin" => args.pin = Some(value()?.parse()?),
            "--persist" => args.persist = Some(value()?.into()),
            "--sweep" => args.sweep = parse_list(&value()?)?,
            "--runs" => args.runs = value()?.parse()?,
            other => bail!("unknown flag {other}"),
        }
    }
    Ok(args)
}

fn rss_bytes() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<usize>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

fn pin_current_thread(cpu: usize) -> Result<()> {
    // The main thread's tid is the process id, so this pins only the
    // thread that runs the queries, not the rayon build pool.
    let status = std::process::Command::new("taskset")
        .args(["-pc", &cpu.to_string(), &std::process::id().to_string()])
        .stdout(std::process::Stdio::null())
        .status()
        .context("running taskset")?;
    ensure!(status.success(), "taskset failed");
    Ok(())
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    let pos = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[pos]
}

struct Timing {
    recall: f64,
    p50_us: f64,
    p99_us: f64,
    qps: f64,
}

/// Runs every query alone, `runs` times; reports the run with the median p50.
fn time_queries(
    queries: &Matrix,
    truth: &[Vec<u64>],
    runs: usize,
    mut search: impl FnMut(&[f32]) -> Vec<Hit>,
) -> Timing {
    let mut results = Vec::new();
    for _ in 0..runs.max(1) {
        let mut latencies = Vec::with_capacity(queries.rows);
        let mut found = 0usize;
        let wall = Instant::now();
        for (i, expected) in truth.iter().enumerate() {
            let start = Instant::now();
            let hits = search(queries.row(i));
            latencies.push(start.elapsed().as_secs_f64() * 1e6);
            let expected: HashSet<u64> = expected.iter().copied().collect();
            found += hits.iter().take(K).filter(|h| expected.contains(&h.id)).count();
        }
        let qps = queries.rows as f64 / wall.elapsed().as_secs_f64();
        latencies.sort_by(f64::total_cmp);
        results.push(Timing {
            recall: found as f64 / (truth.len() * K) as f64,
            p50_us: percentile(&latencies, 0.5),
            p99_us: percentile(&latencies, 0.99),
            qps,
        });
    }
    results.sort_by(|a, b| a.p50_us.total_cmp(&b.p50_us));
    results.swap_remove(results.len() / 2)
}

/// The exact top-`K` ids of each query among the first `n` base rows: every
/// row scored with [`dot`] after normalising both sides, ties broken by the
/// smaller id (the indexes' order), on the build pool.
fn brute_force_truth(base: &Matrix, n: usize, queries: &Matrix, pool: &rayon::ThreadPool) -> Vec<Vec<u64>> {
    use rayon::prelude::*;
    let unit = |v: &[f32]| -> Vec<f32> {
        let norm = v.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>().sqrt();
        v.iter().map(|&x| (f64::from(x) / norm) as f32).collect()
    };
    let rows: Vec<Vec<f32>> = (0..n).map(|i| unit(base.row(i))).collect();
    pool.install(|| {
        (0..queries.rows)
            .into_par_iter()
            .map(|q| {
                let query = unit(queries.row(q));
                let mut hits: Vec<Hit> =
                    rows.iter().enumerate().map(|(id, row)| Hit { id: id as u64, cosine: dot(&query, row) }).collect();
                if hits.len() > K {
                    hits.select_nth_unstable_by(K, Hit::rank_cmp);
                    hits.truncate(K);
                }
                hits.sort_by(Hit::rank_cmp);
                hits.iter().map(|h| h.id).collect()
            })
            .collect()
    })
}

fn build_hnsw(
    base: &Matrix,
    n: usize,
    config: HnswConfig,
    pool: &rayon::ThreadPool,
) -> Result<(HnswIndex, f64, usize)> {
    let rows: Vec<(u64, &[f32])> = (0..n).map(|i| (i as u64, base.row(i))).collect();
    let rss_before = rss_bytes();
    let start = Instant::now();
    let index = pool.install(|| HnswIndex::build(base.cols, config, &rows))?;
    let seconds = start.elapsed().as_secs_f64();
    Ok((index, seconds, rss_bytes().saturating_sub(rss_before)))
}

fn main() -> Result<()> {
    let args = parse_args()?;
    let max_n = args.sweep.iter().copied().max().unwrap_or(0).max(args.n);
    let base = read_npy(&args.base, max_n)?;
    let queries = read_npy(&args.queries, usize::MAX)?;
    ensure!(base.cols == queries.cols, "base and queries differ in dimension");
    ensure!(base.rows >= max_n, "base has {} rows, need {max_n}", base.rows);
    let dim = base.cols;
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    eprintln!("kernel {}, load {}", kernel_name(), load.trim());
    // The build pool's threads are started before the main (query) thread
    // is pinned, so they keep every core.
    let pool = rayon::ThreadPoolBuilder::new().num_threads(args.build_threads).build()?;
    pool.broadcast(|_| ());
    if let Some(cpu) = args.pin {
        pin_current_thread(cpu)?;
    }

    if !args.sweep.is_empty() {
        return sweep(&args, &base, &queries, &pool);
    }

    let n = args.n;
    // Exact answers by scoring every row, independently of either index.
    let truth = brute_force_truth(&base, n, &queries, &pool);
    let rss_before = rss_bytes();
    let start = Instant::now();
    let mut flat = FlatIndex::new(dim)?.with_parallel_threshold(usize::MAX);
    let rows: Vec<(u64, &[f32])> = (0..n).map(|i| (i as u64, base.row(i))).collect();
    flat.add_batch(&rows)?;
    let flat_build = start.elapsed().as_secs_f64();
    let flat_rss = rss_bytes().saturating_sub(rss_before);

    let mut hnsw = None;
    if args.indexes.iter().any(|s| s == "hnsw") {
        let config = HnswConfig { m: args.m, ef_construction: args.ef_construction, ..HnswConfig::default() };
        let (index, seconds, rss) = build_hnsw(&base, n, config, &pool)?;
        hnsw = Some((index, seconds, rss));
    }

    if args.indexes.iter().any(|s| s == "flat") {
        let t = time_queries(&queries, &truth, args.runs, |q| flat.search(q, K).expect("valid query"));
        println!(
            "{}",
            json!({
                "lib": "cairn-flat", "n": n, "dim": dim, "kernel": kernel_name(),
                "recall_at_10": t.recall, "p50_us": t.p50_us, "p99_us": t.p99_us, "qps": t.qps,
                "build_s": flat_build, "index_bytes": flat.memory_bytes(), "rss_delta_bytes": flat_rss,
            })
        );
    }

    if let Some((mut index, build_s, rss)) = hnsw {
        let bytes = index.memory_bytes();
        for &ef in &args.ef {
            index.set_ef_search(ef);
            let t = time_queries(&queries, &truth, args.runs, |q| index.search(q, K).expect("valid query"));
            println!(
                "{}",
                json!({
                    "lib": "cairn-hnsw", "n": n, "dim": dim, "m": args.m, "ef_construction": args.ef_construction,
                    "ef": ef, "build_threads": args.build_threads, "kernel": kernel_name(),
                    "recall_at_10": t.recall, "p50_us": t.p50_us, "p99_us": t.p99_us, "qps": t.qps,
                    "build_s": build_s, "index_bytes": bytes, "rss_delta_bytes": rss,
                })
            );
        }
        if let Some(dir) = &args.persist {
            std::fs::create_dir_all(dir)?;
            let path = dir.join(format!("bench-{n}.cvi"));
            let start = Instant::now();
            let header = index.snapshot(&path, "all-MiniLM-L6-v2/384")?;
            let save_s = start.elapsed().as_secs_f64();
            let expected = SnapshotExpectation::from_ids("all-MiniLM-L6-v2/384", dim, 0..n as u64);
            let start = Instant::now();
            let restored = HnswIndex::restore(&path, &expected)?;
            let load_s = start.elapsed().as_secs_f64();
            ensure!(restored.len() == header.count);
            let files: u64 = std::fs::read_dir(dir)?
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(&format!("bench-{n}.cvi")))
                .map(|e| e.metadata().map_or(0, |m| m.len()))
                .sum();
            println!(
                "{}",
                json!({"lib": "cairn-hnsw-persist", "n": n, "save_s": save_s, "reload_s": load_s, "file_bytes": files})
            );
        }
    }
    Ok(())
}

/// Exact vs HNSW single-query latency at several sizes: the AutoIndex crossover.
fn sweep(args: &Args, base: &Matrix, queries: &Matrix, pool: &rayon::ThreadPool) -> Result<()> {
    for &n in &args.sweep {
        let mut flat = FlatIndex::new(base.cols)?.with_parallel_threshold(usize::MAX);
        let rows: Vec<(u64, &[f32])> = (0..n).map(|i| (i as u64, base.row(i))).collect();
        flat.add_batch(&rows)?;
        let truth = brute_force_truth(base, n, queries, pool);
        let config = HnswConfig { m: args.m, ef_construction: args.ef_construction, ..HnswConfig::default() };
        let (mut hnsw, build_s, _) = build_hnsw(base, n, config, pool)?;
        let exact = time_queries(queries, &truth, args.runs, |q| flat.search(q, K).expect("valid query"));
        // The smallest ef reaching recall 0.99.
        let mut best = None;
        for &ef in &args.ef {
            hnsw.set_ef_search(ef);
            let t = time_queries(queries, &truth, args.runs, |q| hnsw.search(q, K).expect("valid query"));
            if t.recall >= 0.99 {
                best = Some((ef, t));
                break;
            }
        }
        let (ef, t) = best.context("no ef reached recall 0.99")?;
        println!(
            "{}",
            json!({
                "sweep_n": n, "flat_p50_us": exact.p50_us, "hnsw_p50_us": t.p50_us, "hnsw_ef": ef,
                "hnsw_recall_at_10": t.recall, "hnsw_build_s": build_s,
            })
        );
    }
    Ok(())
}
