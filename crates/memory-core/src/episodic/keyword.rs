//! The in-memory keyword index of active episodic rows ([`Bm25Index`]),
//! kept in step with the table through `episodic_text_revision`, a counter
//! the schema's triggers bump whenever an active row's text or tags change
//! or a row becomes active or inactive, whichever process writes.
//!
//! Writes through this store update the index in their critical section;
//! anything else (another process) is caught up by diffing row ids before
//! the next search trusts it. While a large store's index is first built
//! on a background thread, keyword search runs on FTS5 instead.

use std::sync::Arc;
use std::sync::mpsc::Receiver;

use parking_lot::{Mutex, RwLock};

use crate::bm25::Bm25Index;
use crate::constants::KEYWORD_INLINE_BUILD;
use crate::error::Result;
use crate::store::{Counter, StoreTx};

#[derive(Default)]
pub(crate) struct Slot {
    pub(crate) index: Option<Arc<Bm25Index>>,
    /// The `episodic_text_revision` the index reflects.
    pub(crate) revision: Option<i64>,
    pub(crate) building: bool,
}

/// The keyword index a search may use.
pub(crate) enum KeywordAccess {
    Ready(Arc<Bm25Index>),
    /// None yet: the backend's own keyword index answers meanwhile. With
    /// `start`, no build runs and the caller starts one
    /// ([`MemoryDb::start_keyword_build`](crate::db::MemoryDb)) once it
    /// has its answer, so the build's reads of every text do not compete
    /// with the search that found the index missing.
    Own {
        start: bool,
    },
}

/// A finished build: the index and the text revision it reflects.
type Built = Result<(Bm25Index, i64)>;

/// Per-store keyword index state.
pub(crate) struct KeywordState {
    pub(crate) slot: RwLock<Slot>,
    pub(crate) pending: Mutex<Option<Receiver<Built>>>,
    /// Up to how many active rows a missing index is built inline
    /// ([`KEYWORD_INLINE_BUILD`]; lower in tests).
    pub(crate) inline_build_rows: usize,
}

impl Default for KeywordState {
    fn default() -> Self {
        Self { slot: RwLock::default(), pending: Mutex::default(), inline_build_rows: KEYWORD_INLINE_BUILD }
    }
}

/// What the keyword index holds for a row: its text and its tags.
pub(crate) fn document(text: &str, tags_json: &str) -> String {
    format!("{text} {tags_json}")
}

/// Active rows (all, or those among `only`) as `(id, document)`.
pub(crate) fn load_documents(tx: &mut dyn StoreTx, only: Option<&[u64]>) -> Result<Vec<(u64, String)>> {
    let only: Option<Vec<i64>> = only.map(|ids| ids.iter().map(|id| *id as i64).collect());
    Ok(tx
        .episodic_documents(only.as_deref())?
        .into_iter()
        .map(|(id, text, tags)| (id as u64, document(&text, &tags)))
        .collect())
}

/// A full index and the revision it reflects, read inside the caller's
/// transaction (one snapshot).
pub(crate) fn build(tx: &mut dyn StoreTx) -> Built {
    let revision = tx.revision(Counter::EpisodicText)?;
    let documents = load_documents(tx, None)?;
    let index = Bm25Index::build(documents.iter().map(|(id, text)| (*id, text.as_str())));
    Ok((index, revision))
}
