//! `pog ledger` (the validator's transparency log, `pog-ledger`), `pog verify` (a holder checks
//! one GPU's history offline from a proof bundle) and `pog witness cosign` (a witness checks a
//! new checkpoint's consistency with the last it cosigned, and cosigns it).
//!
//! - `pog ledger append FILE…`: appends signed records (envelopes as the validator signs them)
//!   to the ledger, durably.
//! - `pog ledger checkpoint`: signs a checkpoint of the ledger with the validator's key.
//! - `pog ledger prove --inclusion INDEX | --consistency OLD [--size N]`: a proof, in hex.
//! - `pog ledger export --gpu UUID [--since SIZE] [-o FILE]`: one GPU's bundle.
//! - `pog ledger vkey`: the log's verifier key, for holders and witnesses.
//! - `pog ledger deploy-registry --rpc URL --key-file FILE` and `pog ledger anchor --rpc URL
//!   --contract ADDR --key-file FILE`: the chain anchor (`anchor`).
//! - `pog ledger monitor URL --log-key VKEY [--once]`: follows a log and alerts (`monitor`).
//! - `pog verify BUNDLE --log-key VKEY [--witness VKEY…] [--quorum N] [--since CHECKPOINT]
//!   [--chain RPC_URL --contract ADDR]`.
//! - `pog witness cosign REQUEST --log-key VKEY`: a tlog-witness add-checkpoint request.
//!
//! Exit status: 0 when everything verified, 1 when `pog verify` found a problem or a witness
//! refused, 2 when an input could not be read.

mod anchor;
mod fetch;
mod monitor;
mod scores;

use crate::cli::ledger::{
    CosignArgs, ExportArgs, LedgerAction, LedgerArgs, ProveLedgerArgs, ServeArgs, VerifyArgs,
    WitnessAction, WitnessArgs,
};
use crate::cli::Global;
use crate::host::data_dir;
use crate::output::{print_json, table, verdict_line, Outcome, Verdict};
use anyhow::{anyhow, bail, Context, Result};
use pog_anchor::service::load_anchored;
use pog_ledger::bundle::{
    check_tail, compare_with_earlier, verify_bundle, Bundle, LogKeys, WitnessPolicy,
};
use pog_ledger::checkpoint::SignedCheckpoint;
use pog_ledger::entry::Entry;
use pog_ledger::note::{NoteSigner, Verifier, ALG_COSIGNATURE_V1, ALG_ED25519};
use pog_ledger::serve::DirSource;
use pog_ledger::store::Ledger;
use pog_ledger::tiles::{TileSource, TiledTree};
use pog_ledger::witness_service::{CosignError, WitnessService, WitnessState};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The validator's key as the log's note signer.
fn log_signer(global: &Global, args: &LedgerArgs) -> Result<NoteSigner> {
    let path = data_dir(global)?.join("validator.key");
    let identity = pog_net::keys::load_or_create(&path)
        .with_context(|| format!("the validator key {}", path.display()))?;
    pog_validator::ledger::log_signer(&identity, args.origin.as_deref())
        .map_err(|e| anyhow!("--origin: {e}"))
}

fn ledger_dir(global: &Global, args: &LedgerArgs) -> Result<PathBuf> {
    Ok(match &args.ledger_dir {
        Some(d) => d.clone(),
        None => data_dir(global)?.join("ledger"),
    })
}

/// The ledger, to append to or sign checkpoints of (one writer at a time: the validator, or
/// this command).
fn open_ledger(global: &Global, args: &LedgerArgs) -> Result<Ledger> {
    let dir = ledger_dir(global, args)?;
    Ledger::open(&dir).with_context(|| format!("opening the ledger in {}", dir.display()))
}

/// The ledger, to read (beside a validator that holds it open for writing).
fn read_ledger(global: &Global, args: &LedgerArgs) -> Result<Ledger> {
    let dir = ledger_dir(global, args)?;
    Ledger::open_reader(&dir).with_context(|| format!("reading the ledger in {}", dir.display()))
}

/// A vkey given on the command line, or the file holding it.
fn vkey(text: &str, what: &str) -> Result<Verifier> {
    match Verifier::parse(text.trim()) {
        Ok(v) => Ok(v),
        Err(e) if Path::new(text).is_file() => {
            let contents = std::fs::read_to_string(text)
                .with_context(|| format!("reading the {what} from {text}"))?;
            Verifier::parse(contents.trim())
                .map_err(|e2| anyhow!("the {what} in {text} is not a verifier key: {e2} ({e})"))
        }
        Err(e) => bail!("the {what} {text:?} is not a verifier key: {e}"),
    }
}

/// Envelopes in a file: one, an array, or a records page (`{"records": [{"envelope": …}]}`).
fn envelopes(path: &Path) -> Result<Vec<pog_signed::Envelope>> {
    let text = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let value: serde_json::Value =
        serde_json::from_slice(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    let items: Vec<serde_json::Value> = match value {
        serde_json::Value::Array(items) => items,
        serde_json::Value::Object(ref o) if o.contains_key("records") => o["records"]
            .as_array()
            .map(|rs| rs.iter().map(|r| r["envelope"].clone()).collect())
            .ok_or_else(|| anyhow!("{}: \"records\" is not a list", path.display()))?,
        one => vec![one],
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            serde_json::from_value(v)
                .with_context(|| format!("{}: item {i} is not a signed envelope", path.display()))
        })
        .collect()
}

/// `pog ledger …`: one action on the validator's transparency log.
pub fn ledger_run(global: &Global, args: &LedgerArgs) -> Result<Outcome> {
    match &args.action {
        LedgerAction::Append { files } => append(global, args, files),
        LedgerAction::Checkpoint => checkpoint(global, args),
        LedgerAction::Prove(p) => prove(global, args, p),
        LedgerAction::Export(e) => export(global, args, e),
        LedgerAction::WitnessRequest { old } => witness_request(global, args, *old),
        LedgerAction::AddCosignature { lines } => add_cosignature(global, args, lines),
        LedgerAction::Publish { witnesses } => publish(global, args, witnesses),
        LedgerAction::Anchor(a) => anchor::anchor_command(global, &ledger_dir(global, args)?, a),
        LedgerAction::DeployRegistry(d) => anchor::deploy_command(global, d),
        LedgerAction::DeployScores(d) => {
            scores::deploy_scores_command(global, &log_origin(global, args)?, d)
        }
        LedgerAction::RotatePublisher(r) => anchor::owner_command(
            global,
            &log_origin(global, args)?,
            &r.sender,
            &r.contract,
            Some((&r.publisher, r.void_from)),
            None,
        ),
        LedgerAction::SetOwner(o) => anchor::owner_command(
            global,
            &log_origin(global, args)?,
            &o.sender,
            &o.contract,
            None,
            Some(&o.owner),
        ),
        LedgerAction::DeployToken(d) => scores::deploy_token_command(global, d),
        LedgerAction::PublishScores(p) => scores::publish_command(
            global,
            read_ledger(global, args)?,
            &ledger_dir(global, args)?,
            p,
        ),
        LedgerAction::Mint(m) => scores::mint_command(global, m),
        LedgerAction::Monitor(m) => monitor::monitor_command(global, m),
        LedgerAction::Mirror { dir } => {
            let ledger = read_ledger(global, args)?;
            let stats = pog_ledger::serve::write_static(ledger.log(), dir)?;
            let summary = format!(
                "mirrored tree size {} to {}: {} file(s) written, {} full tile(s) kept",
                stats.size,
                dir.display(),
                stats.written,
                stats.kept
            );
            if global.json {
                print_json("ledger.mirror", Verdict::Pass, &summary, false, &stats)?;
            } else {
                verdict_line(Verdict::Pass, &summary, false);
            }
            Ok(Outcome(Verdict::Pass))
        }
        LedgerAction::Vkey => {
            let signer = log_signer(global, args)?;
            let vkey = signer.verifier().to_vkey();
            if global.json {
                #[derive(Serialize)]
                struct Report<'a> {
                    vkey: &'a str,
                    origin: &'a str,
                }
                let origin = signer.verifier().name();
                print_json(
                    "ledger.vkey",
                    Verdict::Pass,
                    &vkey,
                    false,
                    &Report {
                        vkey: &vkey,
                        origin,
                    },
                )?;
            } else {
                println!("{vkey}");
            }
            Ok(Outcome(Verdict::Pass))
        }
    }
}

/// The log's origin: --origin, or the ledger's checkpoint's (no key is read or made).
fn log_origin(global: &Global, args: &LedgerArgs) -> Result<String> {
    match &args.origin {
        Some(origin) => Ok(origin.clone()),
        None => Ok(stored_checkpoint(&read_ledger(global, args)?)
            .context("the log's origin (give --origin, or a ledger with a checkpoint)")?
            .checkpoint
            .origin),
    }
}

/// The ledger's stored latest checkpoint.
fn stored_checkpoint(ledger: &Ledger) -> Result<SignedCheckpoint> {
    Ok(pog_validator::ledger::stored_checkpoint(ledger)?)
}

/// The add-checkpoint request body for the ledger's latest checkpoint, from size `old`.
fn request_body(ledger: &Ledger, old: u64) -> Result<(Vec<u8>, u64)> {
    Ok(pog_validator::ledger::request_body(ledger, old)?)
}

fn witness_request(global: &Global, args: &LedgerArgs, old: u64) -> Result<Outcome> {
    let ledger = read_ledger(global, args)?;
    let (body, size) = request_body(&ledger, old)?;
    let body = String::from_utf8(body).expect("a request is text");
    if global.json {
        #[derive(Serialize)]
        struct Report {
            request: String,
        }
        let summary = format!("add-checkpoint request from size {old} to {size}");
        print_json(
            "ledger.witness_request",
            Verdict::Pass,
            &summary,
            false,
            &Report { request: body },
        )?;
    } else {
        print!("{body}");
    }
    Ok(Outcome(Verdict::Pass))
}

fn add_cosignature(global: &Global, args: &LedgerArgs, lines: &[String]) -> Result<Outcome> {
    let ledger = open_ledger(global, args)?;
    let checkpoint = stored_checkpoint(&ledger)?;
    let mut text = checkpoint.to_text();
    for line in lines {
        let line = line.trim_end_matches('\n');
        text.push_str(line);
        text.push('\n');
    }
    // Each line must parse as a signature line of the note (its key is checked by holders).
    let with = SignedCheckpoint::parse(text.as_bytes())
        .map_err(|e| anyhow!("a cosignature line is malformed: {e}"))?;
    ledger.log().store_checkpoint(&with.to_text())?;
    let summary = format!(
        "{} signature line(s) on the checkpoint at size {}",
        with.note.signatures().len(),
        with.checkpoint.size
    );
    if global.json {
        #[derive(Serialize)]
        struct Report {
            checkpoint: String,
        }
        print_json(
            "ledger.add_cosignature",
            Verdict::Pass,
            &summary,
            false,
            &Report {
                checkpoint: with.to_text(),
            },
        )?;
    } else {
        verdict_line(Verdict::Pass, &summary, false);
    }
    Ok(Outcome(Verdict::Pass))
}

#[derive(Serialize)]
struct Appended {
    index: u64,
    kind: pog_signed::RecordKind,
    gpu_uuid: String,
    gpu_seq: u64,
}

fn append(global: &Global, args: &LedgerArgs, files: &[PathBuf]) -> Result<Outcome> {
    let mut records = Vec::new();
    for path in files {
        for (i, env) in envelopes(path)?.into_iter().enumerate() {
            records.push(
                Entry::from_envelope(&env)
                    .with_context(|| format!("{}: record {i} refused", path.display()))?,
            );
        }
    }
    let ledger = open_ledger(global, args)?;
    let indexes = ledger.append(records)?;
    let mut appended = Vec::new();
    for index in indexes {
        let entry = Entry::parse(&ledger.log().entry(index)?)?;
        appended.push(Appended {
            index,
            kind: entry.kind,
            gpu_uuid: entry.gpu_uuid,
            gpu_seq: entry.gpu_seq,
        });
    }
    let size = ledger.log().size();
    let summary = format!(
        "{} record(s) appended; the ledger holds {size}",
        appended.len()
    );
    if global.json {
        #[derive(Serialize)]
        struct Report {
            appended: Vec<Appended>,
            size: u64,
        }
        print_json(
            "ledger.append",
            Verdict::Pass,
            &summary,
            false,
            &Report { appended, size },
        )?;
    } else {
        let mut t = table(["index", "kind", "GPU", "GPU record #"]);
        for a in &appended {
            t.add_row(vec![
                a.index.to_string(),
                format!("{:?}", a.kind),
                a.gpu_uuid.clone(),
                a.gpu_seq.to_string(),
            ]);
        }
        println!("{t}");
        verdict_line(Verdict::Pass, &summary, false);
    }
    Ok(Outcome(Verdict::Pass))
}

fn checkpoint(global: &Global, args: &LedgerArgs) -> Result<Outcome> {
    let signer = log_signer(global, args)?;
    let ledger = open_ledger(global, args)?;
    let signed = ledger.log().checkpoint(&signer)?;
    let c = &signed.checkpoint;
    let summary = format!("checkpoint of {} at size {}", c.origin, c.size);
    if global.json {
        #[derive(Serialize)]
        struct Report {
            origin: String,
            size: u64,
            root: String,
            vkey: String,
            checkpoint: String,
        }
        let report = Report {
            origin: c.origin.clone(),
            size: c.size,
            root: hex::encode(c.root),
            vkey: signer.verifier().to_vkey(),
            checkpoint: signed.to_text(),
        };
        print_json("ledger.checkpoint", Verdict::Pass, &summary, false, &report)?;
    } else {
        print!("{}", signed.to_text());
    }
    Ok(Outcome(Verdict::Pass))
}

fn prove(global: &Global, args: &LedgerArgs, p: &ProveLedgerArgs) -> Result<Outcome> {
    let ledger = read_ledger(global, args)?;
    let log = ledger.log();
    let size = p.size.unwrap_or(log.size());
    let root = log.root_at(size)?;
    #[derive(Serialize)]
    struct Report {
        kind: &'static str,
        index: Option<u64>,
        old_size: Option<u64>,
        old_root: Option<String>,
        size: u64,
        root: String,
        leaf_hash: Option<String>,
        proof: Vec<String>,
    }
    let report = match (p.inclusion, p.consistency) {
        (Some(index), _) => {
            if index >= size {
                bail!("index {index} is not below the tree size {size}");
            }
            Report {
                kind: "inclusion",
                index: Some(index),
                old_size: None,
                old_root: None,
                size,
                root: hex::encode(root),
                leaf_hash: Some(hex::encode(pog_merkle::leaf_hash(&log.entry(index)?))),
                proof: log
                    .inclusion_proof(index, size)?
                    .iter()
                    .map(hex::encode)
                    .collect(),
            }
        }
        (None, Some(old)) => {
            if old > size {
                bail!("the older size {old} exceeds the tree size {size}");
            }
            Report {
                kind: "consistency",
                index: None,
                old_size: Some(old),
                old_root: Some(hex::encode(log.root_at(old)?)),
                size,
                root: hex::encode(root),
                leaf_hash: None,
                proof: log
                    .consistency_proof(old, size)?
                    .iter()
                    .map(hex::encode)
                    .collect(),
            }
        }
        (None, None) => bail!("give --inclusion INDEX or --consistency OLD_SIZE"),
    };
    let summary = format!(
        "{} proof of {} hash(es) at tree size {size}",
        report.kind,
        report.proof.len()
    );
    if global.json {
        print_json("ledger.prove", Verdict::Pass, &summary, false, &report)?;
    } else {
        match (report.index, report.old_size) {
            (Some(i), _) => println!(
                "entry {i}, leaf hash {}",
                report.leaf_hash.as_deref().unwrap_or("")
            ),
            (_, Some(o)) => println!(
                "size {o}, root {}",
                report.old_root.as_deref().unwrap_or("")
            ),
            _ => {}
        }
        println!("size {size}, root {}", report.root);
        for h in &report.proof {
            println!("  {h}");
        }
        verdict_line(Verdict::Pass, &summary, false);
    }
    Ok(Outcome(Verdict::Pass))
}

fn export(global: &Global, args: &LedgerArgs, e: &ExportArgs) -> Result<Outcome> {
    // The latest published checkpoint, with whatever cosignatures it gathered, read before the
    // ledger is opened: the ledger then holds at least its entries.
    let dir = ledger_dir(global, args)?;
    if e.anchored {
        let Some(anchored) = load_anchored(&dir)? else {
            bail!(
                "the ledger in {} keeps no anchored checkpoint: run `pog ledger anchor` (a validator with --anchor-rpc anchors on its own)",
                dir.display()
            );
        };
        return export_at(global, args, e, anchored);
    }
    let checkpoint = pog_anchor::service::stored_checkpoint(&dir)?;
    export_at(global, args, e, checkpoint)
}

/// Exports the bundle proved against `checkpoint` (read before the ledger is opened).
fn export_at(
    global: &Global,
    args: &LedgerArgs,
    e: &ExportArgs,
    checkpoint: SignedCheckpoint,
) -> Result<Outcome> {
    let ledger = read_ledger(global, args)?;
    if let Some(since) = e.since {
        if since > checkpoint.checkpoint.size {
            bail!(
                "--since {since} exceeds the checkpoint's size {}",
                checkpoint.checkpoint.size
            );
        }
    }
    let mut bundle = Bundle::export(&ledger, &e.gpu, &checkpoint, e.since)?;
    if let Some(url) = &e.log_url {
        let url =
            pog_net::endpoint::validate(url, true).map_err(|err| anyhow!("--log-url: {err}"))?;
        bundle.log = Some(format!("{url}/"));
    }
    if bundle.records.is_empty() {
        bail!("the ledger holds no record of GPU {}", e.gpu);
    }
    let json = bundle.to_json();
    let summary = format!(
        "{} record(s) of {} with proofs at tree size {}",
        bundle.records.len(),
        e.gpu,
        checkpoint.checkpoint.size
    );
    match &e.output {
        Some(path) => {
            std::fs::write(path, &json).with_context(|| format!("writing {}", path.display()))?;
            if global.json {
                #[derive(Serialize)]
                struct Report<'a> {
                    gpu_uuid: &'a str,
                    records: usize,
                    size: u64,
                    file: String,
                }
                let report = Report {
                    gpu_uuid: &e.gpu,
                    records: bundle.records.len(),
                    size: checkpoint.checkpoint.size,
                    file: path.display().to_string(),
                };
                print_json("ledger.export", Verdict::Pass, &summary, false, &report)?;
            } else {
                verdict_line(
                    Verdict::Pass,
                    &format!("{summary}, written to {}", path.display()),
                    false,
                );
            }
        }
        None => println!("{json}"),
    }
    Ok(Outcome(Verdict::Pass))
}

/// Reads and verifies the bundle file at `path`, against `--since` or `--since-bundle` when
/// given.
fn verify_file(
    path: &Path,
    args: &VerifyArgs,
    log_key: LogKeys<'_>,
    policy: &WitnessPolicy,
) -> Result<(Bundle, pog_ledger::bundle::BundleReport)> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let bundle = Bundle::parse(&bytes).with_context(|| format!("in {}", path.display()))?;
    let since = match &args.since {
        Some(path) => {
            let text =
                std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            Some(
                SignedCheckpoint::parse(&text)
                    .with_context(|| format!("the checkpoint in {}", path.display()))?,
            )
        }
        None => None,
    };
    let earlier = match &args.since_bundle {
        Some(path) => {
            let bytes =
                std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            Some(Bundle::parse(&bytes).with_context(|| format!("in {}", path.display()))?)
        }
        None => None,
    };
    let since = since.or_else(|| earlier.as_ref().map(|e| e.checkpoint.clone()));
    let mut report = verify_bundle(&bundle, log_key, policy, since.as_ref());
    if let Some(earlier) = &earlier {
        report
            .problems
            .extend(compare_with_earlier(earlier, &bundle));
    }
    Ok((bundle, report))
}

/// The `--validator-key`s given: a fleet's validators, whose records its log carries beside
/// the log key's own (`pog verify`, `pog ledger monitor`).
pub(crate) fn validator_keys(keys: &[String]) -> Result<Vec<pog_signed::PublicKey>> {
    keys.iter()
        .map(|k| {
            pog_signed::PublicKey::try_from(k.clone())
                .map_err(|e| anyhow!("--validator-key {k:?}: {e}"))
        })
        .collect()
}

/// `pog verify`: one GPU's history checked from its bundle (a file, or fetched from a
/// validator), against the log's key, the trusted witnesses and, when asked, an earlier
/// bundle, the log's tiles and the chain.
pub fn verify_run(global: &Global, args: &VerifyArgs) -> Result<Outcome> {
    let log_key = vkey(&args.log_key, "log key")?;
    let validators = validator_keys(&args.validator_keys)?;
    let log_keys = LogKeys {
        log: &log_key,
        validators: &validators,
    };
    let keys = args
        .witnesses
        .iter()
        .map(|w| vkey(w, "witness key"))
        .collect::<Result<Vec<_>>>()?;
    if let Some(k) = keys.iter().find(|k| k.alg() != ALG_COSIGNATURE_V1) {
        bail!(
            "witness key {} is not a cosignature key (type 0x04)",
            k.name()
        );
    }
    let quorum = args.quorum.unwrap_or(keys.len());
    if quorum > keys.len() {
        bail!(
            "--quorum {quorum} exceeds the {} witness key(s) given",
            keys.len()
        );
    }
    let policy = WitnessPolicy { keys, quorum };
    // A token: its GPU is the one verified, and its scores contract names the registry.
    let mut token = match (&args.token, &args.token_contract, &args.chain) {
        (Some(id), Some(contract), Some(rpc)) => Some(scores::read_token(rpc, contract, id)?),
        _ => None,
    };
    let registry = args
        .contract
        .clone()
        .or_else(|| token.as_ref().map(|t| t.registry.clone()));
    if args.chain.is_some() && registry.is_none() {
        bail!("--chain needs --contract (the CheckpointRegistry's address) or --token");
    }
    let gpu = token
        .as_ref()
        .map(|t| t.token.chain.state.gpu_uuid.to_string())
        .or_else(|| args.gpu.clone());
    // Fetching from the validator, the newest anchor is read first: the log only grows, so
    // every anchor made by then is of a tree at most as large as the checkpoint fetched after.
    let anchored_before = match (&args.validator, &args.chain, &registry) {
        (Some(_), Some(rpc), Some(contract)) => {
            anchor::latest_anchor(rpc, contract, log_key.name())?
        }
        _ => None,
    };
    let (bundle, mut report, fetched) = match (&args.bundle, &args.validator, &gpu) {
        (Some(path), _, _) => {
            let (bundle, report) = verify_file(path, args, log_keys, &policy)?;
            (bundle, report, None)
        }
        (None, Some(url), Some(uuid)) => {
            let (bundle, report, f) =
                fetch::fetch(global, url, uuid, log_keys, &policy, args.log_timeout)?;
            (bundle, report, Some(f))
        }
        _ => bail!("give a bundle file, or --validator URL and --gpu UUID (or --token)"),
    };
    if let Some(t) = &token {
        if bundle.gpu_uuid != t.token.chain.state.gpu_uuid.as_str() {
            bail!(
                "the bundle is of GPU {}, token {} is GPU {}'s",
                bundle.gpu_uuid,
                t.token.token_id,
                t.token.chain.state.gpu_uuid
            );
        }
    }
    // The log's tail: no record of the GPU after the bundle's last one (read from the tiles,
    // checked against the checkpoint, once its signature is known good).
    let signed = !report
        .problems
        .iter()
        .any(|p| matches!(p, pog_ledger::bundle::Problem::CheckpointSignature { .. }));
    // Where the tiles are read: --log, else the URL the bundle names (the exporter's word, so
    // read only at public addresses: a bundle must not point the holder's machine inside its
    // own network); fetched from a validator, that validator's /ledger/ (the holder's choice).
    let (source, named_by_bundle) = match (&args.log_tiles, &bundle.log) {
        (Some(given), _) => (Some(given.clone()), false),
        (None, Some(named)) => (Some(named.clone()), fetched.is_none()),
        (None, None) => (None, false),
    };
    let known = fetched.as_ref().and_then(|f| f.known);
    let mut refused_log = None;
    if let (Some(url), true) = (&source, named_by_bundle) {
        if let Err(err) = pog_net::endpoint::validate(url, false) {
            refused_log = Some(format!("the bundle's log URL is refused: {err}"));
        }
    }
    let tiles_read = source.is_some() && signed && refused_log.is_none();
    let mut tiles: Option<Box<dyn TileSource>> = match (&source, tiles_read) {
        (Some(source), true) => Some(
            if source.starts_with("http://") || source.starts_with("https://") {
                Box::new(pog_validator::ledger::HttpTiles::new(
                    source,
                    args.log_timeout,
                    named_by_bundle,
                )?)
            } else if named_by_bundle {
                bail!("the bundle's log {source:?} is not an http(s) URL")
            } else {
                Box::new(DirSource(PathBuf::from(source)))
            },
        ),
        _ => None,
    };
    if let (Some(source), Some(tiles)) = (&source, tiles.as_mut()) {
        let tail = check_tail(&bundle, known, tiles.as_mut());
        report
            .problems
            .extend(tail.with_context(|| format!("reading the log's tiles from {source}"))?);
    }
    // The chain anchor: the registry must hold the checkpoint's root at its size, or an
    // earlier root the checkpoint's tree extends (a consistency proof from that size: the
    // bundle's, or one computed from the log's tiles).
    let anchor = match (&args.chain, &registry) {
        (Some(rpc), Some(contract)) => {
            let checkpoint = &bundle.checkpoint.checkpoint;
            let consistency_from = |old: u64| -> Result<Option<Vec<pog_merkle::Hash>>> {
                if let Some((_, proof)) = bundle.consistency.as_ref().filter(|(f, _)| *f == old) {
                    return Ok(Some(proof.clone()));
                }
                match tiles.as_mut() {
                    Some(tiles) => Ok(Some(
                        TiledTree::new(tiles.as_mut(), checkpoint.size)
                            .consistency_proof(old)
                            .context("reading a consistency proof from the log's tiles")?,
                    )),
                    None => Ok(None),
                }
            };
            let (check, problem) = anchor::check_chain(
                rpc,
                contract,
                args.publisher.as_deref(),
                checkpoint,
                consistency_from,
            )?;
            report.problems.extend(problem);
            // Fetched from the validator, the checkpoint is at least as new as every anchor
            // read before the fetch: an anchor beyond it is one the log never had (or the log
            // went back).
            if let (Some(_), Some(latest)) = (&fetched, &anchored_before) {
                if latest.size > checkpoint.size {
                    report
                        .problems
                        .push(pog_ledger::bundle::Problem::AnchorBeyondLog {
                            registry: check.registry.clone(),
                            origin: checkpoint.origin.clone(),
                            anchored_size: latest.size,
                            size: checkpoint.size,
                        });
                }
            }
            Some(check)
        }
        _ => None,
    };
    // The token's state on chain against the log's record at the entry it names.
    if let Some(t) = token.as_mut() {
        let found = scores::compare_token(t, &bundle, tiles.as_mut().map(|s| s.as_mut()))
            .context("comparing the token's state on chain with the log")?;
        report.problems.extend(found);
    }
    let unchecked = unchecked(
        report.cosigned_by.len(),
        anchor.is_some(),
        tiles_read,
        refused_log,
    );
    let verdict = match (report.ok(), unchecked.is_empty(), args.accept_unwitnessed) {
        (false, _, _) => Verdict::Fail,
        (true, true, _) => Verdict::Pass,
        (true, false, true) => Verdict::Warn,
        (true, false, false) => Verdict::Fail,
    };
    // A history fetched from a validator is kept once it verified, so the next run checks
    // only what is new and notices a rollback or a fork in between.
    if let (Some(f), true) = (&fetched, report.ok()) {
        fetch::save(f, &bundle, &report, log_key.name())?;
    }
    let summary = if report.ok() {
        let fetched_from = fetched.as_ref().map_or(String::new(), |f| {
            format!(
                " ({} new, {} page(s) from {}; {} verified in earlier runs, kept in {})",
                report.records.len(),
                f.pages,
                args.validator.as_deref().unwrap_or_default(),
                f.before,
                f.state_path.display()
            )
        });
        let verified = format!(
            "{} record(s) of {} verified at tree size {}, cosigned by {} witness(es){}{fetched_from}",
            report.records.len() as u64 + fetched.as_ref().map_or(0, |f| f.before),
            report.gpu_uuid,
            report.size,
            report.cosigned_by.len(),
            anchor.as_ref().map_or(String::new(), |a| format!(
                ", anchored on chain (registry {})",
                a.registry
            ))
        );
        let missed = unchecked
            .iter()
            .map(|u| u.what)
            .collect::<Vec<_>>()
            .join("; ");
        match (unchecked.is_empty(), args.accept_unwitnessed) {
            (true, _) => verified,
            (false, true) => {
                format!("UNCHECKED (--accept-unwitnessed): {verified}, but not checked: {missed}")
            }
            (false, false) => format!(
                "not verified: {verified}, but could not check {missed} (give --witness keys with \
                 their quorum or --chain, and --log; or --accept-unwitnessed to accept it anyway)"
            ),
        }
    } else {
        format!(
            "{} problem(s): {}",
            report.problems.len(),
            report
                .problems
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join("; ")
        )
    };
    if global.json {
        #[derive(Serialize)]
        struct Report<'a> {
            #[serde(flatten)]
            bundle: &'a pog_ledger::bundle::BundleReport,
            /// What the chain's registry holds for the checkpoint (null without --chain).
            anchor: Option<&'a pog_anchor::AnchorCheck>,
            /// The token checked, its GPU's state on chain and whether it was compared with
            /// the log (null without --token).
            token: Option<&'a scores::TokenCheck>,
            /// The checks that could not run, each with what it would have caught.
            unchecked: &'a [Unchecked],
            /// The bundle passed although checks did not run (`--accept-unwitnessed`).
            accepted_unchecked: bool,
        }
        let json = Report {
            bundle: &report,
            anchor: anchor.as_ref(),
            token: token.as_ref(),
            unchecked: &unchecked,
            accepted_unchecked: args.accept_unwitnessed && !unchecked.is_empty() && report.ok(),
        };
        print_json("verify", verdict, &summary, false, &json)?;
    } else {
        println!(
            "log {} at size {}, root {}",
            report.origin, report.size, report.root
        );
        for (w, t) in &report.cosigned_by {
            println!("cosigned by {w} at {t}");
        }
        if let Some(a) = &anchor {
            println!("anchor: {}", anchor_line(a));
        }
        if let Some(t) = &token {
            println!("token: {}", scores::token_line(t));
        }
        let mut t = table(["#", "log index", "kind", "GPU record #", "signed by", "ok"]);
        for r in &report.records {
            t.add_row(vec![
                r.position.to_string(),
                r.index.to_string(),
                r.kind.map_or("?".into(), |k| format!("{k:?}")),
                r.gpu_seq.map_or("?".into(), |s| s.to_string()),
                r.signed_by.to_string(),
                if r.ok { "yes" } else { "NO" }.to_string(),
            ]);
        }
        println!("{t}");
        for p in &report.problems {
            println!("problem: {p}");
        }
        for u in &unchecked {
            println!("not checked: {} ({})", u.what, u.why);
        }
        verdict_line(verdict, &summary, false);
    }
    Ok(Outcome(verdict))
}

/// A check `pog verify` could not run, and what it would have caught.
#[derive(Debug, Clone, Serialize)]
struct Unchecked {
    /// The check, in a few words.
    what: &'static str,
    /// What goes unnoticed without it, and how to run it.
    why: String,
}

/// The checks a verification could not run: that the checkpoint is the one everybody sees
/// (a cosignature of at least one trusted witness, its quorum met, or the chain's anchor:
/// without either, a fork signed with the log's key verifies), and that no record of the GPU
/// came after the bundle's last (the log's tiles).
fn unchecked(
    cosigned: usize,
    anchored: bool,
    tiles_read: bool,
    refused_log: Option<String>,
) -> Vec<Unchecked> {
    let mut missed = Vec::new();
    if cosigned == 0 && !anchored {
        missed.push(Unchecked {
            what: "that the log did not fork",
            why: "no witness quorum and no chain anchor: a second history signed with the log's \
                  key verifies as well; give --witness keys (and --quorum) or --chain"
                .into(),
        });
    }
    if !tiles_read {
        missed.push(Unchecked {
            what: "that no newer record was left out",
            why: format!(
                "{}: a bundle with its newest records dropped verifies as well; give --log",
                refused_log.unwrap_or_else(|| "the log's tiles were not read".into())
            ),
        });
    }
    missed
}

/// The verify table's anchor line: what the registry holds at the checkpoint's size.
fn anchor_line(a: &pog_anchor::AnchorCheck) -> String {
    let latest = a
        .latest
        .map_or("none".to_string(), |l| format!("size {}", l.size));
    match (&a.anchor, &a.earlier) {
        (None, Some(earlier)) => format!(
            "{} at size {} on registry {} (publisher {}): no anchor at this size; the newest before it, size {} (root {}, block time {}), {} (latest anchored: {latest})",
            a.origin,
            a.size,
            a.registry,
            a.publisher.as_deref().unwrap_or("none"),
            earlier.size,
            hex::encode(earlier.root),
            earlier.time,
            if a.ok { "is extended by the checkpoint's tree" } else { "is NOT extended by the checkpoint's tree" },
        ),
        (Some(at), _) => format!(
            "{} at size {} on registry {} (publisher {}): root {} at block time {} ({}; latest anchored: {latest})",
            a.origin,
            a.size,
            a.registry,
            a.publisher.as_deref().unwrap_or("none"),
            hex::encode(at.root),
            at.time,
            if a.ok { "matches the checkpoint" } else { "DIFFERS from the checkpoint" },
        ),
        (None, None) => format!(
            "MISSING: registry {} holds no anchor of {} at size {} (latest anchored: {latest})",
            a.registry, a.origin, a.size
        ),
    }
}

fn witness_signer(global: &Global, name: &Option<String>) -> Result<NoteSigner> {
    let path = data_dir(global)?.join("witness.key");
    let identity = pog_net::keys::load_or_create(&path)
        .with_context(|| format!("the witness key {}", path.display()))?;
    let name = match name {
        Some(n) => n.clone(),
        None => format!("pog.witness/{}", &identity.public_key()[..16]),
    };
    NoteSigner::new(&name, ALG_COSIGNATURE_V1, identity.seed())
        .map_err(|e| anyhow!("--name {name:?}: {e}"))
}

/// `pog witness …`: print the witness's key, cosign one request, or serve the witness API.
pub fn witness_run(global: &Global, args: &WitnessArgs) -> Result<Outcome> {
    match &args.action {
        WitnessAction::Vkey { name } => {
            let vkey = witness_signer(global, name)?.verifier().to_vkey();
            if global.json {
                #[derive(Serialize)]
                struct Report<'a> {
                    vkey: &'a str,
                }
                print_json(
                    "witness.vkey",
                    Verdict::Pass,
                    &vkey,
                    false,
                    &Report { vkey: &vkey },
                )?;
            } else {
                println!("{vkey}");
            }
            Ok(Outcome(Verdict::Pass))
        }
        WitnessAction::Cosign(c) => cosign(global, c),
        WitnessAction::Serve(a) => serve_witness(global, a),
    }
}

fn cosign(global: &Global, args: &CosignArgs) -> Result<Outcome> {
    let log = vkey(&args.log_key, "log key")?;
    let body = if args.request.as_os_str() == "-" {
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut b).context("reading stdin")?;
        b
    } else {
        std::fs::read(&args.request)
            .with_context(|| format!("reading {}", args.request.display()))?
    };
    // The last checkpoint cosigned for this log, kept per log key: a cosignature is shown
    // only once kept, so a restarted witness never cosigns a fork of what it cosigned.
    let service = WitnessService::open(
        witness_signer(global, &args.name)?,
        vec![log.clone()],
        witness_state(global)?,
    )?;
    #[derive(Serialize)]
    struct Report {
        cosignature: Option<String>,
        refused: Option<String>,
        http_status: u16,
        size: Option<u64>,
    }
    let (verdict, report) = match service.cosign(&body, now_s()) {
        Ok(cosigned) => (
            Verdict::Pass,
            Report {
                cosignature: Some(cosigned.signature.to_line()),
                refused: None,
                http_status: 200,
                size: Some(cosigned.checkpoint.size),
            },
        ),
        Err(CosignError::Refused(refusal)) => (
            Verdict::Fail,
            Report {
                cosignature: None,
                refused: Some(refusal.to_string()),
                http_status: refusal.http_status(),
                size: None,
            },
        ),
        Err(e @ CosignError::State(_)) => return Err(e.into()),
    };
    let summary = match (&report.cosignature, &report.refused) {
        (Some(_), _) => format!(
            "cosigned {} at size {}",
            log.name(),
            report.size.unwrap_or(0)
        ),
        (_, Some(why)) => format!("refused ({}): {why}", report.http_status),
        _ => unreachable!("one of the two"),
    };
    if global.json {
        print_json("witness.cosign", verdict, &summary, false, &report)?;
    } else {
        if let Some(line) = &report.cosignature {
            print!("{line}");
        }
        verdict_line(verdict, &summary, false);
    }
    Ok(Outcome(verdict))
}

fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn publish(
    global: &Global,
    args: &LedgerArgs,
    targets: &[pog_validator::ledger::WitnessTarget],
) -> Result<Outcome> {
    pog_validator::ledger::WitnessTarget::check_distinct(targets)?;
    let ledger = std::sync::Arc::new(open_ledger(global, args)?);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let client = pog_validator::ledger::witness_client()?;
    let deadline = pog_validator::ledger::WITNESS_DEADLINE;
    // One-shot: no size remembered, each witness starts from 0 and follows its 409.
    let held = std::collections::HashMap::new();
    let stored = pog_validator::ledger::stored_checkpoint(&ledger)?;
    // One-shot too: each witness asked once, within the default budget.
    let budgets = std::sync::Arc::new(pog_validator::ledger::WitnessBudgets::new(
        pog_validator::ledger::WitnessBudget::default(),
    ));
    let published = rt.block_on(pog_validator::ledger::publish(
        &ledger,
        (&client, &budgets),
        (targets, &held),
        deadline,
        (stored, 0),
    ))?;
    let (with, answers) = (published.checkpoint, published.witnesses);
    let cosigned = answers.iter().filter(|a| a.cosigned).count();
    let verdict = if cosigned == answers.len() {
        Verdict::Pass
    } else {
        Verdict::Fail
    };
    let mut summary = format!(
        "{cosigned} of {} witness(es) cosigned the checkpoint at size {}",
        answers.len(),
        with.checkpoint.size
    );
    for a in answers.iter().filter(|a| !a.cosigned) {
        summary.push_str(&format!("; {} refused ({}): {}", a.url, a.status, a.answer));
    }
    if global.json {
        #[derive(Serialize)]
        struct Report {
            size: u64,
            witnesses: Vec<pog_validator::ledger::WitnessAnswer>,
            checkpoint: String,
        }
        let report = Report {
            size: with.checkpoint.size,
            witnesses: answers,
            checkpoint: with.to_text(),
        };
        print_json("ledger.publish", verdict, &summary, false, &report)?;
    } else {
        let mut t = table(["witness", "cosigned", "status", "answer"]);
        for a in &answers {
            t.add_row(vec![
                a.url.clone(),
                if a.cosigned { "yes" } else { "NO" }.into(),
                a.status.to_string(),
                a.answer.clone(),
            ]);
        }
        println!("{t}");
        verdict_line(verdict, &summary, false);
    }
    Ok(Outcome(verdict))
}

/// Where the witness keeps the last checkpoint it cosigned for each log.
fn witness_state(global: &Global) -> Result<WitnessState> {
    Ok(WitnessState::open(&data_dir(global)?.join("witness"))?)
}

/// A witness's answer as axum sends it: status, content type, and the cache and retry
/// headers when it has them.
fn witness_response(r: pog_ledger::serve::Response) -> axum::response::Response {
    use axum::http::{header, HeaderValue};
    use axum::response::IntoResponse;
    let mut response = (
        axum::http::StatusCode::from_u16(r.status)
            .unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR),
        [(header::CONTENT_TYPE, r.content_type)],
        r.body,
    )
        .into_response();
    let headers = response.headers_mut();
    if let Some(c) = r.cache_control {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(c));
    }
    if let Some(secs) = r.retry_after {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    response
}

fn serve_witness(global: &Global, args: &ServeArgs) -> Result<Outcome> {
    use axum::routing::{get, post};
    let logs = args
        .log_keys
        .iter()
        .map(|k| vkey(k, "log key"))
        .collect::<Result<Vec<_>>>()?;
    if let Some(k) = logs.iter().find(|k| k.alg() != ALG_ED25519) {
        bail!(
            "log key {} is not an Ed25519 note key (type 0x01)",
            k.name()
        );
    }
    let service = std::sync::Arc::new(
        WitnessService::open(
            witness_signer(global, &args.name)?,
            logs,
            witness_state(global)?,
        )?
        .with_budget(args.requests_per_log_minute),
    );
    let vkey = service.verifier().to_vkey();
    let rt = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let listener = rt
        .block_on(tokio::net::TcpListener::bind(&args.listen))
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let local = listener.local_addr().context("reading the bound address")?;
    let stop = {
        let _runtime = rt.enter();
        pog_net::serve::stop_signal().context("installing the signal handlers")?
    };
    let monitor = service.clone();
    let router = axum::Router::new()
        .route(
            "/add-checkpoint",
            post(move |body: axum::body::Bytes| {
                let service = service.clone();
                async move {
                    let r =
                        tokio::task::spawn_blocking(move || service.add_checkpoint(&body, now_s()))
                            .await
                            .unwrap_or_else(|_| pog_ledger::serve::Response {
                                status: 500,
                                content_type: "text/plain; charset=utf-8",
                                cache_control: None,
                                retry_after: None,
                                body: b"the witness failed\n".to_vec(),
                            });
                    witness_response(r)
                }
            }),
        )
        // The monitoring prefix is the submission prefix: GET <origin hash>/checkpoint.
        .route(
            "/{origin_hash}/checkpoint",
            get(
                move |axum::extract::Path(hash): axum::extract::Path<String>| {
                    let r = monitor.monitoring(&format!("{hash}/checkpoint"));
                    async move { witness_response(r) }
                },
            ),
        );
    {
        use std::io::Write;
        let mut out = std::io::stdout();
        let _ = writeln!(out, "witness {vkey} listening on {local}");
        let _ = out.flush();
    }
    rt.block_on(pog_net::serve::serve(
        listener,
        router,
        pog_net::serve::Limits::small_requests(),
        stop,
        std::time::Duration::from_secs(5),
    ))
    .context("serving")?;
    Ok(Outcome(Verdict::Pass))
}
