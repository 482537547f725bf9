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
//! - A consistency proof from an older tree size to a newer one (RFC 6962 §2.1.2 `PROOF`,
//!   RFC 9162 §2.1.4) shows that the older tree is a prefix of the newer one; it is verified
//!   with RFC 9162 §2.1.4.2's algorithm.
//! - Proofs can be built from any store of *perfect* subtree hashes (a [`Tree`], files of
//!   hashes, the tiles of a tiled log): [`inclusion_proof_with`], [`consistency_proof_with`]
//!   and [`root_with`] ask a callback for the hash of the perfect subtree at (level, index),
//!   O(log n) calls each.

#![warn(missing_docs)]

pub mod commitment;
pub mod multiproof;
pub use commitment::Blake3;
use sha2::{Digest, Sha256};

/// A SHA-256 digest.
pub type Hash = [u8; 32];

/// How a tree hashes its leaves and its interior nodes. The tree's shape, its proofs and
/// their checks are the same for every hasher; the ledger's logs use [`Rfc6962`], the proofs'
/// commitments [`Blake3`].
pub trait TreeHasher {
    /// A leaf's hash.
    fn leaf(data: &[u8]) -> Hash;
    /// An interior node's hash.
    fn node(left: &Hash, right: &Hash) -> Hash;
}

/// RFC 6962's hashes: [`leaf_hash`] and [`node_hash`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rfc6962 {}

impl TreeHasher for Rfc6962 {
    fn leaf(data: &[u8]) -> Hash {
        leaf_hash(data)
    }

    fn node(left: &Hash, right: &Hash) -> Hash {
        node_hash(left, right)
    }
}

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
    /// Builds the RFC 6962 tree over already-hashed leaves.
    pub fn from_leaf_hashes(leaves: Vec<Hash>) -> Tree {
        Tree::build::<Rfc6962>(leaves)
    }

    /// Builds the tree over already-hashed leaves with `H`'s node hash. (Its proofs are
    /// checked with the same `H`; the root of an empty tree is RFC 6962's whatever `H`.)
    pub fn build<H: TreeHasher>(leaves: Vec<Hash>) -> Tree {
        let mut levels = vec![leaves];
        while levels.last().is_some_and(|l| l.len() > 1) {
            let below = levels.last().expect("checked above");
            let above = below
                .chunks(2)
                .map(|pair| match pair {
                    [left, right] => H::node(left, right),
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

    /// The consistency proof from the tree's first `old` leaves to the whole tree; `None`
    /// when `old` exceeds the size.
    pub fn consistency_proof(&self, old: u64) -> Option<Vec<Hash>> {
        consistency_proof_with(old, self.size(), &mut |level, index| {
            self.perfect(level, index)
        })
        .unwrap_or_else(|never: std::convert::Infallible| match never {})
    }

    /// The root the tree had when it held its first `size` leaves; `None` past its size.
    pub fn root_at(&self, size: u64) -> Option<Hash> {
        if size > self.size() {
            return None;
        }
        Some(
            root_with(size, &mut |level, index| self.perfect(level, index))
                .unwrap_or_else(|never: std::convert::Infallible| match never {}),
        )
    }

    /// The hash of the perfect subtree at (`level`, `index`), which the level-by-level build
    /// keeps at exactly that place.
    fn perfect(&self, level: u32, index: u64) -> Result<Hash, std::convert::Infallible> {
        Ok(self.levels[level as usize][index as usize])
    }
}

/// The largest power of two strictly smaller than `n` (n ≥ 2): where RFC 6962 splits a tree.
fn split_point(n: u64) -> u64 {
    debug_assert!(n >= 2);
    1 << (63 - (n - 1).leading_zeros())
}

/// The hash of the RFC 6962 subtree over leaves `[start, start + len)`, where `start` is a
/// multiple of the smallest power of two ≥ `len` (every node of an RFC 6962 tree is such a
/// range), from the perfect subtrees it splits into: at most one per bit of `len`.
fn range_hash<E>(
    start: u64,
    len: u64,
    perfect: &mut impl FnMut(u32, u64) -> Result<Hash, E>,
) -> Result<Hash, E> {
    if len.is_power_of_two() {
        let level = len.trailing_zeros();
        return perfect(level, start >> level);
    }
    let k = split_point(len);
    let left = range_hash(start, k, perfect)?;
    let right = range_hash(start + k, len - k, perfect)?;
    Ok(node_hash(&left, &right))
}

/// The root of the tree over the first `size` leaves, from perfect subtree hashes:
/// `perfect(level, index)` must return the hash of leaves `[index·2^level, (index+1)·2^level)`.
/// At most one call per bit of `size`.
pub fn root_with<E>(
    size: u64,
    perfect: &mut impl FnMut(u32, u64) -> Result<Hash, E>,
) -> Result<Hash, E> {
    if size == 0 {
        return Ok(empty_root());
    }
    range_hash(0, size, perfect)
}

/// The inclusion proof of leaf `index` in the tree of `size` leaves (RFC 6962 `PATH`,
/// bottom-up), from perfect subtree hashes as [`root_with`] takes them; `None` when out of
/// range.
pub fn inclusion_proof_with<E>(
    index: u64,
    size: u64,
    perfect: &mut impl FnMut(u32, u64) -> Result<Hash, E>,
) -> Result<Option<Vec<Hash>>, E> {
    if index >= size {
        return Ok(None);
    }
    // Top-down: at each node [start, start + n) holding the leaf, the sibling is the other
    // half; collected top-down, returned bottom-up.
    let mut path = Vec::new();
    let (mut start, mut n) = (0u64, size);
    while n > 1 {
        let k = split_point(n);
        if index - start < k {
            path.push(range_hash(start + k, n - k, perfect)?);
            n = k;
        } else {
            path.push(range_hash(start, k, perfect)?);
            start += k;
            n -= k;
        }
    }
    path.reverse();
    Ok(Some(path))
}

/// The consistency proof from the tree of `old` leaves to the tree of `new` leaves (RFC 6962
/// §2.1.2 `PROOF(m, D[n])`), from perfect subtree hashes as [`root_with`] takes them. Empty
/// when `old` is 0 or equals `new` (nothing to prove); `None` when `old > new`.
pub fn consistency_proof_with<E>(
    old: u64,
    new: u64,
    perfect: &mut impl FnMut(u32, u64) -> Result<Hash, E>,
) -> Result<Option<Vec<Hash>>, E> {
    if old > new {
        return Ok(None);
    }
    if old == 0 || old == new {
        return Ok(Some(Vec::new()));
    }
    // RFC 6962 SUBPROOF(m, D[start : start + n], b), unrolled: the nodes are collected
    // top-down and emitted in the RFC's order (deepest first).
    let mut tail = Vec::new();
    let (mut m, mut start, mut n, mut whole) = (old, 0u64, new, true);
    let head = loop {
        if m == n {
            break if whole {
                None
            } else {
                Some(range_hash(start, n, perfect)?)
            };
        }
        let k = split_point(n);
        if m <= k {
            tail.push(range_hash(start + k, n - k, perfect)?);
            n = k;
        } else {
            tail.push(range_hash(start, k, perfect)?);
            m -= k;
            start += k;
            n -= k;
            whole = false;
        }
    };
    let mut proof: Vec<Hash> = head.into_iter().collect();
    proof.extend(tail.into_iter().rev());
    Ok(Some(proof))
}

/// Verifies that the tree of `old` leaves with head `old_root` is a prefix of the tree of
/// `new` leaves with head `new_root`, given the consistency proof between them (RFC 9162
/// §2.1.4.2). Equal sizes need an empty proof and equal roots; an `old` of 0 needs an empty
/// proof and the empty tree's root (the empty tree is a prefix of every tree).
pub fn verify_consistency(
    old: u64,
    new: u64,
    old_root: &Hash,
    new_root: &Hash,
    proof: &[Hash],
) -> bool {
    if old > new {
        return false;
    }
    if old == new {
        return proof.is_empty() && old_root == new_root;
    }
    if old == 0 {
        return proof.is_empty() && *old_root == empty_root();
    }
    if proof.is_empty() {
        return false;
    }
    // A power-of-two old tree is itself a node of the new one: the proof leaves it out.
    let mut path: Vec<Hash> = Vec::with_capacity(proof.len() + 1);
    if old.is_power_of_two() {
        path.push(*old_root);
    }
    path.extend_from_slice(proof);
    let Some((first, rest)) = path.split_first() else {
        return false;
    };
    let (mut fn_, mut sn) = (old - 1, new - 1);
    while fn_ & 1 == 1 {
        fn_ >>= 1;
        sn >>= 1;
    }
    let (mut fr, mut sr) = (*first, *first);
    for c in rest {
        if sn == 0 {
            return false;
        }
        if fn_ & 1 == 1 || fn_ == sn {
            fr = node_hash(c, &fr);
            sr = node_hash(c, &sr);
            if fn_ & 1 == 0 {
                while fn_ & 1 == 0 && fn_ != 0 {
                    fn_ >>= 1;
                    sn >>= 1;
                }
            }
        } else {
            sr = node_hash(&sr, c);
        }
        fn_ >>= 1;
        sn >>= 1;
    }
    sn == 0 && fr == *old_root && sr == *new_root
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

/// Verifies that `leaf` (a leaf hash) is leaf `index` of the RFC 6962 tree of `size` leaves
/// with head `root`, given its inclusion proof (RFC 9162 §2.1.3.2).
pub fn verify_inclusion(leaf: &Hash, index: u64, size: u64, proof: &[Hash], root: &Hash) -> bool {
    verify_inclusion_in::<Rfc6962>(leaf, index, size, proof, root)
}

/// [`verify_inclusion`] in a tree hashed by `H`.
pub fn verify_inclusion_in<H: TreeHasher>(
    leaf: &Hash,
    index: u64,
    size: u64,
    proof: &[Hash],
    root: &Hash,
) -> bool {
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
            r = H::node(p, &r);
            if fn_ & 1 == 0 {
                while fn_ & 1 == 0 && fn_ != 0 {
                    fn_ >>= 1;
                    sn >>= 1;
                }
            }
        } else {
            r = H::node(&r, p);
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

    /// The leaf inputs of the RFC 6962 test tree that Certificate Transparency's
    /// implementations share (google/certificate-transparency, transparency-dev/merkle).
    const VECTOR_LEAVES: [&[u8]; 8] = [
        b"",
        b"\x00",
        b"\x10",
        b"\x20\x21",
        b"\x30\x31",
        b"\x40\x41\x42\x43",
        b"\x50\x51\x52\x53\x54\x55\x56\x57",
        b"\x60\x61\x62\x63\x64\x65\x66\x67\x68\x69\x6a\x6b\x6c\x6d\x6e\x6f",
    ];

    /// The published roots of the first n of [`VECTOR_LEAVES`], n = 1..=8.
    const VECTOR_ROOTS: [&str; 8] = [
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
        "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
        "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
        "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
        "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
    ];

    fn vector_tree() -> Tree {
        Tree::from_leaf_hashes(VECTOR_LEAVES.iter().map(|l| leaf_hash(l)).collect())
    }

    #[test]
    fn published_roots() {
        let tree = vector_tree();
        for (n, root) in VECTOR_ROOTS.iter().enumerate() {
            let size = n as u64 + 1;
            assert_eq!(tree.root_at(size), Some(hex_decode(root)), "size {size}");
            let prefix = Tree::from_leaf_hashes(
                VECTOR_LEAVES[..n + 1]
                    .iter()
                    .map(|l| leaf_hash(l))
                    .collect(),
            );
            assert_eq!(prefix.root(), hex_decode(root), "size {size}");
        }
        assert_eq!(tree.root_at(0), Some(empty_root()));
        assert_eq!(tree.root_at(9), None);
    }

    #[test]
    fn published_inclusion_proofs() {
        // (leaf index, tree size, proof), from the published vectors.
        let cases: [(u64, u64, &[&str]); 5] = [
            (0, 1, &[]),
            (
                0,
                8,
                &[
                    "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
                    "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                    "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
                ],
            ),
            (
                5,
                8,
                &[
                    "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
                    "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
                    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
                ],
            ),
            (
                2,
                3,
                &["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"],
            ),
            (
                1,
                5,
                &[
                    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
                    "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                    "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
                ],
            ),
        ];
        let full = vector_tree();
        for (index, size, want) in cases {
            let want: Vec<Hash> = want.iter().map(|h| hex_decode(h)).collect();
            let tree = Tree::from_leaf_hashes(
                VECTOR_LEAVES[..size as usize]
                    .iter()
                    .map(|l| leaf_hash(l))
                    .collect(),
            );
            assert_eq!(
                tree.inclusion_proof(index),
                Some(want.clone()),
                "{index} in {size}"
            );
            let from_perfect =
                inclusion_proof_with(index, size, &mut |l, i| full.perfect(l, i)).unwrap();
            assert_eq!(from_perfect, Some(want.clone()), "{index} in {size}");
            let root = hex_decode(VECTOR_ROOTS[size as usize - 1]);
            let leaf = leaf_hash(VECTOR_LEAVES[index as usize]);
            assert!(verify_inclusion(&leaf, index, size, &want, &root));
        }
    }

    #[test]
    fn published_consistency_proofs() {
        // (old size, new size, proof), from the published vectors.
        let cases: [(u64, u64, &[&str]); 5] = [
            (1, 1, &[]),
            (
                1,
                8,
                &[
                    "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
                    "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                    "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
                ],
            ),
            (
                6,
                8,
                &[
                    "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
                    "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
                    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
                ],
            ),
            (
                2,
                5,
                &[
                    "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                    "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
                ],
            ),
            (
                6,
                7,
                &[
                    "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
                    "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
                    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
                ],
            ),
        ];
        for (old, new, want) in cases {
            let want: Vec<Hash> = want.iter().map(|h| hex_decode(h)).collect();
            let tree = Tree::from_leaf_hashes(
                VECTOR_LEAVES[..new as usize]
                    .iter()
                    .map(|l| leaf_hash(l))
                    .collect(),
            );
            assert_eq!(
                tree.consistency_proof(old),
                Some(want.clone()),
                "{old} → {new}"
            );
            let old_root = hex_decode(VECTOR_ROOTS[old as usize - 1]);
            let new_root = hex_decode(VECTOR_ROOTS[new as usize - 1]);
            assert!(
                verify_consistency(old, new, &old_root, &new_root, &want),
                "{old} → {new}"
            );
            // The published invalid cases: swapped roots, a truncated or extended proof,
            // sizes off by one.
            if old != new {
                assert!(!verify_consistency(old, new, &new_root, &old_root, &want));
                assert!(!verify_consistency(
                    old,
                    new,
                    &old_root,
                    &new_root,
                    &want[..want.len() - 1]
                ));
                let mut longer = want.clone();
                longer.push(new_root);
                assert!(!verify_consistency(old, new, &old_root, &new_root, &longer));
                assert!(!verify_consistency(
                    old + 1,
                    new,
                    &old_root,
                    &new_root,
                    &want
                ));
                // The published mutations of the sizes: old ± 1, old XOR 2, new × 2, new / 2.
                for (o, n) in [
                    (old - 1, new),
                    (old ^ 2, new),
                    (old, new * 2),
                    (old, new / 2),
                ] {
                    assert!(
                        !verify_consistency(o, n, &old_root, &new_root, &want),
                        "{o} → {n}"
                    );
                }
                let mut preceding = vec![old_root];
                preceding.extend_from_slice(&want);
                assert!(!verify_consistency(
                    old, new, &old_root, &new_root, &preceding
                ));
                assert!(!verify_consistency(old, new, &old_root, &new_root, &[]));
            }
        }
        let root8 = hex_decode(VECTOR_ROOTS[7]);
        let root1 = hex_decode(VECTOR_ROOTS[0]);
        // Edge cases: an older size larger than the newer, equal sizes with other roots or a
        // proof, the empty tree.
        assert!(!verify_consistency(8, 1, &root8, &root1, &[]));
        assert!(!verify_consistency(1, 1, &root1, &root8, &[]));
        assert!(!verify_consistency(1, 1, &root1, &root1, &[root1]));
        assert!(verify_consistency(0, 8, &empty_root(), &root8, &[]));
        assert!(!verify_consistency(0, 8, &root1, &root8, &[]));
        assert!(!verify_consistency(0, 8, &empty_root(), &root8, &[root1]));
        assert_eq!(vector_tree().consistency_proof(9), None);
    }

    proptest! {
        #[test]
        fn consistency_proofs_verify_and_tampering_fails(
            new in 1u64..300, pick in 0u64..300, flip in 0usize..32, which in 0usize..64
        ) {
            let tree = Tree::from_leaf_hashes(leaves(new as usize));
            let old = pick % (new + 1);
            let proof = tree.consistency_proof(old).unwrap();
            let old_root = tree.root_at(old).unwrap();
            let new_root = tree.root();
            prop_assert_eq!(old_root, mth(&leaves(old as usize)));
            prop_assert!(verify_consistency(old, new, &old_root, &new_root, &proof));
            // O(log n): at most two hashes per level.
            prop_assert!(proof.len() <= 2 * level_sizes(new).len());
            if old > 0 && old < new {
                let mut bad = proof.clone();
                let at = which % bad.len();
                bad[at][flip] ^= 1;
                prop_assert!(!verify_consistency(old, new, &old_root, &new_root, &bad));
                let mut bad_old = old_root;
                bad_old[flip] ^= 1;
                prop_assert!(!verify_consistency(old, new, &bad_old, &new_root, &proof));
                let mut bad_new = new_root;
                bad_new[flip] ^= 1;
                prop_assert!(!verify_consistency(old, new, &old_root, &bad_new, &proof));
                prop_assert!(!verify_consistency(old, new, &old_root, &new_root, &proof[1..]));
                // A tree that differs from the old one in any leaf is refused.
                let mut forked = leaves(new as usize);
                forked[(which as u64 % old) as usize][flip] ^= 1;
                let forked = Tree::from_leaf_hashes(forked);
                let forked_proof = forked.consistency_proof(old).unwrap();
                prop_assert!(!verify_consistency(old, new, &old_root, &forked.root(), &forked_proof));
            }
        }

        #[test]
        fn proofs_from_perfect_subtrees_match_the_tree(new in 1u64..300, pick in 0u64..300) {
            let tree = Tree::from_leaf_hashes(leaves(new as usize));
            let index = pick % new;
            let mut calls = 0;
            let mut get = |l: u32, i: u64| { calls += 1; tree.perfect(l, i) };
            let proof = inclusion_proof_with(index, new, &mut get).unwrap();
            prop_assert_eq!(proof, tree.inclusion_proof(index));
            prop_assert!(calls <= 2 * level_sizes(new).len());
            prop_assert_eq!(root_with(new, &mut |l, i| tree.perfect(l, i)).unwrap(), tree.root());
        }
    }

    #[test]
    fn out_of_range_proofs_are_none() {
        let tree = Tree::from_leaf_hashes(leaves(3));
        assert_eq!(tree.inclusion_proof(3), None);
        assert_eq!(tree.size(), 3);
    }
}
