//! The proof of GPU on this host's own GPUs: every genuine GPU of an inspected host
//! self-challenged at once under the validator's per-model plan ([`crate::selfcheck`]), as
//! `pog prove` and `pog check` run it.

use crate::provers::{CpuEngine, GpuEngine, ProverEngine, ProverError, MAX_CPU_WORK};
use crate::selfcheck::{self, CpuSelfCheck, MemorySelfCheck, SelfCheck, SelfCheckError};
use pog_facts::Origin;
use pog_inspect::{GpuVerdict, InspectReport};
use pog_proof::challenge::Addressee;
use pog_proof::cpu::CpuPlan;
use pog_proof::memory::{BadMemoryShape, MemoryPlan};
use pog_proof::prover::{Behaviour, CpuProver, Prover};
use pog_records::{MemoryPolicy, Planned, Policy, PolicyError};
use pog_signed::{BadGpuUuid, GpuUuid};
use pog_spec::{Precision, SpecDb};
use serde::{Serialize, Serializer};

/// Where the agent side computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProverChoice {
    /// The GPU when CUDA sees the GPUs (and the host is not simulated), else the CPU.
    Auto,
    /// The GPU, through CUDA.
    Gpu,
    /// Small challenges only (tests, hosts without CUDA).
    Cpu,
}

/// What to prove, and how: the validator's per-model plan, with overrides.
#[derive(Debug, Clone)]
pub struct ProveOptions {
    /// CUDA ordinals to prove; `None`: every genuine GPU.
    pub gpus: Option<Vec<usize>>,
    /// The precision instead of the one that separates the claimed model.
    pub precision: Option<Precision>,
    /// m = n = k of each GEMM instead of the plan's.
    pub size: Option<u64>,
    /// Independent GEMMs instead of the plan's.
    pub batch: Option<u32>,
    /// Output elements per Merkle leaf instead of the plan's (256 bytes of committed outputs).
    pub leaf_elements: Option<u32>,
    /// Spot checks opened per challenge (the memory proof takes at most its own count).
    pub samples: u32,
    /// The time bound instead of the claimed model's expected time.
    pub expected_ms: Option<f64>,
    /// Also compute the challenge on the CPU and compare roots (small challenges only).
    pub against_cpu: bool,
    /// Where the agent side computes.
    pub prover: ProverChoice,
    /// Which proofs to run.
    pub proofs: ProofKinds,
    /// The memory proof's shape overrides (small challenges for the CPU prover and tests).
    pub memory: MemoryOverrides,
}

/// Which of the two proofs run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProofKinds {
    /// The GEMM challenge: compute in the precision that separates the claimed model.
    pub gemm: bool,
    /// The memory challenge: capacity and bandwidth.
    pub memory: bool,
}

impl ProofKinds {
    /// Both proofs, as a validator's round runs them.
    pub const ALL: ProofKinds = ProofKinds {
        gemm: true,
        memory: true,
    };
}

/// Overrides of the memory proof's per-model plan; `None` keeps the plan's value.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MemoryOverrides {
    /// Items of 128 bytes in the data set.
    pub items: Option<u64>,
    /// Walkers, each one 16-byte output.
    pub walkers: Option<u64>,
    /// Random steps each walker takes.
    pub steps: Option<u32>,
}

impl Default for ProveOptions {
    /// The validator's per-model plan on every genuine GPU, on the GPU.
    fn default() -> Self {
        ProveOptions {
            gpus: None,
            precision: None,
            size: None,
            batch: None,
            leaf_elements: None,
            samples: 1024,
            expected_ms: None,
            against_cpu: false,
            prover: ProverChoice::Gpu,
            proofs: ProofKinds::ALL,
            memory: MemoryOverrides::default(),
        }
    }
}

/// Why the host's GPUs could not be proved at all.
#[derive(Debug, thiserror::Error)]
pub enum ProveError {
    /// The GPU prover was asked for on a simulated host.
    #[error("the GPU prover needs a real GPU, not a simulated host (`--prover cpu` proves small challenges on the CPU)")]
    SimulatedGpu,
    /// A GPU asked for did not come out genuine in the inspection.
    #[error("GPU {ordinal} ({uuid}) did not come out genuine: a validator would not challenge it (run `pog inspect`)")]
    NotGenuine {
        /// The GPU's CUDA ordinal.
        ordinal: usize,
        /// The GPU's UUID.
        uuid: String,
    },
    /// The host has no GPU to prove.
    #[error("no GPU to prove on this host")]
    NoGpu,
    /// The GPU prover failed to start.
    #[error("the GPU prover could not start: {0}")]
    Engine(#[source] ProverError),
    /// The proof of the host's cores could not run to a verdict.
    #[error("the proof of CPU could not run: {0}")]
    Cpu(#[source] SelfCheckError),
    /// The RAM claim is outside what the proof of RAM sizes for.
    #[error(transparent)]
    RamClaim(pog_proof::ram::BadRamClaim),
    /// The proof of the host's RAM could not run to a verdict.
    #[error("the proof of RAM could not run: {0}")]
    Ram(#[source] SelfCheckError),
    /// The proof of the host's storage could not run to a verdict.
    #[error("the proof of storage could not run")]
    Storage(#[source] crate::storage::StorageHostError),
}

/// The proof of this host's cores, as a validator would run it.
#[derive(Debug, Serialize)]
pub struct HostCpuProof {
    /// Lanes run at once: the hardware threads this process may run on (its CPU affinity and
    /// cgroup quota), which is what an agent registers as its host's cores.
    pub lanes: u32,
    /// The hardware threads `/proc/cpuinfo` lists (None on a simulated host): more than
    /// `lanes` in a container that is given part of its machine.
    pub host_threads: Option<u32>,
    /// The self-challenge.
    pub check: CpuSelfCheck,
}

impl HostCpuProof {
    /// Whether the proof was accepted.
    pub fn passed(&self) -> bool {
        self.check.measured.outcome.accepted
    }
}

/// Challenges this host's cores as a validator would: one lane per hardware thread this
/// process may run on (what an agent registers: a container given 16 of a machine's 192
/// threads claims and proves 16), addressed to the host's first GPU, spot-checked with the
/// validator's default samples.
pub fn prove_cpu(inspect: &InspectReport) -> Result<HostCpuProof, ProveError> {
    let simulated = matches!(inspect.inventory.origin, Origin::Simulated { .. });
    let host_threads = inspect
        .inventory
        .host
        .cpu
        .value()
        .map(|c| c.threads)
        .filter(|t| *t > 0 && !simulated);
    let lanes = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    let (uuid, bus) = anchor(inspect)?;
    let policy = pog_records::CpuPolicy::default();
    let plan = CpuPlan {
        lanes,
        steps: policy.steps,
        segments: policy.segments,
    };
    let engine = crate::provers::CpuEngine {
        behaviour: Behaviour::Honest,
    };
    let check = selfcheck::run_cpu(&engine, (&uuid, &bus), &plan, policy.samples)
        .map_err(ProveError::Cpu)?;
    Ok(HostCpuProof {
        lanes,
        host_threads,
        check,
    })
}

/// The GPU a host's proofs ride with: the inspection's first GPU with a UUID and a bus id.
fn anchor(inspect: &InspectReport) -> Result<(GpuUuid, String), ProveError> {
    let (uuid, bus) = inspect
        .inspection
        .gpus
        .iter()
        .find_map(|g| Some((g.uuid.as_ref()?, g.bus_id?)))
        .ok_or(ProveError::NoGpu)?;
    let uuid = uuid.parse().map_err(|_| ProveError::NoGpu)?;
    Ok((uuid, bus.to_string()))
}

/// The proof of this host's RAM, as a validator would run it.
#[derive(Debug, Serialize)]
pub struct HostRamProof {
    /// The RAM claimed, bytes.
    pub claim_bytes: u64,
    /// The self-challenge: the data set built, the walk against the bound its build
    /// calibrated, the spot checks.
    pub check: MemorySelfCheck,
}

impl HostRamProof {
    /// Whether the proof was accepted.
    pub fn passed(&self) -> bool {
        self.check.measured.outcome.accepted
    }
}

/// Proves `claim_bytes` of this host's RAM as a validator would: the data set sized from the
/// claim built in memory on every thread, walked at the validator's default walk against the
/// bound its build calibrates, addressed to the host's first GPU, spot-checked with the
/// validator's default samples.
pub fn prove_ram(inspect: &InspectReport, claim_bytes: u64) -> Result<HostRamProof, ProveError> {
    let (uuid, bus) = anchor(inspect)?;
    let policy = pog_records::RamPolicy::default();
    let plan = pog_proof::ram::plan(claim_bytes, policy.walkers, pog_proof::ram::floor_rate())
        .map_err(ProveError::RamClaim)?;
    let engine = crate::provers::CpuEngine {
        behaviour: Behaviour::Honest,
    };
    let check = selfcheck::run_ram(&engine, (&uuid, &bus), &plan, policy.samples)
        .map_err(ProveError::Ram)?;
    Ok(HostRamProof { claim_bytes, check })
}

/// Proves the storage holding `dir` as a validator would: a data set of `bytes` (whole
/// items) of `class`, bound to the host's first GPU, kept in `dir` between runs, audited,
/// walked and spot-checked (`crate::storage::prove`).
pub fn prove_storage(
    inspect: &InspectReport,
    dir: &std::path::Path,
    bytes: u64,
    class: pog_proof::storage::DeviceClass,
    audit_samples: u32,
) -> Result<crate::storage::HostStorageProof, ProveError> {
    let (uuid, bus) = anchor(inspect)?;
    crate::storage::prove(&crate::storage::StorageProveOptions {
        dir: dir.to_path_buf(),
        bytes,
        class,
        to: pog_proof::challenge::Addressee::shape_only(&uuid, &bus),
        audit_samples,
    })
    .map_err(ProveError::Storage)
}

/// Why one GPU's self-challenge could not run to a verdict. The report shows it as its
/// message ([`GpuProof::error`], [`GpuProof::memory_error`]).
#[derive(Debug, thiserror::Error)]
pub enum GpuProofError {
    /// The device's UUID is not one a record can name (empty, too long, not printable ASCII).
    #[error(transparent)]
    Uuid(#[from] BadGpuUuid),
    /// The claimed model is not in the spec database.
    #[error("model {0:?} is not in the database")]
    UnknownModel(String),
    /// The validator's policy plans no GEMM challenge for the model.
    #[error(transparent)]
    Plan(#[from] PolicyError),
    /// The spec database has no rate in the plan's precision to time the proof by.
    #[error("{model} has no {precision} figure to time a proof by")]
    NoRate {
        /// The claimed model.
        model: String,
        /// The plan's precision.
        precision: Precision,
    },
    /// The spec database has no memory figures for the model.
    #[error("{0} has no memory figures to plan a memory proof by")]
    NoMemoryFigures(String),
    /// The memory challenge, with the overrides, has a shape no prover should attempt.
    #[error(transparent)]
    MemoryShape(#[from] BadMemoryShape),
    /// The prover refuses the challenge's work (its reason).
    #[error("{0}")]
    Refused(String),
    /// The self-challenge failed before its verdict.
    #[error(transparent)]
    Run(#[from] SelfCheckError),
    /// The thread running the GPU's self-challenges panicked.
    #[error("the self-challenge thread panicked")]
    Panicked,
}

/// An error field of the report, as its message (null when there is none).
fn as_message<S: Serializer>(error: &Option<GpuProofError>, s: S) -> Result<S::Ok, S::Error> {
    error.as_ref().map(ToString::to_string).serialize(s)
}

/// One GPU's self-challenges, or why they could not run.
#[derive(Debug, Serialize)]
pub struct GpuProof {
    /// The GPU's CUDA ordinal.
    pub ordinal: usize,
    /// The GPU's claimed model.
    pub model: String,
    /// The GEMM challenge (None when not run or failed to run: see `error`).
    pub check: Option<SelfCheck>,
    /// The memory challenge (None when not run or failed to run: see `memory_error`).
    pub memory: Option<MemorySelfCheck>,
    /// Why the memory challenge could not run, if it could not.
    #[serde(serialize_with = "as_message")]
    pub memory_error: Option<GpuProofError>,
    /// Why the memory challenge is not the claimed model's plan, when pog sized it down
    /// itself (the CPU prover without `--items`, `--walkers` or `--steps`).
    pub memory_note: Option<String>,
    /// With `--against-cpu`: whether the CPU prover's root equals the GPU's (required for
    /// INT8, which is exact; float outputs may differ in a last bit and are judged by the
    /// spot checks alone).
    pub cpu_root_matches: Option<bool>,
    /// Why the GEMM challenge could not run, if it could not.
    #[serde(serialize_with = "as_message")]
    pub error: Option<GpuProofError>,
}

impl GpuProof {
    /// Every proof that ran accepted (a proof that could not run fails), and (INT8) the same
    /// root as the CPU's where that was checked.
    pub fn passed(&self) -> bool {
        let exact_mismatch = self.cpu_root_matches == Some(false)
            && self.check.as_ref().map(|c| c.precision) == Some(Precision::Int8);
        let gemm = match (&self.check, &self.error) {
            (None, None) => true, // not asked for
            (Some(c), None) => c.measured.outcome.accepted && !exact_mismatch,
            (_, Some(_)) => false,
        };
        let memory = match (&self.memory, &self.memory_error) {
            (None, None) => true,
            (Some(m), None) => m.measured.outcome.accepted,
            (_, Some(_)) => false,
        };
        gemm && memory
    }
}

/// Self-challenges every genuine GPU of the inspected host (or those `options.gpus` names),
/// all at once, as a validator challenges an agent's GPUs.
pub fn prove(inspect: &InspectReport, options: &ProveOptions) -> Result<Vec<GpuProof>, ProveError> {
    let simulated = matches!(inspect.inventory.origin, Origin::Simulated { .. });
    let cuda = inspect.inventory.cuda.value();
    let on_gpu = match options.prover {
        ProverChoice::Cpu => false,
        ProverChoice::Gpu => true,
        ProverChoice::Auto => !simulated && cuda.is_some(),
    };
    if on_gpu && simulated {
        return Err(ProveError::SimulatedGpu);
    }
    let mut targets = Vec::new(); // (ordinal, uuid, model, bus id)
    for (position, g) in inspect.inspection.gpus.iter().enumerate() {
        let (Some(uuid), Some(model), Some(bus)) = (&g.uuid, &g.model, g.bus_id) else {
            continue;
        };
        let device = cuda.and_then(|c| {
            c.devices
                .iter()
                .find(|d| d.pci_bus_id.value() == Some(&bus))
        });
        let ordinal = match device {
            Some(d) => d.ordinal as usize,
            None if on_gpu => continue, // CUDA does not see it: nothing to run it on
            None => position,
        };
        if options
            .gpus
            .as_ref()
            .is_some_and(|only| !only.contains(&ordinal))
        {
            continue;
        }
        if g.verdict != GpuVerdict::Genuine {
            return Err(ProveError::NotGenuine {
                ordinal,
                uuid: uuid.clone(),
            });
        }
        targets.push((ordinal, uuid.clone(), model.clone(), bus.to_string()));
    }
    if targets.is_empty() {
        return Err(ProveError::NoGpu);
    }
    let engine: Box<dyn ProverEngine> = if on_gpu {
        let ordinals: Vec<_> = targets
            .iter()
            .map(|(ordinal, uuid, _, _)| (uuid.clone(), *ordinal))
            .collect();
        Box::new(GpuEngine::start(&ordinals).map_err(ProveError::Engine)?)
    } else {
        Box::new(CpuEngine {
            behaviour: Behaviour::Honest,
        })
    };
    let engine = engine.as_ref();
    let proofs = std::thread::scope(|scope| {
        let running: Vec<_> = targets
            .iter()
            .map(|(ordinal, uuid, model, bus)| {
                scope.spawn(move || prove_one(engine, !on_gpu, options, *ordinal, uuid, model, bus))
            })
            .collect();
        running
            .into_iter()
            .zip(&targets)
            .map(|(r, (ordinal, _, model, _))| {
                r.join().unwrap_or_else(|_| GpuProof {
                    ordinal: *ordinal,
                    model: model.clone(),
                    check: None,
                    memory: None,
                    memory_error: None,
                    memory_note: None,
                    cpu_root_matches: None,
                    error: Some(GpuProofError::Panicked),
                })
            })
            .collect()
    });
    Ok(proofs)
}

/// One GPU's self-challenges: the GEMM challenge, then the memory challenge (one after the
/// other, as a validator's round asks them: the data set fills the GPU's memory). `on_cpu`:
/// the engine is the CPU prover.
fn prove_one(
    engine: &dyn ProverEngine,
    on_cpu: bool,
    options: &ProveOptions,
    ordinal: usize,
    uuid: &str,
    model: &str,
    bus: &str,
) -> GpuProof {
    // The device's UUID as a record would name it: one that is not (empty, too long, not
    // printable ASCII) fails every proof of this GPU with the reason.
    let named = GpuUuid::new(uuid);
    let (check, error) = if options.proofs.gemm {
        split(
            named
                .clone()
                .map_err(GpuProofError::from)
                .and_then(|uuid| plan(options, model).map(|p| (uuid, p)))
                .and_then(|(uuid, planned)| {
                    let uuid = &uuid;
                    let challenge = planned.challenge([0; 32], Addressee::shape_only(uuid, bus));
                    if let Some(reason) = engine.refuses(pog_proof::task::Task::Gemm(&challenge)) {
                        return Err(GpuProofError::Refused(reason));
                    }
                    Ok(selfcheck::run(
                        engine,
                        (uuid, bus),
                        &planned,
                        options.samples,
                    )?)
                }),
        )
    } else {
        (None, None)
    };
    let mut memory_note = None;
    let (memory, memory_error) = if options.proofs.memory {
        split(
            named
                .map_err(GpuProofError::from)
                .and_then(|uuid| memory_plan(options, model, on_cpu).map(|p| (uuid, p)))
                .and_then(|(uuid, (plan, note))| {
                    let uuid = &uuid;
                    memory_note = note;
                    let challenge = plan.challenge([0; 32], Addressee::shape_only(uuid, bus));
                    challenge.check_shape()?;
                    if let Some(reason) = engine.refuses(pog_proof::task::Task::Memory(&challenge))
                    {
                        return Err(GpuProofError::Refused(reason));
                    }
                    Ok(selfcheck::run_memory(
                        engine,
                        (uuid, bus),
                        &plan,
                        options.samples.min(MEMORY_SAMPLES),
                    )?)
                }),
        )
    } else {
        (None, None)
    };
    let cpu_root_matches = options
        .against_cpu
        .then(|| check.as_ref().map(against_cpu))
        .flatten()
        .flatten();
    GpuProof {
        ordinal,
        model: model.to_string(),
        check,
        memory,
        memory_error,
        memory_note,
        cpu_root_matches,
        error,
    }
}

/// Spot checks of a memory challenge: enough for its soundness target
/// (`pog_proof::memory::SAMPLES`); `--samples` can only lower it.
const MEMORY_SAMPLES: u32 = pog_proof::memory::SAMPLES;

/// A result as (value, error) for the report's two fields.
fn split<T>(result: Result<T, GpuProofError>) -> (Option<T>, Option<GpuProofError>) {
    match result {
        Ok(value) => (Some(value), None),
        Err(e) => (None, Some(e)),
    }
}

/// The memory proof's per-model plan for `model` with the options' overrides; the bound is
/// the reads at the model's expected rate unless `expected_ms` says otherwise.
///
/// A per-model plan fills the claimed GPU's memory, far beyond what the CPU prover holds or
/// walks in time, so on the CPU (`on_cpu`) a dimension not given takes the validator's
/// `--test-plan` shape instead ([`MemoryPolicy::test_shape`]): the tour and the tests then
/// exercise the whole protocol, and the note returned says that the challenge was sized down
/// and proves no model. A dimension given explicitly is kept as it is.
fn memory_plan(
    options: &ProveOptions,
    model: &str,
    on_cpu: bool,
) -> Result<(MemoryPlan, Option<String>), GpuProofError> {
    let spec = SpecDb::embedded()
        .by_model(model)
        .ok_or_else(|| GpuProofError::UnknownModel(model.to_string()))?;
    let mut plan = pog_proof::memory::plan(spec, pog_proof::memory::WALK_SECONDS, None)
        .ok_or_else(|| GpuProofError::NoMemoryFigures(model.to_string()))?;
    let o = options.memory;
    let planned = (plan.items, plan.walkers, plan.steps);
    if on_cpu {
        let cpu = MemoryPolicy::test_shape(0.0);
        plan.items = cpu.items;
        plan.walkers = cpu.walkers;
        plan.steps = cpu.steps;
    }
    plan.items = o.items.map_or(plan.items, |items| {
        (items / u64::from(plan.span)).max(1) * u64::from(plan.span)
    });
    plan.walkers = o.walkers.unwrap_or(plan.walkers);
    plan.steps = o.steps.unwrap_or(plan.steps);
    let sized_down = on_cpu && (o.items.is_none() || o.walkers.is_none() || o.steps.is_none());
    let note = sized_down.then(|| {
        format!(
            "memory challenge sized for the CPU prover like a validator's --test-plan \
             ({} items, {} walkers of {} steps; {model}'s plan is {} items, {} walkers of {} \
             steps): it exercises the protocol and proves no model",
            plan.items, plan.walkers, plan.steps, planned.0, planned.1, planned.2
        )
    });
    let reads = plan
        .walkers
        .saturating_mul(u64::from(plan.steps) * u64::from(plan.span));
    plan.expected_ms = options.expected_ms.unwrap_or(
        (reads * pog_proof::memory::arx::ITEM_BYTES) as f64 / (plan.rate.gbs * 1e9) * 1e3,
    );
    Ok((plan, note))
}

/// The validator's per-model plan for `model`, with the options' overrides; the time bound is
/// the model's expected rate for that precision and size unless `expected_ms` says otherwise.
fn plan(options: &ProveOptions, model: &str) -> Result<Planned, GpuProofError> {
    let spec = SpecDb::embedded()
        .by_model(model)
        .ok_or_else(|| GpuProofError::UnknownModel(model.to_string()))?;
    let base = Policy {
        precision: options.precision,
        ..Policy::per_model_default()
    }
    .plan_for(spec)?;
    let precision = base.precision;
    let size = options.size.unwrap_or(base.size);
    let tflops = pog_proof::params::expected_tflops(spec, precision, size).ok_or_else(|| {
        GpuProofError::NoRate {
            model: model.to_string(),
            precision,
        }
    })?;
    let rate = tflops * 1e9; // floating-point operations per ms
    let batch = options.batch.unwrap_or(base.batch);
    Ok(Planned {
        precision,
        size,
        batch,
        leaf_elements: options.leaf_elements.unwrap_or(base.leaf_elements),
        expected_ms: options.expected_ms.unwrap_or(work(batch, size) / rate),
        lead: base.lead,
        // A shape or bound overridden by hand is not the validator's plan.
        proves_model: base.proves_model
            && options.size.is_none()
            && options.batch.is_none()
            && options.expected_ms.is_none(),
    })
}

/// Floating-point operations of a batch of square products.
fn work(batch: u32, size: u64) -> f64 {
    f64::from(batch) * 2.0 * (size as f64).powi(3)
}

/// Recomputes the challenge on the CPU and compares roots; `None` when it is too large for
/// the CPU prover.
fn against_cpu(check: &SelfCheck) -> Option<bool> {
    let c = &check.challenge;
    if work(c.batch, c.size) / 2.0 > MAX_CPU_WORK {
        return None;
    }
    let cpu = CpuProver::compute(c, Behaviour::Honest);
    Some(hex::encode(cpu.root()) == check.measured.outcome.root)
}
