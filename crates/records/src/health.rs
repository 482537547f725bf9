//! The validator's health record of one GPU over a window: what the agent reported beside
//! what the validator measured itself.

use pog_proof::wire::HealthSummary;
use pog_signed::{GpuUuid, PublicKey, RecordKind};
use serde::{Deserialize, Serialize};

use crate::proof::Failure;
use crate::SignedBody;

/// The validator's own proof timings of one GPU over a window: trusted, as it timed them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProofPace {
    /// Each GEMM proof completed in the window: its time over its bound, oldest first.
    pub ratios: Vec<f64>,
    /// Each memory proof completed in the window: its time over its bound, oldest first.
    pub memory_ratios: Vec<f64>,
    /// The median of `ratios`.
    pub median_ratio: Option<f64>,
    /// The median ratio of up to `pog_validator::health::BASELINE_PROOFS` GEMM proofs completed
    /// before the window.
    pub baseline_ratio: Option<f64>,
    /// `median_ratio / baseline_ratio - 1`: above 0, the GPU proves slower than it did.
    pub decay: Option<f64>,
}

/// What the validator signs and stores for each health summary it asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HealthRecord {
    /// The record format's version.
    pub version: u32,
    /// This record's id in the validator's store.
    pub record_id: String,
    /// The GPU the summary is about.
    pub gpu_uuid: GpuUuid,
    /// The agent the GPU is registered to (its public key).
    pub agent: PublicKey,
    /// The GPU's model, as registered.
    pub model: String,
    /// The GPU is the simulated test double: nothing here is about a GPU.
    pub simulated: bool,
    /// The window, the validator's clock (Unix ms).
    pub from_ms: u64,
    /// The window's end, the validator's clock (Unix ms).
    pub to_ms: u64,
    /// Self-reported by the agent (its signature verified by this validator; a modified
    /// agent can sign anything): counts only against the GPU. `None` when it did not answer well.
    pub reported: Option<HealthSummary>,
    /// Why there is no report, when there is none.
    pub failure: Option<Failure>,
    /// Measured by this validator: its own proof timings in the window (trusted).
    pub measured: ProofPace,
    /// Where the report and the measurement disagree, in the validator's words.
    pub contradictions: Vec<String>,
    /// When the validator stored this record (Unix ms).
    pub recorded_at_ms: u64,
}

impl SignedBody for HealthRecord {
    const KIND: RecordKind = RecordKind::HealthRound;
    fn gpu_uuid(&self) -> &GpuUuid {
        &self.gpu_uuid
    }
}
