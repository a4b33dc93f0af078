//! `cairn agent`: list, show, pin and check agent spec files.
//!
//! Pins live in `<home>/config.json` under `agent.spec_pins` (agent name →
//! bare file name); every other key of that file is kept as it is.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use cairn_agent_spec::{
    Catalog, ResolveContext, ResolvedSpec, check_file, resolve_prompt, skill_globs, steering_files, validate_pin,
};
use clap::{Args, Subcommand};
use serde_json::{Value, json};

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
    }
}

fn catalog(home: &Home, dirs: &Dirs) -> anyhow::Result<Catalog> {
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
    let mut pins = home.settings().agent.spec_pins.clone();
    pins.insert(args.name.clone(), args.file.clone());
    settings::write_key(home.dir(), "agent.spec_pins", Some(&serde_json::to_string(&pins)?))?;
    println!("pinned `{}` to {} (applies to sessions started from now on)", args.name, args.file);
    Ok(ExitCode::SUCCESS)
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
