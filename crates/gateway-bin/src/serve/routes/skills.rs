//! `/api/skills*`: list, read, create, replace, delete, the
//! `inject_on_trigger` toggle, and lint findings (`cairn skills lint`).

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use cairn_skills::auto::AutoSkillError;
use cairn_skills::{SkillsError, lint_skill_dir};
use serde::Deserialize;
use serde_json::json;

use super::{ApiResult, blocking};
use crate::serve::AppState;
use crate::serve::error::{ApiError, JsonBody};

fn skills_error(error: SkillsError) -> ApiError {
    let message = error.to_string();
    let (status, code) = match &error {
        SkillsError::InvalidName { .. } => (StatusCode::BAD_REQUEST, "invalid_skill_name"),
        SkillsError::NotFound { .. } => (StatusCode::NOT_FOUND, "skill_not_found"),
        SkillsError::AlreadyExists { .. } => (StatusCode::CONFLICT, "skill_exists"),
        SkillsError::InsideSkill { .. } => (StatusCode::CONFLICT, "inside_skill"),
        SkillsError::NotOwned { .. } => (StatusCode::FORBIDDEN, "skill_not_owned"),
        SkillsError::Symlink { .. } => (StatusCode::FORBIDDEN, "symlink_refused"),
        SkillsError::NoFrontmatter { .. } => (StatusCode::CONFLICT, "no_frontmatter"),
        SkillsError::MalformedFrontmatter { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "malformed_frontmatter"),
        SkillsError::EditNotApplied { .. } => (StatusCode::CONFLICT, "edit_not_applied"),
        SkillsError::TooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "skill_too_large"),
        SkillsError::Credentials { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "credentials_refused"),
        _ => return ApiError::internal(error),
    };
    ApiError::new(status, code, message)
}

/// `GET /api/skills`: every skill with its cost fields.
pub(crate) async fn list(State(state): State<Arc<AppState>>) -> ApiResult {
    let catalog = Arc::clone(&state.live().skills);
    let skills = blocking(move || Ok(catalog.list_skills())).await?;
    Ok(Json(json!({"ok": true, "skills": skills})))
}

/// `GET /api/skills/{name}`: one skill's file and fields.
pub(crate) async fn get(State(state): State<Arc<AppState>>, Path(name): Path<String>) -> ApiResult {
    let catalog = Arc::clone(&state.live().skills);
    blocking(move || {
        let skill = catalog
            .get(&name)
            .ok_or_else(|| ApiError::not_found("skill_not_found", format!("no skill named {name:?}")))?;
        Ok(Json(json!({
            "ok": true,
            "name": skill.name,
            "source": skill.source,
            "path": skill.path,
            "owned": skill.owned(),
            "description": skill.description(),
            "always": skill.meta.always,
            "triggers": skill.meta.triggers,
            "inject_on_trigger": skill.meta.inject_on_trigger,
            "size_bytes": skill.size_bytes,
            "warning": skill.warning,
            "lint": lint_skill_dir(&skill.dir).findings,
            "content": skill.text(),
        })))
    })
    .await
}

/// `GET /api/skills/-/lint`: every skill's findings (severity, rule,
/// message; worst first), as `cairn skills lint` reports them.
pub(crate) async fn lint(State(state): State<Arc<AppState>>) -> ApiResult {
    let catalog = Arc::clone(&state.live().skills);
    let reports = blocking(move || {
        Ok(catalog
            .skills()
            .iter()
            .map(|skill| json!({"name": skill.name, "findings": lint_skill_dir(&skill.dir).findings}))
            .collect::<Vec<_>>())
    })
    .await?;
    Ok(Json(json!({"ok": true, "skills": reports})))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateSkill {
    name: String,
    content: String,
}

/// `POST /api/skills`: create `<home>/skills/<name>/SKILL.md` (name sanitised).
pub(crate) async fn create(
    State(state): State<Arc<AppState>>,
    JsonBody(body): JsonBody<CreateSkill>,
) -> Result<(StatusCode, Json<serde_json::Value>), ApiError> {
    let catalog = Arc::clone(&state.live().skills);
    let name = blocking(move || catalog.create(&body.name, &body.content).map_err(skills_error)).await?;
    Ok((StatusCode::CREATED, Json(json!({"ok": true, "name": name}))))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReplaceSkill {
    content: String,
}

/// `PUT /api/skills/{name}`: replace an owned skill's file atomically.
pub(crate) async fn replace(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    JsonBody(body): JsonBody<ReplaceSkill>,
) -> ApiResult {
    let catalog = Arc::clone(&state.live().skills);
    let label = name.clone();
    blocking(move || catalog.update(&name, &body.content).map_err(skills_error)).await?;
    Ok(Json(json!({"ok": true, "name": label})))
}

/// `DELETE /api/skills/{name}`: remove an owned skill's directory.
pub(crate) async fn delete(State(state): State<Arc<AppState>>, Path(name): Path<String>) -> ApiResult {
    let catalog = Arc::clone(&state.live().skills);
    let label = name.clone();
    blocking(move || catalog.delete(&name).map_err(skills_error)).await?;
    Ok(Json(json!({"ok": true, "name": label, "deleted": true})))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct InjectToggle {
    name: String,
    inject: bool,
}

/// `POST /api/skills/-/inject-on-trigger`: edit that one frontmatter line.
pub(crate) async fn inject_on_trigger(
    State(state): State<Arc<AppState>>,
    JsonBody(body): JsonBody<InjectToggle>,
) -> ApiResult {
    let catalog = Arc::clone(&state.live().skills);
    let name = body.name.clone();
    let changed =
        blocking(move || catalog.set_inject_on_trigger(&body.name, body.inject).map_err(skills_error)).await?;
    Ok(Json(json!({"ok": true, "name": name, "inject": body.inject, "changed": changed})))
}

fn auto_error(error: AutoSkillError) -> ApiError {
    let message = cairn_guard::redact_all(&error.to_string()).into_owned();
    match &error {
        AutoSkillError::NotFound { .. } | AutoSkillError::InvalidSlug { .. } => {
            ApiError::not_found("not_found", message)
        }
        AutoSkillError::ScriptRejected { .. } | AutoSkillError::Validator { .. } => {
            ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "script_rejected", message)
        }
        AutoSkillError::Exists { .. } => ApiError::conflict("skill_exists", message),
        AutoSkillError::NotAuto { .. } => ApiError::conflict("not_auto", message),
        AutoSkillError::NoVersion { .. } => ApiError::not_found("no_version", message),
        AutoSkillError::UnexpectedFiles { .. } => ApiError::conflict("unexpected_files", message),
        AutoSkillError::Symlink { .. } => ApiError::new(StatusCode::FORBIDDEN, "symlink_refused", message),
        _ => ApiError::internal(message),
    }
}

/// `GET /api/skills/-/pending`: the auto-skill candidates and pending
/// updates (`"kind": "update"`, with the live `current_procedure`) waiting
/// for review, read from `<home>/skills/auto/.pending/`.
pub(crate) async fn pending(State(state): State<Arc<AppState>>) -> ApiResult {
    let auto = state.sessions.auto_skills();
    let pending = blocking(move || auto.pending().map_err(auto_error)).await?;
    Ok(Json(json!({"pending": pending})))
}

/// `POST /api/skills/-/pending/{slug}/approve`: promotes the candidate to
/// `auto/<slug>` after validating its script again (422
/// `script_rejected` naming the rule when it fails; 404 `not_found`), or
/// applies a pending update, keeping the replaced file as a version (409
/// `not_auto` when the live skill is no longer a generated one).
pub(crate) async fn approve(State(state): State<Arc<AppState>>, Path(slug): Path<String>) -> ApiResult {
    let auto = state.sessions.auto_skills();
    let catalog = Arc::clone(&state.live().skills);
    let name = blocking(move || {
        let name = auto.approve(&slug).map_err(auto_error)?;
        catalog.invalidate();
        Ok(name)
    })
    .await?;
    Ok(Json(json!({"approved": name})))
}

/// `POST /api/skills/-/pending/{slug}/reject`: deletes the candidate (404 `not_found`).
pub(crate) async fn reject(State(state): State<Arc<AppState>>, Path(slug): Path<String>) -> ApiResult {
    let auto = state.sessions.auto_skills();
    let label = slug.clone();
    blocking(move || auto.reject(&slug).map_err(auto_error)).await?;
    Ok(Json(json!({"rejected": label})))
}

/// `POST /api/skills/-/auto/{slug}/restore`: puts the newest kept version
/// of `auto/<slug>` back live, keeping the replaced file (404 `not_found`,
/// 404 `no_version`).
pub(crate) async fn restore(State(state): State<Arc<AppState>>, Path(slug): Path<String>) -> ApiResult {
    let auto = state.sessions.auto_skills();
    let catalog = Arc::clone(&state.live().skills);
    let name = blocking(move || {
        let name = auto.restore(&slug).map_err(auto_error)?;
        catalog.invalidate();
        Ok(name)
    })
    .await?;
    Ok(Json(json!({"restored": name})))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AuditQuery {
    limit: Option<usize>,
}

/// `GET /api/skills/-/audit?limit=N`: the newest records of
/// `<home>/skills-audit.jsonl`, newest first, as
/// `{"events": [{"at", "action", "skills", "ok", "detail"}], "skipped", "truncated"}`
/// (400 `invalid_limit` outside 1 to 1000; default 50).
pub(crate) async fn audit(State(state): State<Arc<AppState>>, Query(query): Query<AuditQuery>) -> ApiResult {
    let max = crate::skills_audit::MAX_LIMIT;
    let limit = query.limit.unwrap_or(crate::skills_audit::DEFAULT_LIMIT);
    if !(1..=max).contains(&limit) {
        return Err(ApiError::bad_request("invalid_limit", format!("limit must be 1 to {max}")));
    }
    let path = state.home.join(crate::home::SKILLS_AUDIT_FILE_NAME);
    let log = blocking(move || crate::skills_audit::read(&path, limit).map_err(ApiError::internal)).await?;
    Ok(Json(serde_json::to_value(log).map_err(ApiError::internal)?))
}
