//! `cairn hooks check` and `cairn hooks run`: the effective hook set and
//! what the hooks decide for one event.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use cairn_hooks::{ConfigHooks, HookEvent, HookInput, HookRunner, HookSet, MergeReport, RunnerOptions};
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use crate::home::Home;
use crate::settings::{Environment, Flags, Settings};

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

pub(crate) fn run(home: &Home, command: &HooksCommand) -> anyhow::Result<ExitCode> {
    match command {
        HooksCommand::Check(args) => check(home, args),
        HooksCommand::Run(args) => fire(home, args),
    }
}

struct Loaded {
    config_path: PathBuf,
    config_hooks: ConfigHooks,
    warnings: Vec<cairn_hooks::ConfigWarning>,
    merge: MergeReport,
}

fn load(home: &Home, source: &SourceArgs) -> anyhow::Result<Loaded> {
    // Another config file is read through the same settings layer, as if it were a home's.
    let other_home;
    let home = match &source.config {
        Some(path) => {
            let flags =
                Flags { home: Some(home.dir().to_owned()), config_file: Some(path.clone()), ..Flags::default() };
            other_home = Home::new(Settings::load(&flags, &Environment::default())?);
            &other_home
        }
        None => home,
    };
    let config_path = home.settings().path.clone();
    let (config_hooks, warnings) =
        ConfigHooks::compile(&home.settings().hooks).with_context(|| format!("in {}", config_path.display()))?;
    let bundled = match &source.bundled {
        Some(path) => {
            let text = home.sensitive().read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            HookSet::parse_bundled_str(&text).with_context(|| format!("in {}", path.display()))?
        }
        None => HookSet::new(),
    };
    let merge = home.user_hooks(&bundled);
    Ok(Loaded { config_path, config_hooks, warnings, merge })
}

fn check(home: &Home, args: &CheckArgs) -> anyhow::Result<ExitCode> {
    let loaded = load(home, &args.source)?;
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

fn fire(home: &Home, args: &RunArgs) -> anyhow::Result<ExitCode> {
    let event: HookEvent = args.event.parse()?;
    let loaded = load(home, &args.source)?;
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
