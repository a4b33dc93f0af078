//! The PostgreSQL backend: the same rows in a PostgreSQL schema, shared by
//! many gateways.
//!
//! Every write transaction first takes one transaction-scoped advisory
//! lock, so writers on every gateway are serialised exactly as SQLite's
//! `BEGIN IMMEDIATE` serialises processes: the ladder's read-modify-write,
//! the audit cap and the revision counters need no retry loop and lose no
//! update. Reads run in `REPEATABLE READ READ ONLY` transactions (one
//! consistent snapshot) and never wait for a writer. A revision bump also
//! sends `NOTIFY cairn_memory`, delivered at commit, to wake other
//! gateways' caches.
//!
//! Keys use the `"C"` collation, so listing order is byte order, as in SQLite.

use parking_lot::Mutex;
use postgres::error::SqlState;
use postgres::{Client, IsolationLevel, NoTls};

use super::{
    AuditLog, Backend, Counter, NewEvent, Revisions, SemanticCounts, SemanticHead, SemanticRow, SemanticRows,
    SemanticUpsert, StoreTx, StoredEvent, blob_vector, vector_blob,
};
use crate::error::{MemoryError, Result, StorageError, StorageErrorKind};

/// The advisory lock every write transaction holds (`"cairn"` in ASCII).
const WRITE_LOCK: i64 = 0x0063_6169_726e;
/// Connections kept open for reuse.
const MAX_IDLE_CONNECTIONS: usize = 8;

/// Migration `n` (1-based) brings the schema from version `n - 1` to `n`.
const MIGRATIONS: &[&str] = &[
    // 1: the semantic layer (lessons included), its vectors, the audit trail and the revision counters.
    r#"
    CREATE TABLE semantic_memory (
        key             TEXT COLLATE "C" PRIMARY KEY,
        value           TEXT NOT NULL,
        confidence      DOUBLE PRECISION NOT NULL,
        source          TEXT NOT NULL,
        category        TEXT,
        created_at      BIGINT NOT NULL,
        updated_at      BIGINT NOT NULL,
        is_deleted      BOOLEAN NOT NULL DEFAULT FALSE,
        version         BIGINT NOT NULL DEFAULT 1,
        embedding_space TEXT
    );
    CREATE TABLE semantic_vectors (
        key       TEXT COLLATE "C" PRIMARY KEY,
        embedding BYTEA NOT NULL
    );
    CREATE TABLE memory_events (
        id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        at          BIGINT NOT NULL,
        memory_type TEXT NOT NULL,
        action      TEXT NOT NULL,
        key         TEXT,
        old_value   TEXT,
        new_value   TEXT,
        source      TEXT,
        confidence  DOUBLE PRECISION,
        detail      TEXT
    );
    CREATE TABLE meta (
        name  TEXT PRIMARY KEY,
        value BIGINT NOT NULL
    );
    INSERT INTO meta (name, value) VALUES ('semantic_revision', 0);
    "#,
];

fn storage(operation: &'static str) -> impl FnOnce(postgres::Error) -> MemoryError {
    move |error| {
        let kind = match error.code() {
            Some(code) if *code == SqlState::T_R_SERIALIZATION_FAILURE || *code == SqlState::T_R_DEADLOCK_DETECTED => {
                StorageErrorKind::Busy
            }
            Some(code) if *code == SqlState::LOCK_NOT_AVAILABLE => StorageErrorKind::Busy,
            Some(code) if code.code().starts_with("23") => StorageErrorKind::Constraint,
            Some(code) if *code == SqlState::DISK_FULL || *code == SqlState::PROGRAM_LIMIT_EXCEEDED => {
                StorageErrorKind::Full
            }
            Some(code) if *code == SqlState::QUERY_CANCELED || *code == SqlState::ADMIN_SHUTDOWN => {
                StorageErrorKind::Interrupted
            }
            Some(code) if *code == SqlState::DATA_CORRUPTED || *code == SqlState::INDEX_CORRUPTED => {
                StorageErrorKind::Corrupt
            }
            None if error.is_closed() => StorageErrorKind::Io,
            _ => StorageErrorKind::Other,
        };
        MemoryError::Storage { operation, source: StorageError::new(kind, error) }
    }
}

/// A store in one PostgreSQL schema.
pub(crate) struct PostgresBackend {
    url: String,
    schema: String,
    idle: Mutex<Vec<Client>>,
}

impl PostgresBackend {
    /// Connects to `url`, creates `schema` when missing and migrates it.
    /// Two gateways opening a fresh schema at once migrate it exactly once.
    pub(crate) fn open(url: &str, schema: &str) -> Result<Self> {
        if schema.is_empty() || !schema.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_') {
            return Err(MemoryError::InvalidConfig(format!(
                "PostgreSQL schema {schema:?} must be lower-case letters, digits and '_'"
            )));
        }
        let backend = Self { url: url.to_owned(), schema: schema.to_owned(), idle: Mutex::new(Vec::new()) };
        let mut client = backend.connect()?;
        migrate(&mut client, schema)?;
        backend.idle.lock().push(client);
        Ok(backend)
    }

    fn connect(&self) -> Result<Client> {
        let mut client = Client::connect(&self.url, NoTls).map_err(storage("connecting to PostgreSQL"))?;
        client
            .batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {0}; SET search_path TO {0}", self.schema))
            .map_err(storage("selecting the schema"))?;
        Ok(client)
    }

    fn transaction(
        &self,
        operation: &'static str,
        write: bool,
        work: &mut dyn FnMut(&mut dyn StoreTx) -> Result<()>,
    ) -> Result<()> {
        let pooled = self.idle.lock().pop();
        let mut client = match pooled {
            Some(client) if !client.is_closed() => client,
            _ => self.connect()?,
        };
        let result = (|| {
            let isolation = if write { IsolationLevel::ReadCommitted } else { IsolationLevel::RepeatableRead };
            let mut transaction = client
                .build_transaction()
                .isolation_level(isolation)
                .read_only(!write)
                .start()
                .map_err(storage(operation))?;
            if write {
                // Statements after the lock see every earlier writer's commit (read committed).
                transaction.execute("SELECT pg_advisory_xact_lock($1)", &[&WRITE_LOCK]).map_err(storage(operation))?;
            }
            work(&mut PgTx { tx: &mut transaction })?;
            transaction.commit().map_err(storage(operation))
        })();
        let mut idle = self.idle.lock();
        if idle.len() < MAX_IDLE_CONNECTIONS && !client.is_closed() {
            idle.push(client);
        }
        result
    }
}

impl Backend for PostgresBackend {
    fn write_dyn(&self, operation: &'static str, work: &mut dyn FnMut(&mut dyn StoreTx) -> Result<()>) -> Result<()> {
        self.transaction(operation, true, work)
    }

    fn read_dyn(&self, operation: &'static str, work: &mut dyn FnMut(&mut dyn StoreTx) -> Result<()>) -> Result<()> {
        self.transaction(operation, false, work)
    }
}

/// Runs the missing migrations in one transaction under the write lock.
fn migrate(client: &mut Client, schema: &str) -> Result<()> {
    let operation = "migrating the PostgreSQL schema";
    let mut transaction = client.transaction().map_err(storage(operation))?;
    transaction.execute("SELECT pg_advisory_xact_lock($1)", &[&WRITE_LOCK]).map_err(storage(operation))?;
    transaction
        .batch_execute("CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL)")
        .map_err(storage(operation))?;
    let version: Option<i64> = transaction
        .query_opt("SELECT version FROM schema_version", &[])
        .map_err(storage(operation))?
        .map(|row| row.get(0));
    let version = version.unwrap_or(0);
    if version as usize > MIGRATIONS.len() {
        return Err(MemoryError::InvalidConfig(format!(
            "PostgreSQL schema {schema} is at version {version}, newer than this build's {}",
            MIGRATIONS.len()
        )));
    }
    for migration in &MIGRATIONS[version as usize..] {
        transaction.batch_execute(migration).map_err(storage(operation))?;
    }
    let target = MIGRATIONS.len() as i64;
    transaction.execute("DELETE FROM schema_version", &[]).map_err(storage(operation))?;
    transaction.execute("INSERT INTO schema_version (version) VALUES ($1)", &[&target]).map_err(storage(operation))?;
    transaction.commit().map_err(storage(operation))
}

/// The rows of one PostgreSQL transaction.
struct PgTx<'t, 'c> {
    tx: &'t mut postgres::Transaction<'c>,
}

const ROW_COLUMNS: &str =
    "key, value, confidence, source, category, created_at, updated_at, is_deleted, version, embedding_space";

fn semantic_row(row: &postgres::Row) -> SemanticRow {
    SemanticRow {
        key: row.get(0),
        value: row.get(1),
        confidence: row.get(2),
        source: row.get(3),
        category: row.get(4),
        created_at: row.get(5),
        updated_at: row.get(6),
        is_deleted: row.get(7),
        version: row.get(8),
        embedding_space: row.get(9),
    }
}

impl PgTx<'_, '_> {
    fn store_vector(&mut self, key: &str, vector: Option<&[f32]>) -> Result<()> {
        match vector {
            Some(vector) => self.tx.execute(
                "INSERT INTO semantic_vectors (key, embedding) VALUES ($1, $2)
                 ON CONFLICT (key) DO UPDATE SET embedding = excluded.embedding",
                &[&key, &vector_blob(vector)],
            ),
            None => self.tx.execute("DELETE FROM semantic_vectors WHERE key = $1", &[&key]),
        }
        .map_err(storage("storing a vector"))?;
        Ok(())
    }

    fn count(&mut self, sql: &str, params: &[&(dyn postgres::types::ToSql + Sync)]) -> Result<i64> {
        self.tx.query_one(sql, params).map(|row| row.get(0)).map_err(storage("counting rows"))
    }
}

impl SemanticRows for PgTx<'_, '_> {
    fn semantic_row(&mut self, key: &str) -> Result<Option<SemanticRow>> {
        let row = self
            .tx
            .query_opt(&format!("SELECT {ROW_COLUMNS} FROM semantic_memory WHERE key = $1"), &[&key])
            .map_err(storage("reading a semantic entry"))?;
        Ok(row.as_ref().map(semantic_row))
    }

    fn upsert_semantic(&mut self, write: &SemanticUpsert<'_>) -> Result<()> {
        let space = write.vector.map(|(_, space)| space);
        self.tx
            .execute(
                "INSERT INTO semantic_memory
                    (key, value, confidence, source, category, created_at, updated_at, is_deleted, version,
                     embedding_space)
                 VALUES ($1, $2, $3, $4, $5, $6, $6, FALSE, 1, $7)
                 ON CONFLICT (key) DO UPDATE SET
                    value = excluded.value,
                    confidence = excluded.confidence,
                    source = excluded.source,
                    category = excluded.category,
                    created_at = CASE WHEN semantic_memory.is_deleted
                                      THEN excluded.created_at ELSE semantic_memory.created_at END,
                    updated_at = excluded.updated_at,
                    is_deleted = FALSE,
                    version = semantic_memory.version + 1,
                    embedding_space = excluded.embedding_space",
                &[&write.key, &write.value, &write.confidence, &write.source, &write.category, &write.at, &space],
            )
            .map_err(storage("writing a semantic entry"))?;
        self.store_vector(write.key, write.vector.map(|(vector, _)| vector))
    }

    fn set_semantic_vector(&mut self, key: &str, vector: &[f32], space: &str) -> Result<()> {
        self.tx
            .execute("UPDATE semantic_memory SET embedding_space = $2 WHERE key = $1", &[&key, &space])
            .map_err(storage("storing a vector"))?;
        self.store_vector(key, Some(vector))
    }

    fn set_semantic_vector_if_version(&mut self, key: &str, version: i64, vector: &[f32], space: &str) -> Result<bool> {
        let changed = self
            .tx
            .execute(
                "UPDATE semantic_memory SET embedding_space = $3
                 WHERE key = $1 AND version = $2 AND NOT is_deleted",
                &[&key, &version, &space],
            )
            .map_err(storage("storing backfilled vectors"))?;
        if changed > 0 {
            self.store_vector(key, Some(vector))?;
        }
        Ok(changed > 0)
    }

    fn tombstone_semantic(&mut self, key: &str, at: i64) -> Result<()> {
        self.tx
            .execute(
                "UPDATE semantic_memory SET is_deleted = TRUE, updated_at = $2, version = version + 1,
                 embedding_space = NULL WHERE key = $1",
                &[&key, &at],
            )
            .map_err(storage("tombstoning a semantic entry"))?;
        self.store_vector(key, None)
    }

    fn semantic_vector(&mut self, key: &str, space: &str) -> Result<Option<Vec<f32>>> {
        let row = self
            .tx
            .query_opt(
                "SELECT v.embedding FROM semantic_vectors v JOIN semantic_memory m ON m.key = v.key
                 WHERE v.key = $1 AND m.embedding_space = $2",
                &[&key, &space],
            )
            .map_err(storage("reading a vector"))?;
        Ok(row.and_then(|row| blob_vector(row.get::<_, &[u8]>(0))))
    }

    fn live_semantic(&mut self, prefix: &str) -> Result<Vec<SemanticRow>> {
        let rows = self
            .tx
            .query(
                &format!(
                    "SELECT {ROW_COLUMNS} FROM semantic_memory
                     WHERE NOT is_deleted AND starts_with(key, $1) ORDER BY key"
                ),
                &[&prefix],
            )
            .map_err(storage("listing semantic entries"))?;
        Ok(rows.iter().map(semantic_row).collect())
    }

    fn semantic_heads(&mut self) -> Result<Vec<SemanticHead>> {
        let rows = self
            .tx
            .query(
                "SELECT key, version, embedding_space, updated_at FROM semantic_memory
                 WHERE NOT is_deleted ORDER BY key",
                &[],
            )
            .map_err(storage("loading the semantic snapshot"))?;
        Ok(rows
            .iter()
            .map(|row| SemanticHead {
                key: row.get(0),
                version: row.get(1),
                embedding_space: row.get(2),
                updated_at: row.get(3),
            })
            .collect())
    }

    fn semantic_missing_vectors(&mut self, space: &str, limit: usize) -> Result<Vec<SemanticRow>> {
        let rows = self
            .tx
            .query(
                &format!(
                    "SELECT {ROW_COLUMNS} FROM semantic_memory
                     WHERE NOT is_deleted AND embedding_space IS DISTINCT FROM $1 ORDER BY key LIMIT $2"
                ),
                &[&space, &(limit as i64)],
            )
            .map_err(storage("finding entries without vectors"))?;
        Ok(rows.iter().map(semantic_row).collect())
    }

    fn semantic_counts(&mut self, space: Option<&str>) -> Result<SemanticCounts> {
        Ok(SemanticCounts {
            live: self.count("SELECT count(*) FROM semantic_memory WHERE NOT is_deleted", &[])?,
            deleted: self.count("SELECT count(*) FROM semantic_memory WHERE is_deleted", &[])?,
            lessons: self.count(
                "SELECT count(*) FROM semantic_memory WHERE NOT is_deleted AND starts_with(key, 'lesson.')",
                &[],
            )?,
            missing_vectors: self.count(
                "SELECT count(*) FROM semantic_memory WHERE NOT is_deleted
                 AND (embedding_space IS NULL OR embedding_space IS DISTINCT FROM $1)",
                &[&space],
            )?,
        })
    }
}

impl AuditLog for PgTx<'_, '_> {
    fn append_event(&mut self, event: &NewEvent<'_>, cap: i64) -> Result<()> {
        let operation = "writing the audit trail";
        let id: i64 = self
            .tx
            .query_one(
                "INSERT INTO memory_events
                    (at, memory_type, action, key, old_value, new_value, source, confidence, detail)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
                &[
                    &event.at,
                    &event.memory_type,
                    &event.action.as_str(),
                    &event.key,
                    &event.old_value,
                    &event.new_value,
                    &event.source,
                    &event.confidence,
                    &event.detail,
                ],
            )
            .map_err(storage(operation))?
            .get(0);
        self.tx.execute("DELETE FROM memory_events WHERE id <= $1", &[&(id - cap)]).map_err(storage(operation))?;
        Ok(())
    }

    fn newest_events(&mut self, limit: usize) -> Result<Vec<StoredEvent>> {
        let rows = self
            .tx
            .query(
                "SELECT id, at, memory_type, action, key, old_value, new_value, source, confidence, detail
                 FROM memory_events ORDER BY id DESC LIMIT $1",
                &[&(limit as i64)],
            )
            .map_err(storage("reading the audit trail"))?;
        Ok(rows
            .iter()
            .map(|row| StoredEvent {
                id: row.get(0),
                at: row.get(1),
                memory_type: row.get(2),
                action: row.get(3),
                key: row.get(4),
                old_value: row.get(5),
                new_value: row.get(6),
                source: row.get(7),
                confidence: row.get(8),
                detail: row.get(9),
            })
            .collect())
    }

    fn event_count(&mut self) -> Result<i64> {
        self.count("SELECT count(*) FROM memory_events", &[])
    }
}

impl Revisions for PgTx<'_, '_> {
    fn revision(&mut self, counter: Counter) -> Result<i64> {
        let row = self
            .tx
            .query_opt("SELECT value FROM meta WHERE name = $1", &[&counter.name()])
            .map_err(storage("reading a revision"))?;
        Ok(row.map_or(0, |row| row.get(0)))
    }

    fn bump_revision(&mut self, counter: Counter) -> Result<()> {
        self.tx
            .execute(
                "WITH bumped AS (UPDATE meta SET value = value + 1 WHERE name = $1 RETURNING name)
                 SELECT pg_notify('cairn_memory', name) FROM bumped",
                &[&counter.name()],
            )
            .map_err(storage("bumping a revision"))?;
        Ok(())
    }
}
