//! The chain anchor (`pog_anchor`) as several commands share it: the registry a command or
//! the validator anchors in, checked before anything runs; the anchored checkpoint kept beside
//! the ledger; and the validator's anchoring schedule (`pog validator --anchor-rpc
//! --anchor-contract --anchor-key-file`).
//!
//! Whoever anchors a checkpoint keeps it as `anchored-checkpoint` in the ledger's directory
//! (with the cosignatures it had), so that `pog ledger export --anchored` can prove a GPU's
//! records against a checkpoint the chain holds at exactly its size.

use anyhow::{anyhow, Context, Result};
use pog_anchor::{PublisherKey, Registry, RpcUrl};
use pog_ledger::checkpoint::SignedCheckpoint;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The anchored checkpoint's file in the ledger's directory.
pub const ANCHORED_FILE: &str = "anchored-checkpoint";

/// The anchoring configuration of a validator or a command, checked before anything runs.
pub struct ChainTarget {
    /// The RPC URL.
    pub rpc: RpcUrl,
    /// The registry.
    pub registry: Registry,
}

impl ChainTarget {
    /// Parses and checks the RPC URL, the address and (when given) the key file.
    pub fn new(rpc: &str, contract: &str, key_file: Option<&Path>) -> Result<ChainTarget> {
        let rpc = RpcUrl::parse(rpc)?;
        let address = pog_anchor::parse_address(contract)?;
        let registry = match key_file {
            Some(path) => Registry::publisher(&rpc, address, &PublisherKey::from_file(path)?)?,
            None => Registry::reader(&rpc, address)?,
        };
        Ok(ChainTarget { rpc, registry })
    }
}

/// The ledger's anchored checkpoint, if one was kept.
pub fn load_anchored(ledger_dir: &Path) -> Result<Option<SignedCheckpoint>> {
    let path = ledger_dir.join(ANCHORED_FILE);
    match std::fs::read(&path) {
        Ok(text) => Ok(Some(SignedCheckpoint::parse(&text).map_err(|e| {
            anyhow!(
                "the anchored checkpoint {} is unreadable: {e}",
                path.display()
            )
        })?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// Keeps `checkpoint` as the ledger's anchored checkpoint (written to a temporary file, synced,
/// renamed), unless the one kept is as large already.
pub fn save_anchored(ledger_dir: &Path, checkpoint: &SignedCheckpoint) -> Result<()> {
    if let Ok(Some(kept)) = load_anchored(ledger_dir) {
        if kept.checkpoint.size >= checkpoint.checkpoint.size {
            return Ok(());
        }
    }
    let path = ledger_dir.join(ANCHORED_FILE);
    let tmp = ledger_dir.join(format!("{ANCHORED_FILE}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, checkpoint.to_text())
        .and_then(|()| std::fs::File::open(&tmp)?.sync_all())
        .and_then(|()| std::fs::rename(&tmp, &path))
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// How long a stopping validator waits for its last checkpoint to be anchored.
const LAST_ANCHOR_WAIT: Duration = Duration::from_secs(20);

/// Every `every`: anchors the ledger's latest stored checkpoint when it is larger than the last
/// one anchored (registering the origin the first time), and keeps it as the anchored
/// checkpoint. A failure is logged and retried on the next tick; nothing else waits for it.
/// On `stop` (sent once the last checkpoint is signed) one last look, for at most
/// [`LAST_ANCHOR_WAIT`]; what it misses is anchored at the next start.
pub async fn anchor_on_schedule(
    ledger: Arc<pog_validator::ledger::ValidatorLedger>,
    ledger_dir: PathBuf,
    registry: Registry,
    every: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    // The size this process last saw anchored: nothing to ask the chain until it grows.
    let mut anchored: Option<u64> = None;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.changed() => break,
        }
        tokio::select! {
            _ = anchor_latest(&ledger, &ledger_dir, &registry, &mut anchored) => {}
            _ = stop.changed() => break,
        }
    }
    let last = anchor_latest(&ledger, &ledger_dir, &registry, &mut anchored);
    if tokio::time::timeout(LAST_ANCHOR_WAIT, last).await.is_err() {
        tracing::warn!(
            "the last checkpoint was not anchored within {} s: it is anchored at the next start",
            LAST_ANCHOR_WAIT.as_secs()
        );
    }
}

/// One look of [`anchor_on_schedule`]: anchors the stored checkpoint if it is larger than
/// `anchored`, and records it there and in the ledger directory.
async fn anchor_latest(
    ledger: &pog_validator::ledger::ValidatorLedger,
    ledger_dir: &Path,
    registry: &Registry,
    anchored: &mut Option<u64>,
) {
    let checkpoint = match pog_validator::ledger::stored_checkpoint(ledger.ledger()) {
        Ok(c) => c,
        Err(pog_validator::ledger::LedgerError::NoCheckpoint) => return,
        Err(e) => {
            tracing::error!(error = %e, "anchoring: the ledger's checkpoint is unreadable");
            return;
        }
    };
    let size = checkpoint.checkpoint.size;
    if anchored.is_some_and(|a| a >= size) {
        return;
    }
    match registry.anchor_checkpoint(&checkpoint.checkpoint).await {
        Ok(done) => {
            *anchored = Some(size);
            if let Some(sent) = &done.registered {
                tracing::info!(origin = %done.origin, registry = %registry.address(), tx = %sent.tx, gas = sent.gas_used, "registered the log's origin");
            }
            match &done.anchored {
                Some(sent) => {
                    tracing::info!(size, registry = %registry.address(), tx = %sent.tx, gas = sent.gas_used, "anchored the checkpoint on chain")
                }
                None => {
                    tracing::info!(size, registry = %registry.address(), "the checkpoint was anchored already")
                }
            }
            let (dir, cp) = (ledger_dir.to_path_buf(), checkpoint.clone());
            let saved = tokio::task::spawn_blocking(move || save_anchored(&dir, &cp)).await;
            match saved {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::error!(error = %format!("{e:#}"), "keeping the anchored checkpoint")
                }
                Err(e) => tracing::error!(error = %e, "keeping the anchored checkpoint"),
            }
        }
        Err(e) => {
            tracing::warn!(size, registry = %registry.address(), error = %e, "anchoring failed; retrying at the next tick")
        }
    }
}
