// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

/// @title Rfc6962: the Merkle tree hashing and inclusion proofs of RFC 6962 / RFC 9162.
/// @notice The hashes of pog's ledger (crates/merkle, `Rfc6962`): a leaf is
/// SHA-256(0x00 || data), a node SHA-256(0x01 || left || right), a tree of any size split at the
/// largest power of two below it. `rootFromInclusion` is RFC 9162 §2.1.3.2's verification
/// algorithm, step for step as `pog_merkle::verify_inclusion_in` states it, returning the root
/// the proof leads to instead of comparing it, so that a caller checks many proofs against one
/// root it read once. SHA-256 is the EVM's precompile at address 2 (60 gas + 12 a word).
library Rfc6962 {
    /// The RFC 6962 hash of a leaf holding `data`.
    function leafHash(bytes memory data) internal pure returns (bytes32) {
        return sha256(abi.encodePacked(bytes1(0x00), data));
    }

    /// The RFC 6962 hash of an inner node over `left` and `right`.
    function nodeHash(bytes32 left, bytes32 right) internal pure returns (bytes32) {
        return sha256(abi.encodePacked(bytes1(0x01), left, right));
    }

    /// The root of the tree of `size` leaves that `proof` shows leaf hash `leaf` to be leaf
    /// `index` of; `ok` is false when the proof cannot be one for that position (index beyond
    /// the size, too short or too long a proof).
    function rootFromInclusion(bytes32 leaf, uint64 index, uint64 size, bytes32[] calldata proof)
        internal
        pure
        returns (bool ok, bytes32 root)
    {
        if (index >= size) {
            return (false, bytes32(0));
        }
        uint64 fn = index;
        uint64 sn = size - 1;
        bytes32 r = leaf;
        for (uint256 i = 0; i < proof.length; ++i) {
            if (sn == 0) {
                return (false, bytes32(0));
            }
            if (fn & 1 == 1 || fn == sn) {
                r = nodeHash(proof[i], r);
                if (fn & 1 == 0) {
                    while (fn & 1 == 0 && fn != 0) {
                        fn >>= 1;
                        sn >>= 1;
                    }
                }
            } else {
                r = nodeHash(r, proof[i]);
            }
            fn >>= 1;
            sn >>= 1;
        }
        if (sn != 0) {
            return (false, bytes32(0));
        }
        return (true, r);
    }
}
