//! The kinds of signed records: one type that names each kind on the wire, in the ledger's
//! framing and in the rules about who may sign it.

use serde::{Deserialize, Serialize};

/// The kinds of signed records, and who produces each. A record is signed under its
/// [`RecordKind::wire_kind`] and framed in the ledger by its byte (`as u8`): both are
/// fixed forever once used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum RecordKind {
    /// A GPU claimed, claimed anew or released (validator; `pog_records::RegistrationRecord`).
    Registration = 1,
    /// An inventory and authenticity inspection summary (agent, self-reported).
    Inspection = 2,
    /// Local benchmark figures (agent, self-reported).
    Benchmark = 3,
    /// One challenge round of the remote proof (validator, measured; `pog_records::Record`).
    ProofRound = 4,
    /// A health summary over a window of monitoring (agent, self-reported).
    Health = 5,
    /// A Proof-of-GPU score (validator).
    Score = 6,
    /// A price (validator / market).
    Price = 7,
    /// One memory challenge round of the remote proof (validator, measured;
    /// `pog_records::MemoryRecord`).
    MemoryRound = 8,
    /// A validator's health record of one GPU over a window (validator;
    /// `pog_records::HealthRecord`: the agent's signed summary, reported, beside the validator's own proof
    /// pace, measured).
    HealthRound = 9,
    /// A round in which the validator's schedule did not challenge a GPU because its agent had
    /// not answered the rounds before (validator; `pog_records::MissedRound`): what its
    /// uptime counts beside the proof rounds.
    RoundMissed = 10,
    /// One challenge round of the proof of CPU of a GPU's host (validator, measured;
    /// `pog_records::CpuRecord`).
    CpuRound = 11,
    /// A GPU's state in the fixed form a contract reads (validator; `pog_records::GpuState`):
    /// its model, whether its proofs speak for it, its score and price, the address its owner
    /// named for its token. Logged beside every score that changes; `contracts/GpuScores.sol`
    /// keeps the latest one proven against an anchored checkpoint.
    GpuState = 12,
    /// A GPU leased to a renter for a time, what a trade became (validator;
    /// `pog_records::LeaseRecord`).
    Lease = 13,
    /// One period of a lease settled for the hours the validator proved: what the renter's
    /// deposit pays the provider and what stays with the renter, with the escrow signature
    /// that pays it (validator; `pog_records::SettlementRecord`).
    Settlement = 14,
    /// One proof of a GPU's host's storage: a data set built and audited, a round walked
    /// (validator, measured; `pog_records::StorageRecord`).
    StorageRound = 15,
    /// One challenge round of the proof of RAM of a GPU's host (validator, measured;
    /// `pog_records::RamRecord`).
    RamRound = 16,
}

impl RecordKind {
    /// Every kind, in code order.
    pub const ALL: [RecordKind; 16] = [
        RecordKind::Registration,
        RecordKind::Inspection,
        RecordKind::Benchmark,
        RecordKind::ProofRound,
        RecordKind::Health,
        RecordKind::Score,
        RecordKind::Price,
        RecordKind::MemoryRound,
        RecordKind::HealthRound,
        RecordKind::RoundMissed,
        RecordKind::CpuRound,
        RecordKind::GpuState,
        RecordKind::Lease,
        RecordKind::Settlement,
        RecordKind::StorageRound,
        RecordKind::RamRound,
    ];

    /// The kind from its byte.
    pub fn from_u8(b: u8) -> Option<RecordKind> {
        RecordKind::ALL.into_iter().find(|k| *k as u8 == b)
    }

    /// The envelope kind its producer signs under: the proof round keeps the validator's
    /// first name for it, "record".
    pub fn wire_kind(self) -> &'static str {
        match self {
            RecordKind::Registration => "registration",
            RecordKind::Inspection => "inspection",
            RecordKind::Benchmark => "benchmark",
            RecordKind::ProofRound => "record",
            RecordKind::Health => "health",
            RecordKind::Score => "score",
            RecordKind::Price => "price",
            RecordKind::MemoryRound => "memory-record",
            RecordKind::HealthRound => "health-record",
            RecordKind::RoundMissed => "round-missed",
            RecordKind::CpuRound => "cpu-record",
            RecordKind::GpuState => "gpu-state",
            RecordKind::Lease => "lease",
            RecordKind::Settlement => "settlement",
            RecordKind::StorageRound => "storage-record",
            RecordKind::RamRound => "ram-record",
        }
    }

    /// The kind signed under a wire kind.
    pub fn from_wire_kind(kind: &str) -> Option<RecordKind> {
        RecordKind::ALL.into_iter().find(|k| k.wire_kind() == kind)
    }

    /// Whether the validator signs this kind (measured or decided by it); otherwise the agent
    /// that owns the GPU does (self-reported).
    pub fn signed_by_validator(self) -> bool {
        matches!(
            self,
            RecordKind::Registration
                | RecordKind::ProofRound
                | RecordKind::MemoryRound
                | RecordKind::CpuRound
                | RecordKind::StorageRound
                | RecordKind::RamRound
                | RecordKind::HealthRound
                | RecordKind::RoundMissed
                | RecordKind::Score
                | RecordKind::Price
                | RecordKind::GpuState
                | RecordKind::Lease
                | RecordKind::Settlement
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_one_byte_and_one_wire_name() {
        for kind in RecordKind::ALL {
            assert_eq!(RecordKind::from_u8(kind as u8), Some(kind));
            assert_eq!(RecordKind::from_wire_kind(kind.wire_kind()), Some(kind));
        }
        let mut names: Vec<_> = RecordKind::ALL.iter().map(|k| k.wire_kind()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), RecordKind::ALL.len());
        assert_eq!(RecordKind::from_u8(0), None);
        assert_eq!(RecordKind::from_wire_kind("challenge"), None);
    }
}
