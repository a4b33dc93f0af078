//! `storage`: where the rows live (`storage.url`, shown only without its
//! password) and the PostgreSQL pool's size.

use serde_json::Value;

use super::reader::{Resolver, invalid};
use super::{ConfigError, MAX_POSTGRES_POOL_SIZE, Source, env};

/// `storage.url` and `storage.postgres_pool_size`.
pub(super) struct Storage {
    pub(super) url: Option<String>,
    pub(super) postgres_pool_size: u64,
}

pub(super) fn resolve(r: &mut Resolver<'_>) -> Result<Storage, ConfigError> {
    let mut section = r.section("storage")?;
    let (storage_url, storage_source) =
        match (r.environment.get(env::STORAGE_URL).map(str::to_owned), section.string("url")?) {
            (Some(url), _) => (Some(url), Source::Env),
            (None, Some(url)) => (Some(url), Source::File),
            (None, None) => (None, Source::Default),
        };
    if let Some(url) = &storage_url {
        check_storage_url(url).map_err(|reason| match storage_source {
            Source::Env => ConfigError::Env { name: env::STORAGE_URL, reason },
            _ => invalid(r.path, "storage.url", reason),
        })?;
    }
    // The URL may carry a password: shown without it.
    r.recorder.record(
        "storage.url",
        storage_url.as_deref().map_or(Value::Null, |url| Value::String(redact_url_password(url))),
        storage_source,
    );
    let postgres_pool_size = r.recorder.pick(
        "storage.postgres_pool_size",
        None,
        None,
        section.u64("postgres_pool_size", 1, MAX_POSTGRES_POOL_SIZE)?,
        cairn_memory_core::constants::POSTGRES_DEFAULT_POOL_SIZE as u64,
    );
    r.finish(&section);
    Ok(Storage { url: storage_url, postgres_pool_size })
}

/// A `storage.url` is a PostgreSQL URL (`postgres://` or `postgresql://`
/// with a host); SQLite needs no URL (leave it unset).
pub(super) fn check_storage_url(url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))
        .ok_or_else(|| format!("must be a postgres:// URL (got {:?})", redact_url_password(url)))?;
    let authority = rest.split(['/', '?']).next().unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or("");
    if host.is_empty() {
        return Err(format!("must name a host (got {:?})", redact_url_password(url)));
    }
    Ok(())
}

/// `url` with every password it carries replaced by `***`: the password of
/// its user-info (`postgres://user:pw@host/db`), the value of a query
/// parameter whose name (percent-decoded, any case) holds `password`
/// (`?password=pw`, libpq's query form, and `sslpassword`), and the same
/// keywords of a key/value conninfo (`host=h password=pw`, quoted or not).
/// Applied to everything that shows a storage URL: `config show`, `config
/// set`, refusals and connection errors.
pub(crate) fn redact_url_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return redact_conninfo_passwords(url) };
    // The user-info ends at the last `@` before the query, even when the
    // password holds a `/`.
    let query_start = rest.find(['?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(query_start);
    let authority = match authority.rsplit_once('@') {
        Some((user_info, host)) => match user_info.split_once(':') {
            Some((user, _password)) => format!("{user}:***@{host}"),
            None => authority.to_owned(),
        },
        None => authority.to_owned(),
    };
    let tail = match tail.split_once('?') {
        None => tail.to_owned(),
        Some((path, query)) => {
            let (query, fragment) = match query.split_once('#') {
                Some((query, fragment)) => (query, Some(fragment)),
                None => (query, None),
            };
            let parameters: Vec<String> = query
                .split('&')
                .map(|parameter| match parameter.split_once('=') {
                    Some((name, _)) if names_password(&percent_decode(name)) => format!("{name}=***"),
                    _ => parameter.to_owned(),
                })
                .collect();
            let fragment = fragment.map(|fragment| format!("#{fragment}")).unwrap_or_default();
            format!("{path}?{}{fragment}", parameters.join("&"))
        }
    };
    format!("{scheme}://{authority}{tail}")
}

fn names_password(name: &str) -> bool {
    name.to_ascii_lowercase().contains("password")
}

/// `%xx` escapes decoded (bytes that do not make UTF-8 are kept lossily).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let hex = |at: usize| bytes.get(at).and_then(|byte| (*byte as char).to_digit(16));
        match (bytes[index], hex(index + 1), hex(index + 2)) {
            (b'%', Some(high), Some(low)) => {
                out.push((high * 16 + low) as u8);
                index += 3;
            }
            (byte, _, _) => {
                out.push(byte);
                index += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A key/value conninfo (`host=h password='p w'`) with the value of every
/// password keyword replaced by `***`; other text is returned as it is.
fn redact_conninfo_passwords(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(equals) = rest.find('=') {
        // Spaces may stand between the keyword and `=`.
        let before = rest[..equals].trim_end();
        let keyword_start = before.rfind(|c: char| c.is_whitespace() || c == '?' || c == '&').map_or(0, |at| at + 1);
        let keyword = &before[keyword_start..];
        out.push_str(&rest[..=equals]);
        rest = &rest[equals + 1..];
        if !names_password(keyword) {
            continue;
        }
        // Spaces may surround `=`; the value is quoted (backslash escapes) or runs to whitespace.
        let spaces = rest.len() - rest.trim_start().len();
        out.push_str(&rest[..spaces]);
        rest = &rest[spaces..];
        let value_end = if let Some(quoted) = rest.strip_prefix('\'') {
            let mut escaped = false;
            let close = quoted.char_indices().find(|&(_, c)| {
                let closes = c == '\'' && !escaped;
                escaped = c == '\\' && !escaped;
                closes
            });
            close.map_or(rest.len(), |(at, _)| at + 2)
        } else {
            rest.find(char::is_whitespace).unwrap_or(rest.len())
        };
        out.push_str("***");
        rest = &rest[value_end..];
    }
    out.push_str(rest);
    out
}
