//! The agent's side of the proof of storage (`pog_proof::storage`; the data set on disk is
//! `pog_local::storage`'s): the storage it claims (`pog agent --storage-dir DIR
//! --storage-size BYTES [--storage-class nvme|ssd]`), the data set a trusted validator asks
//! for, built in the background and kept between rounds (and across restarts: a data set
//! found whole in the directory at start is answered without a rebuild), and its rounds.
//!
//! - `POST /v1/storage/dataset` (`storage-dataset`, addressed like a challenge): the data set
//!   must be the claimed size. Kept already: `storage-built` (its root) at once. Otherwise
//!   its build starts in the background and the answer is `storage-building` (202); the
//!   validator sends the same message again to poll, and gets `storage-built` once it is
//!   done, or the build's error once (500; the next message starts it again). Another data
//!   set while one builds, or while a round is walked, is refused (409).
//! - `POST /v1/storage/audit` (`storage-audit`): chunks of the kept data set, opened with
//!   their paths (`storage-audit-openings`), for the validator it was built for.
//! - `POST /v1/storage/round` (`storage-round`, each id once): the walk from the kept data
//!   set (`storage-walk`), one at a time and never during a build (they would share the
//!   disk the round times).
//! - `POST /v1/storage/open` (`storage-open`): the walked steps asked, opened once, by the
//!   round's issuer, within the agent's hold.
//!
//! Every request body is at most [`MAX_STORAGE_REQUEST_BYTES`], every answer signed.

use crate::agent::{blocking, Agent};
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use pog_local::storage::{filesystem, StorageHostError, StoredDataset};
use pog_net::http::{envelope_response, ApiError};
use pog_net::locked::Locked;
use pog_proof::storage::session::{
    kind, AuditMessage, AuditOpeningsMessage, BuildingMessage, BuiltMessage, DatasetMessage,
    OpenMessage, OpeningsMessage, RoundMessage, WalkMessage,
};
use pog_proof::storage::{StorageClaim, StorageDataset, StorageRound, StorageWalk, MAX_SAMPLES};
use pog_proof::timing::CLOCK_SKEW_MS;
use pog_signed::PublicKey;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The largest request body a storage endpoint takes: its messages are small (an audit's
/// [`MAX_SAMPLES`] chunk numbers at most, about 25 KB signed).
pub const MAX_STORAGE_REQUEST_BYTES: usize = 64 << 10;

/// The longest a data set message may live from now, by its signed expiry: building
/// hundreds of GiB takes minutes, a slow disk hours.
pub const MAX_BUILD_LIFETIME_MS: u64 = 24 * 3600 * 1000;

/// The storage an agent proves, and what it holds of it.
pub struct HostStorage {
    dir: PathBuf,
    claim: StorageClaim,
    state: Mutex<StorageState>,
    /// The share of its data set a dishonest test host keeps (it regenerates the rest when a
    /// walk reads it): 1 for every real agent.
    #[cfg(feature = "test-doubles")]
    holds: f64,
}

/// What the storage holds, under one lock.
#[derive(Default)]
struct StorageState {
    /// The data set kept in the directory, opened.
    kept: Option<Arc<StoredDataset>>,
    /// The data set message (id, issuer) the kept data set last answered: its audit.
    answered: Option<(String, PublicKey)>,
    /// A build running or failed.
    build: Build,
    /// A walk or its openings are reading the data set.
    busy: bool,
    /// The last round walked, waiting for its open request.
    walked: Option<Arc<Walked>>,
}

/// A build of a data set in the background.
#[derive(Default)]
enum Build {
    /// None running.
    #[default]
    Idle,
    /// This data set is being built, since then.
    Running(StorageDataset, Instant),
    /// This data set's build failed, for this reason (told once to the next message for it).
    Failed(StorageDataset, String),
}

/// A walked round, kept for its open request.
struct Walked {
    round_id: String,
    issuer: PublicKey,
    round: StorageRound,
    walk: StorageWalk,
    stored: Arc<StoredDataset>,
}

/// What a data set message gets.
enum Answer {
    /// Kept: its root.
    Built([u8; 32]),
    /// Being built for that long, ms.
    Building(u64),
    /// Its build failed.
    Failed(String),
    /// Another build or a round holds the storage.
    Busy(&'static str),
    /// Not kept: start building it.
    Start,
}

impl HostStorage {
    /// The storage under `dir` (created if missing; not a RAM file system), claimed as
    /// `claim`; a data set already kept there whole, of the claimed shape, is taken up.
    pub fn new(dir: &Path, claim: StorageClaim) -> Result<HostStorage, StorageHostError> {
        let not_writable = |cause| StorageHostError::NotWritable {
            path: dir.to_path_buf(),
            cause,
        };
        // The file system is judged where the directory will be, before anything is created:
        // a refused directory is not left behind.
        let existing = dir
            .ancestors()
            .find(|a| !a.as_os_str().is_empty() && a.exists())
            .unwrap_or(Path::new("."));
        let fs_name = filesystem(existing).map_err(not_writable)?;
        if fs_name == "tmpfs" || fs_name == "ramfs" {
            return Err(StorageHostError::InMemory {
                path: dir.to_path_buf(),
                filesystem: fs_name,
            });
        }
        std::fs::create_dir_all(dir).map_err(not_writable)?;
        let kept = StoredDataset::open(dir)
            .ok()
            .filter(|k| claim.shape().is_ok_and(|s| s == k.meta().dataset.shape))
            .map(Arc::new);
        Ok(HostStorage {
            dir: dir.to_path_buf(),
            claim,
            state: Mutex::new(StorageState {
                kept,
                ..StorageState::default()
            }),
            #[cfg(feature = "test-doubles")]
            holds: 1.0,
        })
    }

    /// The same storage on a dishonest test host that keeps only `share` of its data set's
    /// chunks (the first ones) and regenerates the others when its walk reads them: a host
    /// claiming more storage than it has (tests of the validator only).
    #[cfg(feature = "test-doubles")]
    pub fn holding(mut self, share: f64) -> HostStorage {
        self.holds = share;
        self
    }

    /// Walks `round` over `stored` (the test double's walk regenerates what it does not
    /// keep).
    fn walk(
        &self,
        stored: &StoredDataset,
        round: &StorageRound,
    ) -> Result<StorageWalk, StorageHostError> {
        #[cfg(feature = "test-doubles")]
        if self.holds < 1.0 {
            let kept = (round.dataset.shape.chunks() as f64 * self.holds) as u64;
            return round.walk(|i| {
                if i < kept {
                    stored.read_chunk(i)
                } else {
                    Ok(round.dataset.chunk(i))
                }
            });
        }
        stored.walk(round).map(|(walk, _)| walk)
    }

    /// What the agent claims.
    pub fn claim(&self) -> StorageClaim {
        self.claim
    }

    /// Refuses (400) a data set of another shape than the claim's, or one the protocol
    /// refuses.
    fn admit(&self, dataset: &StorageDataset) -> Result<(), ApiError> {
        let bad = |m: String| ApiError::new(StatusCode::BAD_REQUEST, m);
        dataset.validate().map_err(|e| bad(e.to_string()))?;
        let claimed = self.claim.shape().map_err(|e| bad(e.to_string()))?;
        if dataset.shape != claimed {
            return Err(bad(format!(
                "a data set of {} bytes in {}-chunk items; this agent claims {} bytes of {} \
                 storage ({} items of {} chunks)",
                dataset.shape.bytes(),
                dataset.shape.chunks_per_item,
                self.claim.bytes,
                self.claim.class,
                claimed.items,
                claimed.chunks_per_item
            )));
        }
        Ok(())
    }

    /// What `message` (from `signer`) gets now; a build to start is marked running.
    fn on_dataset(&self, message: &DatasetMessage, signer: &PublicKey) -> Answer {
        let mut state = self.state.locked();
        if let Some(kept) = &state.kept {
            if kept.meta().dataset == message.dataset {
                let root = kept.meta().root;
                state.answered = Some((message.id.clone(), signer.clone()));
                return Answer::Built(root);
            }
        }
        match &state.build {
            Build::Running(d, since) if *d == message.dataset => {
                Answer::Building(since.elapsed().as_millis() as u64)
            }
            Build::Running(..) => Answer::Busy("another data set is being built"),
            Build::Failed(d, reason) if *d == message.dataset => {
                let reason = reason.clone();
                state.build = Build::Idle;
                Answer::Failed(reason)
            }
            _ if state.busy => Answer::Busy("a round is reading the data set"),
            _ => {
                state.build = Build::Running(message.dataset.clone(), Instant::now());
                Answer::Start
            }
        }
    }

    /// Ends the build of `dataset`: kept (replacing the data set before it), or failed.
    fn finish_build(&self, dataset: &StorageDataset, built: Result<StoredDataset, String>) {
        let mut state = self.state.locked();
        match built {
            Ok(stored) => {
                state.kept = Some(Arc::new(stored));
                state.answered = None;
                state.walked = None;
                state.build = Build::Idle;
            }
            Err(reason) => state.build = Build::Failed(dataset.clone(), reason),
        }
    }

    /// The kept data set for a round of it, the storage marked busy until the guard drops.
    fn start_walk(
        self: &Arc<Self>,
        round: &StorageRound,
    ) -> Result<(Arc<StoredDataset>, Busy), ApiError> {
        let mut state = self.state.locked();
        if matches!(state.build, Build::Running(..)) {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "a data set is being built: no round until it is done",
            ));
        }
        if state.busy {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "another round is reading the data set",
            ));
        }
        let Some(kept) = state.kept.clone() else {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "no data set is kept: send one first",
            ));
        };
        if kept.meta().dataset != round.dataset || kept.meta().root != round.root {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                format!(
                    "the round is for data set root {}, this agent keeps {}: send the data set",
                    hex::encode(round.root),
                    hex::encode(kept.meta().root)
                ),
            ));
        }
        state.busy = true;
        Ok((kept, Busy(self.clone())))
    }

    /// The kept data set when `dataset_id` is the message it last answered, from `signer`.
    fn audited(
        &self,
        dataset_id: &str,
        signer: &PublicKey,
    ) -> Result<Arc<StoredDataset>, ApiError> {
        let state = self.state.locked();
        match (&state.kept, &state.answered) {
            (Some(kept), Some((id, issuer))) if id == dataset_id && issuer == signer => {
                Ok(kept.clone())
            }
            _ => Err(ApiError::new(
                StatusCode::NOT_FOUND,
                format!("no data set {dataset_id} was built for this validator"),
            )),
        }
    }

    /// Takes the walked round `round_id` out for its issuer `signer` (once; a refused request
    /// leaves it to the issuer).
    fn take_walk(&self, round_id: &str, signer: &PublicKey) -> Result<Arc<Walked>, ApiError> {
        let mut state = self.state.locked();
        let Some(walked) = state.walked.as_ref().filter(|w| w.round_id == round_id) else {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                format!("unknown or already opened round {round_id}"),
            ));
        };
        if walked.issuer != *signer {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                format!("round {round_id} was issued by another validator"),
            ));
        }
        Ok(state
            .walked
            .take()
            .expect("present: checked under the same lock"))
    }
}

/// The storage marked busy by a walk; free again when dropped, however the walk ends.
struct Busy(Arc<HostStorage>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.state.locked().busy = false;
    }
}

/// The proof of storage's routes, each body at most [`MAX_STORAGE_REQUEST_BYTES`].
pub(crate) fn routes() -> Router<Arc<Agent>> {
    let limit = || DefaultBodyLimit::max(MAX_STORAGE_REQUEST_BYTES);
    Router::new()
        .route("/v1/storage/dataset", post(dataset).layer(limit()))
        .route("/v1/storage/audit", post(audit).layer(limit()))
        .route("/v1/storage/round", post(round).layer(limit()))
        .route("/v1/storage/open", post(open).layer(limit()))
}

/// The agent's storage, or 404 when it claims none.
fn storage_of(agent: &Agent) -> Result<Arc<HostStorage>, ApiError> {
    agent.storage.clone().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "this agent claims no storage (pog agent --storage-dir)",
        )
    })
}

/// `POST /v1/storage/dataset`: the data set's root when kept, else its build started or
/// polled (module doc).
async fn dataset(State(agent): State<Arc<Agent>>, body: Bytes) -> Result<Response, ApiError> {
    let storage = storage_of(&agent)?;
    let (message, signer): (DatasetMessage, PublicKey) =
        pog_signed::decode(&body, kind::STORAGE_DATASET)?;
    agent.check_addressed(&signer, &message.dataset.to)?;
    crate::agent::check_id(&message.id)?;
    let now = agent.now_ms();
    if now > message.expires_at_ms.saturating_add(CLOCK_SKEW_MS) {
        return Err(ApiError::new(
            StatusCode::GONE,
            format!(
                "data set {} expired at {} ms (now {now} ms)",
                message.id, message.expires_at_ms
            ),
        ));
    }
    if message.expires_at_ms > now.saturating_add(MAX_BUILD_LIFETIME_MS + CLOCK_SKEW_MS) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!(
                "data set {} expires more than {} h from now",
                message.id,
                MAX_BUILD_LIFETIME_MS / 3_600_000
            ),
        ));
    }
    storage.admit(&message.dataset)?;
    let building = |running_ms| -> Result<Response, ApiError> {
        let sealed = agent.signer().seal(
            kind::STORAGE_BUILDING,
            &BuildingMessage {
                dataset_id: message.id.clone(),
                running_ms,
            },
        )?;
        Ok((StatusCode::ACCEPTED, axum::Json(sealed)).into_response())
    };
    match storage.on_dataset(&message, &signer) {
        Answer::Built(root) => Ok(envelope_response(agent.signer().seal(
            kind::STORAGE_BUILT,
            &BuiltMessage {
                dataset_id: message.id.clone(),
                root,
            },
        )?)),
        Answer::Building(running_ms) => building(running_ms),
        Answer::Failed(reason) => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("building the data set failed: {reason}"),
        )),
        Answer::Busy(why) => Err(ApiError::new(StatusCode::CONFLICT, why)),
        Answer::Start => {
            let (worker, set) = (storage.clone(), message.dataset.clone());
            let dir = storage.dir.clone();
            tracing::info!(
                dir = %dir.display(),
                bytes = set.shape.bytes(),
                "building the storage proof's data set"
            );
            let build = tokio::task::spawn_blocking(move || StoredDataset::build(&dir, &set));
            let set = message.dataset.clone();
            tokio::spawn(async move {
                let built = match build.await {
                    Ok(Ok(stored)) => Ok(stored),
                    Ok(Err(e)) => Err(e.to_string()),
                    Err(_) => Err("the build stopped".to_string()),
                };
                if let Err(why) = &built {
                    tracing::warn!(error = %why, "building the storage proof's data set");
                }
                worker.finish_build(&set, built);
            });
            building(0)
        }
    }
}

/// `POST /v1/storage/audit`: the chunks asked of the data set last built for this
/// validator, with their paths.
async fn audit(State(agent): State<Arc<Agent>>, body: Bytes) -> Result<Response, ApiError> {
    let storage = storage_of(&agent)?;
    let (message, signer): (AuditMessage, PublicKey) =
        pog_signed::decode(&body, kind::STORAGE_AUDIT)?;
    agent.check_trusted(&signer, "audit request")?;
    check_count(message.chunks.len(), "chunks")?;
    let stored = storage.audited(&message.dataset_id, &signer)?;
    let chunks = stored.meta().dataset.shape.chunks();
    if let Some(past) = message.chunks.iter().find(|&&c| c >= chunks) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("chunk {past} is past the data set's {chunks}"),
        ));
    }
    let asked = message.chunks;
    let opened = blocking("opening the audit's chunks failed".into(), move || {
        asked
            .iter()
            .map(|&i| stored.open_chunk(i))
            .collect::<Result<Vec<_>, _>>()
    })
    .await?;
    Ok(envelope_response(agent.signer().seal(
        kind::STORAGE_AUDIT_OPENINGS,
        &AuditOpeningsMessage {
            dataset_id: message.dataset_id,
            chunks: opened,
        },
    )?))
}

/// `POST /v1/storage/round`: walks the kept data set from the round's nonce (the timed
/// phase), keeps the walk for its open request (dropped after the agent's hold).
async fn round(State(agent): State<Arc<Agent>>, body: Bytes) -> Result<Response, ApiError> {
    let storage = storage_of(&agent)?;
    let (message, signer): (RoundMessage, PublicKey) =
        pog_signed::decode(&body, kind::STORAGE_ROUND)?;
    agent.check_addressed(&signer, &message.round.dataset.to)?;
    message
        .round
        .validate()
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.to_string()))?;
    agent.take_id(&message.id, message.expires_at_ms)?;
    let (stored, busy) = storage.start_walk(&message.round)?;
    let (reader, round, walker) = (stored.clone(), message.round.clone(), storage.clone());
    let walk = blocking("walking the data set failed".into(), move || {
        let _busy = busy;
        walker.walk(&reader, &round)
    })
    .await?;
    storage.state.locked().walked = Some(Arc::new(Walked {
        round_id: message.id.clone(),
        issuer: signer,
        round: message.round,
        walk: walk.clone(),
        stored,
    }));
    let id = message.id.clone();
    agent.after_hold(&tokio::runtime::Handle::current(), move |agent| {
        if let Some(storage) = &agent.storage {
            let mut state = storage.state.locked();
            if state.walked.as_ref().is_some_and(|w| w.round_id == id) {
                state.walked = None;
            }
        }
    });
    Ok(envelope_response(agent.signer().seal(
        kind::STORAGE_WALK,
        &WalkMessage {
            round_id: message.id,
            walk,
        },
    )?))
}

/// `POST /v1/storage/open`: the walked steps asked, each step's chunk with its path.
async fn open(State(agent): State<Arc<Agent>>, body: Bytes) -> Result<Response, ApiError> {
    let storage = storage_of(&agent)?;
    let (message, signer): (OpenMessage, PublicKey) =
        pog_signed::decode(&body, kind::STORAGE_OPEN)?;
    agent.check_trusted(&signer, "open request")?;
    check_count(message.request.steps.len(), "steps")?;
    let walked = storage.take_walk(&message.round_id, &signer)?;
    let steps = walked.round.steps;
    if let Some(past) = message.request.steps.iter().find(|&&t| t >= steps) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("step {past} is past the walk's {steps}"),
        ));
    }
    let request = message.request;
    let openings = blocking("opening the walked steps failed".into(), move || {
        walked
            .stored
            .open_steps(&walked.round, &walked.walk, &request)
    })
    .await?;
    Ok(envelope_response(agent.signer().seal(
        kind::STORAGE_OPENINGS,
        &OpeningsMessage {
            round_id: message.round_id,
            openings,
        },
    )?))
}

/// Refuses an audit or open request for none, or more than [`MAX_SAMPLES`], of `what`.
fn check_count(n: usize, what: &str) -> Result<(), ApiError> {
    match n {
        0 => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("no {what} asked"),
        )),
        n if n > MAX_SAMPLES as usize => Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("{n} {what} asked, at most {MAX_SAMPLES}"),
        )),
        _ => Ok(()),
    }
}
