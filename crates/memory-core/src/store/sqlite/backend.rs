//! `memory.db` behind the storage seam: one writer connection, a pool of
//! readers, opened in WAL mode and migrated; a damaged file serves reads
//! only.

use std::path::{Path, PathBuf};
use std::time::Duration;

use parking_lot::Mutex;
use rusqlite::{Connection, OpenFlags, Transaction, TransactionBehavior};

use super::SqliteTx;
use super::{integrity, schema};
use crate::constants::{MAX_IDLE_READERS, PAGE_CACHE_KIB};
use crate::error::{MemoryError, Result};
use crate::store::{Backend, StoreTx};

/// The SQLite store. Writes are serialised on one connection and run as
/// `BEGIN IMMEDIATE` transactions, so a read-modify-write is atomic against
/// other threads *and* other processes. Reads use a pool of separate
/// connections and, thanks to WAL, never wait behind a writer.
pub(crate) struct SqliteBackend {
    path: PathBuf,
    writer: Mutex<Connection>,
    readers: Mutex<Vec<Connection>>,
    busy_timeout: Duration,
    /// What the integrity check at open reported, when it failed: writes
    /// are then refused.
    damage: Option<Vec<String>>,
}

impl SqliteBackend {
    /// Opens (creating if needed) the database at `path` and migrates it;
    /// a file the integrity check finds damaged is opened for reads only.
    /// `full_sync`: every commit reaches the disk (`synchronous = FULL`),
    /// not only checkpoints (`NORMAL`).
    pub(crate) fn open(path: &Path, busy_timeout: Duration, full_sync: bool) -> Result<Self> {
        integrity::refuse_lost_database(path)?;
        let mut writer = open_connection(path, busy_timeout)?;
        // WAL lets readers run while a writer commits; the mode is stored in the file.
        let mode = switch_to_wal(&writer, busy_timeout)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(MemoryError::InvalidConfig(format!("memory.db refused WAL mode (got {mode})")));
        }
        let synchronous = if full_sync { "FULL" } else { "NORMAL" };
        writer.pragma_update(None, "synchronous", synchronous).map_err(MemoryError::sqlite("setting durability"))?;
        let damage = integrity::quick_check(&writer);
        match &damage {
            None => {
                schema::migrate(&mut writer)?;
            }
            Some(problems) => {
                // Nothing may be written to a damaged file: a write could
                // spread the damage. Reads go on where pages are intact.
                tracing::warn!(
                    path = %path.display(),
                    problem = problems.first().map_or("", String::as_str),
                    "memory.db is damaged; serving reads only. Stop `cairn serve` and run `cairn memory repair`"
                );
                writer.pragma_update(None, "query_only", true).map_err(MemoryError::sqlite("refusing writes"))?;
            }
        }
        Ok(Self {
            path: path.to_owned(),
            writer: Mutex::new(writer),
            readers: Mutex::new(Vec::new()),
            busy_timeout,
            damage,
        })
    }

    /// Runs `work` in a `BEGIN IMMEDIATE` transaction on the writer
    /// connection and commits it; an error rolls everything back.
    fn write<T>(&self, operation: &'static str, work: impl FnOnce(&Transaction<'_>) -> Result<T>) -> Result<T> {
        if let Some(problems) = &self.damage {
            return Err(MemoryError::damaged(&self.path, problems));
        }
        let mut connection = self.writer.lock();
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(MemoryError::sqlite(operation))?;
        let value = work(&transaction)?;
        transaction.commit().map_err(MemoryError::sqlite(operation))?;
        Ok(value)
    }

    /// Runs `work` in a read transaction on a pooled reader connection.
    fn read<T>(&self, operation: &'static str, work: impl FnOnce(&Transaction<'_>) -> Result<T>) -> Result<T> {
        let pooled = self.readers.lock().pop();
        let mut connection = match pooled {
            Some(connection) => connection,
            None => {
                let connection = open_connection(&self.path, self.busy_timeout)?;
                connection.pragma_update(None, "query_only", true).map_err(MemoryError::sqlite(operation))?;
                connection
            }
        };
        let result = (|| {
            let transaction = connection
                .transaction_with_behavior(TransactionBehavior::Deferred)
                .map_err(MemoryError::sqlite(operation))?;
            let value = work(&transaction)?;
            transaction.commit().map_err(MemoryError::sqlite(operation))?;
            Ok(value)
        })();
        let mut readers = self.readers.lock();
        if readers.len() < MAX_IDLE_READERS {
            readers.push(connection);
        }
        result
    }
}

impl Backend for SqliteBackend {
    fn kind(&self) -> &'static str {
        "sqlite"
    }

    fn searches_keywords(&self) -> bool {
        true
    }

    fn damage(&self) -> Option<&[String]> {
        self.damage.as_deref()
    }

    fn schema_version(&self) -> Result<i64> {
        self.read("reading the schema version", |tx| {
            tx.query_row("PRAGMA user_version", [], |row| row.get(0))
                .map_err(MemoryError::sqlite("reading the schema version"))
        })
    }

    fn integrity_check(&self) -> Result<Vec<String>> {
        self.read("checking integrity", |tx| {
            let mut statement =
                tx.prepare("PRAGMA integrity_check").map_err(MemoryError::sqlite("checking integrity"))?;
            let rows = statement
                .query_map([], |row| row.get::<_, String>(0))
                .map_err(MemoryError::sqlite("checking integrity"))?;
            rows.collect::<Result<Vec<_>, _>>().map_err(MemoryError::sqlite("checking integrity"))
        })
    }

    fn write_dyn(&self, operation: &'static str, work: &mut dyn FnMut(&mut dyn StoreTx) -> Result<()>) -> Result<()> {
        self.write(operation, |tx| work(&mut SqliteTx::new(tx)))
    }

    fn read_dyn(&self, operation: &'static str, work: &mut dyn FnMut(&mut dyn StoreTx) -> Result<()>) -> Result<()> {
        self.read(operation, |tx| work(&mut SqliteTx::new(tx)))
    }
}

fn open_connection(path: &Path, busy_timeout: Duration) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    let connection = Connection::open_with_flags(path, flags).map_err(MemoryError::sqlite("opening memory.db"))?;
    connection.busy_timeout(busy_timeout).map_err(MemoryError::sqlite("setting the busy timeout"))?;
    connection.set_prepared_statement_cache_capacity(32);
    // Searches touch rows scattered over the file (vectors make rows
    // ~1.7 KB); no memory map: any commit unmaps it for every reader.
    connection
        .pragma_update(None, "cache_size", -PAGE_CACHE_KIB)
        .map_err(MemoryError::sqlite("sizing the page cache"))?;
    Ok(connection)
}

/// Puts the file in WAL mode and answers the mode it is in. Switching needs
/// the file to itself, and SQLite answers "busy" at once, without waiting,
/// while another process is creating or migrating the same new file; so a
/// busy answer is retried until `patience` runs out. A file already in WAL
/// mode answers without waiting for anyone.
fn switch_to_wal(connection: &rusqlite::Connection, patience: Duration) -> Result<String> {
    const PAUSE: Duration = Duration::from_millis(5);
    let deadline = std::time::Instant::now() + patience;
    loop {
        match connection.query_row("PRAGMA journal_mode = WAL", [], |row| row.get::<_, String>(0)) {
            Err(rusqlite::Error::SqliteFailure(error, _))
                if error.code == rusqlite::ErrorCode::DatabaseBusy && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(PAUSE);
            }
            result => return result.map_err(MemoryError::sqlite("switching to WAL")),
        }
    }
}
