//! `cairn context preview`: the context a new session (or, with
//! `--message`, one message) would get from this home, and where every
//! character of it went.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use cairn_agent_spec::{AgentDirs, Catalog as AgentCatalog, Pins, ResolveContext};
use cairn_context::{
    AgentContext, BuiltContext, ContextBuilder, LessonLayers, MessageRequest, RuntimeIdentity, SessionRequest, Surface,
    resolve_model_window,
};
use cairn_guard::SensitivePaths;
use cairn_hooks::{ConfigHooks, HooksConfig};
use cairn_memory_core::{JsonlLessonStore, MemoryConfig, MemoryDb, MemoryFiles, constants};
use cairn_skills::{Catalog, SkillsConfig};
use clap::{Args, Subcommand};
use serde::Deserialize;
use serde_json::json;

use crate::cli::Cli;

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

pub(crate) fn run(cli: &Cli, command: &ContextCommand) -> anyhow::Result<ExitCode> {
    match command {
        ContextCommand::Preview(args) => preview(cli, args),
    }
}

#[derive(Debug, Default, Deserialize)]
struct ConfigFile {
    #[serde(default)]
    hooks: HooksConfig,
    #[serde(default)]
    skills: SkillsSection,
    #[serde(default)]
    agent: AgentSection,
}

#[derive(Debug, Default, Deserialize)]
struct SkillsSection {
    lazy_load: Option<bool>,
    max_triggered: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
struct AgentSection {
    #[serde(default)]
    spec_pins: Pins,
}

fn read_config(path: &Path) -> anyhow::Result<ConfigFile> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display())),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(ConfigFile::default()),
        Err(error) => Err(error).with_context(|| format!("reading {}", path.display())),
    }
}

fn preview(cli: &Cli, args: &PreviewArgs) -> anyhow::Result<ExitCode> {
    let home = cli.home_dir();
    let config = read_config(&home.join("config.json"))?;
    let mut notices = Vec::new();

    let database = match MemoryDb::open_in_home(&home, MemoryConfig::default()) {
        Ok(database) => Some(Arc::new(database)),
        Err(error) => {
            notices.push(format!("memory.db unavailable ({error}): no semantic memory; lessons from lessons.jsonl"));
            None
        }
    };
    let jsonl = Arc::new(JsonlLessonStore::new(home.join(constants::LESSONS_JSONL_FILE_NAME)));
    let mut builder = ContextBuilder::new().with_lessons(Arc::new(LessonLayers { database: database.clone(), jsonl }));
    if let Some(database) = &database {
        builder = builder.with_semantic(database.clone());
    }
    // Opening the Markdown layer creates its directories; a preview only
    // reads a home that already has them.
    if home.join(cairn_memory_core::MEMORY_DIR).is_dir() {
        let files = MemoryFiles::open(&home).context("opening the Markdown memory files")?;
        builder = builder.with_markdown(Arc::new(files));
    }

    let mut skills = SkillsConfig::new(&home);
    skills.project_dir = args.project.clone();
    skills.persist_usage = false;
    if let Some(lazy_load) = config.skills.lazy_load {
        skills.lazy_load = lazy_load;
    }
    if let Some(max_triggered) = config.skills.max_triggered {
        skills.max_triggered = max_triggered;
    }
    builder = builder.with_skills(Arc::new(Catalog::open(skills)));
    let (hooks, warnings) = ConfigHooks::compile(&config.hooks).context("compiling the hooks in config.json")?;
    notices.extend(warnings.into_iter().map(|warning| format!("hooks.{}: {}", warning.key, warning.message)));
    builder = builder.with_hooks(Arc::new(hooks));

    let user_home = dirs::home_dir();
    let agent = match &args.agent {
        Some(name) => {
            let user_agents = match &args.agents_dir {
                Some(dir) => dir.clone(),
                None => user_home.clone().context("no home directory; pass --agents-dir")?.join(".kiro/agents"),
            };
            let mut dirs = AgentDirs::user(user_agents);
            let mut context = ResolveContext::new(user_home.clone())
                .with_env(std::env::vars())
                .with_sensitive(SensitivePaths::for_current_user());
            if let Some(project) = &args.project {
                dirs = dirs.with_project(project);
                context = context.with_project_dir(project);
            }
            let catalog = AgentCatalog::load(&dirs, &SensitivePaths::for_current_user())
                .context("reading the agent spec directories")?;
            Some(AgentContext::resolve(&catalog, name, &config.agent.spec_pins, &context)?)
        }
        None => None,
    };

    let window = args.model.as_deref().and_then(resolve_model_window);
    let mut runtime = RuntimeIdentity::new(Surface::Cli);
    runtime.agent = args.agent.clone();
    runtime.model = args.model.clone();
    runtime.window_tokens = window;
    runtime.workspace = args.project.clone();
    runtime.date = Some(jiff::ZonedDateTime::now().date().to_string());

    let mut built = if args.message {
        builder.build_message(&MessageRequest {
            model_window: window,
            message: &args.query,
            first_in_session: true,
            interactive: true,
            runtime: Some(&runtime),
            ..Default::default()
        })
    } else {
        builder.build_session_context(&SessionRequest {
            model_window: window,
            query: &args.query,
            agent: agent.as_ref(),
            runtime: Some(&runtime),
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
