//! The provenance ledger of every import (foreign agents' files and export
//! documents, [`EXPORT_LEDGER_SOURCE`](crate::constants::EXPORT_LEDGER_SOURCE)):
//! the `import_provenance` table of `memory.db`, keyed by (source, path,
//! item hash).
//!
//! It lives in `memory.db` rather than in a file of the home because its
//! rows describe rows of that database: one `BEGIN IMMEDIATE` transaction
//! records a batch atomically against every other process, and a copy or
//! restore of `memory.db` carries the ledger that matches it.

use std::collections::HashSet;

use crate::MemoryDb;
use crate::error::Result;
use crate::store::LedgerEntry;

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
        self.rows().read("reading the import provenance ledger", |tx| {
            let mut view = LedgerView::default();
            for source in sources {
                for (path, item_hash) in tx.ledger_items(source)? {
                    view.seen.insert(((*source).to_owned(), path, item_hash));
                }
            }
            view.lessons_written = tx.ledger_lessons_written()? as usize;
            Ok(view)
        })
    }

    /// Records `rows` in one transaction; a row already there is kept.
    pub(crate) fn record_import_provenance(&self, rows: &[LedgerRow]) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let now = crate::clock::now_ms();
        self.rows().write("recording import provenance", |tx| {
            for row in rows {
                tx.record_ledger(&LedgerEntry {
                    source: row.source,
                    path: &row.path,
                    item_hash: &row.item_hash,
                    landed_as: row.landed_as,
                    outcome: row.outcome,
                    target: row.target.as_deref(),
                    recorded_at: now,
                })?;
            }
            Ok(())
        })
    }
}
