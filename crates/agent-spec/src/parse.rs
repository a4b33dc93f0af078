//! The two serialisations: a JSON object, and Markdown with YAML
//! frontmatter that must be JSON-shaped.

use std::sync::LazyLock;

use regex::Regex;
use saphyr_parser::{Event, Parser, ScalarStyle, Span};
use serde_json::{Map, Number, Value};

use crate::error::SyntaxProblem;

/// A parsed Markdown spec: the frontmatter as a JSON object and the body.
#[derive(Debug)]
pub(crate) struct MarkdownParts {
    pub(crate) fields: Map<String, Value>,
    pub(crate) body: String,
}

/// Parses a JSON spec. kiro-cli reads agent files with a strict JSON
/// parser, so comments and trailing commas are errors here too.
pub(crate) fn parse_json(text: &str) -> Result<Map<String, Value>, SyntaxProblem> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let value: Value = serde_json::from_str(text).map_err(|error| SyntaxProblem::Json {
        line: error.line(),
        column: error.column(),
        message: strip_position(&error.to_string()),
    })?;
    match value {
        Value::Object(fields) => Ok(fields),
        other => Err(SyntaxProblem::NotAnObject { found: json_kind(&other) }),
    }
}

/// Splits a Markdown spec into frontmatter and body and converts the
/// frontmatter to JSON.
pub(crate) fn parse_markdown(text: &str) -> Result<MarkdownParts, SyntaxProblem> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().ok_or(SyntaxProblem::MissingFrontmatter)?;
    if first.trim_end() != "---" {
        return Err(SyntaxProblem::MissingFrontmatter);
    }
    let mut yaml = String::new();
    let mut closed = false;
    let mut consumed = first.len();
    for line in lines.by_ref() {
        consumed += line.len();
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        yaml.push_str(line);
    }
    if !closed {
        return Err(SyntaxProblem::UnterminatedFrontmatter);
    }
    let body = text[consumed..].to_owned();
    let fields = yaml_to_json(&yaml, 1)?;
    Ok(MarkdownParts { fields, body })
}

/// A comma-separated `tools: read, write` written as one string becomes
/// the list the JSON form would hold.
pub(crate) fn split_comma_list(text: &str) -> Vec<Value> {
    text.split(',').map(str::trim).filter(|part| !part.is_empty()).map(|part| Value::String(part.to_owned())).collect()
}

enum Frame {
    Sequence(Vec<Value>),
    Mapping { fields: Map<String, Value>, key: Option<String> },
}

/// Converts YAML text to a JSON object, refusing every construct that has
/// no JSON form. `line_offset` is added to reported lines so they match
/// the file.
fn yaml_to_json(yaml: &str, line_offset: usize) -> Result<Map<String, Value>, SyntaxProblem> {
    let line_of = |span: &Span| span.start.line() + line_offset;
    let mut stack: Vec<Frame> = Vec::new();
    let mut root: Option<Value> = None;
    let mut documents = 0usize;
    // An anchor is reported after the parse, so that an alias using it is
    // named as the alias.
    let mut first_anchor: Option<usize> = None;
    for event in Parser::new_from_str(yaml) {
        let (event, span) = event.map_err(|error| SyntaxProblem::Yaml {
            line: error.marker().line() + line_offset,
            message: error.info().to_owned(),
        })?;
        let value = match event {
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => continue,
            Event::DocumentStart(_) => {
                documents += 1;
                if documents > 1 {
                    return Err(SyntaxProblem::MultipleDocuments);
                }
                continue;
            }
            Event::Alias(_) => return Err(SyntaxProblem::YamlAlias { line: line_of(&span) }),
            Event::Scalar(text, style, anchor, tag) => {
                reject_tag(tag.as_deref(), line_of(&span))?;
                note_anchor(anchor, line_of(&span), &mut first_anchor);
                let expecting_key = matches!(stack.last(), Some(Frame::Mapping { key: None, .. }));
                let value = if style == ScalarStyle::Plain {
                    resolve_plain(&text, line_of(&span))?
                } else {
                    Value::String(text.into_owned())
                };
                if expecting_key {
                    let Value::String(key) = value else {
                        return Err(SyntaxProblem::NonStringKey { line: line_of(&span) });
                    };
                    let Some(Frame::Mapping { fields, key: pending }) = stack.last_mut() else {
                        unreachable!("checked above that a mapping is waiting for a key")
                    };
                    if fields.contains_key(&key) {
                        return Err(SyntaxProblem::DuplicateKey { key, line: line_of(&span) });
                    }
                    *pending = Some(key);
                    continue;
                }
                value
            }
            Event::SequenceStart(anchor, ref tag) | Event::MappingStart(anchor, ref tag) => {
                reject_tag(tag.as_deref(), line_of(&span))?;
                note_anchor(anchor, line_of(&span), &mut first_anchor);
                if matches!(stack.last(), Some(Frame::Mapping { key: None, .. })) {
                    return Err(SyntaxProblem::NonStringKey { line: line_of(&span) });
                }
                let is_sequence = matches!(event, Event::SequenceStart(..));
                stack.push(if is_sequence {
                    Frame::Sequence(Vec::new())
                } else {
                    Frame::Mapping { fields: Map::new(), key: None }
                });
                continue;
            }
            Event::SequenceEnd | Event::MappingEnd => match stack.pop() {
                Some(Frame::Sequence(items)) => Value::Array(items),
                Some(Frame::Mapping { fields, .. }) => Value::Object(fields),
                None => continue,
            },
        };
        match stack.last_mut() {
            None => root = Some(value),
            Some(Frame::Sequence(items)) => items.push(value),
            Some(Frame::Mapping { fields, key }) => {
                let key = key.take().unwrap_or_default();
                fields.insert(key, value);
            }
        }
    }
    if let Some(line) = first_anchor {
        return Err(SyntaxProblem::YamlAnchor { line });
    }
    match root {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(fields)) => Ok(fields),
        Some(other) => Err(SyntaxProblem::NotAnObject { found: json_kind(&other) }),
    }
}

fn note_anchor(anchor: usize, line: usize, first_anchor: &mut Option<usize>) {
    if anchor != 0 && first_anchor.is_none() {
        *first_anchor = Some(line);
    }
}

fn reject_tag(tag: Option<&saphyr_parser::Tag>, line: usize) -> Result<(), SyntaxProblem> {
    let Some(tag) = tag else { return Ok(()) };
    let handle = if tag.handle == "tag:yaml.org,2002:" { "!!" } else { tag.handle.as_str() };
    Err(SyntaxProblem::YamlTag { tag: format!("{handle}{}", tag.suffix), line })
}

static INTEGER: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^[-+]?[0-9]+$").expect("valid regex"));
static OCTAL: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^0o[0-7]+$").expect("valid regex"));
static HEX: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^0x[0-9a-fA-F]+$").expect("valid regex"));
static FLOAT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$").expect("valid regex"));
static NON_FINITE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^([-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN))$").expect("valid regex"));

/// Resolves a plain scalar with the YAML 1.2 core schema.
fn resolve_plain(text: &str, line: usize) -> Result<Value, SyntaxProblem> {
    Ok(match text {
        "" | "~" | "null" | "Null" | "NULL" => Value::Null,
        "true" | "True" | "TRUE" => Value::Bool(true),
        "false" | "False" | "FALSE" => Value::Bool(false),
        _ if NON_FINITE.is_match(text) => {
            return Err(SyntaxProblem::NonFiniteNumber { text: text.to_owned(), line });
        }
        _ if INTEGER.is_match(text) => integer(text),
        _ if OCTAL.is_match(text) => radix(&text[2..], 8, text),
        _ if HEX.is_match(text) => radix(&text[2..], 16, text),
        _ if FLOAT.is_match(text) => text
            .parse::<f64>()
            .ok()
            .and_then(Number::from_f64)
            .map_or_else(|| Value::String(text.to_owned()), Value::Number),
        _ => Value::String(text.to_owned()),
    })
}

fn integer(text: &str) -> Value {
    if let Ok(number) = text.parse::<i64>() {
        return Value::Number(number.into());
    }
    if let Ok(number) = text.trim_start_matches('+').parse::<u64>() {
        return Value::Number(number.into());
    }
    text.parse::<f64>().ok().and_then(Number::from_f64).map_or_else(|| Value::String(text.to_owned()), Value::Number)
}

fn radix(digits: &str, radix: u32, text: &str) -> Value {
    u64::from_str_radix(digits, radix)
        .map_or_else(|_| Value::String(text.to_owned()), |number| Value::Number(number.into()))
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// serde_json appends " at line L column C"; the position is reported in
/// its own fields.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(index) => message[..index].to_owned(),
        None => message.to_owned(),
    }
}
