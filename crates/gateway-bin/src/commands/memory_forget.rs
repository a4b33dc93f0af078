//! `cairn memory forget`, and the scope flags the memory commands share.
//! A read sees the project of the directory it runs in (its git
//! repository) and the global memory unless told otherwise; a write goes
//! to the global memory unless `--project` names a project (the command
//! line is the user's own tool, not a session in a project).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use cairn_memory_core::{ForgetReport, ForgetRequest, Scope, ScopeFilter, Source, forget_memory};

use crate::home::Home;

/// Which project a memory command works in.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct ScopeArgs {
    /// The project (a directory; its git repository when it is in one).
    /// Reads see it beside the global memory, by default the working
    /// directory's; writes go to it only when it is given.
    #[arg(long, value_name = "DIR")]
    pub(crate) project: Option<PathBuf>,
    /// Work in the global memory only, outside every project.
    #[arg(long, conflicts_with_all = ["project", "all_projects"])]
    pub(crate) global: bool,
    /// Read every project's memory (a read across projects).
    #[arg(long)]
    pub(crate) all_projects: bool,
}

impl ScopeArgs {
    /// The project named by the flags or the working directory.
    pub(crate) fn project(&self, home: &Home) -> anyhow::Result<Option<Scope>> {
        if self.global {
            return Ok(None);
        }
        let dir = match &self.project {
            Some(dir) => std::path::absolute(dir).with_context(|| format!("--project {}", dir.display()))?,
            None => std::env::current_dir().context("reading the working directory")?,
        };
        Ok(cairn_memory_core::project_of(&dir, home.settings().project_rule))
    }

    /// What a read sees: the project and global, or every scope with `--all-projects`.
    pub(crate) fn filter(&self, home: &Home) -> anyhow::Result<ScopeFilter> {
        if self.all_projects {
            return Ok(ScopeFilter::All);
        }
        Ok(ScopeFilter::visible_from(self.project(home)?.as_ref()))
    }

    /// The project `--project` names for a write (none without the flag).
    fn written_project(&self, home: &Home) -> anyhow::Result<Option<Scope>> {
        if self.project.is_none() { Ok(None) } else { self.project(home) }
    }

    /// Where a fact goes: the named project for a `project.` key, global otherwise.
    pub(crate) fn fact_scope(&self, home: &Home, key: &str) -> anyhow::Result<Scope> {
        Ok(Scope::for_fact(key, self.written_project(home)?.as_ref()))
    }

    /// Where an episode goes: the named project, global otherwise.
    pub(crate) fn episode_scope(&self, home: &Home) -> anyhow::Result<Scope> {
        Ok(self.written_project(home)?.unwrap_or_default())
    }
}

/// `cairn memory forget`
#[derive(Debug, clap::Args)]
pub(crate) struct ForgetArgs {
    /// An episodic row id (repeatable).
    #[arg(long = "id", value_name = "ID")]
    ids: Vec<i64>,
    /// A fact or lesson key (repeatable).
    #[arg(long = "key", value_name = "KEY")]
    keys: Vec<String>,
    /// Forget everything whose text contains this (case and spacing ignored).
    #[arg(long)]
    query: Option<String>,
    /// Only items written at or after this time (`YYYY-MM-DD` or RFC 3339).
    #[arg(long)]
    since: Option<String>,
    /// Only items written before this time (`YYYY-MM-DD` or RFC 3339).
    #[arg(long)]
    until: Option<String>,
    /// Forget the project's memory only (with nothing else given: all of it).
    #[arg(long, conflicts_with = "all_projects")]
    whole_project: bool,
    /// Forget for real. Without it the command lists what would go and changes nothing.
    #[arg(long)]
    yes: bool,
    #[command(flatten)]
    scope: ScopeArgs,
    #[command(flatten)]
    output: super::memory::OutputArgs,
}

/// A time bound: `YYYY-MM-DD` (local midnight) or an RFC 3339 time, as Unix milliseconds.
pub(crate) fn parse_time_bound(text: &str) -> anyhow::Result<i64> {
    let text = text.trim();
    if let Ok(timestamp) = text.parse::<jiff::Timestamp>() {
        return Ok(timestamp.as_millisecond());
    }
    let date: jiff::civil::Date =
        text.parse().map_err(|_| anyhow::anyhow!("{text:?} is neither YYYY-MM-DD nor an RFC 3339 time"))?;
    let zoned =
        date.to_zoned_datetime(jiff::tz::TimeZone::system()).context("placing the date in the local time zone")?;
    Ok(zoned.timestamp().as_millisecond())
}

pub(crate) fn forget(home: &Home, args: &ForgetArgs) -> anyhow::Result<ExitCode> {
    let project = args.scope.project(home)?;
    let scopes = if args.whole_project {
        ScopeFilter::Only(project.clone().context("--whole-project needs a project: run it in one or pass --project")?)
    } else if args.scope.global {
        ScopeFilter::Only(Scope::Global)
    } else {
        args.scope.filter(home)?
    };
    let request = ForgetRequest {
        episode_ids: args.ids.clone(),
        keys: args.keys.clone(),
        query: args.query.clone(),
        from: args.since.as_deref().map(parse_time_bound).transpose().context("--since")?,
        until: args.until.as_deref().map(parse_time_bound).transpose().context("--until")?,
        scopes,
        dry_run: !args.yes,
        source: Source::UserExplicit,
    };
    let memory = home.open_memory()?;
    let files = home.open_files()?;
    let report = match forget_memory(&memory, &files, &request) {
        Ok(report) => report,
        Err(cairn_memory_core::MemoryError::Rejected(rejected)) => {
            let value = serde_json::json!({"error": rejected.code(), "message": rejected.to_string()});
            if args.output.json {
                super::print_json(&value);
            } else {
                eprintln!("cairn memory forget: {rejected}");
            }
            return Ok(ExitCode::from(2));
        }
        Err(error) => return Err(error.into()),
    };
    if args.output.json {
        super::print_json(&serde_json::to_value(&report)?);
    } else {
        print_report(&report);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_report(report: &ForgetReport) {
    for item in &report.items {
        println!("{:<10} {:<24} {:<20} {}", item.layer, item.id, item.scope, item.text);
    }
    let counts = report.counts;
    let verb = if report.dry_run { "would forget" } else { "forgot" };
    println!(
        "{verb}: {} episodic, {} facts, {} lessons, {} transcript messages, {} history entries",
        counts.episodic, counts.facts, counts.lessons, counts.transcripts, counts.history_entries
    );
    if report.dry_run && !report.items.is_empty() {
        println!("nothing changed: run again with --yes to forget exactly these");
    }
}
