//! `cairn mcp serve` as a thin client: the MCP session (stdio, rmcp)
//! lives in this process, and every tool call runs in the home's gateway
//! (`POST /api/mcp/tools/call`), on the gateway's stores and its one
//! loaded model. This process holds no model and no index.
//!
//! When no gateway answers, the session starts one (as a hook does) and
//! waits for it up to `host.context_deadline_ms`; if it still does not
//! answer, the call runs in this process on the home's stores opened
//! without the model (keyword recall; `memory_search` says `"mode":
//! "keyword"`), opened once and kept for the session.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ErrorData, ListToolsResult, PaginatedRequestParams,
    ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler};
use serde::{Deserialize, Serialize};
use tokio::sync::OnceCell;

use cairn_memory_core::Scope;

use super::{CairnMcp, McpStores};
use crate::home::Home;
use crate::host::client::{self, CallError, Gateway};

/// How long a tool call may take in the gateway (a search embeds its
/// query; a write may wait for the store).
const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// How often a session polls for a gateway it started.
const START_POLL: Duration = Duration::from_millis(50);

/// `POST /api/mcp/tools/call` body.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ToolCallRequest {
    /// The served agent (`--agent`), whose skills `skill_search` sees.
    #[serde(default)]
    pub(crate) agent: Option<String>,
    /// The project the session runs in (a scope name), when it has one.
    #[serde(default)]
    pub(crate) project: Option<String>,
    pub(crate) params: CallToolRequestParams,
}

/// `POST /api/mcp/tools/call` answer: the tool's result, or the protocol
/// error the MCP client should see.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ToolCallAnswer {
    Result(CallToolResult),
    Error(ErrorData),
}

/// The stdio MCP server that forwards tool calls to the gateway.
pub(crate) struct McpProxy {
    home: Home,
    agent: Option<String>,
    project: Option<Scope>,
    /// The in-process stores, opened at the first call no gateway answered.
    local: Arc<OnceCell<Arc<McpStores>>>,
    /// The session that runs calls on them.
    in_process: super::InProcessSessions,
}

impl McpProxy {
    pub(crate) fn new(home: Home, agent: Option<String>, project: Option<Scope>) -> Self {
        Self { home, agent, project, local: Arc::default(), in_process: super::InProcessSessions::default() }
    }

    /// The in-process stores, once a call needed them.
    pub(crate) fn local(&self) -> Arc<OnceCell<Arc<McpStores>>> {
        Arc::clone(&self.local)
    }

    /// Calls the gateway; `None` when no gateway answered (after starting
    /// one and waiting for it).
    async fn remote(&self, params: &CallToolRequestParams) -> Option<ToolCallAnswer> {
        let request = ToolCallRequest {
            agent: self.agent.clone(),
            project: self.project.as_ref().map(|scope| scope.as_str().to_owned()),
            params: params.clone(),
        };
        let body = serde_json::to_vec(&request).expect("JSON values serialise");
        let home = self.home.clone();
        let wait = Duration::from_millis(self.home.settings().host.context_deadline_ms);
        let outcome = tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            let mut started_one = false;
            loop {
                if let Some(gateway) = Gateway::find(home.dir()) {
                    match gateway.post("/api/mcp/tools/call", &body, CALL_TIMEOUT) {
                        Ok(bytes) => return serde_json::from_slice::<ToolCallAnswer>(&bytes).ok(),
                        Err(CallError::Absent) => {}
                        Err(error) => {
                            tracing::warn!(%error, "the gateway did not run the tool; running it here");
                            return None;
                        }
                    }
                }
                if !started_one {
                    started_one = true;
                    if let Err(error) = client::autostart(&home) {
                        tracing::warn!(error = %format!("{error:#}"), "could not start the home's gateway");
                    }
                }
                if started.elapsed() >= wait || (started.elapsed() > START_POLL * 4 && !client::is_running(home.dir()))
                {
                    return None;
                }
                std::thread::sleep(START_POLL);
            }
        })
        .await;
        outcome.ok().flatten()
    }

    async fn local_stores(&self) -> Result<Arc<McpStores>, ErrorData> {
        let home = self.home.clone();
        let agent = self.agent.clone();
        let project = self.project.clone();
        self.local
            .get_or_try_init(|| async move {
                tokio::task::spawn_blocking(move || -> anyhow::Result<Arc<McpStores>> {
                    let skill_scope = super::skill_scope(&home, agent.as_deref())?;
                    Ok(Arc::new(McpStores { skill_scope, project, ..McpStores::open_without_model(&home)? }))
                })
                .await
                .map_err(|error| anyhow::anyhow!("opening the stores failed: {error}"))?
            })
            .await
            .cloned()
            .map_err(|error| ErrorData::internal_error(format!("{error:#}"), None))
    }
}

impl ServerHandler for McpProxy {
    fn get_info(&self) -> ServerConfig {
        super::server_info()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(CairnMcp::tool_list()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let answer = match self.remote(&request).await {
            Some(answer) => answer,
            None => self.in_process.call(self.agent.clone(), self.local_stores().await?, request).await,
        };
        match answer {
            ToolCallAnswer::Result(result) => Ok(result.into()),
            ToolCallAnswer::Error(error) => Err(error),
        }
    }
}
