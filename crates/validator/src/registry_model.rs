//! What the validator's registry holds (registered GPUs, new records) and the rules every store
//! of it keeps alike, SQLite ([`crate::registry`]) and PostgreSQL ([`crate::postgres`]).

use pog_proof::wire::GpuClaim;
use pog_records::{Change, RegistrationRecord, RECORD_VERSION};
use pog_signed::{EvmAddress, GpuUuid, PublicKey};

/// A stored record as [`crate::registry::Registry::records_since`] announces it: its row, its GPU and its
/// envelope's kind (`None` when the stored text is not an envelope).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRecord {
    /// Its row id: records are announced in id order.
    pub id: i64,
    /// The GPU it is about.
    pub gpu_uuid: String,
    /// Its envelope's kind, `None` when the stored text is not an envelope.
    pub kind: Option<String>,
}

/// A registered GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredGpu {
    /// The GPU's UUID as the agent claimed it.
    pub uuid: GpuUuid,
    /// The owning agent's public key.
    pub agent: PublicKey,
    /// Where the agent takes challenges (a checked `http(s)` origin).
    pub endpoint: String,
    /// The GPU model as the agent claimed it.
    pub model: String,
    /// Its PCI address as the agent claimed it.
    pub bus_id: String,
    /// A GPU of the simulated test double.
    pub simulated: bool,
    /// The hardware threads its agent claims for its host (none claimed: no proof of CPU).
    pub host_cores: Option<u32>,
    /// The EVM address its agent named to hold its token (none named: no token).
    pub token_owner: Option<EvmAddress>,
    /// The storage its agent claims for its host (none claimed: no proof of storage).
    pub host_storage: Option<pog_proof::storage::StorageClaim>,
    /// The RAM its agent claims for its host, bytes (none claimed: no proof of RAM).
    pub host_ram: Option<u64>,
}

/// A host's RAM claim as the registry's column (bytes; none past what a signed 64-bit
/// column holds, which the registration's range check never lets through).
pub(crate) fn ram_column(host: Option<&pog_proof::wire::HostClaim>) -> Option<i64> {
    host.and_then(|h| h.ram).and_then(|b| i64::try_from(b).ok())
}

/// A host's RAM claim from the registry's column, or why the stored value does not parse.
pub(crate) fn ram_claim(bytes: Option<i64>) -> Result<Option<u64>, String> {
    bytes
        .map(|b| u64::try_from(b).map_err(|_| format!("RAM of {b} bytes")))
        .transpose()
}

/// A host's storage claim as the registry's columns: bytes and class (`nvme`, `ssd`).
pub(crate) fn storage_columns(
    host: Option<&pog_proof::wire::HostClaim>,
) -> (Option<i64>, Option<String>) {
    let claim = host.and_then(|h| h.storage);
    (
        claim.and_then(|c| i64::try_from(c.bytes).ok()),
        claim.map(|c| c.class.to_string()),
    )
}

/// A host's storage claim from the registry's columns (none when either is empty), or why
/// the stored values do not parse.
pub(crate) fn storage_claim(
    bytes: Option<i64>,
    class: Option<String>,
) -> Result<Option<pog_proof::storage::StorageClaim>, String> {
    let (Some(bytes), Some(class)) = (bytes, class) else {
        return Ok(None);
    };
    let bytes = u64::try_from(bytes).map_err(|_| format!("storage of {bytes} bytes"))?;
    let class = serde_json::from_value(serde_json::Value::String(class.clone()))
        .map_err(|_| format!("storage class {class:?}"))?;
    Ok(Some(pog_proof::storage::StorageClaim { bytes, class }))
}

/// Why a registry change was refused.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// A round's record came after its slot's claim was settled as the fleet's miss.
    #[error(
        "the claim of GPU {gpu}'s slot {slot} by this validator ran out while it was cut off \
         from the database, and the fleet recorded the slot as missed: its late record is \
         refused (fenced), so the slot keeps one record"
    )]
    Fenced {
        /// The GPU.
        gpu: String,
        /// The slot.
        slot: u64,
    },
    /// A fleet's log was asked of a registry on SQLite (a bug: only PostgreSQL keeps one).
    #[error("a fleet's log is kept only in a PostgreSQL registry (--database postgres://…)")]
    FleetLogOnSqlite,
    /// Another agent holds the GPU already.
    #[error("GPU {uuid} is already registered by another agent ({owner})")]
    ClaimedElsewhere {
        /// The GPU.
        uuid: String,
        /// The public key (hex) of the agent holding it.
        owner: String,
    },
    /// The agent would hold more GPUs than one agent may.
    #[error("an agent may hold at most {max} GPUs; this registration would give it {would_hold}")]
    TooManyGpus {
        /// The most GPUs one agent may hold.
        max: usize,
        /// How many it would hold after this registration.
        would_hold: usize,
    },
    /// The GPU was released from this agent for failing and is barred from it for a while.
    #[error("GPU {uuid} was released from this agent for failing its challenges; it may register it again in {wait_s} s")]
    Barred {
        /// The GPU.
        uuid: String,
        /// Seconds until it may be registered again.
        wait_s: u64,
    },
    /// The SQLite database failed.
    #[error("the registry database failed ({0}); if the file is damaged, restore it from a backup or move it away to start a new registry")]
    Database(#[from] rusqlite::Error),
    /// The PostgreSQL database failed, could not be reached, or refused a request: the text
    /// says which, and what to do.
    #[error("the registry's PostgreSQL database failed: {0}")]
    Postgres(String),
    /// The `--database` URL is refused: not a PostgreSQL URL, a TLS mode that is unknown or
    /// falls back to the clear, another machine's server with no `sslmode`, or a CA file that
    /// cannot be read.
    #[error("the --database URL is refused: {0}")]
    DatabaseUrl(String),
    /// The database's schema was written by a newer pog.
    #[error("the registry's schema is version {found}, newer than this pog's ({known}): a newer pog wrote it; run that pog (or a newer one) on it, or give this one another database (a new --data-dir, or another --database)")]
    NewerSchema {
        /// The version found in the database.
        found: i64,
        /// The newest version this pog knows.
        known: i64,
    },
}

/// Refuses a schema newer than `known`, saying what to do.
pub(crate) fn check_version(found: i64, known: i64) -> Result<(), RegistryError> {
    if found > known {
        return Err(RegistryError::NewerSchema { found, known });
    }
    Ok(())
}

/// A registration's rules, the same on every store. A GPU released from this agent is refused
/// until its bar (`until_ms`) runs out.
pub(crate) fn check_bar(
    uuid: &GpuUuid,
    until_ms: Option<i64>,
    now_ms: u64,
) -> Result<(), RegistryError> {
    match until_ms.filter(|until| *until as u64 > now_ms) {
        Some(until) => Err(RegistryError::Barred {
            uuid: uuid.to_string(),
            wait_s: (until as u64 - now_ms).div_ceil(1000),
        }),
        None => Ok(()),
    }
}

/// What registering again a GPU this agent holds (as `model`, `bus_id`, `simulated`) changes.
pub(crate) fn change_of(old: (&str, &str, bool), claim: &GpuClaim, moved: bool) -> Change {
    let same = old == (claim.model.as_str(), claim.bus_id.as_str(), claim.simulated);
    if same && !moved {
        Change::Same
    } else {
        Change::Changed
    }
}

/// The name a registration change not yet on record is kept under (`gpus.unrecorded`):
/// `None` for a change that needs no record.
pub(crate) fn unrecorded_name(change: Change) -> Option<&'static str> {
    match change {
        Change::New => Some("new"),
        Change::Changed => Some("changed"),
        Change::Same | Change::Released => None,
    }
}

/// The change a registration reports: `change`, or where the claim is the same and an
/// earlier change was never put on record (its record's write failed after the registry's
/// commit: the database gone, its disk full), that one again, so that the agent's next
/// registration (every 5 minutes) records it.
pub(crate) fn still_unrecorded(change: Change, unrecorded: Option<&str>) -> Change {
    match (change, unrecorded) {
        (Change::Same, Some("new")) => Change::New,
        (Change::Same, Some("changed")) => Change::Changed,
        (change, _) => change,
    }
}

/// The cap holds per key across registrations, not only per message.
pub(crate) fn check_cap(would_hold: i64, max: usize) -> Result<(), RegistryError> {
    if would_hold as usize > max {
        return Err(RegistryError::TooManyGpus {
            max,
            would_hold: would_hold as usize,
        });
    }
    Ok(())
}

/// A page of `(id, envelope)` rows, stopping before the envelopes' JSON would pass
/// `max_bytes` (the first row is always taken); true when it stopped for that.
pub(crate) fn cut_page<E>(
    rows: impl IntoIterator<Item = Result<(i64, String), E>>,
    max_bytes: usize,
) -> Result<(Vec<(i64, String)>, bool), RegistryError>
where
    RegistryError: From<E>,
{
    let (mut page, mut bytes) = (Vec::new(), 0usize);
    for row in rows {
        let (id, envelope) = row?;
        bytes = bytes.saturating_add(envelope.len());
        if bytes > max_bytes && !page.is_empty() {
            return Ok((page, true));
        }
        page.push((id, envelope));
    }
    Ok((page, false))
}

/// A GPU's claim in a slot that its validator never finished, its lease run out and no
/// record of the GPU stored since: the fleet's fault ([`crate::fleet`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AbandonedClaim {
    /// The slot.
    pub slot: u64,
    /// The GPU.
    pub gpu_uuid: String,
    /// The validator that claimed it (its public key).
    pub validator: String,
}

/// A release whose record is not yet on record: the registry keeps it, in the release's own
/// transaction, until [`crate::registry::Registry::release_recorded`] notes it written, so a
/// record lost between the two (the database gone, its disk full) is written at the next pass
/// ([`crate::validator::Validator::record_releases`]).
#[derive(Debug, Clone, PartialEq)]
pub struct UnrecordedRelease {
    /// The id its record is stored under (one id, whichever pass writes it).
    pub record_id: String,
    /// The record to sign and store.
    pub record: RegistrationRecord,
}

impl UnrecordedRelease {
    /// The release of `gpu` for `reason` at `at_ms`, under a fresh record id.
    pub(crate) fn of(gpu: &RegisteredGpu, reason: &str, at_ms: u64) -> UnrecordedRelease {
        UnrecordedRelease {
            record_id: format!(
                "registration-{}",
                hex::encode(pog_signed::random_bytes::<16>())
            ),
            record: RegistrationRecord {
                version: RECORD_VERSION,
                event: Change::Released,
                gpu_uuid: gpu.uuid.clone(),
                agent: gpu.agent.clone(),
                model: gpu.model.clone(),
                bus_id: gpu.bus_id.clone(),
                simulated: gpu.simulated,
                reason: Some(reason.to_owned()),
                recorded_at_ms: at_ms,
            },
        }
    }

    /// Its record as the registry keeps it (JSON).
    pub(crate) fn record_json(&self) -> String {
        serde_json::to_string(&self.record).expect("a registration record serializes")
    }

    /// The release kept under `record_id` with record `json`; `None`, said in the log, for a
    /// row whose record does not parse (written by another pog's record format): it stays
    /// kept, and the releases after it are still written.
    pub(crate) fn readable(record_id: String, json: &str) -> Option<UnrecordedRelease> {
        match serde_json::from_str(json) {
            Ok(record) => Some(UnrecordedRelease { record_id, record }),
            Err(e) => {
                tracing::error!(record_id, error = %e, "a release kept for its record holds a record that does not parse; left kept");
                None
            }
        }
    }
}
