//! The registry on PostgreSQL (`pog validator --database postgres://…`): the same agents, GPUs,
//! releases and records as the embedded SQLite registry, in one database that several
//! validators share. A GPU is one agent's across every validator on the database (its row is
//! the one place a claim is made, under the agent's row lock), and a record stored by one is
//! read by all.
//!
//! The store is async (tokio-postgres) and keeps a few connections of its own. It runs on a
//! runtime of its own, one thread: the validator's subsystems that still call the registry
//! from blocking code ([`crate::registry::Registry`]'s methods) wait on it from any thread or
//! runtime, and a caller on a single-threaded runtime never waits on a connection task that
//! only its own thread could drive.

use pog_proof::wire::{GpuClaim, HostClaim};
use pog_records::{Change, RECORD_VERSION};
use pog_signed::{GpuUuid, PublicKey};
use std::future::Future;
use std::sync::{Arc, Mutex};
use tokio_postgres::{Client, NoTls, Row};

use crate::pg_tls::Transport;

use crate::registry_model::{
    change_of, check_bar, check_cap, check_version, cut_page, ram_claim, ram_column,
    still_unrecorded, storage_claim, storage_columns, unrecorded_name, NewRecord, RegisteredGpu,
    RegistryError, UnrecordedRelease,
};

/// The registry's schema, one step per version: step `i` takes a database at version `i` to
/// `i + 1` ([`SCHEMA_VERSION`] steps in all). A step is never changed once released: a new
/// column is a new step.
const MIGRATIONS: &[&str] = &["
CREATE TABLE agents (key TEXT PRIMARY KEY, endpoint TEXT NOT NULL);
CREATE TABLE gpus (uuid TEXT PRIMARY KEY, agent TEXT NOT NULL REFERENCES agents(key), model TEXT NOT NULL, bus_id TEXT NOT NULL, simulated BOOLEAN NOT NULL DEFAULT FALSE);
CREATE INDEX gpus_by_agent ON gpus (agent, uuid);
CREATE TABLE released (uuid TEXT NOT NULL, agent TEXT NOT NULL, until_ms BIGINT NOT NULL, PRIMARY KEY (uuid, agent));
CREATE TABLE records (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    challenge_id TEXT NOT NULL UNIQUE,
    gpu_uuid TEXT NOT NULL,
    accepted BOOLEAN NOT NULL,
    version BIGINT NOT NULL,
    kind TEXT,
    envelope TEXT NOT NULL
);
CREATE INDEX records_by_gpu ON records (gpu_uuid, id);
", "
ALTER TABLE agents ADD COLUMN cores INTEGER;
CREATE TABLE validators (key TEXT PRIMARY KEY, seen_ms BIGINT NOT NULL);
CREATE TABLE slot_claims (slot BIGINT NOT NULL, gpu_uuid TEXT NOT NULL, validator TEXT NOT NULL, lease_until_ms BIGINT NOT NULL, after_record BIGINT NOT NULL, done BOOLEAN NOT NULL DEFAULT FALSE, PRIMARY KEY (slot, gpu_uuid));
CREATE INDEX slot_claims_open ON slot_claims (done, lease_until_ms);
ALTER TABLE records ALTER COLUMN id DROP IDENTITY IF EXISTS;
CREATE TABLE record_sequence (only_row BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (only_row), next_id BIGINT NOT NULL);
INSERT INTO record_sequence (next_id) SELECT COALESCE(MAX(id), 0) + 1 FROM records;
", "
ALTER TABLE agents ADD COLUMN token_owner TEXT;
", "
ALTER TABLE agents ADD COLUMN storage_bytes BIGINT;
ALTER TABLE agents ADD COLUMN storage_class TEXT;
", "
CREATE TABLE log_entries (idx BIGINT PRIMARY KEY, entry BYTEA NOT NULL);
CREATE TABLE log_sequence (only_row BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (only_row), next_idx BIGINT NOT NULL);
INSERT INTO log_sequence (next_idx) VALUES (0);
CREATE TABLE log_key (only_row BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (only_row), vkey TEXT NOT NULL);
CREATE TABLE log_checkpoint (only_row BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (only_row), size BIGINT NOT NULL, text TEXT NOT NULL);
CREATE TABLE fleet_leases (name TEXT PRIMARY KEY, holder TEXT NOT NULL, token BIGINT NOT NULL, expires_ms BIGINT NOT NULL);
ALTER TABLE slot_claims ADD COLUMN missed BOOLEAN NOT NULL DEFAULT FALSE;
CREATE TABLE fleet_settings (name TEXT PRIMARY KEY, value TEXT NOT NULL);
", "
ALTER TABLE agents ADD COLUMN ram_bytes BIGINT;
", "
CREATE TABLE market_events (seq BIGINT PRIMARY KEY, kind TEXT NOT NULL, event TEXT NOT NULL, at_ms BIGINT NOT NULL);
CREATE TABLE market_sequence (only_row BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (only_row), next_seq BIGINT NOT NULL);
INSERT INTO market_sequence (next_seq) VALUES (1);
CREATE TABLE market_snapshot (only_row BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (only_row), through_seq BIGINT NOT NULL, book TEXT NOT NULL, taken TEXT NOT NULL);
CREATE TABLE market_meta (key TEXT PRIMARY KEY, value BIGINT NOT NULL);
CREATE TABLE price_history (seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, gpu_uuid TEXT NOT NULL, at_ms BIGINT NOT NULL, point TEXT NOT NULL);
CREATE INDEX price_history_by_gpu ON price_history (gpu_uuid, seq);
CREATE SEQUENCE settlement_versions;
CREATE TABLE settlements (seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, lease_id TEXT NOT NULL, period BIGINT NOT NULL, renter TEXT NOT NULL, provider TEXT NOT NULL, paid BIGINT NOT NULL, state BIGINT NOT NULL, record TEXT NOT NULL, version BIGINT NOT NULL, UNIQUE (lease_id, period));
CREATE INDEX settlements_by_version ON settlements (version);
CREATE TABLE undelivered (lease_id TEXT PRIMARY KEY, at_ms BIGINT NOT NULL, reason TEXT NOT NULL);
", "
CREATE TABLE market_withdrawals (renter TEXT PRIMARY KEY, at_ms BIGINT NOT NULL, amount BIGINT NOT NULL, until_ms BIGINT NOT NULL);
", "
ALTER TABLE gpus ADD COLUMN unrecorded TEXT;
", "
CREATE TABLE unrecorded_releases (record_id TEXT PRIMARY KEY, gpu_uuid TEXT NOT NULL, at_ms BIGINT NOT NULL, record TEXT NOT NULL);
", "
CREATE TABLE set_up_paces (key TEXT PRIMARY KEY, fastest_ms DOUBLE PRECISION NOT NULL);
"];

/// Gives `entry` the fleet's log's next index within the transaction `tx` (the sequence row
/// stays locked until `tx` ends, so the entries commit in index order); its index.
pub(crate) async fn sequence_log_entry(
    tx: &tokio_postgres::Transaction<'_>,
    entry: &[u8],
) -> Result<u64, RegistryError> {
    let index: i64 = tx
        .query_one(
            "UPDATE log_sequence SET next_idx = next_idx + 1 RETURNING next_idx - 1",
            &[],
        )
        .await?
        .try_get(0)?;
    tx.execute(
        "INSERT INTO log_entries (idx, entry) VALUES ($1, $2)",
        &[&index, &entry],
    )
    .await?;
    Ok(index as u64)
}

/// Fencing of a round's record by its slot's claim, within the record's transaction `tx`: the
/// claim of `gpu_uuid` by `validator` in `slot` (the round's slot) is locked; open, it is
/// marked done (a round recorded is its slot's claim finished); settled by another
/// validator's sweep as the fleet's miss (its lease ran out while this one was cut off from
/// the database), it refuses this late record, so the slot keeps one record. Whichever
/// commits first wins: the sweep settles only a claim not done. A record names its own slot,
/// so one that arrives after its validator claimed a later slot of the GPU neither finishes
/// that slot's claim nor escapes its own. With no claim (a lone validator's rounds) nothing
/// is fenced.
async fn fence_round(
    tx: &tokio_postgres::Transaction<'_>,
    (slot, gpu_uuid): (u64, &str),
    validator: &str,
) -> Result<(), RegistryError> {
    let claim = tx
        .query_opt(
            "SELECT done, missed FROM slot_claims WHERE slot = $1 AND gpu_uuid = $2 \
             AND validator = $3 FOR UPDATE",
            &[&(slot as i64), &gpu_uuid, &validator],
        )
        .await?;
    let Some(claim) = claim else {
        return Ok(());
    };
    let (done, missed): (bool, bool) = (claim.try_get(0)?, claim.try_get(1)?);
    if missed {
        return Err(RegistryError::Fenced {
            gpu: gpu_uuid.to_owned(),
            slot,
        });
    }
    if !done {
        tx.execute(
            "UPDATE slot_claims SET done = TRUE WHERE slot = $1 AND gpu_uuid = $2",
            &[&(slot as i64), &gpu_uuid],
        )
        .await?;
    }
    Ok(())
}

/// The schema version this pog writes and reads.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// An arbitrary key of the advisory lock that validators starting at once on one database take
/// to migrate it one at a time.
const MIGRATION_LOCK: i64 = 0x706f_675f_7265_6731;

/// Connections kept open between uses.
const KEPT_CONNECTIONS: usize = 8;

/// Connections in use at once at most (each caller beyond waits for one).
const MAX_CONNECTIONS: usize = 16;

/// A PostgreSQL error with its causes (the driver's `Display` says only "db error"), and what
/// to do: where the server answered, its own message and hint say it (a full disk: "could not
/// extend file …", "HINT: Check free disk space."); where it refused the client certificate,
/// or wants one, what to give ([`crate::pg_tls::client_certificate_refused`]); where it did not
/// answer, check that it is up.
pub(crate) fn described(e: &tokio_postgres::Error) -> RegistryError {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    if let Some(what_to_do) = crate::pg_tls::client_certificate_refused(e) {
        text.push_str("; ");
        text.push_str(what_to_do);
    } else if e.as_db_error().is_none() {
        text.push_str("; check that the server is up and that the --database URL reaches it");
    }
    RegistryError::Postgres(text)
}

impl From<tokio_postgres::Error> for RegistryError {
    fn from(e: tokio_postgres::Error) -> RegistryError {
        described(&e)
    }
}

/// `url` without its password (to print).
pub fn redacted(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let user_info = &url[scheme + 3..at];
            match user_info.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

/// The registry on a PostgreSQL database: cheap to clone (the clones share the connections).
#[derive(Clone)]
pub struct PgRegistry {
    pool: Arc<Pool>,
    runtime: Arc<StoreRuntime>,
}

/// The connections: those kept idle, and permits for those in use.
pub(crate) struct Pool {
    config: tokio_postgres::Config,
    transport: Transport,
    idle: Mutex<Vec<Client>>,
    permits: tokio::sync::Semaphore,
}

/// A connection taken from the pool, given back when dropped (unless it broke).
pub(crate) struct Lease<'a> {
    client: Option<Client>,
    pool: &'a Pool,
    _permit: tokio::sync::SemaphorePermit<'a>,
}

impl std::ops::Deref for Lease<'_> {
    type Target = Client;
    fn deref(&self) -> &Client {
        self.client.as_ref().expect("held until dropped")
    }
}

impl std::ops::DerefMut for Lease<'_> {
    fn deref_mut(&mut self) -> &mut Client {
        self.client.as_mut().expect("held until dropped")
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            let mut idle = self.pool.idle.lock().unwrap_or_else(|p| p.into_inner());
            if !client.is_closed() && idle.len() < KEPT_CONNECTIONS {
                idle.push(client);
            }
        }
    }
}

impl Pool {
    /// A new connection, in the clear or over TLS as the URL asked ([`crate::pg_tls`]),
    /// driven by a task of its own that says when it closes (as `whose`'s).
    async fn connect(&self, whose: &'static str) -> Result<Client, RegistryError> {
        match &self.transport {
            Transport::Plain => drive(self.config.connect(NoTls).await?, whose),
            Transport::Tls(tls) => drive(self.config.connect(tls.clone()).await?, whose),
        }
    }

    /// A connection: one kept, else a new one.
    pub(crate) async fn get(&self) -> Result<Lease<'_>, RegistryError> {
        let permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| RegistryError::Postgres("the store is closing".into()))?;
        let kept = {
            let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
            std::iter::from_fn(|| idle.pop()).find(|c| !c.is_closed())
        };
        let client = match kept {
            Some(client) => client,
            None => self.connect("registry").await?,
        };
        Ok(Lease {
            client: Some(client),
            pool: self,
            _permit: permit,
        })
    }
}

/// Spawns the task that drives `connection` (its client's messages go through it); `client`.
fn drive<S, T>(
    (client, connection): (Client, tokio_postgres::Connection<S, T>),
    whose: &'static str,
) -> Result<Client, RegistryError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!(error = %described(&e), "a PostgreSQL connection of the {whose} closed");
        }
    });
    Ok(client)
}

/// The store's own runtime, on a thread of its own; it stops when the last handle goes.
struct StoreRuntime {
    handle: tokio::runtime::Handle,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl StoreRuntime {
    fn start() -> Result<StoreRuntime, RegistryError> {
        let failed = |e: std::io::Error| {
            RegistryError::Postgres(format!("starting the store's runtime: {e}"))
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(failed)?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("pog-postgres".into())
            .spawn(move || {
                runtime.block_on(async {
                    let _ = stopped.await;
                })
            })
            .map_err(failed)?;
        Ok(StoreRuntime {
            handle,
            _stop: stop,
        })
    }
}

impl PgRegistry {
    /// Connects to the database at `url` (`postgres://user:password@host:port/database`, or
    /// the `key=value` form; over TLS as its `sslmode` and `sslrootcert` say, in the clear
    /// with no `sslmode` only to this machine: [`crate::pg_tls`]), brings its schema up to
    /// this pog's version (a database of an older one is migrated; one of a newer pog is
    /// refused, with what to do), and keeps a few connections open from then on.
    pub fn connect(url: &str) -> Result<PgRegistry, RegistryError> {
        let (config, transport) = crate::pg_tls::parse(url)?;
        let registry = PgRegistry {
            pool: Arc::new(Pool {
                config,
                transport,
                idle: Mutex::new(Vec::new()),
                permits: tokio::sync::Semaphore::new(MAX_CONNECTIONS),
            }),
            runtime: Arc::new(StoreRuntime::start()?),
        };
        registry.block(|r| async move { r.migrate().await })?;
        Ok(registry)
    }

    /// A connection of the pool (held until dropped).
    pub(crate) async fn connection(&self) -> Result<Lease<'_>, RegistryError> {
        self.pool.get().await
    }

    /// A connection of its own, outside the pool, for a caller that keeps a transaction open
    /// across several calls (the market's sequence lock, [`crate::market_store`]); call it on
    /// the store's runtime ([`PgRegistry::block`]), which then drives it.
    pub(crate) async fn own_connection(&self) -> Result<Client, RegistryError> {
        self.pool.connect("market").await
    }

    /// Runs `work` on the store's runtime and waits for it (from blocking code, or from a task
    /// of any runtime: the store's connections are driven by its own thread).
    pub fn block<T, F>(&self, work: impl FnOnce(PgRegistry) -> F) -> Result<T, RegistryError>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, RegistryError>> + Send + 'static,
    {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let future = work(self.clone());
        self.runtime.handle.spawn(async move {
            let _ = tx.send(future.await);
        });
        rx.recv()
            .map_err(|_| RegistryError::Postgres("the store's runtime stopped".into()))?
    }

    /// Brings the schema to [`SCHEMA_VERSION`] under an advisory lock (validators starting at
    /// once migrate one after the other), or refuses a newer one.
    async fn migrate(&self) -> Result<(), RegistryError> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await?;
        tx.batch_execute("CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL)")
            .await?;
        let found: Option<i64> = tx
            .query_opt("SELECT MAX(version) FROM schema_version", &[])
            .await?
            .and_then(|row| row.get(0));
        let found = found.unwrap_or(0);
        check_version(found, SCHEMA_VERSION)?;
        for (from, step) in MIGRATIONS.iter().enumerate().skip(found as usize) {
            tx.batch_execute(step).await?;
            tracing::info!(
                from,
                to = from + 1,
                "migrated the registry's PostgreSQL schema"
            );
        }
        tx.execute("DELETE FROM schema_version", &[]).await?;
        tx.execute(
            "INSERT INTO schema_version (version) VALUES ($1)",
            &[&SCHEMA_VERSION],
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// [`crate::registry::Registry::register`] on this database.
    pub async fn register(
        &self,
        agent: &PublicKey,
        (endpoint, host): (&str, Option<HostClaim>),
        gpus: &[GpuClaim],
        now_ms: u64,
        max_gpus: usize,
    ) -> Result<Vec<Change>, RegistryError> {
        let agent = agent.as_str();
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let old_endpoint: Option<String> = tx
            .query_opt("SELECT endpoint FROM agents WHERE key = $1", &[&agent])
            .await?
            .map(|r| r.try_get(0))
            .transpose()?;
        let moved = old_endpoint.is_some_and(|old| old != endpoint);
        // The agent's row stays locked to the end: its registrations on every validator of
        // the fleet take turns, so the cap below counts them all.
        let (cores, token_owner) = (
            host.map(|h| h.cores as i32),
            host.and_then(|h| h.token_owner).map(|a| a.to_string()),
        );
        let (storage_bytes, storage_class) = storage_columns(host.as_ref());
        let ram_bytes = ram_column(host.as_ref());
        tx.execute(
            "INSERT INTO agents (key, endpoint, cores, token_owner, storage_bytes, storage_class, ram_bytes) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (key) DO UPDATE SET endpoint = $2, cores = $3, token_owner = $4, storage_bytes = $5, storage_class = $6, ram_bytes = $7",
            &[&agent, &endpoint, &cores, &token_owner, &storage_bytes, &storage_class, &ram_bytes],
        )
        .await?;
        let mut changes = Vec::with_capacity(gpus.len());
        for claim in gpus {
            let GpuClaim {
                uuid,
                model,
                bus_id,
                simulated,
            } = claim;
            let barred: Option<i64> = tx
                .query_opt(
                    "SELECT until_ms FROM released WHERE uuid = $1 AND agent = $2",
                    &[&uuid.as_str(), &agent],
                )
                .await?
                .map(|r| r.try_get(0))
                .transpose()?;
            check_bar(uuid, barred, now_ms)?;
            // The claim: a new row, or the one there already (locked: another validator's
            // registration of the same GPU waits for this one to end).
            let inserted = tx
                .execute(
                    "INSERT INTO gpus (uuid, agent, model, bus_id, simulated, unrecorded) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (uuid) DO NOTHING",
                    &[&uuid.as_str(), &agent, model, bus_id, simulated, &unrecorded_name(Change::New)],
                )
                .await?;
            if inserted == 1 {
                changes.push(Change::New);
                continue;
            }
            let row = tx
                .query_one(
                    "SELECT agent, model, bus_id, simulated, unrecorded FROM gpus WHERE uuid = $1 FOR UPDATE",
                    &[&uuid.as_str()],
                )
                .await?;
            let (owner, old_model, old_bus, old_simulated): (String, String, String, bool) = (
                row.try_get(0)?,
                row.try_get(1)?,
                row.try_get(2)?,
                row.try_get(3)?,
            );
            let unrecorded: Option<String> = row.try_get(4)?;
            if owner != agent {
                return Err(RegistryError::ClaimedElsewhere {
                    uuid: uuid.to_string(),
                    owner,
                });
            }
            let change = still_unrecorded(
                change_of((&old_model, &old_bus, old_simulated), claim, moved),
                unrecorded.as_deref(),
            );
            tx.execute(
                "UPDATE gpus SET model = $2, bus_id = $3, simulated = $4, unrecorded = $5 WHERE uuid = $1",
                &[&uuid.as_str(), model, bus_id, simulated, &unrecorded_name(change)],
            )
            .await?;
            changes.push(change);
        }
        let would_hold: i64 = tx
            .query_one("SELECT COUNT(*) FROM gpus WHERE agent = $1", &[&agent])
            .await?
            .try_get(0)?;
        check_cap(would_hold, max_gpus)?;
        tx.commit().await?;
        Ok(changes)
    }

    /// [`crate::registry::Registry::registrations_recorded`] on this database: one statement.
    pub async fn registrations_recorded(&self, uuids: &[String]) -> Result<(), RegistryError> {
        let client = self.pool.get().await?;
        client
            .execute(
                "UPDATE gpus SET unrecorded = NULL WHERE uuid = ANY($1)",
                &[&uuids],
            )
            .await?;
        Ok(())
    }

    /// [`crate::registry::Registry::release`] on this database.
    pub async fn release(
        &self,
        uuid: &str,
        barred_until_ms: u64,
        (reason, now_ms): (&str, u64),
    ) -> Result<Option<RegisteredGpu>, RegistryError> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let Some(row) = tx
            .query_opt(
                &format!("{GPU_SELECT} WHERE g.uuid = $1 FOR UPDATE OF g"),
                &[&uuid],
            )
            .await?
        else {
            return Ok(None);
        };
        let gpu = gpu_row(&row)?;
        tx.execute("DELETE FROM gpus WHERE uuid = $1", &[&uuid])
            .await?;
        tx.execute(
            "INSERT INTO released (uuid, agent, until_ms) VALUES ($1, $2, $3) ON CONFLICT (uuid, agent) DO UPDATE SET until_ms = $3",
            &[&uuid, &gpu.agent.as_str(), &(barred_until_ms as i64)],
        )
        .await?;
        let release = UnrecordedRelease::of(&gpu, reason, now_ms);
        tx.execute(
            "INSERT INTO unrecorded_releases (record_id, gpu_uuid, at_ms, record) VALUES ($1, $2, $3, $4)",
            &[&release.record_id, &uuid, &(now_ms as i64), &release.record_json()],
        )
        .await?;
        tx.commit().await?;
        Ok(Some(gpu))
    }

    /// [`crate::registry::Registry::unrecorded_releases`] on this database.
    pub async fn unrecorded_releases(&self) -> Result<Vec<UnrecordedRelease>, RegistryError> {
        let client = self.pool.get().await?;
        let rows = client
            .query(
                "SELECT record_id, record FROM unrecorded_releases ORDER BY at_ms, record_id",
                &[],
            )
            .await?;
        let mut releases = Vec::with_capacity(rows.len());
        for row in &rows {
            let json: &str = row.try_get(1)?;
            releases.extend(UnrecordedRelease::readable(row.try_get(0)?, json));
        }
        Ok(releases)
    }

    /// [`crate::registry::Registry::release_recorded`] on this database.
    pub async fn release_recorded(&self, record_id: &str) -> Result<(), RegistryError> {
        let client = self.pool.get().await?;
        client
            .execute(
                "DELETE FROM unrecorded_releases WHERE record_id = $1",
                &[&record_id],
            )
            .await?;
        Ok(())
    }

    /// [`crate::registry::Registry::gpus`] on this database.
    pub async fn gpus(
        &self,
        after: &str,
        limit: usize,
    ) -> Result<Vec<RegisteredGpu>, RegistryError> {
        let client = self.pool.get().await?;
        let rows = client
            .query(
                &format!("{GPU_SELECT} WHERE g.uuid > $1 ORDER BY g.uuid LIMIT $2"),
                &[&after, &(limit as i64)],
            )
            .await?;
        rows.iter().map(gpu_row).collect()
    }

    /// [`crate::registry::Registry::gpu`] on this database.
    pub async fn gpu(&self, uuid: &str) -> Result<Option<RegisteredGpu>, RegistryError> {
        let client = self.pool.get().await?;
        let row = client
            .query_opt(&format!("{GPU_SELECT} WHERE g.uuid = $1"), &[&uuid])
            .await?;
        row.as_ref().map(gpu_row).transpose()
    }

    /// [`crate::registry::Registry::gpus_named`] on this database.
    pub async fn gpus_named(&self, uuids: &[String]) -> Result<Vec<RegisteredGpu>, RegistryError> {
        let client = self.pool.get().await?;
        let rows = client
            .query(
                &format!("{GPU_SELECT} WHERE g.uuid = ANY($1::TEXT[])"),
                &[&uuids],
            )
            .await?;
        rows.iter().map(gpu_row).collect()
    }

    /// [`crate::registry::Registry::gpus_by_agent`] on this database.
    pub async fn gpus_by_agent(&self) -> Result<Vec<(String, Vec<String>)>, RegistryError> {
        let client = self.pool.get().await?;
        let rows = client
            .query("SELECT agent, uuid FROM gpus ORDER BY agent, uuid", &[])
            .await?;
        let mut groups: Vec<(String, Vec<String>)> = Vec::new();
        for row in rows {
            let (agent, uuid): (String, String) = (row.try_get(0)?, row.try_get(1)?);
            match groups.last_mut() {
                Some((last, uuids)) if *last == agent => uuids.push(uuid),
                _ => groups.push((agent, vec![uuid])),
            }
        }
        Ok(groups)
    }

    /// [`crate::registry::Registry::host_anchor`] on this database.
    pub async fn host_anchor(&self, agent: &str) -> Result<Option<String>, RegistryError> {
        let client = self.pool.get().await?;
        Ok(client
            .query_one("SELECT MIN(uuid) FROM gpus WHERE agent = $1", &[&agent])
            .await?
            .try_get(0)?)
    }

    /// [`crate::registry::Registry::server_time_ms`] on this database.
    pub async fn server_time_ms(&self) -> Result<u64, RegistryError> {
        let client = self.pool.get().await?;
        let ms: i64 = client
            .query_one(
                "SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT",
                &[],
            )
            .await?
            .try_get(0)?;
        Ok(ms.max(0) as u64)
    }

    /// [`crate::registry::Registry::heartbeat`] on this database.
    pub async fn heartbeat(
        &self,
        validator: &str,
        now_ms: u64,
    ) -> Result<Vec<(String, u64)>, RegistryError> {
        let client = self.pool.get().await?;
        client
            .execute(
                "INSERT INTO validators (key, seen_ms) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET seen_ms = GREATEST(validators.seen_ms, $2)",
                &[&validator, &(now_ms as i64)],
            )
            .await?;
        let rows = client
            .query("SELECT key, seen_ms FROM validators", &[])
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get::<_, i64>(1)?.max(0) as u64)))
            .collect()
    }

    /// [`crate::registry::Registry::fastest_set_up`] on this database.
    pub async fn fastest_set_up(&self, key: &str) -> Result<Option<f64>, RegistryError> {
        let client = self.pool.get().await?;
        let row = client
            .query_opt(
                "SELECT fastest_ms FROM set_up_paces WHERE key = $1",
                &[&key],
            )
            .await?;
        Ok(row.map(|r| r.try_get(0)).transpose()?)
    }

    /// [`crate::registry::Registry::note_set_up`] on this database.
    pub async fn note_set_up(&self, key: &str, ms: f64) -> Result<(), RegistryError> {
        let client = self.pool.get().await?;
        client
            .execute(
                "INSERT INTO set_up_paces (key, fastest_ms) VALUES ($1, $2) \
                 ON CONFLICT (key) DO UPDATE SET fastest_ms = LEAST(set_up_paces.fastest_ms, $2)",
                &[&key, &ms],
            )
            .await?;
        Ok(())
    }

    /// [`crate::registry::Registry::validator_keys`] on this database.
    pub async fn validator_keys(&self) -> Result<Vec<String>, RegistryError> {
        let client = self.pool.get().await?;
        let rows = client.query("SELECT key FROM validators", &[]).await?;
        rows.iter().map(|r| Ok(r.try_get(0)?)).collect()
    }

    /// [`crate::registry::Registry::adopt_fleet_setting`] on this database.
    pub async fn adopt_fleet_setting(
        &self,
        name: &str,
        value: &str,
        replace: bool,
    ) -> Result<Option<String>, RegistryError> {
        let client = self.pool.get().await?;
        let sql = match replace {
            true => "INSERT INTO fleet_settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value",
            false => "INSERT INTO fleet_settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
        };
        client.execute(sql, &[&name, &value]).await?;
        let found: String = client
            .query_one("SELECT value FROM fleet_settings WHERE name = $1", &[&name])
            .await?
            .try_get(0)?;
        Ok((found != value).then_some(found))
    }

    /// [`crate::registry::Registry::claim`] on this database: one statement, so that two
    /// validators claiming at once each get a GPU or not, never both.
    pub async fn claim(
        &self,
        (slot, validator): (u64, &str),
        uuids: &[String],
        lease_until_ms: u64,
    ) -> Result<Vec<String>, RegistryError> {
        let client = self.pool.get().await?;
        client
            .execute(
                "INSERT INTO slot_claims (slot, gpu_uuid, validator, lease_until_ms, after_record) SELECT $1, u, $3, $4, (SELECT COALESCE(MAX(id), 0) FROM records) FROM UNNEST($2::TEXT[]) AS u ON CONFLICT (slot, gpu_uuid) DO NOTHING",
                &[&(slot as i64), &uuids, &validator, &(lease_until_ms as i64)],
            )
            .await?;
        let rows = client
            .query(
                "SELECT gpu_uuid FROM slot_claims WHERE slot = $1 AND validator = $2 AND gpu_uuid = ANY($3::TEXT[]) ORDER BY gpu_uuid",
                &[&(slot as i64), &validator, &uuids],
            )
            .await?;
        rows.iter().map(|r| Ok(r.try_get(0)?)).collect()
    }

    /// [`crate::registry::Registry::abandoned_claims`] on this database.
    pub async fn abandoned_claims(
        &self,
        now_ms: u64,
    ) -> Result<Vec<crate::registry_model::AbandonedClaim>, RegistryError> {
        let client = self.pool.get().await?;
        let rows = client
            .query(
                "SELECT c.slot, c.gpu_uuid, c.validator FROM slot_claims c WHERE NOT c.done AND c.lease_until_ms < $1 AND NOT EXISTS (SELECT 1 FROM records r WHERE r.gpu_uuid = c.gpu_uuid AND r.id > c.after_record) ORDER BY c.slot, c.gpu_uuid",
                &[&(now_ms as i64)],
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok(crate::registry_model::AbandonedClaim {
                    slot: r.try_get::<_, i64>(0)?.max(0) as u64,
                    gpu_uuid: r.try_get(1)?,
                    validator: r.try_get(2)?,
                })
            })
            .collect()
    }

    /// [`crate::registry::Registry::reopen_claim`] on this database.
    pub async fn reopen_claim(&self, slot: u64, uuid: &str) -> Result<(), RegistryError> {
        let client = self.pool.get().await?;
        client
            .execute(
                "UPDATE slot_claims SET done = FALSE, missed = FALSE WHERE slot = $1 AND gpu_uuid = $2",
                &[&(slot as i64), &uuid],
            )
            .await?;
        Ok(())
    }

    /// [`crate::registry::Registry::settle_claim`] on this database.
    pub async fn settle_claim(&self, slot: u64, uuid: &str) -> Result<bool, RegistryError> {
        let client = self.pool.get().await?;
        let changed = client
            .execute(
                "UPDATE slot_claims SET done = TRUE, missed = TRUE WHERE slot = $1 AND gpu_uuid = $2 AND NOT done",
                &[&(slot as i64), &uuid],
            )
            .await?;
        Ok(changed == 1)
    }

    /// [`crate::registry::Registry::finish_claims`] on this database: one statement.
    pub async fn finish_claims(&self, slot: u64, uuids: &[String]) -> Result<(), RegistryError> {
        let client = self.pool.get().await?;
        client
            .execute(
                "UPDATE slot_claims SET done = TRUE WHERE slot = $1 AND gpu_uuid = ANY($2) AND NOT done",
                &[&(slot as i64), &uuids],
            )
            .await?;
        Ok(())
    }

    /// [`crate::registry::Registry::record_logged`] on this database; with `log_entry`, the
    /// fleet's log takes the entry in the same transaction (its index is returned): a record
    /// is stored and logged, or neither. A round's record (`slot`) is fenced by its slot's
    /// claim ([`fence_round`]).
    pub async fn record(
        &self,
        (challenge_id, gpu_uuid): (&str, &str),
        accepted: bool,
        envelope_json: &str,
        (log_entry, slot): (Option<&[u8]>, Option<u64>),
    ) -> Result<Option<u64>, RegistryError> {
        // The envelope's kind, kept beside it (what `records_since` announces), and its signer.
        let envelope = serde_json::from_str::<serde_json::Value>(envelope_json).ok();
        let field = |name: &str| {
            envelope
                .as_ref()
                .and_then(|v| v.get(name)?.as_str().map(str::to_owned))
        };
        let (kind, signer) = (field("kind"), field("signer"));
        // The id is drawn under the sequence row's lock, held to the commit: the fleet's
        // records commit in id order, so a reader paging by id (the pricing's catch-up) never
        // passes over one that another validator commits later. A refused insert (a record
        // stored already) rolls its draw back.
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let id: i64 = tx
            .query_one(
                "UPDATE record_sequence SET next_id = next_id + 1 RETURNING next_id - 1",
                &[],
            )
            .await?
            .try_get(0)?;
        tx.execute(
            "INSERT INTO records (id, challenge_id, gpu_uuid, accepted, version, kind, envelope) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            &[&id, &challenge_id, &gpu_uuid, &accepted, &i64::from(RECORD_VERSION), &kind, &envelope_json],
        )
        .await?;
        if let (Some(slot), Some(signer)) = (slot, &signer) {
            fence_round(&tx, (slot, gpu_uuid), signer).await?;
        }
        let index = match log_entry {
            Some(entry) => Some(sequence_log_entry(&tx, entry).await?),
            None => None,
        };
        tx.commit().await?;
        Ok(index)
    }

    /// [`crate::registry::Registry::has_record`] on this database.
    pub async fn has_record(&self, challenge_id: &str) -> Result<bool, RegistryError> {
        let client = self.pool.get().await?;
        Ok(client
            .query_opt(
                "SELECT 1 FROM records WHERE challenge_id = $1",
                &[&challenge_id],
            )
            .await?
            .is_some())
    }

    /// [`crate::registry::Registry::records_since`] on this database.
    pub async fn records_since(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<Vec<NewRecord>, RegistryError> {
        let client = self.pool.get().await?;
        let rows = client
            .query(
                "SELECT id, gpu_uuid, kind FROM records WHERE id > $1 ORDER BY id LIMIT $2",
                &[&after, &(limit as i64)],
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok(NewRecord {
                    id: r.try_get(0)?,
                    gpu_uuid: r.try_get(1)?,
                    kind: r.try_get(2)?,
                })
            })
            .collect()
    }

    /// [`crate::registry::Registry::latest_records`] on this database.
    pub async fn latest_records(
        &self,
        gpu_uuid: &str,
        limit: usize,
    ) -> Result<Vec<(i64, String)>, RegistryError> {
        let client = self.pool.get().await?;
        let rows = client
            .query(
                "SELECT id, envelope FROM records WHERE gpu_uuid = $1 AND challenge_id NOT LIKE 'registration-%' AND challenge_id NOT LIKE 'report-%' ORDER BY id DESC LIMIT $2",
                &[&gpu_uuid, &(limit as i64)],
            )
            .await?;
        let mut rows = rows
            .iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect::<Result<Vec<(i64, String)>, RegistryError>>()?;
        rows.reverse();
        Ok(rows)
    }

    /// [`crate::registry::Registry::latest_record_of_kind`] on this database.
    pub async fn latest_record_of_kind(
        &self,
        gpu_uuid: &str,
        kind: &str,
    ) -> Result<Option<String>, RegistryError> {
        let client = self.pool.get().await?;
        let row = client
            .query_opt(
                "SELECT envelope FROM records WHERE gpu_uuid = $1 AND kind = $2 ORDER BY id DESC LIMIT 1",
                &[&gpu_uuid, &kind],
            )
            .await?;
        Ok(row.map(|r| r.try_get(0)).transpose()?)
    }

    /// [`crate::registry::Registry::records_within`] on this database.
    pub async fn records_within(
        &self,
        gpu_uuid: &str,
        after: i64,
        limit: usize,
        max_bytes: usize,
    ) -> Result<(Vec<(i64, String)>, bool), RegistryError> {
        let client = self.pool.get().await?;
        let rows = client
            .query(
                "SELECT id, envelope FROM records WHERE gpu_uuid = $1 AND id > $2 ORDER BY id LIMIT $3",
                &[&gpu_uuid, &after, &(limit as i64)],
            )
            .await?;
        cut_page(
            rows.into_iter()
                .map(|r| Ok::<_, tokio_postgres::Error>((r.try_get(0)?, r.try_get(1)?))),
            max_bytes,
        )
    }
}

/// A registered GPU's columns, for [`gpu_row`].
const GPU_SELECT: &str = "SELECT g.uuid, g.agent, a.endpoint, g.model, g.bus_id, g.simulated, a.cores, a.token_owner, a.storage_bytes, a.storage_class, a.ram_bytes FROM gpus g JOIN agents a ON a.key = g.agent";

/// A registered GPU from a row of [`GPU_SELECT`].
fn gpu_row(r: &Row) -> Result<RegisteredGpu, RegistryError> {
    let bad = |what: &str, e: &dyn std::fmt::Display| {
        RegistryError::Postgres(format!("a stored {what} that does not parse: {e}"))
    };
    Ok(RegisteredGpu {
        uuid: GpuUuid::new(r.try_get::<_, String>(0)?).map_err(|e| bad("GPU UUID", &e))?,
        agent: PublicKey::try_from(r.try_get::<_, String>(1)?).map_err(|e| bad("agent key", &e))?,
        endpoint: r.try_get(2)?,
        model: r.try_get(3)?,
        bus_id: r.try_get(4)?,
        simulated: r.try_get(5)?,
        host_cores: r
            .try_get::<_, Option<i32>>(6)?
            .and_then(|c| u32::try_from(c).ok()),
        token_owner: r
            .try_get::<_, Option<String>>(7)?
            .map(|t| t.parse())
            .transpose()
            .map_err(|e| bad("token owner", &e))?,
        host_storage: storage_claim(r.try_get(8)?, r.try_get(9)?)
            .map_err(|e| bad("storage claim", &e))?,
        host_ram: ram_claim(r.try_get(10)?).map_err(|e| bad("RAM claim", &e))?,
    })
}

/// For the tests (this crate's and its integration tests): databases of their own on the test
/// server that `scripts/postgres.sh` starts and `scripts/test.sh` names in
/// `POG_TEST_POSTGRES_URL`.
pub mod testing {
    /// The variable naming the test server.
    pub const URL_VAR: &str = "POG_TEST_POSTGRES_URL";

    /// Runs `sql` on the PostgreSQL database at `url` (on a thread and runtime of its own, so
    /// that any test may call it).
    pub fn on_server(url: &str, sql: &str) {
        let (url, sql) = (url.to_owned(), sql.to_owned());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                    .await
                    .unwrap_or_else(|e| {
                        panic!(
                            "the test PostgreSQL server at {url} ({URL_VAR}) does not answer: {e}"
                        )
                    });
                tokio::spawn(connection);
                client.batch_execute(&sql).await.unwrap();
            })
        })
        .join()
        .unwrap();
    }

    /// A transaction left open on the PostgreSQL database at a URL, holding the locks its
    /// statements took until it is dropped (then rolled back): a test's way to stop a
    /// validator, on its own connection, where it waits for one of those locks.
    pub struct OpenTransaction {
        release: Option<tokio::sync::oneshot::Sender<()>>,
        thread: Option<std::thread::JoinHandle<()>>,
    }

    impl OpenTransaction {
        /// Begins one on the database at `url` (on a thread and runtime of its own) and runs
        /// `sql` in it; returns once `sql` has run.
        pub fn begin(url: &str, sql: &str) -> OpenTransaction {
            let (url, statements) = (url.to_owned(), format!("BEGIN; {sql}"));
            let (release, released) = tokio::sync::oneshot::channel::<()>();
            let (ran, has_run) = std::sync::mpsc::channel();
            let thread = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async {
                    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                        .await
                        .unwrap_or_else(|e| panic!("the PostgreSQL server at {url}: {e}"));
                    tokio::spawn(connection);
                    let outcome = client.batch_execute(&statements).await;
                    let failed = outcome.as_ref().err().map(ToString::to_string);
                    let _ = ran.send(failed);
                    let _ = released.await;
                    let _ = client.batch_execute("ROLLBACK").await;
                })
            });
            if let Some(why) = has_run.recv().unwrap_or(Some("its thread ended".into())) {
                panic!("{sql} in an open transaction: {why}");
            }
            OpenTransaction {
                release: Some(release),
                thread: Some(thread),
            }
        }
    }

    impl Drop for OpenTransaction {
        fn drop(&mut self) {
            if let Some(release) = self.release.take() {
                let _ = release.send(());
            }
            if let Some(thread) = self.thread.take() {
                let _ = thread.join();
            }
        }
    }

    /// The URL of a new, empty database on the test server (`POG_TEST_POSTGRES_URL`); `None`
    /// without one, unless one is required (`POG_REQUIRE_POSTGRES` or `CI` set): then the test
    /// fails, so that CI never passes without the PostgreSQL half of the suite.
    pub fn fresh_postgres_database() -> Option<String> {
        let set = |var: &str| std::env::var(var).is_ok_and(|v| !v.is_empty());
        let Some(base) = std::env::var(URL_VAR).ok().filter(|v| !v.is_empty()) else {
            assert!(
                !set("POG_REQUIRE_POSTGRES") && !set("CI"),
                "{URL_VAR} is not set, and the PostgreSQL half of the store tests is required \
                 here: start a server with `scripts/postgres.sh start` and set {URL_VAR} to the \
                 URL it prints (scripts/test.sh does both)"
            );
            eprintln!("the PostgreSQL half of the store tests is skipped: {URL_VAR} is not set (scripts/test.sh starts a server and sets it)");
            return None;
        };
        let name = format!("pog_test_{}", hex::encode(pog_signed::random_bytes::<8>()));
        on_server(&base, &format!("CREATE DATABASE {name}"));
        let (url, query) = base.split_once('?').unwrap_or((&base, ""));
        let slash = url
            .rfind('/')
            .filter(|&i| i > "postgres://".len())
            .unwrap_or(url.len());
        let query = if query.is_empty() {
            String::new()
        } else {
            format!("?{query}")
        };
        Some(format!("{}/{name}{query}", &url[..slash]))
    }
}
