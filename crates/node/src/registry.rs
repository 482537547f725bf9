//! The validator's registry in SQLite: agents, the GPUs each claims (a UUID belongs to one
//! agent only), and the signed result records.

use rusqlite::{params, Connection, OptionalExtension};
use std::path::Path;

/// Version of the result-record encoding stored (and later appended to the ledger).
pub const RECORD_VERSION: u32 = 1;

/// The registry's tables.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS agents (key TEXT PRIMARY KEY, endpoint TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS gpus (uuid TEXT PRIMARY KEY, agent TEXT NOT NULL REFERENCES agents(key), model TEXT NOT NULL, bus_id TEXT NOT NULL);
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
        Ok(Registry { db })
    }

    /// Registers an agent and its GPUs, all or nothing. A GPU another agent holds refuses the
    /// whole registration.
    pub fn register(
        &mut self,
        agent: &str,
        endpoint: &str,
        gpus: &[(String, String, String)],
    ) -> Result<(), RegistryError> {
        let tx = self.db.transaction()?;
        tx.execute("INSERT INTO agents (key, endpoint) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET endpoint = ?2", params![agent, endpoint])?;
        for (uuid, model, bus_id) in gpus {
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
                        "UPDATE gpus SET model = ?2, bus_id = ?3 WHERE uuid = ?1",
                        params![uuid, model, bus_id],
                    )?;
                }
                None => {
                    tx.execute(
                        "INSERT INTO gpus (uuid, agent, model, bus_id) VALUES (?1, ?2, ?3, ?4)",
                        params![uuid, agent, model, bus_id],
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
                "SELECT g.uuid, g.agent, a.endpoint, g.model, g.bus_id FROM gpus g JOIN agents a ON a.key = g.agent WHERE g.uuid = ?1",
                params![uuid],
                |r| Ok(RegisteredGpu { uuid: r.get(0)?, agent: r.get(1)?, endpoint: r.get(2)?, model: r.get(3)?, bus_id: r.get(4)? }),
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

    /// Every stored record envelope for a GPU, oldest first.
    pub fn records(&self, gpu_uuid: &str) -> Result<Vec<String>, RegistryError> {
        let mut stmt = self
            .db
            .prepare("SELECT envelope FROM records WHERE gpu_uuid = ?1 ORDER BY id")?;
        let rows = stmt.query_map(params![gpu_uuid], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(uuid: &str) -> (String, String, String) {
        (uuid.into(), "H200 SXM".into(), "0000:00:06.0".into())
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
        let r = Registry::open(Some(&path)).unwrap();
        assert_eq!(r.records("GPU-1").unwrap(), vec!["{}".to_string()]);
    }
}
