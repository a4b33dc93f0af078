//! The in-memory backend: the same rows in ordered maps. A write
//! transaction works on a copy of the state under the store's lock and
//! replaces the state only when the body succeeds, so a failed write leaves
//! nothing behind and writers never interleave.

use std::collections::{BTreeMap, HashMap, VecDeque};

use parking_lot::Mutex;

use super::{
    AuditLog, Backend, Counter, EpisodicCounts, EpisodicRow, EpisodicRows, EpisodicText, EpisodicVectors, EventRecord,
    EvidenceLayer, EvidenceRow, EvidenceRows, ForgetRows, ForgottenRow, LedgerEntry, LedgerRows, MarkerColumn,
    NewEpisodicRow, Revisions, RunRow, RunRows, SemanticCounts, SemanticHead, SemanticRow, SemanticRows,
    SemanticUpsert, SemanticVectors, SessionMessage, SessionRow, StoreTx, StoredEvent, TranscriptRow, TranscriptRows,
};
use crate::constants::EXPORT_LEDGER_SOURCE;
use crate::error::{MemoryError, Result, StorageError, StorageErrorKind};

#[derive(Debug, Clone, Default)]
struct State {
    semantic: BTreeMap<String, SemanticRow>,
    vectors: HashMap<String, Vec<f32>>,
    events: VecDeque<StoredEvent>,
    next_event_id: i64,
    revisions: HashMap<Counter, i64>,
    /// Episodic rows by id, tombstones included.
    episodic: BTreeMap<i64, Episode>,
    /// The last id handed out (ids are never reused).
    last_episodic_id: i64,
    sessions: BTreeMap<String, Session>,
    /// Messages by `(session key, seq)`.
    transcripts: BTreeMap<(String, i64), TranscriptRow>,
    /// Ledger rows by `(source, path, item hash)`.
    ledger: BTreeMap<(String, String, String), Recorded>,
    settings: BTreeMap<String, String>,
    forgotten: Vec<ForgottenRow>,
    /// Evidence by `(layer name, target)`.
    evidence: BTreeMap<(&'static str, String), EvidenceRow>,
    /// Consolidation runs by id.
    runs: BTreeMap<i64, RunRow>,
}

/// An episodic row and its vector blob (`row.has_vector` says whether there is one).
#[derive(Debug, Clone)]
struct Episode {
    row: EpisodicRow,
    embedding: Option<Vec<u8>>,
}

impl Episode {
    fn active(&self) -> bool {
        !self.row.is_deleted
    }

    /// The vector blob, when the row has one in `space`.
    fn vector_in(&self, space: &str) -> Option<&[u8]> {
        (self.row.embedding_space.as_deref() == Some(space)).then_some(self.embedding.as_deref()).flatten()
    }

    /// Whether the row lacks a vector in `space` (SQLite's
    /// `embedding_space IS NOT ?1 OR embedding IS NULL`).
    fn missing_in(&self, space: Option<&str>) -> bool {
        self.row.embedding_space.as_deref() != space || self.embedding.is_none()
    }
}

/// The consolidation state of a session (the message count is derived).
#[derive(Debug, Clone)]
struct Session {
    next_seq: i64,
    history_marker: i64,
    preferences_marker: i64,
    last_activity: i64,
    claim_owner: Option<i64>,
    claim_until: Option<i64>,
    scope: String,
}

/// What the ledger keeps of a recorded item besides its key.
#[derive(Debug, Clone)]
struct Recorded {
    landed_as: String,
    outcome: String,
    #[allow(dead_code, reason = "stored as every backend stores it; no query reads it back")]
    target: Option<String>,
    #[allow(dead_code, reason = "stored as every backend stores it; no query reads it back")]
    recorded_at: i64,
}

/// A row refused because its key is already stored (a primary key violation).
#[derive(Debug, thiserror::Error)]
#[error("{table} already holds a row with this key")]
struct DuplicateKey {
    table: &'static str,
}

fn duplicate(operation: &'static str, table: &'static str) -> MemoryError {
    MemoryError::Storage { operation, source: StorageError::new(StorageErrorKind::Constraint, DuplicateKey { table }) }
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
    fn kind(&self) -> &'static str {
        "memory"
    }

    /// The rows are those of the current SQLite schema.
    fn schema_version(&self) -> Result<i64> {
        Ok(super::sqlite::schema::SCHEMA_VERSION)
    }

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

impl StoreTx for MemoryTx<'_> {}

impl ForgetRows for MemoryTx<'_> {
    fn record_forgotten(&mut self, row: &ForgottenRow) -> Result<()> {
        self.state.forgotten.push(row.clone());
        Ok(())
    }

    fn forgotten_rows(&mut self) -> Result<Vec<ForgottenRow>> {
        Ok(self.state.forgotten.clone())
    }

    fn session_messages(&mut self) -> Result<Vec<SessionMessage>> {
        Ok(self
            .state
            .transcripts
            .iter()
            .map(|((session_key, _), row)| SessionMessage {
                session_key: session_key.clone(),
                scope: self.state.sessions.get(session_key).map_or_else(|| "global".to_owned(), |s| s.scope.clone()),
                row: row.clone(),
            })
            .collect())
    }

    fn delete_session_messages(&mut self, messages: &[(String, i64)]) -> Result<usize> {
        Ok(messages.iter().filter(|(key, seq)| self.state.transcripts.remove(&(key.clone(), *seq)).is_some()).count())
    }
}

impl SemanticRows for MemoryTx<'_> {
    fn deleted_semantic(&mut self) -> Result<Vec<SemanticRow>> {
        Ok(self.state.semantic.values().filter(|row| row.is_deleted).cloned().collect())
    }

    fn insert_semantic_row(&mut self, row: &SemanticRow) -> Result<()> {
        if self.state.semantic.contains_key(&row.key) {
            return Err(duplicate("restoring a semantic entry", "semantic_memory"));
        }
        self.state.semantic.insert(row.key.clone(), SemanticRow { embedding_space: None, ..row.clone() });
        Ok(())
    }

    fn put_semantic_row(&mut self, row: &SemanticRow) -> Result<()> {
        self.remove_semantic_row(&row.key)?;
        self.insert_semantic_row(row)
    }

    fn remove_semantic_row(&mut self, key: &str) -> Result<()> {
        self.state.semantic.remove(key);
        self.state.vectors.remove(key);
        Ok(())
    }

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

impl SemanticVectors for MemoryTx<'_> {
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

    fn semantic_vector(&mut self, key: &str, space: &str) -> Result<Option<Vec<f32>>> {
        let in_space = self.state.semantic.get(key).is_some_and(|row| row.embedding_space.as_deref() == Some(space));
        Ok(if in_space { self.state.vectors.get(key).cloned() } else { None })
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
}

impl AuditLog for MemoryTx<'_> {
    fn append_event(&mut self, at: i64, event: &EventRecord<'_>, cap: i64) -> Result<()> {
        self.state.next_event_id += 1;
        let id = self.state.next_event_id;
        self.state.events.push_back(StoredEvent {
            id,
            at,
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

    fn bump_revision(&mut self, counter: Counter) -> Result<i64> {
        let value = self.state.revisions.entry(counter).or_insert(0);
        *value += 1;
        Ok(*value)
    }
}

impl MemoryTx<'_> {
    fn active_episodes(&self) -> impl Iterator<Item = &Episode> {
        self.state.episodic.values().filter(|episode| episode.active())
    }

    /// The active rows among `only` (in its order), or every active row by id.
    fn chosen_episodes<'a>(&'a self, only: Option<&'a [i64]>) -> Box<dyn Iterator<Item = &'a Episode> + 'a> {
        match only {
            None => Box::new(self.active_episodes()),
            Some(ids) => {
                Box::new(ids.iter().filter_map(|id| self.state.episodic.get(id)).filter(|episode| episode.active()))
            }
        }
    }

    fn bump_text_revision(&mut self) {
        *self.state.revisions.entry(Counter::EpisodicText).or_insert(0) += 1;
    }
}

impl EpisodicRows for MemoryTx<'_> {
    fn insert_episodic(&mut self, row: &NewEpisodicRow<'_>) -> Result<i64> {
        self.state.last_episodic_id += 1;
        let id = self.state.last_episodic_id;
        let (embedding, space) = match row.vector {
            Some((blob, space)) => (Some(blob.to_vec()), Some(space.to_owned())),
            None => (None, None),
        };
        self.state.episodic.insert(
            id,
            Episode {
                row: EpisodicRow {
                    id,
                    text: row.text.to_owned(),
                    tags_json: row.tags_json.to_owned(),
                    importance: row.importance,
                    created_at: row.created_at,
                    last_accessed: None,
                    source_ref: row.source_ref.map(str::to_owned),
                    source: row.source.to_owned(),
                    embedding_space: space,
                    has_vector: embedding.is_some(),
                    is_deleted: false,
                    scope: row.scope.to_owned(),
                },
                embedding,
            },
        );
        self.bump_text_revision();
        Ok(id)
    }

    fn tombstone_episodic(&mut self, id: i64) -> Result<Option<String>> {
        let text = match self.state.episodic.get_mut(&id) {
            Some(episode) if episode.active() => {
                episode.row.is_deleted = true;
                episode.row.text.clone()
            }
            _ => return Ok(None),
        };
        self.bump_text_revision();
        Ok(Some(text))
    }

    fn episodic_with_text(&mut self, text: &str) -> Result<Option<i64>> {
        Ok(self.active_episodes().find(|episode| episode.row.text == text).map(|episode| episode.row.id))
    }

    fn episodic_is_active(&mut self, id: i64) -> Result<bool> {
        Ok(self.state.episodic.get(&id).is_some_and(Episode::active))
    }

    fn episodic_eviction_order(&mut self, limit: usize) -> Result<Vec<i64>> {
        let mut rows: Vec<&EpisodicRow> = self.active_episodes().map(|episode| &episode.row).collect();
        rows.sort_by(|a, b| {
            a.importance.total_cmp(&b.importance).then(a.created_at.cmp(&b.created_at)).then(a.id.cmp(&b.id))
        });
        Ok(rows.into_iter().take(limit).map(|row| row.id).collect())
    }

    fn episodic_row(&mut self, id: i64, vector_space: Option<&str>) -> Result<Option<(EpisodicRow, Option<Vec<u8>>)>> {
        Ok(self.state.episodic.get(&id).map(|episode| {
            let blob = vector_space.and_then(|space| episode.vector_in(space)).map(<[u8]>::to_vec);
            (episode.row.clone(), blob)
        }))
    }

    fn episodic_page(&mut self, limit: usize, offset: usize) -> Result<Vec<EpisodicRow>> {
        let mut rows: Vec<&EpisodicRow> = self.active_episodes().map(|episode| &episode.row).collect();
        rows.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(b.id.cmp(&a.id)));
        Ok(rows.into_iter().skip(offset).take(limit).cloned().collect())
    }

    fn episodic_active_ids(&mut self) -> Result<Vec<i64>> {
        Ok(self.active_episodes().map(|episode| episode.row.id).collect())
    }

    fn episodic_counts(&mut self, space: Option<&str>) -> Result<EpisodicCounts> {
        let mut counts = EpisodicCounts::default();
        for episode in self.state.episodic.values() {
            if !episode.active() {
                counts.deleted += 1;
                continue;
            }
            counts.live += 1;
            if space.is_some_and(|space| episode.vector_in(space).is_some()) {
                counts.with_vectors += 1;
            }
        }
        Ok(counts)
    }

    fn touch_episodic(&mut self, touches: &[(i64, i64)]) -> Result<()> {
        for (id, at) in touches {
            if let Some(episode) = self.state.episodic.get_mut(id) {
                episode.row.last_accessed = Some(*at);
            }
        }
        Ok(())
    }
}

impl EpisodicVectors for MemoryTx<'_> {
    fn episodic_vectors(&mut self, space: &str, only: Option<&[i64]>) -> Result<Vec<(i64, Vec<u8>)>> {
        Ok(self
            .chosen_episodes(only)
            .filter_map(|episode| episode.vector_in(space).map(|blob| (episode.row.id, blob.to_vec())))
            .collect())
    }

    fn episodic_vector_ids(&mut self, space: &str) -> Result<Vec<i64>> {
        Ok(self
            .active_episodes()
            .filter(|episode| episode.vector_in(space).is_some())
            .map(|episode| episode.row.id)
            .collect())
    }

    fn episodic_missing_vectors(
        &mut self,
        space: Option<&str>,
        after_id: i64,
        limit: usize,
    ) -> Result<Vec<(i64, String)>> {
        Ok(self
            .state
            .episodic
            .range(after_id.saturating_add(1)..)
            .map(|(_, episode)| episode)
            .filter(|episode| episode.active() && episode.missing_in(space))
            .take(limit)
            .map(|episode| (episode.row.id, episode.row.text.clone()))
            .collect())
    }

    fn episodic_missing_count(&mut self, space: Option<&str>) -> Result<i64> {
        Ok(self.active_episodes().filter(|episode| episode.missing_in(space)).count() as i64)
    }

    fn set_episodic_vector(&mut self, id: i64, text: &str, blob: &[u8], space: &str) -> Result<bool> {
        match self.state.episodic.get_mut(&id) {
            Some(episode) if episode.active() && episode.row.text == text => {
                episode.embedding = Some(blob.to_vec());
                episode.row.has_vector = true;
                episode.row.embedding_space = Some(space.to_owned());
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

impl EpisodicText for MemoryTx<'_> {
    fn episodic_documents(&mut self, only: Option<&[i64]>) -> Result<Vec<(i64, String, String)>> {
        Ok(self
            .chosen_episodes(only)
            .map(|episode| (episode.row.id, episode.row.text.clone(), episode.row.tags_json.clone()))
            .collect())
    }

    fn episodic_quoting(&mut self, needle: &str, _words: &[String]) -> Result<Vec<(i64, String)>> {
        Ok(self
            .active_episodes()
            .filter(|episode| episode.row.text.to_lowercase().contains(needle))
            .map(|episode| (episode.row.id, episode.row.text.clone()))
            .collect())
    }

    fn episodic_keyword_hits(&mut self, _fts_query: &str, _k: usize) -> Result<Option<Vec<(i64, f64)>>> {
        Ok(None)
    }
}

/// The keys of the messages of `session_key` with `from <= seq < to`.
fn transcript_range(session_key: &str, from: i64, to: i64) -> std::ops::Range<(String, i64)> {
    // A range whose end lies before its start is empty (`BTreeMap::range` would panic).
    (session_key.to_owned(), from)..(session_key.to_owned(), to.max(from))
}

impl TranscriptRows for MemoryTx<'_> {
    fn session(&mut self, session_key: &str) -> Result<Option<SessionRow>> {
        let Some(session) = self.state.sessions.get(session_key).cloned() else { return Ok(None) };
        Ok(Some(SessionRow {
            next_seq: session.next_seq,
            history_marker: session.history_marker,
            preferences_marker: session.preferences_marker,
            last_activity: session.last_activity,
            claim_owner: session.claim_owner,
            claim_until: session.claim_until,
            scope: session.scope,
            stored: self
                .state
                .transcripts
                .range((session_key.to_owned(), i64::MIN)..=(session_key.to_owned(), i64::MAX))
                .count() as i64,
        }))
    }

    fn ensure_session(&mut self, session_key: &str, at: i64, scope: &str) -> Result<()> {
        self.state.sessions.entry(session_key.to_owned()).or_insert(Session {
            scope: scope.to_owned(),
            next_seq: 0,
            history_marker: 0,
            preferences_marker: 0,
            last_activity: at,
            claim_owner: None,
            claim_until: None,
        });
        Ok(())
    }

    fn insert_transcript(&mut self, session_key: &str, row: &TranscriptRow) -> Result<()> {
        let key = (session_key.to_owned(), row.seq);
        if self.state.transcripts.contains_key(&key) {
            return Err(duplicate("appending to a session transcript", "session_transcripts"));
        }
        self.state.transcripts.insert(key, row.clone());
        Ok(())
    }

    fn advance_session(&mut self, session_key: &str, next_seq: i64, at: i64) -> Result<()> {
        if let Some(session) = self.state.sessions.get_mut(session_key) {
            session.next_seq = next_seq;
            session.last_activity = session.last_activity.max(at);
        }
        Ok(())
    }

    fn transcript_rows(&mut self, session_key: &str, from: i64, to: i64) -> Result<Vec<TranscriptRow>> {
        Ok(self.state.transcripts.range(transcript_range(session_key, from, to)).map(|(_, row)| row.clone()).collect())
    }

    fn delete_transcript_below(&mut self, session_key: &str, seq: i64) -> Result<usize> {
        let doomed: Vec<(String, i64)> = self
            .state
            .transcripts
            .range(transcript_range(session_key, i64::MIN, seq))
            .map(|(key, _)| key.clone())
            .collect();
        for key in &doomed {
            self.state.transcripts.remove(key);
        }
        Ok(doomed.len())
    }

    fn idle_sessions(&mut self, before: i64) -> Result<Vec<String>> {
        let mut idle: Vec<(&String, i64)> = self
            .state
            .sessions
            .iter()
            .filter(|(_, session)| session.history_marker < session.next_seq && session.last_activity < before)
            .map(|(key, session)| (key, session.last_activity))
            .collect();
        idle.sort_by_key(|(_, last_activity)| *last_activity);
        Ok(idle.into_iter().map(|(key, _)| key.clone()).collect())
    }

    fn set_claim(&mut self, session_key: &str, claim: Option<(i64, i64)>) -> Result<()> {
        if let Some(session) = self.state.sessions.get_mut(session_key) {
            session.claim_owner = claim.map(|(owner, _)| owner);
            session.claim_until = claim.map(|(_, until)| until);
        }
        Ok(())
    }

    fn release_claim(&mut self, session_key: &str, owner: i64) -> Result<()> {
        if let Some(session) = self.state.sessions.get_mut(session_key)
            && session.claim_owner == Some(owner)
        {
            session.claim_owner = None;
            session.claim_until = None;
        }
        Ok(())
    }

    fn move_marker(&mut self, session_key: &str, marker: MarkerColumn, from: i64, to: i64) -> Result<bool> {
        let Some(session) = self.state.sessions.get_mut(session_key) else { return Ok(false) };
        let column = match marker {
            MarkerColumn::History => &mut session.history_marker,
            MarkerColumn::Preferences => &mut session.preferences_marker,
        };
        if *column != from {
            return Ok(false);
        }
        *column = to;
        Ok(true)
    }
}

impl LedgerRows for MemoryTx<'_> {
    fn ledger_items(&mut self, source: &str) -> Result<Vec<(String, String)>> {
        Ok(self
            .state
            .ledger
            .keys()
            .filter(|(item_source, _, _)| item_source == source)
            .map(|(_, path, item_hash)| (path.clone(), item_hash.clone()))
            .collect())
    }

    fn ledger_lessons_written(&mut self) -> Result<i64> {
        Ok(self
            .state
            .ledger
            .iter()
            .filter(|((source, _, _), recorded)| {
                source != EXPORT_LEDGER_SOURCE && recorded.landed_as == "lesson" && recorded.outcome == "written"
            })
            .count() as i64)
    }

    fn record_ledger(&mut self, entry: &LedgerEntry<'_>) -> Result<()> {
        self.state
            .ledger
            .entry((entry.source.to_owned(), entry.path.to_owned(), entry.item_hash.to_owned()))
            .or_insert_with(|| Recorded {
                landed_as: entry.landed_as.to_owned(),
                outcome: entry.outcome.to_owned(),
                target: entry.target.map(str::to_owned),
                recorded_at: entry.recorded_at,
            });
        Ok(())
    }

    fn setting(&mut self, name: &str) -> Result<Option<String>> {
        Ok(self.state.settings.get(name).cloned())
    }

    fn set_setting(&mut self, name: &str, value: &str) -> Result<()> {
        self.state.settings.insert(name.to_owned(), value.to_owned());
        Ok(())
    }
}

impl EvidenceRows for MemoryTx<'_> {
    fn evidence(&mut self, layer: EvidenceLayer, target: &str) -> Result<Option<EvidenceRow>> {
        Ok(self.state.evidence.get(&(layer.name(), target.to_owned())).cloned())
    }

    fn layer_evidence(&mut self, layer: EvidenceLayer) -> Result<Vec<(String, EvidenceRow)>> {
        Ok(self
            .state
            .evidence
            .iter()
            .filter(|((name, _), _)| *name == layer.name())
            .map(|((_, target), row)| (target.clone(), row.clone()))
            .collect())
    }

    fn set_evidence(&mut self, layer: EvidenceLayer, target: &str, evidence: Option<&EvidenceRow>) -> Result<()> {
        let key = (layer.name(), target.to_owned());
        match evidence {
            Some(evidence) => self.state.evidence.insert(key, evidence.clone()),
            None => self.state.evidence.remove(&key),
        };
        Ok(())
    }
}

impl RunRows for MemoryTx<'_> {
    fn insert_run(&mut self, state: &str, at: i64, body: &str) -> Result<i64> {
        let id = self.state.runs.keys().next_back().map_or(1, |last| last + 1);
        let row = RunRow { id, state: state.to_owned(), created_at: at, updated_at: at, body: body.to_owned() };
        self.state.runs.insert(id, row);
        Ok(id)
    }

    fn run_row(&mut self, id: i64) -> Result<Option<RunRow>> {
        Ok(self.state.runs.get(&id).cloned())
    }

    fn run_rows(&mut self) -> Result<Vec<RunRow>> {
        Ok(self.state.runs.values().rev().cloned().collect())
    }

    fn update_run(&mut self, id: i64, state: &str, at: i64, body: &str) -> Result<()> {
        if let Some(row) = self.state.runs.get_mut(&id) {
            row.state = state.to_owned();
            row.updated_at = at;
            row.body = body.to_owned();
        }
        Ok(())
    }

    fn delete_run(&mut self, id: i64) -> Result<()> {
        self.state.runs.remove(&id);
        Ok(())
    }
}
