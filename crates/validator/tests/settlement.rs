//! Leases settled for the hours the validator proved (issue 25, item 4), over loopback: a trade
//! becomes a lease, the GPU's rounds during it are on record, and once a period has ended the
//! settler pays the provider for the proven share of each hour through an escrow (a double
//! here; `pog validator --escrow-key-file` on anvil in the binary's tests), refunds the rest,
//! and serves the signed settlement. What a lease will be paid from counts against its
//! renter's next bids until it is paid on chain; a chain that is down is tried again.

mod common;

use common::{ask, claim, policy, prove_model, records_of, store_edited, Harness, VALIDATOR_SEED};
use pog_market::settlement::SettlementRules;
use pog_market::{GpuClass, Mechanism, Order, OrderId, Price, Side};
use pog_net::clock::{Clock, ManualClock};
use pog_records::{EscrowPayment, SettlementRecord};
use pog_signed::{Envelope, EvmAddress, Identity, PublicKey};
use pog_validator::client::MarketClient;
use pog_validator::settlement::{
    EscrowPayments, EscrowTerms, EscrowUnavailable, SettlementPage, SettlementState, Settler,
    UndeliveredMessage, Voucher, WithdrawMessage, SETTLEMENTS_KIND, UNDELIVERED_KIND,
    VOUCHER_LIFETIME_MS, WITHDRAW_KIND,
};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const HOUR_MS: u64 = 3_600_000;
const MINUTE_MS: u64 = 60_000;
const DAY: Duration = Duration::from_secs(86_400);
const GPU: &str = "GPU-5e771e00-0000-4000-8000-000000000001";

/// The escrow's deposits, as the market reads them, counting the reads (each a call to the
/// chain).
#[derive(Default)]
struct Deposits(
    Mutex<BTreeMap<PublicKey, u128>>,
    std::sync::atomic::AtomicUsize,
);

impl pog_market::backing::Deposits for Deposits {
    fn deposit_of(
        &self,
        owner: &PublicKey,
    ) -> Result<u128, pog_market::backing::DepositsUnavailable> {
        self.1.fetch_add(1, Ordering::SeqCst);
        Ok(self.0.lock().unwrap().get(owner).copied().unwrap_or(0))
    }
}

/// An escrow double: signs each settlement with a marker, and takes payments while `up`.
#[derive(Default)]
struct Escrow {
    up: AtomicBool,
    signed: Mutex<Vec<EscrowTerms>>,
    paid: Mutex<Vec<EscrowTerms>>,
}

impl EscrowPayments for Escrow {
    fn sign(&self, terms: &EscrowTerms) -> Result<EscrowPayment, EscrowUnavailable> {
        self.signed.lock().unwrap().push(terms.clone());
        Ok(EscrowPayment {
            chain_id: 31337,
            contract: "0x00000000000000000000000000000000000000e5".into(),
            settler: "0x00000000000000000000000000000000000000e6".into(),
            lease: format!("lease {}", terms.lease_id),
            renter_account: terms.renter.to_string(),
            signature: format!("signed {} {}", terms.period, terms.paid_micro_usd),
        })
    }

    fn deliver(
        &self,
        terms: &EscrowTerms,
        payment: &EscrowPayment,
    ) -> Result<bool, EscrowUnavailable> {
        assert_eq!(
            payment.signature,
            format!("signed {} {}", terms.period, terms.paid_micro_usd),
            "the payment delivered is the one signed"
        );
        if !self.up.load(Ordering::SeqCst) {
            return Err(EscrowUnavailable("the chain did not answer".into()));
        }
        self.paid.lock().unwrap().push(terms.clone());
        Ok(true)
    }

    fn voucher(
        &self,
        renter: &PublicKey,
        amount_micro_usd: u64,
        expires_at_s: u64,
    ) -> Result<Voucher, EscrowUnavailable> {
        if !self.up.load(Ordering::SeqCst) {
            return Err(EscrowUnavailable("the chain did not answer".into()));
        }
        Ok(Voucher {
            renter: renter.clone(),
            amount_micro_usd,
            nonce: 0,
            expires_at_s,
            chain_id: 31337,
            contract: "0x00000000000000000000000000000000000000e5".into(),
            signature: format!("voucher {amount_micro_usd}"),
        })
    }
}

/// Asks the validator at `url` for a voucher of `amount` µ$ of `renter`'s account, signed at
/// `at_ms`: the status and the answer.
async fn withdraw(
    url: &str,
    renter: &Identity,
    validator: &PublicKey,
    amount: u64,
    at_ms: u64,
) -> (u16, serde_json::Value) {
    let envelope = renter
        .seal(
            WITHDRAW_KIND,
            &WithdrawMessage {
                validator: validator.clone(),
                amount_micro_usd: amount,
                at_ms,
            },
        )
        .unwrap();
    let response = reqwest::Client::new()
        .post(format!("{url}/v1/market/withdraw"))
        .json(&envelope)
        .send()
        .await
        .unwrap();
    (
        response.status().as_u16(),
        response.json().await.unwrap_or_default(),
    )
}

fn h200() -> GpuClass {
    GpuClass::new("H200 SXM").unwrap()
}

fn bid(id: &str, owner: &Identity, quantity: u64, usd: f64) -> Order {
    Order::new(
        OrderId::new(id).unwrap(),
        owner.public_key(),
        Side::Bid,
        h200(),
        quantity,
        Price::from_usd(usd).unwrap(),
    )
    .unwrap()
}

/// Stores a round of the GPU at `at_ms`: proven, or (`proven` false) unanswered.
fn round(h: &common::Served, at_ms: u64, proven: bool) {
    store_edited(&h.v, GPU, |r| {
        r["recorded_at_ms"] = at_ms.into();
        r["accepted"] = proven.into();
        r["failure"] = if proven {
            serde_json::Value::Null
        } else {
            serde_json::json!({"kind": "unreachable", "message": "nothing answered"})
        };
    });
}

/// A validator on `clock` whose market settles by `rules` through an escrow of `deposits`, an
/// agent holding [`GPU`] (proven, paying to `0x…aa`), and a trade of 2 GPU-hours at $2 between
/// the renter (`[21; 32]`, $10 deposited) and the provider (`[22; 32]`): the validator, its
/// lease, the renter, the provider, the payee and the agent (keep it while it must answer).
async fn a_lease(
    clock: &ManualClock,
    deposits: &Arc<Deposits>,
    rules: SettlementRules,
) -> (
    common::Served,
    pog_market::lease::Lease,
    Identity,
    Identity,
    EvmAddress,
    common::TestAgent,
) {
    let h = Harness::new()
        .clock(clock.shared())
        .with_deposits(deposits.clone())
        .with_settlements(rules)
        .serve()
        .await;
    let (renter, provider) = (Identity::from_seed([21; 32]), Identity::from_seed([22; 32]));
    let payee: EvmAddress = "0x00000000000000000000000000000000000000aa"
        .parse()
        .unwrap();
    let agent = h
        .agent(22, vec![claim(GPU)])
        .paid_to(payee)
        .on_clock(clock.shared())
        .await;
    h.v.challenge::<pog_records::Gemm>(GPU, &policy())
        .await
        .expect("a proof exchange");
    prove_model(&h.v, GPU);
    deposits
        .0
        .lock()
        .unwrap()
        .insert(renter.public_key(), 10_000_000);
    // The uniform price between $3 and $1: a lease of $4.
    let client = MarketClient::new(&h.url).unwrap();
    client
        .submit(&renter, bid("b1", &renter, 2, 3.0), DAY)
        .await
        .unwrap();
    client
        .submit(&provider, ask("a1", &provider, 2, 1.0, &[GPU]), DAY)
        .await
        .unwrap();
    client
        .clear(
            &Identity::from_seed(VALIDATOR_SEED),
            h200(),
            Mechanism::UniformPrice,
        )
        .await
        .unwrap();
    let leases = h.market().all_leases();
    assert_eq!(leases.len(), 1, "{leases:?}");
    let lease = leases[0].clone();
    assert_eq!((lease.hours, lease.price_micro_usd), (2, 2_000_000));
    (h, lease, renter, provider, payee, agent)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lease_is_paid_for_the_hours_proven_and_holds_its_renters_deposit_until_paid() {
    let clock = ManualClock::at_system_time();
    let deposits = Arc::new(Deposits::default());
    let rules = SettlementRules {
        period_ms: 24 * HOUR_MS,
        ..SettlementRules::default()
    };
    let (h, lease, renter, _provider, payee, _agent) = a_lease(&clock, &deposits, rules).await;
    let client = MarketClient::new(&h.url).unwrap();
    let settlements = h.market().settlements().unwrap().clone();
    assert_eq!(settlements.held_by(&lease), 4_000_000);

    // The lease's $4 is held: a bid of $7.50 more no longer fits the $10 deposit.
    let refused = client
        .submit(&renter, bid("b2", &renter, 3, 2.5), DAY)
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains("402"), "{refused}");

    // Its rounds: the first hour all proven; the second, three proven then three unanswered;
    // one round after it (it does not vouch for the unanswered part).
    let s = lease.start_ms;
    for i in 0..12 {
        round(&h, s + 5 * MINUTE_MS + i * 10 * MINUTE_MS, i < 9);
    }
    round(&h, s + 2 * HOUR_MS + 5 * MINUTE_MS, true);

    let escrow = Arc::new(Escrow::default());
    let settler = Settler::new(
        h.market().clone(),
        h.v.records().clone(),
        settlements.clone(),
        Some(escrow.clone()),
    );
    // Not due before the lease's end and the grace after it.
    clock.set(lease.end_ms + rules.grace_ms - 1);
    assert_eq!(settler.pass().unwrap().settled, 0);

    // Due, and the chain down: settled, signed, not paid; its payment still held.
    clock.set(lease.end_ms + rules.grace_ms);
    let pass = settler.pass().unwrap();
    assert_eq!(
        (pass.settled, pass.signed, pass.paid),
        (1, 1, 0),
        "{pass:?}"
    );
    assert_eq!(pass.undelivered.len(), 1, "{pass:?}");
    let signed = escrow.signed.lock().unwrap().clone();
    assert_eq!(signed.len(), 1);
    assert_eq!(signed[0].payee, payee.to_string());
    assert_eq!(signed[0].renter, renter.public_key());
    // 1.5 of 2 hours at $2.
    assert_eq!(signed[0].paid_micro_usd, 3_000_000);
    assert_eq!(settlements.held_by(&lease), 3_000_000);
    assert!(client
        .submit(&renter, bid("b3", &renter, 3, 2.5), DAY)
        .await
        .is_err());

    // The chain back: paid at the next pass, once; nothing held, the bid fits.
    escrow.up.store(true, Ordering::SeqCst);
    let pass = settler.pass().unwrap();
    assert_eq!(
        (pass.settled, pass.signed, pass.paid),
        (0, 0, 1),
        "{pass:?}"
    );
    assert_eq!(settler.pass().unwrap().paid, 0, "paid once");
    assert_eq!(escrow.paid.lock().unwrap().len(), 1);
    assert_eq!(settlements.held_by(&lease), 0);
    client
        .submit(&renter, bid("b4", &renter, 3, 2.5), DAY)
        .await
        .unwrap();

    // Served, signed by the validator, to either party.
    let page: Envelope = reqwest::get(format!(
        "{}/v1/market/settlements?party={}",
        h.url,
        renter.public_key()
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let (page, signer): (SettlementPage, PublicKey) =
        pog_signed::decode(&serde_json::to_vec(&page).unwrap(), SETTLEMENTS_KIND).unwrap();
    assert_eq!(signer, h.v.public_key());
    assert_eq!(page.settlements.len(), 1, "{page:?}");
    let kept = &page.settlements[0];
    assert_eq!(kept.state, SettlementState::Paid);
    let record: &SettlementRecord = &kept.record;
    assert_eq!(record.lease_id, lease.id);
    assert_eq!(record.proven_hours_ppm, 1_500_000);
    assert_eq!(
        (record.paid_micro_usd, record.refunded_micro_usd),
        (3_000_000, 1_000_000)
    );
    assert!(
        record.unproven.contains("3 of 6 rounds proven"),
        "{record:?}"
    );
    assert_eq!(record.payee.as_deref(), Some(payee.to_string().as_str()));
    assert!(record.escrow.is_some());
    let stranger = reqwest::get(format!(
        "{}/v1/market/settlements?party={}",
        h.url,
        Identity::from_seed([99; 32]).public_key()
    ))
    .await
    .unwrap()
    .json::<Envelope>()
    .await
    .unwrap();
    let (none, _): (SettlementPage, PublicKey) =
        pog_signed::decode(&serde_json::to_vec(&stranger).unwrap(), SETTLEMENTS_KIND).unwrap();
    assert!(none.settlements.is_empty());
}

/// Signs a report that lease `lease`'s access was not delivered from `at_ms`, by `signer`, and
/// posts it: the status and the answer.
async fn report_undelivered(
    url: &str,
    signer: &Identity,
    validator: &PublicKey,
    lease: &str,
    at_ms: u64,
) -> (u16, serde_json::Value) {
    let envelope = signer
        .seal(
            UNDELIVERED_KIND,
            &UndeliveredMessage {
                validator: validator.clone(),
                lease_id: lease.to_string(),
                at_ms,
                reason: "the hook exited 1: no such user".into(),
            },
        )
        .unwrap();
    let response = reqwest::Client::new()
        .post(format!("{url}/v1/market/undelivered"))
        .json(&envelope)
        .send()
        .await
        .unwrap();
    (
        response.status().as_u16(),
        response.json().await.unwrap_or_default(),
    )
}

/// The provider's agent reports that its hook could not give the renter access: the hours
/// after it are not paid, however well the GPU was proven; only the provider may say so, of a
/// time within the lease, and its first report stands.
#[tokio::test(flavor = "multi_thread")]
async fn hours_after_the_provider_reports_the_access_undelivered_are_refunded() {
    let clock = ManualClock::at_system_time();
    let deposits = Arc::new(Deposits::default());
    let rules = SettlementRules::default();
    let (h, lease, renter, provider, _payee, _agent) = a_lease(&clock, &deposits, rules).await;
    let v = h.v.public_key();
    let s = lease.start_ms;
    for i in 0..13 {
        round(&h, s + 5 * MINUTE_MS + i * 10 * MINUTE_MS, true);
    }
    // The renter cannot say so, nor anyone but the provider; not of a time outside the lease,
    // nor of a lease that does not exist.
    let at = s + 30 * MINUTE_MS;
    // Ahead of the validator's clock: refused; reported 10 minutes after, taken.
    assert_eq!(
        report_undelivered(&h.url, &provider, &v, &lease.id, at)
            .await
            .0,
        400
    );
    clock.set(at + 10 * MINUTE_MS);
    assert_eq!(
        report_undelivered(&h.url, &renter, &v, &lease.id, at)
            .await
            .0,
        403
    );
    assert_eq!(
        report_undelivered(&h.url, &provider, &v, "99.0.0", at)
            .await
            .0,
        404
    );
    assert_eq!(
        report_undelivered(&h.url, &provider, &v, &lease.id, lease.end_ms)
            .await
            .0,
        400
    );
    let (status, body) = report_undelivered(&h.url, &provider, &v, &lease.id, at).await;
    assert_eq!(status, 200, "{body}");
    // A later report does not move it.
    let (_, body) = report_undelivered(&h.url, &provider, &v, &lease.id, at + 5 * MINUTE_MS).await;
    assert_eq!(body["undelivered_from_ms"], at);
    clock.set(lease.end_ms + rules.grace_ms);
    let settler = Settler::new(
        h.market().clone(),
        h.v.records().clone(),
        h.market().settlements().unwrap().clone(),
        None,
    );
    assert_eq!(settler.pass().unwrap().settled, 1);
    let page = h
        .market()
        .settlements()
        .unwrap()
        .page(&Default::default())
        .unwrap();
    let record = &page[0].record;
    // Every round proven, but no hour after the report is paid: both end after it.
    assert_eq!(
        (record.paid_micro_usd, record.refunded_micro_usd),
        (0, 4_000_000),
        "{record:?}"
    );
    assert!(
        record.unproven.contains("access not delivered"),
        "{record:?}"
    );
    assert_eq!(page[0].state, SettlementState::Recorded);
}

/// A renter withdraws, with the validator's voucher, only what its open bids, its leases not
/// yet paid for and its last voucher leave of its deposit; the voucher's amount is held from
/// its bids until the voucher expires; a request replayed, or signed far from the clock, or
/// for another validator, is refused; a validator settling through no escrow signs none.
#[tokio::test(flavor = "multi_thread")]
async fn a_renter_withdraws_only_what_its_bids_leases_and_vouchers_leave() {
    let clock = ManualClock::at_system_time();
    let deposits = Arc::new(Deposits::default());
    let escrow = Arc::new(Escrow::default());
    let h = Harness::new()
        .clock(clock.shared())
        .with_deposits(deposits.clone())
        .with_settlements(SettlementRules::default())
        .with_vouchers(escrow.clone())
        .serve()
        .await;
    let renter = Identity::from_seed([31; 32]);
    let v = h.v.public_key();
    deposits
        .0
        .lock()
        .unwrap()
        .insert(renter.public_key(), 10_000_000);
    let client = MarketClient::new(&h.url).unwrap();
    // $6 held by an open bid: $4 free.
    client
        .submit(&renter, bid("b1", &renter, 2, 3.0), DAY)
        .await
        .unwrap();
    let now = clock.now_ms();
    let (status, body) = withdraw(&h.url, &renter, &v, 4_000_001, now).await;
    assert_eq!(status, 402, "{body}");
    assert!(body.to_string().contains("only 4000000"), "{body}");
    // The chain down: nothing signed, nothing held.
    let (status, _) = withdraw(&h.url, &renter, &v, 1_000_000, now + 1).await;
    assert_eq!(status, 503);
    escrow.up.store(true, Ordering::SeqCst);
    let (status, body) = withdraw(&h.url, &renter, &v, 3_000_000, now + 2).await;
    assert_eq!(status, 200, "{body}");
    let voucher: Voucher = serde_json::from_value(body).unwrap();
    assert_eq!(voucher.amount_micro_usd, 3_000_000);
    assert_eq!(voucher.renter, renter.public_key());
    assert_eq!(voucher.expires_at_s, (now + VOUCHER_LIFETIME_MS) / 1000);
    // The same request again, an older one, one from long ago or ahead, one for another
    // validator: refused, the replays before the chain is read for them.
    let reads = deposits.1.load(Ordering::SeqCst);
    for at in [now + 2, now + 1] {
        assert_eq!(withdraw(&h.url, &renter, &v, 1, at).await.0, 409);
    }
    assert_eq!(
        deposits.1.load(Ordering::SeqCst),
        reads,
        "no chain read for a replay"
    );
    assert_eq!(
        withdraw(&h.url, &renter, &v, 1, now + 3_600_000).await.0,
        409
    );
    let other = Identity::from_seed([32; 32]).public_key();
    assert_eq!(withdraw(&h.url, &renter, &other, 1, now + 3).await.0, 400);
    // The voucher's $3 is held: $1 left, a $2 bid refused, and a second voucher too.
    assert!(client
        .submit(&renter, bid("b2", &renter, 1, 2.0), DAY)
        .await
        .is_err());
    assert_eq!(
        withdraw(&h.url, &renter, &v, 1_000_001, now + 4).await.0,
        402
    );
    // Once it expired, it holds nothing.
    clock.set(now + VOUCHER_LIFETIME_MS + 1);
    client
        .submit(&renter, bid("b3", &renter, 1, 2.0), DAY)
        .await
        .unwrap();

    // A validator that settles through no escrow signs no voucher.
    let plain = Harness::new()
        .with_deposits(deposits.clone())
        .with_settlements(SettlementRules::default())
        .serve()
        .await;
    let (status, body) = withdraw(&plain.url, &renter, &plain.v.public_key(), 1, now_ms()).await;
    assert_eq!(status, 503, "{body}");
}

/// Any key can sign a withdrawal or a delivery report, and a withdrawal reads the chain: both
/// are bounded per source address as order submissions are (429 past the limit).
#[tokio::test(flavor = "multi_thread")]
async fn withdrawals_and_delivery_reports_are_bounded_per_source() {
    let deposits = Arc::new(Deposits::default());
    let h = Harness::new()
        .with_deposits(deposits.clone())
        .with_settlements(SettlementRules::default())
        .with_vouchers(Arc::new(Escrow::default()))
        .market_limits(pog_validator::market::MarketLimits {
            submits_per_minute_per_source: 3.0,
            ..Default::default()
        })
        .serve()
        .await;
    let v = h.v.public_key();
    let now = now_ms();
    let mut statuses = Vec::new();
    for i in 0..3 {
        // Each from a fresh key: one source behind many identities.
        let key = Identity::from_seed([40 + i; 32]);
        statuses.push(withdraw(&h.url, &key, &v, 1, now).await.0);
    }
    assert!(statuses.iter().all(|s| *s != 429), "{statuses:?}");
    let reads = deposits.1.load(Ordering::SeqCst);
    let stranger = Identity::from_seed([50; 32]);
    assert_eq!(withdraw(&h.url, &stranger, &v, 1, now).await.0, 429);
    assert_eq!(
        report_undelivered(&h.url, &stranger, &v, "0.0.0", now)
            .await
            .0,
        429
    );
    assert_eq!(
        deposits.1.load(Ordering::SeqCst),
        reads,
        "no chain read past the limit"
    );
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A GPU under a lease is checked, not proven: its rounds during the lease are one small
/// product (`Policy::for_lease`: `lease_check` on the record, no proof of memory beside it),
/// the first round after the lease is full again, and the checks pay the lease's hours.
#[tokio::test(flavor = "multi_thread")]
async fn a_leased_gpu_is_checked_not_proven_and_its_checks_pay_its_hours() {
    use pog_validator::schedule::{Rounds, Schedule};
    let clock = ManualClock::at_system_time();
    let deposits = Arc::new(Deposits::default());
    let rules = SettlementRules::default();
    let (h, lease, _renter, _provider, _payee, _agent) = a_lease(&clock, &deposits, rules).await;
    let with_memory = pog_records::Policy {
        memory: pog_records::MemoryPolicy::test_shape(2_000.0),
        ..policy()
    };
    let (_stop, stopped) = tokio::sync::watch::channel(false);
    let mut rounds = Rounds::new(
        h.v.clone(),
        Schedule::every(Duration::from_secs(600), with_memory),
        stopped,
    )
    .with_leases(h.market().clone());
    // One round a little after the lease's start, one after its end.
    clock.set(lease.start_ms + 10 * MINUTE_MS);
    rounds.start();
    rounds.settled().await;
    let during = records_of(&h.url, GPU).await;
    clock.set(lease.end_ms + MINUTE_MS);
    rounds.start();
    rounds.settled().await;
    let all = records_of(&h.url, GPU).await;
    let after = &all[during.len()..];
    let gemm = |r: &&serde_json::Value| r.get("challenge").is_some();
    let memory = |r: &&serde_json::Value| r.get("memory_challenge").is_some();

    let check = during.iter().rev().find(gemm).expect("the check's record");
    assert_eq!(check["policy"]["lease_check"], true, "{check}");
    assert_eq!(check["accepted"], true, "{check}");
    assert_eq!(check["proves_model"], false);
    assert!(
        !during.iter().any(|r| memory(&r)),
        "no proof of memory during the lease"
    );
    let full = after.iter().find(gemm).expect("the full round's record");
    assert!(full["policy"].get("lease_check").is_none(), "{full}");
    assert!(after.iter().any(|r| memory(&r)), "the memory proof is back");
    for r in after.iter().filter(|r| gemm(r) || memory(r)) {
        assert_eq!(r["accepted"], true, "{r}");
    }

    // The check vouches for the first hour; the second, with no round, is bridged by the
    // check and the full round after the lease (both proven, under 3 hours apart).
    let settler = Settler::new(
        h.market().clone(),
        h.v.records().clone(),
        h.market().settlements().unwrap().clone(),
        None,
    );
    clock.set(lease.end_ms + rules.grace_ms);
    assert_eq!(settler.pass().unwrap().settled, 1);
    let kept = h
        .market()
        .settlements()
        .unwrap()
        .page(&pog_validator::settlement::SettlementFilter {
            lease: Some(lease.id.clone()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(kept[0].record.proven_hours_ppm, 2_000_000, "{kept:?}");
}
