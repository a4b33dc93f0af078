//! `cairn serve`: the long-running local gateway. It serves the memory,
//! skills and agents APIs over HTTP (token-protected, loopback by default),
//! runs the heartbeat, brings the embedding model in without blocking a
//! request, and on SIGINT/SIGTERM stops accepting, finishes in-flight work,
//! flushes the skills ledger and checkpoints the WAL before exiting 0.

pub(crate) mod auth;
pub(crate) mod error;
mod heap;
pub(crate) mod heartbeat;
pub(crate) mod listener;
pub(crate) mod live;
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
use cairn_embedder::manager::ModelManager;
use cairn_guard::SensitivePaths;
use cairn_memory_core::{MemoryDb, MemoryFiles};
use parking_lot::RwLock;
use tokio::sync::watch;

use self::auth::ApiToken;
use self::heartbeat::{HeartbeatStatus, Job};
use self::pool::{EmbedPool, PoolError};
use self::sessions::Sessions;
use crate::home::Home;
use crate::llm::{LlmArgs, LlmClient};
use crate::model::ModelLifecycle;
use crate::settings::{Flags, MemorySettings};

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

/// `cairn serve` flags. Each wins over its environment variable, which
/// wins over `config.json` (`cairn config show` tells which applied).
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// Address to listen on (default 127.0.0.1; others need --allow-non-loopback). Env: CAIRN_SERVE_HOST.
    #[arg(long, value_name = "IP")]
    pub(crate) host: Option<IpAddr>,
    /// Port to listen on; 0 picks a free one (see --port-file). Env: CAIRN_SERVE_PORT.
    #[arg(long)]
    pub(crate) port: Option<u16>,
    /// Allow listening on an address other than loopback.
    #[arg(long)]
    pub(crate) allow_non_loopback: bool,
    /// Write the bound `ip:port` to this file once listening.
    #[arg(long, value_name = "FILE")]
    pub(crate) port_file: Option<PathBuf>,
    /// Heartbeat period in seconds (default 60). Env: CAIRN_HEARTBEAT_SECS.
    #[arg(long, value_name = "SECS")]
    pub(crate) heartbeat_secs: Option<u64>,
    /// Embedding model folder (wins over config.json and the installed model). Env: CAIRN_EMBED_MODEL_PATH.
    #[arg(long, value_name = "DIR")]
    pub(crate) model_path: Option<PathBuf>,
    /// Mirror URL of the default model's archive (its sha256 pin still applies). Env: CAIRN_EMBED_MODEL_URL.
    #[arg(long, value_name = "URL")]
    pub(crate) model_url: Option<String>,
    /// Never download the embedding model. Env: CAIRN_SKIP_MODEL_DOWNLOAD=1.
    #[arg(long = "no-model-download")]
    pub(crate) skip_download: bool,
    #[command(flatten)]
    pub(crate) llm: LlmArgs,
}

impl ServeArgs {
    /// Copies the flags that are settings into `flags`.
    pub(crate) fn apply(&self, flags: &mut Flags) {
        flags.host = self.host;
        flags.port = self.port;
        flags.allow_non_loopback = self.allow_non_loopback;
        flags.heartbeat_secs = self.heartbeat_secs;
        flags.model_path = self.model_path.clone();
        flags.model_url = self.model_url.clone();
        flags.skip_download = self.skip_download;
        self.llm.apply(flags);
    }
}

/// Where agent specs are read and how duplicates resolve.
pub(crate) struct AgentsHandle {
    pub(crate) dirs: AgentDirs,
    pub(crate) project_dir: Option<PathBuf>,
    pub(crate) pins: Pins,
    pub(crate) sensitive: SensitivePaths,
    pub(crate) skills_root: PathBuf,
    /// The user's home directory (`~` in agent specs).
    pub(crate) user_home: Option<PathBuf>,
    /// One agent-spec write at a time (kept across settings reloads).
    pub(crate) write_lock: Arc<tokio::sync::Mutex<()>>,
}

/// Everything a handler can reach.
pub(crate) struct AppState {
    /// The Cairn home (memory, state and import ledger live here).
    pub(crate) home: PathBuf,
    pub(crate) config_path: PathBuf,
    pub(crate) token: ApiToken,
    pub(crate) memory: Arc<MemoryDb>,
    pub(crate) files: Arc<MemoryFiles>,
    /// Everything built from the settings that apply without a restart
    /// (see [`live`]); read with [`AppState::live`].
    pub(crate) live: RwLock<Arc<live::Live>>,
    /// One settings reload at a time.
    pub(crate) reload_lock: parking_lot::Mutex<()>,
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
    /// Session transcripts and, with an LLM, the Consolidator.
    pub(crate) sessions: Arc<Sessions>,
    /// The MCP sessions `cairn mcp serve` clients' tool calls run in.
    pub(crate) mcp_sessions: crate::mcp::InProcessSessions,
    /// One migration or import at a time.
    pub(crate) transfer_lock: Arc<tokio::sync::Mutex<()>>,
    /// `true` once the migration run at start has finished (either way).
    pub(crate) start_migration: watch::Sender<bool>,
    pub(crate) config_warnings: Vec<String>,
    pub(crate) started: Instant,
}

/// `cairn serve`.
pub(crate) fn run(home_ctx: &Home, args: &ServeArgs) -> anyhow::Result<ExitCode> {
    home_ctx.ensure_dir()?;
    let home = home_ctx.dir().to_owned();
    let config = home_ctx.settings();
    let address = listen_address(&config.server)?;
    let instance = crate::instance::InstanceLock::acquire(&home)?;
    let (token, token_path) = ApiToken::load_or_create(&home)?;

    let state = start_state(home_ctx, token)?;
    let heartbeat = state.heartbeat.clone();
    let jobs = heartbeat_jobs(&state);
    let stop_catch_up = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let catch_up = start_catch_up(&state.memory, &stop_catch_up);

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("cairn-http")
        .build()
        .context("starting the async runtime")?;
    let limits = listener::Limits::from_settings(&config.server);
    let period = Duration::from_secs(config.server.heartbeat_secs);
    let port_file = args.port_file.clone();
    let outcome = runtime.block_on(async {
        let listener =
            tokio::net::TcpListener::bind(address).await.with_context(|| format!("listening on {address}"))?;
        let bound = listener.local_addr().context("reading the bound address")?;
        instance.record_address(bound)?;
        // Listening: an autostart that led here succeeded.
        let _ = std::fs::remove_file(home.join(crate::host::client::AUTOSTART_MARK_FILE_NAME));
        if let Some(path) = &port_file {
            crate::settings::atomic_write(path, format!("{bound}\n").as_bytes())?;
        }
        eprintln!("cairn serve: listening on http://{bound} (token in {})", token_path.display());
        state.model.start();
        let warmed = Arc::clone(&state.memory);
        tokio::task::spawn_blocking(move || load_indexes(&warmed));
        tokio::spawn(migrate_at_start(Arc::clone(&state)));
        tokio::spawn(routes::probe_at_start(Arc::clone(&state)));
        let (stop_tx, stop_rx) = watch::channel(false);
        let heartbeat_task = tokio::spawn(heartbeat::run(jobs, period, heartbeat, stop_rx.clone()));
        let config_task = tokio::spawn(live::watch_config(Arc::clone(&state), stop_rx));
        let app = routes::router(Arc::clone(&state), limits.max_body_bytes)
            .layer(axum::middleware::from_fn_with_state(limits, listener::read_body_within));
        let stop = async {
            tokio::select! {
                () = shutdown_signal() => {}
                () = home_removed(home.clone()) => {
                    eprintln!("cairn serve: the home {} was removed", home.display());
                }
            }
        };
        listener::serve(listener, app, limits, stop).await;
        eprintln!("cairn serve: stopping; finishing in-flight work");
        let _ = stop_tx.send(true);
        let _ = heartbeat_task.await;
        let _ = config_task.await;
        anyhow::Ok(())
    });
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
    stop_catch_up.store(true, std::sync::atomic::Ordering::SeqCst);
    if let Some(catch_up) = catch_up {
        let _ = catch_up.join();
    }
    state.pool.shutdown();
    save_at_stop(state);
    drop(instance);
    outcome?;
    eprintln!("cairn serve: stopped");
    Ok(ExitCode::SUCCESS)
}

/// The gateway's shared state: the model lifecycle, the stores wired to its
/// embedder, the live configuration, the embed pool and the sessions.
fn start_state(home_ctx: &Home, token: ApiToken) -> anyhow::Result<Arc<AppState>> {
    let config = home_ctx.settings();
    let lifecycle = Arc::new(ModelLifecycle::new(ModelManager::new(home_ctx.model_manager_config())));
    let embedder: Arc<dyn EmbeddingBackend> = lifecycle.embedder();
    let memory = Arc::new(home_ctx.open_memory()?.with_embedder(embedder));
    let files = Arc::new(home_ctx.open_files()?);
    let live = live::Live::build(home_ctx.clone(), &memory, &files, None)?;

    let pool = Arc::new(
        EmbedPool::new(config.embedding.pool_workers, config.embedding.pool_queue)
            .context("starting the embed pool threads")?,
    );
    let llm = LlmClient::from_config(&config.llm);
    let sessions = Arc::new(Sessions::new(
        home_ctx,
        Arc::clone(&memory),
        Arc::clone(&files),
        llm.clone(),
        Arc::clone(&live.skills),
    ));
    Ok(Arc::new(AppState {
        home: home_ctx.dir().to_owned(),
        config_path: config.path.clone(),
        token,
        memory,
        files,
        live: RwLock::new(Arc::new(live)),
        reload_lock: parking_lot::Mutex::new(()),
        model: lifecycle,
        model_env_override: config.embedding.model_path_explicit,
        swap_in_flight: Arc::default(),
        pool,
        settings: Arc::new(RwLock::new(config.memory.clone())),
        settings_write: tokio::sync::Mutex::new(()),
        heartbeat: HeartbeatStatus::default(),
        llm,
        sessions,
        mcp_sessions: crate::mcp::InProcessSessions::default(),
        transfer_lock: Arc::default(),
        start_migration: watch::Sender::new(false),
        config_warnings: config.warnings.clone(),
        started: Instant::now(),
    }))
}

/// Where the gateway listens: the configured host and port, refused when
/// the host is not loopback and the setting does not allow that.
fn listen_address(server: &crate::settings::ServerSection) -> anyhow::Result<SocketAddr> {
    let address = SocketAddr::new(server.host, server.port);
    if !address.ip().is_loopback() && !server.allow_non_loopback {
        anyhow::bail!(
            "refusing to listen on {address}: it is not a loopback address; pass --allow-non-loopback \
             (or set server.allow_non_loopback in config.json) to expose the API to the network"
        );
    }
    Ok(address)
}

/// Loads the memory indexes at start, on their own threads (searches
/// meanwhile answer from keywords), brings both in step with the table, and
/// hands the heap the loads freed back to the system.
fn load_indexes(memory: &MemoryDb) {
    if let Err(error) = memory.warm_up().and_then(|()| memory.build_episodic_index().map(drop)) {
        tracing::warn!(%error, "could not load the memory indexes at start; the first searches load them");
        return;
    }
    heap::wait_for_keyword_index(memory);
    // Loading them freed the snapshot's buffers and the texts the keyword
    // index was built from: hundreds of megabytes at a million rows, which
    // the allocator would otherwise keep.
    let released = heap::release_freed();
    tracing::debug!(released, "handed freed heap memory back after loading the memory indexes");
}

/// What a stopping gateway keeps: the skills usage ledger, the episodic
/// index snapshot, and (on SQLite, once the last handle is gone) the WAL
/// checkpointed into the database file.
fn save_at_stop(state: Arc<AppState>) {
    if let Err(error) = state.live().skills.ledger().flush() {
        tracing::warn!(%error, "could not flush the skills usage ledger");
    }
    if let Err(error) = state.memory.save_episodic_index() {
        tracing::warn!(%error, "could not save the episodic index snapshot");
    }
    let db_path = (state.memory.backend_kind() == "sqlite").then(|| state.memory.path().to_owned());
    drop(state);
    if let Some(db_path) = db_path {
        checkpoint_wal(&db_path);
    }
}

/// Migrates the home's legacy Markdown memory once, in the background, and
/// marks every home migrated (a fresh one too); on error the flag stays
/// unset and the next start retries.
async fn migrate_at_start(state: Arc<AppState>) {
    let _one_at_a_time = state.transfer_lock.lock().await;
    let memory = Arc::clone(&state.memory);
    let home = state.home.clone();
    let outcome = tokio::task::spawn_blocking(move || {
        cairn_memory_core::migrate_at_start(&memory, &home, &jiff::tz::TimeZone::system())
    })
    .await;
    match outcome {
        Ok(Ok(report)) if report.already_migrated => tracing::debug!("memory already migrated"),
        Ok(Ok(report)) => tracing::info!(
            semantic = report.counts.semantic_written,
            episodic = report.counts.episodic_written,
            lessons = report.counts.lessons_written,
            "legacy Markdown memory migrated at start"
        ),
        Ok(Err(error)) => tracing::warn!(%error, "automatic migration failed; it is retried at the next start"),
        Err(error) => tracing::warn!(%error, "automatic migration did not finish"),
    }
    state.start_migration.send_replace(true);
}

/// How long the catch-up thread waits for a change before it checks for a stop.
const CATCH_UP_POLL: Duration = Duration::from_secs(1);

/// The least rest between two catch-ups.
const CATCH_UP_MIN_REST: Duration = Duration::from_millis(100);

/// The rest after a catch-up that took `spent`: nine times as long, at
/// least [`CATCH_UP_MIN_REST`] and at most [`CATCH_UP_POLL`]. Under a
/// stream of other gateways' writes, catching up after each would keep a
/// core and the server busy (once a search has built the semantic
/// snapshot, a catch-up reads every changed fact); the changes heard during
/// a rest are caught up together after it, and a search meanwhile catches
/// up itself.
fn catch_up_rest(spent: Duration) -> Duration {
    spent.saturating_mul(9).clamp(CATCH_UP_MIN_REST, CATCH_UP_POLL)
}

/// On a store other gateways write too (PostgreSQL), a thread that wakes
/// on each change they announce and brings this gateway's indexes in step
/// at once, so searches do not pay for the catch-up. A SQLite store has no
/// announcements: readers catch up when they read.
fn start_catch_up(
    memory: &Arc<MemoryDb>,
    stop: &Arc<std::sync::atomic::AtomicBool>,
) -> Option<std::thread::JoinHandle<()>> {
    if memory.backend_kind() == "sqlite" {
        return None;
    }
    let (memory, stop) = (Arc::clone(memory), Arc::clone(stop));
    let spawned = std::thread::Builder::new().name("cairn-catch-up".to_owned()).spawn(move || {
        let mut seen = 0;
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            let heard = memory.wait_for_change(seen, CATCH_UP_POLL);
            if heard != seen {
                seen = heard;
                let started = std::time::Instant::now();
                if let Err(error) = memory.catch_up() {
                    tracing::warn!(%error, "could not catch up with the shared store; searches catch up themselves");
                }
                // Under a stream of writes, changes heard meanwhile are
                // caught up together after a rest: the thread spends at most
                // a tenth of its time catching up, whatever the write rate.
                std::thread::sleep(catch_up_rest(started.elapsed()));
            }
        }
    });
    match spawned {
        Ok(handle) => Some(handle),
        Err(error) => {
            tracing::warn!(%error, "could not start the catch-up thread; searches catch up themselves");
            None
        }
    }
}

/// Folds the WAL back into `memory.db` so a clean stop leaves one file.
fn checkpoint_wal(path: &std::path::Path) {
    match cairn_memory_core::checkpoint_wal(path) {
        Ok(true) => tracing::debug!("WAL checkpointed"),
        Ok(false) => tracing::warn!("WAL checkpoint could not complete"),
        Err(error) => tracing::warn!(%error, "WAL checkpoint failed"),
    }
}

/// How often the gateway checks that its home still exists.
const HOME_CHECK: Duration = Duration::from_secs(2);

/// Resolves once the home's instance lock file is gone (the home was
/// deleted): a gateway started for a home that no longer exists stops.
async fn home_removed(home: PathBuf) {
    let lock = home.join(crate::instance::LOCK_FILE_NAME);
    loop {
        tokio::time::sleep(HOME_CHECK).await;
        if !lock.exists() {
            return;
        }
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

/// The heartbeat's vector backfill: semantic and episodic rows without a
/// vector embedded on the pool, once the model is ready.
fn backfill_job(state: &Arc<AppState>) -> Job {
    let backfill_state = Arc::clone(state);
    Job {
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
    }
}

/// The heartbeat's consolidation of sessions idle past the setting's hours.
fn idle_sessions_job(state: &Arc<AppState>) -> Job {
    let idle_state = Arc::clone(state);
    let consolidation = Arc::clone(&state.sessions);
    Job {
        name: "check_idle_sessions",
        every_ticks: 1,
        at_start: false,
        run: Arc::new(move || {
            // Read at run time, so a settings change applies to the next run.
            let idle = sessions::idle_from_hours(idle_state.settings.read().history_idle_hours);
            let consolidation = Arc::clone(&consolidation);
            let now = crate::clock::now_ms();
            match idle_state.pool.try_submit(move || consolidation.check_idle(now, idle)) {
                Ok(answer) => {
                    let results = answer.blocking_recv().map_err(|_| PoolError::Lost)?;
                    sessions::describe_idle_run(&results)
                }
                Err(PoolError::Full { .. }) => Ok("embed pool busy; idle sessions wait for the next tick".to_owned()),
                Err(error) => Err(error.into()),
            }
        }),
    }
}

/// The maintenance jobs this gateway runs, and the ones it records as off.
fn heartbeat_jobs(state: &Arc<AppState>) -> Vec<Job> {
    let mut jobs = Vec::new();

    jobs.push(backfill_job(state));

    let touches_state = Arc::clone(state);
    jobs.push(Job {
        name: "episodic_touches",
        every_ticks: 1,
        at_start: false,
        run: Arc::new(move || {
            // Searches leave `last_accessed` waiting; an idle gateway writes it here.
            let written = touches_state.memory.write_touches();
            Ok(format!("recorded last_accessed on {written} episodes"))
        }),
    });

    let ledger_state = Arc::clone(state);
    jobs.push(Job {
        name: "skills_ledger_flush",
        every_ticks: 1,
        at_start: false,
        run: Arc::new(move || {
            let flushed = ledger_state.live().skills.ledger().maybe_flush()?;
            Ok(if flushed { "flushed".to_owned() } else { "nothing to flush".to_owned() })
        }),
    });

    match state.sessions.consolidates() {
        true => jobs.push(idle_sessions_job(state)),
        false => state.heartbeat.disable(
            "check_idle_sessions",
            "no LLM configured (set llm.base_url and llm.model in config.json, or CAIRN_LLM_BASE_URL and CAIRN_LLM_MODEL)",
        ),
    }

    jobs.push(heartbeat::auto_skills_job(state));

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
            let index = snapshot_state.memory.save_episodic_index()?;
            let vectors = snapshot_state.memory.save_episodic_vector_file()?;
            Ok(match (index, vectors) {
                (false, false) => "up to date, small or not built; nothing to save".to_owned(),
                (true, false) => "saved the index".to_owned(),
                (false, true) => "saved the vector file".to_owned(),
                (true, true) => "saved the index and its vector file".to_owned(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_catch_up_rests_nine_times_its_length_within_bounds() {
        let ms = Duration::from_millis;
        for (spent, rest) in [(ms(0), ms(100)), (ms(5), ms(100)), (ms(20), ms(180)), (ms(200), ms(1_000))] {
            assert_eq!(catch_up_rest(spent), rest, "after a catch-up of {spent:?}");
        }
    }
}
