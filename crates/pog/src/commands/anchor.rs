//! Chain anchoring (`pog_anchor`): `pog ledger deploy-registry`, `pog ledger anchor`, the
//! validator's anchoring schedule (`pog validator --anchor-rpc --anchor-contract
//! --anchor-key-file`) and the on-chain check of `pog verify --chain --contract`.
//!
//! Whoever anchors a checkpoint keeps it as `anchored-checkpoint` in the ledger's directory
//! (with the cosignatures it had), so that `pog ledger export --anchored` can prove a GPU's
//! records against a checkpoint the chain holds at exactly its size.

use super::{print_json, Outcome, Verdict};
use crate::cli::Global;
use anyhow::{anyhow, Context, Result};
use clap::Args;
use pog_anchor::{AnchorError, Anchored, PublisherKey, Registry, RpcUrl};
use pog_ledger::checkpoint::SignedCheckpoint;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The anchored checkpoint's file in the ledger's directory.
pub const ANCHORED_FILE: &str = "anchored-checkpoint";

/// Where `scripts/evm-tools.sh` writes the registry's bytecode, from a checkout's root.
const DEFAULT_BYTECODE: &str = "target/contracts/CheckpointRegistry.bin";

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

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// The anchoring configuration of a validator or a command, checked before anything runs.
pub struct ChainTarget {
    /// The RPC URL.
    pub rpc: RpcUrl,
    /// The registry.
    pub registry: Registry,
}

impl ChainTarget {
    /// Parses and checks the RPC URL, the address and (when given) the key file.
    pub fn new(rpc: &str, contract: &str, key_file: Option<&Path>) -> Result<ChainTarget> {
        let rpc = RpcUrl::parse(rpc)?;
        let address = pog_anchor::parse_address(contract)?;
        let registry = match key_file {
            Some(path) => Registry::publisher(&rpc, address, &PublisherKey::from_file(path)?)?,
            None => Registry::reader(&rpc, address)?,
        };
        Ok(ChainTarget { rpc, registry })
    }
}

/// The ledger's anchored checkpoint, if one was kept.
pub fn load_anchored(ledger_dir: &Path) -> Result<Option<SignedCheckpoint>> {
    let path = ledger_dir.join(ANCHORED_FILE);
    match std::fs::read(&path) {
        Ok(text) => Ok(Some(SignedCheckpoint::parse(&text).map_err(|e| {
            anyhow!(
                "the anchored checkpoint {} is unreadable: {e}",
                path.display()
            )
        })?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// Keeps `checkpoint` as the ledger's anchored checkpoint (written to a temporary file, synced,
/// renamed), unless the one kept is as large already.
pub fn save_anchored(ledger_dir: &Path, checkpoint: &SignedCheckpoint) -> Result<()> {
    if let Ok(Some(kept)) = load_anchored(ledger_dir) {
        if kept.checkpoint.size >= checkpoint.checkpoint.size {
            return Ok(());
        }
    }
    let path = ledger_dir.join(ANCHORED_FILE);
    let tmp = ledger_dir.join(format!("{ANCHORED_FILE}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, checkpoint.to_text())
        .and_then(|()| std::fs::File::open(&tmp)?.sync_all())
        .and_then(|()| std::fs::rename(&tmp, &path))
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// The ledger's stored (latest signed) checkpoint, read from its file.
fn stored_checkpoint(ledger_dir: &Path) -> Result<SignedCheckpoint> {
    let path = ledger_dir.join("checkpoint");
    let text = match std::fs::read(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => anyhow::bail!(
            "the ledger in {} has no checkpoint yet: run `pog ledger checkpoint`",
            ledger_dir.display()
        ),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    SignedCheckpoint::parse(&text)
        .map_err(|e| anyhow!("the ledger's stored checkpoint is unreadable: {e}"))
}

/// Whether an anchoring error is the chain's answer (a refusal, a contradiction) rather than
/// a failure to reach it.
fn refused(e: &AnchorError) -> bool {
    matches!(
        e,
        AnchorError::Refused { .. }
            | AnchorError::RegisteredToOther { .. }
            | AnchorError::Conflict(_)
            | AnchorError::Reverted { .. }
    )
}

/// `pog ledger anchor`: anchors the ledger's latest checkpoint (registering its origin first
/// if no one has), and keeps it as the anchored checkpoint.
pub fn anchor_command(global: &Global, ledger_dir: &Path, args: &AnchorArgs) -> Result<Outcome> {
    let target = ChainTarget::new(&args.rpc, &args.contract, Some(&args.key_file))?;
    let checkpoint = stored_checkpoint(ledger_dir)?;
    let rt = runtime()?;
    let result = rt.block_on(async {
        target.registry.check_deployed().await?;
        target
            .registry
            .anchor_checkpoint(&checkpoint.checkpoint)
            .await
    });
    let (verdict, summary, done, why) = match result {
        Ok(done) => {
            save_anchored(ledger_dir, &checkpoint)?;
            let summary = match &done.anchored {
                Some(sent) => format!(
                    "anchored {} at size {} on {} (tx {}, {} gas)",
                    done.origin,
                    done.size,
                    target.registry.address(),
                    sent.tx,
                    sent.gas_used
                ),
                None => format!(
                    "{} at size {} was anchored on {} already",
                    done.origin,
                    done.size,
                    target.registry.address()
                ),
            };
            (Verdict::Pass, summary, Some(done), None)
        }
        Err(e) if refused(&e) => (Verdict::Fail, e.to_string(), None, Some(e.to_string())),
        Err(e) => return Err(e.into()),
    };
    if global.json {
        #[derive(Serialize)]
        struct Report<'a> {
            rpc: String,
            contract: String,
            origin: &'a str,
            size: u64,
            root: String,
            result: Option<&'a Anchored>,
            refused: Option<&'a str>,
        }
        let c = &checkpoint.checkpoint;
        let report = Report {
            rpc: target.rpc.to_string(),
            contract: target.registry.address().to_string(),
            origin: &c.origin,
            size: c.size,
            root: hex::encode(c.root),
            result: done.as_ref(),
            refused: why.as_deref(),
        };
        print_json("ledger.anchor", verdict, &summary, false, &report)?;
    } else {
        if let Some(done) = &done {
            let mut t = super::ledger::table(&["step", "transaction", "gas used", "block"]);
            for (step, sent) in [("register", &done.registered), ("anchor", &done.anchored)] {
                match sent {
                    Some(s) => t.add_row(vec![
                        step.to_string(),
                        s.tx.clone(),
                        s.gas_used.to_string(),
                        s.block.map_or("?".into(), |b| b.to_string()),
                    ]),
                    None => t.add_row(vec![
                        step.to_string(),
                        "(not needed)".into(),
                        "–".into(),
                        "–".into(),
                    ]),
                };
            }
            println!("{t}");
        }
        crate::render::verdict_line(verdict, &summary, false);
    }
    Ok(Outcome(verdict))
}

/// `pog ledger deploy-registry`: deploys the CheckpointRegistry and prints its address.
pub fn deploy_command(global: &Global, args: &DeployArgs) -> Result<Outcome> {
    let rpc = RpcUrl::parse(&args.rpc)?;
    let key = PublisherKey::from_file(&args.key_file)?;
    let path = args
        .bytecode
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_BYTECODE));
    let code = pog_anchor::read_bytecode(&path)?;
    let deployed = runtime()?.block_on(pog_anchor::deploy(&rpc, &key, &code))?;
    let summary = format!(
        "CheckpointRegistry deployed at {} (tx {}, {} gas)",
        deployed.address, deployed.sent.tx, deployed.sent.gas_used
    );
    if global.json {
        #[derive(Serialize)]
        struct Report<'a> {
            rpc: String,
            deployer: String,
            bytecode: String,
            #[serde(flatten)]
            deployed: &'a pog_anchor::Deployed,
        }
        let report = Report {
            rpc: rpc.to_string(),
            deployer: key.address().to_string(),
            bytecode: path.display().to_string(),
            deployed: &deployed,
        };
        print_json(
            "ledger.deploy_registry",
            Verdict::Pass,
            &summary,
            false,
            &report,
        )?;
    } else {
        println!("{}", deployed.address);
        crate::render::verdict_line(Verdict::Pass, &summary, false);
    }
    Ok(Outcome(Verdict::Pass))
}

/// How long a stopping validator waits for its last checkpoint to be anchored.
const LAST_ANCHOR_WAIT: Duration = Duration::from_secs(20);

/// Every `every`: anchors the ledger's latest stored checkpoint when it is larger than the last
/// one anchored (registering the origin the first time), and keeps it as the anchored
/// checkpoint. A failure is logged and retried on the next tick; nothing else waits for it.
/// On `stop` (sent once the last checkpoint is signed) one last look, for at most
/// [`LAST_ANCHOR_WAIT`]; what it misses is anchored at the next start.
pub async fn anchor_on_schedule(
    ledger: Arc<pog_validator::ledger::ValidatorLedger>,
    ledger_dir: PathBuf,
    registry: Registry,
    every: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    // The size this process last saw anchored: nothing to ask the chain until it grows.
    let mut anchored: Option<u64> = None;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.changed() => break,
        }
        tokio::select! {
            _ = anchor_latest(&ledger, &ledger_dir, &registry, &mut anchored) => {}
            _ = stop.changed() => break,
        }
    }
    let last = anchor_latest(&ledger, &ledger_dir, &registry, &mut anchored);
    if tokio::time::timeout(LAST_ANCHOR_WAIT, last).await.is_err() {
        tracing::warn!(
            "the last checkpoint was not anchored within {} s: it is anchored at the next start",
            LAST_ANCHOR_WAIT.as_secs()
        );
    }
}

/// One look of [`anchor_on_schedule`]: anchors the stored checkpoint if it is larger than
/// `anchored`, and records it there and in the ledger directory.
async fn anchor_latest(
    ledger: &pog_validator::ledger::ValidatorLedger,
    ledger_dir: &Path,
    registry: &Registry,
    anchored: &mut Option<u64>,
) {
    let checkpoint = match pog_validator::ledger::stored_checkpoint(ledger.ledger()) {
        Ok(c) => c,
        Err(pog_validator::ledger::LedgerError::NoCheckpoint) => return,
        Err(e) => {
            tracing::error!(error = %e, "anchoring: the ledger's checkpoint is unreadable");
            return;
        }
    };
    let size = checkpoint.checkpoint.size;
    if anchored.is_some_and(|a| a >= size) {
        return;
    }
    match registry.anchor_checkpoint(&checkpoint.checkpoint).await {
        Ok(done) => {
            *anchored = Some(size);
            if let Some(sent) = &done.registered {
                tracing::info!(origin = %done.origin, registry = %registry.address(), tx = %sent.tx, gas = sent.gas_used, "registered the log's origin");
            }
            match &done.anchored {
                Some(sent) => {
                    tracing::info!(size, registry = %registry.address(), tx = %sent.tx, gas = sent.gas_used, "anchored the checkpoint on chain")
                }
                None => {
                    tracing::info!(size, registry = %registry.address(), "the checkpoint was anchored already")
                }
            }
            let (dir, cp) = (ledger_dir.to_path_buf(), checkpoint.clone());
            let saved = tokio::task::spawn_blocking(move || save_anchored(&dir, &cp)).await;
            match saved {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::error!(error = %format!("{e:#}"), "keeping the anchored checkpoint")
                }
                Err(e) => tracing::error!(error = %e, "keeping the anchored checkpoint"),
            }
        }
        Err(e) => {
            tracing::warn!(size, registry = %registry.address(), error = %e, "anchoring failed; retrying at the next tick")
        }
    }
}

/// `pog verify --chain --contract`: what the registry holds for the bundle's checkpoint, and
/// the problem when its anchor is missing or differs. An error when the chain cannot be read.
pub fn check_chain(
    rpc: &str,
    contract: &str,
    publisher: Option<&str>,
    checkpoint: &pog_ledger::checkpoint::Checkpoint,
) -> Result<(pog_anchor::AnchorCheck, Option<pog_ledger::bundle::Problem>)> {
    let target = ChainTarget::new(rpc, contract, None)?;
    let expected = publisher
        .map(pog_anchor::parse_address)
        .transpose()
        .context("--publisher")?;
    let checked = runtime()?
        .block_on(pog_anchor::verify_anchor(
            &target.registry,
            checkpoint,
            expected,
        ))
        .with_context(|| format!("reading the anchor from {}", target.rpc))?;
    Ok(checked)
}
