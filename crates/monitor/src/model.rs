//! What a GPU's healthy history teaches: robust baselines conditioned on load, a thermal
//! envelope (the hottest healthy temperature at each recent power), how long each sensor
//! stays unchanged when healthy, an isolation forest over the joint state, and the
//! [`Fingerprint`] of the GPU model it was recorded on (whose levels it holds, and no other's).

use crate::config::Config;
use crate::degradation::ThermalReference;
use crate::forest::{ForestError, IsolationForest};
use crate::sample::{reasons, Sample, Signal};
use crate::stats::{mad_sigma, median, quantile};
use std::collections::{BTreeMap, VecDeque};

/// The temperature sensors' step, °C (NVML reads whole degrees).
pub(crate) const SENSOR_STEP_C: f64 = 1.0;

/// The power read is steady when its lowest over the slope window is at least this fraction
/// of its highest.
pub(crate) const STEADY_POWER_FRACTION: f64 = 0.9;

/// Whether the power read held within [`STEADY_POWER_FRACTION`] of its highest over these
/// readings (at least four of them).
pub(crate) fn power_steady_over<'a>(readings: impl IntoIterator<Item = &'a Sample>) -> bool {
    let reads: Vec<f64> = readings.into_iter().filter_map(|w| w.power_w).collect();
    let low = reads.iter().copied().fold(f64::INFINITY, f64::min);
    let high = reads.iter().copied().fold(0.0, f64::max);
    reads.len() >= 4 && low >= STEADY_POWER_FRACTION * high
}

/// A temperature's level over these readings where it held flat (at least four readings,
/// all within a sensor step either way of each other, [`SENSOR_STEP_C`]): their median.
pub(crate) fn flat_over<'a>(
    readings: impl IntoIterator<Item = &'a Sample>,
    signal: Signal,
) -> Option<f64> {
    let temps: Vec<f64> = readings
        .into_iter()
        .filter_map(|x| x.signal(signal))
        .collect();
    let low = temps.iter().copied().fold(f64::INFINITY, f64::min);
    let high = temps.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    median(&temps).filter(|_| temps.len() >= 4 && high - low <= 2.0 * SENSOR_STEP_C)
}

/// Why a model could not be trained.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// Too little healthy history.
    #[error("training needs at least {need} samples of healthy history, got {got}")]
    TooFewSamples {
        /// The minimum.
        need: usize,
        /// What was given.
        got: usize,
    },
    /// The history has no power readings: nothing can be conditioned on load.
    #[error("the healthy history has no power_w readings: baselines are conditioned on power and utilization")]
    NoPower,
    /// The isolation forest could not be built.
    #[error("building the isolation forest: {0}")]
    Forest(#[from] ForestError),
}

/// How busy the GPU is, from its utilization.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum UtilBucket {
    /// Below 5 %.
    Idle,
    /// 5 % to 50 %.
    Light,
    /// 50 % to the busy threshold.
    Heavy,
    /// At or above the busy threshold (90 % by default).
    Busy,
}

impl UtilBucket {
    /// The bucket of a utilization, with `busy` the busy threshold.
    pub fn of(util_pct: f64, busy: f64) -> UtilBucket {
        if util_pct >= busy {
            UtilBucket::Busy
        } else if util_pct >= 50.0 {
            UtilBucket::Heavy
        } else if util_pct >= 5.0 {
            UtilBucket::Light
        } else {
            UtilBucket::Idle
        }
    }

    /// Its name in alert texts.
    pub fn name(self) -> &'static str {
        match self {
            UtilBucket::Idle => "idle",
            UtilBucket::Light => "light load",
            UtilBucket::Heavy => "heavy load",
            UtilBucket::Busy => "full load",
        }
    }
}

/// The load a sample is judged under: its utilization bucket and whether the software power
/// cap (0x4) holds the clocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LoadState {
    /// Utilization bucket.
    pub bucket: UtilBucket,
    /// The software power cap bit is set.
    pub power_capped: bool,
}

impl LoadState {
    /// The load state of a sample, if its utilization was read.
    pub fn of(s: &Sample, busy: f64) -> Option<LoadState> {
        Some(LoadState {
            bucket: UtilBucket::of(s.util_gpu_pct?, busy),
            power_capped: s
                .clock_reasons
                .is_some_and(|r| r & reasons::SW_POWER_CAP != 0),
        })
    }

    /// In words, for alert texts.
    pub fn describe(self) -> String {
        if self.power_capped {
            format!("{} under the power cap", self.bucket.name())
        } else {
            self.bucket.name().to_string()
        }
    }
}

/// A robust summary of one signal in one load state.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Robust {
    /// Median.
    pub median: f64,
    /// MAD scaled to a standard deviation.
    pub sigma: f64,
    /// Samples it was computed from.
    pub n: usize,
}

impl Robust {
    fn of(values: &[f64]) -> Option<Robust> {
        Some(Robust {
            median: median(values)?,
            sigma: mad_sigma(values)?,
            n: values.len(),
        })
    }
}

/// How far (a fraction of its power) a GPU's reading is compared with the healthy history
/// around its own power: cards of one model draw a few percent apart for the same work (the
/// other H200's GEMMs at 687 W where ours drew 673 W), and the envelope's bins are 25 W wide.
pub const POWER_TOLERANCE: f64 = 0.04;

/// A reading's power is steady, for the envelope's typical level, when it is at least this
/// fraction of the recent power (the window's maximum).
pub const STEADY_FRACTION: f64 = 0.9;

/// The fewest steady healthy readings a power bin needs for its typical level to be *known*
/// ([`Envelope::typical_known_at`]): a single reading is a load step's first second (the
/// committed trace's copy starting at 416 W, the die still at 46 °C of its 48), not a load.
pub const KNOWN_BIN_READINGS: usize = 5;

/// The hottest healthy temperature seen at each level of recent power, made non-decreasing in
/// power (more power never lowers the allowed temperature).
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    bin_w: f64,
    /// Per bin of recent power (bin i covers [i·bin_w, (i+1)·bin_w)): the cumulative maximum.
    upper: Vec<Option<f64>>,
    /// Extrapolation above the highest bin, °C per W.
    slope_c_per_w: f64,
    /// Per bin of recent power: the 90th percentile of the healthy readings in it (not
    /// cumulative; `None` where the bin had none), the level a GPU's own readings are
    /// compared with to learn its offset.
    typical: Vec<Option<f64>>,
    /// Per bin: whether it had [`KNOWN_BIN_READINGS`] steady readings or more.
    known: Vec<bool>,
    /// Per bin: how many steady memory-bound readings it had ([`Envelope::with_memory_loads`]).
    memory_loads: Vec<usize>,
    /// Where the healthy readings sit against `typical`: the 90th percentile of temperature
    /// minus it.
    reference_c: f64,
}

impl Envelope {
    /// Fits the envelope to healthy readings (recent power, temperature, whether the power
    /// read then was steady: within [`STEADY_FRACTION`] of the recent power). The hottest
    /// reading counts at any power; the typical level only at a steady power, so that a
    /// bin of high recent power is not typified by the cool-down after a load stopped (its
    /// recent power is the window's maximum while the die is already cooling).
    fn fit(points: &[(f64, f64, bool)], bin_w: f64, slope_c_per_w: f64) -> Option<Envelope> {
        let top = points.iter().map(|p| p.0).fold(f64::NAN, f64::max);
        if points.is_empty() || !top.is_finite() {
            return None;
        }
        let bins = (top.max(0.0) / bin_w) as usize + 1;
        let mut upper: Vec<Option<f64>> = vec![None; bins];
        let mut in_bin: Vec<Vec<f64>> = vec![Vec::new(); bins];
        for &(p, temp, steady) in points {
            let i = ((p.max(0.0) / bin_w) as usize).min(bins - 1);
            upper[i] = Some(upper[i].map_or(temp, |u: f64| u.max(temp)));
            if steady {
                in_bin[i].push(temp);
            }
        }
        let typical = in_bin.iter().map(|temps| quantile(temps, 0.9)).collect();
        let known = in_bin
            .iter()
            .map(|temps| temps.len() >= KNOWN_BIN_READINGS)
            .collect();
        let mut running: Option<f64> = None;
        for u in upper.iter_mut() {
            running = match (running, *u) {
                (Some(r), Some(v)) => Some(r.max(v)),
                (r, v) => r.or(v),
            };
            *u = running;
        }
        let mut envelope = Envelope {
            bin_w,
            upper,
            slope_c_per_w,
            typical,
            known,
            memory_loads: vec![0; bins],
            reference_c: 0.0,
        };
        let against: Vec<f64> = points
            .iter()
            .map(|&(p, t, _)| t - envelope.typical_at(p))
            .collect();
        envelope.reference_c = quantile(&against, 0.9).unwrap_or(0.0);
        Some(envelope)
    }

    /// The hottest healthy temperature near this recent power: at up to
    /// [`POWER_TOLERANCE`] more (the envelope never falls with power).
    pub fn hottest_near(&self, recent_power_w: f64) -> f64 {
        self.at(recent_power_w * (1.0 + POWER_TOLERANCE))
    }

    /// The hottest healthy temperature near this recent power, judged from loads the history
    /// held: [`Envelope::hottest_near`] where a bin within [`POWER_TOLERANCE`] of it is known
    /// ([`KNOWN_BIN_READINGS`] steady readings); at a load the history never held, the hottest
    /// at the nearest load above it that it did hold, since a load between two it ran heats
    /// no more than the heavier one. Below a bin never held, the envelope holds only the
    /// passing readings of load steps (a GEMM's first seconds, a cool-down) and says nothing
    /// of how hot a steady load there runs: a card whose bursty half-duty GEMMs at 500–547 W
    /// reach its full-load 66 °C was judged "4.4 °C above the hottest" of those steps.
    /// Where it held no load above, [`Envelope::hottest_near`].
    pub fn hottest_held_near(&self, recent_power_w: f64) -> f64 {
        let near = self.hottest_near(recent_power_w);
        if self.typical_known_at(recent_power_w).is_some() {
            return near;
        }
        let from = self.bin(recent_power_w * (1.0 + POWER_TOLERANCE));
        (from..self.known.len())
            .find(|&i| self.known[i])
            .and_then(|i| self.upper[i])
            .map_or(near, |held| held.max(near))
    }

    /// The same envelope knowing where the history held memory-bound loads: `recent_powers`
    /// are the recent powers of its steady readings whose memory utilization was at least
    /// [`MEMORY_BOUND_UTIL_PCT`](crate::sample::MEMORY_BOUND_UTIL_PCT).
    pub fn with_memory_loads(mut self, recent_powers: impl IntoIterator<Item = f64>) -> Envelope {
        for p in recent_powers {
            let i = self.bin(p).min(self.memory_loads.len() - 1);
            self.memory_loads[i] += 1;
        }
        self
    }

    /// Whether the healthy history held a memory-bound load at this recent power or above it
    /// ([`KNOWN_BIN_READINGS`] steady memory-bound readings in a bin from [`POWER_TOLERANCE`]
    /// below it up): where it did not, it cannot say how hot the memory runs under one here
    /// (the envelope only grows with power).
    pub fn memory_load_held_near(&self, recent_power_w: f64) -> bool {
        let from = self.bin(recent_power_w * (1.0 - POWER_TOLERANCE));
        self.memory_loads
            .iter()
            .skip(from)
            .any(|&n| n >= KNOWN_BIN_READINGS)
    }

    /// The typical high healthy reading near this recent power: the highest of the bins'
    /// 90th percentiles within [`POWER_TOLERANCE`] of it, or where those bins had no
    /// readings, [`Envelope::hottest_near`].
    pub fn typical_at(&self, recent_power_w: f64) -> f64 {
        self.typical_near(recent_power_w, false)
            .unwrap_or_else(|| self.hottest_near(recent_power_w))
    }

    /// The typical high healthy reading near this recent power where the healthy history
    /// held that power ([`KNOWN_BIN_READINGS`] steady readings in a bin within
    /// [`POWER_TOLERANCE`]): the highest of those bins' 90th percentiles; `None` at a load it
    /// never ran.
    pub fn typical_known_at(&self, recent_power_w: f64) -> Option<f64> {
        self.typical_near(recent_power_w, true)
    }

    /// The highest typical level of the bins within [`POWER_TOLERANCE`] of this recent power
    /// (only the known ones, if `known_only`).
    fn typical_near(&self, recent_power_w: f64, known_only: bool) -> Option<f64> {
        let p = recent_power_w.max(0.0);
        let low = (p * (1.0 - POWER_TOLERANCE) / self.bin_w) as usize;
        let high = (p * (1.0 + POWER_TOLERANCE) / self.bin_w) as usize;
        (low..=high)
            .filter(|&i| !known_only || self.known.get(i).copied().unwrap_or(false))
            .filter_map(|i| self.typical.get(i).copied().flatten())
            .reduce(f64::max)
    }

    /// Where the healthy readings it was fitted on sit against [`Envelope::typical_at`]: the
    /// 90th percentile of their temperature minus it, at their recent power.
    pub fn reference(&self) -> f64 {
        self.reference_c
    }

    /// The bin of this recent power (each [`Config::envelope_bin_w`](crate::Config) wide).
    pub fn bin(&self, recent_power_w: f64) -> usize {
        (recent_power_w.max(0.0) / self.bin_w) as usize
    }

    /// The hottest healthy temperature at this recent power.
    pub fn at(&self, recent_power_w: f64) -> f64 {
        let i = self.bin(recent_power_w);
        let first = self.upper.iter().flatten().next().copied().unwrap_or(0.0);
        match self.upper.get(i) {
            Some(u) => u.unwrap_or(first),
            None => {
                let last = self.upper.last().copied().flatten().unwrap_or(first);
                let edge = self.upper.len() as f64 * self.bin_w;
                last + self.slope_c_per_w * (recent_power_w - edge).max(0.0)
            }
        }
    }
}

/// The seconds a healthy history's die must have held flat at a steady power at a load for
/// that load to count as covered ([`Coverage::thin`]): with the slope window's 10 s before it
/// reads flat, half a minute at the load.
pub const COVERED_LOAD_S: f64 = 20.0;

/// The fewest loads (runs of neighbouring power bins where the die held) a healthy history
/// must cover ([`COVERED_LOAD_S`] each) not to be thin ([`Coverage::thin`]): an idle and a
/// working one at least.
pub const MIN_COVERED_LOADS: usize = 2;

/// One load a healthy history's die held ([`Coverage::loads`]): neighbouring bins of recent
/// power where it held.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HeldLoad {
    /// The lightest recent power of its bins, W.
    pub from_w: f64,
    /// The heaviest recent power of its bins (exclusive), W.
    pub to_w: f64,
    /// Seconds the die held there.
    pub held_s: f64,
}

/// Where a healthy history's die *held* its loads: per bin of recent power, the seconds it
/// read flat (within a sensor step either way over the slope window) at a steady power. Only
/// there does the history know where a die settles; a history that held too few loads
/// ([`Coverage::thin`]) cannot tell a GPU's level at one load from its level at another (a
/// card's level against another card's moves by 5 °C with the load), so the monitor judges
/// a GPU's die by it only where that die has held the load itself.
#[derive(Debug, Clone, PartialEq)]
pub struct Coverage {
    bin_w: f64,
    /// Per bin of recent power: seconds the die held there.
    held_s: Vec<f64>,
    /// Seconds of history.
    span_s: f64,
    /// How many of its loads ([`Coverage::loads`]) the die held [`COVERED_LOAD_S`] or more.
    covered_loads: usize,
}

impl Coverage {
    /// Measures `history` (in time order; `recent_power` each sample's recent power).
    fn of(history: &[Sample], recent_power: &[Option<f64>], config: &Config) -> Coverage {
        let bin_w = config.envelope_bin_w;
        let mut held_s: Vec<f64> = Vec::new();
        let mut window: VecDeque<&Sample> = VecDeque::new();
        let mut previous_t: Option<f64> = None;
        for (s, p) in history.iter().zip(recent_power) {
            window.push_back(s);
            while window
                .front()
                .is_some_and(|f| s.t - f.t > config.slope_window_s)
            {
                window.pop_front();
            }
            let dt = previous_t.map_or(0.0, |last| (s.t - last).clamp(0.0, config.slope_window_s));
            previous_t = Some(s.t);
            let held = power_steady_over(window.iter().copied())
                && flat_over(window.iter().copied(), Signal::TempGpu).is_some();
            if let (true, Some(p)) = (held, p) {
                let bin = (p.max(0.0) / bin_w) as usize;
                if held_s.len() <= bin {
                    held_s.resize(bin + 1, 0.0);
                }
                held_s[bin] += dt;
            }
        }
        let span_s = match (history.first(), history.last()) {
            (Some(a), Some(b)) => b.t - a.t,
            _ => 0.0,
        };
        let mut coverage = Coverage {
            bin_w,
            held_s,
            span_s,
            covered_loads: 0,
        };
        coverage.covered_loads = coverage
            .loads()
            .iter()
            .filter(|l| l.held_s >= COVERED_LOAD_S)
            .count();
        coverage
    }

    /// Whether the history is thin ([`Coverage::thin`]): fewer than [`MIN_COVERED_LOADS`]
    /// loads held [`COVERED_LOAD_S`] or more each.
    pub fn is_thin(&self) -> bool {
        self.covered_loads < MIN_COVERED_LOADS
    }

    /// The loads the die held: each run of neighbouring bins where it held at all, lightest
    /// first.
    pub fn loads(&self) -> Vec<HeldLoad> {
        let mut loads: Vec<HeldLoad> = Vec::new();
        for (i, &held_s) in self.held_s.iter().enumerate() {
            if held_s <= 0.0 {
                continue;
            }
            let (from_w, to_w) = (i as f64 * self.bin_w, (i + 1) as f64 * self.bin_w);
            match loads.last_mut() {
                Some(last) if last.to_w == from_w => {
                    last.to_w = to_w;
                    last.held_s += held_s;
                }
                _ => loads.push(HeldLoad {
                    from_w,
                    to_w,
                    held_s,
                }),
            }
        }
        loads
    }

    /// Why the history is too thin to judge a die's levels by, in words (what it holds and
    /// what it lacks); `None` when it covers [`MIN_COVERED_LOADS`] loads or more, each held
    /// [`COVERED_LOAD_S`].
    pub fn thin(&self) -> Option<String> {
        if !self.is_thin() {
            return None;
        }
        let covered = self.covered_loads;
        let loads = self.loads();
        let held = if loads.is_empty() {
            "no load".to_string()
        } else {
            loads
                .iter()
                .map(|l| format!("{:.0}-{:.0} W for {:.0} s", l.from_w, l.to_w, l.held_s))
                .collect::<Vec<_>>()
                .join(", ")
        };
        Some(format!(
            "{:.0} s of history whose die held {held}: {covered} load(s) held {COVERED_LOAD_S:.0} s or more, {MIN_COVERED_LOADS} needed (idle and the work this GPU runs)",
            self.span_s
        ))
    }
}

/// The features of the multivariate detector, in order.
///
/// The last two relate temperature to load: each temperature minus the hottest healthy
/// reading at the sample's recent power (the thermal envelope), so that a state in which heat
/// and power disagree stands out even when each value alone is common.
pub const FOREST_FEATURES: [&str; 10] = [
    "util_gpu",
    "util_mem",
    "power_w",
    "recent_max_power_w",
    "temp_gpu",
    "temp_mem",
    "sm_clock",
    "mem_clock",
    "temp_gpu_over_envelope",
    "temp_mem_over_envelope",
];

/// The multivariate part of a model.
#[derive(Debug, Clone)]
pub struct ForestModel {
    /// The forest.
    pub forest: IsolationForest,
    /// Per feature: the value used when a sample lacks it (the training median).
    pub fill: Vec<f64>,
    /// Per feature: a robust scale, to compare a sample with its nearest healthy neighbour.
    pub scale: Vec<f64>,
    /// Scores above this are anomalous (the highest training score plus a margin).
    pub threshold: f64,
    /// The training rows (for explanations: the nearest healthy state).
    pub rows: Vec<Vec<f64>>,
    /// The thermal envelopes the last two features are taken against.
    pub envelopes: [Option<Envelope>; 2],
}

impl ForestModel {
    /// The feature row of a sample whose recent maximum power is `recent_power`, on a GPU
    /// whose temperatures sit `offsets` °C (GPU, memory) above the healthy history's at the
    /// same power ([`AmbientOffset`](crate::baseline::AmbientOffset)): both the temperatures
    /// and their distances to the envelope are taken less them, as the history's GPU would
    /// read in this one's place (a card running 8 °C cooler is no state unlike the history).
    /// An offset not yet learned (`None`) leaves that temperature's two features unknown
    /// (the training median): a card in a colder room is not unlike the history either.
    pub fn row(
        &self,
        s: &Sample,
        recent_power: Option<f64>,
        offsets: [Option<f64>; 2],
    ) -> Vec<f64> {
        let mut raw = raw_features(s, recent_power, &self.envelopes);
        for (over, offset) in raw[8..].iter_mut().zip(offsets) {
            *over = over.zip(offset).map(|(v, o)| v - o);
        }
        for (temp, offset) in raw[4..6].iter_mut().zip(offsets) {
            *temp = temp.zip(offset).map(|(v, o)| v - o);
        }
        raw.iter()
            .zip(&self.fill)
            .map(|(v, fill)| v.unwrap_or(*fill))
            .collect()
    }

    /// The training row nearest to `row`, by scaled distance.
    pub fn nearest(&self, row: &[f64]) -> Option<&[f64]> {
        self.rows
            .iter()
            .min_by(|a, b| self.distance(a, row).total_cmp(&self.distance(b, row)))
            .map(Vec::as_slice)
    }

    fn distance(&self, a: &[f64], b: &[f64]) -> f64 {
        a.iter()
            .zip(b)
            .zip(&self.scale)
            .map(|((x, y), s)| ((x - y) / s).powi(2))
            .sum()
    }
}

fn raw_features(
    s: &Sample,
    recent_power: Option<f64>,
    envelopes: &[Option<Envelope>; 2],
) -> [Option<f64>; 10] {
    let over = |temp: Option<f64>, envelope: &Option<Envelope>| {
        Some(temp? - envelope.as_ref()?.at(recent_power?))
    };
    [
        s.util_gpu_pct,
        s.util_mem_pct,
        s.power_w,
        recent_power,
        s.temp_gpu_c,
        s.temp_mem_c,
        s.sm_clock_mhz,
        s.mem_clock_mhz,
        over(s.temp_gpu_c, &envelopes[0]),
        over(s.temp_mem_c, &envelopes[1]),
    ]
}

/// A memory clock within this fraction of the healthy history's range is the same model's.
const CLOCK_TOLERANCE: f64 = 0.05;

/// A memory size (used, free and reserved together) within this fraction of the healthy
/// history's is the same model's (an H100's 80 GB, an H100 NVL's 94, an H200's 141 are apart
/// by far more; a retired page or remapped row by far less).
const MEMORY_TOLERANCE: f64 = 0.02;

/// What tells a GPU model from another in its readings: its memory's size and clock (an
/// H200's HBM3e runs at 3201 MHz, an H100 SXM's HBM3 at 2619 MHz), neither of which a load,
/// a room or a healthy card changes. A trace carries no model name; these it carries.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Fingerprint {
    /// The memory clocks read, lowest and highest (MHz); `None` when none was read.
    pub mem_clock_mhz: Option<(f64, f64)>,
    /// The median device memory size: used, free and reserved together (MiB); `None` when
    /// they were never read together (the H200 fixture has no free or reserved columns).
    pub mem_total_mib: Option<f64>,
}

impl Fingerprint {
    /// The fingerprint of these samples; `None` when none of them read the memory's clock or
    /// size.
    pub fn of<'a>(samples: impl IntoIterator<Item = &'a Sample>) -> Option<Fingerprint> {
        let mut clocks: Option<(f64, f64)> = None;
        let mut totals = Vec::new();
        for s in samples {
            if let Some(c) = s.mem_clock_mhz {
                clocks = Some(clocks.map_or((c, c), |(lo, hi)| (lo.min(c), hi.max(c))));
            }
            if let (Some(used), Some(free), Some(reserved)) =
                (s.mem_used_mib, s.mem_free_mib, s.mem_reserved_mib)
            {
                totals.push(used + free + reserved);
            }
        }
        let print = Fingerprint {
            mem_clock_mhz: clocks,
            mem_total_mib: median(&totals),
        };
        (clocks.is_some() || print.mem_total_mib.is_some()).then_some(print)
    }

    /// How a GPU whose readings give `live` differs from the model this fingerprint is of, in
    /// words; `None` when it is the same model, or nothing tells. The memory's size decides
    /// where both know it (a memory clock may drop on a faulty card of the same model);
    /// otherwise the clock, outside the history's range by more than 5 %.
    pub fn differs(&self, live: &Fingerprint) -> Option<String> {
        if let (Some(history), Some(here)) = (self.mem_total_mib, live.mem_total_mib) {
            return ((here - history).abs() > MEMORY_TOLERANCE * history)
                .then(|| format!("{history:.0} MiB of memory there, {here:.0} MiB here"));
        }
        let ((lo, hi), (here, _)) = (self.mem_clock_mhz?, live.mem_clock_mhz?);
        let inside = (1.0 - CLOCK_TOLERANCE) * lo <= here && here <= (1.0 + CLOCK_TOLERANCE) * hi;
        let there = if lo == hi {
            format!("{hi:.0} MHz")
        } else {
            format!("{lo:.0}–{hi:.0} MHz")
        };
        (!inside).then(|| format!("its memory clock {there} there, {here:.0} MHz here"))
    }
}

/// Everything learned from one GPU's healthy history.
#[derive(Debug, Clone)]
pub struct Model {
    /// Per load state, per signal: median and MAD.
    pub baselines: BTreeMap<LoadState, BTreeMap<Signal, Robust>>,
    /// Per signal over all the history: median and MAD (the fallback for unseen states).
    pub overall: BTreeMap<Signal, Robust>,
    /// Power while the software power cap held the clocks at full load: the GPU's own cap.
    pub capped_power: Option<Robust>,
    /// The GPU temperature envelope over recent power.
    pub temp_gpu_envelope: Option<Envelope>,
    /// The memory temperature envelope over recent power.
    pub temp_mem_envelope: Option<Envelope>,
    /// Per signal: the longest time it stayed exactly unchanged, seconds.
    pub longest_unchanged_s: BTreeMap<Signal, f64>,
    /// Median benchmark figure in the history, if any.
    pub bench_tflops: Option<Robust>,
    /// Median proof ratio in the history, if any.
    pub proof_ratio: Option<Robust>,
    /// The multivariate detector.
    pub forest: Option<ForestModel>,
    /// Each temperature regressed on power, utilization and clocks, for the slow-degradation
    /// watch ([`crate::degradation`]); `None` when the history has no load to learn from.
    pub thermal: Option<ThermalReference>,
    /// The GPU model the history was recorded on, as its readings tell it: the levels above
    /// are that model's, and judge no other ([`Monitor`](crate::Monitor) checks each GPU's).
    pub fingerprint: Option<Fingerprint>,
    /// Where the history's die held its loads; where they are too few
    /// ([`Coverage::is_thin`]), a GPU's die is judged at each load from where it holds it
    /// itself.
    pub coverage: Coverage,
    /// Samples trained on.
    pub samples: usize,
    /// Seconds of history trained on.
    pub span_s: f64,
}

/// The power readings of the last `window_s` seconds, for the recent maximum.
#[derive(Debug, Clone, Default)]
pub struct RecentPower {
    points: VecDeque<(f64, f64)>,
}

impl RecentPower {
    /// Adds a sample's power (if read) and returns the maximum over the window ending at it.
    pub fn push(&mut self, t: f64, power: Option<f64>, window_s: f64) -> Option<f64> {
        if let Some(p) = power {
            self.points.push_back((t, p));
        }
        while self.points.front().is_some_and(|(t0, _)| t - t0 > window_s) {
            self.points.pop_front();
        }
        self.points.iter().map(|p| p.1).reduce(f64::max)
    }
}

/// The fewest samples a model trains on.
pub const MIN_TRAINING_SAMPLES: usize = 30;

impl Model {
    /// Learns a model from healthy history (in time order).
    pub fn train(history: &[Sample], config: &Config) -> Result<Model, TrainError> {
        if history.len() < MIN_TRAINING_SAMPLES {
            return Err(TrainError::TooFewSamples {
                need: MIN_TRAINING_SAMPLES,
                got: history.len(),
            });
        }
        if history.iter().all(|s| s.power_w.is_none()) {
            return Err(TrainError::NoPower);
        }
        let mut recent = RecentPower::default();
        let recent_power: Vec<Option<f64>> = history
            .iter()
            .map(|s| recent.push(s.t, s.power_w, config.load_window_s))
            .collect();

        let mut per_state: BTreeMap<LoadState, BTreeMap<Signal, Vec<f64>>> = BTreeMap::new();
        let mut all: BTreeMap<Signal, Vec<f64>> = BTreeMap::new();
        let mut capped = Vec::new();
        for s in history {
            for signal in Signal::ALL {
                if let Some(v) = s.signal(signal) {
                    all.entry(signal).or_default().push(v);
                    if let Some(state) = LoadState::of(s, config.busy_util_pct) {
                        per_state
                            .entry(state)
                            .or_default()
                            .entry(signal)
                            .or_default()
                            .push(v);
                    }
                }
            }
            if let (Some(state), Some(p)) = (LoadState::of(s, config.busy_util_pct), s.power_w) {
                if state.power_capped && state.bucket == UtilBucket::Busy {
                    capped.push(p);
                }
            }
        }
        let baselines = per_state
            .into_iter()
            .map(|(state, signals)| {
                let robust = signals
                    .into_iter()
                    .filter_map(|(signal, values)| Some((signal, Robust::of(&values)?)))
                    .collect();
                (state, robust)
            })
            .collect();
        let overall = all
            .iter()
            .filter_map(|(signal, values)| Some((*signal, Robust::of(values)?)))
            .collect();

        let envelope = |pick: fn(&Sample) -> Option<f64>| {
            let points: Vec<(f64, f64, bool, bool)> = history
                .iter()
                .zip(&recent_power)
                .filter_map(|(s, p)| {
                    let p = (*p)?;
                    let steady = s.power_w.is_some_and(|now| now >= STEADY_FRACTION * p);
                    Some((p, pick(s)?, steady, s.memory_bound()))
                })
                .collect();
            let fitted: Vec<(f64, f64, bool)> = points
                .iter()
                .map(|&(p, t, steady, _)| (p, t, steady))
                .collect();
            Envelope::fit(
                &fitted,
                config.envelope_bin_w,
                config.envelope_slope_c_per_w,
            )
            .map(|e| {
                e.with_memory_loads(
                    points
                        .iter()
                        .filter(|&&(_, _, steady, bound)| steady && bound)
                        .map(|&(p, ..)| p),
                )
            })
        };

        let mut longest_unchanged_s = BTreeMap::new();
        for signal in [
            Signal::TempGpu,
            Signal::TempMem,
            Signal::Power,
            Signal::Energy,
        ] {
            let mut longest: f64 = 0.0;
            let mut run: Option<(f64, f64)> = None; // (value, since)
            for s in history {
                let Some(v) = s.signal(signal) else {
                    run = None;
                    continue;
                };
                match run {
                    Some((value, since)) if value == v => longest = longest.max(s.t - since),
                    _ => run = Some((v, s.t)),
                }
            }
            longest_unchanged_s.insert(signal, longest);
        }

        let robust_of = |pick: fn(&Sample) -> Option<f64>| {
            let values: Vec<f64> = history.iter().filter_map(pick).collect();
            Robust::of(&values)
        };

        let envelopes = [envelope(|s| s.temp_gpu_c), envelope(|s| s.temp_mem_c)];
        let forest = Self::train_forest(history, &recent_power, &envelopes, config)?;
        let [temp_gpu_envelope, temp_mem_envelope] = envelopes;
        Ok(Model {
            baselines,
            overall,
            capped_power: Robust::of(&capped),
            temp_gpu_envelope,
            temp_mem_envelope,
            longest_unchanged_s,
            bench_tflops: robust_of(|s| s.bench_tflops),
            proof_ratio: robust_of(|s| s.proof_ratio),
            forest,
            thermal: ThermalReference::fit(history),
            fingerprint: Fingerprint::of(history),
            coverage: Coverage::of(history, &recent_power, config),
            samples: history.len(),
            span_s: history.last().map_or(0.0, |l| l.t) - history[0].t,
        })
    }

    fn train_forest(
        history: &[Sample],
        recent_power: &[Option<f64>],
        envelopes: &[Option<Envelope>; 2],
        config: &Config,
    ) -> Result<Option<ForestModel>, TrainError> {
        if config.forest_trees == 0 {
            return Ok(None);
        }
        let raw: Vec<[Option<f64>; 10]> = history
            .iter()
            .zip(recent_power)
            .map(|(s, p)| raw_features(s, *p, envelopes))
            .collect();
        let mut fill = Vec::new();
        let mut scale = Vec::new();
        for f in 0..FOREST_FEATURES.len() {
            let values: Vec<f64> = raw.iter().filter_map(|r| r[f]).collect();
            let m = median(&values).unwrap_or(0.0);
            let spread = (quantile(&values, 0.95).unwrap_or(0.0)
                - quantile(&values, 0.05).unwrap_or(0.0))
                / 4.0;
            fill.push(m);
            scale.push(
                mad_sigma(&values)
                    .unwrap_or(0.0)
                    .max(spread)
                    .max(m.abs() * 0.01)
                    .max(1e-3),
            );
        }
        let rows: Vec<Vec<f64>> = raw
            .iter()
            .map(|r| r.iter().zip(&fill).map(|(v, f)| v.unwrap_or(*f)).collect())
            .collect();
        let forest = IsolationForest::fit(
            &rows,
            config.forest_trees,
            config.forest_sample_size,
            config.forest_seed,
        )?;
        let highest = rows.iter().map(|r| forest.score(r)).fold(0.0f64, f64::max);
        Ok(Some(ForestModel {
            forest,
            fill,
            scale,
            threshold: highest + config.forest_margin,
            rows,
            envelopes: envelopes.clone(),
        }))
    }

    /// The baseline of a signal in a load state: the state's own, else over all the history.
    pub fn baseline(&self, state: Option<LoadState>, signal: Signal) -> Option<(Robust, String)> {
        if let Some(state) = state {
            if let Some(r) = self.baselines.get(&state).and_then(|b| b.get(&signal)) {
                return Some((
                    *r,
                    format!("healthy median at {} ({} samples)", state.describe(), r.n),
                ));
            }
        }
        self.overall.get(&signal).map(|r| {
            (
                *r,
                format!("healthy median over all loads ({} samples)", r.n),
            )
        })
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
    fn a_history_whose_die_held_one_load_is_thin_and_says_what_it_held() {
        // The 60-s `pog bench` recording: its die held idle 3 s and the GEMM at 690 W 21 s.
        let bench =
            parse_trace(include_str!("../tests/data/h200-bench-load-2026-12-03.csv")).unwrap();
        let coverage = Model::train(&bench, &Config::default()).unwrap().coverage;
        assert!(coverage.is_thin());
        let said = coverage.thin().unwrap();
        assert!(said.contains("59 s of history"), "{said}");
        assert!(said.contains("675-700 W for 21 s"), "{said}");
        assert!(
            said.contains("1 load(s) held 20 s or more, 2 needed"),
            "{said}"
        );
        // The training day held idle 100 s and its SGEMM 27 s (at 0.5-s samples): not thin.
        let day = Model::train(&healthy(), &Config::default())
            .unwrap()
            .coverage;
        assert_eq!(day.thin(), None, "{:?}", day.loads());
        assert!(!day.is_thin());
        // Its second half (117 s) is.
        let half: Vec<Sample> = healthy().into_iter().filter(|s| s.t >= 112.0).collect();
        let half = Model::train(&half, &Config::default()).unwrap().coverage;
        assert!(half.is_thin(), "{:?}", half.loads());
    }

    #[test]
    fn every_healthy_recording_of_minutes_of_varied_work_is_not_thin() {
        // The recordings `evaluate` trains on in turn and judges others by (docs/monitor.md,
        // "A history too thin to judge a die by"): each held idle and its work long enough,
        // so each is judged as a rich history; only the 60-s bench-load trace is thin.
        // `--nocapture` prints the loads each one's die held, as that table gives them.
        for (name, text) in [
            (
                "h200-healthy.csv",
                include_str!("../tests/data/h200-healthy.csv"),
            ),
            (
                "h200-healthy-2.csv",
                include_str!("../tests/data/h200-healthy-2.csv"),
            ),
            (
                "h200-healthy-3.csv",
                include_str!("../tests/data/h200-healthy-3.csv"),
            ),
            (
                "h200-healthy-varied.csv",
                include_str!("../tests/data/h200-healthy-varied.csv"),
            ),
            (
                "h200-healthy-varied-2.csv",
                include_str!("../tests/data/h200-healthy-varied-2.csv"),
            ),
            (
                "h100-varied.csv",
                include_str!("../tests/data/h100-varied.csv"),
            ),
            (
                "h100-gpu-run.csv",
                include_str!("../tests/data/h100-gpu-run.csv"),
            ),
            (
                "h100-healthy-varied.csv",
                include_str!("../tests/data/h100-healthy-varied.csv"),
            ),
            (
                "h100-healthy-varied-2.csv",
                include_str!("../tests/data/h100-healthy-varied-2.csv"),
            ),
            (
                "h100-healthy-varied-3.csv",
                include_str!("../tests/data/h100-healthy-varied-3.csv"),
            ),
            (
                "h100-healthy-varied-4.csv",
                include_str!("../tests/data/h100-healthy-varied-4.csv"),
            ),
        ] {
            let history = parse_trace(text).unwrap();
            let coverage = Model::train(&history, &Config::default()).unwrap().coverage;
            let held: Vec<String> = coverage
                .loads()
                .iter()
                .map(|l| format!("{:.0}-{:.0} W {:.0} s", l.from_w, l.to_w, l.held_s))
                .collect();
            eprintln!("{name}: {:.0} s, held {}", coverage.span_s, held.join(", "));
            assert!(!coverage.is_thin(), "{name}: {:?}", coverage.thin());
        }
    }

    #[test]
    fn learns_load_conditioned_baselines_from_the_h200_trace() {
        let model = Model::train(&healthy(), &Config::default()).unwrap();
        let busy = LoadState {
            bucket: UtilBucket::Busy,
            power_capped: false,
        };
        let sm = model.baselines[&busy][&Signal::SmClock];
        assert_eq!(sm.median, 1980.0);
        let capped = model.capped_power.unwrap();
        assert!((680.0..700.0).contains(&capped.median), "{capped:?}");
        let env = model.temp_gpu_envelope.as_ref().unwrap();
        // Idle at about 76 W is 40 °C; full load at about 690 W is 63 °C.
        assert!(env.at(80.0) <= 45.0, "{}", env.at(80.0));
        assert!((62.0..=64.0).contains(&env.at(695.0)), "{}", env.at(695.0));
        assert!(env.at(800.0) > env.at(700.0));
        assert!(model.forest.is_some());
        assert_eq!(model.samples, 417);
    }

    #[test]
    fn the_memory_tells_the_gpu_model() {
        let h200 = Model::train(&healthy(), &Config::default())
            .unwrap()
            .fingerprint
            .unwrap();
        assert_eq!(h200.mem_clock_mhz, Some((3201.0, 3201.0)));
        let reading = |clock: f64, total: Option<f64>| {
            let mut s = Sample::at(0.0);
            s.mem_clock_mhz = Some(clock);
            s.mem_used_mib = Some(0.0);
            s.mem_free_mib = total;
            s.mem_reserved_mib = Some(0.0);
            Fingerprint::of([&s]).unwrap()
        };
        // An H100 SXM's HBM3 clock, where the history knows no memory size.
        let h100 = reading(2619.0, Some(81559.0));
        assert!(h200.differs(&h100).unwrap().contains("2619 MHz here"));
        assert_eq!(h200.differs(&reading(3201.0, None)), None);
        // Where both know the memory's size it decides: a clock dropped on a card of the same
        // size is that card's fault, not another model.
        let sized = Fingerprint {
            mem_total_mib: Some(143771.0),
            ..h200
        };
        assert_eq!(sized.differs(&reading(2619.0, Some(143771.0))), None);
        assert!(sized.differs(&reading(3201.0, Some(81559.0))).is_some());
    }

    #[test]
    fn refuses_too_little_history() {
        let short = &healthy()[..10];
        assert!(matches!(
            Model::train(short, &Config::default()),
            Err(TrainError::TooFewSamples { need: 30, got: 10 })
        ));
        let no_power: Vec<Sample> = (0..40).map(|i| Sample::at(f64::from(i))).collect();
        assert!(matches!(
            Model::train(&no_power, &Config::default()),
            Err(TrainError::NoPower)
        ));
    }

    #[test]
    fn envelope_is_monotone_and_extrapolates() {
        let env = Envelope::fit(
            &[
                (100.0, 40.0, true),
                (300.0, 38.0, true),
                (600.0, 60.0, true),
            ],
            50.0,
            0.05,
        )
        .unwrap();
        assert_eq!(env.at(0.0), 40.0);
        assert_eq!(env.at(320.0), 40.0);
        assert_eq!(env.at(610.0), 60.0);
        assert!((env.at(750.0) - 65.0).abs() < 1e-9);
        // Near a power: the envelope at 4 % more.
        assert_eq!(env.at(590.0), 40.0);
        assert_eq!(env.hottest_near(590.0), 60.0);
        // The typical level is the bin's own 90th percentile, not the running maximum.
        let mut points = vec![(100.0, 40.0, true)];
        points.extend([(110.0, 30.0, true); 9]);
        points.push((300.0, 35.0, true));
        let env = Envelope::fit(&points, 50.0, 0.05).unwrap();
        assert_eq!(env.at(300.0), 40.0);
        assert_eq!(env.typical_at(300.0), 35.0);
        assert!((env.typical_at(100.0) - 31.0).abs() < 1e-9);
        // Within 4 % of the power: 290 W reaches the 300–350 W bin.
        assert_eq!(env.typical_at(290.0), 35.0);
        // A bin without readings falls back to the envelope.
        assert_eq!(env.typical_at(200.0), 40.0);
        // Readings against their typical level: ten at or under it, one 9 °C above.
        assert!(env.reference().abs() < 1e-9, "{}", env.reference());
    }

    /// A bin of high recent power is typified by its steady readings only: the cool-down
    /// after a load stopped (the recent power still the load's, the die already near idle)
    /// made the committed H200 trace's typical level 41 °C at 550 W beside 55 °C at 525 W,
    /// and another H200 at 533 W read as 17 °C above its level (2026-12-05).
    #[test]
    fn the_typical_level_is_learned_at_a_steady_power() {
        let mut points = vec![(540.0, 60.0, true), (560.0, 62.0, true)];
        points.extend([(550.0, 41.0, false); 10]);
        let env = Envelope::fit(&points, 25.0, 0.05).unwrap();
        assert_eq!(env.typical_at(550.0), 62.0);
        // The cool-down still bounds nothing from above: the hottest is any reading's.
        assert_eq!(env.at(550.0), 62.0);
    }

    #[test]
    fn a_typical_level_is_known_only_where_the_history_held_the_load() {
        // A load held (five steady readings at 470 W) and a load step's first second (one
        // at 420 W, the die still climbing).
        let mut points = vec![(420.0, 46.0, true)];
        points.extend([(470.0, 48.0, true); KNOWN_BIN_READINGS]);
        let env = Envelope::fit(&points, 25.0, 0.05).unwrap();
        assert_eq!(env.typical_known_at(470.0), Some(48.0));
        assert_eq!(env.typical_known_at(420.0), None);
        assert_eq!(
            env.typical_at(420.0),
            46.0,
            "the offset still learns against it"
        );
        // Within 4 % of a held load: known.
        assert_eq!(env.typical_known_at(455.0), Some(48.0));
        assert_eq!(env.bin(470.0), 18);
    }

    #[test]
    fn at_a_load_never_held_the_hottest_is_the_next_held_loads() {
        // Idle held at 125 W, a GEMM held at 660 W (66 °C), and in between only a load step's
        // passing readings (58 °C at 540 W).
        let mut points = vec![(540.0, 58.0, true)];
        points.extend([(125.0, 44.0, true); KNOWN_BIN_READINGS]);
        points.extend([(660.0, 66.0, true); KNOWN_BIN_READINGS]);
        let env = Envelope::fit(&points, 25.0, 0.05).unwrap();
        assert_eq!(env.hottest_near(540.0), 58.0);
        assert_eq!(env.hottest_held_near(540.0), 66.0);
        // Where a load was held, its own hottest; above every held load, the extrapolation.
        assert_eq!(env.hottest_held_near(125.0), env.hottest_near(125.0));
        assert_eq!(env.hottest_held_near(660.0), env.hottest_near(660.0));
        assert_eq!(env.hottest_held_near(800.0), env.hottest_near(800.0));
    }

    #[test]
    fn a_memory_load_is_held_where_the_history_ran_one_at_that_power_or_above() {
        let points = [(125.0, 40.0, true), (660.0, 55.0, true)];
        let env = Envelope::fit(&points, 25.0, 0.05).unwrap();
        assert!(!env.memory_load_held_near(400.0));
        // A copy held at 400 W: known there and below, not at 480 W.
        let env = env.with_memory_loads([400.0; KNOWN_BIN_READINGS]);
        assert!(env.memory_load_held_near(400.0));
        assert!(env.memory_load_held_near(200.0));
        assert!(!env.memory_load_held_near(480.0));
        // Beyond the envelope's last bin, counted in it.
        let env = env.with_memory_loads([900.0; KNOWN_BIN_READINGS]);
        assert!(env.memory_load_held_near(640.0));
    }
}
