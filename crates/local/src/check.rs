//! `pog check`, the provider's one command, as a pipeline any caller can run: inspection,
//! the quick benchmark suite, and the proof of GPU as the validator would run it (a
//! self-challenge), each reported as a stage with one verdict over all.

use crate::hostproof::{self, GpuProof, ProveOptions};
use pog_bench::{BenchError, BenchOptions, BenchReport, Progress, Suite, Verdict};
use pog_facts::{Origin, Platform};
use pog_inspect::{InspectReport, Severity};
use serde::Serialize;

/// How one stage ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StageStatus {
    /// Did not run (the summary says why): neither a pass nor a failure.
    Skipped,
    /// Ran and found nothing wrong.
    Pass,
    /// Passed, with warnings worth reading.
    Warn,
    /// Ran and found something that fails the check.
    Fail,
}

impl std::fmt::Display for StageStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StageStatus::Skipped => "skipped",
            StageStatus::Pass => "pass",
            StageStatus::Warn => "warn",
            StageStatus::Fail => "FAIL",
        })
    }
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

impl From<Verdict> for StageStatus {
    fn from(verdict: Verdict) -> Self {
        match verdict {
            Verdict::Fail => StageStatus::Fail,
            Verdict::Warn => StageStatus::Warn,
            Verdict::Pass | Verdict::Info => StageStatus::Pass,
        }
    }
}

/// One stage's result.
#[derive(Debug, Serialize)]
pub struct Stage {
    /// The stage's name, as printed (`inspect`, `bench`, `prove`).
    pub name: &'static str,
    /// How the stage ended.
    pub status: StageStatus,
    /// One line on what the stage found, or why it was skipped.
    pub summary: String,
}

/// What `pog check` found.
#[derive(Debug, Serialize)]
pub struct CheckReport {
    /// Each stage in the order it ran.
    pub stages: Vec<Stage>,
    /// The inspection's full report.
    pub inspect: InspectReport,
    /// The quick benchmark suite's full report.
    pub bench: BenchReport,
    /// Each GPU's self-challenge proof, as the validator would run it.
    pub prove: Vec<GpuProof>,
}

impl CheckReport {
    /// The worst stage that ran (a skipped stage neither passes nor fails the check).
    pub fn status(&self) -> StageStatus {
        self.stages
            .iter()
            .map(|s| s.status)
            .max()
            .unwrap_or(StageStatus::Skipped)
    }

    /// One line: the stages that failed, if any, and how many GPUs are genuine.
    pub fn summary(&self) -> String {
        let genuine = format!(
            "{} of {} GPU(s) genuine",
            self.inspect.genuine(),
            self.inspect.inspection.gpus.len()
        );
        let failed: Vec<&str> = self
            .stages
            .iter()
            .filter(|s| s.status == StageStatus::Fail)
            .map(|s| s.name)
            .collect();
        if failed.is_empty() {
            genuine
        } else {
            format!("{} failed; {genuine}", failed.join(", "))
        }
    }
}

/// Runs every stage on `platform`.
pub fn run(
    platform: &dyn Platform,
    progress: &mut dyn Progress,
) -> Result<CheckReport, BenchError> {
    let inspect = pog_inspect::run(platform);
    let bench = pog_bench::measure(
        platform,
        &inspect.inventory,
        &BenchOptions::suite(Suite::Quick),
        progress,
    )?;
    let (prove, prove_stage) = self_challenge(&inspect);
    let stages = vec![
        Stage {
            name: "inspect",
            status: inspect.inspection.worst().into(),
            summary: inspect.summary(),
        },
        bench_stage(&bench),
        prove_stage,
    ];
    Ok(CheckReport {
        stages,
        inspect,
        bench,
        prove,
    })
}

/// The validator's per-model challenge on every genuine GPU. Skipped where there is no real
/// GPU to prove.
fn self_challenge(inspect: &InspectReport) -> (Vec<GpuProof>, Stage) {
    let stage = |status, summary| Stage {
        name: "prove",
        status,
        summary,
    };
    if let Origin::Simulated { .. } = inspect.inventory.origin {
        let why = "skipped: a simulated host has no GPU to prove".to_string();
        return (Vec::new(), stage(StageStatus::Skipped, why));
    }
    if inspect.genuine() == 0 {
        let why = "skipped: no genuine GPU to prove".to_string();
        return (Vec::new(), stage(StageStatus::Skipped, why));
    }
    match hostproof::prove(inspect, &ProveOptions::default()) {
        Err(e) => (Vec::new(), stage(StageStatus::Fail, e.to_string())),
        Ok(proofs) => {
            let passed = proofs.iter().filter(|p| p.passed()).count();
            let worst = |ratios: &mut dyn Iterator<Item = f64>| ratios.fold(0.0, f64::max);
            let gemm = worst(
                &mut proofs
                    .iter()
                    .filter_map(|p| p.check.as_ref())
                    .map(|c| c.measured.time_ratio()),
            );
            let memory = worst(
                &mut proofs
                    .iter()
                    .filter_map(|p| p.memory.as_ref())
                    .map(|m| m.measured.time_ratio()),
            );
            let summary = format!(
                "{passed} of {} GPU(s) passed the validator's GEMM and memory challenges; slowest at {:.0} % (GEMM) and {:.0} % (memory) of the time bound",
                proofs.len(),
                100.0 * gemm,
                100.0 * memory
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

fn bench_stage(report: &BenchReport) -> Stage {
    let figures = report.verdicts();
    let count = |v: Verdict| figures.iter().filter(|f| **f == v).count();
    let host = if report.host.is_some() {
        "; host measured"
    } else {
        ""
    };
    if report.gpus.is_empty() && report.gpu_errors.is_empty() {
        return Stage {
            name: "bench",
            status: if report.host.is_some() {
                StageStatus::Pass
            } else {
                StageStatus::Skipped
            },
            summary: format!("quick suite: no GPU to measure{host}"),
        };
    }
    let errors: Vec<String> = report
        .gpu_errors
        .iter()
        .map(|e| format!("GPU {}: {}", e.ordinal, e.error))
        .collect();
    let summary = format!(
        "quick suite on {} GPU(s): {} figures, {} failing, {} warning{}{host}",
        report.gpus.len() + report.gpu_errors.len(),
        figures.len(),
        count(Verdict::Fail) + report.gpu_errors.len(),
        count(Verdict::Warn),
        if errors.is_empty() {
            String::new()
        } else {
            format!("; {}", errors.join("; "))
        }
    );
    Stage {
        name: "bench",
        status: report.verdict().into(),
        summary,
    }
}
