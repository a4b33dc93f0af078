//! memory-core: accepted semantic writes per second (WAL, validation,
//! injection screen, conflict ladder and audit row included) against a bare
//! rusqlite upsert, and `semantic_context` / `search_semantic` over 1,000
//! entries with and without vectors.
//!
//! With `CAIRN_BENCH_POSTGRES_URL` set (a libpq URL of a server where the
//! role may create databases), `semantic_write/accepted_cairn_postgres`
//! runs the same writes against `MemoryDb::open_postgres` on a fresh
//! database `cairn_bench_<pid>_<n>`, dropped afterwards.
//!
//! `cargo bench --bench memory_core`

use std::hint::black_box;
use std::sync::Arc;

#[path = "support/postgres.rs"]
mod bench_postgres;

use bench_postgres::{BenchDatabase, postgres_server};
use cairn_embedder::HashEmbedder;
use cairn_memory_core::{MemoryConfig, MemoryDb, Source};
use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

const ENTRIES: usize = 1_000;
const WORDS: &[&str] = &[
    "editor", "theme", "dark", "light", "rust", "python", "deploy", "friday", "review", "tests", "cargo", "branch",
    "release", "docs", "terminal", "shell", "fish", "helix", "tabs", "spaces", "format", "lint", "coffee", "meeting",
    "timezone", "berlin", "project", "gateway", "memory", "skills", "hooks", "latency", "budget", "prompt",
];

/// Accepted writes through the whole write path (validation, screen, ladder,
/// audit) over 512 keys, each one changing its key's value.
fn bench_accepted_writes(group: &mut BenchmarkGroup<'_, WallTime>, name: &str, db: &MemoryDb) {
    let mut counter = 0u64;
    group.bench_function(name, |b| {
        b.iter(|| {
            counter += 1;
            let key = format!("pref.bench_{}", counter % 512);
            let outcome = db
                .write_semantic(
                    &key,
                    &json!(format!("prefers option {counter} for the editor")),
                    0.9,
                    Source::Consolidation,
                )
                .unwrap();
            debug_assert!(outcome.is_change());
            black_box(outcome)
        })
    });
}

fn sentence(rng: &mut StdRng, words: usize) -> String {
    (0..words).map(|_| WORDS[rng.random_range(0..WORDS.len())]).collect::<Vec<_>>().join(" ")
}

fn filled(embedder: Option<Arc<HashEmbedder>>) -> (tempfile::TempDir, MemoryDb) {
    let home = tempfile::tempdir().unwrap();
    let mut db = MemoryDb::open_in_home(home.path(), MemoryConfig::default()).unwrap();
    if let Some(embedder) = embedder {
        db = db.with_embedder(embedder);
    }
    let mut rng = StdRng::seed_from_u64(7);
    let prefixes = ["pref", "project", "user"];
    for index in 0..ENTRIES {
        let key = format!("{}.{}_{index}", prefixes[index % 3], WORDS[index % WORDS.len()]);
        let words = rng.random_range(3..12);
        db.write_semantic(&key, &json!(sentence(&mut rng, words)), 1.0, Source::UserExplicit).unwrap();
    }
    (home, db)
}

fn writes(c: &mut Criterion) {
    let mut group = c.benchmark_group("semantic_write");
    group.throughput(Throughput::Elements(1));
    group.sample_size(30);

    let home = tempfile::tempdir().unwrap();
    let db = MemoryDb::open_in_home(home.path(), MemoryConfig::default()).unwrap();
    bench_accepted_writes(&mut group, "accepted_cairn", &db);

    // The same writes on a PostgreSQL store (a fresh database).
    if let Some(server_url) = postgres_server() {
        let database = BenchDatabase::create(&server_url);
        let postgres_home = tempfile::tempdir().unwrap();
        let postgres_db =
            MemoryDb::open_postgres(&database.url, postgres_home.path(), MemoryConfig::default()).unwrap();
        bench_accepted_writes(&mut group, "accepted_cairn_postgres", &postgres_db);
        drop(postgres_db);
    }

    // The peer: the same upsert with nothing around it (no validation, screen, ladder or audit).
    let peer_home = tempfile::tempdir().unwrap();
    let mut connection = rusqlite::Connection::open(peer_home.path().join("kv.db")).unwrap();
    connection.pragma_update(None, "journal_mode", "WAL").unwrap();
    connection.pragma_update(None, "synchronous", "NORMAL").unwrap();
    connection.execute("CREATE TABLE kv (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID", []).unwrap();
    let mut counter = 0u64;
    group.bench_function("raw_rusqlite_upsert", |b| {
        b.iter(|| {
            counter += 1;
            let transaction = connection.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).unwrap();
            transaction
                .prepare_cached("INSERT OR REPLACE INTO kv (key, value) VALUES (?1, ?2)")
                .unwrap()
                .execute(rusqlite::params![
                    format!("pref.bench_{}", counter % 512),
                    format!("\"prefers option {counter} for the editor\"")
                ])
                .unwrap();
            transaction.commit().unwrap();
        })
    });

    let embedded_home = tempfile::tempdir().unwrap();
    let embedded = MemoryDb::open_in_home(embedded_home.path(), MemoryConfig::default())
        .unwrap()
        .with_embedder(Arc::new(HashEmbedder::new(384)));
    let mut counter = 0u64;
    group.bench_function("accepted_cairn_with_hash_vectors_384", |b| {
        b.iter(|| {
            counter += 1;
            let key = format!("pref.bench_{}", counter % 512);
            black_box(
                embedded
                    .write_semantic(
                        &key,
                        &json!(format!("prefers option {counter} for the editor")),
                        0.9,
                        Source::Consolidation,
                    )
                    .unwrap(),
            )
        })
    });
    group.finish();

    // Where an accepted write's time goes besides SQLite: the screen and the audit redaction.
    let mut group = c.benchmark_group("semantic_write_parts");
    let value = "prefers option 12345 for the editor";
    group.bench_function("guard_screen", |b| b.iter(|| black_box(cairn_guard::screen(black_box(value)))));
    group.bench_function("guard_redact_all", |b| b.iter(|| black_box(cairn_guard::redact_all(black_box(value)))));
    group.finish();
}

fn retrieval(c: &mut Criterion) {
    let mut group = c.benchmark_group("semantic_1000");
    group.sample_size(50);
    let query = "which editor theme does the user prefer for rust";
    let cap = 12_705; // caps.semantic at the 1M reference window

    let (_home, keyword_db) = filled(None);
    group.bench_function("context_keyword_only", |b| {
        b.iter(|| black_box(keyword_db.semantic_context(query, cap).unwrap()))
    });
    group.bench_function("search_keyword_only", |b| {
        b.iter(|| black_box(keyword_db.search_semantic(query, 10).unwrap()))
    });

    let (_home2, hybrid_db) = filled(Some(Arc::new(HashEmbedder::new(384))));
    group.bench_function("context_hybrid_384", |b| {
        b.iter(|| black_box(hybrid_db.semantic_context(query, cap).unwrap()))
    });
    group.bench_function("search_hybrid_384", |b| b.iter(|| black_box(hybrid_db.search_semantic(query, 10).unwrap())));

    // Worst case: every call follows a write, so the snapshot is rebuilt each time.
    let mut counter = 0u64;
    group.bench_function("context_hybrid_384_after_write", |b| {
        b.iter(|| {
            counter += 1;
            hybrid_db.write_semantic("pref.bench_touch", &json!(counter), 1.0, Source::UserExplicit).unwrap();
            black_box(hybrid_db.semantic_context(query, cap).unwrap())
        })
    });
    group.finish();
}

criterion_group!(benches, writes, retrieval);
criterion_main!(benches);
