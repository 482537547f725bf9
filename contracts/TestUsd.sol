// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";

/// @title TestUsd: a stablecoin test double for pog's tests and demos, never for a real chain.
/// @notice OpenZeppelin's ERC-20 with 6 decimals (one unit is one micro-dollar, as the
/// market's prices) that anyone can mint: the deposits of `GpuEscrow`'s tests on anvil.
contract TestUsd is ERC20 {
    constructor() ERC20("pog TEST dollar (tests only)", "TESTUSD") {}

    /// Six decimals, as USDC: one unit is one micro-dollar.
    function decimals() public pure override returns (uint8) {
        return 6;
    }

    /// Mints `amount` to `to`: anyone may (a test double).
    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }
}
