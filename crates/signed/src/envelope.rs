//! The signed envelope, and the decoder every network input goes through.
//!
//! An envelope carries the message body as the exact JSON text that was signed, the signer's
//! Ed25519 public key and the signature, all hex where binary: verification needs no
//! canonical re-encoding. [`decode`] bounds the size, checks the version and the signature,
//! then parses the body.

use ed25519_dalek::Signature;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::key::{KeyError, PublicKey};

/// Version of the envelope and of every message in it. 2: binary fields in bodies are hex
/// strings (a challenge's nonce was a list of 32 numbers in 1).
pub const WIRE_VERSION: u32 = 2;

/// The largest message accepted: 1024 openings of 4 KiB leaves with their proofs, hex-encoded,
/// fit with room to spare.
pub const MAX_MESSAGE_BYTES: usize = 32 << 20;

/// What a signature covers: the version, the kind and the body, so a signed message of one
/// kind cannot be replayed as another. The ledger's entries reproduce these bytes.
pub fn signed_bytes(kind: &str, body: &str) -> Vec<u8> {
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
    /// Ed25519 public key of the signer, hex, as sent (not yet checked: [`decode`] does).
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
    /// The signer is no usable public key (malformed, no point, or weak).
    #[error("the signer is {0}")]
    Signer(KeyError),
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
/// its signer, in the key's canonical spelling whatever case the envelope used.
pub fn decode<T: DeserializeOwned>(bytes: &[u8], kind: &str) -> Result<(T, PublicKey), WireError> {
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
    let signer = envelope.verify().map_err(WireError::Signature)?;
    let message = serde_json::from_str(&envelope.body).map_err(|cause| WireError::Body {
        kind: envelope.kind,
        cause,
    })?;
    Ok((message, signer))
}

impl Envelope {
    /// Checks the signature: a signer that is a strong Ed25519 key, and a signature that
    /// verifies strictly over the kind and body. Returns the signer.
    pub fn verify(&self) -> Result<PublicKey, BadSignature> {
        let signer = PublicKey::parse(&self.signer).map_err(BadSignature::Signer)?;
        let key = signer.verifying_key().map_err(BadSignature::Signer)?;
        let mut signature = [0u8; 64];
        hex::decode_to_slice(&self.signature, &mut signature)
            .map_err(BadSignature::SignatureHex)?;
        key.verify_strict(
            &signed_bytes(&self.kind, &self.body),
            &Signature::from_bytes(&signature),
        )
        .map_err(BadSignature::DoesNotVerify)?;
        Ok(signer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Identity;
    use ed25519_dalek::VerifyingKey;
    use proptest::prelude::*;

    const NOTE: &str = "note";

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Note {
        id: String,
        leaves: Vec<u64>,
    }

    fn sample() -> Note {
        Note {
            id: "ab".into(),
            leaves: vec![1, 2, 3],
        }
    }

    #[test]
    fn sealed_messages_decode_and_name_their_signer() {
        let id = Identity::from_seed([7; 32]);
        let bytes = serde_json::to_vec(&id.seal(NOTE, &sample()).unwrap()).unwrap();
        let (msg, signer): (Note, PublicKey) = decode(&bytes, NOTE).unwrap();
        assert_eq!(msg, sample());
        assert_eq!(signer, id.public_key());
    }

    #[test]
    fn a_signer_in_upper_case_is_named_canonically() {
        let id = Identity::from_seed([3; 32]);
        let mut envelope = id.seal(NOTE, &sample()).unwrap();
        envelope.signer = envelope.signer.to_ascii_uppercase();
        let bytes = serde_json::to_vec(&envelope).unwrap();
        let (_, signer): (Note, PublicKey) = decode(&bytes, NOTE).unwrap();
        assert_eq!(signer, id.public_key(), "the canonical lowercase key");
    }

    #[test]
    fn forged_altered_and_misdirected_messages_are_refused() {
        let id = Identity::from_seed([7; 32]);
        let env = id.seal(NOTE, &sample()).unwrap();
        let refused = |env: &Envelope, kind: &str| {
            decode::<Note>(&serde_json::to_vec(env).unwrap(), kind).unwrap_err()
        };
        let mut altered = env.clone();
        altered.body = altered.body.replace("[1,2,3]", "[1,2,4]");
        assert!(matches!(refused(&altered, NOTE), WireError::Signature(_)));
        let mut other_signer = env.clone();
        other_signer.signer = Identity::from_seed([8; 32]).public_key().into();
        assert!(matches!(
            refused(&other_signer, NOTE),
            WireError::Signature(BadSignature::DoesNotVerify(_))
        ));
        let mut short_signer = env.clone();
        short_signer.signer.pop();
        assert!(matches!(
            refused(&short_signer, NOTE),
            WireError::Signature(BadSignature::Signer(KeyError::Hex(_)))
        ));
        let mut missing = env.clone();
        missing.signature = String::new();
        assert!(matches!(
            refused(&missing, NOTE),
            WireError::Signature(BadSignature::SignatureHex(_))
        ));
        // Signed as one kind, presented as another.
        let mut relabelled = env.clone();
        relabelled.kind = "other".into();
        assert!(matches!(
            refused(&relabelled, "other"),
            WireError::Signature(_)
        ));
        assert!(matches!(refused(&env, "other"), WireError::Kind { .. }));
        let mut future = env;
        future.version = WIRE_VERSION + 1;
        assert!(matches!(
            refused(&future, NOTE),
            WireError::Version(v) if v == WIRE_VERSION + 1
        ));
        assert!(matches!(
            decode::<Note>(&vec![b' '; MAX_MESSAGE_BYTES + 1], NOTE),
            Err(WireError::TooLarge(_))
        ));
        assert!(matches!(
            decode::<Note>(b"{", NOTE),
            Err(WireError::Envelope(_))
        ));
        // Signed correctly, but not a note.
        let other = id.seal(NOTE, &vec!["x"]).unwrap();
        let body_refused = refused(&other, NOTE);
        assert!(matches!(body_refused, WireError::Body { ref kind, .. } if kind == NOTE));
        assert!(body_refused
            .to_string()
            .starts_with("the note message's body is malformed: "));
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
            kind: NOTE.into(),
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
        let refused = decode::<Note>(&serde_json::to_vec(&env).unwrap(), NOTE).unwrap_err();
        assert!(
            matches!(
                refused,
                WireError::Signature(BadSignature::Signer(KeyError::Weak))
            ),
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
            decode::<Note>(
                &serde_json::to_vec(&envelope_with(order_two, [0; 64])).unwrap(),
                NOTE
            ),
            Err(WireError::Signature(BadSignature::Signer(KeyError::Weak)))
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
        let message = signed_bytes(NOTE, &body);
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
            decode::<Note>(
                &serde_json::to_vec(&envelope_with(public, signature)).unwrap(),
                NOTE
            ),
            Err(WireError::Signature(BadSignature::DoesNotVerify(_)))
        ));
    }

    proptest! {
        /// The decoder never panics, whatever arrives.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode::<Note>(&bytes, NOTE);
        }

        #[test]
        fn arbitrary_envelopes_never_panic(body in ".{0,200}", signer in "[0-9a-f]{0,70}", signature in "[0-9a-f]{0,130}") {
            let env = Envelope { version: WIRE_VERSION, kind: NOTE.into(), body, signer, signature };
            let _ = decode::<Note>(&serde_json::to_vec(&env).unwrap(), NOTE);
        }
    }
}
