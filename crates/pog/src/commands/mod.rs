//! One module per subcommand; each returns an [`Outcome`] that decides the exit status.

pub mod bench;
pub mod check;
pub mod inspect;
pub mod prove;
mod service;
mod specs;

use crate::cli::{Cli, Command, Global};
use anyhow::{Context, Result};
use pog_device::sim::SimPlatform;
use pog_device::{Platform, RealConfig, RealPlatform};
use std::process::ExitCode;

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Every check passed (warnings allowed).
    Passed,
    /// At least one check failed.
    Failed,
}

impl Outcome {
    pub fn exit_code(self) -> ExitCode {
        match self {
            Outcome::Passed => ExitCode::SUCCESS,
            Outcome::Failed => ExitCode::from(1),
        }
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
        Command::Specs { model } => specs::run(&cli.global, model.as_deref()),
    }
}

/// The machine to work on: this one, or the simulated double when asked for.
pub fn platform(global: &Global) -> Result<Box<dyn Platform>> {
    Ok(match &global.simulate {
        Some(profile) => Box::new(
            SimPlatform::from_profile(profile)
                .map_err(|e| anyhow::anyhow!("bad --simulate profile {profile:?}: {e}"))?,
        ),
        None => Box::new(RealPlatform::new(RealConfig {
            nvidia_smi: global.nvidia_smi.clone(),
            nvidia_smi_timeout: global.nvidia_smi_timeout,
            ..RealConfig::default()
        })),
    })
}

/// Prints a value as pretty JSON on stdout.
pub fn print_json(value: &impl serde::Serialize) -> Result<()> {
    println!(
        "{}",
        serde_json::to_string_pretty(value).context("serializing the result")?
    );
    Ok(())
}
