//! Where a spec's `resources` lead on disk: the `skill://` entries as glob
//! patterns over real paths, and the steering files its `file://` entries
//! and kiro-cli's inherited defaults load.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use globset::GlobBuilder;
use serde::Serialize;

use crate::constants::{STEERING_MAX_DEPTH, STEERING_MAX_FILES};
use crate::context::{ResolveContext, lexical_normalize, uri_path_text};
use crate::resources::Resource;
use crate::spec::AgentSpec;

/// Turns the spec's `skill://` entries into glob patterns over real paths,
/// in spec order: `~/...` against the home, an absolute path verbatim, and
/// anything else relative to the session's project directory or, with none
/// given, three levels above the spec file (`<project>/.kiro/agents/x.json`
/// → `<project>`). An entry that cannot be anchored is left out.
pub fn skill_globs(spec: &AgentSpec, context: &ResolveContext) -> Vec<String> {
    let fallback_root = spec.path().and_then(Path::parent).and_then(Path::parent).and_then(Path::parent);
    spec.resources()
        .iter()
        .filter_map(|resource| match resource {
            Resource::Skill { uri } => Some(uri),
            _ => None,
        })
        .filter_map(|uri| {
            let text = uri_path_text(&uri["skill://".len()..]);
            let expanded = if text == "~" {
                context.home.clone()
            } else if let Some(rest) = text.strip_prefix("~/") {
                context.home.as_ref().map(|home| home.join(rest))
            } else if Path::new(text).is_absolute() || crate::context::is_drive_path(text) {
                Some(PathBuf::from(text))
            } else {
                context.project_dir.as_deref().or(fallback_root).map(|root| root.join(text))
            };
            if expanded.is_none() {
                tracing::debug!(uri, "skill resource cannot be anchored");
            }
            expanded.map(|path| lexical_normalize(&path).to_string_lossy().into_owned())
        })
        .collect()
}

/// The steering files a spec loads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Steering {
    /// Admitted files, in entry order, each once.
    pub files: Vec<PathBuf>,
    /// Why matched files were left out, and entries that matched nothing.
    pub notices: Vec<String>,
}

struct SteeringEntry {
    label: String,
    pattern: PathBuf,
    anchor: PathBuf,
}

/// Resolves the spec's `file://` entries plus kiro-cli's inherited
/// defaults (global steering, the project's steering and `AGENTS.md`).
/// A relative entry anchors at the session's project (or the home with no
/// project), `~/` at the home, an absolute one at its glob-free prefix.
/// Only `*.md` files that stay under their entry's anchor (symlinks
/// followed) and are not sensitive are admitted.
pub fn steering_files(spec: &AgentSpec, context: &ResolveContext) -> Steering {
    let mut entries = Vec::new();
    let mut steering = Steering::default();
    for resource in spec.resources() {
        let Resource::File { uri } = resource else { continue };
        let text = uri_path_text(&uri["file://".len()..]);
        let entry = if let Some(rest) = text.strip_prefix("~/") {
            context.home.as_ref().map(|home| (home.join(rest), home.clone()))
        } else if Path::new(text).is_absolute() || crate::context::is_drive_path(text) {
            let pattern = lexical_normalize(Path::new(text));
            let anchor = glob_free_prefix(&pattern);
            Some((pattern, anchor))
        } else {
            context.project_dir.as_ref().or(context.home.as_ref()).map(|root| (root.join(text), root.clone()))
        };
        match entry {
            Some((pattern, anchor)) => entries.push(SteeringEntry { label: uri.clone(), pattern, anchor }),
            None => steering.notices.push(format!("{uri}: no home or project directory to anchor it")),
        }
    }
    if context.inherit_default_resources {
        if let Some(home) = &context.home {
            let anchor = home.join(".kiro/steering");
            entries.push(SteeringEntry { label: "global steering".into(), pattern: anchor.join("**/*.md"), anchor });
        }
        if let Some(project) = &context.project_dir {
            let anchor = project.join(".kiro/steering");
            entries.push(SteeringEntry { label: "project steering".into(), pattern: anchor.join("**/*.md"), anchor });
            entries.push(SteeringEntry {
                label: "project AGENTS.md".into(),
                pattern: project.join("AGENTS.md"),
                anchor: project.clone(),
            });
        }
    }
    let mut seen = BTreeSet::new();
    for entry in &entries {
        admit_entry(entry, context, &mut steering, &mut seen);
    }
    steering
}

fn admit_entry(entry: &SteeringEntry, context: &ResolveContext, steering: &mut Steering, seen: &mut BTreeSet<PathBuf>) {
    let pattern = lexical_normalize(&entry.pattern);
    let pattern_text = pattern.to_string_lossy();
    if lexical_normalize(&pattern).strip_prefix(lexical_normalize(&entry.anchor)).is_err() {
        steering.notices.push(format!("{}: leaves its anchor {}, skipped", entry.label, entry.anchor.display()));
        return;
    }
    let Ok(glob) = GlobBuilder::new(&pattern_text).literal_separator(true).build() else {
        steering.notices.push(format!("{}: not a valid glob, skipped", entry.label));
        return;
    };
    let matcher = glob.compile_matcher();
    let walk_root = glob_free_prefix(&pattern);
    let Ok(anchor) = entry.anchor.canonicalize() else {
        return;
    };
    let mut matched = 0usize;
    for item in walkdir::WalkDir::new(&walk_root).follow_links(true).max_depth(STEERING_MAX_DEPTH).sort_by_file_name() {
        let Ok(item) = item else { continue };
        if !item.file_type().is_file() || !matcher.is_match(item.path()) {
            continue;
        }
        matched += 1;
        let shown = item.path().display();
        if item.path().extension().is_none_or(|extension| extension != "md") {
            steering.notices.push(format!("{}: {shown} is not a .md file, skipped", entry.label));
            continue;
        }
        let Ok(real) = item.path().canonicalize() else { continue };
        if !real.starts_with(&anchor) {
            steering.notices.push(format!("{}: {shown} resolves outside {}, skipped", entry.label, anchor.display()));
            continue;
        }
        if context.sensitive.is_sensitive(item.path()) {
            steering.notices.push(format!("{}: {shown} is a sensitive location, skipped", entry.label));
            continue;
        }
        if !seen.insert(real.clone()) {
            continue;
        }
        if steering.files.len() >= STEERING_MAX_FILES {
            steering.notices.push(format!("more than {STEERING_MAX_FILES} steering files; the rest are skipped"));
            return;
        }
        tracing::debug!(file = %real.display(), entry = %entry.label, "steering file admitted");
        steering.files.push(item.path().to_path_buf());
    }
    if matched == 0 && !entry.label.starts_with("global") && !entry.label.starts_with("project") {
        steering.notices.push(format!("{}: matched no file", entry.label));
    }
}

/// The longest leading part of `pattern` with no glob character; for a
/// pattern without any, the pattern itself.
fn glob_free_prefix(pattern: &Path) -> PathBuf {
    let mut prefix = PathBuf::new();
    for component in pattern.components() {
        let text = component.as_os_str().to_string_lossy();
        if text.contains(['*', '?', '[', '{']) {
            break;
        }
        prefix.push(component.as_os_str());
    }
    prefix
}
