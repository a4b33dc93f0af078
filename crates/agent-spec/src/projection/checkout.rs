//! Checkout specs: a spec under a project checkout's `.kiro/agents` is
//! untrusted and narrowed to the keys the field reference allows.

use serde_json::{Map, Value};

use crate::error::Result;
use crate::spec::AgentSpec;

/// The keys a checkout spec keeps.
pub const CHECKOUT_KEYS: &[&str] = &["name", "description", "prompt", "tools", "excludedTools", "model"];

/// A checkout spec after narrowing.
#[derive(Debug, Clone)]
pub struct Narrowed {
    /// The spec with only the allowed keys (and `hooks` when consented).
    pub spec: AgentSpec,
    /// Keys the checkout spec set that were dropped, in spec order.
    pub dropped: Vec<String>,
    /// The spec's hooks were kept because the user consented to this
    /// checkout's hooks.
    pub hooks_kept: bool,
}

/// Narrows a checkout spec to [`CHECKOUT_KEYS`]; its `hooks` are kept only
/// with `hooks_consent` (the user's choice for that folder).
///
/// # Errors
///
/// Only if the narrowed object cannot be parsed again, which a parsed
/// spec's own fields cannot cause.
pub fn narrow_checkout_spec(spec: &AgentSpec, hooks_consent: bool) -> Result<Narrowed> {
    let mut kept = Map::new();
    let mut dropped = Vec::new();
    let mut hooks_kept = false;
    for (key, value) in spec.to_json().as_object().into_iter().flatten() {
        let keep_hooks = key == "hooks" && hooks_consent;
        if CHECKOUT_KEYS.contains(&key.as_str()) || keep_hooks {
            hooks_kept |= keep_hooks;
            kept.insert(key.clone(), value.clone());
        } else {
            dropped.push(key.clone());
        }
    }
    let mut narrowed = AgentSpec::from_json_str(&Value::Object(kept).to_string())?;
    if let Some(path) = spec.path() {
        narrowed = narrowed.with_path(path);
    }
    Ok(Narrowed { spec: narrowed, dropped, hooks_kept })
}
