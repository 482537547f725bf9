//! `pog ledger`, `pog witness` and `pog verify` end to end through the binary: records signed
//! by a validator and an agent appended, a checkpoint cosigned by two witnesses (each with its
//! own data dir), one GPU's bundle exported and verified with only the public keys; then a
//! tampered bundle, a rollback and a fork fail (exit 1) with the problem named, a malformed
//! bundle is an error (exit 2), and a witness refuses a rewritten history.

mod common;

use common::*;
use pog_signed::Identity;
use serde_json::Value;
use std::path::Path;

/// Gets a cosignature from the witness whose data dir is `witness` for the ledger's latest
/// checkpoint, given the size it last cosigned, and attaches it.
fn cosign(data: &Path, witness: &Path, old: u64, log_vkey: &str, tmp: &Path) -> Value {
    let request = pog_json(
        data,
        &["ledger", "witness-request", "--old", &old.to_string()],
        0,
    );
    let file = tmp.join("request");
    write(&file, request["request"].as_str().unwrap());
    let answer = pog_json(
        witness,
        &[
            "witness",
            "cosign",
            file.to_str().unwrap(),
            "--log-key",
            log_vkey,
        ],
        0,
    );
    let line = answer["cosignature"].as_str().unwrap().to_string();
    pog_json(data, &["ledger", "add-cosignature", &line], 0);
    answer
}

#[test]
fn export_verify_and_tampering_through_the_binary() {
    let tmp = tempfile::tempdir().unwrap();
    let data = validator_dir(tmp.path(), "validator");
    let validator = Identity::from_seed(VALIDATOR_SEED);
    let agent = Identity::from_seed([0x43; 32]);
    let witnesses = [tmp.path().join("w1"), tmp.path().join("w2")];

    // Records in, checkpoint out, cosigned by both witnesses.
    let batch = tmp.path().join("batch1.json");
    write(
        &batch,
        &Value::Array(records(&validator, &agent, 0, 3)).to_string(),
    );
    let appended = pog_json(&data, &["ledger", "append", batch.to_str().unwrap()], 0);
    assert_eq!(appended["size"], 10);
    let log_vkey = pog_json(&data, &["ledger", "vkey"], 0)["vkey"]
        .as_str()
        .unwrap()
        .to_string();
    let cp1 = pog_json(&data, &["ledger", "checkpoint"], 0);
    assert_eq!(cp1["size"], 10);
    let kept = tmp.path().join("kept.checkpoint");
    write(&kept, cp1["checkpoint"].as_str().unwrap());
    let mut witness_vkeys = Vec::new();
    for w in &witnesses {
        cosign(&data, w, 0, &log_vkey, tmp.path());
        witness_vkeys.push(
            pog_json(w, &["witness", "vkey"], 0)["vkey"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }

    // More records, a new checkpoint the witnesses cosign from size 10.
    let batch2 = tmp.path().join("batch2.json");
    write(
        &batch2,
        &Value::Array(records(&validator, &agent, 3, 2)).to_string(),
    );
    pog_json(&data, &["ledger", "append", batch2.to_str().unwrap()], 0);
    pog_json(&data, &["ledger", "checkpoint"], 0);
    for w in &witnesses {
        let answer = cosign(&data, w, 10, &log_vkey, tmp.path());
        assert_eq!(answer["size"], 16);
    }

    // Export with a consistency proof from the kept checkpoint, and verify with only keys.
    let bundle = tmp.path().join("bundle.json");
    let exported = pog_json(
        &data,
        &[
            "ledger",
            "export",
            "--gpu",
            GPU,
            "--since",
            "10",
            "-o",
            bundle.to_str().unwrap(),
        ],
        0,
    );
    assert_eq!(exported["records"], 11);
    let holder = tmp.path().join("holder");
    let verify = |bundle: &Path, extra: &[&str], status: i32| {
        let mut args = vec![
            "verify",
            bundle.to_str().unwrap(),
            "--log-key",
            &log_vkey,
            "--witness",
            &witness_vkeys[0],
            "--witness",
            &witness_vkeys[1],
        ];
        args.extend_from_slice(extra);
        pog_json(&holder, &args, status)
    };
    // Cosigned, but without the log's tiles nothing shows the GPU's newest records are all
    // there: not a pass unless told to accept that, and then said so.
    let unread = verify(&bundle, &["--since", kept.to_str().unwrap()], 1);
    assert_eq!(unread["verdict"], "fail", "{unread:#}");
    assert_eq!(unread["problems"].as_array().unwrap().len(), 0);
    let missed: Vec<&str> = unread["unchecked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["what"].as_str().unwrap())
        .collect();
    assert_eq!(missed, ["that no newer record was left out"]);
    let ok = verify(
        &bundle,
        &["--since", kept.to_str().unwrap(), "--accept-unwitnessed"],
        0,
    );
    assert_eq!(ok["verdict"], "warn");
    assert_eq!(ok["records"].as_array().unwrap().len(), 11);
    assert_eq!(ok["cosigned_by"].as_array().unwrap().len(), 2);
    // With the log's key alone, a fork signed with that key would verify as well: the table
    // says what could not be checked, and the bundle fails.
    let table = pog(
        &holder,
        &["verify", bundle.to_str().unwrap(), "--log-key", &log_vkey],
    );
    assert_eq!(table.status.code(), Some(1));
    let out = String::from_utf8_lossy(&table.stdout);
    assert!(
        out.contains("not checked: that the log did not fork"),
        "{out}"
    );
    assert!(out.contains("verdict: FAIL"), "{out}");

    // While a writer (the validator) holds the ledger, reading commands work and writing ones
    // are refused with the reason.
    {
        let _writer = pog_ledger::store::Ledger::open(&data.join("ledger")).unwrap();
        let again = tmp.path().join("again.json");
        pog_json(
            &data,
            &[
                "ledger",
                "export",
                "--gpu",
                GPU,
                "-o",
                again.to_str().unwrap(),
            ],
            0,
        );
        pog_json(&data, &["ledger", "prove", "--inclusion", "0"], 0);
        let refused = pog_json(&data, &["ledger", "checkpoint"], 2);
        assert!(
            refused["error"]
                .as_str()
                .unwrap()
                .contains("another process"),
            "{refused}"
        );
    }

    // A static mirror of the log, for a plain web server.
    let www = tmp.path().join("www");
    let mirrored = pog_json(&data, &["ledger", "mirror", www.to_str().unwrap()], 0);
    assert_eq!(mirrored["size"], 16);
    assert!(www.join("checkpoint").is_file() && www.join("tile/entries/000.p/16").is_file());

    // Proofs on the command line.
    let inclusion = pog_json(&data, &["ledger", "prove", "--inclusion", "3"], 0);
    assert_eq!(inclusion["size"], 16);
    assert!(!inclusion["proof"].as_array().unwrap().is_empty());
    let consistency = pog_json(&data, &["ledger", "prove", "--consistency", "10"], 0);
    assert_eq!(consistency["old_size"], 10);

    let original: Value = serde_json::from_slice(&std::fs::read(&bundle).unwrap()).unwrap();
    let tampered = |name: &str, edit: &dyn Fn(&mut Value)| {
        let mut v = original.clone();
        edit(&mut v);
        let path = tmp.path().join(name);
        write(&path, &v.to_string());
        path
    };
    let problems = |report: &Value| -> Vec<String> {
        report["problems"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["problem"].as_str().unwrap().to_string())
            .collect()
    };

    // One byte changed in a record's signed body.
    let changed = tmp.path().join("changed.json");
    let mut b = pog_ledger::bundle::Bundle::parse(&std::fs::read(&bundle).unwrap()).unwrap();
    let last = b.records[2].entry.len() - 3;
    b.records[2].entry[last] ^= 0x01;
    write(&changed, &b.to_json());
    let report = verify(&changed, &[], 1);
    assert_eq!(problems(&report), ["not_included", "modified"]);
    assert!(report["summary"].as_str().unwrap().contains("was modified"));

    // A record dropped, records reordered.
    let dropped = tampered("dropped.json", &|v| {
        v["records"].as_array_mut().unwrap().remove(4);
    });
    assert_eq!(problems(&verify(&dropped, &[], 1)), ["dropped"]);
    let reordered = tampered("reordered.json", &|v| {
        v["records"].as_array_mut().unwrap().swap(5, 6);
    });
    assert!(problems(&verify(&reordered, &[], 1)).contains(&"reordered".to_string()));

    // Rolled back: the holder kept the newer checkpoint, the log serves the older tree.
    let newer = tmp.path().join("newer.checkpoint");
    write(&newer, original["checkpoint"].as_str().unwrap());
    let old_bundle = tampered("old.json", &|v| {
        v["checkpoint"] = Value::String(std::fs::read_to_string(&kept).unwrap());
        v["records"] = Value::Array(vec![]);
        v.as_object_mut().unwrap().remove("consistency");
    });
    let report = verify(
        &old_bundle,
        &["--since", newer.to_str().unwrap(), "--quorum", "0"],
        1,
    );
    // (It holds no record either: an empty bundle proves nothing and fails on its own.)
    assert_eq!(problems(&report), ["no_records", "rollback"]);

    // The newest records dropped from a later export: only a holder who kept the earlier
    // bundle can tell, with --since-bundle.
    let earlier = tmp.path().join("earlier.json");
    std::fs::copy(&bundle, &earlier).unwrap();
    let batch3 = tmp.path().join("batch3.json");
    write(
        &batch3,
        &Value::Array(records(&validator, &agent, 5, 1)).to_string(),
    );
    pog_json(&data, &["ledger", "append", batch3.to_str().unwrap()], 0);
    pog_json(&data, &["ledger", "checkpoint"], 0);
    let later = tmp.path().join("later.json");
    pog_json(
        &data,
        &[
            "ledger",
            "export",
            "--gpu",
            GPU,
            "--since",
            "16",
            "-o",
            later.to_str().unwrap(),
        ],
        0,
    );
    let report = verify(
        &later,
        &[
            "--since-bundle",
            earlier.to_str().unwrap(),
            "--quorum",
            "0",
            "--accept-unwitnessed",
        ],
        0,
    );
    assert_eq!(report["records"].as_array().unwrap().len(), 13);
    let mut cut: Value = serde_json::from_slice(&std::fs::read(&later).unwrap()).unwrap();
    cut["records"].as_array_mut().unwrap().truncate(9);
    let cut_file = tmp.path().join("cut.json");
    write(&cut_file, &cut.to_string());
    let report = verify(&cut_file, &["--quorum", "0", "--accept-unwitnessed"], 0);
    assert_eq!(
        report["problems"].as_array().unwrap().len(),
        0,
        "a cut chain is valid on its own"
    );
    // ... which is why, without the log's tiles, verify does not pass it unless told to.
    assert_eq!(report["verdict"], "warn");
    let report = verify(
        &cut_file,
        &["--since-bundle", earlier.to_str().unwrap(), "--quorum", "0"],
        1,
    );
    assert_eq!(problems(&report), ["missing_since", "missing_since"]);
    // Without the earlier bundle, the log's own tail tells: a mirror of it holds the GPU's
    // four records the cut bundle leaves out.
    let tail = tmp.path().join("tail-mirror");
    pog_json(&data, &["ledger", "mirror", tail.to_str().unwrap()], 0);
    let report = verify(
        &cut_file,
        &["--log", tail.to_str().unwrap(), "--quorum", "0"],
        1,
    );
    assert_eq!(problems(&report), ["missing_newest"; 4], "{report:#}");
    // The later checkpoint was never cosigned: with --quorum 0 nothing vouches against a fork.
    let report = verify(
        &later,
        &[
            "--log",
            tail.to_str().unwrap(),
            "--quorum",
            "0",
            "--accept-unwitnessed",
        ],
        0,
    );
    assert_eq!(report["verdict"], "warn", "{report:#}");
    assert_eq!(report["unchecked"][0]["what"], "that the log did not fork");
    let missing = tmp.path().join("no-such-mirror");
    verify(
        &later,
        &["--log", missing.to_str().unwrap(), "--quorum", "0"],
        2,
    );

    // A malformed bundle is an error, not a verdict.
    let garbage = tmp.path().join("garbage.json");
    write(&garbage, "{\"format\": \"pog-ledger-bundle/v1\"");
    let report = verify(&garbage, &[], 2);
    assert_eq!(report["verdict"], "error");

    // A fork: a second ledger signed with the same key, whose size-10 tree differs. The holder
    // with the kept checkpoint sees a fork; the witnesses refuse to cosign it.
    let fork = validator_dir(tmp.path(), "fork");
    let mut forged = records(&validator, &agent, 0, 3);
    forged.swap(1, 2);
    let forged_file = tmp.path().join("forged.json");
    write(&forged_file, &Value::Array(forged).to_string());
    let origin = cp1["origin"].as_str().unwrap();
    pog_json(
        &fork,
        &[
            "ledger",
            "--origin",
            origin,
            "append",
            forged_file.to_str().unwrap(),
        ],
        0,
    );
    pog_json(&fork, &["ledger", "--origin", origin, "checkpoint"], 0);
    let fork_bundle = tmp.path().join("fork-bundle.json");
    pog_json(
        &fork,
        &[
            "ledger",
            "--origin",
            origin,
            "export",
            "--gpu",
            GPU,
            "-o",
            fork_bundle.to_str().unwrap(),
        ],
        0,
    );
    let report = verify(
        &fork_bundle,
        &["--since", kept.to_str().unwrap(), "--quorum", "0"],
        1,
    );
    assert_eq!(problems(&report), ["fork"]);
    let request = pog_json(
        &fork,
        &[
            "ledger",
            "--origin",
            origin,
            "witness-request",
            "--old",
            "0",
        ],
        0,
    );
    let file = tmp.path().join("fork-request");
    write(&file, request["request"].as_str().unwrap());
    let refused = pog_json(
        &witnesses[0],
        &[
            "witness",
            "cosign",
            file.to_str().unwrap(),
            "--log-key",
            &log_vkey,
        ],
        1,
    );
    assert!(
        refused["refused"].as_str().unwrap().contains("rolled back"),
        "{refused}"
    );
}

#[test]
fn two_witnesses_over_loopback_cosign_growth_and_refuse_a_fork() {
    let tmp = tempfile::tempdir().unwrap();
    let data = validator_dir(tmp.path(), "validator");
    let validator = Identity::from_seed(VALIDATOR_SEED);
    let agent = Identity::from_seed([0x43; 32]);
    let log_vkey = pog_json(&data, &["ledger", "vkey"], 0)["vkey"]
        .as_str()
        .unwrap()
        .to_string();
    let origin = log_vkey.split('+').next().unwrap().to_string();
    let dirs = [tmp.path().join("w1"), tmp.path().join("w2")];
    let mut servers: Vec<Server> = dirs.iter().map(|d| witness_server(d, &log_vkey)).collect();
    let publish = |servers: &[Server], data: &Path, status: i32| {
        let targets: Vec<String> = servers
            .iter()
            .map(|s| format!("{}={}", s.url, s.vkey))
            .collect();
        let mut args = vec!["ledger", "--origin", &origin, "publish"];
        for t in &targets {
            args.extend_from_slice(&["--witness", t]);
        }
        pog_json(data, &args, status)
    };

    // Two rounds of growth, each checkpoint cosigned by both witnesses over HTTP.
    for (round, (first, n)) in [(0u64, 2u64), (2, 3)].into_iter().enumerate() {
        let batch = tmp.path().join(format!("batch{round}.json"));
        write(
            &batch,
            &Value::Array(records(&validator, &agent, first, n)).to_string(),
        );
        pog_json(&data, &["ledger", "append", batch.to_str().unwrap()], 0);
        pog_json(&data, &["ledger", "checkpoint"], 0);
        let published = publish(&servers, &data, 0);
        assert_eq!(published["verdict"], "pass", "{published}");
    }
    let bundle = tmp.path().join("bundle.json");
    pog_json(
        &data,
        &[
            "ledger",
            "export",
            "--gpu",
            GPU,
            "-o",
            bundle.to_str().unwrap(),
        ],
        0,
    );
    let holder = tmp.path().join("holder");
    let report = pog_json(
        &holder,
        &[
            "verify",
            bundle.to_str().unwrap(),
            "--log-key",
            &log_vkey,
            "--witness",
            &servers[0].vkey,
            "--witness",
            &servers[1].vkey,
            "--accept-unwitnessed",
        ],
        0,
    );
    assert_eq!(report["cosigned_by"].as_array().unwrap().len(), 2);

    // A split view: the same key signs another history of the same size for someone else.
    // Both witnesses refuse it, also after a restart (their state was kept on disk).
    let fork = validator_dir(tmp.path(), "fork");
    let mut forged = records(&validator, &agent, 0, 5);
    forged.swap(2, 3);
    let forged_file = tmp.path().join("forged.json");
    write(&forged_file, &Value::Array(forged).to_string());
    pog_json(
        &fork,
        &[
            "ledger",
            "--origin",
            &origin,
            "append",
            forged_file.to_str().unwrap(),
        ],
        0,
    );
    pog_json(&fork, &["ledger", "--origin", &origin, "checkpoint"], 0);
    servers[0] = witness_server(&dirs[0], &log_vkey);
    let refused = publish(&servers, &fork, 1);
    let answers = refused["witnesses"].as_array().unwrap();
    assert_eq!(answers.len(), 2);
    for a in answers {
        assert_eq!(a["cosigned"], false);
        assert_eq!(a["status"], 422, "{a}");
        assert!(a["answer"].as_str().unwrap().starts_with("fork"), "{a}");
    }
    // The honest log keeps growing and is cosigned still.
    let batch = tmp.path().join("batch-late.json");
    write(
        &batch,
        &Value::Array(records(&validator, &agent, 5, 1)).to_string(),
    );
    pog_json(&data, &["ledger", "append", batch.to_str().unwrap()], 0);
    pog_json(&data, &["ledger", "checkpoint"], 0);
    assert_eq!(publish(&servers, &data, 0)["verdict"], "pass");
}

#[test]
fn a_running_validator_logs_its_records_and_witnesses_cosign_them() {
    let tmp = tempfile::tempdir().unwrap();
    let data = validator_dir(tmp.path(), "validator");
    let log_vkey = pog_json(&data, &["ledger", "vkey"], 0)["vkey"]
        .as_str()
        .unwrap()
        .to_string();
    let w1 = witness_server(&tmp.path().join("w1"), &log_vkey);
    let w2 = witness_server(&tmp.path().join("w2"), &log_vkey);
    // A checkpoint every 0.5 s asks each witness up to 240 times a minute (a 409 and its
    // retry each): past the default budget of 12, checkpoints would wait for their quorum and
    // the last one at stop would not be published.
    let mut net = Network::in_dir(tmp.path())
        .flags(&["--challenge-every", "1", "--checkpoint-every", "0.5"])
        .flags(&["--witness-requests-per-minute", "600"])
        .flags(TEST_ROUNDS)
        .flags(&[
            "--witness",
            &format!("{}={}", w1.url, w1.vkey),
            "--witness",
            &format!("{}={}", w2.url, w2.vkey),
        ])
        .agent(HOST0, &[])
        .start();
    let addr = net.validator.addr.clone();

    // Rounds until the GPU has three proof rounds stored, then a checkpoint covering them,
    // cosigned by both witnesses, at /ledger/checkpoint.
    let uuid = HOST0_GPU;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    let stored = loop {
        let page: Value = http_get(&addr, &format!("/v1/records/{uuid}"))
            .and_then(|(_, body)| serde_json::from_str(&body).ok())
            .unwrap_or_default();
        let records = page["records"].as_array().cloned().unwrap_or_default();
        if records
            .iter()
            .filter(|r| r["envelope"]["kind"] == "record")
            .count()
            >= 3
        {
            break records;
        }
        assert!(std::time::Instant::now() < deadline, "no 3 rounds: {page}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let witness_names: Vec<String> = [&w1, &w2]
        .iter()
        .map(|w| w.vkey.split('+').next().unwrap().to_string())
        .collect();
    let checkpoint = loop {
        if let Some((200, text)) = http_get(&addr, "/ledger/checkpoint") {
            let size: u64 = text.lines().nth(1).unwrap().parse().unwrap();
            let cosigned = witness_names
                .iter()
                .all(|n| text.contains(&format!("\u{2014} {n} ")));
            if size >= stored.len() as u64 && cosigned {
                break text;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no cosigned checkpoint"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    };

    // A monitor following the running validator's log finds nothing to alert on: every
    // record signed by the key that may sign it (the agent's reports by the agent its
    // registration names), rounds coming.
    let monitored = pog_json(
        &tmp.path().join("monitor"),
        &[
            "ledger",
            "monitor",
            &format!("http://{addr}/ledger"),
            "--log-key",
            &log_vkey,
            "--once",
            "--allow-private",
        ],
        0,
    );
    assert_eq!(monitored["alerts"], serde_json::json!([]), "{monitored}");
    assert!(monitored["size"].as_u64().unwrap() >= stored.len() as u64);

    // One GPU's bundle, exported beside the running validator, verifies with the keys, the
    // witnesses' quorum and the validator's own tiles (no record of the GPU after the bundle's).
    let tiles = format!("http://{addr}/ledger/");
    let bundle = tmp.path().join("bundle.json");
    let exported = pog_json(
        &data,
        &[
            "ledger",
            "export",
            "--gpu",
            uuid,
            "-o",
            bundle.to_str().unwrap(),
        ],
        0,
    );
    let holder = tmp.path().join("holder");
    let verify = |bundle: &Path, status: i32| {
        let args = [
            "verify",
            bundle.to_str().unwrap(),
            "--log-key",
            &log_vkey,
            "--witness",
            &w1.vkey,
            "--witness",
            &w2.vkey,
            "--quorum",
            "2",
            "--log",
            &tiles,
        ];
        pog_json(&holder, &args, status)
    };
    let report = verify(&bundle, 0);
    assert_eq!(report["verdict"], "pass", "{report:#}");
    assert_eq!(report["cosigned_by"].as_array().unwrap().len(), 2);
    let records = report["records"].as_array().unwrap();
    assert!(records.len() >= stored.len(), "{exported} {report:#}");
    let kinds: Vec<&str> = records
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    for kind in ["registration", "proof_round", "memory_round"] {
        assert!(kinds.contains(&kind), "{kinds:?}");
    }
    // What the API stored is what the log holds, in the same order (the log also holds the
    // scores, prices and GPU states the pricing logs, which the registry does not keep).
    let b = pog_ledger::bundle::Bundle::parse(&std::fs::read(&bundle).unwrap()).unwrap();
    let logged = b
        .records
        .iter()
        .map(|r| pog_ledger::entry::Entry::parse(&r.entry).unwrap())
        .filter(|e| {
            use pog_signed::RecordKind;
            !matches!(
                e.kind,
                RecordKind::Score | RecordKind::Price | RecordKind::GpuState
            )
        });
    for (entry, envelope) in logged.zip(stored.iter().map(|r| &r["envelope"])) {
        assert_eq!(entry.body, envelope["body"].as_str().unwrap());
    }
    assert!(b.checkpoint.checkpoint.size >= checkpoint.lines().nth(1).unwrap().parse().unwrap());

    // A tampered copy fails, naming what was wrong.
    let mut changed = b.clone();
    let at = changed.records[1].entry.len() - 2;
    changed.records[1].entry[at] ^= 0x01;
    let path = tmp.path().join("changed.json");
    write(&path, &changed.to_json());
    let report = verify(&path, 1);
    let problems: Vec<&str> = report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["problem"].as_str().unwrap())
        .collect();
    assert_eq!(problems, ["not_included", "modified"], "{report:#}");
    let mut dropped = b.clone();
    dropped.records.remove(1);
    let path = tmp.path().join("dropped.json");
    write(&path, &dropped.to_json());
    let report = verify(&path, 1);
    assert_eq!(report["problems"][0]["problem"], "dropped", "{report:#}");
    // The validator's own tiles show the GPU's newest record a bundle leaves out.
    let with_tail = |bundle: &Path, status: i32| {
        let args = [
            "verify",
            bundle.to_str().unwrap(),
            "--log-key",
            &log_vkey,
            "--log",
            &tiles,
            "--quorum",
            "0",
            "--accept-unwitnessed",
        ];
        pog_json(&holder, &args, status)
    };
    // Without a quorum nothing vouches against a fork: passed only when told to, and said so.
    let unwitnessed = with_tail(&bundle, 0);
    assert_eq!(unwitnessed["verdict"], "warn", "{unwitnessed:#}");
    assert_eq!(unwitnessed["accepted_unchecked"], true);
    assert!(unwitnessed["summary"]
        .as_str()
        .unwrap()
        .starts_with("UNCHECKED (--accept-unwitnessed)"));
    let mut newest_dropped = b.clone();
    newest_dropped.records.pop();
    let path = tmp.path().join("newest-dropped.json");
    write(&path, &newest_dropped.to_json());
    let report = with_tail(&path, 1);
    assert_eq!(
        report["problems"][0]["problem"], "missing_newest",
        "{report:#}"
    );

    // A bundle names its log (`export --log-url`), so a holder's verify reads the newest
    // records without being told where; but only at public addresses: a bundle naming one
    // inside the holder's network (here the loopback validator) is not read, and says why.
    let named = tmp.path().join("named.json");
    pog_json(
        &data,
        &[
            "ledger",
            "export",
            "--gpu",
            uuid,
            "--log-url",
            &tiles,
            "-o",
            named.to_str().unwrap(),
        ],
        0,
    );
    let mut named_dropped =
        pog_ledger::bundle::Bundle::parse(&std::fs::read(&named).unwrap()).unwrap();
    assert_eq!(named_dropped.log.as_deref(), Some(tiles.as_str()));
    named_dropped.records.pop();
    let named_dropped_path = tmp.path().join("named-dropped.json");
    write(&named_dropped_path, &named_dropped.to_json());
    let verify_dropped = |extra: &[&str]| {
        let mut args = vec![
            "verify",
            named_dropped_path.to_str().unwrap(),
            "--log-key",
            &log_vkey,
            "--witness",
            &w1.vkey,
            "--witness",
            &w2.vkey,
        ];
        args.extend_from_slice(extra);
        pog_json(&holder, &args, 1)
    };
    let inside = verify_dropped(&[]);
    assert_eq!(
        inside["problems"].as_array().unwrap().len(),
        0,
        "{inside:#}"
    );
    let why = inside["unchecked"][0]["why"].as_str().unwrap();
    assert!(
        why.contains("the bundle's log URL is refused") && why.contains("not a public address"),
        "{inside:#}"
    );
    // Named on the command line, the same URL is the holder's choice, and is read.
    let told = verify_dropped(&["--log", &tiles]);
    assert_eq!(told["problems"][0]["problem"], "missing_newest", "{told:#}");

    // A holder with nothing but the validator's URL and the keys: the GPU's history fetched
    // page by page from /v1/bundles/, verified, and kept; the next run checks only what is new.
    let fetcher = tmp.path().join("fetcher");
    let fetch = |status: i32| {
        let args = [
            "verify",
            "--validator",
            &format!("http://{addr}"),
            "--gpu",
            uuid,
            "--log-key",
            &log_vkey,
            "--witness",
            &w1.vkey,
            "--witness",
            &w2.vkey,
        ];
        pog_json(&fetcher, &args, status)
    };
    let first = fetch(0);
    assert_eq!(first["verdict"], "pass", "{first:#}");
    let all = first["records"].as_array().unwrap().len();
    assert!(all >= stored.len(), "{first:#}");
    assert!(
        first["summary"]
            .as_str()
            .unwrap()
            .contains("0 verified in earlier runs"),
        "{first:#}"
    );
    let second = fetch(0);
    assert_eq!(second["verdict"], "pass", "{second:#}");
    assert!(
        second["summary"]
            .as_str()
            .unwrap()
            .contains(&format!("{all} verified in earlier runs")),
        "only what is new is fetched: {second:#}"
    );
    assert!(second["size"].as_u64() >= first["size"].as_u64());
    // A state that is not the holder's own (here: damaged) is a clear error, not a pass.
    let states: Vec<_> = std::fs::read_dir(fetcher.join("verify"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(states.len(), 1, "{states:?}");
    write(&states[0], "{\"format\": \"something else\"}");
    let damaged = pog_json(
        &fetcher,
        &[
            "verify",
            "--validator",
            &format!("http://{addr}"),
            "--gpu",
            uuid,
            "--log-key",
            &log_vkey,
        ],
        2,
    );
    assert!(
        damaged.to_string().contains("is not a verify state"),
        "{damaged:#}"
    );

    // A clean stop signs a last checkpoint over everything logged.
    assert_eq!(net.validator.stop().code(), Some(0));
    let last = std::fs::read_to_string(data.join("ledger").join("checkpoint")).unwrap();
    let signed = pog_json(&data, &["ledger", "checkpoint"], 0);
    assert_eq!(
        last.lines().nth(1).unwrap(),
        signed["size"].to_string(),
        "the last checkpoint covers the whole log"
    );
}

/// A `POST` over loopback with a plain socket: the status code, the head and the body.
fn http_post(addr: &str, path: &str, body: &[u8]) -> (u16, String, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    s.write_all(body).unwrap();
    let mut response = String::new();
    s.read_to_string(&mut response).unwrap();
    let status = response.split_whitespace().nth(1).unwrap().parse().unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    (status, head.to_ascii_lowercase(), body.to_string())
}

/// `pog witness serve` over loopback: a flood of add-checkpoint requests for one log is
/// answered 429 with Retry-After past its budget (without the budget, each would be verified
/// and answered 409), and a monitor reads the latest cosigned checkpoint at
/// `GET /<origin hash>/checkpoint`, with the log's signature and the witness's cosignature.
#[test]
fn a_witness_bounds_a_flood_per_log_and_serves_monitors_its_latest_cosigned_checkpoint() {
    let tmp = tempfile::tempdir().unwrap();
    let data = validator_dir(tmp.path(), "validator");
    let batch = tmp.path().join("batch.json");
    write(
        &batch,
        &Value::Array(records(
            &Identity::from_seed(VALIDATOR_SEED),
            &Identity::from_seed([0x43; 32]),
            0,
            2,
        ))
        .to_string(),
    );
    pog_json(&data, &["ledger", "append", batch.to_str().unwrap()], 0);
    pog_json(&data, &["ledger", "checkpoint"], 0);
    let log_vkey = pog_json(&data, &["ledger", "vkey"], 0)["vkey"]
        .as_str()
        .unwrap()
        .to_string();
    let origin = log_vkey.split('+').next().unwrap().to_string();
    let request = pog_json(&data, &["ledger", "witness-request", "--old", "0"], 0)["request"]
        .as_str()
        .unwrap()
        .to_string();
    let witness_dir = tmp.path().join("w");
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("pog"))
        .arg("--data-dir")
        .arg(&witness_dir)
        .args([
            "witness",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--log-key",
            &log_vkey,
            "--requests-per-log-minute",
            "3",
        ])
        .env_remove("POG_DATA_DIR")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let words: Vec<&str> = line.split_whitespace().collect();
    let (witness_vkey, addr) = (words[1].to_string(), words[4].to_string());
    let monitoring = format!("/{}", pog_ledger::witness_service::monitoring_path(&origin));
    assert_eq!(http_get(&addr, &monitoring).unwrap().0, 404, "nothing yet");

    let answers: Vec<(u16, String, String)> = (0..8)
        .map(|_| http_post(&addr, "/add-checkpoint", request.as_bytes()))
        .collect();
    let _ = child.kill();
    let statuses: Vec<u16> = answers.iter().map(|a| a.0).collect();
    let kept = {
        let _ = child.wait();
        // Restarted, it serves the same checkpoint from its state on disk.
        witness_server(&witness_dir, &log_vkey)
    };
    assert_eq!(statuses, [200, 409, 409, 429, 429, 429, 429, 429]);
    for (_, head, _) in &answers[3..] {
        // A minute's worth is 3: one more in 20 s (less once a second has passed).
        let secs: u64 = head
            .split("retry-after: ")
            .nth(1)
            .and_then(|v| v.lines().next()?.trim().parse().ok())
            .unwrap_or_else(|| panic!("{head}"));
        assert!((1..=20).contains(&secs), "{head}");
    }
    let addr = kept.url.trim_start_matches("http://");
    let (status, text) = http_get(addr, &monitoring).unwrap();
    assert_eq!(status, 200);
    let served = pog_ledger::checkpoint::SignedCheckpoint::parse(text.as_bytes()).unwrap();
    served
        .verify(&pog_ledger::note::Verifier::parse(&log_vkey).unwrap())
        .unwrap();
    let cosigned =
        served.cosignatures(&[pog_ledger::note::Verifier::parse(&witness_vkey).unwrap()]);
    assert!(cosigned.len() == 1 && cosigned[0].1.is_ok(), "{text}");
    assert_eq!(served.checkpoint.size, 7);
    let other = format!("/{}", pog_ledger::witness_service::monitoring_path("other"));
    assert_eq!(http_get(addr, &other).unwrap().0, 404);
}
