//! Session transcripts persisted in `memory.db`, and the per-session
//! consolidation markers that point into them: the rows, and [`MemoryDb`]'s
//! methods that append, read, claim and mark them.
//!
//! Every message of a session gets a sequence number (`seq`, from 0, never
//! reused while the session's row lives) in the same `BEGIN IMMEDIATE`
//! transaction that stores it, so two processes appending to one session
//! interleave their messages without losing or renumbering any. Each
//! consolidation path keeps a marker: the `seq` of the first message it has
//! not consolidated yet. A marker only moves in the transaction that records
//! a finished run, and only from the value the run started at, so a restart
//! neither skips a message nor consolidates one twice.
//!
//! Bounds: a message's text is cut to [`MAX_TRANSCRIPT_MESSAGE_CHARS`];
//! rows both paths have consolidated are pruned, except the newest
//! [`TRANSCRIPT_KEEP_CONSOLIDATED`] (thread history for a resumed session);
//! a session never keeps more than [`MAX_TRANSCRIPT_MESSAGES`] rows: past
//! that the oldest go even when unconsolidated (a consolidation prompt keeps
//! only the newest `MAX_PROMPT_TRANSCRIPT_CHARS` of a transcript anyway) and
//! a warning is logged.
//!
//! Stored text is redacted first: credentials in message text and in tool
//! inputs become `[REDACTED:<rule>]` markers.
//!
//! [`MAX_TRANSCRIPT_MESSAGE_CHARS`]: crate::constants::MAX_TRANSCRIPT_MESSAGE_CHARS
//! [`TRANSCRIPT_KEEP_CONSOLIDATED`]: crate::constants::TRANSCRIPT_KEEP_CONSOLIDATED
//! [`MAX_TRANSCRIPT_MESSAGES`]: crate::constants::MAX_TRANSCRIPT_MESSAGES

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::clock::now_ms;
use crate::constants::{MAX_TRANSCRIPT_MESSAGE_CHARS, MAX_TRANSCRIPT_MESSAGES, TRANSCRIPT_KEEP_CONSOLIDATED};
use crate::db::MemoryDb;
use crate::error::{MemoryError, Result};
use crate::scope::Scope;
use crate::store::{MarkerColumn, StoreTx, TranscriptRow};

/// A tool the assistant called in a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The tool's name.
    pub name: String,
    /// Its input, as JSON.
    #[serde(default)]
    pub input: Value,
}

impl ToolCall {
    /// A call of `name` with `input`.
    pub fn new(name: impl Into<String>, input: Value) -> Self {
        ToolCall { name: name.into(), input }
    }
}

/// One message of a session transcript. Serialises as
/// `{"role", "content"}` plus `"tool_calls"` when there are any, and reads
/// the older two-field shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TranscriptMessage {
    /// `user`, `assistant`, ...
    pub role: String,
    /// The text.
    pub content: String,
    /// Tools the message called, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
}

impl TranscriptMessage {
    /// A message without tool calls.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        TranscriptMessage { role: role.into(), content: content.into(), tool_calls: Vec::new() }
    }

    /// The message with `tool_calls`.
    pub fn with_tool_calls(mut self, tool_calls: Vec<ToolCall>) -> Self {
        self.tool_calls = tool_calls;
        self
    }
}

/// A message as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StoredMessage {
    /// Its position in the session (from 0).
    pub seq: u64,
    /// When it was appended (Unix milliseconds).
    pub at_ms: i64,
    /// The message, redacted.
    pub message: TranscriptMessage,
}

/// What [`MemoryDb::append_transcript`](crate::MemoryDb::append_transcript) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TranscriptAppend {
    /// `seq` of the first appended message.
    pub first_seq: u64,
    /// `seq` the next message will get.
    pub next_seq: u64,
    /// Rows removed by the per-session bound in this transaction.
    pub pruned: usize,
}

/// A session's transcript bookkeeping.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TranscriptState {
    /// The session.
    pub session_key: String,
    /// `seq` the next message will get (messages ever appended).
    pub next_seq: u64,
    /// First message the history path has not consolidated.
    pub history_marker: u64,
    /// First message the preferences path has not consolidated.
    pub preferences_marker: u64,
    /// Time of the last append (Unix milliseconds, the caller's clock).
    pub last_activity_ms: i64,
    /// Rows stored now.
    pub stored: usize,
    /// Where the session ran (its episodes and project facts go there).
    pub scope: crate::scope::Scope,
}

/// Which consolidation marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Marker {
    History,
    Preferences,
}

impl Marker {
    pub(crate) fn column(self) -> MarkerColumn {
        match self {
            Marker::History => MarkerColumn::History,
            Marker::Preferences => MarkerColumn::Preferences,
        }
    }
}

/// A consolidation run's hold on a session: the messages it covers.
#[derive(Debug, Clone)]
pub(crate) struct Claim {
    /// The marker's value when the run started.
    pub(crate) start: u64,
    /// One past the last message the run covers.
    pub(crate) end: u64,
    /// The messages `start..end` still stored, with their `seq`.
    pub(crate) messages: Vec<StoredMessage>,
}

/// The message as stored: `<private>` spans withheld, text cut and
/// redacted, tool inputs redacted.
pub(crate) fn redacted(message: &TranscriptMessage) -> TranscriptMessage {
    let content = crate::validate::cut(&cairn_guard::strip_private(&message.content), MAX_TRANSCRIPT_MESSAGE_CHARS);
    let content = cairn_guard::redact_credentials(&content).into_owned();
    let tool_calls = message
        .tool_calls
        .iter()
        .map(|call| ToolCall {
            name: cairn_guard::redact_credentials(&cairn_guard::strip_private(&call.name)).into_owned(),
            input: redact_value(&call.input),
        })
        .collect();
    TranscriptMessage { role: message.role.clone(), content, tool_calls }
}

/// Withholds the `<private>` spans of every string of `value` and redacts
/// it, then redacts the whole document once more (a
/// `"password": "..."` pair is only a credential when key and value are
/// seen together); when that second pass changes the text into something
/// that is no longer JSON, the input is replaced by a marker.
fn redact_value(value: &Value) -> Value {
    fn strings(value: &Value) -> Value {
        match value {
            Value::String(text) => {
                Value::String(cairn_guard::redact_credentials(&cairn_guard::strip_private(text)).into_owned())
            }
            Value::Array(items) => Value::Array(items.iter().map(strings).collect()),
            Value::Object(map) => Value::Object(
                map.iter().map(|(key, item)| (cairn_guard::strip_private(key).into_owned(), strings(item))).collect(),
            ),
            other => other.clone(),
        }
    }
    let leaves = strings(value);
    let text = leaves.to_string();
    match cairn_guard::redact_credentials(&text) {
        std::borrow::Cow::Borrowed(_) => leaves,
        std::borrow::Cow::Owned(whole) => {
            serde_json::from_str(&whole).unwrap_or_else(|_| Value::String("[REDACTED:tool-input]".to_owned()))
        }
    }
}

pub(crate) fn load_state(tx: &mut dyn StoreTx, session_key: &str) -> Result<Option<TranscriptState>> {
    Ok(tx.session(session_key)?.map(|row| TranscriptState {
        session_key: session_key.to_owned(),
        next_seq: row.next_seq as u64,
        history_marker: row.history_marker as u64,
        preferences_marker: row.preferences_marker as u64,
        last_activity_ms: row.last_activity,
        stored: row.stored as usize,
        scope: crate::scope::Scope::parse(&row.scope).unwrap_or_default(),
    }))
}

pub(crate) fn read_messages(tx: &mut dyn StoreTx, session_key: &str, from: u64, to: u64) -> Result<Vec<StoredMessage>> {
    let to = to.min(i64::MAX as u64) as i64;
    let mut messages = Vec::new();
    for row in tx.transcript_rows(session_key, from as i64, to)? {
        let tool_calls = match row.tool_calls_json {
            Some(text) => serde_json::from_str(&text).map_err(|error| MemoryError::CorruptRow {
                table: "session_transcripts",
                reason: format!("tool calls of {session_key:?} #{}: {error}", row.seq),
            })?,
            None => Vec::new(),
        };
        messages.push(StoredMessage {
            seq: row.seq as u64,
            at_ms: row.created_at,
            message: TranscriptMessage { role: row.role, content: row.content, tool_calls },
        });
    }
    Ok(messages)
}

pub(crate) fn insert_messages(
    tx: &mut dyn StoreTx,
    session_key: &str,
    next_seq: u64,
    messages: &[TranscriptMessage],
    at_ms: i64,
) -> Result<u64> {
    let mut seq = next_seq;
    for message in messages {
        let tool_calls_json = (!message.tool_calls.is_empty())
            .then(|| serde_json::to_string(&message.tool_calls).expect("tool calls serialise"));
        tx.insert_transcript(
            session_key,
            &TranscriptRow {
                seq: seq as i64,
                created_at: at_ms,
                role: message.role.clone(),
                content: message.content.clone(),
                tool_calls_json,
            },
        )?;
        seq += 1;
    }
    tx.advance_session(session_key, seq as i64, at_ms)?;
    Ok(seq)
}

pub(crate) fn prune(tx: &mut dyn StoreTx, session_key: &str) -> Result<usize> {
    let state = load_state(tx, session_key)?.expect("the session row exists");
    let consolidated = state.history_marker.min(state.preferences_marker);
    let keep_from = state.next_seq.saturating_sub(TRANSCRIPT_KEEP_CONSOLIDATED as u64);
    let cap_from = state.next_seq.saturating_sub(MAX_TRANSCRIPT_MESSAGES as u64);
    let below = consolidated.min(keep_from).max(cap_from);
    if below > consolidated {
        tracing::warn!(
            session = %crate::validate::cut(session_key, 100),
            dropped_unconsolidated = below - consolidated,
            "session transcript over its cap; the oldest unconsolidated messages were dropped"
        );
    }
    tx.delete_transcript_below(session_key, below as i64)
}

pub(crate) fn ensure_session(
    tx: &mut dyn StoreTx,
    session_key: &str,
    at_ms: i64,
    scope: &crate::scope::Scope,
) -> Result<TranscriptState> {
    tx.ensure_session(session_key, at_ms, scope.as_str())?;
    Ok(load_state(tx, session_key)?.expect("the session row was just ensured"))
}

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
        crate::validate::session_key(session_key)?;
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
