//! Proof bundles: one GPU's records with their inclusion proofs and a cosigned checkpoint, in
//! one JSON file that a token holder verifies offline with the validator's (log's) key and
//! the witnesses' keys.
//!
//! ```json
//! {
//!   "format": "pog-ledger-bundle/v1",
//!   "gpu_uuid": "GPU-…",
//!   "checkpoint": "<checkpoint note text, with the log's signature and cosignatures>",
//!   "records": [{ "index": 17, "entry": "<base64 entry>", "proof": ["<base64 hash>", …] }, …],
//!   "consistency": { "from_size": 12, "proof": ["<base64 hash>", …] },
//!   "log": "https://validator.example:7071/ledger/",
//!   "next_after": 17
//! }
//! ```
//!
//! `consistency` is optional: a proof from an earlier tree size the holder kept a checkpoint
//! of (`pog ledger export --since`). `log` is optional too: where the log's tiles are served
//! (`pog ledger export --log-url`), so that `pog verify` reads the GPU's newest records from
//! the log itself and catches a bundle with some left out. It is the exporter's word: the
//! verifier reads it only at public addresses. `next_after` is optional: a bundle that is one
//! page of a GPU's history (`GET /v1/bundles/{uuid}`, [`Bundle::export_page`]) says the GPU
//! has more records after that log index, within the checkpoint. Formats v1 (no `log`) and v2
//! (no `next_after`) are still read. [`verify_bundle`] returns a [`BundleReport`] listing every
//! [`Problem`] it found, each naming what was wrong and where; [`verify_bundle_from`] verifies a
//! page that continues a history verified before ([`ChainState`]).

use crate::checkpoint::{CheckpointError, SignedCheckpoint};
use crate::entry::{Entry, EntryError, NO_PREVIOUS};

use crate::note::Verifier;
use crate::store::{Ledger, StoreError};
use crate::tiles::{TileError, TileSource, TiledTree};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use pog_merkle::{verify_consistency, verify_inclusion, Hash};
use pog_signed::{PublicKey, RecordKind};
use serde::{Deserialize, Serialize};

/// The bundle format's name and version, as written.
pub const BUNDLE_FORMAT: &str = "pog-ledger-bundle/v3";
/// The formats read: v1 is v2 without `log`, v2 is v3 without `next_after`.
const READ_FORMATS: [&str; 3] = [
    "pog-ledger-bundle/v1",
    "pog-ledger-bundle/v2",
    BUNDLE_FORMAT,
];
/// The longest `log` URL a bundle may name.
pub const MAX_LOG_URL_BYTES: usize = 512;
/// The largest bundle accepted.
pub const MAX_BUNDLE_BYTES: usize = 256 << 20;

/// Why a bundle file could not be read at all (what is wrong *inside* a well-formed bundle is
/// a [`Problem`] of its report instead).
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// The file is over the size limit.
    #[error("the bundle is {0} bytes, over the {MAX_BUNDLE_BYTES}-byte limit")]
    TooLarge(usize),
    /// Not JSON of the bundle's shape (the message has the line and column).
    #[error("the bundle is not valid bundle JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// Another format or version of bundle.
    #[error("unsupported bundle format {0:?} (this pog reads pog-ledger-bundle/v1 and v2)")]
    Format(String),
    /// A field that must be base64 is not (or is not a 32-byte hash).
    #[error("{field} is not standard base64{detail}")]
    Base64 {
        /// The field's JSON path, e.g. `records[3].entry`.
        field: String,
        /// What more it had to be (e.g. " of a 32-byte hash"), appended to the message.
        detail: &'static str,
    },
    /// The checkpoint note or text is malformed.
    #[error("the bundle's checkpoint is malformed: {0}")]
    Checkpoint(#[from] CheckpointError),
    /// Exporting: the ledger could not be read.
    #[error("cannot export: {0}")]
    Store(#[from] StoreError),
    /// The `log` URL is longer than [`MAX_LOG_URL_BYTES`].
    #[error("the bundle's log URL is over {MAX_LOG_URL_BYTES} bytes")]
    LogUrl,
    /// A proof longer than any tree needs.
    #[error("the proof has {0} hashes; no tree of 2^64 entries needs more than 128")]
    ProofTooLong(usize),
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRecord {
    index: u64,
    entry: String,
    proof: Vec<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConsistency {
    from_size: u64,
    proof: Vec<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBundle {
    format: String,
    gpu_uuid: String,
    checkpoint: String,
    records: Vec<RawRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    consistency: Option<RawConsistency>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    log: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    next_after: Option<u64>,
}

/// One record of a bundle: its log index, its entry bytes, its inclusion proof.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleRecord {
    /// Log index.
    pub index: u64,
    /// The entry's bytes as logged (parsed during verification, so that a damaged entry is
    /// reported in place).
    pub entry: Vec<u8>,
    /// Inclusion proof in the checkpoint's tree.
    pub proof: Vec<Hash>,
}

/// A parsed bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bundle {
    /// The GPU whose history this is.
    pub gpu_uuid: String,
    /// The checkpoint the proofs lead to (signatures not yet checked).
    pub checkpoint: SignedCheckpoint,
    /// The records, in log order.
    pub records: Vec<BundleRecord>,
    /// A consistency proof from an earlier size to the checkpoint's: (from size, proof).
    pub consistency: Option<(u64, Vec<Hash>)>,
    /// Where the log's tiles are served, as the exporter named it (unchecked: the exporter's
    /// word).
    pub log: Option<String>,
    /// A page of a longer history: the GPU has more records after this log index within the
    /// checkpoint (ask for the page after it).
    pub next_after: Option<u64>,
}

fn decode_hashes(field: &str, list: &[String]) -> Result<Vec<Hash>, BundleError> {
    if list.len() > 128 {
        return Err(BundleError::ProofTooLong(list.len()));
    }
    list.iter()
        .enumerate()
        .map(|(i, h)| {
            B64.decode(h)
                .ok()
                .and_then(|b| b.try_into().ok())
                .ok_or(BundleError::Base64 {
                    field: format!("{field}[{i}]"),
                    detail: " of a 32-byte hash",
                })
        })
        .collect()
}

impl Bundle {
    /// Parses a bundle file; structure only (see [`verify_bundle`]).
    pub fn parse(bytes: &[u8]) -> Result<Bundle, BundleError> {
        if bytes.len() > MAX_BUNDLE_BYTES {
            return Err(BundleError::TooLarge(bytes.len()));
        }
        let raw: RawBundle = serde_json::from_slice(bytes)?;
        if !READ_FORMATS.contains(&raw.format.as_str()) {
            return Err(BundleError::Format(raw.format));
        }
        if raw
            .log
            .as_ref()
            .is_some_and(|l| l.len() > MAX_LOG_URL_BYTES)
        {
            return Err(BundleError::LogUrl);
        }
        let checkpoint = SignedCheckpoint::parse(raw.checkpoint.as_bytes())?;
        let mut records = Vec::with_capacity(raw.records.len());
        for (i, r) in raw.records.iter().enumerate() {
            let entry = B64.decode(&r.entry).map_err(|_| BundleError::Base64 {
                field: format!("records[{i}].entry"),
                detail: "",
            })?;
            records.push(BundleRecord {
                index: r.index,
                entry,
                proof: decode_hashes(&format!("records[{i}].proof"), &r.proof)?,
            });
        }
        let consistency = match raw.consistency {
            Some(c) => Some((c.from_size, decode_hashes("consistency.proof", &c.proof)?)),
            None => None,
        };
        Ok(Bundle {
            gpu_uuid: raw.gpu_uuid,
            checkpoint,
            records,
            consistency,
            log: raw.log,
            next_after: raw.next_after,
        })
    }

    /// The bundle as JSON.
    pub fn to_json(&self) -> String {
        let hashes = |p: &[Hash]| p.iter().map(|h| B64.encode(h)).collect();
        let raw = RawBundle {
            format: BUNDLE_FORMAT.into(),
            gpu_uuid: self.gpu_uuid.clone(),
            checkpoint: self.checkpoint.to_text(),
            records: self
                .records
                .iter()
                .map(|r| RawRecord {
                    index: r.index,
                    entry: B64.encode(&r.entry),
                    proof: hashes(&r.proof),
                })
                .collect(),
            consistency: self.consistency.as_ref().map(|(from, p)| RawConsistency {
                from_size: *from,
                proof: hashes(p),
            }),
            log: self.log.clone(),
            next_after: self.next_after,
        };
        serde_json::to_string_pretty(&raw).expect("plain data serializes")
    }

    /// Exports GPU `uuid`'s records from `ledger`, with proofs against `checkpoint` (a
    /// checkpoint of this ledger, with whatever cosignatures it gathered) and, when `since`
    /// is given, a consistency proof from that earlier size.
    pub fn export(
        ledger: &Ledger,
        uuid: &str,
        checkpoint: &SignedCheckpoint,
        since: Option<u64>,
    ) -> Result<Bundle, BundleError> {
        Bundle::export_page(ledger, uuid, checkpoint, since, None, usize::MAX)
    }

    /// One page of GPU `uuid`'s history, as [`Bundle::export`]: its records after log index
    /// `after` (from its first when `None`), at most `limit`, with `next_after` set when more
    /// follow within the checkpoint.
    pub fn export_page(
        ledger: &Ledger,
        uuid: &str,
        checkpoint: &SignedCheckpoint,
        since: Option<u64>,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Bundle, BundleError> {
        let size = checkpoint.checkpoint.size;
        let log = ledger.log();
        let mut records = Vec::new();
        let (page, more) = ledger.gpu_page(uuid, after, size, limit)?;
        for (index, entry) in page {
            records.push(BundleRecord {
                index,
                entry: entry.encode(),
                proof: log.inclusion_proof(index, size)?,
            });
        }
        let consistency = match since {
            Some(old) => Some((old, log.consistency_proof(old, size)?)),
            None => None,
        };
        let next_after = if more {
            records.last().map(|r| r.index)
        } else {
            None
        };
        Ok(Bundle {
            gpu_uuid: uuid.into(),
            checkpoint: checkpoint.clone(),
            records,
            consistency,
            log: None,
            next_after,
        })
    }
}

/// The witnesses a holder trusts, and how many of them must have cosigned.
#[derive(Debug, Clone, Default)]
pub struct WitnessPolicy {
    /// The witnesses' cosignature keys (type 0x04 vkeys).
    pub keys: Vec<Verifier>,
    /// Cosignatures required from distinct trusted witnesses.
    pub quorum: usize,
}

/// Something wrong with a bundle, named precisely.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(tag = "problem", rename_all = "snake_case")]
pub enum Problem {
    /// The bundle holds no record: it proves nothing about the GPU (a log that left the GPU's
    /// records out would hand out exactly this).
    #[error("the bundle holds no record of the GPU")]
    NoRecords,
    /// The checkpoint is not signed by the log's key (or the signature fails, or it is
    /// another log's checkpoint).
    #[error("the checkpoint is not validly signed by the log: {why}")]
    CheckpointSignature {
        /// Why the signature check failed.
        why: String,
    },
    /// A trusted witness's cosignature line fails to verify.
    #[error("witness {witness}'s cosignature does not verify")]
    BadCosignature {
        /// The trusted witness's key name.
        witness: String,
    },
    /// Fewer trusted witnesses cosigned than the policy requires.
    #[error("{have} trusted witness(es) cosigned the checkpoint; {need} required")]
    Quorum {
        /// Distinct trusted witnesses whose cosignature verifies.
        have: usize,
        /// The policy's quorum.
        need: usize,
    },
    /// The bundle is about another GPU than its records, or a record names another GPU.
    #[error("record {position} (log index {index}) is about GPU {found}, not {expected}")]
    WrongGpu {
        /// The record's position in the bundle (0-based).
        position: usize,
        /// The record's log index.
        index: u64,
        /// The GPU UUID the bundle (or the entry framing) is about.
        expected: String,
        /// The GPU UUID the record (or its signed body) names.
        found: String,
    },
    /// A record's bytes are not an entry at all.
    #[error("record {position} (log index {index}) is malformed: {why}")]
    Malformed {
        /// The record's position in the bundle (0-based).
        position: usize,
        /// The record's log index.
        index: u64,
        /// Why the bytes do not parse as an entry.
        why: String,
    },
    /// A record's bytes changed after its producer signed them.
    #[error("record {position} (log index {index}) was modified: its producer's signature does not verify ({why})")]
    Modified {
        /// The record's position in the bundle (0-based).
        position: usize,
        /// The record's log index.
        index: u64,
        /// Why the producer's signature check failed.
        why: String,
    },
    /// A record is not in the checkpoint's tree as given (its bytes, index or proof changed
    /// after it was logged).
    #[error("record {position} (log index {index}) is not in the checkpoint's tree: its bytes, index or proof differ from what was logged")]
    NotIncluded {
        /// The record's position in the bundle (0-based).
        position: usize,
        /// The log index the record claims.
        index: u64,
    },
    /// A record's log index is beyond the checkpoint's tree.
    #[error("record {position} claims log index {index}, beyond the checkpoint's {size} entries")]
    BeyondCheckpoint {
        /// The record's position in the bundle (0-based).
        position: usize,
        /// The log index the record claims.
        index: u64,
        /// The checkpoint's tree size (entries).
        size: u64,
    },
    /// Records are not in log order.
    #[error(
        "record {position} (log index {index}) comes after log index {previous}: records reordered"
    )]
    Reordered {
        /// The record's position in the bundle (0-based).
        position: usize,
        /// The record's log index.
        index: u64,
        /// The log index of the record before it in the bundle, not smaller than `index`.
        previous: u64,
    },
    /// The GPU's chain skips records: some were dropped from the bundle (or the log).
    #[error("record {position} (log index {index}) is the GPU's record #{got}, expected #{expected}: {missing} record(s) dropped before it")]
    Dropped {
        /// The record's position in the bundle (0-based).
        position: usize,
        /// The record's log index.
        index: u64,
        /// The GPU sequence number the chain expects here.
        expected: u64,
        /// The record's GPU sequence number.
        got: u64,
        /// How many records are missing before it (`got - expected`).
        missing: u64,
    },
    /// A record's back-link does not point at the previous record of the GPU.
    #[error("record {position} (log index {index}) links back to log index {links_to}, not to the previous record at {previous}")]
    BrokenChain {
        /// The record's position in the bundle (0-based).
        position: usize,
        /// The record's log index.
        index: u64,
        /// The log index the record's back-link names ("none" for a first record).
        links_to: String,
        /// The log index of the GPU's previous record in the bundle ("none" if it is the
        /// first).
        previous: String,
    },
    /// A record is signed by a key that neither is the validator's nor belongs to an agent
    /// the validator registered for this GPU.
    #[error("record {position} (log index {index}, {kind:?}) is signed by unknown key {signer}")]
    UnknownSigner {
        /// The record's position in the bundle (0-based).
        position: usize,
        /// The record's log index.
        index: u64,
        /// The record's kind, which decides whether the validator or an agent must sign it.
        kind: RecordKind,
        /// The signer's Ed25519 public key, hex.
        signer: PublicKey,
    },
    /// The holder's earlier checkpoint is not validly signed by the log.
    #[error("your earlier checkpoint is not validly signed by the log: {why}")]
    SinceSignature {
        /// Why the signature check failed.
        why: String,
    },
    /// The log shows a smaller tree than the holder's earlier checkpoint: rolled back.
    #[error("the log was rolled back: your checkpoint has {held_size} entries, the bundle's only {bundle_size}")]
    Rollback {
        /// The tree size of the holder's earlier checkpoint (entries).
        held_size: u64,
        /// The tree size of the bundle's checkpoint (entries), smaller.
        bundle_size: u64,
    },
    /// Two checkpoints of the same size with different roots: the log shows two histories.
    #[error("fork: two checkpoints of size {size} disagree (yours {held_root}, the bundle's {bundle_root})")]
    Fork {
        /// The tree size both checkpoints claim (entries).
        size: u64,
        /// The root of the holder's earlier checkpoint, hex.
        held_root: String,
        /// The root of the bundle's checkpoint, hex.
        bundle_root: String,
    },
    /// The bundle carries no consistency proof from the holder's checkpoint size.
    #[error("the bundle has no consistency proof from your checkpoint's size {from_size} (export it with --since {from_size})")]
    ConsistencyMissing {
        /// The tree size of the holder's checkpoint (entries), the proof's required start.
        from_size: u64,
    },
    /// The consistency proof fails: the log's history changed since the holder's checkpoint.
    #[error("the log is not consistent with your checkpoint of size {from_size}: its history was rewritten (a fork)")]
    Inconsistent {
        /// The tree size of the holder's checkpoint (entries).
        from_size: u64,
    },
    /// A record of the holder's earlier bundle is missing from this one (the newest records of
    /// a GPU dropped: the one case the chain alone cannot show).
    #[error("the GPU's record #{gpu_seq} (log index {index}) of your earlier bundle is missing: record(s) dropped")]
    MissingSince {
        /// The missing record's log index.
        index: u64,
        /// The missing record's GPU sequence number.
        gpu_seq: u64,
    },
    /// A record of the holder's earlier bundle has other bytes in this one.
    #[error("the record at log index {index} differs from the one in your earlier bundle: history rewritten")]
    ChangedSince {
        /// The changed record's log index.
        index: u64,
    },
    /// The log holds a record of the bundle's GPU after the bundle's last one, within the
    /// checkpoint's tree: the bundle leaves out the GPU's newest records (`pog verify --log`).
    #[error("the log holds the GPU's record #{gpu_seq} at log index {index}, after the bundle's last record: the newest record(s) dropped")]
    MissingNewest {
        /// The left-out record's log index.
        index: u64,
        /// The left-out record's GPU sequence number.
        gpu_seq: u64,
    },
    /// The log's tiles do not lead to the checkpoint's root: they are not the tree the
    /// checkpoint signs (`pog verify --log`).
    #[error("the log's tiles do not match the checkpoint (root {tiles_root} from the tiles, {checkpoint_root} signed): another tree is served")]
    TilesDiffer {
        /// The root computed from the tiles, hex.
        tiles_root: String,
        /// The checkpoint's signed root, hex.
        checkpoint_root: String,
    },
    /// The chain's registry holds no anchor of the log at the checkpoint's size (`pog verify
    /// --chain`; found by `pog_anchor`).
    #[error("anchor missing: the registry {registry} holds no anchor of {origin} at size {size}; {}", latest_anchored.map_or("it holds no anchor at all of that log".to_string(), |l| format!("its latest anchored size is {l}")))]
    AnchorMissing {
        /// The registry's address.
        registry: String,
        /// The log's origin.
        origin: String,
        /// The checkpoint's size.
        size: u64,
        /// The largest size anchored for the origin, if any.
        latest_anchored: Option<u64>,
    },
    /// The log's origin is registered on chain to another publisher than the one the holder
    /// expects (`pog verify --publisher`): a squatted or re-pointed registry.
    #[error("the anchor's publisher differs: the registry {registry} has {origin} registered to {}, not {expected}", registered.as_deref().unwrap_or("nobody"))]
    AnchorPublisher {
        /// The registry's address.
        registry: String,
        /// The log's origin.
        origin: String,
        /// The publisher registered for the origin, if any.
        registered: Option<String>,
        /// The publisher the holder expects.
        expected: String,
    },
    /// The chain's newest anchor before the checkpoint's size has a root the checkpoint's tree
    /// does not extend (its consistency proof from that size fails): two histories.
    #[error("the chain anchor disagrees: the registry {registry} anchors {origin} at size {anchored_size}, and the checkpoint's tree of {size} entries does not extend it (a fork)")]
    AnchorInconsistent {
        /// The registry's address.
        registry: String,
        /// The log's origin.
        origin: String,
        /// The size of the newest anchor before the checkpoint's.
        anchored_size: u64,
        /// The checkpoint's size.
        size: u64,
    },
    /// The chain anchors another root at the checkpoint's size: the anchor or the checkpoint
    /// was replaced (two histories of one size).
    #[error("the chain anchor differs: the registry {registry} anchors {origin} at size {size} with root {anchored_root}, the checkpoint's root is {checkpoint_root}")]
    AnchorMismatch {
        /// The registry's address.
        registry: String,
        /// The log's origin.
        origin: String,
        /// The checkpoint's size.
        size: u64,
        /// The anchored root, hex.
        anchored_root: String,
        /// The checkpoint's root, hex.
        checkpoint_root: String,
    },
    /// The chain anchors the log at a size larger than the log's newest checkpoint (as the
    /// log serves it now): a publisher key that anchored what the log never had, or a log
    /// that went back. The origin's owner voids such anchors (`pog ledger rotate-publisher`).
    #[error("the chain anchors {origin} at size {anchored_size} in the registry {registry}, beyond the log's newest checkpoint of {size} entries: a bogus anchor (its owner can void it) or a log that went back")]
    AnchorBeyondLog {
        /// The registry's address.
        registry: String,
        /// The log's origin.
        origin: String,
        /// The latest valid anchored size.
        anchored_size: u64,
        /// The log's newest checkpoint's size.
        size: u64,
    },
    /// The chain's state of a token's GPU (`contracts/GpuScores.sol`, read by `pog verify
    /// --token`) is not what the log holds at the entry it names: the contract was fed
    /// something the log does not have, or another log.
    #[error("the chain's state of token {token_id} (GPU {gpu_uuid}) disagrees with the log at entry {leaf_index}: {why}")]
    TokenStateDiffers {
        /// The token id, decimal.
        token_id: String,
        /// The token's GPU.
        gpu_uuid: String,
        /// The log index the chain's state names.
        leaf_index: u64,
        /// How they differ.
        why: String,
    },
}

/// Whether the log, read through its tiles (`source`, e.g. the validator's `/ledger/` or a
/// mirror), holds a record of the bundle's GPU after the bundle's last one within the
/// bundle's checkpoint: the one tampering a bundle alone cannot show (its GPU's newest records
/// dropped). The tiles are first checked to lead to the checkpoint's root; then every entry
/// after the bundle's last record is read, each against its tile hash: one entry bundle per
/// 256 entries appended since the GPU's last record. The problems found (at most 64); an error
/// when the tiles cannot be read. Check the bundle's checkpoint signature first
/// ([`verify_bundle`]): this trusts its size and root. `known` is the GPU's last record
/// verified before the bundle (a continuation with no new record reads from after it).
pub fn check_tail<S: TileSource>(
    bundle: &Bundle,
    known: Option<ChainLink>,
    source: S,
) -> Result<Vec<Problem>, TileError> {
    let checkpoint = &bundle.checkpoint.checkpoint;
    let mut tree = TiledTree::new(source, checkpoint.size);
    let root = tree.root()?;
    if root != checkpoint.root {
        return Ok(vec![Problem::TilesDiffer {
            tiles_root: hex::encode(root),
            checkpoint_root: hex::encode(checkpoint.root),
        }]);
    }
    let from = bundle
        .records
        .last()
        .map(|r| r.index)
        .or(known.map(|k| k.index))
        .map_or(0, |last| last + 1);
    let mut problems = Vec::new();
    tree.for_each_entry(from.min(tree.size()), tree.size(), |index, bytes| {
        // An entry that does not parse is not the GPU's record; its bytes are in the tree.
        if let Ok(entry) = Entry::parse(bytes) {
            if entry.gpu_uuid == bundle.gpu_uuid {
                problems.push(Problem::MissingNewest {
                    index,
                    gpu_seq: entry.gpu_seq,
                });
            }
        }
        problems.len() < 64
    })?;
    Ok(problems)
}

/// One record as verified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RecordReport {
    /// Position in the bundle.
    pub position: usize,
    /// Log index.
    pub index: u64,
    /// Kind, when the entry parsed.
    pub kind: Option<RecordKind>,
    /// The GPU's sequence number of the record, when the entry parsed.
    pub gpu_seq: Option<u64>,
    /// Signer, when the entry parsed.
    pub signer: Option<PublicKey>,
    /// "validator", "agent" or "unknown".
    pub signed_by: &'static str,
    /// No problem concerns this record.
    pub ok: bool,
}

/// A GPU's record as the chain of its records links them: its log index and its GPU sequence
/// number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainLink {
    /// Log index.
    pub index: u64,
    /// The GPU's sequence number of the record.
    pub gpu_seq: u64,
}

/// Where a GPU's verified history stands after some of its records: the last record verified
/// and the agent keys its registrations in force name (agents sign some kinds of records).
/// What a holder keeps between runs to verify only what is new ([`verify_bundle_from`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainState {
    /// The last record verified; `None` before the first.
    pub last: Option<ChainLink>,
    /// The agents registered for the GPU, as its registration records left them.
    pub agents: Vec<PublicKey>,
}

/// What [`verify_bundle`] found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BundleReport {
    /// The GPU.
    pub gpu_uuid: String,
    /// The checkpoint's origin.
    pub origin: String,
    /// The checkpoint's size.
    pub size: u64,
    /// The checkpoint's root, hex.
    pub root: String,
    /// Trusted witnesses whose cosignature verified, with its time.
    pub cosigned_by: Vec<(String, u64)>,
    /// Each record.
    pub records: Vec<RecordReport>,
    /// Everything wrong; empty when the bundle verifies.
    pub problems: Vec<Problem>,
    /// Where the GPU's history stands after the bundle's records (meaningful when it verified).
    pub chain: ChainState,
}

impl BundleReport {
    /// Whether the bundle verified with no problem.
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// The key of an agent that a registration record's JSON body names (`"agent"`, hex) and
/// whether the registration released the GPU.
pub(crate) fn registration_agent(body: &str) -> Option<(PublicKey, bool)> {
    #[derive(Deserialize)]
    struct Reg {
        agent: PublicKey,
        event: String,
    }
    let r: Reg = serde_json::from_str(body).ok()?;
    Some((r.agent, r.event == "released"))
}

/// The keys a holder trusts for one log: the log's checkpoint key, and the validators whose
/// records the log carries. A validator alone signs its records and its checkpoints with one
/// key; a fleet's log key (issue 22) is apart from its validators' keys, which the holder
/// names (`pog verify --validator-key`).
#[derive(Debug, Clone, Copy)]
pub struct LogKeys<'a> {
    /// The log's checkpoint (note) key; its Ed25519 key signs validator records too.
    pub log: &'a Verifier,
    /// Further validators' record keys (a fleet's).
    pub validators: &'a [PublicKey],
}

impl<'a> From<&'a Verifier> for LogKeys<'a> {
    /// The keys of a lone validator's log: its key signs both.
    fn from(log: &'a Verifier) -> LogKeys<'a> {
        LogKeys {
            log,
            validators: &[],
        }
    }
}

impl LogKeys<'_> {
    /// Whether `signer` is one of the log's validators.
    pub fn is_validator(&self, signer: &PublicKey) -> bool {
        *signer == PublicKey::from(self.log.public_key()) || self.validators.contains(signer)
    }
}

/// Verifies a bundle offline: the checkpoint's signature by the log key (whose Ed25519 key is
/// also a validator's record-signing key, beside any further validator keys the holder
/// trusts: [`LogKeys`]), the witnesses' cosignatures against `witnesses`,
/// every record's signature, signer, GPU, inclusion proof and place in the GPU's chain, and,
/// given the holder's earlier checkpoint `since`, that the log neither forked nor rolled back
/// since. Problems are collected, not stopped at: the report names all of them.
pub fn verify_bundle<'a>(
    bundle: &Bundle,
    keys: impl Into<LogKeys<'a>>,
    witnesses: &WitnessPolicy,
    since: Option<&SignedCheckpoint>,
) -> BundleReport {
    verify_bundle_from(bundle, keys, witnesses, since, None)
}

/// [`verify_bundle`] for a bundle that continues a history already verified up to `from`
/// (with `since` the checkpoint it was verified at): the bundle's first record must be the
/// GPU's next after `from.last`, agent-signed records may be signed by the agents `from`
/// holds, and a continuation may bring no record at all (nothing new). `from` of `None` is a
/// whole history, which must hold a record.
pub fn verify_bundle_from<'a>(
    bundle: &Bundle,
    keys: impl Into<LogKeys<'a>>,
    witnesses: &WitnessPolicy,
    since: Option<&SignedCheckpoint>,
    from: Option<&ChainState>,
) -> BundleReport {
    let keys = keys.into();
    let log_key = keys.log;
    let cp = &bundle.checkpoint.checkpoint;
    let mut problems = Vec::new();
    if let Err(e) = bundle.checkpoint.verify(log_key) {
        problems.push(Problem::CheckpointSignature { why: e.to_string() });
    }
    let mut cosigned_by: Vec<(String, u64)> = Vec::new();
    for (witness, result) in bundle.checkpoint.cosignatures(&witnesses.keys) {
        match result {
            Ok(v) => {
                if !cosigned_by.iter().any(|(w, _)| *w == witness) {
                    cosigned_by.push((witness, v.timestamp.unwrap_or(0)));
                }
            }
            Err(_) => problems.push(Problem::BadCosignature { witness }),
        }
    }
    if cosigned_by.len() < witnesses.quorum {
        problems.push(Problem::Quorum {
            have: cosigned_by.len(),
            need: witnesses.quorum,
        });
    }

    if bundle.records.is_empty() && from.is_none() {
        problems.push(Problem::NoRecords);
    }
    let mut agents: Vec<PublicKey> = from.map(|f| f.agents.clone()).unwrap_or_default();
    let mut records = Vec::new();
    // The previous record of the chain: (log index, GPU sequence number).
    let mut previous: Option<(u64, u64)> = from.and_then(|f| f.last).map(|l| (l.index, l.gpu_seq));
    for (position, r) in bundle.records.iter().enumerate() {
        let mut report = RecordReport {
            position,
            index: r.index,
            kind: None,
            gpu_seq: None,
            signer: None,
            signed_by: "unknown",
            ok: true,
        };
        let before = problems.len();
        let index = r.index;
        if index >= cp.size {
            problems.push(Problem::BeyondCheckpoint {
                position,
                index,
                size: cp.size,
            });
        } else if !verify_inclusion(
            &pog_merkle::leaf_hash(&r.entry),
            index,
            cp.size,
            &r.proof,
            &cp.root,
        ) {
            problems.push(Problem::NotIncluded { position, index });
        }
        match Entry::parse(&r.entry) {
            Err(e) => problems.push(Problem::Malformed {
                position,
                index,
                why: e.to_string(),
            }),
            Ok(entry) => {
                report.kind = Some(entry.kind);
                report.gpu_seq = Some(entry.gpu_seq);
                report.signer = Some(entry.signer_key());
                match entry.verify() {
                    Err(EntryError::UuidMismatch { body, .. }) => {
                        problems.push(Problem::WrongGpu {
                            position,
                            index,
                            expected: entry.gpu_uuid.clone(),
                            found: body,
                        })
                    }
                    Err(e) => problems.push(Problem::Modified {
                        position,
                        index,
                        why: e.to_string(),
                    }),
                    Ok(()) => {}
                }
                if entry.gpu_uuid != bundle.gpu_uuid {
                    problems.push(Problem::WrongGpu {
                        position,
                        index,
                        expected: bundle.gpu_uuid.clone(),
                        found: entry.gpu_uuid.clone(),
                    });
                }
                let signer = entry.signer_key();
                let by_validator = keys.is_validator(&signer);
                let by_agent = agents.contains(&signer);
                report.signed_by = if by_validator {
                    "validator"
                } else if by_agent {
                    "agent"
                } else {
                    "unknown"
                };
                let allowed = if entry.kind.signed_by_validator() {
                    by_validator
                } else {
                    by_agent
                };
                if !allowed {
                    problems.push(Problem::UnknownSigner {
                        position,
                        index,
                        kind: entry.kind,
                        signer,
                    });
                }
                if entry.kind == RecordKind::Registration && by_validator {
                    if let Some((agent, released)) = registration_agent(&entry.body) {
                        if released {
                            agents.retain(|a| *a != agent);
                        } else if !agents.contains(&agent) {
                            agents.push(agent);
                        }
                    }
                }
                // The chain: order, then sequence numbers, then back-links.
                let (expected_seq, expected_prev) = match previous {
                    None => (0, NO_PREVIOUS),
                    Some((i, s)) => (s + 1, i),
                };
                if let Some((prev_index, _)) = previous.filter(|(i, _)| *i >= index) {
                    problems.push(Problem::Reordered {
                        position,
                        index,
                        previous: prev_index,
                    });
                } else if entry.gpu_seq > expected_seq {
                    problems.push(Problem::Dropped {
                        position,
                        index,
                        expected: expected_seq,
                        got: entry.gpu_seq,
                        missing: entry.gpu_seq - expected_seq,
                    });
                } else if entry.gpu_seq < expected_seq || entry.prev_index != expected_prev {
                    let show = |i: u64| {
                        if i == NO_PREVIOUS {
                            "none".to_string()
                        } else {
                            i.to_string()
                        }
                    };
                    problems.push(Problem::BrokenChain {
                        position,
                        index,
                        links_to: show(entry.prev_index),
                        previous: show(expected_prev),
                    });
                }
                previous = Some((index, entry.gpu_seq));
            }
        }
        report.ok = problems.len() == before;
        records.push(report);
    }

    if let Some(held) = since {
        if let Err(e) = held.verify(log_key) {
            problems.push(Problem::SinceSignature { why: e.to_string() });
        }
        let h = &held.checkpoint;
        if h.size > cp.size {
            problems.push(Problem::Rollback {
                held_size: h.size,
                bundle_size: cp.size,
            });
        } else if h.size == cp.size {
            if h.root != cp.root {
                problems.push(Problem::Fork {
                    size: h.size,
                    held_root: hex::encode(h.root),
                    bundle_root: hex::encode(cp.root),
                });
            }
        } else {
            match bundle
                .consistency
                .as_ref()
                .filter(|(from, _)| *from == h.size)
            {
                None => problems.push(Problem::ConsistencyMissing { from_size: h.size }),
                Some((_, proof)) => {
                    if !verify_consistency(h.size, cp.size, &h.root, &cp.root, proof) {
                        problems.push(Problem::Inconsistent { from_size: h.size });
                    }
                }
            }
        }
    }

    BundleReport {
        gpu_uuid: bundle.gpu_uuid.clone(),
        origin: cp.origin.clone(),
        size: cp.size,
        root: hex::encode(cp.root),
        cosigned_by,
        records,
        problems,
        chain: ChainState {
            last: previous.map(|(index, gpu_seq)| ChainLink { index, gpu_seq }),
            agents,
        },
    }
}

/// Checks a bundle against an earlier bundle of the same GPU that the holder verified and kept:
/// every record the earlier one held must be in this one, byte for byte, at the same log index.
/// This catches what the chain alone cannot: the GPU's newest records dropped from a later
/// export. (Run [`verify_bundle`] on both; this compares them.)
pub fn compare_with_earlier(earlier: &Bundle, bundle: &Bundle) -> Vec<Problem> {
    let mut problems = Vec::new();
    for old in &earlier.records {
        match bundle.records.iter().find(|r| r.index == old.index) {
            Some(r) if r.entry == old.entry => {}
            Some(_) => problems.push(Problem::ChangedSince { index: old.index }),
            None => problems.push(Problem::MissingSince {
                index: old.index,
                gpu_seq: Entry::parse(&old.entry).map_or(0, |e| e.gpu_seq),
            }),
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = Bundle::parse(&bytes);
        }

        #[test]
        fn parser_never_panics_on_near_bundles(
            index in any::<u64>(), entry in "\\PC{0,20}", proof in "\\PC{0,50}", cp in "\\PC{0,80}"
        ) {
            let json = serde_json::json!({
                "format": BUNDLE_FORMAT, "gpu_uuid": "GPU-1", "checkpoint": cp,
                "records": [{"index": index, "entry": entry, "proof": [proof]}],
            });
            let _ = Bundle::parse(json.to_string().as_bytes());
        }
    }
}
