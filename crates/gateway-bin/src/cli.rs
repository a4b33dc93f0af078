//! Command-line surface of `cairn`, parsed with clap.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

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
    Guard(GuardCommand),
    /// Hooks: check the effective hook set, run the hooks of one event.
    #[command(subcommand)]
    Hooks(crate::commands::hooks::HooksCommand),
    /// The embedding model: where it is, and downloading it.
    #[command(subcommand)]
    Model(ModelCommand),
    /// Embed JSONL rows (each with `id` and `text`); prints `{"id", "vector"}` per row.
    Embed(EmbedArgs),
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

#[derive(Debug, Subcommand)]
pub(crate) enum ModelCommand {
    /// Show where the model is resolved from and the download state (JSON).
    Status(ModelStatusArgs),
    /// Download, verify and install the default model (or re-verify the installed copy).
    Fetch,
}

#[derive(Debug, Args)]
pub(crate) struct ModelStatusArgs {
    /// Also re-hash the installed files against their sha256 pins.
    #[arg(long)]
    pub(crate) verify: bool,
}

#[derive(Debug, Args)]
pub(crate) struct EmbedArgs {
    /// Input file, one JSON object per line; `-` reads standard input.
    #[arg(long, value_name = "FILE")]
    pub(crate) jsonl: PathBuf,
    /// Model folder to use (overrides CAIRN_EMBED_MODEL_PATH and the installed model).
    #[arg(long, value_name = "DIR")]
    pub(crate) model: Option<PathBuf>,
    /// Rows per forward pass.
    #[arg(long, default_value_t = 32)]
    pub(crate) batch_size: usize,
}

#[derive(Debug, Subcommand)]
pub(crate) enum GuardCommand {
    /// Screen JSONL rows (each with a `text` field) and print one verdict per row.
    Scan(ScanArgs),
}

#[derive(Debug, Args)]
pub(crate) struct ScanArgs {
    /// What to look for.
    #[arg(long, value_enum)]
    pub(crate) kind: ScanKind,
    /// Input file, one JSON object per line; `-` reads standard input.
    #[arg(long, value_name = "FILE")]
    pub(crate) jsonl: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ScanKind {
    /// Prompt-injection screen.
    Injection,
    /// Credential and exfiltration-URL redaction.
    Secrets,
}
