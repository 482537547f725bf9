//! The command line: global options and one subcommand per job. The flags of each command
//! module's jobs live in the submodule of the same name (`cli::ledger` for
//! `commands::ledger`). Nothing here knows the commands: they read the command line, never the
//! other way round.

pub mod bench;
pub mod ledger;
pub mod market;
pub mod monitor;
mod parse;
pub mod prove;
pub mod service;

use clap::{Args, Parser, Subcommand};
use parse::parse_seconds;
use std::time::Duration;

/// Proof of GPU: check that a GPU is genuine, measure it, prove it to a remote validator.
#[derive(Debug, Parser)]
#[command(name = "pog", version, about, propagate_version = true)]
pub struct Cli {
    /// The job to run.
    #[command(subcommand)]
    pub command: Command,

    /// The options every command takes.
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

    /// Where pog keeps its keys and the validator's registry [default: $XDG_DATA_HOME/pog,
    /// else ~/.local/share/pog].
    #[arg(long, global = true, env = "POG_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<std::path::PathBuf>,

    /// Tour pog without a GPU: run against a simulated host instead of this machine. A test
    /// double: every line and record it produces says SIMULATED, and validators refuse its
    /// GPUs. PROFILE: models, then faults and an optional host number, e.g.
    /// "H200 SXM x2; ecc-off, host=7": hosts of different numbers have different GPU UUIDs and
    /// serials. Without host=N it is host 0, except that `pog agent` derives N from its key, so
    /// many simulated agents (each with its own --data-dir) can register with one validator.
    #[arg(long, global = true, env = "POG_SIMULATE", value_name = "PROFILE")]
    pub simulate: Option<String>,
}

/// The subcommands, one per job.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// The main job: everything a validator will check on this host, with one verdict.
    Check,
    /// Inventory every GPU, CPU, memory and disk, and cross-check what each source reports.
    Inspect,
    /// Measure every GPU (GEMM in every precision, copies) and the host (CPU, memory, storage).
    Bench(bench::BenchArgs),
    /// Prove this host's GPUs as a validator would: a self-challenge, validator and agent in
    /// one process, with the time against the claimed model's bound and the spot checks.
    Prove(prove::ProveArgs),
    /// Serve this host's GPUs to a validator: register, then answer its signed challenges.
    Agent(service::AgentArgs),
    /// Register agents, challenge their GPUs on a schedule, verify and record the results.
    Validator(service::ValidatorArgs),
    /// GPU health: sample every GPU through NVML with anomaly detection, alerts, history, /metrics
    /// and a dashboard (`run`), or replay the detectors over a recorded trace (`replay`).
    Monitor(monitor::MonitorArgs),
    /// The Proof-of-GPU score of this host (a fresh `pog check`) or of a saved report.
    Score(market::ScoreArgs),
    /// The price per GPU-hour of this host's GPUs (or of a model), from its score and the market.
    Price(market::PriceArgs),
    /// A validator's order book for GPU-hours: submit, cancel, book, clear, history.
    Market(market::MarketArgs),
    /// The validator's transparency log: append, checkpoint, prove, export one GPU's bundle.
    Ledger(ledger::LedgerArgs),
    /// Check one GPU's whole history offline from a proof bundle (`pog ledger export`).
    Verify(ledger::VerifyArgs),
    /// A witness: cosign a log's new checkpoint once it is consistent with the last one.
    Witness(ledger::WitnessArgs),
    /// List the GPU model database (or one model's full entry).
    Specs {
        /// A model name such as "H200 SXM" (as in the list).
        model: Option<String>,
    },
}

impl Command {
    /// Whether the command is a long-running service (agent, validator, witness, monitor):
    /// one that must outlive a reader of its stdout going away.
    pub fn is_service(&self) -> bool {
        use ledger::WitnessAction;
        use monitor::MonitorCommand;
        match self {
            Command::Agent(_) | Command::Validator(_) => true,
            Command::Witness(w) => matches!(w.action, WitnessAction::Serve(_)),
            Command::Monitor(m) => matches!(m.command, MonitorCommand::Run(_)),
            _ => false,
        }
    }

    /// The command's name, as its JSON schema names it.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Check => "check",
            Command::Inspect => "inspect",
            Command::Bench(_) => "bench",
            Command::Prove(_) => "prove",
            Command::Agent(_) => "agent",
            Command::Validator(_) => "validator",
            Command::Monitor(_) => "monitor",
            Command::Score(_) => "score",
            Command::Price(_) => "price",
            Command::Market(args) => args.action.name(),
            Command::Ledger(args) => args.action.name(),
            Command::Verify(_) => "verify",
            Command::Witness(args) => args.action.name(),
            Command::Specs { .. } => "specs",
        }
    }
}
