//! `cairn memory pending list|show|approve|reject` (consolidation
//! changesets waiting for review under `memory.write_approval`) and
//! `cairn memory runs list|revert` (undo of the last consolidation runs).
//!
//! Exit status: 0 when the command did what it was asked, 2 when a rule
//! refused it (an unknown changeset, a row out of range or already
//! decided, an expired or closed changeset, a revert that finds a row
//! changed since its run, nothing to revert). With `--json` every command
//! prints one JSON object (or array), refusals included.

use std::process::ExitCode;

use cairn_memory_core::{
    ConsolidationRun, MemoryError, ProposedWrite, RunState, approve_changeset, reject_changeset,
    revert_consolidation_runs,
};
use serde_json::json;

use crate::clock::now_ms;
use crate::home::Home;

/// Exit status of a refused command.
const EXIT_REFUSED: u8 = 2;

/// `cairn memory pending ...`
#[derive(Debug, clap::Subcommand)]
pub(crate) enum PendingCommand {
    /// Changesets waiting for review, newest first.
    List(ListArgs),
    /// One changeset: every row with its ladder and screen outcome and its evidence.
    Show(ShowArgs),
    /// Approve a changeset whole, or the rows given with `--row`: they are written now, through the normal writers.
    Approve(DecideArgs),
    /// Reject a changeset whole, or the rows given with `--row`: nothing of them is written.
    Reject(DecideArgs),
}

/// `cairn memory runs ...`
#[derive(Debug, clap::Subcommand)]
pub(crate) enum RunsCommand {
    /// Consolidation runs (applied, pending, rejected, expired, reverted), newest first.
    List(ListArgs),
    /// Revert the last N applied runs exactly: what they added removed, what they changed put back.
    Revert(RevertArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct ListArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ShowArgs {
    /// The changeset's id.
    pub(crate) id: i64,
    /// Print JSON instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct DecideArgs {
    /// The changeset's id.
    pub(crate) id: i64,
    /// Only this row (numbered from 1, as `show` lists them); repeat for several.
    #[arg(long = "row", value_name = "N")]
    pub(crate) rows: Vec<usize>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct RevertArgs {
    /// How many of the newest applied runs to revert.
    #[arg(long, default_value_t = 1)]
    pub(crate) runs: usize,
    /// Print JSON instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

fn refused(error: MemoryError, json: bool) -> anyhow::Result<ExitCode> {
    let Some(rejected) = error.rejection() else { return Err(error.into()) };
    if json {
        println!("{}", json!({"outcome": "rejected", "code": rejected.code(), "message": rejected.to_string()}));
    } else {
        eprintln!("refused: {rejected}");
    }
    Ok(ExitCode::from(EXIT_REFUSED))
}

/// One line describing a proposed write.
pub(crate) fn describe(write: &ProposedWrite) -> String {
    match write {
        ProposedWrite::Fact { scope, key, value, confidence, .. } => {
            let scope = if scope == "global" { String::new() } else { format!(" [{scope}]") };
            format!("fact {key} = {value} (confidence {confidence}){scope}")
        }
        ProposedWrite::Lesson { rule, not, category, .. } => match not {
            Some(not) => format!("lesson ({category}) {rule} — NOT: {not}"),
            None => format!("lesson ({category}) {rule}"),
        },
        ProposedWrite::Episode { text, .. } => format!("episode {text}"),
        ProposedWrite::History { text, .. } => format!("history entry {text}"),
        ProposedWrite::Preferences { .. } => "replace preferences.md".to_owned(),
        ProposedWrite::Projects { .. } => "replace projects.md".to_owned(),
        _ => write.kind().to_owned(),
    }
}

fn evidence_of(write: &ProposedWrite) -> Option<&cairn_memory_core::Evidence> {
    match write {
        ProposedWrite::Fact { evidence, .. }
        | ProposedWrite::Lesson { evidence, .. }
        | ProposedWrite::Episode { evidence, .. } => Some(evidence),
        _ => None,
    }
}

/// Prints a changeset (as JSON with `json`), or the refusal.
fn answer(result: Result<ConsolidationRun, MemoryError>, json: bool) -> anyhow::Result<ExitCode> {
    match result {
        Ok(run) => {
            if json {
                println!("{}", serde_json::to_value(&run)?);
            } else {
                print_run(&run);
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => refused(error, json),
    }
}

fn print_summary(run: &ConsolidationRun) {
    let pending = run.rows.iter().filter(|row| row.status == cairn_memory_core::RowStatus::Pending).count();
    println!(
        "{}  {:<8}  {:?} path of session {}  {} rows ({} pending), {} changes",
        run.id,
        run.state.as_str(),
        run.path,
        run.session_key,
        run.rows.len(),
        pending,
        run.applied.len()
    );
}

fn print_run(run: &ConsolidationRun) {
    print_summary(run);
    if let Some(at) = run.expires_at {
        println!("expires at {at} (Unix ms)");
    }
    for row in &run.rows {
        let status = serde_json::to_value(row.status).ok().and_then(|value| value.as_str().map(str::to_owned));
        println!(
            "#{} [{}] {}  ladder: {}  screen: {}{}",
            row.row,
            status.unwrap_or_default(),
            describe(&row.write),
            if row.ladder.is_empty() { "-" } else { &row.ladder },
            if row.screen.is_empty() { "-" } else { &row.screen },
            row.outcome.as_ref().map(|outcome| format!("  outcome: {outcome}")).unwrap_or_default()
        );
        if let Some(evidence) = evidence_of(&row.write) {
            println!(
                "    evidence: session {} messages {}..={}: \"{}\"",
                evidence.session_key, evidence.from_message, evidence.to_message, evidence.quote
            );
        }
    }
}

pub(crate) fn pending(home: &Home, command: &PendingCommand) -> anyhow::Result<ExitCode> {
    let db = home.open_memory()?;
    let ttl = home.settings().skills.auto.pending_ttl_ms();
    let now = now_ms();
    match command {
        PendingCommand::List(args) => {
            let runs: Vec<ConsolidationRun> =
                db.consolidation_runs(now, ttl)?.into_iter().filter(|run| run.state == RunState::Pending).collect();
            if args.json {
                println!("{}", serde_json::to_value(&runs)?);
            } else if runs.is_empty() {
                println!("no changeset is waiting for review");
            } else {
                runs.iter().for_each(print_summary);
            }
            Ok(ExitCode::SUCCESS)
        }
        PendingCommand::Show(args) => answer(db.consolidation_run(args.id, now, ttl), args.json),
        PendingCommand::Approve(args) | PendingCommand::Reject(args) => {
            let rows = (!args.rows.is_empty()).then_some(args.rows.as_slice());
            let result = if matches!(command, PendingCommand::Approve(_)) {
                let files = home.open_files()?;
                approve_changeset(&db, &files, args.id, rows, now, ttl)
            } else {
                reject_changeset(&db, args.id, rows, now, ttl)
            };
            answer(result, args.json)
        }
    }
}

pub(crate) fn runs(home: &Home, command: &RunsCommand) -> anyhow::Result<ExitCode> {
    let db = home.open_memory()?;
    match command {
        RunsCommand::List(args) => {
            let ttl = home.settings().skills.auto.pending_ttl_ms();
            let runs = db.consolidation_runs(now_ms(), ttl)?;
            if args.json {
                println!("{}", serde_json::to_value(&runs)?);
            } else if runs.is_empty() {
                println!("no consolidation run is recorded");
            } else {
                runs.iter().for_each(print_summary);
            }
            Ok(ExitCode::SUCCESS)
        }
        RunsCommand::Revert(args) => {
            let files = home.open_files()?;
            match revert_consolidation_runs(&db, &files, args.runs) {
                Ok(report) => {
                    if args.json {
                        println!("{}", serde_json::to_value(&report)?);
                    } else {
                        println!(
                            "reverted runs {:?}: {} semantic rows put back, {} episodic rows removed, {} files put back",
                            report.runs, report.semantic_restored, report.episodic_removed, report.files_restored
                        );
                    }
                    Ok(ExitCode::SUCCESS)
                }
                Err(error) => refused(error, args.json),
            }
        }
    }
}
