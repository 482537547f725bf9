//! The proof of RAM: the memory proof's construction ([`crate::memory`]) on the host's own
//! memory, sized from the RAM the host claims, built and walked by its CPU and timed by the
//! validator. The argument, with measured figures, is in docs/protocol.md ("Proof of RAM").
//!
//! The challenge is a [`MemoryChallenge`] addressed like the proof of CPU's (the host named by
//! the GPU its host proofs ride with, its agent's key and the validator's): a data set of
//! [`FILL`] of the claimed bytes in 128-byte items, each two ChaCha blocks of
//! [`ITEM_ROUNDS`] double rounds under a key bound to the challenge, built untimed under the
//! challenge's expiry; then a walk from a fresh nonce, timed: walkers read [`SPAN`] items at
//! each of [`STEPS`] data-dependent positions spread over the whole data set, so no read can
//! be issued before the one before it is done.
//!
//! Why a host without the memory it claims fails on time: every item it does not hold it must
//! regenerate when a walker reads it (two blocks of 40 double rounds, tens of times a read
//! from memory on a CPU core), fetch from where it put it (a page swapped to disk: a disk
//! read per step; another host: a network round trip per step), or skip the walker (caught
//! by the spot checks as in the memory proof). The bound is calibrated by the build, which the
//! validator also times: [`BUILD_ALLOWANCE`] of the build's time per item for each item read
//! ([`bound_after_build`]), at most the walk's reads at the policy's floor rate
//! ([`RAM_WALK_GBS`] unless a network sets its own). The score counts the walk's rate on the
//! validator's clock and the claim it proved.

use crate::memory::arx::{ITEM_BYTES, OUTPUT_BYTES};
use crate::memory::{MemoryPlan, MemoryRate};

pub use crate::memory::{MemoryChallenge, ITEM_ROUNDS, SPAN, STEPS, WALKERS_PER_LEAF};

/// Share of the claimed RAM the data set fills: the rest holds the walkers' outputs, their
/// tree, the agent and the operating system.
pub const FILL: f64 = 0.90;

/// The smallest claim: 1 MiB (tests; a host's claim is its RAM, GiB).
pub const MIN_CLAIM_BYTES: u64 = 1 << 20;
/// The largest claim: 2 TiB, whose data set is within the memory proof's largest
/// (`memory::MAX_ITEMS` items).
pub const MAX_CLAIM_BYTES: u64 = 1 << 41;

/// Walkers of the default plan: 16384 walkers of [`STEPS`] steps of [`SPAN`] items, 128 MiB
/// of reads a round (docs/protocol.md has what that takes).
pub const WALKERS: u64 = 1 << 14;

/// The walk rate the bound assumes where a network sets none, GB/s of item reads: the
/// slowest walk the proof accepts whatever the build took, a floor well below the development
/// VM's measured 2.8–3.8 GB/s on two threads (docs/protocol.md, "Proof of RAM").
pub const RAM_WALK_GBS: f64 = 0.5;

/// The bound as a share of the build's time per item, per item the walk reads: a walk may
/// take this share of what generating its reads would. An honest host reads an item in a
/// small share of what generating one takes (about 0.06 on the development VM:
/// docs/protocol.md), so it passes well inside; a host regenerating the items it does not
/// hold spends a whole generation on each of those reads, so one missing more than this
/// share of the data set misses the bound on its own clock, however fast its cores are.
pub const BUILD_ALLOWANCE: f64 = 0.25;

/// The walk's bound once the data set was built in `build_ms` on the validator's clock:
/// [`BUILD_ALLOWANCE`] of the build's time per item, per item read, and never more than the
/// plan's bound at its rate (a host that slows its build on purpose widens its bound no
/// further). Without a build time, the plan's bound.
pub fn bound_after_build(plan: &MemoryPlan, build_ms: Option<f64>) -> f64 {
    let reads = plan.walkers as f64 * f64::from(plan.steps) * f64::from(plan.span);
    match build_ms {
        Some(ms) if ms > 0.0 && plan.items > 0 => {
            (BUILD_ALLOWANCE * ms * reads / plan.items as f64).min(plan.expected_ms)
        }
        _ => plan.expected_ms,
    }
}

/// The slowest build the validator waits for where a network sets none, GiB of data set a
/// second per claimed hardware thread: a third of the H200 host's (14.4 GiB on 16 threads in
/// 14.7–16.0 s, 0.06 a thread) and a quarter of the development VM's (0.08–0.11), so that an
/// honest host with much RAM is given the time its build takes. The build is untimed (its time
/// only calibrates the walk's bound, which never passes the floor's: [`bound_after_build`]).
pub const SLOWEST_BUILD_GIBS_PER_THREAD: f64 = 0.02;

/// The longest a build is given, ms: 50 minutes, inside the hour past now that an agent takes
/// a challenge's expiry to be (`pog_agent::agent::MAX_LIFETIME_MS`). At the H200 host's rate a
/// 2 TiB claim (the largest) builds in about half an hour on 16 threads.
pub const LONGEST_BUILD_MS: u64 = 50 * 60 * 1000;

/// How long the validator gives the build of `plan` (its challenge's expiry, ms): the
/// network's challenge `expiry_ms`, or longer where the data set is large for the host's
/// claimed `threads` (one where it claims none): the data set at `gibs_per_thread` a thread,
/// at most [`LONGEST_BUILD_MS`]. A 60-s expiry alone failed every honest host whose build takes
/// longer: about 60 GiB on the H200 host's 16 threads.
pub fn build_expiry_ms(
    plan: &MemoryPlan,
    threads: Option<u32>,
    gibs_per_thread: f64,
    expiry_ms: u64,
) -> u64 {
    let gib = (plan.items as f64 * ITEM_BYTES as f64) / (1u64 << 30) as f64;
    let rate = gibs_per_thread * f64::from(threads.unwrap_or(1).max(1));
    let needed_ms = if rate > 0.0 && rate.is_finite() {
        (gib / rate * 1e3).ceil()
    } else {
        f64::INFINITY
    };
    let needed_ms = needed_ms.min(LONGEST_BUILD_MS as f64) as u64;
    expiry_ms.max(needed_ms)
}

/// A RAM claim the proof cannot be sized for.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BadRamClaim {
    /// A claim outside [`MIN_CLAIM_BYTES`]..=[`MAX_CLAIM_BYTES`].
    #[error(
        "a RAM claim of {bytes} bytes is outside what the proof of RAM sizes for \
         ({MIN_CLAIM_BYTES} to {MAX_CLAIM_BYTES} bytes)"
    )]
    Size {
        /// The claim.
        bytes: u64,
    },
    /// A walk of no walkers or at no positive rate.
    #[error("a RAM walk of {walkers} walkers at {gbs} GB/s times nothing")]
    Walk {
        /// Walkers asked for.
        walkers: u64,
        /// The bound's rate asked for.
        gbs: f64,
    },
}

/// Plans the proof of a claim of `claim_bytes` of RAM: a data set of [`FILL`] of it, and
/// `walkers` walkers (rounded up to whole leaves) whose reads at `rate` make the bound.
pub fn plan(claim_bytes: u64, walkers: u64, rate: MemoryRate) -> Result<MemoryPlan, BadRamClaim> {
    if !(MIN_CLAIM_BYTES..=MAX_CLAIM_BYTES).contains(&claim_bytes) {
        return Err(BadRamClaim::Size { bytes: claim_bytes });
    }
    if walkers == 0 || !(rate.gbs > 0.0 && rate.gbs.is_finite()) {
        return Err(BadRamClaim::Walk {
            walkers,
            gbs: rate.gbs,
        });
    }
    let span = u64::from(SPAN);
    let items = (FILL * claim_bytes as f64 / ITEM_BYTES as f64) as u64 / span * span;
    let per_leaf = u64::from(WALKERS_PER_LEAF);
    let walkers = walkers
        .min(crate::memory::MAX_WALKERS)
        .div_ceil(per_leaf)
        .max(1)
        * per_leaf;
    let reads = walkers * u64::from(STEPS) * span;
    let expected_ms = (reads * ITEM_BYTES) as f64 / (rate.gbs * 1e9) * 1e3;
    let device_bytes = items * ITEM_BYTES + walkers * OUTPUT_BYTES + 2 * (walkers / per_leaf) * 32;
    Ok(MemoryPlan {
        items,
        item_rounds: ITEM_ROUNDS,
        walkers,
        steps: STEPS,
        span: SPAN,
        walkers_per_leaf: WALKERS_PER_LEAF,
        rate,
        expected_ms,
        device_bytes,
    })
}

/// What an agent that claimed `claim_bytes` takes on: the default plan for its claim, which
/// [`MemoryPlan::admits`] holds a challenge to (no larger a data set, at most
/// [`crate::memory::WALK_SLACK`] times the default walk).
pub fn admissible(claim_bytes: u64) -> Result<MemoryPlan, BadRamClaim> {
    plan(claim_bytes, WALKERS, floor_rate())
}

/// [`RAM_WALK_GBS`] as the bound's rate.
pub fn floor_rate() -> MemoryRate {
    MemoryRate {
        gbs: RAM_WALK_GBS,
        source: format!("the proof of RAM's floor, {RAM_WALK_GBS} GB/s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::challenge::Addressee;
    use pog_signed::PublicKey;

    fn to() -> Addressee {
        Addressee {
            gpu_uuid: "GPU-1".parse().unwrap(),
            gpu_bus_id: "00000000:00:06.0".into(),
            agent_key: PublicKey::from([0xaa; 32]),
            validator_key: PublicKey::from([0xbb; 32]),
        }
    }

    #[test]
    fn the_data_set_fills_the_claim_and_the_bound_is_the_reads_at_the_rate() {
        for claim in [MIN_CLAIM_BYTES, 3 << 30, 125 << 30, MAX_CLAIM_BYTES] {
            let p = plan(claim, WALKERS, floor_rate()).unwrap();
            let held = p.items * ITEM_BYTES;
            assert!(held as f64 <= FILL * claim as f64, "{claim}");
            assert!(held as f64 >= FILL * claim as f64 - 2.0 * (SPAN as u64 * ITEM_BYTES) as f64);
            let c = p.challenge([1; 32], to());
            assert!(c.check_shape().is_ok(), "{claim}: {c:?}");
            let bytes = (c.reads() * ITEM_BYTES) as f64;
            assert!((p.expected_ms - bytes / (RAM_WALK_GBS * 1e9) * 1e3).abs() < 1e-6);
        }
        let odd = plan(1 << 30, 100, floor_rate()).unwrap();
        assert_eq!(odd.walkers, 128, "whole leaves");
    }

    #[test]
    fn the_build_calibrates_the_bound_up_to_the_rate() {
        let p = plan(64 << 20, WALKERS, floor_rate()).unwrap();
        let reads = (p.walkers * u64::from(p.steps * p.span)) as f64;
        let calibrated = bound_after_build(&p, Some(100.0));
        assert!((calibrated - BUILD_ALLOWANCE * 100.0 * reads / p.items as f64).abs() < 1e-9);
        assert!(calibrated < p.expected_ms);
        assert_eq!(bound_after_build(&p, Some(1e12)), p.expected_ms);
        assert_eq!(bound_after_build(&p, None), p.expected_ms);
        assert_eq!(bound_after_build(&p, Some(0.0)), p.expected_ms);
    }

    #[test]
    fn a_large_claim_is_given_the_time_its_build_takes_up_to_the_longest() {
        let gib = |n: u64| plan(n << 30, WALKERS, floor_rate()).unwrap();
        // 16 GiB (14.4 GiB of data set) on 16 threads at 0.02 GiB/s a thread: 45 s, inside
        // a 60-s expiry, which stands.
        assert_eq!(build_expiry_ms(&gib(16), Some(16), 0.02, 60_000), 60_000);
        // 256 GiB: 230.4 GiB at 0.32 GiB/s, 720 s; the same on one thread where no cores
        // are claimed would be 16 times that, past the longest.
        let big = build_expiry_ms(&gib(256), Some(16), 0.02, 60_000);
        assert!((719_000..=721_000).contains(&big), "{big}");
        assert_eq!(
            build_expiry_ms(&gib(256), None, 0.02, 60_000),
            LONGEST_BUILD_MS
        );
        // 2 TiB on 16 threads needs more than 50 minutes at the floor: the longest.
        let largest = plan(MAX_CLAIM_BYTES, WALKERS, floor_rate()).unwrap();
        assert_eq!(
            build_expiry_ms(&largest, Some(16), 0.02, 60_000),
            LONGEST_BUILD_MS
        );
        // A longer network expiry stands; a rate of nothing gives the longest.
        assert_eq!(build_expiry_ms(&gib(1), Some(2), 0.02, 90_000), 90_000);
        assert_eq!(
            build_expiry_ms(&gib(1), Some(2), 0.0, 60_000),
            LONGEST_BUILD_MS
        );
    }

    #[test]
    fn claims_and_walks_out_of_range_are_refused_with_their_figures() {
        for bytes in [0, MIN_CLAIM_BYTES - 1, MAX_CLAIM_BYTES + 1, u64::MAX] {
            let e = plan(bytes, WALKERS, floor_rate()).unwrap_err();
            assert_eq!(e, BadRamClaim::Size { bytes });
            assert!(e.to_string().contains(&bytes.to_string()), "{e}");
        }
        let nothing = MemoryRate {
            gbs: 0.0,
            source: "none".into(),
        };
        assert!(matches!(
            plan(1 << 30, WALKERS, nothing),
            Err(BadRamClaim::Walk { .. })
        ));
        assert!(matches!(
            plan(1 << 30, 0, floor_rate()),
            Err(BadRamClaim::Walk { .. })
        ));
    }

    #[test]
    fn an_agent_admits_its_claim_and_refuses_a_larger_data_set_or_walk() {
        let claim = 1 << 30;
        let mine = admissible(claim).unwrap();
        assert!(mine.admits(&mine.challenge([1; 32], to())).is_ok());
        let twice = plan(2 * claim, WALKERS, floor_rate()).unwrap();
        let e = mine.admits(&twice.challenge([1; 32], to())).unwrap_err();
        assert_eq!(e.parameter, "items");
        let long = plan(claim, WALKERS * crate::memory::WALK_SLACK * 2, floor_rate()).unwrap();
        assert_eq!(
            mine.admits(&long.challenge([1; 32], to()))
                .unwrap_err()
                .parameter,
            "walkers"
        );
    }
}
