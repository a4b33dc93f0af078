//! `cairn agent`: list, show, pin and check agent spec files; project and
//! export what one becomes on a backend.
//!
//! Pins live in `<home>/config.json` under `agent.spec_pins` (agent name →
//! bare file name); every other key of that file is kept as it is.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use cairn_agent_spec::projection::{AgentBackend, AgentProjection, Disposition, ProjectionInput, ProjectionOptions};
use cairn_agent_spec::{AgentSpec, Pins};

use cairn_agent_spec::{
    AgentCatalog, ResolveContext, ResolvedSpec, check_file, resolve_prompt, skill_globs, steering_files, validate_pin,
};
use clap::{Args, Subcommand};
use serde_json::{Map, Value, json};

use crate::home::Home;
use crate::settings;

/// Agent spec files: which file a name means, what it grants, and why a
/// spec would be rejected.
#[derive(Debug, Subcommand)]
pub(crate) enum AgentCommand {
    /// List every agent name and the file it resolves to.
    List(ListArgs),
    /// Show the resolved view of one agent: prompt, skills, steering, tools.
    Show(ShowArgs),
    /// Pin a name to one of the files declaring it.
    Pin(PinArgs),
    /// Check spec files; prints one JSON object per file.
    Check(CheckArgs),
    /// What one agent becomes on a backend: every concern's disposition,
    /// the projected servers, deny set and settings, and the notices.
    Project(ProjectArgs),
    /// Write a harness's own files from an agent's projection, merged into
    /// what is there (an existing entry is never replaced).
    Export(ExportArgs),
}

#[derive(Debug, Args)]
pub(crate) struct ProjectArgs {
    /// The agent name.
    name: String,
    /// kiro-cli, kas, claude, codex, opencode, mimocode, goose, strands, pi or deepseek.
    #[arg(long, value_name = "BACKEND")]
    backend: String,
    #[command(flatten)]
    dirs: Dirs,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// The harnesses `cairn agent export` writes files for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ExportTarget {
    /// `.mcp.json` and `.claude/settings.local.json` in the directory.
    ClaudeCode,
    /// `.kiro/kas-custom-agents.json` (the `customAgents` batch) in the directory.
    Kas,
}

#[derive(Debug, Args)]
pub(crate) struct ExportArgs {
    /// The agent name.
    name: String,
    /// Which harness's files to write.
    #[arg(long, value_enum)]
    to: ExportTarget,
    /// Where to write them (default: the project checkout, else the current directory).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    #[command(flatten)]
    dirs: Dirs,
    /// Print what would change as a unified diff and write nothing.
    #[arg(long)]
    dry_run: bool,
}

#[derive(Debug, Args)]
pub(crate) struct Dirs {
    /// The user agents directory (default `~/.kiro/agents`).
    #[arg(long, value_name = "DIR")]
    agents_dir: Option<PathBuf>,
    /// A project checkout whose `.kiro/agents` is searched first.
    #[arg(long, value_name = "DIR")]
    project: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct ListArgs {
    #[command(flatten)]
    dirs: Dirs,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ShowArgs {
    /// The agent name.
    name: String,
    #[command(flatten)]
    dirs: Dirs,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct PinArgs {
    /// The agent name.
    name: String,
    /// The bare file name (e.g. `reviewer.json`) every reader must use.
    file: String,
    #[command(flatten)]
    dirs: Dirs,
}

#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    /// Spec files to check.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

pub(crate) fn run(home: &Home, command: &AgentCommand) -> anyhow::Result<ExitCode> {
    match command {
        AgentCommand::List(args) => list(home, args),
        AgentCommand::Show(args) => show(home, args),
        AgentCommand::Pin(args) => pin(home, args),
        AgentCommand::Check(args) => check(home, args),
        AgentCommand::Project(args) => project(home, args),
        AgentCommand::Export(args) => export(home, args),
    }
}

fn catalog(home: &Home, dirs: &Dirs) -> anyhow::Result<AgentCatalog> {
    home.agents(dirs.agents_dir.as_deref(), dirs.project.as_deref())
}

fn list(home: &Home, args: &ListArgs) -> anyhow::Result<ExitCode> {
    let catalog = catalog(home, &args.dirs)?;
    let entries = catalog.list(&home.pins()?);
    let unreadable: Vec<Value> =
        catalog.unreadable().map(|(path, error)| json!({ "file": path, "error": error.to_string() })).collect();
    let mut out = io::stdout().lock();
    if args.json {
        let report = json!({ "agents": entries, "unreadable": unreadable, "notes": catalog.notes() });
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    for entry in &entries {
        match (&entry.path, &entry.error) {
            (Some(path), _) => {
                let scope = entry.scope.map_or("", |scope| match scope {
                    cairn_agent_spec::Scope::User => "user",
                    cairn_agent_spec::Scope::Project => "project",
                });
                writeln!(out, "{}\t{scope}\t{}", entry.name, path.display())?;
            }
            (None, Some(error)) => writeln!(out, "{}\terror\t{error}", entry.name)?,
            (None, None) => {}
        }
        for warning in &entry.warnings {
            writeln!(out, "  warning: {warning}")?;
        }
    }
    for note in catalog.notes() {
        writeln!(out, "note: {note}")?;
    }
    for item in &unreadable {
        writeln!(out, "unreadable: {}", item["error"].as_str().unwrap_or_default())?;
    }
    Ok(ExitCode::SUCCESS)
}

fn show(home: &Home, args: &ShowArgs) -> anyhow::Result<ExitCode> {
    let catalog = catalog(home, &args.dirs)?;
    let resolved = match catalog.resolve(&args.name, &home.pins()?) {
        Ok(resolved) => resolved,
        Err(error) => {
            eprintln!("error: {error}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let context = home.resolve_context(args.dirs.project.as_deref());
    let view = resolved_view(&resolved, &context);
    let mut out = io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &view)?;
        writeln!(out)?;
    } else {
        write_text_view(&mut out, &view)?;
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn resolved_view(resolved: &ResolvedSpec, context: &ResolveContext) -> Value {
    let spec = &resolved.spec;
    let prompt = match resolve_prompt(spec, resolved.scope, context) {
        Ok(prompt) => json!({ "text": prompt.text, "source": prompt.source, "notices": prompt.notices }),
        Err(error) => json!({ "text": Value::Null, "refused": error.to_string() }),
    };
    let include_mcp_json = spec.include_mcp_json().map_err(|error| error.to_string());
    json!({
        "name": resolved.name,
        "file": resolved.path,
        "scope": resolved.scope,
        "format": spec.format(),
        "description": spec.description(),
        "model": spec.model(),
        "welcome_message": spec.welcome_message(),
        "prompt": prompt,
        "skill_globs": skill_globs(spec, context),
        "steering": steering_files(spec, context),
        "granted_tools": spec.granted_tools().summary(),
        "auto_approve": spec.auto_approve().entries().collect::<Vec<_>>(),
        "mcp_servers": spec.mcp_servers().iter().map(|server| &server.name).collect::<Vec<_>>(),
        "include_mcp_json": include_mcp_json.as_ref().ok(),
        "is_toolless": spec.is_toolless(),
        "warnings": resolved.warnings,
        "diagnostics": spec.diagnostics(),
    })
}

fn write_text_view(out: &mut impl Write, view: &Value) -> io::Result<()> {
    let text = |value: &Value| value.as_str().map(str::to_owned).unwrap_or_else(|| value.to_string());
    writeln!(out, "name: {}", text(&view["name"]))?;
    writeln!(out, "file: {} ({})", text(&view["file"]), text(&view["scope"]))?;
    writeln!(out, "model: {}", text(&view["model"]))?;
    match &view["prompt"]["refused"] {
        Value::String(refused) => writeln!(out, "prompt: refused: {refused}")?,
        _ => {
            let prompt = view["prompt"]["text"].as_str().unwrap_or_default();
            writeln!(out, "prompt: {} chars", prompt.chars().count())?;
            for notice in view["prompt"]["notices"].as_array().into_iter().flatten() {
                writeln!(out, "  notice: {}", text(notice))?;
            }
        }
    }
    for glob in view["skill_globs"].as_array().into_iter().flatten() {
        writeln!(out, "skill glob: {}", text(glob))?;
    }
    for file in view["steering"]["files"].as_array().into_iter().flatten() {
        writeln!(out, "steering: {}", text(file))?;
    }
    writeln!(out, "granted tools: {}", view["granted_tools"])?;
    writeln!(out, "toolless: {}", view["is_toolless"])?;
    for warning in view["warnings"].as_array().into_iter().flatten() {
        writeln!(out, "warning: {}", text(warning))?;
    }
    for diagnostic in view["diagnostics"].as_array().into_iter().flatten() {
        writeln!(
            out,
            "{}: {}: {}",
            text(&diagnostic["severity"]),
            text(&diagnostic["path"]),
            text(&diagnostic["message"])
        )?;
    }
    Ok(())
}

fn pin(home: &Home, args: &PinArgs) -> anyhow::Result<ExitCode> {
    validate_pin(&args.file)?;
    let catalog = catalog(home, &args.dirs)?;
    let claimants = catalog.claimant_paths(&args.name);
    let names_claimant = claimants.iter().any(|path| path.file_name().is_some_and(|name| name == args.file.as_str()));
    if !names_claimant {
        let listed = claimants.iter().map(|path| path.display().to_string()).collect::<Vec<_>>().join(", ");
        let listed = if listed.is_empty() { "none".to_owned() } else { listed };
        eprintln!("error: `{}` does not declare agent `{}`; the files that do: {listed}", args.file, args.name);
        return Ok(ExitCode::FAILURE);
    }
    write_pin(home.dir(), &args.name, &args.file)?;
    println!("pinned `{}` to {} (applies to sessions started from now on)", args.name, args.file);
    Ok(ExitCode::SUCCESS)
}

/// Adds `name → file` to `agent.spec_pins` of `<home>/config.json`. The
/// pins are read from the file under its edit lock (the lock `config set`
/// takes), changed and written before the lock is let go, so parallel pins
/// and config edits all land; the file stays owner-only.
fn write_pin(home: &Path, name: &str, file: &str) -> anyhow::Result<()> {
    // Objects keep their key order, so a pin leaves the rest of the file as it was written.
    use crate::settings::Ordered;
    let path = home.join(settings::CONFIG_FILE_NAME);
    crate::locked_edit::edit_locked_owner_only(&path, |current: Option<String>| -> anyhow::Result<Option<String>> {
        let text = current.unwrap_or_default();
        let mut root: indexmap::IndexMap<String, Ordered> = if text.trim().is_empty() {
            indexmap::IndexMap::new()
        } else {
            serde_json::from_str(&text).with_context(|| format!("{} is not a JSON object", path.display()))?
        };
        let Ordered::Object(agent) =
            root.entry("agent".to_owned()).or_insert_with(|| Ordered::Object(indexmap::IndexMap::new()))
        else {
            bail!("{}: `agent` must be a JSON object", path.display());
        };
        let Ordered::Object(pins) =
            agent.entry("spec_pins".to_owned()).or_insert_with(|| Ordered::Object(indexmap::IndexMap::new()))
        else {
            bail!("{}: `agent.spec_pins` must map agent names to file names", path.display());
        };
        if pins.values().any(|pinned| !matches!(pinned, Ordered::String(_))) {
            bail!("{}: `agent.spec_pins` must map agent names to file names", path.display());
        }
        pins.insert(name.to_owned(), Ordered::String(file.to_owned()));
        let mut next = serde_json::to_string_pretty(&root)?;
        next.push('\n');
        Ok(Some(next))
    })?;
    Ok(())
}

fn check(home: &Home, args: &CheckArgs) -> anyhow::Result<ExitCode> {
    let sensitive = home.sensitive().clone();
    let mut out = io::stdout().lock();
    let mut all_ok = true;
    for file in &args.files {
        let report = check_file(file, &sensitive);
        all_ok &= report.ok;
        serde_json::to_writer(&mut out, &report)?;
        writeln!(out)?;
    }
    Ok(if all_ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// The projection of agent `name` on `backend`, from the catalog of those
/// directories.
pub(crate) fn projection(
    home: &Home,
    name: &str,
    backend: AgentBackend,
    agents_dir: Option<&Path>,
    project: Option<&Path>,
) -> anyhow::Result<AgentProjection> {
    let catalog = home.agents(agents_dir, project)?;
    Ok(project_in(&catalog, &home.pins()?, &home.resolve_context(project), name, backend)?)
}

/// The projection of agent `name` on `backend`: the prompt resolved, the
/// catalog's other agents as the sub-agent pool, the resolver's warnings
/// first among the notices.
pub(crate) fn project_in(
    catalog: &AgentCatalog,
    pins: &Pins,
    context: &ResolveContext,
    name: &str,
    backend: AgentBackend,
) -> Result<AgentProjection, cairn_agent_spec::AgentSpecError> {
    let resolved = catalog.resolve(name, pins)?;
    let prompt = resolve_prompt(&resolved.spec, resolved.scope, context).ok().map(|prompt| prompt.text);
    let peers: BTreeMap<String, AgentSpec> = catalog
        .names()
        .into_iter()
        .filter(|peer| *peer != resolved.name)
        .filter_map(|peer| catalog.resolve(&peer, pins).ok().map(|found| (found.name, found.spec)))
        .collect();
    let input = ProjectionInput {
        name: &resolved.name,
        spec: &resolved.spec,
        scope: resolved.scope,
        prompt: prompt.as_deref(),
        peers: &peers,
    };
    let mut built = cairn_agent_spec::projection::project(&input, backend, &ProjectionOptions::default());
    for warning in resolved.warnings.iter().rev() {
        built.notices.insert(0, warning.clone());
    }
    Ok(built)
}

fn project(home: &Home, args: &ProjectArgs) -> anyhow::Result<ExitCode> {
    let backend = match AgentBackend::parse(&args.backend) {
        Ok(backend) => backend,
        Err(error) => {
            eprintln!("error: {error}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let built =
        match projection(home, &args.name, backend, args.dirs.agents_dir.as_deref(), args.dirs.project.as_deref()) {
            Ok(built) => built,
            Err(error) => {
                eprintln!("error: {error:#}");
                return Ok(ExitCode::FAILURE);
            }
        };
    let mut out = io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &built)?;
        writeln!(out)?;
    } else {
        write_projection(&mut out, &built)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn write_projection(out: &mut impl Write, built: &AgentProjection) -> io::Result<()> {
    let kind = serde_json::to_value(built.kind).ok().and_then(|kind| kind.as_str().map(str::to_owned));
    writeln!(out, "agent: {}", built.agent)?;
    writeln!(out, "backend: {} ({})", built.backend, kind.unwrap_or_default())?;
    if !built.spec_read {
        writeln!(out, "the backend does not use this spec")?;
    }
    writeln!(out, "concerns:")?;
    for report in &built.concerns {
        let answer = match report.ruling.disposition {
            Disposition::Delivered => "delivered".to_owned(),
            Disposition::Translated => "translated".to_owned(),
            Disposition::NoChannel { channel } => format!("no-channel (needs {channel})"),
            Disposition::Withheld { class } => format!(
                "withheld ({})",
                serde_json::to_value(class)
                    .ok()
                    .and_then(|class| class.as_str().map(str::to_owned))
                    .unwrap_or_default()
            ),
        };
        let set = if report.set { "set" } else { "   " };
        writeln!(out, "  {set} {:<24} {answer}: {}", report.ruling.concern.key(), report.ruling.detail)?;
    }
    for server in &built.mcp_servers {
        writeln!(out, "mcp server: {}", server["name"].as_str().unwrap_or_default())?;
    }
    for withheld in &built.withheld_servers {
        writeln!(out, "withheld server: {} ({})", withheld.server, withheld.reason)?;
    }
    for denied in &built.deny {
        let rule = denied.rule.as_deref().map(|rule| format!(" as {rule}")).unwrap_or_default();
        writeln!(out, "denied tool: {}/{}{rule}", denied.server, denied.tool)?;
    }
    if let Some(settings) = &built.settings {
        writeln!(out, "settings: {settings}")?;
    }
    if let Some(permissions) = &built.permissions {
        writeln!(out, "permissions: {}", permissions.to_value())?;
    }
    if built.zero_tools {
        writeln!(out, "tools: [] (mount nothing): {}", serde_json::to_value(built.zero_tool_ban).unwrap_or_default())?;
    }
    for notice in &built.notices {
        writeln!(out, "notice: {notice}")?;
    }
    Ok(())
}

/// One file export would write: its path, its current text, its new value,
/// and what the merge kept.
struct ExportFile {
    path: PathBuf,
    before: Option<String>,
    after: Value,
    kept: Vec<String>,
}

fn read_json_object(home: &Home, path: &Path) -> anyhow::Result<(Option<String>, Value)> {
    if !path.exists() {
        return Ok((None, Value::Object(Map::new())));
    }
    let text = home.sensitive().read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    if text.trim().is_empty() {
        return Ok((Some(text), Value::Object(Map::new())));
    }
    let value: Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not valid JSON; fix it first, nothing was changed", path.display()))?;
    if !value.is_object() {
        bail!("{} is not a JSON object; nothing was changed", path.display());
    }
    Ok((Some(text), value))
}

fn object_entry<'a>(value: &'a mut Value, key: &str, path: &Path) -> anyhow::Result<&'a mut Map<String, Value>> {
    let map = value.as_object_mut().context("checked to be an object")?;
    map.entry(key.to_owned())
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .with_context(|| format!("`{key}` in {} is not an object; nothing was changed", path.display()))
}

/// Adds `key: value` to `map` unless the key holds something else, which
/// is kept (and named in `kept`).
fn merge_key(map: &mut Map<String, Value>, key: &str, value: Value, label: &str, kept: &mut Vec<String>) {
    match map.get(key) {
        None => {
            map.insert(key.to_owned(), value);
        }
        Some(existing) if *existing == value => {}
        Some(_) => kept.push(format!("{label}: the existing value was kept")),
    }
}

fn claude_files(home: &Home, dir: &Path, built: &AgentProjection) -> anyhow::Result<Vec<ExportFile>> {
    let mcp_path = dir.join(".mcp.json");
    let (before, mut after) = read_json_object(home, &mcp_path)?;
    let mut kept = Vec::new();
    let servers = object_entry(&mut after, "mcpServers", &mcp_path)?;
    for element in &built.mcp_servers {
        let name = element["name"].as_str().unwrap_or_default().to_owned();
        let entry = claude_mcp_entry(element);
        merge_key(servers, &name, entry, &format!("mcpServers.{name}"), &mut kept);
    }
    let mcp = ExportFile { path: mcp_path, before, after, kept };

    let settings_path = dir.join(".claude").join("settings.local.json");
    let (before, mut after) = read_json_object(home, &settings_path)?;
    let mut kept = Vec::new();
    let projected = built.settings.clone().unwrap_or_else(|| json!({}));
    let top = after.as_object_mut().context("checked to be an object")?;
    for key in ["model", "availableModels"] {
        if let Some(value) = projected.get(key) {
            merge_key(top, key, value.clone(), key, &mut kept);
        }
    }
    let permissions = object_entry(&mut after, "permissions", &settings_path)?;
    if let Some(mode) = projected.pointer("/permissions/defaultMode") {
        merge_key(permissions, "defaultMode", mode.clone(), "permissions.defaultMode", &mut kept);
    }
    if let Some(Value::Array(rules)) = projected.pointer("/permissions/deny") {
        let deny = permissions.entry("deny").or_insert_with(|| Value::Array(Vec::new()));
        let deny = deny.as_array_mut().with_context(|| {
            format!("`permissions.deny` in {} is not a list; nothing was changed", settings_path.display())
        })?;
        for rule in rules {
            if !deny.contains(rule) {
                deny.push(rule.clone());
            }
        }
    }
    Ok(vec![mcp, ExportFile { path: settings_path, before, after, kept }])
}

/// The `.mcp.json` entry for one ACP array element.
fn claude_mcp_entry(element: &Value) -> Value {
    let pairs = |key: &str| -> Map<String, Value> {
        element[key]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|pair| Some((pair["name"].as_str()?.to_owned(), pair["value"].clone())))
            .collect()
    };
    if let Some(url) = element.get("url") {
        let mut entry = json!({ "type": "http", "url": url });
        let headers = pairs("headers");
        if !headers.is_empty() {
            entry["headers"] = Value::Object(headers);
        }
        entry
    } else {
        let mut entry = json!({ "type": "stdio", "command": element["command"], "args": element["args"] });
        let env = pairs("env");
        if !env.is_empty() {
            entry["env"] = Value::Object(env);
        }
        entry
    }
}

fn kas_files(home: &Home, dir: &Path, built: &AgentProjection) -> anyhow::Result<Vec<ExportFile>> {
    let path = dir.join(".kiro").join("kas-custom-agents.json");
    let (before, mut after) = read_json_object(home, &path)?;
    let mut kept = Vec::new();
    let batch = built.wire.as_ref().and_then(|wire| wire.pointer("/_meta/kiro/customAgents")).cloned();
    let agents = object_entry(&mut after, "customAgents", &path)?;
    for agent in batch.and_then(|batch| batch.as_array().cloned()).unwrap_or_default() {
        let name = agent["name"].as_str().unwrap_or_default().to_owned();
        merge_key(agents, &name, agent, &format!("customAgents.{name}"), &mut kept);
    }
    Ok(vec![ExportFile { path, before, after, kept }])
}

fn export(home: &Home, args: &ExportArgs) -> anyhow::Result<ExitCode> {
    let backend = match args.to {
        ExportTarget::ClaudeCode => AgentBackend::Claude,
        ExportTarget::Kas => AgentBackend::Kas,
    };
    let built =
        match projection(home, &args.name, backend, args.dirs.agents_dir.as_deref(), args.dirs.project.as_deref()) {
            Ok(built) => built,
            Err(error) => {
                eprintln!("error: {error:#}");
                return Ok(ExitCode::FAILURE);
            }
        };
    if !built.spec_read {
        for notice in &built.notices {
            eprintln!("notice: {notice}");
        }
        eprintln!("error: {backend} does not use this spec; nothing was written");
        return Ok(ExitCode::FAILURE);
    }
    let dir = match args.dir.clone().or_else(|| home.project_dir(args.dirs.project.as_deref())) {
        Some(dir) => dir,
        None => std::env::current_dir().context("the current directory")?,
    };
    let files = match args.to {
        ExportTarget::ClaudeCode => claude_files(home, &dir, &built)?,
        ExportTarget::Kas => kas_files(home, &dir, &built)?,
    };
    for file in &files {
        write_export(file, args.dry_run)?;
    }
    for notice in &built.notices {
        println!("notice: {notice}");
    }
    Ok(ExitCode::SUCCESS)
}

fn write_export(file: &ExportFile, dry_run: bool) -> anyhow::Result<()> {
    for kept in &file.kept {
        println!("kept {}: {kept}", file.path.display());
    }
    let mut after = serde_json::to_string_pretty(&file.after)?;
    after.push('\n');
    let before_value = file.before.as_deref().and_then(|text| serde_json::from_str::<Value>(text).ok());
    if before_value.as_ref() == Some(&file.after) {
        println!("unchanged {}", file.path.display());
        return Ok(());
    }
    if dry_run {
        let before = before_value
            .and_then(|value| serde_json::to_string_pretty(&value).ok())
            .map(|text| text + "\n")
            .unwrap_or_default();
        let name = file.path.display().to_string();
        let diff = similar::TextDiff::from_lines(&before, &after);
        print!("{}", diff.unified_diff().context_radius(3).header(&name, &name));
        return Ok(());
    }
    let mut backup = file.path.clone().into_os_string();
    backup.push(".cairn.bak");
    let backup = PathBuf::from(backup);
    // Written under the file's edit lock, and only over the text the merge
    // was computed from: a host or another `cairn` that changed it since
    // gets a refusal, never a lost edit.
    crate::locked_edit::edit_locked(&file.path, |current| {
        if current != file.before {
            bail!("{} changed while the export was prepared; nothing was written, run it again", file.path.display());
        }
        if let Some(before) = &current {
            settings::atomic_write(&backup, before.as_bytes())?;
        }
        Ok(Some(after))
    })?;
    match &file.before {
        Some(_) => println!("updated {} (previous file in {})", file.path.display(), backup.display()),
        None => println!("created {}", file.path.display()),
    }
    Ok(())
}
