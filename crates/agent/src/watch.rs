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
use pog_monitor::live::{LiveMonitor, Settings, Snapshot, Stamp};
use pog_monitor::prometheus::{Format, GpuIdentity};
use pog_monitor::{Alert, Signal};
use pog_net::locked::Locked;
use pog_proof::wire::{
    HealthAlert, HealthRequest, HealthSummary, SignalSummary, MAX_HEALTH_ALERTS,
    MAX_HEALTH_WINDOW_MS, MAX_HEALTH_XIDS,
};
use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// How long samples and alerts are kept: the longest window a request may name, and a minute.
pub const KEEP_MS: u64 = MAX_HEALTH_WINDOW_MS + 60_000;

/// Where samples come from: NVML on a GPU host ([`run_nvml`]), a recorded trace in tests.
pub use pog_monitor::Source;

/// The agent's monitor: `pog_monitor`'s [`LiveMonitor`] (the sampling loop `pog monitor run`
/// runs too), keeping the GPUs' samples and alerts of the last [`KEEP_MS`] under the agent's
/// clock, and summarizing them on request.
pub struct Watch {
    simulated: bool,
    live: Arc<LiveMonitor>,
    /// The agent's own timing of its proofs, published on each GPU's snapshot.
    timings: std::sync::Mutex<OwnTimings>,
}

impl Watch {
    /// A monitor of these GPUs, nothing sampled yet. A `simulated` host (the test double) has
    /// no telemetry to sample: its GPUs are listed under a `modelName` that starts with
    /// "SIMULATED" and every summary says `simulated`.
    pub fn new(identities: Vec<GpuIdentity>, simulated: bool) -> Watch {
        let identities = identities
            .into_iter()
            .map(|mut identity| {
                if simulated {
                    identity.model_name = format!("SIMULATED {}", identity.model_name);
                }
                identity
            })
            .collect();
        // Rule-based detectors (no healthy history to train on), samples kept under the
        // agent's clock, each alert logged.
        let settings = Settings {
            keep: Duration::from_millis(KEEP_MS),
            recent_alerts: 0,
            stamp: Stamp::Received,
            log_prefix: "health monitor: ",
            ..Settings::default()
        };
        let live = LiveMonitor::new(settings, identities).on_alert(Box::new(|gpu, alert, _| {
            tracing::warn!(
                gpu = %gpu.uuid,
                kind = alert.kind.name(),
                severity = alert.severity.name(),
                cause = alert.cause,
                check = alert.check,
                "{}",
                alert.message
            );
        }));
        Watch {
            simulated,
            live: Arc::new(live),
            timings: std::sync::Mutex::default(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, Snapshot> {
        self.live.snapshot()
    }

    /// Samples `source` every `interval` until `stop` is set or the source runs out
    /// ([`LiveMonitor::run`]): the detectors see every sample, alerts and new sampler notices
    /// are logged, and what is older than [`KEEP_MS`] is forgotten. The GPUs become the
    /// source's (NVML's names and indices).
    pub fn run(&self, source: &mut dyn Source, interval: Duration, stop: &AtomicBool) {
        if let Err(e) = self.live.run(source, interval, stop) {
            tracing::warn!("health monitor: {e}");
        }
    }

    /// The Prometheus exposition, in `format`, of every GPU's latest sample (dcgm-exporter's
    /// names, types and labels, pog's extras) and the sampler's health.
    pub fn metrics(&self, format: Format) -> Result<String, std::fmt::Error> {
        self.live.metrics(format)
    }

    /// Notes a step of a proof of a GPU claimed as `model`, for the agent's own
    /// `pog_last_proof_ratio` ([`crate::own_timing`]).
    pub fn timed(&self, model: &str, step: Step<'_>) {
        let mut timings = self.timings.locked();
        timings.note(model, step);
        for gpu in self.state().gpus.iter_mut() {
            if let Some(last) = timings.last(&gpu.identity.uuid) {
                gpu.last_proof_ratio = Some(last);
            }
        }
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

/// The metrics page as an HTTP response, in the format the request's `Accept` header asks for.
pub(crate) fn render_metrics(
    watch: &Watch,
    headers: &axum::http::HeaderMap,
) -> axum::response::Response {
    pog_monitor::serve::metrics_response(&watch.live, headers)
}

/// A router serving `GET /metrics` and the monitor's dashboard (`GET /`, `GET /api/dashboard`)
/// of the GPUs the agent watches (`pog agent --metrics-listen`).
pub fn metrics_router(watch: Arc<Watch>) -> axum::Router {
    pog_monitor::serve::router(watch.live.clone())
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
    // The driver's version labels every series (dcgm-exporter's `DCGM_FI_DRIVER_VERSION`).
    let driver = nvml.sys_driver_version().ok();
    for gpu in &mut watch.live.snapshot().gpus {
        gpu.identity.driver_version.clone_from(&driver);
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
    use pog_monitor::Sample;
    use pog_proof::timing::now_ms;

    fn identity(uuid: &str) -> GpuIdentity {
        GpuIdentity {
            index: 0,
            uuid: uuid.into(),
            model_name: "NVIDIA H200".into(),
            hostname: "host".into(),
            pci_bus_id: None,
            driver_version: None,
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
        let text = watch.metrics(Format::OpenMetrics).unwrap();
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
                    cause: "",
                    check: "",
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
        let text = watch.metrics(Format::OpenMetrics).unwrap();
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
