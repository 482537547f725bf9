//! The protocol end to end over real sockets on loopback: a validator and agents as HTTP
//! services, with the CPU prover. The honest agent passes; every attack is refused.

mod common;

use common::*;
use pog_agent::misbehaviour::Cheat;
use pog_net::serve::Limits;
use pog_proof::prover::Behaviour;
use pog_proof::wire::{self, kind, OpenRequest, Register};
use pog_records::Gemm;
use pog_records::{FailureKind, PlanKind, Policy};
use pog_signed::Identity;
use pog_spec::Precision;
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread")]
async fn an_honest_agent_is_accepted_and_recorded() {
    let h = Harness::new().serve().await;
    let (v, vurl) = (h.v.clone(), h.url.clone());
    let status = h.agent(10, vec![claim("GPU-honest")]).await.status();
    assert_eq!(status, 200);
    for precision in [Precision::Int8, Precision::Bf16, Precision::Fp32] {
        let record = v
            .challenge::<Gemm>(
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
            pog_proof::verify::draw_samples(&record.details.challenge, &root, &secret, 256).len(),
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
        .challenge::<Gemm>(
            "GPU-honest",
            &Policy {
                precision: None,
                ..policy()
            },
        )
        .await
        .unwrap();
    assert!(record.accepted);
    let page: pog_validator::validator::RecordPage =
        reqwest::get(format!("{vurl}/v1/records/GPU-honest"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    // The registration, then four challenges.
    assert_eq!(page.records.len(), 5);
    assert_eq!(page.records[0].record["event"], "new");
    assert!(page.next_after.is_none());
    for stored in &page.records {
        assert_eq!(stored.envelope.signer, v.public_key());
        // The readable body is the signed one.
        let (signed, _): (serde_json::Value, pog_signed::PublicKey) = pog_signed::decode(
            &serde_json::to_vec(&stored.envelope).unwrap(),
            &stored.envelope.kind,
        )
        .unwrap();
        assert_eq!(signed, stored.record);
        assert_eq!(stored.record["gpu_uuid"], "GPU-honest");
    }
    // Pages: two at a time, then the rest.
    let first: pog_validator::validator::RecordPage =
        reqwest::get(format!("{vurl}/v1/records/GPU-honest?limit=2"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    assert_eq!(first.records.len(), 2);
    let after = first.next_after.expect("a second page");
    let rest: pog_validator::validator::RecordPage = reqwest::get(format!(
        "{vurl}/v1/records/GPU-honest?after={after}&limit=2"
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(rest.records.len(), 2);
    assert!(rest.records[0].id > after);
    assert!(rest.next_after.is_some(), "a full page may have more");
}

/// `GET /metrics` serves each GPU's last proof as the validator timed it, with the agent's
/// junk as an unaccepted proof; a Prometheus text parser reads the page.
#[tokio::test(flavor = "multi_thread")]
async fn the_validators_metrics_carry_each_gpus_last_proof() {
    let h = Harness::new().serve().await;
    let v = h.v.clone();
    assert_eq!(h.agent(12, vec![claim("GPU-metrics")]).await.status(), 200);
    let record = v.challenge::<Gemm>("GPU-metrics", &policy()).await.unwrap();
    assert!(record.accepted);
    let answer = reqwest::get(format!("{}/metrics", h.url)).await.unwrap();
    assert_eq!(answer.status(), 200);
    assert!(answer.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/openmetrics-text"));
    let page = answer.text().await.unwrap();
    let ratio = record.outcome.as_ref().unwrap().time.ratio;
    let lines: Vec<&str> = page.lines().collect();
    let sample = lines
        .iter()
        .find(|l| l.starts_with("pog_last_proof_ratio{") && l.contains("GPU-metrics"))
        .unwrap_or_else(|| panic!("no ratio for GPU-metrics in {page}"));
    assert!(sample.contains("proof=\"gemm\""), "{sample}");
    let value: f64 = sample.rsplit(' ').next().unwrap().parse().unwrap();
    assert!((value - ratio).abs() < 1e-9, "{value} vs {ratio}");
    assert!(
        page.contains(
            "pog_last_proof_accepted{gpu=\"GPU-metrics\",model=\"H200 SXM\",proof=\"gemm\",\
             timed_by=\"validator\"} 1.0"
        ),
        "{page}"
    );
    let parsed = prometheus_parse::Scrape::parse(page.lines().map(|l| Ok(l.to_string()))).unwrap();
    assert!(parsed
        .samples
        .iter()
        .any(|s| s.metric == "pog_last_proof_ratio"));
}

/// The agent's own `/metrics` carries its own timing of each proof it committed
/// (`pog_agent::own_timing`): `pog_last_proof_ratio{proof, timed_by="agent"}`, absent before
/// any proof, and within what the validator measured around it.
#[tokio::test(flavor = "multi_thread")]
async fn the_agents_metrics_carry_its_own_timing_of_each_proof() {
    use pog_agent::own_timing::{gemm_planned_ms, walk_planned_ms};
    let h = Harness::new().serve().await;
    let v = h.v.clone();
    let watch = Arc::new(pog_agent::watch::Watch::new(
        vec![pog_monitor::prometheus::GpuIdentity {
            index: 0,
            uuid: "GPU-own".into(),
            model_name: "H200 SXM".into(),
            hostname: "loopback".into(),
            pci_bus_id: None,
            driver_version: None,
        }],
        false,
    ));
    let agent = h.agent(13, vec![claim("GPU-own")]).watching(watch).await;
    assert_eq!(agent.status(), 200);
    let scrape = || async {
        let page = reqwest::get(format!("{}/metrics", agent.url))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let parsed = prometheus_parse::Scrape::parse(page.lines().map(|l| Ok(l.to_string())))
            .unwrap_or_else(|e| panic!("{e}: {page}"));
        let ratios: Vec<(String, String, f64)> = parsed
            .samples
            .into_iter()
            .filter(|s| s.metric == "pog_last_proof_ratio")
            .map(|s| {
                assert_eq!(s.labels.get("UUID"), Some("GPU-own"), "{page}");
                let value = match s.value {
                    prometheus_parse::Value::Gauge(v) | prometheus_parse::Value::Untyped(v) => v,
                    _ => panic!("not a gauge: {page}"),
                };
                let label = |name| s.labels.get(name).unwrap_or_default().to_string();
                (label("proof"), label("timed_by"), value)
            })
            .collect();
        ratios
    };
    assert_eq!(scrape().await, vec![], "no proof yet, no ratio");

    let gemm = v.challenge::<Gemm>("GPU-own", &policy()).await.unwrap();
    assert!(gemm.accepted, "{gemm:?}");
    let memory = v
        .challenge::<pog_records::Memory>(
            "GPU-own",
            &Policy {
                memory: pog_records::MemoryPolicy::test_shape(5_000.0),
                ..policy()
            },
        )
        .await
        .unwrap();
    assert!(memory.accepted, "{memory:?}");

    let mut ratios = scrape().await;
    ratios.sort_by(|a, b| a.0.cmp(&b.0));
    let kinds: Vec<(&str, &str)> = ratios
        .iter()
        .map(|(proof, by, _)| (proof.as_str(), by.as_str()))
        .collect();
    assert_eq!(kinds, [("gemm", "agent"), ("memory", "agent")]);
    // The agent's time, commitment ready, lies within the validator's, challenge sent to
    // commitment received; both against the claimed model's plan at the shape asked.
    let planned = [
        gemm_planned_ms("H200 SXM", &gemm.details.challenge).unwrap(),
        walk_planned_ms("H200 SXM", &memory.details.memory_challenge).unwrap(),
    ];
    let measured = [
        gemm.outcome.unwrap().time.measured_ms,
        memory.outcome.unwrap().time.measured_ms,
    ];
    // The validator's time is read in whole ms at both ends (a sent and a received stamp), so
    // it may come out up to 1 ms short of the agent's own, which lies inside it.
    for (((proof, _, ratio), planned), measured) in ratios.iter().zip(planned).zip(measured) {
        let agent_ms = ratio * planned;
        assert!(
            ratio.is_finite() && agent_ms > 0.0 && agent_ms <= measured + 1.0,
            "{proof}: the agent's {agent_ms} ms against the validator's {measured} ms"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn junk_lower_precision_replay_and_foreign_answers_are_rejected() {
    let h = Harness::new().serve().await;
    let v = h.v.clone();
    h.agent(11, vec![claim("GPU-junk")])
        .behaving(Behaviour::Junk(0.05))
        .await;
    let junk = v.challenge::<Gemm>("GPU-junk", &policy()).await.unwrap();
    assert!(!junk.accepted && junk.outcome.unwrap().wrong() > 0);

    h.agent(12, vec![claim("GPU-bf16")])
        .behaving(Behaviour::LowerPrecision(Precision::Bf16))
        .await;
    let lower = v
        .challenge::<Gemm>(
            "GPU-bf16",
            &Policy {
                precision: Some(Precision::Fp32),
                ..policy()
            },
        )
        .await
        .unwrap();
    assert!(!lower.accepted, "BF16 posing as FP32 passed");

    h.agent(13, vec![claim("GPU-replay")])
        .cheating(Cheat::ReplayFirst)
        .await;
    assert!(
        v.challenge::<Gemm>("GPU-replay", &policy())
            .await
            .unwrap()
            .accepted,
        "the first answer is honest"
    );
    let replayed = v.challenge::<Gemm>("GPU-replay", &policy()).await.unwrap();
    assert!(!replayed.accepted, "a replayed answer passed");

    // One GPU answering for two UUIDs: the answer for GPU-b is presented for GPU-a.
    h.agent(14, vec![claim("GPU-a"), claim("GPU-b")])
        .cheating(Cheat::AnswerAs("GPU-b"))
        .await;
    let doubled = v.challenge::<Gemm>("GPU-a", &policy()).await.unwrap();
    assert!(!doubled.accepted);
    assert_eq!(doubled.outcome.unwrap().wrong(), 256);

    // The answer computed for another PCI address than the registered one.
    h.agent(15, vec![claim("GPU-slot")])
        .cheating(Cheat::AnswerAtBus("0000:00:07.0"))
        .await;
    let moved = v.challenge::<Gemm>("GPU-slot", &policy()).await.unwrap();
    assert!(!moved.accepted, "work bound to another bus id passed");
    assert_eq!(moved.outcome.unwrap().wrong(), 256);
}

#[tokio::test(flavor = "multi_thread")]
async fn slow_late_forged_and_untrusted_exchanges_fail() {
    let h = Harness::new().serve().await;
    let v = h.v.clone();
    // A slower model: honest values, but too late for the claimed model's time.
    h.agent(20, vec![claim("GPU-slow")])
        .cheating(Cheat::DelayMs(300))
        .await;
    let slow = v
        .challenge::<Gemm>(
            "GPU-slow",
            &Policy {
                expected_ms: 100.0,
                ..policy()
            },
        )
        .await
        .unwrap();
    let outcome = slow.outcome.unwrap();
    assert!(!slow.accepted && !outcome.time.accepted && outcome.wrong() == 0);
    // Expired: the commitment comes after the deadline.
    let late = v
        .challenge::<Gemm>(
            "GPU-slow",
            &Policy {
                expiry_ms: 100,
                ..policy()
            },
        )
        .await
        .unwrap();
    // The whole exchange has a deadline (the expiry, as long again to open): the validator
    // stops waiting for a commitment that comes after it.
    let failure = late.failure.unwrap();
    assert!(
        matches!(failure.kind, FailureKind::Timeout | FailureKind::Deadline),
        "{failure:?}"
    );
    // Answers signed with another key than the registered one.
    h.agent(21, vec![claim("GPU-forged")])
        .cheating(Cheat::ForeignKey)
        .await;
    let forged = v.challenge::<Gemm>("GPU-forged", &policy()).await.unwrap();
    let failure = forged.failure.unwrap();
    assert_eq!(failure.kind, FailureKind::Protocol);
    assert!(
        failure.message.contains("expected the agent"),
        "{failure:?}"
    );
    // A validator the agent does not trust gets nothing computed.
    let rogue = Harness::new().key([66; 32]).serve().await;
    rogue
        .agent(22, vec![claim("GPU-x")])
        .trusting(vec![validator_key()])
        .await;
    let refused = rogue.v.challenge::<Gemm>("GPU-x", &policy()).await.unwrap();
    assert_eq!(
        refused.failure.unwrap().message,
        "the agent answered HTTP 403",
        "an untrusted validator"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn one_gpu_registered_as_two_fails_when_both_are_challenged_at_once() {
    let h = Harness::new().serve().await;
    let v = h.v.clone();
    // One device behind two UUIDs, each challenge holding it for 400 ms, against a bound of
    // 500 ms (+10 %): alone each would pass; challenged together, the second waits its turn.
    h.agent(40, vec![claim("GPU-one"), claim("GPU-two")])
        .cheating(Cheat::OneDevice(400))
        .await;
    let policy = Policy {
        expected_ms: 500.0,
        ..policy()
    };
    let alone = v.challenge::<Gemm>("GPU-one", &policy).await.unwrap();
    assert!(alone.accepted, "one challenge at a time fits: {alone:?}");
    let together = pog_validator::schedule::challenge_together(
        &v,
        vec!["GPU-one".into(), "GPU-two".into()],
        &policy,
    )
    .await;
    let mut gpus: Vec<&str> = together.iter().map(|(uuid, _)| uuid.as_str()).collect();
    gpus.sort();
    assert_eq!(gpus, ["GPU-one", "GPU-two"]);
    let records: Vec<_> = together.into_iter().map(|(_, r)| r.unwrap()).collect();
    let late: Vec<_> = records.iter().filter(|r| !r.accepted).collect();
    assert!(!late.is_empty(), "one device answered for two in one bound");
    for r in late {
        let outcome = r.outcome.as_ref().expect("verified");
        assert!(!outcome.time.accepted && outcome.wrong() == 0, "{r:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_uuid_claimed_by_two_agents_is_refused() {
    let h = Harness::new().serve().await;
    assert_eq!(h.agent(30, vec![claim("GPU-shared")]).await.status(), 200);
    assert_eq!(h.agent(31, vec![claim("GPU-shared")]).await.status(), 409);
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_messages_get_clear_errors_and_change_nothing() {
    let h = Harness::new().serve().await;
    let (v, vurl) = (h.v.clone(), h.url.clone());
    let aurl = h.agent(40, vec![claim("GPU-ok")]).await.url;
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
    // An oversized body is refused from its declared length, before it is read.
    let huge = {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(aurl.trim_start_matches("http://"))
            .await
            .unwrap();
        let head = format!(
            "POST /v1/challenge HTTP/1.1\r\nHost: a\r\nContent-Length: {}\r\n\r\n",
            pog_signed::MAX_MESSAGE_BYTES + 10
        );
        s.write_all(head.as_bytes()).await.unwrap();
        let mut response = vec![0u8; 64];
        let n = s.read(&mut response).await.unwrap();
        String::from_utf8_lossy(&response[..n]).to_string()
    };
    assert!(huge.starts_with("HTTP/1.1 413"), "{huge}");
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
        to: pog_proof::challenge::Addressee {
            gpu_uuid: "GPU-ok".parse().unwrap(),
            gpu_bus_id: "0000:00:06.0".into(),
            agent_key: Identity::from_seed([40; 32]).public_key(),
            validator_key: validator_key.public_key(),
        },
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
            to: pog_proof::challenge::Addressee {
                gpu_bus_id: "0000:00:07.0".into(),
                ..c.to.clone()
            },
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
        host: None,
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
        plan: PlanKind::PerModel,
        precision,
        ..policy()
    };
    let int8 = v
        .challenge::<Gemm>("GPU-ok", &per_model(Some(Precision::Int8)))
        .await;
    let int8 = int8.unwrap().details.challenge;
    assert_eq!((int8.precision, int8.size), (Precision::Int8, 32768));
    let planned = v
        .challenge::<Gemm>("GPU-ok", &per_model(None))
        .await
        .unwrap();
    assert_eq!(
        (
            planned.details.challenge.precision,
            planned.details.challenge.size
        ),
        (Precision::Bf16, 16384)
    );
    assert!(
        planned.details.challenge.batch >= 50,
        "{}",
        planned.details.challenge.batch
    );
    assert_eq!(
        planned.failure.unwrap().message,
        "the agent answered HTTP 413",
        "beyond this agent's CPU prover"
    );
    // A challenge beyond the CPU prover is refused with a reason, not computed for an hour.
    let huge = v
        .challenge::<Gemm>(
            "GPU-ok",
            &Policy {
                size: 16384,
                batch: 100,
                ..policy()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        huge.failure.unwrap().message,
        "the agent answered HTTP 413",
        "beyond this agent's CPU prover"
    );
    // A policy no challenge can be built from is refused before anything is sent.
    assert!(v
        .challenge::<Gemm>(
            "GPU-ok",
            &Policy {
                size: 0,
                ..policy()
            }
        )
        .await
        .is_err());
    assert!(v
        .challenge::<Gemm>(
            "GPU-ok",
            &Policy {
                expected_ms: f64::NAN,
                ..policy()
            }
        )
        .await
        .is_err());
    // The agent and the validator still work, and the records hold only real results.
    assert!(
        v.challenge::<Gemm>("GPU-ok", &policy())
            .await
            .unwrap()
            .accepted
    );
    let page: pog_validator::validator::RecordPage =
        reqwest::get(format!("{vurl}/v1/records/GPU-ok"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    assert_eq!(
        page.records.len(),
        5,
        "the registration; the three refused challenges as failures, the good one as accepted"
    );
}

/// A relay: an attacker's "agent" that forwards every challenge and open request to a victim's
/// agent and re-signs the answers with the attacker's own key.
async fn start_relay(victim_url: String, attacker: Identity) -> String {
    use axum::body::Bytes;
    use axum::routing::{get, post};
    let attacker = Arc::new(attacker);
    let forward = |path: &'static str, kind: &'static str| {
        let (victim_url, attacker) = (victim_url.clone(), attacker.clone());
        post(move |body: Bytes| {
            let (victim_url, attacker) = (victim_url.clone(), attacker.clone());
            async move {
                let answer = reqwest::Client::new()
                    .post(format!("{victim_url}{path}"))
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await
                    .unwrap();
                let status = answer.status().as_u16();
                let bytes = answer.bytes().await.unwrap();
                // An envelope, or an openings frame, signed again by the attacker.
                let resealed = match wire::Openings::open(&bytes) {
                    Ok((openings, _)) => openings.seal(&attacker).unwrap(),
                    Err(_) => pog_signed::decode::<serde_json::Value>(&bytes, kind)
                        .map(|(message, _)| {
                            serde_json::to_vec(&attacker.seal(kind, &message).unwrap()).unwrap()
                        })
                        .unwrap_or_else(|_| bytes.to_vec()),
                };
                (axum::http::StatusCode::from_u16(status).unwrap(), resealed)
            }
        })
    };
    let router = axum::Router::new()
        .route("/v1/ping", get(|| async { "pog agent" }))
        .route("/v1/challenge", forward("/v1/challenge", kind::COMMITMENT))
        .route("/v1/open", forward("/v1/open", kind::OPENINGS));
    let (listener, url) = listen().await;
    tokio::spawn(pog_net::http::serve(
        listener,
        router,
        Limits::protocol_messages(),
    ));
    url
}

#[tokio::test(flavor = "multi_thread")]
async fn a_relay_cannot_pass_a_victims_work_off_under_its_own_key() {
    // The victim's agent trusts two validators; the attacker registers the victim's GPU (its
    // UUID and bus id are public) with the second one and relays its challenges.
    let honest = Harness::new().serve().await;
    let second = Harness::new().key([2; 32]).serve().await;
    let victim = honest
        .agent(50, vec![claim("GPU-victim")])
        .trusting(vec![honest.v.public_key(), second.v.public_key()])
        .await;
    assert_eq!(victim.status(), 200);
    let register = |key: &Identity, endpoint: &str| {
        key.seal(
            kind::REGISTER,
            &Register {
                endpoint: endpoint.into(),
                gpus: vec![claim("GPU-victim")],
                host: None,
            },
        )
        .unwrap()
    };
    let client = reqwest::Client::new();
    let status = |r: reqwest::Response| r.status().as_u16();
    let attacker = Identity::from_seed([51; 32]);
    let relay_url = start_relay(victim.url, Identity::from_seed([51; 32])).await;
    assert_eq!(
        status(
            client
                .post(format!("{}/v1/register", second.url))
                .json(&register(&attacker, &relay_url))
                .send()
                .await
                .unwrap()
        ),
        200
    );
    let relayed = second
        .v
        .challenge::<Gemm>("GPU-victim", &policy())
        .await
        .unwrap();
    assert!(!relayed.accepted, "{relayed:?}");
    let why = relayed.failure.unwrap();
    assert_eq!(
        why.message, "the agent answered HTTP 403",
        "the victim refuses a challenge for another agent"
    );
    // The victim still proves to its own validator.
    assert!(
        honest
            .v
            .challenge::<Gemm>("GPU-victim", &policy())
            .await
            .unwrap()
            .accepted
    );
}

/// A real exchange over HTTP at 1024 spot checks, with the plans' 256-byte leaves (INT8: 128
/// outputs a leaf, each by its low 16 bits, since challenge version 8) over 2048 leaves: the agent's answer is the leaves asked and one
/// multiproof, and the bytes the validator counted from the agent are the commitment plus
/// exactly what the openings' two base64 fields take for the leaves it drew, plus the signed
/// envelope. (The H200 plans' sizes follow from the same count over their trees:
/// `pog_proof::session` tests `h200_plans_answer_in_under_1_mib`.)
#[tokio::test(flavor = "multi_thread")]
async fn a_real_exchange_answers_1024_checks_in_the_bytes_the_leaves_take() {
    let h = Harness::new().serve().await;
    let status = h.agent(12, vec![claim("GPU-bytes")]).await.status();
    assert_eq!(status, 200);
    let policy = Policy {
        size: 128,
        batch: 16,
        samples: 1024,
        expected_ms: 60_000.0,
        expiry_ms: 60_000,
        ..policy()
    };
    let record = h.v.challenge::<Gemm>("GPU-bytes", &policy).await.unwrap();
    assert!(record.accepted, "{record:?}");
    let c = &record.details.challenge;
    assert_eq!((c.leaf_elements, c.leaf_count()), (128, 2048));
    let outcome = record.outcome.as_ref().unwrap();
    let secret: [u8; 32] = hex::decode(&record.spot_check_secret)
        .unwrap()
        .try_into()
        .unwrap();
    let root: [u8; 32] = hex::decode(&outcome.root).unwrap().try_into().unwrap();
    let mut leaves: Vec<u64> = pog_proof::verify::draw_samples(c, &root, &secret, 1024)
        .iter()
        .map(|p| c.leaf_of(*p).0)
        .collect();
    leaves.sort_unstable();
    leaves.dedup();
    let leaf_bytes: usize = leaves.iter().map(|l| c.leaf_len(*l)).sum();
    let hashes = pog_merkle::multiproof::proof_len(c.leaf_count(), &leaves).unwrap();
    let fields =
        pog_proof::wire::Openings::limit(leaf_bytes, hashes) - pog_proof::wire::OPENINGS_OVERHEAD;
    eprintln!(
        "{} leaves of 256 B, {hashes} hashes: fields {fields} B, from the agent {} B, to it {} B",
        leaves.len(),
        record.bytes_from_agent,
        record.bytes_to_agent
    );
    // The rest is the commitment's envelope and the frame's head: well under 2 KiB.
    let rest = record.bytes_from_agent - fields;
    assert!(rest < 2048, "{rest} bytes besides the openings' bytes");
    assert!(record.bytes_from_agent <= 1 << 20 && record.bytes_to_agent <= 1 << 20);
}

/// Openings padded far past what the leaves asked take, or with a leaf's bytes cut short, over
/// HTTP (a layer in front of an honest agent rewrites its answer and signs it again with the
/// agent's key): the validator reads no more of the answer than the leaves asked take, each
/// record names what was wrong in the validator's words, and the agent keeps answering.
#[tokio::test(flavor = "multi_thread")]
async fn padded_or_short_openings_are_failures_on_record() {
    use std::sync::atomic::{AtomicU8, Ordering};
    let h = Harness::new().serve().await;
    // 0: 4 MiB appended to the multiproof; 1: the leaves 33 bytes short; 2: as the agent
    // answered.
    let mode = Arc::new(AtomicU8::new(0));
    let rewrite = mode.clone();
    let agent = h
        .agent(62, vec![claim("GPU-pad")])
        .routed(move |router| {
            router.layer(axum::middleware::from_fn(
                move |request: axum::extract::Request, next: axum::middleware::Next| {
                    let mode = rewrite.load(Ordering::SeqCst);
                    async move {
                        let open = request.uri().path() == "/v1/open";
                        let response = next.run(request).await;
                        if !open || mode == 2 {
                            return response;
                        }
                        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
                            .await
                            .unwrap();
                        let (mut o, _) = wire::Openings::open(&bytes).unwrap();
                        if mode == 0 {
                            o.proof.extend(std::iter::repeat_n(b'A', 4 << 20));
                        } else {
                            o.leaves.truncate(o.leaves.len() - 33);
                        }
                        let sealed = o.seal(&Identity::from_seed([62; 32])).unwrap();
                        axum::response::Response::builder()
                            .header("content-type", "application/octet-stream")
                            .body(axum::body::Body::from(sealed))
                            .unwrap()
                    }
                },
            ))
        })
        .await;
    assert_eq!(agent.status(), 200);
    let padded = h.v.challenge::<Gemm>("GPU-pad", &policy()).await.unwrap();
    assert!(!padded.accepted);
    let message = padded.failure.unwrap().message;
    assert!(
        message.starts_with("the agent's answer exceeded") && message.ends_with(" bytes"),
        "{message}"
    );
    mode.store(1, Ordering::SeqCst);
    let short = h.v.challenge::<Gemm>("GPU-pad", &policy()).await.unwrap();
    assert!(!short.accepted);
    assert_eq!(
        short.failure.unwrap().message,
        "malformed openings: the leaves are shorter than the leaves asked take"
    );
    mode.store(2, Ordering::SeqCst);
    let honest = h.v.challenge::<Gemm>("GPU-pad", &policy()).await.unwrap();
    assert!(honest.accepted, "{honest:?}");
}
