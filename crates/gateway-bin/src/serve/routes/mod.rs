//! The router: one module per API area, token auth on every route, a body
//! size limit, JSON errors for unknown routes and methods.

mod agents;
mod channels;
mod episodic;
mod forget;
mod host_hooks;
mod import;
mod mcp;
pub(crate) use mcp::probe_at_start;
mod mcp_tools;
mod memory;
mod review;
mod sessions;
mod skills;
mod transfer;

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router, middleware};
use serde_json::{Value, json};

use super::AppState;
use super::auth::require_token;
use super::error::ApiError;
use super::pool::PoolError;

pub(crate) type ApiResult = Result<Json<Value>, ApiError>;

/// Seconds a client is told to wait after a 503 from the embed pool.
const RETRY_AFTER_SECS: u64 = 1;

/// Runs `job` on a blocking thread (SQLite and file work never run on the executor).
pub(crate) async fn blocking<T, F>(job: F) -> Result<T, ApiError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, ApiError> + Send + 'static,
{
    tokio::task::spawn_blocking(job)
        .await
        .map_err(|error| ApiError::internal(format!("request worker failed: {error}")))?
}

/// Runs an embedding-bearing `job` on the embed pool; 503 with
/// `Retry-After` when the pool is full.
pub(crate) async fn pooled<T, F>(state: &AppState, job: F) -> Result<T, ApiError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, ApiError> + Send + 'static,
{
    match state.pool.run(job).await {
        Ok(result) => result,
        Err(error @ PoolError::Full { .. }) => {
            Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "embed_pool_full", error.to_string())
                .retry_after(RETRY_AFTER_SECS))
        }
        Err(error @ PoolError::Closed) => {
            Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "shutting_down", error.to_string())
                .retry_after(RETRY_AFTER_SECS))
        }
        Err(error @ PoolError::Lost) => Err(ApiError::internal(error)),
    }
}

/// `GET /api/health`: uptime, model, pool, heartbeat jobs, consolidation, config warnings.
async fn health(State(state): State<Arc<AppState>>) -> ApiResult {
    let consolidation = match &state.llm {
        Some(client) => json!({"enabled": true, "model": client.model(), "endpoint": client.endpoint()}),
        None => json!({
            "enabled": false,
            "reason": "no LLM configured (set llm.base_url and llm.model in config.json, or CAIRN_LLM_BASE_URL and CAIRN_LLM_MODEL)",
        }),
    };
    Ok(Json(json!({
        "ok": true,
        "version": env!("CARGO_PKG_VERSION"),
        "uptime_secs": state.started.elapsed().as_secs(),
        "model": state.model.phase(),
        "embed_pool": state.pool.stats(),
        "heartbeat": state.heartbeat.snapshot(),
        "consolidation": consolidation,
        "settings": *state.settings.read(),
        "config_warnings": state.config_warnings,
    })))
}

/// `GET /api/hooks`: the config hooks' rule count and warnings, and the
/// merged user hook set with every dropped entry and why (as `cairn hooks
/// check` prints them).
async fn hooks(State(state): State<Arc<AppState>>) -> ApiResult {
    let live = state.live();
    let dropped: Vec<serde_json::Value> = live
        .user_hooks
        .dropped
        .iter()
        .map(|dropped| {
            serde_json::json!({
                "location": dropped.location,
                "command": dropped.command,
                "reason": dropped.reason,
                "why": dropped.reason.to_string(),
            })
        })
        .collect();
    Ok(Json(serde_json::json!({
        "ok": true,
        "config_hooks": {"rules": live.config_hooks.rule_count(), "warnings": live.hook_warnings},
        "hooks": live.user_hooks.hooks,
        "dropped": dropped,
        "notices": live.user_hooks.notices,
    })))
}

/// `POST /api/config/reload`: reads the settings again and applies what
/// can change while running; says which changed keys need a restart.
async fn reload_config(State(state): State<Arc<AppState>>) -> ApiResult {
    let worker = Arc::clone(&state);
    let report = blocking(move || {
        worker
            .reload()
            .map_err(|error| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "config_invalid", format!("{error:#}")))
    })
    .await?;
    Ok(Json(json!({"ok": true, "applied": report.applied, "restart_required": report.restart_required})))
}

async fn not_found() -> ApiError {
    ApiError::not_found("no_route", "no such API route")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "this route does not take that method")
}

/// The whole API.
pub(crate) fn router(state: Arc<AppState>, max_body_bytes: usize) -> Router {
    let api = Router::new()
        .route("/api/health", get(health))
        .route("/api/hooks", get(hooks))
        .route("/api/config/reload", post(reload_config))
        .route("/api/hooks/{host}/{event}", post(host_hooks::answer))
        .route("/api/memory/semantic", get(memory::list_semantic).put(memory::put_semantic))
        .route("/api/memory/semantic/{key}", axum::routing::delete(memory::delete_semantic))
        .route("/api/memory/events", get(memory::events))
        .route("/api/memory/lessons", get(memory::list_lessons).post(memory::add_lesson))
        .route("/api/memory/lessons/{key}", axum::routing::delete(memory::delete_lesson))
        // The specification's spelling of the lessons routes, served by the same handlers.
        .route("/api/lessons", get(memory::list_lessons).post(memory::add_lesson))
        .route("/api/lessons/{key}", axum::routing::delete(memory::delete_lesson))
        .route("/api/memory/stats", get(memory::stats))
        .route("/api/memory/scopes", get(forget::scopes))
        .route("/api/memory/forget", post(forget::forget))
        .route("/api/memory/pending", get(review::list))
        .route("/api/memory/pending/{id}", get(review::show))
        .route("/api/memory/pending/{id}/approve", post(review::approve))
        .route("/api/memory/pending/{id}/reject", post(review::reject))
        .route("/api/memory/runs", get(review::runs))
        .route("/api/memory/runs/revert", post(review::revert))
        .route("/api/memory/episodic", get(episodic::list).post(episodic::write))
        .route("/api/memory/episodic/search", get(episodic::search))
        .route("/api/memory/episodic/{id}", axum::routing::delete(episodic::delete))
        .route("/api/memory/embedding-model", post(episodic::change_model))
        .route("/api/memory/embedding-status", get(memory::embedding_status))
        .route("/api/memory/enable-embeddings", post(memory::enable_embeddings))
        .route("/api/memory/disable-embeddings", post(memory::disable_embeddings))
        .route("/api/memory/settings", get(memory::get_settings).put(memory::put_settings))
        .route("/api/memory/context-preview", get(memory::context_preview))
        .route("/api/memory/migrate", post(transfer::migrate))
        .route("/api/memory/import", post(transfer::import))
        .route("/api/import/scan", post(import::scan))
        .route("/api/import/apply", post(import::apply))
        .route("/api/import/status", get(import::status))
        .route("/api/sessions/{key}/messages", post(sessions::post_messages))
        .route("/api/sessions/{key}/start", post(sessions::start))
        .route("/api/sessions/{key}", get(sessions::get_session))
        .route("/api/channels/{id}", get(channels::get_channel))
        .route("/api/channels/{id}/messages", post(channels::post_messages))
        .route("/api/channels/{id}/observe", post(channels::observe))
        .route("/api/skills", get(skills::list).post(skills::create))
        .route("/api/skills/-/inject-on-trigger", post(skills::inject_on_trigger))
        .route("/api/skills/-/pending", get(skills::pending))
        .route("/api/skills/-/pending/{slug}/approve", post(skills::approve))
        .route("/api/skills/-/pending/{slug}/reject", post(skills::reject))
        .route("/api/skills/-/auto/{slug}/restore", post(skills::restore))
        .route("/api/skills/-/audit", get(skills::audit))
        .route("/api/skills/-/lint", get(skills::lint))
        .route("/api/skills/{*name}", get(skills::get).put(skills::replace).delete(skills::delete))
        .route("/api/agents", get(agents::list))
        .route("/api/agents/detail/{name}", get(agents::get_detail).patch(agents::patch_detail))
        .route("/api/agents/{name}/projection", get(agents::get_projection))
        .route("/api/mcp", get(mcp::list))
        .route("/api/mcp/probe", get(mcp::cached).post(mcp::fresh))
        .route("/api/mcp/toggle", post(mcp::toggle))
        .route("/api/mcp/sync", post(mcp::sync))
        .route("/api/mcp/import", post(mcp::import))
        .route("/api/mcp/tools/call", post(mcp_tools::call))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed);
    api.layer(middleware::from_fn_with_state(state.token.clone(), require_token))
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .layer(middleware::from_fn(crate::dashboard::api_headers))
        .with_state(state)
        .merge(crate::dashboard::router())
}
