//! `cairn mcp list|probe|enable|disable|sync|import`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use cairn_agent_spec::McpTransport;
use serde_json::{Value, json};

use super::edit::{self, EditRefused};
use super::import::{self, ImportRequest, Origin};
use super::probe::{self, ProbeOptions, ProbeReport, Skipped};
use super::{Discovery, Locations};
use crate::home::Home;

/// Where to look and which agent's grants to report.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Scope {
    /// The agent whose spec comes first and whose `tools` say what is enabled; enable, disable and sync edit its spec (default: the only agent spec there is).
    #[arg(long, value_name = "NAME")]
    pub(crate) agent: Option<String>,
    /// A project checkout (its `.kiro/agents` and `.kiro/settings/mcp.json`); overrides `agent.project_dir`.
    #[arg(long, value_name = "DIR")]
    pub(crate) project: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `cairn mcp list`.
#[derive(Debug, clap::Args)]
pub(crate) struct ListArgs {
    #[command(flatten)]
    pub(crate) scope: Scope,
}

/// `cairn mcp probe`.
#[derive(Debug, clap::Args)]
pub(crate) struct ProbeArgs {
    #[command(flatten)]
    pub(crate) scope: Scope,
    /// Probe only this server (repeatable); a named server is probed even when `disabled`.
    #[arg(long = "server", value_name = "NAME")]
    pub(crate) servers: Vec<String>,
    /// Deadline of each probe.
    #[arg(long, value_name = "SECS", default_value_t = probe::PROBE_TIMEOUT.as_secs())]
    pub(crate) timeout_secs: u64,
}

/// `cairn mcp enable|disable`.
#[derive(Debug, clap::Args)]
pub(crate) struct ToggleArgs {
    /// The server name.
    pub(crate) name: String,
    #[command(flatten)]
    pub(crate) scope: Scope,
}

/// `cairn mcp sync`.
#[derive(Debug, clap::Args)]
pub(crate) struct SyncArgs {
    #[command(flatten)]
    pub(crate) scope: Scope,
    /// Show what would be added and write nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
}

/// `cairn mcp import`.
#[derive(Debug, clap::Args)]
pub(crate) struct ImportArgs {
    /// Whose config to read (repeatable; default: all three).
    #[arg(long = "from", value_enum, value_name = "AGENT")]
    pub(crate) origins: Vec<Origin>,
    /// Read this file instead of the agent's default (with exactly one --from).
    #[arg(long, value_name = "FILE")]
    pub(crate) file: Option<PathBuf>,
    /// Import only the server with this name in the foreign config (repeatable).
    #[arg(long = "only", value_name = "NAME")]
    pub(crate) only: Vec<String>,
    /// Show every decision and its reason; write nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// A project checkout (its `.mcp.json`, and its sources reserve names too).
    #[arg(long, value_name = "DIR")]
    pub(crate) project: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

fn print_json(value: &Value) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

fn load(home: &Home, scope: &Scope) -> anyhow::Result<(Locations, Discovery)> {
    let locations = Locations::from_home(home, scope.project.as_deref())?;
    let discovery = Discovery::load(&locations, scope.agent.as_deref())?;
    Ok((locations, discovery))
}

/// The locations and the discovery of the agent an edit applies to:
/// `--agent`, else the only agent spec there is.
fn load_for_edit(home: &Home, scope: &Scope) -> anyhow::Result<(Discovery, String)> {
    let locations = Locations::from_home(home, scope.project.as_deref())?;
    let agent = Discovery::editing_agent(&locations, scope.agent.as_deref()).map_err(refused)?;
    let discovery = Discovery::load(&locations, Some(&agent))?;
    Ok((discovery, agent))
}

/// `cairn mcp list`.
pub(crate) fn list(home: &Home, args: &ListArgs) -> anyhow::Result<ExitCode> {
    let (_, discovery) = load(home, &args.scope)?;
    let mut listing = discovery.listing();
    if args.scope.json {
        listing["ok"] = json!(true);
        print_json(&listing)?;
        return Ok(ExitCode::SUCCESS);
    }
    for server in listing["servers"].as_array().into_iter().flatten() {
        let target = match server["transport"].as_str() {
            Some("stdio") => {
                let args: Vec<&str> =
                    server["args"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
                format!("{} {}", server["command"].as_str().unwrap_or_default(), args.join(" "))
            }
            _ => server["url"].as_str().unwrap_or_default().to_owned(),
        };
        let state = match server.get("enabled").and_then(Value::as_bool) {
            Some(true) => " [enabled]",
            Some(false) => " [not enabled]",
            None => "",
        };
        let disabled = if server["disabled"].as_bool() == Some(true) { " (disabled)" } else { "" };
        if let Some(warning) = server["warning"].as_str() {
            eprintln!("warning: {warning}");
        }
        println!(
            "{}{disabled}{state}\t{}\t{}\t{}",
            server["name"].as_str().unwrap_or_default(),
            server["transport"].as_str().unwrap_or_default(),
            target.trim(),
            server["source"]["path"].as_str().unwrap_or_default(),
        );
    }
    for source in &discovery.sources {
        for problem in &source.problems {
            eprintln!("warning: {}: {problem}", source.path.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Servers to probe, by name.
pub(crate) type Targets = Vec<(String, McpTransport)>;

/// The servers a probe covers: the named ones, or every effective server
/// that is not `disabled`.
pub(crate) fn probe_targets(discovery: &Discovery, only: &[String]) -> anyhow::Result<(Targets, Vec<Skipped>)> {
    let mut targets = Vec::new();
    let mut skipped = Vec::new();
    if only.is_empty() {
        for definition in discovery.effective() {
            let server = &definition.server;
            if server.disabled {
                skipped.push(Skipped {
                    name: server.name.clone(),
                    reason: "`disabled: true`; name it with --server to probe it".to_owned(),
                });
            } else {
                targets.push((server.name.clone(), server.transport.clone()));
            }
        }
    } else {
        for name in only {
            let definition =
                discovery.find(name).with_context(|| format!("no source defines an MCP server named {name:?}"))?;
            targets.push((name.clone(), definition.server.transport.clone()));
        }
    }
    Ok((targets, skipped))
}

/// Probes the targets and stamps the report.
pub(crate) fn probe_report(
    discovery: &Discovery,
    only: &[String],
    options: ProbeOptions,
) -> anyhow::Result<ProbeReport> {
    let (targets, skipped) = probe_targets(discovery, only)?;
    let probed_at = jiff::Timestamp::now().to_string();
    let results = probe::probe_all(&targets, options);
    Ok(ProbeReport { probed_at, results, skipped })
}

/// `cairn mcp probe`.
pub(crate) fn probe(home: &Home, args: &ProbeArgs) -> anyhow::Result<ExitCode> {
    let (_, discovery) = load(home, &args.scope)?;
    if args.timeout_secs == 0 {
        anyhow::bail!("--timeout-secs must be at least 1");
    }
    let options = ProbeOptions { timeout: Duration::from_secs(args.timeout_secs), ..ProbeOptions::default() };
    let report = probe_report(&discovery, &args.servers, options);
    // This process ran nothing but the probes: whatever a server left
    // behind and was re-parented here goes now, whether or not they worked.
    probe::sweep_orphans();
    let report = report?;
    if args.scope.json {
        let mut value = serde_json::to_value(&report)?;
        value["ok"] = json!(true);
        print_json(&value)?;
        return Ok(ExitCode::SUCCESS);
    }
    for result in &report.results {
        let status = serde_json::to_value(result.status)?;
        let status = status.as_str().unwrap_or_default();
        match &result.reason {
            None => println!(
                "{}\t{status}\t{} {}\t{} tools: {}",
                super::shown(&result.name),
                result.server_name.as_deref().unwrap_or("?"),
                result.server_version.as_deref().unwrap_or("?"),
                result.tools.len(),
                result.tools.join(", "),
            ),
            Some(reason) => println!("{}\t{status}\t{reason}", super::shown(&result.name)),
        }
    }
    for skipped in &report.skipped {
        println!("{}\tskipped\t{}", super::shown(&skipped.name), skipped.reason);
    }
    Ok(ExitCode::SUCCESS)
}

fn refused(error: EditRefused) -> anyhow::Error {
    anyhow::anyhow!("{} ({})", error.message, error.code)
}

/// `cairn mcp enable|disable`.
pub(crate) fn toggle(home: &Home, args: &ToggleArgs, enable: bool) -> anyhow::Result<ExitCode> {
    let (discovery, agent) = load_for_edit(home, &args.scope)?;
    let outcome = edit::toggle(&discovery, &args.name, enable).map_err(refused)?;
    if args.scope.json {
        print_json(&json!({
            "ok": true,
            "agent": agent,
            "server": args.name,
            "enabled": enable,
            "path": outcome.path,
            "changed": outcome.changed,
            "cleared_disabled": outcome.cleared_disabled,
            "notices": outcome.notices,
        }))?;
    } else {
        let verb = if enable { "enabled" } else { "disabled" };
        let change = if outcome.changed { "updated" } else { "unchanged" };
        println!("{verb} {} for {}: {change} {}", args.name, agent, outcome.path.display());
        if outcome.cleared_disabled {
            println!("removed `disabled: true` from {} in the agent spec's `mcpServers`", args.name);
        }
        for notice in &outcome.notices {
            eprintln!("note: {notice}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `cairn mcp sync`.
pub(crate) fn sync(home: &Home, args: &SyncArgs) -> anyhow::Result<ExitCode> {
    let (discovery, _) = load_for_edit(home, &args.scope)?;
    let outcome = edit::sync(&discovery, args.dry_run).map_err(refused)?;
    if args.scope.json {
        let mut value = serde_json::to_value(&outcome)?;
        value["ok"] = json!(true);
        print_json(&value)?;
    } else {
        let verb = if args.dry_run { "would add" } else { "added" };
        for name in &outcome.added {
            println!("{verb} {name} to {}", outcome.path.display());
        }
        for name in &outcome.kept {
            println!("kept {name}: the agent spec's own definition wins");
        }
        if outcome.added.is_empty() {
            println!("nothing to add to {}", outcome.path.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `cairn mcp import`.
pub(crate) fn import(home: &Home, args: &ImportArgs) -> anyhow::Result<ExitCode> {
    home.ensure_dir()?;
    let locations = Locations::from_home(home, args.project.as_deref())?;
    let origins = if args.origins.is_empty() { Origin::ALL.to_vec() } else { args.origins.clone() };
    let request = ImportRequest { origins, file: args.file.clone(), only: args.only.clone(), dry_run: args.dry_run };
    let report = import::run_import(&locations, &request)?.shown();
    if args.json {
        let mut value = serde_json::to_value(&report)?;
        value["ok"] = json!(true);
        print_json(&value)?;
        return Ok(ExitCode::SUCCESS);
    }
    for file in &report.files {
        if let Some(problem) = &file.problem {
            eprintln!("warning: {}: {problem}", file.path.display());
        }
    }
    for row in &report.decisions {
        let decision = serde_json::to_value(row.decision)?;
        println!(
            "{}\t{}\t{} ({})\t{}",
            decision.as_str().unwrap_or_default(),
            row.name,
            super::shown(&row.file.display().to_string()),
            row.scope,
            row.reason
        );
    }
    if report.decisions.is_empty() {
        println!("no MCP servers found to import");
    }
    Ok(ExitCode::SUCCESS)
}
