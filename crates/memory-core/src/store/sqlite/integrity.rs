//! Damaged and lost `memory.db` files: the bounded check at open, the
//! empty-file guard, and [`repair_database`].
//!
//! Repair salvages row by row through SQLite itself rather than with the
//! `sqlite3` shell's `.recover`: that command lives in the shell, not in the
//! library Cairn links, and the shell may not be installed. Reading each
//! table of Cairn's own schema in key order, and skipping ahead past the
//! rows a damaged page hides, recovers every row SQLite can still read,
//! says per table how many were lost, and writes them through the current
//! schema so its constraints reject garbage and its triggers rebuild the
//! keyword index.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::types::Value;
use rusqlite::{Connection, OpenFlags, params_from_iter};
use serde::Serialize;

use super::schema;
use crate::constants::{
    EPISODIC_INDEX_FILE_NAME, EPISODIC_VECTORS_FILE_NAME, IMPORT_LEDGER_FILE_NAME, INDEX_FILE_NAME,
    LESSONS_JSONL_FILE_NAME, MAX_SEMANTIC_VERSION, MEMORY_STATE_FILE_NAME,
};
use crate::error::{MemoryError, Result};

/// The most problems `PRAGMA quick_check` reports at open.
const QUICK_CHECK_MAX_ERRORS: u32 = 8;
/// How long the check at open may run before it is abandoned (and the
/// store treated as sound): a very large store must still open.
const QUICK_CHECK_BUDGET: Duration = Duration::from_secs(10);
/// State files that say a home was in use: an empty `memory.db` beside any
/// of them is a lost database, not a new one.
const STATE_FILES: &[&str] = &[
    INDEX_FILE_NAME,
    EPISODIC_INDEX_FILE_NAME,
    LESSONS_JSONL_FILE_NAME,
    MEMORY_STATE_FILE_NAME,
    IMPORT_LEDGER_FILE_NAME,
];

/// Refuses to open a zero-byte `memory.db` (with no write-ahead log to
/// rebuild it from) while other state files of the home exist.
pub(crate) fn refuse_lost_database(path: &Path) -> Result<()> {
    let Ok(metadata) = std::fs::metadata(path) else { return Ok(()) };
    if !metadata.is_file() || metadata.len() > 0 {
        return Ok(());
    }
    let wal = sibling(path, "-wal");
    if std::fs::metadata(&wal).is_ok_and(|wal| wal.len() > 0) {
        return Ok(());
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    let found: Vec<String> =
        STATE_FILES.iter().filter(|name| dir.join(name).exists()).map(|name| (*name).to_owned()).collect();
    if found.is_empty() {
        return Ok(());
    }
    Err(MemoryError::EmptyDatabase { path: path.to_owned(), beside: found.join(", ") })
}

/// Runs a bounded `PRAGMA quick_check`; `Some(problems)` when it failed.
pub(crate) fn quick_check(connection: &Connection) -> Option<Vec<String>> {
    // A watchdog interrupts the check when it outlives its budget.
    let interrupt = connection.get_interrupt_handle();
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if finished.recv_timeout(QUICK_CHECK_BUDGET) == Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
            interrupt.interrupt();
        }
    });
    let result = (|| -> rusqlite::Result<Vec<String>> {
        let mut statement = connection.prepare(&format!("PRAGMA quick_check({QUICK_CHECK_MAX_ERRORS})"))?;
        let rows = statement.query_map([], |row| row.get::<_, String>(0))?;
        rows.collect()
    })();
    let _ = done.send(());
    let _ = watchdog.join();
    match result {
        Ok(report) if report.len() == 1 && report[0] == "ok" => None,
        Ok(report) => Some(report),
        Err(rusqlite::Error::SqliteFailure(error, _)) if error.code == rusqlite::ErrorCode::OperationInterrupted => {
            tracing::warn!(
                budget_secs = QUICK_CHECK_BUDGET.as_secs(),
                "the integrity check of memory.db did not finish in time; opened unchecked"
            );
            None
        }
        Err(error) => Some(vec![error.to_string()]),
    }
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// What [`repair_database`] did.
#[derive(Debug, Clone, Serialize)]
pub struct RepairReport {
    /// The database that was repaired.
    pub path: PathBuf,
    /// Where the damaged file was copied before anything changed.
    pub backup: Option<PathBuf>,
    /// What the integrity check said before the repair.
    pub problems: Vec<String>,
    /// `false` when the store was sound and nothing was done.
    pub repaired: bool,
    /// Per table: rows recovered and rows lost.
    pub tables: Vec<TableSalvage>,
}

/// Rows of one table recovered by a repair.
#[derive(Debug, Clone, Serialize)]
pub struct TableSalvage {
    /// The table.
    pub table: String,
    /// Rows copied into the new database.
    pub recovered: u64,
    /// Rows the damaged file held that could not be read or were refused
    /// by the schema.
    pub lost: u64,
    /// True when the damaged file could not count its rows, so `lost` is
    /// derived from the highest id it handed out.
    pub lost_is_estimate: bool,
}

/// How long [`checkpoint_wal`] waits for another connection's lock.
const CHECKPOINT_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Folds the write-ahead log of the `memory.db` at `path` back into the
/// file (`wal_checkpoint(TRUNCATE)`), so a clean stop leaves one file once
/// the last handle is closed. `Ok(true)` when the whole log was folded
/// back, `Ok(false)` when another connection kept part of it in use. A
/// missing file is an error, never created.
pub fn checkpoint_wal(path: &Path) -> Result<bool> {
    let operation = "checkpointing the write-ahead log";
    let connection =
        Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX)
            .map_err(MemoryError::sqlite(operation))?;
    connection.busy_timeout(CHECKPOINT_BUSY_TIMEOUT).map_err(MemoryError::sqlite(operation))?;
    let busy: i64 = connection
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| row.get(0))
        .map_err(MemoryError::sqlite(operation))?;
    Ok(busy == 0)
}

/// Rebuilds the `memory.db` at `path`: copies it aside, salvages every row
/// SQLite can still read into a new file with the current schema (its
/// triggers rebuild the keyword index), checks the new file and moves it
/// into place. A sound store is left alone unless `force`; an empty file
/// beside other state is replaced by a new store only with `force`.
///
/// No other process may have the store open while it is repaired.
pub fn repair_database(path: &Path, force: bool) -> Result<RepairReport> {
    let _span = tracing::debug_span!("memory_db_repair", path = %path.display()).entered();
    let io = |operation: &'static str, path: &Path| {
        let path = path.to_owned();
        move |source| MemoryError::Io { operation, path, source }
    };
    let metadata = std::fs::metadata(path).map_err(io("reading", path))?;
    let empty = metadata.len() == 0;
    if empty && !force {
        refuse_lost_database(path)?;
    }
    let problems = if empty {
        vec!["memory.db is empty (0 bytes)".to_owned()]
    } else {
        let connection = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(MemoryError::sqlite("opening memory.db to check it"))?;
        let mut problems = quick_check(&connection).unwrap_or_default();
        if problems.is_empty() {
            problems = type_problems(&connection);
        }
        problems
    };
    let mut report =
        RepairReport { path: path.to_owned(), backup: None, problems, repaired: false, tables: Vec::new() };
    if report.problems.is_empty() && !force {
        return Ok(report);
    }
    let stamp = crate::clock::now_ms();
    let backup = sibling(path, &format!(".damaged-{stamp}"));
    std::fs::copy(path, &backup).map_err(io("copying aside", &backup))?;
    for suffix in ["-wal", "-shm"] {
        let from = sibling(path, suffix);
        if from.exists() {
            let to = sibling(&backup, suffix);
            std::fs::copy(&from, &to).map_err(io("copying aside", &to))?;
        }
    }
    report.backup = Some(backup.clone());

    let fresh = sibling(path, &format!(".repair-{stamp}"));
    let _ = std::fs::remove_file(&fresh);
    let mut target = Connection::open(&fresh).map_err(MemoryError::sqlite("creating the repaired memory.db"))?;
    schema::migrate(&mut target)?;
    if !empty {
        let source = Connection::open_with_flags(&backup, OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(MemoryError::sqlite("opening the damaged copy"))?;
        report.tables = salvage(&source, &mut target)?;
        fix_types(&target)?;
    }
    let check: String = target
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .map_err(MemoryError::sqlite("checking the repaired memory.db"))?;
    if check != "ok" {
        let _ = std::fs::remove_file(&fresh);
        return Err(MemoryError::InvalidConfig(format!("the repaired memory.db failed its check: {check}")));
    }
    target
        .query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))
        .map_err(MemoryError::sqlite("switching the repaired memory.db to WAL"))?;
    drop(target);
    // The damaged file's log must not be replayed into the new one.
    for suffix in ["-wal", "-shm"] {
        let stale = sibling(path, suffix);
        if stale.exists() {
            std::fs::remove_file(&stale).map_err(io("removing", &stale))?;
        }
    }
    std::fs::rename(&fresh, path).map_err(io("moving the repaired database to", path))?;
    if let Some(dir) = path.parent() {
        // The vector index snapshot and its vector file belonged to the old
        // store; they are rebuilt.
        let _ = std::fs::remove_file(dir.join(EPISODIC_INDEX_FILE_NAME));
        let _ = std::fs::remove_file(dir.join(EPISODIC_VECTORS_FILE_NAME));
        cairn_files::sync_dir(dir);
    }
    report.repaired = true;
    Ok(report)
}

/// Copies every readable row of every table both files share.
fn salvage(source: &Connection, target: &mut Connection) -> Result<Vec<TableSalvage>> {
    let tables: Vec<(String, bool)> = {
        let mut statement = target
            .prepare(
                "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'
                 AND name NOT LIKE 'episodic_fts%' ORDER BY rowid",
            )
            .map_err(MemoryError::sqlite("listing tables"))?;
        let rows = statement
            .query_map([], |row| {
                let sql: String = row.get(1)?;
                Ok((row.get::<_, String>(0)?, sql.to_ascii_uppercase().contains("WITHOUT ROWID")))
            })
            .map_err(MemoryError::sqlite("listing tables"))?;
        rows.collect::<rusqlite::Result<_>>().map_err(MemoryError::sqlite("listing tables"))?
    };
    let mut report = Vec::new();
    let transaction = target.transaction().map_err(MemoryError::sqlite("writing the repaired memory.db"))?;
    for (table, without_rowid) in tables {
        let target_columns = columns(&transaction, &table).unwrap_or_default();
        let source_columns = columns(source, &table).unwrap_or_default();
        let shared: Vec<String> = target_columns.into_iter().filter(|column| source_columns.contains(column)).collect();
        let expected: Option<u64> = source
            .query_row(&format!("SELECT count(*) FROM \"{table}\""), [], |row| row.get::<_, i64>(0))
            .ok()
            .map(|count| count.max(0) as u64);
        if shared.is_empty() {
            report.push(TableSalvage {
                table,
                recovered: 0,
                lost: expected.unwrap_or(0),
                lost_is_estimate: expected.is_none(),
            });
            continue;
        }
        let list = shared.iter().map(|column| format!("\"{column}\"")).collect::<Vec<_>>().join(", ");
        let placeholders = vec!["?"; shared.len() + usize::from(!without_rowid)].join(", ");
        // Rows the fresh schema seeded (meta counters, a new store id) stay.
        let insert = if without_rowid {
            format!("INSERT OR IGNORE INTO \"{table}\" ({list}) VALUES ({placeholders})")
        } else {
            format!("INSERT OR IGNORE INTO \"{table}\" (rowid, {list}) VALUES ({placeholders})")
        };
        let mut insert = transaction.prepare(&insert).map_err(MemoryError::sqlite("writing a salvaged row"))?;
        let mut recovered = 0u64;
        let mut read = 0u64;
        let mut write = |values: Vec<Value>| -> Result<()> {
            read += 1;
            if insert.execute(params_from_iter(values)).is_ok_and(|changed| changed == 1) {
                recovered += 1;
            }
            Ok(())
        };
        let highest = if without_rowid {
            scan_all(source, &table, &list, &mut write)?;
            None
        } else {
            scan_by_rowid(source, &table, &list, &mut write)?
        };
        let sequence: Option<u64> = source
            .query_row("SELECT seq FROM sqlite_sequence WHERE name = ?1", [&table], |row| row.get::<_, i64>(0))
            .ok()
            .map(|seq| seq.max(0) as u64)
            .or(highest);
        let (lost, lost_is_estimate) = match expected {
            Some(expected) => (expected.saturating_sub(recovered), false),
            None => (sequence.unwrap_or(read).saturating_sub(recovered), true),
        };
        if lost > 0 {
            tracing::warn!(table, recovered, lost, "rows lost in the repair of memory.db");
        }
        report.push(TableSalvage { table, recovered, lost, lost_is_estimate });
    }
    transaction.commit().map_err(MemoryError::sqlite("committing the repaired memory.db"))?;
    Ok(report)
}

/// The `INTEGER` columns of every table of Cairn's schema in `connection`.
fn integer_columns(connection: &Connection) -> Vec<(String, String)> {
    let tables: Vec<String> = connection
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'
             AND name NOT LIKE 'episodic_fts%' ORDER BY name",
        )
        .and_then(|mut statement| statement.query_map([], |row| row.get(0))?.collect())
        .unwrap_or_default();
    let mut found = Vec::new();
    for table in tables {
        let Ok(mut statement) = connection.prepare(&format!("PRAGMA table_info(\"{table}\")")) else { continue };
        let columns: Vec<(String, String)> = statement
            .query_map([], |row| Ok((row.get::<_, String>(1)?, row.get::<_, String>(2)?)))
            .and_then(|rows| rows.collect())
            .unwrap_or_default();
        for (column, declared) in columns {
            if declared.eq_ignore_ascii_case("INTEGER") {
                found.push((table.clone(), column));
            }
        }
    }
    found
}

/// What a sound file can still hold wrong: an `INTEGER` column holding
/// another type (SQLite stores whatever it is given; an integer overflow
/// turns into a REAL the rows can no longer be read back with), and a
/// semantic `version` no change could follow.
fn type_problems(connection: &Connection) -> Vec<String> {
    let mut problems = Vec::new();
    for (table, column) in integer_columns(connection) {
        let sql = format!(
            "SELECT typeof(\"{column}\"), count(*) FROM \"{table}\"
             WHERE typeof(\"{column}\") NOT IN ('integer', 'null') GROUP BY 1 ORDER BY 1"
        );
        let Ok(mut statement) = connection.prepare(&sql) else { continue };
        let found: Vec<(String, i64)> = statement
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .and_then(|rows| rows.collect())
            .unwrap_or_default();
        for (kind, count) in found {
            problems.push(format!("{table}.{column} holds {count} value(s) of type {kind}, not integer"));
        }
    }
    let out_of_range: i64 = connection
        .query_row(
            "SELECT count(*) FROM semantic_memory WHERE typeof(version) = 'integer' AND (version < 1 OR version > ?1)",
            [MAX_SEMANTIC_VERSION],
            |row| row.get(0),
        )
        .unwrap_or(0);
    if out_of_range > 0 {
        problems
            .push(format!("semantic_memory.version is outside 1 to {MAX_SEMANTIC_VERSION} in {out_of_range} row(s)"));
    }
    problems
}

/// Puts right what [`type_problems`] finds in the salvaged copy: a REAL in
/// an `INTEGER` column becomes the integer it rounds to (saturating), and
/// a semantic `version` out of range starts again at 1 (it only tells one
/// change of a row from the next).
fn fix_types(target: &Connection) -> Result<()> {
    let operation = "fixing column types in the repaired memory.db";
    for (table, column) in integer_columns(target) {
        target
            .execute(
                &format!(
                    "UPDATE \"{table}\" SET \"{column}\" = CAST(\"{column}\" AS INTEGER)
                     WHERE typeof(\"{column}\") = 'real'"
                ),
                [],
            )
            .map_err(MemoryError::sqlite(operation))?;
    }
    target
        .execute("UPDATE semantic_memory SET version = 1 WHERE version < 1 OR version > ?1", [MAX_SEMANTIC_VERSION])
        .map_err(MemoryError::sqlite(operation))?;
    Ok(())
}

fn columns(connection: &Connection, table: &str) -> rusqlite::Result<Vec<String>> {
    let mut statement = connection.prepare(&format!("PRAGMA table_info(\"{table}\")"))?;
    let rows = statement.query_map([], |row| row.get::<_, String>(1))?;
    rows.collect()
}

/// One pass in key order, stopping at the first unreadable row.
fn scan_all(
    source: &Connection,
    table: &str,
    list: &str,
    write: &mut dyn FnMut(Vec<Value>) -> Result<()>,
) -> Result<()> {
    let Ok(mut statement) = source.prepare(&format!("SELECT {list} FROM \"{table}\"")) else { return Ok(()) };
    let width = statement.column_count();
    let Ok(mut rows) = statement.query([]) else { return Ok(()) };
    while let Ok(Some(row)) = rows.next() {
        let Ok(values) = (0..width).map(|index| row.get::<_, Value>(index)).collect() else { break };
        write(values)?;
    }
    Ok(())
}

/// Reads in rowid order; when a damaged page stops the read, seeks past it
/// with a doubling stride until rows come back or the ids run out. Returns
/// the highest rowid seen.
fn scan_by_rowid(
    source: &Connection,
    table: &str,
    list: &str,
    write: &mut dyn FnMut(Vec<Value>) -> Result<()>,
) -> Result<Option<u64>> {
    let Ok(mut statement) =
        source.prepare(&format!("SELECT rowid, {list} FROM \"{table}\" WHERE rowid > ?1 ORDER BY rowid"))
    else {
        return Ok(None);
    };
    let width = statement.column_count();
    let mut after: i64 = i64::MIN;
    let mut highest: Option<i64> = None;
    let mut stride: i64 = 1;
    loop {
        let mut progressed = false;
        let mut failed = false;
        match statement.query([after]) {
            Ok(mut rows) => loop {
                match rows.next() {
                    Ok(Some(row)) => {
                        let values: rusqlite::Result<Vec<Value>> = (0..width).map(|index| row.get(index)).collect();
                        let Ok(values) = values else {
                            failed = true;
                            break;
                        };
                        let Value::Integer(rowid) = values[0] else {
                            failed = true;
                            break;
                        };
                        after = rowid;
                        highest = Some(highest.map_or(rowid, |seen| seen.max(rowid)));
                        progressed = true;
                        write(values)?;
                    }
                    Ok(None) => break,
                    Err(_) => {
                        failed = true;
                        break;
                    }
                }
            },
            Err(_) => failed = true,
        }
        if !failed {
            break;
        }
        if progressed {
            stride = 1;
        }
        let base = if after == i64::MIN { 0 } else { after };
        let Some(next) = base.checked_add(stride) else { break };
        if stride > 1 << 40 {
            break;
        }
        after = next;
        stride = stride.saturating_mul(2);
    }
    Ok(highest.map(|rowid| rowid.max(0) as u64))
}

#[cfg(test)]
mod tests {
    use super::checkpoint_wal;
    use crate::{MemoryConfig, MemoryDb, Source, StorageErrorKind};

    #[test]
    fn a_checkpoint_folds_the_log_back_into_the_file() {
        let home = tempfile::tempdir().unwrap();
        let db = MemoryDb::open_in_home(home.path(), MemoryConfig::default()).unwrap();
        db.write_semantic("pref.editor", &serde_json::json!("helix"), 1.0, Source::UserExplicit).unwrap();
        let wal = super::sibling(db.path(), "-wal");
        assert!(std::fs::metadata(&wal).unwrap().len() > 0);
        assert!(checkpoint_wal(db.path()).unwrap());
        assert_eq!(std::fs::metadata(&wal).unwrap().len(), 0);
        assert_eq!(db.get_semantic("pref.editor").unwrap().unwrap().value, serde_json::json!("helix"));
    }

    #[test]
    fn a_checkpoint_of_a_missing_file_fails_and_creates_nothing() {
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join("memory.db");
        let error = checkpoint_wal(&path).unwrap_err();
        assert_eq!(error.storage_kind(), Some(StorageErrorKind::Other), "{error}");
        assert!(!path.exists());
    }
}
