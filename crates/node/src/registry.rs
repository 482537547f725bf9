//! The validator's registry in SQLite: agents, the GPUs each claims (a UUID belongs to one
//! agent only), and the signed result records.

use pog_proof::wire::GpuClaim;
use rusqlite::{params, Connection, OptionalExtension};
use std::path::Path;

/// Version of the result-record encoding stored (and later appended to the ledger).
pub const RECORD_VERSION: u32 = 1;

/// The registry's tables.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS agents (key TEXT PRIMARY KEY, endpoint TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS gpus (uuid TEXT PRIMARY KEY, agent TEXT NOT NULL REFERENCES agents(key), model TEXT NOT NULL, bus_id TEXT NOT NULL, simulated INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS records (
    id INTEGER PRIMARY KEY,
    challenge_id TEXT NOT NULL UNIQUE,
    gpu_uuid TEXT NOT NULL,
    accepted INTEGER NOT NULL,
    version INTEGER NOT NULL,
    envelope TEXT NOT NULL
);
";

/// A registered GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredGpu {
    pub uuid: String,
    pub agent: String,
    pub endpoint: String,
    pub model: String,
    /// Its PCI address as the agent claimed it.
    pub bus_id: String,
    /// A GPU of the simulated test double.
    pub simulated: bool,
}

/// Why a registry change was refused.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("GPU {uuid} is already registered by another agent ({owner})")]
    ClaimedElsewhere { uuid: String, owner: String },
    #[error("registry database: {0}")]
    Database(#[from] rusqlite::Error),
}

/// The registry.
pub struct Registry {
    db: Connection,
}

impl Registry {
    /// Opens (creating if needed) the registry at `path`; `None` for an in-memory one.
    pub fn open(path: Option<&Path>) -> Result<Registry, RegistryError> {
        let db = match path {
            Some(p) => Connection::open(p)?,
            None => Connection::open_in_memory()?,
        };
        db.execute_batch(SCHEMA)?;
        // Registries made before GPUs could be simulated lack the column.
        let has_simulated: bool = db.query_row(
            "SELECT COUNT(*) FROM pragma_table_info('gpus') WHERE name = 'simulated'",
            [],
            |r| r.get::<_, i64>(0).map(|n| n > 0),
        )?;
        if !has_simulated {
            db.execute_batch("ALTER TABLE gpus ADD COLUMN simulated INTEGER NOT NULL DEFAULT 0")?;
        }
        Ok(Registry { db })
    }

    /// Registers an agent and its GPUs, all or nothing. A GPU another agent holds refuses the
    /// whole registration.
    pub fn register(
        &mut self,
        agent: &str,
        endpoint: &str,
        gpus: &[GpuClaim],
    ) -> Result<(), RegistryError> {
        let tx = self.db.transaction()?;
        tx.execute("INSERT INTO agents (key, endpoint) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET endpoint = ?2", params![agent, endpoint])?;
        for GpuClaim {
            uuid,
            model,
            bus_id,
            simulated,
        } in gpus
        {
            let owner: Option<String> = tx
                .query_row(
                    "SELECT agent FROM gpus WHERE uuid = ?1",
                    params![uuid],
                    |r| r.get(0),
                )
                .optional()?;
            match owner {
                Some(owner) if owner != agent => {
                    return Err(RegistryError::ClaimedElsewhere {
                        uuid: uuid.clone(),
                        owner,
                    })
                }
                Some(_) => {
                    tx.execute(
                        "UPDATE gpus SET model = ?2, bus_id = ?3, simulated = ?4 WHERE uuid = ?1",
                        params![uuid, model, bus_id, simulated],
                    )?;
                }
                None => {
                    tx.execute(
                        "INSERT INTO gpus (uuid, agent, model, bus_id, simulated) VALUES (?1, ?2, ?3, ?4, ?5)",
                        params![uuid, agent, model, bus_id, simulated],
                    )?;
                }
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// The GPU with this UUID and its agent.
    pub fn gpu(&self, uuid: &str) -> Result<Option<RegisteredGpu>, RegistryError> {
        Ok(self
            .db
            .query_row(
                "SELECT g.uuid, g.agent, a.endpoint, g.model, g.bus_id, g.simulated FROM gpus g JOIN agents a ON a.key = g.agent WHERE g.uuid = ?1",
                params![uuid],
                |r| Ok(RegisteredGpu { uuid: r.get(0)?, agent: r.get(1)?, endpoint: r.get(2)?, model: r.get(3)?, bus_id: r.get(4)?, simulated: r.get(5)? }),
            )
            .optional()?)
    }

    /// Every registered GPU's UUID, grouped by agent.
    pub fn gpus_by_agent(&self) -> Result<Vec<(String, Vec<String>)>, RegistryError> {
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

    /// Stores a signed result record; a challenge is recorded once.
    pub fn record(
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

    /// One page of a GPU's stored records (row id, envelope JSON), oldest first: at most
    /// `limit` of those after row `after` (0: from the start).
    pub fn records(
        &self,
        gpu_uuid: &str,
        after: i64,
        limit: usize,
    ) -> Result<Vec<(i64, String)>, RegistryError> {
        let mut stmt = self.db.prepare(
            "SELECT id, envelope FROM records WHERE gpu_uuid = ?1 AND id > ?2 ORDER BY id LIMIT ?3",
        )?;
        let rows = stmt.query_map(params![gpu_uuid, after, limit as i64], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(uuid: &str) -> GpuClaim {
        GpuClaim {
            uuid: uuid.into(),
            model: "H200 SXM".into(),
            bus_id: "0000:00:06.0".into(),
            simulated: false,
        }
    }

    #[test]
    fn a_uuid_belongs_to_one_agent() {
        let mut r = Registry::open(None).unwrap();
        r.register("agent-a", "http://a", &[gpu("GPU-1")]).unwrap();
        r.register("agent-a", "http://a2", &[gpu("GPU-1")]).unwrap(); // re-registration is fine
        assert_eq!(r.gpu("GPU-1").unwrap().unwrap().endpoint, "http://a2");
        let err = r
            .register("agent-b", "http://b", &[gpu("GPU-2"), gpu("GPU-1")])
            .unwrap_err();
        assert!(matches!(err, RegistryError::ClaimedElsewhere { .. }));
        // All or nothing: GPU-2 was not taken either.
        assert_eq!(r.gpu("GPU-2").unwrap(), None);
        r.register("agent-b", "http://b", &[gpu("GPU-3"), gpu("GPU-4")])
            .unwrap();
        assert_eq!(
            r.gpus_by_agent().unwrap(),
            vec![
                ("agent-a".to_string(), vec!["GPU-1".to_string()]),
                (
                    "agent-b".to_string(),
                    vec!["GPU-3".to_string(), "GPU-4".to_string()]
                )
            ]
        );
    }

    #[test]
    fn records_persist_once_per_challenge() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("registry.sqlite");
        {
            let mut r = Registry::open(Some(&path)).unwrap();
            r.record("c1", "GPU-1", true, "{}").unwrap();
            assert!(
                r.record("c1", "GPU-1", false, "{}").is_err(),
                "a duplicate cannot overwrite"
            );
        }
        let mut r = Registry::open(Some(&path)).unwrap();
        assert_eq!(
            r.records("GPU-1", 0, 10).unwrap(),
            vec![(1, "{}".to_string())]
        );
        r.record("c2", "GPU-1", true, "[]").unwrap();
        r.record("c3", "GPU-2", true, "[]").unwrap();
        assert_eq!(r.records("GPU-1", 0, 1).unwrap().len(), 1, "one page");
        assert_eq!(
            r.records("GPU-1", 1, 10).unwrap(),
            vec![(2, "[]".to_string())]
        );
    }

    #[test]
    fn a_registry_from_before_simulated_gpus_gains_the_column() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.sqlite");
        let old = Connection::open(&path).unwrap();
        old.execute_batch(
            "CREATE TABLE agents (key TEXT PRIMARY KEY, endpoint TEXT NOT NULL);
             CREATE TABLE gpus (uuid TEXT PRIMARY KEY, agent TEXT NOT NULL, model TEXT NOT NULL, bus_id TEXT NOT NULL);
             INSERT INTO agents VALUES ('agent-a', 'http://a');
             INSERT INTO gpus VALUES ('GPU-1', 'agent-a', 'H200 SXM', '0000:00:06.0');",
        )
        .unwrap();
        drop(old);
        let mut r = Registry::open(Some(&path)).unwrap();
        assert!(!r.gpu("GPU-1").unwrap().unwrap().simulated);
        let simulated = GpuClaim {
            simulated: true,
            ..gpu("GPU-2")
        };
        r.register("agent-a", "http://a", &[simulated]).unwrap();
        assert!(r.gpu("GPU-2").unwrap().unwrap().simulated);
    }
}
