//! The proof of a host's storage in the validator's round (`pog_proof::storage::session`
//! over the agent's `/v1/storage/*`), once a round on the host's first GPU after its proof of
//! CPU, where the agent claims storage.
//!
//! - **The data set** is sent once (`storage-dataset`, a fresh nonce, the claimed size,
//!   bound like a challenge) and built by the agent in the background: each round until its
//!   expiry (`StoragePolicy::build_expiry_ms`) the validator sends the same message again and
//!   the agent answers `storage-building`, or `storage-built` with the root once it is done;
//!   the validator then audits it (`storage-audit`, chunks regenerated) and keeps it, in
//!   memory and in its records (a restarted validator takes it up from its latest
//!   `storage-record` rather than asking for a rebuild). A new data set is sent once the kept
//!   one is `rebuild_after_ms` old, or when the claim changes.
//! - **A round** walks the kept data set (`storage-round` → `storage-walk`, the validator's
//!   clock stopping at the digests, judged against the steps × a read bound) and opens the
//!   drawn steps (`storage-open` → `storage-openings`). The read bound is the claimed class's
//!   until the host has walked a round in time, then the host's own: twice its fastest
//!   accepted step, between the class's floor and its read (`DeviceClass::host_read_us`), so
//!   a host that showed fast local reads cannot later answer through a second host. That
//!   pace is kept per agent key, across rebuilds and claims, in memory and in every record
//!   (`best_step_us`), where a restarted validator takes it up.
//! - **Records.** Every round, and every build that failed (refused, expired, its audit
//!   failed), is a signed `storage-record` ([`StorageRecord`]); a host whose agent does not
//!   answer gets one with the failure. A round while the data set is still being built has
//!   none (it is logged).

use crate::datasets::Held;
use crate::validator::{ExchangeError, Validator, ValidatorError};
use pog_merkle::Hash;
use pog_net::http::post_counted;
use pog_proof::challenge::Addressee;
use pog_proof::storage::session::{
    kind, AuditMessage, AuditOpeningsMessage, AuditOutcome, BuildingMessage, BuiltMessage,
    DatasetMessage, DatasetSession, OpeningsMessage, RoundMessage, RoundOutcome, RoundSession,
    WalkMessage,
};
use pog_proof::storage::{StorageClaim, StorageDataset, StoragePlan, StorageRound};
use pog_records::{
    Failure, FailureKind, Policy, StoragePolicy, StorageRecord, StoredBody, RECORD_VERSION,
};
use pog_signed::{random_bytes, Envelope, RecordKind};
use std::time::{Duration, Instant};

/// How long the validator waits for the agent's answer to a data set message (it answers at
/// once: the build runs in the background).
const DATASET_ANSWER: Duration = Duration::from_secs(30);

/// Time past twice the bound that the validator still waits for a walk.
const WALK_SLACK_MS: u64 = 5_000;

/// What one proof of a host's storage gathered, for its record.
struct Gathered {
    record_id: String,
    dataset: StorageDataset,
    root: Option<Hash>,
    since_ms: Option<u64>,
    audit: Option<AuditOutcome>,
    round: Option<RoundOutcome>,
    expected_ms: f64,
    best_step_us: Option<f64>,
    failure: Option<Failure>,
    secret: [u8; 32],
    bytes: (usize, usize),
}

/// Where a build stands after the agent's answer.
enum Built {
    /// Still building.
    Building,
    /// Building another data set this validator takes up (the session that comes back is
    /// that one's), from this message.
    Instead(Envelope),
    /// Built and audited.
    Audited(AuditOutcome),
}

/// What the agent said to a data set message, before any audit.
enum Asked {
    /// Still building it.
    Building,
    /// Building another, taken up: its session and its message.
    Instead(Box<DatasetSession>, Envelope),
    /// Built: the audit's openings, with their signer.
    Opened(AuditOpeningsMessage, pog_signed::PublicKey),
}

impl Validator {
    /// Proves the storage of the host whose first GPU is `uuid`, where its agent claims some
    /// and `policy` proves it (module doc): the data set sent or polled, audited once built,
    /// then a round, as the round of the fleet's `slot` where it is one (see
    /// [`Validator::challenge_in_slot`]). Returns the record stored, or `None` when there was
    /// nothing to record (no claim, the data set still being built, another proof of the host
    /// running).
    pub async fn prove_storage(
        &self,
        uuid: &str,
        policy: &Policy,
        slot: Option<u64>,
    ) -> Result<Option<StorageRecord>, ValidatorError> {
        let p = &policy.storage;
        p.validate()?;
        let gpu = self
            .records()
            .unblocked(|| self.registry().gpu(uuid))
            .await?
            .ok_or_else(|| ValidatorError::UnknownGpu(uuid.into()))?;
        let Some(claim) = gpu.host_storage else {
            return Ok(None);
        };
        let Ok(shape) = claim.shape() else {
            return Ok(None); // refused at registration; a claim from an older pog
        };
        let Some(mut taken) = self.datasets().take(gpu.agent.as_str()) else {
            return Ok(None);
        };
        let to = Addressee {
            gpu_uuid: gpu.uuid.clone(),
            gpu_bus_id: gpu.bus_id.clone(),
            agent_key: gpu.agent.clone(),
            validator_key: self.public_key(),
        };
        let now = self.records().now_ms();
        // The data set this host keeps for its claim, whichever validator of the fleet sent
        // it: one that takes the host up from the fleet's records walks it (the agent walks a
        // data set a validator it trusts sent, for a round another it trusts signs), rather
        // than have the host rebuild it.
        let current = |d: &StorageDataset| {
            let sent = &d.to;
            (&sent.gpu_uuid, &sent.gpu_bus_id, &sent.agent_key)
                == (&to.gpu_uuid, &to.gpu_bus_id, &to.agent_key)
                && d.shape == shape
        };
        let fresh = |since_ms: u64| now.saturating_sub(since_ms) < p.rebuild_after_ms;
        let on_record = self
            .storage_on_record(uuid, taken.back.is_some() || taken.pace.is_some())
            .await
            .filter(|r| r.agent == gpu.agent);
        let best_step_us = taken
            .pace
            .or_else(|| on_record.as_ref().and_then(|r| r.best_step_us));
        taken.pace = best_step_us;
        let recorded = on_record
            .and_then(|r| kept_of(r, &current))
            .filter(|(_, _, since_ms)| fresh(*since_ms));
        let held = match (taken.back.take(), recorded) {
            // The newer of the data set held here and the one on record.
            (Some(Held::Kept { since_ms, .. }), Some((dataset, root, recorded_since)))
                if recorded_since > since_ms =>
            {
                Held::Kept {
                    dataset,
                    root,
                    since_ms: recorded_since,
                }
            }
            (
                Some(Held::Kept {
                    dataset,
                    root,
                    since_ms,
                }),
                _,
            ) if current(&dataset) && fresh(since_ms) => Held::Kept {
                dataset,
                root,
                since_ms,
            },
            (Some(Held::Building { session, envelope }), _)
                if current(&session.message().dataset) =>
            {
                Held::Building { session, envelope }
            }
            (None, Some((dataset, root, since_ms))) => Held::Kept {
                dataset,
                root,
                since_ms,
            },
            _ => self.new_dataset(to.clone(), claim, p)?,
        };
        let plan = StoragePlan {
            read_us: claim.class.host_read_us(best_step_us),
            steps: p.steps,
            samples: p.samples,
        };
        let mut g = Gathered {
            record_id: hex::encode(random_bytes::<16>()),
            dataset: match &held {
                Held::Kept { dataset, .. } => dataset.clone(),
                Held::Building { session, .. } => session.message().dataset.clone(),
            },
            root: None,
            since_ms: None,
            audit: None,
            round: None,
            expected_ms: plan.expected_ms(),
            best_step_us,
            failure: None,
            secret: random_bytes(),
            bytes: (0, 0),
        };
        let (dataset, root, since_ms) = match held {
            Held::Kept {
                dataset,
                root,
                since_ms,
            } => (dataset, root, since_ms),
            Held::Building { session, envelope } => {
                let (session, polled) = self
                    .poll_build(session, &envelope, &gpu.endpoint, &mut g.bytes)
                    .await;
                let kept = session
                    .as_ref()
                    .and_then(|s| s.kept().map(|(d, root)| (d.clone(), root)));
                match (polled, session) {
                    (Ok(Built::Instead(envelope)), Some(session)) => {
                        tracing::info!(
                            gpu = uuid,
                            dataset = %session.message().id,
                            "taking up the storage data set the agent is building (sent before this validator restarted, or by another of its fleet)"
                        );
                        taken.back = Some(Held::Building { session, envelope });
                        return Ok(None);
                    }
                    (Ok(Built::Building), Some(session)) => {
                        tracing::info!(
                            gpu = uuid,
                            bytes = claim.bytes,
                            "storage data set being built"
                        );
                        taken.back = Some(Held::Building { session, envelope });
                        return Ok(None);
                    }
                    (Ok(Built::Audited(outcome)), _) => {
                        g.audit = Some(outcome);
                        match kept {
                            Some((dataset, root)) => (dataset, root, self.records().now_ms()),
                            None => {
                                return self
                                    .records()
                                    .unblocked(|| self.store_storage((&gpu, slot), claim, p, g))
                                    .await
                                    .map(Some)
                            }
                        }
                    }
                    (polled, session) => {
                        g.failure = polled.err().map(|e| e.failure());
                        // Polled again next round, until its expiry.
                        taken.back = session
                            .filter(|s| self.records().now_ms() <= s.message().expires_at_ms)
                            .map(|session| Held::Building { session, envelope });
                        return self
                            .records()
                            .unblocked(|| self.store_storage((&gpu, slot), claim, p, g))
                            .await
                            .map(Some);
                    }
                }
            }
        };
        g.root = Some(root);
        g.since_ms = Some(since_ms);
        taken.back = Some(Held::Kept {
            dataset: dataset.clone(),
            root,
            since_ms,
        });
        let round = StorageRound {
            dataset,
            root,
            nonce: random_bytes(),
            steps: p.steps,
        };
        match self
            .walk_round(round, &gpu, (&plan, p.regenerated), &mut g)
            .await
        {
            Ok(outcome) => {
                g.best_step_us = outcome.best_step_us(best_step_us);
                taken.pace = g.best_step_us;
                g.round = Some(outcome);
            }
            Err(e) => {
                let failure = e.failure();
                if drops_dataset(&failure) {
                    taken.back = None;
                }
                g.failure = Some(failure);
            }
        }
        self.records()
            .unblocked(|| self.store_storage((&gpu, slot), claim, p, g))
            .await
            .map(Some)
    }

    /// A new data set of the claimed shape for `to`, not yet sent.
    fn new_dataset(
        &self,
        to: Addressee,
        claim: StorageClaim,
        p: &StoragePolicy,
    ) -> Result<Held, ValidatorError> {
        let shape = claim.shape().map_err(|e| {
            ValidatorError::Policy(pog_records::PolicyError::Storage(e.to_string()))
        })?;
        let issued_at_ms = self.records().now_ms();
        let message = DatasetMessage {
            id: hex::encode(random_bytes::<16>()),
            dataset: StorageDataset::new(random_bytes(), to.clone(), shape),
            issued_at_ms,
            expires_at_ms: issued_at_ms.saturating_add(p.build_expiry_ms),
        };
        let envelope = self.records().seal(kind::STORAGE_DATASET, &message)?;
        Ok(Held::Building {
            session: Box::new(DatasetSession::new(
                &message,
                to.agent_key,
                random_bytes(),
                p.audit_samples,
            )),
            envelope,
        })
    }

    /// The latest `storage-record` of the host whose first GPU is `uuid` where this validator
    /// takes it up, read without holding a worker of the rounds ([`RecordStore::unblocked`]):
    /// a fresh validator (nothing `held_here`) takes up the data set and the pace on record; a
    /// fleet's validator reads the record each time, since another may have walked the host
    /// or sent it a new data set since this one last did.
    ///
    /// [`RecordStore::unblocked`]: crate::store::RecordStore::unblocked
    async fn storage_on_record(&self, uuid: &str, held_here: bool) -> Option<StorageRecord> {
        self.records()
            .unblocked(|| {
                let fleet = self.registry().is_postgres();
                (fleet || !held_here)
                    .then(|| self.latest_storage_record(uuid))
                    .flatten()
            })
            .await
    }

    /// The latest `storage-record` of the host whose first GPU is `uuid` (a restarted
    /// validator takes up its data set and pace from it). Blocking.
    fn latest_storage_record(&self, uuid: &str) -> Option<StorageRecord> {
        let json = self
            .registry()
            .latest_record_of_kind(uuid, RecordKind::StorageRound.wire_kind())
            .ok()??;
        let envelope: Envelope = serde_json::from_str(&json).ok()?;
        StorageRecord::read(&envelope.kind, &envelope.body).ok()
    }

    /// Sends (again) the data set message; once the agent says it is built, audits it. The
    /// session comes back (none only when the validator's own check of the audit died).
    async fn poll_build(
        &self,
        mut session: Box<DatasetSession>,
        envelope: &Envelope,
        endpoint: &str,
        bytes: &mut (usize, usize),
    ) -> (Option<Box<DatasetSession>>, Result<Built, ExchangeError>) {
        let (opened, signer) = match self
            .ask_build(&mut session, envelope, endpoint, bytes)
            .await
        {
            Ok(Asked::Opened(opened, signer)) => (opened, signer),
            Ok(Asked::Building) => return (Some(session), Ok(Built::Building)),
            Ok(Asked::Instead(taken, offered)) => {
                return (Some(taken), Ok(Built::Instead(offered)))
            }
            Err(e) => return (Some(session), Err(e)),
        };
        // Regenerating the audited chunks' items takes a core for a while: off the runtime.
        let checked = tokio::task::spawn_blocking(move || {
            let outcome = session.on_audit_openings(&opened, &signer);
            (session, outcome)
        })
        .await;
        match checked {
            Ok((session, outcome)) => (
                Some(session),
                outcome.map(Built::Audited).map_err(ExchangeError::from),
            ),
            Err(_) => (None, Err(ExchangeError::Verifier)),
        }
    }

    /// The data set message sent (again): whether the agent builds it or another that is
    /// taken up instead; once built, its root taken and the audit's openings.
    async fn ask_build(
        &self,
        session: &mut DatasetSession,
        envelope: &Envelope,
        endpoint: &str,
        bytes: &mut (usize, usize),
    ) -> Result<Asked, ExchangeError> {
        let (n, answer) = post_counted(
            self.client(),
            &format!("{endpoint}/v1/storage/dataset"),
            envelope,
            DATASET_ANSWER,
            pog_signed::MAX_MESSAGE_BYTES,
        )
        .await?;
        *bytes = (bytes.0 + n, bytes.1 + answer.len());
        let now = self.records().now_ms();
        let said: Envelope =
            serde_json::from_slice(&answer).map_err(pog_signed::WireError::Envelope)?;
        if said.kind == kind::STORAGE_BUILDING {
            let (building, signer): (BuildingMessage, _) =
                pog_signed::decode(&answer, kind::STORAGE_BUILDING)?;
            if building.instead.is_none() {
                session.on_building(&building, &signer, now)?;
                return Ok(Asked::Building);
            }
            // A data set this validator sent before it restarted, or another of its fleet
            // sent: taken up rather than have the host start over.
            let fleet = self.fleet_keys().await;
            let (taken, offered) = session.take_up(
                &building,
                &signer,
                |k| fleet.contains(k),
                random_bytes(),
                now,
            )?;
            return Ok(Asked::Instead(Box::new(taken), offered));
        }
        let (built, signer): (BuiltMessage, _) = pog_signed::decode(&answer, kind::STORAGE_BUILT)?;
        let audit: AuditMessage = session.on_built(&built, &signer, now)?;
        let (n, answer) = post_counted(
            self.client(),
            &format!("{endpoint}/v1/storage/audit"),
            &self.records().seal(kind::STORAGE_AUDIT, &audit)?,
            DATASET_ANSWER,
            pog_signed::MAX_MESSAGE_BYTES,
        )
        .await?;
        *bytes = (bytes.0 + n, bytes.1 + answer.len());
        let (opened, signer) = pog_signed::decode(&answer, kind::STORAGE_AUDIT_OPENINGS)?;
        Ok(Asked::Opened(opened, signer))
    }

    /// This validator's key and every other validator's on its database (its fleet): the
    /// senders of a data set it takes up. Only its own when the database cannot say. Read
    /// without holding a worker of the rounds ([`RecordStore::unblocked`]).
    ///
    /// [`RecordStore::unblocked`]: crate::store::RecordStore::unblocked
    async fn fleet_keys(&self) -> Vec<pog_signed::PublicKey> {
        let me = self.public_key();
        let seen = self
            .records()
            .unblocked(|| self.registry().validator_keys());
        let seen = seen.await.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "the fleet's validators could not be read: taking up only this validator's own data sets");
            Vec::new()
        });
        let mut keys: Vec<_> = seen
            .iter()
            .filter_map(|key| pog_signed::PublicKey::parse(key).ok())
            .collect();
        keys.push(me);
        keys
    }

    /// Walks `round` on the agent of `gpu` under `plan` (regenerating `regenerated` items
    /// among the opened steps' chunks), timed by the validator's clock.
    async fn walk_round(
        &self,
        round: StorageRound,
        gpu: &crate::registry::RegisteredGpu,
        (plan, regenerated): (&StoragePlan, u32),
        g: &mut Gathered,
    ) -> Result<RoundOutcome, ExchangeError> {
        let expected_ms = plan.expected_ms();
        let wait = Duration::from_millis((2.0 * expected_ms) as u64 + WALK_SLACK_MS);
        let issued_at_ms = self.records().now_ms();
        let message = RoundMessage {
            id: g.record_id.clone(),
            round,
            issued_at_ms,
            expires_at_ms: issued_at_ms.saturating_add(wait.as_millis() as u64),
        };
        let mut session = RoundSession::new(
            &message,
            gpu.agent.clone(),
            expected_ms,
            g.secret,
            (plan.samples, regenerated),
        );
        let envelope = self.records().seal(kind::STORAGE_ROUND, &message)?;
        let sent = Instant::now();
        let (n, answer) = post_counted(
            self.client(),
            &format!("{}/v1/storage/round", gpu.endpoint),
            &envelope,
            wait,
            pog_signed::MAX_MESSAGE_BYTES,
        )
        .await?;
        let arrived_ms = issued_at_ms + sent.elapsed().as_millis() as u64;
        g.bytes = (g.bytes.0 + n, g.bytes.1 + answer.len());
        let (walk, signer): (WalkMessage, _) = pog_signed::decode(&answer, kind::STORAGE_WALK)?;
        let open =
            match session.on_walk(&walk, &signer, arrived_ms, self.round_trip_to(&gpu.uuid))? {
                Ok(open) => open,
                Err(settled) => return Ok(settled),
            };
        let (n, answer) = post_counted(
            self.client(),
            &format!("{}/v1/storage/open", gpu.endpoint),
            &self.records().seal(kind::STORAGE_OPEN, &open)?,
            DATASET_ANSWER,
            pog_signed::MAX_MESSAGE_BYTES,
        )
        .await?;
        g.bytes = (g.bytes.0 + n, g.bytes.1 + answer.len());
        // Checking the openings regenerates items: off the runtime's workers.
        tokio::task::spawn_blocking(move || {
            let (openings, signer): (OpeningsMessage, _) =
                pog_signed::decode(&answer, kind::STORAGE_OPENINGS)?;
            Ok::<_, ExchangeError>(session.on_openings(&openings, &signer)?)
        })
        .await
        .map_err(|_| ExchangeError::Verifier)?
    }

    /// Signs and stores the record of what `g` gathered (the round of the fleet's `slot`,
    /// where it is one).
    fn store_storage(
        &self,
        (gpu, slot): (&crate::registry::RegisteredGpu, Option<u64>),
        claim: StorageClaim,
        p: &StoragePolicy,
        g: Gathered,
    ) -> Result<StorageRecord, ValidatorError> {
        let accepted = g.failure.is_none() && g.round.as_ref().is_some_and(|r| r.accepted);
        let record = StorageRecord {
            version: RECORD_VERSION,
            record_id: format!("storage-{}", g.record_id),
            gpu_uuid: gpu.uuid.clone(),
            agent: gpu.agent.clone(),
            model: gpu.model.clone(),
            simulated: gpu.simulated,
            proves_storage: !gpu.simulated,
            claim,
            policy: p.clone(),
            dataset: g.dataset,
            root: g.root.map(hex::encode),
            dataset_since_ms: g.since_ms,
            audit: g.audit,
            round: g.round,
            expected_ms: g.expected_ms,
            best_step_us: g.best_step_us,
            accepted,
            failure: g.failure,
            spot_check_secret: hex::encode(g.secret),
            bytes_to_agent: g.bytes.0,
            bytes_from_agent: g.bytes.1,
            recorded_at_ms: self.records().now_ms(),
        };
        self.store((&record.record_id, slot), accepted, &record)?;
        Ok(record)
    }
}

/// The data set `latest` kept (the data set, its root and since when), when it has them, its
/// round did not drop the data set, and `current` holds.
fn kept_of(
    latest: StorageRecord,
    current: &dyn Fn(&StorageDataset) -> bool,
) -> Option<(StorageDataset, Hash, u64)> {
    if latest.failure.as_ref().is_some_and(drops_dataset) {
        return None;
    }
    let root: Hash = hex::decode(latest.root.as_deref()?).ok()?.try_into().ok()?;
    (current(&latest.dataset)).then_some((latest.dataset, root, latest.dataset_since_ms?))
}

/// Whether a round that failed so makes the validator send a new data set next round: the
/// agent refused the round (it no longer keeps the data set: a disk replaced, a directory
/// lost), so walking the kept one again would fail every round until its rebuild.
fn drops_dataset(failure: &Failure) -> bool {
    failure.kind == FailureKind::AgentRefused
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;
    use crate::validator::tests::{ran_while_the_registry_was_held, RoundTask};
    use pog_signed::Identity;
    use std::sync::Arc;

    /// The storage round's reads of the registry (the data set on record, the fleet's
    /// validator keys), waiting for the registry (held meanwhile by another thread: a slow
    /// database write), hold no worker of the rounds' runtime: with two workers and two such
    /// reads, another task of that runtime still runs. Both read what the registry holds
    /// once it is free: no record, and only this validator's key.
    #[test]
    fn a_storage_round_waiting_for_the_registry_holds_no_worker_of_the_rounds() {
        let validator = Arc::new(
            Validator::new(Identity::from_seed([9; 32]), Registry::open(None).unwrap()).unwrap(),
        );
        let on_record = |v: Arc<Validator>| -> RoundTask<_> {
            Box::pin(async move { v.storage_on_record("GPU-s", false).await.is_none() })
        };
        let (other_ran, done) = ran_while_the_registry_was_held(
            &validator,
            vec![on_record(validator.clone()), on_record(validator.clone())],
        );
        assert!(
            other_ran,
            "waiting to read the data set on record held the rounds' workers"
        );
        assert_eq!(done, [true, true]);
        let me = validator.public_key();
        let keys =
            |v: Arc<Validator>| -> RoundTask<_> { Box::pin(async move { v.fleet_keys().await }) };
        let (other_ran, done) = ran_while_the_registry_was_held(
            &validator,
            vec![keys(validator.clone()), keys(validator.clone())],
        );
        assert!(
            other_ran,
            "waiting to read the fleet's keys held the rounds' workers"
        );
        assert!(
            done.iter().all(|k| k == std::slice::from_ref(&me)),
            "{done:?}"
        );
    }
}
