//! A witness as a service (`pog witness cosign` and `pog witness serve`): the pure
//! [`Witness`] with its state kept on disk, one file per followed log holding the last
//! checkpoint it cosigned, written durably before any cosignature is handed out, so that a
//! restarted witness never cosigns a fork or a rollback of what it cosigned before. A fork
//! attempt (a checkpoint the log signed that contradicts one the witness cosigned) is kept as
//! evidence ([`WitnessState::keep_evidence`]), for whoever must be shown that the log lied.
//!
//! Two more things a public witness needs: a read endpoint for monitors
//! ([`WitnessService::monitoring`]: `GET <monitoring prefix>/<origin hash>/checkpoint`, the
//! latest checkpoint cosigned for a log with the log's signature and the witness's
//! cosignature), and a request budget per log ([`RequestBudget`]), so that a flood of
//! add-checkpoint requests naming one log is answered 429 with `Retry-After` instead of a
//! signature verification each.

use crate::checkpoint::{Checkpoint, CheckpointError, SignedCheckpoint};
use crate::note::Note;
use crate::note::{NoteSignature, NoteSigner, Verifier};
use crate::serve::Response;
use crate::witness::{AddCheckpoint, Refusal, Witness};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Why the witness's state could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// A file or folder of the state could not be read, written or synced.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was being done ("writing", "reading", …).
        what: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A state file holds no checkpoint.
    #[error("the witness state {} is unreadable: {source}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        source: CheckpointError,
    },
}

/// The folder where a witness keeps, per log key, the last checkpoint it cosigned.
#[derive(Debug, Clone)]
pub struct WitnessState {
    dir: PathBuf,
}

impl WitnessState {
    /// The state in `dir`, created when missing.
    pub fn open(dir: &Path) -> Result<WitnessState, StateError> {
        std::fs::create_dir_all(dir).map_err(|source| StateError::Io {
            what: "creating",
            path: dir.to_path_buf(),
            source,
        })?;
        Ok(WitnessState {
            dir: dir.to_path_buf(),
        })
    }

    /// The file of `log`'s latest cosigned checkpoint.
    pub fn path(&self, log: &Verifier) -> PathBuf {
        self.dir.join(format!("{:08x}.checkpoint", log.key_id()))
    }

    /// The latest checkpoint cosigned for `log`, as persisted; `None` when there is none. A
    /// state written before the witness kept the signed note (the checkpoint's body alone)
    /// still loads, with no note to serve until the next cosignature.
    pub fn load(&self, log: &Verifier) -> Result<Option<Kept>, StateError> {
        let path = self.path(log);
        match std::fs::read_to_string(&path) {
            Ok(text) => match SignedCheckpoint::parse(text.as_bytes()) {
                Ok(signed) => Ok(Some(Kept {
                    checkpoint: signed.checkpoint,
                    signed: Some(text),
                })),
                Err(_) => Checkpoint::parse_text(&text)
                    .map(|checkpoint| {
                        Some(Kept {
                            checkpoint,
                            signed: None,
                        })
                    })
                    .map_err(|source| StateError::Unreadable { path, source }),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(StateError::Io {
                what: "reading",
                path,
                source,
            }),
        }
    }

    /// Writes `signed` (the checkpoint note with the log's signature and this witness's
    /// cosignature) as `log`'s latest, durably (temp file, fsync, rename, fsync of the folder).
    pub fn persist(&self, log: &Verifier, signed: &str) -> Result<(), StateError> {
        let state = self.path(log);
        let tmp = state.with_extension("tmp");
        let io = |what: &'static str, path: &Path| {
            let path = path.to_path_buf();
            move |source| StateError::Io { what, path, source }
        };
        std::fs::write(&tmp, signed).map_err(io("writing", &tmp))?;
        std::fs::File::open(&tmp)
            .and_then(|f| f.sync_all())
            .map_err(io("syncing", &tmp))?;
        std::fs::rename(&tmp, &state).map_err(io("writing", &state))?;
        std::fs::File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(io("syncing", &self.dir))?;
        Ok(())
    }
}

/// A log's latest cosigned checkpoint as the witness keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    /// The checkpoint.
    pub checkpoint: Checkpoint,
    /// Its note as served to monitors: the log's signature and the witness's cosignature
    /// (`None` for a state kept before notes were).
    pub signed: Option<String>,
}

/// The most fork attempts kept as evidence per log: a log that forks once has lied already,
/// and one that tries without end must not fill the witness's disk.
pub const MAX_EVIDENCE: usize = 64;

impl WitnessState {
    /// The folder of fork evidence.
    pub fn evidence_dir(&self) -> PathBuf {
        self.dir.join("evidence")
    }

    /// Keeps a fork attempt against `log`: the refused request (with the log's signed
    /// checkpoint and proof, exactly as received) beside the checkpoint the witness had
    /// cosigned, in a file of its own, written durably; nothing once [`MAX_EVIDENCE`] are kept
    /// for the log. Returns the file written, if any.
    pub fn keep_evidence(
        &self,
        log: &Verifier,
        latest: Option<&Checkpoint>,
        refusal: &Refusal,
        request: &[u8],
        now: u64,
    ) -> Result<Option<PathBuf>, StateError> {
        let dir = self.evidence_dir();
        let io = |what: &'static str, path: &Path| {
            let path = path.to_path_buf();
            move |source| StateError::Io { what, path, source }
        };
        std::fs::create_dir_all(&dir).map_err(io("creating", &dir))?;
        let prefix = format!("{:08x}-", log.key_id());
        let kept = std::fs::read_dir(&dir)
            .map_err(io("reading", &dir))?
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .count();
        if kept >= MAX_EVIDENCE {
            return Ok(None);
        }
        let path = dir.join(format!("{prefix}{now}-{kept:02}.txt"));
        let mut text = format!(
            "pog witness: fork evidence against log {}\nrefused at {now} (POSIX s): {refusal}\n\n\
             the checkpoint this witness had cosigned:\n{}\n\
             the add-checkpoint request refused, as received:\n",
            log.name(),
            latest.map_or("(none)\n".to_string(), Checkpoint::to_text),
        );
        text.push_str(&String::from_utf8_lossy(request));
        std::fs::write(&path, text).map_err(io("writing", &path))?;
        std::fs::File::open(&path)
            .and_then(|f| f.sync_all())
            .map_err(io("syncing", &path))?;
        Ok(Some(path))
    }
}

/// A budget of requests: `per_minute` a minute, up to a minute's worth at once, refilled
/// evenly. The witness keeps one per log; the validator one per witness.
#[derive(Debug, Clone)]
pub struct RequestBudget {
    per_minute: u32,
    tokens: f64,
    at_ms: u64,
}

impl RequestBudget {
    /// A full budget of `per_minute` requests a minute (at least 1) at time `now_ms`.
    pub fn new(per_minute: u32, now_ms: u64) -> RequestBudget {
        let per_minute = per_minute.max(1);
        RequestBudget {
            per_minute,
            tokens: f64::from(per_minute),
            at_ms: now_ms,
        }
    }

    /// Takes one request at time `now_ms`; when none is left, the milliseconds until one is.
    pub fn take(&mut self, now_ms: u64) -> Result<(), u64> {
        let per_ms = f64::from(self.per_minute) / 60_000.0;
        let elapsed = now_ms.saturating_sub(self.at_ms);
        self.at_ms = self.at_ms.max(now_ms);
        self.tokens = (self.tokens + elapsed as f64 * per_ms).min(f64::from(self.per_minute));
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err((((1.0 - self.tokens) / per_ms).ceil() as u64).max(1))
        }
    }
}

/// Add-checkpoint requests a witness takes per log and minute by default: a log publishing
/// every 10 s needs 6, twice that with a 409 and its retry each time.
pub const DEFAULT_REQUESTS_PER_LOG_MINUTE: u32 = 60;

/// The path a monitor reads a log's latest cosigned checkpoint at, under the witness's
/// monitoring prefix: `<origin hash>/checkpoint`, the origin hash being the lowercase hex
/// SHA-256 of the log's origin (the layout c2sp.org/tlog-mirror gives its monitoring prefix;
/// tlog-witness leaves its monitor retrieval to be designed).
pub fn monitoring_path(origin: &str) -> String {
    format!(
        "{}/checkpoint",
        hex::encode(Sha256::digest(origin.as_bytes()))
    )
}

/// A lock that a panic elsewhere does not poison for good: every change under these locks
/// leaves its value valid.
fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The note a monitor is served for a cosigned checkpoint: its text, the log's own signature
/// lines (others the request carried are dropped) and this witness's cosignature.
fn served_note(signed: &SignedCheckpoint, log: &Verifier, cosignature: &NoteSignature) -> String {
    let mut note =
        Note::new(signed.note.text().to_string()).unwrap_or_else(|_| signed.note.clone());
    for sig in signed.note.signatures().iter().filter(|s| log.matches(s)) {
        note.push_signature(sig.clone());
    }
    note.push_signature(cosignature.clone());
    note.to_text()
}

/// Why a checkpoint was not cosigned.
#[derive(Debug, thiserror::Error)]
pub enum CosignError {
    /// The witness refuses the request (with the HTTP status tlog-witness gives it).
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// The new state could not be saved: nothing was cosigned.
    #[error("the witness could not save its state: {0}")]
    State(#[from] StateError),
}

/// A checkpoint cosigned.
#[derive(Debug, Clone)]
pub struct Cosigned {
    /// The cosignature line.
    pub signature: NoteSignature,
    /// The checkpoint, now the witness's latest for its log.
    pub checkpoint: Checkpoint,
}

/// A witness following some logs, its state on disk: what `pog witness serve` runs and
/// `pog witness cosign` calls once.
pub struct WitnessService {
    witness: Mutex<Witness>,
    logs: Vec<Verifier>,
    state: WitnessState,
    /// Per origin, the latest cosigned checkpoint's note, as monitors read it.
    served: Mutex<HashMap<String, String>>,
    /// Per followed origin, the requests left to it ([`WitnessService::with_budget`]).
    budgets: Mutex<HashMap<String, RequestBudget>>,
    per_minute: u32,
}

impl WitnessService {
    /// A witness cosigning with `signer` the checkpoints of `logs`, resuming from what
    /// `state` holds for each.
    pub fn open(
        signer: NoteSigner,
        logs: Vec<Verifier>,
        state: WitnessState,
    ) -> Result<WitnessService, StateError> {
        let mut witness = Witness::new(signer);
        let mut served = HashMap::new();
        for log in &logs {
            let kept = state.load(log)?;
            if let Some(text) = kept.as_ref().and_then(|k| k.signed.clone()) {
                served.insert(log.name().to_string(), text);
            }
            witness.follow(log.clone(), kept.map(|k| k.checkpoint));
        }
        Ok(WitnessService {
            witness: Mutex::new(witness),
            logs,
            state,
            served: Mutex::new(served),
            budgets: Mutex::new(HashMap::new()),
            per_minute: DEFAULT_REQUESTS_PER_LOG_MINUTE,
        })
    }

    /// Takes at most `per_minute` add-checkpoint requests a minute for each log (a minute's
    /// worth at once), answering the rest 429 with `Retry-After`
    /// ([`DEFAULT_REQUESTS_PER_LOG_MINUTE`] unless set).
    pub fn with_budget(mut self, per_minute: u32) -> WitnessService {
        self.per_minute = per_minute.max(1);
        self
    }

    /// The witness's public cosignature key.
    pub fn verifier(&self) -> Verifier {
        self.lock().verifier().clone()
    }

    /// The latest checkpoint cosigned for `origin`.
    pub fn latest(&self, origin: &str) -> Option<Checkpoint> {
        self.lock().latest(origin).cloned()
    }

    fn lock(&self) -> MutexGuard<'_, Witness> {
        // Every change below leaves the witness valid: a panic leaves nothing half-made.
        locked(&self.witness)
    }

    /// The answer to `GET <monitoring prefix>/<path>`: for `<origin hash>/checkpoint`
    /// ([`monitoring_path`]) of a followed log, 200 with its latest cosigned checkpoint — the
    /// log's signature and this witness's cosignature — never cached for long; 404 for a log
    /// it does not follow or has cosigned nothing of yet, and for any other path.
    pub fn monitoring(&self, path: &str) -> Response {
        let served = locked(&self.served);
        let found = self
            .logs
            .iter()
            .find(|l| monitoring_path(l.name()) == path)
            .and_then(|l| served.get(l.name()));
        match found {
            Some(text) => Response {
                status: 200,
                content_type: crate::serve::TEXT,
                cache_control: Some("no-cache, max-age=2"),
                retry_after: None,
                body: text.clone().into_bytes(),
            },
            None => Response::text(
                404,
                crate::serve::TEXT,
                "no cosigned checkpoint of such a log here\n".into(),
            ),
        }
    }

    /// Handles one add-checkpoint request `body` at time `now` (POSIX seconds): the
    /// cosignature is returned only once the new state is on disk; when it cannot be saved,
    /// the state in memory is put back and nothing is cosigned.
    pub fn cosign(&self, body: &[u8], now: u64) -> Result<Cosigned, CosignError> {
        let request = AddCheckpoint::parse(body)?;
        let mut witness = self.lock();
        let before: Vec<Option<Checkpoint>> = self
            .logs
            .iter()
            .map(|l| witness.latest(l.name()).cloned())
            .collect();
        let signature = match witness.add_checkpoint(&request, now) {
            Ok(signature) => signature,
            Err(refusal) => {
                if refusal.is_fork_evidence() {
                    self.keep_evidence(&witness, &request, &refusal, body, now);
                }
                return Err(refusal.into());
            }
        };
        let signed = SignedCheckpoint::parse(&request.checkpoint)
            .map_err(|e| Refusal::Malformed(e.to_string()))?;
        for (log, old) in self.logs.iter().zip(before) {
            let new = witness.latest(log.name()).cloned();
            if new == old || new.is_none() {
                continue;
            }
            let text = served_note(&signed, log, &signature);
            if let Err(e) = self.state.persist(log, &text) {
                witness.follow(log.clone(), old);
                return Err(e.into());
            }
            locked(&self.served).insert(log.name().to_string(), text);
        }
        Ok(Cosigned {
            signature,
            checkpoint: signed.checkpoint,
        })
    }

    /// Keeps the fork attempt `request` (refused with `refusal`) as evidence, logging where;
    /// a failure to keep it is logged, and the refusal stands either way.
    fn keep_evidence(
        &self,
        witness: &Witness,
        request: &AddCheckpoint,
        refusal: &Refusal,
        body: &[u8],
        now: u64,
    ) {
        let Ok(signed) = SignedCheckpoint::parse(&request.checkpoint) else {
            return;
        };
        let origin = &signed.checkpoint.origin;
        let Some(log) = self.logs.iter().find(|l| l.name() == origin) else {
            return;
        };
        match self
            .state
            .keep_evidence(log, witness.latest(origin), refusal, body, now)
        {
            Ok(Some(path)) => {
                tracing::error!(log = %origin, evidence = %path.display(), "fork attempt: {refusal}")
            }
            Ok(None) => tracing::error!(log = %origin, "fork attempt (evidence full): {refusal}"),
            Err(e) => tracing::error!(log = %origin, "fork attempt, evidence not kept: {e}"),
        }
    }

    /// How long the log `body` names must wait (ms) when its budget is spent; `None` when the
    /// request may go on (charged), or names no log this witness follows (refused later, at
    /// no cost: no budget is kept for made-up origins).
    fn over_budget(&self, body: &[u8], now: u64) -> Option<u64> {
        let request = AddCheckpoint::parse(body).ok()?;
        let origin = Note::parse(&request.checkpoint)
            .ok()?
            .text()
            .lines()
            .next()?
            .to_string();
        self.logs.iter().find(|l| l.name() == origin)?;
        let now_ms = now.saturating_mul(1000);
        let mut budgets = locked(&self.budgets);
        budgets
            .entry(origin)
            .or_insert_with(|| RequestBudget::new(self.per_minute, now_ms))
            .take(now_ms)
            .err()
    }

    /// The response to `POST <prefix>/add-checkpoint` with `body` at time `now`, as
    /// c2sp.org/tlog-witness specifies: [`WitnessService::cosign`], a refusal's status and
    /// reason, or 500 when the state could not be saved (logged).
    /// A log past its request budget ([`WitnessService::with_budget`]) is answered 429 with
    /// `Retry-After` before its signature is checked; the budget is its origin's, so a flood
    /// naming one log delays that log's cosignatures only.
    pub fn add_checkpoint(&self, body: &[u8], now: u64) -> Response {
        if let Some(wait_ms) = self.over_budget(body, now) {
            let secs = wait_ms.div_ceil(1000).max(1);
            return Response {
                retry_after: Some(secs),
                ..Response::text(
                    429,
                    crate::serve::TEXT,
                    format!("too many add-checkpoint requests for this log: retry in {secs} s\n"),
                )
            };
        }
        match self.cosign(body, now) {
            Ok(c) => Response::text(200, crate::serve::TEXT, c.signature.to_line()),
            Err(CosignError::Refused(refusal)) => crate::serve::refusal(refusal),
            Err(CosignError::State(e)) => {
                tracing::error!("witness state not saved: {e}");
                Response::text(
                    500,
                    crate::serve::TEXT,
                    "the witness could not save its state\n".into(),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::note::{ALG_COSIGNATURE_V1, ALG_ED25519};

    fn log() -> NoteSigner {
        NoteSigner::new("pog.test/log", ALG_ED25519, [1; 32]).unwrap()
    }

    fn witness_key() -> NoteSigner {
        NoteSigner::new("pog.test/w", ALG_COSIGNATURE_V1, [2; 32]).unwrap()
    }

    /// An add-checkpoint request for the tree of the first `size` of leaves 0, 1, … (or of
    /// leaves offset by `fork`), from `old`.
    fn request(size: u64, old: u64, fork: u8) -> Vec<u8> {
        let leaves: Vec<_> = (0..size as u8)
            .map(|i| pog_merkle::leaf_hash(&[i.wrapping_add(fork)]))
            .collect();
        let tree = pog_merkle::Tree::from_leaf_hashes(leaves);
        let cp = Checkpoint {
            origin: "pog.test/log".into(),
            size,
            root: tree.root(),
            extensions: vec![],
        }
        .sign(&log());
        let proof = if old == 0 || old == size {
            Vec::new()
        } else {
            tree.consistency_proof(old).unwrap()
        };
        AddCheckpoint {
            old_size: old,
            proof,
            checkpoint: cp.to_text().into_bytes(),
        }
        .encode()
    }

    fn service(dir: &Path) -> WitnessService {
        let state = WitnessState::open(&dir.join("witness")).unwrap();
        WitnessService::open(witness_key(), vec![log().verifier().clone()], state).unwrap()
    }

    #[test]
    fn the_state_persists_and_a_restarted_witness_refuses_a_rollback() {
        let dir = tempfile::tempdir().unwrap();
        let first = service(dir.path());
        let cosigned = first.cosign(&request(5, 0, 0), 7).unwrap();
        assert_eq!(cosigned.checkpoint.size, 5);
        assert!(cosigned
            .signature
            .to_line()
            .starts_with("\u{2014} pog.test/w "));
        let grown = first.add_checkpoint(&request(8, 5, 0), 8);
        assert_eq!(
            grown.status,
            200,
            "{:?}",
            String::from_utf8_lossy(&grown.body)
        );
        drop(first);
        // A new process resumes at size 8: an older checkpoint, a conflicting old size and a
        // fork at the same size are all refused, and the state stays at 8.
        let again = service(dir.path());
        assert_eq!(again.latest("pog.test/log").map(|c| c.size), Some(8));
        assert!(matches!(
            again.cosign(&request(5, 5, 0), 9),
            Err(CosignError::Refused(Refusal::Rollback {
                latest: 8,
                new: 5
            }))
        ));
        let conflict = again.add_checkpoint(&request(9, 5, 0), 9);
        assert_eq!((conflict.status, conflict.body), (409, b"8\n".to_vec()));
        assert!(matches!(
            again.cosign(&request(8, 8, 1), 9),
            Err(CosignError::Refused(Refusal::Fork { size: 8 }))
        ));
        let state = WitnessState::open(&dir.path().join("witness")).unwrap();
        let kept = state.load(log().verifier()).unwrap().unwrap().checkpoint;
        assert_eq!(kept.size, 8);
        // The fork attempt was kept as evidence: the log's signed other root beside the
        // checkpoint the witness had cosigned.
        let evidence: Vec<PathBuf> = std::fs::read_dir(state.evidence_dir())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(evidence.len(), 1, "{evidence:?}");
        let text = std::fs::read_to_string(&evidence[0]).unwrap();
        let forked = String::from_utf8(request(8, 8, 1)).unwrap();
        assert!(text.contains(&forked), "{text}");
        assert!(text.contains(&kept.to_text()), "{text}");
    }

    #[test]
    fn refusals_follow_the_witness_protocol_and_fork_evidence_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let witness = service(dir.path());
        assert_eq!(witness.add_checkpoint(&request(8, 0, 0), 1).status, 200);
        // An old size beyond the checkpoint is a bad request, whatever the witness holds (it
        // was a 409 while the rollback was checked first).
        let mut beyond = AddCheckpoint::parse(&request(5, 0, 0)).unwrap();
        beyond.old_size = 6;
        let beyond = witness.add_checkpoint(&beyond.encode(), 2);
        assert_eq!(
            beyond.status,
            400,
            "{:?}",
            String::from_utf8_lossy(&beyond.body)
        );
        // A smaller tree: 409 with the witness's latest size, as text/x.tlog.size, so that the
        // log can retry from it (it was a plain-text reason).
        let rollback = witness.add_checkpoint(&request(5, 5, 0), 3);
        assert_eq!(
            (rollback.status, rollback.content_type, rollback.body),
            (409, "text/x.tlog.size", b"8\n".to_vec())
        );
        // Fork attempts past the bound are refused all the same, and keep no more files.
        for n in 0..MAX_EVIDENCE + 3 {
            let fork = witness.add_checkpoint(&request(8, 8, 1 + (n % 200) as u8), 10 + n as u64);
            assert_eq!(fork.status, 422);
        }
        let state = WitnessState::open(&dir.path().join("witness")).unwrap();
        assert_eq!(
            std::fs::read_dir(state.evidence_dir()).unwrap().count(),
            MAX_EVIDENCE
        );
    }

    #[test]
    fn monitors_read_the_latest_cosigned_checkpoint_with_both_signatures() {
        let dir = tempfile::tempdir().unwrap();
        let path = monitoring_path("pog.test/log");
        assert_eq!(
            path,
            format!(
                "{}/checkpoint",
                hex::encode(Sha256::digest(b"pog.test/log"))
            )
        );
        let witness = service(dir.path());
        assert_eq!(
            witness.monitoring(&path).status,
            404,
            "nothing cosigned yet"
        );
        assert_eq!(witness.add_checkpoint(&request(5, 0, 0), 1).status, 200);
        assert_eq!(witness.add_checkpoint(&request(8, 5, 0), 2).status, 200);
        let read = |w: &WitnessService| {
            let r = w.monitoring(&path);
            assert_eq!(r.status, 200);
            SignedCheckpoint::parse(&r.body).unwrap()
        };
        let served = read(&witness);
        assert_eq!(served.checkpoint.size, 8);
        served.verify(log().verifier()).unwrap();
        let cosigned = served.cosignatures(std::slice::from_ref(witness_key().verifier()));
        assert_eq!(cosigned.len(), 1);
        assert_eq!(cosigned[0].1.as_ref().unwrap().timestamp, Some(2));
        // A refused fork does not change what is served; a restarted witness serves it too.
        assert_eq!(witness.add_checkpoint(&request(8, 8, 1), 3).status, 422);
        assert_eq!(read(&witness), served);
        drop(witness);
        assert_eq!(read(&service(dir.path())), served);
        // Other paths, and logs it does not follow, are not found.
        let again = service(dir.path());
        for other in [
            "checkpoint".to_string(),
            monitoring_path("pog.test/other"),
            format!("{path}/x"),
        ] {
            assert_eq!(again.monitoring(&other).status, 404, "{other}");
        }
    }

    #[test]
    fn a_flood_of_requests_for_a_log_is_answered_429_with_retry_after() {
        let dir = tempfile::tempdir().unwrap();
        let witness = service(dir.path()).with_budget(6);
        assert_eq!(witness.add_checkpoint(&request(5, 0, 0), 100).status, 200);
        // The same honest request again and again, at one instant: past the budget (a
        // minute's worth: 6), each is refused before anything is verified.
        let answers: Vec<_> = (0..20)
            .map(|_| witness.add_checkpoint(&request(5, 5, 0), 100))
            .collect();
        assert!(answers[..5].iter().all(|r| r.status == 200));
        for r in &answers[5..] {
            assert_eq!((r.status, r.retry_after), (429, Some(10)));
        }
        // Requests naming a log it does not follow spend nothing (404, no budget kept).
        let stranger = NoteSigner::new("pog.test/stranger", ALG_ED25519, [9; 32]).unwrap();
        let foreign = AddCheckpoint {
            old_size: 0,
            proof: vec![],
            checkpoint: Checkpoint {
                origin: "pog.test/stranger".into(),
                size: 0,
                root: pog_merkle::empty_root(),
                extensions: vec![],
            }
            .sign(&stranger)
            .to_text()
            .into_bytes(),
        };
        assert_eq!(witness.add_checkpoint(&foreign.encode(), 100).status, 404);
        assert_eq!(crate::witness_service::locked(&witness.budgets).len(), 1);
        // The budget refills evenly: 10 s later one more is taken.
        assert_eq!(witness.add_checkpoint(&request(8, 5, 0), 110).status, 200);
        assert_eq!(witness.add_checkpoint(&request(8, 8, 0), 110).status, 429);
    }

    #[test]
    fn a_state_that_cannot_be_saved_cosigns_nothing_and_is_put_back() {
        let dir = tempfile::tempdir().unwrap();
        let service = service(dir.path());
        // The state file's place taken by a folder: the rename fails.
        let path = service.state.path(log().verifier());
        std::fs::create_dir_all(path.join("blocker")).unwrap();
        let refused = service.add_checkpoint(&request(5, 0, 0), 7);
        assert_eq!(refused.status, 500);
        assert_eq!(service.latest("pog.test/log"), None);
        assert!(matches!(
            service.cosign(&request(5, 0, 0), 7),
            Err(CosignError::State(StateError::Io { .. }))
        ));
    }

    #[test]
    fn an_unreadable_state_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let state = WitnessState::open(&dir.path().join("witness")).unwrap();
        std::fs::write(state.path(log().verifier()), "not a checkpoint").unwrap();
        let e = WitnessService::open(witness_key(), vec![log().verifier().clone()], state)
            .err()
            .unwrap();
        assert!(
            e.to_string().contains("is unreadable") && e.to_string().contains(".checkpoint"),
            "{e}"
        );
    }
}
