//! Anchors pog's transparency-log checkpoints on an EVM chain (issue 14, `docs/ledger.md`,
//! "Chain anchoring").
//!
//! The `CheckpointRegistry` contract (`contracts/CheckpointRegistry.sol`) keeps, per log origin,
//! the history of anchored checkpoints (tree size, root, block time); an origin is registered
//! once and bound to the address that registered it, the only one that may anchor it, and
//! every anchor must be of a larger tree than the last. This crate talks to it over JSON-RPC
//! with alloy:
//!
//! - [`RpcUrl`]: an EVM node's JSON-RPC URL (http or https only).
//! - [`PublisherKey`]: the publisher's secp256k1 key, read from a key file (64 hex digits,
//!   readable by its owner only) and never from a command-line value, where it would be seen
//!   by every user of the machine in the process list and kept in shell histories.
//! - [`deploy`]: deploys the registry from the bytecode `scripts/evm-tools.sh` compiles.
//! - [`Registry`]: registers an origin, anchors a checkpoint (returning the transaction hash
//!   and the gas it used), reads the anchor at a size and the latest anchor of an origin.
//! - [`check_anchor`]: compares a checkpoint with what the chain anchors at its size (what
//!   `pog verify --chain` reports).
//! - [`service`]: the validator's anchoring task ([`service::AnchorSchedule`]) and the
//!   checkpoints it reads and keeps beside the ledger.
//! - [`scores`]: the GPUs' `gpu-state` records proven to `contracts/GpuScores.sol` from an
//!   anchored checkpoint, and one ERC-721 token per GPU (`contracts/GpuToken.sol`).
//!
//! The contract's interface is declared inline ([`contract`]), so building pog needs neither
//! npm nor solc; a test checks it against the ABI solc produces.

#![warn(missing_docs)]

pub mod contract;
pub mod escrow;
pub mod scores;
pub mod service;
#[cfg(feature = "testing")]
pub mod testing;

use alloy::network::{EthereumWallet, TransactionBuilder};
use alloy::primitives::{Address, Bytes, FixedBytes, B256, U256};
use alloy::providers::{DynProvider, Provider, ProviderBuilder};
use alloy::rpc::client::RpcClient;
use alloy::rpc::types::{TransactionReceipt, TransactionRequest};
use alloy::signers::local::PrivateKeySigner;
use contract::ICheckpointRegistry::{self, ICheckpointRegistryErrors, ICheckpointRegistryInstance};
use pog_ledger::bundle::Problem;
use pog_ledger::checkpoint::Checkpoint;
use serde::Serialize;
use std::fmt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

/// How long one JSON-RPC request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a sent transaction may take to be mined before the attempt is given up (the
/// transaction may still be mined later; the next attempt reads the chain first).
pub const RECEIPT_TIMEOUT: Duration = Duration::from_secs(180);
/// The longest origin the contract accepts, in bytes (its `MAX_ORIGIN_BYTES`).
pub const MAX_ORIGIN_BYTES: usize = 256;

/// Why an anchoring operation failed. Each names what was wrong and where.
#[derive(Debug, thiserror::Error)]
pub enum AnchorError {
    /// The RPC URL is not an http(s) URL.
    #[error("the RPC URL {url:?} is unusable: {reason}")]
    RpcUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The key file could not be read or holds no secp256k1 key.
    #[error("the publisher key file {path}: {reason}")]
    KeyFile {
        /// The file.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The key file can be read by other users.
    #[error("the publisher key file {path} is readable by others (mode {mode:o}): chmod 600 it")]
    KeyExposed {
        /// The file.
        path: String,
        /// Its permission bits.
        mode: u32,
    },
    /// The contract address is not 20 bytes of hex.
    #[error("{text:?} is not a contract address (0x and 40 hex digits)")]
    Address {
        /// The address as given.
        text: String,
    },
    /// The bytecode file could not be read or is not hex.
    #[error("the contract bytecode {path}: {reason} (scripts/evm-tools.sh compiles it to target/contracts/CheckpointRegistry.bin)")]
    Bytecode {
        /// The file.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The origin is empty or longer than the contract accepts.
    #[error("the log origin {origin:?} cannot be registered: {len} bytes, the registry takes 1 to {MAX_ORIGIN_BYTES}")]
    Origin {
        /// The origin.
        origin: String,
        /// Its length in bytes.
        len: usize,
    },
    /// The chain did not answer, or answered with an error that is no refusal of the contract.
    #[error("{what}: the chain at {rpc} failed: {reason}")]
    Rpc {
        /// The operation.
        what: String,
        /// The RPC URL.
        rpc: String,
        /// The transport's or node's error.
        reason: String,
    },
    /// The HTTP client for the chain's RPC could not be built (its TLS backend or the system's
    /// settings).
    #[error("building the HTTP client: the chain at {rpc} failed: {cause}")]
    HttpClient {
        /// The RPC URL.
        rpc: String,
        /// The client builder's error.
        #[source]
        cause: reqwest013::Error,
    },
    /// There is no contract at the address.
    #[error("no contract at {address} on the chain at {rpc}: check --contract and that the RPC is the chain it was deployed on")]
    NoContract {
        /// The address.
        address: String,
        /// The RPC URL.
        rpc: String,
    },
    /// The registry refused the call (one of the contract's errors).
    #[error("{what}: the contract at {address} refused: {refusal}")]
    Refused {
        /// The operation.
        what: String,
        /// The registry's address.
        address: String,
        /// The contract's reason.
        refusal: Box<Refusal>,
    },
    /// The transaction was mined but reverted.
    #[error("{what}: transaction {tx} reverted on chain (gas used {gas_used})")]
    Reverted {
        /// The operation.
        what: String,
        /// The transaction hash.
        tx: String,
        /// The gas it used.
        gas_used: u64,
    },
    /// The origin belongs to another publisher on this registry.
    #[error("the log {origin} is registered on {address} to publisher {publisher}, not to this key's address {ours}: only {publisher} may anchor it there; deploy another registry (`pog ledger deploy-registry`) or use the right key")]
    RegisteredToOther {
        /// The origin.
        origin: String,
        /// The registry's address.
        address: String,
        /// Its registered publisher.
        publisher: String,
        /// The address of the key in use.
        ours: String,
    },
    /// The chain holds an anchor that contradicts the checkpoint being anchored.
    #[error("{0}")]
    Conflict(Box<Conflict>),
    /// A deployment's receipt names no contract address.
    #[error("the deployment {tx} created no contract")]
    NotDeployed {
        /// The transaction hash.
        tx: String,
    },
    /// A `gpu-state` record that cannot be proven on chain, or a state a contract returned
    /// that is no valid state.
    #[error("the state of {gpu_uuid} (log entry {leaf_index}): {reason}")]
    BadState {
        /// The GPU.
        gpu_uuid: String,
        /// The entry's log index.
        leaf_index: u64,
        /// What is wrong.
        reason: String,
    },
    /// The ledger could not be read.
    #[error("reading the ledger: {0}")]
    Ledger(String),
    /// A message could not be signed with the settlement key.
    #[error("signing with the settlement key: {0}")]
    Signing(String),
    /// A token id that is not a number.
    #[error("{text:?} is not a token id (decimal, or 0x and hex)")]
    TokenId {
        /// The text given.
        text: String,
    },
    /// An operation that needs the publisher key was asked of a read-only registry.
    #[error("{what} needs a publisher key (--key-file)")]
    ReadOnly {
        /// The operation.
        what: String,
    },
}

/// An anchor on chain that a checkpoint being anchored contradicts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the registry at {address} anchors {origin} at size {anchored_size} with root {anchored_root}, which the checkpoint of size {size} (root {root}) cannot follow: {why}")]
pub struct Conflict {
    /// The registry's address.
    pub address: String,
    /// The origin.
    pub origin: String,
    /// The latest anchored size.
    pub anchored_size: u64,
    /// Its root, hex.
    pub anchored_root: String,
    /// The checkpoint's size.
    pub size: u64,
    /// The checkpoint's root, hex.
    pub root: String,
    /// Why they cannot both be right.
    pub why: &'static str,
}

/// The registry's refusal: one of the contract's errors, decoded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "refusal", rename_all = "snake_case")]
pub enum Refusal {
    /// The origin is empty or too long.
    BadOrigin {
        /// Its length in bytes.
        length: String,
    },
    /// The origin is registered already.
    AlreadyRegistered {
        /// The origin.
        origin: String,
        /// Its publisher.
        publisher: String,
    },
    /// The origin has not been registered.
    NotRegistered {
        /// The origin.
        origin: String,
    },
    /// The sender is not the origin's publisher.
    NotPublisher {
        /// The origin.
        origin: String,
        /// Its publisher.
        publisher: String,
        /// Who sent the transaction.
        sender: String,
    },
    /// The tree size does not grow.
    SizeNotGrowing {
        /// The origin.
        origin: String,
        /// The latest anchored size.
        latest_size: u64,
        /// The size refused.
        size: u64,
    },
    /// This exact checkpoint is the latest anchor already.
    AlreadyAnchored {
        /// The origin.
        origin: String,
        /// The size.
        size: u64,
        /// The root, hex.
        root: String,
    },
    /// There is no anchor (or era) at that position.
    NoSuchAnchor {
        /// The origin.
        origin: String,
        /// The era asked for.
        era: String,
        /// The position asked for.
        index: String,
    },
    /// The sender is not the origin's owner.
    NotOwner {
        /// The origin.
        origin: String,
        /// Its owner.
        owner: String,
        /// Who sent the transaction.
        sender: String,
    },
    /// A rotation voiding from size 0, or naming the zero address.
    BadRotation {
        /// The origin.
        origin: String,
    },
    /// `GpuScores`: the registry holds no anchor of the origin at that size.
    NoAnchor {
        /// The origin.
        origin: String,
        /// The tree size.
        size: u64,
    },
    /// `GpuScores`: the UUID is empty or too long.
    BadUuid {
        /// Its length in bytes.
        length: String,
    },
    /// `GpuScores`: the signature is not 64 bytes.
    BadSignature {
        /// Its length in bytes.
        length: String,
    },
    /// `GpuScores`: the entry rebuilt from the fields is not that leaf of the anchored tree.
    NotInLog {
        /// The GPU.
        gpu_uuid: String,
        /// The leaf index claimed.
        leaf_index: u64,
        /// The anchored tree's size.
        size: u64,
    },
    /// `GpuScores`: the entry is not newer than the GPU's kept state.
    NotNewer {
        /// The GPU.
        gpu_uuid: String,
        /// The leaf index submitted.
        leaf_index: u64,
        /// The leaf index of the state kept.
        kept_index: u64,
    },
    /// `GpuScores`: nothing was submitted.
    EmptyBatch,
    /// `GpuToken`: the scores contract holds no state of the GPU.
    UnknownGpu {
        /// The GPU.
        gpu_uuid: String,
    },
    /// `GpuToken`: the GPU's owner named no address for its token.
    NoOwnerNamed {
        /// The GPU.
        gpu_uuid: String,
    },
    /// `GpuToken`: the GPU's latest proven state does not prove its model.
    ModelNotProven {
        /// The GPU.
        gpu_uuid: String,
    },
    /// `GpuToken`: the token was minted already (OpenZeppelin's `ERC721InvalidSender(0)`).
    TokenExists,
    /// `GpuToken`: no such token (OpenZeppelin's `ERC721NonexistentToken`).
    NoSuchToken {
        /// The token id, decimal.
        token_id: String,
    },
    /// `GpuEscrow`: a refusal, named as the contract names it (`AlreadySettled`,
    /// `BadSignature`, `InsufficientBalance`, `WrongNonce`, `Expired`, `NotAccountOwner`,
    /// `NotAbandoned`, `NotSettler`, `ZeroAmount`, or OpenZeppelin's ECDSA and SafeERC20 errors).
    Escrow {
        /// The error and its fields, as decoded.
        error: String,
    },
    /// `GpuToken`: another ERC-721 refusal of OpenZeppelin's (ERC-6093), named.
    Erc721 {
        /// The error, as decoded.
        error: String,
    },
    /// A revert the interface does not know (hex of its data; empty for a bare revert).
    Other {
        /// The revert data, hex.
        data: String,
    },
}

impl Refusal {
    /// The refusal that revert data encodes.
    pub fn decode(data: &[u8]) -> Refusal {
        use alloy::sol_types::SolInterface;
        use ICheckpointRegistryErrors as E;
        match E::abi_decode(data) {
            Ok(E::BadOrigin(e)) => Refusal::BadOrigin {
                length: e.length.to_string(),
            },
            Ok(E::AlreadyRegistered(e)) => Refusal::AlreadyRegistered {
                origin: e.origin,
                publisher: e.publisher.to_string(),
            },
            Ok(E::NotRegistered(e)) => Refusal::NotRegistered { origin: e.origin },
            Ok(E::NotPublisher(e)) => Refusal::NotPublisher {
                origin: e.origin,
                publisher: e.publisher.to_string(),
                sender: e.sender.to_string(),
            },
            Ok(E::SizeNotGrowing(e)) => Refusal::SizeNotGrowing {
                origin: e.origin,
                latest_size: e.latestSize,
                size: e.size,
            },
            Ok(E::AlreadyAnchored(e)) => Refusal::AlreadyAnchored {
                origin: e.origin,
                size: e.size,
                root: hex::encode(e.root),
            },
            Ok(E::NoSuchAnchor(e)) => Refusal::NoSuchAnchor {
                origin: e.origin,
                era: e.era.to_string(),
                index: e.index.to_string(),
            },
            Ok(E::NotOwner(e)) => Refusal::NotOwner {
                origin: e.origin,
                owner: e.owner.to_string(),
                sender: e.sender.to_string(),
            },
            Ok(E::BadRotation(e)) => Refusal::BadRotation { origin: e.origin },
            Err(_) => Refusal::decode_scores(data),
        }
    }

    fn decode_scores(data: &[u8]) -> Refusal {
        use alloy::sol_types::SolInterface;
        use contract::IGpuScores::IGpuScoresErrors as E;
        match E::abi_decode(data) {
            Ok(E::NoAnchor(e)) => Refusal::NoAnchor {
                origin: e.origin,
                size: e.size,
            },
            Ok(E::BadUuid(e)) => Refusal::BadUuid {
                length: e.length.to_string(),
            },
            Ok(E::BadSignature(e)) => Refusal::BadSignature {
                length: e.length.to_string(),
            },
            Ok(E::NotInLog(e)) => Refusal::NotInLog {
                gpu_uuid: e.gpuUuid,
                leaf_index: e.leafIndex,
                size: e.size,
            },
            Ok(E::NotNewer(e)) => Refusal::NotNewer {
                gpu_uuid: e.gpuUuid,
                leaf_index: e.leafIndex,
                kept_index: e.keptIndex,
            },
            Ok(E::EmptyBatch(_)) => Refusal::EmptyBatch,
            Ok(E::StringsInsufficientHexLength(e)) => Refusal::Erc721 {
                error: format!("{e:?}"),
            },
            Err(_) => Refusal::decode_token(data),
        }
    }

    fn decode_token(data: &[u8]) -> Refusal {
        use alloy::sol_types::SolInterface;
        use contract::IGpuToken::IGpuTokenErrors as E;
        match E::abi_decode(data) {
            Ok(E::UnknownGpu(e)) => Refusal::UnknownGpu {
                gpu_uuid: e.gpuUuid,
            },
            Ok(E::NoOwnerNamed(e)) => Refusal::NoOwnerNamed {
                gpu_uuid: e.gpuUuid,
            },
            Ok(E::ModelNotProven(e)) => Refusal::ModelNotProven {
                gpu_uuid: e.gpuUuid,
            },
            Ok(E::ERC721InvalidSender(_)) => Refusal::TokenExists,
            Ok(E::ERC721NonexistentToken(e)) => Refusal::NoSuchToken {
                token_id: e.tokenId.to_string(),
            },
            Ok(other) => Refusal::Erc721 {
                error: format!("{other:?}"),
            },
            Err(_) => Refusal::decode_escrow(data),
        }
    }

    fn decode_escrow(data: &[u8]) -> Refusal {
        use alloy::sol_types::SolInterface;
        use contract::IGpuEscrow::IGpuEscrowErrors as E;
        match E::abi_decode(data) {
            Ok(e) => Refusal::Escrow {
                error: format!("{e:?}"),
            },
            Err(_) => Refusal::Other {
                data: hex::encode(data),
            },
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::BadOrigin { length } => {
                write!(
                    f,
                    "the origin's length {length} is not 1 to {MAX_ORIGIN_BYTES} bytes"
                )
            }
            Refusal::AlreadyRegistered { origin, publisher } => {
                write!(f, "{origin} is registered already, to {publisher}")
            }
            Refusal::NotRegistered { origin } => write!(f, "{origin} is not registered"),
            Refusal::NotPublisher {
                origin,
                publisher,
                sender,
            } => write!(
                f,
                "only {origin}'s publisher {publisher} may anchor it, not {sender}"
            ),
            Refusal::SizeNotGrowing {
                origin,
                latest_size,
                size,
            } => write!(
                f,
                "{origin} is anchored at size {latest_size} already; size {size} does not grow it"
            ),
            Refusal::AlreadyAnchored { origin, size, root } => {
                write!(
                    f,
                    "{origin} at size {size} with root {root} is the latest anchor already"
                )
            }
            Refusal::NoSuchAnchor { origin, era, index } => {
                write!(f, "{origin} has no anchor number {index} in era {era}")
            }
            Refusal::NotOwner {
                origin,
                owner,
                sender,
            } => write!(
                f,
                "only {origin}'s owner {owner} may rotate its publisher or hand it on, not {sender}"
            ),
            Refusal::BadRotation { origin } => write!(
                f,
                "a rotation of {origin} must void from a size above 0 and name no zero address"
            ),
            Refusal::NoAnchor { origin, size } => {
                write!(f, "the registry holds no anchor of {origin} at size {size}")
            }
            Refusal::BadUuid { length } => {
                write!(f, "a GPU UUID of {length} bytes (1 to 128 are allowed)")
            }
            Refusal::BadSignature { length } => {
                write!(f, "a signature of {length} bytes (64 expected)")
            }
            Refusal::NotInLog {
                gpu_uuid,
                leaf_index,
                size,
            } => write!(
                f,
                "the gpu-state record of {gpu_uuid} is not entry {leaf_index} of the anchored tree of {size} entries"
            ),
            Refusal::NotNewer {
                gpu_uuid,
                leaf_index,
                kept_index,
            } => write!(
                f,
                "the state of {gpu_uuid} from entry {leaf_index} is not newer than the one kept (entry {kept_index})"
            ),
            Refusal::EmptyBatch => write!(f, "no state was submitted"),
            Refusal::UnknownGpu { gpu_uuid } => {
                write!(f, "the scores contract holds no proven state of {gpu_uuid}")
            }
            Refusal::NoOwnerNamed { gpu_uuid } => write!(
                f,
                "{gpu_uuid}'s owner named no address for its token (pog agent --token-owner)"
            ),
            Refusal::ModelNotProven { gpu_uuid } => write!(
                f,
                "{gpu_uuid}'s latest proven state does not prove its model"
            ),
            Refusal::TokenExists => write!(f, "the GPU's token exists already"),
            Refusal::NoSuchToken { token_id } => write!(f, "no token {token_id}"),
            Refusal::Erc721 { error } | Refusal::Escrow { error } => write!(f, "{error}"),
            Refusal::Other { data } if data.is_empty() => write!(f, "reverted without a reason"),
            Refusal::Other { data } => write!(f, "reverted with unknown data 0x{data}"),
        }
    }
}

/// An EVM node's JSON-RPC URL: http or https, with a host. Anything else (ws, ipc, file, a
/// bare path) is refused before anything is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcUrl(url::Url);

impl RpcUrl {
    /// Parses and checks `text`.
    pub fn parse(text: &str) -> Result<RpcUrl, AnchorError> {
        let bad = |reason: &str| AnchorError::RpcUrl {
            url: text.to_string(),
            reason: reason.to_string(),
        };
        let url = url::Url::parse(text).map_err(|e| {
            bad(&format!(
                "{e} (an RPC URL looks like http://127.0.0.1:8545 or https://HOST/PATH)"
            ))
        })?;
        match url.scheme() {
            "http" | "https" => {}
            other => {
                return Err(bad(&format!(
                    "the scheme {other:?} is not http or https (JSON-RPC over HTTP only)"
                )))
            }
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(bad("it names no host"));
        }
        Ok(RpcUrl(url))
    }

    /// The URL.
    pub fn url(&self) -> &url::Url {
        &self.0
    }
}

impl fmt::Display for RpcUrl {
    /// The URL without any user name or password it carries (RPC providers often put an API
    /// key in the path, which is kept: operators need to tell their endpoints apart).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut shown = self.0.clone();
        let _ = shown.set_username("");
        let _ = shown.set_password(None);
        write!(f, "{shown}")
    }
}

/// The publisher's secp256k1 key (its Ethereum account pays for and signs the anchors).
#[derive(Clone)]
pub struct PublisherKey {
    signer: PrivateKeySigner,
}

impl fmt::Debug for PublisherKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublisherKey({})", self.address())
    }
}

impl PublisherKey {
    /// Reads the key from `path`: 64 hex digits (an optional `0x` and surrounding whitespace
    /// allowed). The file must not be readable by group or others (`chmod 600`).
    pub fn from_file(path: &Path) -> Result<PublisherKey, AnchorError> {
        let name = path.display().to_string();
        let bad = |reason: String| AnchorError::KeyFile {
            path: name.clone(),
            reason,
        };
        let meta = std::fs::metadata(path).map_err(|e| bad(e.to_string()))?;
        let mode = meta.permissions().mode();
        if mode & 0o077 != 0 {
            return Err(AnchorError::KeyExposed {
                path: name.clone(),
                mode: mode & 0o777,
            });
        }
        if meta.len() > 1024 {
            return Err(bad(format!(
                "{} bytes is too long for a key (64 hex digits)",
                meta.len()
            )));
        }
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        let digits = text.trim();
        let digits = digits.strip_prefix("0x").unwrap_or(digits);
        let bytes: [u8; 32] = hex::decode(digits)
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or_else(
                || bad("it does not hold a secp256k1 private key (64 hex digits)".into()),
            )?;
        let signer = PrivateKeySigner::from_bytes(&B256::from(bytes))
            .map_err(|e| bad(format!("not a valid secp256k1 private key: {e}")))?;
        Ok(PublisherKey { signer })
    }

    /// The key's Ethereum address.
    pub fn address(&self) -> Address {
        self.signer.address()
    }
}

/// Parses a contract address (`0x` and 40 hex digits; any case).
pub fn parse_address(text: &str) -> Result<Address, AnchorError> {
    let t = text.trim();
    let digits = t.strip_prefix("0x").unwrap_or(t);
    let bytes: [u8; 20] = hex::decode(digits)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| AnchorError::Address {
            text: text.to_string(),
        })?;
    Ok(Address::from(bytes))
}

/// Reads the contract's creation bytecode from a file of hex (solc's `.bin`, as
/// `scripts/evm-tools.sh` writes it to `target/contracts/CheckpointRegistry.bin`).
pub fn read_bytecode(path: &Path) -> Result<Vec<u8>, AnchorError> {
    let bad = |reason: String| AnchorError::Bytecode {
        path: path.display().to_string(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let digits = text.trim();
    let digits = digits.strip_prefix("0x").unwrap_or(digits);
    let code = hex::decode(digits).map_err(|e| bad(format!("not hex: {e}")))?;
    if code.is_empty() {
        return Err(bad("it is empty".into()));
    }
    Ok(code)
}

/// One anchored checkpoint as the registry keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Anchor {
    /// The tree size.
    pub size: u64,
    /// The tree's root.
    #[serde(serialize_with = "hex_root")]
    pub root: [u8; 32],
    /// The block time it was anchored at (Unix seconds).
    pub time: u64,
}

fn hex_root<S: serde::Serializer>(root: &[u8; 32], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&hex::encode(root))
}

/// A transaction that was mined and succeeded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Sent {
    /// The transaction hash, 0x-hex.
    pub tx: String,
    /// The gas it used.
    pub gas_used: u64,
    /// The price paid per gas, wei.
    pub gas_price_wei: u128,
    /// The block it was mined in.
    pub block: Option<u64>,
}

impl Sent {
    fn from_receipt(what: &str, r: &TransactionReceipt) -> Result<Sent, AnchorError> {
        if !r.status() {
            return Err(AnchorError::Reverted {
                what: what.to_string(),
                tx: r.transaction_hash.to_string(),
                gas_used: r.gas_used,
            });
        }
        Ok(Sent {
            tx: r.transaction_hash.to_string(),
            gas_used: r.gas_used,
            gas_price_wei: r.effective_gas_price,
            block: r.block_number,
        })
    }
}

/// A deployed registry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Deployed {
    /// The contract's address, 0x-hex (checksummed).
    pub address: String,
    /// The deployment transaction.
    pub sent: Sent,
}

/// The HTTP client alloy's transport uses: rustls with ring (installed as the process's
/// default rustls provider if there is none yet), 30 s a request, no redirects, no proxy.
fn http_client() -> Result<reqwest013::Client, reqwest013::Error> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest013::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .connect_timeout(Duration::from_secs(10))
        .redirect(reqwest013::redirect::Policy::none())
        .no_proxy()
        .build()
}

/// A provider for `rpc`, signing with `key` when given. Nonces are read from the node for
/// every transaction (no cache that a failed send could leave off by one), gas is estimated,
/// the chain id fetched.
fn provider(rpc: &RpcUrl, key: Option<&PublisherKey>) -> Result<DynProvider, AnchorError> {
    let client = http_client().map_err(|cause| AnchorError::HttpClient {
        rpc: rpc.to_string(),
        cause,
    })?;
    let transport = alloy::transports::http::Http::with_client(client, rpc.url().clone());
    let local = transport.guess_local();
    let client = RpcClient::new(transport, local);
    let builder = ProviderBuilder::new()
        .disable_recommended_fillers()
        .with_gas_estimation()
        .with_simple_nonce_management()
        .fetch_chain_id();
    Ok(match key {
        Some(k) => builder
            .wallet(EthereumWallet::from(k.signer.clone()))
            .connect_client(client)
            .erased(),
        None => builder.connect_client(client).erased(),
    })
}

/// What a contract call error means: the registry's refusal when it carries revert data the
/// interface decodes (or any revert data), else a failure of the chain.
fn call_error(
    what: &str,
    rpc: &RpcUrl,
    address: Address,
    e: alloy::contract::Error,
) -> AnchorError {
    // A call to an address without code "succeeds" with empty output, which fails to decode:
    // say so plainly.
    if matches!(e, alloy::contract::Error::ZeroData(..)) {
        return AnchorError::NoContract {
            address: address.to_string(),
            rpc: rpc.to_string(),
        };
    }
    match e.as_revert_data() {
        Some(data) => AnchorError::Refused {
            what: what.to_string(),
            address: address.to_string(),
            refusal: Box::new(Refusal::decode(&data)),
        },
        None => AnchorError::Rpc {
            what: what.to_string(),
            rpc: rpc.to_string(),
            reason: e.to_string(),
        },
    }
}

fn rpc_error(what: &str, rpc: &RpcUrl, e: impl fmt::Display) -> AnchorError {
    AnchorError::Rpc {
        what: what.to_string(),
        rpc: rpc.to_string(),
        reason: e.to_string(),
    }
}

/// Deploys the registry from `bytecode` (creation code, as solc compiled it), paid for and
/// sent by `key`; waits for the receipt.
pub async fn deploy(
    rpc: &RpcUrl,
    key: &PublisherKey,
    bytecode: &[u8],
) -> Result<Deployed, AnchorError> {
    deploy_code("deploying the registry", rpc, key, bytecode.to_vec()).await
}

/// Sends `code` (creation code, constructor arguments appended) as a contract creation, paid
/// for and sent by `key`; waits for the receipt and returns the new contract's address.
async fn deploy_code(
    what: &str,
    rpc: &RpcUrl,
    key: &PublisherKey,
    code: Vec<u8>,
) -> Result<Deployed, AnchorError> {
    let provider = provider(rpc, Some(key))?;
    let tx = TransactionRequest::default()
        .with_from(key.address())
        .with_deploy_code(Bytes::from(code));
    let pending = provider.send_transaction(tx).await.map_err(|e| {
        match e.as_error_resp().and_then(|r| r.as_revert_data()) {
            Some(data) => AnchorError::Refused {
                what: what.into(),
                address: "(none yet)".into(),
                refusal: Box::new(Refusal::decode(&data)),
            },
            None => rpc_error(what, rpc, e),
        }
    })?;
    let receipt = pending
        .with_timeout(Some(RECEIPT_TIMEOUT))
        .get_receipt()
        .await
        .map_err(|e| rpc_error(what, rpc, e))?;
    let sent = Sent::from_receipt(what, &receipt)?;
    let address = receipt
        .contract_address
        .ok_or_else(|| AnchorError::NotDeployed {
            tx: sent.tx.clone(),
        })?;
    Ok(Deployed {
        address: address.to_checksum(None),
        sent,
    })
}

/// What [`Registry::anchor_checkpoint`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Anchored {
    /// The origin.
    pub origin: String,
    /// The checkpoint's size.
    pub size: u64,
    /// The checkpoint's root, hex.
    pub root: String,
    /// The registration transaction, when the origin had to be registered first.
    pub registered: Option<Sent>,
    /// The anchoring transaction; None when the chain held this checkpoint already.
    pub anchored: Option<Sent>,
}

/// A `CheckpointRegistry` at an address on one chain, read-only or with a publisher key.
#[derive(Debug, Clone)]
pub struct Registry {
    rpc: RpcUrl,
    address: Address,
    publisher: Option<Address>,
    contract: ICheckpointRegistryInstance<DynProvider>,
}

fn check_origin(origin: &str) -> Result<(), AnchorError> {
    if origin.is_empty() || origin.len() > MAX_ORIGIN_BYTES {
        return Err(AnchorError::Origin {
            origin: origin.to_string(),
            len: origin.len(),
        });
    }
    Ok(())
}

impl Registry {
    /// The registry at `address`, to read from.
    pub fn reader(rpc: &RpcUrl, address: Address) -> Result<Registry, AnchorError> {
        Ok(Registry {
            rpc: rpc.clone(),
            address,
            publisher: None,
            contract: ICheckpointRegistry::new(address, provider(rpc, None)?),
        })
    }

    /// The registry at `address`, to register and anchor with `key` (and read).
    pub fn publisher(
        rpc: &RpcUrl,
        address: Address,
        key: &PublisherKey,
    ) -> Result<Registry, AnchorError> {
        Ok(Registry {
            rpc: rpc.clone(),
            address,
            publisher: Some(key.address()),
            contract: ICheckpointRegistry::new(address, provider(rpc, Some(key))?),
        })
    }

    /// The registry's address.
    pub fn address(&self) -> Address {
        self.address
    }

    /// The RPC URL.
    pub fn rpc(&self) -> &RpcUrl {
        &self.rpc
    }

    /// Fails with [`AnchorError::NoContract`] unless there is code at the address.
    pub async fn check_deployed(&self) -> Result<(), AnchorError> {
        let code = self
            .contract
            .provider()
            .get_code_at(self.address)
            .await
            .map_err(|e| rpc_error("reading the registry's code", &self.rpc, e))?;
        if code.is_empty() {
            return Err(AnchorError::NoContract {
                address: self.address.to_string(),
                rpc: self.rpc.to_string(),
            });
        }
        Ok(())
    }

    /// The publisher `origin` is registered to; None when it is not registered.
    pub async fn publisher_of(&self, origin: &str) -> Result<Option<Address>, AnchorError> {
        check_origin(origin)?;
        let p = self
            .contract
            .publisherOf(origin.to_string())
            .call()
            .await
            .map_err(|e| self.call_error("reading the origin's publisher", e))?;
        Ok((p != Address::ZERO).then_some(p))
    }

    /// The latest anchor of `origin`; None when it has none.
    pub async fn latest(&self, origin: &str) -> Result<Option<Anchor>, AnchorError> {
        check_origin(origin)?;
        let r = self
            .contract
            .latest(origin.to_string())
            .call()
            .await
            .map_err(|e| self.call_error("reading the latest anchor", e))?;
        Ok((r.size != 0).then_some(Anchor {
            size: r.size,
            root: r.root.0,
            time: r.time,
        }))
    }

    /// The anchor of `origin` at tree size `size`; None when no checkpoint of that size was
    /// anchored.
    pub async fn anchor_at(&self, origin: &str, size: u64) -> Result<Option<Anchor>, AnchorError> {
        check_origin(origin)?;
        let r = self
            .contract
            .anchorAt(origin.to_string(), size)
            .call()
            .await
            .map_err(|e| self.call_error("reading the anchor", e))?;
        Ok(r.found.then_some(Anchor {
            size,
            root: r.root.0,
            time: r.time,
        }))
    }

    /// The newest valid anchor of `origin` of at most `size` entries; None when every anchor
    /// is larger (or there is none). One read: the contract searches its eras.
    pub async fn newest_at_most(
        &self,
        origin: &str,
        size: u64,
    ) -> Result<Option<Anchor>, AnchorError> {
        check_origin(origin)?;
        let r = self
            .contract
            .newestAtMost(origin.to_string(), size)
            .call()
            .await
            .map_err(|e| self.call_error("reading an anchor", e))?;
        Ok(r.found.then_some(Anchor {
            size: r.anchoredSize,
            root: r.root.0,
            time: r.time,
        }))
    }

    /// The owner of `origin` (who may rotate its publisher); None when it is not registered.
    pub async fn owner_of(&self, origin: &str) -> Result<Option<Address>, AnchorError> {
        check_origin(origin)?;
        let o = self
            .contract
            .ownerOf(origin.to_string())
            .call()
            .await
            .map_err(|e| self.call_error("reading the origin's owner", e))?;
        Ok((o != Address::ZERO).then_some(o))
    }

    /// Every anchor of `origin`, era by era, with whether each is valid (not voided by a
    /// rotation): (era, anchor, valid). For monitors and tests; one read per anchor.
    pub async fn history(&self, origin: &str) -> Result<Vec<(u64, Anchor, bool)>, AnchorError> {
        check_origin(origin)?;
        let reading = |e| self.call_error("reading the anchors' history", e);
        let eras: U256 = self
            .contract
            .eraCount(origin.to_string())
            .call()
            .await
            .map_err(reading)?;
        let mut out = Vec::new();
        for era in 0..eras.saturating_to::<u64>() {
            let info = self
                .contract
                .eraOf(origin.to_string(), U256::from(era))
                .call()
                .await
                .map_err(reading)?;
            for index in 0..info.anchors.saturating_to::<u64>() {
                let a = self
                    .contract
                    .anchorByIndex(origin.to_string(), U256::from(era), U256::from(index))
                    .call()
                    .await
                    .map_err(reading)?;
                out.push((
                    era,
                    Anchor {
                        size: a.size,
                        root: a.root.0,
                        time: a.time,
                    },
                    a.valid,
                ));
            }
        }
        Ok(out)
    }

    /// As the origin's owner: names `publisher` as its publisher and begins a new era, voiding
    /// the current era's anchors of `void_from` entries or more (a publisher key that anchored
    /// what the log never had, or was stolen).
    pub async fn rotate(
        &self,
        origin: &str,
        publisher: Address,
        void_from: u64,
    ) -> Result<Sent, AnchorError> {
        let what = format!("rotating the publisher of {origin}");
        check_origin(origin)?;
        self.need_key(&what)?;
        let call = self
            .contract
            .rotate(origin.to_string(), publisher, void_from);
        call.call().await.map_err(|e| self.call_error(&what, e))?;
        let pending = call.send().await.map_err(|e| self.call_error(&what, e))?;
        self.mined(&what, pending).await
    }

    /// As the origin's owner: hands its ownership to `owner`.
    pub async fn transfer_ownership(
        &self,
        origin: &str,
        owner: Address,
    ) -> Result<Sent, AnchorError> {
        let what = format!("handing the ownership of {origin} to {owner}");
        check_origin(origin)?;
        self.need_key(&what)?;
        let call = self.contract.transferOwnership(origin.to_string(), owner);
        call.call().await.map_err(|e| self.call_error(&what, e))?;
        let pending = call.send().await.map_err(|e| self.call_error(&what, e))?;
        self.mined(&what, pending).await
    }

    /// Registers `origin` with this registry's key as its publisher.
    pub async fn register(&self, origin: &str) -> Result<Sent, AnchorError> {
        let what = format!("registering {origin}");
        check_origin(origin)?;
        self.need_key(&what)?;
        let call = self.contract.register(origin.to_string());
        // A dry run first: a refusal comes back decoded, and nothing is paid for it.
        call.call().await.map_err(|e| self.call_error(&what, e))?;
        let pending = call.send().await.map_err(|e| self.call_error(&what, e))?;
        self.mined(&what, pending).await
    }

    /// Anchors the checkpoint of `origin` of `size` entries with root `root`; the transaction
    /// hash and the gas it used. Refused (decoded) unless this key is the origin's publisher
    /// and the size grows.
    pub async fn anchor(
        &self,
        origin: &str,
        size: u64,
        root: [u8; 32],
    ) -> Result<Sent, AnchorError> {
        let what = format!("anchoring {origin} at size {size}");
        check_origin(origin)?;
        self.need_key(&what)?;
        let call = self
            .contract
            .anchor(origin.to_string(), size, FixedBytes(root));
        call.call().await.map_err(|e| self.call_error(&what, e))?;
        let pending = call.send().await.map_err(|e| self.call_error(&what, e))?;
        self.mined(&what, pending).await
    }

    /// Anchors a signed checkpoint: registers its origin first when no one has, then anchors
    /// it unless the chain holds it already. Fails when the origin belongs to another
    /// publisher, or when the chain's latest anchor contradicts the checkpoint (the same size
    /// with another root, or a larger size: the log went back).
    pub async fn anchor_checkpoint(
        &self,
        checkpoint: &Checkpoint,
    ) -> Result<Anchored, AnchorError> {
        let origin = checkpoint.origin.as_str();
        let ours = self.need_key("anchoring")?;
        let mut done = Anchored {
            origin: origin.to_string(),
            size: checkpoint.size,
            root: hex::encode(checkpoint.root),
            registered: None,
            anchored: None,
        };
        match self.publisher_of(origin).await? {
            None => done.registered = Some(self.register(origin).await?),
            Some(p) if p == ours => {}
            Some(p) => {
                return Err(AnchorError::RegisteredToOther {
                    origin: origin.to_string(),
                    address: self.address.to_string(),
                    publisher: p.to_string(),
                    ours: ours.to_string(),
                })
            }
        }
        if let Some(latest) = self.latest(origin).await? {
            let conflict = |why| {
                AnchorError::Conflict(Box::new(Conflict {
                    address: self.address.to_string(),
                    origin: origin.to_string(),
                    anchored_size: latest.size,
                    anchored_root: hex::encode(latest.root),
                    size: checkpoint.size,
                    root: hex::encode(checkpoint.root),
                    why,
                }))
            };
            if latest.size == checkpoint.size {
                if latest.root == checkpoint.root {
                    return Ok(done);
                }
                return Err(conflict("the same size with another root (a fork)"));
            }
            if latest.size > checkpoint.size {
                return Err(conflict(
                    "the chain holds a larger tree than this log (a rollback, another log signed with this origin, or a publisher key that anchored what the log never had: the origin's owner voids such anchors with `pog ledger rotate-publisher --void-from SIZE`)",
                ));
            }
        }
        done.anchored = Some(
            self.anchor(origin, checkpoint.size, checkpoint.root)
                .await?,
        );
        Ok(done)
    }

    fn need_key(&self, what: &str) -> Result<Address, AnchorError> {
        self.publisher.ok_or_else(|| AnchorError::ReadOnly {
            what: what.to_string(),
        })
    }

    fn call_error(&self, what: &str, e: alloy::contract::Error) -> AnchorError {
        call_error(what, &self.rpc, self.address, e)
    }

    async fn mined(
        &self,
        what: &str,
        pending: alloy::providers::PendingTransactionBuilder<alloy::network::Ethereum>,
    ) -> Result<Sent, AnchorError> {
        mined(what, &self.rpc, pending).await
    }
}

/// Waits (at most [`RECEIPT_TIMEOUT`]) for a sent transaction's receipt; an error when it
/// reverted.
async fn mined(
    what: &str,
    rpc: &RpcUrl,
    pending: alloy::providers::PendingTransactionBuilder<alloy::network::Ethereum>,
) -> Result<Sent, AnchorError> {
    let receipt = pending
        .with_timeout(Some(RECEIPT_TIMEOUT))
        .get_receipt()
        .await
        .map_err(|e| rpc_error(what, rpc, e))?;
    Sent::from_receipt(what, &receipt)
}

/// What `pog verify --chain` found about a checkpoint's anchor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AnchorCheck {
    /// The registry's address.
    pub registry: String,
    /// The checkpoint's origin.
    pub origin: String,
    /// The checkpoint's size.
    pub size: u64,
    /// The origin's registered publisher, if any.
    pub publisher: Option<String>,
    /// The anchor at the checkpoint's size, if any.
    pub anchor: Option<Anchor>,
    /// The origin's latest anchor, if any.
    pub latest: Option<Anchor>,
    /// Where no checkpoint of the bundle's size is anchored: the newest anchor before it, which
    /// the checkpoint's tree was checked to extend (a consistency proof from its size, from the
    /// bundle or the log's tiles).
    pub earlier: Option<Anchor>,
    /// Whether the anchor (or the earlier one) exists and its root is the checkpoint's tree's.
    pub ok: bool,
}

/// Compares `checkpoint` with what the registry at `registry` holds for its origin: the
/// anchor at its size (`at`) must exist and carry its root. The problem names what was wrong.
pub fn check_anchor(
    checkpoint: &Checkpoint,
    registry: &str,
    at: Option<Anchor>,
    latest: Option<Anchor>,
) -> Result<(), Problem> {
    match at {
        None => Err(Problem::AnchorMissing {
            registry: registry.to_string(),
            origin: checkpoint.origin.clone(),
            size: checkpoint.size,
            latest_anchored: latest.map(|a| a.size),
        }),
        Some(a) if a.root != checkpoint.root => Err(Problem::AnchorMismatch {
            registry: registry.to_string(),
            origin: checkpoint.origin.clone(),
            size: checkpoint.size,
            anchored_root: hex::encode(a.root),
            checkpoint_root: hex::encode(checkpoint.root),
        }),
        Some(_) => Ok(()),
    }
}

/// Reads what `registry` holds for `checkpoint`'s origin and checks it ([`check_anchor`]),
/// and, when the holder names the `expected` publisher, that the origin is registered to it:
/// the report, and the problem when the publisher differs or the anchor is missing or
/// differs. An error when the chain cannot be read (no answer, no contract at the address).
pub async fn verify_anchor(
    registry: &Registry,
    checkpoint: &Checkpoint,
    expected: Option<Address>,
) -> Result<(AnchorCheck, Option<Problem>), AnchorError> {
    registry.check_deployed().await?;
    let origin = checkpoint.origin.as_str();
    let publisher = registry.publisher_of(origin).await?;
    let at = registry.anchor_at(origin, checkpoint.size).await?;
    let latest = registry.latest(origin).await?;
    let address = registry.address().to_string();
    let problem = match expected {
        Some(expected) if publisher != Some(expected) => Some(Problem::AnchorPublisher {
            registry: address.clone(),
            origin: origin.to_string(),
            registered: publisher.map(|p| p.to_string()),
            expected: expected.to_string(),
        }),
        _ => check_anchor(checkpoint, &address, at, latest).err(),
    };
    Ok((
        AnchorCheck {
            registry: address,
            origin: origin.to_string(),
            size: checkpoint.size,
            publisher: publisher.map(|p| p.to_string()),
            anchor: at,
            latest,
            earlier: None,
            ok: problem.is_none(),
        },
        problem,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rpc_urls_other_than_http_are_refused() {
        for good in ["http://127.0.0.1:8545", "https://rpc.example.org/v2/KEY"] {
            RpcUrl::parse(good).unwrap();
        }
        for (bad, why) in [
            ("ws://127.0.0.1:8546", "\"ws\" is not http or https"),
            ("file:///tmp/geth.ipc", "\"file\" is not http or https"),
            ("/tmp/geth.ipc", "relative URL"),
            ("127.0.0.1:8545", "looks like http://"),
            ("http://", "empty host"),
        ] {
            let e = RpcUrl::parse(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
        let shown = RpcUrl::parse("https://user:secret@rpc.example.org/x").unwrap();
        assert_eq!(shown.to_string(), "https://rpc.example.org/x");
    }

    #[test]
    fn key_files_are_read_only_when_private_and_well_formed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        let write = |text: &str, mode: u32| {
            std::fs::write(&path, text).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        // anvil's first development account.
        let dev = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80\n";
        write(dev, 0o600);
        let key = PublisherKey::from_file(&path).unwrap();
        assert_eq!(
            key.address().to_checksum(None),
            "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
        );
        assert!(format!("{key:?}").contains("0xf39F"), "no secret in Debug");
        write(dev, 0o644);
        assert!(matches!(
            PublisherKey::from_file(&path),
            Err(AnchorError::KeyExposed { mode: 0o644, .. })
        ));
        for bad in ["", "zz", &"ab".repeat(31), &"00".repeat(32)] {
            write(bad, 0o600);
            let e = PublisherKey::from_file(&path).unwrap_err();
            assert!(matches!(e, AnchorError::KeyFile { .. }), "{bad:?}: {e}");
        }
        let e = PublisherKey::from_file(&dir.path().join("none")).unwrap_err();
        assert!(e.to_string().contains("No such file"), "{e}");
    }

    #[test]
    fn addresses_and_bytecode_parse_or_say_why() {
        let a = parse_address("0x5FbDB2315678afecb367f032d93F642f64180aa3").unwrap();
        assert_eq!(
            a.to_checksum(None),
            "0x5FbDB2315678afecb367f032d93F642f64180aa3"
        );
        for bad in ["", "0x12", "5FbDB2315678afecb367f032d93F642f64180aaZ"] {
            assert!(matches!(
                parse_address(bad),
                Err(AnchorError::Address { .. })
            ));
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.bin");
        std::fs::write(&path, "6080604052\n").unwrap();
        assert_eq!(
            read_bytecode(&path).unwrap(),
            [0x60, 0x80, 0x60, 0x40, 0x52]
        );
        std::fs::write(&path, "not hex").unwrap();
        let e = read_bytecode(&path).unwrap_err().to_string();
        assert!(e.contains("not hex") && e.contains("evm-tools.sh"), "{e}");
        std::fs::write(&path, "\n").unwrap();
        assert!(read_bytecode(&path)
            .unwrap_err()
            .to_string()
            .contains("empty"));
    }

    #[test]
    fn refusals_decode_from_revert_data() {
        use alloy::sol_types::SolError;
        let data = ICheckpointRegistry::SizeNotGrowing {
            origin: "pog.validator/00".into(),
            latestSize: 10,
            size: 9,
        }
        .abi_encode();
        let r = Refusal::decode(&data);
        assert_eq!(
            r,
            Refusal::SizeNotGrowing {
                origin: "pog.validator/00".into(),
                latest_size: 10,
                size: 9
            }
        );
        assert!(r.to_string().contains("size 9 does not grow it"));
        assert_eq!(
            Refusal::decode(&[1, 2, 3]),
            Refusal::Other {
                data: "010203".into()
            }
        );
        assert_eq!(
            Refusal::decode(&[]).to_string(),
            "reverted without a reason"
        );
    }

    #[test]
    fn an_anchor_is_checked_against_the_checkpoint() {
        let cp = Checkpoint {
            origin: "pog.validator/0123".into(),
            size: 12,
            root: [7; 32],
            extensions: vec![],
        };
        let at = |root| Anchor {
            size: 12,
            root,
            time: 1,
        };
        assert_eq!(check_anchor(&cp, "0xR", Some(at([7; 32])), None), Ok(()));
        let missing = check_anchor(
            &cp,
            "0xR",
            None,
            Some(Anchor {
                size: 10,
                ..at([1; 32])
            }),
        )
        .unwrap_err();
        let text = missing.to_string();
        assert!(
            text.contains("anchor missing") && text.contains("latest anchored size is 10"),
            "{text}"
        );
        let text = check_anchor(&cp, "0xR", None, None)
            .unwrap_err()
            .to_string();
        assert!(text.contains("no anchor at all"), "{text}");
        let differs = check_anchor(&cp, "0xR", Some(at([8; 32])), None).unwrap_err();
        assert!(matches!(differs, Problem::AnchorMismatch { .. }));
        assert!(differs.to_string().contains(&hex::encode([8u8; 32])));
    }
}
