//! `cairn mcp serve`: Cairn's memory, lessons, skills and history as MCP
//! tools over stdio, with the official Rust SDK (`rmcp`).
//!
//! Standard output carries nothing but the MCP transport; logs and
//! warnings go to standard error. The session is a thin client of the
//! home's gateway ([`proxy`]): `tools/list` is answered here, and every
//! `tools/call` runs in the gateway, through the same [`CairnMcp`] tools
//! over the gateway's stores, so its writes go through the same writers as
//! the CLI and the HTTP API (validation, injection screening, credential
//! redaction, audit), recorded with source `mcp`, and its searches use the
//! gateway's one loaded model. Many sessions share one model and one set of
//! indexes. Without a reachable gateway a session starts one, and until it
//! answers runs a call on the home's stores itself, without the model
//! (keyword recall).
//!
//! `cairn mcp serve --agent NAME` serves the agent `NAME`: `skill_search`
//! and `skill_read` see only the skills its `skill://` resources map (an
//! unmapped agent sees none), as the session context of that agent lists
//! them. The
//! agent is fixed for the server's life, on its command line, because
//! that is what a host can deliver: hosts start an MCP server from a
//! fixed command in their config (kiro-cli per agent spec), and a tool
//! argument would be chosen by the model. Without `--agent` the server is
//! the default agent's and searches the whole catalog.

pub(crate) mod discovery;
pub(crate) mod proxy;
mod stdio;
mod tools;

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use cairn_context::{AgentContext, AgentScope};
use cairn_embedder::ModelManager;
use cairn_memory_core::Scope;
use rmcp::ServiceExt as _;
use rmcp::model::{CallToolRequestParams, Implementation, ServerCapabilities, ServerConfig};

use self::proxy::{McpProxy, ToolCallAnswer};

use crate::home::{Home, SkillSources};
use crate::model::ModelLifecycle;

pub(crate) use tools::{CairnMcp, TOOL_NAMES};

/// `cairn mcp ...`
#[derive(Debug, clap::Subcommand)]
pub(crate) enum McpCommand {
    /// Serve the MCP tools over stdio (for Claude Code, kiro-cli and other MCP hosts).
    Serve(McpServeArgs),
    /// Print the tool names and their JSON input schemas (JSON).
    Tools,
    /// The MCP servers of the agent specs and mcp.json files, with where each is defined.
    List(discovery::cli::ListArgs),
    /// Start each server and run the MCP handshake (initialize, tools/list); report status and tools.
    Probe(discovery::cli::ProbeArgs),
    /// Enable a server for an agent (grant `@name`, clear its `disabled: true`).
    ///
    /// Adds `@name` to the spec's `tools` and `allowedTools` (its tools then run without asking) and
    /// removes `disabled: true` from the server's entry in the spec's `mcpServers`: kiro-cli starts no
    /// server so marked, and `mcp import` marks every server it imports.
    Enable(discovery::cli::ToggleArgs),
    /// Disable a server for an agent (remove `@name` from its `tools` and `allowedTools`).
    ///
    /// The server's entry in the spec's `mcpServers` is left as it is, `disabled` flag included:
    /// without the grants the agent has none of its tools.
    Disable(discovery::cli::ToggleArgs),
    /// Add the mcp.json servers to an agent spec's `mcpServers` (existing definitions win).
    Sync(discovery::cli::SyncArgs),
    /// Import servers from Claude Code, Hermes or OpenClaw configs into `<home>/mcp.json` (disabled).
    Import(discovery::cli::ImportArgs),
}

/// `cairn mcp serve` options.
#[derive(Debug, clap::Args)]
pub(crate) struct McpServeArgs {
    /// Serve this agent: `skill_search` and `skill_read` see only the skills its `skill://` resources map.
    #[arg(long, value_name = "NAME")]
    pub(crate) agent: Option<String>,
    /// The project whose memory the session reads beside the global memory
    /// (default: the directory the host started this server in; its git
    /// repository when it is in one).
    #[arg(long, value_name = "DIR")]
    pub(crate) project: Option<std::path::PathBuf>,
}

pub(crate) fn run(home: &Home, command: &McpCommand) -> anyhow::Result<ExitCode> {
    match command {
        McpCommand::Serve(args) => serve(home, args),
        McpCommand::Tools => {
            let mut tools = CairnMcp::tool_list();
            tools.sort_by_key(|tool| TOOL_NAMES.iter().position(|name| *name == tool.name));
            let tools: Vec<_> = tools
                .into_iter()
                .map(|tool| {
                    serde_json::json!({
                        "name": tool.name,
                        "description": tool.description,
                        "inputSchema": tool.input_schema,
                    })
                })
                .collect();
            println!("{}", serde_json::to_string_pretty(&tools)?);
            Ok(ExitCode::SUCCESS)
        }
        McpCommand::List(args) => discovery::cli::list(home, args),
        McpCommand::Probe(args) => discovery::cli::probe(home, args),
        McpCommand::Enable(args) => discovery::cli::toggle(home, args, true),
        McpCommand::Disable(args) => discovery::cli::toggle(home, args, false),
        McpCommand::Sync(args) => discovery::cli::sync(home, args),
        McpCommand::Import(args) => discovery::cli::import(home, args),
    }
}

/// The opened stores the tools work on.
pub(crate) struct McpStores {
    pub(crate) memory: Arc<cairn_memory_core::MemoryDb>,
    pub(crate) files: Arc<cairn_memory_core::MemoryFiles>,
    pub(crate) skills: Arc<cairn_skills::SkillCatalog>,
    pub(crate) model: Arc<ModelLifecycle>,
    /// Which skills `skill_search` finds: the served agent's mapping.
    pub(crate) skill_scope: AgentScope,
    /// The project the session runs in; `None` reads and writes global memory only.
    pub(crate) project: Option<cairn_memory_core::Scope>,
    /// How long a pending consolidation changeset waits for review (ms;
    /// `skills.pending_ttl_days`, the pending-skill rule).
    pub(crate) review_ttl_ms: i64,
}

impl McpStores {
    /// Opens the home's stores without the model: recall is keyword-only.
    pub(crate) fn open_without_model(home: &Home) -> anyhow::Result<Self> {
        home.ensure_dir()?;
        let manager = ModelManager::new(home.model_manager_config().skip_download(true));
        let model = Arc::new(ModelLifecycle::new(manager));
        let memory = Arc::new(home.open_memory()?);
        let files = Arc::new(home.open_files()?);
        let skills = Arc::new(home.skills(&SkillSources { record_usage: true, ..SkillSources::default() }));
        let review_ttl_ms = home.settings().skills.auto.pending_ttl_ms();
        Ok(Self { memory, files, skills, model, skill_scope: AgentScope::default(), project: None, review_ttl_ms })
    }
}

/// What the server says of itself at `initialize`.
pub(crate) fn server_info() -> ServerConfig {
    ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
        .with_server_info(Implementation::new("cairn", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "Cairn is the user's long-term memory. Search it with memory_search before answering questions about \
             past work; save lessons with learn_add when the user says \"remember\" or corrects you; find skills \
             with skill_search and read them with skill_read.",
        )
}

type InProcessClient = rmcp::service::RunningService<rmcp::RoleClient, ()>;

/// What an in-process session is kept for: the served agent and the project.
type SessionKey = (Option<String>, Option<Scope>);

/// One in-process MCP session over a set of stores.
struct InProcess {
    stores: Arc<McpStores>,
    client: Arc<InProcessClient>,
}

/// MCP sessions run in this process through [`CairnMcp`] (an rmcp client
/// and server on a duplex pipe), so a tool call gets the tools' own
/// argument checks, refusals and results, exactly as a stdio session would
/// get them. One session per served agent and project is kept and reused while its
/// stores, its skill catalog and its skill scope stay the same; a change
/// (a settings reload, an edited agent spec) starts a new one.
#[derive(Default)]
pub(crate) struct InProcessSessions {
    sessions: tokio::sync::Mutex<std::collections::HashMap<SessionKey, InProcess>>,
}

impl std::fmt::Debug for InProcessSessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcessSessions").finish_non_exhaustive()
    }
}

fn failed(what: &str, error: &dyn std::fmt::Display) -> ToolCallAnswer {
    ToolCallAnswer::Error(rmcp::model::ErrorData::internal_error(format!("{what}: {error}"), None))
}

/// Whether two store sets are the same stores seen the same way.
fn same_stores(a: &McpStores, b: &McpStores) -> bool {
    Arc::ptr_eq(&a.memory, &b.memory)
        && Arc::ptr_eq(&a.files, &b.files)
        && Arc::ptr_eq(&a.skills, &b.skills)
        && Arc::ptr_eq(&a.model, &b.model)
        && a.skill_scope == b.skill_scope
        && a.project == b.project
}

async fn start_session(stores: Arc<McpStores>) -> Result<InProcessClient, ToolCallAnswer> {
    let (server_end, client_end) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        match CairnMcp::new(stores).serve(server_end).await {
            Ok(running) => {
                let _ = running.waiting().await;
            }
            Err(error) => tracing::warn!(%error, "the in-process MCP session did not start"),
        }
    });
    ().serve(client_end).await.map_err(|error| failed("starting the in-process MCP session", &error))
}

impl InProcessSessions {
    /// Runs one tool call for `agent` over `stores`.
    pub(crate) async fn call(
        &self,
        agent: Option<String>,
        stores: Arc<McpStores>,
        params: CallToolRequestParams,
    ) -> ToolCallAnswer {
        let agent = (agent, stores.project.clone());
        let client = {
            let mut sessions = self.sessions.lock().await;
            match sessions.get(&agent) {
                Some(session) if same_stores(&session.stores, &stores) => Arc::clone(&session.client),
                _ => {
                    if let Some(stale) = sessions.remove(&agent) {
                        drop(stale.client);
                    }
                    let client = match start_session(Arc::clone(&stores)).await {
                        Ok(client) => Arc::new(client),
                        Err(answer) => return answer,
                    };
                    sessions.insert(agent.clone(), InProcess { stores, client: Arc::clone(&client) });
                    client
                }
            }
        };
        match client.call_tool(params).await {
            Ok(result) => ToolCallAnswer::Result(result),
            Err(rmcp::ServiceError::McpError(error)) => ToolCallAnswer::Error(error),
            Err(error) => {
                // A session that broke is not reused.
                self.sessions.lock().await.remove(&agent);
                failed("running the tool", &error)
            }
        }
    }
}

/// The skill scope of the served agent: its `skill://` mapping, or the
/// whole catalog without `--agent`.
pub(crate) fn skill_scope(home: &Home, agent: Option<&str>) -> anyhow::Result<AgentScope> {
    let Some(name) = agent else { return Ok(AgentScope::default()) };
    let catalog = home.agents(None, None)?;
    AgentContext::resolve_scope(&catalog, name, &home.pins()?, &home.resolve_context(None))
        .with_context(|| format!("resolving --agent {name:?}"))
}

fn serve(home: &Home, args: &McpServeArgs) -> anyhow::Result<ExitCode> {
    // An unknown agent is refused at start, as before, not at the first call.
    skill_scope(home, args.agent.as_deref())?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .thread_name("cairn-mcp")
        .build()
        .context("starting the async runtime")?;
    let dir = match &args.project {
        Some(dir) => std::path::absolute(dir).with_context(|| format!("--project {}", dir.display()))?,
        None => std::env::current_dir().context("reading the working directory")?,
    };
    let project = cairn_memory_core::project_of(&dir, home.settings().project_rule);
    let proxy = McpProxy::new(home.clone(), args.agent.clone(), project);
    let local = proxy.local();
    let outcome = runtime.block_on(async move {
        let service = proxy.serve(stdio::transport()).await.context("starting the MCP session")?;
        tracing::info!("cairn mcp serve: session open");
        service.waiting().await.context("serving MCP")?;
        anyhow::Ok(())
    });
    runtime.shutdown_timeout(std::time::Duration::from_secs(5));
    if let Some(stores) = local.get() {
        if let Err(error) = stores.skills.ledger().flush() {
            tracing::warn!(%error, "could not flush the skills usage ledger");
        }
        if let Err(error) = stores.memory.save_episodic_index() {
            tracing::warn!(%error, "could not save the episodic index snapshot");
        }
    }
    outcome?;
    Ok(ExitCode::SUCCESS)
}
