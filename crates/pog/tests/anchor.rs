//! The chain anchor through the binary, on a real local EVM node (anvil from npm, started by
//! `pog_anchor::testing`): `pog ledger deploy-registry`, `pog ledger anchor`, a running
//! `pog validator --anchor-rpc …` anchoring its checkpoints, and `pog verify --chain
//! --contract` on real exported bundles, with the tampering cases: the chain anchor
//! replaced (another registry anchoring another root for the size; an attacker re-anchoring the
//! origin, refused by the contract) and the anchor missing.

mod common;

use common::*;
use pog_anchor::testing::{dev_key_file, evm_tools, Anvil};
use pog_signed::Identity;
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

fn problems(report: &Value) -> Vec<String> {
    report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["problem"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn anchoring_and_verifying_against_the_chain_catch_a_replaced_or_missing_anchor() {
    let anvil = Anvil::start();
    let tmp = tempfile::tempdir().unwrap();
    let rpc = anvil.url.as_str();
    let publisher_key = dev_key_file(tmp.path(), "publisher.key", 0);
    let attacker_key = dev_key_file(tmp.path(), "attacker.key", 2);
    let data = validator_dir(tmp.path(), "validator");
    let validator = Identity::from_seed(VALIDATOR_SEED);
    let agent = Identity::from_seed([0x43; 32]);
    let registry = deploy_registry(&data, rpc, &publisher_key);

    // Records, a checkpoint, anchored (the origin registered on the way).
    let batch = tmp.path().join("batch1.json");
    write(
        &batch,
        &Value::Array(records(&validator, &agent, 0, 3)).to_string(),
    );
    pog_json(&data, &["ledger", "append", batch.to_str().unwrap()], 0);
    let cp = pog_json(&data, &["ledger", "checkpoint"], 0);
    let (origin, size) = (
        cp["origin"].as_str().unwrap().to_string(),
        cp["size"].as_u64().unwrap(),
    );
    let log_vkey = pog_json(&data, &["ledger", "vkey"], 0)["vkey"]
        .as_str()
        .unwrap()
        .to_string();
    let anchor_args = |key: &Path, contract: &str| -> Vec<String> {
        [
            "ledger",
            "anchor",
            "--rpc",
            rpc,
            "--contract",
            contract,
            "--key-file",
            key.to_str().unwrap(),
        ]
        .map(String::from)
        .to_vec()
    };
    let args = anchor_args(&publisher_key, &registry);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let anchored = pog_json(&data, &args, 0);
    let registration_gas = anchored["result"]["registered"]["gas_used"]
        .as_u64()
        .unwrap();
    let anchor_gas = anchored["result"]["anchored"]["gas_used"].as_u64().unwrap();
    eprintln!("registration {registration_gas} gas, anchor {anchor_gas} gas");
    assert!(
        registration_gas > 21_000 && anchor_gas > 21_000,
        "{anchored}"
    );
    assert_eq!(anchored["size"], size);
    // Again: the chain holds it already; nothing is sent.
    let again = pog_json(&data, &args, 0);
    assert!(again["result"]["anchored"].is_null(), "{again}");
    assert!(again["summary"].as_str().unwrap().contains("already"));
    // The table says the same.
    let table = pog(&data, &args);
    assert_eq!(table.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&table.stdout).contains("(not needed)"));

    // A bundle proved against the anchored checkpoint verifies against the chain.
    let bundle = tmp.path().join("bundle.json");
    let export = |file: &Path, anchored: bool| {
        let mut args = vec![
            "ledger",
            "export",
            "--gpu",
            GPU,
            "-o",
            file.to_str().unwrap(),
        ];
        if anchored {
            args.push("--anchored");
        }
        pog_json(&data, &args, 0)
    };
    export(&bundle, true);
    let holder = tmp.path().join("holder");
    let verify = |bundle: &Path, contract: &str, status: i32| {
        pog_json(
            &holder,
            &[
                "verify",
                bundle.to_str().unwrap(),
                "--log-key",
                &log_vkey,
                "--accept-unwitnessed",
                "--chain",
                rpc,
                "--contract",
                contract,
            ],
            status,
        )
    };
    let ok = verify(&bundle, &registry, 0);
    assert_eq!(ok["anchor"]["ok"], true, "{ok:#}");
    assert_eq!(ok["anchor"]["anchor"]["size"], size);
    assert_eq!(ok["anchor"]["anchor"]["root"], hex_root(&cp));
    assert!(ok["summary"]
        .as_str()
        .unwrap()
        .contains("anchored on chain"));
    let table = pog(
        &holder,
        &[
            "verify",
            bundle.to_str().unwrap(),
            "--log-key",
            &log_vkey,
            "--accept-unwitnessed",
            "--chain",
            rpc,
            "--contract",
            &registry,
        ],
    );
    let text = String::from_utf8_lossy(&table.stdout);
    assert_eq!(table.status.code(), Some(0), "{text}");
    assert!(
        text.contains("anchor: ") && text.contains("matches the checkpoint"),
        "{text}"
    );

    // Anchor missing: the log grew and its newest checkpoint was not anchored.
    let batch2 = tmp.path().join("batch2.json");
    write(
        &batch2,
        &Value::Array(records(&validator, &agent, 3, 1)).to_string(),
    );
    pog_json(&data, &["ledger", "append", batch2.to_str().unwrap()], 0);
    pog_json(&data, &["ledger", "checkpoint"], 0);
    let newer = tmp.path().join("newer.json");
    export(&newer, false);
    let report = verify(&newer, &registry, 1);
    assert_eq!(problems(&report), ["anchor_missing"], "{report:#}");
    let summary = report["summary"].as_str().unwrap();
    assert!(
        summary.contains("anchor missing")
            && summary.contains(&format!("latest anchored size is {size}")),
        "{summary}"
    );
    assert_eq!(report["anchor"]["ok"], false);
    assert!(report["anchor"]["anchor"].is_null());
    // The records themselves are fine: without --chain it passes.
    let plain = pog_json(
        &holder,
        &[
            "verify",
            newer.to_str().unwrap(),
            "--log-key",
            &log_vkey,
            "--accept-unwitnessed",
        ],
        0,
    );
    assert!(plain["anchor"].is_null());
    // Any bundle works with --chain: where its checkpoint's size is not anchored, the newest
    // anchor before it does, once the checkpoint's tree is shown to extend it: by the bundle's
    // consistency proof from that size ...
    let newer_since = tmp.path().join("newer-since.json");
    pog_json(
        &data,
        &[
            "ledger",
            "export",
            "--gpu",
            GPU,
            "--since",
            &size.to_string(),
            "-o",
            newer_since.to_str().unwrap(),
        ],
        0,
    );
    let extended = verify(&newer_since, &registry, 0);
    assert_eq!(extended["anchor"]["ok"], true, "{extended:#}");
    assert!(extended["anchor"]["anchor"].is_null());
    assert_eq!(extended["anchor"]["earlier"]["size"], size);
    // ... or by one read from the log's tiles (a mirror of the log here).
    let mirror = tmp.path().join("mirror");
    pog_json(&data, &["ledger", "mirror", mirror.to_str().unwrap()], 0);
    let from_tiles = pog_json(
        &holder,
        &[
            "verify",
            newer.to_str().unwrap(),
            "--log-key",
            &log_vkey,
            "--accept-unwitnessed",
            "--log",
            mirror.to_str().unwrap(),
            "--chain",
            rpc,
            "--contract",
            &registry,
        ],
        0,
    );
    assert_eq!(
        from_tiles["anchor"]["earlier"]["size"], size,
        "{from_tiles:#}"
    );

    // The chain anchor replaced (1): an attacker's own registry, where it registered the
    // origin and anchored another root at the bundle's size. Verifying against it fails,
    // naming the anchor and both roots.
    let attacker = tmp.path().join("attacker");
    let evil = deploy_registry(&attacker, rpc, &attacker_key);
    let forged_root = "ee".repeat(32);
    {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let url = pog_anchor::RpcUrl::parse(rpc).unwrap();
        let key = pog_anchor::PublisherKey::from_file(&attacker_key).unwrap();
        let r =
            pog_anchor::Registry::publisher(&url, pog_anchor::parse_address(&evil).unwrap(), &key)
                .unwrap();
        rt.block_on(async {
            r.register(&origin).await.unwrap();
            r.anchor(&origin, size, [0xee; 32]).await.unwrap();
        });
    }
    let report = verify(&bundle, &evil, 1);
    assert_eq!(problems(&report), ["anchor_mismatch"], "{report:#}");
    let summary = report["summary"].as_str().unwrap();
    assert!(
        summary.contains("the chain anchor differs")
            && summary.contains(&evil)
            && summary.contains(&forged_root)
            && summary.contains(&hex_root(&cp)),
        "{summary}"
    );
    assert_eq!(report["anchor"]["ok"], false);
    // The same forged root as the newest anchor before a newer checkpoint: its tree does not
    // extend it, and that is named.
    let report = verify(&newer_since, &evil, 1);
    assert_eq!(problems(&report), ["anchor_inconsistent"], "{report:#}");
    // A holder who names the validator's publisher catches the squatted registry before any
    // root is compared; on the real registry the same check passes.
    let publisher = pog_anchor::PublisherKey::from_file(&publisher_key)
        .unwrap()
        .address()
        .to_string();
    let with_publisher = |contract: &str, status: i32| {
        let args = [
            "verify",
            bundle.to_str().unwrap(),
            "--log-key",
            &log_vkey,
            "--accept-unwitnessed",
            "--chain",
            rpc,
            "--contract",
            contract,
            "--publisher",
            &publisher,
        ];
        pog_json(&holder, &args, status)
    };
    let report = with_publisher(&evil, 1);
    assert_eq!(problems(&report), ["anchor_publisher"], "{report:#}");
    let summary = report["summary"].as_str().unwrap();
    assert!(
        summary.contains("publisher differs") && summary.contains(&publisher),
        "{summary}"
    );
    assert_eq!(with_publisher(&registry, 0)["anchor"]["ok"], true);

    // The chain anchor replaced (2): on the real registry, an attacker cannot anchor the
    // origin (it is registered to the publisher), and the publisher's own client refuses to
    // anchor a fork of the same size; the anchor stays what it was.
    let fork = validator_dir(tmp.path(), "fork");
    let mut forged = records(&validator, &agent, 0, 3);
    forged.swap(1, 2);
    let forged_file = tmp.path().join("forged.json");
    write(&forged_file, &Value::Array(forged).to_string());
    pog_json(
        &fork,
        &["ledger", "append", forged_file.to_str().unwrap()],
        0,
    );
    let fork_cp = pog_json(&fork, &["ledger", "checkpoint"], 0);
    assert_eq!(fork_cp["size"], size);
    assert_ne!(fork_cp["root"], cp["root"]);
    let args = anchor_args(&attacker_key, &registry);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let refused = pog_json(&fork, &args, 1);
    let why = refused["refused"].as_str().unwrap();
    assert!(
        why.contains("registered") && why.contains("not to this key's address"),
        "{why}"
    );
    let args = anchor_args(&publisher_key, &registry);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let refused = pog_json(&fork, &args, 1);
    assert!(
        refused["refused"].as_str().unwrap().contains("fork"),
        "{refused}"
    );
    assert!(verify(&bundle, &registry, 0)["anchor"]["ok"] == true);

    // Bad input is an error (2) that names it; nothing panics.
    let with = |extra: &[&str]| {
        let mut args = vec!["verify", bundle.to_str().unwrap(), "--log-key", &log_vkey];
        args.extend_from_slice(extra);
        pog_json(&holder, &args, 2)["error"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let e = with(&["--chain", "ws://127.0.0.1:8546", "--contract", &registry]);
    assert!(e.contains("\"ws\" is not http or https"), "{e}");
    let e = with(&["--chain", rpc, "--contract", "0x1234"]);
    assert!(e.contains("is not a contract address"), "{e}");
    let no_code = "0x000000000000000000000000000000000000dEaD";
    let e = with(&["--chain", rpc, "--contract", no_code]);
    assert!(e.contains("no contract at"), "{e}");
    let closed = format!("http://127.0.0.1:{}", free_port());
    let e = with(&["--chain", &closed, "--contract", &registry]);
    assert!(e.contains("failed") && e.contains("127.0.0.1"), "{e}");
    let open_key = tmp.path().join("open.key");
    std::fs::copy(&publisher_key, &open_key).unwrap();
    std::fs::set_permissions(&open_key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let args = anchor_args(&open_key, &registry);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let e = pog_json(&data, &args, 2);
    assert!(e["error"].as_str().unwrap().contains("chmod 600"), "{e}");
    let e = pog_json(&data, &["ledger", "export", "--gpu", GPU, "--anchored"], 0);
    assert!(e.is_object());
    let empty = validator_dir(tmp.path(), "empty");
    let e = pog_json(&empty, &["ledger", "export", "--gpu", GPU, "--anchored"], 2);
    assert!(
        e["error"]
            .as_str()
            .unwrap()
            .contains("no anchored checkpoint"),
        "{e}"
    );
}

/// The checkpoint JSON's root (hex).
fn hex_root(cp: &Value) -> String {
    cp["root"].as_str().unwrap().to_string()
}

/// The address the agent of [`Anchoring`] names to hold its GPUs' tokens.
const TOKEN_OWNER: &str = "0x4242424242424242424242424242424242424242";

/// A running `pog validator` that anchors on a local anvil every `anchor_every` seconds, with
/// a simulated H200 agent registered (naming [`TOKEN_OWNER`] for its tokens): the chain, the
/// keys, the data dir and the processes.
struct Anchoring {
    anvil: Anvil,
    tmp: tempfile::TempDir,
    key: PathBuf,
    data: PathBuf,
    registry: String,
    log_vkey: String,
    origin: String,
    addr: String,
    net: Network,
}

impl Anchoring {
    fn start(anchor_every: &str) -> Anchoring {
        Anchoring::start_with(anchor_every, false).0
    }

    /// [`Anchoring::start`]; with `publish`, a GpuScores contract for the log deployed first
    /// and the validator publishing its GPUs' states to it after each anchoring (its address).
    fn start_with(anchor_every: &str, publish: bool) -> (Anchoring, Option<String>) {
        let anvil = Anvil::start();
        let tmp = tempfile::tempdir().unwrap();
        let key = dev_key_file(tmp.path(), "publisher.key", 0);
        let data = validator_dir(tmp.path(), "validator");
        let registry = deploy_registry(&data, &anvil.url, &key);
        let log_vkey = pog_json(&data, &["ledger", "vkey"], 0)["vkey"]
            .as_str()
            .unwrap()
            .to_string();
        let origin = log_vkey.split('+').next().unwrap().to_string();
        let scores = publish.then(|| {
            let tools = evm_tools();
            pog_json(
                &data,
                &[
                    "ledger",
                    "deploy-scores",
                    "--origin",
                    &origin,
                    "--rpc",
                    &anvil.url,
                    "--key-file",
                    key.to_str().unwrap(),
                    "--registry",
                    &registry,
                    "--bytecode",
                    tools.bin_of("GpuScores").to_str().unwrap(),
                ],
                0,
            )["address"]
                .as_str()
                .unwrap()
                .to_string()
        });
        let publishing: Vec<&str> = match &scores {
            Some(address) => vec!["--scores-contract", address],
            None => vec![],
        };
        let net = Network::in_dir(tmp.path())
            .flags(&["--challenge-every", "1", "--checkpoint-every", "0.5"])
            .flags(TEST_ROUNDS)
            .flags(&["--anchor-rpc", &anvil.url, "--anchor-contract", &registry])
            .flags(&["--anchor-key-file", key.to_str().unwrap()])
            .flags(&["--anchor-every", anchor_every])
            .flags(&publishing)
            .agent(HOST0, &["--token-owner", TOKEN_OWNER])
            .start();
        let addr = net.validator.addr.clone();
        let run = Anchoring {
            anvil,
            tmp,
            key,
            data,
            registry,
            log_vkey,
            origin,
            addr,
            net,
        };
        (run, scores)
    }

    /// A reader of the registry on the chain.
    fn chain(&self) -> pog_anchor::Registry {
        pog_anchor::Registry::reader(
            &pog_anchor::RpcUrl::parse(&self.anvil.url).unwrap(),
            pog_anchor::parse_address(&self.registry).unwrap(),
        )
        .unwrap()
    }
}

/// Stops a running `pog validator` with SIGTERM; it must exit 0.
fn stop(validator: &mut ValidatorProcess) {
    assert_eq!(validator.stop().code(), Some(0));
}

#[test]
fn a_running_validator_anchors_its_checkpoints() {
    let run = Anchoring::start("0.5");
    let (data, addr, origin) = (&run.data, &run.addr, &run.origin);

    // Records appear, a checkpoint is signed, then anchored: the chain's latest anchor is the
    // validator's kept anchored checkpoint, after two proof rounds at least.
    let uuid = HOST0_GPU;
    let chain = run.chain();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let anchored_file = data.join("ledger").join("anchored-checkpoint");
    let (rounds, latest) = loop {
        let page: Value = http_get(addr, &format!("/v1/records/{uuid}"))
            .and_then(|(_, body)| serde_json::from_str(&body).ok())
            .unwrap_or_default();
        let rounds = page["records"].as_array().map_or(0, |r| {
            r.iter()
                .filter(|r| r["envelope"]["kind"] == "record")
                .count()
        });
        let latest = rt.block_on(chain.latest(origin)).unwrap();
        if let (true, Some(latest)) = (rounds >= 2, latest) {
            if anchored_file.is_file() && latest.size as usize >= rounds {
                break (rounds, latest);
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not anchored: {rounds} round(s), chain {latest:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(250));
    };
    assert_eq!(
        rt.block_on(chain.publisher_of(origin)).unwrap(),
        Some(
            pog_anchor::PublisherKey::from_file(&run.key)
                .unwrap()
                .address()
        ),
        "the validator registered its origin"
    );
    // The anchor carries the root of a checkpoint the validator signed.
    let kept =
        pog_ledger::checkpoint::SignedCheckpoint::parse(&std::fs::read(&anchored_file).unwrap())
            .unwrap();
    let at = rt
        .block_on(chain.anchor_at(origin, kept.checkpoint.size))
        .unwrap()
        .expect("the kept checkpoint is anchored");
    assert_eq!(at.root, kept.checkpoint.root);
    assert!(latest.size >= kept.checkpoint.size);

    // The GPU's bundle at the anchored checkpoint verifies against the chain, beside the
    // running validator.
    let bundle = run.tmp.path().join("bundle.json");
    let export = [
        "ledger",
        "export",
        "--gpu",
        uuid,
        "--anchored",
        "-o",
        bundle.to_str().unwrap(),
    ];
    pog_json(data, &export, 0);
    let report = pog_json(
        &run.tmp.path().join("holder"),
        &[
            "verify",
            bundle.to_str().unwrap(),
            "--log-key",
            &run.log_vkey,
            "--accept-unwitnessed",
            "--chain",
            &run.anvil.url,
            "--contract",
            &run.registry,
        ],
        0,
    );
    assert_eq!(report["anchor"]["ok"], true, "{report:#}");
    assert!(report["records"].as_array().unwrap().len() >= 2, "{rounds}");

    // The validator logged the GPU's gpu-state with the owner its agent named: proven on chain
    // from the anchored checkpoint, beside the running validator. The GPU is the simulated
    // test double, so its state proves no model and no token can be minted for it.
    let tools = evm_tools();
    // Any account sends (not the validator's publisher key, whose anchors go on meanwhile: two
    // senders of one key race for its nonces).
    let anyone = dev_key_file(run.tmp.path(), "anyone.key", 1);
    let sender = [
        "--rpc",
        &run.anvil.url,
        "--key-file",
        anyone.to_str().unwrap(),
    ];
    let deploy = |what: &str, flags: &[&str]| -> String {
        let mut args = vec!["ledger", what];
        args.extend(sender);
        args.extend(flags);
        pog_json(data, &args, 0)["address"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let scores = deploy(
        "deploy-scores",
        &[
            "--registry",
            &run.registry,
            "--bytecode",
            tools.bin_of("GpuScores").to_str().unwrap(),
        ],
    );
    let mut publish = vec!["ledger", "publish-scores", "--scores", &scores];
    publish.extend(sender);
    // The gpu-state is logged after the round it prices: the checkpoint anchored when the
    // records above were may not hold it yet ("1 without a state"); a later one does.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let published = pog_json(data, &publish, 0);
        if published["result"]["submitted"].as_u64().unwrap() >= 1 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no state proven: {published:#}"
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    let state = rt
        .block_on(
            pog_anchor::scores::Scores::new(
                &pog_anchor::RpcUrl::parse(&run.anvil.url).unwrap(),
                pog_anchor::parse_address(&scores).unwrap(),
                None,
            )
            .unwrap()
            .state_of(uuid),
        )
        .unwrap()
        .expect("the GPU's state is on chain");
    assert_eq!(state.state.owner.to_string(), TOKEN_OWNER);
    assert_eq!(state.state.model, "H200 SXM");
    assert!(!state.state.proves_model, "a simulated GPU proves nothing");
    let token = deploy(
        "deploy-token",
        &[
            "--scores",
            &scores,
            "--bytecode",
            tools.bin_of("GpuToken").to_str().unwrap(),
        ],
    );
    let mut mint = vec!["ledger", "mint", "--token", &token, "--gpu", uuid];
    mint.extend(sender);
    let refused = pog_json(data, &mint, 1);
    assert!(
        refused["summary"]
            .as_str()
            .unwrap()
            .contains("does not prove its model"),
        "{refused:#}"
    );

    // A monitor of the log with the chain: the validator's anchors are trees the log has.
    let monitor = |name: &str, contract: &str, status: i32| {
        pog_json(
            &run.tmp.path().join(name),
            &[
                "ledger",
                "monitor",
                &format!("http://{}/ledger", run.addr),
                "--log-key",
                &run.log_vkey,
                "--once",
                "--allow-private",
                "--chain",
                &run.anvil.url,
                "--contract",
                contract,
            ],
            status,
        )
    };
    let clean = monitor("monitor", &run.registry, 0);
    assert_eq!(clean["alerts"], serde_json::json!([]), "{clean:#}");
    // A publisher key that anchors what the log never had: another root at a size the log
    // has, or a size beyond it (each in a registry of its own, as a misused key would).
    let attacker_key = dev_key_file(run.tmp.path(), "attacker.key", 2);
    let bogus = |size: u64| {
        let dir = run.tmp.path().join(format!("attacker-{size}"));
        let registry = deploy_registry(&dir, &run.anvil.url, &attacker_key);
        let url = pog_anchor::RpcUrl::parse(&run.anvil.url).unwrap();
        let key = pog_anchor::PublisherKey::from_file(&attacker_key).unwrap();
        let r = pog_anchor::Registry::publisher(
            &url,
            pog_anchor::parse_address(&registry).unwrap(),
            &key,
        )
        .unwrap();
        rt.block_on(async {
            r.register(origin).await.unwrap();
            r.anchor(origin, size, [0xee; 32]).await.unwrap();
        });
        registry
    };
    let forged = monitor("monitor-forged", &bogus(1), 1);
    assert_eq!(
        forged["alerts"][0]["kind"], "anchor_not_in_log",
        "{forged:#}"
    );
    let beyond = monitor("monitor-beyond", &bogus(999_999), 1);
    assert_eq!(
        beyond["alerts"][0]["kind"], "anchor_beyond_log",
        "{beyond:#}"
    );

    // The chain going away does not stop the validator: it keeps serving, and stops cleanly.
    let Anchoring {
        anvil,
        mut net,
        addr,
        ..
    } = run;
    drop(anvil);
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert!(http_get(&addr, "/ledger/checkpoint").is_some_and(|(s, _)| s == 200));
    stop(&mut net.validator);
}

#[test]
fn a_stopping_validator_anchors_its_last_checkpoint() {
    // The schedule would anchor only after an hour: whatever is anchored, the stop did.
    let mut run = Anchoring::start("3600");
    // A proof round stored and a checkpoint signed over it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let size = http_get(&run.addr, "/ledger/checkpoint")
            .filter(|(status, _)| *status == 200)
            .and_then(|(_, text)| {
                pog_ledger::checkpoint::SignedCheckpoint::parse(text.as_bytes()).ok()
            })
            .map_or(0, |c| c.checkpoint.size);
        if size >= 2 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no checkpoint");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    stop(&mut run.net.validator);

    // The chain holds the checkpoint the validator signed last.
    let last = pog_ledger::checkpoint::SignedCheckpoint::parse(
        &std::fs::read(run.data.join("ledger").join("checkpoint")).unwrap(),
    )
    .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let latest = rt
        .block_on(run.chain().latest(&run.origin))
        .unwrap()
        .expect("anchored at the stop");
    assert_eq!(
        (latest.size, latest.root),
        (last.checkpoint.size, last.checkpoint.root)
    );
}

#[test]
fn a_validator_with_a_bad_anchoring_setup_does_not_start() {
    let tmp = tempfile::tempdir().unwrap();
    let data = validator_dir(tmp.path(), "validator");
    let key = dev_key_file(tmp.path(), "publisher.key", 0);
    let contract = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
    let run = |extra: &[&str]| {
        let mut args = vec!["validator", "--listen", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        let out = pog(&data, &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    // The three flags go together.
    let e = run(&["--anchor-rpc", "http://127.0.0.1:8545"]);
    assert!(e.contains("--anchor-contract"), "{e}");
    let e = run(&["--anchor-contract", contract]);
    assert!(e.contains("--anchor-rpc"), "{e}");
    // Each is checked before anything is served.
    let k = key.to_str().unwrap();
    let e = run(&[
        "--anchor-rpc",
        "ws://127.0.0.1:8546",
        "--anchor-contract",
        contract,
        "--anchor-key-file",
        k,
    ]);
    assert!(e.contains("\"ws\" is not http or https"), "{e}");
    let e = run(&[
        "--anchor-rpc",
        "http://127.0.0.1:8545",
        "--anchor-contract",
        "nope",
        "--anchor-key-file",
        k,
    ]);
    assert!(e.contains("not a contract address"), "{e}");
    let missing = tmp.path().join("missing.key");
    let e = run(&[
        "--anchor-rpc",
        "http://127.0.0.1:8545",
        "--anchor-contract",
        contract,
        "--anchor-key-file",
        missing.to_str().unwrap(),
    ]);
    assert!(
        e.contains("publisher key file") && e.contains("missing.key"),
        "{e}"
    );
}

/// A publisher key that anchors a size the log never had: `pog verify --validator` reports
/// the anchor beyond the log, the validator's anchoring cannot go on, and once the origin's
/// owner voids it (`pog ledger rotate-publisher`) the validator anchors again and the holder's
/// check passes.
#[test]
fn a_bogus_anchor_is_reported_then_voided_by_the_owner_and_anchoring_goes_on() {
    let run = Anchoring::start("0.5");
    let (data, origin) = (&run.data, &run.origin);
    let chain = run.chain();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let wait_for = |what: &str, done: &dyn Fn() -> bool| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while !done() {
            assert!(std::time::Instant::now() < deadline, "{what}");
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
    };
    wait_for("a first anchor", &|| {
        rt.block_on(chain.latest(origin)).unwrap().is_some()
    });
    // The publisher key anchors what the log never had.
    let key = pog_anchor::PublisherKey::from_file(&run.key).unwrap();
    let publisher = pog_anchor::Registry::publisher(
        &pog_anchor::RpcUrl::parse(&run.anvil.url).unwrap(),
        pog_anchor::parse_address(&run.registry).unwrap(),
        &key,
    )
    .unwrap();
    let bogus = 999_999;
    // The validator anchors with the same key meanwhile: a nonce taken by one of its anchors
    // makes this transaction fail before it is sent; try again.
    let mut tries = 0;
    while let Err(e) = rt.block_on(publisher.anchor(origin, bogus, [0xee; 32])) {
        tries += 1;
        assert!(
            tries < 20 && matches!(e, pog_anchor::AnchorError::Rpc { .. }),
            "{e}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let holder = run.tmp.path().join("holder");
    let verify = |status: i32| {
        pog_json(
            &holder,
            &[
                "verify",
                "--validator",
                &format!("http://{}", run.addr),
                "--gpu",
                HOST0_GPU,
                "--log-key",
                &run.log_vkey,
                "--accept-unwitnessed",
                "--chain",
                &run.anvil.url,
                "--contract",
                &run.registry,
            ],
            status,
        )
    };
    let caught = verify(1);
    let names: Vec<&str> = caught["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["problem"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"anchor_beyond_log"), "{caught:#}");
    // The owner (here the key that registered the origin) voids it, keeping the publisher.
    let rotated = pog_json(
        data,
        &[
            "ledger",
            "rotate-publisher",
            "--rpc",
            &run.anvil.url,
            "--key-file",
            run.key.to_str().unwrap(),
            "--contract",
            &run.registry,
            "--publisher",
            &key.address().to_string(),
            "--void-from",
            &bogus.to_string(),
        ],
        0,
    );
    assert!(
        rotated["summary"].as_str().unwrap().contains("void"),
        "{rotated:#}"
    );
    // Anchoring goes on: the validator's next anchors are valid ones past the void.
    let valid_before = rt.block_on(chain.latest(origin)).unwrap().unwrap().size;
    assert!(valid_before < bogus);
    wait_for("anchoring to go on after the rotation", &|| {
        rt.block_on(chain.latest(origin))
            .unwrap()
            .is_some_and(|a| a.size > valid_before && a.size < bogus)
    });
    let history = rt.block_on(chain.history(origin)).unwrap();
    assert!(
        history
            .iter()
            .any(|(_, a, valid)| a.size == bogus && !valid),
        "the bogus anchor stays, void: {history:?}"
    );
    let passed = verify(0);
    assert_eq!(passed["anchor"]["ok"], true, "{passed:#}");
    // Only the owner rotates.
    let stranger = dev_key_file(run.tmp.path(), "stranger.key", 2);
    let refused = pog_json(
        data,
        &[
            "ledger",
            "rotate-publisher",
            "--rpc",
            &run.anvil.url,
            "--key-file",
            stranger.to_str().unwrap(),
            "--contract",
            &run.registry,
            "--publisher",
            &key.address().to_string(),
            "--void-from",
            "5",
        ],
        1,
    );
    assert!(
        refused["summary"].as_str().unwrap().contains("owner"),
        "{refused:#}"
    );
}

/// `pog validator --scores-contract`: after each anchoring the validator proves its GPUs' new
/// states to the scores contract itself; nobody runs `publish-scores`.
#[test]
fn a_validator_publishes_its_gpus_states_after_anchoring() {
    let (run, scores) = Anchoring::start_with("0.5", true);
    let scores = pog_anchor::scores::Scores::new(
        &pog_anchor::RpcUrl::parse(&run.anvil.url).unwrap(),
        pog_anchor::parse_address(&scores.unwrap()).unwrap(),
        None,
    )
    .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let state = loop {
        if let Some(state) = rt.block_on(scores.state_of(HOST0_GPU)).unwrap() {
            break state;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no state published: {}",
            run.net.validator.service.stderr()
        );
        std::thread::sleep(std::time::Duration::from_millis(250));
    };
    assert_eq!(state.state.owner.to_string(), TOKEN_OWNER);
    assert!(state.anchored_size > state.leaf_index);
    let kept = pog_ledger::checkpoint::SignedCheckpoint::parse(
        &std::fs::read(run.data.join("ledger").join("anchored-checkpoint")).unwrap(),
    )
    .unwrap();
    assert!(state.anchored_size <= kept.checkpoint.size);
}
