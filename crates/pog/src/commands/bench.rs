//! `pog bench`: measure every GPU and the host, check and judge every figure
//! (`pog_bench::measure`).

use crate::cli::bench::BenchArgs;
use crate::cli::Global;
use crate::host::platform;
use crate::output::{print_json, verdict_line, Bar, Outcome, Verdict};
use crate::render;
use anyhow::Result;
use pog_bench::{BenchOptions, BenchReport, Overrides};

/// The command's verdict: the worst figure's.
pub fn verdict(report: &BenchReport) -> Verdict {
    match report.verdict() {
        pog_bench::Verdict::Fail => Verdict::Fail,
        pog_bench::Verdict::Warn => Verdict::Warn,
        pog_bench::Verdict::Pass | pog_bench::Verdict::Info => Verdict::Pass,
    }
}

/// One line: what was measured and how it was judged.
fn summary(report: &BenchReport) -> String {
    let figures = report.verdicts();
    let count = |v: pog_bench::Verdict| figures.iter().filter(|f| **f == v).count();
    format!(
        "{} suite on {} GPU(s): {} figures, {} failing, {} warning; {} GPU(s) could not be opened{}",
        report.suite,
        report.gpus.len() + report.gpu_errors.len(),
        figures.len(),
        count(pog_bench::Verdict::Fail),
        count(pog_bench::Verdict::Warn),
        report.gpu_errors.len(),
        if report.host.is_some() { "; host measured" } else { "" }
    )
}

/// `pog bench`: measures, judges and reports.
pub fn run(global: &Global, args: &BenchArgs) -> Result<Outcome> {
    let platform = platform(global, pog_sim::DEFAULT_HOST)?;
    let inventory = pog_facts::collect(platform.as_ref());
    let options = BenchOptions {
        suite: args.suite,
        gpus: args.gpus.clone(),
        overrides: Overrides {
            sizes: args.sizes.clone(),
            precisions: args.precisions.clone(),
            iterations: args.iterations,
            copy_bytes: args.copy_mib.map(|m| m << 20),
            sustained_seconds: args.sustained_seconds,
            gemm_rest_ms: args.gemm_rest_ms,
            gemm_run_rest_ms: args.gemm_run_rest_ms,
        },
        no_gpu: args.no_gpu,
        no_host: args.no_host,
        storage_dir: args.storage_dir.clone(),
    };
    let mut progress = Bar::new(global.json);
    let report = pog_bench::measure(platform.as_ref(), &inventory, &options, &mut progress)?;
    progress.finish();
    let verdict = verdict(&report);
    let summary = summary(&report);
    let simulated = render::is_simulated(&report.origin);
    if global.json {
        print_json("bench", verdict, &summary, simulated, &report)?;
    } else {
        render::origin_banner(&report.origin);
        render::bench(&report);
        verdict_line(verdict, &summary, simulated);
    }
    Ok(Outcome(verdict))
}
