//! Crash test (own harness): a child process writes in a loop and reports
//! each acknowledged write on stdout; the parent kills it with SIGKILL at an
//! arbitrary point, reopens the database, runs `PRAGMA integrity_check` and
//! checks that every reported write is there. Three rounds on one file.
//!
//! Run by `cargo test`; `crash --crash-child <db> <round>` is the child.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use cairn_memory_core::{LessonCategory, MemoryConfig, MemoryDb, Source, WriteOutcome};
use serde_json::json;

const ROUNDS: usize = 3;
const CHILD_THREADS: usize = 2;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|arg| arg == "--list") {
        println!("crash_kill_reopen: test");
        return;
    }
    if let Some(index) = args.iter().position(|arg| arg == "--crash-child") {
        child(Path::new(&args[index + 1]), &args[index + 2]);
        return;
    }
    parent();
}

/// Writes unique keys forever from two threads, printing `key value` after each commit.
fn child(path: &Path, round: &str) {
    let db = std::sync::Arc::new(MemoryDb::open(path, MemoryConfig::default()).expect("child opens the database"));
    let threads: Vec<_> = (0..CHILD_THREADS)
        .map(|thread| {
            let db = db.clone();
            let round = round.to_owned();
            std::thread::spawn(move || {
                let stdout = std::io::stdout();
                for index in 0u64.. {
                    let key = format!("pref.crash_r{round}_t{thread}_{index}");
                    let outcome = db.write_semantic(&key, &json!(index), 1.0, Source::UserExplicit).expect("write");
                    assert!(matches!(outcome, WriteOutcome::Created { .. }));
                    {
                        let mut out = stdout.lock();
                        writeln!(out, "wrote {key} {index}").unwrap();
                        out.flush().unwrap();
                    }
                    if index % 50 == 0 {
                        // Lessons and tombstones in the mix exercise the multi-statement transactions.
                        db.write_lesson(
                            &format!("crash lesson r{round} t{thread} n{index}"),
                            None,
                            LessonCategory::Tool,
                            Source::UserExplicit,
                        )
                        .expect("lesson");
                        db.delete_semantic(
                            &format!("pref.crash_r{round}_t{thread}_{}", index.saturating_sub(1)),
                            Source::UserExplicit,
                        )
                        .expect("delete");
                        let mut out = stdout.lock();
                        writeln!(out, "deleted pref.crash_r{round}_t{thread}_{}", index.saturating_sub(1)).unwrap();
                        out.flush().unwrap();
                    }
                }
            })
        })
        .collect();
    for thread in threads {
        let _ = thread.join();
    }
}

fn parent() {
    let home = tempfile::tempdir().expect("temp dir");
    let path = home.path().join("memory.db");
    MemoryDb::open(&path, MemoryConfig::default()).expect("create the database");
    let mut verified = 0;
    for round in 0..ROUNDS {
        let mut child = Command::new(std::env::current_exe().expect("own path"))
            .arg("--crash-child")
            .arg(&path)
            .arg(round.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the child");
        let mut reader = BufReader::new(child.stdout.take().expect("piped stdout"));
        // Expected final state per key, from what the child acknowledged.
        let mut expected: BTreeMap<String, Option<u64>> = BTreeMap::new();
        // Keys whose delete the child may have committed without saying so
        // before it died: after its write of index n (a multiple of 50) it
        // deletes index n - 1.
        let mut delete_in_flight: BTreeSet<String> = BTreeSet::new();
        let mut record = |line: &str| {
            let mut parts = line.split_whitespace();
            match (parts.next(), parts.next(), parts.next()) {
                (Some("wrote"), Some(key), Some(value)) => {
                    // Each key belongs to one child thread, so its lines arrive in order.
                    let index: u64 = value.parse().expect("numeric value");
                    expected.insert(key.to_owned(), Some(index));
                    if index > 0 && index.is_multiple_of(50) {
                        let (prefix, _) = key.rsplit_once('_').expect("an indexed key");
                        delete_in_flight.insert(format!("{prefix}_{}", index - 1));
                    }
                }
                (Some("deleted"), Some(key), None) => {
                    expected.insert(key.to_owned(), None);
                    delete_in_flight.remove(key);
                }
                _ => panic!("unexpected child line {line:?}"),
            }
        };
        // Kill after a round-dependent number of acknowledgements.
        let kill_after = 400 + 137 * round;
        let mut line = String::new();
        let mut seen = 0;
        while seen < kill_after {
            line.clear();
            if reader.read_line(&mut line).expect("read child output") == 0 {
                panic!("child exited early: {:?}", child.wait());
            }
            if line.ends_with('\n') {
                record(line.trim_end());
                seen += 1;
            }
        }
        child.kill().expect("SIGKILL the child");
        let status = child.wait().expect("reap the child");
        assert!(!status.success(), "child was killed");
        // Lines the child wrote before it died are still in the pipe.
        loop {
            line.clear();
            if reader.read_line(&mut line).expect("drain child output") == 0 {
                break;
            }
            if line.ends_with('\n') {
                record(line.trim_end());
            }
        }

        let db = MemoryDb::open(&path, MemoryConfig::default()).expect("reopen after SIGKILL");
        assert_eq!(db.integrity_check().expect("integrity_check"), ["ok"], "round {round}");
        for (key, value) in &expected {
            let stored = db.get_semantic(key).expect("read").map(|entry| entry.value);
            match value {
                // Deleted, though the child died before it could say so.
                Some(_) if stored.is_none() && delete_in_flight.contains(key) => {}
                Some(value) => assert_eq!(stored, Some(json!(value)), "round {round}: acknowledged write {key} lost"),
                None => assert_eq!(stored, None, "round {round}: acknowledged delete of {key} lost"),
            }
        }
        verified += expected.len();
    }
    println!("crash_kill_reopen: {ROUNDS} SIGKILL rounds, {verified} acknowledged writes verified ... ok");
}
