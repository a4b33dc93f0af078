//! User hooks merged onto bundled ones, after validation.
//!
//! Bundled hooks come first and are kept as shipped. User hooks (the object
//! form keyed by event, or the hooks-array form, which is projected first)
//! are validated entry by entry; a bad entry is dropped with a reason and
//! the rest still load. Survivors are appended per event after the bundled
//! hooks and deduplicated by `(command, matcher)`.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::LazyLock;

use cairn_guard::SensitivePaths;
use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::constants::{
    COMMAND_PATTERN, MATCHER_PATTERN, MAX_MATCHER_LEN, MAX_OUTPUT_SIZE, MAX_TIMEOUT_MS, MAX_TOTAL_USER_HOOKS,
    MAX_USER_HOOKS_PER_EVENT,
};
use crate::error::{HooksError, Result};
use crate::event::HookEvent;
use crate::left_out::{DropReason, DroppedHook, HookNotice};
use crate::matcher::ToolMatcher;
use crate::projection::project_hook_array;

static COMMAND_RE: LazyLock<Regex> = LazyLock::new(|| Regex::new(COMMAND_PATTERN).expect("constant pattern compiles"));
static MATCHER_RE: LazyLock<Regex> = LazyLock::new(|| Regex::new(MATCHER_PATTERN).expect("constant pattern compiles"));

/// The keys of a user entry that survive validation; others are stripped.
const KEPT_KEYS: &[&str] = &["command", "matcher", "timeout_ms", "max_output_size", "fail_closed"];

/// One hook: a command run on an event, optionally for matching tools only.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookEntry {
    /// What to run. For a user hook: an absolute path to an existing file.
    pub command: String,
    /// Which tools the hook fires for (tool events only); none means all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matcher: Option<String>,
    /// Per-hook timeout in milliseconds (default 30 s, at most 600 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Per-stream output cap in UTF-8 bytes (default and ceiling 64 KiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_size: Option<usize>,
    /// Block the tool call when the hook fails or times out, instead of warning.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fail_closed: bool,
}

impl HookEntry {
    /// A hook running `command` for every tool.
    pub fn new(command: impl Into<String>) -> Self {
        HookEntry {
            command: command.into(),
            matcher: None,
            timeout_ms: None,
            max_output_size: None,
            fail_closed: false,
        }
    }

    /// The same hook, for tools `matcher` covers.
    #[must_use]
    pub fn with_matcher(mut self, matcher: impl Into<String>) -> Self {
        self.matcher = Some(matcher.into());
        self
    }
}

/// Hooks per event, in firing order: kiro-cli's object form.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct HookSet(BTreeMap<HookEvent, Vec<HookEntry>>);

impl HookSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses a bundled (host-shipped) set: the object form, event keys in
    /// any spelling. Bundled hooks are trusted, so only their shape and
    /// matchers are checked, and any problem fails the whole set.
    pub fn parse_bundled(value: &Value) -> Result<Self> {
        let invalid = |key: String, reason: String| HooksError::InvalidBundled { key, reason };
        let Value::Object(events) = value else {
            return Err(invalid(String::new(), "expected an object keyed by event".to_owned()));
        };
        let mut set = HookSet::new();
        for (name, entries) in events {
            let event: HookEvent =
                name.parse().map_err(|error: HooksError| invalid(name.clone(), error.to_string()))?;
            let entries: Vec<HookEntry> =
                serde_json::from_value(entries.clone()).map_err(|error| invalid(name.clone(), error.to_string()))?;
            for (index, entry) in entries.iter().enumerate() {
                if entry.command.trim().is_empty() {
                    return Err(invalid(format!("{name}[{index}].command"), "empty command".to_owned()));
                }
                ToolMatcher::parse_optional(entry.matcher.as_deref())
                    .map_err(|error| invalid(format!("{name}[{index}].matcher"), error.to_string()))?;
            }
            set.0.entry(event).or_default().extend(entries);
        }
        Ok(set)
    }

    /// Parses the object form from JSON text (see [`HookSet::parse_bundled`]).
    pub fn parse_bundled_str(text: &str) -> Result<Self> {
        let value = serde_json::from_str(text).map_err(|source| HooksError::Json { what: "bundled hooks", source })?;
        Self::parse_bundled(&value)
    }

    /// Appends `entry` to `event`'s list.
    pub fn push(&mut self, event: HookEvent, entry: HookEntry) {
        self.0.entry(event).or_default().push(entry);
    }

    /// The hooks of `event`, in firing order.
    pub fn get(&self, event: HookEvent) -> &[HookEntry] {
        self.0.get(&event).map_or(&[], Vec::as_slice)
    }

    /// Events with at least one hook, and their hooks.
    pub fn iter(&self) -> impl Iterator<Item = (HookEvent, &[HookEntry])> {
        self.0.iter().filter(|(_, entries)| !entries.is_empty()).map(|(event, entries)| (*event, entries.as_slice()))
    }

    /// Total number of hooks.
    pub fn len(&self) -> usize {
        self.0.values().map(Vec::len).sum()
    }

    /// True when there are no hooks.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The effective hook set and everything left out on the way.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MergeReport {
    /// Bundled hooks first, then valid user hooks, per event.
    pub hooks: HookSet,
    /// User entries that were left out.
    pub dropped: Vec<DroppedHook>,
    /// Notes on entries that were kept (stripped keys, clamped limits, unknown tool names).
    pub notices: Vec<HookNotice>,
}

/// What user hooks are checked against.
#[derive(Debug, Clone, Default)]
pub struct MergeOptions {
    /// Locations a hook command may not live in (after `..` and symlinks).
    pub sensitive: SensitivePaths,
}

impl MergeOptions {
    /// Checks commands against `sensitive`.
    pub fn new(sensitive: SensitivePaths) -> Self {
        MergeOptions { sensitive }
    }
}

/// Merges `user` hooks (object form or hooks array, as found in the config)
/// onto `bundled`.
pub fn merge_user_hooks(bundled: &HookSet, user: &Value, options: &MergeOptions) -> MergeReport {
    let _span = tracing::debug_span!("merge_user_hooks", bundled = bundled.len()).entered();
    let mut report = MergeReport { hooks: bundled.clone(), ..MergeReport::default() };
    let mut seen: HashSet<(HookEvent, String, Option<String>)> = HashSet::new();
    for (event, entries) in bundled.iter() {
        for entry in entries {
            seen.insert((event, entry.command.clone(), entry.matcher.clone()));
        }
    }
    let mut candidates: Vec<(HookEvent, String, Value)> = Vec::new();
    let is_array_file = user.get("hooks").is_some_and(Value::is_array);
    match user {
        Value::Null => {}
        Value::Array(_) | Value::Object(_) if user.is_array() || is_array_file => {
            let projection = project_hook_array(user);
            report.dropped.extend(projection.dropped);
            report.notices.extend(projection.notices);
            candidates.extend(projection.hooks.into_iter().map(|hook| (hook.event, hook.location, hook.entry)));
        }
        Value::Object(object) => {
            for (name, entries) in object {
                let Ok(event) = name.parse::<HookEvent>() else {
                    drop_hook(&mut report, name.clone(), None, DropReason::UnknownEvent);
                    continue;
                };
                let Value::Array(entries) = entries else {
                    drop_hook(&mut report, name.clone(), None, DropReason::EventNotAList);
                    continue;
                };
                for (index, raw) in entries.iter().enumerate() {
                    candidates.push((event, format!("{}[{index}]", event.as_str()), raw.clone()));
                }
            }
        }
        _ => drop_hook(&mut report, "user hooks".to_owned(), None, DropReason::NotHooks),
    }
    let mut total = 0usize;
    let mut per_event: BTreeMap<HookEvent, usize> = BTreeMap::new();
    for (event, location, raw) in candidates {
        let command = raw.get("command").and_then(Value::as_str).map(str::to_owned);
        let entry = match validate_entry(&raw, &location, options, &mut report.notices) {
            Ok(entry) => entry,
            Err(reason) => {
                drop_hook(&mut report, location, command, reason);
                continue;
            }
        };
        if !seen.insert((event, entry.command.clone(), entry.matcher.clone())) {
            drop_hook(&mut report, location, command, DropReason::Duplicate);
            continue;
        }
        let count = per_event.entry(event).or_default();
        if *count >= MAX_USER_HOOKS_PER_EVENT {
            drop_hook(&mut report, location, command, DropReason::PerEventCap);
            continue;
        }
        if total >= MAX_TOTAL_USER_HOOKS {
            drop_hook(&mut report, location, command, DropReason::TotalCap);
            continue;
        }
        *count += 1;
        total += 1;
        report.hooks.push(event, entry);
    }
    tracing::debug!(kept = total, dropped = report.dropped.len(), "user hooks merged");
    report
}

fn drop_hook(report: &mut MergeReport, location: String, command: Option<String>, reason: DropReason) {
    tracing::debug!(%location, %reason, "user hook dropped");
    report.dropped.push(DroppedHook { location, command, reason });
}

/// Checks one user entry and keeps only its allowed keys.
fn validate_entry(
    raw: &Value,
    location: &str,
    options: &MergeOptions,
    notices: &mut Vec<HookNotice>,
) -> std::result::Result<HookEntry, DropReason> {
    let Value::Object(fields) = raw else { return Err(DropReason::NotAnObject) };
    let command = match fields.get("command") {
        None | Some(Value::Null) => return Err(DropReason::MissingCommand),
        Some(Value::String(command)) => command.as_str(),
        Some(_) => return Err(DropReason::CommandNotString),
    };
    validate_command(command, &options.sensitive)?;
    let matcher = match fields.get("matcher") {
        None | Some(Value::Null) => None,
        Some(Value::String(matcher)) => {
            validate_matcher(matcher)?;
            let compiled = ToolMatcher::parse(matcher).map_err(|error| match error {
                HooksError::InvalidMatcher { reason, .. } => DropReason::MatcherInvalid { reason },
                other => DropReason::MatcherInvalid { reason: other.to_string() },
            })?;
            if compiled.names_unknown_tool() {
                notices.push(HookNotice {
                    location: location.to_owned(),
                    message: format!("matcher {matcher:?} names no known tool; kept, and matched as written"),
                });
            }
            Some(matcher.clone())
        }
        Some(_) => return Err(DropReason::MatcherNotString),
    };
    let stripped: Vec<&str> = fields.keys().map(String::as_str).filter(|key| !KEPT_KEYS.contains(key)).collect();
    if !stripped.is_empty() {
        notices.push(HookNotice {
            location: location.to_owned(),
            message: format!("stripped keys: {}", stripped.join(", ")),
        });
    }
    let mut entry = HookEntry::new(command);
    entry.matcher = matcher;
    entry.timeout_ms = limit_field(fields.get("timeout_ms"), "timeout_ms", MAX_TIMEOUT_MS, location, notices);
    entry.max_output_size =
        limit_field(fields.get("max_output_size"), "max_output_size", MAX_OUTPUT_SIZE as u64, location, notices)
            .map(|size| usize::try_from(size).unwrap_or(MAX_OUTPUT_SIZE));
    entry.fail_closed = match fields.get("fail_closed") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(flag)) => *flag,
        Some(other) => {
            // A malformed flag reads as set: it can only make the hook stricter.
            notices.push(HookNotice {
                location: location.to_owned(),
                message: format!("fail_closed {other} is not a boolean; treated as true"),
            });
            true
        }
    };
    Ok(entry)
}

/// A positive integer limit, clamped to `ceiling`; anything else is
/// ignored with a notice and the default applies.
fn limit_field(
    value: Option<&Value>,
    key: &str,
    ceiling: u64,
    location: &str,
    notices: &mut Vec<HookNotice>,
) -> Option<u64> {
    let value = value.filter(|value| !value.is_null())?;
    match value.as_u64() {
        Some(0) | None => {
            notices.push(HookNotice {
                location: location.to_owned(),
                message: format!("{key} {value} is not a positive integer; the default applies"),
            });
            None
        }
        Some(limit) if limit > ceiling => {
            notices.push(HookNotice {
                location: location.to_owned(),
                message: format!("{key} {limit} is above the ceiling; clamped to {ceiling}"),
            });
            Some(ceiling)
        }
        Some(limit) => Some(limit),
    }
}

/// The command rules: allowlisted characters, absolute, an existing file,
/// not sensitive once `..` and symlinks are resolved.
pub fn validate_command(command: &str, sensitive: &SensitivePaths) -> std::result::Result<(), DropReason> {
    if !COMMAND_RE.is_match(command) {
        return Err(DropReason::CommandCharacters);
    }
    let path = Path::new(command);
    if !path.is_absolute() {
        return Err(DropReason::CommandNotAbsolute);
    }
    // Sensitivity first: a command under ~/.ssh is refused whether or not
    // it exists, so the answer does not reveal what is there.
    match sensitive.classify(path) {
        Ok(Some(reason)) => return Err(DropReason::SensitiveCommand { reason: reason.to_owned() }),
        Ok(None) => {}
        Err(error) => return Err(DropReason::SensitiveCommand { reason: error.to_string() }),
    }
    match std::fs::metadata(path) {
        Ok(metadata) if metadata.is_file() => Ok(()),
        _ => Err(DropReason::CommandNotFound),
    }
}

/// The matcher rules: allowlisted characters and at most 200 characters.
pub fn validate_matcher(matcher: &str) -> std::result::Result<(), DropReason> {
    let length = matcher.chars().count();
    if length > MAX_MATCHER_LEN {
        return Err(DropReason::MatcherTooLong { length });
    }
    if !MATCHER_RE.is_match(matcher) {
        return Err(DropReason::MatcherCharacters);
    }
    Ok(())
}
