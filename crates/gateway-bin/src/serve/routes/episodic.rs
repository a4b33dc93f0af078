//! `/api/memory/episodic*` and `/api/memory/embedding-model`: episodic
//! memory (list, search, write, delete) and changing the embedding model at
//! run time with a background re-embed.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use cairn_embedder::ModelInfo;
use cairn_memory_core::{DeleteOutcome, EpisodicQuery, NewEpisode, ReembedStep, Source};
use serde::Deserialize;
use serde_json::{Value, json};

use super::forget::ScopeQuery;
use super::{ApiResult, blocking, pooled};
use crate::model::Loaded;
use crate::serve::AppState;
use crate::serve::error::{ApiError, JsonBody, memory_error};

/// Largest page of the episodic list.
const MAX_PAGE: usize = 500;
/// Longest episodic search result list.
const MAX_SEARCH: usize = 100;
/// How long a model swap waits for the new model to load.
const SWAP_LOAD_TIMEOUT: Duration = Duration::from_secs(600);

#[derive(Debug, Deserialize)]
pub(crate) struct PageQuery {
    limit: Option<usize>,
    offset: Option<usize>,
}

/// `GET /api/memory/episodic?limit=&offset=`: active rows, newest first.
pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
    Query(query): Query<PageQuery>,
    Query(scope): Query<ScopeQuery>,
) -> ApiResult {
    let scopes = scope.filter(&state)?;
    let limit = query.limit.unwrap_or(50);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(ApiError::bad_request("invalid_limit", format!("limit must be 1 to {MAX_PAGE}")));
    }
    let offset = query.offset.unwrap_or(0);
    let memory = Arc::clone(&state.memory);
    let rows = blocking(move || memory.list_episodic_in(&scopes, limit, offset).map_err(memory_error)).await?;
    Ok(Json(json!({"ok": true, "limit": limit, "offset": offset, "episodes": rows})))
}

#[derive(Debug, Deserialize)]
pub(crate) struct SearchQuery {
    q: Option<String>,
    limit: Option<usize>,
}

/// `GET /api/memory/episodic/search?q=&limit=`: scored, diversified recall
/// (keyword results until the model is resident).
pub(crate) async fn search(
    State(state): State<Arc<AppState>>,
    Query(query): Query<SearchQuery>,
    Query(scope): Query<ScopeQuery>,
) -> ApiResult {
    let scopes = scope.filter(&state)?;
    let Some(q) = query.q.filter(|q| !q.trim().is_empty()) else {
        return Err(ApiError::bad_request("missing_query", "pass the search text as ?q="));
    };
    let limit = query.limit.unwrap_or(8);
    if !(1..=MAX_SEARCH).contains(&limit) {
        return Err(ApiError::bad_request("invalid_limit", format!("limit must be 1 to {MAX_SEARCH}")));
    }
    let memory = Arc::clone(&state.memory);
    let hits = blocking(move || {
        memory.search_episodic(&EpisodicQuery::new(q).limit(limit).scopes(scopes)).map_err(memory_error)
    })
    .await?;
    Ok(Json(json!({"ok": true, "results": hits})))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EpisodeWrite {
    text: String,
    importance: Option<f64>,
    tags: Option<Vec<String>>,
    source: Option<String>,
    /// The project the row belongs to (a scope name or directory); global without.
    project: Option<String>,
}

/// `POST /api/memory/episodic`: store a fragment through every episodic
/// rule (length, injection screen, dedup, cap). Runs on the embed pool.
pub(crate) async fn write(State(state): State<Arc<AppState>>, JsonBody(body): JsonBody<EpisodeWrite>) -> ApiResult {
    let scope = match body.project.as_deref().filter(|name| !name.is_empty()) {
        Some(name) => super::forget::named_project(&state, name)?,
        None => cairn_memory_core::Scope::Global,
    };
    let source: Source = body.source.as_deref().unwrap_or("user_explicit").parse().map_err(
        |rejected: cairn_memory_core::Rejected| {
            ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, rejected.code(), rejected.to_string())
        },
    )?;
    let mut episode = NewEpisode::new(body.text).source(source).scope(scope);
    if let Some(importance) = body.importance {
        episode = episode.importance(importance);
    }
    if let Some(tags) = body.tags {
        episode = episode.tags(tags);
    }
    let memory = Arc::clone(&state.memory);
    let outcome = pooled(&state, move || memory.write_episodic(&episode).map_err(memory_error)).await?;
    Ok(Json(json!({"ok": true, "result": outcome})))
}

/// `DELETE /api/memory/episodic/{id}`: tombstone.
pub(crate) async fn delete(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> ApiResult {
    let id: i64 =
        id.parse().map_err(|_| ApiError::bad_request("invalid_id", format!("{id:?} is not an episode id")))?;
    let memory = Arc::clone(&state.memory);
    match blocking(move || memory.delete_episodic(id).map_err(memory_error)).await? {
        DeleteOutcome::Deleted => Ok(Json(json!({"ok": true, "id": id, "deleted": true}))),
        DeleteOutcome::NotFound => Err(ApiError::not_found("episode_not_found", format!("no active episode {id}"))),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ModelChange {
    path: String,
    validate_only: Option<bool>,
}

fn folder_size(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|entry| entry.metadata().ok())
                .filter(std::fs::Metadata::is_file)
                .map(|metadata| metadata.len())
                .sum()
        })
        .unwrap_or(0)
}

/// Clears the single-flight flag when the swap thread ends, however it ends.
struct SwapFlight(Arc<std::sync::atomic::AtomicBool>);

impl Drop for SwapFlight {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// `POST /api/memory/embedding-model`: `{"path", "validate_only": true}`
/// only validates; without `validate_only` the model is swapped in the
/// background and every row re-embedded (progress in `embedding-status`).
/// An empty path means the default model. 409 `env_override_active` when
/// the model folder was given on the command line or in
/// `CAIRN_EMBED_MODEL_PATH`; 409 `reembed_in_progress` while a swap runs.
pub(crate) async fn change_model(
    State(state): State<Arc<AppState>>,
    JsonBody(body): JsonBody<ModelChange>,
) -> ApiResult {
    let validate_only = body.validate_only.unwrap_or(false);
    if !validate_only && state.model_env_override {
        return Err(ApiError::conflict(
            "env_override_active",
            "the model folder is set by --model-path or CAIRN_EMBED_MODEL_PATH, which wins at every start",
        ));
    }
    let path = body.path.trim().to_owned();
    let dir = if path.is_empty() { state.model.default_model_dir() } else { PathBuf::from(&path) };
    let probe = dir.clone();
    let info = blocking(move || {
        ModelInfo::read(&probe).map_err(|error| {
            ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_model", format!("{}: {error}", probe.display()))
        })
    })
    .await?;
    let size_bytes = folder_size(&dir);
    let description = json!({"model_id": info.model_id, "dim": info.dim, "size_bytes": size_bytes, "path": dir});
    if validate_only {
        return Ok(Json(json!({"ok": true, "valid": true, "model": description})));
    }
    if state.swap_in_flight.swap(true, Ordering::SeqCst)
        || matches!(state.memory.reembed_progress().step, ReembedStep::Applying | ReembedStep::Running)
    {
        return Err(ApiError::conflict("reembed_in_progress", "a model change is already running"));
    }
    let flight = SwapFlight(Arc::clone(&state.swap_in_flight));
    let worker = Arc::clone(&state);
    let persisted: Option<String> = (!path.is_empty()).then(|| Value::String(dir.display().to_string()).to_string());
    std::thread::Builder::new()
        .name("cairn-model-swap".to_owned())
        .spawn(move || {
            let _flight = flight;
            // Start loading now: the swap waits for the model to become
            // ready. It is served like the first model: cache over batching.
            let next: Arc<dyn cairn_embedder::EmbeddingBackend> = Arc::new(Loaded::start(&info));
            match worker.memory.swap_embedding_model(next, SWAP_LOAD_TIMEOUT) {
                Ok(progress) if progress.step == ReembedStep::Done => {
                    if let Err(error) =
                        crate::settings::write_key(&worker.home, "embedding.model_path", persisted.as_deref())
                    {
                        tracing::warn!(%error, "model changed but config.json was not updated");
                    }
                }
                Ok(progress) => tracing::warn!(error = ?progress.error, "model change failed; previous model restored"),
                Err(error) => tracing::warn!(%error, "model change refused"),
            }
        })
        .map_err(|error| ApiError::internal(format!("starting the model swap: {error}")))?;
    let current = state.memory.embedder().map(|embedder| embedder.model_id().to_owned());
    Ok(Json(json!({"ok": true, "status": "applying", "model": description, "previous_model": current})))
}
