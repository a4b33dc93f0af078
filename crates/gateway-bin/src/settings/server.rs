//! `server`: the listener, its limits and the heartbeat.

use std::net::IpAddr;

use serde::Serialize;

use super::reader::{Resolver, given, invalid};
use super::{
    ConfigError, DEFAULT_BODY_TIMEOUT_SECS, DEFAULT_HEADER_TIMEOUT_SECS, DEFAULT_HEARTBEAT_SECS,
    DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_CONNECTIONS_PER_CLIENT, DEFAULT_PORT, env,
};

/// `server`: the listener and the heartbeat.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ServerSection {
    pub(crate) host: IpAddr,
    pub(crate) port: u16,
    pub(crate) allow_non_loopback: bool,
    pub(crate) max_body_bytes: u64,
    pub(crate) heartbeat_secs: u64,
    pub(crate) header_timeout_secs: u64,
    pub(crate) body_timeout_secs: u64,
    pub(crate) max_connections_per_client: u64,
}

pub(super) fn resolve(r: &mut Resolver<'_>) -> Result<ServerSection, ConfigError> {
    let mut section = r.section("server")?;
    let file_host = match section.string("host")? {
        None => None,
        Some(text) => Some(text.parse::<IpAddr>().map_err(|_| {
            invalid(r.path, "server.host", format!("must be an IP address such as 127.0.0.1 (got {text:?})"))
        })?),
    };
    let host = r.recorder.pick(
        "server.host",
        r.flags.host,
        r.environment.parse(env::SERVE_HOST, "an IP address such as 127.0.0.1")?,
        file_host,
        IpAddr::from([127, 0, 0, 1]),
    );
    let port = r.recorder.pick(
        "server.port",
        r.flags.port,
        r.environment.parse(env::SERVE_PORT, "a port from 0 to 65535")?,
        section.u64("port", 0, 65_535)?.map(|port| port as u16),
        DEFAULT_PORT,
    );
    let allow_non_loopback = r.recorder.pick(
        "server.allow_non_loopback",
        given(r.flags.allow_non_loopback),
        None,
        section.bool("allow_non_loopback")?,
        false,
    );
    let max_body_bytes = r.recorder.pick(
        "server.max_body_bytes",
        None,
        None,
        section.u64("max_body_bytes", 1024, 1 << 30)?,
        DEFAULT_MAX_BODY_BYTES,
    );
    let env_heartbeat: Option<u64> = r.environment.parse(env::HEARTBEAT_SECS, "a whole number of seconds")?;
    if env_heartbeat == Some(0) {
        return Err(ConfigError::Env { name: env::HEARTBEAT_SECS, reason: "must be at least 1".to_owned() });
    }
    let heartbeat_secs = r.recorder.pick(
        "server.heartbeat_secs",
        r.flags.heartbeat_secs,
        env_heartbeat,
        section.u64("heartbeat_secs", 1, 86_400)?,
        DEFAULT_HEARTBEAT_SECS,
    );
    let header_timeout_secs = r.recorder.pick(
        "server.header_timeout_secs",
        None,
        None,
        section.u64("header_timeout_secs", 1, 3_600)?,
        DEFAULT_HEADER_TIMEOUT_SECS,
    );
    let body_timeout_secs = r.recorder.pick(
        "server.body_timeout_secs",
        None,
        None,
        section.u64("body_timeout_secs", 1, 3_600)?,
        DEFAULT_BODY_TIMEOUT_SECS,
    );
    let max_connections_per_client = r.recorder.pick(
        "server.max_connections_per_client",
        None,
        None,
        section.u64("max_connections_per_client", 1, 100_000)?,
        DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
    );
    let server = ServerSection {
        host,
        port,
        allow_non_loopback,
        max_body_bytes,
        heartbeat_secs,
        header_timeout_secs,
        body_timeout_secs,
        max_connections_per_client,
    };
    r.finish(&section);
    Ok(server)
}
