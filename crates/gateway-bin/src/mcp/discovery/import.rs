//! Importing MCP servers from other agents' configs into `<home>/mcp.json`.
//!
//! Origins and the files read (each overridable with `--file`):
//!
//! - Claude Code: `~/.claude.json` (`mcpServers`, user scope, and
//!   `projects.<path>.mcpServers`, local scope) and a project's `.mcp.json`;
//! - Hermes: `~/.hermes/config.yaml` (`mcp_servers`);
//! - OpenClaw: `~/.openclaw/openclaw.json` (`mcp.servers`; strict JSON only).
//!
//! A server is importable only when it is exactly one supported transport:
//! a stdio `command` with an optional list of string `args`, or an
//! `http(s)` `url` with no arguments. Anything else rejects the whole
//! server with the reason (never a narrowed copy): both or neither of
//! `command` and `url`, `args` beside a `url`, an environment, headers, a
//! working directory, a tool filter, an agent or scope, a credential,
//! token or cookie field, any other key, a URL with a query, fragment or
//! userinfo, or a credential inside the command line or URL. `enabled` and
//! `disabled` are runtime state and ignored. Reasons name keys, never
//! values.
//!
//! Names are canonicalised (lowercase, runs of other characters become
//! `-`) and checked against the canonical names of every effective source
//! and Cairn's own `cairn` entry, so an import never shadows a server.
//! Accepted servers are written with `disabled: true` for review; the
//! destination is merged, never overwritten, and a malformed destination
//! is a conflict left byte for byte. `<home>/mcp-import-ledger.json`
//! records every import so a repeated import changes nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::edit::JsonText;
use super::{CAIRN_SERVER_NAME, Discovery, Locations, read_config_file};
use crate::locked_edit::edit_locked;

/// The provenance ledger inside the home.
pub(crate) const LEDGER_FILE_NAME: &str = "mcp-import-ledger.json";
/// Longest canonical server name.
const MAX_NAME_CHARS: usize = 64;

/// Which agent's config to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Origin {
    /// Claude Code (`~/.claude.json`, a project's `.mcp.json`).
    ClaudeCode,
    /// Hermes Agent (`~/.hermes/config.yaml`).
    Hermes,
    /// OpenClaw (`~/.openclaw/openclaw.json`).
    Openclaw,
}

impl Origin {
    pub(crate) const ALL: [Self; 3] = [Self::ClaudeCode, Self::Hermes, Self::Openclaw];
}

/// What to import.
#[derive(Debug, Clone)]
pub(crate) struct ImportRequest {
    pub(crate) origins: Vec<Origin>,
    /// Read this file instead of the origin's default (one origin only).
    pub(crate) file: Option<PathBuf>,
    /// Only these source names.
    pub(crate) only: Vec<String>,
    pub(crate) dry_run: bool,
}

/// The decision on one foreign server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Decision {
    /// Dry run: it would be imported.
    WouldImport,
    /// Written to the destination, disabled.
    Imported,
    /// Refused by a rule (see the reason).
    Rejected,
    /// Its canonical name is taken by an existing server (or Cairn's own).
    Collision,
    /// Imported before (the ledger has it).
    AlreadyImported,
    /// Another server of this run has the same canonical name.
    Duplicate,
    /// The destination is malformed; nothing was written.
    Conflict,
}

/// One row of the import report.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Row {
    pub(crate) origin: Origin,
    pub(crate) file: PathBuf,
    pub(crate) scope: String,
    pub(crate) name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) imported_as: Option<String>,
    pub(crate) decision: Decision,
    pub(crate) reason: String,
}

/// A file that was read (or could not be).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SourceFile {
    pub(crate) origin: Origin,
    pub(crate) path: PathBuf,
    pub(crate) exists: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) problem: Option<String>,
}

/// What an import did (or would do).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ImportReport {
    pub(crate) dry_run: bool,
    pub(crate) destination: PathBuf,
    pub(crate) files: Vec<SourceFile>,
    pub(crate) decisions: Vec<Row>,
    pub(crate) written: bool,
}

impl ImportReport {
    /// The report as it is shown (text, `--json`, the API): the names,
    /// scopes and reasons a foreign config controls pass through
    /// [`super::shown`] (control characters escaped, credentials redacted).
    pub(crate) fn shown(mut self) -> Self {
        for row in &mut self.decisions {
            row.name = super::shown(&row.name);
            row.scope = super::shown(&row.scope);
            row.reason = super::shown(&row.reason);
            row.imported_as = row.imported_as.as_deref().map(super::shown);
        }
        for file in &mut self.files {
            file.problem = file.problem.as_deref().map(super::shown);
        }
        self
    }
}

/// An import that cannot run at all.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ImportError {
    #[error("--file reads one origin's format; name exactly one with --from")]
    FileNeedsOneOrigin,
    #[error("the import ledger {path} is unreadable ({problem}); fix or move it, nothing was imported")]
    Ledger { path: PathBuf, problem: String },
    #[error("writing {path}: {message}")]
    Write { path: PathBuf, message: String },
    #[error("--file {path}: no such file")]
    FileMissing { path: PathBuf },
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Ledger {
    version: u32,
    imports: Vec<LedgerEntry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct LedgerEntry {
    origin: Origin,
    file: PathBuf,
    scope: String,
    name: String,
    imported_as: String,
    /// The accepted definition (command and arguments, or URL).
    definition: Value,
    imported_at: String,
}

/// A server found in a foreign config.
struct Candidate {
    origin: Origin,
    file: PathBuf,
    scope: String,
    name: String,
    entry: Value,
}

/// `name` lowercased, with runs of other characters turned into `-`.
pub(crate) fn canonical_name(name: &str) -> String {
    let mut out = String::new();
    for ch in name.trim().chars().flat_map(char::to_lowercase) {
        if ch.is_ascii_lowercase() || ch.is_ascii_digit() {
            out.push(ch);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_owned()
}

/// Why a key rejects the whole server.
fn key_reason(key: &str) -> String {
    let folded: String = key.chars().filter(char::is_ascii_alphanumeric).collect::<String>().to_ascii_lowercase();
    let reason = match folded.as_str() {
        "env" | "environment" | "envfile" | "envvars" => "sets environment variables",
        "headers" | "header" | "httpheaders" => "sends request headers",
        "cwd" | "workingdirectory" | "workdir" | "dir" | "directory" => "sets a working directory",
        "tools" | "includetools" | "excludetools" | "disabledtools" | "enabledtools" | "allowedtools"
        | "autoapprove" | "include" | "exclude" | "toolfilter" | "filter" | "alwaysallow" => "filters tools",
        "agent" | "agents" | "scope" | "scopes" | "profile" | "profiles" => "is scoped to agents",
        _ if [
            "token",
            "secret",
            "password",
            "passwd",
            "credential",
            "cookie",
            "auth",
            "apikey",
            "bearer",
            "oauth",
            "session",
        ]
        .iter()
        .any(|word| folded.contains(word)) =>
        {
            "carries a credential, token or cookie field"
        }
        _ => "has a key Cairn does not import",
    };
    format!("{reason} (`{key}`)")
}

fn carries_credential(text: &str) -> bool {
    !cairn_guard::find_credentials(text).is_empty() || cairn_guard::redact_all(text) != text
}

/// The destination definition of a foreign entry, or why it is refused.
fn accept(origin: Origin, entry: &Value) -> Result<Value, String> {
    let Value::Object(fields) = entry else { return Err("the entry is not an object".to_owned()) };
    for key in fields.keys() {
        let known = matches!(key.as_str(), "command" | "args" | "url" | "type" | "enabled" | "disabled")
            || (origin == Origin::Openclaw && key == "transport");
        if !known {
            return Err(key_reason(key));
        }
    }
    let declared = fields.get("type").or_else(|| fields.get("transport"));
    let declared = match declared {
        None => None,
        Some(Value::String(text)) => Some(text.trim().to_ascii_lowercase()),
        Some(_) => return Err("`type` is not a string".to_owned()),
    };
    match (fields.get("command"), fields.get("url")) {
        (Some(_), Some(_)) => Err("mixed transports: both `command` and `url`".to_owned()),
        (None, None) => Err("no supported transport: neither `command` nor `url`".to_owned()),
        (Some(command), None) => {
            let Some(command) = command.as_str().map(str::trim).filter(|command| !command.is_empty()) else {
                return Err("`command` is not a non-empty string".to_owned());
            };
            if let Some(declared) = declared.filter(|declared| declared != "stdio") {
                return Err(format!("declares transport `{declared}` for a `command`"));
            }
            let args = match fields.get("args") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|item| item.as_str().map(str::to_owned))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| "`args` is not a list of strings".to_owned())?,
                Some(_) => return Err("`args` is not a list of strings".to_owned()),
            };
            if carries_credential(command) || args.iter().any(|arg| carries_credential(arg)) {
                return Err("the command line carries a credential".to_owned());
            }
            let mut out = Map::new();
            out.insert("command".to_owned(), json!(command));
            if !args.is_empty() {
                out.insert("args".to_owned(), json!(args));
            }
            Ok(Value::Object(out))
        }
        (None, Some(url)) => {
            if fields.contains_key("args") {
                return Err("remote arguments: `args` beside a `url`".to_owned());
            }
            let Some(url) = url.as_str().map(str::trim) else { return Err("`url` is not a string".to_owned()) };
            check_url(url)?;
            if let Some(declared) = declared
                && !matches!(declared.as_str(), "http" | "streamable-http" | "streamablehttp" | "streamable_http")
            {
                return Err(format!("uses the `{declared}` transport; only stdio and streamable HTTP are imported"));
            }
            Ok(json!({"url": url}))
        }
    }
}

fn check_url(url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or_else(|| "the URL is not http:// or https://".to_owned())?;
    if url.contains('?') || url.contains('#') {
        return Err("the URL has a query or fragment".to_owned());
    }
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.contains('@') {
        return Err("the URL carries user credentials".to_owned());
    }
    if authority.is_empty() || authority.chars().any(char::is_whitespace) {
        return Err("the URL has no host".to_owned());
    }
    if carries_credential(url) {
        return Err("the URL carries a credential".to_owned());
    }
    Ok(())
}

fn default_files(origin: Origin, locations: &Locations) -> Vec<PathBuf> {
    let user = locations.user_home.clone();
    match origin {
        Origin::ClaudeCode => {
            let mut files: Vec<PathBuf> = user.iter().map(|home| home.join(".claude.json")).collect();
            if let Some(project) = &locations.catalog_dirs.project {
                files.push(project.join(".mcp.json"));
            }
            files
        }
        Origin::Hermes => user.iter().map(|home| home.join(".hermes/config.yaml")).collect(),
        Origin::Openclaw => user.iter().map(|home| home.join(".openclaw/openclaw.json")).collect(),
    }
}

fn entries_of(value: Option<&Value>) -> Vec<(String, Value)> {
    match value {
        Some(Value::Object(map)) => map.iter().map(|(name, entry)| (name.clone(), entry.clone())).collect(),
        _ => Vec::new(),
    }
}

/// The candidates of one file, or why it could not be read.
fn read_candidates(origin: Origin, path: &Path, locations: &Locations) -> (SourceFile, Vec<Candidate>) {
    let mut file = SourceFile { origin, path: path.to_owned(), exists: false, problem: None };
    let text = match read_config_file(&locations.sensitive, path) {
        Ok(None) => return (file, Vec::new()),
        Ok(Some(text)) => text,
        Err(problem) => {
            file.exists = path.exists();
            file.problem = Some(problem);
            return (file, Vec::new());
        }
    };
    file.exists = true;
    let is_yaml = path.extension().is_some_and(|extension| extension == "yaml" || extension == "yml");
    let parsed: Result<Value, String> = if is_yaml {
        serde_norway::from_str(&text).map_err(|error| format!("not valid YAML ({error})"))
    } else {
        serde_json::from_str(&text).map_err(|error| format!("not valid JSON ({error})"))
    };
    let value = match parsed {
        Ok(value @ Value::Object(_)) => value,
        Ok(_) => {
            file.problem = Some("not an object; nothing is read from it".to_owned());
            return (file, Vec::new());
        }
        Err(problem) => {
            file.problem = Some(format!("{problem}; nothing is read from it"));
            return (file, Vec::new());
        }
    };
    let mut found: Vec<(String, Vec<(String, Value)>)> = Vec::new();
    let shape_problem = |key: &str, value: Option<&Value>| {
        if value.is_some_and(|value| !value.is_object() && !value.is_null()) {
            Some(format!("`{key}` is not an object; nothing is read from it"))
        } else {
            None
        }
    };
    let mut problems = Vec::new();
    match origin {
        Origin::ClaudeCode => {
            let scope = if path.file_name().is_some_and(|name| name == ".mcp.json") { "project" } else { "user" };
            problems.extend(shape_problem("mcpServers", value.get("mcpServers")));
            found.push((scope.to_owned(), entries_of(value.get("mcpServers"))));
            if let Some(Value::Object(projects)) = value.get("projects") {
                for (project, settings) in projects {
                    problems
                        .extend(shape_problem(&format!("projects.{project}.mcpServers"), settings.get("mcpServers")));
                    found.push((format!("local {project}"), entries_of(settings.get("mcpServers"))));
                }
            }
        }
        Origin::Hermes => {
            problems.extend(shape_problem("mcp_servers", value.get("mcp_servers")));
            found.push(("user".to_owned(), entries_of(value.get("mcp_servers"))));
        }
        Origin::Openclaw => {
            let servers = value.get("mcp").and_then(|mcp| mcp.get("servers"));
            problems.extend(shape_problem("mcp.servers", servers));
            found.push(("user".to_owned(), entries_of(servers)));
        }
    }
    if !problems.is_empty() {
        file.problem = Some(problems.join("; "));
    }
    let candidates = found
        .into_iter()
        .flat_map(|(scope, entries)| entries.into_iter().map(move |(name, entry)| (scope.clone(), name, entry)))
        .map(|(scope, name, entry)| Candidate { origin, file: path.to_owned(), scope, name, entry })
        .collect();
    (file, candidates)
}

fn ledger_path(locations: &Locations) -> PathBuf {
    locations.cairn_home.join(LEDGER_FILE_NAME)
}

fn read_ledger(locations: &Locations) -> Result<Ledger, ImportError> {
    let path = ledger_path(locations);
    let failed = |problem: String| ImportError::Ledger { path: path.clone(), problem };
    match read_config_file(&locations.own_file_reader, &path).map_err(&failed)? {
        None => Ok(Ledger { version: 1, imports: Vec::new() }),
        Some(text) => serde_json::from_str(&text).map_err(|error| failed(error.to_string())),
    }
}

/// What the decisions of one import are, and the text to write.
struct Plan {
    rows: Vec<Row>,
    /// The destination's new text, when something is imported.
    text: Option<String>,
    /// Ledger entries of what is imported.
    entries: Vec<LedgerEntry>,
}

/// Runs an import (or a dry run). The destination is read, decided on and
/// written under its edit lock, and the ledger is merged under its own,
/// so concurrent imports keep every server and every ledger entry.
pub(crate) fn run_import(locations: &Locations, request: &ImportRequest) -> Result<ImportReport, ImportError> {
    if request.file.is_some() && request.origins.len() != 1 {
        return Err(ImportError::FileNeedsOneOrigin);
    }
    let destination = locations.home_mcp_file();
    let mut files = Vec::new();
    let mut candidates = Vec::new();
    for origin in &request.origins {
        let paths = match &request.file {
            Some(file) => vec![file.clone()],
            None => default_files(*origin, locations),
        };
        for path in paths {
            let (file, found) = read_candidates(*origin, &path, locations);
            if request.file.is_some() && !file.exists && file.problem.is_none() {
                return Err(ImportError::FileMissing { path });
            }
            files.push(file);
            candidates.extend(found);
        }
    }
    if !request.only.is_empty() {
        candidates.retain(|candidate| request.only.contains(&candidate.name));
    }
    // Every effective source reserves its names; malformed sources add none.
    let discovery = Discovery::load(locations, None)
        .map_err(|error| ImportError::Ledger { path: locations.cairn_home.clone(), problem: format!("{error:#}") })?;
    let mut reserved: BTreeMap<String, String> = BTreeMap::new();
    reserved.insert(CAIRN_SERVER_NAME.to_owned(), "Cairn's own server".to_owned());
    for definition in &discovery.definitions {
        let source = &discovery.sources[definition.source];
        reserved
            .entry(canonical_name(&definition.server.name))
            .or_insert_with(|| format!("`{}` in {}", definition.server.name, source.path.display()));
    }
    if request.dry_run || candidates.is_empty() {
        let current = read_config_file(&locations.own_file_reader, &destination);
        let ledger = read_ledger(locations)?;
        let plan = decide(request, &candidates, reserved, &ledger, &destination, current);
        return Ok(ImportReport { dry_run: request.dry_run, destination, files, decisions: plan.rows, written: false });
    }
    if locations.own_file_reader.is_sensitive(&destination) {
        return Err(ImportError::Write {
            path: destination.clone(),
            message: "the guard refuses this path".to_owned(),
        });
    }
    let mut planned = None;
    let written = edit_locked(&destination, |current| {
        let ledger = read_ledger(locations)?;
        let plan = decide(request, &candidates, reserved, &ledger, &destination, Ok(current));
        let text = plan.text.clone();
        planned = Some(plan);
        Ok::<_, ImportError>(text)
    })?;
    let plan = planned.expect("the edit ran");
    if !plan.entries.is_empty() {
        let path = ledger_path(locations);
        edit_locked(&path, |current| {
            let mut ledger = match current {
                None => Ledger { version: 1, imports: Vec::new() },
                Some(text) => serde_json::from_str(&text)
                    .map_err(|error| ImportError::Ledger { path: path.clone(), problem: error.to_string() })?,
            };
            ledger.version = 1;
            ledger.imports.extend(plan.entries.iter().cloned());
            let mut text = serde_json::to_string_pretty(&ledger).expect("the ledger serialises");
            text.push('\n');
            Ok::<_, ImportError>(Some(text))
        })?;
    }
    Ok(ImportReport { dry_run: false, destination, files, decisions: plan.rows, written })
}

impl From<crate::locked_edit::LockedEditError> for ImportError {
    fn from(error: crate::locked_edit::LockedEditError) -> Self {
        let path = error.path().to_owned();
        ImportError::Write { path, message: format!("{:#}", anyhow::Error::from(error)) }
    }
}

/// The decision on every candidate against the destination's current
/// text (or why it is unreadable) and the ledger.
fn decide(
    request: &ImportRequest,
    candidates: &[Candidate],
    mut reserved: BTreeMap<String, String>,
    ledger: &Ledger,
    destination: &Path,
    current: Result<Option<String>, String>,
) -> Plan {
    let destination_text = current.and_then(|text| text.map(parse_destination).transpose());
    if let Ok(Some(text)) = &destination_text {
        reserve_own_names(&mut reserved, text, destination);
    }
    let mut rows = Vec::new();
    let mut accepted: Vec<(String, Value, usize)> = Vec::new();
    for candidate in candidates {
        let mut row = Row::rejected(candidate);
        let canonical = canonical_name(&candidate.name);
        let definition = match accept(candidate.origin, &candidate.entry) {
            Ok(definition) => definition,
            Err(reason) => {
                row.reason = reason;
                rows.push(row);
                continue;
            }
        };
        if let Some(previous) = ledger.imports.iter().find(|entry| {
            entry.origin == candidate.origin
                && entry.file == candidate.file
                && entry.scope == candidate.scope
                && entry.name == candidate.name
                && entry.definition == definition
        }) {
            row.decision = Decision::AlreadyImported;
            row.imported_as = Some(previous.imported_as.clone());
            row.reason = format!("imported as `{}` at {}", previous.imported_as, previous.imported_at);
            rows.push(row);
            continue;
        }
        if canonical.is_empty() || canonical.chars().count() > MAX_NAME_CHARS {
            row.reason =
                format!("the name does not make a server name of 1 to {MAX_NAME_CHARS} letters, digits and dashes");
            rows.push(row);
            continue;
        }
        row.imported_as = Some(canonical.clone());
        if let Some(owner) = reserved.get(&canonical) {
            row.decision = Decision::Collision;
            row.reason = format!("`{canonical}` is taken by {owner}; existing servers win");
            rows.push(row);
            continue;
        }
        if let Some((_, _, first)) = accepted.iter().find(|(name, _, _)| *name == canonical) {
            let first = &rows[*first];
            row.decision = Decision::Duplicate;
            row.reason = format!(
                "`{}` from {} ({}) has the same name in this import",
                first.name,
                first.file.display(),
                first.scope
            );
            rows.push(row);
            continue;
        }
        match &destination_text {
            Err(problem) => {
                row.decision = Decision::Conflict;
                row.reason =
                    format!("the destination {} is malformed ({problem}); it is left as it is", destination.display());
            }
            Ok(_) => {
                row.decision = if request.dry_run { Decision::WouldImport } else { Decision::Imported };
                row.reason = "a single supported transport; written with `disabled: true` for review".to_owned();
                accepted.push((canonical, definition, rows.len()));
            }
        }
        rows.push(row);
    }
    if request.dry_run || accepted.is_empty() {
        return Plan { rows, text: None, entries: Vec::new() };
    }
    let Ok(existing) = destination_text else { unreachable!("a malformed destination accepts nothing") };
    let mut text = existing.unwrap_or_else(|| JsonText::parse("{}\n".to_owned()).expect("an empty object"));
    let additions: Vec<(String, Value)> = accepted
        .iter()
        .map(|(name, definition, _)| {
            let mut entry = definition.clone();
            entry["disabled"] = json!(true);
            (name.clone(), entry)
        })
        .collect();
    if let Err(problem) = text.add_to_object("mcpServers", &additions) {
        for (_, _, index) in &accepted {
            rows[*index].decision = Decision::Conflict;
            rows[*index].reason = format!("the destination {} cannot take it ({problem})", destination.display());
        }
        return Plan { rows, text: None, entries: Vec::new() };
    }
    let entries = ledger_entries(&accepted, &rows);
    Plan { rows, text: Some(text.text), entries }
}

impl Row {
    /// The row of `candidate` before any decision: rejected, with no reason yet.
    fn rejected(candidate: &Candidate) -> Self {
        Row {
            origin: candidate.origin,
            file: candidate.file.clone(),
            scope: candidate.scope.clone(),
            name: candidate.name.clone(),
            imported_as: None,
            decision: Decision::Rejected,
            reason: String::new(),
        }
    }
}

/// Names taken by the destination's own entries, even malformed ones.
fn reserve_own_names(reserved: &mut BTreeMap<String, String>, text: &JsonText, destination: &Path) {
    if let Some(Value::Object(map)) = text.get("mcpServers") {
        for name in map.keys() {
            reserved.entry(canonical_name(name)).or_insert_with(|| format!("`{name}` in {}", destination.display()));
        }
    }
}

/// The destination's text, when its `mcpServers` (if any) is an object.
fn parse_destination(text: String) -> Result<JsonText, String> {
    let parsed = JsonText::parse(text)?;
    match parsed.get("mcpServers") {
        None | Some(Value::Object(_)) => Ok(parsed),
        Some(_) => Err("its `mcpServers` is not an object".to_owned()),
    }
}

/// The ledger's record of the servers written: where each came from, its
/// name here, its definition, now.
fn ledger_entries(accepted: &[(String, Value, usize)], rows: &[Row]) -> Vec<LedgerEntry> {
    let now = jiff::Timestamp::now().to_string();
    accepted
        .iter()
        .map(|(name, definition, index)| {
            let row = &rows[*index];
            LedgerEntry {
                origin: row.origin,
                file: row.file.clone(),
                scope: row.scope.clone(),
                name: row.name.clone(),
                imported_as: name.clone(),
                definition: definition.clone(),
                imported_at: now.clone(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_canonicalised() {
        assert_eq!(canonical_name("My_Server.v2"), "my-server-v2");
        assert_eq!(canonical_name("  --Time--  "), "time");
        assert_eq!(canonical_name("Cairn"), "cairn");
        assert_eq!(canonical_name("__"), "");
    }

    /// Each rule with a rejected case: (origin, entry, expected reason part).
    #[test]
    fn every_rule_rejects_the_whole_server() {
        let cases: &[(Origin, Value, &str)] = &[
            (Origin::ClaudeCode, json!("npx"), "not an object"),
            (Origin::ClaudeCode, json!({"command": "a", "url": "https://x.example/mcp"}), "mixed transports"),
            (Origin::ClaudeCode, json!({"type": "stdio"}), "neither"),
            (Origin::ClaudeCode, json!({"url": "https://x.example/mcp", "args": ["a"]}), "remote arguments"),
            (Origin::ClaudeCode, json!({"command": "a", "env": {"K": "v"}}), "environment"),
            (Origin::ClaudeCode, json!({"url": "https://x.example/mcp", "headers": {"A": "b"}}), "headers"),
            (Origin::ClaudeCode, json!({"command": "a", "cwd": "/tmp"}), "working directory"),
            (Origin::Hermes, json!({"command": "a", "tools": {"include": ["x"]}}), "filters tools"),
            (Origin::ClaudeCode, json!({"command": "a", "agent": "dev"}), "scoped to agents"),
            (Origin::ClaudeCode, json!({"command": "a", "apiKey": "x"}), "credential"),
            (Origin::ClaudeCode, json!({"url": "https://x.example/mcp", "bearer_token": "x"}), "credential"),
            (Origin::ClaudeCode, json!({"url": "https://x.example/mcp", "cookie": "x"}), "credential"),
            (Origin::Hermes, json!({"command": "a", "timeout": 120}), "does not import"),
            (Origin::ClaudeCode, json!({"url": "https://x.example/mcp?mode=a"}), "query or fragment"),
            (Origin::ClaudeCode, json!({"url": "https://x.example/mcp#a"}), "query or fragment"),
            (Origin::ClaudeCode, json!({"url": "https://u:p@x.example/mcp"}), "user credentials"),
            (Origin::ClaudeCode, json!({"url": "ftp://x.example/mcp"}), "not http"),
            (Origin::ClaudeCode, json!({"type": "sse", "url": "https://x.example/sse"}), "`sse` transport"),
            (Origin::ClaudeCode, json!({"command": "a", "args": "b"}), "not a list of strings"),
            (Origin::ClaudeCode, json!({"command": "a", "args": [1]}), "not a list of strings"),
            (Origin::ClaudeCode, json!({"command": ""}), "non-empty string"),
            (
                Origin::ClaudeCode,
                json!({"command": "a", "args": ["--key", "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH"]}),
                "carries a credential",
            ),
            (Origin::Openclaw, json!({"command": "a", "transport": "sse"}), "declares transport"),
        ];
        for (origin, entry, expected) in cases {
            let reason = accept(*origin, entry).expect_err(&entry.to_string());
            assert!(reason.contains(expected), "{entry}: {reason:?} does not say {expected:?}");
            assert!(!reason.contains("sk-ant") && !reason.contains("\"v\""), "a reason shows a value: {reason}");
        }
    }

    #[test]
    fn exact_definitions_are_accepted_and_runtime_state_ignored() {
        assert_eq!(
            accept(Origin::ClaudeCode, &json!({"type": "stdio", "command": "uvx", "args": ["mcp-server-time"]}))
                .unwrap(),
            json!({"command": "uvx", "args": ["mcp-server-time"]})
        );
        assert_eq!(
            accept(Origin::Hermes, &json!({"url": "https://mcp.example.com/mcp", "enabled": false})).unwrap(),
            json!({"url": "https://mcp.example.com/mcp"})
        );
        assert_eq!(
            accept(Origin::Openclaw, &json!({"command": "x", "transport": "stdio", "disabled": true})).unwrap(),
            json!({"command": "x"})
        );
    }
}
