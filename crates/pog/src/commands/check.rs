//! `pog check`: the provider's one command. It runs every stage pog has and reports one line
//! per stage with an overall verdict. Today that is inspection; benchmarks, the self-proof,
//! the score and the ledger record join it as they land.

use super::inspect::{collect_and_inspect, InspectReport};
use super::{print_json, Outcome};
use crate::cli::Global;
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
}

pub fn run(global: &Global) -> Result<Outcome> {
    let inspect = collect_and_inspect(global)?;
    let stages = vec![inspect_stage(&inspect)];
    let failed = stages.iter().any(|s| s.status == StageStatus::Fail);
    let report = CheckReport { stages, inspect };
    if global.json {
        print_json(&report)?;
    } else {
        render::origin_banner(&report.inspect.inventory.origin);
        render::host(&report.inspect.inventory.host);
        render::gpus(&report.inspect.inspection);
        render::findings(&report.inspect.inspection.findings, Severity::Warn);
        render::stages(&report.stages);
        render::verdict(&report.inspect.inspection);
    }
    Ok(if failed {
        Outcome::Failed
    } else {
        Outcome::Passed
    })
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
