//! The episodic layer's face on [`MemoryDb`]: each method hands its work to
//! [`Episodic`], the layer in [`crate::episodic`] (writing, searching, the
//! vector and keyword indexes, the context block), which reaches the
//! handle back through [`EpisodicHost`].

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use cairn_embedder::EmbeddingBackend;
use parking_lot::MutexGuard;

#[cfg(test)]
use cairn_memory_vector::AutoIndex;

use crate::db::MemoryDb;
use crate::episodic::{
    BackfillProgress, BackfillReport, Episodic, EpisodicContext, EpisodicHit, EpisodicHost, EpisodicIndexStatus,
    EpisodicOutcome, EpisodicQuery, EpisodicRecord, NewEpisode, ReembedProgress,
};
use crate::error::{MemoryError, RefusedWrite, Rejected, Result};
use crate::scope::ScopeFilter;
use crate::store::Backend;
use crate::types::DeleteOutcome;

impl MemoryDb {
    /// The episodic layer of this store.
    pub(crate) fn episodic_layer(&self) -> Episodic<'_> {
        Episodic::new(self, &self.episodic, self.episodic_config)
    }

    /// The `[Episodic Memory]` block for `query`: up to `limit` hits (8 by
    /// the specification) that pass the relevance filter, each at most
    /// 1,500 characters, the whole block at most `min(3,000, cap)`
    /// characters. Empty when nothing is admitted.
    /// Retrieval follows the store's configuration
    /// ([`crate::MemoryConfig::episodic_mode`] and the fusion settings).
    pub fn episodic_context(&self, query: &str, limit: usize, cap: usize) -> Result<String> {
        self.episodic_layer().episodic_context(query, limit, cap)
    }

    /// An [`EpisodicQuery`] for `text` with this store's configured mode,
    /// fusion and prior weight.
    pub fn episodic_query(&self, text: impl Into<String>) -> EpisodicQuery {
        self.episodic_layer().episodic_query(text)
    }

    /// [`episodic_context`](Self::episodic_context) with full search options
    /// (the relevance filter is always on), returning the admitted hits too.
    pub fn episodic_context_for(&self, query: &EpisodicQuery, cap: usize) -> Result<EpisodicContext> {
        self.episodic_layer().episodic_context_for(query, cap)
    }

    /// [`episodic_context_for`](Self::episodic_context_for) with every
    /// fragment passed through `quote` first (a prompt builder's
    /// neutraliser of structural markers, so a stored `[END CRITICAL
    /// RULES]` cannot pass for a section of the prompt).
    pub fn episodic_context_quoted(
        &self,
        query: &EpisodicQuery,
        cap: usize,
        quote: &dyn Fn(&str) -> String,
    ) -> Result<EpisodicContext> {
        self.episodic_layer().episodic_context_quoted(query, cap, quote)
    }

    #[cfg(test)]
    pub(crate) fn current_index(&self) -> Option<Arc<AutoIndex>> {
        self.episodic_layer().current_index()
    }

    /// Builds (or catches up) the episodic vector index now, waiting for a
    /// background build if one runs, and reports how it compares with the
    /// table.
    pub fn episodic_index_status(&self) -> Result<EpisodicIndexStatus> {
        self.episodic_layer().episodic_index_status()
    }

    /// Brings the index in step with the table now (building it inline,
    /// whatever its size) and returns its status. Start-up code that can
    /// afford to wait calls this; searches never need to.
    pub fn build_episodic_index(&self) -> Result<EpisodicIndexStatus> {
        self.episodic_layer().build_episodic_index()
    }

    /// Waits up to `timeout` for another process to announce a change to
    /// the store (PostgreSQL's `NOTIFY`), and answers the count of
    /// announcements so far: pass the previous answer as `seen` (0 at
    /// first). A SQLite store announces nothing; its readers catch up when
    /// they read.
    pub fn wait_for_change(&self, seen: u64, timeout: Duration) -> u64 {
        self.episodic_layer().wait_for_change(seen, timeout)
    }

    /// Brings this process's caches (the semantic snapshot once a search
    /// has built it, the keyword index and, with a ready embedder, the
    /// vector index) in step with the store now, so the next search does
    /// not have to.
    pub fn catch_up(&self) -> Result<()> {
        self.episodic_layer().catch_up()
    }

    /// Starts making the keyword and vector indexes ready without waiting
    /// (a large store's are loaded or built on background threads), so the
    /// first searches after a process starts find them ready. The vector
    /// index needs only the embedder's space, not a loaded model. A gateway
    /// calls this at start; searches never need to.
    pub fn warm_up(&self) -> Result<()> {
        self.episodic_layer().warm_up()
    }

    /// Where the episodic index snapshot of this store lives: beside
    /// `memory.db` (none for a store without a directory).
    pub fn episodic_snapshot_path(&self) -> Option<PathBuf> {
        self.episodic_layer().episodic_snapshot_path()
    }

    /// Writes the episodic index to [`episodic_snapshot_path`](Self::episodic_snapshot_path)
    /// so the next process loads it instead of building it (one file,
    /// written atomically). Only an index in step with the table and above
    /// the exact-scan crossover is written (smaller ones build in
    /// milliseconds), and only when the table moved since the last write.
    /// Answers whether a file was written.
    pub fn save_episodic_index(&self) -> Result<bool> {
        self.episodic_layer().save_episodic_index()
    }

    /// Writes the vector file beside the snapshot again when the index
    /// keeps codes only and the file is distrusted, or lacks more of its rows than
    /// [`EPISODIC_VECTOR_FILE_STALE_ROWS`](crate::constants::EPISODIC_VECTOR_FILE_STALE_ROWS) (or a fiftieth of them, if
    /// more), so searches re-score their hits from the file rather than
    /// the store; rows the old file holds are copied from it, the others
    /// read from the store. Answers whether a file was written. A long-running
    /// process calls it now and then, off the request path: at a million
    /// rows it writes 1.5 GB.
    pub fn save_episodic_vector_file(&self) -> Result<bool> {
        self.episodic_layer().save_episodic_vector_file()
    }

    /// Embeds every active row without a vector in the current space, in
    /// batches, outside any lock; each vector is stored only if the row is
    /// unchanged and the embedder was not swapped meanwhile. `progress` is
    /// called with (done, total) after each batch;
    /// [`MemoryDb::backfill_progress`] reports the same from before the
    /// first batch on.
    /// One backfill runs at a time in a store: a second call while one runs
    /// embeds nothing and answers the rows still missing.
    pub fn backfill_missing_embeddings(&self, progress: Option<&dyn Fn(usize, usize)>) -> Result<BackfillReport> {
        self.episodic_layer().backfill_missing_embeddings(progress)
    }

    /// Where the running (or last) episodic backfill with rows to embed stands.
    pub fn backfill_progress(&self) -> BackfillProgress {
        self.episodic_layer().backfill_progress()
    }

    /// Progress of the current or last model swap.
    pub fn reembed_progress(&self) -> ReembedProgress {
        self.episodic_layer().reembed_progress()
    }

    /// The embedding space every stored episodic vector was last verified in.
    pub fn recorded_episodic_space(&self) -> Result<Option<String>> {
        self.episodic_layer().recorded_episodic_space()
    }

    /// Changes the embedding model, in the specification's order: install
    /// `next` (bumping the space generation, so in-flight vectors of the old
    /// model are stored as missing), wait up to `ready_timeout` for it to
    /// load, re-embed every active row, verify none is left in another
    /// space, and only then record the new space. Any failure puts the
    /// previous model back (and with it the previous vector width) and
    /// reports [`ReembedStep::Failed`](crate::ReembedStep::Failed). Keyword search serves throughout.
    /// Only one swap runs at a time ([`MemoryError::ReembedInProgress`]).
    pub fn swap_embedding_model(
        &self,
        next: Arc<dyn EmbeddingBackend>,
        ready_timeout: Duration,
    ) -> Result<ReembedProgress> {
        self.episodic_layer().swap_embedding_model(next, ready_timeout)
    }

    #[cfg(test)]
    pub(crate) fn keyword_index_len(&self) -> Option<usize> {
        self.episodic_layer().keyword_index_len()
    }

    #[cfg(test)]
    pub(crate) fn wait_for_keyword_index(&self) {
        self.episodic_layer().wait_for_keyword_index()
    }

    /// Searches episodic memory (see [`EpisodicQuery`] for the options).
    ///
    /// The ladder: the vector index (or, while it builds, an exact scan of
    /// the stored vectors) when there is a query vector, FTS5 keywords (OR
    /// over text and tags) always in hybrid mode and alone when there is
    /// no query vector at all. Only active rows are returned. With
    /// `relevance_filter`, admission runs on the *raw* cosine before any
    /// ranking or limit (hybrid mode adds the keyword path, see
    /// [`Admission::Keyword`](crate::Admission::Keyword)). Each hit carries its [`ScoreBreakdown`](crate::ScoreBreakdown).
    pub fn search_episodic(&self, query: &EpisodicQuery) -> Result<Vec<EpisodicHit>> {
        self.episodic_layer().search_episodic(query)
    }

    /// Writes the `last_accessed` times searches left waiting, in one
    /// transaction, and answers how many rows it recorded. Skipped, the
    /// times kept, while another thread holds the episodic writer (they are
    /// advisory); a failure drops them. A long-running process calls it
    /// now and then, so an idle store's times do not wait for its close.
    pub fn write_touches(&self) -> usize {
        self.episodic_layer().write_touches()
    }

    /// The refusal [`write_episodic`](Self::write_episodic) would give
    /// `episode`, without writing or auditing anything: every rule of the
    /// write (the text, importance, `source_ref`, `created_at`, the
    /// injection screen, the evidence) and the forgotten items. What is
    /// left to the write is what depends on the rows at that moment:
    /// dedup and the cap. Dry runs of imports decide with this.
    pub fn check_episode(&self, episode: &NewEpisode) -> std::result::Result<(), crate::Rejected> {
        self.episodic_layer().check_episode(episode)
    }

    /// Writes one episodic row (see [`NewEpisode`] for the fields).
    ///
    /// Rules, in order: source name, text at most 2,000 visible characters,
    /// importance a number (then clamped to `[0, 1]`), `source_ref` length,
    /// `created_at` from 1970 to a day from now, injection screen (before
    /// any embedding), then, on the text as stored (credentials redacted,
    /// control characters removed), at least 10 visible characters;
    /// invisible characters (zero-width, bidi, tags) never count. Tags are
    /// sanitised. A refusal
    /// returns [`MemoryError::Rejected`] and records a `rejected` or
    /// `injection_blocked` audit row with a redacted snippet.
    ///
    /// Then, in one `BEGIN IMMEDIATE` transaction: an active row with the
    /// same text, or with a vector at cosine > 0.88, makes the write a
    /// [`EpisodicOutcome::Duplicate`] (`conflict_skip` audit row); tombstoned
    /// rows never count, even while an index still holds their vector. A
    /// store at its cap evicts the lowest importance, then oldest rows
    /// (`deleted` audit rows, detail `cap_eviction`), or, in preservation
    /// mode, refuses with [`EpisodicOutcome::StoreFull`]. The row, its
    /// vector and the index change together: an index failure rolls the
    /// row back.
    ///
    /// The vector is computed before the lock. If the embedder was swapped
    /// meanwhile, the row is stored without a vector for a later backfill.
    pub fn write_episodic(&self, episode: &NewEpisode) -> Result<EpisodicOutcome> {
        self.episodic_layer().write_episodic(episode)
    }

    /// [`write_episodic`](Self::write_episodic) with another active-row cap
    /// than the configured one ([`crate::MemoryConfig::episodic_cap`]).
    pub fn write_episodic_capped(&self, episode: &NewEpisode, cap: usize) -> Result<EpisodicOutcome> {
        self.episodic_layer().write_episodic_capped(episode, cap)
    }

    /// Tombstones row `id` (a `deleted` audit row records it); its vector
    /// leaves the index in the same critical section.
    pub fn delete_episodic(&self, id: i64) -> Result<DeleteOutcome> {
        self.episodic_layer().delete_episodic(id)
    }

    pub(crate) fn tombstone_episodic(&self, ids: &[i64], source: &str, detail: &str) -> Result<Vec<i64>> {
        self.episodic_layer().tombstone_episodic(ids, source, detail)
    }

    /// One row, active or not.
    pub fn get_episodic(&self, id: i64) -> Result<Option<EpisodicRecord>> {
        self.episodic_layer().get_episodic(id)
    }

    /// Active rows, newest first, `limit` from `offset`.
    pub fn list_episodic(&self, limit: usize, offset: usize) -> Result<Vec<EpisodicRecord>> {
        self.episodic_layer().list_episodic(limit, offset)
    }

    /// [`list_episodic`](Self::list_episodic) of the rows `scopes` admits.
    pub fn list_episodic_in(&self, scopes: &ScopeFilter, limit: usize, offset: usize) -> Result<Vec<EpisodicRecord>> {
        self.episodic_layer().list_episodic_in(scopes, limit, offset)
    }

    /// Tombstones the active episodic rows that quote `old_value` (a
    /// superseded semantic value), matched case-insensitively as a whole
    /// phrase; values under 4 characters retire nothing. Returns the ids.
    pub fn retire_stale_episodic(&self, old_value: &str) -> Result<Vec<i64>> {
        self.episodic_layer().retire_stale_episodic(old_value)
    }
}

impl EpisodicHost for MemoryDb {
    fn rows(&self) -> &dyn Backend {
        MemoryDb::rows(self)
    }

    fn background_reader(&self) -> Arc<dyn Backend> {
        MemoryDb::background_reader(self)
    }

    fn embedder(&self) -> Option<Arc<dyn EmbeddingBackend>> {
        MemoryDb::embedder(self)
    }

    fn embedder_with_generation(&self) -> (Option<Arc<dyn EmbeddingBackend>>, u64) {
        MemoryDb::embedder_with_generation(self)
    }

    fn set_embedder(&self, embedder: Option<Arc<dyn EmbeddingBackend>>) -> u64 {
        MemoryDb::set_embedder(self, embedder)
    }

    fn space(&self) -> Option<String> {
        MemoryDb::space(self)
    }

    fn space_generation(&self) -> u64 {
        MemoryDb::space_generation(self)
    }

    fn path(&self) -> &Path {
        MemoryDb::path(self)
    }

    fn has_own_keyword_index(&self) -> bool {
        MemoryDb::has_own_keyword_index(self)
    }

    fn lock_episodic(&self) -> MutexGuard<'_, ()> {
        MemoryDb::lock_episodic(self)
    }

    fn try_lock_episodic(&self) -> Option<MutexGuard<'_, ()>> {
        MemoryDb::try_lock_episodic(self)
    }

    fn refuse_when_damaged(&self) -> Result<()> {
        MemoryDb::refuse_when_damaged(self)
    }

    fn refuse(&self, write: RefusedWrite<'_>, rejected: Rejected) -> MemoryError {
        MemoryDb::refuse(self, write, rejected)
    }

    fn refuse_forgotten(&self, text: &str, key: Option<&str>) -> Result<std::result::Result<(), Rejected>> {
        MemoryDb::refuse_forgotten(self, text, key)
    }

    fn catch_up_semantic(&self) -> Result<()> {
        // A snapshot no search has asked for is not kept: the first
        // semantic search builds it, and catch-ups keep it current after.
        if self.snapshot.current.lock().is_some() {
            self.snapshot()?;
        }
        Ok(())
    }
}
