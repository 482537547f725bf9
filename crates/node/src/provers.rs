//! Where an agent's proofs are computed: the [`ProverEngine`] seam, with the CPU engine (CI's
//! end-to-end runs and small challenges) and the GPU engine (one worker thread per GPU, which
//! owns that GPU's CUDA context and every commitment kept on it for opening).

use pog_device::gpu::{CommitTimings, Committed, Gpu, ProductBatch};
use pog_proof::prover::{Behaviour, CpuProver, Opening, Prover};
use pog_proof::Challenge;
use std::collections::HashMap;
use std::sync::mpsc;
use std::sync::Arc;

/// The most multiply-adds the CPU engine takes on (batch · size³): about a minute of one core.
pub const MAX_CPU_WORK: f64 = 2e10;

/// Commitments a GPU keeps for opening at once; the oldest is dropped beyond this (a validator
/// opens within seconds of the commitment).
const KEPT_COMMITMENTS: usize = 4;

/// A computed challenge: its prover, ready to open leaves, and where the device's time went
/// when the engine knows (the GPU engine does).
pub struct Proved {
    pub prover: Arc<dyn Prover>,
    pub timings: Option<CommitTimings>,
    /// The GEMM algorithm the products ran with, when a library chose one.
    pub algorithm: Option<String>,
}

/// Computes challenges.
pub trait ProverEngine: Send + Sync {
    /// Why this engine cannot take `challenge`, if it cannot (checked before any work).
    fn refuses(&self, challenge: &Challenge) -> Option<String>;
    /// Gets ready for challenges shaped like `challenge`, outside any timed window (the GPU
    /// engine chooses its GEMM algorithm); returns what it chose, if anything.
    fn prepare(&self, _challenge: &Challenge) -> Result<Option<String>, String> {
        Ok(None)
    }
    /// Computes `challenge`.
    fn prove(&self, challenge: &Challenge) -> Result<Proved, String>;
    /// What it is, for logs ("CPU", "GPU").
    fn name(&self) -> &'static str;
}

/// Proves on the CPU, honestly or (for the attack tests) not.
pub struct CpuEngine {
    pub behaviour: Behaviour,
}

impl ProverEngine for CpuEngine {
    fn refuses(&self, c: &Challenge) -> Option<String> {
        let work = f64::from(c.batch) * (c.size as f64).powi(3);
        (work > MAX_CPU_WORK || c.leaf_elements == 0).then(|| {
            format!(
                "challenge of {work:.1e} multiply-adds (leaves of {}) is beyond this agent's CPU prover",
                c.leaf_elements
            )
        })
    }

    fn prove(&self, challenge: &Challenge) -> Result<Proved, String> {
        Ok(Proved {
            prover: Arc::new(CpuProver::compute(challenge, self.behaviour)),
            timings: None,
            algorithm: None,
        })
    }

    fn name(&self) -> &'static str {
        "CPU"
    }
}

/// What a GPU worker is asked to do.
enum Job {
    Prepare {
        challenge: Challenge,
        reply: mpsc::Sender<Result<String, String>>,
    },
    Commit {
        challenge: Challenge,
        reply: mpsc::Sender<Result<CommitReport, String>>,
    },
    Open {
        id: u64,
        leaves: Vec<u64>,
        reply: mpsc::Sender<Result<Vec<Opening>, String>>,
    },
    Release {
        id: u64,
    },
}

/// A commitment made on a GPU.
#[derive(Debug, Clone)]
pub struct CommitReport {
    id: u64,
    pub root: pog_merkle::Hash,
    pub leaf_count: u64,
    pub timings: CommitTimings,
    pub algorithm: String,
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
fn gpu_worker(ordinal: usize, jobs: mpsc::Receiver<Job>, ready: mpsc::Sender<Result<(), String>>) {
    let gpu = match Gpu::open(ordinal) {
        Ok(gpu) => {
            let _ = ready.send(Ok(()));
            gpu
        }
        Err(e) => {
            let _ = ready.send(Err(format!("GPU {ordinal}: {e}")));
            return;
        }
    };
    let mut kept: Vec<(u64, Committed)> = Vec::new();
    let mut next_id = 0u64;
    for job in jobs {
        match job {
            Job::Prepare { challenge, reply } => {
                let _ = reply.send(
                    gpu.prepare_proof(challenge.precision, challenge.size)
                        .map_err(|e| e.to_string()),
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
                    let report = CommitReport {
                        id: next_id,
                        root: committed.root,
                        leaf_count: committed.leaf_count(),
                        timings: committed.timings,
                        algorithm: committed.algorithm.clone(),
                    };
                    kept.push((next_id, committed));
                    report
                });
                let _ = reply.send(result.map_err(|e| e.to_string()));
            }
            Job::Open { id, leaves, reply } => {
                let result = match kept.iter().find(|(k, _)| *k == id) {
                    None => Err("the commitment is no longer kept on the GPU".to_string()),
                    Some((_, committed)) => gpu
                        .open_leaves(committed, &leaves)
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
                        .map_err(|e| e.to_string()),
                };
                let _ = reply.send(result);
            }
            Job::Release { id } => kept.retain(|(k, _)| *k != id),
        }
    }
}

/// One GPU's worker, reached through its job queue.
struct Worker {
    jobs: mpsc::Sender<Job>,
}

impl Worker {
    fn ask<T>(&self, job: impl FnOnce(mpsc::Sender<T>) -> Job) -> Result<T, String> {
        let (reply, answer) = mpsc::channel();
        self.jobs
            .send(job(reply))
            .map_err(|_| "the GPU worker has stopped".to_string())?;
        answer
            .recv()
            .map_err(|_| "the GPU worker stopped while working".to_string())
    }
}

/// Proves on the GPUs: each challenge goes to the worker of the GPU its UUID names.
pub struct GpuEngine {
    workers: HashMap<String, Arc<Worker>>,
}

impl GpuEngine {
    /// Starts one worker per (UUID, CUDA ordinal) and waits until each has opened its GPU.
    pub fn start(gpus: &[(String, usize)]) -> Result<GpuEngine, String> {
        let mut workers = HashMap::new();
        for (uuid, ordinal) in gpus {
            let (jobs, queue) = mpsc::channel();
            let (ready, opened) = mpsc::channel();
            let ordinal = *ordinal;
            std::thread::Builder::new()
                .name(format!("pog-gpu-{ordinal}"))
                .spawn(move || gpu_worker(ordinal, queue, ready))
                .map_err(|e| format!("starting the worker of GPU {ordinal}: {e}"))?;
            opened
                .recv()
                .map_err(|_| format!("the worker of GPU {ordinal} stopped while starting"))??;
            workers.insert(uuid.clone(), Arc::new(Worker { jobs }));
        }
        Ok(GpuEngine { workers })
    }

    fn worker(&self, uuid: &str) -> Result<&Arc<Worker>, String> {
        self.workers
            .get(uuid)
            .ok_or_else(|| format!("no GPU worker for {uuid}"))
    }

    /// Commits to `challenge` on its GPU, with the timing breakdown.
    pub fn commit(&self, challenge: &Challenge) -> Result<GpuProof, String> {
        let worker = self.worker(&challenge.gpu_uuid)?.clone();
        let owned = challenge.clone();
        let report = worker.ask(|reply| Job::Commit {
            challenge: owned,
            reply,
        })??;
        Ok(GpuProof { worker, report })
    }
}

impl ProverEngine for GpuEngine {
    fn refuses(&self, c: &Challenge) -> Option<String> {
        if c.leaf_elements == 0 || c.batch == 0 || c.size == 0 {
            return Some("a challenge needs a size, a batch and a leaf size".into());
        }
        self.worker(&c.gpu_uuid).err()
    }

    /// Chooses the GEMM algorithm for challenges shaped like `challenge` ahead of time, so a
    /// commitment's timed window holds none of that search.
    fn prepare(&self, challenge: &Challenge) -> Result<Option<String>, String> {
        let challenge = challenge.clone();
        self.worker(&challenge.gpu_uuid)?
            .ask(|reply| Job::Prepare { challenge, reply })?
            .map(Some)
    }

    fn prove(&self, challenge: &Challenge) -> Result<Proved, String> {
        let proof = self.commit(challenge)?;
        Ok(Proved {
            timings: Some(proof.report.timings),
            algorithm: Some(proof.report.algorithm.clone()),
            prover: Arc::new(proof),
        })
    }

    fn name(&self) -> &'static str {
        "GPU"
    }
}

/// A challenge committed on a GPU; its tree stays there until this is dropped.
pub struct GpuProof {
    worker: Arc<Worker>,
    pub report: CommitReport,
}

impl Prover for GpuProof {
    fn root(&self) -> pog_merkle::Hash {
        self.report.root
    }

    fn leaf_count(&self) -> u64 {
        self.report.leaf_count
    }

    fn open(&self, leaves: &[u64]) -> Result<Vec<Opening>, String> {
        let id = self.report.id;
        let leaves = leaves.to_vec();
        self.worker.ask(|reply| Job::Open { id, leaves, reply })?
    }
}

impl Drop for GpuProof {
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
            gpu_uuid: "GPU-1".into(),
            gpu_bus_id: "00000000:00:06.0".into(),
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
        assert!(engine.refuses(&challenge(32, 2, 64)).is_none());
        let big = engine.refuses(&challenge(16384, 100, 1024)).unwrap();
        assert!(big.contains("beyond this agent's CPU prover"), "{big}");
        assert!(engine.refuses(&challenge(32, 2, 0)).is_some());
        let prover = engine.prove(&challenge(32, 2, 64)).unwrap().prover;
        assert_eq!(prover.leaf_count(), 32);
        assert_eq!(prover.open(&[3, 0]).unwrap()[0].leaf, 3);
        assert!(prover.open(&[32]).unwrap_err().contains("leaf 32"));
    }

    #[test]
    fn a_gpu_engine_without_cuda_is_a_clear_error() {
        if pog_device::cuda::library_present() {
            return; // a GPU host: the engine may start; the device run covers it
        }
        let err = GpuEngine::start(&[("GPU-1".into(), 0)])
            .err()
            .expect("no CUDA here");
        assert!(err.contains("GPU 0") && err.contains("CUDA"), "{err}");
    }
}
