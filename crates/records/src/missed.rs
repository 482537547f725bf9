//! The validator's record of a round it did not challenge a GPU in (the back-off).

use pog_signed::{GpuUuid, PublicKey, RecordKind};
use serde::{Deserialize, Serialize};

use crate::SignedBody;

/// What the validator signs and stores for a round in which its schedule did not challenge a
/// GPU because the GPU's agent had not answered its last challenge (the back-off): the GPU's
/// uptime counts the round as missed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MissedRound {
    /// The record format's version.
    pub version: u32,
    /// This record's id in the validator's store.
    pub record_id: String,
    /// The GPU that was skipped.
    pub gpu_uuid: GpuUuid,
    /// The agent the GPU is registered to (its public key).
    pub agent: PublicKey,
    /// The GPU's model, as registered.
    pub model: String,
    /// Why, in the validator's words.
    pub reason: String,
    /// When the validator stored this record (Unix ms).
    pub recorded_at_ms: u64,
}

impl SignedBody for MissedRound {
    const KIND: RecordKind = RecordKind::RoundMissed;
    fn gpu_uuid(&self) -> &GpuUuid {
        &self.gpu_uuid
    }
}
