//! `pog ledger deploy-scores | deploy-token | publish-scores | mint`: GPU states proven on
//! chain from the anchored log, and a token per GPU (`pog_anchor::scores`); and the token
//! check of `pog verify --token` (docs/ledger.md, "Scores on chain").

use super::anchor::runtime;
use crate::cli::ledger::{
    DeployScoresArgs, DeployTokenArgs, MintArgs, PublishScoresArgs, SenderArgs,
};
use crate::cli::Global;
use crate::output::{print_json, table, verdict_line, Outcome, Verdict};
use anyhow::{bail, Context, Result};
use pog_anchor::scores::{
    deploy_scores, deploy_token, publish_states, Publication, Scores, TokenGpu, Tokens,
};
use pog_anchor::service::load_anchored;
use pog_anchor::{parse_address, read_bytecode, AnchorError, Deployed, PublisherKey, RpcUrl};
use pog_ledger::bundle::{Bundle, Problem};
use pog_ledger::entry::Entry;
use pog_ledger::store::Ledger;
use pog_ledger::tiles::{TileSource, TiledTree};
use pog_records::{GpuState, StoredBody};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The RPC URL and the sender's key, checked.
fn sender(args: &SenderArgs) -> Result<(RpcUrl, PublisherKey)> {
    Ok((
        RpcUrl::parse(&args.rpc)?,
        PublisherKey::from_file(&args.key_file)?,
    ))
}

/// The bytecode at `given`, or `target/contracts/NAME.bin` (where scripts/evm-tools.sh
/// compiles it).
fn bytecode(given: &Option<PathBuf>, name: &str) -> Result<(PathBuf, Vec<u8>)> {
    let path = given
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("target/contracts/{name}.bin")));
    let code = read_bytecode(&path)?;
    Ok((path, code))
}

/// Prints a deployment: its address on stdout (the table) or the JSON report.
fn report_deployed(
    global: &Global,
    schema: &str,
    name: &str,
    rpc: &RpcUrl,
    deployed: &Deployed,
    details: serde_json::Value,
) -> Result<Outcome> {
    let summary = format!(
        "{name} deployed at {} (tx {}, {} gas)",
        deployed.address, deployed.sent.tx, deployed.sent.gas_used
    );
    if global.json {
        #[derive(Serialize)]
        struct Report<'a> {
            rpc: String,
            #[serde(flatten)]
            deployed: &'a Deployed,
            #[serde(flatten)]
            details: serde_json::Value,
        }
        let report = Report {
            rpc: rpc.to_string(),
            deployed,
            details,
        };
        print_json(schema, Verdict::Pass, &summary, false, &report)?;
    } else {
        println!("{}", deployed.address);
        verdict_line(Verdict::Pass, &summary, false);
    }
    Ok(Outcome(Verdict::Pass))
}

/// `pog ledger deploy-scores`: a GpuScores contract for the log `origin`.
pub fn deploy_scores_command(
    global: &Global,
    origin: &str,
    args: &DeployScoresArgs,
) -> Result<Outcome> {
    let (rpc, key) = sender(&args.sender)?;
    let registry = parse_address(&args.registry).context("--registry")?;
    let (path, code) = bytecode(&args.bytecode, "GpuScores")?;
    let deployed = runtime()?.block_on(deploy_scores(&rpc, &key, &code, registry, origin))?;
    report_deployed(
        global,
        "ledger.deploy_scores",
        "GpuScores",
        &rpc,
        &deployed,
        serde_json::json!({
            "deployer": key.address().to_string(),
            "bytecode": path.display().to_string(),
            "registry": registry.to_string(),
            "origin": origin,
        }),
    )
}

/// `pog ledger deploy-token`: a GpuToken contract over a GpuScores contract.
pub fn deploy_token_command(global: &Global, args: &DeployTokenArgs) -> Result<Outcome> {
    let (rpc, key) = sender(&args.sender)?;
    let scores = parse_address(&args.scores).context("--scores")?;
    let (path, code) = bytecode(&args.bytecode, "GpuToken")?;
    let deployed = runtime()?.block_on(deploy_token(&rpc, &key, &code, scores))?;
    report_deployed(
        global,
        "ledger.deploy_token",
        "GpuToken",
        &rpc,
        &deployed,
        serde_json::json!({
            "deployer": key.address().to_string(),
            "bytecode": path.display().to_string(),
            "scores": scores.to_string(),
        }),
    )
}

/// Whether an error is the chain's answer (a refusal, a revert) rather than a failure to
/// reach it.
fn refused(e: &AnchorError) -> bool {
    matches!(
        e,
        AnchorError::Refused { .. } | AnchorError::Reverted { .. }
    )
}

/// `pog ledger publish-scores`: the ledger's GPU states within its anchored checkpoint, proven
/// to the scores contract.
pub fn publish_command(
    global: &Global,
    ledger: Ledger,
    ledger_dir: &Path,
    args: &PublishScoresArgs,
) -> Result<Outcome> {
    let (rpc, key) = sender(&args.sender)?;
    let address = parse_address(&args.scores).context("--scores")?;
    let anchored = load_anchored(ledger_dir)?.with_context(|| {
        format!(
            "{} holds no anchored checkpoint: anchor one first (pog ledger anchor, or the validator's --anchor-rpc)",
            ledger_dir.display()
        )
    })?;
    let checkpoint = &anchored.checkpoint;
    let scores = Scores::new(&rpc, address, Some(&key))?;
    let rt = runtime()?;
    let (origin, registry) = rt.block_on(scores.log())?;
    if origin != checkpoint.origin {
        bail!(
            "the scores contract at {address} proves states of the log {origin:?}, not of this ledger's {:?}",
            checkpoint.origin
        );
    }
    let result = rt.block_on(publish_states(
        std::sync::Arc::new(ledger),
        checkpoint.size,
        &scores,
        args.batch as usize,
    ));
    let (verdict, summary, done) = match result {
        Ok(done) => {
            let gas: u64 = done.transactions.iter().map(|t| t.gas_used).sum();
            let summary = format!(
                "{} GPU state(s) proven from the checkpoint of size {} to {address} in {} transaction(s) ({gas} gas); {} up to date, {} without a state{}",
                done.submitted,
                done.size,
                done.transactions.len(),
                done.up_to_date,
                done.without_state,
                if done.unprovable.is_empty() {
                    String::new()
                } else {
                    format!(", {} not provable", done.unprovable.len())
                }
            );
            let verdict = if done.unprovable.is_empty() {
                Verdict::Pass
            } else {
                Verdict::Warn
            };
            (verdict, summary, Some(done))
        }
        Err(e) if refused(&e) => (Verdict::Fail, e.to_string(), None),
        Err(e) => return Err(e.into()),
    };
    if global.json {
        #[derive(Serialize)]
        struct Report<'a> {
            rpc: String,
            scores: String,
            registry: String,
            origin: &'a str,
            result: Option<&'a Publication>,
        }
        let report = Report {
            rpc: rpc.to_string(),
            scores: address.to_string(),
            registry: registry.to_string(),
            origin: &origin,
            result: done.as_ref(),
        };
        print_json("ledger.publish_scores", verdict, &summary, false, &report)?;
    } else {
        if let Some(done) = &done {
            let mut t = table(["transaction", "gas used", "block"]);
            for s in &done.transactions {
                t.add_row(vec![
                    s.tx.clone(),
                    s.gas_used.to_string(),
                    s.block.map_or("?".into(), |b| b.to_string()),
                ]);
            }
            if !done.transactions.is_empty() {
                println!("{t}");
            }
            for (gpu, why) in &done.unprovable {
                println!("not provable: {gpu}: {why}");
            }
        }
        verdict_line(verdict, &summary, false);
    }
    Ok(Outcome(verdict))
}

/// `pog ledger mint`: a GPU's token, minted to the owner its proven state names.
pub fn mint_command(global: &Global, args: &MintArgs) -> Result<Outcome> {
    let (rpc, key) = sender(&args.sender)?;
    let address = parse_address(&args.token).context("--token")?;
    let tokens = Tokens::new(&rpc, address, Some(&key))?;
    let rt = runtime()?;
    let (verdict, summary, minted) = match rt.block_on(tokens.mint(&args.gpu)) {
        Ok((sent, id)) => {
            let gpu = rt.block_on(tokens.gpu_of(id))?;
            let summary = format!(
                "token {id} of {} minted to {} (tx {}, {} gas)",
                args.gpu, gpu.holder, sent.tx, sent.gas_used
            );
            (Verdict::Pass, summary, Some((sent, gpu)))
        }
        Err(e) if refused(&e) => (Verdict::Fail, e.to_string(), None),
        Err(e) => return Err(e.into()),
    };
    if global.json {
        #[derive(Serialize)]
        struct Report<'a> {
            rpc: String,
            token_contract: String,
            gpu_uuid: &'a str,
            transaction: Option<&'a pog_anchor::Sent>,
            token: Option<&'a TokenGpu>,
        }
        let report = Report {
            rpc: rpc.to_string(),
            token_contract: address.to_string(),
            gpu_uuid: &args.gpu,
            transaction: minted.as_ref().map(|(s, _)| s),
            token: minted.as_ref().map(|(_, g)| g),
        };
        print_json("ledger.mint", verdict, &summary, false, &report)?;
    } else {
        verdict_line(verdict, &summary, false);
    }
    Ok(Outcome(verdict))
}

/// A token as `pog verify --token` found it on chain.
#[derive(Debug, Clone, Serialize)]
pub struct TokenCheck {
    /// The token contract.
    pub token_contract: String,
    /// The scores contract it reads.
    pub scores: String,
    /// The registry the scores contract trusts.
    pub registry: String,
    /// The log origin the scores contract proves states of.
    pub origin: String,
    /// The token, its holder and its GPU's state on chain.
    pub token: TokenGpu,
    /// Whether the chain's state was compared with the log's record at its entry (false: the
    /// entry is beyond the verified checkpoint, or neither the bundle nor the log's tiles hold
    /// it).
    pub compared: bool,
    /// The log's newest gpu-state record of the GPU among those verified, when it is newer
    /// than the chain's (the chain has not been sent it yet).
    pub newer_in_log: Option<u64>,
}

/// The verify table's token line: the token, its holder, its GPU's state on chain and whether
/// the log agrees.
pub fn token_line(t: &TokenCheck) -> String {
    let s = &t.token.chain.state;
    format!(
        "{} of {} held by {}: {} score {:.6}, proves model {}, memory {}, from log entry {} ({}){}",
        t.token.token_id,
        t.token_contract,
        t.token.holder,
        if s.model.is_empty() {
            "(no model)"
        } else {
            &s.model
        },
        s.score_ppm as f64 / 1e6,
        if s.proves_model { "yes" } else { "no" },
        if s.proves_memory { "yes" } else { "no" },
        t.token.chain.leaf_index,
        if t.compared {
            "compared with the log"
        } else {
            "NOT compared: the entry is beyond the verified checkpoint, or neither the bundle nor the log's tiles hold it"
        },
        t.newer_in_log.map_or(String::new(), |n| format!(
            "; the log has a newer state (entry {n}) not yet on chain"
        ))
    )
}

/// Reads the token `id` of the GpuToken contract at `contract` on `rpc`: its GPU and state,
/// and the scores contract's log and registry.
pub fn read_token(rpc: &str, contract: &str, id: &str) -> Result<TokenCheck> {
    let rpc = RpcUrl::parse(rpc)?;
    let address = parse_address(contract).context("--token-contract")?;
    let token_id = pog_anchor::scores::parse_token_id(id)?;
    let tokens = Tokens::new(&rpc, address, None)?;
    let rt = runtime()?;
    let reading = || format!("reading token {id} from {rpc}");
    let token = rt.block_on(tokens.gpu_of(token_id)).with_context(reading)?;
    let scores_address = rt.block_on(tokens.scores()).with_context(reading)?;
    let scores = Scores::new(&rpc, scores_address, None)?;
    let (origin, registry) = rt.block_on(scores.log()).with_context(reading)?;
    Ok(TokenCheck {
        token_contract: address.to_string(),
        scores: scores_address.to_string(),
        registry: registry.to_string(),
        origin,
        token,
        compared: false,
        newer_in_log: None,
    })
}

/// Compares the chain's state of the token's GPU with the log's record at the entry it names:
/// taken from the verified bundle, else read from the log's tiles and proven against the
/// verified checkpoint. The problems found (the bundle must be of the token's GPU and log).
pub fn compare_token<S: TileSource>(
    check: &mut TokenCheck,
    bundle: &Bundle,
    tiles: Option<S>,
) -> Result<Vec<Problem>> {
    let chain = &check.token.chain;
    let index = chain.leaf_index;
    let checkpoint = &bundle.checkpoint.checkpoint;
    let differs = |why: String| Problem::TokenStateDiffers {
        token_id: check.token.token_id.clone(),
        gpu_uuid: chain.state.gpu_uuid.to_string(),
        leaf_index: index,
        why,
    };
    if checkpoint.origin != check.origin {
        return Ok(vec![differs(format!(
            "its scores contract proves states of the log {:?}, the bundle is of {:?}",
            check.origin, checkpoint.origin
        ))]);
    }
    let newest = bundle
        .records
        .iter()
        .filter_map(|r| Entry::parse(&r.entry).ok().map(|e| (r.index, e)))
        .filter(|(_, e)| e.kind == pog_signed::RecordKind::GpuState)
        .map(|(i, _)| i)
        .max();
    check.newer_in_log = newest.filter(|&n| n > index);
    if index >= checkpoint.size {
        // Proven in a larger tree than the one verified: nothing to compare it with here.
        return Ok(vec![]);
    }
    let bytes = match bundle.records.iter().find(|r| r.index == index) {
        Some(r) => r.entry.clone(),
        None => match tiles {
            Some(tiles) => {
                let mut tree = TiledTree::new(tiles, checkpoint.size);
                let bytes = tree
                    .entry(index)
                    .context("reading the entry from the log's tiles")?;
                let proof = tree
                    .inclusion_proof(index)
                    .context("reading its inclusion proof from the log's tiles")?;
                let leaf = pog_merkle::leaf_hash(&bytes);
                if !pog_merkle::verify_inclusion(
                    &leaf,
                    index,
                    checkpoint.size,
                    &proof,
                    &checkpoint.root,
                ) {
                    return Ok(vec![differs(
                        "the log's tiles do not prove that entry in the verified checkpoint".into(),
                    )]);
                }
                bytes
            }
            None => return Ok(vec![]),
        },
    };
    check.compared = true;
    let entry = match Entry::parse(&bytes) {
        Ok(e) => e,
        Err(e) => {
            return Ok(vec![differs(format!(
                "the log's entry does not parse: {e}"
            ))])
        }
    };
    if entry.gpu_uuid != chain.state.gpu_uuid.as_str() {
        return Ok(vec![differs(format!(
            "the log's entry is of GPU {}",
            entry.gpu_uuid
        ))]);
    }
    let logged = match GpuState::read(entry.kind.wire_kind(), &entry.body) {
        Ok(s) => s,
        Err(e) => {
            return Ok(vec![differs(format!(
                "the log's entry is no gpu-state record: {e}"
            ))])
        }
    };
    if logged != chain.state {
        return Ok(vec![differs(format!(
            "the log holds {}, the chain {}",
            serde_json::to_string(&logged)?,
            serde_json::to_string(&chain.state)?
        ))]);
    }
    Ok(vec![])
}

#[cfg(test)]
mod tests {
    use super::*;
    use pog_anchor::scores::ChainState;
    use pog_ledger::note::{NoteSigner, ALG_ED25519};
    use pog_ledger::serve::{write_static, DirSource};
    use pog_signed::{EvmAddress, GpuUuid, Identity, RecordKind};

    fn state(uuid: &str, score_ppm: u64) -> GpuState {
        GpuState {
            version: pog_records::state::STATE_VERSION,
            gpu_uuid: GpuUuid::new(uuid).unwrap(),
            model: "H200 SXM".into(),
            proves_model: true,
            proves_memory: true,
            score_ppm,
            price_micro_usd: 4_380_000,
            owner: EvmAddress([0x42; 20]),
            recorded_at_ms: 1_000,
        }
    }

    /// A fetched history carries no records: the chain's state is compared with the entry
    /// read from the log's tiles, proven against the verified checkpoint.
    #[test]
    fn the_chain_state_is_compared_with_the_entry_read_from_the_logs_tiles() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(&dir.path().join("ledger")).unwrap();
        let log = Identity::from_seed([3; 32]);
        let seal = |kind: RecordKind, body: String| {
            Entry::from_envelope(&log.seal_body(kind.wire_kind(), body)).unwrap()
        };
        let honest = state("GPU-a", 987_000);
        ledger
            .append(vec![
                seal(
                    RecordKind::RoundMissed,
                    r#"{"version":1,"gpu_uuid":"GPU-b"}"#.into(),
                ),
                seal(
                    RecordKind::GpuState,
                    serde_json::to_string(&honest).unwrap(),
                ),
            ])
            .unwrap();
        let signer = NoteSigner::new("pog.validator/test", ALG_ED25519, [7; 32]).unwrap();
        let checkpoint = ledger.log().checkpoint(&signer).unwrap();
        let tiles = dir.path().join("tiles");
        write_static(ledger.log(), &tiles).unwrap();
        let bundle = Bundle {
            gpu_uuid: "GPU-a".into(),
            checkpoint: checkpoint.clone(),
            records: Vec::new(),
            consistency: None,
            log: None,
            next_after: None,
        };
        let check = |chain: GpuState, leaf_index: u64, origin: &str, tiles: bool| {
            let mut c = TokenCheck {
                token_contract: "0xtoken".into(),
                scores: "0xscores".into(),
                registry: "0xregistry".into(),
                origin: origin.into(),
                token: TokenGpu {
                    token_id: "1".into(),
                    holder: "0x42".into(),
                    chain: ChainState {
                        state: chain,
                        leaf_index,
                        anchored_size: 2,
                    },
                },
                compared: false,
                newer_in_log: None,
            };
            let source = tiles.then(|| DirSource(dir.path().join("tiles")));
            let problems = compare_token(&mut c, &bundle, source).unwrap();
            (c.compared, problems)
        };
        let origin = checkpoint.checkpoint.origin.as_str();
        assert_eq!(check(honest.clone(), 1, origin, true), (true, vec![]));
        // A state the log does not hold, another GPU's entry, another log: named.
        let differs = |(compared, problems): (bool, Vec<Problem>), why: &str| {
            assert!(compared || why.contains("log"), "{problems:?}");
            assert!(
                matches!(&problems[..], [Problem::TokenStateDiffers { why: w, .. }] if w.contains(why)),
                "{why}: {problems:?}"
            );
        };
        differs(
            check(state("GPU-a", 1_000_000), 1, origin, true),
            "the log holds",
        );
        differs(check(honest.clone(), 0, origin, true), "is of GPU GPU-b");
        differs(
            check(honest.clone(), 1, "pog.validator/other", true),
            "proves states of the log",
        );
        // Without tiles, or beyond the verified tree: not compared, and no verdict made up.
        assert_eq!(check(honest.clone(), 1, origin, false), (false, vec![]));
        assert_eq!(check(honest, 5, origin, true), (false, vec![]));
    }
}
