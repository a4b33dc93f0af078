//! Public documentation that names credentials without holding any
//! (`tests/data/docs`, see its `SOURCES.md`; the skills of
//! `../shared/evaldata/skills-dev` when present; every `*.md` under
//! `$CAIRN_GUARD_DOCS` when set): the share of lines in which
//! [`cairn_guard::find_credentials`] finds a credential stays at or under
//! 0.3 %, and the rules for instructions hidden in a document (which look
//! for the shape of a letter or notice around a request) stay quiet on
//! documentation read in chunks of three paragraphs.

use std::path::{Path, PathBuf};

/// At most this share of documentation lines may be redacted.
const MAX_REDACTED_SHARE: f64 = 0.003;

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<PathBuf> = entries.filter_map(|entry| entry.ok().map(|e| e.path())).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            markdown_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "md" || ext == "mdx")
            && path.file_name().is_some_and(|name| name != "SOURCES.md")
        {
            out.push(path);
        }
    }
}

/// (lines, lines with a credential found) over `files`.
fn redacted_lines(files: &[PathBuf]) -> (usize, Vec<String>) {
    let mut total = 0;
    let mut redacted = Vec::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(file) else { continue };
        for (number, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            total += 1;
            if !cairn_guard::find_credentials(line).is_empty() {
                let after = cairn_guard::redact_credentials(line);
                redacted.push(format!("{}:{}: {line}\n    -> {after}", file.display(), number + 1));
            }
        }
    }
    (total, redacted)
}

/// The rules that fire on requests inside a mail, a letter or a notice.
const IN_DOCUMENT_RULES: &[&str] = &["embedded-task-request", "answer-directive-in-document", "task-hijack"];

/// At most this share of three-paragraph documentation chunks may be
/// flagged by [`IN_DOCUMENT_RULES`] (measured when written: 2 of 11,190
/// chunks of the cargo registry's 817 crate docs, both a changelog line
/// "order #134" beside "implement … function").
const MAX_IN_DOCUMENT_SHARE: f64 = 0.001;

/// (chunks, chunks flagged by [`IN_DOCUMENT_RULES`]) over `files`.
fn screened_chunks(files: &[PathBuf]) -> (usize, Vec<String>) {
    let mut total = 0;
    let mut flagged = Vec::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(file) else { continue };
        for chunk in text.split("\n\n").collect::<Vec<_>>().chunks(3) {
            let chunk = chunk.join("\n\n");
            if chunk.trim().is_empty() {
                continue;
            }
            total += 1;
            let rules: Vec<&str> = cairn_guard::screen_all(&chunk)
                .into_iter()
                .map(|finding| finding.rule)
                .filter(|rule| IN_DOCUMENT_RULES.contains(rule))
                .collect();
            if !rules.is_empty() {
                let start: String = chunk.chars().take(160).collect();
                flagged.push(format!("{}: {rules:?} {start:?}", file.display()));
            }
        }
    }
    (total, flagged)
}

fn check(name: &str, files: &[PathBuf]) {
    let (chunks, flagged) = screened_chunks(files);
    let share = flagged.len() as f64 / chunks.max(1) as f64;
    eprintln!(
        "{name}: {chunks} chunks, {} flagged as requests inside a document ({:.2} %)",
        flagged.len(),
        100.0 * share
    );
    for chunk in &flagged {
        eprintln!("  {chunk}");
    }
    assert!(share <= MAX_IN_DOCUMENT_SHARE, "{name}: {} of {chunks} documentation chunks flagged", flagged.len());
    check_lines(name, files);
}

fn check_lines(name: &str, files: &[PathBuf]) {
    let (total, redacted) = redacted_lines(files);
    let share = redacted.len() as f64 / total.max(1) as f64;
    eprintln!("{name}: {} files, {total} lines, {} redacted ({:.2} %)", files.len(), redacted.len(), 100.0 * share);
    for line in &redacted {
        eprintln!("  {line}");
    }
    assert!(share <= MAX_REDACTED_SHARE, "{name}: {} of {total} documentation lines redacted", redacted.len());
}

#[test]
fn committed_documentation_lines_stay_clean() {
    let mut files = Vec::new();
    markdown_files(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/docs"), &mut files);
    assert!(files.len() >= 2, "documentation corpus missing");
    check("tests/data/docs", &files);
}

#[test]
fn published_skills_stay_clean() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/evaldata/skills-dev");
    let mut files = Vec::new();
    markdown_files(&dir, &mut files);
    if files.is_empty() {
        eprintln!("skipping: {} is not present", dir.display());
        return;
    }
    check("skills-dev", &files);
}

#[test]
fn documentation_under_cairn_guard_docs_stays_clean() {
    let Some(dir) = std::env::var_os("CAIRN_GUARD_DOCS") else {
        eprintln!("skipping: CAIRN_GUARD_DOCS is not set");
        return;
    };
    let mut files = Vec::new();
    markdown_files(Path::new(&dir), &mut files);
    check(&format!("CAIRN_GUARD_DOCS={}", Path::new(&dir).display()), &files);
}
