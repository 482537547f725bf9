//! The validator's record of a round it did not challenge a GPU in: the back-off (the agent's
//! fault), or a slot its fleet missed (a validator claimed the GPU and stopped).

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
    /// Whose fault the missed round is (the agent's, when a record does not say).
    #[serde(default)]
    pub cause: MissedCause,
    /// When the validator stored this record (Unix ms).
    pub recorded_at_ms: u64,
}

/// Whose fault a [`MissedRound`] is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MissedCause {
    /// The GPU's agent had not answered: its uptime counts the round as missed.
    #[default]
    Agent,
    /// A validator of the fleet claimed the GPU for the slot and stopped before its round
    /// was recorded: the GPU's uptime does not count it.
    Fleet,
}

impl SignedBody for MissedRound {
    const KIND: RecordKind = RecordKind::RoundMissed;
    fn gpu_uuid(&self) -> &GpuUuid {
        &self.gpu_uuid
    }
}
