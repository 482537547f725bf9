//! `pog inspect`: collect every source, cross-check, show the evidence.

use super::{platform, print_json, Outcome, Verdict};
use crate::cli::Global;
use crate::render;
use anyhow::Result;
use pog_inspect::{InspectReport, Severity};

/// Collects and inspects (with a spinner on a terminal, as nvidia-smi can take seconds); a
/// simulated host is number `sim_host` unless its profile names another.
pub fn collect_and_inspect(global: &Global, sim_host: u64) -> Result<InspectReport> {
    let platform = platform(global, sim_host)?;
    let spinner = render::spinner(
        global.json,
        "reading NVML, CUDA, nvidia-smi, sysfs and procfs",
    );
    let report = pog_inspect::run(platform.as_ref());
    spinner.finish_and_clear();
    Ok(report)
}

/// The verdict of an inspection: any failing finding (a host without a GPU among them) fails.
pub fn verdict(report: &InspectReport) -> Verdict {
    match report.inspection.worst() {
        Severity::Fail => Verdict::Fail,
        Severity::Warn => Verdict::Warn,
        Severity::Info => Verdict::Pass,
    }
}

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
        render::verdict_line(verdict, &report.summary(), simulated);
    }
    Ok(Outcome(verdict))
}
