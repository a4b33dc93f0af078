//! Screens every row of a JSONL file and prints how many rows of each
//! family the injection screen flagged. A training harness for rule work:
//! the rows come from public catalogues and hand-written paraphrases, never
//! from the evaluation splits.
//!
//! ```text
//! CAIRN_GUARD_JSONL=/tmp/rows.jsonl cargo run -p cairn-guard --example screen_jsonl
//! ```
//!
//! Each row needs `text` and `family`; `label` (`positive` or anything
//! else) decides whether a flag counts as a hit or a false alarm. Set
//! `CAIRN_GUARD_SHOW=misses` (or `alarms`) to print those rows, `rules` for
//! counts per rule.

use std::collections::BTreeMap;

use anyhow::Context as _;

fn main() -> anyhow::Result<()> {
    let path = std::env::var("CAIRN_GUARD_JSONL").context("set CAIRN_GUARD_JSONL to a JSONL file")?;
    let show = std::env::var("CAIRN_GUARD_SHOW").unwrap_or_default();
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    let mut by_family: BTreeMap<(String, bool), (usize, usize)> = BTreeMap::new();
    let mut by_rule: BTreeMap<(String, bool, &str), usize> = BTreeMap::new();
    for line in text.lines().filter(|line| !line.trim().is_empty()) {
        let row: serde_json::Value = serde_json::from_str(line).context("parsing a row")?;
        let text = row["text"].as_str().context("row without text")?;
        let family = row["family"].as_str().unwrap_or("?").to_owned();
        let positive = row["label"].as_str().unwrap_or("positive") == "positive";
        let findings = cairn_guard::screen_all(text);
        let entry = by_family.entry((family.clone(), positive)).or_default();
        entry.1 += 1;
        entry.0 += usize::from(!findings.is_empty());
        for finding in &findings {
            *by_rule.entry((family.clone(), positive, finding.rule)).or_default() += 1;
        }
        let wanted = (show == "misses" && positive && findings.is_empty())
            || (show == "alarms" && !positive && !findings.is_empty());
        if wanted {
            let rules: Vec<&str> = findings.iter().map(|finding| finding.rule).collect();
            let head: String = text.chars().take(160).collect();
            println!("  {rules:?} {head}");
        }
    }
    let (mut hits, mut positives, mut alarms, mut negatives) = (0, 0, 0, 0);
    for ((family, positive), (flagged, rows)) in &by_family {
        let kind = if *positive { "positive" } else { "negative" };
        println!("{family:32} {kind:8} {flagged:4}/{rows:<4}");
        if *positive {
            hits += flagged;
            positives += rows;
        } else {
            alarms += flagged;
            negatives += rows;
        }
    }
    println!("recall {hits}/{positives}, false alarms {alarms}/{negatives}");
    if show == "rules" {
        for ((family, positive, rule), count) in &by_rule {
            let kind = if *positive { "positive" } else { "negative" };
            println!("{family:32} {kind:8} {rule:36} {count}");
        }
    }
    Ok(())
}
