//! The write rules of semantic memory, each a small pure function.

use std::sync::LazyLock;

use regex::Regex;

use crate::constants::{AUDIT_SNIPPET_CHARS, CONFIDENCE_THRESHOLD, KEY_PATTERN, MAX_KEY_CHARS, MAX_VALUE_BYTES};
use crate::error::Rejected;
use crate::types::Source;

static KEY_REGEX: LazyLock<Regex> = LazyLock::new(|| Regex::new(KEY_PATTERN).expect("key pattern compiles"));

/// Checks length, format and prefix of a key, in that order.
pub(crate) fn key(key: &str, prefixes: &[String]) -> Result<(), Rejected> {
    let chars = key.chars().count();
    if chars > MAX_KEY_CHARS {
        return Err(Rejected::KeyTooLong { chars, max: MAX_KEY_CHARS });
    }
    if !KEY_REGEX.is_match(key) {
        return Err(Rejected::InvalidKey { key: cut(key, MAX_KEY_CHARS) });
    }
    if !prefixes.iter().any(|prefix| key.starts_with(prefix.as_str()) && key.len() > prefix.len()) {
        return Err(Rejected::PrefixNotAllowed { key: key.to_owned(), allowed: prefixes.join(", ") });
    }
    Ok(())
}

/// Serialises a value compactly and checks its size.
pub(crate) fn value(value: &serde_json::Value) -> Result<String, Rejected> {
    let text = serde_json::to_string(value).expect("a serde_json::Value always serialises");
    if text.len() > MAX_VALUE_BYTES {
        return Err(Rejected::ValueTooLarge { bytes: text.len(), max: MAX_VALUE_BYTES });
    }
    Ok(text)
}

/// Parses a JSON text into a value.
pub(crate) fn parse_json(text: &str) -> Result<serde_json::Value, Rejected> {
    serde_json::from_str(text).map_err(|error| Rejected::InvalidJson { reason: error.to_string() })
}

/// The confidence gate: a number in `[0, 1]`, and at least the threshold
/// unless the user said it.
pub(crate) fn confidence(confidence: f64, source: &Source) -> Result<(), Rejected> {
    if !confidence.is_finite() || !(0.0..=1.0).contains(&confidence) {
        return Err(Rejected::InvalidConfidence { confidence });
    }
    if !source.is_user_explicit() && confidence < CONFIDENCE_THRESHOLD {
        return Err(Rejected::LowConfidence { confidence, threshold: CONFIDENCE_THRESHOLD });
    }
    Ok(())
}

/// Screens every string inside a value (object keys included) for injected instructions.
pub(crate) fn injection(value: &serde_json::Value) -> Result<(), Rejected> {
    let text = screen_text(value);
    match cairn_guard::screen(&text) {
        Some(finding) => Err(Rejected::Injection { rule: finding.rule }),
        None => Ok(()),
    }
}

/// The text a value's screen and keyword index look at: its strings, one per line.
pub(crate) fn screen_text(value: &serde_json::Value) -> String {
    fn walk(value: &serde_json::Value, out: &mut String) {
        match value {
            serde_json::Value::String(text) => {
                out.push_str(text);
                out.push('\n');
            }
            serde_json::Value::Array(items) => items.iter().for_each(|item| walk(item, out)),
            serde_json::Value::Object(map) => {
                for (name, item) in map {
                    out.push_str(name);
                    out.push('\n');
                    walk(item, out);
                }
            }
            other => {
                out.push_str(&other.to_string());
                out.push('\n');
            }
        }
    }
    let mut out = String::new();
    walk(value, &mut out);
    out
}

/// How a value is shown in context blocks: strings bare, everything else as JSON.
pub(crate) fn display_value(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// The first `max` characters of `text`.
pub(crate) fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => text[..end].to_owned(),
        None => text.to_owned(),
    }
}

/// A refused value as it may appear in an audit row: passed through both
/// redactors, then cut. Redaction runs on a generous prefix first (so a huge
/// refused value costs little) and before the cut (so a secret is never
/// split into an unrecognisable fragment).
pub(crate) fn snippet(text: &str) -> String {
    let prefix = cut(text, 2 * MAX_VALUE_BYTES);
    cut(&cairn_guard::redact_all(&prefix), AUDIT_SNIPPET_CHARS)
}
