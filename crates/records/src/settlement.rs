//! The `settlement` record ([`RecordKind::Settlement`]): one period of a lease settled for the
//! hours the validator proved (`pog_market::settlement`), signed by the validator and logged in
//! the GPU's history beside the lease, so that the renter, the provider and a token holder each
//! see what was paid for which hours, and why.

use pog_signed::{GpuUuid, PublicKey, RecordKind};
use serde::{Deserialize, Serialize};

use crate::SignedBody;

/// Version of the `settlement` body.
pub const SETTLEMENT_VERSION: u32 = 1;

/// One period of a lease, settled ([`RecordKind::Settlement`], validator-signed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SettlementRecord {
    /// Body schema version ([`SETTLEMENT_VERSION`]).
    pub version: u32,
    /// The lease's id in the validator's market (`CLEARING.TRADE.GPU`).
    pub lease_id: String,
    /// The GPU leased.
    pub gpu_uuid: GpuUuid,
    /// The renter (the bid's owner key), whose escrow account pays.
    pub renter: PublicKey,
    /// The provider (the ask's owner key).
    pub provider: PublicKey,
    /// The period's number, from 0 at the lease's start.
    pub period: u64,
    /// The period's start, Unix ms.
    pub from_ms: u64,
    /// The period's end (exclusive), Unix ms.
    pub to_ms: u64,
    /// Its GPU-hours.
    pub hours: u64,
    /// The hours the validator's rounds proved, in parts per million of an hour.
    pub proven_hours_ppm: u64,
    /// What the renter pays per GPU-hour, micro-dollars.
    pub price_micro_usd: u64,
    /// The period's hours at that price, micro-dollars.
    pub value_micro_usd: u64,
    /// What the provider is paid, micro-dollars.
    pub paid_micro_usd: u64,
    /// What stays in the renter's account, micro-dollars (`value − paid`).
    pub refunded_micro_usd: u64,
    /// The hours not proven in full, in words (empty when every hour was).
    pub unproven: String,
    /// Where the escrow pays the provider (the EVM address its agent named, `0x…`); `None`
    /// when it named none: the settlement is recorded but not signed for the escrow.
    pub payee: Option<String>,
    /// The escrow's signed payment, when the validator settles through one.
    pub escrow: Option<EscrowPayment>,
    /// When the validator made the record, Unix ms.
    pub recorded_at_ms: u64,
}

/// A settlement as the escrow contract takes it (`GpuEscrow.settle`): the EIP-712 message's
/// fields and the validator settlement key's signature, so anyone can submit it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EscrowPayment {
    /// The chain's id.
    pub chain_id: u64,
    /// The escrow contract, `0x…`.
    pub contract: String,
    /// The settlement key's address (the contract's `settler`), `0x…`.
    pub settler: String,
    /// The lease as the contract names it: keccak256 of its id, `0x…` (32 bytes).
    pub lease: String,
    /// The renter's account: its pog key's 32 bytes, `0x…`.
    pub renter_account: String,
    /// The EIP-712 signature, `0x…` (65 bytes).
    pub signature: String,
}

impl SignedBody for SettlementRecord {
    const KIND: RecordKind = RecordKind::Settlement;
    fn gpu_uuid(&self) -> &GpuUuid {
        &self.gpu_uuid
    }
}
