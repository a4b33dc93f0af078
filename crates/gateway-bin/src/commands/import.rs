//! `cairn import scan|apply`: bringing memory over from Claude Code, Hermes
//! and OpenClaw files through Cairn's own writers.
//!
//! `scan` is the dry run: what was found, where each entry would land, and
//! what is skipped and why. `apply` writes (a progress bar on a terminal),
//! then embeds the new episodic rows with the installed model, as `cairn
//! memory backfill` does (`--no-backfill` leaves that to a later
//! backfill or the gateway's heartbeat). Source roots default to the
//! documented locations under `$HOME`; the flags point elsewhere.
//!
//! Exit status 0 whatever individual entries met (they are reported); a
//! flag naming a directory that does not exist is an error.
//!
//! `--only lessons,facts,episodic,skills` narrows both to categories and
//! `--item ID` (repeatable) to the entries a scan listed under that id.
//! Skill folders (`skills/<name>/SKILL.md`) are imported as
//! `imported/<source>/<name>` through the catalog's own create path.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use cairn_embedder::{EmbeddingBackend, ModelInfo, ModelManager};
use cairn_memory_core::{
    ForeignCategory, ForeignReport, ForeignRoots, ForeignSelection, ForeignSkillWriter, ForeignSource, ItemOutcome,
    MemoryDb, SkillWriteOutcome, apply_foreign_with, scan_foreign_with,
};
use cairn_skills::{SkillCatalog, SkillsError};
use serde_json::{Value, json};

use super::progress::with_progress;
use crate::home::{Home, SkillSources};

/// Imported skills go through the catalog's own create path (name rules,
/// size cap, credential refusal, staged atomic write) into the home.
pub(crate) struct CatalogSkillWriter<'a>(pub(crate) &'a SkillCatalog);

fn skill_outcome(result: Result<String, SkillsError>) -> SkillWriteOutcome {
    match result {
        Ok(name) => SkillWriteOutcome::Written(name),
        Err(SkillsError::AlreadyExists { name }) => SkillWriteOutcome::Exists(name),
        Err(error) => {
            let code = match &error {
                SkillsError::Credentials { .. } => "credential",
                SkillsError::TooLarge { .. } => "too_large",
                SkillsError::MalformedFrontmatter { .. } => "malformed_frontmatter",
                SkillsError::InvalidName { .. } => "invalid_skill_name",
                SkillsError::Symlink { .. } => "symlink",
                _ => "skill_write_failed",
            };
            SkillWriteOutcome::Refused(code.to_owned(), error.to_string())
        }
    }
}

impl ForeignSkillWriter for CatalogSkillWriter<'_> {
    fn check(&self, name: &str, text: &str) -> SkillWriteOutcome {
        skill_outcome(self.0.check_create(name, text))
    }

    fn write(&self, name: &str, text: &str) -> SkillWriteOutcome {
        skill_outcome(self.0.create(name, text))
    }
}

/// The home's own skill catalog (no project, no extra roots), for imports.
pub(crate) fn import_catalog(home: &Home) -> anyhow::Result<SkillCatalog> {
    home.ensure_dir()?;
    Ok(home.skills(&SkillSources { record_usage: false, ..SkillSources::default() }))
}

/// Parses `--only` / `"only"` and `--item` / `"items"` into a selection.
pub(crate) fn selection(only: &[String], items: &[String]) -> Result<ForeignSelection, String> {
    let mut selection = ForeignSelection::default();
    for part in only.iter().flat_map(|list| list.split(',')).filter(|part| !part.trim().is_empty()) {
        selection.categories.insert(part.parse::<ForeignCategory>().map_err(|error| error.to_string())?);
    }
    for id in items {
        let id = id.trim();
        if id.len() != 12 || !id.bytes().all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte)) {
            return Err(format!("item id {id:?} is not one a scan lists (12 lower-case hex digits)"));
        }
        selection.items.insert(id.to_owned());
    }
    Ok(selection)
}

/// `cairn import ...`
#[derive(Debug, clap::Subcommand)]
pub(crate) enum ImportCommand {
    /// Dry run: list what each source holds and where every entry would land.
    Scan(ScanArgs),
    /// Import through Cairn's writers; existing memory wins every conflict.
    Apply(ApplyArgs),
}

/// Which agent's files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum FromSource {
    /// Claude Code: CLAUDE.md files, rules, auto memory.
    ClaudeCode,
    /// Hermes: memories/MEMORY.md and USER.md of the home and its profiles.
    Hermes,
    /// OpenClaw: a workspace's MEMORY.md, USER.md, SOUL.md and daily logs.
    Openclaw,
    /// All three.
    All,
}

/// Where the sources are and which to read.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct SourceArgs {
    /// Which source to read.
    #[arg(long, value_enum, default_value = "all")]
    pub(crate) from: FromSource,
    /// Claude Code's user directory (default: ~/.claude).
    #[arg(long, value_name = "DIR")]
    pub(crate) claude_home: Option<PathBuf>,
    /// Hermes's home (default: ~/.hermes).
    #[arg(long, value_name = "DIR")]
    pub(crate) hermes_home: Option<PathBuf>,
    /// An OpenClaw workspace (default: the setting import.openclaw_workspace or
    /// OPENCLAW_WORKSPACE_DIR, else ~/.openclaw/workspace).
    #[arg(long, value_name = "DIR")]
    pub(crate) openclaw_workspace: Option<PathBuf>,
    /// A project whose CLAUDE.md, CLAUDE.local.md, AGENTS.md, .claude/rules and .claude/skills are read (repeatable).
    #[arg(long, value_name = "DIR")]
    pub(crate) project: Vec<PathBuf>,
    /// Only these categories, comma-separated: lessons, facts, episodic, skills.
    #[arg(long, value_name = "LIST")]
    pub(crate) only: Vec<String>,
    /// Only the item with this id, as `scan` lists it (repeatable).
    #[arg(long = "item", value_name = "ID")]
    pub(crate) items: Vec<String>,
    /// Print the whole report as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `cairn import scan`
#[derive(Debug, clap::Args)]
pub(crate) struct ScanArgs {
    #[command(flatten)]
    pub(crate) sources: SourceArgs,
}

/// `cairn import apply`
#[derive(Debug, clap::Args)]
pub(crate) struct ApplyArgs {
    #[command(flatten)]
    pub(crate) sources: SourceArgs,
    /// Do not embed the imported rows now (a later `cairn memory backfill` or the gateway does).
    #[arg(long)]
    pub(crate) no_backfill: bool,
}

impl SourceArgs {
    pub(crate) fn selected(&self) -> Vec<ForeignSource> {
        match self.from {
            FromSource::ClaudeCode => vec![ForeignSource::ClaudeCode],
            FromSource::Hermes => vec![ForeignSource::Hermes],
            FromSource::Openclaw => vec![ForeignSource::Openclaw],
            FromSource::All => ForeignSource::ALL.to_vec(),
        }
    }

    pub(crate) fn selection(&self) -> anyhow::Result<ForeignSelection> {
        selection(&self.only, &self.items).map_err(anyhow::Error::msg)
    }

    /// The roots: flags first, then `configured_openclaw` (the resolved
    /// `import.openclaw_workspace`), then the documented defaults.
    pub(crate) fn roots(
        &self,
        user_home: Option<&std::path::Path>,
        configured_openclaw: Option<&std::path::Path>,
    ) -> anyhow::Result<ForeignRoots> {
        let mut roots = match user_home {
            Some(home) => ForeignRoots::under_user_home(home),
            None => ForeignRoots::default(),
        };
        if self.openclaw_workspace.is_none()
            && let Some(dir) = configured_openclaw
        {
            if !dir.is_dir() {
                anyhow::bail!("import.openclaw_workspace {}: not a directory", dir.display());
            }
            roots.openclaw_workspace = Some(dir.to_path_buf());
        }
        if let Some(dir) = &self.claude_home {
            roots.claude_home = Some(dir.clone());
        }
        if let Some(dir) = &self.hermes_home {
            roots.hermes_home = Some(dir.clone());
        }
        if let Some(dir) = &self.openclaw_workspace {
            roots.openclaw_workspace = Some(dir.clone());
        }
        roots.projects = self.project.clone();
        for (flag, dir) in [
            ("--claude-home", &self.claude_home),
            ("--hermes-home", &self.hermes_home),
            ("--openclaw-workspace", &self.openclaw_workspace),
        ] {
            if let Some(dir) = dir
                && !dir.is_dir()
            {
                anyhow::bail!("{flag} {}: not a directory", dir.display());
            }
        }
        for project in &self.project {
            if !project.is_dir() {
                anyhow::bail!("--project {}: not a directory", project.display());
            }
        }
        Ok(roots)
    }
}

pub(crate) fn run(home: &Home, command: &ImportCommand) -> anyhow::Result<ExitCode> {
    match command {
        ImportCommand::Scan(args) => scan(home, args),
        ImportCommand::Apply(args) => apply(home, args),
    }
}

/// What a scan and an import both start from: the sources' roots, the
/// selection, the store and the skill catalog imported skills go to.
struct Prepared {
    roots: ForeignRoots,
    selected: Vec<ForeignSource>,
    selection: ForeignSelection,
    db: MemoryDb,
    catalog: SkillCatalog,
}

impl Prepared {
    fn new(home: &Home, sources: &SourceArgs) -> anyhow::Result<Self> {
        let settings = home.settings();
        Ok(Self {
            roots: sources.roots(settings.user_home.as_deref(), settings.openclaw_workspace.as_deref())?,
            selected: sources.selected(),
            selection: sources.selection()?,
            db: home.open_memory()?,
            catalog: import_catalog(home)?,
        })
    }
}

fn scan(home: &Home, args: &ScanArgs) -> anyhow::Result<ExitCode> {
    let Prepared { roots, selected, selection, db, catalog } = Prepared::new(home, &args.sources)?;
    let writer = CatalogSkillWriter(&catalog);
    let report = scan_foreign_with(&db, &roots, &selected, &selection, Some(&writer))?;
    print_report(&report, args.sources.json, None)?;
    Ok(ExitCode::SUCCESS)
}

fn apply(home: &Home, args: &ApplyArgs) -> anyhow::Result<ExitCode> {
    let Prepared { roots, selected, selection, db, catalog } = Prepared::new(home, &args.sources)?;
    let writer = CatalogSkillWriter(&catalog);
    let started = Instant::now();
    let report = with_progress("import", |progress| {
        apply_foreign_with(&db, &roots, &selected, &selection, Some(&writer), Some(progress))
    })?;
    let import_ms = started.elapsed().as_millis() as u64;
    let backfill = if args.no_backfill || report.deferred_episodic() == 0 { None } else { Some(backfill(home, db)?) };
    let timing = json!({"import_ms": import_ms, "backfill": backfill});
    print_report(&report, args.sources.json, Some(timing))?;
    Ok(ExitCode::SUCCESS)
}

/// The installed embedding model, if there is one.
fn load_embedder(home: &Home) -> Option<Arc<dyn EmbeddingBackend>> {
    let manager = ModelManager::new(home.model_manager_config());
    let resolved = match manager.resolve() {
        Ok(Some(resolved)) => resolved,
        Ok(None) => return None,
        Err(error) => {
            eprintln!("warning: embedding model unusable ({error}); imported rows stay keyword-searchable");
            return None;
        }
    };
    match ModelInfo::read(&resolved.dir).map_err(anyhow::Error::from).and_then(|info| Ok(info.load()?)) {
        Ok(backend) => Some(Arc::from(backend)),
        Err(error) => {
            eprintln!("warning: could not load the embedding model ({error:#}); imported rows stay keyword-searchable");
            None
        }
    }
}

/// Embeds the rows written without vectors, with the same backfill as
/// `cairn memory backfill`.
fn backfill(home: &Home, db: MemoryDb) -> anyhow::Result<Value> {
    let Some(embedder) = load_embedder(home) else {
        eprintln!("no embedding model installed; rows stay keyword-searchable until `cairn memory backfill`");
        return Ok(json!({"embedded": 0, "remaining": null, "elapsed_ms": 0}));
    };
    let db = db.with_embedder(embedder);
    let started = Instant::now();
    let report = with_progress("backfill", |progress| db.backfill_missing_embeddings(Some(progress)))
        .context("embedding the imported rows")?;
    Ok(json!({
        "embedded": report.embedded,
        "remaining": report.remaining,
        "elapsed_ms": started.elapsed().as_millis() as u64,
    }))
}

fn outcome_name(outcome: ItemOutcome) -> String {
    serde_json::to_value(outcome).ok().and_then(|value| value.as_str().map(str::to_owned)).unwrap_or_default()
}

fn print_report(report: &ForeignReport, json: bool, timing: Option<Value>) -> anyhow::Result<()> {
    if json {
        let mut value = serde_json::to_value(report)?;
        if let Some(timing) = timing {
            value["timing"] = timing;
        }
        println!("{value}");
        return Ok(());
    }
    let counts = &report.counts;
    let verb = if report.dry_run { "would import" } else { "imported" };
    println!(
        "{verb} {} lessons, {} semantic, {} episodic, {} skills from {} files; {} exist, {} already imported, \
         {} refused, {} unsupported, {} over the lesson cap, {} refused by the store cap, {} not selected",
        counts.lessons,
        counts.semantic,
        counts.episodic,
        counts.skills,
        report.files_read,
        counts.exists,
        counts.already_imported,
        counts.refused,
        counts.unsupported,
        counts.lesson_cap,
        counts.store_full,
        counts.not_selected,
    );
    for item in &report.items {
        let target = match (&item.key, &item.skill, &item.target) {
            (_, _, Some(target)) => format!(" {target}"),
            (Some(key), _, None) | (None, Some(key), None) => format!(" {key}"),
            (None, None, None) => String::new(),
        };
        let reason = item.message.as_deref().map(|message| format!(" ({message})")).unwrap_or_default();
        println!(
            "{} {:<16} {:<9}{target} {} [{}]{reason}: {}",
            item.id,
            outcome_name(item.outcome),
            item.lands_as,
            item.path,
            item.locator,
            item.preview
        );
    }
    for diagnostic in &report.diagnostics {
        println!("note {} {}: {}", diagnostic.code, diagnostic.path, diagnostic.message);
    }
    if let Some(timing) = timing
        && let Some(backfill) = timing.get("backfill").filter(|value| !value.is_null())
    {
        println!("backfill: {} embedded, {} without vectors", backfill["embedded"], backfill["remaining"]);
    }
    Ok(())
}
