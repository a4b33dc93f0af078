//! The clock the binary's services stamp records with.

use std::time::{SystemTime, UNIX_EPOCH};

/// Unix milliseconds now (0 before the epoch, `i64::MAX` past its range).
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX))
}
