// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ERC721} from "@openzeppelin/contracts/token/ERC721/ERC721.sol";
import {Base64} from "@openzeppelin/contracts/utils/Base64.sol";
import {Strings} from "@openzeppelin/contracts/utils/Strings.sol";
import {GpuScores} from "./GpuScores.sol";

/// @title GpuToken: one ERC-721 token per GPU that a pog log has proven.
/// @notice A token stands for one GPU, by its UUID: its id is keccak256 of the UUID, so one GPU
/// has at most one token in this contract. Anyone may mint it, and it is always minted to the
/// address the GPU's owner named in its registration (the `owner` of its `gpu-state` record),
/// and only once `GpuScores` holds a proven state of the GPU whose latest proof speaks for its
/// model: the evidence is the log entry proven against the anchored checkpoint, not the caller.
/// The token can be transferred as any ERC-721 (that is what makes it an asset); its metadata
/// (`tokenURI`, `gpuOf`) is read from `GpuScores` at the time of reading: the verified model,
/// the latest score and price, and when the GPU was last proven.
///
/// ERC-721 from OpenZeppelin Contracts (an npm dependency, never copied). No owner, no upgrade
/// path, no ether held.
contract GpuToken is ERC721 {
    /// Where the GPUs' proven states are kept.
    GpuScores public immutable scores;

    /// Each token's GPU UUID.
    mapping(uint256 => string) private uuids;

    /// `scores` holds no state of the GPU.
    error UnknownGpu(string gpuUuid);
    /// The GPU's owner named no address to hold its token.
    error NoOwnerNamed(string gpuUuid);
    /// The GPU's latest proven state does not prove its model.
    error ModelNotProven(string gpuUuid);

    /// A token per GPU proven in `scores_`.
    constructor(GpuScores scores_) ERC721("pog proven GPU", "POGGPU") {
        scores = scores_;
    }

    /// The token id of the GPU with this UUID (whether minted or not).
    function tokenIdOf(string calldata gpuUuid) public pure returns (uint256) {
        return uint256(keccak256(bytes(gpuUuid)));
    }

    /// Mints the GPU's token to the address its owner named; returns the token id. Reverts
    /// with a named error when the GPU has no proven state, named no owner, or its latest
    /// state does not prove its model, and with OpenZeppelin's `ERC721InvalidSender` when the
    /// token exists already.
    function mint(string calldata gpuUuid) external returns (uint256 id) {
        (bool known, GpuScores.GpuState memory state,,) = scores.stateOf(gpuUuid);
        if (!known) {
            revert UnknownGpu(gpuUuid);
        }
        if (state.owner == address(0)) {
            revert NoOwnerNamed(gpuUuid);
        }
        if (!state.provesModel) {
            revert ModelNotProven(gpuUuid);
        }
        id = tokenIdOf(gpuUuid);
        uuids[id] = gpuUuid;
        _mint(state.owner, id);
    }

    /// The token's GPU and its latest proven state (reverts with `ERC721NonexistentToken` for a
    /// token not minted).
    function gpuOf(uint256 id)
        public
        view
        returns (string memory gpuUuid, GpuScores.GpuState memory state, uint64 leafIndex, uint64 anchoredSize)
    {
        _requireOwned(id);
        gpuUuid = uuids[id];
        (, state, leafIndex, anchoredSize) = scores.stateOf(gpuUuid);
    }

    /// The token's metadata: a `data:` URI of JSON (ERC-721 metadata: name, description,
    /// attributes) with the GPU's verified model, score, price and when it was last proven.
    function tokenURI(uint256 id) public view override returns (string memory) {
        (string memory gpuUuid, GpuScores.GpuState memory s, uint64 leafIndex,) = gpuOf(id);
        bytes memory attributes = abi.encodePacked(
            '[{"trait_type":"model","value":"',
            s.model,
            '"},{"trait_type":"proves_model","value":"',
            s.provesModel ? "true" : "false",
            '"},{"trait_type":"proves_memory","value":"',
            s.provesMemory ? "true" : "false",
            '"},{"trait_type":"score_ppm","display_type":"number","value":',
            Strings.toString(s.scorePpm),
            '},{"trait_type":"price_micro_usd_per_hour","display_type":"number","value":',
            Strings.toString(s.priceMicroUsd)
        );
        bytes memory json = abi.encodePacked(
            '{"name":"pog GPU ',
            gpuUuid,
            '","description":"A GPU proven by a pog log: its latest state, proven from log entry ',
            Strings.toString(leafIndex),
            '.","attributes":',
            attributes,
            '},{"trait_type":"last_proven","display_type":"date","value":',
            Strings.toString(s.recordedAtMs / 1000),
            "}]}"
        );
        return string.concat("data:application/json;base64,", Base64.encode(json));
    }
}
