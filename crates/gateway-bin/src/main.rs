//! The `cairn` binary. Everything lives in modules; `main` only wires them.

mod cli;
mod clock;
mod commands;
mod dashboard;
mod home;
mod host;
mod locked_edit;
mod logging;
mod mcp;
mod serve;
mod settings;
mod skills_audit;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = cli::Cli::parse();
    logging::init();
    match commands::run(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
