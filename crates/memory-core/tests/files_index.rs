//! The FTS5 keyword index over the Markdown files: porter-stemmed search
//! with provenance, sanitised queries, hand edits, pruning, and self-healing
//! when `memory_index.db` is truncated or overwritten with garbage.

use std::io::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex};

use cairn_memory_core::{ManualZonedClock, MemoryFiles};
use jiff::civil::date;
use jiff::tz::TimeZone;

fn files_at(home: &Path, day: u8) -> MemoryFiles {
    let now = date(2026, 11, day as i8).at(9, 30, 0, 0).to_zoned_datetime(TimeZone::UTC).unwrap();
    MemoryFiles::open(home).unwrap().with_clock(Arc::new(ManualZonedClock::new(now)))
}

fn populated() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    files_at(home.path(), 28).append_history("Deployed the gateway to staging.").unwrap();
    let files = files_at(home.path(), 29);
    files.append_history("Reviewed the heartbeat scheduler.").unwrap();
    files.append_history("The user prefers deploying on Tuesdays, never on Fridays.").unwrap();
    files.write_preferences("# Preferences\n- editor: helix\n\n- shell: fish").unwrap();
    files.write_projects("# cairn\nA Rust workspace for agent memory.").unwrap();
    home
}

#[test]
fn a_search_of_stopwords_alone_still_finds_the_chunks_holding_them() {
    let home = populated();
    let files = files_at(home.path(), 30);
    // "the" is in three history entries and nowhere else: FTS5 ranks them itself.
    let hits = files.search_files("the", 10).unwrap();
    let mut found: Vec<(&str, usize)> = hits.iter().map(|hit| (hit.file.as_str(), hit.line)).collect();
    found.sort();
    assert_eq!(found, [("history/2026-11-28.md", 2), ("history/2026-11-29.md", 2), ("history/2026-11-29.md", 5)]);
    assert!(hits.iter().all(|hit| hit.snippet.to_lowercase().contains("[the]")), "{hits:#?}");
    assert!(hits.iter().all(|hit| hit.date.is_some() && hit.time.is_some()), "{hits:#?}");
    assert!(hits.windows(2).all(|pair| pair[0].score <= pair[1].score));
    assert_eq!(files.search_files("the", 1).unwrap().len(), 1);
}

#[test]
fn search_is_stemmed_ranked_and_carries_provenance() {
    let home = populated();
    let files = files_at(home.path(), 30);
    let hits = files.search_files("deploys", 10).unwrap();
    // Porter stemming: "deploys" matches "Deployed" and "deploying".
    assert_eq!(hits.len(), 2, "{hits:#?}");
    let tuesday = hits.iter().find(|hit| hit.snippet.contains("Tuesdays")).unwrap();
    assert_eq!(tuesday.file, "history/2026-11-29.md");
    assert_eq!(tuesday.date.as_deref(), Some("2026-11-29"));
    assert_eq!(tuesday.time.as_deref(), Some("09:30"));
    assert_eq!(tuesday.line, 5);
    assert!(tuesday.snippet.contains("[deploying]"), "{}", tuesday.snippet);
    let staging = hits.iter().find(|hit| hit.file == "history/2026-11-28.md").unwrap();
    assert_eq!(staging.line, 2);

    let shell = files.search_files("fish shell", 10).unwrap();
    assert_eq!(shell.len(), 1);
    assert_eq!(shell[0].file, "preferences.md");
    assert_eq!(shell[0].date, None);
    assert_eq!(shell[0].line, 4);

    // bm25: the chunk matching more of the query ranks first.
    let ranked = files.search_files("rust workspace memory heartbeat", 10).unwrap();
    assert_eq!(ranked[0].file, "projects.md");
    assert!(ranked.windows(2).all(|pair| pair[0].score <= pair[1].score));
    assert_eq!(files.search_files("heartbeat", 0).unwrap().len(), 0);
}

#[test]
fn user_text_is_never_fts5_syntax() {
    let home = populated();
    let files = files_at(home.path(), 30);
    for query in [
        "\"unbalanced",
        "NEAR(gateway staging, 2)",
        "gateway*",
        "title:gateway",
        "-gateway",
        "gateway AND OR NOT",
        "(((",
        "^gateway",
        "'; DROP TABLE chunks; --",
    ] {
        let hits = files.search_files(query, 10).unwrap_or_else(|error| panic!("{query}: {error}"));
        if query.to_lowercase().contains("gateway") {
            assert!(hits.iter().any(|hit| hit.snippet.contains("gateway")), "{query}: {hits:?}");
        }
    }
    assert!(files.search_files("", 10).unwrap().is_empty());
    assert!(files.search_files("*** \"\" ()", 10).unwrap().is_empty());
    // The table survived the hostile query.
    assert_eq!(files.search_files("staging", 10).unwrap().len(), 1);
}

#[test]
fn hand_edits_and_prunes_reach_the_index() {
    let home = populated();
    let files = files_at(home.path(), 30);
    assert!(files.search_files("kubernetes", 10).unwrap().is_empty());
    let day = home.path().join("memory/history/2026-11-29.md");
    let mut file = std::fs::OpenOptions::new().append(true).open(&day).unwrap();
    file.write_all(b"\n#### 18:00\nMoved the staging cluster to kubernetes by hand.\n").unwrap();
    drop(file);
    std::fs::write(home.path().join("memory/history/2026-11-20.md"), "a hand-made day about kubernetes\n").unwrap();

    let report = files.refresh_index().unwrap();
    assert_eq!(report.files_indexed, 2, "{report:?}");
    assert_eq!(report.files_unchanged, 3, "{report:?}");
    let hits = files.search_files("kubernetes", 10).unwrap();
    assert_eq!(hits.len(), 2, "{hits:?}");
    let edited = hits.iter().find(|hit| hit.file == "history/2026-11-29.md").unwrap();
    assert_eq!((edited.time.as_deref(), edited.line), (Some("18:00"), 8));

    // A second refresh finds nothing to do; a full rebuild re-reads everything.
    let again = files.refresh_index().unwrap();
    assert_eq!(again.files_indexed, 0, "{again:?}");
    let full = files.rebuild_index().unwrap();
    assert_eq!(full.files_indexed, 5, "{full:?}");
    assert_eq!(files.search_files("kubernetes", 10).unwrap().len(), 2);

    // A file deleted by hand drops out at the next refresh; pruned days at once.
    std::fs::remove_file(home.path().join("memory/history/2026-11-20.md")).unwrap();
    assert_eq!(files.refresh_index().unwrap().files_removed, 1);
    assert_eq!(files.search_files("kubernetes", 10).unwrap().len(), 1);
    files.prune_history(0).unwrap();
    assert!(files.search_files("kubernetes staging heartbeat", 10).unwrap().is_empty());
    assert_eq!(files.search_files("helix", 10).unwrap().len(), 1);
}

/// Collects everything the crate logs while `body` runs.
fn logged<T>(body: impl FnOnce() -> T) -> (T, String) {
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buffer = Buffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let value = tracing::subscriber::with_default(subscriber, body);
    let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
    (value, text)
}

fn corrupt_then_search(corrupt: impl FnOnce(&Path)) -> String {
    let home = populated();
    let expected = files_at(home.path(), 30).search_files("deploy gateway", 10).unwrap();
    assert_eq!(expected.len(), 2);
    let index = home.path().join("memory_index.db");
    assert!(index.exists());
    corrupt(&index);
    let (hits, log) = logged(|| files_at(home.path(), 30).search_files("deploy gateway", 10).unwrap());
    assert_eq!(hits, expected);
    // The index works normally afterwards, and writes keep it current.
    let files = files_at(home.path(), 30);
    files.append_history("Deploy freeze starts on Friday.").unwrap();
    assert_eq!(files.search_files("freeze", 10).unwrap().len(), 1);
    log
}

#[test]
fn a_truncated_index_is_rebuilt_with_a_warning() {
    let log = corrupt_then_search(|index| {
        std::fs::OpenOptions::new().write(true).open(index).unwrap().set_len(0).unwrap();
    });
    assert!(log.contains("WARN"), "{log}");
    assert!(log.contains("rebuilding it from the Markdown files"), "{log}");
}

#[test]
fn a_half_truncated_index_is_moved_aside_and_rebuilt() {
    let home_log = corrupt_then_search(|index| {
        let length = std::fs::metadata(index).unwrap().len();
        std::fs::OpenOptions::new().write(true).open(index).unwrap().set_len(length / 2).unwrap();
    });
    assert!(home_log.contains("WARN"), "{home_log}");
    assert!(home_log.contains("memory index"), "{home_log}");
}

#[test]
fn a_garbage_index_is_moved_aside_and_rebuilt() {
    let home = populated();
    let files = files_at(home.path(), 30);
    let expected = files.search_files("heartbeat", 10).unwrap();
    drop(files);
    let index = home.path().join("memory_index.db");
    std::fs::write(&index, b"this is not a database, just garbage bytes ".repeat(200)).unwrap();
    let (hits, log) = logged(|| files_at(home.path(), 30).search_files("heartbeat", 10).unwrap());
    assert_eq!(hits, expected);
    assert!(log.contains("WARN") && log.contains("damaged"), "{log}");
    let aside: Vec<String> = std::fs::read_dir(home.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.starts_with("memory_index.db.corrupt-"))
        .collect();
    assert_eq!(aside.len(), 1, "{aside:?}");
    let kept = std::fs::read(home.path().join(&aside[0])).unwrap();
    assert!(kept.starts_with(b"this is not a database"));
}

#[test]
fn a_replaced_index_heals_while_another_handle_is_open() {
    let home = populated();
    let files = files_at(home.path(), 30);
    assert_eq!(files.search_files("helix", 10).unwrap().len(), 1);
    // Replace the file while `files` still holds a connection to the old one.
    let index = home.path().join("memory_index.db");
    std::fs::remove_file(&index).unwrap();
    std::fs::write(&index, b"garbage".repeat(1000)).unwrap();
    let fresh = files_at(home.path(), 30);
    let (hits, log) = logged(|| fresh.search_files("helix", 10).unwrap());
    assert_eq!(hits.len(), 1);
    assert!(log.contains("damaged"), "{log}");
}

#[test]
fn a_second_handle_s_writes_reach_the_first_handle_s_ranking() {
    // Two handles on one home stand for two processes: the first ranks in
    // memory, the second appends; the first sees the new entry at once.
    let home = populated();
    let first = files_at(home.path(), 29);
    assert!(first.search_files("lighthouse", 10).unwrap().is_empty());
    assert_eq!(first.search_files("gateway staging", 10).unwrap().len(), 1);
    let second = files_at(home.path(), 29);
    second.append_history("Painted the lighthouse next to the gateway.").unwrap();
    let hits = first.search_files("lighthouse", 10).unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert!(hits[0].snippet.contains("[lighthouse]"), "{}", hits[0].snippet);
    // Ranked best first: both gateway entries, the one with both terms ahead.
    let hits = first.search_files("gateway lighthouse", 10).unwrap();
    assert_eq!(hits.len(), 2, "{hits:?}");
    assert!(hits[0].snippet.contains("lighthouse") && hits[0].score <= hits[1].score, "{hits:?}");
    // A full rebuild by the second handle reuses no rowid the first still holds.
    second.rebuild_index().unwrap();
    let hits = first.search_files("lighthouse", 10).unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert!(hits[0].snippet.contains("lighthouse"), "{hits:?}");
}
