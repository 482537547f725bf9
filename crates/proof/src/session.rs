//! One challenge's life on the validator's side, as a state machine over verified messages:
//! issue → commitment (timed) → open request → openings → outcome. Out-of-order, duplicated,
//! expired or mismatched messages are errors that leave the session unchanged.

use crate::challenge::Challenge;
use crate::layout::Position;
use crate::memory::Walk;
use crate::timing::{self, TimeCheck};
use crate::verify::{check_value, draw_samples, Rejection};
use crate::wire::{ChallengeMessage, Commitment, OpenRequest, Openings, OpeningsError};
use pog_merkle::multiproof::{self, MultiproofError};
use pog_merkle::{Blake3, Hash, TreeHasher};
use pog_signed::{GpuUuid, PublicKey};
use serde::{Deserialize, Serialize};

/// Why a message does not fit the session.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProtocolError {
    /// The message names another challenge than this session's.
    #[error("message for challenge {got}, this session is {expected}")]
    WrongChallenge {
        /// This session's challenge id.
        expected: String,
        /// The id the message names.
        got: String,
    },
    /// The message is signed by another key than the agent the challenge was issued to.
    #[error("signed by {got}, expected the agent {expected}")]
    WrongSigner {
        /// The agent's public key.
        expected: PublicKey,
        /// The key that signed the message.
        got: PublicKey,
    },
    /// A message the session is not waiting for (e.g. openings before the commitment),
    /// named by its kind.
    #[error("{0} arrived out of order")]
    OutOfOrder(&'static str),
    /// The answer came after the challenge's expiry.
    #[error("the challenge expired at {expires_at_ms} ms; the answer came at {now_ms} ms")]
    Expired {
        /// The expiry, in ms since the Unix epoch.
        expires_at_ms: u64,
        /// When the answer arrived, in ms since the Unix epoch.
        now_ms: u64,
    },
    /// The commitment names another GPU than the challenge.
    #[error("commitment is for GPU {got}, the challenge for {expected}")]
    WrongGpu {
        /// The challenged GPU's UUID.
        expected: String,
        /// The UUID the commitment names.
        got: String,
    },
    /// The commitment's leaf count is not the one the challenge's shape implies.
    #[error("commitment covers {got} leaves, the challenge has {expected}")]
    WrongLeafCount {
        /// Leaves the challenge has.
        expected: u64,
        /// Leaves the commitment claims.
        got: u64,
    },
    /// The commitment's root is not a 32-byte hash in hex.
    #[error("the commitment's root is not 32 bytes in hex: {0}")]
    Root(hex::FromHexError),
    /// The openings are not the leaves and multiproof asked for: a field longer or shorter
    /// than the request fixes, or not base64.
    #[error("malformed openings: {0}")]
    Openings(OpeningsError),
    /// The leaves asked cannot be proven by a multiproof (none were drawn, or the challenge's
    /// shape puts a drawn element outside its leaves).
    #[error("no multiproof proves the leaves asked: {0}")]
    Multiproof(MultiproofError),
}

#[derive(Debug, Clone, PartialEq)]
enum State {
    Issued,
    Committed {
        root: Hash,
        time: TimeCheck,
        positions: Vec<Position>,
        /// The leaves asked (strictly increasing), as the open request names them.
        leaves: Vec<u64>,
    },
    Done,
}

/// How many of a challenge's failed spot checks its [`Outcome`] lists one by one; the rest
/// are counted and digested. A signed record must stay far below the ledger's entry limit
/// (64 KiB) however wrong the answer: 1,024 wrong values listed whole made a record of about
/// 124 KB, which the ledger refused, so the worst answers left no record at all.
pub const REJECTIONS_LISTED: usize = 8;

/// The verdict on one challenge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// The challenge's id, as issued.
    pub challenge_id: String,
    /// The challenged GPU's UUID.
    pub gpu_uuid: GpuUuid,
    /// The committed Merkle root (hex).
    pub root: String,
    /// Spot checks drawn and checked.
    pub checked: usize,
    /// Every spot check that failed, counted (records made before this field list them all in
    /// `rejected`: [`Outcome::wrong`] reads either).
    #[serde(default)]
    pub rejected_total: usize,
    /// The first [`REJECTIONS_LISTED`] failed spot checks, in the order they were drawn.
    pub rejected: Vec<Rejection>,
    /// SHA-256 (hex) of every failed spot check, each as one line of JSON in draw order
    /// ([`rejections_digest`]): whoever holds the agent's openings and the revealed secret
    /// can recompute the whole list and match it. `None` when none failed.
    #[serde(default)]
    pub rejected_digest: Option<String>,
    /// The time bound's check on the commitment.
    pub time: TimeCheck,
    /// True when every spot check passed and the time bound held.
    pub accepted: bool,
}

impl Outcome {
    /// How many spot checks failed.
    pub fn wrong(&self) -> usize {
        self.rejected_total.max(self.rejected.len())
    }
}

/// The digest an [`Outcome`] carries of its failed spot checks: SHA-256 over each rejection's
/// JSON followed by a newline, in draw order; `None` for none.
pub fn rejections_digest(rejected: &[Rejection]) -> Option<String> {
    use sha2::{Digest, Sha256};
    if rejected.is_empty() {
        return None;
    }
    let mut hasher = Sha256::new();
    for r in rejected {
        // A rejection is plain data (numbers and strings): it always serializes.
        hasher.update(serde_json::to_vec(r).unwrap_or_default());
        hasher.update(b"\n");
    }
    Some(hex::encode(hasher.finalize()))
}

/// What a session needs from a kind of challenge: whom it is for, how many leaves its
/// commitment has and how long each is, and how to draw and check spot checks after the
/// commitment. The GEMM [`Challenge`] and the memory proof's [`Walk`] implement it (both here,
/// each delegating to its own module's checks), so both run through the same state machine.
///
/// The session proves every opened leaf against the committed root itself, with the one
/// multiproof the openings carry; a kind checks only what a proven leaf holds.
pub trait SpotChecked {
    /// The GPU that must answer.
    fn gpu_uuid(&self) -> &GpuUuid;
    /// Leaves the commitment must cover.
    fn leaf_count(&self) -> u64;
    /// `count` positions to check, from the validator's secret and the committed root.
    fn draw(&self, root: &Hash, secret: &[u8; 32], count: u32) -> Vec<Position>;
    /// The leaf holding a drawn position.
    fn leaf_of(&self, position: Position) -> u64;
    /// Bytes leaf `leaf` has (what the openings must carry for it).
    fn leaf_len(&self, leaf: u64) -> usize;
    /// Checks one drawn position in `bytes`, the bytes of the leaf holding it, already proven
    /// to be that leaf under the committed root.
    fn check(&self, position: Position, bytes: &[u8]) -> Result<(), Rejection>;
}

impl SpotChecked for Challenge {
    fn gpu_uuid(&self) -> &GpuUuid {
        &self.to.gpu_uuid
    }

    fn leaf_count(&self) -> u64 {
        Challenge::leaf_count(self)
    }

    fn draw(&self, root: &Hash, secret: &[u8; 32], count: u32) -> Vec<Position> {
        draw_samples(self, root, secret, count)
    }

    fn leaf_of(&self, position: Position) -> u64 {
        Challenge::leaf_of(self, position).0
    }

    fn leaf_len(&self, leaf: u64) -> usize {
        Challenge::leaf_len(self, leaf)
    }

    fn check(&self, position: Position, bytes: &[u8]) -> Result<(), Rejection> {
        check_value(self, position, bytes)
    }
}

impl SpotChecked for Walk {
    fn gpu_uuid(&self) -> &GpuUuid {
        &self.challenge.to.gpu_uuid
    }

    fn leaf_count(&self) -> u64 {
        self.challenge.leaf_count()
    }

    fn draw(&self, root: &Hash, secret: &[u8; 32], count: u32) -> Vec<Position> {
        self.draw_walkers(root, secret, count)
    }

    fn leaf_of(&self, position: Position) -> u64 {
        Walk::leaf_of(self, position)
    }

    fn leaf_len(&self, _leaf: u64) -> usize {
        self.challenge.leaf_bytes()
    }

    fn check(&self, position: Position, bytes: &[u8]) -> Result<(), Rejection> {
        self.check_output(position, bytes)
    }
}

impl SpotChecked for crate::cpu::CpuRun {
    fn gpu_uuid(&self) -> &GpuUuid {
        &self.challenge.to.gpu_uuid
    }

    fn leaf_count(&self) -> u64 {
        self.challenge.leaf_count()
    }

    fn draw(&self, root: &Hash, secret: &[u8; 32], count: u32) -> Vec<Position> {
        crate::cpu::CpuRun::draw(self, root, secret, count)
    }

    fn leaf_of(&self, position: Position) -> u64 {
        crate::cpu::CpuRun::leaf_of(self, position)
    }

    fn leaf_len(&self, _leaf: u64) -> usize {
        self.challenge.leaf_bytes()
    }

    fn check(&self, position: Position, bytes: &[u8]) -> Result<(), Rejection> {
        self.check_segment(position, bytes)
    }
}

/// The validator's view of one challenge.
pub struct ValidatorSession<C: SpotChecked = Challenge> {
    id: String,
    challenge: C,
    /// The validator's clock when the timed work was asked for, and its deadline.
    issued_at_ms: u64,
    expires_at_ms: u64,
    agent: PublicKey,
    expected_ms: f64,
    secret: [u8; 32],
    samples: u32,
    state: State,
}

impl ValidatorSession<Challenge> {
    /// A session for the GEMM challenge `message`, answerable only by the agent with public key
    /// `agent`. `secret` seeds the spot checks; `expected_ms` is the claimed model's time.
    pub fn new(
        message: ChallengeMessage,
        agent: PublicKey,
        expected_ms: f64,
        secret: [u8; 32],
        samples: u32,
    ) -> ValidatorSession {
        ValidatorSession::timed(
            message.id,
            message.challenge,
            (message.issued_at_ms, message.expires_at_ms),
            agent,
            expected_ms,
            secret,
            samples,
        )
    }
}

impl<C: SpotChecked> ValidatorSession<C> {
    /// A session for challenge `id` whose timed work was asked for at `window.0` (validator
    /// clock, ms) and must be committed by `window.1`.
    pub fn timed(
        id: String,
        challenge: C,
        window: (u64, u64),
        agent: PublicKey,
        expected_ms: f64,
        secret: [u8; 32],
        samples: u32,
    ) -> ValidatorSession<C> {
        ValidatorSession {
            id,
            challenge,
            issued_at_ms: window.0,
            expires_at_ms: window.1,
            agent,
            expected_ms,
            secret,
            samples,
            state: State::Issued,
        }
    }

    /// The challenge's id, as issued.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The challenge this session issued.
    pub fn challenge(&self) -> &C {
        &self.challenge
    }

    fn check_sender(&self, id: &str, signer: &PublicKey) -> Result<(), ProtocolError> {
        if id != self.id {
            return Err(ProtocolError::WrongChallenge {
                expected: self.id.clone(),
                got: id.to_string(),
            });
        }
        if *signer != self.agent {
            return Err(ProtocolError::WrongSigner {
                expected: self.agent.clone(),
                got: signer.clone(),
            });
        }
        Ok(())
    }

    /// Takes the commitment that arrived at `now_ms` (validator clock), with the measured
    /// network round trip; returns the leaves to open.
    pub fn on_commitment(
        &mut self,
        c: &Commitment,
        signer: &PublicKey,
        now_ms: u64,
        round_trip_ms: f64,
    ) -> Result<OpenRequest, ProtocolError> {
        self.check_sender(&c.challenge_id, signer)?;
        if self.state != State::Issued {
            return Err(ProtocolError::OutOfOrder("commitment"));
        }
        if now_ms > self.expires_at_ms {
            return Err(ProtocolError::Expired {
                expires_at_ms: self.expires_at_ms,
                now_ms,
            });
        }
        let challenge = &self.challenge;
        if c.gpu_uuid != *challenge.gpu_uuid() {
            return Err(ProtocolError::WrongGpu {
                expected: challenge.gpu_uuid().to_string(),
                got: c.gpu_uuid.to_string(),
            });
        }
        if c.leaf_count != challenge.leaf_count() {
            return Err(ProtocolError::WrongLeafCount {
                expected: challenge.leaf_count(),
                got: c.leaf_count,
            });
        }
        let mut root: Hash = [0; 32];
        hex::decode_to_slice(&c.root, &mut root).map_err(ProtocolError::Root)?;
        let measured = now_ms.saturating_sub(self.issued_at_ms) as f64;
        let time = timing::check(measured, round_trip_ms, self.expected_ms);
        let positions = challenge.draw(&root, &self.secret, self.samples);
        let mut leaves: Vec<u64> = positions.iter().map(|p| challenge.leaf_of(*p)).collect();
        leaves.sort_unstable();
        leaves.dedup();
        self.state = State::Committed {
            root,
            time,
            positions,
            leaves: leaves.clone(),
        };
        Ok(OpenRequest {
            challenge_id: self.id.clone(),
            leaves,
        })
    }

    /// The leaves asked once the commitment is taken: where each starts in the openings'
    /// leaf bytes (and, last, where they all end), and how many hashes their multiproof has.
    fn expected(&self, leaves: &[u64]) -> Result<(Vec<usize>, usize), ProtocolError> {
        let mut starts = Vec::with_capacity(leaves.len() + 1);
        let mut at = 0usize;
        for leaf in leaves {
            starts.push(at);
            at = at.saturating_add(self.challenge.leaf_len(*leaf));
        }
        starts.push(at);
        let hashes = if leaves.is_empty() {
            0
        } else {
            multiproof::proof_len(self.challenge.leaf_count(), leaves)
                .map_err(ProtocolError::Multiproof)?
        };
        Ok((starts, hashes))
    }

    /// The most bytes the signed answer to the open request may take ([`Openings::limit`]):
    /// what a validator reads of it at most. `None` before the commitment.
    pub fn openings_limit(&self) -> Option<usize> {
        let State::Committed { leaves, .. } = &self.state else {
            return None;
        };
        let (starts, hashes) = self.expected(leaves).ok()?;
        Some(Openings::limit(*starts.last()?, hashes))
    }

    /// Takes the openings and settles the challenge. The openings must carry exactly the
    /// leaves asked and as many hashes as their multiproof has (else a [`ProtocolError`] that
    /// leaves the session waiting); every leaf is hashed and the multiproof checked against
    /// the committed root once. Where it leads elsewhere no leaf is proven and every drawn
    /// element is rejected ([`Rejection::NotInTree`]); else each drawn element is checked in
    /// its leaf.
    pub fn on_openings(
        &mut self,
        o: &Openings,
        signer: &PublicKey,
    ) -> Result<Outcome, ProtocolError> {
        self.check_sender(&o.challenge_id, signer)?;
        let State::Committed {
            root,
            time,
            positions,
            leaves,
        } = &self.state
        else {
            return Err(ProtocolError::OutOfOrder("openings"));
        };
        let challenge = &self.challenge;
        let (starts, hashes) = self.expected(leaves)?;
        let leaf_bytes = starts.last().copied().unwrap_or(0);
        let (bytes, proof) = o
            .split(leaf_bytes, hashes)
            .map_err(ProtocolError::Openings)?;
        let bytes_of = |i: usize| &bytes[starts[i]..starts[i + 1]];
        let proven = leaves.is_empty() || {
            let hashed: Vec<(u64, Hash)> = leaves
                .iter()
                .enumerate()
                .map(|(i, leaf)| (*leaf, Blake3::leaf(bytes_of(i))))
                .collect();
            match multiproof::verify::<Blake3>(challenge.leaf_count(), &hashed, &proof, root) {
                Ok(()) => true,
                Err(MultiproofError::WrongRoot) => false,
                Err(e) => return Err(ProtocolError::Multiproof(e)),
            }
        };
        let mut rejected: Vec<Rejection> = positions
            .iter()
            .filter_map(|p| {
                let leaf = challenge.leaf_of(*p);
                match leaves.binary_search(&leaf) {
                    Ok(i) if proven => challenge.check(*p, bytes_of(i)).err(),
                    _ => Some(Rejection::NotInTree { leaf }),
                }
            })
            .collect();
        let rejected_total = rejected.len();
        let rejected_digest = rejections_digest(&rejected);
        rejected.truncate(REJECTIONS_LISTED);
        let outcome = Outcome {
            challenge_id: self.id.clone(),
            gpu_uuid: challenge.gpu_uuid().clone(),
            root: hex::encode(root),
            checked: positions.len(),
            accepted: rejected_total == 0 && time.accepted,
            rejected_total,
            rejected,
            rejected_digest,
            time: *time,
        };
        self.state = State::Done;
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::challenge::CHALLENGE_VERSION;
    use crate::prover::{Behaviour, CpuProver, Prover};
    use crate::wire::OpeningsField;
    use pog_spec::Precision;

    /// The agent the test challenges are issued to.
    fn agent() -> PublicKey {
        pog_signed::Identity::from_seed([1; 32]).public_key()
    }

    /// The commitment an agent with this prover sends for challenge "c1" on GPU-1.
    fn commitment(prover: &CpuProver) -> Commitment {
        Commitment {
            challenge_id: "c1".into(),
            gpu_uuid: "GPU-1".parse().unwrap(),
            root: hex::encode(prover.root()),
            leaf_count: prover.leaf_count(),
            agent_ms: 1.0,
        }
    }

    /// The agent's answer to an open request.
    fn openings(prover: &CpuProver, request: &OpenRequest) -> Openings {
        let opened = prover.open(&request.leaves).expect("leaves in range");
        Openings::compact("c1".into(), prover.leaf_count(), &opened).expect("a multiproof")
    }

    fn message(uuid: &str) -> ChallengeMessage {
        ChallengeMessage {
            id: "c1".into(),
            challenge: Challenge {
                version: CHALLENGE_VERSION,
                nonce: [5; 32],
                to: crate::challenge::Addressee {
                    gpu_uuid: uuid.parse().unwrap(),
                    gpu_bus_id: "00000000:00:06.0".into(),
                    agent_key: pog_signed::PublicKey::from([0xaa; 32]),
                    validator_key: pog_signed::PublicKey::from([0xbb; 32]),
                },
                precision: Precision::Int8,
                size: 32,
                batch: 2,
                leaf_elements: 64,
            },
            issued_at_ms: 1_000,
            expires_at_ms: 60_000,
        }
    }

    /// Runs a whole exchange with a prover for `answered` (possibly another challenge).
    fn run(
        answered: &Challenge,
        behaviour: Behaviour,
        now_ms: u64,
    ) -> Result<Outcome, ProtocolError> {
        let mut s = ValidatorSession::new(message("GPU-1"), agent(), 1_000.0, [8; 32], 128);
        let prover = CpuProver::compute(answered, behaviour);
        let commitment = commitment(&prover);
        let request = s.on_commitment(&commitment, &agent(), now_ms, 5.0)?;
        let openings = openings(&prover, &request);
        s.on_openings(&openings, &agent())
    }

    #[test]
    fn an_honest_agent_in_time_is_accepted() {
        let o = run(&message("GPU-1").challenge, Behaviour::Honest, 1_900).unwrap();
        assert!(o.accepted, "{o:?}");
        assert_eq!(o.checked, 128);
        assert!(o.time.accepted);
    }

    #[test]
    fn late_junk_and_foreign_answers_are_refused() {
        let too_slow = run(
            &message("GPU-1").challenge,
            Behaviour::Honest,
            1_000 + 1_300,
        )
        .unwrap();
        assert!(!too_slow.accepted && !too_slow.time.accepted);
        let junk = run(&message("GPU-1").challenge, Behaviour::Junk(0.1), 1_900).unwrap();
        assert!(!junk.accepted && junk.wrong() > 0);
        let for_other_gpu = run(&message("GPU-2").challenge, Behaviour::Honest, 1_900).unwrap();
        assert_eq!(for_other_gpu.wrong(), 128);
        assert!(matches!(
            run(&message("GPU-1").challenge, Behaviour::Honest, 70_000),
            Err(ProtocolError::Expired { .. })
        ));
    }

    /// Every check wrong: the outcome counts them all, lists the first few and digests the
    /// whole list, so a record of the worst answer is as small as one of a good answer.
    #[test]
    fn a_wholly_wrong_answer_is_counted_listed_in_part_and_digested() {
        let o = run(&message("GPU-2").challenge, Behaviour::Honest, 1_900).unwrap();
        assert!(!o.accepted);
        assert_eq!((o.wrong(), o.rejected_total), (128, 128));
        assert_eq!(o.rejected.len(), REJECTIONS_LISTED);
        let digest = o
            .rejected_digest
            .clone()
            .expect("a digest of the rejections");
        // The digest is of the whole list, in draw order: the same answer digests the same,
        // and a list cut to the ones shown does not.
        let again = run(&message("GPU-2").challenge, Behaviour::Honest, 1_900).unwrap();
        assert_eq!(again.rejected_digest.as_deref(), Some(digest.as_str()));
        assert_ne!(rejections_digest(&o.rejected), Some(digest));
        let good = run(&message("GPU-1").challenge, Behaviour::Honest, 1_900).unwrap();
        assert_eq!((good.rejected_total, good.rejected_digest), (0, None));
        // A record written before the count existed lists every rejection: read as such.
        let mut old = serde_json::to_value(&o).unwrap();
        old.as_object_mut().unwrap().remove("rejected_total");
        let old: Outcome = serde_json::from_value(old).unwrap();
        assert_eq!(old.wrong(), REJECTIONS_LISTED);
    }

    #[test]
    fn out_of_order_duplicate_and_foreign_messages_change_nothing() {
        let mut s = ValidatorSession::new(message("GPU-1"), agent(), 1_000.0, [8; 32], 16);
        let empty = Openings {
            challenge_id: "c1".into(),
            leaves: Vec::new(),
            proof: Vec::new(),
        };
        assert_eq!(
            s.on_openings(&empty, &agent()),
            Err(ProtocolError::OutOfOrder("openings"))
        );
        let prover = CpuProver::compute(s.challenge(), Behaviour::Honest);
        let c = commitment(&prover);
        assert!(matches!(
            s.on_commitment(
                &c,
                &pog_signed::Identity::from_seed([2; 32]).public_key(),
                1_500,
                0.0
            ),
            Err(ProtocolError::WrongSigner { .. })
        ));
        assert!(matches!(
            s.on_commitment(
                &Commitment {
                    challenge_id: "c2".into(),
                    ..c.clone()
                },
                &agent(),
                1_500,
                0.0
            ),
            Err(ProtocolError::WrongChallenge { .. })
        ));
        assert!(matches!(
            s.on_commitment(
                &Commitment {
                    gpu_uuid: "GPU-2".parse().unwrap(),
                    ..c.clone()
                },
                &agent(),
                1_500,
                0.0
            ),
            Err(ProtocolError::WrongGpu { .. })
        ));
        assert!(matches!(
            s.on_commitment(
                &Commitment {
                    leaf_count: 1,
                    ..c.clone()
                },
                &agent(),
                1_500,
                0.0
            ),
            Err(ProtocolError::WrongLeafCount { .. })
        ));
        assert!(matches!(
            s.on_commitment(
                &Commitment {
                    root: "xyz".into(),
                    ..c.clone()
                },
                &agent(),
                1_500,
                0.0
            ),
            Err(ProtocolError::Root(hex::FromHexError::OddLength))
        ));
        // None of the bad messages moved the session: the good commitment is still taken, once.
        s.on_commitment(&c, &agent(), 1_500, 0.0).unwrap();
        assert_eq!(
            s.on_commitment(&c, &agent(), 1_600, 0.0),
            Err(ProtocolError::OutOfOrder("commitment"))
        );
        // Openings of nothing are refused, and move nothing either.
        assert!(matches!(
            s.on_openings(&empty, &agent()),
            Err(ProtocolError::Openings(OpeningsError::Truncated {
                field: OpeningsField::Leaves,
                got: 0,
                ..
            }))
        ));
        let request = OpenRequest {
            challenge_id: "c1".into(),
            leaves: match &s.state {
                State::Committed { leaves, .. } => leaves.clone(),
                _ => unreachable!("committed above"),
            },
        };
        let honest = openings(&prover, &request);
        let outcome = s.on_openings(&honest, &agent()).unwrap();
        assert!(outcome.accepted, "{outcome:?}");
        assert_eq!(
            s.on_openings(&honest, &agent()),
            Err(ProtocolError::OutOfOrder("openings"))
        );
    }

    /// A committed session for an honest prover, its open request and the honest openings.
    fn committed(samples: u32) -> (ValidatorSession, Openings) {
        let mut s = ValidatorSession::new(message("GPU-1"), agent(), 1_000.0, [8; 32], samples);
        let prover = CpuProver::compute(s.challenge(), Behaviour::Honest);
        let request = s
            .on_commitment(&commitment(&prover), &agent(), 1_500, 0.0)
            .unwrap();
        (s, openings(&prover, &request))
    }

    /// A change to the bytes of a field of [`Openings`].
    type Change = fn(&mut Vec<u8>);

    /// `o` with the bytes of `field` changed by `change`.
    fn rewritten(o: &Openings, field: OpeningsField, change: impl Fn(&mut Vec<u8>)) -> Openings {
        let mut o = o.clone();
        change(match field {
            OpeningsField::Leaves => &mut o.leaves,
            OpeningsField::Proof => &mut o.proof,
        });
        o
    }

    /// A leaf byte or a proof hash changed: the multiproof no longer leads to the root, no
    /// leaf is proven, and every drawn element is rejected.
    #[test]
    fn a_tampered_leaf_or_proof_hash_rejects_every_check() {
        let changes: [(OpeningsField, Change); 3] = [
            (OpeningsField::Leaves, |b| b[0] ^= 1),
            (OpeningsField::Leaves, |b| *b.last_mut().unwrap() ^= 0x80),
            (OpeningsField::Proof, |b| b[40] ^= 1),
        ];
        for (field, change) in changes {
            let (mut s, honest) = committed(32);
            let outcome = s
                .on_openings(&rewritten(&honest, field, change), &agent())
                .unwrap();
            assert!(!outcome.accepted);
            assert_eq!(outcome.wrong(), 32, "{field}");
            assert!(outcome
                .rejected
                .iter()
                .all(|r| matches!(r, Rejection::NotInTree { .. })));
        }
    }

    /// Openings of other lengths than the request fixes are refused with a typed error that
    /// leaves the session waiting (a hash more or fewer, leaf bytes more or fewer); two leaves
    /// swapped have the right length and prove nothing.
    #[test]
    fn malformed_multiproofs_and_leaf_counts_are_typed_errors() {
        let (mut s, honest) = committed(32);
        let cases: [(OpeningsField, Change, bool); 5] = [
            (OpeningsField::Proof, |b| b.extend([7; 32]), true),
            (OpeningsField::Proof, |b| b.truncate(b.len() - 32), false),
            (OpeningsField::Proof, |b| b.truncate(b.len() - 1), false),
            (OpeningsField::Leaves, |b| b.extend([0; 64]), true),
            (OpeningsField::Leaves, |b| b.truncate(b.len() - 64), false),
        ];
        for (field, change, longer) in cases {
            let err = s
                .on_openings(&rewritten(&honest, field, change), &agent())
                .unwrap_err();
            match err {
                ProtocolError::Openings(OpeningsError::Oversized { field: f, .. }) if longer => {
                    assert_eq!(f, field)
                }
                ProtocolError::Openings(OpeningsError::Truncated { field: f, .. }) if !longer => {
                    assert_eq!(f, field)
                }
                other => panic!("{field}: {other}"),
            }
        }
        // The first two leaves (256 bytes each) swapped: the right length, proven nowhere.
        let swapped = rewritten(&honest, OpeningsField::Leaves, |b| {
            let (first, rest) = b.split_at_mut(256);
            first.swap_with_slice(&mut rest[..256]);
        });
        let outcome = s.on_openings(&swapped, &agent()).unwrap();
        assert_eq!(outcome.wrong(), 32);
    }

    /// The openings frame answering `leaves` of `c`, every byte zero: as long as any answer
    /// to them, since a frame's length depends only on how many bytes it carries.
    fn sealed_len_of(c: &impl SpotChecked, leaves: &[u64]) -> usize {
        let bytes: usize = leaves.iter().map(|l| c.leaf_len(*l)).sum();
        let hashes = multiproof::proof_len(c.leaf_count(), leaves).unwrap();
        zeros_sealed_len(bytes, hashes)
    }

    /// The openings frame of `bytes` leaf bytes and `hashes` hashes, all zero.
    fn zeros_sealed_len(bytes: usize, hashes: usize) -> usize {
        sealed_len(&Openings {
            challenge_id: hex::encode([0x5a; 16]),
            leaves: vec![0; bytes],
            proof: vec![0; 32 * hashes],
        })
    }

    fn sealed_len(o: &Openings) -> usize {
        o.seal(&pog_signed::Identity::from_seed([1; 32]))
            .unwrap()
            .len()
    }

    /// The leaves a session asks for `c` at 1024 spot checks, drawn after the root `root`.
    fn asked(c: &impl SpotChecked, root: u8, samples: u32) -> Vec<u64> {
        let mut leaves: Vec<u64> = c
            .draw(&[root; 32], &[9; 32], samples)
            .iter()
            .map(|p| c.leaf_of(*p))
            .collect();
        leaves.sort_unstable();
        leaves.dedup();
        leaves
    }

    /// An honest answer's signed size is fixed by the leaves asked and the tree's size alone:
    /// a real exchange's openings are exactly as long as zeros of the same lengths. (What lets
    /// `h200_plans_answer_in_under_1_mib` size the H200's answers without computing them.)
    #[test]
    fn an_answers_size_depends_only_on_the_leaves_asked() {
        for precision in [Precision::Bf16, Precision::Int8] {
            let mut m = message("GPU-1");
            m.challenge.precision = precision;
            m.challenge.leaf_elements = crate::params::leaf_elements(precision);
            let mut s = ValidatorSession::new(m.clone(), agent(), 1_000.0, [8; 32], 1024);
            let prover = CpuProver::compute(&m.challenge, Behaviour::Honest);
            let request = s
                .on_commitment(&commitment(&prover), &agent(), 1_500, 0.0)
                .unwrap();
            let mut honest = openings(&prover, &request);
            honest.challenge_id = hex::encode([0x5a; 16]);
            assert_eq!(
                sealed_len(&honest),
                sealed_len_of(&m.challenge, &request.leaves)
            );
            // What the validator reads at most covers it, by the overhead's margin only.
            let limit = s.openings_limit().unwrap();
            assert!(limit >= sealed_len(&honest));
            assert!(limit <= sealed_len(&honest) + crate::wire::OPENINGS_OVERHEAD);
        }
    }

    /// Every H200 plan (`params::plan_at`, 256-byte leaves) answers 1024 spot checks in under
    /// 1 MiB, the signed envelope included, for several draws; so does the memory proof's.
    #[test]
    fn h200_plans_answer_in_under_1_mib() {
        let db = pog_spec::SpecDb::embedded();
        let h200 = db.by_model("H200 SXM").unwrap();
        let to = message("GPU-1").challenge.to;
        for precision in [Precision::Bf16, Precision::Fp16, Precision::Int8] {
            let plan = crate::params::plan_at(h200, db, precision).unwrap();
            let c = Challenge {
                precision,
                size: plan.size,
                batch: plan.batch,
                leaf_elements: crate::params::leaf_elements(precision),
                ..message("GPU-1").challenge
            };
            assert_eq!(c.leaf_len(0), crate::params::LEAF_BYTES);
            for root in 0..3 {
                let leaves = asked(&c, root, crate::soundness::DEFAULT_SAMPLES);
                let bytes = sealed_len_of(&c, &leaves);
                eprintln!(
                    "{precision:?} n = {} ×{}: {} leaves of {}, {} hashes, {bytes} bytes signed",
                    c.size,
                    c.batch,
                    leaves.len(),
                    c.leaf_count(),
                    multiproof::proof_len(c.leaf_count(), &leaves).unwrap(),
                );
                assert!(bytes <= 1 << 20, "{precision:?}: {bytes} bytes");
            }
            // Whatever is drawn: k leaves of a tree of depth d need at most k·(d − log2 k)
            // hashes (the union of their paths has at most min(2^l, k) nodes at depth l, and
            // the hashes are 2 + Σ_{0<l<d} u_l − k of them), 1024 leaves the most.
            let depth = 64 - u64::from((c.leaf_count() - 1).leading_zeros());
            let worst = 1024 * (depth as usize - 10);
            let bytes = zeros_sealed_len(1024 * crate::params::LEAF_BYTES, worst);
            eprintln!("{precision:?} at worst: {worst} hashes, {bytes} bytes signed");
            assert!(bytes <= 1 << 20, "{precision:?} at worst: {bytes} bytes");
        }
        let plan = crate::memory::plan(h200, crate::memory::WALK_SECONDS, None).unwrap();
        let challenge = plan.challenge([1; 32], to);
        let walk = Walk {
            walk_key: challenge.walk_key(&[2; 32]),
            challenge,
        };
        let leaves = asked(&walk, 0, crate::memory::SAMPLES);
        let bytes = sealed_len_of(&walk, &leaves);
        eprintln!(
            "memory: {} leaves of {}, {bytes} bytes signed",
            leaves.len(),
            walk.leaf_count()
        );
        assert!(bytes <= 1 << 20, "memory: {bytes} bytes");
    }

    #[test]
    fn honest_agents_are_never_rejected_in_100_runs() {
        for run_index in 0..100u8 {
            let mut m = message("GPU-1");
            m.challenge.nonce = [run_index; 32];
            m.challenge.size = 16;
            m.challenge.precision = crate::params::PROOF_PRECISIONS[usize::from(run_index) % 4];
            let mut s =
                ValidatorSession::new(m.clone(), agent(), 1_000.0, [run_index ^ 0x5a; 32], 64);
            let prover = CpuProver::compute(&m.challenge, Behaviour::Honest);
            let c = commitment(&prover);
            let req = s.on_commitment(&c, &agent(), 1_800, 2.0).unwrap();
            let o = openings(&prover, &req);
            assert!(
                s.on_openings(&o, &agent()).unwrap().accepted,
                "run {run_index}"
            );
        }
    }
}
