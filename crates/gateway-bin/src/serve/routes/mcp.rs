//! `/api/mcp*`: the MCP servers the user has (list, probe, enable/disable,
//! sync, import), the same operations as `cairn mcp ...`.
//!
//! Probes run in a short-lived `cairn mcp probe --json` process: a probe
//! makes its process a child subreaper so it can reap a server's whole
//! process group, an attribute the gateway itself must not take on. The
//! last full probe is kept for ten minutes (a gateway starts one when any
//! server is defined and enabled); `GET /api/mcp/probe` answers
//! from it without waiting and starts a probe in the background when it is
//! missing or stale, `POST /api/mcp/probe` probes now and refreshes it.
//! Spec edits and imports take the agents write lock, as the agent PATCH
//! does.

use std::sync::{Arc, LazyLock};
use std::time::Instant;

use axum::Json;
use axum::extract::{Query, State};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiResult, blocking};
use crate::mcp::discovery::edit::{self, EditRefused};
use crate::mcp::discovery::import::{self, ImportRequest, Origin};
use crate::mcp::discovery::probe::{self, ProbeReport};
use crate::mcp::discovery::{Discovery, Locations, UnknownAgent};
use crate::serve::AppState;
use crate::serve::error::{ApiError, JsonBody};

/// Longest per-server deadline a request may ask for.
const MAX_TIMEOUT_SECS: u64 = 120;
/// Most servers one request may name.
const MAX_NAMED_SERVERS: usize = 64;

/// The gateway's last full probe (one gateway serves one home).
struct ProbeCache {
    last: parking_lot::Mutex<Option<(Instant, ProbeReport)>>,
    running: std::sync::atomic::AtomicBool,
}

static CACHE: LazyLock<ProbeCache> =
    LazyLock::new(|| ProbeCache { last: parking_lot::Mutex::new(None), running: false.into() });

fn locations(state: &AppState) -> Result<Locations, ApiError> {
    Locations::from_home(&state.live().home, None).map_err(ApiError::internal)
}

fn discovery(state: &AppState, agent: Option<&str>) -> Result<Discovery, ApiError> {
    let locations = locations(state)?;
    Discovery::load(&locations, agent).map_err(|error| match error.downcast_ref::<UnknownAgent>() {
        Some(unknown) => ApiError::not_found("agent_not_found", unknown.to_string()),
        None => ApiError::conflict("agent_unresolved", format!("{error:#}")),
    })
}

/// The agent an edit applies to: the one named, else the only agent spec.
fn editing_agent(state: &AppState, named: Option<&str>) -> Result<String, ApiError> {
    Discovery::editing_agent(&locations(state)?, named).map_err(refused)
}

/// Runs `edit` with the agent spec `agent` names (default: the only one)
/// and its discovery, under the agents' write lock, off the executor.
async fn edit_agent_spec<T: Send + 'static>(
    state: &Arc<AppState>,
    agent: Option<String>,
    edit: impl FnOnce(String, &Discovery) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    let write_lock = Arc::clone(&state.live().agents.write_lock);
    let _serialised = write_lock.lock().await;
    let worker = Arc::clone(state);
    blocking(move || {
        let agent = editing_agent(&worker, agent.as_deref())?;
        let discovery = discovery(&worker, Some(&agent))?;
        edit(agent, &discovery)
    })
    .await
}

fn validate_name(field: &str, name: &str) -> Result<(), ApiError> {
    if name.is_empty() || name.len() > 200 || name.chars().any(char::is_control) {
        return Err(ApiError::bad_request("invalid_name", format!("`{field}` must be a name of 1 to 200 characters")));
    }
    Ok(())
}

/// `?agent=` of the list.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    agent: Option<String>,
}

/// `GET /api/mcp`.
pub(crate) async fn list(State(state): State<Arc<AppState>>, Query(query): Query<ListQuery>) -> ApiResult {
    if let Some(agent) = &query.agent {
        validate_name("agent", agent)?;
    }
    blocking(move || {
        let discovery = discovery(&state, query.agent.as_deref())?;
        let mut listing = discovery.listing();
        listing["ok"] = json!(true);
        Ok(Json(listing))
    })
    .await
}

/// Runs `cairn mcp probe --json` for this gateway's home.
fn probe_in_helper(state: &AppState, servers: &[String], timeout_secs: u64) -> Result<ProbeReport, ApiError> {
    let exe = std::env::current_exe().map_err(ApiError::internal)?;
    let mut command = std::process::Command::new(exe);
    command.arg("--home").arg(&state.home).args(["mcp", "probe", "--json", "--timeout-secs"]);
    command.arg(timeout_secs.to_string());
    for server in servers {
        command.arg(format!("--server={server}"));
    }
    command.stdin(std::process::Stdio::null());
    let output = command.output().map_err(|error| ApiError::internal(format!("starting the probe: {error}")))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let message = cairn_guard::redact_all(stderr.trim().trim_start_matches("error: ")).into_owned();
        return Err(ApiError::bad_request("probe_refused", message));
    }
    serde_json::from_slice(&output.stdout).map_err(|error| ApiError::internal(format!("reading the probe: {error}")))
}

fn cached_view(probing: bool) -> Value {
    let last = CACHE.last.lock();
    match &*last {
        None => json!({"ok": true, "state": "empty", "probing": probing, "results": [], "skipped": []}),
        Some((at, report)) => {
            let age = at.elapsed();
            let fresh = age < probe::CACHE_TTL;
            json!({
                "ok": true,
                "state": if fresh { "fresh" } else { "stale" },
                "probing": probing,
                "age_secs": age.as_secs(),
                "probed_at": report.probed_at,
                "results": report.results,
                "skipped": report.skipped,
            })
        }
    }
}

fn start_background_probe(state: Arc<AppState>) -> bool {
    if CACHE.running.swap(true, std::sync::atomic::Ordering::AcqRel) {
        return true;
    }
    tokio::task::spawn_blocking(move || {
        match probe_in_helper(&state, &[], probe::PROBE_TIMEOUT.as_secs()) {
            Ok(report) => *CACHE.last.lock() = Some((Instant::now(), report)),
            Err(error) => tracing::warn!(message = %error.message, "the background MCP probe failed"),
        }
        CACHE.running.store(false, std::sync::atomic::Ordering::Release);
    });
    true
}

/// At gateway start: discovery runs once and, when any server is defined
/// and not disabled, a full probe starts in the background, so the
/// dashboard's MCP page opens on fresh results.
pub(crate) async fn probe_at_start(state: Arc<AppState>) {
    let worker = Arc::clone(&state);
    let any_enabled = tokio::task::spawn_blocking(move || {
        let discovery = discovery(&worker, None).ok()?;
        Some(discovery.effective().iter().any(|definition| !definition.server.disabled))
    })
    .await
    .ok()
    .flatten()
    .unwrap_or(false);
    if any_enabled {
        start_background_probe(state);
    }
}

/// `GET /api/mcp/probe`: the cached probe, at once; a missing or stale
/// cache starts a probe in the background (`probing: true`).
pub(crate) async fn cached(State(state): State<Arc<AppState>>) -> ApiResult {
    let stale = CACHE.last.lock().as_ref().is_none_or(|(at, _)| at.elapsed() >= probe::CACHE_TTL);
    let running = CACHE.running.load(std::sync::atomic::Ordering::Acquire);
    let probing = if stale { start_background_probe(state) } else { running };
    Ok(Json(cached_view(probing)))
}

/// The body of `POST /api/mcp/probe`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ProbeBody {
    #[serde(default)]
    servers: Vec<String>,
    timeout_secs: Option<u64>,
}

/// `POST /api/mcp/probe`: probes now (every enabled server, or `servers`)
/// and refreshes the cache.
pub(crate) async fn fresh(State(state): State<Arc<AppState>>, body: axum::body::Bytes) -> ApiResult {
    let body: ProbeBody = if body.iter().all(u8::is_ascii_whitespace) {
        ProbeBody::default()
    } else {
        serde_json::from_slice(&body).map_err(|error| ApiError::bad_request("invalid_body", error.to_string()))?
    };
    let timeout_secs = body.timeout_secs.unwrap_or(probe::PROBE_TIMEOUT.as_secs());
    if timeout_secs == 0 || timeout_secs > MAX_TIMEOUT_SECS {
        return Err(ApiError::bad_request(
            "invalid_timeout",
            format!("`timeout_secs` must be between 1 and {MAX_TIMEOUT_SECS}"),
        ));
    }
    if body.servers.len() > MAX_NAMED_SERVERS {
        return Err(ApiError::bad_request("too_many_servers", format!("name at most {MAX_NAMED_SERVERS} servers")));
    }
    for server in &body.servers {
        validate_name("servers", server)?;
    }
    blocking(move || {
        let report = probe_in_helper(&state, &body.servers, timeout_secs)?;
        let mut answer = serde_json::to_value(&report).map_err(ApiError::internal)?;
        if body.servers.is_empty() {
            *CACHE.last.lock() = Some((Instant::now(), report));
        } else if let Some((_, cached)) = CACHE.last.lock().as_mut() {
            for result in &report.results {
                match cached.results.iter_mut().find(|known| known.name == result.name) {
                    Some(known) => *known = result.clone(),
                    None => cached.results.push(result.clone()),
                }
            }
        }
        answer["ok"] = json!(true);
        Ok(Json(answer))
    })
    .await
}

fn refused(error: EditRefused) -> ApiError {
    match error.code {
        "agent_required" => ApiError::bad_request(error.code, error.message),
        "unknown_server" => ApiError::not_found(error.code, error.message),
        "write_failed" | "unreadable" => ApiError::internal(error.message),
        code => ApiError::conflict(code, error.message),
    }
}

/// The body of `POST /api/mcp/toggle`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ToggleBody {
    /// Default: the only agent spec there is.
    agent: Option<String>,
    server: String,
    enabled: bool,
}

/// `POST /api/mcp/toggle` with `{"agent"?, "server", "enabled"}` (no
/// agent: the only agent spec there is): `@server` added to (or removed from) the
/// agent's `tools` and `allowedTools`; enabling also removes `disabled: true`
/// from the server's entry in the spec's `mcpServers`.
pub(crate) async fn toggle(State(state): State<Arc<AppState>>, JsonBody(body): JsonBody<ToggleBody>) -> ApiResult {
    if let Some(agent) = &body.agent {
        validate_name("agent", agent)?;
    }
    validate_name("server", &body.server)?;
    edit_agent_spec(&state, body.agent, move |agent, discovery| {
        let outcome = edit::toggle(discovery, &body.server, body.enabled).map_err(refused)?;
        Ok(Json(json!({
            "ok": true,
            "agent": agent,
            "server": body.server,
            "enabled": body.enabled,
            "path": outcome.path,
            "changed": outcome.changed,
            "cleared_disabled": outcome.cleared_disabled,
            "notices": outcome.notices,
        })))
    })
    .await
}

/// The body of `POST /api/mcp/sync`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SyncBody {
    /// Default: the only agent spec there is.
    agent: Option<String>,
    #[serde(default)]
    dry_run: bool,
}

/// `POST /api/mcp/sync`: the mcp.json servers added to the agent's
/// `mcpServers` (existing definitions win).
pub(crate) async fn sync(State(state): State<Arc<AppState>>, JsonBody(body): JsonBody<SyncBody>) -> ApiResult {
    if let Some(agent) = &body.agent {
        validate_name("agent", agent)?;
    }
    edit_agent_spec(&state, body.agent, move |agent, discovery| {
        let outcome = edit::sync(discovery, body.dry_run).map_err(refused)?;
        let mut answer = serde_json::to_value(&outcome).map_err(ApiError::internal)?;
        answer["ok"] = json!(true);
        answer["agent"] = json!(agent);
        Ok(Json(answer))
    })
    .await
}

/// The body of `POST /api/mcp/import`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ImportBody {
    /// Origins to read (default: all).
    #[serde(default)]
    from: Vec<Origin>,
    #[serde(default)]
    only: Vec<String>,
    #[serde(default)]
    dry_run: bool,
}

/// `POST /api/mcp/import`: servers from Claude Code, Hermes and OpenClaw
/// configs into `<home>/mcp.json`, disabled; every decision with its reason.
pub(crate) async fn import(State(state): State<Arc<AppState>>, JsonBody(body): JsonBody<ImportBody>) -> ApiResult {
    for name in &body.only {
        validate_name("only", name)?;
    }
    let write_lock = Arc::clone(&state.live().agents.write_lock);
    let _serialised = write_lock.lock().await;
    let worker = Arc::clone(&state);
    blocking(move || {
        let locations = locations(&worker)?;
        let origins = if body.from.is_empty() { Origin::ALL.to_vec() } else { body.from.clone() };
        let request = ImportRequest { origins, file: None, only: body.only.clone(), dry_run: body.dry_run };
        let report = import::run_import(&locations, &request)
            .map_err(|error| match error {
                import::ImportError::Ledger { .. } => ApiError::conflict("ledger_unreadable", error.to_string()),
                other => ApiError::internal(other),
            })?
            .shown();
        let mut answer = serde_json::to_value(&report).map_err(ApiError::internal)?;
        answer["ok"] = json!(true);
        Ok(Json(answer))
    })
    .await
}
