//! memory-core Markdown files: `recent_history` warm (cache hit) and cold
//! (cache expired, 181 day files of 20 entries) against reading the same
//! files without parsing, and `search_files` over a year of history (365
//! day files of 20 entries, FTS5 bm25) against reading and scanning the files.
//!
//! `cargo bench --bench memory_files`

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;

use cairn_memory_core::{ManualClock, MemoryFiles};
use criterion::{Criterion, criterion_group, criterion_main};
use jiff::civil::{Date, date};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, ZonedDateTime};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const ENTRIES_PER_DAY: usize = 20;
const TODAY: Date = date(2026, 11, 30);
const WORDS: &[&str] = &[
    "deploy",
    "gateway",
    "review",
    "heartbeat",
    "index",
    "memory",
    "skills",
    "hooks",
    "budget",
    "prompt",
    "release",
    "branch",
    "tests",
    "docs",
    "latency",
    "embedding",
    "episodic",
    "semantic",
    "lesson",
    "config",
    "staging",
    "rollback",
    "cluster",
    "schema",
    "migration",
    "export",
    "import",
    "bench",
    "profile",
    "cache",
];

fn noon() -> ZonedDateTime {
    TODAY.at(12, 0, 0, 0).to_zoned_datetime(TimeZone::UTC).unwrap()
}

/// Writes `days` day files ending today, `ENTRIES_PER_DAY` entries each.
fn write_history(home: &Path, days: i64) {
    let history = home.join("memory/history");
    std::fs::create_dir_all(&history).unwrap();
    let mut rng = StdRng::seed_from_u64(11);
    let mut day = TODAY;
    for _ in 0..days {
        let mut content = String::new();
        for entry in 0..ENTRIES_PER_DAY {
            let words = rng.random_range(8..30);
            let text: Vec<&str> = (0..words).map(|_| WORDS[rng.random_range(0..WORDS.len())]).collect();
            content.push_str(&format!("\n#### {:02}:{:02}\n{}.\n", 8 + entry / 4, (entry * 11) % 60, text.join(" ")));
        }
        std::fs::write(history.join(format!("{day}.md")), content).unwrap();
        day = day.yesterday().unwrap();
    }
}

fn history(c: &mut Criterion) {
    let home = tempfile::tempdir().unwrap();
    write_history(home.path(), 181);
    let clock = Arc::new(ManualClock::new(noon()));
    let files = MemoryFiles::open(home.path()).unwrap().with_clock(clock.clone());
    let rendered = files.recent_history(14).unwrap();
    eprintln!("recent_history: {} chars from {} day files", rendered.text.len(), rendered.days.len());

    let mut group = c.benchmark_group("memory_files_history");
    group.bench_function("recent_history_warm", |b| b.iter(|| black_box(files.recent_history(14).unwrap())));
    // Each call is 6 s after the previous one, so the 5 s cache has always expired.
    let mut later = false;
    group.bench_function("recent_history_cold_181_files", |b| {
        b.iter(|| {
            later = !later;
            clock.set(if later { noon().checked_add(SignedDuration::from_secs(6)).unwrap() } else { noon() });
            black_box(files.recent_history(14).unwrap())
        })
    });
    let history_dir = home.path().join("memory/history");
    group.bench_function("peer_read_181_files_unparsed", |b| {
        b.iter(|| {
            let mut total = 0;
            for entry in std::fs::read_dir(&history_dir).unwrap() {
                total += std::fs::read_to_string(entry.unwrap().path()).unwrap().len();
            }
            black_box(total)
        })
    });
    group.finish();
}

fn search(c: &mut Criterion) {
    let home = tempfile::tempdir().unwrap();
    write_history(home.path(), 365);
    let files = MemoryFiles::open(home.path()).unwrap().with_clock(Arc::new(ManualClock::new(noon())));
    let report = files.rebuild_index().unwrap();
    eprintln!("index: {} files, {} chunks", report.files_indexed, report.chunks_written);

    let mut group = c.benchmark_group("memory_files_search");
    group.bench_function("search_files_year_2_terms", |b| {
        b.iter(|| black_box(files.search_files("rollback staging", 10).unwrap()))
    });
    group.bench_function("search_files_year_1_rare_term", |b| {
        b.iter(|| black_box(files.search_files("migrations", 10).unwrap()))
    });
    let history_dir = home.path().join("memory/history");
    group.bench_function("peer_read_and_scan_365_files", |b| {
        b.iter(|| {
            let mut matches = 0;
            for entry in std::fs::read_dir(&history_dir).unwrap() {
                let content = std::fs::read_to_string(entry.unwrap().path()).unwrap();
                matches += content.matches("rollback").count() + content.matches("staging").count();
            }
            black_box(matches)
        })
    });
    group.bench_function("rebuild_index_year", |b| b.iter(|| black_box(files.rebuild_index().unwrap())));
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30);
    targets = history, search
}
criterion_main!(benches);
