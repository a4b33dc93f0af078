//! The provenance ledger of foreign imports: the `import_provenance` table
//! of `memory.db`, keyed by (source, path, item hash).
//!
//! It lives in `memory.db` rather than in a file of the home because its
//! rows describe rows of that database: one `BEGIN IMMEDIATE` transaction
//! records a batch atomically against every other process, and a copy or
//! restore of `memory.db` carries the ledger that matches it.

use std::collections::HashSet;

use rusqlite::params;

use crate::MemoryDb;
use crate::error::{MemoryError, Result};

/// One decided item.
#[derive(Debug, Clone)]
pub(crate) struct LedgerRow {
    pub(crate) source: &'static str,
    pub(crate) path: String,
    pub(crate) item_hash: String,
    pub(crate) landed_as: &'static str,
    pub(crate) outcome: &'static str,
    pub(crate) target: Option<String>,
}

/// What the ledger already holds.
#[derive(Debug, Default)]
pub(crate) struct LedgerView {
    /// (source, path, item hash) of every recorded item.
    pub(crate) seen: HashSet<(String, String, String)>,
    /// Lessons foreign imports have written so far.
    pub(crate) lessons_written: usize,
}

impl LedgerView {
    pub(crate) fn contains(&self, source: &str, path: &str, item_hash: &str) -> bool {
        self.seen.contains(&(source.to_owned(), path.to_owned(), item_hash.to_owned()))
    }
}

impl MemoryDb {
    /// Reads the ledger rows of `sources`.
    pub(crate) fn import_ledger(&self, sources: &[&str]) -> Result<LedgerView> {
        self.read("reading the import provenance ledger", |tx| {
            let operation = "reading the import provenance ledger";
            let mut view = LedgerView::default();
            let mut statement = tx
                .prepare_cached("SELECT source, path, item_hash FROM import_provenance WHERE source = ?1")
                .map_err(MemoryError::sqlite(operation))?;
            for source in sources {
                let rows = statement
                    .query_map([source], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
                    .map_err(MemoryError::sqlite(operation))?;
                for row in rows {
                    view.seen.insert(row.map_err(MemoryError::sqlite(operation))?);
                }
            }
            view.lessons_written = tx
                .query_row(
                    "SELECT count(*) FROM import_provenance WHERE landed_as = 'lesson' AND outcome = 'written'",
                    [],
                    |row| row.get::<_, i64>(0),
                )
                .map_err(MemoryError::sqlite(operation))? as usize;
            Ok(view)
        })
    }

    /// Records `rows` in one transaction; a row already there is kept.
    pub(crate) fn record_import_provenance(&self, rows: &[LedgerRow]) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let now = crate::db::now_ms();
        self.write("recording import provenance", |tx| {
            let mut statement = tx
                .prepare_cached(
                    "INSERT OR IGNORE INTO import_provenance
                        (source, path, item_hash, landed_as, outcome, target, recorded_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )
                .map_err(MemoryError::sqlite("recording import provenance"))?;
            for row in rows {
                statement
                    .execute(params![row.source, row.path, row.item_hash, row.landed_as, row.outcome, row.target, now])
                    .map_err(MemoryError::sqlite("recording import provenance"))?;
            }
            Ok(())
        })
    }
}
