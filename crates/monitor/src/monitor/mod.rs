//! The detectors, run sample by sample: the same code serves the live sampler and
//! `pog monitor replay`.

use crate::alert::{Alert, AlertKind, Finding, Gate, Severity, SignalChange};
use crate::baseline::{AmbientOffset, Level, RISE_C_PER_MIN, SETTLE_S};
use crate::config::Config;
use crate::degradation::{Degradation, DriftWatch, ResumeError};
use crate::model::{
    flat_over, power_steady_over, Envelope, Fingerprint, LoadState, Model, RecentPower, UtilBucket,
    FOREST_FEATURES, SENSOR_STEP_C, STEADY_FRACTION, STEADY_POWER_FRACTION,
};
use crate::response::{
    fit_step, taus, KeptHeldLevels, KeptResponse, ResponseResumeError, StepFit, ThermalResponse,
    MAX_RMS_C,
};
use crate::sample::{reasons, Sample, Signal};
use crate::stats::{median, theil_sen};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

/// Seconds of raw samples kept for slopes and windows.
const KEEP_S: f64 = 120.0;

/// Points of memory use kept for the leak detector: past this, every other one is dropped
/// (a GPU whose memory holds still for days must not grow the monitor).
const LEAK_POINTS: usize = 2048;

/// Points the leak detector's recent slope is fitted on (evenly thinned).
const TAIL_POINTS: usize = 64;

/// The fast leak check ([`Monitor::steady_growth`]): seconds of growth it needs.
const LEAK_FAST_S: f64 = 12.0;

/// ... after memory held still this long (a steady footprint) while the GPU worked ...
const LEAK_PLATEAU_S: f64 = 5.0;

/// ... at this utilization (%) or more (median): allocating without computing is loading or
/// reserving (a model read in, a buffer filled), not a running job leaking (the 60-s check
/// too wants most of its rises at this utilization) ...
const LEAK_WORKING_UTIL_PCT: f64 = 50.0;

/// ... growing by at least this many MiB, in every quarter of the stretch (one or two
/// allocations, a cache refilled after a free, do not grow in all four).
const LEAK_FAST_MIN_MIB: f64 = 128.0;

/// A power reading at most this fraction of one read at the same load and temperature a
/// moment before is a reading that drifted, not a load that fell.
const DRIFT_FRACTION: f64 = 0.85;

/// ... and at least this many watts below it.
const DRIFT_MIN_W: f64 = 30.0;

/// Seconds over which the energy counter's growth is compared with the power read.
const ENERGY_SPAN_S: f64 = 6.0;

/// Seconds the power read must have held steady (within [`STEADY_POWER_FRACTION`]) up to an
/// earlier reading for it to tell what "the same load" draws ([`Monitor::power_read_dropped`]):
/// utilization and clocks sampled once a second miss sub-second work, so a reading amid bursts
/// says "0 % utilization at 1980 MHz" at 293 W as at 124 W at rest (an H100 between GEMMs,
/// GPU-9ed4b029…, 2026-12-05), and a power falling after work is no drifted sensor.
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

/// Seconds a temperature must stay above what the power explains before it counts: the
/// power reading is an average over the last second, so a temperature that follows a load
/// step at once is ahead of it for up to a second.
const THERMAL_PERSIST_S: f64 = 1.0;

/// A GPU (die) temperature rising this fast (°C/s, over the slope window) at a steady load,
/// half the margin above the GPU's own typical level at that power, is a cooling failing (a
/// healthy die settles within seconds of a load change; the slowest failure in the
/// evaluation heats at 0.05 °C/s and takes the margin's full path).
const EARLY_SLOPE_C_PER_S: f64 = 0.1;

/// Seconds over which the early rule measures how far the die swings at the load it holds
/// ([`Monitor::swing`]): a die heating above its level by less than it fell back there
/// lately is the load's own rhythm, not the cooling.
const SWING_S: f64 = 40.0;

/// Seconds over which the power read must hold steady for a cap far below the GPU's own to
/// mean a lowered limit (a lowered limit holds the power at it; bursty work's readings jump):
/// at least four readings at the default 1 s interval.
const CAP_STEADY_S: f64 = 4.0;

/// The most seconds of readings at one steady power the shape of a rise is fitted on
/// ([`Monitor::room_shape`]) ...
const ROOM_FIT_S: f64 = 60.0;

/// ... and the fewest: a first-order approach needs its curve seen (a room's 20-s approach,
/// read in whole degrees, fits a straight line as well for its first 15 s). A rise younger
/// than this is held only where the memory rose as far as the die ([`Monitor::room_too_young`]).
const ROOM_FIT_MIN_S: f64 = 20.0;

/// The time constants (seconds) a rise from a change of room is fitted with: a step of the air
/// reaches the die through its heat sink over tens of seconds (the evaluation's rooms: 20 s);
/// a fit at the longest is a straight line, a cooling failing at a steady rate.
const ROOM_TAU_S: (f64, f64) = (2.0, 60.0);

/// A temperature whose Theil–Sen slope over the slope window stays within this (°C/s) at a
/// steady power is flat for a change of room ([`Monitor::room_shape`]).
const ROOM_FLAT_C_PER_S: f64 = 0.05;

/// °C two temperatures' rises may differ by and still be one change of room
/// ([`room_alike`]): each is a whole-degree reading against a median of them, half a sensor
/// step off either way.
const ROOM_ALIKE_C: f64 = 1.5;

/// Seconds the die must hold flat at a steady power (its Theil–Sen slope within
/// [`ROOM_FLAT_C_PER_S`], its readings within a sensor step either way) for a suspected
/// change of room to be said ([`Monitor::room_settled`]): a first-order approach still has at
/// most about three sensor steps to go when it rose less than two over this long.
const ROOM_SETTLED_S: f64 = 20.0;

/// Seconds a change of room suspected from the temperatures' shape ([`RoomStep`]) holds the
/// thermal warnings before it is said (flat) or given up: past this, they speak again.
const ROOM_HOLD_S: f64 = 300.0;

/// No sample for this many seconds, at least, is a gap ...
const GAP_MIN_S: f64 = 30.0;

/// ... and for this many times the usual interval (the median of the last [`INTERVALS`]).
const GAP_INTERVALS: f64 = 5.0;

/// Intervals between samples kept to know the usual one.
const INTERVALS: usize = 16;

/// Runs every detector over a GPU's samples, in time order.
#[derive(Debug, Clone)]
pub struct Monitor {
    config: Config,
    model: Option<Model>,
    /// Whether this GPU's model was checked against the healthy history's
    /// ([`Monitor::other_model`]): at the first sample that reads its memory.
    model_checked: bool,
    /// What this GPU's first sample that read its memory tells of its model.
    fingerprint: Option<Fingerprint>,
    gate: Gate,
    window: VecDeque<Sample>,
    recent_power: RecentPower,
    persist: HashMap<String, usize>,
    counters: Counters,
    leak: Option<Leak>,
    frozen: BTreeMap<Signal, Run>,
    /// The sensors judged frozen at the last sample: their readings explain nothing.
    frozen_now: BTreeSet<Signal>,
    /// The power reading has stayed unchanged longer than it ever did in healthy history (not
    /// yet long enough to call it frozen): the envelope over it waits.
    power_unchanged: bool,
    /// A temperature too high for the power read was blamed on the power reading (a drift);
    /// it stays blamed while that condition lasts.
    power_drifting: bool,
    perf: [Perf; 2],
    last_score: Option<f64>,
    samples: u64,
    /// Per condition held: the time it began (for conditions that must last some seconds).
    began: HashMap<String, f64>,
    /// This GPU's own thermal level (GPU, memory) against the healthy envelope.
    ambient: [Option<AmbientOffset>; 2],
    /// Levels learned in an earlier run (the history's), taken up when each tracker starts.
    resume: [Option<Level>; 2],
    /// The die's own level at each load (bin of recent power) the healthy history never held,
    /// against the envelope's hottest there plus the GPU's offset, for the early rule.
    load_levels: BTreeMap<usize, AmbientOffset>,
    /// Per temperature (GPU, memory): its current spell of thermal warnings.
    thermal_spells: [ThermalSpell; 2],
    /// Per temperature (GPU die, memory): its level at the steady load it holds now, once it
    /// has settled there ([`Monitor::settle`]); the early rule judges the die's heating only
    /// above it.
    settled_now: [Option<f64>; 2],
    /// Per temperature (GPU die, memory): its own response to load steps (its time constant),
    /// learned as it runs: it has not settled at a load while this says it still has a
    /// sensor step to go. Both are kept across runs ([`Monitor::response_state`]).
    responses: [ThermalResponse; 2],
    /// Per temperature (GPU die, memory): its own settled level at each load (bin of recent
    /// power) where it has held one ([`Monitor::held_level`]): the margin rule judges it from
    /// there at that load. Both are kept across runs ([`Monitor::response_state`]).
    held_levels: [BTreeMap<usize, HeldLevel>; 2],
    /// Per temperature (GPU die, memory): the loads (bins of recent power; a load read near a
    /// bin's edge falls in two) it held for the first time in the visit going on now
    /// ([`Monitor::held_level`]): a level its own approach there goes past by a sensor step
    /// is taken up ([`Monitor::settle`]). Forgotten when the power leaves its steady band.
    first_hold: [Vec<usize>; 2],
    /// The die's reading when the memory first held a load in the visit going on now
    /// (`first_hold`): the memory's level there is taken up only as far as the die warmed
    /// with it since ([`Monitor::past_first_hold`]).
    first_hold_die_c: Option<f64>,
    /// Per temperature (GPU die, memory): how far (°C) its level at the first load it held
    /// again in this run moved from the level kept there from an earlier run
    /// ([`Monitor::resume_response`]): the room (or the card) since. The levels kept at the
    /// loads it has not held again in this run are judged moved as much
    /// ([`Monitor::held_level_at`]), and its kept offset moves as much
    /// ([`AmbientOffset::moved_by`]).
    kept_moved_c: [Option<f64>; 2],
    /// A change of room suspected from the temperatures' shape, not yet said.
    room_step: Option<RoomStep>,
    /// Per temperature (die, memory): since when a suspected change of room held its thermal
    /// warning (said with the warning if it speaks after all).
    room_held_since: [Option<f64>; 2],
    /// The time of the last sample and the latest intervals between samples, for gaps.
    last_t: Option<f64>,
    intervals: VecDeque<f64>,
    /// The slow-degradation watch (the learned model): against the healthy history's thermal
    /// reference, or without one, a reference learned from the GPU's own first hour.
    drift: Degradation,
}

/// The most seconds between two readings that a held level may rise over
/// ([`Monitor::held_level`]): it rises only while the die holds its load, not between visits.
const HELD_STEP_S: f64 = 10.0;

/// The largest ratio of a temperature's own rise over idle to the healthy history's that a
/// card may learn ([`Monitor::rise_ratio`]): a heat sink (or paste) half again as resistive
/// as the history card's. The healthy H100s learn 1.1–1.43 against the coolest (its die
/// 24 °C from idle to 692 W, the others' up to 30 °C; GPU-2d7f0852…, 2026-12-06); a card
/// that rose further is judged beyond what healthy cards of one model show.
pub const RISE_RATIO_MAX: f64 = 1.5;

/// The smallest rise (°C) of the healthy history's typical level over its idle one at a load
/// for a ratio to be learned there ([`Monitor::rise_ratio`]): five sensor steps, so that a
/// degree of rounding moves the ratio by a fifth at most.
pub const RISE_RATIO_MIN_RISE_C: f64 = 5.0;

/// A temperature's own rise over idle against the healthy history's, learned at the loads it
/// held in this run ([`Monitor::rise_ratio`]): its thermal resistance relative to the history
/// card's. At a load it has not held, the history's rise over its idle is scaled by it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct RiseRatio {
    /// The ratio, within 1 to [`RISE_RATIO_MAX`].
    ratio: f64,
    /// The healthy history's typical level at the load this card held as its idle, °C.
    idle_c: f64,
}

/// The die's own settled level at one load ([`Monitor::held_level`]).
#[derive(Debug, Clone, Copy)]
struct HeldLevel {
    /// °C.
    level: f64,
    /// When the die last held this load.
    t: f64,
    /// Kept from an earlier run ([`Monitor::resume_response`]) and not yet held in this one:
    /// the die's first hold here takes its level afresh.
    kept: bool,
}

/// A change of room suspected from the temperatures' shape ([`Monitor::room_holds`]): both
/// rose alike above where they held at the same load, at an unchanged power, the one judged
/// flat or approaching a level under the critical excess as a first-order response does.
/// While it lasts, the margin rule and the early rule judge each temperature from its
/// provisional new level (`step_c` higher); the critical excess and the limit do not.
#[derive(Debug, Clone, Copy)]
struct RoomStep {
    /// When it was first suspected.
    since_t: f64,
    /// Per temperature (die, memory): how far (°C) the room moved it, as far as seen.
    step_c: [f64; 2],
}

#[derive(Debug, Clone, Default)]
struct Counters {
    last: HashMap<&'static str, u64>,
    increases: VecDeque<(f64, &'static str, u64)>,
}

#[derive(Debug, Clone)]
struct Leak {
    start_t: f64,
    start_mib: f64,
    max_mib: f64,
    points: Vec<(f64, f64)>,
    /// Samples at which memory rose and utilization was read: all, and those with the GPU
    /// working ([`LEAK_WORKING_UTIL_PCT`]).
    rises_with_util: usize,
    rises_while_working: usize,
}

#[derive(Debug, Clone)]
struct Run {
    value: f64,
    since: f64,
    samples: usize,
    power_min: f64,
    power_max: f64,
}

#[derive(Debug, Clone, Default)]
struct Perf {
    baseline: Vec<f64>,
    recent: VecDeque<f64>,
}

impl Monitor {
    /// A monitor with these settings; `model` is the GPU's healthy history, without which the
    /// load-conditioned detectors (thermal envelope, clock baselines, power cap, isolation
    /// forest) stay silent and only the rule-based ones run, with the slow-degradation watch
    /// learning its reference from the GPU's own first hour. A history of another GPU model
    /// (its [`Fingerprint`]) is set aside at the GPU's first reading of its memory: the GPU is
    /// judged as one without history, and told so once.
    pub fn new(config: Config, model: Option<Model>) -> Monitor {
        let gate = Gate::new(config.gate);
        Monitor {
            drift: Self::drift_watch(&config, model.as_ref()),
            config,
            model,
            model_checked: false,
            fingerprint: None,
            gate,
            window: VecDeque::new(),
            recent_power: RecentPower::default(),
            persist: HashMap::new(),
            counters: Counters::default(),
            leak: None,
            frozen: BTreeMap::new(),
            frozen_now: BTreeSet::new(),
            power_unchanged: false,
            power_drifting: false,
            perf: [Perf::default(), Perf::default()],
            last_score: None,
            samples: 0,
            began: HashMap::new(),
            ambient: [None, None],
            resume: [None, None],
            load_levels: BTreeMap::new(),
            thermal_spells: [ThermalSpell::default(), ThermalSpell::default()],
            settled_now: [None, None],
            responses: [ThermalResponse::default(), ThermalResponse::default()],
            held_levels: [BTreeMap::new(), BTreeMap::new()],
            first_hold: [Vec::new(), Vec::new()],
            first_hold_die_c: None,
            kept_moved_c: [None, None],
            room_step: None,
            room_held_since: [None, None],
            last_t: None,
            intervals: VecDeque::new(),
        }
    }

    /// The slow-degradation watch against `model`'s thermal reference, or without one.
    fn drift_watch(config: &Config, model: Option<&Model>) -> Degradation {
        Degradation::new(
            model.and_then(|m| m.thermal.clone()),
            [config.thermal_limit_c, config.mem_thermal_limit_c],
        )
    }

    /// The thermal levels this GPU has learned (GPU die, memory), to keep across runs.
    pub fn levels(&self) -> [Option<Level>; 2] {
        [0, 1].map(|i| self.ambient[i].as_ref().and_then(AmbientOffset::level))
    }

    /// Takes up levels learned in an earlier run (GPU die, memory): each sensor's tracker
    /// starts from its level, without the warm-up, where the healthy history is the one it
    /// was learned against.
    pub fn resume_levels(&mut self, levels: [Option<Level>; 2]) {
        self.resume = levels;
    }

    /// The GPU's learned thermal response (the time constants the die's and the memory's load
    /// steps showed, where each settled at each load it held, and what its readings tell of
    /// its model: [`KeptResponse`], JSON), to keep across runs; `None` before it learned any.
    pub fn response_state(&self) -> Option<String> {
        let learned = self.responses.each_ref().map(ThermalResponse::learned);
        if learned.iter().all(|taus| taus.is_empty())
            && self.held_levels.iter().all(BTreeMap::is_empty)
        {
            return None;
        }
        let [held, mem_held] = [0, 1].map(|i| {
            let levels = &self.held_levels[i];
            (!levels.is_empty()).then(|| KeptHeldLevels {
                bin_w: self.config.envelope_bin_w,
                by_bin: levels
                    .keys()
                    .filter_map(|&bin| Some((bin, self.held_level_at(i, bin)?)))
                    .collect(),
            })
        });
        let [taus_s, mem_taus_s] = learned.map(<[f64]>::to_vec);
        serde_json::to_string(&KeptResponse {
            taus_s,
            mem_taus_s,
            held,
            mem_held,
            fingerprint: self.fingerprint,
        })
        .ok()
    }

    /// Takes up the thermal response an earlier run learned ([`Monitor::response_state`]),
    /// before this GPU's first sample, whose readings (`live`: [`Fingerprint::of`] it) tell
    /// its model: a restarted monitor judges its die's and its memory's warm-ups with their
    /// own time constants at once, not the untuned rule until new load steps show them, and
    /// each temperature at each load it held before from where it settled there, until it
    /// holds that load again in this run (then taken afresh there, as the first time: a
    /// restart in another room does not judge the die by the old room's levels once it has
    /// shown the new ones). Refused as a whole (the GPU learns all afresh, as before) when the
    /// text is not a kept response, holds a time constant or a settled level (the die's or
    /// the memory's, each against its own limit) no GPU learns
    /// ([`ThermalResponse::resumed`], [`KeptHeldLevels::check`]), or was learned on another
    /// GPU model (both fingerprints known and [`Fingerprint::differs`]).
    pub fn resume_response(
        &mut self,
        state: &str,
        live: Option<&Fingerprint>,
    ) -> Result<(), ResponseResumeError> {
        let kept: KeptResponse = serde_json::from_str(state)?;
        if let (Some(kept), Some(live)) = (kept.fingerprint, live) {
            if let Some(how) = kept.differs(live) {
                return Err(ResponseResumeError::OtherModel(how));
            }
        }
        let [die, mem] =
            [&kept.taus_s, &kept.mem_taus_s].map(|taus| ThermalResponse::resumed(taus));
        let responses = [die?, mem?];
        let limits = [self.config.thermal_limit_c, self.config.mem_thermal_limit_c];
        let kept_levels = [kept.held, kept.mem_held];
        for (held, limit) in kept_levels.iter().zip(limits) {
            if let Some(held) = held {
                held.check(self.config.envelope_bin_w, limit)?;
            }
        }
        self.responses = responses;
        self.kept_moved_c = [None, None];
        for (levels, held) in self.held_levels.iter_mut().zip(kept_levels) {
            *levels = held
                .into_iter()
                .flat_map(|held| held.by_bin)
                .map(|(bin, level)| {
                    (
                        bin,
                        HeldLevel {
                            level,
                            t: 0.0,
                            kept: true,
                        },
                    )
                })
                .collect();
        }
        Ok(())
    }

    /// The isolation-forest score of the last sample, if the model has a forest.
    pub fn anomaly_score(&self) -> Option<f64> {
        self.last_score
    }

    /// Samples seen.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Conditions raised and not yet cleared.
    pub fn open_alerts(&self) -> usize {
        self.gate.open_count()
    }

    /// Runs every detector on the next sample; returns the alerts it raises (after
    /// de-duplication).
    pub fn push(&mut self, s: &Sample) -> Vec<Alert> {
        self.samples += 1;
        let gap = self.timeline(s);
        let other = self.other_model(s);
        self.window.push_back(s.clone());
        while self.window.front().is_some_and(|f| s.t - f.t > KEEP_S) {
            self.window.pop_front();
        }
        let recent_power = self
            .recent_power
            .push(s.t, s.power_w, self.config.load_window_s);
        let state = LoadState::of(s, self.config.busy_util_pct);
        let mut findings: Vec<Finding> = gap.into_iter().chain(other).collect();
        // The sensors first: a frozen reading must not be read as a thermal runaway.
        self.frozen(s, &mut findings);
        self.thermal(s, recent_power, &mut findings);
        self.power_against_energy(s, &mut findings);
        self.throttling(s, state, &mut findings);
        self.clocks(s, state, &mut findings);
        self.counters(s, &mut findings);
        self.xid(s, &mut findings);
        self.memory_leak(s, &mut findings);
        self.performance(s, &mut findings);
        self.multivariate(s, recent_power, &mut findings);
        self.degradation(s, &mut findings);
        self.gate.admit(s.t, findings)
    }

    /// At the first sample that reads the GPU's memory (its clock or size): whether the
    /// healthy history is of another GPU model ([`Fingerprint::differs`]). If it is, its
    /// levels (clocks, power cap, thermal envelope, forest, thermal reference) judge nothing
    /// here: the model is set aside, the GPU learns its own levels from scratch as one with
    /// no history does, and one info finding says so.
    fn other_model(&mut self, s: &Sample) -> Option<Finding> {
        if self.model_checked {
            return None;
        }
        let live = Fingerprint::of([s])?;
        self.model_checked = true;
        self.fingerprint = Some(live);
        let history = self.model.as_ref()?.fingerprint?;
        let how = history.differs(&live)?;
        self.model = None;
        self.drift = Self::drift_watch(&self.config, None);
        let mut signals = BTreeMap::new();
        if let (Some((_, there)), Some((here, _))) = (history.mem_clock_mhz, live.mem_clock_mhz) {
            signals.insert(
                Signal::MemClock.name().into(),
                SignalChange::against(here, there, "the healthy history's highest memory clock"),
            );
        }
        if let (Some(there), Some(here)) = (history.mem_total_mib, live.mem_total_mib) {
            signals.insert(
                "mem_total_mib".into(),
                SignalChange::against(here, there, "the healthy history's memory size"),
            );
        }
        Some(Finding {
            kind: AlertKind::OtherModel,
            key: "other_model".into(),
            severity: Severity::Info,
            signals,
            message: format!(
                "the healthy history is of another GPU model ({how}): its levels judge nothing here; this GPU learns its own from scratch, as one without history"
            ),
        })
    }

    /// A gap in the samples or a clock that stepped back: one info finding, and every window
    /// starts afresh (slopes, persistence, leak and frozen-sensor runs, counter bursts would
    /// otherwise span the gap or run backwards). What was learned (the GPU's thermal level,
    /// counter values, performance figures) is kept.
    fn timeline(&mut self, s: &Sample) -> Option<Finding> {
        let last = self.last_t.replace(s.t)?;
        let dt = s.t - last;
        let usual = median(self.intervals.make_contiguous()).filter(|_| self.intervals.len() >= 3);
        let (key, message) = match usual {
            _ if dt < 0.0 => (
                "clock_step",
                format!(
                    "the samples' clock stepped back {:.1} s (t = {:.1} after {last:.1})",
                    -dt, s.t
                ),
            ),
            Some(usual) if dt > GAP_MIN_S.max(GAP_INTERVALS * usual) => (
                "gap",
                format!(
                    "no samples for {dt:.1} s (t = {last:.1} to {:.1}; usually {usual:.1} s apart)",
                    s.t
                ),
            ),
            _ => {
                self.intervals.push_back(dt);
                if self.intervals.len() > INTERVALS {
                    self.intervals.pop_front();
                }
                return None;
            }
        };
        self.window.clear();
        self.recent_power = RecentPower::default();
        self.persist.clear();
        self.began.clear();
        self.leak = None;
        self.frozen.clear();
        self.frozen_now.clear();
        self.power_unchanged = false;
        self.power_drifting = false;
        self.settled_now = [None, None];
        self.room_step = None;
        self.room_held_since = [None, None];
        for response in &mut self.responses {
            response.restart();
        }
        self.counters.increases.clear();
        for level in self.ambient.iter_mut().flatten() {
            level.restart_timing();
        }
        for level in self.load_levels.values_mut() {
            level.restart_timing();
        }
        self.drift.restart_timing();
        if key == "clock_step" {
            // The gate's cool-downs are times too: conditions still true alert once again.
            self.gate = Gate::new(self.config.gate);
        }
        let mut signals = BTreeMap::new();
        signals.insert(
            "interval_s".into(),
            SignalChange::value(dt, "seconds since the previous sample"),
        );
        Some(Finding {
            kind: AlertKind::SampleGap,
            key: key.into(),
            severity: Severity::Info,
            signals,
            message: format!("{message}: the detectors' windows start afresh"),
        })
    }

    /// True once `condition` has held for the configured number of consecutive samples.
    fn held(&mut self, name: &str, condition: bool, needed: usize) -> bool {
        let count = self.persist.entry(name.to_string()).or_insert(0);
        *count = if condition { *count + 1 } else { 0 };
        *count >= needed.max(1)
    }

    /// True once `condition` has held for `needed` consecutive samples and at least
    /// `seconds` since the first of them.
    fn held_for(
        &mut self,
        name: &str,
        condition: bool,
        needed: usize,
        t: f64,
        seconds: f64,
    ) -> bool {
        let enough = self.held(name, condition, needed);
        if !condition {
            self.began.remove(name);
            return false;
        }
        let since = *self.began.entry(name.to_string()).or_insert(t);
        enough && t - since >= seconds
    }

    /// Whether the power read held within [`STEADY_POWER_FRACTION`] over the last
    /// `seconds` (at least four readings).
    fn power_steady(&self, seconds: f64) -> bool {
        power_steady_over(self.last(seconds))
    }

    /// The samples of the last `seconds` (up to the latest).
    fn last(&self, seconds: f64) -> impl Iterator<Item = &Sample> {
        let now = self.window.back().map_or(f64::NEG_INFINITY, |s| s.t);
        self.window.iter().filter(move |w| now - w.t <= seconds)
    }

    /// How far a signal fell back from a peak (°C) over the last [`SWING_S`], at the load it
    /// holds now (readings at [`STEADY_POWER_FRACTION`] of `recent_power_w` or more). A die
    /// under bursty work swings by up to 10 °C every few seconds at a steady power reading
    /// (an H200's half-duty GEMMs, GPU-8a0a3477, 2026-12-05: 56–66 °C every ~10 s at 480–547
    /// W), and each rising half reads as heating; a die warming to a new load, holding it, or
    /// heating as its cooling fails falls back by no more than the sensor's 1 °C step.
    fn swing(&self, signal: Signal, recent_power_w: f64) -> f64 {
        let Some(now) = self.window.back().map(|s| s.t) else {
            return 0.0;
        };
        let readings = self
            .window
            .iter()
            .filter(|x| now - x.t <= SWING_S)
            .filter(|x| {
                x.power_w
                    .is_some_and(|p| p >= STEADY_POWER_FRACTION * recent_power_w)
            })
            .filter_map(|x| x.signal(signal));
        let (mut peak, mut fall) = (f64::NEG_INFINITY, 0.0f64);
        for v in readings {
            peak = peak.max(v);
            fall = fall.max(peak - v);
        }
        fall
    }

    /// Notes each temperature's level (`i`: 0 the die, 1 the memory) at the steady load it
    /// holds now: once its readings over the slope window stayed within a sensor step either
    /// way of each other ([`SENSOR_STEP_C`]), the power read steady meanwhile, and its own
    /// learned response ([`ThermalResponse::left_to_settle`]) leaves it less than a sensor
    /// step to go at this load, their median; from then on the lowest such median (a die
    /// cooling after a heavier load is followed down). Forgotten when the power read leaves
    /// its steady band. A
    /// healthy die warms to a new load over its heat sink's time, not seconds: an H100 SXM
    /// from 57 to 71 °C in the 68 s after a step to 700 W, still heating 0.2 °C/s 27–40 s in
    /// and flat within 2 °C for 10 s at 245 s, 5 °C short of where it settled
    /// (GPU-9ed4b029…, 2026-12-05); an H200's die from 47 to 50 °C over 12 s into a 420-W
    /// copy (GPU-a6d69bc2…). Until it holds, its level at that load is not seen. The memory
    /// alike: an H100's HBM at 65–68 °C in a 375-W device copy where its die read 44 °C
    /// (GPU-960288a5…, 2026-12-06).
    fn settle(&mut self, i: usize, signal: Signal) {
        let window_s = self.config.slope_window_s;
        if !self.power_steady(window_s) {
            self.settled_now[i] = None;
            self.first_hold[i].clear();
            if i == 1 {
                self.first_hold_die_c = None;
            }
            return;
        }
        // Held: flat, and (by the card's τ) less than a sensor step to go; before a τ is
        // learned, not climbing at the early rule's own slope, however flat its readings (a
        // die warming 0.2 °C/s reads flat within two sensor steps over the window: the third
        // cool H100 in its run's first load, GPU-b699410f…).
        let still_climbing = || {
            self.responses[i].tau_s().is_none()
                && self
                    .slope(signal, window_s)
                    .is_some_and(|v| v >= EARLY_SLOPE_C_PER_S)
        };
        if let Some(level) = flat_over(self.last(window_s), signal).filter(|_| {
            self.responses[i]
                .left_to_settle()
                .is_none_or(|left| left < SENSOR_STEP_C)
                && !still_climbing()
        }) {
            self.settled_now[i] = Some(match self.settled_now[i] {
                Some(held) if self.past_first_hold(i, signal, held, level) => level,
                Some(held) => held.min(level),
                None => level,
            });
        }
    }

    /// Whether a temperature (`i`) that first held this load in this visit at `held`, and
    /// reads flat a sensor step or more above it now (`level`), went past it as one
    /// first-order approach: its readings since the load began within [`MAX_RMS_C`] of a
    /// warming approach seen bending ([`ThermalResponse::approach_unlearned`]) that heads to
    /// `level` or past it. That hold was a plateau on the way, not its level: an approach of
    /// two speeds (an H100's HBM in its first 700-W load, GPU-9ed4b029…: 49 → 57 °C in 10 s,
    /// flat for 6 s, on to 64 °C over 40 s). Only at a load it had not held before: a level
    /// held in an earlier visit, or kept from an earlier run, is followed as before, and a
    /// cooling failing at a steady rate reads no flat level, nor fits an approach. The memory
    /// only: the HBM warms with its own traffic at once and with the die and board after; the
    /// die keeps the lowest level it held in the visit, the early rule's reference (a die
    /// whose cooler fails in a load's first seconds holds a plateau too: the evaluation's
    /// 0.16 °C/s failure 8 s into a 470-W copy was said 6 s later with its level raised). And
    /// only where the die warmed at least half as far since the memory's first hold: the
    /// HBM's slow part is the die and board heating it (the H100 above: its die 65 → 71 °C
    /// meanwhile); an HBM heating alone at a steady load, its die flat, is its own cooling
    /// failing (0.1 °C/s from a copy's 26th second, its first plateau 65 °C: taken up, the
    /// margin rule and the forest would follow it).
    fn past_first_hold(&self, i: usize, signal: Signal, held: f64, level: f64) -> bool {
        let die_rose = match (self.first_hold_die_c, self.window.back()) {
            (Some(then), Some(s)) => s.temp_gpu_c.map_or(0.0, |now| now - then),
            _ => 0.0,
        };
        signal == Signal::TempMem
            && !self.first_hold[i].is_empty()
            && level >= held + SENSOR_STEP_C
            && die_rose >= (level - held) / 2.0
            && self.responses[i]
                .approach_unlearned()
                .is_some_and(|(fit, _)| {
                    fit.rms_c <= MAX_RMS_C
                        && fit.approach_c <= -SENSOR_STEP_C
                        && fit.settle_c >= level - SENSOR_STEP_C / 2.0
                })
    }

    /// The die's own settled level at the load in bin `bin` of recent power, learned from
    /// where it held ([`Monitor::settle`]: flat, and its learned response leaving it less than
    /// a sensor step to go): the first time it holds a load under `bound` (the hottest the
    /// history allows there plus the critical excess), that level; after, followed down at
    /// once and up at most [`RISE_C_PER_MIN`] a minute of holding there, as the GPU's own
    /// offset is. A card
    /// whose die runs relatively hotter at some loads than its offset, learned mostly at
    /// others, says (a cool H100 judged by a hot one's history: 11 °C cooler at idle, 6 °C at
    /// 700 W once settled, GPU-9ed4b029…, 2026-12-05) is judged at those loads from where it
    /// settled, not from its offset. A cooling failing at a load the die held before is judged
    /// from the level it held; a die that heats without settling (a cooler failing at a
    /// steady rate) never teaches it. A level kept from an earlier run judges until the die
    /// first holds the load in this one, which takes it afresh.
    /// The memory (`i` 1) is judged alike from where it settled at each load: a card whose
    /// HBM runs warmer against its die than the history's card does (23 °C above its die in
    /// a device copy, against 11 °C) is not failing there.
    fn held_level(&mut self, i: usize, t: f64, bin: usize, bound: f64) -> Option<f64> {
        if let Some(held) = self.settled_now[i].filter(|h| *h < bound) {
            let first = HeldLevel {
                level: held,
                t,
                kept: false,
            };
            let mut moved_c = None;
            let mut new = false;
            let level = self.held_levels[i]
                .entry(bin)
                .and_modify(|l| {
                    if l.kept {
                        moved_c = Some(held - l.level);
                        *l = first;
                    }
                })
                .or_insert_with(|| {
                    new = true;
                    first
                });
            if new {
                if i == 1 && self.first_hold[i].is_empty() {
                    self.first_hold_die_c = self.window.back().and_then(|s| s.temp_gpu_c);
                }
                self.first_hold[i].push(bin);
            }
            // Up only over the seconds it holds here (a sample's worth at most each); at once
            // where this visit's first hold here was a plateau on its way ([`Monitor::settle`]).
            let holding_s = (t - level.t).clamp(0.0, HELD_STEP_S);
            let up_to = if self.first_hold[i].contains(&bin) {
                held
            } else {
                level.level + RISE_C_PER_MIN / 60.0 * holding_s
            };
            *level = HeldLevel {
                level: held.min(up_to),
                t,
                kept: false,
            };
            if let Some(moved_c) = moved_c.filter(|_| self.kept_moved_c[i].is_none()) {
                self.kept_moved_c[i] = Some(moved_c);
                if let Some(offset) = self.ambient[i].as_mut() {
                    offset.moved_by(moved_c);
                }
            }
        }
        self.held_level_at(i, bin)
    }

    /// A temperature's (`i`: 0 the die, 1 the memory) own settled level at the load in bin
    /// `bin` of recent power, where it has one: as held in this run, or as kept from an
    /// earlier run, moved as far as its level at the first load it held again in this run
    /// moved from the one kept there (`kept_moved_c`). A monitor restarted in a
    /// room 4 °C warmer holds idle 4 °C above where it settled there before: its kept level at
    /// a heavier load it has not yet held in this run is judged 4 °C warmer too (the second
    /// cool H100's HBM in its 375-W copy: 69 °C where 65 °C was kept, GPU-960288a5…).
    fn held_level_at(&self, i: usize, bin: usize) -> Option<f64> {
        let held = self.held_levels[i].get(&bin)?;
        let moved_c = self.kept_moved_c[i].filter(|_| held.kept).unwrap_or(0.0);
        Some(held.level + moved_c)
    }

    /// A temperature's (`i`: 0 the die, 1 the memory) own rise over idle against the healthy
    /// history's (`expected`: its envelope shifted by this GPU's level), learned at the loads
    /// it held in this run ([`Monitor::held_level`], not those kept from an earlier one): its
    /// idle is the lightest load it held where the history held one too; at each heavier load
    /// it held where the history's typical level rose [`RISE_RATIO_MIN_RISE_C`] or more above
    /// the history's there, its own rise over its idle divided by the history's; the ratio is
    /// the one at the load where the history rose most (where a degree of rounding moves it
    /// least; the smallest of them left the second cool H100's HBM at 1.04 where its
    /// full-load GEMM gives 1.2–1.3, GPU-960288a5…), at most [`RISE_RATIO_MAX`];
    /// `None` before such a load was held, or
    /// where it is 1 or less (a card that rises no further than the history's is judged as
    /// before). A card whose heat sink or paste is a quarter less good than the history card's
    /// rises a quarter further at every load (the warmer H100s against the coolest: at full
    /// load 4–6 °C past its envelope shifted by their idle level, GPU-2d7f0852…). Learned
    /// only from levels the margin rule would have passed (at most `margin` above the
    /// envelope shifted, [`Expected::allowed_at`] without the ratio): a cooling that fails
    /// while the card holds its loads cannot teach itself more than that and the clamp allow.
    fn rise_ratio(&self, i: usize, expected: &Expected, margin: f64) -> Option<RiseRatio> {
        let bin_w = self.config.envelope_bin_w;
        let envelope = &expected.envelope;
        let mut held = self.held_levels[i]
            .iter()
            .filter(|(_, l)| !l.kept)
            .filter_map(|(&bin, l)| {
                let p = (bin as f64 + 0.5) * bin_w;
                Some((p, l.level, envelope.typical_known_at(p)?))
            });
        let (_, own_idle, history_idle) = held.next()?;
        let ratio = held
            .filter(|&(p, level, _)| {
                level <= envelope.hottest_held_near(p) + expected.shift + margin
            })
            .filter_map(|(_, level, typical)| {
                let rise = typical - history_idle;
                (rise >= RISE_RATIO_MIN_RISE_C).then_some((rise, (level - own_idle) / rise))
            })
            .reduce(|a, b| if b.0 > a.0 { b } else { a })?
            .1;
        (ratio > 1.0).then(|| RiseRatio {
            ratio: ratio.min(RISE_RATIO_MAX),
            idle_c: history_idle,
        })
    }

    /// Whether a temperature (`i`: 0 the die, 1 the memory) is still approaching the level of
    /// the load it holds now, warming or cooling, as a first-order approach with the card's
    /// own learned time constant ([`ThermalResponse::approach`]: readings within
    /// [`MAX_RMS_C`] of the fit, more than a sensor step left) toward a level under `bound`
    /// (°C). A cooler failing at a steady rate does not fit such an approach, or heads past
    /// the bound. Cooling counts too: an H100's HBM at rest after bursty work cools from 53
    /// to 47 °C over 25 s (GPU-9ed4b029…); restarted in a warmer room with its τ kept, it was
    /// judged at 50 °C against its levels from the old room before it settled.
    /// Where the card has shown no τ yet, or its τ's fit does not describe this load's
    /// readings, the fit with any τ from its own up ([`ThermalResponse::approach_unlearned`]:
    /// a first-order approach seen bending) judges alike: a die still warming in its run's
    /// first load after idle, or an HBM warming slower than the short τ its bursts showed,
    /// is not yet at its level.
    fn approaching_under(&self, i: usize, bound: f64) -> bool {
        let approaching = |(fit, since): (StepFit, f64)| {
            fit.rms_c <= MAX_RMS_C && fit.left_at(since) >= SENSOR_STEP_C && fit.settle_c < bound
        };
        let response = &self.responses[i];
        match response.approach() {
            Some(learned) if learned.0.rms_c <= MAX_RMS_C => approaching(learned),
            _ => response.approach_unlearned().is_some_and(approaching),
        }
    }

    /// The Theil–Sen slope of a signal over the last `seconds`, per second.
    fn slope(&self, signal: Signal, seconds: f64) -> Option<f64> {
        let now = self.window.back()?.t;
        let points: Vec<(f64, f64)> = self
            .window
            .iter()
            .filter(|x| now - x.t <= seconds)
            .filter_map(|x| Some((x.t, x.signal(signal)?)))
            .collect();
        if points.len() < 4 {
            return None;
        }
        theil_sen(&points)
    }

    /// The readings (seconds since the first, °C) of `signal` over the longest stretch of the
    /// last `seconds` at one steady power (its lowest within [`STEADY_FRACTION`] of its
    /// highest), up to the latest.
    fn steady_stretch(&self, signal: Signal, seconds: f64) -> Vec<(f64, f64)> {
        let (mut low, mut high) = (f64::INFINITY, 0.0f64);
        let now = self.window.back().map_or(f64::NEG_INFINITY, |x| x.t);
        let mut stretch: Vec<(f64, f64)> = self
            .window
            .iter()
            .rev()
            .take_while(|x| now - x.t <= seconds)
            .take_while(|x| {
                let Some(p) = x.power_w else { return true };
                low = low.min(p);
                high = high.max(p);
                low >= STEADY_FRACTION * high
            })
            .filter_map(|x| Some((x.t, x.signal(signal)?)))
            .collect();
        stretch.reverse();
        let t0 = stretch.first().map_or(0.0, |p| p.0);
        stretch.into_iter().map(|(t, v)| (t - t0, v)).collect()
    }

    /// A temperature's (`i`: 0 the die, 1 the memory) readings at the steady power it holds
    /// now (at most [`ROOM_FIT_S`] of them), from its last reading at or below the level it
    /// held at this load (`rises[i]` below the latest) where it has one: seconds since the
    /// first, °C. A cooling failing after the die held heats from there in a straight line.
    fn rise(&self, i: usize, signal: Signal, rises: [Option<f64>; 2]) -> Vec<(f64, f64)> {
        let points = self.steady_stretch(signal, ROOM_FIT_S);
        let held_c = rises[i].zip(points.last()).map(|(rise, p)| p.1 - rise);
        match held_c.and_then(|held| points.iter().rposition(|p| p.1 <= held)) {
            Some(k) => {
                let t0 = points[k].0;
                points[k..].iter().map(|&(t, v)| (t - t0, v)).collect()
            }
            None => points,
        }
    }

    /// Whether a temperature's (`i`) rise at a steady power ([`Monitor::rise`]) is too young
    /// for its shape to tell ([`ROOM_FIT_MIN_S`]) and both temperatures rose alike, the
    /// memory as far as the die or further ([`room_alike`]): a room's first seconds (a
    /// cooling failing heats the die, the memory after it). Its warning waits, at most that
    /// long from the rise's start, for the shape.
    fn room_too_young(&self, i: usize, signal: Signal, rises: [Option<f64>; 2]) -> bool {
        let young = self.power_steady(self.config.slope_window_s)
            && self
                .rise(i, signal, rises)
                .last()
                .is_some_and(|&(span_s, _)| span_s < ROOM_FIT_MIN_S);
        young && room_alike(rises).is_some_and(|[die, mem]| mem >= die - SENSOR_STEP_C / 2.0)
    }

    /// Whether a temperature (`i`: 0 the die, 1 the memory) `excess` °C above the hottest
    /// expected rose as a change of room moves it: at a steady power, flat now (its slope
    /// over the slope window within [`ROOM_FLAT_C_PER_S`], its readings within a sensor
    /// step), or still rising as a first-order approach does (its readings at this power,
    /// [`ROOM_FIT_MIN_S`] to [`ROOM_FIT_S`] of them, fitted by [`fit_step`] within
    /// [`MAX_RMS_C`] with a time constant short of [`ROOM_TAU_S`]'s longest: decelerating;
    /// from its last reading at or below where it held at this load, `rises[i]` below now)
    /// toward a level under the critical excess. Returns how far (°C) it still has to rise. A
    /// cooling failing at a steady rate heats in a straight line, the longest τ's fit.
    fn room_shape(
        &self,
        i: usize,
        signal: Signal,
        excess: f64,
        critical: f64,
        rises: [Option<f64>; 2],
    ) -> Option<f64> {
        let window_s = self.config.slope_window_s;
        if !self.power_steady(window_s) {
            return None;
        }
        let flat = self
            .slope(signal, window_s)
            .is_some_and(|v| v.abs() <= ROOM_FLAT_C_PER_S)
            && flat_over(self.last(window_s), signal).is_some();
        if flat {
            return Some(0.0);
        }
        let points = self.rise(i, signal, rises);
        let &(span_s, now) = points.last()?;
        if span_s < ROOM_FIT_MIN_S {
            return None;
        }
        let (short, long) = ROOM_TAU_S;
        let fit = fit_step(&points, taus(short, long))?;
        let left = (fit.settle_c - now).max(0.0);
        (fit.tau_s < long
            && fit.rms_c <= MAX_RMS_C
            && fit.approach_c <= -SENSOR_STEP_C
            && excess + left < critical)
            .then_some(left)
    }

    /// Whether a thermal warning on a temperature (`i`: 0 the die, 1 the memory) is held as a
    /// change of room: one is suspected ([`RoomStep`], begun here, outside a spell of thermal
    /// warnings already said ([`RESAY_S`]), where both temperatures
    /// rose alike above where they held at this load and this one's shape is a room's,
    /// [`Monitor::room_shape`]) and, judged from its provisional new level, neither the margin
    /// rule nor the early rule would speak, nor has it risen half the margin past the room's
    /// step (as far as a room's shape showed it, at any load), nor does it keep heating past
    /// that step at a steady power without slowing as a first-order approach does.
    fn room_holds(
        &mut self,
        i: usize,
        signal: Signal,
        t: f64,
        judged: RoomJudged,
        rises: [Option<f64>; 2],
    ) -> bool {
        let (margin, critical) = (
            self.config.thermal_margin_c,
            self.config.thermal_critical_excess_c,
        );
        let Some(excess) = judged.excess else {
            return false;
        };
        // Not within a spell of thermal warnings already said: the room was not the story.
        let in_spell = self.thermal_spells.iter().any(|spell| {
            spell
                .last_t
                .is_some_and(|last| t >= last && t - last < RESAY_S)
        });
        // Shaped as a room now: the step begins, or grows as far as this shape shows.
        if let (Some(left), Some(alike)) = (
            self.room_shape(i, signal, excess, critical, rises),
            room_alike(rises),
        ) {
            let seen = alike.map(|x| x + left);
            match self.room_step.as_mut() {
                Some(step) => {
                    for (was, now) in step.step_c.iter_mut().zip(seen) {
                        *was = was.max(now);
                    }
                }
                None if !in_spell => {
                    self.room_step = Some(RoomStep {
                        since_t: t,
                        step_c: seen,
                    })
                }
                None => {}
            }
        }
        let Some(step) = self.room_step else {
            let young = !in_spell && self.room_too_young(i, signal, rises);
            if young {
                self.room_held_since[i].get_or_insert(t);
            }
            return young;
        };
        let moved = step.step_c[i];
        // Risen half the margin past the room's step, at whatever load: not the room.
        let past_step = rises[i].is_some_and(|rise| rise - moved >= margin / 2.0);
        let over_margin = judged.over_margin && excess - moved >= margin;
        let heating = judged.heating
            && judged
                .above
                .is_some_and(|above| above - moved >= margin / 2.0);
        let window_s = self.config.slope_window_s;
        // Heating on past the room's step at a steady power, not as a first-order approach.
        let keeps_heating = rises[i].is_some_and(|rise| rise - moved >= SENSOR_STEP_C)
            && self.power_steady(window_s)
            && self
                .slope(signal, window_s)
                .is_some_and(|v| v >= EARLY_SLOPE_C_PER_S)
            && self
                .room_shape(i, signal, excess, critical, rises)
                .is_none();
        if over_margin || heating || keeps_heating || past_step {
            return false;
        }
        self.room_held_since[i].get_or_insert(t);
        true
    }

    /// A suspected change of room ([`RoomStep`]) that has settled: the die flat at a steady
    /// power for [`ROOM_SETTLED_S`], both temperatures still alike above where they held at
    /// this load. Both levels move by their rise, and one `ambient_shift` line says so.
    fn room_settled(&mut self, s: &Sample, p: f64, rises: [Option<f64>; 2]) -> Option<Finding> {
        self.room_step?;
        let window_s = ROOM_SETTLED_S;
        let signal = Signal::TempGpu;
        let temp = s.signal(signal)?;
        let trend = self.slope(signal, window_s)?;
        if !self.power_steady(window_s)
            || trend.abs() > ROOM_FLAT_C_PER_S
            || flat_over(self.last(window_s), signal).is_none()
        {
            return None;
        }
        let moved = room_alike(rises)?;
        for (j, by) in moved.iter().enumerate() {
            if let Some(level) = self.ambient[j].as_mut() {
                level.stepped(s.t, *by);
            }
        }
        for settled in [Signal::TempGpu, Signal::TempMem] {
            self.held_for(settled.name(), false, 1, s.t, 0.0);
        }
        let held_s = self
            .room_held_since
            .iter()
            .flatten()
            .map(|since| s.t - since)
            .fold(0.0, f64::max);
        self.room_step = None;
        self.room_held_since = [None, None];
        let mut finding = ambient_shift_finding(
            signal,
            temp,
            p,
            moved[0],
            trend,
            Some((Signal::TempMem, moved[1])),
        );
        finding.message = format!(
            "{} at {temp:.0} °C: this GPU's level at the same power moved {:+.1} °C (temp_mem {:+.1} °C with it), both alike at an unchanged power and flat now ({trend:+.3} °C/s over {window_s:.0} s, at {p:.0} W; its warnings held {held_s:.0} s meanwhile): the room or the cooling changed; judged from this level on",
            signal.name(),
            moved[0],
            moved[1],
        );
        Some(finding)
    }

    fn thermal(&mut self, s: &Sample, recent_power: Option<f64>, out: &mut Vec<Finding>) {
        let checks = [
            (0, Signal::TempGpu, self.config.thermal_limit_c),
            (1, Signal::TempMem, self.config.mem_thermal_limit_c),
        ];
        let (margin, critical) = (
            self.config.thermal_margin_c,
            self.config.thermal_critical_excess_c,
        );
        // A frozen power reading says nothing about the heat the GPU makes: the envelope over
        // it is not used (the absolute limits still are).
        let power_frozen = self.frozen_now.contains(&Signal::Power) || self.power_unchanged;
        let mut any_excess = false;
        for (i, signal, _) in checks {
            self.responses[i].observe(s.t, s.power_w, s.signal(signal));
            self.settle(i, signal);
        }
        // Each temperature's rise above where it held at this load: a change of room moves
        // both alike, a cooling failing heats the die ahead of the memory.
        let rises: [Option<f64>; 2] = match recent_power {
            Some(p) => {
                let bin = (p.max(0.0) / self.config.envelope_bin_w) as usize;
                [0, 1].map(|j| Some(s.signal(checks[j].1)? - self.held_level_at(j, bin)?))
            }
            None => [None, None],
        };
        if self
            .room_step
            .is_some_and(|r| s.t < r.since_t || s.t - r.since_t > ROOM_HOLD_S)
        {
            self.room_step = None;
        }
        if let Some(p) = recent_power {
            if let Some(said) = self.room_settled(s, p, rises) {
                out.push(said);
            }
        }
        for (i, signal, limit) in checks {
            let Some(temp) = s.signal(signal) else {
                self.held_for(signal.name(), false, 1, s.t, 0.0);
                continue;
            };
            if self.frozen_now.contains(&signal) {
                // A frozen thermometer: the sensor alert says so, no thermal conclusion.
                self.held_for(signal.name(), false, 1, s.t, 0.0);
                continue;
            }
            let slope = self.slope(signal, self.config.slope_window_s);
            let envelope = self
                .model
                .as_ref()
                .and_then(|m| match signal {
                    Signal::TempGpu => m.temp_gpu_envelope.as_ref(),
                    _ => m.temp_mem_envelope.as_ref(),
                })
                .filter(|_| !power_frozen)
                // The memory under a memory-bound load the history never held at this power
                // or above: it says nothing of how hot the HBM runs there (only the limit does).
                .filter(|e| {
                    signal != Signal::TempMem
                        || !s.memory_bound()
                        || recent_power.is_some_and(|p| e.memory_load_held_near(p))
                })
                .cloned();
            // The envelope shifted by this GPU's own level, learned as it runs.
            let expected = match (envelope, recent_power) {
                (Some(envelope), Some(p)) => {
                    let resume = self.resume[i].take();
                    let level = self.ambient[i].get_or_insert_with(|| {
                        resume
                            .and_then(|l| AmbientOffset::resumed(envelope.reference(), l))
                            .unwrap_or_else(|| AmbientOffset::new(envelope.reference()))
                    });
                    let residual = temp - envelope.typical_at(p);
                    let offset = level.offset();
                    // The early rule's level: the healthy history's typical one where it held
                    // this load; else, for the die, this GPU's own at this load once learned
                    // (against the hottest healthy reading there and its offset).
                    let known = envelope.typical_known_at(p);
                    let own_load = (signal == Signal::TempGpu && known.is_none())
                        .then_some(offset)
                        .flatten()
                        .map(|o| {
                            let bin = envelope.bin(p);
                            (bin, temp - envelope.hottest_near(p) - o)
                        });
                    let above_level = match (offset, known, own_load) {
                        (Some(_), Some(typical), _) => Some(level.above(temp - typical)),
                        (_, _, Some((bin, r))) => self
                            .load_levels
                            .get(&bin)
                            .and_then(AmbientOffset::offset)
                            .map(|own| r - own),
                        _ => None,
                    };
                    let mut expected = Expected {
                        shift: level.shift(),
                        above_level,
                        level: level.describe(),
                        envelope,
                        held: None,
                        own_level_only: false,
                        rise: None,
                    };
                    let excess = temp - expected.at(p);
                    level.observe(s.t, residual, excess < margin / 2.0);
                    // Learned at a steady power only, and never from a reading already half
                    // the margin above the hottest expected: at most that much above it.
                    if let Some((bin, r)) = own_load
                        .filter(|_| s.power_w.is_some_and(|read| read >= STEADY_FRACTION * p))
                    {
                        self.load_levels
                            .entry(bin)
                            .or_insert_with(|| AmbientOffset::new(0.0))
                            .observe(s.t, r, excess < margin / 2.0);
                    }
                    // A level that moved and holds flat: the room or the cooling changed.
                    // Only at a load the healthy history held (`known`): elsewhere it has no
                    // level to have moved from (its envelope there is a load step's passing
                    // readings), and a memory-bound load there heats the HBM more than the
                    // loads the history only passed through there, with no room changed.
                    let bin = expected.envelope.bin(p);
                    let bound = expected.allowed_at(p) + critical;
                    expected.held = self.held_level(i, s.t, bin, bound).map(|l| (bin, l));
                    expected.rise = self.rise_ratio(i, &expected, margin);
                    // A thin healthy history (`Coverage::is_thin`: it held too few loads to
                    // tell this GPU's level at one load from its level at another): the
                    // die's level at each load is this GPU's to show. Until the die holds the
                    // load, only the limits judge it, as without history; after, the margin
                    // rule and the critical excess from where it held. The early rule does not
                    // speak: a die that first held a load may still creep a degree or two as
                    // its heat sink warms (an H200 at 570 W, 61 to 63 °C over 40 s,
                    // GPU-8a0a3477…, 2026-12-05), with no typical level there to tell it from
                    // a failing cooler.
                    let thin = signal == Signal::TempGpu
                        && self.model.as_ref().is_some_and(|m| m.coverage.is_thin());
                    if thin {
                        expected.above_level = None;
                        expected.own_level_only = true;
                    }
                    let unlearned = thin && expected.held.is_none();
                    // Nor at the level the die itself settled at at this load.
                    let excess_to_settle = if temp < limit - 5.0 && known.is_some() && !unlearned {
                        expected
                            .held_at(p)
                            .map_or(excess, |held| excess.min(temp - held))
                    } else {
                        f64::INFINITY
                    };
                    let steady_slope = (excess >= margin && self.power_steady(SETTLE_S))
                        .then(|| self.slope(signal, SETTLE_S))
                        .flatten();
                    let level = self.ambient[i].as_mut().expect("set above");
                    if let Some(moved) =
                        level.settled(s.t, excess_to_settle, (margin, critical), steady_slope)
                    {
                        let trend = steady_slope.unwrap_or(0.0);
                        let other = self.ambient[1 - i]
                            .as_mut()
                            .and_then(|o| o.follow(s.t, margin));
                        let other_signal = checks[1 - i].1;
                        for settled in [signal, other_signal] {
                            self.held_for(settled.name(), false, 1, s.t, 0.0);
                        }
                        out.push(ambient_shift_finding(
                            signal,
                            temp,
                            p,
                            moved,
                            trend,
                            other.map(|o| (other_signal, o)),
                        ));
                        self.room_step = None;
                        self.room_held_since = [None, None];
                        continue;
                    }
                    (!unlearned).then_some(expected)
                }
                _ => None,
            };
            let healthy_max = match (&expected, recent_power) {
                (Some(e), Some(p)) => Some((e.allowed_at(p), p)),
                _ => None,
            };
            let excess = healthy_max.map(|(h, _)| temp - h);
            // The critical excess is measured from the envelope without the rise ratio.
            let rise_extra = match (&expected, recent_power) {
                (Some(e), Some(p)) => e.rise_extra(p),
                _ => 0.0,
            };
            let rising = slope.unwrap_or(0.0) >= 0.0;
            // The die heating fast at a steady load, already half the margin above this GPU's
            // own typical level and above the level it held at this load, and more than it
            // swung about its trend there before: a healthy die that settled at a load stays
            // there (the memory takes tens of seconds, so it has only the margin's rule), a die
            // still warming to a new load is no failing cooling (this GPU's level there, which
            // its offset learned at other loads may miss by degrees, is not yet seen), and a
            // bursty load's rhythm is no heating.
            let heating = signal == Signal::TempGpu
                && slope.is_some_and(|v| v >= EARLY_SLOPE_C_PER_S)
                && self.settled_now[0].is_some_and(|held| temp >= held + margin / 2.0)
                && self.power_steady(self.config.slope_window_s)
                && expected
                    .as_ref()
                    .and_then(|e| e.above_level)
                    .is_some_and(|above| {
                        above >= margin / 2.0
                            && above > self.swing(signal, recent_power.unwrap_or(0.0))
                    });
            // The temperature still approaching this load's level as its own learned response
            // says, toward a level under the critical excess: not yet its level here (it is
            // taken once it holds it, `Monitor::held_level`); the critical excess and the
            // limit still speak. (Fitted only where the margin rule would speak.)
            let approaching =
                || healthy_max.is_some_and(|(h, _)| self.approaching_under(i, h + critical));
            let over_margin = rising
                && match excess {
                    Some(e) => e >= margin && !approaching(),
                    // No healthy history: warn within 5 °C of the limit.
                    None => temp >= limit - 5.0,
                };
            let severity = if temp >= limit || excess.is_some_and(|e| e + rise_extra >= critical) {
                Some(Severity::Critical)
            } else if heating || over_margin {
                Some(Severity::Warning)
            } else {
                None
            };
            let persist = self.config.persist_samples;
            if !self.held_for(
                signal.name(),
                severity.is_some(),
                persist,
                s.t,
                THERMAL_PERSIST_S,
            ) {
                self.thermal_spells[i].spoke = false;
                if self.room_step.is_none() {
                    self.room_held_since[i] = None;
                }
                continue;
            }
            let Some(severity) = severity else { continue };
            if severity == Severity::Critical {
                // Past the critical excess or the limit: no change of room is that.
                self.room_step = None;
            }
            // Too hot for the power read, but not for the power read a moment ago at the same
            // load and temperature, or not for the power the energy counter gives: the power
            // reading is wrong, not the cooling.
            if temp < limit {
                if let (Some(e), Some(read)) = (&expected, s.power_w) {
                    any_excess = true;
                    let evidence = self.power_reading_low(s, signal, temp, e);
                    if evidence.is_some() || self.power_drifting {
                        self.power_drifting = true;
                        if let Some(evidence) = evidence {
                            out.push(power_drift_finding(signal, temp, read, evidence));
                        }
                        self.thermal_spells[i].spoke = false;
                        continue;
                    }
                    // The heat fits the power the energy counter gives: the reading is in
                    // doubt (the drift alert follows once its average is seen low), so no
                    // thermal conclusion on it.
                    // (Heating at a steady power reading, still under the margin: in doubt
                    // when the counter's power is well above the reading.)
                    let heating_only = excess.is_none_or(|x| x < margin);
                    let counted_fits = self.energy_recent_power(s).is_some_and(|counted| {
                        let read = recent_power.unwrap_or(0.0);
                        if heating_only {
                            counted - read >= DRIFT_MIN_W && read <= DRIFT_FRACTION * counted
                        } else {
                            temp < e.allowed_at(read.max(counted)) + margin
                        }
                    });
                    if counted_fits {
                        self.thermal_spells[i].spoke = false;
                        continue;
                    }
                }
            }
            // A change of room, by its shape: held, and said once flat (`Monitor::room_settled`).
            if severity == Severity::Warning {
                let above = expected.as_ref().and_then(|e| e.above_level);
                let judged = RoomJudged {
                    excess,
                    above,
                    heating,
                    over_margin,
                };
                if self.room_holds(i, signal, s.t, judged, rises) {
                    self.thermal_spells[i].spoke = false;
                    continue;
                }
            }
            if !self.thermal_spells[i].speak(s.t, severity, excess.unwrap_or(temp - limit)) {
                continue;
            }
            let mut signals = BTreeMap::new();
            let mut message = format!("{} at {temp:.0} °C", signal.name());
            if let (Some((h, p)), Some(e)) = (healthy_max, &expected) {
                signals.insert(
                    signal.name().to_string(),
                    SignalChange::against(
                        temp,
                        h,
                        format!(
                            "hottest healthy {} at {p:.0} W of recent power, {}",
                            signal.name(),
                            e.level
                        ),
                    ),
                );
                match e.above_level.filter(|_| temp - h < margin) {
                    // Said by the early rule, under the margin: against the GPU's own level.
                    Some(above) => message.push_str(&format!(
                        ", {above:.1} °C above this GPU's typical level at {p:.0} W and heating at a steady load"
                    )),
                    None => message.push_str(&format!(
                        ", {:.1} °C above the hottest this GPU should reach at {p:.0} W",
                        temp - h
                    )),
                }
            } else {
                signals.insert(
                    signal.name().to_string(),
                    SignalChange::against(temp, limit, "thermal limit"),
                );
            }
            if let Some(slope) = slope {
                signals.insert(
                    format!("{}_slope_c_per_s", signal.name()),
                    SignalChange::value(
                        slope,
                        format!("Theil–Sen slope over {:.0} s", self.config.slope_window_s),
                    ),
                );
                if temp < limit && slope > 0.01 {
                    let eta = (limit - temp) / slope;
                    signals.insert(
                        "time_to_limit_s".into(),
                        SignalChange::value(
                            eta,
                            format!("to the {limit:.0} °C limit at this slope"),
                        ),
                    );
                    message.push_str(&format!(
                        ", rising {slope:.2} °C/s: {limit:.0} °C in about {eta:.0} s"
                    ));
                }
            }
            if temp >= limit {
                message.push_str(&format!(", at or above the {limit:.0} °C limit"));
            }
            if let Some(held_t) = self.room_held_since[i].take() {
                message.push_str(&format!(
                    " (held {:.0} s as a possible change of room: not one)",
                    s.t - held_t
                ));
            }
            out.push(Finding {
                kind: AlertKind::ThermalRunaway,
                key: signal.name().into(),
                severity,
                signals,
                message,
            });
        }
        if !any_excess {
            self.power_drifting = false;
        }
    }

    /// A power reading below the energy counter's growth, on average over the counter's last
    /// span and now ([`Monitor::power_below_energy`]), for [`DRIFT_HELD_S`]: the reading
    /// drifted, whatever the temperature says (at idle a low reading heats nothing).
    fn power_against_energy(&mut self, s: &Sample, out: &mut Vec<Finding>) {
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
    fn power_reading_low(
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
    fn energy_recent_power(&self, s: &Sample) -> Option<f64> {
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

    fn throttling(&mut self, s: &Sample, state: Option<LoadState>, out: &mut Vec<Finding>) {
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

    fn clocks(&mut self, s: &Sample, state: Option<LoadState>, out: &mut Vec<Finding>) {
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

    fn counters(&mut self, s: &Sample, out: &mut Vec<Finding>) {
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

    fn xid(&mut self, s: &Sample, out: &mut Vec<Finding>) {
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

    fn memory_leak(&mut self, s: &Sample, out: &mut Vec<Finding>) {
        let Some(used) = s.mem_used_mib else { return };
        let tolerance = (0.01 * used).max(256.0);
        let restart = match &self.leak {
            None => true,
            Some(l) => used < l.max_mib - tolerance,
        };
        if restart {
            self.leak = Some(Leak {
                start_t: s.t,
                start_mib: used,
                max_mib: used,
                points: vec![(s.t, used)],
                rises_with_util: 0,
                rises_while_working: 0,
            });
            return;
        }
        if let Some(growth) = self.steady_growth() {
            let against = format!(
                "memory in use {:.0} s ago, after {:.0} s held there with the GPU working; none of it freed since",
                growth.duration_s, growth.plateau_s
            );
            let how = format!(
                "in {:.0} s, steadily (every quarter of the time) and never freed, after {:.0} s at a steady {:.0} MiB with the GPU working",
                growth.duration_s, growth.plateau_s, growth.start_mib
            );
            out.push(self.leak_finding(
                s,
                used,
                growth.start_mib,
                growth.duration_s,
                growth.rate,
                against,
                how,
            ));
            return;
        }
        let leak = self.leak.as_mut().expect("set above");
        leak.max_mib = leak.max_mib.max(used);
        let rose = leak.points.last().is_some_and(|&(_, before)| used > before);
        if let (true, Some(util)) = (rose, s.util_gpu_pct) {
            leak.rises_with_util += 1;
            if util >= LEAK_WORKING_UTIL_PCT {
                leak.rises_while_working += 1;
            }
        }
        leak.points.push((s.t, used));
        if leak.points.len() > LEAK_POINTS {
            // Keep the first, the last and every other one between: growth between kept points
            // is the sum of the growth between the dropped ones.
            let last = *leak.points.last().expect("non-empty");
            let mut i = 0;
            leak.points.retain(|_| {
                i += 1;
                i % 2 == 1
            });
            if leak.points.last() != Some(&last) {
                leak.points.push(last);
            }
        }
        let duration = s.t - leak.start_t;
        let increase = used - leak.start_mib;
        if duration < self.config.leak_min_duration_s
            || increase < self.config.leak_min_increase_mib
        {
            return;
        }
        // A leak grows all along, not in one or two steps (an allocation ramp, a model
        // loaded): the growth must show in at least six of the stretch's eight parts, and it
        // must still be going on (positive slope over the last fifth of the stretch, at least
        // 20 s). Its rate is the median part's, so one large allocation does not inflate it.
        let part = duration / 8.0;
        let mut grown = [0.0f64; 8];
        for pair in leak.points.windows(2) {
            if pair[1].1 > pair[0].1 {
                let i = (((pair[1].0 - leak.start_t) / part) as usize).min(7);
                grown[i] += pair[1].1 - pair[0].1;
            }
        }
        let spread = grown.iter().filter(|g| **g > 0.0).count() >= 6;
        let tail_s = (duration / 5.0).max(20.0);
        let recent: Vec<(f64, f64)> = leak
            .points
            .iter()
            .filter(|p| s.t - p.0 <= tail_s)
            .copied()
            .collect();
        let step = recent.len().div_ceil(TAIL_POINTS).max(1);
        let tail: Vec<(f64, f64)> = recent.iter().step_by(step).copied().collect();
        let still_growing = tail.len() >= 3 && theil_sen(&tail).is_some_and(|v| v > 0.0);
        // Memory that rose mostly while the GPU computed nothing was loaded or reserved (a
        // model read in, a buffer filled), not leaked by a running job.
        let while_working =
            leak.rises_with_util == 0 || 2 * leak.rises_while_working >= leak.rises_with_util;
        if !spread || !still_growing || !while_working {
            return;
        }
        let rate = median(&grown).unwrap_or(0.0) / part;
        let (start_mib, since) = (leak.start_mib, format!("{duration:.0} s"));
        out.push(self.leak_finding(
            s,
            used,
            start_mib,
            duration,
            rate,
            format!("memory in use {since} ago, since when it has not been freed"),
            format!("in {since} without being freed (rate: the median of its eight parts)"),
        ));
    }

    /// Memory growing steadily right after the GPU worked at a steady footprint, none of it
    /// freed: the fast leak check. The stretch starts where memory last held still for
    /// [`LEAK_PLATEAU_S`] (since the last free, by any amount); it needs [`LEAK_FAST_S`] of
    /// growth in every quarter, at least [`LEAK_FAST_MIN_MIB`], the GPU working ([`LEAK_WORKING_UTIL_PCT`]) on the plateau
    /// and through the growth, and no process started meanwhile (where the count is read): a
    /// job starting up allocates in steps before it settles.
    fn steady_growth(&self) -> Option<SteadyGrowth> {
        let points: Vec<&Sample> = self
            .window
            .iter()
            .filter(|w| w.mem_used_mib.is_some())
            .collect();
        let mem = |i: usize| points[i].mem_used_mib.unwrap_or(0.0);
        let last = points.len().checked_sub(1)?;
        // Back to the last free.
        let mut run_start = last;
        while run_start > 0 && mem(run_start - 1) <= mem(run_start) {
            run_start -= 1;
        }
        // The latest plateau of LEAK_PLATEAU_S followed by growth: [plateau_start, grow_from].
        let (plateau_start, grow_from) = (run_start..last).rev().find_map(|i| {
            if mem(i + 1) <= mem(i) {
                return None;
            }
            let mut p = i;
            while p > run_start && mem(p - 1) == mem(i) {
                p -= 1;
            }
            (points[i].t - points[p].t >= LEAK_PLATEAU_S).then_some((p, i))
        })?;
        let (start_t, start_mib) = (points[grow_from].t, mem(grow_from));
        let now = points[last].t;
        let duration_s = now - start_t;
        let increase = mem(last) - start_mib;
        if duration_s < LEAK_FAST_S || increase < LEAK_FAST_MIN_MIB {
            return None;
        }
        let quarter = duration_s / 4.0;
        let mut grown = [0.0f64; 4];
        for i in grow_from..last {
            let part = (((points[i + 1].t - start_t) / quarter) as usize).min(3);
            // Rises only (none falls after the last free): the growth in each quarter.
            grown[part] += (mem(i + 1) - mem(i)).max(0.0);
        }
        if grown.iter().any(|g| *g <= 0.0) {
            return None;
        }
        let working = |from: usize, to: usize| {
            let utils: Vec<f64> = points[from..=to]
                .iter()
                .filter_map(|w| w.util_gpu_pct)
                .collect();
            median(&utils).is_some_and(|u| u >= LEAK_WORKING_UTIL_PCT)
        };
        if !working(plateau_start, grow_from) || !working(grow_from + 1, last) {
            return None;
        }
        let first_count = points[plateau_start..=last]
            .iter()
            .find_map(|w| w.processes);
        let process_started = points[plateau_start..=last]
            .iter()
            .filter_map(|w| w.processes)
            .any(|n| first_count.is_some_and(|first| n > first));
        if process_started {
            return None;
        }
        Some(SteadyGrowth {
            start_mib,
            plateau_s: start_t - points[plateau_start].t,
            duration_s,
            // The median quarter's: one large allocation on the way does not inflate it.
            rate: median(&grown).unwrap_or(0.0) / quarter,
        })
    }

    /// A memory-leak finding: `used` now, `start_mib` `duration` seconds ago, growing at
    /// `rate` MiB/s; `against` says what the start is, `how` how it grew (both in words).
    #[allow(clippy::too_many_arguments)]
    fn leak_finding(
        &self,
        s: &Sample,
        used: f64,
        start_mib: f64,
        duration: f64,
        rate: f64,
        against: String,
        how: String,
    ) -> Finding {
        let increase = used - start_mib;
        let total = self
            .config
            .mem_total_mib
            .or_else(|| Some(s.mem_used_mib? + s.mem_free_mib?));
        let mut signals = BTreeMap::new();
        signals.insert(
            "mem_used_mib".into(),
            SignalChange::against(used, start_mib, against),
        );
        signals.insert(
            "growth_mib_per_s".into(),
            SignalChange::value(rate, format!("growth rate over the last {duration:.0} s")),
        );
        let mut message = format!(
            "memory leak: {used:.0} MiB in use, up {increase:.0} MiB ({rate:.1} MiB/s) {how}"
        );
        let mut severity = Severity::Warning;
        if let Some(total) = total {
            let eta = (total - used).max(0.0) / rate;
            signals.insert(
                "time_to_full_s".into(),
                SignalChange::value(eta, format!("until {total:.0} MiB are used at this rate")),
            );
            message.push_str(&format!(": full in about {eta:.0} s"));
            if eta < 300.0 {
                severity = Severity::Critical;
            }
        }
        Finding {
            kind: AlertKind::MemoryLeak,
            key: "mem_used".into(),
            severity,
            signals,
            message,
        }
    }

    fn frozen(&mut self, s: &Sample, out: &mut Vec<Finding>) {
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

    fn performance(&mut self, s: &Sample, out: &mut Vec<Finding>) {
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

    /// The slow-degradation watch ([`crate::degradation`]): fed every sample, it learns only
    /// from those at which no thermal, sensor or throttle rule spoke.
    fn degradation(&mut self, s: &Sample, out: &mut Vec<Finding>) {
        let suspect = out.iter().any(|f| {
            f.severity >= Severity::Warning
                && matches!(
                    f.kind,
                    AlertKind::ThermalRunaway
                        | AlertKind::SensorFrozen
                        | AlertKind::SensorDrift
                        | AlertKind::Throttling
                )
        }) || self.frozen_now.contains(&Signal::Power)
            || self.power_drifting;
        out.extend(self.drift.push(s, suspect));
    }

    /// The slow-degradation watch's state to keep across runs (JSON), once it has a thermal
    /// reference ([`crate::degradation::DriftState`]).
    pub fn drift_state(&self) -> Option<String> {
        serde_json::to_string(&self.drift.state()?).ok()
    }

    /// Seconds of samples the slow-degradation watch has seen, once it has a thermal reference
    /// (to keep its state when it moved on).
    pub fn drift_elapsed_s(&self) -> Option<f64> {
        self.drift.elapsed_s()
    }

    /// Takes up a slow-degradation watch an earlier run kept ([`Monitor::drift_state`]): it
    /// goes on from its fits, points and this GPU's frozen reference, where it was learned
    /// against the same healthy history.
    pub fn resume_drift(&mut self, state: &str) -> Result<(), ResumeError> {
        self.drift.resume(serde_json::from_str(state)?)
    }

    /// The slow-degradation watch (its points so far, die and memory, and its frozen per-GPU
    /// reference), once it has a thermal reference: from the healthy history at once, else
    /// after the GPU's own first hour.
    pub fn drift(&self) -> Option<&DriftWatch> {
        self.drift.watch()
    }

    fn multivariate(&mut self, s: &Sample, recent_power: Option<f64>, out: &mut Vec<Finding>) {
        let Some(forest) = self.model.as_ref().and_then(|m| m.forest.as_ref()) else {
            return;
        };
        // Each temperature against the envelope shifted by this GPU's own level, or where it
        // settled higher at this load itself, from there (`Monitor::held_level`), as the
        // margin rule judges it.
        let offsets = [0, 1].map(|i| {
            let offset = self.ambient[i]
                .as_ref()
                .and_then(AmbientOffset::offset)
                .unwrap_or(0.0);
            let settled = recent_power
                .zip(forest.envelopes[i].as_ref())
                .and_then(|(p, e)| Some(self.held_level_at(i, e.bin(p))? - e.at(p)));
            settled.map_or(offset, |above| offset.max(above))
        });
        let row = forest.row(s, recent_power, offsets);
        let score = forest.forest.score(&row);
        let threshold = forest.threshold;
        self.last_score = Some(score);
        let needed = self.config.forest_persist_samples;
        if !self.held("forest", score > threshold, needed) {
            return;
        }
        let Some(forest) = self.model.as_ref().and_then(|m| m.forest.as_ref()) else {
            return;
        };
        let mut signals = BTreeMap::new();
        signals.insert(
            "anomaly_score".into(),
            SignalChange::against(
                score,
                threshold,
                "isolation-forest threshold: highest healthy score plus margin",
            ),
        );
        let mut moved = Vec::new();
        if let Some(nearest) = forest.nearest(&row) {
            let mut diffs: Vec<(usize, f64)> = (0..row.len())
                .map(|f| (f, (row[f] - nearest[f]).abs() / forest.scale[f]))
                .collect();
            diffs.sort_by(|a, b| b.1.total_cmp(&a.1));
            for &(f, d) in diffs.iter().take(3).filter(|(_, d)| *d > 0.5) {
                signals.insert(
                    FOREST_FEATURES[f].to_string(),
                    SignalChange::against(
                        row[f],
                        nearest[f],
                        "the nearest healthy state in the training history",
                    ),
                );
                moved.push(format!(
                    "{} {:.0} vs {:.0} ({d:.1} scales)",
                    FOREST_FEATURES[f], row[f], nearest[f]
                ));
            }
        }
        out.push(Finding {
            kind: AlertKind::Multivariate,
            key: "forest".into(),
            severity: Severity::Warning,
            signals,
            message: format!(
                "a state unlike this GPU's healthy history (score {score:.3} > {threshold:.3}): {}",
                if moved.is_empty() {
                    "no single signal stands out".to_string()
                } else {
                    moved.join(", ")
                }
            ),
        });
    }
}

/// Memory growing steadily after a steady footprint ([`Monitor::steady_growth`]).
#[derive(Debug, Clone, Copy)]
struct SteadyGrowth {
    /// MiB in use where the growth began.
    start_mib: f64,
    /// Seconds memory held at `start_mib` before.
    plateau_s: f64,
    /// Seconds since the growth began.
    duration_s: f64,
    /// MiB per second: the median quarter's growth.
    rate: f64,
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
struct LowPowerEvidence {
    truth_w: f64,
    against: String,
    why: String,
}

/// A spell of thermal warnings on one temperature: they come and go with the load (a
/// temperature above the GPU's level rises and falls as the work changes), and one that comes
/// back within [`RESAY_S`] of the last at no worse a level is the same news, not said again.
#[derive(Debug, Clone, Default)]
struct ThermalSpell {
    /// The last time the condition held.
    last_t: Option<f64>,
    /// The highest excess said in this spell.
    said: f64,
    /// The condition was said at the previous sample.
    spoke: bool,
}

impl ThermalSpell {
    /// Whether a thermal condition that holds at `t`, `excess` °C above the GPU's level, is
    /// said: when it starts a spell, is critical, or is at least [`RESAY_WORSE_C`] worse than
    /// said before, and then for as long as it lasts (the gate de-duplicates).
    fn speak(&mut self, t: f64, severity: Severity, excess: f64) -> bool {
        let in_spell = self
            .last_t
            .is_some_and(|last| t >= last && t - last < RESAY_S);
        let speak = !in_spell
            || self.spoke
            || severity == Severity::Critical
            || excess >= self.said + RESAY_WORSE_C;
        self.last_t = Some(t);
        self.spoke = speak;
        if speak {
            self.said = if in_spell {
                self.said.max(excess)
            } else {
                excess
            };
        }
        speak
    }
}

/// Seconds after a thermal warning within which the same temperature coming back is the
/// same spell.
const RESAY_S: f64 = 600.0;

/// °C worse than said before that a thermal warning coming back must be to be said again.
const RESAY_WORSE_C: f64 = 1.0;

/// The hottest healthy temperature this GPU should reach at a recent power: the healthy
/// history's envelope near it ([`Envelope::hottest_near`], or for the margin rule
/// [`Envelope::hottest_held_near`]), shifted by the GPU's own level
/// ([`AmbientOffset::shift`]).
#[derive(Debug, Clone)]
struct Expected {
    envelope: Envelope,
    shift: f64,
    /// How far (°C) the reading is above the GPU's own typical level at its power, once that
    /// level is learned ([`AmbientOffset::above`]) and where the healthy history held that
    /// power ([`Envelope::typical_known_at`]); elsewhere, for the die, above its own level at
    /// that load once it has learned one (`Monitor::load_levels`).
    above_level: Option<f64>,
    /// The shift in words.
    level: String,
    /// The temperature's own settled level at one load (its bin of recent power, °C), where
    /// it held one ([`Monitor::held_level`]).
    held: Option<(usize, f64)>,
    /// The healthy history is thin ([`Coverage::is_thin`](crate::model::Coverage::is_thin)):
    /// where the die held this load, that level alone is what it should reach.
    own_level_only: bool,
    /// The temperature's own rise over idle against the history's, where learned
    /// ([`Monitor::rise_ratio`]): at a load it has not held, the history's rise scaled by it.
    rise: Option<RiseRatio>,
}

impl Expected {
    /// The hottest healthy reading near this recent power, shifted: the bound a reading is
    /// learned under (half the margin above it at most) and a power reading is doubted by.
    fn at(&self, recent_power_w: f64) -> f64 {
        self.envelope.hottest_near(recent_power_w) + self.shift
    }

    /// The hottest this GPU should reach at this recent power, judged from the loads the
    /// history held ([`Envelope::hottest_held_near`]), shifted, or where the die settled
    /// higher at this load itself, that level ([`Monitor::held_level`]); under a thin history
    /// where the die settled, that level alone: what the margin rule warns against.
    /// At a load it has not held, the history's rise over its idle there is scaled by the
    /// temperature's own ratio where learned ([`Expected::rise_extra`]).
    fn allowed_at(&self, recent_power_w: f64) -> f64 {
        let shifted = self.envelope.hottest_held_near(recent_power_w) + self.shift;
        match self.held_at(recent_power_w) {
            Some(held) if self.own_level_only => held,
            Some(held) => held.max(shifted),
            None => shifted + self.rise_extra(recent_power_w),
        }
    }

    /// How much more (°C) the temperature may rise at this recent power than the envelope
    /// shifted by its level allows, by its own rise ratio ([`Monitor::rise_ratio`]): the
    /// history's rise from its idle to its hottest here, times the ratio less one. Nothing
    /// at a load it held (its own level there judges it) or before a ratio is learned. The
    /// critical excess is measured without it: the ratio widens the warning, not the
    /// critical.
    fn rise_extra(&self, recent_power_w: f64) -> f64 {
        match self.rise {
            Some(rise) if self.held_at(recent_power_w).is_none() => {
                let history_rise = self.envelope.hottest_held_near(recent_power_w) - rise.idle_c;
                (rise.ratio - 1.0) * history_rise.max(0.0)
            }
            _ => 0.0,
        }
    }

    /// The temperature's own settled level at this recent power's load, where it held one.
    fn held_at(&self, recent_power_w: f64) -> Option<f64> {
        self.held
            .filter(|(bin, _)| *bin == self.envelope.bin(recent_power_w))
            .map(|(_, level)| level)
    }
}

/// What the thermal rules found of one temperature at one sample, for
/// [`Monitor::room_holds`].
#[derive(Debug, Clone, Copy)]
struct RoomJudged {
    /// °C above the hottest this GPU should reach at its power (`None` without history).
    excess: Option<f64>,
    /// °C above this GPU's typical level at its power, where known.
    above: Option<f64>,
    /// The early rule spoke (the die heating at a steady load).
    heating: bool,
    /// The margin rule spoke.
    over_margin: bool,
}

/// Both temperatures' rises above where they held at this load (die, memory), where they rose
/// alike, as a change of room moves them: each at least a sensor step ([`SENSOR_STEP_C`]),
/// within [`ROOM_ALIKE_C`] of each other. A cooling failing heats the die ahead of its memory.
fn room_alike(rises: [Option<f64>; 2]) -> Option<[f64; 2]> {
    let [Some(die), Some(mem)] = rises else {
        return None;
    };
    (die >= SENSOR_STEP_C && mem >= SENSOR_STEP_C && (die - mem).abs() <= ROOM_ALIKE_C)
        .then_some([die, mem])
}

/// A temperature settled at a new level, `moved` °C from the GPU's former one.
fn ambient_shift_finding(
    signal: Signal,
    temp: f64,
    recent_power_w: f64,
    moved: f64,
    trend: f64,
    other: Option<(Signal, f64)>,
) -> Finding {
    let mut signals = BTreeMap::new();
    let mut also = String::new();
    if let Some((other, shift)) = other {
        signals.insert(
            format!("{}_level_shift_c", other.name()),
            SignalChange::value(
                shift,
                "this GPU's level against the healthy envelope, moved by",
            ),
        );
        also = format!(" ({} {shift:+.1} °C with it)", other.name());
    }
    signals.insert(
        signal.name().to_string(),
        SignalChange::value(temp, format!("at {recent_power_w:.0} W of recent power")),
    );
    signals.insert(
        format!("{}_level_shift_c", signal.name()),
        SignalChange::value(
            moved,
            "this GPU's level against the healthy envelope, moved by",
        ),
    );
    Finding {
        kind: AlertKind::AmbientShift,
        key: signal.name().into(),
        severity: Severity::Info,
        signals,
        message: format!(
            "{} at {temp:.0} °C: this GPU's level at the same power moved {moved:+.1} °C{also} and holds there ({trend:+.3} °C/s over {SETTLE_S:.0} s, at {recent_power_w:.0} W now): the room or the cooling changed; judged from this level on",
            signal.name(),
        ),
    }
}

/// A power reading too low for what the GPU does, for the temperature of `signal`.
fn power_drift_finding(
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

/// Runs a fresh monitor over a whole trace and returns every alert.
pub fn replay(samples: &[Sample], config: &Config, model: Option<Model>) -> Vec<Alert> {
    let mut monitor = Monitor::new(config.clone(), model);
    samples.iter().flat_map(|s| monitor.push(s)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t: f64, mem: f64) -> Sample {
        let mut s = Sample::at(t);
        s.mem_used_mib = Some(mem);
        s
    }

    /// At about 300 W, energy read every `every`-th second (in between carried, or with
    /// `empty` not read, as a recorded trace has it), frozen from `frozen_from` on (`None`:
    /// never); the times of its frozen-sensor alerts.
    fn energy_frozen_alerts(every: u32, frozen_from: Option<u32>, empty: bool) -> Vec<f64> {
        let mut m = Monitor::new(Config::default(), None);
        let mut read = 0.0;
        let mut alerts = Vec::new();
        for i in 0..120 {
            let mut s = Sample::at(f64::from(i));
            // A live power reading (a constant one would be a frozen sensor of its own).
            s.power_w = Some(300.0 + f64::from(i % 2));
            if i % every == 0 {
                if frozen_from.is_none_or(|f| i < f) {
                    read = f64::from(i) * 300_000.0;
                }
                s.energy_mj = Some(read);
            } else if !empty {
                s.carried.push(Signal::Energy);
                s.energy_mj = Some(read);
            }
            alerts.extend(
                m.push(&s)
                    .into_iter()
                    .filter(|a| a.kind == AlertKind::SensorFrozen)
                    .map(|a| a.t),
            );
        }
        alerts
    }

    #[test]
    fn an_energy_reading_carried_or_not_read_is_not_a_frozen_sensor_but_a_frozen_counter_is() {
        for empty in [false, true] {
            // Read every 10 s, carried or empty between: never frozen.
            assert_eq!(energy_frozen_alerts(10, None, empty), Vec::<f64>::new());
            // The counter stops at 50 s: caught from the reads alone, after three of them.
            let caught = energy_frozen_alerts(10, Some(50), empty);
            assert!(
                caught.first().is_some_and(|&t| (60.0..=80.0).contains(&t)),
                "{empty}: {caught:?}"
            );
        }
        // Read every second, it stops: caught within seconds.
        let caught = energy_frozen_alerts(1, Some(50), false);
        assert!(caught.first().is_some_and(|&t| t <= 55.0), "{caught:?}");
    }

    #[test]
    fn memory_held_still_for_a_day_keeps_the_monitor_small() {
        let mut m = Monitor::new(Config::default(), None);
        for i in 0..86_400 {
            assert!(m.push(&at(f64::from(i), 50_000.0)).is_empty());
        }
        assert!(m.leak.as_ref().unwrap().points.len() <= LEAK_POINTS + 1);
        assert!(m.window.len() <= 122);
    }

    /// A sample at `t` s with `mem` MiB in use at `util` % (processes not read).
    fn job(t: f64, mem: f64, util: f64) -> Sample {
        let mut s = at(t, mem);
        s.util_gpu_pct = Some(util);
        s
    }

    /// The times of the memory-leak alerts over `samples`, rule detectors only.
    fn leak_alerts(samples: &[Sample]) -> Vec<f64> {
        replay(samples, &Config::default(), None)
            .into_iter()
            .filter(|a| a.kind == AlertKind::MemoryLeak)
            .map(|a| a.t)
            .collect()
    }

    /// 30 s of work at 20 GiB, then memory as `then` says, second by second, for `seconds`.
    fn after_steady_work(seconds: u32, then: impl Fn(f64) -> (f64, f64)) -> Vec<Sample> {
        (0..30)
            .map(|i| job(f64::from(i), 20_480.0, 100.0))
            .chain((30..30 + seconds).map(|i| {
                let (mem, util) = then(f64::from(i) - 30.0);
                job(f64::from(i), mem, util)
            }))
            .collect()
    }

    #[test]
    fn a_leak_after_steady_work_is_caught_within_twenty_seconds() {
        // 25 MiB every 2 s from 30 s on, the GPU busy: the 60-s check alone takes 60 s.
        let trace = after_steady_work(120, |since| {
            (20_480.0 + 25.0 * (since / 2.0).floor(), 100.0)
        });
        let alerts = leak_alerts(&trace);
        assert!(
            alerts.first().is_some_and(|t| t - 30.0 <= 20.0),
            "{alerts:?}"
        );
    }

    #[test]
    fn a_training_steps_rise_and_fall_is_no_leak() {
        // 6-s steps: 512 MiB more each second for 4 s, all of it freed at the step's end.
        let trace = after_steady_work(300, |since| {
            let into = since % 6.0;
            let held = if into < 4.0 {
                512.0 * (into + 1.0)
            } else {
                0.0
            };
            (20_480.0 + held, 100.0)
        });
        assert_eq!(leak_alerts(&trace), Vec::<f64>::new());
    }

    #[test]
    fn a_large_free_and_its_refill_is_no_leak() {
        // 16 GiB freed, 10 s of work without them, taken back in two halves a second apart.
        let trace = after_steady_work(300, |since| {
            let mem = match since {
                s if s < 10.0 => 4_096.0,
                s if s < 11.0 => 12_288.0,
                _ => 20_480.0,
            };
            (mem, 100.0)
        });
        assert_eq!(leak_alerts(&trace), Vec::<f64>::new());
    }

    #[test]
    fn a_job_starting_up_in_steps_is_no_leak() {
        // On an idle GPU a job starts: 1 GiB every 2 s for 40 s, computing as it goes, then
        // it holds what it has.
        let staircase = |since: f64| 1_024.0 * ((since / 2.0).floor() + 1.0).min(20.0);
        let mut trace: Vec<Sample> = (0..30).map(|i| job(f64::from(i), 600.0, 0.0)).collect();
        trace.extend(
            (30..300).map(|i| job(f64::from(i), 600.0 + staircase(f64::from(i) - 30.0), 100.0)),
        );
        assert_eq!(leak_alerts(&trace), Vec::<f64>::new());
        // The same start-up beside a job that was already working: the process count tells.
        let mut trace = after_steady_work(270, |since| (20_480.0 + staircase(since), 100.0));
        for s in &mut trace {
            s.processes = Some(if s.t < 30.0 { 1 } else { 2 });
        }
        assert_eq!(leak_alerts(&trace), Vec::<f64>::new());
    }

    #[test]
    fn memory_filled_without_compute_is_no_leak() {
        // A data set copied into GPU memory, 512 MiB every 2 s for 100 s, no kernel running.
        let trace: Vec<Sample> = (0..130)
            .map(|i| {
                let grown = 512.0 * ((f64::from(i) - 30.0).max(0.0) / 2.0).floor().min(50.0);
                job(f64::from(i), 20_480.0 + grown, 0.0)
            })
            .collect();
        assert_eq!(leak_alerts(&trace), Vec::<f64>::new());
    }

    #[test]
    fn a_slow_leak_over_hours_is_caught_after_thinning() {
        // 0.25 MiB/s for three hours at 1 Hz: 10,800 points, thinned from 2,048 on; the
        // 1 GiB of growth the detector waits for takes 4,096 s, well after the first thinning.
        let mut m = Monitor::new(Config::default(), None);
        let mut first = None;
        for i in 0..10_800 {
            let alerts = m.push(&at(f64::from(i), 10_000.0 + 0.25 * f64::from(i)));
            if first.is_none() {
                first = alerts.into_iter().find(|a| a.kind == AlertKind::MemoryLeak);
            }
        }
        let alert = first.expect("a leak alert");
        assert!((4_000.0..4_800.0).contains(&alert.t), "{alert:?}");
        let rate = alert.signals["growth_mib_per_s"].value;
        assert!((0.2..0.3).contains(&rate), "{rate}");
        assert!(m.leak.as_ref().unwrap().points.len() <= LEAK_POINTS + 1);
    }

    /// One reading a second of a card whose die settles at `settle(p, t)` at `p` watts: a
    /// third of a step at once (the die), the rest with time constant `tau_s` (its heat
    /// sink), in whole degrees (with a little dither, as a real sensor flips between
    /// neighbours); `loads` is a list of (seconds, watts), the die settled at the first. The
    /// HBM reads the die less 5 °C.
    fn card(tau_s: f64, settle: impl Fn(f64, f64) -> f64, loads: &[(f64, f64)]) -> Vec<Sample> {
        let mut sink = settle(loads[0].1, 0.0);
        let (mut t, mut out) = (0.0, Vec::new());
        for &(seconds, p) in loads {
            let end = t + seconds;
            while t < end {
                let mut s = Sample::at(t);
                s.power_w = Some(p + if out.len() % 2 == 0 { 1.0 } else { -1.0 });
                let die = sink + (settle(p, t) - sink) / 3.0;
                let read = (die + 0.55 * (0.7 * t).sin()).round();
                s.temp_gpu_c = Some(read);
                s.temp_mem_c = Some(read - 5.0);
                s.util_gpu_pct = Some(if p > 200.0 { 100.0 } else { 0.0 });
                out.push(s);
                sink += (settle(p, t) - sink) * (1.0 - (-1.0 / tau_s).exp());
                t += 1.0;
            }
        }
        out
    }

    /// The healthy history: a card whose die settles within seconds (τ = 2 s) at 40 °C idle
    /// (100 W) and 60 °C at 600 W, a few of its readings at load 3 °C hotter (bursts).
    fn fast_card_model(config: &Config) -> Model {
        let mut history = card(
            2.0,
            |p, _| 40.0 + 0.04 * (p - 100.0),
            &[
                (120.0, 100.0),
                (120.0, 600.0),
                (120.0, 100.0),
                (120.0, 600.0),
            ],
        );
        for s in history.iter_mut().filter(|s| s.power_w > Some(500.0)) {
            if s.t as u64 % 20 == 10 {
                s.temp_gpu_c = s.temp_gpu_c.map(|v| v + 3.0);
                s.temp_mem_c = s.temp_mem_c.map(|v| v + 3.0);
            }
        }
        Model::train(&history, config).unwrap()
    }

    /// A card of the same model with a slow heat sink (τ = 25 s): 8 °C cooler than the
    /// history's at idle, 2.5 °C at 600 W (so at load 5.5 °C above the level its offset
    /// learned at idle gives it, as the H100 of `tests/faults.rs`). It starts at load, idles
    /// (its die cooling shows its τ; its offset learns its idle), then loads again at 600 W
    /// from 820 s: its die jumps to 40.5 °C and warms on to 57.5 °C over a minute and more. `failing` (°C/s
    /// from a time): its cooler then loses capacity at that constant power, its settle point
    /// rising at that rate.
    fn slow_card(failing: Option<(f64, f64)>) -> Vec<Sample> {
        card(
            25.0,
            move |p, t| {
                let lost = failing.map_or(0.0, |(rate, from)| rate * (t - from).max(0.0));
                32.0 + 0.051 * (p - 100.0) + lost
            },
            &[(120.0, 600.0), (700.0, 100.0), (300.0, 600.0)],
        )
    }

    fn config() -> Config {
        Config {
            forest_trees: 0,
            ..Config::default()
        }
    }

    /// The healthy history for the rise ratio: a card whose die settles within seconds at
    /// 40 °C idle (100 W), 46 °C at 250 W, 52 °C at 400 W and 60 °C at 600 W (its typical
    /// levels read about a degree higher, its hottest near 61.6 °C at 600 W).
    fn ratio_history(config: &Config) -> Model {
        let history = card(
            2.0,
            |p, _| 40.0 + 0.04 * (p - 100.0),
            &[
                (120.0, 100.0),
                (120.0, 250.0),
                (120.0, 100.0),
                (120.0, 400.0),
                (120.0, 100.0),
                (120.0, 600.0),
                (120.0, 100.0),
            ],
        );
        Model::train(&history, config).unwrap()
    }

    /// A card of the same model, as fast, at the history's idle level, whose die rises
    /// `at_250` times the history's rise over idle at 250 W (a load it holds two minutes
    /// after idling; the history rose 5.1 °C there, typical to typical) and `then` times at
    /// `then_w` (a load it then runs for the first time, from 270 s): the thermal alerts
    /// from 270 s.
    fn rising(at_250: f64, (then, then_w): (f64, f64)) -> Vec<Alert> {
        let config = config();
        let ratio = move |p: f64| if p > 300.0 { then } else { at_250 };
        let trace = card(
            2.0,
            move |p, _| 40.0 + ratio(p) * 0.04 * (p - 100.0),
            &[(150.0, 100.0), (120.0, 250.0), (60.0, then_w)],
        );
        replay(&trace, &config, Some(ratio_history(&config)))
            .into_iter()
            .filter(|a| a.t >= 270.0 && a.kind == AlertKind::ThermalRunaway)
            .collect()
    }

    #[test]
    fn a_card_rising_further_than_the_history_is_judged_by_its_own_rise_at_a_new_load() {
        // It rose 1.3 times the history's rise at 250 W (held at 48 °C: 1.57 read against
        // the history's typical levels, 1.5 at most); at 600 W it runs 66 °C, 4.4 °C above
        // the history's hottest: under the history's 20 °C rise scaled. Without the ratio, a
        // warning at 600 W (the margin is 4 °C).
        let alerts = rising(1.3, (1.3, 600.0));
        assert!(alerts.is_empty(), "{alerts:#?}");
    }

    #[test]
    fn a_rise_ratio_is_learned_no_higher_than_its_bound() {
        // It rose 1.75 times the history's rise at 250 W (held at 50–51 °C, within the
        // margin of the history's 47: about 2 read against its typical levels) and runs 2.05
        // times it at 400 W (64.6 °C, 11 °C above the history's hottest: no critical). Judged
        // by a ratio of 1.5 at most (59.9 °C allowed before the margin), a warning; by the
        // ratio it read (2: 66 °C allowed), none.
        let alerts = rising(1.75, (2.05, 400.0));
        assert!(
            alerts.iter().any(|a| a.severity == Severity::Warning),
            "{alerts:#?}"
        );
    }

    #[test]
    fn a_rise_ratio_is_not_learned_from_a_level_past_the_margin() {
        // At 250 W it runs 2 times the history's rise (held at 52 °C, 5 °C above the
        // history's hottest there: past the margin, a warning there); at 600 W 1.4 times
        // (68 °C, 6.4 °C above the history's hottest, worse than said at 250 W). A level the
        // margin rule did not pass teaches no ratio, so 600 W is judged by the history's rise:
        // a warning (with a ratio learned at 250 W, 1.5 at most: 71.6 °C allowed, none).
        let alerts = rising(2.0, (1.4, 600.0));
        assert!(
            alerts.iter().any(|a| a.severity == Severity::Warning),
            "{alerts:#?}"
        );
    }

    #[test]
    fn the_rise_ratio_widens_the_warning_not_the_critical() {
        // Ratio 1.5 (it rose 1.6 times the history's rise at 250 W, 1.76 read against the
        // history's typical levels); at 600 W it runs 1.7 times the history's rise (74 °C):
        // 2.4 °C above the 71.6 °C the ratio allows (no warning), but 12.4 °C above the
        // history's hottest: the critical excess (12 °C) is measured from there.
        let alerts = rising(1.6, (1.7, 600.0));
        assert!(
            alerts.iter().any(|a| a.severity == Severity::Critical),
            "{alerts:#?}"
        );
    }

    #[test]
    fn a_die_warming_with_the_cards_learned_time_constant_raises_nothing() {
        let config = config();
        let alerts = replay(&slow_card(None), &config, Some(fast_card_model(&config)));
        assert!(alerts.is_empty(), "{alerts:#?}");
    }

    #[test]
    fn a_cooler_losing_capacity_at_a_constant_power_is_caught() {
        // The slow card's die settled at 600 W (57.5 °C, about 80 s after the step); from
        // 940 s its cooler loses capacity, the level it settles at rising 0.25 °C/s. The die
        // follows (a third at once, the rest through its heat sink's 25 s) and is said heating
        // at a steady load past the level it held there 9 s after the cooler began to fail
        // (without the learned response, the same trace raises the false warning of the test
        // above 74 s before it).
        let config = config();
        let from = 940.0;
        let alerts = replay(
            &slow_card(Some((0.25, from))),
            &config,
            Some(fast_card_model(&config)),
        );
        let first = alerts.first().unwrap_or_else(|| panic!("not caught"));
        assert_eq!(first.kind, AlertKind::ThermalRunaway, "{alerts:#?}");
        assert!(
            (from..=from + 15.0).contains(&first.t),
            "{:.1} s after it began: {alerts:#?}",
            first.t - from
        );
    }
}
