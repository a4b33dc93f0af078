//! `cairn serve`: the long-running local gateway. It serves the memory,
//! skills and agents APIs over HTTP (token-protected, loopback by default),
//! runs the heartbeat, brings the embedding model in without blocking a
//! request, and on SIGINT/SIGTERM stops accepting, finishes in-flight work,
//! flushes the skills ledger and checkpoints the WAL before exiting 0.

pub(crate) mod auth;
pub(crate) mod config;
pub(crate) mod error;
pub(crate) mod heartbeat;
pub(crate) mod llm;
pub(crate) mod model;
pub(crate) mod pool;
mod routes;
pub(crate) mod sessions;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use cairn_agent_spec::{AgentDirs, Pins};
use cairn_embedder::EmbeddingBackend;
use cairn_embedder::manager::{ManagerConfig, ModelManager, ModelSource};
use cairn_guard::SensitivePaths;
use cairn_memory_core::{MemoryConfig, MemoryDb, MemoryFiles};
use cairn_skills::{Catalog, SkillsConfig};
use parking_lot::RwLock;
use tokio::sync::watch;

use self::auth::ApiToken;
use self::config::{GatewayConfig, MemorySettings, Overrides};
use self::heartbeat::{HeartbeatStatus, Job};
use self::llm::LlmClient;
use self::model::ModelLifecycle;
use self::pool::{EmbedPool, PoolError};
use self::sessions::Consolidation;
use crate::cli::Cli;

/// Vectors the backfill job computes per heartbeat tick.
const BACKFILL_BATCH: usize = 256;
/// Heartbeat ticks between rebuilds of the Markdown keyword index.
const FTS_REBUILD_TICKS: u64 = 15;
/// Heartbeat ticks between history prunes (a day of 60 s ticks).
const PRUNE_TICKS: u64 = 1440;
/// Heartbeat ticks between writes of the episodic index snapshot (each
/// write happens only when the episodic table changed).
const INDEX_SNAPSHOT_TICKS: u64 = 10;
/// How long shutdown waits for blocking work still running.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// `cairn serve` flags. Each may also come from the environment variable
/// shown; both win over `config.json`.
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// Address to listen on (default 127.0.0.1; others need --allow-non-loopback).
    #[arg(long, env = "CAIRN_SERVE_HOST", value_name = "IP")]
    pub(crate) host: Option<IpAddr>,
    /// Port to listen on; 0 picks a free one (see --port-file).
    #[arg(long, env = "CAIRN_SERVE_PORT")]
    pub(crate) port: Option<u16>,
    /// Allow listening on an address other than loopback.
    #[arg(long)]
    pub(crate) allow_non_loopback: bool,
    /// Write the bound `ip:port` to this file once listening.
    #[arg(long, value_name = "FILE")]
    pub(crate) port_file: Option<PathBuf>,
    /// Heartbeat period in seconds (default 60).
    #[arg(long, env = "CAIRN_HEARTBEAT_SECS", value_name = "SECS")]
    pub(crate) heartbeat_secs: Option<u64>,
    /// Embedding model folder (wins over config.json and the installed model).
    #[arg(long, env = "CAIRN_EMBED_MODEL_PATH", value_name = "DIR")]
    pub(crate) model_path: Option<PathBuf>,
    /// Mirror URL of the default model's archive (its sha256 pin still applies).
    #[arg(long, env = "CAIRN_EMBED_MODEL_URL", value_name = "URL")]
    pub(crate) model_url: Option<String>,
    /// Never download the embedding model.
    #[arg(
        long = "no-model-download",
        env = "CAIRN_SKIP_MODEL_DOWNLOAD",
        action = clap::ArgAction::SetTrue,
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub(crate) skip_download: bool,
    #[command(flatten)]
    pub(crate) llm: LlmArgs,
}

/// The OpenAI-compatible endpoint used for consolidation; flags win over
/// the environment, which wins over `llm` in config.json.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct LlmArgs {
    /// OpenAI-compatible API base URL (e.g. http://127.0.0.1:11434/v1).
    #[arg(long, env = "CAIRN_LLM_BASE_URL", value_name = "URL")]
    pub(crate) llm_base_url: Option<String>,
    /// Chat model name.
    #[arg(long, env = "CAIRN_LLM_MODEL", value_name = "NAME")]
    pub(crate) llm_model: Option<String>,
    /// API key sent as a bearer token.
    #[arg(long, env = "CAIRN_LLM_API_KEY", hide_env_values = true, value_name = "KEY")]
    pub(crate) llm_api_key: Option<String>,
}

/// Where agent specs are read and how duplicates resolve.
pub(crate) struct AgentsHandle {
    pub(crate) dirs: AgentDirs,
    pub(crate) project_dir: Option<PathBuf>,
    pub(crate) pins: Pins,
    pub(crate) sensitive: SensitivePaths,
    pub(crate) skills_root: PathBuf,
    pub(crate) write_lock: tokio::sync::Mutex<()>,
}

/// Everything a handler can reach.
pub(crate) struct AppState {
    /// The Cairn home (memory, state and import ledger live here).
    pub(crate) home: PathBuf,
    pub(crate) config_path: PathBuf,
    pub(crate) token: ApiToken,
    pub(crate) memory: Arc<MemoryDb>,
    pub(crate) files: Arc<MemoryFiles>,
    pub(crate) skills: Arc<Catalog>,
    pub(crate) agents: AgentsHandle,
    pub(crate) model: Arc<ModelLifecycle>,
    /// The model folder came from the command line or the environment.
    pub(crate) model_env_override: bool,
    /// A model change is running.
    pub(crate) swap_in_flight: Arc<std::sync::atomic::AtomicBool>,
    pub(crate) pool: Arc<EmbedPool>,
    pub(crate) settings: Arc<RwLock<MemorySettings>>,
    pub(crate) settings_write: tokio::sync::Mutex<()>,
    pub(crate) heartbeat: HeartbeatStatus,
    pub(crate) llm: Option<LlmClient>,
    /// Session transcripts and the Consolidator; `None` without an LLM.
    pub(crate) consolidation: Option<Arc<Consolidation>>,
    /// One migration or import at a time.
    pub(crate) transfer_lock: Arc<tokio::sync::Mutex<()>>,
    pub(crate) config_warnings: Vec<String>,
    pub(crate) started: Instant,
}

fn overrides(args: &ServeArgs) -> Overrides {
    Overrides {
        host: args.host,
        port: args.port,
        allow_non_loopback: args.allow_non_loopback,
        heartbeat_secs: args.heartbeat_secs,
        model_path: args.model_path.clone(),
        model_url: args.model_url.clone().filter(|url| !url.trim().is_empty()),
        skip_download: args.skip_download,
        llm_base_url: args.llm.llm_base_url.clone().filter(|url| !url.trim().is_empty()),
        llm_model: args.llm.llm_model.clone().filter(|model| !model.trim().is_empty()),
        llm_api_key: args.llm.llm_api_key.clone().filter(|key| !key.trim().is_empty()),
    }
}

fn manager_config(home: &std::path::Path, args: &ServeArgs, config: &GatewayConfig) -> ManagerConfig {
    let mut source = ModelSource::default_model();
    if let Some(url) = &config.embedding.model_url {
        source = source.with_mirror_url(url.clone());
    }
    let (explicit, configured) = match &args.model_path {
        Some(path) => (Some(path.clone()), None),
        None => (None, config.embedding.model_path.clone()),
    };
    ManagerConfig::new(home.join("models"))
        .explicit_path(explicit)
        .configured_path(configured)
        .source(source)
        .skip_download(config.embedding.skip_download)
}

/// `cairn serve`.
pub(crate) fn run(cli: &Cli, args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let home = cli.home_dir();
    std::fs::create_dir_all(&home).with_context(|| format!("creating {}", home.display()))?;
    let config = GatewayConfig::load(&home, &overrides(args))?;
    for warning in &config.warnings {
        tracing::warn!("{warning}");
    }
    let address = SocketAddr::new(config.server.host, config.server.port);
    if !address.ip().is_loopback() && !config.server.allow_non_loopback {
        anyhow::bail!(
            "refusing to listen on {address}: it is not a loopback address; pass --allow-non-loopback \
             (or set server.allow_non_loopback in config.json) to expose the API to the network"
        );
    }
    let (token, token_path) = ApiToken::load_or_create(&home)?;

    let lifecycle = Arc::new(ModelLifecycle::new(ModelManager::new(manager_config(&home, args, &config))));
    let memory_config = MemoryConfig { extra_prefixes: config.extra_prefixes.clone(), ..MemoryConfig::default() };
    let embedder: Arc<dyn EmbeddingBackend> = lifecycle.embedder();
    let memory = Arc::new(
        MemoryDb::open_in_home(&home, memory_config)
            .with_context(|| format!("opening the memory database in {}", home.display()))?
            .with_embedder(embedder),
    );
    let files = Arc::new(
        MemoryFiles::open(&home).with_context(|| format!("opening the Markdown memory in {}", home.display()))?,
    );
    let mut skills_config = SkillsConfig::new(&home);
    skills_config.max_triggered = config.skills.max_triggered;
    skills_config.lazy_load = config.skills.lazy_load;
    skills_config.extra_paths = config.skills.extra_paths.clone();
    skills_config.project_dir = config.agent.project_dir.clone();
    let skills_root = skills_config.owned_dir();
    let skills = Arc::new(Catalog::open(skills_config));

    let agents_dir = match &config.agent.agents_dir {
        Some(dir) => dir.clone(),
        None => {
            dirs::home_dir().context("no home directory; set agent.agents_dir in config.json")?.join(".kiro/agents")
        }
    };
    let mut agent_dirs = AgentDirs::user(agents_dir);
    if let Some(project) = &config.agent.project_dir {
        agent_dirs = agent_dirs.with_project(project);
    }
    let pins: Pins = serde_json::from_value(serde_json::to_value(&config.agent.spec_pins)?)
        .context("`agent.spec_pins` in config.json must map names to file names")?;

    let pool = Arc::new(
        EmbedPool::new(config.embedding.pool_workers, config.embedding.pool_queue)
            .context("starting the embed pool threads")?,
    );
    let llm = LlmClient::from_config(&config.llm);
    let consolidation = llm.clone().map(|client| {
        let idle = sessions::idle_from_hours(config.memory.history_idle_hours);
        Arc::new(Consolidation::new(&home, Arc::clone(&memory), Arc::clone(&files), client, idle))
    });
    let heartbeat = HeartbeatStatus::default();

    let state = Arc::new(AppState {
        home: home.clone(),
        config_path: config.path.clone(),
        token,
        memory,
        files,
        skills,
        agents: AgentsHandle {
            dirs: agent_dirs,
            project_dir: config.agent.project_dir.clone(),
            pins,
            sensitive: SensitivePaths::for_current_user(),
            skills_root,
            write_lock: tokio::sync::Mutex::new(()),
        },
        model: Arc::clone(&lifecycle),
        model_env_override: args.model_path.is_some(),
        swap_in_flight: Arc::default(),
        pool: Arc::clone(&pool),
        settings: Arc::new(RwLock::new(config.memory.clone())),
        settings_write: tokio::sync::Mutex::new(()),
        heartbeat: heartbeat.clone(),
        llm,
        consolidation,
        transfer_lock: Arc::default(),
        config_warnings: config.warnings.clone(),
        started: Instant::now(),
    });
    let jobs = heartbeat_jobs(&state);

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("cairn-http")
        .build()
        .context("starting the async runtime")?;
    let max_body = usize::try_from(config.server.max_body_bytes).unwrap_or(usize::MAX);
    let period = Duration::from_secs(config.server.heartbeat_secs);
    let port_file = args.port_file.clone();
    let outcome = runtime.block_on(async {
        let listener =
            tokio::net::TcpListener::bind(address).await.with_context(|| format!("listening on {address}"))?;
        let bound = listener.local_addr().context("reading the bound address")?;
        if let Some(path) = &port_file {
            config::atomic_write(path, format!("{bound}\n").as_bytes())?;
        }
        eprintln!("cairn serve: listening on http://{bound} (token in {})", token_path.display());
        lifecycle.start();
        let (stop_tx, stop_rx) = watch::channel(false);
        let heartbeat_task = tokio::spawn(heartbeat::run(jobs, period, heartbeat, stop_rx));
        axum::serve(listener, routes::router(Arc::clone(&state), max_body))
            .with_graceful_shutdown(shutdown_signal())
            .await
            .context("serving HTTP")?;
        eprintln!("cairn serve: stopping; finishing in-flight work");
        let _ = stop_tx.send(true);
        let _ = heartbeat_task.await;
        anyhow::Ok(())
    });
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
    pool.shutdown();
    if let Err(error) = state.skills.ledger().flush() {
        tracing::warn!(%error, "could not flush the skills usage ledger");
    }
    if let Err(error) = state.memory.save_episodic_index() {
        tracing::warn!(%error, "could not save the episodic index snapshot");
    }
    let db_path = state.memory.path().to_owned();
    drop(state);
    checkpoint_wal(&db_path);
    outcome?;
    eprintln!("cairn serve: stopped");
    Ok(ExitCode::SUCCESS)
}

/// Folds the WAL back into `memory.db` so a clean stop leaves one file.
fn checkpoint_wal(path: &std::path::Path) {
    let result = rusqlite::Connection::open(path).and_then(|connection| {
        connection.busy_timeout(Duration::from_secs(5))?;
        connection.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| row.get::<_, i64>(0))
    });
    match result {
        Ok(0) => tracing::debug!("WAL checkpointed"),
        Ok(busy) => tracing::warn!(busy, "WAL checkpoint could not complete"),
        Err(error) => tracing::warn!(%error, "WAL checkpoint failed"),
    }
}

async fn shutdown_signal() {
    let interrupt = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::warn!(%error, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
}

/// The maintenance jobs this gateway runs, and the ones it records as off.
fn heartbeat_jobs(state: &Arc<AppState>) -> Vec<Job> {
    let mut jobs = Vec::new();

    let backfill_state = Arc::clone(state);
    jobs.push(Job {
        name: "embedding_backfill",
        every_ticks: 1,
        at_start: true,
        run: Arc::new(move || {
            let state = &backfill_state;
            if !state.memory.embedder().is_some_and(|embedder| embedder.is_ready()) {
                return Ok("model not ready; nothing to do".to_owned());
            }
            let stats = state.memory.stats()?;
            let missing = stats.semantic_missing_vectors;
            let memory = Arc::clone(&state.memory);
            let job = move || -> anyhow::Result<(usize, usize)> {
                let semantic = if missing > 0 { memory.backfill_vectors(BACKFILL_BATCH)? } else { 0 };
                let episodic = memory.backfill_missing_embeddings(None)?;
                Ok((semantic, episodic.embedded))
            };
            match state.pool.try_submit(job) {
                Ok(answer) => {
                    let (semantic, episodic) = answer.blocking_recv().map_err(|_| PoolError::Lost)??;
                    Ok(format!("added {semantic} semantic and {episodic} episodic vectors"))
                }
                Err(PoolError::Full { .. }) => Ok("embed pool busy; vectors wait for the next tick".to_owned()),
                Err(error) => Err(error.into()),
            }
        }),
    });

    let ledger_state = Arc::clone(state);
    jobs.push(Job {
        name: "skills_ledger_flush",
        every_ticks: 1,
        at_start: false,
        run: Arc::new(move || {
            let flushed = ledger_state.skills.ledger().maybe_flush()?;
            Ok(if flushed { "flushed".to_owned() } else { "nothing to flush".to_owned() })
        }),
    });

    match &state.consolidation {
        Some(consolidation) => {
            let idle_state = Arc::clone(state);
            let consolidation = Arc::clone(consolidation);
            jobs.push(Job {
                name: "check_idle_sessions",
                every_ticks: 1,
                at_start: false,
                run: Arc::new(move || {
                    // Read at run time, so a settings change applies to the next run.
                    let idle = sessions::idle_from_hours(idle_state.settings.read().history_idle_hours);
                    let consolidation = Arc::clone(&consolidation);
                    let now = sessions::now_ms();
                    match idle_state.pool.try_submit(move || consolidation.check_idle(now, idle)) {
                        Ok(answer) => {
                            let results = answer.blocking_recv().map_err(|_| PoolError::Lost)?;
                            sessions::describe_idle_run(&results)
                        }
                        Err(PoolError::Full { .. }) => {
                            Ok("embed pool busy; idle sessions wait for the next tick".to_owned())
                        }
                        Err(error) => Err(error.into()),
                    }
                }),
            });
        }
        None => state.heartbeat.disable(
            "check_idle_sessions",
            "no LLM configured (set llm.base_url and llm.model in config.json, or CAIRN_LLM_BASE_URL and CAIRN_LLM_MODEL)",
        ),
    }

    let index_state = Arc::clone(state);
    jobs.push(Job {
        name: "fts_rebuild",
        every_ticks: FTS_REBUILD_TICKS,
        at_start: true,
        run: Arc::new(move || {
            let report = index_state.files.rebuild_index()?;
            Ok(format!(
                "{} files indexed, {} removed, {} chunks{}",
                report.files_indexed,
                report.files_removed,
                report.chunks_written,
                if report.healed { "; a damaged index was moved aside" } else { "" }
            ))
        }),
    });

    let snapshot_state = Arc::clone(state);
    jobs.push(Job {
        name: "episodic_index_snapshot",
        every_ticks: INDEX_SNAPSHOT_TICKS,
        at_start: false,
        run: Arc::new(move || {
            Ok(if snapshot_state.memory.save_episodic_index()? {
                "saved".to_owned()
            } else {
                "up to date, small or not built; nothing to save".to_owned()
            })
        }),
    });

    let prune_state = Arc::clone(state);
    jobs.push(Job {
        name: "prune_history",
        every_ticks: PRUNE_TICKS,
        at_start: true,
        run: Arc::new(move || {
            // Read at run time, so a settings change applies to the next run.
            let keep_days = u32::try_from(prune_state.settings.read().history_max_days).unwrap_or(u32::MAX);
            let report = prune_state.files.prune_history(keep_days)?;
            Ok(format!("kept {} day files, deleted {} (keeping {keep_days} days)", report.kept, report.deleted.len()))
        }),
    });
    jobs
}
