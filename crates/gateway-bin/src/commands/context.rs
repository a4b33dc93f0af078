//! `cairn context preview`: the context a new session (or, with
//! `--message`, one message) would get from this home, and where every
//! character of it went.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use cairn_context::{BuiltContext, MessageRequest, RuntimeIdentity, SessionRequest, Surface, resolve_model_window};
use cairn_memory_core::constants;
use clap::{Args, Subcommand};
use serde_json::json;

use crate::home::{ContextParts, Home, SkillSources};

/// The context builder.
#[derive(Debug, Subcommand)]
pub(crate) enum ContextCommand {
    /// Print the assembled context and its per-section breakdown.
    Preview(PreviewArgs),
}

#[derive(Debug, Args)]
pub(crate) struct PreviewArgs {
    /// Text memory is ranked against; with --message, the message itself.
    #[arg(long, default_value = "")]
    query: String,
    /// Model id whose context window scales the budget (unknown or `auto`:
    /// the 1M-token reference window).
    #[arg(long, value_name = "ID")]
    model: Option<String>,
    /// Agent whose prompt and steering files are included.
    #[arg(long, value_name = "NAME")]
    agent: Option<String>,
    /// Preview the first message's context instead of the session's.
    #[arg(long)]
    message: bool,
    /// The user agents directory (default `~/.kiro/agents`).
    #[arg(long, value_name = "DIR")]
    agents_dir: Option<PathBuf>,
    /// A project checkout: its skills, agents and steering.
    #[arg(long, value_name = "DIR")]
    project: Option<PathBuf>,
    /// Print the build as JSON (text, caps, sections, notices).
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(home: &Home, command: &ContextCommand) -> anyhow::Result<ExitCode> {
    match command {
        ContextCommand::Preview(args) => preview(home, args),
    }
}

fn preview(home: &Home, args: &PreviewArgs) -> anyhow::Result<ExitCode> {
    let mut notices = Vec::new();
    // A preview only reads: it creates nothing in a home that lacks a part.
    let database = if home.dir().join(constants::DB_FILE_NAME).exists() {
        match home.open_memory() {
            Ok(database) => Some(Arc::new(database)),
            Err(error) => {
                notices
                    .push(format!("memory.db unavailable ({error:#}): no semantic memory; lessons from lessons.jsonl"));
                None
            }
        }
    } else {
        None
    };
    let files =
        if home.dir().join(cairn_memory_core::MEMORY_DIR).is_dir() { Some(Arc::new(home.open_files()?)) } else { None };
    let sources = SkillSources { project: args.project.clone(), record_usage: false, ..SkillSources::default() };
    let skills = Arc::new(home.skills(&sources));
    let (hooks, warnings) = home.config_hooks()?;
    notices.extend(warnings);
    let builder = home.context_builder(ContextParts {
        memory: database,
        files,
        skills: Some(skills),
        hooks: Some(Arc::new(hooks)),
    });
    let agent = match &args.agent {
        Some(name) => Some(home.agent_context(name, args.agents_dir.as_deref(), args.project.as_deref())?),
        None => None,
    };

    let window = args.model.as_deref().and_then(resolve_model_window);
    let mut runtime = RuntimeIdentity::new(Surface::Cli);
    runtime.agent = args.agent.clone();
    runtime.model = args.model.clone();
    runtime.window_tokens = window;
    runtime.workspace = args.project.clone();
    runtime.date = Some(jiff::ZonedDateTime::now().date().to_string());

    // The memory of the checkout's project (or the working directory's) and the global memory.
    let dir = match &args.project {
        Some(dir) => std::path::absolute(dir)?,
        None => std::env::current_dir()?,
    };
    let scopes = cairn_memory_core::ScopeFilter::visible_from(
        cairn_memory_core::project_of(&dir, home.settings().project_rule).as_ref(),
    );
    let mut built = if args.message {
        builder.build_message(&MessageRequest {
            model_window: window,
            message: &args.query,
            first_in_session: true,
            interactive: true,
            runtime: Some(&runtime),
            preview: true,
            agent: agent.as_ref(),
            scopes: Some(&scopes),
            ..Default::default()
        })
    } else {
        builder.build_session_context(&SessionRequest {
            model_window: window,
            query: &args.query,
            agent: agent.as_ref(),
            runtime: Some(&runtime),
            scopes: Some(&scopes),
            ..Default::default()
        })
    };
    notices.append(&mut built.notices);
    built.notices = notices;
    print(&built, window, args.json);
    Ok(ExitCode::SUCCESS)
}

fn print(built: &BuiltContext, window: Option<u64>, json: bool) {
    if json {
        let mut value = serde_json::to_value(built).expect("a built context serialises");
        value["model_window"] = json!(window);
        value["total_chars"] = json!(built.total_chars());
        println!("{value}");
        return;
    }
    if let Some(reply) = &built.auto_reply {
        println!("(auto-reply from hook pattern {:?}; the agent would not run)\n{}", reply.pattern, reply.reply);
        return;
    }
    println!("{}", built.text);
    let window =
        window.map_or_else(|| "reference window (1,000,000 tokens)".to_owned(), |tokens| format!("{tokens} tokens"));
    println!("\n--- breakdown: {window}");
    print!("{}", built.render_breakdown());
    for notice in &built.notices {
        println!("note: {notice}");
    }
}
