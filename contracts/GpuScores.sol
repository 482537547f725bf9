// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Strings} from "@openzeppelin/contracts/utils/Strings.sol";
import {CheckpointRegistry} from "./CheckpointRegistry.sol";
import {Rfc6962} from "./Rfc6962.sol";

/// @title GpuScores: each GPU's latest verified state, proven from an anchored pog log.
/// @notice pog's validator logs a `gpu-state` record (kind 12) whenever a GPU's score or price
/// changes: its model, whether its latest proofs speak for that model and for its memory, its
/// score, its posted price, the address its owner named to hold its token, and when. This
/// contract keeps the latest such record of every GPU, taken from anyone (permissionless) who
/// shows it in a checkpoint of one log anchored in a `CheckpointRegistry`: the record's entry,
/// rebuilt here from its fields, must be a leaf of the anchored tree (an RFC 6962 inclusion
/// proof). It trusts nothing but the anchored root: not the submitter, not a key. A newer entry
/// of the log replaces an older one; an older one is refused.
///
/// The entry is rebuilt, not parsed: the submitter passes the fields and the contract writes
/// the record's body exactly as the validator signed it (compact JSON, fields in a fixed
/// order, docs/ledger.md "Scores on chain") and frames it as the ledger does (entry format 1).
/// A contract reads typed fields at no parsing cost, and the log keeps its JSON view. A field
/// the validator would have escaped (a quote or a backslash in a model name) rebuilds to other
/// bytes and is refused as not in the log.
///
/// No owner, no upgrade path, no ether held.
contract GpuScores {
    /// A GPU's state as its `gpu-state` record states it.
    struct GpuState {
        /// The GPU's UUID (1 to 128 printable ASCII bytes).
        string gpuUuid;
        /// The model it is registered as ("" when none).
        string model;
        /// Its latest GEMM proof was accepted and speaks for the model.
        bool provesModel;
        /// Its latest proof of memory was accepted and speaks for the model.
        bool provesMemory;
        /// Its score in millionths (1,000,000 = the reference H200 host).
        uint64 scorePpm;
        /// Its posted price per GPU-hour in millionths of a US dollar (0: not priced).
        uint64 priceMicroUsd;
        /// The address its owner named to hold its token (zero: none named).
        address owner;
        /// When the validator made the record, Unix milliseconds.
        uint64 recordedAtMs;
    }

    /// A `gpu-state` record with where it sits in the log: what `submit` takes.
    struct ProvenState {
        /// The record's fields.
        GpuState state;
        /// The entry's per-GPU sequence number (ledger entry format 1).
        uint64 gpuSeq;
        /// The log index of the GPU's previous entry (2^64 - 1 for its first).
        uint64 prevIndex;
        /// The signer's Ed25519 public key, as in the entry.
        bytes32 signer;
        /// The signer's Ed25519 signature, as in the entry (64 bytes).
        bytes signature;
        /// The entry's index in the log.
        uint64 leafIndex;
        /// The RFC 6962 inclusion proof of the entry in the tree of the anchored size.
        bytes32[] proof;
    }

    /// What is kept of a GPU: its latest proven state and the log index it came from, in two
    /// slots and its model (the UUID is the key: it is not stored).
    struct Kept {
        uint64 leafIndex;
        uint64 anchoredSize;
        uint64 scorePpm;
        uint64 priceMicroUsd;
        address owner;
        uint64 recordedAtMs;
        bool provesModel;
        bool provesMemory;
        bool known;
        string model;
    }

    /// The ledger's entry format version.
    uint8 public constant ENTRY_VERSION = 1;
    /// The `gpu-state` record kind's code.
    uint8 public constant KIND_GPU_STATE = 12;
    /// The `gpu-state` body's version.
    uint32 public constant STATE_VERSION = 1;
    /// The longest GPU UUID an entry holds, in bytes.
    uint256 public constant MAX_UUID_BYTES = 128;

    /// The registry whose anchors of `origin` this contract trusts.
    CheckpointRegistry public immutable registry;
    /// The log's origin (its checkpoints' first line).
    string public origin;

    /// Each GPU's latest proven state, by keccak256 of its UUID.
    mapping(bytes32 => Kept) private kept;
    /// How many GPUs have a proven state.
    uint256 public gpuCount;

    /// A GPU's state was proven from the log entry at `leafIndex` (in the tree of
    /// `anchoredSize` entries).
    event StateProven(
        bytes32 indexed gpu, string gpuUuid, uint64 leafIndex, uint64 anchoredSize, uint64 scorePpm, uint64 priceMicroUsd
    );

    /// The registry holds no anchor of the origin at that tree size.
    error NoAnchor(string origin, uint64 size);
    /// The UUID is empty or longer than MAX_UUID_BYTES.
    error BadUuid(uint256 length);
    /// The signature is not 64 bytes.
    error BadSignature(uint256 length);
    /// The rebuilt entry is not leaf `leafIndex` of the anchored tree of `size` entries (a wrong
    /// field, a wrong proof, a wrong index).
    error NotInLog(string gpuUuid, uint64 leafIndex, uint64 size);
    /// The entry is not newer in the log than the GPU's kept state (at `keptIndex`).
    error NotNewer(string gpuUuid, uint64 leafIndex, uint64 keptIndex);
    /// Nothing was submitted.
    error EmptyBatch();

    /// Trusts `registry`'s anchors of the log `logOrigin`.
    constructor(CheckpointRegistry registry_, string memory logOrigin) {
        registry = registry_;
        origin = logOrigin;
    }

    /// Proves each of `states` from the log's checkpoint of `size` entries anchored in the
    /// registry, and keeps each as its GPU's latest state. All or nothing: one state that is
    /// not in the log, or not newer than its GPU's kept one, reverts the batch with its error.
    function submit(uint64 size, ProvenState[] calldata states) external {
        if (states.length == 0) {
            revert EmptyBatch();
        }
        (bool found, bytes32 root,) = registry.anchorAt(origin, size);
        if (!found) {
            revert NoAnchor(origin, size);
        }
        for (uint256 i = 0; i < states.length; ++i) {
            _keep(states[i], size, root);
        }
    }

    /// The GPU's latest proven state; `known` is false (and the rest zero) when none was.
    function stateOf(string calldata gpuUuid)
        external
        view
        returns (bool known, GpuState memory state, uint64 leafIndex, uint64 anchoredSize)
    {
        Kept storage k = kept[keccak256(bytes(gpuUuid))];
        if (!k.known) {
            return (false, state, 0, 0);
        }
        state = GpuState({
            gpuUuid: gpuUuid,
            model: k.model,
            provesModel: k.provesModel,
            provesMemory: k.provesMemory,
            scorePpm: k.scorePpm,
            priceMicroUsd: k.priceMicroUsd,
            owner: k.owner,
            recordedAtMs: k.recordedAtMs
        });
        return (true, state, k.leafIndex, k.anchoredSize);
    }

    /// The ledger entry (format 1) of a `gpu-state` record with these fields: what the log's
    /// leaf holds.
    function entryOf(
        GpuState calldata state,
        uint64 gpuSeq,
        uint64 prevIndex,
        bytes32 signer,
        bytes calldata signature
    ) public pure returns (bytes memory) {
        uint256 uuidLength = bytes(state.gpuUuid).length;
        if (uuidLength == 0 || uuidLength > MAX_UUID_BYTES) {
            revert BadUuid(uuidLength);
        }
        if (signature.length != 64) {
            revert BadSignature(signature.length);
        }
        bytes memory head = abi.encodePacked(ENTRY_VERSION, KIND_GPU_STATE, uint8(uuidLength), state.gpuUuid);
        return abi.encodePacked(head, gpuSeq, prevIndex, signer, signature, bodyOf(state));
    }

    /// The `gpu-state` record's body as the validator signs it (docs/ledger.md).
    function bodyOf(GpuState calldata state) public pure returns (bytes memory) {
        bytes memory head = abi.encodePacked(
            '{"version":',
            Strings.toString(STATE_VERSION),
            ',"gpu_uuid":"',
            state.gpuUuid,
            '","model":"',
            state.model,
            '","proves_model":',
            state.provesModel ? "true" : "false",
            ',"proves_memory":',
            state.provesMemory ? "true" : "false"
        );
        return abi.encodePacked(
            head,
            ',"score_ppm":',
            Strings.toString(state.scorePpm),
            ',"price_micro_usd":',
            Strings.toString(state.priceMicroUsd),
            ',"owner":"',
            Strings.toHexString(state.owner),
            '","recorded_at_ms":',
            Strings.toString(state.recordedAtMs),
            "}"
        );
    }

    /// Whether leaf hash `leaf` is leaf `index` of the RFC 6962 tree of `size` leaves with
    /// root `root`: the ledger's inclusion proofs, for any contract that reads the log.
    function verifyInclusion(bytes32 leaf, uint64 index, uint64 size, bytes32[] calldata proof, bytes32 root)
        external
        pure
        returns (bool)
    {
        (bool ok, bytes32 computed) = Rfc6962.rootFromInclusion(leaf, index, size, proof);
        return ok && computed == root;
    }

    /// The RFC 6962 leaf hash of `data`.
    function leafHash(bytes calldata data) external pure returns (bytes32) {
        return Rfc6962.leafHash(data);
    }

    function _keep(ProvenState calldata p, uint64 size, bytes32 root) private {
        bytes memory entry = entryOf(p.state, p.gpuSeq, p.prevIndex, p.signer, p.signature);
        (bool ok, bytes32 computed) = Rfc6962.rootFromInclusion(Rfc6962.leafHash(entry), p.leafIndex, size, p.proof);
        if (!ok || computed != root) {
            revert NotInLog(p.state.gpuUuid, p.leafIndex, size);
        }
        bytes32 gpu = keccak256(bytes(p.state.gpuUuid));
        Kept storage k = kept[gpu];
        if (k.known && p.leafIndex <= k.leafIndex) {
            revert NotNewer(p.state.gpuUuid, p.leafIndex, k.leafIndex);
        }
        if (!k.known) {
            gpuCount += 1;
        }
        if (keccak256(bytes(k.model)) != keccak256(bytes(p.state.model))) {
            k.model = p.state.model;
        }
        k.leafIndex = p.leafIndex;
        k.anchoredSize = size;
        k.scorePpm = p.state.scorePpm;
        k.priceMicroUsd = p.state.priceMicroUsd;
        k.owner = p.state.owner;
        k.recordedAtMs = p.state.recordedAtMs;
        k.provesModel = p.state.provesModel;
        k.provesMemory = p.state.provesMemory;
        k.known = true;
        emit StateProven(gpu, p.state.gpuUuid, p.leafIndex, size, p.state.scorePpm, p.state.priceMicroUsd);
    }
}
