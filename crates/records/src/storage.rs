//! The validator's record of one proof of a host's storage (`storage-record`,
//! [`RecordKind::StorageRound`]): the claim, the data set and its root, the audit of a new
//! data set, the timed round, and the verdict or why there was none. The proof's exchange is
//! `pog_proof::storage::session`'s, not a `ProofKind`'s: its answer is a walk of digests and
//! chunk openings, not a commitment.

use pog_proof::storage::session::{AuditOutcome, RoundOutcome};
use pog_proof::storage::{StorageClaim, StorageDataset};
use pog_signed::{GpuUuid, PublicKey, RecordKind};
use serde::{Deserialize, Serialize};

use crate::policy::StoragePolicy;
use crate::proof::Failure;
use crate::SignedBody;

/// What the validator signs and stores for one proof of a host's storage: a round walked
/// from the kept data set, or the data set's build and audit when that is what failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StorageRecord {
    /// The record format's version.
    pub version: u32,
    /// The round's id (the data set's id when no round ran).
    pub record_id: String,
    /// The host's first GPU (by UUID), which carries its host's proofs.
    pub gpu_uuid: GpuUuid,
    /// The agent the GPU is registered to (its public key).
    pub agent: PublicKey,
    /// The GPU's claimed model, as registered.
    pub model: String,
    /// The host is the simulated test double: this record proves nothing about any storage.
    pub simulated: bool,
    /// Whether an accepted record speaks for the host's storage (a real host).
    pub proves_storage: bool,
    /// What the host claims: the bytes and the device class.
    pub claim: StorageClaim,
    /// The plan the round ran under (steps, checks, rebuild schedule).
    pub policy: StoragePolicy,
    /// The data set (nonce, binding, shape), so anyone can regenerate its items.
    pub dataset: StorageDataset,
    /// The data set's audited root (hex); none while it was not built or failed its audit.
    pub root: Option<String>,
    /// When its audit passed (the validator's clock, Unix ms): the rebuild schedule counts
    /// from there. None while it has not.
    pub dataset_since_ms: Option<u64>,
    /// The audit of a data set built for this record (none when the data set was kept from
    /// an earlier one).
    pub audit: Option<AuditOutcome>,
    /// The timed round (none when no round ran: the build or the audit failed).
    pub round: Option<RoundOutcome>,
    /// The round's bound: steps × the read bound, ms (the claimed class's read until the
    /// host has walked a round in time, then its own: `DeviceClass::host_read_us`).
    pub expected_ms: f64,
    /// The host's fastest accepted step after this round (of any of its data sets and
    /// claims under this agent key), on the validator's clock, µs: its next rounds' bound is
    /// twice it, between the class's floor and read. None until a round is accepted (and in
    /// records before this field).
    #[serde(default)]
    pub best_step_us: Option<f64>,
    /// Whether the round was accepted: in time, every opened step right.
    pub accepted: bool,
    /// Why the exchange ended without a verdict, when it did.
    pub failure: Option<Failure>,
    /// The secret the round's steps were drawn from (hex), revealed once they are checked.
    pub spot_check_secret: String,
    /// Bytes of the messages sent to the agent.
    pub bytes_to_agent: usize,
    /// Bytes of the messages received from the agent.
    pub bytes_from_agent: usize,
    /// When the validator stored this record (Unix ms).
    pub recorded_at_ms: u64,
}

impl StorageRecord {
    /// Dependent 4 KiB reads a second over the walk on the validator's clock (network round
    /// trip included): what the score counts of the storage's speed (`None` without a
    /// round's time).
    pub fn reads_per_s(&self) -> Option<f64> {
        let round = self.round.as_ref()?;
        let ms = round.time.measured_ms;
        (ms > 0.0).then(|| f64::from(round.steps) / (ms / 1e3))
    }

    /// The bytes the accepted record proves held: the data set's (whole items of the claim).
    pub fn proven_bytes(&self) -> u64 {
        self.dataset.shape.bytes()
    }
}

impl SignedBody for StorageRecord {
    const KIND: RecordKind = RecordKind::StorageRound;
    fn gpu_uuid(&self) -> &GpuUuid {
        &self.gpu_uuid
    }
}
