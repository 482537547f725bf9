//! The anchoring service: a validator's task that anchors each checkpoint its ledger signs
//! ([`AnchorSchedule`], what `pog validator --anchor-rpc --anchor-contract --anchor-key-file`
//! runs beside the validator's app), and the checkpoints it reads and keeps in the ledger's
//! directory.
//!
//! Whoever anchors a checkpoint keeps it as [`ANCHORED_FILE`] in the ledger's directory (with
//! the cosignatures it had), so that `pog ledger export --anchored` can prove a GPU's records
//! against a checkpoint the chain holds at exactly its size.
//!
//! With [`StatePublishing`] (`pog validator --scores-contract`), each anchoring is followed by
//! the GPUs' new `gpu-state` records proven to a `GpuScores` contract from the checkpoint just
//! anchored ([`crate::scores::publish_states`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use pog_ledger::checkpoint::{CheckpointError, SignedCheckpoint};

pub use crate::scores::LedgerSource;
use crate::scores::{publish_states, Scores};
use crate::{AnchorError, Anchored, Registry};

/// What the schedule publishes after each anchoring: every GPU's newest `gpu-state` within the
/// checkpoint just anchored that the scores contract does not hold yet, `batch` a transaction.
pub struct StatePublishing {
    /// The scores contract (with the key that pays).
    pub scores: Scores,
    /// The ledger to read the states and their proofs from.
    pub ledger: std::sync::Arc<dyn LedgerSource>,
    /// States per transaction.
    pub batch: usize,
}

/// The ledger's latest signed checkpoint, in its directory.
pub const CHECKPOINT_FILE: &str = "checkpoint";

/// The last checkpoint anchored on chain, kept in the ledger's directory.
pub const ANCHORED_FILE: &str = "anchored-checkpoint";

/// How long a stopping validator waits for its last checkpoint to be anchored.
pub const LAST_ANCHOR_WAIT: Duration = Duration::from_secs(20);
/// How soon a failed look is tried again when the schedule's period is longer (an unreachable
/// node should not cost an hour of anchors at the hourly default).
pub const FAILED_LOOK_RETRY: Duration = Duration::from_secs(60);

/// Why a checkpoint in the ledger's directory could not be read or kept.
#[derive(Debug, thiserror::Error)]
pub enum KeptError {
    /// The ledger has signed no checkpoint yet.
    #[error("the ledger in {} has no checkpoint yet: run `pog ledger checkpoint`", dir.display())]
    NoCheckpoint {
        /// The ledger's directory.
        dir: PathBuf,
    },
    /// A file could not be read.
    #[error("reading {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        cause: std::io::Error,
    },
    /// The ledger's stored checkpoint does not parse.
    #[error("the ledger's stored checkpoint is unreadable")]
    Stored {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        cause: CheckpointError,
    },
    /// The kept anchored checkpoint does not parse.
    #[error("the anchored checkpoint {} is unreadable", path.display())]
    Anchored {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        cause: CheckpointError,
    },
    /// The anchored checkpoint could not be written, synced or renamed into place.
    #[error("writing {}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        cause: std::io::Error,
    },
}

/// The file at `path`, `None` when there is none.
fn read_if_any(path: &Path) -> Result<Option<Vec<u8>>, KeptError> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(cause) => Err(KeptError::Read {
            path: path.to_path_buf(),
            cause,
        }),
    }
}

/// The ledger's stored (latest signed) checkpoint, read from its file in `ledger_dir`.
pub fn stored_checkpoint(ledger_dir: &Path) -> Result<SignedCheckpoint, KeptError> {
    let path = ledger_dir.join(CHECKPOINT_FILE);
    let text = read_if_any(&path)?.ok_or_else(|| KeptError::NoCheckpoint {
        dir: ledger_dir.to_path_buf(),
    })?;
    SignedCheckpoint::parse(&text).map_err(|cause| KeptError::Stored { path, cause })
}

/// The ledger's anchored checkpoint, if one was kept.
pub fn load_anchored(ledger_dir: &Path) -> Result<Option<SignedCheckpoint>, KeptError> {
    let path = ledger_dir.join(ANCHORED_FILE);
    let Some(text) = read_if_any(&path)? else {
        return Ok(None);
    };
    SignedCheckpoint::parse(&text)
        .map(Some)
        .map_err(|cause| KeptError::Anchored { path, cause })
}

/// Keeps `checkpoint` as the ledger's anchored checkpoint (written to a temporary file, synced,
/// renamed), unless the one kept is as large already.
pub fn save_anchored(ledger_dir: &Path, checkpoint: &SignedCheckpoint) -> Result<(), KeptError> {
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
        .map_err(|cause| KeptError::Write { path, cause })
}

/// What one look of the schedule found ([`AnchorSchedule::look`]).
#[derive(Debug)]
pub enum Look {
    /// The ledger has no checkpoint yet.
    NoCheckpoint,
    /// The stored checkpoint is no larger than the last one anchored: the chain is not asked.
    Unchanged {
        /// The size anchored.
        size: u64,
    },
    /// The stored checkpoint is anchored now (by this look, or someone before), and kept.
    Anchored(Anchored),
}

/// Why one look of the schedule did not anchor the stored checkpoint.
#[derive(Debug, thiserror::Error)]
pub enum LookError {
    /// The stored checkpoint could not be read, or the anchored one not kept.
    #[error(transparent)]
    Kept(#[from] KeptError),
    /// The chain did not take it (unreachable, refused, reverted).
    #[error("anchoring the checkpoint of size {size}")]
    Chain {
        /// The checkpoint's size.
        size: u64,
        /// Why.
        #[source]
        cause: AnchorError,
    },
    /// Keeping the anchored checkpoint's task died (a bug).
    #[error("keeping the anchored checkpoint: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// A validator's anchoring task: every `every`, the ledger's latest stored checkpoint is
/// anchored in `registry` when it is larger than the last one anchored (registering the log's
/// origin the first time), and kept as the anchored checkpoint.
pub struct AnchorSchedule {
    registry: Registry,
    ledger_dir: PathBuf,
    every: Duration,
    /// The size this task last saw anchored: nothing to ask the chain until it grows.
    anchored: Option<u64>,
    /// The GPU states published after each anchoring, if asked.
    publishing: Option<StatePublishing>,
    /// Whether this validator anchors now (in a fleet, only the log lease's holder does);
    /// `None`: always.
    leading: Option<tokio::sync::watch::Receiver<bool>>,
}

impl AnchorSchedule {
    /// Anchors the checkpoints of the ledger in `ledger_dir` in `registry` (a publisher) every
    /// `every`.
    pub fn new(registry: Registry, ledger_dir: PathBuf, every: Duration) -> AnchorSchedule {
        AnchorSchedule {
            registry,
            ledger_dir,
            every,
            anchored: None,
            publishing: None,
            leading: None,
        }
    }

    /// Anchors only while `leading` says so (a fleet's validators anchor the fleet's log once,
    /// by whichever holds its lease; the one that leaves anchors its last checkpoint).
    pub fn only_while(mut self, leading: tokio::sync::watch::Receiver<bool>) -> AnchorSchedule {
        self.leading = Some(leading);
        self
    }

    /// Whether it anchors now.
    fn leads(&self) -> bool {
        self.leading.as_ref().is_none_or(|l| *l.borrow())
    }

    /// Publishes the GPUs' new states after each anchoring, as `publishing` says.
    pub fn publishing(mut self, publishing: StatePublishing) -> AnchorSchedule {
        self.publishing = Some(publishing);
        self
    }

    /// The registry it anchors in.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Looks every `every` until `stop` says so (sent once the validator's last checkpoint is
    /// signed), then one last look, for at most [`LAST_ANCHOR_WAIT`]; what that misses is
    /// anchored at the next start. A failed look is logged and retried after
    /// [`FAILED_LOOK_RETRY`] (or `every`, when shorter); nothing else waits for it.
    pub async fn run(mut self, mut stop: tokio::sync::watch::Receiver<bool>) {
        let mut wait = self.every;
        // Whether it led at its last look: a validator that gave its lease up on the way out
        // still anchors the last checkpoint it signed.
        let mut led = self.leads();
        loop {
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = stop.changed() => break,
            }
            led = self.leads();
            if !led {
                wait = self.every;
                continue;
            }
            tokio::select! {
                ok = self.look_logged() => {
                    wait = if ok { self.every } else { self.every.min(FAILED_LOOK_RETRY) };
                }
                _ = stop.changed() => break,
            }
        }
        if !(led || self.leads()) {
            return;
        }
        if tokio::time::timeout(LAST_ANCHOR_WAIT, self.look_logged())
            .await
            .is_err()
        {
            tracing::warn!(
                "the last checkpoint was not anchored within {} s: it is anchored at the next start",
                LAST_ANCHOR_WAIT.as_secs()
            );
        }
    }

    /// One look: anchors the stored checkpoint if it is larger than the last one anchored,
    /// and keeps it in the ledger's directory. A checkpoint the chain took but that could not
    /// be kept is not anchored again.
    pub async fn look(&mut self) -> Result<Look, LookError> {
        let checkpoint = match stored_checkpoint(&self.ledger_dir) {
            Ok(c) => c,
            Err(KeptError::NoCheckpoint { .. }) => return Ok(Look::NoCheckpoint),
            Err(e) => return Err(e.into()),
        };
        let size = checkpoint.checkpoint.size;
        if let Some(anchored) = self.anchored.filter(|&a| a >= size) {
            return Ok(Look::Unchanged { size: anchored });
        }
        let done = self
            .registry
            .anchor_checkpoint(&checkpoint.checkpoint)
            .await
            .map_err(|cause| LookError::Chain { size, cause })?;
        self.anchored = Some(size);
        let dir = self.ledger_dir.clone();
        tokio::task::spawn_blocking(move || save_anchored(&dir, &checkpoint)).await??;
        Ok(Look::Anchored(done))
    }

    /// [`AnchorSchedule::look`], logged; whether it succeeded.
    async fn look_logged(&mut self) -> bool {
        let registry = self.registry.address();
        match self.look().await {
            Ok(Look::NoCheckpoint | Look::Unchanged { .. }) => true,
            Ok(Look::Anchored(done)) => {
                self.publish_logged(done.size).await;
                if let Some(sent) = &done.registered {
                    tracing::info!(origin = %done.origin, %registry, tx = %sent.tx, gas = sent.gas_used, "registered the log's origin");
                }
                match &done.anchored {
                    Some(sent) => {
                        tracing::info!(size = done.size, %registry, tx = %sent.tx, gas = sent.gas_used, "anchored the checkpoint on chain")
                    }
                    None => {
                        tracing::info!(size = done.size, %registry, "the checkpoint was anchored already")
                    }
                }
                true
            }
            Err(LookError::Chain { size, cause }) => {
                let retry = self.every.min(FAILED_LOOK_RETRY).as_secs_f64();
                tracing::warn!(size, %registry, error = %cause, "anchoring failed; retrying in {retry} s");
                false
            }
            Err(LookError::Kept(e @ (KeptError::Write { .. } | KeptError::Anchored { .. }))) => {
                tracing::error!(error = %with_causes(&e), "keeping the anchored checkpoint");
                false
            }
            Err(e) => {
                tracing::error!(error = %with_causes(&e), "anchoring: the ledger's checkpoint is unreadable");
                false
            }
        }
    }
}

impl AnchorSchedule {
    /// Publishes the GPUs' new states from the checkpoint of `size` just anchored, if asked;
    /// a failure is logged (the anchor stands; the next anchoring publishes what is missing).
    async fn publish_logged(&self, size: u64) {
        let Some(p) = &self.publishing else {
            return;
        };
        let scores = p.scores.address();
        match publish_states(p.ledger.clone(), size, &p.scores, p.batch).await {
            Ok(done) => {
                let gas: u64 = done.transactions.iter().map(|t| t.gas_used).sum();
                tracing::info!(
                    size,
                    %scores,
                    submitted = done.submitted,
                    up_to_date = done.up_to_date,
                    unprovable = done.unprovable.len(),
                    gas,
                    "published the GPUs' states on chain"
                );
                for (gpu, why) in &done.unprovable {
                    tracing::warn!(gpu, %scores, "a GPU's state cannot be proven on chain: {why}");
                }
            }
            Err(e) => {
                tracing::warn!(size, %scores, error = %with_causes(&e), "publishing the GPUs' states failed; the next anchoring tries again")
            }
        }
    }
}

/// An error with its causes, one after the other (as `anyhow`'s `{:#}` shows them).
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use pog_ledger::checkpoint::Checkpoint;
    use pog_ledger::note::{NoteSigner, ALG_ED25519};

    fn signed(size: u64) -> SignedCheckpoint {
        let checkpoint = Checkpoint {
            origin: "pog.example/log".into(),
            size,
            root: [size as u8; 32],
            extensions: Vec::new(),
        };
        let log = NoteSigner::new("pog.example/log", ALG_ED25519, [9; 32]).unwrap();
        checkpoint.sign(&log)
    }

    #[test]
    fn the_anchored_checkpoint_kept_only_grows() {
        let dir = tempfile::tempdir().unwrap();
        assert!(load_anchored(dir.path()).unwrap().is_none());
        save_anchored(dir.path(), &signed(5)).unwrap();
        save_anchored(dir.path(), &signed(3)).unwrap();
        assert_eq!(
            load_anchored(dir.path()).unwrap().unwrap().checkpoint.size,
            5
        );
        save_anchored(dir.path(), &signed(8)).unwrap();
        assert_eq!(
            load_anchored(dir.path()).unwrap().unwrap().checkpoint.size,
            8
        );
        std::fs::write(dir.path().join(ANCHORED_FILE), "junk").unwrap();
        assert!(matches!(
            load_anchored(dir.path()),
            Err(KeptError::Anchored { .. })
        ));
    }

    #[test]
    fn a_ledger_without_a_checkpoint_says_how_to_make_one() {
        let dir = tempfile::tempdir().unwrap();
        let e = stored_checkpoint(dir.path()).unwrap_err();
        assert!(matches!(e, KeptError::NoCheckpoint { .. }));
        assert!(e.to_string().contains("run `pog ledger checkpoint`"), "{e}");
    }
}
