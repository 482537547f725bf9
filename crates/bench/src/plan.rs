//! What a suite runs on a given GPU: matrix sizes, iterations and copy sizes adapted to the
//! model and its free memory, with user overrides.

use pog_facts::CopyKind;
use pog_matgen::Storage;
use pog_spec::{GpuSpec, Precision};
use serde::{Deserialize, Serialize};

/// The benchmark suites. Contents and durations are documented in docs/benchmarks.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Suite {
    /// GEMM at one size, copies of 1 GiB: about half a minute on an H200. `pog check` runs it.
    Quick,
    /// GEMM at both default sizes, copies of 4 GiB.
    Standard,
    /// Standard with more timed runs and cuBLASLt candidates.
    Full,
}

impl std::fmt::Display for Suite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Suite::Quick => "quick",
            Suite::Standard => "standard",
            Suite::Full => "full",
        })
    }
}

impl std::str::FromStr for Suite {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "quick" => Ok(Suite::Quick),
            "standard" => Ok(Suite::Standard),
            "full" => Ok(Suite::Full),
            other => Err(format!(
                "unknown suite {other:?}; use quick, standard or full"
            )),
        }
    }
}

/// User overrides of the suite's choices.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    /// Square GEMM sizes (m = n = k).
    pub sizes: Option<Vec<u64>>,
    /// GEMM precisions to run, in place of all of them.
    pub precisions: Option<Vec<Precision>>,
    /// Timed runs per GEMM and copy, in place of the suite's.
    pub iterations: Option<u32>,
    /// Bytes per copy, in place of the suite's (capped at a quarter of free memory).
    pub copy_bytes: Option<u64>,
    /// Seconds of sustained load (0 skips it).
    pub sustained_seconds: Option<f64>,
    /// Idle milliseconds before each GEMM's warm-up runs (after its algorithm is chosen).
    pub gemm_rest_ms: Option<u32>,
    /// Idle milliseconds before each timed run of every GEMM, in place of the suite's (see
    /// `GemmPlan::run_rest_ms`).
    pub gemm_run_rest_ms: Option<u32>,
}

/// One GEMM to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GemmPlan {
    /// Input and compute precision.
    pub precision: Precision,
    /// m = n = k.
    pub size: u64,
    /// Untimed runs before the timed ones.
    pub warmup: u32,
    /// Timed runs.
    pub iterations: u32,
    /// cuBLASLt heuristic candidates tried per layout of A; the fastest is kept.
    pub candidates: u32,
    /// Idle milliseconds before the warm-up (see `GemmRequest::rest_ms`).
    pub rest_ms: u32,
    /// Idle milliseconds before each timed run (see `GemmRequest::run_rest_ms`): the suite's
    /// rest for GEMMs from `LONG_GEMM_SIZE` on, 0 (back to back) below it.
    pub run_rest_ms: u32,
}

/// One copy to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopyPlan {
    /// Which copy: direction, pinned or pageable.
    pub kind: CopyKind,
    /// Bytes per copy.
    pub bytes: u64,
    /// Untimed runs before the timed ones.
    pub warmup: u32,
    /// Timed runs.
    pub iterations: u32,
}

/// The sustained-load run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SustainedPlan {
    /// Precision of the back-to-back GEMMs (BF16, else FP16, else FP32).
    pub precision: Precision,
    /// m = n = k.
    pub size: u64,
    /// How long to keep the GPU loaded, seconds.
    pub seconds: f64,
}

/// Everything a suite runs on one GPU, and what was left out (with the reason).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuPlan {
    /// The GEMMs, one per precision and size.
    pub gemms: Vec<GemmPlan>,
    /// The copies, one per kind.
    pub copies: Vec<CopyPlan>,
    /// Share of free memory the pattern test covers.
    pub memtest_fraction: f64,
    /// Buffer sizes of the read/write bandwidth sweep.
    pub sweep_sizes: Vec<u64>,
    /// The sustained run; `None` when it is off (0 seconds) or does not fit in free memory.
    pub sustained: Option<SustainedPlan>,
    /// What the plan left out for this model (e.g. a precision it lacks), and why.
    pub skipped: Vec<String>,
}

/// Share of free memory the memory test must cover.
pub const MEMTEST_FRACTION: f64 = 0.9;

/// The sizes the original CUTLASS-profiler script used on large GPUs.
const LARGE_SIZES: [u64; 2] = [8192, 16384];
/// GPUs with at least this much memory get the large sizes; smaller ones start at 4096.
const LARGE_GPU_GIB: f64 = 40.0;
/// Largest share of free memory one GEMM's buffers may take.
const MEMORY_SHARE: f64 = 0.8;
/// From this size on a GEMM gets half the suite's timed runs (5 in the standard suite), as
/// PyTorch's reference takes at n = 16384, and each timed run is a burst of its own: a rest
/// of `GEMM_REST_MS`, one untimed run, the timed one. The tensor-core GEMMs run 10.5–13 ms each
/// there, and back to back a power-capped card meets its cap after a few of them, at no run
/// one can tell in advance: on an H100 (2026-12-06, docs/benchmarks.md) BF16 ran 790–806
/// TFLOP/s for its first runs, then 720–736 under the cap; on an H200 the cap came in during
/// the warm-ups in one round and after the last timed run in another, so the median of five
/// back-to-back runs after three warm-ups ranged over 703–833 TFLOP/s between rounds,
/// PyTorch's as much as pog's. The figure is meant to be the burst rate; the capped rate is
/// the sustained run's. FP64 and FP32 (about 170 ms a run) get fewer runs for their time
/// alone.
const LONG_GEMM_SIZE: u64 = 16384;
/// Idle milliseconds before each GEMM's warm-up, and from `LONG_GEMM_SIZE` on before each of
/// its timed runs too. The H200 is power-capped: timed straight after
/// the algorithm choice (~50 back-to-back runs), the tensor-core GEMMs at n = 8192 measured
/// 4-11 % below the same kernels started from idle, as PyTorch's reference is.
const GEMM_REST_MS: u32 = 300;

/// Bytes the three buffers of an n×n×n GEMM take (inputs in their storage, output as written).
pub fn gemm_bytes(precision: Precision, n: u64) -> u64 {
    let input = Storage::of(precision).bytes() as u64;
    let output = pog_matgen::output_bytes(precision) as u64;
    n * n * (2 * input + output)
}

/// Plans a suite for a GPU of model `spec` (or an unknown model) with `free_bytes` free.
pub fn plan(
    suite: Suite,
    spec: Option<&GpuSpec>,
    free_bytes: u64,
    overrides: &Overrides,
) -> GpuPlan {
    let mut skipped = Vec::new();
    let large = spec.is_none_or(|s| s.memory_gib >= LARGE_GPU_GIB);
    let default_sizes: Vec<u64> = match (suite, large) {
        (Suite::Quick, true) => vec![LARGE_SIZES[0]],
        (Suite::Quick, false) => vec![4096],
        (_, true) => LARGE_SIZES.to_vec(),
        (_, false) => vec![4096, 8192],
    };
    let sizes = overrides.sizes.clone().unwrap_or(default_sizes);
    let precisions: Vec<Precision> = overrides
        .precisions
        .clone()
        .unwrap_or_else(|| Precision::ALL.to_vec());
    let (iterations, candidates) = match suite {
        Suite::Quick => (10, 4),
        Suite::Standard => (10, 8),
        Suite::Full => (30, 16),
    };
    let mut gemms = Vec::new();
    for &precision in &precisions {
        if let Some(spec) = spec {
            if spec.peak.get(precision).is_none() {
                skipped.push(format!(
                    "{precision} GEMM: the {} has no {precision} path",
                    spec.model
                ));
                continue;
            }
        }
        for &size in &sizes {
            if gemm_bytes(precision, size) as f64 > free_bytes as f64 * MEMORY_SHARE {
                skipped.push(format!(
                    "{precision} GEMM n={size}: needs {} MiB, {} MiB free",
                    gemm_bytes(precision, size) >> 20,
                    free_bytes >> 20
                ));
                continue;
            }
            // A long GEMM: half the runs, each a burst from rest (see `LONG_GEMM_SIZE`).
            let (runs, run_rest_ms) = if size >= LONG_GEMM_SIZE {
                (iterations / 2, GEMM_REST_MS)
            } else {
                (iterations, 0)
            };
            gemms.push(GemmPlan {
                precision,
                size,
                warmup: 3,
                iterations: overrides.iterations.unwrap_or(runs).max(1),
                candidates,
                rest_ms: overrides.gemm_rest_ms.unwrap_or(GEMM_REST_MS),
                run_rest_ms: overrides.gemm_run_rest_ms.unwrap_or(run_rest_ms),
            });
        }
    }
    let default_copy = match suite {
        Suite::Quick => 1u64 << 30,
        _ => 4u64 << 30,
    };
    let copy_bytes = overrides
        .copy_bytes
        .unwrap_or(default_copy)
        .min(free_bytes / 4);
    let copies = CopyKind::ALL
        .iter()
        .map(|&kind| {
            let pageable = matches!(
                kind,
                CopyKind::HostToDevicePageable | CopyKind::DeviceToHostPageable
            );
            CopyPlan {
                kind,
                bytes: copy_bytes,
                warmup: if pageable { 1 } else { 3 },
                iterations: overrides
                    .iterations
                    .unwrap_or(if pageable { 3 } else { 10 }),
            }
        })
        .collect();
    let sweep_largest = match suite {
        Suite::Full => 16u64 << 30,
        _ => 4u64 << 30,
    }
    .min(free_bytes / 4);
    let sustained_seconds = overrides.sustained_seconds.unwrap_or(match suite {
        Suite::Quick => 10.0,
        Suite::Standard => 60.0,
        Suite::Full => 300.0,
    });
    // The sustained run uses the first tensor precision the model has (BF16, else FP16, else
    // FP32): the heaviest steady load, which reaches the power limit.
    let sustained_precision = [Precision::Bf16, Precision::Fp16, Precision::Fp32]
        .into_iter()
        .find(|p| spec.is_none_or(|s| s.peak.get(*p).is_some()) && precisions.contains(p))
        .or_else(|| precisions.first().copied());
    let sustained = match (sustained_precision, sizes.first()) {
        (Some(precision), Some(&size))
            if sustained_seconds > 0.0
                && gemm_bytes(precision, size) as f64 * 1.5 <= free_bytes as f64 * MEMORY_SHARE =>
        {
            Some(SustainedPlan {
                precision,
                size,
                seconds: sustained_seconds,
            })
        }
        _ => None,
    };
    GpuPlan {
        gemms,
        copies,
        memtest_fraction: MEMTEST_FRACTION,
        sweep_sizes: crate::memory::sweep_sizes(sweep_largest),
        sustained,
        skipped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pog_spec::SpecDb;

    fn spec(model: &str) -> &'static GpuSpec {
        SpecDb::embedded().by_model(model).unwrap()
    }

    #[test]
    fn large_gpus_get_the_cutlass_sizes_and_every_precision_they_have() {
        let p = plan(
            Suite::Standard,
            Some(spec("H200 SXM")),
            140 << 30,
            &Overrides::default(),
        );
        assert_eq!(p.gemms.len(), 14);
        assert!(p
            .gemms
            .iter()
            .any(|g| g.precision == Precision::Fp8 && g.size == 16384));
        assert!(p.skipped.is_empty());
        let fp64_16k = p
            .gemms
            .iter()
            .find(|g| g.precision == Precision::Fp64 && g.size == 16384)
            .unwrap();
        assert_eq!(fp64_16k.iterations, 5);
        // Every precision at 16384 takes PyTorch's five runs, each a burst from rest; at 8192
        // the suite's ten, back to back.
        for g in &p.gemms {
            let (runs, run_rest_ms) = if g.size >= 16384 {
                (5, GEMM_REST_MS)
            } else {
                (10, 0)
            };
            assert_eq!((g.iterations, g.run_rest_ms), (runs, run_rest_ms), "{g:?}");
        }
        assert!(p
            .gemms
            .iter()
            .all(|g| g.rest_ms == GEMM_REST_MS && g.warmup == 3));
        assert_eq!(p.copies.len(), CopyKind::ALL.len());
        assert_eq!(
            p.sustained,
            Some(SustainedPlan {
                precision: Precision::Bf16,
                size: 8192,
                seconds: 60.0
            })
        );
        assert_eq!(p.sweep_sizes.last(), Some(&(4 << 30)));
        // The T4 has no BF16: its sustained run uses FP16.
        let t4 = plan(
            Suite::Quick,
            Some(spec("T4")),
            15 << 30,
            &Overrides::default(),
        );
        assert_eq!(t4.sustained.unwrap().precision, Precision::Fp16);
    }

    #[test]
    fn missing_paths_and_memory_shrink_the_plan() {
        let t4 = plan(
            Suite::Standard,
            Some(spec("T4")),
            15 << 30,
            &Overrides::default(),
        );
        assert!(t4.gemms.iter().all(|g| g.size <= 8192));
        assert!(t4.gemms.iter().all(|g| !matches!(
            g.precision,
            Precision::Fp8 | Precision::Tf32 | Precision::Bf16
        )));
        assert_eq!(t4.skipped.len(), 3);
        // 2 GiB free cannot hold an FP64 GEMM of 16384 (6 GiB).
        let tight = plan(
            Suite::Standard,
            Some(spec("H200 SXM")),
            2 << 30,
            &Overrides::default(),
        );
        assert!(tight
            .skipped
            .iter()
            .any(|s| s.contains("FP64 GEMM n=16384")));
        assert!(tight.copies.iter().all(|c| c.bytes <= (2 << 30) / 4));
    }

    #[test]
    fn overrides_win() {
        let o = Overrides {
            sizes: Some(vec![1024]),
            precisions: Some(vec![Precision::Bf16]),
            iterations: Some(3),
            copy_bytes: Some(1 << 20),
            sustained_seconds: Some(2.0),
            gemm_rest_ms: Some(0),
            gemm_run_rest_ms: None,
        };
        let p = plan(Suite::Full, Some(spec("A100 SXM 80GB")), 80 << 30, &o);
        assert_eq!(
            p.gemms,
            vec![GemmPlan {
                precision: Precision::Bf16,
                size: 1024,
                warmup: 3,
                iterations: 3,
                candidates: 16,
                rest_ms: 0,
                run_rest_ms: 0
            }]
        );
        assert!(p
            .copies
            .iter()
            .all(|c| c.bytes == 1 << 20 && c.iterations == 3));
        assert!("fast".parse::<Suite>().is_err());
    }
}
