//! The order book: open orders per GPU class, submission, cancellation by the owner, clearing
//! by either mechanism, expiry, and the history of clearings.
//!
//! Every order carries the time it expires (at most [`MAX_ORDER_LIFETIME_MS`] after it was
//! submitted). Time reaches the book only through the operations, each given the time it
//! happens at: an operation first lets that time pass ([`Book::expire`]: expired orders leave
//! the book, and the ids of orders whose expiry has passed are forgotten, so the book's memory
//! is bounded by what can still be open), then checks everything before it changes anything,
//! so a refused submission, cancellation or clearing changes nothing but the time. The book's
//! clock never goes back: an earlier time than one seen counts as the latest seen, so replaying
//! the same operations with the same times always rebuilds the same book.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;

use serde::{Deserialize, Serialize};

use pog_signed::GpuUuid;

use crate::auction::{self, Clearing, Mechanism};
use crate::lease::{allocate, Lease, TradeTerms};
use crate::order::{GpuClass, Order, OrderId, Side};
use crate::price::Price;

/// Why the book refused a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BookError {
    /// The book trades no such GPU class.
    #[error("the book trades no GPU class {0:?}")]
    UnknownClass(GpuClass),
    /// The owner submitted an order with this id before, and it has not expired (open,
    /// filled or cancelled).
    #[error("an order with id {0} was already submitted by this key")]
    DuplicateId(OrderId),
    /// The requester has no order with this id: never submitted by this key (ids are each
    /// owner's own), or expired and forgotten.
    #[error("this key has no order {0}")]
    UnknownOrder(OrderId),
    /// The order has filled or was cancelled.
    #[error("order {0} is no longer open (filled or cancelled)")]
    NotOpen(OrderId),
    /// The order's expiry is not after the time it was submitted.
    #[error("order {id} expires at {expires_at_ms} ms, not after now ({now_ms} ms): sign it again with a later expiry")]
    Expired {
        /// The order.
        id: OrderId,
        /// Its expiry, ms since the Unix epoch.
        expires_at_ms: u64,
        /// The book's time.
        now_ms: u64,
    },
    /// The order would stay open longer than [`MAX_ORDER_LIFETIME_MS`].
    #[error("order {id} expires at {expires_at_ms} ms, more than {} days after now ({now_ms} ms)", MAX_ORDER_LIFETIME_MS / DAY_MS)]
    LifetimeTooLong {
        /// The order.
        id: OrderId,
        /// Its expiry, ms since the Unix epoch.
        expires_at_ms: u64,
        /// The book's time.
        now_ms: u64,
    },
    /// The order would trade with an open order of the same owner on the other side: a bid
    /// at or above one of its owner's asks in the class, or an ask at or below one of its
    /// owner's bids. A key never trades with itself (docs/market.md says what linking of
    /// keys is and is not possible).
    #[error("order {id} would trade with your own open order {other} (a bid at or above your ask in the class): a key never trades with itself; cancel {other} first or change the price")]
    SelfTrade {
        /// The order refused.
        id: OrderId,
        /// The owner's open order it would cross.
        other: OrderId,
    },
    /// A GPU the ask offers is already offered by another ask: one ask per GPU until that
    /// ask expires, or is cancelled with nothing traded (an ask some of whose hours traded
    /// holds its GPUs until its expiry, so their hours in its window are not sold twice).
    #[error("GPU {gpu} is already offered by ask {by}: one ask per GPU until that ask expires, or is cancelled before any of its hours traded")]
    GpuOffered {
        /// The GPU.
        gpu: GpuUuid,
        /// The ask that offers it.
        by: OrderId,
    },
}

const DAY_MS: u64 = 24 * 60 * 60 * 1000;

/// The longest an order may stay open: its expiry is at most this long after it is submitted.
/// It bounds how long an abandoned order holds its place (and its owner's share of the
/// book's limits), and how long the book remembers an id.
pub const MAX_ORDER_LIFETIME_MS: u64 = 30 * DAY_MS;

/// One clearing in the book's history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClearingRecord {
    /// Its position in the history, from 0.
    pub number: u64,
    /// When it cleared: the book's time then, ms since the Unix epoch.
    #[serde(default)]
    pub at_ms: u64,
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
    /// The GPU-hours those asks offered: the supply it saw (open orders, which no price
    /// reads: [`crate::signals`] reads leases).
    pub ask_hours: u64,
    /// What it decided.
    pub clearing: Clearing,
    /// What its trades became: each GPU of an ask leased to the renter for a time
    /// ([`crate::lease`]); none for asks from before asks named GPUs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub leases: Vec<Lease>,
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
    /// Every order submitted that has not expired yet, by owner and id (filled and cancelled
    /// ones too, so a replayed submission is refused until it could no longer be admitted
    /// anyway). Ids are each owner's own: no key can take an id another key means to use.
    ids: HashMap<OrderKey, Remembered>,
    /// The remembered orders by expiry, to forget them in order.
    expiries: BTreeSet<(u64, OrderKey)>,
    /// Open orders per owner key (only owners with some), and the GPUs open asks offer.
    holders: Holders,
    next_sequence: u64,
    history: Vec<ClearingRecord>,
    /// Each leased GPU's end of its last lease: its next lease starts no earlier.
    booked: HashMap<GpuUuid, u64>,
    /// The latest time an operation happened at, ms since the Unix epoch.
    now_ms: u64,
}

/// An order's name in the book: its owner's key (lowercase hex) and the owner's id for it.
type OrderKey = (String, OrderId);

/// The key of `order`.
fn key_of(order: &Order) -> OrderKey {
    (order.owner().to_string(), order.id().clone())
}

/// What the book remembers of a submitted order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Remembered {
    /// Where the order rests, or rested: its sequence number names this order and no other.
    slot: Slot,
    /// Whether it is still open (false once filled or cancelled).
    open: bool,
}

/// An open order and when it expires.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Resting {
    order: Order,
    expires_at_ms: u64,
    /// GPU-hours of it that traded so far.
    traded: u64,
}

/// An open order as its owner holds it: its market, side (0 bid, 1 ask), price and sequence,
/// so that an owner's best price on a side of a class is one range away.
type Held = (usize, u8, Price, u64);

/// The side's place in a [`Held`].
fn side_code(side: Side) -> u8 {
    match side {
        Side::Bid => 0,
        Side::Ask => 1,
    }
}

/// Who holds what among the open orders: each owner's open orders, and for each GPU an open
/// ask offers, that ask.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Holders {
    /// Owner key → its open orders (only owners with some).
    owned: HashMap<String, BTreeSet<Held>>,
    /// GPU → the ask offering it: open, or closed with some hours traded and not yet
    /// expired.
    offered: HashMap<GpuUuid, OrderKey>,
    /// Asks no longer open some of whose hours traded, with their GPUs, held until they
    /// expire.
    sold: HashMap<OrderKey, Vec<GpuUuid>>,
}

impl Holders {
    /// Counts `order`, resting at `slot`, as open.
    fn opened(&mut self, order: &Order, slot: Slot) {
        self.owned
            .entry(order.owner().to_string())
            .or_default()
            .insert(held(order, slot));
        for gpu in order.gpus() {
            self.offered.insert(gpu.clone(), key_of(order));
        }
    }

    /// Counts `order`, resting at `slot`, as open no longer (it filled, was cancelled or
    /// expired). Its GPUs are free for another ask, unless `sold` (some of its hours
    /// traded and it has not expired): then they stay its own until [`Holders::expired`].
    fn closed(&mut self, order: &Order, slot: Slot, sold: bool) {
        if let Some(open) = self.owned.get_mut(order.owner()) {
            open.remove(&held(order, slot));
            if open.is_empty() {
                self.owned.remove(order.owner());
            }
        }
        let key = key_of(order);
        if sold && !order.gpus().is_empty() {
            self.sold.insert(key, order.gpus().to_vec());
            return;
        }
        self.free(&key, order.gpus());
    }

    /// The order `key` has expired: the GPUs it held after some of its hours traded are free.
    fn expired(&mut self, key: &OrderKey) {
        if let Some(gpus) = self.sold.remove(key) {
            self.free(key, &gpus);
        }
    }

    /// Frees those of `gpus` that the ask `key` offers.
    fn free(&mut self, key: &OrderKey, gpus: &[GpuUuid]) {
        for gpu in gpus {
            if self.offered.get(gpu) == Some(key) {
                self.offered.remove(gpu);
            }
        }
    }

    /// The sequence of an open order of `owner` in `market` on `side` that an order at
    /// `price` on the other side would trade with, if any.
    fn crossing(&self, owner: &str, market: usize, side: Side, price: Price) -> Option<u64> {
        let open = self.owned.get(owner)?;
        let code = side_code(side);
        let found = match side {
            // An own ask at or below the bid's price.
            Side::Ask => open
                .range((market, code, Price::ZERO, 0)..=(market, code, price, u64::MAX))
                .next(),
            // An own bid at or above the ask's price.
            Side::Bid => open
                .range((market, code, price, 0)..=(market, code, Price::MAX, u64::MAX))
                .next(),
        };
        found.map(|h| h.3)
    }
}

/// The [`Held`] of `order` resting at `slot`.
fn held(order: &Order, slot: Slot) -> Held {
    (
        slot.market,
        side_code(slot.side),
        order.price(),
        slot.sequence,
    )
}

/// One class's open orders by sequence number.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Market {
    bids: BTreeMap<u64, Resting>,
    asks: BTreeMap<u64, Resting>,
}

impl Market {
    fn side(&self, side: Side) -> &BTreeMap<u64, Resting> {
        match side {
            Side::Bid => &self.bids,
            Side::Ask => &self.asks,
        }
    }

    fn side_mut(&mut self, side: Side) -> &mut BTreeMap<u64, Resting> {
        match side {
            Side::Bid => &mut self.bids,
            Side::Ask => &mut self.asks,
        }
    }
}

/// An open order as [`Book::resting`] lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenOrder<'b> {
    /// Its place in the book's sequence ([`Book::submit`] returned it).
    pub sequence: u64,
    /// The order, with what is left of its quantity after earlier clearings.
    pub order: &'b Order,
    /// When it leaves the book unfilled, ms since the Unix epoch.
    pub expires_at_ms: u64,
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
            expiries: BTreeSet::new(),
            holders: Holders::default(),
            next_sequence: 0,
            history: Vec::new(),
            booked: HashMap::new(),
            now_ms: 0,
        }
    }

    /// Lets time pass to `at_ms` (never back): orders whose expiry is at or before it leave
    /// the book, and their ids are forgotten (a submission with such an expiry would be
    /// refused anyway). Returns the orders that expired while open, by expiry, owner and id. Every
    /// operation calls it first with its own time.
    pub fn expire(&mut self, at_ms: u64) -> Vec<Order> {
        self.now_ms = self.now_ms.max(at_ms);
        let mut expired = Vec::new();
        while let Some((expires_at_ms, _)) = self.expiries.first() {
            if *expires_at_ms > self.now_ms {
                break;
            }
            let Some((_, key)) = self.expiries.pop_first() else {
                break;
            };
            self.holders.expired(&key);
            let Some(Remembered { slot, open }) = self.ids.remove(&key) else {
                continue;
            };
            if open {
                let resting = self.markets[slot.market]
                    .side_mut(slot.side)
                    .remove(&slot.sequence);
                if let Some(Resting { order, .. }) = resting {
                    self.holders.closed(&order, slot, false);
                    expired.push(order);
                }
            }
        }
        expired
    }

    /// The book's time: the latest an operation happened at.
    pub fn now_ms(&self) -> u64 {
        self.now_ms
    }

    /// The classes the book trades, by name.
    pub fn classes(&self) -> impl Iterator<Item = &GpuClass> {
        self.classes.keys()
    }

    /// Adds an order, submitted at `at_ms` and open until `expires_at_ms`, to its class and
    /// returns its sequence number. Refused, with nothing but the time changed, when its class
    /// is not traded here, its expiry is not after the book's time or more than
    /// [`MAX_ORDER_LIFETIME_MS`] after it, or its owner submitted the same id before in an
    /// order that has not expired (so no two of an owner's orders share an id while either may
    /// trade, and a replayed submission cannot open its order twice; another owner's ids are
    /// its own). Refused too when it would trade with an open order of its own owner on the
    /// other side ([`BookError::SelfTrade`]: a key never trades with itself), or when it is an
    /// ask offering a GPU that another ask offers ([`BookError::GpuOffered`]: one ask per GPU
    /// until that ask expires, or is cancelled before any of its hours traded). The order itself was checked when it was made (see [`Order::new`]: no
    /// empty id or class, no zero quantity, a valid price). The caller checks the owner's
    /// signature, and what backs the order ([`crate::backing`]).
    pub fn submit(
        &mut self,
        order: Order,
        expires_at_ms: u64,
        at_ms: u64,
    ) -> Result<u64, BookError> {
        self.admit(order, expires_at_ms, at_ms, true)
    }

    /// [`Book::submit`] for a submission a store took in before a key's orders were kept
    /// from crossing each other: everything is checked but the self-trade rule, so a store
    /// written then replays to the book it held. Every new submission goes through
    /// [`Book::submit`].
    pub fn restore(
        &mut self,
        order: Order,
        expires_at_ms: u64,
        at_ms: u64,
    ) -> Result<u64, BookError> {
        self.admit(order, expires_at_ms, at_ms, false)
    }

    fn admit(
        &mut self,
        order: Order,
        expires_at_ms: u64,
        at_ms: u64,
        no_self_trade: bool,
    ) -> Result<u64, BookError> {
        self.expire(at_ms);
        let &market = self
            .classes
            .get(order.class())
            .ok_or_else(|| BookError::UnknownClass(order.class().clone()))?;
        if expires_at_ms <= self.now_ms {
            return Err(BookError::Expired {
                id: order.id().clone(),
                expires_at_ms,
                now_ms: self.now_ms,
            });
        }
        if expires_at_ms - self.now_ms > MAX_ORDER_LIFETIME_MS {
            return Err(BookError::LifetimeTooLong {
                id: order.id().clone(),
                expires_at_ms,
                now_ms: self.now_ms,
            });
        }
        let key = key_of(&order);
        if self.ids.contains_key(&key) {
            return Err(BookError::DuplicateId(order.id().clone()));
        }
        if let Some(gpu) = order
            .gpus()
            .iter()
            .find(|g| self.holders.offered.contains_key(*g))
        {
            let by = self.holders.offered[gpu].1.clone();
            return Err(BookError::GpuOffered {
                gpu: gpu.clone(),
                by,
            });
        }
        let other_side = match order.side() {
            Side::Bid => Side::Ask,
            Side::Ask => Side::Bid,
        };
        let crossing = self
            .holders
            .crossing(order.owner(), market, other_side, order.price());
        if let (true, Some(sequence)) = (no_self_trade, crossing) {
            let other = self.markets[market]
                .side(other_side)
                .get(&sequence)
                .map(|r| r.order.id().clone())
                .unwrap_or_else(|| order.id().clone());
            return Err(BookError::SelfTrade {
                id: order.id().clone(),
                other,
            });
        }
        let slot = Slot {
            market,
            side: order.side(),
            sequence: self.next_sequence,
        };
        self.next_sequence += 1;
        self.ids
            .insert(key.clone(), Remembered { slot, open: true });
        self.expiries.insert((expires_at_ms, key));
        self.holders.opened(&order, slot);
        self.markets[market].side_mut(slot.side).insert(
            slot.sequence,
            Resting {
                order,
                expires_at_ms,
                traded: 0,
            },
        );
        Ok(slot.sequence)
    }

    /// Withdraws an open order on behalf of `requester`, the public key (hex, any case) that
    /// signed the cancellation, and returns what was left of it. `id` names one of the
    /// requester's own orders (ids are each owner's own), so only an order's owner can cancel
    /// it. The book holds no keys and sees no signatures: checking that `requester` really
    /// signed this cancellation is the caller's job, before calling. Refused, with the book
    /// unchanged but for the time `at_ms`, for an id the requester has no order under (never
    /// submitted by it, or expired), or an order no longer open.
    ///
    /// With `sequence`, the cancellation is for that order only (the sequence
    /// [`Book::submit`] returned): an id is free again once its order expires, and a
    /// cancellation signed for the earlier order must not cancel a later one under the same
    /// id. It is then refused as unknown.
    pub fn cancel(
        &mut self,
        id: &OrderId,
        requester: &str,
        sequence: Option<u64>,
        at_ms: u64,
    ) -> Result<Order, BookError> {
        self.expire(at_ms);
        let key = (requester.to_ascii_lowercase(), id.clone());
        let slot = match self.ids.get(&key) {
            Some(r) if sequence.is_none_or(|s| s == r.slot.sequence) => {
                if !r.open {
                    return Err(BookError::NotOpen(id.clone()));
                }
                r.slot
            }
            _ => return Err(BookError::UnknownOrder(id.clone())),
        };
        match self.markets[slot.market]
            .side_mut(slot.side)
            .entry(slot.sequence)
        {
            Entry::Occupied(entry) => {
                if let Some(remembered) = self.ids.get_mut(&key) {
                    remembered.open = false;
                }
                let Resting { order, traded, .. } = entry.remove();
                self.holders.closed(&order, slot, traded > 0);
                Ok(order)
            }
            Entry::Vacant(_) => Err(BookError::NotOpen(id.clone())),
        }
    }

    /// Clears one class's orders open at `at_ms` with `mechanism`, takes the traded GPU-hours
    /// off the orders (removing those filled), records the clearing in the history and returns
    /// the record. A clearing with no trade is recorded too. Refused, with the book unchanged
    /// but for the time, for a class not traded here.
    pub fn clear(
        &mut self,
        class: &GpuClass,
        mechanism: Mechanism,
        at_ms: u64,
    ) -> Result<&ClearingRecord, BookError> {
        self.expire(at_ms);
        let &index = self
            .classes
            .get(class)
            .ok_or_else(|| BookError::UnknownClass(class.clone()))?;
        let market = &mut self.markets[index];
        let bids: Vec<&Order> = market.bids.values().map(|r| &r.order).collect();
        let asks: Vec<&Order> = market.asks.values().map(|r| &r.order).collect();
        // The book's orders are one class's, on their sides, each owner's ids distinct.
        let outcome = auction::run(mechanism, &bids, &asks);
        let hours = |orders: &[&Order]| {
            orders
                .iter()
                .map(|o| o.quantity)
                .fold(0u64, u64::saturating_add)
        };
        let number = self.history.len() as u64;
        let clearing = outcome.to_clearing(&bids, &asks);
        let mut leases = Vec::new();
        for (trade, (t, fill)) in clearing.trades.iter().zip(&outcome.fills).enumerate() {
            leases.extend(allocate(
                TradeTerms {
                    clearing: number,
                    trade,
                    renter: &t.bid_owner,
                    provider: &t.ask_owner,
                    quantity: t.quantity,
                    price_micro_usd: t.buyer_pays.micro_usd(),
                    access: bids[fill.bid].access(),
                },
                asks[fill.ask].gpus(),
                &mut self.booked,
                self.now_ms,
            ));
        }
        let record = ClearingRecord {
            number,
            at_ms: self.now_ms,
            class: class.clone(),
            submitted_before: self.next_sequence,
            bids: bids.len(),
            asks: asks.len(),
            bid_hours: hours(&bids),
            ask_hours: hours(&asks),
            clearing,
            leases,
        };
        let (mut bids_filled, mut asks_filled) = (vec![0; bids.len()], vec![0; asks.len()]);
        for fill in &outcome.fills {
            bids_filled[fill.bid] += fill.quantity;
            asks_filled[fill.ask] += fill.quantity;
        }
        let mut holding = Holding {
            market: index,
            ids: &mut self.ids,
            holders: &mut self.holders,
        };
        holding.settle(&mut market.bids, Side::Bid, &bids_filled);
        holding.settle(&mut market.asks, Side::Ask, &asks_filled);
        self.history.push(record);
        Ok(&self.history[self.history.len() - 1])
    }

    /// Every clearing so far, oldest first.
    pub fn history(&self) -> &[ClearingRecord] {
        &self.history
    }

    /// The open orders of one class and side, in submission order, as of the book's time
    /// (none for a class not traded here).
    pub fn open(&self, class: &GpuClass, side: Side) -> impl Iterator<Item = &Order> {
        self.resting(class, side, None).map(|r| r.order)
    }

    /// The open orders of one class and side with their sequence numbers and expiry, in
    /// submission order from the first after sequence `after` (from the start with `None`),
    /// as of the book's time. A reader at a later time leaves out those expired by then.
    pub fn resting(
        &self,
        class: &GpuClass,
        side: Side,
        after: Option<u64>,
    ) -> impl Iterator<Item = OpenOrder<'_>> {
        let from = after.map_or(Bound::Unbounded, Bound::Excluded);
        self.classes
            .get(class)
            .into_iter()
            .flat_map(move |&i| self.markets[i].side(side).range((from, Bound::Unbounded)))
            .map(|(&sequence, r)| OpenOrder {
                sequence,
                order: &r.order,
                expires_at_ms: r.expires_at_ms,
            })
    }

    /// The open order of `owner` (hex, any case) with this id, if there is one.
    pub fn get(&self, owner: &str, id: &OrderId) -> Option<&Order> {
        let remembered = self.ids.get(&(owner.to_ascii_lowercase(), id.clone()))?;
        let slot = remembered.open.then_some(remembered.slot)?;
        self.markets[slot.market]
            .side(slot.side)
            .get(&slot.sequence)
            .map(|r| &r.order)
    }

    /// What the open bids of one owner key (hex, any case) could pay at most, all classes
    /// together: each bid's open GPU-hours at its price, micro-dollars (what its deposit must
    /// cover, [`crate::backing::check_bid_covered`]).
    pub fn bid_commitment_of(&self, owner: &str) -> u128 {
        let Some(held) = self.holders.owned.get(&owner.to_ascii_lowercase()) else {
            return 0;
        };
        held.iter()
            .filter(|&&(_, side, _, _)| side == side_code(Side::Bid))
            .filter_map(|&(market, _, _, sequence)| self.markets[market].bids.get(&sequence))
            .map(|r| crate::backing::bid_value(&r.order))
            .sum()
    }

    /// The number of open orders of one owner key (hex, any case), all classes together.
    pub fn open_by(&self, owner: &str) -> usize {
        self.holders
            .owned
            .get(&owner.to_ascii_lowercase())
            .map_or(0, BTreeSet::len)
    }

    /// The ask offering `gpu` (its owner key and id), if one does: an open ask, or one some
    /// of whose hours traded, until it expires.
    pub fn offering(&self, gpu: &GpuUuid) -> Option<(&str, &OrderId)> {
        self.holders
            .offered
            .get(gpu)
            .map(|(owner, id)| (owner.as_str(), id))
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

/// A book's whole state as data: what a store keeps so that a restart reads it and the events
/// after it, not every event since the market began ([`Book::snapshot`],
/// [`Book::from_snapshot`]). Serializes as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BookSnapshot {
    /// The classes traded.
    pub classes: Vec<GpuClass>,
    /// Every order remembered (open, filled or cancelled, until it expires).
    pub orders: Vec<SnapshotOrder>,
    /// The next sequence number.
    pub next_sequence: u64,
    /// The clearings so far, with their leases.
    pub history: Vec<ClearingRecord>,
    /// Each leased GPU's end of its last lease.
    pub booked: Vec<(GpuUuid, u64)>,
    /// The book's time.
    pub now_ms: u64,
}

/// One remembered order in a [`BookSnapshot`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotOrder {
    /// Its owner key (lowercase hex).
    pub owner: String,
    /// Its owner's id for it.
    pub id: OrderId,
    /// Its class.
    pub class: GpuClass,
    /// Its side.
    pub side: Side,
    /// Its sequence number.
    pub sequence: u64,
    /// When it expires.
    pub expires_at_ms: u64,
    /// The order with what is left of it, while it is open; `None` once filled or cancelled.
    #[serde(default)]
    pub open: Option<OpenPart>,
    /// The GPUs it holds after some of its hours traded, until it expires (a closed ask).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sold: Vec<GpuUuid>,
}

/// An open order in a [`SnapshotOrder`]: the order as it stands and the GPU-hours of it that
/// traded so far.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenPart {
    /// The order, its quantity what is left open.
    pub order: Order,
    /// GPU-hours of it traded so far.
    pub traded: u64,
}

/// Why a snapshot could not become a book: it was not written by [`Book::snapshot`] (or was
/// changed since).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a book snapshot that does not hold together: {0}")]
pub struct SnapshotError(pub String);

impl Book {
    /// The book's whole state, as data.
    pub fn snapshot(&self) -> BookSnapshot {
        let names: Vec<&GpuClass> = {
            let mut v: Vec<(&GpuClass, usize)> =
                self.classes.iter().map(|(c, &i)| (c, i)).collect();
            v.sort_by_key(|&(_, i)| i);
            v.into_iter().map(|(c, _)| c).collect()
        };
        let orders = self
            .expiries
            .iter()
            .filter_map(|(expires_at_ms, key)| {
                let remembered = self.ids.get(key)?;
                let slot = remembered.slot;
                let open = remembered
                    .open
                    .then(|| {
                        self.markets[slot.market]
                            .side(slot.side)
                            .get(&slot.sequence)
                    })
                    .flatten()
                    .map(|r| OpenPart {
                        order: r.order.clone(),
                        traded: r.traded,
                    });
                Some(SnapshotOrder {
                    owner: key.0.clone(),
                    id: key.1.clone(),
                    class: names[slot.market].clone(),
                    side: slot.side,
                    sequence: slot.sequence,
                    expires_at_ms: *expires_at_ms,
                    open,
                    sold: self.holders.sold.get(key).cloned().unwrap_or_default(),
                })
            })
            .collect();
        let mut booked: Vec<(GpuUuid, u64)> =
            self.booked.iter().map(|(g, &t)| (g.clone(), t)).collect();
        booked.sort();
        BookSnapshot {
            classes: names.into_iter().cloned().collect(),
            orders,
            next_sequence: self.next_sequence,
            history: self.history.clone(),
            booked,
            now_ms: self.now_ms,
        }
    }

    /// The book a snapshot holds: equal to the book it was taken of. Refused, with what does
    /// not hold together, for a snapshot that no book could have written (an order of an
    /// unknown class or under another key, one named twice or with a sequence number not
    /// below the next, an open order with nothing left).
    pub fn from_snapshot(snapshot: BookSnapshot) -> Result<Book, SnapshotError> {
        let bad = |why: String| Err(SnapshotError(why));
        let mut book = Book::new(snapshot.classes.iter().cloned());
        if book.classes.len() != snapshot.classes.len() {
            return bad("a class listed twice".into());
        }
        let mut sequences = BTreeSet::new();
        for o in snapshot.orders {
            let Some(&market) = book.classes.get(&o.class) else {
                return bad(format!("order {} of a class not traded", o.id));
            };
            if o.sequence >= snapshot.next_sequence || !sequences.insert(o.sequence) {
                return bad(format!("order {} with sequence {}", o.id, o.sequence));
            }
            let key = (o.owner.to_ascii_lowercase(), o.id.clone());
            if key.0 != o.owner {
                return bad(format!("order {} with an owner not in lowercase", o.id));
            }
            let slot = Slot {
                market,
                side: o.side,
                sequence: o.sequence,
            };
            if let Some(r) = &o.open {
                if key_of(&r.order) != key
                    || r.order.class() != &o.class
                    || r.order.side() != o.side
                    || r.order.quantity == 0
                {
                    return bad(format!("open order {} does not match its entry", o.id));
                }
            }
            if book
                .ids
                .insert(
                    key.clone(),
                    Remembered {
                        slot,
                        open: o.open.is_some(),
                    },
                )
                .is_some()
            {
                return bad(format!("order {} of {} named twice", o.id, o.owner));
            }
            book.expiries.insert((o.expires_at_ms, key.clone()));
            if let Some(r) = o.open {
                book.holders.opened(&r.order, slot);
                book.markets[market].side_mut(o.side).insert(
                    o.sequence,
                    Resting {
                        order: r.order,
                        expires_at_ms: o.expires_at_ms,
                        traded: r.traded,
                    },
                );
            } else if !o.sold.is_empty() {
                for gpu in &o.sold {
                    book.holders.offered.insert(gpu.clone(), key.clone());
                }
                book.holders.sold.insert(key, o.sold);
            }
        }
        book.next_sequence = snapshot.next_sequence;
        book.history = snapshot.history;
        book.booked = snapshot.booked.into_iter().collect();
        book.now_ms = snapshot.now_ms;
        Ok(book)
    }
}

/// What a clearing of one market updates as its orders fill.
struct Holding<'b> {
    market: usize,
    ids: &'b mut HashMap<OrderKey, Remembered>,
    holders: &'b mut Holders,
}

impl Holding<'_> {
    /// Takes `filled[i]` GPU-hours off the i-th of `orders` (one side, in sequence order, as
    /// the clearing saw them), closing those with none left.
    fn settle(&mut self, orders: &mut BTreeMap<u64, Resting>, side: Side, filled: &[u64]) {
        let mut filled = filled.iter();
        let market = self.market;
        orders.retain(|&sequence, Resting { order, traded, .. }| {
            let fill = filled.next().copied().unwrap_or(0);
            order.quantity -= fill;
            *traded += fill;
            if order.quantity == 0 {
                if let Some(remembered) = self.ids.get_mut(&key_of(order)) {
                    remembered.open = false;
                }
                let slot = Slot {
                    market,
                    side,
                    sequence,
                };
                self.holders.closed(order, slot, true);
            }
            order.quantity > 0
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::price::Price;

    const ALICE: &str = "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c";
    const BOB: &str = "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025";
    const CAROL: &str = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";

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

    /// The time of the tests' operations, and an expiry an hour later.
    const NOW: u64 = 1_800_000_000_000;
    const LATER: u64 = NOW + 3_600_000;

    /// Submits `order` now, open for an hour.
    fn put(book: &mut Book, order: Order) -> Result<u64, BookError> {
        book.submit(order, LATER, NOW)
    }

    fn id(id: &str) -> OrderId {
        OrderId::new(id).unwrap()
    }

    fn book() -> Book {
        let mut book = Book::new([h200(), GpuClass::new("L4").unwrap(), h200()]);
        put(&mut book, order("b1", ALICE, Side::Bid, "H200 SXM", 3, 4.0)).unwrap();
        put(&mut book, order("a1", BOB, Side::Ask, "H200 SXM", 2, 2.0)).unwrap();
        book
    }

    #[test]
    fn a_trade_on_an_ask_naming_gpus_becomes_leases_of_them() {
        let mut book = Book::new([h200()]);
        let gpus: Vec<GpuUuid> = ["GPU-1", "GPU-2"]
            .iter()
            .map(|g| GpuUuid::new(*g).unwrap())
            .collect();
        put(
            &mut book,
            order("a1", BOB, Side::Ask, "H200 SXM", 3, 2.0)
                .offering(gpus.clone())
                .unwrap(),
        )
        .unwrap();
        // The bid names how its renter reaches the GPUs; an ask cannot.
        let access = crate::lease::Access::container("ghcr.io/alice/train:1").unwrap();
        assert_eq!(
            order("a9", BOB, Side::Ask, "H200 SXM", 1, 2.0)
                .granting(Some(access.clone()))
                .unwrap_err(),
            crate::OrderError::AskGrantsAccess
        );
        put(
            &mut book,
            order("b1", ALICE, Side::Bid, "H200 SXM", 3, 4.0)
                .granting(Some(access.clone()))
                .unwrap(),
        )
        .unwrap();
        let record = book
            .clear(&h200(), Mechanism::UniformPrice, NOW)
            .unwrap()
            .clone();
        assert!(record
            .leases
            .iter()
            .all(|l| l.access == Some(access.clone())));
        let leases: Vec<(&str, &str, u64)> = record
            .leases
            .iter()
            .map(|l| (l.gpu.as_str(), l.renter.as_str(), l.hours))
            .collect();
        assert_eq!(leases, [("GPU-1", ALICE, 2), ("GPU-2", ALICE, 1)]);
        assert!(record
            .leases
            .iter()
            .all(|l| l.provider == BOB && l.start_ms == NOW));
        // In the record's JSON, and read back the same.
        let json = serde_json::to_string(&record).unwrap();
        assert_eq!(
            serde_json::from_str::<ClearingRecord>(&json).unwrap(),
            record
        );
    }

    #[test]
    fn an_owners_bid_commitment_is_its_open_bids_hours_at_their_prices() {
        let mut book = book();
        put(&mut book, order("b9", ALICE, Side::Bid, "L4", 1, 1.0)).unwrap();
        assert_eq!(book.bid_commitment_of(ALICE), 13_000_000);
        assert_eq!(
            book.bid_commitment_of(&ALICE.to_uppercase()),
            13_000_000,
            "any case"
        );
        assert_eq!(book.bid_commitment_of(BOB), 0, "asks commit nothing");
        // Two of b1's three GPU-hours trade: what is left of it counts.
        book.clear(&h200(), Mechanism::UniformPrice, NOW).unwrap();
        assert_eq!(book.bid_commitment_of(ALICE), 5_000_000);
        book.cancel(&id("b9"), ALICE, None, NOW).unwrap();
        assert_eq!(book.bid_commitment_of(ALICE), 4_000_000);
    }

    #[test]
    fn submissions_rest_in_order_by_class_and_side() {
        let mut book = book();
        assert_eq!(
            book.classes().map(GpuClass::as_str).collect::<Vec<_>>(),
            ["H200 SXM", "L4"]
        );
        assert_eq!(
            put(&mut book, order("b2", CAROL, Side::Bid, "H200 SXM", 1, 5.0)),
            Ok(2)
        );
        let bids: Vec<&str> = book
            .open(&h200(), Side::Bid)
            .map(|o| o.id().as_str())
            .collect();
        assert_eq!(bids, ["b1", "b2"]);
        assert_eq!(book.len(), 3);
        assert_eq!(book.get(BOB, &id("a1")).unwrap().quantity(), 2);
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
            put(&mut book, order("b1", ALICE, Side::Ask, "L4", 1, 1.0)),
            Err(BookError::DuplicateId(id("b1")))
        );
        assert_eq!(
            put(&mut book, order("b9", ALICE, Side::Bid, "A100 SXM", 1, 1.0)),
            Err(BookError::UnknownClass(GpuClass::new("A100 SXM").unwrap()))
        );
        assert_eq!(book, before);
        // A filled order's id stays taken.
        book.clear(&h200(), Mechanism::UniformPrice, NOW).unwrap();
        assert_eq!(book.get(BOB, &id("a1")), None);
        let before = book.clone();
        assert_eq!(
            put(&mut book, order("a1", BOB, Side::Ask, "H200 SXM", 1, 1.0)),
            Err(BookError::DuplicateId(id("a1")))
        );
        assert_eq!(book, before);
    }

    #[test]
    fn only_the_owner_cancels_and_ids_are_each_owners_own() {
        let mut book = book();
        let before = book.clone();
        // Bob has no order b1: Alice's is not his to name.
        assert_eq!(
            book.cancel(&id("b1"), BOB, None, NOW),
            Err(BookError::UnknownOrder(id("b1")))
        );
        assert_eq!(
            book.cancel(&id("zz"), ALICE, None, NOW),
            Err(BookError::UnknownOrder(id("zz")))
        );
        assert_eq!(book, before);
        let cancelled = book
            .cancel(&id("b1"), &ALICE.to_ascii_uppercase(), None, NOW)
            .unwrap();
        assert_eq!(cancelled.id(), &id("b1"));
        assert_eq!(book.len(), 1);
        assert_eq!(
            book.cancel(&id("b1"), ALICE, None, NOW),
            Err(BookError::NotOpen(id("b1")))
        );
        assert_eq!(
            put(&mut book, order("b1", ALICE, Side::Bid, "H200 SXM", 1, 1.0)),
            Err(BookError::DuplicateId(id("b1")))
        );
        // Bob's own b1 is another order: taking Alice's id takes nothing from her.
        assert_eq!(
            put(&mut book, order("b1", BOB, Side::Bid, "H200 SXM", 1, 1.0)),
            Ok(2)
        );
        assert_eq!(book.get(BOB, &id("b1")).unwrap().quantity(), 1);
        assert_eq!(book.get(ALICE, &id("b1")), None);
    }

    #[test]
    fn clearing_takes_off_what_traded_and_records_it() {
        let mut book = book();
        put(&mut book, order("x1", ALICE, Side::Bid, "L4", 1, 1.0)).unwrap();
        let record = book
            .clear(&h200(), Mechanism::UniformPrice, NOW)
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
        assert_eq!(book.get(ALICE, &id("b1")).unwrap().quantity(), 1);
        assert_eq!(book.get(BOB, &id("a1")), None);
        assert_eq!(
            book.cancel(&id("a1"), BOB, None, NOW),
            Err(BookError::NotOpen(id("a1")))
        );
        assert_eq!(book.len(), 2);
        // Nothing left to trade: recorded all the same.
        let record = book.clear(&h200(), Mechanism::McAfee, NOW).unwrap();
        assert_eq!((record.number, record.clearing.units), (1, 0));
        assert_eq!(book.history().len(), 2);
        assert_eq!(book.history()[0].clearing.trades.len(), 1);
    }

    #[test]
    fn clearing_an_unknown_class_changes_nothing() {
        let mut book = book();
        let before = book.clone();
        assert_eq!(
            book.clear(&GpuClass::new("B200").unwrap(), Mechanism::McAfee, NOW),
            Err(BookError::UnknownClass(GpuClass::new("B200").unwrap()))
        );
        assert_eq!(book, before);
    }

    #[test]
    fn price_ties_fill_in_submission_order() {
        let mut book = Book::new([h200()]);
        for (i, owner) in [ALICE, BOB, ALICE].into_iter().enumerate() {
            put(
                &mut book,
                order(&format!("b{i}"), owner, Side::Bid, "H200 SXM", 1, 3.0),
            )
            .unwrap();
        }
        put(&mut book, order("a", CAROL, Side::Ask, "H200 SXM", 2, 1.0)).unwrap();
        let record = book.clear(&h200(), Mechanism::UniformPrice, NOW).unwrap();
        let bids: Vec<&str> = record
            .clearing
            .trades
            .iter()
            .map(|t| t.bid.as_str())
            .collect();
        assert_eq!(bids, ["b0", "b1"]);
        assert_eq!(book.get(ALICE, &id("b2")).unwrap().quantity(), 1);
    }

    #[test]
    fn orders_expire_and_their_ids_are_forgotten_after() {
        let mut book = book();
        let l4 = GpuClass::new("L4").unwrap();
        book.submit(
            order("long", ALICE, Side::Bid, "L4", 1, 1.0),
            LATER + 1,
            NOW,
        )
        .unwrap();
        // At the expiry, b1 and a1 leave the book, unfilled: nothing to clear.
        assert_eq!(book.expire(LATER - 1), vec![]);
        let expired = book.expire(LATER);
        let ids: Vec<&str> = expired.iter().map(|o| o.id().as_str()).collect();
        assert_eq!(ids, ["b1", "a1"], "by expiry, then owner key, then id");
        assert_eq!(book.len(), 1);
        assert_eq!(
            book.clear(&h200(), Mechanism::UniformPrice, LATER)
                .unwrap()
                .clearing
                .units,
            0
        );
        // Their ids are forgotten (no longer held), an expired one cannot be cancelled.
        assert_eq!(
            book.cancel(&id("b1"), ALICE, None, LATER),
            Err(BookError::UnknownOrder(id("b1")))
        );
        // The book's clock does not go back: a late operation happens at the latest time.
        assert_eq!(book.expire(NOW), vec![]);
        assert_eq!(book.now_ms(), LATER);
        // A replay of b1's submission, with its old expiry, is refused as expired.
        assert_eq!(
            book.submit(
                order("b1", ALICE, Side::Bid, "H200 SXM", 3, 4.0),
                LATER,
                LATER
            ),
            Err(BookError::Expired {
                id: id("b1"),
                expires_at_ms: LATER,
                now_ms: LATER
            })
        );
        assert_eq!(book.open(&l4, Side::Bid).count(), 1);
        assert_eq!(book.expire(LATER + 1).len(), 1);
        assert!(book.is_empty());
        assert!(book.ids.is_empty() && book.expiries.is_empty());
    }

    #[test]
    fn a_cancellation_for_an_expired_order_does_not_cancel_a_later_one_of_the_same_id() {
        let mut book = book();
        // Alice's b1 (sequence 0) expires; she submits a new b1 (sequence 2).
        book.expire(LATER);
        let again = book
            .submit(
                order("b1", ALICE, Side::Bid, "H200 SXM", 1, 4.0),
                LATER + 60_000,
                LATER,
            )
            .unwrap();
        assert_eq!(again, 2);
        // A cancellation she signed for the first b1, replayed: refused, the new one stays.
        assert_eq!(
            book.cancel(&id("b1"), ALICE, Some(0), LATER),
            Err(BookError::UnknownOrder(id("b1")))
        );
        assert!(book.get(ALICE, &id("b1")).is_some());
        assert_eq!(
            book.cancel(&id("b1"), ALICE, Some(2), LATER)
                .unwrap()
                .quantity(),
            1
        );
        assert_eq!(
            book.cancel(&id("b1"), ALICE, Some(2), LATER),
            Err(BookError::NotOpen(id("b1")))
        );
    }

    #[test]
    fn an_order_open_too_long_or_already_expired_is_refused() {
        let mut book = book();
        let before = book.clone();
        let late = order("b9", ALICE, Side::Bid, "L4", 1, 1.0);
        assert_eq!(
            book.submit(late.clone(), NOW + MAX_ORDER_LIFETIME_MS + 1, NOW),
            Err(BookError::LifetimeTooLong {
                id: id("b9"),
                expires_at_ms: NOW + MAX_ORDER_LIFETIME_MS + 1,
                now_ms: NOW
            })
        );
        assert!(matches!(
            book.submit(late.clone(), NOW, NOW),
            Err(BookError::Expired { .. })
        ));
        assert_eq!(book, before);
        assert_eq!(book.submit(late, NOW + MAX_ORDER_LIFETIME_MS, NOW), Ok(2));
    }

    #[test]
    fn a_filled_orders_id_is_held_until_its_expiry() {
        let mut book = book();
        book.clear(&h200(), Mechanism::UniformPrice, NOW).unwrap();
        assert_eq!(book.get(BOB, &id("a1")), None);
        assert_eq!(
            book.submit(
                order("a1", BOB, Side::Ask, "H200 SXM", 1, 1.0),
                LATER + 5,
                LATER - 1
            ),
            Err(BookError::DuplicateId(id("a1")))
        );
        assert_eq!(
            book.submit(
                order("a1", BOB, Side::Ask, "H200 SXM", 1, 1.0),
                LATER + 5,
                LATER
            ),
            Ok(2)
        );
    }

    fn ask_of(id: &str, owner: &str, usd: f64, gpus: &[&str]) -> Order {
        order(id, owner, Side::Ask, "H200 SXM", 1, usd)
            .offering(gpus.iter().map(|g| GpuUuid::new(*g).unwrap()).collect())
            .unwrap()
    }

    #[test]
    fn a_key_never_trades_with_itself() {
        let mut book = book();
        let before = book.clone();
        // Bob asks $2 (a1): his bid at $2 or more would cross it, in either order.
        assert_eq!(
            put(&mut book, order("b9", BOB, Side::Bid, "H200 SXM", 1, 2.0)),
            Err(BookError::SelfTrade {
                id: id("b9"),
                other: id("a1")
            })
        );
        // Alice bids $4 (b1): her ask at $4 or less would cross it.
        assert_eq!(
            put(&mut book, order("a9", ALICE, Side::Ask, "H200 SXM", 1, 4.0)),
            Err(BookError::SelfTrade {
                id: id("a9"),
                other: id("b1")
            })
        );
        assert_eq!(book, before);
        // Below one's own ask, above one's own bid, or in another class: no crossing.
        put(&mut book, order("b8", BOB, Side::Bid, "H200 SXM", 1, 1.99)).unwrap();
        put(
            &mut book,
            order("a8", ALICE, Side::Ask, "H200 SXM", 1, 4.01),
        )
        .unwrap();
        put(&mut book, order("l4", ALICE, Side::Ask, "L4", 1, 0.5)).unwrap();
        // Once Bob's ask is gone, his bid at its price is his to make.
        book.cancel(&id("a1"), BOB, None, NOW).unwrap();
        put(&mut book, order("b9", BOB, Side::Bid, "H200 SXM", 1, 2.0)).unwrap();
        let record = book.clear(&h200(), Mechanism::UniformPrice, NOW).unwrap();
        assert!(record
            .clearing
            .trades
            .iter()
            .all(|t| t.bid_owner != t.ask_owner));
        // A store from before the rule replays its crossing order as it was.
        let mut old = Book::new([h200()]);
        put(&mut old, order("a1", BOB, Side::Ask, "H200 SXM", 1, 2.0)).unwrap();
        assert!(old
            .restore(order("b1", BOB, Side::Bid, "H200 SXM", 1, 3.0), LATER, NOW)
            .is_ok());
    }

    #[test]
    fn a_gpu_is_offered_by_one_open_ask_at_a_time() {
        let mut book = Book::new([h200()]);
        put(&mut book, ask_of("a1", BOB, 2.0, &["GPU-1", "GPU-2"])).unwrap();
        let before = book.clone();
        // Another ask naming GPU-2, by Bob or anyone: refused, whatever else it names.
        for owner in [BOB, ALICE] {
            assert_eq!(
                put(&mut book, ask_of("a2", owner, 3.0, &["GPU-3", "GPU-2"])),
                Err(BookError::GpuOffered {
                    gpu: GpuUuid::new("GPU-2").unwrap(),
                    by: id("a1")
                })
            );
        }
        assert_eq!(book, before);
        let gpu2 = GpuUuid::new("GPU-2").unwrap();
        assert_eq!(book.offering(&gpu2), Some((BOB, &id("a1"))));
        // Filled, the ask holds its GPUs until it expires: their hours in its window were
        // sold, and a new ask must not sell them again.
        put(&mut book, order("b1", ALICE, Side::Bid, "H200 SXM", 1, 5.0)).unwrap();
        book.clear(&h200(), Mechanism::UniformPrice, NOW).unwrap();
        assert_eq!(book.get(BOB, &id("a1")), None);
        assert_eq!(book.offering(&gpu2), Some((BOB, &id("a1"))));
        assert!(matches!(
            book.submit(ask_of("a2", BOB, 3.0, &["GPU-2"]), LATER + 1, NOW + 1),
            Err(BookError::GpuOffered { .. })
        ));
        // Expired, it frees them; cancelled before anything traded, likewise.
        book.expire(LATER);
        assert_eq!(book.offering(&gpu2), None);
        book.submit(ask_of("a2", BOB, 3.0, &["GPU-2"]), LATER + 3_600_000, LATER)
            .unwrap();
        book.cancel(&id("a2"), BOB, None, LATER).unwrap();
        assert_eq!(book.offering(&gpu2), None);
        // Cancelled after some of its hours traded, it holds them until it expires.
        let two = order("a3", ALICE, Side::Ask, "H200 SXM", 2, 3.0)
            .offering(vec![gpu2.clone()])
            .unwrap();
        book.submit(two, LATER + 3_600_000, LATER).unwrap();
        book.submit(
            order("b2", BOB, Side::Bid, "H200 SXM", 1, 5.0),
            LATER + 3_600_000,
            LATER,
        )
        .unwrap();
        book.clear(&h200(), Mechanism::UniformPrice, LATER).unwrap();
        assert_eq!(
            book.cancel(&id("a3"), ALICE, None, LATER)
                .unwrap()
                .quantity(),
            1
        );
        assert_eq!(book.offering(&gpu2), Some((ALICE, &id("a3"))));
        book.expire(LATER + 3_600_000);
        assert_eq!(book.offering(&gpu2), None);
        assert!(book.holders.offered.is_empty() && book.holders.owned.is_empty());
        assert!(book.holders.sold.is_empty());
    }

    #[test]
    fn clearings_carry_their_time() {
        let mut book = book();
        let record = book
            .clear(&h200(), Mechanism::UniformPrice, NOW + 5)
            .unwrap();
        assert_eq!(record.at_ms, NOW + 5);
        // The book's time never goes back: a late clearing is stamped with the latest.
        let record = book.clear(&h200(), Mechanism::UniformPrice, NOW).unwrap();
        assert_eq!(record.at_ms, NOW + 5);
        assert_eq!(serde_json::to_value(record).unwrap()["at_ms"], NOW + 5);
    }

    #[test]
    fn records_serialize() {
        let mut book = book();
        let record = book.clear(&h200(), Mechanism::McAfee, NOW).unwrap();
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
