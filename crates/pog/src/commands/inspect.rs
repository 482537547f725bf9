//! `pog inspect`: collect every source, cross-check, show the evidence.

use super::{platform, print_json, Outcome};
use crate::cli::Global;
use crate::render;
use anyhow::Result;
use pog_device::Inventory;
use pog_inspect::Inspection;
use serde::Serialize;

/// What `pog inspect --json` prints: the raw facts and what pog concluded from them.
#[derive(Serialize)]
pub struct InspectReport {
    pub inventory: Inventory,
    pub inspection: Inspection,
}

/// Collects and inspects (with a spinner on a terminal, as nvidia-smi can take seconds).
pub fn collect_and_inspect(global: &Global) -> Result<InspectReport> {
    let platform = platform(global)?;
    let spinner = render::spinner(
        global.json,
        "reading NVML, CUDA, nvidia-smi, sysfs and procfs",
    );
    let inventory = pog_device::collect(platform.as_ref());
    spinner.finish_and_clear();
    let inspection = pog_inspect::inspect(&inventory, pog_spec::SpecDb::embedded());
    Ok(InspectReport {
        inventory,
        inspection,
    })
}

pub fn run(global: &Global) -> Result<Outcome> {
    let report = collect_and_inspect(global)?;
    if global.json {
        print_json(&report)?;
    } else {
        render::origin_banner(&report.inventory.origin);
        render::host(&report.inventory.host);
        render::gpus(&report.inspection);
        render::topology(&report.inventory);
        render::sources(&report.inventory);
        render::findings(&report.inspection.findings, pog_inspect::Severity::Info);
        render::verdict(&report.inspection);
    }
    Ok(if report.inspection.failed() {
        Outcome::Failed
    } else {
        Outcome::Passed
    })
}
