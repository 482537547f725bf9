//! Ed25519 identities, and public keys in their one canonical spelling.

use ed25519_dalek::VerifyingKey;
use serde::{Deserialize, Deserializer, Serialize};

/// An Ed25519 public key, spelled as 64 lowercase hex digits: how agents, validators, logs and
/// witnesses are named on the wire and in every record.
///
/// One spelling makes equality identity: a key written in upper case by one peer and lower
/// case by another is the same key, and compares equal only because both are stored as this
/// type. [`PublicKey::parse`] takes either case and refuses weak keys (small-order points,
/// under which anyone can forge signatures); deserializing checks the canonical spelling only
/// (cheap enough for pages of stored records), and the point itself is checked wherever a
/// signature is verified against it ([`crate::decode`], [`PublicKey::verifying_key`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct PublicKey(String);

/// Why a public key was refused.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// Not 64 hex digits.
    #[error("not a 32-byte public key in hex: {0}")]
    Hex(hex::FromHexError),
    /// 32 bytes that are no point of the curve.
    #[error("not an Ed25519 public key: {0}")]
    NotAPoint(ed25519_dalek::SignatureError),
    /// Not in the canonical spelling that stored keys have (64 lowercase hex digits).
    #[error("not a public key's canonical spelling (64 lowercase hex digits)")]
    NotCanonical,
    /// A small-order point (the identity among them): signatures "verify" under it for any
    /// message without any secret, so it names no one.
    #[error(
        "a weak (small-order) Ed25519 point, under which anyone can forge signatures; sign \
         with a key pog generated"
    )]
    Weak,
}

impl PublicKey {
    /// Parses a key as the wire spells it (64 hex digits, either case) into its canonical
    /// spelling, refusing weak keys.
    pub fn parse(text: &str) -> Result<PublicKey, KeyError> {
        let key = strong_key(text)?;
        Ok(PublicKey::from(&key))
    }

    /// The Ed25519 key, for verifying signatures: refused if it is weak.
    pub fn verifying_key(&self) -> Result<VerifyingKey, KeyError> {
        strong_key(&self.0)
    }

    /// The key's 32 bytes.
    pub fn to_bytes(&self) -> [u8; 32] {
        let mut bytes = [0u8; 32];
        // The spelling was checked when the key was made: 64 hex digits.
        hex::decode_to_slice(&self.0, &mut bytes).unwrap_or_default();
        bytes
    }

    /// The canonical spelling.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The key with these bytes, unless it is weak.
fn strong_key(text: &str) -> Result<VerifyingKey, KeyError> {
    let mut bytes = [0u8; 32];
    hex::decode_to_slice(text, &mut bytes).map_err(KeyError::Hex)?;
    let key = VerifyingKey::from_bytes(&bytes).map_err(KeyError::NotAPoint)?;
    if key.is_weak() {
        return Err(KeyError::Weak);
    }
    Ok(key)
}

/// Whether `text` is a key's canonical spelling: 64 lowercase hex digits.
fn is_canonical(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The key with these bytes, spelled canonically (whether they are a strong point is checked
/// where a signature is verified against it).
impl From<[u8; 32]> for PublicKey {
    fn from(bytes: [u8; 32]) -> PublicKey {
        PublicKey(hex::encode(bytes))
    }
}

impl From<&VerifyingKey> for PublicKey {
    fn from(key: &VerifyingKey) -> PublicKey {
        PublicKey(hex::encode(key.as_bytes()))
    }
}

impl std::str::FromStr for PublicKey {
    type Err = KeyError;
    fn from_str(text: &str) -> Result<PublicKey, KeyError> {
        PublicKey::parse(text)
    }
}

/// A key as stored (a database row, a record): its canonical spelling, checked, not parsed.
impl TryFrom<String> for PublicKey {
    type Error = KeyError;
    fn try_from(text: String) -> Result<PublicKey, KeyError> {
        if !is_canonical(&text) {
            return Err(KeyError::NotCanonical);
        }
        Ok(PublicKey(text))
    }
}

impl<'de> Deserialize<'de> for PublicKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<PublicKey, D::Error> {
        PublicKey::try_from(String::deserialize(deserializer)?).map_err(serde::de::Error::custom)
    }
}

crate::text::read_as_text!(PublicKey);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Identity;

    #[test]
    fn one_key_is_one_identity_whatever_its_spelling() {
        let id = Identity::from_seed([3; 32]);
        let upper = id.public_key().to_ascii_uppercase();
        assert_eq!(PublicKey::parse(&upper).unwrap(), id.public_key());
        assert_eq!(Identity::from_seed(id.seed()).public_key(), id.public_key());
        assert_eq!(
            id.public_key().to_bytes(),
            id.key.verifying_key().to_bytes()
        );
        // Stored spellings are canonical or refused.
        let json = serde_json::to_string(&id.public_key()).unwrap();
        assert_eq!(
            serde_json::from_str::<PublicKey>(&json).unwrap(),
            id.public_key()
        );
        assert!(serde_json::from_str::<PublicKey>(&format!("\"{upper}\"")).is_err());
        assert!(serde_json::from_str::<PublicKey>("\"abcd\"").is_err());
    }

    #[test]
    fn weak_and_malformed_keys_are_refused() {
        let mut identity_point = [0u8; 32];
        identity_point[0] = 1;
        assert!(matches!(
            PublicKey::parse(&hex::encode(identity_point)),
            Err(KeyError::Weak)
        ));
        assert!(matches!(PublicKey::parse("abcd"), Err(KeyError::Hex(_))));
        assert!(PublicKey::parse(&Identity::from_seed([1; 32]).public_key()).is_ok());
    }
}
