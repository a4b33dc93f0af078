//! The per-channel history buffer injected into each message's context.
//!
//! Outside observe mode a channel keeps its last 50 messages for 300
//! seconds of the monotonic clock, in memory only. In observe mode it keeps
//! 200 messages for a week of wall-clock time and persists them as JSONL
//! under `<home>/history/<channel>.jsonl` (written atomically, compacted on
//! load). Recording takes an [`Authorization`] with no default: a caller
//! has to state whether the sender is authorised, and an unauthorised
//! sender's text is never stored, in memory or on disk.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::constants::{
    CHANNEL_FOOTER, CHANNEL_FRAMING, CHANNEL_HEADER, CHANNEL_HISTORY_DIR, CHANNEL_LINE_CHARS, CHANNEL_MAX_ENTRIES,
    CHANNEL_TTL_SECS, MAX_CHANNEL_ID_CHARS, MAX_SENDER_CHARS, OBSERVE_MAX_ENTRIES, OBSERVE_TTL_SECS,
};
use crate::error::{ContextError, Result};
use crate::neutralize::{neutralize_label, neutralize_one_line};
use crate::text::truncate;

/// Time sources of the buffer: monotonic for the in-memory mode, wall
/// clock for the persisted one.
pub trait ChannelClock: Send + Sync {
    /// Time since an arbitrary fixed origin; never goes backwards.
    fn monotonic(&self) -> Duration;
    /// Milliseconds since the Unix epoch.
    fn wall_millis(&self) -> i64;
}

/// The system clocks.
#[derive(Debug)]
pub struct SystemChannelClock {
    origin: Instant,
}

impl Default for SystemChannelClock {
    fn default() -> Self {
        Self { origin: Instant::now() }
    }
}

impl ChannelClock for SystemChannelClock {
    fn monotonic(&self) -> Duration {
        self.origin.elapsed()
    }

    fn wall_millis(&self) -> i64 {
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_millis() as i64)
    }
}

/// A clock tests move by hand; both readings advance together unless set apart.
#[derive(Debug, Default)]
pub struct ManualChannelClock {
    monotonic_millis: AtomicI64,
    wall_millis: AtomicI64,
}

impl ManualChannelClock {
    /// A clock at wall time `wall_millis` and monotonic zero.
    pub fn new(wall_millis: i64) -> Self {
        Self { monotonic_millis: AtomicI64::new(0), wall_millis: AtomicI64::new(wall_millis) }
    }

    /// Moves both readings forward.
    pub fn advance(&self, by: Duration) {
        let millis = by.as_millis() as i64;
        self.monotonic_millis.fetch_add(millis, Ordering::SeqCst);
        self.wall_millis.fetch_add(millis, Ordering::SeqCst);
    }

    /// Sets the wall clock alone (a process restart, or a clock change).
    pub fn set_wall_millis(&self, wall_millis: i64) {
        self.wall_millis.store(wall_millis, Ordering::SeqCst);
    }
}

impl ChannelClock for ManualChannelClock {
    fn monotonic(&self) -> Duration {
        Duration::from_millis(self.monotonic_millis.load(Ordering::SeqCst).max(0) as u64)
    }

    fn wall_millis(&self) -> i64 {
        self.wall_millis.load(Ordering::SeqCst)
    }
}

/// Whether the sender of a message may put text in front of the model.
/// Deliberately without a default: every recording states it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Authorization {
    /// The sender is on the allow list.
    Authorized,
    /// The sender is not; the message is never recorded.
    Unauthorized,
}

impl Authorization {
    /// `Authorized` when `allowed` is true.
    pub fn from_allowed(allowed: bool) -> Self {
        if allowed { Authorization::Authorized } else { Authorization::Unauthorized }
    }
}

/// The observe-mode recording rule: a message is recorded early, before
/// the activation gates, only when the channel observes and the sender is
/// authorised.
pub fn should_record_observe_history(observing: bool, authorization: Authorization) -> bool {
    observing && authorization == Authorization::Authorized
}

/// What [`ChannelHistory::record`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordOutcome {
    /// The message is in the buffer (and on disk in observe mode).
    Recorded,
    /// The message is in the buffer with its text withheld: it tripped the
    /// injection screen.
    Withheld,
    /// The sender is not authorised; nothing was stored.
    RefusedUnauthorized,
}

/// Limits of the two modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChannelConfig {
    /// Entries kept outside observe mode.
    pub max_entries: usize,
    /// Entry lifetime outside observe mode (monotonic clock).
    pub ttl: Duration,
    /// Entries kept in observe mode.
    pub observe_max_entries: usize,
    /// Entry lifetime in observe mode (wall clock).
    pub observe_ttl: Duration,
}

impl Default for ChannelConfig {
    fn default() -> Self {
        Self {
            max_entries: CHANNEL_MAX_ENTRIES,
            ttl: Duration::from_secs(CHANNEL_TTL_SECS),
            observe_max_entries: OBSERVE_MAX_ENTRIES,
            observe_ttl: Duration::from_secs(OBSERVE_TTL_SECS),
        }
    }
}

/// One recorded message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelEntry {
    /// Sender display name, cleaned.
    pub sender: String,
    /// The text with credentials and exfiltration URLs redacted; empty when withheld.
    pub text: String,
    /// When it was recorded, Unix milliseconds.
    pub at_millis: i64,
    /// The text tripped the injection screen and is not shown.
    #[serde(default)]
    pub withheld: bool,
    /// Monotonic reading at recording (not persisted).
    #[serde(skip)]
    monotonic: Duration,
    /// The prompt line, neutralised once when the entry is made or loaded.
    #[serde(skip)]
    line: String,
}

impl ChannelEntry {
    fn with_line(mut self) -> Self {
        let text = if self.withheld {
            "(message withheld by the injection screen)".to_owned()
        } else {
            neutralize_one_line(&self.text)
        };
        let line = format!("- {}: {}", neutralize_label(&self.sender), text);
        self.line = truncate(&line, CHANNEL_LINE_CHARS, "…").0;
        self
    }

    /// The entry as one prompt line: neutralised, at most 300 characters.
    pub fn line(&self) -> &str {
        &self.line
    }
}

#[derive(Debug)]
struct Buffer {
    observe: bool,
    entries: VecDeque<ChannelEntry>,
}

/// Channel buffers of one process, shared by threads.
pub struct ChannelHistory {
    root: PathBuf,
    config: ChannelConfig,
    clock: Arc<dyn ChannelClock>,
    channels: Mutex<HashMap<String, Buffer>>,
}

impl std::fmt::Debug for ChannelHistory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelHistory").field("root", &self.root).field("config", &self.config).finish()
    }
}

/// Checks that a channel id can name a buffer file.
pub fn validate_channel_id(id: &str) -> Result<()> {
    let reject =
        |reason| Err(ContextError::InvalidChannelId { id: id.chars().take(MAX_CHANNEL_ID_CHARS).collect(), reason });
    if id.is_empty() {
        return reject("it is empty");
    }
    if id.chars().count() > MAX_CHANNEL_ID_CHARS {
        return reject("it is longer than 128 characters");
    }
    if id.starts_with('.') {
        return reject("it starts with a dot");
    }
    if !id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '@')) {
        return reject("only ASCII letters, digits and - _ . : @ are allowed");
    }
    Ok(())
}

fn clean_sender(sender: &str) -> String {
    let cleaned: String = sender
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '.' | '_' | '-' | '@'))
        .take(MAX_SENDER_CHARS)
        .collect();
    let cleaned = cleaned.split_whitespace().collect::<Vec<_>>().join(" ");
    if cleaned.is_empty() { "unknown".to_owned() } else { cleaned }
}

impl ChannelHistory {
    /// Buffers whose observe-mode files live under `<home>/history/`.
    pub fn new(home: &Path, config: ChannelConfig, clock: Arc<dyn ChannelClock>) -> Self {
        Self { root: home.join(CHANNEL_HISTORY_DIR), config, clock, channels: Mutex::new(HashMap::new()) }
    }

    /// With the default limits and the system clocks.
    pub fn in_home(home: &Path) -> Self {
        Self::new(home, ChannelConfig::default(), Arc::new(SystemChannelClock::default()))
    }

    /// The directory observe-mode files are written to.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The observe-mode file of a channel, validated: a plain file name
    /// directly under the history directory, on no sensitive path.
    pub fn observe_path(&self, channel_id: &str) -> Result<PathBuf> {
        validate_channel_id(channel_id)?;
        let path = self.root.join(format!("{channel_id}.jsonl"));
        if path.parent() != Some(self.root.as_path()) {
            return Err(ContextError::UnsafeChannelPath { path, reason: "it escapes the history directory" });
        }
        if cairn_guard::is_sensitive_path(&path) {
            return Err(ContextError::UnsafeChannelPath { path, reason: "it is a sensitive path" });
        }
        if path.is_symlink() {
            return Err(ContextError::UnsafeChannelPath { path, reason: "it is a symbolic link" });
        }
        Ok(path)
    }

    /// Records a message. An unauthorised sender's message is refused and
    /// nothing is stored; an authorised one is redacted, screened (a hit
    /// keeps the entry with its text withheld) and appended, evicting the
    /// oldest entry past the mode's limit. In observe mode the file is
    /// rewritten atomically before this returns.
    pub fn record(
        &self,
        channel_id: &str,
        sender: &str,
        text: &str,
        authorization: Authorization,
    ) -> Result<RecordOutcome> {
        validate_channel_id(channel_id)?;
        if authorization == Authorization::Unauthorized {
            tracing::debug!(channel = channel_id, "unauthorised sender: message not recorded");
            return Ok(RecordOutcome::RefusedUnauthorized);
        }
        // What the sender marked `<private>` is neither kept nor screened.
        let unmarked = cairn_guard::strip_private(text);
        let text = unmarked.as_ref();
        let finding = cairn_guard::screen(text);
        let withheld = finding.is_some();
        if let Some(finding) = &finding {
            tracing::warn!(
                channel = channel_id,
                rule = finding.rule,
                "channel message withheld by the injection screen"
            );
        }
        let entry = ChannelEntry {
            sender: clean_sender(sender),
            text: if withheld { String::new() } else { cairn_guard::redact_all(text).into_owned() },
            at_millis: self.clock.wall_millis(),
            withheld,
            monotonic: self.clock.monotonic(),
            line: String::new(),
        }
        .with_line();
        let mut channels = self.channels.lock();
        let buffer = channels
            .entry(channel_id.to_owned())
            .or_insert_with(|| Buffer { observe: false, entries: VecDeque::new() });
        buffer.entries.push_back(entry);
        self.expire(buffer);
        if buffer.observe {
            self.persist(channel_id, buffer)?;
        }
        Ok(if withheld { RecordOutcome::Withheld } else { RecordOutcome::Recorded })
    }

    /// Whether the channel is in observe mode.
    pub fn is_observing(&self, channel_id: &str) -> bool {
        self.channels.lock().get(channel_id).is_some_and(|buffer| buffer.observe)
    }

    /// Switches a channel to observe mode: loads its file (dropping
    /// entries past the week and beyond 200, corrupt lines too, and
    /// rewriting the file when anything was dropped), merges what the
    /// in-memory buffer holds, and re-bounds the buffer.
    pub fn set_observe(&self, channel_id: &str) -> Result<()> {
        let path = self.observe_path(channel_id)?;
        let mut channels = self.channels.lock();
        let buffer = channels
            .entry(channel_id.to_owned())
            .or_insert_with(|| Buffer { observe: false, entries: VecDeque::new() });
        if buffer.observe {
            return Ok(());
        }
        let (stored, dropped) = self.load(&path)?;
        let mut merged: Vec<ChannelEntry> = stored.into_iter().chain(buffer.entries.drain(..)).collect();
        merged.sort_by_key(|entry| entry.at_millis);
        buffer.entries = merged.into();
        buffer.observe = true;
        let before = buffer.entries.len();
        self.expire(buffer);
        if dropped > 0 || before != buffer.entries.len() || !buffer.entries.is_empty() {
            self.persist(channel_id, buffer)?;
        }
        tracing::debug!(channel = channel_id, entries = buffer.entries.len(), dropped, "channel set to observe");
        Ok(())
    }

    /// Leaves observe mode: re-bounds the buffer to the default limits and
    /// deletes the channel's file.
    pub fn unset_observe(&self, channel_id: &str) -> Result<()> {
        let path = self.observe_path(channel_id)?;
        let mut channels = self.channels.lock();
        if let Some(buffer) = channels.get_mut(channel_id) {
            buffer.observe = false;
            self.expire(buffer);
        }
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(ContextError::Io { operation: "deleting channel history", path, source }),
        }
    }

    /// The live entries of a channel, oldest first (expired ones are dropped).
    pub fn entries(&self, channel_id: &str) -> Vec<ChannelEntry> {
        let mut channels = self.channels.lock();
        let Some(buffer) = channels.get_mut(channel_id) else { return Vec::new() };
        self.expire(buffer);
        buffer.entries.iter().cloned().collect()
    }

    /// The `[CHANNEL HISTORY]` block: one neutralised line per entry, each
    /// at most 300 characters; empty when the buffer is.
    pub fn render(&self, channel_id: &str) -> String {
        render_entries(&self.entries(channel_id))
    }

    fn expire(&self, buffer: &mut Buffer) {
        let (max, ttl) = if buffer.observe {
            (self.config.observe_max_entries, self.config.observe_ttl)
        } else {
            (self.config.max_entries, self.config.ttl)
        };
        while buffer.entries.len() > max {
            buffer.entries.pop_front();
        }
        if buffer.observe {
            let cutoff = self.clock.wall_millis() - ttl.as_millis() as i64;
            buffer.entries.retain(|entry| entry.at_millis >= cutoff);
        } else {
            let now = self.clock.monotonic();
            buffer.entries.retain(|entry| now.saturating_sub(entry.monotonic) <= ttl);
        }
    }

    /// Reads a channel file: entries within the observe limits, plus how
    /// many lines were dropped (expired, corrupt or beyond the limit).
    fn load(&self, path: &Path) -> Result<(Vec<ChannelEntry>, usize)> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
            Err(source) => {
                return Err(ContextError::Io { operation: "reading channel history", path: path.into(), source });
            }
        };
        let now_wall = self.clock.wall_millis();
        let now_monotonic = self.clock.monotonic();
        let cutoff = now_wall - self.config.observe_ttl.as_millis() as i64;
        let mut dropped = 0;
        let mut entries = Vec::new();
        for line in text.lines().filter(|line| !line.trim().is_empty()) {
            match serde_json::from_str::<ChannelEntry>(line) {
                Ok(mut entry) if entry.at_millis >= cutoff => {
                    // Age on the monotonic clock from the wall-clock age, for
                    // a later switch back to the default mode.
                    let age = Duration::from_millis(now_wall.saturating_sub(entry.at_millis).max(0) as u64);
                    entry.monotonic = now_monotonic.saturating_sub(age);
                    entries.push(entry.with_line());
                }
                Ok(_) => dropped += 1,
                Err(error) => {
                    tracing::warn!(path = %path.display(), %error, "dropping a corrupt channel history line");
                    dropped += 1;
                }
            }
        }
        if entries.len() > self.config.observe_max_entries {
            dropped += entries.len() - self.config.observe_max_entries;
            entries.drain(..entries.len() - self.config.observe_max_entries);
        }
        Ok((entries, dropped))
    }

    /// Rewrites the channel file: temp file in the same directory, synced,
    /// renamed over the old one.
    fn persist(&self, channel_id: &str, buffer: &Buffer) -> Result<()> {
        let path = self.observe_path(channel_id)?;
        std::fs::create_dir_all(&self.root).map_err(|source| ContextError::Io {
            operation: "creating the channel history directory",
            path: path.clone(),
            source,
        })?;
        let mut bytes = Vec::with_capacity(buffer.entries.len() * 128);
        for entry in &buffer.entries {
            serde_json::to_writer(&mut bytes, entry).expect("a channel entry serialises");
            bytes.push(b'\n');
        }
        cairn_files::write_atomic(&path, &bytes).map_err(|error| {
            let (operation, path, source) = error.into_parts();
            ContextError::Io { operation, path, source }
        })?;
        Ok(())
    }
}

/// Renders entries as the `[CHANNEL HISTORY]` block.
pub fn render_entries(entries: &[ChannelEntry]) -> String {
    if entries.is_empty() {
        return String::new();
    }
    let mut block = format!("{CHANNEL_HEADER}\n{CHANNEL_FRAMING}\n");
    for entry in entries {
        block.push_str(entry.line());
        block.push('\n');
    }
    block.push_str(CHANNEL_FOOTER);
    block
}
