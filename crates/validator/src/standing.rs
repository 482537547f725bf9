//! The market's window on the registry (issue 25, item 1): [`RegistryStanding`] implements
//! [`GpuStanding`] over the validator's [`RecordStore`], so that the market reads, for a GPU
//! UUID, the agent key it is registered to, its registered model and its latest proof record,
//! and nothing else of the stores. Works alike over SQLite and PostgreSQL (it only calls the
//! [`Registry`](crate::registry::Registry)'s reads).

use std::sync::Arc;

use pog_market::backing::{GpuStanding, LatestProof, Standing, StandingUnavailable};
use pog_records::{Record, StoredBody};
use pog_signed::{Envelope, GpuUuid, RecordKind};

use crate::store::RecordStore;

/// How many of a GPU's latest records are searched for its latest proof record. Every round
/// that reaches the GPU stores a proof record among its few others (memory, CPU, health), and
/// a round that does not stores one missed-round record; so a GPU whose latest 64 records hold
/// no proof record of its own has gone many rounds unproven (over an hour at the default
/// minute's pace), and has none recent enough to back an ask.
pub const RECORDS_SEARCHED: usize = 64;

/// The registry and records of a validator, as the market's [`GpuStanding`].
#[derive(Clone)]
pub struct RegistryStanding {
    records: Arc<RecordStore>,
}

impl RegistryStanding {
    /// The standing of the GPUs registered in `records`' registry.
    pub fn new(records: Arc<RecordStore>) -> RegistryStanding {
        RegistryStanding { records }
    }
}

impl GpuStanding for RegistryStanding {
    /// The GPU's registration, and its latest GEMM proof record of a full round made while it
    /// was registered to its present agent as its present model (a record of an earlier
    /// holder, of another claimed model, or a lease's check never backs an ask). A stored record that cannot be read is skipped.
    fn standing(&self, gpu: &GpuUuid) -> Result<Option<Standing>, StandingUnavailable> {
        let unavailable = |e: crate::registry::RegistryError| StandingUnavailable(e.to_string());
        let (registered, rows) = self
            .records
            .read(|registry| {
                let gpu_row = registry.gpu(gpu.as_str())?;
                let rows = match &gpu_row {
                    Some(_) => registry.latest_records(gpu.as_str(), RECORDS_SEARCHED)?,
                    None => Vec::new(),
                };
                Ok((gpu_row, rows))
            })
            .map_err(unavailable)?;
        let Some(registered) = registered else {
            return Ok(None);
        };
        let proof_kind = RecordKind::ProofRound.wire_kind();
        let latest_proof = rows.iter().rev().find_map(|(id, json)| {
            let envelope = serde_json::from_str::<Envelope>(json).ok()?;
            if envelope.kind != proof_kind {
                return None;
            }
            let record = Record::read(&envelope.kind, &envelope.body).ok()?;
            // A lease's check is not a model's proof: the ask is judged by the full round.
            let ours = record
                .agent
                .as_str()
                .eq_ignore_ascii_case(&registered.agent)
                && record.model == registered.model
                && !record.policy.lease_check;
            ours.then_some(LatestProof {
                record_id: *id,
                accepted: record.accepted,
                proves_model: record.details.proves_model && !record.simulated,
                recorded_at_ms: record.recorded_at_ms,
            })
        });
        Ok(Some(Standing {
            agent: registered.agent,
            model: registered.model,
            simulated: registered.simulated,
            latest_proof,
        }))
    }
}
