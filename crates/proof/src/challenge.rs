//! A challenge and the seeds it determines.

use pog_signed::{GpuUuid, PublicKey};
use pog_spec::Precision;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Version of the challenge's encoding, seed derivation and answer; bumped on any change.
/// 4: the openings travel compact (`wire::Openings`: the leaves end to end and one multiproof,
/// base64) and plans cut 128-byte leaves (`params::LEAF_BYTES`); an agent of version 3 refuses
/// the challenge instead of answering in a shape the validator no longer reads. The seeds are
/// derived as in version 3 (domain "pog-proof v3").
/// 5: the commitment's tree is hashed by SHA-256's compression function alone
/// (`pog_merkle::Blake3`: a 128-byte leaf two compressions, a node one, where RFC 6962's
/// hashes took three and two); everything else as in version 4.
/// 6: the openings travel as a frame (`wire::Openings::seal`: a signed BLAKE3 digest, then the
/// raw bytes), not as base64 in a signed JSON body; everything else as in version 5.
/// 7: every product of a batch shares one A (only B is seeded per product, [`Challenge::seeds`],
/// domain "pog-proof v7"), so the agent generates A once a batch instead of once a product,
/// and plans cut 256-byte leaves (`params::LEAF_BYTES`), half the tree; the frame is version
/// 6's.
/// 8: INT8's outputs are committed by their low 16 bits (`pog_matgen::committed_bytes`), 128 to
/// a 256-byte leaf: half the agent's INT8 leaf hashing and tree; seeds and frame as in 7.
pub const CHALLENGE_VERSION: u32 = 8;

/// What the validator asks one GPU to compute.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Challenge {
    /// [`CHALLENGE_VERSION`]; a challenge of another version is refused.
    pub version: u32,
    /// Fresh randomness from the validator: nothing can be computed before it is known.
    /// Lowercase hex in JSON.
    #[serde(with = "hex::serde")]
    pub nonce: [u8; 32],
    /// Whom it is for and from (the GPU, its agent, the validator), all mixed into every
    /// seed: one GPU's work is worthless as another's, at another PCI address, under another
    /// agent key or for another validator. Flattened: its four fields sit in the challenge's
    /// JSON.
    #[serde(flatten)]
    pub to: Addressee,
    /// The precision of inputs and outputs ([`crate::params::choose_precision`]): the one in which
    /// the claimed model leads the next slower one by the widest margin.
    pub precision: Precision,
    /// m = n = k of each GEMM.
    pub size: u64,
    /// Independent GEMMs to compute.
    pub batch: u32,
    /// Output elements per Merkle leaf.
    pub leaf_elements: u32,
}

/// Who a challenge (of any kind) is for and from: the GPU (UUID, PCI address), the agent's
/// key and the validator's key, all bound into what the challenge derives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Addressee {
    /// The GPU that must answer.
    pub gpu_uuid: GpuUuid,
    /// Its PCI address as registered (e.g. "00000000:00:06.0"): a record names the physical
    /// slot that proved, and the same UUID claimed at another address needs its own work.
    pub gpu_bus_id: String,
    /// The Ed25519 public key of the agent that must answer: the answer is worth nothing
    /// under any other agent key, and an agent refuses a challenge addressed to another (a
    /// relay cannot pass a victim's work off as its own).
    pub agent_key: PublicKey,
    /// The public key of the validator that issued it: an agent answers only challenges
    /// whose issuer signed them.
    pub validator_key: PublicKey,
}

impl Addressee {
    /// The GPU, with no one's keys (32 zero bytes each): for a challenge made only to check
    /// its shape or to prepare a prover for it, which is never sent.
    pub fn shape_only(gpu_uuid: &GpuUuid, gpu_bus_id: &str) -> Addressee {
        let no_one = PublicKey::from([0; 32]);
        Addressee {
            gpu_uuid: gpu_uuid.clone(),
            gpu_bus_id: gpu_bus_id.to_string(),
            agent_key: no_one.clone(),
            validator_key: no_one,
        }
    }
}

/// Writes the values a challenge is bound to into `h`: the nonce, then each string preceded
/// by its length (u64 LE) so no two tuples run together into the same bytes. Shared by both
/// challenge kinds' derivations (the GEMM seeds here, the memory data set's key in
/// [`crate::memory`]).
pub(crate) fn bind(h: &mut Sha256, nonce: &[u8; 32], to: &Addressee) {
    h.update(nonce);
    let bound: [&str; 4] = [
        &to.gpu_uuid,
        &to.gpu_bus_id,
        &to.agent_key,
        &to.validator_key,
    ];
    for s in bound {
        h.update((s.len() as u64).to_le_bytes());
        h.update(s.as_bytes());
    }
}

/// The largest product side a challenge may ask for (a 65536² FP32 output is 16 GiB).
pub const MAX_SIZE: u64 = 65_536;
/// The most products one challenge may ask for.
pub const MAX_BATCH: u32 = 100_000;
/// The most bytes of outputs one leaf may hold: one BLAKE3 chunk, what a commitment hash
/// takes (`pog_merkle::commitment`).
pub const MAX_LEAF_BYTES: u64 = pog_merkle::commitment::MAX_LEAF_BYTES as u64;

/// A challenge whose shape no prover should attempt.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a challenge needs 1 ≤ size ≤ {MAX_SIZE}, 1 ≤ batch ≤ {MAX_BATCH} and leaves of 1 element to {MAX_LEAF_BYTES} bytes; this one asks for size {size}, batch {batch}, leaf elements {leaf_elements}")]
pub struct BadShape {
    /// The side asked for.
    pub size: u64,
    /// The products asked for.
    pub batch: u32,
    /// The output elements per leaf asked for.
    pub leaf_elements: u32,
}

impl Challenge {
    /// Refuses shapes that are empty or so large that counting their leaves could overflow;
    /// within these bounds every size and index computation fits in a u64.
    pub fn check_shape(&self) -> Result<(), BadShape> {
        let ok = (1..=MAX_SIZE).contains(&self.size)
            && (1..=MAX_BATCH).contains(&self.batch)
            && self.leaf_elements >= 1
            && u64::from(self.leaf_elements) * pog_matgen::committed_bytes(self.precision) as u64
                <= MAX_LEAF_BYTES;
        if ok {
            Ok(())
        } else {
            Err(BadShape {
                size: self.size,
                batch: self.batch,
                leaf_elements: self.leaf_elements,
            })
        }
    }

    /// The seeds of A and B in GEMM `index` of the batch: the first 8 bytes (LE) of
    /// SHA-256("pog-proof v7" ‖ nonce ‖ uuid ‖ bus id ‖ agent key ‖ validator key ‖ "A") for
    /// A, the same for every product, and of SHA-256("pog-proof v7" ‖ … ‖ validator key ‖
    /// index ‖ "B") for B; each string preceded by its length as u64 LE so no two tuples run
    /// together into the same bytes.
    ///
    /// One A for the batch halves the agent's generation (docs/protocol.md, "Cost") and
    /// costs nothing in soundness: every product is still a fresh n³ product, since its B is
    /// unknown before the nonce, and products sharing a factor are no cheaper together than
    /// apart (A·[B₁ … B_g] is g products' multiply-adds).
    pub fn seeds(&self, index: u32) -> (u64, u64) {
        let seed = |index: Option<u32>, which: &[u8]| {
            let mut h = Sha256::new();
            h.update(b"pog-proof v7");
            bind(&mut h, &self.nonce, &self.to);
            if let Some(index) = index {
                h.update(index.to_le_bytes());
            }
            h.update(which);
            let digest = h.finalize();
            u64::from_le_bytes(digest[..8].try_into().expect("32-byte digest"))
        };
        (seed(None, b"A"), seed(Some(index), b"B"))
    }

    /// GEMM `index` as a seeded product the checker can recompute element by element.
    pub fn gemm(&self, index: u32) -> pog_matgen::SeededGemm {
        let (seed_a, seed_b) = self.seeds(index);
        pog_matgen::SeededGemm {
            precision: self.precision,
            m: self.size,
            n: self.size,
            k: self.size,
            seed_a,
            seed_b,
            a_layout: pog_matgen::ALayout::KMajor,
        }
    }

    /// Total multiply-add FLOPs the challenge costs.
    pub fn flops(&self) -> f64 {
        f64::from(self.batch) * 2.0 * (self.size as f64).powi(3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn challenge(uuid: &str) -> Challenge {
        Challenge {
            version: CHALLENGE_VERSION,
            nonce: [7; 32],
            to: Addressee {
                gpu_uuid: uuid.parse().unwrap(),
                gpu_bus_id: "00000000:00:06.0".into(),
                agent_key: pog_signed::PublicKey::from([0xaa; 32]),
                validator_key: pog_signed::PublicKey::from([0xbb; 32]),
            },
            precision: Precision::Bf16,
            size: 64,
            batch: 2,
            leaf_elements: 64,
        }
    }

    #[test]
    fn shapes_that_could_overflow_are_refused() {
        assert!(challenge("GPU-a").check_shape().is_ok());
        for bad in [
            Challenge {
                size: 0,
                ..challenge("GPU-a")
            },
            Challenge {
                size: 1 << 32,
                ..challenge("GPU-a")
            },
            Challenge {
                batch: 0,
                ..challenge("GPU-a")
            },
            Challenge {
                batch: u32::MAX,
                ..challenge("GPU-a")
            },
            Challenge {
                leaf_elements: 0,
                ..challenge("GPU-a")
            },
            // One BLAKE3 chunk at most: 1024 bytes, 257 FP32 outputs are 1028.
            Challenge {
                precision: Precision::Fp32,
                leaf_elements: 257,
                ..challenge("GPU-a")
            },
        ] {
            assert!(bad.check_shape().is_err(), "{bad:?}");
        }
        let largest = Challenge {
            size: MAX_SIZE,
            batch: MAX_BATCH,
            leaf_elements: 1,
            ..challenge("GPU-a")
        };
        assert!(largest.check_shape().is_ok());
        let widest_leaf = Challenge {
            precision: Precision::Fp32,
            leaf_elements: 256,
            ..challenge("GPU-a")
        };
        assert!(widest_leaf.check_shape().is_ok());
        assert_eq!(
            largest.leaf_count(),
            (MAX_SIZE * MAX_SIZE) * u64::from(MAX_BATCH)
        );
    }

    #[test]
    fn the_nonce_is_lowercase_hex_in_json() {
        let mut c = challenge("GPU-a");
        c.nonce[0] = 0xab;
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(json["nonce"], format!("ab{}", "07".repeat(31)), "{json}");
        assert_eq!(
            serde_json::from_value::<Challenge>(json.clone()).unwrap(),
            c
        );
        let mut short = json;
        short["nonce"] = "abcd".into();
        assert!(serde_json::from_value::<Challenge>(short).is_err());
    }

    #[test]
    fn seeds_depend_on_nonce_uuid_bus_id_index_and_matrix() {
        let a = challenge("GPU-a");
        let (sa, sb) = a.seeds(0);
        assert_ne!(sa, sb);
        assert_eq!(a.seeds(1).0, sa, "the batch shares one A");
        assert_ne!(a.seeds(1).1, sb, "each product has its own B");
        // Both seeds are bound to everything the challenge names: compared one by one, since
        // a pair differs when either half does.
        let differs = |other: &Challenge, what: &str| {
            let (oa, ob) = other.seeds(0);
            assert_ne!(oa, sa, "A: {what}");
            assert_ne!(ob, sb, "B: {what}");
        };
        differs(&challenge("GPU-b"), "the UUID is bound");
        let mut other_nonce = a.clone();
        other_nonce.nonce[0] ^= 1;
        differs(&other_nonce, "the nonce is bound");
        let mut other_slot = a.clone();
        other_slot.to.gpu_bus_id = "00000000:00:07.0".into();
        differs(&other_slot, "the bus id is bound");
        let mut relayed = a.clone();
        relayed.to.agent_key = pog_signed::PublicKey::from([0xcc; 32]);
        differs(&relayed, "the agent's key is bound");
        let mut elsewhere = a.clone();
        elsewhere.to.validator_key = pog_signed::PublicKey::from([0xcc; 32]);
        differs(&elsewhere, "the validator's key is bound");
        assert_eq!(a.seeds(1), challenge("GPU-a").seeds(1), "deterministic");
        assert_eq!(a.flops(), 2.0 * 2.0 * 64f64.powi(3));
    }
}
