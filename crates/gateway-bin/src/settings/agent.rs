//! `agent`: agent specs and the user's kiro-cli hooks.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;
use serde_json::Value;

use super::ConfigError;
use super::reader::{Resolver, invalid};

/// `agent`: where agent specs live, which duplicates are pinned, and the
/// user's kiro-cli hooks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct AgentSection {
    pub(crate) agents_dir: Option<PathBuf>,
    pub(crate) project_dir: Option<PathBuf>,
    pub(crate) spec_pins: BTreeMap<String, String>,
    /// `agent.kiro_hooks`, handed to the hooks crate's merge as it is.
    pub(crate) kiro_hooks: Value,
}

pub(super) fn resolve(r: &mut Resolver<'_>) -> Result<AgentSection, ConfigError> {
    let mut section = r.section("agent")?;
    let agents_dir = section.string("agents_dir")?.map(PathBuf::from);
    let agents_dir = r.recorder.pick("agent.agents_dir", None, None, agents_dir.map(Some), None);
    let project_dir = section.string("project_dir")?.map(PathBuf::from);
    let project_dir = r.recorder.pick("agent.project_dir", None, None, project_dir.map(Some), None);
    let spec_pins = match section.get("spec_pins") {
        None => None,
        Some(value) => Some(
            serde_json::from_value::<BTreeMap<String, String>>(value.clone())
                .map_err(|_| invalid(r.path, "agent.spec_pins", "must map agent names to file names"))?,
        ),
    };
    let spec_pins = r.recorder.pick("agent.spec_pins", None, None, spec_pins, BTreeMap::new());
    let kiro_hooks = section.get("kiro_hooks").cloned();
    let kiro_hooks = r.recorder.pick("agent.kiro_hooks", None, None, kiro_hooks, Value::Null);
    r.finish(&section);
    Ok(AgentSection { agents_dir, project_dir, spec_pins, kiro_hooks })
}
