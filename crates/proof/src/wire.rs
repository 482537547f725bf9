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
    /// Validator → agent: a CPU challenge's calibration lane to run ([`CpuChallengeMessage`](super::CpuChallengeMessage)).
    pub const CPU_CHALLENGE: &str = "cpu-challenge";
    /// Agent → validator: the calibration lane ran ([`MemoryReady`](super::MemoryReady)).
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

/// Validator → agent: run this CPU challenge's calibration lane (the set-up phase, timed by
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
/// one multiproof of all of them under the committed root
/// (`pog_merkle::multiproof`: each subtree hash no opened leaf determines, once), each field
/// standard base64 with padding. The validator knows which leaves it asked and how long each
/// is, so neither indices nor lengths travel: the fields' lengths are fixed by the request,
/// and anything longer or shorter is refused before it is decoded ([`OpeningsError`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Openings {
    /// The challenge's id, as issued.
    pub challenge_id: String,
    /// The leaves' bytes end to end, base64.
    pub leaves: String,
    /// The multiproof's hashes end to end, 32 bytes each, base64.
    pub proof: String,
}

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
    /// A field is longer than the bytes expected take in base64: more leaves or hashes than
    /// asked for, or junk.
    #[error("openings: {field} have {got} characters of base64, more than the {expected} that the {bytes} bytes expected take")]
    Oversized {
        /// The field.
        field: OpeningsField,
        /// Bytes expected.
        bytes: usize,
        /// Characters those bytes take.
        expected: usize,
        /// Characters the field has.
        got: usize,
    },
    /// A field is shorter than the bytes expected take in base64: fewer leaves or hashes than
    /// asked for, or a leaf cut short.
    #[error("openings: {field} have {got} characters of base64, fewer than the {expected} that the {bytes} bytes expected take")]
    Truncated {
        /// The field.
        field: OpeningsField,
        /// Bytes expected.
        bytes: usize,
        /// Characters those bytes take.
        expected: usize,
        /// Characters the field has.
        got: usize,
    },
    /// A field of the right length is not canonical standard base64.
    #[error("openings: {field} are not canonical base64: {cause}")]
    Base64 {
        /// The field.
        field: OpeningsField,
        /// The decoder's complaint.
        cause: base64::DecodeError,
    },
}

/// The base64 the openings use: the standard alphabet, padded, canonical (no stray bits).
const BASE64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// `text` decoded as base64 of exactly `bytes` bytes: its length is checked first, so no more
/// than `bytes` is ever allocated.
fn decode_exact(field: OpeningsField, text: &str, bytes: usize) -> Result<Vec<u8>, OpeningsError> {
    use base64::Engine;
    let expected = base64::encoded_len(bytes, true).unwrap_or(usize::MAX);
    let got = text.len();
    if got > expected {
        return Err(OpeningsError::Oversized {
            field,
            bytes,
            expected,
            got,
        });
    }
    if got < expected {
        return Err(OpeningsError::Truncated {
            field,
            bytes,
            expected,
            got,
        });
    }
    let decoded = BASE64
        .decode(text)
        .map_err(|cause| OpeningsError::Base64 { field, cause })?;
    // A canonical padded encoding of this length decodes to exactly `bytes` bytes; checked
    // all the same rather than trusted.
    if decoded.len() != bytes {
        return Err(OpeningsError::Truncated {
            field,
            bytes,
            expected,
            got,
        });
    }
    Ok(decoded)
}

/// Bytes a signed [`Openings`] takes besides its two fields' base64: the envelope's fields,
/// the signer's key, the signature, the challenge id and the body's quoting, with room to
/// spare (about 400 bytes are used).
pub const OPENINGS_OVERHEAD: usize = 16 << 10;

impl Openings {
    /// The most bytes a signed answer of `leaf_bytes` bytes of leaves and `proof_hashes`
    /// hashes takes on the wire: both fields' base64 and [`OPENINGS_OVERHEAD`]. A validator
    /// reads no more than this of an agent's answer.
    pub fn limit(leaf_bytes: usize, proof_hashes: usize) -> usize {
        let field = |bytes: usize| base64::encoded_len(bytes, true).unwrap_or(usize::MAX);
        field(leaf_bytes)
            .saturating_add(field(proof_hashes.saturating_mul(32)))
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
        use base64::Engine;
        let paths: Vec<(u64, &[Hash])> = opened.iter().map(|o| (o.leaf, &o.proof[..])).collect();
        let proof = multiproof::from_paths(leaf_count, &paths)?;
        let leaves: Vec<u8> = opened
            .iter()
            .flat_map(|o| o.bytes.iter().copied())
            .collect();
        Ok(Openings {
            challenge_id,
            leaves: BASE64.encode(leaves),
            proof: BASE64.encode(proof.concat()),
        })
    }

    /// The leaves' bytes and the multiproof's hashes, as the validator expects them:
    /// `leaf_bytes` bytes of leaves and `proof_hashes` hashes. A field of another length, or
    /// not base64, is refused before anything is hashed.
    pub fn decode(
        &self,
        leaf_bytes: usize,
        proof_hashes: usize,
    ) -> Result<(Vec<u8>, Vec<Hash>), OpeningsError> {
        let leaves = decode_exact(OpeningsField::Leaves, &self.leaves, leaf_bytes)?;
        let proof_bytes = proof_hashes.saturating_mul(32);
        let proof = decode_exact(OpeningsField::Proof, &self.proof, proof_bytes)?
            .chunks_exact(32)
            .map(|h| <Hash>::try_from(h).expect("chunks of 32 bytes"))
            .collect();
        Ok((leaves, proof))
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
        let (leaves, proof) = o.decode(16, hashes).unwrap();
        assert_eq!(
            leaves,
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
    fn oversized_truncated_and_garbage_fields_are_typed_errors() {
        let (_, opened) = opened(50, &[1, 5]);
        let good = Openings::compact("c".into(), 50, &opened).unwrap();
        let hashes = multiproof::proof_len(50, &[1, 5]).unwrap();
        good.decode(8, hashes).unwrap();
        // One leaf more or less than asked (4 bytes each).
        assert_eq!(
            good.decode(12, hashes),
            Err(OpeningsError::Truncated {
                field: OpeningsField::Leaves,
                bytes: 12,
                expected: 16,
                got: 12
            })
        );
        assert_eq!(
            good.decode(4, hashes),
            Err(OpeningsError::Oversized {
                field: OpeningsField::Leaves,
                bytes: 4,
                expected: 8,
                got: 12
            })
        );
        // A hash more than the multiproof of these leaves has.
        let err = good.decode(8, hashes - 1).unwrap_err();
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
        // Garbage of the right length, and a non-canonical final character.
        let garbage = Openings {
            leaves: "!!!!!!!!!!!!".into(),
            ..good.clone()
        };
        assert!(matches!(
            garbage.decode(8, hashes),
            Err(OpeningsError::Base64 {
                field: OpeningsField::Leaves,
                ..
            })
        ));
        let mut stray = good.leaves.clone().into_bytes();
        // The character before "=" carries 2 bits past the last byte, which must be 0.
        stray[10] = b'B';
        let stray = Openings {
            leaves: String::from_utf8(stray).unwrap(),
            ..good
        };
        assert!(matches!(
            stray.decode(8, hashes),
            Err(OpeningsError::Base64 { .. })
        ));
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
            let _ = pog_signed::decode::<Openings>(&bytes, kind::OPENINGS);
        }

        /// Any fields, any expected lengths: a typed error or exactly the bytes expected.
        #[test]
        fn arbitrary_fields_decode_to_the_expected_lengths_or_fail(
            leaves in "[A-Za-z0-9+/=!]{0,64}",
            proof in "[A-Za-z0-9+/=]{0,100}",
            leaf_bytes in 0usize..48,
            hashes in 0usize..3,
        ) {
            let o = Openings { challenge_id: "c".into(), leaves, proof };
            if let Ok((l, p)) = o.decode(leaf_bytes, hashes) {
                prop_assert_eq!((l.len(), p.len()), (leaf_bytes, hashes));
            }
        }
    }
}
