//! Tracing subscriber: human-readable, to stderr, filtered by `RUST_LOG`.
//!
//! Every field of every event and span, the message included, is written
//! through [`redacted_field`]: `<private>` spans withheld, the guard's
//! credential and exfiltration-URL redaction, then control characters
//! escaped. So no level, `trace`
//! included, writes a raw secret or a terminal escape to the log.

use std::fmt::Write as _;

use tracing::field::Field;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::field::MakeExt as _;
use tracing_subscriber::fmt::format::{Writer, debug_fn};

/// Installs the process-wide subscriber. Nothing else in Cairn installs one,
/// and nothing but command output goes to stdout.
pub(crate) fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let fields = debug_fn(|writer: &mut Writer<'_>, field: &Field, value: &dyn std::fmt::Debug| {
        write_field(writer, field.name(), value)
    })
    .delimited(" ");
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .fmt_fields(fields)
        .with_writer(std::io::stderr)
        .with_target(true)
        .try_init();
}

fn write_field(writer: &mut Writer<'_>, name: &str, value: &dyn std::fmt::Debug) -> std::fmt::Result {
    let shown = redacted_field(name, value);
    writer.write_str(&shown)
}

/// One field as it appears in a log line: `name=value` (the message bare),
/// the value redacted and its control characters escaped.
pub(crate) fn redacted_field(name: &str, value: &dyn std::fmt::Debug) -> String {
    let raw = format!("{value:?}");
    let redacted = cairn_guard::redact_all(&cairn_guard::strip_private(&raw)).into_owned();
    let mut out = String::with_capacity(redacted.len() + name.len() + 1);
    if name != "message" {
        out.push_str(name);
        out.push('=');
    }
    for c in redacted.chars() {
        if c.is_control() {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_is_redacted_and_escaped() {
        let key = "AKIAQWERTYUIOPASDFGH";
        let cases: [(&str, &dyn std::fmt::Debug, &str); 5] = [
            ("value", &format!("key {key}"), "value=\"key "),
            ("message", &format_args!("stored key {key}"), "stored key "),
            ("count", &3, "count=3"),
            ("message", &format_args!("bell \u{7} esc \u{1b}[2J"), "bell \\u{7} esc \\u{1b}[2J"),
            ("prompt", &"a <private>AKIAQWERTYUIOPASDFGH\nmore</private> b", "prompt=\"a [private] b\""),
        ];
        for (name, value, starts) in cases {
            let shown = redacted_field(name, value);
            assert!(shown.starts_with(starts), "{shown}");
            assert!(!shown.contains(key) && !shown.contains(['\u{7}', '\u{1b}']), "{shown}");
        }
    }
}
