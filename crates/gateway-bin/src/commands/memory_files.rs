//! `cairn memory files ...`: the Markdown memory (`preferences.md`,
//! `projects.md`, `history/YYYY-MM-DD.md`) and its keyword index.
//!
//! Exit status: 0 on success, 2 when an append is refused by a memory rule
//! (empty text, injected instructions). With `--json` every command prints
//! one JSON object on stdout.

use std::process::ExitCode;

use cairn_memory_core::{FilesContextCaps, constants};
use serde_json::json;

/// `cairn memory files ...`
#[derive(Debug, clap::Subcommand)]
pub(crate) enum FilesCommand {
    /// Print preferences, projects and the decayed history as a prompt sees them.
    Show(ShowArgs),
    /// Append an entry to today's history file.
    Append(AppendArgs),
    /// Keyword search (porter-stemmed, bm25-ranked) over the Markdown files.
    Search(SearchArgs),
    /// Delete day files older than the keep window.
    Prune(PruneArgs),
    /// Rebuild the keyword index from every file.
    Reindex(FilesOutputArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct FilesOutputArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ShowArgs {
    /// Days of history shown in full; older days decay.
    #[arg(long, default_value_t = constants::HISTORY_FULL_DAYS)]
    pub(crate) days: u32,
    #[command(flatten)]
    pub(crate) output: FilesOutputArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct AppendArgs {
    /// The entry's text.
    pub(crate) text: String,
    #[command(flatten)]
    pub(crate) output: FilesOutputArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct SearchArgs {
    /// Words to look for (plain text; never query syntax).
    pub(crate) query: String,
    /// At most this many hits.
    #[arg(short = 'n', long, default_value_t = 10)]
    pub(crate) limit: usize,
    #[command(flatten)]
    pub(crate) output: FilesOutputArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct PruneArgs {
    /// Keep day files this many days old or younger.
    #[arg(long, default_value_t = constants::HISTORY_KEEP_DAYS)]
    pub(crate) keep_days: u32,
    #[command(flatten)]
    pub(crate) output: FilesOutputArgs,
}

const EXIT_REFUSED: u8 = 2;

pub(crate) fn run(home: &crate::home::Home, command: &FilesCommand) -> anyhow::Result<ExitCode> {
    let files = home.open_files()?;
    match command {
        FilesCommand::Show(args) => {
            let caps = FilesContextCaps { history_days: args.days, ..FilesContextCaps::default() };
            let context = files.get_context(&caps)?;
            if args.output.json {
                println!("{}", serde_json::to_value(&context)?);
            } else if context.sections().next().is_none() {
                eprintln!("no Markdown memory yet in {}", files.memory_dir().display());
            } else {
                println!("{}", context.render());
            }
        }
        FilesCommand::Append(args) => match files.append_history(&args.text) {
            Ok(appended) => {
                if args.output.json {
                    println!(
                        "{}",
                        json!({"outcome": "appended", "file": appended.file, "date": appended.date, "time": appended.time})
                    );
                } else {
                    println!("appended to {} at {}", appended.file, appended.time);
                }
            }
            Err(error) => {
                let Some(rejected) = error.rejection() else { return Err(error.into()) };
                if args.output.json {
                    println!(
                        "{}",
                        json!({"outcome": "rejected", "code": rejected.code(), "message": rejected.to_string()})
                    );
                } else {
                    eprintln!("refused: {rejected}");
                }
                return Ok(ExitCode::from(EXIT_REFUSED));
            }
        },
        FilesCommand::Search(args) => {
            // A one-shot process: pick up hand edits first (only changed files are re-read).
            files.refresh_index()?;
            let hits = files.search_files(&args.query, args.limit)?;
            if args.output.json {
                println!("{}", serde_json::to_value(&hits)?);
            } else {
                for hit in &hits {
                    let when = match (&hit.date, &hit.time) {
                        (Some(date), Some(time)) => format!(" {date} {time}"),
                        (Some(date), None) => format!(" {date}"),
                        _ => String::new(),
                    };
                    println!("{}:{}{when}  {}", hit.file, hit.line, hit.snippet.replace('\n', " "));
                }
            }
        }
        FilesCommand::Prune(args) => {
            let report = files.prune_history(args.keep_days)?;
            if args.output.json {
                println!("{}", serde_json::to_value(&report)?);
            } else {
                println!("deleted {} day files, kept {}", report.deleted.len(), report.kept);
            }
        }
        FilesCommand::Reindex(output) => {
            let report = files.rebuild_index()?;
            if output.json {
                println!("{}", serde_json::to_value(&report)?);
            } else {
                println!("indexed {} files ({} chunks)", report.files_indexed, report.chunks_written);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
