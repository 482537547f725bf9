//! Scores the slow-degradation watch (issue 26, item 2) against the rules, on data the model
//! was not trained on: trained on `h200-healthy.csv`, replayed on the other card's two days
//! (`h200-healthy-2.csv`, `-3.csv`) and the bench-load trace, each looped into days of
//! samples in a room that moves within ±5 °C every 2 to 8 hours (a step of the whole card,
//! 20-s time constant).
//!
//! `cargo run --release -p pog-monitor --example degradation`
//!
//! - Healthy streams (`HEALTHY_DAYS` per source): every `degradation` alert is a false alarm;
//!   the rules' own alerts are counted beside (warnings and worse; the room's steps make
//!   some).
//! - Fault streams: the same streams (same rooms, same seed) with one slow fault from its
//!   start: a thermal interface losing 0.5 °C a day at 700 W, a fan or pump losing 20 % of its
//!   flow over 4 h, the die's sensor drifting +0.5 °C an hour, the power reading drifting −2 %
//!   an hour. The model's delay is its first `degradation` alert after the start; the rules'
//!   is their first warning or worse after the start that the same stream without the fault
//!   did not raise (same kind within 60 s).
//!
//! `EVAL_DAYS=N` shortens the healthy streams and the thermal interface's (default 5);
//! `EVAL_SHOW=1` prints every degradation alert; `EVAL_RULES=1` prints the rules' warnings in
//! the healthy streams, with the room's level then; `EVAL_SELF=1` runs every monitor without the
//! healthy history (as the agent does): the rules alone, and the watch learning its reference
//! from each GPU's own first hour.

use pog_monitor::alert::{AlertKind, Severity};
use pog_monitor::inject::{Looped, Rooms, SlowFault, SlowInjector};
use pog_monitor::{parse_trace, Alert, Config, Model, Monitor, Sample, Signal};
use std::time::Instant;

const TRAIN: &str = include_str!("../tests/data/h200-healthy.csv");
const SOURCES: [(&str, &str); 3] = [
    (
        "h200-healthy-2",
        include_str!("../tests/data/h200-healthy-2.csv"),
    ),
    (
        "h200-healthy-3",
        include_str!("../tests/data/h200-healthy-3.csv"),
    ),
    (
        "h200-bench-load",
        include_str!("../tests/data/h200-bench-load-2026-12-03.csv"),
    ),
];
const HOUR: f64 = 3600.0;
const SEED: u64 = 20261205;

/// One fault stream: the fault, its start and the stream's length (s).
fn faults(days: f64) -> Vec<(SlowFault, f64, f64)> {
    vec![
        (
            SlowFault::ThermalInterface {
                c_per_day: 0.5,
                full_w: 700.0,
            },
            12.0 * HOUR,
            days * 24.0 * HOUR,
        ),
        (
            SlowFault::CoolingLoss {
                fraction: 0.2,
                over_s: 4.0 * HOUR,
                sink_c_per_w: 0.02,
            },
            6.0 * HOUR,
            18.0 * HOUR,
        ),
        (
            SlowFault::TempSensorDrift {
                signal: Signal::TempGpu,
                c_per_hour: 0.5,
            },
            6.0 * HOUR,
            18.0 * HOUR,
        ),
        (
            SlowFault::PowerSensorDrift {
                fraction_per_hour: -0.02,
            },
            6.0 * HOUR,
            18.0 * HOUR,
        ),
    ]
}

/// What one replay raised.
struct Run {
    alerts: Vec<Alert>,
    /// Per alert: the room's level then and the level it heads to (°C against the
    /// recording's).
    rooms: Vec<(f64, f64)>,
    samples: usize,
    seconds: f64,
    /// On healthy streams: the largest departures of the watch from this GPU's reference
    /// (extra heat at load, die or memory; one offset against the other; the power read
    /// against the counter over the last day, %).
    margins: [f64; 4],
}

fn replay(
    source: &[Sample],
    model: Option<&Model>,
    seed: u64,
    length_s: f64,
    mut fault: Option<SlowInjector>,
) -> Run {
    let mut monitor = Monitor::new(Config::default(), model.cloned());
    let mut rooms = Rooms::new(seed, (2.0 * HOUR, 8.0 * HOUR), 5);
    let mut alerts = Vec::new();
    let mut room_at = Vec::new();
    let mut samples = 0;
    let t0 = source[0].t;
    let mut last_t = t0;
    for mut s in Looped::new(source) {
        if s.t - t0 > length_s {
            break;
        }
        rooms.apply(&mut s);
        if let Some(f) = fault.as_mut() {
            f.apply(&mut s);
        }
        for a in monitor.push(&s) {
            room_at.push((rooms.level_at(s.t), rooms.level_at(s.t + 1e6)));
            alerts.push(a);
        }
        samples += 1;
        last_t = s.t;
    }
    let mut margins = [0.0f64; 4];
    if std::env::var("EVAL_DEBUG").is_ok() {
        if let Some(watch) = monitor.drift() {
            for sensor in 0..2 {
                let pts: Vec<String> = watch
                    .points(sensor)
                    .step_by(3)
                    .map(|p| format!("{:.1}h a{:.2} b{:.2}", p.elapsed_s / HOUR, p.a, p.b))
                    .collect();
                eprintln!(
                    "sensor {sensor} base {:?}: {}",
                    watch.baseline(sensor),
                    pts.join(" | ")
                );
            }
        }
    }
    if let Some(watch) = monitor.drift() {
        for (sensor, margin) in margins.iter_mut().take(2).enumerate() {
            if let Some([_, b0]) = watch.baseline(sensor) {
                for p in watch.points(sensor) {
                    *margin = margin.max(p.b - b0);
                }
            }
        }
        if let (Some([a0, _]), Some([m0, _])) = (watch.baseline(0), watch.baseline(1)) {
            for (p, q) in watch.points(0).zip(watch.points(1)) {
                margins[2] = margins[2].max(((p.a - a0) - (q.a - m0)).abs());
            }
        }
        for (_, off) in watch.power_departures() {
            margins[3] = margins[3].max(100.0 * off.abs());
        }
    }
    Run {
        alerts,
        rooms: room_at,
        samples,
        seconds: last_t - t0,
        margins,
    }
}

fn hours(s: f64) -> String {
    if s >= 48.0 * HOUR {
        format!("{:.2} d", s / 86_400.0)
    } else {
        format!("{:.1} h", s / HOUR)
    }
}

fn is_rule_alarm(a: &Alert) -> bool {
    a.kind != AlertKind::Degradation && a.severity >= Severity::Warning
}

fn main() {
    let days: f64 = std::env::var("EVAL_DAYS")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(5.0);
    let show = std::env::var("EVAL_SHOW").is_ok();
    let show_rules = std::env::var("EVAL_RULES").is_ok();
    // Without a healthy history: the rules alone, the watch learning from each GPU's own
    // first hour.
    let own = std::env::var("EVAL_SELF").is_ok();
    let config = Config::default();
    let model =
        Model::train(&parse_trace(TRAIN).expect("the fixture parses"), &config).expect("training");
    let started = Instant::now();
    let results: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = SOURCES
            .iter()
            .enumerate()
            .map(|(i, (name, text))| {
                let model = (!own).then_some(&model);
                scope.spawn(move || {
                    let source = parse_trace(text).expect("a fixture parses");
                    let seed = SEED + i as u64;
                    let healthy = replay(&source, model, seed, days * 24.0 * HOUR, None);
                    let faulty: Vec<_> = faults(days)
                        .into_iter()
                        .map(|(fault, start, length)| {
                            let injector = SlowInjector::new(fault.clone(), start, seed);
                            let run = replay(&source, model, seed, length, Some(injector));
                            (fault, start, run)
                        })
                        .collect();
                    (*name, healthy, faulty)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a replay"))
            .collect()
    });
    let elapsed = started.elapsed().as_secs_f64();

    if own {
        println!("(without the healthy history: the watch learns from each GPU's own first hour)");
    }
    println!("## Healthy streams (every degradation alert a false alarm)");
    println!();
    println!("| source, looped | hours | degradation alerts | rules' warnings or worse (kinds) | largest extra heat at load against the reference: die, memory (°C) | largest offset apart (°C) | power read against the counter, last day (%) |");
    println!("|---|---|---|---|---|---|---|");
    let (mut fa, mut healthy_s, mut total_samples) = (0usize, 0.0f64, 0usize);
    for (name, healthy, faulty) in &results {
        let degradation: Vec<&Alert> = healthy
            .alerts
            .iter()
            .filter(|a| a.kind == AlertKind::Degradation)
            .collect();
        let mut kinds: std::collections::BTreeMap<&str, usize> = Default::default();
        for a in healthy.alerts.iter().filter(|a| is_rule_alarm(a)) {
            *kinds.entry(a.kind.name()).or_default() += 1;
        }
        println!(
            "| {name} | {:.1} | {} | {} ({}) | {:.2}, {:.2} | {:.2} | {:.2} |",
            healthy.seconds / HOUR,
            degradation.len(),
            kinds.values().sum::<usize>(),
            kinds
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect::<Vec<_>>()
                .join(", "),
            healthy.margins[0],
            healthy.margins[1],
            healthy.margins[2],
            healthy.margins[3],
        );
        for a in &degradation {
            println!("  false alarm t={} {}", hours(a.t), a.message);
        }
        if show_rules {
            let rule_alarms = healthy.alerts.iter().zip(&healthy.rooms);
            for (a, (room, to)) in rule_alarms.filter(|(a, _)| is_rule_alarm(a)) {
                println!(
                    "  rules t={} (room {room:+.1} °C, heading to {to:+.0}) {} {} {}",
                    hours(a.t),
                    a.kind.name(),
                    a.severity.name(),
                    a.message
                );
            }
        }
        fa += degradation.len();
        healthy_s += healthy.seconds;
        total_samples += healthy.samples;
        total_samples += faulty.iter().map(|f| f.2.samples).sum::<usize>();
    }
    println!();
    println!(
        "degradation false alarms: **{fa} in {:.1} h = {:.2} per 24 h** (none seen: the 95 % upper bound is about 3 / {:.1} days = {:.2} per 24 h)",
        healthy_s / HOUR,
        fa as f64 * 86_400.0 / healthy_s,
        healthy_s / 86_400.0,
        3.0 * 86_400.0 / healthy_s
    );
    println!();
    println!("## Slow faults");
    println!();
    println!("| fault | source | start | model: first degradation alert after the start | rules: first new warning after the start | the model's alert |");
    println!("|---|---|---|---|---|---|");
    for (fault, _, _) in faults(days) {
        for (name, healthy, faulty) in &results {
            let Some((_, start, run)) = faulty.iter().find(|f| f.0 == fault) else {
                continue;
            };
            let before: Vec<&Alert> = run
                .alerts
                .iter()
                .filter(|a| a.kind == AlertKind::Degradation && a.t < *start)
                .collect();
            let model_hit = run
                .alerts
                .iter()
                .find(|a| a.kind == AlertKind::Degradation && a.t >= *start);
            let rule_hit = run.alerts.iter().find(|a| {
                a.t >= *start
                    && is_rule_alarm(a)
                    && !healthy
                        .alerts
                        .iter()
                        .any(|h| h.kind == a.kind && (h.t - a.t).abs() <= 60.0)
            });
            println!(
                "| {} | {name} | {} | {} | {} | {} |",
                fault_words(&fault),
                hours(*start),
                model_hit.map_or(format!("none in {}", hours(run.seconds - start)), |a| {
                    format!("**{}** ({})", hours(a.t - start), a.severity.name())
                }),
                rule_hit.map_or(format!("none in {}", hours(run.seconds - start)), |a| {
                    format!(
                        "{} ({} {})",
                        hours(a.t - start),
                        a.kind.name(),
                        a.severity.name()
                    )
                }),
                model_hit.map_or("-".to_string(), |a| a.message.clone()),
            );
            if !before.is_empty() {
                println!("  {} degradation alert(s) before the start", before.len());
            }
            if let Some(a) = rule_hit {
                println!("  the rules' alert: {}", a.message);
            }
            if show {
                for a in run
                    .alerts
                    .iter()
                    .filter(|a| a.kind == AlertKind::Degradation)
                {
                    println!("  t={} {} {}", hours(a.t), a.severity.name(), a.message);
                }
            }
        }
    }
    // The watch's own cost: one day of the other card's samples through a DriftWatch alone.
    let source = parse_trace(SOURCES[0].1).expect("a fixture parses");
    let day: Vec<Sample> = Looped::new(&source)
        .take_while(|s| s.t <= 86_400.0)
        .collect();
    let mut watch = pog_monitor::degradation::DriftWatch::new(
        model.thermal.clone().expect("a thermal reference"),
        [config.thermal_limit_c, config.mem_thermal_limit_c],
    );
    let timed = Instant::now();
    let findings: usize = day.iter().map(|s| watch.push(s, false).len()).sum();
    let watch_us = 1e6 * timed.elapsed().as_secs_f64() / day.len() as f64;
    println!(
        "the watch alone: {watch_us:.2} µs per sample over a day of {} samples ({findings} findings)",
        day.len()
    );
    let forest: usize = results
        .iter()
        .map(|(_, healthy, faulty)| {
            healthy
                .alerts
                .iter()
                .chain(faulty.iter().flat_map(|f| f.2.alerts.iter()))
                .filter(|a| a.kind == AlertKind::Multivariate)
                .count()
        })
        .sum();
    println!();
    println!("isolation forest (`multivariate`) alerts in every stream above, healthy and faulty: {forest}");
    println!();
    println!(
        "replayed {total_samples} samples in {elapsed:.1} s ({:.1} µs per sample, {} threads)",
        1e6 * elapsed / total_samples as f64 * SOURCES.len() as f64,
        SOURCES.len()
    );
}

fn fault_words(fault: &SlowFault) -> String {
    match fault {
        SlowFault::ThermalInterface { c_per_day, full_w } => {
            format!("thermal interface +{c_per_day} °C/day at {full_w:.0} W")
        }
        SlowFault::CoolingLoss {
            fraction, over_s, ..
        } => format!(
            "fan/pump −{:.0} % flow over {:.0} h",
            fraction * 100.0,
            over_s / HOUR
        ),
        SlowFault::TempSensorDrift { signal, c_per_hour } => {
            format!("{} sensor {c_per_hour:+} °C/h", signal.name())
        }
        SlowFault::PowerSensorDrift { fraction_per_hour } => {
            format!("power reading {:+.0} %/h", fraction_per_hour * 100.0)
        }
    }
}
