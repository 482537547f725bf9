//! The two clearing rules for one GPU class: [`uniform_price`] and [`mcafee`].
//!
//! Both see each order as `quantity` unit orders (one GPU-hour each) that share its price, rank
//! bid units by price, highest first, and ask units by price, lowest first, ties going to the
//! order earlier in the slice (the [`Book`](crate::Book) passes orders in submission order).
//! With `b_1 ≥ b_2 ≥ …` the ranked bid units and `s_1 ≤ s_2 ≤ …` the ask units, `k` is the
//! number of efficient trades: the largest `k` with `b_k ≥ s_k`. Units trade pairwise in rank
//! order (the i-th bid unit with the i-th ask unit), so the units that trade are always the
//! highest bids and the lowest asks; a [`Trade`] gathers the consecutive units of one bid
//! order and one ask order.
//!
//! All amounts are integer micro-dollars; the only rounding is a midpoint's, down to the
//! micro-dollar.

use std::borrow::Borrow;
use std::cmp::Reverse;
use std::collections::HashSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::order::{GpuClass, Order, OrderId, Side};
use crate::price::Price;

/// Which rule clears a market.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Mechanism {
    /// [`uniform_price`]: every efficient trade, at one market-clearing price.
    #[serde(rename = "uniform_price")]
    UniformPrice,
    /// [`mcafee`]: McAfee's truthful trade-reduction double auction.
    #[serde(rename = "mcafee")]
    McAfee,
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Mechanism::UniformPrice => "uniform_price",
            Mechanism::McAfee => "mcafee",
        })
    }
}

/// Units of one bid order traded with one ask order, with the price per GPU-hour each side
/// settles at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trade {
    /// The bid order (the renter's id for it).
    pub bid: OrderId,
    /// The renter: the bid's owner key (empty in a clearing from before ids were per owner).
    #[serde(default)]
    pub bid_owner: String,
    /// The ask order (the provider's id for it).
    pub ask: OrderId,
    /// The provider: the ask's owner key (empty in a clearing from before ids were per owner).
    #[serde(default)]
    pub ask_owner: String,
    /// GPU-hours traded.
    pub quantity: u64,
    /// What the buyer pays per GPU-hour; never more than its bid.
    #[serde(rename = "buyer_pays_micro_usd")]
    pub buyer_pays: Price,
    /// What the seller receives per GPU-hour; never less than its ask.
    #[serde(rename = "seller_gets_micro_usd")]
    pub seller_gets: Price,
}

/// The outcome of clearing one class's market once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Clearing {
    /// The rule that cleared it.
    pub mechanism: Mechanism,
    /// `k`: the GPU-hours that could trade with bid ≥ ask (the efficient quantity).
    pub efficient_units: u64,
    /// GPU-hours that did trade: `k`, or `k − 1` where McAfee's rule reduced a trade.
    pub units: u64,
    /// What every buyer pays per GPU-hour; `None` when nothing traded.
    #[serde(rename = "buyer_price_micro_usd")]
    pub buyer_price: Option<Price>,
    /// What every seller receives per GPU-hour; `None` when nothing traded. Equal to
    /// `buyer_price` except where McAfee's rule reduced a trade.
    #[serde(rename = "seller_price_micro_usd")]
    pub seller_price: Option<Price>,
    /// Buyers' payments less sellers' receipts, kept by the market: `(buyer_price −
    /// seller_price) × units`, zero under the uniform price.
    #[serde(rename = "surplus_micro_usd")]
    pub surplus: u128,
    /// The trades, best-ranked bid first.
    pub trades: Vec<Trade>,
}

/// Why orders handed to [`uniform_price`] or [`mcafee`] cannot be cleared together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClearError {
    /// An order was passed on the wrong side (an ask among the bids, or the reverse).
    #[error("order {id} is not a {expected}")]
    WrongSide {
        /// The misplaced order.
        id: OrderId,
        /// The side it was passed as.
        expected: Side,
    },
    /// Orders of different GPU classes were passed to one clearing.
    #[error("order {id} is for class {found}, not {expected} like the first order")]
    MixedClasses {
        /// The odd order out.
        id: OrderId,
        /// The first order's class.
        expected: GpuClass,
        /// This order's class.
        found: GpuClass,
    },
    /// Two orders of one owner share an id, so the trades could not say which one traded.
    #[error("order id {0} appears twice for one owner")]
    DuplicateId(OrderId),
}

/// Clears `bids` against `asks` (one GPU class) in a multi-unit uniform-price auction.
///
/// The `k` efficient units all trade, at one price `p` paid by every buyer and received by
/// every seller: the midpoint of the interval of market-clearing prices,
/// `[max(s_k, b_{k+1}), min(b_k, s_{k+1})]` (a missing `b_{k+1}` or `s_{k+1}` leaves its
/// end at `s_k` or `b_k`), rounded down to the micro-dollar. Why this rule:
///
/// - Every price in that interval is a competitive equilibrium: each trading renter's bid is at
///   least `p`, each trading provider's ask at most `p`, no renter left out bid above `p` and
///   no provider left out asked below it. Nobody priced out would have traded at the market's
///   price, and nobody trading would rather not. The midpoint of the marginal pair,
///   `(b_k + s_k)/2`, lacks this: with bids $10 and $9 against asks $1 and $20, one unit
///   trades and that midpoint is $5.50, while the renter left out bid $9; here `p` is $9.50.
/// - The midpoint treats renters and providers alike; the (k+1)-th price rule (the interval's
///   lower end) gives all the gains from trade to renters, and is truthful for single-unit
///   renters but not for providers (the marginal provider can raise its ask and the price).
/// - It is efficient (all `k` trades happen) and exactly budget-balanced. It is not truthful:
///   a marginal trader can move `p` within the interval, but no further, and the interval
///   narrows as the market thickens, so the gain from misreporting shrinks with the market's
///   size (the k-double auctions of Rustichini, Satterthwaite and Williams, 1994). Where
///   truthfulness matters more than the one lost trade, use [`mcafee`].
///
/// Orders must all be for one class, bids in `bids` and asks in `asks`, each owner's ids distinct; their
/// order in each slice breaks price ties (earlier first).
pub fn uniform_price<O: Borrow<Order>>(bids: &[O], asks: &[O]) -> Result<Clearing, ClearError> {
    check(bids, asks)?;
    Ok(run(Mechanism::UniformPrice, bids, asks).to_clearing(bids, asks))
}

/// Clears `bids` against `asks` (one GPU class) with McAfee's trade-reduction double auction
/// (R. P. McAfee, "A dominant strategy double auction", J. Econ. Theory 56, 1992).
///
/// With `k` efficient units and the first excluded pair `b_{k+1}`, `s_{k+1}`, the candidate
/// price is `p = (b_{k+1} + s_{k+1})/2`, rounded down to the micro-dollar. If
/// `s_k ≤ p ≤ b_k`, all `k` units trade at `p`. Otherwise the marginal trade is dropped:
/// `k − 1` units trade, buyers paying `b_k` and sellers receiving `s_k`, and the market keeps
/// `(b_k − s_k)(k − 1)`. When there is no (k+1)-th bid unit or no (k+1)-th ask unit (every
/// unit of one side is efficient), the rule reduces the trade: this is McAfee's rule with a
/// phantom renter bidding −∞ and a phantom provider asking +∞ added to the market, under
/// which `p` can never lie in `[s_k, b_k]`. The phantoms' reports depend on no one's, so the
/// rule stays truthful; `k = 1` then means no trade at all.
///
/// Truthfulness: for a one-GPU-hour order, reporting its true value (a renter) or cost (a
/// provider) is a dominant strategy. Its price never depends on its own report while it
/// trades, and it trades only when its report beats a threshold set by others. A multi-unit
/// order is split into unit orders sharing its price and submission sequence, and that breaks
/// the guarantee: the order's own units can be the k-th or (k+1)-th unit whose price sets what
/// its other units pay, so shading the price or asking for fewer units than wanted (demand
/// reduction) can pay; splitting demand across several identities likewise. For every order
/// the rule stays individually rational and budget-balanced (payments ≥ receipts).
///
/// Orders must all be for one class, bids in `bids` and asks in `asks`, each owner's ids distinct; their
/// order in each slice breaks price ties (earlier first).
pub fn mcafee<O: Borrow<Order>>(bids: &[O], asks: &[O]) -> Result<Clearing, ClearError> {
    check(bids, asks)?;
    Ok(run(Mechanism::McAfee, bids, asks).to_clearing(bids, asks))
}

/// The inputs' promises: sides right, one class, each owner's ids distinct.
fn check<O: Borrow<Order>>(bids: &[O], asks: &[O]) -> Result<(), ClearError> {
    let Some(first) = bids.iter().chain(asks).next().map(Borrow::borrow) else {
        return Ok(());
    };
    let tagged = (bids.iter().map(|o| (o.borrow(), Side::Bid)))
        .chain(asks.iter().map(|o| (o.borrow(), Side::Ask)));
    let mut ids = HashSet::with_capacity(bids.len() + asks.len());
    for (order, side) in tagged {
        if order.side() != side {
            return Err(ClearError::WrongSide {
                id: order.id().clone(),
                expected: side,
            });
        }
        if order.class() != first.class() {
            return Err(ClearError::MixedClasses {
                id: order.id().clone(),
                expected: first.class().clone(),
                found: order.class().clone(),
            });
        }
        if !ids.insert((order.owner(), order.id())) {
            return Err(ClearError::DuplicateId(order.id().clone()));
        }
    }
    Ok(())
}

/// Units of one bid order (`bid`, its index in the bids) traded with one ask order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fill {
    /// Index of the bid order in the bids passed.
    pub(crate) bid: usize,
    /// Index of the ask order in the asks passed.
    pub(crate) ask: usize,
    /// Units traded.
    pub(crate) quantity: u64,
}

/// A clearing in terms of indices into the orders passed: what the [`Book`](crate::Book)
/// applies, and what [`Outcome::to_clearing`] names by id.
pub(crate) struct Outcome {
    mechanism: Mechanism,
    efficient_units: u64,
    units: u64,
    /// `(buyer pays, seller gets)` per unit; `None` when nothing trades.
    prices: Option<(Price, Price)>,
    pub(crate) fills: Vec<Fill>,
}

impl Outcome {
    /// The clearing, with the orders' ids in place of indices.
    pub(crate) fn to_clearing<O: Borrow<Order>>(&self, bids: &[O], asks: &[O]) -> Clearing {
        let (buyer_price, seller_price) = match self.prices {
            Some((buyer, seller)) => (Some(buyer), Some(seller)),
            None => (None, None),
        };
        let trades = self
            .prices
            .iter()
            .flat_map(|&(buyer_pays, seller_gets)| {
                self.fills.iter().map(move |fill| Trade {
                    bid: bids[fill.bid].borrow().id().clone(),
                    bid_owner: bids[fill.bid].borrow().owner().to_string(),
                    ask: asks[fill.ask].borrow().id().clone(),
                    ask_owner: asks[fill.ask].borrow().owner().to_string(),
                    quantity: fill.quantity,
                    buyer_pays,
                    seller_gets,
                })
            })
            .collect();
        let surplus = self.prices.map_or(0, |(buyer, seller)| {
            u128::from(buyer.micro_usd() - seller.micro_usd()) * u128::from(self.units)
        });
        Clearing {
            mechanism: self.mechanism,
            efficient_units: self.efficient_units,
            units: self.units,
            buyer_price,
            seller_price,
            surplus,
            trades,
        }
    }
}

/// One order in rank order: its price, units, and index in the slice.
#[derive(Clone, Copy)]
struct Ranked {
    price: Price,
    quantity: u64,
    index: usize,
}

/// The orders of one side ranked best first: bids by price descending, asks ascending, ties
/// by index. The keys are distinct (the index is in them), so the order is total.
fn rank<O: Borrow<Order>>(orders: &[O], side: Side) -> Vec<Ranked> {
    let mut ranked: Vec<Ranked> = orders
        .iter()
        .enumerate()
        .map(|(index, o)| Ranked {
            price: o.borrow().price(),
            quantity: o.borrow().quantity(),
            index,
        })
        .collect();
    match side {
        Side::Bid => ranked.sort_unstable_by_key(|r| (Reverse(r.price), r.index)),
        Side::Ask => ranked.sort_unstable_by_key(|r| (r.price, r.index)),
    }
    ranked
}

/// A walk over the ranked units of one side, one order at a time.
struct Units<'a> {
    ranked: &'a [Ranked],
    at: usize,
    left: u64,
}

impl<'a> Units<'a> {
    fn new(ranked: &'a [Ranked]) -> Units<'a> {
        Units {
            ranked,
            at: 0,
            left: ranked.first().map_or(0, |r| r.quantity),
        }
    }

    /// The order holding the next unit, if any unit is left.
    fn current(&self) -> Option<Ranked> {
        self.ranked.get(self.at).copied()
    }

    /// Takes `n` units (at most `self.left`) of the current order.
    fn take(&mut self, n: u64) {
        self.left -= n;
        if self.left == 0 {
            self.at += 1;
            self.left = self.ranked.get(self.at).map_or(0, |r| r.quantity);
        }
    }
}

/// Where the efficient trades end: `k`, the k-th bid and ask unit prices, and the (k+1)-th
/// (`None` where that side has no more units).
struct Margin {
    k: u64,
    b_k: Price,
    s_k: Price,
    b_next: Option<Price>,
    s_next: Option<Price>,
}

/// Walks the ranked units pairwise while bid ≥ ask.
fn margin(bids: &[Ranked], asks: &[Ranked]) -> Margin {
    let (mut b, mut s) = (Units::new(bids), Units::new(asks));
    let (mut k, mut b_k, mut s_k) = (0, Price::ZERO, Price::ZERO);
    while let (Some(bid), Some(ask)) = (b.current(), s.current()) {
        if bid.price < ask.price {
            break;
        }
        let n = b.left.min(s.left);
        k += n;
        (b_k, s_k) = (bid.price, ask.price);
        b.take(n);
        s.take(n);
    }
    Margin {
        k,
        b_k,
        s_k,
        b_next: b.current().map(|r| r.price),
        s_next: s.current().map(|r| r.price),
    }
}

/// Pairs the first `units` ranked bid units with the first `units` ask units.
fn fills(bids: &[Ranked], asks: &[Ranked], mut units: u64) -> Vec<Fill> {
    let (mut b, mut s) = (Units::new(bids), Units::new(asks));
    let mut fills = Vec::new();
    while units > 0 {
        let (Some(bid), Some(ask)) = (b.current(), s.current()) else {
            break;
        };
        let n = b.left.min(s.left).min(units);
        fills.push(Fill {
            bid: bid.index,
            ask: ask.index,
            quantity: n,
        });
        units -= n;
        b.take(n);
        s.take(n);
    }
    fills
}

/// Runs `mechanism` on orders the caller vouches for (see [`check`]).
pub(crate) fn run<O: Borrow<Order>>(mechanism: Mechanism, bids: &[O], asks: &[O]) -> Outcome {
    let (bids, asks) = (rank(bids, Side::Bid), rank(asks, Side::Ask));
    let m = margin(&bids, &asks);
    // `units` trade, buyers paying `buyer` and sellers getting `seller` per unit.
    let (units, buyer, seller) = match mechanism {
        Mechanism::UniformPrice => {
            let low = m.b_next.map_or(m.s_k, |b| b.max(m.s_k));
            let high = m.s_next.map_or(m.b_k, |s| s.min(m.b_k));
            let p = low.midpoint(high);
            (m.k, p, p)
        }
        Mechanism::McAfee => match m.b_next.zip(m.s_next).map(|(b, s)| b.midpoint(s)) {
            Some(p) if m.s_k <= p && p <= m.b_k => (m.k, p, p),
            _ => (m.k.saturating_sub(1), m.b_k, m.s_k),
        },
    };
    Outcome {
        mechanism,
        efficient_units: m.k,
        units,
        prices: (units > 0).then_some((buyer, seller)),
        fills: fills(&bids, &asks, units),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c";

    fn order(id: &str, side: Side, quantity: u64, usd: f64) -> Order {
        Order::new(
            OrderId::new(id).unwrap(),
            KEY,
            side,
            GpuClass::new("H200 SXM").unwrap(),
            quantity,
            Price::from_usd(usd).unwrap(),
        )
        .unwrap()
    }

    /// Unit bids `b0, b1, …` and unit asks `a0, a1, …` at these dollar prices.
    fn market(bids: &[f64], asks: &[f64]) -> (Vec<Order>, Vec<Order>) {
        let side = |prices: &[f64], side: Side, prefix: &str| {
            prices
                .iter()
                .enumerate()
                .map(|(i, &p)| order(&format!("{prefix}{i}"), side, 1, p))
                .collect()
        };
        (side(bids, Side::Bid, "b"), side(asks, Side::Ask, "a"))
    }

    fn usd(micro: u64) -> f64 {
        micro as f64 / 1e6
    }

    /// `(bid, ask, quantity, buyer pays $, seller gets $)` per trade.
    fn trades(c: &Clearing) -> Vec<(&str, &str, u64, f64, f64)> {
        c.trades
            .iter()
            .map(|t| {
                (
                    t.bid.as_str(),
                    t.ask.as_str(),
                    t.quantity,
                    usd(t.buyer_pays.micro_usd()),
                    usd(t.seller_gets.micro_usd()),
                )
            })
            .collect()
    }

    fn prices(c: &Clearing) -> (Option<f64>, Option<f64>) {
        (
            c.buyer_price.map(|p| usd(p.micro_usd())),
            c.seller_price.map(|p| usd(p.micro_usd())),
        )
    }

    #[test]
    fn empty_and_uncrossed_markets_do_not_trade() {
        for (bids, asks) in [
            (vec![], vec![]),
            (vec![5.0], vec![]),
            (vec![], vec![5.0]),
            (vec![3.0, 2.0], vec![3.5, 4.0]),
        ] {
            let (b, a) = market(&bids, &asks);
            for c in [uniform_price(&b, &a).unwrap(), mcafee(&b, &a).unwrap()] {
                assert_eq!((c.efficient_units, c.units, c.surplus), (0, 0, 0));
                assert_eq!(prices(&c), (None, None));
                assert!(c.trades.is_empty());
            }
        }
    }

    #[test]
    fn uniform_price_is_the_middle_of_the_clearing_interval() {
        // k = 2 (5 ≥ 1, 4 ≥ 2, 3 < 6); interval [max(s_2 = 2, b_3 = 3), min(b_2 = 4, s_3 = 6)].
        let (b, a) = market(&[3.0, 5.0, 4.0], &[6.0, 1.0, 2.0]);
        let c = uniform_price(&b, &a).unwrap();
        assert_eq!((c.efficient_units, c.units, c.surplus), (2, 2, 0));
        assert_eq!(prices(&c), (Some(3.5), Some(3.5)));
        assert_eq!(
            trades(&c),
            [("b1", "a1", 1, 3.5, 3.5), ("b2", "a2", 1, 3.5, 3.5)]
        );
    }

    #[test]
    fn uniform_price_keeps_priced_out_bidders_below_the_price() {
        // The marginal pair's midpoint would be 5.50, below the excluded bid of 9.
        let (b, a) = market(&[10.0, 9.0], &[1.0, 20.0]);
        let c = uniform_price(&b, &a).unwrap();
        assert_eq!(prices(&c), (Some(9.5), Some(9.5)));
        assert_eq!(trades(&c), [("b0", "a0", 1, 9.5, 9.5)]);
    }

    #[test]
    fn uniform_price_when_a_side_runs_out() {
        // No (k+1)-th unit on either side: the interval is [s_k, b_k] = [4, 10].
        let (b, a) = market(&[10.0], &[4.0]);
        assert_eq!(
            prices(&uniform_price(&b, &a).unwrap()),
            (Some(7.0), Some(7.0))
        );
        // No 2nd ask, a 2nd bid at 6: [max(4, 6), 10].
        let (b, a) = market(&[10.0, 6.0], &[4.0]);
        assert_eq!(
            prices(&uniform_price(&b, &a).unwrap()),
            (Some(8.0), Some(8.0))
        );
    }

    #[test]
    fn uniform_price_fills_multi_unit_orders_in_part() {
        let b = [order("A", Side::Bid, 3, 3.0)];
        let a = [order("X", Side::Ask, 1, 1.0), order("Y", Side::Ask, 5, 2.0)];
        // k = 3; interval [max(s_3 = 2, none), min(b_3 = 3, s_4 = 2)] = [2, 2].
        let c = uniform_price(&b, &a).unwrap();
        assert_eq!((c.efficient_units, c.units), (3, 3));
        assert_eq!(
            trades(&c),
            [("A", "X", 1, 2.0, 2.0), ("A", "Y", 2, 2.0, 2.0)]
        );
    }

    #[test]
    fn ties_go_to_the_earlier_order() {
        let (b, a) = market(&[4.0, 5.0, 5.0], &[2.0, 1.0, 1.0]);
        let c = uniform_price(&b, &a).unwrap();
        // b1 and b2 tie at 5 and both trade, b1 first; a1 and a2 tie at 1, a1 first.
        assert_eq!(c.units, 3);
        assert_eq!(
            trades(&c).iter().map(|t| (t.0, t.1)).collect::<Vec<_>>(),
            [("b1", "a1"), ("b2", "a2"), ("b0", "a0")]
        );
        // One unit for two equal bids: the earlier one gets it.
        let (b, a) = market(&[5.0, 5.0], &[1.0]);
        assert_eq!(trades(&uniform_price(&b, &a).unwrap())[0].0, "b0");
        let (b, a) = market(&[5.0], &[1.0, 1.0, 9.0]);
        assert_eq!(trades(&uniform_price(&b, &a).unwrap())[0].1, "a0");
    }

    #[test]
    fn midpoints_round_down_to_the_micro_dollar() {
        let (b, a) = market(&[0.000_002], &[0.000_001]);
        assert_eq!(
            uniform_price(&b, &a).unwrap().buyer_price,
            Some(Price::from_micro_usd(1).unwrap())
        );
    }

    #[test]
    fn mcafee_all_k_trade_at_p_when_it_lies_between_the_marginal_pair() {
        // k = 3 (5 ≥ 4, 2 < 8); p = (2 + 8)/2 = 5 in [s_3 = 4, b_3 = 5].
        let (b, a) = market(&[9.0, 7.0, 5.0, 2.0], &[1.0, 3.0, 4.0, 8.0]);
        let c = mcafee(&b, &a).unwrap();
        assert_eq!((c.efficient_units, c.units, c.surplus), (3, 3, 0));
        assert_eq!(prices(&c), (Some(5.0), Some(5.0)));
        assert_eq!(
            trades(&c),
            [
                ("b0", "a0", 1, 5.0, 5.0),
                ("b1", "a1", 1, 5.0, 5.0),
                ("b2", "a2", 1, 5.0, 5.0)
            ]
        );
    }

    #[test]
    fn mcafee_reduces_a_trade_when_p_is_outside() {
        // k = 3; p = (4 + 8)/2 = 6 > b_3 = 5: two trade, buyers pay 5, sellers get 4.
        let (b, a) = market(&[9.0, 7.0, 5.0, 4.0], &[1.0, 3.0, 4.0, 8.0]);
        let c = mcafee(&b, &a).unwrap();
        assert_eq!((c.efficient_units, c.units), (3, 2));
        assert_eq!(prices(&c), (Some(5.0), Some(4.0)));
        assert_eq!(c.surplus, 2_000_000);
        assert_eq!(
            trades(&c),
            [("b0", "a0", 1, 5.0, 4.0), ("b1", "a1", 1, 5.0, 4.0)]
        );
    }

    #[test]
    fn mcafee_reduces_when_there_is_no_next_pair() {
        // Every order efficient: k = 2 with no 3rd unit; one trades, at b_2 = 7 and s_2 = 3.
        let (b, a) = market(&[9.0, 7.0], &[1.0, 3.0]);
        let c = mcafee(&b, &a).unwrap();
        assert_eq!((c.efficient_units, c.units, c.surplus), (2, 1, 4_000_000));
        assert_eq!(trades(&c), [("b0", "a0", 1, 7.0, 3.0)]);
        // A 3rd bid but no 3rd ask: still no (k+1)-th pair.
        let (b, a) = market(&[9.0, 7.0, 6.0], &[1.0, 3.0]);
        let c = mcafee(&b, &a).unwrap();
        assert_eq!((c.efficient_units, c.units), (2, 1));
        assert_eq!(prices(&c), (Some(7.0), Some(3.0)));
    }

    #[test]
    fn mcafee_with_one_efficient_trade_and_no_next_pair_trades_nothing() {
        let (b, a) = market(&[5.0], &[3.0]);
        let c = mcafee(&b, &a).unwrap();
        assert_eq!((c.efficient_units, c.units, c.surplus), (1, 0, 0));
        assert_eq!(prices(&c), (None, None));
        assert!(c.trades.is_empty());
    }

    #[test]
    fn mcafee_splits_multi_unit_orders_into_units() {
        // Bid units [9, 9, 2], ask units [1, 3, 8]: k = 2, p = (2 + 8)/2 = 5 in [3, 9].
        let b = [order("A", Side::Bid, 2, 9.0), order("B", Side::Bid, 1, 2.0)];
        let a = [
            order("X", Side::Ask, 1, 1.0),
            order("Y", Side::Ask, 1, 3.0),
            order("Z", Side::Ask, 1, 8.0),
        ];
        let c = mcafee(&b, &a).unwrap();
        assert_eq!(
            trades(&c),
            [("A", "X", 1, 5.0, 5.0), ("A", "Y", 1, 5.0, 5.0)]
        );
    }

    #[test]
    fn a_multi_unit_bidder_can_gain_under_mcafee_by_demand_reduction() {
        // A values 2 GPU-hours at $10 each. Truthfully: bid units [10, 10, 2], asks [1, 6, 20];
        // k = 2, p = (2 + 20)/2 = 11 > b_2 = 10, so one unit trades at A's own second unit's
        // price: A pays 10 for a unit worth 10, utility 0.
        let asks = [
            order("X", Side::Ask, 1, 1.0),
            order("Y", Side::Ask, 1, 6.0),
            order("Z", Side::Ask, 1, 20.0),
        ];
        let truthful = [
            order("A", Side::Bid, 2, 10.0),
            order("B", Side::Bid, 1, 2.0),
        ];
        let c = mcafee(&truthful, &asks).unwrap();
        assert_eq!(trades(&c), [("A", "X", 1, 10.0, 6.0)]);
        // Asking for one unit: k = 1, p = (2 + 6)/2 = 4 in [1, 10]: A pays 4, utility 6.
        let reduced = [
            order("A", Side::Bid, 1, 10.0),
            order("B", Side::Bid, 1, 2.0),
        ];
        let c = mcafee(&reduced, &asks).unwrap();
        assert_eq!(trades(&c), [("A", "X", 1, 4.0, 4.0)]);
    }

    #[test]
    fn orders_that_cannot_clear_together_are_refused() {
        let (mut b, a) = market(&[5.0], &[1.0]);
        let ask_among_bids = vec![b[0].clone(), a[0].clone()];
        assert_eq!(
            mcafee(&ask_among_bids, &a),
            Err(ClearError::WrongSide {
                id: a[0].id().clone(),
                expected: Side::Bid
            })
        );
        let other_class = Order::new(
            OrderId::new("b9").unwrap(),
            KEY,
            Side::Bid,
            GpuClass::new("L4").unwrap(),
            1,
            Price::ZERO,
        )
        .unwrap();
        b.push(other_class);
        assert!(matches!(
            uniform_price(&b, &a),
            Err(ClearError::MixedClasses { .. })
        ));
        b.pop();
        b.push(order("a0", Side::Bid, 1, 2.0));
        assert_eq!(
            uniform_price(&b, &a),
            Err(ClearError::DuplicateId(OrderId::new("a0").unwrap()))
        );
        // The same id from another owner is another order: it clears, and the trade names
        // whose it was.
        b.pop();
        let other_owner = Order::new(
            OrderId::new("a0").unwrap(),
            "ab".repeat(32),
            Side::Bid,
            GpuClass::new("H200 SXM").unwrap(),
            1,
            Price::from_usd(9.0).unwrap(),
        )
        .unwrap();
        b.insert(0, other_owner);
        let c = uniform_price(&b, &a).unwrap();
        assert_eq!(
            (c.trades[0].bid.as_str(), c.trades[0].bid_owner.as_str()),
            ("a0", "ab".repeat(32).as_str())
        );
    }

    #[test]
    fn references_clear_like_owned_orders() {
        let (b, a) = market(&[9.0, 7.0, 5.0, 2.0], &[1.0, 3.0, 4.0, 8.0]);
        let (rb, ra): (Vec<&Order>, Vec<&Order>) = (b.iter().collect(), a.iter().collect());
        assert_eq!(mcafee(&rb, &ra), mcafee(&b, &a));
    }

    #[test]
    fn clearings_serialize_in_snake_case_with_micro_dollars() {
        let (b, a) = market(&[9.0, 7.0, 5.0, 4.0], &[1.0, 3.0, 4.0, 8.0]);
        let c = mcafee(&b, &a).unwrap();
        let json = serde_json::to_value(&c).unwrap();
        let trade = |bid: &str, ask: &str| {
            serde_json::json!({
                "bid": bid, "bid_owner": b[0].owner(), "ask": ask, "ask_owner": a[0].owner(),
                "quantity": 1,
                "buyer_pays_micro_usd": 5_000_000, "seller_gets_micro_usd": 4_000_000,
            })
        };
        assert_eq!(
            json,
            serde_json::json!({
                "mechanism": "mcafee",
                "efficient_units": 3,
                "units": 2,
                "buyer_price_micro_usd": 5_000_000,
                "seller_price_micro_usd": 4_000_000,
                "surplus_micro_usd": 2_000_000,
                "trades": [trade("b0", "a0"), trade("b1", "a1")],
            })
        );
        assert_eq!(serde_json::from_value::<Clearing>(json).unwrap(), c);
        let none = uniform_price::<Order>(&[], &[]).unwrap();
        let json = serde_json::to_value(&none).unwrap();
        assert_eq!(json["mechanism"], "uniform_price");
        assert_eq!(json["buyer_price_micro_usd"], serde_json::Value::Null);
    }
}
