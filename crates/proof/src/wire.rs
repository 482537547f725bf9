//! The messages agents and validators exchange. Each travels signed in a `pog_signed`
//! envelope under its [`kind`] and is read through `pog_signed::decode`, which bounds the
//! size and checks the signature before a body is parsed.

use crate::challenge::Challenge;
use crate::prover::Opening;
use pog_merkle::multiproof::{self, MultiproofError};
use pog_merkle::Hash;
use pog_signed::{GpuUuid, PublicKey};
use serde::{Deserialize, Serialize};

/// The message kinds.
pub mod kind {
    /// Agent → validator: the agent's endpoint and the GPUs it claims ([`Register`](super::Register)).
    pub const REGISTER: &str = "register";
    /// Validator → agent: a GEMM challenge ([`ChallengeMessage`](super::ChallengeMessage)).
    pub const CHALLENGE: &str = "challenge";
    /// Agent → validator: the committed root ([`Commitment`](super::Commitment)).
    pub const COMMITMENT: &str = "commitment";
    /// Validator → agent: the leaves to open ([`OpenRequest`](super::OpenRequest)).
    pub const OPEN: &str = "open";
    /// Agent → validator: the opened leaves and their multiproof ([`Openings`](super::Openings)).
    pub const OPENINGS: &str = "openings";
    /// Validator → agent: a memory challenge's data set to build ([`MemoryChallengeMessage`](super::MemoryChallengeMessage)).
    pub const MEMORY_CHALLENGE: &str = "memory-challenge";
    /// Agent → validator: the data set is built ([`MemoryReady`](super::MemoryReady)).
    pub const MEMORY_READY: &str = "memory-ready";
    /// Validator → agent: the walk nonce, starting the timed walk ([`WalkMessage`](super::WalkMessage)).
    pub const MEMORY_WALK: &str = "memory-walk";
    /// Validator → agent: a CPU challenge's calibration lanes to run ([`CpuChallengeMessage`](super::CpuChallengeMessage)).
    pub const CPU_CHALLENGE: &str = "cpu-challenge";
    /// Agent → validator: the calibration lanes ran ([`MemoryReady`](super::MemoryReady)).
    pub const CPU_READY: &str = "cpu-ready";
    /// Validator → agent: the start nonce of the timed lanes ([`WalkMessage`](super::WalkMessage)).
    pub const CPU_START: &str = "cpu-start";
    /// Validator → agent: a proof of RAM's data set to build in the host's memory ([`MemoryChallengeMessage`](super::MemoryChallengeMessage)).
    pub const RAM_CHALLENGE: &str = "ram-challenge";
    /// Agent → validator: the RAM data set is built ([`MemoryReady`](super::MemoryReady)).
    pub const RAM_READY: &str = "ram-ready";
    /// Validator → agent: the walk nonce, starting the timed RAM walk ([`WalkMessage`](super::WalkMessage)).
    pub const RAM_WALK: &str = "ram-walk";
    /// Validator → agent: summarize a GPU's health over a window ([`HealthRequest`](super::HealthRequest)).
    pub const HEALTH_REQUEST: &str = "health-request";
    /// Agent → validator: its telemetry of that GPU over the window ([`HealthSummary`](super::HealthSummary)).
    pub const HEALTH_SUMMARY: &str = "health-summary";
}

/// One GPU an agent claims.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuClaim {
    /// The GPU's UUID, as NVML reports it.
    pub uuid: GpuUuid,
    /// Database model name, e.g. "H200 SXM".
    pub model: String,
    /// The GPU's PCI address, e.g. "00000000:00:06.0"; challenges bind it.
    pub bus_id: String,
    /// True for a GPU of the simulated test double (`pog agent --simulate`): validators refuse
    /// it unless told to accept simulated GPUs, and mark its records SIMULATED.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub simulated: bool,
}

/// Agent → validator: who I am, where I answer, which GPUs I claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Register {
    /// The agent's base URL for challenges.
    pub endpoint: String,
    /// The GPUs it claims and will answer challenges for.
    pub gpus: Vec<GpuClaim>,
    /// What it claims of its host (its cores are proven by the proof of CPU); none from an
    /// agent older than that proof.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostClaim>,
}

/// What an agent claims of the host its GPUs are in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostClaim {
    /// Hardware threads the host gives the proof of CPU: one lane each
    /// (1 to `pog_proof::cpu::MAX_LANES`).
    pub cores: u32,
    /// The EVM address the host's owner names to hold its GPUs' tokens (`pog agent
    /// --token-owner`): the validator writes it into each GPU's `gpu-state` record, and
    /// `contracts/GpuToken.sol` mints to it. None: no token can be minted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_owner: Option<pog_signed::EvmAddress>,
    /// The storage the host proves (`pog agent --storage-dir --storage-size`): none claimed,
    /// no proof of storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<crate::storage::StorageClaim>,
    /// The RAM the host proves, bytes (`pog agent --ram-claim`; `pog_proof::ram`'s
    /// `MIN_CLAIM_BYTES` to `MAX_CLAIM_BYTES`): none claimed, no proof of RAM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ram: Option<u64>,
}

/// Validator → agent: a challenge of any kind (`C`: the GEMM [`Challenge`], the memory
/// proof's [`crate::memory::MemoryChallenge`]). Where the kind's exchange is timed from the
/// challenge (GEMM), the agent computes and commits; where it sets up first (memory), the
/// agent gets ready (untimed, by `expires_at_ms`) and answers [`MemoryReady`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChallengeMessage<C = Challenge> {
    /// Unique per challenge, hex.
    pub id: String,
    /// What to compute (or set up for).
    pub challenge: C,
    /// When the validator issued it (its clock, Unix ms).
    pub issued_at_ms: u64,
    /// The validator's clock: the agent must not answer after this.
    pub expires_at_ms: u64,
}

/// Validator → agent: build this memory challenge's data set (the untimed phase), and say
/// when it is ready.
pub type MemoryChallengeMessage = ChallengeMessage<crate::memory::MemoryChallenge>;

/// Validator → agent: run this CPU challenge's calibration lanes (the set-up phase, timed by
/// the validator), and say when it is done.
pub type CpuChallengeMessage = ChallengeMessage<crate::cpu::CpuChallenge>;

/// Agent → validator: the set-up phase is done (a memory challenge's data set is built).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryReady {
    /// The challenge's id, as issued.
    pub challenge_id: String,
    /// The GPU that built it (UUID).
    pub gpu_uuid: GpuUuid,
    /// The agent's own build time (reported; the validator trusts only its clock).
    pub build_ms: f64,
}

/// Validator → agent: start the timed phase with this nonce and commit (a memory challenge:
/// walk the data set).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WalkMessage {
    /// The challenge's id, as issued.
    pub challenge_id: String,
    /// Fresh randomness sent only now: nothing about the walk is known while building.
    #[serde(with = "hex::serde")]
    pub walk_nonce: [u8; 32],
    /// When the validator sent the nonce (its clock, Unix ms): the timed phase starts here.
    pub issued_at_ms: u64,
    /// The validator's clock: the commitment must arrive by then.
    pub expires_at_ms: u64,
}

/// Agent → validator: the committed root.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Commitment {
    /// The challenge's id, as issued.
    pub challenge_id: String,
    /// The GPU that computed it (UUID).
    pub gpu_uuid: GpuUuid,
    /// Merkle root over all leaves, hex.
    pub root: String,
    /// Leaves under the root; the validator checks it against the challenge's shape.
    pub leaf_count: u64,
    /// The agent's own measurement (reported; the validator trusts only its clock).
    pub agent_ms: f64,
}

/// Validator → agent: open these leaves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenRequest {
    /// The challenge's id, as issued.
    pub challenge_id: String,
    /// The leaves to open, drawn after the commitment.
    pub leaves: Vec<u64>,
}

/// Why an agent refuses an [`OpenRequest`] (before opening anything).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadOpenRequest {
    /// No leaves asked: a multiproof proves at least one.
    #[error("no leaves asked")]
    Empty,
    /// More leaves than the agent opens at once.
    #[error("{asked} leaves asked, at most {max}")]
    TooMany {
        /// Leaves asked.
        asked: usize,
        /// The most the agent opens.
        max: usize,
    },
    /// The leaves are not strictly increasing (unsorted or duplicated), as a multiproof needs.
    #[error("the leaves asked must be strictly increasing; {0} follows a leaf not before it")]
    NotIncreasing(u64),
    /// A leaf past the end of the commitment.
    #[error("leaf {leaf} is out of range: the commitment has {leaf_count} leaves")]
    OutOfRange {
        /// The leaf asked for.
        leaf: u64,
        /// Leaves in the commitment.
        leaf_count: u64,
    },
}

impl OpenRequest {
    /// Refuses a request the agent does not open: no leaves, more than `max`, leaves not
    /// strictly increasing (what a validator's session asks always is), or past the
    /// commitment's `leaf_count`.
    pub fn check(&self, leaf_count: u64, max: usize) -> Result<(), BadOpenRequest> {
        if self.leaves.is_empty() {
            return Err(BadOpenRequest::Empty);
        }
        if self.leaves.len() > max {
            return Err(BadOpenRequest::TooMany {
                asked: self.leaves.len(),
                max,
            });
        }
        if let Some(pair) = self.leaves.windows(2).find(|pair| pair[0] >= pair[1]) {
            return Err(BadOpenRequest::NotIncreasing(pair[1]));
        }
        match self.leaves.iter().find(|&&leaf| leaf >= leaf_count) {
            Some(&leaf) => Err(BadOpenRequest::OutOfRange { leaf, leaf_count }),
            None => Ok(()),
        }
    }
}

/// Agent → validator: the leaves asked, compact. The opened leaves' bytes end to end, in the
/// order asked (strictly increasing; each as long as the challenge's leaf of that index), and
/// one multiproof of all of them under the committed root (`pog_merkle::multiproof`: each
/// subtree hash no opened leaf determines, once). The validator knows which leaves it asked
/// and how long each is, so neither indices nor lengths travel: both fields' lengths are fixed
/// by the request, and anything longer or shorter is refused before a byte is hashed
/// ([`Openings::split`]).
///
/// They travel as a frame ([`Openings::seal`], [`Openings::open`]), not as JSON: a small
/// signed [`OpeningsDigest`] naming the BLAKE3 of the bytes, then the bytes themselves. The
/// bytes are the bulk of an answer (0.7 MB for an H200 plan); as base64 in a signed JSON body
/// the validator unescaped, parsed, decoded and SHA-512-hashed 1.2 MB of text, 2.3 ms of its
/// 3.8 ms for the openings on the development VM, where BLAKE3 over the raw bytes takes 0.15 ms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Openings {
    /// The challenge's id, as issued.
    pub challenge_id: String,
    /// The leaves' bytes end to end.
    pub leaves: Vec<u8>,
    /// The multiproof's hashes end to end, 32 bytes each.
    pub proof: Vec<u8>,
}

/// The signed head of an openings frame: which challenge the bytes after it answer, how many
/// there are of each field, and their BLAKE3 digest, so that the one signature binds them all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpeningsDigest {
    /// The challenge's id, as issued.
    pub challenge_id: String,
    /// Bytes of leaves that follow the envelope.
    pub leaf_bytes: u64,
    /// Bytes of multiproof hashes that follow the leaves.
    pub proof_bytes: u64,
    /// BLAKE3 of the leaves' bytes then the hashes' (hex).
    pub blake3: String,
}

/// The first bytes of an openings frame (challenge version 6): a validator refuses anything
/// else as an answer from an agent that speaks another version.
pub const OPENINGS_FRAME_MAGIC: &[u8; 8] = b"pog-op6\n";

/// A field of [`Openings`] that carries bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpeningsField {
    /// [`Openings::leaves`].
    Leaves,
    /// [`Openings::proof`].
    Proof,
}

impl std::fmt::Display for OpeningsField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            OpeningsField::Leaves => "the leaves",
            OpeningsField::Proof => "the multiproof's hashes",
        })
    }
}

/// Why [`Openings`] cannot be read as the answer to a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpeningsError {
    /// A field has more bytes than the request fixes: more leaves or hashes than asked for.
    #[error("openings: {field} have {got} bytes, more than the {bytes} expected")]
    Oversized {
        /// The field.
        field: OpeningsField,
        /// Bytes expected.
        bytes: usize,
        /// Bytes the field has.
        got: usize,
    },
    /// A field has fewer bytes than the request fixes: fewer leaves or hashes than asked
    /// for, or a leaf cut short.
    #[error("openings: {field} have {got} bytes, fewer than the {bytes} expected")]
    Truncated {
        /// The field.
        field: OpeningsField,
        /// Bytes expected.
        bytes: usize,
        /// Bytes the field has.
        got: usize,
    },
    /// The answer is not an openings frame (an agent of another challenge version answers
    /// JSON, or junk).
    #[error("openings: not an openings frame of challenge version 6 (it starts with {start:?})")]
    NotAFrame {
        /// Its first bytes, at most 8, lossily as text.
        start: String,
    },
    /// The frame's signed head is not a signed [`OpeningsDigest`].
    #[error("openings: the frame's head: {0}")]
    Head(String),
    /// The frame holds another number of bytes than its signed head names.
    #[error("openings: the frame carries {got} bytes after its head, the head names {named}")]
    FrameLength {
        /// Bytes the head names (leaves and hashes).
        named: u64,
        /// Bytes the frame carries after the head.
        got: usize,
    },
    /// The bytes are not those the head's signature covers.
    #[error("openings: the leaves and hashes are not those signed (BLAKE3 differs)")]
    Digest,
}

/// Bytes an openings frame takes besides its leaves and hashes: the magic, the head's length
/// and the signed head (the envelope's fields, the signer's key, the signature, the challenge
/// id and the digest), with room to spare (about 500 bytes are used).
pub const OPENINGS_OVERHEAD: usize = 16 << 10;

impl Openings {
    /// The most bytes a frame of `leaf_bytes` bytes of leaves and `proof_hashes` hashes
    /// takes on the wire: the bytes and [`OPENINGS_OVERHEAD`]. A validator reads no more than
    /// this of an agent's answer.
    pub fn limit(leaf_bytes: usize, proof_hashes: usize) -> usize {
        leaf_bytes
            .saturating_add(proof_hashes.saturating_mul(32))
            .saturating_add(OPENINGS_OVERHEAD)
    }

    /// The agent's answer: `opened` are the leaves asked (strictly increasing) with their
    /// inclusion paths, from a prover of a commitment of `leaf_count` leaves; their paths
    /// become one multiproof.
    pub fn compact(
        challenge_id: String,
        leaf_count: u64,
        opened: &[Opening],
    ) -> Result<Openings, MultiproofError> {
        let paths: Vec<(u64, &[Hash])> = opened.iter().map(|o| (o.leaf, &o.proof[..])).collect();
        let proof = multiproof::from_paths(leaf_count, &paths)?;
        Ok(Openings {
            challenge_id,
            leaves: opened
                .iter()
                .flat_map(|o| o.bytes.iter().copied())
                .collect(),
            proof: proof.concat(),
        })
    }

    /// The frame that carries these openings, signed by `signer`: [`OPENINGS_FRAME_MAGIC`],
    /// the length of the signed head (u32, little-endian), the head (a `pog_signed` envelope
    /// of kind [`kind::OPENINGS`] holding an [`OpeningsDigest`]), the leaves, the hashes.
    pub fn seal(&self, signer: &pog_signed::Identity) -> Result<Vec<u8>, pog_signed::WireError> {
        let head = signer.seal(
            kind::OPENINGS,
            &OpeningsDigest {
                challenge_id: self.challenge_id.clone(),
                leaf_bytes: self.leaves.len() as u64,
                proof_bytes: self.proof.len() as u64,
                blake3: hex::encode(self.digest()),
            },
        )?;
        let head = serde_json::to_vec(&head).map_err(pog_signed::WireError::Encode)?;
        let head_len = u32::try_from(head.len()).expect("a head of a few hundred bytes");
        let mut frame = Vec::with_capacity(12 + head.len() + self.leaves.len() + self.proof.len());
        frame.extend_from_slice(OPENINGS_FRAME_MAGIC);
        frame.extend_from_slice(&head_len.to_le_bytes());
        frame.extend_from_slice(&head);
        frame.extend_from_slice(&self.leaves);
        frame.extend_from_slice(&self.proof);
        Ok(frame)
    }

    /// Reads a frame ([`Openings::seal`]): the magic, a head of at most
    /// [`OPENINGS_OVERHEAD`] bytes that is a signed [`OpeningsDigest`] (`pog_signed::decode`:
    /// signature first), exactly the bytes it names after it, and their BLAKE3 the one
    /// signed. Returns the openings and their signer; whether their lengths answer a request
    /// is [`Openings::split`]'s to say. At most the frame's own length is allocated (the
    /// bytes, copied out of it).
    pub fn open(frame: &[u8]) -> Result<(Openings, PublicKey), OpeningsError> {
        let not_a_frame = || OpeningsError::NotAFrame {
            start: String::from_utf8_lossy(&frame[..frame.len().min(8)]).into_owned(),
        };
        let rest = frame
            .strip_prefix(OPENINGS_FRAME_MAGIC)
            .ok_or_else(not_a_frame)?;
        let (head_len, rest) = rest.split_first_chunk::<4>().ok_or_else(not_a_frame)?;
        let head_len = u32::from_le_bytes(*head_len) as usize;
        if head_len > OPENINGS_OVERHEAD || head_len > rest.len() {
            return Err(OpeningsError::Head(format!(
                "{head_len} bytes named, {} there (at most {OPENINGS_OVERHEAD})",
                rest.len()
            )));
        }
        let (head, bytes) = rest.split_at(head_len);
        let (digest, signer): (OpeningsDigest, PublicKey) =
            pog_signed::decode(head, kind::OPENINGS)
                .map_err(|e| OpeningsError::Head(e.to_string()))?;
        let named = digest.leaf_bytes.saturating_add(digest.proof_bytes);
        if named != bytes.len() as u64 {
            return Err(OpeningsError::FrameLength {
                named,
                got: bytes.len(),
            });
        }
        let (leaves, proof) = bytes.split_at(digest.leaf_bytes as usize);
        let openings = Openings {
            challenge_id: digest.challenge_id,
            leaves: leaves.to_vec(),
            proof: proof.to_vec(),
        };
        if hex::encode(openings.digest()) != digest.blake3 {
            return Err(OpeningsError::Digest);
        }
        Ok((openings, signer))
    }

    /// BLAKE3 of the leaves' bytes then the hashes'.
    fn digest(&self) -> [u8; 32] {
        let mut hasher = blake3::Hasher::new();
        hasher.update(&self.leaves);
        hasher.update(&self.proof);
        *hasher.finalize().as_bytes()
    }

    /// The leaves' bytes and the multiproof's hashes, as the validator expects them:
    /// `leaf_bytes` bytes of leaves and `proof_hashes` hashes. A field of another length is
    /// refused before anything is hashed.
    pub fn split(
        &self,
        leaf_bytes: usize,
        proof_hashes: usize,
    ) -> Result<(&[u8], Vec<Hash>), OpeningsError> {
        let exact = |field, got: usize, bytes: usize| match got.cmp(&bytes) {
            std::cmp::Ordering::Greater => Err(OpeningsError::Oversized { field, bytes, got }),
            std::cmp::Ordering::Less => Err(OpeningsError::Truncated { field, bytes, got }),
            std::cmp::Ordering::Equal => Ok(()),
        };
        exact(OpeningsField::Leaves, self.leaves.len(), leaf_bytes)?;
        exact(
            OpeningsField::Proof,
            self.proof.len(),
            proof_hashes.saturating_mul(32),
        )?;
        let proof = self
            .proof
            .chunks_exact(32)
            .map(|h| <Hash>::try_from(h).expect("chunks of 32 bytes"))
            .collect();
        Ok((&self.leaves, proof))
    }
}

/// The longest window a health request may name: the agent keeps this much recent history
/// in memory.
pub const MAX_HEALTH_WINDOW_MS: u64 = 3_600_000;
/// The most signals a health summary may list.
pub const MAX_HEALTH_SIGNALS: usize = 32;
/// The most alerts a health summary may list.
pub const MAX_HEALTH_ALERTS: usize = 64;
/// The most XID codes a health summary may list.
pub const MAX_HEALTH_XIDS: usize = 64;

/// Validator → agent: summarize this GPU's health over `[from_ms, to_ms]` (the validator's
/// clock, Unix ms).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthRequest {
    /// Unique per request, hex; the summary answers it by this id.
    pub id: String,
    /// The GPU to summarize (UUID).
    pub gpu_uuid: GpuUuid,
    /// The agent asked (its public key): a request is worthless to any other agent.
    pub agent_key: PublicKey,
    /// Start of the window (the validator's clock, Unix ms).
    pub from_ms: u64,
    /// End of the window (the validator's clock, Unix ms).
    pub to_ms: u64,
    /// When the validator issued the request (its clock, Unix ms).
    pub issued_at_ms: u64,
}

/// Why a [`HealthRequest`]'s window is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadHealthWindow {
    /// The window ends where or before it starts.
    #[error("the window [{from_ms}, {to_ms}] ms is empty or reversed")]
    Empty {
        /// Its start (Unix ms).
        from_ms: u64,
        /// Its end (Unix ms).
        to_ms: u64,
    },
    /// The window is longer than [`MAX_HEALTH_WINDOW_MS`].
    #[error("the window spans {0} ms, at most {MAX_HEALTH_WINDOW_MS} ms")]
    TooLong(u64),
}

impl HealthRequest {
    /// Refuses an empty, reversed or too long window.
    pub fn check(&self) -> Result<(), BadHealthWindow> {
        if self.to_ms <= self.from_ms {
            return Err(BadHealthWindow::Empty {
                from_ms: self.from_ms,
                to_ms: self.to_ms,
            });
        }
        if self.to_ms - self.from_ms > MAX_HEALTH_WINDOW_MS {
            return Err(BadHealthWindow::TooLong(self.to_ms - self.from_ms));
        }
        Ok(())
    }
}

/// One signal over the window: its least, mean and largest value over `n` samples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignalSummary {
    /// Least value over the window.
    pub min: f64,
    /// Mean value over the window.
    pub mean: f64,
    /// Largest value over the window.
    pub max: f64,
    /// Samples taken in the window.
    pub n: u64,
}

/// One alert the agent's detectors raised in the window: when (Unix ms), what and how bad,
/// as identifiers only (no free text reaches a validator's public record).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthAlert {
    /// When it was raised (the agent's clock, Unix ms).
    pub t_ms: u64,
    /// What the detector saw, as an identifier.
    pub kind: String,
    /// How bad, as an identifier (e.g. `warn`).
    pub severity: String,
}

/// Agent → validator: its own telemetry of one GPU over the requested window (self-reported:
/// signed by the agent, which a modified agent can fill with anything).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthSummary {
    /// The id of the request it answers.
    pub request_id: String,
    /// The GPU summarized (UUID).
    pub gpu_uuid: GpuUuid,
    /// Start of the window, as requested (Unix ms).
    pub from_ms: u64,
    /// End of the window, as requested (Unix ms).
    pub to_ms: u64,
    /// The agent serves the simulated test double: no GPU was sampled.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub simulated: bool,
    /// Samples taken in the window.
    pub samples: u64,
    /// Per signal (trace-column names: `temp_gpu`, `power_w`, …), over the samples that read it.
    pub signals: std::collections::BTreeMap<String, SignalSummary>,
    /// The alerts raised in the window, oldest first (at most [`MAX_HEALTH_ALERTS`]).
    pub alerts: Vec<HealthAlert>,
    /// All alerts raised in the window, listed or not.
    pub alerts_total: u64,
    /// XID codes seen in the window, oldest first (at most [`MAX_HEALTH_XIDS`]).
    pub xids: Vec<u32>,
    /// All XIDs seen in the window, listed or not.
    pub xid_total: u64,
}

/// An identifier a summary may carry: 1-40 characters of `a-z`, `0-9` and `_`.
fn is_identifier(s: &str) -> bool {
    (1..=40).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// Why a [`HealthSummary`] does not answer its request, or is malformed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BadHealthSummary {
    /// It answers another request.
    #[error("answers request {answers}, not {asked}")]
    OtherRequest {
        /// The request id it answers.
        answers: String,
        /// The request id asked.
        asked: String,
    },
    /// It summarizes another GPU.
    #[error("summarizes GPU {summarized}, not {asked}")]
    OtherGpu {
        /// The GPU it summarizes.
        summarized: GpuUuid,
        /// The GPU asked about.
        asked: GpuUuid,
    },
    /// It covers another window: (from, to) covered and asked, Unix ms.
    #[error(
        "covers [{}, {}] ms, not the window asked [{}, {}] ms",
        .covers.0, .covers.1, .asked.0, .asked.1
    )]
    OtherWindow {
        /// The window it covers.
        covers: (u64, u64),
        /// The window asked.
        asked: (u64, u64),
    },
    /// It lists more signals, alerts or XIDs than a summary may.
    #[error(
        "lists {signals} signals, {alerts} alerts and {xids} XIDs (at most {MAX_HEALTH_SIGNALS}, \
         {MAX_HEALTH_ALERTS} and {MAX_HEALTH_XIDS})"
    )]
    TooLong {
        /// Signals listed.
        signals: usize,
        /// Alerts listed.
        alerts: usize,
        /// XIDs listed.
        xids: usize,
    },
    /// A signal's name is not an identifier.
    #[error("a signal name is not an identifier")]
    SignalName,
    /// A signal's figures are not a summary of the summary's samples.
    #[error(
        "signal {name}: min {} mean {} max {} over {} samples is not a summary of {samples} samples",
        .signal.min, .signal.mean, .signal.max, .signal.n
    )]
    Signal {
        /// The signal's name.
        name: String,
        /// Its figures.
        signal: SignalSummary,
        /// The samples the summary took.
        samples: u64,
    },
    /// An alert's kind or severity is not an identifier.
    #[error("an alert's kind or severity is not an identifier")]
    AlertName,
    /// An alert lies outside the window (when it was raised, Unix ms).
    #[error("an alert at {0} ms lies outside the window")]
    AlertOutside(u64),
    /// A total is smaller than what is listed.
    #[error("a total is smaller than what is listed")]
    Totals,
}

impl HealthSummary {
    /// Checks that the summary answers `request` and is well formed: same id, GPU and window,
    /// bounded lists, identifiers only, finite and ordered figures, totals at least what is
    /// listed, alerts inside the window.
    pub fn check(&self, request: &HealthRequest) -> Result<(), BadHealthSummary> {
        if self.request_id != request.id {
            return Err(BadHealthSummary::OtherRequest {
                answers: self.request_id.clone(),
                asked: request.id.clone(),
            });
        }
        if self.gpu_uuid != request.gpu_uuid {
            return Err(BadHealthSummary::OtherGpu {
                summarized: self.gpu_uuid.clone(),
                asked: request.gpu_uuid.clone(),
            });
        }
        if (self.from_ms, self.to_ms) != (request.from_ms, request.to_ms) {
            return Err(BadHealthSummary::OtherWindow {
                covers: (self.from_ms, self.to_ms),
                asked: (request.from_ms, request.to_ms),
            });
        }
        if self.signals.len() > MAX_HEALTH_SIGNALS
            || self.alerts.len() > MAX_HEALTH_ALERTS
            || self.xids.len() > MAX_HEALTH_XIDS
        {
            return Err(BadHealthSummary::TooLong {
                signals: self.signals.len(),
                alerts: self.alerts.len(),
                xids: self.xids.len(),
            });
        }
        for (name, s) in &self.signals {
            if !is_identifier(name) {
                return Err(BadHealthSummary::SignalName);
            }
            let finite = s.min.is_finite() && s.mean.is_finite() && s.max.is_finite();
            if !finite || s.min > s.mean || s.mean > s.max || s.n == 0 || s.n > self.samples {
                return Err(BadHealthSummary::Signal {
                    name: name.clone(),
                    signal: *s,
                    samples: self.samples,
                });
            }
        }
        for a in &self.alerts {
            if !is_identifier(&a.kind)
                || !matches!(a.severity.as_str(), "info" | "warning" | "critical")
            {
                return Err(BadHealthSummary::AlertName);
            }
            if a.t_ms < self.from_ms || a.t_ms > self.to_ms {
                return Err(BadHealthSummary::AlertOutside(a.t_ms));
            }
        }
        if self.alerts_total < self.alerts.len() as u64 || self.xid_total < self.xids.len() as u64 {
            return Err(BadHealthSummary::Totals);
        }
        Ok(())
    }
}

#[cfg(test)]
mod health_tests {
    use super::*;

    fn request() -> HealthRequest {
        HealthRequest {
            id: "ab".into(),
            gpu_uuid: "GPU-1".parse().unwrap(),
            agent_key: pog_signed::Identity::from_seed([0; 32]).public_key(),
            from_ms: 1_000,
            to_ms: 61_000,
            issued_at_ms: 61_000,
        }
    }

    fn summary() -> HealthSummary {
        HealthSummary {
            request_id: "ab".into(),
            gpu_uuid: "GPU-1".parse().unwrap(),
            from_ms: 1_000,
            to_ms: 61_000,
            simulated: false,
            samples: 60,
            signals: [(
                "temp_gpu".to_string(),
                SignalSummary {
                    min: 30.0,
                    mean: 40.0,
                    max: 70.0,
                    n: 60,
                },
            )]
            .into(),
            alerts: vec![HealthAlert {
                t_ms: 2_000,
                kind: "xid".into(),
                severity: "critical".into(),
            }],
            alerts_total: 1,
            xids: vec![79],
            xid_total: 1,
        }
    }

    #[test]
    fn a_summary_round_trips_signed_and_checks_against_its_request() {
        let id = pog_signed::Identity::from_seed([9; 32]);
        let bytes =
            serde_json::to_vec(&id.seal(kind::HEALTH_SUMMARY, &summary()).unwrap()).unwrap();
        let (back, signer): (HealthSummary, PublicKey) =
            pog_signed::decode(&bytes, kind::HEALTH_SUMMARY).unwrap();
        assert_eq!(back, summary());
        assert_eq!(signer, id.public_key());
        back.check(&request()).unwrap();
        request().check().unwrap();
    }

    #[test]
    fn bad_windows_and_bad_summaries_are_refused() {
        let mut r = request();
        r.to_ms = r.from_ms;
        assert!(r.check().unwrap_err().to_string().contains("empty"));
        r.to_ms = r.from_ms + MAX_HEALTH_WINDOW_MS + 1;
        assert!(r.check().unwrap_err().to_string().contains("at most"));
        type Change = fn(&mut HealthSummary);
        let cases: [(&str, Change); 8] = [
            ("answers request", |s| s.request_id = "cd".into()),
            ("summarizes GPU", |s| s.gpu_uuid = "GPU-2".parse().unwrap()),
            ("not the window", |s| s.to_ms += 1),
            ("not a summary", |s| {
                s.signals.get_mut("temp_gpu").unwrap().min = 50.0;
            }),
            ("not a summary", |s| {
                s.signals.get_mut("temp_gpu").unwrap().n = 61
            }),
            ("not an identifier", |s| {
                s.alerts[0].kind = "Buy now!".into()
            }),
            ("outside the window", |s| s.alerts[0].t_ms = 62_000),
            ("smaller than", |s| s.xid_total = 0),
        ];
        for (expected, change) in cases {
            let mut s = summary();
            change(&mut s);
            let err = s.check(&request()).unwrap_err().to_string();
            assert!(err.contains(expected), "{expected}: {err}");
        }
        let mut s = summary();
        s.signals.insert("Not A Name".into(), s.signals["temp_gpu"]);
        assert!(s
            .check(&request())
            .unwrap_err()
            .to_string()
            .contains("not an identifier"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pog_merkle::{Blake3, TreeHasher};
    use proptest::prelude::*;

    /// A tree of `size` leaves of 4 bytes each, with the openings of `wanted`.
    fn opened(size: u64, wanted: &[u64]) -> (pog_merkle::Tree, Vec<Opening>) {
        let bytes = |i: u64| (i as u32).to_le_bytes().to_vec();
        let tree =
            pog_merkle::Tree::build::<Blake3>((0..size).map(|i| Blake3::leaf(&bytes(i))).collect());
        let opened = wanted
            .iter()
            .map(|&leaf| Opening {
                leaf,
                bytes: bytes(leaf),
                proof: tree.inclusion_proof(leaf).unwrap(),
            })
            .collect();
        (tree, opened)
    }

    #[test]
    fn openings_round_trip_compact_and_verify() {
        let wanted = [1, 5, 6, 40];
        let (tree, opened) = opened(50, &wanted);
        let o = Openings::compact("c".into(), 50, &opened).unwrap();
        let hashes = multiproof::proof_len(50, &wanted).unwrap();
        let (leaves, proof) = o.split(16, hashes).unwrap();
        assert_eq!(
            leaves.to_vec(),
            opened
                .iter()
                .flat_map(|o| o.bytes.clone())
                .collect::<Vec<_>>()
        );
        let hashed: Vec<(u64, Hash)> = wanted
            .iter()
            .zip(leaves.chunks(4))
            .map(|(i, b)| (*i, Blake3::leaf(b)))
            .collect();
        assert_eq!(
            multiproof::verify::<Blake3>(50, &hashed, &proof, &tree.root()),
            Ok(())
        );
        // The paths' shared hashes travel once.
        assert!(proof.len() < opened.iter().map(|o| o.proof.len()).sum());
    }

    #[test]
    fn unsorted_duplicated_or_foreign_openings_are_not_compacted() {
        let (_, mut opened) = opened(50, &[3, 9]);
        opened.swap(0, 1);
        assert_eq!(
            Openings::compact("c".into(), 50, &opened),
            Err(MultiproofError::NotIncreasing(3))
        );
        opened[0] = opened[1].clone();
        assert_eq!(
            Openings::compact("c".into(), 50, &opened),
            Err(MultiproofError::NotIncreasing(3))
        );
        assert_eq!(
            Openings::compact("c".into(), 50, &[]),
            Err(MultiproofError::NoLeaves)
        );
        // A path from a tree of another size.
        assert!(matches!(
            Openings::compact("c".into(), 9, &opened[1..]),
            Err(MultiproofError::PathLength { leaf: 3, .. })
        ));
    }

    #[test]
    fn oversized_and_truncated_fields_are_typed_errors() {
        let (_, opened) = opened(50, &[1, 5]);
        let good = Openings::compact("c".into(), 50, &opened).unwrap();
        let hashes = multiproof::proof_len(50, &[1, 5]).unwrap();
        good.split(8, hashes).unwrap();
        // One leaf more or less than asked (4 bytes each).
        assert_eq!(
            good.split(12, hashes),
            Err(OpeningsError::Truncated {
                field: OpeningsField::Leaves,
                bytes: 12,
                got: 8
            })
        );
        assert_eq!(
            good.split(4, hashes),
            Err(OpeningsError::Oversized {
                field: OpeningsField::Leaves,
                bytes: 4,
                got: 8
            })
        );
        // A hash more than the multiproof of these leaves has.
        let err = good.split(8, hashes - 1).unwrap_err();
        assert!(matches!(
            err,
            OpeningsError::Oversized {
                field: OpeningsField::Proof,
                ..
            }
        ));
        assert!(
            err.to_string()
                .starts_with("openings: the multiproof's hashes have"),
            "{err}"
        );
    }

    /// What is not a frame, a frame whose head is not signed, one whose bytes are not the
    /// ones its head names or signs: each its own error, before anything is hashed but the
    /// bytes named.
    #[test]
    fn frames_not_sealed_as_signed_are_typed_errors() {
        let (_, opened) = opened(50, &[1, 5]);
        let good = Openings::compact("c".into(), 50, &opened).unwrap();
        let signer = pog_signed::Identity::from_seed([3; 32]);
        let frame = good.seal(&signer).unwrap();
        assert_eq!(
            Openings::open(&frame).unwrap(),
            (good.clone(), signer.public_key())
        );
        // An agent of version 5 answers a JSON envelope.
        let json = serde_json::to_vec(&signer.seal(kind::OPENINGS, &"c").unwrap()).unwrap();
        assert!(matches!(
            Openings::open(&json),
            Err(OpeningsError::NotAFrame { .. })
        ));
        assert!(matches!(
            Openings::open(&frame[..10]),
            Err(OpeningsError::NotAFrame { .. })
        ));
        // A head longer than the frame, or than any head.
        let mut huge = frame.clone();
        huge[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(Openings::open(&huge), Err(OpeningsError::Head(_))));
        // The head's signature broken: refused before its body is read.
        let head_len = u32::from_le_bytes(frame[8..12].try_into().unwrap()) as usize;
        let mut forged = frame.clone();
        let signature_at = 12 + head_len - 10;
        forged[signature_at] = if forged[signature_at] == b'0' {
            b'1'
        } else {
            b'0'
        };
        assert!(matches!(
            Openings::open(&forged),
            Err(OpeningsError::Head(_))
        ));
        // A byte more, or less, than the head names; a leaf byte changed.
        let mut longer = frame.clone();
        longer.push(0);
        assert_eq!(
            Openings::open(&longer),
            Err(OpeningsError::FrameLength {
                named: (good.leaves.len() + good.proof.len()) as u64,
                got: good.leaves.len() + good.proof.len() + 1
            })
        );
        assert!(matches!(
            Openings::open(&frame[..frame.len() - 1]),
            Err(OpeningsError::FrameLength { .. })
        ));
        let mut changed = frame.clone();
        changed[12 + head_len] ^= 1;
        assert_eq!(Openings::open(&changed), Err(OpeningsError::Digest));
    }

    #[test]
    fn open_requests_are_checked_before_anything_is_opened() {
        let request = |leaves: Vec<u64>| OpenRequest {
            challenge_id: "c".into(),
            leaves,
        };
        assert_eq!(request(vec![0, 3, 9]).check(10, 4), Ok(()));
        assert_eq!(request(vec![]).check(10, 4), Err(BadOpenRequest::Empty));
        assert_eq!(
            request(vec![0, 1, 2, 3, 4]).check(10, 4),
            Err(BadOpenRequest::TooMany { asked: 5, max: 4 })
        );
        assert_eq!(
            request(vec![3, 1]).check(10, 4),
            Err(BadOpenRequest::NotIncreasing(1))
        );
        assert_eq!(
            request(vec![1, 1]).check(10, 4),
            Err(BadOpenRequest::NotIncreasing(1))
        );
        assert_eq!(
            request(vec![1, 10]).check(10, 4),
            Err(BadOpenRequest::OutOfRange {
                leaf: 10,
                leaf_count: 10
            })
        );
    }

    proptest! {
        /// The decoder never panics, whatever arrives.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = pog_signed::decode::<ChallengeMessage>(&bytes, kind::CHALLENGE);
            let _ = Openings::open(&bytes);
        }

        /// Any fields, any expected lengths: a typed error or exactly the bytes expected.
        #[test]
        fn arbitrary_fields_split_to_the_expected_lengths_or_fail(
            leaves in proptest::collection::vec(any::<u8>(), 0..64),
            proof in proptest::collection::vec(any::<u8>(), 0..100),
            leaf_bytes in 0usize..48,
            hashes in 0usize..3,
        ) {
            let o = Openings { challenge_id: "c".into(), leaves, proof };
            if let Ok((l, p)) = o.split(leaf_bytes, hashes) {
                prop_assert_eq!((l.len(), p.len()), (leaf_bytes, hashes));
            }
        }

        /// A frame sealed opens to the same openings and signer; any byte of it changed, and
        /// it does not open or opens to those same openings from that same signer (hex in the
        /// head's envelope reads alike in either case); cut or lengthened, it does not open.
        #[test]
        fn a_frame_opens_as_sealed_and_not_once_changed(
            leaves in proptest::collection::vec(any::<u8>(), 0..300),
            hashes in 0usize..4,
            at in any::<prop::sample::Index>(),
            flip in 1u8..=255,
            cut in 1usize..40,
        ) {
            let signer = pog_signed::Identity::from_seed([9; 32]);
            let o = Openings { challenge_id: "c-1".into(), leaves, proof: vec![7; 32 * hashes] };
            let frame = o.seal(&signer).unwrap();
            prop_assert_eq!(Openings::open(&frame), Ok((o.clone(), signer.public_key())));
            let mut changed = frame.clone();
            changed[at.index(frame.len())] ^= flip;
            if let Ok(opened) = Openings::open(&changed) {
                prop_assert_eq!(opened, (o.clone(), signer.public_key()));
            }
            let cut_at = frame.len().saturating_sub(cut);
            prop_assert!(Openings::open(&frame[..cut_at]).is_err());
            let mut longer = frame.clone();
            longer.extend(std::iter::repeat_n(0u8, cut));
            prop_assert!(Openings::open(&longer).is_err());
        }
    }
}
