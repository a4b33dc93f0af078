//! Snapshot files: header, checksums and atomic writes.
//!
//! Layout (all integers little-endian):
//!
//! ```text
//! b"CAIRNVEC" | format_version u32 | header_len u32 | header | body_len u64 | body | hash u64
//! header = kind u8 | dim u32 | count u64 | id_checksum u64 | space_len u32 | space (UTF-8)
//! ```
//!
//! `hash` covers header and body, so truncation and bit rot are caught
//! before anything is trusted. The file is written to a temporary file in
//! the destination directory, synced, and renamed over the destination.

use std::io::Write;
use std::path::Path;

use crate::constants::SNAPSHOT_FORMAT_VERSION;
use crate::error::{Result, VectorError};

const MAGIC: &[u8; 8] = b"CAIRNVEC";

/// Which index wrote a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SnapshotKind {
    /// A [`FlatIndex`](crate::FlatIndex): ids and vectors.
    Flat,
    /// An [`HnswIndex`](crate::HnswIndex): slot table plus graph files.
    Hnsw,
    /// An [`HnswIndex`](crate::HnswIndex) that keeps SQ8 codes only
    /// ([`HnswConfig::full_vectors`](crate::HnswConfig::full_vectors) off):
    /// slot table, codes and graph.
    HnswCodes,
}

impl SnapshotKind {
    fn code(self) -> u8 {
        match self {
            SnapshotKind::Flat => 1,
            SnapshotKind::Hnsw => 2,
            SnapshotKind::HnswCodes => 3,
        }
    }

    fn from_code(code: u8) -> Option<Self> {
        match code {
            1 => Some(SnapshotKind::Flat),
            2 => Some(SnapshotKind::Hnsw),
            3 => Some(SnapshotKind::HnswCodes),
            _ => None,
        }
    }
}

/// The identifying header of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotHeader {
    /// On-disk format version ([`SNAPSHOT_FORMAT_VERSION`] when written by
    /// this build).
    pub format_version: u32,
    /// Which index wrote it.
    pub kind: SnapshotKind,
    /// Vector dimension.
    pub dim: usize,
    /// Number of live vectors.
    pub count: usize,
    /// [`id_checksum`] of the live ids.
    pub id_checksum: u64,
    /// The caller's embedding-space signature (for example
    /// `"all-MiniLM-L6-v2/384"`): vectors from another model never mix.
    pub space: String,
}

/// What the caller knows about its own rows, to validate a snapshot against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotExpectation {
    /// Embedding-space signature the rows were embedded in.
    pub space: String,
    /// Vector dimension.
    pub dim: usize,
    /// Number of rows that have a vector.
    pub count: usize,
    /// [`id_checksum`] of those rows' ids.
    pub id_checksum: u64,
}

impl SnapshotExpectation {
    /// Builds the expectation from the caller's embedded row ids.
    pub fn from_ids(space: impl Into<String>, dim: usize, ids: impl IntoIterator<Item = u64>) -> Self {
        let mut count = 0usize;
        let checksum = id_checksum(ids.into_iter().inspect(|_| count += 1));
        SnapshotExpectation { space: space.into(), dim, count, id_checksum: checksum }
    }

    pub(crate) fn check(&self, header: &SnapshotHeader, path: &Path) -> Result<()> {
        if header.space != self.space {
            return Err(VectorError::mismatch(
                path,
                format!("embedding space is {:?}, expected {:?}", header.space, self.space),
            ));
        }
        if header.dim != self.dim {
            return Err(VectorError::mismatch(path, format!("dimension is {}, expected {}", header.dim, self.dim)));
        }
        if header.count != self.count {
            return Err(VectorError::mismatch(
                path,
                format!("holds {} vectors, expected {}", header.count, self.count),
            ));
        }
        if header.id_checksum != self.id_checksum {
            return Err(VectorError::mismatch(path, "id checksum differs from the caller's rows"));
        }
        Ok(())
    }
}

#[inline]
fn mix64(mut x: u64) -> u64 {
    // splitmix64 finaliser.
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Order-independent checksum of a set of ids, so a caller can compute it
/// over its rows in whatever order its store yields them.
pub fn id_checksum(ids: impl IntoIterator<Item = u64>) -> u64 {
    let mut sum = 0u64;
    let mut xor = 0u64;
    let mut count = 0u64;
    for id in ids {
        let h = mix64(id.wrapping_add(0x9e37_79b9_7f4a_7c15));
        sum = sum.wrapping_add(h);
        xor ^= h.rotate_left(17);
        count += 1;
    }
    mix64(sum ^ mix64(xor) ^ count.wrapping_mul(0xd6e8_feb8_6659_fd93))
}

/// Fast non-cryptographic hash of a byte stream, fed in pieces.
#[derive(Clone, Copy)]
pub(crate) struct ContentHash(u64);

impl ContentHash {
    pub(crate) fn new() -> Self {
        ContentHash(0xcbf2_9ce4_8422_2325)
    }

    pub(crate) fn update(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let w = u64::from_le_bytes(word.try_into().expect("chunks_exact yields 8 bytes"));
            self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
        for &b in words.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
        self.0 ^= bytes.len() as u64;
    }

    pub(crate) fn finish(self) -> u64 {
        mix64(self.0)
    }
}

/// Little-endian encoder for header and body sections.
#[derive(Default)]
pub(crate) struct Encoder {
    pub(crate) bytes: Vec<u8>,
}

impl Encoder {
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Encoder { bytes: Vec::with_capacity(capacity) }
    }
    pub(crate) fn u8(&mut self, v: u8) {
        self.bytes.push(v);
    }
    pub(crate) fn u32(&mut self, v: u32) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn str(&mut self, s: &str) {
        self.u32(s.len() as u32);
        self.bytes.extend_from_slice(s.as_bytes());
    }
    pub(crate) fn i8s(&mut self, values: &[i8]) {
        self.bytes.extend(values.iter().map(|v| v.to_le_bytes()[0]));
    }

    pub(crate) fn f32s(&mut self, values: &[f32]) {
        self.bytes.reserve(values.len() * 4);
        for v in values {
            self.bytes.extend_from_slice(&v.to_le_bytes());
        }
    }
}

/// Bounds-checked little-endian decoder; every short read is a
/// [`VectorError::CorruptSnapshot`].
pub(crate) struct Decoder<'a> {
    bytes: &'a [u8],
    path: &'a Path,
}

impl<'a> Decoder<'a> {
    pub(crate) fn new(bytes: &'a [u8], path: &'a Path) -> Self {
        Decoder { bytes, path }
    }

    pub(crate) fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if self.bytes.len() < n {
            return Err(VectorError::corrupt(self.path, format!("truncated while reading {what}")));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }
    pub(crate) fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.take(1, what)?[0])
    }
    pub(crate) fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4, what)?.try_into().expect("4 bytes")))
    }
    pub(crate) fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8, what)?.try_into().expect("8 bytes")))
    }
    pub(crate) fn usize(&mut self, what: &str) -> Result<usize> {
        let v = self.u64(what)?;
        usize::try_from(v).map_err(|_| VectorError::corrupt(self.path, format!("{what} {v} does not fit in memory")))
    }
    pub(crate) fn str(&mut self, what: &str) -> Result<String> {
        let len = self.u32(what)? as usize;
        let bytes = self.take(len, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| VectorError::corrupt(self.path, format!("{what} is not UTF-8")))
    }
    pub(crate) fn i8s(&mut self, n: usize, what: &str) -> Result<Vec<i8>> {
        Ok(self.take(n, what)?.iter().map(|&b| i8::from_le_bytes([b])).collect())
    }

    pub(crate) fn f32s(&mut self, n: usize, what: &str) -> Result<Vec<f32>> {
        let len =
            n.checked_mul(4).ok_or_else(|| VectorError::corrupt(self.path, format!("{what} length overflows")))?;
        let bytes = self.take(len, what)?;
        Ok(bytes.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))).collect())
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// Writes `sections` one after another to a temporary file beside `path`,
/// syncs it and renames it over `path`, then syncs the directory.
pub(crate) fn write_atomic(path: &Path, sections: &[&[u8]]) -> Result<()> {
    let files = |error: cairn_files::FilesError| {
        let (operation, path, source) = error.into_parts();
        VectorError::io(operation, path, source)
    };
    let mut temp = cairn_files::AtomicFile::create(path).map_err(files)?;
    {
        let mut out = std::io::BufWriter::with_capacity(1 << 20, temp.as_file_mut());
        for section in sections {
            out.write_all(section).map_err(|e| VectorError::io("writing snapshot", path, e))?;
        }
        out.flush().map_err(|e| VectorError::io("writing snapshot", path, e))?;
    }
    temp.commit().map_err(files)
}

/// Serialises a whole snapshot file: magic, version, header, body, hash.
pub(crate) fn write_snapshot(path: &Path, header: &SnapshotHeader, body: &[u8]) -> Result<()> {
    let mut head = Encoder::default();
    head.u8(header.kind.code());
    head.u32(header.dim as u32);
    head.u64(header.count as u64);
    head.u64(header.id_checksum);
    head.str(&header.space);

    let mut preamble = Encoder::with_capacity(32);
    preamble.bytes.extend_from_slice(MAGIC);
    preamble.u32(header.format_version);
    preamble.u32(head.bytes.len() as u32);
    let mut body_len = Encoder::default();
    body_len.u64(body.len() as u64);

    let mut hash = ContentHash::new();
    hash.update(&head.bytes);
    hash.update(body);
    let mut trailer = Encoder::default();
    trailer.u64(hash.finish());

    write_atomic(path, &[&preamble.bytes, &head.bytes, &body_len.bytes, body, &trailer.bytes])
}

/// A snapshot file read and integrity-checked, body not yet interpreted.
pub(crate) struct RawSnapshot {
    pub(crate) header: SnapshotHeader,
    pub(crate) bytes: Vec<u8>,
    body_range: std::ops::Range<usize>,
}

impl RawSnapshot {
    pub(crate) fn body(&self) -> &[u8] {
        &self.bytes[self.body_range.clone()]
    }
}

/// Reads `path`, checks magic, version, hash and `kind`.
pub(crate) fn read_snapshot(path: &Path, kind: SnapshotKind) -> Result<RawSnapshot> {
    let bytes = std::fs::read(path).map_err(|e| VectorError::io("reading snapshot", path, e))?;
    let mut d = Decoder::new(&bytes, path);
    if d.take(8, "magic")? != MAGIC {
        return Err(VectorError::corrupt(path, "not a Cairn vector snapshot (bad magic)"));
    }
    let format_version = d.u32("format version")?;
    if format_version != SNAPSHOT_FORMAT_VERSION {
        return Err(VectorError::mismatch(
            path,
            format!("format version {format_version}, this build reads {SNAPSHOT_FORMAT_VERSION}"),
        ));
    }
    let head_len = d.u32("header length")? as usize;
    let head_start = bytes.len() - d.bytes.len();
    let head = d.take(head_len, "header")?;
    let body_len = d.usize("body length")?;
    let body_start = bytes.len() - d.bytes.len();
    let body = d.take(body_len, "body")?;
    let stored_hash = d.u64("content hash")?;
    if !d.is_empty() {
        return Err(VectorError::corrupt(path, "trailing bytes after the content hash"));
    }
    let mut hash = ContentHash::new();
    hash.update(head);
    hash.update(body);
    if hash.finish() != stored_hash {
        return Err(VectorError::corrupt(path, "content hash mismatch"));
    }

    let mut h = Decoder::new(&bytes[head_start..head_start + head_len], path);
    let kind_code = h.u8("kind")?;
    let found_kind = SnapshotKind::from_code(kind_code)
        .ok_or_else(|| VectorError::corrupt(path, format!("unknown index kind {kind_code}")))?;
    if found_kind != kind {
        return Err(VectorError::mismatch(path, format!("written by a {found_kind:?} index, expected {kind:?}")));
    }
    let dim = h.u32("dimension")? as usize;
    let count = h.usize("count")?;
    let id_checksum = h.u64("id checksum")?;
    let space = h.str("embedding space")?;
    let header = SnapshotHeader { format_version, kind: found_kind, dim, count, id_checksum, space };
    Ok(RawSnapshot { header, body_range: body_start..body_start + body_len, bytes })
}

/// Reads only the header of a snapshot (still verifying its hash).
pub fn read_header(path: &Path) -> Result<SnapshotHeader> {
    for kind in [SnapshotKind::Flat, SnapshotKind::Hnsw, SnapshotKind::HnswCodes] {
        match read_snapshot(path, kind) {
            Ok(raw) => return Ok(raw.header),
            Err(VectorError::SnapshotMismatch { reason, .. }) if reason.starts_with("written by") => continue,
            Err(e) => return Err(e),
        }
    }
    Err(VectorError::corrupt(path, "unknown index kind"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_checksum_ignores_order_but_not_content() {
        assert_eq!(id_checksum([1, 2, 3]), id_checksum([3, 1, 2]));
        assert_ne!(id_checksum([1, 2, 3]), id_checksum([1, 2, 4]));
        assert_ne!(id_checksum([1, 2]), id_checksum([1, 2, 2]));
        assert_ne!(id_checksum([]), id_checksum([0]));
    }

    fn header() -> SnapshotHeader {
        SnapshotHeader {
            format_version: SNAPSHOT_FORMAT_VERSION,
            kind: SnapshotKind::Flat,
            dim: 3,
            count: 2,
            id_checksum: id_checksum([7, 8]),
            space: "test/3".into(),
        }
    }

    #[test]
    fn round_trip_and_every_corruption_is_caught() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.cvi");
        write_snapshot(&path, &header(), b"body bytes").unwrap();
        let raw = read_snapshot(&path, SnapshotKind::Flat).unwrap();
        assert_eq!(raw.header, header());
        assert_eq!(raw.body(), b"body bytes");
        assert_eq!(read_header(&path).unwrap(), header());
        assert!(matches!(read_snapshot(&path, SnapshotKind::Hnsw), Err(VectorError::SnapshotMismatch { .. })));

        let good = std::fs::read(&path).unwrap();
        for cut in [0, 5, 12, good.len() - 1] {
            std::fs::write(&path, &good[..cut]).unwrap();
            assert!(
                matches!(read_snapshot(&path, SnapshotKind::Flat), Err(VectorError::CorruptSnapshot { .. })),
                "cut {cut}"
            );
        }
        for flip in [20, good.len() - 12, good.len() - 1] {
            let mut bad = good.clone();
            bad[flip] ^= 0x40;
            std::fs::write(&path, &bad).unwrap();
            assert!(
                matches!(read_snapshot(&path, SnapshotKind::Flat), Err(VectorError::CorruptSnapshot { .. })),
                "flip {flip}"
            );
        }
        let mut future = good.clone();
        future[8] = 99;
        std::fs::write(&path, &future).unwrap();
        assert!(matches!(read_snapshot(&path, SnapshotKind::Flat), Err(VectorError::SnapshotMismatch { .. })));
    }

    #[test]
    fn expectation_checks_each_field() {
        let path = Path::new("x");
        let ok = SnapshotExpectation::from_ids("test/3", 3, [8, 7]);
        ok.check(&header(), path).unwrap();
        let cases = [
            SnapshotExpectation { space: "other/3".into(), ..ok.clone() },
            SnapshotExpectation { dim: 4, ..ok.clone() },
            SnapshotExpectation { count: 3, ..ok.clone() },
            SnapshotExpectation::from_ids("test/3", 3, [7, 9]),
        ];
        for case in cases {
            assert!(matches!(case.check(&header(), path), Err(VectorError::SnapshotMismatch { .. })), "{case:?}");
        }
    }

    #[test]
    fn atomic_write_leaves_no_temporary_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.cvi");
        write_snapshot(&path, &header(), b"one").unwrap();
        write_snapshot(&path, &header(), b"two").unwrap();
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("x.cvi")]);
        assert_eq!(read_snapshot(&path, SnapshotKind::Flat).unwrap().body(), b"two");
    }
}
