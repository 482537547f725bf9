//! `pog score`, `pog price` and `pog market` end to end: a saved check report scored, models
//! priced, bad input refused with the error envelope, and orders submitted, cancelled and
//! cleared through a `pog validator` on loopback, asks offering a proven GPU their key holds.

use assert_cmd::Command;
use serde_json::Value;
use std::path::PathBuf;

mod common;

use common::{
    clear_request, history, ledger_leases, post, register_proven_h200, Network, HOST0, HOST0_GPU,
    TEST_ROUNDS,
};

fn pog(args: &[&str]) -> (i32, Value) {
    let out = Command::cargo_bin("pog")
        .unwrap()
        .args(args)
        .env_remove("POG_SIMULATE")
        .env_remove("POG_VALIDATOR")
        .output()
        .unwrap();
    let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap(), json)
}

#[test]
fn a_saved_report_is_scored_and_a_simulated_gpu_counts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("check.json");
    let out = Command::cargo_bin("pog")
        .unwrap()
        .args(["check", "--json", "--simulate", "H200 SXM x2"])
        .output()
        .unwrap();
    std::fs::write(&report, &out.stdout).unwrap();
    let (status, json) = pog(&["score", "--json", "--report", report.to_str().unwrap()]);
    assert_eq!(status, 0, "{json}");
    assert_eq!(json["simulated"], true);
    assert_eq!(json["verdict"], "warn");
    assert_eq!(json["gpus"].as_array().unwrap().len(), 2);
    // A test double's figures never look real: the whole score is 0, every part and GPU
    // with the reason SIMULATED.
    assert_eq!(json["score"], 0.0);
    for part in ["gpu", "cpu", "ram", "storage"] {
        assert_eq!(json["parts"][part]["value"], 0.0, "{part}");
        assert!(json["parts"][part]["note"]
            .as_str()
            .unwrap()
            .starts_with("SIMULATED"));
    }
    assert_eq!(json["reliability"]["factor"], 0.0);
    for gpu in json["gpus"].as_array().unwrap() {
        assert_eq!(gpu["potential"], 0.0);
        assert!(gpu["zeroed"].as_str().unwrap().starts_with("SIMULATED"));
    }
    // A fresh check of a simulated host, and its price: the same.
    let (status, fresh) = pog(&["score", "--json", "--simulate", "H100 SXM"]);
    assert_eq!(status, 0, "{fresh}");
    assert_eq!(fresh["score"], 0.0);
    assert!(fresh["gpus"][0]["zeroed"]
        .as_str()
        .unwrap()
        .starts_with("SIMULATED"));
    let (status, price) = pog(&["price", "--json", "--simulate", "H100 SXM"]);
    assert_eq!(status, 1, "{price}");
    assert!(price["quote"].is_null());
    assert!(price["unpriced"].as_str().unwrap().contains("SIMULATED"));
    // Not a check report: refused with the error envelope.
    let (status, json) = pog(&["score", "--json", "--report", "/dev/null"]);
    assert_eq!(status, 2);
    assert_eq!(json["verdict"], "error");
    std::fs::write(&report, r#"{"schema": "pog.bench/1"}"#).unwrap();
    let (status, json) = pog(&["score", "--json", "--report", report.to_str().unwrap()]);
    assert_eq!(status, 2);
    assert!(json["error"]
        .as_str()
        .unwrap()
        .contains("not a `pog check --json` report"));
}

#[test]
fn models_are_priced_and_bad_prices_refused() {
    let (status, h200) = pog(&["price", "--json", "--model", "H200 SXM"]);
    assert_eq!(status, 0);
    assert_eq!(h200["quote"]["price_micro_usd"], 4_448_264);
    // A model's figures are its datasheet's: nothing is called verified, and the market's
    // factors read as factors, not as a utilization of 100 %.
    let out = Command::cargo_bin("pog")
        .unwrap()
        .args(["price", "--model", "H200 SXM"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.to_lowercase().contains("verified"), "{text}");
    assert!(text.contains("datasheet, spec database"), "{text}");
    assert!(text.contains("utilization factor ×1.000"), "{text}");
    let (_, busy) = pog(&[
        "price",
        "--json",
        "--model",
        "H200 SXM",
        "--utilization",
        "0.95",
    ]);
    assert!(busy["quote"]["price_micro_usd"].as_u64() > h200["quote"]["price_micro_usd"].as_u64());
    for bad in [
        vec!["price", "--json", "--model", "Z9000"],
        vec![
            "price",
            "--json",
            "--model",
            "H200 SXM",
            "--utilization",
            "1.5",
        ],
        vec![
            "price",
            "--json",
            "--model",
            "H200 SXM",
            "--utilization",
            "NaN",
        ],
    ] {
        let (status, json) = pog(&bad);
        assert_eq!(status, 2, "{bad:?}");
        assert_eq!(json["verdict"], "error");
    }
}

#[test]
fn orders_go_through_a_validator() {
    let dir = tempfile::tempdir().unwrap();
    let (renter, provider) = (dir.path().join("renter"), dir.path().join("provider"));
    // Rounds an hour apart: the GPU registered below (at no endpoint) must not be challenged,
    // and fail, between its registration and the ask that offers it (rounds start at the
    // fleet's slot boundaries, which a minute's slot put inside the test now and then).
    let v = Network::in_dir(dir.path())
        .flags(&["--challenge-every", "3600"])
        .start()
        .validator;
    let market = |dir: &PathBuf, args: &[&str]| {
        let mut all = vec!["market", "--json", "--validator", &v.url, "--data-dir"];
        all.push(dir.to_str().unwrap());
        all.extend_from_slice(args);
        pog(&all)
    };
    let offering = |dir, id: &str, side: &str, quantity: &str, price: &str, gpus: &[&str]| {
        let mut args = vec![
            "submit",
            "--id",
            id,
            "--side",
            side,
            "--class",
            "H200 SXM",
            "--quantity",
            quantity,
            "--price",
            price,
        ];
        for gpu in gpus {
            args.extend(["--gpu", gpu]);
        }
        market(dir, &args)
    };
    let submit = |dir, id: &str, side: &str, quantity: &str, price: &str| {
        offering(dir, id, side, quantity, price, &[])
    };
    // The provider's agent key holds a proven H200 at the validator: its ask offers it
    // (registered after the validator's first round, which would challenge it at no endpoint).
    let provider_key = pog_net::keys::load_or_create(&provider.join("agent.key")).unwrap();
    v.wait_for_first_round();
    register_proven_h200(&v.service.data, &provider_key.public_key(), "GPU-p1");
    // A low bid first: the book lists bids by price, not as they came.
    assert_eq!(submit(&renter, "r0", "bid", "1", "1.00").0, 0);
    // The renter's bid names how it reaches the GPUs it rents (a container to start); a key
    // file that is not an OpenSSH public key is refused before anything is sent.
    let not_a_key = dir.path().join("not-a-key.pub");
    std::fs::write(&not_a_key, "ssh-ed25519 AAAA\nssh-rsa AAAA injected").unwrap();
    let (status, json) = market(
        &renter,
        &[
            "submit",
            "--id",
            "r1",
            "--side",
            "bid",
            "--class",
            "H200 SXM",
            "--quantity",
            "3",
            "--price",
            "4.00",
            "--ssh-key",
            not_a_key.to_str().unwrap(),
        ],
    );
    assert_eq!(status, 2, "{json}");
    assert!(
        json["error"]
            .as_str()
            .unwrap()
            .contains("not an OpenSSH public key"),
        "{json}"
    );
    let (status, json) = market(
        &renter,
        &[
            "submit",
            "--id",
            "r1",
            "--side",
            "bid",
            "--class",
            "H200 SXM",
            "--quantity",
            "3",
            "--price",
            "4.00",
            "--container",
            "ghcr.io/renter/job:1",
        ],
    );
    assert_eq!(status, 0, "{json}");
    // An ask naming no GPU, the provider's GPU in the renter's ask, more GPU-hours than the
    // GPU has in the ask's 24 hours: refused.
    for (dir, gpus, quantity, expect) in [
        (&provider, &[][..], "2", "names no GPUs"),
        (&renter, &["GPU-p1"][..], "2", "registered to another key"),
        (&provider, &["GPU-p1"][..], "25", "only 24 whole GPU-hours"),
        (&provider, &["GPU 1"][..], "2", "--gpu"),
    ] {
        let (status, json) = offering(dir, "p0", "ask", quantity, "3.50", gpus);
        assert_eq!(status, 2, "{json}");
        assert!(json["error"].as_str().unwrap().contains(expect), "{json}");
    }
    let (status, json) = offering(&provider, "p1", "ask", "2", "3.50", &["GPU-p1"]);
    assert_eq!(status, 0, "{json}");
    // Bad orders: refused before or by the validator, the book unchanged.
    for (id, price, quantity) in [
        ("r2", "-1", "1"),
        ("r3", "NaN", "1"),
        ("r4", "2000000", "1"),
        ("r5", "1", "0"),
        ("r1", "1", "1"),
    ] {
        let (status, json) = submit(&renter, id, "bid", quantity, price);
        assert_eq!(status, 2, "{id}: {json}");
    }
    let (_, json) = market(
        &renter,
        &[
            "submit",
            "--id",
            "x",
            "--side",
            "bid",
            "--class",
            "Z9000",
            "--quantity",
            "1",
            "--price",
            "1",
        ],
    );
    assert!(
        json["error"]
            .as_str()
            .unwrap()
            .contains("trades no GPU class"),
        "{json}"
    );
    // The provider cannot cancel the renter's order.
    let (status, json) = market(&provider, &["cancel", "--id", "r1"]);
    assert_eq!(status, 2);
    assert!(
        json["error"]
            .as_str()
            .unwrap()
            .contains("this key has no order r1"),
        "{json}"
    );
    let (_, book) = market(&renter, &["book", "--class", "H200 SXM"]);
    let ids = |side: &str| -> Vec<String> {
        book[side]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(ids("bids"), ["r1", "r0"], "{book}");
    assert_eq!(ids("asks"), ["p1"], "{book}");
    assert_eq!(book["asks"][0]["gpus"], serde_json::json!(["GPU-p1"]));
    // Only the validator's key clears.
    assert_eq!(market(&renter, &["clear", "--class", "H200 SXM"]).0, 2);
    let (status, clearing) = market(&v.service.data, &["clear", "--class", "H200 SXM"]);
    assert_eq!(status, 0, "{clearing}");
    assert_eq!(clearing["schema"], "pog.market.clear/1");
    assert_eq!(clearing["clearing"]["units"], 2);
    let cleared_at = clearing["at_ms"].as_u64().unwrap();
    assert!(cleared_at > 1_700_000_000_000, "{clearing}");
    let (_, history) = market(&renter, &["history"]);
    assert_eq!(history["clearings"].as_array().unwrap().len(), 1);
    assert_eq!(history["clearings"][0]["at_ms"], cleared_at);
    // As people read it: the time in UTC and the units.
    let out = Command::cargo_bin("pog")
        .unwrap()
        .args(["market", "--validator", &v.url, "history"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("cleared (UTC)") && text.contains("$/GPU-hour") && text.contains("Z"),
        "{text}"
    );
    // The trade became a lease of the provider's GPU to the renter: 2 GPU-hours from the
    // clearing, listed for either party, not for a stranger; one by its id.
    let (status, leases) = market(&renter, &["leases"]);
    assert_eq!(status, 0, "{leases}");
    let lease = &leases["leases"][0];
    assert_eq!(leases["leases"].as_array().unwrap().len(), 1, "{leases}");
    assert_eq!(lease["gpu"], "GPU-p1");
    assert_eq!(lease["hours"], 2);
    assert_eq!(lease["start_ms"], cleared_at);
    assert_eq!(lease["end_ms"], cleared_at + 2 * 3_600_000);
    assert_eq!(lease["state"], "active");
    assert_eq!(lease["class"], "H200 SXM");
    assert_eq!(lease["provider"], provider_key.public_key().to_string());
    assert_eq!(
        lease["access"],
        serde_json::json!({"container": "ghcr.io/renter/job:1"}),
        "the bid's access, for the provider's hook"
    );
    let id = lease["id"].as_str().unwrap().to_string();
    let (_, theirs) = market(&provider, &["leases"]);
    assert_eq!(theirs["leases"][0]["id"], id.as_str());
    let stranger = dir.path().join("stranger");
    let (_, none) = market(&stranger, &["leases"]);
    assert_eq!(none["leases"].as_array().unwrap().len(), 0, "{none}");
    let (status, one) = market(&stranger, &["lease", &id]);
    assert_eq!(status, 0, "{one}");
    assert_eq!(one["schema"], "pog.market.lease/1");
    assert_eq!(one["gpu"], "GPU-p1");
    assert_eq!(market(&stranger, &["lease", "99.0.0"]).0, 2);
    // Signed into the validator's ledger, in the GPU's history (read beside the running
    // validator, before its next checkpoint).
    let ledger = pog_ledger::store::Ledger::open_reader(&v.service.data.join("ledger")).unwrap();
    let entries = ledger.gpu_entries("GPU-p1").unwrap();
    let leases: Vec<pog_records::LeaseRecord> = entries
        .iter()
        .filter(|(_, e)| e.kind == pog_signed::RecordKind::Lease)
        .map(|(_, e)| {
            e.verify().unwrap();
            serde_json::from_str(&e.body).unwrap()
        })
        .collect();
    assert_eq!(leases.len(), 1, "{entries:?}");
    assert_eq!(leases[0].lease_id, id);
    assert_eq!(leases[0].hours, 2);
    assert_eq!(leases[0].provider, provider_key.public_key());
    let (status, cancelled) = market(&renter, &["cancel", "--id", "r1"]);
    assert_eq!(status, 0);
    assert_eq!(cancelled["order"]["quantity"], 1);
}

#[test]
fn an_orders_lifetime_and_the_validators_limits_are_flags() {
    let dir = tempfile::tempdir().unwrap();
    let renter = tempfile::tempdir().unwrap();
    let v = Network::in_dir(dir.path())
        .flags(&["--market-max-open-per-owner", "1"])
        .start()
        .validator;
    let submit = |id: &str, lifetime: &str| {
        pog(&[
            "market",
            "--json",
            "--validator",
            &v.url,
            "--data-dir",
            renter.path().to_str().unwrap(),
            "submit",
            "--id",
            id,
            "--side",
            "bid",
            "--class",
            "H200 SXM",
            "--quantity",
            "1",
            "--price",
            "1.00",
            "--lifetime-hours",
            lifetime,
        ])
    };
    for bad in ["0", "721", "-1", "soon"] {
        let (status, json) = submit("r0", bad);
        assert_eq!(status, 2, "{bad}: {json}");
    }
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert_eq!(submit("r1", "2").0, 0);
    let (_, book) = pog(&["market", "--json", "--validator", &v.url, "book"]);
    let expires = book["bids"][0]["expires_at_ms"].as_u64().unwrap();
    assert!(
        (now_ms + 7_190_000..now_ms + 7_300_000).contains(&expires),
        "{book}"
    );
    // One open order per key on this validator: the second is refused.
    let (status, json) = submit("r2", "2");
    assert_eq!(status, 2);
    assert!(
        json["error"].as_str().unwrap().contains("its limit"),
        "{json}"
    );
    // Without --id, a random one no one could have taken first.
    let renter_dir = renter.path().to_str().unwrap();
    let market = |args: &[&str]| {
        let mut all = vec![
            "market",
            "--json",
            "--validator",
            &v.url,
            "--data-dir",
            renter_dir,
        ];
        all.extend_from_slice(args);
        pog(&all)
    };
    assert_eq!(market(&["cancel", "--id", "r1"]).0, 0);
    let (status, json) = market(&[
        "submit",
        "--side",
        "bid",
        "--class",
        "H200 SXM",
        "--quantity",
        "1",
        "--price",
        "1",
    ]);
    assert_eq!(status, 0, "{json}");
    let id = json["id"].as_str().unwrap();
    assert!(id.starts_with("o-") && id.len() == 34, "{id}");
}

#[test]
fn market_needs_a_reachable_validator() {
    let (status, json) = pog(&["market", "--json", "book"]);
    assert_eq!(status, 2);
    assert!(json["error"].as_str().unwrap().contains("--validator"));
    let (status, json) = pog(&[
        "market",
        "--json",
        "--validator",
        "http://127.0.0.1:9",
        "book",
    ]);
    assert_eq!(status, 2);
    assert!(json["error"].as_str().unwrap().contains("could not reach"));
}

#[test]
fn a_validator_scores_and_prices_from_its_records() {
    let dir = tempfile::tempdir().unwrap();
    let net = Network::in_dir(dir.path())
        .flags(&["--challenge-every", "1"])
        .flags(TEST_ROUNDS)
        .agent(HOST0, &[])
        .start();
    let v = &net.validator;
    // The simulated H200's UUID: registered, then challenged every second.
    let uuid = HOST0_GPU;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let (status, one) = loop {
        let (status, json) = pog(&["price", "--json", "--validator", &v.url, "--gpu", uuid]);
        // Two proof records taken in (the score names the last record it took in).
        let proofs = json["score"]["assessment"]["proofs_total"]
            .as_u64()
            .unwrap_or(0);
        let taken = json["score"]["through_record"].as_i64();
        let latest = json["score"]["assessment"]["latest_record"].as_i64();
        if (proofs >= 2 && taken >= latest) || std::time::Instant::now() > deadline {
            break (status, json);
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    };
    // A simulated GPU: scored 0 with the reason, never priced (exit 1: not priced).
    assert_eq!(status, 1, "{one}");
    assert_eq!(one["schema"], "pog.price/1");
    assert_eq!(one["simulated"], true);
    assert_eq!(one["score"]["score"], 0.0);
    assert!(
        one["score"]["reasons"][0]
            .as_str()
            .unwrap()
            .contains("SIMULATED"),
        "{one}"
    );
    assert!(one["score"]["price_micro_usd"].is_null());
    // One price point, the registration's: the rounds since changed nothing of it (a point is
    // written when the price, the score or why it is not priced changes), and it has a time.
    let points = one["history"]["points"].as_array().unwrap();
    assert_eq!(points.len(), 1, "{one}");
    // The first batch priced: the registration's record, alone or with the first round's
    // records that came within the pricing's gathering of them (500 ms).
    let cause = points[0]["cause"].as_str().unwrap();
    assert!(
        cause.starts_with("registration record") || cause.contains("earlier record(s)"),
        "{one}"
    );
    assert!(points[0]["at_ms"].as_u64().unwrap() > 1_700_000_000_000);
    assert!(points.iter().all(|p| p["price_micro_usd"].is_null()));
    let (status, all) = pog(&["price", "--json", "--validator", &v.url]);
    assert_eq!(status, 0, "{all}");
    assert_eq!(all["scores"].as_array().unwrap().len(), 1);
    assert_eq!(all["scores"][0]["gpu_uuid"], uuid);
    let (status, history) = pog(&[
        "market",
        "--json",
        "--validator",
        &v.url,
        "history",
        "--gpu",
        uuid,
    ]);
    assert_eq!(status, 0, "{history}");
    assert_eq!(history["schema"], "pog.market.history/1");
    assert_eq!(history["points"].as_array().unwrap().len(), 1);
}

#[test]
fn backed_asks_clear_on_the_validators_clock_and_a_simulated_gpu_backs_none() {
    let dir = tempfile::tempdir().unwrap();
    let net = Network::in_dir(dir.path())
        .flags(&["--clear-every", "0.3"])
        .flags(TEST_ROUNDS)
        .agent(HOST0, &[])
        .start();
    let v = &net.validator;
    let (renter, provider) = (dir.path().join("r"), dir.path().join("p"));
    let provider_key = pog_net::keys::load_or_create(&provider.join("agent.key")).unwrap();
    v.wait_for_first_round();
    register_proven_h200(&v.service.data, &provider_key.public_key(), "GPU-p1");
    let submit = |data: &PathBuf, id: &str, side: &str, price: &str, gpu: Option<&str>| {
        let mut args = vec![
            "market",
            "--json",
            "--validator",
            &v.url,
            "--data-dir",
            data.to_str().unwrap(),
            "submit",
            "--id",
            id,
            "--side",
            side,
            "--class",
            "H200 SXM",
            "--quantity",
            "1",
            "--price",
            price,
        ];
        if let Some(gpu) = gpu {
            args.extend(["--gpu", gpu]);
        }
        pog(&args)
    };
    // The simulated H200, offered by its own agent's key: a test double backs no ask.
    let host0 = dir.path().join("agent-0");
    let (status, json) = submit(&host0, "s1", "ask", "3.00", Some(HOST0_GPU));
    assert_eq!(status, 2, "{json}");
    assert!(
        json["error"]
            .as_str()
            .unwrap()
            .contains("simulated test double"),
        "{json}"
    );
    // Crossing orders clear on the validator's clock (every 0.3 s), with no manual clear.
    for (data, id, side, price, gpu) in [
        (&renter, "r1", "bid", "4.00", None),
        (&provider, "p1", "ask", "3.00", Some("GPU-p1")),
    ] {
        let (status, json) = submit(data, id, side, price, gpu);
        assert_eq!(status, 0, "{json}");
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let clearings = loop {
        let (_, json) = pog(&["market", "--json", "--validator", &v.url, "history"]);
        let clearings = json["clearings"].as_array().cloned().unwrap_or_default();
        if !clearings.is_empty() || std::time::Instant::now() > deadline {
            break clearings;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(clearings.len(), 1);
    assert_eq!(clearings[0]["clearing"]["units"], 1);
}

#[test]
fn clear_every_is_checked() {
    for bad in ["-1", "0.01", "NaN", "100000"] {
        let out = Command::cargo_bin("pog")
            .unwrap()
            .args(["validator", &format!("--clear-every={bad}")])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("--clear-every"));
    }
}

/// `pog validator --escrow-rpc --escrow-contract --escrow-key-file`: a bid is taken only once
/// its owner key's deposit in the escrow (on a real anvil) covers it; the settlement key must
/// be the escrow's, or the validator does not start.
#[test]
fn bids_are_backed_by_deposits_in_the_escrow_on_chain() {
    use pog_anchor::testing::{dev_keys, evm_tools, Anvil};
    let anvil = Anvil::start();
    let dir = tempfile::tempdir().unwrap();
    let rpc = pog_anchor::RpcUrl::parse(&anvil.url).unwrap();
    let keys = dev_keys(dir.path(), 2);
    let tools = evm_tools();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let code = |name: &str| pog_anchor::read_bytecode(&tools.bin_of(name)).unwrap();
    let usd = pog_anchor::parse_address(
        &rt.block_on(pog_anchor::deploy(&rpc, &keys[0], &code("TestUsd")))
            .unwrap()
            .address,
    )
    .unwrap();
    let escrow = rt
        .block_on(pog_anchor::escrow::deploy_escrow(
            &rpc,
            &keys[0],
            &code("GpuEscrow"),
            usd,
            keys[0].address(),
            3600,
        ))
        .unwrap()
        .address;
    // Settling through the escrow takes its settlement key: another key is refused at start,
    // naming both.
    let other_key = pog_anchor::testing::dev_key_file(dir.path(), "not-the-settler", 1);
    let out = Command::cargo_bin("pog")
        .unwrap()
        .args(["validator", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("refused"))
        .args(["--escrow-rpc", &anvil.url, "--escrow-contract", &escrow])
        .arg("--escrow-key-file")
        .arg(&other_key)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains("is settled by") && said.contains(&keys[0].address().to_string()),
        "{said}"
    );
    let settler_key = pog_anchor::testing::dev_key_file(dir.path(), "settler", 0);
    let v = Network::in_dir(dir.path())
        .flags(&["--escrow-rpc", &anvil.url, "--escrow-contract", &escrow])
        .flags(&["--escrow-key-file", settler_key.to_str().unwrap()])
        .start()
        .validator;
    assert!(
        !v.service.lines().iter().any(|l| l.contains("NOT paid")),
        "{:?}",
        v.service.lines()
    );
    let renter = dir.path().join("renter");
    let bid = |id: &str| {
        pog(&[
            "market",
            "--json",
            "--validator",
            &v.url,
            "--data-dir",
            renter.to_str().unwrap(),
            "submit",
            "--id",
            id,
            "--side",
            "bid",
            "--class",
            "H200 SXM",
            "--quantity",
            "2",
            "--price",
            "3.00",
        ])
    };
    let (status, json) = bid("r1");
    assert_eq!(status, 2, "{json}");
    assert!(
        json["error"]
            .as_str()
            .unwrap()
            .contains("more than its deposit of 0"),
        "{json}"
    );
    // The renter's wallet deposits $6 for its pog key (the market's key in its data dir).
    let renter_key = pog_net::keys::load_or_create(&renter.join("agent.key"))
        .unwrap()
        .public_key();
    let wallet = pog_anchor::escrow::Escrow::new(
        &rpc,
        pog_anchor::parse_address(&escrow).unwrap(),
        Some(&keys[1]),
    )
    .unwrap();
    rt.block_on(pog_anchor::testing::mint_test_usd(
        &anvil.url,
        usd,
        1,
        keys[1].address(),
        6_000_000,
    ));
    rt.block_on(wallet.deposit(&renter_key, 6_000_000)).unwrap();
    let (status, json) = bid("r1");
    assert_eq!(status, 0, "{json}");
    // The deposit is spent by the open bid: another is refused.
    let (status, json) = bid("r2");
    assert_eq!(status, 2, "{json}");
    assert!(
        json["error"].as_str().unwrap().contains("12000000"),
        "{json}"
    );

    // A withdrawal: nothing is free of the open bid; once it is cancelled, the renter's key
    // gets a voucher the settlement key signed, which the account's owner (the wallet that
    // deposited) submits.
    let market = |args: &[&str]| {
        let mut all = vec![
            "market",
            "--json",
            "--validator",
            &v.url,
            "--data-dir",
            renter.to_str().unwrap(),
        ];
        all.extend_from_slice(args);
        pog(&all)
    };
    let (status, json) = market(&["withdraw", "--amount", "2"]);
    assert_eq!(status, 2, "{json}");
    assert!(json["error"].as_str().unwrap().contains("402"), "{json}");
    assert_eq!(market(&["cancel", "--id", "r1"]).0, 0);
    let (status, voucher) = market(&["withdraw", "--amount", "2"]);
    assert_eq!(status, 0, "{voucher}");
    assert_eq!(voucher["schema"], "pog.market.withdraw/1");
    assert_eq!(voucher["amount_micro_usd"], 2_000_000);
    assert_eq!(voucher["nonce"], 0);
    let withdrawal = pog_anchor::escrow::withdrawal_of(
        &renter_key,
        2_000_000,
        0,
        voucher["expires_at_s"].as_u64().unwrap(),
    );
    let signature = hex::decode(
        voucher["signature"]
            .as_str()
            .unwrap()
            .trim_start_matches("0x"),
    )
    .unwrap();
    rt.block_on(wallet.withdraw(&withdrawal, &signature))
        .unwrap();
    let account = rt.block_on(wallet.account_of(&renter_key)).unwrap();
    assert_eq!((account.balance, account.withdrawals), (4_000_000, 1));
    // The settlements of this key: none yet (no lease), the page signed by the validator.
    let (status, page) = market(&["settlements"]);
    assert_eq!(status, 0, "{page}");
    assert_eq!(page["settlements"].as_array().unwrap().len(), 0, "{page}");
}

/// A `pog validator` killed with SIGKILL while it clears (issue 22): a clearing of 40
/// GPU-hours, one lease per GPU, whose request is sent and the process killed at points
/// through the time a clearing took (before it is judged, while its leases are signed into
/// the ledger, after), then restarted. Each time: every lease of every clearing stored is in
/// the ledger exactly once (those the crash kept from it logged at the restart), and none
/// else; a stored clearing's orders have left the book, one the crash came before left both
/// open and whole (cancelled then, for the next round).
#[test]
fn a_validator_killed_while_it_clears_loses_no_lease_and_logs_none_twice() {
    use common::{http_get, ValidatorProcess};
    use std::collections::BTreeMap;
    use std::time::{Duration, Instant};
    const GPUS: usize = 40;
    let dir = tempfile::tempdir().unwrap();
    let renter = dir.path().join("renter");
    let data = dir.path().join("validator");
    let flags = ["--challenge-every", "3600"];
    // A validator challenges every GPU registered as it starts, and one at no endpoint fails:
    // a round's GPUs are registered once that round has taken its GPUs, which its challenge
    // of a canary GPU, registered before each start, says.
    let canary = pog_net::keys::load_or_create(&dir.path().join("canary/agent.key")).unwrap();
    let start = |starts: usize, start: &dyn Fn() -> ValidatorProcess| {
        let name = format!("GPU-canary-{starts}");
        register_proven_h200(&data, &canary.public_key(), &name);
        let v = start();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !v.service.stderr().contains(&name) {
            assert!(
                Instant::now() < deadline,
                "{name} not challenged: {}",
                v.service.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        v
    };
    let mut v = start(0, &|| {
        Network::in_dir(dir.path()).flags(&flags).start().validator
    });
    let operator = pog_net::keys::load_or_create(&data.join("validator.key")).unwrap();
    let mut all_gpus = Vec::new();
    let mut took = Duration::ZERO;
    // Round 0 is not killed: it measures how long a clearing takes to answer.
    for (round, fraction) in [None, Some(0.05), Some(0.3), Some(0.6), Some(0.9)]
        .into_iter()
        .enumerate()
    {
        // A provider of its own each round (a key holds at most 64 GPUs).
        let provider = dir.path().join(format!("provider-{round}"));
        let provider_key = pog_net::keys::load_or_create(&provider.join("agent.key")).unwrap();
        let gpus: Vec<String> = (0..GPUS)
            .map(|i| format!("GPU-crash-{round}-{i}"))
            .collect();
        for gpu in &gpus {
            register_proven_h200(&data, &provider_key.public_key(), gpu);
        }
        all_gpus.extend(gpus.iter().cloned());
        let market = |url: &str, dir: &PathBuf, args: &[&str]| {
            let mut all = vec!["market", "--json", "--validator", url, "--data-dir"];
            all.push(dir.to_str().unwrap());
            all.extend_from_slice(args);
            pog(&all)
        };
        let (ask, bid) = (format!("a{round}"), format!("b{round}"));
        let quantity = GPUS.to_string();
        let mut args = vec![
            "submit", "--id", &ask, "--side", "ask", "--class", "H200 SXM",
        ];
        args.extend(["--quantity", &quantity, "--price", "3.00"]);
        for gpu in &gpus {
            args.extend(["--gpu", gpu]);
        }
        let (status, json) = market(&v.url, &provider, &args);
        assert_eq!(status, 0, "the ask: {json}");
        let args = [
            "submit", "--id", &bid, "--side", "bid", "--class", "H200 SXM",
        ];
        let args = [&args[..], &["--quantity", &quantity, "--price", "4.00"]].concat();
        let (status, json) = market(&v.url, &renter, &args);
        assert_eq!(status, 0, "the bid: {json}");
        let before = history(&v.addr).len();
        let request = clear_request(&operator);
        let sent = Instant::now();
        let mut socket = post(&v.addr, "/v1/market/clear", &request);
        let Some(fraction) = fraction else {
            let mut answer = String::new();
            std::io::Read::read_to_string(&mut socket, &mut answer).unwrap();
            assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
            took = sent.elapsed();
            continue;
        };
        std::thread::sleep(took.mul_f64(fraction));
        v.service.kill();
        let killed_after = sent.elapsed();
        // Read as the crash left it (a torn last entry may keep it from being read until the
        // validator opens it again).
        let logged_at_kill = ledger_leases(&data, &gpus)
            .map_or_else(|e| format!("unreadable ({e})"), |ids| ids.len().to_string());
        v = start(round, &|| ValidatorProcess::start(&data, &flags));
        let clearings = history(&v.addr);
        let stored = clearings.len() > before;
        eprintln!(
            "round {round}: killed {killed_after:?} after the request (a clearing took {took:?}): \
             clearing stored: {stored}, {logged_at_kill} of its {GPUS} leases logged then"
        );
        // Every lease of every clearing, in the ledger once; nothing else there.
        let mut in_history: Vec<String> = clearings
            .iter()
            .flat_map(|c| c["leases"].as_array().unwrap().iter())
            .map(|l| l["id"].as_str().unwrap().to_string())
            .collect();
        in_history.sort();
        assert_eq!(
            ledger_leases(&data, &all_gpus),
            Ok(in_history),
            "round {round}"
        );
        let book: serde_json::Value =
            serde_json::from_str(&http_get(&v.addr, "/v1/market/book").unwrap().1).unwrap();
        let open: BTreeMap<String, u64> = ["bids", "asks"]
            .iter()
            .flat_map(|side| book[side].as_array().unwrap().iter())
            .map(|o| {
                (
                    o["id"].as_str().unwrap().to_string(),
                    o["quantity"].as_u64().unwrap(),
                )
            })
            .collect();
        if stored {
            let clearing = clearings.last().unwrap();
            assert_eq!(
                clearing["leases"].as_array().unwrap().len(),
                GPUS,
                "{clearing}"
            );
            assert!(open.is_empty(), "round {round}: {open:?}");
        } else {
            let whole = BTreeMap::from([(ask.clone(), GPUS as u64), (bid.clone(), GPUS as u64)]);
            assert_eq!(open, whole, "round {round}");
            assert_eq!(market(&v.url, &provider, &["cancel", "--id", &ask]).0, 0);
            assert_eq!(market(&v.url, &renter, &["cancel", "--id", &bid]).0, 0);
        }
    }
}
