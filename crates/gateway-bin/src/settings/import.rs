//! `import`: where `cairn import` finds an OpenClaw workspace.

use std::path::PathBuf;

use super::reader::{Resolver, invalid};
use super::{ConfigError, env};

/// `import.openclaw_workspace` (or `OPENCLAW_WORKSPACE_DIR`), an absolute path.
pub(super) fn resolve(r: &mut Resolver<'_>) -> Result<Option<PathBuf>, ConfigError> {
    let mut section = r.section("import")?;
    let openclaw_file = section.string("openclaw_workspace")?.map(PathBuf::from);
    if openclaw_file.as_ref().is_some_and(|dir| !dir.is_absolute()) {
        return Err(invalid(r.path, "import.openclaw_workspace", "must be an absolute path"));
    }
    let openclaw_env = r.environment.get(env::OPENCLAW_WORKSPACE_DIR).map(PathBuf::from);
    if openclaw_env.as_ref().is_some_and(|dir| !dir.is_absolute()) {
        return Err(ConfigError::Env {
            name: env::OPENCLAW_WORKSPACE_DIR,
            reason: "must be an absolute path".to_owned(),
        });
    }
    let openclaw_workspace =
        r.recorder.pick("import.openclaw_workspace", None, openclaw_env.map(Some), openclaw_file.map(Some), None);
    r.finish(&section);
    Ok(openclaw_workspace)
}
