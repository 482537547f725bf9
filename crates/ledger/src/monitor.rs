//! A log monitor's logic (`pog ledger monitor`), over any [`TileSource`]: it keeps the last
//! checkpoint it verified ([`Watch`], saved as a small state file so that runs resume, as Go's
//! sumdb client keeps its cache), and for each new checkpoint checks the log's signature, that
//! the tiles give its root, that its tree contains the one verified before, and reads every new
//! entry. It alerts on a fork (another root at a size it verified, or a tree that does not
//! contain it), a rollback, a checkpoint the log did not sign, an entry of an unknown kind or
//! one that does not verify, a record signed by a key that may not sign it, and a GPU whose
//! rounds stopped.
//!
//! A checkpoint that raised a fork, rollback or signature alert is not taken: the state stays
//! at the last one verified, so the alert stands at every pass until a checkpoint consistent
//! with it comes.

use crate::bundle::{registration_agent, LogKeys};
use crate::checkpoint::{CheckpointError, SignedCheckpoint};
use crate::entry::{Entry, EntryError};
use crate::note::Verifier;
use crate::tiles::{TileError, TileSource, TiledTree};
use pog_merkle::{empty_root, verify_consistency};
use pog_signed::{PublicKey, RecordKind};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The state file's format version.
pub const STATE_VERSION: u32 = 1;

/// The most entry alerts one pass reports; a log full of bad entries is alarming enough at 64.
pub const MAX_ENTRY_ALERTS: usize = 64;

/// The most bytes a state file may hold (a few hundred per GPU).
const MAX_STATE_BYTES: u64 = 64 << 20;

/// Why a pass could not run (as opposed to what it found: [`Alert`]).
#[derive(Debug, thiserror::Error)]
pub enum MonitorError {
    /// The log served no checkpoint that parses (its reason in the message, not as a source:
    /// one line says it all).
    #[error("the log's checkpoint is malformed: {0}")]
    Checkpoint(CheckpointError),
    /// The log's tiles could not be read (unreachable, too large, too slow, malformed).
    #[error("the log's tiles: {0}")]
    Tiles(TileError),
    /// The state file is unreadable, from another log, or cannot be written.
    #[error("the monitor state {}: {why}", path.display())]
    State {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
}

impl From<CheckpointError> for MonitorError {
    fn from(e: CheckpointError) -> MonitorError {
        MonitorError::Checkpoint(e)
    }
}

impl From<TileError> for MonitorError {
    fn from(e: TileError) -> MonitorError {
        MonitorError::Tiles(e)
    }
}

/// What the monitor alerts on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Alert {
    /// Two histories: another root at a size verified before, or a larger tree that does not
    /// contain the one verified before.
    Fork {
        /// The size verified before.
        seen_size: u64,
        /// Its root, hex.
        seen_root: String,
        /// The new checkpoint's size.
        size: u64,
        /// The new checkpoint's root, hex.
        root: String,
    },
    /// A smaller tree than the one verified before.
    Rollback {
        /// The size verified before.
        seen_size: u64,
        /// The new checkpoint's size.
        size: u64,
    },
    /// The checkpoint is not signed by the log's key (or names another origin).
    BadSignature {
        /// Why it does not verify.
        why: String,
    },
    /// The tiles do not give the checkpoint's root.
    TilesDiffer {
        /// The checkpoint's size.
        size: u64,
        /// The root the tiles give, hex.
        tiles_root: String,
        /// The checkpoint's root, hex.
        root: String,
    },
    /// An entry whose kind byte is no record kind.
    UnknownKind {
        /// Its log index.
        index: u64,
        /// The kind byte.
        code: u8,
    },
    /// An entry that does not parse or whose producer's signature fails.
    BadEntry {
        /// Its log index.
        index: u64,
        /// Why.
        why: String,
    },
    /// A record signed by a key that may not sign its kind: neither the log's nor a named
    /// fleet validator's for a validator kind, not an agent key registered to the GPU for an
    /// agent kind.
    UnknownSigner {
        /// Its log index.
        index: u64,
        /// The record's kind.
        record_kind: RecordKind,
        /// The GPU.
        gpu_uuid: String,
        /// The signer.
        signer: PublicKey,
    },
    /// The chain anchors the log at a size larger than the tree the log serves: a publisher
    /// key anchored what the log never had (`pog ledger monitor --chain`).
    AnchorBeyondLog {
        /// The registry's latest anchored size.
        anchored_size: u64,
        /// The log's verified size.
        size: u64,
    },
    /// The chain's latest anchor has a root the log's tree does not extend: the consistency
    /// proof from the anchored size to the log's checkpoint fails (`pog ledger monitor
    /// --chain`).
    AnchorNotInLog {
        /// The registry's latest anchored size.
        anchored_size: u64,
        /// The anchored root, hex.
        anchored_root: String,
        /// The log's verified size.
        size: u64,
    },
    /// A registered GPU with no round record for longer than allowed.
    SilentGpu {
        /// The GPU.
        gpu_uuid: String,
        /// When its last round (or its registration) was recorded (Unix ms).
        last_round_ms: u64,
        /// How long ago, at the pass (ms).
        silent_for_ms: u64,
    },
}

impl Alert {
    /// The alert's kind, as its JSON and `/metrics` name it.
    pub fn kind(&self) -> &'static str {
        match self {
            Alert::Fork { .. } => "fork",
            Alert::Rollback { .. } => "rollback",
            Alert::BadSignature { .. } => "bad_signature",
            Alert::TilesDiffer { .. } => "tiles_differ",
            Alert::UnknownKind { .. } => "unknown_kind",
            Alert::BadEntry { .. } => "bad_entry",
            Alert::UnknownSigner { .. } => "unknown_signer",
            Alert::SilentGpu { .. } => "silent_gpu",
            Alert::AnchorBeyondLog { .. } => "anchor_beyond_log",
            Alert::AnchorNotInLog { .. } => "anchor_not_in_log",
        }
    }
}

impl std::fmt::Display for Alert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Alert::Fork {
                seen_size,
                seen_root,
                size,
                root,
            } => write!(
                f,
                "fork: the log verified at size {seen_size} (root {seen_root}) now shows size \
                 {size} (root {root}), which does not contain it"
            ),
            Alert::Rollback { seen_size, size } => write!(
                f,
                "rollback: the log verified at size {seen_size} now shows size {size}"
            ),
            Alert::BadSignature { why } => {
                write!(f, "the checkpoint is not signed by the log's key: {why}")
            }
            Alert::TilesDiffer {
                size,
                tiles_root,
                root,
            } => write!(
                f,
                "the tiles give root {tiles_root} at size {size}, the checkpoint {root}"
            ),
            Alert::UnknownKind { index, code } => {
                write!(f, "entry {index} is of an unknown kind ({code})")
            }
            Alert::BadEntry { index, why } => write!(f, "entry {index} does not verify: {why}"),
            Alert::UnknownSigner {
                index,
                record_kind,
                gpu_uuid,
                signer,
            } => write!(
                f,
                "entry {index} ({}, {gpu_uuid}) is signed by {signer}, a key that may not sign it",
                record_kind.wire_kind()
            ),
            Alert::AnchorBeyondLog {
                anchored_size,
                size,
            } => write!(
                f,
                "the chain anchors the log at size {anchored_size}, beyond its {size} entries: \
                 the publisher anchored a tree the log does not have"
            ),
            Alert::AnchorNotInLog {
                anchored_size,
                anchored_root,
                size,
            } => write!(
                f,
                "the chain anchors root {anchored_root} at size {anchored_size}, which the log's \
                 tree of {size} entries does not extend: the publisher anchored another history"
            ),
            Alert::SilentGpu {
                gpu_uuid,
                last_round_ms,
                silent_for_ms,
            } => write!(
                f,
                "{gpu_uuid}: no round for {} s (last at {last_round_ms} ms)",
                silent_for_ms / 1000
            ),
        }
    }
}

/// What the monitor remembers of one GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuWatch {
    /// The agent keys registered to it (agent kinds must be signed by one).
    pub agents: Vec<PublicKey>,
    /// Its last registration released it: its rounds are expected to stop.
    pub released: bool,
    /// When its last round, or its registration when it has had none since, was recorded
    /// (the record's `recorded_at_ms`).
    pub last_round_ms: u64,
    /// Its silence was alerted on already (once per silence).
    pub silence_alerted: bool,
}

/// The monitor's state for one log: the last checkpoint verified and what it knows of each GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Watch {
    /// [`STATE_VERSION`].
    pub version: u32,
    /// The log's verifier key: a state is for one log.
    pub log_key: String,
    /// The last checkpoint verified (signed note); `None` before the first.
    pub checkpoint: Option<String>,
    /// Each GPU seen, by UUID.
    pub gpus: BTreeMap<String, GpuWatch>,
}

/// The rules of a pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// A registered GPU with no round for longer than this (ms) is alerted on.
    pub silent_after_ms: u64,
}

/// What one pass did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pass {
    /// The size verified before the pass (0 the first time).
    pub previous_size: u64,
    /// The size verified after it (unchanged when the checkpoint was refused).
    pub size: u64,
    /// Entries read and checked.
    pub entries_read: u64,
    /// What it alerts on, in order.
    pub alerts: Vec<Alert>,
}

impl Watch {
    /// A new watch of the log `log`: nothing verified yet.
    pub fn new(log: &Verifier) -> Watch {
        Watch {
            version: STATE_VERSION,
            log_key: log.to_vkey(),
            checkpoint: None,
            gpus: BTreeMap::new(),
        }
    }

    /// Where the state of `log` is kept under `dir`.
    pub fn path(dir: &Path, log: &Verifier) -> PathBuf {
        dir.join(format!("{:08x}.json", log.key_id()))
    }

    /// The state of `log` in `dir` (a new one when there is no file); an error naming the file
    /// when it is unreadable, of another version, or of another log (never a silent reset:
    /// that would forget the checkpoint a fork is judged against).
    pub fn load(dir: &Path, log: &Verifier) -> Result<Watch, MonitorError> {
        let path = Watch::path(dir, log);
        let bad = |why: String| MonitorError::State {
            path: path.clone(),
            why,
        };
        let text = match std::fs::File::open(&path) {
            Ok(file) => {
                let mut text = String::new();
                std::io::Read::read_to_string(
                    &mut std::io::Read::take(file, MAX_STATE_BYTES + 1),
                    &mut text,
                )
                .map_err(|e| bad(e.to_string()))?;
                text
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Watch::new(log)),
            Err(e) => return Err(bad(e.to_string())),
        };
        if text.len() as u64 > MAX_STATE_BYTES {
            return Err(bad(format!("larger than {MAX_STATE_BYTES} bytes")));
        }
        let watch: Watch = serde_json::from_str(&text).map_err(|e| bad(format!("corrupt: {e}")))?;
        if watch.version != STATE_VERSION {
            return Err(bad(format!(
                "format version {}, not {STATE_VERSION}",
                watch.version
            )));
        }
        if watch.log_key != log.to_vkey() {
            return Err(bad(format!(
                "it is the state of another log ({}); move it away to start over",
                watch.log_key
            )));
        }
        if let Some(text) = &watch.checkpoint {
            SignedCheckpoint::parse_verified(text.as_bytes(), log)
                .map_err(|e| bad(format!("its checkpoint does not verify: {e}")))?;
        }
        Ok(watch)
    }

    /// Writes the state into `dir`, durably (temp file, fsync, rename).
    pub fn save(&self, dir: &Path, log: &Verifier) -> Result<(), MonitorError> {
        let path = Watch::path(dir, log);
        let bad = |why: std::io::Error| MonitorError::State {
            path: path.clone(),
            why: why.to_string(),
        };
        std::fs::create_dir_all(dir).map_err(bad)?;
        let tmp = path.with_extension("tmp");
        let text = serde_json::to_string_pretty(self).map_err(|e| MonitorError::State {
            path: path.clone(),
            why: e.to_string(),
        })?;
        std::fs::write(&tmp, text).map_err(bad)?;
        std::fs::File::open(&tmp)
            .and_then(|f| f.sync_all())
            .map_err(bad)?;
        std::fs::rename(&tmp, &path).map_err(bad)
    }

    /// The size and root verified last (0 and the empty root before the first).
    fn seen(&self) -> (u64, pog_merkle::Hash) {
        self.checkpoint
            .as_ref()
            .and_then(|t| SignedCheckpoint::parse(t.as_bytes()).ok())
            .map_or((0, empty_root()), |c| {
                (c.checkpoint.size, c.checkpoint.root)
            })
    }

    /// One pass: `note` is the log's checkpoint as served, `source` its tiles, `log` its key,
    /// `now_ms` the time (Unix ms). Takes the checkpoint when it is the log's and consistent
    /// with the last verified, reading every new entry; returns what it alerts on.
    pub fn pass<'a, S: TileSource>(
        &mut self,
        keys: impl Into<LogKeys<'a>>,
        (note, source): (&[u8], S),
        policy: Policy,
        now_ms: u64,
    ) -> Result<Pass, MonitorError> {
        let keys = keys.into();
        let log = keys.log;
        let signed = SignedCheckpoint::parse(note)?;
        let (seen_size, seen_root) = self.seen();
        let new = &signed.checkpoint;
        let mut pass = Pass {
            previous_size: seen_size,
            size: seen_size,
            entries_read: 0,
            alerts: Vec::new(),
        };
        let fork = || Alert::Fork {
            seen_size,
            seen_root: hex::encode(seen_root),
            size: new.size,
            root: hex::encode(new.root),
        };
        if let Err(e) = signed.verify(log) {
            pass.alerts.push(Alert::BadSignature { why: e.to_string() });
        } else if new.size < seen_size {
            pass.alerts.push(Alert::Rollback {
                seen_size,
                size: new.size,
            });
        } else if new.size == seen_size && new.root != seen_root {
            pass.alerts.push(fork());
        } else if new.size > seen_size {
            let mut tree = TiledTree::new(source, new.size);
            let tiles_root = tree.root()?;
            if tiles_root != new.root {
                pass.alerts.push(Alert::TilesDiffer {
                    size: new.size,
                    tiles_root: hex::encode(tiles_root),
                    root: hex::encode(new.root),
                });
            } else if !verify_consistency(
                seen_size,
                new.size,
                &seen_root,
                &new.root,
                &tree.consistency_proof(seen_size)?,
            ) {
                pass.alerts.push(fork());
            } else {
                self.read_entries(keys, &mut tree, seen_size, &mut pass)?;
                self.checkpoint = Some(signed.to_text());
                pass.size = new.size;
            }
        }
        self.check_silence(policy, now_ms, &mut pass.alerts);
        Ok(pass)
    }

    /// Reads entries `from` to the tree's size, alerting on each bad one and following each
    /// GPU's registrations and rounds.
    fn read_entries<S: TileSource>(
        &mut self,
        keys: LogKeys<'_>,
        tree: &mut TiledTree<S>,
        from: u64,
        pass: &mut Pass,
    ) -> Result<(), MonitorError> {
        let mut entry_alerts = 0;
        let mut alert = |alerts: &mut Vec<Alert>, a: Alert| {
            entry_alerts += 1;
            if entry_alerts <= MAX_ENTRY_ALERTS {
                alerts.push(a);
            }
        };
        let size = tree.size();
        let gpus = &mut self.gpus;
        tree.for_each_entry(from, size, |index, bytes| {
            pass.entries_read += 1;
            let entry = match Entry::parse(bytes) {
                Ok(entry) => entry,
                Err(EntryError::UnknownKind(code)) => {
                    alert(&mut pass.alerts, Alert::UnknownKind { index, code });
                    return true;
                }
                Err(e) => {
                    let why = e.to_string();
                    alert(&mut pass.alerts, Alert::BadEntry { index, why });
                    return true;
                }
            };
            if let Err(e) = entry.verify() {
                let why = e.to_string();
                alert(&mut pass.alerts, Alert::BadEntry { index, why });
                return true;
            }
            let signer = entry.signer_key();
            let gpu = gpus.get(&entry.gpu_uuid);
            let allowed = if entry.kind.signed_by_validator() {
                keys.is_validator(&signer)
            } else {
                gpu.is_some_and(|g| g.agents.contains(&signer))
            };
            if !allowed {
                let a = Alert::UnknownSigner {
                    index,
                    record_kind: entry.kind,
                    gpu_uuid: entry.gpu_uuid.clone(),
                    signer,
                };
                alert(&mut pass.alerts, a);
                return true;
            }
            follow(gpus, &entry);
            true
        })?;
        Ok(())
    }

    /// Alerts, once per silence, on each registered GPU with no round for longer than the
    /// policy allows.
    fn check_silence(&mut self, policy: Policy, now_ms: u64, alerts: &mut Vec<Alert>) {
        for (uuid, gpu) in &mut self.gpus {
            let silent_for_ms = now_ms.saturating_sub(gpu.last_round_ms);
            if gpu.released || gpu.silence_alerted || silent_for_ms <= policy.silent_after_ms {
                continue;
            }
            gpu.silence_alerted = true;
            alerts.push(Alert::SilentGpu {
                gpu_uuid: uuid.clone(),
                last_round_ms: gpu.last_round_ms,
                silent_for_ms,
            });
        }
    }
}

/// The record's `recorded_at_ms`, when its body has one.
fn recorded_at_ms(body: &str) -> Option<u64> {
    #[derive(Deserialize)]
    struct Timed {
        recorded_at_ms: u64,
    }
    serde_json::from_str::<Timed>(body)
        .ok()
        .map(|t| t.recorded_at_ms)
}

/// Follows a verified entry: a registration names (or releases) the GPU's agent; a round
/// (proof, memory, CPU, health) ends its silence.
fn follow(gpus: &mut BTreeMap<String, GpuWatch>, entry: &Entry) {
    let at = recorded_at_ms(&entry.body);
    match entry.kind {
        RecordKind::Registration => {
            let Some((agent, released)) = registration_agent(&entry.body) else {
                return;
            };
            let gpu = gpus.entry(entry.gpu_uuid.clone()).or_insert(GpuWatch {
                agents: Vec::new(),
                released,
                last_round_ms: at.unwrap_or(0),
                silence_alerted: false,
            });
            if released {
                gpu.agents.retain(|a| *a != agent);
            } else {
                if !gpu.agents.contains(&agent) {
                    gpu.agents.push(agent);
                }
                if gpu.released {
                    // Claimed again: its rounds are expected from now on.
                    gpu.last_round_ms = at.unwrap_or(gpu.last_round_ms);
                    gpu.silence_alerted = false;
                }
            }
            gpu.released = released;
        }
        RecordKind::ProofRound
        | RecordKind::MemoryRound
        | RecordKind::CpuRound
        | RecordKind::StorageRound
        | RecordKind::RamRound
        | RecordKind::HealthRound => {
            if let (Some(gpu), Some(at)) = (gpus.get_mut(&entry.gpu_uuid), at) {
                if at >= gpu.last_round_ms {
                    gpu.last_round_ms = at;
                    gpu.silence_alerted = false;
                }
            }
        }
        _ => {}
    }
}
