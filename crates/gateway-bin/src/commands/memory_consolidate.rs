//! `cairn memory consolidate --session KEY --transcript FILE.jsonl`: runs
//! both consolidation paths now over a transcript, asking the LLM configured
//! in `config.json` (`llm.base_url`, `llm.model`) or given on the command
//! line.
//!
//! Exit status: 0 when both paths ran (items a writer refused are reported,
//! not failures), 1 when the transcript cannot be read, no LLM is
//! configured, the LLM fails, or its reply has no usable JSON (nothing is
//! written then and the session's history marker stays where it was).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use cairn_memory_core::{Consolidator, ConsolidatorConfig, MemoryError, TranscriptMessage};
use serde_json::json;

use crate::home::Home;
use crate::llm::{LlmClient, LlmSummarizer};

/// `cairn memory consolidate`
#[derive(Debug, clap::Args)]
pub(crate) struct ConsolidateArgs {
    /// The session the transcript belongs to.
    #[arg(long, value_name = "KEY")]
    pub(crate) session: String,
    /// One `{"role": ..., "content": ...}` object per line.
    #[arg(long, value_name = "FILE.jsonl")]
    pub(crate) transcript: PathBuf,
    #[command(flatten)]
    pub(crate) llm: crate::llm::LlmArgs,
    /// Print JSON instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Largest transcript `cairn memory consolidate` reads.
const MAX_TRANSCRIPT_BYTES: u64 = 64 * 1024 * 1024;

fn read_transcript(path: &std::path::Path) -> anyhow::Result<Vec<TranscriptMessage>> {
    let text = cairn_guard::safe_read_file_bounded(path, MAX_TRANSCRIPT_BYTES)
        .with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(index, line)| {
            serde_json::from_str::<TranscriptMessage>(line)
                .with_context(|| format!("{}:{}: not a {{\"role\", \"content\"}} object", path.display(), index + 1))
        })
        .collect()
}

pub(crate) fn run(home: &Home, args: &ConsolidateArgs) -> anyhow::Result<ExitCode> {
    let messages = match read_transcript(&args.transcript) {
        Ok(messages) => messages,
        Err(error) => {
            eprintln!("{error:#}");
            return Ok(ExitCode::from(1));
        }
    };
    let config = home.settings();
    let Some(client) = LlmClient::from_config(&config.llm) else {
        eprintln!(
            "no LLM configured: set llm.base_url and llm.model in config.json or pass --llm-base-url and --llm-model"
        );
        return Ok(ExitCode::from(1));
    };
    let db = Arc::new(home.open_memory()?);
    let files = Arc::new(home.open_files()?);
    let consolidator_config = ConsolidatorConfig {
        idle: Duration::from_secs_f64(config.memory.history_idle_hours.max(0.0) * 3600.0),
        write_approval: config.write_approval,
        ..ConsolidatorConfig::default()
    };
    let consolidator = Consolidator::new(home.dir(), db, files, Arc::new(LlmSummarizer(client)), consolidator_config);
    match consolidator.consolidate_now(&args.session, &messages) {
        Ok((preferences, history)) => {
            if args.json {
                println!("{}", json!({"preferences": preferences, "history": history}));
            } else {
                for report in [&preferences, &history] {
                    println!(
                        "{:?} path over {} messages: {} semantic, {} episodic, {} lessons written; history appended: {}; {} refused",
                        report.path,
                        report.messages,
                        report.counts.semantic_written,
                        report.counts.episodic_written,
                        report.counts.lessons_written,
                        report.history_appended,
                        report.refused.len()
                    );
                    report.refused.iter().for_each(|item| println!("{item}"));
                    if let Some(id) = report.changeset {
                        println!(
                            "held for review as changeset {id} ({} rows): cairn memory pending show {id}",
                            report.pending
                        );
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(error @ (MemoryError::InvalidReply { .. } | MemoryError::Summarizer { .. })) => {
            if args.json {
                println!("{}", json!({"outcome": "failed", "message": error.to_string()}));
            }
            eprintln!("{error}");
            Ok(ExitCode::from(1))
        }
        Err(error) => Err(error.into()),
    }
}
