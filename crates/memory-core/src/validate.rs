//! The write rules of semantic memory, each a small pure function.

use std::sync::LazyLock;

use regex::Regex;

use crate::constants::{
    AUDIT_SNIPPET_CHARS, CONFIDENCE_THRESHOLD, KEY_PATTERN, MAX_KEY_CHARS, MAX_SESSION_KEY_CHARS, MAX_VALUE_BYTES,
};
use crate::error::Rejected;
pub(crate) use crate::text::cut;
use crate::types::Source;

static KEY_REGEX: LazyLock<Regex> = LazyLock::new(|| Regex::new(KEY_PATTERN).expect("key pattern compiles"));

/// Checks a session key: 1 to [`MAX_SESSION_KEY_CHARS`] characters, none of
/// them a control character.
pub(crate) fn session_key(session_key: &str) -> Result<(), Rejected> {
    let chars = session_key.chars().count();
    if chars == 0 || chars > MAX_SESSION_KEY_CHARS || session_key.chars().any(char::is_control) {
        return Err(Rejected::InvalidSessionKey { chars, max: MAX_SESSION_KEY_CHARS });
    }
    Ok(())
}

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

/// A refused value as it may appear in an audit row: `<private>` spans
/// withheld, passed through both redactors, then cut. Redaction runs on a generous prefix first (so a huge
/// refused value costs little) and before the cut (so a secret is never
/// split into an unrecognisable fragment).
pub(crate) fn snippet(text: &str) -> String {
    let prefix = cut(&cairn_guard::strip_private(text), 2 * MAX_VALUE_BYTES);
    cut(&cairn_guard::redact_all(&prefix), AUDIT_SNIPPET_CHARS)
}

/// The characters of `text` a reader sees: invisible ones (zero-width
/// spaces and joiners, bidi controls, tag characters, …) are not counted.
pub(crate) fn visible_chars(text: &str) -> usize {
    text.chars().filter(|&c| !cairn_guard::is_invisible(c)).count()
}

/// Text as it is stored: `<private>` spans withheld, credentials and
/// exfiltration URLs redacted,
/// control characters other than line breaks and tabs removed (a stored
/// ESC or BEL would reach a terminal or a prompt later), and the
/// characters that make text read otherwise than it is (bidi embeddings,
/// overrides and isolates, zero-width spaces, word joiners, a stray BOM)
/// removed too. Zero-width joiners and non-joiners stay: scripts and emoji
/// need them. `None` when nothing changes.
pub(crate) fn scrub_text(text: &str) -> Option<String> {
    let kept = cairn_guard::strip_private(text);
    let redacted = match cairn_guard::redact_all(&kept) {
        std::borrow::Cow::Borrowed(_) => kept,
        std::borrow::Cow::Owned(redacted) => std::borrow::Cow::Owned(redacted),
    };
    let has_control = redacted.chars().any(is_stripped_control);
    match (redacted, has_control) {
        (std::borrow::Cow::Borrowed(_), false) => None,
        (redacted, true) => Some(redacted.chars().filter(|&c| !is_stripped_control(c)).collect()),
        (std::borrow::Cow::Owned(redacted), false) => Some(redacted),
    }
}

fn is_stripped_control(c: char) -> bool {
    (c.is_control() && !matches!(c, '\n' | '\t'))
        || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200B}' | '\u{2060}' | '\u{FEFF}')
}

/// [`scrub_text`] over every string of a value (object keys included);
/// `None` when nothing changes.
pub(crate) fn scrub_value(value: &serde_json::Value) -> Option<serde_json::Value> {
    map_strings(value, &scrub_text)
}

/// `value` with the `<private>` spans of every string (object keys
/// included) withheld ([`cairn_guard::strip_private`]); `None` when it has
/// none. Runs before a write's rules and screen, so what the user marked
/// private is neither stored, screened nor quoted in a refusal.
pub(crate) fn without_private(value: &serde_json::Value) -> Option<serde_json::Value> {
    map_strings(value, &|text| match cairn_guard::strip_private(text) {
        std::borrow::Cow::Borrowed(_) => None,
        std::borrow::Cow::Owned(kept) => Some(kept),
    })
}

/// `change` over every string of a value (object keys included); `None`
/// when it changes none.
fn map_strings(value: &serde_json::Value, change: &dyn Fn(&str) -> Option<String>) -> Option<serde_json::Value> {
    match value {
        serde_json::Value::String(text) => change(text).map(serde_json::Value::String),
        serde_json::Value::Array(items) => {
            let changed: Vec<Option<serde_json::Value>> = items.iter().map(|item| map_strings(item, change)).collect();
            changed.iter().any(Option::is_some).then(|| {
                serde_json::Value::Array(
                    changed.into_iter().zip(items).map(|(new, old)| new.unwrap_or_else(|| old.clone())).collect(),
                )
            })
        }
        serde_json::Value::Object(map) => {
            let mut changed = false;
            let mut out = serde_json::Map::with_capacity(map.len());
            for (name, item) in map {
                let name = match change(name) {
                    Some(name) => {
                        changed = true;
                        name
                    }
                    None => name.clone(),
                };
                let item = match map_strings(item, change) {
                    Some(item) => {
                        changed = true;
                        item
                    }
                    None => item.clone(),
                };
                out.insert(name, item);
            }
            changed.then_some(serde_json::Value::Object(out))
        }
        _ => None,
    }
}

/// Earliest accepted `created_at`: the Unix epoch.
pub(crate) const EARLIEST_CREATED_AT_MS: i64 = 0;
/// How far past now a `created_at` may lie (clock skew between machines).
pub(crate) const CREATED_AT_FUTURE_SLACK_MS: i64 = 86_400_000;

/// A `created_at` in milliseconds is from 1970 to a day from `now_ms`.
pub(crate) fn created_at(created_at: i64, now_ms: i64) -> Result<(), Rejected> {
    let latest = now_ms.saturating_add(CREATED_AT_FUTURE_SLACK_MS);
    if (EARLIEST_CREATED_AT_MS..=latest).contains(&created_at) {
        Ok(())
    } else {
        Err(Rejected::CreatedAtOutOfRange { created_at, latest })
    }
}

#[cfg(test)]
mod hardening_tests {
    use super::*;

    #[test]
    fn visible_length_skips_invisible_characters() {
        let cases =
            [("\u{200B}".repeat(30), 0), ("ab\u{200B}c\u{2060}\u{FEFF}".to_owned(), 3), ("plain".to_owned(), 5)];
        for (text, expected) in cases {
            assert_eq!(visible_chars(&text), expected, "{text:?}");
        }
    }

    #[test]
    fn scrubbing_redacts_credentials_and_removes_control_characters() {
        let cases = [
            ("plain text\nand a tab\t", None),
            ("bell \u{7} esc \u{1b}[31m nul \u{0}", Some("bell  esc [31m nul ")),
            ("admin\u{202E}gnp.exe and zero\u{200B}width \u{2066}iso\u{2069}", Some("admingnp.exe and zerowidth iso")),
            ("family \u{1F468}\u{200D}\u{1F469} and \u{0645}\u{200C}\u{06CC}", None),
        ];
        for (text, expected) in cases {
            assert_eq!(scrub_text(text).as_deref(), expected, "{text:?}");
        }
        let secret = scrub_text("key AKIAQWERTYUIOPASDFGH").unwrap();
        assert!(!secret.contains("AKIAQWERTYUIOPASDFGH"), "{secret}");
        let value = serde_json::json!({"a\u{7}": ["ok", "AKIAQWERTYUIOPASDFGH"], "n": 1});
        let scrubbed = scrub_value(&value).unwrap().to_string();
        assert!(!scrubbed.contains("AKIAQWERTYUIOPASDFGH") && !scrubbed.contains("\\u0007"), "{scrubbed}");
        assert_eq!(scrub_value(&serde_json::json!({"a": [1, "b"]})), None);
    }

    #[test]
    fn created_at_is_from_1970_to_a_day_from_now() {
        let now = 1_700_000_000_000;
        for accepted in [0, now, now + CREATED_AT_FUTURE_SLACK_MS] {
            assert_eq!(created_at(accepted, now), Ok(()), "{accepted}");
        }
        for refused in [i64::MIN, -1, now + CREATED_AT_FUTURE_SLACK_MS + 1, i64::MAX] {
            assert!(
                matches!(created_at(refused, now), Err(Rejected::CreatedAtOutOfRange { created_at, .. }) if created_at == refused),
                "{refused}"
            );
        }
    }
}
