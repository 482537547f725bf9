//! Merkle trees as Certificate Transparency defines them (RFC 6962 §2.1, restated in RFC 9162
//! §2.1), hand-written because the common crates (rs_merkle among them) hash differently.
//!
//! - A leaf's hash is `SHA-256(0x00 ‖ data)`, an interior node's `SHA-256(0x01 ‖ left ‖ right)`:
//!   the prefixes keep a leaf from ever being passed off as a node (second-preimage attacks).
//! - The tree over n leaves splits at the largest power of two below n, so it is left-full;
//!   built level by level, a level's unpaired last node is carried up unchanged, which gives
//!   the same tree.
//! - An inclusion proof is the list of sibling hashes from the leaf up (RFC 6962 `PATH`), and
//!   is verified with RFC 9162 §2.1.3.2's algorithm, which needs only the leaf's index and the
//!   tree size.

use sha2::{Digest, Sha256};

/// A SHA-256 digest.
pub type Hash = [u8; 32];

/// `SHA-256(0x00 ‖ data)`.
pub fn leaf_hash(data: &[u8]) -> Hash {
    let mut h = Sha256::new();
    h.update([0u8]);
    h.update(data);
    h.finalize().into()
}

/// `SHA-256(0x01 ‖ left ‖ right)`.
pub fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut h = Sha256::new();
    h.update([1u8]);
    h.update(left);
    h.update(right);
    h.finalize().into()
}

/// The root of the empty tree: `SHA-256()` of nothing.
pub fn empty_root() -> Hash {
    Sha256::digest([]).into()
}

/// A whole tree kept level by level (level 0: the leaf hashes), so that any number of
/// inclusion proofs costs O(log n) each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tree {
    levels: Vec<Vec<Hash>>,
}

impl Tree {
    /// Builds the tree over already-hashed leaves.
    pub fn from_leaf_hashes(leaves: Vec<Hash>) -> Tree {
        let mut levels = vec![leaves];
        while levels.last().is_some_and(|l| l.len() > 1) {
            let below = levels.last().expect("checked above");
            let above = below
                .chunks(2)
                .map(|pair| match pair {
                    [left, right] => node_hash(left, right),
                    [carried] => *carried,
                    _ => unreachable!("chunks(2) yields one or two"),
                })
                .collect();
            levels.push(above);
        }
        Tree { levels }
    }

    /// Number of leaves.
    pub fn size(&self) -> u64 {
        self.levels[0].len() as u64
    }

    /// The tree head.
    pub fn root(&self) -> Hash {
        match self.levels.last().and_then(|l| l.first()) {
            Some(root) => *root,
            None => empty_root(),
        }
    }

    /// Hash of leaf `index`.
    pub fn leaf(&self, index: u64) -> Option<Hash> {
        self.levels[0].get(usize::try_from(index).ok()?).copied()
    }

    /// The inclusion proof of leaf `index`, bottom-up; `None` when out of range.
    pub fn inclusion_proof(&self, index: u64) -> Option<Vec<Hash>> {
        let positions = proof_positions(index, self.size())?;
        Some(
            positions
                .into_iter()
                .map(|(level, at)| self.levels[level][at as usize])
                .collect(),
        )
    }
}

/// How many nodes each level of the tree over `leaves` leaves holds, from the leaves (level 0)
/// up to the head: each level halves the one below, rounding up (the unpaired last node is
/// carried up). Shared by [`Tree`] and by trees built elsewhere level by level (on a GPU).
pub fn level_sizes(leaves: u64) -> Vec<u64> {
    let mut sizes = vec![leaves];
    while let Some(&below) = sizes.last().filter(|&&n| n > 1) {
        sizes.push(below.div_ceil(2));
    }
    sizes
}

/// Where the hashes of leaf `index`'s inclusion proof sit in a tree over `leaves` leaves, as
/// (level, position) pairs, bottom-up; `None` when out of range.
pub fn proof_positions(index: u64, leaves: u64) -> Option<Vec<(usize, u64)>> {
    if index >= leaves {
        return None;
    }
    let sizes = level_sizes(leaves);
    let mut i = index;
    let mut positions = Vec::new();
    for (level, &size) in sizes[..sizes.len() - 1].iter().enumerate() {
        let sibling = i ^ 1;
        if sibling < size {
            positions.push((level, sibling));
        } // else: i is the unpaired last node, carried up without a sibling
        i /= 2;
    }
    Some(positions)
}

/// Verifies that `leaf` (a leaf hash) is leaf `index` of the tree of `size` leaves with head
/// `root`, given its inclusion proof (RFC 9162 §2.1.3.2).
pub fn verify_inclusion(leaf: &Hash, index: u64, size: u64, proof: &[Hash], root: &Hash) -> bool {
    if index >= size {
        return false;
    }
    let (mut fn_, mut sn) = (index, size - 1);
    let mut r = *leaf;
    for p in proof {
        if sn == 0 {
            return false;
        }
        if fn_ & 1 == 1 || fn_ == sn {
            r = node_hash(p, &r);
            if fn_ & 1 == 0 {
                while fn_ & 1 == 0 && fn_ != 0 {
                    fn_ >>= 1;
                    sn >>= 1;
                }
            }
        } else {
            r = node_hash(&r, p);
        }
        fn_ >>= 1;
        sn >>= 1;
    }
    sn == 0 && r == *root
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// RFC 6962's recursive definition of the tree head, for checking the level-by-level build.
    fn mth(leaves: &[Hash]) -> Hash {
        match leaves.len() {
            0 => empty_root(),
            1 => leaves[0],
            n => {
                // k: the largest power of two smaller than n.
                let k = 1 << (usize::BITS - 1 - (n - 1).leading_zeros());
                node_hash(&mth(&leaves[..k]), &mth(&leaves[k..]))
            }
        }
    }

    fn leaves(n: usize) -> Vec<Hash> {
        (0..n)
            .map(|i| leaf_hash(&(i as u64).to_le_bytes()))
            .collect()
    }

    #[test]
    fn known_answers() {
        // The empty tree and a one-leaf tree, from RFC 6962's definitions.
        assert_eq!(
            Tree::from_leaf_hashes(vec![]).root(),
            hex_decode("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        );
        assert_eq!(
            leaf_hash(b""),
            hex_decode("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d")
        );
        let two = Tree::from_leaf_hashes(vec![leaf_hash(b"a"), leaf_hash(b"b")]);
        assert_eq!(two.root(), node_hash(&leaf_hash(b"a"), &leaf_hash(b"b")));
    }

    fn hex_decode(s: &str) -> Hash {
        let mut out = [0u8; 32];
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap();
        }
        out
    }

    #[test]
    fn split_point_is_the_largest_power_of_two_below_n() {
        // n = 5: MTH = H(MTH(0..4), leaf 4)
        let l = leaves(5);
        let left = node_hash(&node_hash(&l[0], &l[1]), &node_hash(&l[2], &l[3]));
        assert_eq!(
            Tree::from_leaf_hashes(l.clone()).root(),
            node_hash(&left, &l[4])
        );
        assert_eq!(mth(&l), node_hash(&left, &l[4]));
    }

    proptest! {
        #[test]
        fn level_build_matches_the_recursive_definition(n in 0usize..300) {
            let l = leaves(n);
            let tree = Tree::from_leaf_hashes(l.clone());
            prop_assert_eq!(tree.root(), mth(&l));
            let sizes: Vec<u64> = tree.levels.iter().map(|level| level.len() as u64).collect();
            prop_assert_eq!(level_sizes(n as u64), sizes);
        }

        #[test]
        fn every_proof_verifies_and_tampering_fails(n in 1usize..200, pick in 0usize..200, flip in 0usize..32) {
            let tree = Tree::from_leaf_hashes(leaves(n));
            let index = (pick % n) as u64;
            let proof = tree.inclusion_proof(index).unwrap();
            let leaf = tree.leaf(index).unwrap();
            let root = tree.root();
            prop_assert!(verify_inclusion(&leaf, index, n as u64, &proof, &root));
            let mut bad_leaf = leaf;
            bad_leaf[flip] ^= 1;
            prop_assert!(!verify_inclusion(&bad_leaf, index, n as u64, &proof, &root));
            if n > 1 {
                prop_assert!(!verify_inclusion(&leaf, (index + 1) % n as u64, n as u64, &proof, &root));
                let mut bad_proof = proof.clone();
                bad_proof[0][flip] ^= 1;
                prop_assert!(!verify_inclusion(&leaf, index, n as u64, &bad_proof, &root));
                prop_assert!(!verify_inclusion(&leaf, index, n as u64, &proof[..proof.len() - 1], &root));
            }
            prop_assert!(!verify_inclusion(&leaf, n as u64, n as u64, &proof, &root));
        }
    }

    #[test]
    fn out_of_range_proofs_are_none() {
        let tree = Tree::from_leaf_hashes(leaves(3));
        assert_eq!(tree.inclusion_proof(3), None);
        assert_eq!(tree.size(), 3);
    }
}
