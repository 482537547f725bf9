//! Each host's fastest genuine set-up, per proof shape (issue 23). A proof that calibrates its
//! bound by its own set-up on the validator's clock (the proof of CPU's half-load calibration,
//! the proof of RAM's build) lets a host that sets up slower than it can widen its own bound:
//! a noisy 16-vCPU VM claiming twice its threads passed one round in ten when its calibration
//! happened to run 1.4 times slower than its others (2026-12-05, docs/protocol.md), and a host
//! could slow it on purpose. Once a round of one shape has checked out (every spot check
//! right, the set-up's lanes or data set included, whether or not it was in time), the host's
//! later set-ups of that shape count as at most [`SET_UP_SLACK`] times its fastest: a slowed
//! set-up no longer buys a looser bound, while an honest host's set-ups, which vary by less,
//! are judged as measured. A round late on time counts too: its set-up was real work all the
//! same, and a host claiming twice its threads is late in every round its calibration ran at
//! its usual pace, so without those its pace would only ever come from the one round in ten
//! whose calibration ran slow, the very round it should not come from.
//!
//! Kept in memory and in the registry (`set_up_paces`): a restarted validator takes a host's
//! pace up at its first round of that shape, and a validator on a fleet's database at every
//! round, since another may have seen a faster set-up; without it a host slowing its
//! calibration had a fresh first round after each restart and with each validator of a fleet.

use pog_signed::PublicKey;
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Mutex;

/// How much slower than its fastest genuine set-up a host's set-up may count. The H100 VM's
/// half-load calibrations varied by 1.19 times over ten honest runs, and its slowest timed
/// phase took 1.38 times its fastest calibration, under the proof of CPU's 1.65; a host with
/// half the threads it claims needs 2.0, so it would need a set-up counted 1.21 times its
/// fastest to pass, and gets 1.1.
pub const SET_UP_SLACK: f64 = 1.1;

/// The fastest genuine set-up (of a round that checked out) of each host and proof shape.
#[derive(Debug, Default)]
pub struct SetUpPaces {
    fastest_ms: Mutex<HashMap<String, f64>>,
}

impl SetUpPaces {
    /// The key of a proof's shape for one host: the proof's name, the agent's key and the plan
    /// (its `Debug` form, which names every size that sets the set-up's work: lanes and steps,
    /// or the data set's bytes), so a host that changes its claim starts afresh. The key is
    /// kept in the registry too: a pog whose plan prints otherwise finds no pace under it and
    /// judges the host's next set-up as measured, once, the same as a new claim.
    pub fn key(proof: &str, agent: &PublicKey, plan: &impl Debug) -> String {
        format!("{proof} {agent} {plan:?}")
    }

    /// The set-up time a round is judged by: the one measured, at most [`SET_UP_SLACK`] times
    /// the fastest this host's rounds of this shape checked out with; `None` when none was
    /// measured.
    pub fn judged(&self, key: &str, measured_ms: Option<f64>) -> Option<f64> {
        let measured = measured_ms?;
        let fastest = self.lock().get(key).copied();
        Some(fastest.map_or(measured, |f| measured.min(f * SET_UP_SLACK)))
    }

    /// Whether a set-up of `key` is known here.
    pub fn knows(&self, key: &str) -> bool {
        self.lock().contains_key(key)
    }

    /// Notes the set-up of a round whose spot checks all passed (in time or late),
    /// `measured_ms` on the validator's clock (or the fastest on record, taken up).
    pub fn checked_out(&self, key: String, measured_ms: f64) {
        if measured_ms.is_finite() && measured_ms > 0.0 {
            let mut fastest = self.lock();
            let entry = fastest.entry(key).or_insert(measured_ms);
            *entry = entry.min(measured_ms);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, f64>> {
        self.fastest_ms
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_up_counts_at_most_a_little_slower_than_the_fastest_that_checked_out() {
        let paces = SetUpPaces::default();
        let agent = PublicKey::from([7; 32]);
        let key = SetUpPaces::key("cpu", &agent, &(16u32, 1u64 << 20));
        // Nothing checked out yet: as measured.
        assert_eq!(paces.judged(&key, Some(335.0)), Some(335.0));
        assert_eq!(paces.judged(&key, None), None);
        paces.checked_out(key.clone(), 240.0);
        paces.checked_out(key.clone(), 225.0);
        paces.checked_out(key.clone(), 262.0);
        paces.checked_out(key.clone(), f64::NAN);
        // A calibration 1.5 times the fastest counts as 1.1 times it; a faster one as itself.
        assert!((paces.judged(&key, Some(335.0)).unwrap() - 247.5).abs() < 1e-9);
        assert_eq!(paces.judged(&key, Some(238.0)), Some(238.0));
        assert_eq!(paces.judged(&key, Some(200.0)), Some(200.0));
        // Another shape, or another host, starts afresh.
        let other = SetUpPaces::key("cpu", &agent, &(32u32, 1u64 << 20));
        assert_eq!(paces.judged(&other, Some(335.0)), Some(335.0));
        let stranger = SetUpPaces::key("cpu", &PublicKey::from([8; 32]), &(16u32, 1u64 << 20));
        assert_eq!(paces.judged(&stranger, Some(335.0)), Some(335.0));
    }
}
