//! `pog monitor`: GPU health.
//!
//! - `pog monitor run` samples this host's GPUs through NVML (`pog-device`'s sampler), runs
//!   the detectors (`pog-monitor`) on every sample, prints each alert, and can record the trace
//!   (`--record`) and serve Prometheus metrics under dcgm-exporter's names
//!   (`--metrics-listen`).
//! - `pog monitor replay TRACE.csv [--train HEALTHY.csv]` runs the same detectors over a
//!   recorded trace.
//!
//! With `--json`, one JSON object per line and alert: `{"t", "kind", "severity", "signals",
//! "message"}` (`run` adds `"gpu"`). Exit status: 0 when no alert of severity warning or
//! critical fired (info alerts allowed), 1 when one did, 2 when pog could not run (a trace or
//! history that cannot be read, no NVML, a port taken).

use crate::cli::monitor::{MonitorArgs, MonitorCommand, ReplayArgs, RunArgs};
use crate::cli::Global;
use crate::host::data_dir;
use crate::output::{say, Outcome, Verdict};
use anyhow::{anyhow, bail, Context, Result};
use pog_monitor::history::Retention;
use pog_monitor::live::{LiveMonitor, Settings};
use pog_monitor::prometheus::GpuIdentity;
use pog_monitor::webhook::Webhook;
use pog_monitor::{replay, Alert, Config, Model, Sample, Severity, StepsBack, TraceReader};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// `pog monitor run` or `pog monitor replay`.
pub fn run(global: &Global, args: &MonitorArgs) -> Result<Outcome> {
    match &args.command {
        MonitorCommand::Run(run_args) => run_live(global, run_args),
        MonitorCommand::Replay(replay_args) => run_replay(global, replay_args),
    }
}

/// A trace file's samples. A history to learn from must be in time order
/// ([`StepsBack::Refuse`]); a trace only judged keeps a clock stepped back, which its replay
/// says once as `sample_gap` and goes on past ([`StepsBack::Keep`]).
fn load(path: &Path, steps_back: StepsBack) -> Result<Vec<Sample>> {
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    TraceReader::new(std::io::BufReader::new(file))
        .and_then(|reader| reader.steps_back(steps_back).collect())
        .with_context(|| format!("reading {}", path.display()))
}

/// The healthy history's model, from `--train`; a thin one (too few loads held to judge a
/// die's levels by) is taken, and said once.
fn train(path: Option<&Path>, config: &Config) -> Result<Option<Model>> {
    path.map(|path| {
        let history = load(path, StepsBack::Refuse)?;
        let model = Model::train(&history, config)
            .with_context(|| format!("learning baselines from {}", path.display()))?;
        if let Some(thin) = model.coverage.thin() {
            tracing::warn!(
                "the healthy history {} is thin ({thin}): each GPU's die is judged at each load from where it holds that load itself, and until it does against the thermal limits alone; train on a history that runs this GPU's loads",
                path.display()
            );
        }
        Ok(model)
    })
    .transpose()
}

fn run_replay(global: &Global, args: &ReplayArgs) -> Result<Outcome> {
    let config = Config::default();
    let model = train(args.train.as_deref(), &config)?;
    let trained = model
        .as_ref()
        .map(|m| format!("baselines from {} samples ({:.0} s)", m.samples, m.span_s));
    let samples = load(&args.trace, StepsBack::Keep)?;
    let alerts = replay(&samples, &config, model);
    let failing = alerts
        .iter()
        .filter(|a| a.severity >= Severity::Warning)
        .count();
    // The time the samples cover, a clock stepped back not counted against it.
    let span: f64 = samples
        .windows(2)
        .map(|pair| (pair[1].t - pair[0].t).max(0.0))
        .sum();
    let summary = format!(
        "{} alert(s), {failing} warning or critical, over {} samples ({span:.0} s); {}",
        alerts.len(),
        samples.len(),
        trained.unwrap_or_else(|| {
            "no --train: rule-based detectors only (and the slow-degradation watch, learning from the trace's own first hour)".into()
        })
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
                "t={:<9.2} {:<8} {:<20} {}\n{:<40} likely cause: {}; check: {}",
                alert.t,
                alert.severity.name(),
                alert.kind.name(),
                alert.message,
                "",
                alert.cause,
                alert.check
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

/// The `i`-th of `all` traces played back as GPU `i`: its UUID names the file (and its place,
/// when the same file is given twice).
fn replay_of(
    i: usize,
    path: &Path,
    all: &[std::path::PathBuf],
    limits: pog_monitor::Limits,
) -> Result<pog_monitor::Replay> {
    let twice = all.iter().filter(|p| p.as_path() == path).count() > 1;
    let uuid = match twice {
        true => format!("trace:{}#{i}", path.display()),
        false => format!("trace:{}", path.display()),
    };
    let identity = GpuIdentity {
        index: u32::try_from(i).context("too many traces")?,
        uuid,
        model_name: "recorded trace".into(),
        hostname: pog_device::monitor::hostname(),
        pci_bus_id: None,
        driver_version: None,
    };
    Ok(pog_monitor::Replay::new(identity, load(path, StepsBack::Keep)?).with_limits(limits))
}

fn run_live(global: &Global, args: &RunArgs) -> Result<Outcome> {
    let config = Config::default();
    let model = train(args.train.as_deref(), &config)?;
    let webhook_url = match &args.webhook {
        Some(url) => Some(Webhook::parse_url(url).map_err(|e| anyhow!("--webhook {e}"))?),
        None => None,
    };
    // Then the source: a monitor that cannot sample says why before it announces anything.
    if global.simulate.is_some() && args.from_trace.is_empty() {
        bail!(
            "pog monitor run samples real GPUs through NVML, and the simulated host has no \
             telemetry to sample: watch a recorded trace instead with --from-trace TRACE.csv \
             (e.g. crates/monitor/tests/data/h200-healthy.csv), or run `pog monitor replay \
             TRACE.csv`"
        );
    }
    let nvml;
    let limits = pog_monitor::Limits {
        slowdown_c: args.trace_slowdown_temp,
        shutdown_c: None,
        power_limit_w: args.trace_power_limit,
    };
    let mut source: Box<dyn pog_monitor::Source + '_> = match args.from_trace.as_slice() {
        [] => {
            nvml = pog_device::nvml::init().context("reading GPUs through NVML")?;
            let indices = match &args.gpus {
                Some(list) => list.clone(),
                None => (0..nvml.device_count().context("counting GPUs through NVML")?).collect(),
            };
            if indices.is_empty() {
                bail!("NVML sees no GPU to watch");
            }
            Box::new(pog_device::monitor::NvmlSource::open(
                &nvml,
                &indices,
                args.slow_every,
            )?)
        }
        [path] => Box::new(replay_of(0, path, &args.from_trace, limits)?),
        paths => Box::new(pog_monitor::Replays(
            paths
                .iter()
                .enumerate()
                .map(|(i, path)| replay_of(i, path, paths, limits))
                .collect::<Result<_>>()?,
        )),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("pog-monitor")
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let stop = Arc::new(AtomicBool::new(false));
    let signal = {
        let _runtime = rt.enter();
        pog_net::serve::stop_signal().context("installing the signal handlers")?
    };
    rt.spawn({
        let stop = stop.clone();
        async move {
            signal.await;
            stop.store(true, Ordering::Relaxed);
        }
    });
    let settings = Settings {
        config,
        model,
        duration: args.duration,
        history_flush: args.history_flush_seconds,
        ..Settings::default()
    };
    let json = global.json;
    let mut live = LiveMonitor::new(settings, Vec::new()).on_alert(Box::new(
        move |gpu: &GpuIdentity, alert: &Alert, value: &serde_json::Value| {
            report(json, gpu.index, alert, value)
        },
    ));
    if let Some(url) = webhook_url {
        live = live.deliver_to(Webhook::start(url, rt.handle().clone())?);
    }
    if !args.no_history {
        let path = match &args.history {
            Some(path) => path.clone(),
            None => data_dir(global)?.join("monitor.sqlite"),
        };
        let retention = Retention {
            raw: Duration::from_secs(args.history_raw_hours * 3600),
            minutes: Duration::from_secs(args.history_minute_days * 86_400),
        };
        live = live.keep_history(&path, retention)?;
    }
    if let Some(path) = &args.record {
        if source.identities().len() != 1 {
            bail!("--record writes one GPU's trace: choose the GPU with --gpus N");
        }
        let file =
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
        live = live.record(Box::new(file))?;
    }
    let live = Arc::new(live);
    if let Some(listen) = &args.metrics_listen {
        let listener = rt
            .block_on(tokio::net::TcpListener::bind(listen))
            .with_context(|| format!("cannot listen on {listen}"))?;
        let local = listener
            .local_addr()
            .context("the metrics listener's address")?;
        let stopped = stop.clone();
        rt.spawn(pog_net::serve::serve(
            listener,
            pog_monitor::serve::router(live.clone()),
            pog_net::serve::Limits::small_requests(),
            async move {
                while !stopped.load(Ordering::Relaxed) {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Duration::from_secs(2),
        ));
        eprintln!("pog monitor: serving metrics at http://{local}/metrics and the dashboard at http://{local}/");
    }
    let summary = live.run(source.as_mut(), args.interval, &stop)?;
    let summary_line = format!(
        "{} alert(s), {} warning or critical, {} round(s) of {} GPU(s) in {:.0} s",
        summary.alerts,
        summary.failing,
        summary.rounds,
        summary.gpus,
        summary.elapsed.as_secs_f64()
    );
    if global.json {
        eprintln!("pog monitor run: {summary_line}");
    } else {
        println!("{summary_line}");
    }
    Ok(Outcome(if summary.failing > 0 {
        Verdict::Fail
    } else {
        Verdict::Pass
    }))
}

/// Prints one alert: its JSON line, or a line for people (a reader that went away does not
/// stop the monitor).
fn report(json: bool, gpu: u32, alert: &Alert, value: &serde_json::Value) {
    if json {
        say(format_args!("{value}"));
    } else {
        say(format_args!(
            "GPU {gpu} t={:<9.2} {:<8} {:<20} {}\n{:<46} likely cause: {}; check: {}",
            alert.t,
            alert.severity.name(),
            alert.kind.name(),
            alert.message,
            "",
            alert.cause,
            alert.check
        ));
    }
}
