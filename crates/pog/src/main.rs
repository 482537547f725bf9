//! `pog`: Proof of GPU. A thin binary over the library crates: it parses the command line,
//! picks the platform (real, or the simulated test double), runs a command and renders its
//! result as a table or JSON.
//!
//! Exit status: 0 when every check passed (warnings allowed), 1 when a check failed, 2 when
//! pog itself could not run (bad flags or input).

mod cli;
mod commands;
mod render;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match commands::run(&cli) {
        Ok(outcome) => outcome.exit_code(),
        Err(e) => {
            eprintln!("pog: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
