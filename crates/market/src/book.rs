//! The order book: open orders per GPU class, submission, cancellation by the owner, clearing
//! by either mechanism, and the history of clearings.
//!
//! Every operation checks everything before it changes anything, so a refused submission,
//! cancellation or clearing leaves the book exactly as it was.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::auction::{self, Clearing, Mechanism};
use crate::order::{GpuClass, Order, OrderId, Side};

/// Why the book refused a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BookError {
    /// The book trades no such GPU class.
    #[error("the book trades no GPU class {0:?}")]
    UnknownClass(GpuClass),
    /// An order with this id was submitted before (open, filled or cancelled).
    #[error("an order with id {0} was already submitted")]
    DuplicateId(OrderId),
    /// No order with this id was ever submitted.
    #[error("there is no order {0}")]
    UnknownOrder(OrderId),
    /// The order has filled or was cancelled.
    #[error("order {0} is no longer open (filled or cancelled)")]
    NotOpen(OrderId),
    /// The requester is not the order's owner.
    #[error("order {0} belongs to another key: only its owner may cancel it")]
    NotOwner(OrderId),
}

/// One clearing in the book's history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClearingRecord {
    /// Its position in the history, from 0.
    pub number: u64,
    /// The class that was cleared.
    pub class: GpuClass,
    /// The clearing saw the class's orders open among those submitted before this sequence
    /// number ([`Book::submit`] returns each order's).
    pub submitted_before: u64,
    /// Open bid orders it saw.
    pub bids: usize,
    /// Open ask orders it saw.
    pub asks: usize,
    /// The GPU-hours those bids asked for.
    pub bid_hours: u64,
    /// The GPU-hours those asks offered: the supply, against which the traded hours are the
    /// market's utilization ([`Book::utilization`]).
    pub ask_hours: u64,
    /// What it decided.
    pub clearing: Clearing,
}

/// Open orders and the history of clearings, for a fixed set of GPU classes.
///
/// Orders rest in submission order; each gets the next sequence number. Price ties clear by
/// that sequence, earlier first, so clearings are deterministic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Book {
    /// Class → its index in `markets`.
    classes: BTreeMap<GpuClass, usize>,
    markets: Vec<Market>,
    /// Every id ever submitted: where it rests while open, `None` once filled or cancelled.
    ids: HashMap<OrderId, Option<Slot>>,
    next_sequence: u64,
    history: Vec<ClearingRecord>,
}

/// One class's open orders by sequence number.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Market {
    bids: BTreeMap<u64, Order>,
    asks: BTreeMap<u64, Order>,
}

impl Market {
    fn side(&self, side: Side) -> &BTreeMap<u64, Order> {
        match side {
            Side::Bid => &self.bids,
            Side::Ask => &self.asks,
        }
    }

    fn side_mut(&mut self, side: Side) -> &mut BTreeMap<u64, Order> {
        match side {
            Side::Bid => &mut self.bids,
            Side::Ask => &mut self.asks,
        }
    }
}

/// Where an open order rests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    market: usize,
    side: Side,
    sequence: u64,
}

impl Book {
    /// An empty book trading these GPU classes (repeats count once).
    pub fn new(classes: impl IntoIterator<Item = GpuClass>) -> Book {
        let mut names: Vec<GpuClass> = classes.into_iter().collect();
        names.sort();
        names.dedup();
        Book {
            markets: vec![Market::default(); names.len()],
            classes: names.into_iter().enumerate().map(|(i, c)| (c, i)).collect(),
            ids: HashMap::new(),
            next_sequence: 0,
            history: Vec::new(),
        }
    }

    /// The classes the book trades, by name.
    pub fn classes(&self) -> impl Iterator<Item = &GpuClass> {
        self.classes.keys()
    }

    /// Adds an order to its class and returns its sequence number. Refused, with the book
    /// unchanged, when its class is not traded here or its id was ever submitted before
    /// (ids stay unique for the book's life, so the history names one order by each). The
    /// order itself was checked when it was made (see [`Order::new`]: no empty id or class,
    /// no zero quantity, a valid price). The caller checks the owner's signature.
    pub fn submit(&mut self, order: Order) -> Result<u64, BookError> {
        let &market = self
            .classes
            .get(order.class())
            .ok_or_else(|| BookError::UnknownClass(order.class().clone()))?;
        if self.ids.contains_key(order.id()) {
            return Err(BookError::DuplicateId(order.id().clone()));
        }
        let slot = Slot {
            market,
            side: order.side(),
            sequence: self.next_sequence,
        };
        self.next_sequence += 1;
        self.ids.insert(order.id().clone(), Some(slot));
        self.markets[market]
            .side_mut(slot.side)
            .insert(slot.sequence, order);
        Ok(slot.sequence)
    }

    /// Withdraws an open order on behalf of `requester`, the public key (hex, any case) that
    /// signed the cancellation, and returns what was left of it. Only the order's owner may
    /// cancel it. The book holds no keys and sees no signatures: checking that `requester`
    /// really signed this cancellation is the caller's job, before calling. Refused, with the
    /// book unchanged, for an unknown id, an order no longer open, or another key.
    pub fn cancel(&mut self, id: &OrderId, requester: &str) -> Result<Order, BookError> {
        let slot = match self.ids.get(id) {
            None => return Err(BookError::UnknownOrder(id.clone())),
            Some(None) => return Err(BookError::NotOpen(id.clone())),
            Some(Some(slot)) => *slot,
        };
        match self.markets[slot.market]
            .side_mut(slot.side)
            .entry(slot.sequence)
        {
            Entry::Occupied(entry) if entry.get().owner().eq_ignore_ascii_case(requester) => {
                self.ids.insert(id.clone(), None);
                Ok(entry.remove())
            }
            Entry::Occupied(_) => Err(BookError::NotOwner(id.clone())),
            Entry::Vacant(_) => Err(BookError::NotOpen(id.clone())),
        }
    }

    /// Clears one class's open orders with `mechanism`, takes the traded GPU-hours off the
    /// orders (removing those filled), records the clearing in the history and returns the
    /// record. A clearing with no trade is recorded too. Refused, with the book unchanged, for
    /// a class not traded here.
    pub fn clear(
        &mut self,
        class: &GpuClass,
        mechanism: Mechanism,
    ) -> Result<&ClearingRecord, BookError> {
        let &index = self
            .classes
            .get(class)
            .ok_or_else(|| BookError::UnknownClass(class.clone()))?;
        let market = &mut self.markets[index];
        let bids: Vec<&Order> = market.bids.values().collect();
        let asks: Vec<&Order> = market.asks.values().collect();
        // The book's orders are one class's, on their sides, with distinct ids.
        let outcome = auction::run(mechanism, &bids, &asks);
        let hours = |orders: &[&Order]| {
            orders
                .iter()
                .map(|o| o.quantity)
                .fold(0u64, u64::saturating_add)
        };
        let record = ClearingRecord {
            number: self.history.len() as u64,
            class: class.clone(),
            submitted_before: self.next_sequence,
            bids: bids.len(),
            asks: asks.len(),
            bid_hours: hours(&bids),
            ask_hours: hours(&asks),
            clearing: outcome.to_clearing(&bids, &asks),
        };
        let (mut bids_filled, mut asks_filled) = (vec![0; bids.len()], vec![0; asks.len()]);
        for fill in &outcome.fills {
            bids_filled[fill.bid] += fill.quantity;
            asks_filled[fill.ask] += fill.quantity;
        }
        settle(&mut market.bids, &bids_filled, &mut self.ids);
        settle(&mut market.asks, &asks_filled, &mut self.ids);
        self.history.push(record);
        Ok(&self.history[self.history.len() - 1])
    }

    /// Every clearing so far, oldest first.
    pub fn history(&self) -> &[ClearingRecord] {
        &self.history
    }

    /// The share of offered GPU-hours that traded in the class's last `last` clearings that
    /// had any offered (traded hours over ask hours, summed, so a large clearing weighs more
    /// than a small one); `None` when there is none yet. Between 0 and 1.
    pub fn utilization(&self, class: &GpuClass, last: usize) -> Option<f64> {
        let (traded, offered) = self
            .history
            .iter()
            .rev()
            .filter(|r| &r.class == class && r.ask_hours > 0)
            .take(last)
            .fold((0u128, 0u128), |(t, o), r| {
                (
                    t + u128::from(r.clearing.units),
                    o + u128::from(r.ask_hours),
                )
            });
        (offered > 0).then(|| traded as f64 / offered as f64)
    }

    /// The open orders of one class and side, in submission order (none for a class not
    /// traded here).
    pub fn open(&self, class: &GpuClass, side: Side) -> impl Iterator<Item = &Order> {
        self.classes
            .get(class)
            .into_iter()
            .flat_map(move |&i| self.markets[i].side(side).values())
    }

    /// The open order with this id, if there is one.
    pub fn get(&self, id: &OrderId) -> Option<&Order> {
        let slot = (*self.ids.get(id)?)?;
        self.markets[slot.market]
            .side(slot.side)
            .get(&slot.sequence)
    }

    /// The number of open orders, all classes together.
    pub fn len(&self) -> usize {
        self.markets
            .iter()
            .map(|m| m.bids.len() + m.asks.len())
            .sum()
    }

    /// Whether no order is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Takes `filled[i]` GPU-hours off the i-th of `orders` (in sequence order, as the clearing
/// saw them), closing those with none left.
fn settle(
    orders: &mut BTreeMap<u64, Order>,
    filled: &[u64],
    ids: &mut HashMap<OrderId, Option<Slot>>,
) {
    let mut filled = filled.iter();
    orders.retain(|_, order| {
        order.quantity -= filled.next().copied().unwrap_or(0);
        if order.quantity == 0 {
            if let Some(slot) = ids.get_mut(order.id()) {
                *slot = None;
            }
        }
        order.quantity > 0
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::price::Price;

    const ALICE: &str = "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c";
    const BOB: &str = "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025";

    fn h200() -> GpuClass {
        GpuClass::new("H200 SXM").unwrap()
    }

    fn order(id: &str, owner: &str, side: Side, class: &str, quantity: u64, usd: f64) -> Order {
        Order::new(
            OrderId::new(id).unwrap(),
            owner,
            side,
            GpuClass::new(class).unwrap(),
            quantity,
            Price::from_usd(usd).unwrap(),
        )
        .unwrap()
    }

    fn id(id: &str) -> OrderId {
        OrderId::new(id).unwrap()
    }

    fn book() -> Book {
        let mut book = Book::new([h200(), GpuClass::new("L4").unwrap(), h200()]);
        book.submit(order("b1", ALICE, Side::Bid, "H200 SXM", 3, 4.0))
            .unwrap();
        book.submit(order("a1", BOB, Side::Ask, "H200 SXM", 2, 2.0))
            .unwrap();
        book
    }

    #[test]
    fn submissions_rest_in_order_by_class_and_side() {
        let mut book = book();
        assert_eq!(
            book.classes().map(GpuClass::as_str).collect::<Vec<_>>(),
            ["H200 SXM", "L4"]
        );
        assert_eq!(
            book.submit(order("b2", BOB, Side::Bid, "H200 SXM", 1, 5.0)),
            Ok(2)
        );
        let bids: Vec<&str> = book
            .open(&h200(), Side::Bid)
            .map(|o| o.id().as_str())
            .collect();
        assert_eq!(bids, ["b1", "b2"]);
        assert_eq!(book.len(), 3);
        assert_eq!(book.get(&id("a1")).unwrap().quantity(), 2);
        assert_eq!(
            book.open(&GpuClass::new("A100").unwrap(), Side::Bid)
                .count(),
            0
        );
    }

    #[test]
    fn refused_submissions_leave_the_book_unchanged() {
        let mut book = book();
        let before = book.clone();
        assert_eq!(
            book.submit(order("b1", BOB, Side::Ask, "L4", 1, 1.0)),
            Err(BookError::DuplicateId(id("b1")))
        );
        assert_eq!(
            book.submit(order("b9", ALICE, Side::Bid, "A100 SXM", 1, 1.0)),
            Err(BookError::UnknownClass(GpuClass::new("A100 SXM").unwrap()))
        );
        assert_eq!(book, before);
        // A filled order's id stays taken.
        book.clear(&h200(), Mechanism::UniformPrice).unwrap();
        assert_eq!(book.get(&id("a1")), None);
        let before = book.clone();
        assert_eq!(
            book.submit(order("a1", BOB, Side::Ask, "H200 SXM", 1, 1.0)),
            Err(BookError::DuplicateId(id("a1")))
        );
        assert_eq!(book, before);
    }

    #[test]
    fn utilization_is_the_share_of_offered_hours_that_traded() {
        let mut book = book();
        let l4 = GpuClass::new("L4").unwrap();
        assert_eq!(book.utilization(&h200(), 8), None);
        // 3 hours bid at $4 meet 2 offered at $2: both offered hours trade.
        let first = book.clear(&h200(), Mechanism::UniformPrice).unwrap();
        assert_eq!((first.bid_hours, first.ask_hours), (3, 2));
        assert_eq!(book.utilization(&h200(), 8), Some(1.0));
        // 6 more offered above every bid: none trades; 2 of 8 offered hours traded in all.
        book.submit(order("a2", BOB, Side::Ask, "H200 SXM", 6, 9.0))
            .unwrap();
        book.clear(&h200(), Mechanism::UniformPrice).unwrap();
        assert_eq!(book.utilization(&h200(), 8), Some(0.25));
        // Only the last clearing: none of its 6 hours traded.
        assert_eq!(book.utilization(&h200(), 1), Some(0.0));
        // A clearing with nothing offered, and other classes, do not count.
        book.clear(&l4, Mechanism::UniformPrice).unwrap();
        book.cancel(&id("a2"), BOB).unwrap();
        book.clear(&h200(), Mechanism::UniformPrice).unwrap();
        assert_eq!(book.utilization(&h200(), 1), Some(0.0));
        assert_eq!(book.utilization(&l4, 8), None);
    }

    #[test]
    fn only_the_owner_cancels() {
        let mut book = book();
        let before = book.clone();
        assert_eq!(
            book.cancel(&id("b1"), BOB),
            Err(BookError::NotOwner(id("b1")))
        );
        assert_eq!(
            book.cancel(&id("zz"), ALICE),
            Err(BookError::UnknownOrder(id("zz")))
        );
        assert_eq!(book, before);
        let cancelled = book.cancel(&id("b1"), &ALICE.to_ascii_uppercase()).unwrap();
        assert_eq!(cancelled.id(), &id("b1"));
        assert_eq!(book.len(), 1);
        assert_eq!(
            book.cancel(&id("b1"), ALICE),
            Err(BookError::NotOpen(id("b1")))
        );
        assert_eq!(
            book.submit(order("b1", ALICE, Side::Bid, "H200 SXM", 1, 1.0)),
            Err(BookError::DuplicateId(id("b1")))
        );
    }

    #[test]
    fn clearing_takes_off_what_traded_and_records_it() {
        let mut book = book();
        book.submit(order("x1", ALICE, Side::Bid, "L4", 1, 1.0))
            .unwrap();
        let record = book
            .clear(&h200(), Mechanism::UniformPrice)
            .unwrap()
            .clone();
        // Bid 3 @ 4 against ask 2 @ 2: k = 2; the interval is [max(s_2 = 2, b_3 = 4), b_2 = 4]
        // (b_3 is the bid's own third unit, left over), so p = 4.
        assert_eq!(
            (
                record.number,
                record.submitted_before,
                record.bids,
                record.asks
            ),
            (0, 3, 1, 1)
        );
        assert_eq!(record.clearing.units, 2);
        assert_eq!(
            record.clearing.buyer_price,
            Some(Price::from_usd(4.0).unwrap())
        );
        assert_eq!(book.get(&id("b1")).unwrap().quantity(), 1);
        assert_eq!(book.get(&id("a1")), None);
        assert_eq!(
            book.cancel(&id("a1"), BOB),
            Err(BookError::NotOpen(id("a1")))
        );
        assert_eq!(book.len(), 2);
        // Nothing left to trade: recorded all the same.
        let record = book.clear(&h200(), Mechanism::McAfee).unwrap();
        assert_eq!((record.number, record.clearing.units), (1, 0));
        assert_eq!(book.history().len(), 2);
        assert_eq!(book.history()[0].clearing.trades.len(), 1);
    }

    #[test]
    fn clearing_an_unknown_class_changes_nothing() {
        let mut book = book();
        let before = book.clone();
        assert_eq!(
            book.clear(&GpuClass::new("B200").unwrap(), Mechanism::McAfee),
            Err(BookError::UnknownClass(GpuClass::new("B200").unwrap()))
        );
        assert_eq!(book, before);
    }

    #[test]
    fn price_ties_fill_in_submission_order() {
        let mut book = Book::new([h200()]);
        for (i, owner) in [ALICE, BOB, ALICE].into_iter().enumerate() {
            book.submit(order(
                &format!("b{i}"),
                owner,
                Side::Bid,
                "H200 SXM",
                1,
                3.0,
            ))
            .unwrap();
        }
        book.submit(order("a", BOB, Side::Ask, "H200 SXM", 2, 1.0))
            .unwrap();
        let record = book.clear(&h200(), Mechanism::UniformPrice).unwrap();
        let bids: Vec<&str> = record
            .clearing
            .trades
            .iter()
            .map(|t| t.bid.as_str())
            .collect();
        assert_eq!(bids, ["b0", "b1"]);
        assert_eq!(book.get(&id("b2")).unwrap().quantity(), 1);
    }

    #[test]
    fn records_serialize() {
        let mut book = book();
        let record = book.clear(&h200(), Mechanism::McAfee).unwrap();
        let json = serde_json::to_value(record).unwrap();
        assert_eq!(json["class"], "H200 SXM");
        assert_eq!(json["submitted_before"], 2);
        assert_eq!(json["clearing"]["mechanism"], "mcafee");
        assert_eq!(
            serde_json::from_value::<ClearingRecord>(json).unwrap(),
            *record
        );
    }
}
