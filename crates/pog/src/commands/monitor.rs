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
use anyhow::{bail, Context, Result};
use pog_monitor::history::{History, Retention};
use pog_monitor::prometheus::{GpuIdentity, GpuMetrics, SamplerHealth};
use pog_monitor::trace::Columns;
use pog_monitor::{
    read_trace, replay, Alert, Config, Model, Monitor, Sample, Severity, TraceWriter,
};
use pog_net::locked::Locked;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// `pog monitor run` or `pog monitor replay`.
pub fn run(global: &Global, args: &MonitorArgs) -> Result<Outcome> {
    match &args.command {
        MonitorCommand::Run(run_args) => run_live(global, run_args),
        MonitorCommand::Replay(replay_args) => run_replay(global, replay_args),
    }
}

fn load(path: &Path) -> Result<Vec<Sample>> {
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    read_trace(std::io::BufReader::new(file)).with_context(|| format!("reading {}", path.display()))
}

fn train(path: Option<&Path>, config: &Config) -> Result<Option<Model>> {
    path.map(|path| {
        let history = load(path)?;
        Model::train(&history, config)
            .with_context(|| format!("learning baselines from {}", path.display()))
    })
    .transpose()
}

fn run_replay(global: &Global, args: &ReplayArgs) -> Result<Outcome> {
    let config = Config::default();
    let model = train(args.train.as_deref(), &config)?;
    let trained = model
        .as_ref()
        .map(|m| format!("baselines from {} samples ({:.0} s)", m.samples, m.span_s));
    let samples = load(&args.trace)?;
    let alerts = replay(&samples, &config, model);
    let failing = alerts
        .iter()
        .filter(|a| a.severity >= Severity::Warning)
        .count();
    let span = match (samples.first(), samples.last()) {
        (Some(a), Some(b)) => b.t - a.t,
        _ => 0.0,
    };
    let summary = format!(
        "{} alert(s), {failing} warning or critical, over {} samples ({span:.0} s); {}",
        alerts.len(),
        samples.len(),
        trained.unwrap_or_else(|| "no --train: rule-based detectors only".into())
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
                "t={:<9.2} {:<8} {:<20} {}",
                alert.t,
                alert.severity.name(),
                alert.kind.name(),
                alert.message
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

/// What `/metrics` and the dashboard show: each GPU's latest state and recent samples.
#[derive(Default)]
struct Live {
    gpus: Vec<LiveGpu>,
    health: SamplerHealth,
    /// The latest alerts, newest last, with the GPU's index.
    alerts: std::collections::VecDeque<(u32, Alert)>,
    /// The history file, for the dashboard's longer windows.
    history: Option<PathBuf>,
    /// Unix time of t = 0.
    unix_start: f64,
}

/// Seconds of samples the dashboard keeps in memory; longer windows read the history.
const RECENT_S: f64 = 900.0;
/// Alerts the dashboard lists.
const RECENT_ALERTS: usize = 100;
/// The dashboard's zoom links.
const WINDOWS: [(f64, &str); 5] = [
    (60.0, "1 minute"),
    (600.0, "10 minutes"),
    (3600.0, "1 hour"),
    (86_400.0, "1 day"),
    (2_592_000.0, "30 days"),
];

struct LiveGpu {
    identity: GpuIdentity,
    /// `(t_unix, sample)`, the last RECENT_S seconds.
    recent: std::collections::VecDeque<(f64, Sample)>,
    sample: Option<Sample>,
    xids: (u64, u32),
    anomaly_score: Option<f64>,
    alerts_firing: usize,
}

type Shared = Arc<Mutex<Live>>;

/// The dashboard's query: the window, in seconds.
#[derive(serde::Deserialize)]
struct View {
    window: Option<f64>,
}

/// The charts of a long window, from the history's 1-minute means.
fn charts_from_history(
    path: &Path,
    uuid: &str,
    since_unix: f64,
) -> Result<Vec<pog_monitor::dashboard::Chart>, pog_monitor::history::HistoryError> {
    use pog_monitor::dashboard::{Chart, Series, SIGNAL_CHARTS};
    let history = pog_monitor::history::History::open_read_only(path)?;
    SIGNAL_CHARTS
        .iter()
        .map(|(title, lines)| {
            let series = lines
                .iter()
                .map(|&(name, signal)| {
                    Ok(Series {
                        name: name.to_string(),
                        points: history
                            .minutes(uuid, signal, since_unix)?
                            .into_iter()
                            .map(|(t, _, mean, _)| (t, mean))
                            .collect(),
                    })
                })
                .collect::<Result<_, pog_monitor::history::HistoryError>>()?;
            Ok(Chart {
                title: format!("{title}, 1-minute means"),
                series,
            })
        })
        .collect()
}

async fn dashboard(
    axum::extract::State(live): axum::extract::State<Shared>,
    axum::extract::Query(view): axum::extract::Query<View>,
) -> axum::response::Response {
    use axum::http::StatusCode;
    use axum::response::{Html, IntoResponse};
    use pog_monitor::dashboard::{charts, page, GpuPanel};
    let window = view
        .window
        .filter(|w| w.is_finite() && *w > 0.0)
        .unwrap_or(600.0)
        .min(WINDOWS[WINDOWS.len() - 1].0);
    let label = WINDOWS
        .iter()
        .find(|(seconds, _)| *seconds == window)
        .map_or_else(|| format!("{window:.0} s"), |(_, label)| label.to_string());
    let (identities, recent, alerts, history, now) = {
        let live = live.locked();
        let now = live.unix_start
            + live
                .gpus
                .iter()
                .filter_map(|g| g.recent.back().map(|r| r.0 - live.unix_start))
                .fold(0.0, f64::max);
        (
            live.gpus
                .iter()
                .map(|g| g.identity.clone())
                .collect::<Vec<_>>(),
            live.gpus
                .iter()
                .map(|g| {
                    g.recent
                        .iter()
                        .filter(|(t, _)| now - t <= window)
                        .cloned()
                        .collect::<Vec<_>>()
                })
                .collect::<Vec<_>>(),
            live.alerts.iter().rev().cloned().collect::<Vec<_>>(),
            live.history.clone(),
            now,
        )
    };
    let rendered = tokio::task::spawn_blocking(move || -> Result<String, String> {
        let mut panels = Vec::new();
        for (identity, samples) in identities.iter().zip(recent) {
            let charts = match (&history, window > RECENT_S) {
                (Some(path), true) => charts_from_history(path, &identity.uuid, now - window)
                    .map_err(|e| e.to_string())?,
                _ => charts(&samples),
            };
            panels.push(GpuPanel { identity, charts });
        }
        let alerts: Vec<(u32, &Alert)> = alerts.iter().map(|(g, a)| (*g, a)).collect();
        page(&panels, &alerts, now, (window, &label), &WINDOWS, 2).map_err(|e| e.to_string())
    })
    .await;
    match rendered {
        Ok(Ok(html)) => Html(html).into_response(),
        Ok(Err(e)) => (StatusCode::INTERNAL_SERVER_ERROR, e).into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "the dashboard failed").into_response(),
    }
}

async fn metrics(
    axum::extract::State(live): axum::extract::State<Shared>,
) -> axum::response::Response {
    use axum::http::{header, StatusCode};
    use axum::response::IntoResponse;
    let rendered = {
        let live = live.locked();
        let gpus: Vec<GpuMetrics<'_>> = live
            .gpus
            .iter()
            .map(|g| GpuMetrics {
                identity: &g.identity,
                sample: g.sample.as_ref(),
                xid_total: g.xids.0,
                last_xid: g.xids.1,
                anomaly_score: g.anomaly_score,
                alerts_firing: g.alerts_firing,
                last_proof_ratio: None,
            })
            .collect();
        pog_monitor::prometheus::render(&gpus, live.health)
    };
    match rendered {
        Ok(text) => (
            [(header::CONTENT_TYPE, pog_monitor::prometheus::CONTENT_TYPE)],
            text,
        )
            .into_response(),
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "rendering the metrics failed",
        )
            .into_response(),
    }
}

fn run_live(global: &Global, args: &RunArgs) -> Result<Outcome> {
    let config = Config::default();
    let model = train(args.train.as_deref(), &config)?;
    let webhook_url = match &args.webhook {
        Some(url) => Some(
            reqwest::Url::parse(url)
                .ok()
                .filter(|u| matches!(u.scheme(), "http" | "https"))
                .with_context(|| format!("--webhook {url:?} is not an http or https URL"))?,
        ),
        None => None,
    };
    // Then the source: a monitor that cannot sample says why before it announces anything.
    if global.simulate.is_some() && args.from_trace.is_none() {
        bail!(
            "pog monitor run samples real GPUs through NVML, and the simulated host has no \
             telemetry to sample: watch a recorded trace instead with --from-trace TRACE.csv \
             (e.g. crates/monitor/tests/data/h200-healthy.csv), or run `pog monitor replay \
             TRACE.csv`"
        );
    }
    let nvml;
    let mut source: Box<dyn pog_monitor::Source + '_> = match &args.from_trace {
        Some(path) => Box::new(pog_monitor::Replay::new(
            GpuIdentity {
                index: 0,
                uuid: format!("trace:{}", path.display()),
                model_name: "recorded trace".into(),
                hostname: pog_device::monitor::hostname(),
                pci_bus_id: None,
            },
            load(path)?,
        )),
        None => {
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
    let live: Shared = Arc::default();
    let mut webhook = None;
    if let Some(url) = webhook_url {
        // No redirects: a 307/308 would re-post the alert wherever the receiver points.
        let client = reqwest::Client::builder()
            .timeout(WEBHOOK_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .context("building the webhook client")?;
        let (queue, pending) = tokio::sync::mpsc::channel(WEBHOOK_QUEUE);
        let worker = rt.spawn(deliver(client, url, pending));
        webhook = Some((queue, worker));
    }
    if let Some(listen) = &args.metrics_listen {
        let listener = rt
            .block_on(tokio::net::TcpListener::bind(listen))
            .with_context(|| format!("cannot listen on {listen}"))?;
        let local = listener
            .local_addr()
            .context("the metrics listener's address")?;
        let router = axum::Router::new()
            .route("/", axum::routing::get(dashboard))
            .route("/metrics", axum::routing::get(metrics))
            .with_state(live.clone());
        let stopped = stop.clone();
        rt.spawn(pog_net::serve::serve(
            listener,
            router,
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
    let history = if args.no_history {
        None
    } else {
        let path = match &args.history {
            Some(path) => path.clone(),
            None => data_dir(global)?.join("monitor.sqlite"),
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let retention = Retention {
            raw: Duration::from_secs(args.history_raw_hours * 3600),
            minutes: Duration::from_secs(args.history_minute_days * 86_400),
        };
        // A history that cannot be opened (corrupt, locked) is left as it is, and the monitor
        // goes on without one: sampling matters more than storing.
        match History::open(&path, retention) {
            Ok(history) => {
                live.locked().history = Some(path);
                Some(history)
            }
            Err(e) => {
                tracing::warn!("{e}: keeping no history this run (the file is left untouched)");
                None
            }
        }
    };
    let queue = webhook.as_ref().map(|w| w.0.clone());
    let outcome = watch(
        global,
        args,
        &config,
        model,
        source.as_mut(),
        &live,
        &stop,
        queue,
        history,
    );
    if let Some((queue, worker)) = webhook {
        // Alerts still queued get a little time to go out; a webhook that is down does not
        // keep pog from stopping.
        drop(queue);
        if rt
            .block_on(async { tokio::time::timeout(WEBHOOK_DRAIN, worker).await })
            .is_err()
        {
            tracing::warn!("webhook: alerts still undelivered after {WEBHOOK_DRAIN:?}: dropped");
        }
    }
    outcome
}

/// Samples held for a history that keeps failing; past this the history is given up for the
/// run (about a day of one GPU at 1 s).
const HISTORY_BACKLOG: usize = 100_000;

/// Alerts waiting for the webhook; past this, new ones are dropped (and logged).
const WEBHOOK_QUEUE: usize = 1024;
/// One delivery attempt's limit.
const WEBHOOK_TIMEOUT: Duration = Duration::from_secs(5);
/// Attempts per alert.
const WEBHOOK_ATTEMPTS: u32 = 6;
/// The first retry's wait; each next one doubles, up to 30 s.
const WEBHOOK_BACKOFF: Duration = Duration::from_millis(500);
/// How long a stopping monitor waits for queued alerts to go out.
const WEBHOOK_DRAIN: Duration = Duration::from_secs(5);

/// Posts each queued alert to the webhook, in order, retrying failures with backoff. A
/// client error other than 429 is not retried (the receiver refuses the alert itself).
async fn deliver(
    client: reqwest::Client,
    url: reqwest::Url,
    mut pending: tokio::sync::mpsc::Receiver<serde_json::Value>,
) {
    // Logs name the receiver by scheme, host and port only: a webhook URL often carries a
    // secret token in its path or query.
    let shown = format!(
        "{}://{}{}",
        url.scheme(),
        url.host_str().unwrap_or("?"),
        url.port().map(|p| format!(":{p}")).unwrap_or_default()
    );
    while let Some(alert) = pending.recv().await {
        let mut wait = WEBHOOK_BACKOFF;
        for attempt in 1..=WEBHOOK_ATTEMPTS {
            let why = match client.post(url.clone()).json(&alert).send().await {
                Ok(response) if response.status().is_success() => break,
                Ok(response)
                    if response.status().is_client_error()
                        && response.status() != reqwest::StatusCode::TOO_MANY_REQUESTS =>
                {
                    tracing::warn!(
                        "webhook {shown}: answered {}: alert not delivered, not retried",
                        response.status()
                    );
                    break;
                }
                Ok(response) => format!("answered {}", response.status()),
                Err(e) => {
                    // reqwest's own words (without the URL), then the causes it wraps
                    // (refused, timed out, …).
                    let e = e.without_url();
                    let mut why = e.to_string();
                    let mut cause = std::error::Error::source(&e);
                    while let Some(c) = cause {
                        why.push_str(&format!(": {c}"));
                        cause = c.source();
                    }
                    why
                }
            };
            if attempt == WEBHOOK_ATTEMPTS {
                tracing::warn!("webhook {shown}: {why}: gave up after {attempt} attempts");
            } else {
                tracing::warn!(
                    "webhook {shown}: {why}: retrying in {:.1} s",
                    wait.as_secs_f64()
                );
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(30));
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn watch(
    global: &Global,
    args: &RunArgs,
    config: &Config,
    model: Option<Model>,
    source: &mut dyn pog_monitor::Source,
    live: &Shared,
    stop: &AtomicBool,
    webhook: Option<tokio::sync::mpsc::Sender<serde_json::Value>>,
    mut history: Option<History>,
) -> Result<Outcome> {
    let identities = source.identities();
    let mut writer = match &args.record {
        Some(_) if identities.len() != 1 => {
            bail!("--record writes one GPU's trace: choose the GPU with --gpus N")
        }
        Some(path) => {
            let file = std::fs::File::create(path)
                .with_context(|| format!("creating {}", path.display()))?;
            Some(TraceWriter::new(file, Columns::Extended)?)
        }
        None => None,
    };
    let mut monitors: Vec<Monitor> = identities
        .iter()
        .map(|_| Monitor::new(config.clone(), model.clone()))
        .collect();
    let started = Instant::now();
    let unix_start = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    {
        let mut state = live.locked();
        state.unix_start = unix_start;
        state.gpus = identities
            .iter()
            .map(|identity| LiveGpu {
                identity: identity.clone(),
                recent: std::collections::VecDeque::new(),
                sample: None,
                xids: (0, 0),
                anomaly_score: None,
                alerts_firing: 0,
            })
            .collect();
    }
    let unix_now = || unix_start + started.elapsed().as_secs_f64();
    let mut last_flush = started;
    let mut history_failure: Option<String> = None;
    let mut next = started;
    let (mut alerts_total, mut failing, mut rounds) = (0usize, 0usize, 0u64);
    'watching: loop {
        if stop.load(Ordering::Relaxed) || args.duration.is_some_and(|d| started.elapsed() >= d) {
            break;
        }
        let t = started.elapsed().as_secs_f64();
        for (i, identity) in identities.iter().enumerate() {
            let Some(sample) = source.sample(i, t) else {
                break 'watching;
            };
            let alerts = monitors[i].push(&sample);
            for alert in &alerts {
                alerts_total += 1;
                if alert.severity >= Severity::Warning {
                    failing += 1;
                }
                if let Some(h) = history.as_mut() {
                    h.push_alert(&identity.uuid, unix_start + alert.t, alert);
                }
                let value = alert_json(identity, alert)?;
                if let Some(queue) = &webhook {
                    if queue.try_send(value.clone()).is_err() {
                        tracing::warn!(
                            "webhook: {WEBHOOK_QUEUE} alerts already waiting: this one is dropped"
                        );
                    }
                }
                report(global, identity.index, alert, &value);
            }
            if let Some(w) = writer.as_mut() {
                w.write(&sample)?;
                w.flush()?;
            }
            if let Some(h) = history.as_mut() {
                h.push(&identity.uuid, unix_start + sample.t, &sample);
            }
            let mut state = live.locked();
            for alert in alerts {
                state.alerts.push_back((identity.index, alert));
                if state.alerts.len() > RECENT_ALERTS {
                    state.alerts.pop_front();
                }
            }
            let gpu = &mut state.gpus[i];
            let t_unix = unix_start + sample.t;
            gpu.recent.push_back((t_unix, sample.clone()));
            while gpu
                .recent
                .front()
                .is_some_and(|(t, _)| t_unix - t > RECENT_S)
            {
                gpu.recent.pop_front();
            }
            gpu.sample = Some(sample);
            gpu.xids = source.xids(i);
            gpu.anomaly_score = monitors[i].anomaly_score();
            gpu.alerts_firing = monitors[i].open_alerts();
        }
        rounds += 1;
        if let Some(h) = history.as_mut() {
            if last_flush.elapsed() >= args.history_flush_seconds {
                last_flush = Instant::now();
                match h.flush(unix_now()) {
                    Ok(()) => history_failure = None,
                    Err(e) => {
                        let why = e.to_string();
                        if history_failure.as_deref() != Some(why.as_str()) {
                            tracing::warn!("{why}: the batch is kept for the next write");
                        }
                        history_failure = Some(why);
                        if h.pending() > HISTORY_BACKLOG {
                            tracing::warn!(
                                "history: {} samples could not be written: dropping them",
                                h.pending()
                            );
                            history = None;
                        }
                    }
                }
            }
        }
        for notice in source.take_notices() {
            tracing::warn!("{notice}");
        }
        live.locked().health = source.health();
        next += args.interval;
        let now = Instant::now();
        if next < now {
            next = now;
        }
        while Instant::now() < next && !stop.load(Ordering::Relaxed) {
            std::thread::sleep((next - Instant::now()).min(Duration::from_millis(100)));
        }
    }
    if let Some(w) = writer {
        w.finish()?;
    }
    if let Some(h) = history {
        if let Err(e) = h.close(unix_now()) {
            tracing::warn!("{e}: the last batch was not stored");
        }
    }
    let summary = format!(
        "{alerts_total} alert(s), {failing} warning or critical, {rounds} round(s) of {} GPU(s) in {:.0} s",
        identities.len(),
        started.elapsed().as_secs_f64()
    );
    if global.json {
        eprintln!("pog monitor run: {summary}");
    } else {
        println!("{summary}");
    }
    Ok(Outcome(if failing > 0 {
        Verdict::Fail
    } else {
        Verdict::Pass
    }))
}

/// An alert as JSON, with the GPU's index and UUID and the host's name.
fn alert_json(identity: &GpuIdentity, alert: &Alert) -> Result<serde_json::Value> {
    let mut value = serde_json::to_value(alert).context("serializing an alert")?;
    if let Some(object) = value.as_object_mut() {
        object.insert("gpu".into(), identity.index.into());
        object.insert("uuid".into(), identity.uuid.clone().into());
        object.insert("hostname".into(), identity.hostname.clone().into());
    }
    Ok(value)
}

/// Prints one alert: its JSON line, or a line for people (a reader that went away does not
/// stop the monitor).
fn report(global: &Global, gpu: u32, alert: &Alert, value: &serde_json::Value) {
    if global.json {
        say(format_args!("{value}"));
    } else {
        say(format_args!(
            "GPU {gpu} t={:<9.2} {:<8} {:<20} {}",
            alert.t,
            alert.severity.name(),
            alert.kind.name(),
            alert.message
        ));
    }
}
