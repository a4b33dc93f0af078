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
//! Text above the first header (a `# 2026-11-17` title, notes written by
//! hand) is not an entry: it is never shown as a day's first entry nor
//! counted. The full tier shows its non-heading lines (a title dropped)
//! above the entries, migration carries those lines over as one episode, and the search index holds
//! it as a chunk of its own, so hand-written notes stay visible and findable.

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

/// Splits a day file into its entries (each opened by a `#### ` header);
/// text above the first header is not an entry.
pub(crate) fn split_entries(content: &str) -> Vec<Entry<'_>> {
    let mut chunks = split_chunks(content);
    chunks.retain(|chunk| chunk.time().is_some());
    chunks
}

/// Splits a day file into its searchable chunks, skipping blank text: the
/// text above the first header (header-less, if any) and then every entry.
pub(crate) fn split_chunks(content: &str) -> Vec<Entry<'_>> {
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

/// Counts the entries of a day file (its `#### ` header lines) without
/// collecting them: the count-only tier.
pub(crate) fn count_entries(content: &str) -> usize {
    content.lines().filter(|line| line.starts_with(ENTRY_HEADER_PREFIX)).count()
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

/// The first body line of an entry written for a project's session:
/// `<!-- cairn-scope: NAME -->` (invisible where Markdown is rendered).
const SCOPE_TAG_PREFIX: &str = "<!-- cairn-scope: ";
const SCOPE_TAG_SUFFIX: &str = " -->";

/// The tag line naming `scope` (none for global entries).
pub(crate) fn scope_tag(scope: &crate::scope::Scope) -> Option<String> {
    scope.project().map(|project| format!("{SCOPE_TAG_PREFIX}{project}{SCOPE_TAG_SUFFIX}"))
}

/// The scope an entry (header line included) was written for, and its
/// text without the tag line.
pub(crate) fn entry_scope(text: &str) -> (&str, String) {
    let mut lines = text.lines();
    let header = lines.next().unwrap_or("");
    let rest: Vec<&str> = lines.collect();
    if let Some(first) = rest.first()
        && let Some(name) =
            first.trim().strip_prefix(SCOPE_TAG_PREFIX).and_then(|tail| tail.strip_suffix(SCOPE_TAG_SUFFIX))
    {
        let mut shown = header.to_owned();
        for line in &rest[1..] {
            shown.push('\n');
            shown.push_str(line);
        }
        return (name.trim(), shown);
    }
    (crate::scope::GLOBAL_SCOPE, text.to_owned())
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
pub(crate) fn render_day(
    out: &mut String,
    date: Date,
    content: &str,
    tier: Tier,
    scopes: &crate::scope::ScopeFilter,
) -> bool {
    // The entries the reader's scopes admit, without their tag lines.
    let admitted = |entries: &[Entry<'_>]| -> Vec<String> {
        entries
            .iter()
            .filter_map(|entry| {
                let (scope, shown) = entry_scope(entry.text);
                scopes.admits(scope).then_some(shown)
            })
            .collect()
    };
    match tier {
        Tier::Full => {
            let chunks = split_chunks(content);
            let (notes, entries) = match chunks.split_first() {
                Some((first, rest)) if first.time().is_none() => (preamble_notes(first.text), rest),
                _ => (String::new(), &chunks[..]),
            };
            let entries = admitted(entries);
            if entries.is_empty() && notes.is_empty() {
                return false;
            }
            separate(out);
            let _ = write!(out, "### {date}");
            if !notes.is_empty() {
                out.push('\n');
                out.push_str(&notes);
                out.push('\n');
            }
            for entry in &entries {
                out.push('\n');
                out.push_str(entry);
                out.push('\n');
            }
            out.pop();
        }
        Tier::FirstEntry => {
            let entries = admitted(&split_entries(content));
            let Some(first) = entries.first() else { return false };
            separate(out);
            let _ = write!(out, "### {date}\n{first}");
            let more = entries.len() - 1;
            if more > 0 {
                let _ = write!(out, "\n…{more} more {}", plural(more));
            }
        }
        Tier::CountOnly => {
            let count = match scopes {
                crate::scope::ScopeFilter::All => count_entries(content),
                _ => admitted(&split_entries(content)).len(),
            };
            if count == 0 {
                return false;
            }
            separate(out);
            let _ = write!(out, "### {date}: {count} {}", plural(count));
        }
    }
    true
}

/// What the full tier shows of the text above the first header: its lines
/// without Markdown headings (a `# 2026-11-17` title repeats the day header).
pub(crate) fn preamble_notes(text: &str) -> String {
    let kept: Vec<&str> = text.lines().filter(|line| !line.trim_start().starts_with('#')).collect();
    kept.join("\n").trim().to_owned()
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
    fn text_above_the_first_header_is_a_chunk_but_not_an_entry() {
        let content = "notes by hand\n\n#### 09:00\nlater\n";
        let entries = split_entries(content);
        assert_eq!(entries, vec![Entry { line: 3, text: "#### 09:00\nlater" }]);
        assert_eq!(count_entries(content), 1);
        let chunks = split_chunks(content);
        assert_eq!(chunks.len(), 2);
        assert_eq!(chunks[0], Entry { line: 1, text: "notes by hand" });
        assert_eq!(chunks[0].time(), None);
        assert_eq!(count_entries("  \n\n"), 0);
        assert!(split_entries("\n\n").is_empty());
        // A file with no header at all has no entries.
        assert!(split_entries("just a note\n").is_empty());
        assert_eq!(count_entries("just a note\n"), 0);
    }

    #[test]
    fn a_title_line_is_neither_the_first_entry_nor_counted() {
        let content = "# 2026-11-17\n\n#### 09:00\nfirst real entry\n\n#### 11:30\nsecond\n";
        assert_eq!(count_entries(content), 2);
        let date = jiff::civil::date(2026, 11, 17);
        let mut first = String::new();
        assert!(render_day(&mut first, date, content, Tier::FirstEntry, &crate::scope::ScopeFilter::All));
        assert_eq!(first, "### 2026-11-17\n#### 09:00\nfirst real entry\n…1 more entry");
        let mut full = String::new();
        assert!(render_day(&mut full, date, content, Tier::Full, &crate::scope::ScopeFilter::All));
        assert_eq!(full, "### 2026-11-17\n#### 09:00\nfirst real entry\n\n#### 11:30\nsecond");
        let mut count = String::new();
        assert!(render_day(&mut count, date, content, Tier::CountOnly, &crate::scope::ScopeFilter::All));
        assert_eq!(count, "### 2026-11-17: 2 entries");
        // Hand-written notes above the first header show in the full tier only, never counted.
        let noted = "# 2026-11-17\nnotes by hand\n\n#### 09:00\nentry\n";
        let mut full = String::new();
        assert!(render_day(&mut full, date, noted, Tier::Full, &crate::scope::ScopeFilter::All));
        assert_eq!(full, "### 2026-11-17\nnotes by hand\n\n#### 09:00\nentry");
        let mut first = String::new();
        assert!(render_day(&mut first, date, noted, Tier::FirstEntry, &crate::scope::ScopeFilter::All));
        assert_eq!(first, "### 2026-11-17\n#### 09:00\nentry");
        // A day holding only a title renders nothing in any tier.
        for tier in [Tier::Full, Tier::FirstEntry, Tier::CountOnly] {
            let mut out = String::new();
            assert!(!render_day(&mut out, date, "# 2026-11-17\n", tier, &crate::scope::ScopeFilter::All), "{tier:?}");
            assert!(out.is_empty());
        }
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
