//! `pog monitor`: GPU health. `pog monitor replay TRACE.csv [--train HEALTHY.csv]` runs the
//! live detectors (`pog-monitor`) over a recorded trace and prints each alert; with `--json`,
//! one JSON object per line and alert: `{"t", "kind", "severity", "signals", "message"}`.
//!
//! Exit status: 0 when no alert of severity warning or critical fired (info alerts allowed),
//! 1 when one did, 2 when the trace or the training history could not be read.

use super::{Outcome, Verdict};
use crate::cli::Global;
use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use pog_monitor::{read_trace, replay, Config, Model, Sample, Severity};
use std::path::{Path, PathBuf};

/// What `pog monitor` does.
#[derive(Debug, Args)]
pub struct MonitorArgs {
    #[command(subcommand)]
    pub command: MonitorCommand,
}

/// `pog monitor`'s subcommands.
#[derive(Debug, Subcommand)]
pub enum MonitorCommand {
    /// Run the health detectors over a recorded trace CSV and print every alert they raise
    /// (exit 1 if any is a warning or critical).
    Replay(ReplayArgs),
}

/// What `pog monitor replay` reads.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The trace: a CSV with the columns t,phase,temp_gpu,temp_mem,power_w,energy_mj,
    /// util_gpu,util_mem,mem_used_mib,sm_clock,mem_clock,clock_reasons,pcie_tx_kbs,
    /// pcie_rx_kbs,pcie_replay,ecc_corr,ecc_uncorr (extra columns ignored, empty cells not
    /// read).
    pub trace: PathBuf,
    /// Healthy history of the same GPU (same columns) to learn its baselines from. Without
    /// it only the rule-based detectors run (throttle reasons, error counters, XIDs, leaks,
    /// frozen sensors, absolute thermal limits).
    #[arg(long, value_name = "HEALTHY.csv")]
    pub train: Option<PathBuf>,
}

pub fn run(global: &Global, args: &MonitorArgs) -> Result<Outcome> {
    match &args.command {
        MonitorCommand::Replay(replay_args) => run_replay(global, replay_args),
    }
}

fn load(path: &Path) -> Result<Vec<Sample>> {
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    read_trace(std::io::BufReader::new(file)).with_context(|| format!("reading {}", path.display()))
}

fn run_replay(global: &Global, args: &ReplayArgs) -> Result<Outcome> {
    let config = Config::default();
    let model = match &args.train {
        Some(path) => {
            let history = load(path)?;
            Some(
                Model::train(&history, &config)
                    .with_context(|| format!("learning baselines from {}", path.display()))?,
            )
        }
        None => None,
    };
    let trained = model
        .as_ref()
        .map(|m| format!("baselines from {} samples ({:.0} s)", m.samples, m.span_s));
    let samples = load(&args.trace)?;
    let alerts = replay(&samples, &config, model);
    let failing = alerts
        .iter()
        .filter(|a| a.severity >= Severity::Warning)
        .count();
    let span = match (samples.first(), samples.last()) {
        (Some(a), Some(b)) => b.t - a.t,
        _ => 0.0,
    };
    let summary = format!(
        "{} alert(s), {failing} warning or critical, over {} samples ({span:.0} s); {}",
        alerts.len(),
        samples.len(),
        trained.unwrap_or_else(|| "no --train: rule-based detectors only".into())
    );
    if global.json {
        for alert in &alerts {
            println!(
                "{}",
                serde_json::to_string(alert).context("serializing an alert")?
            );
        }
        eprintln!("pog monitor replay: {summary}");
    } else {
        for alert in &alerts {
            println!(
                "t={:<9.2} {:<8} {:<20} {}",
                alert.t,
                alert.severity.name(),
                alert.kind.name(),
                alert.message
            );
        }
        println!("{summary}");
    }
    Ok(Outcome(if failing > 0 {
        Verdict::Fail
    } else {
        Verdict::Pass
    }))
}
