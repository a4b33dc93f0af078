//! The usage ledger: per-skill tallies of trigger matches and of bodies
//! that reached a prompt, kept in memory and persisted to
//! `skill-usage.json` atomically and at most once per debounce interval.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::clock::SkillClock;
use crate::constants::{USAGE_FLUSH_DEBOUNCE_MS, USAGE_TTL_SECS};
use crate::error::{Result, SkillsError};
use crate::fsutil::atomic_write;

/// What the ledger knows about one skill.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageEntry {
    /// Trigger matches and `$name` requests (what ranking counts).
    #[serde(default)]
    pub hits: u64,
    /// Bodies that reached a prompt (what cost is computed from).
    #[serde(default)]
    pub deliveries: u64,
    /// Last hit or delivery, seconds since the Unix epoch.
    #[serde(default)]
    pub last_used: u64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct LedgerFile {
    #[serde(default)]
    version: u32,
    #[serde(default)]
    skills: BTreeMap<String, UsageEntry>,
}

#[derive(Debug, Default)]
struct State {
    entries: HashMap<String, UsageEntry>,
    dirty: bool,
    last_flush_millis: u64,
}

/// In-memory usage tallies with debounced atomic persistence.
///
/// Safe to share between threads; every method takes `&self`.
#[derive(Debug)]
pub struct UsageLedger {
    path: Option<PathBuf>,
    state: Mutex<State>,
    /// Serialises writers so an older snapshot never replaces a newer one.
    flush_lock: Mutex<()>,
    clock: Arc<dyn SkillClock>,
}

impl UsageLedger {
    /// A ledger that never touches disk.
    pub fn in_memory(clock: Arc<dyn SkillClock>) -> Self {
        Self { path: None, state: Mutex::new(State::default()), flush_lock: Mutex::new(()), clock }
    }

    /// Loads `path` (missing is fine). Entries older than the 30-day TTL are
    /// dropped. A file that cannot be read as a ledger is moved aside to
    /// `<path>.bad` and the ledger starts empty: usage data is best-effort
    /// and must not stop skills from loading. The returned string, when
    /// present, says what happened.
    pub fn open(path: impl Into<PathBuf>, clock: Arc<dyn SkillClock>) -> (Self, Option<String>) {
        let path = path.into();
        let mut warning = None;
        let mut entries = HashMap::new();
        match std::fs::read(&path) {
            Ok(bytes) => match serde_json::from_slice::<LedgerFile>(&bytes) {
                Ok(file) => entries.extend(file.skills),
                Err(error) => {
                    let aside = path.with_extension("json.bad");
                    let moved = std::fs::rename(&path, &aside).is_ok();
                    warning = Some(format!(
                        "usage ledger {} is unreadable ({error}); {}starting empty",
                        path.display(),
                        if moved { format!("moved it to {}, ", aside.display()) } else { String::new() }
                    ));
                }
            },
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => warning = Some(format!("cannot read usage ledger {}: {error}", path.display())),
        }
        if let Some(text) = &warning {
            tracing::warn!("{text}");
        }
        let ledger = Self {
            path: Some(path),
            state: Mutex::new(State { entries, dirty: false, last_flush_millis: clock.now_millis() }),
            flush_lock: Mutex::new(()),
            clock,
        };
        let dropped = ledger.prune();
        if dropped > 0 {
            tracing::debug!(dropped, "usage ledger: dropped entries past the TTL on load");
            ledger.state.lock().dirty = true;
        }
        (ledger, warning)
    }

    /// The file this ledger persists to, if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Counts a trigger match or `$name` request for each skill.
    pub fn record_hits<'a>(&self, names: impl IntoIterator<Item = &'a str>) {
        self.record(names, |entry| entry.hits += 1);
    }

    /// Counts a body that reached a prompt for each skill.
    pub fn record_deliveries<'a>(&self, names: impl IntoIterator<Item = &'a str>) {
        self.record(names, |entry| entry.deliveries += 1);
    }

    fn record<'a>(&self, names: impl IntoIterator<Item = &'a str>, bump: impl Fn(&mut UsageEntry)) {
        let now = self.clock.now_secs();
        let mut state = self.state.lock();
        let mut any = false;
        for name in names {
            let entry = state.entries.entry(name.to_owned()).or_default();
            bump(entry);
            entry.last_used = entry.last_used.max(now);
            any = true;
        }
        if any {
            state.dirty = true;
        }
    }

    /// The entry for `name`, `None` when untracked (never seen, or aged out).
    pub fn get(&self, name: &str) -> Option<UsageEntry> {
        let cutoff = self.cutoff();
        self.state.lock().entries.get(name).copied().filter(|entry| entry.last_used >= cutoff)
    }

    /// A copy of every live entry.
    pub fn snapshot(&self) -> HashMap<String, UsageEntry> {
        let cutoff = self.cutoff();
        self.state
            .lock()
            .entries
            .iter()
            .filter(|(_, entry)| entry.last_used >= cutoff)
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    }

    fn cutoff(&self) -> u64 {
        self.clock.now_secs().saturating_sub(USAGE_TTL_SECS)
    }

    /// Drops entries past the TTL; returns how many went.
    pub fn prune(&self) -> usize {
        let cutoff = self.cutoff();
        let mut state = self.state.lock();
        let before = state.entries.len();
        state.entries.retain(|_, entry| entry.last_used >= cutoff);
        before - state.entries.len()
    }

    /// Writes the ledger if it changed and the last write is older than the
    /// debounce interval. Returns whether it wrote.
    pub fn maybe_flush(&self) -> Result<bool> {
        {
            let state = self.state.lock();
            if !state.dirty || self.clock.now_millis().saturating_sub(state.last_flush_millis) < USAGE_FLUSH_DEBOUNCE_MS
            {
                return Ok(false);
            }
        }
        self.flush()
    }

    /// Writes the ledger now if it changed (pruning aged entries first).
    /// Returns whether it wrote.
    pub fn flush(&self) -> Result<bool> {
        let Some(path) = &self.path else {
            self.state.lock().dirty = false;
            return Ok(false);
        };
        let _writer = self.flush_lock.lock();
        self.prune();
        let file = {
            let mut state = self.state.lock();
            if !state.dirty {
                return Ok(false);
            }
            state.dirty = false;
            state.last_flush_millis = self.clock.now_millis();
            LedgerFile { version: 1, skills: state.entries.iter().map(|(k, v)| (k.clone(), *v)).collect() }
        };
        let bytes =
            serde_json::to_vec_pretty(&file).map_err(|source| SkillsError::Ledger { path: path.clone(), source })?;
        if let Err(error) = atomic_write(path, &bytes) {
            self.state.lock().dirty = true;
            return Err(error);
        }
        tracing::debug!(entries = file.skills.len(), path = %path.display(), "usage ledger written");
        Ok(true)
    }
}

impl Drop for UsageLedger {
    fn drop(&mut self) {
        if let Err(error) = self.flush() {
            tracing::warn!(%error, "usage ledger: final flush failed");
        }
    }
}
