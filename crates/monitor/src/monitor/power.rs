//! The power reading's checks: a reading that drifted low, told from the energy counter's growth
//! or from what it read a moment ago at the same load and temperature. Its own file: the thermal
//! envelope asks it before it blames the cooling for a temperature too high for the power read.

use super::{Expected, Monitor, DRIFT_FRACTION, DRIFT_MIN_W};
use crate::alert::{AlertKind, Finding, Severity, SignalChange};
use crate::model::power_steady_over;
use crate::sample::{Sample, Signal};
use std::collections::BTreeMap;

/// Seconds over which the energy counter's growth is compared with the power read.
const ENERGY_SPAN_S: f64 = 6.0;

/// Seconds the power read must have held steady (within [`STEADY_POWER_FRACTION`]) up to an
/// earlier reading for it to tell what "the same load" draws ([`Monitor::power_read_dropped`]):
/// utilization and clocks sampled once a second miss sub-second work, so a reading amid bursts
/// says "0 % utilization at 1980 MHz" at 293 W as at 124 W at rest (an H100 between GEMMs,
/// GPU-9ed4b029…, 2026-12-05), and a power falling after work is no drifted sensor.
///
/// [`STEADY_POWER_FRACTION`]: crate::model::STEADY_POWER_FRACTION
const SAME_LOAD_HELD_S: f64 = 3.0;

/// Seconds a power reading must stay below the energy counter's growth before it is judged
/// drifted on that evidence alone.
const DRIFT_HELD_S: f64 = 3.0;

/// The energy counter's power is evidence against the reading only up to this many times the
/// highest power read in the window (a drifted reading is low by a fraction, not a factor).
const COUNTER_PLAUSIBLE: f64 = 1.5;

/// The shortest time between two energy readings whose difference gives a power (the power
/// reading itself is an average over about a second).
const ENERGY_STEP_S: f64 = 1.0;

impl Monitor {
    /// A power reading below the energy counter's growth, on average over the counter's last
    /// span and now ([`Monitor::power_below_energy`]), for [`DRIFT_HELD_S`]: the reading
    /// drifted, whatever the temperature says (at idle a low reading heats nothing).
    pub(super) fn power_against_energy(&mut self, s: &Sample, out: &mut Vec<Finding>) {
        // A counter that jumps (catching up after it stalled) gives a power no reading came
        // near: that is the counter's fault, judged by the frozen-sensor check, not drift.
        let highest_read = self
            .window
            .iter()
            .filter_map(|w| w.power_w)
            .fold(0.0, f64::max);
        let low = self
            .power_below_energy(s)
            .filter(|(_, counted)| counted.watts <= COUNTER_PLAUSIBLE * highest_read);
        let persist = self.config.persist_samples;
        if !self.held_for(
            "power_below_energy",
            low.is_some(),
            persist,
            s.t,
            DRIFT_HELD_S,
        ) {
            return;
        }
        let (Some((mean, counted)), Some(read)) = (low, s.power_w) else {
            return;
        };
        let mut signals = BTreeMap::new();
        signals.insert(
            "power_w".into(),
            SignalChange::against(
                read,
                counted.watts,
                format!(
                    "power from the energy counter's growth over {:.1} s (read: {mean:.0} W on average)",
                    counted.span_s
                ),
            ),
        );
        out.push(Finding {
            kind: AlertKind::SensorDrift,
            key: "power".into(),
            severity: Severity::Warning,
            signals,
            message: format!(
                "power reads {read:.0} W, {:.0} % below the {:.0} W the energy counter grew at over the last {:.1} s (read: {mean:.0} W on average): the power sensor or its reading path drifted, not the load",
                100.0 * (1.0 - read / counted.watts),
                counted.watts,
                counted.span_s
            ),
        });
    }

    /// Evidence that the power reading is too low for what the GPU does, for a temperature
    /// too high for it: the reading fell at the same load and temperature
    /// ([`Monitor::power_read_dropped`]), or it reads below the energy counter's growth
    /// ([`Monitor::power_below_energy`]).
    pub(super) fn power_reading_low(
        &self,
        s: &Sample,
        signal: Signal,
        temp: f64,
        expected: &Expected,
    ) -> Option<LowPowerEvidence> {
        let below_counter = self.power_below_energy(s);
        // Where the energy counter can be read, it has the last word: a reading that agrees
        // with it did not drift, whatever it read a moment ago (utilization and clocks do not
        // tell every load apart).
        let counter_agrees = below_counter.is_none() && self.energy_power(s).is_some();
        let dropped = self
            .power_read_dropped(s, signal, temp, expected)
            .filter(|_| !counter_agrees);
        if let Some((then, ago)) = dropped {
            return Some(LowPowerEvidence {
                truth_w: then,
                against: format!(
                    "power read {ago:.1} s ago at the same utilization, clocks and temperature"
                ),
                why: format!(
                    "where it read {then:.0} W {ago:.0} s ago at the same load ({:.0} % utilization, SM clock {:.0} MHz) and the same {} ({temp:.0} °C): the reading fell, the load and the heat did not",
                    s.util_gpu_pct.unwrap_or(0.0),
                    s.sm_clock_mhz.unwrap_or(0.0),
                    signal.name()
                ),
            });
        }
        let (mean, counted) = below_counter?;
        Some(LowPowerEvidence {
            truth_w: counted.watts,
            against: format!(
                "power from the energy counter's growth over {:.1} s (read: {mean:.0} W on average)",
                counted.span_s
            ),
            why: format!(
                "while the energy counter grew at {:.0} W over the last {:.1} s (read: {mean:.0} W on average); {} at {temp:.0} °C fits the counter, not the reading",
                counted.watts,
                counted.span_s,
                signal.name()
            ),
        })
    }

    /// The power the energy counter's growth gives over the last [`ENERGY_SPAN_S`] (its own
    /// readings only, not carried ones; at least 2 s of them, the last at most 2 s old).
    fn energy_power(&self, s: &Sample) -> Option<CountedPower> {
        let counted = |w: &&Sample| w.energy_mj.is_some() && !w.carried.contains(&Signal::Energy);
        let last = self.window.iter().rev().find(counted)?;
        let first = self
            .window
            .iter()
            .filter(|w| last.t - w.t <= ENERGY_SPAN_S)
            .find(counted)?;
        let span_s = last.t - first.t;
        if span_s < 2.0 || s.t - last.t > 2.0 {
            return None;
        }
        Some(CountedPower {
            watts: (last.energy_mj? - first.energy_mj?) / 1000.0 / span_s,
            from_t: first.t,
            to_t: last.t,
            span_s,
        })
    }

    /// The recent power by the energy counter, as the recent power read is taken (the maximum
    /// over the load window): the highest growth rate between two of its own readings at
    /// least [`ENERGY_STEP_S`] apart, the later one in the window.
    pub(super) fn energy_recent_power(&self, s: &Sample) -> Option<f64> {
        let reads: Vec<(f64, f64)> = self
            .window
            .iter()
            .filter(|w| !w.carried.contains(&Signal::Energy))
            .filter_map(|w| Some((w.t, w.energy_mj?)))
            .collect();
        let mut best: Option<f64> = None;
        let mut earlier = 0;
        for &(t, energy) in &reads {
            while reads
                .get(earlier + 1)
                .is_some_and(|&(t1, _)| t - t1 >= ENERGY_STEP_S)
            {
                earlier += 1;
            }
            let (t0, e0) = reads[earlier];
            if s.t - t > self.config.load_window_s || t - t0 < ENERGY_STEP_S {
                continue;
            }
            let watts = (energy - e0) / 1000.0 / (t - t0);
            best = Some(best.map_or(watts, |b: f64| b.max(watts)));
        }
        best
    }

    /// The mean power read over the energy counter's last span ([`Monitor::energy_power`])
    /// when it is at most [`DRIFT_FRACTION`] of the counter's power and [`DRIFT_MIN_W`]
    /// below, and the reading now is too: `(mean read, counted)`.
    fn power_below_energy(&self, s: &Sample) -> Option<(f64, CountedPower)> {
        let counted = self.energy_power(s)?;
        let reads: Vec<f64> = self
            .window
            .iter()
            .filter(|w| w.t > counted.from_t && w.t <= counted.to_t)
            .filter_map(|w| w.power_w)
            .collect();
        if reads.is_empty() {
            return None;
        }
        // Low on average and now: a reading that lags a rising load (it is an average over
        // the last second) is low at the start of the span, not at its end.
        let mean = reads.iter().sum::<f64>() / reads.len() as f64;
        let low = |read: f64| {
            read <= DRIFT_FRACTION * counted.watts && counted.watts - read >= DRIFT_MIN_W
        };
        (low(mean) && s.power_w.is_some_and(low)).then_some((mean, counted))
    }

    /// A power reading in the recent window, at the same load (utilization, clocks) and the
    /// same temperature as now, that was at least [`DRIFT_MIN_W`] higher and of which now is
    /// at most [`DRIFT_FRACTION`], at which this temperature was healthy, and at a load held
    /// ([`SAME_LOAD_HELD_S`]): `(watts, seconds ago)`, the highest.
    fn power_read_dropped(
        &self,
        s: &Sample,
        signal: Signal,
        temp: f64,
        expected: &Expected,
    ) -> Option<(f64, f64)> {
        let p = s.power_w?;
        let util = s.util_gpu_pct?;
        let sm = s.sm_clock_mhz?;
        let near = |a: Option<f64>, b: Option<f64>, tol: f64| match (a, b) {
            (Some(a), Some(b)) => (a - b).abs() <= tol,
            (None, None) => true,
            _ => false,
        };
        self.window
            .iter()
            .filter(|w| w.t < s.t)
            .filter_map(|w| Some((w, w.power_w?)))
            .filter(|(_, q)| p <= DRIFT_FRACTION * q && q - p >= DRIFT_MIN_W)
            .filter(|(w, _)| w.signal(signal).is_some_and(|x| (x - temp).abs() <= 1.0))
            .filter(|(w, _)| near(w.util_gpu_pct, Some(util), 5.0))
            .filter(|(w, _)| near(w.sm_clock_mhz, Some(sm), 0.02 * sm))
            .filter(|(w, _)| {
                near(
                    w.mem_clock_mhz,
                    s.mem_clock_mhz,
                    0.01 * s.mem_clock_mhz.unwrap_or(0.0),
                )
            })
            .filter(|(w, _)| near(w.util_mem_pct, s.util_mem_pct, 10.0))
            .filter(|(_, q)| temp < expected.at(*q) + self.config.thermal_margin_c)
            .filter(|(w, _)| {
                power_steady_over(
                    self.window
                        .iter()
                        .filter(|x| x.t <= w.t && w.t - x.t <= SAME_LOAD_HELD_S),
                )
            })
            .map(|(w, q)| (q, s.t - w.t))
            .max_by(|a, b| a.0.total_cmp(&b.0))
    }
}

/// The power the energy counter's growth gives over a recent span.
#[derive(Debug, Clone, Copy)]
struct CountedPower {
    watts: f64,
    from_t: f64,
    to_t: f64,
    span_s: f64,
}

/// Why a power reading is judged too low: the power the other evidence gives, what that
/// evidence is (for the signal's `against`) and the reasoning, in words.
#[derive(Debug, Clone)]
pub(super) struct LowPowerEvidence {
    truth_w: f64,
    against: String,
    why: String,
}

/// A power reading too low for what the GPU does, for the temperature of `signal`.
pub(super) fn power_drift_finding(
    signal: Signal,
    temp: f64,
    read: f64,
    evidence: LowPowerEvidence,
) -> Finding {
    let mut signals = BTreeMap::new();
    signals.insert(
        "power_w".into(),
        SignalChange::against(read, evidence.truth_w, evidence.against),
    );
    signals.insert(
        signal.name().to_string(),
        SignalChange::value(temp, "a temperature the power read cannot explain"),
    );
    Finding {
        kind: AlertKind::SensorDrift,
        key: "power".into(),
        severity: Severity::Warning,
        signals,
        message: format!(
            "power reads {read:.0} W, {:.0} % low, {}: a power sensor fault, not a thermal runaway",
            100.0 * (1.0 - read / evidence.truth_w),
            evidence.why
        ),
    }
}
