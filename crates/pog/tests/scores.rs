//! GPU states and tokens on chain through the binary, on a real local EVM node (anvil from
//! npm): `pog ledger deploy-scores | deploy-token | publish-scores | mint` over an anchored
//! ledger, and `pog verify --token` checking a token's state on chain against the log — with a
//! token whose contracts were fed another log under the same origin caught.

mod common;

use common::*;
use pog_anchor::testing::{dev_key_file, evm_tools, Anvil};
use pog_records::GpuState;
use pog_signed::{EvmAddress, GpuUuid, Identity};
use serde_json::Value;
use std::path::Path;

const OWNER: &str = "0x4242424242424242424242424242424242424242";

/// The validator's signed `gpu-state` record of [`GPU`], as JSON.
fn state_record(validator: &Identity, score: f64, owner: &str) -> Value {
    let state = GpuState {
        version: pog_records::state::STATE_VERSION,
        gpu_uuid: GpuUuid::new(GPU).unwrap(),
        model: "H200 SXM".into(),
        proves_model: true,
        proves_memory: true,
        score_ppm: GpuState::score_ppm_of(score),
        price_micro_usd: 4_380_000,
        owner: owner.parse::<EvmAddress>().unwrap(),
        recorded_at_ms: 1_796_000_100_000,
    };
    let body = serde_json::to_string(&state).unwrap();
    serde_json::to_value(validator.seal_body("gpu-state", body)).unwrap()
}

/// A ledger in `data` with [`GPU`]'s records and one gpu-state, checkpointed and anchored in
/// a registry of its own; (registry, origin).
fn anchored_ledger(
    data: &Path,
    rpc: &str,
    key: &Path,
    validator: &Identity,
    score: f64,
    owner: &str,
    origin: Option<&str>,
) -> (String, String) {
    let agent = Identity::from_seed([0x43; 32]);
    let mut records = records(validator, &agent, 0, 2);
    records.push(state_record(validator, score, owner));
    let batch = data.join("batch.json");
    write(&batch, &Value::Array(records).to_string());
    let with_origin = |args: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        if let Some(o) = origin {
            v.extend(["--origin".to_string(), o.to_string()]);
        }
        v
    };
    let run = |args: Vec<String>| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        pog_json(data, &args, 0)
    };
    run(with_origin(&["ledger", "append", batch.to_str().unwrap()]));
    let cp = run(with_origin(&["ledger", "checkpoint"]));
    let registry = deploy_registry(data, rpc, key);
    run(with_origin(&[
        "ledger",
        "anchor",
        "--rpc",
        rpc,
        "--contract",
        &registry,
        "--key-file",
        key.to_str().unwrap(),
    ]));
    (registry, cp["origin"].as_str().unwrap().to_string())
}

/// Deploys GpuScores (for the ledger in `data`'s log) and GpuToken; (scores, token).
fn deploy_contracts(data: &Path, rpc: &str, key: &Path, registry: &str) -> (String, String) {
    let tools = evm_tools();
    let scores = pog_json(
        data,
        &[
            "ledger",
            "deploy-scores",
            "--rpc",
            rpc,
            "--key-file",
            key.to_str().unwrap(),
            "--registry",
            registry,
            "--bytecode",
            tools.bin_of("GpuScores").to_str().unwrap(),
        ],
        0,
    );
    let scores = scores["address"].as_str().unwrap().to_string();
    let token = pog_json(
        data,
        &[
            "ledger",
            "deploy-token",
            "--rpc",
            rpc,
            "--key-file",
            key.to_str().unwrap(),
            "--scores",
            &scores,
            "--bytecode",
            tools.bin_of("GpuToken").to_str().unwrap(),
        ],
        0,
    );
    (scores, token["address"].as_str().unwrap().to_string())
}

fn publish(data: &Path, rpc: &str, key: &Path, scores: &str) -> Value {
    pog_json(
        data,
        &[
            "ledger",
            "publish-scores",
            "--rpc",
            rpc,
            "--key-file",
            key.to_str().unwrap(),
            "--scores",
            scores,
        ],
        0,
    )
}

fn mint(data: &Path, rpc: &str, key: &Path, token: &str, status: i32) -> Value {
    pog_json(
        data,
        &[
            "ledger",
            "mint",
            "--rpc",
            rpc,
            "--key-file",
            key.to_str().unwrap(),
            "--token",
            token,
            "--gpu",
            GPU,
        ],
        status,
    )
}

#[test]
fn states_go_on_chain_a_token_is_minted_and_verify_token_checks_it_against_the_log() {
    let anvil = Anvil::start();
    let tmp = tempfile::tempdir().unwrap();
    let rpc = anvil.url.as_str();
    let key = dev_key_file(tmp.path(), "sender.key", 1);
    let data = validator_dir(tmp.path(), "validator");
    let validator = Identity::from_seed(VALIDATOR_SEED);
    let (registry, origin) = anchored_ledger(&data, rpc, &key, &validator, 0.987, OWNER, None);
    let (scores, token) = deploy_contracts(&data, rpc, &key, &registry);

    // Published: the GPU's state; the other GPU of the log has none. Again: nothing to send.
    let first = publish(&data, rpc, &key, &scores);
    assert_eq!(first["result"]["submitted"], 1, "{first:#}");
    assert_eq!(first["result"]["without_state"], 1, "{first:#}");
    assert_eq!(first["origin"], origin.as_str());
    let again = publish(&data, rpc, &key, &scores);
    assert_eq!(again["result"]["submitted"], 0);
    assert_eq!(again["result"]["up_to_date"], 1);

    // Minted to the owner the state names, whoever pays; once only.
    let minted = mint(&data, rpc, &key, &token, 0);
    let id = minted["token"]["token_id"].as_str().unwrap().to_string();
    assert_eq!(
        minted["token"]["holder"].as_str().unwrap().to_lowercase(),
        OWNER
    );
    assert_eq!(minted["token"]["chain"]["state"]["score_ppm"], 987_000);
    let twice = mint(&data, rpc, &key, &token, 1);
    assert!(
        twice["summary"]
            .as_str()
            .unwrap()
            .contains("exists already"),
        "{twice:#}"
    );

    // The holder: the token's GPU, its anchored bundle, and the chain's state against the log.
    let bundle = tmp.path().join("bundle.json");
    pog_json(
        &data,
        &[
            "ledger",
            "export",
            "--gpu",
            GPU,
            "--anchored",
            "-o",
            bundle.to_str().unwrap(),
        ],
        0,
    );
    let log_vkey = pog_json(&data, &["ledger", "vkey"], 0)["vkey"]
        .as_str()
        .unwrap()
        .to_string();
    let holder = tmp.path().join("holder");
    let verify = |token: &str, status: i32| {
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
                "--token",
                &id,
                "--token-contract",
                token,
            ],
            status,
        )
    };
    let ok = verify(&token, 0);
    assert_eq!(ok["token"]["compared"], true, "{ok:#}");
    assert_eq!(ok["token"]["registry"], registry.as_str());
    assert_eq!(
        ok["anchor"]["ok"], true,
        "the registry came from the scores contract"
    );
    assert_eq!(ok["problems"].as_array().unwrap().len(), 0);
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
            "--token",
            &id,
            "--token-contract",
            &token,
        ],
    );
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("compared with the log"), "{text}");

    // Another log under the same origin (its own key, registry and contracts) says the GPU
    // scores 1.0 for another owner: its token does not verify against the real log.
    let forger_dir = tmp.path().join("forger");
    std::fs::create_dir_all(&forger_dir).unwrap();
    let forger = Identity::from_seed([0x66; 32]);
    let forger_data = {
        use std::os::unix::fs::PermissionsExt;
        let k = forger_dir.join("validator.key");
        write(&k, &hex::encode(forger.seed()));
        std::fs::set_permissions(&k, std::fs::Permissions::from_mode(0o600)).unwrap();
        forger_dir.clone()
    };
    let forged_owner = "0x6666666666666666666666666666666666666666";
    let (forged_registry, forged_origin) = anchored_ledger(
        &forger_data,
        rpc,
        &key,
        &forger,
        1.0,
        forged_owner,
        Some(&origin),
    );
    assert_eq!(forged_origin, origin);
    let (forged_scores, forged_token) = deploy_contracts(&forger_data, rpc, &key, &forged_registry);
    publish(&forger_data, rpc, &key, &forged_scores);
    mint(&forger_data, rpc, &key, &forged_token, 0);
    let caught = verify(&forged_token, 1);
    let problems: Vec<&str> = caught["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["problem"].as_str().unwrap())
        .collect();
    assert!(problems.contains(&"token_state_differs"), "{caught:#}");
    assert!(problems.contains(&"anchor_mismatch"), "{caught:#}");
}
