//! The in-memory vector index of episodic rows: building it, keeping it in
//! step with the table, backfilling missing vectors and swapping models.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use cairn_embedder::EmbeddingBackend;
use cairn_memory_vector::{AutoIndex, IndexConfig, SnapshotExpectation, VectorFile, VectorFileWriter};
use parking_lot::{Mutex, RwLock};

use super::Episodic;
use super::keyword::{KeywordAccess, KeywordState};
use super::{BackfillProgress, BackfillReport, BackfillStep, EpisodicIndexStatus, ReembedProgress, ReembedStep};
use crate::constants::{
    EPISODIC_BACKFILL_BATCH, EPISODIC_INDEX_FILE_NAME, EPISODIC_VECTOR_FILE_STALE_ROWS, EPISODIC_VECTORS_FILE_NAME,
};
use crate::error::{MemoryError, Result};
use crate::store::{Counter, StoreTx, blob_vector, space_signature, vector_blob};

/// Name of the `settings` row recording the space every vector was verified in.
pub(crate) const SPACE_SETTING: &str = "episodic_space";
/// How often a model swap polls a loading model.
const READY_POLL: Duration = Duration::from_millis(20);

/// The index and what it reflects.
#[derive(Default)]
pub(crate) struct Slot {
    pub(crate) index: Option<Arc<AutoIndex>>,
    /// The embedding space of the vectors in `index`.
    pub(crate) space: Option<String>,
    /// The `episodic_revision` the index reflects; `None` when unknown.
    pub(crate) revision: Option<i64>,
    pub(crate) building: bool,
    /// Whether `index` was loaded from the snapshot file.
    pub(crate) from_snapshot: bool,
    /// Vectors the running background build reads: above
    /// [`EPISODIC_SCAN_MAX_ROWS`](crate::constants::EPISODIC_SCAN_MAX_ROWS)
    /// searches do not scan meanwhile.
    pub(crate) building_rows: usize,
    /// The full vectors of a codes-only `index`, in its space, on disk.
    pub(crate) vectors: Option<Arc<VectorFile>>,
}

/// Per-store episodic state: the vector index and the model-swap progress.
#[derive(Default)]
pub(crate) struct EpisodicState {
    pub(crate) slot: RwLock<Slot>,
    /// A background build: the space it is for and where its result arrives.
    pub(crate) pending: Mutex<Option<(String, Receiver<Result<LoadedIndex>>)>>,
    pub(crate) progress: Mutex<ReembedProgress>,
    pub(crate) swap: Mutex<()>,
    /// The running or last episodic backfill.
    pub(crate) backfill: Mutex<BackfillProgress>,
    /// Held by the backfill that runs; a second one waits for nothing.
    pub(crate) backfilling: Mutex<()>,
    /// The space and revision last written to the snapshot file.
    pub(crate) saved: Mutex<Option<(String, i64)>>,
    /// Held while the vector file is written.
    pub(crate) writing_vectors: Mutex<()>,
    /// The in-memory keyword index.
    pub(crate) keywords: KeywordState,
    /// `last_accessed` of rows searches returned, not yet written.
    pub(crate) touches: Mutex<PendingTouches>,
}

/// `last_accessed` times waiting to be written, by row id, and since when
/// the oldest has waited. Searches write them together, once the oldest has
/// waited [`TOUCH_BATCH_WAIT`] or [`TOUCH_BATCH_ROWS`] are waiting, and the
/// store writes what is left when it closes: a search does not commit,
/// and every commit would empty the other connections' page caches.
#[derive(Default)]
pub(crate) struct PendingTouches {
    pub(crate) at: HashMap<i64, i64>,
    pub(crate) since: Option<Instant>,
}

/// How long a returned row's `last_accessed` may wait to be written.
pub(crate) const TOUCH_BATCH_WAIT: Duration = Duration::from_secs(2);
/// How many rows' `last_accessed` may wait to be written.
pub(crate) const TOUCH_BATCH_ROWS: usize = 1_000;

/// A usable index for one space, or the reason to scan instead.
pub(crate) enum IndexAccess {
    /// The index, with the vector file of a codes-only one when there is one.
    Ready(Arc<AutoIndex>, Option<Arc<VectorFile>>),
    /// No index yet (a background build is running): scan the stored vectors.
    Scan,
}

/// What an episodic index snapshot is tied to: the embedding space, this
/// store's identity and the episodic revision the index reflects.
/// A snapshot is loaded only under the same signature (and the same ids).
pub(crate) fn snapshot_signature(tx: &mut dyn StoreTx, space: &str, revision: i64) -> Result<String> {
    let store = tx.revision(Counter::StoreId)?;
    Ok(format!("{space} | store {store:016x} | episodic revision {revision}"))
}

/// What a vector file is tied to: the embedding space and this store's
/// identity. Not the revision: a row's vector in one space never changes
/// and row ids are never reused, so a file stays true for the rows it
/// holds however the table moves on.
pub(crate) fn vector_file_signature(tx: &mut dyn StoreTx, space: &str) -> Result<String> {
    let store = tx.revision(Counter::StoreId)?;
    Ok(format!("{space} | store {store:016x}"))
}

/// Where the vector file of the index whose snapshot is at `snapshot` lives.
pub(crate) fn vector_file_path(snapshot: &Path) -> PathBuf {
    snapshot.with_file_name(EPISODIC_VECTORS_FILE_NAME)
}

/// The vector file at `path` if it is this store's, in `space`, of
/// `dim`-wide vectors; `None` (logged) otherwise.
pub(crate) fn open_vector_file(
    tx: &mut dyn StoreTx,
    path: &Path,
    space: &str,
    dim: usize,
) -> Result<Option<VectorFile>> {
    if !path.exists() {
        return Ok(None);
    }
    let signature = vector_file_signature(tx, space)?;
    Ok(match VectorFile::open(path, &signature, dim) {
        Ok(file) => Some(file),
        Err(error) => {
            tracing::info!(%error, "episodic vector file not usable; hits are re-scored from the store");
            None
        }
    })
}

/// Reads the vectors of some rows from the store: `(id, vector)` of those
/// still active.
pub(crate) type FetchVectors<'a> = dyn FnMut(&[i64]) -> Result<Vec<(u64, Vec<f32>)>> + 'a;

/// Writes the vector file at `path`, tied to `signature`, for the rows
/// `ids` (ascending): each vector from `old` when it holds the row,
/// otherwise from `fetch`, asked for a thousand rows at a time (rows it
/// does not answer, no longer active, are left out). Answers the file,
/// opened.
pub(crate) fn write_vector_file(
    path: &Path,
    signature: &str,
    dim: usize,
    ids: &[u64],
    old: Option<&VectorFile>,
    fetch: &mut FetchVectors<'_>,
) -> Result<VectorFile> {
    const FETCH_BATCH: usize = 1_000;
    let error = || index_error("writing the episodic vector file");
    let mut writer = VectorFileWriter::create(path, signature, dim).map_err(error())?;
    for batch in ids.chunks(FETCH_BATCH) {
        let mut rows: Vec<(u64, Vec<f32>)> = Vec::with_capacity(batch.len());
        let mut missing = Vec::new();
        for &id in batch {
            match old.and_then(|file| file.get(id).ok().flatten()) {
                Some(vector) => rows.push((id, vector)),
                None => missing.push(id as i64),
            }
        }
        if !missing.is_empty() {
            rows.extend(fetch(&missing)?);
            rows.sort_unstable_by_key(|(id, _)| *id);
        }
        for (id, vector) in rows.iter().filter(|(_, vector)| vector.len() == dim) {
            writer.push(*id, vector).map_err(error())?;
        }
    }
    writer.finish().map_err(error())?;
    VectorFile::open(path, signature, dim).map_err(index_error("opening the episodic vector file"))
}

/// The exact cosines of `query` with the vectors of rows `ids` in `file`,
/// in their order, each when the file holds it and `index` knows it for
/// the row's own (its codes); `None` sends the caller to the store. The
/// records are read together ([`VectorFile::get_many`]): those the page
/// cache lost are asked of the disk at once. A vector the index does not know
/// for the row's, or a damaged record, distrusts the whole file: it is
/// not this store's as it stands (a database restored from an older copy,
/// say), and is written again by the next
/// [`MemoryDb::save_episodic_vector_file`](crate::MemoryDb::save_episodic_vector_file).
pub(crate) fn file_cosines(index: &AutoIndex, file: &VectorFile, query: &[f32], ids: &[u64]) -> Vec<Option<f32>> {
    if file.is_distrusted() {
        return vec![None; ids.len()];
    }
    let vectors = match file.get_many(ids) {
        Ok(vectors) => vectors,
        Err(error) => {
            tracing::warn!(%error, "episodic vector file damaged; hits are re-scored from the store until it is written again");
            return vec![None; ids.len()];
        }
    };
    ids.iter()
        .zip(vectors)
        .map(|(&id, vector)| {
            let vector = vector?;
            if file.is_distrusted() {
                return None;
            }
            if vector.len() != query.len() || !matches!(index.holds_vector(id, &vector), Ok(Some(true))) {
                file.distrust();
                tracing::warn!(
                    id,
                    "episodic vector file disagrees with the index; hits are re-scored from the store until it is written again"
                );
                return None;
            }
            Some(cairn_memory_vector::dot(query, &vector))
        })
        .collect()
}

/// Active row ids with a vector in `space`, with the vectors.
pub(crate) fn load_vectors(tx: &mut dyn StoreTx, space: &str, only: Option<&[i64]>) -> Result<Vec<(u64, Vec<f32>)>> {
    tx.episodic_vectors(space, only)?
        .into_iter()
        .map(|(id, blob)| {
            let vector = blob_vector(&blob).ok_or_else(|| MemoryError::CorruptRow {
                table: "episodic_memories",
                reason: format!("vector of row {id} is not a whole number of floats"),
            })?;
            Ok((id as u64, vector))
        })
        .collect()
}

pub(crate) fn active_vector_ids(tx: &mut dyn StoreTx, space: &str) -> Result<HashSet<u64>> {
    Ok(tx.episodic_vector_ids(space)?.into_iter().map(|id| id as u64).collect())
}

pub(crate) fn index_error(operation: &'static str) -> impl FnOnce(cairn_memory_vector::VectorError) -> MemoryError {
    move |source| MemoryError::Index { operation, source }
}

/// The episodic index's configuration for `dim`-wide vectors: a graph of
/// more than `full_vectors_max` vectors keeps codes only.
pub(crate) fn index_config(dim: usize, full_vectors_max: usize) -> IndexConfig {
    IndexConfig::new(dim).with_full_vectors_max(full_vectors_max)
}

/// The index of every active vector of `space`, built from one flat
/// buffer the rows are streamed into (one copy of the vectors in memory).
pub(crate) fn build_index_from_table(tx: &mut dyn StoreTx, space: &str, config: IndexConfig) -> Result<AutoIndex> {
    build_index_and_vector_file(tx, space, config, None).map(|(index, _)| index)
}

/// [`build_index_from_table`], and for an index that keeps codes only the
/// vector file at `vectors` too, written from the same read of the table
/// (a failure to write it is logged: searches then read the store).
pub(crate) fn build_index_and_vector_file(
    tx: &mut dyn StoreTx,
    space: &str,
    config: IndexConfig,
    vectors: Option<&Path>,
) -> Result<(AutoIndex, Option<VectorFile>)> {
    let dim = config.dim;
    let mut ids = Vec::new();
    let mut data: Vec<f32> = Vec::new();
    tx.each_episodic_vector(space, &mut |id, blob| {
        if blob.len() != dim * 4 {
            return Err(MemoryError::CorruptRow {
                table: "episodic_memories",
                reason: format!("vector of row {id} holds {} bytes, not {dim} floats", blob.len()),
            });
        }
        ids.push(id as u64);
        data.extend(blob.chunks_exact(4).map(|bytes| f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])));
        Ok(())
    })?;
    data.shrink_to_fit();
    let file = match vectors.filter(|_| config.keeps_codes_only(ids.len())) {
        Some(path) => {
            let written = vector_file_signature(tx, space).and_then(|signature| {
                write_sorted_vector_file(path, &signature, dim, &ids, &data)
                    .map_err(index_error("writing the episodic vector file"))
            });
            written.unwrap_or_else(|error| {
                tracing::warn!(%error, "could not write the episodic vector file; hits are re-scored from the store");
                None
            })
        }
        None => None,
    };
    let index = AutoIndex::build_flat(config, ids, data).map_err(index_error("building the episodic index"))?;
    Ok((index, file))
}

/// Writes `ids`' vectors (`dim` floats each in `data`, in the order of
/// `ids`) to a vector file at `path`, in id order, and opens it.
fn write_sorted_vector_file(
    path: &Path,
    signature: &str,
    dim: usize,
    ids: &[u64],
    data: &[f32],
) -> cairn_memory_vector::Result<Option<VectorFile>> {
    let mut order: Vec<usize> = (0..ids.len()).collect();
    order.sort_unstable_by_key(|&position| ids[position]);
    let mut writer = VectorFileWriter::create(path, signature, dim)?;
    for position in order {
        writer.push(ids[position], &data[position * dim..(position + 1) * dim])?;
    }
    writer.finish()?;
    VectorFile::open(path, signature, dim).map(Some)
}

/// The top `k` hits of `index` for `query` with exact cosines: as they are
/// from an index that keeps its vectors; re-scored (and re-sorted) from
/// one that keeps codes only, with the vectors of `vectors` or, for rows it
/// lacks, the stored ones. Rows no longer active are dropped. `probes`
/// carries what earlier probes of the same query learned.
pub(crate) fn exact_hits(
    tx: &mut dyn StoreTx,
    index: &AutoIndex,
    vectors: Option<&VectorFile>,
    space: &str,
    query: &[f32],
    k: usize,
    probes: &mut Probes,
) -> Result<Vec<cairn_memory_vector::Hit>> {
    let search = |k: usize| index.search(query, k).map_err(index_error("searching episodic vectors"));
    if index.exact() {
        return search(k);
    }
    // The codes' order is close to the cosines': a margin of extra hits
    // lets a row just past the k-th by its codes move in.
    let margin = |k: usize| k + k / 4 + 8;
    let fetch = margin(k);
    if probes.fetched < fetch && probes.codes.len() == probes.fetched {
        let wanted = fetch.max(margin(probes.next.min(2 * k)));
        probes.codes = search(wanted)?;
        probes.fetched = wanted;
    }
    let Probes { known, codes, .. } = probes;
    let hits = &codes[..fetch.min(codes.len())];
    let unknown: Vec<u64> = hits.iter().map(|hit| hit.id).filter(|id| !known.contains_key(id)).collect();
    let cosines = match vectors {
        Some(file) => file_cosines(index, file, query, &unknown),
        None => vec![None; unknown.len()],
    };
    let mut missing: Vec<i64> = Vec::new();
    for (id, cosine) in unknown.into_iter().zip(cosines) {
        known.insert(id, cosine);
        if cosine.is_none() {
            missing.push(id as i64);
        }
    }
    if !missing.is_empty() {
        for (id, blob) in tx.episodic_vectors(space, Some(&missing))? {
            let cosine = blob_vector(&blob)
                .filter(|vector| vector.len() == query.len())
                .map(|vector| cairn_memory_vector::dot(query, &vector));
            known.insert(id as u64, cosine);
        }
    }
    let mut exact: Vec<cairn_memory_vector::Hit> = hits
        .iter()
        .filter_map(|hit| Some(cairn_memory_vector::Hit { id: hit.id, cosine: known.get(&hit.id).copied().flatten()? }))
        .collect();
    exact.sort_by(cairn_memory_vector::Hit::rank_cmp);
    exact.truncate(k);
    Ok(exact)
}

/// What the probes of one search have learned, so a wider probe repeats
/// none of a narrower one's work: the exact cosine (or `None` for a row
/// no longer active) of every hit re-scored so far, and the codes search
/// of the widest reach asked for yet. A codes search reaches as far as the
/// next probe the caller may ask for (`next`), up to twice its own: the
/// graph's walk for a few more hits costs far less than a second walk.
#[derive(Default)]
pub(crate) struct Probes {
    known: HashMap<u64, Option<f32>>,
    codes: Vec<cairn_memory_vector::Hit>,
    fetched: usize,
    /// The widest probe that may follow; 0 for none.
    pub(crate) next: usize,
}

/// An index and whether it came from the snapshot file.
pub(crate) struct LoadedIndex {
    pub(crate) index: AutoIndex,
    pub(crate) from_snapshot: bool,
    /// The vector file of a codes-only index, when there is a usable one.
    pub(crate) vectors: Option<VectorFile>,
}

/// The index of the active vectors of `space`: loaded from the snapshot at
/// `snapshot` when it holds exactly those rows, in that space, of this
/// database at its current episodic revision; otherwise built from the
/// table (and then written there, so the next start loads it). Within one
/// database row ids are never reused and a row's vector in one space never
/// changes, so matching ids, space, store and revision mean matching
/// vectors.
pub(crate) fn load_or_build_index(
    tx: &mut dyn StoreTx,
    space: &str,
    config: IndexConfig,
    snapshot: Option<&Path>,
) -> Result<LoadedIndex> {
    let dim = config.dim;
    // Read first: rows written after it make the snapshot written below
    // carry an older revision than the table, so it is rebuilt next time.
    let revision = tx.revision(Counter::Episodic)?;
    let signature = snapshot_signature(tx, space, revision)?;
    if let Some(path) = snapshot.filter(|path| path.exists()) {
        let expected = SnapshotExpectation::from_ids(signature.as_str(), dim, active_vector_ids(tx, space)?);
        match AutoIndex::restore(path, &expected, config.clone()) {
            Ok(index) => {
                tracing::info!(rows = index.len(), "episodic index loaded from its snapshot");
                let vectors = match index.exact() {
                    true => None,
                    false => open_vector_file(tx, &vector_file_path(path), space, dim)?,
                };
                return Ok(LoadedIndex { index, from_snapshot: true, vectors });
            }
            Err(error) => tracing::info!(%error, "episodic index snapshot not usable; building from the table"),
        }
    }
    let vectors = snapshot.map(vector_file_path);
    let (index, vectors) = build_index_and_vector_file(tx, space, config, vectors.as_deref())?;
    if let Some(path) = snapshot
        && index.len() > cairn_memory_vector::constants::AUTO_CROSSOVER
        && let Err(error) = index.snapshot(path, &signature)
    {
        tracing::warn!(%error, "could not write the episodic index snapshot");
    }
    Ok(LoadedIndex { index, from_snapshot: false, vectors })
}

/// Waits up to `timeout` for `embedder` to be ready.
pub(crate) fn wait_ready(embedder: &dyn EmbeddingBackend, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if embedder.is_ready() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(READY_POLL);
    }
}

/// Whether an index of `indexed` vectors that lacks `arriving` stored ones
/// is better built again from the table than caught up: when more arrived
/// (another process imported them, a bulk load) than it holds, and more
/// than the exact-scan crossover. A build links the graph on every core; a
/// catch-up adds one vector at a time.
fn rebuild_rather_than_add(indexed: usize, arriving: usize) -> bool {
    arriving > cairn_memory_vector::constants::AUTO_CROSSOVER && arriving > indexed
}

impl Episodic<'_> {
    /// The index for `space`, brought in step with the table through `tx`
    /// (the caller holds the episodic lock). Builds inline up to the
    /// flat/HNSW crossover; larger stores are built on a background thread
    /// while callers scan.
    pub(crate) fn index_locked(&self, tx: &mut dyn StoreTx, space: &str, dim: usize) -> Result<IndexAccess> {
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
    pub(crate) fn start_background_build(&self, space: &str, dim: usize, rows: usize) {
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
    pub(crate) fn wait_for_background_build(&self) {
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
    pub(crate) fn install_background_build(&self, space: String, result: Result<LoadedIndex>) {
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
    pub(crate) fn index_if_current(&self, tx: &mut dyn StoreTx, space: &str) -> Result<IndexAccess> {
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

    /// The work of [`MemoryDb::episodic_index_status`](crate::MemoryDb::episodic_index_status).
    pub(crate) fn episodic_index_status(&self) -> Result<EpisodicIndexStatus> {
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

    /// The work of [`MemoryDb::build_episodic_index`](crate::MemoryDb::build_episodic_index).
    pub(crate) fn build_episodic_index(&self) -> Result<EpisodicIndexStatus> {
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

    /// The work of [`MemoryDb::wait_for_change`](crate::MemoryDb::wait_for_change).
    pub(crate) fn wait_for_change(&self, seen: u64, timeout: Duration) -> u64 {
        self.rows().wait_for_change(seen, timeout)
    }

    /// The work of [`MemoryDb::catch_up`](crate::MemoryDb::catch_up).
    pub(crate) fn catch_up(&self) -> Result<()> {
        // A snapshot no search has asked for is not kept: the first
        // semantic search builds it, and catch-ups keep it current after.
        self.host.catch_up_semantic()?;
        let [revision, text_revision] = self.rows().read("reading the revisions", |tx| super::write::revisions(tx))?;
        if let KeywordAccess::Own { start: true } = self.keyword_index_for_read(text_revision)? {
            self.start_keyword_build();
        }
        if let Some(embedder) = self.embedder().filter(|embedder| embedder.is_ready()) {
            self.index_for_read(revision, &space_signature(&*embedder), embedder.dim())?;
        }
        Ok(())
    }

    /// The work of [`MemoryDb::warm_up`](crate::MemoryDb::warm_up).
    pub(crate) fn warm_up(&self) -> Result<()> {
        let [revision, text_revision] = self.rows().read("reading the revisions", |tx| super::write::revisions(tx))?;
        if let KeywordAccess::Own { start: true } = self.keyword_index_for_read(text_revision)? {
            self.start_keyword_build();
        }
        if let Some(embedder) = self.embedder() {
            self.index_for_read(revision, &space_signature(&*embedder), embedder.dim())?;
        }
        Ok(())
    }

    /// The work of [`MemoryDb::episodic_snapshot_path`](crate::MemoryDb::episodic_snapshot_path).
    pub(crate) fn episodic_snapshot_path(&self) -> Option<PathBuf> {
        let path = self.path();
        path.parent().filter(|dir| !dir.as_os_str().is_empty()).map(|dir| dir.join(EPISODIC_INDEX_FILE_NAME))
    }

    /// The work of [`MemoryDb::save_episodic_index`](crate::MemoryDb::save_episodic_index).
    pub(crate) fn save_episodic_index(&self) -> Result<bool> {
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

    /// The work of [`MemoryDb::save_episodic_vector_file`](crate::MemoryDb::save_episodic_vector_file).
    pub(crate) fn save_episodic_vector_file(&self) -> Result<bool> {
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

    /// The work of [`MemoryDb::backfill_missing_embeddings`](crate::MemoryDb::backfill_missing_embeddings).
    pub(crate) fn backfill_missing_embeddings(
        &self,
        progress: Option<&dyn Fn(usize, usize)>,
    ) -> Result<BackfillReport> {
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

    /// The work of [`MemoryDb::backfill_progress`](crate::MemoryDb::backfill_progress).
    pub(crate) fn backfill_progress(&self) -> BackfillProgress {
        self.episodic.backfill.lock().clone()
    }

    /// Embeds every active row without a vector in `embedder`'s space,
    /// while the embedder of `generation` is current.
    pub(crate) fn backfill_into(
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
    pub(crate) fn count_missing(&self, space: Option<&str>) -> Result<usize> {
        self.rows()
            .read("counting episodic rows without vectors", |tx| tx.episodic_missing_count(space))
            .map(|count| count as usize)
    }

    /// Stores backfilled vectors under the writer lock; `None` when the
    /// space generation moved on (nothing stored).
    pub(crate) fn store_vectors(
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

    /// The work of [`MemoryDb::reembed_progress`](crate::MemoryDb::reembed_progress).
    pub(crate) fn reembed_progress(&self) -> ReembedProgress {
        self.episodic.progress.lock().clone()
    }

    /// The work of [`MemoryDb::recorded_episodic_space`](crate::MemoryDb::recorded_episodic_space).
    pub(crate) fn recorded_episodic_space(&self) -> Result<Option<String>> {
        self.rows().read("reading the recorded space", |tx| tx.setting(SPACE_SETTING))
    }

    /// The work of [`MemoryDb::swap_embedding_model`](crate::MemoryDb::swap_embedding_model).
    pub(crate) fn swap_embedding_model(
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

    pub(crate) fn run_swap(
        &self,
        next: &Arc<dyn EmbeddingBackend>,
        generation: u64,
        ready_timeout: Duration,
    ) -> Result<()> {
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
