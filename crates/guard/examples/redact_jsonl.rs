//! Reads JSON lines with a `text` field (from the file named by the first
//! argument, or standard input) and writes each row back with `found`
//! (whether [`cairn_guard::redact_all`] changed the text) and `redacted`.
//! Drives the catalogue harness (`test_data/catalogue.py`) without a
//! workspace build:
//!
//! ```text
//! cargo run -p cairn-guard --example redact_jsonl -- rows.jsonl > verdicts.jsonl
//! ```

use std::io::{BufRead, BufReader, Write};

fn main() -> anyhow::Result<()> {
    let input: Box<dyn BufRead> = match std::env::args().nth(1) {
        Some(path) => Box::new(BufReader::new(std::fs::File::open(path)?)),
        None => Box::new(BufReader::new(std::io::stdin())),
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for line in input.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let mut row: serde_json::Value = serde_json::from_str(&line)?;
        let text = row["text"].as_str().unwrap_or_default().to_owned();
        let redacted = cairn_guard::redact_all(&text);
        row["found"] = serde_json::Value::Bool(redacted != text);
        row["redacted"] = serde_json::Value::String(redacted.into_owned());
        serde_json::to_writer(&mut out, &row)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}
