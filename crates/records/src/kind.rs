//! One kind of remote proof: how a validator plans it for a claimed model, addresses it, runs
//! its exchange with the agent, spot-checks it and records it. The validator's challenger,
//! the local self-check (`pog prove`, `pog check`) and the proof records are each written once
//! over [`ProofKind`]; the GEMM proof ([`Gemm`]), the proof of memory ([`Memory`]), the
//! proof of the host's cores ([`HostCpu`]) and of its RAM ([`HostRam`]) are its
//! implementations.

use crate::policy::CpuPolicy;
use crate::policy::{PlanKind, Planned, Policy, PolicyError};
use crate::proof::{CpuDetails, GemmDetails, MemoryDetails, ProofDetails, RamDetails};
use pog_proof::challenge::Addressee;
use pog_proof::cpu::{CpuChallenge, CpuPlan, CpuRun};
use pog_proof::memory::{MemoryChallenge, MemoryPlan, Walk};
use pog_proof::session::SpotChecked;
use pog_proof::task::Task;
use pog_proof::wire::kind;
use pog_proof::Challenge;
use pog_spec::GpuSpec;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt::Debug;

/// How a kind's exchange runs on the wire, after which both end the same way (commitment,
/// open request, openings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exchange {
    /// The challenge message starts the clock: the agent computes and answers with its
    /// commitment.
    Timed {
        /// Where on the agent the challenge goes.
        path: &'static str,
        /// The challenge message's wire kind.
        kind: &'static str,
    },
    /// The challenge message sets up, untimed under its expiry (the agent answers "ready");
    /// then a start message with a fresh nonce starts the clock, and the agent answers with
    /// its commitment. Nothing about the timed work is known while setting up.
    SetUp {
        /// Where on the agent the challenge goes.
        path: &'static str,
        /// The challenge message's wire kind.
        kind: &'static str,
        /// The wire kind of the agent's "ready".
        ready_kind: &'static str,
        /// Where on the agent the start message goes.
        start_path: &'static str,
        /// The start message's wire kind.
        start_kind: &'static str,
    },
}

impl Exchange {
    /// Where on the agent the challenge message goes, and its wire kind.
    pub fn challenge(&self) -> (&'static str, &'static str) {
        match *self {
            Exchange::Timed { path, kind } | Exchange::SetUp { path, kind, .. } => (path, kind),
        }
    }
}

/// What a record of one challenge says beyond what every proof record says, gathered once the
/// exchange has run.
pub struct Ran<'a, K: ProofKind> {
    /// The plan it ran under.
    pub plan: &'a K::Plan,
    /// The policy it was planned under.
    pub policy: &'a Policy,
    /// The challenge as issued.
    pub challenge: K::Challenge,
    /// The nonce that started the timed phase (sent only by a kind that sets up first).
    pub start: [u8; 32],
    /// The validator's clock from sending the challenge to the agent's "ready", less the
    /// measured round trip (`pog_proof::timing::set_up_compute_ms`), when the kind sets up and
    /// the agent got that far.
    pub set_up_ms: Option<f64>,
    /// The GPU is the simulated test double (its records prove nothing).
    pub simulated: bool,
}

/// What a GPU's owner claims, that a kind plans its proof from: the GPU's model, and the
/// cores (hardware threads) and RAM of its host where the agent claimed them.
#[derive(Debug, Clone, Copy)]
pub struct Claimed<'a> {
    /// The GPU's claimed model.
    pub spec: &'a GpuSpec,
    /// The host's claimed hardware threads.
    pub cores: Option<u32>,
    /// The host's claimed RAM, bytes.
    pub ram: Option<u64>,
}

/// One kind of remote proof. See the module's documentation.
pub trait ProofKind: Sized + Send + Sync + 'static {
    /// Its name in metrics, logs and tables: "gemm", "memory".
    const NAME: &'static str;
    /// How its exchange runs.
    const EXCHANGE: Exchange;
    /// Its bound is calibrated by its own set-up on the validator's clock
    /// ([`ProofKind::expected_after_set_up`]): the host's fastest set-up of a round that
    /// checked out (every spot check right, in time or not) is kept, so
    /// that a slowed one buys no looser bound (`pog_validator::set_up_pace`).
    const CALIBRATES_BY_SET_UP: bool = false;
    /// The challenge as issued, signed and recorded.
    type Challenge: Clone + Debug + PartialEq + Serialize + DeserializeOwned + Send + Sync + 'static;
    /// The plan for one claimed model: the challenge's shape and the model's time bound.
    type Plan: Clone + Debug + Send + Sync;
    /// What the spot checks run against once the timed phase has run.
    type Checked: SpotChecked + Send + 'static;
    /// What its records say beyond what every proof record says.
    type Details: ProofDetails + Clone + Debug + PartialEq + Send + Sync;

    /// Plans the proof for what is `claimed` under `policy`.
    fn plan(policy: &Policy, claimed: Claimed<'_>) -> Result<Self::Plan, PolicyError>;
    /// The claimed model's time for the timed phase under `plan`, ms, as known before the
    /// exchange (the longest the validator waits for).
    fn expected_ms(plan: &Self::Plan) -> f64;
    /// The time the timed phase is judged against once the set-up took `set_up_ms` on the
    /// validator's clock (a kind that calibrates there); [`ProofKind::expected_ms`] for the
    /// others.
    fn expected_after_set_up(plan: &Self::Plan, set_up_ms: Option<f64>) -> f64 {
        let _ = set_up_ms;
        Self::expected_ms(plan)
    }
    /// How long the set-up of `plan` is given on a host of the `claimed` hardware (the
    /// challenge's expiry), ms: the policy's expiry; longer for a kind whose set-up grows with
    /// the claim (the proof of RAM's build).
    fn set_up_expiry_ms(plan: &Self::Plan, policy: &Policy, claimed: &Claimed<'_>) -> u64 {
        let _ = (plan, claimed);
        policy.expiry_ms
    }
    /// Spot checks per challenge under `policy`.
    fn samples(policy: &Policy) -> u32;
    /// The challenge of `plan` for `to`, from `nonce`.
    fn challenge(plan: &Self::Plan, nonce: [u8; 32], to: Addressee) -> Self::Challenge;
    /// Whom `challenge` is for.
    fn to(challenge: &Self::Challenge) -> &Addressee;
    /// `challenge` as a prover's task.
    fn task(challenge: &Self::Challenge) -> Task<'_>;
    /// What is spot-checked: `challenge`, timed from `start` where the kind sets up first.
    fn checked(challenge: Self::Challenge, start: &[u8; 32]) -> Self::Checked;
    /// `policy` as run under `plan`: the plan's shape and bound filled in, so a record says
    /// what was asked rather than what was configured.
    fn as_run(plan: &Self::Plan, policy: &Policy) -> Policy;
    /// The record's kind-specific part.
    fn details(ran: Ran<'_, Self>) -> Self::Details;
}

/// The GEMM proof: seeded products in the precision that separates the claimed model from
/// cheaper ones, timed from the challenge.
#[derive(Debug, Clone, Copy)]
pub struct Gemm;

impl ProofKind for Gemm {
    const NAME: &'static str = "gemm";
    const EXCHANGE: Exchange = Exchange::Timed {
        path: "/v1/challenge",
        kind: kind::CHALLENGE,
    };
    type Challenge = Challenge;
    type Plan = Planned;
    type Checked = Challenge;
    type Details = GemmDetails;

    fn plan(policy: &Policy, claimed: Claimed<'_>) -> Result<Planned, PolicyError> {
        policy.plan_for(claimed.spec)
    }

    fn expected_ms(plan: &Planned) -> f64 {
        plan.expected_ms
    }

    fn samples(policy: &Policy) -> u32 {
        policy.samples
    }

    fn challenge(plan: &Planned, nonce: [u8; 32], to: Addressee) -> Challenge {
        plan.challenge(nonce, to)
    }

    fn to(challenge: &Challenge) -> &Addressee {
        &challenge.to
    }

    fn task(challenge: &Challenge) -> Task<'_> {
        Task::Gemm(challenge)
    }

    fn checked(challenge: Challenge, _start: &[u8; 32]) -> Challenge {
        challenge
    }

    fn as_run(plan: &Planned, policy: &Policy) -> Policy {
        Policy {
            size: plan.size,
            batch: plan.batch,
            expected_ms: plan.expected_ms,
            ..policy.clone()
        }
    }

    fn details(ran: Ran<'_, Gemm>) -> GemmDetails {
        GemmDetails {
            proves_model: ran.plan.proves_model && !ran.simulated,
            lead: ran.plan.lead,
            challenge: ran.challenge,
        }
    }
}

/// The proof of memory: a data set of the claimed capacity built (untimed), then walked at
/// the claimed bandwidth from a fresh nonce (timed).
#[derive(Debug, Clone, Copy)]
pub struct Memory;

impl ProofKind for Memory {
    const NAME: &'static str = "memory";
    const EXCHANGE: Exchange = Exchange::SetUp {
        path: "/v1/memory/build",
        kind: kind::MEMORY_CHALLENGE,
        ready_kind: kind::MEMORY_READY,
        start_path: "/v1/memory/walk",
        start_kind: kind::MEMORY_WALK,
    };
    type Challenge = MemoryChallenge;
    type Plan = MemoryPlan;
    type Checked = Walk;
    type Details = MemoryDetails;

    /// Per model, or the test plan's fixed shape.
    fn plan(policy: &Policy, claimed: Claimed<'_>) -> Result<MemoryPlan, PolicyError> {
        let spec = claimed.spec;
        let m = &policy.memory;
        if !m.enabled {
            return Err(PolicyError::MemoryOff);
        }
        let mut plan = pog_proof::memory::plan(spec, pog_proof::memory::WALK_SECONDS, None)
            .ok_or_else(|| PolicyError::UnknownModel(spec.model.clone()))?;
        if policy.plan == PlanKind::Test {
            let per_leaf = u64::from(plan.walkers_per_leaf);
            plan.items = m.items / u64::from(plan.span) * u64::from(plan.span);
            plan.walkers = m.walkers.div_ceil(per_leaf) * per_leaf;
            plan.steps = m.steps;
            plan.expected_ms = m.expected_ms;
        }
        Ok(plan)
    }

    fn expected_ms(plan: &MemoryPlan) -> f64 {
        plan.expected_ms
    }

    fn samples(policy: &Policy) -> u32 {
        policy.memory.samples
    }

    fn challenge(plan: &MemoryPlan, nonce: [u8; 32], to: Addressee) -> MemoryChallenge {
        plan.challenge(nonce, to)
    }

    fn to(challenge: &MemoryChallenge) -> &Addressee {
        &challenge.to
    }

    fn task(challenge: &MemoryChallenge) -> Task<'_> {
        Task::Memory(challenge)
    }

    fn checked(challenge: MemoryChallenge, start: &[u8; 32]) -> Walk {
        Walk {
            walk_key: challenge.walk_key(start),
            challenge,
        }
    }

    fn as_run(plan: &MemoryPlan, policy: &Policy) -> Policy {
        Policy {
            memory: crate::policy::MemoryPolicy {
                items: plan.items,
                walkers: plan.walkers,
                steps: plan.steps,
                expected_ms: plan.expected_ms,
                ..policy.memory.clone()
            },
            ..policy.clone()
        }
    }

    fn details(ran: Ran<'_, Memory>) -> MemoryDetails {
        MemoryDetails {
            proves_memory: ran.policy.proves_model() && !ran.simulated,
            memory_challenge: ran.challenge,
            walk_nonce: hex::encode(ran.start),
            build_ms: ran.set_up_ms,
            rate: (ran.policy.plan == PlanKind::PerModel).then(|| ran.plan.rate.clone()),
        }
    }
}

/// The proof of the host's cores: half the claimed lanes at once (the set-up, its time on the
/// validator's clock the calibration), then one lane per claimed core at once from a fresh
/// nonce (timed against the calibration). Addressed to one of the host's GPUs, and recorded among its
/// records.
#[derive(Debug, Clone, Copy)]
pub struct HostCpu;

impl ProofKind for HostCpu {
    const NAME: &'static str = "cpu";
    const EXCHANGE: Exchange = Exchange::SetUp {
        path: "/v1/cpu/calibrate",
        kind: kind::CPU_CHALLENGE,
        ready_kind: kind::CPU_READY,
        start_path: "/v1/cpu/start",
        start_kind: kind::CPU_START,
    };
    const CALIBRATES_BY_SET_UP: bool = true;
    type Challenge = CpuChallenge;
    type Plan = CpuPlan;
    type Checked = CpuRun;
    type Details = CpuDetails;

    /// Lanes for the claimed cores, of the policy's length.
    fn plan(policy: &Policy, claimed: Claimed<'_>) -> Result<CpuPlan, PolicyError> {
        let CpuPolicy {
            enabled,
            steps,
            segments,
            ..
        } = policy.cpu;
        if !enabled {
            return Err(PolicyError::CpuOff);
        }
        let lanes = claimed.cores.ok_or(PolicyError::NoCoresClaimed)?;
        let plan = CpuPlan {
            lanes,
            steps,
            segments,
        };
        plan.validate()?;
        Ok(plan)
    }

    fn expected_ms(plan: &CpuPlan) -> f64 {
        plan.bound_ms()
    }

    fn expected_after_set_up(plan: &CpuPlan, set_up_ms: Option<f64>) -> f64 {
        plan.expected_ms(set_up_ms)
    }

    fn samples(policy: &Policy) -> u32 {
        policy.cpu.samples
    }

    fn challenge(plan: &CpuPlan, nonce: [u8; 32], to: Addressee) -> CpuChallenge {
        plan.challenge(nonce, to)
    }

    fn to(challenge: &CpuChallenge) -> &Addressee {
        &challenge.to
    }

    fn task(challenge: &CpuChallenge) -> Task<'_> {
        Task::Cpu(challenge)
    }

    fn checked(challenge: CpuChallenge, start: &[u8; 32]) -> CpuRun {
        CpuRun::new(challenge, *start)
    }

    fn as_run(plan: &CpuPlan, policy: &Policy) -> Policy {
        Policy {
            cpu: CpuPolicy {
                steps: plan.steps,
                segments: plan.segments,
                ..policy.cpu.clone()
            },
            ..policy.clone()
        }
    }

    fn details(ran: Ran<'_, HostCpu>) -> CpuDetails {
        CpuDetails {
            proves_cores: !ran.simulated,
            cpu_challenge: ran.challenge,
            start_nonce: hex::encode(ran.start),
            calibration_ms: ran.set_up_ms,
        }
    }
}

/// The proof of the host's RAM: the memory proof's data set sized from the claimed RAM,
/// built in the host's memory (the set-up, its time on the validator's clock calibrating the
/// bound), then walked from a fresh nonce (timed). Addressed to one of the host's GPUs, and
/// recorded among its records.
#[derive(Debug, Clone, Copy)]
pub struct HostRam;

impl ProofKind for HostRam {
    const NAME: &'static str = "ram";
    const EXCHANGE: Exchange = Exchange::SetUp {
        path: "/v1/ram/build",
        kind: kind::RAM_CHALLENGE,
        ready_kind: kind::RAM_READY,
        start_path: "/v1/ram/walk",
        start_kind: kind::RAM_WALK,
    };
    const CALIBRATES_BY_SET_UP: bool = true;
    type Challenge = MemoryChallenge;
    type Plan = MemoryPlan;
    type Checked = Walk;
    type Details = RamDetails;

    /// A data set of the claimed RAM, the policy's walk at its floor rate.
    fn plan(policy: &Policy, claimed: Claimed<'_>) -> Result<MemoryPlan, PolicyError> {
        let r = &policy.ram;
        if !r.enabled {
            return Err(PolicyError::RamOff);
        }
        let bytes = claimed.ram.ok_or(PolicyError::NoRamClaimed)?;
        let rate = pog_proof::memory::MemoryRate {
            gbs: r.walk_gbs,
            source: format!("the policy's slowest RAM walk, {} GB/s", r.walk_gbs),
        };
        Ok(pog_proof::ram::plan(bytes, r.walkers, rate)?)
    }

    fn expected_ms(plan: &MemoryPlan) -> f64 {
        plan.expected_ms
    }

    fn expected_after_set_up(plan: &MemoryPlan, set_up_ms: Option<f64>) -> f64 {
        pog_proof::ram::bound_after_build(plan, set_up_ms)
    }

    /// The data set's build at the policy's slowest rate on the claimed threads, at least
    /// the policy's expiry (`pog_proof::ram::build_expiry_ms`).
    fn set_up_expiry_ms(plan: &MemoryPlan, policy: &Policy, claimed: &Claimed<'_>) -> u64 {
        pog_proof::ram::build_expiry_ms(
            plan,
            claimed.cores,
            policy.ram.build_gibs_per_thread,
            policy.expiry_ms,
        )
    }

    fn samples(policy: &Policy) -> u32 {
        policy.ram.samples
    }

    fn challenge(plan: &MemoryPlan, nonce: [u8; 32], to: Addressee) -> MemoryChallenge {
        plan.challenge(nonce, to)
    }

    fn to(challenge: &MemoryChallenge) -> &Addressee {
        &challenge.to
    }

    fn task(challenge: &MemoryChallenge) -> Task<'_> {
        Task::Ram(challenge)
    }

    fn checked(challenge: MemoryChallenge, start: &[u8; 32]) -> Walk {
        Memory::checked(challenge, start)
    }

    fn as_run(plan: &MemoryPlan, policy: &Policy) -> Policy {
        Policy {
            ram: crate::policy::RamPolicy {
                walkers: plan.walkers,
                ..policy.ram.clone()
            },
            ..policy.clone()
        }
    }

    fn details(ran: Ran<'_, HostRam>) -> RamDetails {
        RamDetails {
            proves_ram: !ran.simulated,
            ram_challenge: ran.challenge,
            walk_nonce: hex::encode(ran.start),
            build_ms: ran.set_up_ms,
        }
    }
}
