//! `hooks`: the user's hook rules, kept in file order.

use serde::Deserialize;
use serde_json::Value;

use super::reader::{Resolver, invalid};
use super::{ConfigError, Source};

/// Only the `hooks` section, parsed straight from the text so rule order is kept.
#[derive(Deserialize)]
struct HooksOnly {
    #[serde(default)]
    hooks: Option<cairn_hooks::HooksConfig>,
}

pub(super) fn resolve(r: &mut Resolver<'_>) -> Result<cairn_hooks::HooksConfig, ConfigError> {
    let from_file = |present: bool| if present { Source::File } else { Source::Default };
    let hooks = match r.root.get("hooks") {
        None | Some(Value::Null) => cairn_hooks::HooksConfig::default(),
        Some(Value::Object(_)) => serde_json::from_str::<HooksOnly>(r.text)
            .map_err(|error| invalid(r.path, "hooks", error.to_string()))?
            .hooks
            .unwrap_or_default(),
        Some(_) => return Err(invalid(r.path, "hooks", "must be a JSON object")),
    };
    r.recorder.record(
        "hooks",
        serde_json::to_value(&hooks).unwrap_or(Value::Null),
        from_file(r.root.get("hooks").is_some_and(|hooks| !hooks.is_null())),
    );
    Ok(hooks)
}
