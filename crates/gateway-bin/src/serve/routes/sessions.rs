//! `POST /api/sessions/{key}/messages`: a host reports a conversation's
//! new messages; every 30 new messages the preferences path consolidates
//! them into semantic memory, and once the session has been idle for
//! `memory.history_idle_hours` the heartbeat consolidates it into history,
//! episodic memory and lessons.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use cairn_memory_core::{MemoryError, TranscriptMessage};
use serde::Deserialize;
use serde_json::json;

use super::{ApiResult, pooled};
use crate::serve::AppState;
use crate::serve::error::{ApiError, JsonBody};
use crate::serve::sessions::now_ms;

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
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MessagesPost {
    messages: Vec<IncomingMessage>,
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
            if message.content.trim().is_empty() {
                return Err(ApiError::bad_request("empty_message", format!("messages[{index}].content is empty")));
            }
            Ok(TranscriptMessage::new(message.role, message.content))
        })
        .collect()
}

/// `POST /api/sessions/{key}/messages` with `{"messages": [{"role",
/// "content"}, ...]}`: appends to the session's transcript and runs the
/// preferences path when it is due (on the embed pool; 503 when it is full,
/// and then nothing was appended). The answer says whether consolidation
/// ran (`done`, with its report), was not due (`not_due`), or failed
/// (`failed`, with a `code`; the messages are kept and the next trigger
/// retries). 409 `consolidation_off` when no LLM is configured.
pub(crate) async fn post_messages(
    State(state): State<Arc<AppState>>,
    Path(key): Path<String>,
    JsonBody(body): JsonBody<MessagesPost>,
) -> ApiResult {
    let Some(consolidation) = state.consolidation.clone() else {
        return Err(ApiError::conflict(
            "consolidation_off",
            "no LLM configured (set llm.base_url and llm.model in config.json, or CAIRN_LLM_BASE_URL and CAIRN_LLM_MODEL)",
        ));
    };
    check_key(&key)?;
    let messages = check_messages(body.messages)?;
    let appended = messages.len();
    // Held until the pool job ends, even if this request is dropped first.
    let mut transcript = consolidation.transcript(&key).lock_owned().await;
    let session = key.clone();
    let (total, outcome) = pooled(&state, move || {
        let outcome = consolidation.append(&session, &mut transcript, messages, now_ms());
        Ok((transcript.len(), outcome))
    })
    .await?;
    let consolidation = match outcome {
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
    };
    Ok(Json(json!({
        "ok": true,
        "session": key,
        "appended": appended,
        "messages": total,
        "consolidation": consolidation,
    })))
}
