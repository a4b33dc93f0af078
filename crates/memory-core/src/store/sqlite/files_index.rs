//! The file of the Markdown layer's keyword index, `<home>/memory_index.db`:
//! an FTS5 table of chunks, the size and modification time of each file
//! they came from, and a rowid sequence that is never reused. What a chunk
//! is, when a file is read again and how a damaged file is healed are the
//! Markdown layer's rules (`files::index`); this module holds their SQL.

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};

use crate::constants::BUSY_TIMEOUT_MS;
use crate::error::{MemoryError, Result};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, mtime_ns INTEGER NOT NULL, size INTEGER NOT NULL);
-- Hands out chunk rowids that are never reused (AUTOINCREMENT), so the
-- in-memory ranking can follow the table by rowid alone.
CREATE TABLE IF NOT EXISTS chunk_ids (id INTEGER PRIMARY KEY AUTOINCREMENT);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks USING fts5(
    text, path UNINDEXED, date UNINDEXED, time UNINDEXED, line UNINDEXED,
    tokenize = 'porter unicode61'
);
";

/// Missing rows read one by one up to this many; more are read in one pass
/// over the table, which beats point reads (a first sync).
const POINT_READS: usize = 64;

/// One open `memory_index.db`.
pub(crate) struct ChunksFile {
    connection: Connection,
}

/// One chunk as stored: an empty date and time for the preferences and
/// projects files, an empty time for a history entry without a header.
pub(crate) struct StoredChunk {
    pub(crate) path: String,
    pub(crate) date: String,
    pub(crate) time: String,
    pub(crate) line: i64,
    pub(crate) text: String,
}

/// One chunk as FTS5 ranks it: its snippet and `bm25()` (lower is better).
pub(crate) struct RankedChunk {
    pub(crate) path: String,
    pub(crate) date: String,
    pub(crate) time: String,
    pub(crate) line: i64,
    pub(crate) snippet: String,
    pub(crate) bm25: f64,
}

impl ChunksFile {
    /// Opens `path` (created when missing) with its schema, and answers the
    /// schema version it records (none in a new, emptied or unfinished file).
    pub(crate) fn open(path: &Path) -> Result<(Self, Option<String>)> {
        let operation = "opening memory_index.db";
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let connection = Connection::open_with_flags(path, flags).map_err(MemoryError::sqlite(operation))?;
        connection
            .busy_timeout(Duration::from_millis(BUSY_TIMEOUT_MS))
            .map_err(MemoryError::sqlite("setting the index busy timeout"))?;
        connection.set_prepared_statement_cache_capacity(16);
        let _: String = connection
            .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
            .map_err(MemoryError::sqlite(operation))?;
        connection.pragma_update(None, "synchronous", "NORMAL").map_err(MemoryError::sqlite(operation))?;
        connection.execute_batch(SCHEMA).map_err(MemoryError::sqlite("creating the index schema"))?;
        let version: Option<String> = connection
            .query_row("SELECT value FROM meta WHERE key = 'schema'", [], |row| row.get(0))
            .optional()
            .map_err(MemoryError::sqlite("reading the index schema version"))?;
        Ok((Self { connection }, version))
    }

    /// Runs `work` in one immediate write transaction, committed when it
    /// succeeds and rolled back when it fails.
    pub(crate) fn write<T>(
        &mut self,
        operation: &'static str,
        work: impl FnOnce(&ChunksTx<'_>) -> Result<T>,
    ) -> Result<T> {
        let tx = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(MemoryError::sqlite(operation))?;
        let chunks = ChunksTx { tx, operation };
        let value = work(&chunks)?;
        chunks.tx.commit().map_err(MemoryError::sqlite(operation))?;
        Ok(value)
    }

    /// Runs `work` on one snapshot of the file (a read transaction).
    pub(crate) fn read<T>(&self, operation: &'static str, work: impl FnOnce(&ChunksTx<'_>) -> Result<T>) -> Result<T> {
        let tx = self.connection.unchecked_transaction().map_err(MemoryError::sqlite(operation))?;
        work(&ChunksTx { tx, operation })
    }

    /// `PRAGMA data_version`: moves when another connection commits.
    pub(crate) fn data_version(&self) -> Result<i64> {
        self.connection
            .query_row("PRAGMA data_version", [], |row| row.get(0))
            .map_err(MemoryError::sqlite("syncing the keyword ranking"))
    }

    /// The chunk at `rowid`, if it is still there.
    pub(crate) fn chunk(&self, rowid: u64) -> Result<Option<StoredChunk>> {
        self.connection
            .prepare_cached("SELECT path, date, time, line, text FROM chunks WHERE rowid = ?1")
            .and_then(|mut statement| {
                statement
                    .query_row([rowid as i64], |row| {
                        Ok(StoredChunk {
                            path: row.get(0)?,
                            date: row.get(1)?,
                            time: row.get(2)?,
                            line: row.get(3)?,
                            text: row.get(4)?,
                        })
                    })
                    .optional()
            })
            .map_err(MemoryError::sqlite("reading a keyword hit"))
    }

    /// The best `limit` chunks for an FTS5 `match_expression`, as FTS5
    /// ranks them, each with a snippet of `snippet_words` tokens.
    pub(crate) fn fts_search(
        &self,
        match_expression: &str,
        limit: usize,
        snippet_words: usize,
    ) -> Result<Vec<RankedChunk>> {
        let operation = "searching the keyword index";
        let mut statement = self
            .connection
            .prepare_cached(
                "SELECT path, date, time, line, snippet(chunks, 0, '[', ']', '…', ?3), bm25(chunks)
                 FROM chunks WHERE chunks MATCH ?1 ORDER BY bm25(chunks) LIMIT ?2",
            )
            .map_err(MemoryError::sqlite(operation))?;
        let rows = statement
            .query_map(params![match_expression, limit as i64, snippet_words as i64], |row| {
                Ok(RankedChunk {
                    path: row.get(0)?,
                    date: row.get(1)?,
                    time: row.get(2)?,
                    line: row.get(3)?,
                    snippet: row.get(4)?,
                    bm25: row.get(5)?,
                })
            })
            .map_err(MemoryError::sqlite(operation))?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(MemoryError::sqlite(operation))
    }
}

/// The rows of `memory_index.db` inside one transaction.
pub(crate) struct ChunksTx<'c> {
    tx: rusqlite::Transaction<'c>,
    operation: &'static str,
}

impl ChunksTx<'_> {
    /// Every file's path, modification time (ns) and size.
    pub(crate) fn file_stamps(&self) -> Result<Vec<(String, i64, i64)>> {
        let mut statement = self
            .tx
            .prepare_cached("SELECT path, mtime_ns, size FROM files")
            .map_err(MemoryError::sqlite(self.operation))?;
        let rows = statement
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
            .map_err(MemoryError::sqlite(self.operation))?;
        rows.collect::<rusqlite::Result<_>>().map_err(MemoryError::sqlite(self.operation))
    }

    /// The modification time and size recorded for `relative`.
    pub(crate) fn stamp(&self, relative: &str) -> Result<Option<(i64, i64)>> {
        self.tx
            .query_row("SELECT mtime_ns, size FROM files WHERE path = ?1", [relative], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })
            .optional()
            .map_err(MemoryError::sqlite(self.operation))
    }

    /// Records the modification time and size `relative` was indexed at.
    pub(crate) fn set_stamp(&self, relative: &str, (mtime_ns, size): (i64, i64)) -> Result<()> {
        self.tx
            .prepare_cached(
                "INSERT INTO files (path, mtime_ns, size) VALUES (?1, ?2, ?3)
                 ON CONFLICT(path) DO UPDATE SET mtime_ns = excluded.mtime_ns, size = excluded.size",
            )
            .and_then(|mut statement| statement.execute(params![relative, mtime_ns, size]))
            .map_err(MemoryError::sqlite(self.operation))?;
        Ok(())
    }

    /// Removes every chunk and every file's stamp.
    pub(crate) fn clear(&self) -> Result<()> {
        self.tx.execute_batch("DELETE FROM chunks; DELETE FROM files;").map_err(MemoryError::sqlite(self.operation))
    }

    /// Removes the chunks and the stamp of `relative`.
    pub(crate) fn delete_file(&self, relative: &str) -> Result<()> {
        self.tx
            .execute("DELETE FROM chunks WHERE path = ?1", [relative])
            .map_err(MemoryError::sqlite(self.operation))?;
        self.tx
            .execute("DELETE FROM files WHERE path = ?1", [relative])
            .map_err(MemoryError::sqlite(self.operation))?;
        Ok(())
    }

    /// Removes the chunk of `relative` that starts at `line`.
    pub(crate) fn delete_chunk_at(&self, relative: &str, line: usize) -> Result<()> {
        self.tx
            .execute("DELETE FROM chunks WHERE path = ?1 AND line = ?2", params![relative, line as i64])
            .map_err(MemoryError::sqlite(self.operation))?;
        Ok(())
    }

    /// Adds a chunk under a rowid never used before in this file.
    pub(crate) fn insert_chunk(&self, text: &str, relative: &str, date: &str, time: &str, line: usize) -> Result<()> {
        let id = self.next_chunk_id()?;
        self.tx
            .prepare_cached("INSERT INTO chunks (rowid, text, path, date, time, line) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")
            .and_then(|mut statement| statement.execute(params![id, text, relative, date, time, line as i64]))
            .map_err(MemoryError::sqlite(self.operation))?;
        Ok(())
    }

    fn next_chunk_id(&self) -> Result<i64> {
        let operation = "numbering a chunk";
        self.tx
            .prepare_cached("INSERT INTO chunk_ids DEFAULT VALUES")
            .and_then(|mut statement| statement.execute([]))
            .map_err(MemoryError::sqlite(operation))?;
        let id = self.tx.last_insert_rowid();
        self.tx
            .prepare_cached("DELETE FROM chunk_ids")
            .and_then(|mut statement| statement.execute([]))
            .map_err(MemoryError::sqlite(operation))?;
        Ok(id)
    }

    /// Records the schema version the file was built under.
    pub(crate) fn set_schema_version(&self, version: &str) -> Result<()> {
        self.tx
            .execute(
                "INSERT INTO meta (key, value) VALUES ('schema', ?1) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                [version],
            )
            .map_err(MemoryError::sqlite(self.operation))?;
        Ok(())
    }

    /// The rowid of every chunk.
    pub(crate) fn rowids(&self) -> Result<HashSet<u64>> {
        self.tx
            .prepare_cached("SELECT rowid FROM chunks")
            .and_then(|mut statement| {
                statement.query_map([], |row| row.get::<_, i64>(0).map(|id| id as u64))?.collect()
            })
            .map_err(MemoryError::sqlite(self.operation))
    }

    /// The texts of the chunks at `rowids`.
    pub(crate) fn texts(&self, rowids: &HashSet<u64>) -> Result<Vec<(u64, String)>> {
        let mut texts = Vec::with_capacity(rowids.len());
        if rowids.len() > POINT_READS {
            let mut statement = self
                .tx
                .prepare_cached("SELECT rowid, text FROM chunks")
                .map_err(MemoryError::sqlite(self.operation))?;
            let rows = statement
                .query_map([], |row| Ok((row.get::<_, i64>(0)? as u64, row.get::<_, String>(1)?)))
                .map_err(MemoryError::sqlite(self.operation))?;
            for row in rows {
                let (id, text) = row.map_err(MemoryError::sqlite(self.operation))?;
                if rowids.contains(&id) {
                    texts.push((id, text));
                }
            }
        } else {
            let mut statement = self
                .tx
                .prepare_cached("SELECT text FROM chunks WHERE rowid = ?1")
                .map_err(MemoryError::sqlite(self.operation))?;
            for id in rowids {
                let text: String =
                    statement.query_row([*id as i64], |row| row.get(0)).map_err(MemoryError::sqlite(self.operation))?;
                texts.push((*id, text));
            }
        }
        Ok(texts)
    }
}
