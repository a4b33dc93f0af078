//! The HTTP/1.1 accept loop with the limits a slow or hostile client
//! meets: a header read timeout (408), a body read timeout (408), and a
//! cap on the connections one client address holds at once (503). On
//! shutdown it stops accepting, lets every in-flight request finish and
//! closes idle connections.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt as _, LengthLimitError, Limited};
use hyper_util::rt::{TokioIo, TokioTimer};
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tower::ServiceExt as _;

use super::error::ApiError;
use crate::settings::ServerSection;

/// How long a refusal written outside hyper (503 over the cap, 408 after
/// the header timeout) may take, reading what the client still sends.
const REFUSAL_TIME: Duration = Duration::from_secs(2);
/// Pause after an accept error that is not about one connection (out of
/// file descriptors), so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(500);

/// The connection and read limits of `server` in config.json.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) header_timeout: Duration,
    pub(crate) body_timeout: Duration,
    pub(crate) max_body_bytes: usize,
    pub(crate) per_client: usize,
}

impl Limits {
    pub(crate) fn from_settings(server: &ServerSection) -> Self {
        Self {
            header_timeout: Duration::from_secs(server.header_timeout_secs),
            body_timeout: Duration::from_secs(server.body_timeout_secs),
            max_body_bytes: usize::try_from(server.max_body_bytes).unwrap_or(usize::MAX),
            per_client: usize::try_from(server.max_connections_per_client).unwrap_or(usize::MAX),
        }
    }
}

/// Open connections per client address.
#[derive(Debug, Default)]
struct Clients(Mutex<HashMap<IpAddr, usize>>);

/// One counted connection; dropping it frees the slot.
struct ClientSlot {
    clients: Arc<Clients>,
    address: IpAddr,
}

impl Clients {
    fn take(self: &Arc<Self>, address: IpAddr, cap: usize) -> Option<ClientSlot> {
        let mut open = self.0.lock();
        let count = open.entry(address).or_insert(0);
        if *count >= cap {
            return None;
        }
        *count += 1;
        Some(ClientSlot { clients: Arc::clone(self), address })
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut open = self.clients.0.lock();
        if let Some(count) = open.get_mut(&self.address) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.address);
            }
        }
    }
}

/// Serves `router` on `listener` until `shutdown` resolves, then waits
/// for the open connections to finish their requests.
pub(crate) async fn serve(listener: TcpListener, router: Router, limits: Limits, shutdown: impl Future<Output = ()>) {
    let clients = Arc::new(Clients::default());
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        while connections.try_join_next().is_some() {}
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) if is_per_connection(&error) => continue,
            Err(error) => {
                tracing::warn!(%error, "accepting a connection failed");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        match clients.take(peer.ip(), limits.per_client) {
            Some(slot) => {
                connections.spawn(connection(stream, router.clone(), limits, slot, stop_rx.clone()));
            }
            None => {
                tracing::debug!(client = %peer.ip(), "connection over the per-client cap refused");
                let message = format!(
                    "this client already holds {} open connections, the most allowed; retry after closing one",
                    limits.per_client
                );
                connections.spawn(refuse(stream, StatusCode::SERVICE_UNAVAILABLE, "too_many_connections", message));
            }
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    while connections.join_next().await.is_some() {}
}

/// Errors of one accepted connection (the client went away before the
/// accept finished); the listener itself is fine.
fn is_per_connection(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::Interrupted
    )
}

type Handled = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

async fn connection(
    stream: TcpStream,
    router: Router,
    limits: Limits,
    _slot: ClientSlot,
    mut stop: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let served = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&served);
    let service = hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| -> Handled {
        counter.fetch_add(1, Ordering::Relaxed);
        let router = router.clone();
        Box::pin(async move {
            let response = router.oneshot(request.map(Body::new)).await?;
            Ok(super::error::json_errors(response).await)
        })
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(limits.header_timeout);
    let mut conn = builder.serve_connection(TokioIo::new(stream), service);
    let mut stopping = false;
    let outcome = loop {
        if !stopping && *stop.borrow() {
            stopping = true;
            Pin::new(&mut conn).graceful_shutdown();
        }
        tokio::select! {
            outcome = std::future::poll_fn(|cx| conn.poll_without_shutdown(cx)) => break outcome,
            _ = stop.changed(), if !stopping => {}
        }
    };
    match outcome {
        Ok(()) => {}
        Err(error) if error.is_timeout() => {
            let parts = conn.into_parts();
            // A partial request, or a connection that never sent one, is
            // told why it is closed; an idle kept-alive one just closes.
            if !parts.read_buf.is_empty() || served.load(Ordering::Relaxed) == 0 {
                let message =
                    format!("the request headers did not arrive within {} s", limits.header_timeout.as_secs());
                refuse(parts.io.into_inner(), StatusCode::REQUEST_TIMEOUT, "request_timeout", message).await;
            }
        }
        Err(error) => tracing::debug!(%error, "connection ended with an error"),
    }
}

/// Writes one JSON error response on a raw connection and closes it,
/// reading (and dropping) what the client still sends for a moment so the
/// close does not reset the connection before the client reads the answer.
async fn refuse(mut stream: TcpStream, status: StatusCode, code: &'static str, message: String) {
    let body = serde_json::json!({"ok": false, "code": code, "error": message, "retry_after_secs": 1}).to_string();
    let head = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nretry-after: 1\r\n\
         connection: close\r\n\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        body.len()
    );
    let _ = tokio::time::timeout(REFUSAL_TIME, async {
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body.as_bytes()).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 1024];
        while stream.read(&mut sink).await? > 0 {}
        std::io::Result::Ok(())
    })
    .await;
}

/// Reads the whole request body within the body timeout (408) and the
/// size limit (413) before any handler sees the request.
pub(crate) async fn read_body_within(State(limits): State<Limits>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let collected = tokio::time::timeout(limits.body_timeout, Limited::new(body, limits.max_body_bytes).collect());
    match collected.await {
        Ok(Ok(collected)) => next.run(Request::from_parts(parts, Body::from(collected.to_bytes()))).await,
        Ok(Err(error)) if error.downcast_ref::<LengthLimitError>().is_some() => {
            ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "body_too_large", "the request body is larger than allowed")
                .into_response()
        }
        Ok(Err(error)) => ApiError::bad_request("invalid_body", format!("the request body could not be read: {error}"))
            .into_response(),
        Err(_) => {
            let mut response = ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "request_timeout",
                format!("the request body did not arrive within {} s", limits.body_timeout.as_secs()),
            )
            .into_response();
            response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
            response
        }
    }
}
