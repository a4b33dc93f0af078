//! The SQLite backend: the rows of `memory.db`, read and written inside a
//! transaction [`crate::MemoryDb`] opened (`BEGIN IMMEDIATE` for writes, so
//! a read-modify-write is atomic against other threads and processes).

use rusqlite::{Connection, OptionalExtension, params};

use super::{
    AuditLog, Counter, NewEvent, Revisions, SemanticCounts, SemanticHead, SemanticRow, SemanticRows, SemanticUpsert,
    StoredEvent, blob_vector, vector_blob,
};
use crate::error::{MemoryError, Result};

/// The rows of one open SQLite transaction (or connection).
pub(crate) struct SqliteTx<'c> {
    connection: &'c Connection,
}

impl<'c> SqliteTx<'c> {
    pub(crate) fn new(connection: &'c Connection) -> Self {
        Self { connection }
    }
}

const ROW_COLUMNS: &str =
    "key, value, confidence, source, category, created_at, updated_at, is_deleted, version, embedding_space";

fn semantic_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<SemanticRow> {
    Ok(SemanticRow {
        key: row.get(0)?,
        value: row.get(1)?,
        confidence: row.get(2)?,
        source: row.get(3)?,
        category: row.get(4)?,
        created_at: row.get(5)?,
        updated_at: row.get(6)?,
        is_deleted: row.get::<_, i64>(7)? != 0,
        version: row.get(8)?,
        embedding_space: row.get(9)?,
    })
}

impl SqliteTx<'_> {
    fn rows(&self, operation: &'static str, sql: &str, values: impl rusqlite::Params) -> Result<Vec<SemanticRow>> {
        let mut statement = self.connection.prepare_cached(sql).map_err(MemoryError::sqlite(operation))?;
        let rows = statement.query_map(values, semantic_row).map_err(MemoryError::sqlite(operation))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(MemoryError::sqlite(operation))
    }

    fn store_vector(&self, key: &str, vector: Option<&[f32]>) -> Result<()> {
        match vector {
            Some(vector) => self
                .connection
                .prepare_cached("INSERT OR REPLACE INTO semantic_vectors (key, embedding) VALUES (?1, ?2)")
                .and_then(|mut statement| statement.execute(params![key, vector_blob(vector)])),
            None => self
                .connection
                .prepare_cached("DELETE FROM semantic_vectors WHERE key = ?1")
                .and_then(|mut statement| statement.execute([key])),
        }
        .map_err(MemoryError::sqlite("storing a vector"))?;
        Ok(())
    }

    fn count(&self, sql: &str, values: impl rusqlite::Params) -> Result<i64> {
        self.connection
            .prepare_cached(sql)
            .and_then(|mut statement| statement.query_row(values, |row| row.get(0)))
            .map_err(MemoryError::sqlite("counting rows"))
    }
}

impl SemanticRows for SqliteTx<'_> {
    fn semantic_row(&mut self, key: &str) -> Result<Option<SemanticRow>> {
        self.connection
            .prepare_cached(&format!("SELECT {ROW_COLUMNS} FROM semantic_memory WHERE key = ?1"))
            .and_then(|mut statement| statement.query_row([key], semantic_row).optional())
            .map_err(MemoryError::sqlite("reading a semantic entry"))
    }

    fn upsert_semantic(&mut self, write: &SemanticUpsert<'_>) -> Result<()> {
        let space = write.vector.map(|(_, space)| space);
        self.connection
            .prepare_cached(
                "INSERT INTO semantic_memory
                    (key, value, confidence, source, category, created_at, updated_at, is_deleted, version,
                     embedding_space)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, 0, 1, ?7)
                 ON CONFLICT(key) DO UPDATE SET
                    value = excluded.value,
                    confidence = excluded.confidence,
                    source = excluded.source,
                    category = excluded.category,
                    created_at = CASE WHEN semantic_memory.is_deleted = 1
                                      THEN excluded.created_at ELSE semantic_memory.created_at END,
                    updated_at = excluded.updated_at,
                    is_deleted = 0,
                    version = semantic_memory.version + 1,
                    embedding_space = excluded.embedding_space",
            )
            .and_then(|mut statement| {
                statement.execute(params![
                    write.key,
                    write.value,
                    write.confidence,
                    write.source,
                    write.category,
                    write.at,
                    space
                ])
            })
            .map_err(MemoryError::sqlite("writing a semantic entry"))?;
        self.store_vector(write.key, write.vector.map(|(vector, _)| vector))
    }

    fn set_semantic_vector(&mut self, key: &str, vector: &[f32], space: &str) -> Result<()> {
        self.connection
            .prepare_cached("UPDATE semantic_memory SET embedding_space = ?2 WHERE key = ?1")
            .and_then(|mut statement| statement.execute(params![key, space]))
            .map_err(MemoryError::sqlite("storing a vector"))?;
        self.store_vector(key, Some(vector))
    }

    fn set_semantic_vector_if_version(&mut self, key: &str, version: i64, vector: &[f32], space: &str) -> Result<bool> {
        let changed = self
            .connection
            .prepare_cached(
                "UPDATE semantic_memory SET embedding_space = ?3
                 WHERE key = ?1 AND version = ?2 AND is_deleted = 0",
            )
            .and_then(|mut statement| statement.execute(params![key, version, space]))
            .map_err(MemoryError::sqlite("storing backfilled vectors"))?;
        if changed > 0 {
            self.store_vector(key, Some(vector))?;
        }
        Ok(changed > 0)
    }

    fn tombstone_semantic(&mut self, key: &str, at: i64) -> Result<()> {
        self.connection
            .prepare_cached(
                "UPDATE semantic_memory SET is_deleted = 1, updated_at = ?2, version = version + 1,
                 embedding_space = NULL WHERE key = ?1",
            )
            .and_then(|mut statement| statement.execute(params![key, at]))
            .map_err(MemoryError::sqlite("tombstoning a semantic entry"))?;
        self.store_vector(key, None)
    }

    fn semantic_vector(&mut self, key: &str, space: &str) -> Result<Option<Vec<f32>>> {
        let blob: Option<Vec<u8>> = self
            .connection
            .prepare_cached(
                "SELECT v.embedding FROM semantic_vectors v JOIN semantic_memory m ON m.key = v.key
                 WHERE v.key = ?1 AND m.embedding_space = ?2",
            )
            .and_then(|mut statement| statement.query_row(params![key, space], |row| row.get(0)).optional())
            .map_err(MemoryError::sqlite("reading a vector"))?;
        Ok(blob.as_deref().and_then(blob_vector))
    }

    fn live_semantic(&mut self, prefix: &str) -> Result<Vec<SemanticRow>> {
        self.rows(
            "listing semantic entries",
            &format!(
                "SELECT {ROW_COLUMNS} FROM semantic_memory
                 WHERE is_deleted = 0 AND substr(key, 1, ?1) = ?2 ORDER BY key"
            ),
            params![prefix.len() as i64, prefix],
        )
    }

    fn semantic_heads(&mut self) -> Result<Vec<SemanticHead>> {
        let operation = "loading the semantic snapshot";
        let mut statement = self
            .connection
            .prepare_cached(
                "SELECT key, version, embedding_space, updated_at FROM semantic_memory
                 WHERE is_deleted = 0 ORDER BY key",
            )
            .map_err(MemoryError::sqlite(operation))?;
        let rows = statement
            .query_map([], |row| {
                Ok(SemanticHead {
                    key: row.get(0)?,
                    version: row.get(1)?,
                    embedding_space: row.get(2)?,
                    updated_at: row.get(3)?,
                })
            })
            .map_err(MemoryError::sqlite(operation))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(MemoryError::sqlite(operation))
    }

    fn semantic_missing_vectors(&mut self, space: &str, limit: usize) -> Result<Vec<SemanticRow>> {
        self.rows(
            "finding entries without vectors",
            &format!(
                "SELECT {ROW_COLUMNS} FROM semantic_memory
                 WHERE is_deleted = 0 AND (embedding_space IS NULL OR embedding_space != ?1)
                 ORDER BY key LIMIT ?2"
            ),
            params![space, limit as i64],
        )
    }

    fn semantic_counts(&mut self, space: Option<&str>) -> Result<SemanticCounts> {
        Ok(SemanticCounts {
            live: self.count("SELECT count(*) FROM semantic_memory WHERE is_deleted = 0", [])?,
            deleted: self.count("SELECT count(*) FROM semantic_memory WHERE is_deleted = 1", [])?,
            lessons: self.count(
                "SELECT count(*) FROM semantic_memory WHERE is_deleted = 0 AND key >= 'lesson.' AND key < 'lesson/'",
                [],
            )?,
            missing_vectors: self.count(
                "SELECT count(*) FROM semantic_memory WHERE is_deleted = 0
                 AND (embedding_space IS NULL OR embedding_space IS NOT ?1)",
                [space],
            )?,
        })
    }
}

impl AuditLog for SqliteTx<'_> {
    fn append_event(&mut self, event: &NewEvent<'_>, cap: i64) -> Result<()> {
        let operation = "writing the audit trail";
        self.connection
            .prepare_cached(
                "INSERT INTO memory_events
                    (at, memory_type, action, key, old_value, new_value, source, confidence, detail)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )
            .and_then(|mut statement| {
                statement.execute(params![
                    event.at,
                    event.memory_type,
                    event.action.as_str(),
                    event.key,
                    event.old_value,
                    event.new_value,
                    event.source,
                    event.confidence,
                    event.detail,
                ])
            })
            .map_err(MemoryError::sqlite(operation))?;
        let id = self.connection.last_insert_rowid();
        self.connection
            .prepare_cached("DELETE FROM memory_events WHERE id <= ?1")
            .and_then(|mut statement| statement.execute([id - cap]))
            .map_err(MemoryError::sqlite(operation))?;
        Ok(())
    }

    fn newest_events(&mut self, limit: usize) -> Result<Vec<StoredEvent>> {
        let operation = "reading the audit trail";
        let mut statement = self
            .connection
            .prepare_cached(
                "SELECT id, at, memory_type, action, key, old_value, new_value, source, confidence, detail
                 FROM memory_events ORDER BY id DESC LIMIT ?1",
            )
            .map_err(MemoryError::sqlite(operation))?;
        let rows = statement
            .query_map([limit as i64], |row| {
                Ok(StoredEvent {
                    id: row.get(0)?,
                    at: row.get(1)?,
                    memory_type: row.get(2)?,
                    action: row.get(3)?,
                    key: row.get(4)?,
                    old_value: row.get(5)?,
                    new_value: row.get(6)?,
                    source: row.get(7)?,
                    confidence: row.get(8)?,
                    detail: row.get(9)?,
                })
            })
            .map_err(MemoryError::sqlite(operation))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(MemoryError::sqlite(operation))
    }

    fn event_count(&mut self) -> Result<i64> {
        self.count("SELECT count(*) FROM memory_events", [])
    }
}

impl Revisions for SqliteTx<'_> {
    fn revision(&mut self, counter: Counter) -> Result<i64> {
        self.connection
            .prepare_cached("SELECT value FROM meta WHERE name = ?1")
            .and_then(|mut statement| statement.query_row([counter.name()], |row| row.get(0)).optional())
            .map_err(MemoryError::sqlite("reading a revision"))
            .map(|value| value.unwrap_or(0))
    }

    fn bump_revision(&mut self, counter: Counter) -> Result<()> {
        self.connection
            .prepare_cached("UPDATE meta SET value = value + 1 WHERE name = ?1")
            .and_then(|mut statement| statement.execute([counter.name()]))
            .map_err(MemoryError::sqlite("bumping a revision"))?;
        Ok(())
    }
}
