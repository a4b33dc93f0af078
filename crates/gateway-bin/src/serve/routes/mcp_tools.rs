//! `POST /api/mcp/tools/call`: a tool call of a `cairn mcp serve` session,
//! run on the gateway's stores and model through the same MCP tools a
//! stdio session has (see [`crate::mcp::proxy`]).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use cairn_context::AgentScope;

use super::{ApiResult, blocking};
use crate::mcp::proxy::ToolCallRequest;
use crate::mcp::{McpStores, skill_scope};
use crate::serve::AppState;
use crate::serve::error::{ApiError, JsonBody};

/// `POST /api/mcp/tools/call`
pub(crate) async fn call(
    State(state): State<Arc<AppState>>,
    JsonBody(request): JsonBody<ToolCallRequest>,
) -> ApiResult {
    // The default agent's scope is the whole catalog; a named one reads its spec.
    let skill_scope = match request.agent.clone() {
        None => AgentScope::default(),
        Some(agent) => {
            let worker = Arc::clone(&state);
            blocking(move || {
                skill_scope(&worker.live().home, Some(&agent))
                    .map_err(|error| ApiError::not_found("unknown_agent", format!("{error:#}")))
            })
            .await?
        }
    };
    let project = match request.project.as_deref() {
        None => None,
        Some(name) => match cairn_memory_core::Scope::parse(name) {
            Some(scope) => Some(scope),
            None => return Err(ApiError::bad_request("invalid_scope", format!("{name:?} is not a project scope"))),
        },
    };
    let stores = Arc::new(McpStores {
        project,
        memory: Arc::clone(&state.memory),
        files: Arc::clone(&state.files),
        skills: Arc::clone(&state.live().skills),
        model: Arc::clone(&state.model),
        skill_scope,
        review_ttl_ms: state.live().home.settings().skills.auto.pending_ttl_ms(),
    });
    let answer = state.mcp_sessions.call(request.agent, stores, request.params).await;
    Ok(Json(serde_json::to_value(answer).map_err(ApiError::internal)?))
}
