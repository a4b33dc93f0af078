//! Criterion benches of `cairn-memory-vector`: search, insert, MMR, decay.
//!
//! Inputs are seeded synthetic clustered unit vectors (384 dimensions, the
//! MiniLM width) at 10k and 100k rows; the real-embedding comparison with
//! FAISS and hnswlib is `tools/ann_bench.rs` (see BENCHMARKS.md).
//!
//! ```sh
//! cargo bench --bench memory_vector
//! ```

use std::hint::black_box;

use cairn_memory_vector::{
    DecayInput, FlatIndex, HnswConfig, HnswIndex, MmrCandidate, VectorIndex, decay_score, mmr, rank_by_decay,
};
use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const DIM: usize = 384;
const SIZES: [usize; 2] = [10_000, 100_000];

/// `n` vectors around 64 random centres, plus 100 queries from the same mix.
fn clustered(n: usize, seed: u64) -> (Vec<Vec<f32>>, Vec<Vec<f32>>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let centres: Vec<Vec<f32>> = (0..64).map(|_| (0..DIM).map(|_| rng.random_range(-1.0f32..1.0)).collect()).collect();
    let sample = |rng: &mut StdRng| {
        let centre = &centres[rng.random_range(0..centres.len())];
        centre.iter().map(|c| c + rng.random_range(-0.6f32..0.6)).collect::<Vec<f32>>()
    };
    let base = (0..n).map(|_| sample(&mut rng)).collect();
    let queries = (0..100).map(|_| sample(&mut rng)).collect();
    (base, queries)
}

fn rows(base: &[Vec<f32>]) -> Vec<(u64, &[f32])> {
    base.iter().enumerate().map(|(i, v)| (i as u64, v.as_slice())).collect()
}

fn search(c: &mut Criterion) {
    let mut group = c.benchmark_group("search_top10");
    group.sample_size(20);
    for n in SIZES {
        let (base, queries) = clustered(n, 42);
        let mut flat = FlatIndex::new(DIM).unwrap().with_parallel_threshold(usize::MAX);
        flat.add_batch(&rows(&base)).unwrap();
        let mut q = 0;
        group.bench_with_input(BenchmarkId::new("flat_1thread", n), &n, |b, _| {
            b.iter(|| {
                q = (q + 1) % queries.len();
                black_box(flat.search(&queries[q], 10).unwrap())
            })
        });
        let hnsw = HnswIndex::build(DIM, HnswConfig::default(), &rows(&base)).unwrap();
        group.bench_with_input(BenchmarkId::new("hnsw_m16_ef64", n), &n, |b, _| {
            b.iter(|| {
                q = (q + 1) % queries.len();
                black_box(hnsw.search(&queries[q], 10).unwrap())
            })
        });
    }
    group.finish();
}

fn insert(c: &mut Criterion) {
    let mut group = c.benchmark_group("insert_one");
    group.sample_size(20);
    let n = SIZES[0];
    let (base, extra) = clustered(n, 7);
    let mut flat = FlatIndex::new(DIM).unwrap();
    flat.add_batch(&rows(&base)).unwrap();
    let mut next = n as u64;
    group.bench_function(BenchmarkId::new("flat", n), |b| {
        b.iter(|| {
            next += 1;
            flat.add(next, &extra[next as usize % extra.len()]).unwrap();
        })
    });
    let mut hnsw = HnswIndex::build(DIM, HnswConfig::default(), &rows(&base)).unwrap();
    group.bench_function(BenchmarkId::new("hnsw_m16_efc200", n), |b| {
        b.iter(|| {
            next += 1;
            hnsw.add(next, &extra[next as usize % extra.len()]).unwrap();
        })
    });
    group.bench_function(BenchmarkId::new("hnsw_bulk_build_2k", 2_000), |b| {
        b.iter_batched(
            || rows(&base[..2_000]),
            |items| black_box(HnswIndex::build(DIM, HnswConfig::default(), &items).unwrap()),
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

const WORDS: &[&str] = &[
    "memory",
    "index",
    "search",
    "vector",
    "cosine",
    "graph",
    "layer",
    "query",
    "result",
    "ranking",
    "decay",
    "user",
    "project",
    "preference",
    "session",
    "context",
    "budget",
    "skill",
    "hook",
    "lesson",
    "note",
    "build",
    "test",
];

fn texts(n: usize, seed: u64) -> Vec<(f32, String)> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let len = rng.random_range(8..40);
            let text: Vec<&str> = (0..len).map(|_| WORDS[rng.random_range(0..WORDS.len())]).collect();
            (rng.random_range(0.0f32..1.0), text.join(" "))
        })
        .collect()
}

fn ranking(c: &mut Criterion) {
    let mut group = c.benchmark_group("ranking");
    for n in [100usize, 1_000] {
        let owned = texts(n, 3);
        let candidates: Vec<MmrCandidate<'_>> =
            owned.iter().map(|(relevance, text)| MmrCandidate { relevance: *relevance, text }).collect();
        group.bench_with_input(BenchmarkId::new("mmr_limit8", n), &n, |b, _| {
            b.iter(|| black_box(mmr(&candidates, 0.6, 8)))
        });
    }
    let mut rng = StdRng::seed_from_u64(5);
    let items: Vec<DecayInput> = (0..10_000u64)
        .map(|id| DecayInput {
            id,
            cosine: rng.random_range(0.0..1.0),
            importance: rng.random_range(0.0..1.0),
            age_days: rng.random_range(0.0..400.0),
        })
        .collect();
    for n in [1_000usize, 10_000] {
        group.bench_with_input(BenchmarkId::new("rank_by_decay", n), &n, |b, &n| {
            b.iter(|| black_box(rank_by_decay(&items[..n])))
        });
    }
    group.bench_function("decay_score", |b| {
        let mut i = 0usize;
        b.iter(|| {
            i = (i + 1) % items.len();
            let m = &items[i];
            black_box(decay_score(m.cosine, m.importance, m.age_days))
        })
    });
    group.finish();
}

criterion_group!(benches, search, insert, ranking);
criterion_main!(benches);
