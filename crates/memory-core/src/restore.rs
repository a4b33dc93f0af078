//! Exact restore of an export document into an empty store: how a home
//! moves between backends (SQLite to PostgreSQL and back) unchanged.
//!
//! A merge import ([`crate::import_memory`]) treats the document as
//! foreign memory: every row is marked `import`, existing memory wins and
//! times are the import's. A restore instead keeps every row as the
//! exporting store had it (source, confidence, creation and change times,
//! version, the deleted keys, when an episodic row was last recalled), so
//! exporting the restored home gives the same document again. It writes
//! every row or none:
//!
//! - the document is untrusted: each row passes the same rules as a write
//!   (key and value rules, the confidence gate, the injection screen, the
//!   episodic text rules and credential redaction), its times must be
//!   ordered and in range, and a key may appear once; any refused row
//!   refuses the whole restore and the report lists every refusal;
//! - the home must hold no Markdown memory, and the store no semantic or
//!   episodic row, live or deleted (checked inside the write transaction,
//!   so a concurrent writer cannot slip in between);
//! - the rows go in in one transaction with one `restored` audit row;
//!   vectors are not carried (they belong to a model): the next backfill
//!   embeds the rows, and until then keyword search finds them.

#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::path::Path;

use crate::audit::insert_event;
use crate::clock::now_ms;
use crate::constants::LESSON_PREFIX;
use crate::episodic::NewEpisode;
use crate::episodic::write::{Checked, check};
use crate::error::{MemoryError, Rejected, Result};
use crate::export::{ExportDocument, ImportReport, ImportRow, check_document, restore_day_file};
use crate::files::{HISTORY_DIR, MEMORY_DIR, MemoryFiles, PREFERENCES_FILE, PROJECTS_FILE, parse_day_file_name};
use crate::lessons::{clean, lesson_confidence, lesson_text};
use crate::store::{Counter, EventRecord, NewEpisodicRow, SemanticRow, StoreTx};
use crate::types::{MemoryAuditAction, Source};
use crate::validate;
use crate::{LessonCategory, MemoryDb};

/// One episodic row ready to insert.
struct Episode {
    checked: Checked,
    source: String,
    created_at: i64,
    source_ref: Option<String>,
    last_accessed: Option<i64>,
}

/// Every row of a document, checked, in the order they are written.
#[derive(Default)]
struct Plan {
    semantic: Vec<SemanticRow>,
    lessons: usize,
    deleted: usize,
    /// Oldest first, so ids (and the newest-first order) come out as they were.
    episodes: Vec<Episode>,
    /// Day files by name, and the two top-level files.
    history: Vec<(String, String)>,
    preferences: String,
    projects: String,
    refused: Vec<ImportRow>,
    keys: HashSet<String>,
}

impl Plan {
    fn refuse(&mut self, kind: &'static str, id: &str, code: &str, message: impl Into<String>) {
        self.refused.push(ImportRow { kind, id: id.to_owned(), code: code.to_owned(), message: message.into() });
    }

    fn reject(&mut self, kind: &'static str, id: &str, rejected: Rejected) {
        let message = rejected.to_string();
        self.refuse(kind, id, rejected.code(), message);
    }

    /// A key seen for the first time; a second sighting is refused.
    fn claim_key(&mut self, kind: &'static str, key: &str) -> bool {
        if self.keys.insert(key.to_owned()) {
            return true;
        }
        self.refuse(kind, key, "duplicate_key", "the document holds this key more than once");
        false
    }

    /// Checks a row's history: created, then changed, both in range; a version of at least 1.
    fn check_history(&mut self, kind: &'static str, key: &str, created_at: i64, updated_at: i64, version: i64) -> bool {
        let now = now_ms();
        for at in [created_at, updated_at] {
            if let Err(rejected) = validate::created_at(at, now) {
                self.reject(kind, key, rejected);
                return false;
            }
        }
        if updated_at < created_at {
            self.refuse(
                kind,
                key,
                "invalid_times",
                format!("changed at {updated_at} ms, before it was created at {created_at} ms"),
            );
            return false;
        }
        if version < 1 {
            self.refuse(kind, key, "invalid_version", format!("version {version} is below 1"));
            return false;
        }
        true
    }

    /// A source name as a [`Source`], validated.
    fn source(&mut self, kind: &'static str, id: &str, name: &str) -> Option<Source> {
        match name.parse::<Source>().and_then(|source| source.validate().map(|()| source)) {
            Ok(source) => Some(source),
            Err(rejected) => {
                self.reject(kind, id, rejected);
                None
            }
        }
    }
}

/// Checks every row of `document` against the rules of `db`.
fn plan(db: &MemoryDb, document: &ExportDocument, episodic_cap: usize) -> Plan {
    let mut plan = Plan::default();
    // A version 1 document carries no times for lessons: they take the export's.
    let fallback_at = document.exported_at;

    for row in &document.semantic {
        let kind = "semantic";
        if row.key.starts_with(LESSON_PREFIX) {
            plan.refuse(kind, &row.key, "lesson_key", "lessons are restored from the lessons list");
            continue;
        }
        let Some(source) = plan.source(kind, &row.key, &row.source) else { continue };
        let value_text = match db.check_write(&row.key, &row.value, row.confidence, &source) {
            Ok(text) => text,
            Err(rejected) => {
                plan.reject(kind, &row.key, rejected);
                continue;
            }
        };
        let created_at = row.created_at.unwrap_or(row.updated_at);
        let version = row.version.unwrap_or(1);
        if !plan.check_history(kind, &row.key, created_at, row.updated_at, version) || !plan.claim_key(kind, &row.key) {
            continue;
        }
        plan.semantic.push(SemanticRow {
            key: row.key.clone(),
            value: value_text,
            confidence: row.confidence,
            source: source.as_str().to_owned(),
            category: None,
            created_at,
            updated_at: row.updated_at,
            is_deleted: false,
            version,
            embedding_space: None,
        });
    }

    for row in &document.lessons {
        let kind = "lesson";
        let rule = clean(&row.rule);
        let not = row.not.as_deref().map(clean).filter(|not| !not.is_empty());
        let key = row.key.clone().unwrap_or_else(|| crate::lesson_key(&rule, not.as_deref()));
        if !key.starts_with(LESSON_PREFIX) {
            let allowed = LESSON_PREFIX.to_owned();
            plan.reject(kind, &key, Rejected::PrefixNotAllowed { key: validate::cut(&key, 100), allowed });
            continue;
        }
        if rule.is_empty() {
            plan.reject(kind, &key, Rejected::EmptyLesson);
            continue;
        }
        let category = match row.category.parse::<LessonCategory>() {
            Ok(category) => category,
            Err(rejected) => {
                plan.reject(kind, &key, rejected);
                continue;
            }
        };
        let Some(source) = plan.source(kind, &key, &row.source) else { continue };
        let confidence = row.confidence.unwrap_or_else(|| lesson_confidence(&source));
        let value = serde_json::Value::String(lesson_text(&rule, not.as_deref()));
        let value_text = match db.check_write(&key, &value, confidence, &source) {
            Ok(text) => text,
            Err(rejected) => {
                plan.reject(kind, &key, rejected);
                continue;
            }
        };
        let updated_at = row.updated_at.unwrap_or(fallback_at);
        let created_at = row.created_at.unwrap_or(updated_at);
        let version = row.version.unwrap_or(1);
        if !plan.check_history(kind, &key, created_at, updated_at, version) || !plan.claim_key(kind, &key) {
            continue;
        }
        plan.lessons += 1;
        plan.semantic.push(SemanticRow {
            key,
            value: value_text,
            confidence,
            source: source.as_str().to_owned(),
            category: Some(category.as_str().to_owned()),
            created_at,
            updated_at,
            is_deleted: false,
            version,
            embedding_space: None,
        });
    }

    for row in &document.deleted {
        let kind = "deleted";
        // The store's prefixes include `lesson.`: one rule for facts and lessons.
        if let Err(rejected) = validate::key(&row.key, db.prefixes()) {
            plan.reject(kind, &row.key, rejected);
            continue;
        }
        let Some(source) = plan.source(kind, &row.key, &row.source) else { continue };
        if let Err(rejected) = validate::confidence(row.confidence, &Source::UserExplicit) {
            plan.reject(kind, &row.key, rejected);
            continue;
        }
        if !plan.check_history(kind, &row.key, row.created_at, row.deleted_at, row.version)
            || !plan.claim_key(kind, &row.key)
        {
            continue;
        }
        plan.deleted += 1;
        plan.semantic.push(SemanticRow {
            key: row.key.clone(),
            value: "null".to_owned(),
            confidence: row.confidence,
            source: source.as_str().to_owned(),
            category: None,
            created_at: row.created_at,
            updated_at: row.deleted_at,
            is_deleted: true,
            version: row.version,
            embedding_space: None,
        });
    }

    let mut seen_texts = HashSet::new();
    // The document lists episodic rows newest first; they are written oldest first.
    for (index, row) in document.episodic.iter().enumerate().rev() {
        let kind = "episodic";
        let id = format!("episodic[{index}]");
        let Some(source) = plan.source(kind, &id, &row.source) else { continue };
        let mut episode = NewEpisode::new(row.text.clone())
            .importance(row.importance)
            .tags(row.tags.clone())
            .created_at(row.created_at)
            .source(source.clone());
        if let Some(source_ref) = &row.source_ref {
            episode = episode.source_ref(source_ref.clone());
        }
        let checked = match check(&episode) {
            Ok(checked) => checked,
            Err(rejected) => {
                plan.reject(kind, &id, rejected);
                continue;
            }
        };
        if let Some(at) = row.last_accessed
            && let Err(rejected) = validate::created_at(at, now_ms())
        {
            plan.reject(kind, &id, rejected);
            continue;
        }
        if !seen_texts.insert(checked.text.clone()) {
            plan.refuse(kind, &id, "duplicate_text", "another active row of the document has this text");
            continue;
        }
        plan.episodes.push(Episode {
            checked,
            source: source.as_str().to_owned(),
            created_at: row.created_at,
            source_ref: row.source_ref.clone(),
            last_accessed: row.last_accessed,
        });
    }
    if plan.episodes.len() > episodic_cap {
        let count = plan.episodes.len();
        plan.refuse(
            "episodic",
            "episodic",
            "store_full",
            format!("{count} active rows, more than this store's cap of {episodic_cap}"),
        );
    }

    for (name, text) in [(PREFERENCES_FILE, &document.files.preferences), (PROJECTS_FILE, &document.files.projects)] {
        if let Some(finding) = cairn_guard::screen(text) {
            plan.reject("file", name, Rejected::Injection { rule: finding.rule });
        }
    }
    plan.preferences = document.files.preferences.clone();
    plan.projects = document.files.projects.clone();
    for (name, content) in &document.files.history {
        if parse_day_file_name(name).is_none() {
            plan.refuse("file", name, "not_a_day_file", "only YYYY-MM-DD.md day files are restored");
            continue;
        }
        if let Some(finding) = cairn_guard::screen(content) {
            plan.reject("file", name, Rejected::Injection { rule: finding.rule });
            continue;
        }
        plan.history.push((name.clone(), content.clone()));
    }
    plan
}

/// What of the Markdown memory `files` already holds, if anything.
fn files_in_use(files: &MemoryFiles) -> Result<Option<String>> {
    let mut held = Vec::new();
    if !files.preferences()?.trim().is_empty() {
        held.push(PREFERENCES_FILE.to_owned());
    }
    if !files.projects()?.trim().is_empty() {
        held.push(PROJECTS_FILE.to_owned());
    }
    let days = files.history_days()?.len();
    if days > 0 {
        held.push(format!("{days} history day file(s)"));
    }
    Ok((!held.is_empty()).then(|| held.join(", ")))
}

/// Refuses a store that holds any semantic or episodic row, live or deleted.
fn require_empty(tx: &mut dyn StoreTx) -> Result<()> {
    let semantic = tx.semantic_counts(None)?;
    let episodic = tx.episodic_counts(None)?;
    let (semantic, episodic) = (semantic.live + semantic.deleted, episodic.live + episodic.deleted);
    if semantic + episodic > 0 {
        return Err(MemoryError::RestoreTargetNotEmpty(format!(
            "{semantic} semantic and {episodic} episodic rows (live or deleted)"
        )));
    }
    Ok(())
}

/// Restores `document` exactly into the empty store of `db` and the empty
/// memory files of `home` (see the module documentation). With `dry_run`
/// nothing is written and the report says what would be. When any row is
/// refused, nothing is written and `rejected` lists every refusal.
///
/// # Errors
///
/// [`MemoryError::InvalidImport`] for a document this build cannot read,
/// [`MemoryError::RestoreTargetNotEmpty`] when the store or the home
/// already holds memory, a storage or I/O error otherwise.
pub fn restore_memory(
    db: &MemoryDb,
    files: &MemoryFiles,
    home: &Path,
    document: &ExportDocument,
    dry_run: bool,
) -> Result<ImportReport> {
    let _span = tracing::info_span!("restore_memory", dry_run).entered();
    check_document(document)?;
    db.refuse_when_damaged()?;
    let plan = plan(db, document, db.episodic_config.cap);
    let mut report = ImportReport { dry_run, ..ImportReport::default() };
    if !plan.refused.is_empty() {
        tracing::info!(refused = plan.refused.len(), "memory restore refused; nothing written");
        report.rejected = plan.refused;
        return Ok(report);
    }
    if let Some(held) = files_in_use(files)? {
        return Err(MemoryError::RestoreTargetNotEmpty(held));
    }
    let day_files = plan.history.len()
        + usize::from(!plan.preferences.trim().is_empty())
        + usize::from(!plan.projects.trim().is_empty());
    report.semantic_written = plan.semantic.len() - plan.lessons - plan.deleted;
    report.lessons_written = plan.lessons;
    report.deleted_written = plan.deleted;
    report.episodic_written = plan.episodes.len();
    report.files_written = day_files;
    let counts = serde_json::json!({
        "semantic": report.semantic_written,
        "lessons": report.lessons_written,
        "deleted": report.deleted_written,
        "episodic": report.episodic_written,
        "files": report.files_written,
    })
    .to_string();

    if dry_run {
        db.rows().read("checking a restore", require_empty)?;
        return Ok(report);
    }
    let _episodic = db.lock_episodic();
    db.rows().write("restoring memory", |tx| {
        require_empty(tx)?;
        for row in &plan.semantic {
            tx.insert_semantic_row(row)?;
        }
        for episode in &plan.episodes {
            let id = tx.insert_episodic(&NewEpisodicRow {
                text: &episode.checked.text,
                tags_json: &episode.checked.tags_json,
                importance: episode.checked.importance,
                source: &episode.source,
                created_at: episode.created_at,
                source_ref: episode.source_ref.as_deref(),
                vector: None,
            })?;
            if let Some(at) = episode.last_accessed {
                tx.touch_episodic(&[id], at)?;
            }
        }
        insert_event(
            tx,
            &EventRecord {
                memory_type: "restore",
                action: MemoryAuditAction::Restored,
                key: None,
                old_value: None,
                new_value: Some(&counts),
                source: Some(Source::Import.as_str()),
                confidence: None,
                detail: Some(&format!("export version {}, exported at {} ms", document.version, document.exported_at)),
            },
        )?;
        tx.bump_revision(Counter::Semantic)?;
        tx.bump_revision(Counter::Episodic)?;
        Ok(())
    })?;

    if !plan.preferences.trim().is_empty() {
        files.write_preferences(&cairn_guard::redact_all(&plan.preferences))?;
    }
    if !plan.projects.trim().is_empty() {
        files.write_projects(&cairn_guard::redact_all(&plan.projects))?;
    }
    let history_dir = home.join(MEMORY_DIR).join(HISTORY_DIR);
    for (name, content) in &plan.history {
        if !restore_day_file(&history_dir, name, content)? {
            tracing::warn!(file = %name, "history day appeared during the restore; the home's copy was kept");
            report.files_written -= 1;
        }
    }
    if day_files > 0 {
        files.invalidate_history_cache();
        if let Err(error) = files.refresh_index() {
            tracing::warn!(%error, "keyword index not refreshed after restore; the next rebuild catches up");
        }
    }
    tracing::info!(counts = %counts, "memory restored");
    Ok(report)
}
