//! The thermal envelope: each temperature (die, memory) against the healthy history's hottest
//! at the recent power, judged from where it settled at each load it held, with a change of
//! room told apart from a cooling failing. Its own file: the largest family, with its own state
//! (held levels, rise ratios, spells) and types.

use super::power::power_drift_finding;
use super::{
    Expected, Monitor, RiseRatio, DRIFT_FRACTION, DRIFT_MIN_W, RISE_RATIO_MAX,
    RISE_RATIO_MIN_RISE_C,
};
use crate::alert::{AlertKind, Finding, Severity, SignalChange};
use crate::baseline::{AmbientOffset, RISE_C_PER_MIN, SETTLE_S};
use crate::model::{flat_over, SENSOR_STEP_C, STEADY_FRACTION};
use crate::response::{fit_step, taus, StepFit, MAX_RMS_C};
use crate::sample::{Sample, Signal};
use std::collections::BTreeMap;

/// Seconds a temperature must stay above what the power explains before it counts: the
/// power reading is an average over the last second, so a temperature that follows a load
/// step at once is ahead of it for up to a second.
const THERMAL_PERSIST_S: f64 = 1.0;

/// A GPU (die) temperature rising this fast (°C/s, over the slope window) at a steady load,
/// half the margin above the GPU's own typical level at that power, is a cooling failing (a
/// healthy die settles within seconds of a load change; the slowest failure in the
/// evaluation heats at 0.05 °C/s and takes the margin's full path).
const EARLY_SLOPE_C_PER_S: f64 = 0.1;

/// The most seconds of readings at one steady power the shape of a rise is fitted on
/// ([`Monitor::room_shape`]) ...
const ROOM_FIT_S: f64 = 60.0;

/// ... and the fewest: a first-order approach needs its curve seen (a room's 20-s approach,
/// read in whole degrees, fits a straight line as well for its first 15 s). A rise younger
/// than this is held only where the memory rose as far as the die ([`Monitor::room_too_young`]).
const ROOM_FIT_MIN_S: f64 = 20.0;

/// Seconds after the power fell from a heavier load (by [`TAIL_FALL_W`] or more) within which
/// a memory temperature that reads flat above what its new load allows is the heat the die
/// and board stored draining ([`Monitor::cooling_tail`]), not a cooling failing: an H100's
/// HBM read 48 °C for 16 s at 126 W, 30 s after a 690-W GEMM, 8 °C above where it idled
/// before and 4.7 °C above the hottest the other cards' histories allow there
/// (GPU-fa4901f0…, 2026-12-06); it was at 46–47 °C 40 s after.
const TAIL_S: f64 = 90.0;
/// Watts the power must have fallen by for [`TAIL_S`] to apply: a load step, not a bursty
/// load's rhythm about its average.
const TAIL_FALL_W: f64 = 100.0;
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

/// The most seconds between two readings that a held level may rise over
/// ([`Monitor::held_level`]): it rises only while the die holds its load, not between visits.
const HELD_STEP_S: f64 = 10.0;

/// The die's own settled level at one load ([`Monitor::held_level`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct HeldLevel {
    /// °C.
    pub(super) level: f64,
    /// When the die last held this load.
    pub(super) t: f64,
    /// Kept from an earlier run ([`Monitor::resume_response`]) and not yet held in this one:
    /// the die's first hold here takes its level afresh.
    pub(super) kept: bool,
}

/// A change of room suspected from the temperatures' shape ([`Monitor::room_holds`]): both
/// rose alike above where they held at the same load, at an unchanged power, the one judged
/// flat or approaching a level under the critical excess as a first-order response does.
/// While it lasts, the margin rule and the early rule judge each temperature from its
/// provisional new level (`step_c` higher); the critical excess and the limit do not.
#[derive(Debug, Clone, Copy)]
pub(super) struct RoomStep {
    /// When it was first suspected.
    since_t: f64,
    /// Per temperature (die, memory): how far (°C) the room moved it, as far as seen.
    step_c: [f64; 2],
}

impl Monitor {
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
    ///
    /// [`ThermalResponse::left_to_settle`]: crate::response::ThermalResponse::left_to_settle
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
    ///
    /// [`ThermalResponse::approach_unlearned`]: crate::response::ThermalResponse::approach_unlearned
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
    pub(super) fn held_level_at(&self, i: usize, bin: usize) -> Option<f64> {
        let held = self.held_levels[i].get(&bin)?;
        let moved_c = self.kept_moved_c[i].filter(|_| held.kept).unwrap_or(0.0);
        Some(held.level + moved_c)
    }

    /// A temperature's (`i`: 0 the die, 1 the memory) own rise over idle against the healthy
    /// history's (`expected`: its envelope shifted by this GPU's level), learned at the loads
    /// it held in this run ([`Monitor::held_level`], not those kept from an earlier one), and
    /// at the heavier loads it left before holding them, where the approach that taught its
    /// τ there was heading ([`ThermalResponse::take_ended`]): its idle is the lightest load it
    /// held where the history held one too; at each heavier load where the history's typical
    /// level rose [`RISE_RATIO_MIN_RISE_C`] or more above the history's there, its own rise
    /// over its idle divided by the history's; the ratio is the one at the load where the
    /// history rose most (where a degree of rounding moves it least; the smallest of them
    /// left the second cool H100's HBM at 1.04 where its full-load GEMM gives 1.2–1.3,
    /// GPU-960288a5…), at most [`RISE_RATIO_MAX`]; `None` before such a load was seen, or
    /// where it is 1 or less (a card that rises no further than the history's is judged as
    /// before). A card whose heat sink or paste is a quarter less good than the history card's
    /// rises a quarter further at every load (the warmer H100s against the coolest: at full
    /// load 4–6 °C past its envelope shifted by their idle level, GPU-2d7f0852…). A card
    /// whose first heavy load ends before its die holds it (42 s of a 690-W GEMM, the die 55
    /// → 69 °C still warming 0.05 °C/s, GPU-fa4901f0…) shows its rise by where that approach
    /// was heading: its bursty half-duty GEMMs next, 58–69 °C at 490–547 W, 4–6 °C above the
    /// others' histories shifted by its idle, are judged by it. Learned only from levels the
    /// monitor took as the card's own: a level is held only under the critical excess above
    /// what the card should reach there ([`Monitor::held_level`]), and where an approach was
    /// heading counts only under `critical` above the envelope shifted (an approach is let
    /// run only toward such a level, [`Monitor::approaching_under`]). A card whose cooling
    /// already fails as it first holds or approaches a load is taken as a warmer card, as its
    /// level there already is; the ratio is at most [`RISE_RATIO_MAX`] and widens the warning
    /// only: the critical excess is measured without it. (Until 2026-12-06 a held level
    /// taught the ratio only within the margin: the warm H100's HBM, held at 62 °C in its
    /// 690-W GEMM, 0.4 °C past that bound by the coolest card's history, taught nothing, and
    /// its copy was warned at in every room.)
    ///
    /// [`ThermalResponse::take_ended`]: crate::response::ThermalResponse::take_ended
    fn rise_ratio(&self, i: usize, expected: &Expected, critical: f64) -> Option<RiseRatio> {
        let bin_w = self.config.envelope_bin_w;
        let envelope = &expected.envelope;
        // (power at the bin's middle, the card's level there, the history's typical there)
        let own = |bin: usize, level: f64| {
            let p = (bin as f64 + 0.5) * bin_w;
            Some((p, level, envelope.typical_known_at(p)?))
        };
        let held_here = |bin: &usize| self.held_levels[i].get(bin).is_some_and(|l| !l.kept);
        let mut held = self.held_levels[i]
            .iter()
            .filter(|(_, l)| !l.kept)
            .filter_map(|(&bin, l)| Some((bin, own(bin, l.level)?)));
        let (idle_bin, (_, own_idle, history_idle)) = held.next()?;
        let projected = self.projected_levels[i]
            .iter()
            .filter(|&(bin, _)| *bin > idle_bin && !held_here(bin))
            .filter_map(|(&bin, &level)| own(bin, level))
            .filter(|&(p, level, _)| {
                level <= envelope.hottest_held_near(p) + expected.shift + critical
            });
        let ratio = held
            .map(|(_, level)| level)
            .chain(projected)
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
    ///
    /// [`ThermalResponse::approach`]: crate::response::ThermalResponse::approach
    /// [`ThermalResponse::approach_unlearned`]: crate::response::ThermalResponse::approach_unlearned
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

    /// Whether the margin rule waits for the memory (`i` 1) at this sample: a memory-bound
    /// load (`s`) the HBM holds no level at yet, in its first slope window, stepped to from a
    /// load held at least that long. [`Monitor::settle`] holds a level only once the power
    /// was steady over the slope window, and the HBM answers its own traffic within seconds,
    /// by how much differing from card to card more than the margin: an H100's HBM reached
    /// 65 °C 2 s into a 374-W copy and held 65–68 °C (23 °C over its idle, 7 °C over its
    /// die's idle), where the history's card held 61 °C at 385 W (18 °C over its idle, 2 °C
    /// over its die's): GPU-960288a5… judged by GPU-cb33ad0f…'s history was warned at 4 s in
    /// every room, a level the monitor takes as the card's own 7 s later. Until then the
    /// margin rule waits; after, a level held under the critical excess is the card's
    /// ([`Monitor::held_level`]) and an HBM still heating is warned at as before. The
    /// critical excess and the limit never wait, and a bursty load (its loads held shorter
    /// than the window) never makes the rule wait. The die warms to a load over tens of
    /// seconds and has the early rule.
    fn memory_step_unheld(
        &self,
        i: usize,
        s: &Sample,
        expected: Option<&Expected>,
        recent_power: Option<f64>,
    ) -> bool {
        let window_s = self.config.slope_window_s;
        let response = &self.responses[i];
        i == 1
            && s.memory_bound()
            && response.held_s().is_some_and(|held| held < window_s)
            && response
                .previous_held_s()
                .is_some_and(|before| before >= window_s)
            && match (expected, recent_power) {
                (Some(e), Some(p)) => e.held_at(p).is_none(),
                _ => false,
            }
    }

    /// Whether the power fell from a heavier load ([`TAIL_FALL_W`] or more above `recent_power`)
    /// within the last [`TAIL_S`]: a memory temperature reading flat then is the heat the die
    /// and board stored draining, and only one that rises again is a cooling failing (the
    /// margin rule waits for a positive slope; the critical excess and the limit do not).
    fn cooling_tail(&self, recent_power: Option<f64>) -> bool {
        let Some(now) = recent_power else {
            return false;
        };
        self.last(TAIL_S)
            .filter_map(|s| s.power_w)
            .any(|p| p >= now + TAIL_FALL_W)
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

    pub(super) fn thermal(
        &mut self,
        s: &Sample,
        recent_power: Option<f64>,
        out: &mut Vec<Finding>,
    ) {
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
        self.rise_now = [None, None];
        for (i, signal, _) in checks {
            self.responses[i].observe(s.t, s.power_w, s.signal(signal));
            if let Some(ended) = self.responses[i].take_ended() {
                let bin = (ended.power_w.max(0.0) / self.config.envelope_bin_w) as usize;
                self.projected_levels[i].insert(bin, ended.settle_c);
            }
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
                    level.observe(s.t, residual, level.admits(excess, margin / 2.0));
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
                    expected.rise = self.rise_ratio(i, &expected, critical);
                    self.rise_now[i] = expected.rise;
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
            // Rising; for the memory, flat only where no heavier load's stored heat is draining
            // (`Monitor::cooling_tail`). Not for the die: it sheds its own heat within its
            // fitted approach, and a die cooler failing in that tail, its heating cancelling
            // the cooling into flat readings, was said in 17 s as before, 51–120 s if waited.
            // Not before its slope is known (a run's first readings): a monitor restarted
            // just after a load ended read the die still cooling from it as rising ("temp_gpu
            // at 50 °C, 5.3 °C above the hottest this GPU should reach at 130 W", 2 s in), in
            // 111 of 928 restarts of the H100s at idle until 2026-12-07.
            let rising = match slope {
                Some(v) => {
                    v > 0.0
                        || (v == 0.0
                            && (signal == Signal::TempGpu || !self.cooling_tail(recent_power)))
                }
                None => false,
            };
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
                    Some(e) => {
                        e >= margin
                            && !approaching()
                            && !self.memory_step_unheld(i, s, expected.as_ref(), recent_power)
                    }
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
}

/// A spell of thermal warnings on one temperature: they come and go with the load (a
/// temperature above the GPU's level rises and falls as the work changes), and one that comes
/// back within [`RESAY_S`] of the last at no worse a level is the same news, not said again.
#[derive(Debug, Clone, Default)]
pub(super) struct ThermalSpell {
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
