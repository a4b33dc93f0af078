//! Injectable time: the lazy loader's cooldown and the downloader's retry
//! ladder read the clock and sleep through this trait, so tests run them
//! without waiting.

use std::fmt;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// A monotonic clock that can also sleep.
pub trait LoaderClock: Send + Sync + fmt::Debug {
    /// Time elapsed since an arbitrary, fixed origin.
    fn now(&self) -> Duration;
    /// Blocks the calling thread for `duration`.
    fn sleep(&self, duration: Duration);
}

/// The real clock.
#[derive(Debug, Clone, Copy)]
pub struct SystemLoaderClock {
    origin: Instant,
}

impl SystemLoaderClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        Self { origin: Instant::now() }
    }
}

impl Default for SystemLoaderClock {
    fn default() -> Self {
        Self::new()
    }
}

impl LoaderClock for SystemLoaderClock {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    fn sleep(&self, duration: Duration) {
        std::thread::sleep(duration);
    }
}

/// A clock that only moves when told to; `sleep` advances it instantly and
/// records the requested duration.
#[derive(Debug, Default)]
pub struct ManualLoaderClock {
    now: Mutex<Duration>,
    sleeps: Mutex<Vec<Duration>>,
}

impl ManualLoaderClock {
    /// A clock at time zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        *self.now.lock() += by;
    }

    /// Every duration passed to [`LoaderClock::sleep`], in order.
    pub fn sleeps(&self) -> Vec<Duration> {
        self.sleeps.lock().clone()
    }
}

impl LoaderClock for ManualLoaderClock {
    fn now(&self) -> Duration {
        *self.now.lock()
    }

    fn sleep(&self, duration: Duration) {
        self.sleeps.lock().push(duration);
        self.advance(duration);
    }
}
