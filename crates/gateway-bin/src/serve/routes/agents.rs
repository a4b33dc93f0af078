//! `/api/agents*`: the agent spec list, one spec's detail, and the
//! Template pane's PATCH, which writes exactly two things onto a JSON spec:
//! `model` and the managed `skill://` entries of `resources` (shown as
//! `skills`). Markdown specs are read-only (409 `markdown_spec_readonly`).

use std::path::PathBuf;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use cairn_agent_spec::{AgentCatalog, ResolveContext, SpecFormat};
use indexmap::IndexMap;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::{ApiResult, blocking};
use crate::serve::AppState;
use crate::serve::error::{ApiError, JsonBody};

/// Longest model name a PATCH accepts.
const MAX_MODEL_CHARS: usize = 200;

fn load(state: &AppState) -> Result<AgentCatalog, ApiError> {
    AgentCatalog::load(&state.live().agents.dirs, &state.live().agents.sensitive).map_err(ApiError::internal)
}

fn context(state: &AppState) -> ResolveContext {
    let mut context = ResolveContext::new(state.live().agents.user_home.clone())
        .with_sensitive(state.live().agents.sensitive.clone());
    if let Some(project) = &state.live().agents.project_dir {
        context = context.with_project_dir(project);
    }
    context
}

/// `GET /api/agents`.
pub(crate) async fn list(State(state): State<Arc<AppState>>) -> ApiResult {
    blocking(move || {
        let catalog = load(&state)?;
        Ok(Json(json!({"ok": true, "agents": catalog.list(&state.live().agents.pins)})))
    })
    .await
}

/// The skill name a `skill://` entry manages, when it is a plain path to a
/// `SKILL.md` under the home's skills directory (wildcards and other roots
/// are read-only and kept where they are).
fn managed_skill(entry: &Value, skills_root: &std::path::Path, user_home: Option<&std::path::Path>) -> Option<String> {
    let rest = entry.as_str()?.trim().strip_prefix("skill://")?;
    if rest.contains(['*', '?', '[', '{']) {
        return None;
    }
    let path = match rest.strip_prefix("~/") {
        Some(relative) => user_home?.join(relative),
        None => PathBuf::from(rest),
    };
    let relative = path.strip_prefix(skills_root).ok()?;
    let name = relative.to_str()?.strip_suffix("/SKILL.md")?;
    (!name.is_empty()).then(|| name.to_owned())
}

fn skill_uri(skills_root: &std::path::Path, name: &str) -> String {
    format!("skill://{}/{name}/SKILL.md", skills_root.display())
}

fn managed_skills(spec: &Value, skills_root: &std::path::Path, user_home: Option<&std::path::Path>) -> Vec<String> {
    spec.get("resources")
        .and_then(Value::as_array)
        .map(|resources| resources.iter().filter_map(|entry| managed_skill(entry, skills_root, user_home)).collect())
        .unwrap_or_default()
}

fn detail(state: &AppState, name: &str) -> Result<Value, ApiError> {
    let catalog = load(state)?;
    if !catalog.names().contains(name) {
        return Err(ApiError::not_found("agent_not_found", format!("no agent named {name:?}")));
    }
    let resolved = catalog
        .resolve(name, &state.live().agents.pins)
        .map_err(|error| ApiError::conflict("agent_unresolved", error.to_string()))?;
    let mut view = crate::commands::agents::resolved_view(&resolved, &context(state));
    let editable = resolved.spec.format() == SpecFormat::Json;
    view["skills"] = json!(managed_skills(
        &resolved.spec.to_json(),
        &state.live().agents.skills_root,
        state.live().agents.user_home.as_deref(),
    ));
    view["editable"] = json!(editable);
    view["ok"] = json!(true);
    Ok(view)
}

/// `GET /api/agents/detail/{name}`.
pub(crate) async fn get_detail(State(state): State<Arc<AppState>>, Path(name): Path<String>) -> ApiResult {
    blocking(move || detail(&state, &name).map(Json)).await
}

fn validate_skill_name(name: &str) -> Result<(), ApiError> {
    let valid = !name.is_empty()
        && name.len() <= 200
        && name.split('/').all(|part| {
            !part.is_empty()
                && part != "."
                && part != ".."
                && part.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        });
    if valid {
        Ok(())
    } else {
        Err(ApiError::bad_request("invalid_skill_name", format!("{name:?} is not a skill name")))
    }
}

/// Places `wanted` into the managed slots of `resources`, keeping every
/// other entry where it is: slots are refilled in order, extra skills go
/// after the last managed slot, surplus slots are removed.
fn place_skills(
    resources: &mut Vec<Value>,
    wanted: &[String],
    skills_root: &std::path::Path,
    user_home: Option<&std::path::Path>,
) {
    let slots: Vec<usize> = resources
        .iter()
        .enumerate()
        .filter(|(_, entry)| managed_skill(entry, skills_root, user_home).is_some())
        .map(|(index, _)| index)
        .collect();
    for (slot, name) in slots.iter().zip(wanted) {
        resources[*slot] = Value::String(skill_uri(skills_root, name));
    }
    if wanted.len() > slots.len() {
        let first = slots.last().map_or(resources.len(), |last| last + 1);
        for (at, name) in (first..).zip(&wanted[slots.len()..]) {
            resources.insert(at, Value::String(skill_uri(skills_root, name)));
        }
    } else {
        for slot in slots[wanted.len()..].iter().rev() {
            resources.remove(*slot);
        }
    }
}

/// `PATCH /api/agents/detail/{name}`: edits `model` and `skills`; other
/// keys are ignored, each with a notice. A spec under a project checkout
/// is never rewritten, nor one of several identical files declaring the
/// name (pin one first).
pub(crate) async fn patch_detail(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    JsonBody(body): JsonBody<Map<String, Value>>,
) -> ApiResult {
    if body.is_empty() {
        return Err(ApiError::bad_request("empty_patch", "send `model`, `skills` or both"));
    }
    let notices: Vec<String> = body
        .keys()
        .filter(|key| *key != "model" && *key != "skills")
        .map(|key| format!("`{key}` ignored: PATCH edits only `model` and `skills`"))
        .collect();
    let (model, skills) = patch_fields(&body)?;
    let write_lock = Arc::clone(&state.live().agents.write_lock);
    let _serialised = write_lock.lock().await;
    let worker_state = Arc::clone(&state);
    blocking(move || {
        let state = worker_state;
        let catalog = load(&state)?;
        if !catalog.names().contains(&name) {
            return Err(ApiError::not_found("agent_not_found", format!("no agent named {name:?}")));
        }
        let resolved = catalog
            .resolve(&name, &state.live().agents.pins)
            .map_err(|error| ApiError::conflict("agent_unresolved", error.to_string()))?;
        if model.is_none() && skills.is_none() {
            let mut answer = detail(&state, &name)?;
            answer["notices"] = json!(notices);
            return Ok(Json(answer));
        }
        if resolved.scope == cairn_agent_spec::Scope::Project {
            return Err(ApiError::conflict(
                "project_spec_readonly",
                format!("{} belongs to a project checkout; it is never rewritten", resolved.path.display()),
            ));
        }
        let claimants = catalog.claimant_paths(&name);
        if claimants.len() > 1 && !state.live().agents.pins.contains_key(&name) {
            let listed = claimants.iter().map(|path| path.display().to_string()).collect::<Vec<_>>().join(", ");
            return Err(ApiError::conflict(
                "ambiguous_spec",
                format!("{listed} all declare `{name}`; pin one (`cairn agent pin`) before editing"),
            ));
        }
        if resolved.spec.format() != SpecFormat::Json {
            return Err(ApiError::conflict(
                "markdown_spec_readonly",
                format!("{} is a Markdown spec; it is read-only here", resolved.path.display()),
            ));
        }
        // Re-read the file under its edit lock (other processes edit specs
        // too) and edit only the two fields: the other fields keep their
        // order and their text.
        if state.live().agents.sensitive.is_sensitive(&resolved.path) {
            return Err(ApiError::conflict(
                "spec_unreadable",
                format!("{}: the guard refuses this path", resolved.path.display()),
            ));
        }
        crate::locked_edit::edit_locked(&resolved.path, |current| {
            let text = current.ok_or_else(|| {
                ApiError::conflict("spec_missing", format!("{} no longer exists", resolved.path.display()))
            })?;
            let unreadable = |error: serde_json::Error| {
                ApiError::conflict("spec_unreadable", format!("{}: {error}", resolved.path.display()))
            };
            let raw: IndexMap<String, Box<RawValue>> = serde_json::from_str(&text).map_err(unreadable)?;
            let mut spec: IndexMap<String, Field> =
                raw.into_iter().map(|(key, value)| (key, Field::Kept(value))).collect();
            if let Some(model) = model {
                spec.insert("model".to_owned(), Field::Edited(Value::String(model)));
            }
            if let Some(skills) = &skills {
                let mut resources = match spec.get("resources") {
                    Some(Field::Kept(raw)) => match serde_json::from_str::<Value>(raw.get()).map_err(unreadable)? {
                        Value::Array(items) => items,
                        _ => return Err(ApiError::conflict("spec_unreadable", "`resources` is not a list")),
                    },
                    Some(Field::Edited(Value::Array(items))) => items.clone(),
                    _ => Vec::new(),
                };
                place_skills(
                    &mut resources,
                    skills,
                    &state.live().agents.skills_root,
                    state.live().agents.user_home.as_deref(),
                );
                spec.insert("resources".to_owned(), Field::Edited(Value::Array(resources)));
            }
            let mut text = serde_json::to_string_pretty(&spec).expect("JSON values serialise");
            text.push('\n');
            Ok(Some(text))
        })?;
        let mut answer = detail(&state, &name)?;
        answer["notices"] = json!(notices);
        Ok(Json(answer))
    })
    .await
}

/// The patch's `model` (non-empty, trimmed, bounded) and `skills` (valid
/// names, duplicates dropped); each `None` when the patch leaves it alone.
fn patch_fields(body: &Map<String, Value>) -> Result<(Option<String>, Option<Vec<String>>), ApiError> {
    let model = match body.get("model") {
        None => None,
        Some(Value::String(model)) if !model.trim().is_empty() && model.chars().count() <= MAX_MODEL_CHARS => {
            Some(model.trim().to_owned())
        }
        Some(other) => {
            return Err(ApiError::bad_request(
                "invalid_model",
                format!("`model` must be a non-empty string of at most {MAX_MODEL_CHARS} characters (got {other})"),
            ));
        }
    };
    let skills = match body.get("skills") {
        None => None,
        Some(Value::Array(items)) => {
            let mut names = Vec::with_capacity(items.len());
            for item in items {
                let Some(name) = item.as_str() else {
                    return Err(ApiError::bad_request("invalid_skills", "`skills` must list skill names"));
                };
                validate_skill_name(name)?;
                if !names.iter().any(|known: &String| known == name) {
                    names.push(name.to_owned());
                }
            }
            Some(names)
        }
        Some(_) => return Err(ApiError::bad_request("invalid_skills", "`skills` must be a list of skill names")),
    };
    Ok((model, skills))
}

/// A top-level field of a JSON spec: kept as its original text, or edited.
#[derive(Serialize)]
#[serde(untagged)]
enum Field {
    Kept(Box<RawValue>),
    Edited(Value),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skills_fill_their_own_slots_and_leave_other_entries_in_place() {
        let root = std::path::Path::new("/h/skills");
        let uri = |name: &str| json!(skill_uri(root, name));
        let mut resources = vec![
            uri("a"),
            json!("file://README.md"),
            uri("b"),
            json!("skill:///h/skills/**/SKILL.md"),
            json!("skill:///elsewhere/x/SKILL.md"),
        ];
        place_skills(&mut resources, &["b".to_owned(), "a".to_owned(), "c".to_owned()], root, None);
        assert_eq!(
            resources,
            vec![
                uri("b"),
                json!("file://README.md"),
                uri("a"),
                uri("c"),
                json!("skill:///h/skills/**/SKILL.md"),
                json!("skill:///elsewhere/x/SKILL.md"),
            ]
        );
        place_skills(&mut resources, &["c".to_owned()], root, None);
        assert_eq!(
            resources,
            vec![
                uri("c"),
                json!("file://README.md"),
                json!("skill:///h/skills/**/SKILL.md"),
                json!("skill:///elsewhere/x/SKILL.md"),
            ]
        );
        place_skills(&mut resources, &[], root, None);
        assert_eq!(resources.len(), 3);
    }

    #[test]
    fn skill_names_are_validated() {
        for bad in ["", "../x", "a//b", "a/./b", "a b", "*"] {
            assert!(validate_skill_name(bad).is_err(), "{bad:?}");
        }
        for good in ["deploy", "utils/tiny-url", "v1.2_x"] {
            assert!(validate_skill_name(good).is_ok(), "{good:?}");
        }
    }
}

/// `?backend=` (and `?kiro_version=`) of the projection route.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct ProjectionQuery {
    backend: Option<String>,
    kiro_version: Option<String>,
}

/// `GET /api/agents/{name}/projection?backend=B[&kiro_version=X.Y.Z]`: what
/// the agent becomes on that backend (the same value `cairn agent project
/// --json` prints). On kiro-cli the version is the stated one, else asked
/// of `kiro-cli --version` once per request.
pub(crate) async fn get_projection(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    axum::extract::Query(query): axum::extract::Query<ProjectionQuery>,
) -> ApiResult {
    blocking(move || {
        let Some(backend) = query.backend else {
            return Err(ApiError::bad_request("missing_backend", "pass ?backend=<name>"));
        };
        let backend = cairn_agent_spec::projection::AgentBackend::parse(&backend)
            .map_err(|error| ApiError::bad_request("unknown_backend", error.to_string()))?;
        let stated = match query.kiro_version.as_deref() {
            None => None,
            Some(text) => Some(
                crate::commands::agents::parse_stated_version(text)
                    .map_err(|error| ApiError::bad_request("bad_kiro_version", error))?,
            ),
        };
        let catalog = load(&state)?;
        if !catalog.names().contains(&name) {
            return Err(ApiError::not_found("agent_not_found", format!("no agent named {name:?}")));
        }
        let kiro_cli = crate::commands::agents::KiroCliVersion::for_backend_with(
            backend,
            stated.map(|version| (version, "?kiro_version=")),
            "?kiro_version=X.Y.Z",
            crate::commands::agents::probe_kiro_cli_version,
        );
        let projection = crate::commands::agents::project_in(
            &catalog,
            &state.live().agents.pins,
            &context(&state),
            &name,
            backend,
            kiro_cli,
        )
        .map_err(|error| ApiError::conflict("agent_unresolved", error.to_string()))?;
        Ok(Json(json!({ "ok": true, "projection": projection })))
    })
    .await
}
