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
//!   set while one builds is answered `storage-building` too, naming the data set being built
//!   (`instead`: its message as its validator signed it), so that a validator that restarted,
//!   or another of its fleet, can take that one up rather than have the host start over. A
//!   data set while a round is walked is refused (409).
//! - `POST /v1/storage/audit` (`storage-audit`): chunks of the kept data set, opened with
//!   their paths (`storage-audit-openings`), for the validator it was built for.
//! - `POST /v1/storage/round` (`storage-round`, each id once): the walk from the kept data
//!   set (`storage-walk`), one at a time and never during a build (they would share the
//!   disk the round times).
//! - `POST /v1/storage/open` (`storage-open`): the walked steps asked, opened once, by the
//!   round's issuer, within the agent's hold.
//!
//! Every request body is at most [`MAX_STORAGE_REQUEST_BYTES`], every answer signed.

use axum::http::StatusCode;
use pog_local::storage::{filesystem, StorageHostError, StoredDataset};
use pog_net::http::ApiError;
use pog_net::locked::Locked;
use pog_proof::storage::session::DatasetMessage;
use pog_proof::storage::{StorageClaim, StorageDataset, StorageRound, StorageWalk};
use pog_signed::{Envelope, PublicKey};
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
    pub(crate) dir: PathBuf,
    pub(crate) claim: StorageClaim,
    pub(crate) state: Mutex<StorageState>,
    /// The share of its data set a dishonest test host keeps (it regenerates the rest when a
    /// walk reads it): 1 for every real agent.
    #[cfg(feature = "test-doubles")]
    pub(crate) holds: f64,
    /// How long a test host's build waits before it starts (a large disk's build, in tests
    /// of what happens meanwhile): none for every real agent.
    #[cfg(feature = "test-doubles")]
    pub(crate) build_delay: std::time::Duration,
}

/// What the storage holds, under one lock.
#[derive(Default)]
pub(crate) struct StorageState {
    /// The data set kept in the directory, opened.
    pub(crate) kept: Option<Arc<StoredDataset>>,
    /// The id of the data set message the kept data set last answered: its audit, which
    /// any validator the agent trusts may ask (one of a fleet may have taken the data set up
    /// from another that sent it).
    pub(crate) answered: Option<String>,
    /// A build running or failed.
    pub(crate) build: Build,
    /// A walk or its openings are reading the data set.
    pub(crate) busy: bool,
    /// The last round walked, waiting for its open request.
    pub(crate) walked: Option<Arc<Walked>>,
}

/// A build of a data set in the background.
#[derive(Default)]
pub(crate) enum Build {
    /// None running.
    #[default]
    Idle,
    /// This data set is being built, since then, from this message (as its validator
    /// signed it: offered to a validator asking for another data set meanwhile).
    Running(StorageDataset, Instant, Envelope),
    /// This data set's build failed, for this reason (told once to the next message for it).
    Failed(StorageDataset, String),
}

/// A walked round, kept for its open request.
pub(crate) struct Walked {
    pub(crate) round_id: String,
    pub(crate) issuer: PublicKey,
    pub(crate) round: StorageRound,
    pub(crate) walk: StorageWalk,
    pub(crate) stored: Arc<StoredDataset>,
}

/// What a data set message gets.
pub(crate) enum Answer {
    /// Kept: its root.
    Built([u8; 32]),
    /// Being built for that long, ms.
    Building(u64),
    /// Another data set is being built, for that long, ms, from this message.
    BuildingInstead(u64, Envelope),
    /// Its build failed.
    Failed(String),
    /// A round holds the storage.
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
            #[cfg(feature = "test-doubles")]
            build_delay: std::time::Duration::ZERO,
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

    /// The same storage on a test host whose builds take `delay` longer (a large disk's
    /// build, without writing one in a test).
    #[cfg(feature = "test-doubles")]
    pub fn building_slowly(mut self, delay: std::time::Duration) -> HostStorage {
        self.build_delay = delay;
        self
    }

    /// Builds `dataset` in the directory (blocking: minutes for hundreds of GiB), making way
    /// for the agent's timed proofs (`foreground`) while they run.
    pub(crate) fn build(
        &self,
        dataset: &StorageDataset,
        foreground: pog_local::storage::Foreground,
    ) -> Result<StoredDataset, StorageHostError> {
        #[cfg(feature = "test-doubles")]
        std::thread::sleep(self.build_delay);
        let options = pog_local::storage::BuildOptions {
            makes_way_for: foreground,
            ..Default::default()
        };
        StoredDataset::build_with(&self.dir, dataset, &options)
    }

    /// Walks `round` over `stored` (the test double's walk regenerates what it does not
    /// keep).
    pub(crate) fn walk(
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
    pub(crate) fn admit(&self, dataset: &StorageDataset) -> Result<(), ApiError> {
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

    /// What `message` (as `sent`, signed) gets now; a build to start is marked running.
    pub(crate) fn on_dataset(&self, message: &DatasetMessage, sent: &Envelope) -> Answer {
        let mut state = self.state.locked();
        if let Some(kept) = &state.kept {
            if kept.meta().dataset == message.dataset {
                let root = kept.meta().root;
                state.answered = Some(message.id.clone());
                return Answer::Built(root);
            }
        }
        match &state.build {
            Build::Running(d, since, _) if *d == message.dataset => {
                Answer::Building(since.elapsed().as_millis() as u64)
            }
            Build::Running(_, since, running) => {
                Answer::BuildingInstead(since.elapsed().as_millis() as u64, running.clone())
            }
            Build::Failed(d, reason) if *d == message.dataset => {
                let reason = reason.clone();
                state.build = Build::Idle;
                Answer::Failed(reason)
            }
            _ if state.busy => Answer::Busy("a round is reading the data set"),
            _ => {
                state.build = Build::Running(message.dataset.clone(), Instant::now(), sent.clone());
                Answer::Start
            }
        }
    }

    /// Ends the build of `dataset`: kept (replacing the data set before it), or failed.
    pub(crate) fn finish_build(
        &self,
        dataset: &StorageDataset,
        built: Result<StoredDataset, String>,
    ) {
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
    pub(crate) fn start_walk(
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

    /// The kept data set when `dataset_id` is the message it last answered.
    pub(crate) fn audited(&self, dataset_id: &str) -> Result<Arc<StoredDataset>, ApiError> {
        let state = self.state.locked();
        match (&state.kept, &state.answered) {
            (Some(kept), Some(id)) if id == dataset_id => Ok(kept.clone()),
            _ => Err(ApiError::new(
                StatusCode::NOT_FOUND,
                format!("no data set {dataset_id} is kept here"),
            )),
        }
    }

    /// Takes the walked round `round_id` out for its issuer `signer` (once; a refused request
    /// leaves it to the issuer).
    pub(crate) fn take_walk(
        &self,
        round_id: &str,
        signer: &PublicKey,
    ) -> Result<Arc<Walked>, ApiError> {
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
pub(crate) struct Busy(Arc<HostStorage>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.state.locked().busy = false;
    }
}
