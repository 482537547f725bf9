//! The agent's own timing of the proofs it commits, for its `/metrics`:
//! `pog_last_proof_ratio{proof="gemm"|"memory", timed_by="agent"}`, its time from taking a
//! challenge (for the memory proof, the walk) to the commitment, over the time the protocol
//! plans for the GPU's claimed model at the shape asked.
//!
//! A validator that plans per model (the default) asks for the plan's own shape, so that time is
//! the validator's `expected_ms` and the two ratios differ by the network alone. Under a test
//! plan (`pog validator --test-plan`: small shapes and a bound set by hand) the agent still
//! measures against the claimed model's rate, so its figure says how fast the GPU is, not what
//! the test decided. Either way the validator's own figure (its clock, from sending to receipt,
//! less the round trip it credits) is the one that decides, and it serves it on its own
//! `/metrics` (`pog_validator::metrics`); a modified agent can publish anything here.

use pog_monitor::prometheus::LastProofRatio;
use pog_proof::challenge::Challenge;
use pog_proof::memory::{self, MemoryChallenge};
use pog_signed::GpuUuid;
use pog_spec::SpecDb;
use std::collections::HashMap;

/// A step of a proof the agent times ([`crate::agent::Agent`] notes each to its monitor).
#[derive(Debug, Clone, Copy)]
pub enum Step<'a> {
    /// A GEMM challenge committed after this many ms (from taking it).
    Gemm(&'a Challenge, f64),
    /// A memory challenge's data set built (challenge id): its walk is what is timed.
    Built(&'a str, &'a MemoryChallenge),
    /// The walk of challenge id on the GPU committed after this many ms (from taking it).
    Walked(&'a str, &'a GpuUuid, f64),
}

impl Step<'_> {
    /// The GPU it is about.
    pub fn gpu(&self) -> &GpuUuid {
        match self {
            Step::Gemm(c, _) => &c.to.gpu_uuid,
            Step::Built(_, c) => &c.to.gpu_uuid,
            Step::Walked(_, gpu, _) => gpu,
        }
    }
}

/// The time, in ms, the protocol's plan for `model` allows a GEMM challenge of `c`'s shape: its
/// operations at the rate the plan in `c`'s precision assumes (`pog_proof::params::plan_at`,
/// as an agent checks a challenge against and a validator plans by). None for a model or
/// precision the protocol plans nothing for.
pub fn gemm_planned_ms(model: &str, c: &Challenge) -> Option<f64> {
    let db = SpecDb::embedded();
    let plan = pog_proof::params::plan_at(db.by_model(model)?, db, c.precision)?;
    // As `plan_in` computes the plan's own `expected_ms`.
    let one = 2.0 * (c.size as f64).powi(3);
    Some(f64::from(c.batch) * one / (plan.expected_tflops * 1e12) * 1e3)
}

/// The time, in ms, the protocol's memory plan for `model` allows the walk of `c`: the plan's
/// `expected_ms` scaled to `c`'s reads (walkers × steps × span). None for a model the protocol
/// plans no memory proof for.
pub fn walk_planned_ms(model: &str, c: &MemoryChallenge) -> Option<f64> {
    let plan = memory::plan(
        SpecDb::embedded().by_model(model)?,
        memory::WALK_SECONDS,
        None,
    )?;
    let reads =
        |walkers: u64, steps: u32, span: u32| walkers as f64 * f64::from(steps) * f64::from(span);
    Some(
        plan.expected_ms * reads(c.walkers, c.steps, c.span)
            / reads(plan.walkers, plan.steps, plan.span),
    )
}

/// The last ratios of each GPU, and each GPU's built data set awaiting its walk (one a GPU,
/// as the agent holds one: challenge id, planned ms).
#[derive(Debug, Default)]
pub(crate) struct OwnTimings {
    last: HashMap<String, LastProofRatio>,
    walks: HashMap<String, (String, Option<f64>)>,
}

impl OwnTimings {
    /// Notes `step` of a proof on a GPU claimed as `model`.
    pub(crate) fn note(&mut self, model: &str, step: Step<'_>) {
        let ratio = |planned: Option<f64>, agent_ms: f64| {
            planned
                .filter(|ms| *ms > 0.0)
                .map(|ms| agent_ms / ms)
                .filter(|r| r.is_finite())
        };
        match step {
            Step::Gemm(c, agent_ms) => {
                if let Some(r) = ratio(gemm_planned_ms(model, c), agent_ms) {
                    self.last.entry(c.to.gpu_uuid.to_string()).or_default().gemm = Some(r);
                }
            }
            Step::Built(id, c) => {
                self.walks.insert(
                    c.to.gpu_uuid.to_string(),
                    (id.to_string(), walk_planned_ms(model, c)),
                );
            }
            Step::Walked(id, gpu, agent_ms) => {
                let Some((built, planned)) = self.walks.remove(gpu.as_str()) else {
                    return;
                };
                if built != id {
                    return;
                }
                if let Some(r) = ratio(planned, agent_ms) {
                    self.last.entry(gpu.to_string()).or_default().memory = Some(r);
                }
            }
        }
    }

    /// `gpu`'s last ratios, if it committed a proof.
    pub(crate) fn last(&self, gpu: &str) -> Option<LastProofRatio> {
        self.last.get(gpu).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pog_proof::challenge::Addressee;
    use pog_signed::PublicKey;

    const MODEL: &str = "H200 SXM";

    fn to(gpu: &GpuUuid) -> Addressee {
        Addressee {
            gpu_uuid: gpu.clone(),
            gpu_bus_id: "00000000:00:06.0".into(),
            agent_key: PublicKey::from([7; 32]),
            validator_key: PublicKey::from([7; 32]),
        }
    }

    #[test]
    fn the_planned_time_of_the_plans_own_shape_is_the_validators_bound() {
        let gpu: GpuUuid = "GPU-own".parse().unwrap();
        let spec = SpecDb::embedded().by_model(MODEL).unwrap();
        let db = SpecDb::embedded();
        let precision = pog_proof::params::choose_precision(spec, db)
            .unwrap()
            .precision;
        let plan = pog_proof::params::plan_at(spec, db, precision).unwrap();
        let mut c = pog_proof::challenge::Challenge {
            version: pog_proof::challenge::CHALLENGE_VERSION,
            nonce: [1; 32],
            to: pog_proof::challenge::Addressee {
                gpu_uuid: gpu.clone(),
                gpu_bus_id: "00000000:00:06.0".into(),
                agent_key: PublicKey::from([7; 32]),
                validator_key: PublicKey::from([7; 32]),
            },
            precision,
            size: plan.size,
            batch: plan.batch,
            leaf_elements: pog_proof::params::leaf_elements(precision),
        };
        assert_eq!(gemm_planned_ms(MODEL, &c), Some(plan.expected_ms));
        // Twice the products, twice the time; half the size, an eighth.
        c.batch = plan.batch * 2;
        let twice = gemm_planned_ms(MODEL, &c).unwrap();
        assert!((twice - 2.0 * plan.expected_ms).abs() < 1e-9 * twice);
        c.size = plan.size / 2;
        let eighth = gemm_planned_ms(MODEL, &c).unwrap();
        assert!((eighth - plan.expected_ms / 4.0).abs() < 1e-9 * eighth);
        assert_eq!(gemm_planned_ms("no such GPU", &c), None);

        let memory_plan = memory::plan(spec, memory::WALK_SECONDS, None).unwrap();
        let walk = memory_plan.challenge([2; 32], to(&gpu));
        let planned = walk_planned_ms(MODEL, &walk).unwrap();
        assert!((planned - memory_plan.expected_ms).abs() < 1e-9 * planned);
    }

    #[test]
    fn a_walk_is_timed_against_the_bound_of_the_data_set_built_for_it() {
        let gpu: GpuUuid = "GPU-own".parse().unwrap();
        let spec = SpecDb::embedded().by_model(MODEL).unwrap();
        let plan = memory::plan(spec, memory::WALK_SECONDS, None).unwrap();
        let walk = plan.challenge([2; 32], to(&gpu));
        let mut timings = OwnTimings::default();
        assert_eq!(timings.last("GPU-own"), None);
        // A walk of another data set than the one built is not timed.
        timings.note(MODEL, Step::Built("a", &walk));
        timings.note(MODEL, Step::Walked("b", &gpu, 1.0));
        assert_eq!(timings.last("GPU-own"), None);
        timings.note(MODEL, Step::Built("c", &walk));
        timings.note(MODEL, Step::Walked("c", &gpu, plan.expected_ms * 0.9));
        let last = timings.last("GPU-own").unwrap();
        assert!((last.memory.unwrap() - 0.9).abs() < 1e-9, "{last:?}");
        assert_eq!(last.gemm, None);
        // A model without a plan: nothing to time against.
        timings.note("no such GPU", Step::Built("d", &walk));
        timings.note("no such GPU", Step::Walked("d", &gpu, 1.0));
        assert_eq!(timings.last("GPU-own"), Some(last));
    }
}
