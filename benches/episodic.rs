//! Episodic recall latency: `episodic_context` with the query vector given
//! (so the embedder's cost is not measured), pure-vector and hybrid, on
//! stores of 10,000 and 100,000 rows, plus the first search after opening
//! a 100,000-row store (exact scan while the index builds).
//!
//! Rows are synthetic sentences over a 2,000-word vocabulary, embedded by
//! the 384-wide word-vector embedder (unrelated sentences near-orthogonal,
//! as with a sentence model); every query is the text of a stored row with
//! two words changed, so both the cosine gate and the keyword path have
//! something to admit.
//!
//! `EPISODIC_BENCH_EMBEDDER=hash` embeds with the trigram hash embedder
//! instead, under which every pair of these sentences clears the cosine
//! pre-gate: the worst case, where each search fetches the whole pool.
//!
//! `EPISODIC_BENCH_GATE=minilm` names the embedder all-MiniLM-L6-v2, so the
//! searches run under that model's relevance gate (0.24 / 0.26) and
//! abstention floor (0.275): more rows clear the cosine pre-gate and are read.
//!
//! `EPISODIC_BENCH_ROWS=conversation` writes the rows as a conversation
//! instead: `Ana: ` and `Ben: ` take turns, a minute apart, in sittings of
//! 20 turns a day apart, and every fourth turn asks a question, so the best
//! hit's thread (its speaker's turns around it, the answer to its question)
//! is read and lifted as in a real conversation.
//!
//! Each store runs `pure_vector`, `hybrid` (the default), `hybrid_previous`
//! (the previous default: no speaker, time, session or thread signal, no
//! abstention), `hybrid_no_thread` (the default without the thread),
//! `hybrid_neighbours` (neighbouring turns on) and `hybrid_project`, so a
//! change is measured against the previous ranking in the same run.
//!
//! With `CAIRN_BENCH_POSTGRES_URL` set (a libpq URL of a server where the
//! role may create databases), every store size is also run on
//! `MemoryDb::open_postgres` as `episodic_context/<rows>/postgres`: a fresh
//! database `cairn_bench_<pid>_<n>`, filled by the same code, dropped
//! afterwards.
//!
//! `cargo bench -p cairn-dev --bench episodic` (`EPISODIC_BENCH_SIZES=10000` for the small store only)

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "support/postgres.rs"]
mod bench_postgres;
#[path = "../tools/support/synthetic.rs"]
mod synthetic;

use bench_postgres::{BenchDatabase, postgres_server};
use cairn_embedder::{EmbeddingBackend, HashEmbedder, WordVectorEmbedder};
use cairn_memory_core::{EpisodicQuery, MemoryConfig, MemoryDb, NewEpisode, RetrievalMode, Scope, ScopeFilter};
use criterion::{Criterion, criterion_group, criterion_main};
use synthetic::{query, sentence};

const DIM: usize = 384;

/// The bench's embedder, from `EPISODIC_BENCH_EMBEDDER` (`words`, the
/// default, or `hash`); with `EPISODIC_BENCH_GATE=minilm` it reports
/// itself as all-MiniLM-L6-v2, so searches apply that model's (lower)
/// relevance gate instead of the specification's.
fn embedder() -> Arc<dyn EmbeddingBackend> {
    let inner: Arc<dyn EmbeddingBackend> = match std::env::var("EPISODIC_BENCH_EMBEDDER").as_deref() {
        Ok("hash") => Arc::new(HashEmbedder::new(DIM)),
        _ => Arc::new(WordVectorEmbedder::new(DIM)),
    };
    match std::env::var("EPISODIC_BENCH_GATE").as_deref() {
        Ok("minilm") => Arc::new(Renamed { inner, model_id: "all-MiniLM-L6-v2" }),
        _ => inner,
    }
}

/// Another embedder under another model id.
struct Renamed {
    inner: Arc<dyn EmbeddingBackend>,
    model_id: &'static str,
}

impl EmbeddingBackend for Renamed {
    fn model_id(&self) -> &str {
        self.model_id
    }
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn is_ready(&self) -> bool {
        self.inner.is_ready()
    }
    fn embed_batch(&self, texts: &[&str]) -> cairn_embedder::Result<Vec<Vec<f32>>> {
        self.inner.embed_batch(texts)
    }
}

/// A store of `rows` rows with vectors and a built index, in `memory.db`.
fn store(rows: usize) -> (tempfile::TempDir, MemoryDb) {
    let home = tempfile::tempdir().unwrap();
    let db = MemoryDb::open_in_home(home.path(), MemoryConfig::default()).unwrap();
    (home, fill(db, rows, "SQLite"))
}

/// The same store in the PostgreSQL database `database`.
fn postgres_store(database: &BenchDatabase, rows: usize) -> (tempfile::TempDir, MemoryDb) {
    let home = tempfile::tempdir().unwrap();
    let db = MemoryDb::open_postgres(&database.url, home.path(), MemoryConfig::default()).unwrap();
    (home, fill(db, rows, "PostgreSQL"))
}

/// Where row `seed` belongs: a quarter to each of two projects, half global.
fn scope_of(seed: usize) -> Scope {
    match seed % 4 {
        0 => Scope::Project("alpha-00000000".to_owned()),
        1 => Scope::Project("beta-00000000".to_owned()),
        _ => Scope::Global,
    }
}

/// Whether `EPISODIC_BENCH_ROWS=conversation` asks for a conversation.
fn conversation() -> bool {
    std::env::var("EPISODIC_BENCH_ROWS").as_deref() == Ok("conversation")
}

/// Row `seed`'s text and creation time (Unix milliseconds).
fn episode(seed: usize) -> (String, i64) {
    const BASE: i64 = 1_700_000_000_000;
    if !conversation() {
        return (sentence(seed), BASE - (seed as i64 % 400) * 86_400_000);
    }
    let speaker = if seed.is_multiple_of(2) { "Ana" } else { "Ben" };
    let asks = if seed % 4 == 3 { "?" } else { "" };
    let (sitting, turn) = ((seed / 20) as i64, (seed % 20) as i64);
    (format!("{speaker}: {}{asks}", sentence(seed)), BASE - sitting * 86_400_000 + turn * 60_000)
}

/// Writes `rows` rows into the empty `db`, embeds them and builds the index.
fn fill(db: MemoryDb, rows: usize, backend: &str) -> MemoryDb {
    let db = db.with_embedder(embedder());
    let started = Instant::now();
    for seed in 0..rows {
        let (text, created_at) = episode(seed);
        let episode = NewEpisode::new(text)
            .scope(scope_of(seed))
            .importance((seed % 10) as f64 / 10.0)
            .created_at(created_at)
            .defer_embedding(true);
        db.write_episodic_capped(&episode, rows + 1).unwrap();
    }
    let report = db.backfill_missing_embeddings(None).unwrap();
    assert_eq!(report.remaining, 0);
    let status = db.build_episodic_index().unwrap();
    assert_eq!(status.index_len, rows);
    eprintln!("built a {rows}-row {backend} store in {:.1?}", started.elapsed());
    db
}

fn queries(rows: usize) -> Vec<(String, Vec<f32>)> {
    let embedder = embedder();
    (0..64)
        .map(|i| {
            let text = query(i, rows);
            let vector = embedder.embed(&text).unwrap();
            (text, vector)
        })
        .collect()
}

/// `episodic_context/<rows>` (SQLite) and, given a server,
/// `episodic_context/<rows>/postgres`; returns the SQLite store's home.
fn bench_size(c: &mut Criterion, rows: usize, postgres_server: Option<&str>) -> tempfile::TempDir {
    let queries = queries(rows);
    let (home, db) = store(rows);
    bench_store(c, &format!("episodic_context/{rows}"), &db, &queries);
    drop(db);
    if let Some(server_url) = postgres_server {
        let database = BenchDatabase::create(server_url);
        let (_postgres_home, postgres_db) = postgres_store(&database, rows);
        bench_store(c, &format!("episodic_context/{rows}/postgres"), &postgres_db, &queries);
    }
    home
}

/// What a bench variant changes in the default query.
type Adjust = fn(EpisodicQuery) -> EpisodicQuery;

/// Pure-vector and hybrid `episodic_context` on `db` under `group_name`.
fn bench_store(c: &mut Criterion, group_name: &str, db: &MemoryDb, queries: &[(String, Vec<f32>)]) {
    let mut group = c.benchmark_group(group_name);
    group.sample_size(50).measurement_time(Duration::from_secs(8));
    // `hybrid` is the default; `hybrid_previous` the previous default in the
    // same run (no speaker, time, session or thread signal, no abstention
    // floor); `hybrid_no_thread` the default without the thread;
    // `hybrid_neighbours` the default with neighbouring turns on (opt-in);
    // `hybrid_project` the default as a host hook asks it: one project's
    // rows and the global ones (three quarters of the store).
    let variants: [(&str, RetrievalMode, Adjust); 6] = [
        ("pure_vector", RetrievalMode::PureVector, |query| query),
        ("hybrid", RetrievalMode::Hybrid, |query| query),
        ("hybrid_previous", RetrievalMode::Hybrid, |query| {
            query.speaker_boost(0.0).time_boost(0.0).session_boost(0.0).thread_weight(0.0).abstain_below(0.0)
        }),
        ("hybrid_no_thread", RetrievalMode::Hybrid, |query| query.thread_weight(0.0)),
        ("hybrid_neighbours", RetrievalMode::Hybrid, |query| query.neighbour_weight(0.6)),
        ("hybrid_project", RetrievalMode::Hybrid, |query| query.scopes(ScopeFilter::visible_from(Some(&scope_of(0))))),
    ];
    for (name, mode, adjust) in variants {
        let mut n = 0usize;
        let admitted: usize = queries
            .iter()
            .map(|(text, vector)| {
                let query = adjust(EpisodicQuery::new(text.clone()).vector(vector.clone()).mode(mode));
                db.episodic_context_for(&query, 3_000).unwrap().hits.len()
            })
            .sum();
        eprintln!("{group_name}, {name}: {:.2} hits admitted per query", admitted as f64 / queries.len() as f64);
        group.bench_function(name, |b| {
            b.iter(|| {
                let (text, vector) = &queries[n % queries.len()];
                n += 1;
                let query = adjust(EpisodicQuery::new(text.clone()).vector(vector.clone()).mode(mode));
                black_box(db.episodic_context_for(&query, 3_000).unwrap())
            })
        });
    }
    group.finish();
}

/// Store sizes to run, from `EPISODIC_BENCH_SIZES` (default `10000,100000`).
fn sizes() -> Vec<usize> {
    std::env::var("EPISODIC_BENCH_SIZES")
        .unwrap_or_else(|_| "10000,100000".to_owned())
        .split(',')
        .filter_map(|size| size.trim().parse().ok())
        .collect()
}

fn episodic_context(c: &mut Criterion) {
    let postgres_server = postgres_server();
    for rows in sizes() {
        let home = bench_size(c, rows, postgres_server.as_deref());
        if rows >= 100_000 {
            first_search_after_open(&home.path().join("memory.db"), rows);
        }
    }
}

/// Opening a large store and serving the first search: the index is loaded
/// from its snapshot file, or built, in the background while the exact scan
/// answers. One shot per open, timed and printed, three times
/// (`EPISODIC_BENCH_OPEN_ROUNDS` to change): the first without the
/// snapshot file (a full build), the others with it.
fn first_search_after_open(path: &std::path::Path, rows: usize) {
    let (text, vector) = queries_for_open();
    let rounds: usize = std::env::var("EPISODIC_BENCH_OPEN_ROUNDS").ok().and_then(|n| n.parse().ok()).unwrap_or(3);
    let snapshot = path.with_file_name(cairn_memory_core::constants::EPISODIC_INDEX_FILE_NAME);
    for round in 1..=rounds {
        if round == 1 && snapshot.exists() {
            std::fs::remove_file(&snapshot).unwrap();
        }
        let started = Instant::now();
        let db = MemoryDb::open(path, MemoryConfig::default()).unwrap().with_embedder(embedder());
        let query = EpisodicQuery::new(text.clone()).vector(vector.clone());
        let context = db.episodic_context_for(&query, 3_000).unwrap();
        let first = started.elapsed();
        let status = db.build_episodic_index().unwrap();
        eprintln!(
            "open {rows} rows, round {round}: first context in {first:.1?} ({} hits, scan meanwhile); \
             index ready {:.1?} after open ({} vectors, {})",
            context.hits.len(),
            started.elapsed(),
            status.index_len,
            if status.loaded_from_snapshot { "loaded from its snapshot" } else { "built from the table" }
        );
    }
}

fn queries_for_open() -> (String, Vec<f32>) {
    let text = sentence(4_242);
    let vector = embedder().embed(&text).unwrap();
    (text, vector)
}

criterion_group!(benches, episodic_context);
criterion_main!(benches);
