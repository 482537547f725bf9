//! pog's one record schema: the body of every record a validator or an agent signs, typed.
//!
//! Each body names its GPU ([`GpuUuid`]) and, where a validator made it, the agent the GPU
//! is registered to ([`pog_signed::PublicKey`]); each is signed under its [`RecordKind`] through
//! [`SignedBody`], so a body cannot be signed or read as another kind. The validator
//! writes these types, the ledger keeps them, and the market and the chain code read them
//! back typed ([`StoredBody::read`]), never by field name.
//!
//! - [`proof`]: a GEMM or memory challenge round, its outcome or its [`Failure`];
//! - [`kind`]: each kind of proof, how it is planned, exchanged and recorded ([`ProofKind`]);
//! - [`policy`]: the policy a round was planned and judged under;
//! - [`registration`], [`missed`], [`health`]: who holds a GPU, a round not run, a
//!   window of health;
//! - [`reports`]: the agent's self-reported inspections, benchmarks and health, and the
//!   validator's scores and prices;
//! - [`storage`]: a proof of the host's storage (`storage-record`);
//! - [`state`]: a GPU's state in the fixed form a contract reads (`gpu-state`);
//! - [`lease`]: a GPU leased to a renter, what a trade became; [`settlement`]: one period of
//!   a lease paid for the hours proven.

#![warn(missing_docs)]

pub mod health;
pub mod kind;
pub mod lease;
pub mod missed;
pub mod policy;
pub mod proof;
pub mod registration;
pub mod reports;
pub mod settlement;
pub mod state;
pub mod storage;

pub use health::{HealthRecord, ProofPace};
pub use kind::{Claimed, Exchange, Gemm, HostCpu, HostRam, Memory, ProofKind, Ran};
pub use lease::LeaseRecord;
pub use missed::{MissedCause, MissedRound};
use pog_signed::{GpuUuid, RecordKind};
pub use policy::{
    CpuPolicy, MemoryPolicy, PlanKind, Planned, Policy, PolicyError, RamPolicy, StoragePolicy,
};
pub use proof::{
    CpuDetails, CpuRecord, Failure, FailureKind, GemmDetails, MemoryDetails, MemoryRecord,
    ProofDetails, ProofRecord, RamDetails, RamRecord, Record,
};
pub use registration::{Change, RegistrationRecord};
pub use settlement::{EscrowPayment, SettlementRecord};
pub use state::GpuState;
pub use storage::StorageRecord;

/// Version of the result-record encoding stored (and later appended to the ledger). 3: a proof
/// outcome lists only its first failed spot checks (`rejected`), counting them all in
/// `rejected_total` with a digest of the whole list; a version-2 outcome lists every one.
pub const RECORD_VERSION: u32 = 3;

/// A signed record's body: the kind it is signed under and the GPU it names.
pub trait SignedBody: serde::Serialize + serde::de::DeserializeOwned {
    /// The kind every body of this type is signed under.
    const KIND: RecordKind;
    /// The GPU the record is about (the ledger frames the entry by it).
    fn gpu_uuid(&self) -> &GpuUuid;
}

/// Why a stored record could not be read as the body asked for.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The record is of another kind.
    #[error("a {found} record is not a {expected} record")]
    OtherKind {
        /// The kind asked for.
        expected: &'static str,
        /// The kind the record was signed under.
        found: String,
    },
    /// The body does not parse as its kind's schema.
    #[error("the {kind} record's body is malformed: {cause}")]
    Body {
        /// The kind it was read as.
        kind: &'static str,
        /// Why it could not be read.
        cause: serde_json::Error,
    },
}

/// Reading a stored record's body back as its type.
pub trait StoredBody: SignedBody {
    /// The body of a record signed under `kind` with JSON text `body`, when it is of this
    /// type's kind.
    fn read(kind: &str, body: &str) -> Result<Self, ReadError> {
        if kind != Self::KIND.wire_kind() {
            return Err(ReadError::OtherKind {
                expected: Self::KIND.wire_kind(),
                found: kind.to_string(),
            });
        }
        serde_json::from_str(body).map_err(|cause| ReadError::Body {
            kind: Self::KIND.wire_kind(),
            cause,
        })
    }
}

impl<T: SignedBody> StoredBody for T {}
