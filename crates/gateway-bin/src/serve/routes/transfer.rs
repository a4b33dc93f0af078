//! `POST /api/memory/migrate` and `POST /api/memory/import`: bringing the
//! home's Markdown memory into `memory.db`, and importing an export
//! document, as `cairn memory migrate` and `cairn memory import` do. Both
//! run on the embed pool (every item goes through the embedding writers)
//! and one at a time (409 `transfer_in_progress` while another runs).

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use cairn_memory_core::{
    ExportDocument, MemoryError, MigrationSource, import_memory, migrate_from_markdown, restore_memory,
};
use jiff::tz::TimeZone;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiResult, pooled};
use crate::serve::AppState;
use crate::serve::error::{ApiError, JsonBody, memory_error};

/// A query string this route does not take: 400 `invalid_query`.
fn bad_query(rejection: QueryRejection) -> ApiError {
    ApiError::bad_request("invalid_query", rejection.body_text())
}

/// How long a transfer request waits for the migration a gateway runs at start.
const START_MIGRATION_PATIENCE: std::time::Duration = std::time::Duration::from_secs(60);

/// Takes the single-flight lock of migrations and imports, or refuses. The
/// migration run at start is waited for (up to a minute), not refused.
async fn transfer_guard(state: &AppState) -> Result<tokio::sync::OwnedMutexGuard<()>, ApiError> {
    let mut started = state.start_migration.subscribe();
    let _ = tokio::time::timeout(START_MIGRATION_PATIENCE, started.wait_for(|done| *done)).await;
    Arc::clone(&state.transfer_lock).try_lock_owned().map_err(|_| {
        ApiError::conflict("transfer_in_progress", "a migration or import is already running; retry when it is done")
    })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MigrateQuery {
    force: Option<bool>,
}

/// `POST /api/memory/migrate[?force=true]`: migrates this home's
/// `memory/preferences.md`, `projects.md`, `history/` and `lessons.jsonl`.
/// Once the home is marked migrated, a call without `force` runs nothing
/// and answers 200 with `"already_migrated": true`.
pub(crate) async fn migrate(
    State(state): State<Arc<AppState>>,
    query: Result<Query<MigrateQuery>, QueryRejection>,
) -> ApiResult {
    let Query(query) = query.map_err(bad_query)?;
    let force = query.force.unwrap_or(false);
    let guard = transfer_guard(&state).await?;
    let memory = Arc::clone(&state.memory);
    let home = state.home.clone();
    let report = pooled(&state, move || {
        let _guard = guard;
        let source = MigrationSource::discover(&home);
        migrate_from_markdown(&memory, &home, &source, force, &TimeZone::system()).map_err(memory_error)
    })
    .await?;
    Ok(Json(json!({"ok": true, "report": report})))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ImportQuery {
    dry_run: Option<bool>,
    restore: Option<bool>,
}

/// `POST /api/memory/import[?dry_run=true][&restore=true]`: the body is an
/// export document (`cairn memory export`). Merged by default: rows already
/// present, already imported or over a cap are reported as skipped, rows a
/// writer refuses as rejected. With `restore=true` the document is restored
/// exactly into an empty store, every row or none: 422 `restore_refused`
/// with the report when a row breaks a rule, 409 `store_not_empty` when
/// the home holds memory. 400 `invalid_bundle` when the body is not an
/// export document this build reads.
pub(crate) async fn import(
    State(state): State<Arc<AppState>>,
    query: Result<Query<ImportQuery>, QueryRejection>,
    JsonBody(body): JsonBody<Value>,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(bad_query)?;
    let dry_run = query.dry_run.unwrap_or(false);
    let restore = query.restore.unwrap_or(false);
    let document: ExportDocument = serde_json::from_value(body).map_err(|error| {
        ApiError::bad_request("invalid_bundle", format!("the body is not a Cairn export document: {error}"))
    })?;
    let guard = transfer_guard(&state).await?;
    let memory = Arc::clone(&state.memory);
    let files = Arc::clone(&state.files);
    let home = state.home.clone();
    let report = pooled(&state, move || {
        let _guard = guard;
        let imported = if restore {
            restore_memory(&memory, &files, &home, &document, dry_run)
        } else {
            import_memory(&memory, &files, &home, &document, dry_run)
        };
        imported.map_err(|error| match error {
            error @ MemoryError::InvalidImport(_) => ApiError::bad_request("invalid_bundle", error.to_string()),
            error @ MemoryError::RestoreTargetNotEmpty(_) => {
                ApiError::new(StatusCode::CONFLICT, "store_not_empty", error.to_string())
            }
            error => memory_error(error),
        })
    })
    .await?;
    if restore && !report.rejected.is_empty() {
        let message = format!("restore refused, nothing written: {} row(s) break a rule", report.rejected.len());
        let body = json!({"ok": false, "code": "restore_refused", "error": message, "report": report});
        return Ok((StatusCode::UNPROCESSABLE_ENTITY, Json(body)).into_response());
    }
    Ok(Json(json!({"ok": true, "report": report})).into_response())
}
