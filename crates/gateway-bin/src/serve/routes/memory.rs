//! `/api/memory/*`: semantic memory, the audit trail, statistics, the
//! embedding model's status and setup, and the live memory settings.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use cairn_context::{MessageRequest, SessionRequest};
use cairn_embedder::manager::DownloadStep;
use cairn_memory_core::{DeleteOutcome, Source};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiResult, blocking, pooled};
use crate::model::{EnableError, Phase};
use crate::serve::AppState;
use crate::serve::error::{ApiError, JsonBody, memory_error};
use crate::settings::persist_memory_settings;

/// Largest `limit` a list or search accepts.
const MAX_LIMIT: usize = 1_000;
/// Longest `q` a context preview accepts.
pub(crate) const MAX_PREVIEW_QUERY_CHARS: usize = 8_000;
/// `limit` when none is given.
const DEFAULT_LIMIT: usize = 20;

fn limit(value: Option<usize>) -> Result<usize, ApiError> {
    match value {
        None => Ok(DEFAULT_LIMIT),
        Some(limit) if (1..=MAX_LIMIT).contains(&limit) => Ok(limit),
        Some(limit) => {
            Err(ApiError::bad_request("invalid_limit", format!("limit must be 1 to {MAX_LIMIT} (got {limit})")))
        }
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct SemanticQuery {
    prefix: Option<String>,
    q: Option<String>,
    limit: Option<usize>,
}

/// `GET /api/memory/semantic[?prefix=][&q=&limit=]`: the live entries, or a
/// hybrid search (keyword only until the model is resident) with `q`.
pub(crate) async fn list_semantic(
    State(state): State<Arc<AppState>>,
    Query(query): Query<SemanticQuery>,
    Query(scope): Query<super::forget::ScopeQuery>,
) -> ApiResult {
    let limit = limit(query.limit)?;
    let scopes = scope.filter(&state)?;
    let memory = Arc::clone(&state.memory);
    match query.q.filter(|q| !q.trim().is_empty()) {
        Some(q) => {
            let ready = state.memory.embedder().is_some_and(|embedder| embedder.is_ready());
            let mode = if ready { "hybrid" } else { "keyword" };
            let hits = blocking(move || memory.search_semantic_in(&q, limit, &scopes).map_err(memory_error)).await?;
            Ok(Json(json!({"ok": true, "mode": mode, "results": hits})))
        }
        None => {
            let prefix = query.prefix.unwrap_or_default();
            let entries = blocking(move || memory.list_semantic_in(&prefix, &scopes).map_err(memory_error)).await?;
            Ok(Json(json!({"ok": true, "count": entries.len(), "entries": entries})))
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SemanticWrite {
    key: String,
    value: Value,
    confidence: Option<f64>,
    source: Option<String>,
    /// The writer's project (a scope name or directory): a `project.` key goes there.
    project: Option<String>,
}

/// `PUT /api/memory/semantic`: create or update through every memory rule.
/// Runs on the embed pool (the value is embedded); 503 when the pool is full.
pub(crate) async fn put_semantic(
    State(state): State<Arc<AppState>>,
    JsonBody(body): JsonBody<SemanticWrite>,
) -> ApiResult {
    let source: Source = body.source.as_deref().unwrap_or("user_explicit").parse().map_err(
        |rejected: cairn_memory_core::Rejected| {
            ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, rejected.code(), rejected.to_string())
        },
    )?;
    let confidence = body.confidence.unwrap_or(1.0);
    let project = body.project.as_deref().filter(|name| !name.is_empty());
    let project = project.map(|name| super::forget::named_project(&state, name)).transpose()?;
    let scope = cairn_memory_core::Scope::for_fact(&body.key, project.as_ref());
    let memory = Arc::clone(&state.memory);
    let outcome = pooled(&state, move || {
        memory.write_semantic_in(&scope, &body.key, &body.value, confidence, source).map_err(memory_error)
    })
    .await?;
    Ok(Json(json!({"ok": true, "result": outcome})))
}

/// `DELETE /api/memory/semantic/{key}`: tombstone and audit.
/// With `project` or `only`, the row that reader sees under the key.
pub(crate) async fn delete_semantic(
    State(state): State<Arc<AppState>>,
    Path(key): Path<String>,
    Query(scope): Query<super::forget::ScopeQuery>,
) -> ApiResult {
    let scopes = scope.filter(&state)?;
    let memory = Arc::clone(&state.memory);
    let lookup = key.clone();
    let outcome = blocking(move || {
        let scope = memory.find_semantic(&scopes, &lookup).map_err(memory_error)?.map(|entry| entry.scope);
        memory.delete_semantic_in(&scope.unwrap_or_default(), &lookup, Source::UserExplicit).map_err(memory_error)
    })
    .await?;
    match outcome {
        DeleteOutcome::Deleted => Ok(Json(json!({"ok": true, "key": key, "deleted": true}))),
        DeleteOutcome::NotFound => Err(ApiError::not_found("key_not_found", format!("no live entry under {key:?}"))),
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct LimitQuery {
    limit: Option<usize>,
}

/// `GET /api/memory/events?limit=`: the newest audit events.
pub(crate) async fn events(State(state): State<Arc<AppState>>, Query(query): Query<LimitQuery>) -> ApiResult {
    let limit = limit(query.limit.or(Some(100)))?;
    let memory = Arc::clone(&state.memory);
    let events = blocking(move || memory.audit(limit).map_err(memory_error)).await?;
    Ok(Json(json!({"ok": true, "events": events})))
}

/// `GET /api/memory/stats`: counts, the vector space and the model's state.
pub(crate) async fn stats(State(state): State<Arc<AppState>>) -> ApiResult {
    let memory = Arc::clone(&state.memory);
    let stats = blocking(move || memory.stats().map_err(memory_error)).await?;
    Ok(Json(json!({"ok": true, "stats": stats, "model": state.model.phase(), "embed_pool": state.pool.stats()})))
}

/// `GET /api/memory/embedding-status`: health and download progress, with
/// the legacy (`setup_step`) and raw (`download_step`) vocabularies, the
/// model swap's re-embed (`reembed`) and the episodic backfill's rows
/// (`backfill`: step, run, done, total, remaining).
pub(crate) async fn embedding_status(State(state): State<Arc<AppState>>) -> ApiResult {
    let lifecycle = Arc::clone(&state.model);
    let memory = Arc::clone(&state.memory);
    let status = blocking(move || {
        let download = lifecycle.download_status();
        let embedder: Arc<dyn cairn_embedder::EmbeddingBackend> =
            memory.embedder().unwrap_or_else(|| lifecycle.embedder());
        let ready = embedder.is_ready();
        let phase = lifecycle.phase();
        let load_error = if ready { None } else { lifecycle.load_error() };
        let model_present = matches!(phase, Phase::Wired { .. });
        let setup_step = if ready {
            "done"
        } else if load_error.is_some() || matches!(phase, Phase::Failed { .. }) {
            "error"
        } else {
            match download.step {
                DownloadStep::Downloading | DownloadStep::Verifying | DownloadStep::WaitingRetry => "downloading",
                DownloadStep::Failed => "error",
                _ if model_present => "loading",
                _ => "idle",
            }
        };
        let error = load_error.or_else(|| match &phase {
            Phase::Failed { error } => Some(error.clone()),
            Phase::Absent { reason } => Some(reason.clone()),
            _ => download.error.clone(),
        });
        Ok(json!({
            "ok": true,
            "enabled": true,
            "provider": "ollama",
            "setup_step": setup_step,
            "download_step": download.step,
            "download_attempt": download.attempt,
            "download_max_attempts": download.max_attempts,
            "bytes_downloaded": download.bytes_done,
            "bytes_total": download.bytes_total,
            "server_healthy": model_present || ready,
            "model_loaded": ready,
            // The Retry affordance: a failed setup with no download in
            // flight (`POST /api/memory/enable-embeddings` retries it).
            "can_retry": setup_step == "error",
            "model_id": embedder.model_id(),
            "model_dim": embedder.dim(),
            "phase": phase,
            "error": error.map(|error| cairn_guard::redact_all(&error).into_owned()),
            "reembed": memory.reembed_progress(),
            "backfill": memory.backfill_progress(),
            "episodic_index": memory.episodic_index_status().ok(),
        }))
    })
    .await?;
    Ok(Json(status))
}

/// `POST /api/memory/enable-embeddings`: never blocks on the download;
/// 409 while a download is in flight.
pub(crate) async fn enable_embeddings(State(state): State<Arc<AppState>>) -> ApiResult {
    let lifecycle = Arc::clone(&state.model);
    let outcome = blocking(move || {
        lifecycle.enable().map_err(|error| match error {
            EnableError::InProgress => ApiError::conflict("setup_in_progress", error.to_string()),
            EnableError::DownloadsDisabled => ApiError::conflict("downloads_disabled", error.to_string()),
            EnableError::Failed(message) => ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "model_unusable", message),
        })
    })
    .await?;
    Ok(Json(json!({"ok": true, "status": outcome})))
}

/// `POST /api/memory/disable-embeddings`: embeddings are always on.
pub(crate) async fn disable_embeddings() -> ApiError {
    ApiError::new(StatusCode::GONE, "embeddings_always_on", "embeddings are always on; there is nothing to disable")
}

/// `GET /api/memory/settings`.
pub(crate) async fn get_settings(State(state): State<Arc<AppState>>) -> ApiResult {
    Ok(Json(json!({"ok": true, "settings": *state.settings.read()})))
}

/// `PUT /api/memory/settings`: validate, persist atomically to
/// `config.json`, then apply to the running heartbeat jobs at once.
pub(crate) async fn put_settings(State(state): State<Arc<AppState>>, JsonBody(update): JsonBody<Value>) -> ApiResult {
    let _serialised = state.settings_write.lock().await;
    let current = state.settings.read().clone();
    let path = state.config_path.clone();
    let next = current
        .apply_update(&path, &update)
        .map_err(|error| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_setting", error.to_string()))?;
    let persisted = next.clone();
    let home = state.home.clone();
    blocking(move || persist_memory_settings(&home, &persisted).map_err(ApiError::internal)).await?;
    *state.settings.write() = next.clone();
    tracing::info!(?next, "memory settings changed");
    Ok(Json(json!({"ok": true, "settings": next})))
}

#[derive(Debug, Deserialize)]
pub(crate) struct PreviewQuery {
    q: Option<String>,
    window: Option<u64>,
}

/// `GET /api/memory/context-preview?q=[&window=]`: what a new session and
/// a first message about `q` would be given (Markdown memory, semantic
/// memory, lessons, triggered skills), with the per-section account.
pub(crate) async fn context_preview(
    State(state): State<Arc<AppState>>,
    Query(query): Query<PreviewQuery>,
) -> ApiResult {
    let q = query.q.unwrap_or_default();
    if q.chars().count() > MAX_PREVIEW_QUERY_CHARS {
        return Err(ApiError::bad_request(
            "query_too_long",
            format!("q must be at most {MAX_PREVIEW_QUERY_CHARS} characters"),
        ));
    }
    if query.window == Some(0) {
        return Err(ApiError::bad_request("invalid_window", "window must be a positive number of tokens"));
    }
    blocking(move || {
        let builder = &state.live().context;
        let session = builder.build_session_context(&SessionRequest {
            model_window: query.window,
            query: &q,
            ..Default::default()
        });
        let message = builder.build_message(&MessageRequest {
            model_window: query.window,
            message: &q,
            first_in_session: true,
            preview: true,
            ..Default::default()
        });
        Ok(Json(json!({"ok": true, "query": q, "session": session, "message": message})))
    })
    .await
}

fn rejected(rejected: cairn_memory_core::Rejected) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, rejected.code(), rejected.to_string())
}

/// `GET /api/memory/lessons?limit=`: lessons, newest first.
pub(crate) async fn list_lessons(State(state): State<Arc<AppState>>, Query(query): Query<LimitQuery>) -> ApiResult {
    let limit = limit(query.limit.or(Some(cairn_memory_core::constants::MAX_LESSONS_IN_CONTEXT)))?;
    let memory = Arc::clone(&state.memory);
    let lessons = blocking(move || memory.get_lessons(limit).map_err(memory_error)).await?;
    Ok(Json(json!({"ok": true, "lessons": lessons})))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LessonWrite {
    rule: String,
    not: Option<String>,
    category: Option<String>,
    source: Option<String>,
}

/// `POST /api/memory/lessons`: teach a lesson (deduplicated against the
/// stored ones). Runs on the embed pool; 503 when it is full.
pub(crate) async fn add_lesson(State(state): State<Arc<AppState>>, JsonBody(body): JsonBody<LessonWrite>) -> ApiResult {
    let category: cairn_memory_core::LessonCategory =
        body.category.as_deref().unwrap_or("preference").parse().map_err(rejected)?;
    let source: Source = body.source.as_deref().unwrap_or("user_explicit").parse().map_err(rejected)?;
    let memory = Arc::clone(&state.memory);
    let outcome = pooled(&state, move || {
        memory.write_lesson(&body.rule, body.not.as_deref(), category, source).map_err(memory_error)
    })
    .await?;
    Ok(Json(json!({"ok": true, "result": outcome})))
}

/// `DELETE /api/memory/lessons/{key}`.
pub(crate) async fn delete_lesson(State(state): State<Arc<AppState>>, Path(key): Path<String>) -> ApiResult {
    let memory = Arc::clone(&state.memory);
    let lookup = key.clone();
    let outcome = blocking(move || memory.delete_lesson(&lookup, Source::UserExplicit).map_err(memory_error)).await?;
    match outcome {
        DeleteOutcome::Deleted => Ok(Json(json!({"ok": true, "key": key, "deleted": true}))),
        DeleteOutcome::NotFound => Err(ApiError::not_found("lesson_not_found", format!("no lesson under {key:?}"))),
    }
}
