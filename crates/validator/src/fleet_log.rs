//! One transparency log for a fleet of validators on one PostgreSQL database (issue 22,
//! item 4), kept the way Trillian Tessera keeps a log on an SQL backend:
//!
//! - **Sequencing.** An entry gets its index under the `log_sequence` row's lock, in the
//!   transaction of the record it logs ([`crate::postgres::sequence_log_entry`]): the fleet's entries commit in index
//!   order and without gaps (a transaction that rolls back gives its index back), and a record
//!   is stored and logged, or neither.
//! - **Integration.** Each validator keeps the tree in its data dir (`pog_ledger`'s tiles,
//!   served under `/ledger/`) and brings it up to the database by appending the entries it
//!   lacks, in index order ([`crate::ledger::ValidatorLedger`]'s catch-up). Integration is
//!   deterministic (each GPU's chain is filled in from the entries before it), so every
//!   validator holds the same tree, any of them may integrate and serve it, and doing it twice
//!   changes nothing. A local tree the database does not continue is refused.
//! - **One log key.** Checkpoints are signed with a key apart from every validator's identity
//!   (`pog validator --log-key-file`, the same file on every validator of the fleet). The
//!   database keeps the log's verifier key ([`FleetLog::adopt_key`]): a validator holding
//!   another key is refused at start, and one whose key was rotated away stops leading.
//! - **One leader.** Checkpoints, the witnesses' cosignatures and the chain anchors come from
//!   the holder of the [`LOG_LEASE`] ([`FleetLog::hold`]), which another validator takes over
//!   once it expires. Each taking of the lease gets a new fencing token, and a checkpoint is
//!   stored only under the current token ([`FleetLog::store_checkpoint`]): a holder cut off by
//!   a partition cannot write over what its successor stored. The others copy the stored
//!   checkpoint ([`FleetLog::checkpoint`]).
//!
//! Lease times are read on the database's clock, never on a validator's.

use crate::postgres::PgRegistry;
use crate::registry_model::RegistryError;
use pog_ledger::note::{NoteSigner, Verifier, ALG_ED25519};
use std::time::Duration;

/// The lease whose holder signs the fleet's checkpoints, asks its witnesses and anchors them.
pub const LOG_LEASE: &str = "log";

/// The database's clock, ms since the Unix epoch, as SQL.
const DB_NOW_MS: &str = "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT";

/// Why the fleet's log refused.
#[derive(Debug, thiserror::Error)]
pub enum FleetLogError {
    /// The database could not be read or written.
    #[error(transparent)]
    Db(#[from] RegistryError),
    /// The database's log is signed by another key than the one this validator holds.
    #[error(
        "this fleet's log is signed by the key {found}, and this validator holds {ours}: start \
         it with the fleet's log key (--log-key-file, the same file on every validator of the \
         fleet), or make its key the fleet's with --rotate-log-key (docs/ledger.md, \"Rotating \
         the fleet's log key\")"
    )]
    OtherKey {
        /// The verifier key the database holds.
        found: String,
        /// This validator's.
        ours: String,
    },
    /// The lease passed to another validator: what was to be stored under it was not.
    #[error(
        "the log lease passed to another validator (fencing token {current}, this validator's \
         {ours}): its checkpoint of size {size} was not stored"
    )]
    Fenced {
        /// The token this validator held.
        ours: i64,
        /// The lease's token now (0: nobody holds it).
        current: i64,
        /// The size of the checkpoint refused.
        size: u64,
    },
    /// A checkpoint smaller than the one stored.
    #[error("the fleet's checkpoint has size {stored}: one of size {size} would shrink the log")]
    Shrinks {
        /// The stored checkpoint's size.
        stored: u64,
        /// The refused one's.
        size: u64,
    },
    /// The stored verifier key does not parse.
    #[error("the fleet's stored log key {0:?} is no note verifier key")]
    BadKey(String),
}

impl From<tokio_postgres::Error> for FleetLogError {
    fn from(e: tokio_postgres::Error) -> FleetLogError {
        FleetLogError::Db(e.into())
    }
}

/// The fleet's log in a PostgreSQL registry's database (from
/// [`crate::registry::Registry::fleet_log`]). Its methods block: call them from blocking code
/// (or `block_in_place`).
#[derive(Clone)]
pub struct FleetLog {
    pg: PgRegistry,
}

impl FleetLog {
    /// The log in `pg`'s database.
    pub(crate) fn new(pg: PgRegistry) -> FleetLog {
        FleetLog { pg }
    }

    /// The log's signer from this validator's log key (`seed`): named as the fleet's log is
    /// named, when the database holds its key already (refused, unless `rotate`, when that
    /// key is not this one: with `rotate` this key becomes the fleet's), or named `name` and
    /// stored as the fleet's log key when this is the fleet's first validator.
    pub fn adopt_key(
        &self,
        seed: [u8; 32],
        name: &str,
        rotate: bool,
    ) -> Result<NoteSigner, FleetLogError> {
        let signer_named = |name: &str| {
            NoteSigner::new(name, ALG_ED25519, seed)
                .map_err(|_| FleetLogError::BadKey(name.to_string()))
        };
        let ours = signer_named(name)?;
        let found = self.key()?;
        let signer = match found {
            Some(found) => {
                let stored =
                    Verifier::parse(&found).map_err(|_| FleetLogError::BadKey(found.clone()))?;
                let signer = signer_named(stored.name())?;
                let vkey = signer.verifier().to_vkey();
                if vkey != found {
                    if !rotate {
                        return Err(FleetLogError::OtherKey { found, ours: vkey });
                    }
                    self.set_key(Some(&found), &vkey)?;
                    tracing::warn!(old = %found, new = %vkey, "the fleet's log key is rotated to this validator's");
                }
                signer
            }
            None => {
                self.set_key(None, &ours.verifier().to_vkey())?;
                ours
            }
        };
        Ok(signer)
    }

    /// The fleet's log key (its note verifier key), once a validator stored it.
    pub fn key(&self) -> Result<Option<String>, FleetLogError> {
        Ok(self.pg.block(|pg| async move {
            let client = pg.connection().await?;
            Ok(client
                .query_opt("SELECT vkey FROM log_key", &[])
                .await?
                .map(|r| r.try_get(0))
                .transpose()?)
        })?)
    }

    /// Replaces the fleet's log key `old` (`None`: there is none yet) with `new`; a key that
    /// changed meanwhile is left and reported as another key.
    fn set_key(&self, old: Option<&str>, new: &str) -> Result<(), FleetLogError> {
        let (old, new) = (old.map(str::to_owned), new.to_owned());
        let found = self.pg.block(|pg| async move {
            let client = pg.connection().await?;
            let changed = match &old {
                Some(old) => {
                    client
                        .execute("UPDATE log_key SET vkey = $1 WHERE vkey = $2", &[&new, old])
                        .await?
                }
                None => {
                    client
                        .execute(
                            "INSERT INTO log_key (vkey) VALUES ($1) ON CONFLICT DO NOTHING",
                            &[&new],
                        )
                        .await?
                }
            };
            if changed == 1 {
                return Ok(None);
            }
            let found: String = client
                .query_one("SELECT vkey FROM log_key", &[])
                .await?
                .try_get(0)?;
            Ok((found != new).then_some((found, new)))
        })?;
        match found {
            Some((found, ours)) => Err(FleetLogError::OtherKey { found, ours }),
            None => Ok(()),
        }
    }

    /// Sequences one entry alone (a record logged but not stored, such as a score): its index.
    pub fn log_entry(&self, entry: &[u8]) -> Result<u64, FleetLogError> {
        let entry = entry.to_vec();
        Ok(self.pg.block(|pg| async move {
            let mut client = pg.connection().await?;
            let tx = client.transaction().await?;
            let index = crate::postgres::sequence_log_entry(&tx, &entry).await?;
            tx.commit().await?;
            Ok(index)
        })?)
    }

    /// How many entries the fleet's log holds (committed).
    pub fn size(&self) -> Result<u64, FleetLogError> {
        Ok(self.pg.block(|pg| async move {
            let client = pg.connection().await?;
            let next: i64 = client
                .query_one("SELECT next_idx FROM log_sequence", &[])
                .await?
                .try_get(0)?;
            Ok(next as u64)
        })?)
    }

    /// At most `limit` entries from index `from` on, in index order, with their indexes.
    pub fn entries(&self, from: u64, limit: usize) -> Result<Vec<(u64, Vec<u8>)>, FleetLogError> {
        let (from, limit) = (from as i64, limit as i64);
        Ok(self.pg.block(|pg| async move {
            let client = pg.connection().await?;
            let rows = client
                .query(
                    "SELECT idx, entry FROM log_entries WHERE idx >= $1 ORDER BY idx LIMIT $2",
                    &[&from, &limit],
                )
                .await?;
            rows.iter()
                .map(|r| Ok((r.try_get::<_, i64>(0)? as u64, r.try_get(1)?)))
                .collect()
        })?)
    }

    /// Takes or renews the lease `name` for `holder` for `lasting` (on the database's clock):
    /// its fencing token when `holder` holds it now, `None` while another holder's lease runs.
    /// A lease taken anew (first, from another holder, or after it ran out) gets a new token.
    pub fn hold(
        &self,
        name: &str,
        holder: &str,
        lasting: Duration,
    ) -> Result<Option<i64>, FleetLogError> {
        let (name, holder) = (name.to_owned(), holder.to_owned());
        let lasting = i64::try_from(lasting.as_millis()).unwrap_or(i64::MAX);
        Ok(self.pg.block(|pg| async move {
            let client = pg.connection().await?;
            let sql = format!(
                "INSERT INTO fleet_leases (name, holder, token, expires_ms) \
                 VALUES ($1, $2, 1, {DB_NOW_MS} + $3) \
                 ON CONFLICT (name) DO UPDATE SET \
                   token = fleet_leases.token + CASE WHEN fleet_leases.holder = EXCLUDED.holder \
                     AND fleet_leases.expires_ms >= {DB_NOW_MS} THEN 0 ELSE 1 END, \
                   holder = EXCLUDED.holder, expires_ms = EXCLUDED.expires_ms \
                 WHERE fleet_leases.holder = EXCLUDED.holder OR fleet_leases.expires_ms < {DB_NOW_MS} \
                 RETURNING token"
            );
            Ok(client
                .query_opt(&sql, &[&name, &holder, &lasting])
                .await?
                .map(|r| r.try_get(0))
                .transpose()?)
        })?)
    }

    /// Gives the lease `name` up at once, if `holder` holds it under `token` (a validator
    /// that stops), so that another takes it over without waiting for it to run out.
    pub fn release(&self, name: &str, holder: &str, token: i64) -> Result<(), FleetLogError> {
        let (name, holder) = (name.to_owned(), holder.to_owned());
        Ok(self.pg.block(|pg| async move {
            let client = pg.connection().await?;
            client
                .execute(
                    "UPDATE fleet_leases SET expires_ms = 0 WHERE name = $1 AND holder = $2 AND token = $3",
                    &[&name, &holder, &token],
                )
                .await?;
            Ok(())
        })?)
    }

    /// Stores `text`, a checkpoint of size `size`, as the fleet's latest, if `holder` holds the
    /// [`LOG_LEASE`] under `token` and it has not run out (fencing: refused otherwise), and it
    /// does not shrink the log.
    pub fn store_checkpoint(
        &self,
        (holder, token): (&str, i64),
        size: u64,
        text: &str,
    ) -> Result<(), FleetLogError> {
        let (holder, text) = (holder.to_owned(), text.to_owned());
        self.pg.block(move |pg| async move {
            let mut client = pg.connection().await?;
            let tx = client.transaction().await?;
            let lease = tx
                .query_opt(
                    &format!(
                        "SELECT holder, token, expires_ms >= {DB_NOW_MS} FROM fleet_leases \
                         WHERE name = $1 FOR UPDATE"
                    ),
                    &[&LOG_LEASE],
                )
                .await?;
            let current = match &lease {
                Some(row) => {
                    let (who, current, running): (String, i64, bool) =
                        (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
                    if who == holder && current == token && running {
                        None
                    } else {
                        Some(current)
                    }
                }
                None => Some(0),
            };
            if let Some(current) = current {
                return Ok(Err(FleetLogError::Fenced {
                    ours: token,
                    current,
                    size,
                }));
            }
            let stored: Option<i64> = tx
                .query_opt("SELECT size FROM log_checkpoint FOR UPDATE", &[])
                .await?
                .map(|r| r.try_get(0))
                .transpose()?;
            if let Some(stored) = stored.filter(|s| (*s as u64) > size) {
                return Ok(Err(FleetLogError::Shrinks {
                    stored: stored as u64,
                    size,
                }));
            }
            tx.execute(
                "INSERT INTO log_checkpoint (only_row, size, text) VALUES (TRUE, $1, $2) \
                 ON CONFLICT (only_row) DO UPDATE SET size = EXCLUDED.size, text = EXCLUDED.text",
                &[&(size as i64), &text],
            )
            .await?;
            tx.commit().await?;
            Ok(Ok(()))
        })?
    }

    /// The fleet's latest checkpoint: its size and text.
    pub fn checkpoint(&self) -> Result<Option<(u64, String)>, FleetLogError> {
        Ok(self.pg.block(|pg| async move {
            let client = pg.connection().await?;
            Ok(client
                .query_opt("SELECT size, text FROM log_checkpoint", &[])
                .await?
                .map(|r| {
                    Ok::<_, tokio_postgres::Error>((r.try_get::<_, i64>(0)? as u64, r.try_get(1)?))
                })
                .transpose()?)
        })?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::postgres::testing::fresh_postgres_database;
    use crate::registry::Registry;

    fn fleet_log() -> Option<FleetLog> {
        let url = fresh_postgres_database()?;
        Registry::connect(&url).unwrap().fleet_log()
    }

    #[test]
    fn entries_are_sequenced_without_gaps_in_index_order() {
        let Some(log) = fleet_log() else { return };
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let log = log.clone();
                std::thread::spawn(move || {
                    (0..10)
                        .map(|i| log.log_entry(format!("{t}-{i}").as_bytes()).unwrap())
                        .collect::<Vec<u64>>()
                })
            })
            .collect();
        let mut indexes: Vec<u64> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        indexes.sort();
        assert_eq!(indexes, (0..40).collect::<Vec<u64>>());
        assert_eq!(log.size().unwrap(), 40);
        let read = log.entries(38, 10).unwrap();
        assert_eq!(read.iter().map(|(i, _)| *i).collect::<Vec<_>>(), [38, 39]);
    }

    #[test]
    fn a_lease_has_one_holder_until_it_runs_out_and_each_taking_fences_the_last() {
        let Some(log) = fleet_log() else { return };
        let long = Duration::from_secs(60);
        let a = log.hold(LOG_LEASE, "a", long).unwrap().expect("free");
        assert_eq!(log.hold(LOG_LEASE, "a", long).unwrap(), Some(a), "renewed");
        assert_eq!(log.hold(LOG_LEASE, "b", long).unwrap(), None, "held by a");
        log.store_checkpoint(("a", a), 5, "five").unwrap();
        // a's lease runs out (a partition, a pause): b takes it with a new token, and a's
        // writes under its old token are refused.
        log.hold(LOG_LEASE, "a", Duration::from_millis(1)).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let b = log.hold(LOG_LEASE, "b", long).unwrap().expect("ran out");
        assert!(b > a);
        let refused = log.store_checkpoint(("a", a), 9, "nine").unwrap_err();
        assert!(matches!(refused, FleetLogError::Fenced { current, .. } if current == b));
        log.store_checkpoint(("b", b), 7, "seven").unwrap();
        assert_eq!(log.checkpoint().unwrap(), Some((7, "seven".into())));
        // A checkpoint never shrinks the log; a holder gives its lease up at once.
        assert!(matches!(
            log.store_checkpoint(("b", b), 6, "six"),
            Err(FleetLogError::Shrinks { stored: 7, size: 6 })
        ));
        log.release(LOG_LEASE, "b", b).unwrap();
        assert!(log
            .hold(LOG_LEASE, "a", long)
            .unwrap()
            .is_some_and(|t| t > b));
    }

    #[test]
    fn a_validator_holding_another_log_key_is_refused_unless_it_rotates_the_key() {
        let Some(log) = fleet_log() else { return };
        let first = log.adopt_key([1; 32], "pog.fleet/first", false).unwrap();
        // The same key on a second validator: the fleet's name, whatever name it offers.
        let again = log.adopt_key([1; 32], "pog.fleet/other", false).unwrap();
        assert_eq!(again.verifier().to_vkey(), first.verifier().to_vkey());
        let refused = log
            .adopt_key([2; 32], "pog.fleet/first", false)
            .unwrap_err();
        assert!(
            matches!(refused, FleetLogError::OtherKey { .. }),
            "{refused}"
        );
        assert!(refused.to_string().contains("--log-key-file"));
        // Rotated: the new key signs under the log's name, and the old one is refused.
        let rotated = log.adopt_key([2; 32], "ignored", true).unwrap();
        assert_eq!(rotated.verifier().name(), "pog.fleet/first");
        assert_eq!(log.key().unwrap(), Some(rotated.verifier().to_vkey()));
        assert!(log.adopt_key([1; 32], "pog.fleet/first", false).is_err());
    }
}
