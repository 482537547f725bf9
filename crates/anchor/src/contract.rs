//! The `CheckpointRegistry` contract's interface (`contracts/CheckpointRegistry.sol`), declared
//! here through alloy's `sol!` so that building pog needs neither npm nor solc. A test compiles
//! the contract with the pinned solc (`scripts/evm-tools.sh`) and checks that this interface
//! and solc's ABI declare the same functions, events and errors, so the two cannot drift.

alloy::sol! {
    /// The registry of checkpoint anchors per log origin (`contracts/CheckpointRegistry.sol`).
    #[sol(rpc, abi)]
    #[derive(Debug, PartialEq, Eq)]
    interface ICheckpointRegistry {
        /// An origin was registered; `publisher` alone may anchor it from now on.
        event Registered(bytes32 indexed originHash, address indexed publisher, string origin);
        /// A checkpoint of the origin was anchored (the `index`-th anchor of the origin).
        event Anchored(bytes32 indexed originHash, uint64 indexed size, bytes32 root, uint64 time, uint256 index);

        /// The origin is empty or longer than MAX_ORIGIN_BYTES.
        error BadOrigin(uint256 length);
        /// The origin is registered already, to `publisher`.
        error AlreadyRegistered(string origin, address publisher);
        /// The origin has not been registered.
        error NotRegistered(string origin);
        /// Only the origin's publisher may anchor it.
        error NotPublisher(string origin, address publisher, address sender);
        /// `size` is not larger than the latest anchored size (or is 0).
        error SizeNotGrowing(string origin, uint64 latestSize, uint64 size);
        /// This exact checkpoint is the latest anchor already.
        error AlreadyAnchored(string origin, uint64 size, bytes32 root);
        /// There is no anchor at that position.
        error NoSuchAnchor(string origin, uint256 index);

        /// The longest origin accepted, in bytes.
        function MAX_ORIGIN_BYTES() external view returns (uint256);
        /// Registers `origin` with the caller as its publisher, once and for good.
        function register(string calldata origin) external;
        /// Anchors the checkpoint of `origin` of `size` entries with tree root `root`.
        function anchor(string calldata origin, uint64 size, bytes32 root) external;
        /// The publisher of `origin`; zero when it is not registered.
        function publisherOf(string calldata origin) external view returns (address);
        /// How many checkpoints of `origin` are anchored.
        function anchorCount(string calldata origin) external view returns (uint256);
        /// The `index`-th anchor of `origin`.
        function anchorByIndex(string calldata origin, uint256 index) external view returns (uint64 size, bytes32 root, uint64 time);
        /// The latest anchor of `origin`; all zero when it has none.
        function latest(string calldata origin) external view returns (uint64 size, bytes32 root, uint64 time);
        /// The anchor of `origin` at tree size `size`, if one was made.
        function anchorAt(string calldata origin, uint64 size) external view returns (bool found, bytes32 root, uint64 time);
    }
}
