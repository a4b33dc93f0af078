//! Two processes append to today's history file 1,000 times each; the file
//! ends with exactly 2,000 well-formed entries and the keyword index (kept
//! current by each append) holds every one of them.
//!
//! Own harness: run by `cargo test`; `files_processes --append-child <home>
//! <tag> <count>` is the child.

use std::path::Path;
use std::process::Command;

use cairn_memory_core::MemoryFiles;

const ENTRIES_PER_CHILD: usize = 1_000;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|arg| arg == "--list") {
        println!("two_processes_append_2000_entries: test");
        return;
    }
    if let Some(index) = args.iter().position(|arg| arg == "--append-child") {
        let count: usize = args[index + 3].parse().expect("count");
        child(Path::new(&args[index + 1]), &args[index + 2], count);
        return;
    }
    parent();
    println!("test two_processes_append_2000_entries ... ok");
}

fn child(home: &Path, tag: &str, count: usize) {
    let files = MemoryFiles::open(home).expect("child opens the files");
    for index in 0..count {
        files.append_history(&format!("child {tag} entry {index}\ndetail {tag}-{index}")).expect("append");
    }
}

fn parent() {
    let home = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = ["a", "b"]
        .iter()
        .map(|tag| {
            Command::new(&exe)
                .arg("--append-child")
                .arg(home.path())
                .arg(tag)
                .arg(ENTRIES_PER_CHILD.to_string())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success(), "a child failed");
    }

    // Today may have rolled over during the run: read every day file.
    let history = home.path().join("memory/history");
    let mut seen = std::collections::BTreeSet::new();
    let mut total = 0;
    for entry in std::fs::read_dir(&history).unwrap() {
        let content = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        assert!(content.starts_with("\n#### "), "file must start with an entry");
        for block in content.split("\n#### ").skip(1) {
            let lines: Vec<&str> = block.lines().collect();
            assert_eq!(lines.len(), 3, "entry {block:?} is torn");
            let time = lines[0].as_bytes();
            assert!(
                time.len() == 5 && time[2] == b':' && lines[0].replace(':', "").bytes().all(|b| b.is_ascii_digit())
            );
            let id = lines[1].strip_prefix("child ").expect("body").replace(" entry ", "-");
            assert_eq!(lines[2], format!("detail {id}"));
            assert!(seen.insert(id), "duplicate entry");
            total += 1;
        }
    }
    assert_eq!(total, 2 * ENTRIES_PER_CHILD);
    assert_eq!(seen.len(), 2 * ENTRIES_PER_CHILD);

    // The incremental index updates of both processes add up.
    let index = rusqlite::Connection::open(home.path().join("memory_index.db")).unwrap();
    let chunks: i64 = index.query_row("SELECT count(*) FROM chunks", [], |row| row.get(0)).unwrap();
    assert_eq!(chunks, 2 * ENTRIES_PER_CHILD as i64);
    let files = MemoryFiles::open(home.path()).unwrap();
    assert_eq!(files.search_files("detail", 5_000).unwrap().len(), 2 * ENTRIES_PER_CHILD);
}
