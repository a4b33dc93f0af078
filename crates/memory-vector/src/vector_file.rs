//! Full-precision vectors kept on disk, read one at a time.
//!
//! An index that keeps SQ8 codes only ranks by approximate cosines; a
//! caller that needs the exact ones reads the full vectors back. A
//! [`VectorFile`] is where they come from without a round trip to the row
//! store: the ids stay in memory (8 bytes a row), the vectors stay in the
//! file and each lookup is one positioned read, served from the operating
//! system's page cache once warm (which is not the process's resident
//! memory).
//!
//! Layout (all integers little-endian):
//!
//! ```text
//! head    = b"CAIRNVFL" | format_version u32 | dim u32 | space_len u32 | space (UTF-8)
//! records = count × (vector f32 × dim | check u64)
//! tail    = ids u64 × count | count u64 | tail_hash u64 | b"CAIRNVFL"
//! ```
//!
//! Ids are strictly ascending, one record each in the same order. `check`
//! hashes the record's id and vector bytes, so a damaged or misplaced
//! record is caught when it is read; `tail_hash` covers the head and the
//! ids, checked when the file is opened. The file is written under a
//! temporary name and renamed into place, so a reader sees a whole file or
//! none.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::error::{Result, VectorError};
use crate::snapshot::ContentHash;

const MAGIC: &[u8; 8] = b"CAIRNVFL";
/// Version of the layout above.
pub const VECTOR_FILE_FORMAT_VERSION: u32 = 1;
/// `count | tail_hash | magic`.
const TRAILER_BYTES: u64 = 8 + 8 + 8;

/// The check of one record: four independent lanes of multiply-rotate
/// mixing over 8-byte words (a record is read on every lookup, so the
/// lanes keep it off the critical path), folded with the id.
fn record_check(id: u64, vector_bytes: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut lanes = [0xcbf2_9ce4_8422_2325 ^ id, 0x9e37_79b9_7f4a_7c15, 0xbf58_476d_1ce4_e5b9, 0x94d0_49bb_1331_11eb];
    let mut blocks = vector_bytes.chunks_exact(32);
    for block in &mut blocks {
        for (lane, word) in lanes.iter_mut().zip(block.chunks_exact(8)) {
            let word = u64::from_le_bytes(word.try_into().expect("chunks_exact yields 8 bytes"));
            *lane = (lane.rotate_left(5) ^ word).wrapping_mul(K);
        }
    }
    let mut tail = ContentHash::new();
    tail.update(blocks.remainder());
    let folded = lanes
        .iter()
        .fold(tail.finish() ^ (vector_bytes.len() as u64), |acc, lane| (acc.rotate_left(17) ^ lane).wrapping_mul(K));
    let mut last = ContentHash::new();
    last.update(&folded.to_le_bytes());
    last.update(&id.to_le_bytes());
    last.finish()
}

fn head_bytes(space: &str, dim: usize) -> Vec<u8> {
    let mut head = Vec::with_capacity(20 + space.len());
    head.extend_from_slice(MAGIC);
    head.extend_from_slice(&VECTOR_FILE_FORMAT_VERSION.to_le_bytes());
    head.extend_from_slice(&(dim as u32).to_le_bytes());
    head.extend_from_slice(&(space.len() as u32).to_le_bytes());
    head.extend_from_slice(space.as_bytes());
    head
}

/// Writes a [`VectorFile`] row by row, in ascending id order, without
/// holding the vectors in memory. Dropped before [`finish`](Self::finish),
/// it leaves any file already at the path as it was.
pub struct VectorFileWriter {
    out: BufWriter<cairn_files::AtomicFile>,
    path: PathBuf,
    head: Vec<u8>,
    dim: usize,
    ids: Vec<u64>,
}

impl std::fmt::Debug for VectorFileWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VectorFileWriter").field("path", &self.path).field("rows", &self.ids.len()).finish()
    }
}

fn files_error(error: cairn_files::FilesError) -> VectorError {
    let (operation, path, source) = error.into_parts();
    VectorError::io(operation, path, source)
}

impl VectorFileWriter {
    /// Starts a file of `dim`-wide vectors of the embedding space `space`
    /// at `path` (its directory must exist).
    pub fn create(path: &Path, space: &str, dim: usize) -> Result<Self> {
        if dim == 0 {
            return Err(VectorError::ZeroDimension);
        }
        let file = cairn_files::AtomicFile::create(path).map_err(files_error)?;
        let head = head_bytes(space, dim);
        let mut out = BufWriter::with_capacity(1 << 20, file);
        out.write_all(&head).map_err(|e| VectorError::io("writing vector file", path, e))?;
        Ok(VectorFileWriter { out, path: path.to_owned(), head, dim, ids: Vec::new() })
    }

    /// Appends `vector` as row `id`; ids must come in strictly ascending
    /// order and every vector must be `dim` wide and finite.
    pub fn push(&mut self, id: u64, vector: &[f32]) -> Result<()> {
        if vector.len() != self.dim {
            return Err(VectorError::DimensionMismatch { expected: self.dim, actual: vector.len() });
        }
        if let Some((index, value)) = vector.iter().enumerate().find(|(_, value)| !value.is_finite()) {
            return Err(VectorError::NonFinite { index, value: *value });
        }
        if let Some(&after) = self.ids.last().filter(|last| **last >= id) {
            return Err(VectorError::OutOfOrder { id, after });
        }
        let mut bytes = Vec::with_capacity(self.dim * 4 + 8);
        for value in vector {
            bytes.extend_from_slice(&value.to_le_bytes());
        }
        let check = record_check(id, &bytes);
        bytes.extend_from_slice(&check.to_le_bytes());
        self.out.write_all(&bytes).map_err(|e| VectorError::io("writing vector file", &self.path, e))?;
        self.ids.push(id);
        Ok(())
    }

    /// Rows pushed so far.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether no row was pushed.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Writes the id table, syncs and renames the file into place.
    pub fn finish(mut self) -> Result<()> {
        let path = self.path.clone();
        let io = |e| VectorError::io("writing vector file", &path, e);
        let mut tail = Vec::with_capacity(self.ids.len() * 8 + TRAILER_BYTES as usize);
        for id in &self.ids {
            tail.extend_from_slice(&id.to_le_bytes());
        }
        tail.extend_from_slice(&(self.ids.len() as u64).to_le_bytes());
        let mut hash = ContentHash::new();
        hash.update(&self.head);
        hash.update(&tail);
        tail.extend_from_slice(&hash.finish().to_le_bytes());
        tail.extend_from_slice(MAGIC);
        self.out.write_all(&tail).map_err(io)?;
        let file = self.out.into_inner().map_err(|e| io(e.into_error()))?;
        file.commit().map_err(files_error)
    }
}

/// A vector file opened for lookups: its ids in memory, its vectors on
/// disk. Any number of threads may read at once.
pub struct VectorFile {
    /// Set by [`distrust`](Self::distrust) or by a record failing its check.
    distrusted: std::sync::atomic::AtomicBool,
    file: File,
    path: PathBuf,
    dim: usize,
    records_at: u64,
    ids: Vec<u64>,
}

impl std::fmt::Debug for VectorFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VectorFile").field("path", &self.path).field("rows", &self.ids.len()).finish()
    }
}

impl VectorFile {
    /// Opens the file at `path`, checking its head and id table, and that
    /// it holds `dim`-wide vectors of the embedding space `space`
    /// ([`VectorError::SnapshotMismatch`] otherwise; a damaged file is
    /// [`VectorError::CorruptSnapshot`]). Records are checked as they are
    /// read.
    pub fn open(path: &Path, space: &str, dim: usize) -> Result<Self> {
        let file = File::open(path).map_err(|e| VectorError::io("opening vector file", path, e))?;
        let len = file.metadata().map_err(|e| VectorError::io("reading vector file", path, e))?.len();
        let corrupt = |reason: &str| VectorError::corrupt(path, reason.to_owned());
        let min = 20 + TRAILER_BYTES;
        if len < min {
            return Err(corrupt("shorter than its head and trailer"));
        }
        let read = |offset: u64, n: usize| -> Result<Vec<u8>> {
            let mut bytes = vec![0; n];
            read_at(&file, &mut bytes, offset).map_err(|e| VectorError::io("reading vector file", path, e))?;
            Ok(bytes)
        };
        let trailer = read(len - TRAILER_BYTES, TRAILER_BYTES as usize)?;
        let word = |bytes: &[u8], at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        let half = |bytes: &[u8], at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        if &trailer[16..24] != MAGIC {
            return Err(corrupt("no vector file trailer"));
        }
        let count = word(&trailer, 0);
        let stored_hash = word(&trailer, 8);
        let fixed = read(0, 20)?;
        if &fixed[..8] != MAGIC {
            return Err(corrupt("not a vector file"));
        }
        let version = half(&fixed, 8);
        if version != VECTOR_FILE_FORMAT_VERSION {
            return Err(corrupt(&format!("format version {version}, expected {VECTOR_FILE_FORMAT_VERSION}")));
        }
        let file_dim = half(&fixed, 12) as usize;
        let space_len = u64::from(half(&fixed, 16));
        let record = (file_dim as u64).checked_mul(4).and_then(|bytes| bytes.checked_add(8));
        let expected_len = record
            .and_then(|record| record.checked_add(8)?.checked_mul(count))
            .and_then(|body| body.checked_add(20 + space_len + TRAILER_BYTES));
        if file_dim == 0 || expected_len != Some(len) {
            return Err(corrupt("its length does not match its head and trailer"));
        }
        let head = read(0, (20 + space_len) as usize)?;
        let ids_at = len - TRAILER_BYTES - count * 8;
        let id_bytes = read(ids_at, (count * 8) as usize)?;
        let mut hash = ContentHash::new();
        hash.update(&head);
        let mut tail = id_bytes;
        tail.extend_from_slice(&count.to_le_bytes());
        hash.update(&tail);
        if hash.finish() != stored_hash {
            return Err(corrupt("checksum mismatch in its head or id table"));
        }
        let file_space = std::str::from_utf8(&head[20..]).map_err(|_| corrupt("space is not UTF-8"))?;
        if file_space != space {
            return Err(VectorError::mismatch(path, format!("space is {file_space:?}, expected {space:?}")));
        }
        if file_dim != dim {
            return Err(VectorError::mismatch(path, format!("dimension is {file_dim}, expected {dim}")));
        }
        let ids: Vec<u64> = tail[..(count * 8) as usize].chunks_exact(8).map(|bytes| word(bytes, 0)).collect();
        if ids.windows(2).any(|pair| pair[0] >= pair[1]) {
            return Err(corrupt("ids are not strictly ascending"));
        }
        Ok(VectorFile {
            distrusted: std::sync::atomic::AtomicBool::new(false),
            file,
            path: path.to_owned(),
            dim,
            records_at: 20 + space_len,
            ids,
        })
    }

    /// The vector dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// How many rows the file holds.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether the file holds no row.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Whether the file holds row `id`.
    pub fn contains(&self, id: u64) -> bool {
        self.position(id).is_some()
    }

    /// Where row `id` is among the ids. Row ids are mostly dense, so the
    /// first guess is where `id` would be were they evenly spread, and a
    /// binary search of what is left follows: one cache miss for a dense
    /// table instead of a binary search's twenty.
    fn position(&self, id: u64) -> Option<usize> {
        let ids = &self.ids;
        let (&first, &last) = (ids.first()?, ids.last()?);
        if id < first || id > last {
            return None;
        }
        let span = (last - first).max(1) as u128;
        let guess = ((u128::from(id - first) * (ids.len() as u128 - 1)) / span) as usize;
        let guess = guess.min(ids.len() - 1);
        let range = match ids[guess].cmp(&id) {
            std::cmp::Ordering::Equal => return Some(guess),
            // Ids are strictly ascending: `id` is at most `id - ids[guess]` places away.
            std::cmp::Ordering::Less => guess + 1..(guess + 1 + (id - ids[guess]) as usize).min(ids.len()),
            std::cmp::Ordering::Greater => guess.saturating_sub((ids[guess] - id) as usize)..guess,
        };
        ids[range.clone()].binary_search(&id).ok().map(|at| range.start + at)
    }

    /// The rows' ids, ascending.
    pub fn ids(&self) -> &[u64] {
        &self.ids
    }

    /// Bytes this value keeps in memory (the id table).
    pub fn memory_bytes(&self) -> usize {
        self.ids.capacity() * 8
    }

    /// Marks the file as not to be believed (a caller found a vector in
    /// it that is not its row's); [`is_distrusted`](Self::is_distrusted)
    /// answers it from then on.
    pub fn distrust(&self) {
        self.distrusted.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether [`distrust`](Self::distrust) was called or a record failed
    /// its check: the file should be written again.
    pub fn is_distrusted(&self) -> bool {
        self.distrusted.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The vector of row `id`, `None` when the file does not hold it; a
    /// record whose check fails is [`VectorError::CorruptSnapshot`] (and
    /// the file is distrusted from then on).
    pub fn get(&self, id: u64) -> Result<Option<Vec<f32>>> {
        let Some(position) = self.position(id) else { return Ok(None) };
        self.record(position).map(Some)
    }

    /// The vectors of `ids`, in their order (`None` for an id the file
    /// does not hold). Records already in the page cache are read straight
    /// away; the others are all asked of the disk before any of them is
    /// waited for, so a search whose records were evicted waits for about
    /// one read, not one per record.
    pub fn get_many(&self, ids: &[u64]) -> Result<Vec<Option<Vec<f32>>>> {
        let record = self.record_bytes();
        let positions: Vec<Option<usize>> = ids.iter().map(|&id| self.position(id)).collect();
        let mut records: Vec<Option<Vec<u8>>> = vec![None; ids.len()];
        let mut uncached: Vec<usize> = Vec::new();
        for (at, position) in positions.iter().enumerate() {
            let Some(position) = *position else { continue };
            let mut bytes = vec![0u8; record];
            if read_cached(&self.file, &mut bytes, self.record_offset(position))
                .map_err(|e| VectorError::io("reading vector file", &self.path, e))?
            {
                records[at] = Some(bytes);
            } else {
                uncached.push(at);
            }
        }
        for &at in &uncached {
            let position = positions[at].expect("only held ids are read");
            read_ahead(&self.file, self.record_offset(position), record);
        }
        for &at in &uncached {
            let position = positions[at].expect("only held ids are read");
            let mut bytes = vec![0u8; record];
            read_at(&self.file, &mut bytes, self.record_offset(position))
                .map_err(|e| VectorError::io("reading vector file", &self.path, e))?;
            records[at] = Some(bytes);
        }
        positions
            .iter()
            .zip(records)
            .map(|(position, bytes)| match (position, bytes) {
                (Some(position), Some(bytes)) => self.decode(*position, &bytes).map(Some),
                _ => Ok(None),
            })
            .collect()
    }

    fn record_bytes(&self) -> usize {
        self.dim * 4 + 8
    }

    fn record_offset(&self, position: usize) -> u64 {
        self.records_at + (position * self.record_bytes()) as u64
    }

    /// The vector of the `position`-th row.
    fn record(&self, position: usize) -> Result<Vec<f32>> {
        let mut bytes = vec![0u8; self.record_bytes()];
        read_at(&self.file, &mut bytes, self.record_offset(position))
            .map_err(|e| VectorError::io("reading vector file", &self.path, e))?;
        self.decode(position, &bytes)
    }

    /// The `position`-th row's record, checked, as its vector.
    fn decode(&self, position: usize, bytes: &[u8]) -> Result<Vec<f32>> {
        let id = self.ids[position];
        let (vector_bytes, check) = bytes.split_at(self.dim * 4);
        if record_check(id, vector_bytes) != u64::from_le_bytes(check.try_into().expect("8 bytes")) {
            self.distrust();
            return Err(VectorError::corrupt(&self.path, format!("the record of row {id} fails its check")));
        }
        Ok(vector_bytes
            .chunks_exact(4)
            .map(|bytes| f32::from_le_bytes(bytes.try_into().expect("chunks_exact yields 4 bytes")))
            .collect())
    }

    /// Every row in id order, read sequentially (for rewriting the file).
    pub fn rows(&self) -> impl Iterator<Item = Result<(u64, Vec<f32>)>> + '_ {
        (0..self.ids.len()).map(|position| Ok((self.ids[position], self.record(position)?)))
    }
}

/// Fills `bytes` from `offset` only if the page cache holds all of them
/// (`RWF_NOWAIT`): `false` when the disk would have to be read.
#[cfg(target_os = "linux")]
fn read_cached(file: &File, bytes: &mut [u8], offset: u64) -> std::io::Result<bool> {
    let wanted = bytes.len();
    match rustix::io::preadv2(file, &mut [std::io::IoSliceMut::new(bytes)], offset, rustix::io::ReadWriteFlags::NOWAIT)
    {
        Ok(read) => Ok(read == wanted),
        // EAGAIN: not cached; EOPNOTSUPP and EINVAL: a file system or kernel without it.
        Err(rustix::io::Errno::AGAIN | rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::INVAL) => Ok(false),
        Err(error) => Err(error.into()),
    }
}

#[cfg(not(target_os = "linux"))]
fn read_cached(_file: &File, _bytes: &mut [u8], _offset: u64) -> std::io::Result<bool> {
    Ok(false)
}

/// Asks the kernel to start reading `len` bytes at `offset` into the page
/// cache, without waiting. Only advice: a refusal changes nothing.
#[cfg(target_os = "linux")]
fn read_ahead(file: &File, offset: u64, len: usize) {
    let len = std::num::NonZeroU64::new(len as u64);
    let _ = rustix::fs::fadvise(file, offset, len, rustix::fs::Advice::WillNeed);
}

#[cfg(not(target_os = "linux"))]
fn read_ahead(_file: &File, _offset: u64, _len: usize) {}

#[cfg(unix)]
fn read_at(file: &File, bytes: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, bytes, offset)
}

#[cfg(windows)]
fn read_at(file: &File, mut bytes: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    while !bytes.is_empty() {
        match std::os::windows::fs::FileExt::seek_read(file, bytes, offset) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                bytes = &mut bytes[n..];
                offset += n as u64;
            }
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPACE: &str = "test-model/4";

    fn vector(id: u64) -> Vec<f32> {
        (0..4).map(|i| (id as f32) + i as f32 / 10.0).collect()
    }

    fn write(path: &Path, ids: &[u64]) {
        let mut writer = VectorFileWriter::create(path, SPACE, 4).unwrap();
        for &id in ids {
            writer.push(id, &vector(id)).unwrap();
        }
        writer.finish().unwrap();
    }

    #[test]
    fn rows_read_back_as_written_and_absent_ids_are_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vectors");
        write(&path, &[3, 7, 40]);
        let file = VectorFile::open(&path, SPACE, 4).unwrap();
        assert_eq!(file.ids(), &[3, 7, 40]);
        assert_eq!(file.get(7).unwrap(), Some(vector(7)));
        assert_eq!(file.get(40).unwrap(), Some(vector(40)));
        assert_eq!(file.get(8).unwrap(), None);
        let all: Vec<_> = file.rows().map(Result::unwrap).collect();
        assert_eq!(all, vec![(3, vector(3)), (7, vector(7)), (40, vector(40))]);
    }

    #[test]
    fn rows_read_together_come_back_in_the_order_asked_whether_cached_or_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vectors");
        let ids: Vec<u64> = (0..60_000u64).map(|n| n * 3 + 1).collect();
        write(&path, &ids);
        let file = VectorFile::open(&path, SPACE, 4).unwrap();
        // Held ids in any order, repeated, and ids the file lacks.
        let asked = [179_998, 4, 4, 2, 1, 90_001, 60_001, 500_000, 31];
        let expected: Vec<Option<Vec<f32>>> = asked.iter().map(|&id| file.get(id).unwrap()).collect();
        assert_eq!(expected.iter().filter(|vector| vector.is_none()).count(), 2);
        assert_eq!(file.get_many(&asked).unwrap(), expected);
        assert!(file.get_many(&[]).unwrap().is_empty());
        // With the file's pages dropped from the page cache (where the file
        // system allows it), the records come back from the disk as they were.
        #[cfg(target_os = "linux")]
        {
            let record = (4 * 4 + 8) as u64;
            let dropped = std::num::NonZeroU64::new(std::fs::metadata(&path).unwrap().len());
            rustix::fs::fadvise(&file.file, 0, dropped, rustix::fs::Advice::DontNeed).unwrap();
            let evicted = asked
                .iter()
                .filter_map(|&id| file.position(id))
                .filter(|&position| {
                    let mut bytes = vec![0u8; record as usize];
                    !read_cached(&file.file, &mut bytes, file.record_offset(position)).unwrap()
                })
                .count();
            assert_eq!(file.get_many(&asked).unwrap(), expected, "{evicted} records read back from the disk");
        }
    }

    #[test]
    fn every_row_is_found_however_the_ids_are_spread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vectors");
        let spreads: [Vec<u64>; 4] = [
            (1..=500).collect(),
            (1..=300).chain(10_000..10_050).chain([u64::MAX - 1]).collect(),
            (0..200).map(|i| i * i * 7 + 3).collect(),
            vec![42],
        ];
        for ids in spreads {
            write(&path, &ids);
            let file = VectorFile::open(&path, SPACE, 4).unwrap();
            for &id in &ids {
                assert_eq!(file.get(id).unwrap(), Some(vector(id)), "row {id}");
            }
            let absent = ids.iter().flat_map(|id| [id.wrapping_sub(1), id + 1]).filter(|id| !ids.contains(id));
            for id in absent.chain([0, u64::MAX]) {
                assert!(!file.contains(id), "row {id} is not there");
            }
        }
    }

    #[test]
    fn an_empty_file_opens_and_holds_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vectors");
        write(&path, &[]);
        let file = VectorFile::open(&path, SPACE, 4).unwrap();
        assert!(file.is_empty());
        assert_eq!(file.get(1).unwrap(), None);
    }

    #[test]
    fn the_writer_refuses_rows_out_of_order_of_another_width_or_not_finite() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vectors");
        let mut writer = VectorFileWriter::create(&path, SPACE, 4).unwrap();
        writer.push(5, &vector(5)).unwrap();
        assert!(matches!(writer.push(5, &vector(5)), Err(VectorError::OutOfOrder { .. })));
        assert!(matches!(writer.push(4, &vector(4)), Err(VectorError::OutOfOrder { .. })));
        assert!(matches!(writer.push(6, &[1.0; 3]), Err(VectorError::DimensionMismatch { expected: 4, actual: 3 })));
        assert!(matches!(writer.push(6, &[1.0, f32::NAN, 0.0, 0.0]), Err(VectorError::NonFinite { index: 1, .. })));
        assert!(matches!(VectorFileWriter::create(&path, SPACE, 0), Err(VectorError::ZeroDimension)));
    }

    #[test]
    fn a_writer_dropped_unfinished_leaves_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vectors");
        write(&path, &[1, 2]);
        let mut writer = VectorFileWriter::create(&path, SPACE, 4).unwrap();
        writer.push(9, &vector(9)).unwrap();
        drop(writer);
        assert_eq!(VectorFile::open(&path, SPACE, 4).unwrap().ids(), &[1, 2]);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary file is left");
    }

    #[test]
    fn another_space_or_width_is_a_mismatch() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vectors");
        write(&path, &[1]);
        assert!(matches!(VectorFile::open(&path, "other/4", 4), Err(VectorError::SnapshotMismatch { .. })));
        assert!(matches!(VectorFile::open(&path, SPACE, 8), Err(VectorError::SnapshotMismatch { .. })));
    }

    #[test]
    fn damage_anywhere_is_caught_at_open_or_at_the_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vectors");
        write(&path, &[1, 2, 3]);
        let good = std::fs::read(&path).unwrap();
        let head = 20 + SPACE.len();
        let record = 4 * 4 + 8;
        // A flipped byte in the head, the id table or the trailer: refused at open.
        let ids_at = head + 3 * record;
        for at in [0, 9, 13, head - 1, ids_at, ids_at + 8, good.len() - 20, good.len() - 12, good.len() - 1] {
            let mut bad = good.clone();
            bad[at] ^= 0x40;
            std::fs::write(&path, &bad).unwrap();
            assert!(VectorFile::open(&path, SPACE, 4).is_err(), "a flipped byte at {at} is caught at open");
        }
        // Truncated or extended: refused at open.
        for bad in [good[..good.len() - 1].to_vec(), [good.clone(), vec![0]].concat(), good[..10].to_vec()] {
            std::fs::write(&path, &bad).unwrap();
            assert!(matches!(VectorFile::open(&path, SPACE, 4), Err(VectorError::CorruptSnapshot { .. })));
        }
        // A flipped byte in a record: the file opens, that record is refused, the others read.
        let mut bad = good.clone();
        bad[head + record + 5] ^= 0x01;
        std::fs::write(&path, &bad).unwrap();
        let file = VectorFile::open(&path, SPACE, 4).unwrap();
        assert!(!file.is_distrusted());
        assert!(matches!(file.get_many(&[1, 2]), Err(VectorError::CorruptSnapshot { .. })), "read together too");
        assert!(matches!(file.get(2), Err(VectorError::CorruptSnapshot { .. })));
        assert!(file.is_distrusted(), "a record failing its check distrusts the file");
        assert_eq!(file.get(1).unwrap(), Some(vector(1)));
        assert_eq!(file.get(3).unwrap(), Some(vector(3)));
        // Two records swapped: each fails its check, as its id is in the check.
        let mut swapped = good.clone();
        let (first, second) = (head..head + record, head + record..head + 2 * record);
        let copy = good[first.clone()].to_vec();
        swapped.copy_within(second.clone(), first.start);
        swapped[second].copy_from_slice(&copy);
        std::fs::write(&path, &swapped).unwrap();
        let file = VectorFile::open(&path, SPACE, 4).unwrap();
        assert!(file.get(1).is_err() && file.get(2).is_err());
    }
}
