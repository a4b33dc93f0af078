//! `cairn model status` and `cairn model fetch`. The model is resolved as
//! everywhere else, through [`Home::model_manager_config`].

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use cairn_embedder::manager::{DownloadStep, ModelManager, RetryPolicy};
use serde_json::json;

use crate::home::Home;
use clap::{Args, Subcommand};

#[derive(Debug, Subcommand)]
pub(crate) enum ModelCommand {
    /// Show where the model is resolved from and the download state (JSON).
    Status(ModelStatusArgs),
    /// Download, verify and install the default model (or re-verify the installed copy).
    Fetch,
}

#[derive(Debug, Args)]
pub(crate) struct ModelStatusArgs {
    /// Also re-hash the installed files against their sha256 pins.
    #[arg(long)]
    pub(crate) verify: bool,
}

/// How often `fetch` looks at the download status.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);
/// How often `fetch` repeats an unchanged step's progress line.
const REPORT_EVERY: Duration = Duration::from_secs(2);

/// Prints where the model is and the download state, as JSON.
pub(crate) fn status(home: &Home, args: &ModelStatusArgs) -> anyhow::Result<ExitCode> {
    let manager = ModelManager::new(home.model_manager_config());
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
pub(crate) fn fetch(home: &Home) -> anyhow::Result<ExitCode> {
    let manager = ModelManager::new(home.model_manager_config());
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
