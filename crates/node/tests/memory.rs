//! The proof of memory end to end over real sockets on loopback: a validator and agents as
//! HTTP services with the CPU prover, under the test plan's small memory shape. The honest
//! agent passes and is recorded; junk, late, replayed and misdirected messages are refused.

mod common;

use common::*;
use pog_node::validator::{MemoryPolicy, MemoryRecord, Policy};
use pog_proof::memory::{MemoryChallenge, MEMORY_VERSION};
use pog_proof::prover::Behaviour;
use pog_proof::wire::{kind, Identity, MemoryChallengeMessage, WalkMessage};

fn memory_policy(expected_ms: f64) -> Policy {
    Policy {
        memory: MemoryPolicy::test_shape(expected_ms),
        ..policy()
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

async fn post(url: &str, body: &impl serde::Serialize) -> (u16, String) {
    let response = reqwest::Client::new()
        .post(url)
        .json(body)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_honest_agent_proves_its_memory_and_junk_is_caught() {
    let (v, vurl) = start_validator().await;
    start_agent(&vurl, 21, vec![claim("GPU-mem")], Behaviour::Honest, None).await;
    start_agent(
        &vurl,
        22,
        vec![claim("GPU-junk")],
        Behaviour::Junk(0.2),
        None,
    )
    .await;
    let honest: MemoryRecord = v
        .challenge_memory("GPU-mem", &memory_policy(5_000.0))
        .await
        .unwrap();
    assert!(honest.accepted, "{honest:?}");
    let outcome = honest.outcome.as_ref().unwrap();
    assert_eq!(outcome.checked, pog_proof::memory::SAMPLES as usize);
    assert!(
        !honest.proves_memory,
        "a test plan proves no model's memory"
    );
    assert!(honest.build_ms.is_some());
    assert_eq!(honest.memory_challenge.items, 4096);
    // The record is signed and listed with the GPU's records.
    let page: pog_node::validator::RecordPage = reqwest::get(format!("{vurl}/v1/records/GPU-mem"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(page
        .records
        .iter()
        .any(|r| r.record.get("memory_challenge").is_some() && r.record["accepted"] == true));

    let junk = v
        .challenge_memory("GPU-junk", &memory_policy(5_000.0))
        .await
        .unwrap();
    assert!(!junk.accepted);
    assert!(!junk.outcome.unwrap().rejected.is_empty());

    // Honest but over a bound no CPU meets: rejected on time.
    let late = v
        .challenge_memory("GPU-mem", &memory_policy(0.001))
        .await
        .unwrap();
    assert!(!late.accepted);
    assert!(!late.outcome.unwrap().time.accepted);
}

/// A memory challenge for the agent with `seed`, signed by `validator`.
fn build_message(
    validator: &Identity,
    agent_seed: u8,
    id: &str,
    items: u64,
) -> MemoryChallengeMessage {
    let now = now_ms();
    MemoryChallengeMessage {
        id: id.into(),
        challenge: MemoryChallenge {
            version: MEMORY_VERSION,
            nonce: [1; 32],
            gpu_uuid: "GPU-m".into(),
            gpu_bus_id: "0000:00:06.0".into(),
            agent_key: Identity::from_seed([agent_seed; 32]).public_hex(),
            validator_key: validator.public_hex(),
            items,
            item_rounds: 4,
            walkers: 256,
            steps: 4,
            span: 4,
            walkers_per_leaf: 64,
        },
        issued_at_ms: now,
        expires_at_ms: now + 10_000,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_agent_refuses_bad_replayed_and_misdirected_memory_messages() {
    let (_, vurl) = start_validator().await;
    let (agent, _) = start_agent(&vurl, 23, vec![claim("GPU-m")], Behaviour::Honest, None).await;
    let validator = Identity::from_seed(VALIDATOR_SEED);
    let stranger = Identity::from_seed([0x77; 32]);
    let build = format!("{agent}/v1/memory/build");
    let walk = format!("{agent}/v1/memory/walk");

    // Sizes that overflow or exceed the CPU prover are refused before anything is built.
    for (items, want) in [(0, 400), (1 << 40, 400), (1 << 30, 413)] {
        let m = build_message(&validator, 23, &format!("big-{items}"), items);
        let (status, body) =
            post(&build, &validator.seal(kind::MEMORY_CHALLENGE, &m).unwrap()).await;
        assert_eq!(status, want, "{items}: {body}");
    }
    // Signed by a validator the agent does not trust.
    let m = build_message(&stranger, 23, "m-stranger", 1000);
    let (status, _) = post(&build, &stranger.seal(kind::MEMORY_CHALLENGE, &m).unwrap()).await;
    assert_eq!(status, 403);
    // Addressed to another agent (a relay).
    let m = build_message(&validator, 99, "m-relay", 1000);
    let (status, _) = post(&build, &validator.seal(kind::MEMORY_CHALLENGE, &m).unwrap()).await;
    assert_eq!(status, 403);

    // A good build, once; its replay is refused.
    let m = build_message(&validator, 23, "m-1", 1000);
    let sealed = validator.seal(kind::MEMORY_CHALLENGE, &m).unwrap();
    let (status, body) = post(&build, &sealed).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(post(&build, &sealed).await.0, 409);

    let walk_message = |id: &str| WalkMessage {
        challenge_id: id.into(),
        walk_nonce: [9; 32],
        issued_at_ms: now_ms(),
        expires_at_ms: now_ms() + 10_000,
    };
    // A walk signed by someone else leaves the data set for its issuer.
    let (status, _) = post(
        &walk,
        &stranger
            .seal(kind::MEMORY_WALK, &walk_message("m-1"))
            .unwrap(),
    )
    .await;
    assert_eq!(status, 403);
    // A walk of nothing built.
    let (status, _) = post(
        &walk,
        &validator
            .seal(kind::MEMORY_WALK, &walk_message("m-none"))
            .unwrap(),
    )
    .await;
    assert_eq!(status, 404);
    // An expired walk.
    let stale = WalkMessage {
        expires_at_ms: 1,
        ..walk_message("m-1")
    };
    let (status, _) = post(&walk, &validator.seal(kind::MEMORY_WALK, &stale).unwrap()).await;
    assert_eq!(status, 410);
    // The issuer's walk commits, once.
    let sealed = validator
        .seal(kind::MEMORY_WALK, &walk_message("m-1"))
        .unwrap();
    let (status, body) = post(&walk, &sealed).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(post(&walk, &sealed).await.0, 404, "walked once");
    // A walk message sent as another kind is refused by its signature's kind.
    let (status, _) = post(&build, &sealed).await;
    assert_eq!(status, 400);
    // The agent is still up.
    assert!(reqwest::get(format!("{agent}/healthz"))
        .await
        .unwrap()
        .status()
        .is_success());
}
