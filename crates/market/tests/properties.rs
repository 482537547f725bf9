//! Properties of the clearing rules and the book over random markets of up to 50 orders:
//! agreement with a unit-by-unit reference, budget balance, individual rationality, no unit
//! allocated twice, market clearing for the uniform price, truthfulness for McAfee's rule, and
//! a book that conserves GPU-hours, never lets a key trade with itself nor two asks offer one
//! GPU at a time, and is unchanged by every refused request.

use std::collections::{BTreeSet, HashMap};

use pog_market::{
    mcafee, uniform_price, Book, BookError, Clearing, GpuClass, Mechanism, Order, OrderId, Price,
    Side,
};
use proptest::prelude::*;
use proptest::sample::Index;

const MECHANISMS: [Mechanism; 2] = [Mechanism::UniformPrice, Mechanism::McAfee];
const MAX: u64 = Price::MAX.micro_usd();

/// Prices in micro-dollars: mostly on a coarse grid (ties), some anywhere up to the ceiling.
fn price() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => (0u64..=12).prop_map(|p| p * 250_000),
        3 => 0u64..=5_000_000,
        1 => prop_oneof![Just(0), Just(MAX), 0..=MAX],
    ]
}

/// One side's orders as `(price in micro-dollars, quantity)`, in submission order.
type Spec = Vec<(u64, u64)>;

/// One side's orders.
fn side(max_orders: usize, max_quantity: u64) -> impl Strategy<Value = Spec> {
    prop::collection::vec((price(), 1..=max_quantity), 0..=max_orders)
}

/// A market of up to 50 orders: `(bids, asks)`.
fn market(max_quantity: u64) -> impl Strategy<Value = (Spec, Spec)> {
    (side(25, max_quantity), side(25, max_quantity))
}

fn class() -> GpuClass {
    GpuClass::new("H200 SXM").unwrap()
}

/// A distinct, valid owner key per number.
fn owner(n: usize) -> String {
    format!("{n:064x}")
}

/// Orders `b0, b1, …` or `a0, a1, …`, in this order (their submission sequence).
fn orders(side: Side, spec: &[(u64, u64)]) -> Vec<Order> {
    let prefix = if side == Side::Bid { "b" } else { "a" };
    spec.iter()
        .enumerate()
        .map(|(i, &(price, quantity))| {
            Order::new(
                OrderId::new(format!("{prefix}{i}")).unwrap(),
                owner(i),
                side,
                class(),
                quantity,
                Price::from_micro_usd(price).unwrap(),
            )
            .unwrap()
        })
        .collect()
}

fn clear(mechanism: Mechanism, bids: &[Order], asks: &[Order]) -> Clearing {
    match mechanism {
        Mechanism::UniformPrice => uniform_price(bids, asks),
        Mechanism::McAfee => mcafee(bids, asks),
    }
    .unwrap()
}

/// Units traded per order id.
fn traded(c: &Clearing) -> HashMap<&str, u64> {
    let mut traded = HashMap::new();
    for t in &c.trades {
        *traded.entry(t.bid.as_str()).or_insert(0) += t.quantity;
        *traded.entry(t.ask.as_str()).or_insert(0) += t.quantity;
    }
    traded
}

/// The rules written out unit by unit, as the docs state them: `(k, units, buyer price,
/// seller price, units per bid order, units per ask order)`.
type Reference = (u64, u64, Option<u64>, Option<u64>, Vec<u64>, Vec<u64>);

fn reference(mechanism: Mechanism, bids: &[(u64, u64)], asks: &[(u64, u64)]) -> Reference {
    let units = |spec: &[(u64, u64)]| -> Vec<(u64, usize)> {
        let mut units = Vec::new();
        for (i, &(price, quantity)) in spec.iter().enumerate() {
            units.extend((0..quantity).map(|_| (price, i)));
        }
        units
    };
    let mut b = units(bids);
    b.sort_by_key(|&(price, _)| std::cmp::Reverse(price)); // stable: ties keep submission order
    let mut s = units(asks);
    s.sort_by_key(|&(price, _)| price);
    let k = (0..b.len().min(s.len()))
        .take_while(|&i| b[i].0 >= s[i].0)
        .count();
    let (traded, buyer, seller) = if k == 0 {
        (0, 0, 0)
    } else {
        let (b_k, s_k) = (b[k - 1].0, s[k - 1].0);
        let (b_next, s_next) = (b.get(k).map(|u| u.0), s.get(k).map(|u| u.0));
        match mechanism {
            Mechanism::UniformPrice => {
                let low = b_next.map_or(s_k, |b| b.max(s_k));
                let high = s_next.map_or(b_k, |s| s.min(b_k));
                let p = (low + high) / 2;
                (k, p, p)
            }
            Mechanism::McAfee => match (b_next, s_next) {
                (Some(b), Some(s)) if s_k <= (b + s) / 2 && (b + s) / 2 <= b_k => {
                    (k, (b + s) / 2, (b + s) / 2)
                }
                _ => (k - 1, b_k, s_k),
            },
        }
    };
    let per_order = |units: &[(u64, usize)], n: usize| {
        let mut per = vec![0; n];
        for &(_, i) in &units[..traded] {
            per[i] += 1;
        }
        per
    };
    let priced = |p| (traded > 0).then_some(p);
    (
        k as u64,
        traded as u64,
        priced(buyer),
        priced(seller),
        per_order(&b, bids.len()),
        per_order(&s, asks.len()),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn clearings_follow_the_unit_by_unit_rules((bid_spec, ask_spec) in market(5)) {
        let (bids, asks) = (orders(Side::Bid, &bid_spec), orders(Side::Ask, &ask_spec));
        for mechanism in MECHANISMS {
            let c = clear(mechanism, &bids, &asks);
            let (k, units, buyer, seller, per_bid, per_ask) =
                reference(mechanism, &bid_spec, &ask_spec);
            prop_assert_eq!(c.mechanism, mechanism);
            prop_assert_eq!((c.efficient_units, c.units), (k, units));
            prop_assert_eq!(c.buyer_price.map(Price::micro_usd), buyer);
            prop_assert_eq!(c.seller_price.map(Price::micro_usd), seller);
            let traded = traded(&c);
            for (order, expected) in bids.iter().zip(&per_bid).chain(asks.iter().zip(&per_ask)) {
                let got = traded.get(order.id().as_str()).copied().unwrap_or(0);
                prop_assert_eq!(got, *expected, "{}", order.id());
            }
        }
    }

    #[test]
    fn budgets_balance((bid_spec, ask_spec) in market(5)) {
        let (bids, asks) = (orders(Side::Bid, &bid_spec), orders(Side::Ask, &ask_spec));
        for mechanism in MECHANISMS {
            let c = clear(mechanism, &bids, &asks);
            let total = |f: fn(&pog_market::Trade) -> Price| -> u128 {
                c.trades
                    .iter()
                    .map(|t| u128::from(f(t).micro_usd()) * u128::from(t.quantity))
                    .sum()
            };
            let (paid, received) = (total(|t| t.buyer_pays), total(|t| t.seller_gets));
            prop_assert!(paid >= received);
            prop_assert_eq!(paid - received, c.surplus);
            if mechanism == Mechanism::UniformPrice {
                prop_assert_eq!(paid, received);
            }
            for t in &c.trades {
                prop_assert_eq!(Some(t.buyer_pays), c.buyer_price);
                prop_assert_eq!(Some(t.seller_gets), c.seller_price);
            }
        }
    }

    #[test]
    fn nobody_trades_at_a_loss((bid_spec, ask_spec) in market(5)) {
        let (bids, asks) = (orders(Side::Bid, &bid_spec), orders(Side::Ask, &ask_spec));
        let by_id: HashMap<&str, &Order> =
            bids.iter().chain(&asks).map(|o| (o.id().as_str(), o)).collect();
        for mechanism in MECHANISMS {
            for t in &clear(mechanism, &bids, &asks).trades {
                prop_assert!(t.buyer_pays <= by_id[t.bid.as_str()].price());
                prop_assert!(t.seller_gets >= by_id[t.ask.as_str()].price());
            }
        }
    }

    #[test]
    fn no_unit_is_allocated_twice((bid_spec, ask_spec) in market(5)) {
        let (bids, asks) = (orders(Side::Bid, &bid_spec), orders(Side::Ask, &ask_spec));
        for mechanism in MECHANISMS {
            let c = clear(mechanism, &bids, &asks);
            prop_assert!(c.trades.iter().all(|t| t.quantity > 0));
            prop_assert!(c.trades.iter().all(|t| t.bid.as_str().starts_with('b')));
            prop_assert!(c.trades.iter().all(|t| t.ask.as_str().starts_with('a')));
            prop_assert_eq!(c.trades.iter().map(|t| t.quantity).sum::<u64>(), c.units);
            let traded = traded(&c);
            for order in bids.iter().chain(&asks) {
                let got = traded.get(order.id().as_str()).copied().unwrap_or(0);
                prop_assert!(got <= order.quantity(), "{}: {got}", order.id());
            }
            prop_assert!(c.units <= c.efficient_units);
            if mechanism == Mechanism::McAfee {
                prop_assert!(c.units + 1 >= c.efficient_units);
            }
        }
    }

    /// At the uniform price nobody left out would trade: every unfilled bid is at most `p`
    /// and every unfilled ask at least `p`.
    #[test]
    fn the_uniform_price_clears_the_market((bid_spec, ask_spec) in market(5)) {
        let (bids, asks) = (orders(Side::Bid, &bid_spec), orders(Side::Ask, &ask_spec));
        let c = clear(Mechanism::UniformPrice, &bids, &asks);
        let traded = traded(&c);
        let unfilled = |o: &&Order| traded.get(o.id().as_str()).copied().unwrap_or(0) < o.quantity();
        match c.buyer_price {
            Some(p) => {
                prop_assert!(bids.iter().filter(unfilled).all(|o| o.price() <= p));
                prop_assert!(asks.iter().filter(unfilled).all(|o| o.price() >= p));
            }
            None => {
                let best_bid = bids.iter().map(Order::price).max();
                let best_ask = asks.iter().map(Order::price).min();
                prop_assert!(best_bid.zip(best_ask).is_none_or(|(b, a)| b < a));
            }
        }
    }

    /// A one-unit renter with value `value`, among multi-unit orders, gains nothing by bidding
    /// anything else: random reports, every price in the market and its neighbours, 0, the
    /// ceiling.
    #[test]
    fn mcafee_is_truthful_for_renters(
        (bid_spec, ask_spec) in market(4),
        at in any::<Index>(),
        value in price(),
        lies in prop::collection::vec(price(), 1..8),
    ) {
        let at = at.index(bid_spec.len() + 1);
        let utility = |report: u64| -> i128 {
            let mut spec = bid_spec.clone();
            spec.insert(at, (report, 1));
            let bids = orders(Side::Bid, &spec);
            let me = bids[at].id().clone();
            let c = clear(Mechanism::McAfee, &bids, &orders(Side::Ask, &ask_spec));
            c.trades.iter().find(|t| t.bid == me).map_or(0, |t| {
                i128::from(value) - i128::from(t.buyer_pays.micro_usd())
            })
        };
        let honest = utility(value);
        for report in reports(&bid_spec, &ask_spec, &lies) {
            prop_assert!(utility(report) <= honest, "value {value}, report {report}");
        }
    }

    /// A one-unit provider with cost `cost` gains nothing by asking anything else.
    #[test]
    fn mcafee_is_truthful_for_providers(
        (bid_spec, ask_spec) in market(4),
        at in any::<Index>(),
        cost in price(),
        lies in prop::collection::vec(price(), 1..8),
    ) {
        let at = at.index(ask_spec.len() + 1);
        let utility = |report: u64| -> i128 {
            let mut spec = ask_spec.clone();
            spec.insert(at, (report, 1));
            let asks = orders(Side::Ask, &spec);
            let me = asks[at].id().clone();
            let c = clear(Mechanism::McAfee, &orders(Side::Bid, &bid_spec), &asks);
            c.trades.iter().find(|t| t.ask == me).map_or(0, |t| {
                i128::from(t.seller_gets.micro_usd()) - i128::from(cost)
            })
        };
        let honest = utility(cost);
        for report in reports(&bid_spec, &ask_spec, &lies) {
            prop_assert!(utility(report) <= honest, "cost {cost}, report {report}");
        }
    }

    #[test]
    fn prices_read_back_from_text_and_floats(micro in 0..=MAX) {
        let price = Price::from_micro_usd(micro).unwrap();
        prop_assert_eq!(price.to_string().parse::<Price>(), Ok(price));
        prop_assert_eq!(Price::from_usd(micro as f64 / 1e6), Ok(price));
    }
}

/// Misreports worth trying: `lies`, 0, the ceiling, and every price in the market with its
/// neighbours (where thresholds lie).
fn reports(bids: &[(u64, u64)], asks: &[(u64, u64)], lies: &[u64]) -> BTreeSet<u64> {
    let mut reports: BTreeSet<u64> = lies.iter().copied().chain([0, MAX]).collect();
    for &(p, _) in bids.iter().chain(asks) {
        reports.extend([p.saturating_sub(1), p, (p + 1).min(MAX)]);
    }
    reports
}

/// A request to the book, with small ranges so that ids repeat, classes are unknown, cancels
/// come from the wrong key, clearings meet crossed books and orders expire between requests.
#[derive(Debug, Clone)]
enum Op {
    Submit {
        id: u8,
        owner: u8,
        bid: bool,
        class: u8,
        quantity: u64,
        price: u64,
        /// Seconds it stays open (0: expired on arrival).
        lifetime: u64,
        /// An ask offers GPU `GPU-{gpu}` (none from 5 up; a bid never does).
        gpu: u8,
    },
    Cancel {
        id: u8,
        requester: u8,
    },
    Clear {
        class: u8,
        mcafee: bool,
    },
    /// Seconds pass before the next request.
    Wait(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..40, 0u8..3, any::<bool>(), 0u8..3, 1u64..=5, price(), 0u64..6, 0u8..8).prop_map(
            |(id, owner, bid, class, quantity, price, lifetime, gpu)| Op::Submit { id, owner, bid, class, quantity, price, lifetime, gpu }
        ),
        2 => (0u8..40, 0u8..3).prop_map(|(id, requester)| Op::Cancel { id, requester }),
        1 => (0u8..3, any::<bool>()).prop_map(|(class, mcafee)| Op::Clear { class, mcafee }),
        1 => (0u64..3).prop_map(Op::Wait),
    ]
}

/// `order` offering `GPU-{gpu}` if it is an ask and `gpu` is below 5.
fn offering(order: Order, gpu: u8) -> Order {
    if order.side() == Side::Bid || gpu >= 5 {
        return order;
    }
    let gpu = pog_signed::GpuUuid::new(format!("GPU-{gpu}")).unwrap();
    order.offering(vec![gpu]).unwrap()
}

/// Classes 0 and 1 are traded; 2 is not.
fn class_named(n: u8) -> GpuClass {
    GpuClass::new(["H200 SXM", "L4", "B200"][usize::from(n)]).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Every request either succeeds as a model of the book says it should, or fails and
    /// changes nothing but the time; orders leave at their expiry and their ids can be used
    /// again after it; GPU-hours are conserved per owner and id (filled + open + cancelled +
    /// expired = submitted); a uniform-price clearing leaves its class uncrossed.
    #[test]
    fn the_book_conserves_gpu_hours_and_refusals_change_nothing(
        ops in prop::collection::vec(op(), 1..60),
    ) {
        let mut book = Book::new([class_named(0), class_named(1)]);
        let mut now: u64 = 1_800_000_000_000;
        // Orders the book holds, by (owner, id) → (class, expiry); the open ones; GPU-hours
        // per (owner, id) submitted, cancelled and expired, over every order that had it.
        let mut held: HashMap<Key, (u8, u64)> = HashMap::new();
        let mut open: BTreeSet<Key> = BTreeSet::new();
        let (mut submitted, mut cancelled, mut expired): (Hours, Hours, Hours) = Default::default();
        let key = |who: u8, id: u8| (owner(who.into()), OrderId::new(format!("o{id}")).unwrap());
        for op in ops {
            if let Op::Wait(seconds) = op {
                now += seconds * 1000;
                continue;
            }
            // What the request's time expires, in the model: open orders leave with what
            // they had left, and every order whose expiry has come is forgotten.
            for (k, _) in held.iter().filter(|(_, &(_, expiry))| expiry <= now) {
                if open.remove(k) {
                    *expired.entry(k.clone()).or_insert(0) += book.get(&k.0, &k.1).unwrap().quantity();
                }
            }
            held.retain(|_, &mut (_, expiry)| expiry > now);
            let mut before = book.clone();
            before.expire(now);
            let refused = match op {
                Op::Submit { id, owner: who, bid, class, quantity, price, lifetime, gpu } => {
                    let k = key(who, id);
                    let side = if bid { Side::Bid } else { Side::Ask };
                    let order = offering(Order::new(
                        k.1.clone(), k.0.clone(), side, class_named(class), quantity,
                        Price::from_micro_usd(price).unwrap(),
                    ).unwrap(), gpu);
                    let price = order.price();
                    let gpus = order.gpus().to_vec();
                    let expiry = now + lifetime * 1000;
                    let result = book.submit(order, expiry, now);
                    let refused = result.is_err();
                    // The owner's open orders on the other side of the class that this one
                    // would trade with, and the open asks offering its GPU.
                    let other = if bid { Side::Ask } else { Side::Bid };
                    let crossed: Vec<OrderId> = before
                        .open(&class_named(class), other)
                        .filter(|o| o.owner() == k.0)
                        .filter(|o| if bid { o.price() <= price } else { o.price() >= price })
                        .map(|o| o.id().clone())
                        .collect();
                    let offered_by = gpus.first().and_then(|g| before.offering(g));
                    if class == 2 {
                        prop_assert_eq!(result, Err(BookError::UnknownClass(class_named(2))));
                    } else if lifetime == 0 {
                        prop_assert_eq!(result, Err(BookError::Expired { id: k.1, expires_at_ms: expiry, now_ms: now }));
                    } else if held.contains_key(&k) {
                        prop_assert_eq!(result, Err(BookError::DuplicateId(k.1)));
                    } else if let Some((_, by)) = offered_by {
                        prop_assert_eq!(result, Err(BookError::GpuOffered { gpu: gpus[0].clone(), by: by.clone() }));
                    } else if !crossed.is_empty() {
                        prop_assert!(
                            matches!(&result, Err(BookError::SelfTrade { other, .. }) if crossed.contains(other)),
                            "{:?}", result
                        );
                    } else {
                        prop_assert!(result.is_ok());
                        held.insert(k.clone(), (class, expiry));
                        *submitted.entry(k.clone()).or_insert(0) += quantity;
                        open.insert(k);
                    }
                    refused
                }
                Op::Cancel { id, requester } => {
                    // Another key's order of the same id is not the requester's to cancel.
                    let k = key(requester, id);
                    let result = book.cancel(&k.1, &k.0.to_uppercase(), None, now);
                    let refused = result.is_err();
                    match held.get(&k) {
                        None => prop_assert_eq!(result, Err(BookError::UnknownOrder(k.1))),
                        Some(_) if !open.contains(&k) => {
                            prop_assert_eq!(result, Err(BookError::NotOpen(k.1)))
                        }
                        Some(_) => {
                            let order = result.unwrap();
                            *cancelled.entry(k.clone()).or_insert(0) += order.quantity();
                            open.remove(&k);
                        }
                    }
                    refused
                }
                Op::Clear { class, mcafee } => {
                    let mechanism = if mcafee { Mechanism::McAfee } else { Mechanism::UniformPrice };
                    let result = book.clear(&class_named(class), mechanism, now).cloned();
                    let refused = result.is_err();
                    if class == 2 {
                        prop_assert_eq!(result, Err(BookError::UnknownClass(class_named(2))));
                    } else {
                        prop_assert!(result.is_ok());
                        open.retain(|k| book.get(&k.0, &k.1).is_some());
                        if !mcafee {
                            let best_bid = book.open(&class_named(class), Side::Bid).map(Order::price).max();
                            let best_ask = book.open(&class_named(class), Side::Ask).map(Order::price).min();
                            prop_assert!(best_bid.zip(best_ask).is_none_or(|(b, a)| b < a));
                        }
                    }
                    refused
                }
                Op::Wait(_) => unreachable!("handled above"),
            };
            if refused {
                prop_assert_eq!(&book, &before);
            }
        }
        let mut filled: Hours = HashMap::new();
        for record in book.history() {
            for t in &record.clearing.trades {
                prop_assert_ne!(&t.bid_owner, &t.ask_owner, "a key traded with itself");
                *filled.entry((t.bid_owner.clone(), t.bid.clone())).or_insert(0) += t.quantity;
                *filled.entry((t.ask_owner.clone(), t.ask.clone())).or_insert(0) += t.quantity;
            }
        }
        let hours = |map: &Hours, k: &Key| map.get(k).copied().unwrap_or(0);
        for (k, &quantity) in &submitted {
            let resting = book.get(&k.0, &k.1).map_or(0, Order::quantity);
            prop_assert_eq!(open.contains(k), resting > 0);
            let accounted = hours(&filled, k) + resting + hours(&cancelled, k) + hours(&expired, k);
            prop_assert_eq!(accounted, quantity, "{:?}", k);
            if let Some(order) = book.get(&k.0, &k.1) {
                prop_assert_eq!(order.class(), &class_named(held[k].0));
            }
        }
        prop_assert_eq!(book.len(), open.len());
        // Each GPU is offered by one open ask at most, and the book knows which.
        let mut offered = HashMap::new();
        for class in [class_named(0), class_named(1)] {
            for ask in book.open(&class, Side::Ask) {
                for g in ask.gpus() {
                    prop_assert!(offered.insert(g.clone(), ask.id().clone()).is_none());
                    prop_assert_eq!(book.offering(g).map(|(_, id)| id), Some(ask.id()));
                }
            }
        }
        // A GPU no open ask offers is free, or held by an ask some of whose hours traded,
        // until that ask expires.
        let gpus: Vec<_> = (0..5)
            .map(|g| pog_signed::GpuUuid::new(format!("GPU-{g}")).unwrap())
            .collect();
        for g in &gpus {
            if let (false, Some((owner, id))) = (offered.contains_key(g), book.offering(g)) {
                prop_assert!(book.get(owner, id).is_none());
                let sold = book.history().iter().flat_map(|r| &r.clearing.trades).any(|t| {
                    t.ask_owner == owner && &t.ask == id
                });
                prop_assert!(sold, "{:?} held by {} with nothing traded", g, id);
            }
        }
        let mut later = book.clone();
        later.expire(now + 10_000);
        prop_assert!(gpus.iter().all(|g| later.offering(g).is_none()));
        for who in 0..3u8 {
            let theirs = open.iter().filter(|k| k.0 == owner(who.into())).count();
            prop_assert_eq!(book.open_by(&owner(who.into()).to_uppercase()), theirs);
        }
    }
}

/// An order's name in the model: its owner's key and its id.
type Key = (String, OrderId);

/// A request as it reaches the book: an order with the expiry its owner signed (made from
/// an [`Op`] at the clock's time then), a cancellation, or a clearing.
#[derive(Debug, Clone)]
enum Request {
    Submit(Order, u64),
    Cancel(OrderId, String),
    Clear(GpuClass, Mechanism),
}

impl Request {
    /// The request `op` makes when the clock reads `clock_ms` (none for a wait).
    fn of(op: &Op, clock_ms: u64) -> Option<Request> {
        Some(match *op {
            Op::Submit {
                id,
                owner: who,
                bid,
                class,
                quantity,
                price,
                lifetime,
                gpu,
            } => {
                let side = if bid { Side::Bid } else { Side::Ask };
                let order = offering(
                    Order::new(
                        OrderId::new(format!("o{id}")).unwrap(),
                        owner(who.into()),
                        side,
                        class_named(class),
                        quantity,
                        Price::from_micro_usd(price).unwrap(),
                    )
                    .unwrap(),
                    gpu,
                );
                Request::Submit(order, clock_ms + lifetime * 1000)
            }
            Op::Cancel { id, requester } => Request::Cancel(
                OrderId::new(format!("o{id}")).unwrap(),
                owner(requester.into()),
            ),
            Op::Clear { class, mcafee } => {
                let mechanism = if mcafee {
                    Mechanism::McAfee
                } else {
                    Mechanism::UniformPrice
                };
                Request::Clear(class_named(class), mechanism)
            }
            Op::Wait(_) => return None,
        })
    }

    /// Applies the request to `book` at `at_ms`; whether the book took it.
    fn apply(&self, book: &mut Book, at_ms: u64) -> bool {
        match self {
            Request::Submit(order, expires_at_ms) => {
                book.submit(order.clone(), *expires_at_ms, at_ms).is_ok()
            }
            Request::Cancel(id, requester) => book.cancel(id, requester, None, at_ms).is_ok(),
            Request::Clear(class, mechanism) => book.clear(class, *mechanism, at_ms).is_ok(),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// What a market's store does: keep the requests the book took, each with the book's time
    /// just after, and replay them on a fresh book at those times. Whatever the clock did (it
    /// jumps back and forth here) and whatever was refused in between (refusals let time pass
    /// too), the replay rebuilds the same book.
    #[test]
    fn replaying_the_taken_requests_at_the_books_times_rebuilds_the_book(
        ops in prop::collection::vec((op(), -3i64..6), 1..80),
    ) {
        let mut live = Book::new([class_named(0), class_named(1)]);
        let mut clock: i64 = 1_800_000_000_000;
        let mut stored = Vec::new();
        for (op, step) in &ops {
            clock += step * 1000;
            let Some(request) = Request::of(op, clock as u64) else { continue };
            if request.apply(&mut live, clock as u64) {
                stored.push((request, live.now_ms()));
            }
        }
        let mut replayed = Book::new([class_named(0), class_named(1)]);
        for (request, at_ms) in &stored {
            prop_assert!(request.apply(&mut replayed, *at_ms), "{:?} at {} was taken live", request, at_ms);
        }
        replayed.expire(live.now_ms());
        prop_assert_eq!(replayed, live);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// What a market's store does to stay bounded: a snapshot of the book at any point,
    /// through JSON, then the requests taken after it, replayed at their times, rebuild the
    /// same book as replaying everything (the snapshot itself restores to the book it was
    /// taken of).
    #[test]
    fn a_snapshot_and_the_requests_after_it_rebuild_the_book(
        ops in prop::collection::vec((op(), -3i64..6), 1..80),
        cut in 0usize..80,
    ) {
        let mut live = Book::new([class_named(0), class_named(1)]);
        let mut clock: i64 = 1_800_000_000_000;
        let mut snapshot = None;
        let mut tail = Vec::new();
        for (i, (op, step)) in ops.iter().enumerate() {
            if i == cut {
                let json = serde_json::to_string(&live.snapshot()).unwrap();
                let restored = Book::from_snapshot(serde_json::from_str(&json).unwrap()).unwrap();
                prop_assert_eq!(&restored, &live);
                snapshot = Some(restored);
            }
            clock += step * 1000;
            let Some(request) = Request::of(op, clock as u64) else { continue };
            if request.apply(&mut live, clock as u64) && snapshot.is_some() {
                tail.push((request, live.now_ms()));
            }
        }
        let mut rebuilt = snapshot.unwrap_or_else(|| Book::from_snapshot(live.snapshot()).unwrap());
        for (request, at_ms) in &tail {
            prop_assert!(request.apply(&mut rebuilt, *at_ms), "{:?} at {} was taken live", request, at_ms);
        }
        rebuilt.expire(live.now_ms());
        prop_assert_eq!(rebuilt, live);
    }
}

/// GPU-hours per order.
type Hours = HashMap<Key, u64>;
