//! A self-challenge: the validator's session and an agent's prover engine in one process, so
//! a provider sees what a remote validator would (`pog prove`, `pog check`). The challenge, the
//! spot checks, the verification and the time bound are the network validator's own code;
//! only the HTTP hops are left out (their round trip is credited there anyway).

use crate::provers::{DeviceTimings, Proved, ProverEngine, ProverError};
use pog_proof::challenge::Addressee;
use pog_proof::cpu::{CpuChallenge, CpuPlan};
use pog_proof::memory::{MemoryChallenge, MemoryPlan, MemoryRate};
use pog_proof::prover::Prover;
use pog_proof::session::{Outcome, SpotChecked, ValidatorSession};
use pog_proof::timing::now_ms;
use pog_proof::wire::{kind, ChallengeMessage, Commitment, Openings};
use pog_records::{Exchange, Gemm, HostCpu, HostRam, Memory, Planned, ProofKind};
use pog_signed::random_bytes;
use pog_signed::{GpuUuid, Identity};
use serde::Serialize;
use std::time::Instant;

/// How long the self-challenge gives the prover to commit, at least: ten times the expected
/// time where that is longer, so a large `--batch` is judged by its time bound, not cut off.
const EXPIRY_MS: u64 = 600_000;

/// Why a self-challenge could not run to a verdict.
#[derive(Debug, thiserror::Error)]
pub enum SelfCheckError {
    /// The expected time was not a positive number of milliseconds.
    #[error("the expected time must be a positive number of milliseconds, not {0}")]
    Bound(f64),
    /// The prover failed.
    #[error(transparent)]
    Prover(#[from] ProverError),
    /// The prover could not open the spot-checked leaves.
    #[error(transparent)]
    Open(#[from] pog_proof::prover::OpenError),
    /// The prover's inclusion paths do not make one multiproof (a prover's fault).
    #[error("the opened leaves' paths make no multiproof: {0}")]
    Multiproof(#[from] pog_merkle::multiproof::MultiproofError),
    /// A message could not be signed or read.
    #[error(transparent)]
    Wire(#[from] pog_signed::WireError),
    /// The validator's session refused a message.
    #[error("the validator's session refused the exchange: {0}")]
    Protocol(#[from] pog_proof::session::ProtocolError),
}

/// What every self-challenge measures, of any kind: its timed phase against the claimed
/// model's bound, what the spot checks cost, the signed bytes each way and the verdict.
#[derive(Debug, Clone, Serialize)]
pub struct Measured {
    /// The claimed model's expected time for the timed phase, ms.
    pub expected_ms: f64,
    /// The time measured from the start of the timed phase to the commitment, ms.
    pub commit_ms: f64,
    /// Time to open the spot-checked leaves and merge their paths into one multiproof, ms.
    pub open_ms: f64,
    /// The validator's CPU time to verify the openings, ms.
    pub verify_ms: f64,
    /// Bytes of the signed messages to the agent: challenge, start message (a kind that sets
    /// up first) and open request.
    pub bytes_to_agent: usize,
    /// Bytes of the signed messages back: ready (likewise), commitment and openings.
    pub bytes_from_agent: usize,
    /// The validator's verdict on the openings.
    pub outcome: Outcome,
}

impl Measured {
    /// Measured time against the bound: below 1 the commitment came in time.
    pub fn time_ratio(&self) -> f64 {
        self.commit_ms / self.expected_ms
    }
}

/// What one self-challenge showed.
#[derive(Debug, Clone, Serialize)]
pub struct SelfCheck {
    /// The GPU challenged.
    pub gpu_uuid: GpuUuid,
    /// The challenge as issued (nonce included), so its products can be recomputed elsewhere.
    pub challenge: pog_proof::Challenge,
    /// The challenge's precision.
    pub precision: pog_spec::Precision,
    /// m = n = k of each GEMM.
    pub size: u64,
    /// Independent GEMMs computed.
    pub batch: u32,
    /// Output elements per Merkle leaf.
    pub leaf_elements: u32,
    /// Where the device's time went, when the engine reports it (the GPU engine does).
    pub device: Option<DeviceTimes>,
    /// What every kind of self-challenge measures: the timed phase against the bound, the
    /// spot checks' cost, the bytes each way and the verdict (flattened into this JSON object).
    #[serde(flatten)]
    pub measured: Measured,
}

/// The GPU's time by phase (CUDA events, summed over the products).
#[derive(Debug, Clone, Serialize)]
pub struct DeviceTimes {
    /// Filling the input matrices, ms.
    pub fill_ms: f64,
    /// The GEMMs, ms.
    pub gemm_ms: f64,
    /// Hashing the output leaves, ms.
    pub hash_ms: f64,
    /// Building the Merkle tree over the leaves, ms.
    pub tree_ms: f64,
    /// Wall time of the device's whole commitment, ms (the validator's `commit_ms` adds the
    /// messages' way there and back).
    pub wall_ms: f64,
    /// Of `wall_ms`, the part before the first product was queued (allocations, the
    /// algorithm's lookup), ms.
    pub setup_ms: f64,
    /// Everything in the commitment besides the products themselves, as a share of the GEMM
    /// time.
    pub overhead: f64,
    /// The GEMM algorithm the products ran with.
    pub algorithm: String,
}

/// Challenges the GPU `gpu_uuid` at `gpu_bus_id` through `engine` with a GEMM proof, as a
/// validator would under `planned`.
pub fn run(
    engine: &dyn ProverEngine,
    gpu: (&GpuUuid, &str),
    planned: &Planned,
    samples: u32,
) -> Result<SelfCheck, SelfCheckError> {
    let x = exchange::<Gemm>(engine, gpu, planned, samples)?;
    let c = &x.challenge;
    let device = x.proved.timings.as_ref().and_then(|t| match t {
        DeviceTimings::Gemm(t) => Some(DeviceTimes {
            fill_ms: t.fill_ms,
            gemm_ms: t.gemm_ms,
            hash_ms: t.hash_ms,
            tree_ms: t.tree_ms,
            wall_ms: t.wall_ms,
            setup_ms: t.setup_ms,
            overhead: (x.measured.commit_ms - t.gemm_ms).max(0.0)
                / t.gemm_ms.max(f64::MIN_POSITIVE),
            algorithm: x.proved.algorithm.clone().unwrap_or_default(),
        }),
        DeviceTimings::Walk(_) => None,
    });
    Ok(SelfCheck {
        gpu_uuid: c.to.gpu_uuid.clone(),
        precision: c.precision,
        size: c.size,
        batch: c.batch,
        leaf_elements: c.leaf_elements,
        device,
        measured: x.measured,
        challenge: x.challenge,
    })
}

/// One self-challenge of any kind, run as the network validator runs it: the challenge
/// planned and addressed, the engine's untimed set-up, the timed phase from a fresh start
/// nonce, then the spot checks ([`settle`]).
struct Exchanged<K: ProofKind> {
    challenge: K::Challenge,
    start: [u8; 32],
    /// The wall time of the set-up (none for a kind timed from its challenge, ~0).
    set_up_ms: f64,
    /// The engine's own set-up time, when it knows.
    device_set_up_ms: Option<f64>,
    proved: Proved,
    measured: Measured,
}

fn exchange<K: ProofKind>(
    engine: &dyn ProverEngine,
    (gpu_uuid, gpu_bus_id): (&GpuUuid, &str),
    plan: &K::Plan,
    samples: u32,
) -> Result<Exchanged<K>, SelfCheckError> {
    let planned_ms = K::expected_ms(plan);
    if !(planned_ms.is_finite() && planned_ms > 0.0) {
        return Err(SelfCheckError::Bound(planned_ms));
    }
    let validator = Identity::from_seed(random_bytes());
    let agent = Identity::from_seed(random_bytes());
    let challenge = K::challenge(
        plan,
        random_bytes(),
        Addressee {
            gpu_uuid: gpu_uuid.clone(),
            gpu_bus_id: gpu_bus_id.to_string(),
            agent_key: agent.public_key(),
            validator_key: validator.public_key(),
        },
    );
    engine.prepare(K::task(&challenge))?; // e.g. the algorithm search, outside the timed window

    let id = hex::encode(random_bytes::<16>());
    let issued_at_ms = now_ms();
    let expires_at_ms = issued_at_ms.saturating_add(EXPIRY_MS.max((planned_ms * 10.0) as u64));
    let message = ChallengeMessage {
        id: id.clone(),
        challenge: challenge.clone(),
        issued_at_ms,
        expires_at_ms,
    };
    let mut to_agent = sealed_len(&validator, K::EXCHANGE.challenge().1, &message)?;
    let setting_up = Instant::now();
    let set_up = engine.set_up(K::task(&challenge))?;
    let set_up_ms = setting_up.elapsed().as_secs_f64() * 1e3;
    let device_set_up_ms = set_up.set_up_ms();

    // A kind that calibrates in its set-up is judged against what the set-up took.
    let expected_ms = K::expected_after_set_up(plan, Some(set_up_ms));
    let start: [u8; 32] = random_bytes();
    let mut from_agent = 0;
    if let Exchange::SetUp {
        ready_kind,
        start_kind,
        ..
    } = K::EXCHANGE
    {
        from_agent += sealed_len(
            &agent,
            ready_kind,
            &pog_proof::wire::MemoryReady {
                challenge_id: id.clone(),
                gpu_uuid: gpu_uuid.clone(),
                build_ms: set_up_ms,
            },
        )?;
        to_agent += sealed_len(
            &validator,
            start_kind,
            &pog_proof::wire::WalkMessage {
                challenge_id: id.clone(),
                walk_nonce: start,
                issued_at_ms,
                expires_at_ms,
            },
        )?;
    }
    let mut session = ValidatorSession::timed(
        id,
        K::checked(challenge.clone(), &start),
        (now_ms(), expires_at_ms),
        agent.public_key(),
        expected_ms,
        random_bytes(),
        samples,
    );
    let started = Instant::now();
    let proved = set_up.run(&start)?;
    let commit_ms = started.elapsed().as_secs_f64() * 1e3;
    let settled = settle(
        &mut session,
        proved.prover.as_ref(),
        commit_ms,
        (&agent, &validator),
    )?;
    Ok(Exchanged {
        challenge,
        start,
        set_up_ms,
        device_set_up_ms,
        proved,
        measured: Measured {
            expected_ms,
            commit_ms,
            open_ms: settled.open_ms,
            verify_ms: settled.verify_ms,
            bytes_to_agent: to_agent + settled.to_agent,
            bytes_from_agent: from_agent + settled.from_agent,
            outcome: settled.outcome,
        },
    })
}

/// What the exchange after a commitment showed: the verdict, the times to open and to
/// verify, and the signed bytes each way (commitment on).
struct Settled {
    outcome: Outcome,
    open_ms: f64,
    verify_ms: f64,
    to_agent: usize,
    from_agent: usize,
}

/// The exchange after the commitment, as the network validator runs it: the commitment into
/// the session (at the time it arrived), the open request, the openings, the verdict.
fn settle<C: SpotChecked>(
    session: &mut ValidatorSession<C>,
    prover: &dyn Prover,
    agent_ms: f64,
    (agent, validator): (&Identity, &Identity),
) -> Result<Settled, SelfCheckError> {
    let commitment = Commitment {
        challenge_id: session.id().to_string(),
        gpu_uuid: session.challenge().gpu_uuid().clone(),
        root: hex::encode(prover.root()),
        leaf_count: prover.leaf_count(),
        agent_ms,
    };
    let mut from_agent = sealed_len(agent, kind::COMMITMENT, &commitment)?;
    let request = session.on_commitment(&commitment, &agent.public_key(), now_ms(), 0.0)?;
    let to_agent = sealed_len(validator, kind::OPEN, &request)?;

    let opening = Instant::now();
    let opened = prover.open(&request.leaves)?;
    let openings = Openings::compact(session.id().to_string(), prover.leaf_count(), &opened)?;
    let open_ms = opening.elapsed().as_secs_f64() * 1e3;
    let frame = openings.seal(agent)?;
    from_agent += frame.len();

    // The validator's work from the frame as it arrives: its head's signature, the bytes'
    // digest, the multiproof and the spot checks.
    let verifying = Instant::now();
    let (openings, signer) =
        Openings::open(&frame).map_err(pog_proof::session::ProtocolError::Openings)?;
    let outcome = session.on_openings(&openings, &signer)?;
    let verify_ms = verifying.elapsed().as_secs_f64() * 1e3;
    Ok(Settled {
        outcome,
        open_ms,
        verify_ms,
        to_agent,
        from_agent,
    })
}

/// What one memory self-challenge showed.
#[derive(Debug, Clone, Serialize)]
pub struct MemorySelfCheck {
    /// The GPU challenged.
    pub gpu_uuid: GpuUuid,
    /// The challenge as issued.
    pub challenge: MemoryChallenge,
    /// The walk nonce, sent once the data set was built.
    #[serde(with = "hex::serde")]
    pub walk_nonce: [u8; 32],
    /// Bytes of the data set.
    pub dataset_bytes: u64,
    /// Bytes of item reads in the walk.
    pub read_bytes: u64,
    /// Wall time to build the data set (untimed by the bound, under a deadline).
    pub build_ms: f64,
    /// The rate the expected time assumes, and where it comes from.
    pub rate: MemoryRate,
    /// The device's times (build, walk, hashing, tree), when the engine reports them.
    pub device: Option<MemoryDeviceTimes>,
    /// What every kind of self-challenge measures: the timed phase against the bound, the
    /// spot checks' cost, the bytes each way and the verdict (flattened into this JSON object).
    #[serde(flatten)]
    pub measured: Measured,
}

/// The GPU's time by phase of a memory proof (CUDA events).
#[derive(Debug, Clone, Serialize)]
pub struct MemoryDeviceTimes {
    /// Building the data set, ms.
    pub build_ms: f64,
    /// The walk, ms.
    pub walk_ms: f64,
    /// Hashing the walker outputs into leaves, ms.
    pub hash_ms: f64,
    /// Building the Merkle tree over the leaves, ms.
    pub tree_ms: f64,
    /// Item bytes read per second in the walk kernel alone, GB/s.
    pub walk_gbs: f64,
}

/// Challenges the memory of GPU `gpu_uuid` at `gpu_bus_id` through `engine` as a validator
/// would under `plan`: build (untimed), walk nonce, walk and commitment (timed), spot checks.
pub fn run_memory(
    engine: &dyn ProverEngine,
    gpu: (&GpuUuid, &str),
    plan: &MemoryPlan,
    samples: u32,
) -> Result<MemorySelfCheck, SelfCheckError> {
    run_walk::<Memory>(engine, gpu, plan, samples)
}

/// Challenges this host's RAM through `engine` as a validator would under `plan` (sized from
/// the claim: `pog_proof::ram::plan`), addressed to `gpu` (the GPU the host's proofs ride
/// with): build in the host's memory (timed, calibrating the bound), walk nonce, walk and
/// commitment (timed), spot checks.
pub fn run_ram(
    engine: &dyn ProverEngine,
    gpu: (&GpuUuid, &str),
    plan: &MemoryPlan,
    samples: u32,
) -> Result<MemorySelfCheck, SelfCheckError> {
    run_walk::<HostRam>(engine, gpu, plan, samples)
}

/// A self-challenge of a kind that builds the memory proof's data set and walks it (the GPU's
/// memory, or the host's RAM).
fn run_walk<K: ProofKind<Challenge = MemoryChallenge, Plan = MemoryPlan>>(
    engine: &dyn ProverEngine,
    gpu: (&GpuUuid, &str),
    plan: &MemoryPlan,
    samples: u32,
) -> Result<MemorySelfCheck, SelfCheckError> {
    let x = exchange::<K>(engine, gpu, plan, samples)?;
    let c = &x.challenge;
    let read_bytes = c.reads() * pog_proof::memory::arx::ITEM_BYTES;
    let device = x.proved.timings.as_ref().and_then(|t| match t {
        DeviceTimings::Walk(t) => Some(MemoryDeviceTimes {
            build_ms: x.device_set_up_ms.unwrap_or(0.0),
            walk_ms: t.walk_ms,
            hash_ms: t.hash_ms,
            tree_ms: t.tree_ms,
            walk_gbs: read_bytes as f64 / (t.walk_ms.max(f64::MIN_POSITIVE) * 1e6),
        }),
        DeviceTimings::Gemm(_) => None,
    });
    Ok(MemorySelfCheck {
        gpu_uuid: c.to.gpu_uuid.clone(),
        dataset_bytes: c.dataset_bytes(),
        read_bytes,
        walk_nonce: x.start,
        build_ms: x.set_up_ms,
        rate: plan.rate.clone(),
        device,
        measured: x.measured,
        challenge: x.challenge,
    })
}

/// What one self-challenge of this host's cores showed.
#[derive(Debug, Clone, Serialize)]
pub struct CpuSelfCheck {
    /// The challenge as issued (lanes, steps, segments).
    pub challenge: CpuChallenge,
    /// The calibration lanes' wall time, half the claimed lanes at once (the bound is this
    /// times the full-load allowance).
    pub calibration_ms: f64,
    /// The timed lanes' throughput: lanes × steps over the time to commit, steps a second.
    pub steps_per_s: f64,
    /// One lane's rate at half load (the calibration's), steps a second.
    pub lane_steps_per_s: f64,
    /// What every kind of self-challenge measures (flattened).
    #[serde(flatten)]
    pub measured: Measured,
}

/// Challenges this host's cores through `engine` as a validator would under `plan`, the
/// challenge addressed to `gpu` (the GPU the host's proofs ride with).
pub fn run_cpu(
    engine: &dyn ProverEngine,
    gpu: (&GpuUuid, &str),
    plan: &CpuPlan,
    samples: u32,
) -> Result<CpuSelfCheck, SelfCheckError> {
    let x = exchange::<HostCpu>(engine, gpu, plan, samples)?;
    let c = &x.challenge;
    let per_s = |steps: u64, ms: f64| steps as f64 / (ms.max(f64::MIN_POSITIVE) / 1e3);
    Ok(CpuSelfCheck {
        calibration_ms: x.set_up_ms,
        steps_per_s: per_s(c.timed_steps(), x.measured.commit_ms),
        lane_steps_per_s: per_s(c.steps, x.set_up_ms),
        measured: x.measured,
        challenge: x.challenge,
    })
}

/// Bytes of `body` signed by `who` as a `kind` message, as it would travel.
fn sealed_len<T: Serialize>(
    who: &Identity,
    kind: &str,
    body: &T,
) -> Result<usize, pog_signed::WireError> {
    let envelope = who.seal(kind, body)?;
    serde_json::to_vec(&envelope)
        .map(|b| b.len())
        .map_err(pog_signed::WireError::Encode)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provers::CpuEngine;
    use pog_proof::prover::Behaviour;
    use pog_spec::Precision;

    fn planned(expected_ms: f64) -> Planned {
        Planned {
            precision: Precision::Int8,
            size: 32,
            batch: 2,
            leaf_elements: 64,
            expected_ms,
            lead: 1.0,
            proves_model: false,
        }
    }

    #[test]
    fn an_honest_engine_passes_and_a_cheating_one_does_not() {
        let honest = CpuEngine {
            behaviour: Behaviour::Honest,
        };
        let check = run(
            &honest,
            (&"GPU-1".parse().unwrap(), "00000000:00:06.0"),
            &planned(60_000.0),
            256,
        )
        .unwrap();
        assert!(
            check.measured.outcome.accepted,
            "{:?}",
            check.measured.outcome
        );
        assert_eq!(check.measured.outcome.checked, 256);
        assert!(
            check.device.is_none(),
            "the CPU engine reports no device times"
        );
        assert!(check.measured.bytes_from_agent > check.measured.bytes_to_agent);
        assert!(check.measured.time_ratio() < 1.0);
        assert_eq!(check.challenge.to.gpu_bus_id, "00000000:00:06.0");

        let junk = CpuEngine {
            behaviour: Behaviour::Junk(0.5),
        };
        let caught = run(
            &junk,
            (&"GPU-1".parse().unwrap(), "00000000:00:06.0"),
            &planned(60_000.0),
            256,
        )
        .unwrap();
        assert!(!caught.measured.outcome.accepted);
        assert!(caught.measured.outcome.wrong() > 0);

        // Honest but over the bound: rejected on time alone.
        let late = run(
            &honest,
            (&"GPU-1".parse().unwrap(), "00000000:00:06.0"),
            &planned(0.001),
            256,
        )
        .unwrap();
        assert!(!late.measured.outcome.accepted && late.measured.outcome.wrong() == 0);
    }

    /// The test shape's plan for `lanes` claimed cores.
    fn cpu_plan(lanes: u32) -> CpuPlan {
        let shape = pog_records::CpuPolicy::test_shape();
        CpuPlan {
            lanes,
            steps: shape.steps,
            segments: shape.segments,
        }
    }

    #[test]
    fn a_host_proves_its_cores_and_one_claiming_twice_its_cores_fails_on_time() {
        let gpu = (&"GPU-1".parse().unwrap(), "00000000:00:06.0");
        // One lane, one core: the timed phase takes as long as the calibration.
        let honest = CpuEngine {
            behaviour: Behaviour::Honest,
        };
        // A machine busy with other tests can slow one run's timed phase against its
        // calibration: an honest host passes in one of three.
        let check = (0..3)
            .map(|_| run_cpu(&honest, gpu, &cpu_plan(1), 48).unwrap())
            .find(|c| c.measured.outcome.accepted)
            .unwrap_or_else(|| run_cpu(&honest, gpu, &cpu_plan(1), 48).unwrap());
        assert!(
            check.measured.outcome.accepted,
            "{:?}",
            check.measured.outcome
        );
        assert_eq!(check.measured.outcome.checked, 48);
        assert!(check.steps_per_s > 0.0 && check.lane_steps_per_s > 0.0);

        // Four lanes claimed, one core to run them: the calibration's two lanes take two
        // lane times on it, the timed four take four, twice the calibration, past the limit
        // (1.5 × 1.1), though every segment checks out.
        let one_core = CpuEngine {
            behaviour: Behaviour::Threads(1),
        };
        let late = run_cpu(&one_core, gpu, &cpu_plan(4), 48).unwrap();
        let outcome = &late.measured.outcome;
        assert!(!outcome.accepted, "{outcome:?}");
        assert_eq!(outcome.wrong(), 0);
        assert!(outcome.time.ratio > 1.0 + pog_proof::timing::TIME_TOLERANCE);

        // Skipping work to finish sooner: caught by the spot checks.
        let skipping = CpuEngine {
            behaviour: Behaviour::Junk(0.3),
        };
        let caught = run_cpu(&skipping, gpu, &cpu_plan(1), 48).unwrap();
        assert!(!caught.measured.outcome.accepted);
        assert!(caught.measured.outcome.wrong() > 0);
    }
}
