//! Command-line surface of `cairn`, parsed with clap.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Cairn: long-term memory, skills, hooks and context for AI agent hosts.
#[derive(Debug, Parser)]
#[command(name = "cairn", version, about, long_about = None)]
pub(crate) struct Cli {
    /// Cairn's data home (memory, skills, models, config.json).
    /// Defaults to `<data dir>/cairn`.
    #[arg(long, global = true, env = "CAIRN_HOME", value_name = "DIR")]
    pub(crate) home: Option<PathBuf>,

    #[command(subcommand)]
    pub(crate) command: Command,
}

impl Cli {
    /// The home directory this invocation works in.
    #[allow(dead_code)]
    pub(crate) fn home_dir(&self) -> PathBuf {
        self.home.clone().unwrap_or_else(|| {
            dirs::data_dir()
                .unwrap_or_else(|| PathBuf::from("."))
                .join("cairn")
        })
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Text and path safety checks.
    #[command(subcommand)]
    Guard(GuardCommand),
}

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
