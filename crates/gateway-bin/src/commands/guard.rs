//! `cairn guard scan`: batch screening of JSONL rows.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Subcommand, ValueEnum};
use serde_json::{Value, json};

#[derive(Debug, Subcommand)]
pub(crate) enum GuardCommand {
    /// Screen JSONL rows (each with a `text` field) and print one verdict per row.
    Scan(ScanArgs),
}

#[derive(Debug, Args)]
pub(crate) struct ScanArgs {
    /// What to look for.
    #[arg(long, value_enum)]
    pub(crate) kind: ScanKind,
    /// Input file, one JSON object per line; `-` reads standard input.
    #[arg(long, value_name = "FILE")]
    pub(crate) jsonl: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ScanKind {
    /// Prompt-injection screen.
    Injection,
    /// Credential and exfiltration-URL redaction.
    Secrets,
}

/// Reads rows with a `text` field and prints one verdict object per input
/// line, in input order. A malformed line yields an error object for that
/// line; the scan goes on.
pub(crate) fn scan(args: &ScanArgs) -> anyhow::Result<ExitCode> {
    let input = super::input_lines(&args.jsonl)?;
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut summary = Summary::default();
    for line in cairn_guard::UntrustedLines::new(input) {
        let line = line.context("reading the input")?;
        let line_number = line.number;
        let parsed = match &line.text {
            Ok(text) if text.trim().is_empty() => continue,
            Ok(text) => parse_row(text),
            Err(problem) => Err(problem.to_string()),
        };
        let verdict = match parsed {
            Ok((id, text)) => {
                let verdict = verdict(args.kind, id, &text);
                summary.rows += 1;
                if verdict["flagged"] == Value::Bool(true) {
                    summary.flagged += 1;
                }
                verdict
            }
            Err(error) => {
                summary.errors += 1;
                json!({ "line": line_number, "error": error })
            }
        };
        serde_json::to_writer(&mut out, &verdict)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    eprintln!(
        "guard scan ({}): {} rows, {} flagged, {} malformed",
        match args.kind {
            ScanKind::Injection => "injection",
            ScanKind::Secrets => "secrets",
        },
        summary.rows,
        summary.flagged,
        summary.errors
    );
    Ok(ExitCode::SUCCESS)
}

#[derive(Default)]
struct Summary {
    rows: usize,
    flagged: usize,
    errors: usize,
}

fn parse_row(line: &str) -> Result<(Value, String), String> {
    let row: Value = serde_json::from_str(line).map_err(|error| format!("invalid JSON: {error}"))?;
    let Value::Object(mut row) = row else {
        return Err("row is not a JSON object".to_owned());
    };
    let id = row.remove("id").unwrap_or(Value::Null);
    match row.remove("text") {
        Some(Value::String(text)) => Ok((id, text)),
        Some(_) => Err("field `text` is not a string".to_owned()),
        None => Err("row has no `text` field".to_owned()),
    }
}

fn verdict(kind: ScanKind, id: Value, text: &str) -> Value {
    match kind {
        ScanKind::Injection => {
            let rules: Vec<&str> = cairn_guard::screen_all(text).iter().map(|finding| finding.rule).collect();
            json!({ "id": id, "flagged": !rules.is_empty(), "rules": rules })
        }
        ScanKind::Secrets => {
            let mut rules: Vec<&str> = cairn_guard::find_credentials(text).iter().map(|finding| finding.rule).collect();
            if !cairn_guard::find_exfiltration_urls(text).is_empty() {
                rules.push("exfil-url");
            }
            rules.sort_unstable();
            rules.dedup();
            let redacted = cairn_guard::redact_all(text);
            json!({ "id": id, "flagged": !rules.is_empty(), "rules": rules, "redacted": redacted })
        }
    }
}
