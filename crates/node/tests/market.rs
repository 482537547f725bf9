//! The validator's order book over real sockets: signed submissions and cancellations, the
//! operator's clearings, the book and history, forged signatures, someone else's cancel,
//! replays at another validator, bad orders, and persistence across a restart. A refused
//! request never changes the book.

mod common;

use common::{listen, loopback, VALIDATOR_SEED};
use pog_market::{GpuClass, Mechanism, Order, OrderId, Price, Side};
use pog_node::market::{
    CancelMessage, ClearMessage, Market, MarketClient, SubmitMessage, CANCEL_KIND, CLEAR_KIND,
    SUBMIT_KIND,
};
use pog_node::registry::Registry;
use pog_node::serve::Limits;
use pog_node::validator::{self, Validator};
use pog_proof::wire::{Envelope, Identity};
use std::path::Path;
use std::sync::Arc;

/// Starts a validator with its market (stored at `path`, in memory without); returns its URL.
async fn start(path: Option<&Path>) -> String {
    let identity = Identity::from_seed(VALIDATOR_SEED);
    let market = Arc::new(Market::open(path, &identity.public_hex()).unwrap());
    let v = Arc::new(Validator::with_config(
        identity,
        Registry::open(None).unwrap(),
        loopback(),
    ));
    let (listener, url) = listen().await;
    tokio::spawn(pog_node::http::serve(
        listener,
        validator::router_with_market(v, market),
        Limits::small_requests(),
    ));
    url
}

fn h200() -> GpuClass {
    GpuClass::new("H200 SXM").unwrap()
}

fn order(id: &str, owner: &Identity, side: Side, quantity: u64, usd: f64) -> Order {
    Order::new(
        OrderId::new(id).unwrap(),
        owner.public_hex(),
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

/// A cancel of order b1, signed by `signer`.
fn cancel_of_b1(signer: &Identity) -> Envelope {
    signer
        .seal(
            CANCEL_KIND,
            &CancelMessage {
                validator: validator_key(),
                id: OrderId::new("b1").unwrap(),
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

fn validator_key() -> String {
    Identity::from_seed(VALIDATOR_SEED).public_hex()
}

#[tokio::test]
async fn orders_trade_and_only_their_owner_cancels() {
    let url = start(None).await;
    let client = MarketClient::new(&url);
    let (alice, bob, mallory) = (
        Identity::from_seed([2; 32]),
        Identity::from_seed([3; 32]),
        Identity::from_seed([4; 32]),
    );
    assert_eq!(client.info().await.unwrap().validator, validator_key());
    client
        .submit(&alice, order("b1", &alice, Side::Bid, 3, 4.0))
        .await
        .unwrap();
    client
        .submit(&bob, order("a1", &bob, Side::Ask, 2, 2.0))
        .await
        .unwrap();
    client
        .submit(&bob, order("a2", &bob, Side::Ask, 1, 9.0))
        .await
        .unwrap();
    let before = client.book(Some(&h200())).await.unwrap();
    assert_eq!((before.bids.len(), before.asks.len()), (1, 2));

    // Someone else's cancel: refused, the book unchanged.
    let err = client
        .cancel(&mallory, OrderId::new("a2").unwrap())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("403") && err.contains("only its owner"),
        "{err}"
    );
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
    assert_eq!(after.bids[0].quantity(), 1);
    assert!(after.asks.is_empty());
    let history = client.history(None, 10).await.unwrap();
    assert_eq!(history.clearings.len(), 1);
    assert_eq!(history.clearings[0].clearing.trades[0].bid.as_str(), "b1");
    // A filled order cannot be cancelled.
    let err = client
        .cancel(&bob, OrderId::new("a1").unwrap())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("409"), "{err}");
}

#[tokio::test]
async fn forged_and_bad_orders_never_change_the_book() {
    let url = start(None).await;
    let client = MarketClient::new(&url);
    let (alice, mallory) = (Identity::from_seed([2; 32]), Identity::from_seed([4; 32]));
    client
        .submit(&alice, order("b1", &alice, Side::Bid, 1, 4.0))
        .await
        .unwrap();
    let before = client.book(None).await.unwrap();
    let submit = |order: Order| SubmitMessage {
        validator: validator_key(),
        order,
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
    relabelled.signer = alice.public_hex();
    assert_eq!(send(&url, "/v1/market/cancel", &relabelled).await, 403);

    // Signed for another validator: not replayable here.
    let elsewhere = SubmitMessage {
        validator: Identity::from_seed([9; 32]).public_hex(),
        order: order("b3", &alice, Side::Bid, 1, 1.0),
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
            &submit(order("b1", &alice, Side::Ask, 1, 1.0)),
        ),
    )
    .await;
    assert_eq!(status, 400);
    assert!(answer["error"]
        .as_str()
        .unwrap()
        .contains("already submitted"));
    let raw = |price: serde_json::Value, class: &str, quantity: u64| {
        serde_json::json!({
            "validator": validator_key(),
            "order": {"id": "x", "owner": alice.public_hex(), "side": "bid", "class": class,
                      "quantity": quantity, "price_micro_usd": price}
        })
        .to_string()
    };
    for (body, expect) in [
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
        let client = MarketClient::new(&start(Some(&path)).await);
        client
            .submit(&alice, order("b1", &alice, Side::Bid, 4, 5.0))
            .await
            .unwrap();
        client
            .submit(&bob, order("a1", &bob, Side::Ask, 1, 1.0))
            .await
            .unwrap();
        client
            .submit(&bob, order("a2", &bob, Side::Ask, 1, 3.0))
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
    let client = MarketClient::new(&start(Some(&path)).await);
    assert_eq!(client.book(None).await.unwrap(), book);
    assert_eq!(client.history(None, 10).await.unwrap(), history);
    // Ids used before the restart stay taken.
    let err = client
        .submit(&bob, order("a1", &bob, Side::Ask, 1, 1.0))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("already submitted"), "{err}");
}
