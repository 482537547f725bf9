//! Sizing a memory challenge for a claimed model: the data set from its capacity, the walk from
//! its bandwidth, and the bound from pog's own measurement of the model where there is one.

use super::arx::{ITEM_BYTES, OUTPUT_BYTES};
use super::{MemoryChallenge, MEMORY_VERSION};
use crate::challenge::Addressee;
use pog_spec::{GpuSpec, SpecDb};
use serde::{Deserialize, Serialize};

/// Share of the claimed model's nominal capacity the data set fills. The rest holds the
/// walkers' outputs (about 3 % of the data set at the default walk), their Merkle tree and the
/// CUDA runtime: on the H200 (143 771 MiB) the data set takes 129 946 MiB.
pub const FILL: f64 = 0.90;

/// ChaCha double rounds per half item. At 40, producing an item costs 7680 integer operations
/// against one 128-byte read; docs/protocol.md has the measured ratio.
pub const ITEM_ROUNDS: u32 = 40;

/// Random steps per walker.
pub const STEPS: u32 = 4;

/// Consecutive items read per step (2 KiB): each spot check recomputes STEPS × SPAN = 64
/// items on the validator's CPU.
pub const SPAN: u32 = 16;

/// Walker outputs per leaf: 1 KiB leaves.
pub const WALKERS_PER_LEAF: u32 = 64;

/// Seconds of the claimed model's walk a challenge asks for: long enough that a network
/// round trip of a few tens of milliseconds stays within the bound's allowance, short enough
/// that the GEMM and memory proofs together cost the agent under 2.5 s of GPU time a round.
pub const WALK_SECONDS: f64 = 0.5;

/// Share of a model's datasheet bandwidth its walk is expected to reach where pog has not
/// measured the model (docs/protocol.md: the H200's measured share, rounded down).
pub const DATASHEET_WALK_EFFICIENCY: f64 = 0.75;

/// How far past its plan for the claimed model an agent still takes a memory challenge's walk:
/// [`WALK_SLACK`] times the planned walkers, steps and reads. The test plan's small shapes walk
/// 16 steps (4 × [`STEPS`]), and a validator may plan from a measured rate other than the
/// agent's build has. The data set (items, item rounds) and the walk's span and leaf size get
/// no slack: the protocol fixes them per model.
pub const WALK_SLACK: u64 = 4;

/// A memory challenge that asks for more than the protocol plans for the claimed model (a
/// hostile or broken validator: an honest one never sends it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{parameter} {asked} is beyond the {limit} the protocol plans for the claimed model")]
pub struct BeyondPlan {
    /// The challenge's field, or `reads` (walkers × steps × span).
    pub parameter: &'static str,
    /// What the challenge asks for.
    pub asked: u64,
    /// The most the plan for the claimed model allows.
    pub limit: u64,
}

/// Where a walk rate comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryRate {
    /// GB/s of item reads, walk to commitment.
    pub gbs: f64,
    /// The measurement (card, date, command), or the datasheet fallback.
    pub source: String,
}

impl MemoryRate {
    /// The rate the claimed model is expected to walk at: pog's measurement of the model
    /// (`[gpu.memory_proof]` in measured.toml), else [`DATASHEET_WALK_EFFICIENCY`] of its
    /// datasheet bandwidth.
    pub fn of(claimed: &GpuSpec) -> MemoryRate {
        match SpecDb::embedded()
            .measurement(claimed)
            .and_then(|m| m.memory_proof.as_ref())
        {
            Some(m) => MemoryRate {
                gbs: m.walk_gbs,
                source: m.source.clone(),
            },
            None => MemoryRate {
                gbs: claimed.memory_bandwidth_gbs * DATASHEET_WALK_EFFICIENCY,
                source: format!(
                    "datasheet: {DATASHEET_WALK_EFFICIENCY} of {} GB/s",
                    claimed.memory_bandwidth_gbs
                ),
            },
        }
    }
}

/// A planned memory challenge with the time the claimed model should need to walk it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryPlan {
    /// Items of 128 bytes in the data set: sized to the claimed model's memory.
    pub items: u64,
    /// ChaCha double rounds per 64-byte half of an item.
    pub item_rounds: u32,
    /// Walkers, each one 16-byte output.
    pub walkers: u64,
    /// Random steps each walker takes.
    pub steps: u32,
    /// Consecutive items read at each step.
    pub span: u32,
    /// Walker outputs per Merkle leaf.
    pub walkers_per_leaf: u32,
    /// The walk rate the bound assumes, and where it comes from.
    pub rate: MemoryRate,
    /// The bound: item bytes read over the expected rate.
    pub expected_ms: f64,
    /// Device memory the honest prover needs: data set, outputs and tree.
    pub device_bytes: u64,
}

/// Plans the challenge for `claimed`: a data set of [`FILL`] of its capacity, and enough
/// walkers for `walk_seconds` at its expected rate (`rate`, else [`MemoryRate::of`]). None
/// for a model without memory or bandwidth figures.
pub fn plan(claimed: &GpuSpec, walk_seconds: f64, rate: Option<MemoryRate>) -> Option<MemoryPlan> {
    let rate = rate.unwrap_or_else(|| MemoryRate::of(claimed));
    let capacity = claimed.memory_gib * (1u64 << 30) as f64;
    if !(capacity > 0.0 && rate.gbs > 0.0 && walk_seconds > 0.0) {
        return None;
    }
    let items = (FILL * capacity / ITEM_BYTES as f64) as u64 / u64::from(SPAN) * u64::from(SPAN);
    let reads = walk_seconds * rate.gbs * 1e9 / ITEM_BYTES as f64;
    let per_leaf = u64::from(WALKERS_PER_LEAF);
    let per_walker = f64::from(STEPS * SPAN);
    let walkers = ((reads / per_walker).ceil() as u64)
        .div_ceil(per_leaf)
        .max(1)
        * per_leaf;
    let expected_ms =
        (walkers * u64::from(STEPS * SPAN) * ITEM_BYTES) as f64 / (rate.gbs * 1e9) * 1e3;
    let leaves = walkers / per_leaf;
    let device_bytes = items * ITEM_BYTES + walkers * OUTPUT_BYTES + 2 * leaves * 32;
    Some(MemoryPlan {
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

impl MemoryPlan {
    /// Refuses a challenge that asks more of a prover than this plan: more items, item rounds,
    /// span or walkers per leaf than planned, or more than [`WALK_SLACK`] times the planned
    /// walkers, steps or reads. An agent checks it before building, so a validator it trusts
    /// cannot make it hold or compute more than the claimed model's proof needs.
    pub fn admits(&self, c: &MemoryChallenge) -> Result<(), BeyondPlan> {
        let walk = |planned: u64| planned.saturating_mul(WALK_SLACK);
        let reads = |walkers: u64, steps: u32, span: u32| {
            walkers
                .saturating_mul(u64::from(steps))
                .saturating_mul(u64::from(span))
        };
        let limits = [
            ("items", c.items, self.items),
            ("item_rounds", c.item_rounds.into(), self.item_rounds.into()),
            ("span", c.span.into(), self.span.into()),
            (
                "walkers_per_leaf",
                c.walkers_per_leaf.into(),
                self.walkers_per_leaf.into(),
            ),
            ("walkers", c.walkers, walk(self.walkers)),
            ("steps", c.steps.into(), walk(self.steps.into())),
            (
                "reads",
                reads(c.walkers, c.steps, c.span),
                walk(reads(self.walkers, self.steps, self.span)),
            ),
        ];
        match limits.into_iter().find(|(_, asked, limit)| asked > limit) {
            Some((parameter, asked, limit)) => Err(BeyondPlan {
                parameter,
                asked,
                limit,
            }),
            None => Ok(()),
        }
    }

    /// The challenge of this shape for `to`, from `nonce`.
    pub fn challenge(&self, nonce: [u8; 32], to: Addressee) -> MemoryChallenge {
        MemoryChallenge {
            version: MEMORY_VERSION,
            nonce,
            to,
            items: self.items,
            item_rounds: self.item_rounds,
            walkers: self.walkers,
            steps: self.steps,
            span: self.span,
            walkers_per_leaf: self.walkers_per_leaf,
        }
    }
}

/// The models whose memory the proof cannot tell from `claimed`'s: smaller or slower in
/// memory, yet holding the data set ([`FILL`] of the claimed capacity) and walking within the
/// bound (a model slower in bandwidth by less than [`crate::params::MIN_LEAD`]). Models at
/// least as large and as fast are not listed: they can always do the claimed model's work.
pub fn unseparated<'a>(claimed: &GpuSpec, db: &'a SpecDb) -> Vec<&'a GpuSpec> {
    db.all()
        .iter()
        .filter(|m| m.model != claimed.model)
        .filter(|m| {
            m.memory_gib < claimed.memory_gib
                || m.memory_bandwidth_gbs < claimed.memory_bandwidth_gbs
        })
        .filter(|m| {
            m.memory_gib >= FILL * claimed.memory_gib
                && claimed.memory_bandwidth_gbs / m.memory_bandwidth_gbs < crate::params::MIN_LEAD
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pog_signed::PublicKey;

    fn spec(model: &str) -> &'static GpuSpec {
        SpecDb::embedded().by_model(model).unwrap()
    }

    fn to() -> Addressee {
        Addressee {
            gpu_uuid: "GPU-1".parse().unwrap(),
            gpu_bus_id: "00000000:00:06.0".into(),
            agent_key: PublicKey::from([0xaa; 32]),
            validator_key: PublicKey::from([0xbb; 32]),
        }
    }

    #[test]
    fn the_data_set_follows_the_claimed_capacity_and_fits_beside_the_runtime() {
        for (model, reported_mib) in [
            ("H200 SXM", 143_771.0),
            ("H100 NVL", 95_830.0),
            ("A100 SXM 40GB", 40_960.0),
            ("A100 SXM 80GB", 81_920.0),
            ("RTX 4090", 24_564.0),
        ] {
            let p = plan(spec(model), WALK_SECONDS, None).unwrap();
            let capacity = spec(model).memory_gib * (1u64 << 30) as f64;
            let held = (p.items * ITEM_BYTES) as f64;
            assert!(
                held >= 0.9 * capacity - (SPAN as u64 * ITEM_BYTES) as f64,
                "{model}"
            );
            // Data set, outputs and tree leave at least 1 GiB of what the card reports.
            let reported = reported_mib * (1u64 << 20) as f64;
            assert!(
                p.device_bytes as f64 + (1u64 << 30) as f64 <= reported,
                "{model}: {} of {reported}",
                p.device_bytes
            );
            let c = p.challenge([1; 32], to());
            assert!(c.check_shape().is_ok(), "{model}");
            assert!(p.expected_ms >= 1e3 * WALK_SECONDS, "{model}");
            assert!(p.expected_ms < 1e3 * WALK_SECONDS * 1.01, "{model}");
        }
    }

    #[test]
    fn an_h100_cannot_hold_an_h200_data_set_and_no_cheaper_card_is_unseparated() {
        let db = SpecDb::embedded();
        let h200 = plan(spec("H200 SXM"), WALK_SECONDS, None).unwrap();
        for smaller in ["H100 SXM", "H100 NVL", "A100 SXM 80GB"] {
            let capacity = spec(smaller).memory_gib * (1u64 << 30) as f64;
            assert!(((h200.items * ITEM_BYTES) as f64) > capacity, "{smaller}");
        }
        let h200_escapes = unseparated(spec("H200 SXM"), db);
        assert!(
            h200_escapes.is_empty(),
            "{:?}",
            h200_escapes.iter().map(|m| &m.model).collect::<Vec<_>>()
        );
        // An A100 PCIe 80GB has the SXM's capacity and 95 % of its bandwidth: the memory
        // proof alone cannot tell them apart, and says so.
        let a100 = unseparated(spec("A100 SXM 80GB"), db);
        assert!(a100.iter().any(|m| m.model == "A100 PCIe 80GB"));
    }

    #[test]
    fn a_challenge_beyond_the_plan_for_the_claimed_model_is_refused() {
        let h200 = plan(spec("H200 SXM"), WALK_SECONDS, None).unwrap();
        let planned = h200.challenge([1; 32], to());
        assert!(h200.admits(&planned).is_ok());
        // Smaller shapes (the test plan's: 4096 items, 1024 walkers of 16 steps) are taken.
        let small = MemoryChallenge {
            items: 4096,
            walkers: 1024,
            steps: 16,
            ..planned.clone()
        };
        assert!(h200.admits(&small).is_ok());
        let beyond = |c: MemoryChallenge| h200.admits(&c).unwrap_err().parameter;
        assert_eq!(
            beyond(MemoryChallenge {
                item_rounds: 1024,
                ..small.clone()
            }),
            "item_rounds"
        );
        assert_eq!(
            beyond(MemoryChallenge {
                items: h200.items + u64::from(SPAN),
                ..small.clone()
            }),
            "items"
        );
        assert_eq!(
            beyond(MemoryChallenge {
                steps: 4 * STEPS + 1,
                ..small.clone()
            }),
            "steps"
        );
        assert_eq!(
            beyond(MemoryChallenge {
                walkers: WALK_SLACK * h200.walkers + 64,
                ..small.clone()
            }),
            "walkers"
        );
        assert_eq!(
            beyond(MemoryChallenge {
                walkers: WALK_SLACK * h200.walkers,
                steps: 2 * STEPS,
                ..small.clone()
            }),
            "reads"
        );
        assert_eq!(
            beyond(MemoryChallenge {
                span: 2 * SPAN,
                ..small.clone()
            }),
            "span"
        );
        assert_eq!(
            beyond(MemoryChallenge {
                walkers_per_leaf: 2 * WALKERS_PER_LEAF,
                ..small
            }),
            "walkers_per_leaf"
        );
        // A smaller model's plan refuses the larger model's data set.
        let rtx = plan(spec("RTX 4090"), WALK_SECONDS, None).unwrap();
        let err = rtx.admits(&planned).unwrap_err();
        assert_eq!((err.parameter, err.limit), ("items", rtx.items));
        assert!(err.to_string().contains("items"), "{err}");
    }

    #[test]
    fn measured_rates_set_the_bound_and_models_without_figures_get_none() {
        let rate = MemoryRate {
            gbs: 1000.0,
            source: "test".into(),
        };
        let p = plan(spec("H200 SXM"), 0.25, Some(rate)).unwrap();
        let bytes = (p.walkers * u64::from(p.steps * p.span) * ITEM_BYTES) as f64;
        assert!((p.expected_ms - bytes / 1e12 * 1e3).abs() < 1e-9 * p.expected_ms);
        assert_eq!(p.walkers % u64::from(WALKERS_PER_LEAF), 0);
        let mut nothing = spec("T4").clone();
        nothing.memory_bandwidth_gbs = 0.0;
        assert!(plan(&nothing, 0.5, None).is_none());
    }
}
