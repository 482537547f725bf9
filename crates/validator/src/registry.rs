//! The validator's registry: agents, the GPUs each claims (a UUID belongs to one agent only),
//! and the signed result records. Embedded in SQLite by default ([`Registry::open`]); on a
//! PostgreSQL database that several validators share with `--database postgres://…`
//! ([`Registry::connect`], [`crate::postgres`]). Both keep their schema's version in a
//! `schema_version` table: an older schema is migrated when opened, a newer one (written by a
//! newer pog) is refused with what to do.

use pog_proof::wire::{GpuClaim, HostClaim};
use pog_records::{Change, RECORD_VERSION};
use pog_signed::{GpuUuid, PublicKey};
use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::postgres::PgRegistry;
use crate::registry_model::{
    change_of, check_bar, check_cap, check_version, cut_page, ram_claim, ram_column,
    still_unrecorded, storage_claim, storage_columns, unrecorded_name,
};
pub use crate::registry_model::{
    AbandonedClaim, NewRecord, RegisteredGpu, RegistryError, UnrecordedRelease,
};

/// The registry's tables in SQLite: its schema's first version (a registry from before
/// versions were kept, with or without the `simulated` column, is taken to it).
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS agents (key TEXT PRIMARY KEY, endpoint TEXT NOT NULL, cores INTEGER);
CREATE TABLE IF NOT EXISTS gpus (uuid TEXT PRIMARY KEY, agent TEXT NOT NULL REFERENCES agents(key), model TEXT NOT NULL, bus_id TEXT NOT NULL, simulated INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS released (uuid TEXT NOT NULL, agent TEXT NOT NULL, until_ms INTEGER NOT NULL, PRIMARY KEY (uuid, agent));
CREATE TABLE IF NOT EXISTS records (
    id INTEGER PRIMARY KEY,
    challenge_id TEXT NOT NULL UNIQUE,
    gpu_uuid TEXT NOT NULL,
    accepted INTEGER NOT NULL,
    version INTEGER NOT NULL,
    envelope TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS records_by_gpu ON records (gpu_uuid, id);
";

/// What version 2 adds: the host's claimed cores (a column of `agents`, see `Sqlite::open`),
/// and the fleet's tables ([`crate::fleet`]): each validator's last heartbeat, and each GPU's
/// claim in each slot (by one validator, leased, finished once its round is recorded;
/// `after_record`: the newest record id when claimed).
const FLEET_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS validators (key TEXT PRIMARY KEY, seen_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS slot_claims (slot INTEGER NOT NULL, gpu_uuid TEXT NOT NULL, validator TEXT NOT NULL, lease_until_ms INTEGER NOT NULL, after_record INTEGER NOT NULL, done INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (slot, gpu_uuid));
CREATE INDEX IF NOT EXISTS slot_claims_open ON slot_claims (done, lease_until_ms);
";

/// The schema version of the SQLite registry this pog writes and reads. 3: the agents' token
/// owners (`agents.token_owner`); 4: their hosts' storage claims (`agents.storage_bytes`,
/// `agents.storage_class`); 5: their hosts' RAM claims (`agents.ram_bytes`); 6: a GPU's
/// registration change not yet on record (`gpus.unrecorded`); 7: releases not yet on record
/// (`unrecorded_releases`); 8: each host's fastest genuine set-up per proof shape
/// (`set_up_paces`, [`crate::set_up_pace`]).
pub const SQLITE_SCHEMA_VERSION: i64 = 8;

/// The columns of a registered GPU, for [`gpu_row`].
const GPU_COLUMNS: &str =
    "g.uuid, g.agent, a.endpoint, g.model, g.bus_id, g.simulated, a.cores, a.token_owner, a.storage_bytes, a.storage_class, a.ram_bytes";

/// The registry row of `uuid` as `db` (a connection, or a transaction on one) reads it.
fn gpu_on(db: &Connection, uuid: &str) -> Result<Option<RegisteredGpu>, RegistryError> {
    Ok(db
        .query_row(
            &format!("SELECT {GPU_COLUMNS} FROM gpus g JOIN agents a ON a.key = g.agent WHERE g.uuid = ?1"),
            params![uuid],
            gpu_row,
        )
        .optional()?)
}

/// A registered GPU from a row of (uuid, agent, endpoint, model, bus id, simulated).
fn gpu_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<RegisteredGpu> {
    let typed = |column: usize, e: Box<dyn std::error::Error + Send + Sync>| {
        rusqlite::Error::FromSqlConversionFailure(column, rusqlite::types::Type::Text, e)
    };
    Ok(RegisteredGpu {
        uuid: GpuUuid::new(r.get::<_, String>(0)?).map_err(|e| typed(0, e.into()))?,
        agent: PublicKey::try_from(r.get::<_, String>(1)?).map_err(|e| typed(1, e.into()))?,
        endpoint: r.get(2)?,
        model: r.get(3)?,
        bus_id: r.get(4)?,
        simulated: r.get(5)?,
        host_cores: r.get(6)?,
        token_owner: r
            .get::<_, Option<String>>(7)?
            .map(|t| t.parse())
            .transpose()
            .map_err(|e: pog_signed::BadEvmAddress| typed(7, e.into()))?,
        host_storage: storage_claim(r.get(8)?, r.get(9)?).map_err(|e| typed(8, e.into()))?,
        host_ram: ram_claim(r.get(10)?).map_err(|e| typed(10, e.into()))?,
    })
}

/// The registry, on SQLite or on PostgreSQL.
pub struct Registry {
    db: Db,
    /// Woken after each stored record (the validator's pricing re-quotes the GPU).
    on_record: Option<Arc<tokio::sync::Notify>>,
}

/// Where the registry is kept.
enum Db {
    Sqlite(Sqlite),
    Postgres(PgRegistry),
}

/// The registry in SQLite.
struct Sqlite {
    db: Connection,
    /// Its file; `None` in memory.
    path: Option<PathBuf>,
}

impl Registry {
    /// Opens (creating if needed) the registry at `path`; `None` for an in-memory one.
    pub fn open(path: Option<&Path>) -> Result<Registry, RegistryError> {
        Ok(Registry {
            db: Db::Sqlite(Sqlite::open(path)?),
            on_record: None,
        })
    }

    /// Connects to the registry in the PostgreSQL database at `url` (creating or migrating
    /// its tables: [`PgRegistry::connect`]).
    pub fn connect(url: &str) -> Result<Registry, RegistryError> {
        Ok(Registry {
            db: Db::Postgres(PgRegistry::connect(url)?),
            on_record: None,
        })
    }

    /// The registry `database` names: a `postgres://` (or `postgresql://`) URL, else the
    /// SQLite file at `sqlite_path`.
    pub fn open_or_connect(
        database: Option<&str>,
        sqlite_path: &Path,
    ) -> Result<Registry, RegistryError> {
        match database {
            Some(url) => Registry::connect(url),
            None => Registry::open(Some(sqlite_path)),
        }
    }

    /// Whether it is kept on PostgreSQL.
    pub fn is_postgres(&self) -> bool {
        matches!(self.db, Db::Postgres(_))
    }

    /// Its PostgreSQL database, where it is kept on one (the market keeps the fleet's one
    /// book there too).
    pub(crate) fn postgres(&self) -> Option<&PgRegistry> {
        match &self.db {
            Db::Sqlite(_) => None,
            Db::Postgres(pg) => Some(pg),
        }
    }

    /// Another connection to this registry, for reading only: for SQLite, another connection
    /// to its file (`PRAGMA query_only`; with write-ahead logging its reads see every
    /// committed write and neither wait for the writer nor hold it up), `None` for a registry
    /// in memory, which has one connection only; for PostgreSQL, a handle on the same
    /// connections.
    pub fn reader(&self) -> Result<Option<Registry>, RegistryError> {
        let db = match &self.db {
            Db::Sqlite(s) => match s.reader()? {
                Some(s) => Db::Sqlite(s),
                None => return Ok(None),
            },
            Db::Postgres(pg) => Db::Postgres(pg.clone()),
        };
        Ok(Some(Registry {
            db,
            on_record: None,
        }))
    }

    /// Wakes `notify` after every record stored from now on (one stored wake-up when nobody
    /// waits, so none is lost).
    pub fn notify_on_record(&mut self, notify: Arc<tokio::sync::Notify>) {
        self.on_record = Some(notify);
    }

    /// Registers an agent (its endpoint, and its host's claimed cores and token owner) and its GPUs, all or
    /// nothing, at time `now_ms`, and says what changed for each GPU. A GPU another agent holds, or one released from this agent whose bar has
    /// not run out, refuses the whole registration.
    pub fn register(
        &mut self,
        agent: &PublicKey,
        (endpoint, host): (&str, Option<HostClaim>),
        gpus: &[GpuClaim],
        now_ms: u64,
        max_gpus: usize,
    ) -> Result<Vec<Change>, RegistryError> {
        match &mut self.db {
            Db::Sqlite(s) => s.register(agent, (endpoint, host), gpus, now_ms, max_gpus),
            Db::Postgres(pg) => {
                let (agent, endpoint, gpus) = (agent.clone(), endpoint.to_owned(), gpus.to_vec());
                pg.block(|pg| async move {
                    pg.register(&agent, (&endpoint, host), &gpus, now_ms, max_gpus)
                        .await
                })
            }
        }
    }

    /// Notes that the registration changes [`Registry::register`] reported for `uuids` are on
    /// record. Until then a registration of the same claim reports the change again: the
    /// registry's write and the record's are two, and a record lost between them (the
    /// database gone, its disk full) is written at the agent's next registration.
    pub fn registrations_recorded(&mut self, uuids: &[String]) -> Result<(), RegistryError> {
        if uuids.is_empty() {
            return Ok(());
        }
        match &mut self.db {
            Db::Sqlite(s) => {
                let tx = s.write()?;
                {
                    let mut clear =
                        tx.prepare_cached("UPDATE gpus SET unrecorded = NULL WHERE uuid = ?1")?;
                    for uuid in uuids {
                        clear.execute(params![uuid])?;
                    }
                }
                tx.commit()?;
                Ok(())
            }
            Db::Postgres(pg) => {
                let uuids = uuids.to_vec();
                pg.block(|pg| async move { pg.registrations_recorded(&uuids).await })
            }
        }
    }

    /// Takes a GPU off the registry at `now_ms` for `reason` (it failed or was unreachable too
    /// often); its agent may not claim it again before `barred_until_ms`. In the same
    /// transaction the release's record is kept as unrecorded ([`Registry::unrecorded_releases`])
    /// until [`Registry::release_recorded`]: a record lost after the commit is written by the
    /// next pass instead of never. Returns the released entry, if any.
    pub fn release(
        &mut self,
        uuid: &str,
        barred_until_ms: u64,
        (reason, now_ms): (&str, u64),
    ) -> Result<Option<RegisteredGpu>, RegistryError> {
        match &mut self.db {
            Db::Sqlite(s) => s.release(uuid, barred_until_ms, (reason, now_ms)),
            Db::Postgres(pg) => {
                let (uuid, reason) = (uuid.to_owned(), reason.to_owned());
                pg.block(
                    |pg| async move { pg.release(&uuid, barred_until_ms, (&reason, now_ms)).await },
                )
            }
        }
    }

    /// The releases whose records are not yet on record, oldest first (a row whose record does
    /// not parse is left kept and said in the log: [`UnrecordedRelease::readable`]).
    pub fn unrecorded_releases(&self) -> Result<Vec<UnrecordedRelease>, RegistryError> {
        match &self.db {
            Db::Sqlite(s) => s.unrecorded_releases(),
            Db::Postgres(pg) => pg.block(|pg| async move { pg.unrecorded_releases().await }),
        }
    }

    /// Notes the release kept under `record_id` on record: no pass writes it again.
    pub fn release_recorded(&mut self, record_id: &str) -> Result<(), RegistryError> {
        match &mut self.db {
            Db::Sqlite(s) => {
                s.db.execute(
                    "DELETE FROM unrecorded_releases WHERE record_id = ?1",
                    params![record_id],
                )?;
                Ok(())
            }
            Db::Postgres(pg) => {
                let record_id = record_id.to_owned();
                pg.block(|pg| async move { pg.release_recorded(&record_id).await })
            }
        }
    }

    /// A page of registered GPUs, by UUID: at most `limit` after `after` ("" from the start).
    pub fn gpus(&self, after: &str, limit: usize) -> Result<Vec<RegisteredGpu>, RegistryError> {
        match &self.db {
            Db::Sqlite(s) => s.gpus(after, limit),
            Db::Postgres(pg) => {
                let after = after.to_owned();
                pg.block(|pg| async move { pg.gpus(&after, limit).await })
            }
        }
    }

    /// The GPU with this UUID and its agent.
    pub fn gpu(&self, uuid: &str) -> Result<Option<RegisteredGpu>, RegistryError> {
        match &self.db {
            Db::Sqlite(s) => s.gpu(uuid),
            Db::Postgres(pg) => {
                let uuid = uuid.to_owned();
                pg.block(|pg| async move { pg.gpu(&uuid).await })
            }
        }
    }

    /// The registry rows of those of `uuids` that are registered (one query on PostgreSQL):
    /// what a round reads of its GPUs, once, at its start.
    pub fn gpus_named(&self, uuids: &[String]) -> Result<Vec<RegisteredGpu>, RegistryError> {
        match &self.db {
            Db::Sqlite(s) => uuids.iter().filter_map(|u| s.gpu(u).transpose()).collect(),
            Db::Postgres(pg) => {
                let uuids = uuids.to_vec();
                pg.block(|pg| async move { pg.gpus_named(&uuids).await })
            }
        }
    }

    /// The database server's clock, ms since the Unix epoch: what the fleet's validators check
    /// their own clocks against; `None` for SQLite (no server).
    pub fn server_time_ms(&self) -> Result<Option<u64>, RegistryError> {
        match &self.db {
            Db::Sqlite(_) => Ok(None),
            Db::Postgres(pg) => pg
                .block(|pg| async move { pg.server_time_ms().await })
                .map(Some),
        }
    }

    /// Notes `validator` alive at `now_ms`; every validator's key with when it was last seen.
    pub fn heartbeat(
        &mut self,
        validator: &str,
        now_ms: u64,
    ) -> Result<Vec<(String, u64)>, RegistryError> {
        match &mut self.db {
            Db::Sqlite(s) => s.heartbeat(validator, now_ms),
            Db::Postgres(pg) => {
                let validator = validator.to_owned();
                pg.block(|pg| async move { pg.heartbeat(&validator, now_ms).await })
            }
        }
    }

    /// The fastest genuine set-up on record for a proof shape of one host
    /// ([`crate::set_up_pace::SetUpPaces::key`]), ms.
    pub fn fastest_set_up(&self, key: &str) -> Result<Option<f64>, RegistryError> {
        match &self.db {
            Db::Sqlite(s) => Ok(s
                .db
                .query_row(
                    "SELECT fastest_ms FROM set_up_paces WHERE key = ?1",
                    params![key],
                    |r| r.get(0),
                )
                .optional()?),
            Db::Postgres(pg) => {
                let key = key.to_owned();
                pg.block(|pg| async move { pg.fastest_set_up(&key).await })
            }
        }
    }

    /// Notes an accepted set-up of `ms` for `key`: kept when it is the fastest so far.
    pub fn note_set_up(&mut self, key: &str, ms: f64) -> Result<(), RegistryError> {
        match &mut self.db {
            Db::Sqlite(s) => {
                s.db.execute(
                    "INSERT INTO set_up_paces (key, fastest_ms) VALUES (?1, ?2) \
                     ON CONFLICT(key) DO UPDATE SET fastest_ms = MIN(fastest_ms, ?2)",
                    params![key, ms],
                )?;
                Ok(())
            }
            Db::Postgres(pg) => {
                let key = key.to_owned();
                pg.block(|pg| async move { pg.note_set_up(&key, ms).await })
            }
        }
    }

    /// The key of every validator that has shared this database (its fleet; one alone has
    /// only its own once its schedule has run), read only.
    pub fn validator_keys(&self) -> Result<Vec<String>, RegistryError> {
        match &self.db {
            Db::Sqlite(s) => s.validator_keys(),
            Db::Postgres(pg) => pg.block(|pg| async move { pg.validator_keys().await }),
        }
    }

    /// Claims `uuids` for `validator` in `slot`, leased until `lease_until_ms`: the GPUs it
    /// holds in the slot now (new claims and its own earlier ones); one another validator
    /// claimed first stays that validator's.
    pub fn claim(
        &mut self,
        (slot, validator): (u64, &str),
        uuids: &[String],
        lease_until_ms: u64,
    ) -> Result<Vec<String>, RegistryError> {
        match &mut self.db {
            Db::Sqlite(s) => s.claim((slot, validator), uuids, lease_until_ms),
            Db::Postgres(pg) => {
                let (validator, uuids) = (validator.to_owned(), uuids.to_vec());
                pg.block(
                    |pg| async move { pg.claim((slot, &validator), &uuids, lease_until_ms).await },
                )
            }
        }
    }

    /// Marks the claims of `uuids` in `slot` finished (their rounds are recorded): one
    /// statement on PostgreSQL, one transaction on SQLite.
    pub fn finish_claims(&mut self, slot: u64, uuids: &[String]) -> Result<(), RegistryError> {
        match &mut self.db {
            Db::Sqlite(s) => {
                let tx = s.write()?;
                {
                    let mut finish = tx.prepare_cached(
                        "UPDATE slot_claims SET done = 1 WHERE slot = ?1 AND gpu_uuid = ?2",
                    )?;
                    for uuid in uuids {
                        finish.execute(params![slot as i64, uuid])?;
                    }
                }
                tx.commit()?;
                Ok(())
            }
            Db::Postgres(pg) => {
                let uuids = uuids.to_vec();
                pg.block(|pg| async move { pg.finish_claims(slot, &uuids).await })
            }
        }
    }

    /// Claims unfinished at `now_ms` with their lease run out and no record of their GPU
    /// stored since they were made.
    pub fn abandoned_claims(&self, now_ms: u64) -> Result<Vec<AbandonedClaim>, RegistryError> {
        match &self.db {
            Db::Sqlite(s) => s.abandoned_claims(now_ms),
            Db::Postgres(pg) => pg.block(|pg| async move { pg.abandoned_claims(now_ms).await }),
        }
    }

    /// Marks the claim of `uuid` in `slot` unfinished again (its fleet-missed record could not
    /// be stored: a later sweep stores it).
    pub fn reopen_claim(&mut self, slot: u64, uuid: &str) -> Result<(), RegistryError> {
        match &mut self.db {
            Db::Sqlite(s) => {
                s.db.execute(
                    "UPDATE slot_claims SET done = 0 WHERE slot = ?1 AND gpu_uuid = ?2",
                    params![slot as i64, uuid],
                )?;
                Ok(())
            }
            Db::Postgres(pg) => {
                let uuid = uuid.to_owned();
                pg.block(|pg| async move { pg.reopen_claim(slot, &uuid).await })
            }
        }
    }

    /// Marks the claim of `uuid` in `slot` finished: true for the one call that did (a sweeper
    /// that gets false leaves the claim to the one that got true).
    pub fn settle_claim(&mut self, slot: u64, uuid: &str) -> Result<bool, RegistryError> {
        match &mut self.db {
            Db::Sqlite(s) => s.settle_claim(slot, uuid),
            Db::Postgres(pg) => {
                let uuid = uuid.to_owned();
                pg.block(|pg| async move { pg.settle_claim(slot, &uuid).await })
            }
        }
    }

    /// Every registered GPU's UUID, grouped by agent.
    pub fn gpus_by_agent(&self) -> Result<Vec<(String, Vec<String>)>, RegistryError> {
        match &self.db {
            Db::Sqlite(s) => s.gpus_by_agent(),
            Db::Postgres(pg) => pg.block(|pg| async move { pg.gpus_by_agent().await }),
        }
    }

    /// The GPU that carries `agent`'s host proofs (CPU, storage): its first registered GPU
    /// by UUID, as the schedule picks it; `None` for an agent with no GPU registered.
    pub fn host_anchor(&self, agent: &str) -> Result<Option<String>, RegistryError> {
        match &self.db {
            Db::Sqlite(s) => s.host_anchor(agent),
            Db::Postgres(pg) => {
                let agent = agent.to_owned();
                pg.block(|pg| async move { pg.host_anchor(&agent).await })
            }
        }
    }

    /// Stores a signed result record; a challenge is recorded once.
    pub fn record(
        &mut self,
        challenge_id: &str,
        gpu_uuid: &str,
        accepted: bool,
        envelope_json: &str,
    ) -> Result<(), RegistryError> {
        self.record_logged(
            (challenge_id, gpu_uuid),
            accepted,
            envelope_json,
            (None, None),
        )
        .map(|_| ())
    }

    /// [`Registry::record`], and with `log_entry` (an encoded [`pog_ledger::entry::Entry`]),
    /// the entry sequenced into the fleet's log in the same transaction: its log index. Only
    /// a registry on PostgreSQL keeps a fleet's log. A record of a round of the fleet's
    /// `slot` finishes this validator's claim of that slot in the same transaction, and is
    /// refused ([`RegistryError::Fenced`]) where the claim was settled as the fleet's miss
    /// meanwhile (on PostgreSQL; a lone validator's claims on SQLite fence nothing).
    pub fn record_logged(
        &mut self,
        (challenge_id, gpu_uuid): (&str, &str),
        accepted: bool,
        envelope_json: &str,
        (log_entry, slot): (Option<&[u8]>, Option<u64>),
    ) -> Result<Option<u64>, RegistryError> {
        let index = match &mut self.db {
            Db::Sqlite(_) if log_entry.is_some() => return Err(RegistryError::FleetLogOnSqlite),
            Db::Sqlite(s) => {
                s.record(challenge_id, gpu_uuid, accepted, envelope_json)?;
                None
            }
            Db::Postgres(pg) => {
                let (id, uuid, json) = (
                    challenge_id.to_owned(),
                    gpu_uuid.to_owned(),
                    envelope_json.to_owned(),
                );
                let entry = log_entry.map(<[u8]>::to_vec);
                pg.block(|pg| async move {
                    pg.record((&id, &uuid), accepted, &json, (entry.as_deref(), slot))
                        .await
                })?
            }
        };
        if let Some(notify) = &self.on_record {
            notify.notify_one();
        }
        Ok(index)
    }

    /// Takes `value` as the fleet's setting `name` (the slots' length, which every validator of
    /// a fleet must share: one validator on another slot length would challenge its GPUs at
    /// other instants, reopening the cross-validator Sybil hole the shared slots close), or with
    /// `replace` makes it the fleet's. The fleet's other value when it has another; `None` when
    /// they agree, and always alone (SQLite: one validator).
    pub fn adopt_fleet_setting(
        &mut self,
        name: &str,
        value: &str,
        replace: bool,
    ) -> Result<Option<String>, RegistryError> {
        match &mut self.db {
            Db::Sqlite(_) => Ok(None),
            Db::Postgres(pg) => {
                let (name, value) = (name.to_owned(), value.to_owned());
                pg.block(|pg| async move { pg.adopt_fleet_setting(&name, &value, replace).await })
            }
        }
    }

    /// The fleet's log in this registry's database; `None` on SQLite (one validator, whose
    /// log is its own).
    pub fn fleet_log(&self) -> Option<crate::fleet_log::FleetLog> {
        match &self.db {
            Db::Sqlite(_) => None,
            Db::Postgres(pg) => Some(crate::fleet_log::FleetLog::new(pg.clone())),
        }
    }

    /// Whether a record is stored under `challenge_id` (a report's content id, say).
    pub fn has_record(&self, challenge_id: &str) -> Result<bool, RegistryError> {
        match &self.db {
            Db::Sqlite(s) => s.has_record(challenge_id),
            Db::Postgres(pg) => {
                let id = challenge_id.to_owned();
                pg.block(|pg| async move { pg.has_record(&id).await })
            }
        }
    }

    /// Records stored after row `after` (0: from the start), of every GPU, oldest first: at
    /// most `limit` of them, each as where it is and what kind it is.
    pub fn records_since(&self, after: i64, limit: usize) -> Result<Vec<NewRecord>, RegistryError> {
        match &self.db {
            Db::Sqlite(s) => s.records_since(after, limit),
            Db::Postgres(pg) => pg.block(|pg| async move { pg.records_since(after, limit).await }),
        }
    }

    /// A GPU's latest `limit` records other than registration events and its agent's reports
    /// (row id, envelope JSON), oldest first: the validator's rounds and health records.
    pub fn latest_records(
        &self,
        gpu_uuid: &str,
        limit: usize,
    ) -> Result<Vec<(i64, String)>, RegistryError> {
        match &self.db {
            Db::Sqlite(s) => s.latest_records(gpu_uuid, limit),
            Db::Postgres(pg) => {
                let uuid = gpu_uuid.to_owned();
                pg.block(|pg| async move { pg.latest_records(&uuid, limit).await })
            }
        }
    }

    /// The envelope JSON of `gpu_uuid`'s latest record of the wire kind `kind`, if any: one
    /// row, however many records of other kinds came since.
    pub fn latest_record_of_kind(
        &self,
        gpu_uuid: &str,
        kind: &str,
    ) -> Result<Option<String>, RegistryError> {
        match &self.db {
            Db::Sqlite(s) => Ok(s
                .db
                .query_row(
                    "SELECT envelope FROM records WHERE gpu_uuid = ?1 AND json_valid(envelope) \
                     AND json_extract(envelope, '$.kind') = ?2 ORDER BY id DESC LIMIT 1",
                    params![gpu_uuid, kind],
                    |r| r.get(0),
                )
                .optional()?),
            Db::Postgres(pg) => {
                let (uuid, kind) = (gpu_uuid.to_owned(), kind.to_owned());
                pg.block(|pg| async move { pg.latest_record_of_kind(&uuid, &kind).await })
            }
        }
    }

    /// One page of a GPU's stored records (row id, envelope JSON), oldest first: at most
    /// `limit` of those after row `after` (0: from the start).
    pub fn records(
        &self,
        gpu_uuid: &str,
        after: i64,
        limit: usize,
    ) -> Result<Vec<(i64, String)>, RegistryError> {
        Ok(self.records_within(gpu_uuid, after, limit, usize::MAX)?.0)
    }

    /// [`Registry::records`], stopping before the envelopes' JSON would pass `max_bytes` (the
    /// first record is always taken); true when it stopped for that, so that more may follow.
    pub fn records_within(
        &self,
        gpu_uuid: &str,
        after: i64,
        limit: usize,
        max_bytes: usize,
    ) -> Result<(Vec<(i64, String)>, bool), RegistryError> {
        match &self.db {
            Db::Sqlite(s) => s.records_within(gpu_uuid, after, limit, max_bytes),
            Db::Postgres(pg) => {
                let uuid = gpu_uuid.to_owned();
                pg.block(
                    |pg| async move { pg.records_within(&uuid, after, limit, max_bytes).await },
                )
            }
        }
    }
}

/// The SQLite half of [`Registry`]'s methods (each documented there).
impl Sqlite {
    fn open(path: Option<&Path>) -> Result<Sqlite, RegistryError> {
        let db = match path {
            Some(p) => Connection::open(p)?,
            None => Connection::open_in_memory()?,
        };
        // Write-ahead logging: a record costs one append to the log, and readers (the API)
        // are not blocked by it. `synchronous = NORMAL` keeps every committed record through a
        // crash of pog; only a power loss can take the last commits before a checkpoint.
        db.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;")?;
        db.execute_batch("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")?;
        let found: i64 = db.query_row(
            "SELECT COALESCE(MAX(version), 0) FROM schema_version",
            [],
            |r| r.get(0),
        )?;
        check_version(found, SQLITE_SCHEMA_VERSION)?;
        if found < 1 {
            db.execute_batch(SCHEMA)?;
            // Registries made before GPUs could be simulated lack the column.
            let has_simulated: bool = db.query_row(
                "SELECT COUNT(*) FROM pragma_table_info('gpus') WHERE name = 'simulated'",
                [],
                |r| r.get::<_, i64>(0).map(|n| n > 0),
            )?;
            if !has_simulated {
                db.execute_batch(
                    "ALTER TABLE gpus ADD COLUMN simulated INTEGER NOT NULL DEFAULT 0",
                )?;
            }
        }
        if found < 2 {
            // Version 2: the host's claimed cores, beside its agent (none claimed before).
            let has_cores: bool = db.query_row(
                "SELECT COUNT(*) FROM pragma_table_info('agents') WHERE name = 'cores'",
                [],
                |r| r.get::<_, i64>(0).map(|n| n > 0),
            )?;
            if !has_cores {
                db.execute_batch("ALTER TABLE agents ADD COLUMN cores INTEGER")?;
            }
            db.execute_batch(FLEET_SCHEMA)?;
            db.execute_batch(
                "DELETE FROM schema_version; INSERT INTO schema_version (version) VALUES (2);",
            )?;
        }
        if found < 3 {
            // Version 3: the address each agent names to hold its GPUs' tokens.
            db.execute_batch(
                "ALTER TABLE agents ADD COLUMN token_owner TEXT;
                 DELETE FROM schema_version; INSERT INTO schema_version (version) VALUES (3);",
            )?;
        }
        if found < 4 {
            // Version 4: the storage each agent claims for its host (none before).
            db.execute_batch(
                "ALTER TABLE agents ADD COLUMN storage_bytes INTEGER;
                 ALTER TABLE agents ADD COLUMN storage_class TEXT;
                 DELETE FROM schema_version; INSERT INTO schema_version (version) VALUES (4);",
            )?;
        }
        if found < 5 {
            // Version 5: the RAM each agent claims for its host (none before).
            db.execute_batch(
                "ALTER TABLE agents ADD COLUMN ram_bytes INTEGER;
                 DELETE FROM schema_version; INSERT INTO schema_version (version) VALUES (5);",
            )?;
        }
        if found < 6 {
            // Version 6: a GPU's registration change not yet on record (see
            // `Registry::registrations_recorded`); the GPUs before it are on record.
            db.execute_batch(
                "ALTER TABLE gpus ADD COLUMN unrecorded TEXT;
                 DELETE FROM schema_version; INSERT INTO schema_version (version) VALUES (6);",
            )?;
        }
        if found < 7 {
            // Version 7: releases whose records are not yet on record (see
            // `Registry::release`); the releases before it are on record, or lost for good.
            db.execute_batch(
                "CREATE TABLE unrecorded_releases (record_id TEXT PRIMARY KEY, gpu_uuid TEXT NOT NULL, at_ms INTEGER NOT NULL, record TEXT NOT NULL);
                 DELETE FROM schema_version; INSERT INTO schema_version (version) VALUES (7);",
            )?;
        }
        if found < 8 {
            // Version 8: the fastest genuine set-up of each host and proof shape, kept across
            // restarts and shared by the validators on the database.
            db.execute_batch(
                "CREATE TABLE set_up_paces (key TEXT PRIMARY KEY, fastest_ms REAL NOT NULL);
                 DELETE FROM schema_version; INSERT INTO schema_version (version) VALUES (8);",
            )?;
        }
        Ok(Sqlite {
            db,
            path: path.map(Path::to_path_buf),
        })
    }

    /// A write transaction that holds the file's write lock from its start (`BEGIN
    /// IMMEDIATE`), so that it waits out another writer on the busy timeout. A deferred
    /// transaction that reads and then writes cannot: its upgrade to a writer, with another
    /// writer holding the lock or having committed since it read, is refused at once
    /// ("database is locked").
    fn write(&mut self) -> Result<Transaction<'_>, RegistryError> {
        Ok(self
            .db
            .transaction_with_behavior(TransactionBehavior::Immediate)?)
    }

    fn reader(&self) -> Result<Option<Sqlite>, RegistryError> {
        let Some(path) = &self.path else {
            return Ok(None);
        };
        let db = Connection::open(path)?;
        db.execute_batch("PRAGMA query_only = ON;")?;
        Ok(Some(Sqlite { db, path: None }))
    }

    fn register(
        &mut self,
        agent: &PublicKey,
        (endpoint, host): (&str, Option<HostClaim>),
        gpus: &[GpuClaim],
        now_ms: u64,
        max_gpus: usize,
    ) -> Result<Vec<Change>, RegistryError> {
        let agent = agent.as_str();
        let tx = self.write()?;
        let old_endpoint: Option<String> = tx
            .query_row(
                "SELECT endpoint FROM agents WHERE key = ?1",
                params![agent],
                |r| r.get(0),
            )
            .optional()?;
        let moved = old_endpoint.is_some_and(|old| old != endpoint);
        let (cores, token_owner) = (
            host.map(|h| h.cores),
            host.and_then(|h| h.token_owner).map(|a| a.to_string()),
        );
        let (storage_bytes, storage_class) = storage_columns(host.as_ref());
        let ram_bytes = ram_column(host.as_ref());
        tx.execute("INSERT INTO agents (key, endpoint, cores, token_owner, storage_bytes, storage_class, ram_bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT(key) DO UPDATE SET endpoint = ?2, cores = ?3, token_owner = ?4, storage_bytes = ?5, storage_class = ?6, ram_bytes = ?7", params![agent, endpoint, cores, token_owner, storage_bytes, storage_class, ram_bytes])?;
        let mut changes = Vec::with_capacity(gpus.len());
        for claim in gpus {
            let GpuClaim {
                uuid,
                model,
                bus_id,
                simulated,
            } = claim;
            let barred: Option<i64> = tx
                .query_row(
                    "SELECT until_ms FROM released WHERE uuid = ?1 AND agent = ?2",
                    params![uuid.as_str(), agent],
                    |r| r.get(0),
                )
                .optional()?;
            check_bar(uuid, barred, now_ms)?;
            let current: Option<(String, String, String, bool, Option<String>)> = tx
                .query_row(
                    "SELECT agent, model, bus_id, simulated, unrecorded FROM gpus WHERE uuid = ?1",
                    params![uuid.as_str()],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
                )
                .optional()?;
            let change = match current {
                Some((owner, ..)) if owner != agent => {
                    return Err(RegistryError::ClaimedElsewhere {
                        uuid: uuid.to_string(),
                        owner,
                    })
                }
                Some((_, old_model, old_bus, old_simulated, unrecorded)) => {
                    let change = still_unrecorded(
                        change_of((&old_model, &old_bus, old_simulated), claim, moved),
                        unrecorded.as_deref(),
                    );
                    tx.execute(
                        "UPDATE gpus SET model = ?2, bus_id = ?3, simulated = ?4, unrecorded = ?5 WHERE uuid = ?1",
                        params![uuid.as_str(), model, bus_id, simulated, unrecorded_name(change)],
                    )?;
                    change
                }
                None => {
                    tx.execute(
                        "INSERT INTO gpus (uuid, agent, model, bus_id, simulated, unrecorded) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                        params![uuid.as_str(), agent, model, bus_id, simulated, unrecorded_name(Change::New)],
                    )?;
                    Change::New
                }
            };
            changes.push(change);
        }
        let would_hold: i64 = tx.query_row(
            "SELECT COUNT(*) FROM gpus WHERE agent = ?1",
            params![agent],
            |r| r.get(0),
        )?;
        check_cap(would_hold, max_gpus)?;
        tx.commit()?;
        Ok(changes)
    }

    fn release(
        &mut self,
        uuid: &str,
        barred_until_ms: u64,
        (reason, now_ms): (&str, u64),
    ) -> Result<Option<RegisteredGpu>, RegistryError> {
        let tx = self.write()?;
        let Some(gpu) = gpu_on(&tx, uuid)? else {
            return Ok(None);
        };
        tx.execute("DELETE FROM gpus WHERE uuid = ?1", params![uuid])?;
        tx.execute(
            "INSERT INTO released (uuid, agent, until_ms) VALUES (?1, ?2, ?3) ON CONFLICT(uuid, agent) DO UPDATE SET until_ms = ?3",
            params![uuid, gpu.agent.as_str(), barred_until_ms as i64],
        )?;
        let release = UnrecordedRelease::of(&gpu, reason, now_ms);
        tx.execute(
            "INSERT INTO unrecorded_releases (record_id, gpu_uuid, at_ms, record) VALUES (?1, ?2, ?3, ?4)",
            params![release.record_id, uuid, now_ms as i64, release.record_json()],
        )?;
        tx.commit()?;
        Ok(Some(gpu))
    }

    fn unrecorded_releases(&self) -> Result<Vec<UnrecordedRelease>, RegistryError> {
        let mut stmt = self.db.prepare(
            "SELECT record_id, record FROM unrecorded_releases ORDER BY at_ms, record_id",
        )?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get::<_, String>(1)?)))?;
        let rows: Vec<(String, String)> = rows.collect::<Result<_, _>>()?;
        Ok(rows
            .into_iter()
            .filter_map(|(id, json)| UnrecordedRelease::readable(id, &json))
            .collect())
    }

    fn gpus(&self, after: &str, limit: usize) -> Result<Vec<RegisteredGpu>, RegistryError> {
        let mut stmt = self.db.prepare(&format!(
            "SELECT {GPU_COLUMNS} FROM gpus g JOIN agents a ON a.key = g.agent WHERE g.uuid > ?1 ORDER BY g.uuid LIMIT ?2"
        ))?;
        let rows = stmt.query_map(params![after, limit as i64], gpu_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn gpu(&self, uuid: &str) -> Result<Option<RegisteredGpu>, RegistryError> {
        gpu_on(&self.db, uuid)
    }

    fn heartbeat(
        &mut self,
        validator: &str,
        now_ms: u64,
    ) -> Result<Vec<(String, u64)>, RegistryError> {
        self.db.execute(
            "INSERT INTO validators (key, seen_ms) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET seen_ms = MAX(seen_ms, ?2)",
            params![validator, now_ms as i64],
        )?;
        let mut stmt = self.db.prepare("SELECT key, seen_ms FROM validators")?;
        let rows = stmt.query_map([], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?.max(0) as u64))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn validator_keys(&self) -> Result<Vec<String>, RegistryError> {
        let mut stmt = self.db.prepare("SELECT key FROM validators")?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn claim(
        &mut self,
        (slot, validator): (u64, &str),
        uuids: &[String],
        lease_until_ms: u64,
    ) -> Result<Vec<String>, RegistryError> {
        let tx = self.write()?;
        let newest: i64 =
            tx.query_row("SELECT COALESCE(MAX(id), 0) FROM records", [], |r| r.get(0))?;
        let mut held = Vec::with_capacity(uuids.len());
        for uuid in uuids {
            tx.execute(
                "INSERT INTO slot_claims (slot, gpu_uuid, validator, lease_until_ms, after_record) VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT(slot, gpu_uuid) DO NOTHING",
                params![slot as i64, uuid, validator, lease_until_ms as i64, newest],
            )?;
            let owner: String = tx.query_row(
                "SELECT validator FROM slot_claims WHERE slot = ?1 AND gpu_uuid = ?2",
                params![slot as i64, uuid],
                |r| r.get(0),
            )?;
            if owner == validator {
                held.push(uuid.clone());
            }
        }
        tx.commit()?;
        Ok(held)
    }

    fn abandoned_claims(&self, now_ms: u64) -> Result<Vec<AbandonedClaim>, RegistryError> {
        let mut stmt = self.db.prepare(
            "SELECT c.slot, c.gpu_uuid, c.validator FROM slot_claims c WHERE c.done = 0 AND c.lease_until_ms < ?1 AND NOT EXISTS (SELECT 1 FROM records r WHERE r.gpu_uuid = c.gpu_uuid AND r.id > c.after_record) ORDER BY c.slot, c.gpu_uuid",
        )?;
        let rows = stmt.query_map(params![now_ms as i64], |r| {
            Ok(AbandonedClaim {
                slot: r.get::<_, i64>(0)?.max(0) as u64,
                gpu_uuid: r.get(1)?,
                validator: r.get(2)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn settle_claim(&mut self, slot: u64, uuid: &str) -> Result<bool, RegistryError> {
        let changed = self.db.execute(
            "UPDATE slot_claims SET done = 1 WHERE slot = ?1 AND gpu_uuid = ?2 AND done = 0",
            params![slot as i64, uuid],
        )?;
        Ok(changed == 1)
    }

    fn gpus_by_agent(&self) -> Result<Vec<(String, Vec<String>)>, RegistryError> {
        let mut stmt = self
            .db
            .prepare("SELECT agent, uuid FROM gpus ORDER BY agent, uuid")?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
        let mut groups: Vec<(String, Vec<String>)> = Vec::new();
        for row in rows {
            let (agent, uuid) = row?;
            match groups.last_mut() {
                Some((last, uuids)) if *last == agent => uuids.push(uuid),
                _ => groups.push((agent, vec![uuid])),
            }
        }
        Ok(groups)
    }

    fn host_anchor(&self, agent: &str) -> Result<Option<String>, RegistryError> {
        Ok(self.db.query_row(
            "SELECT MIN(uuid) FROM gpus WHERE agent = ?1",
            params![agent],
            |r| r.get::<_, Option<String>>(0),
        )?)
    }

    fn record(
        &mut self,
        challenge_id: &str,
        gpu_uuid: &str,
        accepted: bool,
        envelope_json: &str,
    ) -> Result<(), RegistryError> {
        self.db.execute(
            "INSERT INTO records (challenge_id, gpu_uuid, accepted, version, envelope) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![challenge_id, gpu_uuid, accepted, RECORD_VERSION, envelope_json],
        )?;
        Ok(())
    }

    fn has_record(&self, challenge_id: &str) -> Result<bool, RegistryError> {
        Ok(self
            .db
            .query_row(
                "SELECT 1 FROM records WHERE challenge_id = ?1",
                params![challenge_id],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
    }

    fn records_since(&self, after: i64, limit: usize) -> Result<Vec<NewRecord>, RegistryError> {
        let mut stmt = self.db.prepare(
            "SELECT id, gpu_uuid, CASE WHEN json_valid(envelope) THEN json_extract(envelope, '$.kind') END \
             FROM records WHERE id > ?1 ORDER BY id LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![after, limit as i64], |r| {
            Ok(NewRecord {
                id: r.get(0)?,
                gpu_uuid: r.get(1)?,
                kind: r.get::<_, Option<String>>(2).ok().flatten(),
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn latest_records(
        &self,
        gpu_uuid: &str,
        limit: usize,
    ) -> Result<Vec<(i64, String)>, RegistryError> {
        let mut stmt = self.db.prepare(
            "SELECT id, envelope FROM records WHERE gpu_uuid = ?1 AND challenge_id NOT LIKE 'registration-%' AND challenge_id NOT LIKE 'report-%' ORDER BY id DESC LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![gpu_uuid, limit as i64], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?;
        let mut rows: Vec<(i64, String)> = rows.collect::<Result<_, _>>()?;
        rows.reverse();
        Ok(rows)
    }

    fn records_within(
        &self,
        gpu_uuid: &str,
        after: i64,
        limit: usize,
        max_bytes: usize,
    ) -> Result<(Vec<(i64, String)>, bool), RegistryError> {
        let mut stmt = self.db.prepare(
            "SELECT id, envelope FROM records WHERE gpu_uuid = ?1 AND id > ?2 ORDER BY id LIMIT ?3",
        )?;
        let rows = stmt.query_map(params![gpu_uuid, after, limit as i64], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
        })?;
        cut_page(rows, max_bytes)
    }
}

/// The places a test's registry can be kept: the store suite runs on each.
#[cfg(test)]
pub(crate) mod testing {
    use super::Registry;
    use crate::postgres::testing::{fresh_postgres_database, on_server};

    /// Where a test's registry is kept.
    pub(crate) enum Place {
        /// A SQLite file in a temp dir.
        Sqlite(tempfile::TempDir),
        /// A database of its own on the test server.
        Postgres(String),
    }

    impl Place {
        /// A SQLite file, and a fresh PostgreSQL database where a test server is given.
        pub(crate) fn all() -> Vec<Place> {
            let mut places = vec![Place::Sqlite(tempfile::tempdir().unwrap())];
            places.extend(fresh_postgres_database().map(Place::Postgres));
            places
        }

        /// Its name, for failures.
        pub(crate) fn name(&self) -> &'static str {
            match self {
                Place::Sqlite(_) => "sqlite",
                Place::Postgres(_) => "postgres",
            }
        }

        /// Opens (again) the registry kept here.
        pub(crate) fn try_open(&self) -> Result<Registry, super::RegistryError> {
            match self {
                Place::Sqlite(dir) => Registry::open(Some(&dir.path().join("registry.sqlite"))),
                Place::Postgres(url) => Registry::connect(url),
            }
        }

        /// [`Place::try_open`], which must succeed.
        pub(crate) fn open(&self) -> Registry {
            self.try_open()
                .unwrap_or_else(|e| panic!("{}: {e}", self.name()))
        }

        /// Runs `sql` on the database directly (as an older or newer pog would have).
        pub(crate) fn execute(&self, sql: &str) {
            match self {
                Place::Sqlite(dir) => {
                    rusqlite::Connection::open(dir.path().join("registry.sqlite"))
                        .unwrap()
                        .execute_batch(sql)
                        .unwrap()
                }
                Place::Postgres(url) => on_server(url, sql),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::Place;
    use super::*;
    use crate::postgres::testing::fresh_postgres_database;

    /// The agent key of 32 `byte`s.
    fn key(byte: u8) -> PublicKey {
        PublicKey::from([byte; 32])
    }

    fn gpu(uuid: &str) -> GpuClaim {
        GpuClaim {
            uuid: uuid.parse().unwrap(),
            model: "H200 SXM".into(),
            bus_id: "0000:00:06.0".into(),
            simulated: false,
        }
    }

    /// The host's claim (its cores, the address it names for its GPUs' tokens, its storage
    /// and its RAM) is kept
    /// with its agent, read back with each GPU, and replaced by the next registration, on
    /// SQLite and on PostgreSQL alike.
    #[test]
    fn the_host_claim_and_its_token_owner_are_kept_and_replaced() {
        for place in Place::all() {
            let mut r = place.open();
            let owner: pog_signed::EvmAddress = "0x4242424242424242424242424242424242424242"
                .parse()
                .unwrap();
            let storage = pog_proof::storage::StorageClaim {
                bytes: 1 << 30,
                class: pog_proof::storage::DeviceClass::Ssd,
            };
            let host = |token_owner| {
                Some(HostClaim {
                    cores: 16,
                    token_owner,
                    storage: token_owner.map(|_| storage),
                    ram: token_owner.map(|_| 3 << 30),
                })
            };
            r.register(
                &key(0xa1),
                ("http://a", host(Some(owner))),
                &[gpu("GPU-1")],
                0,
                64,
            )
            .unwrap();
            let g = r.gpu("GPU-1").unwrap().unwrap();
            assert_eq!(
                (g.host_cores, g.token_owner, g.host_storage, g.host_ram),
                (Some(16), Some(owner), Some(storage), Some(3 << 30)),
                "{}",
                place.name()
            );
            assert_eq!(r.gpus("", 10).unwrap()[0].token_owner, Some(owner));
            r.register(&key(0xa1), ("http://a", host(None)), &[gpu("GPU-1")], 0, 64)
                .unwrap();
            let g = r.gpu("GPU-1").unwrap().unwrap();
            assert_eq!(
                (g.token_owner, g.host_storage, g.host_ram),
                (None, None, None),
                "{}",
                place.name()
            );
        }
    }

    #[test]
    fn the_latest_record_of_a_kind_is_found_past_records_of_other_kinds() {
        for place in Place::all() {
            let mut r = place.open();
            let envelope = |kind: &str, n: u32| {
                format!(
                    r#"{{"version":2,"kind":"{kind}","body":"{n}","signer":"v","signature":"00"}}"#
                )
            };
            assert_eq!(
                r.latest_record_of_kind("GPU-k", "storage-record").unwrap(),
                None
            );
            r.record("s1", "GPU-k", true, &envelope("storage-record", 1))
                .unwrap();
            r.record("s2", "GPU-k", true, &envelope("storage-record", 2))
                .unwrap();
            r.record("other-gpu", "GPU-j", true, &envelope("storage-record", 3))
                .unwrap();
            for n in 0..300 {
                r.record(&format!("g{n}"), "GPU-k", true, &envelope("record", n))
                    .unwrap();
            }
            r.record("not-json", "GPU-k", true, "{").unwrap();
            assert_eq!(
                r.latest_record_of_kind("GPU-k", "storage-record").unwrap(),
                Some(envelope("storage-record", 2)),
                "{}",
                place.name()
            );
        }
    }

    #[test]
    fn the_fastest_set_up_of_a_shape_is_kept() {
        for place in Place::all() {
            let mut r = place.open();
            assert_eq!(r.fastest_set_up("cpu a 16").unwrap(), None);
            for ms in [240.0, 225.0, 262.0] {
                r.note_set_up("cpu a 16", ms).unwrap();
            }
            r.note_set_up("cpu a 32", 500.0).unwrap();
            assert_eq!(
                r.fastest_set_up("cpu a 16").unwrap(),
                Some(225.0),
                "{}",
                place.name()
            );
            assert_eq!(
                r.fastest_set_up("cpu a 32").unwrap(),
                Some(500.0),
                "{}",
                place.name()
            );
        }
    }

    #[test]
    fn a_registration_whose_record_was_lost_registers_as_its_change_again() {
        for place in Place::all() {
            let mut r = place.open();
            let register = |r: &mut Registry, endpoint: &str| {
                r.register(&key(0xa7), (endpoint, None), &[gpu("GPU-7")], 0, 64)
                    .unwrap()
            };
            // Registered, and its record never written (the database went away between the
            // registry's commit and the record's): the same claim is the new GPU again.
            assert_eq!(
                register(&mut r, "http://a"),
                [Change::New],
                "{}",
                place.name()
            );
            assert_eq!(
                register(&mut r, "http://a"),
                [Change::New],
                "{}",
                place.name()
            );
            // Once on record, the same claim is the same.
            r.registrations_recorded(&["GPU-7".to_string()]).unwrap();
            assert_eq!(
                register(&mut r, "http://a"),
                [Change::Same],
                "{}",
                place.name()
            );
            // A change whose record was lost is reported again, then no more once recorded.
            assert_eq!(
                register(&mut r, "http://b"),
                [Change::Changed],
                "{}",
                place.name()
            );
            assert_eq!(
                register(&mut r, "http://b"),
                [Change::Changed],
                "{}",
                place.name()
            );
            r.registrations_recorded(&["GPU-7".to_string()]).unwrap();
            assert_eq!(
                register(&mut r, "http://b"),
                [Change::Same],
                "{}",
                place.name()
            );
            r.registrations_recorded(&[]).unwrap();
        }
    }

    #[test]
    fn a_uuid_belongs_to_one_agent() {
        for place in Place::all() {
            let mut r = place.open();
            assert_eq!(
                r.register(&key(0xa1), ("http://a", None), &[gpu("GPU-1")], 0, 64)
                    .unwrap(),
                [Change::New]
            );
            r.registrations_recorded(&["GPU-1".to_string()]).unwrap();
            assert_eq!(
                r.register(&key(0xa1), ("http://a", None), &[gpu("GPU-1")], 0, 64)
                    .unwrap(),
                [Change::Same],
                "an agent restarting"
            );
            // A new endpoint is a new registration.
            assert_eq!(
                r.register(&key(0xa1), ("http://a2", None), &[gpu("GPU-1")], 0, 64)
                    .unwrap(),
                [Change::Changed]
            );
            assert_eq!(r.gpu("GPU-1").unwrap().unwrap().endpoint, "http://a2");
            let moved = GpuClaim {
                bus_id: "0000:00:07.0".into(),
                ..gpu("GPU-1")
            };
            assert_eq!(
                r.register(&key(0xa1), ("http://a2", None), &[moved], 0, 64)
                    .unwrap(),
                [Change::Changed]
            );
            let err = r
                .register(
                    &key(0xb1),
                    ("http://b", None),
                    &[gpu("GPU-2"), gpu("GPU-1")],
                    0,
                    64,
                )
                .unwrap_err();
            assert!(
                matches!(err, RegistryError::ClaimedElsewhere { .. }),
                "{}: {err}",
                place.name()
            );
            // All or nothing: GPU-2 was not taken either.
            assert_eq!(r.gpu("GPU-2").unwrap(), None);
            r.register(
                &key(0xb1),
                ("http://b", None),
                &[gpu("GPU-3"), gpu("GPU-4")],
                0,
                64,
            )
            .unwrap();
            assert_eq!(
                r.gpus_by_agent().unwrap(),
                vec![
                    (key(0xa1).to_string(), vec!["GPU-1".to_string()]),
                    (
                        key(0xb1).to_string(),
                        vec!["GPU-3".to_string(), "GPU-4".to_string()]
                    )
                ]
            );
            // The GPU that carries each host's proofs: its first by UUID, as in the schedule.
            let anchor = |k: u8| r.host_anchor(key(k).as_str()).unwrap();
            assert_eq!(anchor(0xb1).as_deref(), Some("GPU-3"), "{}", place.name());
            assert_eq!(anchor(0xa1).as_deref(), Some("GPU-1"));
            assert_eq!(anchor(0xc1), None);
            assert_eq!(
                r.gpus("GPU-1", 10)
                    .unwrap()
                    .into_iter()
                    .map(|g| g.uuid.to_string())
                    .collect::<Vec<_>>(),
                ["GPU-3", "GPU-4"]
            );
        }
    }

    #[test]
    fn records_persist_once_per_challenge() {
        for place in Place::all() {
            let first = {
                let mut r = place.open();
                r.record("c1", "GPU-1", true, "{}").unwrap();
                assert!(
                    r.record("c1", "GPU-1", false, "{}").is_err(),
                    "a duplicate cannot overwrite"
                );
                r.records("GPU-1", 0, 10).unwrap()[0].0
            };
            let mut r = place.open();
            assert_eq!(
                r.records("GPU-1", 0, 10).unwrap(),
                vec![(first, "{}".to_string())]
            );
            r.record("c2", "GPU-1", true, "[]").unwrap();
            r.record("c3", "GPU-2", true, "[]").unwrap();
            assert_eq!(r.records("GPU-1", 0, 1).unwrap().len(), 1, "one page");
            let rest = r.records("GPU-1", first, 10).unwrap();
            assert_eq!(rest.len(), 1, "{}", place.name());
            assert_eq!(rest[0].1, "[]");
            assert!(rest[0].0 > first);
            // A page stops before its bytes pass the cap, but takes one record at least.
            assert_eq!(
                r.records_within("GPU-1", 0, 10, 3).unwrap(),
                (vec![(first, "{}".to_string())], true)
            );
        }
    }

    #[test]
    fn new_records_are_found_and_announced() {
        for place in Place::all() {
            let mut r = place.open();
            let notify = std::sync::Arc::new(tokio::sync::Notify::new());
            r.notify_on_record(notify.clone());
            r.record("c1", "GPU-1", true, "a").unwrap();
            r.record(
                "registration-1",
                "GPU-1",
                false,
                r#"{"kind":"registration"}"#,
            )
            .unwrap();
            r.record("c2", "GPU-2", false, "b").unwrap();
            r.record("c3", "GPU-1", false, "c").unwrap();
            r.record("report-ab", "GPU-1", false, "d").unwrap();
            assert!(r.has_record("report-ab").unwrap() && !r.has_record("report-cd").unwrap());
            assert_eq!(
                r.records_since(1, 10)
                    .unwrap()
                    .into_iter()
                    .map(|n| (n.id, n.gpu_uuid, n.kind))
                    .collect::<Vec<_>>(),
                vec![
                    (2, "GPU-1".into(), Some("registration".into())),
                    (3, "GPU-2".into(), None),
                    (4, "GPU-1".into(), None),
                    (5, "GPU-1".into(), None)
                ],
                "{}",
                place.name()
            );
            assert_eq!(r.records_since(0, 1).unwrap().len(), 1);
            assert_eq!(
                r.latest_records("GPU-1", 10).unwrap(),
                vec![(1, "a".to_string()), (4, "c".to_string())],
                "registrations and reports left out, oldest first"
            );
            assert_eq!(r.latest_records("GPU-1", 1).unwrap()[0].0, 4);
            // The wake-up was kept for whoever waits next.
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                tokio::time::timeout(std::time::Duration::from_secs(1), notify.notified())
                    .await
                    .expect("woken")
            });
        }
    }

    #[test]
    fn a_registry_from_before_simulated_gpus_gains_the_column() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.sqlite");
        let old = Connection::open(&path).unwrap();
        old.execute_batch(
            "CREATE TABLE agents (key TEXT PRIMARY KEY, endpoint TEXT NOT NULL);
             CREATE TABLE gpus (uuid TEXT PRIMARY KEY, agent TEXT NOT NULL, model TEXT NOT NULL, bus_id TEXT NOT NULL);
             INSERT INTO agents VALUES ('a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1', 'http://a');
             INSERT INTO gpus VALUES ('GPU-1', 'a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1', 'H200 SXM', '0000:00:06.0');",
        )
        .unwrap();
        drop(old);
        let mut r = Registry::open(Some(&path)).unwrap();
        assert!(!r.gpu("GPU-1").unwrap().unwrap().simulated);
        let simulated = GpuClaim {
            simulated: true,
            ..gpu("GPU-2")
        };
        r.register(&key(0xa1), ("http://a", None), &[simulated], 0, 64)
            .unwrap();
        assert!(r.gpu("GPU-2").unwrap().unwrap().simulated);
        drop(r);
        let version: i64 = Connection::open(&path)
            .unwrap()
            .query_row("SELECT version FROM schema_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(
            version, SQLITE_SCHEMA_VERSION,
            "the version is kept from now on"
        );
    }

    /// A registry written by a newer pog is refused with what to do; one of this pog's
    /// version opens again unchanged.
    #[test]
    fn a_newer_schema_is_refused_with_what_to_do() {
        for place in Place::all() {
            let mut r = place.open();
            r.record("c1", "GPU-1", true, "{}").unwrap();
            drop(r);
            assert_eq!(place.open().records("GPU-1", 0, 10).unwrap().len(), 1);
            place.execute("UPDATE schema_version SET version = 99");
            let err = place.try_open().err().expect("refused").to_string();
            assert!(
                err.contains("version 99, newer than this pog's")
                    && err.contains("run that pog (or a newer one)"),
                "{}: {err}",
                place.name()
            );
        }
    }

    #[test]
    fn the_gpu_cap_holds_across_registrations() {
        for place in Place::all() {
            let mut r = place.open();
            r.register(
                &key(0xa1),
                ("http://a", None),
                &[gpu("GPU-1"), gpu("GPU-2")],
                0,
                3,
            )
            .unwrap();
            assert!(
                matches!(
                    r.register(
                        &key(0xa1),
                        ("http://a", None),
                        &[gpu("GPU-3"), gpu("GPU-4")],
                        0,
                        3
                    ),
                    Err(RegistryError::TooManyGpus {
                        max: 3,
                        would_hold: 4
                    })
                ),
                "{}",
                place.name()
            );
            assert_eq!(r.gpu("GPU-3").unwrap(), None, "nothing of it was kept");
            r.register(&key(0xa1), ("http://a", None), &[gpu("GPU-3")], 0, 3)
                .unwrap();
        }
    }

    #[test]
    fn a_released_gpu_is_free_for_others_and_barred_for_its_squatter() {
        for place in Place::all() {
            let mut r = place.open();
            r.register(&key(0x5a), ("http://s", None), &[gpu("GPU-1")], 0, 64)
                .unwrap();
            let released = r.release("GPU-1", 10_000, ("failing", 7)).unwrap().unwrap();
            assert_eq!(released.agent, key(0x5a));
            assert_eq!(r.gpu("GPU-1").unwrap(), None);
            // Its record is kept, in the release's transaction, until noted on record.
            let kept = r.unrecorded_releases().unwrap();
            assert_eq!(kept.len(), 1, "{}", place.name());
            let record = &kept[0].record;
            assert_eq!(
                (record.event, record.agent.clone(), record.reason.as_deref()),
                (Change::Released, key(0x5a), Some("failing"))
            );
            assert_eq!(record.recorded_at_ms, 7);
            r.release_recorded(&kept[0].record_id).unwrap();
            assert_eq!(r.unrecorded_releases().unwrap(), [], "{}", place.name());
            assert!(
                matches!(
                    r.register(&key(0x5a), ("http://s", None), &[gpu("GPU-1")], 5_000, 64),
                    Err(RegistryError::Barred { wait_s: 5, .. })
                ),
                "{}",
                place.name()
            );
            assert_eq!(
                r.register(&key(0x0e), ("http://o", None), &[gpu("GPU-1")], 5_000, 64)
                    .unwrap(),
                [Change::New]
            );
            assert_eq!(r.gpus("", 10).unwrap().len(), 1);
            assert_eq!(r.release("GPU-9", 0, ("failing", 0)).unwrap(), None);
        }
    }

    /// Two validators on one PostgreSQL database see one registry: a registration made
    /// through one is seen by the other, a GPU is one key's across both (also when agents
    /// race for it through many validators at once, which also migrate the new database at
    /// once), and a record stored by one is read by the other and stored once.
    #[test]
    fn validators_on_one_database_share_the_registry() {
        let Some(url) = fresh_postgres_database() else {
            return;
        };
        let (mut a, mut b) = (
            Registry::connect(&url).unwrap(),
            Registry::connect(&url).unwrap(),
        );
        a.register(&key(0xa1), ("http://a", None), &[gpu("GPU-1")], 0, 64)
            .unwrap();
        assert_eq!(b.gpu("GPU-1").unwrap().unwrap().agent, key(0xa1));
        assert!(matches!(
            b.register(&key(0xb1), ("http://b", None), &[gpu("GPU-1")], 0, 64),
            Err(RegistryError::ClaimedElsewhere { .. })
        ));
        a.record("c1", "GPU-1", true, "{}").unwrap();
        assert_eq!(b.records("GPU-1", 0, 10).unwrap().len(), 1);
        assert!(b.record("c1", "GPU-1", true, "{}").is_err(), "stored once");
        assert!(b.has_record("c1").unwrap());

        let Some(url) = fresh_postgres_database() else {
            return;
        };
        let racers: Vec<_> = (0..8u8)
            .map(|n| {
                let url = url.clone();
                std::thread::spawn(move || {
                    Registry::connect(&url).unwrap().register(
                        &key(0x10 + n),
                        ("http://r", None),
                        &[gpu("GPU-race")],
                        0,
                        64,
                    )
                })
            })
            .collect();
        let outcomes: Vec<_> = racers.into_iter().map(|t| t.join().unwrap()).collect();
        let won = outcomes.iter().filter(|o| o.is_ok()).count();
        assert_eq!(won, 1, "{outcomes:?}");
        assert!(outcomes
            .iter()
            .all(|o| matches!(o, Ok(_) | Err(RegistryError::ClaimedElsewhere { .. }))));
    }

    #[test]
    fn validators_writing_at_once_commit_records_in_id_order() {
        let Some(url) = fresh_postgres_database() else {
            return;
        };
        // Four validators store records at once while a reader pages by id, as the pricing's
        // catch-up does: it must see every record, none passed over by a later commit.
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let url = url.clone();
                std::thread::spawn(move || {
                    let mut registry = Registry::connect(&url).unwrap();
                    for n in 0..60 {
                        registry
                            .record(&format!("w{w}-{n}"), "GPU-seq", true, "{}")
                            .unwrap();
                    }
                })
            })
            .collect();
        let reader = Registry::connect(&url).unwrap();
        let (mut seen, mut after) = (std::collections::HashSet::new(), 0);
        let pass = |seen: &mut std::collections::HashSet<i64>, after: &mut i64| {
            for r in reader.records_since(*after, 1000).unwrap() {
                assert!(r.id > *after);
                *after = r.id;
                seen.insert(r.id);
            }
        };
        while !writers.iter().all(|w| w.is_finished()) {
            pass(&mut seen, &mut after);
        }
        for w in writers {
            w.join().unwrap();
        }
        pass(&mut seen, &mut after);
        let all: Vec<i64> = reader
            .records_since(0, 10_000)
            .unwrap()
            .iter()
            .map(|r| r.id)
            .collect();
        assert_eq!(all.len(), 240);
        assert_eq!(
            seen.len(),
            240,
            "the reader passed over records committed late"
        );
    }

    /// Registrations and slot claims on one SQLite file (a validator's rounds, `pog validator`
    /// tools, a second process) wait for another writer instead of failing with "database is
    /// locked": two registries register at once, 50 times each, and all succeed; a
    /// registration and a claim made while another connection holds the write lock wait
    /// for it and then succeed. (With deferred transactions, which read before they write,
    /// the upgrade to a writer is refused at once.)
    #[test]
    fn sqlite_registrations_and_claims_wait_for_another_writer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("registry.sqlite");
        Registry::open(Some(&path)).unwrap();
        let barrier = std::sync::Barrier::new(2);
        std::thread::scope(|s| {
            for writer in 0..2u8 {
                let (path, barrier) = (&path, &barrier);
                s.spawn(move || {
                    let mut r = Registry::open(Some(path)).unwrap();
                    barrier.wait();
                    for i in 0..50 {
                        let claim = gpu(&format!("GPU-{writer}-{i}"));
                        r.register(&key(0x10 + writer), ("http://a", None), &[claim], 0, 64)
                            .unwrap_or_else(|e| panic!("writer {writer}, registration {i}: {e}"));
                    }
                });
            }
        });
        assert_eq!(
            Registry::open(Some(&path))
                .unwrap()
                .gpus("", 200)
                .unwrap()
                .len(),
            100
        );

        // One write at a time while another connection holds the write lock: it must not
        // answer before the holder commits (a second, in which a refusal comes at once), and
        // must succeed once it has.
        type Write = Box<dyn FnOnce(&mut Registry) -> Result<(), RegistryError> + Send>;
        let writes: [(&str, Write); 2] = [
            (
                "registration",
                Box::new(|r| {
                    let claim = gpu("GPU-late");
                    r.register(&key(0x20), ("http://b", None), &[claim], 0, 64)
                        .map(drop)
                }),
            ),
            (
                "claim",
                Box::new(|r| r.claim((9, "v"), &["GPU-late".into()], 100).map(drop)),
            ),
        ];
        for (what, write) in writes {
            let mut r = Registry::open(Some(&path)).unwrap();
            let holder = Connection::open(&path).unwrap();
            holder
                .execute_batch(
                    "BEGIN IMMEDIATE; INSERT INTO validators (key, seen_ms) VALUES ('holder', 0) ON CONFLICT(key) DO NOTHING;",
                )
                .unwrap();
            let (sent, answer) = std::sync::mpsc::channel();
            let waiter = std::thread::spawn(move || {
                sent.send(write(&mut r).map_err(|e| e.to_string())).unwrap()
            });
            let early = answer.recv_timeout(std::time::Duration::from_secs(1));
            holder.execute_batch("COMMIT").unwrap();
            let result = early.unwrap_or_else(|_| answer.recv().unwrap());
            assert_eq!(result, Ok(()), "the {what} beside a held write lock");
            waiter.join().unwrap();
        }
    }

    #[test]
    fn a_reopened_claim_is_settled_again_by_one_sweeper() {
        let mut r = Registry::open(None).unwrap();
        let held = r.claim((7, "v"), &["GPU-c".to_string()], 100).unwrap();
        assert_eq!(held, vec!["GPU-c".to_string()]);
        assert_eq!(r.abandoned_claims(101).unwrap().len(), 1);
        assert!(r.settle_claim(7, "GPU-c").unwrap());
        assert!(!r.settle_claim(7, "GPU-c").unwrap(), "settled once");
        assert_eq!(r.abandoned_claims(101).unwrap(), vec![]);
        r.reopen_claim(7, "GPU-c").unwrap();
        assert_eq!(r.abandoned_claims(101).unwrap().len(), 1);
        assert!(r.settle_claim(7, "GPU-c").unwrap());
    }

    #[test]
    fn a_damaged_registry_says_what_to_do_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("registry.sqlite");
        std::fs::write(
            &path,
            b"this is not a database, just text that fills a page",
        )
        .unwrap();
        let err = Registry::open(Some(&path))
            .err()
            .expect("refused")
            .to_string();
        assert!(err.contains("move it away"), "{err}");
        assert_eq!(err.matches("not a database").count(), 1, "{err}");
    }

    #[test]
    fn an_unreachable_database_says_what_to_do() {
        // A port nothing listens on (the discard port, closed on test machines).
        let err = Registry::connect("postgres://pog@127.0.0.1:9/none")
            .err()
            .expect("refused")
            .to_string();
        assert!(err.contains("check that the server is up"), "{err}");
        let err = Registry::connect("mysql://x")
            .err()
            .expect("refused")
            .to_string();
        assert!(
            err.contains("postgres://user:password@host:port/database"),
            "{err}"
        );
    }
}
