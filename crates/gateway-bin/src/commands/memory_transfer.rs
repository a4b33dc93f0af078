//! `cairn memory migrate|export|import`: bringing Markdown memory into
//! `memory.db`, and moving a whole memory home out and back in.
//!
//! Exit status: 0 on success (rows skipped or refused during a merge import
//! are reported, not failures), 1 when the input cannot be read or is not
//! an export document, and for `import --restore` when any row is refused
//! or the home already holds memory (nothing is written then). With
//! `--json` every command prints one JSON object, a refusal included
//! (`{"ok": false, "error": {"code", "message"}}`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;

use crate::home::Home;
use cairn_memory_core::{
    ExportDocument, ImportReport, MemoryDb, MemoryError, MemoryFiles, MigrationSource, export_memory, import_memory,
    migrate_from_markdown, restore_memory,
};
use jiff::tz::TimeZone;
use serde_json::json;

/// `cairn memory migrate`
#[derive(Debug, clap::Args)]
pub(crate) struct MigrateArgs {
    /// Where the Markdown memory lives: a Cairn home or a `~/.kiro/crew`
    /// tree (default: this home).
    #[arg(long, value_name = "DIR")]
    pub(crate) from: Option<PathBuf>,
    /// Run even when the home is already marked migrated.
    #[arg(long)]
    pub(crate) force: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `cairn memory export`
#[derive(Debug, clap::Args)]
pub(crate) struct ExportArgs {
    /// Write here instead of stdout.
    pub(crate) file: Option<PathBuf>,
}

/// `cairn memory import`
#[derive(Debug, clap::Args)]
pub(crate) struct ImportArgs {
    /// An export document.
    pub(crate) file: PathBuf,
    /// Report what would change without writing anything.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Restore the document exactly into an empty store (every row keeps
    /// its source, confidence, times and version; deleted keys stay
    /// deleted): how a home moves between SQLite and PostgreSQL. Every row
    /// or none is written. Without it the document is merged as foreign
    /// memory: rows are marked `import` and the stored memory wins.
    #[arg(long)]
    pub(crate) restore: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

fn open(home: &Home) -> anyhow::Result<(MemoryDb, MemoryFiles)> {
    let db = home.open_memory()?;
    let files = home.open_files()?;
    Ok((db, files))
}

pub(crate) fn migrate(home: &Home, args: &MigrateArgs) -> anyhow::Result<ExitCode> {
    let (db, _files) = open(home)?;
    let home = home.dir();
    let source = MigrationSource::discover(args.from.as_deref().unwrap_or(home));
    let report = migrate_from_markdown(&db, home, &source, args.force, &TimeZone::system())
        .with_context(|| format!("migrating {}", source.memory_dir.display()))?;
    if args.json {
        println!("{}", serde_json::to_value(&report)?);
    } else if report.already_migrated {
        println!("already migrated (use --force to run again)");
    } else {
        println!(
            "migrated {}: {} semantic, {} episodic, {} lessons written; {} refused",
            source.memory_dir.display(),
            report.counts.semantic_written,
            report.counts.episodic_written,
            report.counts.lessons_written,
            report.refused.len()
        );
        report.refused.iter().for_each(|item| eprintln!("{item}"));
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn export(home: &Home, args: &ExportArgs) -> anyhow::Result<ExitCode> {
    let (db, files) = open(home)?;
    let document = export_memory(&db, &files)?;
    let text = serde_json::to_string_pretty(&document)?;
    match &args.file {
        Some(path) => {
            cairn_files::write_atomic(path, text.as_bytes()).with_context(|| format!("writing {}", path.display()))?;
            eprintln!(
                "exported {} semantic entries, {} lessons, {} episodic rows, {} day files to {}",
                document.semantic.len(),
                document.lessons.len(),
                document.episodic.len(),
                document.files.history.len(),
                path.display()
            );
        }
        None => println!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}

/// Largest export document `cairn memory import` reads.
const MAX_IMPORT_BYTES: u64 = 512 * 1024 * 1024;

/// Why `cairn memory import` wrote nothing before any row was decided: a
/// stable code and the message a person reads.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
struct ImportRefused {
    code: &'static str,
    message: String,
}

/// The stable code of a failed import: the refusal's own code, or one named
/// for the layer that failed (the guarded read, the store).
fn failure_code(error: &anyhow::Error) -> &'static str {
    for cause in error.chain() {
        if let Some(refused) = cause.downcast_ref::<ImportRefused>() {
            return refused.code;
        }
        if let Some(guard) = cause.downcast_ref::<cairn_guard::GuardError>() {
            return match guard {
                cairn_guard::GuardError::SensitivePath { .. } => "sensitive_path",
                cairn_guard::GuardError::TooLarge { .. } => "file_too_large",
                cairn_guard::GuardError::NotUtf8 { .. } => "not_utf8",
                cairn_guard::GuardError::NotRegularFile { .. } => "not_regular_file",
                cairn_guard::GuardError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                    "file_not_found"
                }
                _ => "read_failed",
            };
        }
        if let Some(memory) = cause.downcast_ref::<MemoryError>() {
            return match memory {
                MemoryError::Damaged { .. } => "store_damaged",
                MemoryError::EmptyDatabase { .. } => "store_empty_database",
                MemoryError::SchemaTooNew { .. } => "schema_too_new",
                MemoryError::Rejected(rejected) => rejected.code(),
                _ => "store_failed",
            };
        }
    }
    "failed"
}

/// `cairn memory import [--restore] [--json]`. Every refusal exits 1; with
/// `--json` it is one object on stdout: `{"ok": false, "error": {"code",
/// "message"}}`, and a refused restore also carries its report (each
/// refused row with its code) and the distinct codes in `error.codes`.
pub(crate) fn import(home: &Home, args: &ImportArgs) -> anyhow::Result<ExitCode> {
    match import_report(home, args) {
        Ok(report) => render_import(args, &report),
        Err(error) if args.json => {
            let refusal =
                json!({"ok": false, "error": {"code": failure_code(&error), "message": format!("{error:#}")}});
            println!("{refusal}");
            Ok(ExitCode::from(1))
        }
        Err(error) => match error.downcast_ref::<ImportRefused>() {
            Some(refused) => {
                eprintln!("{refused}");
                Ok(ExitCode::from(1))
            }
            None => Err(error),
        },
    }
}

fn import_report(home: &Home, args: &ImportArgs) -> anyhow::Result<ImportReport> {
    let text = home
        .sensitive()
        .read_to_string_bounded(&args.file, MAX_IMPORT_BYTES)
        .with_context(|| format!("reading {}", args.file.display()))?;
    let document: ExportDocument = serde_json::from_str(&text).map_err(|error| ImportRefused {
        code: "not_an_export_document",
        message: format!("{} is not a Cairn export document: {error}", args.file.display()),
    })?;
    let (db, files) = open(home)?;
    let home = home.dir();
    let imported = if args.restore {
        restore_memory(&db, &files, home, &document, args.dry_run)
    } else {
        import_memory(&db, &files, home, &document, args.dry_run)
    };
    imported.map_err(|error| match error {
        MemoryError::InvalidImport(_) => ImportRefused { code: "invalid_import", message: error.to_string() }.into(),
        MemoryError::RestoreTargetNotEmpty(_) => {
            ImportRefused { code: "restore_target_not_empty", message: error.to_string() }.into()
        }
        error => anyhow::Error::new(error),
    })
}

fn render_import(args: &ImportArgs, report: &ImportReport) -> anyhow::Result<ExitCode> {
    // A restore writes every row or none: a refused row refuses it all.
    let refused_restore = args.restore && !report.rejected.is_empty();
    if args.json {
        let mut value = serde_json::to_value(report)?;
        if refused_restore && let Some(object) = value.as_object_mut() {
            let mut codes: Vec<&str> = report.rejected.iter().map(|row| row.code.as_str()).collect();
            codes.sort_unstable();
            codes.dedup();
            let message = format!("restore refused, nothing written: {} row(s) break a rule", report.rejected.len());
            object.insert("ok".to_owned(), json!(false));
            object.insert("error".to_owned(), json!({"code": "restore_refused", "message": message, "codes": codes}));
        }
        println!("{value}");
    } else if refused_restore {
        println!("restore refused, nothing written: {} row(s) break a rule", report.rejected.len());
        for row in &report.rejected {
            println!("refused {} {} ({}): {}", row.kind, row.id, row.code, row.message);
        }
    } else if args.restore {
        let verb = if report.dry_run { "would restore" } else { "restored" };
        println!(
            "{verb} {} semantic, {} lessons, {} deleted keys, {} episodic, {} files",
            report.counts.semantic_written,
            report.counts.lessons_written,
            report.deleted_written,
            report.counts.episodic_written,
            report.files_written
        );
    } else {
        let verb = if report.dry_run { "would write" } else { "wrote" };
        println!(
            "{verb} {} semantic, {} lessons, {} episodic, {} day files; {} skipped, {} refused",
            report.counts.semantic_written,
            report.counts.lessons_written,
            report.counts.episodic_written,
            report.files_written,
            report.skipped.len(),
            report.rejected.len()
        );
        for row in &report.skipped {
            println!("skipped {} {} ({}): {}", row.kind, row.id, row.code, row.message);
        }
        for row in &report.rejected {
            println!("refused {} {} ({}): {}", row.kind, row.id, row.code, row.message);
        }
    }
    Ok(if refused_restore { ExitCode::from(1) } else { ExitCode::SUCCESS })
}
