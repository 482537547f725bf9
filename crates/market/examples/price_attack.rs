//! How far one actor with one deposit moves a class's posted price (issue 25, item 5): an
//! honest H200 market runs for two days, an order book cleared every hour, and each attack of
//! the issue is played in the second day. The posted price of a reference H200 at the end,
//! with and without the attack, is compared with the bound the rules state
//! ([`pog_market::signals::one_actor_bound`]).
//!
//! The validator's rules are applied as it applies them: an ask must name GPUs registered to
//! its key with a recent accepted proof of their model (`backing::check_order`), a bid must be
//! covered by its key's deposit beside its open bids and unpaid leases
//! (`backing::check_bid_covered`), a key never trades with itself (the book). Each attack is
//! also played on a validator run without an escrow (bids unbacked), where the bound does not
//! hold (one actor is then any number of bidders) and the move shows what the deposit buys.
//!
//! `cargo run -p pog-market --example price_attack`

use std::collections::BTreeMap;

use pog_market::appraisal::model_base_usd;
use pog_market::backing::{check_bid_covered, check_order, BackingRules, LatestProof, HOUR_MS};
use pog_market::lease::Lease;
use pog_market::quote::quote;
use pog_market::report::spec_figures;
use pog_market::score::gpu_score;
use pog_market::signals::{class_state, one_actor_bound, ClassActivity, LeaseSample};
use pog_market::{Book, Config, GpuClass, Mechanism, Order, OrderId, Price, Side, Standing};
use pog_signed::GpuUuid;
use pog_spec::SpecDb;

/// The market's start: 2026-12-01 00:00 UTC.
const START_MS: u64 = 1_796_083_200_000;
/// Proven H200s, one per provider key.
const GPUS: u64 = 40;
/// Honest renters, each with a deposit.
const RENTERS: u64 = 30;
/// The actor's one deposit: $10,000.
const ACTOR_DEPOSIT: u128 = 10_000 * 1_000_000;
/// Hours simulated; the attacks play in the second day.
const HOURS: u64 = 48;

/// What the actor does.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Attack {
    None,
    /// 10⁹ GPU-hours at a cent, open for 30 days.
    GiantBid,
    /// 10⁹ GPU-hours at $1,000,000 offered, cancelled an hour later.
    GiantAskThenCancel,
    /// Its bid and its other key's ask, 10⁹ GPU-hours at $1,000,000 (and the same key's).
    WashTrade,
    /// 200 keys, 100 orders each: bids at a cent, asks at $999.
    BookFlood,
    /// Every hour, 40 GPU-hours at $20 (above every honest bid), as far as its deposit goes.
    DepositBuyer,
}

/// The public key (hex) of an Ed25519 key made from a name.
fn key(name: &str) -> String {
    public(name).as_str().to_string()
}

fn public(name: &str) -> pog_signed::PublicKey {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let mut seed = [0u8; 32];
    for (i, chunk) in seed.chunks_mut(8).enumerate() {
        chunk.copy_from_slice(&(h.wrapping_add(i as u64)).to_le_bytes());
    }
    pog_signed::Identity::from_seed(seed).public_key()
}

fn gpu(i: u64) -> GpuUuid {
    GpuUuid::new(format!("GPU-00000000-0000-0000-0000-{i:012}")).expect("a valid UUID")
}

fn order(id: &str, owner: &str, side: Side, hours: u64, usd: f64) -> Order {
    Order::new(
        OrderId::new(id).expect("a valid id"),
        owner,
        side,
        GpuClass::new("H200 SXM").expect("a class"),
        hours,
        Price::from_usd(usd).expect("a price"),
    )
    .expect("a valid order")
}

/// The validator's side of one market run.
struct Market {
    book: Book,
    class: GpuClass,
    backed: bool,
    standing: BTreeMap<GpuUuid, Standing>,
    deposits: BTreeMap<String, u128>,
    refused: Vec<String>,
}

impl Market {
    fn new(backed: bool) -> Market {
        let class = GpuClass::new("H200 SXM").expect("a class");
        let mut deposits: BTreeMap<String, u128> = (0..RENTERS)
            .map(|r| (key(&format!("renter{r}")), 1_000 * 1_000_000))
            .collect();
        deposits.insert(key("actor"), ACTOR_DEPOSIT);
        Market {
            book: Book::new([class.clone()]),
            class,
            backed,
            standing: BTreeMap::new(),
            deposits,
            refused: Vec::new(),
        }
    }

    /// The providers' GPUs, each proven at `now`.
    fn prove(&mut self, now: u64) {
        self.standing = (0..GPUS)
            .map(|i| {
                let standing = Standing {
                    agent: public(&format!("provider{i}")),
                    model: "H200 SXM".into(),
                    simulated: false,
                    latest_proof: Some(LatestProof {
                        record_id: 1,
                        accepted: true,
                        proves_model: true,
                        recorded_at_ms: now,
                    }),
                };
                (gpu(i), standing)
            })
            .collect();
    }

    /// What `owner`'s leases not yet paid hold of its deposit (a day's settlement period and
    /// its grace: every lease that ended less than 25 hours ago).
    fn held(&self, owner: &str, now: u64) -> u128 {
        self.book
            .history()
            .iter()
            .flat_map(|r| &r.leases)
            .filter(|l| l.renter == owner && l.end_ms + 25 * HOUR_MS > now)
            .map(|l| u128::from(l.hours) * u128::from(l.price_micro_usd))
            .sum()
    }

    /// Submits as the validator would; a refusal is noted by the rule that refused it.
    fn submit(&mut self, o: Order, expires: u64, now: u64) -> bool {
        let why = self.admit(&o, expires, now).err();
        let why = why.or_else(|| match self.book.submit(o, expires, now) {
            Ok(_) => None,
            Err(pog_market::BookError::SelfTrade { .. }) => Some("self-trade (book)"),
            Err(_) => Some("book"),
        });
        match why {
            None => true,
            Some(rule) => {
                if !self.refused.iter().any(|r| r == rule) {
                    self.refused.push(rule.to_string());
                }
                false
            }
        }
    }

    fn admit(&self, o: &Order, expires: u64, now: u64) -> Result<(), &'static str> {
        if !self.backed {
            return Ok(());
        }
        let rules = BackingRules::default();
        check_order(o, expires, now, &self.standing, &rules)
            .map_err(|_| "ask backing (403/400)")?;
        if o.side() == Side::Bid {
            let deposit = self.deposits.get(o.owner()).copied().unwrap_or(0);
            let committed = self.book.bid_commitment_of(o.owner()) + self.held(o.owner(), now);
            check_bid_covered(o, committed, deposit).map_err(|_| "deposit (402)")?;
        }
        Ok(())
    }
}

/// One hour of honest trading: every provider asks its GPU's hour, every renter bids one.
fn honest_hour(m: &mut Market, hour: u64, now: u64) {
    let expires = now + HOUR_MS;
    for i in 0..GPUS {
        let ask = order(
            &format!("a{hour}"),
            &key(&format!("provider{i}")),
            Side::Ask,
            1,
            3.0 + 0.05 * i as f64,
        )
        .offering(vec![gpu(i)])
        .expect("an ask");
        m.submit(ask, expires, now);
    }
    for r in 0..RENTERS {
        let price = 3.5 + 0.05 * ((r + hour) % RENTERS) as f64;
        let bid = order(
            &format!("b{hour}"),
            &key(&format!("renter{r}")),
            Side::Bid,
            1,
            price,
        );
        m.submit(bid, expires, now);
    }
}

/// The actor's move in `hour` of the second day.
fn attack_hour(m: &mut Market, attack: Attack, hour: u64, now: u64) {
    let actor = key("actor");
    let id = |what: &str| format!("{what}{hour}");
    match attack {
        Attack::None => {}
        Attack::GiantBid if hour == HOURS / 2 => {
            let bid = order("giant", &actor, Side::Bid, 1_000_000_000, 0.01);
            m.submit(bid, now + 30 * 24 * HOUR_MS - 1, now);
        }
        Attack::GiantAskThenCancel if hour == HOURS / 2 => {
            let ask = order("giant", &actor, Side::Ask, 1_000_000_000, 1_000_000.0)
                .offering(vec![gpu(999)])
                .expect("an ask");
            m.submit(ask, now + 30 * 24 * HOUR_MS - 1, now);
            // Cancelled before the hour's clearing.
            let _ = m
                .book
                .cancel(&OrderId::new("giant").expect("an id"), &actor, None, now);
        }
        Attack::WashTrade => {
            let other = key("actor-2");
            let ask = order(&id("wa"), &other, Side::Ask, 1_000_000_000, 1_000_000.0)
                .offering(vec![gpu(1000 + hour)])
                .expect("an ask");
            m.submit(ask, now + HOUR_MS, now);
            let bid = order(&id("wb"), &actor, Side::Bid, 1_000_000_000, 1_000_000.0);
            m.submit(bid, now + HOUR_MS, now);
            // The same key's own ask: a key never trades with itself.
            let own = order(&id("wo"), &actor, Side::Ask, 1, 1.0)
                .offering(vec![gpu(2000 + hour)])
                .expect("an ask");
            m.submit(own, now + HOUR_MS, now);
        }
        Attack::BookFlood if hour == HOURS / 2 => {
            for k in 0..200 {
                let owner = key(&format!("flood{k}"));
                for n in 0..100u64 {
                    let o = if n % 2 == 0 {
                        order(&format!("f{n}"), &owner, Side::Bid, 1_000, 0.01)
                    } else {
                        order(&format!("f{n}"), &owner, Side::Ask, 1, 999.0)
                            .offering(vec![gpu(10_000 + k * 100 + n)])
                            .expect("an ask")
                    };
                    m.submit(o, now + 30 * 24 * HOUR_MS - 1, now);
                }
            }
        }
        Attack::DepositBuyer => {
            let bid = order(&id("buy"), &actor, Side::Bid, GPUS, 20.0);
            m.submit(bid, now + HOUR_MS, now);
        }
        _ => {}
    }
}

/// What one run ends with: the reference H200's posted price, the GPU-hours of honest leases
/// the actor displaced (against the honest run), and the refusals met.
struct Run {
    price: Price,
    leases: Vec<Lease>,
    refused: Vec<String>,
}

fn run(attack: Attack, backed: bool) -> Run {
    let config = Config::embedded();
    let db = SpecDb::embedded();
    let mut m = Market::new(backed);
    let mut now = START_MS;
    for hour in 0..HOURS {
        now = START_MS + hour * HOUR_MS;
        m.prove(now);
        honest_hour(&mut m, hour, now);
        if hour >= HOURS / 2 {
            attack_hour(&mut m, attack, hour, now);
        }
        let class = m.class.clone();
        m.book
            .clear(&class, Mechanism::UniformPrice, now + 1)
            .expect("a class the book trades");
    }
    let end = now + HOUR_MS;
    let leases: Vec<(u64, Lease)> = m
        .book
        .history()
        .iter()
        .flat_map(|r| r.leases.iter().map(move |l| (r.at_ms, l.clone())))
        .collect();
    let samples: Vec<LeaseSample<'_>> = leases
        .iter()
        .map(|(at, lease)| LeaseSample {
            lease,
            cleared_at_ms: *at,
        })
        .collect();
    let activity = ClassActivity {
        leases: &samples,
        proven_gpus: GPUS,
        base_usd: model_base_usd("H200 SXM", &config, db).expect("priced"),
    };
    let (state, _) = class_state(&activity, end, &config);
    let h200 = gpu_score(
        &spec_figures(db.by_model("H200 SXM").expect("a model"), &config, db).expect("figures"),
        &config.score,
    );
    let price = quote(&h200, "datacenter", &state, 1.0, &config)
        .expect("a quote")
        .price;
    Run {
        price,
        leases: leases.into_iter().map(|(_, l)| l).collect(),
        refused: m.refused,
    }
}

/// GPU-hours of honest leases in `base` (touching the last day) that `attacked` lacks.
fn displaced(base: &[Lease], attacked: &[Lease], from: u64) -> u64 {
    let honest = |l: &&Lease| l.renter != key("actor") && l.end_ms > from;
    let hours = |ls: &[Lease]| -> BTreeMap<String, u64> {
        let mut per: BTreeMap<String, u64> = BTreeMap::new();
        for l in ls.iter().filter(honest) {
            *per.entry(l.renter.clone()).or_default() += l.hours;
        }
        per
    };
    let (before, after) = (hours(base), hours(attacked));
    before
        .iter()
        .map(|(r, h)| h.saturating_sub(after.get(r).copied().unwrap_or(0)))
        .sum()
}

fn main() {
    let config = Config::embedded();
    let available = (GPUS * config.price.window_hours) as f64;
    let from = START_MS + HOURS * HOUR_MS - config.price.window_hours * HOUR_MS;
    println!(
        "{GPUS} proven H200s, {RENTERS} honest renters, {HOURS} hourly clearings; the actor: one key with a ${} deposit, no GPUs",
        ACTOR_DEPOSIT / 1_000_000
    );
    println!(
        "bound with nothing displaced: ×{:.3} (ln {:.4})",
        one_actor_bound(&config, 0.0).exp(),
        one_actor_bound(&config, 0.0)
    );
    println!(
        "| attack | escrow | refused by | honest price | attacked | move (ln) | displaced GPU-h | bound (ln) | move / bound |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for backed in [true, false] {
        let base = run(Attack::None, backed);
        for attack in [
            Attack::GiantBid,
            Attack::GiantAskThenCancel,
            Attack::WashTrade,
            Attack::BookFlood,
            Attack::DepositBuyer,
        ] {
            let attacked = run(attack, backed);
            let moved = (attacked.price.micro_usd() as f64 / base.price.micro_usd() as f64).ln();
            let x = displaced(&base.leases, &attacked.leases, from);
            let bound = one_actor_bound(&config, x as f64 / available);
            let refused: Vec<&str> = attacked
                .refused
                .iter()
                .filter(|r| !base.refused.contains(r))
                .map(String::as_str)
                .collect();
            let refused = if refused.is_empty() {
                "-".to_string()
            } else {
                refused.join(", ")
            };
            println!(
                "| {attack:?} | {} | {refused} | ${} | ${} | {moved:+.4} | {x} | {bound:.4} | {:.2}{} |",
                if backed { "deposits" } else { "none (unbacked bids)" },
                base.price,
                attacked.price,
                moved.abs() / bound,
                if backed { "" } else { " (no bound without deposits)" },
            );
        }
    }
}
