//! `pog inspect`: collect every source, cross-check, show the evidence.

use crate::cli::Global;
use crate::host::collect_and_inspect;
use crate::output::{print_json, verdict_line, Outcome, Verdict};
use crate::render;
use anyhow::Result;
use pog_inspect::{InspectReport, Severity};

/// The verdict of an inspection: any failing finding (a host without a GPU among them) fails.
pub fn verdict(report: &InspectReport) -> Verdict {
    match report.inspection.worst() {
        Severity::Fail => Verdict::Fail,
        Severity::Warn => Verdict::Warn,
        Severity::Info => Verdict::Pass,
    }
}

/// `pog inspect`: collects, cross-checks and shows the evidence.
pub fn run(global: &Global) -> Result<Outcome> {
    let report = collect_and_inspect(global, pog_sim::DEFAULT_HOST)?;
    let verdict = verdict(&report);
    let simulated = render::is_simulated(&report.inventory.origin);
    if global.json {
        print_json("inspect", verdict, &report.summary(), simulated, &report)?;
    } else {
        render::origin_banner(&report.inventory.origin);
        render::host(&report.inventory.host);
        render::gpus(&report.inspection);
        render::topology(&report.inventory);
        render::sources(&report.inventory);
        render::findings(&report.inspection.findings, Severity::Info);
        verdict_line(verdict, &report.summary(), simulated);
    }
    Ok(Outcome(verdict))
}
