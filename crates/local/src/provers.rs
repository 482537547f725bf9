//! Where an agent's proofs are computed: the [`ProverEngine`] seam, with the CPU engine (CI's
//! end-to-end runs and small challenges) and the GPU engine (one worker thread per GPU, which
//! owns that GPU's CUDA context and every commitment kept on it for opening).

use pog_device::gpu::{
    CommitTimings, Committed, Dataset, DatasetSpec, Gpu, Key, ProductBatch, WalkSpec, WalkTimings,
    Walked,
};
use pog_facts::GpuError;
use pog_proof::cpu::{CpuBehaviour, CpuCalibrated, CpuChallenge};
use pog_proof::memory::{CpuDataset, MemoryBehaviour, MemoryChallenge};
use pog_proof::prover::{Behaviour, CpuProver, OpenError, Opening, Prover};
use pog_proof::task::Task;
use pog_proof::Challenge;
use std::collections::HashMap;
use std::sync::mpsc;
use std::sync::Arc;

/// The most multiply-adds the CPU engine takes on (batch · size³): about a minute of one core.
pub const MAX_CPU_WORK: f64 = 2e10;

/// The largest memory challenge the CPU engine takes on: 2²¹ items (256 MiB), 2²⁴ reads
/// (seconds of one core) and 2²⁰ walkers (16 MiB of outputs, as much again in leaves).
pub const MAX_CPU_ITEMS: u64 = 1 << 21;
/// See [`MAX_CPU_ITEMS`].
pub const MAX_CPU_READS: u64 = 1 << 24;
/// See [`MAX_CPU_ITEMS`]: without it, 2²⁴ walkers of one read each would hold 256 MiB of
/// outputs and as much in leaves.
pub const MAX_CPU_WALKERS: u64 = 1 << 20;

/// The most steps per lane an agent runs for a CPU challenge: about two seconds of a current
/// core (the default plan asks 2²⁵), so a validator cannot keep the host's cores busy for
/// hours with one challenge.
pub const MAX_CPU_LANE_STEPS: u64 = 1 << 28;

/// Commitments a GPU keeps for opening at once; the oldest is dropped beyond this (a validator
/// opens within seconds of the commitment).
const KEPT_COMMITMENTS: usize = 4;

/// Why an engine could not prove or open.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProverError {
    /// The GPU failed (CUDA, cuBLASLt, memory), with the device's own error.
    #[error("GPU {ordinal}: {source}")]
    Gpu {
        /// The GPU's CUDA ordinal.
        ordinal: usize,
        /// The device's error.
        source: GpuError,
    },
    /// No worker serves this GPU (the agent does not have it, or CUDA does not see it).
    #[error("no GPU worker for {0}")]
    UnknownGpu(String),
    /// The worker thread is gone (it could not start, or it panicked).
    #[error("the worker of GPU {ordinal} {what}")]
    Worker {
        /// The GPU's CUDA ordinal.
        ordinal: usize,
        /// What became of the worker, as the message's end ("could not be started").
        what: &'static str,
    },
    /// The host's memory would not hold a data set built on the CPU.
    #[error("the host's memory would not hold a data set of {bytes} bytes: {reason}")]
    Memory {
        /// Bytes of the data set asked for.
        bytes: u64,
        /// The allocator's refusal.
        reason: String,
    },
    /// The commitment was dropped to make room for newer ones before it was opened.
    #[error(
        "the commitment is no longer kept on the GPU (more than {KEPT_COMMITMENTS} newer ones)"
    )]
    Evicted,
}

/// A challenge computed and committed: its prover, ready to open leaves, and where the
/// device's time went when the engine knows (the GPU engine does).
pub struct Proved {
    /// The prover holding what was committed, to open the spot-checked leaves.
    pub prover: Arc<dyn Prover>,
    /// Where the device's time went, when the engine reports it.
    pub timings: Option<DeviceTimings>,
    /// The GEMM algorithm the products ran with, when a library chose one.
    pub algorithm: Option<String>,
}

/// Where a device's time went in a timed phase, by kind of task (CUDA events).
#[derive(Debug, Clone)]
pub enum DeviceTimings {
    /// The GEMM proof's products, hashing and tree.
    Gemm(CommitTimings),
    /// The memory proof's walk, hashing and tree.
    Walk(WalkTimings),
}

/// Computes challenges of every kind ([`Task`]), in two phases: an untimed set-up
/// ([`ProverEngine::set_up`]), then the timed phase ([`SetUp::run`]). A kind timed from its
/// challenge sets up nothing; the memory proof builds its data set.
pub trait ProverEngine: Send + Sync {
    /// What it is, for logs ("CPU", "GPU").
    fn name(&self) -> &'static str;
    /// Why this engine cannot take `task`, if it cannot (checked before any work; the GPU
    /// engine also checks the GPU's free memory when it builds a data set).
    fn refuses(&self, task: Task<'_>) -> Option<String>;
    /// Gets ready for tasks shaped like `task`, outside any timed window and before any
    /// set-up (the GPU engine chooses its GEMM algorithm); returns what it chose, if anything.
    fn prepare(&self, _task: Task<'_>) -> Result<Option<String>, ProverError> {
        Ok(None)
    }
    /// The untimed phase of `task`.
    fn set_up(&self, task: Task<'_>) -> Result<Box<dyn SetUp>, ProverError>;
}

/// A task set up and waiting for the nonce that starts its timed phase.
pub trait SetUp: Send + Sync {
    /// The device's time to set it up, when the engine knows.
    fn set_up_ms(&self) -> Option<f64>;
    /// The timed phase from `start` (ignored by a task timed from its challenge): computes
    /// and commits; what was set up is released.
    fn run(self: Box<Self>, start: &[u8; 32]) -> Result<Proved, ProverError>;
}

/// A GEMM challenge waiting to be computed: nothing to set up.
struct GemmOn<E> {
    engine: E,
    challenge: Challenge,
}

/// A data set the CPU built.
struct CpuBuilt {
    dataset: CpuDataset,
    behaviour: MemoryBehaviour,
}

impl SetUp for CpuBuilt {
    fn set_up_ms(&self) -> Option<f64> {
        None
    }

    fn run(self: Box<Self>, walk_nonce: &[u8; 32]) -> Result<Proved, ProverError> {
        let CpuBuilt { dataset, behaviour } = *self;
        let prover = dataset.walk(walk_nonce, behaviour);
        // Handing a data set of many GiB back to the system takes most of a second (0.7 s for
        // 14 GiB on an H100 host: the proof of RAM's honest walk then read 15× its bound): it
        // is let go on a thread of its own, off the validator's clock.
        // (Where no thread can be had, the closure and the data set are dropped here.)
        let _ = std::thread::Builder::new()
            .name("pog-free-dataset".into())
            .spawn(move || drop(dataset));
        Ok(Proved {
            prover: Arc::new(prover),
            timings: None,
            algorithm: None,
        })
    }
}

/// Proves on the CPU, honestly or (for the attack tests) not.
#[derive(Debug, Clone, Copy)]
pub struct CpuEngine {
    /// Honest, or the cheat an attack test plays.
    pub behaviour: Behaviour,
}

impl SetUp for GemmOn<CpuEngine> {
    fn set_up_ms(&self) -> Option<f64> {
        None
    }

    fn run(self: Box<Self>, _start: &[u8; 32]) -> Result<Proved, ProverError> {
        Ok(Proved {
            prover: Arc::new(CpuProver::compute(&self.challenge, self.engine.behaviour)),
            timings: None,
            algorithm: None,
        })
    }
}

impl ProverEngine for CpuEngine {
    fn name(&self) -> &'static str {
        "CPU"
    }

    fn refuses(&self, task: Task<'_>) -> Option<String> {
        match task {
            Task::Gemm(c) => {
                let work = f64::from(c.batch) * (c.size as f64).powi(3);
                (work > MAX_CPU_WORK || c.leaf_elements == 0).then(|| {
                    format!(
                        "challenge of {work:.1e} multiply-adds (leaves of {}) is beyond this \
                         agent's CPU prover",
                        c.leaf_elements
                    )
                })
            }
            Task::Memory(c) => {
                let beyond = c.items > MAX_CPU_ITEMS
                    || c.reads() > MAX_CPU_READS
                    || c.walkers > MAX_CPU_WALKERS;
                beyond.then(|| {
                    format!(
                        "a memory challenge of {} items, {} reads and {} walkers is beyond this \
                         agent's CPU prover (at most {MAX_CPU_ITEMS}, {MAX_CPU_READS} and \
                         {MAX_CPU_WALKERS})",
                        c.items,
                        c.reads(),
                        c.walkers
                    )
                })
            }
            Task::Cpu(c) => cpu_refusal(c),
            // Sized from the host's claim, which the agent holds a challenge to.
            Task::Ram(_) => None,
        }
    }

    fn set_up(&self, task: Task<'_>) -> Result<Box<dyn SetUp>, ProverError> {
        Ok(match task {
            Task::Cpu(c) => calibrate(c, self.behaviour),
            Task::Gemm(c) => Box::new(GemmOn {
                engine: *self,
                challenge: c.clone(),
            }),
            Task::Memory(c) | Task::Ram(c) => build_on_cpu(c, self.behaviour)?,
        })
    }
}

/// Builds memory challenge `c`'s data set on this host's CPU, to be walked as `behaviour`
/// says: a share of it only where it holds a share ([`Behaviour::Holds`]), junk walkers where
/// it skips.
fn build_on_cpu(c: &MemoryChallenge, behaviour: Behaviour) -> Result<Box<dyn SetUp>, ProverError> {
    let share = match behaviour {
        Behaviour::Holds(share) => share,
        _ => 1.0,
    };
    let dataset = CpuDataset::build_holding(c, share).map_err(|e| ProverError::Memory {
        bytes: c.dataset_bytes(),
        reason: e.to_string(),
    })?;
    Ok(Box::new(CpuBuilt {
        dataset,
        behaviour: match behaviour {
            Behaviour::Junk(f) => MemoryBehaviour::Junk(f),
            _ => MemoryBehaviour::Honest,
        },
    }))
}

/// Why an agent will not run CPU challenge `c`, if it will not: a shape beyond the protocol,
/// lanes longer than [`MAX_CPU_LANE_STEPS`], or more lanes than this host has hardware
/// threads (an honest agent claims no more, and a validator must not make it run more).
pub fn cpu_refusal(c: &CpuChallenge) -> Option<String> {
    if let Err(e) = c.validate() {
        return Some(e.to_string());
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if c.steps > MAX_CPU_LANE_STEPS || c.lanes as usize > threads {
        return Some(format!(
            "a CPU challenge of {} lanes of {} steps is beyond this host ({threads} hardware \
             threads, at most {MAX_CPU_LANE_STEPS} steps a lane)",
            c.lanes, c.steps
        ));
    }
    None
}

/// A CPU challenge's calibration lanes, run now (the set-up), waiting for its timed lanes.
struct CpuCalibration {
    calibrated: CpuCalibrated,
    ms: f64,
}

/// Runs `c`'s calibration lanes at once, then the timed lanes to follow, as `behaviour` says.
fn calibrate(c: &CpuChallenge, behaviour: Behaviour) -> Box<dyn SetUp> {
    let started = std::time::Instant::now();
    let behaviour = match behaviour {
        Behaviour::Threads(n) => CpuBehaviour::Threads(n),
        Behaviour::Junk(f) => CpuBehaviour::Skip(f),
        _ => CpuBehaviour::Honest,
    };
    let calibrated = CpuCalibrated::run(c, behaviour);
    Box::new(CpuCalibration {
        calibrated,
        ms: started.elapsed().as_secs_f64() * 1e3,
    })
}

impl SetUp for CpuCalibration {
    fn set_up_ms(&self) -> Option<f64> {
        Some(self.ms)
    }

    fn run(self: Box<Self>, start: &[u8; 32]) -> Result<Proved, ProverError> {
        Ok(Proved {
            prover: Arc::new(self.calibrated.run_timed(start)),
            timings: None,
            algorithm: None,
        })
    }
}

/// What a GPU worker is asked to do.
enum Job {
    Prepare {
        challenge: Challenge,
        reply: mpsc::Sender<Result<String, ProverError>>,
    },
    Commit {
        challenge: Challenge,
        reply: mpsc::Sender<Result<KeptReport, ProverError>>,
    },
    Open {
        id: u64,
        leaves: Vec<u64>,
        reply: mpsc::Sender<Result<Vec<Opening>, ProverError>>,
    },
    Release {
        id: u64,
    },
    BuildMemory {
        challenge: MemoryChallenge,
        reply: mpsc::Sender<Result<(u64, f64), ProverError>>,
    },
    Walk {
        dataset: u64,
        walk: WalkSpec,
        reply: mpsc::Sender<Result<KeptReport, ProverError>>,
    },
    ReleaseDataset {
        id: u64,
    },
    /// Frees everything the worker holds and ends it (the engine is being dropped).
    Stop,
}

/// What a GPU keeps for opening: a GEMM commitment or a memory walk.
enum Kept {
    Products(Committed),
    Walk(Walked),
}

/// A commitment a GPU keeps for opening (products or a walk).
#[derive(Debug, Clone)]
pub struct KeptReport {
    id: u64,
    /// The commitment's Merkle root.
    pub root: pog_merkle::Hash,
    /// Leaves under the root.
    pub leaf_count: u64,
    /// Where the timed phase's device time went (CUDA events).
    pub timings: DeviceTimings,
    /// The GEMM algorithm cuBLASLt chose, for products.
    pub algorithm: Option<String>,
}

/// The walk a memory challenge asks for, under `key`.
fn walk_spec(c: &MemoryChallenge, key: [u32; 8]) -> WalkSpec {
    WalkSpec {
        key: Key(key),
        walkers: c.walkers,
        steps: c.steps,
        span: c.span,
        walkers_per_leaf: c.walkers_per_leaf,
    }
}

/// The batch of products a challenge asks for.
fn batch_of(c: &Challenge) -> ProductBatch {
    ProductBatch {
        precision: c.precision,
        size: c.size,
        leaf_elements: c.leaf_elements,
        seeds: (0..c.batch).map(|g| c.seeds(g)).collect(),
    }
}

/// The thread that owns one GPU: opens it, then serves jobs until every sender is gone.
fn gpu_worker(
    ordinal: usize,
    jobs: mpsc::Receiver<Job>,
    ready: mpsc::Sender<Result<(), ProverError>>,
) {
    let failed = |source| ProverError::Gpu { ordinal, source };
    let gpu = match Gpu::open(ordinal) {
        Ok(gpu) => {
            let _ = ready.send(Ok(()));
            gpu
        }
        Err(e) => {
            let _ = ready.send(Err(failed(e)));
            return;
        }
    };
    let mut kept: Vec<(u64, Kept)> = Vec::new();
    // Built data sets waiting for their walk: at most one fits (each fills 90 % of memory).
    let mut datasets: Vec<(u64, Dataset)> = Vec::new();
    let mut next_id = 0u64;
    for job in jobs {
        match job {
            Job::Stop => break,
            Job::Prepare { challenge, reply } => {
                let _ = reply.send(
                    gpu.prepare_proof(challenge.precision, challenge.size)
                        .map_err(failed),
                );
            }
            Job::Commit { challenge, reply } => {
                // Make room first: the oldest tree's device memory is free for the new one (if
                // this commit then fails, that oldest commitment is gone all the same; the
                // validator opens the newest ones).
                if kept.len() >= KEPT_COMMITMENTS {
                    kept.remove(0);
                }
                let result = gpu.commit(&batch_of(&challenge)).map(|committed| {
                    next_id += 1;
                    let report = KeptReport {
                        id: next_id,
                        root: committed.root,
                        leaf_count: committed.leaf_count(),
                        timings: DeviceTimings::Gemm(committed.timings),
                        algorithm: Some(committed.algorithm.clone()),
                    };
                    kept.push((next_id, Kept::Products(committed)));
                    report
                });
                let _ = reply.send(result.map_err(failed));
            }
            Job::Open { id, leaves, reply } => {
                let result = match kept.iter().find(|(k, _)| *k == id) {
                    None => Err(ProverError::Evicted),
                    Some((_, kept)) => match kept {
                        Kept::Products(committed) => gpu.open_leaves(committed, &leaves),
                        Kept::Walk(walked) => gpu.open_walk(walked, &leaves),
                    }
                    .map(|openings| {
                        openings
                            .into_iter()
                            .map(|o| Opening {
                                leaf: o.leaf,
                                bytes: o.bytes,
                                proof: o.proof,
                            })
                            .collect()
                    })
                    .map_err(failed),
                };
                let _ = reply.send(result);
            }
            Job::Release { id } => kept.retain(|(k, _)| *k != id),
            Job::BuildMemory { challenge, reply } => {
                datasets.clear(); // an older data set still waiting is given up for this one
                                  // GEMM commitments not yet opened give their kept outputs back (their
                                  // openings recompute instead): the data set needs the memory.
                for (_, k) in kept.iter_mut() {
                    if let Kept::Products(committed) = k {
                        committed.release_outputs();
                    }
                }
                let spec = DatasetSpec {
                    key: Key(challenge.dataset_key()),
                    items: challenge.items,
                    rounds: challenge.item_rounds,
                };
                let result = gpu
                    .check_memory_proof_fits(&spec, &walk_spec(&challenge, [0; 8]))
                    .and_then(|()| gpu.build_dataset(spec))
                    .and_then(|mut dataset| {
                        gpu.reserve_walk(
                            &mut dataset,
                            challenge.walkers,
                            challenge.walkers_per_leaf,
                        )?;
                        next_id += 1;
                        let build_ms = dataset.build_ms;
                        datasets.push((next_id, dataset));
                        Ok((next_id, build_ms))
                    });
                let _ = reply.send(result.map_err(failed));
            }
            Job::Walk {
                dataset,
                walk,
                reply,
            } => {
                let Some(at) = datasets.iter().position(|(k, _)| *k == dataset) else {
                    let _ = reply.send(Err(ProverError::Evicted));
                    continue;
                };
                let (_, mut built) = datasets.remove(at);
                if kept.len() >= KEPT_COMMITMENTS {
                    kept.remove(0);
                }
                let result = gpu.walk(&mut built, walk).map(|walked| {
                    next_id += 1;
                    let report = KeptReport {
                        id: next_id,
                        root: walked.root,
                        leaf_count: walked.leaf_count(),
                        timings: DeviceTimings::Walk(walked.timings),
                        algorithm: None,
                    };
                    kept.push((next_id, Kept::Walk(walked)));
                    report
                });
                let _ = reply.send(result.map_err(failed));
                drop(built); // after the commitment is on its way
            }
            Job::ReleaseDataset { id } => datasets.retain(|(k, _)| *k != id),
        }
    }
}

/// One GPU's worker, reached through its job queue.
struct Worker {
    ordinal: usize,
    jobs: mpsc::Sender<Job>,
}

impl Worker {
    fn ask<T>(&self, job: impl FnOnce(mpsc::Sender<T>) -> Job) -> Result<T, ProverError> {
        let gone = |what| ProverError::Worker {
            ordinal: self.ordinal,
            what,
        };
        let (reply, answer) = mpsc::channel();
        self.jobs
            .send(job(reply))
            .map_err(|_| gone("has stopped"))?;
        answer.recv().map_err(|_| gone("stopped while working"))
    }
}

/// Proves on the GPUs: each challenge goes to the worker of the GPU its UUID names.
pub struct GpuEngine {
    workers: HashMap<String, Arc<Worker>>,
    /// The workers' threads, joined when the engine is dropped.
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Drop for GpuEngine {
    /// Stops every worker and waits until each has freed its GPU state (cuBLASLt handles,
    /// kept outputs, data sets). A worker still tearing down while the process exits races
    /// the CUDA libraries' own teardown: on the H200, `pog prove --precision int8` crashed in
    /// cuBLASLt at exit (SIGSEGV, exit 139) after printing its result, every time.
    fn drop(&mut self) {
        for worker in self.workers.values() {
            let _ = worker.jobs.send(Job::Stop);
        }
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

impl GpuEngine {
    /// Starts one worker per (UUID, CUDA ordinal) and waits until each has opened its GPU.
    pub fn start(gpus: &[(String, usize)]) -> Result<GpuEngine, ProverError> {
        let mut engine = GpuEngine {
            workers: HashMap::new(),
            threads: Vec::new(),
        };
        for (uuid, ordinal) in gpus {
            let (jobs, queue) = mpsc::channel();
            let (ready, opened) = mpsc::channel();
            let ordinal = *ordinal;
            let thread = std::thread::Builder::new()
                .name(format!("pog-gpu-{ordinal}"))
                .spawn(move || gpu_worker(ordinal, queue, ready))
                .map_err(|_| ProverError::Worker {
                    ordinal,
                    what: "could not be started",
                })?;
            engine.threads.push(thread);
            opened.recv().map_err(|_| ProverError::Worker {
                ordinal,
                what: "stopped while starting",
            })??;
            engine
                .workers
                .insert(uuid.clone(), Arc::new(Worker { ordinal, jobs }));
        }
        Ok(engine)
    }

    fn worker(&self, uuid: &str) -> Result<&Arc<Worker>, ProverError> {
        self.workers
            .get(uuid)
            .ok_or_else(|| ProverError::UnknownGpu(uuid.to_string()))
    }

    /// Commits to `challenge` on its GPU, with the timing breakdown.
    pub fn commit(&self, challenge: &Challenge) -> Result<GpuKept, ProverError> {
        let worker = self.worker(&challenge.to.gpu_uuid)?.clone();
        let owned = challenge.clone();
        let report = worker.ask(|reply| Job::Commit {
            challenge: owned,
            reply,
        })??;
        Ok(GpuKept { worker, report })
    }
}

impl SetUp for GemmOn<Arc<Worker>> {
    fn set_up_ms(&self) -> Option<f64> {
        None
    }

    fn run(self: Box<Self>, _start: &[u8; 32]) -> Result<Proved, ProverError> {
        let GemmOn { engine, challenge } = *self;
        let report = engine.ask(|reply| Job::Commit { challenge, reply })??;
        Ok(GpuKept {
            worker: engine,
            report,
        }
        .proved())
    }
}

impl ProverEngine for GpuEngine {
    fn name(&self) -> &'static str {
        "GPU"
    }

    fn refuses(&self, task: Task<'_>) -> Option<String> {
        if let Task::Gemm(c) = task {
            if c.leaf_elements == 0 || c.batch == 0 || c.size == 0 {
                return Some("a challenge needs a size, a batch and a leaf size".into());
            }
        }
        self.worker(&task.to().gpu_uuid)
            .err()
            .map(|e| e.to_string())
    }

    /// Chooses the GEMM algorithm for challenges shaped like a GEMM `task` ahead of time, so
    /// a commitment's timed window holds none of that search (a memory task needs nothing).
    fn prepare(&self, task: Task<'_>) -> Result<Option<String>, ProverError> {
        let Task::Gemm(challenge) = task else {
            return Ok(None);
        };
        let challenge = challenge.clone();
        self.worker(&challenge.to.gpu_uuid)?
            .ask(|reply| Job::Prepare { challenge, reply })?
            .map(Some)
    }

    fn set_up(&self, task: Task<'_>) -> Result<Box<dyn SetUp>, ProverError> {
        // The host's cores and memory, not the GPU's: run on this host's CPU, honestly.
        match task {
            Task::Cpu(c) => return Ok(calibrate(c, Behaviour::Honest)),
            Task::Ram(c) => return build_on_cpu(c, Behaviour::Honest),
            Task::Gemm(_) | Task::Memory(_) => {}
        }
        let worker = self.worker(&task.to().gpu_uuid)?.clone();
        Ok(match task {
            Task::Cpu(_) | Task::Ram(_) => unreachable!("run on the CPU above"),
            Task::Gemm(c) => Box::new(GemmOn {
                engine: worker,
                challenge: c.clone(),
            }),
            Task::Memory(c) => {
                let owned = c.clone();
                let (id, build_ms) = worker.ask(|reply| Job::BuildMemory {
                    challenge: owned,
                    reply,
                })??;
                Box::new(GpuBuilt {
                    worker,
                    id,
                    build_ms,
                    challenge: c.clone(),
                })
            }
        })
    }
}

/// A data set built on a GPU, released there when this is dropped unwalked.
struct GpuBuilt {
    worker: Arc<Worker>,
    id: u64,
    build_ms: f64,
    challenge: MemoryChallenge,
}

impl SetUp for GpuBuilt {
    fn set_up_ms(&self) -> Option<f64> {
        Some(self.build_ms)
    }

    fn run(self: Box<Self>, walk_nonce: &[u8; 32]) -> Result<Proved, ProverError> {
        let walk = walk_spec(&self.challenge, self.challenge.walk_key(walk_nonce));
        let dataset = self.id;
        let report = self.worker.ask(|reply| Job::Walk {
            dataset,
            walk,
            reply,
        })??;
        Ok(GpuKept {
            worker: self.worker.clone(),
            report,
        }
        .proved())
    }
}

impl Drop for GpuBuilt {
    fn drop(&mut self) {
        let _ = self.worker.jobs.send(Job::ReleaseDataset { id: self.id });
    }
}

/// A commitment kept on a GPU (products or a walk); its outputs and tree stay there until
/// this is dropped.
pub struct GpuKept {
    worker: Arc<Worker>,
    /// The commitment's root, leaf count, timings and algorithm.
    pub report: KeptReport,
}

impl GpuKept {
    /// As an engine's result: the prover, the device's times and the algorithm.
    fn proved(self) -> Proved {
        Proved {
            timings: Some(self.report.timings.clone()),
            algorithm: self.report.algorithm.clone(),
            prover: Arc::new(self),
        }
    }
}

impl Prover for GpuKept {
    fn root(&self) -> pog_merkle::Hash {
        self.report.root
    }

    fn leaf_count(&self) -> u64 {
        self.report.leaf_count
    }

    fn open(&self, leaves: &[u64]) -> Result<Vec<Opening>, OpenError> {
        let (id, leaves) = (self.report.id, leaves.to_vec());
        self.worker
            .ask(|reply| Job::Open { id, leaves, reply })
            .and_then(|opened| opened)
            .map_err(|e| OpenError::Prover(Box::new(e)))
    }
}

impl Drop for GpuKept {
    fn drop(&mut self) {
        let _ = self.worker.jobs.send(Job::Release { id: self.report.id });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pog_proof::challenge::CHALLENGE_VERSION;
    use pog_spec::Precision;

    fn challenge(size: u64, batch: u32, leaf_elements: u32) -> Challenge {
        Challenge {
            version: CHALLENGE_VERSION,
            nonce: [1; 32],
            to: pog_proof::challenge::Addressee {
                gpu_uuid: "GPU-1".parse().unwrap(),
                gpu_bus_id: "00000000:00:06.0".into(),
                agent_key: pog_signed::PublicKey::from([0xaa; 32]),
                validator_key: pog_signed::PublicKey::from([0xbb; 32]),
            },
            precision: Precision::Int8,
            size,
            batch,
            leaf_elements,
        }
    }

    #[test]
    fn the_cpu_engine_takes_small_challenges_only() {
        let engine = CpuEngine {
            behaviour: Behaviour::Honest,
        };
        assert!(engine.refuses(Task::Gemm(&challenge(32, 2, 64))).is_none());
        let big = engine
            .refuses(Task::Gemm(&challenge(16384, 100, 1024)))
            .unwrap();
        assert!(big.contains("beyond this agent's CPU prover"), "{big}");
        assert!(engine.refuses(Task::Gemm(&challenge(32, 2, 0))).is_some());
        let prover = engine
            .set_up(Task::Gemm(&challenge(32, 2, 64)))
            .unwrap()
            .run(&[0; 32])
            .unwrap()
            .prover;
        assert_eq!(prover.leaf_count(), 32);
        assert_eq!(prover.open(&[3, 0]).unwrap()[0].leaf, 3);
        assert!(matches!(
            prover.open(&[32]).unwrap_err(),
            OpenError::OutOfRange { leaf: 32, .. }
        ));
    }

    #[test]
    fn the_cpu_engine_bounds_what_a_memory_challenge_makes_it_hold() {
        let engine = CpuEngine {
            behaviour: Behaviour::Honest,
        };
        let fits = MemoryChallenge {
            version: pog_proof::memory::MEMORY_VERSION,
            nonce: [1; 32],
            to: pog_proof::challenge::Addressee {
                gpu_uuid: "GPU-1".parse().unwrap(),
                gpu_bus_id: "00000000:00:06.0".into(),
                agent_key: pog_signed::PublicKey::from([0xaa; 32]),
                validator_key: pog_signed::PublicKey::from([0xbb; 32]),
            },
            items: MAX_CPU_ITEMS,
            item_rounds: 1,
            walkers: MAX_CPU_WALKERS,
            steps: 1,
            span: 1,
            walkers_per_leaf: 4,
        };
        assert!(engine.refuses(Task::Memory(&fits)).is_none());
        // One read each, but more walkers than the outputs it keeps for them.
        let walkers = MemoryChallenge {
            walkers: 2 * MAX_CPU_WALKERS,
            ..fits.clone()
        };
        let why = engine.refuses(Task::Memory(&walkers)).unwrap();
        assert!(why.contains("walkers"), "{why}");
        let items = MemoryChallenge {
            items: 2 * MAX_CPU_ITEMS,
            ..fits
        };
        assert!(engine.refuses(Task::Memory(&items)).is_some());
    }

    #[test]
    fn a_gpu_engine_starts_where_cuda_works_and_says_why_not_elsewhere() {
        match GpuEngine::start(&[("GPU-1".into(), 0)]) {
            Ok(engine) => {
                assert!(pog_device::cuda::library_present());
                assert_eq!(engine.name(), "GPU");
                let elsewhere = Challenge {
                    to: pog_proof::challenge::Addressee {
                        gpu_uuid: "GPU-2".parse().unwrap(),
                        ..challenge(32, 1, 64).to
                    },
                    ..challenge(32, 1, 64)
                };
                assert!(
                    engine.refuses(Task::Gemm(&elsewhere)).is_some(),
                    "no worker for GPU-2"
                );
            }
            Err(err) => {
                assert!(matches!(err, ProverError::Gpu { ordinal: 0, .. }), "{err}");
                let text = err.to_string();
                assert!(text.contains("GPU 0"), "{text}");
                if !pog_device::cuda::library_present() {
                    assert!(text.contains("CUDA"), "{text}");
                }
            }
        }
    }
}
