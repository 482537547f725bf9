//! The dashboard: one page (HTML, CSS and a hand-written script, all embedded: nothing is
//! fetched from anywhere else) that reads [`Dashboard`] as JSON every few seconds and redraws
//! in place — an overview of every GPU, then per GPU its current values, charts against the
//! wall clock with limit lines, alert markers and tooltips, and panels of its error counters
//! and processes. This module builds the JSON (pure: from samples, alerts and limits); `serve`
//! serves it and the page.

use crate::alert::Alert;
use crate::prometheus::GpuIdentity;
use crate::sample::{reasons, Sample, Signal};
use crate::source::Limits;
use crate::Severity;
use serde::Serialize;

/// The page's HTML (it loads [`PAGE_JS`] from `/dashboard.js`).
pub const PAGE_HTML: &str = include_str!("dashboard/page.html");
/// The page's script: fetches the JSON, draws the charts as SVG, keeps the page in place.
pub const PAGE_JS: &str = include_str!("dashboard/page.js");

/// Points a chart line carries at most; longer lines are thinned to each bucket's lowest and
/// highest point (so that a spike survives).
pub const MAX_POINTS: usize = 600;

/// One line of a chart: `(Unix ms, value)` points, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Series {
    /// Its name in the legend and the tooltip.
    pub name: String,
    /// Its points (in JSON, the time as a whole number of ms).
    #[serde(serialize_with = "whole_ms")]
    pub points: Vec<(f64, f64)>,
}

/// Points with their times written as whole milliseconds (the page reads a third less).
fn whole_ms<S: serde::Serializer>(points: &[(f64, f64)], to: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = to.serialize_seq(Some(points.len()))?;
    for &(t, v) in points {
        seq.serialize_element(&(t.round() as i64, v))?;
    }
    seq.end()
}

/// The points of a flag's lane where its value changes: the first, each that differs from the
/// one before it, and the last (a lane is drawn from one change to the next).
pub fn changes(points: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    let n = points.len();
    let mut out: Vec<(f64, f64)> = Vec::new();
    for (i, p) in points.into_iter().enumerate() {
        if out.last().is_none_or(|last| last.1 != p.1) || i + 1 == n {
            out.push(p);
        }
    }
    out
}

/// A horizontal line drawn across a chart: a limit of the GPU or of the detectors.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LimitLine {
    /// What the limit is, e.g. "slowdown (driver)".
    pub name: String,
    /// Its value, in the chart's unit.
    pub value: f64,
}

/// How a chart is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChartKind {
    /// Lines against time.
    Line,
    /// One lane per series, filled where the value is 1 (flags such as throttle reasons).
    Lanes,
}

/// One chart.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Chart {
    /// A stable id (the page keys its elements by it).
    pub id: &'static str,
    /// The title.
    pub title: String,
    /// The values' unit ("" for flags and counts).
    pub unit: &'static str,
    /// How it is drawn.
    pub kind: ChartKind,
    /// The lines.
    pub series: Vec<Series>,
    /// Limit lines.
    pub limits: Vec<LimitLine>,
    /// Whether any line has a point (a chart without one is shown as "not reported").
    pub has_points: bool,
}

/// One error counter of a GPU: its total at the latest sample and its increase over the
/// window, each `None` when not reported.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Counter {
    /// The panel it is shown in: "ECC", "PCIe" or "XID".
    pub panel: &'static str,
    /// What it counts.
    pub name: &'static str,
    /// The total the GPU reports (since the driver loaded, or over its life for aggregates).
    pub total: Option<u64>,
    /// Its increase between the window's first and last reading.
    pub increase: Option<u64>,
}

/// An alert as the page lists and marks it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AlertView {
    /// The GPU's index.
    pub gpu: u32,
    /// When, Unix ms (the clock of the charts' points).
    pub t_ms: f64,
    /// "info", "warning" or "critical".
    pub severity: &'static str,
    /// The alert's kind.
    pub kind: &'static str,
    /// What happened.
    pub message: String,
    /// The most likely cause.
    pub cause: &'static str,
    /// What to check.
    pub check: &'static str,
}

impl AlertView {
    /// An alert of GPU `gpu` at `t_ms`.
    pub fn new(gpu: u32, t_ms: f64, alert: &Alert) -> AlertView {
        AlertView {
            gpu,
            t_ms,
            severity: alert.severity.name(),
            kind: alert.kind.name(),
            message: alert.message.clone(),
            cause: alert.cause,
            check: alert.check,
        }
    }
}

/// One GPU on the page.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuView {
    /// Its index on its host.
    pub index: u32,
    /// Its UUID.
    pub uuid: String,
    /// Its model name.
    pub model_name: String,
    /// The host's name.
    pub hostname: String,
    /// Its PCI bus id, when known.
    pub pci_bus_id: Option<String>,
    /// The driver's version, when known.
    pub driver_version: Option<String>,
    /// Its own limits, as its driver reports them.
    pub limits: Limits,
    /// The detectors' GPU temperature limit, °C.
    pub alert_temp_c: f64,
    /// The detectors' memory temperature limit, °C.
    pub alert_mem_temp_c: f64,
    /// When the latest sample was taken, Unix ms.
    pub latest_ms: Option<f64>,
    /// The latest sample (the current values).
    pub latest: Option<Sample>,
    /// The names of the throttle reasons set at the latest sample (`None`: not read).
    pub clock_reasons_active: Option<Vec<&'static str>>,
    /// "no data", "ok", or the worst severity of its alerts in the window while any is open.
    pub status: &'static str,
    /// Alerts open now.
    pub alerts_firing: usize,
    /// The isolation forest's latest score, when a model has one.
    pub anomaly_score: Option<f64>,
    /// Error counters (ECC, row remapping, retired pages, PCIe replays, XIDs).
    pub counters: Vec<Counter>,
    /// Its charts.
    pub charts: Vec<Chart>,
    /// Its alerts in the window, newest first.
    pub alerts: Vec<AlertView>,
}

/// A zoom link of the page.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowLink {
    /// The window, in seconds.
    pub seconds: f64,
    /// Its name, e.g. "10 minutes".
    pub label: String,
}

/// Everything the page shows: what `GET /api/dashboard` answers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Dashboard {
    /// The right edge of the charts: the latest sample's time, Unix ms.
    pub now_ms: f64,
    /// When the monitor started, Unix ms.
    pub started_ms: f64,
    /// The window shown, seconds.
    pub window_s: f64,
    /// Its name.
    pub window_label: String,
    /// Whether the charts show the history's 1-minute means (a window longer than what is
    /// kept in memory) rather than the samples.
    pub minute_means: bool,
    /// The zoom links.
    pub windows: Vec<WindowLink>,
    /// How often the page asks again, ms.
    pub refresh_ms: u32,
    /// Samples the sampler took, all GPUs.
    pub samples: u64,
    /// The GPUs, in the source's order.
    pub gpus: Vec<GpuView>,
    /// The latest alerts of every GPU, newest first.
    pub alerts: Vec<AlertView>,
}

/// How a line reads its value off a sample; `signal` names it in the history (`None`: the
/// history does not keep it).
struct Line {
    name: &'static str,
    signal: Option<Signal>,
    read: fn(&Sample) -> Option<f64>,
}

/// The charts of a GPU, in page order: id, title, unit, kind, lines.
fn chart_specs() -> Vec<(
    &'static str,
    &'static str,
    &'static str,
    ChartKind,
    Vec<Line>,
)> {
    let line = |name, signal: Signal| Line {
        name,
        signal: Some(signal),
        read: match signal {
            Signal::TempGpu => |s: &Sample| s.temp_gpu_c,
            Signal::TempMem => |s: &Sample| s.temp_mem_c,
            Signal::Power => |s: &Sample| s.power_w,
            Signal::Energy => |s: &Sample| s.energy_mj,
            Signal::UtilGpu => |s: &Sample| s.util_gpu_pct,
            Signal::UtilMem => |s: &Sample| s.util_mem_pct,
            Signal::MemUsed => |s: &Sample| s.mem_used_mib,
            Signal::SmClock => |s: &Sample| s.sm_clock_mhz,
            Signal::MemClock => |s: &Sample| s.mem_clock_mhz,
            Signal::PcieTx => |s: &Sample| s.pcie_tx_kbs,
            Signal::PcieRx => |s: &Sample| s.pcie_rx_kbs,
        },
    };
    let flag = |name, read| Line {
        name,
        signal: None,
        read,
    };
    use ChartKind::{Lanes, Line as L};
    vec![
        (
            "temperature",
            "temperature",
            "°C",
            L,
            vec![
                line("GPU", Signal::TempGpu),
                line("memory", Signal::TempMem),
            ],
        ),
        ("power", "power", "W", L, vec![line("power", Signal::Power)]),
        (
            "utilization",
            "utilization",
            "%",
            L,
            vec![
                line("GPU", Signal::UtilGpu),
                line("memory", Signal::UtilMem),
            ],
        ),
        (
            "memory",
            "memory used",
            "MiB",
            L,
            vec![line("used", Signal::MemUsed)],
        ),
        (
            "clocks",
            "clocks",
            "MHz",
            L,
            vec![
                line("SM", Signal::SmClock),
                line("memory", Signal::MemClock),
            ],
        ),
        (
            "pcie",
            "PCIe throughput",
            "KB/s",
            L,
            vec![line("TX", Signal::PcieTx), line("RX", Signal::PcieRx)],
        ),
        (
            "processes",
            "processes",
            "",
            L,
            vec![flag("processes", |s| s.processes.map(f64::from))],
        ),
        ("fan", "fan speed", "%", L, vec![flag("fan", |s| s.fan_pct)]),
        (
            "throttle",
            "throttle reasons",
            "",
            Lanes,
            vec![
                flag("idle", |s| bit(s, reasons::GPU_IDLE)),
                flag("power cap", |s| bit(s, reasons::SW_POWER_CAP)),
                flag("thermal", |s| {
                    bit(s, reasons::SW_THERMAL | reasons::HW_THERMAL)
                }),
                flag("HW slowdown", |s| bit(s, reasons::HW_SLOWDOWN)),
                flag("power brake", |s| bit(s, reasons::HW_POWER_BRAKE)),
            ],
        ),
    ]
}

/// 1 when any of `mask`'s throttle reasons is set, 0 when none is, `None` when not read.
fn bit(s: &Sample, mask: u64) -> Option<f64> {
    s.clock_reasons.map(|r| f64::from(u8::from(r & mask != 0)))
}

/// Thins `points` (oldest first) to at most about `max`: the time span is cut into `max / 2`
/// buckets and each keeps its lowest and its highest point, in time order.
pub fn thin(points: Vec<(f64, f64)>, max: usize) -> Vec<(f64, f64)> {
    let buckets = max / 2;
    if points.len() <= max || buckets == 0 {
        return points;
    }
    let (t0, t1) = (points[0].0, points[points.len() - 1].0);
    let span = (t1 - t0).max(f64::MIN_POSITIVE);
    let mut out = Vec::with_capacity(max + 2);
    // The current bucket: its number, its lowest and its highest point.
    type Bucket = (usize, (f64, f64), (f64, f64));
    let mut bucket: Option<Bucket> = None;
    let flush = |out: &mut Vec<(f64, f64)>, (lo, hi): ((f64, f64), (f64, f64))| {
        let (a, b) = if lo.0 <= hi.0 { (lo, hi) } else { (hi, lo) };
        out.push(a);
        if b != a {
            out.push(b);
        }
    };
    for p in points {
        let k = (((p.0 - t0) / span) * buckets as f64).min(buckets as f64 - 1.0) as usize;
        bucket = match bucket {
            Some((j, lo, hi)) if j == k => Some((
                j,
                if p.1 < lo.1 { p } else { lo },
                if p.1 > hi.1 { p } else { hi },
            )),
            Some((_, lo, hi)) => {
                flush(&mut out, (lo, hi));
                Some((k, p, p))
            }
            None => Some((k, p, p)),
        };
    }
    if let Some((_, lo, hi)) = bucket {
        flush(&mut out, (lo, hi));
    }
    out
}

/// The limit lines of a chart.
fn limit_lines(
    id: &str,
    limits: &Limits,
    alert_temp_c: f64,
    latest: Option<&Sample>,
) -> Vec<LimitLine> {
    let mut out = Vec::new();
    let mut add = |name: &str, value: Option<f64>| {
        if let Some(value) = value.filter(|v| v.is_finite()) {
            out.push(LimitLine {
                name: name.to_string(),
                value,
            });
        }
    };
    match id {
        "temperature" => {
            add("slowdown (driver)", limits.slowdown_c);
            add("alert limit (monitor)", Some(alert_temp_c));
        }
        "power" => add("power limit (driver)", limits.power_limit_w),
        "memory" => add(
            "total",
            latest.and_then(|s| {
                let (used, free) = (s.mem_used_mib?, s.mem_free_mib?);
                Some(used + free + s.mem_reserved_mib.unwrap_or(0.0))
            }),
        ),
        _ => {}
    }
    out
}

/// What a GPU's charts are drawn from.
pub enum ChartSource<'a> {
    /// Its samples, `(Unix ms, sample)` oldest first.
    Samples(&'a [(f64, Sample)]),
    /// The history's 1-minute means: `signal -> (Unix ms, mean)` oldest first, read by the
    /// caller for the signals it is asked for ([`history_signals`]).
    Minutes(&'a dyn Fn(Signal) -> Vec<(f64, f64)>),
}

/// The signals the long-window charts read from the history.
pub fn history_signals() -> Vec<Signal> {
    chart_specs()
        .into_iter()
        .flat_map(|(.., lines)| lines.into_iter().filter_map(|l| l.signal))
        .collect()
}

/// The charts of one GPU.
pub fn charts(
    source: &ChartSource<'_>,
    limits: &Limits,
    alert_temp_c: f64,
    latest: Option<&Sample>,
) -> Vec<Chart> {
    chart_specs()
        .into_iter()
        .map(|(id, title, unit, kind, lines)| {
            let series = lines
                .iter()
                .map(|line| {
                    let points = match source {
                        ChartSource::Samples(samples) => samples
                            .iter()
                            .filter_map(|(t, s)| Some((*t, (line.read)(s)?)))
                            .collect(),
                        ChartSource::Minutes(read) => line.signal.map(read).unwrap_or_default(),
                    };
                    Series {
                        name: line.name.to_string(),
                        points: match kind {
                            ChartKind::Line => thin(points, MAX_POINTS),
                            ChartKind::Lanes => changes(points),
                        },
                    }
                })
                .collect();
            let title = match source {
                ChartSource::Samples(_) => title.to_string(),
                ChartSource::Minutes(_) => format!("{title}, 1-minute means"),
            };
            let series: Vec<Series> = series;
            Chart {
                id,
                title,
                unit,
                kind,
                has_points: series.iter().any(|s| !s.points.is_empty()),
                series,
                limits: limit_lines(id, limits, alert_temp_c, latest),
            }
        })
        .collect()
}

/// The error counters of a GPU over its samples in the window (oldest first), its XIDs so far
/// (total, last code: the source counts them, so they are always reported).
pub fn counters(samples: &[(f64, Sample)], xids: (u64, u32)) -> Vec<Counter> {
    type Read = fn(&Sample) -> Option<u64>;
    let specs: [(&str, &str, Read); 8] = [
        ("ECC", "corrected, volatile", |s| s.ecc_corr),
        ("ECC", "uncorrected, volatile", |s| s.ecc_uncorr),
        ("ECC", "corrected, aggregate", |s| s.ecc_corr_aggregate),
        ("ECC", "uncorrected, aggregate", |s| s.ecc_uncorr_aggregate),
        ("ECC", "rows remapped, correctable", |s| {
            s.remapped_rows_correctable()
        }),
        ("ECC", "rows remapped, uncorrectable", |s| {
            s.remapped_rows_uncorrectable
        }),
        ("ECC", "retired pages", |s| s.retired_pages),
        ("PCIe", "replays", |s| s.pcie_replay),
    ];
    let mut out: Vec<Counter> = specs
        .into_iter()
        .map(|(panel, name, read)| {
            let mut readings = samples.iter().filter_map(|(_, s)| read(s));
            let first = readings.next();
            let last = readings.next_back().or(first);
            Counter {
                panel,
                name,
                total: last,
                increase: first.zip(last).map(|(a, b)| b.saturating_sub(a)),
            }
        })
        .collect();
    out.push(Counter {
        panel: "XID",
        name: "XID errors",
        total: Some(xids.0),
        increase: Some(samples.iter().map(|(_, s)| s.xid.len() as u64).sum()),
    });
    out.push(Counter {
        panel: "XID",
        name: "last XID code",
        total: (xids.0 > 0).then_some(u64::from(xids.1)),
        increase: None,
    });
    out
}

/// A GPU's status: "no data" before its first sample, the worst severity of its `alerts` while
/// any alert is open, else "ok".
pub fn status(has_sample: bool, alerts_firing: usize, alerts: &[AlertView]) -> &'static str {
    if !has_sample {
        return "no data";
    }
    if alerts_firing == 0 {
        return "ok";
    }
    [Severity::Critical, Severity::Warning, Severity::Info]
        .into_iter()
        .map(Severity::name)
        .find(|name| alerts.iter().any(|a| a.severity == *name))
        .unwrap_or("warning")
}

/// What the dashboard shows of one GPU, gathered by the caller.
pub struct GpuInput<'a> {
    /// Who.
    pub identity: &'a GpuIdentity,
    /// Its samples in the window, `(Unix ms, sample)` oldest first.
    pub samples: &'a [(f64, Sample)],
    /// Its charts' source (its samples, or the history's means for long windows).
    pub charts: ChartSource<'a>,
    /// Its limits.
    pub limits: Limits,
    /// Its XIDs so far and the last code.
    pub xids: (u64, u32),
    /// Alerts open now.
    pub alerts_firing: usize,
    /// The isolation forest's latest score.
    pub anomaly_score: Option<f64>,
    /// Its alerts in the window, newest first.
    pub alerts: Vec<AlertView>,
}

/// One GPU's part of the page; `alert_temps` are the detectors' GPU and memory limits, °C.
pub fn gpu_view(input: GpuInput<'_>, alert_temps: (f64, f64)) -> GpuView {
    let id = input.identity;
    let latest = input.samples.last();
    GpuView {
        index: id.index,
        uuid: id.uuid.clone(),
        model_name: id.model_name.clone(),
        hostname: id.hostname.clone(),
        pci_bus_id: id.pci_bus_id.clone(),
        driver_version: id.driver_version.clone(),
        limits: input.limits,
        alert_temp_c: alert_temps.0,
        alert_mem_temp_c: alert_temps.1,
        latest_ms: latest.map(|(t, _)| *t),
        latest: latest.map(|(_, s)| s.clone()),
        clock_reasons_active: latest
            .and_then(|(_, s)| s.clock_reasons)
            .map(reasons::names),
        status: status(latest.is_some(), input.alerts_firing, &input.alerts),
        alerts_firing: input.alerts_firing,
        anomaly_score: input.anomaly_score,
        counters: counters(input.samples, input.xids),
        charts: charts(
            &input.charts,
            &input.limits,
            alert_temps.0,
            latest.map(|(_, s)| s),
        ),
        alerts: input.alerts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::parse_trace;

    fn identity() -> GpuIdentity {
        GpuIdentity {
            index: 0,
            uuid: "GPU-1".into(),
            model_name: "NVIDIA <H200>".into(),
            hostname: "host".into(),
            pci_bus_id: None,
            driver_version: None,
        }
    }

    fn h200() -> Vec<(f64, Sample)> {
        parse_trace(include_str!("../tests/data/h200-healthy.csv"))
            .unwrap()
            .into_iter()
            .map(|s| (1_000_000.0 + s.t * 1000.0, s))
            .collect()
    }

    fn alert(severity: Severity) -> Alert {
        Alert {
            t: 12.0,
            kind: crate::AlertKind::Xid,
            severity,
            signals: Default::default(),
            message: "XID 79: <fallen off the bus>".into(),
            cause: "the GPU fell off the bus",
            check: "the PCIe link",
        }
    }

    #[test]
    fn the_h200_trace_fills_the_charts_it_carries_and_leaves_the_others_not_reported() {
        let samples = h200();
        let limits = Limits {
            slowdown_c: Some(90.0),
            shutdown_c: Some(95.0),
            power_limit_w: Some(700.0),
        };
        let view = gpu_view(
            GpuInput {
                identity: &identity(),
                samples: &samples,
                charts: ChartSource::Samples(&samples),
                limits,
                xids: (0, 0),
                alerts_firing: 0,
                anomaly_score: None,
                alerts: Vec::new(),
            },
            (87.0, 95.0),
        );
        let chart = |id: &str| view.charts.iter().find(|c| c.id == id).unwrap();
        assert_eq!(view.status, "ok");
        assert_eq!(view.latest_ms, Some(samples.last().unwrap().0));
        assert_eq!(chart("power").series[0].points.len(), samples.len());
        for id in [
            "temperature",
            "utilization",
            "memory",
            "clocks",
            "pcie",
            "throttle",
        ] {
            assert!(chart(id).has_points, "{id}");
        }
        // The trace has no process or fan column: those are "not reported".
        assert!(!chart("processes").has_points && !chart("fan").has_points);
        let lines = |id: &str| -> Vec<(String, f64)> {
            chart(id)
                .limits
                .iter()
                .map(|l| (l.name.clone(), l.value))
                .collect()
        };
        assert_eq!(
            lines("temperature"),
            [
                ("slowdown (driver)".to_string(), 90.0),
                ("alert limit (monitor)".to_string(), 87.0)
            ]
        );
        assert_eq!(
            lines("power"),
            [("power limit (driver)".to_string(), 700.0)]
        );
        assert!(
            lines("memory").is_empty(),
            "no free memory in the trace: no total"
        );
        // The throttle lanes read the bits: the BF16 GEMM phase holds the power cap.
        let cap = &chart("throttle").series[1].points;
        assert!(cap.iter().any(|p| p.1 == 1.0) && cap.iter().any(|p| p.1 == 0.0));
        // ECC and PCIe replays are in the trace, aggregates, remapping and retired pages are not.
        let counter = |name: &str| view.counters.iter().find(|c| c.name == name).unwrap();
        assert_eq!(counter("corrected, volatile").total, Some(0));
        assert_eq!(
            counter("replays").total,
            samples.last().unwrap().1.pcie_replay
        );
        assert_eq!(counter("corrected, aggregate").total, None);
        assert_eq!(counter("retired pages").increase, None);
        assert_eq!(counter("XID errors").total, Some(0));
        assert_eq!(counter("last XID code").total, None);
        // Unknown limits draw no line.
        let bare = charts(
            &ChartSource::Samples(&samples),
            &Limits::default(),
            87.0,
            None,
        );
        assert!(bare[1].limits.is_empty());
        assert_eq!(bare[0].limits.len(), 1);
    }

    #[test]
    fn counters_count_the_window_and_xids_come_from_the_source() {
        let mut a = Sample::at(0.0);
        (a.ecc_corr, a.pcie_replay, a.remapped_rows) = (Some(5), Some(1), Some(3));
        a.remapped_rows_uncorrectable = Some(1);
        let mut b = Sample::at(1.0);
        (b.ecc_corr, b.pcie_replay) = (Some(9), None);
        b.xid = vec![79];
        let mut c = Sample::at(2.0);
        (c.ecc_corr, c.pcie_replay) = (Some(12), Some(4));
        let counters = counters(&[(0.0, a), (1.0, b), (2.0, c)], (3, 79));
        let get = |name: &str| {
            let c = counters.iter().find(|c| c.name == name).unwrap();
            (c.total, c.increase)
        };
        assert_eq!(get("corrected, volatile"), (Some(12), Some(7)));
        assert_eq!(get("replays"), (Some(4), Some(3)));
        assert_eq!(get("rows remapped, correctable"), (Some(2), Some(0)));
        assert_eq!(get("uncorrected, volatile"), (None, None));
        assert_eq!(get("XID errors"), (Some(3), Some(1)));
        assert_eq!(get("last XID code"), (Some(79), None));
    }

    #[test]
    fn thinning_keeps_the_span_the_extremes_and_the_order() {
        let points: Vec<(f64, f64)> = (0..10_000)
            .map(|i| {
                (
                    f64::from(i),
                    if i == 4321 { 500.0 } else { f64::from(i % 7) },
                )
            })
            .collect();
        let thinned = thin(points.clone(), 600);
        assert!(thinned.len() <= 600, "{}", thinned.len());
        assert!(thinned.len() >= 500, "{}", thinned.len());
        assert_eq!(thinned.first(), points.first());
        assert!(thinned.contains(&(4321.0, 500.0)), "the spike survives");
        assert!(thinned.windows(2).all(|w| w[0].0 < w[1].0), "time order");
        assert_eq!(
            thin(points[..100].to_vec(), 600).len(),
            100,
            "short lines untouched"
        );
    }

    #[test]
    fn a_lane_keeps_only_its_changes_and_its_ends() {
        let flags = |vs: &[f64]| -> Vec<(f64, f64)> {
            vs.iter().enumerate().map(|(i, v)| (i as f64, *v)).collect()
        };
        assert_eq!(
            changes(flags(&[0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0])),
            [(0.0, 0.0), (2.0, 1.0), (5.0, 0.0), (6.0, 0.0)]
        );
        assert_eq!(changes(flags(&[1.0])), [(0.0, 1.0)]);
        assert!(changes(Vec::new()).is_empty());
        // In JSON a point's time is whole milliseconds.
        let series = Series {
            name: "x".into(),
            points: vec![(1_796_454_418_858.4, 76.5)],
        };
        assert_eq!(
            serde_json::to_string(&series).unwrap(),
            r#"{"name":"x","points":[[1796454418858,76.5]]}"#
        );
    }

    #[test]
    fn the_status_is_the_worst_open_severity() {
        let at = |s| AlertView::new(0, 1.0, &alert(s));
        assert_eq!(status(false, 0, &[]), "no data");
        assert_eq!(status(true, 0, &[at(Severity::Critical)]), "ok");
        assert_eq!(
            status(true, 1, &[at(Severity::Info), at(Severity::Critical)]),
            "critical"
        );
        assert_eq!(status(true, 1, &[at(Severity::Info)]), "info");
        assert_eq!(status(true, 2, &[]), "warning");
    }

    #[test]
    fn the_json_carries_what_the_page_reads() {
        let samples = h200();
        let view = gpu_view(
            GpuInput {
                identity: &identity(),
                samples: &samples[..3],
                charts: ChartSource::Samples(&samples[..3]),
                limits: Limits::default(),
                xids: (1, 79),
                alerts_firing: 1,
                anomaly_score: Some(0.4),
                alerts: vec![AlertView::new(0, 1_000_500.0, &alert(Severity::Critical))],
            },
            (87.0, 95.0),
        );
        let json = serde_json::to_value(&view).unwrap();
        assert_eq!(json["model_name"], "NVIDIA <H200>");
        assert_eq!(json["status"], "critical");
        assert_eq!(json["limits"]["power_limit_w"], serde_json::Value::Null);
        assert_eq!(json["latest"]["temp_gpu_c"], 40.0);
        assert_eq!(json["charts"][0]["series"][0]["points"][0][0], 1_000_000.0);
        assert_eq!(json["charts"][8]["kind"], "lanes");
        assert_eq!(json["alerts"][0]["cause"], "the GPU fell off the bus");
        assert_eq!(json["counters"].as_array().unwrap().len(), 10);
    }

    #[test]
    fn the_page_and_its_script_are_whole() {
        for id in ["overview", "gpus", "alerts", "banner", "windows"] {
            assert!(PAGE_HTML.contains(&format!("id=\"{id}\"")), "#{id}");
        }
        assert!(PAGE_HTML.contains("src=\"/dashboard.js\""));
        assert!(!PAGE_HTML.contains("http-equiv=\"refresh\""), "no reload");
        assert!(
            !PAGE_HTML.contains("://") && !PAGE_JS.contains("https://"),
            "nothing external"
        );
        assert!(PAGE_JS.contains("/api/dashboard"));
        // The fields the script reads are named as the JSON names them.
        let view = serde_json::to_string(&gpu_view(
            GpuInput {
                identity: &identity(),
                samples: &[],
                charts: ChartSource::Samples(&[]),
                limits: Limits::default(),
                xids: (0, 0),
                alerts_firing: 0,
                anomaly_score: None,
                alerts: Vec::new(),
            },
            (87.0, 95.0),
        ))
        .unwrap();
        for field in [
            "latest_ms",
            "power_limit_w",
            "slowdown_c",
            "alerts_firing",
            "counters",
            "has_points",
            "clock_reasons_active",
            "anomaly_score",
            "model_name",
        ] {
            assert!(PAGE_JS.contains(field), "the script reads {field}");
            assert!(
                view.contains(&format!("\"{field}\"")),
                "the JSON has {field}"
            );
        }
    }
}
