//! Line-level frontmatter edits that leave every line they do not model
//! byte-identical.
//!
//! A top-level key's *value lines* are its key line plus what continues the
//! value: indented lines, indentless `- item` entries, and blank lines
//! between them. Column-0 comments and blank lines that end a value are not
//! part of it and are kept. An edit replaces or removes exactly the value
//! lines of the key it changes, or appends one line before the closing
//! delimiter; nothing else is re-serialised.

use std::ops::Range;

use serde_norway::Value;

use crate::frontmatter::{FrontmatterError, lines_with_endings, parse_strict, split};

/// A change to one field.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Change<T> {
    /// Leave the field as it is.
    #[default]
    Keep,
    /// Write this value.
    Set(T),
    /// Remove the key.
    Remove,
}

/// Edits to the fields a structured editor models. Every other key, comment
/// and blank line keeps its bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldUpdate {
    /// `description`.
    pub description: Change<String>,
    /// `always`.
    pub always: Change<bool>,
    /// `triggers` (written as a flow list).
    pub triggers: Change<Vec<String>>,
    /// `inject_on_trigger`.
    pub inject_on_trigger: Change<bool>,
    /// `pinned`.
    pub pinned: Change<bool>,
    /// `version`.
    pub version: Change<String>,
}

/// Why an edit could not be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EditError {
    Frontmatter(FrontmatterError),
    NotApplied(String),
}

/// The key a line declares, when the line (indentation already removed)
/// has the form `key:`, `key: value`, `"key": value` or `'key': value`.
fn key_of(rest: &str) -> Option<&str> {
    let rest = rest.trim_end_matches(['\n', '\r']);
    let (key, after) = if let Some(quote @ ('"' | '\'')) = rest.chars().next() {
        let close = rest[1..].find(quote)? + 1;
        (&rest[1..close], &rest[close + 1..])
    } else {
        let bytes = rest.as_bytes();
        let colon = (0..bytes.len()).find(|&index| {
            bytes[index] == b':' && bytes.get(index + 1).is_none_or(|next| *next == b' ' || *next == b'\t')
        })?;
        (rest[..colon].trim_end(), &rest[colon..])
    };
    let after = after.strip_prefix(':')?;
    if !(after.is_empty() || after.starts_with([' ', '\t'])) || key.is_empty() {
        return None;
    }
    Some(key)
}

/// The key of a column-0 line, `None` for anything else (indented lines,
/// comments, sequence entries, document markers).
pub(crate) fn top_level_key(line: &str) -> Option<&str> {
    let first = line.chars().next()?;
    if first.is_whitespace() || matches!(first, '#' | '-' | '?' | '[' | '{' | '.') {
        return None;
    }
    key_of(line)
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start_matches([' ', '\t']).len()
}

fn is_blank(line: &str) -> bool {
    line.trim().is_empty()
}

fn is_indentless_entry(line: &str) -> bool {
    line == "-"
        || line.starts_with("- ")
        || line.starts_with("-\t")
        || line.starts_with("-\n")
        || line.starts_with("-\r")
}

/// Lines `start+1..` that continue a value whose key line sits at `indent`.
fn value_end(lines: &[&str], start: usize, indent: usize) -> usize {
    let mut end = start + 1;
    let mut cursor = start + 1;
    while cursor < lines.len() {
        let line = lines[cursor];
        if is_blank(line) {
            cursor += 1;
            continue;
        }
        let continues = indent_of(line) > indent || (indent == 0 && is_indentless_entry(line));
        if !continues {
            break;
        }
        cursor += 1;
        end = cursor;
    }
    end
}

fn find_top_level(lines: &[&str], key: &str) -> Option<Range<usize>> {
    let start = lines.iter().position(|line| top_level_key(line) == Some(key))?;
    Some(start..value_end(lines, start, 0))
}

/// Where the children of a block-style `metadata:` map live: the child
/// indentation and the line range of the map's body.
fn metadata_block(lines: &[&str]) -> Option<(usize, Range<usize>)> {
    let start = lines.iter().position(|line| top_level_key(line) == Some("metadata"))?;
    let inline = lines[start].split_once(':').map(|(_, rest)| rest.trim()).unwrap_or_default();
    if !(inline.is_empty() || inline.starts_with('#')) {
        return None;
    }
    let end = value_end(lines, start, 0);
    let child_indent = lines[start + 1..end]
        .iter()
        .find(|line| !is_blank(line) && !line.trim_start().starts_with('#'))
        .map(|line| indent_of(line))?;
    Some((child_indent, start + 1..end))
}

fn find_metadata_child(lines: &[&str], key: &str) -> Option<(usize, Range<usize>)> {
    let (indent, body) = metadata_block(lines)?;
    let start = body.clone().find(|&index| {
        let line = lines[index];
        indent_of(line) == indent && key_of(&line[indent..]) == Some(key)
    })?;
    Some((indent, start..value_end(lines, start, indent).min(body.end)))
}

/// Renders a string as a YAML scalar: plain when that reads back as the
/// same string, JSON-quoted otherwise.
pub(crate) fn render_string(text: &str) -> String {
    let plain_ok = !text.is_empty()
        && !text.contains(['\n', '\r', '#'])
        && text.trim() == text
        && matches!(serde_norway::from_str::<Value>(&format!("k: {text}")),
            Ok(Value::Mapping(ref map)) if map.get("k") == Some(&Value::String(text.to_owned())));
    if plain_ok { text.to_owned() } else { serde_json::to_string(text).expect("strings always encode") }
}

fn render_list(items: &[String]) -> String {
    serde_json::to_string(items).expect("string lists always encode")
}

struct Editor<'a> {
    lines: Vec<String>,
    eol: &'a str,
}

impl Editor<'_> {
    fn view(&self) -> Vec<&str> {
        self.lines.iter().map(String::as_str).collect()
    }

    /// Sets or removes `key`, preferring where it already is: top level,
    /// then under `metadata:` (as a string, the standard's value type),
    /// else appended at top level.
    fn apply(&mut self, key: &str, value: Option<(String, String)>) {
        let view = self.view();
        let top = find_top_level(&view, key);
        let child = find_metadata_child(&view, key);
        drop(view);
        match value {
            Some((rendered, as_string)) => {
                if let Some(range) = top {
                    let line = format!("{key}: {rendered}{}", self.eol);
                    self.lines.splice(range, [line]);
                } else if let Some((indent, range)) = child {
                    let prefix = self.lines[range.start][..indent].to_owned();
                    let line =
                        format!("{prefix}{key}: {}{}", serde_json::to_string(&as_string).expect("string"), self.eol);
                    self.lines.splice(range, [line]);
                } else {
                    if let Some(last) = self.lines.last_mut()
                        && !last.ends_with('\n')
                    {
                        last.push_str(self.eol);
                    }
                    self.lines.push(format!("{key}: {rendered}{}", self.eol));
                }
            }
            None => {
                // Remove the child first: it sits after the top-level key's
                // position only if metadata follows it, so recompute ranges.
                if let Some((_, range)) = child {
                    self.lines.drain(range);
                }
                let view = self.view();
                let top = find_top_level(&view, key);
                drop(view);
                if let Some(range) = top {
                    self.lines.drain(range);
                }
            }
        }
    }
}

fn bool_value(flag: bool) -> (String, String) {
    (flag.to_string(), flag.to_string())
}

/// Applies `update` to a whole `SKILL.md` text and returns the new text.
/// The result is re-parsed; an edit that would not read back as asked is
/// refused.
pub(crate) fn apply_update(text: &str, update: &FieldUpdate) -> Result<String, EditError> {
    let split = split(text).map_err(EditError::Frontmatter)?;
    parse_strict(text).map_err(EditError::Frontmatter)?;
    let yaml = &text[split.yaml.clone()];
    let eol = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let mut editor = Editor { lines: lines_with_endings(yaml).into_iter().map(str::to_owned).collect(), eol };

    let string = |change: &Change<String>| match change {
        Change::Keep => None,
        Change::Set(text) => Some(Some((render_string(text), text.clone()))),
        Change::Remove => Some(None),
    };
    let flag = |change: &Change<bool>| match change {
        Change::Keep => None,
        Change::Set(value) => Some(Some(bool_value(*value))),
        Change::Remove => Some(None),
    };
    let triggers = match &update.triggers {
        Change::Keep => None,
        Change::Set(items) => Some(Some((render_list(items), items.join(", ")))),
        Change::Remove => Some(None),
    };
    let plan = [
        ("description", string(&update.description)),
        ("always", flag(&update.always)),
        ("triggers", triggers),
        ("inject_on_trigger", flag(&update.inject_on_trigger)),
        ("pinned", flag(&update.pinned)),
        ("version", string(&update.version)),
    ];
    for (key, change) in plan {
        if let Some(value) = change {
            editor.apply(key, value);
        }
    }
    let mut out = String::with_capacity(text.len() + 64);
    out.push_str(&text[..split.yaml.start]);
    for line in &editor.lines {
        out.push_str(line);
    }
    out.push_str(&text[split.yaml.end..]);

    let (meta, _, _) = parse_strict(&out).map_err(|error| EditError::NotApplied(error.to_string()))?;
    let check = |ok: bool, what: &str| {
        if ok { Ok(()) } else { Err(EditError::NotApplied(format!("`{what}` would not read back as requested"))) }
    };
    match &update.description {
        Change::Set(text) => check(meta.description.as_deref() == Some(text.as_str()), "description")?,
        Change::Remove => check(meta.description.is_none(), "description")?,
        Change::Keep => {}
    }
    let flag_check = |change: &Change<bool>, actual: bool, default: bool, what: &str| match change {
        Change::Set(value) => check(actual == *value, what),
        Change::Remove => check(actual == default, what),
        Change::Keep => Ok(()),
    };
    flag_check(&update.always, meta.always, false, "always")?;
    flag_check(&update.inject_on_trigger, meta.inject_on_trigger, true, "inject_on_trigger")?;
    flag_check(&update.pinned, meta.pinned, false, "pinned")?;
    match &update.triggers {
        Change::Set(items) => {
            let expected: Vec<String> =
                items.iter().map(|item| item.trim().to_owned()).filter(|item| !item.is_empty()).collect();
            check(meta.triggers == expected, "triggers")?;
        }
        Change::Remove => check(meta.triggers.is_empty(), "triggers")?,
        Change::Keep => {}
    }
    match &update.version {
        Change::Set(text) => check(meta.version.as_deref() == Some(text.as_str()), "version")?,
        Change::Remove => check(meta.version.is_none(), "version")?,
        Change::Keep => {}
    }
    Ok(out)
}

/// `inject: false` writes `inject_on_trigger: false`; `inject: true`
/// removes the key (injecting is the default).
pub(crate) fn set_inject_on_trigger(text: &str, inject: bool) -> Result<String, EditError> {
    let change = if inject { Change::Remove } else { Change::Set(false) };
    apply_update(text, &FieldUpdate { inject_on_trigger: change, ..FieldUpdate::default() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_detection() {
        assert_eq!(top_level_key("name: x\n"), Some("name"));
        assert_eq!(top_level_key("metadata:\n"), Some("metadata"));
        assert_eq!(top_level_key("\"odd key\": 1\n"), Some("odd key"));
        assert_eq!(top_level_key("url: http://x\n"), Some("url"));
        assert_eq!(top_level_key("  inject_on_trigger: false\n"), None);
        assert_eq!(top_level_key("# inject_on_trigger: false\n"), None);
        assert_eq!(top_level_key("- item\n"), None);
        assert_eq!(top_level_key("http://x\n"), None);
    }

    #[test]
    fn render_string_quotes_only_when_needed() {
        assert_eq!(render_string("Deploys the app"), "Deploys the app");
        assert_eq!(render_string("true"), "\"true\"");
        assert_eq!(render_string("a: b"), "\"a: b\"");
        assert_eq!(render_string("two\nlines"), "\"two\\nlines\"");
        assert_eq!(render_string("# hash"), "\"# hash\"");
        assert_eq!(render_string(""), "\"\"");
    }
}
