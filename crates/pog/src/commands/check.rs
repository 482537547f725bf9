//! `pog check`: the provider's one command. It runs the `pog_local::check` pipeline
//! (inspection, the quick benchmark suite, the validator's challenge as a self-challenge) and
//! reports one line per stage with an overall verdict.

use crate::cli::Global;
use crate::host::platform;
use crate::output::{print_json, verdict_line, Bar, Outcome, Verdict};
use crate::render;
use anyhow::Result;
use pog_inspect::Severity;
use pog_local::check::StageStatus;

/// `pog check`: runs the pipeline and reports each stage and the verdict.
pub fn run(global: &Global) -> Result<Outcome> {
    let platform = platform(global, pog_sim::DEFAULT_HOST)?;
    let mut progress = Bar::new(global.json);
    let report = pog_local::check::run(platform.as_ref(), &mut progress)?;
    progress.finish();
    let verdict = match report.status() {
        StageStatus::Fail => Verdict::Fail,
        StageStatus::Warn => Verdict::Warn,
        StageStatus::Pass => Verdict::Pass,
        // Nothing ran at all: nothing passed either.
        StageStatus::Skipped => Verdict::Fail,
    };
    let summary = report.summary();
    let simulated = render::is_simulated(&report.inspect.inventory.origin);
    if global.json {
        print_json("check", verdict, &summary, simulated, &report)?;
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
        verdict_line(verdict, &summary, simulated);
    }
    Ok(Outcome(verdict))
}
