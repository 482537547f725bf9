//! The proof of memory end to end over real sockets on loopback: a validator and agents as
//! HTTP services with the CPU prover, under the test plan's small memory shape. The honest
//! agent passes and is recorded; junk, late, replayed and misdirected messages are refused.
//! A hostile validator the agent trusts cannot pin its memory: one data set per GPU, shapes
//! bounded by the claimed model's plan, nothing held long unwalked or unopened.

mod common;

use common::*;
use pog_records::Memory;
use pog_records::{MemoryPolicy, MemoryRecord, Policy};

use pog_proof::memory::{MemoryChallenge, MEMORY_VERSION};
use pog_proof::prover::Behaviour;
use pog_proof::wire::{kind, MemoryChallengeMessage, WalkMessage};
use pog_signed::Identity;

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
    let h = Harness::new().serve().await;
    let (v, vurl) = (h.v.clone(), h.url.clone());
    h.agent(21, vec![claim("GPU-mem")]).await;
    h.agent(22, vec![claim("GPU-junk")])
        .behaving(Behaviour::Junk(0.2))
        .await;
    let honest: MemoryRecord = v
        .challenge::<Memory>("GPU-mem", &memory_policy(5_000.0))
        .await
        .unwrap();
    assert!(honest.accepted, "{honest:?}");
    let outcome = honest.outcome.as_ref().unwrap();
    assert_eq!(outcome.checked, pog_proof::memory::SAMPLES as usize);
    assert!(
        !honest.details.proves_memory,
        "a test plan proves no model's memory"
    );
    assert!(honest.details.build_ms.is_some());
    assert_eq!(honest.details.memory_challenge.items, 4096);
    // The record is signed and listed with the GPU's records.
    let page: pog_validator::validator::RecordPage =
        reqwest::get(format!("{vurl}/v1/records/GPU-mem"))
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
        .challenge::<Memory>("GPU-junk", &memory_policy(5_000.0))
        .await
        .unwrap();
    assert!(!junk.accepted);
    assert!(junk.outcome.unwrap().wrong() > 0);

    // Honest but over a bound no CPU meets: rejected on time.
    let late = v
        .challenge::<Memory>("GPU-mem", &memory_policy(0.001))
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
            to: pog_proof::challenge::Addressee {
                gpu_uuid: "GPU-m".parse().unwrap(),
                gpu_bus_id: "0000:00:06.0".into(),
                agent_key: Identity::from_seed([agent_seed; 32]).public_key(),
                validator_key: validator.public_key(),
            },
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
    let h = Harness::new().serve().await;
    let agent = h.agent(23, vec![claim("GPU-m")]).await.url;
    let validator = Identity::from_seed(VALIDATOR_SEED);
    let stranger = Identity::from_seed([0x77; 32]);
    let build = format!("{agent}/v1/memory/build");
    let walk = format!("{agent}/v1/memory/walk");

    // Sizes that overflow, exceed the claimed model's plan (an H200 holds 2^30 items of 128
    // bytes: its whole 141 GB, not the planned 90 %) or the CPU prover are refused before
    // anything is built.
    for (items, want) in [(0, 400), (1 << 40, 400), (1 << 30, 400), (1 << 22, 413)] {
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

/// Serves an agent (key from `seed`, GPU-m claimed as an H200 SXM, CPU prover) that trusts the
/// validator of [`VALIDATOR_SEED`] and holds an unwalked data set or an unopened walk for
/// `hold`; returns its URL.
async fn start_holding_agent(seed: u8, hold: std::time::Duration) -> String {
    agent(seed, vec![claim("GPU-m")])
        .holding_memory_for(hold)
        .serve()
        .await
        .url
}

/// The trusted validator's signed walk of challenge `id`.
fn signed_walk(id: &str) -> pog_signed::Envelope {
    let walk = WalkMessage {
        challenge_id: id.into(),
        walk_nonce: [9; 32],
        issued_at_ms: now_ms(),
        expires_at_ms: now_ms() + 10_000,
    };
    Identity::from_seed(VALIDATOR_SEED)
        .seal(kind::MEMORY_WALK, &walk)
        .unwrap()
}

/// The trusted validator's signed request to open leaf 0 of challenge `id`.
fn signed_open(id: &str) -> pog_signed::Envelope {
    let open = pog_proof::wire::OpenRequest {
        challenge_id: id.into(),
        leaves: vec![0],
    };
    Identity::from_seed(VALIDATOR_SEED)
        .seal(kind::OPEN, &open)
        .unwrap()
}

/// The trusted validator's build of `items` items for the agent of `seed`, shaped by `shape`.
fn signed_build(
    seed: u8,
    id: &str,
    items: u64,
    shape: impl FnOnce(&mut MemoryChallenge),
) -> pog_signed::Envelope {
    let validator = Identity::from_seed(VALIDATOR_SEED);
    let mut m = build_message(&validator, seed, id, items);
    shape(&mut m.challenge);
    validator.seal(kind::MEMORY_CHALLENGE, &m).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_gpu_holds_one_data_set_a_new_build_replaces_the_old() {
    let agent = start_holding_agent(24, std::time::Duration::from_secs(60)).await;
    let (build, walk, open) = (
        format!("{agent}/v1/memory/build"),
        format!("{agent}/v1/memory/walk"),
        format!("{agent}/v1/open"),
    );
    // Two builds for one GPU: the second replaces the first, whose walk finds nothing.
    for id in ["first", "second"] {
        let (status, body) = post(&build, &signed_build(24, id, 1000, |_| {})).await;
        assert_eq!(status, 200, "{id}: {body}");
    }
    let (status, body) = post(&walk, &signed_walk("first")).await;
    assert_eq!(status, 404, "the replaced data set is gone: {body}");
    assert!(body.contains("replaced by a newer build"), "{body}");
    let (status, body) = post(&walk, &signed_walk("second")).await;
    assert_eq!(status, 200, "{body}");
    // The next build drops the walk's commitment too if it was never opened.
    let (status, body) = post(&build, &signed_build(24, "third", 1000, |_| {})).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = post(&open, &signed_open("second")).await;
    assert_eq!(status, 404, "{body}");

    // A build while another one for the GPU is still running is refused, not run beside it.
    let slow = tokio::spawn({
        let build = build.clone();
        async move { post(&build, &signed_build(24, "slow", 1 << 20, |_| {})).await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let (status, body) = post(&build, &signed_build(24, "beside", 1000, |_| {})).await;
    assert!(
        !slow.is_finished(),
        "the slow build ended before the second one was answered: make it slower"
    );
    let (slow_status, slow_body) = slow.await.unwrap();
    assert_eq!(slow_status, 200, "{slow_body}");
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("one at a time"), "{body}");
    let (status, body) = post(&walk, &signed_walk("slow")).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn memory_challenges_beyond_the_claimed_models_plan_are_refused() {
    let agent = start_holding_agent(25, std::time::Duration::from_secs(60)).await;
    let build = format!("{agent}/v1/memory/build");
    // 1024 item rounds (26 × the protocol's 40) pass the shape check but not the plan.
    type Reshape = fn(&mut MemoryChallenge);
    let beyond: [(&str, Reshape); 4] = [
        ("item_rounds", |c| c.item_rounds = 1024),
        ("steps", |c| c.steps = 4 * pog_proof::memory::STEPS + 1),
        ("span", |c| c.span = 2 * pog_proof::memory::SPAN),
        ("walkers_per_leaf", |c| {
            c.walkers_per_leaf = 2 * pog_proof::memory::WALKERS_PER_LEAF;
            c.walkers = 1024;
        }),
    ];
    for (parameter, shape) in beyond {
        let (status, body) = post(&build, &signed_build(25, parameter, 4096, shape)).await;
        assert_eq!(status, 400, "{parameter}: {body}");
        assert!(
            body.contains(parameter) && body.contains("H200 SXM"),
            "{parameter}: {body}"
        );
    }
    // The protocol's own shape, at a size the CPU prover takes, is built.
    let planned = signed_build(25, "planned", 4096, |c| {
        c.item_rounds = pog_proof::memory::ITEM_ROUNDS;
        c.steps = pog_proof::memory::STEPS;
        c.span = pog_proof::memory::SPAN;
    });
    let (status, body) = post(&build, &planned).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_data_set_not_walked_in_time_is_freed() {
    let hold = std::time::Duration::from_millis(300);
    let agent = start_holding_agent(26, hold).await;
    let (build, walk, open) = (
        format!("{agent}/v1/memory/build"),
        format!("{agent}/v1/memory/walk"),
        format!("{agent}/v1/open"),
    );
    // Built, then left: freed after the hold, though its challenge expires much later.
    let (status, body) = post(&build, &signed_build(26, "left", 1000, |_| {})).await;
    assert_eq!(status, 200, "{body}");
    tokio::time::sleep(3 * hold).await;
    let (status, body) = post(&walk, &signed_walk("left")).await;
    assert_eq!(status, 404, "{body}");
    // Walked at once, the walk commits; its commitment, never opened, is freed likewise.
    let (status, body) = post(&build, &signed_build(26, "walked", 1000, |_| {})).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = post(&walk, &signed_walk("walked")).await;
    assert_eq!(status, 200, "{body}");
    tokio::time::sleep(3 * hold).await;
    let (status, body) = post(&open, &signed_open("walked")).await;
    assert_eq!(status, 404, "{body}");
    // Opened at once, it opens.
    let (status, body) = post(&build, &signed_build(26, "opened", 1000, |_| {})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(post(&walk, &signed_walk("opened")).await.0, 200);
    let (status, body) = post(&open, &signed_open("opened")).await;
    assert_eq!(status, 200, "{body}");
}

/// The trusted validator's GEMM challenge `id` for GPU-m of the agent of `seed`: INT8 products
/// of `size`, `batch` of them.
fn signed_gemm(seed: u8, id: &str, size: u64, batch: u32) -> pog_signed::Envelope {
    let validator = Identity::from_seed(VALIDATOR_SEED);
    let message = pog_proof::wire::ChallengeMessage {
        id: id.into(),
        challenge: pog_proof::Challenge {
            version: pog_proof::challenge::CHALLENGE_VERSION,
            nonce: [3; 32],
            to: pog_proof::challenge::Addressee {
                gpu_uuid: "GPU-m".parse().unwrap(),
                gpu_bus_id: "0000:00:06.0".into(),
                agent_key: Identity::from_seed([seed; 32]).public_key(),
                validator_key: validator.public_key(),
            },
            precision: pog_spec::Precision::Int8,
            size,
            batch,
            leaf_elements: 64,
        },
        issued_at_ms: now_ms(),
        expires_at_ms: now_ms() + 60_000,
    };
    validator.seal(kind::CHALLENGE, &message).unwrap()
}

/// The same hostile validator through GEMM challenges: work beyond the plan is refused, a GPU
/// keeps at most a few commitments, and none unopened past the hold.
#[tokio::test(flavor = "multi_thread")]
async fn gemm_challenges_beyond_the_plan_or_left_unopened_are_bounded() {
    let hold = std::time::Duration::from_millis(300);
    let agent = start_holding_agent(27, hold).await;
    let (challenge, open) = (format!("{agent}/v1/challenge"), format!("{agent}/v1/open"));
    // An H200's INT8 plan is n = 32768: a larger product, or four times its work, is refused
    // before anything is computed.
    let (status, body) = post(&challenge, &signed_gemm(27, "huge", 65_536, 1)).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("beyond the 32768"), "{body}");
    let (status, body) = post(&challenge, &signed_gemm(27, "long", 32_768, 1_000)).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("beyond 4 times"), "{body}");
    // Six small challenges committed, never opened: only the newest four are kept.
    for i in 1..=6 {
        let (status, body) = post(&challenge, &signed_gemm(27, &format!("g{i}"), 32, 2)).await;
        assert_eq!(status, 200, "{body}");
    }
    for (id, kept) in [("g1", false), ("g2", false), ("g6", true), ("g3", true)] {
        let (status, body) = post(&open, &signed_open(id)).await;
        assert_eq!(status, if kept { 200 } else { 404 }, "{id}: {body}");
    }
    // Past the hold, an unopened commitment is gone, whatever its signed expiry.
    tokio::time::sleep(3 * hold).await;
    let (status, body) = post(&open, &signed_open("g4")).await;
    assert_eq!(status, 404, "{body}");
}

/// Two validators the agent trusts, one hostile: a build by one leaves the other's data set
/// (and its walk) alone until walked or freed, so one cannot make the agent fail the other's
/// rounds; ids and lifetimes beyond the protocol's are refused, so neither can fill the
/// agent's memory of the ids it took.
#[tokio::test(flavor = "multi_thread")]
async fn one_trusted_validator_cannot_evict_anothers_data_set_or_pin_ids() {
    let hold = std::time::Duration::from_millis(400);
    let (honest, hostile) = (
        Identity::from_seed(VALIDATOR_SEED),
        Identity::from_seed([2; 32]),
    );
    let url = agent(28, vec![claim("GPU-m")])
        .holding_memory_for(hold)
        .trusting(vec![honest.public_key(), hostile.public_key()])
        .serve()
        .await
        .url;
    let (build, walk) = (
        format!("{url}/v1/memory/build"),
        format!("{url}/v1/memory/walk"),
    );
    let sealed = |by: &Identity, id: &str| {
        by.seal(kind::MEMORY_CHALLENGE, &build_message(by, 28, id, 1000))
            .unwrap()
    };
    let (status, body) = post(&build, &sealed(&honest, "honest")).await;
    assert_eq!(status, 200, "{body}");
    // The hostile validator's build while the honest one's data set waits for its walk: 409.
    let (status, body) = post(&build, &sealed(&hostile, "evict")).await;
    assert_eq!(status, 409, "{body}");
    let (status, body) = post(&walk, &signed_walk("honest")).await;
    assert_eq!(
        status, 200,
        "the honest walk still finds its data set: {body}"
    );
    // Its walk unopened, the hostile build is refused still; after the hold it is free.
    assert_eq!(post(&build, &sealed(&hostile, "evict-2")).await.0, 409);
    tokio::time::sleep(2 * hold).await;
    assert_eq!(post(&build, &sealed(&hostile, "after")).await.0, 200);
    // An id of 64 KiB, or one that lives for ever, is refused before it is remembered.
    let mut long = build_message(&hostile, 28, &"x".repeat(1 << 16), 1000);
    let (status, _) = post(
        &build,
        &hostile.seal(kind::MEMORY_CHALLENGE, &long).unwrap(),
    )
    .await;
    assert_eq!(status, 400);
    long.id = "forever".into();
    long.expires_at_ms = u64::MAX;
    let (status, body) = post(
        &build,
        &hostile.seal(kind::MEMORY_CHALLENGE, &long).unwrap(),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("expires more than"), "{body}");
}
