//! The time bound: the validator's own clock from sending the challenge to receiving the
//! commitment, minus the measured round trip, against the claimed model's expected time.

use serde::{Deserialize, Serialize};
use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in ms since the Unix epoch: the wall clock every agent and validator stamps its
/// messages and records with (0 on a clock set before 1970, rather than a panic).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// How far the validator's and the agent's clocks may disagree: an expiry or a report's time
/// is judged with this much slack.
pub const CLOCK_SKEW_MS: u64 = 60_000;

/// Allowed excess over the expected time. A model 15 % slower needs 1/0.85 = 1.176 times as
/// long, well past it; honest sustained runs on the H200 varied by 1.75 % (coefficient of
/// variation, docs/benchmarks.md), so an honest run exceeds 10 % only at more than five
/// standard deviations.
pub const TIME_TOLERANCE: f64 = 0.10;

/// The most network time credited back: this share of the expected time. The round trip is
/// the agent's to report (it answers the pings), so an agent that slows its pings must not buy
/// itself compute time.
pub const MAX_ROUND_TRIP_SHARE: f64 = 0.05;

/// A set-up's time on the validator's clock (a kind that calibrates its bound there: the proof
/// of CPU's calibration, the proof of RAM's build) less the network's share: the measured round
/// trip taken off, as the timed phase's is. Uncapped, unlike the timed phase's credit: a host
/// that answers its pings slowly only shortens its own set-up and so tightens its own bound.
/// Never below half the set-up, so that no round trip makes it nothing (no calibration would
/// leave the loosest bound). Without it a host far from its validator widened its bound by the
/// allowance times its round trip: 100 ms away, a host with half the threads it claims showed
/// about 1.56 of a 350-ms calibration, under the proof of CPU's 1.65.
pub fn set_up_compute_ms(measured_ms: f64, round_trip_ms: f64) -> f64 {
    (measured_ms - round_trip_ms.max(0.0)).max(measured_ms / 2.0)
}

/// What the validator measured and concluded.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TimeCheck {
    /// The validator's own time from sending the challenge to receiving the commitment, in ms.
    pub measured_ms: f64,
    /// The measured network round trip to the agent, in ms; at most [`MAX_ROUND_TRIP_SHARE`] of
    /// the expected time is credited back.
    pub round_trip_ms: f64,
    /// The time the claimed model should need, in ms.
    pub expected_ms: f64,
    /// (measured − round trip) / expected.
    pub ratio: f64,
    /// True when `ratio` is at most 1 + [`TIME_TOLERANCE`].
    pub accepted: bool,
}

/// Checks one commitment's timing.
pub fn check(measured_ms: f64, round_trip_ms: f64, expected_ms: f64) -> TimeCheck {
    let allowance = round_trip_ms.clamp(0.0, MAX_ROUND_TRIP_SHARE * expected_ms);
    let compute = (measured_ms - allowance).max(0.0);
    let ratio = compute / expected_ms;
    TimeCheck {
        measured_ms,
        round_trip_ms,
        expected_ms,
        ratio,
        accepted: ratio <= 1.0 + TIME_TOLERANCE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_up_is_credited_its_round_trip_down_to_half() {
        assert_eq!(set_up_compute_ms(450.0, 100.0), 350.0);
        assert_eq!(set_up_compute_ms(450.0, 0.0), 450.0);
        assert_eq!(set_up_compute_ms(450.0, -5.0), 450.0);
        // Pings answered slowly on purpose shorten the set-up, never to nothing.
        assert_eq!(set_up_compute_ms(450.0, 5000.0), 225.0);
    }

    #[test]
    fn a_slower_model_fails_and_an_honest_one_passes() {
        assert!(check(1020.0, 5.0, 1000.0).accepted);
        assert!(
            check(1100.0, 10.0, 1000.0).accepted,
            "within tolerance after the round trip"
        );
        let slower = 1000.0 / 0.85;
        assert!(!check(slower, 0.0, 1000.0).accepted);
        assert!(!check(slower + 20.0, 20.0, 1000.0).accepted);
        // A slow agent cannot buy time by answering pings slowly.
        assert!(!check(slower + 5000.0, 5000.0, 1000.0).accepted);
    }
}
