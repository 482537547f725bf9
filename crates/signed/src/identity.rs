//! An Ed25519 identity: the key pair an agent, a validator, a log or a witness signs with.

use ed25519_dalek::{Signer, SigningKey};
use serde::Serialize;
use std::fmt;

use crate::envelope::{signed_bytes, Envelope, WireError, WIRE_VERSION};
use crate::key::PublicKey;

/// An Ed25519 identity (agent, validator, log or witness), kept in the data dir.
pub struct Identity {
    pub(crate) key: SigningKey,
}

/// Shows the public key only: the secret never reaches a log.
impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Identity({})", self.public_key())
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

    /// The public key: how others name this identity.
    pub fn public_key(&self) -> PublicKey {
        PublicKey::from(&self.key.verifying_key())
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
        let signature = self.key.sign(&signed_bytes(kind, &body));
        Envelope {
            version: WIRE_VERSION,
            kind: kind.to_string(),
            body,
            signer: self.public_key().into(),
            signature: hex::encode(signature.to_bytes()),
        }
    }
}
