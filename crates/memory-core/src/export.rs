//! Export of a whole memory home as one versioned JSON document, and import
//! of such a document through the normal writers (a merge). An exact
//! restore into an empty store is [`crate::restore_memory`].
//!
//! Import guarantees: every row is validated by the writer that would
//! store it (key rules, confidence gate, injection screen, conflict ladder,
//! lesson dedup, episodic dedup in preservation mode); existing memory wins
//! every conflict: an import never replaces, tombstones or revives a stored
//! semantic entry or lesson (an imported lesson the dedup rules would let
//! replace a stored one is skipped instead) and never evicts an episodic row; the provenance ledger
//! (content hashes in the store's `import_provenance` table, beside the
//! foreign imports' rows) makes re-importing the same document a no-op; each row keeps its scope (a project's rows stay that project's);
//! a dry run reports what would change without writing, refusing a row by
//! every rule the write would apply; each row that is skipped or refused is
//! reported with its reason while the rest are written. Import never writes `preferences.md` or `projects.md` (the
//! consolidator replaces them wholesale); history day files are restored
//! only where the home has none for that day.

use crate::scope::{Scope, split_stored_key};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::constants::{EXPORT_LEDGER_SOURCE, IMPORT_LEDGER_FILE_NAME, LESSON_PREFIX, MAX_IMPORTED_LESSONS};
use crate::episodic::write::record_from_row;
use crate::error::{MemoryError, Rejected, Result};
use crate::files::{HISTORY_DIR, MEMORY_DIR, MemoryFiles, parse_day_file_name};
use crate::ledger::LedgerRow;
use crate::lessons::lesson_from_row;
use crate::report::LayerCounts;
use crate::semantic::entry_from_row;
use crate::store::{EvidenceLayer, EvidenceRow, SemanticRow};
use crate::{EpisodicOutcome, LessonCategory, MemoryDb, NewEpisode, SCHEMA_VERSION, SkipReason, Source};

/// `format` of an export document.
pub const EXPORT_FORMAT: &str = "cairn-memory-export";
/// Version of the export document this build writes and the newest it
/// reads. Version 2 added what an exact restore needs: each row's creation
/// time and version, lesson keys, confidences and times, the time an
/// episodic row was last recalled, and the deleted semantic keys.
pub const EXPORT_VERSION: u32 = 2;

/// A whole memory home as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExportDocument {
    /// Always [`EXPORT_FORMAT`].
    pub format: String,
    /// [`EXPORT_VERSION`] at the time of writing.
    pub version: u32,
    /// `memory.db` schema version of the exporting store.
    pub schema_version: i64,
    /// When (Unix milliseconds).
    pub exported_at: i64,
    /// Live semantic entries (lessons excluded).
    pub semantic: Vec<ExportedSemantic>,
    /// Lessons.
    pub lessons: Vec<ExportedLesson>,
    /// Active episodic rows.
    pub episodic: Vec<ExportedEpisode>,
    /// Deleted semantic keys and lessons (tombstones), by key. A merge
    /// import ignores them; a restore keeps them, so a key deleted before
    /// the move stays deleted after it.
    #[serde(default)]
    pub deleted: Vec<ExportedTombstone>,
    /// The Markdown files.
    pub files: ExportedFiles,
}

/// A semantic entry in an export.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExportedSemantic {
    /// Key.
    pub key: String,
    /// Where it belongs (global when absent).
    #[serde(default, skip_serializing_if = "Scope::is_global")]
    pub scope: Scope,
    /// Value.
    pub value: Value,
    /// Confidence.
    pub confidence: f64,
    /// Source name.
    pub source: String,
    /// Last change (Unix milliseconds).
    pub updated_at: i64,
    /// When the key was first created (Unix milliseconds; version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<i64>,
    /// Accepted changes the key has seen (version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    /// Where consolidation found it (absent for rows written otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<crate::types::Evidence>,
}

/// A lesson in an export.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExportedLesson {
    /// What to do.
    pub rule: String,
    /// What not to do.
    #[serde(default)]
    pub not: Option<String>,
    /// `tool`, `preference` or `knowledge`.
    pub category: String,
    /// Source name.
    pub source: String,
    /// The stored key (`lesson.<hash>`; version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Confidence (version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    /// When it was first written (Unix milliseconds; version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<i64>,
    /// Last change (Unix milliseconds; version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<i64>,
    /// Accepted changes (version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    /// Where consolidation found it (absent for rows written otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<crate::types::Evidence>,
}

/// An episodic row in an export.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExportedEpisode {
    /// The fragment.
    pub text: String,
    /// Where it belongs (global when absent).
    #[serde(default, skip_serializing_if = "Scope::is_global")]
    pub scope: Scope,
    /// Importance.
    pub importance: f64,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
    /// When it happened (Unix milliseconds).
    pub created_at: i64,
    /// Where it came from.
    #[serde(default)]
    pub source_ref: Option<String>,
    /// Source name.
    pub source: String,
    /// When a search last returned it (Unix milliseconds; version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_accessed: Option<i64>,
    /// Where consolidation found it (absent for rows written otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<crate::types::Evidence>,
}

/// A deleted semantic key or lesson in an export: the key and when, not
/// the value that was deleted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExportedTombstone {
    /// Key.
    pub key: String,
    /// Where it belongs (global when absent).
    #[serde(default, skip_serializing_if = "Scope::is_global")]
    pub scope: Scope,
    /// Source name of the last write before the deletion.
    pub source: String,
    /// Confidence of that write.
    pub confidence: f64,
    /// When the key was first created (Unix milliseconds).
    pub created_at: i64,
    /// When it was deleted (Unix milliseconds).
    pub deleted_at: i64,
    /// Accepted changes the key has seen, the deletion included.
    pub version: i64,
}

/// The Markdown files in an export.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExportedFiles {
    /// `preferences.md`.
    #[serde(default)]
    pub preferences: String,
    /// `projects.md`.
    #[serde(default)]
    pub projects: String,
    /// Day files by name (`YYYY-MM-DD.md`).
    #[serde(default)]
    pub history: BTreeMap<String, String>,
}

/// Builds the export document of a home. The rows come from one read
/// transaction, so a write made meanwhile is either wholly in the document
/// or not at all.
pub fn export_memory(db: &MemoryDb, files: &MemoryFiles) -> Result<ExportDocument> {
    let _span = tracing::debug_span!("export_memory").entered();
    let (live, deleted, episodes, semantic_evidence, episodic_evidence) = db.rows().read("exporting memory", |tx| {
        Ok((
            tx.live_semantic("")?,
            tx.deleted_semantic()?,
            tx.episodic_page(usize::MAX, 0)?,
            tx.layer_evidence(EvidenceLayer::Semantic)?.into_iter().collect::<HashMap<_, _>>(),
            tx.layer_evidence(EvidenceLayer::Episodic)?.into_iter().collect::<HashMap<_, _>>(),
        ))
    })?;
    let evidence_of = |evidence: &HashMap<String, EvidenceRow>, target: &str| {
        evidence.get(target).cloned().map(crate::evidence::from_row)
    };
    let mut semantic = Vec::new();
    let mut lesson_rows = Vec::new();
    for row in live {
        if row.key.starts_with(LESSON_PREFIX) {
            lesson_rows.push(row);
            continue;
        }
        let (created_at, version) = (row.created_at, row.version);
        // Evidence is kept under the stored key (`<key>@<project>` in a project).
        let evidence = evidence_of(&semantic_evidence, &row.key);
        let entry = entry_from_row(row, None, None)?;
        semantic.push(ExportedSemantic {
            scope: entry.scope,
            key: entry.key,
            value: entry.value,
            confidence: entry.confidence,
            source: entry.source.as_str().to_owned(),
            updated_at: entry.updated_at,
            created_at: Some(created_at),
            version: Some(version),
            evidence,
        });
    }
    // Oldest first (the reverse of the newest-first listing), so an import teaches them in order.
    lesson_rows.sort_by(|a, b| a.updated_at.cmp(&b.updated_at).then_with(|| b.key.cmp(&a.key)));
    let mut lessons = Vec::with_capacity(lesson_rows.len());
    for row in lesson_rows {
        let (created_at, version) = (row.created_at, row.version);
        let evidence = evidence_of(&semantic_evidence, &row.key);
        let lesson = lesson_from_row(row, None)?;
        lessons.push(ExportedLesson {
            rule: lesson.rule,
            not: lesson.not,
            category: lesson.category.as_str().to_owned(),
            source: lesson.source.as_str().to_owned(),
            key: Some(lesson.key),
            confidence: Some(lesson.confidence),
            created_at: Some(created_at),
            updated_at: Some(lesson.updated_at),
            version: Some(version),
            evidence,
        });
    }
    let deleted = deleted.into_iter().map(tombstone).collect();
    let episodic = episodes
        .into_iter()
        .map(|row| record_from_row(row, None))
        .map(|row| ExportedEpisode {
            scope: row.scope,
            evidence: evidence_of(&episodic_evidence, &row.id.to_string()),
            tags: row.tags,
            text: row.text,
            importance: row.importance,
            created_at: row.created_at,
            source_ref: row.source_ref,
            source: row.source,
            last_accessed: row.last_accessed,
        })
        .collect();
    let history = history_files(files)?;
    Ok(ExportDocument {
        format: EXPORT_FORMAT.to_owned(),
        version: EXPORT_VERSION,
        schema_version: SCHEMA_VERSION,
        exported_at: crate::clock::now_ms(),
        semantic,
        lessons,
        episodic,
        deleted,
        files: ExportedFiles { preferences: files.preferences()?, projects: files.projects()?, history },
    })
}

/// A deleted semantic row as the document keeps it.
fn tombstone(row: SemanticRow) -> ExportedTombstone {
    let (key, scope) = split_stored_key(&row.key);
    ExportedTombstone {
        key: key.to_owned(),
        scope,
        source: row.source,
        confidence: row.confidence,
        created_at: row.created_at,
        deleted_at: row.updated_at,
        version: row.version,
    }
}

/// Every history day file of the home, by file name.
fn history_files(files: &MemoryFiles) -> Result<BTreeMap<String, String>> {
    let mut history = BTreeMap::new();
    for date in files.history_days()? {
        let name = format!("{date}.md");
        let path = files.memory_dir().join(HISTORY_DIR).join(&name);
        let content = std::fs::read(&path).map_err(|source| MemoryError::Io {
            operation: "reading",
            path: path.clone(),
            source,
        })?;
        history.insert(name, String::from_utf8_lossy(&content).into_owned());
    }
    Ok(history)
}

/// One imported row that was not written, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImportRow {
    /// `semantic`, `lesson`, `episodic`, `file`.
    pub kind: &'static str,
    /// Which row: the key, the file name, or `episodic[<index>]`.
    pub id: String,
    /// Stable reason code (`exists`, `already_imported`, a rejection code, ...).
    pub code: String,
    /// Human-readable reason.
    pub message: String,
}

/// What an import did (or, in a dry run, would do).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ImportReport {
    /// True when nothing was written.
    pub dry_run: bool,
    /// What the import wrote, per layer, and what it left as it was
    /// because the store already held it (or, for episodic rows, had no
    /// room): the counts a consolidation run and a migration report too,
    /// serialized flat. Each row left alone is also named in `skipped`.
    #[serde(flatten)]
    pub counts: LayerCounts,
    /// Deleted keys kept as deleted (a restore only).
    pub deleted_written: usize,
    /// History day files restored.
    pub files_written: usize,
    /// Rows left alone: already present, already imported, over a cap.
    pub skipped: Vec<ImportRow>,
    /// Rows a writer refused.
    pub rejected: Vec<ImportRow>,
    /// A restore only: its rows were already committed by an interrupted
    /// run of the same document, and this run put its files in place.
    pub resumed: bool,
}

impl ImportReport {
    fn skip(&mut self, kind: &'static str, id: impl Into<String>, code: &str, message: impl Into<String>) {
        self.skipped.push(ImportRow { kind, id: id.into(), code: code.to_owned(), message: message.into() });
    }

    /// Skips a row the store already holds (`exists`, `already_imported`)
    /// or has no room for (`store_full`), and counts it as kept in its layer.
    fn keep(&mut self, kind: &'static str, id: impl Into<String>, code: &str, message: impl Into<String>) {
        match kind {
            "semantic" => self.counts.semantic(false),
            "lesson" => self.counts.lesson(false),
            "episodic" => self.counts.episodic(false),
            _ => {}
        }
        self.skip(kind, id, code, message);
    }

    fn reject(&mut self, kind: &'static str, id: impl Into<String>, error: &MemoryError) {
        let code = error.rejection().map(Rejected::code).unwrap_or("error").to_owned();
        self.rejected.push(ImportRow { kind, id: id.into(), code, message: error.to_string() });
    }
}

/// The provenance ledger of export documents: content hashes of rows
/// already imported, kept in the store's `import_provenance` table (source
/// [`EXPORT_LEDGER_SOURCE`]) beside the foreign imports' rows. A home's
/// older `import_ledger.txt` is read too, and a real import moves it into
/// the table.
struct Ledger {
    hashes: HashSet<String>,
    /// The older file ledger and its hashes, not yet in the table.
    legacy: Option<(PathBuf, Vec<String>)>,
}

impl Ledger {
    fn load(db: &MemoryDb, home: &Path) -> Result<Self> {
        let mut hashes: HashSet<String> =
            db.import_ledger(&[EXPORT_LEDGER_SOURCE])?.seen.into_iter().map(|(_, _, hash)| hash).collect();
        let path = home.join(IMPORT_LEDGER_FILE_NAME);
        let legacy = match std::fs::read_to_string(&path) {
            Ok(text) => {
                let old: Vec<String> =
                    text.lines().map(str::trim).filter(|line| !line.is_empty()).map(str::to_owned).collect();
                hashes.extend(old.iter().cloned());
                Some((path, old))
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
            Err(source) => return Err(MemoryError::Io { operation: "reading", path, source }),
        };
        Ok(Ledger { hashes, legacy })
    }

    fn contains(&self, hash: &str) -> bool {
        self.hashes.contains(hash)
    }

    /// Moves the older file ledger's hashes into the table (what each
    /// landed as is not known), then removes the file.
    fn migrate(&mut self, db: &MemoryDb) -> Result<()> {
        let Some((path, hashes)) = self.legacy.take() else { return Ok(()) };
        let rows: Vec<LedgerRow> = hashes.into_iter().map(|hash| ledger_row(hash, "unknown", None)).collect();
        db.record_import_provenance(&rows)?;
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            // Another import moved it first.
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(MemoryError::Io { operation: "removing", path, source }),
        }
    }

    fn record(&mut self, db: &MemoryDb, hash: String, landed_as: &'static str, target: String) -> Result<()> {
        db.record_import_provenance(&[ledger_row(hash.clone(), landed_as, Some(target))])?;
        self.hashes.insert(hash);
        Ok(())
    }
}

fn ledger_row(item_hash: String, landed_as: &'static str, target: Option<String>) -> LedgerRow {
    LedgerRow { source: EXPORT_LEDGER_SOURCE, path: String::new(), item_hash, landed_as, outcome: "written", target }
}

fn row_hash(kind: &str, row: &impl Serialize) -> String {
    let text = serde_json::to_string(row).expect("export rows serialise");
    let mut digest = Sha256::new();
    digest.update(kind.as_bytes());
    digest.update([0]);
    digest.update(text.as_bytes());
    hex::encode(digest.finalize())
}

/// Imports `document` into the home of `db` and `files` (`home`). With
/// `dry_run` nothing is written and the report says what would be.
pub fn import_memory(
    db: &MemoryDb,
    files: &MemoryFiles,
    home: &Path,
    document: &ExportDocument,
    dry_run: bool,
) -> Result<ImportReport> {
    let _span = tracing::info_span!("import_memory", dry_run).entered();
    check_document(document)?;
    let mut ledger = Ledger::load(db, home)?;
    if !dry_run {
        ledger.migrate(db)?;
    }
    let mut import = Import { db, ledger, report: ImportReport { dry_run, ..ImportReport::default() } };
    import.semantic(&document.semantic)?;
    import.lessons(&document.lessons)?;
    import.episodic(&document.episodic)?;
    import.files(files, home, &document.files)?;
    let report = import.report;
    tracing::info!(
        semantic = report.counts.semantic_written,
        lessons = report.counts.lessons_written,
        episodic = report.counts.episodic_written,
        files = report.files_written,
        skipped = report.skipped.len(),
        rejected = report.rejected.len(),
        "memory import"
    );
    Ok(report)
}

/// One import of an export document under way: the store, the ledger of
/// what earlier imports took, and the report so far.
struct Import<'a> {
    db: &'a MemoryDb,
    ledger: Ledger,
    report: ImportReport,
}

impl Import<'_> {
    /// The semantic rows, oldest first, through the semantic writer.
    fn semantic(&mut self, rows: &[ExportedSemantic]) -> Result<()> {
        let Import { db, ref mut ledger, ref mut report } = *self;
        let dry_run = report.dry_run;
        // Oldest first, so recency order (a ranking tie-break) survives the trip.
        let mut semantic: Vec<&ExportedSemantic> = rows.iter().collect();
        semantic.sort_by_key(|row| row.updated_at);
        for row in semantic {
            let hash = row_hash("semantic", row);
            if ledger.contains(&hash) {
                report.keep("semantic", &row.key, "already_imported", "this row was imported before");
                continue;
            }
            if row.key.starts_with(LESSON_PREFIX) {
                report.skip("semantic", &row.key, "lesson_key", "lessons are imported from the lessons list");
                continue;
            }
            if let Some(existing) = db.get_semantic_in(&row.scope, &row.key)? {
                let message =
                    if existing.value == row.value { "the same value is stored" } else { "the stored value wins" };
                report.keep("semantic", &row.key, "exists", message);
                continue;
            }
            if dry_run {
                match db.check_write(&row.key, &row.value, row.confidence, &Source::Import) {
                    Ok(_) => report.counts.semantic(true),
                    Err(rejected) => report.reject("semantic", &row.key, &MemoryError::Rejected(rejected)),
                }
                continue;
            }
            match db.write_semantic_in(&row.scope, &row.key, &row.value, row.confidence, Source::Import) {
                Ok(outcome) if outcome.is_change() => {
                    report.counts.semantic(true);
                    ledger.record(db, hash, "semantic", crate::scope::stored_key(&row.key, &row.scope))?;
                }
                Ok(_) => report.keep("semantic", &row.key, "exists", "the stored value wins"),
                Err(error) if error.rejection().is_some() => report.reject("semantic", &row.key, &error),
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    /// The lessons, at most [`MAX_IMPORTED_LESSONS`], through the lesson writer.
    fn lessons(&mut self, rows: &[ExportedLesson]) -> Result<()> {
        let Import { db, ref mut ledger, ref mut report } = *self;
        let dry_run = report.dry_run;
        let mut lessons_taken = 0;
        for row in rows {
            let key = crate::lesson_key(&row.rule, row.not.as_deref());
            let hash = row_hash("lesson", row);
            if ledger.contains(&hash) {
                report.keep("lesson", &key, "already_imported", "this row was imported before");
                continue;
            }
            if db.get_semantic(&key)?.is_some() {
                report.keep("lesson", &key, "exists", "the stored lesson wins");
                continue;
            }
            if lessons_taken == MAX_IMPORTED_LESSONS {
                report.skip(
                    "lesson",
                    &key,
                    "lesson_cap",
                    format!("an import adds at most {MAX_IMPORTED_LESSONS} lessons"),
                );
                continue;
            }
            let category = match row.category.parse::<LessonCategory>() {
                Ok(category) => category,
                Err(rejected) => {
                    report.reject("lesson", &key, &MemoryError::Rejected(rejected));
                    continue;
                }
            };
            if dry_run {
                let value = Value::String(row.rule.clone());
                let checked = if row.rule.trim().is_empty() {
                    Err(Rejected::EmptyLesson)
                } else {
                    db.check_write(&key, &value, crate::lesson_confidence(&Source::Import), &Source::Import).map(|_| ())
                };
                match checked {
                    Ok(()) => {
                        report.counts.lesson(true);
                        lessons_taken += 1;
                    }
                    Err(rejected) => report.reject("lesson", &key, &MemoryError::Rejected(rejected)),
                }
                continue;
            }
            match db.write_lesson(&row.rule, row.not.as_deref(), category, Source::Import) {
                Ok(outcome) if outcome.outcome.is_change() => {
                    report.counts.lesson(true);
                    lessons_taken += 1;
                    ledger.record(db, hash, "lesson", key.clone())?;
                }
                Ok(outcome) => {
                    let message = match &outcome.outcome {
                        crate::WriteOutcome::Skipped { reason: SkipReason::ExistingWins { existing_key }, .. } => {
                            format!("the stored lesson {existing_key} wins")
                        }
                        _ => "a stored lesson already says this".to_owned(),
                    };
                    report.keep("lesson", &key, "exists", message)
                }
                Err(error) if error.rejection().is_some() => report.reject("lesson", &key, &error),
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    /// The episodic rows through the episodic writer (embedded later).
    fn episodic(&mut self, rows: &[ExportedEpisode]) -> Result<()> {
        let Import { db, ref mut ledger, ref mut report } = *self;
        let dry_run = report.dry_run;
        for (index, row) in rows.iter().enumerate() {
            let id = format!("episodic[{index}]");
            let hash = row_hash("episodic", row);
            if ledger.contains(&hash) {
                report.keep("episodic", id, "already_imported", "this row was imported before");
                continue;
            }
            let mut episode = NewEpisode::new(row.text.clone())
                .importance(row.importance)
                .tags(row.tags.clone())
                .created_at(row.created_at)
                .scope(row.scope.clone())
                .preserve(true)
                .defer_embedding(true)
                .source(Source::Import);
            if let Some(source_ref) = &row.source_ref {
                episode = episode.source_ref(source_ref.clone());
            }
            if dry_run {
                match db.check_episode(&episode) {
                    Ok(()) => report.counts.episodic(true),
                    Err(rejected) => report.reject("episodic", id, &MemoryError::Rejected(rejected)),
                }
                continue;
            }
            match db.write_episodic(&episode) {
                Ok(EpisodicOutcome::Inserted { id, .. }) => {
                    report.counts.episodic(true);
                    ledger.record(db, hash, "episodic", format!("episodic:{id}"))?;
                }
                Ok(EpisodicOutcome::Duplicate { of, .. }) => {
                    report.keep("episodic", id, "exists", format!("active row {of} already says this"))
                }
                Ok(EpisodicOutcome::StoreFull { cap }) => {
                    report.keep("episodic", id, "store_full", format!("the store holds its cap of {cap} rows"))
                }
                Err(error) if error.rejection().is_some() => report.reject("episodic", id, &error),
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    /// The history day files the home lacks; never preferences.md or projects.md.
    fn files(&mut self, files: &MemoryFiles, home: &Path, document_files: &ExportedFiles) -> Result<()> {
        let dry_run = self.report.dry_run;
        let report = &mut self.report;
        for name in [crate::files::PREFERENCES_FILE, crate::files::PROJECTS_FILE] {
            let text = if name == crate::files::PREFERENCES_FILE {
                &document_files.preferences
            } else {
                &document_files.projects
            };
            if !text.trim().is_empty() {
                report.skip("file", name, "not_imported", "import never writes preferences.md or projects.md");
            }
        }
        let history_dir = home.join(MEMORY_DIR).join(HISTORY_DIR);
        for (name, content) in &document_files.history {
            if parse_day_file_name(name).is_none() {
                report.skip("file", name, "not_a_day_file", "only YYYY-MM-DD.md day files are restored");
                continue;
            }
            let path = history_dir.join(name);
            if path.exists() {
                report.skip("file", name, "exists", "the home already has this day");
                continue;
            }
            if let Some(finding) = cairn_guard::screen(content) {
                let rejected = Rejected::Injection { rule: finding.rule };
                report.reject("file", name, &MemoryError::Rejected(rejected));
                continue;
            }
            if dry_run {
                report.files_written += 1;
                continue;
            }
            if restore_day_file(&history_dir, name, content)? {
                report.files_written += 1;
            } else {
                report.skip("file", name, "exists", "the home already has this day");
            }
        }
        if !dry_run && report.files_written > 0 {
            files.invalidate_history_cache();
            if let Err(error) = files.refresh_index() {
                tracing::warn!(%error, "keyword index not refreshed after import; the next rebuild catches up");
            }
        }
        Ok(())
    }
}

/// Refuses a document this build cannot read.
pub(crate) fn check_document(document: &ExportDocument) -> Result<()> {
    if document.format != EXPORT_FORMAT {
        return Err(MemoryError::InvalidImport(format!("format is {:?}, expected {EXPORT_FORMAT:?}", document.format)));
    }
    if document.version == 0 || document.version > EXPORT_VERSION {
        return Err(MemoryError::InvalidImport(format!(
            "document version {} is not supported (this build reads 1 to {EXPORT_VERSION})",
            document.version
        )));
    }
    Ok(())
}

/// Writes a history day file that does not exist yet (temp file, then a
/// rename that never replaces): `Ok(false)` when the day exists, or
/// appeared meanwhile (another process's day wins). The content is
/// redacted of credentials on the way.
pub(crate) fn restore_day_file(history_dir: &Path, name: &str, content: &str) -> Result<bool> {
    let path = history_dir.join(name);
    if path.exists() {
        return Ok(false);
    }
    std::fs::create_dir_all(history_dir).map_err(|source| MemoryError::Io {
        operation: "creating",
        path: history_dir.to_owned(),
        source,
    })?;
    let mut temp = cairn_files::AtomicFile::create(&path).map_err(MemoryError::files)?;
    temp.write_all(crate::files::stored_markdown(content).as_bytes()).map_err(|source| MemoryError::Io {
        operation: "writing",
        path: path.clone(),
        source,
    })?;
    temp.commit_new().map_err(MemoryError::files)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{ExportDocument, row_hash};
    use crate::constants::{EXPORT_LEDGER_SOURCE, IMPORT_LEDGER_FILE_NAME};
    use crate::{MemoryConfig, MemoryDb, MemoryFiles, Source, export_memory, import_memory};

    /// An export document of one fact and one lesson, from a store of its own.
    fn document() -> ExportDocument {
        let source = tempfile::tempdir().unwrap();
        let db = MemoryDb::open_in_home(source.path(), MemoryConfig::default()).unwrap();
        db.write_semantic("pref.editor", &json!("helix"), 1.0, Source::UserExplicit).unwrap();
        db.write_lesson("Run the linter before a commit", None, crate::LessonCategory::Tool, Source::UserExplicit)
            .unwrap();
        export_memory(&db, &MemoryFiles::open(source.path()).unwrap()).unwrap()
    }

    #[test]
    fn an_older_homes_file_ledger_is_honoured_and_moved_into_the_store() {
        let document = document();
        let home = tempfile::tempdir().unwrap();
        let db = MemoryDb::open_in_home(home.path(), MemoryConfig::default()).unwrap();
        let files = MemoryFiles::open(home.path()).unwrap();
        let fact = row_hash("semantic", &document.semantic[0]);
        let file = home.path().join(IMPORT_LEDGER_FILE_NAME);
        std::fs::write(&file, format!("{fact}\n")).unwrap();

        let codes = |report: &super::ImportReport| {
            report.skipped.iter().map(|row| (row.kind, row.code.clone())).collect::<Vec<_>>()
        };
        let dry = import_memory(&db, &files, home.path(), &document, true).unwrap();
        assert_eq!(codes(&dry), [("semantic", "already_imported".to_owned())]);
        assert!(file.exists(), "a dry run changed the home");

        let applied = import_memory(&db, &files, home.path(), &document, false).unwrap();
        assert_eq!(codes(&applied), [("semantic", "already_imported".to_owned())]);
        assert_eq!(applied.counts.lessons_written, 1);
        assert!(!file.exists(), "the file ledger stayed");
        let ledger = db.import_ledger(&[EXPORT_LEDGER_SOURCE]).unwrap();
        assert!(ledger.contains(EXPORT_LEDGER_SOURCE, "", &fact));
        assert_eq!(ledger.seen.len(), 2, "the moved hash and the lesson just written");
        // An export's lessons do not count against foreign imports' budget.
        assert_eq!(ledger.lessons_written, 0);

        // The ledger is the store's now: a third run imports nothing.
        let again = import_memory(&db, &files, home.path(), &document, false).unwrap();
        assert_eq!(codes(&again).len(), 2, "{again:#?}");
        assert!(again.skipped.iter().all(|row| row.code == "already_imported"), "{again:#?}");
    }
}
