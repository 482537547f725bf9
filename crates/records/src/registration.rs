//! The validator's records of who holds a GPU: a claim, a new claim, a release.

use pog_signed::{GpuUuid, PublicKey, RecordKind};
use serde::{Deserialize, Serialize};

use crate::SignedBody;

/// What a registration did to one GPU's entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// The GPU was not registered before.
    New,
    /// Its owner registered it again with another model, PCI address, endpoint or
    /// simulated flag: a new registration, recorded as such.
    Changed,
    /// The same claim again (an agent restarting).
    Same,
    /// Taken off the registry after failing or being unreachable round after round.
    Released,
}

/// A signed registration event: a GPU claimed, claimed anew (model, bus id, endpoint or
/// simulated flag changed) or released, stored among the GPU's records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegistrationRecord {
    /// The record format's version.
    pub version: u32,
    /// Which registration event.
    pub event: Change,
    /// The GPU claimed or released.
    pub gpu_uuid: GpuUuid,
    /// The agent that claimed it (its public key).
    pub agent: PublicKey,
    /// The GPU's model, as claimed.
    pub model: String,
    /// The GPU's PCI bus id, as claimed.
    pub bus_id: String,
    /// The GPU is the simulated test double.
    pub simulated: bool,
    /// Why, for a release.
    pub reason: Option<String>,
    /// When the validator stored this record (Unix ms).
    pub recorded_at_ms: u64,
}

impl SignedBody for RegistrationRecord {
    const KIND: RecordKind = RecordKind::Registration;
    fn gpu_uuid(&self) -> &GpuUuid {
        &self.gpu_uuid
    }
}
