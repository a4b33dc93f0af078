//! Static validation of an auto-skill's Python helper.
//!
//! The script is parsed for real by the system `python3`'s standard-library
//! `ast` module in a subprocess (isolated mode, no site packages, a
//! deadline, bounded output); the script is only ever parsed, never run.
//! The policy walks the tree and refuses, naming the rule:
//!
//! - `syntax`: the script does not parse;
//! - `dynamic-exec`: `exec`/`eval`/`compile`/`__import__`, `importlib` and
//!   friends, `getattr` with a computed name, dunder escapes;
//! - `process-exec`: `subprocess`, `pty`, `multiprocessing`, `os.system`,
//!   `os.exec*`, `os.spawn*`, `os.popen`, `os.fork`, ...;
//! - `network`: `socket`, `urllib`, `http`, `requests`, `ftplib`, ...;
//! - `destructive-fs`: `shutil.rmtree`/`move`, `os.remove`/`unlink`/
//!   `rmdir`/`rename`/`chmod`, `Path.unlink()`/`rmdir()`, ...;
//! - `size`: more than [`AUTO_MAX_SCRIPT_BYTES`] bytes.

use std::io::{Read as _, Write as _};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde::Deserialize;
use wait_timeout::ChildExt as _;

use super::AutoSkillError;
use crate::constants::{AUTO_MAX_SCRIPT_BYTES, AUTO_SCRIPT_CHECK_SECS};

/// The checker program handed to `python3 -c`.
const CHECKER: &str = include_str!("checker.py");

/// Most bytes of checker output read.
const MAX_CHECKER_OUTPUT: u64 = 16 * 1024;

#[derive(Debug, Deserialize)]
struct Verdict {
    #[serde(default)]
    ok: bool,
    rule: Option<String>,
    #[serde(default)]
    line: u64,
    #[serde(default)]
    detail: String,
}

/// The rule names the checker can report (`size` is checked here).
const RULES: &[&str] = &["syntax", "dynamic-exec", "process-exec", "network", "destructive-fs"];

/// Validates `script` with the Python interpreter `python`. A refusal is
/// [`AutoSkillError::ScriptRejected`] naming the rule; a checker that cannot
/// run (no interpreter, timeout, garbage output) is
/// [`AutoSkillError::Validator`] and the script is refused too.
pub fn validate_script(python: &Path, script: &str) -> Result<(), AutoSkillError> {
    if script.len() > AUTO_MAX_SCRIPT_BYTES {
        return Err(AutoSkillError::ScriptRejected {
            rule: "size",
            detail: format!("the script is {} bytes, above the {AUTO_MAX_SCRIPT_BYTES}-byte limit", script.len()),
        });
    }
    let validator = |reason: String| AutoSkillError::Validator { reason };
    let mut child = Command::new(python)
        .args(["-I", "-S", "-B", "-c", CHECKER])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|error| validator(format!("cannot run {}: {error}", python.display())))?;
    let mut stdin = child.stdin.take().expect("stdin is piped");
    // The script is at most 4 KB: the pipe takes it whole without the
    // child reading first.
    let written = stdin.write_all(script.as_bytes());
    drop(stdin);
    let status = match child.wait_timeout(Duration::from_secs(AUTO_SCRIPT_CHECK_SECS)) {
        Ok(Some(status)) => status,
        Ok(None) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(validator(format!("the checker did not finish within {AUTO_SCRIPT_CHECK_SECS} s")));
        }
        Err(error) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(validator(format!("waiting for the checker: {error}")));
        }
    };
    written.map_err(|error| validator(format!("sending the script to the checker: {error}")))?;
    let mut output = String::new();
    if let Some(stdout) = child.stdout.take() {
        stdout
            .take(MAX_CHECKER_OUTPUT)
            .read_to_string(&mut output)
            .map_err(|error| validator(format!("reading the checker's verdict: {error}")))?;
    }
    if !status.success() {
        return Err(validator(format!("the checker exited with {status}")));
    }
    let verdict: Verdict = serde_json::from_str(output.trim())
        .map_err(|error| validator(format!("the checker's verdict is not JSON: {error}")))?;
    if verdict.ok {
        return Ok(());
    }
    let rule = verdict
        .rule
        .as_deref()
        .and_then(|rule| RULES.iter().find(|known| **known == rule).copied())
        .ok_or_else(|| validator(format!("the checker named an unknown rule {:?}", verdict.rule)))?;
    Err(AutoSkillError::ScriptRejected { rule, detail: format!("line {}: {}", verdict.line, verdict.detail) })
}
