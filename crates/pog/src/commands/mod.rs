//! One module per subcommand. Each orchestrates a library pipeline, renders its report (a
//! table, or JSON under the convention of `docs/json.md`) and returns an [`Outcome`] that
//! decides the exit status.

mod agent_health;
pub mod anchor;
pub mod bench;
pub mod check;
pub mod inspect;
pub mod ledger;
pub mod market;
pub mod monitor;
pub mod prove;
mod service;
mod specs;

use crate::cli::{Cli, Command, Global};
use anyhow::{Context, Result};
use pog_device::{RealConfig, RealPlatform};
use pog_facts::Platform;
use pog_sim::SimPlatform;
use serde::Serialize;
use std::process::ExitCode;

/// The version of every command's JSON shape (`docs/json.md`); bumped on any change that
/// could break a consumer.
pub const JSON_SCHEMA: u32 = 1;

/// A command's verdict, the first thing its JSON says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Every check passed.
    Pass,
    /// Every check passed, with warnings worth reading.
    Warn,
    /// At least one check failed: exit status 1.
    Fail,
    /// pog could not run (bad flags or input): exit status 2.
    Error,
}

impl Verdict {
    /// The exit status this verdict implies: 0 pass or warn, 1 fail, 2 error.
    pub fn exit_status(self) -> u8 {
        match self {
            Verdict::Pass | Verdict::Warn => 0,
            Verdict::Fail => 1,
            Verdict::Error => 2,
        }
    }
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome(pub Verdict);

impl Outcome {
    pub fn exit_code(self) -> ExitCode {
        ExitCode::from(self.0.exit_status())
    }
}

pub fn run(cli: &Cli) -> Result<Outcome> {
    match &cli.command {
        Command::Check => check::run(&cli.global),
        Command::Inspect => inspect::run(&cli.global),
        Command::Bench(args) => bench::run(&cli.global, args),
        Command::Prove(args) => prove::run(&cli.global, args),
        Command::Agent(args) => service::agent(&cli.global, args),
        Command::Validator(args) => service::validator(&cli.global, args),
        Command::Monitor(args) => monitor::run(&cli.global, args),
        Command::Score(args) => market::score_run(&cli.global, args),
        Command::Price(args) => market::price_run(&cli.global, args),
        Command::Market(args) => market::market_run(&cli.global, args),
        Command::Ledger(args) => ledger::ledger_run(&cli.global, args),
        Command::Verify(args) => ledger::verify_run(&cli.global, args),
        Command::Witness(args) => ledger::witness_run(&cli.global, args),
        Command::Specs { model } => specs::run(&cli.global, model.as_deref()),
    }
}

/// The machine to work on: this one, or the simulated double when `--simulate` asks for it,
/// as host number `sim_host` unless its profile names another (`host=N`).
pub fn platform(global: &Global, sim_host: u64) -> Result<Box<dyn Platform>> {
    Ok(match &global.simulate {
        Some(profile) => Box::new(
            SimPlatform::from_profile_or_host(profile, sim_host)
                .map_err(|e| anyhow::anyhow!("bad --simulate profile {profile:?}: {e}"))?,
        ),
        None => Box::new(RealPlatform::new(RealConfig {
            nvidia_smi: global.nvidia_smi.clone(),
            nvidia_smi_timeout: global.nvidia_smi_timeout,
            ..RealConfig::default()
        })),
    })
}

/// Every command's JSON: what it is, its verdict and exit status, a one-line summary, then
/// the command's own report.
#[derive(Serialize)]
struct Envelope<'a, T: Serialize> {
    /// `pog.<command>/<version>`.
    schema: String,
    verdict: Verdict,
    exit_status: u8,
    summary: &'a str,
    /// True when the host was the simulated test double: nothing in it is a result.
    simulated: bool,
    #[serde(flatten)]
    report: &'a T,
}

/// Prints a command's report as JSON on stdout, in its envelope.
pub fn print_json(
    command: &str,
    verdict: Verdict,
    summary: &str,
    simulated: bool,
    report: &impl Serialize,
) -> Result<()> {
    let envelope = Envelope {
        schema: format!("pog.{command}/{JSON_SCHEMA}"),
        verdict,
        exit_status: verdict.exit_status(),
        summary,
        simulated,
        report,
    };
    println!(
        "{}",
        serde_json::to_string_pretty(&envelope).context("serializing the result")?
    );
    Ok(())
}

/// The JSON of a command that could not run: the error where a script reads the verdict.
pub fn print_json_error(command: &str, error: &str) {
    #[derive(Serialize)]
    struct Failure<'a> {
        error: &'a str,
    }
    // Nothing more can be done if even this fails: the exit status still says 2.
    let _ = print_json(command, Verdict::Error, error, false, &Failure { error });
}
