//! The die's own thermal response to a load step, learned online per GPU (issue 26, item 1).
//!
//! After a load step, a die first jumps within the second its power reading averages, then
//! warms (or cools) with its heat sink toward the level it settles at for that power, as a
//! first-order response `T(t) = T∞ − (T∞ − T0)·e^(−t/τ)`. How long that takes is the card's:
//! an H200's die holds within seconds, an H100 SXM took 68 s to go from 57 to 71 °C after a
//! step to 700 W (GPU-9ed4b029…, 2026-12-05), still rising 0.2 °C/s half a minute in. With
//! whole-degree readings, a die still warming so looks like a cooling failing at a steady
//! load. [`ThermalResponse`] learns the card's time constant τ from the steady loads it has
//! held after its own load steps ([`fit_step`] at each one's end), and says of the load held
//! now how far the die still has to go before it settles there
//! ([`ThermalResponse::left_to_settle`]): the readings since the step fitted with a τ no
//! shorter than the card's (a die does not settle faster than its heat sink lets it) and at
//! most [`TAU_SPREAD`] times longer (a larger step reaches further into the heat sink). Until
//! it predicts less than a sensor step to go, the die has not shown its level at this load;
//! a die that keeps heating past the level it settled at is a cooling failing. A failing
//! cooler does not look like a first-order approach: it rises at a steady rate, or moves the
//! settle point up after the die held it.

use crate::model::{Fingerprint, STEADY_FRACTION};
use crate::stats::median;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The shortest and longest time constants fitted (seconds); a fit at either end is not a τ.
pub const TAU_RANGE_S: (f64, f64) = (1.0, 120.0);

/// The ratio between neighbouring time constants on the grid searched.
const TAU_STEP: f64 = 1.1;

/// The load step's response fitted now may take up to this many times the card's learned τ:
/// a step to a heavier load reaches further into the heat sink than the smaller steps the τ
/// may have been learned from (the H100 above: 5.6 and 9 s on steps of 4–7 °C, 23 s on its
/// 14 °C step to 700 W).
pub const TAU_SPREAD: f64 = 3.0;

/// The smallest approach (°C, |T∞ − T0|) a load step must show for its τ to be learned: three
/// sensor steps, so that whole-degree readings show the curve.
pub const MIN_AMPLITUDE_C: f64 = 3.0;

/// The largest root-mean-square residual (°C) of a fit whose τ is learned: whole-degree
/// readings of a smooth curve scatter by 0.29 °C; a bursty load's die swings by degrees.
pub const MAX_RMS_C: f64 = 0.6;

/// A load step's τ is learned only where the load held this many times τ (most of the
/// approach seen, not a slope that a longer or shorter τ fits as well).
pub const MIN_SPAN_TAUS: f64 = 1.5;

/// Learned time constants kept per GPU (the latest; their median is the card's τ).
const KEPT: usize = 16;

/// Readings kept of one load (at the default 1-s interval, 8.5 minutes: over four times the
/// longest τ fitted).
const SEGMENT_READINGS: usize = 512;

/// A first-order response fitted to a die's readings at one load.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepFit {
    /// The time constant, seconds.
    pub tau_s: f64,
    /// Where the die settles at this load, °C (`T∞`).
    pub settle_c: f64,
    /// `T0 − T∞` at the load's first reading, °C: negative while warming, positive while
    /// cooling.
    pub approach_c: f64,
    /// The root-mean-square residual of the readings about the fit, °C.
    pub rms_c: f64,
}

impl StepFit {
    /// How far (°C, either way) the die is still from its settle point `since_s` seconds
    /// after the load's first reading, by the fit.
    pub fn left_at(&self, since_s: f64) -> f64 {
        self.approach_c.abs() * (-since_s / self.tau_s).exp()
    }
}

/// Least squares of `T = settle + approach·e^(−t/τ)` over `points` (seconds since the load's
/// first reading, °C) for each τ of `taus`; the best fit, `None` with fewer than four points
/// or none that determines the two (all at one time).
pub fn fit_step(points: &[(f64, f64)], taus: impl IntoIterator<Item = f64>) -> Option<StepFit> {
    if points.len() < 4 {
        return None;
    }
    let n = points.len() as f64;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let mut best: Option<(f64, StepFit)> = None;
    for tau_s in taus {
        let xs: Vec<f64> = points.iter().map(|p| (-p.0 / tau_s).exp()).collect();
        let mean_x = xs.iter().sum::<f64>() / n;
        let sxx: f64 = xs.iter().map(|x| (x - mean_x).powi(2)).sum();
        if sxx < 1e-12 {
            continue;
        }
        let sxy: f64 = xs
            .iter()
            .zip(points)
            .map(|(x, p)| (x - mean_x) * (p.1 - mean_y))
            .sum();
        let approach_c = sxy / sxx;
        let settle_c = mean_y - approach_c * mean_x;
        let sse: f64 = xs
            .iter()
            .zip(points)
            .map(|(x, p)| (p.1 - settle_c - approach_c * x).powi(2))
            .sum();
        if best.as_ref().is_none_or(|(b, _)| sse < *b) {
            let rms_c = (sse / n).sqrt();
            best = Some((
                sse,
                StepFit {
                    tau_s,
                    settle_c,
                    approach_c,
                    rms_c,
                },
            ));
        }
    }
    best.map(|(_, fit)| fit)
}

/// The time constants from `low` to `high` seconds, [`TAU_STEP`] apart (both ends included).
pub(crate) fn taus(low: f64, high: f64) -> impl Iterator<Item = f64> {
    let steps = ((high / low).ln() / TAU_STEP.ln()).ceil().max(0.0) as i32;
    (0..=steps).map(move |k| (low * TAU_STEP.powi(k)).min(high))
}

/// What a GPU's thermal response keeps across runs (`pog monitor run` and the agent keep it in
/// their history, per GPU UUID): the time constants the die's and the memory's load steps
/// showed (how fast each settles, [`ThermalResponse`]), where each settled at each load it
/// held (the monitor's held levels), and the fingerprint of the GPU they were learned on, so
/// that an entry of another GPU model (a replayed trace's `GPU-0` of another run, a history
/// copied between hosts) is not taken up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeptResponse {
    /// The die's learned time constants, oldest first (seconds; at most 16).
    pub taus_s: Vec<f64>,
    /// The memory's learned time constants, as the die's; empty before it showed one (and in
    /// entries kept before the memory's were).
    #[serde(default)]
    pub mem_taus_s: Vec<f64>,
    /// Where the die settled at each load it held; `None` before it held one (and in entries
    /// kept before the levels were).
    #[serde(default)]
    pub held: Option<KeptHeldLevels>,
    /// Where the memory settled at each load it held, as the die's are kept (checked against
    /// the memory's limit); `None` before it held one (and in entries kept before the
    /// memory's levels were).
    #[serde(default)]
    pub mem_held: Option<KeptHeldLevels>,
    /// The memory clock and size of the GPU they were learned on, where it read them.
    pub fingerprint: Option<Fingerprint>,
}

/// The heaviest load (W) a kept settled level may be at: above it, an entry is corrupt.
pub const HELD_LOAD_MAX_W: f64 = 5000.0;

/// Where a GPU's die (or memory) settled at each load it held, as [`KeptResponse`] keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeptHeldLevels {
    /// The width (W) of the bins of recent power the loads are (the monitor's
    /// [`Config::envelope_bin_w`](crate::Config)).
    pub bin_w: f64,
    /// Per load (its bin of recent power): the settled level there, °C.
    pub by_bin: BTreeMap<usize, f64>,
}

impl KeptHeldLevels {
    /// Refuses levels this monitor could not have learned: kept in bins of another width
    /// than `bin_w`, at a load above [`HELD_LOAD_MAX_W`], or a level not finite or outside
    /// 0 °C to `limit_c` (the die's or the memory's thermal limit: it never settles at or
    /// above it).
    pub fn check(&self, bin_w: f64, limit_c: f64) -> Result<(), ResponseResumeError> {
        if self.bin_w != bin_w {
            return Err(ResponseResumeError::Invalid(format!(
                "settled levels kept in {} W bins of recent power, judged in {bin_w} W bins",
                self.bin_w
            )));
        }
        let out = self.by_bin.iter().find(|&(&bin, &level)| {
            bin as f64 * bin_w > HELD_LOAD_MAX_W || !(level > 0.0 && level < limit_c)
        });
        if let Some((bin, level)) = out {
            return Err(ResponseResumeError::Invalid(format!(
                "a settled level of {level} °C at {} W, outside 0–{limit_c} °C at up to {HELD_LOAD_MAX_W} W",
                *bin as f64 * bin_w
            )));
        }
        Ok(())
    }
}

/// Why a kept thermal response was not taken up (the GPU then learns its τ afresh).
#[derive(Debug, thiserror::Error)]
pub enum ResponseResumeError {
    /// The kept text is not a kept response.
    #[error("the kept thermal response could not be read: {0}")]
    Parse(#[from] serde_json::Error),
    /// It holds a time constant this GPU could not have learned (not finite, outside
    /// [`TAU_RANGE_S`], or more than 16 of them), or a settled level
    /// ([`KeptHeldLevels::check`]): a corrupt entry.
    #[error("the kept thermal response is not one a GPU learns: {0}")]
    Invalid(String),
    /// It was learned on another GPU model.
    #[error("the kept thermal response was learned on another GPU model ({0})")]
    OtherModel(String),
}

/// A load that ended after its approach was seen ([`ThermalResponse::take_ended`]): where the
/// first-order response fitted to its readings was heading, whether or not it got there.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EndedLoad {
    /// The highest power read at the load, W (the window's maximum the envelope is read at).
    pub power_w: f64,
    /// Where the fit settles at that load, °C (`T∞`).
    pub settle_c: f64,
}

/// One GPU's die response, learned from its own load steps, and the load it holds now.
#[derive(Debug, Clone, Default)]
pub struct ThermalResponse {
    /// The latest learned time constants, seconds.
    learned: Vec<f64>,
    /// The readings (time, °C) at the load held now, from its first (at most
    /// [`SEGMENT_READINGS`]).
    segment: Vec<(f64, f64)>,
    /// The time of the latest reading at the load held now (kept or not).
    latest_t: f64,
    /// The lowest and highest power read at the load held now.
    band: Option<(f64, f64)>,
    /// The latest load that ended with its approach seen, not yet taken.
    ended: Option<EndedLoad>,
    /// Seconds the load before the one held now was held (from its first reading to its
    /// last; a load of one reading, the power read straddling a step, does not count),
    /// `None` before a load ended (or after a restart).
    previous_held_s: Option<f64>,
}

impl ThermalResponse {
    /// Takes the next reading of power and die temperature (either `None`: nothing learned
    /// from it). A power outside the load held so far (its lowest under [`STEADY_FRACTION`]
    /// of its highest) ends that load — its τ is learned where its readings show one (an
    /// approach of [`MIN_AMPLITUDE_C`] or more, within [`MAX_RMS_C`] of the fit, held
    /// [`MIN_SPAN_TAUS`] times τ) — and starts the next one.
    pub fn observe(&mut self, t: f64, power_w: Option<f64>, temp_c: Option<f64>) {
        let (Some(p), Some(temp)) = (power_w, temp_c) else {
            return;
        };
        let band = match self.band {
            Some((low, high)) if low.min(p) >= STEADY_FRACTION * high.max(p) => {
                (low.min(p), high.max(p))
            }
            Some(_) => {
                self.learn();
                // A single reading is the step itself (the power read averages over it).
                if self.segment.len() > 1 {
                    self.previous_held_s = self.held_s();
                }
                self.segment.clear();
                (p, p)
            }
            None => (p, p),
        };
        self.band = Some(band);
        self.latest_t = t;
        if self.segment.len() < SEGMENT_READINGS {
            self.segment.push((t, temp));
        }
    }

    /// A response that starts from the time constants an earlier run learned (oldest first),
    /// as if it had learned them itself: refused unless each is one it could have learned
    /// (finite, strictly inside [`TAU_RANGE_S`]) and there are at most as many as it keeps.
    pub fn resumed(taus_s: &[f64]) -> Result<ThermalResponse, ResponseResumeError> {
        let (low, high) = TAU_RANGE_S;
        if taus_s.len() > KEPT {
            return Err(ResponseResumeError::Invalid(format!(
                "{} time constants, at most {KEPT} are kept",
                taus_s.len()
            )));
        }
        if let Some(bad) = taus_s.iter().find(|&&tau| !(tau > low && tau < high)) {
            return Err(ResponseResumeError::Invalid(format!(
                "a time constant of {bad} s, outside {low}–{high} s"
            )));
        }
        Ok(ThermalResponse {
            learned: taus_s.to_vec(),
            ..ThermalResponse::default()
        })
    }

    /// The load that ended last with its approach seen, where the fit that taught its τ says it
    /// was heading (once: `None` after until another such load ends): a die still warming when
    /// its run's first heavy load ended shows how far it rises there before it ever holds it.
    pub fn take_ended(&mut self) -> Option<EndedLoad> {
        self.ended.take()
    }

    /// The time constants learned so far (seconds, oldest first), to keep across runs.
    pub fn learned(&self) -> &[f64] {
        &self.learned
    }

    /// Forgets the load held now (a gap in the samples, a clock step): its readings are not
    /// one response. What was learned is kept.
    pub fn restart(&mut self) {
        self.segment.clear();
        self.band = None;
        self.previous_held_s = None;
    }

    /// Seconds the load held now has been held, from its first reading: `None` before one.
    pub fn held_s(&self) -> Option<f64> {
        self.segment.first().map(|(t0, _)| self.latest_t - t0)
    }

    /// Seconds the load before the one held now was held: `None` before a load ended, or
    /// since a restart.
    pub fn previous_held_s(&self) -> Option<f64> {
        self.previous_held_s
    }

    /// The card's time constant (seconds): the median of those its load steps showed, `None`
    /// before one did.
    pub fn tau_s(&self) -> Option<f64> {
        median(&self.learned)
    }

    /// How far (°C) the die still is from where it settles at the load held now, by the
    /// response fitted to its readings there (after the first) with a τ from the card's to
    /// [`TAU_SPREAD`] times it: `None` before the card showed its τ or with fewer than five
    /// readings at this load.
    pub fn left_to_settle(&self) -> Option<f64> {
        let tau = self.tau_s()?;
        let (t0, _) = *self.segment.first()?;
        // Past five of the longest τ allowed, any approach under 40 °C is within 0.3 °C.
        if self.latest_t - t0 >= 5.0 * TAU_SPREAD * tau {
            return Some(0.0);
        }
        self.approach().map(|(fit, since)| fit.left_at(since))
    }

    /// The response fitted to the die's readings at the load held now (after the first), with
    /// a τ from the card's to [`TAU_SPREAD`] times it, and the seconds since the load's first
    /// reading: `None` before the card showed its τ or with fewer than five readings at this
    /// load.
    pub fn approach(&self) -> Option<(StepFit, f64)> {
        let tau = self.tau_s()?;
        let (t0, _) = *self.segment.first()?;
        let fit = fit_step(&self.since_first(), taus(tau, TAU_SPREAD * tau))?;
        Some((fit, self.latest_t - t0))
    }

    /// The response fitted to the readings at the load held now with any τ from the card's
    /// own (or, before it showed one, [`TAU_RANGE_S`]'s shortest) to the range's longest, and
    /// the seconds since the load's first reading: for a load whose approach the card's
    /// learned τ does not describe, or a card that has shown none yet (its run's first load
    /// after idle). Kept only where it shows a first-order approach seen bending: its τ
    /// short of the range's longest (a steady heating, as a cooling failing, fits the
    /// longest as a straight line) and the load held at least that τ. An H100's HBM, its τ
    /// learned at 2.6 s from short bursts, warms 49 → 64 °C with τ ≈ 21 s in its first
    /// 700-W load (GPU-9ed4b029…); another's die 52 → 67 °C with τ ≈ 19 s in its run's first
    /// load, no τ learned yet (GPU-b699410f…).
    pub fn approach_unlearned(&self) -> Option<(StepFit, f64)> {
        let (low, high) = TAU_RANGE_S;
        let (t0, _) = *self.segment.first()?;
        let from = self.tau_s().map_or(low, |tau| tau.clamp(low, high));
        let fit = fit_step(&self.since_first(), taus(from, high))?;
        let since = self.latest_t - t0;
        (fit.tau_s < high && since >= fit.tau_s).then_some((fit, since))
    }

    /// The readings at the load held now after its first (seconds since the first, °C): the
    /// die's own jump lands in the first, whose power reading averages the step.
    fn since_first(&self) -> Vec<(f64, f64)> {
        let t0 = self.segment.first().map_or(0.0, |r| r.0);
        self.segment
            .iter()
            .skip(1)
            .map(|(t, v)| (t - t0, *v))
            .collect()
    }

    /// Learns τ from the load that just ended (its readings after the first), where it shows
    /// one: an approach of at least [`MIN_AMPLITUDE_C`], readings within [`MAX_RMS_C`] of the
    /// fit, a τ inside [`TAU_RANGE_S`] and held at least [`MIN_SPAN_TAUS`] times τ.
    fn learn(&mut self) {
        let points = self.since_first();
        let span = points.last().map_or(0.0, |p| p.0);
        let (low, high) = TAU_RANGE_S;
        let Some(fit) = fit_step(&points, taus(low, high)) else {
            return;
        };
        if fit.approach_c.abs() >= MIN_AMPLITUDE_C
            && fit.rms_c <= MAX_RMS_C
            && fit.tau_s > low
            && fit.tau_s < high
            && span >= MIN_SPAN_TAUS * fit.tau_s
        {
            if let Some((_, high)) = self.band {
                self.ended = Some(EndedLoad {
                    power_w: high,
                    settle_c: fit.settle_c,
                });
            }
            self.learned.push(fit.tau_s);
            if self.learned.len() > KEPT {
                self.learned.remove(0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A card whose die follows its power with time constant `tau_s`: at `p` watts it settles
    /// at `idle_c + gain·(p − idle_w)`, read in whole degrees every second. `loads` is a list
    /// of (seconds, watts); the die starts settled at the first load.
    fn card(tau_s: f64, loads: &[(f64, f64)]) -> Vec<(f64, f64, f64)> {
        let settle = |p: f64| 40.0 + 0.04 * (p - 100.0);
        let mut die = settle(loads[0].1);
        let mut t = 0.0;
        let mut out = Vec::new();
        for &(seconds, p) in loads {
            let end = t + seconds;
            while t < end {
                out.push((t, p, die.round()));
                die += (settle(p) - die) * (1.0 - (-1.0 / tau_s).exp());
                t += 1.0;
            }
        }
        out
    }

    fn learned(readings: &[(f64, f64, f64)]) -> ThermalResponse {
        let mut response = ThermalResponse::default();
        for &(t, p, temp) in readings {
            response.observe(t, Some(p), Some(temp));
        }
        response
    }

    #[test]
    fn a_first_order_step_is_fitted_from_whole_degree_readings() {
        // 50 → 70 °C with τ = 20 s, rounded.
        let points: Vec<(f64, f64)> = (0..80)
            .map(|i| {
                let t = f64::from(i);
                (t, (70.0 - 20.0 * (-t / 20.0).exp()).round())
            })
            .collect();
        let fit = fit_step(&points, taus(TAU_RANGE_S.0, TAU_RANGE_S.1)).unwrap();
        assert!((fit.tau_s - 20.0).abs() < 3.0, "{fit:?}");
        assert!((fit.settle_c - 70.0).abs() < 0.5, "{fit:?}");
        assert!((fit.approach_c + 20.0).abs() < 1.0, "{fit:?}");
        assert!(fit.rms_c < MAX_RMS_C, "{fit:?}");
        assert!((fit.left_at(20.0) - 20.0 / std::f64::consts::E).abs() < 1.0);
    }

    #[test]
    fn how_long_the_load_before_was_held_skips_the_reading_that_straddles_a_step() {
        // 45 s at idle, one reading averaging the step (269 W), then a copy at 372 W: the load
        // before the copy is the idle's 44 s, not the step's single reading; bursts of two
        // readings count as held for 1 s each. A restart forgets it.
        let mut response = ThermalResponse::default();
        let mut read = |t: f64, p: f64| response.observe(t, Some(p), Some(45.0));
        (0..45).for_each(|t| read(f64::from(t), 124.0));
        read(45.0, 269.0);
        (46..50).for_each(|t| read(f64::from(t), 372.0));
        assert_eq!(response.previous_held_s(), Some(44.0));
        assert_eq!(response.held_s(), Some(3.0));
        for (t, p) in [(50.0, 124.0), (51.0, 124.0), (52.0, 372.0), (53.0, 372.0)] {
            response.observe(t, Some(p), Some(45.0));
        }
        assert_eq!(response.previous_held_s(), Some(1.0));
        response.restart();
        assert_eq!(
            (response.previous_held_s(), response.held_s()),
            (None, None)
        );
    }

    #[test]
    fn the_cards_time_constant_is_learned_from_its_own_load_steps() {
        // A slow card (τ = 25 s) and a fast one (τ = 4 s), each through loads of 60–120 s.
        let loads = [(120.0, 600.0), (90.0, 100.0), (60.0, 400.0), (120.0, 150.0)];
        for tau in [25.0, 4.0] {
            let response = learned(&card(tau, &loads));
            let got = response.tau_s().unwrap();
            assert!((got - tau).abs() <= 0.25 * tau, "τ {tau}: learned {got}");
        }
        // A load too short to show its τ (10 s of a 25-s approach), and steps of a degree,
        // teach nothing.
        let short = [(60.0, 100.0), (10.0, 600.0), (5.0, 100.0)];
        let small = [(60.0, 100.0), (60.0, 130.0), (60.0, 100.0), (5.0, 600.0)];
        for loads in [&short[..], &small[..]] {
            assert_eq!(learned(&card(25.0, loads)).tau_s(), None, "{loads:?}");
        }
    }

    #[test]
    fn learned_time_constants_are_taken_up_and_corrupt_ones_refused() {
        let loads = [(120.0, 600.0), (90.0, 100.0), (60.0, 400.0), (120.0, 150.0)];
        let earlier = learned(&card(25.0, &loads));
        let resumed = ThermalResponse::resumed(earlier.learned()).unwrap();
        assert_eq!(resumed.tau_s(), earlier.tau_s());
        assert!(resumed.tau_s().is_some());
        for bad in [
            vec![f64::NAN],
            vec![7.0, f64::INFINITY],
            vec![0.5],
            vec![TAU_RANGE_S.1],
            vec![-3.0],
            vec![7.0; KEPT + 1],
        ] {
            assert!(
                matches!(
                    ThermalResponse::resumed(&bad),
                    Err(ResponseResumeError::Invalid(_))
                ),
                "{bad:?}"
            );
        }
        assert_eq!(ThermalResponse::resumed(&[]).unwrap().tau_s(), None);
    }

    #[test]
    fn kept_settled_levels_are_checked_and_an_entry_kept_before_them_still_reads() {
        let older: KeptResponse =
            serde_json::from_str("{\"taus_s\":[7.0],\"fingerprint\":null}").unwrap();
        assert_eq!(older.held, None);
        assert_eq!(older.mem_held, None);
        // Kept before the memory's time constants were: the memory learns its own afresh.
        assert!(older.mem_taus_s.is_empty());
        // Kept with the die's levels only (before the memory's were): the die's read.
        let die_only: KeptResponse = serde_json::from_str(
            "{\"taus_s\":[7.0],\"held\":{\"bin_w\":25.0,\"by_bin\":{\"27\":66.0}},\"fingerprint\":null}",
        )
        .unwrap();
        assert_eq!(die_only.held.map(|h| h.by_bin.len()), Some(1));
        assert_eq!(die_only.mem_held, None);
        let held = |bin_w: f64, bin: usize, level: f64| KeptHeldLevels {
            bin_w,
            by_bin: BTreeMap::from([(5, 44.0), (bin, level)]),
        };
        assert!(held(25.0, 27, 66.0).check(25.0, 87.0).is_ok());
        for (bad, why) in [
            (held(50.0, 13, 66.0), "50 W bins"),
            (held(25.0, 27, 87.0), "87 °C"),
            (held(25.0, 27, -3.0), "-3 °C"),
            (held(25.0, 27, f64::NAN), "NaN °C"),
            (held(25.0, 4000, 60.0), "100000 W"),
        ] {
            let err = bad.check(25.0, 87.0).expect_err(why);
            assert!(err.to_string().contains(why), "{why}: {err}");
        }
    }

    #[test]
    fn kept_memory_levels_are_written_beside_the_dies_and_checked_alike() {
        let levels = |level: f64| KeptHeldLevels {
            bin_w: 25.0,
            by_bin: BTreeMap::from([(15, level)]),
        };
        let kept = KeptResponse {
            taus_s: vec![7.0],
            mem_taus_s: vec![12.0, 15.9],
            held: Some(levels(44.0)),
            mem_held: Some(levels(66.0)),
            fingerprint: None,
        };
        let text = serde_json::to_string(&kept).unwrap();
        assert!(text.contains("\"mem_held\":{\"bin_w\":25.0"), "{text}");
        assert!(text.contains("\"mem_taus_s\":[12.0,15.9]"), "{text}");
        assert_eq!(serde_json::from_str::<KeptResponse>(&text).unwrap(), kept);
        // The HBM's 90 °C is under the memory's 95-°C limit, not under the die's 87.
        assert!(levels(90.0).check(25.0, 95.0).is_ok());
        assert!(levels(90.0).check(25.0, 87.0).is_err());
    }

    #[test]
    fn a_die_warming_with_the_cards_time_constant_has_not_settled_until_it_has() {
        // The card learned τ = 25 s from its steps; then a step from 100 to 700 W: its die
        // goes from 40 to 64 °C. It has not settled while more than a sensor step is left
        // (25·ln 24 ≈ 79 s by the model), and has once the model leaves less.
        let mut readings = card(
            25.0,
            &[
                (120.0, 600.0),
                (120.0, 100.0),
                (100.0, 500.0),
                (120.0, 100.0),
            ],
        );
        let start = readings.last().unwrap().0 + 1.0;
        let mut response = learned(&readings);
        let tau = response.tau_s().unwrap();
        readings = card(25.0, &[(1.0, 100.0), (150.0, 700.0)]);
        let mut settled_at = None;
        for &(t, p, temp) in &readings[1..] {
            response.observe(start + t, Some(p), Some(temp));
            let left = response.left_to_settle();
            if t >= 6.0 && settled_at.is_none() && left.is_some_and(|l| l < 1.0) {
                settled_at = Some(t);
            }
        }
        let settled_at = settled_at.expect("settles");
        assert!(
            (60.0..=100.0).contains(&settled_at),
            "τ {tau:.1}: settled {settled_at} s into the step"
        );
    }

    #[test]
    fn a_load_left_before_it_settled_says_where_it_was_heading_once() {
        // τ = 20 s, 40 s at 700 W (two τ: 3.6 °C short of 64 °C), then back to idle.
        let mut response = learned(&card(20.0, &[(30.0, 100.0), (40.0, 700.0), (5.0, 100.0)]));
        let ended = response
            .take_ended()
            .expect("the 700-W load's approach was seen");
        assert!((ended.power_w - 700.0).abs() < 1e-9, "{ended:?}");
        assert!((ended.settle_c - 64.0).abs() <= 1.0, "{ended:?}");
        assert_eq!(response.take_ended(), None);
    }
}
