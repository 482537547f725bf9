//! How a validator challenges a GPU: the policy a proof record was planned and judged under,
//! and the plan it makes for one claimed model.

use pog_proof::challenge::{Addressee, CHALLENGE_VERSION};
use pog_proof::Challenge;
use pog_spec::{GpuSpec, Precision, SpecDb};
use serde::{Deserialize, Serialize};

/// Why a policy cannot plan a challenge.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PolicyError {
    /// The claimed model is not in the spec database.
    #[error("GPU model {0:?} is not in the database")]
    UnknownModel(String),
    /// The model has no rate in the precision forced by hand.
    #[error("the {model} has no {precision} rate to plan a challenge at")]
    NoRate {
        /// The claimed model.
        model: String,
        /// The precision asked for.
        precision: Precision,
    },
    /// Something that must be at least 1 is 0.
    #[error("{0} must be at least 1")]
    Zero(&'static str),
    /// A memory proof was asked of a policy that does not prove memory.
    #[error("the policy does not prove memory")]
    MemoryOff,
    /// A proof of the host's CPU was asked without a claim of its cores.
    #[error("the host claims no cores to plan a proof of CPU for")]
    NoCoresClaimed,
    /// The CPU proof's shape is beyond the protocol's limits.
    #[error(transparent)]
    CpuShape(#[from] pog_proof::cpu::BadCpuShape),
    /// A proof of CPU was asked of a policy that does not prove the CPU.
    #[error("the policy does not prove the host's CPU")]
    CpuOff,
    /// A test plan's expected time is not a positive number of milliseconds.
    #[error("expected time {0} ms is not a positive number")]
    ExpectedTime(f64),
    /// A proof of the host's RAM was asked without a claim of its RAM.
    #[error("the host claims no RAM to plan a proof of RAM for")]
    NoRamClaimed,
    /// The RAM claim or the RAM walk is beyond what the proof sizes for.
    #[error(transparent)]
    RamClaim(#[from] pog_proof::ram::BadRamClaim),
    /// A proof of RAM was asked of a policy that does not prove the RAM.
    #[error("the policy does not prove the host's RAM")]
    RamOff,
    /// The slowest RAM build waited for is not a positive rate.
    #[error("the slowest RAM build waited for, {0} GiB/s a thread, is not a positive rate")]
    RamBuildRate(f64),
    /// The proof of storage's plan is beyond the protocol's limits (what, in words).
    #[error("the proof of storage's plan is out of bounds: {0}")]
    Storage(String),
}

/// Where a challenge's shape and time bound come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanKind {
    /// Planned from the claimed model (`pog_proof::params::plan_in`): at least
    /// [`pog_proof::params::PLANNED_SECONDS`] of that model's work, in the precision that separates it from
    /// cheaper models, against a bound from its measured rate. The only plan that proves a
    /// model, and the default.
    PerModel,
    /// The fixed `size`, `batch` and `expected_ms` of the policy (`pog validator
    /// --test-plan`): for tests and demos with the CPU prover. It proves no model — one CPU
    /// core answers a small one in time — and every record made under it says so.
    Test,
}

/// How a GPU is challenged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Policy {
    /// Per-model (real) or a fixed test plan.
    pub plan: PlanKind,
    /// None: the precision `pog_proof::params::choose_precision` picks for the claimed model.
    pub precision: Option<Precision>,
    /// m = n = k of each GEMM (a per-model plan fills it in).
    pub size: u64,
    /// Independent GEMMs per challenge (a per-model plan fills it in).
    pub batch: u32,
    /// Output elements per Merkle leaf; `None` (the default): `pog_proof::params::LEAF_BYTES`
    /// of the challenge's outputs (`params::leaf_elements`). Policies recorded before
    /// challenge version 4 name a number (1024).
    #[serde(default)]
    pub leaf_elements: Option<u32>,
    /// The claimed model's expected time to commit.
    pub expected_ms: f64,
    /// Leaves spot-checked per challenge.
    pub samples: u32,
    /// How long the agent has to commit.
    pub expiry_ms: u64,
    /// The proof of memory each round (after the GEMM challenge).
    #[serde(default)]
    pub memory: MemoryPolicy,
    /// The proof of the host's CPU (once a round, with the host's first GPU).
    #[serde(default)]
    pub cpu: CpuPolicy,
    /// The proof of the host's RAM (once a round, with the host's first GPU, after its CPU).
    #[serde(default)]
    pub ram: RamPolicy,
    /// The proof of the host's storage (once a round, with the host's first GPU, after its
    /// CPU).
    #[serde(default)]
    pub storage: StoragePolicy,
    /// A check during a lease ([`Policy::for_lease`]): a short GEMM against a loose bound,
    /// which shows the GPU up and answering rightly for the settlement and proves no model.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lease_check: bool,
}

/// Whether a round also proves the host's storage, and what it costs the host: the walk's
/// steps, the checks, and how often the data set is rebuilt (`pog validator
/// --no-storage-proof`, `--storage-steps`, `--storage-rebuild-days`: per network).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoragePolicy {
    /// Whether a round proves the storage at all.
    pub enabled: bool,
    /// Dependent 4 KiB reads a round walks (its cost to the host, and its bound:
    /// steps × the claimed class's read).
    pub steps: u32,
    /// Steps opened and checked a round.
    pub samples: u32,
    /// Items the validator regenerates among the opened steps' chunks.
    pub regenerated: u32,
    /// Chunks the audit of a new data set opens and regenerates.
    pub audit_samples: u32,
    /// How long a data set is walked before a new one is sent (a rebuild), ms.
    pub rebuild_after_ms: u64,
    /// How long the host has to build a new data set, ms: the validator polls it each round
    /// until then.
    pub build_expiry_ms: u64,
}

impl Default for StoragePolicy {
    /// On, at `pog_proof::storage`'s default plan: 1024 steps, 64 opened, 2 regenerated, 256
    /// audited; a new data set every 30 days, 6 hours to build it.
    fn default() -> Self {
        StoragePolicy {
            enabled: true,
            steps: pog_proof::storage::STEPS,
            samples: pog_proof::storage::SAMPLES,
            regenerated: pog_proof::storage::REGENERATED,
            audit_samples: pog_proof::storage::AUDIT_SAMPLES,
            rebuild_after_ms: pog_proof::storage::REBUILD_AFTER_MS,
            build_expiry_ms: 6 * 3600 * 1000,
        }
    }
}

impl StoragePolicy {
    /// A short shape for tests: 128 steps (a small data set walked in milliseconds), 16
    /// opened, 32 audited, a minute to build.
    pub fn test_shape() -> StoragePolicy {
        StoragePolicy {
            steps: 128,
            samples: 16,
            audit_samples: 32,
            build_expiry_ms: 60_000,
            ..StoragePolicy::default()
        }
    }

    /// Checks the plan against the protocol's limits.
    pub fn validate(&self) -> Result<(), PolicyError> {
        use pog_proof::storage::{MAX_SAMPLES, MAX_STEPS};
        let fits = (1..=MAX_STEPS).contains(&self.steps)
            && (1..=MAX_SAMPLES.min(self.steps)).contains(&self.samples)
            && self.regenerated <= self.samples
            && (1..=MAX_SAMPLES).contains(&self.audit_samples)
            && self.rebuild_after_ms > 0
            && self.build_expiry_ms > 0;
        if fits {
            Ok(())
        } else {
            Err(PolicyError::Storage(format!(
                "{} steps, {} opened, {} regenerated, {} audited: steps 1 to {MAX_STEPS}, \
                 opened 1 to {MAX_SAMPLES} and at most the steps, regenerated at most the \
                 opened, audited 1 to {MAX_SAMPLES}",
                self.steps, self.samples, self.regenerated, self.audit_samples
            )))
        }
    }
}

/// m = n = k of the product a per-model lease check computes: 2048³ multiply-adds (17 GFLOP,
/// tens of microseconds of an H100's or H200's tensor cores), with inputs and outputs of
/// 8 to 32 MiB beside the tenant's data.
pub const LEASE_CHECK_SIZE: u64 = 2048;

/// The bound of a per-model lease check, ms: loose enough for a GPU its tenant keeps busy
/// (the check's kernels wait for the tenant's in the GPU's time slices), tight enough that
/// a GPU gone, hung or swapped for a remote machine's answer is caught within the round.
pub const LEASE_CHECK_MS: f64 = 1000.0;

/// Whether a round also proves the host's CPU, and the shape of its lanes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuPolicy {
    /// Whether a round proves the CPU at all.
    pub enabled: bool,
    /// Segments spot-checked.
    pub samples: u32,
    /// Steps per lane.
    pub steps: u64,
    /// Segments per lane (dividing the steps).
    pub segments: u32,
}

impl Default for CpuPolicy {
    /// On, at `pog_proof::cpu`'s default plan.
    fn default() -> Self {
        CpuPolicy {
            enabled: true,
            samples: pog_proof::cpu::SAMPLES,
            steps: pog_proof::cpu::STEPS,
            segments: pog_proof::cpu::SEGMENTS,
        }
    }
}

impl CpuPolicy {
    /// A short shape for tests: lanes of 2²² steps (tens of milliseconds a lane: long
    /// against a thread's start, short for a test).
    pub fn test_shape() -> CpuPolicy {
        CpuPolicy {
            steps: 1 << 22,
            segments: 256,
            ..CpuPolicy::default()
        }
    }
}

/// Whether a round also proves the host's RAM, and its walk (`pog validator --no-ram-proof`,
/// `--ram-walkers`, `--ram-walk-gbs`: per network). The data set is sized from the host's
/// claim (`pog_proof::ram::plan`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RamPolicy {
    /// Whether a round proves the RAM at all.
    pub enabled: bool,
    /// Walkers spot-checked.
    pub samples: u32,
    /// Walkers a round walks (its cost to the host beside the build).
    pub walkers: u64,
    /// The slowest walk accepted, GB/s of item reads: the bound's ceiling
    /// (`pog_proof::ram::bound_after_build` calibrates it by the build).
    pub walk_gbs: f64,
    /// The slowest build waited for, GiB of data set a second per claimed hardware thread:
    /// a large claim's build is given that long, past the challenge expiry
    /// (`pog_proof::ram::build_expiry_ms`). Records before it read as the default.
    #[serde(default = "default_build_gibs_per_thread")]
    pub build_gibs_per_thread: f64,
}

/// [`RamPolicy::build_gibs_per_thread`] where a network (or an older record) sets none.
fn default_build_gibs_per_thread() -> f64 {
    pog_proof::ram::SLOWEST_BUILD_GIBS_PER_THREAD
}

impl RamPolicy {
    /// A short walk for tests: 1024 walkers (64 Ki reads) under a floor of 0.01 GB/s, so that
    /// the build's calibration sets the bound even for an unoptimised build's prover.
    pub fn test_shape() -> RamPolicy {
        RamPolicy {
            walkers: 1024,
            walk_gbs: 0.01,
            ..RamPolicy::default()
        }
    }

    /// Checks the walk against the protocol's limits: spot checks, walkers within the memory
    /// proof's, a positive finite rate.
    pub fn validate(&self) -> Result<(), PolicyError> {
        if self.samples == 0 {
            return Err(PolicyError::Zero("the proof of RAM's spot checks"));
        }
        let walks = (1..=pog_proof::memory::MAX_WALKERS).contains(&self.walkers)
            && self.walk_gbs.is_finite()
            && self.walk_gbs > 0.0;
        if !(self.build_gibs_per_thread.is_finite() && self.build_gibs_per_thread > 0.0) {
            return Err(PolicyError::RamBuildRate(self.build_gibs_per_thread));
        }
        if !walks {
            return Err(PolicyError::RamClaim(pog_proof::ram::BadRamClaim::Walk {
                walkers: self.walkers,
                gbs: self.walk_gbs,
            }));
        }
        Ok(())
    }
}

impl Default for RamPolicy {
    /// On, at `pog_proof::ram`'s default walk and floor.
    fn default() -> Self {
        RamPolicy {
            enabled: true,
            samples: pog_proof::memory::SAMPLES,
            walkers: pog_proof::ram::WALKERS,
            walk_gbs: pog_proof::ram::RAM_WALK_GBS,
            build_gibs_per_thread: default_build_gibs_per_thread(),
        }
    }
}

/// Whether a round also proves memory, and (under a test plan) its fixed shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryPolicy {
    /// Whether a round proves memory at all.
    pub enabled: bool,
    /// Walkers spot-checked.
    pub samples: u32,
    /// A test plan's data set, walk and bound; a per-model plan takes them from the claimed
    /// model (`pog_proof::memory::plan`) and ignores these.
    pub items: u64,
    /// A test plan's walkers, each one 16-byte output.
    pub walkers: u64,
    /// A test plan's random steps per walker.
    pub steps: u32,
    /// A test plan's bound from walk nonce to commitment, ms.
    pub expected_ms: f64,
}

impl Default for MemoryPolicy {
    /// On, planned per model, with `pog_proof::memory::SAMPLES` spot checks.
    fn default() -> Self {
        MemoryPolicy {
            enabled: true,
            samples: pog_proof::memory::SAMPLES,
            items: 0,
            walkers: 0,
            steps: 0,
            expected_ms: 0.0,
        }
    }
}

impl MemoryPolicy {
    /// No memory proof.
    pub fn off() -> MemoryPolicy {
        MemoryPolicy {
            enabled: false,
            ..MemoryPolicy::default()
        }
    }

    /// A fixed small shape for test plans: 4096 items (512 KiB), 1024 walkers of 16 steps,
    /// which one CPU core answers in milliseconds. It proves no model.
    pub fn test_shape(expected_ms: f64) -> MemoryPolicy {
        MemoryPolicy {
            items: 4096,
            walkers: 1024,
            steps: 16,
            expected_ms,
            ..MemoryPolicy::default()
        }
    }
}

/// A challenge's shape for one claimed model, and the time that model should need.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Planned {
    /// The precision the challenge computes in.
    pub precision: Precision,
    /// m = n = k of each GEMM.
    pub size: u64,
    /// Independent GEMMs to compute.
    pub batch: u32,
    /// Output elements per Merkle leaf.
    pub leaf_elements: u32,
    /// The claimed model's expected time to commit, ms.
    pub expected_ms: f64,
    /// The claimed model's lead in this precision over the nearest slower model
    /// (`params::PrecisionChoice::advantage`; 1 where none was computed, 0 where a slower
    /// model catches up by emulation): at least `params::MIN_LEAD` for an accepted challenge
    /// to prove the model.
    pub lead: f64,
    /// Whether an accepted challenge of this plan proves the claimed model: a per-model plan
    /// in the precision the validator picks for the model (`params::choose_precision`), with
    /// a lead of at least `params::MIN_LEAD`. A precision forced by hand (`pog validator
    /// --precision`) proves nothing unless it is that pick: the pick is the one vetted
    /// against every cheaper model's emulations, and under another one a cheaper card may
    /// answer in time (split-BF16 products passed every FP32 challenge).
    pub proves_model: bool,
}

impl Planned {
    /// The challenge of this shape for `to`, from `nonce`.
    pub fn challenge(&self, nonce: [u8; 32], to: Addressee) -> Challenge {
        Challenge {
            version: CHALLENGE_VERSION,
            nonce,
            to,
            precision: self.precision,
            size: self.size,
            batch: self.batch,
            leaf_elements: self.leaf_elements,
        }
    }
}

impl Policy {
    /// The policy `pog validator` runs with by default: each challenge planned from the
    /// claimed model, 256-byte leaves, 1024 spot checks, a minute to commit.
    pub fn per_model_default() -> Policy {
        Policy {
            plan: PlanKind::PerModel,
            precision: None,
            size: 0,
            batch: 0,
            leaf_elements: None,
            expected_ms: 0.0,
            samples: 1024,
            expiry_ms: 60_000,
            memory: MemoryPolicy::default(),
            cpu: CpuPolicy::default(),
            ram: RamPolicy::default(),
            storage: StoragePolicy::default(),
            lease_check: false,
        }
    }

    /// This policy's check of a GPU during a lease (issue 25, docs/market.md "Proofs during
    /// a lease"): one product of [`LEASE_CHECK_SIZE`] in the precision the round would use,
    /// against [`LEASE_CHECK_MS`] (under a test plan, the test's own shape and bound), with
    /// no proof of memory (its data set would take the tenant's memory) and none of the
    /// host's CPU or storage (the tenant uses them too). Its records count for the settlement
    /// and prove no model.
    pub fn for_lease(&self) -> Policy {
        let (size, batch, expected_ms) = match self.plan {
            PlanKind::PerModel => (LEASE_CHECK_SIZE, 1, LEASE_CHECK_MS),
            PlanKind::Test => (self.size, self.batch, self.expected_ms),
        };
        Policy {
            size,
            batch,
            expected_ms,
            memory: MemoryPolicy::off(),
            cpu: CpuPolicy {
                enabled: false,
                ..self.cpu.clone()
            },
            ram: RamPolicy {
                enabled: false,
                ..self.ram.clone()
            },
            storage: StoragePolicy {
                enabled: false,
                ..self.storage.clone()
            },
            lease_check: true,
            ..self.clone()
        }
    }

    /// Whether records made under this policy say anything about the claimed model.
    pub fn proves_model(&self) -> bool {
        self.plan == PlanKind::PerModel && !self.lease_check
    }

    /// How a GPU claimed to be `spec` is challenged under this policy.
    pub fn plan_for(&self, spec: &GpuSpec) -> Result<Planned, PolicyError> {
        let unknown = || PolicyError::UnknownModel(spec.model.clone());
        if self.plan == PlanKind::PerModel && !self.lease_check {
            let db = SpecDb::embedded();
            let pick = pog_proof::params::choose_precision(spec, db).map(|c| c.precision);
            // Forced by hand, a precision is planned at the model's own rate in it and proves
            // nothing unless it is the pick.
            let precision = self.precision.or(pick).ok_or_else(unknown)?;
            let plan = pog_proof::params::plan_at(spec, db, precision).ok_or_else(|| {
                PolicyError::NoRate {
                    model: spec.model.clone(),
                    precision,
                }
            })?;
            return Ok(Planned {
                precision: plan.choice.precision,
                size: plan.size,
                batch: plan.batch,
                leaf_elements: self.leaf_elements_in(plan.choice.precision),
                expected_ms: plan.expected_ms,
                lead: plan.choice.advantage,
                proves_model: Some(plan.choice.precision) == pick
                    && plan.choice.advantage >= pog_proof::params::MIN_LEAD,
            });
        }
        let precision = match self.precision {
            Some(p) => p,
            None => pog_proof::params::choose_precision(spec, SpecDb::embedded())
                .map(|c| c.precision)
                .ok_or_else(unknown)?,
        };
        Ok(Planned {
            precision,
            size: self.size,
            batch: self.batch,
            leaf_elements: self.leaf_elements_in(precision),
            expected_ms: self.expected_ms,
            lead: 1.0,
            proves_model: false,
        })
    }
}

impl Policy {
    /// Output elements per leaf of a challenge in `precision` under this policy.
    pub fn leaf_elements_in(&self, precision: Precision) -> u32 {
        self.leaf_elements
            .unwrap_or_else(|| pog_proof::params::leaf_elements(precision))
    }

    /// Refuses policies no challenge can be built from.
    pub fn validate(&self) -> Result<(), PolicyError> {
        if self.leaf_elements == Some(0) || self.samples == 0 || self.expiry_ms == 0 {
            return Err(PolicyError::Zero("leaf elements, samples and the expiry"));
        }
        if self.memory.enabled && self.memory.samples == 0 {
            return Err(PolicyError::Zero("the memory proof's spot checks"));
        }
        if self.storage.enabled {
            self.storage.validate()?;
        }
        if self.ram.enabled {
            self.ram.validate()?;
        }
        if self.plan == PlanKind::PerModel && !self.lease_check {
            return Ok(()); // the shape and bound come from the model
        }
        let m = &self.memory;
        if m.enabled
            && (m.items == 0
                || m.walkers == 0
                || m.steps == 0
                || !(m.expected_ms.is_finite() && m.expected_ms > 0.0))
        {
            return Err(PolicyError::Zero(
                "a test plan's memory items, walkers, steps and expected time",
            ));
        }
        if self.size == 0 || self.batch == 0 {
            return Err(PolicyError::Zero("a test plan's size and batch"));
        }
        if !(self.expected_ms.is_finite() && self.expected_ms > 0.0) {
            return Err(PolicyError::ExpectedTime(self.expected_ms));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned(model: &str, precision: Option<Precision>) -> Planned {
        let spec = SpecDb::embedded().by_model(model).unwrap();
        Policy {
            precision,
            ..Policy::per_model_default()
        }
        .plan_for(spec)
        .unwrap()
    }

    /// Only the validator's own pick of precision proves a model: one forced by hand is
    /// planned and run, and its records say they prove nothing, as a test plan's do.
    #[test]
    fn a_precision_forced_by_hand_proves_no_model() {
        let pick = planned("H200 SXM", None);
        assert_eq!(pick.precision, Precision::Bf16);
        assert!(pick.proves_model && pick.lead >= pog_proof::params::MIN_LEAD);
        // Forcing the pick changes nothing.
        assert!(planned("H200 SXM", Some(Precision::Bf16)).proves_model);
        // FP32: an A100 does it faster from split BF16 products than the H200 natively, so
        // the H200 has no lead in it; planned at its own FP32 rate, proving nothing.
        let fp32 = planned("H200 SXM", Some(Precision::Fp32));
        assert_eq!((fp32.precision, fp32.lead), (Precision::Fp32, 0.0));
        assert!(!fp32.proves_model);
        // A lead in the forced precision is not enough either: INT8 leads by as much as BF16
        // on the H200, but only the pick was vetted.
        let int8 = planned("H200 SXM", Some(Precision::Int8));
        assert!(int8.lead >= pog_proof::params::MIN_LEAD && !int8.proves_model);
        // A T4's FP32 leads every model (none is slower), but the pick is FP16.
        assert!(!planned("T4", Some(Precision::Fp32)).proves_model);
        // A test plan proves nothing, whatever its precision.
        let test = Policy {
            plan: PlanKind::Test,
            precision: Some(Precision::Bf16),
            size: 32,
            batch: 2,
            expected_ms: 1000.0,
            ..Policy::per_model_default()
        };
        let spec = SpecDb::embedded().by_model("H200 SXM").unwrap();
        assert!(!test.plan_for(spec).unwrap().proves_model);
    }

    /// A lease check computes one small product in the model's own precision against the
    /// loose bound, with neither memory nor CPU proof, and proves no model; under a test plan
    /// it keeps the test's shape. Records of policies before it read as full rounds.
    #[test]
    fn a_lease_check_is_one_small_product_that_proves_no_model() {
        let spec = SpecDb::embedded().by_model("H200 SXM").unwrap();
        let lease = Policy::per_model_default().for_lease();
        assert!(lease.lease_check && !lease.proves_model());
        assert!(!lease.memory.enabled && !lease.cpu.enabled && !lease.storage.enabled);
        assert!(!lease.ram.enabled);
        lease.validate().unwrap();
        let plan = lease.plan_for(spec).unwrap();
        assert_eq!(
            (plan.precision, plan.size, plan.batch, plan.expected_ms),
            (Precision::Bf16, LEASE_CHECK_SIZE, 1, LEASE_CHECK_MS)
        );
        assert!(!plan.proves_model);
        let test = Policy {
            plan: PlanKind::Test,
            size: 32,
            batch: 2,
            expected_ms: 500.0,
            ..Policy::per_model_default()
        }
        .for_lease();
        assert_eq!((test.size, test.batch, test.expected_ms), (32, 2, 500.0));
        assert_eq!(test.plan, PlanKind::Test);
        let full = serde_json::to_value(Policy::per_model_default()).unwrap();
        assert!(full.get("lease_check").is_none(), "{full}");
        let read: Policy = serde_json::from_value(full).unwrap();
        assert!(!read.lease_check && read.proves_model());
    }

    /// Leaves are 256 bytes in every precision unless the policy names a count (INT8's outputs
    /// commit 2 bytes each since challenge version 8); a policy recorded before challenge
    /// version 4 (with its count) still reads.
    #[test]
    fn leaves_are_256_bytes_unless_named() {
        for (precision, elements) in [
            (Precision::Bf16, 128),
            (Precision::Fp16, 128),
            (Precision::Int8, 128),
            (Precision::Fp32, 64),
        ] {
            assert_eq!(planned("H200 SXM", Some(precision)).leaf_elements, elements);
        }
        let mut old = serde_json::to_value(Policy::per_model_default()).unwrap();
        old["leaf_elements"] = 1024.into();
        let old: Policy = serde_json::from_value(old).unwrap();
        assert_eq!(old.leaf_elements_in(Precision::Bf16), 1024);
        let zero = Policy {
            leaf_elements: Some(0),
            ..Policy::per_model_default()
        };
        assert!(zero.validate().is_err());
    }
}
