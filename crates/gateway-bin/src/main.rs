//! The `cairn` binary. Everything lives in modules; `main` only wires them.

mod cli;
mod clock;
mod commands;
mod dashboard;
mod home;
mod host;
mod instance;
mod llm;
mod locked_edit;
mod logging;
mod mcp;
mod model;
mod serve;
mod settings;
mod skills_audit;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = cli::Cli::parse();
    logging::init();
    match cli::run(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
