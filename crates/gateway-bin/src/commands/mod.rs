//! One module per subcommand; `run` resolves the settings once, opens the
//! [`Home`] and dispatches.

pub(crate) mod agents;
pub(crate) mod config;
pub(crate) mod context;
pub(crate) mod dashboard;
mod embed;
mod guard;
pub(crate) mod hooks;
pub(crate) mod host_hook;
pub(crate) mod host_install;
pub(crate) mod import;
pub(crate) mod memory;
pub(crate) mod memory_consolidate;
mod memory_episodic;
pub(crate) mod memory_files;
pub(crate) mod memory_forget;
pub(crate) mod memory_review;
pub(crate) mod memory_transfer;
mod model;
pub(crate) mod skills;

pub(crate) use memory::print_json;
pub(crate) use memory_forget::parse_time_bound;

use std::process::ExitCode;

use crate::cli::{Cli, Command, GuardCommand, ModelCommand};
use crate::home::Home;
use crate::settings::{Environment, Flags, Settings};

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
