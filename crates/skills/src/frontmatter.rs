//! `SKILL.md` frontmatter: splitting the file, reading the fields Cairn and
//! the Agent Skills standard define, and the line model edits work on.

use std::collections::BTreeMap;
use std::ops::Range;

use serde::Serialize;
use serde_norway::Value;

/// Why a `SKILL.md` has no usable frontmatter. The messages follow the
/// Agent Skills reference validator's wording.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrontmatterError {
    /// The file does not open with a `---` line.
    #[error("SKILL.md must start with YAML frontmatter (---)")]
    Missing,
    /// No closing `---` line follows the opening one.
    #[error("SKILL.md frontmatter not properly closed with ---")]
    Unclosed,
    /// The block parses, but to a list or a scalar.
    #[error("SKILL.md frontmatter must be a YAML mapping")]
    NotMapping,
    /// The block is not valid YAML.
    #[error("invalid YAML in SKILL.md frontmatter: {0}")]
    Yaml(String),
}

/// A `SKILL.md` cut into its parts, by byte range into the original text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    /// The YAML between the delimiter lines (may be empty).
    pub yaml: Range<usize>,
    /// Everything after the closing delimiter line.
    pub body: Range<usize>,
}

/// Finds the frontmatter block: a first line `---` (after an optional BOM),
/// closed by the next line that is `---`.
pub fn split(text: &str) -> Result<Split, FrontmatterError> {
    let start = if text.starts_with('\u{feff}') { '\u{feff}'.len_utf8() } else { 0 };
    let mut lines = LineIter { text, pos: start };
    let Some(first) = lines.next() else { return Err(FrontmatterError::Missing) };
    if !is_delimiter(&text[first.clone()]) {
        return Err(FrontmatterError::Missing);
    }
    let yaml_start = first.end;
    for line in lines {
        if is_delimiter(&text[line.clone()]) {
            return Ok(Split { yaml: yaml_start..line.start, body: line.end..text.len() });
        }
    }
    Err(FrontmatterError::Unclosed)
}

fn is_delimiter(line: &str) -> bool {
    line.trim_end_matches(['\n', '\r', ' ', '\t']) == "---"
}

/// Iterates line ranges, each including its line ending.
struct LineIter<'a> {
    text: &'a str,
    pos: usize,
}

impl Iterator for LineIter<'_> {
    type Item = Range<usize>;
    fn next(&mut self) -> Option<Range<usize>> {
        if self.pos >= self.text.len() {
            return None;
        }
        let start = self.pos;
        let end = self.text[start..].find('\n').map_or(self.text.len(), |offset| start + offset + 1);
        self.pos = end;
        Some(start..end)
    }
}

/// Splits text into lines that keep their endings (the inverse of `concat`).
pub(crate) fn lines_with_endings(text: &str) -> Vec<&str> {
    LineIter { text, pos: 0 }.map(|range| &text[range]).collect()
}

/// Parses the YAML of a frontmatter block into a mapping.
pub fn parse_mapping(yaml: &str) -> Result<serde_norway::Mapping, FrontmatterError> {
    if yaml.trim().is_empty() {
        return Ok(serde_norway::Mapping::new());
    }
    match serde_norway::from_str::<Value>(yaml) {
        Ok(Value::Mapping(mapping)) => Ok(mapping),
        Ok(Value::Null) => Ok(serde_norway::Mapping::new()),
        Ok(Value::Tagged(tagged)) => match tagged.value {
            Value::Mapping(mapping) => Ok(mapping),
            _ => Err(FrontmatterError::NotMapping),
        },
        Ok(_) => Err(FrontmatterError::NotMapping),
        Err(error) => Err(FrontmatterError::Yaml(error.to_string())),
    }
}

/// The fields of a skill's frontmatter that Cairn reads.
///
/// Cairn's own keys (`always`, `triggers`, `inject_on_trigger`, `pinned`,
/// `version`) are read at top level first, then under `metadata:`, where a
/// skill can keep them and stay valid for other Agent Skills hosts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkillMeta {
    /// `name` as written (the catalog name is the directory path).
    pub name: Option<String>,
    /// `description`.
    pub description: Option<String>,
    /// `always: true` puts the whole body in every new session.
    pub always: bool,
    /// Trigger phrases; a leading `!` makes one exclude the skill.
    pub triggers: Vec<String>,
    /// `false` turns a trigger match into a one-line pointer. Absent or
    /// malformed means `true`.
    pub inject_on_trigger: bool,
    /// `pinned: true` exempts the skill from archival.
    pub pinned: bool,
    /// `version`, as text.
    pub version: Option<String>,
    /// Agent Skills `license`.
    pub license: Option<String>,
    /// Agent Skills `compatibility`.
    pub compatibility: Option<String>,
    /// Agent Skills `allowed-tools`.
    pub allowed_tools: Option<String>,
    /// Agent Skills `metadata`, scalar values as text.
    pub metadata: BTreeMap<String, String>,
    /// Top-level keys outside both the standard and Cairn's set.
    pub unknown_keys: Vec<String>,
}

impl Default for SkillMeta {
    fn default() -> Self {
        Self {
            name: None,
            description: None,
            always: false,
            triggers: Vec::new(),
            inject_on_trigger: true,
            pinned: false,
            version: None,
            license: None,
            compatibility: None,
            allowed_tools: None,
            metadata: BTreeMap::new(),
            unknown_keys: Vec::new(),
        }
    }
}

impl SkillMeta {
    /// Reads the modelled fields from a parsed frontmatter mapping. Never
    /// fails: a field of the wrong type reads as absent.
    pub fn from_mapping(mapping: &serde_norway::Mapping) -> Self {
        let mut meta = Self::default();
        let mut metadata_map: Option<&serde_norway::Mapping> = None;
        for (key, value) in mapping {
            let Some(key) = key.as_str() else {
                meta.unknown_keys.push(scalar_text(key).unwrap_or_else(|| "<non-scalar key>".to_owned()));
                continue;
            };
            match key {
                "name" => meta.name = scalar_text(value),
                "description" => meta.description = scalar_text(value),
                "license" => meta.license = scalar_text(value),
                "compatibility" => meta.compatibility = scalar_text(value),
                "allowed-tools" => meta.allowed_tools = scalar_text(value),
                "metadata" => {
                    if let Value::Mapping(inner) = value {
                        metadata_map = Some(inner);
                        for (inner_key, inner_value) in inner {
                            if let (Some(inner_key), Some(text)) = (scalar_text(inner_key), scalar_text(inner_value)) {
                                meta.metadata.insert(inner_key, text);
                            }
                        }
                    }
                }
                "always" | "triggers" | "inject_on_trigger" | "pinned" | "version" | "source" => {}
                other => meta.unknown_keys.push(other.to_owned()),
            }
        }
        let cairn = |key: &str| mapping.get(key).or_else(|| metadata_map.and_then(|inner| inner.get(key)));
        meta.always = cairn("always").and_then(as_bool).unwrap_or(false);
        meta.pinned = cairn("pinned").and_then(as_bool).unwrap_or(false);
        meta.inject_on_trigger = cairn("inject_on_trigger").and_then(as_bool).unwrap_or(true);
        meta.version = cairn("version").and_then(scalar_text);
        meta.triggers = cairn("triggers").map(triggers_of).unwrap_or_default();
        meta
    }
}

/// A scalar as text (`1.0` stays `1.0`), `None` for null and collections.
pub(crate) fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Bool(flag) => Some(flag.to_string()),
        Value::Number(number) => Some(number.to_string()),
        Value::Tagged(tagged) => scalar_text(&tagged.value),
        Value::Null | Value::Sequence(_) | Value::Mapping(_) => None,
    }
}

/// `true`/`false`, or the strings `true`/`false`/`yes`/`no`/`on`/`off`
/// (metadata values are strings by the standard).
pub(crate) fn as_bool(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(flag) => Some(*flag),
        Value::String(text) => match text.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" => Some(true),
            "false" | "no" | "off" => Some(false),
            _ => None,
        },
        Value::Tagged(tagged) => as_bool(&tagged.value),
        _ => None,
    }
}

/// A list of phrases, or one comma-separated string.
fn triggers_of(value: &Value) -> Vec<String> {
    let mut out = Vec::new();
    match value {
        Value::Sequence(items) => {
            for item in items {
                if let Some(text) = scalar_text(item) {
                    out.extend(split_triggers(&text));
                }
            }
        }
        other => {
            if let Some(text) = scalar_text(other) {
                out.extend(split_triggers(&text));
            }
        }
    }
    out
}

/// Splits a comma-separated trigger string; a part wrapped in matching
/// quotes (`"!dry run"`) is unwrapped.
fn split_triggers(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(',')
        .map(str::trim)
        .map(|part| {
            for quote in ['"', '\''] {
                if part.len() >= 2 && part.starts_with(quote) && part.ends_with(quote) {
                    return part[1..part.len() - 1].trim();
                }
            }
            part
        })
        .filter(|part| !part.is_empty() && *part != "!")
        .map(str::to_owned)
}

/// The result of reading one `SKILL.md` leniently: metadata, body and, when
/// the frontmatter was missing or broken, why.
#[derive(Debug, Clone)]
pub(crate) struct Parsed {
    pub(crate) meta: SkillMeta,
    pub(crate) body_start: usize,
    pub(crate) problem: Option<FrontmatterError>,
}

/// Reads a `SKILL.md` without ever failing: no or broken frontmatter gives
/// empty metadata, the whole text (or what follows the block) as body, and
/// the problem for a warning.
pub(crate) fn parse_lenient(text: &str) -> Parsed {
    match split(text) {
        Ok(split) => match parse_mapping(&text[split.yaml.clone()]) {
            Ok(mapping) => {
                Parsed { meta: SkillMeta::from_mapping(&mapping), body_start: split.body.start, problem: None }
            }
            Err(problem) => Parsed { meta: SkillMeta::default(), body_start: split.body.start, problem: Some(problem) },
        },
        Err(problem @ FrontmatterError::Missing) => {
            Parsed { meta: SkillMeta::default(), body_start: 0, problem: Some(problem) }
        }
        Err(problem) => Parsed { meta: SkillMeta::default(), body_start: 0, problem: Some(problem) },
    }
}

/// Reads a `SKILL.md` strictly: the frontmatter must be present and a mapping.
pub fn parse_strict(text: &str) -> Result<(SkillMeta, serde_norway::Mapping, Split), FrontmatterError> {
    let split = split(text)?;
    let mapping = parse_mapping(&text[split.yaml.clone()])?;
    Ok((SkillMeta::from_mapping(&mapping), mapping, split))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_finds_block_and_body() {
        let text = "---\nname: a\n---\n# Body\n";
        let split = split(text).unwrap();
        assert_eq!(&text[split.yaml], "name: a\n");
        assert_eq!(&text[split.body], "# Body\n");
    }

    #[test]
    fn split_handles_crlf_bom_and_empty_block() {
        let text = "\u{feff}---\r\n---\r\nbody";
        let split = split(text).unwrap();
        assert_eq!(&text[split.yaml], "");
        assert_eq!(&text[split.body], "body");
    }

    #[test]
    fn split_rejects_missing_and_unclosed() {
        assert_eq!(split("# Title\n---\n"), Err(FrontmatterError::Missing));
        assert_eq!(split(""), Err(FrontmatterError::Missing));
        assert_eq!(split("---\nname: a\n"), Err(FrontmatterError::Unclosed));
    }

    #[test]
    fn mapping_rejects_lists_scalars_and_bad_yaml() {
        assert_eq!(parse_mapping("- a\n- b\n"), Err(FrontmatterError::NotMapping));
        assert_eq!(parse_mapping("just text\n"), Err(FrontmatterError::NotMapping));
        assert!(matches!(parse_mapping("a: [1, 2\n"), Err(FrontmatterError::Yaml(_))));
        assert!(matches!(parse_mapping("a: 1\na: 2\n"), Err(FrontmatterError::Yaml(_))));
    }

    fn meta(yaml: &str) -> SkillMeta {
        SkillMeta::from_mapping(&parse_mapping(yaml).unwrap())
    }

    #[test]
    fn reads_cairn_fields_top_level_and_under_metadata() {
        let top =
            meta("always: true\ntriggers: [deploy, '!staging']\ninject_on_trigger: false\npinned: yes\nversion: 1.2\n");
        assert!(top.always);
        assert_eq!(top.triggers, ["deploy", "!staging"]);
        assert!(!top.inject_on_trigger);
        assert!(top.pinned, "`yes` is a string in YAML 1.2; the string forms are accepted");
        assert_eq!(top.version.as_deref(), Some("1.2"));

        let nested = meta("metadata:\n  always: \"true\"\n  triggers: \"grep, log search\"\n  pinned: \"yes\"\n");
        assert!(nested.always);
        assert!(nested.pinned);
        assert_eq!(nested.triggers, ["grep", "log search"]);
        assert_eq!(meta("triggers: deploy, \"!dry run\", 'x y'\n").triggers, ["deploy", "!dry run", "x y"]);
        assert!(nested.inject_on_trigger);
        assert!(nested.unknown_keys.is_empty());
    }

    #[test]
    fn malformed_fields_read_as_defaults() {
        let odd = meta("always: maybe\ninject_on_trigger: [1]\ntriggers: {a: b}\nowner: me\n");
        assert!(!odd.always);
        assert!(odd.inject_on_trigger);
        assert!(odd.triggers.is_empty());
        assert_eq!(odd.unknown_keys, ["owner"]);
    }
}
