//! [`MemoryDb`]: the connections to `memory.db` and the transaction helpers
//! every layer writes through. `episodic.rs` is the episodic layer's face on
//! it: one-line hand-offs to [`crate::episodic::Episodic`].

mod episodic;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use cairn_embedder::EmbeddingBackend;
use parking_lot::{Mutex, RwLock};

use crate::audit::{audit_event, insert_event};
use crate::constants::{BUILTIN_PREFIXES, BUSY_TIMEOUT_MS, DB_FILE_NAME};
use crate::episodic::{EpisodicConfig, EpisodicState, Fusion, RetrievalMode};
use crate::error::{MemoryError, RefusedWrite, Rejected, Result};
use crate::snapshot::SnapshotCache;
use crate::store::sqlite::SqliteBackend;
use crate::store::{Backend, EventRecord, space_signature};
use crate::types::{MemoryAuditAction, MemoryAuditEvent, MemoryStats};

/// How hard a commit tries to reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Durability {
    /// `synchronous = NORMAL` in WAL mode: a committed write survives any
    /// crash of the process (SIGKILL included); a power cut may lose the
    /// last commits but never corrupts the file. SQLite's recommended WAL setting.
    #[default]
    Normal,
    /// `synchronous = FULL`: every commit is fsynced, so it also survives a
    /// power cut, at the price of one disk flush per write.
    Full,
}

/// Settings of a [`MemoryDb`]. The binary builds this from `config.json`.
#[derive(Debug, Clone)]
pub struct MemoryConfig {
    /// Key prefixes accepted besides `pref.`, `project.`, `user.`, `lesson.`
    /// (each must end with a dot, e.g. `team.`).
    pub extra_prefixes: Vec<String>,
    /// Commit durability.
    pub durability: Durability,
    /// How long a write waits for another process's transaction.
    pub busy_timeout: Duration,
    /// Active episodic rows kept; writes beyond it evict (10,000 by default).
    pub episodic_cap: usize,
    /// Active vectors above which the episodic vector index keeps SQ8 codes
    /// only and searches re-score its hits with the stored vectors
    /// ([`EPISODIC_FULL_VECTORS_MAX`](crate::constants::EPISODIC_FULL_VECTORS_MAX)
    /// by default): a quarter of the index's memory per row, the same cosines.
    pub episodic_full_vectors_max: usize,
    /// Retrieval mode of [`MemoryDb::episodic_context`] (hybrid by default).
    pub episodic_mode: RetrievalMode,
    /// Fusion of hybrid episodic retrieval (RRF, k 60, by default).
    pub episodic_fusion: Fusion,
    /// Weight of importance × age in hybrid episodic retrieval, 0 to 1.
    pub episodic_prior_weight: f64,
    /// Connections a PostgreSQL store keeps open at most (8 by default;
    /// 1 to 1,024); SQLite ignores it.
    pub postgres_pool_size: usize,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        Self {
            extra_prefixes: Vec::new(),
            durability: Durability::Normal,
            busy_timeout: Duration::from_millis(BUSY_TIMEOUT_MS),
            episodic_cap: crate::constants::EPISODIC_DEFAULT_CAP,
            episodic_full_vectors_max: crate::constants::EPISODIC_FULL_VECTORS_MAX,
            episodic_mode: RetrievalMode::Hybrid,
            episodic_fusion: Fusion::default(),
            episodic_prior_weight: crate::constants::HYBRID_PRIOR_WEIGHT,
            postgres_pool_size: crate::constants::POSTGRES_DEFAULT_POOL_SIZE,
        }
    }
}

impl MemoryConfig {
    /// Adds an accepted key prefix.
    pub fn with_extra_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.extra_prefixes.push(prefix.into());
        self
    }

    /// Sets the commit durability.
    pub fn with_durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }
}

/// Cairn's memory store: semantic entries, lessons, episodic rows and the
/// audit trail, shared by every thread of a process through an `Arc`.
///
/// The rows live in a backend behind the storage seam: `memory.db`
/// (SQLite, the default), PostgreSQL, or memory only. Every write
/// transaction is atomic and serialised against the other writers of the
/// same rows, in this process and others. No lock is held while text is
/// embedded: writes embed first, then lock.
pub struct MemoryDb {
    path: PathBuf,
    pub(crate) prefixes: Vec<String>,
    backend: Arc<dyn Backend>,
    /// Held by episodic writes (and index catch-ups) across their
    /// transaction and the index updates after its commit.
    episodic_lock: Mutex<()>,
    embedder: RwLock<Option<Arc<dyn EmbeddingBackend>>>,
    /// Bumped on every change of embedder; a vector computed under an older
    /// generation is never committed as current.
    space_generation: AtomicU64,
    pub(crate) snapshot: SnapshotCache,
    pub(crate) episodic: EpisodicState,
    pub(crate) episodic_config: EpisodicConfig,
}

impl Drop for MemoryDb {
    fn drop(&mut self) {
        self.write_touches();
    }
}

impl fmt::Debug for MemoryDb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryDb")
            .field("path", &self.path)
            .field("prefixes", &self.prefixes)
            .field("embedder", &self.embedder().map(|embedder| embedder.model_id().to_owned()))
            .finish_non_exhaustive()
    }
}

impl MemoryDb {
    /// Opens (creating if needed) `<home>/memory.db`, creating `home` too.
    pub fn open_in_home(home: &Path, config: MemoryConfig) -> Result<Self> {
        std::fs::create_dir_all(home).map_err(|source| MemoryError::Io {
            operation: "creating the home directory",
            path: home.to_owned(),
            source,
        })?;
        Self::open(&home.join(DB_FILE_NAME), config)
    }

    /// Opens (creating if needed) the database at `path` and migrates it.
    pub fn open(path: &Path, config: MemoryConfig) -> Result<Self> {
        let _span = tracing::debug_span!("memory_db_open", path = %path.display()).entered();
        let (prefixes, episodic_config) = validate_config(&config)?;
        let backend = SqliteBackend::open(path, config.busy_timeout, config.durability == Durability::Full)?;
        Ok(Self::assemble(path.to_owned(), prefixes, Arc::new(backend), episodic_config))
    }

    /// Opens the store in PostgreSQL at `url` (schema `cairn`, created and
    /// migrated when missing). Many processes, on many machines, may open
    /// the same store: writes are serialised across all of them, and every
    /// process catches up with the others' changes through the revision
    /// counters. `home` holds this process's own files (the Markdown
    /// layers are not in the database).
    #[cfg(feature = "postgres")]
    pub fn open_postgres(url: &str, home: &Path, config: MemoryConfig) -> Result<Self> {
        Self::open_postgres_schema(url, crate::store::postgres::DEFAULT_SCHEMA, home, config)
    }

    #[cfg(any(test, feature = "postgres"))]
    pub(crate) fn open_postgres_schema(url: &str, schema: &str, home: &Path, config: MemoryConfig) -> Result<Self> {
        let _span = tracing::debug_span!("memory_db_open", backend = "postgres").entered();
        let backend = crate::store::postgres::PostgresBackend::open(url, schema, config.postgres_pool_size)?;
        Self::open_on(home.join(DB_FILE_NAME), Arc::new(backend), &config)
    }

    /// Opens a store held in memory only (gone with the process), behind
    /// the same seam as SQLite and PostgreSQL: for tests of code built on
    /// this crate (feature `in-memory`). It writes no file: no index
    /// snapshot, no Markdown layer.
    #[cfg(any(test, feature = "in-memory"))]
    pub fn open_in_memory(config: MemoryConfig) -> Result<Self> {
        let backend = Arc::new(crate::store::memory::MemoryBackend::default());
        Self::open_on(PathBuf::new(), backend, &config)
    }

    /// A store on `backend`, `path` being where its `memory.db` would be.
    #[cfg(any(test, feature = "postgres", feature = "in-memory"))]
    fn open_on(path: PathBuf, backend: Arc<dyn Backend>, config: &MemoryConfig) -> Result<Self> {
        let (prefixes, episodic_config) = validate_config(config)?;
        Ok(Self::assemble(path, prefixes, backend, episodic_config))
    }

    /// A store on `backend` with empty caches and no embedder yet.
    fn assemble(
        path: PathBuf,
        prefixes: Vec<String>,
        backend: Arc<dyn Backend>,
        episodic_config: EpisodicConfig,
    ) -> Self {
        Self {
            path,
            prefixes,
            backend,
            episodic_lock: Mutex::new(()),
            embedder: RwLock::new(None),
            space_generation: AtomicU64::new(1),
            snapshot: SnapshotCache::default(),
            episodic: EpisodicState::default(),
            episodic_config,
        }
    }

    /// What the integrity check at open reported when `memory.db` is
    /// damaged (writes are then refused), or `None` when it passed.
    pub fn damage(&self) -> Option<&[String]> {
        self.backend.damage()
    }

    pub(crate) fn refuse_when_damaged(&self) -> Result<()> {
        match self.damage() {
            None => Ok(()),
            Some(problems) => Err(MemoryError::damaged(&self.path, problems)),
        }
    }

    /// Uses `embedder` to compute vectors on write and for queries. Entries
    /// written while it is not ready get their vector from
    /// [`backfill_vectors`](Self::backfill_vectors).
    pub fn with_embedder(self, embedder: Arc<dyn EmbeddingBackend>) -> Self {
        self.set_embedder(Some(embedder));
        self
    }

    /// The configured embedder, if any.
    pub fn embedder(&self) -> Option<Arc<dyn EmbeddingBackend>> {
        self.embedder.read().clone()
    }

    /// The configured embedder and its space generation, read together.
    pub(crate) fn embedder_with_generation(&self) -> (Option<Arc<dyn EmbeddingBackend>>, u64) {
        let embedder = self.embedder.read();
        (embedder.clone(), self.space_generation.load(Ordering::SeqCst))
    }

    /// The current space generation.
    pub(crate) fn space_generation(&self) -> u64 {
        self.space_generation.load(Ordering::SeqCst)
    }

    /// Replaces the embedder and bumps the space generation, so vectors
    /// being computed by the previous one are stored as missing instead.
    pub(crate) fn set_embedder(&self, embedder: Option<Arc<dyn EmbeddingBackend>>) -> u64 {
        let mut slot = self.embedder.write();
        *slot = embedder;
        self.space_generation.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Path of the database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The accepted key prefixes.
    pub fn prefixes(&self) -> &[String] {
        &self.prefixes
    }

    /// The vector space of the configured embedder (`<model id>#<dim>`).
    pub(crate) fn space(&self) -> Option<String> {
        self.embedder().map(|embedder| space_signature(&*embedder))
    }

    /// Embeds `text` when an embedder is configured and ready; a failure or a
    /// not-ready model means "no vector now", never a failed write.
    pub(crate) fn try_embed(&self, text: &str) -> Option<(Vec<f32>, String)> {
        let embedder = self.embedder()?;
        if !embedder.is_ready() {
            tracing::debug!(model = embedder.model_id(), "embedder not ready; writing without a vector");
            return None;
        }
        match embedder.embed(text) {
            Ok(vector) if vector.len() == embedder.dim() => Some((vector, space_signature(&*embedder))),
            Ok(vector) => {
                tracing::warn!(got = vector.len(), expected = embedder.dim(), "embedder returned a wrong-sized vector");
                None
            }
            Err(error) => {
                tracing::debug!(%error, "embedding failed; writing without a vector");
                None
            }
        }
    }

    /// The episodic lock: held across an episodic write's transaction and
    /// the index updates after its commit, and by index catch-ups.
    pub(crate) fn lock_episodic(&self) -> parking_lot::MutexGuard<'_, ()> {
        self.episodic_lock.lock()
    }

    /// The episodic lock if no other thread holds it.
    pub(crate) fn try_lock_episodic(&self) -> Option<parking_lot::MutexGuard<'_, ()>> {
        self.episodic_lock.try_lock()
    }

    /// What a background thread reads this store through: the backend,
    /// whose every transaction runs on a connection of its own.
    pub(crate) fn background_reader(&self) -> Arc<dyn Backend> {
        Arc::clone(&self.backend)
    }

    /// Which backend holds the rows: `"sqlite"`, `"postgres"` or `"memory"`.
    pub fn backend_kind(&self) -> &'static str {
        self.backend.kind()
    }

    /// Whether the backend searches keywords itself while the in-memory
    /// keyword index is first built (SQLite's FTS5 and PostgreSQL's term
    /// table do).
    pub(crate) fn has_own_keyword_index(&self) -> bool {
        self.rows().searches_keywords()
    }

    /// The rows of this store, behind the storage seam.
    pub(crate) fn rows(&self) -> &dyn Backend {
        &*self.backend
    }

    /// Records a refused write in its own transaction and hands back the
    /// error to return.
    pub(crate) fn refuse(&self, write: RefusedWrite<'_>, rejected: Rejected) -> MemoryError {
        let RefusedWrite { memory_type, key, attempted, source, confidence } = write;
        let action = match rejected {
            Rejected::Injection { .. } => MemoryAuditAction::InjectionBlocked,
            _ => MemoryAuditAction::Rejected,
        };
        tracing::debug!(key = %crate::validate::cut(key, 100), reason = rejected.code(), "write refused");
        let snippet = crate::validate::snippet(attempted);
        let key = crate::validate::snippet(key);
        let detail = match &rejected {
            Rejected::Injection { rule } => format!("injection:{rule}"),
            other => other.code().to_owned(),
        };
        let record = EventRecord {
            memory_type,
            action,
            key: Some(&key),
            old_value: None,
            new_value: Some(&snippet),
            source: Some(source),
            confidence: confidence.filter(|c| c.is_finite()),
            detail: Some(&detail),
        };
        if let Err(error) = self.rows().write("recording a refused write", |tx| insert_event(tx, &record)) {
            // The refusal stands either way; losing its audit row is logged, not hidden.
            tracing::warn!(%error, "could not record a refused write in the audit trail");
        }
        MemoryError::Rejected(rejected)
    }

    /// The newest `limit` audit rows, newest first.
    pub fn audit(&self, limit: usize) -> Result<Vec<MemoryAuditEvent>> {
        let rows = self.rows().read("reading the audit trail", |tx| tx.newest_events(limit))?;
        rows.into_iter().map(audit_event).collect()
    }

    /// Counts of live and tombstoned rows, vectors and audit events.
    pub fn stats(&self) -> Result<MemoryStats> {
        let space = self.space();
        let (embedding_model, embedder_ready) = match &self.embedder() {
            Some(embedder) => (Some(embedder.model_id().to_owned()), embedder.is_ready()),
            None => (None, false),
        };
        let schema_version = self.backend.schema_version()?;
        self.rows().read("reading statistics", |tx| {
            let semantic = tx.semantic_counts(space.as_deref())?;
            let episodic = tx.episodic_counts(None)?;
            Ok(MemoryStats {
                semantic_live: semantic.live,
                semantic_deleted: semantic.deleted,
                lessons: semantic.lessons,
                semantic_missing_vectors: semantic.missing_vectors,
                episodic_live: episodic.live,
                episodic_deleted: episodic.deleted,
                audit_events: tx.event_count()?,
                schema_version,
                embedding_model,
                embedder_ready,
            })
        })
    }

    /// Runs the backend's integrity check (SQLite's `PRAGMA
    /// integrity_check`) and returns its report (`["ok"]` when sound).
    pub fn integrity_check(&self) -> Result<Vec<String>> {
        self.backend.integrity_check()
    }
}

/// The accepted prefixes and the episodic settings of `config`, validated.
fn validate_config(config: &MemoryConfig) -> Result<(Vec<String>, EpisodicConfig)> {
    let mut prefixes: Vec<String> = BUILTIN_PREFIXES.iter().map(|prefix| (*prefix).to_owned()).collect();
    for prefix in &config.extra_prefixes {
        let body = prefix.strip_suffix('.').unwrap_or("");
        let valid = !body.is_empty()
            && body.as_bytes()[0].is_ascii_lowercase()
            && body.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'.');
        if !valid {
            return Err(MemoryError::InvalidConfig(format!(
                "extra prefix {prefix:?} must be lower-case letters, digits, '_' or '.', ending with '.'"
            )));
        }
        if !prefixes.contains(prefix) {
            prefixes.push(prefix.clone());
        }
    }
    if config.episodic_cap == 0 {
        return Err(MemoryError::InvalidConfig("episodic_cap must be at least 1".to_owned()));
    }
    if !(1..=1024).contains(&config.postgres_pool_size) {
        return Err(MemoryError::InvalidConfig("postgres_pool_size must be from 1 to 1024".to_owned()));
    }
    if !(0.0..=1.0).contains(&config.episodic_prior_weight) {
        return Err(MemoryError::InvalidConfig("episodic_prior_weight must be between 0 and 1".to_owned()));
    }
    let valid_fusion = match config.episodic_fusion {
        Fusion::Rrf { k } => k.is_finite() && k >= 0.0,
        Fusion::Weighted { vector_weight } => (0.0..=1.0).contains(&vector_weight),
    };
    if !valid_fusion {
        return Err(MemoryError::InvalidConfig(format!("invalid episodic fusion {:?}", config.episodic_fusion)));
    }
    let episodic_config = EpisodicConfig {
        cap: config.episodic_cap,
        full_vectors_max: config.episodic_full_vectors_max,
        mode: config.episodic_mode,
        fusion: config.episodic_fusion,
        prior_weight: config.episodic_prior_weight,
        keyword_beside_rows: crate::constants::EPISODIC_KEYWORD_SEARCH_BESIDE_ROWS,
    };
    Ok((prefixes, episodic_config))
}
