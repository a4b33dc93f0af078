//! `cairn model status` and `cairn model fetch`, and the one place the
//! embedder's environment variables are read.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use cairn_embedder::manager::{DownloadStep, ManagerConfig, ModelManager, ModelSource, RetryPolicy};
use serde_json::json;

use crate::cli::{Cli, ModelStatusArgs};

/// A model folder that wins over every other source.
const ENV_MODEL_PATH: &str = "CAIRN_EMBED_MODEL_PATH";
/// `1` switches model downloads off.
const ENV_SKIP_DOWNLOAD: &str = "CAIRN_SKIP_MODEL_DOWNLOAD";
/// A mirror URL for the default model's archive (its sha256 pin still applies).
const ENV_MODEL_URL: &str = "CAIRN_EMBED_MODEL_URL";

/// How often `fetch` looks at the download status.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);
/// How often `fetch` repeats an unchanged step's progress line.
const REPORT_EVERY: Duration = Duration::from_secs(2);

fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|value| matches!(value.trim(), "1" | "true" | "yes"))
}

fn env_nonempty(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|value| !value.trim().is_empty())
}

/// `memory.embed_model_path` / `memory.embed_model_url` from `<home>/config.json`, if set.
fn configured(home: &Path, key: &str) -> anyhow::Result<Option<String>> {
    let path = home.join("config.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error).with_context(|| format!("reading {}", path.display())),
    };
    let config: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    Ok(config
        .pointer(&format!("/memory/{key}"))
        .and_then(serde_json::Value::as_str)
        .filter(|value| !value.is_empty())
        .map(str::to_owned))
}

/// The model manager settings for this invocation: flags, environment and
/// `config.json`, in that order of precedence.
pub(crate) fn manager_config(cli: &Cli, explicit: Option<PathBuf>) -> anyhow::Result<ManagerConfig> {
    let home = cli.home_dir();
    let explicit = explicit.or_else(|| env_nonempty(ENV_MODEL_PATH).map(PathBuf::from));
    let configured_path = configured(&home, "embed_model_path")?.map(PathBuf::from);
    let mut source = ModelSource::default_model();
    if let Some(url) = env_nonempty(ENV_MODEL_URL).or(configured(&home, "embed_model_url")?) {
        source = source.with_mirror_url(url);
    }
    Ok(ManagerConfig::new(home.join("models"))
        .explicit_path(explicit)
        .configured_path(configured_path)
        .source(source)
        .skip_download(env_flag(ENV_SKIP_DOWNLOAD)))
}

/// Prints where the model is and the download state, as JSON.
pub(crate) fn status(cli: &Cli, args: &ModelStatusArgs) -> anyhow::Result<ExitCode> {
    let manager = ModelManager::new(manager_config(cli, None)?);
    let resolved = manager.resolve();
    let verified = if args.verify {
        Some(match manager.verify_installed() {
            Ok(_) => json!({"ok": true}),
            Err(error) => json!({"ok": false, "error": format!("{:#}", anyhow::Error::new(error))}),
        })
    } else {
        None
    };
    let (resolved, error) = match resolved {
        Ok(resolved) => (resolved, None),
        Err(error) => (None, Some(format!("{:#}", anyhow::Error::new(error)))),
    };
    let config = manager.config();
    let report = json!({
        "model": config.source.name,
        "resolved": resolved,
        "error": error,
        "install_dir": manager.install_dir(),
        "source_url": config.source.artifacts.first().map(|artifact| artifact.url.clone()),
        "skip_download": config.skip_download,
        "download": manager.status(),
        "verified": verified,
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(ExitCode::SUCCESS)
}

/// Downloads, verifies and installs the model (3 attempts), or re-verifies
/// the installed copy. Progress goes to stderr.
pub(crate) fn fetch(cli: &Cli) -> anyhow::Result<ExitCode> {
    let manager = ModelManager::new(manager_config(cli, None)?);
    if let Some(resolved) = manager.resolve()? {
        let installed = manager.install_dir();
        if resolved.dir != installed {
            eprintln!("using {} ({:?}); nothing to fetch", resolved.dir.display(), resolved.origin);
            println!("{}", resolved.dir.display());
            return Ok(ExitCode::SUCCESS);
        }
        match manager.verify_installed() {
            Ok(dir) => {
                eprintln!("already installed and verified: {}", dir.display());
                println!("{}", dir.display());
                return Ok(ExitCode::SUCCESS);
            }
            Err(error) => {
                eprintln!("installed copy failed verification ({error}); downloading again");
                manager.discard_installed()?;
            }
        }
    }
    let ticket = manager.start_download(RetryPolicy::INTERACTIVE)?;
    eprintln!(
        "downloading {} from {}",
        manager.config().source.name,
        manager.config().source.artifacts.first().map_or("", |artifact| artifact.url.as_str())
    );
    let mut last_step = None;
    let mut last_report = std::time::Instant::now();
    let outcome = loop {
        if let Some(outcome) = ticket.wait_timeout(PROGRESS_EVERY) {
            break outcome;
        }
        let status = manager.status();
        let step_changed = last_step != Some(status.step);
        if !step_changed && last_report.elapsed() < REPORT_EVERY {
            continue;
        }
        last_step = Some(status.step);
        last_report = std::time::Instant::now();
        match status.step {
            DownloadStep::Downloading => {
                let total =
                    status.bytes_total.map_or_else(|| "?".to_owned(), |total| format!("{:.1}", total as f64 / 1e6));
                eprintln!(
                    "attempt {}/{}: {:.1} / {total} MB",
                    status.attempt,
                    status.max_attempts,
                    status.bytes_done as f64 / 1e6
                );
            }
            DownloadStep::WaitingRetry => {
                eprintln!("attempt {} failed: {}; waiting to retry", status.attempt, status.error.unwrap_or_default());
            }
            DownloadStep::Verifying => eprintln!("verifying and extracting"),
            _ => {}
        }
    };
    let dir = outcome.context("fetching the embedding model")?;
    eprintln!("installed and verified: {}", dir.display());
    println!("{}", dir.display());
    Ok(ExitCode::SUCCESS)
}
