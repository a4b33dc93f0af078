//! `cairn skills`: list, show, search, create, delete, lint, set-inject and
//! match over the skill catalog in `<home>/skills`, the review of
//! generated skills (pending, approve, reject, archive, restore), and the
//! skills audit trail (audit).

use std::io::{Read as _, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use cairn_skills::{LintSeverity, SkillCatalog, lint_path};
use clap::{Args, Subcommand};
use serde_json::json;

use crate::home::{Home, SkillSources};

/// `cairn skills` options shared by every subcommand.
#[derive(Debug, Args)]
pub(crate) struct SkillsArgs {
    /// A project directory whose `skills/` outranks the home's.
    #[arg(long, global = true, value_name = "DIR")]
    pub(crate) project: Option<PathBuf>,
    /// Bundled skills to fall back on (and to copy with `seed`).
    #[arg(long, global = true, value_name = "DIR")]
    pub(crate) builtin: Option<PathBuf>,
    /// More skill roots to list (never written). Repeatable.
    #[arg(long = "extra-path", global = true, value_name = "DIR")]
    pub(crate) extra_paths: Vec<PathBuf>,
    #[command(subcommand)]
    pub(crate) command: SkillsCommand,
}

/// The skill catalog.
#[derive(Debug, Subcommand)]
pub(crate) enum SkillsCommand {
    /// List skills with source, flags, size and deliveries.
    List {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Print a skill's SKILL.md.
    Show {
        /// Skill name (`utils/tiny-url`).
        name: String,
    },
    /// Search names and descriptions (bodies on a metadata miss); JSON lines.
    Search {
        /// Query words.
        query: String,
        /// Most results to print (1 to 50).
        #[arg(long, default_value_t = cairn_skills::constants::SEARCH_DEFAULT_LIMIT)]
        limit: usize,
    },
    /// Create a skill in the home. Content comes from --file, standard
    /// input (`--file -`), or a template built from --description.
    Create {
        /// Name; sanitised to lower case, hyphens and slashes.
        name: String,
        /// SKILL.md content to write; `-` reads standard input.
        #[arg(long, value_name = "FILE", conflicts_with = "description")]
        file: Option<PathBuf>,
        /// Description for a generated SKILL.md.
        #[arg(long)]
        description: Option<String>,
    },
    /// Delete a skill directory from the home.
    Delete {
        /// Skill name.
        name: String,
    },
    /// Copy bundled skills (--builtin) into the home, once, never overwriting.
    Seed,
    /// Check skills for Agent Skills portability and Cairn's needs.
    /// Exits 1 when a skill has an error.
    Lint {
        /// A skill directory or a tree of them (default: the home's skills).
        dir: Option<PathBuf>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Set `inject_on_trigger` (true removes the key; false writes it).
    SetInject {
        /// Skill name.
        name: String,
        /// `true` or `false`.
        #[arg(action = clap::ArgAction::Set)]
        inject: bool,
    },
    /// Print, as JSON, what the per-message pass would deliver.
    Match {
        /// The message text.
        message: String,
    },
    /// List generated skill candidates and refinements (updates of a live
    /// generated skill) waiting for review (`skills/auto/.pending/`).
    Pending {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Promote a pending candidate to `auto/<slug>` (its script is
    /// validated again first), or apply a pending update to the live skill
    /// (the replaced file is kept under `skills/auto/.versions/<slug>/`).
    Approve {
        /// The candidate's slug (`auto/` prefix optional).
        name: String,
    },
    /// Delete a pending candidate.
    Reject {
        /// The candidate's slug (`auto/` prefix optional).
        name: String,
    },
    /// Move a live generated skill to `skills/auto/.archived/` (no longer offered).
    Archive {
        /// The skill's slug (`auto/` prefix optional).
        name: String,
    },
    /// Put the previous version of a generated skill back (the newest file
    /// under `skills/auto/.versions/<slug>/`); the one it replaces is kept,
    /// so restoring again undoes it.
    Restore {
        /// The skill's slug (`auto/` prefix optional).
        name: String,
    },
    /// Print the skills audit trail (`skills-audit.jsonl`), newest first;
    /// malformed lines are skipped and counted.
    Audit {
        /// Most records to print (1 to 1000).
        #[arg(long, default_value_t = crate::skills_audit::DEFAULT_LIMIT)]
        limit: usize,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// A slug from `auto/<slug>` or `<slug>`.
fn slug(name: &str) -> &str {
    name.strip_prefix("auto/").unwrap_or(name)
}

/// How `list` marks a generated skill: `auto`, or `auto stale`.
fn auto_marks(home: &Home) -> std::collections::BTreeMap<String, &'static str> {
    home.auto_skills()
        .states()
        .into_iter()
        .map(|(name, state)| (name, if state.stale { "stale" } else { "active" }))
        .collect()
}

fn catalog(home: &Home, args: &SkillsArgs) -> anyhow::Result<SkillCatalog> {
    home.ensure_dir()?;
    // `match` is a preview: it records no usage.
    let record_usage = !matches!(args.command, SkillsCommand::Match { .. });
    let sources = SkillSources {
        project: args.project.clone(),
        builtin: args.builtin.clone(),
        extra_paths: args.extra_paths.clone(),
        record_usage,
    };
    Ok(home.skills(&sources))
}

pub(crate) fn run(home: &Home, args: &SkillsArgs) -> anyhow::Result<ExitCode> {
    let catalog = catalog(home, args)?;
    let mut out = std::io::stdout().lock();
    match &args.command {
        SkillsCommand::List { json } => list(home, &catalog, *json, &mut out)?,
        SkillsCommand::Show { name } => {
            cairn_skills::validate_name(name)?;
            let skill = catalog.get(name).with_context(|| format!("no skill named {name:?}"))?;
            out.write_all(skill.text().as_bytes())?;
        }
        SkillsCommand::Search { query, limit } => {
            for hit in catalog.search(query, *limit) {
                serde_json::to_writer(&mut out, &hit)?;
                writeln!(out)?;
            }
        }
        SkillsCommand::Create { name, file, description } => {
            let created = catalog.create(name, &new_skill_text(name, file.as_deref(), description.as_deref())?)?;
            writeln!(out, "{}", json!({ "created": created }))?;
        }
        SkillsCommand::Delete { name } => {
            catalog.delete(name)?;
            writeln!(out, "{}", json!({ "deleted": name }))?;
        }
        SkillsCommand::Seed => {
            let report = catalog.seed_builtins()?;
            serde_json::to_writer(&mut out, &report)?;
            writeln!(out)?;
        }
        SkillsCommand::Lint { dir, json } => {
            let dir = dir.clone().unwrap_or_else(|| catalog.config().owned_dir());
            return lint(&dir, *json, &mut out);
        }
        SkillsCommand::SetInject { name, inject } => {
            let changed = catalog.set_inject_on_trigger(name, *inject)?;
            writeln!(out, "{}", json!({ "name": name, "inject_on_trigger": inject, "changed": changed }))?;
        }
        SkillsCommand::Match { message } => {
            let triggered = catalog.triggered(message);
            let explicit = catalog.dollar_requests(message);
            let delivered = catalog.preview_message(message);
            let value = json!({
                "triggered": triggered,
                "explicit": explicit,
                "bodies": delivered.bodies,
                "hints": delivered.hints,
                "withheld": delivered.withheld,
                "hint_block": delivered.render_hints(),
            });
            serde_json::to_writer_pretty(&mut out, &value)?;
            writeln!(out)?;
        }
        SkillsCommand::Pending { json } => pending(home, *json, &mut out)?,
        SkillsCommand::Approve { name } => {
            let approved = home.auto_skills().approve(slug(name))?;
            writeln!(out, "{}", json!({ "approved": approved }))?;
        }
        SkillsCommand::Reject { name } => {
            home.auto_skills().reject(slug(name))?;
            writeln!(out, "{}", json!({ "rejected": slug(name) }))?;
        }
        SkillsCommand::Archive { name } => {
            let archived = home.auto_skills().archive(slug(name))?;
            writeln!(out, "{}", json!({ "archived": archived }))?;
        }
        SkillsCommand::Restore { name } => {
            let restored = home.auto_skills().restore(slug(name))?;
            writeln!(out, "{}", json!({ "restored": restored }))?;
        }
        SkillsCommand::Audit { limit, json } => audit(home, *limit, *json, &mut out)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// `cairn skills list`: every skill with its source, size, deliveries and flags.
fn list(home: &Home, catalog: &SkillCatalog, json: bool, out: &mut impl Write) -> anyhow::Result<()> {
    let rows = catalog.list_skills();
    let marks = auto_marks(home);
    if json {
        let rows: Vec<serde_json::Value> = rows
            .iter()
            .map(|row| {
                let mut value = serde_json::to_value(row)?;
                value["auto"] = marks.get(&row.name).map_or(serde_json::Value::Null, |state| json!(state));
                Ok(value)
            })
            .collect::<Result<_, serde_json::Error>>()?;
        serde_json::to_writer_pretty(&mut *out, &rows)?;
        writeln!(out)?;
    } else {
        for row in &rows {
            let deliveries = row.deliveries.map_or_else(|| "-".to_owned(), |count| count.to_string());
            let auto = match marks.get(&row.name) {
                Some(&"stale") => "auto stale ",
                Some(_) => "auto ",
                None => "",
            };
            let flags = format!(
                "{auto}{}{}{}",
                if row.always { "always " } else { "" },
                if row.inject_on_trigger { "" } else { "pointer " },
                if row.owned { "owned" } else { "read-only" }
            );
            writeln!(
                out,
                "{}\t{:?}\t{} bytes\tdeliveries {}\t{}\t{}",
                row.name, row.source, row.size_bytes, deliveries, flags, row.description
            )?;
            if let Some(warning) = &row.warning {
                writeln!(out, "  warning: {warning}")?;
            }
        }
        eprintln!("{} skills", rows.len());
    }
    Ok(())
}

/// The text of a new skill: the file given (`-`: standard input), or a
/// skeleton with the name and the description (a default one without).
fn new_skill_text(name: &str, file: Option<&Path>, description: Option<&str>) -> anyhow::Result<String> {
    Ok(match (file, description) {
        (Some(path), _) if path.as_os_str() == "-" => {
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text).context("reading standard input")?;
            text
        }
        (Some(path), _) => {
            cairn_guard::safe_read_file_bounded(path, cairn_skills::constants::MAX_SKILL_FILE_BYTES as u64)
                .with_context(|| format!("reading {}", path.display()))?
        }
        (None, description) => {
            let leaf = cairn_skills::sanitize_name(name)?;
            let leaf = leaf.rsplit('/').next().unwrap_or(&leaf).to_owned();
            let description =
                description.map(str::to_owned).unwrap_or_else(|| format!("What {leaf} does and when to use it."));
            format!("---\nname: {leaf}\ndescription: {}\n---\n# {leaf}\n", serde_json::to_string(&description)?)
        }
    })
}

/// `cairn skills lint`: every skill under `dir` checked; failure when any has an error.
fn lint(dir: &Path, json: bool, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let reports = lint_path(dir);
    let errors = reports.iter().filter(|report| report.has_errors()).count();
    if json {
        serde_json::to_writer_pretty(&mut *out, &reports)?;
        writeln!(out)?;
    } else {
        for report in &reports {
            let verdict = if report.has_errors() {
                "error"
            } else if report.is_valid_agent_skill() {
                "ok"
            } else {
                "not portable"
            };
            writeln!(out, "{}: {verdict}", report.dir.display())?;
            for finding in &report.findings {
                let severity = match finding.severity {
                    LintSeverity::Error => "error",
                    LintSeverity::Portability => "portability",
                    LintSeverity::Warning => "warning",
                };
                writeln!(out, "  {severity} [{}] {}", finding.rule, finding.message)?;
            }
        }
        eprintln!("{} skills checked, {errors} with errors", reports.len());
    }
    Ok(if errors > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// `cairn skills pending`: the skill candidates waiting for review.
fn pending(home: &Home, json: bool, out: &mut impl Write) -> anyhow::Result<()> {
    let pending = home.auto_skills().pending()?;
    if json {
        serde_json::to_writer_pretty(&mut *out, &json!({ "pending": pending }))?;
        writeln!(out)?;
    } else {
        for candidate in &pending {
            let kind = match candidate.kind {
                cairn_skills::auto::PendingKind::New => "new",
                cairn_skills::auto::PendingKind::Update => "update",
            };
            writeln!(
                out,
                "{}	{kind}	session {}	{}	{}{}",
                candidate.name,
                candidate.session_key,
                candidate.created_at,
                if candidate.has_script { "script " } else { "" },
                candidate.description
            )?;
            if !candidate.unexpected_files.is_empty() {
                writeln!(out, "\tunreviewed files (approval is refused): {}", candidate.unexpected_files.join(", "))?;
            }
        }
        eprintln!("{} pending", pending.len());
    }
    Ok(())
}

/// `cairn skills audit`: the newest `limit` records of the skills audit trail.
fn audit(home: &Home, limit: usize, json: bool, out: &mut impl Write) -> anyhow::Result<()> {
    let max = crate::skills_audit::MAX_LIMIT;
    anyhow::ensure!((1..=max).contains(&limit), "--limit must be 1 to {max}");
    let path = home.skills_audit_path();
    let log = crate::skills_audit::read(&path, limit)
        .with_context(|| format!("reading the skills audit trail {}", path.display()))?;
    if json {
        serde_json::to_writer_pretty(&mut *out, &log)?;
        writeln!(out)?;
    } else {
        for event in &log.events {
            writeln!(
                out,
                "{}\t{}\t{}\t{}\t{}",
                event.at.as_deref().unwrap_or("-"),
                event.action,
                if event.ok { "ok" } else { "refused" },
                event.skills.join(","),
                event.detail
            )?;
        }
        eprintln!(
            "{} records{}{}",
            log.events.len(),
            if log.skipped > 0 { format!(", {} malformed lines skipped", log.skipped) } else { String::new() },
            if log.truncated { ", older lines not read" } else { "" }
        );
    }
    Ok(())
}
