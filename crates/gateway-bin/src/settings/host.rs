//! `host`: how `cairn hook` and `cairn mcp serve` reach the home's gateway.

use serde::Serialize;

use super::reader::Resolver;
use super::{ConfigError, DEFAULT_CONTEXT_DEADLINE_MS, DEFAULT_RECORD_DEADLINE_MS, env};

/// Shortest hook deadline a user may set.
const MIN_DEADLINE_MS: u64 = 50;
/// Longest hook deadline a user may set (a host's own hook timeout is 60 s).
const MAX_DEADLINE_MS: u64 = 60_000;

/// `host`: how `cairn hook` and `cairn mcp serve` reach the home's gateway.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct HostSection {
    /// `host.context_deadline_ms`: the longest a context event (session
    /// start, prompt) waits for an answer before it answers from the
    /// in-process fallback or with nothing.
    pub(crate) context_deadline_ms: u64,
    /// `host.record_deadline_ms`: the same for recording events (tool
    /// calls, replies, session end) and tool decisions.
    pub(crate) record_deadline_ms: u64,
    /// `host.start_gateway`: a hook or MCP session that finds no gateway
    /// starts one in the background.
    pub(crate) start_gateway: bool,
}

pub(super) fn resolve(r: &mut Resolver<'_>) -> Result<HostSection, ConfigError> {
    let mut section = r.section("host")?;
    let host = HostSection {
        context_deadline_ms: r.recorder.pick(
            "host.context_deadline_ms",
            None,
            None,
            section.u64("context_deadline_ms", MIN_DEADLINE_MS, MAX_DEADLINE_MS)?,
            DEFAULT_CONTEXT_DEADLINE_MS,
        ),
        record_deadline_ms: r.recorder.pick(
            "host.record_deadline_ms",
            None,
            None,
            section.u64("record_deadline_ms", MIN_DEADLINE_MS, MAX_DEADLINE_MS)?,
            DEFAULT_RECORD_DEADLINE_MS,
        ),
        start_gateway: r.recorder.pick(
            "host.start_gateway",
            None,
            r.environment.flag(env::HOST_START_GATEWAY)?,
            section.bool("start_gateway")?,
            true,
        ),
    };
    r.finish(&section);
    Ok(host)
}
