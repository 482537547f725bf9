// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";

/// @title GpuEscrow: renters' deposits behind their bids, paid out only for proven GPU-hours.
/// @notice A renter deposits a stablecoin (an ERC-20; with 6 decimals one unit is one of the
/// market's micro-dollars) into the account of its pog key (the Ed25519 key that signs its
/// bids), which the validator reads (`balanceOf`) to back the bids: a bid costs its maximum
/// price out of the account, so spam costs deposit. The money leaves the account only by a
/// message the validator's settlement key signed (EIP-712), submitted by anyone:
///
/// - a `Settlement` of one period of a lease pays the provider for the hours the GPU was
///   proven and answering (the validator's signed settlement record says which), and the rest
///   of the lease's money simply stays in the renter's account;
/// - a `Withdrawal` voucher lets the account's owner (the address that opened it) take out what
///   the validator says is not held by open bids and leases.
///
/// A validator that stops cannot hold the money forever: once the settlement key has signed
/// nothing on chain for `abandonAfter` seconds (settlements and `heartbeat`s count), an
/// account's owner withdraws everything without a voucher. Each settlement period and each
/// voucher is used once (replays are refused); vouchers expire.
///
/// OpenZeppelin's SafeERC20, ECDSA and EIP712 (npm dependencies, never copied). No owner, no
/// upgrade path; it holds only the deposits.
contract GpuEscrow is EIP712 {
    using SafeERC20 for IERC20;

    /// A renter's account: who opened it (and may withdraw from it) and its balance.
    struct Account {
        address owner;
        uint256 balance;
        uint64 withdrawals;
    }

    /// One period of a lease, settled: `paid` of the renter's money to the provider.
    struct Settlement {
        bytes32 lease;
        uint64 period;
        bytes32 renter;
        address provider;
        uint256 paid;
    }

    /// The validator lets an account's owner withdraw `amount` (the account's `nonce`-th
    /// withdrawal), until `expiresAt` (Unix seconds).
    struct Withdrawal {
        bytes32 renter;
        uint256 amount;
        uint64 nonce;
        uint64 expiresAt;
    }

    bytes32 private constant SETTLEMENT_TYPE =
        keccak256("Settlement(bytes32 lease,uint64 period,bytes32 renter,address provider,uint256 paid)");
    bytes32 private constant WITHDRAWAL_TYPE =
        keccak256("Withdrawal(bytes32 renter,uint256 amount,uint64 nonce,uint64 expiresAt)");

    /// The stablecoin deposited.
    IERC20 public immutable token;
    /// The validator's settlement key (an EVM address).
    address public immutable settler;
    /// Seconds of the settlement key's silence after which owners withdraw without a voucher.
    uint64 public immutable abandonAfter;
    /// When the settlement key last acted on chain (a settlement or a heartbeat).
    uint64 public lastSettlerActivity;

    /// Each renter's account, by its pog key.
    mapping(bytes32 => Account) private accounts;
    /// The settlement periods paid, by keccak256(lease, period).
    mapping(bytes32 => bool) public settled;

    /// `amount` was deposited into `renter`'s account by `from`.
    event Deposited(bytes32 indexed renter, address indexed from, uint256 amount);
    /// One period of a lease was settled.
    event Settled(bytes32 indexed lease, uint64 period, bytes32 indexed renter, address indexed provider, uint256 paid);
    /// `amount` left `renter`'s account to its owner.
    event Withdrawn(bytes32 indexed renter, address indexed owner, uint256 amount, bool abandoned);

    /// The amount is 0.
    error ZeroAmount();
    /// Only the account's owner may withdraw from it.
    error NotAccountOwner(bytes32 renter, address owner, address sender);
    /// The account holds less than asked.
    error InsufficientBalance(bytes32 renter, uint256 balance, uint256 asked);
    /// The message was not signed by the settlement key.
    error BadSignature(address recovered);
    /// This settlement period was paid already.
    error AlreadySettled(bytes32 lease, uint64 period);
    /// The voucher is not the account's next withdrawal.
    error WrongNonce(bytes32 renter, uint64 expected, uint64 given);
    /// The voucher expired.
    error Expired(uint64 expiresAt, uint64 now);
    /// The settlement key has been active within `abandonAfter`: withdraw with a voucher.
    error NotAbandoned(uint64 lastActivity, uint64 abandonAfter);
    /// Only the settlement key may send a heartbeat.
    error NotSettler(address sender);

    /// Deposits of `token_`, settled by `settler_`, free after `abandonAfter_` seconds of its
    /// silence.
    constructor(IERC20 token_, address settler_, uint64 abandonAfter_) EIP712("pog GpuEscrow", "1") {
        token = token_;
        settler = settler_;
        abandonAfter = abandonAfter_;
        lastSettlerActivity = uint64(block.timestamp);
    }

    /// Deposits `amount` (approved to this contract first) into `renter`'s account; the first
    /// depositor of an account is its owner.
    function deposit(bytes32 renter, uint256 amount) external {
        if (amount == 0) revert ZeroAmount();
        Account storage a = accounts[renter];
        if (a.owner == address(0)) a.owner = msg.sender;
        a.balance += amount;
        token.safeTransferFrom(msg.sender, address(this), amount);
        emit Deposited(renter, msg.sender, amount);
    }

    /// Pays one period of a lease as the validator's settlement key signed it: `paid` from the
    /// renter's account to the provider. Anyone may submit it (the provider, typically).
    function settle(Settlement calldata s, bytes calldata signature) external {
        address signer = ECDSA.recover(_hashTypedDataV4(settlementHash(s)), signature);
        if (signer != settler) revert BadSignature(signer);
        bytes32 key = keccak256(abi.encode(s.lease, s.period));
        if (settled[key]) revert AlreadySettled(s.lease, s.period);
        Account storage a = accounts[s.renter];
        if (a.balance < s.paid) revert InsufficientBalance(s.renter, a.balance, s.paid);
        settled[key] = true;
        a.balance -= s.paid;
        lastSettlerActivity = uint64(block.timestamp);
        if (s.paid != 0) token.safeTransfer(s.provider, s.paid);
        emit Settled(s.lease, s.period, s.renter, s.provider, s.paid);
    }

    /// Withdraws what the validator's voucher allows, to the account's owner (its sender).
    function withdraw(Withdrawal calldata w, bytes calldata signature) external {
        address signer = ECDSA.recover(_hashTypedDataV4(withdrawalHash(w)), signature);
        if (signer != settler) revert BadSignature(signer);
        if (w.expiresAt < block.timestamp) revert Expired(w.expiresAt, uint64(block.timestamp));
        Account storage a = accounts[w.renter];
        if (a.owner != msg.sender) revert NotAccountOwner(w.renter, a.owner, msg.sender);
        if (w.nonce != a.withdrawals) revert WrongNonce(w.renter, a.withdrawals, w.nonce);
        if (a.balance < w.amount) revert InsufficientBalance(w.renter, a.balance, w.amount);
        a.withdrawals += 1;
        a.balance -= w.amount;
        token.safeTransfer(msg.sender, w.amount);
        emit Withdrawn(w.renter, msg.sender, w.amount, false);
    }

    /// Withdraws the whole account without a voucher, once the settlement key has been silent
    /// for `abandonAfter` seconds.
    function withdrawAbandoned(bytes32 renter) external {
        if (block.timestamp <= uint256(lastSettlerActivity) + abandonAfter) {
            revert NotAbandoned(lastSettlerActivity, abandonAfter);
        }
        Account storage a = accounts[renter];
        if (a.owner != msg.sender) revert NotAccountOwner(renter, a.owner, msg.sender);
        uint256 amount = a.balance;
        if (amount == 0) revert ZeroAmount();
        a.balance = 0;
        token.safeTransfer(msg.sender, amount);
        emit Withdrawn(renter, msg.sender, amount, true);
    }

    /// The settlement key says it is alive (when it has nothing to settle).
    function heartbeat() external {
        if (msg.sender != settler) revert NotSettler(msg.sender);
        lastSettlerActivity = uint64(block.timestamp);
    }

    /// A renter's account: its owner, balance and how many vouchers it has used.
    function accountOf(bytes32 renter) external view returns (address owner, uint256 balance, uint64 withdrawals) {
        Account storage a = accounts[renter];
        return (a.owner, a.balance, a.withdrawals);
    }

    /// The EIP-712 digest the settlement key signs for `s`.
    function settlementDigest(Settlement calldata s) external view returns (bytes32) {
        return _hashTypedDataV4(settlementHash(s));
    }

    /// The EIP-712 digest the settlement key signs for `w`.
    function withdrawalDigest(Withdrawal calldata w) external view returns (bytes32) {
        return _hashTypedDataV4(withdrawalHash(w));
    }

    function settlementHash(Settlement calldata s) private pure returns (bytes32) {
        return keccak256(abi.encode(SETTLEMENT_TYPE, s.lease, s.period, s.renter, s.provider, s.paid));
    }

    function withdrawalHash(Withdrawal calldata w) private pure returns (bytes32) {
        return keccak256(abi.encode(WITHDRAWAL_TYPE, w.renter, w.amount, w.nonce, w.expiresAt));
    }
}
