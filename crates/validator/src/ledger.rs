//! The validator's transparency log (`pog_ledger`): every record it signs appended durably
//! before it is stored, checkpoints signed on a schedule and cosigned by witnesses, and the log
//! served the c2sp.org/tlog-tiles way under `/ledger/` of its API.
//!
//! - [`ValidatorLedger`]: the ledger (`DATA_DIR/ledger`), its group-commit writer and the log's
//!   note signer (the validator's key, named [`origin`]).
//! - [`publish`]: asks c2sp.org/tlog-witness witnesses, all at once and each within its own
//!   deadline, to cosign the stored checkpoint, and attaches each cosignature as it arrives
//!   (also `pog ledger publish`).
//! - [`checkpoint_on_schedule`]: signs a checkpoint whenever the log grew, and publishes it.
//! - [`router`]: `GET /ledger/checkpoint` and `GET /ledger/tile/{*path}`, tiles read from disk
//!   as they are sent, under the server's response budget ([`pog_net::serve::Streamed`]).

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use hyper::body::{Bytes, Frame, SizeHint};
use pog_ledger::checkpoint::SignedCheckpoint;
use pog_ledger::entry::{Entry, EntryError};
use pog_ledger::note::{Note, NoteError, NoteSigner, Verifier, ALG_COSIGNATURE_V1, ALG_ED25519};
use pog_ledger::serve::{LogAnswer, TILE_CACHE_CONTROL, TILE_CONTENT_TYPE};
use pog_ledger::store::{GroupCommit, Ledger, StoreError, TileReader};
use pog_ledger::witness::AddCheckpoint;
use pog_net::locked::Locked;
use pog_net::serve::{Streamed, PIECE_BYTES};
use pog_signed::{Envelope, Identity};
use serde::Serialize;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

/// Why the ledger could not take a record, sign a checkpoint or publish it.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// The signed record is no valid ledger entry (its kind, GPU UUID, size or signature).
    #[error("the record cannot be a ledger entry: {0}")]
    Entry(#[from] EntryError),
    /// The log on disk refused (I/O, read-only, poisoned after a failed write, corrupt).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The log's name is not a valid note key name.
    #[error("the log name {name:?}: {source}")]
    Origin {
        /// The name refused.
        name: String,
        /// Why it is no key name.
        source: NoteError,
    },
    /// No checkpoint has been signed yet.
    #[error("the ledger has no checkpoint yet: run `pog ledger checkpoint` (a validator signs one every --checkpoint-every)")]
    NoCheckpoint,
    /// The stored checkpoint does not parse.
    #[error("the ledger's stored checkpoint is unreadable: {0}")]
    Checkpoint(String),
    /// A witness has cosigned a larger tree of this log than the checkpoint.
    #[error("the witness has cosigned size {old}, beyond this log's checkpoint of size {size}: it saw a longer history of this log")]
    Beyond {
        /// The tree size the witness has cosigned.
        old: u64,
        /// The size of this log's checkpoint.
        size: u64,
    },
    /// A witness answered 200 with something that is not a cosignature line.
    #[error("a witness answered with a malformed cosignature line: {0}")]
    Cosignature(String),
    /// The log's tiles cannot be read from where they were asked for.
    #[error("the log's tiles: {0}")]
    Tiles(String),
    /// The writer or the publisher's task died (a bug).
    #[error("the ledger's task failed: {0}")]
    Task(String),
    /// The hardened HTTP client for witnesses or tiles could not be built.
    #[error(transparent)]
    Client(#[from] pog_net::http::BuildClientError),
    /// The fleet's log in the database refused (issue 22: [`crate::fleet_log`]).
    #[error(transparent)]
    Fleet(#[from] crate::fleet_log::FleetLogError),
    /// The tree in the data dir is not a prefix of the fleet's log.
    #[error(
        "the ledger in {dir} is not the fleet's log ({why}): it is a log of its own (this \
         validator's from before it joined the fleet, or another fleet's); move it aside (it \
         stays verifiable with its key) and start again: the fleet's log is copied in"
    )]
    NotTheFleets {
        /// The ledger's directory.
        dir: std::path::PathBuf,
        /// Where it departs from the fleet's log.
        why: String,
    },
}

/// The log's default name (checkpoint origin and note key name): `pog.validator/` and the first
/// 16 hex digits of the validator's public key. `pog ledger` uses the same.
pub fn origin(validator_public_hex: &str) -> String {
    let n = validator_public_hex.len().min(16);
    format!("pog.validator/{}", &validator_public_hex[..n])
}

/// The default name of a log signed by a log key of its own (`--log-key-file`, a fleet's):
/// `pog.log/` and the first 16 hex digits of that key.
pub fn log_key_origin(log_public_hex: &str) -> String {
    let n = log_public_hex.len().min(16);
    format!("pog.log/{}", &log_public_hex[..n])
}

/// The validator's key as the log's note signer, named `origin` (or [`origin`]'s default).
pub fn log_signer(identity: &Identity, name: Option<&str>) -> Result<NoteSigner, LedgerError> {
    let name = name.map_or_else(|| origin(&identity.public_key()), str::to_string);
    NoteSigner::new(&name, ALG_ED25519, identity.seed())
        .map_err(|source| LedgerError::Origin { name, source })
}

/// Runs `f`, which blocks (fsync), without stalling a multi-threaded runtime's other tasks
/// (`block_in_place`); directly on a current-thread runtime or outside any.
pub(crate) fn blocking<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// The validator's ledger: the log it appends every signed record to, the group-commit writer
/// (concurrent challenges' records share fsyncs), and its checkpoint signer.
pub struct ValidatorLedger {
    ledger: Arc<Ledger>,
    commit: GroupCommit,
    signer: NoteSigner,
    /// The last publication left a witness without a cosignature: retry on the next tick.
    retry_witnesses: Mutex<bool>,
    /// The size each witness (by URL) said it holds: the next publication starts there.
    witness_sizes: Mutex<std::collections::HashMap<String, u64>>,
    /// Cosignatures a checkpoint needs before it is stored and served (0: stored at once).
    quorum: usize,
    /// A checkpoint signed but not yet cosigned by the quorum, with the cosignatures it has.
    pending: Mutex<Option<SignedCheckpoint>>,
    /// How long each witness has to answer a publication.
    witness_deadline: Duration,
    /// Each witness's request budget and back-off.
    budgets: Arc<WitnessBudgets>,
    /// Bundle pages being built at once (`GET /v1/bundles/{uuid}`); past them, 503.
    pages: Arc<tokio::sync::Semaphore>,
    /// The fleet's log this ledger mirrors, when the validator is one of a fleet.
    fleet: Option<Fleet>,
    /// Whether this validator signs, publishes and anchors the log's checkpoints: always
    /// alone; in a fleet, while it holds the log lease.
    leading: tokio::sync::watch::Sender<bool>,
}

/// A fleet's shared log behind a [`ValidatorLedger`] (issue 22, [`crate::fleet_log`]): the
/// entries are sequenced in the database, the tree in the data dir is brought up to it, and
/// the holder of the log lease signs the checkpoints.
struct Fleet {
    db: crate::fleet_log::FleetLog,
    /// This validator's key (hex): the lease's holder.
    holder: String,
    /// How long the log lease lasts from each renewal.
    lease_for: Duration,
    /// The log lease's fencing token while this validator holds it.
    token: Mutex<Option<i64>>,
    /// Held while entries are integrated (one integration at a time).
    integrating: Mutex<()>,
}

/// Entries integrated from the fleet's log per read.
const INTEGRATE_BATCH: usize = 2048;

/// Bundle pages built at once by default: each reads up to [`MAX_BUNDLE_PAGE`] records and
/// their proofs from the log, so a flood of page requests takes this many blocking threads and
/// no more (others get 503 with `Retry-After`).
pub const BUNDLE_PAGES_AT_ONCE: usize = 4;

/// How long a witness has to answer a publication by default (its connection, its answer, and
/// the second request when it answers 409 with another size). The witnesses are asked at once,
/// each within its own deadline, so one that hangs costs only its own cosignature.
pub const WITNESS_DEADLINE: Duration = Duration::from_secs(20);

impl ValidatorLedger {
    /// Opens (or creates) the ledger in `dir` for writing (it holds the directory's lock) with
    /// the validator's key as log key, named `name` (default [`origin`]).
    pub fn open(
        dir: &std::path::Path,
        identity: &Identity,
        name: Option<&str>,
    ) -> Result<ValidatorLedger, LedgerError> {
        let signer = log_signer(identity, name)?;
        Ok(ValidatorLedger::new(Ledger::open(dir)?, signer))
    }

    /// A validator ledger over an opened `ledger`, signing checkpoints with `signer`.
    pub fn new(ledger: Ledger, signer: NoteSigner) -> ValidatorLedger {
        let ledger = Arc::new(ledger);
        ValidatorLedger {
            commit: GroupCommit::start(ledger.clone()),
            ledger,
            signer,
            retry_witnesses: Mutex::new(false),
            witness_sizes: Mutex::default(),
            quorum: 0,
            pending: Mutex::new(None),
            witness_deadline: WITNESS_DEADLINE,
            budgets: Arc::new(WitnessBudgets::new(WitnessBudget::default())),
            pages: Arc::new(tokio::sync::Semaphore::new(BUNDLE_PAGES_AT_ONCE)),
            fleet: None,
            leading: tokio::sync::watch::channel(true).0,
        }
    }

    /// This ledger as the mirror of a fleet's log `db` (its signer must be the fleet's log
    /// key: [`crate::fleet_log::FleetLog::adopt_key`]): records are sequenced in the database
    /// and integrated here, and the checkpoints are signed, published and anchored by whichever
    /// validator holds the log lease (`holder` is this one's key), renewed every tick and
    /// lasting `lease_for`. Refused when the tree here is not a prefix of the fleet's log;
    /// otherwise brought up to it now.
    pub fn with_fleet(
        mut self,
        db: crate::fleet_log::FleetLog,
        holder: &str,
        lease_for: Duration,
    ) -> Result<ValidatorLedger, LedgerError> {
        let log = self.ledger.log();
        let (local, fleet) = (log.size(), blocking(|| db.size())?);
        let not_the_fleets = |why: String| LedgerError::NotTheFleets {
            dir: log.dir().to_path_buf(),
            why,
        };
        if local > fleet {
            return Err(not_the_fleets(format!(
                "it holds {local} entries, the fleet's log {fleet}"
            )));
        }
        if local > 0 {
            let last = local - 1;
            let theirs = blocking(|| db.entries(last, 1))?;
            let ours = Entry::parse(&log.entry(last)?)?;
            let same = theirs
                .first()
                .and_then(|(_, e)| Entry::parse(e).ok())
                .is_some_and(|mut theirs| {
                    (theirs.prev_index, theirs.gpu_seq) = (ours.prev_index, ours.gpu_seq);
                    theirs.encode() == ours.encode()
                });
            if !same {
                return Err(not_the_fleets(format!(
                    "its entry {last} is not the fleet's"
                )));
            }
        }
        self.fleet = Some(Fleet {
            db,
            holder: holder.to_string(),
            lease_for,
            token: Mutex::new(None),
            integrating: Mutex::new(()),
        });
        self.leading.send_replace(false);
        self.catch_up(None)?;
        Ok(self)
    }

    /// Whether this validator signs, publishes and anchors the log's checkpoints now (alone:
    /// always; in a fleet: while it holds the log lease), as it changes.
    pub fn leading(&self) -> tokio::sync::watch::Receiver<bool> {
        self.leading.subscribe()
    }

    /// Whether this validator leads the log now (see [`ValidatorLedger::leading`]).
    pub fn leads(&self) -> bool {
        *self.leading.borrow()
    }

    /// Whether this ledger mirrors a fleet's log (records are then sequenced in the database:
    /// [`ValidatorLedger::fleet_entry`]).
    pub fn is_fleets(&self) -> bool {
        self.fleet.is_some()
    }

    /// The entry the fleet's log is to hold for a signed record (encoded), to be sequenced
    /// with the record in one transaction ([`crate::registry::Registry::record_logged`]);
    /// `None` for a ledger of its own.
    pub fn fleet_entry(&self, envelope: &Envelope) -> Result<Option<Vec<u8>>, LedgerError> {
        if self.fleet.is_none() {
            return Ok(None);
        }
        Ok(Some(Entry::from_envelope(envelope)?.encode()))
    }

    /// Brings the tree here up to the fleet's log: at least to `size` entries (`None`: all
    /// the database holds now). Its size after. A ledger of its own is left as it is.
    pub fn catch_up(&self, size: Option<u64>) -> Result<u64, LedgerError> {
        let log = self.ledger.log();
        let Some(fleet) = &self.fleet else {
            return Ok(log.size());
        };
        if size.is_some_and(|size| log.size() >= size) {
            return Ok(log.size());
        }
        let _one_at_a_time = fleet.integrating.locked();
        loop {
            let local = log.size();
            if size.is_some_and(|size| local >= size) {
                return Ok(local);
            }
            let batch = blocking(|| fleet.db.entries(local, INTEGRATE_BATCH))?;
            if batch.is_empty() {
                return match size {
                    Some(size) => Err(LedgerError::Tiles(format!(
                        "the fleet's log holds {local} entries, not the {size} asked for"
                    ))),
                    None => Ok(local),
                };
            }
            let mut entries = Vec::with_capacity(batch.len());
            for (k, (index, bytes)) in batch.into_iter().enumerate() {
                if index != local + k as u64 {
                    return Err(LedgerError::Tiles(format!(
                        "the fleet's log has no entry {} (the next is {index})",
                        local + k as u64
                    )));
                }
                entries.push(Entry::parse(&bytes)?);
            }
            let indexes = blocking(|| self.commit.handle().append(entries))?;
            if indexes.first() != Some(&local) {
                return Err(LedgerError::Task(format!(
                    "integrated at {:?}, not at {local}: another writer appends to the mirror",
                    indexes.first()
                )));
            }
        }
    }

    /// This ledger building at most `pages` bundle pages at once (instead of
    /// [`BUNDLE_PAGES_AT_ONCE`]).
    pub fn with_bundle_pages(mut self, pages: usize) -> ValidatorLedger {
        self.pages = Arc::new(tokio::sync::Semaphore::new(pages));
        self
    }

    /// This ledger asking each witness within `budget` (instead of
    /// [`WitnessBudget::default`]).
    pub fn with_witness_budget(mut self, budget: WitnessBudget) -> ValidatorLedger {
        self.budgets = Arc::new(WitnessBudgets::new(budget));
        self
    }

    /// This ledger publishing a checkpoint (storing it as the latest, served, exported and
    /// anchored) only once `quorum` of the witnesses it is sent to cosigned it, as Sigsum
    /// does: until then the previous one stays the latest, and no holder is handed a
    /// checkpoint the witnesses have not seen.
    pub fn with_quorum(mut self, quorum: usize) -> ValidatorLedger {
        self.quorum = quorum;
        self
    }

    /// This ledger giving each witness `deadline` to answer a publication (instead of
    /// [`WITNESS_DEADLINE`]).
    pub fn with_witness_deadline(mut self, deadline: Duration) -> ValidatorLedger {
        self.witness_deadline = deadline;
        self
    }

    /// The ledger, to read.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// The log's verifier key (what holders and witnesses are given).
    pub fn vkey(&self) -> String {
        self.signer.verifier().to_vkey()
    }

    /// Appends a signed record durably (returns once it is fsynced, or in a fleet, committed
    /// to the fleet's log); its log index.
    pub fn append(&self, envelope: &Envelope) -> Result<u64, LedgerError> {
        let entry = Entry::from_envelope(envelope)?;
        if let Some(fleet) = &self.fleet {
            let index = blocking(|| fleet.db.log_entry(&entry.encode()))?;
            self.integrated(index);
            return Ok(index);
        }
        let indexes = blocking(|| self.commit.handle().append(vec![entry]))?;
        indexes
            .first()
            .copied()
            .ok_or_else(|| LedgerError::Task("the writer returned no index".into()))
    }

    /// Brings the tree here up to the entry at `index` of the fleet's log, just committed
    /// there: the record is the fleet's already, so a failure here (retried at the next tick)
    /// is logged, not returned.
    pub fn integrated(&self, index: u64) {
        if let Err(e) = self.catch_up(Some(index + 1)) {
            tracing::warn!(index, error = %e, "the fleet's log entry is not yet integrated here");
        }
    }

    /// Signs a checkpoint of the log when the log grew since the latest one signed (stored,
    /// or pending its quorum), and stores it as the latest at once unless it needs a quorum
    /// ([`ValidatorLedger::with_quorum`]). The new checkpoint, or None when nothing changed.
    /// In a fleet, only the holder of the log lease signs (and stores the checkpoint in the
    /// database, fenced by its token); the others bring their tree up to the fleet's stored
    /// checkpoint and serve it.
    pub fn checkpoint_if_grown(&self) -> Result<Option<SignedCheckpoint>, LedgerError> {
        if let Some(fleet) = &self.fleet {
            if !self.lead(fleet)? {
                self.follow(fleet)?;
                return Ok(None);
            }
            self.catch_up(None)?;
        }
        let log = self.ledger.log();
        let stored = match log.latest_checkpoint()? {
            Some(text) => Some(
                SignedCheckpoint::parse(text.as_bytes())
                    .map_err(|e| LedgerError::Checkpoint(e.to_string()))?
                    .checkpoint
                    .size,
            ),
            None => None,
        };
        let pending = self.pending.locked().as_ref().map(|p| p.checkpoint.size);
        if stored.max(pending).is_some_and(|size| size >= log.size()) {
            return Ok(None);
        }
        if self.quorum == 0 {
            let signed = blocking(|| log.checkpoint(&self.signer))?;
            self.share(&signed)?;
            return Ok(Some(signed));
        }
        let signed = log.sign_checkpoint(&self.signer);
        *self.pending.locked() = Some(signed.clone());
        Ok(Some(signed))
    }

    /// Takes or renews the fleet's log lease: whether this validator leads now. A key the
    /// fleet no longer signs with (rotated away) never leads, and neither does a validator
    /// that cannot reach the database (its lease runs out there, and another takes it).
    fn lead(&self, fleet: &Fleet) -> Result<bool, LedgerError> {
        let ours = self.signer.verifier().to_vkey();
        let held = blocking(|| match fleet.db.key()? {
            Some(found) if found != ours => {
                Err(crate::fleet_log::FleetLogError::OtherKey { found, ours })
            }
            _ => fleet
                .db
                .hold(crate::fleet_log::LOG_LEASE, &fleet.holder, fleet.lease_for),
        });
        let held = match held {
            Ok(held) => held,
            Err(e) => {
                self.step_aside(fleet);
                return Err(e.into());
            }
        };
        let mut token = fleet.token.locked();
        if held != *token {
            match held {
                Some(t) => tracing::info!(token = t, "this validator leads the fleet's log"),
                None if token.is_some() => {
                    tracing::warn!("the fleet's log lease passed to another validator")
                }
                None => {}
            }
            // Whatever was pending under the last lease is its successor's business now.
            *self.pending.locked() = None;
        }
        *token = held;
        drop(token);
        self.leading.send_replace(held.is_some());
        Ok(held.is_some())
    }

    /// Stops leading (the lease is the database's to give to another).
    fn step_aside(&self, fleet: &Fleet) {
        *fleet.token.locked() = None;
        *self.pending.locked() = None;
        self.leading.send_replace(false);
    }

    /// Stores a checkpoint this validator signed (and stored here) as the fleet's, under the
    /// log lease's token; a lease lost meanwhile stops it leading.
    fn share(&self, checkpoint: &SignedCheckpoint) -> Result<(), LedgerError> {
        let Some(fleet) = &self.fleet else {
            return Ok(());
        };
        let Some(token) = *fleet.token.locked() else {
            return Ok(());
        };
        let (size, text) = (checkpoint.checkpoint.size, checkpoint.to_text());
        let stored = blocking(|| {
            fleet
                .db
                .store_checkpoint((&fleet.holder, token), size, &text)
        });
        if let Err(e @ crate::fleet_log::FleetLogError::Fenced { .. }) = &stored {
            tracing::warn!(error = %e, "fenced off the fleet's log");
            self.step_aside(fleet);
        }
        Ok(stored?)
    }

    /// Brings the tree here up to the fleet's stored checkpoint, checks that checkpoint (the
    /// fleet's log key, this tree's root at its size) and stores it as this ledger's latest.
    fn follow(&self, fleet: &Fleet) -> Result<(), LedgerError> {
        self.catch_up(None)?;
        let Some((size, text)) = blocking(|| fleet.db.checkpoint())? else {
            return Ok(());
        };
        let log = self.ledger.log();
        if log.latest_checkpoint()?.as_deref() == Some(text.as_str()) {
            return Ok(());
        }
        self.catch_up(Some(size))?;
        let signed = SignedCheckpoint::parse(text.as_bytes())
            .map_err(|e| LedgerError::Checkpoint(e.to_string()))?;
        signed
            .verify(self.signer.verifier())
            .map_err(|e| LedgerError::Checkpoint(format!("the fleet's checkpoint: {e}")))?;
        if signed.checkpoint.size != size || signed.checkpoint.root != log.root_at(size)? {
            return Err(LedgerError::NotTheFleets {
                dir: log.dir().to_path_buf(),
                why: format!("its root at size {size} is not the fleet's checkpoint's"),
            });
        }
        blocking(|| log.store_checkpoint(&text))?;
        Ok(())
    }

    /// Gives the fleet's log lease up (a validator that stops), so that another validator
    /// takes it over at its next tick rather than when it runs out.
    pub fn step_down(&self) {
        let Some(fleet) = &self.fleet else {
            return;
        };
        let Some(token) = fleet.token.locked().take() else {
            return;
        };
        let released = blocking(|| {
            fleet
                .db
                .release(crate::fleet_log::LOG_LEASE, &fleet.holder, token)
        });
        if let Err(e) = released {
            tracing::warn!(error = %e, "the fleet's log lease was not given up: it runs out");
        }
        self.leading.send_replace(false);
    }

    /// The checkpoint a publication sends: the one pending its quorum, else the stored one.
    fn to_publish(&self) -> Result<SignedCheckpoint, LedgerError> {
        match self.pending.locked().clone() {
            Some(pending) => Ok(pending),
            None => stored_checkpoint(&self.ledger),
        }
    }
}

/// The ledger's stored latest checkpoint.
pub fn stored_checkpoint(ledger: &Ledger) -> Result<SignedCheckpoint, LedgerError> {
    let text = ledger
        .log()
        .latest_checkpoint()?
        .ok_or(LedgerError::NoCheckpoint)?;
    SignedCheckpoint::parse(text.as_bytes()).map_err(|e| LedgerError::Checkpoint(e.to_string()))
}

/// The tlog-witness add-checkpoint request body for the ledger's latest checkpoint (with the
/// log's signature only), from size `old`; and the checkpoint's size.
pub fn request_body(ledger: &Ledger, old: u64) -> Result<(Vec<u8>, u64), LedgerError> {
    request_body_for(ledger, &stored_checkpoint(ledger)?, old)
}

/// The add-checkpoint request body for `checkpoint` (a checkpoint of `ledger`), from `old`.
fn request_body_for(
    ledger: &Ledger,
    checkpoint: &SignedCheckpoint,
    old: u64,
) -> Result<(Vec<u8>, u64), LedgerError> {
    let size = checkpoint.checkpoint.size;
    if old > size {
        return Err(LedgerError::Beyond { old, size });
    }
    let mut plain = Note::new(checkpoint.note.text().to_string())
        .map_err(|e| LedgerError::Checkpoint(e.to_string()))?;
    let log_name = checkpoint.checkpoint.origin.clone();
    for sig in checkpoint
        .note
        .signatures()
        .iter()
        .filter(|s| s.name == log_name)
    {
        plain.push_signature(sig.clone());
    }
    let request = AddCheckpoint {
        old_size: old,
        proof: ledger.log().consistency_proof(old, size)?,
        checkpoint: plain.to_text().into_bytes(),
    };
    Ok((request.encode(), size))
}

/// One witness's answer to a publication.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WitnessAnswer {
    /// The witness's URL.
    pub url: String,
    /// Whether it cosigned the checkpoint.
    pub cosigned: bool,
    /// The HTTP status of the last answer (0: no answer).
    pub status: u16,
    /// The cosignature line, or why there is none.
    pub answer: String,
    /// The size the witness said it holds for the log (the checkpoint's when it cosigned, the
    /// one a 409 named otherwise): where the next publication starts, in one request.
    pub size: Option<u64>,
}

/// A witness the log asks for cosignatures (`URL=VKEY`): where it answers
/// c2sp.org/tlog-witness's `add-checkpoint`, and the cosignature key (type 0x04) its answer
/// must verify under. Configured with its key, a witness cannot answer in another's name, and
/// of an answer of several lines (a witness holding several keys) the expected key's is taken.
#[derive(Debug, Clone)]
pub struct WitnessTarget {
    /// The prefix its `add-checkpoint` is under (`http://host:7400`).
    pub url: String,
    /// Its cosignature verifier key.
    pub key: Verifier,
}

/// Why a witness target (`URL=VKEY`) is refused.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BadWitness {
    /// Not `URL=VKEY`.
    #[error("witness {0:?}: give URL=VKEY (its add-checkpoint prefix and its cosignature key, as `pog witness vkey` prints it)")]
    Form(String),
    /// The URL is not an http(s) origin.
    #[error("witness {url:?}: {why}")]
    Url {
        /// The URL given.
        url: String,
        /// Why it is refused.
        why: pog_net::endpoint::EndpointError,
    },
    /// The key is not a cosignature verifier key.
    #[error("witness {url}: {why}")]
    Key {
        /// The witness's URL.
        url: String,
        /// Why the key is refused.
        why: String,
    },
    /// Two witnesses with one key: one would answer in the other's place.
    #[error("witnesses {0} and {1} have the same key")]
    SameKey(String, String),
}

impl std::str::FromStr for WitnessTarget {
    type Err = BadWitness;

    fn from_str(text: &str) -> Result<WitnessTarget, BadWitness> {
        // A URL holds no '=' (queries are refused), a vkey's base64 of 33 bytes none either.
        let (url, vkey) = text
            .split_once('=')
            .ok_or_else(|| BadWitness::Form(text.to_string()))?;
        // The operator's own choice of witness: a private address is allowed.
        let url = pog_net::endpoint::validate(url, true).map_err(|why| BadWitness::Url {
            url: url.to_string(),
            why,
        })?;
        let key = Verifier::parse(vkey).map_err(|e| BadWitness::Key {
            url: url.clone(),
            why: e.to_string(),
        })?;
        if key.alg() != ALG_COSIGNATURE_V1 {
            return Err(BadWitness::Key {
                url,
                why: format!("{} is not a cosignature key (type 0x04)", key.name()),
            });
        }
        Ok(WitnessTarget { url, key })
    }
}

impl WitnessTarget {
    /// Refuses a list where two witnesses share a key.
    pub fn check_distinct(targets: &[WitnessTarget]) -> Result<(), BadWitness> {
        for (i, a) in targets.iter().enumerate() {
            if let Some(b) = targets[i + 1..].iter().find(|b| b.key == a.key) {
                return Err(BadWitness::SameKey(a.url.clone(), b.url.clone()));
            }
        }
        Ok(())
    }
}

/// What a publication did: the checkpoint as stored now (with every cosignature obtained) and
/// each witness's answer.
#[derive(Debug, Clone)]
pub struct Published {
    /// The checkpoint published, with every cosignature obtained.
    pub checkpoint: SignedCheckpoint,
    /// Whether it was stored as the latest (its quorum met).
    pub stored: bool,
    /// Each witness's answer, one per witness asked.
    pub witnesses: Vec<WitnessAnswer>,
}

impl Published {
    /// Whether every witness cosigned.
    pub fn all_cosigned(&self) -> bool {
        self.witnesses.iter().all(|w| w.cosigned)
    }
}

/// An HTTP client for witnesses: no redirects, no proxy from the environment, 20 s a request;
/// an error (never a default client) when it cannot be built.
pub fn witness_client() -> Result<reqwest::Client, pog_net::http::BuildClientError> {
    witness_settings().build()
}

/// The settings of [`witness_client`].
fn witness_settings() -> pog_net::http::ClientSettings {
    pog_net::http::ClientSettings {
        timeout: Some(Duration::from_secs(20)),
        connect_timeout: Some(Duration::from_secs(5)),
        proxy_from_env: false,
        ..pog_net::http::ClientSettings::new("witness")
    }
}

/// How often the log may ask one witness, and how it backs off from one that fails, so that a
/// witness answering slowly or with errors is not asked again at every tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WitnessBudget {
    /// Requests a minute to one witness (a minute's worth at once); a publication past it
    /// skips that witness until the budget refills.
    pub per_minute: u32,
    /// The wait after a failure (no answer in time, 429, a 5xx or any other refusal than a
    /// 409 with a size); it doubles with each failure in a row, up to `max_backoff`. A 429's
    /// `Retry-After`, when longer, is waited instead.
    pub backoff: Duration,
    /// The longest wait after failures.
    pub max_backoff: Duration,
}

impl Default for WitnessBudget {
    /// 12 requests a minute (a checkpoint every 10 s, each with a 409 and its retry), 10 s
    /// after a failure, doubling up to 10 minutes.
    fn default() -> WitnessBudget {
        WitnessBudget {
            per_minute: 12,
            backoff: Duration::from_secs(10),
            max_backoff: Duration::from_secs(600),
        }
    }
}

/// Each witness's standing against its [`WitnessBudget`], by URL.
#[derive(Debug)]
pub struct WitnessBudgets {
    budget: WitnessBudget,
    started: std::time::Instant,
    standing: Mutex<std::collections::HashMap<String, Standing>>,
}

/// One witness's requests left, failures in a row and when it may be asked again.
#[derive(Debug)]
struct Standing {
    requests: pog_ledger::witness_service::RequestBudget,
    failures: u32,
    not_before_ms: u64,
}

impl WitnessBudgets {
    /// Every witness's budget `budget`, full.
    pub fn new(budget: WitnessBudget) -> WitnessBudgets {
        WitnessBudgets {
            budget,
            started: std::time::Instant::now(),
            standing: Mutex::default(),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Takes one request to `url` from its budget; why not, when it is backing off or spent.
    fn admit(&self, url: &str) -> Result<(), String> {
        let now = self.now_ms();
        let mut standing = self.standing.locked();
        let s = standing.entry(url.to_string()).or_insert_with(|| Standing {
            requests: pog_ledger::witness_service::RequestBudget::new(self.budget.per_minute, now),
            failures: 0,
            not_before_ms: 0,
        });
        if now < s.not_before_ms {
            return Err(format!(
                "not asked: backing off for {:.1} s after {} failure(s)",
                (s.not_before_ms - now) as f64 / 1000.0,
                s.failures
            ));
        }
        s.requests.take(now).map_err(|wait| {
            format!(
                "not asked: its budget of {} requests a minute is spent for {:.1} s",
                self.budget.per_minute,
                wait as f64 / 1000.0
            )
        })
    }

    /// Records how `url` answered: a failure starts or lengthens its back-off (at least
    /// `retry_after`), anything else ends it.
    fn answered(&self, url: &str, failed: bool, retry_after: Option<Duration>) {
        let now = self.now_ms();
        let mut standing = self.standing.locked();
        let Some(s) = standing.get_mut(url) else {
            return;
        };
        if !failed {
            s.failures = 0;
            return;
        }
        s.failures = s.failures.saturating_add(1);
        let doubled = self
            .budget
            .backoff
            .saturating_mul(1 << (s.failures - 1).min(20))
            .min(self.budget.max_backoff);
        let wait = doubled.max(retry_after.unwrap_or_default());
        s.not_before_ms = now.saturating_add(u64::try_from(wait.as_millis()).unwrap_or(u64::MAX));
    }
}

/// The most bytes a witness's answer may hold (a cosignature line, or a size with a 409).
const MAX_WITNESS_ANSWER_BYTES: usize = 64 << 10;

/// Asks one witness to cosign the stored checkpoint, starting from `old` (the size it held at
/// the last publication, 0 the first time) and following its 409 answer with the size it
/// holds, so that a publication costs one request as long as nothing else talks to it.
async fn ask_witness(
    (ledger, checkpoint): (&Ledger, &SignedCheckpoint),
    (client, budgets): (&reqwest::Client, &WitnessBudgets),
    url: &str,
    mut old: u64,
) -> WitnessAnswer {
    let endpoint = format!("{}/add-checkpoint", url.trim_end_matches('/'));
    let answer = |cosigned, status, answer: String, size| WitnessAnswer {
        url: url.to_string(),
        cosigned,
        status,
        answer,
        size,
    };
    for _ in 0..2 {
        // A remembered size beyond the checkpoint (the witness saw another history): start
        // from 0, and let its 409 say where it stands.
        let body = match request_body_for(ledger, checkpoint, old)
            .or_else(|_| request_body_for(ledger, checkpoint, 0))
        {
            Ok((body, _)) => body,
            Err(e) => return answer(false, 409, e.to_string(), None),
        };
        if let Err(why) = budgets.admit(url) {
            return answer(false, 0, why, Some(old));
        }
        let mut retry_after = None;
        let sent = async {
            let mut r = client.post(&endpoint).body(body).send().await?;
            let status = r.status().as_u16();
            retry_after = r
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok()?.trim().parse().ok())
                .map(|secs: u64| Duration::from_secs(secs.min(3600)));
            let conflict = r
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .is_some_and(|v| v.as_bytes().starts_with(b"text/x.tlog.size"));
            // A cosignature line or a size is a few dozen bytes: a witness streaming more is
            // cut off rather than held in memory until the request's deadline.
            let mut text = Vec::new();
            while let Some(chunk) = r.chunk().await? {
                if text.len() + chunk.len() > MAX_WITNESS_ANSWER_BYTES {
                    return Ok(Err(status));
                }
                text.extend_from_slice(&chunk);
            }
            let text = String::from_utf8_lossy(&text).into_owned();
            Ok::<_, reqwest::Error>(Ok((status, conflict, text)))
        }
        .await;
        let sent = match sent {
            Ok(Err(status)) => {
                budgets.answered(url, true, None);
                return answer(
                    false,
                    status,
                    format!("the witness's answer exceeds {MAX_WITNESS_ANSWER_BYTES} bytes"),
                    None,
                );
            }
            Ok(Ok(answered)) => Ok(answered),
            Err(e) => Err(e),
        };
        let failed = !matches!(&sent, Ok((200, _, _)) | Ok((409, true, _)));
        budgets.answered(url, failed, retry_after);
        match sent {
            Err(e) => return answer(false, 0, format!("no answer: {e}"), None),
            Ok((409, true, text)) if text.trim().parse::<u64>().is_ok_and(|n| n != old) => {
                old = text.trim().parse().expect("checked");
            }
            Ok((200, _, lines)) => {
                let size = Some(checkpoint.checkpoint.size);
                return answer(true, 200, lines.trim_end().to_string(), size);
            }
            Ok((status, _, text)) => {
                return answer(false, status, text.trim_end().to_string(), Some(old))
            }
        }
    }
    answer(
        false,
        409,
        "the witness keeps changing its latest size".into(),
        Some(old),
    )
}

/// Sends `checkpoint` (a checkpoint of `ledger`, with the cosignatures it has) to every
/// witness at once, each given `deadline` to answer and starting from the size it holds
/// (`held`, by URL), and attaches each cosignature as it arrives. Once `quorum` of the
/// witnesses' keys have cosigned it, the result is stored as the latest checkpoint, and again
/// with each later cosignature (so `/ledger/checkpoint` and exported bundles carry it at once:
/// a witness that hangs delays nobody else's cosignature); short of the quorum nothing is
/// stored. A refusing or silent witness is reported in the answers, not as an error; one that
/// `budgets` holds back (backing off after failures, or past its requests a minute) is not
/// asked, and said so. While it runs, nothing else may store a checkpoint of `ledger` (the
/// validator's schedule publishes between its ticks).
pub async fn publish(
    ledger: &Arc<Ledger>,
    (client, budgets): (&reqwest::Client, &Arc<WitnessBudgets>),
    (targets, held): (&[WitnessTarget], &std::collections::HashMap<String, u64>),
    deadline: Duration,
    (checkpoint, quorum): (SignedCheckpoint, usize),
) -> Result<Published, LedgerError> {
    let mut asks = tokio::task::JoinSet::new();
    let mut slots = std::collections::HashMap::new();
    for (slot, target) in targets.iter().enumerate() {
        let (ledger, client, url) = (ledger.clone(), client.clone(), target.url.clone());
        let budgets = budgets.clone();
        let old = held.get(&url).copied().unwrap_or(0);
        let candidate = checkpoint.clone();
        let task = asks.spawn(async move {
            let asking = ask_witness((&ledger, &candidate), (&client, &budgets), &url, old);
            let asked = tokio::time::timeout(deadline, asking).await;
            if asked.is_err() {
                budgets.answered(&url, true, None);
            }
            asked.unwrap_or_else(|_| WitnessAnswer {
                answer: format!("no answer within {} s", deadline.as_secs_f64()),
                url,
                cosigned: false,
                status: 0,
                size: None,
            })
        });
        slots.insert(task.id(), slot);
    }
    let mut witnesses: Vec<WitnessAnswer> = targets
        .iter()
        .map(|t| WitnessAnswer {
            url: t.url.clone(),
            cosigned: false,
            status: 0,
            answer: "not asked".into(),
            size: None,
        })
        .collect();
    let mut with = checkpoint.clone();
    while let Some(joined) = asks.join_next_with_id().await {
        let (id, answer) = match joined {
            Ok(answered) => answered,
            Err(e) => {
                let Some(&slot) = slots.get(&e.id()) else {
                    continue;
                };
                let failed = format!("asking the witness failed: {e}");
                (
                    e.id(),
                    WitnessAnswer {
                        answer: failed,
                        ..witnesses[slot].clone()
                    },
                )
            }
        };
        let Some(&slot) = slots.get(&id) else {
            continue;
        };
        witnesses[slot] = answer;
        if admit(&mut witnesses[slot], &targets[slot].key, &checkpoint) {
            with = attach(&checkpoint, &witnesses)?;
            if cosigned_by(&with, targets) >= quorum {
                blocking(|| ledger.log().store_checkpoint(&with.to_text()))?;
            }
        }
    }
    Ok(Published {
        stored: cosigned_by(&with, targets) >= quorum,
        checkpoint: with,
        witnesses,
    })
}

/// How many of `targets`' keys have a verifying cosignature on `checkpoint`.
fn cosigned_by(checkpoint: &SignedCheckpoint, targets: &[WitnessTarget]) -> usize {
    targets
        .iter()
        .filter(|t| {
            checkpoint
                .cosignatures(std::slice::from_ref(&t.key))
                .iter()
                .any(|(_, verified)| verified.is_ok())
        })
        .count()
}

/// The signer name of a signature line (`— <name> <signature>`).
fn signer_name(line: &str) -> Option<&str> {
    line.strip_prefix("\u{2014} ")?.split(' ').next()
}

/// Checks the answer of the witness whose key is `key`: of its lines (a witness may sign
/// with several keys, as c2sp.org/tlog-witness allows), the one that verifies under `key` over
/// `checkpoint` is kept as its cosignature; an answer with none is marked refused. Whether the
/// cosignatures to attach changed.
fn admit(answer: &mut WitnessAnswer, key: &Verifier, checkpoint: &SignedCheckpoint) -> bool {
    if !answer.cosigned {
        return false;
    }
    let verifies = |line: &str| {
        SignedCheckpoint::parse(format!("{}{line}\n", checkpoint.to_text()).as_bytes()).is_ok_and(
            |signed| {
                signed
                    .cosignatures(std::slice::from_ref(key))
                    .iter()
                    .any(|(_, verified)| verified.is_ok())
            },
        )
    };
    let chosen = answer
        .answer
        .lines()
        .take(MAX_COSIGNATURE_LINES)
        .find(|line| verifies(line))
        .map(str::to_string);
    match chosen {
        Some(line) => {
            answer.answer = line;
            true
        }
        None => {
            refuse(answer, "no line verifies under the witness's key");
            false
        }
    }
}

/// The most lines of a witness's answer looked at (one per key it signs with).
const MAX_COSIGNATURE_LINES: usize = 16;

/// Marks a witness's answer as no cosignature, saying why.
fn refuse(answer: &mut WitnessAnswer, why: &str) {
    answer.cosigned = false;
    answer.answer = format!("{why}: {:?}", answer.answer);
}

/// `checkpoint` with the cosignatures of the admitted answers: each replaces an older line of
/// its witness's name; the other lines are kept.
fn attach(
    checkpoint: &SignedCheckpoint,
    witnesses: &[WitnessAnswer],
) -> Result<SignedCheckpoint, LedgerError> {
    let fresh: Vec<&str> = witnesses
        .iter()
        .filter(|a| a.cosigned)
        .map(|a| a.answer.trim_end())
        .collect();
    let names: Vec<&str> = fresh.iter().filter_map(|line| signer_name(line)).collect();
    let mut kept = Note::new(checkpoint.note.text().to_string())
        .map_err(|e| LedgerError::Checkpoint(e.to_string()))?;
    for sig in checkpoint.note.signatures() {
        if !names.contains(&sig.name.as_str()) {
            kept.push_signature(sig.clone());
        }
    }
    let mut text = kept.to_text();
    for line in fresh {
        text.push_str(line);
        text.push('\n');
    }
    SignedCheckpoint::parse(text.as_bytes()).map_err(|e| LedgerError::Cosignature(e.to_string()))
}

/// What one tick of [`checkpoint_on_schedule`] did.
#[derive(Debug, Clone)]
pub struct Tick {
    /// The size of a newly signed checkpoint.
    pub signed: Option<u64>,
    /// The publication, when there was one.
    pub published: Option<Published>,
}

impl ValidatorLedger {
    /// One tick of the schedule: sign a checkpoint if the log grew; publish it to `witnesses`
    /// when it is new, or again when the last publication missed a witness.
    pub async fn tick(
        &self,
        client: &reqwest::Client,
        witnesses: &[WitnessTarget],
    ) -> Result<Tick, LedgerError> {
        let signed = self.checkpoint_if_grown()?.map(|c| c.checkpoint.size);
        let retry = *self.retry_witnesses.locked() || self.pending.locked().is_some();
        let published = if self.leads() && !witnesses.is_empty() && (signed.is_some() || retry) {
            let held = self.witness_sizes.locked().clone();
            let candidate = self.to_publish()?;
            let p = publish(
                &self.ledger,
                (client, &self.budgets),
                (witnesses, &held),
                self.witness_deadline,
                (candidate, self.quorum),
            )
            .await;
            // A failed publication (e.g. no checkpoint could be read) is retried too.
            *self.retry_witnesses.locked() = !p.as_ref().is_ok_and(Published::all_cosigned);
            if let Ok(p) = &p {
                if p.stored {
                    self.share(&p.checkpoint)?;
                }
                // Stored: nothing pends; short of its quorum, it pends with what it gathered.
                let mut pending = self.pending.locked();
                if p.stored {
                    *pending = None;
                } else if pending.is_some() {
                    *pending = Some(p.checkpoint.clone());
                }
                drop(pending);
                let mut sizes = self.witness_sizes.locked();
                for w in &p.witnesses {
                    match w.size {
                        Some(size) => sizes.insert(w.url.clone(), size),
                        None => sizes.remove(&w.url),
                    };
                }
            }
            Some(p?)
        } else {
            None
        };
        Ok(Tick { signed, published })
    }
}

/// Every `every`: [`ValidatorLedger::tick`] with `client` ([`witness_client`], built before
/// the service starts), logging what it did. On `stop`, one last tick (the records stored just
/// before a shutdown get their checkpoint), then returns.
pub async fn checkpoint_on_schedule(
    ledger: Arc<ValidatorLedger>,
    every: Duration,
    (client, witnesses): (reqwest::Client, Vec<WitnessTarget>),
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        let stopping = tokio::select! {
            _ = tokio::time::sleep(every) => false,
            _ = stop.changed() => true,
        };
        match ledger.tick(&client, &witnesses).await {
            Ok(Tick {
                signed, published, ..
            }) => {
                if let Some(size) = signed {
                    tracing::info!(size, "signed a ledger checkpoint");
                }
                for w in published.iter().flat_map(|p| &p.witnesses) {
                    if w.cosigned {
                        tracing::info!(witness = %w.url, "checkpoint cosigned");
                    } else {
                        tracing::warn!(witness = %w.url, status = w.status, answer = %w.answer, "a witness did not cosign the checkpoint");
                    }
                }
            }
            Err(e) => tracing::error!(error = %e, "ledger checkpoint failed"),
        }
        // A stop that came during a scheduled tick is seen at the next turn (`changed`
        // fires at once), which signs once more over what was logged meanwhile: the last
        // checkpoint covers the whole log.
        if stopping {
            ledger.step_down();
            return;
        }
    }
}

/// The most bytes one tile answer may hold: a full entry bundle (256 entries of at most
/// 64 KiB, each with its 2-byte length) and a little more.
const MAX_TILE_BYTES: usize = 17 << 20;

/// A log's tiles over HTTP — a validator's `/ledger/` or any c2sp.org/tlog-tiles mirror — as a
/// blocking [`TileSource`](pog_ledger::tiles::TileSource), for a holder's
/// [`check_tail`](pog_ledger::bundle::check_tail). Only http(s) URLs; no redirects or proxies
/// from the environment; 20 s a tile; answers capped at 17 MiB (`MAX_TILE_BYTES`). What it reads is
/// checked against the checkpoint by the caller, so the server is not trusted; and the whole
/// read must end within a budget, since a hostile log chooses how many tiles there are.
pub struct HttpTiles {
    base: String,
    client: reqwest::Client,
    runtime: tokio::runtime::Runtime,
    /// When the reading must be over.
    deadline: std::time::Instant,
    budget: Duration,
}

impl HttpTiles {
    /// Tiles under `base` (e.g. `http://validator:7071/ledger/`: `tile/0/000` is fetched from
    /// `http://validator:7071/ledger/tile/0/000`), all of them read within `budget` from now.
    /// With `public_only` (a URL someone else named, such as a bundle's `log`), every address
    /// its host resolves to must be public, at every connection.
    pub fn new(base: &str, budget: Duration, public_only: bool) -> Result<HttpTiles, LedgerError> {
        let url = reqwest::Url::parse(base)
            .map_err(|e| LedgerError::Tiles(format!("{base:?} is not a URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(LedgerError::Tiles(format!(
                "{base:?}: tiles are read over http or https only"
            )));
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| LedgerError::Task(e.to_string()))?;
        let client = if public_only {
            pog_net::http::ClientSettings {
                resolver: Some(pog_net::endpoint::PublicResolver {
                    allow_private: false,
                }),
                ..witness_settings()
            }
            .build()?
        } else {
            witness_client()?
        };
        Ok(HttpTiles {
            base: format!("{}/", base.trim_end_matches('/')),
            client,
            runtime,
            deadline: std::time::Instant::now() + budget,
            budget,
        })
    }
}

impl HttpTiles {
    /// Any resource under the base (a bundle page of `/v1/bundles/`, say), at most `cap`
    /// bytes, within the same budget as the tiles; an answer other than 200 is an error that
    /// names its status.
    pub fn fetch(&mut self, path: &str, cap: usize) -> Result<Vec<u8>, LedgerError> {
        self.get(path, cap)
            .map_err(|why| LedgerError::Tiles(format!("{}{path}: {why}", self.base)))
    }

    /// The log's checkpoint (`checkpoint` under the base), at most
    /// [`MAX_NOTE_BYTES`](pog_ledger::note::MAX_NOTE_BYTES), within the same budget as the tiles.
    pub fn checkpoint(&mut self) -> Result<Vec<u8>, LedgerError> {
        self.get("checkpoint", pog_ledger::note::MAX_NOTE_BYTES)
            .map_err(|why| LedgerError::Tiles(format!("{}checkpoint: {why}", self.base)))
    }

    /// `GET` of `path` under the base: its body when it answers 200 with at most `cap` bytes
    /// before the reading's deadline; why not otherwise.
    fn get(&mut self, path: &str, cap: usize) -> Result<Vec<u8>, String> {
        let url = format!("{}{path}", self.base);
        let left = self
            .deadline
            .saturating_duration_since(std::time::Instant::now());
        let over = format!(
            "the log's tiles were not all read within {} s",
            self.budget.as_secs_f64()
        );
        if left.is_zero() {
            return Err(over);
        }
        let read = async {
            let mut response = self
                .client
                .get(&url)
                .send()
                .await
                .map_err(|e| e.to_string())?;
            if response.status() != reqwest::StatusCode::OK {
                return Err(format!("answered {}", response.status()));
            }
            let mut body = Vec::new();
            while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
                if body.len() + chunk.len() > cap {
                    return Err(format!("more than {cap} bytes"));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(body)
        };
        self.runtime
            .block_on(async { tokio::time::timeout(left, read).await })
            .unwrap_or(Err(over))
    }
}

impl pog_ledger::tiles::TileSource for HttpTiles {
    fn read_tile(
        &mut self,
        id: &pog_ledger::tiles::TileId,
    ) -> Result<Vec<u8>, pog_ledger::tiles::TileError> {
        let path = id.path();
        self.get(&path, MAX_TILE_BYTES)
            .map_err(|why| pog_ledger::tiles::TileError::Source {
                path: format!("{}{path}", self.base),
                why,
            })
    }
}

/// `GET /ledger/checkpoint` and `GET /ledger/tile/{*path}` (hash tiles and entry bundles), as
/// c2sp.org/tlog-tiles lays them out: the checkpoint `no-cache, max-age=2`, tiles and entry
/// bundles `immutable`; `GET /v1/bundles/{uuid}` ([`MAX_BUNDLE_PAGE`] records a page); 404 when
/// the validator keeps no ledger.
pub fn router(ledger: Option<Arc<ValidatorLedger>>) -> Router {
    Router::new()
        .route(
            "/ledger/checkpoint",
            get(|State(l): State<Served>| resource(l, "checkpoint".into())),
        )
        .route("/v1/bundles/{uuid}", get(bundle_page))
        .route(
            "/ledger/tile/{*path}",
            get(|State(l): State<Served>, Path(path): Path<String>| {
                resource(l, format!("tile/{path}"))
            }),
        )
        .with_state(ledger)
}

/// The most records one page of `GET /v1/bundles/{uuid}` holds (a record with its proof is
/// 2.4–2.9 KB: a page stays under 3 MB).
pub const MAX_BUNDLE_PAGE: usize = 1000;

/// The query of `GET /v1/bundles/{uuid}`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct BundleQuery {
    /// Records after this log index (the `next_after` of the page before, or the last record
    /// the holder verified).
    after: Option<u64>,
    /// The tree size of the checkpoint the holder verified last: the page carries a
    /// consistency proof from it.
    since: Option<u64>,
    /// Records in the page, at most [`MAX_BUNDLE_PAGE`] (the default).
    limit: Option<usize>,
}

/// `GET /v1/bundles/{uuid}?after=&since=&limit=`: one page of a GPU's history as a proof
/// bundle (`pog_ledger::bundle`, format v3) against the ledger's latest checkpoint, so a token
/// holder fetches and verifies it alone (`pog verify --validator URL --gpu UUID`). 400 for a
/// bad UUID, query, or a `since` past the checkpoint; 404 when the validator keeps no ledger
/// or has signed no checkpoint yet. A GPU the log has no record of gets a page without records.
async fn bundle_page(
    State(ledger): State<Served>,
    Path(uuid): Path<String>,
    query: Result<axum::extract::Query<BundleQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let bad = |why: String| (StatusCode::BAD_REQUEST, format!("{why}\n")).into_response();
    let Some(ledger) = ledger else {
        return (StatusCode::NOT_FOUND, "this validator keeps no ledger\n").into_response();
    };
    let axum::extract::Query(q) = match query {
        Ok(q) => q,
        Err(e) => return bad(format!("bad query: {e}")),
    };
    if let Err(e) = uuid.parse::<pog_signed::GpuUuid>() {
        return bad(e.to_string());
    }
    let limit = q.limit.unwrap_or(MAX_BUNDLE_PAGE);
    if !(1..=MAX_BUNDLE_PAGE).contains(&limit) {
        return bad(format!("limit must be 1 to {MAX_BUNDLE_PAGE}"));
    }
    let Ok(permit) = ledger.pages.clone().try_acquire_owned() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "1")],
            "busy building other bundle pages; retry\n",
        )
            .into_response();
    };
    let page = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        let checkpoint = match stored_checkpoint(ledger.ledger()) {
            Ok(c) => c,
            Err(LedgerError::NoCheckpoint) => return Err((StatusCode::NOT_FOUND, "no checkpoint signed yet".to_string())),
            Err(e) => return Err((StatusCode::INTERNAL_SERVER_ERROR, e.to_string())),
        };
        let size = checkpoint.checkpoint.size;
        if let Some(since) = q.since.filter(|s| *s > size) {
            return Err((
                StatusCode::BAD_REQUEST,
                format!("since {since} is past the checkpoint's size {size}: the log has no such tree (a rollback, or another log)"),
            ));
        }
        // Its JSON (up to a few MB) is written here too, off the runtime's workers.
        pog_ledger::bundle::Bundle::export_page(ledger.ledger(), &uuid, &checkpoint, q.since, q.after, limit)
            .map(|bundle| bundle.to_json())
            .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
    })
    .await;
    match page {
        Ok(Ok(json)) => ([(header::CONTENT_TYPE, "application/json")], json).into_response(),
        Ok(Err((status, why))) => (status, format!("{why}\n")).into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "the ledger failed\n").into_response(),
    }
}

/// The ledger `/ledger/…` serves, if the validator keeps one.
type Served = Option<Arc<ValidatorLedger>>;

async fn resource(ledger: Served, path: String) -> Response {
    let Some(ledger) = ledger else {
        return (StatusCode::NOT_FOUND, "this validator keeps no ledger\n").into_response();
    };
    // The checkpoint is read, a tile only looked up (its bytes are read as they are sent):
    // both off the runtime's workers.
    let reading = ledger.clone();
    let answer = tokio::task::spawn_blocking(move || {
        pog_ledger::serve::log_resource(reading.ledger().log(), &path)
    })
    .await;
    match answer {
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "the ledger failed\n").into_response(),
        Ok(LogAnswer::Whole(r)) => {
            let mut response = (
                StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                r.body,
            )
                .into_response();
            let headers = response.headers_mut();
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(r.content_type),
            );
            if let Some(c) = r.cache_control {
                headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(c));
            }
            response
        }
        Ok(LogAnswer::Tile(reader)) => {
            let body = TileBody {
                remaining: reader.remaining(),
                ledger,
                reader: Some(reader),
                reading: None,
            };
            let mut response = (
                [
                    (header::CONTENT_TYPE, TILE_CONTENT_TYPE),
                    (header::CACHE_CONTROL, TILE_CACHE_CONTROL),
                ],
                Body::new(body),
            )
                .into_response();
            response.extensions_mut().insert(Streamed);
            response
        }
    }
}

/// A piece of a tile read off the runtime's workers, and the reader to go on with.
type PieceRead = tokio::task::JoinHandle<(TileReader, Result<Vec<u8>, StoreError>)>;

/// A tile's bytes read from the log as they are sent, [`PIECE_BYTES`] at a time, each piece
/// off the runtime's workers and only when hyper asks for it: a reader of a 16 MiB entry
/// bundle holds one piece of the validator's memory, not the bundle.
struct TileBody {
    ledger: Arc<ValidatorLedger>,
    /// The reader, between pieces.
    reader: Option<TileReader>,
    /// The piece being read (it has the reader meanwhile).
    reading: Option<PieceRead>,
    /// Bytes not sent yet.
    remaining: u64,
}

impl hyper::body::Body for TileBody {
    type Data = Bytes;
    type Error = LedgerError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, LedgerError>>> {
        let this = self.get_mut();
        loop {
            if let Some(reading) = this.reading.as_mut() {
                let read = std::task::ready!(Pin::new(reading).poll(cx));
                this.reading = None;
                return Poll::Ready(match read {
                    Ok((reader, Ok(piece))) => {
                        this.remaining = reader.remaining();
                        this.reader = Some(reader);
                        (!piece.is_empty()).then(|| Ok(Frame::data(Bytes::from(piece))))
                    }
                    Ok((_, Err(e))) => Some(Err(e.into())),
                    Err(e) => Some(Err(LedgerError::Task(e.to_string()))),
                });
            }
            match this.reader.take() {
                Some(mut reader) if reader.remaining() > 0 => {
                    let ledger = this.ledger.clone();
                    this.reading = Some(tokio::task::spawn_blocking(move || {
                        let piece = ledger
                            .ledger()
                            .log()
                            .read_tile_piece(&mut reader, PIECE_BYTES);
                        (reader, piece)
                    }));
                }
                _ => return Poll::Ready(None),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.reading.is_none() && self.remaining == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}
