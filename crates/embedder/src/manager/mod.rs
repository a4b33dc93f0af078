//! [`ModelManager`]: finds the embedding model on disk or downloads it.
//!
//! Resolution order: an explicit path (the binary maps
//! `CAIRN_EMBED_MODEL_PATH` to it), a configured path, an installed copy
//! under `<models dir>/<name>`, and only then a download of the
//! [`ModelSource`]'s artifacts over HTTPS. Every download is hashed while it
//! streams, checked against its sha256 pin and minimum size, staged in a
//! unique folder inside the models directory, and renamed into place only
//! when every file verifies: a failed or tampered download never leaves a
//! file at the final path, and two processes never write the same file.

mod download;
mod source;
#[cfg(all(test, feature = "download"))]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use serde::Serialize;
use tracing::{debug, info_span, warn};

pub use source::{ArchiveMember, Artifact, ArtifactKind, DEFAULT_MODEL_SHA256, DEFAULT_MODEL_URL, ModelSource};

use crate::clock::{LoaderClock, SystemLoaderClock};
use crate::constants::{
    DOWNLOAD_ATTEMPTS_BACKGROUND, DOWNLOAD_ATTEMPTS_INTERACTIVE, DOWNLOAD_RETRY_BASE, DOWNLOAD_RETRY_CAP,
};
use crate::error::{EmbedError, Result};

/// Settings of a [`ModelManager`]; the binary fills them from its flags,
/// environment and `config.json`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ManagerConfig {
    /// `<home>/models`: where downloads are installed.
    pub models_dir: PathBuf,
    /// A model folder that wins over everything (`CAIRN_EMBED_MODEL_PATH`).
    pub explicit_path: Option<PathBuf>,
    /// A model folder from the configuration file.
    pub configured_path: Option<PathBuf>,
    /// What to download when nothing is installed.
    pub source: ModelSource,
    /// Never download (`CAIRN_SKIP_MODEL_DOWNLOAD=1`).
    pub skip_download: bool,
}

impl ManagerConfig {
    /// The default model, installed under `models_dir`.
    pub fn new(models_dir: impl Into<PathBuf>) -> Self {
        Self {
            models_dir: models_dir.into(),
            explicit_path: None,
            configured_path: None,
            source: ModelSource::default_model(),
            skip_download: false,
        }
    }

    /// Sets the explicit model folder.
    pub fn explicit_path(mut self, path: Option<PathBuf>) -> Self {
        self.explicit_path = path;
        self
    }

    /// Sets the configured model folder.
    pub fn configured_path(mut self, path: Option<PathBuf>) -> Self {
        self.configured_path = path;
        self
    }

    /// Sets the download source.
    pub fn source(mut self, source: ModelSource) -> Self {
        self.source = source;
        self
    }

    /// Switches downloads off.
    pub fn skip_download(mut self, skip: bool) -> Self {
        self.skip_download = skip;
        self
    }
}

/// How hard to try a download.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// Attempts in total.
    pub attempts: u32,
    /// Delay after the first failure; doubles after each further one.
    pub base: Duration,
    /// Longest delay.
    pub cap: Duration,
}

impl RetryPolicy {
    /// The long-lived background download: 6 attempts, 60 s base, 30 min cap.
    pub const BACKGROUND: RetryPolicy =
        RetryPolicy { attempts: DOWNLOAD_ATTEMPTS_BACKGROUND, base: DOWNLOAD_RETRY_BASE, cap: DOWNLOAD_RETRY_CAP };

    /// A request someone is waiting on: 3 attempts, same delays.
    pub const INTERACTIVE: RetryPolicy =
        RetryPolicy { attempts: DOWNLOAD_ATTEMPTS_INTERACTIVE, base: DOWNLOAD_RETRY_BASE, cap: DOWNLOAD_RETRY_CAP };

    /// Delay before attempt `failed_attempts + 1`.
    pub fn delay_after(&self, failed_attempts: u32) -> Duration {
        let doublings = failed_attempts.saturating_sub(1).min(32);
        self.base.saturating_mul(1u32 << doublings.min(31)).min(self.cap)
    }
}

/// The download state machine's step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum DownloadStep {
    /// Nothing has been attempted.
    Idle,
    /// Bytes are arriving.
    Downloading,
    /// Checking sizes and sha256, extracting.
    Verifying,
    /// An attempt failed; the next one starts after a delay.
    WaitingRetry,
    /// The model is installed.
    Ready,
    /// Every attempt failed (or a permanent error stopped them).
    Failed,
}

/// A snapshot of the manager's download state, readable at any time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct DownloadStatus {
    /// Current step.
    pub step: DownloadStep,
    /// The latest error, if any.
    pub error: Option<String>,
    /// Current (or last) attempt, from 1.
    pub attempt: u32,
    /// Attempts allowed for the current download.
    pub max_attempts: u32,
    /// Bytes received of the current file.
    pub bytes_done: u64,
    /// Size of the current file, when the server announced it.
    pub bytes_total: Option<u64>,
}

impl Default for DownloadStatus {
    fn default() -> Self {
        Self { step: DownloadStep::Idle, error: None, attempt: 0, max_attempts: 0, bytes_done: 0, bytes_total: None }
    }
}

/// Where a resolved model came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ModelOrigin {
    /// [`ManagerConfig::explicit_path`].
    ExplicitPath,
    /// [`ManagerConfig::configured_path`].
    ConfiguredPath,
    /// An installed copy under the models directory.
    Installed,
}

/// A model folder ready to load.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ResolvedModel {
    /// The folder.
    pub dir: PathBuf,
    /// How it was found.
    pub origin: ModelOrigin,
}

/// The installed folder, or the last error and the attempts made.
type FlightResult = std::result::Result<PathBuf, (Arc<EmbedError>, u32)>;

struct Flight {
    result: Mutex<Option<FlightResult>>,
    done: Condvar,
}

/// A handle on a download; every caller that asked while it was in flight
/// holds the same one.
#[derive(Clone)]
pub struct DownloadTicket {
    flight: Arc<Flight>,
    model: String,
}

impl std::fmt::Debug for DownloadTicket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DownloadTicket").field("model", &self.model).field("finished", &self.is_finished()).finish()
    }
}

impl DownloadTicket {
    fn finished(model: &str, result: FlightResult) -> Self {
        Self {
            flight: Arc::new(Flight { result: Mutex::new(Some(result)), done: Condvar::new() }),
            model: model.to_owned(),
        }
    }

    /// True once the download has succeeded or given up.
    pub fn is_finished(&self) -> bool {
        self.flight.result.lock().is_some()
    }

    /// True when both tickets follow the same download.
    pub fn same_download(&self, other: &DownloadTicket) -> bool {
        Arc::ptr_eq(&self.flight, &other.flight)
    }

    /// Blocks until the download finishes; returns the installed folder.
    pub fn wait(&self) -> Result<PathBuf> {
        let mut result = self.flight.result.lock();
        while result.is_none() {
            self.flight.done.wait(&mut result);
        }
        self.outcome(result.as_ref().expect("loop exits only with a result"))
    }

    /// Like [`wait`](Self::wait) with a limit; `None` when still running.
    pub fn wait_timeout(&self, timeout: Duration) -> Option<Result<PathBuf>> {
        let mut result = self.flight.result.lock();
        if result.is_none() {
            let _ = self.flight.done.wait_for(&mut result, timeout);
        }
        result.as_ref().map(|result| self.outcome(result))
    }

    fn outcome(&self, result: &FlightResult) -> Result<PathBuf> {
        match result {
            Ok(path) => Ok(path.clone()),
            Err((error, attempts)) => Err(EmbedError::DownloadFailed {
                model: self.model.clone(),
                attempts: *attempts,
                last: Arc::clone(error),
            }),
        }
    }
}

struct State {
    status: DownloadStatus,
    in_flight: Option<DownloadTicket>,
}

struct Shared {
    config: ManagerConfig,
    clock: Arc<dyn LoaderClock>,
    state: Mutex<State>,
}

/// Resolves, verifies and downloads the embedding model. Cloning shares
/// the state: every clone sees the same status and in-flight download.
#[derive(Clone)]
pub struct ModelManager {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for ModelManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelManager").field("config", &self.shared.config).field("status", &self.status()).finish()
    }
}

impl ModelManager {
    /// A manager on the real clock.
    pub fn new(config: ManagerConfig) -> Self {
        Self::with_clock(config, Arc::new(SystemLoaderClock::new()))
    }

    /// A manager whose retry delays go through `clock`.
    pub fn with_clock(config: ManagerConfig, clock: Arc<dyn LoaderClock>) -> Self {
        Self {
            shared: Arc::new(Shared {
                config,
                clock,
                state: Mutex::new(State { status: DownloadStatus::default(), in_flight: None }),
            }),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &ManagerConfig {
        &self.shared.config
    }

    /// Where the source's model is (or will be) installed.
    pub fn install_dir(&self) -> PathBuf {
        self.shared.config.models_dir.join(&self.shared.config.source.name)
    }

    /// A copy of the current download status.
    pub fn status(&self) -> DownloadStatus {
        self.shared.state.lock().status.clone()
    }

    /// Finds a model without downloading: explicit path, configured path,
    /// then an installed copy. An explicit or configured path that is not a
    /// model folder is an error (it never silently falls through).
    pub fn resolve(&self) -> Result<Option<ResolvedModel>> {
        let config = &self.shared.config;
        for (path, origin) in
            [(&config.explicit_path, ModelOrigin::ExplicitPath), (&config.configured_path, ModelOrigin::ConfiguredPath)]
        {
            if let Some(path) = path {
                check_model_folder(path)?;
                debug!(path = %path.display(), ?origin, "model resolved");
                return Ok(Some(ResolvedModel { dir: path.clone(), origin }));
            }
        }
        let installed = self.install_dir();
        if self.is_installed(&installed) {
            debug!(path = %installed.display(), "installed model found");
            return Ok(Some(ResolvedModel { dir: installed, origin: ModelOrigin::Installed }));
        }
        Ok(None)
    }

    fn is_installed(&self, dir: &Path) -> bool {
        self.shared
            .config
            .source
            .artifacts
            .iter()
            .flat_map(|artifact| artifact.destinations())
            .all(|dest| dir.join(dest).is_file())
    }

    /// Re-hashes every installed file against its pin.
    pub fn verify_installed(&self) -> Result<PathBuf> {
        let dir = self.install_dir();
        let span = info_span!("model_verify", dir = %dir.display());
        let _entered = span.enter();
        for artifact in &self.shared.config.source.artifacts {
            for (dest, pin) in artifact.pins() {
                let path = dir.join(dest);
                let actual = download::sha256_file(&path)?;
                if !actual.eq_ignore_ascii_case(pin) {
                    return Err(EmbedError::ChecksumMismatch {
                        what: path.display().to_string(),
                        expected: pin.to_owned(),
                        actual,
                    });
                }
            }
        }
        Ok(dir)
    }

    /// Removes the installed copy (for a re-download after a failed
    /// verification). The folder is first renamed aside, so a reader never
    /// sees it half-deleted.
    pub fn discard_installed(&self) -> Result<()> {
        let target = self.install_dir();
        if !target.exists() {
            return Ok(());
        }
        let models_dir = &self.shared.config.models_dir;
        let aside = tempfile::Builder::new()
            .prefix(&format!(".{}.old-", self.shared.config.source.name))
            .tempdir_in(models_dir)
            .map_err(|source| EmbedError::io("creating a folder in", models_dir, source))?;
        std::fs::rename(&target, aside.path().join("previous"))
            .map_err(|source| EmbedError::io("moving aside", &target, source))?;
        self.shared.state.lock().status = DownloadStatus::default();
        Ok(())
    }

    /// Returns a model folder, downloading the source when nothing is found
    /// (blocking). Concurrent callers share one download.
    pub fn ensure(&self, policy: RetryPolicy) -> Result<ResolvedModel> {
        if let Some(resolved) = self.resolve()? {
            return Ok(resolved);
        }
        let dir = self.start_download(policy)?.wait()?;
        Ok(ResolvedModel { dir, origin: ModelOrigin::Installed })
    }

    /// Starts downloading on a background thread unless the model is already
    /// installed or a download is in flight (then that one's ticket is
    /// returned). Never blocks on the network.
    pub fn start_download(&self, policy: RetryPolicy) -> Result<DownloadTicket> {
        let model = self.shared.config.source.name.clone();
        let mut state = self.shared.state.lock();
        if let Some(ticket) = &state.in_flight
            && !ticket.is_finished()
        {
            debug!("joining the download in flight");
            return Ok(ticket.clone());
        }
        let installed = self.install_dir();
        if self.is_installed(&installed) {
            state.status.step = DownloadStep::Ready;
            return Ok(DownloadTicket::finished(&model, Ok(installed)));
        }
        if self.shared.config.skip_download {
            state.status.error = Some("model downloads are disabled".to_owned());
            return Err(EmbedError::DownloadSkipped { model });
        }
        let ticket =
            DownloadTicket { flight: Arc::new(Flight { result: Mutex::new(None), done: Condvar::new() }), model };
        state.in_flight = Some(ticket.clone());
        state.status = DownloadStatus {
            step: DownloadStep::Downloading,
            attempt: 1,
            max_attempts: policy.attempts,
            ..DownloadStatus::default()
        };
        drop(state);
        let manager = self.clone();
        let thread_ticket = ticket.clone();
        let spawned = std::thread::Builder::new()
            .name("cairn-model-download".to_owned())
            .spawn(move || manager.run_download(policy, &thread_ticket));
        if let Err(error) = spawned {
            let error = Arc::new(EmbedError::io("starting the download thread for", self.install_dir(), error));
            self.finish(&ticket, Err((error, 0)));
        }
        Ok(ticket)
    }

    fn finish(&self, ticket: &DownloadTicket, result: FlightResult) {
        {
            let mut state = self.shared.state.lock();
            match &result {
                Ok(_) => {
                    state.status.step = DownloadStep::Ready;
                    state.status.error = None;
                }
                Err((error, _)) => {
                    state.status.step = DownloadStep::Failed;
                    state.status.error = Some(crate::lazy::error_chain(&**error));
                }
            }
        }
        *ticket.flight.result.lock() = Some(result);
        ticket.flight.done.notify_all();
    }

    fn set_status(&self, update: impl FnOnce(&mut DownloadStatus)) {
        update(&mut self.shared.state.lock().status);
    }

    fn run_download(&self, policy: RetryPolicy, ticket: &DownloadTicket) {
        let span = info_span!("model_download", model = %self.shared.config.source.name);
        let _entered = span.enter();
        let attempts = policy.attempts.max(1);
        let mut attempt = 1;
        let result = loop {
            self.set_status(|status| {
                status.step = DownloadStep::Downloading;
                status.attempt = attempt;
                status.bytes_done = 0;
                status.bytes_total = None;
            });
            match download::install(self) {
                Ok(path) => break Ok(path),
                Err(error) => {
                    let message = crate::lazy::error_chain(&error);
                    let permanent = download::is_permanent(&error);
                    warn!(attempt, attempts, permanent, %message, "model download attempt failed");
                    if permanent || attempt >= attempts {
                        break Err((Arc::new(error), attempt));
                    }
                    let delay = policy.delay_after(attempt);
                    self.set_status(|status| {
                        status.step = DownloadStep::WaitingRetry;
                        status.error = Some(message);
                    });
                    self.shared.clock.sleep(delay);
                    attempt += 1;
                }
            }
        };
        self.finish(ticket, result);
    }
}

fn check_model_folder(path: &Path) -> Result<()> {
    if !path.is_dir() {
        return Err(EmbedError::model_files(path, "not a directory"));
    }
    if !path.join("config.json").is_file() {
        return Err(EmbedError::model_files(path, "no config.json"));
    }
    Ok(())
}
