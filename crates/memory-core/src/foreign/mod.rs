//! Import from other agents' files: Claude Code, Hermes and OpenClaw.
//!
//! [`scan_foreign`] is the dry run: it reads each source's documented files
//! (through the guard, regular non-symlink files only, size-capped), splits
//! them into entries and says where each would land and why an entry would
//! not. [`apply_foreign`] does the same and hands every entry to Cairn's own
//! writers: lessons ([`MemoryDb::write_lesson`], category `preference`),
//! `user.*` facts ([`MemoryDb::write_semantic`]) and episodic rows
//! ([`MemoryDb::write_episodic`] in preservation mode with deferred
//! embedding), all with source [`Source::Import`]. So every key allowlist,
//! size and count limit, injection screen, conflict ladder, dedup, audit row
//! and cap applies, and existing memory wins every conflict.
//!
//! | source | files | lands as |
//! |---|---|---|
//! | Claude Code | `~/.claude/CLAUDE.md`, `~/.claude/rules/*.md`, a project's `CLAUDE.md`, `CLAUDE.local.md`, `.claude/CLAUDE.md`, `AGENTS.md`, `.claude/rules/*.md` | each directive paragraph or list item → a lesson (a rules file's `paths:` appended as a note) |
//! | Claude Code auto memory | `~/.claude/projects/<project>/memory/MEMORY.md` + topic files | `feedback` → lesson; `user` → `user.*` fact when one clear `label: value`, else episodic; `project`, `reference` → episodic; `MEMORY.md` index lines are skipped, its other entries episodic |
//! | Hermes | `memories/MEMORY.md`, `memories/USER.md` of the home and of each profile (≤ 50) | `MEMORY.md` entries → episodic; `USER.md` entries → `user.*` fact, lesson (a preference) or episodic |
//! | OpenClaw | a workspace's `MEMORY.md`, `USER.md`, `memory/YYYY-MM-DD.md` | daily entries → episodic dated by the day; `MEMORY.md` → episodic; `USER.md` as Hermes |
//! | persona | OpenClaw's `SOUL.md` | directive paragraphs → lessons; identity paragraphs are reported, never imported |
//! | skills | `skills/<name>/SKILL.md` of `~/.claude`, a project's `.claude/`, Hermes's home, an OpenClaw workspace | the skill `imported/<source>/<name>`, through the host's [`ForeignSkillWriter`] (Cairn's own skill write path); refused when it sets `always` or `triggers` (an untrusted skill may not put itself into every context) or trips the injection screen; other files of the folder are reported, never copied |
//!
//! A [`ForeignSelection`] narrows a scan or an apply to categories
//! (`lessons`, `facts`, `episodic`, `skills`) and to items by their `id`
//! (stable while the entry's file, place and text stay the same), so a
//! dry run can list the items and an apply take only the chosen ones.
//!
//! Never imported, always reported: a foreign system prompt (OpenClaw's
//! `AGENTS.md`, `BOOTSTRAP.md`), persona (`IDENTITY.md`), runtime records
//! (`TOOLS.md`, `HEARTBEAT.md`), session transcripts, `@path` includes, an
//! entry holding a credential or an exfiltration URL, Hermes's
//! `memory_store.db` (unsupported, never opened), symlinks (a linked file,
//! or a linked directory anywhere between a source root and a file: one rule
//! for every source, reported once at the link) and oversized or non-UTF-8
//! files. Nothing is copied around the writers; `preferences.md`
//! and `projects.md` are never written.
//!
//! A foreign import adds at most [`MAX_IMPORTED_LESSONS`] lessons in all
//! (counted through the ledger, so a second apply cannot add 50 more). The
//! provenance ledger (`import_provenance` in `memory.db`, keyed by source,
//! path and item hash) records every item a writer decided, so re-applying
//! the same source changes nothing; an item refused for the store's cap is
//! not recorded and is tried again next time.

mod parse;
mod read;
mod sources;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use self::sources::Collector;
use crate::constants::{FOREIGN_FACT_CONFIDENCE, MAX_IMPORTED_LESSONS};
use crate::error::{MemoryError, Rejected, Result};
use crate::ledger::LedgerRow;
use crate::{EpisodicOutcome, LessonCategory, MemoryDb, NewEpisode, SkipReason, Source, WriteOutcome};

/// Characters of an entry's (redacted) text shown in a report.
const PREVIEW_CHARS: usize = 160;
/// Ledger rows recorded per transaction during an apply.
const LEDGER_BATCH: usize = 128;

/// An agent whose files can be imported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ForeignSource {
    /// Claude Code: instruction files and auto memory.
    ClaudeCode,
    /// Hermes (Nous Research's hermes-agent): `memories/MEMORY.md`, `USER.md`.
    Hermes,
    /// OpenClaw: a workspace's memory files.
    Openclaw,
}

impl ForeignSource {
    /// Every source, in scan order.
    pub const ALL: [ForeignSource; 3] = [ForeignSource::ClaudeCode, ForeignSource::Hermes, ForeignSource::Openclaw];

    /// `claude-code`, `hermes`, `openclaw`.
    pub fn as_str(self) -> &'static str {
        match self {
            ForeignSource::ClaudeCode => "claude-code",
            ForeignSource::Hermes => "hermes",
            ForeignSource::Openclaw => "openclaw",
        }
    }
}

impl FromStr for ForeignSource {
    type Err = MemoryError;

    fn from_str(name: &str) -> Result<Self> {
        match name {
            "claude-code" => Ok(ForeignSource::ClaudeCode),
            "hermes" => Ok(ForeignSource::Hermes),
            "openclaw" => Ok(ForeignSource::Openclaw),
            other => Err(MemoryError::InvalidImport(format!(
                "unknown source {other:?} (expected claude-code, hermes or openclaw)"
            ))),
        }
    }
}

/// Where each source's files are. A `None` root is not scanned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ForeignRoots {
    /// Claude Code's user directory (`~/.claude`).
    pub claude_home: Option<PathBuf>,
    /// Project directories whose Claude Code instruction files are read.
    pub projects: Vec<PathBuf>,
    /// Hermes's home (`~/.hermes`).
    pub hermes_home: Option<PathBuf>,
    /// An OpenClaw workspace (`~/.openclaw/workspace`).
    pub openclaw_workspace: Option<PathBuf>,
}

impl ForeignRoots {
    /// The documented default locations under a user's home directory
    /// (`~/.claude`, `~/.hermes`, `~/.openclaw/workspace`), no project.
    pub fn under_user_home(home: &Path) -> Self {
        sources::default_roots(home)
    }
}

/// Where an entry lands.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Landing {
    Lesson { rule: String },
    Fact { key: String, value: String },
    Episode { text: String, created_at: Option<i64> },
    Skill { name: String, text: String },
    None,
}

impl Landing {
    fn kind(&self) -> &'static str {
        match self {
            Landing::Lesson { .. } => "lesson",
            Landing::Fact { .. } => "semantic",
            Landing::Episode { .. } => "episodic",
            Landing::Skill { .. } => "skill",
            Landing::None => "none",
        }
    }

    fn text(&self) -> &str {
        match self {
            Landing::Lesson { rule } => rule,
            Landing::Fact { value, .. } => value,
            Landing::Episode { text, .. } => text,
            Landing::Skill { text, .. } => text,
            Landing::None => "",
        }
    }

    fn category(&self) -> Option<ForeignCategory> {
        match self {
            Landing::Lesson { .. } => Some(ForeignCategory::Lessons),
            Landing::Fact { .. } => Some(ForeignCategory::Facts),
            Landing::Episode { .. } => Some(ForeignCategory::Episodic),
            Landing::Skill { .. } => Some(ForeignCategory::Skills),
            Landing::None => None,
        }
    }
}

/// A kind of entry an import may be narrowed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ForeignCategory {
    /// Instruction documents and feedback: lessons.
    Lessons,
    /// `user.*` facts.
    Facts,
    /// Memory entries and daily logs: episodic rows.
    Episodic,
    /// Skill folders: skills under `imported/<source>/`.
    Skills,
}

impl FromStr for ForeignCategory {
    type Err = MemoryError;

    fn from_str(name: &str) -> Result<Self> {
        match name.trim() {
            "lessons" => Ok(ForeignCategory::Lessons),
            "facts" => Ok(ForeignCategory::Facts),
            "episodic" => Ok(ForeignCategory::Episodic),
            "skills" => Ok(ForeignCategory::Skills),
            other => Err(MemoryError::InvalidImport(format!(
                "unknown category {other:?} (expected lessons, facts, episodic or skills)"
            ))),
        }
    }
}

/// Which entries a scan lists and an apply takes. Empty sets mean "all".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ForeignSelection {
    /// Only entries of these categories (an unsupported entry belongs to none).
    pub categories: std::collections::BTreeSet<ForeignCategory>,
    /// Only the entries with these ids (as a scan lists them).
    pub items: std::collections::BTreeSet<String>,
}

impl ForeignSelection {
    fn takes(&self, raw: &RawItem, id: &str) -> bool {
        let category_ok = self.categories.is_empty()
            || raw.landing.category().is_some_and(|category| self.categories.contains(&category));
        category_ok && (self.items.is_empty() || self.items.contains(id))
    }
}

/// What the host's skill write path decided for an imported skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkillWriteOutcome {
    /// Written (or, for a check, would be) under this catalog name.
    Written(String),
    /// A skill of this name exists; it wins.
    Exists(String),
    /// The write path refused it: (code, message).
    Refused(String, String),
}

/// The host's skill write path, which memory-core does not own: the
/// binary implements it over its skill catalog (name rules, size cap,
/// credential refusal, atomic write).
pub trait ForeignSkillWriter {
    /// Whether `text` would be accepted as the skill `name` (nothing written).
    fn check(&self, name: &str, text: &str) -> SkillWriteOutcome;
    /// Writes `text` as the skill `name`.
    fn write(&self, name: &str, text: &str) -> SkillWriteOutcome;
}

/// The screen an imported skill passes before the write path sees it: no
/// `always` or `triggers` in its frontmatter (an untrusted skill may not
/// put itself into every context or onto chosen words) and nothing the
/// injection screen flags.
fn skill_refusal(text: &str) -> Option<(String, String)> {
    if let (Some(Ok(frontmatter)), _) = parse::split_frontmatter(text) {
        for key in ["always", "triggers"] {
            if frontmatter.get(key).is_some_and(|value| !value.is_null()) {
                return Some((
                    "skill_self_injecting".to_owned(),
                    format!("sets `{key}`; an imported skill is offered on request only"),
                ));
            }
        }
    }
    cairn_guard::screen(text).map(|finding| {
        (
            Rejected::Injection { rule: finding.rule }.code().to_owned(),
            format!("trips the injection screen ({})", finding.rule),
        )
    })
}

/// One entry found in a foreign file, before any store decision.
#[derive(Debug, Clone)]
pub(crate) struct RawItem {
    pub(crate) source: ForeignSource,
    pub(crate) path: String,
    pub(crate) locator: String,
    pub(crate) landing: Landing,
    /// Set when the entry is never offered to a writer: (code, message).
    pub(crate) unsupported: Option<(String, String)>,
}

/// What happened (or, in a dry run, would happen) to one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ItemOutcome {
    /// Dry run: the rules accept it; the writer decides dedup and caps on apply.
    Offered,
    /// Written by the writer.
    Written,
    /// Existing memory already holds it or wins the conflict; nothing changed.
    Exists,
    /// The ledger shows it was decided by an earlier import.
    AlreadyImported,
    /// A writer rule refuses it (injection, length, key rules, ...).
    Refused,
    /// Never offered to a writer (credential, persona, include, ...).
    Unsupported,
    /// Over the lessons an import may add.
    LessonCap,
    /// The episodic store is at its cap; preservation mode evicts nothing.
    StoreFull,
}

/// One entry of a report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ForeignItem {
    /// A short stable id (`--item`), the same while the entry's source,
    /// file, place and text are.
    pub id: String,
    /// Which agent.
    pub source: ForeignSource,
    /// The file it came from.
    pub path: String,
    /// Which entry of the file (`entry 3`, `block 2`, `feedback`).
    pub locator: String,
    /// `lesson`, `semantic`, `episodic`, `skill`, or `none` for an unsupported entry.
    pub lands_as: &'static str,
    /// The skill name (`imported/<source>/<name>`), for a skill.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skill: Option<String>,
    /// The semantic key, for a fact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The first characters of the text, after credential redaction.
    pub preview: String,
    /// The decision.
    pub outcome: ItemOutcome,
    /// Reason code for anything but `offered` and `written`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Human-readable reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// What was written or kept: a lesson or semantic key, `episodic:<id>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Creation time of an episodic row (Unix milliseconds), when the source dates it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_at: Option<i64>,
}

/// A file- or directory-level finding: a symlink refused, a file too
/// large, an unsupported store, transcripts not read, a profile limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImportDiagnostic {
    /// Which agent.
    pub source: ForeignSource,
    /// The file or directory.
    pub path: String,
    /// Stable code (`symlink`, `profiles/read_failed`, `profiles/profile_count_limit`, `unsupported_store`, ...).
    pub code: String,
    /// Human-readable detail.
    pub message: String,
}

/// Counts of a report, by outcome.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ForeignCounts {
    /// Lessons offered (dry run) or written.
    pub lessons: usize,
    /// `user.*` facts offered or written.
    pub semantic: usize,
    /// Episodic rows offered or written.
    pub episodic: usize,
    /// Skills offered or written.
    pub skills: usize,
    /// Entries left out by the selection (category or item).
    pub not_selected: usize,
    /// Entries existing memory already holds.
    pub exists: usize,
    /// Entries decided by an earlier import.
    pub already_imported: usize,
    /// Entries a writer rule refuses.
    pub refused: usize,
    /// Entries never offered to a writer.
    pub unsupported: usize,
    /// Lessons over the import cap.
    pub lesson_cap: usize,
    /// Episodic rows refused by the store's cap.
    pub store_full: usize,
}

/// What a scan found or an apply did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ForeignReport {
    /// True for [`scan_foreign`]: nothing was written.
    pub dry_run: bool,
    /// The sources scanned.
    pub sources: Vec<ForeignSource>,
    /// Files read.
    pub files_read: usize,
    /// Counts by outcome.
    pub counts: ForeignCounts,
    /// Every entry, in file order.
    pub items: Vec<ForeignItem>,
    /// File- and directory-level findings.
    pub diagnostics: Vec<ImportDiagnostic>,
}

impl ForeignReport {
    /// Episodic rows written without a vector (every written row: embedding is deferred).
    pub fn deferred_episodic(&self) -> usize {
        if self.dry_run { 0 } else { self.counts.episodic }
    }
}

fn item_hash(source: ForeignSource, landing: &Landing) -> String {
    let mut digest = Sha256::new();
    digest.update(source.as_str().as_bytes());
    digest.update([0]);
    digest.update(landing.kind().as_bytes());
    digest.update([0]);
    if let Landing::Fact { key, .. } = landing {
        digest.update(key.as_bytes());
        digest.update([0]);
    }
    digest.update(landing.text().trim().as_bytes());
    hex::encode(digest.finalize())
}

fn preview(text: &str) -> String {
    let redacted = cairn_guard::redact_all(text);
    let line = parse::one_line(&redacted);
    if line.chars().count() <= PREVIEW_CHARS {
        line
    } else {
        let mut cut: String = line.chars().take(PREVIEW_CHARS).collect();
        cut.push('…');
        cut
    }
}

/// The guard's verdict before any writer sees an entry: a credential or an
/// exfiltration URL makes it unsupported (nothing of it becomes memory).
fn guard_unsupported(landing: &Landing) -> Option<(String, String)> {
    if let Landing::Fact { key, .. } = landing
        && cairn_guard::is_secret_key(key)
    {
        return Some(("credential".to_owned(), format!("{key} names a secret; secrets are not imported")));
    }
    let text = landing.text();
    if !text.is_empty() && cairn_guard::redact_all(text) != text {
        return Some((
            "credential".to_owned(),
            "holds a credential or an exfiltration URL; nothing of this entry is imported".to_owned(),
        ));
    }
    None
}

fn collect(roots: &ForeignRoots, sources: &[ForeignSource]) -> Collector {
    let mut collector = Collector::default();
    for source in ForeignSource::ALL {
        if !sources.contains(&source) {
            continue;
        }
        match source {
            ForeignSource::ClaudeCode => sources::claude_code(&mut collector, roots),
            ForeignSource::Hermes => sources::hermes(&mut collector, roots),
            ForeignSource::Openclaw => sources::openclaw(&mut collector, roots),
        }
    }
    collector
}

fn item_id(raw: &RawItem, hash: &str) -> String {
    let mut digest = Sha256::new();
    for part in [raw.source.as_str(), &raw.path, &raw.locator, hash] {
        digest.update(part.as_bytes());
        digest.update([0]);
    }
    hex::encode(digest.finalize())[..12].to_owned()
}

fn new_item(raw: &RawItem, id: String, outcome: ItemOutcome) -> ForeignItem {
    let (key, created_at) = match &raw.landing {
        Landing::Fact { key, .. } => (Some(key.clone()), None),
        Landing::Episode { created_at, .. } => (None, *created_at),
        _ => (None, None),
    };
    let skill = match &raw.landing {
        Landing::Skill { name, .. } => Some(name.clone()),
        _ => None,
    };
    ForeignItem {
        id,
        skill,
        source: raw.source,
        path: raw.path.clone(),
        locator: raw.locator.clone(),
        lands_as: raw.landing.kind(),
        key,
        preview: preview(raw.landing.text()),
        outcome,
        code: None,
        message: None,
        target: None,
        created_at,
    }
}

fn with_reason(mut item: ForeignItem, code: &str, message: impl Into<String>) -> ForeignItem {
    item.code = Some(code.to_owned());
    item.message = Some(message.into());
    item
}

fn refused(item: ForeignItem, rejected: &Rejected) -> ForeignItem {
    let mut item = with_reason(item, rejected.code(), rejected.to_string());
    item.outcome = ItemOutcome::Refused;
    item
}

fn count(counts: &mut ForeignCounts, item: &ForeignItem) {
    match item.outcome {
        ItemOutcome::Offered | ItemOutcome::Written => match item.lands_as {
            "lesson" => counts.lessons += 1,
            "semantic" => counts.semantic += 1,
            "skill" => counts.skills += 1,
            _ => counts.episodic += 1,
        },
        ItemOutcome::Exists => counts.exists += 1,
        ItemOutcome::AlreadyImported => counts.already_imported += 1,
        ItemOutcome::Refused => counts.refused += 1,
        ItemOutcome::Unsupported => counts.unsupported += 1,
        ItemOutcome::LessonCap => counts.lesson_cap += 1,
        ItemOutcome::StoreFull => counts.store_full += 1,
    }
}

/// The dry run: what each source holds and what would land where, with
/// every entry screened and checked against the writers' rules and the
/// ledger. Writes nothing. Skills are reported unsupported (no skill
/// writer): see [`scan_foreign_with`].
pub fn scan_foreign(db: &MemoryDb, roots: &ForeignRoots, sources: &[ForeignSource]) -> Result<ForeignReport> {
    run(db, roots, sources, &ForeignSelection::default(), None, None)
}

/// [`scan_foreign`] narrowed by `selection`, with skills checked against
/// the host's skill write path.
pub fn scan_foreign_with(
    db: &MemoryDb,
    roots: &ForeignRoots,
    sources: &[ForeignSource],
    selection: &ForeignSelection,
    skills: Option<&dyn ForeignSkillWriter>,
) -> Result<ForeignReport> {
    run(db, roots, sources, selection, skills, None)
}

/// Imports every acceptable entry through Cairn's writers (see the module
/// docs). `progress` is called with (done, total) after each entry.
/// Episodic rows are written without vectors: run
/// [`MemoryDb::backfill_missing_embeddings`] afterwards, off any request.
pub fn apply_foreign(
    db: &MemoryDb,
    roots: &ForeignRoots,
    sources: &[ForeignSource],
    progress: Option<&dyn Fn(usize, usize)>,
) -> Result<ForeignReport> {
    run(db, roots, sources, &ForeignSelection::default(), None, Some(progress))
}

/// [`apply_foreign`] narrowed by `selection`, writing skills through the
/// host's skill write path.
pub fn apply_foreign_with(
    db: &MemoryDb,
    roots: &ForeignRoots,
    sources: &[ForeignSource],
    selection: &ForeignSelection,
    skills: Option<&dyn ForeignSkillWriter>,
    progress: Option<&dyn Fn(usize, usize)>,
) -> Result<ForeignReport> {
    run(db, roots, sources, selection, skills, Some(progress))
}

fn run(
    db: &MemoryDb,
    roots: &ForeignRoots,
    sources: &[ForeignSource],
    selection: &ForeignSelection,
    skills: Option<&dyn ForeignSkillWriter>,
    apply: Option<Option<&dyn Fn(usize, usize)>>,
) -> Result<ForeignReport> {
    let dry_run = apply.is_none();
    let _span = tracing::info_span!("foreign_import", dry_run).entered();
    let mut sources: Vec<ForeignSource> = sources.to_vec();
    sources.sort();
    sources.dedup();
    let collector = collect(roots, &sources);
    let names: Vec<&str> = sources.iter().map(|source| source.as_str()).collect();
    let ledger = db.import_ledger(&names)?;
    let mut lesson_budget = MAX_IMPORTED_LESSONS.saturating_sub(ledger.lessons_written);
    let mut report = ForeignReport {
        dry_run,
        sources: sources.clone(),
        files_read: collector.files_read,
        diagnostics: collector.diagnostics,
        ..ForeignReport::default()
    };
    let total = collector.items.len();
    let mut pending: Vec<LedgerRow> = Vec::new();
    for (index, raw) in collector.items.iter().enumerate() {
        let hash = item_hash(raw.source, &raw.landing);
        let id = item_id(raw, &hash);
        if !selection.takes(raw, &id) {
            report.counts.not_selected += 1;
            continue;
        }
        let base = new_item(raw, id, ItemOutcome::Offered);
        let unsupported =
            raw.unsupported.clone().or_else(|| guard_unsupported(&raw.landing)).or_else(|| match &raw.landing {
                Landing::Skill { .. } if skills.is_none() => {
                    Some(("no_skill_writer".to_owned(), "skills are imported through the cairn binary".to_owned()))
                }
                _ => None,
            });
        let item = if let Some((code, message)) = unsupported {
            let mut item = with_reason(base, &code, message);
            item.outcome = ItemOutcome::Unsupported;
            item
        } else if ledger.contains(raw.source.as_str(), &raw.path, &hash) {
            let mut item = with_reason(base, "already_imported", "an earlier import decided this entry");
            item.outcome = ItemOutcome::AlreadyImported;
            item
        } else if let (Landing::Skill { name, text }, Some(writer)) = (&raw.landing, skills) {
            let outcome = match skill_refusal(text) {
                Some((code, message)) => SkillWriteOutcome::Refused(code, message),
                None if dry_run => writer.check(name, text),
                None => writer.write(name, text),
            };
            let (item, recorded) = skill_item(base, outcome, dry_run);
            if let (Some(outcome), false) = (recorded, dry_run) {
                pending.push(ledger_row(raw, hash, outcome, &item));
            }
            item
        } else if dry_run {
            check(db, raw, base, &mut lesson_budget)?
        } else {
            let (item, recorded) = write(db, raw, base, &mut lesson_budget)?;
            if let Some(outcome) = recorded {
                pending.push(ledger_row(raw, hash, outcome, &item));
                if pending.len() >= LEDGER_BATCH {
                    db.record_import_provenance(&pending)?;
                    pending.clear();
                }
            }
            item
        };
        count(&mut report.counts, &item);
        report.items.push(item);
        if let Some(Some(progress)) = apply {
            progress(index + 1, total);
        }
    }
    db.record_import_provenance(&pending)?;
    tracing::info!(
        lessons = report.counts.lessons,
        semantic = report.counts.semantic,
        episodic = report.counts.episodic,
        exists = report.counts.exists,
        refused = report.counts.refused,
        unsupported = report.counts.unsupported,
        "foreign import"
    );
    Ok(report)
}

/// Dry-run decision of one entry.
fn check(db: &MemoryDb, raw: &RawItem, item: ForeignItem, lesson_budget: &mut usize) -> Result<ForeignItem> {
    let source = Source::Import;
    Ok(match &raw.landing {
        Landing::Lesson { rule } => {
            let key = crate::lesson_key(rule, None);
            let value = serde_json::Value::String(rule.clone());
            let checked = if rule.trim().is_empty() {
                Err(Rejected::EmptyLesson)
            } else {
                db.check_write(&key, &value, crate::lesson_confidence(&source), &source).map(|_| ())
            };
            match checked {
                Err(rejected) => refused(item, &rejected),
                Ok(()) if db.get_semantic(&key)?.is_some() => exists(item, "a stored lesson says the same", key),
                Ok(()) if *lesson_budget == 0 => lesson_cap(item),
                Ok(()) => {
                    *lesson_budget -= 1;
                    item
                }
            }
        }
        Landing::Fact { key, value } => {
            let value_json = serde_json::Value::String(value.clone());
            match db.check_write(key, &value_json, FOREIGN_FACT_CONFIDENCE, &source) {
                Err(rejected) => refused(item, &rejected),
                Ok(_) if db.get_semantic(key)?.is_some() => exists(item, "the stored value wins", key.clone()),
                Ok(_) => item,
            }
        }
        Landing::Episode { text, created_at } => match db.check_episode(&foreign_episode(raw, text, *created_at)) {
            Err(rejected) => refused(item, &rejected),
            Ok(()) => item,
        },
        Landing::None | Landing::Skill { .. } => item,
    })
}

/// The report entry (and ledger outcome) of a skill the write path decided.
fn skill_item(item: ForeignItem, outcome: SkillWriteOutcome, dry_run: bool) -> (ForeignItem, Option<&'static str>) {
    match outcome {
        SkillWriteOutcome::Written(name) => {
            let mut item = item;
            if !dry_run {
                item.outcome = ItemOutcome::Written;
            }
            item.target = Some(name);
            (item, Some("written"))
        }
        SkillWriteOutcome::Exists(name) => (exists(item, "a skill of this name exists and wins", name), Some("exists")),
        SkillWriteOutcome::Refused(code, message) => {
            let mut item = with_reason(item, &code, message);
            item.outcome = ItemOutcome::Refused;
            (item, Some("refused"))
        }
    }
}

fn exists(item: ForeignItem, message: &str, target: String) -> ForeignItem {
    let mut item = with_reason(item, "exists", message);
    item.outcome = ItemOutcome::Exists;
    item.target = Some(target);
    item
}

fn lesson_cap(item: ForeignItem) -> ForeignItem {
    let mut item =
        with_reason(item, "lesson_cap", format!("foreign imports add at most {MAX_IMPORTED_LESSONS} lessons"));
    item.outcome = ItemOutcome::LessonCap;
    item
}

/// Writes one entry through its writer. Returns the report entry and the
/// ledger outcome to record (`None`: not decided for good, e.g. a full store).
fn write(
    db: &MemoryDb,
    raw: &RawItem,
    item: ForeignItem,
    lesson_budget: &mut usize,
) -> Result<(ForeignItem, Option<&'static str>)> {
    let written = |mut item: ForeignItem, target: String| {
        item.outcome = ItemOutcome::Written;
        item.target = Some(target);
        (item, Some("written"))
    };
    let rule_refusal = |item: ForeignItem, error: MemoryError| -> Result<(ForeignItem, Option<&'static str>)> {
        match error.rejection() {
            Some(rejected) => Ok((refused(item, rejected), Some("refused"))),
            None => Err(error),
        }
    };
    match &raw.landing {
        Landing::Lesson { rule } => {
            let key = crate::lesson_key(rule, None);
            if db.get_semantic(&key)?.is_some() {
                return Ok((exists(item, "a stored lesson says the same", key), Some("exists")));
            }
            // Over the cap, only a lesson the rules refuse still meets its
            // writer (which records the refusal); the others wait.
            let passes_rules = !rule.trim().is_empty()
                && db
                    .check_write(
                        &key,
                        &serde_json::Value::String(rule.clone()),
                        crate::lesson_confidence(&Source::Import),
                        &Source::Import,
                    )
                    .is_ok();
            if *lesson_budget == 0 && passes_rules {
                return Ok((lesson_cap(item), None));
            }
            match db.write_lesson(rule, None, LessonCategory::Preference, Source::Import) {
                Ok(outcome) if outcome.outcome.is_change() => {
                    *lesson_budget = lesson_budget.saturating_sub(1);
                    Ok(written(item, outcome.outcome.key().to_owned()))
                }
                Ok(outcome) => {
                    let (message, target) = match &outcome.outcome {
                        WriteOutcome::Skipped {
                            reason:
                                SkipReason::ExistingWins { existing_key } | SkipReason::DuplicateLesson { existing_key },
                            ..
                        } => (format!("the stored lesson {existing_key} wins"), existing_key.clone()),
                        other => ("a stored lesson already says this".to_owned(), other.key().to_owned()),
                    };
                    Ok((exists(item, &message, target), Some("exists")))
                }
                Err(error) => rule_refusal(item, error),
            }
        }
        Landing::Fact { key, value } => {
            let value = serde_json::Value::String(value.clone());
            match db.write_semantic(key, &value, FOREIGN_FACT_CONFIDENCE, Source::Import) {
                Ok(outcome) if outcome.is_change() => Ok(written(item, key.clone())),
                Ok(_) => Ok((exists(item, "the stored value wins", key.clone()), Some("exists"))),
                Err(error) => rule_refusal(item, error),
            }
        }
        Landing::Episode { text, created_at } => match db.write_episodic(&foreign_episode(raw, text, *created_at)) {
            Ok(EpisodicOutcome::Inserted { id, .. }) => Ok(written(item, format!("episodic:{id}"))),
            Ok(EpisodicOutcome::Duplicate { of, .. }) => Ok((
                exists(item, &format!("active row {of} already says this"), format!("episodic:{of}")),
                Some("exists"),
            )),
            Ok(EpisodicOutcome::StoreFull { cap }) => {
                let mut item =
                    with_reason(item, "store_full", format!("the store holds its cap of {cap} rows; nothing evicted"));
                item.outcome = ItemOutcome::StoreFull;
                Ok((item, None))
            }
            Err(error) => rule_refusal(item, error),
        },
        Landing::None | Landing::Skill { .. } => Ok((item, None)),
    }
}

/// The ledger row of an entry the apply decided.
fn ledger_row(raw: &RawItem, item_hash: String, outcome: &'static str, item: &ForeignItem) -> LedgerRow {
    LedgerRow {
        source: raw.source.as_str(),
        path: raw.path.clone(),
        item_hash,
        landed_as: raw.landing.kind(),
        outcome,
        target: item.target.clone(),
    }
}

/// The episodic row an entry lands as: what the apply writes and the dry
/// run checks.
fn foreign_episode(raw: &RawItem, text: &str, created_at: Option<i64>) -> NewEpisode {
    let source_ref = format!("{}:{}#{}", raw.source.as_str(), file_name(&raw.path), raw.locator);
    let source_ref: String = source_ref.chars().take(crate::constants::EPISODIC_MAX_SOURCE_REF_CHARS).collect();
    let mut episode = NewEpisode::new(text.to_owned())
        .tags(["imported", raw.source.as_str()])
        .source_ref(source_ref)
        .preserve(true)
        .defer_embedding(true)
        .source(Source::Import);
    if let Some(created_at) = created_at {
        episode = episode.created_at(created_at);
    }
    episode
}

fn file_name(path: &str) -> &str {
    Path::new(path).file_name().and_then(|name| name.to_str()).unwrap_or(path)
}
