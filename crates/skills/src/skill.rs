//! One skill as the catalog loaded it, where it came from, and its texts
//! after the guard's screen.

use std::path::PathBuf;
use std::sync::OnceLock;

use serde::Serialize;

use crate::frontmatter::SkillMeta;

/// Where a skill was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SkillSource {
    /// The project's `skills/` directory (wins over everything).
    Project,
    /// The Cairn home's `skills/` directory, which the catalog owns and
    /// writes; bundled skills live here once copied.
    Home,
    /// The bundled skills directory, for bundled skills not copied yet.
    Builtin,
    /// A configured extra path (read, never written).
    Extra,
}

/// Text after the guard screen: what may reach a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Screened {
    /// Credentials and exfiltration URLs redacted; no injection found.
    Clean(String),
    /// The injection screen fired; the text must not reach a prompt.
    Withheld(&'static str),
}

impl Screened {
    fn of(text: &str) -> Self {
        if let Some(finding) = cairn_guard::screen(text) {
            return Self::Withheld(finding.rule);
        }
        Self::Clean(cairn_guard::redact_all(text).into_owned())
    }
}

/// One loaded skill.
#[derive(Debug)]
pub struct Skill {
    /// SkillCatalog name: the directory path relative to its root.
    pub name: String,
    /// The root it came from.
    pub source: SkillSource,
    /// The skill directory.
    pub dir: PathBuf,
    /// Its `SKILL.md`.
    pub path: PathBuf,
    /// Frontmatter fields.
    pub meta: SkillMeta,
    /// Size of `SKILL.md` in bytes.
    pub size_bytes: u64,
    /// Modification time of `SKILL.md`, seconds since the Unix epoch.
    pub modified_secs: u64,
    /// Why the frontmatter could not be read, when it could not.
    pub warning: Option<String>,
    pub(crate) text: String,
    pub(crate) body_start: usize,
    pub(crate) stamp: (u64, u64),
    pub(crate) screened_body: OnceLock<Screened>,
    pub(crate) screened_description: OnceLock<Screened>,
}

impl Skill {
    /// The Markdown after the frontmatter (the whole file when there is none).
    pub fn body(&self) -> &str {
        &self.text[self.body_start..]
    }

    /// The whole `SKILL.md` text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The description, or an empty string.
    pub fn description(&self) -> &str {
        self.meta.description.as_deref().unwrap_or("")
    }

    /// Whether the catalog may write this skill (a path check, no syscall;
    /// the write path re-checks the resolved path).
    pub fn owned(&self) -> bool {
        self.source == SkillSource::Home
    }

    pub(crate) fn screened_body(&self) -> &Screened {
        self.screened_body.get_or_init(|| Screened::of(self.body().trim()))
    }

    pub(crate) fn screened_description(&self) -> &Screened {
        self.screened_description.get_or_init(|| Screened::of(&crate::text::one_line(self.description())))
    }
}
