//! The API token: 32 random bytes made at first start, stored owner-only in
//! `<home>/server.token`. Every request must present it, as
//! `Authorization: Bearer <token>`, `X-Cairn-Token: <token>`, or the
//! `cairn_token` cookie. No CORS headers are ever sent.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
pub(crate) use crate::instance::TOKEN_FILE_NAME;

/// Header carrying the token, besides `Authorization: Bearer`.
pub(crate) const TOKEN_HEADER: &str = "x-cairn-token";
/// Cookie carrying the token.
pub(crate) const TOKEN_COOKIE: &str = "cairn_token";

/// The token every request must carry.
#[derive(Clone)]
pub(crate) struct ApiToken(Arc<str>);

impl std::fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiToken(..)")
    }
}

impl ApiToken {
    /// Reads `<home>/server.token`, creating it (mode 0600) at first start.
    pub(crate) fn load_or_create(home: &Path) -> anyhow::Result<(Self, PathBuf)> {
        let path = home.join(TOKEN_FILE_NAME);
        // A symlink could point anywhere (its target would be read as the
        // token and chmodded): refuse it rather than follow it.
        match std::fs::symlink_metadata(&path) {
            Ok(metadata) if metadata.file_type().is_symlink() => anyhow::bail!(
                "{} is a symlink; refusing to use it as the API token (remove it and a new token is written)",
                path.display()
            ),
            Ok(metadata) if !metadata.is_file() => {
                anyhow::bail!("{} is not a regular file; refusing to use it as the API token", path.display())
            }
            _ => {}
        }
        match std::fs::read_to_string(&path) {
            Ok(text) if is_token(text.trim()) => {
                restrict(&path)?;
                return Ok((Self(Arc::from(text.trim())), path));
            }
            Ok(_) => tracing::warn!(path = %path.display(), "token file is malformed; writing a new token"),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(error).with_context(|| format!("reading {}", path.display())),
        }
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes)
            .map_err(|error| anyhow::anyhow!("no system randomness for the API token: {error}"))?;
        let token = hex(&bytes);
        write_owner_only(&path, token.as_bytes())?;
        Ok((Self(Arc::from(token.as_str())), path))
    }

    fn matches(&self, candidate: &str) -> bool {
        // Compare every byte so the time taken does not reveal a matching prefix.
        let expected = self.0.as_bytes();
        let candidate = candidate.as_bytes();
        if expected.len() != candidate.len() {
            return false;
        }
        expected.iter().zip(candidate).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
    }
}

fn is_token(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn write_owner_only(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    crate::settings::atomic_write(path, bytes)?;
    restrict(path)
}

fn restrict(path: &Path) -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?.permissions().mode();
        if mode & 0o077 != 0 {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
                .with_context(|| format!("restricting {} to its owner", path.display()))?;
        }
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

fn presented(headers: &HeaderMap) -> Option<&str> {
    // The scheme is case-insensitive (RFC 7235 §2.1): `bearer` is `Bearer`.
    if let Some(value) = headers.get(header::AUTHORIZATION).and_then(|value| value.to_str().ok())
        && let Some((scheme, token)) = value.trim_start().split_once(' ')
        && scheme.eq_ignore_ascii_case("bearer")
    {
        return Some(token.trim());
    }
    if let Some(value) = headers.get(TOKEN_HEADER).and_then(|value| value.to_str().ok()) {
        return Some(value.trim());
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(TOKEN_COOKIE)?.strip_prefix('='))
}

/// Refuses every request without the token: 401 `unauthorized`.
pub(crate) async fn require_token(State(token): State<ApiToken>, request: Request, next: Next) -> Response {
    match presented(request.headers()) {
        Some(candidate) if token.matches(candidate) => next.run(request).await,
        Some(_) => {
            ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "the API token does not match").into_response()
        }
        None => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            format!("send the token from {TOKEN_FILE_NAME} as `Authorization: Bearer <token>`"),
        )
        .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_is_created_once_owner_only_and_reused() {
        let home = tempfile::tempdir().unwrap();
        let (first, path) = ApiToken::load_or_create(home.path()).unwrap();
        assert!(is_token(&first.0));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        }
        let (second, _) = ApiToken::load_or_create(home.path()).unwrap();
        assert_eq!(first.0, second.0);
        assert!(second.matches(&first.0));
        assert!(!second.matches(&first.0[1..]));
        assert!(!second.matches(&format!("{}0", &first.0[1..])));
    }

    #[test]
    fn a_malformed_token_file_is_replaced() {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join(TOKEN_FILE_NAME), "short").unwrap();
        let (token, _) = ApiToken::load_or_create(home.path()).unwrap();
        assert!(is_token(&token.0));
    }

    #[test]
    fn the_token_is_read_from_header_bearer_or_cookie() {
        let mut headers = HeaderMap::new();
        assert_eq!(presented(&headers), None);
        headers.insert(header::COOKIE, "theme=dark; cairn_token=abc".parse().unwrap());
        assert_eq!(presented(&headers), Some("abc"));
        headers.insert(TOKEN_HEADER, "def".parse().unwrap());
        assert_eq!(presented(&headers), Some("def"));
        headers.insert(header::AUTHORIZATION, "Bearer ghi".parse().unwrap());
        assert_eq!(presented(&headers), Some("ghi"));
        for scheme in ["bearer", "BEARER", "bEaReR"] {
            headers.insert(header::AUTHORIZATION, format!("{scheme} jkl").parse().unwrap());
            assert_eq!(presented(&headers), Some("jkl"), "{scheme}");
        }
        headers.insert(header::AUTHORIZATION, "Basic jkl".parse().unwrap());
        assert_eq!(presented(&headers), Some("def"), "another scheme falls through to the header");
    }

    #[cfg(unix)]
    #[test]
    fn a_symlinked_token_file_is_refused_and_its_target_left_alone() {
        use std::os::unix::fs::PermissionsExt as _;
        let home = tempfile::tempdir().unwrap();
        let target = home.path().join("target");
        std::fs::write(&target, "a".repeat(64)).unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::os::unix::fs::symlink(&target, home.path().join(TOKEN_FILE_NAME)).unwrap();
        let error = ApiToken::load_or_create(home.path()).unwrap_err().to_string();
        assert!(error.contains("symlink"), "{error}");
        assert_eq!(std::fs::metadata(&target).unwrap().permissions().mode() & 0o777, 0o644);
    }
}
