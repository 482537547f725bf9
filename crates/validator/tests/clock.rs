//! The validator on a clock the test moves by hand (`pog_net::clock::ManualClock`), over
//! loopback: what took an hour of waiting (a release bar, an order's lifetime, a health window
//! of days) is judged at the instant the test sets, and every record is stamped with it. No
//! test here sleeps.

mod common;

use common::{claim, policy, records_of, register, Harness};
use pog_market::{GpuClass, Order, OrderId, Price, Side};
use pog_net::clock::ManualClock;
use pog_proof::wire::MAX_HEALTH_WINDOW_MS;
use pog_records::FailureKind;
use pog_signed::Identity;
use pog_validator::health::FIRST_WINDOW_MS;
use pog_validator::market::{BookView, SubmitMessage, SUBMIT_KIND};
use pog_validator::schedule::{Rounds, Schedule};
use std::time::Duration;

/// 2030-01-01T00:00:00Z: a time the system clock is not at, so that a stamp that came from
/// the system clock cannot pass for the test's.
const T0: u64 = 1_893_456_000_000;

const MINUTE: Duration = Duration::from_secs(60);

/// An endpoint where nothing listens (connection refused at once).
fn dead_endpoint() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://{}", listener.local_addr().unwrap())
}

/// A GPU whose agent never answers misses rounds counted on the validator's clock, is released
/// after `release_after` failed rounds, and its agent is barred from it for `release_bar` by
/// that clock: an hour's bar lifts when the test moves the clock an hour, not after an hour.
/// Every record of it is stamped with the clock's time of its round.
#[tokio::test(flavor = "multi_thread")]
async fn a_silent_gpu_is_released_and_its_bar_lifts_on_the_validators_clock() {
    let clock = ManualClock::at(T0);
    let h = Harness::new().clock(clock.shared()).serve().await;
    let squatter = Identity::from_seed([70; 32]);
    let dead = dead_endpoint();
    let (status, body) = register(&h.url, &squatter, &dead, vec![claim("GPU-silent")]).await;
    assert_eq!(status, 200, "{body}");
    let schedule = Schedule {
        release_after: 2,
        release_bar: Duration::from_secs(3600),
        ..Schedule::every(MINUTE, policy())
    };
    let (_stop, stopped) = tokio::sync::watch::channel(false);
    let mut rounds = Rounds::new(h.v.clone(), schedule, stopped);
    // Round 1 at T0: unreachable, backs off to round 3.
    assert_eq!(rounds.start(), 1);
    rounds.settled().await;
    // Round 2, a minute later by the clock: skipped, recorded as missed.
    clock.advance(MINUTE);
    assert_eq!(rounds.start(), 2);
    rounds.settled().await;
    // Round 3: challenged again, unreachable again: released.
    clock.advance(MINUTE);
    assert_eq!(rounds.start(), 3);
    rounds.settled().await;
    assert!(
        h.v.registry().gpu("GPU-silent").unwrap().is_none(),
        "released"
    );

    let records = records_of(&h.url, "GPU-silent").await;
    let stamped = |pick: &dyn Fn(&serde_json::Value) -> bool| -> Vec<u64> {
        records
            .iter()
            .filter(|r| pick(r))
            .map(|r| r["recorded_at_ms"].as_u64().unwrap())
            .collect()
    };
    let proofs = stamped(&|r| r.get("challenge").is_some());
    assert_eq!(proofs, vec![T0, T0 + 120_000], "{records:?}");
    let missed = stamped(&|r| {
        r["record_id"]
            .as_str()
            .is_some_and(|id| id.starts_with("missed-"))
    });
    assert_eq!(missed, vec![T0 + 60_000], "{records:?}");
    let released = stamped(&|r| r["event"] == "released");
    assert_eq!(released, vec![T0 + 120_000], "{records:?}");
    let registered = stamped(&|r| r["event"] == "new");
    assert_eq!(registered, vec![T0], "{records:?}");
    for proof in records.iter().filter(|r| r.get("challenge").is_some()) {
        assert_eq!(
            proof["failure"]["kind"],
            serde_json::to_value(FailureKind::Unreachable).unwrap(),
            "{proof}"
        );
    }

    // Barred for the hour by the clock, to the second.
    clock.advance(Duration::from_secs(3600) - MINUTE);
    let (status, body) = register(&h.url, &squatter, &dead, vec![claim("GPU-silent")]).await;
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("in 60 s"), "{body}");
    clock.advance(MINUTE);
    let (status, body) = register(&h.url, &squatter, &dead, vec![claim("GPU-silent")]).await;
    assert_eq!(
        status, 200,
        "the bar lifted an hour after the release: {body}"
    );
}

/// A GPU's health windows are judged at the validator's clock: the first is the last
/// [`FIRST_WINDOW_MS`] before it, the next starts where the last one ended, and after days of
/// silence a window reaches back [`MAX_HEALTH_WINDOW_MS`] at most; a clock stepped back before
/// the last window's end starts a first window again. The agent does not answer: each record
/// says so, with the window it asked for.
#[tokio::test(flavor = "multi_thread")]
async fn health_windows_are_judged_at_the_validators_clock() {
    let clock = ManualClock::at(T0);
    let h = Harness::new().clock(clock.shared()).serve().await;
    let agent = Identity::from_seed([71; 32]);
    let (status, body) = register(&h.url, &agent, &dead_endpoint(), vec![claim("GPU-h")]).await;
    assert_eq!(status, 200, "{body}");
    let window = |r: &pog_records::HealthRecord| (r.from_ms, r.to_ms, r.recorded_at_ms);

    let first = h.v.collect_health("GPU-h").await.unwrap();
    assert_eq!(window(&first), (T0 - FIRST_WINDOW_MS, T0, T0));
    assert_eq!(
        first.failure.as_ref().unwrap().kind,
        FailureKind::Unreachable
    );

    let t1 = clock.advance(10 * MINUTE);
    let next = h.v.collect_health("GPU-h").await.unwrap();
    assert_eq!(
        window(&next),
        (T0, t1, t1),
        "starts where the last one ended"
    );

    let t2 = clock.advance(Duration::from_secs(3 * 24 * 3600));
    let late = h.v.collect_health("GPU-h").await.unwrap();
    assert_eq!(
        window(&late),
        (t2 - MAX_HEALTH_WINDOW_MS, t2, t2),
        "at most an hour back"
    );

    // The clock stepped back before the last window's end (NTP): a first window again.
    let t3 = t2 - 30 * 60_000;
    clock.set(t3);
    let stepped = h.v.collect_health("GPU-h").await.unwrap();
    assert_eq!(window(&stepped), (t3 - FIRST_WINDOW_MS, t3, t3));
}

/// An order leaves the book at its expiry by the validator's clock, and a clearing request
/// signed on that clock ages by it: an hour-long order expires when the test moves the clock
/// an hour.
#[tokio::test(flavor = "multi_thread")]
async fn orders_expire_and_clearings_age_on_the_validators_clock() {
    let clock = ManualClock::at(T0);
    let h = Harness::new()
        .clock(clock.shared())
        .with_market()
        .serve()
        .await;
    let validator = Identity::from_seed(common::VALIDATOR_SEED);
    let buyer = Identity::from_seed([72; 32]);
    let bid = Order::new(
        OrderId::new("b1").unwrap(),
        buyer.public_key(),
        Side::Bid,
        GpuClass::new("H200 SXM").unwrap(),
        4,
        Price::from_usd(3.0).unwrap(),
    )
    .unwrap();
    let submit = |expires_at_ms| {
        buyer
            .seal(
                SUBMIT_KIND,
                &SubmitMessage {
                    validator: validator.public_key(),
                    order: bid.clone(),
                    expires_at_ms: Some(expires_at_ms),
                },
            )
            .unwrap()
    };
    let http = reqwest::Client::new();
    let post = |path: &str, envelope: pog_signed::Envelope| {
        http.post(format!("{}{path}", h.url)).json(&envelope).send()
    };
    // Expired by the validator's clock already (an hour before T0, long after the system
    // clock's now): refused.
    let stale = post("/v1/market/submit", submit(T0 - 3_600_000))
        .await
        .unwrap();
    assert_eq!(
        stale.status().as_u16(),
        400,
        "{}",
        stale.text().await.unwrap()
    );
    let taken = post("/v1/market/submit", submit(T0 + 3_600_000))
        .await
        .unwrap();
    assert_eq!(
        taken.status().as_u16(),
        200,
        "{}",
        taken.text().await.unwrap()
    );
    let book = || async {
        reqwest::get(format!("{}/v1/market/book", h.url))
            .await
            .unwrap()
            .json::<BookView>()
            .await
            .unwrap()
    };
    assert_eq!(book().await.bids.len(), 1);
    assert_eq!(book().await.bids[0].expires_at_ms, T0 + 3_600_000);

    clock.advance(Duration::from_secs(3600) - Duration::from_millis(1));
    assert_eq!(book().await.bids.len(), 1, "open until its expiry");
    assert_eq!(h.market().open_hours(bid.class()), (4, 0));
    clock.advance(Duration::from_millis(1));
    assert!(book().await.bids.is_empty(), "expired at the hour");
    assert_eq!(h.market().open_hours(bid.class()), (0, 0));

    // A clearing request signed now by the clock is taken; one signed at T0 is an hour old.
    let clear = |at_ms| {
        validator
            .seal(
                pog_validator::market::CLEAR_KIND,
                &pog_validator::market::ClearMessage {
                    validator: validator.public_key(),
                    class: GpuClass::new("H200 SXM").unwrap(),
                    mechanism: pog_market::Mechanism::UniformPrice,
                    at_ms,
                    nonce: Some(pog_validator::market::fresh_clear_nonce()),
                },
            )
            .unwrap()
    };
    let old = post("/v1/market/clear", clear(T0)).await.unwrap();
    assert_eq!(old.status().as_u16(), 400, "{}", old.text().await.unwrap());
    let now = post("/v1/market/clear", clear(T0 + 3_600_000))
        .await
        .unwrap();
    assert_eq!(now.status().as_u16(), 200, "{}", now.text().await.unwrap());
}

/// The agent judges a challenge's expiry by its own clock, which tests replace too: a
/// validator whose clock runs an hour behind the agent's issues challenges that the agent finds
/// long expired (refused, 410, and recorded so); on the validator's clock, the same agent takes
/// them and the proof is accepted.
#[tokio::test(flavor = "multi_thread")]
async fn the_agent_judges_expiries_by_its_own_clock() {
    let clock = ManualClock::at(T0);
    let h = Harness::new().clock(clock.shared()).serve().await;
    let ahead = ManualClock::at(T0 + 3_600_000);
    let late = h
        .agent(81, vec![claim("GPU-ahead")])
        .on_clock(ahead.shared())
        .await;
    assert_eq!(late.status(), 200);
    let refused =
        h.v.challenge::<pog_records::Gemm>("GPU-ahead", &policy())
            .await
            .unwrap();
    let failure = refused.failure.expect("refused by the agent");
    assert_eq!(failure.kind, FailureKind::AgentRefused, "{failure:?}");
    assert!(failure.message.contains("410"), "{failure:?}");

    let on_time = h
        .agent(82, vec![claim("GPU-on-time")])
        .on_clock(clock.shared())
        .await;
    assert_eq!(on_time.status(), 200);
    let accepted =
        h.v.challenge::<pog_records::Gemm>("GPU-on-time", &policy())
            .await
            .unwrap();
    assert!(accepted.accepted, "{accepted:?}");
}
