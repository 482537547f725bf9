// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

/// @title CheckpointRegistry: transparency-log checkpoints anchored on an EVM chain.
/// @notice One history of anchors per log origin (the first line of a c2sp.org/tlog-checkpoint,
/// e.g. "pog.validator/0123456789abcdef"). Each anchor is a tree size, the tree's root and the
/// block time it was anchored at. An origin is registered once; the address that registers it
/// is its owner and first publisher. Only the publisher anchors, and every anchor must be of a
/// larger tree than the latest valid one. Nothing is ever replaced or removed, so a holder who
/// reads the anchor at a tree size reads what was published at that size, unless the origin's
/// owner voided it (below), which the chain shows too.
///
/// A publisher key that misbehaves (stolen, or a bug that anchors a size the log never had)
/// could otherwise stop an origin for good, sizes having to grow. The owner (a key apart from
/// the hot publisher key: `transferOwnership` moves it to a cold one) can `rotate`: name a new
/// publisher and void every anchor of the current era at or above a size. The anchors stay
/// readable (`anchorByIndex` says which are void) and a new era begins, whose anchors must still
/// grow past the latest valid one; lookups (`latest`, `anchorAt`, `newestAtMost`) see valid
/// anchors only. An owner who voids a true anchor and anchors another root at its size shows a
/// fork on chain, which `pog verify` and `pog ledger monitor` report.
///
/// Who may register: anyone, first come first served (docs/ledger.md argues it). A squatter who
/// registers someone else's origin can only withhold anchors: it holds no log key, so no
/// checkpoint that a holder accepts (signed by the log) can carry a root the squatter chose.
/// The rightful publisher sees the squat when it registers and uses another registry.
///
/// No dependencies, no contract owner, no upgrade path, no ether held.
contract CheckpointRegistry {
    /// One anchored checkpoint: the tree of `size` entries had root `root` at block time `time`.
    /// Two storage slots: the root, then the size and time packed.
    struct Anchor {
        bytes32 root;
        uint64 size;
        uint64 time;
    }

    /// One era of an origin's anchors, by strictly growing size: those at or above `voidFrom`
    /// were voided when the next era began (the current era's `voidFrom` is the largest size).
    struct Era {
        uint64 voidFrom;
        Anchor[] anchors;
    }

    /// The longest origin accepted, in bytes (a checkpoint's origin line is short; this bounds
    /// what a registration can make every later call hash).
    uint256 public constant MAX_ORIGIN_BYTES = 256;

    /// Each origin's publisher, by keccak256 of the origin; zero when not registered.
    mapping(bytes32 => address) private publishers;

    /// Each origin's owner (who may rotate its publisher), by keccak256 of the origin.
    mapping(bytes32 => address) private owners;

    /// Each origin's eras of anchors, oldest first (one from its registration).
    mapping(bytes32 => Era[]) private eras;

    /// An origin was registered; `publisher` alone may anchor it from now on, and owns it.
    event Registered(bytes32 indexed originHash, address indexed publisher, string origin);

    /// A checkpoint of the origin was anchored (the `index`-th anchor of era `era`, from 0).
    event Anchored(bytes32 indexed originHash, uint64 indexed size, bytes32 root, uint64 time, uint256 era, uint256 index);

    /// The owner named a new publisher and began era `era`, voiding the previous era's anchors
    /// of `voidFrom` entries or more.
    event Rotated(bytes32 indexed originHash, uint256 era, address indexed publisher, uint64 voidFrom);

    /// The origin's owner is `owner` from now on.
    event OwnerChanged(bytes32 indexed originHash, address indexed owner);

    /// The origin is empty or longer than MAX_ORIGIN_BYTES.
    error BadOrigin(uint256 length);
    /// The origin is registered already, to `publisher`.
    error AlreadyRegistered(string origin, address publisher);
    /// The origin has not been registered.
    error NotRegistered(string origin);
    /// Only the origin's publisher may anchor it.
    error NotPublisher(string origin, address publisher, address sender);
    /// Only the origin's owner may rotate its publisher or hand it on.
    error NotOwner(string origin, address owner, address sender);
    /// The tree must grow: `size` is not larger than the latest valid anchored size (or is 0).
    error SizeNotGrowing(string origin, uint64 latestSize, uint64 size);
    /// This exact checkpoint (size and root) is the latest anchor already. Refused like any
    /// size that does not grow, with its own error so that a publisher retrying a transaction
    /// whose receipt it lost can tell it has nothing left to do.
    error AlreadyAnchored(string origin, uint64 size, bytes32 root);
    /// There is no anchor at that position.
    error NoSuchAnchor(string origin, uint256 era, uint256 index);
    /// A rotation must void from a size above 0, and name a publisher and an owner that are not zero.
    error BadRotation(string origin);

    /// Registers `origin` with the caller as its publisher and owner, once and for good.
    function register(string calldata origin) external {
        bytes32 key = originHash(origin);
        address current = publishers[key];
        if (current != address(0)) revert AlreadyRegistered(origin, current);
        publishers[key] = msg.sender;
        owners[key] = msg.sender;
        eras[key].push().voidFrom = type(uint64).max;
        emit Registered(key, msg.sender, origin);
    }

    /// Anchors the checkpoint of `origin` of `size` entries with tree root `root`. Only the
    /// origin's publisher may, and only for a tree larger than the latest valid anchor.
    function anchor(string calldata origin, uint64 size, bytes32 root) external {
        bytes32 key = originHash(origin);
        address publisher = publishers[key];
        if (publisher == address(0)) revert NotRegistered(origin);
        if (publisher != msg.sender) revert NotPublisher(origin, publisher, msg.sender);
        Era[] storage all = eras[key];
        uint256 era = all.length - 1;
        Anchor[] storage current = all[era].anchors;
        uint256 count = current.length;
        // The latest valid anchor: the current era's last (all of the current era's are
        // valid), or, in an era just begun, the newest valid one before it.
        bool any = count != 0;
        uint64 latestSize = any ? current[count - 1].size : 0;
        bytes32 latestRoot;
        if (!any) {
            Anchor memory before;
            (any, before) = newestBelow(key, type(uint64).max);
            (latestSize, latestRoot) = (before.size, before.root);
        }
        if (size <= latestSize) {
            if (count != 0) latestRoot = current[count - 1].root;
            if (any && size == latestSize && latestRoot == root) {
                revert AlreadyAnchored(origin, size, root);
            }
            revert SizeNotGrowing(origin, latestSize, size);
        }
        uint64 time = uint64(block.timestamp);
        current.push(Anchor({root: root, size: size, time: time}));
        emit Anchored(key, size, root, time, era, count);
    }

    /// Names `publisher` as the origin's publisher and begins a new era, voiding the current
    /// era's anchors of `voidFrom` entries or more. Only the origin's owner may.
    function rotate(string calldata origin, address publisher, uint64 voidFrom) external {
        bytes32 key = ownedBy(origin, msg.sender);
        if (voidFrom == 0 || publisher == address(0)) revert BadRotation(origin);
        Era[] storage all = eras[key];
        all[all.length - 1].voidFrom = voidFrom;
        all.push().voidFrom = type(uint64).max;
        publishers[key] = publisher;
        emit Rotated(key, all.length - 1, publisher, voidFrom);
    }

    /// Hands the origin's ownership to `owner` (a cold key, apart from the publisher's). Only
    /// the origin's owner may.
    function transferOwnership(string calldata origin, address owner) external {
        bytes32 key = ownedBy(origin, msg.sender);
        if (owner == address(0)) revert BadRotation(origin);
        owners[key] = owner;
        emit OwnerChanged(key, owner);
    }

    /// The publisher of `origin`; the zero address when it is not registered.
    function publisherOf(string calldata origin) external view returns (address) {
        return publishers[keccak256(bytes(origin))];
    }

    /// The owner of `origin`; the zero address when it is not registered.
    function ownerOf(string calldata origin) external view returns (address) {
        return owners[keccak256(bytes(origin))];
    }

    /// How many eras `origin` has had (1 from its registration; 0 when not registered).
    function eraCount(string calldata origin) external view returns (uint256) {
        return eras[keccak256(bytes(origin))].length;
    }

    /// Era `era` of `origin`: the size its anchors are void from (the largest size while it is
    /// the current era) and how many anchors it holds.
    function eraOf(string calldata origin, uint256 era) external view returns (uint64 voidFrom, uint256 anchors) {
        Era[] storage all = eras[keccak256(bytes(origin))];
        if (era >= all.length) revert NoSuchAnchor(origin, era, 0);
        return (all[era].voidFrom, all[era].anchors.length);
    }

    /// The `index`-th anchor of era `era` of `origin` (0 is the first), and whether it is
    /// valid (not voided by a rotation).
    function anchorByIndex(string calldata origin, uint256 era, uint256 index)
        external
        view
        returns (uint64 size, bytes32 root, uint64 time, bool valid)
    {
        Era[] storage all = eras[keccak256(bytes(origin))];
        if (era >= all.length || index >= all[era].anchors.length) revert NoSuchAnchor(origin, era, index);
        Anchor storage a = all[era].anchors[index];
        return (a.size, a.root, a.time, a.size < all[era].voidFrom);
    }

    /// The latest valid anchor of `origin`; all zero when it has none.
    function latest(string calldata origin) external view returns (uint64 size, bytes32 root, uint64 time) {
        (bool any, Anchor memory a) = newestBelow(keccak256(bytes(origin)), type(uint64).max);
        if (!any) return (0, bytes32(0), 0);
        return (a.size, a.root, a.time);
    }

    /// The newest valid anchor of `origin` of at most `size` entries: `found` is false when
    /// every valid anchor is larger (or there is none).
    function newestAtMost(string calldata origin, uint64 size)
        external
        view
        returns (bool found, uint64 anchoredSize, bytes32 root, uint64 time)
    {
        uint64 bound = size == type(uint64).max ? size : size + 1;
        (bool any, Anchor memory a) = newestBelow(keccak256(bytes(origin)), bound);
        return (any, a.size, a.root, a.time);
    }

    /// The valid anchor of `origin` at tree size `size`: `found` is false when no checkpoint of
    /// that size was anchored (or its anchor was voided).
    function anchorAt(string calldata origin, uint64 size)
        external
        view
        returns (bool found, bytes32 root, uint64 time)
    {
        if (size == type(uint64).max) return (false, bytes32(0), 0);
        (bool any, Anchor memory a) = newestBelow(keccak256(bytes(origin)), size + 1);
        if (!any || a.size != size) return (false, bytes32(0), 0);
        return (true, a.root, a.time);
    }

    /// The newest valid anchor of the origin `key` of fewer than `bound` entries. Valid anchors
    /// grow strictly across eras, so the newest era holding one below the bound holds the
    /// newest; within an era, a binary search (sizes strictly grow).
    function newestBelow(bytes32 key, uint64 bound) private view returns (bool, Anchor memory) {
        Era[] storage all = eras[key];
        for (uint256 e = all.length; e > 0; --e) {
            Era storage era = all[e - 1];
            uint64 limit = era.voidFrom < bound ? era.voidFrom : bound;
            Anchor[] storage history = era.anchors;
            // The number of anchors of this era below `limit`.
            uint256 lo = 0;
            uint256 hi = history.length;
            while (lo < hi) {
                uint256 mid = (lo + hi) / 2;
                if (history[mid].size < limit) lo = mid + 1;
                else hi = mid;
            }
            if (lo > 0) return (true, history[lo - 1]);
        }
        Anchor memory none;
        return (false, none);
    }

    /// The key of `origin`, which `sender` must own.
    function ownedBy(string calldata origin, address sender) private view returns (bytes32) {
        bytes32 key = originHash(origin);
        address owner = owners[key];
        if (owner == address(0)) revert NotRegistered(origin);
        if (owner != sender) revert NotOwner(origin, owner, sender);
        return key;
    }

    /// The key of `origin` in the registry (also the events' indexed `originHash`), checking
    /// its length.
    function originHash(string calldata origin) private pure returns (bytes32) {
        uint256 n = bytes(origin).length;
        if (n == 0 || n > MAX_ORIGIN_BYTES) revert BadOrigin(n);
        return keccak256(bytes(origin));
    }
}
