//! The dashboard page: per GPU, charts of temperature, power, utilization, memory, clocks and
//! throttle reasons, drawn on the server as SVG with the `plotters` crate (no script, no
//! third-party file served: the page builds with cargo alone), and the latest alerts.

use crate::alert::Alert;
use crate::prometheus::GpuIdentity;
use crate::sample::{reasons, Sample, Signal};
use plotters::prelude::*;
use std::fmt::Write as _;

/// Why a chart could not be drawn.
#[derive(Debug, thiserror::Error)]
#[error("drawing the chart {title:?}: {message}")]
pub struct DashboardError {
    /// The chart.
    pub title: String,
    /// plotters' words.
    pub message: String,
}

/// One line of a chart: `(t_unix, value)` points, oldest first.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Its name in the legend.
    pub name: String,
    /// Its points.
    pub points: Vec<(f64, f64)>,
}

/// One chart: a title with its unit, and its lines.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// The title, unit included.
    pub title: String,
    /// The lines.
    pub series: Vec<Series>,
}

const COLORS: [RGBColor; 4] = [
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
];

/// Draws a chart as an SVG element, time on the x axis (seconds before `now_unix`).
pub fn chart_svg(chart: &Chart, now_unix: f64, size: (u32, u32)) -> Result<String, DashboardError> {
    let fail = |e: &dyn std::fmt::Display| DashboardError {
        title: chart.title.clone(),
        message: e.to_string(),
    };
    let points = chart.series.iter().flat_map(|s| s.points.iter());
    let (mut t0, mut lo, mut hi) = (now_unix, f64::INFINITY, f64::NEG_INFINITY);
    for &(t, v) in points {
        t0 = t0.min(t);
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        (lo, hi) = (0.0, 1.0);
    }
    let pad = ((hi - lo) * 0.08).max(1e-9).max(hi.abs() * 0.01);
    let (y0, y1) = (lo - pad, hi + pad);
    let x0 = (t0 - now_unix).min(-1.0);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(|e| fail(&e))?;
        let mut plot = ChartBuilder::on(&root)
            .caption(&chart.title, ("sans-serif", 14))
            .margin(6)
            .x_label_area_size(34)
            .y_label_area_size(48)
            .build_cartesian_2d(x0..0.0, y0..y1)
            .map_err(|e| fail(&e))?;
        plot.configure_mesh()
            .x_desc("seconds ago")
            .x_labels(6)
            .y_labels(5)
            .label_style(("sans-serif", 11))
            .draw()
            .map_err(|e| fail(&e))?;
        for (i, series) in chart.series.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            plot.draw_series(LineSeries::new(
                series.points.iter().map(|&(t, v)| (t - now_unix, v)),
                color.stroke_width(2),
            ))
            .map_err(|e| fail(&e))?
            .label(series.name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], color));
        }
        if chart.series.len() > 1 {
            plot.configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK.mix(0.3))
                .label_font(("sans-serif", 11))
                .position(SeriesLabelPosition::UpperLeft)
                .draw()
                .map_err(|e| fail(&e))?;
        }
        root.present().map_err(|e| fail(&e))?;
    }
    Ok(svg)
}

fn series(name: &str, samples: &[(f64, Sample)], read: impl Fn(&Sample) -> Option<f64>) -> Series {
    Series {
        name: name.to_string(),
        points: samples
            .iter()
            .filter_map(|(t, s)| Some((*t, read(s)?)))
            .collect(),
    }
}

/// The charts of numeric signals, in page order: each title with its lines (name, signal).
/// The live charts (raw samples, [`charts`]) and the long windows (the history's 1-minute
/// means) both draw these.
pub const SIGNAL_CHARTS: [(&str, &[(&str, Signal)]); 5] = [
    (
        "temperature (°C)",
        &[("GPU", Signal::TempGpu), ("memory", Signal::TempMem)],
    ),
    ("power (W)", &[("power", Signal::Power)]),
    (
        "utilization (%)",
        &[("GPU", Signal::UtilGpu), ("memory", Signal::UtilMem)],
    ),
    ("memory used (MiB)", &[("used", Signal::MemUsed)]),
    (
        "clocks (MHz)",
        &[("SM", Signal::SmClock), ("memory", Signal::MemClock)],
    ),
];

/// The six charts of one GPU from its raw samples, `(t_unix, sample)` oldest first: the
/// [`SIGNAL_CHARTS`] and the throttle reasons.
pub fn charts(samples: &[(f64, Sample)]) -> Vec<Chart> {
    let bit =
        |mask: u64| move |s: &Sample| s.clock_reasons.map(|r| f64::from(u8::from(r & mask != 0)));
    let mut charts: Vec<Chart> = SIGNAL_CHARTS
        .iter()
        .map(|(title, lines)| Chart {
            title: title.to_string(),
            series: lines
                .iter()
                .map(|&(name, signal)| series(name, samples, |s| s.signal(signal)))
                .collect(),
        })
        .collect();
    charts.push(Chart {
        title: "throttle reasons (1 = active)".into(),
        series: vec![
            series("power cap", samples, bit(reasons::SW_POWER_CAP)),
            series(
                "thermal",
                samples,
                bit(reasons::SW_THERMAL | reasons::HW_THERMAL),
            ),
            series("HW slowdown", samples, bit(reasons::HW_SLOWDOWN)),
            series("power brake", samples, bit(reasons::HW_POWER_BRAKE)),
        ],
    });
    charts
}

/// Escapes text for HTML.
pub fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// One GPU's part of the page.
#[derive(Debug, Clone)]
pub struct GpuPanel<'a> {
    /// Who.
    pub identity: &'a GpuIdentity,
    /// Its charts.
    pub charts: Vec<Chart>,
}

/// The whole page. `windows` are the zoom links (seconds, label); `refresh_s` reloads it.
pub fn page(
    panels: &[GpuPanel<'_>],
    alerts: &[(u32, &Alert)],
    now_unix: f64,
    window: (f64, &str),
    windows: &[(f64, &str)],
    refresh_s: u32,
) -> Result<String, DashboardError> {
    let mut html = String::new();
    let _ = write!(
        html,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>pog monitor</title>\
         <meta http-equiv=\"refresh\" content=\"{refresh_s}\">\
         <style>body{{font-family:sans-serif;margin:1em}}.charts{{display:flex;flex-wrap:wrap;gap:8px}}\
         table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 6px;font-size:13px}}\
         .critical{{color:#b00}}.warning{{color:#a60}}</style></head><body>\
         <h1>pog monitor</h1><p>last {}: ",
        escape_html(window.1)
    );
    for (seconds, label) in windows {
        let _ = write!(
            html,
            "<a href=\"/?window={seconds}\">{}</a> ",
            escape_html(label)
        );
    }
    html.push_str("</p>");
    for panel in panels {
        let id = panel.identity;
        let _ = write!(
            html,
            "<h2 class=\"gpu\">GPU {} — {} <small>{} on {}</small></h2><div class=\"charts\">",
            id.index,
            escape_html(&id.model_name),
            escape_html(&id.uuid),
            escape_html(&id.hostname)
        );
        for chart in &panel.charts {
            html.push_str("<div class=\"chart\">");
            html.push_str(&chart_svg(chart, now_unix, (420, 200))?);
            html.push_str("</div>");
        }
        html.push_str("</div>");
    }
    html.push_str("<h2>alerts</h2><table id=\"alerts\"><tr><th>GPU</th><th>t (s)</th><th>severity</th><th>kind</th><th>message</th></tr>");
    for (gpu, alert) in alerts {
        let _ = write!(
            html,
            "<tr class=\"{severity}\"><td>{gpu}</td><td>{:.1}</td><td>{severity}</td><td>{}</td><td>{}</td></tr>",
            alert.t,
            alert.kind.name(),
            escape_html(&alert.message),
            severity = alert.severity.name(),
        );
    }
    html.push_str("</table></body></html>\n");
    Ok(html)
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

    #[test]
    fn charts_of_the_h200_trace_are_svg_with_every_point() {
        let samples: Vec<(f64, Sample)> =
            parse_trace(include_str!("../tests/data/h200-healthy.csv"))
                .unwrap()
                .into_iter()
                .map(|s| (1_000.0 + s.t, s))
                .collect();
        let charts = charts(&samples);
        assert_eq!(charts.len(), 6);
        assert_eq!(charts[1].series[0].points.len(), samples.len());
        let svg = chart_svg(&charts[0], 1_230.0, (420, 200)).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.contains("temperature"),
            "{}",
            &svg[..200]
        );
        assert!(svg.contains("<polyline"), "a line is drawn");
        // The throttle chart reads the bits: the BF16 GEMM phase holds the power cap.
        let cap = &charts[5].series[0].points;
        assert!(cap.iter().any(|p| p.1 == 1.0) && cap.iter().any(|p| p.1 == 0.0));
    }

    #[test]
    fn the_page_escapes_what_it_shows_and_lists_alerts() {
        let id = identity();
        let alert = Alert {
            t: 12.0,
            kind: crate::AlertKind::Xid,
            severity: crate::Severity::Critical,
            signals: Default::default(),
            message: "XID 79: <fallen off the bus>".into(),
            cause: "",
            check: "",
        };
        let html = page(
            &[GpuPanel {
                identity: &id,
                charts: charts(&[]),
            }],
            &[(0, &alert)],
            100.0,
            (600.0, "10 minutes"),
            &[(600.0, "10 minutes"), (86_400.0, "1 day")],
            2,
        )
        .unwrap();
        assert!(html.contains("NVIDIA &lt;H200&gt;"));
        assert!(html.contains("XID 79: &lt;fallen off the bus&gt;"));
        assert!(html.contains("class=\"critical\""));
        assert!(html.contains("href=\"/?window=86400\""));
        assert_eq!(html.matches("<svg").count(), 6, "empty charts still draw");
    }
}
