//! The FTS5 keyword index over the Markdown files, `<home>/memory_index.db`.
//!
//! Derived data only: every row can be rebuilt from the files, so a corrupt
//! or unreadable index is moved aside and rebuilt instead of failing the
//! caller. One chunk per history entry and per paragraph of the preferences
//! and projects files, each with its file, date, time and first line.
//!
//! Ranking runs on an in-memory BM25 copy of the chunks ([`Bm25Index`]):
//! FTS5's `bm25()` costs microseconds per matching chunk, too slow when a
//! query word is in half a year of history. The copy follows the table by
//! rowid, caught up after this handle's writes and whenever
//! `PRAGMA data_version` says another connection committed; FTS5 still
//! renders the snippets of the hits.

use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use parking_lot::Mutex;
use serde::Serialize;

use super::history::{parse_day_file_name, split_chunks};
use crate::bm25::Bm25Index;
use crate::constants::{INDEX_SCHEMA_VERSION, MAX_SEARCH_QUERY_TERMS};
use crate::error::{MemoryError, Result, StorageErrorKind};
use crate::keywords::{self, OnlyStopwords};
use crate::store::sqlite::files_index::{ChunksFile, ChunksTx, StoredChunk};

/// One keyword hit in the Markdown files.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileHit {
    /// Path relative to the memory directory, e.g. `history/2026-11-30.md`.
    pub file: String,
    /// Day of a history entry; `None` for preferences and projects.
    pub date: Option<String>,
    /// `HH:MM` of a history entry with a header.
    pub time: Option<String>,
    /// First line of the chunk in its file (1-based).
    pub line: usize,
    /// A short excerpt with the matches in `[` `]`.
    pub snippet: String,
    /// bm25 score: more negative is a better match.
    pub score: f64,
}

/// What a rebuild or refresh of the index did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct IndexReport {
    /// Files (re)indexed.
    pub files_indexed: usize,
    /// Files whose rows were removed because the file is gone.
    pub files_removed: usize,
    /// Files left as they were (same size and modification time).
    pub files_unchanged: usize,
    /// Chunks written.
    pub chunks_written: usize,
    /// True when a damaged index file was moved aside first.
    pub healed: bool,
}

/// A file the index covers: its path relative to the memory directory.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct SourceFile {
    pub(crate) relative: String,
}

pub(crate) struct KeywordIndex {
    path: PathBuf,
    memory_dir: PathBuf,
    file: Mutex<Option<ChunksFile>>,
    /// The in-memory ranking copy; only touched with `file` locked.
    ranking: Mutex<Option<Ranking>>,
}

/// The BM25 copy of the chunks and the `data_version` it was synced at.
struct Ranking {
    index: Bm25Index,
    data_version: i64,
    /// Set by this handle's own writes, which `data_version` does not count.
    dirty: bool,
}

enum Opened {
    Ready,
    NeedsBuild { healed: bool },
}

impl KeywordIndex {
    pub(crate) fn new(path: PathBuf, memory_dir: PathBuf) -> Self {
        KeywordIndex { path, memory_dir, file: Mutex::new(None), ranking: Mutex::new(None) }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `operation` on an open, built index; a corrupt file is moved
    /// aside, rebuilt from the Markdown files, and the operation retried once.
    fn with_index<T>(&self, operation: impl Fn(&mut ChunksFile) -> Result<T>) -> Result<(T, bool)> {
        let mut slot = self.file.lock();
        let mut healed = false;
        for attempt in 0..2 {
            if slot.is_none() {
                // A new connection (or a rebuilt file): the copy starts over.
                *self.ranking.lock() = None;
                match self.open_connection() {
                    Ok((mut file, opened)) => {
                        if let Opened::NeedsBuild { healed: moved } = opened {
                            healed |= moved;
                            self.rebuild_on(&mut file, true)?;
                        }
                        *slot = Some(file);
                    }
                    Err(error) if attempt == 0 && is_damage(&error) => {
                        self.move_aside(&error)?;
                        healed = true;
                        continue;
                    }
                    Err(error) => return Err(error),
                }
            }
            let file = slot.as_mut().expect("the file was just opened");
            match operation(file) {
                Ok(value) => return Ok((value, healed)),
                Err(error) if attempt == 0 && is_damage(&error) => {
                    *slot = None;
                    self.move_aside(&error)?;
                    healed = true;
                }
                Err(error) => return Err(error),
            }
        }
        unreachable!("the second attempt returns")
    }

    fn open_connection(&self) -> Result<(ChunksFile, Opened)> {
        // A file that exists but carries no schema version was truncated or
        // never finished its first build: rebuild it and say so.
        let existed = self.path.exists();
        let (file, version) = ChunksFile::open(&self.path)?;
        let opened = match version {
            Some(version) if version == INDEX_SCHEMA_VERSION => Opened::Ready,
            Some(version) => {
                tracing::warn!(path = %self.path.display(), %version, "memory index has another schema; rebuilding it");
                Opened::NeedsBuild { healed: false }
            }
            None => {
                if existed {
                    tracing::warn!(
                        path = %self.path.display(),
                        "memory index was empty or lost its schema; rebuilding it from the Markdown files"
                    );
                    Opened::NeedsBuild { healed: true }
                } else {
                    Opened::NeedsBuild { healed: false }
                }
            }
        };
        Ok((file, opened))
    }

    /// Moves a damaged index file (and its WAL sidecars) aside.
    fn move_aside(&self, error: &MemoryError) -> Result<()> {
        let stamp = std::time::SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
        let aside = self.path.with_file_name(format!("memory_index.db.corrupt-{stamp}"));
        tracing::warn!(
            path = %self.path.display(),
            moved_to = %aside.display(),
            error = %error,
            "memory index is damaged; moved it aside and rebuilding it from the Markdown files"
        );
        if let Err(source) = std::fs::rename(&self.path, &aside)
            && source.kind() != std::io::ErrorKind::NotFound
        {
            return Err(MemoryError::Io { operation: "moving a damaged index aside to", path: aside, source });
        }
        for suffix in ["-wal", "-shm"] {
            let mut sidecar = self.path.clone().into_os_string();
            sidecar.push(suffix);
            let _ = std::fs::remove_file(PathBuf::from(sidecar));
        }
        Ok(())
    }

    /// Re-reads every Markdown file (`force`) or only those whose size or
    /// modification time changed, and drops rows of files that are gone.
    pub(crate) fn rebuild(&self, force: bool) -> Result<IndexReport> {
        let (mut report, healed) = self.with_index(|file| self.rebuild_on(file, force))?;
        report.healed |= healed;
        Ok(report)
    }

    fn rebuild_on(&self, file: &mut ChunksFile, force: bool) -> Result<IndexReport> {
        let sources = list_sources(&self.memory_dir)?;
        let report = file.write("rebuilding the keyword index", |tx| {
            let mut report = IndexReport::default();
            let mut known = tx.file_stamps()?;
            known.sort();
            if force {
                tx.clear()?;
            }
            for (relative, _, _) in &known {
                if !sources.iter().any(|source| &source.relative == relative) {
                    if !force {
                        tx.delete_file(relative)?;
                    }
                    report.files_removed += 1;
                }
            }
            for source in &sources {
                let stamp = file_stamp(&self.memory_dir.join(&source.relative));
                if !force
                    && let (Some(stamp), Ok(position)) =
                        (stamp, known.binary_search_by(|(path, _, _)| path.as_str().cmp(&source.relative)))
                    && (known[position].1, known[position].2) == stamp
                {
                    report.files_unchanged += 1;
                    continue;
                }
                report.chunks_written += index_file_on(tx, &self.memory_dir, &source.relative, !force)?;
                report.files_indexed += 1;
            }
            tx.set_schema_version(INDEX_SCHEMA_VERSION)?;
            Ok(report)
        })?;
        self.mark_changed();
        tracing::debug!(?report, "keyword index rebuilt");
        Ok(report)
    }

    /// Re-indexes one file (after this crate wrote it).
    pub(crate) fn update_file(&self, relative: &str) -> Result<()> {
        self.with_index(|file| {
            // The file is read inside the write transaction, so the last of
            // several concurrent updaters always indexes the newest content.
            file.write("updating the keyword index", |tx| index_file_on(tx, &self.memory_dir, relative, true))?;
            self.mark_changed();
            Ok(())
        })
        .map(|_| ())
    }

    /// Adds one appended history entry. The file's stamp moves to `after`
    /// only when the index was in step with the file before the append
    /// (`before`), so a concurrent hand edit is still seen by the next refresh.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn add_entry(
        &self,
        relative: &str,
        date: &str,
        time: &str,
        line: usize,
        text: &str,
        before: (i64, i64),
        after: (i64, i64),
    ) -> Result<()> {
        self.with_index(|file| {
            file.write("adding a history entry to the keyword index", |tx| {
                tx.delete_chunk_at(relative, line)?;
                tx.insert_chunk(text, relative, date, time, line)?;
                let in_step = match tx.stamp(relative)? {
                    Some(stored) => stored == before,
                    None => before.1 == 0,
                };
                if in_step {
                    tx.set_stamp(relative, after)?;
                }
                Ok(())
            })?;
            self.mark_changed();
            Ok(())
        })
        .map(|_| ())
    }

    /// Drops the rows of files that no longer exist.
    pub(crate) fn remove_files(&self, relatives: &[String]) -> Result<()> {
        if relatives.is_empty() {
            return Ok(());
        }
        self.with_index(|file| {
            file.write("updating the keyword index", |tx| {
                relatives.iter().try_for_each(|relative| tx.delete_file(relative))
            })?;
            self.mark_changed();
            Ok(())
        })
        .map(|_| ())
    }

    /// Records that this handle changed the table.
    fn mark_changed(&self) {
        if let Some(ranking) = self.ranking.lock().as_mut() {
            ranking.dirty = true;
        }
    }

    /// Brings the ranking copy in step with the table (by rowid) and runs
    /// `search` on it.
    fn ranked<T>(&self, file: &ChunksFile, search: impl FnOnce(&Bm25Index) -> T) -> Result<T> {
        let data_version = file.data_version()?;
        let mut ranking = self.ranking.lock();
        let ranking = ranking.get_or_insert_with(|| Ranking { index: Bm25Index::default(), data_version, dirty: true });
        if ranking.dirty || ranking.data_version != data_version {
            file.read("syncing the keyword ranking", |tx| {
                ranking.index.sync_to(&tx.rowids()?, |missing| tx.texts(missing))
            })?;
            ranking.data_version = data_version;
            ranking.dirty = false;
        }
        Ok(search(&ranking.index))
    }

    /// bm25-ranked search; the query is reduced to quoted terms so user text
    /// is never FTS5 syntax. Returns the hits and whether the index was healed.
    pub(crate) fn search(&self, query: &str, limit: usize) -> Result<(Vec<FileHit>, bool)> {
        let Some(match_expression) = sanitize_query(query) else { return Ok((Vec::new(), false)) };
        if limit == 0 {
            return Ok((Vec::new(), false));
        }
        let terms = crate::bm25::query_terms(query, MAX_SEARCH_QUERY_TERMS);
        self.with_index(|file| {
            if !terms.is_empty() {
                let ranked = self.ranked(file, |index| index.search(&terms, limit))?;
                let hits = ranked
                    .into_iter()
                    .map(|(rowid, score)| Ok(file.chunk(rowid)?.map(|chunk| hit(chunk, &terms, score))));
                return hits.filter_map(Result::transpose).collect();
            }
            // Only stopwords: FTS5 ranks them itself.
            Ok(file
                .fts_search(&match_expression, limit, SNIPPET_WORDS)?
                .into_iter()
                .map(|chunk| FileHit::at(chunk.path, chunk.date, chunk.time, chunk.line, chunk.snippet, chunk.bm25))
                .collect())
        })
    }
}

/// Tokens of a snippet: at most this many words around the best matches.
const SNIPPET_WORDS: usize = 16;

impl FileHit {
    /// A hit on the chunk of `file` at `line`; the index stores an empty
    /// date and time where a chunk has none.
    fn at(file: String, date: String, time: String, line: i64, snippet: String, score: f64) -> Self {
        FileHit {
            file,
            date: (!date.is_empty()).then_some(date),
            time: (!time.is_empty()).then_some(time),
            line: line as usize,
            snippet,
            score,
        }
    }
}

/// One ranked chunk as a hit, its snippet cut around the matching words.
fn hit(chunk: StoredChunk, terms: &[String], score: f64) -> FileHit {
    let snippet = snippet(&chunk.text, terms);
    FileHit::at(chunk.path, chunk.date, chunk.time, chunk.line, snippet, -score)
}

/// The window of [`SNIPPET_WORDS`] words of `text` holding the most words
/// whose stem is among `terms` (the earliest such window), matches in
/// `[` `]`, `…` where the text was cut, the text between words kept.
pub(crate) fn snippet(text: &str, terms: &[String]) -> String {
    let mut words: Vec<(usize, usize, bool)> = Vec::new();
    let mut start = None;
    for (at, c) in text.char_indices().chain(std::iter::once((text.len(), ' '))) {
        match (c.is_alphanumeric(), start) {
            (true, None) => start = Some(at),
            (false, Some(from)) => {
                let word = text[from..at].to_lowercase();
                let matched = terms.contains(&crate::keywords::stem(&word));
                words.push((from, at, matched));
                start = None;
            }
            _ => {}
        }
    }
    if words.is_empty() {
        return String::new();
    }
    let width = SNIPPET_WORDS.min(words.len());
    let mut best = (0, 0);
    let mut count = words[..width].iter().filter(|word| word.2).count();
    best.1 = count;
    for first in 1..=words.len() - width {
        count = count + usize::from(words[first + width - 1].2) - usize::from(words[first - 1].2);
        if count > best.1 {
            best = (first, count);
        }
    }
    let window = &words[best.0..best.0 + width];
    let mut out = String::new();
    if best.0 > 0 {
        out.push('…');
    }
    // An uncut edge keeps the text before the first or after the last word.
    let mut cursor = if best.0 == 0 { 0 } else { window[0].0 };
    for &(from, to, matched) in window {
        out.push_str(&text[cursor..from]);
        if matched {
            out.push('[');
            out.push_str(&text[from..to]);
            out.push(']');
        } else {
            out.push_str(&text[from..to]);
        }
        cursor = to;
    }
    if best.0 + width < words.len() {
        out.push('…');
    } else {
        out.push_str(text[cursor..].trim_end());
    }
    out
}

/// True for storage errors that mean the file is not a usable index.
fn is_damage(error: &MemoryError) -> bool {
    matches!(error.storage_kind(), Some(StorageErrorKind::Corrupt | StorageErrorKind::Io))
}

/// Every file the index covers, sorted: the two top-level files and the day files.
pub(crate) fn list_sources(memory_dir: &Path) -> Result<Vec<SourceFile>> {
    let mut sources = Vec::new();
    for name in [super::PREFERENCES_FILE, super::PROJECTS_FILE] {
        if memory_dir.join(name).is_file() {
            sources.push(SourceFile { relative: name.to_owned() });
        }
    }
    let history = memory_dir.join(super::HISTORY_DIR);
    match std::fs::read_dir(&history) {
        Ok(entries) => {
            for entry in entries.flatten() {
                let name = entry.file_name();
                let Some(name) = name.to_str() else { continue };
                if parse_day_file_name(name).is_some() && entry.file_type().map(|t| t.is_file()).unwrap_or(false) {
                    sources.push(SourceFile { relative: format!("{}/{name}", super::HISTORY_DIR) });
                }
            }
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => return Err(MemoryError::Io { operation: "listing", path: history, source }),
    }
    sources.sort();
    Ok(sources)
}

fn file_stamp(path: &Path) -> Option<(i64, i64)> {
    let metadata = std::fs::metadata(path).ok()?;
    let modified = metadata.modified().ok()?.duration_since(UNIX_EPOCH).ok()?;
    Some((modified.as_nanos() as i64, metadata.len() as i64))
}

/// Replaces the rows of one file with its current chunks; a missing file
/// just loses its rows. Returns the number of chunks written.
fn index_file_on(tx: &ChunksTx<'_>, memory_dir: &Path, relative: &str, delete_first: bool) -> Result<usize> {
    if delete_first {
        tx.delete_file(relative)?;
    }
    let path = memory_dir.join(relative);
    let stamp = file_stamp(&path);
    let content = match std::fs::read(&path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(source) => return Err(MemoryError::Io { operation: "reading for the index", path, source }),
    };
    let date = relative
        .strip_prefix(super::HISTORY_DIR)
        .and_then(|rest| rest.strip_prefix('/'))
        .and_then(parse_day_file_name)
        .map(|date| date.to_string());
    let chunks: Vec<(usize, &str, Option<&str>)> = if date.is_some() {
        split_chunks(&content).into_iter().map(|entry| (entry.line, entry.text, entry.time())).collect()
    } else {
        split_paragraphs(&content).into_iter().map(|(line, text)| (line, text, None)).collect()
    };
    for &(line, text, time) in &chunks {
        tx.insert_chunk(text, relative, date.as_deref().unwrap_or(""), time.unwrap_or(""), line)?;
    }
    if let Some(stamp) = stamp {
        tx.set_stamp(relative, stamp)?;
    }
    Ok(chunks.len())
}

/// Splits a preferences or projects file into blank-line separated
/// paragraphs, each with its first line; a heading starts a new paragraph.
pub(crate) fn split_paragraphs(content: &str) -> Vec<(usize, &str)> {
    let mut paragraphs = Vec::new();
    let mut start: Option<(usize, usize)> = None;
    let mut offset = 0;
    for (index, line) in content.split_inclusive('\n').enumerate() {
        let blank = line.trim().is_empty();
        let heading = line.starts_with('#');
        if let Some((start_byte, start_line)) = start
            && (blank || heading)
        {
            let text = content[start_byte..offset].trim();
            if !text.is_empty() {
                paragraphs.push((start_line, text));
            }
            start = None;
        }
        if !blank && start.is_none() {
            start = Some((offset, index + 1));
        }
        offset += line.len();
    }
    if let Some((start_byte, start_line)) = start {
        let text = content[start_byte..].trim();
        if !text.is_empty() {
            paragraphs.push((start_line, text));
        }
    }
    paragraphs
}

/// Turns user text into an FTS5 expression that can only be a disjunction
/// of quoted terms ([`keywords::fts_query`]). Stopwords and one-letter words
/// are dropped unless nothing else is left: a search for `the` still finds
/// the chunks holding it.
pub(crate) fn sanitize_query(query: &str) -> Option<String> {
    keywords::fts_query(query, MAX_SEARCH_QUERY_TERMS, OnlyStopwords::Search)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_cut_around_the_densest_window_and_mark_stems() {
        let terms = crate::bm25::query_terms("deploy gateway", 8);
        assert_eq!(snippet("Deploying the gateway, twice.", &terms), "[Deploying] the [gateway], twice.");
        let long: String = (0..40).map(|i| format!("w{i} ")).collect::<String>() + "deploys the gateways today";
        assert_eq!(
            snippet(&long, &terms),
            "…w27 w28 w29 w30 w31 w32 w33 w34 w35 w36 w37 w38 w39 [deploys] the [gateways]…"
        );
        assert_eq!(snippet("no match here", &terms), "no match here");
        assert_eq!(snippet("", &terms), "");
        assert_eq!(snippet("¿Qué? über-deploy!", &terms), "¿Qué? über-[deploy]!");
    }

    #[test]
    fn queries_become_quoted_terms_only() {
        assert_eq!(sanitize_query("deploy Friday"), Some("\"deploy\" OR \"friday\"".to_owned()));
        assert_eq!(
            sanitize_query("NEAR(a b) OR \"x\" * col:term -not ^start"),
            Some("\"near\" OR \"col\" OR \"term\" OR \"start\"".to_owned())
        );
        assert_eq!(sanitize_query("\"\" ** ()"), None);
        // Stopwords and one-letter words go, unless nothing else is left.
        assert_eq!(sanitize_query("what did we decide about the deploy"), Some("\"decide\" OR \"deploy\"".to_owned()));
        assert_eq!(sanitize_query("the"), Some("\"the\"".to_owned()));
        assert_eq!(sanitize_query("C or R?"), Some("\"c\" OR \"or\" OR \"r\"".to_owned()));
    }

    #[test]
    fn paragraphs_split_at_blank_lines_and_headings() {
        let content = "# Preferences\n- editor: helix\n- theme: dark\n\n## Work\nrust\n";
        assert_eq!(
            split_paragraphs(content),
            vec![(1, "# Preferences\n- editor: helix\n- theme: dark"), (5, "## Work\nrust")]
        );
    }
}
