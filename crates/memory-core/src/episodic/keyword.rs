//! The in-memory keyword index of active episodic rows ([`Bm25Index`]),
//! kept in step with the table through `episodic_text_revision`, a counter
//! the schema's triggers bump whenever an active row's text or tags change
//! or a row becomes active or inactive, whichever process writes.
//!
//! Writes through this store update the index in their critical section;
//! anything else (another process) is caught up by diffing row ids before
//! the next search trusts it. While a large store's index is first built
//! on a background thread, keyword search runs on FTS5 instead.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::Duration;

use parking_lot::{Mutex, RwLock};

use super::Episodic;
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
    /// ([`Episodic::start_keyword_build`]) once it
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

impl Episodic<'_> {
    /// The keyword index in step with `revision` (the caller's snapshot),
    /// brought there under the episodic lock; [`KeywordAccess::Own`] while
    /// there is none yet (search the backend's own keyword index instead).
    pub(crate) fn keyword_index_for_read(&self, revision: i64) -> Result<KeywordAccess> {
        self.collect_keyword_build();
        {
            let slot = self.episodic.keywords.slot.read();
            if slot.revision == Some(revision)
                && let Some(index) = &slot.index
            {
                return Ok(KeywordAccess::Ready(Arc::clone(index)));
            }
            if slot.building {
                return Ok(KeywordAccess::Own { start: false });
            }
        }
        let _episodic = self.lock_episodic();
        self.rows().read("syncing the keyword index", |tx| self.keywords_locked(tx, false))
    }

    /// Brings the index in step with the table through `tx` (the caller
    /// holds the episodic lock), building it when missing: inline when
    /// small, when `inline`, or when the backend has no keyword index of its
    /// own to search meanwhile; else on a background thread that the
    /// caller starts ([`KeywordAccess::Own`]).
    pub(crate) fn keywords_locked(&self, tx: &mut dyn StoreTx, inline: bool) -> Result<KeywordAccess> {
        let revision = tx.revision(Counter::EpisodicText)?;
        let existing = {
            let slot = self.episodic.keywords.slot.read();
            if slot.building {
                return Ok(KeywordAccess::Own { start: false });
            }
            match &slot.index {
                Some(index) if slot.revision == Some(revision) => return Ok(KeywordAccess::Ready(Arc::clone(index))),
                Some(index) => Some(Arc::clone(index)),
                None => None,
            }
        };
        if let Some(index) = existing {
            // Changes made elsewhere: diff the ids.
            let wanted: HashSet<u64> = tx.episodic_active_ids()?.into_iter().map(|id| id as u64).collect();
            index.sync_to(&wanted, |missing| {
                let missing: Vec<u64> = missing.iter().copied().collect();
                load_documents(tx, Some(&missing))
            })?;
            self.episodic.keywords.slot.write().revision = Some(revision);
            return Ok(KeywordAccess::Ready(index));
        }
        let count = tx.episodic_live_count()?;
        if inline || count as usize <= self.episodic.keywords.inline_build_rows || !self.has_own_keyword_index() {
            let (index, revision) = build(tx)?;
            let index = Arc::new(index);
            *self.episodic.keywords.slot.write() =
                Slot { index: Some(Arc::clone(&index)), revision: Some(revision), building: false };
            return Ok(KeywordAccess::Ready(index));
        }
        Ok(KeywordAccess::Own { start: true })
    }

    /// Starts building the keyword index on a background thread, unless a
    /// build runs already.
    pub(crate) fn start_keyword_build(&self) {
        {
            let mut slot = self.episodic.keywords.slot.write();
            if slot.building {
                return;
            }
            slot.building = true;
        }
        let reader = self.background_reader();
        let (sender, receiver) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new().name("cairn-keyword-index".to_owned()).spawn(move || {
            let result = reader.read("reading episodic texts", |tx| build(tx));
            let _ = sender.send(result);
        });
        match spawned {
            Ok(_) => *self.episodic.keywords.pending.lock() = Some(receiver),
            Err(error) => {
                tracing::warn!(%error, "could not start the keyword index build");
                self.episodic.keywords.slot.write().building = false;
            }
        }
    }

    /// Installs a finished background build, if one is waiting.
    pub(crate) fn collect_keyword_build(&self) {
        let Some(mut pending) = self.episodic.keywords.pending.try_lock() else { return };
        let Some(receiver) = pending.as_ref() else { return };
        let finished = match receiver.try_recv() {
            Ok(result) => Some(result),
            Err(TryRecvError::Empty) => return,
            Err(TryRecvError::Disconnected) => None,
        };
        *pending = None;
        let mut slot = self.episodic.keywords.slot.write();
        slot.building = false;
        match finished {
            Some(Ok((index, revision))) => {
                slot.index = Some(Arc::new(index));
                slot.revision = Some(revision);
            }
            Some(Err(error)) => {
                tracing::warn!(%error, "keyword index build failed; keyword search stays on the store's own index")
            }
            None => {}
        }
    }

    /// Documents in the keyword index, if there is one.
    pub(crate) fn keyword_index_len(&self) -> Option<usize> {
        self.episodic.keywords.slot.read().index.as_ref().map(|index| index.len())
    }

    /// Approximate heap bytes of the keyword index (0 before it is built).
    pub(crate) fn keyword_index_bytes(&self) -> usize {
        self.episodic.keywords.slot.read().index.as_ref().map_or(0, |index| index.memory_bytes())
    }

    /// Blocks until a background keyword build has finished and installs it.
    pub(crate) fn wait_for_keyword_index(&self) {
        loop {
            self.collect_keyword_build();
            if !self.episodic.keywords.slot.read().building {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Records a committed write made under the writer lock that moved the
    /// text revision from `before` to `after`: rows `removed` left the
    /// active set and `added` (id, text, tags) joined it. An index that was
    /// not in step stays behind (the next search catches it up).
    pub(crate) fn keywords_after_write(
        &self,
        before: i64,
        after: i64,
        added: Option<(i64, &str, &str)>,
        removed: &[i64],
    ) {
        let mut slot = self.episodic.keywords.slot.write();
        if slot.revision != Some(before) {
            return;
        }
        let Some(index) = slot.index.clone() else { return };
        for id in removed {
            index.remove(*id as u64);
        }
        if let Some((id, text, tags)) = added {
            index.add(id as u64, &document(text, tags));
        }
        slot.revision = Some(after);
    }
}
