//! The benchmark pipeline: what `pog bench` and `pog check` run, on any [`Platform`]. It opens
//! each GPU through the platform, plans and runs its benchmarks, then the GPU-to-GPU fabric,
//! the host and cutlass_profiler's second opinion, and returns one [`BenchReport`].

use crate::gpu::GpuBench;
use crate::host::HostBench;
use crate::peer::PeerBench;
use crate::plan::{plan, Overrides, Suite};
use crate::Verdict;
use pog_facts::hostbench::HostPlan;
use pog_facts::{Accelerator, Inventory, Origin, Platform, Reading};
use pog_spec::{GpuSpec, SpecDb};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

/// How long cutlass_profiler may take over its SGEMM sweep.
const CUTLASS_TIMEOUT: Duration = Duration::from_secs(1800);

/// What to measure.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// The suite whose plan is run.
    pub suite: Suite,
    /// CUDA ordinals to measure; `None`: every GPU.
    pub gpus: Option<Vec<usize>>,
    /// Changes to the suite's plan from the command line.
    pub overrides: Overrides,
    /// Skip the GPUs (host only).
    pub no_gpu: bool,
    /// Skip the host benchmarks.
    pub no_host: bool,
    /// Where the storage benchmark writes; `None`: the system's temporary directory.
    pub storage_dir: Option<PathBuf>,
}

impl BenchOptions {
    /// The suite as it is, on every GPU and the host.
    pub fn suite(suite: Suite) -> BenchOptions {
        BenchOptions {
            suite,
            gpus: None,
            overrides: Overrides::default(),
            no_gpu: false,
            no_host: false,
            storage_dir: None,
        }
    }
}

/// Why the benchmarks could not start (bad options: nothing was measured).
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// `--gpus` names a CUDA ordinal the host does not have.
    #[error("--gpus {asked}: this host has {count} CUDA device(s)")]
    NoSuchGpu {
        /// The first ordinal asked for that is out of range.
        asked: usize,
        /// CUDA devices on the host.
        count: usize,
    },
    /// The storage benchmark's directory is not there.
    #[error("--storage-dir {dir}: {why}")]
    StorageDir {
        /// The directory asked for.
        dir: String,
        /// What is wrong with it.
        why: String,
    },
}

/// A GPU that could not be opened.
#[derive(Debug, Clone, Serialize)]
pub struct GpuOpenError {
    /// The GPU's CUDA ordinal.
    pub ordinal: usize,
    /// Why it could not be opened.
    pub error: String,
}

/// What `pog bench` measured and judged.
#[derive(Debug, Serialize)]
pub struct BenchReport {
    /// The suite that was run.
    pub suite: Suite,
    /// Real hardware, or the simulated double (whose figures mean nothing).
    pub origin: Origin,
    /// The seed of the benchmark matrices (a fresh one each run; GPU `i` uses `seed ^ i`).
    #[serde(with = "pog_facts::hex_u64")]
    pub seed: u64,
    /// Everything measured on each GPU that opened.
    pub gpus: Vec<GpuBench>,
    /// GPUs that could not be opened: each one fails the run.
    pub gpu_errors: Vec<GpuOpenError>,
    /// GPU to GPU (two or more GPUs): the peer bandwidth matrix and latencies, or why they
    /// could not be measured; `null` on a host with fewer than two GPUs.
    pub peers: Option<Reading<PeerBench>>,
    /// `null` with `--no-host`.
    pub host: Option<HostBench>,
    /// The host benchmark sizes used; `null` with `--no-host`.
    pub host_plan: Option<HostPlan>,
    /// cutlass_profiler's best SGEMM figures, when it is installed (a second opinion, never
    /// judged), or why there are none.
    pub cutlass: Reading<Vec<crate::cutlass::CutlassFigure>>,
}

impl BenchReport {
    /// The worst verdict of every figure; a GPU that could not be opened fails, and so does a
    /// run that measured nothing at all.
    pub fn verdict(&self) -> Verdict {
        let gpus = self
            .gpus
            .iter()
            .map(GpuBench::verdict)
            .max()
            .unwrap_or(Verdict::Info);
        let peers = match &self.peers {
            None => Verdict::Info,
            Some(Reading::Value(p)) => p.verdict(),
            Some(Reading::Unavailable(_)) => Verdict::Fail,
        };
        if !self.gpu_errors.is_empty() {
            Verdict::Fail
        } else {
            gpus.max(peers)
        }
    }

    /// Figures judged per verdict, for summaries.
    pub fn verdicts(&self) -> Vec<Verdict> {
        self.gpus.iter().flat_map(|g| g.verdicts()).collect()
    }
}

/// Reports progress: the number of steps once, then each step's name as it starts.
pub trait Progress {
    /// The number of steps the run will take, called once before the first.
    fn steps(&mut self, total: u64);
    /// A step starting, by name (e.g. "host: CPU, memory, storage").
    fn step(&mut self, what: &str);
}

/// No progress shown.
impl Progress for () {
    fn steps(&mut self, _: u64) {}
    fn step(&mut self, _: &str) {}
}

/// The model of CUDA device `ordinal`, by its PCI device id as sysfs reports it (the
/// kernel's view), else by its name.
pub fn model_of(inventory: &Inventory, ordinal: usize) -> Option<&'static GpuSpec> {
    let db = SpecDb::embedded();
    let cuda = inventory.cuda.value()?.devices.get(ordinal)?;
    let by_id = cuda
        .pci_bus_id
        .value()
        .and_then(|bus| inventory.pci.value()?.iter().find(|p| p.bus_id == *bus))
        .and_then(|p| db.by_device_id(p.device_id));
    by_id.or_else(|| cuda.name.value().and_then(|n| db.by_name(n)))
}

/// Runs the benchmarks `options` asks for on the GPUs of `inventory` and on the host.
pub fn measure(
    platform: &dyn Platform,
    inventory: &Inventory,
    options: &BenchOptions,
    progress: &mut dyn Progress,
) -> Result<BenchReport, BenchError> {
    let cuda_count = inventory.cuda.value().map_or(0, |c| c.devices.len());
    let ordinals: Vec<usize> = if options.no_gpu {
        vec![]
    } else {
        options
            .gpus
            .clone()
            .unwrap_or_else(|| (0..cuda_count).collect())
    };
    if let Some(&asked) = ordinals.iter().find(|o| **o >= cuda_count) {
        return Err(BenchError::NoSuchGpu {
            asked,
            count: cuda_count,
        });
    }
    let storage_dir = options
        .storage_dir
        .clone()
        .unwrap_or_else(std::env::temp_dir);
    if !options.no_host && !storage_dir.is_dir() {
        return Err(BenchError::StorageDir {
            dir: storage_dir.display().to_string(),
            why: "no such directory".into(),
        });
    }
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    let mut gpu_errors = Vec::new();
    let mut accelerators: Vec<(usize, Option<&GpuSpec>, Box<dyn Accelerator>)> = Vec::new();
    for &ordinal in &ordinals {
        let spec = model_of(inventory, ordinal);
        match platform.open_gpu(ordinal, spec) {
            Ok(acc) => accelerators.push((ordinal, spec, acc)),
            Err(e) => gpu_errors.push(GpuOpenError {
                ordinal,
                error: e.to_string(),
            }),
        }
    }
    let plans: Vec<_> = accelerators
        .iter()
        .map(|(_, spec, acc)| {
            let free = acc.memory().map_or(0, |(free, _)| free);
            plan(options.suite, *spec, free, &options.overrides)
        })
        .collect();
    let peer_plan = crate::peer::plan(options.suite, accelerators.len());
    let pairs = accelerators.len() * accelerators.len().saturating_sub(1);
    let steps: usize = plans
        .iter()
        .map(|p| p.gemms.len() + p.copies.len())
        .sum::<usize>()
        + usize::from(!options.no_host)
        + peer_plan
            .as_ref()
            .map_or(0, |p| pairs * 5 + p.all_reduce_bytes.len());
    progress.steps(steps as u64);
    let mut gpus = Vec::new();
    for ((ordinal, spec, acc), plan) in accelerators.iter_mut().zip(&plans) {
        gpus.push(crate::gpu::run(
            *ordinal,
            acc.as_mut(),
            *spec,
            plan,
            seed ^ *ordinal as u64,
            &mut |step| progress.step(step),
        ));
    }
    // The model all the host's GPUs are (the fabric opens every one), for the peer figures'
    // per-SKU thresholds; none on a mixed host.
    let models: Vec<_> = (0..cuda_count).map(|o| model_of(inventory, o)).collect();
    let host_model = models.first().copied().flatten().filter(|first| {
        models
            .iter()
            .all(|m| m.map(|m| &m.model) == Some(&first.model))
    });
    drop(accelerators); // the peer benchmarks open every GPU again, together
    let peers = peer_plan.map(|peer_plan| {
        let link = |s: usize, d: usize| crate::peer::link(inventory, s, d);
        let link_gbs = |s: usize, d: usize| link(s, d).map(|l| l.gbs);
        match platform.open_fabric(cuda_count, &link_gbs) {
            Err(e) => Reading::unavailable(e.to_string()),
            Ok(mut fabric) => Reading::Value(crate::peer::run(
                fabric.as_mut(),
                host_model,
                &peer_plan,
                &link,
                &mut |step| progress.step(&step),
            )),
        }
    });
    let (host, host_plan) = if options.no_host {
        (None, None)
    } else {
        progress.step("host: CPU, memory, storage");
        let plan = crate::host::plan(options.suite);
        let measured = platform.measure_host(&plan, &storage_dir);
        (Some(HostBench::from(measured)), Some(plan))
    };
    let cutlass = if options.no_gpu || options.suite == Suite::Quick {
        Reading::unavailable("not run (quick suite or --no-gpu)")
    } else {
        progress.step("cutlass_profiler SGEMM");
        let sizes = options
            .overrides
            .sizes
            .clone()
            .unwrap_or_else(|| vec![8192, 16384]);
        platform
            .cutlass_sgemm(&sizes, CUTLASS_TIMEOUT)
            .and_then(|csv| crate::cutlass::parse(&csv).into())
    };
    Ok(BenchReport {
        suite: options.suite,
        origin: inventory.origin.clone(),
        seed,
        gpus,
        gpu_errors,
        peers,
        host,
        host_plan,
        cutlass,
    })
}
