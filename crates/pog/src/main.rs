//! `pog`: Proof of GPU. A thin binary over the library crates: it parses the command line,
//! picks the platform (real, or the simulated test double with `--simulate`), runs a
//! command's pipeline and renders its report as a table or JSON (`docs/json.md`).
//!
//! Exit status: 0 when every check passed (warnings allowed), 1 when a check failed, 2 when
//! pog itself could not run (bad flags or input). `docs/json.md` lists every case.

mod chain;
mod cli;
mod commands;
mod host;
mod output;
mod render;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    // SAFETY: first thing in main, before any thread exists.
    unsafe { pog_device::gpu::apply_nccl_defaults() };
    let cli = cli::Cli::parse();
    // Rust ignores SIGPIPE, so a report printed into a closed pipe (`pog specs | head`) would
    // panic; with the default action a one-shot command ends quietly instead, like any Unix
    // tool. Services keep ignoring it: a supervisor that stops reading their status lines must
    // not stop them (their writes ignore the error). Sockets are not affected either way: the
    // standard library sends with MSG_NOSIGNAL.
    if !cli.command.is_service() {
        // SAFETY: setting a signal's disposition to its default, before any thread exists.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    // Service logs: timestamped lines on stderr, `info` and up unless POG_LOG says otherwise
    // (e.g. POG_LOG=debug, or POG_LOG=info,pog_validator=debug: a default level and levels by
    // target, errors of the others as before); a POG_LOG that does not parse is the default.
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let levels = match std::env::var("POG_LOG").map(|v| v.parse::<Targets>()) {
        Ok(Ok(targets)) if targets.default_level().is_none() => {
            targets.with_default(LevelFilter::ERROR)
        }
        Ok(Ok(targets)) => targets,
        _ => Targets::new().with_default(LevelFilter::INFO),
    };
    // The levels decide alone: the formatter's own default (info) would drop every debug
    // event before they are asked.
    tracing_subscriber::fmt()
        .with_max_level(LevelFilter::TRACE)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .finish()
        .with(levels)
        .init();
    match commands::run(&cli) {
        Ok(outcome) => outcome.exit_code(),
        Err(e) => {
            let message = format!("{e:#}");
            if cli.global.json {
                output::print_json_error(cli.command.name(), &message);
            }
            eprintln!("pog: error: {message}");
            ExitCode::from(output::Verdict::Error.exit_status())
        }
    }
}
