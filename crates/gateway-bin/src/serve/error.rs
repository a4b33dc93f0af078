//! JSON errors of the HTTP API: every refusal carries a stable `code`.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::locked_edit::LockedEditError;

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
    if error.is_damaged_store() {
        return ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "memory_damaged", error.to_string());
    }
    if let Some(rejected) = error.rejection() {
        return ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, rejected.code(), rejected.to_string());
    }
    // A store that is busy, restarting or out of reach (PostgreSQL stopped)
    // is a condition to retry, not a fault of the gateway.
    use cairn_memory_core::StorageErrorKind;
    match error.storage_kind() {
        Some(StorageErrorKind::Busy | StorageErrorKind::Interrupted) => {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "store_busy", shown(&error)).retry_after(1)
        }
        Some(StorageErrorKind::Io) => {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", shown(&error)).retry_after(1)
        }
        _ => ApiError::internal(error),
    }
}

/// A store error as a client may read it (credentials redacted).
fn shown(error: &cairn_memory_core::MemoryError) -> String {
    cairn_guard::redact_all(&error.to_string()).into_owned()
}

/// Largest non-JSON error body carried over into the JSON message.
const MAX_CARRIED_ERROR_BYTES: usize = 1024;

/// Makes every error response JSON: a refusal written by an extractor
/// (`?limit=-1`, a bad path parameter) or a layer in plain text becomes an
/// [`ApiError`] with its text as the message. A 401 never says which
/// methods the route takes. Runs on the router's whole answer (the
/// method router adds `Allow` after every layer a route has).
pub(crate) async fn json_errors(response: Response) -> Response {
    let status = response.status();
    if status == StatusCode::UNAUTHORIZED {
        let mut response = response;
        response.headers_mut().remove(header::ALLOW);
        return response;
    }
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = match axum::body::to_bytes(body, MAX_CARRIED_ERROR_BYTES).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).trim().to_owned(),
        Err(_) => String::new(),
    };
    let message = match text.is_empty() {
        true => status.canonical_reason().unwrap_or("request refused").to_owned(),
        false => text,
    };
    let mut rebuilt = ApiError::new(status, status_code_name(status), message).into_response();
    for name in [header::ALLOW, header::RETRY_AFTER, header::CONNECTION] {
        if let Some(value) = parts.headers.get(&name) {
            rebuilt.headers_mut().insert(name, value.clone());
        }
    }
    rebuilt
}

/// The stable `code` of an error response that had none.
fn status_code_name(status: StatusCode) -> &'static str {
    match status {
        StatusCode::BAD_REQUEST => "bad_request",
        StatusCode::NOT_FOUND => "no_route",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::REQUEST_TIMEOUT => "request_timeout",
        StatusCode::PAYLOAD_TOO_LARGE => "body_too_large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        StatusCode::UNPROCESSABLE_ENTITY => "invalid_request",
        StatusCode::SERVICE_UNAVAILABLE => "unavailable",
        status if status.is_server_error() => "internal",
        _ => "refused",
    }
}

impl From<LockedEditError> for ApiError {
    fn from(error: LockedEditError) -> Self {
        let busy = matches!(error, LockedEditError::Busy { .. });
        let message = format!("{:#}", anyhow::Error::from(error));
        if busy {
            return Self::conflict("busy", message).retry_after(1);
        }
        Self::internal(message)
    }
}
