//! The bodies of the records not made by the validator's proof rounds: the agent's
//! inspection summaries, benchmark figures and health summaries (self-reported), and the
//! validator's scores and prices. Every body is a JSON object with `version` and `gpu_uuid`.

use pog_signed::{GpuUuid, RecordKind};
use serde::{Deserialize, Serialize};

use crate::SignedBody;

/// Version of the body schemas below.
pub const BODY_VERSION: u32 = 1;

/// Whether a figure was measured by the validator or reported by the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Provenance {
    /// Measured by the validator (proof timings, spot checks).
    Measured,
    /// Reported by the agent about its own host (signed, but a modified agent can lie).
    SelfReported,
}

/// One finding of an inspection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Finding {
    /// Stable code, e.g. "pci_id_mismatch".
    pub code: String,
    /// "info", "warning" or "fail".
    pub severity: String,
    /// What was found, for humans.
    pub message: String,
}

/// Inspection summary ([`RecordKind::Inspection`], agent-signed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InspectionSummary {
    /// Body schema version ([`BODY_VERSION`]).
    pub version: u32,
    /// The GPU the record is about (must equal the entry's).
    pub gpu_uuid: GpuUuid,
    /// Model the inspection identified, as the spec database names it.
    pub model: String,
    /// PCI bus id, as the host reports it.
    pub bus_id: String,
    /// NVIDIA driver version.
    pub driver_version: String,
    /// "pass", "warn" or "fail".
    pub verdict: String,
    /// Every finding, of every severity.
    pub findings: Vec<Finding>,
    /// Measured by the validator or self-reported by the agent.
    pub provenance: Provenance,
    /// When the producer made the record, Unix ms.
    pub recorded_at_ms: u64,
}

/// One benchmark figure, with its unit and how it was measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Figure {
    /// e.g. "fp16_tensor_tflops", "hbm_bandwidth".
    pub name: String,
    /// The figure, in `unit`.
    pub value: f64,
    /// e.g. "TFLOPS", "GB/s".
    pub unit: String,
    /// Sizes, iterations, statistic (e.g. "8192³ GEMM, median of 20").
    pub method: String,
}

/// Benchmark figures ([`RecordKind::Benchmark`], agent-signed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BenchmarkFigures {
    /// Body schema version ([`BODY_VERSION`]).
    pub version: u32,
    /// The GPU the record is about (must equal the entry's).
    pub gpu_uuid: GpuUuid,
    /// The benchmark suite run (quick, standard, full).
    pub suite: String,
    /// Every figure measured.
    pub figures: Vec<Figure>,
    /// Measured by the validator or self-reported by the agent.
    pub provenance: Provenance,
    /// When the producer made the record, Unix ms.
    pub recorded_at_ms: u64,
}

/// Health summary over a window ([`RecordKind::Health`], agent-signed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthSummary {
    /// Body schema version ([`BODY_VERSION`]).
    pub version: u32,
    /// The GPU the record is about (must equal the entry's).
    pub gpu_uuid: GpuUuid,
    /// Start of the summarized window, Unix ms.
    pub window_start_ms: u64,
    /// End of the summarized window, Unix ms.
    pub window_end_ms: u64,
    /// Telemetry samples in the window.
    pub samples: u64,
    /// Highest GPU temperature, °C.
    pub temperature_max_c: f64,
    /// Mean power draw, W.
    pub power_mean_w: f64,
    /// Mean GPU utilization, %.
    pub utilization_mean_pct: f64,
    /// Throttle reasons seen in the window.
    pub throttle_reasons: Vec<String>,
    /// Uncorrected ECC errors in the window.
    pub ecc_uncorrected: u64,
    /// XID error codes seen in the window.
    pub xid_errors: Vec<u32>,
    /// Anomalies the monitor raised in the window.
    pub anomalies: Vec<String>,
    /// Measured by the validator or self-reported by the agent.
    pub provenance: Provenance,
}

/// A Proof-of-GPU score ([`RecordKind::Score`], validator-signed): what the
/// validator's market made of the GPU's records (docs/market.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Score {
    /// Body schema version ([`BODY_VERSION`]).
    pub version: u32,
    /// The GPU the record is about (must equal the entry's).
    pub gpu_uuid: GpuUuid,
    /// The model scored (the registered one), if known.
    pub model: Option<String>,
    /// The score: 1.0 is the reference configuration (an H200 SXM host); 0 when the GPU
    /// is not verified.
    pub score: f64,
    /// The parts by name ("gpu", "cpu", "ram", "storage"): (name, value, weight).
    pub components: Vec<(String, f64, f64)>,
    /// The reliability multiplier (proof success, uptime, anomalies), 0 to 1.
    pub reliability: f64,
    /// Why the score is 0 or lower than the model would earn.
    pub reasons: Vec<String>,
    /// Log indexes of the GPU's records the score was computed from, oldest first.
    pub inputs: Vec<u64>,
    /// When the producer made the record, Unix ms.
    pub recorded_at_ms: u64,
}

/// A price ([`RecordKind::Price`], validator-signed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Body schema version ([`BODY_VERSION`]).
    pub version: u32,
    /// The GPU the record is about (must equal the entry's).
    pub gpu_uuid: GpuUuid,
    /// Price per GPU-hour in millionths of `currency` (micro-dollars for "USD").
    pub per_hour: u64,
    /// ISO 4217 code or token symbol.
    pub currency: String,
    /// How it was set: "posted" (the validator's quote from the score and its market),
    /// "auction", …
    pub basis: String,
    /// The log index of the score record it was quoted from, if logged.
    pub score_index: Option<u64>,
    /// When the producer made the record, Unix ms.
    pub recorded_at_ms: u64,
}

impl SignedBody for InspectionSummary {
    const KIND: RecordKind = RecordKind::Inspection;
    fn gpu_uuid(&self) -> &GpuUuid {
        &self.gpu_uuid
    }
}

impl SignedBody for BenchmarkFigures {
    const KIND: RecordKind = RecordKind::Benchmark;
    fn gpu_uuid(&self) -> &GpuUuid {
        &self.gpu_uuid
    }
}

impl SignedBody for HealthSummary {
    const KIND: RecordKind = RecordKind::Health;
    fn gpu_uuid(&self) -> &GpuUuid {
        &self.gpu_uuid
    }
}

impl SignedBody for Score {
    const KIND: RecordKind = RecordKind::Score;
    fn gpu_uuid(&self) -> &GpuUuid {
        &self.gpu_uuid
    }
}

impl SignedBody for Price {
    const KIND: RecordKind = RecordKind::Price;
    fn gpu_uuid(&self) -> &GpuUuid {
        &self.gpu_uuid
    }
}
