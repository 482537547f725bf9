//! The protocol end to end over real sockets on loopback: a validator and agents as HTTP
//! services, with the CPU prover. The honest agent passes; every attack is refused.

use pog_node::agent::{self, Agent};
use pog_node::misbehaviour::Cheat;
use pog_node::provers::CpuEngine;
use pog_node::registry::Registry;
use pog_node::validator::{self, Policy, Validator};
use pog_proof::prover::Behaviour;
use pog_proof::wire::{self, kind, GpuClaim, Identity, OpenRequest, Register};
use pog_spec::Precision;
use std::sync::Arc;

const VALIDATOR_SEED: [u8; 32] = [1; 32];

fn policy() -> Policy {
    Policy {
        precision: Some(Precision::Int8),
        size: 32,
        batch: 2,
        leaf_elements: 64,
        expected_ms: 2_000.0,
        samples: 256,
        expiry_ms: 10_000,
        per_model: false,
    }
}

fn claim(uuid: &str) -> GpuClaim {
    GpuClaim {
        uuid: uuid.into(),
        model: "H200 SXM".into(),
        bus_id: "0000:00:06.0".into(),
        simulated: false,
    }
}

async fn listen() -> (tokio::net::TcpListener, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    (listener, url)
}

/// Starts a validator; returns it and its URL.
async fn start_validator() -> (Arc<Validator>, String) {
    let v = Arc::new(Validator::new(
        Identity::from_seed(VALIDATOR_SEED),
        Registry::open(None).unwrap(),
    ));
    let (listener, url) = listen().await;
    tokio::spawn(pog_node::http::serve(
        listener,
        validator::router(v.clone()),
    ));
    (v, url)
}

/// Starts an agent with its own key and these GPUs, registers it; returns its URL and the
/// registration's HTTP status.
async fn start_agent(
    validator_url: &str,
    seed: u8,
    gpus: Vec<GpuClaim>,
    behaviour: Behaviour,
    cheat: Option<Cheat>,
) -> (String, u16) {
    let registration_key = Identity::from_seed([seed; 32]);
    let agent = Arc::new(
        Agent::new(
            Identity::from_seed([seed; 32]),
            vec![Identity::from_seed(VALIDATOR_SEED).public_hex()],
            gpus.clone(),
            Arc::new(CpuEngine {
                behaviour: Behaviour::Honest,
            }),
        )
        .misbehaving(behaviour, cheat),
    );
    assert_eq!(agent.public_key(), registration_key.public_hex());
    let (listener, url) = listen().await;
    tokio::spawn(pog_node::http::serve(listener, agent::router(agent)));
    let register = Register {
        endpoint: url.clone(),
        gpus,
    };
    let response = reqwest::Client::new()
        .post(format!("{validator_url}/v1/register"))
        .json(&registration_key.seal(kind::REGISTER, &register).unwrap())
        .send()
        .await
        .unwrap();
    (url, response.status().as_u16())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_honest_agent_is_accepted_and_recorded() {
    let (v, vurl) = start_validator().await;
    let (_, status) = start_agent(
        &vurl,
        10,
        vec![claim("GPU-honest")],
        Behaviour::Honest,
        None,
    )
    .await;
    assert_eq!(status, 200);
    for precision in [Precision::Int8, Precision::Bf16, Precision::Fp32] {
        let record = v
            .challenge(
                "GPU-honest",
                &Policy {
                    precision: Some(precision),
                    ..policy()
                },
            )
            .await
            .unwrap();
        assert!(record.accepted, "{precision:?}: {record:?}");
        assert_eq!(record.outcome.as_ref().unwrap().checked, 256);
        // The spot checks can be redrawn from the record alone.
        let secret: [u8; 32] = hex::decode(&record.spot_check_secret)
            .unwrap()
            .try_into()
            .unwrap();
        let root: [u8; 32] = hex::decode(&record.outcome.as_ref().unwrap().root)
            .unwrap()
            .try_into()
            .unwrap();
        assert_eq!(
            pog_proof::verify::draw_samples(&record.challenge, &root, &secret, 256).len(),
            256
        );
        // The openings dominate the traffic.
        assert!(
            record.bytes_to_agent > 0 && record.bytes_from_agent > record.bytes_to_agent,
            "{record:?}"
        );
    }
    // The validator's default precision for an H200 works too.
    let record = v
        .challenge(
            "GPU-honest",
            &Policy {
                precision: None,
                ..policy()
            },
        )
        .await
        .unwrap();
    assert!(record.accepted);
    let page: validator::RecordPage = reqwest::get(format!("{vurl}/v1/records/GPU-honest"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(page.records.len(), 4);
    assert!(page.next_after.is_none());
    for stored in &page.records {
        assert_eq!(stored.envelope.signer, v.public_key());
        // The readable body is the signed one.
        let (signed, _): (serde_json::Value, String) =
            wire::decode(&serde_json::to_vec(&stored.envelope).unwrap(), "record").unwrap();
        assert_eq!(signed, stored.record);
        assert_eq!(stored.record["gpu_uuid"], "GPU-honest");
    }
    // Pages: two at a time, then the rest.
    let first: validator::RecordPage =
        reqwest::get(format!("{vurl}/v1/records/GPU-honest?limit=2"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    assert_eq!(first.records.len(), 2);
    let after = first.next_after.expect("a second page");
    let rest: validator::RecordPage = reqwest::get(format!(
        "{vurl}/v1/records/GPU-honest?after={after}&limit=2"
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(rest.records.len(), 2);
    assert!(rest.records[0].id > after);
}

#[tokio::test(flavor = "multi_thread")]
async fn junk_lower_precision_replay_and_foreign_answers_are_rejected() {
    let (v, vurl) = start_validator().await;
    start_agent(
        &vurl,
        11,
        vec![claim("GPU-junk")],
        Behaviour::Junk(0.05),
        None,
    )
    .await;
    let junk = v.challenge("GPU-junk", &policy()).await.unwrap();
    assert!(!junk.accepted && !junk.outcome.unwrap().rejected.is_empty());

    start_agent(
        &vurl,
        12,
        vec![claim("GPU-bf16")],
        Behaviour::LowerPrecision(Precision::Bf16),
        None,
    )
    .await;
    let lower = v
        .challenge(
            "GPU-bf16",
            &Policy {
                precision: Some(Precision::Fp32),
                ..policy()
            },
        )
        .await
        .unwrap();
    assert!(!lower.accepted, "BF16 posing as FP32 passed");

    start_agent(
        &vurl,
        13,
        vec![claim("GPU-replay")],
        Behaviour::Honest,
        Some(Cheat::ReplayFirst),
    )
    .await;
    assert!(
        v.challenge("GPU-replay", &policy()).await.unwrap().accepted,
        "the first answer is honest"
    );
    let replayed = v.challenge("GPU-replay", &policy()).await.unwrap();
    assert!(!replayed.accepted, "a replayed answer passed");

    // One GPU answering for two UUIDs: the answer for GPU-b is presented for GPU-a.
    start_agent(
        &vurl,
        14,
        vec![claim("GPU-a"), claim("GPU-b")],
        Behaviour::Honest,
        Some(Cheat::AnswerAs("GPU-b")),
    )
    .await;
    let doubled = v.challenge("GPU-a", &policy()).await.unwrap();
    assert!(!doubled.accepted);
    assert_eq!(doubled.outcome.unwrap().rejected.len(), 256);

    // The answer computed for another PCI address than the registered one.
    start_agent(
        &vurl,
        15,
        vec![claim("GPU-slot")],
        Behaviour::Honest,
        Some(Cheat::AnswerAtBus("0000:00:07.0")),
    )
    .await;
    let moved = v.challenge("GPU-slot", &policy()).await.unwrap();
    assert!(!moved.accepted, "work bound to another bus id passed");
    assert_eq!(moved.outcome.unwrap().rejected.len(), 256);
}

#[tokio::test(flavor = "multi_thread")]
async fn slow_late_forged_and_untrusted_exchanges_fail() {
    let (v, vurl) = start_validator().await;
    // A slower model: honest values, but too late for the claimed model's time.
    start_agent(
        &vurl,
        20,
        vec![claim("GPU-slow")],
        Behaviour::Honest,
        Some(Cheat::DelayMs(300)),
    )
    .await;
    let slow = v
        .challenge(
            "GPU-slow",
            &Policy {
                expected_ms: 100.0,
                ..policy()
            },
        )
        .await
        .unwrap();
    let outcome = slow.outcome.unwrap();
    assert!(!slow.accepted && !outcome.time.accepted && outcome.rejected.is_empty());
    // Expired: the commitment comes after the deadline.
    let late = v
        .challenge(
            "GPU-slow",
            &Policy {
                expiry_ms: 100,
                ..policy()
            },
        )
        .await
        .unwrap();
    assert!(late.failure.unwrap().contains("expired"));
    // Answers signed with another key than the registered one.
    start_agent(
        &vurl,
        21,
        vec![claim("GPU-forged")],
        Behaviour::Honest,
        Some(Cheat::ForeignKey),
    )
    .await;
    let forged = v.challenge("GPU-forged", &policy()).await.unwrap();
    assert!(forged.failure.unwrap().contains("expected the agent"));
    // A validator the agent does not trust gets nothing computed.
    let (rogue, rogue_url) = {
        let r = Arc::new(Validator::new(
            Identity::from_seed([66; 32]),
            Registry::open(None).unwrap(),
        ));
        let (listener, url) = listen().await;
        tokio::spawn(pog_node::http::serve(
            listener,
            validator::router(r.clone()),
        ));
        (r, url)
    };
    start_agent(
        &rogue_url,
        22,
        vec![claim("GPU-x")],
        Behaviour::Honest,
        None,
    )
    .await;
    let refused = rogue.challenge("GPU-x", &policy()).await.unwrap();
    assert!(refused.failure.unwrap().contains("does not trust"));
}

#[tokio::test(flavor = "multi_thread")]
async fn one_gpu_registered_as_two_fails_when_both_are_challenged_at_once() {
    let (v, vurl) = start_validator().await;
    // One device behind two UUIDs, each challenge holding it for 400 ms, against a bound of
    // 500 ms (+10 %): alone each would pass; challenged together, the second waits its turn.
    start_agent(
        &vurl,
        40,
        vec![claim("GPU-one"), claim("GPU-two")],
        Behaviour::Honest,
        Some(Cheat::OneDevice(400)),
    )
    .await;
    let policy = Policy {
        expected_ms: 500.0,
        ..policy()
    };
    let alone = v.challenge("GPU-one", &policy).await.unwrap();
    assert!(alone.accepted, "one challenge at a time fits: {alone:?}");
    let together =
        validator::challenge_together(&v, vec!["GPU-one".into(), "GPU-two".into()], &policy).await;
    let mut gpus: Vec<&str> = together.iter().map(|(uuid, _)| uuid.as_str()).collect();
    gpus.sort();
    assert_eq!(gpus, ["GPU-one", "GPU-two"]);
    let records: Vec<_> = together.into_iter().map(|(_, r)| r.unwrap()).collect();
    let late: Vec<_> = records.iter().filter(|r| !r.accepted).collect();
    assert!(!late.is_empty(), "one device answered for two in one bound");
    for r in late {
        let outcome = r.outcome.as_ref().expect("verified");
        assert!(
            !outcome.time.accepted && outcome.rejected.is_empty(),
            "{r:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_uuid_claimed_by_two_agents_is_refused() {
    let (_, vurl) = start_validator().await;
    assert_eq!(
        start_agent(
            &vurl,
            30,
            vec![claim("GPU-shared")],
            Behaviour::Honest,
            None
        )
        .await
        .1,
        200
    );
    assert_eq!(
        start_agent(
            &vurl,
            31,
            vec![claim("GPU-shared")],
            Behaviour::Honest,
            None
        )
        .await
        .1,
        409
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_messages_get_clear_errors_and_change_nothing() {
    let (v, vurl) = start_validator().await;
    let (aurl, _) = start_agent(&vurl, 40, vec![claim("GPU-ok")], Behaviour::Honest, None).await;
    let client = reqwest::Client::new();
    // Garbage, an oversized body and an unknown challenge.
    let garbage = client
        .post(format!("{aurl}/v1/challenge"))
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(garbage.status(), 400);
    assert!(garbage.text().await.unwrap().contains("malformed"));
    let huge = client
        .post(format!("{aurl}/v1/challenge"))
        .body(vec![b' '; wire::MAX_MESSAGE_BYTES + 10])
        .send()
        .await
        .unwrap();
    assert_eq!(huge.status(), 413);
    let validator_key = Identity::from_seed(VALIDATOR_SEED);
    let unknown = OpenRequest {
        challenge_id: "feedface".into(),
        leaves: vec![0],
    };
    let r = client
        .post(format!("{aurl}/v1/open"))
        .json(&validator_key.seal(kind::OPEN, &unknown).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    // A captured challenge replayed to the agent is refused (409), and so is an expired one (410).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let c = pog_proof::Challenge {
        version: pog_proof::challenge::CHALLENGE_VERSION,
        nonce: [9; 32],
        gpu_uuid: "GPU-ok".into(),
        gpu_bus_id: "0000:00:06.0".into(),
        precision: Precision::Int8,
        size: 16,
        batch: 1,
        leaf_elements: 64,
    };
    let fresh = wire::ChallengeMessage {
        id: "captured".into(),
        challenge: c.clone(),
        issued_at_ms: now,
        expires_at_ms: now + 60_000,
    };
    let envelope = validator_key.seal(kind::CHALLENGE, &fresh).unwrap();
    let first = client
        .post(format!("{aurl}/v1/challenge"))
        .json(&envelope)
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), 200);
    // The right UUID at another PCI address is not this agent's GPU.
    let elsewhere = wire::ChallengeMessage {
        id: "elsewhere".into(),
        challenge: pog_proof::Challenge {
            gpu_bus_id: "0000:00:07.0".into(),
            ..c.clone()
        },
        ..fresh.clone()
    };
    let moved = client
        .post(format!("{aurl}/v1/challenge"))
        .json(&validator_key.seal(kind::CHALLENGE, &elsewhere).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(moved.status(), 404);
    assert!(moved.text().await.unwrap().contains("at 0000:00:07.0"));
    let replay = client
        .post(format!("{aurl}/v1/challenge"))
        .json(&envelope)
        .send()
        .await
        .unwrap();
    assert_eq!(replay.status(), 409);
    let stale = wire::ChallengeMessage {
        id: "stale".into(),
        challenge: c,
        issued_at_ms: 1,
        expires_at_ms: 2,
    };
    let r = client
        .post(format!("{aurl}/v1/challenge"))
        .json(&validator_key.seal(kind::CHALLENGE, &stale).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 410);
    // A registration with an unknown model or a bad endpoint is refused.
    let agent_key = Identity::from_seed([40; 32]);
    let bad = Register {
        endpoint: "ftp://x".into(),
        gpus: vec![claim("GPU-ok")],
    };
    let r = client
        .post(format!("{vurl}/v1/register"))
        .json(&agent_key.seal(kind::REGISTER, &bad).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    // Planned per model, an H200 gets a full-size challenge (BF16, n = 16384, a second of
    // work), which the CPU prover refuses; told INT8, the plan keeps the precision and takes
    // INT8's larger products.
    let per_model = |precision| Policy {
        per_model: true,
        precision,
        ..policy()
    };
    let int8 = v
        .challenge("GPU-ok", &per_model(Some(Precision::Int8)))
        .await;
    let int8 = int8.unwrap().challenge;
    assert_eq!((int8.precision, int8.size), (Precision::Int8, 32768));
    let planned = v.challenge("GPU-ok", &per_model(None)).await.unwrap();
    assert_eq!(
        (planned.challenge.precision, planned.challenge.size),
        (Precision::Bf16, 16384)
    );
    assert!(planned.challenge.batch >= 50, "{}", planned.challenge.batch);
    assert!(planned
        .failure
        .unwrap()
        .contains("beyond this agent's CPU prover"));
    // A challenge beyond the CPU prover is refused with a reason, not computed for an hour.
    let huge = v
        .challenge(
            "GPU-ok",
            &Policy {
                size: 16384,
                batch: 100,
                ..policy()
            },
        )
        .await
        .unwrap();
    assert!(huge
        .failure
        .unwrap()
        .contains("beyond this agent's CPU prover"));
    // A policy no challenge can be built from is refused before anything is sent.
    assert!(v
        .challenge(
            "GPU-ok",
            &Policy {
                size: 0,
                ..policy()
            }
        )
        .await
        .is_err());
    assert!(v
        .challenge(
            "GPU-ok",
            &Policy {
                expected_ms: f64::NAN,
                ..policy()
            }
        )
        .await
        .is_err());
    // The agent and the validator still work, and the records hold only real results.
    assert!(v.challenge("GPU-ok", &policy()).await.unwrap().accepted);
    let page: validator::RecordPage = reqwest::get(format!("{vurl}/v1/records/GPU-ok"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        page.records.len(),
        4,
        "the three refused challenges are recorded as failures, the good one as accepted"
    );
}
