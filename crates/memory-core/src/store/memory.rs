//! The in-memory backend: the same rows in ordered maps. A write
//! transaction works on a copy of the state under the store's lock and
//! replaces the state only when the body succeeds, so a failed write leaves
//! nothing behind and writers never interleave.

use std::collections::{BTreeMap, HashMap, VecDeque};

use parking_lot::Mutex;

use super::{
    AuditLog, Backend, Counter, NewEvent, Revisions, SemanticCounts, SemanticHead, SemanticRow, SemanticRows,
    SemanticUpsert, StoreTx, StoredEvent,
};
use crate::error::Result;

#[derive(Debug, Clone, Default)]
struct State {
    semantic: BTreeMap<String, SemanticRow>,
    vectors: HashMap<String, Vec<f32>>,
    events: VecDeque<StoredEvent>,
    next_event_id: i64,
    revisions: HashMap<Counter, i64>,
}

/// A store held in memory, gone with the process.
#[derive(Debug, Default)]
pub(crate) struct MemoryBackend {
    state: Mutex<State>,
}

/// The rows of one in-memory transaction.
struct MemoryTx<'s> {
    state: &'s mut State,
}

impl Backend for MemoryBackend {
    fn write_dyn(&self, _operation: &'static str, work: &mut dyn FnMut(&mut dyn StoreTx) -> Result<()>) -> Result<()> {
        let mut state = self.state.lock();
        let mut draft = state.clone();
        work(&mut MemoryTx { state: &mut draft })?;
        *state = draft;
        Ok(())
    }

    fn read_dyn(&self, _operation: &'static str, work: &mut dyn FnMut(&mut dyn StoreTx) -> Result<()>) -> Result<()> {
        // Reads see the state as of their start; what they change is dropped.
        let mut view = self.state.lock().clone();
        work(&mut MemoryTx { state: &mut view })
    }
}

impl SemanticRows for MemoryTx<'_> {
    fn semantic_row(&mut self, key: &str) -> Result<Option<SemanticRow>> {
        Ok(self.state.semantic.get(key).cloned())
    }

    fn upsert_semantic(&mut self, write: &SemanticUpsert<'_>) -> Result<()> {
        let space = write.vector.map(|(_, space)| space.to_owned());
        match self.state.semantic.get_mut(write.key) {
            Some(row) => {
                if row.is_deleted {
                    row.created_at = write.at;
                }
                row.value = write.value.to_owned();
                row.confidence = write.confidence;
                row.source = write.source.to_owned();
                row.category = write.category.map(str::to_owned);
                row.updated_at = write.at;
                row.is_deleted = false;
                row.version += 1;
                row.embedding_space = space;
            }
            None => {
                self.state.semantic.insert(
                    write.key.to_owned(),
                    SemanticRow {
                        key: write.key.to_owned(),
                        value: write.value.to_owned(),
                        confidence: write.confidence,
                        source: write.source.to_owned(),
                        category: write.category.map(str::to_owned),
                        created_at: write.at,
                        updated_at: write.at,
                        is_deleted: false,
                        version: 1,
                        embedding_space: space,
                    },
                );
            }
        }
        match write.vector {
            Some((vector, _)) => self.state.vectors.insert(write.key.to_owned(), vector.to_vec()),
            None => self.state.vectors.remove(write.key),
        };
        Ok(())
    }

    fn set_semantic_vector(&mut self, key: &str, vector: &[f32], space: &str) -> Result<()> {
        if let Some(row) = self.state.semantic.get_mut(key) {
            row.embedding_space = Some(space.to_owned());
            self.state.vectors.insert(key.to_owned(), vector.to_vec());
        }
        Ok(())
    }

    fn set_semantic_vector_if_version(&mut self, key: &str, version: i64, vector: &[f32], space: &str) -> Result<bool> {
        match self.state.semantic.get_mut(key) {
            Some(row) if row.version == version && !row.is_deleted => {
                row.embedding_space = Some(space.to_owned());
                self.state.vectors.insert(key.to_owned(), vector.to_vec());
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn tombstone_semantic(&mut self, key: &str, at: i64) -> Result<()> {
        if let Some(row) = self.state.semantic.get_mut(key) {
            row.is_deleted = true;
            row.updated_at = at;
            row.version += 1;
            row.embedding_space = None;
        }
        self.state.vectors.remove(key);
        Ok(())
    }

    fn semantic_vector(&mut self, key: &str, space: &str) -> Result<Option<Vec<f32>>> {
        let in_space = self.state.semantic.get(key).is_some_and(|row| row.embedding_space.as_deref() == Some(space));
        Ok(if in_space { self.state.vectors.get(key).cloned() } else { None })
    }

    fn live_semantic(&mut self, prefix: &str) -> Result<Vec<SemanticRow>> {
        Ok(self
            .state
            .semantic
            .range(prefix.to_owned()..)
            .take_while(|(key, _)| key.starts_with(prefix))
            .filter(|(_, row)| !row.is_deleted)
            .map(|(_, row)| row.clone())
            .collect())
    }

    fn semantic_heads(&mut self) -> Result<Vec<SemanticHead>> {
        Ok(self
            .state
            .semantic
            .values()
            .filter(|row| !row.is_deleted)
            .map(|row| SemanticHead {
                key: row.key.clone(),
                version: row.version,
                embedding_space: row.embedding_space.clone(),
                updated_at: row.updated_at,
            })
            .collect())
    }

    fn semantic_missing_vectors(&mut self, space: &str, limit: usize) -> Result<Vec<SemanticRow>> {
        Ok(self
            .state
            .semantic
            .values()
            .filter(|row| !row.is_deleted && row.embedding_space.as_deref() != Some(space))
            .take(limit)
            .cloned()
            .collect())
    }

    fn semantic_counts(&mut self, space: Option<&str>) -> Result<SemanticCounts> {
        let mut counts = SemanticCounts::default();
        for row in self.state.semantic.values() {
            if row.is_deleted {
                counts.deleted += 1;
                continue;
            }
            counts.live += 1;
            if row.key.starts_with(crate::constants::LESSON_PREFIX) {
                counts.lessons += 1;
            }
            if space.is_none() || row.embedding_space.as_deref() != space {
                counts.missing_vectors += 1;
            }
        }
        Ok(counts)
    }
}

impl AuditLog for MemoryTx<'_> {
    fn append_event(&mut self, event: &NewEvent<'_>, cap: i64) -> Result<()> {
        self.state.next_event_id += 1;
        let id = self.state.next_event_id;
        self.state.events.push_back(StoredEvent {
            id,
            at: event.at,
            memory_type: event.memory_type.to_owned(),
            action: event.action.as_str().to_owned(),
            key: event.key.map(str::to_owned),
            old_value: event.old_value.map(str::to_owned),
            new_value: event.new_value.map(str::to_owned),
            source: event.source.map(str::to_owned),
            confidence: event.confidence,
            detail: event.detail.map(str::to_owned),
        });
        while self.state.events.front().is_some_and(|oldest| oldest.id <= id - cap) {
            self.state.events.pop_front();
        }
        Ok(())
    }

    fn newest_events(&mut self, limit: usize) -> Result<Vec<StoredEvent>> {
        Ok(self.state.events.iter().rev().take(limit).cloned().collect())
    }

    fn event_count(&mut self) -> Result<i64> {
        Ok(self.state.events.len() as i64)
    }
}

impl Revisions for MemoryTx<'_> {
    fn revision(&mut self, counter: Counter) -> Result<i64> {
        Ok(self.state.revisions.get(&counter).copied().unwrap_or(0))
    }

    fn bump_revision(&mut self, counter: Counter) -> Result<()> {
        *self.state.revisions.entry(counter).or_insert(0) += 1;
        Ok(())
    }
}
