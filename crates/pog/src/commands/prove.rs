//! `pog prove`: the proof of GPU as a validator would run it, on this host's GPUs, validator
//! and agent in one process (`pog_node::selfcheck`): the time to commit against the claimed
//! model's bound, the spot checks, and where the time went. `pog check` runs it with the
//! validator's per-model plan.

use super::inspect::{collect_and_inspect, InspectReport};
use super::{print_json, Outcome};
use crate::cli::{Global, ProveArgs, ProverKind};
use anyhow::{anyhow, bail, Result};
use pog_inspect::GpuVerdict;
use pog_node::provers::{CpuEngine, GpuEngine, ProverEngine, MAX_CPU_WORK};
use pog_node::selfcheck::{self, SelfCheck};
use pog_node::validator::{Planned, Policy};
use pog_proof::prover::{Behaviour, CpuProver, Prover};
use pog_spec::{Precision, SpecDb};
use serde::Serialize;

/// One GPU's self-challenge, or why it could not run.
#[derive(Serialize)]
pub struct GpuProof {
    pub ordinal: usize,
    pub model: String,
    pub check: Option<SelfCheck>,
    /// With `--against-cpu`: whether the CPU prover's root equals the GPU's (required for
    /// INT8, which is exact; float outputs may differ in a last bit and are judged by the
    /// spot checks alone).
    pub cpu_root_matches: Option<bool>,
    pub error: Option<String>,
}

impl GpuProof {
    pub fn passed(&self) -> bool {
        let exact_mismatch = self.cpu_root_matches == Some(false)
            && self.check.as_ref().map(|c| c.precision) == Some(Precision::Int8);
        self.error.is_none()
            && self.check.as_ref().is_some_and(|c| c.outcome.accepted)
            && !exact_mismatch
    }
}

pub fn run(global: &Global, args: &ProveArgs) -> Result<Outcome> {
    let inspect = collect_and_inspect(global)?;
    let proofs = prove(global, args, &inspect)?;
    if global.json {
        print_json(&proofs)?;
    } else {
        crate::render::proofs(&proofs);
    }
    Ok(if proofs.iter().all(GpuProof::passed) {
        Outcome::Passed
    } else {
        Outcome::Failed
    })
}

/// Self-challenges every genuine GPU of the inspected host (or those `args.gpus` names), all
/// at once, as a validator challenges an agent's GPUs, with the engine `args.prover` names.
pub fn prove(global: &Global, args: &ProveArgs, inspect: &InspectReport) -> Result<Vec<GpuProof>> {
    let cuda = inspect.inventory.cuda.value();
    let on_gpu = match args.prover {
        ProverKind::Cpu => false,
        ProverKind::Gpu => true,
        ProverKind::Auto => global.simulate.is_none() && cuda.is_some(),
    };
    if on_gpu && global.simulate.is_some() {
        bail!("the GPU prover needs a real GPU, not a simulated host (`--prover cpu` proves small challenges on the CPU)");
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
        if args
            .gpus
            .as_ref()
            .is_some_and(|only| !only.contains(&ordinal))
        {
            continue;
        }
        if g.verdict != GpuVerdict::Genuine {
            bail!("GPU {ordinal} ({uuid}) did not come out genuine: a validator would not challenge it (run `pog inspect`)");
        }
        targets.push((ordinal, uuid.clone(), model.clone(), bus.to_string()));
    }
    if targets.is_empty() {
        bail!("no GPU to prove on this host");
    }
    let engine: Box<dyn ProverEngine> = if on_gpu {
        Box::new(
            GpuEngine::start(
                &targets
                    .iter()
                    .map(|(ordinal, uuid, _, _)| (uuid.clone(), *ordinal))
                    .collect::<Vec<_>>(),
            )
            .map_err(|e| anyhow!(e))?,
        )
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
                scope.spawn(move || {
                    let result = plan(args, model).and_then(|planned| {
                        let challenge = planned.challenge([0; 32], uuid, bus);
                        if let Some(reason) = engine.refuses(&challenge) {
                            bail!("{reason}");
                        }
                        selfcheck::run(engine, (uuid, bus), &planned, args.samples)
                            .map_err(|e| anyhow!(e))
                    });
                    let (check, error) = match result {
                        Ok(check) => (Some(check), None),
                        Err(e) => (None, Some(format!("{e:#}"))),
                    };
                    let cpu_root_matches = args
                        .against_cpu
                        .then(|| check.as_ref().map(against_cpu))
                        .flatten()
                        .flatten();
                    GpuProof {
                        ordinal: *ordinal,
                        model: model.clone(),
                        check,
                        cpu_root_matches,
                        error,
                    }
                })
            })
            .collect();
        running
            .into_iter()
            .map(|r| r.join().expect("a self-challenge thread panicked"))
            .collect()
    });
    Ok(proofs)
}

/// The validator's per-model plan for `model`, with the flags' overrides; the time bound is the
/// model's expected rate for that precision and size unless `--expected-ms` says otherwise.
fn plan(args: &ProveArgs, model: &str) -> Result<Planned> {
    let spec = SpecDb::embedded()
        .by_model(model)
        .ok_or_else(|| anyhow!("model {model:?} is not in the database"))?;
    let base = Policy {
        precision: args.precision,
        ..Policy::per_model_default()
    }
    .plan_for(spec)?;
    let precision = base.precision;
    let size = args.size.unwrap_or(base.size);
    let tflops = pog_proof::params::expected_tflops(spec, precision, size)
        .ok_or_else(|| anyhow!("{model} has no {precision:?} figure to time a proof by"))?;
    let rate = tflops * 1e9; // floating-point operations per ms
    let batch = args.batch.unwrap_or(base.batch);
    Ok(Planned {
        precision,
        size,
        batch,
        leaf_elements: args.leaf_elements,
        expected_ms: args.expected_ms.unwrap_or(work(batch, size) / rate),
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
    Some(hex::encode(cpu.root()) == check.outcome.root)
}
