//! The command line: global options and one subcommand per job.

use clap::{Args, Parser, Subcommand};
use std::time::Duration;

/// Proof of GPU: check that a GPU is genuine, measure it, prove it to a remote validator.
#[derive(Debug, Parser)]
#[command(name = "pog", version, about, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,

    #[command(flatten)]
    pub global: Global,
}

/// Options every command takes.
#[derive(Debug, Args)]
pub struct Global {
    /// Print machine-readable JSON instead of tables.
    #[arg(long, global = true)]
    pub json: bool,

    /// The nvidia-smi to cross-check against (a bare name is looked up on PATH).
    #[arg(long, global = true, default_value = "nvidia-smi", value_name = "PATH")]
    pub nvidia_smi: String,

    /// Seconds to wait for nvidia-smi before giving up on it.
    #[arg(long, global = true, default_value = "20", value_name = "SECONDS", value_parser = parse_seconds)]
    pub nvidia_smi_timeout: Duration,

    /// Run against a simulated host instead of this machine (a test double; its output is
    /// never a result). PROFILE: models, then faults, e.g. "H200 SXM x2; ecc-off".
    #[arg(
        long,
        global = true,
        env = "POG_SIMULATE",
        hide = true,
        value_name = "PROFILE"
    )]
    pub simulate: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The main job: everything a validator will check on this host, with one verdict.
    Check,
    /// Inventory every GPU, CPU, memory and disk, and cross-check what each source reports.
    Inspect,
    /// List the GPU model database (or one model's full entry).
    Specs {
        /// A model name such as "H200 SXM" (as in the list).
        model: Option<String>,
    },
}

fn parse_seconds(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !(0.1..=3600.0).contains(&secs) {
        return Err(format!("{secs} s is outside 0.1-3600 s"));
    }
    Ok(Duration::from_secs_f64(secs))
}
