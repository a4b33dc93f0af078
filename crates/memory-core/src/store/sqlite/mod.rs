//! The SQLite backend: [`SqliteBackend`] opens `memory.db` (its schema and
//! integrity checks beside it) and runs transactions (`BEGIN IMMEDIATE` for
//! writes, so a read-modify-write is atomic against other threads and
//! processes); [`SqliteTx`] reads and writes the rows inside one.

mod backend;
mod error;
pub(crate) mod files_index;
pub(crate) mod integrity;
pub(crate) mod schema;

pub(crate) use backend::SqliteBackend;

use rusqlite::{Connection, OptionalExtension, params};

use super::{
    AuditLog, Counter, EpisodicCounts, EpisodicRow, EpisodicRows, EpisodicText, EpisodicVectors, EventRecord,
    EvidenceLayer, EvidenceRow, EvidenceRows, ForgetRows, ForgottenRow, LedgerEntry, LedgerRows, MarkerColumn,
    NewEpisodicRow, Revisions, RunRow, RunRows, SemanticCounts, SemanticHead, SemanticRow, SemanticRows,
    SemanticUpsert, SemanticVectors, SessionMessage, SessionRow, StoreTx, StoredEvent, TranscriptRow, TranscriptRows,
    blob_vector, vector_blob,
};
use crate::constants::{EXPORT_LEDGER_SOURCE, FTS_COMMON_TERM_ROWS};
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

impl StoreTx for SqliteTx<'_> {}

impl ForgetRows for SqliteTx<'_> {
    fn record_forgotten(&mut self, row: &ForgottenRow) -> Result<()> {
        self.execute(
            "recording a forgotten item",
            "INSERT INTO forgotten (kind, scope, key, fingerprint, shingles, at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![row.kind, row.scope, row.key, row.fingerprint, row.shingles, row.at],
        )?;
        Ok(())
    }

    fn forgotten_rows(&mut self) -> Result<Vec<ForgottenRow>> {
        self.collect(
            "reading forgotten items",
            "SELECT kind, scope, key, fingerprint, shingles, at FROM forgotten ORDER BY id",
            [],
            |row| {
                Ok(ForgottenRow {
                    kind: row.get(0)?,
                    scope: row.get(1)?,
                    key: row.get(2)?,
                    fingerprint: row.get(3)?,
                    shingles: row.get(4)?,
                    at: row.get(5)?,
                })
            },
        )
    }

    fn session_messages(&mut self) -> Result<Vec<SessionMessage>> {
        self.collect(
            "reading session transcripts",
            "SELECT t.session_key, s.scope, t.seq, t.created_at, t.role, t.content, t.tool_calls
             FROM session_transcripts t JOIN session_state s ON s.session_key = t.session_key
             ORDER BY t.session_key, t.seq",
            [],
            |row| {
                Ok(SessionMessage {
                    session_key: row.get(0)?,
                    scope: row.get(1)?,
                    row: TranscriptRow {
                        seq: row.get(2)?,
                        created_at: row.get(3)?,
                        role: row.get(4)?,
                        content: row.get(5)?,
                        tool_calls_json: row.get(6)?,
                    },
                })
            },
        )
    }

    fn delete_session_messages(&mut self, messages: &[(String, i64)]) -> Result<usize> {
        let mut deleted = 0;
        for (session_key, seq) in messages {
            deleted += self.execute(
                "forgetting a transcript message",
                "DELETE FROM session_transcripts WHERE session_key = ?1 AND seq = ?2",
                params![session_key, seq],
            )?;
        }
        Ok(deleted)
    }
}

impl SemanticRows for SqliteTx<'_> {
    fn deleted_semantic(&mut self) -> Result<Vec<SemanticRow>> {
        self.rows(
            "listing deleted semantic entries",
            &format!("SELECT {ROW_COLUMNS} FROM semantic_memory WHERE is_deleted = 1 ORDER BY key"),
            [],
        )
    }

    fn insert_semantic_row(&mut self, row: &SemanticRow) -> Result<()> {
        self.connection
            .prepare_cached(
                "INSERT INTO semantic_memory
                    (key, value, confidence, source, category, created_at, updated_at, is_deleted, version,
                     embedding_space)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, NULL)",
            )
            .and_then(|mut statement| {
                statement.execute(params![
                    row.key,
                    row.value,
                    row.confidence,
                    row.source,
                    row.category,
                    row.created_at,
                    row.updated_at,
                    i64::from(row.is_deleted),
                    row.version
                ])
            })
            .map_err(MemoryError::sqlite("restoring a semantic entry"))?;
        Ok(())
    }

    fn put_semantic_row(&mut self, row: &SemanticRow) -> Result<()> {
        self.remove_semantic_row(&row.key)?;
        self.insert_semantic_row(row)
    }

    fn remove_semantic_row(&mut self, key: &str) -> Result<()> {
        self.execute("reverting a semantic entry", "DELETE FROM semantic_vectors WHERE key = ?1", [key])?;
        self.execute("reverting a semantic entry", "DELETE FROM semantic_memory WHERE key = ?1", [key])?;
        Ok(())
    }

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

impl SemanticVectors for SqliteTx<'_> {
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
}

impl AuditLog for SqliteTx<'_> {
    fn append_event(&mut self, at: i64, event: &EventRecord<'_>, cap: i64) -> Result<()> {
        let operation = "writing the audit trail";
        self.connection
            .prepare_cached(
                "INSERT INTO memory_events
                    (at, memory_type, action, key, old_value, new_value, source, confidence, detail)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )
            .and_then(|mut statement| {
                statement.execute(params![
                    at,
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

    fn bump_revision(&mut self, counter: Counter) -> Result<i64> {
        self.connection
            .prepare_cached("UPDATE meta SET value = value + 1 WHERE name = ?1 RETURNING value")
            .and_then(|mut statement| statement.query_row([counter.name()], |row| row.get(0)))
            .map_err(MemoryError::sqlite("bumping a revision"))
    }
}

const EPISODIC_COLUMNS: &str = "id, text, tags, importance, created_at, last_accessed, source_ref, source, \
                                embedding_space, embedding IS NOT NULL, is_deleted, scope";

fn episodic_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<EpisodicRow> {
    Ok(EpisodicRow {
        id: row.get(0)?,
        text: row.get(1)?,
        tags_json: row.get(2)?,
        importance: row.get(3)?,
        created_at: row.get(4)?,
        last_accessed: row.get(5)?,
        source_ref: row.get(6)?,
        source: row.get(7)?,
        embedding_space: row.get(8)?,
        has_vector: row.get(9)?,
        is_deleted: row.get::<_, i64>(10)? != 0,
        scope: row.get(11)?,
    })
}

impl SqliteTx<'_> {
    fn collect<T>(
        &self,
        operation: &'static str,
        sql: &str,
        values: impl rusqlite::Params,
        map: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>> {
        let mut statement = self.connection.prepare_cached(sql).map_err(MemoryError::sqlite(operation))?;
        let rows = statement.query_map(values, map).map_err(MemoryError::sqlite(operation))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(MemoryError::sqlite(operation))
    }

    fn execute(&self, operation: &'static str, sql: &str, values: impl rusqlite::Params) -> Result<usize> {
        self.connection
            .prepare_cached(sql)
            .and_then(|mut statement| statement.execute(values))
            .map_err(MemoryError::sqlite(operation))
    }
}

// The text revision moves with the keyword index, in the schema's triggers.
impl EpisodicRows for SqliteTx<'_> {
    fn insert_episodic(&mut self, row: &NewEpisodicRow<'_>) -> Result<i64> {
        let (blob, space) = match row.vector {
            Some((blob, space)) => (Some(blob), Some(space)),
            None => (None, None),
        };
        self.execute(
            "writing an episodic row",
            "INSERT INTO episodic_memories
                (text, tags, importance, source, created_at, is_deleted, embedding, embedding_space, source_ref, scope)
             VALUES (?1, ?2, ?3, ?4, ?5, 0, ?6, ?7, ?8, ?9)",
            params![
                row.text,
                row.tags_json,
                row.importance,
                row.source,
                row.created_at,
                blob,
                space,
                row.source_ref,
                row.scope
            ],
        )?;
        Ok(self.connection.last_insert_rowid())
    }

    fn tombstone_episodic(&mut self, id: i64) -> Result<Option<String>> {
        self.connection
            .prepare_cached(
                "UPDATE episodic_memories SET is_deleted = 1 WHERE id = ?1 AND is_deleted = 0 RETURNING text",
            )
            .and_then(|mut statement| statement.query_row([id], |row| row.get(0)).optional())
            .map_err(MemoryError::sqlite("tombstoning an episodic row"))
    }

    fn episodic_with_text(&mut self, text: &str) -> Result<Option<i64>> {
        self.connection
            .prepare_cached("SELECT id FROM episodic_memories WHERE text = ?1 AND is_deleted = 0 ORDER BY id LIMIT 1")
            .and_then(|mut statement| statement.query_row([text], |row| row.get(0)).optional())
            .map_err(MemoryError::sqlite("checking for a duplicate"))
    }

    fn episodic_is_active(&mut self, id: i64) -> Result<bool> {
        let deleted: Option<i64> = self
            .connection
            .prepare_cached("SELECT is_deleted FROM episodic_memories WHERE id = ?1")
            .and_then(|mut statement| statement.query_row([id], |row| row.get(0)).optional())
            .map_err(MemoryError::sqlite("checking for a near duplicate"))?;
        Ok(deleted == Some(0))
    }

    fn episodic_eviction_order(&mut self, limit: usize) -> Result<Vec<i64>> {
        self.collect(
            "choosing rows to evict",
            "SELECT id FROM episodic_memories WHERE is_deleted = 0
             ORDER BY importance ASC, created_at ASC, id ASC LIMIT ?1",
            [limit as i64],
            |row| row.get(0),
        )
    }

    fn episodic_row(&mut self, id: i64, vector_space: Option<&str>) -> Result<Option<(EpisodicRow, Option<Vec<u8>>)>> {
        self.connection
            .prepare_cached(&format!(
                "SELECT {EPISODIC_COLUMNS}, CASE WHEN ?2 IS NOT NULL AND embedding_space IS ?2 THEN embedding END
                 FROM episodic_memories WHERE id = ?1"
            ))
            .and_then(|mut statement| {
                statement.query_row(params![id, vector_space], |row| Ok((episodic_row(row)?, row.get(12)?))).optional()
            })
            .map_err(MemoryError::sqlite("reading an episodic row"))
    }

    fn episodic_page(&mut self, limit: usize, offset: usize) -> Result<Vec<EpisodicRow>> {
        self.collect(
            "listing episodic rows",
            &format!(
                "SELECT {EPISODIC_COLUMNS} FROM episodic_memories WHERE is_deleted = 0
                 ORDER BY created_at DESC, id DESC LIMIT ?1 OFFSET ?2"
            ),
            params![limit as i64, offset as i64],
            episodic_row,
        )
    }

    fn episodic_active_ids(&mut self) -> Result<Vec<i64>> {
        self.collect(
            "listing active episodic rows",
            "SELECT id FROM episodic_memories WHERE is_deleted = 0",
            [],
            |row| row.get(0),
        )
    }

    fn episodic_live_count(&mut self) -> Result<i64> {
        self.count("SELECT value FROM meta WHERE name = 'episodic_live'", [])
    }

    fn episodic_vectors_up_to(&mut self, space: &str, limit: i64) -> Result<i64> {
        self.count(
            "SELECT count(*) FROM (SELECT 1 FROM episodic_memories
             WHERE is_deleted = 0 AND embedding_space = ?1 AND embedding IS NOT NULL LIMIT ?2)",
            params![space, limit],
        )
    }

    fn episodic_counts(&mut self, space: Option<&str>) -> Result<EpisodicCounts> {
        // The kept counts, and the rows with a vector from their index.
        let live = self.count("SELECT value FROM meta WHERE name = 'episodic_live'", [])?;
        let deleted = self.count("SELECT value FROM meta WHERE name = 'episodic_deleted'", [])?;
        let with_vectors = match space {
            Some(space) => self.count(
                "SELECT count(*) FROM episodic_memories
                 WHERE is_deleted = 0 AND embedding_space = ?1 AND embedding IS NOT NULL",
                [space],
            )?,
            None => 0,
        };
        Ok(EpisodicCounts { live, deleted, with_vectors })
    }

    fn touch_episodic(&mut self, touches: &[(i64, i64)]) -> Result<()> {
        let mut statement = self
            .connection
            .prepare_cached("UPDATE episodic_memories SET last_accessed = ?2 WHERE id = ?1")
            .map_err(MemoryError::sqlite("recording last_accessed"))?;
        for (id, at) in touches {
            statement.execute(params![id, at]).map_err(MemoryError::sqlite("recording last_accessed"))?;
        }
        Ok(())
    }
}

impl EpisodicVectors for SqliteTx<'_> {
    fn episodic_vectors(&mut self, space: &str, only: Option<&[i64]>) -> Result<Vec<(i64, Vec<u8>)>> {
        let operation = "loading episodic vectors";
        match only {
            None => self.collect(
                operation,
                "SELECT id, embedding FROM episodic_memories
                 WHERE is_deleted = 0 AND embedding_space = ?1 AND embedding IS NOT NULL",
                [space],
                |row| Ok((row.get(0)?, row.get(1)?)),
            ),
            Some(ids) => {
                let mut statement = self
                    .connection
                    .prepare_cached(
                        "SELECT id, embedding FROM episodic_memories
                         WHERE id = ?1 AND is_deleted = 0 AND embedding_space = ?2 AND embedding IS NOT NULL",
                    )
                    .map_err(MemoryError::sqlite(operation))?;
                let mut out = Vec::with_capacity(ids.len());
                for id in ids {
                    let row: Option<(i64, Vec<u8>)> = statement
                        .query_row(params![id, space], |row| Ok((row.get(0)?, row.get(1)?)))
                        .optional()
                        .map_err(MemoryError::sqlite(operation))?;
                    out.extend(row);
                }
                Ok(out)
            }
        }
    }

    fn each_episodic_vector(&mut self, space: &str, each: &mut dyn FnMut(i64, &[u8]) -> Result<()>) -> Result<()> {
        let operation = "loading episodic vectors";
        let mut statement = self
            .connection
            .prepare_cached(
                "SELECT id, embedding FROM episodic_memories
                 WHERE is_deleted = 0 AND embedding_space = ?1 AND embedding IS NOT NULL",
            )
            .map_err(MemoryError::sqlite(operation))?;
        let mut rows = statement.query([space]).map_err(MemoryError::sqlite(operation))?;
        while let Some(row) = rows.next().map_err(MemoryError::sqlite(operation))? {
            let id: i64 = row.get(0).map_err(MemoryError::sqlite(operation))?;
            let blob = row.get_ref(1).and_then(|value| Ok(value.as_blob()?)).map_err(MemoryError::sqlite(operation))?;
            each(id, blob)?;
        }
        Ok(())
    }

    fn episodic_vector_ids(&mut self, space: &str) -> Result<Vec<i64>> {
        self.collect(
            "listing episodic vector ids",
            "SELECT id FROM episodic_memories WHERE is_deleted = 0 AND embedding_space = ?1 AND embedding IS NOT NULL",
            [space],
            |row| row.get(0),
        )
    }

    fn episodic_missing_vectors(
        &mut self,
        space: Option<&str>,
        after_id: i64,
        limit: usize,
    ) -> Result<Vec<(i64, String)>> {
        self.collect(
            "finding episodic rows without vectors",
            // `+is_deleted`: walk the ids from `after_id` on (the rowid),
            // not every active row through the `episodic_live` index and a
            // sort, which made a backfill quadratic in the store's size.
            "SELECT id, text FROM episodic_memories
             WHERE +is_deleted = 0 AND id > ?2 AND (embedding_space IS NOT ?1 OR embedding IS NULL)
             ORDER BY id LIMIT ?3",
            params![space, after_id, limit as i64],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
    }

    fn episodic_missing_count(&mut self, space: Option<&str>) -> Result<i64> {
        self.count(
            "SELECT count(*) FROM episodic_memories
             WHERE is_deleted = 0 AND (embedding_space IS NOT ?1 OR embedding IS NULL)",
            [space],
        )
    }

    fn set_episodic_vector(&mut self, id: i64, text: &str, blob: &[u8], space: &str) -> Result<bool> {
        let changed = self.execute(
            "storing backfilled vectors",
            "UPDATE episodic_memories SET embedding = ?2, embedding_space = ?3
             WHERE id = ?1 AND is_deleted = 0 AND text = ?4",
            params![id, blob, space, text],
        )?;
        Ok(changed > 0)
    }
}

impl EpisodicText for SqliteTx<'_> {
    fn episodic_documents(&mut self, only: Option<&[i64]>) -> Result<Vec<(i64, String, String)>> {
        let operation = "loading episodic texts";
        match only {
            None => self.collect(
                operation,
                "SELECT id, text, tags FROM episodic_memories WHERE is_deleted = 0",
                [],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            ),
            Some(ids) => {
                let mut statement = self
                    .connection
                    .prepare_cached("SELECT id, text, tags FROM episodic_memories WHERE id = ?1 AND is_deleted = 0")
                    .map_err(MemoryError::sqlite(operation))?;
                let mut out = Vec::with_capacity(ids.len());
                for id in ids {
                    let row = statement
                        .query_row([id], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
                        .optional()
                        .map_err(MemoryError::sqlite(operation))?;
                    out.extend(row);
                }
                Ok(out)
            }
        }
    }

    fn episodic_quoting(&mut self, _needle: &str, words: &[String]) -> Result<Vec<(i64, String)>> {
        // A phrase query on the keyword index; the caller confirms on the text.
        let phrase = format!("\"{}\"", words.join(" "));
        self.collect(
            "finding stale episodic rows",
            "SELECT m.id, m.text FROM episodic_fts f JOIN episodic_memories m ON m.id = f.rowid
             WHERE episodic_fts MATCH ?1 AND m.is_deleted = 0",
            [format!("text : {phrase}")],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
    }

    fn episodic_keyword_hits(&mut self, fts_query: &str, k: usize) -> Result<Option<Vec<(i64, f64)>>> {
        let fts_query = self.without_common_terms(fts_query)?;
        // The keyword index holds active rows only (schema migration 3).
        self.collect(
            "searching episodic keywords",
            "SELECT rowid, bm25(episodic_fts) AS rank FROM episodic_fts
             WHERE episodic_fts MATCH ?1 ORDER BY rank, rowid LIMIT ?2",
            params![fts_query.as_ref(), k as i64],
            |row| Ok((row.get::<_, i64>(0)?, -row.get::<_, f64>(1)?)),
        )
        .map(Some)
    }
}

impl SqliteTx<'_> {
    /// `fts_query` (quoted terms joined by `OR`) without the terms found in
    /// [`FTS_COMMON_TERM_ROWS`] rows or more, unless every term is that
    /// common: FTS5 scores every row a term matches before it can sort, so
    /// on a large store one word in most rows costs seconds, and a term in
    /// that many rows would rank only rows that match nothing else (the
    /// in-memory index gives it the floor idf). Each term's count stops at
    /// the limit, so the check costs at most that many rowids per term.
    fn without_common_terms<'q>(&self, fts_query: &'q str) -> Result<std::borrow::Cow<'q, str>> {
        let terms: Vec<&str> = fts_query.split(" OR ").collect();
        if terms.len() < 2
            || self.count("SELECT value FROM meta WHERE name = 'episodic_live'", [])? < FTS_COMMON_TERM_ROWS
        {
            return Ok(std::borrow::Cow::Borrowed(fts_query));
        }
        let mut kept = Vec::with_capacity(terms.len());
        for term in &terms {
            let rows = self.count(
                "SELECT count(*) FROM (SELECT 1 FROM episodic_fts WHERE episodic_fts MATCH ?1 LIMIT ?2)",
                params![term, FTS_COMMON_TERM_ROWS],
            )?;
            if rows < FTS_COMMON_TERM_ROWS {
                kept.push(*term);
            }
        }
        Ok(if kept.is_empty() || kept.len() == terms.len() {
            std::borrow::Cow::Borrowed(fts_query)
        } else {
            std::borrow::Cow::Owned(kept.join(" OR "))
        })
    }
}

impl TranscriptRows for SqliteTx<'_> {
    fn session(&mut self, session_key: &str) -> Result<Option<SessionRow>> {
        self.connection
            .prepare_cached(
                "SELECT next_seq, history_marker, preferences_marker, last_activity, claim_owner, claim_until,
                        (SELECT count(*) FROM session_transcripts t WHERE t.session_key = s.session_key), scope
                 FROM session_state s WHERE session_key = ?1",
            )
            .and_then(|mut statement| {
                statement
                    .query_row([session_key], |row| {
                        Ok(SessionRow {
                            next_seq: row.get(0)?,
                            history_marker: row.get(1)?,
                            preferences_marker: row.get(2)?,
                            last_activity: row.get(3)?,
                            claim_owner: row.get(4)?,
                            claim_until: row.get(5)?,
                            stored: row.get(6)?,
                            scope: row.get(7)?,
                        })
                    })
                    .optional()
            })
            .map_err(MemoryError::sqlite("reading a session's transcript state"))
    }

    fn ensure_session(&mut self, session_key: &str, at: i64, scope: &str) -> Result<()> {
        self.execute(
            "creating a session's transcript state",
            "INSERT OR IGNORE INTO session_state (session_key, last_activity, scope) VALUES (?1, ?2, ?3)",
            params![session_key, at, scope],
        )?;
        Ok(())
    }

    fn insert_transcript(&mut self, session_key: &str, row: &TranscriptRow) -> Result<()> {
        self.execute(
            "appending to a session transcript",
            "INSERT INTO session_transcripts (session_key, seq, role, content, tool_calls, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![session_key, row.seq, row.role, row.content, row.tool_calls_json, row.created_at],
        )?;
        Ok(())
    }

    fn advance_session(&mut self, session_key: &str, next_seq: i64, at: i64) -> Result<()> {
        self.execute(
            "appending to a session transcript",
            "UPDATE session_state SET next_seq = ?2, last_activity = max(last_activity, ?3) WHERE session_key = ?1",
            params![session_key, next_seq, at],
        )?;
        Ok(())
    }

    fn transcript_rows(&mut self, session_key: &str, from: i64, to: i64) -> Result<Vec<TranscriptRow>> {
        self.collect(
            "reading a session transcript",
            "SELECT seq, created_at, role, content, tool_calls FROM session_transcripts
             WHERE session_key = ?1 AND seq >= ?2 AND seq < ?3 ORDER BY seq",
            params![session_key, from, to],
            |row| {
                Ok(TranscriptRow {
                    seq: row.get(0)?,
                    created_at: row.get(1)?,
                    role: row.get(2)?,
                    content: row.get(3)?,
                    tool_calls_json: row.get(4)?,
                })
            },
        )
    }

    fn delete_transcript_below(&mut self, session_key: &str, seq: i64) -> Result<usize> {
        self.execute(
            "pruning a session transcript",
            "DELETE FROM session_transcripts WHERE session_key = ?1 AND seq < ?2",
            params![session_key, seq],
        )
    }

    fn idle_sessions(&mut self, before: i64) -> Result<Vec<String>> {
        self.collect(
            "listing idle sessions",
            "SELECT session_key FROM session_state
             WHERE history_marker < next_seq AND last_activity < ?1 ORDER BY last_activity",
            [before],
            |row| row.get(0),
        )
    }

    fn set_claim(&mut self, session_key: &str, claim: Option<(i64, i64)>) -> Result<()> {
        let (owner, until) = claim.unzip();
        self.execute(
            "claiming a session for consolidation",
            "UPDATE session_state SET claim_owner = ?2, claim_until = ?3 WHERE session_key = ?1",
            params![session_key, owner, until],
        )?;
        Ok(())
    }

    fn release_claim(&mut self, session_key: &str, owner: i64) -> Result<()> {
        self.execute(
            "releasing a consolidation claim",
            "UPDATE session_state SET claim_owner = NULL, claim_until = NULL WHERE session_key = ?1 AND claim_owner = ?2",
            params![session_key, owner],
        )?;
        Ok(())
    }

    fn move_marker(&mut self, session_key: &str, marker: MarkerColumn, from: i64, to: i64) -> Result<bool> {
        let sql = match marker {
            MarkerColumn::History => {
                "UPDATE session_state SET history_marker = ?3 WHERE session_key = ?1 AND history_marker = ?2"
            }
            MarkerColumn::Preferences => {
                "UPDATE session_state SET preferences_marker = ?3 WHERE session_key = ?1 AND preferences_marker = ?2"
            }
        };
        Ok(self.execute("moving a consolidation marker", sql, params![session_key, from, to])? == 1)
    }
}

impl LedgerRows for SqliteTx<'_> {
    fn ledger_items(&mut self, source: &str) -> Result<Vec<(String, String)>> {
        self.collect(
            "reading the import provenance ledger",
            "SELECT path, item_hash FROM import_provenance WHERE source = ?1",
            [source],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
    }

    fn ledger_lessons_written(&mut self) -> Result<i64> {
        self.count(
            "SELECT count(*) FROM import_provenance
             WHERE landed_as = 'lesson' AND outcome = 'written' AND source <> ?1",
            [EXPORT_LEDGER_SOURCE],
        )
    }

    fn record_ledger(&mut self, entry: &LedgerEntry<'_>) -> Result<()> {
        self.execute(
            "recording import provenance",
            "INSERT OR IGNORE INTO import_provenance
                (source, path, item_hash, landed_as, outcome, target, recorded_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                entry.source,
                entry.path,
                entry.item_hash,
                entry.landed_as,
                entry.outcome,
                entry.target,
                entry.recorded_at
            ],
        )?;
        Ok(())
    }

    fn setting(&mut self, name: &str) -> Result<Option<String>> {
        self.connection
            .prepare_cached("SELECT value FROM settings WHERE name = ?1")
            .and_then(|mut statement| statement.query_row([name], |row| row.get(0)).optional())
            .map_err(MemoryError::sqlite("reading a setting"))
    }

    fn set_setting(&mut self, name: &str, value: &str) -> Result<()> {
        self.execute(
            "recording a setting",
            "INSERT INTO settings (name, value) VALUES (?1, ?2) ON CONFLICT(name) DO UPDATE SET value = excluded.value",
            params![name, value],
        )?;
        Ok(())
    }
}

impl EvidenceRows for SqliteTx<'_> {
    fn evidence(&mut self, layer: EvidenceLayer, target: &str) -> Result<Option<EvidenceRow>> {
        self.connection
            .prepare_cached(
                "SELECT session_key, first_seq, last_seq, quote FROM memory_evidence WHERE layer = ?1 AND target = ?2",
            )
            .and_then(|mut statement| {
                statement
                    .query_row(params![layer.name(), target], |row| {
                        Ok(EvidenceRow {
                            session_key: row.get(0)?,
                            first_seq: row.get(1)?,
                            last_seq: row.get(2)?,
                            quote: row.get(3)?,
                        })
                    })
                    .optional()
            })
            .map_err(MemoryError::sqlite("reading the evidence of a row"))
    }

    fn layer_evidence(&mut self, layer: EvidenceLayer) -> Result<Vec<(String, EvidenceRow)>> {
        self.collect(
            "reading the evidence of rows",
            "SELECT target, session_key, first_seq, last_seq, quote FROM memory_evidence WHERE layer = ?1 ORDER BY target",
            [layer.name()],
            |row| {
                Ok((
                    row.get(0)?,
                    EvidenceRow { session_key: row.get(1)?, first_seq: row.get(2)?, last_seq: row.get(3)?, quote: row.get(4)? },
                ))
            },
        )
    }

    fn set_evidence(&mut self, layer: EvidenceLayer, target: &str, evidence: Option<&EvidenceRow>) -> Result<()> {
        match evidence {
            Some(evidence) => self.execute(
                "recording the evidence of a row",
                "INSERT INTO memory_evidence (layer, target, session_key, first_seq, last_seq, quote)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT(layer, target) DO UPDATE SET session_key = excluded.session_key,
                     first_seq = excluded.first_seq, last_seq = excluded.last_seq, quote = excluded.quote",
                params![
                    layer.name(),
                    target,
                    evidence.session_key,
                    evidence.first_seq,
                    evidence.last_seq,
                    evidence.quote
                ],
            )?,
            None => self.execute(
                "removing the evidence of a row",
                "DELETE FROM memory_evidence WHERE layer = ?1 AND target = ?2",
                params![layer.name(), target],
            )?,
        };
        Ok(())
    }
}

impl RunRows for SqliteTx<'_> {
    fn insert_run(&mut self, state: &str, at: i64, body: &str) -> Result<i64> {
        self.execute(
            "recording a consolidation run",
            "INSERT INTO consolidation_runs (state, created_at, updated_at, body) VALUES (?1, ?2, ?2, ?3)",
            params![state, at, body],
        )?;
        Ok(self.connection.last_insert_rowid())
    }

    fn run_row(&mut self, id: i64) -> Result<Option<RunRow>> {
        self.connection
            .prepare_cached("SELECT id, state, created_at, updated_at, body FROM consolidation_runs WHERE id = ?1")
            .and_then(|mut statement| statement.query_row([id], run_row_of).optional())
            .map_err(MemoryError::sqlite("reading a consolidation run"))
    }

    fn run_rows(&mut self) -> Result<Vec<RunRow>> {
        self.collect(
            "listing consolidation runs",
            "SELECT id, state, created_at, updated_at, body FROM consolidation_runs ORDER BY id DESC",
            [],
            run_row_of,
        )
    }

    fn update_run(&mut self, id: i64, state: &str, at: i64, body: &str) -> Result<()> {
        self.execute(
            "recording a consolidation run",
            "UPDATE consolidation_runs SET state = ?2, updated_at = ?3, body = ?4 WHERE id = ?1",
            params![id, state, at, body],
        )?;
        Ok(())
    }

    fn delete_run(&mut self, id: i64) -> Result<()> {
        self.execute("pruning consolidation runs", "DELETE FROM consolidation_runs WHERE id = ?1", [id])?;
        Ok(())
    }
}

fn run_row_of(row: &rusqlite::Row<'_>) -> rusqlite::Result<RunRow> {
    Ok(RunRow {
        id: row.get(0)?,
        state: row.get(1)?,
        created_at: row.get(2)?,
        updated_at: row.get(3)?,
        body: row.get(4)?,
    })
}
