//! Command-line surface of `cairn`, parsed with clap, and the dispatch:
//! [`run`] resolves the settings once, opens the [`Home`] and hands the
//! subcommand to its module.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::commands::guard::GuardCommand;
use crate::commands::model::ModelCommand;
use crate::commands::{
    agents, config, context, dashboard, embed, guard, hooks, host_hook, host_install, import, memory, model, skills,
};
use crate::home::Home;
use crate::settings::{Environment, Flags, Settings};

/// Cairn: long-term memory, skills, hooks and context for AI agent hosts.
#[derive(Debug, Parser)]
#[command(name = "cairn", version, about, long_about = None)]
pub(crate) struct Cli {
    /// Cairn's data home (memory, skills, models, config.json).
    /// Defaults to $CAIRN_HOME, else `<data dir>/cairn`.
    #[arg(long, global = true, value_name = "DIR")]
    pub(crate) home: Option<PathBuf>,

    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Agent spec files: list, show, pin, check; what one becomes on a backend: project, export.
    #[command(subcommand)]
    Agent(crate::commands::agents::AgentCommand),
    /// Text and path safety checks.
    #[command(subcommand)]
    Guard(crate::commands::guard::GuardCommand),
    /// Hooks: check the effective hook set, run the hooks of one event.
    #[command(subcommand)]
    Hooks(crate::commands::hooks::HooksCommand),
    /// The embedding model: where it is, and downloading it.
    #[command(subcommand)]
    Model(crate::commands::model::ModelCommand),
    /// Embed JSONL rows (each with `id` and `text`); prints `{"id", "vector"}` per row.
    Embed(crate::commands::embed::EmbedArgs),
    /// The skill catalog: list, show, search, create, delete, seed, lint, set-inject, match; generated
    /// candidates and refinements: pending, approve, reject, archive, restore; the trail: audit.
    Skills(crate::commands::skills::SkillsArgs),
    /// Long-term memory: semantic facts, lessons, episodic fragments, Markdown files, the audit trail, stats.
    #[command(subcommand)]
    Memory(crate::commands::memory::MemoryCommand),
    /// Run the local gateway: HTTP API, heartbeat, embedding model in the background.
    Serve(crate::serve::ServeArgs),
    /// The context builder: what a session or message would get, section by section.
    #[command(subcommand)]
    Context(crate::commands::context::ContextCommand),
    /// Settings: every effective value and where it came from; change one.
    #[command(subcommand)]
    Config(crate::commands::config::ConfigCommand),
    /// MCP: Cairn's own server over stdio (`serve`, `tools`); the servers in agent specs and mcp.json files:
    /// list, probe, enable, disable, sync, import.
    #[command(subcommand)]
    Mcp(crate::mcp::McpCommand),
    /// A host's lifecycle hook: read its hook JSON on stdin, answer in its protocol.
    Hook(crate::commands::host_hook::HookArgs),
    /// Add Cairn's MCP server and hooks to Claude Code or kiro-cli config (or remove them).
    #[command(subcommand)]
    Host(crate::commands::host_install::HostCommand),
    /// Bring memory over from Claude Code, Hermes and OpenClaw files (`scan` is the dry run of `apply`).
    #[command(subcommand)]
    Import(crate::commands::import::ImportCommand),
    /// Print (or --open) the address of the running server's dashboard page, token in the fragment.
    Dashboard(crate::commands::dashboard::DashboardArgs),
}

/// The flags of this invocation that are settings.
fn flags(cli: &Cli) -> Flags {
    let mut flags = Flags { home: cli.home.clone(), ..Flags::default() };
    match &cli.command {
        Command::Serve(args) => args.apply(&mut flags),
        Command::Embed(args) => flags.model_path = args.model.clone(),
        Command::Memory(memory::MemoryCommand::Consolidate(args)) => args.llm.apply(&mut flags),
        _ => {}
    }
    flags
}

pub(crate) fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    if let Command::Guard(GuardCommand::Scan(args)) = &cli.command {
        return guard::scan(args);
    }
    let settings = Settings::load(&flags(&cli), &Environment::capture())?;
    // `config show` reports the warnings itself.
    if !matches!(cli.command, Command::Config(_)) {
        settings.warn();
    }
    let home = Home::new(settings);
    match &cli.command {
        Command::Agent(command) => agents::run(&home, command),
        Command::Guard(GuardCommand::Scan(args)) => guard::scan(args),
        Command::Hooks(command) => hooks::run(&home, command),
        Command::Memory(command) => memory::run(&home, command),
        Command::Context(command) => context::run(&home, command),
        Command::Config(command) => config::run(&home, command),
        Command::Model(ModelCommand::Status(args)) => model::status(&home, args),
        Command::Model(ModelCommand::Fetch) => model::fetch(&home),
        Command::Embed(args) => embed::embed(&home, args),
        Command::Skills(args) => skills::run(&home, args),
        Command::Serve(args) => crate::serve::run(&home, args),
        Command::Mcp(command) => crate::mcp::run(&home, command),
        Command::Hook(args) => host_hook::run(&home, args),
        Command::Host(command) => host_install::run(&home, command),
        Command::Import(command) => import::run(&home, command),
        Command::Dashboard(args) => dashboard::run(&home, args),
    }
}
