//! The agent's health monitor: `pog agent` samples its GPUs (through `pog-device`'s NVML
//! sampler on a GPU host), runs `pog-monitor`'s detectors on every sample, serves the latest
//! state as Prometheus metrics under dcgm-exporter's names, and keeps the last hour of samples
//! and alerts in memory to answer a validator's signed health request (`POST /v1/health`)
//! with a [`HealthSummary`] of any window in it.
//!
//! What it reports is self-reported telemetry: the validator signs and stores it as the
//! agent's word, and weighs its own proof timings instead (`pog_validator::health`). Its
//! `/metrics` also carries the agent's own timing of the proofs it commits
//! ([`crate::own_timing`]).

use crate::own_timing::{OwnTimings, Step};
use pog_monitor::prometheus::{GpuIdentity, GpuMetrics, SamplerHealth};
use pog_monitor::{Alert, Config, Monitor, Sample, Signal};
use pog_net::locked::Locked;
use pog_proof::timing::now_ms;
use pog_proof::wire::{
    HealthAlert, HealthRequest, HealthSummary, SignalSummary, MAX_HEALTH_ALERTS,
    MAX_HEALTH_WINDOW_MS, MAX_HEALTH_XIDS,
};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long samples and alerts are kept: the longest window a request may name, and a minute.
pub const KEEP_MS: u64 = MAX_HEALTH_WINDOW_MS + 60_000;

/// Where samples come from: NVML on a GPU host ([`run_nvml`]), a recorded trace in tests.
pub use pog_monitor::Source;

/// One GPU's recent state.
struct Gpu {
    identity: GpuIdentity,
    /// `(Unix ms, sample)`, the last [`KEEP_MS`].
    recent: VecDeque<(u64, Sample)>,
    /// `(Unix ms, alert)`, the last [`KEEP_MS`].
    alerts: VecDeque<(u64, Alert)>,
    xids: (u64, u32),
    anomaly_score: Option<f64>,
    alerts_firing: usize,
}

impl Gpu {
    fn new(identity: GpuIdentity) -> Gpu {
        Gpu {
            identity,
            recent: VecDeque::new(),
            alerts: VecDeque::new(),
            xids: (0, 0),
            anomaly_score: None,
            alerts_firing: 0,
        }
    }
}

#[derive(Default)]
struct State {
    gpus: Vec<Gpu>,
    health: SamplerHealth,
    timings: OwnTimings,
}

/// The agent's monitor: the GPUs' recent samples and alerts.
pub struct Watch {
    simulated: bool,
    state: Mutex<State>,
}

impl Watch {
    /// A monitor of these GPUs, nothing sampled yet. A `simulated` host (the test double) has
    /// no telemetry to sample: its GPUs are listed under a `modelName` that starts with
    /// "SIMULATED" and every summary says `simulated`.
    pub fn new(identities: Vec<GpuIdentity>, simulated: bool) -> Watch {
        let gpus = identities
            .into_iter()
            .map(|mut identity| {
                if simulated {
                    identity.model_name = format!("SIMULATED {}", identity.model_name);
                }
                Gpu::new(identity)
            })
            .collect();
        Watch {
            simulated,
            state: Mutex::new(State {
                gpus,
                ..State::default()
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.locked()
    }

    /// Samples `source` every `interval` until `stop` is set or the source runs out: the
    /// detectors (rule-based: no healthy history to train on) see every sample, alerts and
    /// new sampler notices are logged, and what is older than [`KEEP_MS`] is forgotten. The
    /// GPUs become the source's (NVML's names and indices).
    pub fn run(&self, source: &mut dyn Source, interval: Duration, stop: &AtomicBool) {
        let identities = source.identities();
        self.state().gpus = identities.iter().cloned().map(Gpu::new).collect();
        let mut monitors: Vec<Monitor> = identities
            .iter()
            .map(|_| Monitor::new(Config::default(), None))
            .collect();
        let started = Instant::now();
        let mut next = started;
        'sampling: while !stop.load(Ordering::Relaxed) {
            let t = started.elapsed().as_secs_f64();
            for (i, monitor) in monitors.iter_mut().enumerate() {
                let Some(sample) = source.sample(i, t) else {
                    break 'sampling;
                };
                let alerts = monitor.push(&sample);
                let t_ms = now_ms();
                let mut state = self.state();
                let gpu = &mut state.gpus[i];
                for alert in alerts {
                    tracing::warn!(
                        gpu = %gpu.identity.uuid,
                        kind = alert.kind.name(),
                        severity = alert.severity.name(),
                        "{}",
                        alert.message
                    );
                    gpu.alerts.push_back((t_ms, alert));
                }
                gpu.recent.push_back((t_ms, sample));
                let horizon = t_ms.saturating_sub(KEEP_MS);
                while gpu.recent.front().is_some_and(|(t, _)| *t < horizon) {
                    gpu.recent.pop_front();
                }
                while gpu.alerts.front().is_some_and(|(t, _)| *t < horizon) {
                    gpu.alerts.pop_front();
                }
                gpu.xids = source.xids(i);
                gpu.anomaly_score = monitor.anomaly_score();
                gpu.alerts_firing = monitor.open_alerts();
            }
            for notice in source.take_notices() {
                tracing::warn!("health monitor: {notice}");
            }
            self.state().health = source.health();
            next += interval;
            let now = Instant::now();
            if next < now {
                next = now;
            }
            while Instant::now() < next && !stop.load(Ordering::Relaxed) {
                std::thread::sleep((next - Instant::now()).min(Duration::from_millis(100)));
            }
        }
    }

    /// The Prometheus text exposition of every GPU's latest sample (dcgm-exporter's names and
    /// labels, pog's extras) and the sampler's health.
    pub fn metrics(&self) -> Result<String, std::fmt::Error> {
        let state = self.state();
        let gpus: Vec<GpuMetrics<'_>> = state
            .gpus
            .iter()
            .map(|g| GpuMetrics {
                identity: &g.identity,
                sample: g.recent.back().map(|(_, s)| s),
                xid_total: g.xids.0,
                last_xid: g.xids.1,
                anomaly_score: g.anomaly_score,
                alerts_firing: g.alerts_firing,
                last_proof_ratio: state.timings.last(&g.identity.uuid),
            })
            .collect();
        pog_monitor::prometheus::render(&gpus, state.health)
    }

    /// Notes a step of a proof of a GPU claimed as `model`, for the agent's own
    /// `pog_last_proof_ratio` ([`crate::own_timing`]).
    pub fn timed(&self, model: &str, step: Step<'_>) {
        self.state().timings.note(model, step);
    }

    /// The summary of the request's GPU over its window (the samples taken in it, by the
    /// agent's clock), or `None` when this monitor does not watch that GPU.
    pub fn summary(&self, request: &HealthRequest) -> Option<HealthSummary> {
        let state = self.state();
        let gpu = state
            .gpus
            .iter()
            .find(|g| g.identity.uuid == request.gpu_uuid)?;
        let inside = |t: &u64| (request.from_ms..=request.to_ms).contains(t);
        let mut sums: BTreeMap<&'static str, (f64, f64, f64, u64)> = BTreeMap::new();
        let (mut samples, mut xids, mut xid_total) = (0u64, Vec::new(), 0u64);
        for (_, sample) in gpu.recent.iter().filter(|(t, _)| inside(t)) {
            samples += 1;
            for signal in Signal::ALL {
                let Some(v) = sample.read_now(signal).filter(|v| v.is_finite()) else {
                    continue;
                };
                let e =
                    sums.entry(signal.name())
                        .or_insert((f64::INFINITY, 0.0, f64::NEG_INFINITY, 0));
                *e = (e.0.min(v), e.1 + v, e.2.max(v), e.3 + 1);
            }
            for &code in &sample.xid {
                xid_total += 1;
                if xids.len() < MAX_HEALTH_XIDS {
                    xids.push(code);
                }
            }
        }
        let signals = sums
            .into_iter()
            .map(|(name, (min, sum, max, n))| {
                // The mean of rounded readings can fall a hair outside [min, max].
                let mean = (sum / n as f64).clamp(min, max);
                (name.to_string(), SignalSummary { min, mean, max, n })
            })
            .collect();
        let mut in_window: Vec<&(u64, Alert)> =
            gpu.alerts.iter().filter(|(t, _)| inside(t)).collect();
        let alerts_total = in_window.len() as u64;
        // Past the list's limit, the most severe are the ones listed (a warning must not hide
        // behind a run of info alerts), then in time order.
        if in_window.len() > MAX_HEALTH_ALERTS {
            in_window.sort_by_key(|(t, a)| (std::cmp::Reverse(a.severity), *t));
            in_window.truncate(MAX_HEALTH_ALERTS);
            in_window.sort_by_key(|(t, _)| *t);
        }
        Some(HealthSummary {
            request_id: request.id.clone(),
            gpu_uuid: request.gpu_uuid.clone(),
            from_ms: request.from_ms,
            to_ms: request.to_ms,
            simulated: self.simulated,
            samples,
            signals,
            alerts: in_window
                .iter()
                .map(|(t, a)| HealthAlert {
                    t_ms: *t,
                    kind: a.kind.name().to_string(),
                    severity: a.severity.name().to_string(),
                })
                .collect(),
            alerts_total,
            xids,
            xid_total,
        })
    }
}

/// `GET /metrics` of a [`Watch`].
pub async fn metrics(
    axum::extract::State(watch): axum::extract::State<std::sync::Arc<Watch>>,
) -> axum::response::Response {
    render_metrics(&watch)
}

/// The metrics page as an HTTP response.
pub(crate) fn render_metrics(watch: &Watch) -> axum::response::Response {
    use axum::http::{header, StatusCode};
    use axum::response::IntoResponse;
    match watch.metrics() {
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

/// A router serving only `GET /metrics` (`pog agent --metrics-listen`).
pub fn metrics_router(watch: std::sync::Arc<Watch>) -> axum::Router {
    axum::Router::new()
        .route("/metrics", axum::routing::get(metrics))
        .with_state(watch)
}

/// Why the health monitor cannot sample the GPUs served ([`run_nvml`]).
#[derive(Debug, thiserror::Error)]
pub enum NvmlWatchError {
    /// NVML could not be loaded.
    #[error("NVML: {0}")]
    Init(#[from] pog_device::nvml::NvmlInitError),
    /// NVML finds none of the GPUs served (their UUIDs).
    #[error("NVML sees none of the GPUs served ({})", .0.join(", "))]
    NoneFound(Vec<String>),
    /// NVML found them but could not open them for sampling.
    #[error("NVML: {0}")]
    Open(#[from] pog_device::monitor::SamplerError),
}

/// Samples, through NVML, the GPUs among `uuids` into `watch` every `interval` until `stop`
/// (blocking: run it on a thread of its own). Fails when NVML cannot be read or sees none of
/// them.
pub fn run_nvml(
    watch: &Watch,
    uuids: &[String],
    interval: Duration,
    stop: &AtomicBool,
) -> Result<(), NvmlWatchError> {
    let nvml = pog_device::nvml::init()?;
    // Only the GPUs served: one this agent does not serve, and cannot open, is not its
    // concern, and must not stop the telemetry of those it does.
    let mut indices = Vec::new();
    for uuid in uuids {
        match nvml.device_by_uuid(uuid.as_str()).and_then(|d| d.index()) {
            Ok(index) => indices.push(index),
            Err(e) => {
                tracing::warn!("health monitor: NVML cannot find GPU {uuid} ({e}); not watched")
            }
        }
    }
    if indices.is_empty() {
        return Err(NvmlWatchError::NoneFound(uuids.to_vec()));
    }
    let mut source = pog_device::monitor::NvmlSource::open(
        &nvml,
        &indices,
        pog_device::monitor::DEFAULT_SLOW_EVERY,
    )?;
    watch.run(&mut source, interval, stop);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(uuid: &str) -> GpuIdentity {
        GpuIdentity {
            index: 0,
            uuid: uuid.into(),
            model_name: "NVIDIA H200".into(),
            hostname: "host".into(),
            pci_bus_id: None,
        }
    }

    /// Five samples, temperatures 40, 41, … with an XID on the third.
    fn ramp() -> pog_monitor::Replay {
        let rows = (0..5)
            .map(|i| {
                let mut s = Sample::at(f64::from(i));
                s.temp_gpu_c = Some(40.0 + f64::from(i));
                if i == 2 {
                    s.xid = vec![79];
                }
                s
            })
            .collect();
        pog_monitor::Replay::new(identity("GPU-r"), rows)
    }

    fn request(uuid: &str, from_ms: u64, to_ms: u64) -> HealthRequest {
        HealthRequest {
            id: "r".into(),
            gpu_uuid: uuid.parse().unwrap(),
            agent_key: pog_signed::PublicKey::from([0; 32]),
            from_ms,
            to_ms,
            issued_at_ms: to_ms,
        }
    }

    #[test]
    fn a_summary_covers_the_samples_alerts_and_xids_of_its_window_only() {
        let watch = Watch::new(vec![identity("GPU-r")], false);
        let before = now_ms();
        watch.run(
            &mut ramp(),
            Duration::from_millis(1),
            &AtomicBool::new(false),
        );
        let after = now_ms();
        let r = request("GPU-r", before, after);
        let s = watch.summary(&r).unwrap();
        s.check(&r).unwrap();
        assert_eq!(s.samples, 5);
        let temp = s.signals["temp_gpu"];
        assert_eq!(
            (temp.min, temp.mean, temp.max, temp.n),
            (40.0, 42.0, 44.0, 5)
        );
        assert_eq!((s.xids.clone(), s.xid_total), (vec![79], 1));
        assert!(s.alerts.iter().any(|a| a.kind == "xid"), "{s:?}");
        assert!(!s.simulated);
        let empty = watch
            .summary(&request("GPU-r", before - 10_000, before - 1))
            .unwrap();
        assert_eq!(
            (empty.samples, empty.xid_total, empty.alerts_total),
            (0, 0, 0)
        );
        assert!(empty.signals.is_empty());
        assert!(watch
            .summary(&request("GPU-other", before, after))
            .is_none());
        let text = watch.metrics().unwrap();
        assert!(
            text.contains("DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"GPU-r\""),
            "{text}"
        );
        assert!(text.contains("pog_xid_errors_total{"), "{text}");
    }

    #[test]
    fn past_the_alert_limit_the_most_severe_are_listed_in_time_order() {
        use pog_monitor::{AlertKind, Severity};
        let watch = Watch::new(vec![identity("GPU-a")], false);
        let alert = |t_ms: u64, severity| {
            (
                t_ms,
                Alert {
                    t: t_ms as f64 / 1000.0,
                    kind: AlertKind::ClockDrop,
                    severity,
                    signals: Default::default(),
                    message: String::new(),
                },
            )
        };
        {
            let mut state = watch.state();
            let alerts = &mut state.gpus[0].alerts;
            // Many info alerts first, then one warning at the end of the window.
            alerts.extend((0..100).map(|i| alert(1_000 + i, Severity::Info)));
            alerts.push_back(alert(2_000, Severity::Warning));
        }
        let r = request("GPU-a", 0, 3_000);
        let s = watch.summary(&r).unwrap();
        s.check(&r).unwrap();
        assert_eq!((s.alerts.len(), s.alerts_total), (MAX_HEALTH_ALERTS, 101));
        assert!(s.alerts.iter().any(|a| a.severity == "warning"), "{s:?}");
        assert!(s.alerts.windows(2).all(|w| w[0].t_ms <= w[1].t_ms));
    }

    #[test]
    fn a_simulated_host_is_labelled_and_unsampled() {
        let watch = Watch::new(vec![identity("GPU-s")], true);
        let text = watch.metrics().unwrap();
        assert!(
            text.contains("modelName=\"SIMULATED NVIDIA H200\""),
            "{text}"
        );
        assert!(!text.contains("DCGM_FI_DEV_GPU_TEMP{"), "{text}");
        let s = watch.summary(&request("GPU-s", 0, 1_000)).unwrap();
        assert!(s.simulated);
        assert_eq!(s.samples, 0);
    }
}
