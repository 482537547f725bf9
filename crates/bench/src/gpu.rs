//! Runs a GPU plan through an [`Accelerator`]: times every GEMM and copy, checks sampled GEMM
//! outputs against the f64 reference, and judges each figure.

use crate::judge::{self, failed, Judgement, Verdict};
use crate::memory::{judge_memtest, plateaus, MemtestResult, SweepResult};
use crate::plan::{CopyPlan, GemmPlan, GpuPlan};
use crate::stats::Summary;
use crate::sustained::{analyze, SustainedResult};
use pog_facts::{
    Accelerator, CopyKind, CopyRequest, GemmRequest, MemtestRequest, SustainedRequest, SweepRequest,
};
use pog_matgen::{tolerance, SeededGemm};
use pog_spec::{GpuSpec, Precision};
use serde::{Deserialize, Serialize};

/// Output elements checked per GEMM. A kernel that fakes a fraction f of the output passes all
/// of them with probability (1 − f)^64: under 2 % for f = 6 %.
pub const CHECKED_SAMPLES: u64 = 64;

/// How the sampled outputs compared with the f64 reference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultCheck {
    /// Sampled output elements recomputed in f64.
    pub checked: usize,
    /// How many of them fell outside the tolerance; any one fails the figure.
    pub wrong: usize,
    /// The largest |error| / tolerance seen (below 1 for every accepted element).
    pub worst_error_ratio: f64,
}

/// One GEMM's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GemmResult {
    /// The GEMM's input and compute precision.
    pub precision: Precision,
    /// m = n = k.
    pub size: u64,
    /// Untimed runs before the timed ones.
    pub warmup: u32,
    /// Timed runs.
    pub iterations: u32,
    /// Idle milliseconds before each timed run, which followed one untimed run; 0: back to
    /// back (see `GemmPlan::run_rest_ms`). Figures timed the two ways differ on a power-capped
    /// card, so the record says which.
    #[serde(default)]
    pub run_rest_ms: u32,
    /// Per-run time, ms; `None` when the GEMM did not run.
    pub time_ms: Option<Summary>,
    /// TFLOP/s (TOP/s for INT8) at the median time, and at the fastest run.
    pub tflops_median: Option<f64>,
    /// TFLOP/s (TOP/s for INT8) at the fastest run.
    pub tflops_best: Option<f64>,
    /// The model's datasheet peak for this precision, TFLOP/s (TOP/s for INT8).
    pub peak_tflops: Option<f64>,
    /// The cuBLASLt algorithm that was timed, as the device layer names it.
    pub algorithm: Option<String>,
    /// How the sampled outputs compared with the f64 reference.
    pub check: Option<ResultCheck>,
    /// Its verdict and why.
    pub judgement: Judgement,
    /// Why the GEMM did not run.
    pub error: Option<String>,
}

/// One copy's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CopyResult {
    /// Which copy: direction, pinned or pageable.
    pub kind: CopyKind,
    /// Bytes per copy.
    pub bytes: u64,
    /// Timed runs.
    pub iterations: u32,
    /// Per-run time, ms; `None` when the copy did not run.
    pub time_ms: Option<Summary>,
    /// GB/s at the median and the fastest run (device copies count read + write).
    pub gbs_median: Option<f64>,
    /// GB/s at the fastest run.
    pub gbs_best: Option<f64>,
    /// The datasheet ceiling this copy is judged against, GB/s; `None` where none applies.
    pub peak_gbs: Option<f64>,
    /// Its verdict and why.
    pub judgement: Judgement,
    /// Why the copy did not run.
    pub error: Option<String>,
}

/// Runs and checks one GEMM.
pub fn gemm(
    acc: &mut dyn Accelerator,
    spec: Option<&GpuSpec>,
    plan: &GemmPlan,
    seed: u64,
) -> GemmResult {
    let g = SeededGemm {
        precision: plan.precision,
        m: plan.size,
        n: plan.size,
        k: plan.size,
        seed_a: pog_matgen::hash(seed, 1),
        seed_b: pog_matgen::hash(seed, 2),
        a_layout: pog_matgen::ALayout::KMajor,
    };
    let samples: Vec<(u64, u64)> = (0..CHECKED_SAMPLES)
        .map(|i| {
            let h = pog_matgen::hash(seed ^ 0x5eed, i);
            (h % g.m, (h >> 32) % g.n)
        })
        .collect();
    let request = GemmRequest {
        precision: g.precision,
        m: g.m,
        n: g.n,
        k: g.k,
        seed_a: g.seed_a,
        seed_b: g.seed_b,
        warmup: plan.warmup,
        iterations: plan.iterations,
        candidates: plan.candidates,
        rest_ms: plan.rest_ms,
        run_rest_ms: plan.run_rest_ms,
        samples: samples.clone(),
    };
    let mut result = GemmResult {
        precision: plan.precision,
        size: plan.size,
        warmup: plan.warmup,
        iterations: plan.iterations,
        run_rest_ms: plan.run_rest_ms,
        time_ms: None,
        tflops_median: None,
        tflops_best: None,
        peak_tflops: spec.and_then(|s| s.peak.get(plan.precision)),
        algorithm: None,
        check: None,
        judgement: failed("not run"),
        error: None,
    };
    let run = match acc.gemm(&request) {
        Ok(run) => run,
        Err(e) => {
            result.judgement = failed(format!("the GEMM did not run: {e}"));
            result.error = Some(e.to_string());
            return result;
        }
    };
    let g = SeededGemm {
        a_layout: run.a_layout,
        ..g
    };
    let check = check_samples(&g, &samples, &run.samples);
    let time = Summary::of(&run.times_ms);
    let tflops = |ms: f64| g.flops() / (ms * 1e-3) / 1e12;
    result.tflops_median = time.map(|t| tflops(t.median));
    result.tflops_best = time.map(|t| tflops(t.min));
    result.time_ms = time;
    result.algorithm = Some(run.algorithm);
    result.judgement = if check.wrong > 0 {
        failed(format!(
            "{} of {} sampled outputs are wrong: the result does not count",
            check.wrong, check.checked
        ))
    } else {
        match result.tflops_median {
            Some(t) => judge::gemm(spec, plan.precision, plan.size, t),
            None => failed("no timed run"),
        }
    };
    result.check = Some(check);
    result
}

/// Compares sampled outputs with the f64 reference.
pub fn check_samples(g: &SeededGemm, positions: &[(u64, u64)], values: &[f64]) -> ResultCheck {
    let mut check = ResultCheck {
        checked: positions.len(),
        wrong: 0,
        worst_error_ratio: 0.0,
    };
    for (i, &(row, col)) in positions.iter().enumerate() {
        let reference = g.reference(row, col);
        let Some(&got) = values.get(i) else {
            check.wrong += 1; // a missing sample counts as wrong
            continue;
        };
        if !g.accepts(got, reference) {
            check.wrong += 1;
        }
        let tol = tolerance(g.precision, reference);
        let ratio = if tol > 0.0 {
            (got - reference.value).abs() / tol
        } else if got == reference.value {
            0.0
        } else {
            f64::INFINITY
        };
        check.worst_error_ratio =
            check
                .worst_error_ratio
                .max(if ratio.is_nan() { f64::INFINITY } else { ratio });
    }
    check
}

/// Runs one copy.
pub fn copy(acc: &mut dyn Accelerator, spec: Option<&GpuSpec>, plan: &CopyPlan) -> CopyResult {
    let request = CopyRequest {
        kind: plan.kind,
        bytes: plan.bytes,
        warmup: plan.warmup,
        iterations: plan.iterations,
    };
    let mut result = CopyResult {
        kind: plan.kind,
        bytes: plan.bytes,
        iterations: plan.iterations,
        time_ms: None,
        gbs_median: None,
        gbs_best: None,
        peak_gbs: spec.and_then(|s| judge::copy_peak_gbs(s, plan.kind)),
        judgement: failed("not run"),
        error: None,
    };
    match acc.copy(&request) {
        Ok(times) => {
            let moved = plan.kind.bytes_moved(plan.bytes) as f64;
            let time = Summary::of(&times);
            result.gbs_median = time.map(|t| moved / (t.median * 1e-3) / 1e9);
            result.gbs_best = time.map(|t| moved / (t.min * 1e-3) / 1e9);
            result.time_ms = time;
            result.judgement = match result.gbs_median {
                Some(gbs) => judge::copy(spec, plan.kind, gbs),
                None => failed("no timed run"),
            };
        }
        Err(e) => {
            result.judgement = failed(format!("the copy did not run: {e}"));
            result.error = Some(e.to_string());
        }
    }
    result
}

/// Everything measured on one GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuBench {
    /// The GPU's index on the host.
    pub index: usize,
    /// The model as pog-spec names it; `None` when pog-spec does not know the card.
    pub model: Option<String>,
    /// The seed of this GPU's benchmark matrices (hex in JSON).
    #[serde(with = "pog_facts::hex_u64")]
    pub seed: u64,
    /// What the plan left out for this model (e.g. a precision it lacks), and why.
    pub skipped: Vec<String>,
    /// One result per GEMM precision and size.
    pub gemm: Vec<GemmResult>,
    /// One result per copy kind.
    pub copies: Vec<CopyResult>,
    /// The memory test; `None` when it was not run.
    pub memtest: Option<MemtestResult>,
    /// The bandwidth sweep; `None` when the plan has no sweep sizes.
    pub sweep: Option<SweepResult>,
    /// The sustained run; `None` when the plan has none or it failed (see `sustained_error`).
    pub sustained: Option<SustainedResult>,
    /// A sustained run that could not run, with the reason.
    pub sustained_error: Option<String>,
}

impl GpuBench {
    /// Every judged figure's verdict.
    pub fn verdicts(&self) -> Vec<Verdict> {
        let mut v: Vec<Verdict> = self
            .gemm
            .iter()
            .map(|g| g.judgement.verdict)
            .chain(self.copies.iter().map(|c| c.judgement.verdict))
            .collect();
        v.extend(self.memtest.iter().map(|m| m.judgement.verdict));
        v.extend(self.sustained.iter().map(|s| s.judgement.verdict));
        if self.sustained_error.is_some() {
            v.push(Verdict::Fail);
        }
        v
    }

    /// The worst verdict among all figures.
    pub fn verdict(&self) -> Verdict {
        self.verdicts().into_iter().max().unwrap_or(Verdict::Info)
    }
}

/// Runs a whole plan on one GPU, reporting each step to `progress` before it starts.
pub fn run(
    index: usize,
    acc: &mut dyn Accelerator,
    spec: Option<&GpuSpec>,
    plan: &GpuPlan,
    seed: u64,
    progress: &mut dyn FnMut(&str),
) -> GpuBench {
    let mut gemm_results = Vec::new();
    for g in &plan.gemms {
        progress(&format!("GPU {index}: {} GEMM n={}", g.precision, g.size));
        gemm_results.push(gemm(acc, spec, g, seed));
    }
    let mut copies = Vec::new();
    for c in &plan.copies {
        progress(&format!(
            "GPU {index}: {} copy, {} MiB",
            c.kind.name(),
            c.bytes >> 20
        ));
        copies.push(copy(acc, spec, c));
    }
    progress(&format!(
        "GPU {index}: memory patterns over {:.0} % of free memory",
        plan.memtest_fraction * 100.0
    ));
    let memtest = Some(
        match acc.memtest(&MemtestRequest {
            fraction: plan.memtest_fraction,
            seed,
        }) {
            Ok(run) => MemtestResult {
                judgement: judge_memtest(&run, plan.memtest_fraction),
                run: Some(run),
                error: None,
            },
            Err(e) => MemtestResult {
                run: None,
                judgement: Judgement {
                    verdict: Verdict::Fail,
                    reason: format!("the memory test did not run: {e}"),
                    source: "pog".into(),
                },
                error: Some(e.to_string()),
            },
        },
    );
    progress(&format!("GPU {index}: read/write bandwidth sweep"));
    let sweep = (!plan.sweep_sizes.is_empty()).then(|| {
        match acc.sweep(&SweepRequest {
            sizes: plan.sweep_sizes.clone(),
            min_ms: 20.0,
        }) {
            Ok(points) => plateaus(points),
            Err(e) => SweepResult {
                points: vec![],
                l2_read_gbs: None,
                hbm_read_gbs: None,
                hbm_write_gbs: None,
                error: Some(e.to_string()),
            },
        }
    });
    let (mut sustained, mut sustained_error) = (None, None);
    if let Some(s) = plan.sustained {
        progress(&format!(
            "GPU {index}: sustained {} GEMM n={} for {} s",
            s.precision, s.size, s.seconds
        ));
        let request = SustainedRequest {
            precision: s.precision,
            size: s.size,
            seconds: s.seconds,
            seed_a: pog_matgen::hash(seed, 3),
            seed_b: pog_matgen::hash(seed, 4),
            sample_interval_ms: 250,
        };
        let burst = gemm_results
            .iter()
            .find(|g| g.precision == s.precision && g.size == s.size)
            .and_then(|g| g.tflops_median);
        match acc.sustained(&request) {
            Ok(run) => {
                sustained = Some(analyze(
                    s.precision,
                    s.size,
                    s.seconds,
                    run,
                    spec.and_then(|sp| sp.peak.get(s.precision)),
                    burst,
                ))
            }
            Err(e) => sustained_error = Some(e.to_string()),
        }
    }
    GpuBench {
        index,
        model: spec.map(|s| s.model.clone()),
        seed,
        skipped: plan.skipped.clone(),
        gemm: gemm_results,
        copies,
        memtest,
        sweep,
        sustained,
        sustained_error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{plan, Overrides, Suite};
    use pog_sim::SimGpu;
    use pog_spec::SpecDb;

    fn small() -> Overrides {
        Overrides {
            sizes: Some(vec![256]),
            precisions: None,
            iterations: Some(3),
            copy_bytes: Some(1 << 20),
            sustained_seconds: Some(1.0),
            gemm_rest_ms: Some(0),
            gemm_run_rest_ms: None,
        }
    }

    #[test]
    fn an_honest_gpu_passes_and_figures_follow_its_speed() {
        let spec = SpecDb::embedded().by_model("H100 SXM").unwrap();
        let mut gpu = SimGpu::new(spec, 0.75);
        let p = plan(Suite::Quick, Some(spec), 80 << 30, &small());
        let bench = run(0, &mut gpu, Some(spec), &p, 42, &mut |_| {});
        assert_eq!(bench.gemm.len(), 7);
        for g in &bench.gemm {
            assert_eq!(g.check.as_ref().unwrap().wrong, 0, "{:?}", g.precision);
            let fraction = g.tflops_median.unwrap() / g.peak_tflops.unwrap();
            assert!(
                (fraction - 0.75).abs() < 0.01,
                "{:?}: {fraction}",
                g.precision
            );
            assert_eq!(g.judgement.verdict, Verdict::Pass, "{:?}", g.judgement);
        }
        assert_eq!(
            bench.memtest.as_ref().unwrap().judgement.verdict,
            Verdict::Pass
        );
        assert!(
            bench.sweep.as_ref().unwrap().hbm_read_gbs.is_some()
                || p.sweep_sizes.iter().all(|s| *s < 1 << 30)
        );
        assert_eq!(
            bench.sustained.as_ref().unwrap().judgement.verdict,
            Verdict::Pass
        );
        assert_eq!(bench.verdict(), Verdict::Pass);
    }

    #[test]
    fn bad_memory_and_unstable_results_fail_the_gpu() {
        let spec = SpecDb::embedded().by_model("L4").unwrap();
        let p = plan(Suite::Quick, Some(spec), 20 << 30, &small());
        let mut bad_memory = SimGpu::new(spec, 0.8);
        bad_memory.bad_memory_words = 2;
        let b = run(0, &mut bad_memory, Some(spec), &p, 1, &mut |_| {});
        assert_eq!(b.memtest.as_ref().unwrap().judgement.verdict, Verdict::Fail);
        assert_eq!(b.verdict(), Verdict::Fail);
        let mut unstable = SimGpu::new(spec, 0.8);
        unstable.unstable_elements = 1;
        let u = run(0, &mut unstable, Some(spec), &p, 1, &mut |_| {});
        assert_eq!(u.sustained.unwrap().judgement.verdict, Verdict::Fail);
    }

    #[test]
    fn a_wrong_result_fails_however_fast() {
        let spec = SpecDb::embedded().by_model("A100 SXM 80GB").unwrap();
        let mut gpu = SimGpu::new(spec, 0.9);
        gpu.result_error = Some(3.0);
        let plan = GemmPlan {
            precision: Precision::Fp16,
            size: 256,
            warmup: 0,
            iterations: 2,
            candidates: 1,
            rest_ms: 0,
            run_rest_ms: 0,
        };
        let r = gemm(&mut gpu, Some(spec), &plan, 7);
        assert_eq!(r.check.as_ref().unwrap().wrong, CHECKED_SAMPLES as usize);
        assert_eq!(r.judgement.verdict, Verdict::Fail);
        assert!(r.judgement.reason.contains("sampled outputs are wrong"));
    }

    #[test]
    fn a_slow_gpu_fails_and_a_missing_path_is_an_error() {
        let spec = SpecDb::embedded().by_model("L40S").unwrap();
        let mut gpu = SimGpu::new(spec, 0.2);
        let plan = GemmPlan {
            precision: Precision::Bf16,
            size: 128,
            warmup: 0,
            iterations: 2,
            candidates: 1,
            rest_ms: 0,
            run_rest_ms: 0,
        };
        assert_eq!(
            gemm(&mut gpu, Some(spec), &plan, 1).judgement.verdict,
            Verdict::Fail
        );
        let t4 = SpecDb::embedded().by_model("T4").unwrap();
        let mut old = SimGpu::new(t4, 0.8);
        let r = gemm(
            &mut old,
            Some(t4),
            &GemmPlan {
                precision: Precision::Fp8,
                ..plan
            },
            1,
        );
        assert!(r.error.unwrap().contains("no FP8 path"));
        assert_eq!(r.judgement.verdict, Verdict::Fail);
    }

    #[test]
    fn a_planted_wrong_element_is_caught() {
        let g = SeededGemm {
            precision: Precision::Fp32,
            m: 64,
            n: 64,
            k: 64,
            seed_a: 1,
            seed_b: 2,
            a_layout: pog_matgen::ALayout::KMajor,
        };
        let positions = [(0, 0), (1, 2), (3, 4)];
        let mut values: Vec<f64> = positions
            .iter()
            .map(|&(r, c)| g.reference(r, c).value)
            .collect();
        assert_eq!(check_samples(&g, &positions, &values).wrong, 0);
        values[1] += 0.5;
        let c = check_samples(&g, &positions, &values);
        assert_eq!(c.wrong, 1);
        assert!(c.worst_error_ratio > 1.0);
        assert_eq!(check_samples(&g, &positions, &values[..2]).wrong, 2);
    }
}
