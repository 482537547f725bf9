//! `pog check`: the provider's one command. It runs every stage pog has and reports one line
//! per stage with an overall verdict: inspection, the quick benchmark suite, and the proof of
//! GPU as the validator would run it (a self-challenge). The score and the ledger record join
//! it as they land.

use super::bench::{measure, BenchReport};
use super::inspect::{collect_and_inspect, InspectReport};
use super::prove::GpuProof;
use super::{print_json, Outcome};
use crate::cli::{BenchArgs, Global, ProveArgs};
use crate::render;
use anyhow::Result;
use pog_inspect::Severity;
use serde::Serialize;

/// How one stage ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StageStatus {
    Pass,
    /// Passed, with warnings worth reading.
    Warn,
    Fail,
}

impl From<Severity> for StageStatus {
    fn from(worst: Severity) -> Self {
        match worst {
            Severity::Info => StageStatus::Pass,
            Severity::Warn => StageStatus::Warn,
            Severity::Fail => StageStatus::Fail,
        }
    }
}

/// One stage's result.
#[derive(Serialize)]
pub struct Stage {
    pub name: &'static str,
    pub status: StageStatus,
    pub summary: String,
}

/// What `pog check --json` prints.
#[derive(Serialize)]
pub struct CheckReport {
    pub stages: Vec<Stage>,
    pub inspect: InspectReport,
    pub bench: BenchReport,
    pub prove: Vec<GpuProof>,
}

pub fn run(global: &Global) -> Result<Outcome> {
    let inspect = collect_and_inspect(global)?;
    let quick = BenchArgs {
        suite: pog_bench::Suite::Quick,
        gpus: None,
        sizes: None,
        precisions: None,
        iterations: None,
        copy_mib: None,
        sustained_seconds: None,
        gemm_rest_ms: None,
        no_gpu: false,
        no_host: false,
        storage_dir: None,
    };
    let bench = measure(global, &quick, &inspect.inventory)?;
    let (prove, prove_stage) = self_challenge(global, &inspect);
    let stages = vec![inspect_stage(&inspect), bench_stage(&bench), prove_stage];
    let failed = stages.iter().any(|s| s.status == StageStatus::Fail);
    let report = CheckReport {
        stages,
        inspect,
        bench,
        prove,
    };
    if global.json {
        print_json(&report)?;
    } else {
        render::origin_banner(&report.inspect.inventory.origin);
        render::host(&report.inspect.inventory.host);
        render::gpus(&report.inspect.inspection);
        render::findings(&report.inspect.inspection.findings, Severity::Warn);
        render::bench(&report.bench);
        if !report.prove.is_empty() {
            render::proofs(&report.prove);
        }
        render::stages(&report.stages);
        render::check_verdict(&report.stages, &report.inspect.inspection);
    }
    Ok(if failed {
        Outcome::Failed
    } else {
        Outcome::Passed
    })
}

/// The validator's per-model challenge on every genuine GPU, validator and agent in this
/// process. Skipped (not failed) where there is no real GPU to prove.
fn self_challenge(global: &Global, inspect: &InspectReport) -> (Vec<GpuProof>, Stage) {
    let stage = |status, summary| Stage {
        name: "prove",
        status,
        summary,
    };
    let genuine = inspect
        .inspection
        .gpus
        .iter()
        .any(|g| g.verdict == pog_inspect::GpuVerdict::Genuine);
    if global.simulate.is_some() || !genuine {
        let why = if global.simulate.is_some() {
            "simulated host"
        } else {
            "no genuine GPU"
        };
        return (
            Vec::new(),
            stage(
                StageStatus::Pass,
                format!("skipped: {why}, nothing to prove"),
            ),
        );
    }
    let args = ProveArgs {
        gpus: None,
        precision: None,
        size: None,
        batch: None,
        leaf_elements: pog_proof::params::LEAF_ELEMENTS,
        samples: 1024,
        expected_ms: None,
        against_cpu: false,
        prover: crate::cli::ProverKind::Gpu,
    };
    match super::prove::prove(global, &args, inspect) {
        Err(e) => (Vec::new(), stage(StageStatus::Fail, format!("{e:#}"))),
        Ok(proofs) => {
            let passed = proofs.iter().filter(|p| p.passed()).count();
            let worst = proofs
                .iter()
                .filter_map(|p| p.check.as_ref())
                .map(|c| c.time_ratio())
                .fold(0.0, f64::max);
            let summary = format!(
                "{passed} of {} GPU(s) passed the validator's challenge; slowest at {:.0} % of its time bound",
                proofs.len(),
                100.0 * worst
            );
            let status = if passed == proofs.len() {
                StageStatus::Pass
            } else {
                StageStatus::Fail
            };
            (proofs, stage(status, summary))
        }
    }
}

fn inspect_stage(report: &InspectReport) -> Stage {
    let insp = &report.inspection;
    let count = |s: Severity| insp.findings.iter().filter(|f| f.severity == s).count();
    let genuine = insp
        .gpus
        .iter()
        .filter(|g| g.verdict == pog_inspect::GpuVerdict::Genuine)
        .count();
    let summary = if insp.gpus.is_empty() {
        "no NVIDIA GPU found; host reported".to_string()
    } else {
        format!(
            "{genuine} of {} GPU(s) genuine; {} failing, {} warning finding(s)",
            insp.gpus.len(),
            count(Severity::Fail),
            count(Severity::Warn)
        )
    };
    Stage {
        name: "inspect",
        status: insp.worst().into(),
        summary,
    }
}

fn bench_stage(report: &BenchReport) -> Stage {
    use pog_bench::Verdict;
    let figures: Vec<Verdict> = report.gpus.iter().flat_map(|g| g.verdicts()).collect();
    let count = |v: Verdict| figures.iter().filter(|f| **f == v).count();
    let host = if report.host.is_some() {
        "; host measured"
    } else {
        ""
    };
    let summary = if report.gpus.is_empty() && report.gpu_errors.is_empty() {
        format!("quick suite: no GPU to measure{host}")
    } else {
        format!(
            "quick suite on {} GPU(s): {} figures, {} failing, {} warning{}{host}",
            report.gpus.len() + report.gpu_errors.len(),
            figures.len(),
            count(Verdict::Fail) + report.gpu_errors.len(),
            count(Verdict::Warn),
            if report.gpu_errors.is_empty() {
                String::new()
            } else {
                format!("; {}", report.gpu_errors.join("; "))
            }
        )
    };
    let status = match report.verdict() {
        Verdict::Fail => StageStatus::Fail,
        Verdict::Warn => StageStatus::Warn,
        Verdict::Pass | Verdict::Info => StageStatus::Pass,
    };
    Stage {
        name: "bench",
        status,
        summary,
    }
}
