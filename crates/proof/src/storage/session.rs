//! The proof of storage on the validator's side, as two state machines over the agent's
//! messages. A data set ([`DatasetSession`]): sent → built (the root) → audit request →
//! audit openings → the root kept, or refused. A round ([`RoundSession`]): issued → walk
//! (timed: the validator's clock stops when the digests arrive) → open request → openings →
//! outcome. Out-of-order, repeated, late or misaddressed messages are errors that leave a
//! session as it was; answers that do not check out settle it as rejected, with the reason.

use super::{
    ChunkOpening, StorageDataset, StorageError, StorageOpenRequest, StorageOpenings, StorageRound,
    StorageWalk,
};
use crate::timing::{self, TimeCheck};
use pog_merkle::Hash;
use pog_signed::{Envelope, PublicKey};
use serde::{Deserialize, Serialize};

/// The message kinds of the proof of storage.
pub mod kind {
    /// Validator → agent: build and keep this data set ([`DatasetMessage`](super::DatasetMessage)).
    pub const STORAGE_DATASET: &str = "storage-dataset";
    /// Agent → validator: it is being built, ask again later
    /// ([`BuildingMessage`](super::BuildingMessage)).
    pub const STORAGE_BUILDING: &str = "storage-building";
    /// Agent → validator: it is built, under this root ([`BuiltMessage`](super::BuiltMessage)).
    pub const STORAGE_BUILT: &str = "storage-built";
    /// Validator → agent: the chunks the audit opens ([`AuditMessage`](super::AuditMessage)).
    pub const STORAGE_AUDIT: &str = "storage-audit";
    /// Agent → validator: those chunks with their paths ([`AuditOpeningsMessage`](super::AuditOpeningsMessage)).
    pub const STORAGE_AUDIT_OPENINGS: &str = "storage-audit-openings";
    /// Validator → agent: walk this round ([`RoundMessage`](super::RoundMessage)).
    pub const STORAGE_ROUND: &str = "storage-round";
    /// Agent → validator: the digests ([`WalkMessage`](super::WalkMessage)).
    pub const STORAGE_WALK: &str = "storage-walk";
    /// Validator → agent: the steps to open ([`OpenMessage`](super::OpenMessage)).
    pub const STORAGE_OPEN: &str = "storage-open";
    /// Agent → validator: the chunks read at those steps ([`OpeningsMessage`](super::OpeningsMessage)).
    pub const STORAGE_OPENINGS: &str = "storage-openings";
}

/// Validator → agent: build and keep `dataset` (a new one replaces the one kept).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetMessage {
    /// Unique per data set, hex.
    pub id: String,
    /// The data set.
    pub dataset: StorageDataset,
    /// When the validator sent it (its clock, Unix ms).
    pub issued_at_ms: u64,
    /// The validator's clock: the root must arrive by then.
    pub expires_at_ms: u64,
}

/// Agent → validator: the data set is being built (minutes for hundreds of GiB); the
/// validator sends the same [`DatasetMessage`] again later to learn its root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuildingMessage {
    /// The data set's id, as sent.
    pub dataset_id: String,
    /// How long the build has run, ms (the agent's clock).
    pub running_ms: u64,
    /// Set when the message asked for another data set than the one being built (for the
    /// same host: its validator restarted and forgot the one it sent, or another validator of
    /// its fleet asks): the message of the one being built, as its validator signed it. The
    /// asker may take that one up ([`DatasetSession::take_up`]) instead of having the host
    /// start over once it is done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instead: Option<Envelope>,
}

/// Agent → validator: the data set is built and kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuiltMessage {
    /// The data set's id, as sent.
    pub dataset_id: String,
    /// Its Merkle root, lowercase hex.
    #[serde(with = "hex::serde")]
    pub root: Hash,
}

/// Validator → agent: open these chunks of the data set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditMessage {
    /// The data set's id, as sent.
    pub dataset_id: String,
    /// The chunks, in the order drawn.
    pub chunks: Vec<u64>,
}

/// Agent → validator: the chunks asked, in order, with their paths.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditOpeningsMessage {
    /// The data set's id, as sent.
    pub dataset_id: String,
    /// The chunks.
    pub chunks: Vec<ChunkOpening>,
}

/// The verdict on a data set's audit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditOutcome {
    /// The data set's id.
    pub dataset_id: String,
    /// The root audited, hex.
    pub root: String,
    /// The validator's time from sending the data set to its root, ms (the build, as the
    /// validator saw it).
    pub build_ms: f64,
    /// Chunks drawn and regenerated.
    pub samples: usize,
    /// Why the audit failed; none when every chunk checked out.
    pub rejection: Option<String>,
    /// True when every chunk checked out: the validator keeps the root for its rounds.
    pub accepted: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum DatasetState {
    Sent,
    Built {
        root: Hash,
        build_ms: f64,
        chunks: Vec<u64>,
    },
    Audited {
        root: Hash,
    },
    Refused,
}

/// The validator's view of one data set, from sending it to keeping its root.
#[derive(Debug)]
pub struct DatasetSession {
    message: DatasetMessage,
    agent: PublicKey,
    secret: [u8; 32],
    samples: u32,
    state: DatasetState,
}

impl DatasetSession {
    /// The session of `message` (as sent), answerable only by `agent`; `secret` draws
    /// `samples` chunks for the audit.
    pub fn new(
        message: &DatasetMessage,
        agent: PublicKey,
        secret: [u8; 32],
        samples: u32,
    ) -> DatasetSession {
        DatasetSession {
            message: message.clone(),
            agent,
            secret,
            samples,
            state: DatasetState::Sent,
        }
    }

    fn check_sender(&self, id: &str, signer: &PublicKey) -> Result<(), RoundError> {
        if id != self.message.id {
            return Err(RoundError::WrongId {
                expected: self.message.id.clone(),
                got: id.to_string(),
            });
        }
        if *signer != self.agent {
            return Err(RoundError::WrongSigner {
                expected: self.agent.clone(),
                got: signer.clone(),
            });
        }
        Ok(())
    }

    /// Takes the agent's word, at `now_ms`, that the data set is still being built: it must
    /// be the agent's, for this data set, before the root and before the expiry.
    pub fn on_building(
        &self,
        message: &BuildingMessage,
        signer: &PublicKey,
        now_ms: u64,
    ) -> Result<(), RoundError> {
        self.check_sender(&message.dataset_id, signer)?;
        if self.state != DatasetState::Sent {
            return Err(RoundError::OutOfOrder("a build in progress"));
        }
        if now_ms > self.message.expires_at_ms {
            return Err(RoundError::Expired {
                expires_at_ms: self.message.expires_at_ms,
                now_ms,
            });
        }
        Ok(())
    }

    /// The agent's word, at `now_ms`, that it is building another data set than this
    /// session's (`building.instead`): the session of that one, auditing with a fresh
    /// `secret`, when it is a data set this session's validator would send itself. That is:
    /// signed by a validator `trusts` and addressed by it, for this session's GPU, bus id and
    /// agent, of its version and shape, and not expired. Taking it up costs no soundness:
    /// its nonce came from a validator, and the audit draws its chunks from `secret` only
    /// once the root has arrived. Errors leave this session as it was.
    pub fn take_up(
        &self,
        building: &BuildingMessage,
        signer: &PublicKey,
        trusts: impl Fn(&PublicKey) -> bool,
        secret: [u8; 32],
        now_ms: u64,
    ) -> Result<(DatasetSession, Envelope), RoundError> {
        self.check_sender(&building.dataset_id, signer)?;
        if self.state != DatasetState::Sent {
            return Err(RoundError::OutOfOrder("a build in progress"));
        }
        let refused = RoundError::NotTakenUp;
        let offered = building
            .instead
            .as_ref()
            .ok_or(refused("the agent names no data set it builds instead"))?;
        let bytes =
            serde_json::to_vec(offered).map_err(|_| refused("its message is no envelope"))?;
        let (message, issuer): (DatasetMessage, PublicKey) =
            pog_signed::decode(&bytes, kind::STORAGE_DATASET)
                .map_err(|_| refused("its message is not a signed data set message"))?;
        if !trusts(&issuer) {
            return Err(refused(
                "it was sent by a validator this one does not trust",
            ));
        }
        if message.dataset.to.validator_key != issuer {
            return Err(refused(
                "it is signed by another validator than the one it names",
            ));
        }
        let (mine, theirs) = (&self.message.dataset.to, &message.dataset.to);
        if (&mine.gpu_uuid, &mine.gpu_bus_id, &mine.agent_key)
            != (&theirs.gpu_uuid, &theirs.gpu_bus_id, &theirs.agent_key)
        {
            return Err(refused("it is for another GPU, bus id or agent"));
        }
        if message.dataset.validate().is_err()
            || message.dataset.shape != self.message.dataset.shape
        {
            return Err(refused("it is of another version or shape"));
        }
        if now_ms > message.expires_at_ms {
            return Err(refused("it has expired"));
        }
        let session = DatasetSession::new(&message, self.agent.clone(), secret, self.samples);
        Ok((session, offered.clone()))
    }

    /// The data set message as sent.
    pub fn message(&self) -> &DatasetMessage {
        &self.message
    }

    /// Takes the root that arrived at `now_ms`; returns the chunks the audit opens.
    pub fn on_built(
        &mut self,
        message: &BuiltMessage,
        signer: &PublicKey,
        now_ms: u64,
    ) -> Result<AuditMessage, RoundError> {
        self.check_sender(&message.dataset_id, signer)?;
        if self.state != DatasetState::Sent {
            return Err(RoundError::OutOfOrder("the root"));
        }
        if now_ms > self.message.expires_at_ms {
            return Err(RoundError::Expired {
                expires_at_ms: self.message.expires_at_ms,
                now_ms,
            });
        }
        let chunks = self
            .message
            .dataset
            .audit_draw(&message.root, &self.secret, self.samples);
        self.state = DatasetState::Built {
            root: message.root,
            build_ms: now_ms.saturating_sub(self.message.issued_at_ms) as f64,
            chunks: chunks.clone(),
        };
        Ok(AuditMessage {
            dataset_id: self.message.id.clone(),
            chunks,
        })
    }

    /// Takes the audit's openings: each must be the chunk asked, under the root, and the data
    /// set's (its item regenerated). Settles the data set as kept or refused.
    pub fn on_audit_openings(
        &mut self,
        message: &AuditOpeningsMessage,
        signer: &PublicKey,
    ) -> Result<AuditOutcome, RoundError> {
        self.check_sender(&message.dataset_id, signer)?;
        let DatasetState::Built {
            root,
            build_ms,
            chunks,
        } = &self.state
        else {
            return Err(RoundError::OutOfOrder("the audit's openings"));
        };
        let dataset = &self.message.dataset;
        let checked = if message.chunks.len() != chunks.len() {
            Err(StorageError::WrongOpeningCount {
                expected: chunks.len(),
                got: message.chunks.len(),
            })
        } else {
            chunks
                .iter()
                .zip(&message.chunks)
                .try_for_each(|(&asked, opening)| {
                    if opening.index != asked {
                        return Err(StorageError::NotAsked {
                            expected: asked,
                            got: opening.index,
                        });
                    }
                    dataset.check_chunk(root, opening)
                })
        };
        let outcome = AuditOutcome {
            dataset_id: self.message.id.clone(),
            root: hex::encode(root),
            build_ms: *build_ms,
            samples: chunks.len(),
            accepted: checked.is_ok(),
            rejection: checked.err().map(|e| e.to_string()),
        };
        self.state = if outcome.accepted {
            DatasetState::Audited { root: *root }
        } else {
            DatasetState::Refused
        };
        Ok(outcome)
    }

    /// The data set and its root once the audit passed: what the validator keeps to walk.
    pub fn kept(&self) -> Option<(&StorageDataset, Hash)> {
        match &self.state {
            DatasetState::Audited { root } => Some((&self.message.dataset, *root)),
            _ => None,
        }
    }
}

/// Validator → agent: walk `round` now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoundMessage {
    /// Unique per round, hex.
    pub id: String,
    /// The round.
    pub round: StorageRound,
    /// When the validator sent it (its clock, Unix ms): the timed walk starts here.
    pub issued_at_ms: u64,
    /// The validator's clock: the digests must arrive by then.
    pub expires_at_ms: u64,
}

/// Agent → validator: the walk's digests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WalkMessage {
    /// The round's id, as issued.
    pub round_id: String,
    /// The digests.
    pub walk: StorageWalk,
}

/// Validator → agent: the steps to open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenMessage {
    /// The round's id, as issued.
    pub round_id: String,
    /// The steps.
    pub request: StorageOpenRequest,
}

/// Agent → validator: the chunks read at the steps asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpeningsMessage {
    /// The round's id, as issued.
    pub round_id: String,
    /// The chunks.
    pub openings: StorageOpenings,
}

/// Why a message does not fit the session.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoundError {
    /// The message names another round or data set than the session's.
    #[error("message for {got}, this session is {expected}")]
    WrongId {
        /// This session's id.
        expected: String,
        /// The id the message names.
        got: String,
    },
    /// Signed by another key than the agent the round was sent to.
    #[error("signed by {got}, expected the agent {expected}")]
    WrongSigner {
        /// The agent's key.
        expected: PublicKey,
        /// The signer.
        got: PublicKey,
    },
    /// A message the round is not waiting for.
    #[error("{0} arrived out of order")]
    OutOfOrder(&'static str),
    /// The data set the agent builds instead of the one asked is not one this validator
    /// takes up ([`DatasetSession::take_up`]), for this reason.
    #[error("the data set the agent builds instead is not taken up: {0}")]
    NotTakenUp(&'static str),
    /// The digests came after the round's expiry.
    #[error("the round expired at {expires_at_ms} ms; the digests came at {now_ms} ms")]
    Expired {
        /// The expiry, Unix ms.
        expires_at_ms: u64,
        /// When they came, Unix ms.
        now_ms: u64,
    },
}

/// The verdict on one storage round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundOutcome {
    /// The round's id.
    pub round_id: String,
    /// The data set's root, hex.
    pub root: String,
    /// Steps walked.
    pub steps: u32,
    /// Steps opened and checked.
    pub opened: usize,
    /// Items the validator regenerated among them.
    pub regenerated: u32,
    /// Why the walk or its openings were refused; none when they checked out.
    pub rejection: Option<String>,
    /// The validator's clock over the walk against the bound.
    pub time: TimeCheck,
    /// True when the openings checked out and the time bound held.
    pub accepted: bool,
}

impl RoundOutcome {
    /// The walk's time a step on the validator's clock, the credited round trip taken off, µs.
    pub fn step_us(&self) -> f64 {
        self.time.ratio * self.time.expected_ms * 1e3 / f64::from(self.steps.max(1))
    }

    /// The host's fastest accepted step after this round, from `before` (the fastest of its
    /// earlier rounds): this round's step if it was accepted and faster, µs.
    pub fn best_step_us(&self, before: Option<f64>) -> Option<f64> {
        if !self.accepted {
            return before;
        }
        let step = self.step_us();
        Some(before.map_or(step, |b| b.min(step)))
    }
}

#[derive(Debug, Clone, PartialEq)]
enum State {
    Issued,
    Walked {
        walk: StorageWalk,
        time: TimeCheck,
        request: StorageOpenRequest,
    },
    Done,
}

/// The validator's view of one storage round.
#[derive(Debug)]
pub struct RoundSession {
    id: String,
    round: StorageRound,
    agent: PublicKey,
    issued_at_ms: u64,
    expires_at_ms: u64,
    expected_ms: f64,
    secret: [u8; 32],
    /// Steps to open, and items to regenerate among them.
    checks: (u32, u32),
    state: State,
}

impl RoundSession {
    /// The session of `message` (as sent), answerable only by `agent`, judged against
    /// `expected_ms`; `secret` draws `checks.0` steps to open and `checks.1` items to
    /// regenerate among them.
    pub fn new(
        message: &RoundMessage,
        agent: PublicKey,
        expected_ms: f64,
        secret: [u8; 32],
        checks: (u32, u32),
    ) -> RoundSession {
        RoundSession {
            id: message.id.clone(),
            round: message.round.clone(),
            agent,
            issued_at_ms: message.issued_at_ms,
            expires_at_ms: message.expires_at_ms,
            expected_ms,
            secret,
            checks,
            state: State::Issued,
        }
    }

    /// The round's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    fn check_sender(&self, id: &str, signer: &PublicKey) -> Result<(), RoundError> {
        if id != self.id {
            return Err(RoundError::WrongId {
                expected: self.id.clone(),
                got: id.to_string(),
            });
        }
        if *signer != self.agent {
            return Err(RoundError::WrongSigner {
                expected: self.agent.clone(),
                got: signer.clone(),
            });
        }
        Ok(())
    }

    fn outcome(
        &self,
        time: TimeCheck,
        opened: usize,
        checked: Result<u32, StorageError>,
    ) -> RoundOutcome {
        let accepted = checked.is_ok() && time.accepted;
        RoundOutcome {
            round_id: self.id.clone(),
            root: hex::encode(self.round.root),
            steps: self.round.steps,
            opened,
            regenerated: *checked.as_ref().unwrap_or(&0),
            rejection: checked.err().map(|e| e.to_string()),
            time,
            accepted,
        }
    }

    /// Takes the digests that arrived at `now_ms` (validator clock) with the measured round
    /// trip. Digests of the wrong count settle the round as rejected (`Err` of the outcome:
    /// nothing to open); else the steps to open.
    pub fn on_walk(
        &mut self,
        message: &WalkMessage,
        signer: &PublicKey,
        now_ms: u64,
        round_trip_ms: f64,
    ) -> Result<Result<OpenMessage, RoundOutcome>, RoundError> {
        self.check_sender(&message.round_id, signer)?;
        if self.state != State::Issued {
            return Err(RoundError::OutOfOrder("the walk"));
        }
        if now_ms > self.expires_at_ms {
            return Err(RoundError::Expired {
                expires_at_ms: self.expires_at_ms,
                now_ms,
            });
        }
        let measured = now_ms.saturating_sub(self.issued_at_ms) as f64;
        let time = timing::check(measured, round_trip_ms, self.expected_ms);
        match self.round.draw(&message.walk, &self.secret, self.checks.0) {
            Err(e) => {
                self.state = State::Done;
                Ok(Err(self.outcome(time, 0, Err(e))))
            }
            Ok(request) => {
                self.state = State::Walked {
                    walk: message.walk.clone(),
                    time,
                    request: request.clone(),
                };
                Ok(Ok(OpenMessage {
                    round_id: self.id.clone(),
                    request,
                }))
            }
        }
    }

    /// Takes the openings and settles the round.
    pub fn on_openings(
        &mut self,
        message: &OpeningsMessage,
        signer: &PublicKey,
    ) -> Result<RoundOutcome, RoundError> {
        self.check_sender(&message.round_id, signer)?;
        let State::Walked {
            walk,
            time,
            request,
        } = &self.state
        else {
            return Err(RoundError::OutOfOrder("the openings"));
        };
        let checked = self.round.check_openings(
            walk,
            request,
            &message.openings,
            (&self.secret, self.checks.1),
        );
        let outcome = self.outcome(*time, request.steps.len(), checked);
        self.state = State::Done;
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::challenge::Addressee;
    use crate::storage::{
        DeviceClass, MemoryDataset, StorageDataset, StoragePlan, StorageShape, REGENERATED, SAMPLES,
    };
    use std::convert::Infallible;

    fn set() -> MemoryDataset {
        MemoryDataset::build(&StorageDataset::new(
            [1; 32],
            Addressee::shape_only(&"GPU-host".parse().unwrap(), "0"),
            StorageShape {
                items: 32,
                chunks_per_item: 1,
                passes: 1,
                double_rounds: 1,
            },
        ))
    }

    /// Rounds of a host whose walk takes `step_us(round)` a step (every opened step right),
    /// each judged against the bound of its own fastest accepted round so far, as the
    /// validator judges them: the verdicts.
    fn judged(class: DeviceClass, rounds: u32, step_us: impl Fn(u32) -> f64) -> Vec<bool> {
        let mut best = None;
        (0..rounds)
            .map(|r| {
                let plan = StoragePlan::for_host(class, best);
                let measured_ms = step_us(r) * f64::from(plan.steps) / 1e3;
                let time = crate::timing::check(measured_ms, 0.0, plan.expected_ms());
                let outcome = RoundOutcome {
                    round_id: format!("r{r}"),
                    root: String::new(),
                    steps: plan.steps,
                    opened: SAMPLES as usize,
                    regenerated: REGENERATED,
                    rejection: None,
                    time,
                    accepted: time.accepted,
                };
                best = outcome.best_step_us(best);
                outcome.accepted
            })
            .collect()
    }

    /// A jittery honest read: `base` µs a step, up to 40 % slower in some rounds (a
    /// deterministic spread over the rounds).
    fn jitter(base: f64, r: u32) -> f64 {
        let spread = f64::from((r * 7919) % 101) / 100.0;
        base * (1.0 + 0.4 * spread * spread)
    }

    #[test]
    fn a_host_that_walked_fast_cannot_later_answer_through_a_second_host() {
        // The GPU host's NVMe-like disk (45 µs a step), then a second host 100 µs away
        // from the sixth round on: under the class's bound (250 µs) it passed at 0.87 of it;
        // against its own pace (2 × 45 µs, floored at 100 µs, × 1.1) it fails every round.
        let verdicts = judged(DeviceClass::Nvme, 50, |r| {
            jitter(45.0, r) + if r >= 5 { 100.0 } else { 0.0 }
        });
        assert!(verdicts[..5].iter().all(|&v| v), "{verdicts:?}");
        assert!(verdicts[5..].iter().all(|&v| !v), "{verdicts:?}");
        // The same host honest, with jitter up to 1.4× between rounds: every round passes.
        assert!(judged(DeviceClass::Nvme, 1000, |r| jitter(45.0, r))
            .iter()
            .all(|&v| v));
        // A disk slower than the floor's half (80 µs a step): its bound is twice its pace.
        assert!(judged(DeviceClass::Nvme, 1000, |r| jitter(80.0, r))
            .iter()
            .all(|&v| v));
        // A first round served from a cache (6 µs a step) holds an honest disk to the floor,
        // not to 12 µs.
        assert!(judged(DeviceClass::Nvme, 200, |r| if r == 0 {
            6.0
        } else {
            jitter(45.0, r)
        })
        .iter()
        .all(|&v| v));
        // Slow on purpose from the first round (through the second host all along): held to
        // the class's bound, which is the ceiling, as before; the score counts its slowness.
        assert!(judged(DeviceClass::Nvme, 50, |_| 145.0).iter().all(|&v| v));
        assert_eq!(
            DeviceClass::Nvme.host_read_us(Some(1000.0)),
            DeviceClass::Nvme.read_us()
        );
    }

    #[test]
    fn the_host_bound_lies_between_the_floor_and_the_class() {
        let nvme = DeviceClass::Nvme;
        assert_eq!(nvme.host_read_us(None), 250.0);
        assert_eq!(nvme.host_read_us(Some(45.0)), 100.0);
        assert_eq!(nvme.host_read_us(Some(80.0)), 160.0);
        assert_eq!(nvme.host_read_us(Some(f64::NAN)), 250.0);
        assert_eq!(nvme.host_read_us(Some(0.0)), 250.0);
        assert_eq!(DeviceClass::Ssd.host_read_us(Some(100.0)), 400.0);
        // A rejected round leaves the pace as it was.
        let mut o = RoundOutcome {
            round_id: "r".into(),
            root: String::new(),
            steps: 1000,
            opened: 0,
            regenerated: 0,
            rejection: Some("late".into()),
            time: crate::timing::check(30.0, 0.0, 250.0),
            accepted: false,
        };
        assert_eq!(o.best_step_us(Some(50.0)), Some(50.0));
        o.accepted = true;
        assert!((o.step_us() - 30.0).abs() < 1e-9);
        assert_eq!(o.best_step_us(Some(50.0)), Some(o.step_us()));
        assert_eq!(o.best_step_us(Some(20.0)), Some(20.0));
    }

    fn issued(set: &MemoryDataset) -> (RoundMessage, RoundSession) {
        let message = RoundMessage {
            id: "r1".into(),
            round: StorageRound {
                dataset: set.dataset.clone(),
                root: set.root(),
                nonce: [2; 32],
                steps: 64,
            },
            issued_at_ms: 1_000,
            expires_at_ms: 11_000,
        };
        let session = RoundSession::new(
            &message,
            PublicKey::from([0xaa; 32]),
            100.0,
            [3; 32],
            (SAMPLES, REGENERATED),
        );
        (message, session)
    }

    fn walked(set: &MemoryDataset, round: &StorageRound) -> WalkMessage {
        WalkMessage {
            round_id: "r1".into(),
            walk: round
                .walk(|i| Ok::<_, Infallible>(set.chunk(i).unwrap().to_vec()))
                .unwrap(),
        }
    }

    #[test]
    fn a_round_in_time_with_good_openings_is_accepted_and_a_late_one_is_not() {
        let set = set();
        let agent = PublicKey::from([0xaa; 32]);
        for (arrival, accepted) in [(1_050, true), (1_500, false)] {
            let (message, mut session) = issued(&set);
            let walk = walked(&set, &message.round);
            let open = session
                .on_walk(&walk, &agent, arrival, 0.0)
                .unwrap()
                .unwrap();
            let openings = OpeningsMessage {
                round_id: "r1".into(),
                openings: set
                    .open_steps(&message.round, &walk.walk, &open.request)
                    .unwrap(),
            };
            let outcome = session.on_openings(&openings, &agent).unwrap();
            assert_eq!(outcome.accepted, accepted, "{outcome:?}");
            assert_eq!(outcome.rejection, None);
            assert_eq!(outcome.regenerated, REGENERATED);
            // Settled: nothing more is taken.
            assert_eq!(
                session.on_openings(&openings, &agent),
                Err(RoundError::OutOfOrder("the openings"))
            );
        }
    }

    #[test]
    fn misaddressed_late_or_out_of_order_messages_leave_the_round_waiting() {
        let set = set();
        let agent = PublicKey::from([0xaa; 32]);
        let (message, mut session) = issued(&set);
        let walk = walked(&set, &message.round);
        let openings = OpeningsMessage {
            round_id: "r1".into(),
            openings: StorageOpenings { chunks: vec![] },
        };
        assert_eq!(
            session.on_openings(&openings, &agent),
            Err(RoundError::OutOfOrder("the openings"))
        );
        assert!(matches!(
            session.on_walk(&walk, &PublicKey::from([0xbb; 32]), 1_050, 0.0),
            Err(RoundError::WrongSigner { .. })
        ));
        let other = WalkMessage {
            round_id: "r2".into(),
            ..walk.clone()
        };
        assert!(matches!(
            session.on_walk(&other, &agent, 1_050, 0.0),
            Err(RoundError::WrongId { .. })
        ));
        assert!(matches!(
            session.on_walk(&walk, &agent, 20_000, 0.0),
            Err(RoundError::Expired { .. })
        ));
        // Still waiting: the right walk is taken, once.
        assert!(session.on_walk(&walk, &agent, 1_050, 0.0).unwrap().is_ok());
        assert_eq!(
            session.on_walk(&walk, &agent, 1_060, 0.0).unwrap_err(),
            RoundError::OutOfOrder("the walk")
        );
    }

    #[test]
    fn a_short_walk_or_bad_openings_settle_the_round_rejected() {
        let set = set();
        let agent = PublicKey::from([0xaa; 32]);
        let (message, mut session) = issued(&set);
        let mut walk = walked(&set, &message.round);
        walk.walk.digests.pop();
        let settled = session
            .on_walk(&walk, &agent, 1_050, 0.0)
            .unwrap()
            .unwrap_err();
        assert!(!settled.accepted);
        assert!(settled.rejection.unwrap().contains("digests"));

        let (message, mut session) = issued(&set);
        let walk = walked(&set, &message.round);
        let open = session.on_walk(&walk, &agent, 1_050, 0.0).unwrap().unwrap();
        let mut openings = set
            .open_steps(&message.round, &walk.walk, &open.request)
            .unwrap();
        openings.chunks[0].bytes[0] ^= 1;
        let outcome = session
            .on_openings(
                &OpeningsMessage {
                    round_id: "r1".into(),
                    openings,
                },
                &agent,
            )
            .unwrap();
        assert!(!outcome.accepted && outcome.time.accepted);
        assert!(outcome.rejection.unwrap().contains("not in the committed"));
    }

    #[test]
    fn messages_round_trip_through_signed_envelopes() {
        let set = set();
        let (message, _) = issued(&set);
        let validator = pog_signed::Identity::from_seed([5; 32]);
        let sealed = validator.seal(kind::STORAGE_ROUND, &message).unwrap();
        let bytes = serde_json::to_vec(&sealed).unwrap();
        let (back, signer): (RoundMessage, _) =
            pog_signed::decode(&bytes, kind::STORAGE_ROUND).unwrap();
        assert_eq!(back, message);
        assert_eq!(signer, validator.public_key());
        assert!(pog_signed::decode::<RoundMessage>(&bytes, kind::STORAGE_WALK).is_err());
    }

    #[test]
    fn a_data_set_is_kept_after_its_audit_and_a_root_over_junk_is_refused() {
        let honest = set();
        let agent = PublicKey::from([0xaa; 32]);
        let message = DatasetMessage {
            id: "d1".into(),
            dataset: honest.dataset.clone(),
            issued_at_ms: 1_000,
            expires_at_ms: 100_000,
        };
        let junk = MemoryDataset::from_chunks(
            &honest.dataset,
            (0..32)
                .map(|i| match i % 4 {
                    0 => vec![0; crate::storage::CHUNK_BYTES],
                    _ => honest.chunk(i).unwrap().to_vec(),
                })
                .collect(),
        );
        for (host, accepted) in [(&honest, true), (&junk, false)] {
            let mut session = DatasetSession::new(&message, agent.clone(), [4; 32], 16);
            assert!(session.kept().is_none());
            let built = BuiltMessage {
                dataset_id: "d1".into(),
                root: host.root(),
            };
            let audit = session.on_built(&built, &agent, 5_000).unwrap();
            assert_eq!(audit.chunks.len(), 16);
            assert_eq!(
                session.on_built(&built, &agent, 5_001),
                Err(RoundError::OutOfOrder("the root"))
            );
            let openings = AuditOpeningsMessage {
                dataset_id: "d1".into(),
                chunks: audit
                    .chunks
                    .iter()
                    .map(|&i| host.open(i).unwrap())
                    .collect(),
            };
            let outcome = session.on_audit_openings(&openings, &agent).unwrap();
            assert_eq!(outcome.accepted, accepted, "{outcome:?}");
            assert_eq!(outcome.build_ms, 4_000.0);
            assert_eq!(session.kept().is_some(), accepted);
            if accepted {
                assert_eq!(session.kept().unwrap().1, honest.root());
            } else {
                assert!(outcome.rejection.unwrap().contains("differs"));
            }
        }
    }

    #[test]
    fn a_data_set_built_instead_is_taken_up_only_when_its_validator_would_have_sent_it() {
        use pog_signed::Identity;
        let (me, peer, stranger) = (
            Identity::from_seed([1; 32]),
            Identity::from_seed([2; 32]),
            Identity::from_seed([3; 32]),
        );
        let agent = PublicKey::from([0xaa; 32]);
        let shape = set().dataset.shape;
        let to = |validator: &Identity, uuid: &str| Addressee {
            gpu_uuid: uuid.parse().unwrap(),
            gpu_bus_id: "0".into(),
            agent_key: agent.clone(),
            validator_key: validator.public_key(),
        };
        let message = |id: &str, to: Addressee, shape: StorageShape| DatasetMessage {
            id: id.into(),
            dataset: StorageDataset::new([id.len() as u8; 32], to, shape),
            issued_at_ms: 1_000,
            expires_at_ms: 9_000,
        };
        // What this validator asked for after its restart.
        let asked = message("asked", to(&me, "GPU-host"), shape);
        let session = DatasetSession::new(&asked, agent.clone(), [4; 32], 8);
        let trusts = |k: &PublicKey| *k == me.public_key() || *k == peer.public_key();
        let building = |offered: Option<Envelope>| BuildingMessage {
            dataset_id: "asked".into(),
            running_ms: 10,
            instead: offered,
        };
        let seal = |by: &Identity, m: &DatasetMessage| by.seal(kind::STORAGE_DATASET, m).unwrap();

        // Sent before the restart by this validator, or by another of its fleet: taken up,
        // the new session polls that data set and audits it with the new secret.
        for by in [&me, &peer] {
            let before = message("before", to(by, "GPU-host"), shape);
            let (taken, envelope) = session
                .take_up(
                    &building(Some(seal(by, &before))),
                    &agent,
                    trusts,
                    [5; 32],
                    2_000,
                )
                .unwrap();
            assert_eq!(taken.message(), &before);
            assert_eq!(envelope, seal(by, &before));
        }
        let refused = |offered: Envelope, signer: &PublicKey, now_ms: u64| {
            session.take_up(&building(Some(offered)), signer, trusts, [5; 32], now_ms)
        };
        let not_taken = |r: Result<(DatasetSession, Envelope), RoundError>| match r {
            Err(RoundError::NotTakenUp(why)) => why,
            other => panic!("taken up: {:?}", other.map(|(s, _)| s.message().clone())),
        };
        let before = message("before", to(&me, "GPU-host"), shape);
        // A validator it does not trust, or one signing a message addressed by another.
        assert!(not_taken(refused(
            seal(&stranger, &message("x", to(&stranger, "GPU-host"), shape)),
            &agent,
            2_000
        ))
        .contains("does not trust"));
        assert!(
            not_taken(refused(seal(&peer, &before), &agent, 2_000)).contains("another validator")
        );
        // Another GPU, another shape, expired.
        assert!(not_taken(refused(
            seal(&me, &message("o", to(&me, "GPU-other"), shape)),
            &agent,
            2_000
        ))
        .contains("another GPU"));
        let other_shape = StorageShape {
            items: shape.items * 2,
            ..shape
        };
        assert!(not_taken(refused(
            seal(&me, &message("o", to(&me, "GPU-host"), other_shape)),
            &agent,
            2_000
        ))
        .contains("shape"));
        assert!(not_taken(refused(seal(&me, &before), &agent, 9_001)).contains("expired"));
        // A forged signature, or another kind of message.
        let mut forged = seal(&me, &before);
        forged.body = forged.body.replace("before", "befor3");
        assert!(not_taken(refused(forged, &agent, 2_000)).contains("not a signed"));
        assert!(not_taken(refused(
            me.seal("storage-round", &before).unwrap(),
            &agent,
            2_000
        ))
        .contains("not a signed"));
        // Nothing offered, another agent's word, or the word for another data set.
        assert!(
            not_taken(session.take_up(&building(None), &agent, trusts, [5; 32], 2_000))
                .contains("names no")
        );
        assert!(matches!(
            refused(seal(&me, &before), &PublicKey::from([1; 32]), 2_000),
            Err(RoundError::WrongSigner { .. })
        ));
        let mut elsewhere = building(Some(seal(&me, &before)));
        elsewhere.dataset_id = "before".into();
        assert!(matches!(
            session.take_up(&elsewhere, &agent, trusts, [5; 32], 2_000),
            Err(RoundError::WrongId { .. })
        ));
    }

    #[test]
    fn an_audit_answered_wrong_late_or_by_another_is_refused() {
        let honest = set();
        let agent = PublicKey::from([0xaa; 32]);
        let message = DatasetMessage {
            id: "d1".into(),
            dataset: honest.dataset.clone(),
            issued_at_ms: 1_000,
            expires_at_ms: 2_000,
        };
        let mut session = DatasetSession::new(&message, agent.clone(), [4; 32], 8);
        let building = BuildingMessage {
            dataset_id: "d1".into(),
            running_ms: 10,
            instead: None,
        };
        assert_eq!(session.on_building(&building, &agent, 1_500), Ok(()));
        assert!(matches!(
            session.on_building(&building, &agent, 3_000),
            Err(RoundError::Expired { .. })
        ));
        assert!(matches!(
            session.on_building(&building, &PublicKey::from([1; 32]), 1_500),
            Err(RoundError::WrongSigner { .. })
        ));
        let built = BuiltMessage {
            dataset_id: "d1".into(),
            root: honest.root(),
        };
        assert!(matches!(
            session.on_built(&built, &agent, 3_000),
            Err(RoundError::Expired { .. })
        ));
        assert!(matches!(
            session.on_built(&built, &PublicKey::from([1; 32]), 1_500),
            Err(RoundError::WrongSigner { .. })
        ));
        let early = AuditOpeningsMessage {
            dataset_id: "d1".into(),
            chunks: vec![],
        };
        assert!(matches!(
            session.on_audit_openings(&early, &agent),
            Err(RoundError::OutOfOrder(_))
        ));
        let audit = session.on_built(&built, &agent, 1_500).unwrap();
        assert_eq!(
            session.on_building(&building, &agent, 1_600),
            Err(RoundError::OutOfOrder("a build in progress"))
        );
        // Fewer openings than asked, or another chunk than asked: refused.
        let mut short = AuditOpeningsMessage {
            dataset_id: "d1".into(),
            chunks: audit
                .chunks
                .iter()
                .map(|&i| honest.open(i).unwrap())
                .collect(),
        };
        short.chunks.pop();
        let outcome = session.on_audit_openings(&short, &agent).unwrap();
        assert!(!outcome.accepted && session.kept().is_none());
        let mut session = DatasetSession::new(&message, agent.clone(), [4; 32], 8);
        let audit = session.on_built(&built, &agent, 1_500).unwrap();
        let moved = AuditOpeningsMessage {
            dataset_id: "d1".into(),
            chunks: audit
                .chunks
                .iter()
                .map(|&i| honest.open((i + 1) % 32).unwrap())
                .collect(),
        };
        let outcome = session.on_audit_openings(&moved, &agent).unwrap();
        assert!(!outcome.accepted, "{outcome:?}");
    }
}
