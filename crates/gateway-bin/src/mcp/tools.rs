//! The MCP tools. Names are a contract: the context builder's prompt texts
//! name them (`learn_remove`, `skill_search`, ...).
//!
//! Every tool answers with structured content. A refused write is a tool
//! error (`isError: true`) whose structured content is
//! `{"code", "message"}` with the store's typed reason (`Rejected::code`);
//! arguments that break the declared input schema (a wrong type, a missing
//! field, an unknown field, a value out of range, an oversized string) are
//! a tool error with code `invalid_arguments`, so a model can correct the
//! call instead of meeting an opaque protocol failure.

use std::path::Path;
use std::sync::Arc;

use cairn_memory_core::{
    DeleteOutcome, EpisodicQuery, ForgetRequest, LessonCategory, MemoryError, NewEpisode, Scope, ScopeFilter, Source,
};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult, ErrorCode, ServerConfig, Tool};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::McpStores;

/// The tools this server offers, in `tools/list` order.
pub(crate) const TOOL_NAMES: &[&str] = &[
    "memory_search",
    "memory_remember",
    "memory_forget",
    "fact_set",
    "fact_get",
    "fact_delete",
    "learn_add",
    "learn_remove",
    "learn_list",
    "skill_search",
    "skill_read",
    "history_append",
    "memory_pending_list",
    "memory_pending_show",
    "memory_pending_approve",
    "memory_pending_reject",
];

/// The audit trail's name for writes made through this server.
pub(crate) const MCP_SOURCE: &str = "mcp";
/// Longest search query.
const MAX_QUERY_CHARS: usize = 2_000;
/// Most hits a `memory_search` returns.
const MAX_SEARCH_LIMIT: u32 = 50;
/// Hits a `memory_search` returns when no limit is given.
const DEFAULT_SEARCH_LIMIT: u32 = 8;
/// Longest `memory_remember` text the schema admits (the store's own
/// rule, 10–2,000 characters after trimming, is checked by the writer).
const MAX_EPISODE_ARG_CHARS: usize = 4_000;
/// Longest semantic key the schema admits (the store checks 100).
const MAX_KEY_ARG_CHARS: usize = 200;
/// Longest lesson text (rule or negative) the schema admits.
const MAX_LESSON_ARG_CHARS: usize = 4_000;
/// Most lessons `learn_list` returns.
const MAX_LESSON_LIST: u32 = 200;
/// Longest history entry.
const MAX_HISTORY_CHARS: usize = 16_000;
/// Longest skill name.
const MAX_SKILL_NAME_CHARS: usize = 200;
/// Most bytes of a SKILL.md body `skill_read` returns.
pub(crate) const SKILL_READ_MAX_BYTES: usize = 32 * 1024;
/// Most sibling files `skill_read` lists.
const SKILL_SIBLINGS_MAX: usize = 100;
/// Deepest directory level `skill_read` lists siblings from.
const SKILL_SIBLINGS_DEPTH: usize = 4;
/// Most tags a `memory_remember` call may pass (the store keeps 10).
const MAX_TAGS_ARG: usize = 32;

fn mcp_source() -> Source {
    Source::Other(MCP_SOURCE.to_owned())
}

/// Why a tool call did not succeed.
#[derive(Debug)]
enum Failure {
    /// The call's arguments break the declared schema.
    Arguments(String),
    /// A memory rule refused it (typed reason).
    Refused { code: String, message: String },
    /// Something the caller cannot fix (a store fault).
    Fault(String),
}

impl Failure {
    fn into_result(self) -> CallToolResult {
        let (code, message) = match self {
            Failure::Arguments(message) => ("invalid_arguments".to_owned(), message),
            Failure::Refused { code, message } => (code, message),
            Failure::Fault(message) => ("internal_error".to_owned(), message),
        };
        CallToolResult::structured_error(json!({"code": code, "message": message}))
    }
}

impl From<MemoryError> for Failure {
    fn from(error: MemoryError) -> Self {
        match error.rejection() {
            Some(rejected) => Failure::Refused { code: rejected.code().to_owned(), message: rejected.to_string() },
            None => Failure::Fault(cairn_guard::redact_all(&error.to_string()).into_owned()),
        }
    }
}

impl From<cairn_memory_core::Rejected> for Failure {
    fn from(rejected: cairn_memory_core::Rejected) -> Self {
        Failure::Refused { code: rejected.code().to_owned(), message: rejected.to_string() }
    }
}

type ToolOutcome = Result<Value, Failure>;

fn check_chars(field: &str, text: &str, max: usize) -> Result<(), Failure> {
    let chars = text.chars().count();
    if chars > max {
        return Err(Failure::Arguments(format!("`{field}` is {chars} characters long; the limit is {max}")));
    }
    Ok(())
}

fn check_not_blank(field: &str, text: &str) -> Result<(), Failure> {
    if text.trim().is_empty() {
        return Err(Failure::Arguments(format!("`{field}` must not be empty")));
    }
    Ok(())
}

fn check_range(field: &str, value: Option<u32>, min: u32, max: u32) -> Result<(), Failure> {
    match value {
        Some(value) if !(min..=max).contains(&value) => {
            Err(Failure::Arguments(format!("`{field}` must be {min} to {max} (got {value})")))
        }
        _ => Ok(()),
    }
}

fn check_unit(field: &str, value: Option<f64>) -> Result<(), Failure> {
    match value {
        Some(value) if !(0.0..=1.0).contains(&value) => {
            Err(Failure::Arguments(format!("`{field}` must be a number from 0 to 1 (got {value})")))
        }
        _ => Ok(()),
    }
}

/// `memory_search` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchArgs {
    /// What to look for, in natural language.
    #[schemars(length(min = 1, max = 2000))]
    query: String,
    /// Most hits to return (1 to 50, default 8).
    #[schemars(range(min = 1, max = 50))]
    limit: Option<u32>,
    /// Search every project's memory, not only this project's and the global memory.
    all_projects: Option<bool>,
}

/// Where a write goes.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ScopeArg {
    /// The session's project (global when the session has none).
    Project,
    /// Global memory, seen from every project.
    Global,
}

/// Which memory a forget reaches.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ForgetScopeArg {
    /// This project's memory and the global memory (the default).
    Visible,
    /// This project's memory only: with nothing else given, all of it.
    Project,
    /// The global memory only.
    Global,
    /// Every project's memory.
    All,
}

/// `memory_forget` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ForgetArgs {
    /// Episodic ids (from `memory_search`).
    #[schemars(length(max = 1000))]
    ids: Option<Vec<i64>>,
    /// Fact or lesson keys (from `memory_search`, `fact_get` or `learn_list`).
    #[schemars(length(max = 1000))]
    keys: Option<Vec<String>>,
    /// Forget everything whose text contains this (case and spacing ignored).
    #[schemars(length(max = 2000))]
    query: Option<String>,
    /// Only items written at or after this time (`YYYY-MM-DD` or RFC 3339).
    since: Option<String>,
    /// Only items written before this time (`YYYY-MM-DD` or RFC 3339).
    until: Option<String>,
    /// Which memory it reaches (default `visible`: this project's and the global memory).
    scope: Option<ForgetScopeArg>,
    /// Forget for real. Without it the call only lists what would go.
    confirm: Option<bool>,
}

/// `memory_remember` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RememberArgs {
    /// The fragment to remember (10 to 2,000 characters).
    #[schemars(length(min = 1, max = 4000))]
    text: String,
    /// How much it matters, 0 to 1 (default 0.5).
    #[schemars(range(min = 0.0, max = 1.0))]
    importance: Option<f64>,
    /// Tags (lower case letters, digits, `_.:-`; at most 10 are kept).
    #[schemars(length(max = 32))]
    tags: Option<Vec<String>>,
    /// `project` (default: the session's project) or `global`.
    scope: Option<ScopeArg>,
}

/// `fact_set` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct FactSetArgs {
    /// The key under an allowed prefix, e.g. `pref.editor` or `project.cairn.language`.
    #[schemars(length(min = 1, max = 200))]
    key: String,
    /// The value: any JSON (at most 4,096 bytes when compact).
    value: Value,
    /// How sure the writer is, 0 to 1 (default 1).
    #[schemars(range(min = 0.0, max = 1.0))]
    confidence: Option<f64>,
    /// `project` or `global` (default: the project for a `project.` key, global otherwise).
    scope: Option<ScopeArg>,
}

/// `fact_get` / `fact_delete` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct KeyArgs {
    /// The key, e.g. `pref.editor`.
    #[schemars(length(min = 1, max = 200))]
    key: String,
}

/// `learn_add` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LearnAddArgs {
    /// What to do from now on ("always run the linter before committing").
    #[schemars(length(min = 1, max = 4000))]
    rule: String,
    /// What not to do instead, if the user said so.
    #[schemars(length(max = 4000))]
    not: Option<String>,
    /// `tool`, `preference` (default) or `knowledge`.
    category: Option<LessonCategoryArg>,
}

/// Lesson categories.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum LessonCategoryArg {
    /// How to use a tool.
    Tool,
    /// How the user likes things done.
    Preference,
    /// A fact about the world or the project.
    Knowledge,
}

impl LessonCategoryArg {
    fn name(self) -> &'static str {
        match self {
            Self::Tool => "tool",
            Self::Preference => "preference",
            Self::Knowledge => "knowledge",
        }
    }
}

/// `learn_remove` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LearnRemoveArgs {
    /// The lesson's `lesson.<hash>` key (from `learn_list` or `learn_add`).
    #[schemars(length(min = 1, max = 200))]
    key: String,
}

/// `learn_list` arguments.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LearnListArgs {
    /// Most lessons to return, newest first (1 to 200, default 50).
    #[schemars(range(min = 1, max = 200))]
    limit: Option<u32>,
}

/// `skill_search` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SkillSearchArgs {
    /// Words to look for in skill names and descriptions (bodies only when nothing matches).
    #[schemars(length(min = 1, max = 2000))]
    query: String,
    /// Most hits (1 to 50, default 10).
    #[schemars(range(min = 1, max = 50))]
    limit: Option<u32>,
}

/// `skill_read` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SkillReadArgs {
    /// The skill's catalog name (as `skill_search` lists it).
    #[schemars(length(min = 1, max = 200))]
    name: String,
}

/// `history_append` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct HistoryAppendArgs {
    /// The entry for today's history file (Markdown).
    #[schemars(length(min = 1, max = 16000))]
    text: String,
}

/// `memory_pending_list` arguments (none).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PendingListArgs {}

/// `memory_pending_show` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ChangesetArgs {
    /// The changeset's id (from `memory_pending_list`).
    id: i64,
}

/// `memory_pending_approve` / `memory_pending_reject` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ChangesetDecisionArgs {
    /// The changeset's id (from `memory_pending_list`).
    id: i64,
    /// Only these rows (numbered from 1); all pending rows when absent.
    #[schemars(length(max = 1000))]
    rows: Option<Vec<usize>>,
}

/// The MCP server over one home's stores.
#[derive(Clone)]
pub(crate) struct CairnMcp {
    stores: Arc<McpStores>,
    tool_router: ToolRouter<Self>,
}

impl std::fmt::Debug for CairnMcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CairnMcp").finish_non_exhaustive()
    }
}

/// The answer to a delete: its outcome, the key, and whether a row went.
fn deletion(outcome: DeleteOutcome, key: &str) -> Value {
    json!({"outcome": outcome, "key": key, "deleted": outcome == DeleteOutcome::Deleted})
}

fn redacted(text: &str) -> String {
    cairn_guard::redact_all(text).into_owned()
}

impl CairnMcp {
    /// Runs `work` on the stores off the async threads (SQLite and file
    /// work never run on the executor) and shapes its answer.
    async fn with_stores(
        &self,
        work: impl FnOnce(&McpStores) -> ToolOutcome + Send + 'static,
    ) -> Result<CallToolResult, ErrorData> {
        let stores = Arc::clone(&self.stores);
        let outcome = tokio::task::spawn_blocking(move || work(&stores))
            .await
            .unwrap_or_else(|error| Err(Failure::Fault(format!("the tool task failed: {error}"))));
        Ok(match outcome {
            Ok(value) => CallToolResult::structured(value),
            Err(failure) => failure.into_result(),
        })
    }
}

#[tool_router]
impl CairnMcp {
    pub(crate) fn new(stores: Arc<McpStores>) -> Self {
        Self { stores, tool_router: Self::tool_router() }
    }

    /// The declared tools (names, descriptions, input schemas).
    pub(crate) fn tool_list() -> Vec<Tool> {
        Self::tool_router().list_all()
    }

    #[tool(
        description = "Search long-term memory: conversation fragments (episodic, hybrid keyword + vector ranking) and \
                       semantic facts. Each hit has id, kind (`episodic` or `semantic`), text (credentials redacted), \
                       score with its parts, and created_at (Unix ms)."
    )]
    async fn memory_search(&self, Parameters(args): Parameters<SearchArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_stores(move |stores| {
            check_not_blank("query", &args.query)?;
            check_chars("query", &args.query, MAX_QUERY_CHARS)?;
            check_range("limit", args.limit, 1, MAX_SEARCH_LIMIT)?;
            let limit = args.limit.unwrap_or(DEFAULT_SEARCH_LIMIT) as usize;
            let ready = stores.memory.embedder().is_some_and(|embedder| embedder.is_ready());
            let scopes = if args.all_projects == Some(true) {
                ScopeFilter::All
            } else {
                ScopeFilter::visible_from(stores.project.as_ref())
            };
            let query = EpisodicQuery::new(args.query.as_str()).limit(limit).scopes(scopes.clone());
            let episodic = stores.memory.search_episodic(&query)?;
            let semantic = stores.memory.search_semantic_in(&args.query, limit, &scopes)?;
            let episodic: Vec<Value> = episodic
                .into_iter()
                .map(|hit| {
                    json!({
                        "id": hit.id,
                        "kind": "episodic",
                        "scope": hit.scope,
                        "text": redacted(&hit.text),
                        "tags": hit.tags,
                        "score": hit.score.score,
                        "parts": hit.score,
                        "created_at": hit.created_at,
                    })
                })
                .collect();
            let mut semantic_hits = Vec::with_capacity(semantic.len());
            for hit in semantic {
                let created_at = stores.memory.get_semantic_in(&hit.scope, &hit.key)?.map(|entry| entry.created_at);
                let value = match &hit.value {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                semantic_hits.push(json!({
                    "id": hit.key,
                    "kind": "semantic",
                    "scope": hit.scope,
                    "text": redacted(&format!("{}: {value}", hit.key)),
                    "score": hit.score,
                    "parts": {"keyword": hit.keyword_score, "vector": hit.vector_score},
                    "created_at": created_at,
                }));
            }
            // The two rankings' scores are on different scales: interleave
            // by rank (episodic first at equal rank), then cut to `limit`.
            let mut hits = Vec::with_capacity(limit);
            let (mut episodic, mut semantic) = (episodic.into_iter(), semantic_hits.into_iter());
            while hits.len() < limit {
                let (a, b) = (episodic.next(), semantic.next());
                if a.is_none() && b.is_none() {
                    break;
                }
                hits.extend(a);
                if hits.len() < limit {
                    hits.extend(b);
                }
            }
            Ok(json!({"mode": if ready { "hybrid" } else { "keyword" }, "model": stores.model.phase(), "hits": hits}))
        })
        .await
    }

    #[tool(
        description = "Remember one conversation fragment in episodic memory (10 to 2,000 characters). Near-duplicates \
                       of stored fragments are reported, not stored twice."
    )]
    async fn memory_remember(&self, Parameters(args): Parameters<RememberArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_stores(move |stores| {
            check_chars("text", &args.text, MAX_EPISODE_ARG_CHARS)?;
            check_unit("importance", args.importance)?;
            let scope = match args.scope {
                Some(ScopeArg::Global) => Scope::Global,
                _ => stores.project.clone().unwrap_or_default(),
            };
            let mut episode = NewEpisode::new(args.text).source(mcp_source()).scope(scope);
            if let Some(importance) = args.importance {
                episode = episode.importance(importance);
            }
            if let Some(tags) = args.tags {
                if tags.len() > MAX_TAGS_ARG {
                    return Err(Failure::Arguments(format!(
                        "`tags` has {} items; the limit is {MAX_TAGS_ARG}",
                        tags.len()
                    )));
                }
                episode = episode.tags(tags);
            }
            Ok(serde_json::to_value(stores.memory.write_episodic(&episode)?).unwrap_or(Value::Null))
        })
        .await
    }

    #[tool(
        description = "Forget memory for good: episodic fragments, facts, lessons, transcript messages and daily-history \
                       entries, by ids or keys, by text (`query`), by date (`since`, `until`) or a whole project \
                       (`scope: project`). Without `confirm: true` it only lists exactly what would go, with counts per \
                       layer; with it, the same items are removed and a later write of the same text is refused."
    )]
    async fn memory_forget(&self, Parameters(args): Parameters<ForgetArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_stores(move |stores| {
            let ids = args.ids.unwrap_or_default();
            let keys = args.keys.unwrap_or_default();
            for key in &keys {
                check_chars("keys", key, MAX_KEY_ARG_CHARS)?;
            }
            if let Some(query) = &args.query {
                check_chars("query", query, MAX_QUERY_CHARS)?;
            }
            let time = |field: &str, text: Option<&str>| -> Result<Option<i64>, Failure> {
                text.map(|text| {
                    crate::commands::parse_time_bound(text)
                        .map_err(|error| Failure::Arguments(format!("`{field}`: {error}")))
                })
                .transpose()
            };
            let project = stores.project.clone();
            let scopes = match args.scope.unwrap_or(ForgetScopeArg::Visible) {
                ForgetScopeArg::Visible => ScopeFilter::visible_from(project.as_ref()),
                ForgetScopeArg::Project => match project {
                    Some(project) => ScopeFilter::Only(project),
                    None => {
                        return Err(Failure::Arguments("this session runs in no project; use `scope: global`".into()));
                    }
                },
                ForgetScopeArg::Global => ScopeFilter::Only(Scope::Global),
                ForgetScopeArg::All => ScopeFilter::All,
            };
            let request = ForgetRequest {
                episode_ids: ids,
                keys,
                query: args.query,
                from: time("since", args.since.as_deref())?,
                until: time("until", args.until.as_deref())?,
                scopes,
                dry_run: args.confirm != Some(true),
                source: mcp_source(),
            };
            let report = cairn_memory_core::forget_memory(&stores.memory, &stores.files, &request)?;
            Ok(serde_json::to_value(report).unwrap_or(Value::Null))
        })
        .await
    }

    #[tool(
        description = "Set a semantic fact (a key under an allowed prefix such as `pref.`, `project.` or `user.`, and a \
                       JSON value). An existing value written by the user, or with higher confidence, is kept and the \
                       write is reported as skipped."
    )]
    async fn fact_set(&self, Parameters(args): Parameters<FactSetArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_stores(move |stores| {
            check_chars("key", &args.key, MAX_KEY_ARG_CHARS)?;
            check_unit("confidence", args.confidence)?;
            let confidence = args.confidence.unwrap_or(1.0);
            let scope = match args.scope {
                Some(ScopeArg::Global) => Scope::Global,
                Some(ScopeArg::Project) => stores.project.clone().unwrap_or_default(),
                None => Scope::for_fact(&args.key, stores.project.as_ref()),
            };
            let outcome = stores.memory.write_semantic_in(&scope, &args.key, &args.value, confidence, mcp_source())?;
            Ok(serde_json::to_value(outcome).unwrap_or(Value::Null))
        })
        .await
    }

    #[tool(description = "Read the live value of a semantic fact; `found: false` when there is none.")]
    async fn fact_get(&self, Parameters(args): Parameters<KeyArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_stores(move |stores| {
            check_chars("key", &args.key, MAX_KEY_ARG_CHARS)?;
            let scopes = ScopeFilter::visible_from(stores.project.as_ref());
            Ok(match stores.memory.find_semantic(&scopes, &args.key)? {
                Some(entry) => json!({"found": true, "entry": entry}),
                None => json!({"found": false, "key": args.key}),
            })
        })
        .await
    }

    #[tool(description = "Delete a semantic fact (kept as a tombstone in the audit trail).")]
    async fn fact_delete(&self, Parameters(args): Parameters<KeyArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_stores(move |stores| {
            check_chars("key", &args.key, MAX_KEY_ARG_CHARS)?;
            // The row this session reads under the key: its project's, else the global one.
            let scopes = ScopeFilter::visible_from(stores.project.as_ref());
            let scope = stores.memory.find_semantic(&scopes, &args.key)?.map(|entry| entry.scope).unwrap_or_default();
            let outcome = stores.memory.delete_semantic_in(&scope, &args.key, mcp_source())?;
            Ok(deletion(outcome, &args.key))
        })
        .await
    }

    #[tool(
        description = "Teach a lesson when the user says \"remember X\", \"always do Y\" or corrects you. Duplicates of \
                       a stored lesson are reported; overlapping older lessons are replaced and listed."
    )]
    async fn learn_add(&self, Parameters(args): Parameters<LearnAddArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_stores(move |stores| {
            check_chars("rule", &args.rule, MAX_LESSON_ARG_CHARS)?;
            if let Some(not) = &args.not {
                check_chars("not", not, MAX_LESSON_ARG_CHARS)?;
            }
            let category: LessonCategory = args.category.unwrap_or(LessonCategoryArg::Preference).name().parse()?;
            let outcome = stores.memory.write_lesson(&args.rule, args.not.as_deref(), category, mcp_source())?;
            Ok(serde_json::to_value(outcome).unwrap_or(Value::Null))
        })
        .await
    }

    #[tool(description = "Remove a lesson the user no longer wants, by its `lesson.<hash>` key.")]
    async fn learn_remove(&self, Parameters(args): Parameters<LearnRemoveArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_stores(move |stores| {
            check_chars("key", &args.key, MAX_KEY_ARG_CHARS)?;
            let outcome = stores.memory.delete_lesson(&args.key, mcp_source())?;
            Ok(deletion(outcome, &args.key))
        })
        .await
    }

    #[tool(description = "List the stored lessons, newest first.")]
    async fn learn_list(&self, Parameters(args): Parameters<LearnListArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_stores(move |stores| {
            check_range("limit", args.limit, 1, MAX_LESSON_LIST)?;
            let limit = args.limit.map_or(cairn_memory_core::constants::MAX_LESSONS_IN_CONTEXT, |limit| limit as usize);
            let lessons: Vec<Value> = stores
                .memory
                .get_lessons(limit)?
                .into_iter()
                .map(|lesson| {
                    json!({
                        "key": lesson.key,
                        "text": redacted(&lesson.text()),
                        "rule": redacted(&lesson.rule),
                        "not": lesson.not.as_deref().map(redacted),
                        "category": lesson.category,
                        "source": lesson.source,
                        "updated_at": lesson.updated_at,
                        "evidence": lesson.evidence.as_ref().map(|evidence| json!({
                            "session_key": evidence.session_key,
                            "from_message": evidence.from_message,
                            "to_message": evidence.to_message,
                            "quote": redacted(&evidence.quote),
                        })),
                    })
                })
                .collect();
            Ok(json!({"count": lessons.len(), "lessons": lessons}))
        })
        .await
    }

    #[tool(description = "Find locally installed skills by name and description (bodies are searched only when no \
                       metadata matches); a server started for an agent finds only that agent's skills. Read one \
                       with skill_read.")]
    async fn skill_search(&self, Parameters(args): Parameters<SkillSearchArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_stores(move |stores| {
            check_not_blank("query", &args.query)?;
            check_chars("query", &args.query, MAX_QUERY_CHARS)?;
            check_range("limit", args.limit, 1, cairn_skills::constants::SEARCH_MAX_LIMIT as u32)?;
            let limit = args.limit.unwrap_or(10) as usize;
            // The served agent's catalog: searched at the ceiling, then
            // narrowed to its mapping, so a scoped search still fills `limit`.
            let scope = &stores.skill_scope;
            let hits: Vec<Value> = stores
                .skills
                .search(&args.query, if scope.custom { cairn_skills::constants::SEARCH_MAX_LIMIT } else { limit })
                .into_iter()
                .filter(|hit| scope.allows_skill(&hit.path, hit.path.parent().unwrap_or(&hit.path)))
                .take(limit)
                .map(|hit| {
                    json!({
                        "name": hit.name,
                        "description": redacted(&hit.description),
                        "path": hit.path,
                        "matched_in": hit.matched_in,
                        "score": hit.score,
                    })
                })
                .collect();
            Ok(json!({"count": hits.len(), "hits": hits}))
        })
        .await
    }

    #[tool(
        description = "Read one locally installed skill: its SKILL.md body (at most 32 KiB, credentials redacted) and \
                       the other files in its directory; a server started for an agent reads only that agent's skills."
    )]
    async fn skill_read(&self, Parameters(args): Parameters<SkillReadArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_stores(move |stores| {
            check_chars("name", &args.name, MAX_SKILL_NAME_CHARS)?;
            let Some(skill) = stores.skills.get(&args.name) else {
                return Err(Failure::Refused {
                    code: "skill_not_found".to_owned(),
                    message: format!("no installed skill is called {:?}; find one with skill_search", args.name),
                });
            };
            if !stores.skill_scope.allows_skill(&skill.path, &skill.dir) {
                return Err(Failure::Refused {
                    code: "skill_not_mapped".to_owned(),
                    message: format!(
                        "{:?} is not one of this agent's skills (its skill:// resources); find them with skill_search",
                        args.name
                    ),
                });
            }
            let body = skill.body().trim();
            if let Some(finding) = cairn_guard::screen(body) {
                return Err(Failure::Refused {
                    code: "skill_withheld".to_owned(),
                    message: format!(
                        "the body of {:?} was withheld: the injection screen flagged it (rule {})",
                        skill.name, finding.rule
                    ),
                });
            }
            let body = redacted(body);
            let cut = body.floor_char_boundary(SKILL_READ_MAX_BYTES);
            let truncated = cut < body.len();
            let siblings = sibling_files(&skill.dir, &skill.path);
            stores.skills.ledger().record_deliveries([skill.name.as_str()]);
            if let Err(error) = stores.skills.ledger().flush() {
                tracing::warn!(%error, "could not flush the skills usage ledger");
            }
            Ok(json!({
                "name": skill.name,
                "description": redacted(skill.description()),
                "path": skill.path,
                "body": &body[..cut],
                "truncated": truncated,
                "size_bytes": skill.size_bytes,
                "files": siblings,
            }))
        })
        .await
    }

    #[tool(description = "List the consolidation changesets waiting for review (`memory.write_approval`): each run's \
                       proposed facts, lessons, episodes and Markdown changes, none written until approved.")]
    async fn memory_pending_list(
        &self,
        Parameters(PendingListArgs {}): Parameters<PendingListArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        self.with_stores(move |stores| {
            let now = crate::clock::now_ms();
            let pending: Vec<cairn_memory_core::ConsolidationRun> = stores
                .memory
                .consolidation_runs(now, stores.review_ttl_ms)?
                .into_iter()
                .filter(|run| run.state == cairn_memory_core::RunState::Pending)
                .collect();
            Ok(json!({"pending": pending}))
        })
        .await
    }

    #[tool(
        description = "Show one consolidation changeset: every row with its conflict-ladder and screen outcome, its \
                       evidence (session, message range, quote) and its status."
    )]
    async fn memory_pending_show(
        &self,
        Parameters(args): Parameters<ChangesetArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        self.with_stores(move |stores| {
            let now = crate::clock::now_ms();
            let run = stores.memory.consolidation_run(args.id, now, stores.review_ttl_ms)?;
            Ok(serde_json::to_value(run).unwrap_or(Value::Null))
        })
        .await
    }

    #[tool(
        description = "Approve a consolidation changeset, whole or the given `rows`: each row is written now through \
                       the normal writers (screen, conflict ladder and forgotten items decide again)."
    )]
    async fn memory_pending_approve(
        &self,
        Parameters(args): Parameters<ChangesetDecisionArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        self.with_stores(move |stores| {
            let now = crate::clock::now_ms();
            let run = cairn_memory_core::approve_changeset(
                &stores.memory,
                &stores.files,
                args.id,
                args.rows.as_deref(),
                now,
                stores.review_ttl_ms,
            )?;
            Ok(serde_json::to_value(run).unwrap_or(Value::Null))
        })
        .await
    }

    #[tool(description = "Reject a consolidation changeset, whole or the given `rows`: nothing of them is written.")]
    async fn memory_pending_reject(
        &self,
        Parameters(args): Parameters<ChangesetDecisionArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        self.with_stores(move |stores| {
            let now = crate::clock::now_ms();
            let run = cairn_memory_core::reject_changeset(
                &stores.memory,
                args.id,
                args.rows.as_deref(),
                now,
                stores.review_ttl_ms,
            )?;
            Ok(serde_json::to_value(run).unwrap_or(Value::Null))
        })
        .await
    }

    #[tool(
        description = "Append one entry to today's history file (Markdown memory), as the session's project's entry \
                       when it runs in one. Credentials are redacted; text the injection screen flags is refused."
    )]
    async fn history_append(
        &self,
        Parameters(args): Parameters<HistoryAppendArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        self.with_stores(move |stores| {
            check_chars("text", &args.text, MAX_HISTORY_CHARS)?;
            // A session in a project writes that project's entry (shown to its readers only).
            let scope = stores.project.clone().unwrap_or_default();
            let appended = stores.files.append_history_in(&scope, &args.text)?;
            Ok(serde_json::to_value(appended).unwrap_or(Value::Null))
        })
        .await
    }
}

/// The files of a skill directory other than its SKILL.md, relative,
/// sorted, bounded; symbolic links are neither followed nor listed.
fn sibling_files(dir: &Path, skill_file: &Path) -> Value {
    let mut files = Vec::new();
    let mut more = false;
    let mut stack = vec![(dir.to_owned(), 0usize)];
    while let Some((current, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&current) else { continue };
        let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
        entries.sort_by_key(|entry| entry.file_name());
        for entry in entries {
            let Ok(kind) = entry.file_type() else { continue };
            let path = entry.path();
            if kind.is_symlink() || path == skill_file {
                continue;
            }
            let name = entry.file_name();
            if name.to_string_lossy().starts_with('.') {
                continue;
            }
            if kind.is_dir() {
                if depth + 1 < SKILL_SIBLINGS_DEPTH {
                    stack.push((path, depth + 1));
                }
            } else if kind.is_file() {
                if files.len() >= SKILL_SIBLINGS_MAX {
                    more = true;
                    continue;
                }
                if let Ok(relative) = path.strip_prefix(dir) {
                    files.push(relative.to_string_lossy().into_owned());
                }
            }
        }
    }
    files.sort();
    json!({"list": files, "more": more})
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for CairnMcp {
    fn get_info(&self) -> ServerConfig {
        super::server_info()
    }

    /// Routes a call; arguments that do not fit the declared schema come
    /// back as a tool error the model can read, not a protocol error.
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if self.tool_router.get(&request.name).is_none() {
            return Err(ErrorData::invalid_params(format!("unknown tool {:?}", request.name), None));
        }
        let call = ToolCallContext::new(self, request, context);
        match self.tool_router.call(call).await {
            // rmcp answers arguments that do not deserialise with an
            // unstructured tool error; give it the same shape as every
            // other refusal.
            Ok(CallToolResponse::Complete(result))
                if result.is_error == Some(true) && result.structured_content.is_none() =>
            {
                let message: Vec<String> =
                    result.content.iter().filter_map(|block| block.as_text().map(|text| text.text.clone())).collect();
                Ok(Failure::Arguments(message.join("\n")).into_result().into())
            }
            Err(error) if error.code == ErrorCode::INVALID_PARAMS => {
                Ok(Failure::Arguments(error.message.into_owned()).into_result().into())
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_router_declares_exactly_the_contract_names() {
        let mut declared: Vec<String> = CairnMcp::tool_list().into_iter().map(|tool| tool.name.into_owned()).collect();
        declared.sort();
        let mut expected: Vec<String> = TOOL_NAMES.iter().map(|name| (*name).to_owned()).collect();
        expected.sort();
        assert_eq!(declared, expected);
    }

    /// Tool names the prompt texts point the model at ("... with learn_remove").
    fn named_tools(text: &str) -> Vec<String> {
        text.match_indices("with ")
            .filter_map(|(at, _)| {
                let rest = &text[at + 5..];
                let word: String = rest.chars().take_while(|ch| ch.is_ascii_lowercase() || *ch == '_').collect();
                word.contains('_').then_some(word)
            })
            .collect()
    }

    #[test]
    fn the_context_texts_name_only_tools_that_exist() {
        let sources = [include_str!("../../../context/src/builder.rs"), include_str!("../../../skills/src/session.rs")];
        let named: Vec<String> = sources.iter().flat_map(|text| named_tools(text)).collect();
        assert!(named.iter().any(|name| name == "learn_remove"), "{named:?}");
        assert!(named.iter().any(|name| name == "skill_search"), "{named:?}");
        for name in &named {
            assert!(TOOL_NAMES.contains(&name.as_str()), "the prompt texts name {name:?}, which is not a tool");
        }
    }

    #[test]
    fn named_tools_finds_only_identifiers_after_with() {
        assert_eq!(named_tools("find them with skill_search. Or with care."), vec!["skill_search".to_owned()]);
    }
}
