//! Auto skills: procedures the consolidation model extracted from finished
//! sessions, staged for review, promoted into the catalog, and retired
//! when unused.
//!
//! Layout under the catalog's own directory (`<home>/skills`):
//!
//! - `auto/<slug>/SKILL.md` (plus `scripts/helper.py` when the candidate
//!   carried a script): live auto skills, discovered by the catalog as
//!   `auto/<slug>`;
//! - `auto/.pending/<slug>/`: candidates waiting for review (hidden, so the
//!   catalog never offers them);
//! - `auto/.archived/<slug>/`: retired skills (hidden: not offered);
//! - `auto/.versions/<slug>/<millis>.md`: the `SKILL.md` a refinement
//!   (or a restore) replaced, newest [`MAX_KEPT_VERSIONS`] kept, so
//!   [`AutoSkills::restore`] can put the previous procedure back;
//! - `auto/.lifecycle.json`: when each live skill went live, was last
//!   used, and whether it is stale.
//!
//! [`AutoSkills::propose`] is the receiver of a consolidation proposal: the
//! candidate is parsed and redacted ([`Candidate::from_json`]), its script
//! (if any) statically validated ([`validate_script`]), compared with every
//! generated skill, pending ones included (Jaccard overlap of description
//! words, [`description_similarity`]), and written under `auto/.pending/`
//! unless approval is off and it has no script. A refinement only ever
//! targets an existing `auto/` skill whose frontmatter says `source: auto`,
//! carrying every frontmatter line it does not model forward byte for byte.
//! With approval required, a refinement is staged as a *pending update*
//! under `auto/.pending/<slug>/` (its frontmatter names the skill it
//! `refines`) and reviewed, approved or rejected like a new candidate;
//! approving it snapshots the live file into `auto/.versions/` first.
//! Without approval the refinement goes live at once, snapshot first too.
//! Every create, refine, duplicate refusal, approval, rejection, expiry and
//! archive is an audit record.

mod candidate;
mod lifecycle;
mod script;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use serde::Serialize;
use serde_json::Value;

pub use candidate::{Candidate, description_similarity, validate_slug};
pub use lifecycle::{AutoSkillState, LifecycleReport};
pub use script::validate_script;

use crate::audit::{AuditSink, SkillAuditAction, SkillAuditEvent};
use crate::clock::SkillClock;
use crate::constants::{
    AUTO_ARCHIVE_AFTER_DAYS, AUTO_MAX_PROCEDURE_CHARS, AUTO_MAX_SCRIPT_BYTES, AUTO_PENDING_TTL_DAYS,
    AUTO_SIMILARITY_THRESHOLD, AUTO_STALE_AFTER_DAYS, MAX_AUTO_SKILLS, MAX_SKILL_FILE_BYTES,
};
use crate::error::SkillsError;
use crate::frontmatter::{SkillMeta, lines_with_endings, parse_mapping, split};
use crate::fsutil::atomic_write;

/// The directory of auto skills inside the catalog's own directory.
pub const AUTO_DIR: &str = "auto";
/// Candidates waiting for review, inside [`AUTO_DIR`].
pub const PENDING_DIR: &str = ".pending";
/// Retired skills, inside [`AUTO_DIR`].
pub const ARCHIVE_DIR: &str = ".archived";
/// The helper script's path inside a skill directory.
pub const SCRIPT_PATH: &str = "scripts/helper.py";
/// Replaced versions of live skills, inside [`AUTO_DIR`].
pub const VERSIONS_DIR: &str = ".versions";
/// Replaced versions kept per skill (the oldest beyond are deleted).
pub const MAX_KEPT_VERSIONS: usize = 10;
/// Live generated skills whose current procedure a refinement prompt shows.
pub const MAX_REFINABLE_SHOWN: usize = 3;
/// The frontmatter key of a pending update naming the skill it replaces.
const REFINES_KEY: &str = "refines";

/// Why a candidate, review action or refinement was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AutoSkillError {
    /// The slug breaks `^[a-z0-9][a-z0-9-]{1,62}[a-z0-9]$`.
    #[error("invalid auto-skill slug {slug:?}: it must match ^[a-z0-9][a-z0-9-]{{1,62}}[a-z0-9]$")]
    InvalidSlug {
        /// The slug as given (cut).
        slug: String,
    },
    /// A field of the proposal is missing or of the wrong shape.
    #[error("the proposal's \"{field}\" {reason}")]
    Malformed {
        /// The field.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The procedure is over the cap; the whole candidate is refused.
    #[error("the procedure is {chars} characters, above the {max}-character limit")]
    ProcedureTooLong {
        /// Its length.
        chars: usize,
        /// The cap.
        max: usize,
    },
    /// A text of the proposal trips the injection screen.
    #[error("the proposal trips the injection screen ({rule})")]
    Injection {
        /// The screen's rule.
        rule: String,
    },
    /// The helper script breaks a static rule.
    #[error("the script is refused by rule {rule}: {detail}")]
    ScriptRejected {
        /// `syntax`, `dynamic-exec`, `process-exec`, `network`, `destructive-fs` or `size`.
        rule: &'static str,
        /// Where and what.
        detail: String,
    },
    /// `skills.generate_scripts` is off and the proposal carries a script.
    #[error("the proposal carries a script but skills.generate_scripts is off")]
    ScriptsDisabled,
    /// The script checker could not give a verdict; the script is refused.
    #[error("the script could not be validated: {reason}")]
    Validator {
        /// Why.
        reason: String,
    },
    /// A generated skill (live or pending) has a near-identical description.
    #[error("near-duplicate of {of} (description overlap {similarity:.2} at or above {threshold:.2})")]
    Duplicate {
        /// The existing skill.
        of: String,
        /// The Jaccard overlap.
        similarity: f64,
        /// The threshold.
        threshold: f64,
    },
    /// A refinement (or restore) named a skill outside `auto/`, or one not generated.
    #[error("refusing to change {name:?}: only generated skills (source: auto) under auto/ are refined or restored")]
    NotAuto {
        /// The name given.
        name: String,
    },
    /// A pending folder holds files the review does not show (anything
    /// but `SKILL.md` and `scripts/helper.py`, or a link); approving it
    /// would promote them unchecked.
    #[error("pending auto skill {slug:?} holds files that were not reviewed ({}); remove them or reject it", files.join(", "))]
    UnexpectedFiles {
        /// The slug.
        slug: String,
        /// The extra entries, relative to the candidate's folder.
        files: Vec<String>,
    },
    /// No such pending or live auto skill.
    #[error("no auto skill {slug:?}")]
    NotFound {
        /// The slug.
        slug: String,
    },
    /// A pending or live auto skill already has this slug.
    #[error("auto skill {slug:?} already exists")]
    Exists {
        /// The slug.
        slug: String,
    },
    /// `skills.max_auto_skills` generated skills (live and pending) exist.
    #[error("{max} auto skills exist (skills.max_auto_skills); no new candidate is staged")]
    AtCapacity {
        /// The cap.
        max: usize,
    },
    /// A directory on the way is a symbolic link.
    #[error("refusing to write through symbolic link {path}")]
    Symlink {
        /// The link.
        path: PathBuf,
    },
    /// No earlier version of the skill is kept.
    #[error("no earlier version of auto skill {slug:?} is kept")]
    NoVersion {
        /// The slug.
        slug: String,
    },
    /// A filesystem failure.
    #[error(transparent)]
    Skills(#[from] SkillsError),
}

impl AutoSkillError {
    /// A stable code for the refusal.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidSlug { .. } => "invalid_slug",
            Self::Malformed { .. } => "malformed",
            Self::ProcedureTooLong { .. } => "procedure_too_long",
            Self::Injection { .. } => "injection",
            Self::ScriptRejected { .. } => "script_rejected",
            Self::ScriptsDisabled => "scripts_disabled",
            Self::Validator { .. } => "script_unvalidated",
            Self::Duplicate { .. } => "duplicate",
            Self::NotAuto { .. } => "not_auto",
            Self::UnexpectedFiles { .. } => "unexpected_files",
            Self::NotFound { .. } => "not_found",
            Self::Exists { .. } => "exists",
            Self::AtCapacity { .. } => "at_capacity",
            Self::Symlink { .. } => "symlink_refused",
            Self::NoVersion { .. } => "no_version",
            Self::Skills(_) => "io",
        }
    }
}

/// The `skills.*` settings of the pipeline.
#[derive(Debug, Clone, PartialEq)]
pub struct AutoSkillsConfig {
    /// Candidates wait for review (`skills.approval_required`); a candidate
    /// with a script always does.
    pub approval_required: bool,
    /// Description overlap at or above which a candidate is a duplicate.
    pub similarity_threshold: f64,
    /// Generated skills kept at most.
    pub max_auto_skills: usize,
    /// Days without use before a live skill is stale.
    pub stale_after_days: u64,
    /// Days without use before a live skill is archived.
    pub archive_after_days: u64,
    /// Days a candidate waits for review before it expires.
    pub pending_ttl_days: u64,
    /// A candidate may carry a Python helper.
    pub generate_scripts: bool,
    /// The interpreter whose `ast` module validates scripts.
    pub python: PathBuf,
}

impl Default for AutoSkillsConfig {
    fn default() -> Self {
        Self {
            approval_required: true,
            similarity_threshold: AUTO_SIMILARITY_THRESHOLD,
            max_auto_skills: MAX_AUTO_SKILLS,
            stale_after_days: AUTO_STALE_AFTER_DAYS,
            archive_after_days: AUTO_ARCHIVE_AFTER_DAYS,
            pending_ttl_days: AUTO_PENDING_TTL_DAYS,
            generate_scripts: true,
            python: PathBuf::from("python3"),
        }
    }
}

/// What a proposal turned into.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum AutoOutcome {
    /// Written under `auto/.pending/<slug>/`, waiting for review.
    Staged {
        /// The slug.
        slug: String,
    },
    /// Written live as `auto/<slug>` (approval off, no script).
    Live {
        /// The catalog name.
        name: String,
    },
    /// An existing `auto/<slug>` was rewritten (approval off; the
    /// replaced file is kept under `auto/.versions/`).
    Refined {
        /// The catalog name.
        name: String,
    },
    /// A refinement of `auto/<slug>` waits for review under
    /// `auto/.pending/<slug>/` (approval on); the live skill is unchanged.
    UpdateStaged {
        /// The catalog name of the live skill.
        name: String,
    },
}

/// What a pending entry would do when approved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PendingKind {
    /// A new skill.
    New,
    /// A refinement replacing the procedure of a live skill.
    Update,
}

/// A live generated skill's current procedure, as a refinement prompt shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RefinableSkill {
    /// `auto/<slug>`.
    pub name: String,
    /// The body, redacted, at most the procedure cap.
    pub procedure: String,
}

/// A candidate waiting for review (the `GET /api/skills/-/pending` shape).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PendingSkill {
    /// The slug.
    pub slug: String,
    /// `auto/<slug>`.
    pub name: String,
    /// `new`, or `update` for a refinement of the live skill `name`.
    pub kind: PendingKind,
    /// The description.
    pub description: String,
    /// Trigger phrases.
    pub triggers: Vec<String>,
    /// The session it came from.
    pub session_key: String,
    /// When it was staged (RFC 3339).
    pub created_at: String,
    /// Whether it carries a helper script.
    pub has_script: bool,
    /// Entries of its folder other than `SKILL.md` and `scripts/helper.py`
    /// (relative paths); a candidate holding any is refused at approval.
    pub unexpected_files: Vec<String>,
    /// The procedure.
    pub procedure: String,
    /// The helper script.
    pub script: Option<String>,
    /// For an update: the live skill's procedure it would replace (so a
    /// reviewer sees both); `None` for a new skill or a live skill gone.
    pub current_procedure: Option<String>,
}

/// Which proposal key a proposal came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProposalKind {
    /// `new_skill`.
    New,
    /// `refined_skill`.
    Refined,
}

/// The auto-skill pipeline over one home's skills directory.
#[derive(Debug)]
pub struct AutoSkills {
    skills_dir: PathBuf,
    config: AutoSkillsConfig,
    clock: Arc<dyn SkillClock>,
    audit: Arc<dyn AuditSink>,
    write_lock: Mutex<()>,
}

/// RFC 3339 text of Unix milliseconds.
pub(crate) fn rfc3339(millis: u64) -> String {
    jiff::Timestamp::from_millisecond(i64::try_from(millis).unwrap_or(i64::MAX))
        .map_or_else(|_| "1970-01-01T00:00:00Z".to_owned(), |stamp| stamp.to_string())
}

/// Unix milliseconds of RFC 3339 text.
pub(crate) fn parse_rfc3339(text: &str) -> Option<u64> {
    text.trim().parse::<jiff::Timestamp>().ok().and_then(|stamp| u64::try_from(stamp.as_millisecond()).ok())
}

/// A YAML scalar for `text` (a JSON string is a YAML double-quoted scalar).
fn quoted(text: &str) -> String {
    serde_json::to_string(text).expect("a string serialises")
}

/// A parsed `SKILL.md` of the auto tree.
pub(crate) struct Parsed {
    pub(crate) meta: SkillMeta,
    pub(crate) mapping: serde_norway::Mapping,
    pub(crate) body: String,
}

impl Parsed {
    pub(crate) fn read(file: &Path) -> Result<Self, AutoSkillError> {
        let text = cairn_guard::safe_read_file_bounded(file, MAX_SKILL_FILE_BYTES as u64).map_err(|error| {
            SkillsError::io("reading", file, std::io::Error::new(std::io::ErrorKind::InvalidData, error.to_string()))
        })?;
        Self::parse(&text, file)
    }

    fn parse(text: &str, file: &Path) -> Result<Self, AutoSkillError> {
        let malformed = |reason: String| SkillsError::MalformedFrontmatter { name: file.display().to_string(), reason };
        let parts = split(text).map_err(|error| malformed(error.to_string()))?;
        let mapping = parse_mapping(&text[parts.yaml.clone()]).map_err(|error| malformed(error.to_string()))?;
        Ok(Parsed { meta: SkillMeta::from_mapping(&mapping), mapping, body: text[parts.body].to_owned() })
    }

    pub(crate) fn text(&self, key: &str) -> Option<String> {
        match self.mapping.get(key) {
            Some(serde_norway::Value::String(text)) => Some(text.clone()),
            Some(serde_norway::Value::Number(number)) => Some(number.to_string()),
            _ => None,
        }
    }

    pub(crate) fn is_generated(&self) -> bool {
        self.text("source").as_deref() == Some("auto")
    }
}

/// Rewrites the frontmatter of `text`: every top-level key in `updates` is
/// replaced (or added at the end), every other line is kept byte for byte;
/// the body becomes `body` when given.
pub(crate) fn carry_forward(
    text: &str,
    updates: &[(&str, Option<String>)],
    body: Option<&str>,
) -> Result<String, AutoSkillError> {
    let parts = split(text).map_err(|error| SkillsError::MalformedFrontmatter {
        name: "SKILL.md".to_owned(),
        reason: error.to_string(),
    })?;
    let yaml = &text[parts.yaml.clone()];
    let mut out = String::with_capacity(text.len() + 128);
    out.push_str(&text[..parts.yaml.start]);
    let mut skipping = false;
    for line in lines_with_endings(yaml) {
        let top_level = !line.starts_with([' ', '\t', '#', '-', '\n', '\r']);
        if top_level {
            let key = line.split(':').next().unwrap_or("").trim().trim_matches(['"', '\'']);
            skipping = updates.iter().any(|(name, _)| *name == key);
        } else if skipping && (line.starts_with('#') || line.trim().is_empty()) {
            skipping = false;
        }
        if !skipping {
            out.push_str(line);
        }
    }
    if !out.ends_with('\n') {
        out.push('\n');
    }
    for (key, value) in updates {
        if let Some(value) = value {
            out.push_str(&format!("{key}: {value}\n"));
        }
    }
    out.push_str(&text[parts.yaml.end..parts.body.start]);
    match body {
        Some(body) => {
            if !out.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(body.trim_end());
            out.push('\n');
        }
        None => out.push_str(&text[parts.body]),
    }
    Ok(out)
}

impl AutoSkills {
    /// The pipeline over `skills_dir` (the catalog's own directory,
    /// `<home>/skills`).
    pub fn new(
        skills_dir: impl Into<PathBuf>,
        config: AutoSkillsConfig,
        clock: Arc<dyn SkillClock>,
        audit: Arc<dyn AuditSink>,
    ) -> Self {
        Self { skills_dir: skills_dir.into(), config, clock, audit, write_lock: Mutex::new(()) }
    }

    /// The settings.
    pub fn config(&self) -> &AutoSkillsConfig {
        &self.config
    }

    /// `<skills>/auto`.
    pub fn root(&self) -> PathBuf {
        self.skills_dir.join(AUTO_DIR)
    }

    fn pending_dir(&self) -> PathBuf {
        self.root().join(PENDING_DIR)
    }

    fn archive_dir(&self) -> PathBuf {
        self.root().join(ARCHIVE_DIR)
    }

    fn record(&self, action: SkillAuditAction, slug: &str, ok: bool, detail: String) {
        self.record_named(action, format!("{AUTO_DIR}/{slug}"), ok, detail);
    }

    fn record_named(&self, action: SkillAuditAction, name: String, ok: bool, detail: String) {
        self.audit.record(SkillAuditEvent {
            action,
            skills: vec![name],
            ok,
            detail: cairn_guard::redact_all(&detail).into_owned(),
        });
    }

    /// Creates `dir` and its parents, refusing any that is a symbolic link.
    fn ensure_dir(&self, dir: &Path) -> Result<(), AutoSkillError> {
        let mut path = self.skills_dir.clone();
        let relative = dir.strip_prefix(&self.skills_dir).unwrap_or(dir);
        for step in std::iter::once(None).chain(relative.components().map(Some)) {
            if let Some(component) = step {
                path.push(component);
            }
            match fs::symlink_metadata(&path) {
                Ok(metadata) if metadata.file_type().is_symlink() => {
                    return Err(AutoSkillError::Symlink { path });
                }
                Ok(_) => {}
                Err(_) => fs::create_dir(&path).map_err(|source| SkillsError::io("creating", &path, source))?,
            }
        }
        Ok(())
    }

    /// Handles one proposal of a consolidation run: a `new_skill` is
    /// validated, deduplicated and staged (or made live); a
    /// `refined_skill` rewrites an existing generated skill. Every outcome
    /// is audited.
    pub fn propose(&self, kind: ProposalKind, skill: &Value, session_key: &str) -> Result<AutoOutcome, AutoSkillError> {
        let label = skill
            .get("name")
            .and_then(Value::as_str)
            .map(|name| candidate::slug_of(name).chars().take(80).collect::<String>())
            .unwrap_or_else(|| "(unnamed)".to_owned());
        let _write = self.write_lock.lock();
        match kind {
            ProposalKind::New => {
                let result =
                    Candidate::from_json(skill, session_key, true).and_then(|candidate| self.create(&candidate));
                match &result {
                    Ok(outcome) => self.record(
                        SkillAuditAction::AutoSkillCreate,
                        &label,
                        true,
                        format!("session {session_key}: {}", describe(outcome)),
                    ),
                    Err(error @ AutoSkillError::Duplicate { .. }) => self.record(
                        SkillAuditAction::AutoSkillDuplicate,
                        &label,
                        false,
                        format!("session {session_key}: {error}"),
                    ),
                    Err(error) => self.record(
                        SkillAuditAction::AutoSkillCreate,
                        &label,
                        false,
                        format!("session {session_key}: {} ({error})", error.code()),
                    ),
                }
                result
            }
            ProposalKind::Refined => {
                let result = self.refine(skill, session_key);
                let detail = match &result {
                    Ok(outcome) => format!("session {session_key}: {}", describe(outcome)),
                    Err(error) => format!("session {session_key}: {} ({error})", error.code()),
                };
                // The name as the model gave it: a refused one may be outside auto/.
                let name = skill.get("name").and_then(Value::as_str).unwrap_or("(unnamed)").trim();
                self.record_named(
                    SkillAuditAction::AutoSkillRefine,
                    name.chars().take(80).collect(),
                    result.is_ok(),
                    detail,
                );
                result
            }
        }
    }

    /// Every generated skill's description (live and pending), by name.
    fn generated_descriptions(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (dir, prefix) in [(self.root(), ""), (self.pending_dir(), "pending ")] {
            for slug in slugs_in(&dir) {
                if let Ok(parsed) = Parsed::read(&dir.join(&slug).join("SKILL.md")) {
                    out.push((format!("{prefix}{AUTO_DIR}/{slug}"), parsed.meta.description.unwrap_or_default()));
                }
            }
        }
        out
    }

    fn create(&self, candidate: &Candidate) -> Result<AutoOutcome, AutoSkillError> {
        if let Some(script) = &candidate.script {
            if !self.config.generate_scripts {
                return Err(AutoSkillError::ScriptsDisabled);
            }
            validate_script(&self.config.python, script)?;
        }
        let slug = &candidate.slug;
        if self.root().join(slug).exists() || self.pending_dir().join(slug).exists() {
            return Err(AutoSkillError::Exists { slug: slug.clone() });
        }
        let existing = self.generated_descriptions();
        for (name, description) in &existing {
            let similarity = description_similarity(&candidate.description, description);
            if similarity >= self.config.similarity_threshold {
                return Err(AutoSkillError::Duplicate {
                    of: name.clone(),
                    similarity,
                    threshold: self.config.similarity_threshold,
                });
            }
        }
        if existing.len() >= self.config.max_auto_skills {
            return Err(AutoSkillError::AtCapacity { max: self.config.max_auto_skills });
        }
        let now = self.clock.now_millis();
        let text = render(candidate, now);
        let staged = candidate.script.is_some() || self.config.approval_required;
        let parent = if staged { self.pending_dir() } else { self.root() };
        self.ensure_dir(&parent)?;
        write_skill_dir(&parent, slug, &text, candidate.script.as_deref())?;
        if staged {
            Ok(AutoOutcome::Staged { slug: slug.clone() })
        } else {
            self.mark_live(slug, now)?;
            Ok(AutoOutcome::Live { name: format!("{AUTO_DIR}/{slug}") })
        }
    }

    fn refine(&self, skill: &Value, session_key: &str) -> Result<AutoOutcome, AutoSkillError> {
        let name = skill.get("name").and_then(Value::as_str).unwrap_or_default().trim().to_owned();
        if !name.starts_with("auto/") {
            return Err(AutoSkillError::NotAuto { name: name.chars().take(80).collect() });
        }
        let candidate = Candidate::from_json(skill, session_key, false)?;
        if candidate.script.is_some() {
            return Err(AutoSkillError::Malformed {
                field: "script",
                reason: "is not accepted in a refinement (a script-bearing skill goes through review)".to_owned(),
            });
        }
        let dir = self.root().join(&candidate.slug);
        let file = dir.join("SKILL.md");
        if fs::symlink_metadata(&dir).is_ok_and(|metadata| metadata.file_type().is_symlink()) {
            return Err(AutoSkillError::Symlink { path: dir });
        }
        if !file.is_file() {
            return Err(AutoSkillError::NotFound { slug: candidate.slug });
        }
        let text = cairn_guard::safe_read_file_bounded(&file, MAX_SKILL_FILE_BYTES as u64).map_err(|error| {
            SkillsError::io("reading", &file, std::io::Error::new(std::io::ErrorKind::InvalidData, error.to_string()))
        })?;
        let parsed = Parsed::parse(&text, &file)?;
        if !parsed.is_generated() {
            return Err(AutoSkillError::NotAuto { name });
        }
        let now = self.clock.now_millis();
        let mut updates: Vec<(&str, Option<String>)> = Vec::new();
        if !candidate.description.is_empty() {
            updates.push(("description", Some(quoted(&candidate.description))));
        }
        if !candidate.triggers.is_empty() {
            updates.push(("triggers", Some(triggers_yaml(&candidate.triggers))));
        }
        if self.config.approval_required {
            // Staged beside new candidates; the live file is not touched.
            let pending = self.pending_dir().join(&candidate.slug);
            if fs::symlink_metadata(&pending).is_ok() {
                let is_update =
                    Parsed::read(&pending.join("SKILL.md")).is_ok_and(|staged| staged.text(REFINES_KEY).is_some());
                if !is_update {
                    return Err(AutoSkillError::Exists { slug: candidate.slug });
                }
                // A newer refinement of the same skill replaces the one waiting.
                fs::remove_dir_all(&pending).map_err(|source| SkillsError::io("removing", &pending, source))?;
            }
            updates.push((REFINES_KEY, Some(quoted(&name))));
            updates.push(("refined_by", Some(quoted(session_key))));
            updates.push(("staged_at", Some(rfc3339(now))));
            let staged = carry_forward(&text, &updates, Some(&candidate.procedure))?;
            self.ensure_dir(&self.pending_dir())?;
            write_skill_dir(&self.pending_dir(), &candidate.slug, &staged, None)?;
            return Ok(AutoOutcome::UpdateStaged { name });
        }
        updates.push(("refined_at", Some(rfc3339(now))));
        let rewritten = carry_forward(&text, &updates, Some(&candidate.procedure))?;
        self.keep_version(&candidate.slug, &text)?;
        atomic_write(&file, rewritten.as_bytes())?;
        Ok(AutoOutcome::Refined { name })
    }

    fn versions_dir(&self, slug: &str) -> PathBuf {
        self.root().join(VERSIONS_DIR).join(slug)
    }

    /// Saves `text` (the live `SKILL.md` about to be replaced) as
    /// `auto/.versions/<slug>/<millis>.md`, deleting the oldest beyond
    /// [`MAX_KEPT_VERSIONS`].
    fn keep_version(&self, slug: &str, text: &str) -> Result<(), AutoSkillError> {
        let dir = self.versions_dir(slug);
        self.ensure_dir(&dir)?;
        let mut stamp = self.clock.now_millis();
        while dir.join(format!("{stamp}.md")).exists() {
            stamp += 1;
        }
        atomic_write(&dir.join(format!("{stamp}.md")), text.as_bytes())?;
        let versions = self.versions(slug);
        for old in versions.iter().take(versions.len().saturating_sub(MAX_KEPT_VERSIONS)) {
            let path = dir.join(format!("{old}.md"));
            fs::remove_file(&path).map_err(|source| SkillsError::io("removing", &path, source))?;
        }
        Ok(())
    }

    /// The kept versions of `auto/<slug>` (Unix milliseconds they were
    /// replaced at, oldest first).
    pub fn versions(&self, slug: &str) -> Vec<u64> {
        let Ok(entries) = fs::read_dir(self.versions_dir(slug)) else { return Vec::new() };
        let mut stamps: Vec<u64> = entries
            .flatten()
            .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_file()))
            .filter_map(|entry| entry.file_name().to_str()?.strip_suffix(".md")?.parse().ok())
            .collect();
        stamps.sort_unstable();
        stamps
    }

    /// Puts the newest kept version of `auto/<slug>` back live; the file it
    /// replaces is kept as a version in turn (a second restore undoes the
    /// first). Returns the catalog name.
    pub fn restore(&self, slug: &str) -> Result<String, AutoSkillError> {
        let _write = self.write_lock.lock();
        let result = (|| {
            validate_slug(slug)?;
            let file = self.root().join(slug).join("SKILL.md");
            let live = self.read_live_generated(slug)?;
            let newest = *self.versions(slug).last().ok_or(AutoSkillError::NoVersion { slug: slug.to_owned() })?;
            let version = self.versions_dir(slug).join(format!("{newest}.md"));
            let text = cairn_guard::safe_read_file_bounded(&version, MAX_SKILL_FILE_BYTES as u64).map_err(|error| {
                SkillsError::io(
                    "reading",
                    &version,
                    std::io::Error::new(std::io::ErrorKind::InvalidData, error.to_string()),
                )
            })?;
            if !Parsed::parse(&text, &version)?.is_generated() {
                return Err(AutoSkillError::NotAuto { name: format!("{AUTO_DIR}/{slug}") });
            }
            fs::remove_file(&version).map_err(|source| SkillsError::io("removing", &version, source))?;
            self.keep_version(slug, &live)?;
            atomic_write(&file, text.as_bytes())?;
            Ok(format!("{AUTO_DIR}/{slug}"))
        })();
        let detail = match &result {
            Ok(_) => "restored the previous version".to_owned(),
            Err(error) => format!("{} ({error})", error.code()),
        };
        self.record(SkillAuditAction::AutoSkillRestore, slug, result.is_ok(), detail);
        result
    }

    /// The text of the live `auto/<slug>/SKILL.md`, refused when it is a
    /// link, missing, or not generated.
    fn read_live_generated(&self, slug: &str) -> Result<String, AutoSkillError> {
        let dir = self.root().join(slug);
        if fs::symlink_metadata(&dir).is_ok_and(|metadata| metadata.file_type().is_symlink()) {
            return Err(AutoSkillError::Symlink { path: dir });
        }
        let file = dir.join("SKILL.md");
        if !file.is_file() {
            return Err(AutoSkillError::NotFound { slug: slug.to_owned() });
        }
        let text = cairn_guard::safe_read_file_bounded(&file, MAX_SKILL_FILE_BYTES as u64).map_err(|error| {
            SkillsError::io("reading", &file, std::io::Error::new(std::io::ErrorKind::InvalidData, error.to_string()))
        })?;
        if !Parsed::parse(&text, &file)?.is_generated() {
            return Err(AutoSkillError::NotAuto { name: format!("{AUTO_DIR}/{slug}") });
        }
        Ok(text)
    }

    /// The live generated skills a conversation used, with their current
    /// procedures, for a refinement prompt: those whose name
    /// (`auto/<slug>`) or one of whose trigger phrases appears in
    /// `transcript` (case-insensitive), at most [`MAX_REFINABLE_SHOWN`].
    /// Bodies are redacted; one that trips the injection screen is left
    /// out (it is not shown to a model as its own procedure).
    pub fn refinable(&self, transcript: &str) -> Vec<RefinableSkill> {
        let lowered = transcript.to_lowercase();
        let mut out = Vec::new();
        for slug in self.live() {
            if out.len() >= MAX_REFINABLE_SHOWN {
                break;
            }
            let name = format!("{AUTO_DIR}/{slug}");
            let Ok(parsed) = Parsed::read(&self.root().join(&slug).join("SKILL.md")) else { continue };
            if !parsed.is_generated() {
                continue;
            }
            let used = lowered.contains(&name)
                || parsed.meta.triggers.iter().any(|trigger| {
                    let trigger = trigger.trim().to_lowercase();
                    !trigger.is_empty() && lowered.contains(&trigger)
                });
            if !used {
                continue;
            }
            let procedure = cairn_guard::redact_all(parsed.body.trim()).into_owned();
            if let Some(finding) = cairn_guard::screen(&procedure) {
                tracing::debug!(%name, rule = %finding.rule, "a live auto skill's body is not shown for refinement");
                continue;
            }
            out.push(RefinableSkill { name, procedure: procedure.chars().take(AUTO_MAX_PROCEDURE_CHARS).collect() });
        }
        out
    }

    /// Candidates waiting for review, by slug.
    pub fn pending(&self) -> Result<Vec<PendingSkill>, AutoSkillError> {
        let dir = self.pending_dir();
        let mut out = Vec::new();
        for slug in slugs_in(&dir) {
            match read_pending(&dir.join(&slug), &slug) {
                Ok(pending) => out.push(pending),
                Err(error) => tracing::warn!(%slug, %error, "skipping an unreadable pending auto skill"),
            }
        }
        Ok(out)
    }

    /// One pending candidate.
    pub fn pending_skill(&self, slug: &str) -> Result<PendingSkill, AutoSkillError> {
        validate_slug(slug)?;
        let dir = self.pending_dir().join(slug);
        if !dir.join("SKILL.md").is_file() {
            return Err(AutoSkillError::NotFound { slug: slug.to_owned() });
        }
        read_pending(&dir, slug)
    }

    /// Promotes a pending candidate to `auto/<slug>` (one rename), after
    /// validating its script again. Returns the catalog name.
    pub fn approve(&self, slug: &str) -> Result<String, AutoSkillError> {
        let _write = self.write_lock.lock();
        let result = self.approve_inner(slug);
        let detail = match &result {
            Ok(_) => "approved".to_owned(),
            Err(error) => format!("{} ({error})", error.code()),
        };
        self.record(SkillAuditAction::AutoSkillApprove, slug, result.is_ok(), detail);
        result
    }

    fn approve_inner(&self, slug: &str) -> Result<String, AutoSkillError> {
        let pending = self.pending_skill(slug)?;
        if !pending.unexpected_files.is_empty() {
            return Err(AutoSkillError::UnexpectedFiles { slug: slug.to_owned(), files: pending.unexpected_files });
        }
        if pending.kind == PendingKind::Update {
            return self.apply_update(slug, &pending);
        }
        if let Some(script) = &pending.script {
            validate_script(&self.config.python, script)?;
        }
        let target = self.root().join(slug);
        if fs::symlink_metadata(&target).is_ok() {
            return Err(AutoSkillError::Exists { slug: slug.to_owned() });
        }
        self.ensure_dir(&self.root())?;
        let from = self.pending_dir().join(slug);
        fs::rename(&from, &target).map_err(|source| SkillsError::io("renaming into place", &target, source))?;
        self.mark_live(slug, self.clock.now_millis())?;
        Ok(format!("{AUTO_DIR}/{slug}"))
    }

    /// Applies a reviewed refinement to the live skill as it is now (lines
    /// the lifecycle wrote since, such as `reuse_count`, stay), keeping the
    /// replaced file as a version.
    fn apply_update(&self, slug: &str, pending: &PendingSkill) -> Result<String, AutoSkillError> {
        let live = self.read_live_generated(slug)?;
        let current = Parsed::parse(&live, &self.root().join(slug).join("SKILL.md"))?.meta;
        // Only what the refinement changed is rewritten; other lines stay in place.
        let mut updates: Vec<(&str, Option<String>)> = Vec::new();
        if !pending.description.is_empty() && current.description.as_deref() != Some(pending.description.as_str()) {
            updates.push(("description", Some(quoted(&pending.description))));
        }
        if !pending.triggers.is_empty() && current.triggers != pending.triggers {
            updates.push(("triggers", Some(triggers_yaml(&pending.triggers))));
        }
        updates.push(("refined_at", Some(rfc3339(self.clock.now_millis()))));
        let rewritten = carry_forward(&live, &updates, Some(&pending.procedure))?;
        self.keep_version(slug, &live)?;
        atomic_write(&self.root().join(slug).join("SKILL.md"), rewritten.as_bytes())?;
        let from = self.pending_dir().join(slug);
        fs::remove_dir_all(&from).map_err(|source| SkillsError::io("removing", &from, source))?;
        Ok(format!("{AUTO_DIR}/{slug}"))
    }

    /// Deletes a pending candidate.
    pub fn reject(&self, slug: &str) -> Result<(), AutoSkillError> {
        let _write = self.write_lock.lock();
        let result = (|| -> Result<(), AutoSkillError> {
            self.pending_skill(slug)?;
            let dir = self.pending_dir().join(slug);
            fs::remove_dir_all(&dir).map_err(|source| SkillsError::io("removing", &dir, source))?;
            Ok(())
        })();
        let detail = match &result {
            Ok(()) => "rejected".to_owned(),
            Err(error) => format!("{} ({error})", error.code()),
        };
        self.record(SkillAuditAction::AutoSkillReject, slug, result.is_ok(), detail);
        result
    }

    /// Moves a live auto skill to `auto/.archived/<slug>` (not offered any
    /// more; an older archive of the same slug is replaced).
    pub fn archive(&self, slug: &str) -> Result<String, AutoSkillError> {
        let _write = self.write_lock.lock();
        self.archive_locked(slug, "archived on request")
    }

    fn archive_locked(&self, slug: &str, why: &str) -> Result<String, AutoSkillError> {
        let result = (|| {
            validate_slug(slug)?;
            let from = self.root().join(slug);
            if fs::symlink_metadata(&from).map_or(true, |metadata| !metadata.is_dir()) {
                return Err(AutoSkillError::NotFound { slug: slug.to_owned() });
            }
            self.ensure_dir(&self.archive_dir())?;
            let to = self.archive_dir().join(slug);
            if fs::symlink_metadata(&to).is_ok() {
                fs::remove_dir_all(&to).map_err(|source| SkillsError::io("removing", &to, source))?;
            }
            fs::rename(&from, &to).map_err(|source| SkillsError::io("archiving to", &to, source))?;
            self.forget(slug)?;
            Ok(format!("{AUTO_DIR}/{slug}"))
        })();
        let detail = match &result {
            Ok(_) => why.to_owned(),
            Err(error) => format!("{} ({error})", error.code()),
        };
        self.record(SkillAuditAction::AutoSkillArchive, slug, result.is_ok(), detail);
        result
    }

    /// Slugs of the live auto skills.
    pub fn live(&self) -> Vec<String> {
        slugs_in(&self.root())
    }

    /// Slugs of the archived auto skills.
    pub fn archived(&self) -> Vec<String> {
        slugs_in(&self.archive_dir())
    }
}

fn describe(outcome: &AutoOutcome) -> String {
    match outcome {
        AutoOutcome::Staged { slug } => format!("staged {AUTO_DIR}/{PENDING_DIR}/{slug} for review"),
        AutoOutcome::Live { name } => format!("{name} is live"),
        AutoOutcome::Refined { name } => format!("{name} refined (previous version kept)"),
        AutoOutcome::UpdateStaged { name } => format!("refinement of {name} staged for review"),
    }
}

fn triggers_yaml(triggers: &[String]) -> String {
    format!("[{}]", triggers.iter().map(|trigger| quoted(trigger)).collect::<Vec<_>>().join(", "))
}

/// The `SKILL.md` of a new candidate.
fn render(candidate: &Candidate, now_millis: u64) -> String {
    let mut text = String::from("---\n");
    text.push_str(&format!("name: {}\n", quoted(&format!("{AUTO_DIR}/{}", candidate.slug))));
    text.push_str(&format!("description: {}\n", quoted(&candidate.description)));
    if !candidate.triggers.is_empty() {
        text.push_str(&format!("triggers: {}\n", triggers_yaml(&candidate.triggers)));
    }
    text.push_str("source: auto\n");
    text.push_str(&format!("session_key: {}\n", quoted(&candidate.session_key)));
    text.push_str(&format!("created_at: {}\n", rfc3339(now_millis)));
    text.push_str("---\n");
    text.push_str(candidate.procedure.trim_end());
    text.push('\n');
    text
}

/// Writes `<parent>/<slug>/` whole: assembled under a hidden temporary name
/// and renamed into place.
fn write_skill_dir(parent: &Path, slug: &str, text: &str, script: Option<&str>) -> Result<(), AutoSkillError> {
    let staging = tempfile::Builder::new()
        .prefix(".cairn-new-")
        .tempdir_in(parent)
        .map_err(|source| SkillsError::io("creating a staging directory in", parent, source))?;
    atomic_write(&staging.path().join("SKILL.md"), text.as_bytes())?;
    if let Some(script) = script {
        let scripts = staging.path().join("scripts");
        fs::create_dir(&scripts).map_err(|source| SkillsError::io("creating", &scripts, source))?;
        atomic_write(&staging.path().join(SCRIPT_PATH), script.as_bytes())?;
    }
    let staged = staging.keep();
    let target = parent.join(slug);
    if let Err(source) = fs::rename(&staged, &target) {
        let _ = fs::remove_dir_all(&staged);
        return Err(SkillsError::io("renaming into place", &target, source).into());
    }
    Ok(())
}

/// Valid slugs of the skill directories (not links, not hidden) in `dir`, sorted.
pub(crate) fn slugs_in(dir: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir(dir) else { return Vec::new() };
    let mut slugs: Vec<String> = entries
        .flatten()
        .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_dir()))
        .filter_map(|entry| entry.file_name().to_str().map(str::to_owned))
        .filter(|name| validate_slug(name).is_ok() && dir.join(name).join("SKILL.md").is_file())
        .collect();
    slugs.sort();
    slugs
}

/// Most unexpected entries listed for one candidate.
const MAX_LISTED_UNEXPECTED: usize = 50;

/// The entries of a pending folder a review does not show: anything but a
/// regular `SKILL.md` and a `scripts` directory holding nothing but a
/// regular `helper.py`; links count whatever they point to.
fn unexpected_files(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut visit = |relative: String, expected: bool, path: &Path| {
        let is_dir = fs::symlink_metadata(path).is_ok_and(|metadata| metadata.file_type().is_dir());
        if !expected && found.len() < MAX_LISTED_UNEXPECTED {
            // Shown to a reviewer: a name's control characters are escaped.
            let shown = relative.escape_debug().to_string();
            found.push(if is_dir { format!("{shown}/") } else { shown });
        }
    };
    let entries = |dir: &Path| -> Vec<(String, PathBuf)> {
        let Ok(entries) = fs::read_dir(dir) else { return Vec::new() };
        let mut names: Vec<(String, PathBuf)> =
            entries.flatten().map(|entry| (entry.file_name().to_string_lossy().into_owned(), entry.path())).collect();
        names.sort();
        names
    };
    let regular = |path: &Path| fs::symlink_metadata(path).is_ok_and(|metadata| metadata.file_type().is_file());
    for (name, path) in entries(dir) {
        match name.as_str() {
            "SKILL.md" => visit(name, regular(&path), &path),
            "scripts" if fs::symlink_metadata(&path).is_ok_and(|metadata| metadata.file_type().is_dir()) => {
                for (inner, inner_path) in entries(&path) {
                    let expected = inner == "helper.py" && regular(&inner_path);
                    visit(format!("scripts/{inner}"), expected, &inner_path);
                }
            }
            _ => visit(name, false, &path),
        }
    }
    found
}

fn read_pending(dir: &Path, slug: &str) -> Result<PendingSkill, AutoSkillError> {
    let parsed = Parsed::read(&dir.join("SKILL.md"))?;
    let script_path = dir.join(SCRIPT_PATH);
    let script = if script_path.exists() {
        Some(cairn_guard::safe_read_file_bounded(&script_path, AUTO_MAX_SCRIPT_BYTES as u64 + 1).map_err(|error| {
            SkillsError::io(
                "reading",
                &script_path,
                std::io::Error::new(std::io::ErrorKind::InvalidData, error.to_string()),
            )
        })?)
    } else {
        None
    };
    let update = parsed.text(REFINES_KEY).is_some();
    let (session_key, created_at, current_procedure) = if update {
        // The live skill's body, for the reviewer to compare.
        let live = dir.parent().and_then(Path::parent).map(|root| root.join(slug).join("SKILL.md"));
        let current = live.and_then(|file| Parsed::read(&file).ok()).map(|live| live.body.trim().to_owned());
        (parsed.text("refined_by"), parsed.text("staged_at"), current)
    } else {
        (parsed.text("session_key"), parsed.text("created_at"), None)
    };
    Ok(PendingSkill {
        slug: slug.to_owned(),
        name: format!("{AUTO_DIR}/{slug}"),
        kind: if update { PendingKind::Update } else { PendingKind::New },
        description: parsed.meta.description.clone().unwrap_or_default(),
        triggers: parsed.meta.triggers.clone(),
        session_key: session_key.unwrap_or_default(),
        created_at: created_at.unwrap_or_default(),
        has_script: script.is_some(),
        unexpected_files: unexpected_files(dir),
        procedure: parsed.body.trim().to_owned(),
        script,
        current_procedure,
    })
}

#[cfg(test)]
mod tests;
