//! A GPU's stored rows read back as typed evidence: what the score ([`crate::pricing`]) and the
//! settlement ([`crate::settlement`]) read of the registry's records, one reader for both.

use pog_market::appraisal::{HostProof, RecordSummary};
use pog_market::evidence::{HealthEvidence, MissedRound};
use pog_market::score::{CpuFigures, StorageFigures};
use pog_records::{CpuRecord, HealthRecord, MemoryRecord, Record, StorageRecord, StoredBody};
use pog_signed::{Envelope, RecordKind};

/// Why a stored record was left out of its GPU's assessment (listed with the assessment's
/// unreadable records).
#[derive(Debug, thiserror::Error)]
enum Unreadable {
    /// Its body is not of its kind.
    #[error(transparent)]
    Body(#[from] pog_records::ReadError),
    /// Its values cannot be right.
    #[error(transparent)]
    Evidence(#[from] pog_market::evidence::EvidenceError),
}

/// A GPU's stored rows as the score and the settlement read them: its proof, memory-proof,
/// host-proof, missed-round and health records, and a line for each row that could not be
/// read.
#[derive(Debug, Default)]
pub struct ReadRows {
    /// Its GEMM proof records.
    pub records: Vec<RecordSummary>,
    /// Its memory-proof records.
    pub memory_records: Vec<RecordSummary>,
    /// The rounds the schedule skipped it in.
    pub missed_rounds: Vec<MissedRound>,
    /// Its health records.
    pub health: Vec<HealthEvidence>,
    /// Its host's proofs of CPU (on the host's first GPU).
    pub cpu_proofs: Vec<HostProof<CpuFigures>>,
    /// Its host's proofs of storage (on the host's first GPU).
    pub storage_proofs: Vec<HostProof<StorageFigures>>,
    /// Why each unreadable row was left out.
    pub unreadable: Vec<String>,
}

/// Reads a GPU's stored rows (row id, envelope JSON), leaving out (and naming) what cannot be
/// read; rows of other kinds are skipped.
pub fn read_rows(rows: &[(i64, String)]) -> ReadRows {
    let (mut records, mut memory_records, mut missed_rounds, mut health) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut cpu_proofs, mut storage_proofs) = (Vec::new(), Vec::new());
    let mut unreadable = Vec::new();
    for (id, json) in rows {
        let Ok(envelope) = serde_json::from_str::<Envelope>(json) else {
            unreadable.push(format!("record {id} is not a signed envelope"));
            continue;
        };
        let (kind, body) = (envelope.kind.as_str(), envelope.body.as_str());
        let read: Result<(), Unreadable> = match RecordKind::from_wire_kind(kind) {
            Some(RecordKind::ProofRound) => Record::read(kind, body)
                .map(|r| records.push(RecordSummary::of(*id, &r)))
                .map_err(Unreadable::from),
            Some(RecordKind::MemoryRound) => MemoryRecord::read(kind, body)
                .map(|r| memory_records.push(RecordSummary::of(*id, &r)))
                .map_err(Unreadable::from),
            Some(RecordKind::CpuRound) => CpuRecord::read(kind, body)
                .map(|r| cpu_proofs.push(HostProof::of_cpu(*id, &r)))
                .map_err(Unreadable::from),
            Some(RecordKind::StorageRound) => StorageRecord::read(kind, body)
                .map(|r| storage_proofs.push(HostProof::of_storage(*id, &r)))
                .map_err(Unreadable::from),
            Some(RecordKind::RoundMissed) => pog_records::MissedRound::read(kind, body)
                .map(|r| missed_rounds.push(MissedRound::from_record(*id, &r)))
                .map_err(Unreadable::from),
            Some(RecordKind::HealthRound) => HealthRecord::read(kind, body)
                .map_err(Unreadable::from)
                .and_then(|r| Ok(HealthEvidence::from_record(*id, &r)?))
                .map(|h| health.push(h)),
            _ => Ok(()),
        };
        if let Err(why) = read {
            unreadable.push(format!("record {id}: {why}"));
        }
    }
    ReadRows {
        records,
        memory_records,
        missed_rounds,
        health,
        cpu_proofs,
        storage_proofs,
        unreadable,
    }
}
