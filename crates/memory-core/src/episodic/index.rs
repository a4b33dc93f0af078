//! The in-memory vector index of episodic rows: building it, keeping it in
//! step with the table, backfilling missing vectors and swapping models.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use super::keyword::KeywordState;
use super::{BackfillProgress, ReembedProgress};
use crate::constants::EPISODIC_VECTORS_FILE_NAME;
use crate::error::{MemoryError, Result};
use crate::store::{Counter, StoreTx, blob_vector};
use cairn_embedder::EmbeddingBackend;
use cairn_memory_vector::{AutoIndex, IndexConfig, SnapshotExpectation, VectorFile, VectorFileWriter};
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
