//! The wall clock as every node service stamps its messages and records: milliseconds since
//! the Unix epoch (0 on a clock set before 1970, rather than a panic).

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in ms since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
