//! A prover on the CPU: computes every output element of a challenge in f64, rounds it to the
//! output format as the GPU would, builds the Merkle tree and opens leaves. For tests and for
//! CI's end-to-end runs at small sizes; it can also cheat in the ways the protocol must catch.

use crate::challenge::Challenge;
use crate::layout::{committed_bytes, encode_committed};
use pog_matgen::{hash, Storage};
use pog_merkle::{Blake3, Hash, Tree, TreeHasher};
use pog_spec::Precision;
use serde::{Deserialize, Serialize};

/// How a prover behaves.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Behaviour {
    /// Computes every element as asked.
    Honest,
    /// Replaces this fraction of the output elements with junk (saves that share of work).
    Junk(f64),
    /// Computes in a lower precision than asked (rounds every input to it first).
    LowerPrecision(Precision),
    /// Runs a CPU proof's timed lanes on at most this many threads (a host claiming more
    /// cores than it has); the other kinds compute honestly.
    Threads(usize),
    /// Holds only this share of a proof of RAM's data set and regenerates the rest when the
    /// walk reads it (a host claiming more RAM than it has); the other kinds compute honestly.
    Holds(f64),
}

/// A leaf and the proof that it is in the committed tree, as a prover opens it. The agent
/// sends the leaves asked together, their paths merged into one multiproof
/// ([`crate::wire::Openings::compact`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opening {
    /// The leaf's index in the commitment.
    pub leaf: u64,
    /// The leaf's bytes: its output elements as committed (`pog_matgen::committed_bytes`).
    pub bytes: Vec<u8>,
    /// The inclusion proof of the leaf under the committed root (a tree of RFC 6962's shape,
    /// `pog_merkle::Blake3`'s hashes).
    pub proof: Vec<Hash>,
}

/// Why a prover could not open leaves.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// A leaf past the end of the commitment.
    #[error("leaf {leaf} is out of range: the commitment has {leaf_count} leaves")]
    OutOfRange {
        /// The leaf asked for.
        leaf: u64,
        /// Leaves in the commitment.
        leaf_count: u64,
    },
    /// The prover itself failed (a GPU prover's device or worker), with its error.
    #[error("the prover failed to open leaves: {0}")]
    Prover(Box<dyn std::error::Error + Send + Sync>),
}

/// What an agent needs from a computed challenge: the commitment, and openings afterwards.
/// The CPU prover below implements it, and so does the agent's GPU prover (`pog_local::provers`).
pub trait Prover: Send + Sync {
    /// The Merkle root over all leaves.
    fn root(&self) -> Hash;
    /// Leaves in the commitment.
    fn leaf_count(&self) -> u64;
    /// The leaves with their inclusion proofs, in the order asked; an error when one is out
    /// of range or the prover fails (opened together: a GPU prover recomputes each product
    /// holding a leaf once).
    fn open(&self, leaves: &[u64]) -> Result<Vec<Opening>, OpenError>;
}

/// A challenge computed on the CPU, kept whole in memory.
pub struct CpuProver {
    tree: Tree,
    leaves: Vec<Vec<u8>>,
}

impl CpuProver {
    /// Computes the whole challenge (O(batch · size³): keep sizes small).
    pub fn compute(challenge: &Challenge, behaviour: Behaviour) -> CpuProver {
        let p = challenge.precision;
        let per_leaf = challenge.leaf_elements.max(1) as usize;
        let mut leaves = Vec::new();
        for g in 0..challenge.batch {
            let gemm = challenge.gemm(g);
            let mut bytes = Vec::new();
            for col in 0..gemm.n {
                for row in 0..gemm.m {
                    let value = match behaviour {
                        Behaviour::Honest | Behaviour::Threads(_) | Behaviour::Holds(_) => {
                            gemm.reference(row, col).value
                        }
                        Behaviour::Junk(f) => {
                            let h = hash(u64::from(g) << 40 ^ col << 20 ^ row, 0xbad);
                            if (h as f64 / u64::MAX as f64) < f {
                                (h % 1000) as f64 - 500.0
                            } else {
                                gemm.reference(row, col).value
                            }
                        }
                        Behaviour::LowerPrecision(lower) => {
                            lower_precision_dot(&gemm, lower, row, col)
                        }
                    };
                    bytes.extend(encode_committed(p, value));
                }
            }
            let leaf_bytes = per_leaf * committed_bytes(p);
            leaves.extend(bytes.chunks(leaf_bytes).map(<[u8]>::to_vec));
        }
        let tree = Tree::build::<Blake3>(leaves.iter().map(|l| Blake3::leaf(l)).collect());
        CpuProver { tree, leaves }
    }
}

impl Prover for CpuProver {
    fn root(&self) -> Hash {
        self.tree.root()
    }

    fn leaf_count(&self) -> u64 {
        self.tree.size()
    }

    fn open(&self, leaves: &[u64]) -> Result<Vec<Opening>, OpenError> {
        open_from(&self.tree, &self.leaves, leaves)
    }
}

/// Opens `wanted` leaves of a tree whose leaf bytes are all kept: the CPU provers' `open`.
pub(crate) fn open_from(
    tree: &Tree,
    bytes: &[Vec<u8>],
    wanted: &[u64],
) -> Result<Vec<Opening>, OpenError> {
    wanted
        .iter()
        .map(|&leaf| {
            let leaf_bytes = usize::try_from(leaf).ok().and_then(|i| bytes.get(i));
            match (leaf_bytes, tree.inclusion_proof(leaf)) {
                (Some(leaf_bytes), Some(proof)) => Ok(Opening {
                    leaf,
                    bytes: leaf_bytes.clone(),
                    proof,
                }),
                _ => Err(OpenError::OutOfRange {
                    leaf,
                    leaf_count: tree.size(),
                }),
            }
        })
        .collect()
}

/// `x` rounded to nearest with `bits` mantissa bits (an FP8 E4M3 value for 3, as long as `x`
/// is within that format's range).
fn round_to_mantissa_bits(x: f64, bits: i32) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let quantum = 2f64.powi(x.abs().log2().floor() as i32 - bits);
    (x / quantum).round() * quantum
}

/// `D[row, col]` with every input first rounded to `lower` (e.g. BF16 posing as FP32), summed in
/// f32 as such a kernel would.
fn lower_precision_dot(g: &pog_matgen::SeededGemm, lower: Precision, row: u64, col: u64) -> f64 {
    let storage = Storage::of(g.precision);
    let round = |x: f64| match lower {
        Precision::Bf16 => half::bf16::from_f64(x).to_f64(),
        Precision::Fp16 => half::f16::from_f64(x).to_f64(),
        Precision::Tf32 => f64::from(f32::from_bits((x as f32).to_bits() & !0x1fff)),
        Precision::Fp8 => round_to_mantissa_bits(x, 3), // E4M3, within its range
        _ => x,
    };
    let mut acc = 0f32;
    for kk in 0..g.k {
        let a = round(pog_matgen::value(storage, g.seed_a, g.a_index(row, kk)));
        let b = round(pog_matgen::value(storage, g.seed_b, col * g.k + kk));
        acc += (a * b) as f32;
    }
    f64::from(acc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::challenge::CHALLENGE_VERSION;

    #[test]
    fn leaves_open_with_their_paths_and_out_of_range_leaves_are_refused() {
        let challenge = Challenge {
            version: CHALLENGE_VERSION,
            nonce: [2; 32],
            to: crate::challenge::Addressee {
                gpu_uuid: "GPU-1".parse().unwrap(),
                gpu_bus_id: "00000000:00:06.0".into(),
                agent_key: pog_signed::PublicKey::from([0xaa; 32]),
                validator_key: pog_signed::PublicKey::from([0xbb; 32]),
            },
            precision: Precision::Int8,
            size: 8,
            batch: 1,
            leaf_elements: 16,
        };
        let prover = CpuProver::compute(&challenge, Behaviour::Honest);
        let opening = prover.open(&[1]).unwrap().remove(0);
        assert_eq!(
            opening.bytes.len(),
            16 * 2,
            "INT8 outputs commit their low 16 bits"
        );
        assert!(pog_merkle::verify_inclusion_in::<Blake3>(
            &Blake3::leaf(&opening.bytes),
            1,
            4,
            &opening.proof,
            &prover.root()
        ));
        let refused = prover.open(&[0, 4]).unwrap_err();
        assert!(matches!(
            refused,
            OpenError::OutOfRange {
                leaf: 4,
                leaf_count: 4
            }
        ));
        assert_eq!(
            refused.to_string(),
            "leaf 4 is out of range: the commitment has 4 leaves"
        );
    }
}
