//! `cairn agent`: list, show, pin and check agent spec files; project and
//! export what one becomes on a backend.
//!
//! Pins live in `<home>/config.json` under `agent.spec_pins` (agent name →
//! bare file name); every other key of that file is kept as it is.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use cairn_agent_spec::projection::{
    AgentBackend, AgentProjection, Disposition, ProjectionInput, ProjectionOptions, Version,
};
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
    /// what is there (an existing entry is never replaced). Claude Code
    /// reads what `--to claude-code` writes; `--to kas` writes a hand-off
    /// file that neither KAS nor kiro-cli reads.
    Export(ExportArgs),
}

#[derive(Debug, Args)]
pub(crate) struct ProjectArgs {
    /// The agent name.
    name: String,
    /// kiro-cli, kas, claude, codex, opencode, mimocode, goose, strands, pi or deepseek.
    #[arg(long, value_name = "BACKEND")]
    backend: String,
    /// kiro-cli's version, instead of asking `kiro-cli --version` (kiro-cli
    /// reads a spec's `permissions` block from 2.23.0; an older release drops
    /// the whole file).
    #[arg(long, value_name = "X.Y.Z", value_parser = parse_stated_version)]
    kiro_version: Option<Version>,
    #[command(flatten)]
    dirs: Dirs,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// The harnesses `cairn agent export` writes files for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ExportTarget {
    /// `.mcp.json` and `.claude/settings.local.json` in the directory, which Claude Code reads.
    ClaudeCode,
    /// `.kiro/kas-custom-agents.json`: the `customAgents` batch as a hand-off document. Neither KAS
    /// nor kiro-cli reads this file; copy its agents into `_meta.kiro.customAgents` of your own KAS
    /// `session/new` request.
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
/// directories; kiro-cli's version as `stated`, else asked of `kiro-cli`.
pub(crate) fn projection(
    home: &Home,
    name: &str,
    backend: AgentBackend,
    dirs: &Dirs,
    stated: Option<Version>,
) -> anyhow::Result<AgentProjection> {
    let catalog = home.agents(dirs.agents_dir.as_deref(), dirs.project.as_deref())?;
    let kiro_cli = KiroCliVersion::for_backend(backend, stated.map(|version| (version, "--kiro-version")));
    Ok(project_in(&catalog, &home.pins()?, &home.resolve_context(dirs.project.as_deref()), name, backend, kiro_cli)?)
}

/// The projection of agent `name` on `backend`: the prompt resolved, the
/// catalog's other agents as the sub-agent pool, the resolver's warnings
/// first among the notices, then where kiro-cli's version came from.
pub(crate) fn project_in(
    catalog: &AgentCatalog,
    pins: &Pins,
    context: &ResolveContext,
    name: &str,
    backend: AgentBackend,
    kiro_cli: Option<KiroCliVersion>,
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
    let options = ProjectionOptions {
        kiro_cli_version: kiro_cli.as_ref().and_then(|known| known.version),
        ..ProjectionOptions::default()
    };
    let mut built = cairn_agent_spec::projection::project(&input, backend, &options);
    let mut front = resolved.warnings.clone();
    front.extend(kiro_cli.map(|known| known.notice()));
    built.notices.splice(0..0, front);
    Ok(built)
}

/// How long `kiro-cli --version` may take before its version counts as
/// unknown.
const KIRO_CLI_PROBE_DEADLINE: Duration = Duration::from_secs(3);
/// At most this much of its output is read.
const KIRO_CLI_PROBE_MAX_BYTES: u64 = 4096;

/// kiro-cli's version for one command or request, and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KiroCliVersion {
    /// `None` when unknown.
    pub(crate) version: Option<Version>,
    /// `--kiro-version`, `kiro-cli --version`, or why it is unknown.
    source: String,
    /// How the caller states it (a flag or a query parameter).
    how_to_state: &'static str,
}

impl KiroCliVersion {
    /// For a kiro-cli projection: the `stated` version (with the flag or
    /// parameter that stated it), else the installed kiro-cli's, asked
    /// once. `None` for every other backend, which the version does not
    /// concern.
    pub(crate) fn for_backend(backend: AgentBackend, stated: Option<(Version, &'static str)>) -> Option<Self> {
        Self::for_backend_with(backend, stated, "--kiro-version X.Y.Z", probe_kiro_cli_version)
    }

    /// As [`Self::for_backend`], naming how a caller states the version.
    pub(crate) fn for_backend_with(
        backend: AgentBackend,
        stated: Option<(Version, &'static str)>,
        how_to_state: &'static str,
        probe: impl FnOnce() -> Result<Version, String>,
    ) -> Option<Self> {
        if backend != AgentBackend::KiroCli {
            return None;
        }
        Some(match stated {
            Some((version, by)) => {
                Self { version: Some(version), source: format!("as stated with {by}"), how_to_state }
            }
            None => match probe() {
                Ok(version) => {
                    Self { version: Some(version), source: "from `kiro-cli --version`".to_owned(), how_to_state }
                }
                Err(why) => Self { version: None, source: why, how_to_state },
            },
        })
    }

    /// The notice naming the version and its source.
    fn notice(&self) -> String {
        match self.version {
            Some(version) => format!("kiro-cli version: {version} ({})", self.source),
            None => format!("kiro-cli version: unknown ({}); state it with {}", self.source, self.how_to_state),
        }
    }
}

/// A version as a user states it: `2.23.0`, `v2.23`, `2.23.0-beta.1`.
pub(crate) fn parse_stated_version(text: &str) -> Result<Version, String> {
    strict_version(text.trim()).ok_or_else(|| format!("`{text}` is not a version like 2.23.0"))
}

/// One whitespace-free token read as `[v]MAJOR.MINOR[.PATCH][-+...]`, each
/// number at most six digits; anything else is not a version.
fn strict_version(token: &str) -> Option<Version> {
    let token = token.strip_prefix('v').unwrap_or(token);
    let core = token.split(['-', '+']).next()?;
    let parts: Vec<&str> = core.split('.').collect();
    if !(2..=3).contains(&parts.len())
        || parts.iter().any(|part| part.is_empty() || part.len() > 6 || !part.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    let number = |index: usize| parts.get(index).map_or(Some(0), |part| part.parse::<u32>().ok());
    Some(Version(number(0)?, number(1)?, number(2)?))
}

/// The version in `kiro-cli --version`'s output, which is untrusted: the
/// first line that has text, its first token that is a whole version
/// (`kiro-cli 2.23.0`, `2.23.0`); `None` for anything else.
pub(crate) fn version_in_output(output: &[u8]) -> Option<Version> {
    let text = String::from_utf8_lossy(output);
    let line = text.lines().map(str::trim).find(|line| !line.is_empty())?;
    line.split_whitespace().take(8).find_map(strict_version)
}

/// Runs `kiro-cli --version` (found on `PATH`) with no input, for at most
/// [`KIRO_CLI_PROBE_DEADLINE`], reading at most
/// [`KIRO_CLI_PROBE_MAX_BYTES`] of its output; why the version is unknown
/// otherwise.
pub(crate) fn probe_kiro_cli_version() -> Result<Version, String> {
    use std::io::Read as _;
    use std::process::{Command, Stdio};
    let mut child = match Command::new("kiro-cli")
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(child) => child,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Err("no `kiro-cli` on PATH".to_owned()),
        Err(error) => return Err(format!("`kiro-cli --version` could not be run: {error}")),
    };
    let stdout = child.stdout.take().expect("stdout was piped");
    let (sender, receiver) = std::sync::mpsc::channel();
    // The reader may outlive the deadline when a grandchild keeps the pipe
    // open; it is not waited for.
    std::thread::spawn(move || {
        let mut output = Vec::new();
        let _ = stdout.take(KIRO_CLI_PROBE_MAX_BYTES).read_to_end(&mut output);
        let _ = sender.send(output);
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < KIRO_CLI_PROBE_DEADLINE => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "`kiro-cli --version` did not answer within {} s",
                    KIRO_CLI_PROBE_DEADLINE.as_secs()
                ));
            }
        }
    };
    let remaining = KIRO_CLI_PROBE_DEADLINE.saturating_sub(started.elapsed()).max(Duration::from_millis(100));
    let output = receiver.recv_timeout(remaining).unwrap_or_default();
    if !status.success() {
        return Err(format!("`kiro-cli --version` failed ({status})"));
    }
    version_in_output(&output).ok_or_else(|| "`kiro-cli --version` printed no version".to_owned())
}

fn project(home: &Home, args: &ProjectArgs) -> anyhow::Result<ExitCode> {
    let backend = match AgentBackend::parse(&args.backend) {
        Ok(backend) => backend,
        Err(error) => {
            eprintln!("error: {error}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let built = match projection(home, &args.name, backend, &args.dirs, args.kiro_version) {
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
    let built = match projection(home, &args.name, backend, &args.dirs, None) {
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
    if args.to == ExportTarget::Kas {
        for file in &files {
            println!(
                "note: neither KAS nor kiro-cli reads {}: it is a hand-off document; copy its agents into `_meta.kiro.customAgents` of your own KAS session/new request",
                file.path.display()
            );
        }
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
