//! `pog bench`: measure every GPU and the host, check and judge every figure.

use super::{print_json, Outcome};
use crate::cli::{BenchArgs, Global};
use crate::render;
use anyhow::Result;
use pog_bench::gpu::GpuBench;
use pog_bench::host::{HostBench, HostPlan};
use pog_bench::peer::PeerBench;
use pog_bench::plan::{plan, Overrides};
use pog_bench::{Suite, Verdict};
use pog_device::gpu::{Gpu, GpuFabric};
use pog_device::sim::{SimFabric, SimGpu};
use pog_device::{Accelerator, Inventory, Origin};
use pog_spec::{GpuSpec, SpecDb};
use serde::Serialize;

/// How long cutlass_profiler may take over its SGEMM sweep.
const CUTLASS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1800);

/// Fraction of peak the simulated GPUs run at (test double only).
const SIM_EFFICIENCY: f64 = 0.75;

/// What `pog bench --json` prints.
#[derive(Serialize)]
pub struct BenchReport {
    pub suite: Suite,
    pub origin: Origin,
    pub gpus: Vec<GpuBench>,
    /// GPUs that could not be opened, with the reason.
    pub gpu_errors: Vec<String>,
    /// GPU to GPU (two or more GPUs): the peer bandwidth matrix and latencies, or why they
    /// could not be measured.
    pub peers: Option<Result<PeerBench, String>>,
    pub host: Option<HostBench>,
    pub host_plan: Option<HostPlan>,
    /// cutlass_profiler's best SGEMM figures, when it is installed (a second opinion, never
    /// judged), or why there are none.
    pub cutlass: Result<Vec<pog_bench::cutlass::CutlassFigure>, String>,
}

impl BenchReport {
    /// The worst verdict of every figure; a GPU that could not be opened fails.
    pub fn verdict(&self) -> Verdict {
        let gpus = self
            .gpus
            .iter()
            .map(GpuBench::verdict)
            .max()
            .unwrap_or(Verdict::Info);
        let peers = match &self.peers {
            None => Verdict::Info,
            Some(Ok(p)) => p.verdict(),
            Some(Err(_)) => Verdict::Fail,
        };
        if self.gpu_errors.is_empty() {
            gpus.max(peers)
        } else {
            Verdict::Fail
        }
    }
}

/// The host benchmark sizes of each suite.
fn host_plan(suite: Suite) -> HostPlan {
    match suite {
        Suite::Quick => HostPlan {
            cpu_seconds: 0.5,
            stream_bytes: 256 << 20,
            stream_repeats: 5,
            storage_bytes: 256 << 20,
            random_reads: 2_000,
        },
        Suite::Standard => HostPlan {
            cpu_seconds: 2.0,
            stream_bytes: 1 << 30,
            stream_repeats: 10,
            storage_bytes: 1 << 30,
            random_reads: 20_000,
        },
        Suite::Full => HostPlan {
            cpu_seconds: 5.0,
            stream_bytes: 2 << 30,
            stream_repeats: 20,
            storage_bytes: 4 << 30,
            random_reads: 50_000,
        },
    }
}

/// The model of CUDA device `ordinal`, by its PCI device id as sysfs reports it (the
/// kernel's view), else by its name.
fn model_of(inventory: &Inventory, ordinal: usize) -> Option<&'static GpuSpec> {
    let db = SpecDb::embedded();
    let cuda = inventory.cuda.value()?.devices.get(ordinal)?;
    let by_id = cuda
        .pci_bus_id
        .value()
        .and_then(|bus| inventory.pci.value()?.iter().find(|p| p.bus_id == *bus))
        .and_then(|p| db.by_device_id(p.device_id));
    by_id.or_else(|| cuda.name.value().and_then(|n| db.by_name(n)))
}

/// Runs the benchmarks `args` asks for on the GPUs of `inventory` and on the host.
pub fn measure(global: &Global, args: &BenchArgs, inventory: &Inventory) -> Result<BenchReport> {
    let overrides = Overrides {
        sizes: args.sizes.clone(),
        precisions: args.precisions.clone(),
        iterations: args.iterations,
        copy_bytes: args.copy_mib.map(|m| m << 20),
        sustained_seconds: args.sustained_seconds,
        gemm_rest_ms: args.gemm_rest_ms,
    };
    let cuda_count = inventory.cuda.value().map_or(0, |c| c.devices.len());
    let ordinals: Vec<usize> = if args.no_gpu {
        vec![]
    } else {
        args.gpus
            .clone()
            .unwrap_or_else(|| (0..cuda_count).collect())
    };
    if let Some(bad) = ordinals.iter().find(|o| **o >= cuda_count) {
        anyhow::bail!("--gpus {bad}: this host has {cuda_count} CUDA device(s)");
    }
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    let mut gpus = Vec::new();
    let mut gpu_errors = Vec::new();
    let mut accelerators: Vec<(usize, Option<&GpuSpec>, Box<dyn Accelerator>)> = Vec::new();
    for &ordinal in &ordinals {
        let spec = model_of(inventory, ordinal);
        let opened: Result<Box<dyn Accelerator>, String> = match (&global.simulate, spec) {
            (Some(_), Some(spec)) => Ok(Box::new(SimGpu::new(spec, SIM_EFFICIENCY))),
            (Some(_), None) => Err("simulated GPU of unknown model".into()),
            (None, _) => Gpu::open(ordinal)
                .map(|g| Box::new(g) as Box<dyn Accelerator>)
                .map_err(|e| e.to_string()),
        };
        match opened {
            Ok(acc) => accelerators.push((ordinal, spec, acc)),
            Err(e) => gpu_errors.push(format!("GPU {ordinal}: {e}")),
        }
    }
    let plans: Vec<_> = accelerators
        .iter()
        .map(|(_, spec, acc)| {
            let free = acc.memory().map_or(0, |(free, _)| free);
            plan(args.suite, *spec, free, &overrides)
        })
        .collect();
    let peer_plan = pog_bench::peer::plan(args.suite, accelerators.len());
    let pairs = accelerators.len() * accelerators.len().saturating_sub(1);
    let steps: usize = plans
        .iter()
        .map(|p| p.gemms.len() + p.copies.len())
        .sum::<usize>()
        + usize::from(!args.no_host)
        + peer_plan
            .as_ref()
            .map_or(0, |p| pairs * 5 + p.all_reduce_bytes.len());
    let bar = render::progress(global.json, steps as u64);
    for ((ordinal, spec, acc), plan) in accelerators.iter_mut().zip(&plans) {
        gpus.push(pog_bench::gpu::run(
            *ordinal,
            acc.as_mut(),
            *spec,
            plan,
            seed ^ *ordinal as u64,
            &mut |step| {
                bar.set_message(step.to_string());
                bar.inc(1);
            },
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
        let link = |s: usize, d: usize| pog_bench::peer::link(inventory, s, d);
        let mut fabric: Box<dyn pog_device::Fabric> = match &global.simulate {
            Some(_) => Box::new(SimFabric {
                rates: (0..cuda_count)
                    .map(|s| {
                        (0..cuda_count)
                            .map(|d| (s != d).then(|| link(s, d).map(|l| l.gbs)).flatten())
                            .collect()
                    })
                    .collect(),
                efficiency: SIM_EFFICIENCY,
                no_collectives: None,
            }),
            None => Box::new(GpuFabric::open(cuda_count).map_err(|e| e.to_string())?),
        };
        Ok(pog_bench::peer::run(
            fabric.as_mut(),
            host_model,
            &peer_plan,
            &link,
            &mut |step| {
                bar.set_message(step);
                bar.inc(1);
            },
        ))
    });
    let (host, host_plan) = if args.no_host {
        (None, None)
    } else {
        bar.set_message("host: CPU, memory, storage");
        let plan = host_plan(args.suite);
        let dir = args.storage_dir.clone().unwrap_or_else(std::env::temp_dir);
        (Some(pog_bench::host::run(&plan, &dir)), Some(plan))
    };
    let cutlass = if global.simulate.is_some() || args.no_gpu || args.suite == Suite::Quick {
        Err("not run (quick suite, no GPU or simulated host)".to_string())
    } else {
        match pog_device::cutlass::find() {
            None => Err(format!("{} not on PATH", pog_device::cutlass::PROGRAM)),
            Some(binary) => {
                bar.set_message("cutlass_profiler SGEMM");
                let sizes = args.sizes.clone().unwrap_or_else(|| vec![8192, 16384]);
                pog_device::cutlass::run_sgemm(&binary, &sizes, CUTLASS_TIMEOUT)
                    .and_then(|csv| pog_bench::cutlass::parse(&csv))
            }
        }
    };
    bar.finish_and_clear();
    Ok(BenchReport {
        suite: args.suite,
        origin: inventory.origin.clone(),
        gpus,
        gpu_errors,
        peers,
        host,
        host_plan,
        cutlass,
    })
}

pub fn run(global: &Global, args: &BenchArgs) -> Result<Outcome> {
    let platform = super::platform(global)?;
    let inventory = pog_device::collect(platform.as_ref());
    let report = measure(global, args, &inventory)?;
    if global.json {
        print_json(&report)?;
    } else {
        render::origin_banner(&report.origin);
        render::bench(&report);
    }
    Ok(if report.verdict() == Verdict::Fail {
        Outcome::Failed
    } else {
        Outcome::Passed
    })
}
