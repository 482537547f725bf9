//! Multiproofs: one proof that several leaves are in a tree, of RFC 6962's shape, with the
//! hashes of any [`TreeHasher`].
//!
//! The inclusion proofs of many leaves share their upper levels: of 1024 random leaves of a
//! tree of 2²⁸, each path has 28 hashes, but the top 10 levels are mostly computed from the
//! opened leaves themselves. A multiproof holds only the subtree hashes that no opened leaf
//! determines, each once.
//!
//! Order: the tree is walked as RFC 6962 defines it (a range of `n` leaves splits at the
//! largest power of two below `n`), left before right. At a split where one side holds no
//! opened leaf, that side's hash is the next hash of the proof; a side with opened leaves is
//! walked on. [`from_paths`] emits hashes in that order, [`verify`] consumes them in it.

use crate::{split_point, Hash, TreeHasher};

/// Why a multiproof is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MultiproofError {
    /// No leaves were given.
    #[error("a multiproof needs at least one leaf")]
    NoLeaves,
    /// The leaf indices are not strictly increasing.
    #[error("leaf indices must be strictly increasing; {0} follows a leaf not before it")]
    NotIncreasing(u64),
    /// A leaf index is not in the tree.
    #[error("leaf {leaf} is outside a tree of {size} leaves")]
    OutOfRange {
        /// The leaf index.
        leaf: u64,
        /// Leaves in the tree.
        size: u64,
    },
    /// The proof ran out of hashes.
    #[error("the proof has too few hashes")]
    TooShort,
    /// Hashes were left over once the root was computed.
    #[error("the proof has {0} hashes too many")]
    TooLong(usize),
    /// An inclusion path given to [`from_paths`] is not as long as its leaf's depth.
    #[error("the path of leaf {leaf} has {got} hashes, its depth is {depth}")]
    PathLength {
        /// The leaf index.
        leaf: u64,
        /// Hashes the path has.
        got: usize,
        /// The leaf's depth in the tree.
        depth: usize,
    },
    /// The leaves and proof lead to another root than the one committed.
    #[error("the leaves and proof do not lead to the committed root")]
    WrongRoot,
}

/// Checks `leaves` (indices) are non-empty, strictly increasing and inside a tree of `size`.
fn check_indices(size: u64, leaves: impl Iterator<Item = u64>) -> Result<(), MultiproofError> {
    let mut previous: Option<u64> = None;
    for leaf in leaves {
        if leaf >= size {
            return Err(MultiproofError::OutOfRange { leaf, size });
        }
        if previous.is_some_and(|p| p >= leaf) {
            return Err(MultiproofError::NotIncreasing(leaf));
        }
        previous = Some(leaf);
    }
    if previous.is_none() {
        return Err(MultiproofError::NoLeaves);
    }
    Ok(())
}

/// The multiproof of the leaves whose inclusion proofs (RFC 6962 `PATH`, bottom-up, as
/// [`crate::Tree::inclusion_proof`] gives them) are `opened`, as `(index, path)` with indices
/// strictly increasing, in a tree of `size` leaves. What a prover that opens leaves one by one
/// sends instead of their paths.
pub fn from_paths(size: u64, opened: &[(u64, &[Hash])]) -> Result<Vec<Hash>, MultiproofError> {
    check_indices(size, opened.iter().map(|(leaf, _)| *leaf))?;
    for (leaf, path) in opened {
        let depth = depth_of(*leaf, size);
        if path.len() != depth {
            return Err(MultiproofError::PathLength {
                leaf: *leaf,
                got: path.len(),
                depth,
            });
        }
    }
    let mut proof = Vec::new();
    emit(0, size, 0, opened, &mut proof);
    Ok(proof)
}

/// The depth of leaf `index` in the RFC 6962 tree of `size` leaves: its path's length.
fn depth_of(index: u64, size: u64) -> usize {
    let (mut start, mut n, mut depth) = (0, size, 0);
    while n > 1 {
        let k = split_point(n);
        if index - start < k {
            n = k;
        } else {
            start += k;
            n -= k;
        }
        depth += 1;
    }
    depth
}

/// Walks the range `[start, start + n)` at `depth` below the root, holding the non-empty
/// `opened` leaves: pushes the hash of each side without opened leaves, taken from the path of
/// a leaf on the other side (its sibling there is that side), left before right.
fn emit(start: u64, n: u64, depth: usize, opened: &[(u64, &[Hash])], proof: &mut Vec<Hash>) {
    if n <= 1 {
        return;
    }
    let k = split_point(n);
    let split = opened.partition_point(|(leaf, _)| *leaf < start + k);
    let (left, right) = opened.split_at(split);
    // A path is bottom-up: the sibling at `depth` below the root is counted from its end.
    let sibling = |(_, path): &(u64, &[Hash])| path[path.len() - 1 - depth];
    match (left.is_empty(), right.is_empty()) {
        (true, _) => {
            proof.push(sibling(&right[0]));
            emit(start + k, n - k, depth + 1, right, proof);
        }
        (_, true) => {
            emit(start, k, depth + 1, left, proof);
            proof.push(sibling(&left[0]));
        }
        _ => {
            emit(start, k, depth + 1, left, proof);
            emit(start + k, n - k, depth + 1, right, proof);
        }
    }
}

/// Checks that the leaves with these hashes, `(index, leaf hash)` with indices strictly
/// increasing, are in the tree of `size` leaves with this root, by the multiproof `proof`
/// ([`from_paths`]): every hash of the proof must be used, none may be missing.
pub fn verify<H: TreeHasher>(
    size: u64,
    leaves: &[(u64, Hash)],
    proof: &[Hash],
    root: &Hash,
) -> Result<(), MultiproofError> {
    if root_of::<H>(size, leaves, proof)? != *root {
        return Err(MultiproofError::WrongRoot);
    }
    Ok(())
}

/// The root that `leaves` (as [`verify`] takes them) and the multiproof `proof` lead to, every
/// hash of the proof used: [`verify`] without the comparison.
pub fn root_of<H: TreeHasher>(
    size: u64,
    leaves: &[(u64, Hash)],
    proof: &[Hash],
) -> Result<Hash, MultiproofError> {
    check_indices(size, leaves.iter().map(|(leaf, _)| *leaf))?;
    let mut next = proof.iter();
    let computed = compute::<H>(0, size, leaves, &mut next)?;
    let left_over = next.len();
    if left_over > 0 {
        return Err(MultiproofError::TooLong(left_over));
    }
    Ok(computed)
}

/// How many hashes the multiproof of `leaves` (indices, strictly increasing) in a tree of
/// `size` leaves has: what a validator can tell a prover's proof must have, and the size of
/// an answer before it is built.
pub fn proof_len(size: u64, leaves: &[u64]) -> Result<usize, MultiproofError> {
    check_indices(size, leaves.iter().copied())?;
    fn count(start: u64, n: u64, leaves: &[u64]) -> usize {
        if n <= 1 {
            return 0;
        }
        let k = split_point(n);
        let (left, right) = leaves.split_at(leaves.partition_point(|leaf| *leaf < start + k));
        let side = |from, len, leaves: &[u64]| {
            if leaves.is_empty() {
                1
            } else {
                count(from, len, leaves)
            }
        };
        side(start, k, left) + side(start + k, n - k, right)
    }
    Ok(count(0, size, leaves))
}

/// The hash of the range `[start, start + n)` holding the non-empty `leaves`: a leaf's hash
/// for one leaf, else the node of its two sides, each computed from its leaves or, without
/// any, the proof's next hash.
fn compute<H: TreeHasher>(
    start: u64,
    n: u64,
    leaves: &[(u64, Hash)],
    next: &mut std::slice::Iter<'_, Hash>,
) -> Result<Hash, MultiproofError> {
    if n <= 1 {
        return Ok(leaves[0].1);
    }
    let k = split_point(n);
    let split = leaves.partition_point(|(leaf, _)| *leaf < start + k);
    let (left, right) = leaves.split_at(split);
    let mut side = |from: u64, len: u64, leaves: &[(u64, Hash)]| {
        if leaves.is_empty() {
            next.next().copied().ok_or(MultiproofError::TooShort)
        } else {
            compute::<H>(from, len, leaves, next)
        }
    };
    let l = side(start, k, left)?;
    let r = side(start + k, n - k, right)?;
    Ok(H::node(&l, &r))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{leaf_hash, Rfc6962, Tree};
    use proptest::prelude::*;

    fn tree(size: u64) -> Tree {
        Tree::from_leaf_hashes((0..size).map(|i| leaf_hash(&i.to_le_bytes())).collect())
    }

    /// The multiproof of `wanted` (sorted, unique) in `t`, from its inclusion proofs.
    fn multiproof(t: &Tree, wanted: &[u64]) -> Vec<Hash> {
        let paths: Vec<Vec<Hash>> = wanted
            .iter()
            .map(|i| t.inclusion_proof(*i).unwrap())
            .collect();
        let opened: Vec<(u64, &[Hash])> = wanted
            .iter()
            .zip(&paths)
            .map(|(i, p)| (*i, p.as_slice()))
            .collect();
        from_paths(t.size(), &opened).unwrap()
    }

    fn hashes(t: &Tree, wanted: &[u64]) -> Vec<(u64, Hash)> {
        wanted.iter().map(|i| (*i, t.leaf(*i).unwrap())).collect()
    }

    #[test]
    fn a_single_leaf_needs_its_path_and_all_leaves_need_nothing() {
        let t = tree(13);
        for i in 0..13 {
            let mut proof = multiproof(&t, &[i]);
            assert_eq!(proof_len(13, &[i]), Ok(proof.len()));
            assert_eq!(
                verify::<Rfc6962>(13, &hashes(&t, &[i]), &proof, &t.root()),
                Ok(())
            );
            // A single leaf's multiproof is its path, in the walk's order.
            let mut path = t.inclusion_proof(i).unwrap();
            path.sort_unstable();
            proof.sort_unstable();
            assert_eq!(proof, path);
        }
        let all: Vec<u64> = (0..13).collect();
        assert!(multiproof(&t, &all).is_empty());
        assert_eq!(
            verify::<Rfc6962>(13, &hashes(&t, &all), &[], &t.root()),
            Ok(())
        );
        let one = tree(1);
        assert_eq!(
            verify::<Rfc6962>(1, &hashes(&one, &[0]), &[], &one.root()),
            Ok(())
        );
    }

    #[test]
    fn malformed_input_is_a_clear_error() {
        let t = tree(20);
        let wanted = [2, 7, 19];
        let proof = multiproof(&t, &wanted);
        let leaves = hashes(&t, &wanted);
        assert_eq!(
            verify::<Rfc6962>(20, &[], &proof, &t.root()),
            Err(MultiproofError::NoLeaves)
        );
        assert_eq!(
            verify::<Rfc6962>(20, &[leaves[1], leaves[0]], &proof, &t.root()),
            Err(MultiproofError::NotIncreasing(2))
        );
        assert_eq!(
            verify::<Rfc6962>(20, &[leaves[0], leaves[0]], &proof, &t.root()),
            Err(MultiproofError::NotIncreasing(2))
        );
        assert_eq!(
            verify::<Rfc6962>(20, &[(20, leaves[0].1)], &proof, &t.root()),
            Err(MultiproofError::OutOfRange { leaf: 20, size: 20 })
        );
        assert_eq!(
            verify::<Rfc6962>(20, &leaves, &proof[1..], &t.root()),
            Err(MultiproofError::TooShort)
        );
        let mut longer = proof.clone();
        longer.push([0; 32]);
        assert_eq!(
            verify::<Rfc6962>(20, &leaves, &longer, &t.root()),
            Err(MultiproofError::TooLong(1))
        );
        assert_eq!(
            verify::<Rfc6962>(20, &leaves, &proof, &[0; 32]),
            Err(MultiproofError::WrongRoot)
        );
        let short_path = [[0u8; 32]; 2];
        assert!(matches!(
            from_paths(20, &[(3, &short_path[..])]),
            Err(MultiproofError::PathLength {
                leaf: 3,
                got: 2,
                ..
            })
        ));
        assert_eq!(from_paths(20, &[]), Err(MultiproofError::NoLeaves));
    }

    proptest! {
        /// Random trees, random subsets: the multiproof verifies, is never longer than the
        /// paths together, and any change to a leaf, a proof hash or the root fails.
        #[test]
        fn random_subsets_verify_and_tampering_fails(
            size in 1u64..600,
            picks in proptest::collection::btree_set(any::<u64>(), 1..40),
            tamper in any::<prop::sample::Index>(),
        ) {
            let t = tree(size);
            let wanted: Vec<u64> = picks
                .iter()
                .map(|p| p % size)
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            let proof = multiproof(&t, &wanted);
            let leaves = hashes(&t, &wanted);
            prop_assert_eq!(verify::<Rfc6962>(size, &leaves, &proof, &t.root()), Ok(()));
            prop_assert_eq!(proof_len(size, &wanted), Ok(proof.len()));
            let paths: usize = wanted.iter().map(|i| t.inclusion_proof(*i).unwrap().len()).sum();
            prop_assert!(proof.len() <= paths);
            // k leaves of a tree of depth d need at most k·(d − ⌊log₂ k⌋) hashes (the bound
            // docs/protocol.md, "Cost", sizes the H200 plans' openings by).
            let (k, depth) = (wanted.len(), 64 - (size.max(2) - 1).leading_zeros() as usize);
            let bound = k * depth.saturating_sub(k.ilog2() as usize);
            prop_assert!(proof.len() <= bound, "{} hashes, bound {}", proof.len(), bound);
            let mut bad_leaves = leaves.clone();
            bad_leaves[tamper.index(leaves.len())].1[0] ^= 1;
            prop_assert!(verify::<Rfc6962>(size, &bad_leaves, &proof, &t.root()).is_err());
            if !proof.is_empty() {
                let mut bad_proof = proof.clone();
                bad_proof[tamper.index(proof.len())][31] ^= 0x80;
                prop_assert!(verify::<Rfc6962>(size, &leaves, &bad_proof, &t.root()).is_err());
                prop_assert!(verify::<Rfc6962>(size, &leaves, &proof[..proof.len() - 1], &t.root()).is_err());
            }
            // A leaf moved to an index not opened must fail as well.
            if let Some(other) = (0..size).find(|i| !wanted.contains(i)) {
                let mut moved = leaves.clone();
                moved[0].0 = other;
                moved.sort_by_key(|(i, _)| *i);
                prop_assert!(verify::<Rfc6962>(size, &moved, &proof, &t.root()).is_err());
            }
        }
    }
}
