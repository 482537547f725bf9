//! The validator's side: drawing the elements to check after the commitment, and checking
//! each drawn element of an opened leaf against the f64 recomputation (the session proves the
//! opened leaves against the root first).

use crate::challenge::Challenge;
use crate::layout::{committed_bytes, decode_committed, Position};
use pog_merkle::Hash;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Draws `count` output positions from the validator's secret and the commitment: unknown to
/// the prover before it commits, and reproducible by the validator for an audit.
pub fn draw_samples(
    challenge: &Challenge,
    root: &Hash,
    validator_secret: &[u8; 32],
    count: u32,
) -> Vec<Position> {
    (0..count)
        .map(|i| {
            let mut h = Sha256::new();
            h.update(b"pog-proof samples v1");
            h.update(validator_secret);
            h.update(root);
            h.update(i.to_le_bytes());
            let d = h.finalize();
            let word =
                |at: usize| u64::from_le_bytes(d[at..at + 8].try_into().expect("32-byte digest"));
            Position {
                gemm: (word(0) % u64::from(challenge.batch.max(1))) as u32,
                row: word(8) % challenge.size,
                col: word(16) % challenge.size,
            }
        })
        .collect()
}

/// Why an opening was rejected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
pub enum Rejection {
    /// The opening is of another leaf than the one holding the drawn element (openings of
    /// challenge version 3 named their leaf; kept so that their records still read).
    #[error("opened leaf {got}, but the element is in leaf {expected}")]
    WrongLeaf {
        /// The leaf holding the element.
        expected: u64,
        /// The leaf opened.
        got: u64,
    },
    /// The opened leaf is not the length the challenge's leaves are.
    #[error("leaf {leaf} has {got} bytes, expected {expected}")]
    BadLength {
        /// The leaf opened.
        leaf: u64,
        /// Bytes a leaf of the challenge has.
        expected: usize,
        /// Bytes the opening has.
        got: usize,
    },
    /// The leaf is not proven in the committed tree: the openings' multiproof does not lead to
    /// the committed root (then no opened leaf is, and every drawn element fails).
    #[error("leaf {leaf} is not in the committed tree")]
    NotInTree {
        /// The leaf opened.
        leaf: u64,
    },
    /// An element differs from the f64 reference by more than the precision allows.
    #[error("element (gemm {gemm}, {row}, {col}) is {got}, the f64 reference is {reference} (allowed error {tolerance:e})")]
    WrongValue {
        /// Which product of the batch, from 0.
        gemm: u32,
        /// Row in that product's output.
        row: u64,
        /// Column in that product's output.
        col: u64,
        /// The value the leaf holds.
        got: f64,
        /// The validator's f64 recomputation.
        reference: f64,
        /// The largest error the precision allows at this value.
        tolerance: f64,
    },
    /// A CPU-proof segment's end differs from the validator's run of it from the end before
    /// (hex).
    #[error("lane {lane} segment {segment} ends at {got}, the recomputation gives {expected}")]
    WrongSegment {
        /// The lane (its leaf), from 0.
        lane: u64,
        /// The segment, from 0.
        segment: u64,
        /// The end the leaf holds (hex).
        got: String,
        /// The validator's recomputation (hex).
        expected: String,
    },
    /// A memory-proof walker's output differs from the validator's recomputation (hex).
    #[error("walker {walker} output {got}, the recomputation gives {expected}")]
    WrongOutput {
        /// The walker, from 0.
        walker: u64,
        /// The output the leaf holds (hex).
        got: String,
        /// The validator's recomputation (hex).
        expected: String,
    },
}

/// Checks the drawn element at `position` in `bytes`, the bytes of the leaf holding it
/// (`challenge.leaf_of(position)`), already proven to be that leaf of the committed tree (the
/// session checks every opened leaf against the root with one multiproof): the leaf's length,
/// then the element against the f64 recomputation, as committed (INT8: its low 16 bits).
pub fn check_value(
    challenge: &Challenge,
    position: Position,
    bytes: &[u8],
) -> Result<(), Rejection> {
    let (leaf, offset) = challenge.leaf_of(position);
    let expected = challenge.leaf_len(leaf);
    if bytes.len() != expected {
        return Err(Rejection::BadLength {
            leaf,
            expected,
            got: bytes.len(),
        });
    }
    let width = committed_bytes(challenge.precision);
    let got = decode_committed(
        challenge.precision,
        &bytes[offset * width..(offset + 1) * width],
    )
    .unwrap_or(f64::NAN);
    let gemm = challenge.gemm(position.gemm);
    let reference = gemm
        .reference(position.row, position.col)
        .committed(challenge.precision);
    if gemm.accepts(got, reference) {
        Ok(())
    } else {
        Err(Rejection::WrongValue {
            gemm: position.gemm,
            row: position.row,
            col: position.col,
            got,
            reference: reference.value,
            tolerance: pog_matgen::tolerance(challenge.precision, reference),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::challenge::CHALLENGE_VERSION;
    use crate::prover::{Behaviour, CpuProver, Prover};
    use pog_spec::Precision;

    fn challenge(precision: Precision) -> Challenge {
        Challenge {
            version: CHALLENGE_VERSION,
            nonce: [3; 32],
            to: crate::challenge::Addressee {
                gpu_uuid: "GPU-test".parse().unwrap(),
                gpu_bus_id: "00000000:00:06.0".into(),
                agent_key: pog_signed::PublicKey::from([0xaa; 32]),
                validator_key: pog_signed::PublicKey::from([0xbb; 32]),
            },
            precision,
            size: 48,
            batch: 2,
            leaf_elements: 64,
        }
    }

    /// Runs the whole exchange; returns how many of `samples` openings were rejected.
    fn rejected(c: &Challenge, behaviour: Behaviour, samples: u32) -> usize {
        let prover = CpuProver::compute(c, behaviour);
        assert_eq!(prover.leaf_count(), c.leaf_count());
        let root = prover.root();
        draw_samples(c, &root, &[9; 32], samples)
            .into_iter()
            .filter(|p| check_value(c, *p, &proven(&prover, c, *p)).is_err())
            .count()
    }

    /// The bytes of the leaf holding `p`, opened by `prover` and proven against its root.
    fn proven(prover: &CpuProver, c: &Challenge, p: Position) -> Vec<u8> {
        let opening = prover.open(&[c.leaf_of(p).0]).expect("in range").remove(0);
        assert!(pog_merkle::verify_inclusion_in::<pog_merkle::Blake3>(
            &<pog_merkle::Blake3 as pog_merkle::TreeHasher>::leaf(&opening.bytes),
            opening.leaf,
            c.leaf_count(),
            &opening.proof,
            &prover.root(),
        ));
        opening.bytes
    }

    #[test]
    fn an_honest_prover_always_passes() {
        for p in [
            Precision::Int8,
            Precision::Bf16,
            Precision::Fp16,
            Precision::Fp32,
        ] {
            assert_eq!(rejected(&challenge(p), Behaviour::Honest, 200), 0, "{p:?}");
        }
    }

    #[test]
    fn lower_precision_is_caught() {
        // BF16 posing as FP32, FP16 posing as FP32: every element is off by far more than
        // FP32's bound.
        for lower in [Precision::Bf16, Precision::Fp16, Precision::Tf32] {
            let n = rejected(
                &challenge(Precision::Fp32),
                Behaviour::LowerPrecision(lower),
                64,
            );
            assert!(n >= 60, "{lower:?} as FP32: only {n} of 64 rejected");
        }
        // FP8 inputs posing as BF16: the error is within a few times BF16's, so single
        // elements often pass, but a challenge's spot checks reject it all the same.
        let n = rejected(
            &challenge(Precision::Bf16),
            Behaviour::LowerPrecision(Precision::Fp8),
            256,
        );
        assert!(n >= 20, "FP8 as BF16: only {n} of 256 rejected");
    }

    #[test]
    fn junk_is_caught_in_proportion() {
        // Half the output faked: about half the checks fail.
        let n = rejected(&challenge(Precision::Int8), Behaviour::Junk(0.5), 400);
        assert!((150..=250).contains(&n), "{n}");
    }

    #[test]
    fn forged_leaves_are_rejected() {
        let c = challenge(Precision::Bf16);
        let prover = CpuProver::compute(&c, Behaviour::Honest);
        let p = draw_samples(&c, &prover.root(), &[1; 32], 1)[0];
        let good = proven(&prover, &c, p);
        assert_eq!(check_value(&c, p, &good), Ok(()));
        // Another leaf's bytes in its place: the element is another's.
        let (leaf, offset) = c.leaf_of(p);
        let other = prover
            .open(&[(leaf + 1) % c.leaf_count()])
            .unwrap()
            .remove(0)
            .bytes;
        assert!(matches!(
            check_value(&c, p, &other),
            Err(Rejection::WrongValue { .. })
        ));
        let mut tampered = good.clone();
        tampered[offset * 2 + 1] ^= 0x40; // the element's exponent
        assert!(matches!(
            check_value(&c, p, &tampered),
            Err(Rejection::WrongValue { .. })
        ));
        let mut short = good.clone();
        short.pop();
        assert!(matches!(
            check_value(&c, p, &short),
            Err(Rejection::BadLength { .. })
        ));
    }

    #[test]
    fn an_answer_for_another_gpu_or_nonce_is_rejected() {
        // One GPU answering for two UUIDs, or a replayed answer to an earlier nonce: the seeds
        // differ, so the committed values are wrong for this challenge.
        let c = challenge(Precision::Int8);
        let mut other_gpu = c.clone();
        other_gpu.to.gpu_uuid = "GPU-other".parse().unwrap();
        let mut earlier = c.clone();
        earlier.nonce = [4; 32];
        for wrong in [other_gpu, earlier] {
            let prover = CpuProver::compute(&wrong, Behaviour::Honest);
            let root = prover.root();
            let samples = draw_samples(&c, &root, &[5; 32], 16);
            let bad = samples
                .iter()
                .filter(|p| {
                    check_value(&c, **p, &prover.open(&[c.leaf_of(**p).0]).unwrap()[0].bytes)
                        .is_err()
                })
                .count();
            assert_eq!(bad, 16);
        }
    }

    #[test]
    fn samples_spread_over_the_batch_and_the_output() {
        let c = challenge(Precision::Int8);
        let s = draw_samples(&c, &[0; 32], &[1; 32], 1024);
        assert!(s.iter().any(|p| p.gemm == 0) && s.iter().any(|p| p.gemm == 1));
        assert!(s.iter().all(|p| p.row < 48 && p.col < 48));
        assert_ne!(
            draw_samples(&c, &[1; 32], &[1; 32], 4),
            draw_samples(&c, &[0; 32], &[1; 32], 4)
        );
    }
}
