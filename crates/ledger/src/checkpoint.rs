//! C2SP `tlog-checkpoint` (c2sp.org/tlog-checkpoint): the log's signed tree head as a note
//! text of an origin line, the tree size in decimal, the base64 root hash and optional
//! extension lines, signed by the log (Ed25519 note signature) and cosigned by witnesses
//! (C2SP `tlog-cosignature` v1).

use crate::note::{Note, NoteError, NoteSigner, Verified, Verifier, ALG_COSIGNATURE_V1};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use pog_merkle::Hash;

/// The most extension lines accepted.
pub const MAX_EXTENSIONS: usize = 16;

/// Why a checkpoint was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckpointError {
    /// The note around the checkpoint is malformed, or a known key's signature fails.
    #[error("the checkpoint note is malformed: {0}")]
    Note(#[from] NoteError),
    /// Fewer than the three mandatory lines.
    #[error("the checkpoint text has {0} lines; it needs an origin, a size and a root hash")]
    TooFewLines(usize),
    /// More extension lines than accepted.
    #[error("the checkpoint has {0} extension lines, over the limit of {MAX_EXTENSIONS}")]
    TooManyExtensions(usize),
    /// The origin line is empty.
    #[error("the checkpoint's origin line is empty")]
    EmptyOrigin,
    /// The size line is not a canonical decimal number.
    #[error("the checkpoint's size {0:?} is not a decimal number without leading zeros")]
    BadSize(String),
    /// The root line is not a base64 32-byte hash.
    #[error("the checkpoint's root hash {0:?} is not 32 bytes in standard base64")]
    BadRoot(String),
    /// An extension line is empty.
    #[error("the checkpoint has an empty extension line")]
    EmptyExtension,
    /// The checkpoint names another log than the key's.
    #[error("the checkpoint is for log {got:?}, expected {expected:?}")]
    WrongOrigin {
        /// The origin of the log whose key verifies.
        expected: String,
        /// The origin the checkpoint names.
        got: String,
    },
    /// No signature of the log's key on the checkpoint.
    #[error("the checkpoint is not signed by the log key {0}")]
    NotSignedByLog(String),
}

/// A tree head: which log, how many entries, their RFC 6962 root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The log's identity (its origin line).
    pub origin: String,
    /// Number of entries.
    pub size: u64,
    /// RFC 6962 root hash of the first `size` entries.
    pub root: Hash,
    /// Opaque extension lines (none in pog's checkpoints).
    pub extensions: Vec<String>,
}

impl Checkpoint {
    /// The note text: origin, size, base64 root, extension lines, each ending in a newline.
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "{}\n{}\n{}\n",
            self.origin,
            self.size,
            B64.encode(self.root)
        );
        for e in &self.extensions {
            out.push_str(e);
            out.push('\n');
        }
        out
    }

    /// Parses a checkpoint note text (no signatures).
    pub fn parse_text(text: &str) -> Result<Checkpoint, CheckpointError> {
        let body = text.strip_suffix('\n').ok_or(NoteError::NoFinalNewline)?;
        let lines: Vec<&str> = body.split('\n').collect();
        if lines.len() < 3 {
            return Err(CheckpointError::TooFewLines(lines.len()));
        }
        if lines.len() - 3 > MAX_EXTENSIONS {
            return Err(CheckpointError::TooManyExtensions(lines.len() - 3));
        }
        let origin = lines[0];
        if origin.is_empty() {
            return Err(CheckpointError::EmptyOrigin);
        }
        let size_text = lines[1];
        let canonical = !size_text.is_empty()
            && size_text.bytes().all(|b| b.is_ascii_digit())
            && (size_text == "0" || !size_text.starts_with('0'));
        let size: u64 = canonical
            .then(|| size_text.parse().ok())
            .flatten()
            .ok_or_else(|| CheckpointError::BadSize(size_text.into()))?;
        let root: Hash = B64
            .decode(lines[2])
            .ok()
            .and_then(|r| r.try_into().ok())
            .ok_or_else(|| CheckpointError::BadRoot(lines[2].into()))?;
        let extensions: Vec<String> = lines[3..].iter().map(|s| s.to_string()).collect();
        if extensions.iter().any(|e| e.is_empty()) {
            return Err(CheckpointError::EmptyExtension);
        }
        Ok(Checkpoint {
            origin: origin.into(),
            size,
            root,
            extensions,
        })
    }

    /// Signs the checkpoint with the log's key into a note.
    pub fn sign(&self, log: &NoteSigner) -> SignedCheckpoint {
        let mut note = Note::new(self.to_text()).expect("a checkpoint text is a valid note text");
        note.push_signature(log.sign(note.text(), 0));
        SignedCheckpoint {
            checkpoint: self.clone(),
            note,
        }
    }
}

/// A checkpoint with its note: the log's signature and any cosignatures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedCheckpoint {
    /// The parsed tree head.
    pub checkpoint: Checkpoint,
    /// The note (text and every signature line).
    pub note: Note,
}

impl SignedCheckpoint {
    /// Parses a checkpoint note without checking any signature (see
    /// [`SignedCheckpoint::verify`]).
    pub fn parse(bytes: &[u8]) -> Result<SignedCheckpoint, CheckpointError> {
        let note = Note::parse(bytes)?;
        let checkpoint = Checkpoint::parse_text(note.text())?;
        Ok(SignedCheckpoint { checkpoint, note })
    }

    /// Parses a checkpoint note and checks that `log` signed it and that its origin is the
    /// log key's name.
    pub fn parse_verified(
        bytes: &[u8],
        log: &Verifier,
    ) -> Result<SignedCheckpoint, CheckpointError> {
        let signed = SignedCheckpoint::parse(bytes)?;
        signed.verify(log)?;
        Ok(signed)
    }

    /// Checks the log's signature (strictly: a signature line of the log's key that fails is
    /// an error) and that the origin is the log key's name.
    pub fn verify(&self, log: &Verifier) -> Result<(), CheckpointError> {
        if self.checkpoint.origin != log.name() {
            return Err(CheckpointError::WrongOrigin {
                expected: log.name().into(),
                got: self.checkpoint.origin.clone(),
            });
        }
        match self.note.verify(std::slice::from_ref(log)) {
            Ok(_) => Ok(()),
            Err(NoteError::NoKnownSignature) => Err(CheckpointError::NotSignedByLog(log.to_vkey())),
            Err(e) => Err(e.into()),
        }
    }

    /// Each witness key's cosignature on this checkpoint: `Ok` with its time when it verifies,
    /// the error when a line of that key fails, absent when the witness has not cosigned.
    pub fn cosignatures(
        &self,
        witnesses: &[Verifier],
    ) -> Vec<(String, Result<Verified, NoteError>)> {
        let mut out = Vec::new();
        for w in witnesses.iter().filter(|w| w.alg() == ALG_COSIGNATURE_V1) {
            for sig in self.note.signatures().iter().filter(|s| w.matches(s)) {
                out.push((w.name().to_string(), w.verify(self.note.text(), sig)));
            }
        }
        out
    }

    /// Adds a witness's cosignature line.
    pub fn add_cosignature(&mut self, witness: &NoteSigner, time: u64) {
        let sig = witness.sign(self.note.text(), time);
        self.note.push_signature(sig);
    }

    /// The note text with every signature line.
    pub fn to_text(&self) -> String {
        self.note.to_text()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::note::ALG_ED25519;
    use proptest::prelude::*;

    #[test]
    fn the_specification_example_parses() {
        let text =
            "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n";
        let c = Checkpoint::parse_text(text).unwrap();
        assert_eq!(c.origin, "example.com/behind-the-sofa");
        assert_eq!(c.size, 20852163);
        assert_eq!(c.to_text(), text);
    }

    #[test]
    fn sign_verify_cosign() {
        let log = NoteSigner::new("pog.example/log", ALG_ED25519, [9; 32]).unwrap();
        let w = NoteSigner::new("pog.example/w1", ALG_COSIGNATURE_V1, [8; 32]).unwrap();
        let c = Checkpoint {
            origin: "pog.example/log".into(),
            size: 5,
            root: [3; 32],
            extensions: vec![],
        };
        let mut signed = c.sign(&log);
        signed.add_cosignature(&w, 1_800_000_000);
        let back =
            SignedCheckpoint::parse_verified(signed.to_text().as_bytes(), log.verifier()).unwrap();
        assert_eq!(back.checkpoint, c);
        let cos = back.cosignatures(&[w.verifier().clone()]);
        assert_eq!(cos.len(), 1);
        assert_eq!(cos[0].1.as_ref().unwrap().timestamp, Some(1_800_000_000));
        let other = NoteSigner::new("pog.example/log", ALG_ED25519, [1; 32]).unwrap();
        assert!(matches!(
            back.verify(other.verifier()),
            Err(CheckpointError::NotSignedByLog(_))
        ));
    }

    #[test]
    fn bad_checkpoint_texts() {
        for (text, ok) in [
            ("o\n1\n", false),
            (
                "o\n01\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n",
                false,
            ),
            (
                "o\n+1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n",
                false,
            ),
            ("o\n1\nAAAA\n", false),
            ("\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n", false),
            ("o\n0\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n", true),
            (
                "o\n99999999999999999999999\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n",
                false,
            ),
        ] {
            assert_eq!(Checkpoint::parse_text(text).is_ok(), ok, "{text:?}");
        }
    }

    proptest! {
        #[test]
        fn parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = SignedCheckpoint::parse(&bytes);
            let _ = Checkpoint::parse_text(&String::from_utf8_lossy(&bytes));
        }
    }
}
