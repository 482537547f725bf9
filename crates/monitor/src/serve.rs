//! The HTTP side of a [`LiveMonitor`]: `GET /metrics` (Prometheus, dcgm-exporter's names) and
//! `GET /?window=SECONDS` (the dashboard: charts of each GPU over the window, drawn from the
//! snapshot's recent samples, or from the history's 1-minute means for windows longer than
//! what the snapshot keeps), as axum routers for any server to serve.

use crate::dashboard::{charts, page, Chart, DashboardError, GpuPanel, Series, SIGNAL_CHARTS};
use crate::history::{History, HistoryError};
use crate::live::LiveMonitor;
use crate::prometheus::{Format, GpuIdentity};
use crate::{Alert, Sample};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use std::path::{Path, PathBuf};
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

/// Why the dashboard could not be drawn.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    /// The history could not be read for a long window.
    #[error(transparent)]
    History(#[from] HistoryError),
    /// The page could not be drawn.
    #[error(transparent)]
    Page(#[from] DashboardError),
}

/// What one dashboard page shows, copied out of the snapshot so that it is drawn without
/// holding the monitor's lock ([`View::render`]).
pub struct View {
    identities: Vec<GpuIdentity>,
    recent: Vec<Vec<(f64, Sample)>>,
    alerts: Vec<(u32, Alert)>,
    history: Option<PathBuf>,
    now: f64,
    window: f64,
    label: String,
}

impl View {
    /// The page of `live` over `window` seconds (600 when `None` or not a positive number,
    /// at most the longest of [`WINDOWS`]).
    pub fn of(live: &LiveMonitor, window: Option<f64>) -> View {
        let window = window
            .filter(|w| w.is_finite() && *w > 0.0)
            .unwrap_or(DEFAULT_WINDOW)
            .min(WINDOWS[WINDOWS.len() - 1].0);
        let label = WINDOWS
            .iter()
            .find(|(seconds, _)| *seconds == window)
            .map_or_else(|| format!("{window:.0} s"), |(_, label)| label.to_string());
        let live = live.snapshot();
        let seconds = |t_ms: u64| t_ms as f64 / 1000.0;
        let now = live
            .gpus
            .iter()
            .filter_map(|g| g.recent.back().map(|r| seconds(r.0)))
            .fold(live.unix_start, f64::max);
        View {
            identities: live.gpus.iter().map(|g| g.identity.clone()).collect(),
            recent: live
                .gpus
                .iter()
                .map(|g| {
                    g.recent
                        .iter()
                        .map(|(t, s)| (seconds(*t), s))
                        .filter(|(t, _)| now - t <= window)
                        .map(|(t, s)| (t, s.clone()))
                        .collect()
                })
                .collect(),
            alerts: live.alerts.iter().rev().cloned().collect(),
            history: live.history.clone(),
            now,
            window,
            label,
        }
    }

    /// The page's HTML (reads the history for a long window: blocking).
    pub fn render(&self) -> Result<String, PageError> {
        let mut panels = Vec::new();
        for (identity, samples) in self.identities.iter().zip(&self.recent) {
            let charts = match (&self.history, self.window > RECENT_S) {
                (Some(path), true) => {
                    charts_from_history(path, &identity.uuid, self.now - self.window)?
                }
                _ => charts(samples),
            };
            panels.push(GpuPanel { identity, charts });
        }
        let alerts: Vec<(u32, &Alert)> = self.alerts.iter().map(|(g, a)| (*g, a)).collect();
        Ok(page(
            &panels,
            &alerts,
            self.now,
            (self.window, &self.label),
            &WINDOWS,
            2,
        )?)
    }
}

/// The charts of a long window, from the history's 1-minute means.
fn charts_from_history(
    path: &Path,
    uuid: &str,
    since_unix: f64,
) -> Result<Vec<Chart>, HistoryError> {
    let history = History::open_read_only(path)?;
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
                .collect::<Result<_, HistoryError>>()?;
            Ok(Chart {
                title: format!("{title}, 1-minute means"),
                series,
            })
        })
        .collect()
}

/// The dashboard's query: the window, in seconds.
#[derive(serde::Deserialize)]
struct Query {
    window: Option<f64>,
}

/// `GET /?window=SECONDS`: the dashboard, drawn on a blocking task.
async fn dashboard(
    axum::extract::State(live): axum::extract::State<Arc<LiveMonitor>>,
    axum::extract::Query(query): axum::extract::Query<Query>,
) -> Response {
    let view = View::of(&live, query.window);
    match tokio::task::spawn_blocking(move || view.render()).await {
        Ok(Ok(html)) => Html(html).into_response(),
        Ok(Err(e)) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "the dashboard failed").into_response(),
    }
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

/// A router serving `GET /metrics` and the dashboard at `GET /`.
pub fn router(live: Arc<LiveMonitor>) -> axum::Router {
    axum::Router::new()
        .route("/", axum::routing::get(dashboard))
        .route("/metrics", axum::routing::get(metrics))
        .with_state(live)
}
