//! The rule-based detectors: clock-event throttling and the power cap, clocks against the
//! healthy baselines, error counters (ECC, row remaps, PCIe replays), Xid events, frozen
//! sensors and performance decay. Their own file: each is one rule over the readings, apart
//! from the thermal, power and leak families.

use super::Monitor;
use crate::alert::{AlertKind, Finding, Severity, SignalChange};
use crate::model::{LoadState, UtilBucket};
use crate::sample::{reasons, Sample, Signal};
use crate::stats::median;
use std::collections::{BTreeMap, HashMap, VecDeque};

/// Seconds over which the power read must hold steady for a cap far below the GPU's own to
/// mean a lowered limit (a lowered limit holds the power at it; bursty work's readings jump):
/// at least four readings at the default 1 s interval.
const CAP_STEADY_S: f64 = 4.0;

#[derive(Debug, Clone, Default)]
pub(super) struct Counters {
    last: HashMap<&'static str, u64>,
    pub(super) increases: VecDeque<(f64, &'static str, u64)>,
}

#[derive(Debug, Clone)]
pub(super) struct Run {
    value: f64,
    since: f64,
    samples: usize,
    power_min: f64,
    power_max: f64,
}

#[derive(Debug, Clone, Default)]
pub(super) struct Perf {
    baseline: Vec<f64>,
    recent: VecDeque<f64>,
}

impl Monitor {
    pub(super) fn throttling(
        &mut self,
        s: &Sample,
        state: Option<LoadState>,
        out: &mut Vec<Finding>,
    ) {
        let Some(bits) = s.clock_reasons else { return };
        let faults = bits & reasons::FAULTS;
        if faults != 0 {
            let hardware = reasons::HW_SLOWDOWN | reasons::HW_THERMAL | reasons::HW_POWER_BRAKE;
            let severity = if faults & hardware != 0 {
                Severity::Critical
            } else {
                Severity::Warning
            };
            let names = reasons::names(faults).join("+");
            let mut signals = BTreeMap::new();
            signals.insert(
                "clock_reasons".into(),
                SignalChange::against(
                    bits as f64,
                    0.0,
                    "clock-event reason bits; healthy: none, idle (0x1) or the power cap (0x4)",
                ),
            );
            let mut message = format!("throttling: {names} (reasons 0x{bits:x})");
            let cause = if faults & (reasons::SW_THERMAL | reasons::HW_THERMAL) != 0 {
                "heat"
            } else if faults & reasons::HW_POWER_BRAKE != 0 {
                "an external power brake (power supply or chassis)"
            } else {
                "a hardware slowdown signal"
            };
            message.push_str(&format!(", caused by {cause}"));
            if let (Some(sm), Some(model)) = (s.sm_clock_mhz, &self.model) {
                let full = Some(LoadState {
                    bucket: UtilBucket::Busy,
                    power_capped: false,
                });
                if let Some((b, against)) = model.baseline(full, Signal::SmClock) {
                    signals.insert(
                        "sm_clock".into(),
                        SignalChange::against(sm, b.median, against),
                    );
                    message.push_str(&format!(
                        "; SM clock {sm:.0} MHz against {:.0} MHz healthy at full load",
                        b.median
                    ));
                }
            }
            if let Some(state) = state {
                message.push_str(&format!(" ({})", state.describe()));
            }
            out.push(Finding {
                kind: AlertKind::Throttling,
                key: names,
                severity,
                signals,
                message,
            });
        }
        // The power cap is normal under full load, at the GPU's own cap. Capping far below it,
        // at a steady power, means the limit was lowered (or power is misread). Bursty work
        // sets the cap bit with a power reading (a second's average) anywhere below the cap:
        // an H100 running GEMMs of many sizes read 195–700 W in ten seconds, capped.
        let capped_low = match (
            state,
            s.power_w,
            self.model.as_ref().and_then(|m| m.capped_power),
        ) {
            (Some(st), Some(p), Some(cap))
                if st.power_capped
                    && st.bucket == UtilBucket::Busy
                    && faults == 0
                    && self.power_steady(CAP_STEADY_S) =>
            {
                let floor = (cap.median * (1.0 - self.config.power_cap_drop_fraction))
                    .min(cap.median - 5.0 * cap.sigma);
                (p < floor).then_some((p, cap))
            }
            _ => None,
        };
        if self.held(
            "power_cap_low",
            capped_low.is_some(),
            self.config.persist_samples,
        ) {
            if let Some((p, cap)) = capped_low {
                let mut signals = BTreeMap::new();
                signals.insert(
                    "power_w".into(),
                    SignalChange::against(
                        p,
                        cap.median,
                        format!(
                            "healthy power under the cap at full load ({} samples)",
                            cap.n
                        ),
                    ),
                );
                out.push(Finding {
                    kind: AlertKind::Throttling,
                    key: "power_cap_low".into(),
                    severity: Severity::Warning,
                    signals,
                    message: format!(
                        "throttling: power-capped at {p:.0} W under full load where this GPU caps at {:.0} W: the power limit was lowered, or power is misread",
                        cap.median
                    ),
                });
            }
        }
    }

    pub(super) fn clocks(&mut self, s: &Sample, state: Option<LoadState>, out: &mut Vec<Finding>) {
        let Some(model) = self.model.as_ref() else {
            return;
        };
        let bits = s.clock_reasons.unwrap_or(0);
        // SM clock at full load with nothing to explain a lower one.
        let sm_drop = match (state, s.sm_clock_mhz) {
            (Some(st), Some(sm))
                if st.bucket == UtilBucket::Busy
                    && bits & (reasons::SW_POWER_CAP | reasons::FAULTS) == 0 =>
            {
                model
                    .baseline(Some(st), Signal::SmClock)
                    .and_then(|(b, against)| {
                        let floor = b.median
                            - (4.0 * b.sigma).max(self.config.sm_clock_drop_fraction * b.median);
                        (sm < floor).then_some((sm, b.median, against))
                    })
            }
            _ => None,
        };
        let mem_drop = s.mem_clock_mhz.and_then(|mc| {
            model
                .baseline(state, Signal::MemClock)
                .and_then(|(b, against)| {
                    let floor = b.median
                        - (4.0 * b.sigma).max(self.config.mem_clock_drop_fraction * b.median);
                    (mc < floor).then_some((mc, b.median, against))
                })
        });
        let persist = self.config.persist_samples;
        for (name, drop) in [("sm_clock", sm_drop), ("mem_clock", mem_drop)] {
            if !self.held(&format!("drop_{name}"), drop.is_some(), persist) {
                continue;
            }
            let Some((value, base, against)) = drop else {
                continue;
            };
            let mut signals = BTreeMap::new();
            signals.insert(
                name.to_string(),
                SignalChange::against(value, base, against),
            );
            signals.insert(
                "clock_reasons".into(),
                SignalChange::value(
                    bits as f64,
                    "clock-event reason bits: no cap or slowdown set",
                ),
            );
            out.push(Finding {
                kind: AlertKind::ClockDrop,
                key: name.into(),
                severity: Severity::Warning,
                signals,
                message: format!(
                    "{name} {value:.0} MHz, {:.0} % below its healthy {base:.0} MHz at this load, with no throttle reason given",
                    100.0 * (base - value) / base
                ),
            });
        }
    }

    pub(super) fn counters(&mut self, s: &Sample, out: &mut Vec<Finding>) {
        let values: [(&'static str, Option<u64>); 4] = [
            ("ecc_uncorr", s.ecc_uncorr.or(s.ecc_uncorr_aggregate)),
            ("ecc_corr", s.ecc_corr.or(s.ecc_corr_aggregate)),
            ("pcie_replay", s.pcie_replay),
            (
                "remapped",
                match (s.remapped_rows, s.retired_pages) {
                    (None, None) => None,
                    (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
                },
            ),
        ];
        for (name, value) in values {
            let Some(value) = value else { continue };
            // A counter that went down was reset (driver reload): start again from it.
            if let Some(last) = self.counters.last.insert(name, value) {
                if value > last {
                    self.counters.increases.push_back((s.t, name, value - last));
                }
            }
        }
        let window = self.config.counter_window_s;
        while self
            .counters
            .increases
            .front()
            .is_some_and(|(t, _, _)| s.t - t > window)
        {
            self.counters.increases.pop_front();
        }
        let sum = |name: &str, only_now: bool| -> u64 {
            self.counters
                .increases
                .iter()
                .filter(|(t, n, _)| *n == name && (!only_now || *t == s.t))
                .map(|x| x.2)
                .sum()
        };
        let uncorr_now = sum("ecc_uncorr", true);
        if uncorr_now > 0 {
            out.push(counter_finding(
                AlertKind::EccUncorrected,
                Severity::Critical,
                "ecc_uncorr",
                uncorr_now,
                sum("ecc_uncorr", false),
                window,
                "uncorrected ECC errors: data on this GPU may be corrupt",
            ));
        }
        let bursts = [
            (
                AlertKind::EccCorrectedBurst,
                "ecc_corr",
                self.config.ecc_corrected_burst,
                10,
                "a burst of corrected ECC errors: memory is degrading",
            ),
            (
                AlertKind::PcieReplayBurst,
                "pcie_replay",
                self.config.pcie_replay_burst,
                20,
                "a burst of PCIe replays: the link (riser, slot, cable) is failing",
            ),
        ];
        for (kind, name, burst, critical_times, what) in bursts {
            let (now, in_window) = (sum(name, true), sum(name, false));
            if now == 0 || in_window < burst {
                continue;
            }
            let severity = if in_window >= critical_times * burst {
                Severity::Critical
            } else {
                Severity::Warning
            };
            out.push(counter_finding(
                kind, severity, name, now, in_window, window, what,
            ));
        }
        let remapped = sum("remapped", true);
        if remapped > 0 {
            out.push(counter_finding(
                AlertKind::MemoryRemap,
                Severity::Warning,
                "remapped_rows",
                remapped,
                sum("remapped", false),
                window,
                "memory rows remapped or pages retired",
            ));
        }
    }

    pub(super) fn xid(&mut self, s: &Sample, out: &mut Vec<Finding>) {
        for &code in &s.xid {
            let (severity, what) = crate::xid::describe(code);
            let mut signals = BTreeMap::new();
            signals.insert(
                "xid".into(),
                SignalChange::value(f64::from(code), "XID code reported by the driver"),
            );
            out.push(Finding {
                kind: AlertKind::Xid,
                key: code.to_string(),
                severity,
                signals,
                message: format!("XID {code}: {what}"),
            });
        }
    }

    pub(super) fn frozen(&mut self, s: &Sample, out: &mut Vec<Finding>) {
        let healthy = |signal: Signal| {
            self.model
                .as_ref()
                .and_then(|m| m.longest_unchanged_s.get(&signal).copied())
        };
        for signal in [
            Signal::TempGpu,
            Signal::TempMem,
            Signal::Power,
            Signal::Energy,
        ] {
            let longest = healthy(signal);
            if s.carried.contains(&signal) {
                // The last reading shown again: nothing new about the sensor.
                continue;
            }
            let Some(v) = s.signal(signal) else {
                // The energy counter is read every few samples (a recorded trace leaves the
                // cells between empty): an unread one says nothing either. Any other sensor
                // that stops being read starts afresh.
                if signal != Signal::Energy {
                    self.frozen.remove(&signal);
                    self.frozen_now.remove(&signal);
                }
                if signal == Signal::Power {
                    self.power_unchanged = false;
                }
                continue;
            };
            let p = s.power_w.unwrap_or(0.0);
            let run = self.frozen.entry(signal).or_insert(Run {
                value: v,
                since: s.t,
                samples: 0,
                power_min: p,
                power_max: p,
            });
            if run.value != v {
                *run = Run {
                    value: v,
                    since: s.t,
                    samples: 0,
                    power_min: p,
                    power_max: p,
                };
            }
            run.samples += 1;
            run.power_min = run.power_min.min(p);
            run.power_max = run.power_max.max(p);
            let duration = s.t - run.since;
            let swing = run.power_max - run.power_min;
            if signal == Signal::Power {
                self.power_unchanged = run.samples >= 2 && duration > longest.unwrap_or(1.0);
            }
            let (frozen, why) = match signal {
                Signal::Energy => {
                    let limit = (3.0 * longest.unwrap_or(0.0)).max(1.0);
                    (
                        run.samples >= 3 && duration >= limit && run.power_min > 20.0,
                        format!("energy must grow at {:.0} W; healthy it never stayed unchanged over {:.1} s", run.power_min, longest.unwrap_or(0.0)),
                    )
                }
                Signal::Power => {
                    let limit = (3.0 * longest.unwrap_or(1.0)).max(3.0);
                    (
                        run.samples >= 4 && duration >= limit,
                        format!(
                            "healthy power never stayed unchanged over {:.1} s",
                            longest.unwrap_or(1.0)
                        ),
                    )
                }
                _ => {
                    let limit = (3.0 * longest.unwrap_or(100.0)).max(60.0);
                    // The die temperature follows power within a second; memory's is too slow
                    // for this test and only has the duration one.
                    let swung = signal == Signal::TempGpu
                        && run.samples >= 3
                        && swing >= self.config.frozen_power_swing_w;
                    (
                        swung || (run.samples >= 3 && duration >= limit),
                        if swung {
                            format!("unchanged while power swung by {swing:.0} W")
                        } else {
                            format!("unchanged over {duration:.0} s where healthy it changed within {:.0} s", longest.unwrap_or(100.0))
                        },
                    )
                }
            };
            if !frozen {
                self.frozen_now.remove(&signal);
                continue;
            }
            self.frozen_now.insert(signal);
            let mut signals = BTreeMap::new();
            signals.insert(
                signal.name().to_string(),
                SignalChange::value(
                    v,
                    format!("unchanged for {duration:.1} s ({} samples)", run.samples),
                ),
            );
            if signal != Signal::Power {
                signals.insert(
                    "power_swing_w".into(),
                    SignalChange::value(swing, "power range while it was unchanged"),
                );
            }
            out.push(Finding {
                kind: AlertKind::SensorFrozen,
                key: signal.name().into(),
                severity: Severity::Warning,
                signals,
                message: format!("{} frozen at {v} for {duration:.1} s: {why}", signal.name()),
            });
        }
    }

    pub(super) fn performance(&mut self, s: &Sample, out: &mut Vec<Finding>) {
        let figures = [
            (0, "bench_tflops", s.bench_tflops, true),
            (1, "proof_ratio", s.proof_ratio, false),
        ];
        for (i, name, value, higher_is_better) in figures {
            let Some(value) = value else { continue };
            let trained = self.model.as_ref().and_then(|m| {
                if higher_is_better {
                    m.bench_tflops
                } else {
                    m.proof_ratio
                }
            });
            let perf = &mut self.perf[i];
            let (base, against) = match trained {
                Some(r) => (
                    r.median,
                    format!("median of {} healthy figures in the training history", r.n),
                ),
                None => {
                    if perf.baseline.len() < self.config.perf_baseline_points {
                        perf.baseline.push(value);
                        continue;
                    }
                    (
                        median(&perf.baseline).expect("non-empty"),
                        format!("median of this GPU's first {} figures", perf.baseline.len()),
                    )
                }
            };
            perf.recent.push_back(value);
            if perf.recent.len() > 3 {
                perf.recent.pop_front();
            }
            if perf.recent.len() < 2 || base <= 0.0 {
                continue;
            }
            let now = median(perf.recent.make_contiguous()).expect("non-empty");
            let loss = if higher_is_better {
                1.0 - now / base
            } else {
                now / base - 1.0
            };
            let fraction = self.config.perf_decay_fraction;
            let severity = if loss >= fraction + 0.25 {
                Severity::Critical
            } else if loss >= fraction {
                Severity::Warning
            } else {
                continue;
            };
            let mut signals = BTreeMap::new();
            signals.insert(
                name.to_string(),
                SignalChange::against(
                    now,
                    base,
                    format!("{against}; value: median of the last {}", perf.recent.len()),
                ),
            );
            let source = if higher_is_better {
                "benchmark (self-reported)"
            } else {
                "validator-timed proof"
            };
            out.push(Finding {
                kind: AlertKind::PerfDecay,
                key: name.into(),
                severity,
                signals,
                message: format!(
                    "performance decay: {source} {name} {now:.3} against {base:.3}, {:.0} % worse than this GPU's own history",
                    100.0 * loss
                ),
            });
        }
    }
}

fn counter_finding(
    kind: AlertKind,
    severity: Severity,
    name: &str,
    now: u64,
    in_window: u64,
    window: f64,
    what: &str,
) -> Finding {
    let mut signals = BTreeMap::new();
    signals.insert(
        name.to_string(),
        SignalChange::against(
            now as f64,
            0.0,
            "increase since the previous sample; healthy: none",
        ),
    );
    signals.insert(
        format!("{name}_last_{window:.0}s"),
        SignalChange::value(
            in_window as f64,
            format!("increase over the last {window:.0} s"),
        ),
    );
    Finding {
        kind,
        key: name.into(),
        severity,
        signals,
        message: format!("{what}: +{now} now, +{in_window} in the last {window:.0} s"),
    }
}
