//! `cairn config show [--json]` and `cairn config set KEY VALUE`: the
//! effective settings with where each came from, and a validated change to
//! `<home>/config.json`.

use std::process::ExitCode;

use clap::Subcommand;
use serde_json::json;

use crate::home::Home;
use crate::host::client::{CallError, Gateway};
use crate::settings::{self, ConfigError};

/// Settings.
#[derive(Debug, Subcommand)]
pub(crate) enum ConfigCommand {
    /// Every effective value and its source (flag, env, file or default).
    Show {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Set KEY (`section.name`, e.g. `server.port`) in config.json. VALUE is
    /// JSON (`8800`, `true`, `["team."]`); anything else is taken as a string.
    Set {
        /// The dotted key.
        key: String,
        /// The new value.
        value: String,
    },
    /// Remove KEY from config.json (its default applies again).
    Unset {
        /// The dotted key.
        key: String,
    },
}

/// How long `config set` waits for the running gateway to apply a change.
const RELOAD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Asks the home's running gateway, if one runs, to apply the change now,
/// and says on stderr what it did (a gateway not reached picks the change
/// up by itself within a few seconds).
fn tell_the_gateway(home: &Home) {
    let Some(gateway) = Gateway::find(home.dir()) else { return };
    match gateway.post("/api/config/reload", b"{}", RELOAD_TIMEOUT) {
        Ok(bytes) => {
            let report: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
            let keys = |name: &str| -> Vec<String> {
                report[name]
                    .as_array()
                    .map(|keys| keys.iter().filter_map(|key| key.as_str().map(str::to_owned)).collect())
                    .unwrap_or_default()
            };
            let (applied, restart) = (keys("applied"), keys("restart_required"));
            if !applied.is_empty() {
                eprintln!("the running gateway applied: {}", applied.join(", "));
            }
            if !restart.is_empty() {
                eprintln!("the running gateway applies these at its next start (restart it): {}", restart.join(", "));
            }
        }
        Err(CallError::Absent) => {}
        Err(error) => eprintln!(
            "note: the running gateway was not told ({error}); it reads config.json again within a few seconds"
        ),
    }
}

/// Exit status of a refused change.
const EXIT_REFUSED: u8 = 2;

pub(crate) fn run(home: &Home, command: &ConfigCommand) -> anyhow::Result<ExitCode> {
    match command {
        ConfigCommand::Show { json } => {
            show(home, *json);
            Ok(ExitCode::SUCCESS)
        }
        ConfigCommand::Set { key, value } => change(home, key, Some(value)),
        ConfigCommand::Unset { key } => change(home, key, None),
    }
}

fn show(home: &Home, json: bool) {
    let settings = home.settings();
    if json {
        let report = json!({
            "config": settings.path,
            "settings": settings.entries,
            "warnings": settings.warnings,
        });
        println!("{}", serde_json::to_string_pretty(&report).expect("JSON values serialise"));
        return;
    }
    println!("# {}", settings.path.display());
    let width = settings.entries.iter().map(|entry| entry.key.len()).max().unwrap_or(0);
    for entry in &settings.entries {
        println!("{:<width$} = {}  ({})", entry.key, entry.value, entry.source);
    }
    for warning in &settings.warnings {
        println!("warning: {warning}");
    }
}

fn change(home: &Home, key: &str, value: Option<&String>) -> anyhow::Result<ExitCode> {
    if key == "home" {
        eprintln!("refused: the home is chosen with --home or CAIRN_HOME, not in config.json");
        return Ok(ExitCode::from(EXIT_REFUSED));
    }
    home.ensure_dir()?;
    match settings::write_key(home.dir(), key, value.map(String::as_str)) {
        Ok(resolved) => {
            match value {
                // The value as `config show` prints it (a storage URL without its password).
                Some(value) => match resolved.entries.iter().find(|entry| entry.key == key) {
                    Some(entry) => match &entry.value {
                        serde_json::Value::String(text) => println!("set {key} = {text}"),
                        other => println!("set {key} = {other}"),
                    },
                    None => println!("set {key} = {}", settings::redact_url_password(value)),
                },
                None => println!("removed {key}"),
            }
            tell_the_gateway(home);
            Ok(ExitCode::SUCCESS)
        }
        Err(error @ (ConfigError::Invalid { .. } | ConfigError::UnknownKey { .. } | ConfigError::Parse { .. })) => {
            eprintln!("refused: {error}");
            Ok(ExitCode::from(EXIT_REFUSED))
        }
        Err(error) => Err(error.into()),
    }
}
