//! The day-file format and the decaying tier rendering.
//!
//! A day file `history/YYYY-MM-DD.md` is a list of entries, each opened by a
//! `#### HH:MM` header line in local time:
//!
//! ```text
//!
//! #### 09:12
//! Reviewed the gateway's heartbeat.
//!
//! #### 14:40
//! Decided to keep the FTS5 index separate from memory.db.
//! ```
//!
//! Text a person wrote above the first header (a hand edit) counts as one
//! entry without a timestamp.

use std::fmt::Write as _;

use jiff::civil::Date;

use crate::constants::{HISTORY_HEADER_DAYS, HISTORY_WINDOW_DAYS};

/// Prefix of the line that opens an entry.
pub(crate) const ENTRY_HEADER_PREFIX: &str = "#### ";

/// One entry of a day file: its first line (1-based) and its trimmed text,
/// header line included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry<'a> {
    pub(crate) line: usize,
    pub(crate) text: &'a str,
}

impl<'a> Entry<'a> {
    /// `HH:MM` of an entry with a header, `None` for text above the first header.
    pub(crate) fn time(&self) -> Option<&'a str> {
        self.text.strip_prefix(ENTRY_HEADER_PREFIX).map(|rest| rest.lines().next().unwrap_or("").trim())
    }
}

/// Splits a day file into its entries, skipping blank text.
pub(crate) fn split_entries(content: &str) -> Vec<Entry<'_>> {
    let mut entries = Vec::new();
    let mut start_byte = 0usize;
    let mut start_line = 1usize;
    let mut offset = 0usize;
    for (index, line) in content.split_inclusive('\n').enumerate() {
        if line.starts_with(ENTRY_HEADER_PREFIX) && offset > start_byte {
            push_entry(&mut entries, &content[start_byte..offset], start_line);
            start_byte = offset;
            start_line = index + 1;
        } else if offset == start_byte && line.trim().is_empty() {
            // Leading blank lines belong to no entry.
            start_byte = offset + line.len();
            start_line = index + 2;
        }
        offset += line.len();
    }
    push_entry(&mut entries, &content[start_byte..], start_line);
    entries
}

fn push_entry<'a>(entries: &mut Vec<Entry<'a>>, text: &'a str, line: usize) {
    let text = text.trim();
    if !text.is_empty() {
        entries.push(Entry { line, text });
    }
}

/// Counts the entries of a day file without collecting them (the count-only tier).
pub(crate) fn count_entries(content: &str) -> usize {
    let mut count = 0;
    let mut text_before_first_header = false;
    let mut seen_header = false;
    for line in content.lines() {
        if line.starts_with(ENTRY_HEADER_PREFIX) {
            count += 1;
            seen_header = true;
        } else if !seen_header && !line.trim().is_empty() {
            text_before_first_header = true;
        }
    }
    count + usize::from(text_before_first_header)
}

/// Makes user text safe to store as one entry's body: every line that would
/// open a new entry (or any Markdown heading) is escaped with a backslash,
/// which Markdown renders as the same text.
pub(crate) fn escape_entry_text(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len() + 8);
    for line in text.trim().lines() {
        let line = line.trim_end();
        if line.starts_with('#') {
            escaped.push('\\');
        }
        escaped.push_str(line);
        escaped.push('\n');
    }
    escaped
}

/// The bytes one append writes: a blank separator line, the header, the body.
pub(crate) fn format_entry(time: &str, escaped_body: &str) -> String {
    format!("\n{ENTRY_HEADER_PREFIX}{time}\n{escaped_body}")
}

/// How a day of a given age is rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tier {
    /// Every entry with its timestamp.
    Full,
    /// Day header, first entry, `…N more entries`.
    FirstEntry,
    /// Date and entry count only.
    CountOnly,
}

/// The tier of a day `age` days before today when `full_days` days are shown in full.
pub(crate) fn tier_for_age(age: u32, full_days: u32) -> Option<Tier> {
    if age < full_days {
        Some(Tier::Full)
    } else if age < HISTORY_HEADER_DAYS {
        Some(Tier::FirstEntry)
    } else if age < HISTORY_WINDOW_DAYS {
        Some(Tier::CountOnly)
    } else {
        None
    }
}

/// Appends the rendering of one day to `out`. Returns false (and writes
/// nothing) for a day without entries.
pub(crate) fn render_day(out: &mut String, date: Date, content: &str, tier: Tier) -> bool {
    match tier {
        Tier::Full => {
            let entries = split_entries(content);
            if entries.is_empty() {
                return false;
            }
            separate(out);
            let _ = write!(out, "### {date}");
            for entry in &entries {
                out.push('\n');
                out.push_str(entry.text);
                out.push('\n');
            }
            out.pop();
        }
        Tier::FirstEntry => {
            let entries = split_entries(content);
            let Some(first) = entries.first() else { return false };
            separate(out);
            let _ = write!(out, "### {date}\n{}", first.text);
            let more = entries.len() - 1;
            if more > 0 {
                let _ = write!(out, "\n…{more} more {}", plural(more));
            }
        }
        Tier::CountOnly => {
            let count = count_entries(content);
            if count == 0 {
                return false;
            }
            separate(out);
            let _ = write!(out, "### {date}: {count} {}", plural(count));
        }
    }
    true
}

fn separate(out: &mut String) {
    if !out.is_empty() {
        out.push_str("\n\n");
    }
}

fn plural(count: usize) -> &'static str {
    if count == 1 { "entry" } else { "entries" }
}

/// Parses a day-file name `YYYY-MM-DD.md`; anything else is not a day file.
pub(crate) fn parse_day_file_name(name: &str) -> Option<Date> {
    let stem = name.strip_suffix(".md")?;
    let bytes = stem.as_bytes();
    let shaped = bytes.len() == 10
        && bytes[4] == b'-'
        && bytes[7] == b'-'
        && bytes.iter().enumerate().all(|(index, byte)| index == 4 || index == 7 || byte.is_ascii_digit());
    if !shaped {
        return None;
    }
    stem.parse::<Date>().ok()
}

/// The file name of a day.
pub(crate) fn day_file_name(date: Date) -> String {
    format!("{date}.md")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_split_at_headers_with_lines() {
        let content = "\n#### 09:00\nfirst\nsecond line\n\n#### 10:30\nthird\n";
        let entries = split_entries(content);
        assert_eq!(
            entries,
            vec![
                Entry { line: 2, text: "#### 09:00\nfirst\nsecond line" },
                Entry { line: 6, text: "#### 10:30\nthird" }
            ]
        );
        assert_eq!(entries[1].time(), Some("10:30"));
        assert_eq!(count_entries(content), 2);
    }

    #[test]
    fn hand_written_text_above_the_first_header_is_one_entry() {
        let content = "notes by hand\n\n#### 09:00\nlater\n";
        let entries = split_entries(content);
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0], Entry { line: 1, text: "notes by hand" });
        assert_eq!(entries[0].time(), None);
        assert_eq!(count_entries(content), 2);
        assert_eq!(count_entries("  \n\n"), 0);
        assert!(split_entries("\n\n").is_empty());
    }

    #[test]
    fn escaped_text_cannot_forge_a_header() {
        let escaped = escape_entry_text("did things\n#### 23:59\n# title  \n");
        assert_eq!(escaped, "did things\n\\#### 23:59\n\\# title\n");
        let file = format_entry("10:00", &escaped);
        assert_eq!(count_entries(&file), 1);
    }

    #[test]
    fn day_file_names_parse_strictly() {
        assert_eq!(parse_day_file_name("2026-01-31.md"), Some(jiff::civil::date(2026, 1, 31)));
        for name in ["2026-02-30.md", "2026-1-31.md", "notes.md", "2026-01-31.md.bak", "+2026-01-31.md", "2026-01-31"] {
            assert_eq!(parse_day_file_name(name), None, "{name}");
        }
    }

    #[test]
    fn tiers_change_at_the_spec_boundaries() {
        assert_eq!(tier_for_age(13, 14), Some(Tier::Full));
        assert_eq!(tier_for_age(14, 14), Some(Tier::FirstEntry));
        assert_eq!(tier_for_age(60, 14), Some(Tier::FirstEntry));
        assert_eq!(tier_for_age(61, 14), Some(Tier::CountOnly));
        assert_eq!(tier_for_age(180, 14), Some(Tier::CountOnly));
        assert_eq!(tier_for_age(181, 14), None);
    }
}
