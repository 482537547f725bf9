//! The flags of `pog monitor`.

use super::parse::parse_seconds;
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

/// What `pog monitor` does.
#[derive(Debug, Args)]
pub struct MonitorArgs {
    /// Watch live, or replay a trace.
    #[command(subcommand)]
    pub command: MonitorCommand,
}

/// `pog monitor`'s subcommands.
#[derive(Debug, Subcommand)]
pub enum MonitorCommand {
    /// Watch this host's GPUs: sample them through NVML, run the health detectors on every
    /// sample and print each alert (exit 1 if any was a warning or critical).
    Run(Box<RunArgs>),
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
    /// frozen sensors, absolute thermal limits), with the slow-degradation watch learning
    /// from the trace's own first hour.
    #[arg(long, value_name = "HEALTHY.csv")]
    pub train: Option<PathBuf>,
}

/// What `pog monitor run` watches and where it reports.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Seconds between samples (0.1 to 3600).
    #[arg(long, default_value = "1", value_parser = parse_seconds)]
    pub interval: Duration,
    /// NVML indices of the GPUs to watch, e.g. 0,2 (default: all).
    #[arg(long, value_delimiter = ',', value_name = "N,...")]
    pub gpus: Option<Vec<u32>>,
    /// Read the costly and the slow-changing fields (total energy, PCIe throughput, aggregate
    /// ECC, retired pages, remapped rows, processes, NVLink) only every N-th sample; the samples
    /// between carry their last reading.
    #[arg(long, default_value_t = pog_device::monitor::DEFAULT_SLOW_EVERY, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub slow_every: u64,
    /// Healthy history of this GPU (a trace CSV) to learn its baselines from; without it only
    /// the rule-based detectors run, with the slow-degradation watch learning from each GPU's
    /// own first hour.
    #[arg(long, value_name = "HEALTHY.csv")]
    pub train: Option<PathBuf>,
    /// Write every sample to this trace CSV (the format `replay` reads; one GPU at a time),
    /// flushed after each sample.
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Serve Prometheus metrics (dcgm-exporter's names and labels, pog's extras) at
    /// http://HOST:PORT/metrics.
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics_listen: Option<String>,
    /// Stop after this many seconds [default: at SIGINT or SIGTERM].
    #[arg(long, value_name = "SECONDS", value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// The history database [default: monitor.sqlite in the data dir]: raw samples, 1-minute
    /// aggregates and alerts, written in batches.
    #[arg(long, value_name = "FILE")]
    pub history: Option<PathBuf>,
    /// Keep no history.
    #[arg(long, conflicts_with = "history")]
    pub no_history: bool,
    /// Seconds between two writes of the history (a killed monitor loses at most this much).
    #[arg(long, default_value = "5", value_name = "SECONDS", value_parser = parse_seconds)]
    pub history_flush_seconds: Duration,
    /// Hours of raw samples kept.
    #[arg(long, default_value = "24", value_parser = clap::value_parser!(u64).range(1..=87_600))]
    pub history_raw_hours: u64,
    /// Days of 1-minute aggregates and alerts kept.
    #[arg(long, default_value = "30", value_parser = clap::value_parser!(u64).range(1..=36_500))]
    pub history_minute_days: u64,
    /// POST each alert as JSON to this URL (http or https), retried with backoff; a webhook
    /// that is down or slow never holds up the sampling.
    #[arg(long, value_name = "URL")]
    pub webhook: Option<String>,
    /// Feed the rows of a recorded trace, one per --interval, as GPU 0 instead of reading
    /// NVML (tests and demos without a GPU); given again, each further trace is one more GPU
    /// (GPU 1, 2, …), as a host of several GPUs.
    #[arg(long, value_name = "TRACE.csv", conflicts_with = "gpus")]
    pub from_trace: Vec<PathBuf>,
    /// The recorded GPUs' power limit in W, drawn on the dashboard (a trace does not carry
    /// it; on a live GPU NVML reports it).
    #[arg(long, value_name = "W", requires = "from_trace", value_parser = parse_limit)]
    pub trace_power_limit: Option<f64>,
    /// The recorded GPUs' slowdown temperature in °C, drawn on the dashboard (a trace does
    /// not carry it; on a live GPU NVML reports it).
    #[arg(long, value_name = "CELSIUS", requires = "from_trace", value_parser = parse_limit)]
    pub trace_slowdown_temp: Option<f64>,
}

/// A limit: a number above 0 and below 100 000.
fn parse_limit(s: &str) -> Result<f64, String> {
    let value: f64 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
    if value > 0.0 && value < 100_000.0 {
        Ok(value)
    } else {
        Err(format!(
            "{s} is out of range: give a number above 0 and below 100000"
        ))
    }
}

/// How long to run: more than 0 s and up to a year, in seconds.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !(secs > 0.0 && secs <= 31_536_000.0) {
        return Err(format!("{secs} s is outside 0-31536000 s"));
    }
    Ok(Duration::from_secs_f64(secs))
}
