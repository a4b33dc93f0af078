//! `memory`: consolidation timing, the episodic cap, key prefixes,
//! projects, recording and review of writes.

use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use super::reader::{Resolver, Section, invalid};
use super::{ConfigError, DEFAULT_HISTORY_IDLE_HOURS, DEFAULT_HISTORY_MAX_DAYS, MAX_EPISODIC_CAP};

/// `memory`: the settings `PUT /api/memory/settings` edits live.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct MemorySettings {
    /// Hours of idleness before a session's history is consolidated.
    pub(crate) history_idle_hours: f64,
    /// Daily history files older than this many days are pruned.
    pub(crate) history_max_days: u64,
}

impl Default for MemorySettings {
    fn default() -> Self {
        Self { history_idle_hours: DEFAULT_HISTORY_IDLE_HOURS, history_max_days: DEFAULT_HISTORY_MAX_DAYS }
    }
}

impl MemorySettings {
    /// Applies a partial update (`{"history_idle_hours": 1.5}`), validating
    /// every key; on error nothing is changed.
    pub(crate) fn apply_update(&self, path: &Path, update: &Value) -> Result<Self, ConfigError> {
        let Some(map) = update.as_object() else {
            return Err(invalid(path, "memory", "must be a JSON object"));
        };
        let mut section = Section::new(path, "memory", map);
        let mut next = self.clone();
        if let Some(hours) = section.f64("history_idle_hours", 0.01, 24.0 * 365.0)? {
            next.history_idle_hours = hours;
        }
        if let Some(days) = section.u64("history_max_days", 1, 100_000)? {
            next.history_max_days = days;
        }
        let unknown = section.unknown();
        if let Some(key) = unknown.first() {
            return Err(invalid(path, key, "is not a memory setting"));
        }
        Ok(next)
    }
}

/// Everything the `memory` section sets.
pub(super) struct Memory {
    pub(super) settings: MemorySettings,
    pub(super) extra_prefixes: Vec<String>,
    pub(super) episodic_cap: u64,
    pub(super) project_rule: cairn_memory_core::ProjectRule,
    pub(super) record_sessions: bool,
    pub(super) write_approval: bool,
    /// `memory.embed_model_path` and `memory.embed_model_url`: older names
    /// of the `embedding` keys, read there when those are unset.
    pub(super) legacy_model_path: Option<String>,
    pub(super) legacy_model_url: Option<String>,
}

pub(super) fn resolve(r: &mut Resolver<'_>) -> Result<Memory, ConfigError> {
    let mut section = r.section("memory")?;
    let defaults = MemorySettings::default();
    let memory = MemorySettings {
        history_idle_hours: r.recorder.pick(
            "memory.history_idle_hours",
            None,
            None,
            section.f64("history_idle_hours", 0.01, 24.0 * 365.0)?,
            defaults.history_idle_hours,
        ),
        history_max_days: r.recorder.pick(
            "memory.history_max_days",
            None,
            None,
            section.u64("history_max_days", 1, 100_000)?,
            defaults.history_max_days,
        ),
    };
    let extra_prefixes = section.strings("extra_prefixes")?;
    for prefix in extra_prefixes.iter().flatten() {
        if !valid_prefix(prefix) {
            return Err(invalid(
                r.path,
                "memory.extra_prefixes",
                format!("entries must be lower-case words ending with a dot, such as \"team.\" (got {prefix:?})"),
            ));
        }
    }
    let extra_prefixes = r.recorder.pick("memory.extra_prefixes", None, None, extra_prefixes, Vec::new());
    let episodic_cap = r.recorder.pick(
        "memory.episodic_cap",
        None,
        None,
        section.u64("episodic_cap", 1, MAX_EPISODIC_CAP)?,
        cairn_memory_core::constants::EPISODIC_DEFAULT_CAP as u64,
    );
    let separate_worktrees =
        r.recorder.pick("memory.separate_worktrees", None, None, section.bool("separate_worktrees")?, false);
    let project_rule = if separate_worktrees {
        cairn_memory_core::ProjectRule::Worktree
    } else {
        cairn_memory_core::ProjectRule::Repository
    };
    let record_sessions_file = section.bool("record_sessions")?;
    let (private_session, private_warning) = r.environment.private_session();
    r.warnings.extend(private_warning);
    // The environment can only turn recording off for its session.
    let record_sessions =
        r.recorder.pick("memory.record_sessions", None, private_session.then_some(false), record_sessions_file, true);
    let write_approval = r.recorder.pick("memory.write_approval", None, None, section.bool("write_approval")?, false);
    let legacy_model_path = section.string("embed_model_path")?;
    let legacy_model_url = section.string("embed_model_url")?;
    if section.get("migrated").is_some() {
        r.warnings.push(format!(
            "{}: `memory.migrated` is ignored: the migration state lives in the home's state file",
            r.path.display()
        ));
    }
    r.finish(&section);
    Ok(Memory {
        settings: memory,
        extra_prefixes,
        episodic_cap,
        project_rule,
        record_sessions,
        write_approval,
        legacy_model_path,
        legacy_model_url,
    })
}

fn valid_prefix(prefix: &str) -> bool {
    prefix.len() >= 2
        && prefix.len() <= 50
        && prefix.ends_with('.')
        && prefix.starts_with(|first: char| first.is_ascii_lowercase())
        && prefix[..prefix.len() - 1]
            .chars()
            .all(|character| character.is_ascii_lowercase() || character.is_ascii_digit() || "_.".contains(character))
}
