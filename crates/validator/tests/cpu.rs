//! The proof of the host's CPU end to end over real sockets on loopback: agents claiming
//! their host's cores at registration, a round of the validator's schedule that proves the
//! host after its GPUs, on the first GPU of each agent. An honest host passes; one claiming
//! twice the threads it runs on fails on time; one skipping work fails its spot checks; a
//! challenge beyond the agent's threads is refused before any work; one that calibrated fast
//! once, in a round in time or a late one, cannot widen its bound by calibrating slowly.

mod common;

use common::*;
use pog_proof::prover::Behaviour;
use pog_records::{CpuRecord, HostCpu, RECORD_VERSION};
use pog_signed::RecordKind;
use pog_validator::schedule::{Rounds, Schedule};
use pog_validator::validator::Validator;

/// The CPU records among a GPU's records, newest last.
async fn cpu_records(vurl: &str, uuid: &str) -> Vec<serde_json::Value> {
    records_of(vurl, uuid)
        .await
        .into_iter()
        .filter(|r| r.get("cpu_challenge").is_some())
        .collect()
}

/// Held by each test for its whole run: these tests time a host's lanes against its
/// calibration, and run beside each other on a 2-core machine one's lanes slowed another's
/// calibration (CI saw two lanes on one thread at 1.09 of a calibration so slowed, under the
/// limit).
static TIMED: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread")]
async fn a_round_proves_the_host_after_its_gpus_on_its_first_gpu() {
    let _alone = TIMED.lock().await;
    let h = Harness::new().serve().await;
    h.agent(31, vec![claim("GPU-b"), claim("GPU-a")])
        .claiming_cores(1)
        .await;
    h.agent(32, vec![claim("GPU-quiet")]).await;
    let schedule = Schedule::every(std::time::Duration::from_secs(60), policy());
    let (_stop, stopped) = tokio::sync::watch::channel(false);
    let mut rounds = Rounds::new(h.v.clone(), schedule, stopped);
    rounds.start();
    rounds.settled().await;
    // The host's proof rides with its first GPU by UUID, once a round.
    let on_first = cpu_records(&h.url, "GPU-a").await;
    assert_eq!(on_first.len(), 1, "{on_first:?}");
    assert!(cpu_records(&h.url, "GPU-b").await.is_empty());
    let record: CpuRecord = serde_json::from_value(on_first[0].clone()).unwrap();
    assert_eq!(record.version, RECORD_VERSION);
    assert_eq!(record.details.cpu_challenge.lanes, 1);
    assert!(record.details.calibration_ms.is_some());
    let outcome = record.outcome.as_ref().expect("a verdict");
    assert_eq!(outcome.wrong(), 0, "{outcome:?}");
    assert!(record.details.steps_per_s(Some(outcome)).unwrap() > 0.0);
    // An agent that claims no cores has no proof of CPU.
    assert!(cpu_records(&h.url, "GPU-quiet").await.is_empty());
    // The record kind is the validator's.
    assert!(RecordKind::CpuRound.signed_by_validator());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_host_running_its_lanes_on_fewer_threads_than_it_claims_fails_on_time() {
    let _alone = TIMED.lock().await;
    let h = Harness::new().serve().await;
    // Two lanes claimed, one thread to run them (and never more than this host has: the
    // agent refuses lanes beyond its threads).
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    if threads < 2 {
        eprintln!("one hardware thread: nothing to claim twice of");
        return;
    }
    h.agent(33, vec![claim("GPU-few")])
        .claiming_cores(2)
        .behaving(Behaviour::Threads(1))
        .await;
    // Lanes eight times the test shape's (about 350 ms): the calibration's fixed costs (the
    // request, the table, a thread's start; 17 ms on a busy CI machine) weigh little beside
    // one lane, so the ratio is the 2.0 of two lanes on one thread, not 1.45.
    let mut long = policy();
    long.cpu.steps *= 8;
    // Judged over five rounds, as the schedule judges a host: one round's calibration can run
    // slow on a shared machine (CI once saw it 1.43 times the timed phase's lane, and the
    // cheat passed at 0.93), but a slow calibration is rare, and once the host has passed, its
    // later calibrations count at most 1.1 times its fastest whose round checked out.
    const ROUNDS: usize = 5;
    let mut rejected = Vec::new();
    let mut ratios = Vec::new();
    for _ in 0..ROUNDS {
        let record = h.v.challenge::<HostCpu>("GPU-few", &long).await.unwrap();
        let outcome = record.outcome.as_ref().expect("a verdict");
        assert_eq!(
            outcome.wrong(),
            0,
            "every segment right, only late: {outcome:?}"
        );
        ratios.push(outcome.time.ratio);
        if !record.accepted {
            rejected.push(outcome.time.ratio);
        }
    }
    assert!(
        rejected.len() > ROUNDS / 2,
        "the cheat passed {} of {ROUNDS} rounds; time over bound each round: {ratios:?}",
        ROUNDS - rejected.len()
    );
    assert!(rejected
        .iter()
        .all(|ratio| *ratio > 1.0 + pog_proof::timing::TIME_TOLERANCE));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_host_that_calibrated_fast_cannot_widen_its_bound_by_calibrating_slowly() {
    let _alone = TIMED.lock().await;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let h = Harness::new().serve().await;
    // The agent's calibration answers as it runs, then 1.5 s late (a host slowing its set-up
    // to be judged against a longer one: what lets twice the threads it has pass).
    let slow = Arc::new(AtomicBool::new(false));
    let slowed = slow.clone();
    h.agent(36, vec![claim("GPU-pace")])
        .claiming_cores(1)
        .routed(move |router| {
            router.layer(axum::middleware::from_fn(
                move |request: axum::extract::Request, next: axum::middleware::Next| {
                    let slow = slowed.load(Ordering::SeqCst);
                    async move {
                        let calibrating = request.uri().path() == "/v1/cpu/calibrate";
                        let response = next.run(request).await;
                        if calibrating && slow {
                            tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
                        }
                        response
                    }
                },
            ))
        })
        .await;
    let fast =
        h.v.challenge::<HostCpu>("GPU-pace", &policy())
            .await
            .unwrap();
    // Its spot checks passed: the pace counts it whether or not its time made the bound (a
    // busy 2-core CI run once took 118 ms where the test shape allows 105 ms × the tolerance,
    // 2026-12-07).
    let outcome = fast.outcome.as_ref().expect("the round was answered");
    assert_eq!(outcome.rejected_total, 0, "{outcome:?}");
    slow.store(true, Ordering::SeqCst);
    let slowed =
        h.v.challenge::<HostCpu>("GPU-pace", &policy())
            .await
            .unwrap();
    // The record keeps the calibration as measured; the bound counts it as at most 1.1 times
    // the fastest that checked out (without that, the bound would have grown by 1.5 × 1.5 s, up to
    // the plan's ceiling).
    let judged_by_the_fast_pace = |slowed: &CpuRecord| {
        let measured = slowed.details.calibration_ms.unwrap();
        assert!(measured >= 1500.0, "{measured}");
        assert!(
            slowed.expected_ms
                <= fast.expected_ms * pog_validator::set_up_pace::SET_UP_SLACK * (1.0 + 1e-9),
            "{} against {}",
            slowed.expected_ms,
            fast.expected_ms
        );
    };
    judged_by_the_fast_pace(&slowed);
    // A restarted validator over the same registry takes the pace up: the slowed calibration
    // buys no looser bound there either (before, its first round was judged by it as measured).
    let restarted = Validator::over(h.v.records().clone(), loopback()).unwrap();
    judged_by_the_fast_pace(
        &restarted
            .challenge::<HostCpu>("GPU-pace", &policy())
            .await
            .unwrap(),
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_host_late_in_its_rounds_cannot_widen_its_bound_by_calibrating_slowly() {
    let _alone = TIMED.lock().await;
    use std::sync::atomic::{AtomicU8, Ordering};
    use std::sync::Arc;
    let h = Harness::new().serve().await;
    // First the timed phase's answer comes late (a host claiming more threads than it has, at
    // its usual calibration pace: late with every segment right), then the calibration's,
    // 1.5 s (the same host slowing its set-up to be judged against a longer one).
    const LATE_COMMITMENT: u8 = 0;
    const SLOW_CALIBRATION: u8 = 1;
    let phase = Arc::new(AtomicU8::new(LATE_COMMITMENT));
    let seen = phase.clone();
    h.agent(38, vec![claim("GPU-late")])
        .claiming_cores(1)
        .routed(move |router| {
            router.layer(axum::middleware::from_fn(
                move |request: axum::extract::Request, next: axum::middleware::Next| {
                    // Late by 400 ms: past the bound of a 1-lane test calibration (about
                    // 50 ms), within the validator's wait for a commitment.
                    let (slowed, by_ms) = match seen.load(Ordering::SeqCst) {
                        LATE_COMMITMENT => ("/v1/cpu/start", 400),
                        _ => ("/v1/cpu/calibrate", 1500),
                    };
                    async move {
                        let slow = request.uri().path() == slowed;
                        let response = next.run(request).await;
                        if slow {
                            tokio::time::sleep(std::time::Duration::from_millis(by_ms)).await;
                        }
                        response
                    }
                },
            ))
        })
        .await;
    let late =
        h.v.challenge::<HostCpu>("GPU-late", &policy())
            .await
            .unwrap();
    let outcome = late.outcome.as_ref().expect("a verdict");
    assert!(!late.accepted, "late by 400 ms: {outcome:?}");
    assert_eq!(outcome.wrong(), 0, "every segment right: {outcome:?}");
    phase.store(SLOW_CALIBRATION, Ordering::SeqCst);
    let slowed =
        h.v.challenge::<HostCpu>("GPU-late", &policy())
            .await
            .unwrap();
    // The late round's calibration was the host's real pace: the slowed one counts at most
    // 1.1 times it (before, only an accepted round set the pace, so the slowed calibration
    // was judged as measured, its bound 1.5 times 1.5 s and more).
    assert!(slowed.details.calibration_ms.unwrap() >= 1500.0);
    assert!(
        slowed.expected_ms
            <= late.expected_ms * pog_validator::set_up_pace::SET_UP_SLACK * (1.0 + 1e-9),
        "{} against {}",
        slowed.expected_ms,
        late.expected_ms
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_far_host_is_not_judged_against_its_round_trip() {
    let _alone = TIMED.lock().await;
    use std::time::Duration;
    let h = Harness::new().serve().await;
    // 600 ms of every answer: the pings, the calibration, the commitment. (300 ms until
    // 2026-12-07: a busy 2-core CI machine moved the timed phase's lane against the
    // calibration's by as much, and the median of five came out at 71 ms.)
    let gpus = [
        "GPU-far-1",
        "GPU-far-2",
        "GPU-far-3",
        "GPU-far-4",
        "GPU-far-5",
    ];
    h.agent(37, gpus.iter().map(|g| claim(g)).collect())
        .claiming_cores(1)
        .routed(|router| {
            router.layer(axum::middleware::from_fn(
                |request: axum::extract::Request, next: axum::middleware::Next| async move {
                    let response = next.run(request).await;
                    tokio::time::sleep(Duration::from_millis(600)).await;
                    response
                },
            ))
        })
        .await;
    // A GPU's first challenge knows no round trip yet; the pings after it measure one. Lanes
    // of the production length (about 350 ms). One lane claimed: the calibration and the
    // timed phase run the same single lane back to back, and each of the validator's clocks
    // over them holds one 600-ms answer, so the calibration counts the lane alone only if it
    // is credited the round trip (here down to its floor, half the set-up's clock).
    let mut long = policy();
    long.cpu.steps *= 8;
    let mut uncredited = Vec::new();
    for gpu in gpus {
        h.v.challenge::<HostCpu>(gpu, &long).await.unwrap();
        let b = h.v.challenge::<HostCpu>(gpu, &long).await.unwrap();
        let time = b.outcome.as_ref().unwrap().time;
        assert!(time.round_trip_ms >= 600.0, "{}", time.round_trip_ms);
        // The timed phase's clock as measured (its own round trip in it) less the credited
        // calibration: the lane and its answer less half of them (medians 558–718 ms in three
        // debug runs on the 2-core development machine). Compared within one challenge, so
        // the machine's load (which moved a lane by 200 ms between two challenges of a busy
        // CI run) moves both alike; the median of five GPUs.
        uncredited.push(time.measured_ms - b.details.calibration_ms.unwrap());
    }
    uncredited.sort_by(f64::total_cmp);
    let median = uncredited[uncredited.len() / 2];
    // Without the credit, the calibration would count the 600 ms as lanes run (and widen the
    // bound by 1.5 times that): the difference would be about 0.
    assert!(
        median > 200.0,
        "the timed phase's clock less the calibration: {uncredited:?} ms (median {median})"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_host_skipping_work_fails_its_spot_checks() {
    let _alone = TIMED.lock().await;
    let h = Harness::new().serve().await;
    h.agent(34, vec![claim("GPU-skip")])
        .claiming_cores(1)
        .behaving(Behaviour::Junk(0.3))
        .await;
    let record =
        h.v.challenge::<HostCpu>("GPU-skip", &policy())
            .await
            .unwrap();
    let outcome = record.outcome.as_ref().expect("a verdict");
    assert!(!record.accepted);
    assert!(outcome.wrong() > 0, "{outcome:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_refuses_more_lanes_than_its_threads_before_any_work() {
    let _alone = TIMED.lock().await;
    let h = Harness::new().serve().await;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    h.agent(35, vec![claim("GPU-many")])
        .claiming_cores(threads + 1)
        .await;
    let record =
        h.v.challenge::<HostCpu>("GPU-many", &policy())
            .await
            .unwrap();
    assert!(!record.accepted);
    let failure = record.failure.expect("refused");
    assert!(
        failure.message.contains("413") || failure.message.contains("beyond"),
        "{failure:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_registration_claiming_no_or_absurd_cores_is_refused() {
    let _alone = TIMED.lock().await;
    let h = Harness::new().serve().await;
    for cores in [0, pog_proof::cpu::MAX_LANES + 1] {
        let spec = h.agent(36, vec![claim("GPU-absurd")]).claiming_cores(cores);
        assert_eq!(spec.await.status(), 400, "{cores} cores");
    }
}

/// The host is proven once a round, on its first GPU, and every GPU of the host scores it:
/// the other GPU's CPU part is read from the first GPU's records, and a GPU of another agent
/// has none.
#[tokio::test(flavor = "multi_thread")]
async fn every_gpu_of_a_host_scores_the_proof_its_first_gpu_carries() {
    let _alone = TIMED.lock().await;
    let h = Harness::new()
        .with_market()
        .with_pricing_by_hand()
        .serve()
        .await;
    h.agent(33, vec![claim("GPU-d"), claim("GPU-c")])
        .claiming_cores(1)
        .await;
    h.agent(34, vec![claim("GPU-e")]).await;
    let schedule = Schedule::every(std::time::Duration::from_secs(60), policy());
    let (_stop, stopped) = tokio::sync::watch::channel(false);
    let mut rounds = Rounds::new(h.v.clone(), schedule, stopped);
    rounds.start();
    rounds.settled().await;
    assert_eq!(cpu_records(&h.url, "GPU-c").await.len(), 1);
    assert!(cpu_records(&h.url, "GPU-d").await.is_empty());
    let cpu = |uuid: &str| h.pricing().assess(uuid).unwrap().unwrap().detail.parts.cpu;
    let (first, other, elsewhere) = (cpu("GPU-c"), cpu("GPU-d"), cpu("GPU-e"));
    assert_eq!(other, first, "the host's proof counts for each of its GPUs");
    assert_ne!(elsewhere, first, "{elsewhere:?}");
    assert!(
        elsewhere
            .note
            .as_deref()
            .is_some_and(|n| n.contains("no proof")),
        "{elsewhere:?}"
    );
}

/// A score's logged inputs name the host's proof of CPU it counted, which is in the host's
/// first GPU's history, for each GPU of the host.
#[tokio::test(flavor = "multi_thread")]
async fn each_gpus_score_names_its_hosts_proof_among_its_inputs() {
    let _alone = TIMED.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::new()
        .stored_in(dir.path())
        .with_ledger(&dir.path().join("ledger"))
        .with_pricing_by_hand()
        .serve()
        .await;
    h.agent(35, vec![claim("GPU-g"), claim("GPU-f")])
        .claiming_cores(1)
        .await;
    let schedule = Schedule::every(std::time::Duration::from_secs(60), policy());
    let (_stop, stopped) = tokio::sync::watch::channel(false);
    let mut rounds = Rounds::new(h.v.clone(), schedule, stopped);
    rounds.start();
    rounds.settled().await;
    h.pricing().catch_up().unwrap();
    let ledger = h.v.records().ledger().unwrap().ledger();
    let entries = |uuid: &str, kind: RecordKind| -> Vec<(u64, pog_ledger::entry::Entry)> {
        ledger
            .gpu_entries(uuid)
            .unwrap()
            .into_iter()
            .filter(|(_, e)| e.kind == kind)
            .collect()
    };
    let cpu = entries("GPU-f", RecordKind::CpuRound);
    assert_eq!(cpu.len(), 1, "the host's proof, on its first GPU");
    for uuid in ["GPU-f", "GPU-g"] {
        let (_, last) = entries(uuid, RecordKind::Score).pop().expect("a score");
        let score: pog_records::reports::Score = serde_json::from_str(&last.body).unwrap();
        assert!(
            score.inputs.contains(&cpu[0].0),
            "{uuid}: {:?}",
            score.inputs
        );
    }
}
