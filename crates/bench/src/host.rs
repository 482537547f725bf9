//! The host benchmarks' plan per suite and their report: CPU floating-point throughput,
//! memory bandwidth (STREAM triad) and storage, measured by the platform
//! (`pog_facts::Platform::measure_host`) and summarized here.

use crate::plan::Suite;
use crate::stats::Summary;
use pog_facts::hostbench::{HostMeasurement, HostPlan, StorageBench};
use pog_facts::Reading;
use serde::{Deserialize, Serialize};

/// What the host benchmarks measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostBench {
    /// CPU threads the all-threads runs used.
    pub threads: usize,
    /// Double-precision GFLOP/s on one thread and on all.
    pub cpu_gflops_single: f64,
    /// Double-precision GFLOP/s on all threads.
    pub cpu_gflops_multi: f64,
    /// Whether the FMA path (AVX2 + FMA) was used.
    pub cpu_fma: bool,
    /// STREAM triad (a = b + s·c), GB/s counting 3 × 8 bytes per element, best of the repeats.
    pub stream_triad_gbs: f64,
    /// Every triad repeat summarized, GB/s.
    pub stream_triad_all: Option<Summary>,
    /// Sequential write and read and random 4 KiB reads of a test file, or why they were not measured.
    pub storage: Reading<StorageBench>,
}

impl From<HostMeasurement> for HostBench {
    fn from(m: HostMeasurement) -> Self {
        HostBench {
            threads: m.threads,
            cpu_gflops_single: m.cpu_gflops_single,
            cpu_gflops_multi: m.cpu_gflops_multi,
            cpu_fma: m.cpu_fma,
            stream_triad_gbs: m.stream_triad_gbs.iter().copied().fold(0.0, f64::max),
            stream_triad_all: Summary::of(&m.stream_triad_gbs),
            storage: m.storage,
        }
    }
}

/// The host benchmark sizes of each suite.
pub fn plan(suite: Suite) -> HostPlan {
    match suite {
        Suite::Quick => HostPlan {
            cpu_seconds: 0.5,
            stream_bytes: 256 << 20,
            stream_repeats: 5,
            storage_bytes: 256 << 20,
            random_reads: 2_000,
        },
        Suite::Standard => HostPlan {
            cpu_seconds: 2.0,
            stream_bytes: 1 << 30,
            stream_repeats: 10,
            storage_bytes: 1 << 30,
            random_reads: 20_000,
        },
        Suite::Full => HostPlan {
            cpu_seconds: 5.0,
            stream_bytes: 2 << 30,
            stream_repeats: 20,
            storage_bytes: 4 << 30,
            random_reads: 50_000,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_keeps_the_best_triad_and_every_repeat() {
        let bench = HostBench::from(HostMeasurement {
            threads: 4,
            cpu_gflops_single: 5.0,
            cpu_gflops_multi: 20.0,
            cpu_fma: true,
            stream_triad_gbs: vec![40.0, 50.0, 45.0],
            storage: Reading::unavailable("no storage measured"),
        });
        assert_eq!(bench.stream_triad_gbs, 50.0);
        assert_eq!(bench.stream_triad_all.unwrap().n, 3);
    }

    #[test]
    fn larger_suites_measure_more() {
        let (q, s, f) = (plan(Suite::Quick), plan(Suite::Standard), plan(Suite::Full));
        assert!(q.storage_bytes < s.storage_bytes && s.storage_bytes < f.storage_bytes);
        assert!(q.cpu_seconds < s.cpu_seconds && s.cpu_seconds < f.cpu_seconds);
    }
}
