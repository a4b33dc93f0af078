//! One module per subcommand; `run` dispatches.

pub(crate) mod agents;
pub(crate) mod context;
mod embed;
mod guard;
pub(crate) mod hooks;
pub(crate) mod memory;
pub(crate) mod memory_consolidate;
mod memory_episodic;
pub(crate) mod memory_files;
pub(crate) mod memory_transfer;
mod model;
pub(crate) mod skills;

use std::process::ExitCode;

use crate::cli::{Cli, Command, GuardCommand, ModelCommand};

pub(crate) fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match &cli.command {
        Command::Agent(command) => agents::run(&cli, command),
        Command::Guard(GuardCommand::Scan(args)) => guard::scan(args),
        Command::Hooks(command) => hooks::run(&cli, command),
        Command::Memory(command) => memory::run(&cli, command),
        Command::Context(command) => context::run(&cli, command),
        Command::Model(ModelCommand::Status(args)) => model::status(&cli, args),
        Command::Model(ModelCommand::Fetch) => model::fetch(&cli),
        Command::Embed(args) => embed::embed(&cli, args),
        Command::Skills(args) => skills::run(&cli, args),
        Command::Serve(args) => crate::serve::run(&cli, args),
    }
}
