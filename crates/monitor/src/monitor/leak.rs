//! The memory leak detector: memory in use growing steadily while the GPU works, over its
//! thinned points or right after a steady footprint (the fast check). Its own file: it keeps
//! its own points and reads only memory and utilization.

use super::Monitor;
use crate::alert::{AlertKind, Finding, Severity, SignalChange};
use crate::sample::Sample;
use crate::stats::{median, theil_sen};
use std::collections::BTreeMap;

/// Points of memory use kept for the leak detector: past this, every other one is dropped
/// (a GPU whose memory holds still for days must not grow the monitor).
pub(super) const LEAK_POINTS: usize = 2048;

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

#[derive(Debug, Clone)]
pub(super) struct Leak {
    start_t: f64,
    start_mib: f64,
    max_mib: f64,
    pub(super) points: Vec<(f64, f64)>,
    /// Samples at which memory rose and utilization was read: all, and those with the GPU
    /// working ([`LEAK_WORKING_UTIL_PCT`]).
    rises_with_util: usize,
    rises_while_working: usize,
}

impl Monitor {
    pub(super) fn memory_leak(&mut self, s: &Sample, out: &mut Vec<Finding>) {
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
