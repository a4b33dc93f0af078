//! Scopes over HTTP: the `project`, `all_projects` and `only` parameters
//! every memory read takes, `GET /api/memory/scopes`, and
//! `POST /api/memory/forget`.
//!
//! A request names no working directory, so a read without `project` sees
//! the global memory only; `project` (a project's scope name, or an
//! absolute directory) adds that project, `all_projects=true` reads every
//! scope, and `only` (a scope name) reads exactly one (the dashboard's
//! filter).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use cairn_memory_core::{ForgetRequest, Scope, ScopeFilter, Source, forget_memory};
use serde::Deserialize;
use serde_json::json;

use super::{ApiResult, blocking};
use crate::serve::AppState;
use crate::serve::error::{ApiError, JsonBody, memory_error};

/// The scope parameters of a memory read.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ScopeQuery {
    project: Option<String>,
    all_projects: Option<bool>,
    only: Option<String>,
}

/// A project named by its scope name or by an absolute directory.
pub(crate) fn named_project(state: &AppState, name: &str) -> Result<Scope, ApiError> {
    let name = name.trim();
    if name.starts_with('/') {
        let rule = state.live().home.settings().project_rule;
        return cairn_memory_core::project_of(std::path::Path::new(name), rule)
            .ok_or_else(|| ApiError::bad_request("invalid_scope", format!("{name:?} names no project")));
    }
    Scope::parse(name).ok_or_else(|| ApiError::bad_request("invalid_scope", format!("{name:?} is not a scope")))
}

impl ScopeQuery {
    /// What the read sees.
    pub(crate) fn filter(&self, state: &AppState) -> Result<ScopeFilter, ApiError> {
        if let Some(only) = self.only.as_deref().filter(|only| !only.is_empty()) {
            return Ok(ScopeFilter::Only(named_project(state, only)?));
        }
        if self.all_projects == Some(true) {
            return Ok(ScopeFilter::All);
        }
        let project = self.project.as_deref().filter(|name| !name.is_empty()).map(|name| named_project(state, name));
        Ok(ScopeFilter::visible_from(project.transpose()?.as_ref()))
    }
}

/// `GET /api/memory/scopes`: every scope holding live rows, with counts.
pub(crate) async fn scopes(State(state): State<Arc<AppState>>) -> ApiResult {
    let memory = Arc::clone(&state.memory);
    let counts = blocking(move || {
        let mut counts: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        counts.entry(cairn_memory_core::GLOBAL_SCOPE.to_owned()).or_default();
        for row in memory.list_episodic(usize::MAX, 0).map_err(memory_error)? {
            counts.entry(row.scope.to_string()).or_default().0 += 1;
        }
        for entry in memory.list_semantic("").map_err(memory_error)? {
            counts.entry(entry.scope.to_string()).or_default().1 += 1;
        }
        Ok(counts)
    })
    .await?;
    let scopes: Vec<_> = counts
        .into_iter()
        .map(|(scope, (episodic, semantic))| json!({"scope": scope, "episodic": episodic, "semantic": semantic}))
        .collect();
    Ok(Json(json!({"ok": true, "scopes": scopes})))
}

/// `POST /api/memory/forget` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ForgetBody {
    #[serde(default)]
    ids: Vec<i64>,
    #[serde(default)]
    keys: Vec<String>,
    query: Option<String>,
    since: Option<String>,
    until: Option<String>,
    /// `visible` (default: `project` and global), `project` (that project
    /// only), `global` or `all`.
    scope: Option<String>,
    project: Option<String>,
    /// Forget for real; without it the answer lists what would go.
    #[serde(default)]
    confirm: bool,
}

/// `POST /api/memory/forget`: the forget of every surface; a preview
/// unless `confirm` is true.
pub(crate) async fn forget(State(state): State<Arc<AppState>>, JsonBody(body): JsonBody<ForgetBody>) -> ApiResult {
    let project = body.project.as_deref().filter(|name| !name.is_empty()).map(|name| named_project(&state, name));
    let project = project.transpose()?;
    let scopes = match body.scope.as_deref().unwrap_or("visible") {
        "visible" => ScopeFilter::visible_from(project.as_ref()),
        "project" => ScopeFilter::Only(project.ok_or_else(|| {
            ApiError::bad_request("project_required", "scope \"project\" needs the project (a scope name or directory)")
        })?),
        "global" => ScopeFilter::Only(Scope::Global),
        "all" => ScopeFilter::All,
        other => {
            return Err(ApiError::bad_request(
                "invalid_scope",
                format!("scope must be visible, project, global or all (got {other:?})"),
            ));
        }
    };
    let time = |field: &str, text: Option<&str>| {
        text.map(|text| {
            crate::commands::parse_time_bound(text)
                .map_err(|error| ApiError::bad_request("invalid_time", format!("{field}: {error:#}")))
        })
        .transpose()
    };
    let request = ForgetRequest {
        episode_ids: body.ids,
        keys: body.keys,
        query: body.query,
        from: time("since", body.since.as_deref())?,
        until: time("until", body.until.as_deref())?,
        scopes,
        dry_run: !body.confirm,
        source: Source::UserExplicit,
    };
    let (memory, files) = (Arc::clone(&state.memory), Arc::clone(&state.files));
    let report = blocking(move || forget_memory(&memory, &files, &request).map_err(memory_error)).await?;
    Ok(Json(json!({"ok": true, "report": report})))
}
