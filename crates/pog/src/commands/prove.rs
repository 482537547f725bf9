//! `pog prove`: the proof of GPU as a validator would run it, on this host's GPUs, validator
//! and agent in one process (`pog_local::hostproof`): the time to commit against the claimed
//! model's bound, the spot checks, and where the time went.

use crate::cli::prove::{ProofKind, ProveArgs};
use crate::cli::Global;
use crate::host::collect_and_inspect;
use crate::output::{print_json, verdict_line, Outcome, Verdict};
use crate::render;
use anyhow::Result;
use clap::ValueEnum;
use pog_local::hostproof::{
    self, GpuProof, HostCpuProof, MemoryOverrides, ProofKinds, ProveOptions,
};
use serde::Serialize;

/// What `pog prove --json` reports.
#[derive(Serialize)]
struct ProveReport<'a> {
    proofs: &'a [GpuProof],
}

/// `pog prove`: challenges this host's GPUs and reports each proof.
pub fn run(global: &Global, args: &ProveArgs) -> Result<Outcome> {
    let inspect = collect_and_inspect(global, pog_sim::DEFAULT_HOST)?;
    if args.proof == ProofKind::Cpu {
        return run_cpu(global, &inspect);
    }
    if args.proof == ProofKind::Storage {
        return run_storage(global, &inspect, args);
    }
    if args.proof == ProofKind::Ram {
        let Some(bytes) = args.ram_size else {
            anyhow::bail!("--proof ram needs --ram-size BYTES");
        };
        return run_ram(global, &inspect, bytes);
    }
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
            gemm: matches!(args.proof, ProofKind::Gemm | ProofKind::All),
            memory: matches!(args.proof, ProofKind::Memory | ProofKind::All),
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

/// What `pog prove --proof cpu --json` reports.
#[derive(Serialize)]
struct CpuReport<'a> {
    cpu: &'a HostCpuProof,
}

/// `pog prove --proof cpu`: the proof of this host's cores.
fn run_cpu(global: &Global, inspect: &pog_inspect::InspectReport) -> Result<Outcome> {
    let proof = hostproof::prove_cpu(inspect)?;
    let summary = format!(
        "{} lane(s) at once in {:.2}× the time of {} at once (limit {:.2}×)",
        proof.lanes,
        proof.check.measured.commit_ms / proof.check.calibration_ms.max(f64::MIN_POSITIVE),
        proof.check.challenge.calibration_lanes(),
        pog_proof::cpu::PASS_LIMIT,
    );
    report_host_proof(
        global,
        proof.passed(),
        &summary,
        &CpuReport { cpu: &proof },
        || render::cpu_proof(&proof),
    )
}

/// What `pog prove --proof ram --json` reports.
#[derive(Serialize)]
struct RamReport<'a> {
    ram: &'a pog_local::hostproof::HostRamProof,
}

/// `pog prove --proof ram`: the proof of `bytes` of this host's RAM.
fn run_ram(global: &Global, inspect: &pog_inspect::InspectReport, bytes: u64) -> Result<Outcome> {
    let proof = hostproof::prove_ram(inspect, bytes)?;
    let m = &proof.check.measured;
    let summary = format!(
        "{bytes} bytes claimed: a walk of {:.0} MiB of reads in {:.2}× its bound, {} walker(s) \
         checked",
        proof.check.read_bytes as f64 / (1u64 << 20) as f64,
        m.time_ratio(),
        m.outcome.checked
    );
    report_host_proof(
        global,
        proof.passed(),
        &summary,
        &RamReport { ram: &proof },
        || render::ram_proof(&proof),
    )
}

/// What `pog prove --proof storage --json` reports.
#[derive(Serialize)]
struct StorageReport<'a> {
    storage: &'a pog_local::storage::HostStorageProof,
}

/// `pog prove --proof storage`: the proof of the storage under `--storage-dir`.
fn run_storage(
    global: &Global,
    inspect: &pog_inspect::InspectReport,
    args: &ProveArgs,
) -> Result<Outcome> {
    let (Some(dir), Some(bytes)) = (&args.storage_dir, args.storage_size) else {
        anyhow::bail!("--proof storage needs --storage-dir DIR and --storage-size BYTES");
    };
    let proof = hostproof::prove_storage(
        inspect,
        dir,
        bytes,
        args.storage_class.into(),
        args.storage_audit,
    )?;
    let summary = format!(
        "{} steps over {:.1} MiB in {:.3}× the {} bound, {} openings {}",
        proof.steps,
        proof.bytes as f64 / f64::from(1u32 << 20),
        proof.time.ratio,
        args.storage_class
            .to_possible_value()
            .map_or_else(String::new, |v| v.get_name().to_string()),
        proof.opened,
        match (&proof.audit.error, &proof.error) {
            (None, None) => "checked".to_string(),
            (Some(e), _) | (None, Some(e)) => format!("refused: {e}"),
        }
    );
    report_host_proof(
        global,
        proof.passed(),
        &summary,
        &StorageReport { storage: &proof },
        || render::storage_proof(&proof),
    )
}

/// Reports one proof of the host (CPU, RAM, storage) as JSON or as its table and verdict line.
/// These proofs run on this host's real CPU, memory and disk whatever the inventory's origin,
/// so their output is never marked simulated.
fn report_host_proof(
    global: &Global,
    passed: bool,
    summary: &str,
    report: &impl Serialize,
    render_table: impl FnOnce(),
) -> Result<Outcome> {
    let verdict = if passed { Verdict::Pass } else { Verdict::Fail };
    if global.json {
        print_json("prove", verdict, summary, false, report)?;
    } else {
        render_table();
        verdict_line(verdict, summary, false);
    }
    Ok(Outcome(verdict))
}
