//! Consolidation runs: review before writing, and undo.
//!
//! Every run that changes something keeps a record in `consolidation_runs`
//! (behind the [`RunRows`](crate::store::RunRows) seam, so SQLite,
//! PostgreSQL and the in-memory store all hold it beside the rows it is
//! about). A run under review (`memory.write_approval`) is a changeset of
//! [`ProposedWrite`]s, each with the conflict ladder's and the screen's
//! verdict at proposal time, that changes nothing until a person approves
//! it, whole or row by row: an approved row goes through the normal
//! writers then, so the screen, the ladder and the forgotten fingerprints
//! decide again at approval. An applied run (or an approved row) records
//! what it changed: each semantic key's prior row (value, confidence,
//! source, times, version, tombstone, evidence), the episodic ids it
//! inserted, and the Markdown it replaced or appended. A revert puts those
//! back exactly, newest run first, and refuses (changing nothing) when a
//! row or file moved on since the run wrote it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::MemoryDb;
use crate::consolidate::ConsolidationPath;
use crate::constants::MAX_CONSOLIDATION_RUNS_KEPT;
use crate::error::{MemoryError, Rejected, Result};
use crate::files::{MemoryFiles, PREFERENCES_FILE, PROJECTS_FILE};
use crate::lessons::{LessonCategory, lesson_confidence, lesson_key, lesson_text};
use crate::scope::{Scope, stored_key};
use crate::semantic::{Decision, decide, load_existing};
use crate::store::{Counter, EvidenceLayer, EvidenceRow, RunRow, SemanticRow};
use crate::types::{Evidence, Source, WriteOutcome};
use crate::{EpisodicOutcome, NewEpisode};

/// One change a consolidation run proposes (and, once applied, made).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ProposedWrite {
    /// A semantic fact.
    Fact {
        /// `global` or the project the fact belongs to.
        scope: String,
        /// The key as the model named it (no scope suffix).
        key: String,
        /// The value.
        value: Value,
        /// The model's confidence.
        confidence: f64,
        /// Where the transcript says it.
        evidence: Evidence,
    },
    /// A lesson.
    Lesson {
        /// The rule.
        rule: String,
        /// What not to do, when given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        not: Option<String>,
        /// The lesson's category.
        category: String,
        /// Where the transcript says it.
        evidence: Evidence,
    },
    /// An episodic row.
    Episode {
        /// `global` or the project it belongs to.
        scope: String,
        /// The fragment.
        text: String,
        /// Its importance.
        importance: f64,
        /// Its tags.
        #[serde(default)]
        tags: Vec<String>,
        /// `session:<key>`.
        source_ref: String,
        /// Where the transcript says it.
        evidence: Evidence,
    },
    /// An entry appended to today's Markdown history.
    History {
        /// The entry.
        text: String,
        /// The session's scope: a project's entry is tagged with it.
        #[serde(default, skip_serializing_if = "crate::scope::Scope::is_global")]
        scope: crate::scope::Scope,
    },
    /// A wholesale replacement of `preferences.md`.
    Preferences {
        /// The new text.
        text: String,
    },
    /// A wholesale replacement of `projects.md`.
    Projects {
        /// The new text.
        text: String,
    },
}

impl ProposedWrite {
    /// The write as a run record keeps it: `<private>` spans withheld and
    /// credentials redacted in every text, as the writers store them, so a
    /// changeset never holds what no row may hold.
    pub(crate) fn scrubbed(self) -> Self {
        let text = |text: String| crate::validate::scrub_text(&text).unwrap_or(text);
        let evidence = |evidence: Evidence| Evidence { quote: text(evidence.quote), ..evidence };
        match self {
            ProposedWrite::Fact { scope, key, value, confidence, evidence: cited } => ProposedWrite::Fact {
                scope,
                key,
                value: crate::validate::scrub_value(&value).unwrap_or(value),
                confidence,
                evidence: evidence(cited),
            },
            ProposedWrite::Lesson { rule, not, category, evidence: cited } => {
                ProposedWrite::Lesson { rule: text(rule), not: not.map(text), category, evidence: evidence(cited) }
            }
            ProposedWrite::Episode { scope, text: episode, importance, tags, source_ref, evidence: cited } => {
                ProposedWrite::Episode {
                    scope,
                    text: text(episode),
                    importance,
                    tags,
                    source_ref,
                    evidence: evidence(cited),
                }
            }
            ProposedWrite::History { text: entry, scope } => {
                ProposedWrite::History { text: text(entry), scope: scope.clone() }
            }
            ProposedWrite::Preferences { text: body } => ProposedWrite::Preferences { text: text(body) },
            ProposedWrite::Projects { text: body } => ProposedWrite::Projects { text: text(body) },
        }
    }

    /// `fact`, `lesson`, `episode`, `history`, `preferences` or `projects`.
    pub fn kind(&self) -> &'static str {
        match self {
            ProposedWrite::Fact { .. } => "fact",
            ProposedWrite::Lesson { .. } => "lesson",
            ProposedWrite::Episode { .. } => "episode",
            ProposedWrite::History { .. } => "history",
            ProposedWrite::Preferences { .. } => "preferences",
            ProposedWrite::Projects { .. } => "projects",
        }
    }
}

/// Where a row of a changeset stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RowStatus {
    /// Waiting for a decision.
    Pending,
    /// Approved and handed to its writer (see the row's `outcome`).
    Approved,
    /// Rejected: never written.
    Rejected,
    /// Written directly (a run without review).
    Applied,
}

/// One row of a run: the proposed change, what the ladder and the screen
/// said of it when it was proposed, and what became of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunItem {
    /// 1-based row number (what `--row` names).
    pub row: usize,
    /// The change.
    pub write: ProposedWrite,
    /// The conflict ladder's verdict when proposed: `add`, `update`,
    /// `unchanged`, `skip:<reason>`, `duplicate`, `append`, `replace`.
    pub ladder: String,
    /// The screen's verdict when proposed: `passed` or a rejection code.
    pub screen: String,
    /// Where the row stands.
    pub status: RowStatus,
    /// What the writer did with it (`created`, `updated`, `unchanged`,
    /// `skipped:<reason>`, `inserted`, `duplicate`, `appended`,
    /// `replaced`, `refused:<code>`), once written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
}

/// A semantic row as it was before a run changed it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PriorRow {
    /// The stored value (JSON text).
    pub value: String,
    /// Confidence.
    pub confidence: f64,
    /// Source name.
    pub source: String,
    /// Lesson category.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// Creation time.
    pub created_at: i64,
    /// Last change.
    pub updated_at: i64,
    /// Whether it was a tombstone.
    pub is_deleted: bool,
    /// Its version.
    pub version: i64,
    /// Its evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Evidence>,
}

/// One change an applied run made, with what a revert needs to undo it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AppliedChange {
    /// A semantic row (fact or lesson) the run created, changed or tombstoned.
    Semantic {
        /// The stored key.
        key: String,
        /// The row before (`None`: there was none).
        prior: Option<PriorRow>,
        /// Its version after the run.
        version: i64,
        /// Its `updated_at` after the run.
        updated_at: i64,
    },
    /// An episodic row the run inserted.
    Episode {
        /// Its id.
        id: i64,
    },
    /// A top-level Markdown file the run replaced.
    TopLevel {
        /// `preferences.md` or `projects.md`.
        file: String,
        /// Its text before (`None`: it did not exist).
        prior: Option<String>,
        /// Its text after.
        after: String,
    },
    /// A history day file the run appended to.
    History {
        /// `history/<date>.md`.
        file: String,
        /// Its length before (`None`: it did not exist).
        prior_len: Option<u64>,
        /// Its length after.
        after_len: u64,
    },
}

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// A changeset with rows waiting for a decision.
    Pending,
    /// Applied (written directly, or every row decided and at least one approved).
    Applied,
    /// Every row rejected: nothing written.
    Rejected,
    /// Pending past its time to live: nothing written, nothing can be.
    Expired,
    /// Reverted: what it changed was put back.
    Reverted,
}

impl RunState {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Pending => "pending",
            RunState::Applied => "applied",
            RunState::Rejected => "rejected",
            RunState::Expired => "expired",
            RunState::Reverted => "reverted",
        }
    }

    fn parse(text: &str) -> RunState {
        match text {
            "pending" => RunState::Pending,
            "rejected" => RunState::Rejected,
            "expired" => RunState::Expired,
            "reverted" => RunState::Reverted,
            _ => RunState::Applied,
        }
    }
}

/// A consolidation run: a changeset under review, or the record of an
/// applied run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConsolidationRun {
    /// Its id (what `pending show/approve/reject` name).
    pub id: i64,
    /// Where it stands.
    pub state: RunState,
    /// When the run was made (Unix ms).
    pub created_at: i64,
    /// When it last changed.
    pub updated_at: i64,
    /// When a pending changeset expires (Unix ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
    /// The session consolidated.
    pub session_key: String,
    /// The path that ran.
    pub path: ConsolidationPath,
    /// Its rows.
    pub rows: Vec<RunItem>,
    /// What it changed, in order.
    pub applied: Vec<AppliedChange>,
}

#[derive(Serialize, Deserialize)]
struct RunBody {
    session_key: String,
    path: ConsolidationPath,
    rows: Vec<RunItem>,
    #[serde(default)]
    applied: Vec<AppliedChange>,
}

fn body_of(run: &ConsolidationRun) -> String {
    let body = RunBody {
        session_key: run.session_key.clone(),
        path: run.path,
        rows: run.rows.clone(),
        applied: run.applied.clone(),
    };
    serde_json::to_string(&body).expect("a run body always serialises")
}

fn run_of(row: RunRow, now_ms: i64, ttl_ms: i64) -> Result<ConsolidationRun> {
    let body: RunBody = serde_json::from_str(&row.body).map_err(|error| MemoryError::CorruptRow {
        table: "consolidation_runs",
        reason: format!("run {} is not a run body: {error}", row.id),
    })?;
    let mut state = RunState::parse(&row.state);
    let expires_at = (state == RunState::Pending).then(|| row.created_at.saturating_add(ttl_ms));
    if state == RunState::Pending && expires_at.is_some_and(|at| now_ms >= at) {
        state = RunState::Expired;
    }
    Ok(ConsolidationRun {
        id: row.id,
        state,
        created_at: row.created_at,
        updated_at: row.updated_at,
        expires_at: expires_at.filter(|_| state == RunState::Pending),
        session_key: body.session_key,
        path: body.path,
        rows: body.rows,
        applied: body.applied,
    })
}

/// What [`revert_consolidation_runs`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RevertReport {
    /// The runs reverted, newest first.
    pub runs: Vec<i64>,
    /// Semantic rows put back (or removed, when the run created them).
    pub semantic_restored: usize,
    /// Episodic rows the runs inserted, tombstoned.
    pub episodic_removed: usize,
    /// Markdown files put back.
    pub files_restored: usize,
}

/// The outcome of one write, for the report and the row.
pub(crate) enum Written {
    /// The store changed.
    Changed(String),
    /// The writer kept what was stored.
    Kept(String),
}

impl MemoryDb {
    /// Every consolidation run, newest first; a pending changeset older
    /// than `ttl_ms` shows (and is recorded) as expired.
    pub fn consolidation_runs(&self, now_ms: i64, ttl_ms: i64) -> Result<Vec<ConsolidationRun>> {
        let rows = self.rows().read("listing consolidation runs", |tx| tx.run_rows())?;
        let runs: Vec<ConsolidationRun> =
            rows.into_iter().map(|row| run_of(row, now_ms, ttl_ms)).collect::<Result<_>>()?;
        for run in runs.iter().filter(|run| run.state == RunState::Expired) {
            self.expire_run(run)?;
        }
        Ok(runs)
    }

    /// Run `id`; [`Rejected::UnknownChangeset`] when there is none.
    pub fn consolidation_run(&self, id: i64, now_ms: i64, ttl_ms: i64) -> Result<ConsolidationRun> {
        let row = self.rows().read("reading a consolidation run", |tx| tx.run_row(id))?;
        let Some(row) = row else { return Err(MemoryError::Rejected(Rejected::UnknownChangeset { id })) };
        let run = run_of(row, now_ms, ttl_ms)?;
        if run.state == RunState::Expired {
            self.expire_run(&run)?;
        }
        Ok(run)
    }

    fn expire_run(&self, run: &ConsolidationRun) -> Result<()> {
        let body = body_of(run);
        self.rows().write("expiring a changeset", |tx| {
            if tx.run_row(run.id)?.is_some_and(|row| row.state == RunState::Pending.as_str()) {
                tx.update_run(run.id, RunState::Expired.as_str(), crate::clock::now_ms(), &body)?;
            }
            Ok(())
        })
    }

    /// Stores a new run, and drops the oldest decided ones past
    /// [`MAX_CONSOLIDATION_RUNS_KEPT`] (a pending changeset is never dropped).
    pub(crate) fn insert_run(&self, state: RunState, run: &ConsolidationRun) -> Result<i64> {
        let body = body_of(run);
        self.rows().write("recording a consolidation run", |tx| {
            let id = tx.insert_run(state.as_str(), run.created_at, &body)?;
            let decided: Vec<i64> = tx
                .run_rows()?
                .into_iter()
                .filter(|row| row.state != RunState::Pending.as_str())
                .map(|row| row.id)
                .collect();
            for old in decided.iter().skip(MAX_CONSOLIDATION_RUNS_KEPT) {
                tx.delete_run(*old)?;
            }
            Ok(id)
        })
    }

    fn save_run(&self, run: &ConsolidationRun) -> Result<()> {
        let body = body_of(run);
        self.rows().write("recording a consolidation run", |tx| {
            tx.update_run(run.id, run.state.as_str(), crate::clock::now_ms(), &body)
        })
    }

    /// A semantic row and its evidence as a revert would put it back.
    fn prior_row(&self, key: &str) -> Result<Option<PriorRow>> {
        self.rows().read("reading a semantic entry", |tx| {
            let Some(row) = tx.semantic_row(key)? else { return Ok(None) };
            let evidence = tx.evidence(EvidenceLayer::Semantic, key)?.map(crate::evidence::from_row);
            Ok(Some(prior_of(row, evidence)))
        })
    }

    /// The record of a semantic key after a write that changed it.
    fn semantic_change(&self, key: &str, prior: Option<PriorRow>) -> Result<Option<AppliedChange>> {
        let after = self.rows().read("reading a semantic entry", |tx| tx.semantic_row(key))?;
        Ok(after.map(|after| AppliedChange::Semantic {
            key: key.to_owned(),
            prior,
            version: after.version,
            updated_at: after.updated_at,
        }))
    }

    /// What the ladder and the screen say of `write` now, changing nothing.
    pub(crate) fn preview(&self, write: &ProposedWrite) -> (String, String) {
        let source = Source::Consolidation;
        let screen = |result: std::result::Result<(), Rejected>| match result {
            Ok(()) => "passed".to_owned(),
            Err(rejected) => rejected.code().to_owned(),
        };
        match write {
            ProposedWrite::Fact { scope, key, value, confidence, evidence } => {
                let checked = self
                    .check_write(key, value, *confidence, &source)
                    .and_then(|stored| crate::evidence::check(evidence).map(|_| stored));
                let ladder = match &checked {
                    Ok(stored) => {
                        let scope = Scope::parse(scope).unwrap_or_default();
                        let stored_key = stored_key(key, &scope);
                        let existing =
                            self.rows().read("reading a semantic entry", |tx| load_existing(tx, &stored_key));
                        match existing {
                            Ok(existing) => {
                                let live = existing.as_ref().is_some_and(|existing| !existing.is_deleted);
                                match decide(&stored_key, existing.as_ref(), &stored.text, *confidence, &source) {
                                    Decision::Write if live => "update".to_owned(),
                                    Decision::Write => "add".to_owned(),
                                    Decision::Unchanged => "unchanged".to_owned(),
                                    Decision::Skip(reason) => format!("skip:{}", reason.code()),
                                }
                            }
                            Err(_) => "unknown".to_owned(),
                        }
                    }
                    Err(_) => "refused".to_owned(),
                };
                (ladder, screen(checked.map(|_| ())))
            }
            ProposedWrite::Lesson { rule, not, evidence, .. } => {
                let key = lesson_key(rule, not.as_deref());
                let sent = Value::String(lesson_text(rule, not.as_deref()));
                let checked = self
                    .check_write(&key, &sent, lesson_confidence(&source), &source)
                    .and_then(|_| crate::evidence::check(evidence).map(|_| ()));
                let live = self
                    .rows()
                    .read("reading a lesson", |tx| tx.semantic_row(&key))
                    .ok()
                    .flatten()
                    .is_some_and(|row| !row.is_deleted);
                let ladder = if checked.is_err() {
                    "refused"
                } else if live {
                    "unchanged"
                } else {
                    "add"
                };
                (ladder.to_owned(), screen(checked))
            }
            ProposedWrite::Episode { text, evidence, .. } => {
                let checked = match cairn_guard::screen(text) {
                    Some(finding) => Err(Rejected::Injection { rule: finding.rule }),
                    None => match self.refuse_forgotten(text, None) {
                        Ok(verdict) => verdict,
                        Err(_) => Ok(()),
                    },
                }
                .and_then(|()| crate::evidence::check(evidence).map(|_| ()));
                let duplicate = self
                    .rows()
                    .read("reading episodic rows", |tx| tx.episodic_with_text(text.trim()))
                    .ok()
                    .flatten()
                    .is_some();
                let ladder = if checked.is_err() {
                    "refused"
                } else if duplicate {
                    "duplicate"
                } else {
                    "add"
                };
                (ladder.to_owned(), screen(checked))
            }
            ProposedWrite::History { text, .. }
            | ProposedWrite::Preferences { text }
            | ProposedWrite::Projects { text } => {
                let checked = match cairn_guard::screen(text) {
                    Some(finding) => Err(Rejected::Injection { rule: finding.rule }),
                    None => Ok(()),
                };
                let ladder = if matches!(write, ProposedWrite::History { .. }) { "append" } else { "replace" };
                (ladder.to_owned(), screen(checked))
            }
        }
    }

    /// Writes `write` through its normal writer and records what changed
    /// in `applied`. A refusal is the writer's error (audited there).
    pub(crate) fn apply_proposed(
        &self,
        files: &MemoryFiles,
        write: &ProposedWrite,
        applied: &mut Vec<AppliedChange>,
    ) -> Result<Written> {
        let source = Source::Consolidation;
        match write {
            ProposedWrite::Fact { scope, key, value, confidence, evidence } => {
                let scope = match Scope::parse(scope) {
                    Some(scope) => scope,
                    None => return Err(MemoryError::Rejected(Rejected::InvalidScope(scope.clone()))),
                };
                let stored = stored_key(key, &scope);
                let prior = self.prior_row(&stored)?;
                let outcome =
                    self.write_semantic_in_with_evidence(&scope, key, value, *confidence, source, Some(evidence))?;
                if outcome.is_change() {
                    applied.extend(self.semantic_change(&stored, prior)?);
                }
                Ok(written(&outcome))
            }
            ProposedWrite::Lesson { rule, not, category, evidence } => {
                let category = category.parse::<LessonCategory>().map_err(MemoryError::Rejected)?;
                let key = lesson_key(rule, not.as_deref());
                let prior = self.prior_row(&key)?;
                // Lessons dedup may replace (tombstone) others: keep their rows too.
                let others: Vec<(String, Option<PriorRow>)> = self.rows().read("reading lessons", |tx| {
                    let mut others = Vec::new();
                    for row in tx.live_semantic(crate::constants::LESSON_PREFIX)? {
                        if row.key == key {
                            continue;
                        }
                        let evidence = tx.evidence(EvidenceLayer::Semantic, &row.key)?.map(crate::evidence::from_row);
                        others.push((row.key.clone(), Some(prior_of(row, evidence))));
                    }
                    Ok(others)
                })?;
                let outcome =
                    self.write_lesson_with_evidence(rule, not.as_deref(), category, source, Some(evidence))?;
                if outcome.outcome.is_change() {
                    applied.extend(self.semantic_change(&key, prior)?);
                }
                for replaced in &outcome.replaced {
                    if let Some((other, prior)) = others.iter().find(|(other, _)| *other == replaced.key) {
                        applied.extend(self.semantic_change(other, prior.clone())?);
                    }
                }
                Ok(written(&outcome.outcome))
            }
            ProposedWrite::Episode { scope, text, importance, tags, source_ref, evidence } => {
                let scope = Scope::parse(scope).unwrap_or_default();
                let episode = NewEpisode::new(text.as_str())
                    .importance(*importance)
                    .tags(tags.clone())
                    .source_ref(source_ref.clone())
                    .source(source)
                    .scope(scope)
                    .evidence(evidence.clone());
                match self.write_episodic(&episode)? {
                    EpisodicOutcome::Inserted { id, .. } => {
                        applied.push(AppliedChange::Episode { id });
                        Ok(Written::Changed("inserted".to_owned()))
                    }
                    EpisodicOutcome::Duplicate { .. } => Ok(Written::Kept("duplicate".to_owned())),
                    _ => Ok(Written::Kept("kept".to_owned())),
                }
            }
            ProposedWrite::History { text, scope } => {
                let today = files.today_history_file();
                let prior_len = files.history_len(&today)?;
                let appended = files.append_history_in(scope, text)?;
                let prior_len = if appended.file == today { prior_len } else { None };
                let after_len = files.history_len(&appended.file)?.unwrap_or(0);
                applied.push(AppliedChange::History { file: appended.file, prior_len, after_len });
                Ok(Written::Changed("appended".to_owned()))
            }
            ProposedWrite::Preferences { text } | ProposedWrite::Projects { text } => {
                let file =
                    if matches!(write, ProposedWrite::Preferences { .. }) { PREFERENCES_FILE } else { PROJECTS_FILE };
                let prior = files.top_level_raw(file)?;
                if file == PREFERENCES_FILE {
                    files.write_preferences(text)?;
                } else {
                    files.write_projects(text)?;
                }
                let after = files.top_level_raw(file)?.unwrap_or_default();
                applied.push(AppliedChange::TopLevel { file: file.to_owned(), prior, after });
                Ok(Written::Changed("replaced".to_owned()))
            }
        }
    }
}

/// What a run record shows in place of a forgotten text.
const FORGOTTEN_TEXT: &str = "[forgotten]";

impl MemoryDb {
    /// Takes forgotten texts out of every run record (a forget's last
    /// step): a proposed write that would bring one back loses its text
    /// and, while pending, is rejected (`refused:forgotten`); a prior row
    /// a revert would put back holding one becomes a tombstone, so no
    /// revert restores it. Answers how many runs changed.
    pub(crate) fn forget_in_runs(&self) -> Result<usize> {
        self.rows().write("forgetting in consolidation runs", |tx| {
            let mut changed = 0;
            for row in tx.run_rows()? {
                let Ok(mut body) = serde_json::from_str::<RunBody>(&row.body) else { continue };
                let mut touched = false;
                for item in &mut body.rows {
                    let (text, key) = match &item.write {
                        ProposedWrite::Fact { key, value, .. } => {
                            (crate::validate::display_value(value), Some(key.clone()))
                        }
                        ProposedWrite::Lesson { rule, not, .. } => {
                            (lesson_text(rule, not.as_deref()), Some(lesson_key(rule, not.as_deref())))
                        }
                        ProposedWrite::Episode { text, .. } => (text.clone(), None),
                        _ => continue,
                    };
                    if text == FORGOTTEN_TEXT || crate::forget::check_not_forgotten(tx, &text, key.as_deref())?.is_ok()
                    {
                        continue;
                    }
                    match &mut item.write {
                        ProposedWrite::Fact { value, .. } => *value = Value::String(FORGOTTEN_TEXT.to_owned()),
                        ProposedWrite::Lesson { rule, not, .. } => {
                            *rule = FORGOTTEN_TEXT.to_owned();
                            *not = None;
                        }
                        ProposedWrite::Episode { text, .. } => *text = FORGOTTEN_TEXT.to_owned(),
                        _ => {}
                    }
                    if let ProposedWrite::Fact { evidence, .. }
                    | ProposedWrite::Lesson { evidence, .. }
                    | ProposedWrite::Episode { evidence, .. } = &mut item.write
                    {
                        evidence.quote = FORGOTTEN_TEXT.to_owned();
                    }
                    if item.status == RowStatus::Pending {
                        item.status = RowStatus::Rejected;
                        item.outcome = Some("refused:forgotten".to_owned());
                    }
                    touched = true;
                }
                for change in &mut body.applied {
                    let AppliedChange::Semantic { key, prior: Some(prior), .. } = change else { continue };
                    if prior.is_deleted {
                        continue;
                    }
                    let Ok(value) = serde_json::from_str::<Value>(&prior.value) else { continue };
                    let (plain, _) = crate::scope::split_stored_key(key);
                    let shown = crate::validate::display_value(&value);
                    if crate::forget::check_not_forgotten(tx, &shown, Some(plain))?.is_ok() {
                        continue;
                    }
                    prior.value = "null".to_owned();
                    prior.is_deleted = true;
                    prior.evidence = None;
                    touched = true;
                }
                if touched {
                    let mut state = row.state.clone();
                    if state == RunState::Pending.as_str()
                        && !body.rows.iter().any(|item| item.status == RowStatus::Pending)
                    {
                        let approved = body.rows.iter().any(|item| item.status == RowStatus::Approved);
                        state = if approved { RunState::Applied } else { RunState::Rejected }.as_str().to_owned();
                    }
                    let text = serde_json::to_string(&body).expect("a run body always serialises");
                    tx.update_run(row.id, &state, crate::clock::now_ms(), &text)?;
                    changed += 1;
                }
            }
            Ok(changed)
        })
    }
}

fn prior_of(row: SemanticRow, evidence: Option<Evidence>) -> PriorRow {
    PriorRow {
        value: row.value,
        confidence: row.confidence,
        source: row.source,
        category: row.category,
        created_at: row.created_at,
        updated_at: row.updated_at,
        is_deleted: row.is_deleted,
        version: row.version,
        evidence,
    }
}

fn written(outcome: &WriteOutcome) -> Written {
    match outcome {
        WriteOutcome::Created { .. } => Written::Changed("created".to_owned()),
        WriteOutcome::Updated { .. } => Written::Changed("updated".to_owned()),
        WriteOutcome::Unchanged { .. } => Written::Kept("unchanged".to_owned()),
        WriteOutcome::Skipped { reason, .. } => Written::Kept(format!("skipped:{}", reason.code())),
    }
}

/// Which rows a decision covers: all pending ones, or the given 1-based
/// rows (each must exist and still be pending).
fn select_rows(run: &ConsolidationRun, rows: Option<&[usize]>) -> Result<Vec<usize>> {
    match run.state {
        RunState::Pending => {}
        RunState::Expired => return Err(MemoryError::Rejected(Rejected::ChangesetExpired { id: run.id })),
        state => {
            return Err(MemoryError::Rejected(Rejected::ChangesetClosed {
                id: run.id,
                state: state.as_str().to_owned(),
            }));
        }
    }
    match rows {
        None => Ok(run.rows.iter().filter(|item| item.status == RowStatus::Pending).map(|item| item.row).collect()),
        Some(rows) => {
            let mut selected = Vec::new();
            for &row in rows {
                let Some(item) = row.checked_sub(1).and_then(|index| run.rows.get(index)) else {
                    return Err(MemoryError::Rejected(Rejected::RowOutOfRange { row, rows: run.rows.len() }));
                };
                if item.status != RowStatus::Pending {
                    return Err(MemoryError::Rejected(Rejected::RowDecided { row }));
                }
                if !selected.contains(&row) {
                    selected.push(row);
                }
            }
            Ok(selected)
        }
    }
}

/// The state of a changeset once some of its rows are decided.
fn settle_state(run: &mut ConsolidationRun) {
    if run.rows.iter().any(|item| item.status == RowStatus::Pending) {
        return;
    }
    run.state = if run.rows.iter().any(|item| item.status == RowStatus::Approved) {
        RunState::Applied
    } else {
        RunState::Rejected
    };
}

/// Approves changeset `id`, whole (`rows` = `None`: every pending row) or
/// the given 1-based rows: each goes through its normal writer now, so the
/// screen, the conflict ladder and the forgotten fingerprints decide again;
/// a refusal is recorded on the row (`refused:<code>`). What was written is
/// recorded for a revert. Refused: an unknown id, a row out of range or
/// already decided, an expired or closed changeset.
pub fn approve_changeset(
    db: &MemoryDb,
    files: &MemoryFiles,
    id: i64,
    rows: Option<&[usize]>,
    now_ms: i64,
    ttl_ms: i64,
) -> Result<ConsolidationRun> {
    let _span = tracing::debug_span!("approve_changeset", id).entered();
    let mut run = db.consolidation_run(id, now_ms, ttl_ms)?;
    let selected = select_rows(&run, rows)?;
    for row in selected {
        let index = row - 1;
        let write = run.rows[index].write.clone();
        let mut applied = Vec::new();
        let outcome = match db.apply_proposed(files, &write, &mut applied) {
            Ok(Written::Changed(outcome) | Written::Kept(outcome)) => outcome,
            Err(error) => {
                let code = error.rejection().map(|rejected| rejected.code().to_owned());
                format!("refused:{}", code.as_deref().unwrap_or("error"))
            }
        };
        run.applied.extend(applied);
        let item = &mut run.rows[index];
        item.status = RowStatus::Approved;
        item.outcome = Some(outcome);
        // Recorded row by row, so a failure later leaves what was written revertable.
        settle_state(&mut run);
        db.save_run(&run)?;
    }
    tracing::debug!(id, state = run.state.as_str(), "changeset approved");
    Ok(run)
}

/// Rejects changeset `id`, whole or the given 1-based rows: nothing is
/// written. Refused like [`approve_changeset`].
pub fn reject_changeset(
    db: &MemoryDb,
    id: i64,
    rows: Option<&[usize]>,
    now_ms: i64,
    ttl_ms: i64,
) -> Result<ConsolidationRun> {
    let mut run = db.consolidation_run(id, now_ms, ttl_ms)?;
    let selected = select_rows(&run, rows)?;
    for row in selected {
        run.rows[row - 1].status = RowStatus::Rejected;
    }
    settle_state(&mut run);
    db.save_run(&run)?;
    Ok(run)
}

/// Reverts the newest `count` applied runs that changed something, newest
/// first: a semantic row a run created is removed, one it changed gets
/// its prior row back exactly (value, confidence, source, times, version,
/// tombstone, evidence; its vector is re-embedded by the next backfill),
/// episodic rows it inserted are tombstoned, Markdown it replaced or
/// appended is put back. Every row and file is checked first: when one
/// moved on since the run wrote it ([`Rejected::ChangedSince`]), or a
/// value it would put back was forgotten since ([`Rejected::Forgotten`]),
/// nothing is reverted.
pub fn revert_consolidation_runs(db: &MemoryDb, files: &MemoryFiles, count: usize) -> Result<RevertReport> {
    let _span = tracing::debug_span!("revert_consolidation_runs", count).entered();
    if count == 0 {
        return Err(MemoryError::Rejected(Rejected::NothingToRevert));
    }
    let runs: Vec<ConsolidationRun> = db
        .consolidation_runs(crate::clock::now_ms(), i64::MAX)?
        .into_iter()
        .filter(|run| run.state == RunState::Applied && !run.applied.is_empty())
        .take(count)
        .collect();
    if runs.is_empty() {
        return Err(MemoryError::Rejected(Rejected::NothingToRevert));
    }
    check_revertible(db, files, &runs)?;
    let mut report = RevertReport { runs: runs.iter().map(|run| run.id).collect(), ..RevertReport::default() };
    // The rows, in one transaction.
    let changes: Vec<&AppliedChange> = runs.iter().flat_map(|run| run.applied.iter().rev()).collect();
    report.semantic_restored = db.rows().write("reverting consolidation runs", |tx| {
        let mut restored = 0;
        for change in &changes {
            let AppliedChange::Semantic { key, prior, version, updated_at } = change else { continue };
            // Checked again under the write lock.
            let current = tx.semantic_row(key)?.map(|row| (row.version, row.updated_at));
            if current != Some((*version, *updated_at)) {
                return Err(MemoryError::Rejected(Rejected::ChangedSince { what: key.clone() }));
            }
            match prior {
                Some(prior) => {
                    tx.put_semantic_row(&prior.row(key))?;
                    let evidence = prior.evidence.as_ref().map(evidence_row);
                    tx.set_evidence(EvidenceLayer::Semantic, key, evidence.as_ref())?;
                }
                None => {
                    tx.remove_semantic_row(key)?;
                    tx.set_evidence(EvidenceLayer::Semantic, key, None)?;
                }
            }
            crate::audit::insert_event(
                tx,
                &crate::store::EventRecord {
                    memory_type: crate::semantic::memory_type(key),
                    action: crate::types::MemoryAuditAction::Restored,
                    key: Some(key),
                    old_value: None,
                    new_value: None,
                    source: Some(Source::Consolidation.as_str()),
                    confidence: None,
                    detail: Some(if prior.is_some() {
                        "consolidation reverted"
                    } else {
                        "consolidation reverted: removed"
                    }),
                },
            )?;
            restored += 1;
        }
        if restored > 0 {
            tx.bump_at_commit(Counter::Semantic)?;
        }
        Ok(restored)
    })?;
    let episodes: Vec<i64> = changes
        .iter()
        .filter_map(|change| match change {
            AppliedChange::Episode { id } => Some(*id),
            _ => None,
        })
        .collect();
    if !episodes.is_empty() {
        report.episodic_removed =
            db.tombstone_episodic(&episodes, Source::Consolidation.as_str(), "consolidation reverted")?.len();
    }
    for change in &changes {
        match change {
            AppliedChange::History { file, prior_len, after_len } => {
                if !files.truncate_history(file, *after_len, *prior_len)? {
                    return Err(MemoryError::Rejected(Rejected::ChangedSince { what: file.clone() }));
                }
                report.files_restored += 1;
            }
            AppliedChange::TopLevel { file, prior, .. } => {
                files.restore_top_level(file, prior.as_deref())?;
                report.files_restored += 1;
            }
            _ => {}
        }
    }
    for mut run in runs {
        run.state = RunState::Reverted;
        db.save_run(&run)?;
    }
    tracing::debug!(?report, "consolidation runs reverted");
    Ok(report)
}

/// Refuses a revert when anything a run changed has changed since: every
/// change checked against the state it left, newest first, as the revert
/// will see it; a value forgotten since is not brought back either.
fn check_revertible(db: &MemoryDb, files: &MemoryFiles, runs: &[ConsolidationRun]) -> Result<()> {
    let mut semantic: std::collections::HashMap<String, Option<(i64, i64)>> = std::collections::HashMap::new();
    let mut lengths: std::collections::HashMap<String, Option<u64>> = std::collections::HashMap::new();
    let mut texts: std::collections::HashMap<String, Option<String>> = std::collections::HashMap::new();
    for change in runs.iter().flat_map(|run| run.applied.iter().rev()) {
        match change {
            AppliedChange::Semantic { key, prior, version, updated_at } => {
                let current = match semantic.get(key) {
                    Some(current) => *current,
                    None => db
                        .rows()
                        .read("reading a semantic entry", |tx| tx.semantic_row(key))?
                        .map(|row| (row.version, row.updated_at)),
                };
                if current != Some((*version, *updated_at)) {
                    return Err(MemoryError::Rejected(Rejected::ChangedSince { what: key.clone() }));
                }
                // A value forgotten since is not brought back.
                if let Some(prior) = prior.as_ref().filter(|prior| !prior.is_deleted)
                    && let Ok(value) = serde_json::from_str::<Value>(&prior.value)
                    && let Err(rejected) = db.refuse_forgotten(&crate::validate::display_value(&value), Some(key))?
                {
                    return Err(MemoryError::Rejected(rejected));
                }
                semantic.insert(key.clone(), prior.as_ref().map(|prior| (prior.version, prior.updated_at)));
            }
            AppliedChange::Episode { .. } => {}
            AppliedChange::History { file, prior_len, after_len } => {
                let current = match lengths.get(file) {
                    Some(current) => *current,
                    None => files.history_len(file)?,
                };
                if current != Some(*after_len) {
                    return Err(MemoryError::Rejected(Rejected::ChangedSince { what: file.clone() }));
                }
                lengths.insert(file.clone(), *prior_len);
            }
            AppliedChange::TopLevel { file, prior, after } => {
                let current = match texts.get(file) {
                    Some(current) => current.clone(),
                    None => files.top_level_raw(file)?,
                };
                if current.as_deref() != Some(after.as_str()) {
                    return Err(MemoryError::Rejected(Rejected::ChangedSince { what: file.clone() }));
                }
                texts.insert(file.clone(), prior.clone());
            }
        }
    }
    Ok(())
}

impl PriorRow {
    /// The semantic row under `key` as it was before the run.
    fn row(&self, key: &str) -> SemanticRow {
        SemanticRow {
            key: key.to_owned(),
            value: self.value.clone(),
            confidence: self.confidence,
            source: self.source.clone(),
            category: self.category.clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
            is_deleted: self.is_deleted,
            version: self.version,
            embedding_space: None,
        }
    }
}

fn evidence_row(evidence: &Evidence) -> EvidenceRow {
    EvidenceRow {
        session_key: evidence.session_key.clone(),
        first_seq: i64::try_from(evidence.from_message).unwrap_or(i64::MAX),
        last_seq: i64::try_from(evidence.to_message).unwrap_or(i64::MAX),
        quote: evidence.quote.clone(),
    }
}
