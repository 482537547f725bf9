//! Slow degradation (issue 26, item 2): a learned model of each temperature from the other
//! signals, tracked over hours, that sees what the rules cannot — a thermal interface losing
//! half a degree a day at equal power, a fan or pump losing a fifth of its flow over hours, a
//! temperature or power sensor drifting — and says how fast it goes and when the GPU reaches
//! its limit at its typical full load.
//!
//! Three parts:
//!
//! - [`ThermalReference`], trained on the healthy history and then **frozen**: each
//!   temperature (die, memory) regressed by least squares on the power seen through two
//!   thermal lags ([`FAST_TAU_S`], [`SLOW_TAU_S`]), the power times the memory utilization
//!   (a copy heats the HBM, not the SMs), the memory utilization and the SM clock
//!   ([`FEATURES`]); and the ratio of the power read to the energy counter's growth. Without
//!   a healthy history ([`Degradation`]) it is learned from the GPU's own first
//!   [`SELF_TRAIN_S`].
//! - [`DriftWatch`], per GPU, online: for each temperature, the residual against the
//!   reference is fitted as `a + b_fast·u_fast + b_slow·u_slow` by recursive least squares
//!   with exponential forgetting ([`TAU_S`]), where `u` is the power through each lag over the
//!   GPU's typical full load. `a` is this GPU's offset at no load (the room, the card: a step
//!   of the whole card moves `a`), `b = b_fast + b_slow` the extra heat at a steady full load
//!   (a thermal resistance that grew: a trend at load moves `b`). It is updated only on
//!   samples judged healthy (a steady load, and no thermal, sensor or throttle rule spoke in
//!   the last [`QUIET_S`]); `a` moves freely, `b` only where the load varied enough to tell
//!   them apart (an anisotropic prior: rooms change fast, cooling slowly).
//! - A **frozen per-GPU reference** beside it: the medians of `a` and `b` over this GPU's
//!   first [`BASELINE_POINTS`] points after [`TAU_S`] of learning. The online fit follows
//!   the degradation (it must, to measure it); the alert compares it with this reference,
//!   which never moves, so a degradation is never learned as the new normal. It is kept
//!   across runs with the rest of the watch ([`DriftState`]).
//!
//! What each drift looks like: the room moves `a` of both temperatures together; a thermal
//! interface moves `b` of the die; a fan or pump moves `b` of both; a drifting temperature
//! sensor moves its own `a` away from the other temperature's; a drifting power reading moves
//! the ratio of the power read to the energy counter's growth.

use crate::alert::{AlertKind, Finding, Severity, SignalChange};
use crate::sample::{Sample, Signal};
use crate::stats::{mad_sigma, median, quantile, theil_sen};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

/// The time constant (s) of the die's fast thermal lag behind the power read.
pub const FAST_TAU_S: f64 = 0.5;

/// The time constant (s) of the slow thermal lag (the heat sink, the memory stacks).
pub const SLOW_TAU_S: f64 = 30.0;

/// The regression's features, in order.
pub const FEATURES: [&str; 6] = [
    "intercept",
    "power_fast",
    "power_slow",
    "power_fast_x_util_mem",
    "util_mem",
    "sm_clock",
];

/// The forgetting time constant (s) of the online fit: about an hour of samples weighs in.
pub const TAU_S: f64 = 3600.0;

/// Seconds between two points of the online fit kept for the trend.
pub const POINT_S: f64 = 600.0;

/// Points kept for the trend (a week at [`POINT_S`]).
const POINTS_KEPT: usize = 1008;

/// °C within which a fit's value still counts as at its reference (for where a trend starts).
const DEPARTED_C: f64 = 0.5;

/// The shortest window (s) a trend is taken over.
const MIN_TREND_S: f64 = 3.0 * 3600.0;

/// Points (after [`TAU_S`] of learning) whose medians make this GPU's frozen reference.
pub const BASELINE_POINTS: usize = 6;

/// The trend is the Theil–Sen slope over the points of the last this many seconds.
pub const TREND_S: f64 = 86_400.0;

/// Seconds after a thermal, sensor or throttle rule spoke during which the online fit learns
/// nothing.
pub const QUIET_S: f64 = 60.0;

/// °C the extra heat at full load (`b`) must have grown over this GPU's reference to be a
/// cooling degradation: die, memory. On 15 days of healthy streams in moving rooms the die's
/// grew at most 0.58 °C, the memory's (slower, noisier) 0.74 °C.
pub const COOLING_MIN_C: [f64; 2] = [1.0, 1.5];

/// The other temperature's growth, as a fraction of the one that rose, from which both
/// rose (the cooling of both: a fan or pump) rather than one (its own interface).
const BOTH_FRACTION: f64 = 0.4;

/// °C one temperature's offset (`a`) must have moved against the other's to be a drifting
/// sensor.
pub const SENSOR_MIN_C: f64 = 2.0;

/// The fraction by which the power read must depart from the energy counter's growth (against
/// the healthy history's ratio) to be a drifting power sensor.
pub const POWER_MIN_FRACTION: f64 = 0.03;

/// Consecutive points a condition must hold before it is said.
pub const HOLD_POINTS: usize = 3;

/// The weighted variance of `u` the online fit's window must have for `b` to be told apart
/// from `a` (a point is kept only then).
const MIN_U_VARIANCE: f64 = 0.01;

/// The online fit's prior weights (in samples) against moving `a`, `b_fast` and `b_slow`:
/// the heat at load is held where the load did not vary.
const PRIOR: [f64; 3] = [1.0, 100.0, 100.0];

/// The online fit learns only where the power read moved by at most this fraction of the
/// full load over the last two readings (a steady load).
const STEADY_FRACTION: f64 = 0.1;

/// °C beyond which a residual pulls the online fit no harder (Huber).
const HUBER_C: f64 = 3.0;

/// The power ratio's trend is its Theil–Sen slope over the points of the last this many
/// seconds (its window forgets in half an hour: a day's trend would mostly be healthy).
const POWER_TREND_S: f64 = 3.0 * 3600.0;

/// The forgetting time constant (s) of the power-against-energy ratio.
const RATIO_TAU_S: f64 = 1800.0;

/// °C worse (or, for the power reading, five percentage points) than said before that a
/// degradation must be to be said again.
const RESAY_STEP: f64 = 1.0;

/// A first-order thermal lag of the power read: two of them, fast and slow.
#[derive(Debug, Clone, Default)]
pub struct PowerLags {
    last_t: Option<f64>,
    fast: f64,
    slow: f64,
}

impl PowerLags {
    /// Feeds the power read at `t`; returns the two lagged powers (fast, slow).
    pub fn push(&mut self, t: f64, power_w: f64) -> (f64, f64) {
        match self.last_t {
            Some(last) => {
                let dt = (t - last).clamp(0.0, 60.0);
                self.fast += (1.0 - (-dt / FAST_TAU_S).exp()) * (power_w - self.fast);
                self.slow += (1.0 - (-dt / SLOW_TAU_S).exp()) * (power_w - self.slow);
            }
            None => {
                self.fast = power_w;
                self.slow = power_w;
            }
        }
        self.last_t = Some(t);
        (self.fast, self.slow)
    }
}

/// One temperature's regression on the other signals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SensorFit {
    /// The coefficients, one per [`FEATURES`].
    pub coef: [f64; 6],
    /// The residuals' spread on the healthy history (MAD as a standard deviation), °C.
    pub sigma: f64,
    /// The temperature at the healthy history's steady full load (median), °C.
    pub at_full_c: f64,
}

/// What the healthy history teaches about heat and power, frozen once trained.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThermalReference {
    /// The GPU's typical full load, W (the 95th percentile of the power read).
    pub full_w: f64,
    /// Utilization (GPU, memory) and SM clock used where a sample lacks them (medians).
    fill: [f64; 3],
    /// The die's and the memory's regressions (`None` where never read).
    pub fits: [Option<SensorFit>; 2],
    /// The power read integrated over the energy counter's growth, on the healthy history.
    pub energy_ratio: Option<f64>,
}

/// Solves `a·x = b` (Gaussian elimination with partial pivoting); `None` when singular.
fn solve<const N: usize>(mut a: [[f64; N]; N], mut b: [f64; N]) -> Option<[f64; N]> {
    for col in 0..N {
        let pivot = (col..N).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col].abs() < 1e-12 {
            return None;
        }
        a.swap(col, pivot);
        b.swap(col, pivot);
        let (pivot_row, pivot_b) = (a[col], b[col]);
        for (line, rhs) in a.iter_mut().zip(b.iter_mut()).skip(col + 1) {
            let f = line[col] / pivot_row[col];
            for (x, p) in line.iter_mut().zip(pivot_row).skip(col) {
                *x -= f * p;
            }
            *rhs -= f * pivot_b;
        }
    }
    let mut x = [0.0; N];
    for row in (0..N).rev() {
        let rest: f64 = (row + 1..N).map(|k| a[row][k] * x[k]).sum();
        x[row] = (b[row] - rest) / a[row][row];
    }
    Some(x)
}

impl ThermalReference {
    /// The feature row of a sample whose lagged powers are `(fast, slow)`.
    pub fn row(&self, s: &Sample, (fast, slow): (f64, f64)) -> [f64; 6] {
        [
            1.0,
            fast / self.full_w,
            slow / self.full_w,
            fast / self.full_w * s.util_mem_pct.unwrap_or(self.fill[1]) / 100.0,
            s.util_mem_pct.unwrap_or(self.fill[1]) / 100.0,
            s.sm_clock_mhz.unwrap_or(self.fill[2]) / 2000.0,
        ]
    }

    /// The temperature (0: die, 1: memory) the healthy history predicts for `row`.
    pub fn predict(&self, sensor: usize, row: &[f64; 6]) -> Option<f64> {
        let fit = self.fits[sensor].as_ref()?;
        Some(fit.coef.iter().zip(row).map(|(c, x)| c * x).sum())
    }

    /// Learns the reference from healthy history (in time order); `None` when the history has
    /// no power or no load to learn from (its power never doubled).
    pub fn fit(history: &[Sample]) -> Option<ThermalReference> {
        let powers: Vec<f64> = history.iter().filter_map(|s| s.power_w).collect();
        let full_w = quantile(&powers, 0.95)?;
        let idle_w = quantile(&powers, 0.05)?;
        if full_w.is_nan() || full_w <= 2.0 * idle_w.max(1.0) {
            return None;
        }
        let fill_of = |pick: fn(&Sample) -> Option<f64>, default: f64| {
            median(&history.iter().filter_map(pick).collect::<Vec<_>>()).unwrap_or(default)
        };
        let mut reference = ThermalReference {
            full_w,
            fill: [
                fill_of(|s| s.util_gpu_pct, 0.0),
                fill_of(|s| s.util_mem_pct, 0.0),
                fill_of(|s| s.sm_clock_mhz, 0.0),
            ],
            fits: [None, None],
            energy_ratio: None,
        };
        let mut lags = PowerLags::default();
        let rows: Vec<(&Sample, [f64; 6], (f64, f64))> = history
            .iter()
            .filter_map(|s| {
                let lagged = lags.push(s.t, s.power_w?);
                Some((s, reference.row(s, lagged), lagged))
            })
            .collect();
        for (sensor, pick) in [
            (0, (|s: &Sample| s.temp_gpu_c) as fn(&Sample) -> Option<f64>),
            (1, |s: &Sample| s.temp_mem_c),
        ] {
            let points: Vec<(&[f64; 6], f64, (f64, f64))> = rows
                .iter()
                .filter_map(|(s, row, lagged)| Some((row, pick(s)?, *lagged)))
                .collect();
            if points.len() < 30 {
                continue;
            }
            let mut a = [[0.0; 6]; 6];
            let mut b = [0.0; 6];
            for (row, y, _) in &points {
                for i in 0..6 {
                    for j in 0..6 {
                        a[i][j] += row[i] * row[j];
                    }
                    b[i] += row[i] * y;
                }
            }
            // A small ridge (not on the intercept): features that never moved in the history
            // (a clock held, no memory traffic) keep a coefficient near zero.
            let n = points.len() as f64;
            for (i, line) in a.iter_mut().enumerate().skip(1) {
                line[i] += 1e-3 * n;
            }
            let Some(coef) = solve(a, b) else { continue };
            let predict = |row: &[f64; 6]| coef.iter().zip(row).map(|(c, x)| c * x).sum::<f64>();
            let residuals: Vec<f64> = points.iter().map(|(row, y, _)| y - predict(row)).collect();
            let steady_full: Vec<f64> = points
                .iter()
                .filter(|(_, _, (fast, slow))| *fast >= 0.9 * full_w && *slow >= 0.8 * full_w)
                .map(|(_, y, _)| *y)
                .collect();
            let full_row = reference.row(
                &Sample {
                    util_gpu_pct: Some(100.0),
                    ..Sample::default()
                },
                (full_w, full_w),
            );
            reference.fits[sensor] = Some(SensorFit {
                coef,
                sigma: mad_sigma(&residuals).unwrap_or(0.0),
                at_full_c: median(&steady_full).unwrap_or_else(|| predict(&full_row)),
            });
        }
        reference.energy_ratio = {
            let mut ratio = PowerRatio::default();
            for s in history {
                ratio.push(s);
            }
            ratio.value(60.0)
        };
        Some(reference)
    }
}

/// The power read against the energy counter's growth, with exponential forgetting.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct PowerRatio {
    last_t: Option<f64>,
    last_energy: Option<(f64, f64)>,
    /// Joules read (power × time) since the last energy reading.
    read_j: f64,
    sum_read: f64,
    sum_counted: f64,
    /// Seconds of counter readings in the sums (forgotten as they are).
    weight_s: f64,
}

impl PowerRatio {
    fn push(&mut self, s: &Sample) {
        let dt = self.last_t.map_or(0.0, |last| s.t - last);
        self.last_t = Some(s.t);
        if !(0.0..=60.0).contains(&dt) {
            self.last_energy = None;
            self.read_j = 0.0;
            return;
        }
        if let Some(p) = s.power_w {
            self.read_j += p * dt;
        }
        let Some(energy) = s.read_now(Signal::Energy) else {
            return;
        };
        if let Some((t0, e0)) = self.last_energy {
            let span = s.t - t0;
            let counted_j = (energy - e0) / 1000.0;
            if span > 0.0 && span <= 120.0 && counted_j > 0.0 {
                let keep = (-span / RATIO_TAU_S).exp();
                self.sum_read = keep * self.sum_read + self.read_j;
                self.sum_counted = keep * self.sum_counted + counted_j;
                self.weight_s = keep * self.weight_s + span;
            }
        }
        self.last_energy = Some((s.t, energy));
        self.read_j = 0.0;
    }

    /// The ratio, once `min_s` seconds of counter readings weigh in.
    fn value(&self, min_s: f64) -> Option<f64> {
        (self.weight_s >= min_s && self.sum_counted > 0.0).then(|| self.sum_read / self.sum_counted)
    }

    fn restart_timing(&mut self) {
        self.last_t = None;
        self.last_energy = None;
        self.read_j = 0.0;
    }
}

/// One point of the online fit: the GPU's offset (`a`) and extra heat at full load (`b`) at
/// an elapsed time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Seconds of the GPU's samples since the watch started (the time between samples; a gap
    /// or a clock step the monitor saw counts nothing).
    pub elapsed_s: f64,
    /// °C at no load.
    pub a: f64,
    /// °C more at full load.
    pub b: f64,
}

/// The online fit of one temperature's residual: `r = a + b_fast·u_fast + b_slow·u_slow`,
/// with `u` the power through the die's fast and the heat sink's slow lag over the full
/// load; `b = b_fast + b_slow` is the extra heat at a steady full load.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Correction {
    s: [[f64; 3]; 3],
    z: [f64; 3],
    theta: [f64; 3],
    points: VecDeque<Point>,
    /// This GPU's frozen reference (`a`, `b`), once taken.
    baseline: Option<[f64; 2]>,
}

impl Correction {
    fn new() -> Correction {
        Correction {
            s: [[0.0; 3]; 3],
            z: [0.0; 3],
            theta: [0.0; 3],
            points: VecDeque::new(),
            baseline: None,
        }
    }

    /// The offset at no load (`a`) and the extra heat at a steady full load (`b`).
    fn ab(&self) -> (f64, f64) {
        (self.theta[0], self.theta[1] + self.theta[2])
    }

    fn update(&mut self, dt: f64, (fast, slow): (f64, f64), r: f64) {
        let keep = (-dt / TAU_S).exp();
        let phi = [1.0, fast, slow];
        // Huber: a residual far from the fit pulls as one [`HUBER_C`] away (a room that
        // changed is still followed, a few samples at a time).
        let fitted: f64 = self.theta.iter().zip(&phi).map(|(t, x)| t * x).sum();
        let r = fitted + (r - fitted).clamp(-HUBER_C, HUBER_C);
        for i in 0..3 {
            for j in 0..3 {
                self.s[i][j] = keep * self.s[i][j] + phi[i] * phi[j];
            }
            self.z[i] = keep * self.z[i] + phi[i] * r;
        }
        let mut a = self.s;
        let mut b = self.z;
        for i in 0..3 {
            a[i][i] += PRIOR[i];
            b[i] += PRIOR[i] * self.theta[i];
        }
        if let Some(theta) = solve(a, b) {
            self.theta = theta;
        }
    }

    /// The weighted variance of `u` in the fit's window.
    fn u_variance(&self) -> f64 {
        let n = self.s[0][0];
        if n <= 0.0 {
            return 0.0;
        }
        let mean = self.s[0][1] / n;
        self.s[1][1] / n - mean * mean
    }

    /// Effective samples in the fit's window.
    fn weight(&self) -> f64 {
        self.s[0][0]
    }

    /// The Theil–Sen slope of `b` (°C per second) since it departed from `b0`.
    fn trend(&self, b0: f64) -> Option<f64> {
        let series: Vec<(f64, f64)> = self.points.iter().map(|p| (p.elapsed_s, p.b)).collect();
        departing_trend(&series, b0)
    }
}

/// The Theil–Sen slope (per second) of a series of points since it last sat within
/// [`DEPARTED_C`] of `base` — at least over the last [`MIN_TREND_S`], at most over the last
/// [`TREND_S`] — so that a drift that began lately is not averaged with the flat days before
/// it. `None` with fewer than [`BASELINE_POINTS`] points in that window.
fn departing_trend(series: &[(f64, f64)], base: f64) -> Option<f64> {
    let &(last, _) = series.last()?;
    let departed = series
        .iter()
        .rev()
        .find(|(_, v)| (v - base).abs() < DEPARTED_C)
        .map_or(last - TREND_S, |p| p.0);
    let from = departed.min(last - MIN_TREND_S).max(last - TREND_S);
    let window: Vec<(f64, f64)> = series.iter().filter(|p| p.0 >= from).copied().collect();
    (window.len() >= BASELINE_POINTS)
        .then(|| theil_sen(&window))
        .flatten()
}

/// A condition of the watch, held over points and said again only when worse.
#[derive(Debug, Clone, Default)]
struct Held {
    points: usize,
    said: Option<(f64, Severity)>,
}

impl Held {
    /// Whether the condition, `excess` (°C or percentage points) and `severity` at this
    /// point, is said now.
    fn speak(&mut self, holds: bool, excess: f64, severity: Severity) -> bool {
        if !holds {
            self.points = 0;
            self.said = None;
            return false;
        }
        self.points += 1;
        if self.points < HOLD_POINTS {
            return false;
        }
        let speak = match self.said {
            None => true,
            Some((said, was)) => excess >= said + RESAY_STEP || severity > was,
        };
        if speak {
            let said = self.said.map_or(excess, |(s, _)| s.max(excess));
            self.said = Some((said, severity));
        }
        speak
    }
}

/// The two temperatures and their limits: (signal, limit °C), die first.
type Sensors = [(Signal, f64); 2];

/// One GPU's slow-degradation watch: the online fits against the frozen reference.
#[derive(Debug, Clone)]
pub struct DriftWatch {
    reference: ThermalReference,
    sensors: Sensors,
    lags: PowerLags,
    /// The last two power readings (a steady load: the reading moved little over them).
    last_powers: [f64; 2],
    corrections: [Correction; 2],
    ratio: PowerRatio,
    /// Per point: the power ratio against the healthy history's (fraction), for its trend.
    ratio_points: VecDeque<(f64, f64)>,
    last_t: Option<f64>,
    elapsed_s: f64,
    learned_s: f64,
    next_point_s: f64,
    quiet_until: Option<f64>,
    cooling: [Held; 2],
    sensor: Held,
    power: Held,
    power_drifting: bool,
}

/// Why a watch kept from an earlier run was not taken up.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    /// The kept state could not be read.
    #[error("the kept degradation watch could not be read: {0}")]
    Parse(#[from] serde_json::Error),
    /// It was learned against another healthy history (or with one where this run has none,
    /// or the other way round).
    #[error("the kept degradation watch was learned against another healthy history")]
    OtherHistory,
}

/// What a [`DriftWatch`] keeps across runs (`pog monitor run` and the agent keep it in their
/// history): the reference, the online fits with their points and this GPU's frozen
/// reference, the power ratio's sums and how long it has watched. Not the times of the last
/// samples (the next run's clock is another), nor what was said (a degradation still there
/// is said once more after a restart).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DriftState {
    reference: ThermalReference,
    self_trained: bool,
    corrections: [Correction; 2],
    ratio: PowerRatio,
    ratio_points: VecDeque<(f64, f64)>,
    elapsed_s: f64,
    learned_s: f64,
    next_point_in_s: f64,
}

impl DriftState {
    /// Seconds of samples the watch had seen.
    pub fn elapsed_s(&self) -> f64 {
        self.elapsed_s
    }
}

impl DriftWatch {
    /// A watch against `reference`, with the die's and the memory's limits (°C).
    pub fn new(reference: ThermalReference, limits: [f64; 2]) -> DriftWatch {
        DriftWatch {
            reference,
            sensors: [(Signal::TempGpu, limits[0]), (Signal::TempMem, limits[1])],
            lags: PowerLags::default(),
            last_powers: [f64::NAN; 2],
            corrections: [Correction::new(), Correction::new()],
            ratio: PowerRatio::default(),
            ratio_points: VecDeque::new(),
            last_t: None,
            elapsed_s: 0.0,
            learned_s: 0.0,
            next_point_s: POINT_S,
            quiet_until: None,
            cooling: [Held::default(), Held::default()],
            sensor: Held::default(),
            power: Held::default(),
            power_drifting: false,
        }
    }

    /// The online fit's latest points per temperature (die, memory), for inspection.
    pub fn points(&self, sensor: usize) -> impl Iterator<Item = &Point> {
        self.corrections[sensor].points.iter()
    }

    /// The power read's departure from the energy counter's growth (a fraction, against the
    /// healthy history's ratio) at the points of the last day: (elapsed s, departure).
    pub fn power_departures(&self) -> impl Iterator<Item = &(f64, f64)> {
        self.ratio_points.iter()
    }

    /// This GPU's frozen reference (`a`, `b`) per temperature, once taken.
    pub fn baseline(&self, sensor: usize) -> Option<[f64; 2]> {
        self.corrections[sensor].baseline
    }

    /// What to keep across runs ([`DriftState`]).
    pub fn state(&self, self_trained: bool) -> DriftState {
        DriftState {
            reference: self.reference.clone(),
            self_trained,
            corrections: self.corrections.clone(),
            ratio: self.ratio.clone(),
            ratio_points: self.ratio_points.clone(),
            elapsed_s: self.elapsed_s,
            learned_s: self.learned_s,
            next_point_in_s: (self.next_point_s - self.elapsed_s).max(0.0),
        }
    }

    /// A watch that goes on from a state an earlier run kept, with the die's and the memory's
    /// limits.
    pub fn resume(state: DriftState, limits: [f64; 2]) -> DriftWatch {
        let mut watch = DriftWatch::new(state.reference, limits);
        watch.corrections = state.corrections;
        watch.ratio = state.ratio;
        watch.ratio.restart_timing();
        watch.ratio_points = state.ratio_points;
        watch.elapsed_s = state.elapsed_s;
        watch.learned_s = state.learned_s;
        watch.next_point_s = state.elapsed_s + state.next_point_in_s;
        watch
    }

    /// Forgets the times (after a gap in the samples or a clock step), keeping what was
    /// learned.
    pub fn restart_timing(&mut self) {
        self.lags = PowerLags::default();
        self.last_powers = [f64::NAN; 2];
        self.ratio.restart_timing();
        self.last_t = None;
    }

    /// Feeds one sample; `suspect` is true when a thermal, sensor or throttle rule spoke at it
    /// (the online fit then learns nothing for [`QUIET_S`]). Returns the findings of a point
    /// of the fit, when one is taken at this sample.
    pub fn push(&mut self, s: &Sample, suspect: bool) -> Vec<Finding> {
        let dt = self.last_t.map_or(0.0, |last| (s.t - last).max(0.0));
        self.last_t = Some(s.t);
        self.elapsed_s += dt;
        if suspect {
            self.quiet_until = Some(self.elapsed_s + QUIET_S);
        }
        self.ratio.push(s);
        let Some(power) = s.power_w else {
            return Vec::new();
        };
        let lagged = self.lags.push(s.t, power);
        // At a steady load only (the power read is an average over the last second, the die
        // follows within it: a load step leaves residuals of ±10 °C for a sample or two).
        let step = STEADY_FRACTION * self.reference.full_w;
        let steady = self.last_powers.iter().all(|p| (p - power).abs() <= step);
        self.last_powers = [self.last_powers[1], power];
        let learn = self.quiet_until.is_none_or(|q| self.elapsed_s >= q) && dt > 0.0 && steady;
        if learn {
            let row = self.reference.row(s, lagged);
            let u = (
                lagged.0 / self.reference.full_w,
                lagged.1 / self.reference.full_w,
            );
            let mut any = false;
            for (i, (signal, _)) in self.sensors.iter().enumerate() {
                let (Some(temp), Some(predicted)) =
                    (s.signal(*signal), self.reference.predict(i, &row))
                else {
                    continue;
                };
                self.corrections[i].update(dt.min(10.0), u, temp - predicted);
                any = true;
            }
            if any {
                self.learned_s += dt.min(10.0);
            }
        }
        if self.elapsed_s < self.next_point_s {
            return Vec::new();
        }
        self.next_point_s = self.elapsed_s + POINT_S;
        self.point(s)
    }

    /// Takes a point of each fit (where the load varied enough) and judges the drifts.
    fn point(&mut self, s: &Sample) -> Vec<Finding> {
        let elapsed_s = self.elapsed_s;
        let ready = self.learned_s >= TAU_S;
        for c in &mut self.corrections {
            if !ready || c.u_variance() < MIN_U_VARIANCE || c.weight() < 100.0 {
                continue;
            }
            let (a, b) = c.ab();
            c.points.push_back(Point { elapsed_s, a, b });
            if c.points.len() > POINTS_KEPT {
                c.points.pop_front();
            }
            if c.baseline.is_none() && c.points.len() >= BASELINE_POINTS {
                let first = c.points.iter().take(BASELINE_POINTS);
                let a: Vec<f64> = first.clone().map(|p| p.a).collect();
                let b: Vec<f64> = first.map(|p| p.b).collect();
                c.baseline = Some([median(&a).unwrap_or(0.0), median(&b).unwrap_or(0.0)]);
            }
        }
        let mut out = Vec::new();
        self.power_point(elapsed_s, s, &mut out);
        self.cooling_point(&mut out);
        self.sensor_point(&mut out);
        out
    }

    /// The power read against the energy counter's growth.
    fn power_point(&mut self, elapsed_s: f64, s: &Sample, out: &mut Vec<Finding>) {
        let (Some(now), Some(healthy)) = (self.ratio.value(600.0), self.reference.energy_ratio)
        else {
            self.power.speak(false, 0.0, Severity::Warning);
            self.power_drifting = false;
            return;
        };
        let off = now / healthy - 1.0;
        self.ratio_points.push_back((elapsed_s, off));
        while self
            .ratio_points
            .front()
            .is_some_and(|(t, _)| elapsed_s - t > TREND_S)
        {
            self.ratio_points.pop_front();
        }
        let holds = off.abs() >= POWER_MIN_FRACTION;
        self.power_drifting = holds;
        // Said again every [`RESAY_STEP`] × 5 percentage points worse.
        let pct = 100.0 * off.abs();
        if !self.power.speak(holds, pct / 5.0, Severity::Warning) {
            return;
        }
        let recent: Vec<(f64, f64)> = self
            .ratio_points
            .iter()
            .filter(|(t, _)| elapsed_s - t <= POWER_TREND_S)
            .copied()
            .collect();
        let trend = (recent.len() >= 3)
            .then(|| theil_sen(&recent))
            .flatten()
            .map(|per_s| per_s * 3600.0);
        let mut signals = BTreeMap::new();
        signals.insert(
            "power_ratio".into(),
            SignalChange::against(
                now,
                healthy,
                format!(
                    "power read over the energy counter's growth, over the last {:.0} min (forgetting); healthy history's",
                    RATIO_TAU_S / 60.0
                ),
            ),
        );
        let mut message = format!(
            "power_w reads {pct:.1} % {} the energy counter's growth over the last {:.0} min (healthy: {:.3}, now {now:.3})",
            if off < 0.0 { "below" } else { "above" },
            RATIO_TAU_S / 60.0,
            healthy
        );
        if let Some(rate) = trend.filter(|r| r.abs() > 1e-6) {
            signals.insert(
                "power_ratio_trend_per_h".into(),
                SignalChange::value(rate, "Theil–Sen slope of the ratio's departure, per hour"),
            );
            message.push_str(&format!(", moving {:+.2} % an hour", 100.0 * rate));
        }
        message.push_str(&format!(
            " at {:.0} W read: the power sensor or its reading path drifts slowly; the temperatures are not judged against it meanwhile",
            s.power_w.unwrap_or(0.0)
        ));
        out.push(Finding {
            kind: AlertKind::Degradation,
            key: "sensor_power".into(),
            severity: Severity::Warning,
            signals,
            message,
        });
    }

    /// The extra heat at full load grown over this GPU's reference.
    fn cooling_point(&mut self, out: &mut Vec<Finding>) {
        let grown: [Option<(f64, f64)>; 2] = [0, 1].map(|i| {
            let c = &self.corrections[i];
            let [a0, b0] = c.baseline?;
            let last = c.points.back()?;
            // A point taken now (not one left from before the load stopped varying).
            (self.elapsed_s - last.elapsed_s < 1.0).then_some((last.b - b0, last.a - a0))
        });
        let growth = grown.map(|g| g.map_or(0.0, |(db, _)| db));
        let over = [0, 1].map(|i| growth[i] >= COOLING_MIN_C[i]);
        for i in 0..2 {
            let Some((db, da)) = grown[i] else {
                self.cooling[i].speak(false, 0.0, Severity::Warning);
                continue;
            };
            let holds = over[i] && !self.power_drifting;
            let (signal, limit) = self.sensors[i];
            let c = &self.corrections[i];
            let last = *c.points.back().expect("a point");
            let at_full = self.reference.fits[i].as_ref().map_or(0.0, |f| f.at_full_c);
            let full_now = at_full + last.a + last.b;
            let trend_per_h = c
                .trend(c.baseline.map_or(0.0, |b| b[1]))
                .map(|v| v * 3600.0);
            let eta_h = trend_per_h
                .filter(|r| *r > 1e-3)
                .map(|r| ((limit - full_now) / r).max(0.0));
            let severity = if full_now >= limit - 3.0 || eta_h.is_some_and(|h| h < 24.0) {
                Severity::Critical
            } else {
                Severity::Warning
            };
            // Said by the die when it rose (one alert for a fan or pump), by the memory only
            // when the die did not.
            let other_rose = growth[1 - i] >= BOTH_FRACTION * db;
            if i == 1 && over[0] {
                self.cooling[i].speak(false, 0.0, severity);
                continue;
            }
            if !self.cooling[i].speak(holds, db, severity) {
                continue;
            }
            let since_h = c
                .points
                .get(BASELINE_POINTS - 1)
                .map_or(0.0, |p| (last.elapsed_s - p.elapsed_s) / 3600.0);
            let (key, what) = match (i, other_rose) {
                // The other temperature not read (or its fit not told apart): either.
                _ if grown[1 - i].is_none() => (
                    "cooling",
                    format!(
                        "{} hotter at load ({} not known): the cooling or the thermal interface is losing capacity",
                        signal.name(),
                        self.sensors[1 - i].0.name()
                    ),
                ),
                (_, true) => (
                    "cooling",
                    "both temperatures hotter at load: the cooling (fan, pump, coolant, airflow) is losing capacity".to_string(),
                ),
                (0, false) => (
                    "cooling_temp_gpu",
                    "the die alone hotter at load: its thermal interface (paste, cold plate contact) is degrading".to_string(),
                ),
                _ => (
                    "cooling_temp_mem",
                    "the memory alone hotter at load: its thermal pads or cold plate contact are degrading".to_string(),
                ),
            };
            let mut signals = BTreeMap::new();
            signals.insert(
                format!("{}_at_full_load_c", signal.name()),
                SignalChange::against(
                    full_now,
                    at_full + last.a + c.baseline.map_or(0.0, |b| b[1]),
                    format!(
                        "at {:.0} W (typical full load), now against this GPU's reference {}",
                        self.reference.full_w,
                        hours(since_h)
                    ),
                ),
            );
            signals.insert(
                format!("{}_idle_offset_c", signal.name()),
                SignalChange::value(da, "offset at no load moved since the reference (the room)"),
            );
            if let Some(rate) = trend_per_h {
                signals.insert(
                    format!("{}_trend_c_per_h", signal.name()),
                    SignalChange::value(
                        rate,
                        format!(
                            "Theil–Sen slope of the extra heat at full load over the last {:.0} h",
                            (TREND_S / 3600.0).min(
                                (last.elapsed_s - c.points.front().map_or(0.0, |p| p.elapsed_s))
                                    / 3600.0
                            )
                        ),
                    ),
                );
            }
            let mut message = format!(
                "{} runs {db:.1} °C hotter at equal power at full load ({:.0} W) than this GPU's reference {} (its offset at no load, the room, moved {da:+.1} °C meanwhile)",
                signal.name(),
                self.reference.full_w,
                hours(since_h),
            );
            match trend_per_h {
                Some(rate) if rate > 1e-3 => {
                    message.push_str(&format!(", rising {} at equal power", rate_words(rate)))
                }
                _ => message.push_str(", not rising now"),
            }
            message.push_str(&format!(": {what}"));
            match eta_h {
                Some(h) => {
                    signals.insert(
                        "time_to_limit_s".into(),
                        SignalChange::value(
                            h * 3600.0,
                            format!(
                                "to the {limit:.0} °C limit at full load ({:.0} W) at this rate",
                                self.reference.full_w
                            ),
                        ),
                    );
                    message.push_str(&format!(
                        "; at full load {full_now:.1} °C now, {limit:.0} °C in about {}",
                        duration(h * 3600.0)
                    ))
                }
                None => message.push_str(&format!(
                    "; at full load {full_now:.1} °C now ({limit:.0} °C limit)"
                )),
            }
            out.push(Finding {
                kind: AlertKind::Degradation,
                key: key.into(),
                severity,
                signals,
                message,
            });
        }
    }

    /// One temperature's offset moving away from the other's.
    fn sensor_point(&mut self, out: &mut Vec<Finding>) {
        let moved: [Option<(f64, Point)>; 2] = [0, 1].map(|i| {
            let c = &self.corrections[i];
            let [a0, _] = c.baseline?;
            let last = *c.points.back()?;
            (self.elapsed_s - last.elapsed_s < 1.0).then_some((last.a - a0, last))
        });
        let [Some((da0, _)), Some((da1, _))] = moved else {
            self.sensor.speak(false, 0.0, Severity::Warning);
            return;
        };
        let apart = da0 - da1;
        // With two thermometers, which one drifts cannot be told (the room moves both): the
        // one that reads higher against the other is the one heading for its limit.
        let i = if apart >= 0.0 { 0 } else { 1 };
        let (signal, limit) = self.sensors[i];
        let (other, _) = self.sensors[1 - i];
        let last = *self.corrections[i].points.back().expect("a point");
        let at_full = self.reference.fits[i].as_ref().map_or(0.0, |f| f.at_full_c);
        let full_now = at_full + last.a + last.b;
        // The two offsets' difference at the points both fits took.
        let (mine_c, theirs_c) = (&self.corrections[i], &self.corrections[1 - i]);
        let apart_series: Vec<(f64, f64)> = mine_c
            .points
            .iter()
            .filter_map(|p| {
                let q = theirs_c
                    .points
                    .iter()
                    .find(|q| q.elapsed_s == p.elapsed_s)?;
                Some((p.elapsed_s, p.a - q.a))
            })
            .collect();
        let base = mine_c.baseline.map_or(0.0, |b| b[0]) - theirs_c.baseline.map_or(0.0, |b| b[0]);
        let trend_per_h = departing_trend(&apart_series, base).map(|v| v * 3600.0);
        let eta_h = trend_per_h
            .filter(|r| *r > 1e-3)
            .map(|r| ((limit - full_now) / r).max(0.0));
        let severity = if eta_h.is_some_and(|h| h < 24.0) {
            Severity::Critical
        } else {
            Severity::Warning
        };
        if !self
            .sensor
            .speak(apart.abs() >= SENSOR_MIN_C, apart.abs(), severity)
        {
            return;
        }
        let (mine, theirs) = if i == 0 { (da0, da1) } else { (da1, da0) };
        let mut signals = BTreeMap::new();
        signals.insert(
            format!("{}_against_{}_c", signal.name(), other.name()),
            SignalChange::against(
                mine - theirs,
                0.0,
                "the two offsets' difference, against this GPU's reference (the room moves both alike)",
            ),
        );
        let mut message = format!(
            "{} reads {:.1} °C higher against {} than at this GPU's reference (offsets {mine:+.1} and {theirs:+.1} °C), the same at idle and at load",
            signal.name(),
            apart.abs(),
            other.name(),
        );
        if let Some(rate) = trend_per_h.filter(|r| r.abs() > 1e-3) {
            signals.insert(
                format!("{}_against_{}_c_per_h", signal.name(), other.name()),
                SignalChange::value(rate, "Theil–Sen slope of the two offsets' difference"),
            );
            message.push_str(&format!(", moving {}", rate_words(rate)));
        }
        message.push_str(": one of the two temperature sensors drifts (the room moves both alike, a cooling fault grows with the load)");
        if let Some(h) = eta_h {
            signals.insert(
                "time_to_limit_s".into(),
                SignalChange::value(
                    h * 3600.0,
                    format!(
                        "until {} reads the {limit:.0} °C limit at full load, if it is the one drifting",
                        signal.name()
                    ),
                ),
            );
            message.push_str(&format!(
                "; if it is {}, it reads {full_now:.1} °C at full load now and {limit:.0} °C (where the GPU slows down) in about {}",
                signal.name(),
                duration(h * 3600.0)
            ));
        }
        out.push(Finding {
            kind: AlertKind::Degradation,
            key: "sensor_temp".into(),
            severity,
            signals,
            message,
        });
    }
}

/// Seconds of a GPU's own samples (at which no rule spoke) a watch without a healthy
/// history learns its reference from, once its power at least doubled in them.
pub const SELF_TRAIN_S: f64 = 3600.0;

/// Samples kept for self-training: past this, every other one is dropped.
const SELF_TRAIN_KEEP: usize = 8192;

/// The slow-degradation watch of one GPU, with or without a healthy history: against the
/// [`ThermalReference`] trained on it, or (the agent, `pog monitor run` without `--train`)
/// against one learned from the GPU's own first [`SELF_TRAIN_S`] of samples at which no
/// thermal, sensor or throttle rule spoke (a GPU that fails from its first hour is taken as
/// its own normal: the rules are what catches that).
#[derive(Debug, Clone)]
pub struct Degradation {
    limits: [f64; 2],
    /// The GPU's own samples while the reference is learned from them.
    learning: Vec<Sample>,
    learning_s: f64,
    last_t: Option<f64>,
    next_try_s: f64,
    quiet_until: Option<f64>,
    watch: Option<DriftWatch>,
    self_trained: bool,
}

impl Degradation {
    /// A watch against the reference the healthy history taught, or where there is none, one
    /// that learns it from the GPU's own first hour; with the die's and the memory's limits.
    pub fn new(reference: Option<ThermalReference>, limits: [f64; 2]) -> Degradation {
        Degradation {
            limits,
            learning: Vec::new(),
            learning_s: 0.0,
            last_t: None,
            next_try_s: SELF_TRAIN_S,
            quiet_until: None,
            self_trained: reference.is_none(),
            watch: reference.map(|r| DriftWatch::new(r, limits)),
        }
    }

    /// The watch, once it has a reference.
    pub fn watch(&self) -> Option<&DriftWatch> {
        self.watch.as_ref()
    }

    /// Seconds of samples the watch has seen, once it has a reference.
    pub fn elapsed_s(&self) -> Option<f64> {
        Some(self.watch.as_ref()?.elapsed_s)
    }

    /// What to keep across runs, once the watch has a reference.
    pub fn state(&self) -> Option<DriftState> {
        Some(self.watch.as_ref()?.state(self.self_trained))
    }

    /// Goes on from a state an earlier run kept ([`Degradation::state`]): taken where it was
    /// learned against the same healthy history (or, without one, from the GPU's own first
    /// hour then and now).
    pub fn resume(&mut self, state: DriftState) -> Result<(), ResumeError> {
        let same = match (&self.watch, self.self_trained) {
            (_, true) => state.self_trained,
            (Some(watch), false) => !state.self_trained && watch.reference == state.reference,
            (None, false) => false,
        };
        if !same {
            return Err(ResumeError::OtherHistory);
        }
        self.watch = Some(DriftWatch::resume(state, self.limits));
        self.learning = Vec::new();
        Ok(())
    }

    /// Whether the reference was (or is being) learned from the GPU's own samples.
    pub fn self_trained(&self) -> bool {
        self.self_trained
    }

    /// Forgets the times (after a gap in the samples or a clock step).
    pub fn restart_timing(&mut self) {
        self.last_t = None;
        if let Some(watch) = self.watch.as_mut() {
            watch.restart_timing();
        }
    }

    /// Feeds one sample ([`DriftWatch::push`]); while the reference is learned, keeps the
    /// sample if no rule spoke in the last [`QUIET_S`] and tries to learn every [`POINT_S`]
    /// once [`SELF_TRAIN_S`] of them are in.
    pub fn push(&mut self, s: &Sample, suspect: bool) -> Vec<Finding> {
        if let Some(watch) = self.watch.as_mut() {
            return watch.push(s, suspect);
        }
        let dt = self
            .last_t
            .map_or(0.0, |last| (s.t - last).clamp(0.0, 10.0));
        self.last_t = Some(s.t);
        if suspect {
            self.quiet_until = Some(self.learning_s + QUIET_S);
        }
        let quiet = self.quiet_until.is_none_or(|q| self.learning_s >= q);
        if s.power_w.is_none() || s.temp_gpu_c.is_none() {
            return Vec::new();
        }
        self.learning_s += dt;
        if quiet {
            self.learning.push(s.clone());
            if self.learning.len() > SELF_TRAIN_KEEP {
                let mut keep = false;
                self.learning.retain(|_| {
                    keep = !keep;
                    keep
                });
            }
        }
        if self.learning_s >= self.next_try_s {
            self.next_try_s = self.learning_s + POINT_S;
            if let Some(reference) = ThermalReference::fit(&self.learning) {
                self.watch = Some(DriftWatch::new(reference, self.limits));
                self.learning = Vec::new();
            }
        }
        Vec::new()
    }
}

/// A rate of °C per hour in words: per hour, or per day when slower than 0.1 °C an hour.
fn rate_words(per_h: f64) -> String {
    if per_h.abs() < 0.1 {
        format!("{:+.2} °C a day", per_h * 24.0)
    } else {
        format!("{per_h:+.2} °C an hour")
    }
}

/// "n h ago" or "n days ago".
fn hours(h: f64) -> String {
    if h < 48.0 {
        format!("{h:.1} h ago")
    } else {
        format!("{:.1} days ago", h / 24.0)
    }
}

/// A duration in seconds as minutes, hours or days.
fn duration(s: f64) -> String {
    if s < 3600.0 {
        format!("{:.0} min", s / 60.0)
    } else if s < 2.0 * 86_400.0 {
        format!("{:.1} h", s / 3600.0)
    } else {
        format!("{:.0} days", s / 86_400.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::parse_trace;

    fn healthy() -> Vec<Sample> {
        parse_trace(include_str!("../tests/data/h200-healthy.csv")).unwrap()
    }

    #[test]
    fn the_reference_predicts_another_cards_temperatures_within_a_few_degrees() {
        let reference = ThermalReference::fit(&healthy()).expect("a reference");
        assert!(
            (650.0..720.0).contains(&reference.full_w),
            "{}",
            reference.full_w
        );
        let die = reference.fits[0].as_ref().unwrap();
        assert!(die.sigma < 1.5, "{die:?}");
        assert!((61.0..65.0).contains(&die.at_full_c), "{die:?}");
        let ratio = reference.energy_ratio.unwrap();
        assert!((ratio - 1.0).abs() < 0.01, "{ratio}");
        for other in [
            include_str!("../tests/data/h200-healthy-2.csv"),
            include_str!("../tests/data/h200-healthy-3.csv"),
        ] {
            let samples = parse_trace(other).unwrap();
            let mut lags = PowerLags::default();
            let residuals: Vec<f64> = samples
                .iter()
                .filter_map(|s| {
                    let row = reference.row(s, lags.push(s.t, s.power_w?));
                    Some(s.temp_gpu_c? - reference.predict(0, &row)?)
                })
                .collect();
            let spread = mad_sigma(&residuals).unwrap();
            assert!(spread < 2.0, "{spread}");
        }
    }

    #[test]
    fn solve_solves() {
        let x = solve([[2.0, 1.0], [1.0, 3.0]], [3.0, 5.0]).unwrap();
        assert!(
            (x[0] - 0.8).abs() < 1e-12 && (x[1] - 1.4).abs() < 1e-12,
            "{x:?}"
        );
        assert!(solve([[1.0, 2.0], [2.0, 4.0]], [1.0, 2.0]).is_none());
    }

    #[test]
    fn a_step_at_constant_load_moves_the_offset_not_the_heat_at_load() {
        let mut c = Correction::new();
        // An hour at full load (u ≈ 1): the room 4 °C warmer.
        for i in 0..6000 {
            let u = 1.0 + 0.005 * f64::from(i % 3);
            c.update(0.6, (u, u), 4.0);
        }
        assert!((c.ab().0 - 4.0).abs() < 0.2, "{:?}", c.theta);
        assert!(c.ab().1.abs() < 0.2, "{:?}", c.theta);
        // Then idle and load alternate: still the room alone.
        let alternate = |i: u32| {
            if (i / 200).is_multiple_of(2) {
                0.1
            } else {
                1.0
            }
        };
        for i in 0..6000 {
            let u = alternate(i);
            c.update(0.6, (u, u), 4.0);
        }
        assert!(
            (c.ab().0 - 4.0).abs() < 0.1 && c.ab().1.abs() < 0.1,
            "{:?}",
            c.theta
        );
        // A GPU whose load runs 2 °C hotter than idle at equal power: b is told apart.
        let mut hot = Correction::new();
        for i in 0..12_000 {
            let u = alternate(i);
            hot.update(0.6, (u, u), 1.0 + 2.0 * u);
        }
        assert!((hot.ab().1 - 2.0).abs() < 0.1, "{:?}", hot.theta);
        assert!((hot.ab().0 - 1.0).abs() < 0.1, "{:?}", hot.theta);
        assert!(hot.u_variance() > MIN_U_VARIANCE);
    }
}
