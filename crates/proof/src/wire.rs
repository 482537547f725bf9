//! The messages agents and validators exchange, their signed envelope, and the decoder every
//! network input goes through.
//!
//! An envelope carries the message body as the exact JSON text that was signed, the signer's
//! Ed25519 public key and the signature, all hex where binary: verification needs no
//! canonical re-encoding. [`decode`] bounds the size, checks the version and the signature,
//! then parses the body: a malformed, oversized or forged message is an error, never a panic.

use crate::challenge::Challenge;
use crate::prover::Opening;
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// Version of the envelope and of every message in it. 2: binary fields in bodies are hex
/// strings (a challenge's nonce was a list of 32 numbers in 1).
pub const WIRE_VERSION: u32 = 2;

/// The largest message accepted: 1024 openings of 4 KiB leaves with their proofs, hex-encoded,
/// fit with room to spare.
pub const MAX_MESSAGE_BYTES: usize = 32 << 20;

/// An Ed25519 identity (agent or validator), kept in the data dir.
pub struct Identity {
    key: SigningKey,
}

/// Shows the public key only: the secret never reaches a log.
impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Identity({})", self.public_hex())
    }
}

impl Identity {
    /// A fresh identity from the operating system's randomness.
    pub fn generate() -> Result<Identity, WireError> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(WireError::Randomness)?;
        Ok(Identity::from_seed(seed))
    }

    /// The identity with this 32-byte secret seed.
    pub fn from_seed(seed: [u8; 32]) -> Identity {
        Identity {
            key: SigningKey::from_bytes(&seed),
        }
    }

    /// The secret seed, for storing.
    pub fn seed(&self) -> [u8; 32] {
        self.key.to_bytes()
    }

    /// The public key, hex: how others name this identity.
    pub fn public_hex(&self) -> String {
        hex::encode(self.key.verifying_key().to_bytes())
    }

    /// Signs a message into an envelope.
    pub fn seal<T: Serialize>(&self, kind: &str, message: &T) -> Result<Envelope, WireError> {
        let body = serde_json::to_string(message).map_err(WireError::Encode)?;
        Ok(self.seal_body(kind, body))
    }

    /// Signs `body`, taken as the message's JSON text without any check, into an envelope. For
    /// [`Identity::seal`], and for the fuzzing harnesses (`pog-fuzzing`), which need arbitrary
    /// bodies behind a valid signature to reach the body parsers.
    pub fn seal_body(&self, kind: &str, body: String) -> Envelope {
        let signature = self.key.sign(signed_bytes(kind, &body).as_slice());
        Envelope {
            version: WIRE_VERSION,
            kind: kind.to_string(),
            body,
            signer: self.public_hex(),
            signature: hex::encode(signature.to_bytes()),
        }
    }
}

/// What the signature covers: the kind and the body, so a signed message of one kind cannot be
/// replayed as another.
fn signed_bytes(kind: &str, body: &str) -> Vec<u8> {
    let mut bytes = format!("pog-wire v{WIRE_VERSION}\n{kind}\n").into_bytes();
    bytes.extend_from_slice(body.as_bytes());
    bytes
}

/// A signed message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope {
    /// [`WIRE_VERSION`]; an envelope of another version is refused before anything else is read.
    pub version: u32,
    /// The message type, e.g. "challenge".
    pub kind: String,
    /// The message, as the JSON text that was signed.
    pub body: String,
    /// Ed25519 public key of the signer, hex.
    pub signer: String,
    /// Ed25519 signature over "pog-wire v{version}\n" ‖ kind ‖ "\n" ‖ body, hex.
    pub signature: String,
}

/// Why a message was refused.
///
/// Each variant keeps the error that caused it and prints it in its message (it is not also
/// the [`std::error::Error::source`], which would print it twice in a chain): the message
/// alone, as a log line or an HTTP error body, says what failed.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The message is over [`MAX_MESSAGE_BYTES`]; refused before parsing, with its size in bytes.
    #[error("message of {0} bytes exceeds the {MAX_MESSAGE_BYTES}-byte limit")]
    TooLarge(usize),
    /// The bytes are not a JSON envelope.
    #[error("malformed message envelope: {0}")]
    Envelope(serde_json::Error),
    /// The envelope is of another wire version than this pog's [`WIRE_VERSION`].
    #[error(
        "unsupported wire version {0}: this pog speaks version {WIRE_VERSION}; run the same pog \
         release on agents and validators"
    )]
    Version(u32),
    /// The envelope is of another kind than the one expected here.
    #[error("expected a {expected} message, got {got}")]
    Kind {
        /// The kind expected.
        expected: String,
        /// The kind the envelope names.
        got: String,
    },
    /// The envelope's signer or signature is refused: a forgery, or not from a pog identity.
    #[error("signature refused: {0}")]
    Signature(BadSignature),
    /// The body, signed correctly, is not a message of its kind.
    #[error("the {kind} message's body is malformed: {cause}")]
    Body {
        /// The kind the body was read as.
        kind: String,
        /// Why it could not be read.
        cause: serde_json::Error,
    },
    /// A message or envelope could not be written as JSON.
    #[error("cannot encode the message as JSON: {0}")]
    Encode(serde_json::Error),
    /// The operating system gave no randomness to make a key from.
    #[error("no randomness from the operating system for a new key: {0}")]
    Randomness(getrandom::Error),
}

/// Why an envelope's signature was refused ([`WireError::Signature`]).
#[derive(Debug, thiserror::Error)]
pub enum BadSignature {
    /// The signer is not 64 hex digits.
    #[error("the signer is not a 32-byte public key in hex: {0}")]
    SignerHex(hex::FromHexError),
    /// The signer's 32 bytes are no point of the curve.
    #[error("the signer is not an Ed25519 public key: {0}")]
    SignerKey(ed25519_dalek::SignatureError),
    /// The signer is a small-order point (the identity among them): signatures "verify" under
    /// it for any message without any secret, so it names no one.
    #[error(
        "the signer's public key is a weak (small-order) Ed25519 point, under which anyone can \
         forge signatures; sign with a key pog generated"
    )]
    WeakKey,
    /// The signature is not 128 hex digits.
    #[error("the signature is not 64 bytes in hex: {0}")]
    SignatureHex(hex::FromHexError),
    /// The signature is not the signer's over this kind and body (strict RFC 8032
    /// verification: small-order R refused too).
    #[error("the signature does not verify for this signer, kind and body: {0}")]
    DoesNotVerify(ed25519_dalek::SignatureError),
}

/// Decodes raw bytes into a verified message of `kind`: size, envelope, version, kind,
/// signature (weak keys refused, strict verification), then the body. Returns the message and
/// its signer's public key (hex).
pub fn decode<T: DeserializeOwned>(bytes: &[u8], kind: &str) -> Result<(T, String), WireError> {
    if bytes.len() > MAX_MESSAGE_BYTES {
        return Err(WireError::TooLarge(bytes.len()));
    }
    let envelope: Envelope = serde_json::from_slice(bytes).map_err(WireError::Envelope)?;
    if envelope.version != WIRE_VERSION {
        return Err(WireError::Version(envelope.version));
    }
    if envelope.kind != kind {
        return Err(WireError::Kind {
            expected: kind.into(),
            got: envelope.kind,
        });
    }
    let key = verify(&envelope).map_err(WireError::Signature)?;
    let message = serde_json::from_str(&envelope.body).map_err(|cause| WireError::Body {
        kind: envelope.kind,
        cause,
    })?;
    // The signer in its one canonical spelling (lowercase hex), whatever case the envelope
    // used: one key is one identity.
    Ok((message, hex::encode(key.as_bytes())))
}

/// Parses a public key as the wire spells it (64 hex digits), refusing weak keys
/// (small-order points, with which anyone can forge signatures).
pub fn parse_public_key(text: &str) -> Result<VerifyingKey, BadSignature> {
    let mut key_bytes = [0u8; 32];
    hex::decode_to_slice(text, &mut key_bytes).map_err(BadSignature::SignerHex)?;
    let key = VerifyingKey::from_bytes(&key_bytes).map_err(BadSignature::SignerKey)?;
    if key.is_weak() {
        return Err(BadSignature::WeakKey);
    }
    Ok(key)
}

/// Checks an envelope's signature: a signer that is a strong Ed25519 key, and a signature that
/// verifies strictly over its kind and body. Returns the signer's key.
fn verify(envelope: &Envelope) -> Result<VerifyingKey, BadSignature> {
    let key = parse_public_key(&envelope.signer)?;
    let mut signature = [0u8; 64];
    hex::decode_to_slice(&envelope.signature, &mut signature)
        .map_err(BadSignature::SignatureHex)?;
    key.verify_strict(
        &signed_bytes(&envelope.kind, &envelope.body),
        &Signature::from_bytes(&signature),
    )
    .map_err(BadSignature::DoesNotVerify)?;
    Ok(key)
}

/// The message kinds.
pub mod kind {
    /// Agent → validator: the agent's endpoint and the GPUs it claims ([`Register`]).
    pub const REGISTER: &str = "register";
    /// Validator → agent: a GEMM challenge ([`ChallengeMessage`]).
    pub const CHALLENGE: &str = "challenge";
    /// Agent → validator: the committed root ([`Commitment`]).
    pub const COMMITMENT: &str = "commitment";
    /// Validator → agent: the leaves to open ([`OpenRequest`]).
    pub const OPEN: &str = "open";
    /// Agent → validator: the opened leaves with their proofs ([`Openings`]).
    pub const OPENINGS: &str = "openings";
    /// Validator → agent: a memory challenge's data set to build ([`MemoryChallengeMessage`]).
    pub const MEMORY_CHALLENGE: &str = "memory-challenge";
    /// Agent → validator: the data set is built ([`MemoryReady`]).
    pub const MEMORY_READY: &str = "memory-ready";
    /// Validator → agent: the walk nonce, starting the timed walk ([`WalkMessage`]).
    pub const MEMORY_WALK: &str = "memory-walk";
    /// Validator → agent: summarize a GPU's health over a window ([`HealthRequest`]).
    pub const HEALTH_REQUEST: &str = "health-request";
    /// Agent → validator: its telemetry of that GPU over the window ([`HealthSummary`]).
    pub const HEALTH_SUMMARY: &str = "health-summary";
}

/// One GPU an agent claims.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuClaim {
    /// The GPU's UUID, as NVML reports it.
    pub uuid: String,
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
}

/// Validator → agent: compute this.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChallengeMessage {
    /// Unique per challenge, hex.
    pub id: String,
    /// What to compute.
    pub challenge: Challenge,
    /// The validator's clock: the agent must not answer after `expires_at_ms`.
    pub issued_at_ms: u64,
    /// When the validator issued it (its clock, Unix ms).
    pub expires_at_ms: u64,
}

/// Validator → agent: build this memory challenge's data set (the untimed phase), and say
/// when it is ready.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryChallengeMessage {
    /// Unique per challenge, hex.
    pub id: String,
    /// The challenge's id, as issued.
    pub challenge: crate::memory::MemoryChallenge,
    /// What to build and, later, walk.
    pub issued_at_ms: u64,
    /// The validator's clock: the data set must be ready by then.
    pub expires_at_ms: u64,
}

/// Agent → validator: the data set is built.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryReady {
    /// The challenge's id, as issued.
    pub challenge_id: String,
    /// The GPU that built it (UUID).
    pub gpu_uuid: String,
    /// The agent's own build time (reported; the validator trusts only its clock).
    pub build_ms: f64,
}

/// Validator → agent: walk the data set with this nonce and commit (the timed phase).
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
    pub gpu_uuid: String,
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

/// One opened leaf on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireOpening {
    /// The leaf's index in the commitment.
    pub leaf: u64,
    /// Leaf bytes, hex.
    pub bytes: String,
    /// Inclusion proof, bottom-up, hex hashes.
    pub proof: Vec<String>,
}

impl From<&Opening> for WireOpening {
    fn from(o: &Opening) -> Self {
        WireOpening {
            leaf: o.leaf,
            bytes: hex::encode(&o.bytes),
            proof: o.proof.iter().map(hex::encode).collect(),
        }
    }
}

/// Why an opened leaf on the wire could not be read.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum OpeningError {
    /// The leaf's bytes are not hex.
    #[error("leaf {leaf}: its bytes are not hex: {cause}")]
    Bytes {
        /// The leaf opened.
        leaf: u64,
        /// Why its bytes are not hex.
        cause: hex::FromHexError,
    },
    /// A hash of the inclusion proof is not 32 bytes of hex.
    #[error("leaf {leaf}: proof hash {index} is not 32 bytes in hex: {cause}")]
    ProofHash {
        /// The leaf opened.
        leaf: u64,
        /// Which hash of the proof, from the bottom.
        index: usize,
        /// Why it is not a hash.
        cause: hex::FromHexError,
    },
}

impl TryFrom<&WireOpening> for Opening {
    type Error = OpeningError;
    fn try_from(w: &WireOpening) -> Result<Self, OpeningError> {
        let mut bytes = vec![0u8; w.bytes.len() / 2];
        decode_hex(&w.bytes, &mut bytes).map_err(|cause| OpeningError::Bytes {
            leaf: w.leaf,
            cause,
        })?;
        let proof = w
            .proof
            .iter()
            .enumerate()
            .map(|(index, h)| {
                let mut hash = [0u8; 32];
                decode_hex(h, &mut hash).map_err(|cause| OpeningError::ProofHash {
                    leaf: w.leaf,
                    index,
                    cause,
                })?;
                Ok(hash)
            })
            .collect::<Result<_, _>>()?;
        Ok(Opening {
            leaf: w.leaf,
            bytes,
            proof,
        })
    }
}

/// Each ASCII character's value as a hex digit, 0xff for none.
const HEX_DIGITS: [u8; 256] = {
    let mut table = [0xff; 256];
    let mut i = 0;
    while i < 10 {
        table[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        table[b'a' as usize + i] = 10 + i as u8;
        table[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    table
};

/// `hex::decode_to_slice` with a fast path for valid input. A challenge's openings are 8 MiB
/// of hex digits (1024 leaves of 4 KiB and their proofs): with the `hex` crate's loop (a
/// branch and an error position per digit) decoding, hashing and proving them took 50 ms of
/// the validator's 100 ms budget, with this 13 ms (examples/verify_cost.rs, development VM).
/// Here each digit is a table lookup, and a bad digit anywhere sends the input back to `hex`
/// for its precise error.
fn decode_hex(hex: &str, out: &mut [u8]) -> Result<(), hex::FromHexError> {
    let digits = hex.as_bytes();
    if digits.len() != 2 * out.len() {
        return hex::decode_to_slice(digits, out);
    }
    let mut invalid = 0u8;
    for (byte, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
        let (high, low) = (HEX_DIGITS[pair[0] as usize], HEX_DIGITS[pair[1] as usize]);
        invalid |= high | low;
        *byte = high << 4 | low;
    }
    if invalid > 0xf {
        return hex::decode_to_slice(digits, out);
    }
    Ok(())
}

/// Agent → validator: the requested leaves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Openings {
    /// The challenge's id, as issued.
    pub challenge_id: String,
    /// The requested leaves, in the order asked.
    pub openings: Vec<WireOpening>,
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
    pub gpu_uuid: String,
    /// The agent asked (its public key): a request is worthless to any other agent.
    pub agent_key: String,
    /// Start of the window (the validator's clock, Unix ms).
    pub from_ms: u64,
    /// End of the window (the validator's clock, Unix ms).
    pub to_ms: u64,
    /// When the validator issued the request (its clock, Unix ms).
    pub issued_at_ms: u64,
}

impl HealthRequest {
    /// Refuses an empty, reversed or too long window.
    pub fn check(&self) -> Result<(), String> {
        if self.to_ms <= self.from_ms {
            return Err(format!(
                "the window [{}, {}] ms is empty or reversed",
                self.from_ms, self.to_ms
            ));
        }
        if self.to_ms - self.from_ms > MAX_HEALTH_WINDOW_MS {
            return Err(format!(
                "the window spans {} ms, at most {MAX_HEALTH_WINDOW_MS} ms",
                self.to_ms - self.from_ms
            ));
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
    pub gpu_uuid: String,
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

impl HealthSummary {
    /// Checks that the summary answers `request` and is well formed: same id, GPU and window,
    /// bounded lists, identifiers only, finite and ordered figures, totals at least what is
    /// listed, alerts inside the window.
    pub fn check(&self, request: &HealthRequest) -> Result<(), String> {
        if self.request_id != request.id {
            return Err(format!(
                "answers request {}, not {}",
                self.request_id, request.id
            ));
        }
        if self.gpu_uuid != request.gpu_uuid {
            return Err(format!(
                "summarizes GPU {}, not {}",
                self.gpu_uuid, request.gpu_uuid
            ));
        }
        if (self.from_ms, self.to_ms) != (request.from_ms, request.to_ms) {
            return Err(format!(
                "covers [{}, {}] ms, not the window asked [{}, {}] ms",
                self.from_ms, self.to_ms, request.from_ms, request.to_ms
            ));
        }
        if self.signals.len() > MAX_HEALTH_SIGNALS
            || self.alerts.len() > MAX_HEALTH_ALERTS
            || self.xids.len() > MAX_HEALTH_XIDS
        {
            return Err(format!(
                "lists {} signals, {} alerts and {} XIDs (at most {MAX_HEALTH_SIGNALS}, \
                 {MAX_HEALTH_ALERTS} and {MAX_HEALTH_XIDS})",
                self.signals.len(),
                self.alerts.len(),
                self.xids.len()
            ));
        }
        for (name, s) in &self.signals {
            if !is_identifier(name) {
                return Err("a signal name is not an identifier".into());
            }
            let finite = s.min.is_finite() && s.mean.is_finite() && s.max.is_finite();
            if !finite || s.min > s.mean || s.mean > s.max || s.n == 0 || s.n > self.samples {
                return Err(format!(
                    "signal {name}: min {} mean {} max {} over {} samples is not a summary of {} samples",
                    s.min, s.mean, s.max, s.n, self.samples
                ));
            }
        }
        for a in &self.alerts {
            if !is_identifier(&a.kind)
                || !matches!(a.severity.as_str(), "info" | "warning" | "critical")
            {
                return Err("an alert's kind or severity is not an identifier".into());
            }
            if a.t_ms < self.from_ms || a.t_ms > self.to_ms {
                return Err(format!("an alert at {} ms lies outside the window", a.t_ms));
            }
        }
        if self.alerts_total < self.alerts.len() as u64 || self.xid_total < self.xids.len() as u64 {
            return Err("a total is smaller than what is listed".into());
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
            gpu_uuid: "GPU-1".into(),
            agent_key: "00".into(),
            from_ms: 1_000,
            to_ms: 61_000,
            issued_at_ms: 61_000,
        }
    }

    fn summary() -> HealthSummary {
        HealthSummary {
            request_id: "ab".into(),
            gpu_uuid: "GPU-1".into(),
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
        let id = Identity::from_seed([9; 32]);
        let bytes =
            serde_json::to_vec(&id.seal(kind::HEALTH_SUMMARY, &summary()).unwrap()).unwrap();
        let (back, signer): (HealthSummary, String) = decode(&bytes, kind::HEALTH_SUMMARY).unwrap();
        assert_eq!(back, summary());
        assert_eq!(signer, id.public_hex());
        back.check(&request()).unwrap();
        request().check().unwrap();
    }

    #[test]
    fn bad_windows_and_bad_summaries_are_refused() {
        let mut r = request();
        r.to_ms = r.from_ms;
        assert!(r.check().unwrap_err().contains("empty"));
        r.to_ms = r.from_ms + MAX_HEALTH_WINDOW_MS + 1;
        assert!(r.check().unwrap_err().contains("at most"));
        type Change = fn(&mut HealthSummary);
        let cases: [(&str, Change); 8] = [
            ("answers request", |s| s.request_id = "cd".into()),
            ("summarizes GPU", |s| s.gpu_uuid = "GPU-2".into()),
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
            let err = s.check(&request()).unwrap_err();
            assert!(err.contains(expected), "{expected}: {err}");
        }
        let mut s = summary();
        s.signals.insert("Not A Name".into(), s.signals["temp_gpu"]);
        assert!(s
            .check(&request())
            .unwrap_err()
            .contains("not an identifier"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> OpenRequest {
        OpenRequest {
            challenge_id: "ab".into(),
            leaves: vec![1, 2, 3],
        }
    }

    #[test]
    fn sealed_messages_decode_and_name_their_signer() {
        let id = Identity::from_seed([7; 32]);
        let bytes = serde_json::to_vec(&id.seal(kind::OPEN, &sample()).unwrap()).unwrap();
        let (msg, signer): (OpenRequest, String) = decode(&bytes, kind::OPEN).unwrap();
        assert_eq!(msg, sample());
        assert_eq!(signer, id.public_hex());
        assert_eq!(Identity::from_seed(id.seed()).public_hex(), id.public_hex());
    }

    #[test]
    fn forged_altered_and_misdirected_messages_are_refused() {
        let id = Identity::from_seed([7; 32]);
        let env = id.seal(kind::OPEN, &sample()).unwrap();
        let mut altered = env.clone();
        altered.body = altered.body.replace("[1,2,3]", "[1,2,4]");
        assert!(matches!(
            decode::<OpenRequest>(&serde_json::to_vec(&altered).unwrap(), kind::OPEN),
            Err(WireError::Signature(_))
        ));
        let mut other_signer = env.clone();
        other_signer.signer = Identity::from_seed([8; 32]).public_hex();
        assert!(matches!(
            decode::<OpenRequest>(&serde_json::to_vec(&other_signer).unwrap(), kind::OPEN),
            Err(WireError::Signature(BadSignature::DoesNotVerify(_)))
        ));
        let mut short_signer = env.clone();
        short_signer.signer.pop();
        assert!(matches!(
            decode::<OpenRequest>(&serde_json::to_vec(&short_signer).unwrap(), kind::OPEN),
            Err(WireError::Signature(BadSignature::SignerHex(_)))
        ));
        let mut missing = env.clone();
        missing.signature = String::new();
        assert!(matches!(
            decode::<OpenRequest>(&serde_json::to_vec(&missing).unwrap(), kind::OPEN),
            Err(WireError::Signature(BadSignature::SignatureHex(_)))
        ));
        // Signed as one kind, presented as another.
        let mut relabelled = env.clone();
        relabelled.kind = kind::CHALLENGE.into();
        assert!(matches!(
            decode::<OpenRequest>(&serde_json::to_vec(&relabelled).unwrap(), kind::CHALLENGE),
            Err(WireError::Signature(_))
        ));
        assert!(matches!(
            decode::<OpenRequest>(&serde_json::to_vec(&env).unwrap(), kind::COMMITMENT),
            Err(WireError::Kind { .. })
        ));
        let mut future = env;
        future.version = WIRE_VERSION + 1;
        assert!(matches!(
            decode::<OpenRequest>(&serde_json::to_vec(&future).unwrap(), kind::OPEN),
            Err(WireError::Version(v)) if v == WIRE_VERSION + 1
        ));
        assert!(matches!(
            decode::<OpenRequest>(&vec![b' '; MAX_MESSAGE_BYTES + 1], kind::OPEN),
            Err(WireError::TooLarge(_))
        ));
        assert!(matches!(
            decode::<OpenRequest>(b"{", kind::OPEN),
            Err(WireError::Envelope(_))
        ));
        // Signed correctly, but not an open request.
        let other = id.seal(
            kind::OPEN,
            &Register {
                endpoint: "http://agent".into(),
                gpus: vec![],
            },
        );
        let refused =
            decode::<OpenRequest>(&serde_json::to_vec(&other.unwrap()).unwrap(), kind::OPEN)
                .unwrap_err();
        assert!(matches!(refused, WireError::Body { ref kind, .. } if kind == kind::OPEN));
        assert!(refused
            .to_string()
            .starts_with("the open message's body is malformed: "));
    }

    /// The identity point's encoding: y = 1, x = 0.
    fn identity_point() -> [u8; 32] {
        let mut y = [0u8; 32];
        y[0] = 1;
        y
    }

    /// An envelope of `sample()` with this signer and signature bytes.
    fn envelope_with(signer: [u8; 32], signature: [u8; 64]) -> Envelope {
        Envelope {
            version: WIRE_VERSION,
            kind: kind::OPEN.into(),
            body: serde_json::to_string(&sample()).unwrap(),
            signer: hex::encode(signer),
            signature: hex::encode(signature),
        }
    }

    #[test]
    fn weak_keys_are_refused_though_plain_verification_takes_their_forgeries() {
        use ed25519_dalek::Verifier;
        // Public key: the identity point. Signature: R = the identity, s = 0. Then
        // [s]B − [k]A = identity = R for every message: no secret needed.
        let mut forged = [0u8; 64];
        forged[..32].copy_from_slice(&identity_point());
        let env = envelope_with(identity_point(), forged);
        let key = VerifyingKey::from_bytes(&identity_point()).unwrap();
        let signature = Signature::from_bytes(&forged);
        assert!(key
            .verify(&signed_bytes(&env.kind, &env.body), &signature)
            .is_ok());
        assert!(key.verify(b"anything at all", &signature).is_ok());
        let refused =
            decode::<OpenRequest>(&serde_json::to_vec(&env).unwrap(), kind::OPEN).unwrap_err();
        assert!(
            matches!(refused, WireError::Signature(BadSignature::WeakKey)),
            "{refused}"
        );
        assert!(
            refused.to_string().contains("weak (small-order)"),
            "{refused}"
        );
        // Another small-order key: (0, −1), of order 2 (y = p − 1, little-endian).
        let mut order_two = [0xff; 32];
        order_two[0] = 0xec;
        order_two[31] = 0x7f;
        assert!(matches!(
            decode::<OpenRequest>(
                &serde_json::to_vec(&envelope_with(order_two, [0; 64])).unwrap(),
                kind::OPEN
            ),
            Err(WireError::Signature(BadSignature::WeakKey))
        ));
    }

    #[test]
    fn small_order_r_is_refused_for_a_strong_key() {
        use curve25519_dalek::Scalar;
        use ed25519_dalek::Verifier;
        use sha2::{Digest, Sha512};
        // A real key's holder can make R the identity with s = k·a (k = H(R ‖ A ‖ M)): plain
        // verification takes it, strict verification does not.
        let id = Identity::from_seed([7; 32]);
        let public = id.key.verifying_key().to_bytes();
        let body = serde_json::to_string(&sample()).unwrap();
        let message = signed_bytes(kind::OPEN, &body);
        let k = Scalar::from_bytes_mod_order_wide(
            &Sha512::new()
                .chain_update(identity_point())
                .chain_update(public)
                .chain_update(&message)
                .finalize()
                .into(),
        );
        let mut signature = [0u8; 64];
        signature[..32].copy_from_slice(&identity_point());
        signature[32..].copy_from_slice((k * id.key.to_scalar()).as_bytes());
        let key = id.key.verifying_key();
        assert!(key
            .verify(&message, &Signature::from_bytes(&signature))
            .is_ok());
        assert!(matches!(
            decode::<OpenRequest>(
                &serde_json::to_vec(&envelope_with(public, signature)).unwrap(),
                kind::OPEN
            ),
            Err(WireError::Signature(BadSignature::DoesNotVerify(_)))
        ));
    }

    #[test]
    fn openings_round_trip_through_hex() {
        let o = Opening {
            leaf: 5,
            bytes: vec![1, 2, 3],
            proof: vec![[9; 32], [8; 32]],
        };
        let w = WireOpening::from(&o);
        assert_eq!(Opening::try_from(&w).unwrap(), o);
        let bad_hash = WireOpening {
            proof: vec![hex::encode([9; 32]), "zz".into()],
            ..w.clone()
        };
        assert_eq!(
            Opening::try_from(&bad_hash),
            Err(OpeningError::ProofHash {
                leaf: 5,
                index: 1,
                cause: hex::FromHexError::InvalidStringLength
            })
        );
        let odd = WireOpening {
            bytes: "010".into(),
            ..w
        };
        assert_eq!(
            Opening::try_from(&odd),
            Err(OpeningError::Bytes {
                leaf: 5,
                cause: hex::FromHexError::OddLength
            })
        );
    }

    proptest! {
        /// The decoder never panics, whatever arrives.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode::<ChallengeMessage>(&bytes, kind::CHALLENGE);
            let _ = decode::<Openings>(&bytes, kind::OPENINGS);
        }

        /// The fast decoder agrees with the `hex` crate on every input, errors included: a bad
        /// digit somewhere, an odd length, an output of the wrong size.
        #[test]
        fn decode_hex_agrees_with_the_hex_crate(
            mut digits in "[0-9a-fA-F]{0,65}",
            bad in proptest::option::of((any::<usize>(), "[g-z ]")),
            short in 0usize..2,
        ) {
            if let Some((at, c)) = bad.filter(|_| !digits.is_empty()) {
                let at = at % digits.len();
                digits.replace_range(at..=at, &c);
            }
            let len = (digits.len() / 2).saturating_sub(short);
            let (mut fast, mut reference) = (vec![0; len], vec![0; len]);
            let expected = hex::decode_to_slice(&digits, &mut reference);
            prop_assert_eq!(decode_hex(&digits, &mut fast), expected);
            if expected.is_ok() {
                prop_assert_eq!(fast, reference);
            }
        }

        #[test]
        fn arbitrary_envelopes_never_panic(body in ".{0,200}", signer in "[0-9a-f]{0,70}", signature in "[0-9a-f]{0,130}") {
            let env = Envelope { version: WIRE_VERSION, kind: kind::COMMITMENT.into(), body, signer, signature };
            let _ = decode::<Commitment>(&serde_json::to_vec(&env).unwrap(), kind::COMMITMENT);
        }
    }

    #[test]
    fn one_key_is_one_identity_whatever_its_spelling() {
        let id = Identity::from_seed([3; 32]);
        let mut envelope = id.seal(kind::OPEN, &"x").unwrap();
        envelope.signer = envelope.signer.to_ascii_uppercase();
        let bytes = serde_json::to_vec(&envelope).unwrap();
        let (_, signer): (String, String) = decode(&bytes, kind::OPEN).unwrap();
        assert_eq!(signer, id.public_hex(), "the canonical lowercase key");
        assert!(matches!(
            parse_public_key(&hex::encode(identity_point())),
            Err(BadSignature::WeakKey)
        ));
        assert!(parse_public_key("abcd").is_err());
        assert!(parse_public_key(&id.public_hex()).is_ok());
    }
}
