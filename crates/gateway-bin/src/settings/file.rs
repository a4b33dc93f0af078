//! Edits of `config.json`: one key at a time, under the file's edit lock,
//! keeping every other key and its order, validated before they land.

use std::path::Path;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::reader::{Recorder, invalid};
use super::{CONFIG_FILE_NAME, ConfigError, Environment, Flags, MemorySettings, Settings, Source};
use crate::locked_edit::LockedEditError;

/// A JSON value whose objects keep their key order, for edits that must
/// leave the rest of the file as the user wrote it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum Ordered {
    Null(()),
    Bool(bool),
    Number(serde_json::Number),
    String(String),
    Array(Vec<Ordered>),
    Object(IndexMap<String, Ordered>),
}

/// Sets (or, with `None`, removes) the dotted `key` (`section.name`) in
/// `<home>/config.json`, keeping every other key and its order. The edited
/// file is validated as a whole first: an invalid value or an unknown key
/// is refused and the file is left as it was. Returns the settings the
/// new file resolves to (without flags or environment).
pub(crate) fn write_key(home: &Path, key: &str, value: Option<&str>) -> Result<Settings, ConfigError> {
    let path = home.join(CONFIG_FILE_NAME);
    let Some((section, name)) = key.split_once('.').filter(|(section, name)| !section.is_empty() && !name.is_empty())
    else {
        return Err(ConfigError::UnknownKey { key: key.to_owned() });
    };
    // Re-read and written under the file's edit lock: two `config set` at
    // once both land.
    let mut resolved = None;
    crate::locked_edit::edit_locked_owner_only(&path, |current: Option<String>| {
        let text = current.unwrap_or_default();
        let mut root: IndexMap<String, Ordered> = if text.trim().is_empty() {
            IndexMap::new()
        } else {
            serde_json::from_str(&text).map_err(|source| ConfigError::Parse { path: path.clone(), source })?
        };
        let entry = root.entry(section.to_owned()).or_insert_with(|| Ordered::Object(IndexMap::new()));
        let Ordered::Object(map) = entry else {
            return Err(invalid(&path, section, "must be a JSON object"));
        };
        match value {
            Some(value) => {
                // A value that is not JSON is taken as a string (`cairn config set llm.model gpt-x`).
                let parsed =
                    serde_json::from_str::<Ordered>(value).unwrap_or_else(|_| Ordered::String(value.to_owned()));
                map.insert(name.to_owned(), parsed);
            }
            None => {
                map.shift_remove(name);
            }
        }
        let mut next = serde_json::to_string_pretty(&root).expect("JSON values serialise");
        next.push('\n');
        let settings =
            Settings::resolve(home.to_owned(), path.clone(), &next, &Flags::default(), &Environment::default(), {
                let mut recorder = Recorder::default();
                recorder.record("home", Value::String(home.display().to_string()), Source::Default);
                recorder
            })?;
        let markers = [format!("`{key}`"), format!("section `{section}`")];
        if value.is_some()
            && settings.warnings.iter().any(|warning| markers.iter().any(|marker| warning.contains(marker)))
        {
            return Err(ConfigError::UnknownKey { key: key.to_owned() });
        }
        resolved = Some(settings);
        Ok(Some(next))
    })?;
    Ok(resolved.expect("the edit resolved the settings"))
}

/// Writes the memory settings into the file's `memory` section.
pub(crate) fn persist_memory_settings(home: &Path, settings: &MemorySettings) -> Result<(), ConfigError> {
    write_key(home, "memory.history_idle_hours", Some(&settings.history_idle_hours.to_string()))?;
    write_key(home, "memory.history_max_days", Some(&settings.history_max_days.to_string()))?;
    Ok(())
}

/// Writes `bytes` to an owner-only temporary sibling, syncs it, and renames
/// it over `path` (creating `path`'s directory first).
pub(crate) fn atomic_write(path: &Path, bytes: &[u8]) -> Result<(), ConfigError> {
    let write_error = |source| ConfigError::Write { path: path.to_owned(), source };
    std::fs::create_dir_all(cairn_files::parent_dir(path)).map_err(write_error)?;
    cairn_files::write_atomic(path, bytes).map_err(|error| write_error(error.into_io()))
}

impl From<LockedEditError> for ConfigError {
    fn from(error: LockedEditError) -> Self {
        let path = error.path().to_owned();
        let message = error.to_string();
        match error {
            LockedEditError::Read { source, .. } => ConfigError::Read { path, source },
            LockedEditError::Lock { source, .. } | LockedEditError::Write { source, .. } => {
                ConfigError::Write { path, source }
            }
            LockedEditError::NotRegular { .. } | LockedEditError::TooLarge { .. } => {
                ConfigError::Read { path, source: std::io::Error::other(message) }
            }
            LockedEditError::Busy { .. } => ConfigError::Write { path, source: std::io::Error::other(message) },
        }
    }
}
