//! `cairn hooks check` and `cairn hooks run`: the effective hook set and
//! what the hooks decide for one event.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use cairn_guard::SensitivePaths;
use cairn_hooks::{
    ConfigHooks, HookEvent, HookInput, HookRunner, HookSet, HooksConfig, MergeOptions, MergeReport, RunnerOptions,
    merge_user_hooks,
};
use clap::{Args, Subcommand};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::cli::Cli;

#[derive(Debug, Subcommand)]
pub(crate) enum HooksCommand {
    /// Validate the hooks config and print the effective, merged hook set
    /// with every dropped entry and why (JSON).
    Check(CheckArgs),
    /// Fire the hooks matching EVENT and print the decision (JSON).
    Run(RunArgs),
}

#[derive(Debug, Args)]
pub(crate) struct SourceArgs {
    /// Config file holding `hooks` and `agent.kiro_hooks` (default `<home>/config.json`).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Bundled hooks in the object form, loaded before the user's.
    #[arg(long, value_name = "FILE")]
    bundled: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    #[command(flatten)]
    source: SourceArgs,
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// agentSpawn, userPromptSubmit, preToolUse, postToolUse or stop (any spelling).
    event: String,
    /// The tool being called (tool events).
    #[arg(long, value_name = "NAME")]
    tool: Option<String>,
    /// The tool input as JSON.
    #[arg(long, value_name = "JSON")]
    input: Option<String>,
    /// The user's prompt (userPromptSubmit).
    #[arg(long)]
    prompt: Option<String>,
    /// Working directory the hooks run in (default: the current one).
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    #[command(flatten)]
    source: SourceArgs,
}

#[derive(Debug, Default, Deserialize)]
struct ConfigFile {
    #[serde(default)]
    hooks: HooksConfig,
    #[serde(default)]
    agent: AgentSection,
}

#[derive(Debug, Default, Deserialize)]
struct AgentSection {
    #[serde(default)]
    kiro_hooks: Value,
}

pub(crate) fn run(cli: &Cli, command: &HooksCommand) -> anyhow::Result<ExitCode> {
    match command {
        HooksCommand::Check(args) => check(cli, args),
        HooksCommand::Run(args) => fire(cli, args),
    }
}

struct Loaded {
    config_path: PathBuf,
    config_hooks: ConfigHooks,
    warnings: Vec<cairn_hooks::ConfigWarning>,
    merge: MergeReport,
}

fn load(cli: &Cli, source: &SourceArgs) -> anyhow::Result<Loaded> {
    let home = cli.home_dir();
    let config_path = source.config.clone().unwrap_or_else(|| home.join("config.json"));
    let file = read_config(&config_path)?;
    let (config_hooks, warnings) =
        ConfigHooks::compile(&file.hooks).with_context(|| format!("in {}", config_path.display()))?;
    let bundled = match &source.bundled {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            HookSet::parse_bundled_str(&text).with_context(|| format!("in {}", path.display()))?
        }
        None => HookSet::new(),
    };
    let options = MergeOptions::new(SensitivePaths::for_current_user().with_gateway_home(&home));
    let merge = merge_user_hooks(&bundled, &file.agent.kiro_hooks, &options);
    Ok(Loaded { config_path, config_hooks, warnings, merge })
}

fn read_config(path: &Path) -> anyhow::Result<ConfigFile> {
    match std::fs::read_to_string(path) {
        // Parsed straight from the text so rule order is kept.
        Ok(text) => serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display())),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(ConfigFile::default()),
        Err(error) => Err(error).with_context(|| format!("reading {}", path.display())),
    }
}

fn check(cli: &Cli, args: &CheckArgs) -> anyhow::Result<ExitCode> {
    let loaded = load(cli, &args.source)?;
    let dropped: Vec<Value> = loaded
        .merge
        .dropped
        .iter()
        .map(|dropped| {
            json!({
                "location": dropped.location,
                "command": dropped.command,
                "reason": dropped.reason,
                "why": dropped.reason.to_string(),
            })
        })
        .collect();
    let report = json!({
        "config": loaded.config_path,
        "config_hooks": {"rules": loaded.config_hooks.rule_count(), "warnings": loaded.warnings},
        "hooks": loaded.merge.hooks,
        "dropped": dropped,
        "notices": loaded.merge.notices,
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(ExitCode::SUCCESS)
}

fn fire(cli: &Cli, args: &RunArgs) -> anyhow::Result<ExitCode> {
    let event: HookEvent = args.event.parse()?;
    let loaded = load(cli, &args.source)?;
    let cwd = match &args.cwd {
        Some(cwd) => cwd.clone(),
        None => std::env::current_dir().context("no current directory")?,
    };
    let mut input = HookInput::new(event, cwd);
    input.tool_name = args.tool.clone();
    input.prompt = args.prompt.clone();
    input.tool_input = match &args.input {
        Some(text) => Some(serde_json::from_str(text).context("--input is not valid JSON")?),
        None => None,
    };
    let runner = HookRunner::new(&loaded.merge.hooks, RunnerOptions::default())?;
    let decision = runner.fire(&input);
    let config_decision = match (event, &args.tool) {
        (HookEvent::PreToolUse, Some(tool)) => Some(loaded.config_hooks.tool_decision(tool)),
        _ => None,
    };
    let mut output = serde_json::to_value(&decision)?;
    if let (Some(config_decision), Value::Object(fields)) = (config_decision, &mut output) {
        fields.insert("config_decision".to_owned(), serde_json::to_value(config_decision)?);
    }
    println!("{}", serde_json::to_string_pretty(&output)?);
    Ok(ExitCode::SUCCESS)
}
