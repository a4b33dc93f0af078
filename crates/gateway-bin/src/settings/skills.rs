//! `skills`: the catalog and the auto-skill pipeline.

use std::path::PathBuf;

use serde::Serialize;

use super::ConfigError;
use super::reader::{Recorder, Resolver, Section, invalid};

/// `skills` keys this build accepts and does not use.
const UNSUPPORTED_SKILL_KEYS: &[(&str, &str)] =
    &[("judge_model", "near-duplicate auto skills are found by description-word overlap, with no model call")];

/// `skills`: the catalog settings.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct SkillsSection {
    pub(crate) max_triggered: usize,
    pub(crate) lazy_load: bool,
    pub(crate) extra_paths: Vec<PathBuf>,
    /// The auto-skill pipeline's settings.
    pub(crate) auto: AutoSkillSettings,
}

/// `skills.auto_*` and the other keys of the auto-skill pipeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct AutoSkillSettings {
    /// `skills.auto_create_from_sessions`: idle consolidation proposes skills.
    pub(crate) create_from_sessions: bool,
    /// `skills.approval_required`: candidates wait for review.
    pub(crate) approval_required: bool,
    /// `skills.auto_refine_on_deviation`: consolidation may refine a generated skill.
    pub(crate) refine_on_deviation: bool,
    /// `skills.auto_min_tool_calls`: messages with tool calls a session needs.
    pub(crate) min_tool_calls: usize,
    /// `skills.auto_similarity_threshold`: duplicate description overlap.
    pub(crate) similarity_threshold: f64,
    /// `skills.max_auto_skills`.
    pub(crate) max_auto_skills: usize,
    /// `skills.stale_after_days`.
    pub(crate) stale_after_days: u64,
    /// `skills.archive_after_days`.
    pub(crate) archive_after_days: u64,
    /// `skills.pending_ttl_days`: also how long a pending consolidation
    /// changeset waits for review.
    pub(crate) pending_ttl_days: u64,
    /// `skills.generate_scripts`: a candidate may carry a Python helper.
    pub(crate) generate_scripts: bool,
}

impl AutoSkillSettings {
    /// How long a pending review waits before it expires, in milliseconds:
    /// the pending-skill rule (`skills.pending_ttl_days`), which pending
    /// consolidation changesets follow too.
    pub(crate) fn pending_ttl_ms(&self) -> i64 {
        let days = i64::try_from(self.pending_ttl_days).unwrap_or(i64::MAX);
        days.saturating_mul(24 * 60 * 60 * 1_000)
    }

    /// The skills crate's configuration of the pipeline.
    pub(crate) fn pipeline(&self) -> cairn_skills::auto::AutoSkillsConfig {
        cairn_skills::auto::AutoSkillsConfig {
            approval_required: self.approval_required,
            similarity_threshold: self.similarity_threshold,
            max_auto_skills: self.max_auto_skills,
            stale_after_days: self.stale_after_days,
            archive_after_days: self.archive_after_days,
            pending_ttl_days: self.pending_ttl_days,
            generate_scripts: self.generate_scripts,
            ..cairn_skills::auto::AutoSkillsConfig::default()
        }
    }
}

pub(super) fn resolve(r: &mut Resolver<'_>) -> Result<SkillsSection, ConfigError> {
    let mut section = r.section("skills")?;
    let skills = SkillsSection {
        max_triggered: r.recorder.pick(
            "skills.max_triggered",
            None,
            None,
            section.u64("max_triggered", 0, 100)?.map(|value| value as usize),
            cairn_skills::constants::MAX_TRIGGERED,
        ),
        lazy_load: r.recorder.pick("skills.lazy_load", None, None, section.bool("lazy_load")?, false),
        extra_paths: r.recorder.pick(
            "skills.extra_paths",
            None,
            None,
            section.strings("extra_paths")?.map(|paths| paths.into_iter().map(PathBuf::from).collect()),
            Vec::new(),
        ),
        auto: auto_skill_settings(&mut section, &mut r.recorder)?,
    };
    for (key, why) in UNSUPPORTED_SKILL_KEYS {
        if section.get(key).is_some() {
            r.warnings.push(format!("{}: `skills.{key}` is not used: {why} (ignored)", r.path.display()));
        }
    }
    r.finish(&section);
    Ok(skills)
}

/// The auto-skill keys of the `skills` section, each type- and range-checked.
fn auto_skill_settings(section: &mut Section<'_>, recorder: &mut Recorder) -> Result<AutoSkillSettings, ConfigError> {
    use cairn_skills::constants as skill;
    let flag = |recorder: &mut Recorder, section: &mut Section<'_>, key: &'static str, default: bool| {
        section.bool(key).map(|value| recorder.pick(&format!("skills.{key}"), None, None, value, default))
    };
    let create_from_sessions = flag(recorder, section, "auto_create_from_sessions", false)?;
    let approval_required = flag(recorder, section, "approval_required", true)?;
    let refine_on_deviation = flag(recorder, section, "auto_refine_on_deviation", false)?;
    let generate_scripts = flag(recorder, section, "generate_scripts", true)?;
    let mut number = |recorder: &mut Recorder, key: &'static str, min: u64, max: u64, default: u64| {
        section.u64(key, min, max).map(|value| recorder.pick(&format!("skills.{key}"), None, None, value, default))
    };
    let min_tool_calls = number(recorder, "auto_min_tool_calls", 1, 1_000, 5)? as usize;
    let max_auto_skills = number(recorder, "max_auto_skills", 1, 10_000, skill::MAX_AUTO_SKILLS as u64)? as usize;
    let stale_after_days = number(recorder, "stale_after_days", 1, 3_650, skill::AUTO_STALE_AFTER_DAYS)?;
    let archive_after_days = number(recorder, "archive_after_days", 1, 3_650, skill::AUTO_ARCHIVE_AFTER_DAYS)?;
    let pending_ttl_days = number(recorder, "pending_ttl_days", 1, 3_650, skill::AUTO_PENDING_TTL_DAYS)?;
    let similarity_threshold = section.f64("auto_similarity_threshold", 0.05, 1.0)?;
    let similarity_threshold = recorder.pick(
        "skills.auto_similarity_threshold",
        None,
        None,
        similarity_threshold,
        skill::AUTO_SIMILARITY_THRESHOLD,
    );
    if archive_after_days <= stale_after_days {
        return Err(invalid(
            section.path,
            "skills.archive_after_days",
            format!(
                "must be greater than skills.stale_after_days ({stale_after_days}): a skill is stale before it is archived (got {archive_after_days})"
            ),
        ));
    }
    Ok(AutoSkillSettings {
        create_from_sessions,
        approval_required,
        refine_on_deviation,
        min_tool_calls,
        similarity_threshold,
        max_auto_skills,
        stale_after_days,
        archive_after_days,
        pending_ttl_days,
        generate_scripts,
    })
}
