//! The validator's order book over real sockets: signed submissions and cancellations, the
//! operator's clearings, the book and history, forged signatures, someone else's cancel,
//! replays at another validator, bad orders, and persistence across a restart. A refused
//! request never changes the book. Scores and prices from the validator's own records: a
//! stored accepted or failed record changes the GPU's score, price and price history, which
//! survives a restart; an agent that goes silent for some rounds (uptime below 1) and one
//! whose monitor reports an XID and alerts (anomalies) priced lower; scheduled clearings; a
//! captured clearing request replayed, before and after a restart.

mod common;

use common::{
    ask, claim, loopback, policy, prove_model, proven_provider, store_edited, validator_key,
    Harness, Served, VALIDATOR_SEED,
};
use pog_market::{GpuClass, Mechanism, Order, OrderId, Price, Side};
use pog_records::Gemm;
use pog_signed::{Envelope, Identity, RecordKind};
use pog_validator::client::MarketClient;
use pog_validator::market::{
    fresh_clear_nonce, CancelMessage, ClearMessage, MarketLimits, PostedPrice, SubmitMessage,
    CANCEL_KIND, CLEAR_KIND, SUBMIT_KIND,
};
use pog_validator::pricing::{PricePage, ScoreView};
use pog_validator::registry::Registry;
use pog_validator::validator::Validator;
use std::path::Path;
use std::sync::Arc;

fn h200() -> GpuClass {
    GpuClass::new("H200 SXM").unwrap()
}

fn order(id: &str, owner: &Identity, side: Side, quantity: u64, usd: f64) -> Order {
    Order::new(
        OrderId::new(id).unwrap(),
        owner.public_key(),
        side,
        h200(),
        quantity,
        Price::from_usd(usd).unwrap(),
    )
    .unwrap()
}

/// Posts an envelope as it is; returns the status and the JSON answer.
async fn post(url: &str, path: &str, body: &serde_json::Value) -> (u16, serde_json::Value) {
    let response = reqwest::Client::new()
        .post(format!("{url}{path}"))
        .json(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (
        status,
        response.json().await.unwrap_or(serde_json::Value::Null),
    )
}

fn sealed<T: serde::Serialize>(who: &Identity, kind: &str, message: &T) -> serde_json::Value {
    serde_json::to_value(who.seal(kind, message).unwrap()).unwrap()
}

/// A cancel of order b1 (the book's first order, sequence 0), signed by `signer`.
fn cancel_of_b1(signer: &Identity) -> Envelope {
    signer
        .seal(
            CANCEL_KIND,
            &CancelMessage {
                validator: validator_key(),
                id: OrderId::new("b1").unwrap(),
                sequence: Some(0),
            },
        )
        .unwrap()
}

/// Posts an envelope; returns the status.
async fn send(url: &str, path: &str, envelope: &Envelope) -> u16 {
    post(url, path, &serde_json::to_value(envelope).unwrap())
        .await
        .0
}

/// How long the tests' orders stay open.
const DAY: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// An expiry a day from now, in ms since the Unix epoch.
fn tomorrow_ms() -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    (now + DAY).as_millis() as u64
}

#[tokio::test]
async fn orders_trade_and_only_their_owner_cancels() {
    let h = Harness::new().with_market().serve().await;
    let url = h.url.clone();
    let client = MarketClient::new(&url).unwrap();
    let (alice, bob, mallory) = (
        Identity::from_seed([2; 32]),
        Identity::from_seed([3; 32]),
        Identity::from_seed([4; 32]),
    );
    // Bob's and Mallory's GPUs back their asks.
    let _bobs = proven_provider(&h, 3, &["GPU-b1", "GPU-b2"]).await;
    let _mallorys = proven_provider(&h, 4, &["GPU-m1"]).await;
    assert_eq!(client.info().await.unwrap().validator, validator_key());
    client
        .submit(&alice, order("b1", &alice, Side::Bid, 3, 4.0), DAY)
        .await
        .unwrap();
    client
        .submit(&bob, ask("a1", &bob, 2, 2.0, &["GPU-b1"]), DAY)
        .await
        .unwrap();
    client
        .submit(&bob, ask("a2", &bob, 1, 9.0, &["GPU-b2"]), DAY)
        .await
        .unwrap();
    let before = client.book(Some(&h200())).await.unwrap();
    assert_eq!((before.bids.len(), before.asks.len()), (1, 2));

    // Someone else's cancel names an order of its own, which it does not have: refused, the
    // book unchanged (ids are each owner's own).
    let err = client
        .cancel(&mallory, OrderId::new("a2").unwrap())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("404") && err.contains("this key has no order a2"),
        "{err}"
    );
    // Her own order of Bob's id is another order: taken, and cancelled by her alone.
    client
        .submit(&mallory, ask("a2", &mallory, 1, 9.0, &["GPU-m1"]), DAY)
        .await
        .unwrap();
    client
        .cancel(&mallory, OrderId::new("a2").unwrap())
        .await
        .unwrap();
    assert_eq!(client.book(Some(&h200())).await.unwrap(), before);

    // The owner's cancel.
    let cancelled = client
        .cancel(&bob, OrderId::new("a2").unwrap())
        .await
        .unwrap();
    assert_eq!(cancelled.order.id().as_str(), "a2");

    // Only the validator's own key clears.
    let err = client
        .clear(&alice, h200(), Mechanism::UniformPrice)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("403"), "{err}");
    let operator = Identity::from_seed(VALIDATOR_SEED);
    let record = client
        .clear(&operator, h200(), Mechanism::UniformPrice)
        .await
        .unwrap();
    assert_eq!(record.clearing.units, 2);
    assert_eq!(
        record.clearing.buyer_price,
        Some(Price::from_usd(4.0).unwrap())
    );
    let after = client.book(Some(&h200())).await.unwrap();
    assert_eq!(after.bids[0].order.quantity(), 1);
    assert!(after.asks.is_empty());
    let history = client.history(None, 10).await.unwrap();
    assert_eq!(history.clearings.len(), 1);
    assert_eq!(history.clearings[0].clearing.trades[0].bid.as_str(), "b1");
    // GPU-b1's hours in a1's day were sold: a new ask cannot sell them again before a1 expires.
    let err = client
        .submit(&bob, ask("a3", &bob, 1, 2.0, &["GPU-b1"]), DAY)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("409") && err.contains("already offered by ask a1"),
        "{err}"
    );
    // A filled order cannot be cancelled: not in the book for the client to find, and named
    // by its sequence (1), refused by the validator.
    let err = client
        .cancel(&bob, OrderId::new("a1").unwrap())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("404") && err.contains("open in the book"),
        "{err}"
    );
    let err = client
        .cancel_sequence(&bob, OrderId::new("a1").unwrap(), 1)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("409"), "{err}");
}

#[tokio::test]
async fn the_book_reads_in_pages_in_submission_order() {
    let h = Harness::new().with_market().serve().await;
    let url = h.url.clone();
    let client = MarketClient::new(&url).unwrap();
    let alice = Identity::from_seed([2; 32]);
    let _alices = proven_provider(&h, 2, &["GPU-o1", "GPU-o2", "GPU-o4"]).await;
    for (i, side) in [Side::Bid, Side::Ask, Side::Ask, Side::Bid, Side::Ask]
        .into_iter()
        .enumerate()
    {
        let id = format!("o{i}");
        let order = match side {
            Side::Bid => order(&id, &alice, side, 1, 1.0),
            Side::Ask => ask(&id, &alice, 1, 9.0, &[&format!("GPU-{id}")]),
        };
        client.submit(&alice, order, DAY).await.unwrap();
    }
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = client.book_page(None, after, 2).await.unwrap();
        assert!(page.bids.len() + page.asks.len() <= 2);
        let mut ids: Vec<(u64, String)> = page
            .bids
            .iter()
            .chain(&page.asks)
            .map(|e| (e.sequence, e.order.id().to_string()))
            .collect();
        ids.sort();
        seen.extend(ids.into_iter().map(|(_, id)| id));
        match page.next_after {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(seen, ["o0", "o1", "o2", "o3", "o4"]);
    // The whole book at once, as the client reads it, and a page past the end.
    let whole = client.book(Some(&h200())).await.unwrap();
    assert_eq!(
        (whole.bids.len(), whole.asks.len(), whole.next_after),
        (2, 3, None)
    );
    let past = client.book_page(None, Some(99), 10).await.unwrap();
    assert!(past.bids.is_empty() && past.asks.is_empty() && past.next_after.is_none());
}

#[tokio::test]
async fn forged_and_bad_orders_never_change_the_book() {
    let h = Harness::new().with_market().serve().await;
    let url = h.url.clone();
    let client = MarketClient::new(&url).unwrap();
    let (alice, mallory) = (Identity::from_seed([2; 32]), Identity::from_seed([4; 32]));
    client
        .submit(&alice, order("b1", &alice, Side::Bid, 1, 4.0), DAY)
        .await
        .unwrap();
    let before = client.book(None).await.unwrap();
    let submit = |order: Order| SubmitMessage {
        validator: validator_key(),
        order,
        expires_at_ms: Some(tomorrow_ms()),
    };

    // Mallory signs an order in Alice's name.
    let (status, answer) = post(
        &url,
        "/v1/market/submit",
        &sealed(
            &mallory,
            SUBMIT_KIND,
            &submit(order("m1", &alice, Side::Bid, 5, 1.0)),
        ),
    )
    .await;
    assert_eq!(status, 403, "{answer}");
    assert!(answer["error"].as_str().unwrap().contains("signed by"));

    // A valid signature over other bytes: the body changed after signing.
    let mut forged: Envelope = alice
        .seal(SUBMIT_KIND, &submit(order("b2", &alice, Side::Bid, 1, 1.0)))
        .unwrap();
    forged.body = forged.body.replace("1000000", "9000000");
    let (status, _) = post(
        &url,
        "/v1/market/submit",
        &serde_json::to_value(&forged).unwrap(),
    )
    .await;
    assert_eq!(status, 403);

    // A cancel whose signature is another key's, relabelled as Alice's.
    let mut relabelled = cancel_of_b1(&mallory);
    relabelled.signer = alice.public_key().into();
    assert_eq!(send(&url, "/v1/market/cancel", &relabelled).await, 403);

    // Signed for another validator: not replayable here.
    let elsewhere = SubmitMessage {
        validator: Identity::from_seed([9; 32]).public_key(),
        order: order("b3", &alice, Side::Bid, 1, 1.0),
        expires_at_ms: Some(tomorrow_ms()),
    };
    let (status, answer) = post(
        &url,
        "/v1/market/submit",
        &sealed(&alice, SUBMIT_KIND, &elsewhere),
    )
    .await;
    assert_eq!(status, 400);
    assert!(answer["error"]
        .as_str()
        .unwrap()
        .contains("names validator"));

    // A cancel that names no order by its sequence (an id is free again once its order
    // expires, so a captured cancel must not reach a later order of the same id).
    let unbound = alice
        .seal(
            CANCEL_KIND,
            &CancelMessage {
                validator: validator_key(),
                id: OrderId::new("b1").unwrap(),
                sequence: None,
            },
        )
        .unwrap();
    let (status, answer) = post(
        &url,
        "/v1/market/cancel",
        &serde_json::to_value(&unbound).unwrap(),
    )
    .await;
    assert_eq!(status, 400);
    assert!(answer["error"]
        .as_str()
        .unwrap()
        .contains("names no sequence"));

    // A signed cancel replayed as a submit: the kind is part of what is signed.
    let mut as_submit = cancel_of_b1(&alice);
    as_submit.kind = SUBMIT_KIND.into();
    assert_eq!(send(&url, "/v1/market/submit", &as_submit).await, 403);

    // Bad orders: a duplicate id, an unknown class, NaN, negative and absurd prices, zero
    // GPU-hours (these cannot even be made as an `Order`: they are sent as raw JSON).
    let (status, answer) = post(
        &url,
        "/v1/market/submit",
        &sealed(
            &alice,
            SUBMIT_KIND,
            &submit(order("b1", &alice, Side::Bid, 1, 1.0)),
        ),
    )
    .await;
    assert_eq!(status, 400);
    assert!(answer["error"]
        .as_str()
        .unwrap()
        .contains("already submitted"));
    let order_of = |price: serde_json::Value, class: &str, quantity: u64| {
        serde_json::json!({"id": "x", "owner": alice.public_key(), "side": "bid", "class": class,
                           "quantity": quantity, "price_micro_usd": price})
    };
    let raw = |price: serde_json::Value, class: &str, quantity: u64| {
        serde_json::json!({
            "validator": validator_key(),
            "order": order_of(price, class, quantity),
            "expires_at_ms": tomorrow_ms()
        })
        .to_string()
    };
    let expiring = |expires_at_ms: serde_json::Value| {
        let mut message = serde_json::json!({
            "validator": validator_key(),
            "order": order_of(1_000_000.into(), "H200 SXM", 1),
        });
        if !expires_at_ms.is_null() {
            message["expires_at_ms"] = expires_at_ms;
        }
        message.to_string()
    };
    for (body, expect) in [
        // Orders that expired already, would stay open past the longest lifetime, or name no
        // expiry (none stays open for ever).
        (expiring(1.into()), "not after now"),
        (
            expiring((tomorrow_ms() + 40 * DAY.as_millis() as u64).into()),
            "more than 30 days",
        ),
        (expiring(serde_json::Value::Null), "names no expiry"),
        (raw(1_000_000.into(), "Z9000", 1), "trades no GPU class"),
        (raw((-1).into(), "H200 SXM", 1), "malformed"),
        (
            raw(serde_json::json!(f64::NAN.to_string()), "H200 SXM", 1),
            "malformed",
        ),
        (raw(1_000_000_000_001u64.into(), "H200 SXM", 1), "malformed"),
        (raw(1_000_000.into(), "H200 SXM", 0), "malformed"),
    ] {
        let envelope = serde_json::to_value(alice.seal_body(SUBMIT_KIND, body)).unwrap();
        let (status, answer) = post(&url, "/v1/market/submit", &envelope).await;
        assert_eq!(status, 400, "{answer}");
        assert!(
            answer["error"].as_str().unwrap().contains(expect),
            "{answer}"
        );
    }
    // A stale clearing request, even from the operator.
    let operator = Identity::from_seed(VALIDATOR_SEED);
    let stale = ClearMessage {
        validator: validator_key(),
        class: h200(),
        mechanism: Mechanism::McAfee,
        at_ms: 1,
        nonce: Some(fresh_clear_nonce()),
    };
    let (status, _) = post(
        &url,
        "/v1/market/clear",
        &sealed(&operator, CLEAR_KIND, &stale),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(client.book(None).await.unwrap(), before);
    assert!(client.history(None, 10).await.unwrap().clearings.is_empty());
    // An unknown class in a book query.
    let status = reqwest::get(format!("{url}/v1/market/book?class=Z9000"))
        .await
        .unwrap()
        .status()
        .as_u16();
    assert_eq!(status, 404);
}

#[tokio::test]
async fn the_book_and_history_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("market.sqlite");
    let (alice, bob) = (Identity::from_seed([2; 32]), Identity::from_seed([3; 32]));
    let operator = Identity::from_seed(VALIDATOR_SEED);
    let (book, history) = {
        let h = Harness::new().with_market_at(&path).serve().await;
        let _bobs = proven_provider(&h, 3, &["GPU-b1", "GPU-b2"]).await;
        let client = MarketClient::new(&h.url).unwrap();
        client
            .submit(&alice, order("b1", &alice, Side::Bid, 4, 5.0), DAY)
            .await
            .unwrap();
        client
            .submit(&bob, ask("a1", &bob, 1, 1.0, &["GPU-b1"]), DAY)
            .await
            .unwrap();
        client
            .submit(&bob, ask("a2", &bob, 1, 3.0, &["GPU-b2"]), DAY)
            .await
            .unwrap();
        client
            .clear(&operator, h200(), Mechanism::McAfee)
            .await
            .unwrap();
        (
            client.book(None).await.unwrap(),
            client.history(None, 10).await.unwrap(),
        )
    };
    let h = Harness::new().with_market_at(&path).serve().await;
    let client = MarketClient::new(&h.url).unwrap();
    assert_eq!(client.book(None).await.unwrap(), book);
    assert_eq!(client.history(None, 10).await.unwrap(), history);
    // Ids used before the restart stay taken (the store replays without the registry: what
    // backed an order was checked when it came).
    let err = client
        .submit(&alice, order("b1", &alice, Side::Bid, 1, 1.0), DAY)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("already submitted"), "{err}");
}

#[tokio::test]
async fn an_ask_whose_gpu_stops_proving_is_withdrawn_before_it_trades() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("market.sqlite");
    let (alice, bob) = (Identity::from_seed([2; 32]), Identity::from_seed([3; 32]));
    let operator = Identity::from_seed(VALIDATOR_SEED);
    let (book, history) = {
        let h = Harness::new().with_market_at(&path).serve().await;
        let _bobs = proven_provider(&h, 3, &["GPU-b1", "GPU-b2"]).await;
        let client = MarketClient::new(&h.url).unwrap();
        client
            .submit(&alice, order("b1", &alice, Side::Bid, 2, 5.0), DAY)
            .await
            .unwrap();
        client
            .submit(&bob, ask("a1", &bob, 1, 2.0, &["GPU-b1"]), DAY)
            .await
            .unwrap();
        client
            .submit(&bob, ask("a2", &bob, 1, 3.0, &["GPU-b2"]), DAY)
            .await
            .unwrap();
        // GPU-b1's next proof fails while its ask is open.
        store_edited(&h.v, "GPU-b1", |r| {
            r["accepted"] = false.into();
            r["recorded_at_ms"] = (r["recorded_at_ms"].as_u64().unwrap() + 1).into();
        });
        // The clearing withdraws a1 first: only a2 trades, at a price a1 no longer sets.
        let record = client
            .clear(&operator, h200(), Mechanism::UniformPrice)
            .await
            .unwrap();
        let asks: Vec<&str> = record
            .clearing
            .trades
            .iter()
            .map(|t| t.ask.as_str())
            .collect();
        assert_eq!(asks, ["a2"], "{record:?}");
        assert_eq!(record.asks, 1);
        let book = client.book(None).await.unwrap();
        assert!(book.asks.is_empty(), "{book:?}");
        assert_eq!(book.bids[0].order.quantity(), 1);
        // Withdrawn unfilled, a1 freed GPU-b1; it backs an ask again once proven again.
        store_edited(&h.v, "GPU-b1", |r| {
            r["accepted"] = true.into();
            r["recorded_at_ms"] = (r["recorded_at_ms"].as_u64().unwrap() + 1).into();
        });
        client
            .submit(&bob, ask("a3", &bob, 1, 9.0, &["GPU-b1"]), DAY)
            .await
            .unwrap();
        (
            client.book(None).await.unwrap(),
            client.history(None, 10).await.unwrap(),
        )
    };
    // The withdrawal is in the store: a restart rebuilds the same book and history.
    let h = Harness::new().with_market_at(&path).serve().await;
    let client = MarketClient::new(&h.url).unwrap();
    assert_eq!(client.book(None).await.unwrap(), book);
    assert_eq!(client.history(None, 10).await.unwrap(), history);
}

#[tokio::test]
async fn a_replayed_clearing_request_clears_once_even_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("market.sqlite");
    let (alice, bob) = (Identity::from_seed([2; 32]), Identity::from_seed([3; 32]));
    let operator = Identity::from_seed(VALIDATOR_SEED);
    let captured = sealed(
        &operator,
        CLEAR_KIND,
        &ClearMessage {
            validator: validator_key(),
            class: h200(),
            mechanism: Mechanism::UniformPrice,
            at_ms: pog_proof::timing::now_ms(),
            nonce: Some(fresh_clear_nonce()),
        },
    );
    // The registry is kept too: the asks' GPUs are still registered and proven after the
    // restart (a clearing withdraws asks whose GPUs no longer back them).
    let registry = dir.path().join("registry.sqlite");
    let h = Harness::new()
        .with_market_at(&path)
        .with_registry_at(&registry)
        .serve()
        .await;
    let _bobs = proven_provider(&h, 3, &["GPU-b1", "GPU-b2"]).await;
    let url = h.url.clone();
    let client = MarketClient::new(&url).unwrap();
    client
        .submit(&alice, order("b1", &alice, Side::Bid, 3, 5.0), DAY)
        .await
        .unwrap();
    client
        .submit(&bob, ask("a1", &bob, 1, 1.0, &["GPU-b1"]), DAY)
        .await
        .unwrap();
    let (status, answer) = post(&url, "/v1/market/clear", &captured).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["clearing"]["units"], 1, "{answer}");
    // A new ask that a second clearing would trade: the replays leave it open.
    client
        .submit(&bob, ask("a2", &bob, 1, 1.0, &["GPU-b2"]), DAY)
        .await
        .unwrap();
    let book = client.book(None).await.unwrap();
    let refused = |url: String| {
        let captured = captured.clone();
        async move {
            for _ in 0..4 {
                let (status, answer) = post(&url, "/v1/market/clear", &captured).await;
                assert_eq!(status, 409, "{answer}");
                let error = answer["error"].as_str().unwrap();
                assert!(error.contains("taken already"), "{answer}");
            }
        }
    };
    refused(url).await;
    assert_eq!(client.history(None, 10).await.unwrap().clearings.len(), 1);
    assert_eq!(client.book(None).await.unwrap(), book);

    // Restarted on the same store, the validator still refuses it.
    let h = Harness::new()
        .with_market_at(&path)
        .with_registry_at(&registry)
        .serve()
        .await;
    let url = h.url.clone();
    let client = MarketClient::new(&url).unwrap();
    refused(url).await;
    assert_eq!(client.history(None, 10).await.unwrap().clearings.len(), 1);
    assert_eq!(client.book(None).await.unwrap(), book);
    // The operator's new request (a fresh nonce) clears.
    let record = client
        .clear(&operator, h200(), Mechanism::UniformPrice)
        .await
        .unwrap();
    assert_eq!(record.clearing.units, 1);
    assert_eq!(client.history(None, 10).await.unwrap().clearings.len(), 2);
}

#[tokio::test]
async fn a_flood_of_orders_is_bounded_per_key_overall_and_per_source() {
    let h = Harness::new()
        .with_market()
        .market_limits(MarketLimits {
            max_open_per_owner: 3,
            max_open: 5,
            submits_per_minute_per_source: 8.0,
        })
        .serve()
        .await;
    let url = h.url.clone();
    let client = MarketClient::new(&url).unwrap();
    let (alice, bob, carol) = (
        Identity::from_seed([2; 32]),
        Identity::from_seed([3; 32]),
        Identity::from_seed([4; 32]),
    );
    async fn bid(client: &MarketClient, who: &Identity, id: &str) -> Result<(), String> {
        let order = order(id, who, Side::Bid, 1, 2.0);
        client
            .submit(who, order, DAY)
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    }
    // One key: three open orders, the fourth refused; a cancel makes room again.
    for id in ["a1", "a2", "a3"] {
        bid(&client, &alice, id).await.unwrap();
    }
    let err = bid(&client, &alice, "a4").await.unwrap_err();
    assert!(
        err.contains("429") && err.contains("3 open orders"),
        "{err}"
    );
    client
        .cancel(&alice, OrderId::new("a1").unwrap())
        .await
        .unwrap();
    bid(&client, &alice, "a4").await.unwrap();
    // Many keys: the book as a whole holds five.
    bid(&client, &bob, "b1").await.unwrap();
    bid(&client, &bob, "b2").await.unwrap();
    let err = bid(&client, &carol, "c1").await.unwrap_err();
    assert!(
        err.contains("503") && err.contains("5 open orders"),
        "{err}"
    );
    // One source: eight submissions a minute, whatever the keys; refused before the book.
    client
        .cancel(&bob, OrderId::new("b2").unwrap())
        .await
        .unwrap();
    let err = bid(&client, &carol, "c2").await.unwrap_err();
    assert!(err.contains("429") && err.contains("a minute"), "{err}");
    let book = client.book(None).await.unwrap();
    let ids: Vec<&str> = book.bids.iter().map(|o| o.order.id().as_str()).collect();
    assert_eq!(ids, ["a2", "a3", "a4", "b1"]);
}

/// A validator with its market and pricing, registry and market stored in `dir`; the pricing
/// runs until it is dropped.
async fn start_priced(dir: &Path) -> Served {
    Harness::new().stored_in(dir).with_pricing().serve().await
}

async fn get_json<T: serde::de::DeserializeOwned>(url: &str) -> T {
    let response = reqwest::get(url).await.unwrap();
    assert!(
        response.status().is_success(),
        "{url}: {}",
        response.status()
    );
    response.json().await.unwrap()
}

/// Waits until the GPU's price history holds `n` points; returns them.
async fn history_of(url: &str, uuid: &str, n: usize) -> PricePage {
    for _ in 0..200 {
        let page: PricePage = get_json(&format!("{url}/v1/prices/{uuid}/history")).await;
        if page.points.len() >= n {
            assert_eq!(page.points.len(), n, "{page:?}");
            return page;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("the price history of {uuid} never reached {n} points");
}

/// Stores, signed by the validator's key, an accepted proof of memory for `uuid` that speaks
/// for the H200's memory (a loopback agent's memory proofs run the test plan's small shape):
/// the per-model challenge a validator would issue, with an outcome at 0.98 of its bound.
fn store_memory_proof(v: &Validator, uuid: &str) {
    use pog_proof::session::Outcome;
    use pog_proof::timing::TimeCheck;
    let gpu = v.registry().gpu(uuid).unwrap().expect("a registered GPU");
    let h200 = pog_spec::SpecDb::embedded().by_model("H200 SXM").unwrap();
    let plan = pog_proof::memory::plan(h200, pog_proof::memory::WALK_SECONDS, None).unwrap();
    let validator_key = v.public_key();
    let memory_challenge = plan.challenge(
        [2; 32],
        pog_proof::challenge::Addressee {
            gpu_uuid: gpu.uuid.clone(),
            gpu_bus_id: gpu.bus_id.clone(),
            agent_key: gpu.agent.clone(),
            validator_key,
        },
    );
    let id = format!("memory-{uuid}");
    let record = pog_records::MemoryRecord {
        version: pog_records::RECORD_VERSION,
        challenge_id: id.clone(),
        gpu_uuid: gpu.uuid.clone(),
        agent: gpu.agent.clone(),
        model: "H200 SXM".into(),
        simulated: false,
        policy: pog_records::Policy::per_model_default(),
        details: pog_records::MemoryDetails {
            proves_memory: true,
            memory_challenge,
            walk_nonce: hex::encode([3; 32]),
            build_ms: Some(2_000.0),
            rate: None,
        },
        expected_ms: plan.expected_ms,
        accepted: true,
        outcome: Some(Outcome {
            challenge_id: id.clone(),
            gpu_uuid: gpu.uuid.clone(),
            root: hex::encode([4; 32]),
            checked: 64,
            rejected_total: 0,
            rejected: vec![],
            rejected_digest: None,
            time: TimeCheck {
                measured_ms: 0.98 * plan.expected_ms,
                round_trip_ms: 0.0,
                expected_ms: plan.expected_ms,
                ratio: 0.98,
                accepted: true,
            },
            accepted: true,
        }),
        failure: None,
        spot_check_secret: hex::encode([5; 32]),
        bytes_to_agent: 0,
        bytes_from_agent: 0,
        recorded_at_ms: 1,
    };
    let sealed = Identity::from_seed(VALIDATOR_SEED)
        .seal(RecordKind::MemoryRound.wire_kind(), &record)
        .unwrap();
    v.registry()
        .record(&id, uuid, true, &serde_json::to_string(&sealed).unwrap())
        .unwrap();
}

#[tokio::test]
async fn stored_records_change_the_score_the_price_and_its_history() {
    let dir = tempfile::tempdir().unwrap();
    let h = start_priced(dir.path()).await;
    let (v, url) = (h.v.clone(), h.url.clone());
    let status = h.agent(11, vec![claim("GPU-p1")]).await.status();
    assert_eq!(status, 200);
    // The registration is a record: priced at once, as unproven.
    let first = history_of(&url, "GPU-p1", 1).await;
    assert_eq!(first.points[0].price_micro_usd, None);
    assert!(
        first.points[0].cause.starts_with("registration record"),
        "{}",
        first.points[0].cause
    );
    let view: ScoreView = get_json(&format!("{url}/v1/scores/GPU-p1")).await;
    assert_eq!(view.score, 0.0);
    assert!(
        view.reasons[0].contains("no proof record yet"),
        "{:?}",
        view.reasons
    );

    // A real exchange under the test plan: accepted, but it proves no model.
    let record = v.challenge::<Gemm>("GPU-p1", &policy()).await.unwrap();
    assert!(record.accepted && !record.details.proves_model);
    let page = history_of(&url, "GPU-p1", 2).await;
    let point = &page.points[1];
    // Memory counts only with a proof of memory: one that speaks for the H200's. Taken in, it
    // leaves the GPU unpriced for the same reason, at the same score: no new price point.
    store_memory_proof(&v, "GPU-p1");
    settled_score(&url, &v, "GPU-p1").await;
    history_of(&url, "GPU-p1", 2).await;
    assert_eq!(point.price_micro_usd, None);
    assert!(point.cause.contains("accepted"), "{}", point.cause);
    assert!(point
        .unpriced
        .as_ref()
        .unwrap()
        .contains("does not prove the model"));

    // An accepted record that proves the H200 (from a real one, edited): scored and priced.
    store_edited(&v, "GPU-p1", |r| {
        r["proves_model"] = true.into();
        r["outcome"]["time"]["ratio"] = 0.95.into();
        r["recorded_at_ms"] = (r["recorded_at_ms"].as_u64().unwrap() + 1).into();
    });
    let page = history_of(&url, "GPU-p1", 3).await;
    let priced = &page.points[2];
    // Two proofs of two passed, the reference GPU: the same $4.448264 as
    // `pog price --model "H200 SXM"` in a balanced market, its GPU part alone scoring 0.55;
    // in its idle class (one proven GPU, nothing leased) 0.65 of it.
    assert_eq!(priced.price_micro_usd, Some(2_891_372));
    assert!((priced.score - 0.55).abs() < 1e-9, "{}", priced.score);
    // The score view is made just after the point is posted: read once it has taken the
    // record in (a read in between serves the view before it).
    let view = settled_score(&url, &v, "GPU-p1").await;
    assert_eq!(view.price_micro_usd, Some(2_891_372));
    assert_eq!(view.posted.as_ref().unwrap().seq, priced.seq);

    // A failed record: the GPU counts 0, it is no longer priced, and the history keeps both.
    store_edited(&v, "GPU-p1", |r| {
        r["accepted"] = false.into();
        r["outcome"]["accepted"] = false.into();
        r["outcome"]["time"]["ratio"] = 1.31.into();
        r["recorded_at_ms"] = (r["recorded_at_ms"].as_u64().unwrap() + 1).into();
    });
    let page = history_of(&url, "GPU-p1", 4).await;
    let failed = &page.points[3];
    assert_eq!(failed.price_micro_usd, None);
    assert!(failed.cause.contains("not accepted"), "{}", failed.cause);
    assert!(failed
        .unpriced
        .as_ref()
        .unwrap()
        .contains("its latest proof failed: rejected at 1.31 of its time bound"));
    settled_score(&url, &v, "GPU-p1").await;
    let scores: pog_validator::pricing::ScorePage = get_json(&format!("{url}/v1/scores")).await;
    assert_eq!(scores.scores.len(), 1);
    assert_eq!(scores.scores[0].score, 0.0);
    assert_eq!(scores.scores[0].price_micro_usd, None);
    assert!(scores.scores[0].reasons[0].contains("latest proof failed"));

    // Accepted again: priced again, discounted for the failure (3 of 4 recent proofs passed,
    // 3 of 4 rounds proven: rate 0.75 and uptime 0.75, reliability 0.5 × 0.5).
    store_edited(&v, "GPU-p1", |r| {
        r["accepted"] = true.into();
        r["outcome"]["accepted"] = true.into();
        r["outcome"]["time"]["ratio"] = 0.95.into();
        r["recorded_at_ms"] = (r["recorded_at_ms"].as_u64().unwrap() + 1).into();
    });
    let page = history_of(&url, "GPU-p1", 5).await;
    // (Its idle class: 0.65 of the balanced $4.448264, × 0.25.)
    assert_eq!(page.points[4].price_micro_usd, Some(722_843));
    // Each point with its time, in order.
    assert!(page
        .points
        .windows(2)
        .all(|w| w[0].at_ms <= w[1].at_ms && w[0].seq < w[1].seq));
    // Paging.
    let tail: PricePage = get_json(&format!(
        "{url}/v1/prices/GPU-p1/history?after={}&limit=2",
        page.points[2].seq
    ))
    .await;
    assert_eq!(tail.points, page.points[3..5]);
    let status = reqwest::get(format!("{url}/v1/scores/GPU-unknown"))
        .await
        .unwrap()
        .status();
    assert_eq!(status, 404);
}

#[tokio::test]
async fn a_restart_keeps_the_price_history_and_prices_what_came_in_meanwhile() {
    let dir = tempfile::tempdir().unwrap();
    let before = {
        let h = start_priced(dir.path()).await;
        let (v, url) = (h.v.clone(), h.url.clone());
        h.agent(12, vec![claim("GPU-r1")]).await;
        // Priced once as registered before the next record comes in (records that come in
        // together are priced together, in one point); a proof of memory leaves it unpriced
        // for the same reason (no point), a proof that does not prove the model for another.
        history_of(&url, "GPU-r1", 1).await;
        store_memory_proof(&v, "GPU-r1");
        settled_score(&url, &v, "GPU-r1").await;
        v.challenge::<Gemm>("GPU-r1", &policy()).await.unwrap();
        history_of(&url, "GPU-r1", 2).await
    };
    // Stored while no pricing ran: the registry alone.
    {
        let registry = Registry::open(Some(&dir.path().join("registry.sqlite"))).unwrap();
        let v = Validator::with_config(Identity::from_seed(VALIDATOR_SEED), registry, loopback())
            .unwrap();
        store_edited(&v, "GPU-r1", |r| {
            r["proves_model"] = true.into();
            r["recorded_at_ms"] = (r["recorded_at_ms"].as_u64().unwrap() + 1).into();
        });
    }
    let h = start_priced(dir.path()).await;
    let url = h.url.clone();
    let after = history_of(&url, "GPU-r1", 3).await;
    assert_eq!(after.points[..2], before.points[..]);
    assert!(after.points[2].price_micro_usd.is_some());
    // Nothing is priced twice.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    history_of(&url, "GPU-r1", 3).await;
}

#[tokio::test]
async fn a_simulated_gpu_scores_zero_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    // The pricing takes the records in when the test says so.
    let h = Harness::new()
        .config(pog_validator::validator::Config {
            accept_simulated: true,
            ..loopback()
        })
        .with_market_at(&dir.path().join("market.sqlite"))
        .with_pricing_by_hand()
        .serve()
        .await;
    let (v, pricing, url) = (h.v.clone(), h.pricing().clone(), h.url.clone());
    let simulated = pog_proof::wire::GpuClaim {
        simulated: true,
        ..claim("GPU-s1")
    };
    h.agent(13, vec![simulated]).await;
    v.challenge::<Gemm>("GPU-s1", &policy()).await.unwrap();
    assert_eq!(pricing.catch_up().unwrap(), 1);
    let view: ScoreView = get_json(&format!("{url}/v1/scores/GPU-s1")).await;
    assert!(view.simulated);
    assert_eq!(view.score, 0.0);
    assert!(view.reasons[0].contains("SIMULATED"), "{:?}", view.reasons);
    assert_eq!(view.price_micro_usd, None);
    assert_eq!(view.assessment.detail.gpus[0].potential, 0.0);
}

#[tokio::test]
async fn the_book_clears_on_a_clock_and_only_when_it_changed() {
    let h = Harness::new().with_market().serve().await;
    let (market, url) = (h.market().clone(), h.url.clone());
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let clock = tokio::spawn(pog_validator::pricing::clear_on_schedule(
        market.clone(),
        Identity::from_seed(VALIDATOR_SEED),
        std::time::Duration::from_millis(100),
        Mechanism::UniformPrice,
        stopped,
    ));
    let client = MarketClient::new(&url).unwrap();
    let (alice, bob) = (Identity::from_seed([2; 32]), Identity::from_seed([3; 32]));
    // One side only: nothing to clear.
    client
        .submit(&alice, order("b1", &alice, Side::Bid, 2, 5.0), DAY)
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(350)).await;
    assert!(client.history(None, 10).await.unwrap().clearings.is_empty());
    let _bobs = proven_provider(&h, 3, &["GPU-b1"]).await;
    client
        .submit(&bob, ask("a1", &bob, 1, 3.0, &["GPU-b1"]), DAY)
        .await
        .unwrap();
    let mut cleared = Vec::new();
    for _ in 0..100 {
        cleared = client.history(None, 10).await.unwrap().clearings;
        if !cleared.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert_eq!(cleared.len(), 1);
    assert_eq!(cleared[0].clearing.units, 1);
    // The bid's other GPU-hour stays open, but the book has not changed: no empty clearings.
    tokio::time::sleep(std::time::Duration::from_millis(350)).await;
    assert_eq!(client.history(None, 10).await.unwrap().clearings.len(), 1);
    let _ = stop.send(true);
    clock.await.unwrap();
}

/// Re-prices `uuid` with a copy of its latest proof record (a second later) and returns its
/// posted point once taken in.
async fn repriced(url: &str, v: &Validator, uuid: &str) -> PostedPrice {
    store_edited(v, uuid, |r| {
        r["recorded_at_ms"] = (r["recorded_at_ms"].as_u64().unwrap() + 1).into();
    });
    let view = settled_score(url, v, uuid).await;
    view.posted.expect("a posted point")
}

#[tokio::test]
async fn open_orders_do_not_move_the_price_and_leased_hours_and_trades_do() {
    let dir = tempfile::tempdir().unwrap();
    let h = start_priced(dir.path()).await;
    let (v, url) = (h.v.clone(), h.url.clone());
    let status = h.agent(12, vec![claim("GPU-u1")]).await.status();
    assert_eq!(status, 200);
    assert!(
        v.challenge::<Gemm>("GPU-u1", &policy())
            .await
            .unwrap()
            .accepted
    );
    prove_the_h200(&v, "GPU-u1");
    // One proven H200 and nothing leased: an idle class, 1 + 0.5 × (0 − 0.7) = 0.65 of the
    // balanced $4.448264.
    let idle = settled_score(&url, &v, "GPU-u1").await.posted.unwrap();
    assert_eq!(idle.price_micro_usd, Some(2_891_372), "{idle:?}");
    let signals = idle.signals.clone().unwrap();
    assert_eq!((signals.proven_gpus, signals.leased_hours), (1, 0.0));

    // A giant bid that never fills (10⁹ GPU-hours at a cent) and an ask far above it: open
    // orders, which once doubled the price (the demand factor read the open hours). Now the
    // price does not move at all.
    let client = MarketClient::new(&url).unwrap();
    let (alice, provider) = (Identity::from_seed([2; 32]), Identity::from_seed([12; 32]));
    let whale = Identity::from_seed([3; 32]);
    client
        .submit(
            &whale,
            order("giant", &whale, Side::Bid, 1_000_000_000, 0.01),
            DAY,
        )
        .await
        .unwrap();
    client
        .submit(&provider, ask("a1", &provider, 2, 1.0, &["GPU-u1"]), DAY)
        .await
        .unwrap();
    let with_orders = repriced(&url, &v, "GPU-u1").await;
    assert_eq!(with_orders.price_micro_usd, idle.price_micro_usd);
    assert_eq!(with_orders.quote.as_ref().unwrap().market_factor, 0.65);

    // A real trade: 1 GPU-hour leased at the clearing price ($1: both units of the ask are
    // at $1). It pulls the price toward $1 (below the idle $2.89; a trade counts at most a
    // factor of 2 away), in proportion to its hour against half the class's proven 24
    // GPU-hours.
    client
        .submit(&alice, order("b1", &alice, Side::Bid, 1, 5.0), DAY)
        .await
        .unwrap();
    let cleared = client
        .clear(
            &Identity::from_seed(VALIDATOR_SEED),
            h200(),
            Mechanism::UniformPrice,
        )
        .await
        .unwrap();
    assert_eq!(cleared.clearing.units, 1);
    assert_eq!(cleared.leases.len(), 1);
    // The clearing re-prices the class's GPUs at once, without waiting for their next record.
    let mut traded = None;
    for _ in 0..200 {
        let view: ScoreView = get_json(&format!("{url}/v1/scores/GPU-u1")).await;
        if let Some(p) = view.posted.filter(|p| p.cause == "a clearing of H200 SXM") {
            traded = Some(p);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    let traded = traded.expect("re-priced by the clearing");
    let signals = traded.signals.clone().unwrap();
    assert_eq!(signals.traded_hours, 1.0);
    assert_eq!(signals.traded_vwap_micro_usd, Some(1_000_000));
    let q = traded.quote.as_ref().unwrap();
    // pull = 0.5 × 1 h × max(ln(1 / 2.891372), −ln 2) / 12 h.
    let pull: f64 = 0.5 * -(2.0f64.ln()) / 12.0;
    assert!((q.clearing_factor - pull.exp()).abs() < 1e-9, "{q:?}");
    assert!(traded.price_micro_usd.unwrap() < idle.price_micro_usd.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scores_and_prices_go_into_the_ledger_signed_when_they_change() {
    use pog_records::reports as bodies;

    use pog_signed::RecordKind;
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::new()
        .stored_in(dir.path())
        .with_ledger(&dir.path().join("ledger"))
        .with_pricing()
        .serve()
        .await;
    let (v, url) = (h.v.clone(), h.url.clone());
    let status = h.agent(13, vec![claim("GPU-l1")]).await.status();
    assert_eq!(status, 200);
    assert!(
        v.challenge::<Gemm>("GPU-l1", &policy())
            .await
            .unwrap()
            .accepted
    );
    prove_the_h200(&v, "GPU-l1");
    let view = settled_score(&url, &v, "GPU-l1").await;
    let priced = view.price_micro_usd.expect("priced");

    let ledger = v.records().ledger().unwrap().ledger();
    let of_kind = |kind: RecordKind| -> Vec<(u64, pog_ledger::entry::Entry)> {
        let entries = ledger.gpu_entries("GPU-l1").unwrap();
        entries
            .into_iter()
            .filter(|(_, e)| e.kind == kind)
            .collect()
    };
    let validator_key = Identity::from_seed(VALIDATOR_SEED).public_key();
    let scores = of_kind(RecordKind::Score);
    let prices = of_kind(RecordKind::Price);
    for (_, e) in scores.iter().chain(&prices) {
        e.verify().unwrap();
        assert_eq!(hex::encode(e.signer), validator_key);
    }
    // The registration was scored 0 and not priced, then the proven GPU scored and priced.
    let (score_at, last_score) = scores.last().unwrap();
    let last_score: bodies::Score = serde_json::from_str(&last_score.body).unwrap();
    assert_eq!(last_score.score, view.score);
    assert_eq!(last_score.model.as_deref(), Some("H200 SXM"));
    assert_eq!(last_score.components.len(), 4);
    let (_, last_price) = prices.last().unwrap();
    let last_price: bodies::Price = serde_json::from_str(&last_price.body).unwrap();
    assert_eq!(
        (last_price.per_hour, last_price.score_index),
        (priced, Some(*score_at))
    );
    // Its inputs are the GPU's logged proof records (the real exchange's among them).
    let proof = of_kind(RecordKind::ProofRound);
    assert!(!last_score.inputs.is_empty());
    assert!(last_score.inputs.contains(&proof.last().unwrap().0));
    assert!(last_score.inputs.iter().all(|i| i < score_at));

    // A record that changes neither the score nor the price logs nothing new.
    let (n_scores, n_prices) = (scores.len(), prices.len());
    store_edited(&v, "GPU-l1", |r| {
        r["recorded_at_ms"] = (r["recorded_at_ms"].as_u64().unwrap() + 1).into();
    });
    let again = settled_score(&url, &v, "GPU-l1").await;
    assert_eq!(again.price_micro_usd, Some(priced));
    assert_eq!(of_kind(RecordKind::Score).len(), n_scores);
    assert_eq!(of_kind(RecordKind::Price).len(), n_prices);
}

/// A real record of `uuid` made to prove the H200 (re-signed by the validator), with a proof of
/// memory: what a per-model round of a real H200 stores, so the GPU is priced.
fn prove_the_h200(v: &Validator, uuid: &str) {
    store_memory_proof(v, uuid);
    store_edited(v, uuid, |r| {
        r["proves_model"] = true.into();
        r["outcome"]["time"]["ratio"] = 0.95.into();
        r["recorded_at_ms"] = (r["recorded_at_ms"].as_u64().unwrap() + 1).into();
    });
}

/// Posts `who`'s signed submission of `order`, open for a day; returns the status and answer.
async fn submit_raw(url: &str, who: &Identity, order: Order) -> (u16, String) {
    let message = SubmitMessage {
        validator: validator_key(),
        order,
        expires_at_ms: Some(tomorrow_ms()),
    };
    let (status, answer) = post(
        url,
        "/v1/market/submit",
        &sealed(who, SUBMIT_KIND, &message),
    )
    .await;
    (status, answer["error"].as_str().unwrap_or("").to_string())
}

#[tokio::test]
async fn an_ask_must_offer_proven_gpus_its_key_holds_one_open_ask_per_gpu() {
    let h = Harness::new().with_market().serve().await;
    let url = h.url.clone();
    let client = MarketClient::new(&url).unwrap();
    let bob = Identity::from_seed([3; 32]);
    // Alice (the key of seed 2) holds GPU-a1.
    let _alices = proven_provider(&h, 2, &["GPU-a1"]).await;
    let _bobs = proven_provider(&h, 3, &["GPU-b1", "GPU-b2", "GPU-b3"]).await;
    let before = client.book(None).await.unwrap();

    // Alice's GPU in Bob's ask: refused over the API (403), whatever else the ask names.
    let (status, error) =
        submit_raw(&url, &bob, ask("a1", &bob, 1, 2.0, &["GPU-b1", "GPU-a1"])).await;
    assert_eq!(status, 403, "{error}");
    assert!(
        error.contains("GPU GPU-a1 is registered to another key"),
        "{error}"
    );
    // A GPU no one registered here.
    let (status, error) = submit_raw(&url, &bob, ask("a1", &bob, 1, 2.0, &["GPU-zz"])).await;
    assert_eq!(status, 400, "{error}");
    assert!(
        error.contains("not registered at this validator"),
        "{error}"
    );
    // No GPU named at all.
    let bare = Order::new(
        OrderId::new("a1").unwrap(),
        bob.public_key(),
        Side::Ask,
        h200(),
        1,
        Price::from_usd(2.0).unwrap(),
    )
    .unwrap();
    let (status, error) = submit_raw(&url, &bob, bare).await;
    assert_eq!(status, 400, "{error}");
    assert!(error.contains("names no GPUs"), "{error}");
    // More GPU-hours than one GPU has in the day the ask is open.
    let (status, error) = submit_raw(&url, &bob, ask("a1", &bob, 25, 2.0, &["GPU-b1"])).await;
    assert_eq!(status, 400, "{error}");
    assert!(error.contains("only 24 whole GPU-hours"), "{error}");

    // A GPU whose latest proof failed, and one whose latest proof does not prove its model.
    store_edited(&h.v, "GPU-b2", |r| {
        r["accepted"] = false.into();
        r["recorded_at_ms"] = (r["recorded_at_ms"].as_u64().unwrap() + 1).into();
    });
    let (status, error) = submit_raw(&url, &bob, ask("a1", &bob, 1, 2.0, &["GPU-b2"])).await;
    assert_eq!(status, 400, "{error}");
    assert!(
        error.contains("latest proof") && error.contains("failed"),
        "{error}"
    );
    h.v.challenge::<Gemm>("GPU-b3", &policy()).await.unwrap();
    let (status, error) = submit_raw(&url, &bob, ask("a1", &bob, 1, 2.0, &["GPU-b3"])).await;
    assert_eq!(status, 400, "{error}");
    assert!(error.contains("does not prove its model"), "{error}");
    assert_eq!(client.book(None).await.unwrap(), before);

    // Proven again, GPU-b3 backs an ask; a second open ask for it is refused (409), even
    // with another GPU beside it.
    prove_model(&h.v, "GPU-b3");
    client
        .submit(&bob, ask("a1", &bob, 24, 2.0, &["GPU-b3"]), DAY)
        .await
        .unwrap();
    let (status, error) =
        submit_raw(&url, &bob, ask("a2", &bob, 1, 2.0, &["GPU-b1", "GPU-b3"])).await;
    assert_eq!(status, 409, "{error}");
    assert!(error.contains("already offered by ask a1"), "{error}");
    // Bob's bid at or above his own ask would trade with it: refused (409).
    let (status, error) = submit_raw(&url, &bob, order("b1", &bob, Side::Bid, 1, 2.5)).await;
    assert_eq!(status, 409, "{error}");
    assert!(error.contains("never trades with itself"), "{error}");
    // Once the ask is cancelled, its GPU backs another.
    client
        .cancel(&bob, OrderId::new("a1").unwrap())
        .await
        .unwrap();
    client
        .submit(&bob, ask("a2", &bob, 2, 2.0, &["GPU-b1", "GPU-b3"]), DAY)
        .await
        .unwrap();
}

/// Waits until `uuid`'s score view is one the pricing made when it took its records in (not
/// one made at a read before that); for a GPU with no record but its registration, which
/// [`settled_score`] cannot name.
async fn view_taken_in(url: &str, uuid: &str) {
    for _ in 0..200 {
        let view: ScoreView = get_json(&format!("{url}/v1/scores/{uuid}")).await;
        if view.through_record.is_some() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("the score of {uuid} was never made from its records");
}

/// Waits until `uuid`'s score has taken in its latest record; returns its score view.
async fn settled_score(url: &str, v: &Validator, uuid: &str) -> ScoreView {
    let last = v.registry().latest_records(uuid, 1).unwrap()[0].0;
    for _ in 0..200 {
        let view: ScoreView = get_json(&format!("{url}/v1/scores/{uuid}")).await;
        if view.through_record == Some(last) {
            return view;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("the price of {uuid} never took in record {last}");
}

/// `uuid`'s stored records of envelope kind `kind`: (row, body).
fn bodies_of(v: &Validator, uuid: &str, kind: &str) -> Vec<(i64, serde_json::Value)> {
    v.registry()
        .latest_records(uuid, 1000)
        .unwrap()
        .into_iter()
        .filter_map(|(id, json)| {
            let envelope: Envelope = serde_json::from_str(&json).unwrap();
            (envelope.kind == kind).then(|| (id, serde_json::from_str(&envelope.body).unwrap()))
        })
        .collect()
}

/// Waits until `done` holds of `uuid`'s proof and missed-round records.
async fn wait_for(
    v: &Validator,
    uuid: &str,
    what: &str,
    done: impl Fn(&[(i64, serde_json::Value)], &[(i64, serde_json::Value)]) -> bool,
) {
    for _ in 0..400 {
        let proofs = bodies_of(v, uuid, RecordKind::ProofRound.wire_kind());
        let missed = bodies_of(v, uuid, RecordKind::RoundMissed.wire_kind());
        if done(&proofs, &missed) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("{uuid}: never {what}");
}

fn answered(body: &serde_json::Value) -> bool {
    body["failure"].is_null()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_that_goes_silent_for_some_rounds_loses_uptime_and_price() {
    let dir = tempfile::tempdir().unwrap();
    let h = start_priced(dir.path()).await;
    let (v, url) = (h.v.clone(), h.url.clone());
    let mut agent = h.agent(41, vec![claim("GPU-u1")]).await;
    assert_eq!(agent.status(), 200);
    // The validator's own schedule, a round every 250 ms.
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let schedule = tokio::spawn(pog_validator::schedule::run(
        pog_validator::schedule::Rounds::new(
            v.clone(),
            pog_validator::schedule::Schedule::every(
                std::time::Duration::from_millis(250),
                policy(),
            ),
            stopped,
        ),
    ));
    wait_for(&v, "GPU-u1", "answered two rounds", |proofs, _| {
        proofs.iter().filter(|(_, b)| answered(b)).count() >= 2
    })
    .await;
    // The agent goes silent: its challenge goes unanswered, and the schedule backs off,
    // recording the rounds it skips.
    agent.stop();
    wait_for(&v, "GPU-u1", "missed a round", |proofs, missed| {
        proofs
            .iter()
            .any(|(_, b)| b["failure"]["kind"] == "unreachable")
            && !missed.is_empty()
    })
    .await;
    // It comes back (same key, a new address) and answers again.
    let back = h.agent(41, vec![claim("GPU-u1")]).await;
    assert_eq!(back.status(), 200);
    wait_for(&v, "GPU-u1", "answered after missing", |proofs, missed| {
        let last_missed = missed.last().map_or(i64::MAX, |(id, _)| *id);
        proofs
            .iter()
            .any(|(id, b)| *id > last_missed && answered(b))
    })
    .await;
    let _ = stop.send(true);
    schedule.await.unwrap();
    let missed = bodies_of(&v, "GPU-u1", RecordKind::RoundMissed.wire_kind());
    assert_eq!(missed[0].1["gpu_uuid"], "GPU-u1");
    assert_eq!(
        missed[0].1["agent"],
        Identity::from_seed([41; 32]).public_key().as_str()
    );
    assert!(missed[0].1["reason"]
        .as_str()
        .unwrap()
        .contains("did not answer its last challenge"));

    // Proven as an H200 now: priced, but for the rounds it missed, below the price of a GPU
    // that answered every round.
    prove_the_h200(&v, "GPU-u1");
    let view = settled_score(&url, &v, "GPU-u1").await;
    let a = &view.assessment;
    let uptime = a.uptime.as_ref().expect("an uptime");
    assert!(uptime.unanswered >= 1 && uptime.skipped >= 1, "{uptime:?}");
    assert_eq!(
        uptime.rounds,
        uptime.answered + uptime.unanswered + uptime.skipped
    );
    assert!(uptime.fraction < 1.0, "{uptime:?}");
    let r = &a.detail.reliability;
    assert!(r.uptime < 1.0, "{r:?}");
    // Unanswered rounds are not failed proofs: every proof answered passed.
    assert_eq!(a.proofs_passed, a.proofs_total);
    assert_eq!(r.proofs, 1.0);
    let note = r
        .notes
        .iter()
        .find(|n| n.starts_with("uptime"))
        .expect("a note");
    assert!(note.contains("skipped while backing off"), "{note}");
    assert!(
        view.reasons.iter().any(|w| w.contains("uptime")),
        "{:?}",
        view.reasons
    );
    let price = view.price_micro_usd.expect("priced");
    // What the same GPU earns with every round answered (its other factors as they are).
    // (An idle class: 0.65 of the balanced $4.448264.)
    let answering = (4_448_264.0 * 0.65 * r.proofs * r.anomalies).round() as u64;
    assert!(price < answering, "{price} vs {answering}");
    assert_eq!(price, (4_448_264.0 * 0.65 * r.factor).round() as u64);
}

const TRACE: &str = include_str!("../../monitor/tests/data/h200-healthy.csv");

/// A health monitor that has watched `rows` as GPU `uuid`.
async fn watched(uuid: &str, rows: Vec<pog_monitor::Sample>) -> Arc<pog_agent::watch::Watch> {
    let watch = Arc::new(pog_agent::watch::Watch::new(Vec::new(), false));
    let fed = watch.clone();
    let mut source = pog_monitor::Replay::new(
        pog_monitor::prometheus::GpuIdentity {
            index: 0,
            uuid: uuid.into(),
            model_name: "NVIDIA H200".into(),
            hostname: "loopback".into(),
            pci_bus_id: Some("0000:00:06.0".into()),
            driver_version: None,
        },
        rows,
    );
    tokio::task::spawn_blocking(move || {
        fed.run(
            &mut source,
            std::time::Duration::from_millis(1),
            &std::sync::atomic::AtomicBool::new(false),
        )
    })
    .await
    .unwrap();
    watch
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_reporting_an_xid_and_alerts_gets_an_anomaly_factor_below_one() {
    use pog_monitor::inject::{inject, Fault};
    let dir = tempfile::tempdir().unwrap();
    let h = start_priced(dir.path()).await;
    let (v, url) = (h.v.clone(), h.url.clone());
    let healthy = pog_monitor::parse_trace(TRACE).unwrap();
    let faulty = inject(
        &inject(&healthy, &Fault::ThermalRunaway { rate_c_per_s: 0.5 }, 60.0),
        &Fault::Xid { code: 79 },
        100.0,
    );
    for (uuid, seed, rows) in [("GPU-a1", 42, healthy), ("GPU-a2", 43, faulty)] {
        let watch = watched(uuid, rows).await;
        let agent = h.agent(seed, vec![claim(uuid)]).watching(watch).await;
        assert_eq!(agent.status(), 200);
        // A round as the schedule runs it: the proof, then the health record of the window.
        assert!(v.challenge::<Gemm>(uuid, &policy()).await.unwrap().accepted);
        let health = v.collect_health(uuid).await.unwrap();
        assert!(health.reported.is_some(), "{:?}", health.failure);
        prove_the_h200(&v, uuid);
    }
    let clean = settled_score(&url, &v, "GPU-a1").await;
    let sick = settled_score(&url, &v, "GPU-a2").await;
    let found = clean
        .assessment
        .anomalies
        .as_ref()
        .expect("a health record");
    assert_eq!(found.count, 0, "{found:?}");
    assert_eq!(clean.assessment.detail.reliability.anomalies, 1.0);
    let found = sick.assessment.anomalies.as_ref().expect("a health record");
    assert!(found.count >= 2, "{found:?}");
    let signals: Vec<_> = found.found.iter().map(|a| a.signal).collect();
    assert!(
        signals.contains(&pog_market::evidence::Signal::Xid),
        "{found:?}"
    );
    assert!(
        signals.contains(&pog_market::evidence::Signal::Alert),
        "{found:?}"
    );
    let r = &sick.assessment.detail.reliability;
    assert!(r.anomalies < 1.0, "{r:?}");
    assert!((r.anomalies - 0.9f64.powi(found.count as i32)).abs() < 1e-12);
    let note = r
        .notes
        .iter()
        .find(|n| n.contains("anomal"))
        .expect("a note");
    assert!(note.contains("xid 79 in the window ending"), "{note}");
    assert!(note.contains("thermal_runaway alert"), "{note}");
    // Everything else alike: the GPU that reported trouble is priced lower, by its factor.
    let (clean_price, sick_price) = (
        clean.price_micro_usd.expect("priced"),
        sick.price_micro_usd.expect("priced"),
    );
    // Both in an idle class: 0.65 of the balanced $4.448264.
    assert_eq!(clean_price, 2_891_372);
    assert!(sick_price < clean_price, "{sick_price} vs {clean_price}");
    assert_eq!(sick_price, (4_448_264.0 * 0.65 * r.factor).round() as u64);
}

/// `GET /v1/scores` serves the views made when records came in: reading pages and single
/// scores, again and again, assesses no GPU anew; a new record changes its GPU's view.
#[tokio::test(flavor = "multi_thread")]
async fn scores_are_made_when_records_arrive_not_on_each_read() {
    let dir = tempfile::tempdir().unwrap();
    let h = start_priced(dir.path()).await;
    let (v, pricing, url) = (h.v.clone(), h.pricing().clone(), h.url.clone());
    let uuids: Vec<String> = (0..12).map(|i| format!("GPU-s{i:02}")).collect();
    for (seed, four) in (61u8..).zip(uuids.chunks(4)) {
        let claims = four.iter().map(|u| claim(u)).collect();
        let status = h.agent(seed, claims).await.status();
        assert_eq!(status, 200);
    }
    // Each registration priced, and each view made from it: the pricing has taken every
    // record in (a view is made just after its point is posted).
    for uuid in &uuids {
        history_of(&url, uuid, 1).await;
        view_taken_in(&url, uuid).await;
    }
    let before = pricing.assessments();
    for _ in 0..10 {
        let mut listed = Vec::new();
        let mut after = String::new();
        loop {
            let page: pog_validator::pricing::ScorePage =
                get_json(&format!("{url}/v1/scores?limit=5&after={after}")).await;
            listed.extend(page.scores.into_iter().map(|s| s.gpu_uuid));
            match page.next_after {
                Some(next) => after = next,
                None => break,
            }
        }
        assert_eq!(listed, uuids);
        let one: ScoreView = get_json(&format!("{url}/v1/scores/GPU-s03")).await;
        assert_eq!(one.gpu_uuid, "GPU-s03");
    }
    assert_eq!(pricing.assessments(), before, "reads assessed GPUs again");
    // Its first proof of memory: the GPU's view changes once the pricing takes it in.
    let stale: ScoreView = get_json(&format!("{url}/v1/scores/GPU-s03")).await;
    assert!(stale
        .reasons
        .iter()
        .any(|r| r.contains("no proof of memory yet")));
    store_memory_proof(&v, "GPU-s03");
    settled_score(&url, &v, "GPU-s03").await;
    let mut fresh = stale.reasons;
    for _ in 0..200 {
        let view: ScoreView = get_json(&format!("{url}/v1/scores/GPU-s03")).await;
        fresh = view.reasons;
        if !fresh.iter().any(|r| r.contains("no proof of memory yet")) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(
        !fresh.iter().any(|r| r.contains("no proof of memory yet")),
        "{fresh:?}"
    );
    // An unknown GPU is still a 404, cached or not.
    let missing = reqwest::get(format!("{url}/v1/scores/GPU-nobody"))
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
}

/// Deposits as a test sets them, and a switch that makes the escrow unreadable.
struct TestDeposits {
    balances: std::sync::Mutex<std::collections::BTreeMap<pog_signed::PublicKey, u128>>,
    down: std::sync::atomic::AtomicBool,
}

impl pog_market::backing::Deposits for TestDeposits {
    fn deposit_of(
        &self,
        owner: &pog_signed::PublicKey,
    ) -> Result<u128, pog_market::backing::DepositsUnavailable> {
        if self.down.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(pog_market::backing::DepositsUnavailable(
                "the chain did not answer".into(),
            ));
        }
        Ok(self
            .balances
            .lock()
            .unwrap()
            .get(owner)
            .copied()
            .unwrap_or(0))
    }
}

/// With an escrow, a bid is taken only while what its owner's open bids could pay, with it,
/// is covered by the owner's deposit (402 otherwise), and an escrow that cannot be read takes
/// nothing (503); a cancelled bid frees its part.
#[tokio::test]
async fn a_bid_is_taken_only_while_its_owners_deposit_covers_its_open_bids() {
    let deposits = Arc::new(TestDeposits {
        balances: Default::default(),
        down: Default::default(),
    });
    let h = Harness::new()
        .with_market()
        .with_deposits(deposits.clone())
        .serve()
        .await;
    let url = h.url.clone();
    let client = MarketClient::new(&url).unwrap();
    let renter = Identity::from_seed([7; 32]);
    // No deposit: refused, named, with what it would need.
    let (status, error) = submit_raw(&url, &renter, order("r1", &renter, Side::Bid, 2, 3.0)).await;
    assert_eq!(status, 402, "{error}");
    assert!(
        error.contains("could pay up to 6000000 micro-dollars") && error.contains("deposit of 0"),
        "{error}"
    );
    // $10 deposited: 2 GPU-hours at $3 and 1 at $4 fit ($10), one more GPU-hour at $0.01 does not.
    deposits
        .balances
        .lock()
        .unwrap()
        .insert(renter.public_key(), 10_000_000);
    client
        .submit(&renter, order("r1", &renter, Side::Bid, 2, 3.0), DAY)
        .await
        .unwrap();
    client
        .submit(&renter, order("r2", &renter, Side::Bid, 1, 4.0), DAY)
        .await
        .unwrap();
    let (status, error) = submit_raw(&url, &renter, order("r3", &renter, Side::Bid, 1, 0.01)).await;
    assert_eq!(status, 402, "{error}");
    assert!(error.contains("10010000"), "{error}");
    // Another key's bids are its own deposit's business.
    let other = Identity::from_seed([8; 32]);
    let (status, _) = submit_raw(&url, &other, order("o1", &other, Side::Bid, 1, 1.0)).await;
    assert_eq!(status, 402);
    // The escrow unreadable: nothing taken, 503, the book unchanged.
    let before = client.book(None).await.unwrap();
    deposits
        .down
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let (status, error) = submit_raw(&url, &renter, order("r4", &renter, Side::Bid, 1, 0.01)).await;
    assert_eq!(status, 503, "{error}");
    assert!(error.contains("nothing was accepted"), "{error}");
    assert_eq!(client.book(None).await.unwrap(), before);
    deposits
        .down
        .store(false, std::sync::atomic::Ordering::SeqCst);
    // A cancelled bid frees what it held: the $0.01 bid fits now.
    client
        .cancel(&renter, OrderId::new("r2").unwrap())
        .await
        .unwrap();
    client
        .submit(&renter, order("r3", &renter, Side::Bid, 1, 0.01), DAY)
        .await
        .unwrap();
}

/// The lease pages are signed by the validator: a client (the agent delivering leases) takes
/// one only from a key it trusts; the same page from any other key is refused, and a market
/// without the validator's identity serves none (503) rather than an unsigned list.
#[tokio::test]
async fn lease_pages_are_taken_only_from_a_trusted_validator_key() {
    let h = Harness::new().with_market().serve().await;
    let client = MarketClient::new(&h.url).unwrap();
    let filter = pog_validator::market::LeaseFilter::default();
    let page = client.leases(&filter, &[validator_key()]).await.unwrap();
    assert!(page.leases.is_empty() && page.now_ms > 0);
    let stranger = Identity::from_seed([0x66; 32]).public_key();
    let e = client.leases(&filter, &[stranger]).await.unwrap_err();
    assert!(
        e.to_string().contains("not by a trusted validator key"),
        "{e}"
    );
    let unsigned = pog_validator::market::Market::open(None, &validator_key()).unwrap();
    assert!(unsigned.signed_leases(&filter).is_none());
}

/// A restarted validator reads each GPU's last `gpu-state` back from its ledger before logging
/// one: a record after the restart that leaves the state as it was logs none (the chain would
/// be sent an unchanged state again). The restart here is a new pricing over the same
/// registry, market and ledger.
#[tokio::test]
async fn a_restart_logs_no_gpu_state_that_did_not_change() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Arc::new(
        pog_validator::ledger::ValidatorLedger::open(
            &dir.path().join("ledger"),
            &Identity::from_seed(VALIDATOR_SEED),
            None,
        )
        .unwrap(),
    );
    let states = || {
        ledger
            .ledger()
            .gpu_entries("GPU-r1")
            .unwrap()
            .iter()
            .filter(|(_, e)| e.kind == RecordKind::GpuState)
            .count()
    };
    let served = || {
        Harness::new()
            .stored_in(dir.path())
            .with_ledger_of(ledger.clone())
            .with_pricing_by_hand()
            .serve()
    };
    let h = served().await;
    let _agent = h.agent(14, vec![claim("GPU-r1")]).await;
    h.v.challenge::<Gemm>("GPU-r1", &policy()).await.unwrap();
    h.pricing().catch_up().unwrap();
    assert_eq!(states(), 1, "the first state is logged");
    let restarted = served().await;
    let before = restarted.market().priced_through().unwrap();
    restarted
        .v
        .challenge::<Gemm>("GPU-r1", &policy())
        .await
        .unwrap();
    restarted.pricing().catch_up().unwrap();
    assert!(
        restarted.market().priced_through().unwrap() > before,
        "the new record is priced"
    );
    assert_eq!(states(), 1, "an unchanged state is not logged again");
}

/// A leased GPU's checks fill the rows its score reads (a round a minute for days), and none
/// of them proves its model: the score rests on the last full round before the lease, found
/// behind the checks even by a validator that restarted during the lease, while the checks
/// count as its rounds.
#[tokio::test(flavor = "multi_thread")]
async fn a_leased_gpus_score_rests_on_its_last_full_round_behind_its_checks() {
    let h = Harness::new()
        .with_market()
        .with_pricing_by_hand()
        .serve()
        .await;
    let _agent = h.agent(15, vec![claim("GPU-l1")]).await;
    h.v.challenge::<Gemm>("GPU-l1", &policy()).await.unwrap();
    prove_model(&h.v, "GPU-l1");
    let full_at = h.v.records().now_ms();
    for i in 1..=200u64 {
        store_edited(&h.v, "GPU-l1", |r| {
            r["recorded_at_ms"] = (full_at + i * 60_000).into();
            r["proves_model"] = false.into();
            r["policy"]["lease_check"] = true.into();
        });
    }
    // A validator started now: nothing kept of the GPU's rows before.
    let restarted = pog_validator::pricing::Pricing::new(
        h.v.records().clone(),
        h.market().clone(),
        pog_market::Config::embedded(),
    );
    for pricing in [h.pricing(), &restarted] {
        let a = pricing.assess("GPU-l1").unwrap().unwrap();
        assert!(a.proves_model, "{:?}", a.reasons);
        assert_eq!(a.latest_accepted, Some(true));
        assert_eq!(
            (a.proofs_passed, a.proofs_total),
            (20, 20),
            "the last rounds are the checks"
        );
    }
}
