//! Where the leases' settlements are kept ([`crate::settlement::Settlements`]): a SQLite file
//! of the validator's (`DATA_DIR/settlements.sqlite`), or, for a fleet, the registry's
//! PostgreSQL database, where every validator reads the settlements the fleet's leader made
//! (what a lease still holds of its renter's deposit is then the same at every validator).
//!
//! Each row carries a version drawn anew at every write (PostgreSQL only), so that a
//! validator brings its index of what each period holds up to the database by reading the
//! rows changed since the last it read ([`SettlementStore::changed_since`]).

use crate::postgres::PgRegistry;
use crate::registry_model::RegistryError;
use rusqlite::{params, Connection, OptionalExtension};
use std::path::Path;

/// Why the settlements' store failed.
#[derive(Debug, thiserror::Error)]
pub enum SettlementStoreError {
    /// The SQLite file failed.
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    /// The PostgreSQL database could not be read or written.
    #[error("the fleet's PostgreSQL database: {0}")]
    Postgres(#[from] RegistryError),
}

/// One kept period as the index reads it: lease, period, paid (µ$), state code, version.
pub(crate) type IndexRow = (String, u64, u64, i64, i64);

/// A settled period to keep: lease, period, renter, provider (lower-case hex), paid (µ$),
/// state code, the record as JSON.
pub(crate) struct KeptRow<'a> {
    /// The lease.
    pub lease_id: &'a str,
    /// The period's index.
    pub period: u64,
    /// The renter's key, lower-case.
    pub renter: String,
    /// The provider's key, lower-case.
    pub provider: String,
    /// What the period pays, micro-dollars.
    pub paid: u64,
    /// Its state's code.
    pub state: i64,
    /// The record, as JSON.
    pub record: String,
}

/// The settlements' store: see the module's doc.
pub(crate) enum SettlementStore {
    /// A SQLite file (or memory): one validator's.
    Sqlite(Connection),
    /// The registry's PostgreSQL database: the fleet's.
    Postgres(PgRegistry),
}

impl SettlementStore {
    /// The store in the SQLite file `path` (`None`: in memory), its tables created if needed.
    pub(crate) fn sqlite(path: Option<&Path>) -> Result<SettlementStore, SettlementStoreError> {
        let db = match path {
            Some(p) => Connection::open(p)?,
            None => Connection::open_in_memory()?,
        };
        db.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;
             CREATE TABLE IF NOT EXISTS settlements (
                 seq INTEGER PRIMARY KEY,
                 lease_id TEXT NOT NULL,
                 period INTEGER NOT NULL,
                 renter TEXT NOT NULL,
                 provider TEXT NOT NULL,
                 paid INTEGER NOT NULL,
                 state INTEGER NOT NULL,
                 record TEXT NOT NULL,
                 UNIQUE (lease_id, period)
             );
             CREATE TABLE IF NOT EXISTS undelivered (
                 lease_id TEXT PRIMARY KEY,
                 at_ms INTEGER NOT NULL,
                 reason TEXT NOT NULL
             );",
        )?;
        Ok(SettlementStore::Sqlite(db))
    }

    /// Whether other validators write to it too (then the index is brought up to it).
    pub(crate) fn shared(&self) -> bool {
        matches!(self, SettlementStore::Postgres(_))
    }

    /// The kept periods changed after version `version` (every one on SQLite), by version.
    pub(crate) fn changed_since(
        &self,
        version: i64,
    ) -> Result<Vec<IndexRow>, SettlementStoreError> {
        match self {
            SettlementStore::Sqlite(db) => {
                let mut rows =
                    db.prepare("SELECT lease_id, period, paid, state, seq FROM settlements")?;
                let read = rows.query_map([], |r| {
                    Ok((
                        r.get(0)?,
                        r.get::<_, i64>(1)? as u64,
                        r.get::<_, i64>(2)? as u64,
                        r.get(3)?,
                        r.get(4)?,
                    ))
                })?;
                Ok(read.collect::<Result<_, _>>()?)
            }
            SettlementStore::Postgres(pg) => Ok(pg.block(move |pg| async move {
                let client = pg.connection().await?;
                let rows = client
                    .query(
                        "SELECT lease_id, period, paid, state, version FROM settlements WHERE version > $1 ORDER BY version",
                        &[&version],
                    )
                    .await?;
                rows.iter()
                    .map(|r| {
                        Ok((
                            r.try_get(0)?,
                            r.try_get::<_, i64>(1)? as u64,
                            r.try_get::<_, i64>(2)? as u64,
                            r.try_get(3)?,
                            r.try_get(4)?,
                        ))
                    })
                    .collect()
            })?),
        }
    }

    /// Keeps the provider's report that a lease was not delivered from `at_ms` on, unless one
    /// is kept; the time kept.
    pub(crate) fn report_undelivered(
        &self,
        lease_id: &str,
        at_ms: u64,
        reason: &str,
    ) -> Result<u64, SettlementStoreError> {
        match self {
            SettlementStore::Sqlite(db) => {
                db.execute(
                    "INSERT INTO undelivered (lease_id, at_ms, reason) VALUES (?1, ?2, ?3) ON CONFLICT (lease_id) DO NOTHING",
                    params![lease_id, at_ms as i64, reason],
                )?;
                Ok(db.query_row(
                    "SELECT at_ms FROM undelivered WHERE lease_id = ?1",
                    [lease_id],
                    |r| r.get::<_, i64>(0),
                )? as u64)
            }
            SettlementStore::Postgres(pg) => {
                let (lease_id, reason) = (lease_id.to_owned(), reason.to_owned());
                Ok(pg.block(move |pg| async move {
                    let client = pg.connection().await?;
                    client
                        .execute(
                            "INSERT INTO undelivered (lease_id, at_ms, reason) VALUES ($1, $2, $3) ON CONFLICT (lease_id) DO NOTHING",
                            &[&lease_id, &(at_ms as i64), &reason],
                        )
                        .await?;
                    let kept: i64 = client
                        .query_one("SELECT at_ms FROM undelivered WHERE lease_id = $1", &[&lease_id])
                        .await?
                        .try_get(0)?;
                    Ok(kept as u64)
                })?)
            }
        }
    }

    /// Since when a lease was not delivered, as its provider reported.
    pub(crate) fn undelivered_from(
        &self,
        lease_id: &str,
    ) -> Result<Option<u64>, SettlementStoreError> {
        match self {
            SettlementStore::Sqlite(db) => Ok(db
                .query_row(
                    "SELECT at_ms FROM undelivered WHERE lease_id = ?1",
                    [lease_id],
                    |r| r.get::<_, i64>(0),
                )
                .optional()?
                .map(|t| t as u64)),
            SettlementStore::Postgres(pg) => {
                let lease_id = lease_id.to_owned();
                Ok(pg.block(move |pg| async move {
                    let client = pg.connection().await?;
                    Ok(client
                        .query_opt(
                            "SELECT at_ms FROM undelivered WHERE lease_id = $1",
                            &[&lease_id],
                        )
                        .await?
                        .map(|r| r.try_get::<_, i64>(0))
                        .transpose()?
                        .map(|t| t as u64))
                })?)
            }
        }
    }

    /// Keeps a settled period (new, or a new state of one kept): its version.
    pub(crate) fn keep(&self, row: KeptRow<'_>) -> Result<i64, SettlementStoreError> {
        match self {
            SettlementStore::Sqlite(db) => {
                db.execute(
                    "INSERT INTO settlements (lease_id, period, renter, provider, paid, state, record)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                     ON CONFLICT (lease_id, period) DO UPDATE SET state = ?6, record = ?7",
                    params![
                        row.lease_id,
                        row.period as i64,
                        row.renter,
                        row.provider,
                        row.paid as i64,
                        row.state,
                        row.record
                    ],
                )?;
                Ok(0)
            }
            SettlementStore::Postgres(pg) => {
                let lease_id = row.lease_id.to_owned();
                Ok(pg.block(move |pg| async move {
                    let client = pg.connection().await?;
                    let version: i64 = client
                        .query_one(
                            "INSERT INTO settlements (lease_id, period, renter, provider, paid, state, record, version) \
                             VALUES ($1, $2, $3, $4, $5, $6, $7, nextval('settlement_versions')) \
                             ON CONFLICT (lease_id, period) DO UPDATE SET state = EXCLUDED.state, record = EXCLUDED.record, version = EXCLUDED.version \
                             RETURNING version",
                            &[
                                &lease_id,
                                &(row.period as i64),
                                &row.renter,
                                &row.provider,
                                &(row.paid as i64),
                                &row.state,
                                &row.record,
                            ],
                        )
                        .await?
                        .try_get(0)?;
                    Ok(version)
                })?)
            }
        }
    }

    /// The records kept in state `state`, oldest first.
    pub(crate) fn in_state(&self, state: i64) -> Result<Vec<String>, SettlementStoreError> {
        match self {
            SettlementStore::Sqlite(db) => {
                let mut rows =
                    db.prepare("SELECT record FROM settlements WHERE state = ?1 ORDER BY seq")?;
                let read = rows.query_map([state], |r| r.get::<_, String>(0))?;
                Ok(read.collect::<Result<_, _>>()?)
            }
            SettlementStore::Postgres(pg) => Ok(pg.block(move |pg| async move {
                let client = pg.connection().await?;
                let rows = client
                    .query(
                        "SELECT record FROM settlements WHERE state = $1 ORDER BY seq",
                        &[&state],
                    )
                    .await?;
                rows.iter().map(|r| Ok(r.try_get(0)?)).collect()
            })?),
        }
    }

    /// The records (and their state codes) of `party` (renter or provider, lower-case) and
    /// of `lease`, where given, the newest first, at most `limit`.
    pub(crate) fn page(
        &self,
        party: Option<String>,
        lease: Option<String>,
        limit: i64,
    ) -> Result<Vec<(String, i64)>, SettlementStoreError> {
        match self {
            SettlementStore::Sqlite(db) => {
                let mut rows = db.prepare(
                    "SELECT record, state FROM settlements
                     WHERE (?1 IS NULL OR renter = ?1 OR provider = ?1) AND (?2 IS NULL OR lease_id = ?2)
                     ORDER BY seq DESC LIMIT ?3",
                )?;
                let read = rows.query_map(params![party, lease, limit], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })?;
                Ok(read.collect::<Result<_, _>>()?)
            }
            SettlementStore::Postgres(pg) => Ok(pg.block(move |pg| async move {
                let client = pg.connection().await?;
                let rows = client
                    .query(
                        "SELECT record, state FROM settlements \
                         WHERE ($1::TEXT IS NULL OR renter = $1 OR provider = $1) AND ($2::TEXT IS NULL OR lease_id = $2) \
                         ORDER BY seq DESC LIMIT $3",
                        &[&party, &lease, &limit],
                    )
                    .await?;
                rows.iter()
                    .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
                    .collect()
            })?),
        }
    }
}
