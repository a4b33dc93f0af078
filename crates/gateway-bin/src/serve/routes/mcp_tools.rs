//! `POST /api/mcp/tools/call`: a tool call of a `cairn mcp serve` session,
//! run on the gateway's stores and model through the same MCP tools a
//! stdio session has (see [`crate::mcp::proxy`]).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;

use super::{ApiResult, blocking};
use crate::mcp::proxy::ToolCallRequest;
use crate::mcp::{McpStores, call_in_process, skill_scope};
use crate::serve::AppState;
use crate::serve::error::{ApiError, JsonBody};

/// `POST /api/mcp/tools/call`
pub(crate) async fn call(
    State(state): State<Arc<AppState>>,
    JsonBody(request): JsonBody<ToolCallRequest>,
) -> ApiResult {
    let worker = Arc::clone(&state);
    let agent = request.agent.clone();
    let skill_scope = blocking(move || {
        skill_scope(&worker.live().home, agent.as_deref())
            .map_err(|error| ApiError::not_found("unknown_agent", format!("{error:#}")))
    })
    .await?;
    let stores = Arc::new(McpStores {
        memory: Arc::clone(&state.memory),
        files: Arc::clone(&state.files),
        skills: Arc::clone(&state.live().skills),
        model: Arc::clone(&state.model),
        skill_scope,
    });
    let answer = call_in_process(stores, request.params).await;
    Ok(Json(serde_json::to_value(answer).map_err(ApiError::internal)?))
}
