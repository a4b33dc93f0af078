//! `cairn memory ...`: semantic memory, lessons, the audit trail and
//! statistics of `<home>/memory.db`.
//!
//! Exit status: 0 when the command did what it was asked (a write the
//! conflict ladder skipped included: that is an answer, not a failure), 1
//! when a key or lesson to read or remove does not exist, 2 when a write is
//! refused by a memory rule. With `--json` every command prints one JSON
//! object (or array) on stdout, refusals included.

use std::process::ExitCode;

use anyhow::Context as _;

use cairn_memory_core::{
    DeleteOutcome, JsonlLessonStore, LessonBook, LessonCategory, MemoryDb, MemoryError, Source, WriteOutcome, constants,
};
use serde_json::{Value, json};

use crate::home::Home;

/// `cairn memory ...`
#[derive(Debug, clap::Subcommand)]
pub(crate) enum MemoryCommand {
    /// Structured facts under `pref.`, `project.`, `user.` (and `lesson.`) keys.
    #[command(subcommand)]
    Semantic(SemanticCommand),
    /// Learned corrections ("always do X", "never do Y").
    #[command(subcommand)]
    Lessons(LessonsCommand),
    /// The newest audit events, newest first.
    Audit(AuditArgs),
    /// Counts of entries, lessons, tombstones, vectors and audit events.
    Stats(OutputArgs),
    /// The Markdown memory of preferences, projects and daily history: show, append, search, prune, reindex.
    #[command(subcommand)]
    Files(super::memory_files::FilesCommand),
    /// Bring Markdown memory and lessons.jsonl into memory.db (once; `--force` reruns).
    Migrate(super::memory_transfer::MigrateArgs),
    /// Write the whole memory as one versioned JSON document.
    Export(super::memory_transfer::ExportArgs),
    /// Merge an export document through the normal writers, or restore it exactly into an empty store (`--restore`).
    Import(super::memory_transfer::ImportArgs),
    /// Run both consolidation paths now over a transcript, with the configured LLM.
    Consolidate(super::memory_consolidate::ConsolidateArgs),
    /// Consolidation changesets waiting for review (`memory.write_approval`): list, show, approve, reject.
    #[command(subcommand)]
    Pending(super::memory_review::PendingCommand),
    /// Consolidation runs: list them, or revert the last N exactly.
    #[command(subcommand)]
    Runs(super::memory_review::RunsCommand),
    /// Conversation fragments: add, list, delete.
    #[command(subcommand)]
    Episodic(super::memory_episodic::EpisodicCommand),
    /// Search episodic memory (hybrid by default), or show its context block.
    Search(Box<super::memory_episodic::SearchArgs>),
    /// Import episodic rows from JSONL, then embed them.
    ImportEpisodic(super::memory_episodic::ImportArgs),
    /// Embed episodic rows stored without a vector.
    Backfill(super::memory_episodic::BackfillArgs),
    /// Forget for good: by id, key, text, date range or a whole project, from
    /// every layer; lists what would go unless `--yes`.
    Forget(super::memory_forget::ForgetArgs),
    /// Rebuild a damaged memory.db: copy it aside, salvage every readable
    /// row into a new file, re-index, and report what was lost. Stop
    /// `cairn serve` first.
    Repair(RepairArgs),
}

/// `cairn memory repair`
#[derive(Debug, clap::Args)]
pub(crate) struct RepairArgs {
    /// Rebuild even when the check passes, and replace an empty memory.db
    /// that sits beside other state files with a new store.
    #[arg(long)]
    force: bool,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// `cairn memory semantic ...`
#[derive(Debug, clap::Subcommand)]
pub(crate) enum SemanticCommand {
    /// Write a value (a plain string unless `--value-json`).
    Set(SetArgs),
    /// Print the live value of a key.
    Get(KeyArgs),
    /// List live entries, optionally under a key prefix.
    List(ListArgs),
    /// Tombstone a key (recorded in the audit trail).
    Delete(KeyArgs),
}

/// `cairn memory lessons ...`
#[derive(Debug, clap::Subcommand)]
pub(crate) enum LessonsCommand {
    /// Teach a lesson.
    Add(LessonAddArgs),
    /// List lessons, newest first.
    List(LessonListArgs),
    /// Remove a lesson by its `lesson.<hash>` key.
    Remove(KeyArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct OutputArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct SetArgs {
    /// The key, e.g. `pref.editor`.
    pub(crate) key: String,
    /// The value.
    pub(crate) value: String,
    /// Parse VALUE as JSON instead of storing it as a string.
    #[arg(long)]
    pub(crate) value_json: bool,
    /// Confidence of the write, 0 to 1.
    #[arg(long, default_value_t = 1.0)]
    pub(crate) confidence: f64,
    /// Who is writing: `user_explicit` (default) bypasses the confidence gate.
    #[arg(long, default_value = "user_explicit")]
    pub(crate) source: String,
    #[command(flatten)]
    pub(crate) scope: super::memory_forget::ScopeArgs,
    #[command(flatten)]
    pub(crate) output: OutputArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct KeyArgs {
    /// The key.
    pub(crate) key: String,
    #[command(flatten)]
    pub(crate) scope: super::memory_forget::ScopeArgs,
    #[command(flatten)]
    pub(crate) output: OutputArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ListArgs {
    /// Only keys starting with this prefix.
    #[arg(long, default_value = "")]
    pub(crate) prefix: String,
    #[command(flatten)]
    pub(crate) scope: super::memory_forget::ScopeArgs,
    #[command(flatten)]
    pub(crate) output: OutputArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct LessonAddArgs {
    /// What to do.
    pub(crate) rule: String,
    /// What not to do instead.
    #[arg(long = "not", value_name = "NEGATIVE")]
    pub(crate) not: Option<String>,
    /// `tool`, `preference` or `knowledge`.
    #[arg(long, default_value = "preference")]
    pub(crate) category: String,
    /// Who is teaching: `user_explicit` (default), `migration`, ...
    #[arg(long, default_value = "user_explicit")]
    pub(crate) source: String,
    #[command(flatten)]
    pub(crate) output: OutputArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct LessonListArgs {
    /// At most this many.
    #[arg(short = 'n', long, default_value_t = constants::MAX_LESSONS_IN_CONTEXT)]
    pub(crate) limit: usize,
    #[command(flatten)]
    pub(crate) output: OutputArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct AuditArgs {
    /// At most this many events.
    #[arg(short = 'n', long, default_value_t = 20)]
    pub(crate) limit: usize,
    #[command(flatten)]
    pub(crate) output: OutputArgs,
}

const EXIT_NOT_FOUND: u8 = 1;
const EXIT_REFUSED: u8 = 2;

pub(crate) fn run(home: &Home, command: &MemoryCommand) -> anyhow::Result<ExitCode> {
    match command {
        MemoryCommand::Files(command) => super::memory_files::run(home, command),
        MemoryCommand::Migrate(args) => super::memory_transfer::migrate(home, args),
        MemoryCommand::Export(args) => super::memory_transfer::export(home, args),
        MemoryCommand::Import(args) => super::memory_transfer::import(home, args),
        MemoryCommand::Consolidate(args) => super::memory_consolidate::run(home, args),
        MemoryCommand::Pending(command) => super::memory_review::pending(home, command),
        MemoryCommand::Runs(command) => super::memory_review::runs(home, command),
        MemoryCommand::Semantic(command) => semantic(home, &home.open_memory()?, command),
        MemoryCommand::Lessons(command) => lessons(home, command),
        MemoryCommand::Audit(args) => {
            let events = home.open_memory()?.audit(args.limit)?;
            if args.output.json {
                print_json(&serde_json::to_value(&events)?);
            } else {
                for event in &events {
                    println!(
                        "{:>6}  {}  {:<17} {:<8} {}  {}",
                        event.id,
                        event.at,
                        event.action.as_str(),
                        event.memory_type,
                        event.key.as_deref().unwrap_or("-"),
                        event.detail.as_deref().or(event.new_value.as_deref()).unwrap_or(""),
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        MemoryCommand::Episodic(command) => super::memory_episodic::episodic(home, command),
        MemoryCommand::Search(args) => super::memory_episodic::search(home, args),
        MemoryCommand::ImportEpisodic(args) => super::memory_episodic::import(home, args),
        MemoryCommand::Backfill(args) => super::memory_episodic::backfill(home, args),
        MemoryCommand::Repair(args) => repair(home, args),
        MemoryCommand::Forget(args) => super::memory_forget::forget(home, args),
        MemoryCommand::Stats(output) => {
            let stats = home.open_memory()?.stats()?;
            let value = serde_json::to_value(&stats)?;
            if output.json {
                print_json(&value);
            } else if let Value::Object(map) = value {
                for (name, value) in map {
                    println!("{name}: {value}");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

pub(crate) fn print_json(value: &Value) {
    println!("{value}");
}

/// Prints a refusal and returns exit status 2; store faults stay errors.
fn refused(error: MemoryError, json: bool) -> anyhow::Result<ExitCode> {
    let Some(rejected) = error.rejection() else { return Err(error.into()) };
    if json {
        print_json(&json!({"outcome": "rejected", "code": rejected.code(), "message": rejected.to_string()}));
    } else {
        eprintln!("refused: {rejected}");
    }
    Ok(ExitCode::from(EXIT_REFUSED))
}

fn print_outcome(outcome: &WriteOutcome, json: bool) -> anyhow::Result<()> {
    if json {
        print_json(&serde_json::to_value(outcome)?);
    } else {
        match outcome {
            WriteOutcome::Created { key } => println!("created {key}"),
            WriteOutcome::Updated { key } => println!("updated {key}"),
            WriteOutcome::Unchanged { key } => println!("unchanged {key}"),
            WriteOutcome::Skipped { key, reason } => println!("skipped {key}: {}", reason.code()),
            other => println!("{other:?}"),
        }
    }
    Ok(())
}

/// A malformed name is passed on as is, so the store refuses it and the
/// refusal lands in the audit trail like every other.
fn parse_source(name: &str) -> Source {
    name.parse::<Source>().unwrap_or_else(|_| Source::Other(name.to_owned()))
}

fn semantic(home: &Home, db: &MemoryDb, command: &SemanticCommand) -> anyhow::Result<ExitCode> {
    match command {
        SemanticCommand::Set(args) => {
            let json = args.output.json;
            let source = parse_source(&args.source);
            let scope = args.scope.fact_scope(home, &args.key)?;
            let result = if args.value_json {
                match serde_json::from_str::<Value>(&args.value) {
                    Ok(value) => db.write_semantic_in(&scope, &args.key, &value, args.confidence, source),
                    Err(_) => db.write_semantic_json(&args.key, &args.value, args.confidence, source),
                }
            } else {
                db.write_semantic_in(&scope, &args.key, &Value::String(args.value.clone()), args.confidence, source)
            };
            match result {
                Ok(outcome) => {
                    print_outcome(&outcome, json)?;
                    Ok(ExitCode::SUCCESS)
                }
                Err(error) => refused(error, json),
            }
        }
        SemanticCommand::Get(args) => match db.find_semantic(&args.scope.filter(home)?, &args.key)? {
            Some(entry) => {
                if args.output.json {
                    print_json(&serde_json::to_value(&entry)?);
                } else {
                    println!("{}", entry.value);
                    if let Some(evidence) = &entry.evidence {
                        println!("{}", evidence_line(evidence));
                    }
                }
                Ok(ExitCode::SUCCESS)
            }
            None => {
                if args.output.json {
                    print_json(&Value::Null);
                } else {
                    eprintln!("no live value under {}", args.key);
                }
                Ok(ExitCode::from(EXIT_NOT_FOUND))
            }
        },
        SemanticCommand::List(args) => {
            let entries = db.list_semantic_in(&args.prefix, &args.scope.filter(home)?)?;
            if args.output.json {
                print_json(&serde_json::to_value(&entries)?);
            } else {
                for entry in &entries {
                    match entry.scope.project() {
                        Some(project) => println!("{}: {}  [{project}]", entry.key, entry.value),
                        None => println!("{}: {}", entry.key, entry.value),
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        SemanticCommand::Delete(args) => {
            let scope =
                db.find_semantic(&args.scope.filter(home)?, &args.key)?.map(|entry| entry.scope).unwrap_or_default();
            let outcome = db.delete_semantic_in(&scope, &args.key, Source::UserExplicit)?;
            if args.output.json {
                print_json(&json!({"outcome": outcome, "key": args.key}));
            } else {
                match outcome {
                    DeleteOutcome::Deleted => println!("deleted {}", args.key),
                    DeleteOutcome::NotFound => eprintln!("no live value under {}", args.key),
                }
            }
            Ok(if outcome == DeleteOutcome::Deleted { ExitCode::SUCCESS } else { ExitCode::from(EXIT_NOT_FOUND) })
        }
    }
}

/// One line naming where consolidation found a row: session, message range, quote.
fn evidence_line(evidence: &cairn_memory_core::Evidence) -> String {
    format!(
        "evidence: session {}, messages #{}..#{}: {:?}",
        evidence.session_key, evidence.from_message, evidence.to_message, evidence.quote
    )
}

fn lessons(home: &Home, command: &LessonsCommand) -> anyhow::Result<ExitCode> {
    let jsonl = JsonlLessonStore::new(home.dir().join(constants::LESSONS_JSONL_FILE_NAME));
    // The JSONL file is the fallback for when memory.db cannot be opened.
    let database = match home.open_memory() {
        Ok(database) => Some(database),
        Err(error) => {
            eprintln!("warning: memory.db unavailable ({error:#}); using {}", jsonl.path().display());
            None
        }
    };
    let book = LessonBook::new(database.as_ref(), &jsonl);
    match command {
        LessonsCommand::Add(args) => {
            let json = args.output.json;
            let source = parse_source(&args.source);
            let category: LessonCategory = match args.category.parse() {
                Ok(category) => category,
                Err(rejected) => return refused(MemoryError::Rejected(rejected), json),
            };
            match book.write(&args.rule, args.not.as_deref(), category, source) {
                Ok(outcome) => {
                    if json {
                        print_json(&serde_json::to_value(&outcome)?);
                    } else {
                        print_outcome(&outcome.outcome, false)?;
                        for replaced in &outcome.replaced {
                            println!("replaced {} ({:?})", replaced.key, replaced.rule);
                        }
                    }
                    Ok(ExitCode::SUCCESS)
                }
                Err(error) => refused(error, json),
            }
        }
        LessonsCommand::List(args) => {
            let lessons = book.lessons(args.limit)?;
            if args.output.json {
                print_json(&serde_json::to_value(&lessons)?);
            } else {
                for lesson in &lessons {
                    println!("{}  [{}] {}", lesson.key, lesson.category, lesson.text());
                    if let Some(evidence) = &lesson.evidence {
                        println!("    {}", evidence_line(evidence));
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        LessonsCommand::Remove(args) => match book.remove(&args.key, Source::UserExplicit) {
            Ok(removed) => {
                if args.output.json {
                    print_json(&json!({"outcome": if removed { "deleted" } else { "not_found" }, "key": args.key}));
                } else if removed {
                    println!("removed {}", args.key);
                } else {
                    eprintln!("no lesson {}", args.key);
                }
                Ok(if removed { ExitCode::SUCCESS } else { ExitCode::from(EXIT_NOT_FOUND) })
            }
            Err(error) => refused(error, args.output.json),
        },
    }
}

fn repair(home: &Home, args: &RepairArgs) -> anyhow::Result<ExitCode> {
    if home.settings().storage_url.is_some() {
        anyhow::bail!(
            "the memory store is in PostgreSQL (storage.url); `cairn memory repair` rebuilds a memory.db file. \
             Use PostgreSQL's own tools (pg_dump, pg_restore) for the server's store"
        );
    }
    let path = home.dir().join(cairn_memory_core::constants::DB_FILE_NAME);
    if !path.exists() {
        anyhow::bail!("there is no {} to repair", path.display());
    }
    let report = cairn_memory_core::repair_database(&path, args.force)
        .with_context(|| format!("repairing {}", path.display()))?;
    if args.json {
        let mut value = serde_json::to_value(&report)?;
        for table in &report.tables {
            value[table.table.as_str()] =
                json!({"recovered": table.recovered, "lost": table.lost, "lost_is_estimate": table.lost_is_estimate});
        }
        println!("{value}");
        return Ok(ExitCode::SUCCESS);
    }
    if !report.repaired {
        println!("{} passed its integrity check; nothing to repair (--force rebuilds it anyway)", path.display());
        return Ok(ExitCode::SUCCESS);
    }
    for problem in &report.problems {
        println!("problem: {problem}");
    }
    if let Some(backup) = &report.backup {
        println!("the previous file is kept at {}", backup.display());
    }
    for table in &report.tables {
        let estimate = if table.lost_is_estimate { " (estimated)" } else { "" };
        println!("{}: {} recovered, {} lost{estimate}", table.table, table.recovered, table.lost);
    }
    println!("{} rebuilt", path.display());
    Ok(ExitCode::SUCCESS)
}
