//! Migration of Markdown memory and `lessons.jsonl` into `memory.db`.
//!
//! - `preferences.md` bullets `key: value` become semantic entries
//!   (confidence 0.85, source `migration`). A key without an allowed prefix
//!   is placed under `pref.`; a key that *is* a bare prefix (`pref`,
//!   `project`, `user`) gets `.default`.
//! - `projects.md`: each `#`/`##` heading or top-level `- name: details`
//!   bullet becomes `project.<name>` (its first line of detail, or the
//!   name), and the details become an episodic row.
//! - `history/*.md`: each entry becomes an episodic row (importance 0.4)
//!   dated by its day file and `#### HH:MM` header.
//! - `lessons.jsonl`: each lesson becomes `lesson.*` (confidence 0.9,
//!   source `migration`); the conflict ladder keeps user-explicit lessons.
//!
//! Every item goes through the normal writers, so re-running changes
//! nothing (the conflict ladder answers `unchanged`, episodic dedup answers
//! `duplicate`). A successful run records one `migration` audit event with
//! the counts and sets the persisted `migrated` flag; a run that fails
//! leaves the flag false so the next attempt retries.

use std::path::{Path, PathBuf};

use jiff::tz::TimeZone;
use serde::Serialize;
use serde_json::{Value, json};

use crate::audit::insert_event;
use crate::consolidate::state::StateFile;
use crate::constants::{
    BUILTIN_PREFIXES, LESSONS_JSONL_FILE_NAME, MIGRATION_EPISODIC_IMPORTANCE, MIGRATION_SEMANTIC_CONFIDENCE,
};
use crate::error::{MemoryError, Result};
use crate::files::{HISTORY_DIR, MEMORY_DIR, PREFERENCES_FILE, PROJECTS_FILE};
use crate::report::{LayerCounts, RefusedItem};
use crate::store::EventRecord;
use crate::{EpisodicOutcome, JsonlLessonStore, MemoryAuditAction, MemoryDb, NewEpisode, Source, WriteOutcome};

/// Where legacy memory lives: a Cairn home, or a `~/.kiro/crew` tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationSource {
    /// The directory holding `preferences.md`, `projects.md`, `history/`.
    pub memory_dir: PathBuf,
    /// `lessons.jsonl`, when there is one.
    pub lessons_jsonl: Option<PathBuf>,
}

impl MigrationSource {
    /// Finds the memory directory under `root`: `root/memory`, then
    /// `root/workspace/memory` (the `~/.kiro/crew` layout), then `root`
    /// itself; and `root/lessons.jsonl`.
    pub fn discover(root: &Path) -> Self {
        let memory_dir = [root.join(MEMORY_DIR), root.join("workspace").join(MEMORY_DIR)]
            .into_iter()
            .find(|dir| dir.is_dir())
            .unwrap_or_else(|| root.to_owned());
        let lessons = root.join(LESSONS_JSONL_FILE_NAME);
        MigrationSource { memory_dir, lessons_jsonl: lessons.is_file().then_some(lessons) }
    }
}

/// What a migration did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MigrationReport {
    /// True when the store was already migrated and nothing ran.
    pub already_migrated: bool,
    /// What the migration wrote and kept, per layer (serialized flat):
    /// semantic entries from preferences and projects, episodic rows from
    /// history entries and project details, lessons.
    #[serde(flatten)]
    pub counts: LayerCounts,
    /// Items a writer refused, with the reason.
    pub refused: Vec<RefusedItem>,
}

impl MigrationReport {
    /// The counts the audit event records: per layer, and how many were refused.
    fn counts(&self) -> Value {
        let mut counts = json!(self.counts);
        counts["refused"] = json!(self.refused.len());
        counts
    }

    /// Counts a write's `result` (`changed` tells a write from a kept row),
    /// or records the item a writer rule refused; any other error ends the
    /// migration.
    fn count<T>(
        &mut self,
        kind: &'static str,
        result: Result<T>,
        changed: impl FnOnce(&T) -> bool,
        count: fn(&mut LayerCounts, bool),
    ) -> Result<()> {
        match result {
            Ok(outcome) => count(&mut self.counts, changed(&outcome)),
            Err(error) if error.rejection().is_some() => self.refused.push(RefusedItem::refused(kind, &error)),
            Err(error) => return Err(error),
        }
        Ok(())
    }

    fn semantic(&mut self, result: Result<WriteOutcome>) -> Result<()> {
        self.count("semantic", result, WriteOutcome::is_change, LayerCounts::semantic)
    }

    fn episodic(&mut self, result: Result<EpisodicOutcome>) -> Result<()> {
        self.count(
            "episodic",
            result,
            |outcome| matches!(outcome, EpisodicOutcome::Inserted { .. }),
            LayerCounts::episodic,
        )
    }
}

/// True when the persisted `migrated` flag of `home` is set.
pub fn is_migrated(home: &Path) -> Result<bool> {
    Ok(StateFile::in_home(home).load()?.migrated)
}

/// Migrates `source` into `db` (whose home is `home`). Does nothing when
/// the home is already migrated, unless `force`. Runs in the time zone `tz`
/// for history timestamps (the local zone of whoever wrote them).
pub fn migrate_from_markdown(
    db: &MemoryDb,
    home: &Path,
    source: &MigrationSource,
    force: bool,
    tz: &TimeZone,
) -> Result<MigrationReport> {
    migrate_recorded_as(db, home, source, force, tz, Source::Migration.as_str())
}

/// The migration a gateway runs once at start: migrates the home's own
/// legacy Markdown memory when it is not migrated yet (a fresh home has
/// nothing to carry and is only marked), recording the `migration` audit
/// event with source `auto`. On error the flag stays unset, so the next
/// start retries.
pub fn migrate_at_start(db: &MemoryDb, home: &Path, tz: &TimeZone) -> Result<MigrationReport> {
    migrate_recorded_as(db, home, &MigrationSource::discover(home), false, tz, "auto")
}

fn migrate_recorded_as(
    db: &MemoryDb,
    home: &Path,
    source: &MigrationSource,
    force: bool,
    tz: &TimeZone,
    event_source: &str,
) -> Result<MigrationReport> {
    let _span = tracing::info_span!("migrate_from_markdown", from = %source.memory_dir.display()).entered();
    let state = StateFile::in_home(home);
    if state.load()?.migrated && !force {
        return Ok(MigrationReport { already_migrated: true, ..MigrationReport::default() });
    }
    let mut report = MigrationReport::default();
    let read = |name: &str| -> Result<String> {
        let path = source.memory_dir.join(name);
        match std::fs::read(&path) {
            Ok(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
            Err(error) => Err(MemoryError::Io { operation: "reading", path, source: error }),
        }
    };

    for (key, value) in parse_preferences(&read(PREFERENCES_FILE)?, db.prefixes()) {
        let outcome = db.write_semantic(&key, &Value::String(value), MIGRATION_SEMANTIC_CONFIDENCE, Source::Migration);
        report.semantic(outcome)?;
    }

    for project in parse_projects(&read(PROJECTS_FILE)?) {
        let key = format!("project.{}", project.slug);
        let summary = project.details.lines().next().map(str::trim).filter(|line| !line.is_empty());
        let value = Value::String(summary.unwrap_or(&project.name).to_owned());
        report.semantic(db.write_semantic(&key, &value, MIGRATION_SEMANTIC_CONFIDENCE, Source::Migration))?;
        if !project.details.trim().is_empty() {
            let episode = NewEpisode::new(format!("Project {}: {}", project.name, project.details.trim()))
                .importance(MIGRATION_EPISODIC_IMPORTANCE)
                .tags(["project".to_owned(), project.slug.clone()])
                .source_ref(format!("{PROJECTS_FILE}:{}", project.line))
                .source(Source::Migration);
            report.episodic(db.write_episodic(&episode))?;
        }
    }

    migrate_history(db, source, tz, &mut report)?;

    if let Some(path) = &source.lessons_jsonl {
        let mut lessons = JsonlLessonStore::new(path).lessons()?;
        lessons.reverse(); // oldest first, as they were taught
        for lesson in lessons {
            let written = db.write_lesson(&lesson.rule, lesson.not.as_deref(), lesson.category, Source::Migration);
            report.count("lesson", written, |written| written.outcome.is_change(), LayerCounts::lesson)?;
        }
    }

    let counts = report.counts().to_string();
    let from = source.memory_dir.display().to_string();
    db.rows().write("recording the migration", |tx| {
        insert_event(
            tx,
            &EventRecord {
                memory_type: "migration",
                action: MemoryAuditAction::Migration,
                key: None,
                old_value: None,
                new_value: Some(&counts),
                source: Some(event_source),
                confidence: None,
                detail: Some(&from),
            },
        )
    })?;
    state.update(|state| state.migrated = true)?;
    tracing::info!(counts = %counts, "memory migrated from Markdown");
    Ok(report)
}

/// Every entry of the history day files, oldest day first, as an episode
/// dated by its day and its entry header's time (midnight without one) in `tz`.
fn migrate_history(db: &MemoryDb, source: &MigrationSource, tz: &TimeZone, report: &mut MigrationReport) -> Result<()> {
    let history_dir = source.memory_dir.join(HISTORY_DIR);
    let mut days: Vec<(jiff::civil::Date, PathBuf)> = match std::fs::read_dir(&history_dir) {
        Ok(entries) => entries
            .flatten()
            .filter_map(|entry| {
                let date = entry.file_name().to_str().and_then(crate::files::parse_day_file_name)?;
                Some((date, entry.path()))
            })
            .collect(),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(error) => return Err(MemoryError::Io { operation: "listing", path: history_dir, source: error }),
    };
    days.sort();
    for (date, path) in days {
        let content = std::fs::read(&path)
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .map_err(|error| MemoryError::Io { operation: "reading", path: path.clone(), source: error })?;
        for entry in crate::files::split_chunks(&content) {
            // Text above the first header is not an entry; its lines other
            // than headings (a `# 2026-11-17` title) are still hand-written memory.
            let (time, body) = match entry.time() {
                Some(time) => (Some(time), entry.text.split_once('\n').map(|(_, body)| body).unwrap_or("").to_owned()),
                None => (None, crate::files::preamble_notes(entry.text)),
            };
            let body = body.trim();
            if body.is_empty() {
                continue;
            }
            let (hour, minute) = time
                .and_then(|time| time.split_once(':'))
                .and_then(|(hour, minute)| Some((hour.parse::<i8>().ok()?, minute.parse::<i8>().ok()?)))
                .unwrap_or((0, 0));
            let created_at = date
                .at(hour.clamp(0, 23), minute.clamp(0, 59), 0, 0)
                .to_zoned_datetime(tz.clone())
                .map(|zoned| zoned.timestamp().as_millisecond())
                .map_err(|error| MemoryError::Date { operation: "dating a history entry", source: error })?;
            let episode = NewEpisode::new(body)
                .importance(MIGRATION_EPISODIC_IMPORTANCE)
                .tags(["history".to_owned()])
                .created_at(created_at)
                .source_ref(format!("{HISTORY_DIR}/{date}.md:{}", entry.line))
                .source(Source::Migration);
            report.episodic(db.write_episodic(&episode))?;
        }
    }
    Ok(())
}

/// `key: value` bullets of `preferences.md`, keys normalised and prefixed.
pub(crate) fn parse_preferences(text: &str, prefixes: &[String]) -> Vec<(String, String)> {
    let mut entries = Vec::new();
    for line in text.lines() {
        let Some(item) = line.trim_start().strip_prefix("- ").or_else(|| line.trim_start().strip_prefix("* ")) else {
            continue;
        };
        let Some((raw_key, value)) = item.split_once(':') else { continue };
        let value = value.trim();
        let Some(key) = normalise_key(raw_key) else { continue };
        if value.is_empty() {
            continue;
        }
        let bare_prefixes = BUILTIN_PREFIXES.iter().map(|prefix| prefix.trim_end_matches('.'));
        let key = if bare_prefixes.clone().any(|bare| bare == key) {
            format!("{key}.default")
        } else if prefixes.iter().any(|prefix| key.starts_with(prefix.as_str())) {
            key
        } else {
            format!("pref.{key}")
        };
        entries.push((key, value.to_owned()));
    }
    entries
}

/// Lower case, spaces and dashes to `_`, only `[a-z0-9_.]`, trimmed of `_` and `.`.
fn normalise_key(raw: &str) -> Option<String> {
    let raw = raw.trim().trim_matches('*').trim_matches('`').trim();
    let mut key = String::with_capacity(raw.len());
    for c in raw.chars().flat_map(char::to_lowercase) {
        match c {
            'a'..='z' | '0'..='9' | '.' | '_' => key.push(c),
            ' ' | '-' | '/' => key.push('_'),
            _ => {}
        }
    }
    let key = key.trim_matches(|c| c == '_' || c == '.').to_owned();
    let starts_with_letter = key.chars().next().is_some_and(|c| c.is_ascii_lowercase());
    (starts_with_letter && key.len() >= 2).then_some(key)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Project {
    pub(crate) name: String,
    pub(crate) slug: String,
    pub(crate) details: String,
    pub(crate) line: usize,
}

/// Projects of `projects.md`: headings with the text under them, and
/// top-level `- name: details` bullets outside any heading.
pub(crate) fn parse_projects(text: &str) -> Vec<Project> {
    let mut projects: Vec<Project> = Vec::new();
    let mut current: Option<usize> = None;
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if let Some(heading) = trimmed.strip_prefix('#') {
            let name = heading.trim_start_matches('#').trim();
            current = None;
            if let Some(slug) = normalise_key(name).map(|key| key.replace('.', "_")) {
                projects.push(Project { name: name.to_owned(), slug, details: String::new(), line: index + 1 });
                current = Some(projects.len() - 1);
            }
            continue;
        }
        match current {
            Some(position) => {
                let details = &mut projects[position].details;
                if !(details.is_empty() && trimmed.is_empty()) {
                    details.push_str(trimmed);
                    details.push('\n');
                }
            }
            None => {
                let Some(item) = line.strip_prefix("- ").or_else(|| line.strip_prefix("* ")) else { continue };
                let (name, details) = item.split_once(':').unwrap_or((item, ""));
                let name = name.trim().trim_matches('*').trim();
                if let Some(slug) = normalise_key(name).map(|key| key.replace('.', "_")) {
                    projects.push(Project {
                        name: name.to_owned(),
                        slug,
                        details: details.trim().to_owned(),
                        line: index + 1,
                    });
                }
            }
        }
    }
    for project in &mut projects {
        project.details = project.details.trim().to_owned();
    }
    // A file whose only heading is a title ("# Projects") holds no project by that name.
    projects.retain(|project| !(project.slug == "projects" && project.details.is_empty()));
    projects
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefixes() -> Vec<String> {
        BUILTIN_PREFIXES.iter().map(|prefix| (*prefix).to_owned()).collect()
    }

    #[test]
    fn preference_bullets_become_prefixed_keys() {
        let text = "# Preferences\n- editor: helix\n* Preferred Shell: fish\n- pref.theme: dark\n- pref: terse answers\n- user.name: Ada\n- no colon here\n- : empty key\n- blank:\n";
        assert_eq!(
            parse_preferences(text, &prefixes()),
            vec![
                ("pref.editor".to_owned(), "helix".to_owned()),
                ("pref.preferred_shell".to_owned(), "fish".to_owned()),
                ("pref.theme".to_owned(), "dark".to_owned()),
                ("pref.default".to_owned(), "terse answers".to_owned()),
                ("user.name".to_owned(), "Ada".to_owned()),
            ]
        );
    }

    #[test]
    fn projects_come_from_headings_and_bullets() {
        let text = "# Projects\n\n## Cairn\nRust memory for agents.\nUses SQLite.\n\n## Old Site\n\n- side-quest: a game jam entry\n";
        let projects = parse_projects(text);
        let names: Vec<(&str, &str, usize)> =
            projects.iter().map(|p| (p.slug.as_str(), p.details.as_str(), p.line)).collect();
        assert_eq!(
            names,
            vec![
                ("cairn", "Rust memory for agents.\nUses SQLite.", 3),
                ("old_site", "- side-quest: a game jam entry", 7)
            ]
        );
        let bullets = parse_projects("- side-quest: a game jam entry\n- cairn\n");
        assert_eq!(bullets.len(), 2);
        assert_eq!((bullets[0].slug.as_str(), bullets[0].details.as_str()), ("side_quest", "a game jam entry"));
    }
}
