//! The detectors, run sample by sample: the same code serves the live sampler and
//! `pog monitor replay`.

mod leak;
mod power;
mod rules;
mod thermal;

use crate::alert::{Alert, AlertKind, Finding, Gate, Severity, SignalChange};
use crate::baseline::{AmbientOffset, Level};
use crate::config::Config;
use crate::degradation::{Degradation, DriftWatch, ResumeError};
use crate::model::{
    power_steady_over, Envelope, Fingerprint, LoadState, Model, RecentPower, FOREST_FEATURES,
    STEADY_FRACTION, STEADY_POWER_FRACTION,
};
use crate::response::{KeptHeldLevels, KeptResponse, ResponseResumeError, ThermalResponse};
use crate::sample::{Sample, Signal};
use crate::stats::{median, theil_sen};
use leak::Leak;
use rules::{Counters, Perf, Run};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use thermal::{HeldLevel, RoomStep, ThermalSpell};

/// Seconds of raw samples kept for slopes and windows.
const KEEP_S: f64 = 120.0;

/// A power reading at most this fraction of one read at the same load and temperature a
/// moment before is a reading that drifted, not a load that fell.
const DRIFT_FRACTION: f64 = 0.85;

/// ... and at least this many watts below it.
const DRIFT_MIN_W: f64 = 30.0;

/// Seconds over which the early rule measures how far the die swings at the load it holds
/// ([`Monitor::swing`]): a die heating above its level by less than it fell back there
/// lately is the load's own rhythm, not the cooling.
const SWING_S: f64 = 40.0;

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
    /// Per temperature (GPU die, memory): where its approach to each load it left was heading
    /// (bin of recent power → °C, the fit that taught its τ there:
    /// [`ThermalResponse::take_ended`]), in this run: its rise there counts toward its rise
    /// ratio where it has not held that load ([`Monitor::rise_ratio`]), and nothing else.
    projected_levels: [BTreeMap<usize, f64>; 2],
    /// Per temperature (GPU die, memory): its rise ratio at the latest sample
    /// ([`Monitor::rise_ratio`]), for the multivariate model to judge it as the margin rule does.
    rise_now: [Option<RiseRatio>; 2],
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

/// The largest ratio of a temperature's own rise over idle to the healthy history's that a
/// card may learn at the loads it held: a heat sink (or paste) half again as resistive as the
/// history card's. The healthy H100s learn 1.1–1.43 against the coolest (its die
/// 24 °C from idle to 692 W, the others' up to 30 °C; GPU-2d7f0852…, 2026-12-06); a card
/// that rose further is judged beyond what healthy cards of one model show.
pub const RISE_RATIO_MAX: f64 = 1.5;

/// The smallest rise (°C) of the healthy history's typical level over its idle one at a load
/// for a card's rise ratio to be learned there: five sensor steps, so that a degree of
/// rounding moves the ratio by a fifth at most.
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

impl RiseRatio {
    /// How much more (°C) than the envelope shifted by the card's level it may rise at this
    /// recent power: the history's rise from its idle to its hottest there, times the ratio
    /// less one.
    fn extra_at(&self, envelope: &Envelope, recent_power_w: f64) -> f64 {
        let history_rise = envelope.hottest_held_near(recent_power_w) - self.idle_c;
        (self.ratio - 1.0) * history_rise.max(0.0)
    }
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
            projected_levels: [BTreeMap::new(), BTreeMap::new()],
            rise_now: [None, None],
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
        // Each temperature against the envelope shifted by this GPU's own level and widened by
        // its own rise ratio, or where it settled higher at this load itself, from there
        // (`Monitor::held_level`), as the margin rule judges it. Before the GPU's level is
        // learned, its temperatures are unknown to the model: a card in a colder room than
        // the history's is not unlike it.
        let offsets = [0, 1].map(|i| {
            let offset = self.ambient[i].as_ref().and_then(AmbientOffset::offset)?;
            let (p, e) = recent_power.zip(forest.envelopes[i].as_ref())?;
            Some(match self.held_level_at(i, e.bin(p)) {
                Some(held) => offset.max(held - e.at(p)),
                None => offset + self.rise_now[i].map_or(0.0, |r| r.extra_at(e, p)),
            })
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
                rise.extra_at(&self.envelope, recent_power_w)
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

/// Runs a fresh monitor over a whole trace and returns every alert.
pub fn replay(samples: &[Sample], config: &Config, model: Option<Model>) -> Vec<Alert> {
    let mut monitor = Monitor::new(config.clone(), model);
    samples.iter().flat_map(|s| monitor.push(s)).collect()
}

#[cfg(test)]
mod tests {
    use super::leak::LEAK_POINTS;
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
        let ratio = move |p: f64| if p > 300.0 { then } else { at_250 };
        let trace = card(
            2.0,
            move |p, _| 40.0 + ratio(p) * 0.04 * (p - 100.0),
            &[(150.0, 100.0), (120.0, 250.0), (60.0, then_w)],
        );
        thermal_alerts_by_ratio_history(&trace, 270.0)
    }

    /// The thermal alerts from `from_t` on of `trace` judged by [`ratio_history`].
    fn thermal_alerts_by_ratio_history(trace: &[Sample], from_t: f64) -> Vec<Alert> {
        let config = config();
        replay(trace, &config, Some(ratio_history(&config)))
            .into_iter()
            .filter(|a| a.t >= from_t && a.kind == AlertKind::ThermalRunaway)
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
    fn a_rise_ratio_is_learned_from_a_level_held_past_the_margin() {
        // At 250 W it runs 2 times the history's rise (held at 52 °C, 5 °C above the
        // history's hottest there: past the margin, under the critical excess, so taken as
        // its own level there); at 600 W 1.4 times (68 °C, 6.4 °C above the history's
        // hottest). The level it held teaches the ratio (1.5 at most: 71.6 °C allowed), so
        // 600 W raises nothing.
        let alerts = rising(2.0, (1.4, 600.0));
        assert!(alerts.is_empty(), "{alerts:#?}");
    }

    #[test]
    fn a_rise_ratio_is_not_learned_from_an_approach_heading_past_the_critical_excess() {
        // The card leaves its first 250-W load after 30 s with its die still warming as a
        // first-order approach (τ 12 s) toward 64 °C: 4 times the history's rise, 17 °C above
        // the history's hottest there, past the critical excess. After idling past the spell
        // of the warnings that load raised, at 600 W it runs 1.4 times the history's rise
        // (68 °C, 6.4 °C above the history's hottest). Where that approach was heading
        // teaches no ratio: 600 W is warned at (with a ratio of 1.5 learned from it, none).
        let settle = |p: f64, t: f64| match p {
            p if p > 300.0 => 40.0 + 1.4 * 0.04 * (p - 100.0),
            p if p > 200.0 => 40.0 + 24.0 * (1.0 - (-(t - 150.0) / 12.0).exp()),
            _ => 40.0,
        };
        let trace = card(
            1.0,
            settle,
            &[
                (150.0, 100.0),
                (30.0, 250.0),
                (700.0, 100.0),
                (100.0, 600.0),
            ],
        );
        let alerts = thermal_alerts_by_ratio_history(&trace, 880.0);
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
