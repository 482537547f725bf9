//! A witness's logic (C2SP `tlog-witness`), pure: for each log it follows, it remembers the
//! latest checkpoint it cosigned; given a new checkpoint and a consistency proof from that
//! one, it verifies and cosigns (C2SP `tlog-cosignature` v1), or refuses with the reason and
//! the HTTP status the protocol gives it. A log that shows two histories (a fork) cannot get
//! both cosigned by the same witness.
//!
//! The caller must persist [`Witness::latest`] for the origin *before* handing out the
//! cosignature, so that a restarted witness never cosigns a fork of what it cosigned.
//!
//! The `add-checkpoint` request body: "old <size>\n", one base64 proof hash per line, an
//! empty line, the checkpoint note ([`AddCheckpoint`]).

use crate::checkpoint::{Checkpoint, CheckpointError, SignedCheckpoint};
use crate::note::{NoteError, NoteSignature, NoteSigner, Verifier};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use pog_merkle::{empty_root, verify_consistency, Hash};
use std::collections::HashMap;

/// The most proof lines an add-checkpoint request may carry.
pub const MAX_PROOF_LINES: usize = 63;

/// Why a witness refused to cosign.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The request or its checkpoint is malformed (400).
    #[error("malformed add-checkpoint request: {0}")]
    Malformed(String),
    /// The checkpoint's origin is no log the witness follows (404).
    #[error("this witness does not follow log {0:?}")]
    UnknownLog(String),
    /// The log's signature is missing or fails (403).
    #[error("the checkpoint is not validly signed by the log's key: {0}")]
    BadSignature(String),
    /// The old size exceeds the checkpoint's (400).
    #[error("old size {old} exceeds the checkpoint's size {new}")]
    OldSizeTooLarge {
        /// The request's old size (entries).
        old: u64,
        /// The checkpoint's size (entries).
        new: u64,
    },
    /// A smaller tree than the witness cosigned (409).
    #[error(
        "the log was rolled back: this witness cosigned size {latest}, the checkpoint has {new}"
    )]
    Rollback {
        /// The size the witness last cosigned (entries).
        latest: u64,
        /// The checkpoint's size (entries), smaller.
        new: u64,
    },
    /// The request builds on another size than the witness's latest (409).
    #[error("the request builds on size {claimed}, but this witness last cosigned size {latest}")]
    Conflict {
        /// The old size the request claims the witness holds (entries).
        claimed: u64,
        /// The size the witness last cosigned (entries).
        latest: u64,
    },
    /// The same size as the witness's latest with another root (422).
    #[error("fork: this witness cosigned a different root for size {size}")]
    Fork {
        /// The size both checkpoints claim (entries).
        size: u64,
    },
    /// A size-0 checkpoint without the empty tree's root (422).
    #[error("a checkpoint of size 0 must carry the empty tree's root")]
    BadEmptyRoot,
    /// A non-empty proof from size 0 (422).
    #[error("a proof from size 0 must be empty")]
    ProofFromZero,
    /// The consistency proof fails (422).
    #[error("the consistency proof from size {old} to {new} does not verify: the log rewrote its history")]
    Inconsistent {
        /// The size the proof starts from (entries).
        old: u64,
        /// The checkpoint's size (entries).
        new: u64,
    },
}

impl Refusal {
    /// Whether the refused checkpoint, validly signed by the log, contradicts what the
    /// witness cosigned: another root at the same size, or a tree the consistency proof does
    /// not lead to. Either is evidence that the log signed two histories (a fork attempt).
    pub fn is_fork_evidence(&self) -> bool {
        matches!(self, Refusal::Fork { .. } | Refusal::Inconsistent { .. })
    }

    /// The HTTP status c2sp.org/tlog-witness gives this refusal (400, 403, 404, 409 or 422).
    pub fn http_status(&self) -> u16 {
        match self {
            Refusal::Malformed(_) | Refusal::OldSizeTooLarge { .. } => 400,
            Refusal::BadSignature(_) => 403,
            Refusal::UnknownLog(_) => 404,
            Refusal::Conflict { .. } | Refusal::Rollback { .. } => 409,
            Refusal::Fork { .. }
            | Refusal::BadEmptyRoot
            | Refusal::ProofFromZero
            | Refusal::Inconsistent { .. } => 422,
        }
    }
}

/// A parsed `add-checkpoint` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddCheckpoint {
    /// The size of the checkpoint the proof starts from.
    pub old_size: u64,
    /// The consistency proof.
    pub proof: Vec<Hash>,
    /// The checkpoint note's bytes.
    pub checkpoint: Vec<u8>,
}

impl AddCheckpoint {
    /// Parses a request body.
    pub fn parse(body: &[u8]) -> Result<AddCheckpoint, Refusal> {
        let bad = |s: &str| Refusal::Malformed(s.to_string());
        let mut rest = body;
        let mut line = || -> Result<&[u8], Refusal> {
            let at = rest
                .iter()
                .position(|&b| b == b'\n')
                .ok_or_else(|| bad("a line without its newline"))?;
            let (l, r) = rest.split_at(at);
            rest = &r[1..];
            Ok(l)
        };
        let old = std::str::from_utf8(line()?)
            .ok()
            .and_then(|l| l.strip_prefix("old "))
            .filter(|d| {
                !d.is_empty()
                    && d.bytes().all(|b| b.is_ascii_digit())
                    && (*d == "0" || !d.starts_with('0'))
            })
            .and_then(|d| d.parse().ok())
            .ok_or_else(|| bad("the first line is not \"old <size>\""))?;
        let mut proof = Vec::new();
        loop {
            let l = line()?;
            if l.is_empty() {
                break;
            }
            if proof.len() == MAX_PROOF_LINES {
                return Err(bad("more than 63 proof lines"));
            }
            let h: Hash = B64
                .decode(l)
                .ok()
                .and_then(|h| h.try_into().ok())
                .ok_or_else(|| bad("a proof line is not a base64 32-byte hash"))?;
            proof.push(h);
        }
        Ok(AddCheckpoint {
            old_size: old,
            proof,
            checkpoint: rest.to_vec(),
        })
    }

    /// The request body.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = format!("old {}\n", self.old_size).into_bytes();
        for h in &self.proof {
            out.extend_from_slice(B64.encode(h).as_bytes());
            out.push(b'\n');
        }
        out.push(b'\n');
        out.extend_from_slice(&self.checkpoint);
        out
    }
}

/// A witness: its cosigning key and, per followed log, the log's key and the latest
/// checkpoint it cosigned.
pub struct Witness {
    signer: NoteSigner,
    logs: HashMap<String, (Verifier, Option<Checkpoint>)>,
}

impl Witness {
    /// A witness cosigning with `signer` (a type 0x04 key).
    pub fn new(signer: NoteSigner) -> Witness {
        Witness {
            signer,
            logs: HashMap::new(),
        }
    }

    /// Follows the log whose key is `log` (origin = key name), resuming from the latest
    /// checkpoint cosigned before (as persisted), if any.
    pub fn follow(&mut self, log: Verifier, latest: Option<Checkpoint>) {
        self.logs.insert(log.name().to_string(), (log, latest));
    }

    /// The latest checkpoint cosigned for `origin`.
    pub fn latest(&self, origin: &str) -> Option<&Checkpoint> {
        self.logs.get(origin).and_then(|(_, c)| c.as_ref())
    }

    /// The witness's public cosignature key.
    pub fn verifier(&self) -> &Verifier {
        self.signer.verifier()
    }

    /// Handles an add-checkpoint request at time `now` (POSIX seconds): verifies the log's
    /// signature and the consistency with the latest cosigned checkpoint, records the new one
    /// as latest and returns the cosignature line.
    pub fn add_checkpoint(
        &mut self,
        request: &AddCheckpoint,
        now: u64,
    ) -> Result<NoteSignature, Refusal> {
        let signed = SignedCheckpoint::parse(&request.checkpoint)
            .map_err(|e| Refusal::Malformed(e.to_string()))?;
        let new = signed.checkpoint.clone();
        let (log, latest) = self
            .logs
            .get(&new.origin)
            .ok_or_else(|| Refusal::UnknownLog(new.origin.clone()))?;
        signed.verify(log).map_err(|e| match e {
            CheckpointError::Note(NoteError::BadSignature(_))
            | CheckpointError::NotSignedByLog(_) => Refusal::BadSignature(e.to_string()),
            other => Refusal::BadSignature(other.to_string()),
        })?;
        let (latest_size, latest_root) = latest
            .as_ref()
            .map_or((0, empty_root()), |c| (c.size, c.root));
        // In c2sp.org/tlog-witness's order: an old size beyond the checkpoint is a bad request
        // (400) whatever the witness holds; a smaller tree than the witness's latest, or a
        // request from another size, is a conflict (409, answered with the latest size).
        if request.old_size > new.size {
            return Err(Refusal::OldSizeTooLarge {
                old: request.old_size,
                new: new.size,
            });
        }
        if new.size < latest_size {
            return Err(Refusal::Rollback {
                latest: latest_size,
                new: new.size,
            });
        }
        if request.old_size != latest_size {
            return Err(Refusal::Conflict {
                claimed: request.old_size,
                latest: latest_size,
            });
        }
        if new.size == 0 && new.root != empty_root() {
            return Err(Refusal::BadEmptyRoot);
        }
        if latest_size == 0 && !request.proof.is_empty() {
            return Err(Refusal::ProofFromZero);
        }
        if new.size == latest_size && new.root != latest_root {
            return Err(Refusal::Fork { size: new.size });
        }
        if !verify_consistency(
            latest_size,
            new.size,
            &latest_root,
            &new.root,
            &request.proof,
        ) {
            return Err(Refusal::Inconsistent {
                old: latest_size,
                new: new.size,
            });
        }
        let cosignature = self.signer.sign(signed.note.text(), now);
        if let Some(entry) = self.logs.get_mut(&new.origin) {
            entry.1 = Some(new);
        }
        Ok(cosignature)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::note::{ALG_COSIGNATURE_V1, ALG_ED25519};
    use pog_merkle::{leaf_hash, Tree};
    use proptest::prelude::*;

    fn tree(n: u64, salt: u8) -> Tree {
        Tree::from_leaf_hashes(
            (0..n)
                .map(|i| leaf_hash(&[i as u8, (i >> 8) as u8, salt]))
                .collect(),
        )
    }

    fn request(log: &NoteSigner, t: &Tree, old: u64) -> AddCheckpoint {
        let cp = Checkpoint {
            origin: log.verifier().name().into(),
            size: t.size(),
            root: t.root(),
            extensions: vec![],
        }
        .sign(log);
        AddCheckpoint {
            old_size: old,
            proof: t.consistency_proof(old).unwrap(),
            checkpoint: cp.to_text().into_bytes(),
        }
    }

    #[test]
    fn cosigns_growth_and_refuses_forks_and_rollbacks() {
        let log = NoteSigner::new("pog.test/log", ALG_ED25519, [1; 32]).unwrap();
        let mut w =
            Witness::new(NoteSigner::new("pog.test/w", ALG_COSIGNATURE_V1, [2; 32]).unwrap());
        w.follow(log.verifier().clone(), None);
        let t10 = tree(10, 0);
        let req = request(&log, &t10, 0);
        let line = w
            .add_checkpoint(&AddCheckpoint::parse(&req.encode()).unwrap(), 1000)
            .unwrap();
        // The cosignature verifies on the checkpoint.
        let mut signed = SignedCheckpoint::parse(&req.checkpoint).unwrap();
        signed.note.push_signature(line);
        let cos = signed.cosignatures(std::slice::from_ref(w.verifier()));
        assert_eq!(cos[0].1.as_ref().unwrap().timestamp, Some(1000));
        // Growth with a proof.
        let t25 = tree(25, 0);
        w.add_checkpoint(&request(&log, &t25, 10), 1001).unwrap();
        assert_eq!(w.latest("pog.test/log").unwrap().size, 25);
        // A fork: the same size with another history.
        let forked = tree(25, 1);
        let mut r = request(&log, &forked, 25);
        r.proof.clear();
        assert_eq!(w.add_checkpoint(&r, 1002), Err(Refusal::Fork { size: 25 }));
        // A bigger tree that rewrote the cosigned prefix.
        let rewritten = tree(40, 1);
        assert_eq!(
            w.add_checkpoint(&request(&log, &rewritten, 25), 1003),
            Err(Refusal::Inconsistent { old: 25, new: 40 })
        );
        // Rolled back.
        assert_eq!(
            w.add_checkpoint(&request(&log, &t10, 0), 1004),
            Err(Refusal::Rollback {
                latest: 25,
                new: 10
            })
        );
        // Stale old size.
        let t30 = tree(30, 0);
        let e = w
            .add_checkpoint(&request(&log, &t30, 10), 1005)
            .unwrap_err();
        assert_eq!(
            e,
            Refusal::Conflict {
                claimed: 10,
                latest: 25
            }
        );
        assert_eq!(e.http_status(), 409);
        // Signed by another key.
        let impostor = NoteSigner::new("pog.test/log", ALG_ED25519, [3; 32]).unwrap();
        assert!(matches!(
            w.add_checkpoint(&request(&impostor, &t30, 25), 1006),
            Err(Refusal::BadSignature(_))
        ));
        let stranger = NoteSigner::new("pog.test/other", ALG_ED25519, [3; 32]).unwrap();
        assert_eq!(
            w.add_checkpoint(&request(&stranger, &t30, 25), 1007)
                .unwrap_err()
                .http_status(),
            404
        );
        w.add_checkpoint(&request(&log, &t30, 25), 1008).unwrap();
    }

    proptest! {
        #[test]
        fn request_parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = AddCheckpoint::parse(&bytes);
        }
    }
}
