//! The `lease` record ([`RecordKind::Lease`]): a GPU leased to a renter for a time, what a
//! trade of the validator's market became (`pog_market::lease`), signed by the validator and
//! logged in the GPU's history, so that a holder sees the hours its GPU was rented beside the
//! hours it was proven.

use pog_signed::{GpuUuid, PublicKey, RecordKind};
use serde::{Deserialize, Serialize};

use crate::SignedBody;

/// Version of the `lease` body.
pub const LEASE_VERSION: u32 = 1;

/// A GPU leased to a renter ([`RecordKind::Lease`], validator-signed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeaseRecord {
    /// Body schema version ([`LEASE_VERSION`]).
    pub version: u32,
    /// The lease's id in the validator's market (`CLEARING.TRADE.GPU`).
    pub lease_id: String,
    /// The GPU leased.
    pub gpu_uuid: GpuUuid,
    /// The GPU class it traded in.
    pub class: String,
    /// The renter (the bid's owner key).
    pub renter: PublicKey,
    /// The provider (the ask's owner key: the agent that holds the GPU).
    pub provider: PublicKey,
    /// When the lease starts, Unix ms.
    pub start_ms: u64,
    /// When it ends, Unix ms.
    pub end_ms: u64,
    /// Its GPU-hours.
    pub hours: u64,
    /// What the renter pays per GPU-hour, micro-dollars.
    pub price_micro_usd: u64,
    /// When the validator made the record, Unix ms.
    pub recorded_at_ms: u64,
}

impl SignedBody for LeaseRecord {
    const KIND: RecordKind = RecordKind::Lease;
    fn gpu_uuid(&self) -> &GpuUuid {
        &self.gpu_uuid
    }
}
