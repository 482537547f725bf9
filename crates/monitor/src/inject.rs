//! Fault injection into real healthy traces, for tests and the evaluation set: each fault has
//! the shape the failure takes in telemetry, starting at a chosen time.

use crate::sample::{reasons, Sample, Signal};
use serde::{Deserialize, Serialize};

/// A fault and its shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Fault {
    /// Cooling fails (thermal interface, fan, airflow): the GPU temperature climbs
    /// `rate_c_per_s` above what the load explains (memory at half the rate) until the end;
    /// past 89 °C the GPU sets SW thermal slowdown and loses a fifth of its SM clock.
    ThermalRunaway {
        /// °C per second.
        rate_c_per_s: f64,
    },
    /// Clocks held down for `duration_s` by the given reason bits, the SM clock
    /// scaled by `clock_factor`.
    Throttle {
        /// NVML clock-event reason bits set.
        reasons: u64,
        /// SM clock multiplier.
        clock_factor: f64,
        /// Seconds.
        duration_s: f64,
    },
    /// The SM clock (`memory: false`) or memory clock drops to `factor` of itself with no
    /// reason bit, for `duration_s`.
    ClockDrop {
        /// Memory clock instead of SM clock.
        memory: bool,
        /// Multiplier.
        factor: f64,
        /// Seconds.
        duration_s: f64,
    },
    /// Memory in use grows by `rate_mib_per_s` until the end, never freed.
    MemoryLeak {
        /// MiB per second.
        rate_mib_per_s: f64,
    },
    /// `count` uncorrected ECC errors at once.
    EccUncorrected {
        /// Errors.
        count: u64,
    },
    /// `count` corrected ECC errors spread over `over_s` seconds.
    EccCorrectedBurst {
        /// Errors.
        count: u64,
        /// Seconds.
        over_s: f64,
    },
    /// `count` PCIe replays spread over `over_s` seconds.
    PcieReplayBurst {
        /// Replays.
        count: u64,
        /// Seconds.
        over_s: f64,
    },
    /// One XID event.
    Xid {
        /// XID code.
        code: u32,
    },
    /// A sensor keeps reporting its value at the fault's start for `duration_s`.
    StuckSensor {
        /// The sensor: `temp_gpu`, `temp_mem`, `power_w` or `energy_mj`.
        signal: Signal,
        /// Seconds.
        duration_s: f64,
    },
    /// The power reading drifts to `factor` of the truth for `duration_s` (a failing sensor
    /// or regulator): no single rule sees it, only the joint state does.
    PowerDrift {
        /// Multiplier.
        factor: f64,
        /// Seconds.
        duration_s: f64,
    },
}

impl Fault {
    /// The fault's kind name (as in the evaluation labels).
    pub fn name(&self) -> &'static str {
        match self {
            Fault::ThermalRunaway { .. } => "thermal_runaway",
            Fault::Throttle { .. } => "throttle",
            Fault::ClockDrop { .. } => "clock_drop",
            Fault::MemoryLeak { .. } => "memory_leak",
            Fault::EccUncorrected { .. } => "ecc_uncorrected",
            Fault::EccCorrectedBurst { .. } => "ecc_corrected_burst",
            Fault::PcieReplayBurst { .. } => "pcie_replay_burst",
            Fault::Xid { .. } => "xid",
            Fault::StuckSensor { .. } => "stuck_sensor",
            Fault::PowerDrift { .. } => "power_drift",
        }
    }

    /// Seconds the fault lasts after its start (`None`: until the end of the trace).
    pub fn duration_s(&self) -> Option<f64> {
        match self {
            Fault::ThermalRunaway { .. } | Fault::MemoryLeak { .. } => None,
            Fault::Throttle { duration_s, .. }
            | Fault::ClockDrop { duration_s, .. }
            | Fault::StuckSensor { duration_s, .. }
            | Fault::PowerDrift { duration_s, .. } => Some(*duration_s),
            Fault::EccCorrectedBurst { over_s, .. } | Fault::PcieReplayBurst { over_s, .. } => {
                Some(*over_s)
            }
            Fault::EccUncorrected { .. } | Fault::Xid { .. } => Some(0.0),
        }
    }
}

fn add(counter: &mut Option<u64>, n: u64) {
    *counter = Some(counter.unwrap_or(0) + n);
}

/// A copy of `samples` with `fault` starting at `start_t`.
pub fn inject(samples: &[Sample], fault: &Fault, start_t: f64) -> Vec<Sample> {
    let end_t = fault.duration_s().map_or(f64::INFINITY, |d| start_t + d);
    let mut stuck: Option<f64> = None;
    let mut xid_done = false;
    samples
        .iter()
        .map(|original| {
            let mut s = original.clone();
            let since = s.t - start_t;
            if since < 0.0 {
                return s;
            }
            let active = s.t <= end_t;
            match fault {
                Fault::ThermalRunaway { rate_c_per_s } => {
                    if let Some(t) = s.temp_gpu_c.as_mut() {
                        *t = (*t + (rate_c_per_s * since).round()).min(105.0);
                        if *t >= 89.0 {
                            s.clock_reasons =
                                Some(s.clock_reasons.unwrap_or(0) | reasons::SW_THERMAL);
                            s.sm_clock_mhz = s.sm_clock_mhz.map(|c| (c * 0.8).round());
                        }
                    }
                    if let Some(t) = s.temp_mem_c.as_mut() {
                        *t = (*t + (0.5 * rate_c_per_s * since).round()).min(105.0);
                    }
                }
                Fault::Throttle {
                    reasons: bits,
                    clock_factor,
                    ..
                } if active => {
                    s.clock_reasons = Some(s.clock_reasons.unwrap_or(0) | bits);
                    s.sm_clock_mhz = s.sm_clock_mhz.map(|c| (c * clock_factor).round());
                }
                Fault::ClockDrop { memory, factor, .. } if active => {
                    let clock = if *memory {
                        &mut s.mem_clock_mhz
                    } else {
                        &mut s.sm_clock_mhz
                    };
                    *clock = clock.map(|c| (c * factor).round());
                }
                Fault::MemoryLeak { rate_mib_per_s } => {
                    // Allocations come in 2-second steps, as a caching allocator grows.
                    let grown = rate_mib_per_s * (since / 2.0).floor() * 2.0;
                    s.mem_used_mib = s.mem_used_mib.map(|m| m + grown);
                    s.mem_free_mib = s.mem_free_mib.map(|m| (m - grown).max(0.0));
                }
                Fault::EccUncorrected { count } => add(&mut s.ecc_uncorr, *count),
                Fault::EccCorrectedBurst { count, over_s } => {
                    let done = ((since / over_s.max(1e-9)).min(1.0) * *count as f64).ceil() as u64;
                    add(&mut s.ecc_corr, done.min(*count));
                }
                Fault::PcieReplayBurst { count, over_s } => {
                    let done = ((since / over_s.max(1e-9)).min(1.0) * *count as f64).ceil() as u64;
                    add(&mut s.pcie_replay, done.min(*count));
                }
                Fault::Xid { code } if !xid_done => {
                    s.xid.push(*code);
                    xid_done = true;
                }
                // It sticks at its first reading in the fault; a row where it was not read
                // (energy, read every few samples live) stays unread.
                Fault::StuckSensor { signal, .. } if active => {
                    if let Some(read) = s.signal(*signal) {
                        let value = Some(*stuck.get_or_insert(read));
                        match signal {
                            Signal::TempGpu => s.temp_gpu_c = value,
                            Signal::TempMem => s.temp_mem_c = value,
                            Signal::Power => s.power_w = value,
                            Signal::Energy => s.energy_mj = value,
                            _ => {}
                        }
                    }
                }
                Fault::PowerDrift { factor, .. } if active => {
                    s.power_w = s.power_w.map(|p| p * factor);
                }
                _ => {}
            }
            s
        })
        .collect()
}

/// An allocation pattern of healthy work, for the leak check to stay quiet on: memory that
/// rises and is freed, or rises and settles.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Allocation {
    /// Training steps: every `period_s`, memory rises by `rise_mib` in even steps over the
    /// first two thirds of the step (activations kept for the backward pass), then all of it
    /// is freed; for `duration_s`.
    TrainingSawtooth {
        /// Seconds per step.
        period_s: f64,
        /// MiB allocated in a step and freed at its end.
        rise_mib: f64,
        /// Seconds.
        duration_s: f64,
    },
    /// A large buffer: `size_mib` allocated at once and held `hold_s`, freed at once, then
    /// `refill_after_s` later allocated again in two halves a second apart (the next step's
    /// working set) and held.
    LargeFree {
        /// MiB.
        size_mib: f64,
        /// Seconds held before the free.
        hold_s: f64,
        /// Seconds from the free to the refill.
        refill_after_s: f64,
    },
    /// A job starting up: its process appears (the process count goes up by one), then it
    /// allocates `step_mib` every `every_s`, `steps` times, and holds what it has.
    StartupStaircase {
        /// MiB per allocation.
        step_mib: f64,
        /// Seconds between allocations.
        every_s: f64,
        /// Allocations.
        steps: u32,
    },
}

impl Allocation {
    /// The pattern's name (as in the evaluation labels).
    pub fn name(&self) -> &'static str {
        match self {
            Allocation::TrainingSawtooth { .. } => "alloc_training_sawtooth",
            Allocation::LargeFree { .. } => "alloc_large_free",
            Allocation::StartupStaircase { .. } => "alloc_startup_staircase",
        }
    }

    /// MiB this pattern adds to the memory in use `since` seconds after its start.
    fn extra_mib(&self, since: f64) -> f64 {
        match *self {
            Allocation::TrainingSawtooth {
                period_s,
                rise_mib,
                duration_s,
            } => {
                if since > duration_s {
                    return 0.0;
                }
                let rising_s = period_s * 2.0 / 3.0;
                let into_step = since % period_s;
                // Four allocations in the rise, none after it (freed at the step's end).
                let done = ((into_step / rising_s * 4.0).floor() + 1.0).min(4.0);
                if into_step < rising_s {
                    rise_mib * done / 4.0
                } else {
                    0.0
                }
            }
            Allocation::LargeFree {
                size_mib,
                hold_s,
                refill_after_s,
            } => {
                let refill = hold_s + refill_after_s;
                if since < hold_s {
                    size_mib
                } else if since < refill {
                    0.0
                } else if since < refill + 1.0 {
                    size_mib / 2.0
                } else {
                    size_mib
                }
            }
            Allocation::StartupStaircase {
                step_mib,
                every_s,
                steps,
            } => step_mib * ((since / every_s).floor() + 1.0).min(f64::from(steps)),
        }
    }
}

/// A copy of `samples` with `pattern` starting at `start_t`. The start-up staircase also
/// counts its process: one more from its start on than before (none before where the count
/// was not read).
pub fn allocate(samples: &[Sample], pattern: &Allocation, start_t: f64) -> Vec<Sample> {
    samples
        .iter()
        .map(|original| {
            let mut s = original.clone();
            let since = s.t - start_t;
            let started = since >= 0.0;
            if let Allocation::StartupStaircase { .. } = pattern {
                let before = s.processes.unwrap_or(0);
                s.processes = Some(before + u32::from(started));
            }
            if started {
                let extra = pattern.extra_mib(since);
                s.mem_used_mib = s.mem_used_mib.map(|m| m + extra);
                s.mem_free_mib = s.mem_free_mib.map(|m| (m - extra).max(0.0));
            }
            s
        })
        .collect()
}

/// `copies` back-to-back copies of a trace, times shifted and energy kept increasing, so a
/// short recording makes a longer one.
pub fn repeat(samples: &[Sample], copies: usize) -> Vec<Sample> {
    Looped::new(samples).take(samples.len() * copies).collect()
}

/// A slow fault (issue 26, item 2): a degradation over hours or days, too slow for any rule
/// that judges seconds or minutes. Injected sample by sample ([`SlowInjector`]) into a long
/// stream ([`Looped`]), so days of samples need not be held at once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SlowFault {
    /// The die's thermal interface (paste, cold plate contact) degrades: its thermal
    /// resistance grows so that the die runs `c_per_day` °C hotter at `full_w` each day, at
    /// equal power (proportionally less at less power; the memory is not touched).
    ThermalInterface {
        /// °C per day at `full_w`.
        c_per_day: f64,
        /// The power at which the rate is given, W.
        full_w: f64,
    },
    /// A fan or pump loses flow: `fraction` of it, linearly over `over_s` seconds, then held.
    /// The heat sink's resistance grows as the flow to the power −0.8 (forced convection),
    /// so both temperatures run `((1 − lost)^−0.8 − 1) · sink_c_per_w · P` hotter, with `P`
    /// the power through the heat sink's lag (30 s).
    CoolingLoss {
        /// The flow lost at the end, 0 to 1.
        fraction: f64,
        /// Seconds over which it is lost.
        over_s: f64,
        /// The heat sink's part of the thermal resistance, °C per W.
        sink_c_per_w: f64,
    },
    /// A temperature sensor's reading drifts by `c_per_hour` °C an hour (an offset, the
    /// same at every load).
    TempSensorDrift {
        /// `temp_gpu` or `temp_mem`.
        signal: Signal,
        /// °C per hour.
        c_per_hour: f64,
    },
    /// The power reading drifts by `fraction_per_hour` of itself an hour (negative: it
    /// reads low); the energy counter does not.
    PowerSensorDrift {
        /// Fraction per hour.
        fraction_per_hour: f64,
    },
}

impl SlowFault {
    /// The fault's kind name.
    pub fn name(&self) -> &'static str {
        match self {
            SlowFault::ThermalInterface { .. } => "thermal_interface",
            SlowFault::CoolingLoss { .. } => "cooling_loss",
            SlowFault::TempSensorDrift { .. } => "temp_sensor_drift",
            SlowFault::PowerSensorDrift { .. } => "power_sensor_drift",
        }
    }
}

/// Injects a [`SlowFault`] from `start_t` on, sample by sample, in time order. Temperatures
/// stay whole degrees as NVML reads them: the added heat is rounded stochastically (seeded),
/// so that on average the reading carries it exactly and no reading moves before the fault.
#[derive(Debug, Clone)]
pub struct SlowInjector {
    fault: SlowFault,
    start_t: f64,
    rng: crate::forest::SplitMix,
    last_t: Option<f64>,
    fast_w: f64,
    slow_w: f64,
}

impl SlowInjector {
    /// An injector of `fault` from `start_t`, its rounding seeded by `seed`.
    pub fn new(fault: SlowFault, start_t: f64, seed: u64) -> SlowInjector {
        SlowInjector {
            fault,
            start_t,
            rng: crate::forest::SplitMix::new(seed),
            last_t: None,
            fast_w: 0.0,
            slow_w: 0.0,
        }
    }

    /// The fault injected.
    pub fn fault(&self) -> &SlowFault {
        &self.fault
    }

    fn round(&mut self, reading: f64, added: f64) -> f64 {
        reading + (added + self.rng.unit()).floor()
    }

    /// Applies the fault to the next sample.
    pub fn apply(&mut self, s: &mut Sample) {
        if let Some(p) = s.power_w {
            let dt = self
                .last_t
                .map_or(f64::INFINITY, |last| (s.t - last).max(0.0));
            self.fast_w += (1.0 - (-dt / 0.5).exp()) * (p - self.fast_w);
            self.slow_w += (1.0 - (-dt / 30.0).exp()) * (p - self.slow_w);
            self.last_t = Some(s.t);
        }
        let since = s.t - self.start_t;
        if since < 0.0 {
            return;
        }
        match self.fault.clone() {
            SlowFault::ThermalInterface { c_per_day, full_w } => {
                let added = c_per_day * since / 86_400.0 * self.fast_w / full_w;
                if let Some(t) = s.temp_gpu_c {
                    s.temp_gpu_c = Some(self.round(t, added));
                }
            }
            SlowFault::CoolingLoss {
                fraction,
                over_s,
                sink_c_per_w,
            } => {
                let lost = fraction * (since / over_s.max(1e-9)).min(1.0);
                let added = ((1.0 - lost).max(0.05).powf(-0.8) - 1.0) * sink_c_per_w * self.slow_w;
                if let Some(t) = s.temp_gpu_c {
                    s.temp_gpu_c = Some(self.round(t, added));
                }
                if let Some(t) = s.temp_mem_c {
                    s.temp_mem_c = Some(self.round(t, added));
                }
            }
            SlowFault::TempSensorDrift { signal, c_per_hour } => {
                let added = c_per_hour * since / 3600.0;
                let field = match signal {
                    Signal::TempMem => &mut s.temp_mem_c,
                    _ => &mut s.temp_gpu_c,
                };
                if let Some(t) = *field {
                    let moved = t + (added + self.rng.unit()).floor();
                    *field = Some(moved);
                }
            }
            SlowFault::PowerSensorDrift { fraction_per_hour } => {
                let factor = (1.0 + fraction_per_hour * since / 3600.0).max(0.0);
                s.power_w = s.power_w.map(|p| (p * factor * 1000.0).round() / 1000.0);
            }
        }
    }
}

/// A trace replayed back to back without end (as [`repeat`], lazily): times shifted, the
/// energy counter kept increasing.
#[derive(Debug, Clone)]
pub struct Looped<'a> {
    samples: &'a [Sample],
    span: f64,
    energy_span: f64,
    index: usize,
    copy: usize,
}

impl<'a> Looped<'a> {
    /// The endless replay of `samples` (empty when `samples` is).
    pub fn new(samples: &'a [Sample]) -> Looped<'a> {
        let (span, energy_span) = loop_spans(samples);
        Looped {
            samples,
            span,
            energy_span,
            index: 0,
            copy: 0,
        }
    }
}

impl Iterator for Looped<'_> {
    type Item = Sample;

    fn next(&mut self) -> Option<Sample> {
        let original = self.samples.get(self.index)?;
        let mut s = original.clone();
        s.t = ((s.t + self.span * self.copy as f64) * 1000.0).round() / 1000.0;
        s.energy_mj = s.energy_mj.map(|e| e + self.energy_span * self.copy as f64);
        self.index += 1;
        if self.index == self.samples.len() {
            self.index = 0;
            self.copy += 1;
        }
        Some(s)
    }
}

/// The room a GPU stands in, changing now and then: every `every_s` (drawn from the range,
/// seeded) it moves to a new level, a whole number of °C drawn within ±`range_c` of the
/// recording's, and both temperatures follow it with a 20-s time constant (a door opened,
/// the air conditioning changed). The first level holds from the start.
#[derive(Debug, Clone)]
pub struct Rooms {
    rng: crate::forest::SplitMix,
    every_s: (f64, f64),
    range_c: i64,
    from_c: f64,
    to_c: f64,
    since_t: f64,
    next_t: Option<f64>,
}

impl Rooms {
    /// Rooms within ±`range_c` °C, changing every `every_s` (seconds, low and high).
    pub fn new(seed: u64, every_s: (f64, f64), range_c: i64) -> Rooms {
        let mut rng = crate::forest::SplitMix::new(seed);
        let first = rng.below((2 * range_c + 1) as usize) as i64 - range_c;
        Rooms {
            rng,
            every_s,
            range_c,
            from_c: first as f64,
            to_c: first as f64,
            since_t: f64::NEG_INFINITY,
            next_t: None,
        }
    }

    /// A room that never changes, `level_c` °C warmer than the recording's (negative: cooler).
    pub fn fixed(level_c: i64) -> Rooms {
        Rooms {
            rng: crate::forest::SplitMix::new(0),
            every_s: (f64::INFINITY, f64::INFINITY),
            range_c: 0,
            from_c: level_c as f64,
            to_c: level_c as f64,
            since_t: f64::NEG_INFINITY,
            next_t: Some(f64::INFINITY),
        }
    }

    /// The room's level (°C against the recording's) at `t`.
    pub fn level_at(&self, t: f64) -> f64 {
        let into = (t - self.since_t).max(0.0);
        self.to_c + (self.from_c - self.to_c) * (-into / 20.0).exp()
    }

    /// Applies the room to the next sample.
    pub fn apply(&mut self, s: &mut Sample) {
        let next = *self.next_t.get_or_insert_with(|| {
            s.t + self.every_s.0 + self.rng.unit() * (self.every_s.1 - self.every_s.0)
        });
        if s.t >= next {
            self.from_c = self.level_at(s.t);
            self.to_c =
                (self.rng.below((2 * self.range_c + 1) as usize) as i64 - self.range_c) as f64;
            self.since_t = s.t;
            self.next_t =
                Some(s.t + self.every_s.0 + self.rng.unit() * (self.every_s.1 - self.every_s.0));
        }
        let c = self.level_at(s.t).round();
        s.temp_gpu_c = s.temp_gpu_c.map(|t| t + c);
        s.temp_mem_c = s.temp_mem_c.map(|t| t + c);
    }
}

/// One copy's span (s) and the energy counter's growth over it (mJ), for replaying a trace
/// back to back.
fn loop_spans(samples: &[Sample]) -> (f64, f64) {
    let Some((first, last)) = samples.first().zip(samples.last()) else {
        return (0.0, 0.0);
    };
    let step = if samples.len() > 1 {
        (last.t - first.t) / (samples.len() - 1) as f64
    } else {
        1.0
    };
    let span = last.t - first.t + step;
    // The counter's growth over one copy: from its first reading to its last, then at the
    // last reading's power until the next copy's first reading (a live recording reads it
    // only every few samples, so these need not be the first and last rows).
    let read = |s: &&Sample| s.energy_mj.is_some();
    let first_read = samples.iter().find(read);
    let last_read = samples.iter().rev().find(read);
    let energy_span = match first_read.zip(last_read) {
        Some((a, b)) => {
            let until_next = a.t + span - b.t;
            b.energy_mj.unwrap_or(0.0) - a.energy_mj.unwrap_or(0.0)
                + b.power_w.unwrap_or(0.0) * until_next * 1000.0
        }
        None => 0.0,
    };
    (span, energy_span)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flat(n: usize) -> Vec<Sample> {
        (0..n)
            .map(|i| {
                let mut s = Sample::at(i as f64);
                s.temp_gpu_c = Some(40.0);
                s.ecc_corr = Some(0);
                s.mem_used_mib = Some(1000.0);
                s.energy_mj = Some(i as f64 * 100_000.0);
                s.power_w = Some(100.0);
                s
            })
            .collect()
    }

    #[test]
    fn faults_start_at_their_time() {
        let base = flat(20);
        let hot = inject(&base, &Fault::ThermalRunaway { rate_c_per_s: 2.0 }, 10.0);
        assert_eq!(hot[9].temp_gpu_c, Some(40.0));
        assert_eq!(hot[15].temp_gpu_c, Some(50.0));
        let ecc = inject(
            &base,
            &Fault::EccCorrectedBurst {
                count: 10,
                over_s: 5.0,
            },
            10.0,
        );
        assert_eq!(ecc[9].ecc_corr, Some(0));
        assert_eq!(ecc[19].ecc_corr, Some(10));
        let stuck = inject(
            &base,
            &Fault::StuckSensor {
                signal: Signal::Energy,
                duration_s: 3.0,
            },
            5.0,
        );
        assert_eq!(stuck[6].energy_mj, Some(500_000.0));
        assert_eq!(stuck[9].energy_mj, Some(900_000.0));
        let leak = inject(
            &base,
            &Fault::MemoryLeak {
                rate_mib_per_s: 10.0,
            },
            0.0,
        );
        assert_eq!(leak[5].mem_used_mib, Some(1040.0));
    }

    #[test]
    fn allocation_patterns_have_their_shapes() {
        let base = flat(40);
        let saw = allocate(
            &base,
            &Allocation::TrainingSawtooth {
                period_s: 6.0,
                rise_mib: 400.0,
                duration_s: 20.0,
            },
            10.0,
        );
        let used: Vec<f64> = saw.iter().map(|s| s.mem_used_mib.unwrap()).collect();
        assert_eq!(used[9], 1000.0);
        // Rising 100 MiB a second over 4 s of each 6-s step, then freed; over after 20 s.
        assert_eq!(
            &used[10..17],
            &[1100.0, 1200.0, 1300.0, 1400.0, 1000.0, 1000.0, 1100.0]
        );
        assert_eq!(used[31], 1000.0);
        let free = allocate(
            &base,
            &Allocation::LargeFree {
                size_mib: 8000.0,
                hold_s: 5.0,
                refill_after_s: 3.0,
            },
            10.0,
        );
        let used: Vec<f64> = free.iter().map(|s| s.mem_used_mib.unwrap()).collect();
        assert_eq!(
            &used[14..20],
            &[9000.0, 1000.0, 1000.0, 1000.0, 5000.0, 9000.0]
        );
        let staircase = allocate(
            &base,
            &Allocation::StartupStaircase {
                step_mib: 500.0,
                every_s: 2.0,
                steps: 3,
            },
            10.0,
        );
        let used: Vec<f64> = staircase.iter().map(|s| s.mem_used_mib.unwrap()).collect();
        assert_eq!(
            &used[9..17],
            &[1000.0, 1500.0, 1500.0, 2000.0, 2000.0, 2500.0, 2500.0, 2500.0]
        );
        assert_eq!(staircase[9].processes, Some(0));
        assert_eq!(staircase[10].processes, Some(1));
    }

    #[test]
    fn repeat_keeps_time_and_energy_increasing() {
        let long = repeat(&flat(10), 3);
        assert_eq!(long.len(), 30);
        for pair in long.windows(2) {
            assert!(pair[1].t > pair[0].t);
            assert!(pair[1].energy_mj > pair[0].energy_mj);
        }
        // Energy read every 4th sample, as a live recording has it: the copies go on at the
        // same 100 W (100,000 mJ a second), the cells between stay empty.
        let mut sparse = flat(10);
        for (i, s) in sparse.iter_mut().enumerate() {
            if i % 4 != 1 {
                s.energy_mj = None;
            }
        }
        let long = repeat(&sparse, 3);
        let reads: Vec<(f64, f64)> = long
            .iter()
            .filter_map(|s| Some((s.t, s.energy_mj?)))
            .collect();
        assert_eq!(reads.len(), 9);
        for pair in reads.windows(2) {
            let rate = (pair[1].1 - pair[0].1) / (pair[1].0 - pair[0].0);
            assert!((rate - 100_000.0).abs() < 1e-6, "{pair:?}");
        }
    }

    #[test]
    fn looped_is_repeat_without_end() {
        let base = flat(10);
        let looped: Vec<Sample> = Looped::new(&base).take(35).collect();
        assert_eq!(looped, repeat(&base, 4)[..35].to_vec());
        assert_eq!(Looped::new(&[]).next(), None);
    }

    #[test]
    fn slow_faults_add_nothing_before_their_start_and_their_rate_on_average() {
        // 100 W throughout, a sample a second for two days.
        let base: Vec<Sample> = Looped::new(&flat(10)).take(172_800).collect();
        let run = |fault: SlowFault| -> Vec<Sample> {
            let mut injector = SlowInjector::new(fault, 86_400.0, 1);
            base.iter()
                .cloned()
                .map(|mut s| {
                    injector.apply(&mut s);
                    s
                })
                .collect()
        };
        // 1 °C a day at 100 W: nothing the first day, +0.5 °C on average at half a day in.
        let hot = run(SlowFault::ThermalInterface {
            c_per_day: 1.0,
            full_w: 100.0,
        });
        assert!(hot[..86_400].iter().all(|s| s.temp_gpu_c == Some(40.0)));
        let around: Vec<f64> = hot[86_400 + 42_000..86_400 + 44_400]
            .iter()
            .map(|s| s.temp_gpu_c.unwrap() - 40.0)
            .collect();
        let mean = around.iter().sum::<f64>() / around.len() as f64;
        assert!((mean - 0.5).abs() < 0.05, "{mean}");
        assert!(
            around.iter().all(|d| *d == 0.0 || *d == 1.0),
            "whole degrees"
        );
        // A fifth of the flow lost over an hour at 0.02 °C/W: (0.8^-0.8 − 1)·2 W·°C/W.
        let fan = run(SlowFault::CoolingLoss {
            fraction: 0.2,
            over_s: 3600.0,
            sink_c_per_w: 0.02,
        });
        let late: Vec<f64> = fan[170_000..]
            .iter()
            .map(|s| s.temp_gpu_c.unwrap() - 40.0)
            .collect();
        let mean = late.iter().sum::<f64>() / late.len() as f64;
        let expected = (0.8f64.powf(-0.8) - 1.0) * 0.02 * 100.0;
        assert!((mean - expected).abs() < 0.05, "{mean} against {expected}");
        // The power reading 2 % low an hour after the start; the counter untouched.
        let low = run(SlowFault::PowerSensorDrift {
            fraction_per_hour: -0.02,
        });
        assert_eq!(low[86_399].power_w, Some(100.0));
        assert_eq!(low[86_400 + 3600].power_w, Some(98.0));
        assert_eq!(low[86_400 + 3600].energy_mj, base[86_400 + 3600].energy_mj);
    }

    #[test]
    fn rooms_move_within_their_range_and_a_fixed_one_never() {
        let base: Vec<Sample> = Looped::new(&flat(10)).take(100_000).collect();
        let mut rooms = Rooms::new(3, (3600.0, 7200.0), 5);
        let mut levels = std::collections::BTreeSet::new();
        for s in &base {
            let mut s = s.clone();
            rooms.apply(&mut s);
            let level = s.temp_gpu_c.unwrap() - 40.0;
            assert!((-5.0..=5.0).contains(&level), "{level}");
            levels.insert(level as i64);
        }
        assert!(levels.len() >= 5, "{levels:?}");
        let mut fixed = Rooms::fixed(-2);
        for s in &base[..1000] {
            let mut s = s.clone();
            fixed.apply(&mut s);
            assert_eq!(s.temp_gpu_c, Some(38.0));
        }
    }
}
