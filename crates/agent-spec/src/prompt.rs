//! Prompt resolution: literal text, or a `file://` URI read through the
//! guard, with the containment rules for specs from a project checkout.

use std::path::{Path, PathBuf};

use cairn_guard::GuardError;
use serde::Serialize;

use crate::context::{ResolveContext, is_drive_path, lexical_normalize, uri_path_text};
use crate::discovery::Scope;
use crate::error::{AgentSpecError, Result};
use crate::spec::{AgentSpec, PromptField};

/// Where the resolved prompt text came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum PromptSource {
    /// The spec sets no prompt.
    None,
    /// Text written in the spec.
    Inline {
        /// Which field held it.
        field: PromptField,
    },
    /// A `file://` URI.
    File {
        /// Which field held the URI.
        field: PromptField,
        /// The URI as written.
        uri: String,
        /// The resolved path, when resolution got that far.
        path: Option<PathBuf>,
    },
}

/// The prompt an agent runs with. A prompt file that is missing,
/// unreadable or empty is not a refusal: the text is empty and a notice
/// names the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResolvedPrompt {
    /// The prompt text (credentials redacted); empty when none.
    pub text: String,
    /// Where it came from.
    pub source: PromptSource,
    /// What the user should know (unread file, redactions, screen hits).
    pub notices: Vec<String>,
}

/// Resolves the spec's prompt.
///
/// A relative `file://` path is anchored at the spec's agents directory
/// (`..` allowed) after `$VAR` / `${VAR}` expansion from
/// [`ResolveContext::env`]; absolute, `~` and `file:///C:/...` paths are
/// accepted. The resolved path (symlinks followed) must not be sensitive.
/// A spec from a project checkout ([`Scope::Project`]) is untrusted: its
/// prompt must be a relative path that stays inside its agents directory,
/// and a leading `$` counts as rooted.
///
/// # Errors
///
/// [`AgentSpecError::SensitivePrompt`] and
/// [`AgentSpecError::UntrustedPrompt`]; everything else degrades to an
/// empty prompt with a notice.
pub fn resolve_prompt(spec: &AgentSpec, scope: Scope, context: &ResolveContext) -> Result<ResolvedPrompt> {
    let _span = tracing::debug_span!("resolve_prompt", spec = ?spec.path()).entered();
    let Some(prompt) = spec.prompt() else {
        return Ok(ResolvedPrompt { text: String::new(), source: PromptSource::None, notices: Vec::new() });
    };
    let Some(rest) = prompt.file_uri_path() else {
        let mut resolved = ResolvedPrompt {
            text: String::new(),
            source: PromptSource::Inline { field: prompt.field },
            notices: Vec::new(),
        };
        screen_into(&mut resolved, prompt.text, scope, "the inline prompt");
        return Ok(resolved);
    };
    let uri = prompt.text.trim().to_owned();
    let spec_path = spec.path().map(Path::to_path_buf).unwrap_or_default();
    let mut resolved = ResolvedPrompt {
        text: String::new(),
        source: PromptSource::File { field: prompt.field, uri: uri.clone(), path: None },
        notices: Vec::new(),
    };
    let text = uri_path_text(rest);
    if text.trim().is_empty() {
        resolved.notices.push(format!("prompt `{uri}` names no file; the agent runs with an empty prompt"));
        return Ok(resolved);
    }
    let agents_dir = spec.path().and_then(Path::parent).map(Path::to_path_buf);
    let path = match scope {
        Scope::Project => project_prompt_path(text, agents_dir, &spec_path, &uri)?,
        Scope::User => match user_prompt_path(text, agents_dir.as_deref(), context, &uri) {
            Ok(path) => path,
            Err(notice) => {
                resolved.notices.push(notice);
                return Ok(resolved);
            }
        },
    };
    if let PromptSource::File { path: slot, .. } = &mut resolved.source {
        *slot = Some(path.clone());
    }
    let sensitive = |reason| AgentSpecError::SensitivePrompt { spec: spec_path.clone(), path: path.clone(), reason };
    match context.sensitive.classify(&path) {
        Ok(Some(reason)) => return Err(sensitive(reason)),
        Ok(None) => {}
        Err(_) => return Err(sensitive("the path cannot be resolved")),
    }
    match context.sensitive.read_to_string(&path) {
        Ok(content) if content.trim().is_empty() => {
            resolved
                .notices
                .push(format!("prompt file {} is empty; the agent runs with an empty prompt", path.display()));
        }
        Ok(content) => {
            tracing::debug!(path = %path.display(), bytes = content.len(), "prompt file read");
            screen_into(&mut resolved, &content, scope, &format!("prompt file {}", path.display()));
        }
        Err(GuardError::SensitivePath { reason, .. }) => return Err(sensitive(reason)),
        Err(error) => {
            let why = match &error {
                GuardError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                    "does not exist".to_owned()
                }
                GuardError::Io { source, .. } => format!("cannot be read ({source})"),
                GuardError::NotUtf8 { .. } => "is not UTF-8 text".to_owned(),
                other => format!("cannot be read ({other})"),
            };
            tracing::debug!(path = %path.display(), %why, "prompt file unread");
            resolved.notices.push(format!("prompt file {} {why}; the agent runs with an empty prompt", path.display()));
        }
    }
    Ok(resolved)
}

/// A project spec's prompt file: a path relative to its agents directory
/// that stays inside it, symlinks resolved.
fn project_prompt_path(text: &str, agents_dir: Option<PathBuf>, spec_path: &Path, uri: &str) -> Result<PathBuf> {
    let untrusted =
        |reason| AgentSpecError::UntrustedPrompt { spec: spec_path.to_owned(), uri: uri.to_owned(), reason };
    if text.starts_with('$') {
        return Err(untrusted("a path starting with `$` counts as rooted; use a path relative to the spec"));
    }
    if text.starts_with('~') || Path::new(text).is_absolute() || is_drive_path(text) || text.starts_with('\\') {
        return Err(untrusted("a project spec's prompt must be a path relative to its agents directory"));
    }
    let Some(agents_dir) = agents_dir else {
        return Err(untrusted("the spec has no agents directory to anchor the path"));
    };
    let root = lexical_normalize(&agents_dir);
    let candidate = lexical_normalize(&agents_dir.join(text));
    if !candidate.starts_with(&root) {
        return Err(untrusted("the path leaves the project's agents directory"));
    }
    if let (Ok(real_root), Ok(real)) = (root.canonicalize(), candidate.canonicalize())
        && !real.starts_with(&real_root)
    {
        return Err(untrusted("the path resolves (through a symlink) outside the project's agents directory"));
    }
    Ok(candidate)
}

/// A user spec's prompt file: `~`, an absolute path, or a path with
/// variables expanded, relative ones anchored at the agents directory. The
/// error is the notice saying why the agent runs with an empty prompt.
fn user_prompt_path(
    text: &str,
    agents_dir: Option<&Path>,
    context: &ResolveContext,
    uri: &str,
) -> std::result::Result<PathBuf, String> {
    let expanded = if text == "~" || text.starts_with("~/") {
        match &context.home {
            Some(home) => home.join(text.trim_start_matches('~').trim_start_matches('/')),
            None => {
                return Err(format!(
                    "prompt `{uri}` uses `~` but no home directory is known; the agent runs with an empty prompt"
                ));
            }
        }
    } else if Path::new(text).is_absolute() || is_drive_path(text) {
        PathBuf::from(text)
    } else {
        let expanded = match expand_vars(text, context) {
            Ok(expanded) => expanded,
            Err(variable) => {
                return Err(format!(
                    "prompt `{uri}` uses `${variable}`, which is not set; the agent runs with an empty prompt"
                ));
            }
        };
        let expanded = PathBuf::from(expanded);
        if expanded.is_absolute() {
            expanded
        } else {
            match &agents_dir {
                Some(agents_dir) => agents_dir.join(expanded),
                None => {
                    return Err(format!(
                        "prompt `{uri}` is relative but the spec has no file to anchor it; the agent runs with an empty prompt"
                    ));
                }
            }
        }
    };
    Ok(lexical_normalize(&expanded))
}

/// Redacts credentials and screens for injected instructions. A hit in a
/// project checkout's prompt withholds the text; a user's own prompt is
/// kept and the hit is named.
fn screen_into(resolved: &mut ResolvedPrompt, text: &str, scope: Scope, what: &str) {
    let redacted = cairn_guard::redact_all(text);
    if redacted != text {
        resolved.notices.push(format!("{what} contained credentials or exfiltration links; they were redacted"));
    }
    let findings = cairn_guard::screen_all(&redacted);
    if findings.is_empty() {
        resolved.text = redacted.into_owned();
        return;
    }
    let rules = findings.iter().map(|finding| finding.rule).collect::<Vec<_>>().join(", ");
    match scope {
        Scope::Project => {
            resolved.notices.push(format!(
                "{what} matched the injection screen ({rules}); a project checkout's prompt is withheld, so the agent runs with an empty prompt"
            ));
        }
        Scope::User => {
            resolved.notices.push(format!("{what} matched the injection screen ({rules}); check it is what you wrote"));
            resolved.text = redacted.into_owned();
        }
    }
}

/// Expands `$VAR` and `${VAR}`; the error is the first unset name.
fn expand_vars(text: &str, context: &ResolveContext) -> std::result::Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(index) = rest.find('$') {
        out.push_str(&rest[..index]);
        let after = &rest[index + 1..];
        let (name, consumed) = if let Some(braced) = after.strip_prefix('{') {
            match braced.find('}') {
                Some(end) => (&braced[..end], end + 2),
                None => return Err(braced.to_owned()),
            }
        } else {
            let end = after.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(after.len());
            (&after[..end], end)
        };
        if name.is_empty() {
            out.push('$');
            rest = after;
            continue;
        }
        match context.env.get(name) {
            Some(value) => out.push_str(value),
            None => return Err(name.to_owned()),
        }
        rest = &after[consumed..];
    }
    out.push_str(rest);
    Ok(out)
}
