//! Where a row belongs ([`Scope`]) and which rows a read sees
//! ([`ScopeFilter`]).
//!
//! A row is either `global` (about the user: seen from every project) or
//! belongs to one project. A project is named by the directory the host
//! runs in: inside a git repository, the repository's common directory,
//! so every linked worktree of one repository is one project (or, with
//! [`ProjectRule::Worktree`], each worktree its own); outside git, the
//! directory itself. Its stored name is `<folder name>-<8 hex digits of
//! the path's SHA-256>`: readable, and two folders with one name apart.
//!
//! Which layer takes which scope by default (written down in
//! ARCHITECTURE.md): an episode and a transcript belong to the session's
//! project; a fact under `project.` belongs to the writer's project, every
//! other fact (`pref.`, `user.`, …) and every lesson is global. A reader
//! sees its project and `global` ([`ScopeFilter::Visible`]); reading across
//! projects is [`ScopeFilter::All`], asked for explicitly.
//!
//! Semantic rows are identified by key *and* scope: a project fact's stored
//! key is `<key>@<project>` (a key never holds `@`), so two projects each
//! keep their own `project.build_cmd`, and a global row's stored key is
//! the key itself (homes written before scopes existed are global as
//! they are).

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The stored name of the global scope.
pub const GLOBAL_SCOPE: &str = "global";
/// The key prefix whose facts belong to the writer's project.
pub const PROJECT_KEY_PREFIX: &str = "project.";
/// Separates a semantic key from its project in the stored key.
const SCOPE_SEPARATOR: char = '@';
/// Most characters of the folder name kept in a project's name.
const MAX_NAME_CHARS: usize = 40;

/// Where a row belongs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Scope {
    /// Seen from every project.
    #[default]
    Global,
    /// One project, by its stored name.
    Project(String),
}

impl Scope {
    /// The scope stored as `text`; `None` for a name no project can have.
    pub fn parse(text: &str) -> Option<Scope> {
        if text == GLOBAL_SCOPE {
            return Some(Scope::Global);
        }
        let valid = !text.is_empty()
            && text.len() <= MAX_NAME_CHARS + 9
            && text
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_' || b == b'.');
        valid.then(|| Scope::Project(text.to_owned()))
    }

    /// The stored name.
    pub fn as_str(&self) -> &str {
        match self {
            Scope::Global => GLOBAL_SCOPE,
            Scope::Project(name) => name,
        }
    }

    /// Whether this is the global scope.
    pub fn is_global(&self) -> bool {
        *self == Scope::Global
    }

    /// The project's name, `None` for global.
    pub fn project(&self) -> Option<&str> {
        match self {
            Scope::Global => None,
            Scope::Project(name) => Some(name),
        }
    }

    /// The scope a fact under `key` takes when written from `project`:
    /// the project for a `project.` key, global otherwise.
    pub fn for_fact(key: &str, project: Option<&Scope>) -> Scope {
        match project {
            Some(scope @ Scope::Project(_)) if key.starts_with(PROJECT_KEY_PREFIX) => scope.clone(),
            _ => Scope::Global,
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Scope {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Scope {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Scope::parse(&text).ok_or_else(|| serde::de::Error::custom(format!("{text:?} is not a scope")))
    }
}

/// Which rows a read sees.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ScopeFilter {
    /// Every scope: a read across projects, asked for explicitly.
    #[default]
    All,
    /// `global` and, when given, one project.
    Visible(Option<Scope>),
    /// Exactly one scope (the dashboard's and the CLI's filter).
    Only(Scope),
}

impl ScopeFilter {
    /// What a reader in `project` sees: its project and `global`.
    pub fn visible_from(project: Option<&Scope>) -> ScopeFilter {
        ScopeFilter::Visible(project.filter(|scope| **scope != Scope::Global).cloned())
    }

    /// Whether a row in `scope` (its stored name) is seen.
    pub fn admits(&self, scope: &str) -> bool {
        match self {
            ScopeFilter::All => true,
            ScopeFilter::Visible(project) => {
                scope == GLOBAL_SCOPE || project.as_ref().is_some_and(|project| project.as_str() == scope)
            }
            ScopeFilter::Only(only) => only.as_str() == scope,
        }
    }

    /// Whether the filter may leave rows out (a search then widens its pool).
    pub fn narrows(&self) -> bool {
        !matches!(self, ScopeFilter::All)
    }
}

/// The key a semantic row of `key` in `scope` is stored under.
pub(crate) fn stored_key(key: &str, scope: &Scope) -> String {
    match scope {
        Scope::Global => key.to_owned(),
        Scope::Project(project) => format!("{key}{SCOPE_SEPARATOR}{project}"),
    }
}

/// A stored semantic key split into the key and its scope.
pub(crate) fn split_stored_key(stored: &str) -> (&str, Scope) {
    match stored.split_once(SCOPE_SEPARATOR) {
        Some((key, project)) => (key, Scope::Project(project.to_owned())),
        None => (stored, Scope::Global),
    }
}

/// The scope name of a stored semantic key.
pub(crate) fn stored_key_scope(stored: &str) -> &str {
    stored.split_once(SCOPE_SEPARATOR).map_or(GLOBAL_SCOPE, |(_, project)| project)
}

/// How worktrees of one repository map to projects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProjectRule {
    /// Linked worktrees of one repository share one project.
    #[default]
    Repository,
    /// Each worktree is its own project.
    Worktree,
}

/// The project of a host running in `dir` (see the module docs); `None`
/// when `dir` is empty or not absolute (no project can be named).
pub fn project_of(dir: &Path, rule: ProjectRule) -> Option<Scope> {
    if dir.as_os_str().is_empty() || !dir.is_absolute() {
        return None;
    }
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let root = git_project_root(&dir, rule).unwrap_or(dir);
    Some(project_named(&root))
}

/// The project scope of the directory `root`, as named (no git lookup).
pub fn project_named(root: &Path) -> Scope {
    let digest = Sha256::digest(root.to_string_lossy().as_bytes());
    let hex: String = digest[..4].iter().map(|byte| format!("{byte:02x}")).collect();
    let folder = root.file_name().map(|name| name.to_string_lossy().to_lowercase()).unwrap_or_default();
    let mut name: String = folder
        .chars()
        .map(|c| if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '.' { c } else { '-' })
        .take(MAX_NAME_CHARS)
        .collect();
    name = name.trim_matches('-').to_owned();
    if name.is_empty() || name == GLOBAL_SCOPE {
        name = "project".to_owned();
    }
    Scope::Project(format!("{name}-{hex}"))
}

/// The directory naming the repository (or worktree) `dir` is in: the
/// folder holding the common `.git` directory, found by reading `.git`
/// entries upwards (no `git` process: a hook cannot wait for one).
fn git_project_root(dir: &Path, rule: ProjectRule) -> Option<PathBuf> {
    for candidate in dir.ancestors() {
        let dot_git = candidate.join(".git");
        let Ok(meta) = std::fs::symlink_metadata(&dot_git) else { continue };
        if meta.is_dir() {
            return Some(candidate.to_path_buf());
        }
        if !meta.is_file() {
            return None;
        }
        if rule == ProjectRule::Worktree {
            return Some(candidate.to_path_buf());
        }
        // A linked worktree: `.git` is `gitdir: <repo>/.git/worktrees/<name>`,
        // whose `commondir` names the repository's `.git`.
        let text = std::fs::read_to_string(&dot_git).ok()?;
        let gitdir = text.lines().find_map(|line| line.strip_prefix("gitdir:"))?.trim();
        let gitdir = candidate.join(gitdir);
        let common = match std::fs::read_to_string(gitdir.join("commondir")) {
            Ok(common) => gitdir.join(common.trim()),
            Err(_) => return Some(candidate.to_path_buf()),
        };
        let common = common.canonicalize().ok()?;
        return Some(match common.file_name() {
            Some(name) if name == ".git" => common.parent()?.to_path_buf(),
            _ => common,
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_keys_round_trip_and_global_keys_are_unchanged() {
        let project = Scope::Project("cairn-0a1b2c3d".into());
        for (key, scope, stored) in [
            ("pref.editor", Scope::Global, "pref.editor"),
            ("project.build_cmd", project.clone(), "project.build_cmd@cairn-0a1b2c3d"),
        ] {
            assert_eq!(stored_key(key, &scope), stored);
            assert_eq!(split_stored_key(stored), (key, scope.clone()));
            assert_eq!(stored_key_scope(stored), scope.as_str());
        }
    }

    #[test]
    fn facts_take_the_project_only_under_the_project_prefix() {
        let project = Scope::Project("a-00000000".into());
        for (key, expected) in [
            ("project.build_cmd", project.clone()),
            ("pref.editor", Scope::Global),
            ("user.name", Scope::Global),
            ("lesson.x", Scope::Global),
        ] {
            assert_eq!(Scope::for_fact(key, Some(&project)), expected, "{key}");
            assert_eq!(Scope::for_fact(key, None), Scope::Global, "{key}");
        }
    }

    #[test]
    fn filters_admit_what_they_name() {
        let a = Scope::Project("a-00000000".into());
        let visible = ScopeFilter::visible_from(Some(&a));
        for (filter, scope, admitted) in [
            (&visible, "global", true),
            (&visible, "a-00000000", true),
            (&visible, "b-00000000", false),
            (&ScopeFilter::Visible(None), "a-00000000", false),
            (&ScopeFilter::Visible(None), "global", true),
            (&ScopeFilter::All, "b-00000000", true),
            (&ScopeFilter::Only(a.clone()), "global", false),
        ] {
            assert_eq!(filter.admits(scope), admitted, "{filter:?} {scope}");
        }
    }

    #[test]
    fn scope_names_are_parsed_strictly() {
        assert_eq!(Scope::parse("global"), Some(Scope::Global));
        assert_eq!(Scope::parse("cairn-0a1b2c3d"), Some(Scope::Project("cairn-0a1b2c3d".into())));
        for bad in ["", "A-b", "x@y", "a b", "../x", &"x".repeat(60)] {
            assert_eq!(Scope::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn linked_worktrees_share_their_repository_unless_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        let tree = dir.path().join("tree");
        std::fs::create_dir_all(repo.join(".git/worktrees/tree")).unwrap();
        std::fs::create_dir_all(repo.join("src/deep")).unwrap();
        std::fs::create_dir_all(&tree).unwrap();
        std::fs::write(repo.join(".git/worktrees/tree/commondir"), "../..\n").unwrap();
        std::fs::write(tree.join(".git"), format!("gitdir: {}\n", repo.join(".git/worktrees/tree").display())).unwrap();
        let other = dir.path().join("other");
        std::fs::create_dir_all(&other).unwrap();

        let of = |path: &Path, rule| project_of(path, rule).unwrap();
        let repo_scope = of(&repo, ProjectRule::Repository);
        assert_eq!(of(&repo.join("src/deep"), ProjectRule::Repository), repo_scope);
        assert_eq!(of(&tree, ProjectRule::Repository), repo_scope);
        assert_ne!(of(&tree, ProjectRule::Worktree), repo_scope);
        assert_ne!(of(&other, ProjectRule::Repository), repo_scope);
        assert!(repo_scope.as_str().starts_with("repo-"), "{repo_scope}");
        assert_eq!(project_of(Path::new("relative"), ProjectRule::Repository), None);
    }
}
