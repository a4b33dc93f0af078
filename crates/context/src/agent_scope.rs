//! What an agent's context may carry: the skills its `skill://` mapping
//! names, steering only where the backend reads it, triggered skills only
//! for messages that are not a custom agent's.

use std::path::Path;

use globset::{GlobBuilder, GlobMatcher};
use serde::Serialize;

/// The scope of one agent's context. The default is the unscoped default
/// agent: every skill, steering read, triggers on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AgentScope {
    /// A custom agent (one resolved from a spec): its skill catalog is its
    /// `skill://` mapping alone, and its messages run no skill triggers.
    pub custom: bool,
    /// The mapping, as path globs (see `cairn_agent_spec::skill_globs`).
    pub skill_globs: Vec<String>,
    /// The backend does not read the spec's steering: none is injected.
    pub steering_withheld: bool,
}

fn matcher(glob: &str) -> Option<GlobMatcher> {
    GlobBuilder::new(glob).literal_separator(false).build().ok().map(|glob| glob.compile_matcher())
}

impl AgentScope {
    /// The scope of a custom agent with this mapping.
    pub fn custom(skill_globs: Vec<String>) -> Self {
        Self { custom: true, skill_globs, steering_withheld: false }
    }

    /// Whether the skill whose `SKILL.md` is `path` in directory `dir` is
    /// in this agent's catalog: always for the default agent; for a custom
    /// one, when a mapping glob matches the file or the directory, or names
    /// a directory the skill lies under. An unmapped custom agent gets none.
    pub fn allows_skill(&self, path: &Path, dir: &Path) -> bool {
        if !self.custom {
            return true;
        }
        self.skill_globs.iter().any(|glob| {
            let literal = !glob.contains(['*', '?', '[', '{']);
            (literal && (dir.starts_with(glob) || path == Path::new(glob)))
                || matcher(glob).is_some_and(|matcher| matcher.is_match(path) || matcher.is_match(dir))
        })
    }

    /// Whether a message's skill triggers run.
    pub fn runs_triggers(&self) -> bool {
        !self.custom
    }
}
