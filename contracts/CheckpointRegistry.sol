// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

/// @title CheckpointRegistry: transparency-log checkpoints anchored on an EVM chain.
/// @notice One history of anchors per log origin (the first line of a c2sp.org/tlog-checkpoint,
/// e.g. "pog.validator/0123456789abcdef"). Each anchor is a tree size, the tree's root and the
/// block time it was anchored at. An origin is registered once and bound for good to the
/// address that registered it (its publisher); only that publisher may anchor, and every
/// anchor must be of a larger tree than the one before. Nothing is ever replaced or removed,
/// so a holder who reads the anchor at a tree size reads what was published at that size.
///
/// Who may register: anyone, first come first served (docs/ledger.md argues it). A squatter who
/// registers someone else's origin can only withhold anchors: it holds no log key, so no
/// checkpoint that a holder accepts (signed by the log) can carry a root the squatter chose.
/// The rightful publisher sees the squat when it registers and uses another registry.
///
/// No dependencies, no owner, no upgrade path, no ether held.
contract CheckpointRegistry {
    /// One anchored checkpoint: the tree of `size` entries had root `root` at block time `time`.
    /// Two storage slots: the root, then the size and time packed.
    struct Anchor {
        bytes32 root;
        uint64 size;
        uint64 time;
    }

    /// The longest origin accepted, in bytes (a checkpoint's origin line is short; this bounds
    /// what a registration can make every later call hash).
    uint256 public constant MAX_ORIGIN_BYTES = 256;

    /// Each origin's publisher, by keccak256 of the origin; zero when not registered.
    mapping(bytes32 => address) private publishers;

    /// Each origin's anchors in the order they were made, so by strictly growing size.
    mapping(bytes32 => Anchor[]) private anchors;

    /// An origin was registered; `publisher` alone may anchor it from now on.
    event Registered(bytes32 indexed originHash, address indexed publisher, string origin);

    /// A checkpoint of the origin was anchored (the `index`-th anchor of the origin, from 0).
    event Anchored(bytes32 indexed originHash, uint64 indexed size, bytes32 root, uint64 time, uint256 index);

    /// The origin is empty or longer than MAX_ORIGIN_BYTES.
    error BadOrigin(uint256 length);
    /// The origin is registered already, to `publisher`.
    error AlreadyRegistered(string origin, address publisher);
    /// The origin has not been registered.
    error NotRegistered(string origin);
    /// Only the origin's publisher may anchor it.
    error NotPublisher(string origin, address publisher, address sender);
    /// The tree must grow: `size` is not larger than the latest anchored size (or is 0).
    error SizeNotGrowing(string origin, uint64 latestSize, uint64 size);
    /// This exact checkpoint (size and root) is the latest anchor already. Refused like any
    /// size that does not grow, with its own error so that a publisher retrying a transaction
    /// whose receipt it lost can tell it has nothing left to do.
    error AlreadyAnchored(string origin, uint64 size, bytes32 root);
    /// There is no anchor at that position.
    error NoSuchAnchor(string origin, uint256 index);

    /// Registers `origin` with the caller as its publisher, once and for good.
    function register(string calldata origin) external {
        bytes32 key = originHash(origin);
        address current = publishers[key];
        if (current != address(0)) revert AlreadyRegistered(origin, current);
        publishers[key] = msg.sender;
        emit Registered(key, msg.sender, origin);
    }

    /// Anchors the checkpoint of `origin` of `size` entries with tree root `root`. Only the
    /// origin's publisher may, and only for a tree larger than the latest anchored.
    function anchor(string calldata origin, uint64 size, bytes32 root) external {
        bytes32 key = originHash(origin);
        address publisher = publishers[key];
        if (publisher == address(0)) revert NotRegistered(origin);
        if (publisher != msg.sender) revert NotPublisher(origin, publisher, msg.sender);
        Anchor[] storage history = anchors[key];
        uint256 count = history.length;
        uint64 latestSize = count == 0 ? 0 : history[count - 1].size;
        if (size <= latestSize) {
            if (count != 0 && size == latestSize && history[count - 1].root == root) {
                revert AlreadyAnchored(origin, size, root);
            }
            revert SizeNotGrowing(origin, latestSize, size);
        }
        uint64 time = uint64(block.timestamp);
        history.push(Anchor({root: root, size: size, time: time}));
        emit Anchored(key, size, root, time, count);
    }

    /// The publisher of `origin`; the zero address when it is not registered.
    function publisherOf(string calldata origin) external view returns (address) {
        return publishers[keccak256(bytes(origin))];
    }

    /// How many checkpoints of `origin` are anchored.
    function anchorCount(string calldata origin) external view returns (uint256) {
        return anchors[keccak256(bytes(origin))].length;
    }

    /// The `index`-th anchor of `origin` (0 is the first).
    function anchorByIndex(string calldata origin, uint256 index)
        external
        view
        returns (uint64 size, bytes32 root, uint64 time)
    {
        Anchor[] storage history = anchors[keccak256(bytes(origin))];
        if (index >= history.length) revert NoSuchAnchor(origin, index);
        Anchor storage a = history[index];
        return (a.size, a.root, a.time);
    }

    /// The latest anchor of `origin`; all zero when it has none.
    function latest(string calldata origin) external view returns (uint64 size, bytes32 root, uint64 time) {
        Anchor[] storage history = anchors[keccak256(bytes(origin))];
        if (history.length == 0) return (0, bytes32(0), 0);
        Anchor storage a = history[history.length - 1];
        return (a.size, a.root, a.time);
    }

    /// The anchor of `origin` at tree size `size`: `found` is false when no checkpoint of that
    /// size was anchored. A binary search over the history, whose sizes strictly grow.
    function anchorAt(string calldata origin, uint64 size)
        external
        view
        returns (bool found, bytes32 root, uint64 time)
    {
        Anchor[] storage history = anchors[keccak256(bytes(origin))];
        uint256 lo = 0;
        uint256 hi = history.length;
        while (lo < hi) {
            uint256 mid = (lo + hi) / 2;
            uint64 s = history[mid].size;
            if (s == size) return (true, history[mid].root, history[mid].time);
            if (s < size) lo = mid + 1;
            else hi = mid;
        }
        return (false, bytes32(0), 0);
    }

    /// The key of `origin` in the registry (also the events' indexed `originHash`), checking
    /// its length.
    function originHash(string calldata origin) private pure returns (bytes32) {
        uint256 n = bytes(origin).length;
        if (n == 0 || n > MAX_ORIGIN_BYTES) revert BadOrigin(n);
        return keccak256(bytes(origin));
    }
}
