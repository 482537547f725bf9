//! How every command speaks, whatever it reports: its verdict and exit status, the JSON
//! envelope (`docs/json.md`), the table, the last line, a service's status lines and the
//! progress shown on stderr. It knows no command: commands and the renderers build on it.

use anyhow::{Context, Result};
use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{ContentArrangement, Row, Table};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::process::ExitCode;
use std::time::Duration;

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
    /// The process's exit code: its verdict's exit status.
    pub fn exit_code(self) -> ExitCode {
        ExitCode::from(self.0.exit_status())
    }
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

/// A command's last line: its verdict and the one-line summary (marked SIMULATED on the
/// simulated host, whose verdict is about nothing real).
pub fn verdict_line(verdict: Verdict, summary: &str, simulated: bool) {
    let word = match verdict {
        Verdict::Pass => "PASS",
        Verdict::Warn => "PASS with warnings",
        Verdict::Fail => "FAIL",
        Verdict::Error => "ERROR",
    };
    let marker = if simulated { "SIMULATED " } else { "" };
    println!("{marker}verdict: {word}: {summary}");
}

/// Every table pog prints: condensed UTF-8 borders, as wide as the terminal allows, under
/// `header`.
pub fn table(header: impl Into<Row>) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header);
    t
}

/// Prints a service's status line; a closed stdout (a supervisor that stopped reading) must
/// not stop a service, so write errors are ignored.
pub fn say(line: std::fmt::Arguments) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout(), "{line}");
}

/// A spinner on stderr; hidden for JSON output and when stderr is not a terminal.
pub fn spinner(json: bool, message: &str) -> ProgressBar {
    if json {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.set_message(message.to_string());
    bar.enable_steady_tick(Duration::from_millis(100));
    bar
}

/// A progress bar on stderr for a pipeline's steps; hidden for JSON output and off a
/// terminal.
pub struct Bar(ProgressBar);

impl Bar {
    /// A bar with no steps yet (the pipeline says how many); hidden when `json`.
    pub fn new(json: bool) -> Bar {
        if json {
            return Bar(ProgressBar::hidden());
        }
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template("{bar:30} {pos}/{len} {msg} ({elapsed})")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar.enable_steady_tick(Duration::from_millis(200));
        Bar(bar)
    }

    /// Clears the bar before the report is printed.
    pub fn finish(&self) {
        self.0.finish_and_clear();
    }
}

impl pog_bench::Progress for Bar {
    fn steps(&mut self, total: u64) {
        self.0.set_length(total);
    }
    fn step(&mut self, what: &str) {
        self.0.set_message(what.to_string());
        self.0.inc(1);
    }
}
