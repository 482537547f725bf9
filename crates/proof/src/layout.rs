//! How the outputs become Merkle leaves: each GEMM's m×n output, column-major, each element as
//! its committed bytes (`pog_matgen::committed_bytes`: the output format's little-endian bytes,
//! INT8's low two), cut into leaves of `leaf_elements` consecutive elements;
//! leaves of GEMM 0 first, then GEMM 1, and so on.

use crate::challenge::Challenge;

pub use pog_matgen::{committed_bytes, decode_committed, encode_committed};

/// Where an output element sits among the leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// Which product of the batch, from 0.
    pub gemm: u32,
    /// Row in that product's output.
    pub row: u64,
    /// Column in that product's output.
    pub col: u64,
}

impl Challenge {
    /// Leaves per GEMM output (the last may be short).
    pub fn leaves_per_gemm(&self) -> u64 {
        (self.size * self.size).div_ceil(u64::from(self.leaf_elements.max(1)))
    }

    /// Leaves in the whole commitment.
    pub fn leaf_count(&self) -> u64 {
        self.leaves_per_gemm() * u64::from(self.batch)
    }

    /// The leaf holding an element, and the element's offset inside that leaf.
    pub fn leaf_of(&self, p: Position) -> (u64, usize) {
        let linear = p.col * self.size + p.row; // column-major
        let per_leaf = u64::from(self.leaf_elements.max(1));
        (
            u64::from(p.gemm) * self.leaves_per_gemm() + linear / per_leaf,
            (linear % per_leaf) as usize,
        )
    }

    /// Bytes a leaf should have (the last leaf of a GEMM may be short).
    pub fn leaf_len(&self, leaf: u64) -> usize {
        let per_leaf = u64::from(self.leaf_elements.max(1));
        let within = leaf % self.leaves_per_gemm();
        let elements = (self.size * self.size - within * per_leaf).min(per_leaf);
        elements as usize * committed_bytes(self.precision)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::challenge::CHALLENGE_VERSION;
    use pog_spec::Precision;

    #[test]
    fn positions_map_to_leaves_column_major() {
        let c = Challenge {
            version: CHALLENGE_VERSION,
            nonce: [0; 32],
            to: crate::challenge::Addressee {
                gpu_uuid: "g".parse().unwrap(),
                gpu_bus_id: "b".into(),
                agent_key: pog_signed::PublicKey::from([0xaa; 32]),
                validator_key: pog_signed::PublicKey::from([0xbb; 32]),
            },
            precision: Precision::Fp32,
            size: 10,
            batch: 3,
            leaf_elements: 16,
        };
        assert_eq!(c.leaves_per_gemm(), 7); // 100 elements / 16, rounded up
        assert_eq!(c.leaf_count(), 21);
        assert_eq!(
            c.leaf_of(Position {
                gemm: 0,
                row: 0,
                col: 0
            }),
            (0, 0)
        );
        assert_eq!(
            c.leaf_of(Position {
                gemm: 0,
                row: 5,
                col: 1
            }),
            (0, 15)
        );
        assert_eq!(
            c.leaf_of(Position {
                gemm: 0,
                row: 6,
                col: 1
            }),
            (1, 0)
        );
        assert_eq!(
            c.leaf_of(Position {
                gemm: 2,
                row: 9,
                col: 9
            }),
            (20, 3)
        );
        assert_eq!(c.leaf_len(0), 64);
        assert_eq!(
            c.leaf_len(6),
            4 * 4,
            "the last leaf holds the 4 leftover elements"
        );
    }
}
