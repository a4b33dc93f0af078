//! One module per subcommand; `run` dispatches.

mod guard;

use std::process::ExitCode;

use crate::cli::{Cli, Command, GuardCommand};

pub(crate) fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match &cli.command {
        Command::Guard(GuardCommand::Scan(args)) => guard::scan(args),
    }
}
