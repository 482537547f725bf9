//! `pog prove`: the proof of GPU as a validator would run it, on this host's GPUs, validator
//! and agent in one process (`pog_local::hostproof`): the time to commit against the claimed
//! model's bound, the spot checks, and where the time went.

use crate::cli::prove::{ProofKind, ProveArgs};
use crate::cli::Global;
use crate::host::collect_and_inspect;
use crate::output::{print_json, verdict_line, Outcome, Verdict};
use crate::render;
use anyhow::Result;
use pog_local::hostproof::{self, GpuProof, MemoryOverrides, ProofKinds, ProveOptions};
use serde::Serialize;

/// What `pog prove --json` reports.
#[derive(Serialize)]
struct ProveReport<'a> {
    proofs: &'a [GpuProof],
}

/// `pog prove`: challenges this host's GPUs and reports each proof.
pub fn run(global: &Global, args: &ProveArgs) -> Result<Outcome> {
    let inspect = collect_and_inspect(global, pog_sim::DEFAULT_HOST)?;
    let options = ProveOptions {
        gpus: args.gpus.clone(),
        precision: args.precision,
        size: args.size,
        batch: args.batch,
        leaf_elements: args.leaf_elements,
        samples: args.samples,
        expected_ms: args.expected_ms,
        against_cpu: args.against_cpu,
        prover: args.prover.into(),
        proofs: ProofKinds {
            gemm: args.proof != ProofKind::Memory,
            memory: args.proof != ProofKind::Gemm,
        },
        memory: MemoryOverrides {
            items: args.items,
            walkers: args.walkers,
            steps: args.steps,
        },
    };
    let proofs = hostproof::prove(&inspect, &options)?;
    let passed = proofs.iter().filter(|p| p.passed()).count();
    let verdict = if passed == proofs.len() {
        Verdict::Pass
    } else {
        Verdict::Fail
    };
    let summary = format!(
        "{passed} of {} GPU(s) passed the validator's challenges",
        proofs.len()
    );
    let simulated = render::is_simulated(&inspect.inventory.origin);
    if global.json {
        print_json(
            "prove",
            verdict,
            &summary,
            simulated,
            &ProveReport { proofs: &proofs },
        )?;
    } else {
        render::origin_banner(&inspect.inventory.origin);
        render::proofs(&proofs);
        verdict_line(verdict, &summary, simulated);
    }
    Ok(Outcome(verdict))
}
