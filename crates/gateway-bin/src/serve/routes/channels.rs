//! `/api/channels/{id}*`: the channel buffers a session's message context
//! quotes as `[CHANNEL HISTORY]`. A host that sits in a group chat reports
//! what others said there (`POST .../messages`); a session message whose
//! `runtime.channel` names the channel gets the buffer's recent lines.
//! Every text is screened and redacted where it is recorded (the channel
//! buffer's own write path); a text that trips the injection screen is
//! kept as a withheld line. Outside observe mode a buffer lives in memory
//! (50 lines, five minutes); `observe` keeps 200 lines for a week under
//! `<home>/history/`.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use cairn_context::{Authorization, ContextError, RecordOutcome, validate_channel_id};
use serde::Deserialize;
use serde_json::json;

use super::{ApiResult, blocking};
use crate::serve::AppState;
use crate::serve::error::{ApiError, JsonBody};

/// Most messages one request may record.
const MAX_MESSAGES_PER_POST: usize = 200;
/// Longest message text, in characters (a line shows at most 300).
const MAX_TEXT_CHARS: usize = 4_000;

fn check_channel(id: &str) -> Result<(), ApiError> {
    validate_channel_id(id).map_err(|error| ApiError::bad_request("invalid_channel_id", error.to_string()))
}

fn channel_error(error: ContextError) -> ApiError {
    match error {
        ContextError::InvalidChannelId { .. } => ApiError::bad_request("invalid_channel_id", error.to_string()),
        other => ApiError::internal(other),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ChannelMessage {
    sender: String,
    text: String,
    /// The sender is on the host's allow list (default); `false`: the
    /// message is counted and never recorded.
    #[serde(default = "authorised")]
    authorized: bool,
}

fn authorised() -> bool {
    true
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ChannelPost {
    messages: Vec<ChannelMessage>,
}

/// `POST /api/channels/{id}/messages` with `{"messages": [{"sender",
/// "text", "authorized"?}]}`: records each message in the channel's
/// buffer; answers how many were recorded, withheld (injection screen)
/// and refused (sender not authorised).
pub(crate) async fn post_messages(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<ChannelPost>,
) -> ApiResult {
    check_channel(&id)?;
    if body.messages.is_empty() {
        return Err(ApiError::bad_request("no_messages", "send at least one message"));
    }
    if body.messages.len() > MAX_MESSAGES_PER_POST {
        return Err(ApiError::bad_request(
            "too_many_messages",
            format!("send at most {MAX_MESSAGES_PER_POST} messages per request"),
        ));
    }
    for (index, message) in body.messages.iter().enumerate() {
        if message.text.trim().is_empty() || message.text.chars().count() > MAX_TEXT_CHARS {
            return Err(ApiError::bad_request(
                "invalid_message",
                format!("messages[{index}].text is 1 to {MAX_TEXT_CHARS} characters"),
            ));
        }
    }
    let channels = Arc::clone(&state.live().channels);
    blocking(move || {
        let (mut recorded, mut withheld, mut refused) = (0_usize, 0_usize, 0_usize);
        for message in &body.messages {
            let authorization = Authorization::from_allowed(message.authorized);
            match channels.record(&id, &message.sender, &message.text, authorization).map_err(channel_error)? {
                RecordOutcome::Recorded => recorded += 1,
                RecordOutcome::Withheld => withheld += 1,
                RecordOutcome::RefusedUnauthorized => refused += 1,
            }
        }
        Ok(Json(json!({
            "ok": true,
            "channel": id,
            "recorded": recorded,
            "withheld": withheld,
            "refused_unauthorized": refused,
            "entries": channels.entries(&id).len(),
        })))
    })
    .await
}

/// `GET /api/channels/{id}`: the buffer's live lines, oldest first, as
/// the prompt shows them, and whether the channel is observed.
pub(crate) async fn get_channel(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> ApiResult {
    check_channel(&id)?;
    let channels = Arc::clone(&state.live().channels);
    blocking(move || {
        let entries: Vec<_> = channels
            .entries(&id)
            .iter()
            .map(|entry| json!({"at_ms": entry.at_millis, "withheld": entry.withheld, "line": entry.line()}))
            .collect();
        Ok(Json(json!({"ok": true, "channel": id, "observe": channels.is_observing(&id), "entries": entries})))
    })
    .await
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ObserveBody {
    observe: bool,
}

/// `POST /api/channels/{id}/observe` with `{"observe": bool}`: observe
/// mode keeps the buffer on disk (200 lines, a week); leaving it deletes
/// the file.
pub(crate) async fn observe(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<ObserveBody>,
) -> ApiResult {
    check_channel(&id)?;
    let channels = Arc::clone(&state.live().channels);
    blocking(move || {
        if body.observe {
            channels.set_observe(&id).map_err(channel_error)?;
        } else {
            channels.unset_observe(&id).map_err(channel_error)?;
        }
        Ok(Json(json!({"ok": true, "channel": id, "observe": body.observe})))
    })
    .await
}
