//! `cairn skills lint`: what would make a skill unreadable by other Agent
//! Skills hosts, next to what Cairn itself needs.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_norway::Value;
use unicode_normalization::UnicodeNormalization as _;

use crate::catalog::skill_file_in;
use crate::constants::{
    CAIRN_KEYS, SPEC_ALLOWED_KEYS, SPEC_COMPATIBILITY_MAX_CHARS, SPEC_DESCRIPTION_MAX_CHARS, SPEC_NAME_MAX_CHARS,
    SPEC_RECOMMENDED_MAX_LINES,
};
use crate::frontmatter::{FrontmatterError, SkillMeta, as_bool, parse_strict};

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LintSeverity {
    /// No host, Cairn included, can read the skill's metadata.
    Error,
    /// Cairn reads it, but the Agent Skills standard (and hosts that
    /// enforce it) reject it.
    Portability,
    /// Valid, but Cairn will not use it the way the author likely meant.
    Warning,
}

/// One problem.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LintFinding {
    /// How bad.
    pub severity: LintSeverity,
    /// Stable rule id (`name-lowercase`, `unexpected-fields`, ...).
    pub rule: &'static str,
    /// What is wrong and how to fix it.
    pub message: String,
}

/// The findings for one skill directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LintReport {
    /// The skill directory.
    pub dir: PathBuf,
    /// Its findings, worst first.
    pub findings: Vec<LintFinding>,
}

impl LintReport {
    /// True when no finding is an [`LintSeverity::Error`] or
    /// [`LintSeverity::Portability`] one: the skill passes the Agent Skills
    /// validator's rules.
    pub fn is_valid_agent_skill(&self) -> bool {
        !self.findings.iter().any(|finding| finding.severity <= LintSeverity::Portability)
    }

    /// True when some finding is an [`LintSeverity::Error`].
    pub fn has_errors(&self) -> bool {
        self.findings.iter().any(|finding| finding.severity == LintSeverity::Error)
    }
}

fn finding(severity: LintSeverity, rule: &'static str, message: impl Into<String>) -> LintFinding {
    LintFinding { severity, rule, message: message.into() }
}

/// A `SKILL.md` through the guarded read, capped at the largest skill Cairn
/// accepts.
fn read_skill_file(file: &Path) -> Result<String, cairn_guard::GuardError> {
    cairn_guard::safe_read_file_bounded(file, crate::constants::MAX_SKILL_FILE_BYTES as u64)
}

/// Parses frontmatter text strictly, as the standard requires.
pub fn parse_frontmatter(text: &str) -> Result<SkillMeta, FrontmatterError> {
    parse_strict(text).map(|(meta, _, _)| meta)
}

/// The standard's `read_properties`: frontmatter present and a mapping, with
/// non-empty `name` and `description`.
pub fn read_properties(dir: &Path) -> Result<SkillMeta, LintFinding> {
    let Some(file) = skill_file_in(dir) else {
        return Err(finding(
            LintSeverity::Error,
            "missing-skill-md",
            format!("SKILL.md not found in {}", dir.display()),
        ));
    };
    let text = read_skill_file(&file).map_err(|error| {
        finding(LintSeverity::Error, "unreadable", format!("cannot read {}: {error}", file.display()))
    })?;
    let meta =
        parse_frontmatter(&text).map_err(|error| finding(LintSeverity::Error, "frontmatter", error.to_string()))?;
    if meta.name.as_deref().is_none_or(|name| name.trim().is_empty()) {
        return Err(finding(LintSeverity::Portability, "name-missing", "Missing required field in frontmatter: name"));
    }
    if meta.description.as_deref().is_none_or(|text| text.trim().is_empty()) {
        return Err(finding(
            LintSeverity::Portability,
            "description-missing",
            "Missing required field in frontmatter: description",
        ));
    }
    Ok(meta)
}

fn check_name(name: &str, dir: &Path, findings: &mut Vec<LintFinding>) {
    let name: String = name.trim().nfkc().collect();
    let p = LintSeverity::Portability;
    if name.chars().count() > SPEC_NAME_MAX_CHARS {
        findings.push(finding(
            p,
            "name-length",
            format!("Skill name '{name}' exceeds {SPEC_NAME_MAX_CHARS} character limit"),
        ));
    }
    if name.to_lowercase() != name {
        findings.push(finding(p, "name-lowercase", format!("Skill name '{name}' must be lowercase")));
    }
    if name.starts_with('-') || name.ends_with('-') {
        findings.push(finding(p, "name-hyphen-edge", "Skill name cannot start or end with a hyphen"));
    }
    if name.contains("--") {
        findings.push(finding(p, "name-consecutive-hyphens", "Skill name cannot contain consecutive hyphens"));
    }
    if !name.chars().all(|ch| ch.is_alphanumeric() || ch == '-') {
        findings.push(finding(
            p,
            "name-invalid-characters",
            format!("Skill name '{name}' contains invalid characters. Only letters, digits, and hyphens are allowed."),
        ));
    }
    if let Some(dir_name) = dir.file_name().and_then(|name| name.to_str()) {
        let dir_name: String = dir_name.nfkc().collect();
        if dir_name != name {
            findings.push(finding(
                p,
                "name-directory-mismatch",
                format!("Directory name '{dir_name}' must match skill name '{name}'"),
            ));
        }
    }
}

/// Lints one skill directory against the Agent Skills rules and Cairn's.
pub fn lint_skill_dir(dir: &Path) -> LintReport {
    let mut findings = Vec::new();
    let report = |mut findings: Vec<LintFinding>| {
        findings.sort_by_key(|finding| finding.severity);
        LintReport { dir: dir.to_path_buf(), findings }
    };
    let Some(file) = skill_file_in(dir) else {
        findings.push(finding(
            LintSeverity::Error,
            "missing-skill-md",
            format!("SKILL.md not found in {}", dir.display()),
        ));
        return report(findings);
    };
    let text = match read_skill_file(&file) {
        Ok(text) => text,
        Err(error) => {
            findings.push(finding(
                LintSeverity::Error,
                "unreadable",
                format!("cannot read {}: {error}", file.display()),
            ));
            return report(findings);
        }
    };
    if file.file_name().and_then(|name| name.to_str()) == Some("skill.md") {
        findings.push(finding(LintSeverity::Warning, "lowercase-file-name", "prefer SKILL.md over skill.md"));
    }
    let (meta, mapping, split) = match parse_strict(&text) {
        Ok(parsed) => parsed,
        Err(error) => {
            findings.push(finding(
                LintSeverity::Error,
                "frontmatter",
                format!("{error}; Cairn loads it without metadata"),
            ));
            return report(findings);
        }
    };
    spec_findings(&mapping, dir, &mut findings);
    cairn_findings(&meta, &mapping, &text, &text[split.body], &mut findings);
    report(findings)
}

/// The Agent Skills rules: the frontmatter's fields, their types and lengths.
fn spec_findings(mapping: &serde_norway::Mapping, dir: &Path, findings: &mut Vec<LintFinding>) {
    let p = LintSeverity::Portability;
    let mut unexpected: Vec<String> = Vec::new();
    for key in mapping.keys() {
        match key.as_str() {
            Some(key) if SPEC_ALLOWED_KEYS.contains(&key) => {}
            Some(key) => unexpected.push(key.to_owned()),
            None => unexpected.push(format!("{key:?}")),
        }
    }
    if !unexpected.is_empty() {
        unexpected.sort();
        let cairn_own: Vec<&String> = unexpected.iter().filter(|key| CAIRN_KEYS.contains(&key.as_str())).collect();
        let mut message = format!(
            "Unexpected fields in frontmatter: {}. Only {} are allowed.",
            unexpected.join(", "),
            SPEC_ALLOWED_KEYS.join(", ")
        );
        if !cairn_own.is_empty() {
            message.push_str(&format!(
                " Cairn also reads {} under `metadata:` (as strings), which keeps the skill valid for other hosts.",
                cairn_own.iter().map(|key| key.as_str()).collect::<Vec<_>>().join(", ")
            ));
        }
        findings.push(finding(p, "unexpected-fields", message));
    }
    match mapping.get("name") {
        Some(Value::String(name)) if !name.trim().is_empty() => check_name(name, dir, findings),
        Some(Value::String(_)) | None | Some(Value::Null) => {
            findings.push(finding(p, "name-missing", "Missing required field in frontmatter: name"))
        }
        Some(_) => findings.push(finding(p, "name-type", "Field 'name' must be a string")),
    }
    match mapping.get("description") {
        Some(Value::String(text)) if !text.trim().is_empty() => {
            if text.chars().count() > SPEC_DESCRIPTION_MAX_CHARS {
                findings.push(finding(
                    p,
                    "description-length",
                    format!(
                        "Description exceeds {SPEC_DESCRIPTION_MAX_CHARS} character limit ({} chars)",
                        text.chars().count()
                    ),
                ));
            }
        }
        Some(Value::String(_)) | None | Some(Value::Null) => findings.push(finding(
            p,
            "description-missing",
            "Missing required field in frontmatter: description (Cairn's skill index shows it too)",
        )),
        Some(_) => findings.push(finding(p, "description-type", "Field 'description' must be a string")),
    }
    match mapping.get("compatibility") {
        None => {}
        Some(Value::String(text)) if text.chars().count() > SPEC_COMPATIBILITY_MAX_CHARS => findings.push(finding(
            p,
            "compatibility-length",
            format!("Compatibility exceeds {SPEC_COMPATIBILITY_MAX_CHARS} character limit"),
        )),
        Some(Value::String(text)) if text.trim().is_empty() => {
            findings.push(finding(p, "compatibility-empty", "Field 'compatibility' must not be empty"))
        }
        Some(Value::String(_)) => {}
        Some(_) => findings.push(finding(p, "compatibility-type", "Field 'compatibility' must be a string")),
    }
    match mapping.get("allowed-tools") {
        None | Some(Value::String(_)) => {}
        Some(_) => {
            findings.push(finding(p, "allowed-tools-type", "Field 'allowed-tools' must be a space-separated string"))
        }
    }
    match mapping.get("metadata") {
        None => {}
        Some(Value::Mapping(inner)) => {
            for (key, value) in inner {
                if !matches!(key, Value::String(_)) || !matches!(value, Value::String(_)) {
                    findings.push(finding(
                        p,
                        "metadata-type",
                        format!("metadata entry {key:?} must map a string to a string (quote the value)"),
                    ));
                }
            }
        }
        Some(_) => findings.push(finding(p, "metadata-type", "Field 'metadata' must be a mapping")),
    }
}

/// What Cairn needs of a skill: readable flags, triggers that can match, a
/// body, and no text its guard would withhold.
fn cairn_findings(
    meta: &SkillMeta,
    mapping: &serde_norway::Mapping,
    text: &str,
    body: &str,
    findings: &mut Vec<LintFinding>,
) {
    let w = LintSeverity::Warning;
    let metadata = mapping.get("metadata").and_then(Value::as_mapping);
    for key in ["always", "inject_on_trigger", "pinned"] {
        for (place, value) in [("", mapping.get(key)), ("metadata.", metadata.and_then(|inner| inner.get(key)))] {
            if let Some(value) = value
                && as_bool(value).is_none()
            {
                findings.push(finding(
                    w,
                    "cairn-flag-value",
                    format!("`{place}{key}` is not true/false; Cairn reads it as its default"),
                ));
            }
        }
    }
    if let (Some(top), Some(inner)) = (mapping.get("triggers"), metadata.and_then(|inner| inner.get("triggers")))
        && top != inner
    {
        findings.push(finding(
            w,
            "cairn-shadowed-key",
            "`triggers` is set at top level and under metadata; the top-level one wins",
        ));
    }
    if meta.always && !meta.triggers.is_empty() {
        findings.push(finding(
            w,
            "cairn-always-with-triggers",
            "`always: true` skills are in every session; their triggers are never used",
        ));
    }
    for trigger in &meta.triggers {
        if crate::text::distinct_stems(trigger.trim_start_matches('!')).is_empty() {
            findings.push(finding(
                w,
                "cairn-empty-trigger",
                format!("trigger {trigger:?} has no words and never matches"),
            ));
        }
    }
    let lines = text.lines().count();
    if lines > SPEC_RECOMMENDED_MAX_LINES {
        findings.push(finding(
            w,
            "long-skill",
            format!("SKILL.md has {lines} lines; the standard recommends under {SPEC_RECOMMENDED_MAX_LINES}"),
        ));
    }
    if body.trim().is_empty() {
        findings.push(finding(w, "empty-body", "the body is empty; a delivered skill would say nothing"));
    }
    if !cairn_guard::find_credentials(text).is_empty() {
        findings.push(finding(
            w,
            "credentials",
            "the file contains credential-shaped text; Cairn redacts it before any prompt",
        ));
    }
    if let Some(hit) = cairn_guard::screen(text) {
        findings.push(finding(
            w,
            "injection-screen",
            format!("the text trips the injection screen ({}); Cairn will not put it in a prompt", hit.rule),
        ));
    }
}

/// Lints `path`: the skill itself when it holds a `SKILL.md`, else every
/// skill directory below it (hidden directories skipped).
pub fn lint_path(path: &Path) -> Vec<LintReport> {
    if skill_file_in(path).is_some() {
        return vec![lint_skill_dir(path)];
    }
    let mut reports = Vec::new();
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        let mut subdirs: Vec<PathBuf> = entries
            .flatten()
            .filter(|entry| !entry.file_name().to_string_lossy().starts_with('.'))
            .map(|entry| entry.path())
            .filter(|path| path.is_dir())
            .collect();
        subdirs.sort();
        for sub in subdirs.into_iter().rev() {
            if skill_file_in(&sub).is_some() {
                reports.push(lint_skill_dir(&sub));
            } else if sub.strip_prefix(path).map_or(0, |relative| relative.components().count())
                < crate::constants::MAX_DISCOVERY_DEPTH
            {
                stack.push(sub);
            }
        }
    }
    reports.sort_by(|a, b| a.dir.cmp(&b.dir));
    reports
}
