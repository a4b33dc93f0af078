//! The guard's own evaluation corpus (`test_data/corpus.jsonl`, written by
//! `test_data/generate.py`): every row is asserted.
//!
//! - `secrets` positives: a credential is found and the row's `secret` part
//!   does not survive [`cairn_guard::redact_all`];
//! - `secrets` near misses: redaction leaves the text unchanged;
//! - `injection` positives: the screen flags the text; near misses: it does
//!   not;
//! - `benign` rows: neither flagged nor changed by redaction.

use serde_json::Value;

const CORPUS: &str = include_str!("../test_data/corpus.jsonl");

fn rows() -> Vec<Value> {
    CORPUS
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).expect("corpus row is JSON"))
        .collect()
}

fn field<'a>(row: &'a Value, name: &str) -> &'a str {
    row[name].as_str().unwrap_or_else(|| panic!("row without `{name}`: {row}"))
}

/// What is wrong with `row`, or `None` when the guard handles it as labelled.
fn check(row: &Value) -> Option<String> {
    let text = field(row, "text");
    let redacted = cairn_guard::redact_all(text);
    let findings = cairn_guard::screen_all(text);
    match (field(row, "kind"), field(row, "label")) {
        ("secrets", "positive") => {
            let secret = field(row, "secret");
            if cairn_guard::find_credentials(text).is_empty() && cairn_guard::find_exfiltration_urls(text).is_empty() {
                Some("no credential found".to_owned())
            } else if redacted.contains(secret) {
                Some(format!("{secret:?} survived: {redacted:?}"))
            } else {
                None
            }
        }
        ("secrets", "near-miss") => (redacted != text).then(|| format!("redacted to {redacted:?}")),
        ("injection", "positive") => findings.is_empty().then(|| "not flagged".to_owned()),
        ("injection", "near-miss") => (!findings.is_empty()).then(|| format!("flagged by {findings:?}")),
        ("benign", "benign") => {
            if !findings.is_empty() {
                Some(format!("flagged by {findings:?}"))
            } else {
                (redacted != text).then(|| format!("redacted to {redacted:?}"))
            }
        }
        (kind, label) => Some(format!("unknown kind/label {kind}/{label}")),
    }
}

#[test]
fn every_corpus_row_is_handled_as_labelled() {
    let rows = rows();
    assert!(rows.len() > 500, "corpus has {} rows", rows.len());
    let failures: Vec<String> = rows
        .iter()
        .filter_map(|row| {
            check(row).map(|problem| {
                format!("{} {}: {problem}\n    {:?}", field(row, "family"), field(row, "label"), field(row, "text"))
            })
        })
        .collect();
    assert!(failures.is_empty(), "{} of {} rows fail:\n{}", failures.len(), rows.len(), failures.join("\n"));
}

#[test]
fn every_family_has_ten_positives_and_ten_near_misses() {
    let mut counts: std::collections::BTreeMap<(&str, &str), usize> = Default::default();
    let rows = rows();
    for row in &rows {
        *counts.entry((field(row, "family"), field(row, "label"))).or_default() += 1;
    }
    for (family, _) in counts.keys().filter(|(_, label)| *label == "positive") {
        for label in ["positive", "near-miss"] {
            let count = counts.get(&(*family, label)).copied().unwrap_or(0);
            assert!(count >= 10, "{family} has {count} {label} rows");
        }
    }
}
