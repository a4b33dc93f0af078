//! Reading `config.json`: a section's keys with their types and ranges
//! checked, the record of where each effective value came from, and the
//! state one resolution carries from section to section.

use std::path::Path;

use serde::Serialize;
use serde_json::{Map, Value};

use super::{ConfigError, Entry, Environment, Flags, Source};

pub(super) fn invalid(path: &Path, key: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { path: path.to_owned(), key: key.to_owned(), reason: reason.into() }
}

/// Reads one section's keys, remembering which were consumed.
pub(super) struct Section<'a> {
    pub(super) path: &'a Path,
    name: &'a str,
    map: &'a Map<String, Value>,
    used: Vec<&'static str>,
}

impl<'a> Section<'a> {
    pub(super) fn new(path: &'a Path, name: &'a str, map: &'a Map<String, Value>) -> Self {
        Self { path, name, map, used: Vec::new() }
    }

    pub(super) fn of(path: &'a Path, root: &'a Map<String, Value>, name: &'a str) -> Result<Section<'a>, ConfigError> {
        static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
        match root.get(name) {
            None | Some(Value::Null) => Ok(Self::new(path, name, EMPTY.get_or_init(Map::new))),
            Some(Value::Object(map)) => Ok(Self::new(path, name, map)),
            Some(_) => Err(invalid(path, name, "must be a JSON object")),
        }
    }

    fn key(&self, key: &str) -> String {
        format!("{}.{key}", self.name)
    }

    pub(super) fn get(&mut self, key: &'static str) -> Option<&'a Value> {
        self.used.push(key);
        self.map.get(key).filter(|value| !value.is_null())
    }

    pub(super) fn bool(&mut self, key: &'static str) -> Result<Option<bool>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(value)) => Ok(Some(*value)),
            Some(other) => Err(invalid(self.path, &self.key(key), format!("must be true or false (got {other})"))),
        }
    }

    pub(super) fn u64(&mut self, key: &'static str, min: u64, max: u64) -> Result<Option<u64>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(value) => match value.as_u64() {
                Some(number) if (min..=max).contains(&number) => Ok(Some(number)),
                _ => Err(invalid(
                    self.path,
                    &self.key(key),
                    format!("must be an integer from {min} to {max} (got {value})"),
                )),
            },
        }
    }

    pub(super) fn f64(&mut self, key: &'static str, min: f64, max: f64) -> Result<Option<f64>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(value) => match value.as_f64() {
                Some(number) if number.is_finite() && (min..=max).contains(&number) => Ok(Some(number)),
                _ => Err(invalid(
                    self.path,
                    &self.key(key),
                    format!("must be a number from {min} to {max} (got {value})"),
                )),
            },
        }
    }

    pub(super) fn string(&mut self, key: &'static str) -> Result<Option<String>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(text)) if text.trim().is_empty() => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.trim().to_owned())),
            Some(other) => Err(invalid(self.path, &self.key(key), format!("must be a string (got {other})"))),
        }
    }

    pub(super) fn strings(&mut self, key: &'static str) -> Result<Option<Vec<String>>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| {
                    item.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| invalid(self.path, &self.key(key), format!("must list strings (got {item})")))
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(other) => Err(invalid(self.path, &self.key(key), format!("must be a list of strings (got {other})"))),
        }
    }

    pub(super) fn unknown(&self) -> Vec<String> {
        self.map.keys().filter(|key| !self.used.contains(&key.as_str())).map(|key| self.key(key)).collect()
    }
}

/// Collects the effective values while they are resolved.
#[derive(Default)]
pub(super) struct Recorder {
    pub(super) entries: Vec<Entry>,
}

impl Recorder {
    /// Picks the first of flag, environment and file, else `default`, and
    /// records it under `key`.
    pub(super) fn pick<T: Serialize>(
        &mut self,
        key: &str,
        flag: Option<T>,
        env: Option<T>,
        file: Option<T>,
        default: T,
    ) -> T {
        let (value, source) = match (flag, env, file) {
            (Some(value), _, _) => (value, Source::Flag),
            (None, Some(value), _) => (value, Source::Env),
            (None, None, Some(value)) => (value, Source::File),
            (None, None, None) => (default, Source::Default),
        };
        self.record(key, serde_json::to_value(&value).unwrap_or(Value::Null), source);
        value
    }

    pub(super) fn record(&mut self, key: &str, value: Value, source: Source) {
        self.entries.push(Entry { key: key.to_owned(), value, source });
    }
}

/// `true` flags are given; `false` defers.
pub(super) fn given(flag: bool) -> Option<bool> {
    flag.then_some(true)
}

/// One resolution of the file: what every section reads, and what they
/// add to (the effective values, in order, and the warnings).
pub(super) struct Resolver<'a> {
    pub(super) path: &'a Path,
    pub(super) root: &'a Map<String, Value>,
    /// The file's text (the `hooks` section is parsed from it, in order).
    pub(super) text: &'a str,
    pub(super) flags: &'a Flags,
    pub(super) environment: &'a Environment,
    pub(super) recorder: Recorder,
    pub(super) warnings: Vec<String>,
}

impl<'a> Resolver<'a> {
    /// The section `name` of the file (empty when absent).
    pub(super) fn section(&self, name: &'a str) -> Result<Section<'a>, ConfigError> {
        Section::of(self.path, self.root, name)
    }

    /// Warns once about each key of `section` nothing read.
    pub(super) fn finish(&mut self, section: &Section<'_>) {
        for key in section.unknown() {
            self.warnings.push(format!("{}: unknown key `{key}` (ignored)", self.path.display()));
        }
    }
}

pub(super) fn read_text(path: &Path) -> Result<String, ConfigError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(text),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(source) => Err(ConfigError::Read { path: path.to_owned(), source }),
    }
}

pub(super) fn parse_root(path: &Path, text: &str) -> Result<Map<String, Value>, ConfigError> {
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str(text) {
        Ok(Value::Object(root)) => Ok(root),
        Ok(_) => Err(invalid(path, "(top level)", "must be a JSON object")),
        Err(source) => Err(ConfigError::Parse { path: path.to_owned(), source }),
    }
}
