//! Ledger entries: one signed result record each, in a canonical, versioned binary framing.
//!
//! A record is what its producer signed as a `pog_signed` envelope: a signature over
//! "pog-wire v2\n" ‖ kind ‖ "\n" ‖ body, where the body is JSON text. An entry keeps those
//! exact signed bytes (so the signature verifies with no re-encoding) and adds what the log
//! commits to around them:
//!
//! ```text
//! u8   entry format version (1)
//! u8   record kind (RecordKind as u8)
//! u8   GPU UUID length (1..=128), then the UUID (ASCII)
//! u64  the GPU's sequence number: 0 for its first entry, +1 for each next one (big-endian)
//! u64  log index of the GPU's previous entry, u64::MAX for the first (big-endian)
//! [32] signer's Ed25519 public key
//! [64] Ed25519 signature over "pog-wire v2\n" ‖ wire kind ‖ "\n" ‖ body
//! ..   body: the signed JSON text (UTF-8), to the end of the entry
//! ```
//!
//! The sequence number and back-link are written by the log (the validator), under the
//! checkpoint's signature rather than the producer's: with them, a bundle of one GPU's records
//! shows a record dropped from it or a reordering. The body must name the same GPU
//! (`"gpu_uuid"` field), so the producer's signature covers the GPU too. An entry is at most
//! [`MAX_ENTRY_BYTES`], the most a `tlog-tiles` entry bundle can hold (u16 lengths).

use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use pog_signed::{PublicKey, RecordKind};
use serde::Deserialize;

/// Version of the entry framing.
pub const ENTRY_VERSION: u8 = 1;
/// The signed-envelope version this framing reproduces (`pog_signed::WIRE_VERSION`).
pub const SIGNED_WIRE_VERSION: u32 = 2;
/// The largest entry: tlog-tiles entry bundles prefix each entry with a u16 length.
pub const MAX_ENTRY_BYTES: usize = u16::MAX as usize;
/// The longest GPU UUID accepted.
pub const MAX_UUID_BYTES: usize = 128;
/// `prev_index` of a GPU's first entry.
pub const NO_PREVIOUS: u64 = u64::MAX;

const HEADER_FIXED: usize = 1 + 1 + 1 + 8 + 8 + 32 + 64;

// The framing reproduces the wire's signed bytes; a new wire version needs a new framing.
const _: () = assert!(pog_signed::WIRE_VERSION == SIGNED_WIRE_VERSION);

/// Why an entry's bytes or signature were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    /// Over the u16 entry-bundle limit.
    #[error("entry of {0} bytes exceeds the {MAX_ENTRY_BYTES}-byte limit")]
    TooLarge(usize),
    /// Shorter than its header says.
    #[error("entry is truncated ({0} bytes)")]
    Truncated(usize),
    /// Another entry format version.
    #[error("unsupported entry format version {0} (this pog reads version {ENTRY_VERSION})")]
    Version(u8),
    /// A kind byte no record kind has.
    #[error("unknown record kind {0}")]
    UnknownKind(u8),
    /// The GPU UUID is empty, too long or not printable ASCII.
    #[error("the GPU UUID is empty, longer than {MAX_UUID_BYTES} bytes or not printable ASCII")]
    BadUuid,
    /// The signer is no usable Ed25519 key.
    #[error("the signer is not a usable Ed25519 public key")]
    BadSigner,
    /// The body is not UTF-8 JSON naming a GPU.
    #[error("the body is not UTF-8 JSON with a \"gpu_uuid\" string field")]
    BadBody,
    /// The signed body names another GPU than the entry.
    #[error("the body names GPU {body:?} but the entry GPU {entry:?}")]
    UuidMismatch {
        /// The GPU UUID in the entry's framing.
        entry: String,
        /// The `gpu_uuid` the signed body names.
        body: String,
    },
    /// The producer's signature does not verify.
    #[error("the signature does not verify for this signer, kind and body")]
    BadSignature,
    /// An envelope of a kind the ledger does not hold (e.g. a challenge).
    #[error("envelope kind {0:?} is no ledger record kind")]
    NotARecordKind(String),
    /// An envelope's signer or signature is not hex of the right length.
    #[error("envelope field {0} is not hex of the right length")]
    EnvelopeHex(&'static str),
    /// An envelope of another wire version.
    #[error("envelope version {0} is not the signed-wire version {SIGNED_WIRE_VERSION}")]
    EnvelopeVersion(u32),
}

/// One ledger entry: a signed record and where it sits in its GPU's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The record's kind.
    pub kind: RecordKind,
    /// The GPU the record is about.
    pub gpu_uuid: String,
    /// The GPU's sequence number of this record (0, 1, 2, … in log order).
    pub gpu_seq: u64,
    /// Log index of the GPU's previous record, [`NO_PREVIOUS`] for its first.
    pub prev_index: u64,
    /// Producer's Ed25519 public key.
    pub signer: [u8; 32],
    /// Producer's signature (see the module documentation).
    pub signature: [u8; 64],
    /// The signed JSON body.
    pub body: String,
}

fn valid_uuid(uuid: &str) -> bool {
    !uuid.is_empty() && uuid.len() <= MAX_UUID_BYTES && uuid.bytes().all(|b| b.is_ascii_graphic())
}

/// The bytes a producer signs for a record of `kind` with `body`.
pub fn signed_bytes(kind: RecordKind, body: &str) -> Vec<u8> {
    pog_signed::signed_bytes(kind.wire_kind(), body)
}

/// The `gpu_uuid` a JSON body names, if it is a JSON object with that string field.
fn body_uuid(body: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Named {
        gpu_uuid: String,
    }
    serde_json::from_str::<Named>(body).ok().map(|n| n.gpu_uuid)
}

impl Entry {
    /// Signs `body` (JSON naming `gpu_uuid`) as a record of `kind` with `key`: what an agent
    /// or validator does, here for tests and tools. The log fills in `gpu_seq`/`prev_index`.
    pub fn sign(kind: RecordKind, body: String, key: &SigningKey) -> Result<Entry, EntryError> {
        let gpu_uuid = body_uuid(&body).ok_or(EntryError::BadBody)?;
        if !valid_uuid(&gpu_uuid) {
            return Err(EntryError::BadUuid);
        }
        let signature = key.sign(&signed_bytes(kind, &body)).to_bytes();
        let entry = Entry {
            kind,
            gpu_uuid,
            gpu_seq: 0,
            prev_index: NO_PREVIOUS,
            signer: key.verifying_key().to_bytes(),
            signature,
            body,
        };
        entry.check_size()?;
        Ok(entry)
    }

    /// The entry of a record signed as an envelope (kind "record",
    /// "registration", …): its exact body and signature.
    pub fn from_envelope(envelope: &pog_signed::Envelope) -> Result<Entry, EntryError> {
        if envelope.version != SIGNED_WIRE_VERSION {
            return Err(EntryError::EnvelopeVersion(envelope.version));
        }
        let kind = RecordKind::from_wire_kind(&envelope.kind)
            .ok_or_else(|| EntryError::NotARecordKind(envelope.kind.clone()))?;
        let mut signer = [0u8; 32];
        hex::decode_to_slice(&envelope.signer, &mut signer)
            .map_err(|_| EntryError::EnvelopeHex("signer"))?;
        let mut signature = [0u8; 64];
        hex::decode_to_slice(&envelope.signature, &mut signature)
            .map_err(|_| EntryError::EnvelopeHex("signature"))?;
        let gpu_uuid = body_uuid(&envelope.body).ok_or(EntryError::BadBody)?;
        if !valid_uuid(&gpu_uuid) {
            return Err(EntryError::BadUuid);
        }
        let entry = Entry {
            kind,
            gpu_uuid,
            gpu_seq: 0,
            prev_index: NO_PREVIOUS,
            signer,
            signature,
            body: envelope.body.clone(),
        };
        entry.check_size()?;
        entry.verify()?;
        Ok(entry)
    }

    fn check_size(&self) -> Result<(), EntryError> {
        let len = HEADER_FIXED + self.gpu_uuid.len() + self.body.len();
        if len > MAX_ENTRY_BYTES {
            return Err(EntryError::TooLarge(len));
        }
        Ok(())
    }

    /// The canonical bytes (the Merkle leaf).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_FIXED + self.gpu_uuid.len() + self.body.len());
        out.push(ENTRY_VERSION);
        out.push(self.kind as u8);
        out.push(self.gpu_uuid.len() as u8);
        out.extend_from_slice(self.gpu_uuid.as_bytes());
        out.extend_from_slice(&self.gpu_seq.to_be_bytes());
        out.extend_from_slice(&self.prev_index.to_be_bytes());
        out.extend_from_slice(&self.signer);
        out.extend_from_slice(&self.signature);
        out.extend_from_slice(self.body.as_bytes());
        out
    }

    /// Parses an entry's bytes (structure only; [`Entry::verify`] checks the signature).
    pub fn parse(bytes: &[u8]) -> Result<Entry, EntryError> {
        if bytes.len() > MAX_ENTRY_BYTES {
            return Err(EntryError::TooLarge(bytes.len()));
        }
        let truncated = || EntryError::Truncated(bytes.len());
        let (&version, rest) = bytes.split_first().ok_or_else(truncated)?;
        if version != ENTRY_VERSION {
            return Err(EntryError::Version(version));
        }
        let (&kind, rest) = rest.split_first().ok_or_else(truncated)?;
        let kind = RecordKind::from_u8(kind).ok_or(EntryError::UnknownKind(kind))?;
        let (&uuid_len, rest) = rest.split_first().ok_or_else(truncated)?;
        let uuid_len = usize::from(uuid_len);
        if rest.len() < uuid_len + 8 + 8 + 32 + 64 {
            return Err(truncated());
        }
        let (uuid, rest) = rest.split_at(uuid_len);
        let gpu_uuid = std::str::from_utf8(uuid).map_err(|_| EntryError::BadUuid)?;
        if !valid_uuid(gpu_uuid) {
            return Err(EntryError::BadUuid);
        }
        let (seq, rest) = rest.split_at(8);
        let (prev, rest) = rest.split_at(8);
        let (signer, rest) = rest.split_at(32);
        let (signature, body) = rest.split_at(64);
        let body = std::str::from_utf8(body).map_err(|_| EntryError::BadBody)?;
        Ok(Entry {
            kind,
            gpu_uuid: gpu_uuid.to_string(),
            gpu_seq: u64::from_be_bytes(seq.try_into().expect("8 bytes")),
            prev_index: u64::from_be_bytes(prev.try_into().expect("8 bytes")),
            signer: signer.try_into().expect("32 bytes"),
            signature: signature.try_into().expect("64 bytes"),
            body: body.to_string(),
        })
    }

    /// Checks the producer's signature (strict Ed25519, weak keys refused) and that the
    /// signed body names this entry's GPU.
    pub fn verify(&self) -> Result<(), EntryError> {
        let key = VerifyingKey::from_bytes(&self.signer).map_err(|_| EntryError::BadSigner)?;
        if key.is_weak() {
            return Err(EntryError::BadSigner);
        }
        key.verify_strict(
            &signed_bytes(self.kind, &self.body),
            &Signature::from_bytes(&self.signature),
        )
        .map_err(|_| EntryError::BadSignature)?;
        let named = body_uuid(&self.body).ok_or(EntryError::BadBody)?;
        if named != self.gpu_uuid {
            return Err(EntryError::UuidMismatch {
                entry: self.gpu_uuid.clone(),
                body: named,
            });
        }
        Ok(())
    }

    /// The signer, as keys are named everywhere else.
    pub fn signer_key(&self) -> PublicKey {
        PublicKey::from(self.signer)
    }

    /// The RFC 6962 leaf hash of the encoded entry.
    pub fn leaf_hash(&self) -> pog_merkle::Hash {
        pog_merkle::leaf_hash(&self.encode())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(n: u8) -> SigningKey {
        SigningKey::from_bytes(&[n; 32])
    }

    #[test]
    fn round_trip_and_verify() {
        let body = r#"{"version":1,"gpu_uuid":"GPU-1","x":2}"#.to_string();
        let mut e = Entry::sign(RecordKind::ProofRound, body, &key(1)).unwrap();
        e.gpu_seq = 3;
        e.prev_index = 17;
        let bytes = e.encode();
        let back = Entry::parse(&bytes).unwrap();
        assert_eq!(back, e);
        back.verify().unwrap();
        // Any single byte changed is refused, by the parser or the signature check (a change
        // in seq/prev is caught by the log's tree and the bundle's chain, not here).
        for i in 0..bytes.len() {
            if (3 + 5..3 + 5 + 16).contains(&i) {
                continue;
            }
            let mut bad = bytes.clone();
            bad[i] ^= 0x01;
            let ok = Entry::parse(&bad).and_then(|e| e.verify());
            assert!(ok.is_err(), "byte {i} changed and still valid");
        }
    }

    #[test]
    fn envelopes_of_the_wire_become_entries() {
        let id = pog_signed::Identity::from_seed([4; 32]);
        #[derive(serde::Serialize)]
        struct R {
            version: u32,
            gpu_uuid: String,
        }
        let env = id
            .seal(
                "record",
                &R {
                    version: 2,
                    gpu_uuid: "GPU-abc".into(),
                },
            )
            .unwrap();
        let e = Entry::from_envelope(&env).unwrap();
        assert_eq!(e.kind, RecordKind::ProofRound);
        assert_eq!(e.signer_key(), id.public_key());
        let mut forged = env.clone();
        forged.body = forged.body.replace("GPU-abc", "GPU-abd");
        assert_eq!(Entry::from_envelope(&forged), Err(EntryError::BadSignature));
        let mut other = env;
        other.kind = "challenge".into();
        assert!(matches!(
            Entry::from_envelope(&other),
            Err(EntryError::NotARecordKind(_))
        ));
    }

    #[test]
    fn every_kind_round_trips_by_code_and_wire_kind() {
        for k in RecordKind::ALL {
            assert_eq!(RecordKind::from_u8(k as u8), Some(k));
            assert_eq!(RecordKind::from_wire_kind(k.wire_kind()), Some(k));
        }
        assert_eq!(RecordKind::from_u8(0), None);
        assert_eq!(RecordKind::from_u8(17), None);
        // The validator's kinds as it signs them today.
        assert_eq!(
            RecordKind::from_wire_kind("record"),
            Some(RecordKind::ProofRound)
        );
        assert_eq!(
            RecordKind::from_wire_kind("memory-record"),
            Some(RecordKind::MemoryRound)
        );
        assert_eq!(
            RecordKind::from_wire_kind("registration"),
            Some(RecordKind::Registration)
        );
        assert_eq!(
            RecordKind::from_wire_kind("health-record"),
            Some(RecordKind::HealthRound)
        );
        assert!(RecordKind::HealthRound.signed_by_validator());
        assert_eq!(
            RecordKind::from_wire_kind("round-missed"),
            Some(RecordKind::RoundMissed)
        );
        assert!(RecordKind::RoundMissed.signed_by_validator());
        assert_eq!(RecordKind::from_wire_kind("market-clear"), None);
    }

    #[test]
    fn the_body_must_name_the_gpu() {
        assert_eq!(
            Entry::sign(RecordKind::Health, "{}".into(), &key(1)),
            Err(EntryError::BadBody)
        );
        let e = Entry::sign(
            RecordKind::Health,
            r#"{"gpu_uuid":"GPU-1"}"#.into(),
            &key(1),
        )
        .unwrap();
        let mut moved = e.clone();
        moved.gpu_uuid = "GPU-2".into();
        assert!(matches!(
            moved.verify(),
            Err(EntryError::UuidMismatch { .. })
        ));
    }

    proptest! {
        #[test]
        fn parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            if let Ok(e) = Entry::parse(&bytes) {
                prop_assert_eq!(e.encode(), bytes);
            }
        }
    }
}
