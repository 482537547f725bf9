//! A GPU's stored rows read back as typed evidence: what the score ([`crate::pricing`]) and the
//! settlement ([`crate::settlement`]) read of the registry's records, one reader for both; and
//! [`FullRounds`], which finds a leased GPU's last full round behind its lease's checks.

use pog_market::appraisal::{HostProof, RecordSummary};
use pog_market::evidence::{HealthEvidence, MissedRound};
use pog_market::score::{CpuFigures, RamFigures, StorageFigures};
use pog_net::locked::Locked;
use pog_records::{
    CpuRecord, HealthRecord, MemoryRecord, RamRecord, Record, StorageRecord, StoredBody,
};
use pog_signed::{Envelope, GpuUuid, RecordKind};
use std::collections::HashMap;
use std::sync::Mutex;

use crate::registry::{Registry, RegistryError};

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
    /// Its host's proofs of RAM (on the host's first GPU).
    pub ram_proofs: Vec<HostProof<RamFigures>>,
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
    let (mut cpu_proofs, mut ram_proofs, mut storage_proofs) = (Vec::new(), Vec::new(), Vec::new());
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
            Some(RecordKind::RamRound) => RamRecord::read(kind, body)
                .map(|r| ram_proofs.push(HostProof::of_ram(*id, &r)))
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
        ram_proofs,
        storage_proofs,
        unreadable,
    }
}

/// The rows first read back when a GPU's last full round is looked for behind its lease's
/// checks, growing fourfold up to [`DEEPEST_ROWS`].
const FIRST_DEEP_ROWS: usize = 512;

/// The most rows read back to find a GPU's last full round: about 30 days of a round a
/// minute with its health records. Past it the GPU is judged without one.
const DEEPEST_ROWS: usize = 131_072;

/// Each GPU's last full round (its GEMM and memory records, and its host's proofs of CPU, RAM
/// and storage) that a lease's checks pushed out of the rows its score reads: during a lease the
/// validator only checks the GPU (`Policy::for_lease`), so after a few dozen rounds the rows
/// hold no record that speaks for its model, memory or host, and the score would fall to
/// nothing while the GPU serves its tenant.
/// Kept per GPU as rows go by, and read back once through the registry where none was kept
/// (after a restart).
#[derive(Default)]
pub struct FullRounds(Mutex<HashMap<GpuUuid, FullRound>>);

/// A GPU's last full round, as [`FullRounds`] keeps it.
#[derive(Debug, Clone, Default)]
struct FullRound {
    gemm: Option<RecordSummary>,
    memory: Option<RecordSummary>,
    cpu: Option<HostProof<CpuFigures>>,
    ram: Option<HostProof<RamFigures>>,
    storage: Option<HostProof<StorageFigures>>,
}

impl FullRound {
    /// The last full round in `read`: its latest GEMM record that is not a lease's check, and
    /// its latest memory record and host proofs (only full rounds carry them).
    fn in_rows(read: &ReadRows) -> FullRound {
        FullRound {
            gemm: read.records.iter().rev().find(|r| !r.lease_check).cloned(),
            memory: read.memory_records.last().cloned(),
            cpu: read.cpu_proofs.last().cloned(),
            ram: read.ram_proofs.last().cloned(),
            storage: read.storage_proofs.last().cloned(),
        }
    }
}

impl FullRounds {
    /// Completes `read`, the latest rows of `uuid`: where they hold a lease's checks and no
    /// full round, the GPU's last full round goes in front of them (older than every row);
    /// where they hold a full round, it is kept for later.
    pub fn complete(
        &self,
        registry: &Registry,
        uuid: &GpuUuid,
        read: &mut ReadRows,
    ) -> Result<(), RegistryError> {
        let here = FullRound::in_rows(read);
        if here.gemm.is_some() {
            self.0.locked().insert(uuid.clone(), here);
            return Ok(());
        }
        if !read.records.iter().any(|r| r.lease_check) {
            return Ok(()); // no lease's checks: nothing hides a full round
        }
        let kept = self.0.locked().get(uuid).cloned();
        let last = match kept {
            Some(last) => last,
            None => {
                let found = search_back(registry, uuid)?;
                self.0.locked().insert(uuid.clone(), found.clone());
                found
            }
        };
        if let Some(gemm) = last.gemm {
            read.records.insert(0, gemm);
        }
        if read.memory_records.is_empty() {
            read.memory_records.extend(last.memory);
        }
        if read.cpu_proofs.is_empty() {
            read.cpu_proofs.extend(last.cpu);
        }
        if read.ram_proofs.is_empty() {
            read.ram_proofs.extend(last.ram);
        }
        if read.storage_proofs.is_empty() {
            read.storage_proofs.extend(last.storage);
        }
        Ok(())
    }
}

/// Reads `uuid`'s rows back, more each time, until a full round is among them (or
/// [`DEEPEST_ROWS`] were read).
fn search_back(registry: &Registry, uuid: &GpuUuid) -> Result<FullRound, RegistryError> {
    let mut limit = FIRST_DEEP_ROWS;
    loop {
        let rows = registry.latest_records(uuid.as_str(), limit)?;
        let found = FullRound::in_rows(&read_rows(&rows));
        if found.gemm.is_some() || rows.len() < limit || limit >= DEEPEST_ROWS {
            return Ok(found);
        }
        limit = (limit * 4).min(DEEPEST_ROWS);
    }
}
