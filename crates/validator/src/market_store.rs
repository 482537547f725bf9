//! Where the order book keeps its events ([`crate::market`]): a SQLite file for a validator
//! alone (`DATA_DIR/market.sqlite`), or the registry's PostgreSQL database for a fleet, whose
//! validators then share one book (`pog validator --database postgres://…`).
//!
//! The market sees one narrow interface, [`MarketStore`], the same on both:
//!
//! - **Writes under the sequence lock.** [`MarketStore::begin`] opens a transaction and, on
//!   PostgreSQL, locks the `market_sequence` row (held to the commit) and reads the database's
//!   clock: while one validator judges a request, no other can append an event, so every
//!   request is judged on the book with every event before it ([`MarketStore::events_after`],
//!   read inside the transaction), and judged at a time no earlier than any event before it
//!   (one clock for the fleet, read in lock order). [`MarketStore::append`] gives each event
//!   the next sequence number; [`MarketStore::finish`] commits or rolls back. Events commit
//!   in sequence order without gaps, so a reader paging by sequence never passes one over.
//! - **Snapshots** of the book ([`MarketStore::write_snapshot`]) are the book's state after one
//!   numbered event: deterministic, so any validator may write one and every validator may
//!   start from it. The events before it are deleted; a validator whose book lags behind a
//!   snapshot finds the gap and reloads from the snapshot.
//! - **Meta.** Which clearings' leases the ledger took (`leases_logged_through`, one mark for
//!   the fleet, read and raised under its row lock between [`MarketStore::begin_handing`] and
//!   [`MarketStore::end_handing`]), and how far the pricing read the records
//!   (`priced_through`, each validator's own: each keeps its own views of the prices).
//! - **Price history**, one for the fleet.
//! - **Withdrawal holds** (`market_withdrawals`, one row per renter): each renter's last
//!   withdrawal request taken and what its voucher holds of the deposit until it expires
//!   ([`MarketStore::withdrawal`], [`MarketStore::put_withdrawal`]), read and written inside
//!   the transaction [`MarketStore::begin`] opens, so that on PostgreSQL they are sequenced
//!   with the fleet's submits by the same lock: a bid judged at one validator counts a
//!   voucher another signed, and two withdrawals at once are judged one after the other.
//!   They are rows, not events: a hold depends on the chain's deposits and on whether the
//!   voucher could be signed, nothing the book replays, and it is given back when signing
//!   fails; a row per renter keeps them bounded without the snapshots.

use crate::postgres::PgRegistry;
use crate::registry_model::RegistryError;
use pog_signed::PublicKey;
use rusqlite::{params, Connection, OptionalExtension};
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use tokio_postgres::Client;

/// Why the market store failed.
#[derive(Debug, thiserror::Error)]
pub enum MarketError {
    /// The SQLite database failed.
    #[error("the market database failed ({0}); if the file is damaged, restore it from a backup or move it away to start an empty book")]
    Database(#[from] rusqlite::Error),
    /// The PostgreSQL database could not be read or written.
    #[error("the market's PostgreSQL database: {0} (nothing was changed; retry once the database answers)")]
    Postgres(#[from] RegistryError),
    /// Other validators' snapshots kept dropping the events after the one read.
    #[error("the market's snapshots moved on while it was read back ({tries} tries); retry")]
    Moving {
        /// How many times it was read.
        tries: usize,
    },
    /// A stored event cannot be replayed: the store is damaged.
    #[error("the market database holds an event it cannot replay (event {seq}: {why}); restore it from a backup")]
    Corrupt {
        /// The event's sequence number.
        seq: i64,
        /// Why it cannot be replayed.
        why: String,
    },
}

impl From<tokio_postgres::Error> for MarketError {
    fn from(e: tokio_postgres::Error) -> MarketError {
        MarketError::Postgres(e.into())
    }
}

/// One stored event: its number, its JSON and the book's time it was applied at.
pub(crate) struct StoredEvent {
    /// Its sequence number.
    pub seq: i64,
    /// The event, as JSON.
    pub event: String,
    /// The book's time when it was applied, ms since the Unix epoch.
    pub at_ms: u64,
}

/// The stored snapshot: the book and the clearing requests taken after event `through`.
pub(crate) struct StoredSnapshot {
    /// The last event it holds.
    pub through: i64,
    /// The book ([`pog_market::BookSnapshot`] as JSON).
    pub book: String,
    /// The clearing requests taken, as JSON.
    pub taken: String,
}

/// A renter's last withdrawal request taken, and what its voucher holds until it expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Withdrawn {
    /// The request's `at_ms`: a later request must be newer.
    pub at_ms: u64,
    /// What the voucher may take out, micro-dollars (with what an earlier voucher still
    /// unexpired held when it was signed).
    pub amount: u64,
    /// When it expires, ms since the Unix epoch.
    pub until_ms: u64,
}

impl Withdrawn {
    /// What the voucher holds of the deposit at `now_ms`: its amount, 0 once it expired.
    pub fn holds_at(&self, now_ms: u64) -> u64 {
        if now_ms < self.until_ms {
            self.amount
        } else {
            0
        }
    }
}

/// How long a hold row is kept past its voucher's expiry: by then a request as old as the
/// one it took is refused by its age anyway (the request is at most five minutes from the
/// clock when taken, the voucher lives ten), with five minutes to spare for the clocks of a
/// fleet.
const WITHDRAWAL_KEPT_MS: u64 = 5 * 60 * 1000;

/// The most price points kept per GPU in `price_history`, the oldest dropped first: a GPU
/// whose price changed at every round of a minute keeps about its last 16 hours of changes.
pub const MAX_PRICE_POINTS_PER_GPU: i64 = 1000;

/// The market's store: see the module's doc.
pub(crate) enum MarketStore {
    /// A SQLite file (or memory): one validator's book.
    Sqlite(Connection),
    /// The registry's PostgreSQL database: the fleet's one book.
    Postgres(PgMarket),
}

/// The market on PostgreSQL: a connection of its own for the events (whose transaction stays
/// open while the book judges a request) and one for handing leases (whose mark stays locked
/// while the ledger takes them); both used only under the market's own locks.
pub(crate) struct PgMarket {
    pg: PgRegistry,
    /// The `priced_through` key of this validator.
    priced_key: String,
    /// The connection the events are judged and appended on (under the sequence lock).
    events: Option<Arc<Client>>,
    /// The connection the leases are handed on (under the mark's lock).
    leases: Option<Arc<Client>>,
    /// Whether a transaction was opened on `events` (or `leases`) and not yet ended: one
    /// left open (a panic between the two) is rolled back before the next, so that the lock it
    /// holds never outlives its request.
    open: [bool; 2],
}

/// Which of [`PgMarket`]'s own connections.
#[derive(Clone, Copy)]
enum Conn {
    Events,
    Leases,
}

impl PgMarket {
    /// Runs `work` on the connection `which` (connected anew when it broke), on the store's
    /// runtime.
    fn on<T, F>(
        &mut self,
        which: Conn,
        work: impl FnOnce(Arc<Client>) -> F,
    ) -> Result<T, MarketError>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, RegistryError>> + Send + 'static,
    {
        let slot = match which {
            Conn::Events => &mut self.events,
            Conn::Leases => &mut self.leases,
        };
        let client = match slot.clone().filter(|c| !c.is_closed()) {
            Some(client) => client,
            None => {
                let client = Arc::new(
                    self.pg
                        .block(|pg| async move { pg.own_connection().await })?,
                );
                *slot = Some(client.clone());
                client
            }
        };
        let work = work(client);
        Ok(self.pg.block(|_| work)?)
    }

    /// Opens a transaction on `which` and runs `first` in it (rolled back if `first` fails);
    /// one left open before is rolled back first.
    fn begin_on<T, F>(
        &mut self,
        which: Conn,
        first: impl FnOnce(Arc<Client>) -> F + Send + 'static,
    ) -> Result<T, MarketError>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, RegistryError>> + Send + 'static,
    {
        let left_open = std::mem::replace(&mut self.open[which as usize], true);
        let begun = self.on(which, move |c| async move {
            let begin = if left_open {
                "ROLLBACK; BEGIN"
            } else {
                "BEGIN"
            };
            c.batch_execute(begin).await?;
            match first(c.clone()).await {
                Ok(value) => Ok(value),
                Err(e) => {
                    let _ = c.batch_execute("ROLLBACK").await;
                    Err(e)
                }
            }
        });
        self.open[which as usize] = begun.is_ok();
        begun
    }

    /// Ends the transaction on `which`: commits it (`commit`), or rolls it back.
    fn end_on(&mut self, which: Conn, commit: bool) -> Result<(), MarketError> {
        self.open[which as usize] = false;
        let sql = if commit { "COMMIT" } else { "ROLLBACK" };
        self.on(
            which,
            move |c| async move { Ok(c.batch_execute(sql).await?) },
        )
    }

    /// Runs `work` on a connection of the pool.
    fn pooled<T, F>(&self, work: impl FnOnce(PgRegistry) -> F) -> Result<T, MarketError>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, RegistryError>> + Send + 'static,
    {
        Ok(self.pg.block(work)?)
    }
}

/// The database's clock, ms since the Unix epoch, as SQL.
const DB_NOW_MS: &str = "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT";

impl MarketStore {
    /// The store in the SQLite file `path` (`None`: in memory), its tables created if needed.
    pub(crate) fn sqlite(path: Option<&Path>) -> Result<MarketStore, MarketError> {
        let db = match path {
            Some(p) => Connection::open(p)?,
            None => Connection::open_in_memory()?,
        };
        db.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
             CREATE TABLE IF NOT EXISTS market_events (
                 seq INTEGER PRIMARY KEY,
                 kind TEXT NOT NULL,
                 event TEXT NOT NULL,
                 at_ms INTEGER NOT NULL
             );
             CREATE TABLE IF NOT EXISTS price_history (
                 seq INTEGER PRIMARY KEY,
                 gpu_uuid TEXT NOT NULL,
                 at_ms INTEGER NOT NULL,
                 point TEXT NOT NULL
             );
             CREATE INDEX IF NOT EXISTS price_history_by_gpu ON price_history (gpu_uuid, seq);
             CREATE TABLE IF NOT EXISTS market_meta (
                 key TEXT PRIMARY KEY,
                 value INTEGER NOT NULL
             );
             CREATE TABLE IF NOT EXISTS market_snapshot (
                 id INTEGER PRIMARY KEY CHECK (id = 1),
                 through_seq INTEGER NOT NULL,
                 book TEXT NOT NULL,
                 taken TEXT NOT NULL
             );
             CREATE TABLE IF NOT EXISTS market_withdrawals (
                 renter TEXT PRIMARY KEY,
                 at_ms INTEGER NOT NULL,
                 amount INTEGER NOT NULL,
                 until_ms INTEGER NOT NULL
             );",
        )?;
        Ok(MarketStore::Sqlite(db))
    }

    /// The store in `pg`'s database (its schema is the registry's, migrated when it
    /// connected), for the validator `validator`.
    pub(crate) fn postgres(pg: PgRegistry, validator: &str) -> MarketStore {
        MarketStore::Postgres(PgMarket {
            pg,
            priced_key: format!("priced_through/{}", validator.to_ascii_lowercase()),
            events: None,
            leases: None,
            open: [false; 2],
        })
    }

    /// Whether other validators append to it too (then the book catches up before it reads).
    pub(crate) fn shared(&self) -> bool {
        matches!(self, MarketStore::Postgres(_))
    }

    /// Opens a transaction for one request: on PostgreSQL, with the sequence row locked until
    /// [`MarketStore::finish`], and the database's time (the time the request is judged at);
    /// `None` on SQLite (the validator's clock then).
    pub(crate) fn begin(&mut self) -> Result<Option<u64>, MarketError> {
        match self {
            MarketStore::Sqlite(db) => {
                db.execute_batch("BEGIN IMMEDIATE")?;
                Ok(None)
            }
            MarketStore::Postgres(pg) => {
                let now: i64 = pg.begin_on(Conn::Events, |c| async move {
                    let sql = format!("SELECT {DB_NOW_MS} FROM market_sequence FOR UPDATE");
                    Ok(c.query_one(&sql, &[]).await?.try_get(0)?)
                })?;
                Ok(Some(now.max(0) as u64))
            }
        }
    }

    /// Appends an event inside the transaction [`MarketStore::begin`] opened: its number.
    pub(crate) fn append(
        &mut self,
        kind: &str,
        event: &str,
        at_ms: u64,
    ) -> Result<i64, MarketError> {
        match self {
            MarketStore::Sqlite(db) => {
                db.execute(
                    "INSERT INTO market_events (kind, event, at_ms) VALUES (?1, ?2, ?3)",
                    params![kind, event, at_ms as i64],
                )?;
                Ok(db.last_insert_rowid())
            }
            MarketStore::Postgres(pg) => {
                let (kind, event) = (kind.to_owned(), event.to_owned());
                pg.on(Conn::Events, |c| async move {
                    let seq: i64 = c
                        .query_one(
                            "UPDATE market_sequence SET next_seq = next_seq + 1 RETURNING next_seq - 1",
                            &[],
                        )
                        .await?
                        .try_get(0)?;
                    c.execute(
                        "INSERT INTO market_events (seq, kind, event, at_ms) VALUES ($1, $2, $3, $4)",
                        &[&seq, &kind, &event, &(at_ms as i64)],
                    )
                    .await?;
                    Ok(seq)
                })
            }
        }
    }

    /// Ends the transaction [`MarketStore::begin`] opened: commits it (`commit`), or rolls it
    /// back.
    pub(crate) fn finish(&mut self, commit: bool) -> Result<(), MarketError> {
        match self {
            MarketStore::Sqlite(db) => {
                Ok(db.execute_batch(if commit { "COMMIT" } else { "ROLLBACK" })?)
            }
            MarketStore::Postgres(pg) => pg.end_on(Conn::Events, commit),
        }
    }

    /// `renter`'s withdrawal hold, read inside the transaction [`MarketStore::begin`] opened
    /// when one is open (rows are keyed by the key in lower case, however it was written).
    pub(crate) fn withdrawal(
        &mut self,
        renter: &PublicKey,
    ) -> Result<Option<Withdrawn>, MarketError> {
        let renter = renter.as_str().to_ascii_lowercase();
        const SQL: &str = "SELECT at_ms, amount, until_ms FROM market_withdrawals WHERE renter = ";
        let hold = |at: i64, amount: i64, until: i64| Withdrawn {
            at_ms: u64::try_from(at).unwrap_or(0),
            amount: u64::try_from(amount).unwrap_or(0),
            until_ms: u64::try_from(until).unwrap_or(0),
        };
        match self {
            MarketStore::Sqlite(db) => Ok(db
                .query_row(&format!("{SQL}?1"), [renter], |r| {
                    Ok(hold(r.get(0)?, r.get(1)?, r.get(2)?))
                })
                .optional()?),
            MarketStore::Postgres(pg) => pg.on(Conn::Events, move |c| async move {
                let row = c.query_opt(&format!("{SQL}$1"), &[&renter]).await?;
                Ok(row
                    .map(|r| {
                        Ok::<_, tokio_postgres::Error>(hold(
                            r.try_get(0)?,
                            r.try_get(1)?,
                            r.try_get(2)?,
                        ))
                    })
                    .transpose()?)
            }),
        }
    }

    /// Sets `renter`'s withdrawal hold (`None`: drops it) inside the transaction
    /// [`MarketStore::begin`] opened, and drops every renter's hold that expired more than
    /// [`WITHDRAWAL_KEPT_MS`] before `now_ms`. A figure beyond the database's integers is
    /// kept as the largest (a hold that large holds any deposit).
    pub(crate) fn put_withdrawal(
        &mut self,
        renter: &PublicKey,
        hold: Option<Withdrawn>,
        now_ms: u64,
    ) -> Result<(), MarketError> {
        const UPSERT: &str = "INSERT INTO market_withdrawals (renter, at_ms, amount, until_ms) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (renter) DO UPDATE SET at_ms = excluded.at_ms, amount = excluded.amount, until_ms = excluded.until_ms";
        const DELETE: &str = "DELETE FROM market_withdrawals WHERE renter = $1";
        const PRUNE: &str = "DELETE FROM market_withdrawals WHERE until_ms < $1";
        let int = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let row = hold.map(|h| [int(h.at_ms), int(h.amount), int(h.until_ms)]);
        let expired = int(now_ms.saturating_sub(WITHDRAWAL_KEPT_MS));
        let renter = renter.as_str().to_ascii_lowercase();
        match self {
            MarketStore::Sqlite(db) => {
                // SQLite numbers named parameters (`$1`, …) in the order they first appear:
                // in these statements, as PostgreSQL does.
                match row {
                    Some([at, amount, until]) => {
                        db.execute(UPSERT, params![renter, at, amount, until])?
                    }
                    None => db.execute(DELETE, params![renter])?,
                };
                db.execute(PRUNE, params![expired])?;
                Ok(())
            }
            MarketStore::Postgres(pg) => pg.on(Conn::Events, move |c| async move {
                match row {
                    Some([at, amount, until]) => {
                        c.execute(UPSERT, &[&renter, &at, &amount, &until]).await?
                    }
                    None => c.execute(DELETE, &[&renter]).await?,
                };
                c.execute(PRUNE, &[&expired]).await?;
                Ok(())
            }),
        }
    }

    /// The stored snapshot, if one was written.
    pub(crate) fn snapshot(&mut self) -> Result<Option<StoredSnapshot>, MarketError> {
        match self {
            MarketStore::Sqlite(db) => Ok(db
                .query_row(
                    "SELECT through_seq, book, taken FROM market_snapshot WHERE id = 1",
                    [],
                    |r| {
                        Ok(StoredSnapshot {
                            through: r.get(0)?,
                            book: r.get(1)?,
                            taken: r.get(2)?,
                        })
                    },
                )
                .optional()?),
            MarketStore::Postgres(pg) => pg.on(Conn::Events, |c| async move {
                let row = c
                    .query_opt("SELECT through_seq, book, taken FROM market_snapshot", &[])
                    .await?;
                Ok(row
                    .map(|r| {
                        Ok::<_, tokio_postgres::Error>(StoredSnapshot {
                            through: r.try_get(0)?,
                            book: r.try_get(1)?,
                            taken: r.try_get(2)?,
                        })
                    })
                    .transpose()?)
            }),
        }
    }

    /// The events numbered above `seq`, in order (inside the transaction, when one is open).
    pub(crate) fn events_after(&mut self, seq: i64) -> Result<Vec<StoredEvent>, MarketError> {
        let event = |seq: i64, event: String, at_ms: i64| StoredEvent {
            seq,
            event,
            at_ms: u64::try_from(at_ms).unwrap_or(0),
        };
        match self {
            MarketStore::Sqlite(db) => {
                let mut stmt = db.prepare(
                    "SELECT seq, event, at_ms FROM market_events WHERE seq > ?1 ORDER BY seq",
                )?;
                let rows = stmt.query_map([seq], |r| Ok(event(r.get(0)?, r.get(1)?, r.get(2)?)))?;
                Ok(rows.collect::<Result<_, _>>()?)
            }
            MarketStore::Postgres(pg) => pg.on(Conn::Events, move |c| async move {
                let rows = c
                    .query(
                        "SELECT seq, event, at_ms FROM market_events WHERE seq > $1 ORDER BY seq",
                        &[&seq],
                    )
                    .await?;
                rows.iter()
                    .map(|r| Ok(event(r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
                    .collect()
            }),
        }
    }

    /// How many events the store holds (those after the last snapshot, and the one it was
    /// taken at).
    pub(crate) fn stored_events(&mut self) -> Result<u64, MarketError> {
        match self {
            MarketStore::Sqlite(db) => {
                Ok(db.query_row("SELECT COUNT(*) FROM market_events", [], |r| r.get(0))?)
            }
            MarketStore::Postgres(pg) => pg.pooled(|pg| async move {
                let client = pg.connection().await?;
                let n: i64 = client
                    .query_one("SELECT COUNT(*) FROM market_events", &[])
                    .await?
                    .try_get(0)?;
                Ok(n.max(0) as u64)
            }),
        }
    }

    /// Stores the book's state after event `through` (`book` and `taken` as JSON) as the
    /// snapshot, unless one as late is stored, and deletes the events before it (the last is
    /// kept, so that new events are numbered after it), in one transaction.
    pub(crate) fn write_snapshot(
        &mut self,
        through: i64,
        book: &str,
        taken: &str,
    ) -> Result<(), MarketError> {
        match self {
            MarketStore::Sqlite(db) => {
                let tx = db.transaction()?;
                tx.execute(
                    "INSERT INTO market_snapshot (id, through_seq, book, taken) VALUES (1, ?1, ?2, ?3)
                     ON CONFLICT(id) DO UPDATE SET through_seq = ?1, book = ?2, taken = ?3
                     WHERE through_seq < ?1",
                    params![through, book, taken],
                )?;
                tx.execute("DELETE FROM market_events WHERE seq < ?1", params![through])?;
                tx.commit()?;
                Ok(())
            }
            MarketStore::Postgres(pg) => {
                let (book, taken) = (book.to_owned(), taken.to_owned());
                pg.pooled(move |pg| async move {
                    let mut client = pg.connection().await?;
                    let tx = client.transaction().await?;
                    tx.execute(
                        "INSERT INTO market_snapshot (only_row, through_seq, book, taken) VALUES (TRUE, $1, $2, $3) \
                         ON CONFLICT (only_row) DO UPDATE SET through_seq = EXCLUDED.through_seq, book = EXCLUDED.book, taken = EXCLUDED.taken \
                         WHERE market_snapshot.through_seq < EXCLUDED.through_seq",
                        &[&through, &book, &taken],
                    )
                    .await?;
                    tx.execute("DELETE FROM market_events WHERE seq < $1", &[&through])
                        .await?;
                    tx.commit().await?;
                    Ok(())
                })
            }
        }
    }

    /// Opens the hand-off of leases to the ledger: the last clearing whose leases were taken
    /// (`None`: none yet), its mark locked until [`MarketStore::end_handing`] (on PostgreSQL:
    /// one validator of the fleet hands at a time).
    pub(crate) fn begin_handing(&mut self) -> Result<Option<u64>, MarketError> {
        let through: Option<i64> = match self {
            MarketStore::Sqlite(db) => db
                .query_row(
                    "SELECT value FROM market_meta WHERE key = 'leases_logged_through'",
                    [],
                    |r| r.get(0),
                )
                .optional()?,
            MarketStore::Postgres(pg) => pg.begin_on(Conn::Leases, |c| async move {
                c.batch_execute(
                    "INSERT INTO market_meta (key, value) VALUES ('leases_logged_through', -1) ON CONFLICT (key) DO NOTHING",
                )
                .await?;
                let sql = "SELECT value FROM market_meta WHERE key = 'leases_logged_through' FOR UPDATE";
                Ok(Some(c.query_one(sql, &[]).await?.try_get(0)?))
            })?,
        };
        Ok(through.and_then(|t| u64::try_from(t).ok()))
    }

    /// Marks the leases of clearing `number` taken (within the hand-off).
    pub(crate) fn mark_handed(&mut self, number: u64) -> Result<(), MarketError> {
        let number = number as i64;
        match self {
            MarketStore::Sqlite(db) => {
                db.execute(
                    "INSERT INTO market_meta (key, value) VALUES ('leases_logged_through', ?1) ON CONFLICT(key) DO UPDATE SET value = MAX(value, ?1)",
                    params![number],
                )?;
                Ok(())
            }
            MarketStore::Postgres(pg) => pg.on(Conn::Leases, move |c| async move {
                c.execute(
                    "UPDATE market_meta SET value = GREATEST(value, $1) WHERE key = 'leases_logged_through'",
                    &[&number],
                )
                .await?;
                Ok(())
            }),
        }
    }

    /// Ends the hand-off [`MarketStore::begin_handing`] opened, keeping its marks
    /// (`commit`), or not.
    pub(crate) fn end_handing(&mut self, commit: bool) -> Result<(), MarketError> {
        match self {
            MarketStore::Sqlite(_) => Ok(()),
            MarketStore::Postgres(pg) => pg.end_on(Conn::Leases, commit),
        }
    }

    /// The last registry record the posted prices have taken in (`None`: none yet).
    pub(crate) fn priced_through(&mut self) -> Result<Option<i64>, MarketError> {
        match self {
            MarketStore::Sqlite(db) => Ok(db
                .query_row(
                    "SELECT value FROM market_meta WHERE key = ?1",
                    [SQLITE_PRICED_THROUGH],
                    |r| r.get(0),
                )
                .optional()?),
            MarketStore::Postgres(pg) => {
                let key = pg.priced_key.clone();
                pg.pooled(move |pg| async move {
                    let client = pg.connection().await?;
                    Ok(client
                        .query_opt("SELECT value FROM market_meta WHERE key = $1", &[&key])
                        .await?
                        .map(|r| r.try_get(0))
                        .transpose()?)
                })
            }
        }
    }

    /// Stores price points (each GPU's, its time, the point as JSON), keeps each GPU's
    /// latest [`MAX_PRICE_POINTS_PER_GPU`], and raises `priced_through` to `through`, in
    /// one transaction.
    pub(crate) fn post_prices(
        &mut self,
        points: &[(String, u64, String)],
        through: i64,
    ) -> Result<(), MarketError> {
        let gpus: std::collections::BTreeSet<String> =
            points.iter().map(|(gpu, _, _)| gpu.clone()).collect();
        match self {
            MarketStore::Sqlite(db) => {
                let tx = db.transaction()?;
                for (gpu, at_ms, text) in points {
                    tx.execute(
                        "INSERT INTO price_history (gpu_uuid, at_ms, point) VALUES (?1, ?2, ?3)",
                        params![gpu, *at_ms as i64, text],
                    )?;
                }
                for gpu in gpus {
                    tx.execute(
                        "DELETE FROM price_history WHERE gpu_uuid = ?1 AND seq <= (SELECT seq FROM price_history WHERE gpu_uuid = ?1 ORDER BY seq DESC LIMIT 1 OFFSET ?2)",
                        params![gpu, MAX_PRICE_POINTS_PER_GPU],
                    )?;
                }
                tx.execute(
                    "INSERT INTO market_meta (key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = MAX(value, ?2)",
                    params![SQLITE_PRICED_THROUGH, through],
                )?;
                tx.commit()?;
                Ok(())
            }
            MarketStore::Postgres(pg) => {
                let key = pg.priced_key.clone();
                let points = points.to_vec();
                pg.pooled(move |pg| async move {
                    let mut client = pg.connection().await?;
                    let tx = client.transaction().await?;
                    for (gpu, at_ms, text) in &points {
                        tx.execute(
                            "INSERT INTO price_history (gpu_uuid, at_ms, point) VALUES ($1, $2, $3)",
                            &[gpu, &(*at_ms as i64), text],
                        )
                        .await?;
                    }
                    for gpu in &gpus {
                        tx.execute(
                            "DELETE FROM price_history WHERE gpu_uuid = $1 AND seq <= (SELECT seq FROM price_history WHERE gpu_uuid = $1 ORDER BY seq DESC LIMIT 1 OFFSET $2)",
                            &[gpu, &MAX_PRICE_POINTS_PER_GPU],
                        )
                        .await?;
                    }
                    tx.execute(
                        "INSERT INTO market_meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = GREATEST(market_meta.value, EXCLUDED.value)",
                        &[&key, &through],
                    )
                    .await?;
                    tx.commit().await?;
                    Ok(())
                })
            }
        }
    }

    /// A GPU's price points numbered above `after`, oldest first, at most `limit`; with
    /// `latest`, only its newest.
    pub(crate) fn prices(
        &mut self,
        gpu_uuid: &str,
        after: i64,
        limit: usize,
        latest: bool,
    ) -> Result<Vec<(i64, String)>, MarketError> {
        let order = if latest { "DESC" } else { "" };
        let limit = if latest { 1 } else { limit as i64 };
        match self {
            MarketStore::Sqlite(db) => {
                let mut stmt = db.prepare(&format!(
                    "SELECT seq, point FROM price_history WHERE gpu_uuid = ?1 AND seq > ?2 ORDER BY seq {order} LIMIT ?3"
                ))?;
                let rows = stmt.query_map(params![gpu_uuid, after, limit], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })?;
                Ok(rows.collect::<Result<_, _>>()?)
            }
            MarketStore::Postgres(pg) => {
                let gpu_uuid = gpu_uuid.to_owned();
                pg.pooled(move |pg| async move {
                    let client = pg.connection().await?;
                    let rows = client
                        .query(
                            &format!("SELECT seq, point FROM price_history WHERE gpu_uuid = $1 AND seq > $2 ORDER BY seq {order} LIMIT $3"),
                            &[&gpu_uuid, &after, &limit],
                        )
                        .await?;
                    rows.iter()
                        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
                        .collect()
                })
            }
        }
    }
}

/// The key of `priced_through` in a validator's own SQLite file (in a fleet's database, each
/// validator's is `priced_through/<its key>`).
const SQLITE_PRICED_THROUGH: &str = "priced_through";
