//! `POST /api/sessions/{key}/messages`: a host reports a conversation's
//! new messages; every 30 new messages the preferences path consolidates
//! them into semantic memory, and once the session has been idle for
//! `memory.history_idle_hours` the heartbeat consolidates it into history,
//! episodic memory and lessons.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use cairn_context::{AgentContext, MessageRequest, RuntimeIdentity, SessionRequest, Surface, ThreadMessage};
use cairn_memory_core::{MemoryError, ToolCall, TranscriptMessage};
use serde::Deserialize;
use serde_json::json;

use super::{ApiResult, pooled};
use crate::clock::now_ms;
use crate::llm::LlmCompressor;
use crate::serve::AppState;
use crate::serve::error::{ApiError, JsonBody, memory_error};

/// Longest session key.
const MAX_KEY_CHARS: usize = 128;
/// Most messages one request may add.
const MAX_MESSAGES_PER_POST: usize = 1_000;
/// Roles a transcript message may have (the role reaches the prompt as is).
const ROLES: &[&str] = &["user", "assistant", "system", "tool"];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct IncomingMessage {
    role: String,
    content: String,
    /// Tools the message called: `[{"name", "input"?}]`.
    #[serde(default)]
    tool_calls: Vec<IncomingToolCall>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct IncomingToolCall {
    name: String,
    #[serde(default)]
    input: serde_json::Value,
}

/// Most tool calls one message may carry.
const MAX_TOOL_CALLS_PER_MESSAGE: usize = 64;
/// Longest tool name.
const MAX_TOOL_NAME_CHARS: usize = 128;
/// Largest tool input (bytes of its JSON).
const MAX_TOOL_INPUT_BYTES: usize = 16 * 1024;

fn check_tool_calls(index: usize, calls: Vec<IncomingToolCall>) -> Result<Vec<ToolCall>, ApiError> {
    if calls.len() > MAX_TOOL_CALLS_PER_MESSAGE {
        return Err(ApiError::bad_request(
            "too_many_tool_calls",
            format!("messages[{index}].tool_calls lists at most {MAX_TOOL_CALLS_PER_MESSAGE} calls"),
        ));
    }
    calls
        .into_iter()
        .enumerate()
        .map(|(call, tool)| {
            let chars = tool.name.chars().count();
            if tool.name.trim().is_empty() || chars > MAX_TOOL_NAME_CHARS || tool.name.chars().any(char::is_control) {
                return Err(ApiError::bad_request(
                    "invalid_tool_call",
                    format!("messages[{index}].tool_calls[{call}].name is 1 to {MAX_TOOL_NAME_CHARS} characters"),
                ));
            }
            if tool.input.to_string().len() > MAX_TOOL_INPUT_BYTES {
                return Err(ApiError::bad_request(
                    "invalid_tool_call",
                    format!("messages[{index}].tool_calls[{call}].input is over {MAX_TOOL_INPUT_BYTES} bytes of JSON"),
                ));
            }
            Ok(ToolCall::new(tool.name, tool.input))
        })
        .collect()
}

/// Trusted runtime metadata a host passes with a session request (the
/// caller holds the gateway's token): where the turn happens. It fills the
/// `[RUNTIME]` block, and `channel` also names the channel buffer quoted
/// as `[CHANNEL HISTORY]`. Absent fields fall back to what the session
/// key says.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RuntimeMeta {
    /// The surface (`slack`, `discord`, `dashboard`, `cli`, `claude-code`, ...).
    surface: Option<String>,
    /// The channel or chat id (a channel buffer's id).
    channel: Option<String>,
    /// The model id.
    model: Option<String>,
    /// The working directory.
    workspace: Option<std::path::PathBuf>,
}

/// Longest model id or workspace path the runtime block accepts.
const MAX_RUNTIME_FIELD_CHARS: usize = 256;

fn check_runtime(meta: &RuntimeMeta) -> Result<(), ApiError> {
    if let Some(surface) = &meta.surface
        && Surface::from_session_key(&format!("{surface}:")).as_str() != surface
    {
        return Err(ApiError::bad_request(
            "invalid_surface",
            "runtime.surface is one of dashboard, slack, discord, telegram, wecom, weixin, webex, teams, cli, claude-code, kiro-cli",
        ));
    }
    if let Some(channel) = &meta.channel {
        cairn_context::validate_channel_id(channel)
            .map_err(|error| ApiError::bad_request("invalid_channel_id", format!("runtime.channel: {error}")))?;
    }
    let too_long = |text: &str| text.chars().count() > MAX_RUNTIME_FIELD_CHARS || text.chars().any(char::is_control);
    if meta.model.as_deref().is_some_and(too_long)
        || meta.workspace.as_ref().is_some_and(|path| too_long(&path.to_string_lossy()))
    {
        return Err(ApiError::bad_request(
            "invalid_runtime",
            format!(
                "runtime.model and runtime.workspace are at most {MAX_RUNTIME_FIELD_CHARS} characters, no control characters"
            ),
        ));
    }
    Ok(())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MessagesPost {
    messages: Vec<IncomingMessage>,
    /// The model's window in tokens (scales the message context's caps).
    window: Option<u64>,
    /// The agent the messages are for: a custom agent's messages run no
    /// skill triggers.
    agent: Option<String>,
    /// Where the turn happens (trusted metadata).
    #[serde(default)]
    runtime: RuntimeMeta,
}

fn check_key(key: &str) -> Result<(), ApiError> {
    let valid = !key.is_empty()
        && key.chars().count() <= MAX_KEY_CHARS
        && key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '@'));
    if valid {
        Ok(())
    } else {
        Err(ApiError::bad_request(
            "invalid_session_key",
            format!("a session key is 1 to {MAX_KEY_CHARS} characters of A-Z a-z 0-9 - _ . : @"),
        ))
    }
}

fn check_messages(messages: Vec<IncomingMessage>) -> Result<Vec<TranscriptMessage>, ApiError> {
    if messages.is_empty() {
        return Err(ApiError::bad_request("no_messages", "send at least one message"));
    }
    if messages.len() > MAX_MESSAGES_PER_POST {
        return Err(ApiError::bad_request(
            "too_many_messages",
            format!("send at most {MAX_MESSAGES_PER_POST} messages per request"),
        ));
    }
    messages
        .into_iter()
        .enumerate()
        .map(|(index, message)| {
            if !ROLES.contains(&message.role.as_str()) {
                return Err(ApiError::bad_request(
                    "invalid_role",
                    format!("messages[{index}].role must be one of {}", ROLES.join(", ")),
                ));
            }
            if message.content.trim().is_empty() && message.tool_calls.is_empty() {
                return Err(ApiError::bad_request(
                    "empty_message",
                    format!("messages[{index}] has neither content nor tool_calls"),
                ));
            }
            let tool_calls = check_tool_calls(index, message.tool_calls)?;
            Ok(TranscriptMessage::new(message.role, message.content).with_tool_calls(tool_calls))
        })
        .collect()
}

/// Thread-history messages a session start quotes (the newest ones).
const THREAD_MESSAGES: usize = 20;
/// Longest agent name a session start accepts.
const MAX_AGENT_CHARS: usize = 128;

/// An `agent` field is 1 to [`MAX_AGENT_CHARS`] characters.
fn check_agent(agent: Option<&str>) -> Result<(), ApiError> {
    if agent.is_some_and(|agent| agent.is_empty() || agent.chars().count() > MAX_AGENT_CHARS) {
        return Err(ApiError::bad_request("invalid_agent", format!("agent is 1 to {MAX_AGENT_CHARS} characters")));
    }
    Ok(())
}

/// The named agent's context (prompt, steering, skill scope); 404
/// `unknown_agent` when it does not resolve. Blocking: reads the specs.
fn agent_context(state: &AppState, agent: Option<&str>) -> Result<Option<AgentContext>, ApiError> {
    agent
        .map(|name| {
            state
                .live()
                .home
                .agent_context(name, None, None)
                .map_err(|error| ApiError::not_found("unknown_agent", format!("{error:#}")))
        })
        .transpose()
}

/// The `[RUNTIME]` identity of a session of this gateway.
fn runtime(key: &str, window: Option<u64>, agent: Option<&str>, meta: &RuntimeMeta) -> RuntimeIdentity {
    let mut runtime = RuntimeIdentity::from_session_key(key);
    if let Some(surface) = &meta.surface {
        runtime.surface = Surface::from_session_key(&format!("{surface}:"));
    }
    runtime.channel.clone_from(&meta.channel);
    runtime.model.clone_from(&meta.model);
    runtime.workspace.clone_from(&meta.workspace);
    runtime.window_tokens = window;
    runtime.agent = agent.map(str::to_owned);
    runtime.date = Some(jiff::ZonedDateTime::now().date().to_string());
    runtime
}

/// `POST /api/sessions/{key}/messages` with `{"messages": [{"role",
/// "content", "tool_calls"?: [{"name", "input"?}]}, ...], "window"?,
/// "agent"?, "runtime"?: {"surface"?, "channel"?, "model"?, "workspace"?}}`:
/// appends to the session's
/// transcript, answers the context of the last user message, scoped to the
/// agent when one is named (an unknown one is refused, 404
/// `unknown_agent`, before anything is appended; hooks applied: an
/// auto-reply short-circuits it, a transform rewrites it, context rules
/// add to it; episodic memory on every message; the runtime identity
/// refreshed on follow-up turns) and, with an LLM, runs the preferences
/// path when it is due (on the embed pool; 503 when it is full, and then
/// nothing was appended). `consolidation.status` says whether it ran
/// (`done`, with its report), was not due (`not_due`), failed (`failed`,
/// with a `code`; the messages are kept and the next trigger retries), or
/// is `off` (no LLM configured).
pub(crate) async fn post_messages(
    State(state): State<Arc<AppState>>,
    Path(key): Path<String>,
    JsonBody(body): JsonBody<MessagesPost>,
) -> ApiResult {
    check_key(&key)?;
    if body.window == Some(0) {
        return Err(ApiError::bad_request("invalid_window", "window must be a positive number of tokens"));
    }
    check_agent(body.agent.as_deref())?;
    check_runtime(&body.runtime)?;
    let window = body.window;
    let agent_name = body.agent;
    let meta = body.runtime;
    let messages = check_messages(body.messages)?;
    let appended = messages.len();
    let last_user = messages.iter().rev().find(|message| message.role == "user").map(|message| message.content.clone());
    let sessions = Arc::clone(&state.sessions);
    // Held until the pool job ends, even if this request is dropped first.
    let ordered = sessions.lock(&key).lock_owned().await;
    let session = key.clone();
    let builder = state.live().context.clone();
    let memory = Arc::clone(&state.memory);
    let worker = Arc::clone(&state);
    let (total, outcome, context) = pooled(&state, move || {
        let _ordered = ordered;
        let agent = agent_context(&worker, agent_name.as_deref())?;
        let first_in_session = sessions.is_new(&session).map_err(memory_error)?;
        let outcome = sessions.append(&session, &messages, now_ms());
        let context = last_user.map(|message| {
            let runtime = runtime(&session, window, agent_name.as_deref(), &meta);
            builder.build_message(&MessageRequest {
                model_window: window,
                message: &message,
                first_in_session,
                channel_id: meta.channel.as_deref(),
                runtime: Some(&runtime),
                agent: agent.as_ref(),
                ..Default::default()
            })
        });
        let total = memory.transcript_state(&session).map_err(memory_error)?.map_or(0, |state| state.next_seq);
        Ok((total, outcome, context))
    })
    .await?;
    let consolidation = if !state.sessions.consolidates() {
        json!({"status": "off", "reason": "no LLM configured (set llm.base_url and llm.model in config.json, or CAIRN_LLM_BASE_URL and CAIRN_LLM_MODEL)"})
    } else {
        match outcome {
            Ok(None) => json!({"status": "not_due"}),
            Ok(Some(report)) => json!({"status": "done", "report": report}),
            Err(error) => {
                let code = match &error {
                    MemoryError::Summarizer { .. } => "llm_failed",
                    MemoryError::InvalidReply { .. } => "invalid_llm_reply",
                    _ => "store_error",
                };
                let message = cairn_guard::redact_all(&error.to_string()).into_owned();
                tracing::warn!(session = %key, code, %message, "consolidation failed; the next trigger retries");
                json!({"status": "failed", "code": code, "error": message})
            }
        }
    };
    Ok(Json(json!({
        "ok": true,
        "session": key,
        "appended": appended,
        "messages": total,
        "context": context,
        "consolidation": consolidation,
    })))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SessionStart {
    /// Text semantic memory is ranked against (usually the first message).
    #[serde(default)]
    query: String,
    /// The model's window in tokens.
    window: Option<u64>,
    /// The agent whose prompt and steering are included.
    agent: Option<String>,
    /// The host restored the session with its history: no thread block.
    #[serde(default)]
    resumed: bool,
    /// Where the session happens (trusted metadata).
    #[serde(default)]
    runtime: RuntimeMeta,
}

/// `POST /api/sessions/{key}/start` with `{"query"?, "window"?, "agent"?,
/// "resumed"?, "runtime"?}`: the session context, with the session's own transcript
/// (its last 20 messages, framed) as thread history at the top, compressed
/// by the LLM when one is configured; `resumed` skips only that block.
pub(crate) async fn start(
    State(state): State<Arc<AppState>>,
    Path(key): Path<String>,
    JsonBody(body): JsonBody<SessionStart>,
) -> ApiResult {
    check_key(&key)?;
    if body.window == Some(0) {
        return Err(ApiError::bad_request("invalid_window", "window must be a positive number of tokens"));
    }
    if body.query.chars().count() > super::memory::MAX_PREVIEW_QUERY_CHARS {
        return Err(ApiError::bad_request(
            "query_too_long",
            format!("query must be at most {} characters", super::memory::MAX_PREVIEW_QUERY_CHARS),
        ));
    }
    check_agent(body.agent.as_deref())?;
    check_runtime(&body.runtime)?;
    let worker = Arc::clone(&state);
    pooled(&state, move || {
        let thread: Vec<ThreadMessage> = worker
            .sessions
            .tail(&key, THREAD_MESSAGES)
            .map_err(memory_error)?
            .into_iter()
            .filter_map(|message| match message.role.as_str() {
                "user" => Some(ThreadMessage::user(message.content)),
                "assistant" => Some(ThreadMessage::assistant(message.content)),
                _ => None,
            })
            .collect();
        let agent = agent_context(&worker, body.agent.as_deref())?;
        let compressor = worker.llm.clone().map(LlmCompressor);
        let runtime = runtime(&key, body.window, body.agent.as_deref(), &body.runtime);
        let built = worker.live().context.build_session_context(&SessionRequest {
            model_window: body.window,
            query: &body.query,
            agent: agent.as_ref(),
            runtime: Some(&runtime),
            thread: &thread,
            compressor: compressor.as_ref().map(|compressor| compressor as &dyn cairn_context::Compressor),
            resumed: body.resumed,
            ..Default::default()
        });
        Ok(Json(json!({"ok": true, "session": key, "context": built})))
    })
    .await
}

/// `GET /api/sessions/{key}`: the session's stored transcript state (next
/// message number, consolidation markers, messages kept, last activity);
/// 404 for a session with no stored message.
pub(crate) async fn get_session(State(state): State<Arc<AppState>>, Path(key): Path<String>) -> ApiResult {
    check_key(&key)?;
    let memory = Arc::clone(&state.memory);
    let lookup = key.clone();
    let found = super::blocking(move || memory.transcript_state(&lookup).map_err(memory_error)).await?;
    match found {
        Some(session) => Ok(Json(json!({"ok": true, "session": session}))),
        None => Err(ApiError::not_found("session_not_found", format!("no stored message for session {key:?}"))),
    }
}
