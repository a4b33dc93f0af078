//! Errors of the skills crate.

use std::path::PathBuf;

/// What went wrong while loading, matching or editing skills.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SkillsError {
    /// A skill name is empty, absolute, or walks out of its root.
    #[error("invalid skill name {name:?}: {reason}")]
    InvalidName {
        /// The name as given.
        name: String,
        /// Which rule it broke.
        reason: &'static str,
    },
    /// No skill of that name is in the catalog (or in the owned directory,
    /// for edits).
    #[error("no skill named {name:?}")]
    NotFound {
        /// The name looked up.
        name: String,
    },
    /// `create` was asked for a skill inside another skill's directory,
    /// where the catalog never looks (discovery stops at a skill).
    #[error("cannot create skill {name:?} inside skill {skill:?}: the catalog does not look inside a skill")]
    InsideSkill {
        /// The name asked for.
        name: String,
        /// The skill whose directory holds it.
        skill: String,
    },
    /// `create` found a skill directory of that name already there.
    #[error("skill {name:?} already exists")]
    AlreadyExists {
        /// The name asked for.
        name: String,
    },
    /// The skill's file or directory resolves outside the directory the
    /// catalog owns, so the catalog will not write to it.
    #[error("refusing to modify skill {name:?}: {path} is outside the catalog's own skills directory")]
    NotOwned {
        /// The skill name.
        name: String,
        /// The resolved path that fell outside.
        path: PathBuf,
    },
    /// The owned skills directory (or a skill directory) is a symbolic link;
    /// writing through it could land anywhere.
    #[error("refusing to write through symbolic link {path}")]
    Symlink {
        /// The link.
        path: PathBuf,
    },
    /// The skill has no frontmatter block to edit.
    #[error("skill {name:?} has no frontmatter block to edit")]
    NoFrontmatter {
        /// The skill name.
        name: String,
    },
    /// The skill's frontmatter (existing or proposed) does not parse.
    #[error("skill {name:?} has malformed frontmatter: {reason}")]
    MalformedFrontmatter {
        /// The skill name.
        name: String,
        /// The parser's explanation.
        reason: String,
    },
    /// A line-level frontmatter edit could not express the change (for
    /// example a flow-style `metadata: {...}` map); nothing was written.
    #[error("cannot apply edit to skill {name:?}: {reason}")]
    EditNotApplied {
        /// The skill name.
        name: String,
        /// Why.
        reason: String,
    },
    /// Proposed content is larger than the write-time cap.
    #[error("skill {name:?} is {bytes} bytes, above the {max}-byte limit")]
    TooLarge {
        /// The skill name.
        name: String,
        /// Size of the proposed content.
        bytes: usize,
        /// The cap ([`crate::constants::MAX_SKILL_FILE_BYTES`]).
        max: usize,
    },
    /// Proposed content carries credentials; skills reach prompts, so they
    /// are refused rather than stored.
    #[error("skill {name:?} contains credentials ({rules}); remove them before saving")]
    Credentials {
        /// The skill name.
        name: String,
        /// Comma-separated rule names that matched.
        rules: String,
    },
    /// A filesystem operation failed.
    #[error("{action} {path}")]
    Io {
        /// What was being done (`reading`, `writing`, ...).
        action: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The usage ledger could not be encoded.
    #[error("encoding the usage ledger for {path}")]
    Ledger {
        /// The ledger file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },
}

/// Result alias of this crate.
pub type Result<T, E = SkillsError> = std::result::Result<T, E>;

impl SkillsError {
    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io { action, path: path.into(), source }
    }

    /// A failed shared file helper, as the I/O error it wraps.
    pub(crate) fn files(error: cairn_files::FilesError) -> Self {
        let (action, path, source) = error.into_parts();
        Self::Io { action, path, source }
    }
}
