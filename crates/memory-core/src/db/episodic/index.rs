//! The episodic vector index on [`MemoryDb`]: opening, building and
//! catching it up, backfilling missing vectors and swapping the model.
//! The index state and the row loading it uses are in
//! [`crate::episodic::index`].

use crate::constants::{EPISODIC_BACKFILL_BATCH, EPISODIC_INDEX_FILE_NAME, EPISODIC_VECTOR_FILE_STALE_ROWS};
use crate::db::MemoryDb;
use crate::episodic::index::{
    IndexAccess, LoadedIndex, SPACE_SETTING, Slot, active_vector_ids, build_index_from_table, index_error,
    load_or_build_index, load_vectors, snapshot_signature, vector_file_path, vector_file_signature, wait_ready,
    write_vector_file,
};
use crate::episodic::keyword::KeywordAccess;
use crate::episodic::{
    BackfillProgress, BackfillReport, BackfillStep, EpisodicIndexStatus, ReembedProgress, ReembedStep,
};
use crate::error::{MemoryError, Result};
use crate::store::space_signature;
use crate::store::{Counter, StoreTx, vector_blob};
use cairn_embedder::EmbeddingBackend;
use cairn_memory_vector::AutoIndex;
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Whether an index of `indexed` vectors that lacks `arriving` stored ones
/// is better built again from the table than caught up: when more arrived
/// (another process imported them, a bulk load) than it holds, and more
/// than the exact-scan crossover. A build links the graph on every core; a
/// catch-up adds one vector at a time.
fn rebuild_rather_than_add(indexed: usize, arriving: usize) -> bool {
    arriving > cairn_memory_vector::constants::AUTO_CROSSOVER && arriving > indexed
}

impl MemoryDb {
    /// The index for `space`, brought in step with the table through `tx`
    /// (the caller holds the episodic lock). Builds inline up to the
    /// flat/HNSW crossover; larger stores are built on a background thread
    /// while callers scan.
    pub(crate) fn index_locked(self: &MemoryDb, tx: &mut dyn StoreTx, space: &str, dim: usize) -> Result<IndexAccess> {
        let revision = tx.revision(Counter::Episodic)?;
        {
            let slot = self.episodic.slot.read();
            if slot.space.as_deref() == Some(space)
                && let Some(index) = &slot.index
            {
                if slot.revision == Some(revision) {
                    return Ok(IndexAccess::Ready(Arc::clone(index), slot.vectors.clone()));
                }
                // Catch up with changes made elsewhere: diff the ids.
                let index = Arc::clone(index);
                let vectors = slot.vectors.clone();
                drop(slot);
                let wanted = active_vector_ids(tx, space)?;
                let have: HashSet<u64> = index.ids().into_iter().collect();
                let missing: Vec<i64> = wanted.difference(&have).map(|id| *id as i64).collect();
                if !rebuild_rather_than_add(have.len(), missing.len()) {
                    for id in have.difference(&wanted) {
                        index.remove(*id).map_err(index_error("removing a stale vector"))?;
                    }
                    for (id, vector) in load_vectors(tx, space, Some(&missing))? {
                        index.add(id, &vector).map_err(index_error("adding a vector"))?;
                    }
                    let mut slot = self.episodic.slot.write();
                    slot.revision = Some(revision);
                    return Ok(IndexAccess::Ready(index, vectors));
                }
                // Dropped; built again below, from the table.
                let mut slot = self.episodic.slot.write();
                slot.index = None;
                slot.vectors = None;
                slot.space = None;
                slot.revision = None;
            } else if slot.building {
                return Ok(IndexAccess::Scan);
            }
        }
        // Counted only as far as the two thresholds below need.
        let count = tx.episodic_vectors_up_to(space, crate::constants::EPISODIC_SCAN_MAX_ROWS as i64 + 1)?;
        if count as usize <= cairn_memory_vector::constants::AUTO_CROSSOVER {
            let index = Arc::new(build_index_from_table(tx, space, self.index_config(dim))?);
            let mut slot = self.episodic.slot.write();
            *slot = Slot {
                index: Some(Arc::clone(&index)),
                space: Some(space.to_owned()),
                revision: Some(revision),
                building: false,
                from_snapshot: false,
                building_rows: 0,
                vectors: None,
            };
            return Ok(IndexAccess::Ready(index, None));
        }
        self.start_background_build(space, dim, count as usize);
        Ok(IndexAccess::Scan)
    }

    /// Builds a large index on its own thread and connection; the result
    /// is installed with no revision, so the next user diffs it against the
    /// table before trusting it.
    fn start_background_build(&self, space: &str, dim: usize, rows: usize) {
        {
            let mut slot = self.episodic.slot.write();
            if slot.building {
                return;
            }
            slot.building = true;
            slot.building_rows = rows;
            slot.index = None;
            slot.vectors = None;
            slot.space = None;
            slot.revision = None;
        }
        // The thread reads through its own connection and hands the index
        // back over a channel; the next search or write installs it.
        let reader = self.background_reader();
        let snapshot = self.episodic_snapshot_path();
        let space = space.to_owned();
        let config = self.index_config(dim);
        let (sender, receiver) = std::sync::mpsc::channel::<Result<LoadedIndex>>();
        let build_space = space.clone();
        std::thread::Builder::new()
            .name("cairn-episodic-index".to_owned())
            .spawn(move || {
                let result = reader.read("building the episodic index", |tx| {
                    load_or_build_index(tx, &build_space, config, snapshot.as_deref())
                });
                let _ = sender.send(result);
            })
            .map(|_| ())
            .unwrap_or_else(|error| tracing::warn!(%error, "could not start the episodic index build"));
        *self.episodic.pending.lock() = Some((space, receiver));
    }

    /// Blocks until a running background build has finished and installs it.
    fn wait_for_background_build(&self) {
        let finished = {
            let pending = self.episodic.pending.lock();
            match pending.as_ref() {
                Some((_, receiver)) => receiver.recv().ok(),
                None => return,
            }
        };
        let mut pending = self.episodic.pending.lock();
        let Some((space, _)) = pending.take() else { return };
        match finished {
            Some(result) => self.install_background_build(space, result),
            None => self.episodic.slot.write().building = false,
        }
    }

    /// Puts a finished background build in the slot, with no revision, so
    /// the next user diffs it against the table before trusting it.
    fn install_background_build(&self, space: String, result: Result<LoadedIndex>) {
        let mut slot = self.episodic.slot.write();
        slot.building = false;
        match result {
            Ok(loaded) => {
                slot.index = Some(Arc::new(loaded.index));
                slot.vectors = loaded.vectors.map(Arc::new);
                slot.from_snapshot = loaded.from_snapshot;
                slot.space = Some(space);
                slot.revision = None;
            }
            Err(error) => tracing::warn!(%error, "episodic index build failed; searches keep scanning"),
        }
    }

    /// Installs a finished background build, if one is waiting.
    pub(crate) fn collect_background_build(&self) {
        // A caller waiting for the build holds the lock; searches go on scanning.
        let Some(mut pending) = self.episodic.pending.try_lock() else { return };
        let Some((space, receiver)) = pending.as_ref() else { return };
        match receiver.try_recv() {
            Ok(result) => {
                let space = space.clone();
                *pending = None;
                self.install_background_build(space, result);
            }
            Err(std::sync::mpsc::TryRecvError::Empty) => {}
            Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                *pending = None;
                self.episodic.slot.write().building = false;
            }
        }
    }

    /// The index to search with, from a reader's point of view: in step
    /// with revision `revision` or brought there under the writer lock.
    pub(crate) fn index_for_read(&self, revision: i64, space: &str, dim: usize) -> Result<IndexAccess> {
        self.collect_background_build();
        {
            let slot = self.episodic.slot.read();
            if slot.space.as_deref() == Some(space)
                && slot.revision == Some(revision)
                && let Some(index) = &slot.index
            {
                return Ok(IndexAccess::Ready(Arc::clone(index), slot.vectors.clone()));
            }
            if slot.building {
                return Ok(IndexAccess::Scan);
            }
        }
        let _episodic = self.lock_episodic();
        self.rows().read("syncing the episodic index", |tx| self.index_locked(tx, space, dim))
    }

    /// Records that a write through the writer lock moved the table from
    /// `before` to `after`; the index stays trusted only if it was in step.
    pub(crate) fn advance_revision(&self, before: i64, after: i64) {
        let mut slot = self.episodic.slot.write();
        if slot.revision == Some(before) {
            slot.revision = Some(after);
        } else {
            slot.revision = None;
        }
    }

    /// The index for `space` if it is in step with the table, without
    /// building or catching up.
    fn index_if_current(&self, tx: &mut dyn StoreTx, space: &str) -> Result<IndexAccess> {
        let revision = tx.revision(Counter::Episodic)?;
        let slot = self.episodic.slot.read();
        match &slot.index {
            Some(index) if slot.space.as_deref() == Some(space) && slot.revision == Some(revision) => {
                Ok(IndexAccess::Ready(Arc::clone(index), slot.vectors.clone()))
            }
            _ => Ok(IndexAccess::Scan),
        }
    }

    /// The index as it stands, in whatever state.
    pub(crate) fn current_index(&self) -> Option<Arc<AutoIndex>> {
        self.episodic.slot.read().index.clone()
    }

    /// The episodic index's configuration for `dim`-wide vectors.
    pub(crate) fn index_config(&self, dim: usize) -> cairn_memory_vector::IndexConfig {
        crate::episodic::index::index_config(dim, self.episodic_config.full_vectors_max)
    }

    /// Whether a background build is running over more vectors than a
    /// search should scan meanwhile.
    pub(crate) fn too_large_to_scan(&self) -> bool {
        let slot = self.episodic.slot.read();
        slot.building && slot.building_rows > crate::constants::EPISODIC_SCAN_MAX_ROWS
    }

    /// Forgets the index's revision so the next user re-checks it.
    pub(crate) fn distrust_index(&self) {
        self.episodic.slot.write().revision = None;
    }

    /// Builds (or catches up) the episodic vector index now, waiting for a
    /// background build if one runs, and reports how it compares with the
    /// table.
    pub fn episodic_index_status(&self) -> Result<EpisodicIndexStatus> {
        let embedder = self.embedder();
        let space = embedder.as_ref().map(|embedder| space_signature(&**embedder));
        let counts = {
            let _episodic = self.lock_episodic();
            self.rows().read("counting episodic rows", |tx| tx.episodic_counts(space.as_deref()))?
        };
        let (active, active_with_vectors) = (counts.live, counts.with_vectors);
        self.collect_background_build();
        let keyword_index_len = self.keyword_index_len();
        let slot = self.episodic.slot.read();
        Ok(EpisodicIndexStatus {
            index_len: slot.index.as_ref().map_or(0, |index| index.len()),
            active_with_vectors: active_with_vectors as usize,
            active: active as usize,
            ready: slot.index.is_some() && slot.space == space && slot.revision.is_some(),
            building: slot.building,
            space: slot.space.clone(),
            keyword_index_len,
            loaded_from_snapshot: slot.index.is_some() && slot.from_snapshot,
            index_bytes: slot.index.as_ref().map_or(0, |index| index.memory_bytes())
                + slot.vectors.as_ref().map_or(0, |vectors| vectors.memory_bytes()),
            keyword_index_bytes: self.keyword_index_bytes(),
        })
    }

    /// Brings the index in step with the table now (building it inline,
    /// whatever its size) and returns its status. Start-up code that can
    /// afford to wait calls this; searches never need to.
    pub fn build_episodic_index(&self) -> Result<EpisodicIndexStatus> {
        self.wait_for_background_build();
        self.wait_for_keyword_index();
        {
            let _episodic = self.lock_episodic();
            self.rows().read("syncing the keyword index", |tx| self.keywords_locked(tx, true))?;
        }
        if let Some(embedder) = self.embedder() {
            let space = space_signature(&*embedder);
            let _episodic = self.lock_episodic();
            self.rows().read("building the episodic index", |tx| {
                let revision = tx.revision(Counter::Episodic)?;
                let indexed = {
                    let slot = self.episodic.slot.read();
                    slot.index
                        .as_ref()
                        .filter(|_| slot.space.as_deref() == Some(space.as_str()))
                        .map(|index| (index.len(), slot.revision == Some(revision)))
                };
                let needs_full = match indexed {
                    None => true,
                    Some((_, true)) => false,
                    Some((indexed, false)) => {
                        let stored = tx.episodic_counts(Some(&space))?.with_vectors as usize;
                        rebuild_rather_than_add(indexed, stored.saturating_sub(indexed))
                    }
                };
                if needs_full {
                    let snapshot = self.episodic_snapshot_path();
                    let loaded =
                        load_or_build_index(tx, &space, self.index_config(embedder.dim()), snapshot.as_deref())?;
                    *self.episodic.pending.lock() = None;
                    *self.episodic.slot.write() = Slot {
                        index: Some(Arc::new(loaded.index)),
                        space: Some(space.clone()),
                        revision: Some(revision),
                        building: false,
                        from_snapshot: loaded.from_snapshot,
                        building_rows: 0,
                        vectors: loaded.vectors.map(Arc::new),
                    };
                } else {
                    self.index_locked(tx, &space, embedder.dim())?;
                }
                Ok(())
            })?;
        }
        self.episodic_index_status()
    }

    /// Waits up to `timeout` for another process to announce a change to
    /// the store (PostgreSQL's `NOTIFY`), and answers the count of
    /// announcements so far: pass the previous answer as `seen` (0 at
    /// first). A SQLite store announces nothing; its readers catch up when
    /// they read.
    pub fn wait_for_change(&self, seen: u64, timeout: Duration) -> u64 {
        self.rows().wait_for_change(seen, timeout)
    }

    /// Brings this process's caches (the semantic snapshot once a search
    /// has built it, the keyword index and, with a ready embedder, the
    /// vector index) in step with the store now, so the next search does
    /// not have to.
    pub fn catch_up(&self) -> Result<()> {
        // A snapshot no search has asked for is not kept: the first
        // semantic search builds it, and catch-ups keep it current after.
        if self.snapshot.current.lock().is_some() {
            self.snapshot()?;
        }
        let [revision, text_revision] = self.rows().read("reading the revisions", |tx| super::write::revisions(tx))?;
        if let KeywordAccess::Own { start: true } = self.keyword_index_for_read(text_revision)? {
            self.start_keyword_build();
        }
        if let Some(embedder) = self.embedder().filter(|embedder| embedder.is_ready()) {
            self.index_for_read(revision, &space_signature(&*embedder), embedder.dim())?;
        }
        Ok(())
    }

    /// Starts making the keyword and vector indexes ready without waiting
    /// (a large store's are loaded or built on background threads), so the
    /// first searches after a process starts find them ready. The vector
    /// index needs only the embedder's space, not a loaded model. A gateway
    /// calls this at start; searches never need to.
    pub fn warm_up(&self) -> Result<()> {
        let [revision, text_revision] = self.rows().read("reading the revisions", |tx| super::write::revisions(tx))?;
        if let KeywordAccess::Own { start: true } = self.keyword_index_for_read(text_revision)? {
            self.start_keyword_build();
        }
        if let Some(embedder) = self.embedder() {
            self.index_for_read(revision, &space_signature(&*embedder), embedder.dim())?;
        }
        Ok(())
    }

    /// Where the episodic index snapshot of this store lives: beside
    /// `memory.db` (none for a store without a directory).
    pub fn episodic_snapshot_path(&self) -> Option<PathBuf> {
        let path = self.path();
        path.parent().filter(|dir| !dir.as_os_str().is_empty()).map(|dir| dir.join(EPISODIC_INDEX_FILE_NAME))
    }

    /// Writes the episodic index to [`episodic_snapshot_path`](Self::episodic_snapshot_path)
    /// so the next process loads it instead of building it (one file,
    /// written atomically). Only an index in step with the table and above
    /// the exact-scan crossover is written (smaller ones build in
    /// milliseconds), and only when the table moved since the last write.
    /// Answers whether a file was written.
    pub fn save_episodic_index(&self) -> Result<bool> {
        let Some(path) = self.episodic_snapshot_path() else { return Ok(false) };
        self.collect_background_build();
        let chosen = {
            let _episodic = self.lock_episodic();
            self.rows().read("reading the episodic revision", |tx| {
                let revision = tx.revision(Counter::Episodic)?;
                let slot = self.episodic.slot.read();
                match (&slot.index, &slot.space) {
                    (Some(index), Some(space)) if slot.revision == Some(revision) => {
                        if index.len() <= cairn_memory_vector::constants::AUTO_CROSSOVER
                            || self.episodic.saved.lock().as_ref() == Some(&(space.clone(), revision))
                        {
                            return Ok(None);
                        }
                        let signature = snapshot_signature(tx, space, revision)?;
                        *self.episodic.saved.lock() = Some((space.clone(), revision));
                        Ok(Some((Arc::clone(index), signature)))
                    }
                    _ => Ok(None),
                }
            })?
        };
        let Some((index, signature)) = chosen else { return Ok(false) };
        // Outside the writer lock: writes go on while the file is written
        // (the index's own writer mutex keeps the file consistent). A write
        // that lands meanwhile moves the table past `revision`, so the file
        // is not loaded next time unless a later save replaces it.
        if let Err(error) = index.snapshot(&path, &signature) {
            *self.episodic.saved.lock() = None;
            return Err(index_error("saving the episodic index")(error));
        }
        Ok(true)
    }

    /// Writes the vector file beside the snapshot again when the index
    /// keeps codes only and the file is distrusted, or lacks more of its rows than
    /// [`EPISODIC_VECTOR_FILE_STALE_ROWS`] (or a fiftieth of them, if
    /// more), so searches re-score their hits from the file rather than
    /// the store; rows the old file holds are copied from it, the others
    /// read from the store. Answers whether a file was written. A long-running
    /// process calls it now and then, off the request path: at a million
    /// rows it writes 1.5 GB.
    pub fn save_episodic_vector_file(&self) -> Result<bool> {
        let Some(path) = self.episodic_snapshot_path().map(|snapshot| vector_file_path(&snapshot)) else {
            return Ok(false);
        };
        let Some(_writing) = self.episodic.writing_vectors.try_lock() else { return Ok(false) };
        self.collect_background_build();
        let (index, old, space) = {
            let slot = self.episodic.slot.read();
            match (&slot.index, &slot.space) {
                (Some(index), Some(space)) if !index.exact() => {
                    let old = slot.vectors.clone().filter(|file| !file.is_distrusted());
                    (Arc::clone(index), old, space.clone())
                }
                _ => return Ok(false),
            }
        };
        let mut ids = index.ids();
        ids.sort_unstable();
        let lacking = match &old {
            Some(file) => ids.iter().filter(|id| !file.contains(**id)).count(),
            None => ids.len(),
        };
        if old.is_some() && lacking <= EPISODIC_VECTOR_FILE_STALE_ROWS.max(ids.len() / 50) {
            return Ok(false);
        }
        let signature = self.rows().read("reading the store's identity", |tx| vector_file_signature(tx, &space))?;
        let mut fetch = |batch: &[i64]| {
            self.rows().read("reading episodic vectors for the vector file", |tx| load_vectors(tx, &space, Some(batch)))
        };
        let file = write_vector_file(&path, &signature, index.dim(), &ids, old.as_deref(), &mut fetch)?;
        tracing::info!(rows = file.len(), lacking, "episodic vector file written");
        let mut slot = self.episodic.slot.write();
        if slot.index.as_ref().is_some_and(|current| Arc::ptr_eq(current, &index)) {
            slot.vectors = Some(Arc::new(file));
        }
        Ok(true)
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
        let _span = tracing::debug_span!("backfill_missing_embeddings").entered();
        self.refuse_when_damaged()?;
        let (Some(embedder), generation) = self.embedder_with_generation() else {
            return Ok(BackfillReport { embedded: 0, remaining: self.count_missing(None)? });
        };
        let missing = || self.count_missing(Some(&space_signature(&*embedder)));
        // A model change owns the vectors while it runs: a backfill in the
        // outgoing space would undo its re-embedding.
        let Some(_no_swap) = self.episodic.swap.try_lock() else {
            return Ok(BackfillReport { embedded: 0, remaining: missing()? });
        };
        // The running backfill embeds these rows already.
        let Some(_single) = self.episodic.backfilling.try_lock() else {
            return Ok(BackfillReport { embedded: 0, remaining: missing()? });
        };
        let started = std::cell::Cell::new(false);
        // The first call is the one before the first batch: it starts the
        // run; the caller's `progress` hears of batches only.
        let tracked = |done: usize, total: usize| {
            let mut state = self.episodic.backfill.lock();
            if !started.replace(true) {
                *state = BackfillProgress {
                    step: BackfillStep::Running,
                    run: state.run + 1,
                    total,
                    ..BackfillProgress::default()
                };
                return;
            }
            state.done = done;
            // Rows written since the start are embedded too: count them in.
            if done > state.total {
                state.total = done + missing().unwrap_or(0);
            }
            drop(state);
            if let Some(progress) = progress {
                progress(done, total);
            }
        };
        let result = self.backfill_into(&embedder, generation, Some(&tracked));
        if started.get() {
            let mut state = self.episodic.backfill.lock();
            match &result {
                Ok(report) => {
                    state.step = BackfillStep::Done;
                    state.done = report.embedded;
                    state.total = state.total.max(report.embedded);
                    state.remaining = report.remaining;
                }
                Err(error) => {
                    state.step = BackfillStep::Failed;
                    state.error = Some(error.to_string());
                }
            }
        }
        result
    }

    /// Where the running (or last) episodic backfill with rows to embed stands.
    pub fn backfill_progress(&self) -> BackfillProgress {
        self.episodic.backfill.lock().clone()
    }

    /// Embeds every active row without a vector in `embedder`'s space,
    /// while the embedder of `generation` is current.
    fn backfill_into(
        &self,
        embedder: &Arc<dyn EmbeddingBackend>,
        generation: u64,
        progress: Option<&dyn Fn(usize, usize)>,
    ) -> Result<BackfillReport> {
        let space = space_signature(&**embedder);
        let total = self.count_missing(Some(&space))?;
        let mut report = BackfillReport::default();
        if let Some(progress) = progress.filter(|_| total > 0) {
            progress(0, total);
        }
        let mut after_id = 0i64;
        let mut failed = 0usize;
        while embedder.is_ready() || wait_ready(&**embedder, Duration::ZERO) {
            let batch = self.rows().read("finding episodic rows without vectors", |tx| {
                tx.episodic_missing_vectors(Some(&space), after_id, EPISODIC_BACKFILL_BATCH)
            })?;
            let Some((last, _)) = batch.last() else { break };
            after_id = *last;
            let texts: Vec<&str> = batch.iter().map(|(_, text)| text.as_str()).collect();
            let vectors = match embedder.embed_batch(&texts) {
                Ok(vectors) if vectors.len() == texts.len() => vectors,
                Ok(_) => {
                    return Err(MemoryError::Embedding {
                        operation: "backfilling",
                        reason: "wrong batch size".to_owned(),
                    });
                }
                Err(error) => {
                    tracing::warn!(%error, "backfill batch failed; rows stay without vectors");
                    failed += batch.len();
                    continue;
                }
            };
            let stored = self.store_vectors(&batch, vectors, &space, embedder.dim(), generation)?;
            match stored {
                Some(count) => report.embedded += count,
                None => break, // the embedder changed: this space is no longer current
            }
            if let Some(progress) = progress {
                progress(report.embedded, total);
            }
        }
        if failed > 0 {
            tracing::warn!(failed, "episodic rows left without vectors after a backfill");
        }
        report.remaining = self.count_missing(Some(&space))?;
        if report.remaining == 0 && self.space_generation() == generation {
            self.rows().write("recording the embedding space", |tx| tx.set_setting(SPACE_SETTING, &space))?;
        }
        Ok(report)
    }

    /// Active rows without a vector in `space` (all active rows without one
    /// when `space` is `None`).
    fn count_missing(&self, space: Option<&str>) -> Result<usize> {
        self.rows()
            .read("counting episodic rows without vectors", |tx| tx.episodic_missing_count(space))
            .map(|count| count as usize)
    }

    /// Stores backfilled vectors under the writer lock; `None` when the
    /// space generation moved on (nothing stored).
    fn store_vectors(
        &self,
        batch: &[(i64, String)],
        vectors: Vec<Vec<f32>>,
        space: &str,
        dim: usize,
        generation: u64,
    ) -> Result<Option<usize>> {
        let _episodic = self.lock_episodic();
        if self.space_generation() != generation {
            return Ok(None);
        }
        // Set once the body has run: a failure after it is the commit's.
        let mut body_done = false;
        let stored = self.rows().write("storing backfilled vectors", |tx| {
            // Only an index already in step is updated; otherwise the next
            // user builds one in one go from the stored vectors.
            let access = self.index_if_current(tx, space)?;
            let before = tx.revision(Counter::Episodic)?;
            let mut stored = Vec::new();
            for ((id, text), mut vector) in batch.iter().zip(vectors) {
                if vector.len() != dim {
                    continue;
                }
                cairn_embedder::l2_normalize(&mut vector);
                if tx.set_episodic_vector(*id, text, &vector_blob(&vector), space)? {
                    stored.push((*id as u64, vector));
                }
            }
            let after = if stored.is_empty() { before } else { tx.bump_revision(Counter::Episodic)? };
            if let IndexAccess::Ready(index, _) = &access {
                for (id, vector) in &stored {
                    if index.contains(*id) {
                        index.remove(*id).map_err(index_error("replacing a vector"))?;
                    }
                    if let Err(error) = index.add(*id, vector) {
                        self.distrust_index();
                        return Err(index_error("adding a backfilled vector")(error));
                    }
                }
            }
            body_done = true;
            Ok((stored.len(), before, after))
        });
        match stored {
            Ok((count, before, after)) => {
                self.advance_revision(before, after);
                Ok(Some(count))
            }
            Err(error) => {
                if body_done {
                    self.distrust_index();
                }
                Err(error)
            }
        }
    }

    /// Progress of the current or last model swap.
    pub fn reembed_progress(&self) -> ReembedProgress {
        self.episodic.progress.lock().clone()
    }

    /// The embedding space every stored episodic vector was last verified in.
    pub fn recorded_episodic_space(&self) -> Result<Option<String>> {
        self.rows().read("reading the recorded space", |tx| tx.setting(SPACE_SETTING))
    }

    /// Changes the embedding model, in the specification's order: install
    /// `next` (bumping the space generation, so in-flight vectors of the old
    /// model are stored as missing), wait up to `ready_timeout` for it to
    /// load, re-embed every active row, verify none is left in another
    /// space, and only then record the new space. Any failure puts the
    /// previous model back (and with it the previous vector width) and
    /// reports [`ReembedStep::Failed`]. Keyword search serves throughout.
    /// Only one swap runs at a time ([`MemoryError::ReembedInProgress`]).
    pub fn swap_embedding_model(
        &self,
        next: Arc<dyn EmbeddingBackend>,
        ready_timeout: Duration,
    ) -> Result<ReembedProgress> {
        let Some(_single) = self.episodic.swap.try_lock() else { return Err(MemoryError::ReembedInProgress) };
        let _span = tracing::info_span!("swap_embedding_model", model = next.model_id()).entered();
        *self.episodic.progress.lock() = ReembedProgress { step: ReembedStep::Applying, ..ReembedProgress::default() };
        // The outgoing model keeps answering queries (rows already moved to
        // the new space fall back to keywords) until every row is in the
        // new space; only then does the new model take over.
        let (previous, generation) = self.embedder_with_generation();
        let result = self.run_swap(&next, generation, ready_timeout);
        match result {
            Ok(()) => {
                self.set_embedder(Some(Arc::clone(&next)));
                if let Some(previous) = previous {
                    previous.close();
                }
                let mut progress = self.episodic.progress.lock();
                progress.step = ReembedStep::Done;
                Ok(progress.clone())
            }
            Err(error) => {
                tracing::warn!(%error, "model swap failed; the previous model stays");
                {
                    let mut progress = self.episodic.progress.lock();
                    progress.step = ReembedStep::Failed;
                    progress.error = Some(error.to_string());
                }
                next.close();
                // Rows already re-embedded are in the abandoned space: give
                // them back vectors of the kept model where it can.
                if let Some(previous) = &previous
                    && let Err(error) = self.backfill_into(previous, self.space_generation(), None)
                {
                    tracing::warn!(%error, "backfill after a failed swap did not finish");
                }
                Ok(self.reembed_progress())
            }
        }
    }

    fn run_swap(&self, next: &Arc<dyn EmbeddingBackend>, generation: u64, ready_timeout: Duration) -> Result<()> {
        if !wait_ready(&**next, ready_timeout) {
            return Err(MemoryError::Embedding {
                operation: "loading the new model",
                reason: "not ready in time".to_owned(),
            });
        }
        let space = space_signature(&**next);
        let total = self.count_missing(Some(&space))?;
        *self.episodic.progress.lock() = ReembedProgress { step: ReembedStep::Running, done: 0, total, error: None };
        let progress = |done: usize, _total: usize| {
            self.episodic.progress.lock().done = done;
        };
        let report = self.backfill_into(next, generation, Some(&progress))?;
        // Verify: no active row is left outside the new space.
        if report.remaining > 0 {
            return Err(MemoryError::Embedding {
                operation: "re-embedding",
                reason: format!("{} rows could not be re-embedded", report.remaining),
            });
        }
        if self.recorded_episodic_space()?.as_deref() != Some(space.as_str()) {
            return Err(MemoryError::Embedding {
                operation: "re-embedding",
                reason: "the recorded space is not the new model's".to_owned(),
            });
        }
        self.episodic.progress.lock().done = report.embedded;
        Ok(())
    }
}
