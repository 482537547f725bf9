//! The HTTP side of a [`LiveMonitor`]: `GET /metrics` (Prometheus, dcgm-exporter's names), the
//! dashboard at `GET /` (a page and its script, `GET /dashboard.js`, that redraw in place) and
//! the JSON it reads, `GET /api/dashboard?window=SECONDS` ([`Dashboard`]: each GPU over the
//! window, from the snapshot's recent samples, or from the history's 1-minute means for windows
//! longer than what the snapshot keeps), as axum routers for any server to serve.

use crate::dashboard::{
    gpu_view, history_signals, AlertView, ChartSource, Dashboard, GpuInput, WindowLink, PAGE_HTML,
    PAGE_JS,
};
use crate::history::{History, HistoryError};
use crate::live::LiveMonitor;
use crate::prometheus::{Format, GpuIdentity};
use crate::{Alert, Limits, Sample, Signal};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// Seconds of samples the dashboard draws from memory; longer windows read the history.
pub const RECENT_S: f64 = 900.0;
/// The dashboard's zoom links.
pub const WINDOWS: [(f64, &str); 5] = [
    (60.0, "1 minute"),
    (600.0, "10 minutes"),
    (3600.0, "1 hour"),
    (86_400.0, "1 day"),
    (2_592_000.0, "30 days"),
];
/// The window shown when none is asked for.
const DEFAULT_WINDOW: f64 = 600.0;
/// How often the page asks for the JSON again, ms.
pub const REFRESH_MS: u32 = 2000;

/// One GPU as the snapshot had it.
struct GpuCopy {
    identity: GpuIdentity,
    samples: Vec<(f64, Sample)>,
    alerts: Vec<AlertView>,
    limits: Limits,
    xids: (u64, u32),
    alerts_firing: usize,
    anomaly_score: Option<f64>,
}

/// What one dashboard answer shows, copied out of the snapshot so that it is built without
/// holding the monitor's lock ([`View::render`]).
pub struct View {
    gpus: Vec<GpuCopy>,
    alerts: Vec<AlertView>,
    history: Option<PathBuf>,
    alert_temps: (f64, f64),
    samples: u64,
    started_ms: f64,
    now_ms: f64,
    window: f64,
    label: String,
}

impl View {
    /// The dashboard of `live` over `window` seconds (600 when `None` or not a positive
    /// number, at most the longest of [`WINDOWS`]).
    pub fn of(live: &LiveMonitor, window: Option<f64>) -> View {
        let window = window
            .filter(|w| w.is_finite() && *w > 0.0)
            .unwrap_or(DEFAULT_WINDOW)
            .min(WINDOWS[WINDOWS.len() - 1].0);
        let label = WINDOWS
            .iter()
            .find(|(seconds, _)| *seconds == window)
            .map_or_else(|| format!("{window:.0} s"), |(_, label)| label.to_string());
        let config = &live.settings().config;
        let alert_temps = (config.thermal_limit_c, config.mem_thermal_limit_c);
        let live = live.snapshot();
        let started_ms = live.unix_start * 1000.0;
        let now_ms = live
            .gpus
            .iter()
            .filter_map(|g| g.recent.back().map(|r| r.0 as f64))
            .fold(started_ms, f64::max);
        let inside = |t_ms: u64| now_ms - t_ms as f64 <= window * 1000.0;
        View {
            gpus: live
                .gpus
                .iter()
                .map(|g| GpuCopy {
                    identity: g.identity.clone(),
                    samples: g
                        .recent
                        .iter()
                        .filter(|(t, _)| inside(*t))
                        .map(|(t, s)| (*t as f64, s.clone()))
                        .collect(),
                    alerts: g
                        .alerts
                        .iter()
                        .rev()
                        .filter(|(t, _)| inside(*t))
                        .map(|(t, a)| AlertView::new(g.identity.index, *t as f64, a))
                        .collect(),
                    limits: g.limits,
                    xids: g.xids,
                    alerts_firing: g.alerts_firing,
                    anomaly_score: g.anomaly_score,
                })
                .collect(),
            alerts: live
                .alerts
                .iter()
                .rev()
                .map(|(gpu, t, a): &(u32, u64, Alert)| AlertView::new(*gpu, *t as f64, a))
                .collect(),
            history: live.history.clone(),
            alert_temps,
            samples: live.health.samples,
            started_ms,
            now_ms,
            window,
            label,
        }
    }

    /// The dashboard's JSON (reads the history for a long window: blocking).
    pub fn render(self) -> Result<Dashboard, HistoryError> {
        let from_history = self.window > RECENT_S;
        let history = match (&self.history, from_history) {
            (Some(path), true) => Some(History::open_read_only(path)?),
            _ => None,
        };
        let since_unix = (self.now_ms / 1000.0) - self.window;
        let mut gpus = Vec::new();
        for gpu in self.gpus {
            let minutes = match &history {
                Some(history) => {
                    let mut read = BTreeMap::new();
                    for signal in history_signals() {
                        let means: Vec<(f64, f64)> = history
                            .minutes(&gpu.identity.uuid, signal, since_unix)?
                            .into_iter()
                            .map(|(t, _, mean, _)| (t * 1000.0, mean))
                            .collect();
                        read.insert(signal, means);
                    }
                    Some(read)
                }
                None => None,
            };
            let read = |signal: Signal| {
                minutes
                    .as_ref()
                    .and_then(|m| m.get(&signal).cloned())
                    .unwrap_or_default()
            };
            let charts = match minutes {
                Some(_) => ChartSource::Minutes(&read),
                None => ChartSource::Samples(&gpu.samples),
            };
            gpus.push(gpu_view(
                GpuInput {
                    identity: &gpu.identity,
                    samples: &gpu.samples,
                    charts,
                    limits: gpu.limits,
                    xids: gpu.xids,
                    alerts_firing: gpu.alerts_firing,
                    anomaly_score: gpu.anomaly_score,
                    alerts: gpu.alerts.clone(),
                },
                self.alert_temps,
            ));
        }
        Ok(Dashboard {
            now_ms: self.now_ms,
            started_ms: self.started_ms,
            window_s: self.window,
            window_label: self.label,
            minute_means: history.is_some(),
            windows: WINDOWS
                .iter()
                .map(|(seconds, label)| WindowLink {
                    seconds: *seconds,
                    label: label.to_string(),
                })
                .collect(),
            refresh_ms: REFRESH_MS,
            samples: self.samples,
            gpus,
            alerts: self.alerts,
        })
    }
}

/// The dashboard's query: the window, in seconds.
#[derive(serde::Deserialize)]
struct Query {
    window: Option<f64>,
}

/// `GET /api/dashboard?window=SECONDS`: the dashboard's JSON, built on a blocking task.
async fn dashboard_json(
    axum::extract::State(live): axum::extract::State<Arc<LiveMonitor>>,
    axum::extract::Query(query): axum::extract::Query<Query>,
) -> Response {
    let view = View::of(&live, query.window);
    let built = tokio::task::spawn_blocking(move || {
        view.render()
            .map_err(|e| e.to_string())
            .and_then(|d| serde_json::to_vec(&d).map_err(|e| e.to_string()))
    })
    .await;
    match built {
        Ok(Ok(json)) => (
            [
                (header::CONTENT_TYPE, "application/json"),
                (header::CACHE_CONTROL, "no-store"),
            ],
            json,
        )
            .into_response(),
        Ok(Err(e)) => (StatusCode::INTERNAL_SERVER_ERROR, e).into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "the dashboard failed").into_response(),
    }
}

/// `GET /`: the dashboard's page (the window is read from its own `?window=` by the script).
async fn page() -> Response {
    ([(header::CACHE_CONTROL, "no-store")], Html(PAGE_HTML)).into_response()
}

/// `GET /dashboard.js`: the page's script.
async fn script() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        PAGE_JS,
    )
        .into_response()
}

/// The metrics page of `live` as an HTTP response, in the format the request's `Accept`
/// header asks for ([`Format::from_accept`]: the Prometheus text format 0.0.4 for
/// `text/plain`, OpenMetrics otherwise).
pub fn metrics_response(live: &LiveMonitor, headers: &HeaderMap) -> Response {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let format = Format::from_accept(accept);
    match live.metrics(format) {
        Ok(text) => ([(header::CONTENT_TYPE, format.content_type())], text).into_response(),
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "rendering the metrics failed",
        )
            .into_response(),
    }
}

/// `GET /metrics`.
async fn metrics(
    axum::extract::State(live): axum::extract::State<Arc<LiveMonitor>>,
    headers: HeaderMap,
) -> Response {
    metrics_response(&live, &headers)
}

/// A router serving only `GET /metrics`.
pub fn metrics_router(live: Arc<LiveMonitor>) -> axum::Router {
    axum::Router::new()
        .route("/metrics", axum::routing::get(metrics))
        .with_state(live)
}

/// A router serving `GET /metrics`, the dashboard at `GET /` with its script at
/// `GET /dashboard.js`, and its JSON at `GET /api/dashboard`.
pub fn router(live: Arc<LiveMonitor>) -> axum::Router {
    axum::Router::new()
        .route("/", axum::routing::get(page))
        .route("/dashboard.js", axum::routing::get(script))
        .route("/api/dashboard", axum::routing::get(dashboard_json))
        .route("/metrics", axum::routing::get(metrics))
        .with_state(live)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Retention;
    use crate::live::Settings;
    use crate::{parse_trace, Replay};
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    fn identity() -> GpuIdentity {
        GpuIdentity {
            index: 0,
            uuid: "GPU-served".into(),
            model_name: "NVIDIA H200".into(),
            hostname: "host".into(),
            pci_bus_id: None,
            driver_version: None,
        }
    }

    /// A monitor that ran over the healthy H200 trace with an XID at 20 s, keeping a history.
    fn ran(dir: &std::path::Path) -> LiveMonitor {
        let mut rows = parse_trace(include_str!("../tests/data/h200-healthy.csv")).unwrap();
        let at = rows.iter().position(|s| s.t >= 20.0).unwrap();
        rows[at].xid = vec![79];
        let retention = Retention {
            raw: Duration::from_secs(86_400),
            minutes: Duration::from_secs(86_400),
        };
        let live = LiveMonitor::new(Settings::default(), Vec::new())
            .keep_history(&dir.join("monitor.sqlite"), retention)
            .unwrap();
        let limits = Limits {
            slowdown_c: Some(89.0),
            shutdown_c: None,
            power_limit_w: Some(700.0),
        };
        live.run(
            &mut Replay::new(identity(), rows).with_limits(limits),
            Duration::ZERO,
            &AtomicBool::new(false),
        )
        .unwrap();
        live
    }

    #[test]
    fn a_short_window_shows_the_samples_a_long_one_the_historys_means() {
        let dir = tempfile::tempdir().unwrap();
        let live = ran(dir.path());
        let short = View::of(&live, Some(60.0)).render().unwrap();
        let gpu = &short.gpus[0];
        let (first, last) = {
            let power = &gpu.charts[1].series[0].points;
            (power[0].0, power[power.len() - 1].0)
        };
        assert!(!short.minute_means && short.window_label == "1 minute");
        assert_eq!(Some(last), gpu.latest_ms);
        assert_eq!(last, short.now_ms);
        assert!(
            last - first <= 60_000.0 && last - first > 55_000.0,
            "{first} {last}"
        );
        assert_eq!(gpu.limits.power_limit_w, Some(700.0));
        assert_eq!(gpu.alert_temp_c, live.settings().config.thermal_limit_c);
        // The XID at 20 s is on the samples' clock, listed for the page and counted.
        let xid = short.alerts.iter().find(|a| a.kind == "xid").unwrap();
        assert!(
            (xid.t_ms - (short.started_ms + 20_000.0)).abs() < 1_000.0,
            "{xid:?}"
        );
        assert!(gpu
            .counters
            .iter()
            .any(|c| c.name == "XID errors" && c.total == Some(1)));
        assert!(
            gpu.alerts.is_empty(),
            "the XID is older than the minute shown"
        );

        let long = View::of(&live, Some(86_400.0)).render().unwrap();
        assert!(long.minute_means && long.window_label == "1 day");
        let power = &long.gpus[0].charts[1];
        assert_eq!(power.title, "power, 1-minute means");
        // About 230 s of trace: four or five minutes, each a mean within the trace's range.
        let means = &power.series[0].points;
        assert!((4..=5).contains(&means.len()), "{means:?}");
        assert!(means.iter().all(|p| p.1 > 70.0 && p.1 < 700.0), "{means:?}");
        assert!(
            !long.gpus[0].charts[8].has_points,
            "no throttle lanes in the history"
        );
        assert_eq!(long.gpus[0].alerts.len(), short.alerts.len());

        let default = View::of(&live, None).render().unwrap();
        assert_eq!(default.window_s, DEFAULT_WINDOW);
        let capped = View::of(&live, Some(1e12)).render().unwrap();
        assert_eq!(capped.window_s, WINDOWS[WINDOWS.len() - 1].0);
    }
}
