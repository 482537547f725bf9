//! The bodies of the records not made by the validator's proof rounds: the agent's
//! inspection summaries, benchmark figures and health summaries (self-reported), and the
//! validator's scores and prices. Every body is a JSON object with `version` and `gpu_uuid`.

use pog_proof::timing::CLOCK_SKEW_MS;
use pog_signed::{GpuUuid, RecordKind};
use serde::{Deserialize, Serialize};

use crate::SignedBody;

/// Version of the body schemas below.
pub const BODY_VERSION: u32 = 1;

/// The largest report a validator takes: the envelope's JSON. A real H200's measure 0.8 KiB
/// (its inspection summary, two findings) and 6.7 KiB (the 25 figures of a standard
/// `pog bench`), so this leaves room for twice the figures or about thirty findings of full
/// length; the agent drops the least severe findings, or the last figures, to fit.
pub const MAX_REPORT_BYTES: usize = 16 << 10;
/// The most findings an inspection summary carries (most severe first; the rest counted).
pub const MAX_FINDINGS: usize = 64;
/// The most figures a benchmark record carries.
pub const MAX_FIGURES: usize = 256;
/// The longest finding message or figure method an agent writes, in characters.
pub const MAX_TEXT_CHARS: usize = 400;
/// The longest name, code, unit, model, bus id, driver version or suite a validator takes.
pub const MAX_FIELD_BYTES: usize = 128;
/// The longest message or method a validator takes.
pub const MAX_LONG_TEXT_BYTES: usize = 4096;

const _: () = assert!(RecordKind::Inspection as u8 == 2 && RecordKind::Benchmark as u8 == 3);

/// A value of a report's body out of bounds or malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the {kind} report's {field} {why}")]
pub struct BadValue {
    /// The report's kind.
    pub kind: &'static str,
    /// The field refused.
    pub field: &'static str,
    /// What is wrong with it.
    pub why: String,
}

/// What a validator answers to a report it took (`POST /v1/reports`, 200).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportReceipt {
    /// The record's id among the GPU's records, from its content: the same content always has
    /// this id, whatever its `recorded_at_ms` or spelling.
    pub id: String,
    /// `inspection` or `benchmark`.
    pub kind: String,
    /// The GPU the record is about.
    pub gpu_uuid: GpuUuid,
    /// True when this request stored it; false when the validator already held it.
    pub recorded: bool,
    /// Its index in the validator's ledger, when this request appended it there.
    pub log_index: Option<u64>,
}

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

/// Checks a text field: `min` to `max` bytes, no control characters.
fn text(
    kind: &'static str,
    field: &'static str,
    value: &str,
    allow_empty: bool,
    max: usize,
) -> Result<(), BadValue> {
    let invalid = |why: String| Err(BadValue { kind, field, why });
    if value.is_empty() && !allow_empty {
        return invalid("is empty".into());
    }
    if value.len() > max {
        return invalid(format!("is {} bytes, over {max}", value.len()));
    }
    if value.chars().any(char::is_control) {
        return invalid("holds control characters".into());
    }
    Ok(())
}

fn common(
    kind: &'static str,
    version: u32,
    provenance: Provenance,
    recorded_at_ms: u64,
    now_ms: u64,
) -> Result<(), BadValue> {
    let invalid = |field, why: String| Err(BadValue { kind, field, why });
    if version != BODY_VERSION {
        return invalid(
            "version",
            format!("is {version}; this validator reads version {BODY_VERSION}"),
        );
    }
    if provenance != Provenance::SelfReported {
        return invalid(
            "provenance",
            "is \"measured\": what an agent reports about its own host is self_reported".into(),
        );
    }
    if recorded_at_ms > now_ms.saturating_add(CLOCK_SKEW_MS) {
        return invalid(
            "recorded_at_ms",
            format!("{recorded_at_ms} is in the future (now {now_ms})"),
        );
    }
    Ok(())
}

impl InspectionSummary {
    /// Checks the values, as a validator takes them at `now_ms` (its clock).
    pub fn check(&self, now_ms: u64) -> Result<(), BadValue> {
        let s = self;
        let k = RecordKind::Inspection.wire_kind();
        common(k, s.version, s.provenance, s.recorded_at_ms, now_ms)?;
        text(k, "model", &s.model, false, MAX_FIELD_BYTES)?;
        text(k, "bus_id", &s.bus_id, false, MAX_FIELD_BYTES)?;
        text(
            k,
            "driver_version",
            &s.driver_version,
            false,
            MAX_FIELD_BYTES,
        )?;
        if !["pass", "warn", "fail"].contains(&s.verdict.as_str()) {
            return Err(BadValue {
                kind: k,
                field: "verdict",
                why: "is none of pass, warn, fail".into(),
            });
        }
        if s.findings.len() > 4 * MAX_FINDINGS {
            return Err(BadValue {
                kind: k,
                field: "findings",
                why: format!("number {}, over {}", s.findings.len(), 4 * MAX_FINDINGS),
            });
        }
        for f in &s.findings {
            text(k, "finding code", &f.code, false, MAX_FIELD_BYTES)?;
            text(k, "finding message", &f.message, false, MAX_LONG_TEXT_BYTES)?;
            if !["info", "warning", "fail"].contains(&f.severity.as_str()) {
                return Err(BadValue {
                    kind: k,
                    field: "finding severity",
                    why: "is none of info, warning, fail".into(),
                });
            }
        }
        Ok(())
    }
}

impl BenchmarkFigures {
    /// Checks the values, as a validator takes them at `now_ms` (its clock).
    pub fn check(&self, now_ms: u64) -> Result<(), BadValue> {
        let b = self;
        let k = RecordKind::Benchmark.wire_kind();
        common(k, b.version, b.provenance, b.recorded_at_ms, now_ms)?;
        text(k, "suite", &b.suite, false, MAX_FIELD_BYTES)?;
        if b.figures.is_empty() || b.figures.len() > MAX_FIGURES {
            return Err(BadValue {
                kind: k,
                field: "figures",
                why: format!("number {}, not 1 to {MAX_FIGURES}", b.figures.len()),
            });
        }
        for f in &b.figures {
            text(k, "figure name", &f.name, false, MAX_FIELD_BYTES)?;
            text(k, "figure unit", &f.unit, false, MAX_FIELD_BYTES)?;
            text(k, "figure method", &f.method, false, MAX_LONG_TEXT_BYTES)?;
            if !f.value.is_finite() {
                return Err(BadValue {
                    kind: k,
                    field: "figure value",
                    why: format!("of {} is not a finite number", f.name),
                });
            }
        }
        Ok(())
    }
}
