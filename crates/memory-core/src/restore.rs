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
//!   episodic text rules and credential redaction, and control characters
//!   removed, facts and lessons alike), its times must be ordered and in
//!   range, its version from 1 to [`MAX_SEMANTIC_VERSION`], and a key may
//!   appear once; any refused row
//!   refuses the whole restore and the report lists every refusal;
//! - the home must hold no Markdown memory, and the store no semantic or
//!   episodic row, live or deleted (checked inside the write transaction,
//!   so a concurrent writer cannot slip in between);
//! - the rows go in in one transaction with one `restored` audit row;
//!   vectors are not carried (they belong to a model): the next backfill
//!   embeds the rows, and until then keyword search finds them.

#[cfg(test)]
mod tests;

use crate::scope::{Scope, stored_key};
use std::collections::HashSet;
use std::path::Path;

use crate::audit::insert_event;
use crate::clock::now_ms;
use crate::constants::{LESSON_PREFIX, MAX_SEMANTIC_VERSION};
use crate::episodic::NewEpisode;
use crate::episodic::write::{Checked, check};
use crate::error::{MemoryError, Rejected, Result};
use crate::export::{ExportDocument, ImportReport, ImportRow, check_document};
use crate::files::{
    HISTORY_DIR, MEMORY_DIR, MemoryFiles, PREFERENCES_FILE, PROJECTS_FILE, parse_day_file_name, stored_markdown,
    top_level_body,
};
use crate::lessons::{clean, lesson_confidence, lesson_text, stored_part};
use crate::store::{Counter, EventRecord, EvidenceLayer, EvidenceRow, NewEpisodicRow, SemanticRow, StoreTx};
use crate::types::{Evidence, MemoryAuditAction, Source};
use crate::validate;
use crate::{LessonCategory, MemoryDb};

/// One episodic row ready to insert.
struct Episode {
    scope: Scope,
    checked: Checked,
    source: String,
    created_at: i64,
    source_ref: Option<String>,
    last_accessed: Option<i64>,
    evidence: Option<EvidenceRow>,
}

/// Every row of a document, checked, in the order they are written.
#[derive(Default)]
struct Plan {
    semantic: Vec<SemanticRow>,
    /// The checked evidence of semantic rows (facts and lessons), by key.
    evidence: Vec<(String, EvidenceRow)>,
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

    /// The checked evidence of a row, or its refusal (`None` then, with `false`).
    fn evidence(&mut self, kind: &'static str, id: &str, evidence: Option<&Evidence>) -> (bool, Option<EvidenceRow>) {
        match evidence.map(crate::evidence::check).transpose() {
            Ok(evidence) => (true, evidence),
            Err(rejected) => {
                self.reject(kind, id, rejected);
                (false, None)
            }
        }
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

    /// Checks a row's history: created, then changed, both in range; a
    /// version from 1 to [`MAX_SEMANTIC_VERSION`] (a larger one could not be
    /// written again: the next change would overflow the column).
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
        if !(1..=MAX_SEMANTIC_VERSION).contains(&version) {
            self.refuse(
                kind,
                key,
                "invalid_version",
                format!("version {version} is outside 1 to {MAX_SEMANTIC_VERSION}"),
            );
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
            Ok(stored) => stored.text,
            Err(rejected) => {
                plan.reject(kind, &row.key, rejected);
                continue;
            }
        };
        let created_at = row.created_at.unwrap_or(row.updated_at);
        let version = row.version.unwrap_or(1);
        let stored = stored_key(&row.key, &row.scope);
        let (valid, evidence) = plan.evidence(kind, &row.key, row.evidence.as_ref());
        if !valid
            || !plan.check_history(kind, &row.key, created_at, row.updated_at, version)
            || !plan.claim_key(kind, &stored)
        {
            continue;
        }
        if let Some(evidence) = evidence {
            plan.evidence.push((stored.clone(), evidence));
        }
        plan.semantic.push(SemanticRow {
            key: stored,
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
        // The screen sees the lesson as sent; what is stored is scrubbed,
        // as every writer stores it.
        let sent_rule = clean(&row.rule);
        let sent_not = row.not.as_deref().map(clean).filter(|not| !not.is_empty());
        let rule = stored_part(&sent_rule);
        let not = sent_not.as_deref().map(stored_part).filter(|not| !not.is_empty());
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
        let sent = serde_json::Value::String(lesson_text(&sent_rule, sent_not.as_deref()));
        if let Err(rejected) = db.check_write(&key, &sent, confidence, &source) {
            plan.reject(kind, &key, rejected);
            continue;
        }
        let value_text =
            serde_json::to_string(&lesson_text(&rule, not.as_deref())).expect("a string always serialises");
        let updated_at = row.updated_at.unwrap_or(fallback_at);
        let created_at = row.created_at.unwrap_or(updated_at);
        let version = row.version.unwrap_or(1);
        let (valid, evidence) = plan.evidence(kind, &key, row.evidence.as_ref());
        if !valid || !plan.check_history(kind, &key, created_at, updated_at, version) || !plan.claim_key(kind, &key) {
            continue;
        }
        if let Some(evidence) = evidence {
            plan.evidence.push((key.clone(), evidence));
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
        let stored = stored_key(&row.key, &row.scope);
        if !plan.check_history(kind, &row.key, row.created_at, row.deleted_at, row.version)
            || !plan.claim_key(kind, &stored)
        {
            continue;
        }
        plan.deleted += 1;
        plan.semantic.push(SemanticRow {
            key: stored,
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
        if let Ok(Err(rejected)) = db.refuse_forgotten(&checked.text, None) {
            plan.reject(kind, &id, rejected);
            continue;
        }
        if !seen_texts.insert(checked.text.clone()) {
            plan.refuse(kind, &id, "duplicate_text", "another active row of the document has this text");
            continue;
        }
        let (valid, evidence) = plan.evidence(kind, &id, row.evidence.as_ref());
        if !valid {
            continue;
        }
        plan.episodes.push(Episode {
            scope: row.scope.clone(),
            evidence,
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

/// Where a restore stages its Markdown files before its database commit:
/// `<home>/.restore-staging/<document id>/`, beside `memory/` so the moves
/// into place are renames on one file system.
pub const RESTORE_STAGING_DIR: &str = ".restore-staging";
/// Written last into a staging directory: its files are complete.
const STAGED_MARKER: &str = "STAGED";
/// The setting that names a committed restore whose files are not all in
/// place yet (empty once they are).
const PENDING_SETTING: &str = "restore.pending_files";

/// A point of [`restore_memory_interrupted`] where a test stops a restore,
/// as a crash (`kill -9`) there would.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestoreStep {
    /// The Markdown files are staged; nothing is committed.
    FilesStaged,
    /// The rows are committed; the staged files are not moved into place.
    Committed,
}

/// Restores `document` exactly into the empty store of `db` and the empty
/// memory files of `home` (see the module documentation). With `dry_run`
/// nothing is written and the report says what would be. When any row is
/// refused, nothing is written and `rejected` lists every refusal.
///
/// The Markdown files are all or nothing with the rows: they are written
/// to a staging directory first, the rows commit together with a note
/// that this restore's files are pending, and only then do the files move
/// into place and the note go. A restore stopped before its commit leaves
/// nothing (the staged files are removed by the next restore); one stopped
/// after it is finished by the next restore: rerunning it with the same
/// document completes it (`resumed` in the report), and any restore first
/// moves staged files that are complete into place.
///
/// # Errors
///
/// [`MemoryError::InvalidImport`] for a document this build cannot read,
/// [`MemoryError::RestoreTargetNotEmpty`] when the store or the home
/// already holds memory (or the unfinished restore of another document
/// whose staged files are gone), a storage or I/O error otherwise.
pub fn restore_memory(
    db: &MemoryDb,
    files: &MemoryFiles,
    home: &Path,
    document: &ExportDocument,
    dry_run: bool,
) -> Result<ImportReport> {
    restore(db, files, home, document, dry_run, None)
}

/// [`restore_memory`] stopped at `step` as a crash there would stop it (no
/// clean-up): the crash-consistency tests' failpoint.
#[doc(hidden)]
pub fn restore_memory_interrupted(
    db: &MemoryDb,
    files: &MemoryFiles,
    home: &Path,
    document: &ExportDocument,
    step: RestoreStep,
) -> Result<ImportReport> {
    restore(db, files, home, document, false, Some(step))
}

fn restore(
    db: &MemoryDb,
    files: &MemoryFiles,
    home: &Path,
    document: &ExportDocument,
    dry_run: bool,
    stop_at: Option<RestoreStep>,
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
    let id = document_id(document);
    let staging_root = home.join(RESTORE_STAGING_DIR);
    let day_files = plan.history.len()
        + usize::from(!plan.preferences.trim().is_empty())
        + usize::from(!plan.projects.trim().is_empty());
    report.counts.semantic_written = plan.semantic.len() - plan.lessons - plan.deleted;
    report.counts.lessons_written = plan.lessons;
    report.deleted_written = plan.deleted;
    report.counts.episodic_written = plan.episodes.len();
    report.files_written = day_files;

    // A restore committed before a crash, whose files are not all in place.
    let pending = db.rows().read("reading a pending restore", |tx| tx.setting(PENDING_SETTING))?;
    if let Some(pending) = pending.filter(|pending| !pending.is_empty()) {
        let staged = staging_root.join(&pending);
        if pending == id {
            if !dry_run {
                if !staged.join(STAGED_MARKER).is_file() {
                    stage(&plan, &staged)?;
                }
                finish(db, files, home, &staged, &mut report)?;
                tracing::info!(document = %id, "finished an interrupted restore");
            }
            report.resumed = true;
            return Ok(report);
        }
        if !staged.join(STAGED_MARKER).is_file() {
            return Err(MemoryError::RestoreTargetNotEmpty(format!(
                "the rows of an interrupted restore of another document ({pending}) whose Markdown files are not \
                 in place; rerun that restore to finish it"
            )));
        }
        if !dry_run {
            // Its files are complete: put them in place; the store is then
            // simply not empty.
            finish(db, files, home, &staged, &mut ImportReport::default())?;
        }
    }

    if let Some(held) = files_in_use(files)? {
        return Err(MemoryError::RestoreTargetNotEmpty(held));
    }
    let counts = serde_json::json!({
        "semantic": report.counts.semantic_written,
        "lessons": report.counts.lessons_written,
        "deleted": report.deleted_written,
        "episodic": report.counts.episodic_written,
        "files": report.files_written,
    })
    .to_string();

    if dry_run {
        db.rows().read("checking a restore", require_empty)?;
        return Ok(report);
    }
    // No restore is pending: whatever is staged belongs to none that
    // committed.
    remove_dir(&staging_root)?;
    let staged = staging_root.join(&id);
    stage(&plan, &staged)?;
    if stop_at == Some(RestoreStep::FilesStaged) {
        return Ok(report);
    }
    let episodic_lock = db.lock_episodic();
    let written = db.rows().write("restoring memory", |tx| {
        require_empty(tx)?;
        for row in &plan.semantic {
            tx.insert_semantic_row(row)?;
        }
        for (key, evidence) in &plan.evidence {
            tx.set_evidence(EvidenceLayer::Semantic, key, Some(evidence))?;
        }
        for episode in &plan.episodes {
            let id = tx.insert_episodic(&NewEpisodicRow {
                text: &episode.checked.text,
                tags_json: &episode.checked.tags_json,
                importance: episode.checked.importance,
                source: &episode.source,
                created_at: episode.created_at,
                source_ref: episode.source_ref.as_deref(),
                scope: episode.scope.as_str(),
                vector: None,
            })?;
            if let Some(at) = episode.last_accessed {
                tx.touch_episodic(&[(id, at)])?;
            }
            if let Some(evidence) = &episode.evidence {
                tx.set_evidence(EvidenceLayer::Episodic, &id.to_string(), Some(evidence))?;
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
        tx.set_setting(PENDING_SETTING, &id)?;
        tx.bump_at_commit(Counter::Semantic)?;
        tx.bump_revision(Counter::Episodic)?;
        Ok(())
    });
    if let Err(error) = written {
        let _ = remove_dir(&staged);
        return Err(error);
    }
    if stop_at == Some(RestoreStep::Committed) {
        return Ok(report);
    }
    drop(episodic_lock);
    finish(db, files, home, &staged, &mut report)?;
    tracing::info!(counts = %counts, "memory restored");
    Ok(report)
}

/// A document's identity: the first 16 hex digits of the SHA-256 of its
/// JSON form.
fn document_id(document: &ExportDocument) -> String {
    use sha2::{Digest, Sha256};
    let bytes = serde_json::to_vec(document).expect("an export document always serialises");
    hex::encode(Sha256::digest(&bytes))[..16].to_owned()
}

fn io_error(operation: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> MemoryError {
    let path = path.to_owned();
    move |source| MemoryError::Io { operation, path, source }
}

fn remove_dir(dir: &Path) -> Result<()> {
    match std::fs::remove_dir_all(dir) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(io_error("removing", dir)(error)),
        _ => Ok(()),
    }
}

/// Writes one file durably.
fn write_synced(path: &Path, text: &str) -> Result<()> {
    let mut file = std::fs::File::create(path).map_err(io_error("creating", path))?;
    std::io::Write::write_all(&mut file, text.as_bytes()).map_err(io_error("writing", path))?;
    file.sync_all().map_err(io_error("syncing", path))
}

/// Writes the plan's Markdown files under `staged` as they will be stored
/// (the top-level files and `history/<day>.md`), then the marker.
fn stage(plan: &Plan, staged: &Path) -> Result<()> {
    remove_dir(staged)?;
    let history = staged.join(HISTORY_DIR);
    std::fs::create_dir_all(&history).map_err(io_error("creating", &history))?;
    for (name, text) in [(PREFERENCES_FILE, &plan.preferences), (PROJECTS_FILE, &plan.projects)] {
        if !text.trim().is_empty() {
            write_synced(&staged.join(name), &top_level_body(text)?)?;
        }
    }
    for (name, content) in &plan.history {
        write_synced(&history.join(name), &stored_markdown(content))?;
    }
    cairn_files::sync_dir(&history);
    write_synced(&staged.join(STAGED_MARKER), "")?;
    cairn_files::sync_dir(staged);
    Ok(())
}

/// Moves `from` to `to` unless `to` exists (the home's copy wins); whether
/// it moved. A `from` already gone was moved by an earlier run.
fn move_into_place(from: &Path, to: &Path) -> Result<bool> {
    if !from.exists() {
        return Ok(false);
    }
    match std::fs::hard_link(from, to) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
            tracing::warn!(file = %to.display(), "a memory file appeared during the restore; the home's copy was kept");
            std::fs::remove_file(from).map_err(io_error("removing", from))?;
            return Ok(false);
        }
        Err(error) => return Err(io_error("moving a restored file to", to)(error)),
    }
    std::fs::remove_file(from).map_err(io_error("removing", from))?;
    Ok(true)
}

/// Moves the staged files of a committed restore into place, removes the
/// staging directory and clears the pending note; then refreshes the
/// keyword index. Each step can run again after a crash.
fn finish(db: &MemoryDb, files: &MemoryFiles, home: &Path, staged: &Path, report: &mut ImportReport) -> Result<()> {
    let memory_dir = home.join(MEMORY_DIR);
    let history_dir = memory_dir.join(HISTORY_DIR);
    std::fs::create_dir_all(&history_dir).map_err(io_error("creating", &history_dir))?;
    let mut kept = 0;
    for name in [PREFERENCES_FILE, PROJECTS_FILE] {
        let from = staged.join(name);
        if from.exists() && !move_into_place(&from, &memory_dir.join(name))? {
            kept += 1;
        }
    }
    let staged_history = staged.join(HISTORY_DIR);
    if let Ok(entries) = std::fs::read_dir(&staged_history) {
        for entry in entries {
            let entry = entry.map_err(io_error("listing", &staged_history))?;
            let name = entry.file_name();
            let Some(name) = name.to_str().filter(|name| parse_day_file_name(name).is_some()) else { continue };
            if !move_into_place(&entry.path(), &history_dir.join(name))? {
                kept += 1;
            }
        }
    }
    cairn_files::sync_dir(&history_dir);
    cairn_files::sync_dir(&memory_dir);
    report.files_written = report.files_written.saturating_sub(kept);
    remove_dir(staged)?;
    if let Some(root) = staged.parent() {
        // Gone when no other restore left files in it.
        let _ = std::fs::remove_dir(root);
    }
    db.rows().write("finishing a restore", |tx| tx.set_setting(PENDING_SETTING, ""))?;
    files.invalidate_history_cache();
    if let Err(error) = files.refresh_index() {
        tracing::warn!(%error, "keyword index not refreshed after restore; the next rebuild catches up");
    }
    Ok(())
}
