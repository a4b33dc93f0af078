//! Byte-preserving edits of JSON config files: enable and disable a server
//! for an agent (`@name` in `tools` and `allowedTools`), sync the
//! `mcp.json` servers into an agent spec's `mcpServers`, and add entries
//! to an `mcpServers` object.
//!
//! Only the values that change are rewritten: the members of an object are
//! located in the original text (their values are borrowed
//! [`RawValue`]s, so their byte ranges are known), a changed value replaces
//! its range, and a new member is inserted after the last one with the
//! indentation of its neighbours. Every other byte stays as it was. A file
//! is re-read, edited and written atomically under its edit lock
//! ([`crate::locked_edit`]), and only when it changed.

use std::ops::Range;
use std::path::{Path, PathBuf};

use cairn_guard::SensitivePaths;
use indexmap::IndexMap;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::{Discovery, SourceKind, names_server};
use crate::locked_edit::edit_locked;

/// Why an edit was refused; `code` is stable for the API.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub(crate) struct EditRefused {
    pub(crate) code: &'static str,
    pub(crate) message: String,
}

impl EditRefused {
    pub(crate) fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }
}

/// One member of a JSON object located in its text.
struct Member {
    key: String,
    /// The value's bytes in the whole text.
    value: Range<usize>,
}

/// The members of the object spanning `range` of `text`, in order.
fn members(text: &str, range: Range<usize>) -> Result<Vec<Member>, String> {
    let slice = &text[range.clone()];
    let parsed: IndexMap<String, &RawValue> = serde_json::from_str(slice).map_err(|error| error.to_string())?;
    let base = text.as_ptr() as usize;
    Ok(parsed
        .into_iter()
        .map(|(key, raw)| {
            let start = raw.get().as_ptr() as usize - base;
            Member { key, value: start..start + raw.get().len() }
        })
        .collect())
}

/// The whole document's object range (surrounding whitespace excluded).
fn document(text: &str) -> Result<Range<usize>, String> {
    let start = text.len() - text.trim_start().len();
    let end = text.trim_end().len();
    if start >= end || !text[start..].starts_with('{') {
        return Err("not a JSON object".to_owned());
    }
    Ok(start..end)
}

/// The indentation of the line holding byte `at`.
fn line_indent(text: &str, at: usize) -> &str {
    let line_start = text[..at].rfind('\n').map_or(0, |newline| newline + 1);
    let line = &text[line_start..];
    &line[..line.len() - line.trim_start_matches([' ', '\t']).len()]
}

/// `value` rendered for a slot whose line is indented by `indent`: on one
/// line when the original was on one line, pretty otherwise.
fn render(value: &Value, indent: &str, inline: bool) -> String {
    if inline {
        return match value {
            Value::Array(items) => {
                format!("[{}]", items.iter().map(Value::to_string).collect::<Vec<_>>().join(", "))
            }
            other => other.to_string(),
        };
    }
    let pretty = serde_json::to_string_pretty(value).expect("JSON values serialise");
    pretty.replace('\n', &format!("\n{indent}"))
}

/// A JSON object text being edited.
pub(crate) struct JsonText {
    pub(crate) text: String,
}

impl JsonText {
    pub(crate) fn parse(text: String) -> Result<Self, String> {
        let range = document(&text)?;
        members(&text, range)?;
        Ok(Self { text })
    }

    fn top(&self) -> Vec<Member> {
        members(&self.text, document(&self.text).expect("checked at parse")).expect("checked at parse")
    }

    /// The value of a top-level member.
    pub(crate) fn get(&self, key: &str) -> Option<Value> {
        let member = self.top().into_iter().find(|member| member.key == key)?;
        serde_json::from_str(&self.text[member.value]).ok()
    }

    /// Sets a top-level member (replaced in place, or added last).
    pub(crate) fn set(&mut self, key: &str, value: &Value) {
        let range = document(&self.text).expect("checked at parse");
        self.set_in(range, key, value);
    }

    fn set_in(&mut self, object: Range<usize>, key: &str, value: &Value) {
        let members = members(&self.text, object.clone()).expect("an object");
        if let Some(member) = members.iter().find(|member| member.key == key) {
            let indent = line_indent(&self.text, member.value.start).to_owned();
            let inline = !self.text[member.value.clone()].contains('\n');
            let rendered = render(value, &indent, inline);
            self.text.replace_range(member.value.clone(), &rendered);
            return;
        }
        self.insert_in(object, &members, key, value);
    }

    fn insert_in(&mut self, object: Range<usize>, members: &[Member], key: &str, value: &Value) {
        let key_text = Value::String(key.to_owned()).to_string();
        match members.last() {
            Some(last) => {
                let indent = line_indent(&self.text, last.value.start).to_owned();
                let same_line = !self.text[object.start..last.value.start].contains('\n');
                let (separator, indent) =
                    if same_line { (" ".to_owned(), String::new()) } else { (format!("\n{indent}"), indent) };
                let inline = !self.text[last.value.clone()].contains('\n') && !value.is_object();
                let rendered = render(value, &indent, inline);
                self.text.insert_str(last.value.end, &format!(",{separator}{key_text}: {rendered}"));
            }
            None => {
                let outer = line_indent(&self.text, object.start).to_owned();
                let inner = format!("{outer}  ");
                let rendered = render(value, &inner, false);
                self.text.replace_range(object, &format!("{{\n{inner}{key_text}: {rendered}\n{outer}}}"));
            }
        }
    }

    /// Adds `entries` to the object member `key` (created when absent);
    /// existing entries are never replaced. A `key` that is not an object
    /// is a conflict and nothing changes.
    pub(crate) fn add_to_object(&mut self, key: &str, entries: &[(String, Value)]) -> Result<Vec<String>, String> {
        let top = self.top();
        let Some(member) = top.iter().find(|member| member.key == key) else {
            let object: Map<String, Value> = entries.iter().cloned().collect();
            self.set(key, &Value::Object(object));
            return Ok(entries.iter().map(|(name, _)| name.clone()).collect());
        };
        let range = member.value.clone();
        if !self.text[range.clone()].starts_with('{') {
            return Err(format!("`{key}` is not an object"));
        }
        let mut added = Vec::new();
        for (name, value) in entries {
            let object = self.member_range(key).expect("present");
            let existing = members(&self.text, object.clone()).map_err(|error| format!("`{key}`: {error}"))?;
            if existing.iter().any(|member| member.key == *name) {
                continue;
            }
            self.insert_in(object, &existing, name, value);
            added.push(name.clone());
        }
        Ok(added)
    }

    fn member_range(&self, key: &str) -> Option<Range<usize>> {
        self.top().into_iter().find(|member| member.key == key).map(|member| member.value)
    }

    /// The object reached from the document by following `path`, one
    /// member name per step; `None` when a step is missing or not an object.
    fn object_at(&self, path: &[&str]) -> Option<Range<usize>> {
        let mut range = document(&self.text).ok()?;
        for key in path {
            let member = members(&self.text, range).ok()?.into_iter().find(|member| member.key == *key)?;
            if !self.text[member.value.clone()].starts_with('{') {
                return None;
            }
            range = member.value;
        }
        Some(range)
    }

    /// Removes member `key` of the object at `path` with its separator,
    /// keeping every other byte; whether it was there.
    pub(crate) fn remove_at(&mut self, path: &[&str], key: &str) -> bool {
        let Some(object) = self.object_at(path) else { return false };
        let Ok(members) = members(&self.text, object.clone()) else { return false };
        let Some(index) = members.iter().position(|member| member.key == key) else { return false };
        let skip_blank = |text: &str, from: usize| from + (text[from..].len() - text[from..].trim_start().len());
        let cut = if index > 0 {
            // `, "key": value` after the previous member.
            members[index - 1].value.end..members[index].value.end
        } else if let Some(next) = members.get(1) {
            // From this key up to the next one, past the comma.
            let start = skip_blank(&self.text, object.start + 1);
            let comma = skip_blank(&self.text, members[index].value.end);
            debug_assert_eq!(&self.text[comma..=comma], ",");
            let end = skip_blank(&self.text, comma + 1);
            debug_assert!(end < next.value.start);
            start..end
        } else {
            // The only member: the object becomes `{}`.
            object.start + 1..object.end - 1
        };
        self.text.replace_range(cut, "");
        true
    }
}

/// Reads a JSON object file for editing; `Ok(None)` when it does not exist.
pub(crate) fn read_json_file(reader: &SensitivePaths, path: &Path) -> Result<Option<JsonText>, EditRefused> {
    let text = match super::read_config_file(reader, path) {
        Ok(None) => return Ok(None),
        Ok(Some(text)) => text,
        Err(problem) => return Err(EditRefused::new("unreadable", format!("{}: {problem}", path.display()))),
    };
    JsonText::parse(text).map(Some).map_err(|problem| {
        EditRefused::new("malformed_file", format!("{} is malformed ({problem}); nothing was changed", path.display()))
    })
}

/// What an edit did to one file.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct EditOutcome {
    pub(crate) path: PathBuf,
    pub(crate) changed: bool,
    /// Enabling removed `disabled: true` from the server's entry in the
    /// spec's `mcpServers`.
    pub(crate) cleared_disabled: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) notices: Vec<String>,
}

/// A string list member as entries; absent reads as empty, anything but a
/// list of strings is refused.
fn string_list(spec: &JsonText, key: &str, path: &Path) -> Result<Option<Vec<String>>, EditRefused> {
    match spec.get(key) {
        None => Ok(None),
        Some(Value::Array(items)) => items
            .into_iter()
            .map(|item| match item {
                Value::String(text) => Ok(text),
                _ => Err(()),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
            .map_err(|()| {
                EditRefused::new(
                    "spec_unreadable",
                    format!("`{key}` in {} is not a list of strings; nothing was changed", path.display()),
                )
            }),
        Some(_) => Err(EditRefused::new(
            "spec_unreadable",
            format!("`{key}` in {} is not a list of strings; nothing was changed", path.display()),
        )),
    }
}

/// Refuses a spec path the guard classifies as sensitive (the locked
/// read below is a plain read).
fn check_readable(reader: &SensitivePaths, path: &Path) -> Result<(), EditRefused> {
    if reader.is_sensitive(path) {
        return Err(EditRefused::new("unreadable", format!("{}: the guard refuses this path", path.display())));
    }
    Ok(())
}

/// The spec text read under the lock, parsed.
fn locked_spec(path: &Path, current: Option<String>) -> Result<JsonText, EditRefused> {
    let text =
        current.ok_or_else(|| EditRefused::new("spec_missing", format!("{} no longer exists", path.display())))?;
    JsonText::parse(text).map_err(|problem| {
        EditRefused::new("malformed_file", format!("{} is malformed ({problem}); nothing was changed", path.display()))
    })
}

impl From<crate::locked_edit::LockedEditError> for EditRefused {
    fn from(error: crate::locked_edit::LockedEditError) -> Self {
        let code = match &error {
            crate::locked_edit::LockedEditError::Busy { .. } => "busy",
            error if error.is_write_side() => "write_failed",
            _ => "unreadable",
        };
        Self::new(code, format!("{:#}", anyhow::Error::from(error)))
    }
}

/// Enables (`true`) or disables server `name` for the selected agent:
/// `@name` added to (or every `@name`/`@name/...` removed from) `tools` and
/// `allowedTools`. Adding to `allowedTools` auto-approves the server's tools.
/// Enabling also removes `disabled: true` from the server's entry in the
/// spec's `mcpServers` (kiro-cli starts no server so marked; `mcp import`
/// writes it and `mcp sync` copies it). Disabling leaves that entry as it
/// is: without the grants the agent has none of its tools.
/// The spec is re-read and rewritten under its edit lock, so concurrent
/// edits of one spec are all kept.
pub(crate) fn toggle(discovery: &Discovery, name: &str, enable: bool) -> Result<EditOutcome, EditRefused> {
    let agent = discovery.agent.as_ref().ok_or_else(|| EditRefused::new("agent_required", "name the agent to edit"))?;
    if let Some((code, message)) = agent.read_only_reason() {
        return Err(EditRefused::new(code, message));
    }
    if discovery.find(name).is_none() {
        return Err(EditRefused::new("unknown_server", format!("no source defines an MCP server named {name:?}")));
    }
    let path = &agent.path;
    check_readable(&discovery.spec_reader, path)?;
    let reference = format!("@{name}");
    let mut edited = String::new();
    let mut cleared_disabled = false;
    let changed = edit_locked(path, |current| {
        let mut spec = locked_spec(path, current)?;
        let mut changed = false;
        for key in ["tools", "allowedTools"] {
            let entries = string_list(&spec, key, path)?;
            let before = entries.clone().unwrap_or_default();
            let after: Vec<String> = if enable {
                let mut after = before.clone();
                if !after.iter().any(|entry| entry.trim() == reference || entry.trim() == format!("{reference}/*")) {
                    after.push(reference.clone());
                }
                after
            } else {
                before.iter().filter(|entry| !names_server(entry, name)).cloned().collect()
            };
            if after != before {
                spec.set(key, &json!(after));
                changed = true;
            }
        }
        let marked_disabled = spec.get("mcpServers").is_some_and(|servers| {
            servers.get(name).and_then(|entry| entry.get("disabled")) == Some(&Value::Bool(true))
        });
        cleared_disabled = enable && marked_disabled && spec.remove_at(&["mcpServers", name], "disabled");
        changed |= cleared_disabled;
        edited.clone_from(&spec.text);
        Ok::<_, EditRefused>(changed.then_some(spec.text))
    })?;
    let mut notices = Vec::new();
    let reread = cairn_agent_spec::AgentSpec::from_json_str(&edited)
        .map_err(|error| EditRefused::new("spec_unreadable", error.to_string()))?;
    if !enable && reread.granted_tools().mounts_server(name) {
        notices.push(format!(
            "`tools` still mounts `{name}` through a wildcard (`*` or `@mcp`); list it in `excludedTools` to keep it out"
        ));
    }
    let in_spec = reread.mcp_servers().iter().any(|server| server.name == name);
    let includes_mcp_json = reread.include_mcp_json().unwrap_or(false);
    if enable && !in_spec && !includes_mcp_json {
        notices.push(format!(
            "`{name}` is not in this agent's `mcpServers`; run `cairn mcp sync` (or set `includeMcpJson`) so kiro-cli starts it"
        ));
    }
    if enable && !in_spec && includes_mcp_json {
        let included = discovery.definitions.iter().find(|definition| {
            definition.server.name == name
                && matches!(discovery.sources[definition.source].kind, SourceKind::KiroProject | SourceKind::KiroGlobal)
        });
        if let Some(definition) = included.filter(|definition| definition.server.disabled) {
            notices.push(format!(
                "`{name}` is `disabled: true` in {}, which this agent includes (`includeMcpJson`); kiro-cli will not start it until that flag is removed there (Cairn does not edit that file)",
                discovery.sources[definition.source].path.display()
            ));
        }
    }
    Ok(EditOutcome { path: path.clone(), changed, cleared_disabled, notices })
}

/// What a sync did.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SyncOutcome {
    pub(crate) path: PathBuf,
    pub(crate) added: Vec<String>,
    /// Names already in the spec (its definition wins).
    pub(crate) kept: Vec<String>,
    pub(crate) dry_run: bool,
}

/// Adds the servers of the `mcp.json` files to the selected agent's
/// `mcpServers`; a name the spec already defines keeps its definition, and
/// a server the agent already grants is copied without `disabled: true`.
/// The spec is re-read and rewritten under its edit lock.
pub(crate) fn sync(discovery: &Discovery, dry_run: bool) -> Result<SyncOutcome, EditRefused> {
    let agent = discovery.agent.as_ref().ok_or_else(|| EditRefused::new("agent_required", "name the agent to edit"))?;
    if let Some((code, message)) = agent.read_only_reason() {
        return Err(EditRefused::new(code, message));
    }
    let path = &agent.path;
    check_readable(&discovery.spec_reader, path)?;
    // The entries to add, and the names the spec already defines.
    type Plan = (Vec<(String, Value)>, Vec<String>);
    let plan = |spec: &JsonText| -> Result<Plan, EditRefused> {
        let own: Vec<String> = match spec.get("mcpServers") {
            None => Vec::new(),
            Some(Value::Object(map)) => map.keys().cloned().collect(),
            Some(_) => {
                return Err(EditRefused::new(
                    "conflict",
                    format!("`mcpServers` in {} is not an object; it was left as it is", path.display()),
                ));
            }
        };
        // Servers the agent already grants (`@name` in `tools`): enabled
        // before the sync, so an import's `disabled: true` is not copied
        // with them (kiro-cli would start none of them).
        let granted: Vec<String> = match spec.get("tools") {
            Some(Value::Array(tools)) => tools.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
            _ => Vec::new(),
        };
        let mut wanted: Vec<(String, Value)> = Vec::new();
        let mut kept = Vec::new();
        for definition in &discovery.definitions {
            let kind = discovery.sources[definition.source].kind;
            if kind == SourceKind::AgentSpec {
                continue;
            }
            let name = &definition.server.name;
            if own.contains(name) {
                if !kept.contains(name) {
                    kept.push(name.clone());
                }
                continue;
            }
            if wanted.iter().any(|(known, _)| known == name) {
                continue;
            }
            let mut entry = definition.raw.clone();
            if granted.iter().any(|tool| super::names_server(tool, name))
                && let Some(fields) = entry.as_object_mut()
            {
                fields.remove("disabled");
            }
            wanted.push((name.clone(), entry));
        }
        Ok((wanted, kept))
    };
    if dry_run {
        let spec = read_json_file(&discovery.spec_reader, path)?
            .ok_or_else(|| EditRefused::new("spec_missing", format!("{} no longer exists", path.display())))?;
        let (wanted, kept) = plan(&spec)?;
        let added = wanted.into_iter().map(|(name, _)| name).collect();
        return Ok(SyncOutcome { path: path.clone(), added, kept, dry_run });
    }
    let mut added = Vec::new();
    let mut kept = Vec::new();
    edit_locked(path, |current| {
        let mut spec = locked_spec(path, current)?;
        let (wanted, spec_kept) = plan(&spec)?;
        kept = spec_kept;
        added = spec.add_to_object("mcpServers", &wanted).map_err(|problem| EditRefused::new("conflict", problem))?;
        Ok::<_, EditRefused>((!added.is_empty()).then_some(spec.text))
    })?;
    Ok(SyncOutcome { path: path.clone(), added, kept, dry_run })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(before: &str, edit: impl FnOnce(&mut JsonText), after: &str) {
        let mut text = JsonText::parse(before.to_owned()).unwrap();
        edit(&mut text);
        assert_eq!(text.text, after);
        serde_json::from_str::<Value>(&text.text).unwrap();
    }

    #[test]
    fn replaced_values_keep_every_other_byte() {
        check(
            "{\n  \"name\": \"dev\",   \"tools\": [\"fs_read\"],\n  \"x\": {\"a\" :1}\n}\n",
            |text| text.set("tools", &json!(["fs_read", "@time"])),
            "{\n  \"name\": \"dev\",   \"tools\": [\"fs_read\", \"@time\"],\n  \"x\": {\"a\" :1}\n}\n",
        );
        check(
            "{\n    \"tools\": [\n        \"a\"\n    ]\n}",
            |text| text.set("tools", &json!(["a", "b"])),
            "{\n    \"tools\": [\n      \"a\",\n      \"b\"\n    ]\n}",
        );
    }

    #[test]
    fn new_members_follow_the_last_one() {
        check(
            "{\n  \"name\": \"dev\"\n}\n",
            |text| text.set("allowedTools", &json!(["@time"])),
            "{\n  \"name\": \"dev\",\n  \"allowedTools\": [\"@time\"]\n}\n",
        );
        check("{}", |text| text.set("tools", &json!(["@t"])), "{\n  \"tools\": [\n    \"@t\"\n  ]\n}");
        check("{\"a\": 1}", |text| text.set("b", &json!([])), "{\"a\": 1, \"b\": []}");
    }

    #[test]
    fn entries_are_added_to_an_object_member_without_replacing() {
        let mut text =
            JsonText::parse("{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\"}\n  }\n}\n".to_owned()).unwrap();
        let added = text
            .add_to_object("mcpServers", &[("a".into(), json!({"command": "y"})), ("b".into(), json!({"url": "u"}))])
            .unwrap();
        assert_eq!(added, ["b"]);
        assert_eq!(
            text.text,
            "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\"},\n    \"b\": {\n      \"url\": \"u\"\n    }\n  }\n}\n"
        );
        let mut bad = JsonText::parse("{\"mcpServers\": [1]}".to_owned()).unwrap();
        assert!(bad.add_to_object("mcpServers", &[("b".into(), json!({}))]).is_err());
        assert_eq!(bad.text, "{\"mcpServers\": [1]}");
    }

    #[test]
    fn removed_members_take_their_separator_with_them() {
        let servers = ["mcpServers", "fetch"];
        check(
            "{\"mcpServers\": {\"fetch\": {\"command\": \"x\", \"disabled\": true}}}",
            |text| assert!(text.remove_at(&servers, "disabled")),
            "{\"mcpServers\": {\"fetch\": {\"command\": \"x\"}}}",
        );
        check(
            "{\n  \"mcpServers\": {\n    \"fetch\": {\n      \"disabled\": true,\n      \"command\": \"x\"\n    }\n  }\n}\n",
            |text| assert!(text.remove_at(&servers, "disabled")),
            "{\n  \"mcpServers\": {\n    \"fetch\": {\n      \"command\": \"x\"\n    }\n  }\n}\n",
        );
        check(
            "{\"mcpServers\": {\"fetch\": { \"disabled\" : true }}, \"a\": 1}",
            |text| assert!(text.remove_at(&servers, "disabled")),
            "{\"mcpServers\": {\"fetch\": {}}, \"a\": 1}",
        );
        let unchanged = "{\"mcpServers\": {\"fetch\": [1], \"other\": {\"disabled\": true}}}";
        let mut text = JsonText::parse(unchanged.to_owned()).unwrap();
        assert!(!text.remove_at(&servers, "disabled"), "not an object");
        assert!(!text.remove_at(&["mcpServers", "other"], "missing"));
        assert!(!text.remove_at(&["nowhere", "other"], "disabled"));
        assert_eq!(text.text, unchanged);
    }

    #[test]
    fn malformed_documents_are_refused() {
        for bad in ["", "[1]", "{", "{\"a\": }", "null"] {
            assert!(JsonText::parse(bad.to_owned()).is_err(), "{bad:?}");
        }
    }
}
