//! Export of a whole memory home as one versioned JSON document, and import
//! of such a document through the normal writers.
//!
//! Import guarantees: every row is validated by the writer that would
//! store it (key rules, confidence gate, injection screen, conflict ladder,
//! lesson dedup, episodic dedup in preservation mode); existing memory wins
//! every conflict: an import never replaces, tombstones or revives a stored
//! semantic entry or lesson (an imported lesson the dedup rules would let
//! replace a stored one is skipped instead) and never evicts an episodic row; a provenance ledger of content hashes
//! (`<home>/import_ledger.txt`) makes re-importing the same document a
//! no-op; a dry run reports what would change without writing; each row
//! that is skipped or refused is reported with its reason while the rest
//! are written. Import never writes `preferences.md` or `projects.md` (the
//! consolidator replaces them wholesale); history day files are restored
//! only where the home has none for that day.

use std::collections::{BTreeMap, HashSet};
use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::constants::{
    EPISODIC_MAX_CHARS, EPISODIC_MIN_CHARS, IMPORT_LEDGER_FILE_NAME, LESSON_PREFIX, MAX_IMPORTED_LESSONS,
};
use crate::error::{MemoryError, Rejected, Result};
use crate::files::{HISTORY_DIR, MEMORY_DIR, MemoryFiles, parse_day_file_name};
use crate::{EpisodicOutcome, LessonCategory, MemoryDb, NewEpisode, SCHEMA_VERSION, SkipReason, Source};

/// `format` of an export document.
pub const EXPORT_FORMAT: &str = "cairn-memory-export";
/// Version of the export document this build writes and the newest it reads.
pub const EXPORT_VERSION: u32 = 1;

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
    /// The Markdown files.
    pub files: ExportedFiles,
}

/// A semantic entry in an export.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExportedSemantic {
    /// Key.
    pub key: String,
    /// Value.
    pub value: Value,
    /// Confidence.
    pub confidence: f64,
    /// Source name.
    pub source: String,
    /// Last change (Unix milliseconds).
    pub updated_at: i64,
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
}

/// An episodic row in an export.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExportedEpisode {
    /// The fragment.
    pub text: String,
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

/// Builds the export document of a home.
pub fn export_memory(db: &MemoryDb, files: &MemoryFiles) -> Result<ExportDocument> {
    let _span = tracing::debug_span!("export_memory").entered();
    let semantic = db
        .list_semantic("")?
        .into_iter()
        .filter(|entry| !entry.key.starts_with(LESSON_PREFIX))
        .map(|entry| ExportedSemantic {
            key: entry.key,
            value: entry.value,
            confidence: entry.confidence,
            source: entry.source.as_str().to_owned(),
            updated_at: entry.updated_at,
        })
        .collect();
    let mut lessons: Vec<ExportedLesson> = db
        .get_lessons(usize::MAX)?
        .into_iter()
        .map(|lesson| ExportedLesson {
            rule: lesson.rule,
            not: lesson.not,
            category: lesson.category.as_str().to_owned(),
            source: lesson.source.as_str().to_owned(),
        })
        .collect();
    lessons.reverse(); // oldest first, so an import teaches them in order
    let mut episodic = Vec::new();
    const PAGE: usize = 500;
    loop {
        let page = db.list_episodic(PAGE, episodic.len())?;
        let done = page.len() < PAGE;
        episodic.extend(page.into_iter().map(|row| ExportedEpisode {
            text: row.text,
            importance: row.importance,
            tags: row.tags,
            created_at: row.created_at,
            source_ref: row.source_ref,
            source: row.source,
        }));
        if done {
            break;
        }
    }
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
    Ok(ExportDocument {
        format: EXPORT_FORMAT.to_owned(),
        version: EXPORT_VERSION,
        schema_version: SCHEMA_VERSION,
        exported_at: crate::clock::now_ms(),
        semantic,
        lessons,
        episodic,
        files: ExportedFiles { preferences: files.preferences()?, projects: files.projects()?, history },
    })
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
    /// Semantic entries written.
    pub semantic_written: usize,
    /// Lessons written.
    pub lessons_written: usize,
    /// Episodic rows written.
    pub episodic_written: usize,
    /// History day files restored.
    pub files_written: usize,
    /// Rows left alone: already present, already imported, over a cap.
    pub skipped: Vec<ImportRow>,
    /// Rows a writer refused.
    pub rejected: Vec<ImportRow>,
}

impl ImportReport {
    fn skip(&mut self, kind: &'static str, id: impl Into<String>, code: &str, message: impl Into<String>) {
        self.skipped.push(ImportRow { kind, id: id.into(), code: code.to_owned(), message: message.into() });
    }

    fn reject(&mut self, kind: &'static str, id: impl Into<String>, error: &MemoryError) {
        let code = error.rejection().map(Rejected::code).unwrap_or("error").to_owned();
        self.rejected.push(ImportRow { kind, id: id.into(), code, message: error.to_string() });
    }
}

/// The provenance ledger: content hashes of rows already imported.
struct Ledger {
    path: PathBuf,
    hashes: HashSet<String>,
}

impl Ledger {
    fn load(home: &Path) -> Result<Self> {
        let path = home.join(IMPORT_LEDGER_FILE_NAME);
        let hashes = match std::fs::read_to_string(&path) {
            Ok(text) => text.lines().map(str::trim).filter(|line| !line.is_empty()).map(str::to_owned).collect(),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => HashSet::new(),
            Err(source) => return Err(MemoryError::Io { operation: "reading", path, source }),
        };
        Ok(Ledger { path, hashes })
    }

    fn contains(&self, hash: &str) -> bool {
        self.hashes.contains(hash)
    }

    fn record(&mut self, hash: String) -> Result<()> {
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(|source| MemoryError::Io { operation: "opening", path: self.path.clone(), source })?;
        file.write_all(format!("{hash}\n").as_bytes()).map_err(|source| MemoryError::Io {
            operation: "appending to",
            path: self.path.clone(),
            source,
        })?;
        self.hashes.insert(hash);
        Ok(())
    }
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
    if document.format != EXPORT_FORMAT {
        return Err(MemoryError::InvalidImport(format!("format is {:?}, expected {EXPORT_FORMAT:?}", document.format)));
    }
    if document.version == 0 || document.version > EXPORT_VERSION {
        return Err(MemoryError::InvalidImport(format!(
            "document version {} is not supported (this build reads 1 to {EXPORT_VERSION})",
            document.version
        )));
    }
    let mut ledger = Ledger::load(home)?;
    let mut report = ImportReport { dry_run, ..ImportReport::default() };

    // Oldest first, so recency order (a ranking tie-break) survives the trip.
    let mut semantic: Vec<&ExportedSemantic> = document.semantic.iter().collect();
    semantic.sort_by_key(|row| row.updated_at);
    for row in semantic {
        let hash = row_hash("semantic", row);
        if ledger.contains(&hash) {
            report.skip("semantic", &row.key, "already_imported", "this row was imported before");
            continue;
        }
        if row.key.starts_with(LESSON_PREFIX) {
            report.skip("semantic", &row.key, "lesson_key", "lessons are imported from the lessons list");
            continue;
        }
        if let Some(existing) = db.get_semantic(&row.key)? {
            let message =
                if existing.value == row.value { "the same value is stored" } else { "the stored value wins" };
            report.skip("semantic", &row.key, "exists", message);
            continue;
        }
        if dry_run {
            match db.check_write(&row.key, &row.value, row.confidence, &Source::Import) {
                Ok(_) => report.semantic_written += 1,
                Err(rejected) => report.reject("semantic", &row.key, &MemoryError::Rejected(rejected)),
            }
            continue;
        }
        match db.write_semantic(&row.key, &row.value, row.confidence, Source::Import) {
            Ok(outcome) if outcome.is_change() => {
                report.semantic_written += 1;
                ledger.record(hash)?;
            }
            Ok(_) => report.skip("semantic", &row.key, "exists", "the stored value wins"),
            Err(error) if error.rejection().is_some() => report.reject("semantic", &row.key, &error),
            Err(error) => return Err(error),
        }
    }

    let mut lessons_taken = 0;
    for row in &document.lessons {
        let key = crate::lesson_key(&row.rule, row.not.as_deref());
        let hash = row_hash("lesson", row);
        if ledger.contains(&hash) {
            report.skip("lesson", &key, "already_imported", "this row was imported before");
            continue;
        }
        if db.get_semantic(&key)?.is_some() {
            report.skip("lesson", &key, "exists", "the stored lesson wins");
            continue;
        }
        if lessons_taken == MAX_IMPORTED_LESSONS {
            report.skip("lesson", &key, "lesson_cap", format!("an import adds at most {MAX_IMPORTED_LESSONS} lessons"));
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
                    report.lessons_written += 1;
                    lessons_taken += 1;
                }
                Err(rejected) => report.reject("lesson", &key, &MemoryError::Rejected(rejected)),
            }
            continue;
        }
        match db.write_lesson(&row.rule, row.not.as_deref(), category, Source::Import) {
            Ok(outcome) if outcome.outcome.is_change() => {
                report.lessons_written += 1;
                lessons_taken += 1;
                ledger.record(hash)?;
            }
            Ok(outcome) => {
                let message = match &outcome.outcome {
                    crate::WriteOutcome::Skipped { reason: SkipReason::ExistingWins { existing_key }, .. } => {
                        format!("the stored lesson {existing_key} wins")
                    }
                    _ => "a stored lesson already says this".to_owned(),
                };
                report.skip("lesson", &key, "exists", message)
            }
            Err(error) if error.rejection().is_some() => report.reject("lesson", &key, &error),
            Err(error) => return Err(error),
        }
    }

    for (index, row) in document.episodic.iter().enumerate() {
        let id = format!("episodic[{index}]");
        let hash = row_hash("episodic", row);
        if ledger.contains(&hash) {
            report.skip("episodic", id, "already_imported", "this row was imported before");
            continue;
        }
        let mut episode = NewEpisode::new(row.text.clone())
            .importance(row.importance)
            .tags(row.tags.clone())
            .created_at(row.created_at)
            .preserve(true)
            .defer_embedding(true)
            .source(Source::Import);
        if let Some(source_ref) = &row.source_ref {
            episode = episode.source_ref(source_ref.clone());
        }
        if dry_run {
            match dry_check_episode(&episode) {
                Ok(()) => report.episodic_written += 1,
                Err(rejected) => report.reject("episodic", id, &MemoryError::Rejected(rejected)),
            }
            continue;
        }
        match db.write_episodic(&episode) {
            Ok(EpisodicOutcome::Inserted { .. }) => {
                report.episodic_written += 1;
                ledger.record(hash)?;
            }
            Ok(EpisodicOutcome::Duplicate { of, .. }) => {
                report.skip("episodic", id, "exists", format!("active row {of} already says this"))
            }
            Ok(EpisodicOutcome::StoreFull { cap }) => {
                report.skip("episodic", id, "store_full", format!("the store holds its cap of {cap} rows"))
            }
            Err(error) if error.rejection().is_some() => report.reject("episodic", id, &error),
            Err(error) => return Err(error),
        }
    }

    for name in [crate::files::PREFERENCES_FILE, crate::files::PROJECTS_FILE] {
        let text =
            if name == crate::files::PREFERENCES_FILE { &document.files.preferences } else { &document.files.projects };
        if !text.trim().is_empty() {
            report.skip("file", name, "not_imported", "import never writes preferences.md or projects.md");
        }
    }
    let history_dir = home.join(MEMORY_DIR).join(HISTORY_DIR);
    for (name, content) in &document.files.history {
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
        std::fs::create_dir_all(&history_dir).map_err(|source| MemoryError::Io {
            operation: "creating",
            path: history_dir.clone(),
            source,
        })?;
        let mut temp = tempfile::NamedTempFile::new_in(&history_dir).map_err(|source| MemoryError::Io {
            operation: "creating a temporary file in",
            path: history_dir.clone(),
            source,
        })?;
        temp.write_all(cairn_guard::redact_all(content).as_bytes()).map_err(|source| MemoryError::Io {
            operation: "writing",
            path: path.clone(),
            source,
        })?;
        // persist_noclobber: a day written meanwhile by another process wins.
        match temp.persist_noclobber(&path) {
            Ok(_) => report.files_written += 1,
            Err(error) if error.error.kind() == std::io::ErrorKind::AlreadyExists => {
                report.skip("file", name, "exists", "the home already has this day")
            }
            Err(error) => {
                return Err(MemoryError::Io { operation: "restoring", path, source: error.error });
            }
        }
    }
    if !dry_run && report.files_written > 0 {
        files.invalidate_history_cache();
        if let Err(error) = files.refresh_index() {
            tracing::warn!(%error, "keyword index not refreshed after import; the next rebuild catches up");
        }
    }
    tracing::info!(
        semantic = report.semantic_written,
        lessons = report.lessons_written,
        episodic = report.episodic_written,
        files = report.files_written,
        skipped = report.skipped.len(),
        rejected = report.rejected.len(),
        "memory import"
    );
    Ok(report)
}

/// What a dry run can tell about an episodic row without writing it: the
/// text rules and the injection screen. Similarity dedup and the store cap
/// are decided by the real run.
fn dry_check_episode(episode: &NewEpisode) -> std::result::Result<(), Rejected> {
    let text = episode.text.trim();
    let chars = text.chars().count();
    if !(EPISODIC_MIN_CHARS..=EPISODIC_MAX_CHARS).contains(&chars) {
        return Err(Rejected::TextLength { chars, min: EPISODIC_MIN_CHARS, max: EPISODIC_MAX_CHARS });
    }
    if let Some(finding) = cairn_guard::screen(text) {
        return Err(Rejected::Injection { rule: finding.rule });
    }
    Ok(())
}
