//! A skill candidate as the consolidation model proposed it: parsed from
//! its JSON object, redacted, and checked against the slug and size rules.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::AutoSkillError;
use crate::constants::{
    AUTO_MAX_DESCRIPTION_CHARS, AUTO_MAX_PROCEDURE_CHARS, AUTO_MAX_SCRIPT_BYTES, AUTO_MAX_TRIGGERS,
};

static SLUG: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[a-z0-9][a-z0-9-]{1,62}[a-z0-9]$").expect("the slug rule compiles"));

/// Checks an auto-skill slug against `^[a-z0-9][a-z0-9-]{1,62}[a-z0-9]$`.
pub fn validate_slug(slug: &str) -> Result<(), AutoSkillError> {
    if SLUG.is_match(slug) { Ok(()) } else { Err(AutoSkillError::InvalidSlug { slug: cut(slug, 80) }) }
}

/// A proposed skill, redacted and validated (the script is validated
/// separately, see [`super::validate_script`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The slug: the skill becomes `auto/<slug>`.
    pub slug: String,
    /// One line on what the skill does.
    pub description: String,
    /// Trigger phrases.
    pub triggers: Vec<String>,
    /// The procedure (the `SKILL.md` body).
    pub procedure: String,
    /// An optional Python helper.
    pub script: Option<String>,
    /// The session the candidate came from.
    pub session_key: String,
}

fn cut(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

fn text_field(object: &serde_json::Map<String, Value>, field: &'static str) -> Result<Option<String>, AutoSkillError> {
    match object.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) if text.trim().is_empty() => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(AutoSkillError::Malformed { field, reason: "must be a string".to_owned() }),
    }
}

fn required(object: &serde_json::Map<String, Value>, field: &'static str) -> Result<String, AutoSkillError> {
    text_field(object, field)?.ok_or(AutoSkillError::Malformed { field, reason: "is required".to_owned() })
}

/// Credentials and exfiltration links out, whitespace trimmed.
fn scrub(text: &str) -> String {
    cairn_guard::redact_all(text.trim()).into_owned()
}

/// The slug a proposal names: `auto/<slug>` or a bare slug.
pub(crate) fn slug_of(name: &str) -> &str {
    name.trim().strip_prefix("auto/").unwrap_or(name.trim())
}

impl Candidate {
    /// Reads a proposal object: `name` (the slug, optionally `auto/`-
    /// prefixed), `description`, `procedure`, optional `triggers` (a list
    /// or a comma-separated string) and optional `script`. Every text is
    /// redacted (credentials, exfiltration URLs) before any check; an
    /// over-long procedure is refused whole. `require_description`: a
    /// refinement may leave the description out.
    pub fn from_json(value: &Value, session_key: &str, require_description: bool) -> Result<Self, AutoSkillError> {
        let Value::Object(object) = value else {
            return Err(AutoSkillError::Malformed { field: "skill", reason: "must be a JSON object".to_owned() });
        };
        let name = required(object, "name")?;
        let slug = slug_of(&name).to_owned();
        validate_slug(&slug)?;
        let description = match text_field(object, "description")? {
            Some(text) => scrub(&text),
            None if require_description => {
                return Err(AutoSkillError::Malformed { field: "description", reason: "is required".to_owned() });
            }
            None => String::new(),
        };
        if description.chars().count() > AUTO_MAX_DESCRIPTION_CHARS || description.contains('\n') {
            return Err(AutoSkillError::Malformed {
                field: "description",
                reason: format!("must be one line of at most {AUTO_MAX_DESCRIPTION_CHARS} characters"),
            });
        }
        let procedure = required(object, "procedure")?;
        let chars = procedure.chars().count();
        if chars > AUTO_MAX_PROCEDURE_CHARS {
            return Err(AutoSkillError::ProcedureTooLong { chars, max: AUTO_MAX_PROCEDURE_CHARS });
        }
        let procedure = scrub(&procedure);
        let triggers = match object.get("triggers") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(text)) => text.split(',').map(scrub).filter(|part| !part.is_empty()).collect(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| {
                    item.as_str()
                        .map(scrub)
                        .ok_or(AutoSkillError::Malformed { field: "triggers", reason: "must list strings".to_owned() })
                })
                .filter(|item| !matches!(item, Ok(text) if text.is_empty()))
                .collect::<Result<Vec<_>, _>>()?,
            Some(_) => {
                return Err(AutoSkillError::Malformed {
                    field: "triggers",
                    reason: "must be a list of strings or a comma-separated string".to_owned(),
                });
            }
        };
        if triggers.len() > AUTO_MAX_TRIGGERS
            || triggers.iter().any(|trigger| trigger.contains(['\n', ',']) || trigger.chars().count() > 80)
        {
            return Err(AutoSkillError::Malformed {
                field: "triggers",
                reason: format!("at most {AUTO_MAX_TRIGGERS} one-line phrases of at most 80 characters"),
            });
        }
        let script = text_field(object, "script")?;
        if let Some(script) = &script
            && script.len() > AUTO_MAX_SCRIPT_BYTES
        {
            return Err(AutoSkillError::ScriptRejected {
                rule: "size",
                detail: format!("the script is {} bytes, above the {AUTO_MAX_SCRIPT_BYTES}-byte limit", script.len()),
            });
        }
        for text in std::iter::once(&procedure).chain(std::iter::once(&description)).chain(&triggers) {
            if let Some(finding) = cairn_guard::screen(text) {
                return Err(AutoSkillError::Injection { rule: finding.rule.to_string() });
            }
        }
        Ok(Candidate {
            slug,
            description,
            triggers,
            procedure,
            script: script.map(|script| scrub(&script)),
            session_key: session_key.to_owned(),
        })
    }
}

/// Lower-cased alphanumeric words of a description.
fn words(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|word| !word.is_empty()).map(str::to_lowercase).collect()
}

/// Jaccard overlap of the description words of `a` and `b` (0 when both are empty).
pub fn description_similarity(a: &str, b: &str) -> f64 {
    let (a, b) = (words(a), words(b));
    let union = a.union(&b).count();
    if union == 0 {
        return 0.0;
    }
    a.intersection(&b).count() as f64 / union as f64
}
