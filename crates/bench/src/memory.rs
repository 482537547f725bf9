//! The memory test's verdict (pattern errors and NVML's health counters before and after) and
//! the bandwidth sweep's plateaus.

use crate::judge::{Judgement, Verdict};
use pog_facts::telemetry::HealthCounters;
use pog_facts::{MemtestRun, Reading, SweepPoint};
use serde::{Deserialize, Serialize};

/// Judges a memory test: any bad word or new uncorrectable error fails; new corrected errors
/// or a pending remap warn; testing less than `min_fraction` of free memory warns.
pub fn judge_memtest(run: &MemtestRun, min_fraction: f64) -> Judgement {
    let pog = |verdict, reason: String| Judgement {
        verdict,
        reason,
        source: "pog".into(),
    };
    let bad: u64 = run.patterns.iter().map(|p| p.bad_words).sum();
    if bad > 0 {
        let worst = run
            .patterns
            .iter()
            .filter(|p| p.bad_words > 0)
            .map(|p| p.pattern.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        return pog(
            Verdict::Fail,
            format!("{bad} bad words ({worst}): the memory returns what was not written"),
        );
    }
    let (before, after) = match (&run.health_before, &run.health_after) {
        (Reading::Value(b), Reading::Value(a)) => (b, a),
        (Reading::Unavailable(e), _) | (_, Reading::Unavailable(e)) => {
            return pog(
                Verdict::Warn,
                format!("patterns clean, but ECC counters unreadable: {e}"),
            )
        }
    };
    let grew = |f: fn(&HealthCounters) -> Option<u64>| match (f(before), f(after)) {
        (Some(b), Some(a)) => a.saturating_sub(b),
        _ => 0,
    };
    let uncorrected = grew(|h| h.ecc_uncorrected_volatile.value().copied());
    let corrected = grew(|h| h.ecc_corrected_volatile.value().copied());
    let remap_pending = after
        .remapped_rows
        .value()
        .is_some_and(|r| r.pending || r.failure);
    let fraction = run.bytes_tested as f64 / run.free_bytes.max(1) as f64;
    if uncorrected > 0 {
        pog(
            Verdict::Fail,
            format!("{uncorrected} uncorrectable ECC errors during the test"),
        )
    } else if corrected > 0 || remap_pending {
        pog(
            Verdict::Warn,
            format!(
                "{corrected} corrected ECC errors during the test{}",
                if remap_pending {
                    "; a row remap is pending"
                } else {
                    ""
                }
            ),
        )
    } else if fraction < min_fraction {
        pog(
            Verdict::Warn,
            format!(
                "only {:.1} % of free memory could be tested",
                fraction * 100.0
            ),
        )
    } else {
        pog(
            Verdict::Pass,
            format!(
                "{} patterns over {:.1} % of free memory: no errors, ECC counters unchanged",
                run.patterns.len(),
                fraction * 100.0
            ),
        )
    }
}

/// The memory test as reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemtestResult {
    /// What the test found per pattern and the ECC counters, or `None` when it did not run.
    pub run: Option<MemtestRun>,
    /// Its verdict and why.
    pub judgement: Judgement,
    /// Why the test did not run.
    pub error: Option<String>,
}

/// The sweep as reported, with its plateaus.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepResult {
    /// Read and write GB/s per buffer size, smallest first.
    pub points: Vec<SweepPoint>,
    /// Best read GB/s among buffers that fit in L2 (≤ 16 MiB), and the median read GB/s among
    /// buffers of 1 GiB and more (HBM).
    pub l2_read_gbs: Option<f64>,
    /// Median read GB/s among buffers of 1 GiB and more (HBM).
    pub hbm_read_gbs: Option<f64>,
    /// Median write GB/s among buffers of 1 GiB and more (HBM).
    pub hbm_write_gbs: Option<f64>,
    /// Why the sweep did not run.
    pub error: Option<String>,
}

/// Sweep sizes: 1 MiB to `largest`, doubling.
pub fn sweep_sizes(largest: u64) -> Vec<u64> {
    std::iter::successors(Some(1u64 << 20), |s| Some(s * 2))
        .take_while(|s| *s <= largest)
        .collect()
}

/// Finds the plateaus in a sweep.
pub fn plateaus(points: Vec<SweepPoint>) -> SweepResult {
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (!v.is_empty()).then(|| v[v.len() / 2])
    };
    let big: Vec<&SweepPoint> = points.iter().filter(|p| p.bytes >= 1 << 30).collect();
    SweepResult {
        l2_read_gbs: points
            .iter()
            .filter(|p| p.bytes <= 16 << 20)
            .map(|p| p.read_gbs)
            .fold(None, |m, v| Some(m.map_or(v, |m: f64| m.max(v)))),
        hbm_read_gbs: median(big.iter().map(|p| p.read_gbs).collect()),
        hbm_write_gbs: median(big.iter().map(|p| p.write_gbs).collect()),
        points,
        error: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pog_facts::{PatternResult, RemappedRows};

    fn counters(corrected: u64, uncorrected: u64, pending: bool) -> HealthCounters {
        HealthCounters {
            ecc_corrected_volatile: Reading::Value(corrected),
            ecc_uncorrected_volatile: Reading::Value(uncorrected),
            remapped_rows: Reading::Value(RemappedRows {
                correctable: 0,
                uncorrectable: 0,
                pending,
                failure: false,
            }),
            retired_pages: Reading::unavailable("n/a"),
        }
    }

    fn run(bad: u64, before: HealthCounters, after: HealthCounters, tested: u64) -> MemtestRun {
        MemtestRun {
            bytes_tested: tested,
            free_bytes: 100,
            patterns: vec![PatternResult {
                pattern: "0x55".into(),
                bad_words: bad,
                bad_bits: bad,
                first_bad_offset: None,
                write_ms: 1.0,
                check_ms: 1.0,
            }],
            health_before: Reading::Value(before),
            health_after: Reading::Value(after),
        }
    }

    #[test]
    fn memtest_verdicts() {
        let clean = counters(0, 0, false);
        assert_eq!(
            judge_memtest(&run(0, clean.clone(), clean.clone(), 95), 0.9).verdict,
            Verdict::Pass
        );
        assert_eq!(
            judge_memtest(&run(3, clean.clone(), clean.clone(), 95), 0.9).verdict,
            Verdict::Fail
        );
        assert_eq!(
            judge_memtest(&run(0, clean.clone(), counters(0, 1, false), 95), 0.9).verdict,
            Verdict::Fail
        );
        assert_eq!(
            judge_memtest(&run(0, clean.clone(), counters(2, 0, false), 95), 0.9).verdict,
            Verdict::Warn
        );
        assert_eq!(
            judge_memtest(&run(0, clean.clone(), counters(0, 0, true), 95), 0.9).verdict,
            Verdict::Warn
        );
        assert_eq!(
            judge_memtest(&run(0, clean.clone(), clean.clone(), 50), 0.9).verdict,
            Verdict::Warn
        );
        let mut unreadable = run(0, clean.clone(), clean, 95);
        unreadable.health_after = Reading::unavailable("no NVML");
        assert_eq!(judge_memtest(&unreadable, 0.9).verdict, Verdict::Warn);
    }

    #[test]
    fn sweep_sizes_and_plateaus() {
        assert_eq!(
            sweep_sizes(8 << 20),
            vec![1 << 20, 2 << 20, 4 << 20, 8 << 20]
        );
        let points: Vec<SweepPoint> = sweep_sizes(4 << 30)
            .into_iter()
            .map(|b| SweepPoint {
                bytes: b,
                read_gbs: if b <= 16 << 20 { 9000.0 } else { 4000.0 },
                write_gbs: 3500.0,
            })
            .collect();
        let r = plateaus(points);
        assert_eq!(r.l2_read_gbs, Some(9000.0));
        assert_eq!(r.hbm_read_gbs, Some(4000.0));
        assert_eq!(r.hbm_write_gbs, Some(3500.0));
        assert_eq!(plateaus(vec![]).hbm_read_gbs, None);
    }
}
