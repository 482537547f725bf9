//! Several validators on one PostgreSQL database as one fleet (`pog_validator::fleet`), over
//! real sockets on loopback: each GPU is challenged by one validator a slot, the GPUs split
//! between the live validators; one device behind two identities served by two validators
//! fails on time when the fleet's shared slot challenges both at once; a slot that a stopped
//! validator claimed and never finished is recorded once, as the fleet's fault. The fleet
//! tests need the test PostgreSQL server (`scripts/test.sh` starts it); the single-validator
//! claim runs on SQLite too.

mod common;

use common::*;
use pog_agent::misbehaviour::Cheat;
use pog_net::clock::ManualClock;
use pog_records::Policy;
use pog_validator::fleet;
use pog_validator::ledger::ValidatorLedger;
use pog_validator::schedule::{Rounds, Schedule};
use std::sync::Arc;
use std::time::Duration;

const MINUTE: Duration = Duration::from_secs(60);

/// A fixed time on a slot boundary, ms.
const T0: u64 = 1_800_000_000_000;

/// Rounds of a minute under `policy` on `h`'s validator.
fn rounds(h: &Served, policy: Policy) -> (Rounds, tokio::sync::watch::Sender<bool>) {
    let (stop, stopped) = tokio::sync::watch::channel(false);
    (
        Rounds::new(h.v.clone(), Schedule::every(MINUTE, policy), stopped),
        stop,
    )
}

/// Two validators (keys of the `seeds`) on the database at `url`, both on `clock`.
async fn on_one_database(url: &str, clock: &ManualClock, seeds: [u8; 2]) -> [Served; 2] {
    let serve = |seed: u8| {
        Harness::new()
            .key([seed; 32])
            .on_database(url)
            .clock(clock.shared())
            .serve()
    };
    [serve(seeds[0]).await, serve(seeds[1]).await]
}

/// An agent's routes answering nothing until `released` says so: an agent holding its
/// answers, its round running on.
fn holding_answers(
    released: tokio::sync::watch::Receiver<bool>,
) -> impl FnOnce(axum::Router) -> axum::Router + Send + 'static {
    move |router| {
        router.layer(axum::middleware::from_fn(
            move |request: axum::extract::Request, next: axum::middleware::Next| {
                let mut released = released.clone();
                async move {
                    let _ = released.wait_for(|go| *go).await;
                    next.run(request).await
                }
            },
        ))
    }
}

/// The GEMM proof records among a GPU's records.
async fn proofs(vurl: &str, uuid: &str) -> Vec<serde_json::Value> {
    records_of(vurl, uuid)
        .await
        .into_iter()
        .filter(|r| r.get("challenge").is_some())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lone_validator_claims_every_gpu_of_its_slot_once() {
    let h = Harness::new().serve().await;
    h.agent(50, vec![claim("GPU-l1"), claim("GPU-l2")]).await;
    let (mut rounds, _stop) = rounds(&h, policy());
    rounds.start();
    rounds.settled().await;
    for uuid in ["GPU-l1", "GPU-l2"] {
        assert_eq!(proofs(&h.url, uuid).await.len(), 1, "{uuid}");
    }
    // Nothing for a sweeper to settle: the claims' records are stored (the claims are marked
    // finished all at once when the next round starts).
    assert_eq!(h.v.registry().abandoned_claims(u64::MAX).unwrap(), vec![]);
}

#[tokio::test(flavor = "multi_thread")]
async fn claims_finished_together_are_not_abandoned_and_the_rest_are() {
    let h = Harness::new().serve().await;
    let me = h.v.public_key().to_string();
    let uuids: Vec<String> = (1..=3).map(|i| format!("GPU-c{i}")).collect();
    let mut registry = h.v.registry();
    assert_eq!(registry.claim((7, &me), &uuids, 1_000).unwrap(), uuids);
    registry.finish_claims(7, &uuids[..2]).unwrap();
    registry.finish_claims(7, &[]).unwrap();
    let left = registry.abandoned_claims(2_000).unwrap();
    let left: Vec<&str> = left.iter().map(|c| c.gpu_uuid.as_str()).collect();
    assert_eq!(left, ["GPU-c3"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn two_validators_split_a_slot_and_challenge_each_gpu_once() {
    let Some(url) = pog_validator::postgres::testing::fresh_postgres_database() else {
        return;
    };
    let clock = ManualClock::at(T0);
    let [a, b] = on_one_database(&url, &clock, [81, 82]).await;
    let uuids: Vec<String> = (0..12).map(|i| format!("GPU-f{i}")).collect();
    let keys = vec![a.v.public_key(), b.v.public_key()];
    a.agent(51, uuids.iter().map(|u| claim(u)).collect())
        .trusting(keys)
        .await;
    // Both know of each other before the slot (their heartbeats of the slot before).
    for v in [&a.v, &b.v] {
        v.registry()
            .heartbeat(v.public_key().as_ref(), T0 - 1)
            .unwrap();
    }
    let (mut ra, _sa) = rounds(&a, policy());
    let (mut rb, _sb) = rounds(&b, policy());
    ra.start();
    rb.start();
    ra.settled().await;
    rb.settled().await;
    let mut by_a = 0;
    for uuid in &uuids {
        let records = proofs(&a.url, uuid).await;
        assert_eq!(records.len(), 1, "{uuid}: one proof record in the slot");
        let expected = fleet::assigned_to(
            uuid,
            &fleet::live(
                &[
                    (a.v.public_key().to_string(), T0),
                    (b.v.public_key().to_string(), T0),
                ],
                T0,
                60_000,
            ),
        )
        .unwrap()
        .clone();
        if expected == a.v.public_key().as_str() {
            by_a += 1;
        }
    }
    assert!(
        (1..12).contains(&by_a),
        "the slot's GPUs are split between the validators ({by_a} of 12 to one)"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn one_device_behind_identities_served_by_two_validators_fails_on_time() {
    let Some(url) = pog_validator::postgres::testing::fresh_postgres_database() else {
        return;
    };
    let a = Harness::new().key([83; 32]).on_database(&url).serve().await;
    let b = Harness::new().key([84; 32]).on_database(&url).serve().await;
    let keys = vec![a.v.public_key(), b.v.public_key()];
    let live = {
        let now = pog_proof::timing::now_ms();
        fleet::live(
            &[
                (a.v.public_key().to_string(), now),
                (b.v.public_key().to_string(), now),
            ],
            now,
            60_000,
        )
    };
    // Two GPU identities, one on each validator's side of the split.
    let on = |key: &pog_signed::PublicKey| {
        (0..)
            .map(|i| format!("GPU-sybil-{i}"))
            .find(|u| fleet::assigned_to(u, &live) == Some(&key.to_string()))
            .unwrap()
    };
    let (first, second) = (on(&a.v.public_key()), on(&b.v.public_key()));
    // One device behind two agent keys: each challenge holds it for 400 ms against a bound
    // of 500 ms (+10 %); alone each passes, at once the second waits its turn.
    let device = Arc::new(tokio::sync::Mutex::new(()));
    for (seed, uuid) in [(52, &first), (53, &second)] {
        a.agent(seed, vec![claim(uuid)])
            .trusting(keys.clone())
            .cheating(Cheat::OneDevice(400))
            .sharing_device(device.clone())
            .await;
    }
    let policy = Policy {
        expected_ms: 500.0,
        ..policy()
    };
    for v in [&a.v, &b.v] {
        let now = pog_proof::timing::now_ms();
        v.registry()
            .heartbeat(v.public_key().as_ref(), now)
            .unwrap();
    }
    // The fleet's shared slot: both validators start it at once.
    let (mut ra, _sa) = rounds(&a, policy.clone());
    let (mut rb, _sb) = rounds(&b, policy);
    let started = std::time::Instant::now();
    ra.start();
    rb.start();
    let skew = started.elapsed();
    eprintln!("the second validator started the slot {skew:?} after the first");
    ra.settled().await;
    rb.settled().await;
    assert!(
        skew < Duration::from_millis(200),
        "slot start skew {skew:?}"
    );
    let records: Vec<serde_json::Value> =
        [proofs(&a.url, &first).await, proofs(&a.url, &second).await].concat();
    assert_eq!(records.len(), 2, "{records:?}");
    let late: Vec<_> = records.iter().filter(|r| r["accepted"] == false).collect();
    assert_eq!(
        late.len(),
        1,
        "one device answered for two in one bound: {records:?}"
    );
    assert_eq!(late[0]["outcome"]["time"]["accepted"], false);
    let signers: std::collections::HashSet<String> = records
        .iter()
        .map(|r| r["agent"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(signers.len(), 2, "two identities");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slot_a_stopped_validator_claimed_is_the_fleets_fault_once() {
    let Some(url) = pog_validator::postgres::testing::fresh_postgres_database() else {
        return;
    };
    let clock = ManualClock::at(T0);
    let [a, b] = on_one_database(&url, &clock, [85, 86]).await;
    a.agent(54, vec![claim("GPU-orphan")])
        .trusting(vec![a.v.public_key(), b.v.public_key()])
        .await;
    // A third validator claimed the GPU for slot T0's and stopped.
    let slot = fleet::slot_at(T0, 60_000);
    let held =
        a.v.registry()
            .claim(
                (slot, "dead-validator"),
                &["GPU-orphan".to_string()],
                T0 + 120_000,
            )
            .unwrap();
    assert_eq!(held, vec!["GPU-orphan".to_string()]);
    // Nobody else takes it in that slot.
    assert_eq!(
        b.v.registry()
            .claim((slot, "b"), &["GPU-orphan".to_string()], T0 + 120_000)
            .unwrap(),
        Vec::<String>::new()
    );
    // Three slots later its lease has run out: both validators sweep, one records it.
    clock.advance(3 * MINUTE);
    let (mut ra, _sa) = rounds(&a, policy());
    let (mut rb, _sb) = rounds(&b, policy());
    ra.start();
    rb.start();
    ra.settled().await;
    rb.settled().await;
    let missed: Vec<serde_json::Value> = records_of(&a.url, "GPU-orphan")
        .await
        .into_iter()
        .filter(|r| r["cause"] == "fleet")
        .collect();
    assert_eq!(missed.len(), 1, "{missed:?}");
    assert_eq!(
        missed[0]["record_id"].as_str().unwrap(),
        fleet::fleet_missed_id(slot, "GPU-orphan")
    );
    assert!(missed[0]["reason"]
        .as_str()
        .unwrap()
        .contains("dead-validator"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_round_that_outlasts_its_claims_lease_stays_the_agents_not_the_fleets() {
    // An agent that holds its answers past the claim's lease (two slots: a challenge may run
    // its set-up's expiry and the policy's, two minutes and more): the validator's next round
    // sweeps the claims whose lease ran out, and used to settle this one, still in flight, as
    // the fleet's miss: the GPU's round counted as the fleet's fault, not its agent's, and on
    // PostgreSQL its real record refused as late. A claim of a validator still running it is
    // not abandoned.
    let clock = ManualClock::at(T0);
    let h = Harness::new().clock(clock.shared()).serve().await;
    let (release, released) = tokio::sync::watch::channel(false);
    h.agent(56, vec![claim("GPU-slow")])
        .routed(holding_answers(released))
        .await;
    let (mut rounds, _stop) = rounds(&h, policy());
    rounds.start();
    // Three slots on, the challenge still waiting on the agent: the next round sweeps.
    clock.advance(3 * MINUTE);
    rounds.start();
    release.send(true).unwrap();
    rounds.settled().await;
    let records = records_of(&h.url, "GPU-slow").await;
    let missed: Vec<&serde_json::Value> =
        records.iter().filter(|r| r["cause"] == "fleet").collect();
    assert!(missed.is_empty(), "{missed:?}");
    assert_eq!(proofs(&h.url, "GPU-slow").await.len(), 1);
    // Its round recorded, the claim is no sweeper's.
    rounds.start();
    rounds.settled().await;
    assert_eq!(h.v.registry().abandoned_claims(u64::MAX).unwrap(), vec![]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_live_validators_round_that_outlasts_its_lease_is_not_swept_by_another() {
    let Some(url) = pog_validator::postgres::testing::fresh_postgres_database() else {
        return;
    };
    // As above, in a fleet: validator A's round still waits on the agent three slots on; B
    // sweeps too, and A is live (its heartbeats): A's claim is A's to settle, so its round
    // is recorded as the agent answered, not refused as late.
    let clock = ManualClock::at(T0);
    let [a, b] = on_one_database(&url, &clock, [87, 88]).await;
    let (release, released) = tokio::sync::watch::channel(false);
    a.agent(57, vec![claim("GPU-held")])
        .trusting(vec![a.v.public_key(), b.v.public_key()])
        .routed(holding_answers(released))
        .await;
    let (mut ra, _sa) = rounds(&a, policy());
    let (mut rb, _sb) = rounds(&b, policy());
    ra.start(); // A alone is live: it claims the GPU.
    clock.advance(3 * MINUTE);
    ra.start();
    rb.start();
    release.send(true).unwrap();
    ra.settled().await;
    rb.settled().await;
    let records = records_of(&a.url, "GPU-held").await;
    let missed: Vec<&serde_json::Value> =
        records.iter().filter(|r| r["cause"] == "fleet").collect();
    assert!(missed.is_empty(), "{missed:?}");
    assert_eq!(proofs(&a.url, "GPU-held").await.len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_validator_whose_clock_is_off_the_databases_takes_no_share() {
    let Some(url) = pog_validator::postgres::testing::fresh_postgres_database() else {
        return;
    };
    // Its clock a minute ahead of the database server's (which keeps the real time).
    let ahead = ManualClock::at(pog_proof::timing::now_ms() + 60_000);
    let off = Harness::new()
        .key([87; 32])
        .on_database(&url)
        .clock(ahead.shared())
        .serve()
        .await;
    off.agent(55, vec![claim("GPU-skewed")]).await;
    let checked = |policy| Schedule {
        max_clock_skew: Some(pog_validator::schedule::MAX_CLOCK_SKEW),
        ..Schedule::every(MINUTE, policy)
    };
    let (_stop, stopped) = tokio::sync::watch::channel(false);
    let mut rounds = Rounds::new(off.v.clone(), checked(policy()), stopped.clone());
    rounds.start();
    rounds.settled().await;
    assert!(
        proofs(&off.url, "GPU-skewed").await.is_empty(),
        "a validator a minute off challenged"
    );
    // One on the real clock, on the same database, takes the GPU.
    let right = Harness::new().key([88; 32]).on_database(&url).serve().await;
    right
        .agent(56, vec![claim("GPU-timely")])
        .trusting(vec![right.v.public_key()])
        .await;
    let mut rounds = Rounds::new(right.v.clone(), checked(policy()), stopped);
    rounds.start();
    rounds.settled().await;
    assert_eq!(proofs(&right.url, "GPU-timely").await.len(), 1);
}

/// A fleet validator's ledger in `dir` over the fleet's log at `url`, signed by the log key of
/// `log_seed`, its lease held by the validator of `seed` for `lease`.
fn fleet_ledger(
    url: &str,
    dir: &std::path::Path,
    (seed, log_seed): (u8, u8),
    lease: Duration,
) -> Result<Arc<ValidatorLedger>, pog_validator::ledger::LedgerError> {
    let db = pog_validator::registry::Registry::connect(url)
        .unwrap()
        .fleet_log()
        .expect("a PostgreSQL registry keeps the fleet's log");
    let signer = db.adopt_key([log_seed; 32], "pog.log/fleet-test", false)?;
    let holder = pog_signed::Identity::from_seed([seed; 32]).public_key();
    ValidatorLedger::new(pog_ledger::store::Ledger::open(dir).unwrap(), signer)
        .with_fleet(db, &holder, lease)
        .map(Arc::new)
}

/// The GPU-state-like record each test validator stores: a missed round of `uuid`.
fn missed(uuid: &str, n: u64) -> pog_records::MissedRound {
    pog_records::MissedRound {
        version: pog_records::RECORD_VERSION,
        record_id: format!("missed-{uuid}-{n}"),
        gpu_uuid: uuid.parse().unwrap(),
        agent: pog_signed::PublicKey::from([7; 32]),
        model: "H200 SXM".into(),
        reason: format!("round {n}"),
        cause: Default::default(),
        recorded_at_ms: n,
    }
}

/// One tick of `ledger`'s checkpoint schedule, without witnesses.
async fn tick(ledger: &ValidatorLedger) -> Option<u64> {
    let client = pog_validator::ledger::witness_client().unwrap();
    ledger.tick(&client, &[]).await.unwrap().signed
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fleet_keeps_one_log_and_its_checkpoints_outlive_the_validator_that_signed_them() {
    let Some(url) = pog_validator::postgres::testing::fresh_postgres_database() else {
        return;
    };
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let lease = Duration::from_millis(600);
    let ledgers = [
        fleet_ledger(&url, dirs[0].path(), (91, 7), lease).unwrap(),
        fleet_ledger(&url, dirs[1].path(), (92, 7), lease).unwrap(),
    ];
    let serve = |seed: u8, ledger: &Arc<ValidatorLedger>| {
        Harness::new()
            .key([seed; 32])
            .on_database(&url)
            .with_ledger_of(ledger.clone())
            .serve()
    };
    let (a, b) = (serve(91, &ledgers[0]).await, serve(92, &ledgers[1]).await);
    // Both validators store records at once, into one sequence.
    let stores = [(&a, "GPU-la"), (&b, "GPU-lb")].map(|(h, uuid)| {
        let v = h.v.clone();
        tokio::task::spawn_blocking(move || {
            for n in 0..20 {
                v.records()
                    .store((&format!("{uuid}-{n}"), None), false, &missed(uuid, n))
                    .unwrap();
            }
        })
    });
    for s in stores {
        s.await.unwrap();
    }
    // One leads and signs; the other follows and serves the same checkpoint of the same tree.
    let signed = tick(&ledgers[0]).await;
    assert_eq!(signed, Some(40), "the first to tick leads");
    assert_eq!(tick(&ledgers[1]).await, None, "the other follows");
    assert!(*ledgers[0].leading().borrow() && !*ledgers[1].leading().borrow());
    let logs = ledgers.each_ref().map(|l| l.ledger().log());
    assert_eq!(logs.map(|l| l.size()), [40, 40]);
    assert_eq!(logs[0].root(), logs[1].root());
    let served = pog_validator::ledger::stored_checkpoint(ledgers[1].ledger()).unwrap();
    assert_eq!(served.checkpoint.size, 40);
    // Each GPU's chain is the same on both: b serves a's records.
    let chain = |l: &ValidatorLedger| l.ledger().gpu_entries("GPU-la").unwrap();
    assert_eq!(chain(&ledgers[0]).len(), 20);
    assert_eq!(
        chain(&ledgers[1])
            .iter()
            .map(|(i, e)| (*i, e.encode()))
            .collect::<Vec<_>>(),
        chain(&ledgers[0])
            .iter()
            .map(|(i, e)| (*i, e.encode()))
            .collect::<Vec<_>>()
    );

    // The leader dies without a word (kill -9: it never ticks again, never gives its lease
    // up); records keep coming through b; once the lease runs out, b leads and signs a
    // checkpoint that extends a's.
    for n in 20..25 {
        b.v.records()
            .store((&format!("GPU-lb-{n}"), None), false, &missed("GPU-lb", n))
            .unwrap();
    }
    tokio::time::sleep(lease + Duration::from_millis(200)).await;
    assert_eq!(tick(&ledgers[1]).await, Some(45), "b takes the lease over");
    let newer = pog_validator::ledger::stored_checkpoint(ledgers[1].ledger()).unwrap();
    let proof = logs[1].consistency_proof(40, 45).unwrap();
    assert!(
        pog_merkle::verify_consistency(
            40,
            45,
            &served.checkpoint.root,
            &newer.checkpoint.root,
            &proof
        ),
        "b's checkpoint extends a's"
    );
    // a comes back (its pause ends): it follows b now, and serves b's checkpoint.
    assert_eq!(tick(&ledgers[0]).await, None);
    assert!(!*ledgers[0].leading().borrow());
    let at_a = pog_validator::ledger::stored_checkpoint(ledgers[0].ledger()).unwrap();
    assert_eq!(at_a.to_text(), newer.to_text());
    // A validator stopping gives its lease up: the other leads at its next tick.
    ledgers[1].step_down();
    a.v.records()
        .store(("GPU-la-last", None), false, &missed("GPU-la", 99))
        .unwrap();
    assert_eq!(tick(&ledgers[0]).await, Some(46));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_log_the_fleet_does_not_continue_and_another_fleets_log_key_are_refused() {
    let Some(url) = pog_validator::postgres::testing::fresh_postgres_database() else {
        return;
    };
    let lease = Duration::from_secs(60);
    // A validator's own log from before it joined: refused, whatever its size.
    let own = tempfile::tempdir().unwrap();
    let key = pog_signed::Identity::from_seed([93; 32]);
    let record = |uuid: &str| {
        key.seal(
            pog_signed::RecordKind::RoundMissed.wire_kind(),
            &missed(uuid, 1),
        )
        .unwrap()
    };
    ValidatorLedger::open(own.path(), &key, None)
        .unwrap()
        .append(&record("GPU-s"))
        .unwrap();
    let joined = tempfile::tempdir().unwrap();
    let first = fleet_ledger(&url, joined.path(), (94, 8), lease).unwrap();
    first.append(&record("GPU-j")).unwrap();
    drop(first);
    let refused = fleet_ledger(&url, own.path(), (93, 8), lease)
        .err()
        .expect("refused");
    assert!(
        refused.to_string().contains("not the fleet's log"),
        "{refused}"
    );
    // Another fleet's log key: refused, naming the flag that fixes it.
    let other = tempfile::tempdir().unwrap();
    let refused = fleet_ledger(&url, other.path(), (95, 9), lease)
        .err()
        .expect("refused");
    assert!(refused.to_string().contains("--log-key-file"), "{refused}");
    // The fleet's key on a fresh directory: the log is copied in.
    let copy = fleet_ledger(&url, other.path(), (95, 8), lease).unwrap();
    assert_eq!(copy.ledger().log().size(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_round_recorded_after_its_claim_was_settled_as_missed_is_refused() {
    let Some(url) = pog_validator::postgres::testing::fresh_postgres_database() else {
        return;
    };
    let mut registry = pog_validator::registry::Registry::connect(&url).unwrap();
    let gpu = ["GPU-p".to_string()];
    // A round's record as validator `who` signs it (the store reads its signer), stored as
    // the round of `slot`.
    let round = |who: &str| {
        format!(
            r#"{{"version":2,"kind":"record","body":"{{}}","signer":"{who}","signature":"00"}}"#
        )
    };
    let mut record = |id: &str, who: &str, slot: Option<u64>| {
        registry
            .record_logged((id, "GPU-p"), true, &round(who), (None, slot))
            .map(|_| ())
    };
    // Validator A claims slot 7 and is cut off from the database past its lease; B's sweep
    // settles the slot as the fleet's miss.
    let mut registry2 = pog_validator::registry::Registry::connect(&url).unwrap();
    registry2.claim((7, "validator-a"), &gpu, 1_000).unwrap();
    assert_eq!(registry2.abandoned_claims(2_000).unwrap().len(), 1);
    assert!(registry2.settle_claim(7, "GPU-p").unwrap());
    // A comes back with slot 7's record: refused (fenced), the slot keeps one record.
    let late = record("late", "validator-a", Some(7));
    assert!(
        matches!(
            late,
            Err(pog_validator::registry_model::RegistryError::Fenced { slot: 7, .. })
        ),
        "{late:?}"
    );
    assert!(!registry2.has_record("late").unwrap());
    // In time, a round's record finishes its claim in its own transaction: no sweep settles
    // that slot, whenever the claim's lease runs out.
    registry2.claim((8, "validator-a"), &gpu, 1_000).unwrap();
    record("in-time", "validator-a", Some(8)).unwrap();
    assert!(registry2.abandoned_claims(2_000).unwrap().is_empty());
    assert!(!registry2.settle_claim(8, "GPU-p").unwrap());
    // The round's other records (memory, the host's proofs) find their claim done: stored.
    record("in-time-memory", "validator-a", Some(8)).unwrap();
    // Cut off again in slot 9, A claims slot 10 before slot 9's record arrives: the late
    // record names slot 9, settled as missed, and is refused; it does not finish slot 10's
    // claim (it used to finish A's oldest open claim, so slot 10 then held two records and
    // slot 9 a record and a miss).
    registry2.claim((9, "validator-a"), &gpu, 1_000).unwrap();
    assert!(registry2.settle_claim(9, "GPU-p").unwrap());
    registry2.claim((10, "validator-a"), &gpu, 1_000).unwrap();
    let late = record("late-9", "validator-a", Some(9));
    assert!(
        matches!(
            late,
            Err(pog_validator::registry_model::RegistryError::Fenced { slot: 9, .. })
        ),
        "{late:?}"
    );
    let open: Vec<u64> = registry2
        .abandoned_claims(2_000)
        .unwrap()
        .iter()
        .map(|c| c.slot)
        .collect();
    assert_eq!(open, vec![10], "slot 10's claim is still open");
    record("slot-10", "validator-a", Some(10)).unwrap();
    assert!(registry2.abandoned_claims(2_000).unwrap().is_empty());
    // Another validator's record of the GPU is not A's to fence, nor is a record outside
    // the rounds (a challenge asked through the API names no slot).
    record("other", "validator-b", Some(9)).unwrap();
    record("asked", "validator-a", None).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stopped_validator_leaves_the_live_set_within_heartbeats_not_slots() {
    let Some(url) = pog_validator::postgres::testing::fresh_postgres_database() else {
        return;
    };
    // Slots of 6 s: a heartbeat every 600 ms, the live set's horizon 2.4 s (it used to be two
    // slots, 12 s, counted from the last slot's start).
    let every = Duration::from_secs(6);
    let every_ms = every.as_millis() as u64;
    let a = Harness::new().key([89; 32]).on_database(&url).serve().await;
    let b = Harness::new().key([90; 32]).on_database(&url).serve().await;
    let schedule = || Schedule::every(every, policy());
    let (_stop_a, stopped_a) = tokio::sync::watch::channel(false);
    let (_stop_b, stopped_b) = tokio::sync::watch::channel(false);
    let run_a = tokio::spawn(pog_validator::schedule::run(Rounds::new(
        a.v.clone(),
        schedule(),
        stopped_a,
    )));
    let _run_b = tokio::spawn(pog_validator::schedule::run(Rounds::new(
        b.v.clone(),
        schedule(),
        stopped_b,
    )));
    let a_key = a.v.public_key().to_string();
    let seen_a = || {
        let rows = b.v.registry().heartbeat("observer", 0).unwrap();
        rows.into_iter()
            .find(|(key, _)| *key == a_key)
            .map(|(_, at)| at)
    };
    // Alive, A is seen within two heartbeats at any moment of the slot, not only at its start.
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(700)).await;
        let now = pog_proof::timing::now_ms();
        let at = seen_a().expect("A has said it is alive");
        assert!(
            now.saturating_sub(at) <= 2 * fleet::heartbeat_every_ms(every_ms) + 200,
            "A last seen {} ms ago",
            now.saturating_sub(at)
        );
    }
    // Stopped at once (its task dropped, as a killed process's would be): its heartbeats end
    // with it, and the live set drops it within the horizon, far less than a slot.
    run_a.abort();
    let _ = run_a.await;
    let stopped_at = pog_proof::timing::now_ms();
    let last = seen_a().unwrap();
    let dropped = loop {
        let now = pog_proof::timing::now_ms();
        let live = fleet::live(
            &b.v.registry().heartbeat("observer", 0).unwrap(),
            now,
            every_ms,
        );
        if !live.contains(&a_key) {
            break now;
        }
        assert!(
            now - stopped_at < 2 * every_ms,
            "A still live after two slots"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        seen_a(),
        Some(last),
        "A's heartbeats went on after it stopped"
    );
    assert!(
        dropped - stopped_at <= fleet::live_horizon_ms(every_ms) + 300,
        "A dropped from the live set {} ms after it stopped",
        dropped - stopped_at
    );
    assert!(fleet::live_horizon_ms(every_ms) < every_ms / 2);
}
