//! The in-memory vector index of episodic rows: building it, keeping it in
//! step with the table, backfilling missing vectors and swapping models.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use super::keyword::KeywordState;
use super::{BackfillProgress, ReembedProgress};
use crate::error::{MemoryError, Result};
use crate::store::{Counter, StoreTx, blob_vector};
use cairn_embedder::EmbeddingBackend;
use cairn_memory_vector::{AutoIndex, IndexConfig, SnapshotExpectation};
use parking_lot::{Mutex, RwLock};

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
    Ready(Arc<AutoIndex>),
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
    AutoIndex::build_flat(config, ids, data).map_err(index_error("building the episodic index"))
}

/// `hits` of `index` for `query` with exact cosines: as they are from an
/// index that keeps its vectors; re-scored with the stored vectors (and
/// re-sorted) from one that keeps codes only. Rows no longer active are
/// dropped. `known` keeps the exact cosines (or `None` for a row no longer
/// active) read so far for this query, so a wider probe reads only the
/// rows the narrower one did not.
pub(crate) fn exact_hits(
    tx: &mut dyn StoreTx,
    index: &AutoIndex,
    space: &str,
    query: &[f32],
    k: usize,
    known: &mut HashMap<u64, Option<f32>>,
) -> Result<Vec<cairn_memory_vector::Hit>> {
    let search = |k: usize| index.search(query, k).map_err(index_error("searching episodic vectors"));
    if index.exact() {
        return search(k);
    }
    // The codes' order is close to the cosines': a margin of extra hits
    // lets a row just past the k-th by its codes move in.
    let hits = search(k + k / 4 + 8)?;
    let missing: Vec<i64> = hits.iter().filter(|hit| !known.contains_key(&hit.id)).map(|hit| hit.id as i64).collect();
    if !missing.is_empty() {
        for id in &missing {
            known.insert(*id as u64, None);
        }
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

/// An index and whether it came from the snapshot file.
pub(crate) struct LoadedIndex {
    pub(crate) index: AutoIndex,
    pub(crate) from_snapshot: bool,
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
                return Ok(LoadedIndex { index, from_snapshot: true });
            }
            Err(error) => tracing::info!(%error, "episodic index snapshot not usable; building from the table"),
        }
    }
    let index = build_index_from_table(tx, space, config)?;
    if let Some(path) = snapshot
        && index.len() > cairn_memory_vector::constants::AUTO_CROSSOVER
        && let Err(error) = index.snapshot(path, &signature)
    {
        tracing::warn!(%error, "could not write the episodic index snapshot");
    }
    Ok(LoadedIndex { index, from_snapshot: false })
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
