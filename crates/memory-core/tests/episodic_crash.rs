//! Crash test for episodic imports (own harness): a child process imports
//! rows (preservation mode, deferred embedding, as `cairn memory
//! import-episodic` does) and reports each committed row; the parent kills
//! it with SIGKILL, reopens, checks integrity and that every reported row
//! is there whole, then reruns the import plus a backfill and checks that
//! every row exists exactly once with a vector.
//!
//! Run by `cargo test`; `episodic_crash --crash-child <db>` is the child.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use cairn_embedder::HashEmbedder;
use cairn_memory_core::{EpisodicOutcome, MemoryConfig, MemoryDb, NewEpisode, Source};

const ROWS: usize = 4_000;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|arg| arg == "--list") {
        println!("episodic_crash_kill_reimport: test");
        return;
    }
    if let Some(index) = args.iter().position(|arg| arg == "--crash-child") {
        child(Path::new(&args[index + 1]));
        return;
    }
    parent();
}

fn row(i: usize) -> NewEpisode {
    NewEpisode::new(format!("imported turn {i}: we talked about topic {} and place {}", i % 97, i % 13))
        .source_ref(format!("conv-x:D{}:{}", i / 20, i % 20))
        .created_at(1_600_000_000_000 + i as i64 * 60_000)
        .importance(0.5)
        .defer_embedding(true)
        .preserve(true)
        .source(Source::Import)
}

fn import(db: &MemoryDb, mut report: impl FnMut(usize, i64)) {
    for i in 0..ROWS {
        match db.write_episodic_capped(&row(i), 100_000).expect("import write") {
            EpisodicOutcome::Inserted { id, .. } => report(i, id),
            EpisodicOutcome::Duplicate { .. } => {}
            other => panic!("{other:?}"),
        }
    }
}

fn child(path: &Path) {
    let db = MemoryDb::open(path, MemoryConfig::default()).expect("child opens the database");
    let stdout = std::io::stdout();
    import(&db, |i, id| {
        let mut out = stdout.lock();
        writeln!(out, "{i} {id}").unwrap();
        out.flush().unwrap();
    });
    // Finished before the kill: idle until killed so the parent's protocol holds.
    std::thread::sleep(std::time::Duration::from_secs(60));
}

fn parent() {
    let home = tempfile::tempdir().expect("temp dir");
    let path = home.path().join("memory.db");
    MemoryDb::open(&path, MemoryConfig::default()).expect("create the database");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .arg("--crash-child")
        .arg(&path)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the child");
    let mut reported: HashMap<usize, i64> = HashMap::new();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // Kill somewhere in the middle: after a pseudo-random number of commits.
    let kill_after = 300 + (std::process::id() as usize % 1_500);
    for line in lines.by_ref() {
        let line = line.unwrap();
        let mut parts = line.split(' ');
        let i: usize = parts.next().unwrap().parse().unwrap();
        let id: i64 = parts.next().unwrap().parse().unwrap();
        reported.insert(i, id);
        if reported.len() >= kill_after {
            break;
        }
    }
    child.kill().expect("SIGKILL the child");
    child.wait().unwrap();
    // Lines already written after the break are acknowledged commits too.
    for line in lines.map_while(Result::ok) {
        let mut parts = line.split(' ');
        if let (Some(i), Some(id)) = (parts.next(), parts.next()) {
            reported.insert(i.parse().unwrap(), id.parse().unwrap());
        }
    }

    let db = MemoryDb::open(&path, MemoryConfig::default())
        .expect("reopen after the kill")
        .with_embedder(Arc::new(HashEmbedder::new(32)));
    assert_eq!(db.integrity_check().unwrap(), vec!["ok"]);
    let live = db.stats().unwrap().episodic_live as usize;
    assert!(live >= reported.len() && live < ROWS, "killed mid-import: {live} rows, {} reported", reported.len());
    for (i, id) in &reported {
        let record = db.get_episodic(*id).unwrap().unwrap_or_else(|| panic!("reported row {i} (id {id}) is missing"));
        let expected = row(*i);
        assert_eq!(record.text, expected.text);
        assert_eq!(record.source_ref, expected.source_ref);
        assert_eq!(record.created_at, expected.created_at.unwrap());
    }
    // Every stored row is whole: text, tags and an audit row.
    let audited = db.audit(100_000).unwrap().into_iter().filter(|event| event.memory_type == "episodic").count();
    assert!(audited >= live, "{audited} audit rows for {live} rows");

    import(&db, |_, _| {});
    let report = db.backfill_missing_embeddings(None).unwrap();
    assert_eq!(report.remaining, 0);
    let stats = db.stats().unwrap();
    assert_eq!(stats.episodic_live as usize, ROWS, "the rerun adds exactly the missing rows");
    let texts: std::collections::HashSet<String> =
        db.list_episodic(ROWS * 2, 0).unwrap().into_iter().map(|record| record.text).collect();
    assert_eq!(texts.len(), ROWS, "no duplicates");
    let status = db.build_episodic_index().unwrap();
    assert_eq!((status.index_len, status.active_with_vectors), (ROWS, ROWS));
    println!("episodic_crash_kill_reimport: ok ({} rows committed before the kill)", reported.len());
}
