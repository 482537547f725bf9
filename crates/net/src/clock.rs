//! The wall clock a service stamps and judges by, behind one seam that tests can replace.
//!
//! A validator reads the time of day to stamp its records, to set and judge expiries (a
//! challenge's, an order's, a clearing request's, a report's), to bar a released GPU until a
//! time, to pick the window of a health record and to number the schedule's rounds. All of it
//! goes through a [`Clock`]: the [`SystemClock`] in service, a [`ManualClock`] in a test, which
//! the test sets and moves by hand (an hour's bar passes in no time, a window is judged at an
//! instant the test chose).
//!
//! What a clock does *not* do is measure how long something took: a challenge's timing, a
//! round trip, a deadline are measured with [`std::time::Instant`], which is monotonic and
//! must stay so (a time bound judged on a clock that a test, or NTP, can move would be worth
//! nothing).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The time of day, in ms since the Unix epoch.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Now, in ms since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// A clock shared by the parts of a service that read it.
pub type SharedClock = Arc<dyn Clock>;

/// The operating system's wall clock (0 on a clock set before 1970, rather than a panic).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl SystemClock {
    /// The system clock, shared.
    pub fn shared() -> SharedClock {
        Arc::new(SystemClock)
    }
}

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

/// A clock that stands still until it is set or advanced by hand: a test's clock. Cloned, it
/// is the same clock (give one clone to the service, keep the other to move it).
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    now_ms: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock showing `now_ms` (ms since the Unix epoch).
    pub fn at(now_ms: u64) -> ManualClock {
        ManualClock {
            now_ms: Arc::new(AtomicU64::new(now_ms)),
        }
    }

    /// A clock showing the system clock's time now (then standing still).
    pub fn at_system_time() -> ManualClock {
        ManualClock::at(SystemClock.now_ms())
    }

    /// Sets it to `now_ms` (forward or back, as a wall clock can be).
    pub fn set(&self, now_ms: u64) {
        self.now_ms.store(now_ms, Ordering::SeqCst);
    }

    /// Moves it forward by `by` (at most to `u64::MAX` ms); returns the new time.
    pub fn advance(&self, by: Duration) -> u64 {
        let by = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        let before = self
            .now_ms
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| {
                Some(t.saturating_add(by))
            })
            .unwrap_or_else(|t| t);
        before.saturating_add(by)
    }

    /// This clock, shared as a service takes it.
    pub fn shared(&self) -> SharedClock {
        Arc::new(self.clone())
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.now_ms.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told_and_its_clones_move_with_it() {
        let clock = ManualClock::at(1_000);
        let service = clock.shared();
        assert_eq!(service.now_ms(), 1_000);
        assert_eq!(clock.advance(Duration::from_secs(3600)), 3_601_000);
        assert_eq!(service.now_ms(), 3_601_000);
        clock.set(5);
        assert_eq!(service.now_ms(), 5);
        clock.set(u64::MAX - 1);
        assert_eq!(clock.advance(Duration::from_secs(1)), u64::MAX);
    }

    #[test]
    fn the_system_clock_reads_the_time_of_day() {
        let before = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let now = SystemClock.now_ms();
        assert!(now >= before && now < before + 60_000, "{now} {before}");
    }
}
