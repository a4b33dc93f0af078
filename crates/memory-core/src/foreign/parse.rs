//! Storage-free rules: how the Markdown of another agent's files splits
//! into entries, and what an entry reads as. Nothing here touches a file or
//! a store.

use jiff::civil::{Date, Time};

/// One block of a Markdown body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Block {
    /// A `#` heading (its text, without the marks).
    Heading(String),
    /// A paragraph (its lines joined with `\n`).
    Paragraph(String),
    /// A top-level list item with its continuation and nested lines.
    Bullet(String),
    /// A fenced code block (its content is not kept).
    Code,
}

/// Splits `---` YAML frontmatter from a body. `None` when the text has
/// none; `Some(Err)` when the block is not YAML this reader understands.
pub(crate) fn split_frontmatter(text: &str) -> (Option<Result<serde_json::Value, String>>, &str) {
    let Some(rest) = text.strip_prefix("---\n").or_else(|| text.strip_prefix("---\r\n")) else {
        return (None, text);
    };
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            let yaml = &rest[..offset];
            let body = &rest[offset + line.len()..];
            let parsed = if yaml.trim().is_empty() {
                Ok(serde_json::Value::Object(Default::default()))
            } else {
                serde_norway::from_str::<serde_json::Value>(yaml).map_err(|error| error.to_string())
            };
            return (Some(parsed), body);
        }
        offset += line.len();
    }
    (Some(Err("the frontmatter block is not closed by a `---` line".to_owned())), "")
}

/// A string field of frontmatter, also looked up under `metadata:`.
pub(crate) fn frontmatter_str<'a>(frontmatter: &'a serde_json::Value, field: &str) -> Option<&'a str> {
    frontmatter
        .get(field)
        .or_else(|| frontmatter.get("metadata").and_then(|metadata| metadata.get(field)))
        .and_then(serde_json::Value::as_str)
}

/// The `paths:` of a rules file: a list of globs or one string.
pub(crate) fn frontmatter_paths(frontmatter: &serde_json::Value) -> Vec<String> {
    match frontmatter.get("paths") {
        Some(serde_json::Value::String(text)) => {
            text.split(',').map(str::trim).filter(|glob| !glob.is_empty()).map(str::to_owned).collect()
        }
        Some(serde_json::Value::Array(items)) => {
            items.iter().filter_map(serde_json::Value::as_str).map(str::to_owned).collect()
        }
        _ => Vec::new(),
    }
}

fn bullet_body(line: &str) -> Option<&str> {
    for marker in ["- ", "* ", "+ "] {
        if let Some(rest) = line.strip_prefix(marker) {
            return Some(rest);
        }
    }
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 && digits <= 3 {
        let rest = &line[digits..];
        return rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") "));
    }
    None
}

fn heading_text(line: &str) -> Option<&str> {
    let hashes = line.bytes().take_while(|byte| *byte == b'#').count();
    if (1..=6).contains(&hashes) {
        let rest = &line[hashes..];
        if rest.is_empty() || rest.starts_with(' ') {
            return Some(rest.trim().trim_end_matches('#').trim());
        }
    }
    None
}

/// Splits a Markdown body into headings, paragraphs, top-level list items
/// and code blocks. Blank lines end a paragraph or an item; an indented
/// line continues the item above it; HTML comment lines are dropped.
pub(crate) fn blocks(body: &str) -> Vec<Block> {
    enum Open {
        None,
        Paragraph(Vec<String>),
        Bullet(Vec<String>),
    }
    fn close(open: &mut Open, out: &mut Vec<Block>) {
        match std::mem::replace(open, Open::None) {
            Open::None => {}
            Open::Paragraph(lines) => out.push(Block::Paragraph(lines.join("\n"))),
            Open::Bullet(lines) => out.push(Block::Bullet(lines.join("\n"))),
        }
    }
    let mut out = Vec::new();
    let mut open = Open::None;
    let mut fence: Option<&str> = None;
    for raw in body.lines() {
        let line = raw.trim_end();
        let trimmed = line.trim_start();
        if let Some(marker) = fence {
            if trimmed.starts_with(marker) {
                fence = None;
            }
            continue;
        }
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            close(&mut open, &mut out);
            fence = Some(if trimmed.starts_with("```") { "```" } else { "~~~" });
            out.push(Block::Code);
            continue;
        }
        if trimmed.is_empty() {
            close(&mut open, &mut out);
            continue;
        }
        if trimmed.starts_with("<!--") && trimmed.ends_with("-->") {
            continue;
        }
        let indent = line.len() - trimmed.len();
        if indent < 2
            && let Some(text) = heading_text(trimmed)
        {
            close(&mut open, &mut out);
            out.push(Block::Heading(text.to_owned()));
            continue;
        }
        if trimmed == "---" || trimmed == "***" {
            close(&mut open, &mut out);
            continue;
        }
        if indent < 2
            && let Some(text) = bullet_body(trimmed)
        {
            close(&mut open, &mut out);
            open = Open::Bullet(vec![text.trim().to_owned()]);
            continue;
        }
        match &mut open {
            Open::Bullet(lines) | Open::Paragraph(lines) => lines.push(trimmed.to_owned()),
            Open::None => open = Open::Paragraph(vec![trimmed.to_owned()]),
        }
    }
    close(&mut open, &mut out);
    out
}

/// Entries of a Hermes memory file: text between `§` lines.
pub(crate) fn section_entries(text: &str) -> Vec<String> {
    let mut entries = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        if line.trim() == "§" {
            push_entry(&mut entries, &mut current);
        } else {
            current.push_str(line);
            current.push('\n');
        }
    }
    push_entry(&mut entries, &mut current);
    entries
}

fn push_entry(entries: &mut Vec<String>, current: &mut String) {
    let entry = current.trim();
    if !entry.is_empty() {
        entries.push(entry.to_owned());
    }
    current.clear();
}

/// True when a file uses Hermes's `§` separator lines.
pub(crate) fn has_section_marks(text: &str) -> bool {
    text.lines().any(|line| line.trim() == "§")
}

/// A `HH:MM` (24 h) at the start of a heading or entry, e.g. `## 09:14 standup`.
pub(crate) fn leading_time(text: &str) -> Option<Time> {
    let text = text.trim_start_matches(['[', '(']).trim_start();
    let bytes = text.as_bytes();
    if bytes.len() < 5 || bytes[2] != b':' {
        return None;
    }
    let hour: i8 = text.get(0..2)?.parse().ok()?;
    let minute: i8 = text.get(3..5)?.parse().ok()?;
    if bytes.get(5).is_some_and(u8::is_ascii_digit) {
        return None;
    }
    Time::new(hour, minute, 0, 0).ok()
}

/// One dated entry of an OpenClaw daily log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DailyEntry {
    pub(crate) text: String,
    /// Milliseconds since the epoch: the day at 00:00 UTC, plus the time of
    /// the heading (or the entry itself) when it starts with one.
    pub(crate) created_at: i64,
}

/// Midnight UTC of a daily log's day in Unix milliseconds, or `None` for a
/// day no timestamp can hold (`9999-12-31`): such a file is reported, never
/// imported under another date.
pub(crate) fn day_start(date: Date) -> Option<i64> {
    jiff::tz::TimeZone::UTC
        .to_timestamp(date.to_datetime(Time::midnight()))
        .ok()
        .map(|timestamp| timestamp.as_millisecond())
}

/// The entries of a `memory/YYYY-MM-DD.md` daily log: each paragraph and
/// list item, dated by the file's day (`midnight`, from [`day_start`]) and
/// the nearest heading's time.
pub(crate) fn daily_entries(midnight: i64, body: &str) -> Vec<DailyEntry> {
    let at = |time: Option<Time>| {
        midnight + time.map_or(0, |time| (i64::from(time.hour()) * 3_600 + i64::from(time.minute()) * 60) * 1_000)
    };
    let mut heading_time = None;
    let mut entries = Vec::new();
    for block in blocks(body) {
        match block {
            Block::Heading(text) => heading_time = leading_time(&text),
            Block::Paragraph(text) | Block::Bullet(text) => {
                let time = leading_time(&text).or(heading_time);
                entries.push(DailyEntry { text, created_at: at(time) });
            }
            Block::Code => {}
        }
    }
    entries
}

/// The text of an entry with list and emphasis marks of its first line removed.
pub(crate) fn plain(text: &str) -> String {
    text.replace("**", "").replace("__", "")
}

/// A one-line `label: value` entry (`Name: Ada`, `- **Timezone:** CET`):
/// the `user.*` key and the value, when both are clear.
pub(crate) fn key_value(text: &str) -> Option<(String, String)> {
    let text = plain(text);
    let text = text.trim();
    if text.contains('\n') {
        return None;
    }
    let (label, value) = text.split_once(':')?;
    let label = label.trim();
    let value = value.trim();
    if value.is_empty() || value.chars().count() > 200 || value.starts_with("//") {
        return None;
    }
    let words = label.split_whitespace().count();
    if words == 0 || words > 3 || !label.chars().all(|c| c.is_alphanumeric() || c == ' ' || c == '_' || c == '-') {
        return None;
    }
    let slug = slug(label)?;
    Some((format!("user.{slug}"), value.to_owned()))
}

/// Lower-case `[a-z0-9_]` form of a label; `None` when nothing usable is left.
pub(crate) fn slug(label: &str) -> Option<String> {
    let mut slug = String::new();
    for c in label.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            slug.push(c);
        } else if !slug.ends_with('_') && !slug.is_empty() {
            slug.push('_');
        }
    }
    let slug = slug.trim_end_matches('_').chars().take(60).collect::<String>();
    let slug = slug.trim_end_matches('_').to_owned();
    slug.starts_with(|c: char| c.is_ascii_lowercase()).then_some(slug)
}

const PREFERENCE_WORDS: &[&str] =
    &["prefer", "prefers", "preferred", "always", "never", "likes", "dislikes", "wants", "avoid", "avoids"];

/// True when an entry reads as a preference or standing instruction.
pub(crate) fn reads_as_preference(text: &str) -> bool {
    let lower = text.to_lowercase();
    if lower.contains("don't") || lower.contains("do not") {
        return true;
    }
    lower.split(|c: char| !c.is_alphanumeric() && c != '\'').any(|word| PREFERENCE_WORDS.contains(&word))
}

const IDENTITY_OPENINGS: &[&str] = &[
    "you are",
    "you're",
    "your name is",
    "your name's",
    "i am",
    "i'm",
    "call yourself",
    "act as",
    "pretend",
    "your persona",
    "your personality",
    "your role is",
];

/// True when a persona paragraph states an identity or role rather than a
/// directive (`You are Claw, a sharp assistant`).
pub(crate) fn states_identity(text: &str) -> bool {
    let lower = plain(text).trim().to_lowercase();
    IDENTITY_OPENINGS
        .iter()
        .any(|opening| lower.starts_with(opening) && lower[opening.len()..].starts_with(|c: char| !c.is_alphanumeric()))
}

/// True when a paragraph is only `@path` imports (Claude Code's `@file` includes).
pub(crate) fn only_imports(text: &str) -> bool {
    text.lines().all(|line| {
        let line = line.trim();
        line.starts_with('@') && line.len() > 1 && !line.contains(' ')
    })
}

/// True when a list item is only a link to a Markdown file (an index line
/// of Claude Code's `MEMORY.md`), optionally followed by a short hook.
pub(crate) fn is_index_pointer(text: &str) -> bool {
    let text = text.trim();
    let Some(rest) = text.strip_prefix('[') else { return false };
    let Some((_, after)) = rest.split_once("](") else { return false };
    let Some((target, _)) = after.split_once(')') else { return false };
    target.ends_with(".md")
}

/// One line: whitespace runs collapsed.
pub(crate) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Packs the paragraphs of a body into chunks of at most `max` characters;
/// a paragraph longer than `max` stays whole (the writer refuses it).
pub(crate) fn chunk_paragraphs(body: &str, max: usize) -> Vec<String> {
    let mut chunks = Vec::new();
    let mut current = String::new();
    for block in blocks(body) {
        let text = match block {
            Block::Heading(text) => text,
            Block::Paragraph(text) => text,
            Block::Bullet(text) => format!("- {text}"),
            Block::Code => continue,
        };
        let joined = current.chars().count() + 2 + text.chars().count();
        if !current.is_empty() && joined > max {
            chunks.push(std::mem::take(&mut current));
        }
        if !current.is_empty() {
            current.push_str("\n\n");
        }
        current.push_str(&text);
    }
    if !current.trim().is_empty() {
        chunks.push(current);
    }
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_split_headings_paragraphs_items_and_code() {
        let body = "# Title\n\nFirst line\nsecond line\n\n- one\n  nested\n- two\n\n```sh\ncargo test\n```\n<!-- note -->\n1. three\n";
        assert_eq!(
            blocks(body),
            vec![
                Block::Heading("Title".into()),
                Block::Paragraph("First line\nsecond line".into()),
                Block::Bullet("one\nnested".into()),
                Block::Bullet("two".into()),
                Block::Code,
                Block::Bullet("three".into()),
            ]
        );
    }

    #[test]
    fn frontmatter_is_parsed_or_reported() {
        let (frontmatter, body) = split_frontmatter("---\ntype: feedback\npaths:\n  - src/**\n---\nBody\n");
        let frontmatter = frontmatter.unwrap().unwrap();
        assert_eq!(frontmatter_str(&frontmatter, "type"), Some("feedback"));
        assert_eq!(frontmatter_paths(&frontmatter), vec!["src/**".to_owned()]);
        assert_eq!(body, "Body\n");
        let (frontmatter, body) = split_frontmatter("---\nmetadata:\n  type: user\n---\nx");
        assert_eq!(frontmatter_str(&frontmatter.unwrap().unwrap(), "type"), Some("user"));
        assert_eq!(body, "x");
        assert!(split_frontmatter("---\ntype: [unclosed\n---\n").0.unwrap().is_err());
        assert!(split_frontmatter("---\ntype: user\nno end\n").0.unwrap().is_err());
        assert!(split_frontmatter("no frontmatter").0.is_none());
    }

    #[test]
    fn section_entries_split_on_section_sign_lines() {
        assert_eq!(section_entries("a\nb\n§\n\n§\nc\n"), vec!["a\nb".to_owned(), "c".to_owned()]);
        assert!(has_section_marks("x\n§\ny"));
        assert!(!has_section_marks("x § y"));
    }

    #[test]
    fn key_values_need_a_short_label_and_one_line() {
        assert_eq!(key_value("Name: Ada"), Some(("user.name".into(), "Ada".into())));
        assert_eq!(key_value("**Time zone:** Europe/Berlin"), Some(("user.time_zone".into(), "Europe/Berlin".into())));
        assert_eq!(key_value("Prefers tea over coffee in the morning"), None);
        assert_eq!(key_value("see https://example.com"), None);
        assert_eq!(key_value("one two three four: five"), None);
        assert_eq!(key_value("Name: Ada\nRole: dev"), None);
        assert_eq!(key_value("42: answer"), None);
    }

    #[test]
    fn preferences_identities_and_pointers() {
        assert!(reads_as_preference("Prefers concise answers"));
        assert!(reads_as_preference("Don't use emoji"));
        assert!(!reads_as_preference("Works at a bakery in Lyon"));
        assert!(states_identity("You are Claw, a sharp assistant."));
        assert!(states_identity("**I am** your friendly helper"));
        assert!(!states_identity("Your answers stay short."));
        assert!(is_index_pointer("[Testing](testing.md) — how tests run"));
        assert!(!is_index_pointer("Uses [pnpm](https://pnpm.io)"));
        assert!(only_imports("@docs/style.md\n@~/.claude/me.md"));
        assert!(!only_imports("@alice reviews PRs"));
    }

    #[test]
    fn daily_entries_carry_the_day_and_heading_time() {
        let date: Date = "2026-03-04".parse().unwrap();
        let midnight = 1_772_582_400_000;
        assert_eq!(day_start(date), Some(midnight));
        assert_eq!(day_start("9999-12-31".parse().unwrap()), None, "past the last timestamp");
        let entries =
            daily_entries(midnight, "# 2026-03-04\n\n## 09:15 standup\n- shipped the parser\n\n14:30 met Bo\n");
        assert_eq!(
            entries,
            vec![
                DailyEntry { text: "shipped the parser".into(), created_at: midnight + 9 * 3_600_000 + 15 * 60_000 },
                DailyEntry { text: "14:30 met Bo".into(), created_at: midnight + 14 * 3_600_000 + 30 * 60_000 },
            ]
        );
        assert_eq!(leading_time("123:45"), None);
        assert_eq!(leading_time("25:00 late"), None);
    }

    #[test]
    fn chunks_pack_paragraphs_under_the_limit() {
        let body = format!("{}\n\n{}\n\n{}", "a".repeat(8), "b".repeat(8), "c".repeat(30));
        assert_eq!(
            chunk_paragraphs(&body, 20),
            vec![format!("{}\n\n{}", "a".repeat(8), "b".repeat(8)), "c".repeat(30)]
        );
    }
}
