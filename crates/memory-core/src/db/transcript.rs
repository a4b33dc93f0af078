//! Session transcripts on [`MemoryDb`]: appending, reading, claiming and
//! marking them, with the rows of [`crate::transcript`].

use crate::clock::now_ms;
use crate::db::MemoryDb;
use crate::error::{MemoryError, Result};
use crate::scope::Scope;
use crate::transcript::{
    Claim, Marker, StoredMessage, TranscriptAppend, TranscriptMessage, TranscriptState, ensure_session,
    insert_messages, load_state, prune, read_messages, redacted, validate_session_key,
};

impl MemoryDb {
    /// Appends `messages` to the persisted transcript of `session_key`, now.
    /// See [`append_transcript_at`](Self::append_transcript_at).
    pub fn append_transcript(&self, session_key: &str, messages: &[TranscriptMessage]) -> Result<TranscriptAppend> {
        self.append_transcript_at(session_key, messages, now_ms())
    }

    /// Appends `messages` to the persisted transcript of `session_key` in
    /// one transaction, at `at_ms` (Unix milliseconds: the session's last
    /// activity, which the idle trigger of consolidation reads). Credentials
    /// are redacted before storing; the per-session bound is applied in the
    /// same transaction. Safe from any number of threads and processes.
    pub fn append_transcript_at(
        &self,
        session_key: &str,
        messages: &[TranscriptMessage],
        at_ms: i64,
    ) -> Result<TranscriptAppend> {
        self.append_transcript_in(&Scope::Global, session_key, messages, at_ms)
    }

    /// [`append_transcript_at`](Self::append_transcript_at) for a session
    /// that runs in `scope` (a session keeps the scope of its first append).
    pub fn append_transcript_in(
        &self,
        scope: &Scope,
        session_key: &str,
        messages: &[TranscriptMessage],
        at_ms: i64,
    ) -> Result<TranscriptAppend> {
        let _span = tracing::debug_span!("append_transcript", messages = messages.len()).entered();
        validate_session_key(session_key)?;
        let stored: Vec<TranscriptMessage> = messages.iter().map(redacted).collect();
        self.rows().write("appending to a session transcript", |tx| {
            let state = ensure_session(tx, session_key, at_ms, scope)?;
            let next_seq = insert_messages(tx, session_key, state.next_seq, &stored, at_ms)?;
            let pruned = prune(tx, session_key)?;
            Ok(TranscriptAppend { first_seq: state.next_seq, next_seq, pruned })
        })
    }

    /// The stored transcript of `session_key`, oldest first (empty for an
    /// unknown session). Rows pruned by the bounds are not in it; `seq`
    /// says where each message stands.
    pub fn transcript(&self, session_key: &str) -> Result<Vec<StoredMessage>> {
        self.rows().read("reading a session transcript", |tx| read_messages(tx, session_key, 0, u64::MAX))
    }

    /// The newest `limit` stored messages of `session_key`, oldest first.
    pub fn transcript_tail(&self, session_key: &str, limit: usize) -> Result<Vec<StoredMessage>> {
        self.rows().read("reading a session transcript", |tx| {
            let Some(state) = load_state(tx, session_key)? else { return Ok(Vec::new()) };
            read_messages(tx, session_key, state.next_seq.saturating_sub(limit as u64), u64::MAX)
        })
    }

    /// The bookkeeping of `session_key`: counter, markers, last activity.
    pub fn transcript_state(&self, session_key: &str) -> Result<Option<TranscriptState>> {
        self.rows().read("reading a session's transcript state", |tx| load_state(tx, session_key))
    }

    /// Sessions with messages past their history marker whose last
    /// activity is before `idle_before_ms`.
    pub(crate) fn idle_sessions(&self, idle_before_ms: i64) -> Result<Vec<String>> {
        self.rows().read("listing idle sessions", |tx| tx.idle_sessions(idle_before_ms))
    }

    /// Takes the session for one consolidation run by `owner` (a lease until
    /// `lease_until_ms`, wall clock) and returns the messages past `marker`;
    /// `None` when another owner's lease is live or nothing is pending.
    pub(crate) fn claim_transcript(
        &self,
        session_key: &str,
        marker: Marker,
        owner: i64,
        lease_ms: i64,
    ) -> Result<Option<Claim>> {
        let now = now_ms();
        self.rows().write("claiming a session for consolidation", |tx| {
            let Some(row) = tx.session(session_key)? else { return Ok(None) };
            let Some(state) = load_state(tx, session_key)? else { return Ok(None) };
            let (owner_now, until) = (row.claim_owner, row.claim_until);
            if owner_now.is_some_and(|other| other != owner) && until.is_some_and(|until| until > now) {
                tracing::debug!("session is being consolidated elsewhere");
                return Ok(None);
            }
            let start = match marker {
                Marker::History => state.history_marker,
                Marker::Preferences => state.preferences_marker,
            };
            tx.set_claim(session_key, Some((owner, now + lease_ms)))?;
            let end = state.next_seq;
            let messages = read_messages(tx, session_key, start, end)?;
            Ok(Some(Claim { start, end, messages }))
        })
    }

    /// Records a finished run in one transaction: optionally appends
    /// `extra` messages (consolidated with the run), moves each marker from
    /// its start to its end, releases the claim and prunes. Fails, moving
    /// nothing, when a marker is no longer where the run started.
    pub(crate) fn finish_claim(
        &self,
        session_key: &str,
        owner: i64,
        moves: &[(Marker, u64, u64)],
        extra: &[TranscriptMessage],
        at_ms: i64,
    ) -> Result<()> {
        let extra: Vec<TranscriptMessage> = extra.iter().map(redacted).collect();
        self.rows().write("recording a consolidation run", |tx| {
            let state = ensure_session(tx, session_key, at_ms, &Scope::Global)?;
            let mut moves = moves.to_vec();
            if !extra.is_empty() {
                // The extra messages are stored as consolidated only when no
                // other message arrived after the ones the run covered;
                // otherwise their markers would cover messages nobody consolidated.
                if moves.iter().all(|(_, _, end)| *end == state.next_seq) {
                    let next = insert_messages(tx, session_key, state.next_seq, &extra, at_ms)?;
                    for (_, _, end) in &mut moves {
                        *end = next;
                    }
                } else {
                    tracing::debug!("messages arrived during the run; the given transcript is not stored");
                }
            }
            for (marker, start, end) in &moves {
                if !tx.move_marker(session_key, marker.column(), *start as i64, *end as i64)? {
                    return Err(MemoryError::SessionBusy { session_key: crate::validate::cut(session_key, 100) });
                }
            }
            tx.release_claim(session_key, owner)?;
            prune(tx, session_key)?;
            Ok(())
        })
    }

    /// Gives up `owner`'s claim without moving any marker (a failed run).
    pub(crate) fn release_claim(&self, session_key: &str, owner: i64) -> Result<()> {
        self.rows().write("releasing a consolidation claim", |tx| tx.release_claim(session_key, owner))
    }
}
