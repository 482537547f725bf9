//! The live monitor: the one sampling loop of pog (`pog monitor run` and the agent's health
//! watch both run it). A [`LiveMonitor`] owns the detectors (one [`Monitor`] per GPU), the
//! embedded [`History`], alert delivery (a [`Webhook`] queue and an [`OnAlert`] hook for the
//! caller to print or log), the trace being recorded, and the live [`Snapshot`] that
//! `/metrics`, the dashboard and health summaries read while it runs. [`LiveMonitor::run`]
//! samples a [`Source`] every interval until told to stop.

use crate::history::{History, Retention};
use crate::model::Fingerprint;
use crate::prometheus::{Format, GpuIdentity, GpuMetrics, SamplerHealth};
use crate::trace::{Columns, TraceError};
use crate::webhook::Webhook;
use crate::{Alert, Config, Limits, Model, Monitor, Sample, Severity, Source, TraceWriter};
use pog_net::locked::Locked;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Seconds of samples the slow-degradation watch must have moved on before its state is kept
/// again in the history (it takes a point every 10 minutes).
const DRIFT_KEEP_S: f64 = 300.0;

/// Samples held for a history that keeps failing; past this the history is given up for the
/// run (about a day of one GPU at 1 s).
pub const HISTORY_BACKLOG: usize = 100_000;

/// Rounds between two readings of each GPU's [`Limits`] (read at the start, then this often:
/// a power limit can be changed while the monitor runs).
pub const LIMITS_EVERY: u64 = 64;

/// What is done with each alert besides keeping it: printed, logged. It gets the GPU, the
/// alert, and the alert as JSON ([`alert_json`]).
pub type OnAlert = Box<dyn FnMut(&GpuIdentity, &Alert, &serde_json::Value) + Send>;

/// Which time a sample is kept under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stamp {
    /// The run's start plus the sample's own `t`: a recorded trace played back keeps its
    /// times (`pog monitor run`).
    Sampled,
    /// The wall clock when the sample was taken (the agent's health summaries ask for windows
    /// of its clock).
    Received,
}

/// How a [`LiveMonitor`] judges and keeps what it samples.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The detectors' settings.
    pub config: Config,
    /// Baselines learnt from healthy history; `None`: rule-based detectors only (and the
    /// slow-degradation watch, learning from each GPU's own first hour).
    pub model: Option<Model>,
    /// How long each GPU's samples and alerts are kept in the [`Snapshot`].
    pub keep: Duration,
    /// How many of the latest alerts, all GPUs together, the snapshot lists.
    pub recent_alerts: usize,
    /// Which time samples are kept under.
    pub stamp: Stamp,
    /// Stop after this long; `None`: until stopped or the source runs out.
    pub duration: Option<Duration>,
    /// How often the history writes its batch.
    pub history_flush: Duration,
    /// Put before each sampler notice that is logged (e.g. "health monitor: ").
    pub log_prefix: &'static str,
}

impl Default for Settings {
    /// Rule-based detectors, 15 minutes and 100 alerts kept, sampled times, the history
    /// written every 5 s.
    fn default() -> Settings {
        Settings {
            config: Config::default(),
            model: None,
            keep: Duration::from_secs(900),
            recent_alerts: 100,
            stamp: Stamp::Sampled,
            duration: None,
            history_flush: Duration::from_secs(5),
            log_prefix: "",
        }
    }
}

/// One GPU's latest state and recent samples and alerts.
#[derive(Debug, Clone)]
pub struct LiveGpu {
    /// Who.
    pub identity: GpuIdentity,
    /// `(Unix ms, sample)`, the last [`Settings::keep`], oldest first.
    pub recent: VecDeque<(u64, Sample)>,
    /// `(Unix ms, alert)`, the last [`Settings::keep`], oldest first.
    pub alerts: VecDeque<(u64, Alert)>,
    /// XIDs seen so far, and the last code (0 when none).
    pub xids: (u64, u32),
    /// The isolation forest's latest score, when a model has one.
    pub anomaly_score: Option<f64>,
    /// Alerts open now.
    pub alerts_firing: usize,
    /// The GPU's last proofs' time over their bound, when whoever runs the loop proves (the
    /// agent notes its own timing of each proof it commits).
    pub last_proof_ratio: Option<crate::prometheus::LastProofRatio>,
    /// The GPU's own limits as the source last read them.
    pub limits: Limits,
}

impl LiveGpu {
    /// A GPU with nothing sampled yet.
    pub fn new(identity: GpuIdentity) -> LiveGpu {
        LiveGpu {
            identity,
            recent: VecDeque::new(),
            alerts: VecDeque::new(),
            xids: (0, 0),
            anomaly_score: None,
            alerts_firing: 0,
            last_proof_ratio: None,
            limits: Limits::default(),
        }
    }

    /// The latest sample.
    pub fn latest(&self) -> Option<&Sample> {
        self.recent.back().map(|(_, s)| s)
    }
}

/// What the loop shows while it runs: every GPU's state, the sampler's health, the latest
/// alerts.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The GPUs, in the source's order.
    pub gpus: Vec<LiveGpu>,
    /// The sampler's own health.
    pub health: SamplerHealth,
    /// The latest alerts of all GPUs, newest last: the GPU's index, the alert's Unix time in
    /// ms (the same clock as [`LiveGpu::recent`]'s), the alert.
    pub alerts: VecDeque<(u32, u64, Alert)>,
    /// The history file, for the dashboard's longer windows.
    pub history: Option<PathBuf>,
    /// Unix time (s) of the run's start.
    pub unix_start: f64,
}

impl Snapshot {
    /// The Prometheus exposition, in `format`, of every GPU's latest sample (dcgm-exporter's
    /// names, types and labels, pog's extras) and the sampler's health.
    pub fn metrics(&self, format: Format) -> Result<String, std::fmt::Error> {
        let gpus: Vec<GpuMetrics<'_>> = self
            .gpus
            .iter()
            .map(|g| GpuMetrics {
                identity: &g.identity,
                sample: g.latest(),
                xid_total: g.xids.0,
                last_xid: g.xids.1,
                anomaly_score: g.anomaly_score,
                alerts_firing: g.alerts_firing,
                last_proof_ratio: g.last_proof_ratio,
            })
            .collect();
        crate::prometheus::render(&gpus, self.health, format)
    }
}

/// Why the loop stopped early.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// The history's folder could not be created.
    #[error("creating {}: {source}", path.display())]
    HistoryFolder {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The trace being recorded could not be written.
    #[error("recording the trace: {0}")]
    Record(#[from] TraceError),
    /// An alert could not be put in JSON.
    #[error("serializing an alert: {0}")]
    Alert(#[from] serde_json::Error),
}

/// What one [`LiveMonitor::run`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunSummary {
    /// Alerts raised.
    pub alerts: usize,
    /// Of them, warnings and critical ones.
    pub failing: usize,
    /// Rounds sampled (every GPU once each).
    pub rounds: u64,
    /// GPUs watched.
    pub gpus: usize,
    /// How long it ran.
    pub elapsed: Duration,
}

/// Where a run's samples and alerts go besides the snapshot; taken by the run.
#[derive(Default)]
struct Outputs {
    history: Option<History>,
    record: Option<TraceWriter<Box<dyn std::io::Write + Send>>>,
    on_alert: Option<OnAlert>,
    webhook: Option<Webhook>,
}

/// The live monitor (see the module's documentation). Shared (`Arc`) between the thread that
/// runs it and the servers that read its [`snapshot`](LiveMonitor::snapshot).
pub struct LiveMonitor {
    settings: Settings,
    snapshot: Mutex<Snapshot>,
    outputs: Mutex<Outputs>,
}

/// Unix time now, in seconds.
fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Unix time now, in milliseconds.
fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// An alert as JSON, with the GPU's index and UUID and the host's name (what `--json` prints
/// and the webhook receives).
pub fn alert_json(
    identity: &GpuIdentity,
    alert: &Alert,
) -> Result<serde_json::Value, serde_json::Error> {
    let mut value = serde_json::to_value(alert)?;
    if let Some(object) = value.as_object_mut() {
        object.insert("gpu".into(), identity.index.into());
        object.insert("uuid".into(), identity.uuid.clone().into());
        object.insert("hostname".into(), identity.hostname.clone().into());
    }
    Ok(value)
}

impl LiveMonitor {
    /// A monitor listing these GPUs, nothing sampled yet (a run lists the source's instead).
    pub fn new(settings: Settings, identities: Vec<GpuIdentity>) -> LiveMonitor {
        LiveMonitor {
            settings,
            snapshot: Mutex::new(Snapshot {
                gpus: identities.into_iter().map(LiveGpu::new).collect(),
                ..Snapshot::default()
            }),
            outputs: Mutex::default(),
        }
    }

    /// Keeps samples and alerts in the history at `path`, creating its folder when missing
    /// (an error when it cannot be). A history that cannot be opened (corrupt, locked) is left
    /// as it is and the monitor goes on without one, with a warning: sampling matters more
    /// than storing.
    pub fn keep_history(self, path: &Path, retention: Retention) -> Result<LiveMonitor, LiveError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| LiveError::HistoryFolder {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        match History::open(path, retention) {
            Ok(history) => {
                self.outputs.locked().history = Some(history);
                self.snapshot.locked().history = Some(path.to_path_buf());
            }
            Err(e) => {
                tracing::warn!("{e}: keeping no history this run (the file is left untouched)")
            }
        }
        Ok(self)
    }

    /// Records every sample to `writer` as a trace CSV (one GPU's: choose the source so).
    pub fn record(self, writer: Box<dyn std::io::Write + Send>) -> Result<LiveMonitor, LiveError> {
        self.outputs.locked().record = Some(TraceWriter::new(writer, Columns::Extended)?);
        Ok(self)
    }

    /// Calls `hook` on every alert.
    pub fn on_alert(self, hook: OnAlert) -> LiveMonitor {
        self.outputs.locked().on_alert = Some(hook);
        self
    }

    /// Posts every alert to `webhook`; a run ends by draining it ([`Webhook::drain`]).
    pub fn deliver_to(self, webhook: Webhook) -> LiveMonitor {
        self.outputs.locked().webhook = Some(webhook);
        self
    }

    /// The live state, locked: read it briefly (the loop waits meanwhile).
    pub fn snapshot(&self) -> MutexGuard<'_, Snapshot> {
        self.snapshot.locked()
    }

    /// How this monitor judges and keeps what it samples (the dashboard draws the detectors'
    /// temperature limits).
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The Prometheus exposition of the snapshot in `format` ([`Snapshot::metrics`]).
    pub fn metrics(&self, format: Format) -> Result<String, std::fmt::Error> {
        self.snapshot().metrics(format)
    }

    /// Samples `source` every `interval` until `stop` is set, [`Settings::duration`] has
    /// passed or the source runs out: the detectors see every sample, each alert goes to the
    /// history, the webhook and the [`OnAlert`] hook, samples to the history and the trace
    /// recorded, sampler notices are logged, and the snapshot keeps what is recent. The GPUs
    /// become the source's. The history is closed, the trace finished and the webhook drained
    /// at the end: a later run keeps only the [`OnAlert`] hook.
    pub fn run(
        &self,
        source: &mut dyn Source,
        interval: Duration,
        stop: &AtomicBool,
    ) -> Result<RunSummary, LiveError> {
        let outputs = std::mem::take(&mut *self.outputs.locked());
        let Outputs {
            mut history,
            mut record,
            mut on_alert,
            webhook,
        } = outputs;
        let identities = source.identities();
        let mut monitors: Vec<Monitor> = identities
            .iter()
            .map(|_| Monitor::new(self.settings.config.clone(), self.settings.model.clone()))
            .collect();
        // Each GPU's thermal levels as an earlier run learned them: taken up, not learned
        // afresh (a GPU that starts too hot is not taken at that level).
        let mut kept: Vec<Kept> = monitors.iter().map(|_| Kept::default()).collect();
        if let Some(h) = history.as_ref() {
            for ((monitor, identity), kept) in monitors.iter_mut().zip(&identities).zip(&mut kept) {
                match h.levels(&identity.uuid) {
                    Ok(levels) => monitor.resume_levels(levels),
                    Err(e) => tracing::warn!("{e}: GPU {} learns its level afresh", identity.uuid),
                }
                // Its slow-degradation watch, so that a drift over days is seen across
                // restarts.
                match h.drift(&identity.uuid) {
                    Ok(Some(state)) => {
                        if let Err(e) = monitor.resume_drift(&state) {
                            tracing::warn!(
                                "{e}: GPU {}'s degradation watch starts afresh",
                                identity.uuid
                            );
                        }
                    }
                    Ok(None) => {}
                    Err(e) => tracing::warn!(
                        "{e}: GPU {}'s degradation watch starts afresh",
                        identity.uuid
                    ),
                }
                // Its thermal response (time constants, settled levels per load), taken
                // up at its first sample (which tells its model).
                match h.response(&identity.uuid) {
                    Ok(state) => kept.response_to_resume = state,
                    Err(e) => tracing::warn!(
                        "{e}: GPU {} learns its temperatures' time constants and settled levels afresh",
                        identity.uuid
                    ),
                }
                kept.drift_s = monitor.drift_elapsed_s().unwrap_or(0.0);
            }
        }
        let started = Instant::now();
        let unix_start = unix_now();
        {
            let mut state = self.snapshot();
            state.unix_start = unix_start;
            state.gpus = identities.iter().cloned().map(LiveGpu::new).collect();
        }
        let clock = || unix_start + started.elapsed().as_secs_f64();
        let keep_ms = self.settings.keep.as_millis() as u64;
        let mut last_flush = started;
        let mut history_failure: Option<String> = None;
        let mut next = started;
        let mut summary = RunSummary {
            alerts: 0,
            failing: 0,
            rounds: 0,
            gpus: identities.len(),
            elapsed: Duration::ZERO,
        };
        let outcome = 'watching: loop {
            if stop.load(Ordering::Relaxed)
                || self
                    .settings
                    .duration
                    .is_some_and(|d| started.elapsed() >= d)
            {
                break Ok(());
            }
            let t = started.elapsed().as_secs_f64();
            if summary.rounds.is_multiple_of(LIMITS_EVERY) {
                let limits: Vec<Limits> = (0..identities.len()).map(|i| source.limits(i)).collect();
                for (gpu, limits) in self.snapshot().gpus.iter_mut().zip(limits) {
                    gpu.limits = limits;
                }
            }
            for (i, identity) in identities.iter().enumerate() {
                let Some(sample) = source.sample(i, t) else {
                    break 'watching Ok(());
                };
                if let Some(state) = kept[i].response_to_resume.take() {
                    let live = Fingerprint::of([&sample]);
                    if let Err(e) = monitors[i].resume_response(&state, live.as_ref()) {
                        tracing::warn!(
                            "{e}: GPU {} learns its temperatures' time constants and settled levels afresh",
                            identity.uuid
                        );
                    }
                }
                let alerts = monitors[i].push(&sample);
                let (t_unix, t_ms) = match self.settings.stamp {
                    Stamp::Sampled => {
                        let t_unix = unix_start + sample.t;
                        (t_unix, (t_unix * 1000.0) as u64)
                    }
                    Stamp::Received => {
                        let t_ms = unix_ms();
                        (t_ms as f64 / 1000.0, t_ms)
                    }
                };
                let alert_unix = |alert: &Alert| match self.settings.stamp {
                    Stamp::Sampled => unix_start + alert.t,
                    Stamp::Received => t_unix,
                };
                let alert_ms = |alert: &Alert| match self.settings.stamp {
                    Stamp::Sampled => (alert_unix(alert) * 1000.0) as u64,
                    Stamp::Received => t_ms,
                };
                for alert in &alerts {
                    summary.alerts += 1;
                    if alert.severity >= Severity::Warning {
                        summary.failing += 1;
                    }
                    if let Some(h) = history.as_mut() {
                        h.push_alert(&identity.uuid, alert_unix(alert), alert);
                    }
                    let value = match alert_json(identity, alert) {
                        Ok(value) => value,
                        Err(e) => break 'watching Err(LiveError::Alert(e)),
                    };
                    if let Some(hook) = on_alert.as_mut() {
                        hook(identity, alert, &value);
                    }
                    if let Some(webhook) = &webhook {
                        webhook.send(value);
                    }
                }
                if let Some(w) = record.as_mut() {
                    if let Err(e) = w.write(&sample).and_then(|()| w.flush()) {
                        break 'watching Err(LiveError::Record(e));
                    }
                }
                if let Some(h) = history.as_mut() {
                    h.push(&identity.uuid, t_unix, &sample);
                }
                let mut state = self.snapshot();
                for alert in &alerts {
                    state
                        .alerts
                        .push_back((identity.index, alert_ms(alert), alert.clone()));
                    if state.alerts.len() > self.settings.recent_alerts {
                        state.alerts.pop_front();
                    }
                }
                let gpu = &mut state.gpus[i];
                gpu.alerts
                    .extend(alerts.into_iter().map(|a| (alert_ms(&a), a)));
                gpu.recent.push_back((t_ms, sample));
                let horizon = t_ms.saturating_sub(keep_ms);
                while gpu.recent.front().is_some_and(|(t, _)| *t < horizon) {
                    gpu.recent.pop_front();
                }
                while gpu.alerts.front().is_some_and(|(t, _)| *t < horizon) {
                    gpu.alerts.pop_front();
                }
                gpu.xids = source.xids(i);
                gpu.anomaly_score = monitors[i].anomaly_score();
                gpu.alerts_firing = monitors[i].open_alerts();
            }
            summary.rounds += 1;
            if last_flush.elapsed() >= self.settings.history_flush {
                if let Some(h) = history.as_mut() {
                    last_flush = Instant::now();
                    keep_learned(h, &monitors, &identities, &mut kept, clock());
                    match h.flush(clock()) {
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
                tracing::warn!("{}{notice}", self.settings.log_prefix);
            }
            self.snapshot().health = source.health();
            next += interval;
            let now = Instant::now();
            if next < now {
                next = now;
            }
            while Instant::now() < next && !stop.load(Ordering::Relaxed) {
                std::thread::sleep((next - Instant::now()).min(Duration::from_millis(100)));
            }
        };
        summary.elapsed = started.elapsed();
        let finished = match record {
            Some(w) if outcome.is_ok() => w.finish().map(drop).map_err(LiveError::Record),
            _ => Ok(()),
        };
        if let Some(mut h) = history {
            keep_learned(&mut h, &monitors, &identities, &mut kept, clock());
            if let Err(e) = h.close(clock()) {
                tracing::warn!("{e}: the last batch was not stored");
            }
        }
        if let Some(webhook) = webhook {
            webhook.drain(crate::webhook::DRAIN);
        }
        // The hook serves the next run too; the history and the webhook are closed.
        self.outputs.locked().on_alert = on_alert;
        outcome.and(finished)?;
        Ok(summary)
    }
}

/// Per GPU, what of its learned state the history was last given, and what it has to take up.
#[derive(Debug, Default)]
struct Kept {
    /// The degradation watch's elapsed seconds when its state was last kept.
    drift_s: f64,
    /// The thermal response last kept.
    response: Option<String>,
    /// The thermal response an earlier run kept, taken up at the GPU's first sample.
    response_to_resume: Option<String>,
}

/// Gives the history what each GPU learned that the next run takes up: its thermal levels;
/// its die's thermal response where it changed since last kept; its degradation watch where
/// it moved on [`DRIFT_KEEP_S`] since (it takes a point every 10 minutes). A write that fails
/// is logged; the next flush tries again.
fn keep_learned(
    h: &mut History,
    monitors: &[Monitor],
    identities: &[GpuIdentity],
    kept: &mut [Kept],
    now_unix: f64,
) {
    for ((monitor, identity), kept) in monitors.iter().zip(identities).zip(kept) {
        if let Err(e) = h.save_levels(&identity.uuid, &monitor.levels(), now_unix) {
            tracing::warn!("{e}: GPU {}'s level is not kept", identity.uuid);
        }
        if let Some(state) = monitor
            .response_state()
            .filter(|state| kept.response.as_ref() != Some(state))
        {
            match h.save_response(&identity.uuid, &state, now_unix) {
                Ok(()) => kept.response = Some(state),
                Err(e) => {
                    tracing::warn!("{e}: GPU {}'s thermal response is not kept", identity.uuid)
                }
            }
        }
        let elapsed = monitor.drift_elapsed_s();
        if elapsed.is_some_and(|e| e - kept.drift_s >= DRIFT_KEEP_S) {
            if let Some(state) = monitor.drift_state() {
                match h.save_drift(&identity.uuid, &state, now_unix) {
                    Ok(()) => kept.drift_s = elapsed.unwrap_or(0.0),
                    Err(e) => {
                        tracing::warn!("{e}: GPU {}'s degradation watch is not kept", identity.uuid)
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inject::{inject, Fault};
    use crate::{parse_trace, AlertKind, Replay};
    use std::sync::Arc;

    fn identity() -> GpuIdentity {
        GpuIdentity {
            index: 0,
            uuid: "GPU-live".into(),
            model_name: "NVIDIA H200".into(),
            hostname: "host".into(),
            pci_bus_id: None,
            driver_version: None,
        }
    }

    fn healthy() -> Vec<Sample> {
        parse_trace(include_str!("../tests/data/h200-healthy.csv")).unwrap()
    }

    /// The healthy H200 trace's first minute with a power-brake throttle injected at 20 s.
    fn braked() -> Vec<Sample> {
        let rows: Vec<Sample> = healthy().into_iter().take(60).collect();
        let start = rows[0].t + 20.0;
        let fault = Fault::Throttle {
            reasons: crate::sample::reasons::HW_POWER_BRAKE,
            clock_factor: 0.5,
            duration_s: 10.0,
        };
        inject(&rows, &fault, start)
    }

    fn retention() -> Retention {
        Retention {
            raw: Duration::from_secs(86_400),
            minutes: Duration::from_secs(86_400),
        }
    }

    #[test]
    fn an_injected_fault_raises_an_alert_that_reaches_every_output() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("h/monitor.sqlite");
        let trace = dir.path().join("t.csv");
        let hooked = Arc::new(Mutex::new(Vec::new()));
        let seen = hooked.clone();
        let live = LiveMonitor::new(Settings::default(), Vec::new())
            .keep_history(&db, retention())
            .unwrap()
            .record(Box::new(std::fs::File::create(&trace).unwrap()))
            .unwrap()
            .on_alert(Box::new(move |gpu, alert, json| {
                assert_eq!(json["uuid"], gpu.uuid.as_str());
                assert_eq!(json["kind"], alert.kind.name());
                seen.locked().push(alert.kind);
            }));
        let rows = braked();
        let summary = live
            .run(
                &mut Replay::new(identity(), rows.clone()),
                Duration::ZERO,
                &AtomicBool::new(false),
            )
            .unwrap();
        assert_eq!((summary.rounds, summary.gpus), (60, 1));
        assert!(summary.failing >= 1, "{summary:?}");
        assert!(
            hooked.locked().contains(&AlertKind::Throttling),
            "{hooked:?}"
        );
        let snapshot = live.snapshot();
        assert_eq!(snapshot.gpus.len(), 1);
        assert_eq!(snapshot.gpus[0].identity.uuid, "GPU-live");
        assert_eq!(snapshot.gpus[0].recent.len(), 60);
        assert_eq!(snapshot.alerts.len(), summary.alerts);
        assert_eq!(snapshot.gpus[0].alerts.len(), summary.alerts);
        assert_eq!(snapshot.health.samples, 60);
        // Every alert is listed at the time of the sample that raised it, on the samples' clock.
        for (gpu, at_ms, alert) in &snapshot.alerts {
            assert_eq!(*gpu, 0);
            assert!(
                snapshot.gpus[0]
                    .alerts
                    .iter()
                    .any(|(t, a)| t == at_ms && a == alert),
                "{at_ms} {alert:?}"
            );
        }
        assert_eq!(snapshot.history.as_deref(), Some(db.as_path()));
        let metrics = snapshot.metrics(Format::OpenMetrics).unwrap();
        assert!(metrics.contains("UUID=\"GPU-live\""), "{metrics}");
        drop(snapshot);
        // The history holds every sample and the alerts; the recorded trace is the rows fed.
        let stored = History::open_read_only(&db).unwrap().stored().unwrap();
        assert_eq!(stored.samples, 60, "{stored:?}");
        assert_eq!(stored.alerts, summary.alerts as u64, "{stored:?}");
        let recorded = parse_trace(&std::fs::read_to_string(&trace).unwrap()).unwrap();
        assert_eq!(recorded, rows);
    }

    /// The cool H100 (judged by the hot H100's history) run live twice on one history,
    /// stopped at 200 s and started again, before its die's warm-up to 700 W (223 s); or its
    /// kept thermal response replaced by `corrupt` before the second run.
    fn h100_restarted_at_200_s(corrupt: Option<&str>) -> Vec<Alert> {
        let [cool, hot] = [
            include_str!("../tests/data/h100-gpu-run.csv"),
            include_str!("../tests/data/h100-varied.csv"),
        ]
        .map(|t| parse_trace(t).unwrap());
        let settings = Settings {
            model: Some(Model::train(&hot, &Config::default()).unwrap()),
            ..Settings::default()
        };
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("monitor.sqlite");
        let (before, after): (Vec<Sample>, Vec<Sample>) =
            cool.into_iter().partition(|s| s.t < 200.0);
        let mut alerts = Vec::new();
        for (run, rows) in [before, after].into_iter().enumerate() {
            if let (1, Some(corrupt)) = (run, corrupt) {
                let mut h = History::open(&db, retention()).unwrap();
                // The first run kept its die's time constants and where it settled at the
                // loads it held.
                let kept = h.response("GPU-live").unwrap().unwrap();
                assert!(
                    kept.contains("\"taus_s\":[") && kept.contains("\"by_bin\":{"),
                    "{kept}"
                );
                h.save_response("GPU-live", corrupt, 0.0).unwrap();
            }
            let seen = Arc::new(Mutex::new(Vec::new()));
            let hooked = seen.clone();
            LiveMonitor::new(settings.clone(), Vec::new())
                .keep_history(&db, retention())
                .unwrap()
                .on_alert(Box::new(move |_, alert, _| {
                    hooked.locked().push(alert.clone())
                }))
                .run(
                    &mut Replay::new(identity(), rows),
                    Duration::ZERO,
                    &AtomicBool::new(false),
                )
                .unwrap();
            alerts.extend(seen.locked().drain(..));
        }
        alerts
    }

    #[test]
    fn the_dies_time_constant_and_settled_levels_are_kept_across_a_restart_and_a_corrupt_entry_is_harmless(
    ) {
        // Kept in the history: the restarted run judges the warm-up with the card's τ.
        let kept = h100_restarted_at_200_s(None);
        assert!(kept.is_empty(), "{kept:?}");
        // A corrupt entry is refused (logged) and the GPU learns its τ afresh: the untuned
        // rule's warning while the die still warms, as a monitor without a history gives.
        for corrupt in [
            "{\"taus_s\": [",
            "{\"taus_s\":[5000.0],\"fingerprint\":null}",
            // A fit time constant beside a settled level above the limit: refused as a whole.
            "{\"taus_s\":[7.0],\"held\":{\"bin_w\":25.0,\"by_bin\":{\"3\":500.0}},\"fingerprint\":null}",
        ] {
            let afresh = h100_restarted_at_200_s(Some(corrupt));
            assert!(
                afresh
                    .iter()
                    .any(|a| a.kind == AlertKind::ThermalRunaway && a.t > 223.0),
                "{corrupt}: {afresh:?}"
            );
        }
    }

    #[test]
    fn the_healthy_trace_raises_nothing_and_a_stop_ends_the_run() {
        let live = LiveMonitor::new(Settings::default(), Vec::new());
        let summary = live
            .run(
                &mut Replay::new(identity(), healthy().into_iter().take(30).collect()),
                Duration::ZERO,
                &AtomicBool::new(false),
            )
            .unwrap();
        assert_eq!((summary.alerts, summary.rounds), (0, 30));
        let stopped = live
            .run(
                &mut Replay::new(identity(), healthy()),
                Duration::ZERO,
                &AtomicBool::new(true),
            )
            .unwrap();
        assert_eq!(stopped.rounds, 0);
    }

    #[test]
    fn the_snapshot_keeps_only_its_window_and_its_latest_alerts() {
        let settings = Settings {
            keep: Duration::from_secs(10),
            recent_alerts: 1,
            ..Settings::default()
        };
        let live = LiveMonitor::new(settings, Vec::new());
        let rows = braked();
        let summary = live
            .run(
                &mut Replay::new(identity(), rows),
                Duration::ZERO,
                &AtomicBool::new(false),
            )
            .unwrap();
        let snapshot = live.snapshot();
        let recent = &snapshot.gpus[0].recent;
        let (first, last) = (recent.front().unwrap().0, recent.back().unwrap().0);
        assert!(
            last - first <= 10_000 && recent.len() < 60,
            "{}",
            recent.len()
        );
        assert!(snapshot.alerts.len() <= 1);
        assert!(summary.alerts >= 1);
    }
}
