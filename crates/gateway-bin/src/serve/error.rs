//! JSON errors of the HTTP API: every refusal carries a stable `code`.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::json;

/// An API error: status, stable code, human message, optional details.
#[derive(Debug)]
pub(crate) struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) code: &'static str,
    pub(crate) message: String,
    pub(crate) retry_after_secs: Option<u64>,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into(), retry_after_secs: None }
    }

    pub(crate) fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    pub(crate) fn not_found(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, code, message)
    }

    pub(crate) fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, code, message)
    }

    /// A store or I/O fault: logged in full, reported without internals.
    pub(crate) fn internal(error: impl std::fmt::Display) -> Self {
        let message = cairn_guard::redact_all(&error.to_string()).into_owned();
        tracing::error!(%message, "request failed");
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    pub(crate) fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after_secs = Some(secs);
        self
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({"ok": false, "code": self.code, "error": self.message});
        if let Some(secs) = self.retry_after_secs {
            body["retry_after_secs"] = json!(secs);
        }
        let mut response = (self.status, Json(body)).into_response();
        if let Some(secs) = self.retry_after_secs {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

impl From<anyhow::Error> for ApiError {
    fn from(error: anyhow::Error) -> Self {
        Self::internal(format!("{error:#}"))
    }
}

/// `Json<T>` whose refusals are [`ApiError`]s: 413 `body_too_large`,
/// 415 `unsupported_media_type`, 400 `invalid_json` / `invalid_body`.
#[derive(Debug)]
pub(crate) struct JsonBody<T>(pub(crate) T);

impl<S, T> FromRequest<S> for JsonBody<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        match Json::<T>::from_request(request, state).await {
            Ok(Json(value)) => Ok(Self(value)),
            Err(rejection) => Err(json_rejection(rejection)),
        }
    }
}

fn json_rejection(rejection: JsonRejection) -> ApiError {
    let status = rejection.status();
    let message = rejection.body_text();
    match rejection {
        _ if status == StatusCode::PAYLOAD_TOO_LARGE => {
            ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "body_too_large", "the request body is larger than allowed")
        }
        JsonRejection::MissingJsonContentType(_) => ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "send the body as Content-Type: application/json",
        ),
        JsonRejection::JsonSyntaxError(_) => ApiError::bad_request("invalid_json", message),
        JsonRejection::JsonDataError(_) => ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_body", message),
        _ => ApiError::new(status, "invalid_body", message),
    }
}

/// Maps a rejected memory write to 422 with the rule's own code.
pub(crate) fn memory_error(error: cairn_memory_core::MemoryError) -> ApiError {
    match error.rejection() {
        Some(rejected) => ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, rejected.code(), rejected.to_string()),
        None => ApiError::internal(error),
    }
}
