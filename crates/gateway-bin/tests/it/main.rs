//! Integration tests of the `cairn` binary's public surfaces.

use std::process::Command;

mod agents;
mod auto_skills;
mod consolidation_evidence;
mod consolidation_review;
mod context;
mod context_ceiling;
mod dashboard;
mod embed;
mod guard;
mod help;
mod hooks;
mod host_gateway;
mod host_hooks;
mod import;
mod issue_42;
mod issue_42_guard;
mod issue_42_memory;
mod mcp;
mod mcp_discovery;
mod memory;
mod memory_consolidate;
mod memory_episodic;
mod memory_files;
mod memory_transfer;
mod private_spans;
mod serve;
mod serve_postgres;
mod serve_sessions;
mod serve_transfer;
mod settings;
mod skills;

pub(crate) fn cairn() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cairn"))
}

#[test]
fn version_prints_package_version() {
    let output = cairn().arg("--version").output().unwrap();
    assert!(output.status.success());
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert_eq!(stdout.trim(), format!("cairn {}", env!("CARGO_PKG_VERSION")));
}
mod agent_edits;
mod guard_evasions;
mod hardening_files;
mod hardening_server;
mod import_symlinks;
mod memory_import_refusals;
mod scopes_forget;
mod support;
