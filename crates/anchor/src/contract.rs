//! The interfaces of pog's contracts (`contracts/`): the `CheckpointRegistry`, `GpuScores` and
//! `GpuToken`, declared here through alloy's `sol!` so that building pog needs neither npm nor
//! solc. A test compiles the contracts with the pinned solc (`scripts/evm-tools.sh`) and checks
//! that each interface and solc's ABI declare the same functions, events and errors, so the two
//! cannot drift.

alloy::sol! {
    /// The registry of checkpoint anchors per log origin (`contracts/CheckpointRegistry.sol`).
    #[sol(rpc, abi)]
    #[derive(Debug, PartialEq, Eq)]
    interface ICheckpointRegistry {
        /// An origin was registered; `publisher` alone may anchor it from now on, and owns it.
        event Registered(bytes32 indexed originHash, address indexed publisher, string origin);
        /// A checkpoint of the origin was anchored (the `index`-th anchor of era `era`).
        event Anchored(bytes32 indexed originHash, uint64 indexed size, bytes32 root, uint64 time, uint256 era, uint256 index);
        /// The owner named a new publisher and began era `era`, voiding the previous era's
        /// anchors of `voidFrom` entries or more.
        event Rotated(bytes32 indexed originHash, uint256 era, address indexed publisher, uint64 voidFrom);
        /// The origin's owner changed.
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
        /// A rotation voiding from size 0, or naming the zero address.
        error BadRotation(string origin);
        /// `size` is not larger than the latest anchored size (or is 0).
        error SizeNotGrowing(string origin, uint64 latestSize, uint64 size);
        /// This exact checkpoint is the latest anchor already.
        error AlreadyAnchored(string origin, uint64 size, bytes32 root);
        /// There is no anchor (or era) at that position.
        error NoSuchAnchor(string origin, uint256 era, uint256 index);

        /// The longest origin accepted, in bytes.
        function MAX_ORIGIN_BYTES() external view returns (uint256);
        /// Registers `origin` with the caller as its publisher, once and for good.
        function register(string calldata origin) external;
        /// Anchors the checkpoint of `origin` of `size` entries with tree root `root`.
        function anchor(string calldata origin, uint64 size, bytes32 root) external;
        /// Names a new publisher and begins a new era, voiding the current era's anchors of
        /// `voidFrom` entries or more (the owner only).
        function rotate(string calldata origin, address publisher, uint64 voidFrom) external;
        /// Hands the origin's ownership on (the owner only).
        function transferOwnership(string calldata origin, address owner) external;
        /// The publisher of `origin`; zero when it is not registered.
        function publisherOf(string calldata origin) external view returns (address);
        /// The owner of `origin`; zero when it is not registered.
        function ownerOf(string calldata origin) external view returns (address);
        /// How many eras `origin` has had.
        function eraCount(string calldata origin) external view returns (uint256);
        /// An era: the size its anchors are void from, and how many it holds.
        function eraOf(string calldata origin, uint256 era) external view returns (uint64 voidFrom, uint256 anchors);
        /// The `index`-th anchor of era `era` of `origin`, and whether it is valid.
        function anchorByIndex(string calldata origin, uint256 era, uint256 index) external view returns (uint64 size, bytes32 root, uint64 time, bool valid);
        /// The latest valid anchor of `origin`; all zero when it has none.
        function latest(string calldata origin) external view returns (uint64 size, bytes32 root, uint64 time);
        /// The newest valid anchor of `origin` of at most `size` entries.
        function newestAtMost(string calldata origin, uint64 size) external view returns (bool found, uint64 anchoredSize, bytes32 root, uint64 time);
        /// The valid anchor of `origin` at tree size `size`, if one was made.
        function anchorAt(string calldata origin, uint64 size) external view returns (bool found, bytes32 root, uint64 time);
    }
}

alloy::sol! {
    /// Each GPU's latest state, proven from an anchored log (`contracts/GpuScores.sol`).
    #[sol(rpc, abi)]
    #[derive(Debug, PartialEq, Eq)]
    interface IGpuScores {
        /// A GPU's state as its `gpu-state` record states it.
        struct GpuState {
            string gpuUuid;
            string model;
            bool provesModel;
            bool provesMemory;
            uint64 scorePpm;
            uint64 priceMicroUsd;
            address owner;
            uint64 recordedAtMs;
        }
        /// A `gpu-state` record with where it sits in the log.
        struct ProvenState {
            GpuState state;
            uint64 gpuSeq;
            uint64 prevIndex;
            bytes32 signer;
            bytes signature;
            uint64 leafIndex;
            bytes32[] proof;
        }

        /// A GPU's state was proven from the log entry at `leafIndex`.
        event StateProven(bytes32 indexed gpu, string gpuUuid, uint64 leafIndex, uint64 anchoredSize, uint64 scorePpm, uint64 priceMicroUsd);

        /// The registry holds no anchor of the origin at that tree size.
        error NoAnchor(string origin, uint64 size);
        /// The UUID is empty or too long.
        error BadUuid(uint256 length);
        /// The signature is not 64 bytes.
        error BadSignature(uint256 length);
        /// The rebuilt entry is not that leaf of the anchored tree.
        error NotInLog(string gpuUuid, uint64 leafIndex, uint64 size);
        /// The entry is not newer than the GPU's kept state.
        error NotNewer(string gpuUuid, uint64 leafIndex, uint64 keptIndex);
        /// Nothing was submitted.
        error EmptyBatch();
        /// OpenZeppelin's Strings: a hex string too short for its value (never for an address).
        error StringsInsufficientHexLength(uint256 value, uint256 length);

        /// The ledger's entry format version.
        function ENTRY_VERSION() external view returns (uint8);
        /// The `gpu-state` kind's code.
        function KIND_GPU_STATE() external view returns (uint8);
        /// The `gpu-state` body's version.
        function STATE_VERSION() external view returns (uint32);
        /// The longest UUID, in bytes.
        function MAX_UUID_BYTES() external view returns (uint256);
        /// The registry whose anchors it trusts.
        function registry() external view returns (address);
        /// The log's origin.
        function origin() external view returns (string memory);
        /// How many GPUs have a proven state.
        function gpuCount() external view returns (uint256);
        /// Proves and keeps `states` from the checkpoint of `size` entries anchored.
        function submit(uint64 size, ProvenState[] calldata states) external;
        /// A GPU's latest proven state.
        function stateOf(string calldata gpuUuid) external view returns (bool known, GpuState memory state, uint64 leafIndex, uint64 anchoredSize);
        /// The ledger entry of a `gpu-state` record with these fields.
        function entryOf(GpuState calldata state, uint64 gpuSeq, uint64 prevIndex, bytes32 signer, bytes calldata signature) external pure returns (bytes memory);
        /// The `gpu-state` body with these fields.
        function bodyOf(GpuState calldata state) external pure returns (bytes memory);
        /// RFC 6962 inclusion proof verification.
        function verifyInclusion(bytes32 leaf, uint64 index, uint64 size, bytes32[] calldata proof, bytes32 root) external pure returns (bool);
        /// The RFC 6962 leaf hash.
        function leafHash(bytes calldata data) external pure returns (bytes32);
    }
}

alloy::sol! {
    /// One ERC-721 token per proven GPU (`contracts/GpuToken.sol`, OpenZeppelin's ERC-721).
    #[sol(rpc, abi)]
    #[derive(Debug, PartialEq, Eq)]
    interface IGpuToken {
        /// A GPU's state (as `IGpuScores.GpuState`).
        struct GpuState {
            string gpuUuid;
            string model;
            bool provesModel;
            bool provesMemory;
            uint64 scorePpm;
            uint64 priceMicroUsd;
            address owner;
            uint64 recordedAtMs;
        }

        /// ERC-721: a token moved (minted: from zero).
        event Transfer(address indexed from, address indexed to, uint256 indexed tokenId);
        /// ERC-721: an approval.
        event Approval(address indexed owner, address indexed approved, uint256 indexed tokenId);
        /// ERC-721: an operator approval.
        event ApprovalForAll(address indexed owner, address indexed operator, bool approved);

        /// The scores contract holds no state of the GPU.
        error UnknownGpu(string gpuUuid);
        /// The GPU's owner named no address.
        error NoOwnerNamed(string gpuUuid);
        /// The GPU's latest state does not prove its model.
        error ModelNotProven(string gpuUuid);
        /// ERC-6093 errors of OpenZeppelin's ERC-721.
        error ERC721IncorrectOwner(address sender, uint256 tokenId, address owner);
        /// ERC-6093.
        error ERC721InsufficientApproval(address operator, uint256 tokenId);
        /// ERC-6093.
        error ERC721InvalidApprover(address approver);
        /// ERC-6093.
        error ERC721InvalidOperator(address operator);
        /// ERC-6093.
        error ERC721InvalidOwner(address owner);
        /// ERC-6093.
        error ERC721InvalidReceiver(address receiver);
        /// ERC-6093: minting a token that exists.
        error ERC721InvalidSender(address sender);
        /// ERC-6093: no such token.
        error ERC721NonexistentToken(uint256 tokenId);

        /// The scores contract it reads.
        function scores() external view returns (address);
        /// The token id of a GPU.
        function tokenIdOf(string calldata gpuUuid) external pure returns (uint256);
        /// Mints the GPU's token to its named owner.
        function mint(string calldata gpuUuid) external returns (uint256 id);
        /// The token's GPU and its latest proven state.
        function gpuOf(uint256 id) external view returns (string memory gpuUuid, GpuState memory state, uint64 leafIndex, uint64 anchoredSize);
        /// ERC-721 metadata.
        function tokenURI(uint256 id) external view returns (string memory);
        /// ERC-721 metadata.
        function name() external view returns (string memory);
        /// ERC-721 metadata.
        function symbol() external view returns (string memory);
        /// ERC-721.
        function balanceOf(address owner) external view returns (uint256);
        /// ERC-721.
        function ownerOf(uint256 tokenId) external view returns (address);
        /// ERC-721.
        function approve(address to, uint256 tokenId) external;
        /// ERC-721.
        function getApproved(uint256 tokenId) external view returns (address);
        /// ERC-721.
        function setApprovalForAll(address operator, bool approved) external;
        /// ERC-721.
        function isApprovedForAll(address owner, address operator) external view returns (bool);
        /// ERC-721.
        function transferFrom(address from, address to, uint256 tokenId) external;
        /// ERC-721.
        function safeTransferFrom(address from, address to, uint256 tokenId) external;
        /// ERC-721.
        function safeTransferFrom(address from, address to, uint256 tokenId, bytes data) external;
        /// ERC-165.
        function supportsInterface(bytes4 interfaceId) external view returns (bool);
    }
}

alloy::sol! {
    /// Renters' deposits behind their bids, paid out on the validator's signed settlements
    /// (`contracts/GpuEscrow.sol`).
    #[sol(rpc, abi)]
    #[derive(Debug, PartialEq, Eq)]
    interface IGpuEscrow {
        /// One period of a lease, settled (EIP-712 type `Settlement`).
        struct Settlement {
            bytes32 lease;
            uint64 period;
            bytes32 renter;
            address provider;
            uint256 paid;
        }
        /// A withdrawal voucher (EIP-712 type `Withdrawal`).
        struct Withdrawal {
            bytes32 renter;
            uint256 amount;
            uint64 nonce;
            uint64 expiresAt;
        }

        /// A deposit into a renter's account.
        event Deposited(bytes32 indexed renter, address indexed from, uint256 amount);
        /// One period of a lease was settled.
        event Settled(bytes32 indexed lease, uint64 period, bytes32 indexed renter, address indexed provider, uint256 paid);
        /// Money left a renter's account to its owner.
        event Withdrawn(bytes32 indexed renter, address indexed owner, uint256 amount, bool abandoned);
        /// EIP-5267: the EIP-712 domain changed (never, here; OpenZeppelin's EIP712 declares it).
        event EIP712DomainChanged();

        /// The amount is 0.
        error ZeroAmount();
        /// Only the account's owner may withdraw from it.
        error NotAccountOwner(bytes32 renter, address owner, address sender);
        /// The account holds less than asked.
        error InsufficientBalance(bytes32 renter, uint256 balance, uint256 asked);
        /// Not signed by the settlement key.
        error BadSignature(address recovered);
        /// The settlement period was paid already.
        error AlreadySettled(bytes32 lease, uint64 period);
        /// Not the account's next withdrawal.
        error WrongNonce(bytes32 renter, uint64 expected, uint64 given);
        /// The voucher expired.
        error Expired(uint64 expiresAt, uint64 now);
        /// The settlement key is not silent long enough.
        error NotAbandoned(uint64 lastActivity, uint64 abandonAfter);
        /// Only the settlement key sends heartbeats.
        error NotSettler(address sender);
        /// OpenZeppelin's ECDSA: a malformed signature.
        error ECDSAInvalidSignature();
        /// OpenZeppelin's ECDSA: a signature of the wrong length.
        error ECDSAInvalidSignatureLength(uint256 length);
        /// OpenZeppelin's ECDSA: a malleable signature.
        error ECDSAInvalidSignatureS(bytes32 s);
        /// OpenZeppelin's SafeERC20: the token's transfer failed.
        error SafeERC20FailedOperation(address token);
        /// OpenZeppelin's ShortStrings (never for this contract's name).
        error InvalidShortString();
        /// OpenZeppelin's ShortStrings (never for this contract's name).
        error StringTooLong(string str);

        /// The stablecoin.
        function token() external view returns (address);
        /// The settlement key.
        function settler() external view returns (address);
        /// Seconds of the settlement key's silence after which owners withdraw freely.
        function abandonAfter() external view returns (uint64);
        /// When the settlement key last acted.
        function lastSettlerActivity() external view returns (uint64);
        /// Whether a settlement period (by keccak256(lease, period)) was paid.
        function settled(bytes32) external view returns (bool);
        /// Deposits into a renter's account.
        function deposit(bytes32 renter, uint256 amount) external;
        /// Pays a settlement the settlement key signed.
        function settle(Settlement calldata s, bytes calldata signature) external;
        /// Withdraws with a voucher the settlement key signed.
        function withdraw(Withdrawal calldata w, bytes calldata signature) external;
        /// Withdraws everything once the settlement key is silent long enough.
        function withdrawAbandoned(bytes32 renter) external;
        /// The settlement key says it is alive.
        function heartbeat() external;
        /// A renter's account.
        function accountOf(bytes32 renter) external view returns (address owner, uint256 balance, uint64 withdrawals);
        /// The EIP-712 digest of a settlement.
        function settlementDigest(Settlement calldata s) external view returns (bytes32);
        /// The EIP-712 digest of a withdrawal voucher.
        function withdrawalDigest(Withdrawal calldata w) external view returns (bytes32);
        /// EIP-5267: the EIP-712 domain.
        function eip712Domain() external view returns (bytes1 fields, string memory name, string memory version, uint256 chainId, address verifyingContract, bytes32 salt, uint256[] memory extensions);
    }
}

alloy::sol! {
    /// The ERC-20 calls a depositor makes (and the test stablecoin's `mint`,
    /// `contracts/TestUsd.sol`).
    #[sol(rpc)]
    interface IStablecoin {
        /// ERC-20.
        function approve(address spender, uint256 amount) external returns (bool);
        /// ERC-20.
        function balanceOf(address owner) external view returns (uint256);
        /// ERC-20.
        function decimals() external view returns (uint8);
        /// `TestUsd` only: mints to anyone.
        function mint(address to, uint256 amount) external;
    }
}
