//! `POST /api/import/scan`, `POST /api/import/apply` and
//! `GET /api/import/status`: foreign-agent import (Claude Code, Hermes,
//! OpenClaw), as `cairn import scan|apply` does.
//!
//! The body names the sources and, optionally, where they are:
//! `{"from": "all" | "claude-code" | "hermes" | "openclaw",
//!   "claude_home": DIR, "hermes_home": DIR, "openclaw_workspace": DIR,
//!   "projects": [DIR, ...], "only": ["lessons" | "facts" | "episodic" | "skills", ...],
//!   "items": [ID, ...]}`; roots default to the documented locations
//! under the user's home; `only` and `items` narrow the scan or apply to
//! categories and to the items a scan listed (each has an `id`). Skill
//! folders land as `imported/<source>/<name>` through the catalog's create. A scan reads files on a blocking thread; an
//! apply runs on the embed pool (lesson and fact writers embed), one
//! migration or import at a time (409 `transfer_in_progress`). Episodic
//! rows are written without vectors; the apply answers at once and the
//! backfill runs afterwards on the embed pool, off the request, its
//! progress at `GET /api/import/status` (the heartbeat's backfill picks up
//! whatever it leaves, e.g. while the model is still loading).

use std::path::PathBuf;
use std::sync::{Arc, LazyLock};

use axum::Json;
use axum::extract::State;
use cairn_memory_core::{
    ForeignRoots, ForeignSelection, ForeignSource, MemoryDb, apply_foreign_with, scan_foreign_with,
};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{ApiResult, blocking, pooled};
use crate::serve::AppState;
use crate::serve::error::{ApiError, JsonBody, memory_error};

/// Which sources a request reads, and where.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ImportRequest {
    from: Option<String>,
    claude_home: Option<PathBuf>,
    hermes_home: Option<PathBuf>,
    openclaw_workspace: Option<PathBuf>,
    #[serde(default)]
    projects: Vec<PathBuf>,
    #[serde(default)]
    only: Vec<String>,
    #[serde(default)]
    items: Vec<String>,
}

impl ImportRequest {
    /// The sources, roots and selection the request names, the roots
    /// completed from the gateway's settings: what a scan and an apply read.
    fn prepared(&self, state: &AppState) -> Result<(Vec<ForeignSource>, ForeignRoots, ForeignSelection), ApiError> {
        let live = state.live();
        let settings = live.home.settings();
        let roots = self.roots(settings.user_home.as_deref(), settings.openclaw_workspace.as_deref())?;
        Ok((self.sources()?, roots, self.selection()?))
    }

    fn sources(&self) -> Result<Vec<ForeignSource>, ApiError> {
        match self.from.as_deref() {
            None | Some("all") => Ok(ForeignSource::ALL.to_vec()),
            Some(name) => name
                .parse::<ForeignSource>()
                .map(|source| vec![source])
                .map_err(|error| ApiError::bad_request("invalid_source", error.to_string())),
        }
    }

    fn selection(&self) -> Result<ForeignSelection, ApiError> {
        crate::commands::import::selection(&self.only, &self.items)
            .map_err(|message| ApiError::bad_request("invalid_selection", message))
    }

    /// The roots: the body's, then `configured_openclaw` (the resolved
    /// `import.openclaw_workspace`), then the documented defaults.
    fn roots(
        &self,
        user_home: Option<&std::path::Path>,
        configured_openclaw: Option<&std::path::Path>,
    ) -> Result<ForeignRoots, ApiError> {
        let mut roots = user_home.map(ForeignRoots::under_user_home).unwrap_or_default();
        if let Some(dir) = configured_openclaw {
            roots.openclaw_workspace = Some(dir.to_path_buf());
        }
        for (field, dir, slot) in [
            ("claude_home", &self.claude_home, &mut roots.claude_home),
            ("hermes_home", &self.hermes_home, &mut roots.hermes_home),
            ("openclaw_workspace", &self.openclaw_workspace, &mut roots.openclaw_workspace),
        ] {
            if let Some(dir) = dir {
                if !dir.is_absolute() {
                    return Err(ApiError::bad_request("invalid_path", format!("{field} must be an absolute path")));
                }
                *slot = Some(dir.clone());
            }
        }
        for project in &self.projects {
            if !project.is_absolute() {
                return Err(ApiError::bad_request("invalid_path", "every project must be an absolute path"));
            }
        }
        roots.projects = self.projects.clone();
        Ok(roots)
    }
}

/// Where the backfill after the last apply stands.
#[derive(Debug, Clone, Default, Serialize)]
struct BackfillStatus {
    /// `idle`, `running`, `done`, `deferred` (the pool was full or the
    /// model not ready: the heartbeat continues) or `failed`.
    state: &'static str,
    done: usize,
    total: usize,
    embedded: usize,
    remaining: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

static BACKFILL: LazyLock<Mutex<BackfillStatus>> =
    LazyLock::new(|| Mutex::new(BackfillStatus { state: "idle", ..BackfillStatus::default() }));

/// `POST /api/import/scan`: the dry run; nothing is written.
pub(crate) async fn scan(State(state): State<Arc<AppState>>, JsonBody(body): JsonBody<ImportRequest>) -> ApiResult {
    let (sources, roots, selection) = body.prepared(&state)?;
    let memory = Arc::clone(&state.memory);
    let catalog = Arc::clone(&state.live().skills);
    let report = blocking(move || {
        let writer = crate::commands::import::CatalogSkillWriter(&catalog);
        scan_foreign_with(&memory, &roots, &sources, &selection, Some(&writer)).map_err(memory_error)
    })
    .await?;
    Ok(Json(json!({"ok": true, "report": report})))
}

/// `POST /api/import/apply`: writes through Cairn's writers and schedules
/// the backfill of the new episodic rows.
pub(crate) async fn apply(State(state): State<Arc<AppState>>, JsonBody(body): JsonBody<ImportRequest>) -> ApiResult {
    let (sources, roots, selection) = body.prepared(&state)?;
    let guard = Arc::clone(&state.transfer_lock).try_lock_owned().map_err(|_| {
        ApiError::conflict("transfer_in_progress", "a migration or import is already running; retry when it is done")
    })?;
    let memory = Arc::clone(&state.memory);
    let catalog = Arc::clone(&state.live().skills);
    let report = pooled(&state, move || {
        let _guard = guard;
        let writer = crate::commands::import::CatalogSkillWriter(&catalog);
        let report =
            apply_foreign_with(&memory, &roots, &sources, &selection, Some(&writer), None).map_err(memory_error);
        catalog.invalidate();
        report
    })
    .await?;
    let scheduled = report.deferred_episodic() > 0;
    if scheduled {
        schedule_backfill(&state);
    }
    Ok(Json(json!({
        "ok": true,
        "report": report,
        "backfill": {"scheduled": scheduled, "status": "/api/import/status"},
    })))
}

/// `GET /api/import/status`: the backfill after the last apply.
pub(crate) async fn status() -> ApiResult {
    let status = BACKFILL.lock().clone();
    Ok(Json(json!({"ok": true, "backfill": status})))
}

/// Runs the episodic backfill on the embed pool, recording its progress.
fn schedule_backfill(state: &Arc<AppState>) {
    *BACKFILL.lock() = BackfillStatus { state: "running", ..BackfillStatus::default() };
    let memory = Arc::clone(&state.memory);
    let job = move || run_backfill(&memory);
    if let Err(error) = state.pool.try_submit(job) {
        BACKFILL.lock().state = "deferred";
        tracing::debug!(%error, "backfill not scheduled; the heartbeat backfills the imported rows");
    }
}

fn run_backfill(memory: &MemoryDb) {
    let progress = |done: usize, total: usize| {
        let mut status = BACKFILL.lock();
        status.done = done;
        status.total = total;
    };
    let result = memory.backfill_missing_embeddings(Some(&progress));
    let mut status = BACKFILL.lock();
    match result {
        Ok(report) => {
            status.embedded = report.embedded;
            status.remaining = report.remaining;
            status.state = if report.remaining == 0 { "done" } else { "deferred" };
        }
        Err(error) => {
            status.state = "failed";
            status.error = Some(error.to_string());
        }
    }
}
