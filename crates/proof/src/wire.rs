//! The messages agents and validators exchange, their signed envelope, and the decoder every
//! network input goes through.
//!
//! An envelope carries the message body as the exact JSON text that was signed, the signer's
//! Ed25519 public key and the signature, all hex where binary: verification needs no
//! canonical re-encoding. [`decode`] bounds the size, checks the version and the signature,
//! then parses the body: a malformed, oversized or forged message is an error, never a panic.

use crate::challenge::Challenge;
use crate::prover::Opening;
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// Version of the envelope and of every message in it.
pub const WIRE_VERSION: u32 = 1;

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
        getrandom::fill(&mut seed).map_err(|e| WireError::Randomness(e.to_string()))?;
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
        let body =
            serde_json::to_string(message).map_err(|e| WireError::Malformed(e.to_string()))?;
        let signature = self.key.sign(signed_bytes(kind, &body).as_slice());
        Ok(Envelope {
            version: WIRE_VERSION,
            kind: kind.to_string(),
            body,
            signer: self.public_hex(),
            signature: hex::encode(signature.to_bytes()),
        })
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
    pub version: u32,
    /// The message type, e.g. "challenge".
    pub kind: String,
    /// The message, as the JSON text that was signed.
    pub body: String,
    /// Ed25519 public key of the signer, hex.
    pub signer: String,
    /// Ed25519 signature over "pog-wire v1\n" ‖ kind ‖ "\n" ‖ body, hex.
    pub signature: String,
}

/// Why a message was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("message of {0} bytes exceeds the {MAX_MESSAGE_BYTES}-byte limit")]
    TooLarge(usize),
    #[error("malformed message: {0}")]
    Malformed(String),
    #[error("unsupported wire version {0} (this pog speaks {WIRE_VERSION})")]
    Version(u32),
    #[error("expected a {expected} message, got {got}")]
    Kind { expected: String, got: String },
    #[error("bad signature: {0}")]
    Signature(String),
    #[error("no randomness from the operating system: {0}")]
    Randomness(String),
}

/// Decodes raw bytes into a verified message of `kind`: size, envelope, version, kind,
/// signature, then the body. Returns the message and its signer's public key (hex).
pub fn decode<T: DeserializeOwned>(bytes: &[u8], kind: &str) -> Result<(T, String), WireError> {
    if bytes.len() > MAX_MESSAGE_BYTES {
        return Err(WireError::TooLarge(bytes.len()));
    }
    let envelope: Envelope =
        serde_json::from_slice(bytes).map_err(|e| WireError::Malformed(e.to_string()))?;
    if envelope.version != WIRE_VERSION {
        return Err(WireError::Version(envelope.version));
    }
    if envelope.kind != kind {
        return Err(WireError::Kind {
            expected: kind.into(),
            got: envelope.kind,
        });
    }
    let key_bytes: [u8; 32] = hex::decode(&envelope.signer)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| WireError::Signature("signer is not a 32-byte hex key".into()))?;
    let key =
        VerifyingKey::from_bytes(&key_bytes).map_err(|e| WireError::Signature(e.to_string()))?;
    let sig_bytes: [u8; 64] = hex::decode(&envelope.signature)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| WireError::Signature("signature is not 64 hex bytes".into()))?;
    key.verify(
        &signed_bytes(&envelope.kind, &envelope.body),
        &Signature::from_bytes(&sig_bytes),
    )
    .map_err(|_| WireError::Signature("does not verify".into()))?;
    let message =
        serde_json::from_str(&envelope.body).map_err(|e| WireError::Malformed(e.to_string()))?;
    Ok((message, envelope.signer))
}

/// The message kinds.
pub mod kind {
    pub const REGISTER: &str = "register";
    pub const CHALLENGE: &str = "challenge";
    pub const COMMITMENT: &str = "commitment";
    pub const OPEN: &str = "open";
    pub const OPENINGS: &str = "openings";
}

/// One GPU an agent claims.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuClaim {
    pub uuid: String,
    /// Database model name, e.g. "H200 SXM".
    pub model: String,
    pub bus_id: String,
}

/// Agent → validator: who I am, where I answer, which GPUs I claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Register {
    /// The agent's base URL for challenges.
    pub endpoint: String,
    pub gpus: Vec<GpuClaim>,
}

/// Validator → agent: compute this.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChallengeMessage {
    /// Unique per challenge, hex.
    pub id: String,
    pub challenge: Challenge,
    /// The validator's clock: the agent must not answer after `expires_at_ms`.
    pub issued_at_ms: u64,
    pub expires_at_ms: u64,
}

/// Agent → validator: the committed root.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Commitment {
    pub challenge_id: String,
    pub gpu_uuid: String,
    /// Merkle root over all leaves, hex.
    pub root: String,
    pub leaf_count: u64,
    /// The agent's own measurement (reported; the validator trusts only its clock).
    pub agent_ms: f64,
}

/// Validator → agent: open these leaves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenRequest {
    pub challenge_id: String,
    pub leaves: Vec<u64>,
}

/// One opened leaf on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireOpening {
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

impl TryFrom<&WireOpening> for Opening {
    type Error = WireError;
    fn try_from(w: &WireOpening) -> Result<Self, WireError> {
        // faster-hex (SIMD): the hex crate's decoder took 46 of a challenge's ~100 ms of
        // verification (1024 leaves of 4 KiB; examples/verify_cost.rs).
        let mut bytes = vec![0u8; w.bytes.len() / 2];
        faster_hex::hex_decode(w.bytes.as_bytes(), &mut bytes)
            .map_err(|e| WireError::Malformed(format!("leaf {}: {e}", w.leaf)))?;
        let proof = w
            .proof
            .iter()
            .map(|h| {
                hex::decode(h)
                    .ok()
                    .and_then(|b| b.try_into().ok())
                    .ok_or_else(|| WireError::Malformed(format!("leaf {}: bad proof hash", w.leaf)))
            })
            .collect::<Result<_, _>>()?;
        Ok(Opening {
            leaf: w.leaf,
            bytes,
            proof,
        })
    }
}

/// Agent → validator: the requested leaves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Openings {
    pub challenge_id: String,
    pub openings: Vec<WireOpening>,
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
            Err(WireError::Signature(_))
        ));
        let mut missing = env.clone();
        missing.signature = String::new();
        assert!(matches!(
            decode::<OpenRequest>(&serde_json::to_vec(&missing).unwrap(), kind::OPEN),
            Err(WireError::Signature(_))
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
        future.version = 2;
        assert!(matches!(
            decode::<OpenRequest>(&serde_json::to_vec(&future).unwrap(), kind::OPEN),
            Err(WireError::Version(2))
        ));
        assert!(matches!(
            decode::<OpenRequest>(&vec![b' '; MAX_MESSAGE_BYTES + 1], kind::OPEN),
            Err(WireError::TooLarge(_))
        ));
        assert!(matches!(
            decode::<OpenRequest>(b"{", kind::OPEN),
            Err(WireError::Malformed(_))
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
        let bad = WireOpening {
            proof: vec!["zz".into()],
            ..w
        };
        assert!(Opening::try_from(&bad).is_err());
    }

    proptest! {
        /// The decoder never panics, whatever arrives.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode::<ChallengeMessage>(&bytes, kind::CHALLENGE);
            let _ = decode::<Openings>(&bytes, kind::OPENINGS);
        }

        #[test]
        fn arbitrary_envelopes_never_panic(body in ".{0,200}", signer in "[0-9a-f]{0,70}", signature in "[0-9a-f]{0,130}") {
            let env = Envelope { version: WIRE_VERSION, kind: kind::COMMITMENT.into(), body, signer, signature };
            let _ = decode::<Commitment>(&serde_json::to_vec(&env).unwrap(), kind::COMMITMENT);
        }
    }
}
