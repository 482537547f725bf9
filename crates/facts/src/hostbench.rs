//! The host benchmarks' request and raw figures: CPU floating-point throughput, memory
//! bandwidth (STREAM triad) and storage. `pog-device` measures them; `pog-bench` plans,
//! summarizes and reports them.

use crate::reading::Reading;
use serde::{Deserialize, Serialize};

/// Host benchmark sizes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostPlan {
    /// How long each CPU measurement runs, seconds.
    pub cpu_seconds: f64,
    /// Bytes per STREAM array (three arrays are used).
    pub stream_bytes: u64,
    /// How many times the triad runs; each repeat is one figure.
    pub stream_repeats: u32,
    /// Size of the storage test file, bytes.
    pub storage_bytes: u64,
    /// Random 4 KiB reads to time.
    pub random_reads: u32,
}

/// What the host measurement returned, before summarizing.
#[derive(Debug, Clone, PartialEq)]
pub struct HostMeasurement {
    /// Threads the multi-threaded figures used (all the host's logical CPUs).
    pub threads: usize,
    /// Double-precision GFLOP/s on one thread.
    pub cpu_gflops_single: f64,
    /// Double-precision GFLOP/s on all threads.
    pub cpu_gflops_multi: f64,
    /// Whether the FMA path (AVX2 + FMA) was used.
    pub cpu_fma: bool,
    /// STREAM triad GB/s of each repeat (3 × 8 bytes counted per element).
    pub stream_triad_gbs: Vec<f64>,
    /// The storage figures, or why the test could not run.
    pub storage: Reading<StorageBench>,
}

/// Storage figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StorageBench {
    /// The directory the test file was written in.
    pub path: String,
    /// Size of the test file, bytes.
    pub bytes: u64,
    /// True when O_DIRECT bypassed the page cache; false means the figures may be flattered.
    pub direct_io: bool,
    /// Sequential write rate, MB/s.
    pub write_mbs: f64,
    /// Sequential read rate, MB/s.
    pub read_mbs: f64,
    /// Random 4 KiB reads per second.
    pub random_read_iops: f64,
}
