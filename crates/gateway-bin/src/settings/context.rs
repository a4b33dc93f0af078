//! `context`: what any host receives.

use serde::Serialize;

use super::reader::Resolver;
use super::{ConfigError, DEFAULT_MAX_INJECT_CHARS};

/// `context`: what any host receives.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ContextSection {
    /// `context.max_inject_chars`: the absolute ceiling on the context a
    /// host receives, whatever the model's window.
    pub(crate) max_inject_chars: usize,
}

pub(super) fn resolve(r: &mut Resolver<'_>) -> Result<ContextSection, ConfigError> {
    let mut section = r.section("context")?;
    let context = ContextSection {
        max_inject_chars: r.recorder.pick(
            "context.max_inject_chars",
            None,
            None,
            section.u64("max_inject_chars", 1_000, 1_000_000)?.map(|chars| chars as usize),
            DEFAULT_MAX_INJECT_CHARS,
        ),
    };
    r.finish(&section);
    Ok(context)
}
