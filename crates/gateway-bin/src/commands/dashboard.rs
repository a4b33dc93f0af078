//! `cairn dashboard [--open]`: the address of the running `cairn serve`'s
//! page, with the API token in the URL fragment (`#token=...`). A fragment
//! is never sent to the server or in a `Referer`; the page moves it into
//! session storage and removes it from the address bar. `--open` also
//! hands the address to the browser `$BROWSER` names, or the system's
//! default one.
//!
//! The address is, first found: the `ip:port` that `cairn serve --port-file
//! FILE` wrote, the one the running server recorded in `<home>/serve.address`,
//! or the configured `server.host`/`server.port` (flag > env > config.json >
//! default, as `cairn serve` resolves it). The token is the home's
//! `server.token`. The command asks the server's `/api/health` first, so it
//! never prints an address where nothing answers.

use std::io::Read as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, bail};

use crate::home::Home;
use crate::instance::{ADDRESS_FILE_NAME, TOKEN_FILE_NAME};

/// Largest port file or token file read.
const MAX_SMALL_FILE_BYTES: u64 = 4_096;
/// How long the health check waits for the server.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(5);

/// `cairn dashboard` flags.
#[derive(Debug, clap::Args)]
pub(crate) struct DashboardArgs {
    /// Also open the address in a browser: the command in $BROWSER, else the system default.
    #[arg(long)]
    pub(crate) open: bool,
    /// Read the server's `ip:port` from the file `cairn serve --port-file FILE` wrote
    /// (needed when the server was started on port 0).
    #[arg(long, value_name = "FILE")]
    pub(crate) port_file: Option<PathBuf>,
}

/// Why no address could be printed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DashboardError {
    #[error("{path}: expected one `ip:port` line as `cairn serve --port-file` writes it (got {got:?})")]
    BadPortFile { path: PathBuf, got: String },
    #[error(
        "server.port is 0 (cairn serve picks a free port): pass --port-file FILE as given to `cairn serve --port-file`"
    )]
    NoFixedPort,
    #[error("{path} is missing: start `cairn serve` once in this home to create the API token")]
    NoToken { path: PathBuf },
    #[error("{path} does not hold a Cairn API token (64 hexadecimal characters)")]
    BadToken { path: PathBuf },
    #[error("no cairn serve answers at http://{address}: {reason}")]
    NotServing { address: SocketAddr, reason: String },
    #[error("the server at http://{address} refused this home's token: it serves another home")]
    OtherHome { address: SocketAddr },
}

/// `cairn dashboard`.
pub(crate) fn run(home: &Home, args: &DashboardArgs) -> anyhow::Result<ExitCode> {
    let recorded = home.dir().join(ADDRESS_FILE_NAME);
    let address = match &args.port_file {
        Some(path) => read_port_file(home, path)?,
        None if recorded.is_file() => read_port_file(home, &recorded)?,
        None => {
            let server = &home.settings().server;
            if server.port == 0 {
                return Err(DashboardError::NoFixedPort.into());
            }
            SocketAddr::new(server.host, server.port)
        }
    };
    let token = read_token(&home.dir().join(TOKEN_FILE_NAME))?;
    check_serving(address, &token)?;
    let url = page_url(address, &token);
    println!("{url}");
    if args.open {
        open_in_browser(&url)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The page's address with the token in the fragment.
pub(crate) fn page_url(address: SocketAddr, token: &str) -> String {
    format!("http://{address}/#token={token}")
}

fn read_small(path: &Path) -> anyhow::Result<String> {
    let file = std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let mut text = String::new();
    file.take(MAX_SMALL_FILE_BYTES).read_to_string(&mut text).with_context(|| format!("reading {}", path.display()))?;
    Ok(text)
}

/// Parses the `ip:port` line `cairn serve --port-file` writes.
pub(crate) fn parse_port_file(path: &Path, text: &str) -> Result<SocketAddr, DashboardError> {
    text.trim()
        .parse()
        .map_err(|_| DashboardError::BadPortFile { path: path.to_owned(), got: text.chars().take(80).collect() })
}

/// Reads the port file through the home's guarded read (it is not Cairn's
/// own file: the user names it), after a size check.
fn read_port_file(home: &Home, path: &Path) -> anyhow::Result<SocketAddr> {
    let size = std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?.len();
    if size > MAX_SMALL_FILE_BYTES {
        bail!(DashboardError::BadPortFile { path: path.to_owned(), got: format!("{size} bytes") });
    }
    let text = home.sensitive().read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(parse_port_file(path, &text)?)
}

fn is_token(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|byte| byte.is_ascii_hexdigit())
}

fn read_token(path: &Path) -> anyhow::Result<String> {
    // The token file is Cairn's own secret (the guard's sensitive set
    // refuses it on purpose): read it directly, bounded.
    if !path.exists() {
        bail!(DashboardError::NoToken { path: path.to_owned() });
    }
    let text = read_small(path)?;
    let token = text.trim();
    if !is_token(token) {
        bail!(DashboardError::BadToken { path: path.to_owned() });
    }
    Ok(token.to_owned())
}

fn check_serving(address: SocketAddr, token: &str) -> Result<(), DashboardError> {
    let agent: ureq::Agent =
        ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(HEALTH_TIMEOUT)).build().into();
    let response = agent
        .get(&format!("http://{address}/api/health"))
        .header("Authorization", &format!("Bearer {token}"))
        .call()
        .map_err(|error| DashboardError::NotServing { address, reason: error.to_string() })?;
    match response.status().as_u16() {
        200 => Ok(()),
        401 => Err(DashboardError::OtherHome { address }),
        status => Err(DashboardError::NotServing { address, reason: format!("/api/health answered {status}") }),
    }
}

/// Opens `url` with the `webbrowser` crate: the commands in `$BROWSER`
/// first (`:`-separated, `%s` for the address, else appended), then the
/// platform's opener (`xdg-open` and the desktops' own, `open` on macOS,
/// the shell on Windows). A graphical browser is started in the
/// background, so the command returns at once.
fn open_in_browser(url: &str) -> anyhow::Result<()> {
    webbrowser::open(url)
        .map_err(|error| anyhow::anyhow!("could not open a browser ({error}); the address is printed above"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_travels_in_the_fragment_only() {
        let address: SocketAddr = "127.0.0.1:8377".parse().unwrap();
        let url = page_url(address, &"ab".repeat(32));
        assert_eq!(url, format!("http://127.0.0.1:8377/#token={}", "ab".repeat(32)));
        assert!(!url.contains('?'));
    }

    #[test]
    fn port_files_are_parsed_or_refused() {
        let path = Path::new("port");
        assert_eq!(parse_port_file(path, "127.0.0.1:4000\n").unwrap(), "127.0.0.1:4000".parse().unwrap());
        assert_eq!(parse_port_file(path, "[::1]:4000\n").unwrap(), "[::1]:4000".parse().unwrap());
        for bad in ["", "4000", "localhost:4000", "127.0.0.1", "127.0.0.1:99999"] {
            assert!(
                matches!(parse_port_file(path, bad), Err(DashboardError::BadPortFile { .. })),
                "{bad:?} was accepted"
            );
        }
    }

    #[test]
    fn only_a_real_token_is_used() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(TOKEN_FILE_NAME);
        let missing = read_token(&path).unwrap_err();
        assert!(matches!(missing.downcast_ref(), Some(DashboardError::NoToken { .. })));
        std::fs::write(&path, "not a token\n").unwrap();
        let bad = read_token(&path).unwrap_err();
        assert!(matches!(bad.downcast_ref(), Some(DashboardError::BadToken { .. })));
        std::fs::write(&path, format!("{}\n", "0f".repeat(32))).unwrap();
        assert_eq!(read_token(&path).unwrap(), "0f".repeat(32));
    }
}
