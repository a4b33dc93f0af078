//! Consolidation review and undo over HTTP:
//!
//! - `GET /api/memory/pending`: the changesets waiting for review;
//! - `GET /api/memory/pending/{id}`: one changeset (404 `unknown_changeset`);
//! - `POST /api/memory/pending/{id}/approve` and `.../reject`, whole or
//!   `?rows=2,3` (422 `row_out_of_range`, `row_decided`,
//!   `changeset_expired`, `changeset_closed`);
//! - `GET /api/memory/runs`: every recorded run;
//! - `POST /api/memory/runs/revert?runs=N`: reverts the last N applied runs
//!   (422 `changed_since`, `nothing_to_revert`).

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use cairn_memory_core::{MemoryError, RunState, approve_changeset, reject_changeset, revert_consolidation_runs};
use serde::Deserialize;
use serde_json::json;

use super::{ApiResult, blocking};
use crate::clock::now_ms;
use crate::serve::AppState;
use crate::serve::error::{ApiError, memory_error};

/// `?rows=2,3` of a decision.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct RowsQuery {
    rows: Option<String>,
}

/// `?runs=N` of a revert.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct RevertQuery {
    runs: Option<usize>,
}

fn review_error(error: MemoryError) -> ApiError {
    match error.rejection() {
        Some(rejected @ cairn_memory_core::Rejected::UnknownChangeset { .. }) => {
            ApiError::not_found("unknown_changeset", rejected.to_string())
        }
        _ => memory_error(error),
    }
}

fn parse_rows(query: &RowsQuery) -> Result<Option<Vec<usize>>, ApiError> {
    let Some(text) = query.rows.as_deref().filter(|text| !text.trim().is_empty()) else { return Ok(None) };
    text.split(',')
        .map(|row| {
            row.trim().parse::<usize>().map_err(|_| {
                ApiError::bad_request("invalid_rows", format!("`rows` must be row numbers such as 2,3 (got {text:?})"))
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

fn ttl(state: &AppState) -> i64 {
    state.live().home.settings().skills.auto.pending_ttl_ms()
}

/// `GET /api/memory/pending`
pub(crate) async fn list(State(state): State<Arc<AppState>>) -> ApiResult {
    let (memory, ttl) = (Arc::clone(&state.memory), ttl(&state));
    let pending = blocking(move || {
        let runs = memory.consolidation_runs(now_ms(), ttl).map_err(memory_error)?;
        Ok(runs.into_iter().filter(|run| run.state == RunState::Pending).collect::<Vec<_>>())
    })
    .await?;
    Ok(Json(json!({"pending": pending})))
}

/// `GET /api/memory/pending/{id}`
pub(crate) async fn show(State(state): State<Arc<AppState>>, Path(id): Path<i64>) -> ApiResult {
    let (memory, ttl) = (Arc::clone(&state.memory), ttl(&state));
    let run = blocking(move || memory.consolidation_run(id, now_ms(), ttl).map_err(review_error)).await?;
    Ok(Json(serde_json::to_value(run).map_err(ApiError::internal)?))
}

/// `POST /api/memory/pending/{id}/approve`
pub(crate) async fn approve(
    State(state): State<Arc<AppState>>,
    Path(id): Path<i64>,
    Query(query): Query<RowsQuery>,
) -> ApiResult {
    let rows = parse_rows(&query)?;
    let (memory, files, ttl) = (Arc::clone(&state.memory), Arc::clone(&state.files), ttl(&state));
    let run =
        blocking(move || approve_changeset(&memory, &files, id, rows.as_deref(), now_ms(), ttl).map_err(review_error))
            .await?;
    Ok(Json(serde_json::to_value(run).map_err(ApiError::internal)?))
}

/// `POST /api/memory/pending/{id}/reject`
pub(crate) async fn reject(
    State(state): State<Arc<AppState>>,
    Path(id): Path<i64>,
    Query(query): Query<RowsQuery>,
) -> ApiResult {
    let rows = parse_rows(&query)?;
    let (memory, ttl) = (Arc::clone(&state.memory), ttl(&state));
    let run =
        blocking(move || reject_changeset(&memory, id, rows.as_deref(), now_ms(), ttl).map_err(review_error)).await?;
    Ok(Json(serde_json::to_value(run).map_err(ApiError::internal)?))
}

/// `GET /api/memory/runs`
pub(crate) async fn runs(State(state): State<Arc<AppState>>) -> ApiResult {
    let (memory, ttl) = (Arc::clone(&state.memory), ttl(&state));
    let runs = blocking(move || memory.consolidation_runs(now_ms(), ttl).map_err(memory_error)).await?;
    Ok(Json(json!({"runs": runs})))
}

/// `POST /api/memory/runs/revert`
pub(crate) async fn revert(State(state): State<Arc<AppState>>, Query(query): Query<RevertQuery>) -> ApiResult {
    let (memory, files) = (Arc::clone(&state.memory), Arc::clone(&state.files));
    let count = query.runs.unwrap_or(1);
    let report = blocking(move || revert_consolidation_runs(&memory, &files, count).map_err(memory_error)).await?;
    Ok(Json(serde_json::to_value(report).map_err(ApiError::internal)?))
}
