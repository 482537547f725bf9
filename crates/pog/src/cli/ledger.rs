//! The flags of `pog ledger` (the chain anchor's among them), `pog verify` and
//! `pog witness`.

use super::parse::parse_seconds;
use clap::{Args, Subcommand};
use std::path::PathBuf;

/// What `pog ledger` does.
#[derive(Debug, Args)]
pub struct LedgerArgs {
    /// The action on the log.
    #[command(subcommand)]
    pub action: LedgerAction,
    /// The ledger's directory [default: DATA_DIR/ledger].
    #[arg(long, global = true, value_name = "DIR")]
    pub ledger_dir: Option<PathBuf>,
    /// The log's name (checkpoint origin and key name) [default: pog.validator/ and the first
    /// 16 hex digits of the validator's public key].
    #[arg(long, global = true)]
    pub origin: Option<String>,
}

/// `pog ledger`'s subcommands.
#[derive(Debug, Subcommand)]
pub enum LedgerAction {
    /// Append signed records to the ledger (each file: one envelope, a JSON array of them, or a
    /// page of the validator's /v1/records API); durable when this returns.
    Append {
        /// JSON files of signed envelopes.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Sign a checkpoint of the ledger with the validator's key (DATA_DIR/validator.key) and
    /// keep it as the latest.
    Checkpoint,
    /// An inclusion proof of one record, or a consistency proof between two tree sizes.
    Prove(ProveLedgerArgs),
    /// Write one GPU's records with their inclusion proofs and the latest checkpoint (with its
    /// cosignatures) as one bundle file, for `pog verify`.
    Export(ExportArgs),
    /// Print the log's verifier key (what holders pass to `pog verify --log-key`).
    Vkey,
    /// Write the tlog-witness add-checkpoint request for the latest checkpoint: "old OLD", the
    /// consistency proof from OLD (the size the witness last cosigned), a blank line, the
    /// checkpoint. Give it to `pog witness cosign`.
    WitnessRequest {
        /// The size of the checkpoint the witness last cosigned (0 the first time).
        #[arg(long, default_value_t = 0)]
        old: u64,
    },
    /// Ask witnesses (`pog witness serve`, or any c2sp.org/tlog-witness) to cosign the latest
    /// checkpoint, and attach their cosignatures to it; fails when any witness refuses.
    Publish {
        /// A witness by URL prefix (its add-checkpoint endpoint is URL/add-checkpoint) and
        /// cosignature key, as URL=VKEY; repeatable.
        #[arg(long = "witness", value_name = "URL=VKEY", required = true)]
        witnesses: Vec<pog_validator::ledger::WitnessTarget>,
    },
    /// Write the log as static files (c2sp.org/tlog-tiles: checkpoint, tiles, entry bundles)
    /// under DIR, for any web server or mirror; full tiles already there are kept.
    Mirror {
        /// The directory to serve.
        dir: PathBuf,
    },
    /// Attach witnesses' cosignature lines (`pog witness cosign` prints them) to the latest
    /// checkpoint, which `pog ledger export` puts in bundles.
    AddCosignature {
        /// Cosignature lines ("— name base64…"), one per argument.
        #[arg(required = true)]
        lines: Vec<String>,
    },
    /// Anchor the latest checkpoint in a CheckpointRegistry on an EVM chain (registering the
    /// log's origin first if no one has), and keep it as the anchored checkpoint (`export
    /// --anchored`); fails when the registry refuses or holds a contradicting anchor.
    Anchor(AnchorArgs),
    /// Deploy a CheckpointRegistry (contracts/CheckpointRegistry.sol, compiled by
    /// scripts/evm-tools.sh) on an EVM chain and print its address.
    DeployRegistry(DeployArgs),
    /// Deploy a GpuScores contract (contracts/GpuScores.sol) for this log (--origin, or the
    /// ledger's checkpoint's) trusting the anchors of the registry at --registry; print its
    /// address.
    DeployScores(DeployScoresArgs),
    /// Deploy a GpuToken contract (contracts/GpuToken.sol: one ERC-721 token per proven GPU)
    /// reading the GpuScores contract at --scores; print its address.
    DeployToken(DeployTokenArgs),
    /// Prove every GPU's latest gpu-state record within the anchored checkpoint (`pog ledger
    /// anchor`) to the GpuScores contract at --scores, in batches; GPUs whose state the chain
    /// holds already are skipped. Anyone with a copy of the log may run it.
    PublishScores(PublishScoresArgs),
    /// As the owner of the log's origin in the CheckpointRegistry at --contract: name a new
    /// publisher and void the anchors of --void-from entries or more (a publisher key that
    /// anchored what the log never had, or was stolen); anchoring goes on in a new era.
    RotatePublisher(RotateArgs),
    /// As the owner of the log's origin in the CheckpointRegistry at --contract: hand the
    /// ownership to another address (a cold key, apart from the publisher's hot one).
    SetOwner(SetOwnerArgs),
    /// Mint a GPU's token in the GpuToken contract at --token: to the owner its proven state
    /// names (the caller pays the gas); fails, named, when the GPU has no proven state, named
    /// no owner, or does not prove its model.
    Mint(MintArgs),
    /// Follow a log's checkpoint and tiles (a validator's /ledger/ or any tlog-tiles mirror):
    /// verify every new checkpoint against the last one verified (kept in
    /// DATA_DIR/ledger-monitor/), read every new entry, and alert on a fork, a rollback, an
    /// unknown kind or signer, or a GPU whose rounds stopped.
    Monitor(MonitorLogArgs),
}

/// What `pog ledger monitor` follows and where it alerts.
#[derive(Debug, Args)]
pub struct MonitorLogArgs {
    /// The log's URL prefix (its checkpoint is URL/checkpoint, its tiles URL/tile/…), e.g.
    /// http://validator:7071/ledger.
    pub url: String,
    /// The log's verifier key (or a file holding it).
    #[arg(long, value_name = "VKEY")]
    pub log_key: String,
    /// A validator of a fleet whose log --log-key signs (its public key, hex): its records are
    /// no unknown signer's; repeatable. A lone validator signs with the log key and needs none.
    #[arg(long = "validator-key", value_name = "HEX")]
    pub validator_keys: Vec<String>,
    /// Run one pass and exit: 1 when it raised any alert (for cron and tests).
    #[arg(long)]
    pub once: bool,
    /// Seconds between passes.
    #[arg(long, value_name = "SECONDS", default_value = "60", value_parser = parse_seconds)]
    pub every: std::time::Duration,
    /// A registered GPU with no round record for this many seconds is alerted on (once per
    /// silence).
    #[arg(long, value_name = "SECONDS", default_value_t = 900,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub silent_after: u64,
    /// POST each alert as JSON to this URL (http or https), retried with backoff.
    #[arg(long, value_name = "URL")]
    pub webhook: Option<String>,
    /// Serve Prometheus metrics (alerts by kind, the verified size) at
    /// http://HOST:PORT/metrics.
    #[arg(long, value_name = "HOST:PORT")]
    pub listen: Option<String>,
    /// Allow a log at a loopback, private or link-local address (refused by default).
    #[arg(long)]
    pub allow_private: bool,
    /// Where the monitor keeps the last verified checkpoint [default: DATA_DIR/ledger-monitor].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// An EVM node's JSON-RPC URL (http or https): after each pass, the chain's latest anchor of
    /// the log in the CheckpointRegistry at --contract must be a tree the log has (not beyond
    /// its size, and extended by its checkpoint), or the monitor alerts.
    #[arg(long, value_name = "RPC_URL", requires = "contract")]
    pub chain: Option<String>,
    /// The CheckpointRegistry's address on --chain.
    #[arg(long, value_name = "ADDR", requires = "chain")]
    pub contract: Option<String>,
}

impl LedgerAction {
    /// The action's name, as its JSON schema names it.
    pub fn name(&self) -> &'static str {
        match self {
            LedgerAction::Append { .. } => "ledger.append",
            LedgerAction::Checkpoint => "ledger.checkpoint",
            LedgerAction::Prove(_) => "ledger.prove",
            LedgerAction::Export(_) => "ledger.export",
            LedgerAction::Vkey => "ledger.vkey",
            LedgerAction::WitnessRequest { .. } => "ledger.witness_request",
            LedgerAction::AddCosignature { .. } => "ledger.add_cosignature",
            LedgerAction::Publish { .. } => "ledger.publish",
            LedgerAction::Mirror { .. } => "ledger.mirror",
            LedgerAction::Anchor(_) => "ledger.anchor",
            LedgerAction::DeployRegistry(_) => "ledger.deploy_registry",
            LedgerAction::DeployScores(_) => "ledger.deploy_scores",
            LedgerAction::DeployToken(_) => "ledger.deploy_token",
            LedgerAction::PublishScores(_) => "ledger.publish_scores",
            LedgerAction::Mint(_) => "ledger.mint",
            LedgerAction::RotatePublisher(_) => "ledger.rotate_publisher",
            LedgerAction::SetOwner(_) => "ledger.set_owner",
            LedgerAction::Monitor(_) => "ledger.monitor",
        }
    }
}

/// What `pog ledger prove` proves.
#[derive(Debug, Args)]
pub struct ProveLedgerArgs {
    /// The log index of the record to prove included.
    #[arg(
        long,
        value_name = "INDEX",
        conflicts_with = "consistency",
        required_unless_present = "consistency"
    )]
    pub inclusion: Option<u64>,
    /// The older tree size to prove the current tree consistent with.
    #[arg(long, value_name = "OLD_SIZE")]
    pub consistency: Option<u64>,
    /// The tree size to prove against [default: the ledger's size].
    #[arg(long)]
    pub size: Option<u64>,
}

/// What `pog ledger export` writes.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The GPU's UUID.
    #[arg(long)]
    pub gpu: String,
    /// Include a consistency proof from this earlier tree size (the size of the checkpoint the
    /// holder kept).
    #[arg(long, value_name = "SIZE")]
    pub since: Option<u64>,
    /// Where to write the bundle [default: stdout].
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Prove against the latest checkpoint anchored on chain (kept by `pog ledger anchor` and
    /// the validator's --anchor-rpc), which `pog verify --chain` finds anchored at exactly its
    /// size, instead of the latest signed one; records logged after it are left out.
    #[arg(long)]
    pub anchored: bool,
    /// Where the log's tiles are served (e.g. `https://VALIDATOR:7071/ledger/`), written into
    /// the bundle so that `pog verify` reads the GPU's newest records from the log without
    /// being told (it reads a bundle's URL at public addresses only).
    #[arg(long, value_name = "URL")]
    pub log_url: Option<String>,
}

/// What `pog ledger anchor` anchors with.
#[derive(Debug, Args)]
pub struct AnchorArgs {
    /// The EVM node's JSON-RPC URL (http or https).
    #[arg(long, value_name = "URL")]
    pub rpc: String,
    /// The CheckpointRegistry's address (`pog ledger deploy-registry` prints it).
    #[arg(long, value_name = "ADDRESS")]
    pub contract: String,
    /// A file holding the publisher's secp256k1 private key (64 hex digits, chmod 600). The
    /// key itself is never a command-line value: others on the host could read it there.
    #[arg(long, value_name = "FILE")]
    pub key_file: PathBuf,
}

/// What `pog ledger deploy-registry` deploys with.
#[derive(Debug, Args)]
pub struct DeployArgs {
    /// The EVM node's JSON-RPC URL (http or https).
    #[arg(long, value_name = "URL")]
    pub rpc: String,
    /// A file holding the deployer's secp256k1 private key (64 hex digits, chmod 600).
    #[arg(long, value_name = "FILE")]
    pub key_file: PathBuf,
    /// The registry's creation bytecode (hex), as `scripts/evm-tools.sh` compiles it
    /// [default: target/contracts/CheckpointRegistry.bin].
    #[arg(long, value_name = "PATH")]
    pub bytecode: Option<PathBuf>,
}

/// The chain and the paying key of the commands that send to the scores and token contracts.
#[derive(Debug, Args)]
pub struct SenderArgs {
    /// The EVM node's JSON-RPC URL (http or https).
    #[arg(long, value_name = "URL")]
    pub rpc: String,
    /// A file holding the sender's secp256k1 private key (64 hex digits, chmod 600): its
    /// account pays the gas.
    #[arg(long, value_name = "FILE")]
    pub key_file: PathBuf,
}

/// What `pog ledger deploy-scores` deploys.
#[derive(Debug, Args)]
pub struct DeployScoresArgs {
    /// The chain and the deployer's key.
    #[command(flatten)]
    pub sender: SenderArgs,
    /// The CheckpointRegistry whose anchors of the log the contract trusts.
    #[arg(long, value_name = "ADDRESS")]
    pub registry: String,
    /// The contract's creation bytecode (hex) [default: target/contracts/GpuScores.bin, as
    /// scripts/evm-tools.sh compiles it].
    #[arg(long, value_name = "PATH")]
    pub bytecode: Option<PathBuf>,
}

/// What `pog ledger deploy-token` deploys.
#[derive(Debug, Args)]
pub struct DeployTokenArgs {
    /// The chain and the deployer's key.
    #[command(flatten)]
    pub sender: SenderArgs,
    /// The GpuScores contract the tokens read.
    #[arg(long, value_name = "ADDRESS")]
    pub scores: String,
    /// The contract's creation bytecode (hex) [default: target/contracts/GpuToken.bin].
    #[arg(long, value_name = "PATH")]
    pub bytecode: Option<PathBuf>,
}

/// What `pog ledger publish-scores` proves, and to which contract.
#[derive(Debug, Args)]
pub struct PublishScoresArgs {
    /// The chain and the sender's key (any account: the contract trusts only the anchors).
    #[command(flatten)]
    pub sender: SenderArgs,
    /// The GpuScores contract.
    #[arg(long, value_name = "ADDRESS")]
    pub scores: String,
    /// The most states one transaction carries.
    #[arg(long, default_value_t = pog_anchor::scores::DEFAULT_BATCH as u64,
          value_parser = clap::value_parser!(u64).range(1..=500))]
    pub batch: u64,
}

/// What `pog ledger rotate-publisher` changes.
#[derive(Debug, Args)]
pub struct RotateArgs {
    /// The chain and the origin owner's key.
    #[command(flatten)]
    pub sender: SenderArgs,
    /// The CheckpointRegistry.
    #[arg(long, value_name = "ADDRESS")]
    pub contract: String,
    /// The new publisher's address (it may be the same one, to void anchors only).
    #[arg(long, value_name = "ADDRESS")]
    pub publisher: String,
    /// Void the current era's anchors of this many entries or more (the smallest size the log
    /// never had, e.g. its size now plus one).
    #[arg(long, value_name = "SIZE", value_parser = clap::value_parser!(u64).range(1..))]
    pub void_from: u64,
}

/// What `pog ledger set-owner` changes.
#[derive(Debug, Args)]
pub struct SetOwnerArgs {
    /// The chain and the origin owner's key.
    #[command(flatten)]
    pub sender: SenderArgs,
    /// The CheckpointRegistry.
    #[arg(long, value_name = "ADDRESS")]
    pub contract: String,
    /// The new owner's address.
    #[arg(long, value_name = "ADDRESS")]
    pub owner: String,
}

/// What `pog ledger mint` mints.
#[derive(Debug, Args)]
pub struct MintArgs {
    /// The chain and the sender's key (any account: the token goes to the GPU's named owner).
    #[command(flatten)]
    pub sender: SenderArgs,
    /// The GpuToken contract.
    #[arg(long, value_name = "ADDRESS")]
    pub token: String,
    /// The GPU whose token to mint.
    #[arg(long, value_name = "UUID")]
    pub gpu: String,
}

/// What `pog verify` checks.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The bundle file (`pog ledger export`); or fetch the GPU's history from a validator
    /// instead (--validator and --gpu).
    #[arg(required_unless_present = "validator")]
    pub bundle: Option<PathBuf>,
    /// Fetch the GPU's history from this validator (`GET /v1/bundles/{uuid}`, page by page)
    /// instead of reading a bundle file, verify only what is new since the last run (kept in
    /// DATA_DIR/verify/), and read the log's tail from its `/ledger/`.
    #[arg(long, value_name = "URL", conflicts_with_all = ["bundle", "since", "since_bundle", "log_tiles"])]
    pub validator: Option<String>,
    /// The GPU whose history --validator serves.
    #[arg(
        long,
        value_name = "UUID",
        requires = "validator",
        conflicts_with = "token"
    )]
    pub gpu: Option<String>,
    /// A GPU token (its id, decimal or 0x-hex) of the GpuToken contract at --token-contract on
    /// --chain: its GPU's history is verified (from --validator, or the bundle file), and the
    /// chain's state of the GPU must be the log's record at the entry it names. The registry
    /// is the one the token's GpuScores contract trusts unless --contract names it.
    #[arg(long, value_name = "ID", requires_all = ["chain", "token_contract"])]
    pub token: Option<String>,
    /// The GpuToken contract of --token.
    #[arg(long, value_name = "ADDR", requires = "token")]
    pub token_contract: Option<String>,
    /// The log's (validator's) verifier key, as `pog ledger vkey` prints it, or a file holding
    /// it.
    #[arg(long, value_name = "VKEY")]
    pub log_key: String,
    /// A validator of a fleet whose log --log-key signs (its public key, hex, as `pog
    /// validator` prints it): its records count as the validator's; repeatable. A lone
    /// validator's records are signed by the log key itself and need none.
    #[arg(long = "validator-key", value_name = "HEX")]
    pub validator_keys: Vec<String>,
    /// A trusted witness's cosignature verifier key (or a file holding it); repeatable.
    #[arg(long = "witness", value_name = "VKEY")]
    pub witnesses: Vec<String>,
    /// How many of the trusted witnesses must have cosigned [default: all given].
    #[arg(long)]
    pub quorum: Option<usize>,
    /// A checkpoint you kept from before (a file): the bundle must extend it, not fork or roll
    /// it back.
    #[arg(long, value_name = "CHECKPOINT")]
    pub since: Option<PathBuf>,
    /// A bundle of the same GPU you verified before: every record it held must still be here,
    /// unchanged (this catches the newest records dropped); its checkpoint serves as --since
    /// when that is not given.
    #[arg(long, value_name = "BUNDLE")]
    pub since_bundle: Option<PathBuf>,
    /// An EVM node's JSON-RPC URL (http or https): the chain's CheckpointRegistry (--contract)
    /// must anchor the bundle's checkpoint, at its size and with its root.
    #[arg(long, value_name = "RPC_URL")]
    pub chain: Option<String>,
    /// The CheckpointRegistry's address on --chain.
    #[arg(long, value_name = "ADDR", requires = "chain")]
    pub contract: Option<String>,
    /// The log's tiles (a validator's URL prefix such as http://HOST:7071/ledger/, any
    /// tlog-tiles mirror, or a mirror's directory): every entry after the bundle's last record
    /// is read, checked against the checkpoint, to catch the GPU's newest records left out.
    #[arg(long = "log", value_name = "URL_OR_DIR")]
    pub log_tiles: Option<String>,
    /// Seconds the whole read of the log's tiles over http(s) may take (a hostile log signs
    /// as large a tree as it likes), and, with --validator, the whole fetch of the pages:
    /// past it, pog verify gives up with an error.
    #[arg(long, default_value = "600", value_parser = parse_seconds, value_name = "SECONDS")]
    pub log_timeout: std::time::Duration,
    /// The address the log's origin must be registered to on --chain (the validator's anchor
    /// publisher, as it announced it): a registry where someone else registered the origin
    /// first fails the check.
    #[arg(long, value_name = "ADDR", requires = "chain")]
    pub publisher: Option<String>,
    /// Pass a bundle even where a check could not run: no witness quorum and no chain anchor
    /// (a fork of the log signed with its key goes unnoticed), or no log tiles (the GPU's
    /// newest records may be left out). For tests and demos; the output says what went
    /// unchecked.
    #[arg(long)]
    pub accept_unwitnessed: bool,
}

/// What `pog witness` does.
#[derive(Debug, Args)]
pub struct WitnessArgs {
    /// What the witness does.
    #[command(subcommand)]
    pub action: WitnessAction,
}

/// `pog witness`'s subcommands.
#[derive(Debug, Subcommand)]
pub enum WitnessAction {
    /// Check an add-checkpoint request (c2sp.org/tlog-witness: "old N", the consistency proof,
    /// a blank line, the checkpoint) against the last checkpoint this witness cosigned for the
    /// log, and print the cosignature line; the new checkpoint is kept before it is printed.
    Cosign(CosignArgs),
    /// Serve the tlog-witness API (`POST /add-checkpoint`) for the logs whose keys are given;
    /// the last checkpoint cosigned per log is kept in DATA_DIR/witness/ before each answer.
    Serve(ServeArgs),
    /// Print this witness's cosignature verifier key (DATA_DIR/witness.key).
    Vkey {
        /// The witness's name [default: pog.witness/ and the first 16 hex digits of its key].
        #[arg(long)]
        name: Option<String>,
    },
}

/// What `pog witness cosign` reads.
#[derive(Debug, Args)]
pub struct CosignArgs {
    /// The request body file ("-" for stdin).
    pub request: PathBuf,
    /// The log's verifier key (or a file holding it).
    #[arg(long, value_name = "VKEY")]
    pub log_key: String,
    /// The witness's name [default: pog.witness/ and the first 16 hex digits of its key].
    #[arg(long)]
    pub name: Option<String>,
}

/// What `pog witness serve` serves.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (host:port; port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:7400")]
    pub listen: String,
    /// The verifier key of a log to follow (or a file holding it); repeatable.
    #[arg(long = "log-key", value_name = "VKEY", required = true)]
    pub log_keys: Vec<String>,
    /// The witness's name [default: pog.witness/ and the first 16 hex digits of its key].
    #[arg(long)]
    pub name: Option<String>,
    /// Add-checkpoint requests taken per followed log and minute (a minute's worth at once);
    /// the rest are answered 429 with Retry-After.
    #[arg(long, default_value_t = pog_ledger::witness_service::DEFAULT_REQUESTS_PER_LOG_MINUTE,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub requests_per_log_minute: u32,
}

impl WitnessAction {
    /// The action's name, as its JSON schema names it.
    pub fn name(&self) -> &'static str {
        match self {
            WitnessAction::Cosign(_) => "witness.cosign",
            WitnessAction::Serve(_) => "witness.serve",
            WitnessAction::Vkey { .. } => "witness.vkey",
        }
    }
}
