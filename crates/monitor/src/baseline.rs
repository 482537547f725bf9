//! Online, per-GPU thermal baselines (issue 26, item 1): how much warmer or cooler this GPU
//! runs than the healthy history at the same recent power — its own level, from the room it
//! stands in, its cooling and its silicon — learned as it runs.
//!
//! The thermal envelope ([`Envelope`](crate::model::Envelope)) gives the shape: the hottest
//! healthy temperature at each recent power. A GPU in a warmer room, or another card of the
//! same model, sits above or below it by an offset that the envelope cannot know.
//! [`AmbientOffset`] learns that offset from the GPU's own readings, each taken against the
//! healthy history's typical level at its power
//! ([`Envelope::typical_at`](crate::model::Envelope::typical_at)): first from its first
//! [`WARMUP_S`] seconds (an allowance of [`ALLOWANCE_C`] holds meanwhile), then following the
//! 90th percentile of its own readings over the last [`TRACK_WINDOW_S`], at most
//! [`RISE_C_PER_MIN`] up a minute — far slower than a failing cooler heats a GPU, so a
//! runaway is never learned as the new normal. A temperature that jumps and then holds flat
//! at a steady load (a door opened, the air conditioning changed) is re-based once
//! ([`AmbientOffset::settled`]).

use crate::stats::quantile;
use std::collections::VecDeque;

/// Seconds of a GPU's first readings from which its offset is first taken (the highest of
/// them against the typical level).
pub const WARMUP_S: f64 = 20.0;

/// °C a GPU may run above the healthy history's envelope at the same power while its own
/// offset is not learned yet (another room, another card): a GPU hot at idle from its first
/// seconds is judged against this (an H200 at 62 °C at 76 W, normal only at full load, is
/// critical within 3 s: `tests/faults.rs`).
pub const ALLOWANCE_C: f64 = 8.0;

/// °C the learned offset may sit from the healthy history's level, either way: another card
/// and another room together. Eight H100 SXMs idled up to 8 °C apart (their HBM 38–46 °C,
/// their dies 34–40 °C, 2026-12-05/06), and the evaluation asks for rooms ±5 °C: a card
/// whose HBM idles 7 °C above the history card's, in a room 5 °C warmer, is 12 °C off
/// (GPU-32296a14… against GPU-2d7f0852…). Held at [`ALLOWANCE_C`] it and two other cards, in
/// rooms 3–5 °C warmer, were judged from 1–4 °C too low (8 false alarms in 132.6 h of
/// healthy data). The warm-up takes readings up to half the margin above the history's
/// hottest shifted by this much ([`AmbientOffset::admits`]).
pub const OFFSET_MAX_C: f64 = 13.0;

/// Seconds of a GPU's own admitted readings the offset follows.
pub const TRACK_WINDOW_S: f64 = 300.0;

/// The fastest the learned offset rises, °C a minute (the slowest cooling failure in the
/// evaluation heats at 3 °C a minute).
pub const RISE_C_PER_MIN: f64 = 0.5;

/// The fastest the learned offset falls, °C a minute.
pub const FALL_C_PER_MIN: f64 = 1.0;

/// Seconds a GPU's readings must hold above its level, flat, before they are taken as its
/// new level.
pub const SETTLE_S: f64 = 30.0;

/// The largest slope (°C/s, either way) of a temperature at a steady load that counts as
/// flat (the slowest cooling failure in the evaluation heats at 0.05 °C/s).
pub const FLAT_C_PER_S: f64 = 0.02;

/// Seconds between two recomputations of the tracked percentile.
const RETARGET_S: f64 = 5.0;

/// The fewest admitted readings the offset follows.
const MIN_TRACKED: usize = 10;

/// A level learned for one sensor of one GPU, as the history keeps it between runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Level {
    /// The healthy history's reference it was learned against.
    pub reference: f64,
    /// The learned offset, °C.
    pub offset: f64,
    /// Seconds of readings it was learned from.
    pub learned_s: f64,
}

/// One temperature sensor's learned offset against the healthy envelope. The monitor also
/// keeps one per load (bin of recent power) that the healthy history never held, for the die:
/// its level there against the envelope's hottest plus the GPU's offset.
#[derive(Debug, Clone)]
pub struct AmbientOffset {
    /// Where the healthy history's readings sit against their typical level
    /// ([`Envelope::typical_at`](crate::model::Envelope::typical_at)): the 90th percentile
    /// of temperature minus it.
    reference: f64,
    first_t: Option<f64>,
    warm: Vec<f64>,
    offset: Option<f64>,
    recent: VecDeque<(f64, f64)>,
    /// The times of the readings of the last [`TRACK_WINDOW_S`] not admitted (already well
    /// above the level).
    refused: VecDeque<f64>,
    target: Option<f64>,
    retarget_t: f64,
    last_t: Option<f64>,
    /// Every reading of the last [`SETTLE_S`] (time, residual), admitted or not.
    lately: VecDeque<(f64, f64)>,
    /// Seconds of readings the current offset was learned from.
    learned_s: f64,
    /// The offset was taken up from an earlier run ([`AmbientOffset::resumed`]) and not yet
    /// moved by what this run showed of the room ([`AmbientOffset::moved_by`]).
    kept: bool,
}

impl AmbientOffset {
    /// A tracker for a sensor whose healthy history sat `reference` °C against its typical
    /// level ([`Envelope::reference`](crate::model::Envelope::reference)).
    pub fn new(reference: f64) -> AmbientOffset {
        AmbientOffset {
            reference,
            first_t: None,
            warm: Vec::new(),
            offset: None,
            recent: VecDeque::new(),
            refused: VecDeque::new(),
            target: None,
            retarget_t: f64::NEG_INFINITY,
            last_t: None,
            lately: VecDeque::new(),
            learned_s: 0.0,
            kept: false,
        }
    }

    /// A tracker that resumes a level learned before (`pog monitor run` kept it in its
    /// history): no warm-up, the offset followed from `level` on. `None` when the level was
    /// learned against another healthy history (its reference differs).
    pub fn resumed(reference: f64, level: Level) -> Option<AmbientOffset> {
        if (level.reference - reference).abs() > 1e-6
            || !level.offset.is_finite()
            || level.offset.abs() > OFFSET_MAX_C + 1e-9
        {
            return None;
        }
        let mut tracker = AmbientOffset::new(reference);
        tracker.offset = Some(level.offset);
        tracker.learned_s = level.learned_s.max(0.0);
        tracker.kept = true;
        Some(tracker)
    }

    /// The room (or the card) moved by `moved_c` °C since this offset was kept from an earlier
    /// run, as the GPU showed at a load it settled at in both runs: a kept offset moves as
    /// much, once (within [`OFFSET_MAX_C`]), instead of following at [`RISE_C_PER_MIN`].
    /// A level learned in this run, or moved once already, is not moved.
    pub fn moved_by(&mut self, moved_c: f64) {
        if let (true, Some(offset)) = (self.kept, self.offset) {
            self.offset = Some((offset + moved_c).clamp(-OFFSET_MAX_C, OFFSET_MAX_C));
            self.kept = false;
        }
    }

    /// The level learned so far, to keep across runs; `None` during the warm-up.
    pub fn level(&self) -> Option<Level> {
        self.offset.map(|offset| Level {
            reference: self.reference,
            offset,
            learned_s: self.learned_s,
        })
    }

    /// The learned offset (°C above the envelope's GPU at the same power), once the warm-up
    /// is over.
    pub fn offset(&self) -> Option<f64> {
        self.offset
    }

    /// Whether a reading `excess` °C above the hottest expected (against
    /// [`AmbientOffset::shift`]) teaches the level: under `limit` (half the margin) once it
    /// is learned; in the warm-up, under `limit` above the history's hottest shifted by
    /// [`OFFSET_MAX_C`] rather than by the [`ALLOWANCE_C`] it is judged against meanwhile.
    pub fn admits(&self, excess: f64, limit: f64) -> bool {
        match self.offset {
            Some(_) => excess < limit,
            None => excess - (OFFSET_MAX_C - ALLOWANCE_C) < limit,
        }
    }

    /// What to add to the envelope for this GPU: its offset, or while it is not learned,
    /// the [`ALLOWANCE_C`].
    pub fn shift(&self) -> f64 {
        self.offset.unwrap_or(ALLOWANCE_C)
    }

    /// How far (°C) a reading whose residual is `residual` (as for
    /// [`AmbientOffset::observe`]) sits above this GPU's typical level, once learned (else
    /// above the healthy history's).
    pub fn above(&self, residual: f64) -> f64 {
        residual - self.reference - self.offset.unwrap_or(0.0)
    }

    /// The offset in words, for an alert's `against`.
    pub fn describe(&self) -> String {
        match self.offset {
            Some(o) => format!(
                "{o:+.1} °C for this GPU (its own level, learned over {:.0} s)",
                self.learned_s
            ),
            None => format!("+{ALLOWANCE_C:.0} °C allowed until this GPU's own level is learned"),
        }
    }

    /// Feeds one trusted reading at `t`: `residual` is the temperature minus the healthy
    /// history's typical level at its recent power
    /// ([`Envelope::typical_at`](crate::model::Envelope::typical_at)); `admit` is false for
    /// a reading already suspect (well above the GPU's level), which must not teach it.
    pub fn observe(&mut self, t: f64, residual: f64, admit: bool) {
        let first = *self.first_t.get_or_insert(t);
        let dt = self.last_t.map_or(0.0, |last| (t - last).clamp(0.0, 10.0));
        self.last_t = Some(t);
        self.lately.push_back((t, residual));
        while self.lately.front().is_some_and(|(t0, _)| t - t0 > SETTLE_S) {
            self.lately.pop_front();
        }
        let Some(offset) = self.offset else {
            if admit {
                self.warm.push(residual);
            }
            if t - first >= WARMUP_S && !self.warm.is_empty() {
                let highest = self.warm.iter().copied().fold(f64::MIN, f64::max);
                self.offset = Some((highest - self.reference).clamp(-OFFSET_MAX_C, OFFSET_MAX_C));
                self.learned_s = t - first;
                self.warm.clear();
            }
            return;
        };
        if admit {
            self.recent.push_back((t, residual));
        } else {
            self.refused.push_back(t);
        }
        while self
            .recent
            .front()
            .is_some_and(|(t0, _)| t - t0 > TRACK_WINDOW_S)
        {
            self.recent.pop_front();
        }
        while self
            .refused
            .front()
            .is_some_and(|t0| t - t0 > TRACK_WINDOW_S)
        {
            self.refused.pop_front();
        }
        if t - self.retarget_t >= RETARGET_S || t < self.retarget_t {
            self.retarget_t = t;
            self.target = (self.recent.len() >= MIN_TRACKED)
                .then(|| {
                    let values: Vec<f64> = self.recent.iter().map(|r| r.1).collect();
                    quantile(&values, 0.9)
                })
                .flatten()
                .map(|q| q - self.reference);
        }
        if let Some(target) = self.target {
            // Most readings lately refused (well above the level: a warmer room not yet said,
            // or a failing cooler): those admitted are the coolest few, and the level does not
            // fall on their word (it fell 7 °C as a room warmed 7 °C, in the degradation
            // example's bench-load stream, and judged the next step 20 °C too hot).
            let fall = if self.refused.len() > self.recent.len() {
                0.0
            } else {
                FALL_C_PER_MIN / 60.0 * dt
            };
            let step = (target - offset).clamp(-fall, RISE_C_PER_MIN / 60.0 * dt);
            self.offset = Some(offset + step);
            self.learned_s += dt;
        }
    }

    /// Whether this GPU has moved to a new level: the reading now `excess` °C above its
    /// hottest expected (at least `margin`, under `critical`), over the last [`SETTLE_S`]
    /// every reading at least half the margin above its level, the load steady and the
    /// temperature flat (`slope`, its Theil–Sen slope over [`SETTLE_S`] at a steady load,
    /// within [`FLAT_C_PER_S`]; `None` when the load was not steady). A cooling that keeps
    /// failing keeps heating at a steady load and never settles. Once settled, the offset
    /// moves to the 90th percentile of those readings and the readings learned before are
    /// forgotten, so the level holds: returns the shift in °C.
    pub fn settled(
        &mut self,
        t: f64,
        excess: f64,
        (margin, critical): (f64, f64),
        slope: Option<f64>,
    ) -> Option<f64> {
        self.offset?;
        if !(excess >= margin && excess < critical) || slope?.abs() > FLAT_C_PER_S {
            return None;
        }
        let &(first_t, _) = self.lately.front()?;
        if t - first_t < 0.9 * SETTLE_S {
            return None;
        }
        if self
            .lately
            .iter()
            .any(|&(_, r)| self.above(r) < margin / 2.0)
        {
            return None;
        }
        self.take_level(t)
    }

    /// The other sensor of a GPU whose level settled ([`AmbientOffset::settled`]): the
    /// room changed for both, so this one moves too if every reading of the last
    /// [`SETTLE_S`] was at least half the `margin` above its level (no flatness asked: the
    /// other sensor showed it). Returns the shift in °C.
    pub fn follow(&mut self, t: f64, margin: f64) -> Option<f64> {
        self.offset?;
        let &(first_t, _) = self.lately.front()?;
        if t - first_t < 0.9 * SETTLE_S
            || self
                .lately
                .iter()
                .any(|&(_, r)| self.above(r) < margin / 2.0)
        {
            return None;
        }
        self.take_level(t)
    }

    /// The room moved this GPU by `by_c` °C, as its temperatures' shape showed (both rose
    /// alike at an unchanged power, then held flat: `Monitor`'s change of room): the offset
    /// moves as much at once, and the readings learned before are forgotten. Nothing moves
    /// during the warm-up (the allowance still holds) or for a shift not finite.
    pub fn stepped(&mut self, t: f64, by_c: f64) {
        let Some(offset) = self.offset.filter(|_| by_c.is_finite()) else {
            return;
        };
        self.offset = Some(offset + by_c);
        self.recent.clear();
        self.refused.clear();
        self.target = None;
        self.retarget_t = t;
        self.learned_s = 0.0;
    }

    /// Moves the offset to the 90th percentile of the readings of the last [`SETTLE_S`],
    /// forgetting those learned before: the shift in °C.
    fn take_level(&mut self, t: f64) -> Option<f64> {
        let offset = self.offset?;
        let values: Vec<f64> = self.lately.iter().map(|p| p.1).collect();
        let new = quantile(&values, 0.9)? - self.reference;
        self.offset = Some(new);
        self.recent = self.lately.drain(..).collect();
        self.refused.clear();
        self.target = None;
        self.retarget_t = t;
        self.learned_s = 0.0;
        Some(new - offset)
    }

    /// Forgets the times of what was learned (after a gap in the samples or a clock step),
    /// keeping the level itself.
    pub fn restart_timing(&mut self) {
        if self.offset.is_none() {
            self.first_t = None;
        }
        self.recent.clear();
        self.refused.clear();
        self.target = None;
        self.retarget_t = f64::NEG_INFINITY;
        self.last_t = None;
        self.lately.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_level_learned_before_is_taken_up_without_the_warm_up_only_against_its_reference() {
        let mut first = AmbientOffset::new(1.5);
        assert_eq!(first.level(), None, "nothing before the warm-up ends");
        for i in 0..=60 {
            first.observe(f64::from(i) * 0.5, 4.0, true);
        }
        let level = first.level().expect("learned");
        assert_eq!((level.reference, level.offset), (1.5, 2.5));
        let resumed = AmbientOffset::resumed(1.5, level).expect("the same history");
        assert_eq!(resumed.offset(), Some(2.5));
        assert_eq!(resumed.shift(), 2.5, "no allowance: the level is known");
        assert!(resumed.describe().contains("+2.5 °C for this GPU"));
        // Learned against another healthy history, or out of range: learned afresh.
        assert!(AmbientOffset::resumed(0.5, level).is_none());
        for offset in [f64::NAN, OFFSET_MAX_C + 1.0] {
            assert!(AmbientOffset::resumed(1.5, Level { offset, ..level }).is_none());
        }
    }

    #[test]
    fn the_warm_up_learns_the_gpus_own_level_within_its_bound() {
        let mut warm = AmbientOffset::new(0.0);
        assert_eq!(warm.shift(), ALLOWANCE_C);
        for i in 0..=40 {
            warm.observe(f64::from(i) * 0.5, 5.0, true);
        }
        assert_eq!(warm.offset(), Some(5.0));
        // A reading suspect from the start teaches nothing; one far off is held within
        // OFFSET_MAX_C.
        let mut far = AmbientOffset::new(-1.0);
        for i in 0..=40 {
            let t = f64::from(i) * 0.5;
            far.observe(t, 30.0, false);
            far.observe(t, -20.0, true);
        }
        assert_eq!(far.offset(), Some(-OFFSET_MAX_C));
    }

    #[test]
    fn the_warm_up_takes_readings_as_far_as_the_offset_may_reach() {
        // Judged against the 8 °C allowance meanwhile, but taught by readings up to half the
        // margin (2 °C) above the hottest shifted by 13 °C: another card in another room.
        let warm = AmbientOffset::new(0.0);
        let excess_over_allowance = |over_hottest: f64| over_hottest - ALLOWANCE_C;
        assert!(warm.admits(excess_over_allowance(OFFSET_MAX_C + 1.9), 2.0));
        assert!(!warm.admits(excess_over_allowance(OFFSET_MAX_C + 2.1), 2.0));
        // Once learned, only within half the margin of the level.
        let mut learned = AmbientOffset::new(0.0);
        for i in 0..=40 {
            learned.observe(f64::from(i) * 0.5, 5.0, true);
        }
        assert!(learned.admits(1.9, 2.0));
        assert!(!learned.admits(2.1, 2.0));
    }

    #[test]
    fn the_level_follows_slowly_so_a_runaway_is_not_learned() {
        let mut o = AmbientOffset::new(0.0);
        for i in 0..40 {
            o.observe(f64::from(i), 0.0, true);
        }
        // Ten minutes of readings 3 °C higher: the level follows, half a degree a minute.
        for i in 40..100 {
            o.observe(f64::from(i), 3.0, true);
        }
        let after_a_minute = o.offset().unwrap();
        assert!(after_a_minute <= 0.5 + 1e-9, "{after_a_minute}");
        for i in 100..700 {
            o.observe(f64::from(i), 3.0, true);
        }
        assert!((o.offset().unwrap() - 3.0).abs() < 1e-9, "{:?}", o.offset());
        // Readings not admitted (suspect) do not move it.
        for i in 700..1300 {
            o.observe(f64::from(i), 20.0, false);
        }
        assert!((o.offset().unwrap() - 3.0).abs() < 1e-9);
    }

    #[test]
    fn a_flat_new_level_is_taken_once_and_a_rising_one_never() {
        let mut o = AmbientOffset::new(0.0);
        for i in 0..30 {
            o.observe(f64::from(i), 0.0, true);
        }
        let bounds = (4.0, 12.0);
        let mut rising = o.clone();
        // Heating 0.05 °C/s from 5 °C above (the slowest cooling failure): never a new level.
        for i in 30..200 {
            let r = 5.0 + 0.05 * f64::from(i - 30);
            rising.observe(f64::from(i), r, false);
            assert_eq!(
                rising.settled(f64::from(i), r.min(11.0), bounds, Some(0.05)),
                None
            );
        }
        // 6 °C above, give or take a degree: not while the load changes (no slope at a
        // steady load), then taken once, SETTLE_S after the level moved.
        let mut shifts = Vec::new();
        for i in 30..200 {
            let r = 6.0 + if i % 3 == 0 { 1.0 } else { 0.0 };
            o.observe(f64::from(i), r, false);
            let excess = r - o.offset().unwrap();
            let slope = (i >= 100).then_some(0.0);
            if let Some(moved) = o.settled(f64::from(i), excess, bounds, slope) {
                shifts.push((f64::from(i), moved));
            }
        }
        assert_eq!(shifts, vec![(100.0, 7.0)]);
        assert_eq!(o.offset(), Some(7.0));
        // Beyond the critical excess: not a room, never re-based.
        let mut hot = o.clone();
        for i in 200..300 {
            hot.observe(f64::from(i), 25.0, false);
            assert_eq!(hot.settled(f64::from(i), 18.0, bounds, Some(0.0)), None);
        }
    }

    #[test]
    fn the_level_does_not_fall_on_the_word_of_the_few_readings_admitted() {
        // Learned at +2 °C; then the room warms 7 °C: most readings are refused (well above
        // the level), a few cool ones (a load step's first second) admitted at 0 °C. The level
        // holds where it was; it falls (at 1 °C a minute) only where the readings admitted
        // are most of them.
        let run = |refused_per_admitted: usize| {
            let mut level = AmbientOffset::new(0.0);
            let mut t = 0.0;
            for _ in 0..120 {
                level.observe(t, 2.0, true);
                t += 0.5;
            }
            assert_eq!(level.offset(), Some(2.0));
            for k in 0..1200 {
                if k % (refused_per_admitted + 1) == 0 {
                    level.observe(t, 0.0, true);
                } else {
                    level.observe(t, 9.0, false);
                }
                t += 0.5;
            }
            level.offset().expect("learned")
        };
        assert_eq!(run(5), 2.0, "held where most readings are refused");
        assert!(
            run(0) < 1.0,
            "follows the readings down where all are admitted"
        );
    }
}
