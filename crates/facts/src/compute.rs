//! The compute seam: what benchmarks ask a GPU to do, and what comes back. [`Accelerator`] is
//! implemented by the real GPU (`pog_device::gpu::Gpu`) and by the simulated test double
//! (`pog_sim::SimGpu`); the benchmark logic only sees this trait.

use crate::reading::Reading;
use pog_spec::Precision;
use serde::{Deserialize, Serialize};

/// A failed GPU operation: what was being done, and the cause as the library reported it.
/// Decisions (skip this candidate? give up on this GPU?) look at the variant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GpuError {
    /// A CUDA driver call failed; `code` is the `CUresult`.
    #[error("{step}: CUDA error {code} ({name})")]
    Cuda {
        /// What was being done.
        step: String,
        /// The `CUresult` code.
        code: u32,
        /// The code's name, e.g. `CUDA_ERROR_OUT_OF_MEMORY`.
        name: String,
    },
    /// A GPU library (cuBLASLt, NVRTC, NCCL, NVML) failed or is missing.
    #[error("{step}: {library}: {message}")]
    Library {
        /// What was being done.
        step: String,
        /// Which library failed.
        library: &'static str,
        /// The library's message.
        message: String,
    },
    /// The GPU cannot do what was asked (no such precision, not enough memory, no peer
    /// access, no collectives library): a fact about the GPU, not a fault.
    #[error("{0}")]
    Unsupported(String),
    /// The GPU answered with something impossible (a result that fails its own checks).
    #[error("{0}")]
    Invalid(String),
}

impl GpuError {
    /// A library failure during `step`.
    pub fn library(
        step: impl Into<String>,
        library: &'static str,
        e: impl std::fmt::Display,
    ) -> GpuError {
        GpuError::Library {
            step: step.into(),
            library,
            message: e.to_string(),
        }
    }
}

/// A timed GEMM `D = A·B` of seeded matrices (see `pog_matgen::SeededGemm`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GemmRequest {
    /// The precision to multiply in.
    pub precision: Precision,
    /// Rows of A and D.
    pub m: u64,
    /// Columns of B and D.
    pub n: u64,
    /// The inner dimension: columns of A, rows of B.
    pub k: u64,
    /// Seed of A's elements.
    pub seed_a: u64,
    /// Seed of B's elements.
    pub seed_b: u64,
    /// Untimed runs before measuring (clocks, caches, lazy loading).
    pub warmup: u32,
    /// Timed runs; each is timed on its own with CUDA events.
    pub iterations: u32,
    /// How many of cuBLASLt's heuristic candidates to time before choosing the fastest.
    pub candidates: u32,
    /// Idle milliseconds between choosing the algorithm and the warm-up runs, so that the
    /// timing starts from an idle card, as a fresh process's would, and not from the heat
    /// and power-cap state the choice itself left behind.
    pub rest_ms: u32,
    /// Idle milliseconds before each timed run, which then follows one untimed run, so that
    /// every timed run is a burst from rest; 0 times the runs back to back. See
    /// `pog_bench::plan`'s `LONG_GEMM_SIZE` for why the long GEMMs need it.
    #[serde(default)]
    pub run_rest_ms: u32,
    /// Output elements `(row, col)` to read back for checking.
    pub samples: Vec<(u64, u64)>,
}

/// What a GEMM run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GemmRun {
    /// Milliseconds per timed run.
    pub times_ms: Vec<f64>,
    /// The algorithm that won, described for the report.
    pub algorithm: String,
    /// How many candidates were timed.
    pub candidates_timed: u32,
    /// How the winning algorithm read A: the checker must read it the same way.
    pub a_layout: pog_matgen::ALayout,
    /// `D[row, col]` for each requested sample, as f64.
    pub samples: Vec<f64>,
}

/// Which copy to time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CopyKind {
    /// Device to device (copy engine); moves each byte twice (read and write).
    DeviceToDevice,
    /// Host to device, from page-locked (pinned) host memory.
    HostToDevicePinned,
    /// Device to host, into page-locked (pinned) host memory.
    DeviceToHostPinned,
    /// Both directions at once on two streams; bytes counted once per direction.
    BidirectionalPinned,
    /// Host to device, from ordinary (pageable) host memory.
    HostToDevicePageable,
    /// Device to host, into ordinary (pageable) host memory.
    DeviceToHostPageable,
}

impl CopyKind {
    /// Every kind, in report order.
    pub const ALL: [CopyKind; 6] = [
        CopyKind::DeviceToDevice,
        CopyKind::HostToDevicePinned,
        CopyKind::DeviceToHostPinned,
        CopyKind::BidirectionalPinned,
        CopyKind::HostToDevicePageable,
        CopyKind::DeviceToHostPageable,
    ];

    /// The snake_case name used in JSON, tables and threshold files.
    pub fn name(self) -> &'static str {
        match self {
            CopyKind::DeviceToDevice => "device_to_device",
            CopyKind::HostToDevicePinned => "host_to_device_pinned",
            CopyKind::DeviceToHostPinned => "device_to_host_pinned",
            CopyKind::BidirectionalPinned => "bidirectional_pinned",
            CopyKind::HostToDevicePageable => "host_to_device_pageable",
            CopyKind::DeviceToHostPageable => "device_to_host_pageable",
        }
    }

    /// Bytes moved per run of `bytes` (a device copy reads and writes each byte).
    pub fn bytes_moved(self, bytes: u64) -> u64 {
        match self {
            CopyKind::DeviceToDevice | CopyKind::BidirectionalPinned => 2 * bytes,
            _ => bytes,
        }
    }
}

/// A timed copy of `bytes`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CopyRequest {
    /// Which copy.
    pub kind: CopyKind,
    /// Bytes per copy.
    pub bytes: u64,
    /// Untimed runs before measuring.
    pub warmup: u32,
    /// Timed runs.
    pub iterations: u32,
}

/// The memory patterns of the integrity test, in the order they run.
pub const MEMORY_PATTERNS: [&str; 6] = [
    "walking ones",
    "walking zeros",
    "0x55",
    "0xAA",
    "seeded random",
    "address in address",
];

/// Fill most of the free memory with each pattern and read it back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemtestRequest {
    /// Fraction of free memory to test (pog asks for at least 0.9).
    pub fraction: f64,
    /// Seed of the "seeded random" pattern.
    pub seed: u64,
}

/// One pattern's pass over the tested memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PatternResult {
    /// The pattern's name, one of [`MEMORY_PATTERNS`].
    pub pattern: String,
    /// Words that read back wrong.
    pub bad_words: u64,
    /// Bits that read back wrong, over all bad words.
    pub bad_bits: u64,
    /// Byte offset of the first bad word.
    pub first_bad_offset: Option<u64>,
    /// Milliseconds to write the pattern.
    pub write_ms: f64,
    /// Milliseconds to read it back and check it.
    pub check_ms: f64,
}

/// What the memory test found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemtestRun {
    /// Bytes the test covered.
    pub bytes_tested: u64,
    /// Free device memory when the test started, bytes.
    pub free_bytes: u64,
    /// Each pattern's result, in the order they ran.
    pub patterns: Vec<PatternResult>,
    /// ECC, remapped-row and retired-page counters before the test (NVML).
    pub health_before: Reading<crate::telemetry::HealthCounters>,
    /// The same counters after the test.
    pub health_after: Reading<crate::telemetry::HealthCounters>,
}

/// Read and write bandwidth of pog's own kernels over a range of buffer sizes: the L2 and HBM
/// plateaus.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepRequest {
    /// Buffer sizes to measure, bytes.
    pub sizes: Vec<u64>,
    /// Each point is timed over repeats adding up to at least this long.
    pub min_ms: f64,
}

/// One size of the sweep.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    /// Buffer size, bytes.
    pub bytes: u64,
    /// Read bandwidth, GB/s.
    pub read_gbs: f64,
    /// Write bandwidth, GB/s.
    pub write_gbs: f64,
}

/// A GEMM run back to back for a set time, gpu-burn style: every result is compared with the
/// first, bit for bit, while NVML is sampled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SustainedRequest {
    /// The precision to multiply in.
    pub precision: Precision,
    /// n of the square n×n GEMM.
    pub size: u64,
    /// How long to keep running, seconds.
    pub seconds: f64,
    /// Seed of A's elements.
    pub seed_a: u64,
    /// Seed of B's elements.
    pub seed_b: u64,
    /// Milliseconds between NVML samples.
    pub sample_interval_ms: u64,
}

/// What the sustained run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SustainedRun {
    /// Milliseconds of each GEMM, in order.
    pub times_ms: Vec<f64>,
    /// Output elements per GEMM.
    pub elements: u64,
    /// Per GEMM after the first: elements that differ from the first result.
    pub mismatched: Vec<u64>,
    /// Per GEMM after the first: output elements that are NaN.
    pub nans: Vec<u64>,
    /// NVML samples taken during the run.
    pub telemetry: Reading<Vec<crate::telemetry::TelemetrySample>>,
}

/// One GPU that can run benchmarks.
pub trait Accelerator {
    /// Free and total device memory, bytes.
    fn memory(&self) -> Result<(u64, u64), GpuError>;
    /// Runs one timed GEMM benchmark and reads back the requested samples.
    fn gemm(&mut self, request: &GemmRequest) -> Result<GemmRun, GpuError>;
    /// Milliseconds per timed run.
    fn copy(&mut self, request: &CopyRequest) -> Result<Vec<f64>, GpuError>;
    /// Runs the memory integrity test.
    fn memtest(&mut self, request: &MemtestRequest) -> Result<MemtestRun, GpuError>;
    /// Measures the bandwidth sweep, one point per requested size.
    fn sweep(&mut self, request: &SweepRequest) -> Result<Vec<SweepPoint>, GpuError>;
    /// Runs GEMMs back to back for the requested time, checking each result against the first.
    fn sustained(&mut self, request: &SustainedRequest) -> Result<SustainedRun, GpuError>;
}

/// How one GPU's data reaches another's memory, as nvbandwidth's device_to_device cases move
/// it: a copy engine pushing from the source or pulling from the destination, or the SMs of one
/// side writing or reading the other's memory directly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PeerKind {
    /// A copy engine pushes from the source GPU into the destination's memory.
    CopyEngineWrite,
    /// A copy engine pulls from the source GPU's memory into the destination.
    CopyEngineRead,
    /// The source GPU's SMs write into the destination's memory.
    SmWrite,
    /// The destination GPU's SMs read from the source's memory.
    SmRead,
}

impl PeerKind {
    /// Every kind, in report order.
    pub const ALL: [PeerKind; 4] = [
        PeerKind::CopyEngineWrite,
        PeerKind::CopyEngineRead,
        PeerKind::SmWrite,
        PeerKind::SmRead,
    ];

    /// The name in reports and JSON.
    pub fn name(self) -> &'static str {
        match self {
            PeerKind::CopyEngineWrite => "copy_engine_write",
            PeerKind::CopyEngineRead => "copy_engine_read",
            PeerKind::SmWrite => "sm_write",
            PeerKind::SmRead => "sm_read",
        }
    }
}

/// Moving `bytes` from GPU `src` to GPU `dst` (CUDA ordinals) one way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerRequest {
    /// CUDA ordinal of the GPU the data starts on.
    pub src: usize,
    /// CUDA ordinal of the GPU it ends on.
    pub dst: usize,
    /// How the data moves.
    pub kind: PeerKind,
    /// Bytes per transfer.
    pub bytes: u64,
    /// Untimed runs before measuring.
    pub warmup: u32,
    /// Timed runs.
    pub iterations: u32,
}

/// The GPUs of one host together: what takes two of them at once.
pub trait Fabric {
    /// GPUs in the fabric (CUDA ordinals 0..count).
    fn count(&self) -> usize;
    /// Whether `src` can reach `dst`'s memory directly (peer access); why not, if not.
    fn peer_access(&self, src: usize, dst: usize) -> Result<(), GpuError>;
    /// Milliseconds per timed run of the request.
    fn peer_copy(&mut self, request: &PeerRequest) -> Result<Vec<f64>, GpuError>;
    /// Nanoseconds per dependent 8-byte read of `dst`'s memory by an SM of `src` (a pointer
    /// chase), one figure per timed run.
    fn peer_latency(
        &mut self,
        src: usize,
        dst: usize,
        iterations: u32,
    ) -> Result<Vec<f64>, GpuError>;
    /// Whether collectives can run (the GPU fabric needs the NCCL library); why not, if not.
    fn collectives(&self) -> Result<(), GpuError>;
    /// Milliseconds per all-reduce (sum of FP32) of `bytes` on every GPU at once, one figure
    /// per timed run.
    fn all_reduce(
        &mut self,
        bytes: u64,
        warmup: u32,
        iterations: u32,
    ) -> Result<Vec<f64>, GpuError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_kind_names_match_their_json() {
        for kind in PeerKind::ALL {
            assert_eq!(
                serde_json::to_string(&kind).unwrap(),
                format!("\"{}\"", kind.name())
            );
        }
    }

    #[test]
    fn copy_kind_names_match_their_json() {
        for kind in CopyKind::ALL {
            assert_eq!(
                serde_json::to_string(&kind).unwrap(),
                format!("\"{}\"", kind.name())
            );
        }
    }
}
