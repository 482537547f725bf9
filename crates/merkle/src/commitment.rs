//! The proofs' commitment hashes: BLAKE3's compression function in a tree of RFC 6962's shape,
//! for commitments whose every leaf has a length both sides know before anything is hashed
//! (the proofs' outputs), where hashing is most of the prover's work beyond its real work.
//!
//! RFC 6962's SHA-256 hashes ([`crate::Rfc6962`]) cost a 128-byte leaf three SHA-256
//! compressions (`0x00 ‖ leaf` and the length padding spill into a third block) and a node two.
//! Here a leaf costs one BLAKE3 compression per 64 bytes and a node one, and a BLAKE3
//! compression is about a third of SHA-256's integer work (7 rounds of additions, XORs and
//! rotations against 64 rounds and a message schedule): on a GPU, where hashing is bound by the
//! integer units, the commitment costs a fraction of what it did (docs/protocol.md, "Cost").
//!
//! Each hash is one of BLAKE3's own, in its key-derivation mode under [`CONTEXT`] (so no
//! other BLAKE3 use shares these values), computed with the `blake3` crate's tree primitives:
//! - a leaf's hash is the chaining value of a BLAKE3 chunk holding the leaf's bytes, at chunk
//!   counter 0 (`finalize_non_root`): its 64-byte blocks compressed in turn, the first flagged
//!   CHUNK_START, the last CHUNK_END and given its true length (a leaf of 128 bytes: two
//!   compressions; no two lengths hash alike). A leaf longer than a chunk (the proof of CPU's
//!   lanes; the GPU kernels take none, [`MAX_LEAF_BYTES`]) is the chaining value of BLAKE3's
//!   subtree over its chunks;
//! - a node's hash is BLAKE3's parent chaining value of `left ‖ right` (PARENT flag, one
//!   compression: `merge_subtrees_non_root`);
//! - a hash's bytes are the chaining value's eight words, little-endian, as BLAKE3 writes them.
//!
//! Leaves are never taken for nodes (the flags differ, so that needs a collision of the
//! compression function between two flag values), and the tree over them is RFC 6962's, not
//! BLAKE3's own, so a root is no BLAKE3 hash of the outputs; binding rests on BLAKE3's
//! compression function, as BLAKE3's own security does (its paper, §5).

use crate::{Hash, TreeHasher};
use blake3::hazmat::{merge_subtrees_non_root, HasherExt, Mode};

/// BLAKE3's key-derivation context of every commitment hash (application, date, purpose, as
/// BLAKE3 asks of a context string).
pub const CONTEXT: &str = "pog 2026-12-05 proof commitment tree v1";

/// The most bytes of a leaf the GPU kernels hash: one BLAKE3 chunk.
pub const MAX_LEAF_BYTES: usize = blake3::CHUNK_LEN;

/// The key [`CONTEXT`] derives, as BLAKE3's eight little-endian key words: the starting
/// chaining value of every compression (the GPU kernels take it from here).
pub fn key_words() -> [u32; 8] {
    let key = context_key();
    std::array::from_fn(|i| u32::from_le_bytes(key[4 * i..4 * i + 4].try_into().expect("4 bytes")))
}

/// The key [`CONTEXT`] derives, computed once.
fn context_key() -> &'static [u8; 32] {
    static KEY: std::sync::OnceLock<[u8; 32]> = std::sync::OnceLock::new();
    KEY.get_or_init(|| blake3::hazmat::hash_derive_key_context(CONTEXT))
}

/// The commitment hashes (this module's description).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blake3 {}

impl TreeHasher for Blake3 {
    /// The chaining value of a chunk (or, past [`MAX_LEAF_BYTES`], a subtree) holding `data`.
    /// No proof has an empty leaf (a challenge's leaves hold at least one output); one hashes
    /// to 32 zero bytes, which keeps the function total and matches the kernels.
    fn leaf(data: &[u8]) -> Hash {
        if data.is_empty() {
            return [0; 32];
        }
        let mut hasher = blake3::Hasher::new_from_context_key(context_key());
        hasher.update(data);
        hasher.finalize_non_root()
    }

    fn node(left: &Hash, right: &Hash) -> Hash {
        merge_subtrees_non_root(left, right, Mode::DeriveKeyMaterial(context_key()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Rfc6962, Tree};

    /// BLAKE3's compression function, written from the specification (§2.2) for these tests:
    /// the GPU kernels do this, and these tests pin what the crate's primitives mean.
    fn compress(cv: &[u32; 8], block: &[u8; 64], block_len: u32, flags: u32) -> [u32; 8] {
        const IV: [u32; 8] = [
            0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
            0x5be0cd19,
        ];
        const PERMUTATION: [usize; 16] = [2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8];
        let mut m: [u32; 16] = std::array::from_fn(|i| {
            u32::from_le_bytes(block[4 * i..4 * i + 4].try_into().unwrap())
        });
        let mut s = [
            cv[0], cv[1], cv[2], cv[3], cv[4], cv[5], cv[6], cv[7], IV[0], IV[1], IV[2], IV[3], 0,
            0, block_len, flags,
        ];
        let g = |s: &mut [u32; 16], a: usize, b: usize, c: usize, d: usize, x: u32, y: u32| {
            s[a] = s[a].wrapping_add(s[b]).wrapping_add(x);
            s[d] = (s[d] ^ s[a]).rotate_right(16);
            s[c] = s[c].wrapping_add(s[d]);
            s[b] = (s[b] ^ s[c]).rotate_right(12);
            s[a] = s[a].wrapping_add(s[b]).wrapping_add(y);
            s[d] = (s[d] ^ s[a]).rotate_right(8);
            s[c] = s[c].wrapping_add(s[d]);
            s[b] = (s[b] ^ s[c]).rotate_right(7);
        };
        for round in 0..7 {
            g(&mut s, 0, 4, 8, 12, m[0], m[1]);
            g(&mut s, 1, 5, 9, 13, m[2], m[3]);
            g(&mut s, 2, 6, 10, 14, m[4], m[5]);
            g(&mut s, 3, 7, 11, 15, m[6], m[7]);
            g(&mut s, 0, 5, 10, 15, m[8], m[9]);
            g(&mut s, 1, 6, 11, 12, m[10], m[11]);
            g(&mut s, 2, 7, 8, 13, m[12], m[13]);
            g(&mut s, 3, 4, 9, 14, m[14], m[15]);
            if round < 6 {
                m = std::array::from_fn(|i| m[PERMUTATION[i]]);
            }
        }
        std::array::from_fn(|i| s[i] ^ s[i + 8])
    }

    const CHUNK_START: u32 = 1;
    const CHUNK_END: u32 = 2;
    const PARENT: u32 = 4;
    const DERIVE_KEY_MATERIAL: u32 = 64;

    fn bytes(words: [u32; 8]) -> Hash {
        let mut out = [0u8; 32];
        for (b, w) in out.chunks_exact_mut(4).zip(words) {
            b.copy_from_slice(&w.to_le_bytes());
        }
        out
    }

    /// A leaf hashed block by block with the compression above, as the GPU kernels do.
    fn leaf_by_hand(data: &[u8]) -> Hash {
        let mut cv = key_words();
        let blocks = data.len().div_ceil(64);
        for b in 0..blocks {
            let part = &data[(64 * b).min(data.len())..(64 * b + 64).min(data.len())];
            let mut block = [0u8; 64];
            block[..part.len()].copy_from_slice(part);
            let flags = DERIVE_KEY_MATERIAL
                | if b == 0 { CHUNK_START } else { 0 }
                | if b == blocks - 1 { CHUNK_END } else { 0 };
            cv = compress(&cv, &block, part.len() as u32, flags);
        }
        bytes(cv)
    }

    #[test]
    fn the_hand_written_compression_is_blake3s() {
        // One block, root-flagged, from BLAKE3's IV: blake3::hash of that block.
        let mut cv = [
            0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
            0x5be0cd19,
        ];
        let mut block = [0u8; 64];
        block[..3].copy_from_slice(b"abc");
        cv = compress(&cv, &block, 3, CHUNK_START | CHUNK_END | 8);
        assert_eq!(bytes(cv), *blake3::hash(b"abc").as_bytes());
    }

    #[test]
    fn leaves_and_nodes_are_the_compressions_the_kernels_compute() {
        for len in [1usize, 63, 64, 65, 100, 128, 129, 1024] {
            let data: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
            assert_eq!(
                Blake3::leaf(&data),
                leaf_by_hand(&data),
                "a leaf of {len} bytes"
            );
        }
        let (l, r) = (Blake3::leaf(b"left"), Blake3::leaf(b"right"));
        let mut block = [0u8; 64];
        block[..32].copy_from_slice(&l);
        block[32..].copy_from_slice(&r);
        assert_eq!(
            Blake3::node(&l, &r),
            bytes(compress(
                &key_words(),
                &block,
                64,
                PARENT | DERIVE_KEY_MATERIAL
            ))
        );
    }

    #[test]
    fn a_leaf_longer_than_a_chunk_is_blake3s_subtree_over_its_chunks() {
        let data = [5u8; 2048];
        let (first, second) = data.split_at(MAX_LEAF_BYTES);
        let mut later = blake3::Hasher::new_from_context_key(context_key());
        later.set_input_offset(MAX_LEAF_BYTES as u64).update(second);
        assert_eq!(
            Blake3::leaf(&data),
            merge_subtrees_non_root(
                &Blake3::leaf(first),
                &later.finalize_non_root(),
                Mode::DeriveKeyMaterial(context_key())
            )
        );
    }

    #[test]
    fn leaves_nodes_and_lengths_are_apart() {
        let (a, b) = ([1u8; 32], [2u8; 32]);
        let mut both = a.to_vec();
        both.extend_from_slice(&b);
        assert_ne!(Blake3::node(&a, &b), Blake3::leaf(&both));
        assert_ne!(Blake3::node(&a, &b), Blake3::node(&b, &a));
        assert_ne!(Blake3::leaf(&both), Rfc6962::leaf(&both));
        assert_ne!(
            Blake3::leaf(&[9; 10]),
            Blake3::leaf(&[9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 0])
        );
        assert_eq!(Blake3::leaf(b""), [0; 32]);
        assert_ne!(Blake3::leaf(&[0]), [0; 32]);
        assert_ne!(Blake3::leaf(&[0; 64]), Blake3::leaf(&[0; 128]));
    }

    #[test]
    fn a_tree_of_commitment_hashes_has_rfc6962s_shape() {
        let leaves: Vec<Hash> = (0u64..5).map(|i| Blake3::leaf(&i.to_le_bytes())).collect();
        let tree = Tree::build::<Blake3>(leaves.clone());
        let n = Blake3::node;
        let want = n(
            &n(&n(&leaves[0], &leaves[1]), &n(&leaves[2], &leaves[3])),
            &leaves[4],
        );
        assert_eq!(tree.root(), want);
        for i in 0..5 {
            let proof = tree.inclusion_proof(i).unwrap();
            let leaf = &leaves[i as usize];
            assert!(crate::verify_inclusion_in::<Blake3>(
                leaf, i, 5, &proof, &want
            ));
            assert!(!crate::verify_inclusion(leaf, i, 5, &proof, &want));
        }
    }
}
