//! The sustained run's analysis: throughput over time against peak and burst, its variance,
//! clocks, power and throttling from the NVML samples, and gpu-burn style result comparison.

use crate::judge::{Judgement, Verdict};
use crate::stats::Summary;
use pog_facts::telemetry::TelemetrySample;
use pog_facts::Reading;
use pog_facts::SustainedRun;
use pog_spec::Precision;
use serde::{Deserialize, Serialize};

/// NVML clock-event reason bits that mean heat or a hardware limit (not the software power cap
/// 0x4, which a card at its power limit shows all the time under GEMM load: ../shared/h200).
const THERMAL_OR_HARDWARE: [(u64, &str); 4] = [
    (0x8, "hardware slowdown"),
    (0x20, "software thermal slowdown"),
    (0x40, "hardware thermal slowdown"),
    (0x80, "power brake"),
];
const POWER_CAP: u64 = 0x4;

/// Sustained throughput below this share of the burst GEMM figure warns. A healthy H200 at
/// its 700 W cap sustains 88 % of its burst BF16 figure (docs/benchmarks.md).
const MIN_SUSTAINED_VS_BURST: f64 = 0.80;
/// Iteration-to-iteration coefficient of variation above this warns.
const MAX_VARIATION: f64 = 0.05;

/// Clocks, power and limits over the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TelemetrySummary {
    /// NVML samples taken (one every 250 ms).
    pub samples: usize,
    /// SM clock over the samples, MHz.
    pub sm_clock_mhz: Option<Summary>,
    /// Board power over the samples, W.
    pub power_w: Option<Summary>,
    /// GPU temperature over the samples, °C.
    pub temperature_c: Option<Summary>,
    /// Samples whose SM clock is more than 10 % below the run's highest.
    pub clock_drops: usize,
    /// Share of samples at the software power cap.
    pub power_capped_fraction: f64,
    /// Each thermal or hardware reason seen, with its share of samples.
    pub thermal_or_hardware: Vec<(String, f64)>,
}

/// The sustained run as reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SustainedResult {
    /// Precision of the back-to-back GEMMs.
    pub precision: Precision,
    /// m = n = k.
    pub size: u64,
    /// Planned length of the run, seconds.
    pub seconds: f64,
    /// GEMM iterations completed.
    pub iterations: usize,
    /// TFLOP/s of each iteration, summarized.
    pub tflops: Option<Summary>,
    /// TFLOP/s of the first iteration.
    pub first_iteration_tflops: Option<f64>,
    /// Coefficient of variation of per-iteration TFLOP/s.
    pub variation: Option<f64>,
    /// Median sustained TFLOP/s over the model's datasheet peak for the precision.
    pub vs_peak: Option<f64>,
    /// Median sustained TFLOP/s over the same GEMM's burst median in this run.
    pub vs_burst: Option<f64>,
    /// gpu-burn style: elements that differed from the first result, summed over iterations,
    /// NaNs likewise, and the iterations with any.
    pub mismatched_elements: u64,
    /// NaNs in the results, summed over iterations.
    pub nans: u64,
    /// Iterations with any mismatched element or NaN; any one fails the run.
    pub faulty_iterations: usize,
    /// The NVML telemetry summarized, or why it could not be read.
    pub telemetry: Reading<TelemetrySummary>,
    /// Its verdict and why.
    pub judgement: Judgement,
}

/// Summarizes NVML samples.
pub fn summarize_telemetry(samples: &[TelemetrySample]) -> TelemetrySummary {
    let collect = |f: fn(&TelemetrySample) -> Option<f64>| {
        Summary::of(&samples.iter().filter_map(f).collect::<Vec<_>>())
    };
    let sm = collect(|s| s.sm_clock_mhz.map(f64::from));
    let top = sm.map_or(0.0, |s| s.max);
    let share = |bit: u64| {
        let n = samples
            .iter()
            .filter(|s| s.clock_event_reasons.is_some_and(|r| r & bit != 0))
            .count();
        n as f64 / samples.len().max(1) as f64
    };
    TelemetrySummary {
        samples: samples.len(),
        sm_clock_mhz: sm,
        power_w: collect(|s| s.power_w),
        temperature_c: collect(|s| s.temperature_c.map(f64::from)),
        clock_drops: samples
            .iter()
            .filter(|s| s.sm_clock_mhz.is_some_and(|c| f64::from(c) < 0.9 * top))
            .count(),
        power_capped_fraction: share(POWER_CAP),
        thermal_or_hardware: THERMAL_OR_HARDWARE
            .iter()
            .filter(|(bit, _)| share(*bit) > 0.0)
            .map(|(bit, name)| (name.to_string(), share(*bit)))
            .collect(),
    }
}

/// Analyzes a sustained run. `peak` is the datasheet TFLOP/s, `burst` this run's GEMM median.
pub fn analyze(
    precision: Precision,
    size: u64,
    seconds: f64,
    run: SustainedRun,
    peak: Option<f64>,
    burst: Option<f64>,
) -> SustainedResult {
    let flops = 2.0 * (size as f64).powi(3);
    let per_iteration: Vec<f64> = run
        .times_ms
        .iter()
        .map(|ms| flops / (ms * 1e-3) / 1e12)
        .collect();
    let tflops = Summary::of(&per_iteration);
    let variation = tflops.and_then(|t| {
        let var = per_iteration
            .iter()
            .map(|x| (x - t.mean).powi(2))
            .sum::<f64>()
            / per_iteration.len() as f64;
        (t.mean > 0.0).then(|| var.sqrt() / t.mean)
    });
    let mismatched_elements: u64 = run.mismatched.iter().sum();
    let nans: u64 = run.nans.iter().sum();
    let faulty_iterations = run
        .mismatched
        .iter()
        .zip(&run.nans)
        .filter(|(m, n)| **m > 0 || **n > 0)
        .count();
    let telemetry = run.telemetry.map(|s| summarize_telemetry(&s));
    let vs_burst = tflops.and_then(|t| burst.map(|b| t.median / b));
    let pog = |verdict, reason: String| Judgement {
        verdict,
        reason,
        source: "pog".into(),
    };
    let thermal = telemetry
        .value()
        .map(|t| t.thermal_or_hardware.clone())
        .unwrap_or_default();
    let judgement = if faulty_iterations > 0 {
        pog(Verdict::Fail, format!("{faulty_iterations} iterations differed from the first result ({mismatched_elements} elements, {nans} NaNs): the GPU computes unreliably under load"))
    } else if tflops.is_none() {
        pog(Verdict::Fail, "no iteration completed".into())
    } else if !thermal.is_empty() {
        let names: Vec<String> = thermal
            .iter()
            .map(|(n, f)| format!("{n} in {:.0} % of samples", f * 100.0))
            .collect();
        pog(Verdict::Warn, format!("throttled: {}", names.join(", ")))
    } else if vs_burst.is_some_and(|v| v < MIN_SUSTAINED_VS_BURST) {
        pog(
            Verdict::Warn,
            format!(
                "sustained throughput is {:.0} % of the burst figure",
                vs_burst.unwrap_or(0.0) * 100.0
            ),
        )
    } else if variation.is_some_and(|v| v > MAX_VARIATION) {
        pog(
            Verdict::Warn,
            format!(
                "throughput varies by {:.1} % between iterations",
                variation.unwrap_or(0.0) * 100.0
            ),
        )
    } else {
        pog(
            Verdict::Pass,
            format!(
                "{} iterations identical to the first, steady within {:.1} %",
                run.times_ms.len(),
                variation.unwrap_or(0.0) * 100.0
            ),
        )
    };
    SustainedResult {
        precision,
        size,
        seconds,
        iterations: run.times_ms.len(),
        first_iteration_tflops: per_iteration.first().copied(),
        vs_peak: tflops.and_then(|t| peak.map(|p| t.median / p)),
        vs_burst,
        tflops,
        variation,
        mismatched_elements,
        nans,
        faulty_iterations,
        telemetry,
        judgement,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(clock: u32, reasons: u64) -> TelemetrySample {
        TelemetrySample {
            t_s: 0.0,
            sm_clock_mhz: Some(clock),
            memory_clock_mhz: None,
            power_w: Some(695.0),
            temperature_c: Some(62),
            clock_event_reasons: Some(reasons),
            gpu_utilization: Some(100),
        }
    }

    fn run(times: Vec<f64>, mismatched: u64, telemetry: Vec<TelemetrySample>) -> SustainedRun {
        let n = times.len() - 1;
        SustainedRun {
            times_ms: times,
            elements: 64,
            mismatched: vec![mismatched; n],
            nans: vec![0; n],
            telemetry: Reading::Value(telemetry),
        }
    }

    #[test]
    fn a_steady_power_capped_gpu_passes() {
        let r = analyze(
            Precision::Bf16,
            8192,
            60.0,
            run(
                vec![1.4, 1.4, 1.41, 1.4],
                0,
                vec![sample(1600, 0x4), sample(1590, 0x4)],
            ),
            Some(989.4),
            Some(790.0),
        );
        assert_eq!(r.judgement.verdict, Verdict::Pass, "{:?}", r.judgement);
        let t = r.telemetry.value().cloned().unwrap();
        assert_eq!(t.power_capped_fraction, 1.0);
        assert_eq!(t.clock_drops, 0);
        assert!(r.vs_peak.unwrap() > 0.7);
    }

    #[test]
    fn differing_results_fail_and_throttling_warns() {
        let bad = analyze(
            Precision::Fp32,
            1024,
            1.0,
            run(vec![1.0, 1.0, 1.0], 5, vec![]),
            None,
            None,
        );
        assert_eq!(bad.judgement.verdict, Verdict::Fail);
        assert_eq!((bad.faulty_iterations, bad.mismatched_elements), (2, 10));
        let hot = analyze(
            Precision::Fp32,
            1024,
            1.0,
            run(
                vec![1.0, 1.0],
                0,
                vec![sample(1980, 0x0), sample(1200, 0x40)],
            ),
            None,
            None,
        );
        assert_eq!(hot.judgement.verdict, Verdict::Warn);
        assert!(hot.judgement.reason.contains("hardware thermal"));
        assert_eq!(hot.telemetry.value().unwrap().clock_drops, 1);
        let slow = analyze(
            Precision::Fp32,
            1024,
            1.0,
            run(vec![2.0, 2.0], 0, vec![]),
            None,
            Some(2.0 * 1024f64.powi(3) / 1e-3 / 1e12),
        );
        assert_eq!(
            slow.judgement.verdict,
            Verdict::Warn,
            "{:?}",
            slow.judgement
        );
        let noisy = analyze(
            Precision::Fp32,
            1024,
            1.0,
            run(vec![1.0, 2.0, 1.0, 2.0], 0, vec![]),
            None,
            None,
        );
        assert_eq!(noisy.judgement.verdict, Verdict::Warn);
    }
}
