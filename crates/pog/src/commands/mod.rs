//! One module per subcommand (or family of them). Each orchestrates a library pipeline,
//! renders its report (a table, or JSON under the convention of `docs/json.md`) and returns
//! an [`Outcome`] that decides the exit status. A command reads the command line (`cli`) and
//! builds on the shared modules (`host`, `chain`, `output`, `render`); no command imports
//! another, and a module's own parts live under it (`ledger/anchor.rs`,
//! `service/agent_health.rs`).

mod bench;
mod check;
mod inspect;
mod ledger;
mod market;
mod monitor;
mod prove;
mod service;
mod specs;

use crate::cli::{Cli, Command};
use crate::output::Outcome;
use anyhow::Result;

/// Runs the command the command line names.
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
