//! GPU states and tokens on chain (issue 24; docs/ledger.md, "Scores on chain"): deploying
//! `contracts/GpuScores.sol` and `contracts/GpuToken.sol`, proving the ledger's `gpu-state`
//! records to the scores contract, minting and reading tokens.
//!
//! - [`deploy_scores`], [`deploy_token`]: the two contracts, bound to a registry and a log
//!   origin, and to a scores contract.
//! - [`ProvenEntry`]: a `gpu-state` entry of the ledger with its inclusion proof in an anchored
//!   tree: what the scores contract takes.
//! - [`Scores`]: submits proven entries, reads a GPU's kept state.
//! - [`publish_states`]: what anyone holding a copy of the log runs (`pog ledger
//!   publish-scores`): every GPU's latest `gpu-state` entry within the anchored checkpoint that
//!   the chain does not hold yet, in batches.
//! - [`Tokens`]: mints a GPU's token, reads a token's GPU, its owner and metadata.

use alloy::primitives::{keccak256, Address, FixedBytes, U256};
use alloy::providers::DynProvider;
use alloy::sol_types::SolValue;
use pog_ledger::entry::Entry;
use pog_ledger::store::Ledger;
use pog_records::{GpuState, StoredBody};
use pog_signed::{EvmAddress, GpuUuid, RecordKind};
use serde::Serialize;
use std::sync::Arc;

use crate::contract::IGpuScores::{self, IGpuScoresInstance};
use crate::contract::IGpuToken::{self, IGpuTokenInstance};
use crate::{
    call_error, deploy_code, mined, provider, AnchorError, Deployed, PublisherKey, RpcUrl, Sent,
};

/// How many back-links `publish_states` follows per GPU looking for its latest `gpu-state`
/// entry below the anchored size (one is logged beside every score, so it is near the top).
const STATE_SEARCH_STEPS: usize = 4096;

/// The most states one `submit` transaction carries by default: about 3 M gas at the measured
/// cost per state (docs/ledger.md), a tenth of a 30 M block.
pub const DEFAULT_BATCH: usize = 50;

/// Deploys `GpuScores` from `bytecode` (solc's creation code), trusting `registry`'s anchors of
/// the log `origin`.
pub async fn deploy_scores(
    rpc: &RpcUrl,
    key: &PublisherKey,
    bytecode: &[u8],
    registry: Address,
    origin: &str,
) -> Result<Deployed, AnchorError> {
    crate::check_origin(origin)?;
    let mut code = bytecode.to_vec();
    code.extend((registry, origin.to_string()).abi_encode_params());
    deploy_code("deploying the scores contract", rpc, key, code).await
}

/// Deploys `GpuToken` from `bytecode`, reading the GPUs' states from the scores contract at
/// `scores`.
pub async fn deploy_token(
    rpc: &RpcUrl,
    key: &PublisherKey,
    bytecode: &[u8],
    scores: Address,
) -> Result<Deployed, AnchorError> {
    let mut code = bytecode.to_vec();
    code.extend((scores,).abi_encode_params());
    deploy_code("deploying the token contract", rpc, key, code).await
}

/// A `gpu-state` entry of the log with its RFC 6962 inclusion proof in the tree of an
/// anchored size.
#[derive(Debug, Clone, PartialEq)]
pub struct ProvenEntry {
    /// The entry's log index.
    pub leaf_index: u64,
    /// The entry.
    pub entry: Entry,
    /// Its body, read.
    pub state: GpuState,
    /// Its inclusion proof.
    pub proof: Vec<pog_merkle::Hash>,
}

impl ProvenEntry {
    /// Reads `entry` (log index `leaf_index`) as a `gpu-state` record whose body the contract
    /// can rebuild; `proof` is its inclusion proof in the anchored tree.
    pub fn new(
        leaf_index: u64,
        entry: Entry,
        proof: Vec<pog_merkle::Hash>,
    ) -> Result<ProvenEntry, AnchorError> {
        let bad = |reason: String| AnchorError::BadState {
            gpu_uuid: entry.gpu_uuid.clone(),
            leaf_index,
            reason,
        };
        if entry.kind != RecordKind::GpuState {
            return Err(bad(format!(
                "a {} entry is not a gpu-state record",
                entry.kind.wire_kind()
            )));
        }
        let state =
            GpuState::read(entry.kind.wire_kind(), &entry.body).map_err(|e| bad(e.to_string()))?;
        // The contract writes the body from the fields: they must give back the signed bytes.
        let rewritten = serde_json::to_string(&state).map_err(|e| bad(e.to_string()))?;
        if rewritten != entry.body || !state.provable() {
            return Err(bad(
                "its body is not in the form the contract rebuilds (compact, fields in order, nothing JSON escapes)".into(),
            ));
        }
        Ok(ProvenEntry {
            leaf_index,
            entry,
            state,
            proof,
        })
    }

    /// The contract's struct for it.
    pub fn to_sol(&self) -> IGpuScores::ProvenState {
        IGpuScores::ProvenState {
            state: state_to_sol(&self.state),
            gpuSeq: self.entry.gpu_seq,
            prevIndex: self.entry.prev_index,
            signer: FixedBytes(self.entry.signer),
            signature: self.entry.signature.to_vec().into(),
            leafIndex: self.leaf_index,
            proof: self.proof.iter().map(|h| FixedBytes(*h)).collect(),
        }
    }
}

/// A record's state as the contract's struct.
pub fn state_to_sol(s: &GpuState) -> IGpuScores::GpuState {
    IGpuScores::GpuState {
        gpuUuid: s.gpu_uuid.to_string(),
        model: s.model.clone(),
        provesModel: s.proves_model,
        provesMemory: s.proves_memory,
        scorePpm: s.score_ppm,
        priceMicroUsd: s.price_micro_usd,
        owner: Address::from(s.owner.0),
        recordedAtMs: s.recorded_at_ms,
    }
}

/// A GPU's state as a contract keeps it, with where in the log it was proven from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChainState {
    /// The state (the record's fields; `version` is the contract's `STATE_VERSION`).
    pub state: GpuState,
    /// The log index of the entry it was proven from.
    pub leaf_index: u64,
    /// The anchored tree size it was proven in.
    pub anchored_size: u64,
}

impl ChainState {
    /// The state a contract returned (`GpuScores.stateOf`, `GpuToken.gpuOf`), checked.
    fn from_sol(
        what: &str,
        s: IGpuScores::GpuState,
        leaf_index: u64,
        anchored_size: u64,
    ) -> Result<ChainState, AnchorError> {
        let gpu_uuid = GpuUuid::new(&s.gpuUuid).map_err(|e| AnchorError::BadState {
            gpu_uuid: s.gpuUuid.clone(),
            leaf_index,
            reason: format!("{what}: {e}"),
        })?;
        Ok(ChainState {
            state: GpuState {
                version: pog_records::state::STATE_VERSION,
                gpu_uuid,
                model: s.model,
                proves_model: s.provesModel,
                proves_memory: s.provesMemory,
                score_ppm: s.scorePpm,
                price_micro_usd: s.priceMicroUsd,
                owner: EvmAddress(s.owner.into_array()),
                recorded_at_ms: s.recordedAtMs,
            },
            leaf_index,
            anchored_size,
        })
    }
}

/// The token contract's copy of the state struct is the scores contract's, field for field.
impl From<IGpuToken::GpuState> for IGpuScores::GpuState {
    fn from(s: IGpuToken::GpuState) -> IGpuScores::GpuState {
        IGpuScores::GpuState {
            gpuUuid: s.gpuUuid,
            model: s.model,
            provesModel: s.provesModel,
            provesMemory: s.provesMemory,
            scorePpm: s.scorePpm,
            priceMicroUsd: s.priceMicroUsd,
            owner: s.owner,
            recordedAtMs: s.recordedAtMs,
        }
    }
}

/// A `GpuScores` contract at an address on one chain, read-only or with a key that pays for
/// submissions.
#[derive(Debug, Clone)]
pub struct Scores {
    rpc: RpcUrl,
    address: Address,
    contract: IGpuScoresInstance<DynProvider>,
}

impl Scores {
    /// The scores contract at `address`, to read from and, with `key`, to submit to.
    pub fn new(
        rpc: &RpcUrl,
        address: Address,
        key: Option<&PublisherKey>,
    ) -> Result<Scores, AnchorError> {
        Ok(Scores {
            rpc: rpc.clone(),
            address,
            contract: IGpuScores::new(address, provider(rpc, key)?),
        })
    }

    /// The contract's address.
    pub fn address(&self) -> Address {
        self.address
    }

    /// The contract, for calls this type does not wrap (its pure helpers, in tests).
    pub fn contract(&self) -> &IGpuScoresInstance<DynProvider> {
        &self.contract
    }

    /// The log origin whose anchors it trusts, and the registry it reads them from.
    pub async fn log(&self) -> Result<(String, Address), AnchorError> {
        let origin = self
            .contract
            .origin()
            .call()
            .await
            .map_err(|e| self.call_error("reading the scores contract's origin", e))?;
        let registry = self
            .contract
            .registry()
            .call()
            .await
            .map_err(|e| self.call_error("reading the scores contract's registry", e))?;
        Ok((origin, registry))
    }

    /// The GPU's latest proven state; None when none was proven.
    pub async fn state_of(&self, gpu_uuid: &str) -> Result<Option<ChainState>, AnchorError> {
        let what = format!("reading the state of {gpu_uuid}");
        let r = self
            .contract
            .stateOf(gpu_uuid.to_string())
            .call()
            .await
            .map_err(|e| self.call_error(&what, e))?;
        if !r.known {
            return Ok(None);
        }
        ChainState::from_sol(&what, r.state, r.leafIndex, r.anchoredSize).map(Some)
    }

    /// Proves `states` from the checkpoint of `size` entries anchored in the registry, in one
    /// transaction (all or nothing). A dry run first: a refusal comes back decoded, and costs
    /// nothing.
    pub async fn submit(&self, size: u64, states: &[ProvenEntry]) -> Result<Sent, AnchorError> {
        let what = format!(
            "proving {} GPU state(s) from the checkpoint of size {size}",
            states.len()
        );
        let call = self
            .contract
            .submit(size, states.iter().map(ProvenEntry::to_sol).collect());
        call.call().await.map_err(|e| self.call_error(&what, e))?;
        let pending = call.send().await.map_err(|e| self.call_error(&what, e))?;
        mined(&what, &self.rpc, pending).await
    }

    fn call_error(&self, what: &str, e: alloy::contract::Error) -> AnchorError {
        call_error(what, &self.rpc, self.address, e)
    }
}

/// What [`publish_states`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Publication {
    /// The anchored tree size the states were proven in.
    pub size: u64,
    /// GPUs whose latest `gpu-state` entry below the size the chain holds already.
    pub up_to_date: usize,
    /// GPUs with no `gpu-state` entry below the size.
    pub without_state: usize,
    /// GPUs whose latest state cannot be proven on chain, with why.
    pub unprovable: Vec<(String, String)>,
    /// The states submitted.
    pub submitted: usize,
    /// The transactions, one per batch.
    pub transactions: Vec<Sent>,
}

/// Where [`publish_states`] reads the ledger: the validator's own (open for writing, without
/// a second scan of the log), or one opened by a command.
pub trait LedgerSource: Send + Sync {
    /// The ledger.
    fn ledger(&self) -> &Ledger;
}

impl LedgerSource for Ledger {
    fn ledger(&self) -> &Ledger {
        self
    }
}

/// Proves to `scores` every GPU's latest `gpu-state` entry in the ledger's tree of `size`
/// entries (a size anchored in the scores contract's registry) that the chain does not hold
/// yet, `batch` states a transaction. The ledger is read on blocking threads (its files), the
/// chain between.
pub async fn publish_states(
    ledger: Arc<dyn LedgerSource>,
    size: u64,
    scores: &Scores,
    batch: usize,
) -> Result<Publication, AnchorError> {
    let ledger_error = |e: pog_ledger::store::StoreError| AnchorError::Ledger(e.to_string());
    let mut done = Publication {
        size,
        up_to_date: 0,
        without_state: 0,
        unprovable: Vec::new(),
        submitted: 0,
        transactions: Vec::new(),
    };
    // Each GPU's latest state below the size, from the ledger.
    let reader = ledger.clone();
    let latest = blocking(move || {
        let ledger = reader.ledger();
        ledger
            .gpus()
            .into_iter()
            .map(|uuid| {
                let found = ledger
                    .gpu_latest_below(&uuid, RecordKind::GpuState, size, STATE_SEARCH_STEPS)
                    .map_err(ledger_error)?;
                Ok((uuid, found))
            })
            .collect::<Result<Vec<_>, AnchorError>>()
    })
    .await?;
    // Those the chain does not hold yet.
    let mut wanted = Vec::new();
    for (uuid, found) in latest {
        let Some((index, entry)) = found else {
            done.without_state += 1;
            continue;
        };
        if let Some(kept) = scores.state_of(&uuid).await? {
            if kept.leaf_index >= index {
                done.up_to_date += 1;
                continue;
            }
        }
        wanted.push((uuid, index, entry));
    }
    // Their inclusion proofs, from the ledger.
    let proven = blocking(move || {
        wanted
            .into_iter()
            .map(|(uuid, index, entry)| {
                let proof = ledger
                    .ledger()
                    .log()
                    .inclusion_proof(index, size)
                    .map_err(ledger_error)?;
                Ok(ProvenEntry::new(index, entry, proof).map_err(|e| (uuid, e.to_string())))
            })
            .collect::<Result<Vec<_>, AnchorError>>()
    })
    .await?;
    let mut pending = Vec::new();
    for p in proven {
        match p {
            Ok(p) => pending.push(p),
            Err(unprovable) => done.unprovable.push(unprovable),
        }
    }
    for chunk in pending.chunks(batch.max(1)) {
        done.transactions.push(scores.submit(size, chunk).await?);
        done.submitted += chunk.len();
    }
    Ok(done)
}

/// Runs `read` (the ledger's files) on a blocking thread.
async fn blocking<T: Send + 'static>(
    read: impl FnOnce() -> Result<T, AnchorError> + Send + 'static,
) -> Result<T, AnchorError> {
    tokio::task::spawn_blocking(read)
        .await
        .map_err(|e| AnchorError::Ledger(format!("reading the ledger: {e}")))?
}

/// Parses a token id: decimal, or `0x` and hex.
pub fn parse_token_id(text: &str) -> Result<U256, AnchorError> {
    let t = text.trim();
    match t.strip_prefix("0x") {
        Some(hex) => U256::from_str_radix(hex, 16),
        None => U256::from_str_radix(t, 10),
    }
    .map_err(|_| AnchorError::TokenId {
        text: text.to_string(),
    })
}

/// A token's GPU, its owner and its kept state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TokenGpu {
    /// The token id, decimal.
    pub token_id: String,
    /// The token's holder now.
    pub holder: String,
    /// The GPU's state as the scores contract keeps it.
    pub chain: ChainState,
}

/// A `GpuToken` contract at an address on one chain.
#[derive(Debug, Clone)]
pub struct Tokens {
    rpc: RpcUrl,
    address: Address,
    contract: IGpuTokenInstance<DynProvider>,
}

impl Tokens {
    /// The token contract at `address`, to read from and, with `key`, to mint with.
    pub fn new(
        rpc: &RpcUrl,
        address: Address,
        key: Option<&PublisherKey>,
    ) -> Result<Tokens, AnchorError> {
        Ok(Tokens {
            rpc: rpc.clone(),
            address,
            contract: IGpuToken::new(address, provider(rpc, key)?),
        })
    }

    /// The token id of the GPU with this UUID: keccak256 of the UUID, as the contract computes
    /// it.
    pub fn token_id_of(gpu_uuid: &str) -> U256 {
        U256::from_be_bytes(keccak256(gpu_uuid.as_bytes()).0)
    }

    /// The scores contract the tokens read.
    pub async fn scores(&self) -> Result<Address, AnchorError> {
        self.contract
            .scores()
            .call()
            .await
            .map_err(|e| self.call_error("reading the token's scores contract", e))
    }

    /// Mints the GPU's token (to the owner its state names); returns the transaction and the
    /// token id.
    pub async fn mint(&self, gpu_uuid: &str) -> Result<(Sent, U256), AnchorError> {
        let what = format!("minting the token of {gpu_uuid}");
        let call = self.contract.mint(gpu_uuid.to_string());
        let id = call.call().await.map_err(|e| self.call_error(&what, e))?;
        let pending = call.send().await.map_err(|e| self.call_error(&what, e))?;
        Ok((mined(&what, &self.rpc, pending).await?, id))
    }

    /// The token's GPU, holder and the GPU's kept state.
    pub async fn gpu_of(&self, token_id: U256) -> Result<TokenGpu, AnchorError> {
        let what = format!("reading token {token_id}");
        let r = self
            .contract
            .gpuOf(token_id)
            .call()
            .await
            .map_err(|e| self.call_error(&what, e))?;
        let holder = self
            .contract
            .ownerOf(token_id)
            .call()
            .await
            .map_err(|e| self.call_error(&what, e))?;
        let chain = ChainState::from_sol(&what, r.state.into(), r.leafIndex, r.anchoredSize)?;
        Ok(TokenGpu {
            token_id: token_id.to_string(),
            holder: holder.to_checksum(None),
            chain,
        })
    }

    /// The token's metadata URI (a `data:` URI of JSON).
    pub async fn token_uri(&self, token_id: U256) -> Result<String, AnchorError> {
        self.contract
            .tokenURI(token_id)
            .call()
            .await
            .map_err(|e| self.call_error(&format!("reading token {token_id}'s metadata"), e))
    }

    fn call_error(&self, what: &str, e: alloy::contract::Error) -> AnchorError {
        call_error(what, &self.rpc, self.address, e)
    }
}
