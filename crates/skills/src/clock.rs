//! Wall-clock seam, so TTLs and ledger ages are testable without sleeping.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub trait SkillClock: Send + Sync + std::fmt::Debug {
    /// The current time in milliseconds since the Unix epoch.
    fn now_millis(&self) -> u64;
    /// The current time in whole seconds since the Unix epoch.
    fn now_secs(&self) -> u64 {
        self.now_millis() / 1000
    }
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemSkillClock;

impl SkillClock for SystemSkillClock {
    fn now_millis(&self) -> u64 {
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_millis() as u64)
    }
}

/// A clock that only moves when told to (tests, replays).
#[derive(Debug, Default)]
pub struct ManualSkillClock {
    millis: AtomicU64,
}

impl ManualSkillClock {
    /// A clock reading `millis`.
    pub fn new(millis: u64) -> Self {
        Self { millis: AtomicU64::new(millis) }
    }
    /// Moves the clock forward.
    pub fn advance_millis(&self, millis: u64) {
        self.millis.fetch_add(millis, Ordering::SeqCst);
    }
    /// Sets the clock.
    pub fn set_millis(&self, millis: u64) {
        self.millis.store(millis, Ordering::SeqCst);
    }
}

impl SkillClock for ManualSkillClock {
    fn now_millis(&self) -> u64 {
        self.millis.load(Ordering::SeqCst)
    }
}
