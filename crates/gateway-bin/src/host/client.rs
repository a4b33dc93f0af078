//! Finding, calling and starting the home's gateway.
//!
//! The running `cairn serve` records its address in `<home>/serve.address`
//! and holds `<home>/serve.lock`; its token is `<home>/server.token`. A
//! client sends the token only to a loopback address (an address file
//! that names another host is ignored), and every call has a deadline.

use std::fs::File;
use std::io::Read as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::Context as _;

use crate::home::Home;
use crate::instance::{ADDRESS_FILE_NAME, LOCK_FILE_NAME, TOKEN_FILE_NAME, read_address};

/// Longest token file read.
const MAX_SMALL_FILE_BYTES: u64 = 256;
/// Largest answer read from the gateway.
const MAX_ANSWER_BYTES: u64 = 16 * 1024 * 1024;
/// Where an autostarted gateway writes its log.
pub(crate) const AUTOSTART_LOG_FILE_NAME: &str = "serve.log";
/// Marks an autostart attempt until the gateway it started is listening
/// (the gateway removes it then), so a gateway that cannot start is not
/// started again by every hook, while one that ran and died is restarted
/// by the next hook.
pub(crate) const AUTOSTART_MARK_FILE_NAME: &str = "serve.autostart";
/// How long after one autostart attempt another may be made.
const AUTOSTART_BACKOFF: Duration = Duration::from_secs(10);

/// Why a call to the gateway did not give an answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CallError {
    /// No gateway is recorded, or its address refused the connection.
    #[error("no gateway answers for this home")]
    Absent,
    /// The deadline passed.
    #[error("the gateway did not answer within {0:?}")]
    Timeout(Duration),
    /// It answered, but not with a usable answer.
    #[error("the gateway answered {status}: {detail}")]
    Refused { status: u16, detail: String },
    /// Anything else on the way.
    #[error("calling the gateway failed: {0}")]
    Transport(String),
}

/// The home's running gateway, as its files describe it.
#[derive(Debug, Clone)]
pub(crate) struct Gateway {
    base: String,
    token: String,
}

/// The token file's trimmed text (a regular file, never through a symlink).
fn read_token(path: &Path) -> Option<String> {
    let metadata = std::fs::symlink_metadata(path).ok()?;
    if !metadata.is_file() {
        return None;
    }
    let mut text = String::new();
    File::open(path).ok()?.take(MAX_SMALL_FILE_BYTES).read_to_string(&mut text).ok()?;
    Some(text.trim().to_owned())
}

/// The loopback address to call for a recorded listening address.
fn loopback(address: SocketAddr) -> Option<SocketAddr> {
    let ip = match address.ip() {
        ip if ip.is_loopback() => ip,
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        _ => return None,
    };
    Some(SocketAddr::new(ip, address.port()))
}

impl Gateway {
    /// The gateway recorded in `home`, if its address and token read.
    pub(crate) fn find(home: &Path) -> Option<Self> {
        let address = loopback(read_address(&home.join(ADDRESS_FILE_NAME))?)?;
        let token = read_token(&home.join(TOKEN_FILE_NAME)).filter(|token| !token.is_empty())?;
        Some(Self { base: format!("http://{address}"), token })
    }

    /// Posts `body` (JSON) to `path` and reads the JSON answer, all within `timeout`.
    pub(crate) fn post(&self, path: &str, body: &[u8], timeout: Duration) -> Result<Vec<u8>, CallError> {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(timeout))
            .max_redirects(0)
            .proxy(None)
            .build()
            .into();
        let response = agent
            .post(&format!("{}{path}", self.base))
            .header("Authorization", &format!("Bearer {}", self.token))
            .header("Content-Type", "application/json")
            .send(body)
            .map_err(|error| classify(error, timeout))?;
        let status = response.status().as_u16();
        let bytes = response
            .into_body()
            .with_config()
            .limit(MAX_ANSWER_BYTES)
            .read_to_vec()
            .map_err(|error| classify(error, timeout))?;
        if status != 200 {
            let detail: String = String::from_utf8_lossy(&bytes).chars().take(300).collect();
            return Err(CallError::Refused { status, detail: cairn_guard::redact_all(&detail).into_owned() });
        }
        Ok(bytes)
    }
}

fn classify(error: ureq::Error, timeout: Duration) -> CallError {
    match error {
        ureq::Error::Timeout(_) => CallError::Timeout(timeout),
        ureq::Error::Io(io)
            if matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionRefused
                    | std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::ConnectionAborted
            ) =>
        {
            CallError::Absent
        }
        ureq::Error::ConnectionFailed => CallError::Absent,
        other => CallError::Transport(other.to_string()),
    }
}

/// Whether a `cairn serve` holds the home's instance lock.
pub(crate) fn is_running(home: &Path) -> bool {
    let Ok(file) = std::fs::OpenOptions::new().read(true).write(true).open(home.join(LOCK_FILE_NAME)) else {
        return false;
    };
    // Taking the lock means nobody holds it; it goes with the handle.
    match file.try_lock() {
        Ok(()) => false,
        Err(std::fs::TryLockError::WouldBlock) => true,
        Err(std::fs::TryLockError::Error(_)) => false,
    }
}

/// Starts `cairn serve` for `home` in the background (its own process
/// group, stdin closed, output to `<home>/serve.log`, a free loopback
/// port) unless one runs, autostart is off, or an attempt was made in the
/// last few seconds. Returns whether a gateway was started.
pub(crate) fn autostart(home: &Home) -> anyhow::Result<bool> {
    if !home.settings().host.start_gateway || is_running(home.dir()) {
        return Ok(false);
    }
    let mark = home.dir().join(AUTOSTART_MARK_FILE_NAME);
    let recent = std::fs::metadata(&mark)
        .and_then(|metadata| metadata.modified())
        .ok()
        .and_then(|when| SystemTime::now().duration_since(when).ok())
        .is_some_and(|age| age < AUTOSTART_BACKOFF);
    if recent {
        return Ok(false);
    }
    home.ensure_dir()?;
    crate::settings::atomic_write(&mark, b"")?;
    let exe = std::env::current_exe().context("locating the cairn binary")?;
    let log = log_file(&home.dir().join(AUTOSTART_LOG_FILE_NAME))?;
    let mut command = std::process::Command::new(exe);
    command
        .arg("--home")
        .arg(home.dir())
        .args(["serve", "--port", "0"])
        // The gateway serves every session of the home: one session's
        // wish to stay private is not its setting.
        .env_remove(crate::settings::env::PRIVATE_SESSION)
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone().context("sharing the gateway log")?)
        .stderr(log);
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let child = command.spawn().context("starting the home's gateway")?;
    tracing::info!(pid = child.id(), "started the home's gateway in the background");
    Ok(true)
}

fn log_file(path: &PathBuf) -> anyhow::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path).with_context(|| format!("opening {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_addresses_are_called_and_a_wildcard_is_called_on_loopback() {
        let at = |text: &str| loopback(text.parse().unwrap()).map(|address| address.to_string());
        assert_eq!(at("127.0.0.1:9"), Some("127.0.0.1:9".to_owned()));
        assert_eq!(at("0.0.0.0:9"), Some("127.0.0.1:9".to_owned()));
        assert_eq!(at("[::]:9"), Some("[::1]:9".to_owned()));
        assert_eq!(at("10.1.2.3:9"), None, "the token never goes to another host");
    }

    #[test]
    fn a_home_without_a_gateway_has_none_and_a_symlinked_token_is_not_read() {
        let home = tempfile::tempdir().unwrap();
        assert!(Gateway::find(home.path()).is_none());
        assert!(!is_running(home.path()));
        std::fs::write(home.path().join(ADDRESS_FILE_NAME), "127.0.0.1:9\n").unwrap();
        let elsewhere = home.path().join("elsewhere");
        std::fs::write(&elsewhere, "secret").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(&elsewhere, home.path().join(TOKEN_FILE_NAME)).unwrap();
        assert!(Gateway::find(home.path()).is_none());
    }
}
