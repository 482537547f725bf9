//! C2SP `signed-note` (c2sp.org/signed-note): a UTF-8 text signed by one or more keys, with
//! Ed25519 note signatures (type 0x01) and C2SP `tlog-cosignature` v1 Ed25519 cosignatures
//! (type 0x04), and verifier keys ("vkeys") as text.
//!
//! ```text
//! <text, ending in a newline>
//!
//! — <key name> base64(key ID (4 bytes, big-endian) ‖ signature)
//! ```
//!
//! Parsing never panics: every malformed note is a [`NoteError`].

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use sha2::{Digest, Sha256};

/// Signature type byte of an Ed25519 note signature.
pub const ALG_ED25519: u8 = 0x01;
/// Signature type byte of a timestamped Ed25519 checkpoint cosignature (tlog-cosignature v1).
pub const ALG_COSIGNATURE_V1: u8 = 0x04;
/// The largest note accepted, in bytes: a checkpoint with a few dozen signatures is < 8 KiB.
pub const MAX_NOTE_BYTES: usize = 64 << 10;
/// The most signature lines accepted (the specification asks for at least 16).
pub const MAX_SIGNATURES: usize = 100;

/// The em dash and space that open every signature line.
const SIGNATURE_PREFIX: &str = "\u{2014} ";

/// Why a note, a key or a signature was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoteError {
    /// The note is over the size limit.
    #[error("the note is {0} bytes, over the {MAX_NOTE_BYTES}-byte limit")]
    TooLarge(usize),
    /// The note is not UTF-8.
    #[error("the note is not valid UTF-8")]
    NotUtf8,
    /// A control character other than newline.
    #[error("the note contains a control character (byte {0:#04x}) other than newline")]
    ControlCharacter(u8),
    /// The note (or its text) does not end with a newline.
    #[error("the note does not end with a newline")]
    NoFinalNewline,
    /// No blank line before the signatures.
    #[error("the note has no blank line separating its text from its signatures")]
    NoSignatureBlock,
    /// A blank line but no signature after it.
    #[error("the note has no signatures")]
    NoSignatures,
    /// More signature lines than accepted.
    #[error("the note has {0} signatures, over the limit of {MAX_SIGNATURES}")]
    TooManySignatures(usize),
    /// A signature line is malformed (1-based line among the signatures).
    #[error("signature line {line} is malformed: {why}")]
    SignatureLine {
        /// The line's number among the signature lines, 1-based.
        line: usize,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A key name is empty or holds a space or plus sign.
    #[error("key name {0:?} is empty or contains a space or a plus sign")]
    BadKeyName(String),
    /// A vkey is not name+keyid+key.
    #[error("verifier key is malformed: {0}")]
    BadVerifierKey(&'static str),
    /// A vkey's key ID is not its name's and key's.
    #[error(
        "verifier key {name} has key ID {claimed:08x}, but its name and key give {computed:08x}"
    )]
    KeyIdMismatch {
        /// The vkey's key name.
        name: String,
        /// The key ID the vkey states.
        claimed: u32,
        /// The key ID its name, type and key hash to.
        computed: u32,
    },
    /// A signature type pog does not read.
    #[error("unsupported signature type {0:#04x} (pog reads Ed25519 0x01 and cosignature 0x04)")]
    UnsupportedAlgorithm(u8),
    /// An invalid or small-order public key.
    #[error("the public key of {0} is not a usable Ed25519 key (invalid or small-order point)")]
    WeakKey(String),
    /// A signature of the wrong length for its type.
    #[error("the signature by {name} has {got} bytes, expected {expected}")]
    SignatureLength {
        /// The signing key's name.
        name: String,
        /// The signature's length after the key ID (bytes).
        got: usize,
        /// The length its type has (bytes).
        expected: usize,
    },
    /// A known key's signature does not verify.
    #[error("the signature by {0} does not verify")]
    BadSignature(String),
    /// No signature of any known key.
    #[error("no signature by a known key verifies this note")]
    NoKnownSignature,
}

/// One signature line of a note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoteSignature {
    /// The signer's key name.
    pub name: String,
    /// The key ID: first four bytes of SHA-256(name ‖ 0x0A ‖ type ‖ public key), big-endian.
    pub key_id: u32,
    /// The signature bytes after the key ID.
    pub signature: Vec<u8>,
}

impl NoteSignature {
    /// The line as written in a note: "— name base64(id ‖ signature)\n".
    pub fn to_line(&self) -> String {
        let mut raw = self.key_id.to_be_bytes().to_vec();
        raw.extend_from_slice(&self.signature);
        format!("{SIGNATURE_PREFIX}{} {}\n", self.name, B64.encode(raw))
    }
}

/// A signed note: its text (ending with a newline) and its signature lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    text: String,
    signatures: Vec<NoteSignature>,
}

/// A key name is non-empty and holds no Unicode space and no plus sign.
pub fn valid_key_name(name: &str) -> bool {
    !name.is_empty() && !name.chars().any(|c| c.is_whitespace() || c == '+')
}

/// The key ID of a key: SHA-256(name ‖ 0x0A ‖ type ‖ public key)[:4], big-endian.
pub fn key_id(name: &str, alg: u8, public_key: &[u8]) -> u32 {
    let mut h = Sha256::new();
    h.update(name.as_bytes());
    h.update([b'\n', alg]);
    h.update(public_key);
    let digest = h.finalize();
    u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]])
}

impl Note {
    /// A note with `text` (which must end with a newline) and no signatures yet.
    pub fn new(text: String) -> Result<Note, NoteError> {
        check_characters(text.as_bytes())?;
        if !text.ends_with('\n') {
            return Err(NoteError::NoFinalNewline);
        }
        Ok(Note {
            text,
            signatures: Vec::new(),
        })
    }

    /// Parses a note's bytes: UTF-8 without control characters other than newline, the text
    /// up to the last blank line, then one or more well-formed signature lines. Signatures
    /// are not verified here (see [`Note::verify`]).
    pub fn parse(bytes: &[u8]) -> Result<Note, NoteError> {
        if bytes.len() > MAX_NOTE_BYTES {
            return Err(NoteError::TooLarge(bytes.len()));
        }
        let all = std::str::from_utf8(bytes).map_err(|_| NoteError::NotUtf8)?;
        check_characters(bytes)?;
        if !all.ends_with('\n') {
            return Err(NoteError::NoFinalNewline);
        }
        // The text ends at the last blank line ("\n\n": the text's own final newline and the
        // blank line).
        let split = all.rfind("\n\n").ok_or(NoteError::NoSignatureBlock)?;
        let text = &all[..split + 1];
        let block = &all[split + 2..];
        if block.is_empty() {
            return Err(NoteError::NoSignatures);
        }
        let lines: Vec<&str> = block
            .strip_suffix('\n')
            .unwrap_or(block)
            .split('\n')
            .collect();
        if lines.len() > MAX_SIGNATURES {
            return Err(NoteError::TooManySignatures(lines.len()));
        }
        let mut signatures = Vec::with_capacity(lines.len());
        for (i, line) in lines.iter().enumerate() {
            signatures.push(parse_signature_line(i + 1, line)?);
        }
        Ok(Note {
            text: text.to_string(),
            signatures,
        })
    }

    /// The signed text, including its final newline.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The signature lines, in order.
    pub fn signatures(&self) -> &[NoteSignature] {
        &self.signatures
    }

    /// Adds a signature line (a signer's or a cosigner's).
    pub fn push_signature(&mut self, signature: NoteSignature) {
        self.signatures.push(signature);
    }

    /// The note as text: the text, a blank line, the signature lines.
    pub fn to_text(&self) -> String {
        let mut out = self.text.clone();
        out.push('\n');
        for s in &self.signatures {
            out.push_str(&s.to_line());
        }
        out
    }

    /// Verifies the note with the `known` keys as the specification says: signatures by
    /// unknown keys (name and ID not both matching) are ignored; a known key's signature that
    /// fails makes the whole note refused; at least one known signature must verify. Returns
    /// the verified signatures.
    pub fn verify(&self, known: &[Verifier]) -> Result<Vec<Verified>, NoteError> {
        let mut verified = Vec::new();
        for sig in &self.signatures {
            for key in known.iter().filter(|k| k.matches(sig)) {
                verified.push(key.verify(&self.text, sig)?);
            }
        }
        if verified.is_empty() {
            return Err(NoteError::NoKnownSignature);
        }
        Ok(verified)
    }
}

fn check_characters(bytes: &[u8]) -> Result<(), NoteError> {
    match bytes
        .iter()
        .find(|&&b| (b < 0x20 && b != b'\n') || b == 0x7f)
    {
        Some(&b) => Err(NoteError::ControlCharacter(b)),
        None => Ok(()),
    }
}

fn parse_signature_line(line: usize, text: &str) -> Result<NoteSignature, NoteError> {
    let bad = |why| NoteError::SignatureLine { line, why };
    let rest = text
        .strip_prefix(SIGNATURE_PREFIX)
        .ok_or(bad("it does not start with an em dash and a space"))?;
    let (name, encoded) = rest
        .split_once(' ')
        .ok_or(bad("no space between the key name and the signature"))?;
    if !valid_key_name(name) {
        return Err(bad(
            "the key name is empty or contains a space or plus sign",
        ));
    }
    let raw = B64
        .decode(encoded)
        .map_err(|_| bad("the signature is not standard base64"))?;
    if raw.len() < 5 {
        return Err(bad("the signature is shorter than a key ID and one byte"));
    }
    Ok(NoteSignature {
        name: name.to_string(),
        key_id: u32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]),
        signature: raw[4..].to_vec(),
    })
}

/// A signature that verified: whose, and for a cosignature, its timestamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The key name.
    pub name: String,
    /// The key ID.
    pub key_id: u32,
    /// The signature type (0x01 note signature, 0x04 cosignature).
    pub alg: u8,
    /// A cosignature's time (POSIX seconds); `None` for a plain note signature.
    pub timestamp: Option<u64>,
}

/// A public key that checks note signatures (type 0x01) or checkpoint cosignatures (0x04).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verifier {
    name: String,
    id: u32,
    alg: u8,
    key: VerifyingKey,
}

impl Verifier {
    /// A verifier for `key` under `name`, of type `alg` (0x01 or 0x04); weak keys refused.
    pub fn new(name: &str, alg: u8, key: VerifyingKey) -> Result<Verifier, NoteError> {
        if !valid_key_name(name) {
            return Err(NoteError::BadKeyName(name.into()));
        }
        if alg != ALG_ED25519 && alg != ALG_COSIGNATURE_V1 {
            return Err(NoteError::UnsupportedAlgorithm(alg));
        }
        if key.is_weak() {
            return Err(NoteError::WeakKey(name.into()));
        }
        Ok(Verifier {
            name: name.to_string(),
            id: key_id(name, alg, key.as_bytes()),
            alg,
            key,
        })
    }

    /// Parses a vkey: `name+hex(key ID)+base64(type ‖ public key)`; the key ID must match.
    pub fn parse(vkey: &str) -> Result<Verifier, NoteError> {
        let mut parts = vkey.trim_end_matches('\n').splitn(3, '+');
        let (Some(name), Some(id_hex), Some(key_b64)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(NoteError::BadVerifierKey(
                "expected name+keyid+key, three parts separated by plus signs",
            ));
        };
        if id_hex.len() != 8 || !id_hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(NoteError::BadVerifierKey("the key ID is not 8 hex digits"));
        }
        let claimed = u32::from_str_radix(id_hex, 16)
            .map_err(|_| NoteError::BadVerifierKey("the key ID is not 8 hex digits"))?;
        let raw = B64
            .decode(key_b64)
            .map_err(|_| NoteError::BadVerifierKey("the key is not standard base64"))?;
        let (&alg, public) = raw
            .split_first()
            .ok_or(NoteError::BadVerifierKey("the key is empty"))?;
        if alg != ALG_ED25519 && alg != ALG_COSIGNATURE_V1 {
            return Err(NoteError::UnsupportedAlgorithm(alg));
        }
        let bytes: [u8; 32] = public
            .try_into()
            .map_err(|_| NoteError::BadVerifierKey("an Ed25519 key is 32 bytes"))?;
        let key = VerifyingKey::from_bytes(&bytes).map_err(|_| NoteError::WeakKey(name.into()))?;
        let verifier = Verifier::new(name, alg, key)?;
        if verifier.id != claimed {
            return Err(NoteError::KeyIdMismatch {
                name: name.into(),
                claimed,
                computed: verifier.id,
            });
        }
        Ok(verifier)
    }

    /// The vkey text: `name+hex(key ID)+base64(type ‖ public key)`.
    pub fn to_vkey(&self) -> String {
        let mut raw = vec![self.alg];
        raw.extend_from_slice(self.key.as_bytes());
        format!("{}+{:08x}+{}", self.name, self.id, B64.encode(raw))
    }

    /// The key name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The key ID.
    pub fn key_id(&self) -> u32 {
        self.id
    }

    /// The signature type (0x01 or 0x04).
    pub fn alg(&self) -> u8 {
        self.alg
    }

    /// The Ed25519 public key.
    pub fn public_key(&self) -> &VerifyingKey {
        &self.key
    }

    /// Whether a signature line names this key (name and key ID both match).
    pub fn matches(&self, sig: &NoteSignature) -> bool {
        sig.name == self.name && sig.key_id == self.id
    }

    /// Verifies one signature line of this key over the note `text` (strict Ed25519). For a
    /// cosignature, the signed message is "cosignature/v1\ntime <t>\n" ‖ text.
    pub fn verify(&self, text: &str, sig: &NoteSignature) -> Result<Verified, NoteError> {
        let (message, signature, timestamp) = match self.alg {
            ALG_ED25519 => (text.as_bytes().to_vec(), sig.signature.as_slice(), None),
            _ => {
                if sig.signature.len() != 72 {
                    return Err(NoteError::SignatureLength {
                        name: self.name.clone(),
                        got: sig.signature.len(),
                        expected: 72,
                    });
                }
                let mut t = [0u8; 8];
                t.copy_from_slice(&sig.signature[..8]);
                let time = u64::from_be_bytes(t);
                if time > i64::MAX as u64 {
                    return Err(NoteError::BadSignature(self.name.clone()));
                }
                (
                    cosigned_message(time, text),
                    &sig.signature[8..],
                    Some(time),
                )
            }
        };
        let bytes: [u8; 64] = signature
            .try_into()
            .map_err(|_| NoteError::SignatureLength {
                name: self.name.clone(),
                got: signature.len(),
                expected: 64,
            })?;
        self.key
            .verify_strict(&message, &Signature::from_bytes(&bytes))
            .map_err(|_| NoteError::BadSignature(self.name.clone()))?;
        Ok(Verified {
            name: self.name.clone(),
            key_id: self.id,
            alg: self.alg,
            timestamp,
        })
    }
}

/// What a v1 cosignature signs: "cosignature/v1\ntime <t>\n" and the checkpoint text.
fn cosigned_message(time: u64, text: &str) -> Vec<u8> {
    format!("cosignature/v1\ntime {time}\n{text}").into_bytes()
}

/// An Ed25519 private key with its name, signing notes (type 0x01) or cosigning checkpoints
/// (type 0x04).
pub struct NoteSigner {
    verifier: Verifier,
    key: SigningKey,
}

/// Shows the public vkey only.
impl std::fmt::Debug for NoteSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NoteSigner({})", self.verifier.to_vkey())
    }
}

impl NoteSigner {
    /// A signer of type `alg` named `name` with the Ed25519 secret `seed`.
    pub fn new(name: &str, alg: u8, seed: [u8; 32]) -> Result<NoteSigner, NoteError> {
        let key = SigningKey::from_bytes(&seed);
        Ok(NoteSigner {
            verifier: Verifier::new(name, alg, key.verifying_key())?,
            key,
        })
    }

    /// The matching verifier (its vkey is what others configure).
    pub fn verifier(&self) -> &Verifier {
        &self.verifier
    }

    /// The signature line over a note `text`: a plain Ed25519 note signature for type 0x01,
    /// a v1 cosignature at `time` (POSIX seconds) for type 0x04 (`time` ignored for 0x01).
    pub fn sign(&self, text: &str, time: u64) -> NoteSignature {
        let signature = match self.verifier.alg {
            ALG_ED25519 => self.key.sign(text.as_bytes()).to_bytes().to_vec(),
            _ => {
                let time = time.min(i64::MAX as u64);
                let mut out = time.to_be_bytes().to_vec();
                out.extend_from_slice(&self.key.sign(&cosigned_message(time, text)).to_bytes());
                out
            }
        };
        NoteSignature {
            name: self.verifier.name.clone(),
            key_id: self.verifier.id,
            signature,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_specification_example_verifies() {
        // The example vkey and note of c2sp.org/signed-note.
        let vkey = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k";
        let note = "This is an example message.\n\n\u{2014} example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n";
        let verifier = Verifier::parse(vkey).unwrap();
        assert_eq!(verifier.to_vkey(), vkey);
        let parsed = Note::parse(note.as_bytes()).unwrap();
        assert_eq!(parsed.text(), "This is an example message.\n");
        assert_eq!(parsed.to_text(), note);
        let ok = parsed.verify(std::slice::from_ref(&verifier)).unwrap();
        assert_eq!(ok[0].name, "example.com/foo");
        // One changed character in the text: refused.
        let forged = note.replace("example message", "example massage");
        assert_eq!(
            Note::parse(forged.as_bytes()).unwrap().verify(&[verifier]),
            Err(NoteError::BadSignature("example.com/foo".into()))
        );
    }

    #[test]
    fn signs_exactly_as_the_go_note_package() {
        // The key and signed note of golang.org/x/mod/sumdb/note's tests (the private key
        // "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEK…" is type 0x01 and this seed). Ed25519 is
        // deterministic: the same key and text must give the same signature line.
        let seed: [u8; 32] =
            hex::decode("810a1402d5146c8d84f2443330f54080ebf98ee17d9c74f6252fc5d5c7283173")
                .unwrap()
                .try_into()
                .unwrap();
        let signer = NoteSigner::new("PeterNeumann", ALG_ED25519, seed).unwrap();
        assert_eq!(
            signer.verifier().to_vkey(),
            "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
        );
        let text = "If you think cryptography is the answer to your problem,\n\
                    then you don't know what your problem is.\n";
        let mut note = Note::new(text.into()).unwrap();
        note.push_signature(signer.sign(text, 0));
        assert_eq!(
            note.to_text(),
            format!(
                "{text}\n\u{2014} PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"
            )
        );
        // A signature under another name with the same key ID is not this key's.
        let renamed = note.to_text().replace("PeterNeumann", "CarmenSandiego");
        assert_eq!(
            Note::parse(renamed.as_bytes())
                .unwrap()
                .verify(std::slice::from_ref(signer.verifier())),
            Err(NoteError::NoKnownSignature)
        );
    }

    #[test]
    fn unknown_keys_are_ignored_and_cosignatures_verify() {
        let log = NoteSigner::new("example.org/log", ALG_ED25519, [1; 32]).unwrap();
        let witness = NoteSigner::new("example.org/w", ALG_COSIGNATURE_V1, [2; 32]).unwrap();
        let stranger = NoteSigner::new("example.org/log", ALG_ED25519, [3; 32]).unwrap();
        let mut note = Note::new("example.org/log\n1\nAAAA\n".into()).unwrap();
        note.push_signature(stranger.sign(note.text(), 0));
        note.push_signature(log.sign(note.text(), 0));
        note.push_signature(witness.sign(note.text(), 1_700_000_000));
        let parsed = Note::parse(note.to_text().as_bytes()).unwrap();
        let ok = parsed
            .verify(&[log.verifier().clone(), witness.verifier().clone()])
            .unwrap();
        assert_eq!(ok.len(), 2);
        assert_eq!(ok[1].timestamp, Some(1_700_000_000));
        assert_eq!(
            parsed.verify(&[]),
            Err(NoteError::NoKnownSignature),
            "no known key"
        );
        // The vkeys round-trip, and a wrong key ID in a vkey is refused.
        let vkey = witness.verifier().to_vkey();
        assert_eq!(&Verifier::parse(&vkey).unwrap(), witness.verifier());
        let (name, rest) = vkey.split_once('+').unwrap();
        let wrong = format!("{name}+00000000{}", &rest[8..]);
        assert!(matches!(
            Verifier::parse(&wrong),
            Err(NoteError::KeyIdMismatch { .. })
        ));
    }

    #[test]
    fn malformed_notes_are_refused() {
        let cases: [(&[u8], NoteError); 6] = [
            (b"text\n", NoteError::NoSignatureBlock),
            (b"text\n\n", NoteError::NoSignatures),
            (b"text\n\n\xe2\x80\x94 a b", NoteError::NoFinalNewline),
            (b"te\rxt\n\n", NoteError::ControlCharacter(b'\r')),
            (b"\xff\n\n", NoteError::NotUtf8),
            (
                b"text\n\n- a AAAAAAAA\n",
                NoteError::SignatureLine {
                    line: 1,
                    why: "it does not start with an em dash and a space",
                },
            ),
        ];
        for (bytes, want) in cases {
            assert_eq!(Note::parse(bytes), Err(want));
        }
    }

    proptest! {
        #[test]
        fn parsers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = Note::parse(&bytes);
            let _ = Verifier::parse(&String::from_utf8_lossy(&bytes));
        }

        #[test]
        fn notes_with_signature_lines_round_trip(text in "[a-z0-9 /.]{1,40}", n in 1usize..5) {
            let signer = NoteSigner::new("x.example/k", ALG_ED25519, [7; 32]).unwrap();
            let mut note = Note::new(format!("{text}\n")).unwrap();
            for _ in 0..n {
                note.push_signature(signer.sign(note.text(), 0));
            }
            let parsed = Note::parse(note.to_text().as_bytes()).unwrap();
            prop_assert_eq!(&parsed, &note);
            prop_assert!(parsed.verify(&[signer.verifier().clone()]).is_ok());
        }
    }
}
