//! memory-core Markdown files: `recent_history` warm (cache hit) and cold
//! (cache expired, 181 day files of 20 entries) against reading the same
//! files without parsing, and `search_files` over a year of history (365
//! day files of 20 entries, FTS5 bm25) against reading and scanning the
//! files. Search runs on two corpora: prose-like text (words drawn with a
//! Zipf law from a 3,000-word vocabulary, so a content word matches tens to
//! hundreds of entries) and a dense worst case (30 words, so every query
//! term matches about half of all entries and bm25 scores thousands).
//!
//! `cargo bench --bench memory_files`

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;

use cairn_memory_core::{ManualZonedClock, MemoryFiles};
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

/// Writes `days` day files ending today, `ENTRIES_PER_DAY` entries each,
/// words drawn from `words` by `pick`.
fn write_history(home: &Path, days: i64, words: &[String], pick: &dyn Fn(&mut StdRng) -> usize) {
    let history = home.join("memory/history");
    std::fs::create_dir_all(&history).unwrap();
    let mut rng = StdRng::seed_from_u64(11);
    let mut day = TODAY;
    for _ in 0..days {
        let mut content = String::new();
        for entry in 0..ENTRIES_PER_DAY {
            let count = rng.random_range(8..30);
            let text: Vec<&str> = (0..count).map(|_| words[pick(&mut rng)].as_str()).collect();
            content.push_str(&format!("\n#### {:02}:{:02}\n{}.\n", 8 + entry / 4, (entry * 11) % 60, text.join(" ")));
        }
        std::fs::write(history.join(format!("{day}.md")), content).unwrap();
        day = day.yesterday().unwrap();
    }
}

fn dense_words() -> Vec<String> {
    WORDS.iter().map(|word| (*word).to_owned()).collect()
}

fn write_dense(home: &Path, days: i64) {
    let words = dense_words();
    write_history(home, days, &words, &|rng| rng.random_range(0..WORDS.len()));
}

/// A 3,000-word synthetic vocabulary and a Zipf sampler over it (rank r has weight 1/r).
fn zipf_corpus() -> (Vec<String>, Vec<f64>) {
    const SYLLABLES: &[&str] =
        &["ka", "lo", "mi", "ne", "ru", "ta", "vo", "shi", "den", "per", "gra", "fol", "tin", "mar", "bel", "sor"];
    let mut rng = StdRng::seed_from_u64(5);
    let mut words: Vec<String> = Vec::new();
    while words.len() < 3_000 {
        let length = rng.random_range(2..4);
        let word: String = (0..length).map(|_| SYLLABLES[rng.random_range(0..SYLLABLES.len())]).collect();
        if !words.contains(&word) {
            words.push(word);
        }
    }
    let mut cumulative = Vec::with_capacity(words.len());
    let mut total = 0.0;
    for rank in 1..=words.len() {
        total += 1.0 / rank as f64;
        cumulative.push(total);
    }
    (words, cumulative)
}

fn history(c: &mut Criterion) {
    let home = tempfile::tempdir().unwrap();
    write_dense(home.path(), 181);
    let clock = Arc::new(ManualZonedClock::new(noon()));
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
    let prose_home = tempfile::tempdir().unwrap();
    let (words, cumulative) = zipf_corpus();
    let total = *cumulative.last().unwrap();
    write_history(prose_home.path(), 365, &words, &|rng| {
        let target = rng.random_range(0.0..total);
        cumulative.partition_point(|weight| *weight < target).min(cumulative.len() - 1)
    });
    let prose = MemoryFiles::open(prose_home.path()).unwrap().with_clock(Arc::new(ManualZonedClock::new(noon())));
    let report = prose.rebuild_index().unwrap();
    eprintln!("prose index: {} files, {} chunks", report.files_indexed, report.chunks_written);
    // Two content words of middling frequency, plus stopwords the sanitiser drops.
    let prose_query = format!("what did we say about {} and the {}", words[60], words[250]);
    let matched = prose.search_files(&prose_query, 100_000).unwrap().len();
    eprintln!("prose query {prose_query:?} matches {matched} chunks");

    let dense_home = tempfile::tempdir().unwrap();
    write_dense(dense_home.path(), 365);
    let dense = MemoryFiles::open(dense_home.path()).unwrap().with_clock(Arc::new(ManualZonedClock::new(noon())));
    dense.rebuild_index().unwrap();
    let dense_matched = dense.search_files("rollback staging", 100_000).unwrap().len();
    eprintln!("dense query matches {dense_matched} chunks");

    let mut group = c.benchmark_group("memory_files_search");
    group.bench_function("search_files_year_prose_2_terms", |b| {
        b.iter(|| black_box(prose.search_files(&prose_query, 10).unwrap()))
    });
    group.bench_function("search_files_year_dense_2_terms", |b| {
        b.iter(|| black_box(dense.search_files("rollback staging", 10).unwrap()))
    });
    let history_dir = prose_home.path().join("memory/history");
    let (first, second) = (words[60].clone(), words[250].clone());
    group.bench_function("peer_read_and_scan_365_files", |b| {
        b.iter(|| {
            let mut matches = 0;
            for entry in std::fs::read_dir(&history_dir).unwrap() {
                let content = std::fs::read_to_string(entry.unwrap().path()).unwrap();
                matches += content.matches(first.as_str()).count() + content.matches(second.as_str()).count();
            }
            black_box(matches)
        })
    });
    group.bench_function("rebuild_index_year", |b| b.iter(|| black_box(prose.rebuild_index().unwrap())));
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30);
    targets = history, search
}
criterion_main!(benches);
