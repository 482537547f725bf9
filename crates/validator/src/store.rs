//! The validator's records behind one narrow seam: what it signs (with its key), logs (in its
//! ledger, when it keeps one, durably and first) and keeps (in its registry), and what it
//! reads back. The challenges, the schedule, the health rounds, the reports' intake and the
//! pricing each reach the records through this type alone, never through the `Validator`
//! that challenges: it is the one place a fleet's shared store (PostgreSQL) will sit behind.
//! It also carries the validator's wall clock ([`pog_net::clock::Clock`]): whatever stamps or
//! judges a record by the time of day reads it here, so that a test can set it.

use pog_net::clock::{SharedClock, SystemClock};
use pog_net::locked::Locked;
use pog_records::SignedBody;
use pog_signed::{Envelope, Identity, PublicKey, WireError};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::ledger::{LedgerError, ValidatorLedger};
use crate::registry::{Registry, RegistryError};

/// Why a record was not stored (nothing of it was kept).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The registry could not be read or written.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The record could not be signed or encoded.
    #[error("signing: {0}")]
    Wire(#[from] WireError),
    /// The ledger did not take the signed record durably: the record is refused (not stored).
    #[error("the ledger refused the record: {0}")]
    Ledger(#[from] LedgerError),
}

/// The validator's signing key, registry and ledger: its record sink and source.
pub struct RecordStore {
    signer: Identity,
    registry: Mutex<Registry>,
    ledger: Option<Arc<ValidatorLedger>>,
    /// Held from a record's append to the ledger to its insert in the registry, so that both
    /// hold the records in one order (two stores at once, a report on the API's runtime and a
    /// proof on the schedule's, once came out of the registry in the other order than the log).
    sequence: Mutex<()>,
    /// Read-only connections to the registry's file for the API's page reads
    /// ([`RecordStore::read`]), kept for the next read.
    readers: Mutex<Vec<Registry>>,
    /// The turn async tasks wait for, asleep, before they block on the registry
    /// ([`RecordStore::unblocked`]).
    turn: tokio::sync::Mutex<()>,
    /// The wall clock the records are stamped and judged by.
    clock: SharedClock,
}

/// Read-only connections kept for page reads beyond those in use.
const KEPT_READERS: usize = 8;

impl RecordStore {
    /// Records signed with `signer`'s key and kept in `registry`, without a ledger, stamped
    /// by the system clock.
    pub fn new(signer: Identity, registry: Registry) -> RecordStore {
        RecordStore {
            signer,
            registry: Mutex::new(registry),
            ledger: None,
            sequence: Mutex::new(()),
            readers: Mutex::new(Vec::new()),
            turn: tokio::sync::Mutex::new(()),
            clock: SystemClock::shared(),
        }
    }

    /// Runs `work`, which blocks on the registry (its lock, its database: a record's store,
    /// a registry read), from async code without stalling the runtime's other tasks: it waits
    /// its turn asleep (one such task at a time), then runs off the runtime's workers
    /// (`block_in_place`). Blocking there instead, the rounds' tasks held both workers of the
    /// rounds' runtime on the registry's lock for seconds at a time, and every exchange under
    /// way waited as long for its next step (docs/protocol.md, "Load").
    pub async fn unblocked<T>(&self, work: impl FnOnce() -> T) -> T {
        let _turn = self.turn.lock().await;
        crate::ledger::blocking(work)
    }

    /// These records stamped and judged by `clock` instead of the system clock (a test's
    /// [`pog_net::clock::ManualClock`]).
    pub fn with_clock(mut self, clock: SharedClock) -> RecordStore {
        self.clock = clock;
        self
    }

    /// The wall clock the records are stamped and judged by.
    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }

    /// Now by [`RecordStore::clock`], in ms since the Unix epoch.
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// These records with a ledger: every record signed from now on is appended to it durably
    /// before it is kept, and `/ledger/…` serves it.
    pub fn with_ledger(mut self, ledger: Arc<ValidatorLedger>) -> RecordStore {
        self.ledger = Some(ledger);
        self
    }

    /// The ledger, if the validator keeps one.
    pub fn ledger(&self) -> Option<&Arc<ValidatorLedger>> {
        self.ledger.as_ref()
    }

    /// The key the records are signed with (the validator's).
    pub fn signer_key(&self) -> PublicKey {
        self.signer.public_key()
    }

    /// Signs `message` as a `kind` message with the validator's key (challenges, requests).
    pub fn seal<T: serde::Serialize>(
        &self,
        kind: &str,
        message: &T,
    ) -> Result<Envelope, WireError> {
        self.signer.seal(kind, message)
    }

    /// The registry: agents, their GPUs and the stored records.
    pub fn registry(&self) -> MutexGuard<'_, Registry> {
        self.registry.locked()
    }

    /// Runs `read` on a read-only connection of the registry's own (the writers' lock is not
    /// taken: a page read of megabytes holds up no registration or record); on the registry
    /// itself when it is in memory or another connection cannot be opened. Blocking: call it
    /// from a blocking task.
    pub fn read<T>(&self, read: impl FnOnce(&Registry) -> T) -> T {
        let kept = self.readers.locked().pop();
        let reader = match kept {
            Some(reader) => Some(reader),
            None => self.registry().reader().ok().flatten(),
        };
        let Some(reader) = reader else {
            return read(&self.registry());
        };
        let out = read(&reader);
        let mut readers = self.readers.locked();
        if readers.len() < KEPT_READERS {
            readers.push(reader);
        }
        out
    }

    /// Signs `body` under its kind and stores it among its GPU's records under `id` (see
    /// [`RecordStore::store_envelope`]); `slot`: the fleet's slot whose round it records.
    pub fn store<T: SignedBody>(
        &self,
        (id, slot): (&str, Option<u64>),
        accepted: bool,
        body: &T,
    ) -> Result<(), StoreError> {
        let envelope = self.signer.seal(T::KIND.wire_kind(), body)?;
        self.store_envelope(&envelope, (id, slot), body.gpu_uuid(), accepted)
            .map(|_| ())
    }

    /// Stores a signed record exactly as its producer signed it (the validator's own, or an
    /// agent's report) among `uuid`'s records under `id`; with a ledger, appends it there
    /// durably first (a record the ledger refuses is not stored). Its log index, with a ledger.
    /// A record of the round of a fleet's `slot` finishes that slot's claim, or is refused
    /// where the claim was settled as the fleet's miss
    /// ([`crate::registry::Registry::record_logged`]); other records name no slot.
    pub fn store_envelope(
        &self,
        envelope: &Envelope,
        (id, slot): (&str, Option<u64>),
        uuid: &str,
        accepted: bool,
    ) -> Result<Option<u64>, StoreError> {
        let json = serde_json::to_string(envelope).map_err(WireError::Encode)?;
        // A fleet's log takes the entry in the record's own transaction (one order for all
        // validators, and a record stored and logged or neither); the tree here follows.
        if let Some(ledger) = &self.ledger {
            if let Some(entry) = ledger.fleet_entry(envelope)? {
                let index = self.registry().record_logged(
                    (id, uuid),
                    accepted,
                    &json,
                    (Some(&entry), slot),
                )?;
                if let Some(index) = index {
                    ledger.integrated(index);
                }
                return Ok(index);
            }
        }
        let _in_order = self.sequence.locked();
        let index = match &self.ledger {
            Some(ledger) => Some(ledger.append(envelope)?),
            None => None,
        };
        self.registry()
            .record_logged((id, uuid), accepted, &json, (None, slot))?;
        Ok(index)
    }

    /// Signs `body` under its kind and appends it to the ledger only (the validator's scores
    /// and prices: kept in the registry, they would wake the pricing again). Its log index;
    /// `None` without a ledger (nothing is signed then).
    pub fn log<T: SignedBody>(&self, body: &T) -> Result<Option<u64>, StoreError> {
        let Some(ledger) = &self.ledger else {
            return Ok(None);
        };
        let envelope = self.signer.seal(T::KIND.wire_kind(), body)?;
        Ok(Some(ledger.append(&envelope)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pog_records::{MissedRound, RECORD_VERSION};

    fn missed(n: usize) -> MissedRound {
        MissedRound {
            version: RECORD_VERSION,
            record_id: format!("missed-{n}"),
            gpu_uuid: "GPU-order".parse().unwrap(),
            agent: PublicKey::from([7; 32]),
            model: "H200 SXM".into(),
            reason: format!("round {n}"),
            cause: Default::default(),
            recorded_at_ms: n as u64,
        }
    }

    /// Records stored at once from many threads come out of the registry in the order the
    /// log holds them (on SQLite and on PostgreSQL).
    #[test]
    fn the_registry_and_the_log_hold_records_in_one_order() {
        for place in crate::registry::testing::Place::all() {
            in_one_order(place.open());
        }
    }

    fn in_one_order(registry: Registry) {
        let dir = tempfile::tempdir().unwrap();
        let signer = Identity::from_seed([3; 32]);
        let ledger = ValidatorLedger::open(dir.path(), &signer, None).unwrap();
        let store = Arc::new(RecordStore::new(signer, registry).with_ledger(Arc::new(ledger)));
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let store = store.clone();
                std::thread::spawn(move || {
                    for i in 0..25 {
                        let body = missed(t * 100 + i);
                        store
                            .store((&body.record_id.clone(), None), false, &body)
                            .unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let kept: Vec<String> = store
            .registry()
            .latest_records("GPU-order", 1000)
            .unwrap()
            .into_iter()
            .map(|(_, json)| serde_json::from_str::<Envelope>(&json).unwrap().body)
            .collect();
        let logged: Vec<String> = store
            .ledger()
            .unwrap()
            .ledger()
            .gpu_entries("GPU-order")
            .unwrap()
            .into_iter()
            .map(|(_, entry)| entry.body)
            .collect();
        assert_eq!(kept.len(), 200);
        assert_eq!(kept, logged);
    }
}
