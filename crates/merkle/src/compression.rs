//! Merkle hashing by SHA-256's compression function alone, for commitments whose every leaf
//! has a length both sides know before anything is hashed (the proofs' outputs), where the
//! hashing is most of the prover's overhead beyond its real work.
//!
//! RFC 6962's hashes ([`crate::Rfc6962`]) cost a 128-byte leaf three compressions
//! (`0x00 ‖ leaf` and SHA-256's length padding spill into a third block) and a node two
//! (65 bytes). Here a leaf costs one compression per 64 bytes and a node one:
//!
//! - a leaf's hash: from [`LEAF_IV`], each 64-byte block of the leaf compressed in turn, the
//!   last block filled up with zero bytes (a leaf of 128 bytes: two compressions);
//! - a node's hash: from [`NODE_IV`], the one block `left ‖ right` compressed;
//! - a hash is the final state's eight words, big-endian, as SHA-256 writes its digest.
//!
//! Why it binds as RFC 6962's does. The two starting states are SHA-256's compressions of two
//! different tag blocks, so a leaf is never taken for a node (that would need one input that
//! compresses to the same state from two unrelated starts). A node's input has one length,
//! so SHA-256's length padding has nothing to tell apart. A leaf has no length padding: a
//! leaf and the same leaf with zero bytes appended hash alike. That is harmless only where
//! the verifier fixes every leaf's length before it hashes one, which every user of this
//! module must do (the proofs take each leaf's length from the challenge and refuse an
//! opening of any other length). Collision and second-preimage resistance then rest on
//! SHA-256's compression function, as Merkle–Damgård's own security does.

use crate::{Hash, TreeHasher};
use sha2::digest::generic_array::GenericArray;

/// SHA-256's initial state (FIPS 180-4 §5.3.3).
const SHA256_IV: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

/// The tag whose block, compressed from SHA-256's initial state, starts every leaf hash.
pub const LEAF_TAG: &[u8] = b"pog merkle compression v1: leaf";
/// The tag whose block, compressed from SHA-256's initial state, starts every node hash.
pub const NODE_TAG: &[u8] = b"pog merkle compression v1: node";

/// The state every leaf hash starts from: SHA-256's compression of [`LEAF_TAG`], zero-filled
/// to one block, from SHA-256's initial state (checked against that derivation in the tests).
pub const LEAF_IV: [u32; 8] = [
    0xfd7501c6, 0x68299dfe, 0x509a3957, 0xdee43219, 0x686445c5, 0xa891c2b2, 0x15512120, 0xd44f4832,
];
/// The state every node hash starts from, as [`LEAF_IV`] from [`NODE_TAG`].
pub const NODE_IV: [u32; 8] = [
    0x007ce325, 0xc0fa2cb7, 0x7e601c32, 0x0c17fc9a, 0x0b0996a3, 0x7ad96ec3, 0x3a52eafb, 0x9b8049e1,
];

/// The compression-function hashes (this module's description).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {}

impl TreeHasher for Compression {
    fn leaf(data: &[u8]) -> Hash {
        let mut state = LEAF_IV;
        let mut chunks = data.chunks(64).peekable();
        if chunks.peek().is_none() {
            compress(&mut state, &[0; 64]);
        }
        for chunk in chunks {
            let mut block = [0u8; 64];
            block[..chunk.len()].copy_from_slice(chunk);
            compress(&mut state, &block);
        }
        digest(&state)
    }

    fn node(left: &Hash, right: &Hash) -> Hash {
        let mut block = [0u8; 64];
        block[..32].copy_from_slice(left);
        block[32..].copy_from_slice(right);
        let mut state = NODE_IV;
        compress(&mut state, &block);
        digest(&state)
    }
}

/// One SHA-256 compression of `block` into `state`.
fn compress(state: &mut [u32; 8], block: &[u8; 64]) {
    sha2::compress256(state, &[*GenericArray::from_slice(block)]);
}

/// A state's words, big-endian: the hash.
fn digest(state: &[u32; 8]) -> Hash {
    let mut out = [0u8; 32];
    for (bytes, word) in out.chunks_exact_mut(4).zip(state) {
        bytes.copy_from_slice(&word.to_be_bytes());
    }
    out
}

/// The starting state of a domain: SHA-256's compression of its tag, zero-filled to a block.
pub fn derive_iv(tag: &[u8]) -> [u32; 8] {
    let mut block = [0u8; 64];
    block[..tag.len()].copy_from_slice(tag);
    let mut state = SHA256_IV;
    compress(&mut state, &block);
    state
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Rfc6962, Tree};
    use sha2::{Digest, Sha256};

    #[test]
    fn the_starting_states_are_the_compressed_tags() {
        assert_eq!(
            derive_iv(LEAF_TAG),
            LEAF_IV,
            "{:#010x?}",
            derive_iv(LEAF_TAG)
        );
        assert_eq!(
            derive_iv(NODE_TAG),
            NODE_IV,
            "{:#010x?}",
            derive_iv(NODE_TAG)
        );
    }

    #[test]
    fn a_state_from_sha256s_own_start_is_sha256_without_its_padding() {
        // The compression and digest agree with SHA-256: one block plus SHA-256's padding
        // block, compressed here, is SHA-256 of the block.
        let block = [7u8; 64];
        let mut state = SHA256_IV;
        compress(&mut state, &block);
        let mut padding = [0u8; 64];
        padding[0] = 0x80;
        padding[62..].copy_from_slice(&512u16.to_be_bytes());
        compress(&mut state, &padding);
        assert_eq!(digest(&state), <[u8; 32]>::from(Sha256::digest(block)));
    }

    #[test]
    fn leaves_and_nodes_are_apart_and_from_rfc6962() {
        let (a, b) = ([1u8; 32], [2u8; 32]);
        let mut both = a.to_vec();
        both.extend_from_slice(&b);
        assert_ne!(Compression::node(&a, &b), Compression::leaf(&both));
        assert_ne!(Compression::node(&a, &b), Compression::node(&b, &a));
        assert_ne!(Compression::leaf(&both), Rfc6962::leaf(&both));
        // A short leaf is its zero-filled block (why lengths must be fixed by the caller).
        assert_eq!(Compression::leaf(&[9; 10]), {
            let mut filled = [0u8; 64];
            filled[..10].fill(9);
            Compression::leaf(&filled)
        });
        assert_eq!(Compression::leaf(b""), Compression::leaf(&[0; 64]));
        assert_ne!(Compression::leaf(&[9; 64]), Compression::leaf(&[9; 128]));
    }

    #[test]
    fn a_tree_of_compression_hashes_has_rfc6962s_shape() {
        let leaves: Vec<Hash> = (0u64..5)
            .map(|i| Compression::leaf(&i.to_le_bytes()))
            .collect();
        let tree = Tree::build::<Compression>(leaves.clone());
        let n = Compression::node;
        let want = n(
            &n(&n(&leaves[0], &leaves[1]), &n(&leaves[2], &leaves[3])),
            &leaves[4],
        );
        assert_eq!(tree.root(), want);
        for i in 0..5 {
            let proof = tree.inclusion_proof(i).unwrap();
            assert!(crate::verify_inclusion_in::<Compression>(
                &leaves[i as usize],
                i,
                5,
                &proof,
                &want
            ));
            assert!(!crate::verify_inclusion(
                &leaves[i as usize],
                i,
                5,
                &proof,
                &want
            ));
        }
    }
}
