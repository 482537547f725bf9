//! `pog ledger anchor` and `pog ledger deploy-registry`: the ledger's latest checkpoint
//! anchored in a CheckpointRegistry on an EVM chain (`crate::chain`), and the registry
//! deployed; and the on-chain check of `pog verify --chain --contract`.

use crate::chain::ChainTarget;
use crate::cli::ledger::{AnchorArgs, DeployArgs};
use crate::cli::Global;
use crate::output::{print_json, table, verdict_line, Outcome, Verdict};
use anyhow::{Context, Result};
use pog_anchor::service::{save_anchored, stored_checkpoint};
use pog_anchor::{AnchorError, Anchored, PublisherKey, RpcUrl};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Where `scripts/evm-tools.sh` writes the registry's bytecode, from a checkout's root.
const DEFAULT_BYTECODE: &str = "target/contracts/CheckpointRegistry.bin";

/// A runtime of one thread for a command's few requests to the chain.
pub(super) fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
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
            let mut t = table(["step", "transaction", "gas used", "block"]);
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
        verdict_line(verdict, &summary, false);
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
        verdict_line(Verdict::Pass, &summary, false);
    }
    Ok(Outcome(Verdict::Pass))
}

/// `pog verify --chain --contract`: what the registry holds for the bundle's checkpoint, and
/// the problem when its anchor is missing or differs. Where no checkpoint of its size is
/// anchored, the newest anchor before it counts when `consistency_from(its size)` gives a
/// consistency proof to the checkpoint that verifies (none: the anchor stays missing). An
/// error when the chain cannot be read.
pub fn check_chain(
    rpc: &str,
    contract: &str,
    publisher: Option<&str>,
    checkpoint: &pog_ledger::checkpoint::Checkpoint,
    mut consistency_from: impl FnMut(u64) -> Result<Option<Vec<pog_merkle::Hash>>>,
) -> Result<(pog_anchor::AnchorCheck, Option<pog_ledger::bundle::Problem>)> {
    let target = ChainTarget::new(rpc, contract, None)?;
    let expected = publisher
        .map(pog_anchor::parse_address)
        .transpose()
        .context("--publisher")?;
    let rt = runtime()?;
    let reading = || format!("reading the anchor from {}", target.rpc);
    let (mut check, mut problem) = rt
        .block_on(pog_anchor::verify_anchor(
            &target.registry,
            checkpoint,
            expected,
        ))
        .with_context(reading)?;
    // No anchor at the checkpoint's size: the newest one before it will do, if the
    // checkpoint's tree provably extends it.
    if let Some(pog_ledger::bundle::Problem::AnchorMissing { .. }) = &problem {
        let before = checkpoint.size.saturating_sub(1);
        let earlier = rt
            .block_on(target.registry.newest_at_most(&checkpoint.origin, before))
            .with_context(reading)?;
        if let Some(earlier) = earlier {
            if let Some(proof) = consistency_from(earlier.size)? {
                problem = if pog_merkle::verify_consistency(
                    earlier.size,
                    checkpoint.size,
                    &earlier.root,
                    &checkpoint.root,
                    &proof,
                ) {
                    None
                } else {
                    Some(pog_ledger::bundle::Problem::AnchorInconsistent {
                        registry: check.registry.clone(),
                        origin: checkpoint.origin.clone(),
                        anchored_size: earlier.size,
                        size: checkpoint.size,
                    })
                };
                check.ok = problem.is_none();
                check.earlier = Some(earlier);
            }
        }
    }
    Ok((check, problem))
}

/// What `pog ledger rotate-publisher` or `set-owner` did.
#[derive(Serialize)]
struct OwnerReport<'a> {
    rpc: String,
    contract: String,
    origin: &'a str,
    owner: String,
    publisher: Option<String>,
    void_from: Option<u64>,
    transaction: Option<&'a pog_anchor::Sent>,
    refused: Option<String>,
}

/// `pog ledger rotate-publisher` (with `rotate`: the new publisher and the size to void from)
/// or `pog ledger set-owner` (with `new_owner`), as the origin's owner.
pub fn owner_command(
    global: &Global,
    origin: &str,
    sender: &crate::cli::ledger::SenderArgs,
    contract: &str,
    rotate: Option<(&str, u64)>,
    new_owner: Option<&str>,
) -> Result<Outcome> {
    let target = ChainTarget::new(&sender.rpc, contract, Some(&sender.key_file))?;
    let owner = PublisherKey::from_file(&sender.key_file)?.address();
    let rt = runtime()?;
    let (schema, result) = match (rotate, new_owner) {
        (Some((publisher, void_from)), _) => {
            let publisher = pog_anchor::parse_address(publisher).context("--publisher")?;
            (
                "ledger.rotate_publisher",
                rt.block_on(target.registry.rotate(origin, publisher, void_from)),
            )
        }
        (None, Some(new_owner)) => {
            let new_owner = pog_anchor::parse_address(new_owner).context("--owner")?;
            (
                "ledger.set_owner",
                rt.block_on(target.registry.transfer_ownership(origin, new_owner)),
            )
        }
        (None, None) => anyhow::bail!("nothing to change"),
    };
    let (verdict, summary, sent, why) = match result {
        Ok(sent) => {
            let summary = match (rotate, new_owner) {
                (Some((publisher, void_from)), _) => format!(
                    "{origin} on {}: publisher {publisher} from now on, anchors of {void_from} entries or more void (tx {}, {} gas)",
                    target.registry.address(),
                    sent.tx,
                    sent.gas_used
                ),
                _ => format!(
                    "{origin} on {}: owned by {} from now on (tx {}, {} gas)",
                    target.registry.address(),
                    new_owner.unwrap_or_default(),
                    sent.tx,
                    sent.gas_used
                ),
            };
            (Verdict::Pass, summary, Some(sent), None)
        }
        Err(e) if refused(&e) => (Verdict::Fail, e.to_string(), None, Some(e.to_string())),
        Err(e) => return Err(e.into()),
    };
    if global.json {
        let report = OwnerReport {
            rpc: target.rpc.to_string(),
            contract: target.registry.address().to_string(),
            origin,
            owner: owner.to_string(),
            publisher: rotate.map(|(p, _)| p.to_string()),
            void_from: rotate.map(|(_, v)| v),
            transaction: sent.as_ref(),
            refused: why,
        };
        print_json(schema, verdict, &summary, false, &report)?;
    } else {
        verdict_line(verdict, &summary, false);
    }
    Ok(Outcome(verdict))
}

/// The latest valid anchor of `origin` in the registry at `contract` on `rpc` (None: none).
pub fn latest_anchor(
    rpc: &str,
    contract: &str,
    origin: &str,
) -> Result<Option<pog_anchor::Anchor>> {
    let target = ChainTarget::new(rpc, contract, None)?;
    runtime()?
        .block_on(target.registry.latest(origin))
        .with_context(|| format!("reading the latest anchor of {origin} from {}", target.rpc))
}
