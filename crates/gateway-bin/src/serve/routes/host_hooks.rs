//! `POST /api/hooks/{host}/{event}`: a host hook answered by the gateway.
//!
//! The body is `{"agent": NAME | null, "input": <the host's hook JSON>,
//! "record": false}` (`record` absent for a recorded session), as `cairn
//! hook` read it from stdin; the answer is the [`HookAnswer`]
//! (`stdout`, `stderr`, `exit`) the client prints. Context events run on
//! the embed pool (the query is embedded: hybrid recall); recording
//! events append to the session's transcript before answering, and the
//! preferences consolidation they may make due runs afterwards on the
//! pool, off the hook's path.

use std::cell::RefCell;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use cairn_context::{AgentContext, ContextBuilder};
use cairn_guard::SensitivePaths;
use cairn_hooks::ToolDecision;
use cairn_memory_core::{ProjectRule, Scope, TranscriptMessage};
use serde::Deserialize;
use serde_json::Value;

use super::{ApiResult, blocking, pooled};
use crate::clock::now_ms;
use crate::host::engine::{self, HookBackend};
use crate::host::{EventKind, HookAnswer, HostName, Recall};
use crate::serve::AppState;
use crate::serve::error::{ApiError, JsonBody};
use crate::serve::live::Live;

/// The request `cairn hook` sends.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HookRequest {
    #[serde(default)]
    agent: Option<String>,
    input: Value,
    /// `false` when the hook's own environment keeps the session private
    /// (`CAIRN_PRIVATE_SESSION`); the gateway's `memory.record_sessions`
    /// can turn recording off too, never on.
    #[serde(default = "recorded_by_default")]
    record: bool,
}

fn recorded_by_default() -> bool {
    true
}

/// The gateway's stores as a hook backend.
struct GatewayBackend<'a> {
    state: &'a AppState,
    /// The settings-dependent parts this answer works with.
    live: Arc<Live>,
    /// Sessions this answer recorded into.
    recorded: RefCell<Vec<String>>,
}

impl HookBackend for GatewayBackend<'_> {
    fn context(&self) -> anyhow::Result<&ContextBuilder> {
        Ok(&self.live.context)
    }

    fn tool_decision(&self, tool: &str) -> anyhow::Result<ToolDecision> {
        Ok(self.live.config_hooks.tool_decision(tool))
    }

    fn record(&self, key: &str, scope: &Scope, message: TranscriptMessage) -> anyhow::Result<()> {
        self.state.sessions.record_in(scope, key, &[message], now_ms())?;
        let mut recorded = self.recorded.borrow_mut();
        if !recorded.iter().any(|known| known == key) {
            recorded.push(key.to_owned());
        }
        Ok(())
    }

    fn agent(&self, name: &str) -> anyhow::Result<AgentContext> {
        self.live.home.agent_context(name, None, None)
    }

    fn sensitive(&self) -> &SensitivePaths {
        self.live.home.sensitive()
    }

    fn recall(&self) -> Recall {
        if self.state.memory.embedder().is_some_and(|embedder| embedder.is_ready()) {
            Recall::Hybrid
        } else {
            Recall::Keyword("the gateway's embedding model is not loaded yet")
        }
    }

    fn max_inject_chars(&self) -> usize {
        self.live.home.settings().context.max_inject_chars
    }

    fn project_rule(&self) -> ProjectRule {
        self.live.home.settings().project_rule
    }
}

/// `POST /api/hooks/{host}/{event}`
pub(crate) async fn answer(
    State(state): State<Arc<AppState>>,
    Path((host, event)): Path<(String, String)>,
    JsonBody(request): JsonBody<HookRequest>,
) -> ApiResult {
    let Some(host) = HostName::from_key(&host) else {
        return Err(ApiError::not_found("unknown_host", format!("no host {host:?} (claude-code, kiro-cli)")));
    };
    if !request.input.is_object() {
        return Err(ApiError::bad_request("invalid_input", "input must be the host's hook JSON object"));
    }
    let kind = EventKind::of(host, &event);
    let worker = Arc::clone(&state);
    let job = move || {
        let backend = GatewayBackend { state: &worker, live: worker.live(), recorded: RefCell::new(Vec::new()) };
        let record = request.record && backend.live.home.settings().record_sessions;
        let answer = engine::answer(&backend, host, &event, request.agent.as_deref(), &request.input, record);
        Ok((answer, backend.recorded.into_inner()))
    };
    let (answer, recorded): (HookAnswer, Vec<String>) = match kind {
        Some(EventKind::Context) => pooled(&state, job).await?,
        _ => blocking(job).await?,
    };
    for key in recorded.into_iter().filter(|_| state.sessions.consolidates()) {
        let sessions = Arc::clone(&state.sessions);
        let consolidation = state.pool.try_submit(move || match sessions.consolidate_if_due(&key) {
            Ok(Some(report)) => tracing::info!(session = %key, ?report, "host session consolidated"),
            Ok(None) => {}
            Err(error) => tracing::warn!(session = %key, %error, "host session consolidation failed; retried later"),
        });
        if let Err(error) = consolidation {
            tracing::debug!(%error, "consolidation check waits for the next message");
        }
    }
    Ok(Json(serde_json::to_value(answer).map_err(ApiError::internal)?))
}
