//! The validator's order book for GPU-hours (issue 15): signed orders submitted and cancelled
//! through the API, clearings by the operator, the book and the history of clearings for
//! anyone to read, all persisted in its store ([`crate::market_store`]): a SQLite file of the
//! validator's, or, for a fleet (`--database`), the registry's PostgreSQL database, where every
//! validator holds the same book (docs/stores.md, "The fleet's one book").
//!
//! Routes (merged into the validator's API):
//!
//! - `POST /v1/market/submit`: a [`SUBMIT_KIND`] envelope holding a [`SubmitMessage`], signed by
//!   the order's owner (the key in `order.owner`); anyone else's signature is refused (403).
//!   An ask must be backed ([`pog_market::backing`]): it names GPUs registered here to its
//!   owner key (the agent key), each with a recent accepted proof record that proves its
//!   model, and offers no more GPU-hours than they have before it expires; the market reads
//!   the registry through a [`GpuStanding`] ([`crate::standing::RegistryStanding`] in the
//!   validator). A GPU is offered by one ask at a time, and a key's bid and ask never
//!   trade with each other (the [`Book`] refuses an order that would).
//! - `POST /v1/market/cancel`: a [`CANCEL_KIND`] envelope holding a [`CancelMessage`], signed
//!   by the order's owner; it names one of the signer's own orders (ids are each owner's), so
//!   another key has no such order (404).
//! - `POST /v1/market/clear`: a [`CLEAR_KIND`] envelope holding a [`ClearMessage`], signed by
//!   the validator's own key (its operator runs `pog market clear` with the validator's data
//!   dir); each request, named by its nonce, clears once (a replay gets 409). Open asks whose
//!   GPUs no longer back them are withdrawn first ([`Market::withdraw_unbacked`]).
//! - `POST /v1/market/withdraw` and `POST /v1/market/undelivered`: a renter's withdrawal voucher
//!   ([`Market::withdraw`], its hold kept in the store beside the book, the fleet's on
//!   PostgreSQL) and a provider's report of a lease it could not deliver
//!   ([`Market::report_undelivered`]); like submissions, at most
//!   [`MarketLimits::submits_per_minute_per_source`] a minute from one address.
//! - `GET /v1/market/leases` and `GET /v1/market/settlements`: signed pages of the leases and
//!   their settlements.
//! - `GET /v1/market/info`: the validator's key (which every message must name, so a message
//!   signed for one validator cannot be replayed at another) and the classes traded.
//! - `GET /v1/market/book?class=C`: the open orders (every class without `class`).
//! - `GET /v1/market/history?after=N&limit=M`: clearings numbered above `after`, oldest first.
//!
//! The same store keeps the validator's posted prices (`price_history`, a row per change of a
//! GPU's price, at most [`MAX_PRICE_POINTS_PER_GPU`] per GPU, the oldest dropped first, see
//! [`crate::pricing`]) and how far through the registry's records they are (`market_meta`).
//!
//! A refused request never changes the book: every check runs before anything changes, and
//! the store is the book's source of truth. Every request is judged in one transaction of the
//! store ([`Market`]'s `write`): on PostgreSQL the fleet's `market_sequence` row is locked, the
//! book caught up with every event other validators appended, and the request judged at the
//! database's clock, so no two validators accept conflicting orders and every book expires the
//! same orders at the same points. Reads catch the book up first too (on every read: one
//! indexed query, usually empty, buys a client that submitted at one validator its order at
//! any other at once). A scheduled clearing is made only if, under the lock, its class is
//! still due ([`MarketRequestError::NotDue`]): every validator runs the schedule, and the
//! first to clear a state makes the others' clearing of it a no-op, with no lease to wait for.
//! Snapshots are the book after one numbered event, the same whichever validator writes
//! them, and shared. Each accepted event (the signed submit or cancel
//! as it arrived, the clearing request, or the market's withdrawal of an ask no longer backed)
//! is appended to the `market_events` table; opening
//! the store replays them in order through [`Book`], which is deterministic, so a restarted
//! validator has the same book and history, and remembers the same clearing requests taken
//! (`TakenClears`). If appending fails, the book is rebuilt from the store (emptied, and
//! rebuilt before its next use, when the store cannot be read either), and the request fails.
//! Every [`SNAPSHOT_EVERY`] events the book's whole state ([`pog_market::BookSnapshot`])
//! and the clearing requests taken are written to `market_snapshot` and the events before it
//! deleted, in one transaction: opening the store reads the snapshot and the events after it,
//! not every event since the market began, so the store and a restart stay bounded by the
//! book (what is open or remembered) and its clearings, not by how many requests came.

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use pog_market::backing::{BackingError, BackingRules, GpuStanding, Standing};
use pog_market::quote::Quote;
use pog_market::{
    Book, BookError, ClearingRecord, GpuClass, Mechanism, OpenOrder, Order, OrderId, Side,
};
use pog_net::clock::{SharedClock, SystemClock};
use pog_net::http::ApiError;
use pog_net::locked::Locked;

use pog_signed::{Envelope, Identity, PublicKey, WireError};
use pog_spec::SpecDb;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::market_store::{MarketStore, StoredEvent, Withdrawn};
use crate::registry::Registry;

/// Envelope kind of a signed [`SubmitMessage`].
pub const SUBMIT_KIND: &str = "market-submit";
/// Envelope kind of a signed [`CancelMessage`].
pub const CANCEL_KIND: &str = "market-cancel";
/// Envelope kind of a signed [`ClearMessage`].
pub const CLEAR_KIND: &str = "market-clear";

/// The most clearings one history page returns.
pub const MAX_HISTORY_PAGE: usize = 1000;

/// An order, for the validator named.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmitMessage {
    /// The validator's public key: the message is for this validator only.
    pub validator: PublicKey,
    /// The order itself; its owner must be the message's signer.
    pub order: Order,
    /// When the order leaves the book if it has not filled, ms since the Unix epoch: after
    /// the validator receives it, and at most
    /// [`MAX_ORDER_LIFETIME_MS`](pog_market::MAX_ORDER_LIFETIME_MS) after. Signed with the
    /// order, so a captured submission replayed after it is refused. Required of every new
    /// submission; a store written before orders expired holds submissions without it, which
    /// replay as open for the longest lifetime from when they came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<u64>,
}

/// A cancellation of one of the signer's orders.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CancelMessage {
    /// The validator's public key: the message is for this validator only.
    pub validator: PublicKey,
    /// The id of the signer's order to cancel.
    pub id: OrderId,
    /// The order's sequence number in the book (its submission returned it; the book lists
    /// it): an id is free again once its order expires, so a cancellation names the one order
    /// it is for, and a captured one cannot cancel a later order of the same id. Required of
    /// every new cancellation; stores written before it replay without.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<u64>,
}

/// The operator's request to clear one class.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClearMessage {
    /// The validator's public key: the message is for this validator only.
    pub validator: PublicKey,
    /// The class whose book is cleared.
    pub class: GpuClass,
    /// The auction that clears it.
    pub mechanism: Mechanism,
    /// When the operator asked, ms since the Unix epoch: an old request replayed later is
    /// refused (see [`CLEAR_MAX_AGE_MS`]).
    pub at_ms: u64,
    /// This request's own random id ([`fresh_clear_nonce`]): the market takes each nonce
    /// once, so a captured request replayed within its age window is refused (409), and two
    /// clearings of the same class are two requests. Required of every new request (1 to
    /// [`MAX_CLEAR_NONCE_LEN`] letters, digits, `-` or `_`); a store written before requests
    /// carried one replays without.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nonce: Option<String>,
}

/// How old a clearing request may be when it arrives, and how far in the future.
pub const CLEAR_MAX_AGE_MS: u64 = 5 * 60 * 1000;

/// The longest nonce a clearing request may carry: the market holds every nonce it took for
/// as long as its request could still arrive.
pub const MAX_CLEAR_NONCE_LEN: usize = 64;

/// What `GET /v1/market/info` returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarketInfo {
    /// The validator's public key, which every message to this market must name.
    pub validator: PublicKey,
    /// The classes its book trades.
    pub classes: Vec<GpuClass>,
}

/// The most open orders one page of the book returns.
pub const MAX_BOOK_PAGE: usize = 1000;

/// An open order as the book lists it: the order, its place in the book's sequence and when
/// it expires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BookEntry {
    /// The order as it stands now.
    #[serde(flatten)]
    pub order: Order,
    /// Its place in the book's sequence; a cancellation names it.
    pub sequence: u64,
    /// When it leaves the book if it has not filled, ms since the Unix epoch.
    pub expires_at_ms: u64,
}

/// What `GET /v1/market/book?class=&after=&limit=` returns: one page of the orders open now,
/// both sides together in submission order (sequence above `after`), split by side, each side
/// by price (bids highest first, asks lowest first).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BookView {
    /// The page's open bids.
    pub bids: Vec<BookEntry>,
    /// The page's open asks.
    pub asks: Vec<BookEntry>,
    /// Pass as `after` for the next page; absent on the last one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_after: Option<u64>,
}

impl BookView {
    /// The same orders by price, as a book is read: bids highest first, asks lowest first,
    /// each by class first (the book of several classes is one book per class), and ties in
    /// submission order (the order they fill in).
    pub fn by_price(mut self) -> BookView {
        self.bids.sort_by(|a, b| {
            (
                a.order.class(),
                std::cmp::Reverse(a.order.price()),
                a.sequence,
            )
                .cmp(&(
                    b.order.class(),
                    std::cmp::Reverse(b.order.price()),
                    b.sequence,
                ))
        });
        self.asks.sort_by(|a, b| {
            (a.order.class(), a.order.price(), a.sequence).cmp(&(
                b.order.class(),
                b.order.price(),
                b.sequence,
            ))
        });
        self
    }
}

/// What `GET /v1/market/history` returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryPage {
    /// The page's clearings, oldest first.
    pub clearings: Vec<ClearingRecord>,
    /// Pass as `after` for the next page; absent on the last one.
    pub next_after: Option<u64>,
}

/// One lease as `GET /v1/market/leases` lists it: the lease, its class and where it stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseView {
    /// The lease.
    #[serde(flatten)]
    pub lease: pog_market::lease::Lease,
    /// The GPU class it was traded in.
    pub class: GpuClass,
    /// "pending", "active" or "ended", by the validator's clock at `now_ms`.
    pub state: String,
}

/// What `GET /v1/market/leases` returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeasePage {
    /// The validator's clock when it answered, ms since the Unix epoch.
    pub now_ms: u64,
    /// The leases asked for, the newest first (at most the limit).
    pub leases: Vec<LeaseView>,
}

/// The kind a lease page is signed under: the validator's answer to `GET /v1/market/leases`,
/// an envelope whose body is a [`LeasePage`], so that an agent delivering leases (granting a
/// renter access to its GPU) acts only on what its trusted validator's key signed, not on
/// whatever answered at the validator's URL.
pub const LEASES_KIND: &str = "market-leases";

/// Which leases `GET /v1/market/leases` lists.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseFilter {
    /// Only those whose renter or provider is this key (hex, any case).
    pub party: Option<String>,
    /// Only those of this GPU.
    pub gpu: Option<String>,
    /// Only the lease with this id.
    pub id: Option<String>,
    /// At most this many (default 100, at most 1000).
    pub limit: Option<usize>,
}

/// What a submit returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Submitted {
    /// The order's id.
    pub id: OrderId,
    /// The order's place in the book's sequence.
    pub sequence: u64,
}

/// What a cancel returns: what was left of the order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cancelled {
    /// The order as it stood when cancelled (its unfilled remainder).
    pub order: Order,
}

pub use crate::market_store::{MarketError, MAX_PRICE_POINTS_PER_GPU};

/// Why the market refused a submission, a cancellation or a clearing, or failed to take it
/// in. What the API answers for each is decided in one place: `From<MarketRequestError> for
/// ApiError`, next to the [`router`].
#[derive(Debug, thiserror::Error)]
pub enum MarketRequestError {
    /// The source address has used up its submissions for now
    /// ([`MarketLimits::submits_per_minute_per_source`]).
    #[error("more than {per_minute} order submissions a minute from {address}: retry later")]
    TooManySubmissions {
        /// The source address.
        address: std::net::IpAddr,
        /// The submissions it may make a minute.
        per_minute: f64,
    },
    /// The signed envelope could not be read, or is not the message of its kind.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// The envelope, already verified, could not be read again to be stored.
    #[error(transparent)]
    Envelope(serde_json::Error),
    /// The message is for another validator.
    #[error(
        "the message names validator {named}, not this one ({ours}): sign it for this validator"
    )]
    OtherValidator {
        /// The validator the message names.
        named: PublicKey,
        /// This market's validator.
        ours: PublicKey,
    },
    /// The order was signed by another key than its owner's.
    #[error("order {id} is owned by {owner} but signed by {signer}: an order is signed by its owner's key")]
    NotOwner {
        /// The order's id.
        id: OrderId,
        /// Its owner.
        owner: String,
        /// The key that signed it.
        signer: PublicKey,
    },
    /// The order names no expiry.
    #[error("order {id} names no expiry (expires_at_ms): every order leaves the book by a time its owner signs")]
    NoExpiry {
        /// The order's id.
        id: OrderId,
    },
    /// The book holds [`MarketLimits::max_open`] open orders.
    #[error("the book holds {open} open orders, its limit: retry after a clearing")]
    BookFull {
        /// The orders open.
        open: usize,
    },
    /// The owner holds [`MarketLimits::max_open_per_owner`] open orders.
    #[error("{owner} has {open} open orders, its limit: cancel one or wait for a clearing")]
    OwnerFull {
        /// The order's owner.
        owner: PublicKey,
        /// The orders it has open.
        open: usize,
    },
    /// The cancellation names no sequence number.
    #[error("the cancellation of {id} names no sequence: it must name the one order it is for (the book lists each order's)")]
    NoSequence {
        /// The id of the order to cancel.
        id: OrderId,
    },
    /// A clearing request signed by another key than the validator's.
    #[error("only the validator's own key may clear the market (run `pog market clear` with the validator's data dir)")]
    NotOperator,
    /// The clearing request carries no nonce.
    #[error("the clearing request names no nonce: each request carries a fresh random one, so that it clears once (update the client that signed it)")]
    NoNonce,
    /// The clearing request's nonce is not of the form [`ClearMessage::nonce`] asks.
    #[error("the clearing request's nonce must be 1 to {MAX_CLEAR_NONCE_LEN} letters, digits, '-' or '_'")]
    BadNonce,
    /// The clearing request was signed more than [`CLEAR_MAX_AGE_MS`] before the clock or the
    /// book's time, or that far ahead of the clock.
    #[error("the clearing request is more than five minutes old or ahead: sign a new one (check the clock)")]
    Stale,
    /// A scheduled clearing found its class cleared already, or not changed since (another
    /// validator of the fleet cleared it first): nothing to clear.
    #[error("{class} has nothing new to clear")]
    NotDue {
        /// The class.
        class: GpuClass,
    },
    /// The clearing request (its nonce) was taken already.
    #[error("clearing request {nonce} was taken already: each signed request clears once (sign a new one to clear again)")]
    Replayed {
        /// The request's nonce.
        nonce: String,
    },
    /// The book refused the order, the cancellation or the clearing.
    #[error(transparent)]
    Book(#[from] BookError),
    /// The order is not backed (an ask's GPUs: see [`pog_market::backing`]).
    #[error(transparent)]
    Backing(#[from] BackingError),
    /// An accepted event could not be written as JSON to be stored.
    #[error(transparent)]
    Encode(serde_json::Error),
    /// The store failed to keep an accepted event (the book is rebuilt from the store).
    #[error(transparent)]
    Store(#[from] MarketError),
    /// The market signs no withdrawal vouchers (no escrow settlement key, or no deposits).
    #[error("this validator signs no withdrawal vouchers (it settles through no escrow): once it is gone, withdraw the whole account without one")]
    NoVouchers,
    /// The withdrawal request was signed more than five minutes from the clock, or not after
    /// the renter's last one (a replay).
    #[error("the withdrawal request is more than five minutes old or ahead, or not newer than the last one taken: sign a new one (check the clock)")]
    StaleWithdrawal,
    /// The withdrawal asks for more than the account holds beyond its bids and leases.
    #[error("withdrawing {asked} µ$ of {owner}'s account: only {available} µ$ is free of its open bids, leases and vouchers (of a deposit of {deposit} µ$)")]
    WithdrawalNotCovered {
        /// The account's key.
        owner: PublicKey,
        /// What was asked.
        asked: u64,
        /// What is free.
        available: u128,
        /// The account's balance.
        deposit: u128,
    },
    /// The voucher could not be signed now (the chain did not answer).
    #[error("signing the voucher: {0}")]
    VoucherUnavailable(String),
    /// The market settles no leases.
    #[error("this market settles no leases")]
    NoSettlements,
    /// No lease has this id.
    #[error("no lease {0} here")]
    UnknownLease(String),
    /// Only a lease's provider reports its delivery.
    #[error("lease {lease} is not provided by {signer}: only its provider reports its delivery")]
    NotProvider {
        /// The lease.
        lease: String,
        /// The key that signed.
        signer: PublicKey,
    },
    /// The report's time is outside the lease or ahead of the clock, or its reason too long.
    #[error("the report on lease {lease} names a time outside the lease or ahead of the clock, or a reason over 512 bytes")]
    BadUndelivered {
        /// The lease.
        lease: String,
    },
    /// The settlements' store failed.
    #[error("the settlements' store: {0}")]
    SettlementStore(String),
}

/// One stored event.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "event")]
enum Event {
    /// A signed submit or cancel, exactly as it arrived.
    Submit {
        envelope: Envelope,
    },
    Cancel {
        envelope: Envelope,
    },
    Clear {
        envelope: Envelope,
    },
    /// An open ask the market withdrew because its GPUs no longer backed it (see
    /// [`Market::clear`]), as its owner's cancellation of that order.
    Withdraw {
        owner: String,
        id: OrderId,
        sequence: u64,
        why: String,
    },
}

/// What one market lets its submitters hold: anyone can make keys, so the book is bounded by
/// each key's open orders, by all open orders together, and by the submissions each source
/// address may make; and every order leaves at its expiry, at most
/// [`MAX_ORDER_LIFETIME_MS`](pog_market::MAX_ORDER_LIFETIME_MS) after it came (every submission, even one cancelled later,
/// stays in the store: the store is the book's history).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MarketLimits {
    /// Open orders one owner key may have; a submission beyond is refused (429).
    pub max_open_per_owner: usize,
    /// Open orders across all owners and classes; a submission beyond is refused (503).
    pub max_open: usize,
    /// Submissions one source address (an IPv4 address or IPv6 /64) may make a minute (and at
    /// once); beyond, refused (429) before the message is read.
    pub submits_per_minute_per_source: f64,
}

impl Default for MarketLimits {
    fn default() -> Self {
        MarketLimits {
            max_open_per_owner: 100,
            max_open: 20_000,
            submits_per_minute_per_source: 60.0,
        }
    }
}

/// The book and its store.
pub struct Market {
    validator: PublicKey,
    inner: Mutex<Inner>,
    limits: MarketLimits,
    /// Submissions per source address ([`MarketLimits::submits_per_minute_per_source`]).
    submitters: Mutex<pog_net::buckets::PerSource>,
    /// The wall clock orders expire and clearing requests age by.
    clock: SharedClock,
    /// The registry as backing an ask needs it: GPU → agent key, model, latest proof.
    standing: Arc<dyn GpuStanding + Send + Sync>,
    /// How an ask's backing is judged.
    backing: BackingRules,
    /// The escrow's deposits that back bids; `None`: bids are not backed (no escrow given).
    deposits: Option<Arc<dyn pog_market::backing::Deposits + Send + Sync>>,
    /// Where each clearing's leases go once it is stored (the validator's ledger).
    lease_sink: Option<Arc<dyn LeaseSink + Send + Sync>>,
    /// The validator's identity, which signs the lease pages; `None`: none are served.
    signer: Option<Identity>,
    /// The leases' settlements: what each lease still holds of its renter's deposit counts
    /// against the renter's bids; `None`: leases hold nothing (bids unbacked, or tests).
    settlements: Option<Arc<crate::settlement::Settlements>>,
    /// The escrow's settlement key, which signs withdrawal vouchers; `None`: none are signed.
    vouchers: Option<Arc<dyn crate::settlement::EscrowPayments>>,
    /// The classes cleared since the pricing last took them, and whom to wake on a clearing.
    cleared: Mutex<(BTreeSet<GpuClass>, Option<Arc<tokio::sync::Notify>>)>,
    /// Held while clearings' leases are handed to the sink ([`Market::hand_pending_leases`]).
    handing: Mutex<()>,
    /// Whether other validators share the store (a fleet's book on PostgreSQL).
    shared: bool,
}

impl crate::settlement::LeaseBook for Market {
    fn all_leases(&self) -> Vec<pog_market::lease::Lease> {
        Market::all_leases(self)
    }

    fn log_pending_leases(&self) -> Result<usize, String> {
        self.hand_pending_leases(None)
    }

    /// Clones only the leases under way (the schedule asks every round).
    fn active_at(&self, now_ms: u64) -> Vec<pog_market::lease::Lease> {
        self.read()
            .book
            .history()
            .iter()
            .flat_map(|r| r.leases.iter())
            .filter(|l| l.start_ms <= now_ms && now_ms < l.end_ms)
            .cloned()
            .collect()
    }
}

/// Where a clearing's leases go once the clearing is stored: the validator signs each into
/// its ledger ([`crate::app`]).
pub trait LeaseSink {
    /// Takes the leases one clearing of `class` made; `maybe_taken`: some of them may have been
    /// taken already (a crash came before they were marked), and are to be taken once.
    fn leased(
        &self,
        class: &GpuClass,
        leases: &[pog_market::lease::Lease],
        maybe_taken: bool,
    ) -> Result<(), String>;
}

struct Inner {
    book: Book,
    store: MarketStore,
    /// Classes whose book changed (an order submitted or cancelled) since their last
    /// clearing: the scheduled clearing clears these only ([`Market::clear_due`]).
    dirty: BTreeSet<GpuClass>,
    /// The clearing requests taken that could still arrive again.
    taken: TakenClears,
    /// The number of the last stored event the book holds.
    applied: i64,
    /// The event the last snapshot known here was taken after.
    snapshot_through: i64,
    /// How many events between snapshots ([`SNAPSHOT_EVERY`]).
    snapshot_every: u64,
    /// The events the request being judged has applied to the book, each with the book's time
    /// then, to be stored when it is accepted ([`Inner::stage`]).
    pending: Vec<(&'static str, Event, u64)>,
    /// The book may hold what the store does not (a store that failed after a change, and
    /// could not be read back): it is rebuilt before it is read or changed again.
    stale: bool,
}

/// How many times a rebuild reads the store again when another validator's snapshot dropped
/// the events after the one it read.
const REBUILD_TRIES: usize = 3;

/// Events stored between two snapshots of the book: a restart reads the last snapshot and at
/// most this many events after it.
pub const SNAPSHOT_EVERY: u64 = 10_000;

/// The nonces of the clearing requests taken whose age window the book's time has not yet
/// passed, each with its request's `at_ms`: a request is refused unless `at_ms` is within
/// [`CLEAR_MAX_AGE_MS`] of both the clock and the book's time (which never goes back), so a
/// nonce forgotten here belongs to a request that is refused by its age anyway, even after
/// the clock steps back. It holds the clearings of about ten minutes (five back, five ahead),
/// all signed by the validator's own key; a restart rebuilds it from the stored clearings.
#[derive(Debug, Default, Serialize, Deserialize)]
struct TakenClears {
    nonces: HashMap<String, u64>,
}

impl TakenClears {
    fn contains(&self, nonce: &str) -> bool {
        self.nonces.contains_key(nonce)
    }

    /// Takes `nonce` of a request signed at `at_ms`, and forgets the requests that the book's
    /// time `book_ms` has put past their window.
    fn take(&mut self, nonce: String, at_ms: u64, book_ms: u64) {
        self.nonces.insert(nonce, at_ms);
        self.nonces
            .retain(|_, signed_ms| signed_ms.saturating_add(CLEAR_MAX_AGE_MS) >= book_ms);
    }
}

/// One price the validator posted for a GPU, and what made it quote again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PostedPrice {
    /// Its number in the validator's price history (increasing; 0 before it is stored).
    pub seq: i64,
    /// The GPU priced.
    pub gpu_uuid: String,
    /// When it was quoted, ms since the Unix epoch.
    pub at_ms: u64,
    /// Why it was quoted: the record that came in.
    pub cause: String,
    /// The latest proof record the price rests on.
    pub record_id: Option<i64>,
    /// The GPU's model, when it is known.
    pub model: Option<String>,
    /// The GPU's score and verified worth (reference GPUs) when quoted.
    pub score: f64,
    /// The GPU's verified worth in reference GPUs when quoted.
    pub gpu_worth: f64,
    /// Price per GPU-hour in micro-dollars; null when the GPU is not priced.
    pub price_micro_usd: Option<u64>,
    /// Why it is not priced, when it is not.
    pub unpriced: Option<String>,
    /// Every factor of the price.
    pub quote: Option<Quote>,
    /// What the market factor was measured from: the class's leased and proven GPU-hours and
    /// its trades over the trailing window; null for a point from before (or of no class).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signals: Option<pog_market::signals::MarketSignals>,
}

/// A new order id (`o-` and 16 random bytes in hex): unique among its owner's orders
/// without keeping count.
pub fn fresh_order_id() -> OrderId {
    let bytes: [u8; 16] = pog_signed::random_bytes();
    OrderId::new(format!("o-{}", hex::encode(bytes))).expect("a short, plain id")
}

/// A new clearing request nonce (16 random bytes in hex): never the same twice.
pub fn fresh_clear_nonce() -> String {
    hex::encode(pog_signed::random_bytes::<16>())
}

/// The classes a validator's book trades: every model of the spec database.
pub fn classes() -> Vec<GpuClass> {
    SpecDb::embedded()
        .all()
        .iter()
        .filter_map(|g| GpuClass::new(g.model.clone()).ok())
        .collect()
}

impl Market {
    /// Opens (creating if needed) the market at `path` (`None`: in memory) for the validator
    /// with public key `validator`, replaying its stored events.
    pub fn open(path: Option<&Path>, validator: &PublicKey) -> Result<Market, MarketError> {
        Market::on(MarketStore::sqlite(path)?, validator)
    }

    /// Opens the market where `registry` is kept: in its PostgreSQL database, where it is the
    /// one book of every validator on that database, or else at `path` ([`Market::open`]).
    pub fn open_beside(
        registry: &Registry,
        path: Option<&Path>,
        validator: &PublicKey,
    ) -> Result<Market, MarketError> {
        match registry.postgres() {
            Some(pg) => Market::on(MarketStore::postgres(pg.clone(), validator), validator),
            None => Market::open(path, validator),
        }
    }

    /// The market on `store`, its book rebuilt from it.
    fn on(store: MarketStore, validator: &PublicKey) -> Result<Market, MarketError> {
        let shared = store.shared();
        let mut inner = Inner {
            book: Book::new(classes()),
            store,
            dirty: BTreeSet::new(),
            taken: TakenClears::default(),
            applied: 0,
            snapshot_through: 0,
            snapshot_every: SNAPSHOT_EVERY,
            pending: Vec::new(),
            stale: true,
        };
        inner.rebuild(validator)?;
        let limits = MarketLimits::default();
        Ok(Market {
            validator: validator.clone(),
            inner: Mutex::new(inner),
            limits,
            submitters: Mutex::new(pog_net::buckets::PerSource::per_minute(
                limits.submits_per_minute_per_source,
            )),
            clock: SystemClock::shared(),
            standing: Arc::new(std::collections::BTreeMap::<pog_signed::GpuUuid, Standing>::new()),
            backing: BackingRules::default(),
            deposits: None,
            lease_sink: None,
            signer: None,
            settlements: None,
            vouchers: None,
            cleared: Mutex::new((BTreeSet::new(), None)),
            handing: Mutex::new(()),
            shared,
        })
    }

    /// The same market signing its lease pages with `identity` (the validator's: its public
    /// key must be the market's).
    pub fn with_signer(mut self, identity: Identity) -> Market {
        debug_assert!(identity.public_key() == self.validator);
        self.signer = Some(identity);
        self
    }

    /// [`Market::leases`], signed by the validator ([`LEASES_KIND`]); `None` when the market
    /// has no signer.
    pub fn signed_leases(&self, filter: &LeaseFilter) -> Option<Result<Envelope, WireError>> {
        let signer = self.signer.as_ref()?;
        Some(signer.seal(LEASES_KIND, &self.leases(filter)))
    }

    /// The same market handing each clearing's leases to `sink` once it is stored.
    pub fn with_lease_sink(mut self, sink: Arc<dyn LeaseSink + Send + Sync>) -> Market {
        self.lease_sink = Some(sink);
        self
    }

    /// The same market backing bids by `deposits` (the escrow's balances): a bid is taken
    /// only while what its owner's open bids could pay, with it, is covered.
    pub fn with_deposits(
        mut self,
        deposits: Arc<dyn pog_market::backing::Deposits + Send + Sync>,
    ) -> Market {
        self.deposits = Some(deposits);
        self
    }

    /// The same market counting what its leases still hold of each renter's deposit
    /// ([`crate::settlement::Settlements::held_by`]) against the renter's bids, and serving
    /// the settlements (signed, with [`Market::with_signer`]).
    pub fn with_settlements(mut self, settlements: Arc<crate::settlement::Settlements>) -> Market {
        self.settlements = Some(settlements);
        self
    }

    /// The same market signing withdrawal vouchers with the escrow's settlement key (with
    /// deposits: what is free of bids, leases and vouchers may be withdrawn).
    pub fn with_vouchers(mut self, escrow: Arc<dyn crate::settlement::EscrowPayments>) -> Market {
        self.vouchers = Some(escrow);
        self
    }

    /// A withdrawal voucher for a signed [`crate::settlement::WithdrawMessage`] (the envelope's
    /// bytes): up to what the renter's deposit holds beyond its open bids, the leases not yet
    /// paid for and its last voucher. The hold is taken in the market's store, in the same
    /// transaction and under the same lock as submissions ([`Market::write`]): a fleet's
    /// validators count each other's vouchers, and judge two withdrawals at once one after
    /// the other. Reads the chain: call it off the async runtime's workers.
    pub fn withdraw(&self, bytes: &[u8]) -> Result<crate::settlement::Voucher, MarketRequestError> {
        use crate::settlement::{WithdrawMessage, VOUCHER_LIFETIME_MS, WITHDRAW_KIND};
        let (message, signer): (WithdrawMessage, PublicKey) =
            pog_signed::decode(bytes, WITHDRAW_KIND)?;
        self.check_validator(&message.validator)?;
        let (Some(deposits), Some(vouchers)) = (&self.deposits, &self.vouchers) else {
            return Err(MarketRequestError::NoVouchers);
        };
        let now = self.clock.now_ms();
        let stale = |last: Option<Withdrawn>| last.is_some_and(|w| message.at_ms <= w.at_ms);
        // A stale or replayed request is refused before the chain is read for it.
        if message.at_ms.abs_diff(now) > CLEAR_MAX_AGE_MS
            || stale(self.lock().store.withdrawal(&signer)?)
        {
            return Err(MarketRequestError::StaleWithdrawal);
        }
        let deposit = deposits
            .deposit_of(&signer)
            .map_err(BackingError::DepositsUnavailable)?;
        let until_ms = now.saturating_add(VOUCHER_LIFETIME_MS);
        let previous = self.write(|inner, _| {
            // Read again under the lock: another request may have been taken meanwhile.
            let previous = inner.store.withdrawal(&signer)?;
            if stale(previous) {
                return Err(MarketRequestError::StaleWithdrawal);
            }
            let held_by_voucher = previous.map_or(0, |w| w.holds_at(now));
            let held = inner.book.bid_commitment_of(signer.as_str())
                + self.held_by_leases(inner, &signer)
                + u128::from(held_by_voucher);
            let available = deposit.saturating_sub(held);
            if u128::from(message.amount_micro_usd) > available {
                return Err(MarketRequestError::WithdrawalNotCovered {
                    owner: signer.clone(),
                    asked: message.amount_micro_usd,
                    available,
                    deposit,
                });
            }
            // Held from the commit: a bid judged while the chain is asked cannot spend it.
            let hold = Withdrawn {
                at_ms: message.at_ms,
                amount: message.amount_micro_usd.saturating_add(held_by_voucher),
                until_ms,
            };
            inner.store.put_withdrawal(&signer, Some(hold), now)?;
            Ok(previous)
        })?;
        vouchers
            .voucher(&signer, message.amount_micro_usd, until_ms / 1000)
            .map_err(|e| {
                // Nothing signed: the hold goes back to what it was.
                let given_back = self.write(|inner, _| {
                    let hold = match inner.store.withdrawal(&signer)? {
                        // Still this request's: as before it, so that it may be sent again.
                        Some(w) if w.at_ms == message.at_ms => previous,
                        // A newer request's, which counted this one's hold: less this one.
                        Some(w) => Some(Withdrawn {
                            amount: w.amount.saturating_sub(message.amount_micro_usd),
                            ..w
                        }),
                        None => None,
                    };
                    Ok(inner.store.put_withdrawal(&signer, hold, now)?)
                });
                if let Err(e) = given_back {
                    tracing::warn!(error = %e, renter = %signer, "giving back a withdrawal's hold: it holds until it expires");
                }
                MarketRequestError::VoucherUnavailable(e.to_string())
            })
    }

    /// Takes a provider's signed [`crate::settlement::UndeliveredMessage`] (the envelope's
    /// bytes): its lease hook could not give the renter access, so the lease's hours after it
    /// are not paid. Only the lease's provider may report it, for a time within the lease and
    /// not ahead of the clock; the first report of a lease stands. Returns the time kept.
    pub fn report_undelivered(&self, bytes: &[u8]) -> Result<u64, MarketRequestError> {
        use crate::settlement::{UndeliveredMessage, MAX_UNDELIVERED_REASON, UNDELIVERED_KIND};
        let (message, signer): (UndeliveredMessage, PublicKey) =
            pog_signed::decode(bytes, UNDELIVERED_KIND)?;
        self.check_validator(&message.validator)?;
        let Some(settlements) = &self.settlements else {
            return Err(MarketRequestError::NoSettlements);
        };
        let lease = self
            .all_leases()
            .into_iter()
            .find(|l| l.id == message.lease_id)
            .ok_or_else(|| MarketRequestError::UnknownLease(message.lease_id.clone()))?;
        if !lease.provider.eq_ignore_ascii_case(signer.as_str()) {
            return Err(MarketRequestError::NotProvider {
                lease: lease.id,
                signer,
            });
        }
        let now = self.clock.now_ms();
        if message.at_ms < lease.start_ms
            || message.at_ms >= lease.end_ms
            || message.at_ms > now.saturating_add(CLEAR_MAX_AGE_MS)
            || message.reason.len() > MAX_UNDELIVERED_REASON
        {
            return Err(MarketRequestError::BadUndelivered { lease: lease.id });
        }
        settlements
            .report_undelivered(&lease.id, message.at_ms, &message.reason)
            .map_err(|e| MarketRequestError::SettlementStore(e.to_string()))
    }

    /// The settlements it serves, if any.
    pub fn settlements(&self) -> Option<&Arc<crate::settlement::Settlements>> {
        self.settlements.as_ref()
    }

    /// Every lease its clearings made, oldest first.
    pub fn all_leases(&self) -> Vec<pog_market::lease::Lease> {
        self.read()
            .book
            .history()
            .iter()
            .flat_map(|r| r.leases.iter().cloned())
            .collect()
    }

    /// What `renter`'s leases still hold of its deposit, micro-dollars (0 without settlements).
    fn held_by_leases(&self, inner: &Inner, renter: &PublicKey) -> u128 {
        let Some(settlements) = &self.settlements else {
            return 0;
        };
        settlements.catch_up();
        inner
            .book
            .history()
            .iter()
            .flat_map(|r| r.leases.iter())
            .filter(|l| l.renter.eq_ignore_ascii_case(renter.as_str()))
            .map(|l| u128::from(settlements.held_by(l)))
            .sum()
    }

    /// [`crate::settlement::Settlements::page`], signed by the validator
    /// ([`crate::settlement::SETTLEMENTS_KIND`]); `None` when the market has no signer or no
    /// settlements.
    pub fn signed_settlements(
        &self,
        filter: &crate::settlement::SettlementFilter,
    ) -> Option<Result<Envelope, String>> {
        let (signer, settlements) = (self.signer.as_ref()?, self.settlements.as_ref()?);
        let page = match settlements.page(filter) {
            Ok(settlements) => crate::settlement::SettlementPage {
                now_ms: self.clock.now_ms(),
                settlements,
            },
            Err(e) => return Some(Err(e.to_string())),
        };
        Some(
            signer
                .seal(crate::settlement::SETTLEMENTS_KIND, &page)
                .map_err(|e| e.to_string()),
        )
    }

    /// Whether bids are backed by deposits.
    pub fn backs_bids(&self) -> bool {
        self.deposits.is_some()
    }

    /// The same market backing asks by `standing` (the validator's
    /// [`crate::standing::RegistryStanding`]); until it is given one, the market knows no GPU
    /// and refuses every ask.
    pub fn with_standing(mut self, standing: Arc<dyn GpuStanding + Send + Sync>) -> Market {
        self.standing = standing;
        self
    }

    /// The same market judging asks' backing by `rules` instead of the defaults.
    pub fn with_backing_rules(mut self, rules: BackingRules) -> Market {
        self.backing = rules;
        self
    }

    /// The same market on `clock` instead of the system clock (a test's
    /// [`pog_net::clock::ManualClock`]): what expires orders, ages clearing requests and
    /// stamps the book's events. The validator's app gives it the records' clock. A fleet's
    /// book (on PostgreSQL) takes in requests at the database's clock instead, one for all its
    /// validators; this clock then bounds what the requests sign (expiries, ages) only.
    pub fn with_clock(mut self, clock: SharedClock) -> Market {
        self.clock = clock;
        self
    }

    /// The same market writing a snapshot of its book every `events` events (at least 1)
    /// instead of [`SNAPSHOT_EVERY`].
    pub fn with_snapshot_every(self, events: u64) -> Market {
        self.lock().snapshot_every = events.max(1);
        self
    }

    /// How many events the store holds (those after the last snapshot, and the one it was
    /// taken at): what opening it replays.
    pub fn stored_events(&self) -> Result<u64, MarketError> {
        self.lock().store.stored_events()
    }

    /// The same market under other limits (the stored book is kept whatever they are: they
    /// bound new submissions only).
    pub fn with_limits(mut self, limits: MarketLimits) -> Market {
        self.limits = limits;
        self.submitters = Mutex::new(pog_net::buckets::PerSource::per_minute(
            limits.submits_per_minute_per_source.max(1.0),
        ));
        self
    }

    /// Takes a submission token of `source`'s; refused when it has none left.
    pub fn admit_submitter(&self, source: std::net::IpAddr) -> Result<(), MarketRequestError> {
        let allowed = self.submitters.locked().allow(source);
        if allowed {
            Ok(())
        } else {
            Err(MarketRequestError::TooManySubmissions {
                address: source,
                per_minute: self.limits.submits_per_minute_per_source,
            })
        }
    }

    /// The validator's key this market answers for.
    pub fn validator(&self) -> &str {
        &self.validator
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the book half-changed (every Book
        // operation checks before it changes anything), so a poisoned lock is still usable.
        self.inner.locked()
    }

    /// The book to read, caught up first with the events other validators appended to a
    /// shared store (a store that does not answer is logged, and the book read as it stands:
    /// the API asks [`Market::caught_up`] first, to answer a clear error instead).
    fn read(&self) -> MutexGuard<'_, Inner> {
        let mut inner = self.lock();
        if let Err(e) = inner.catch_up(&self.validator) {
            tracing::warn!(error = %e, "the market's book could not catch up with its store");
        }
        inner
    }

    /// Brings the book up to its store now: every event another validator of the fleet
    /// appended (on PostgreSQL) is in the book after it. The API's reads call it first.
    pub fn caught_up(&self) -> Result<(), MarketError> {
        self.lock().catch_up(&self.validator)
    }

    /// Judges one request on the book caught up with the store, under the store's sequence
    /// lock (on PostgreSQL, no other validator appends meanwhile): `judge` gets the book and
    /// the time to apply the request at (the database's clock for a fleet, read under the
    /// lock, so that the fleet's book time follows the sequence), and stages the events it
    /// applied ([`Inner::stage`]). Accepted, they are appended and committed together;
    /// refused, nothing is stored. When the store fails after the book changed, the book is
    /// rebuilt from the store (the change undone) and the request fails.
    fn write<T>(
        &self,
        judge: impl FnOnce(&mut Inner, u64) -> Result<T, MarketRequestError>,
    ) -> Result<T, MarketRequestError> {
        let mut inner = self.lock();
        let now = inner.begin(&self.validator, self.clock.now_ms())?;
        let judged = judge(&mut inner, now);
        inner.settle(judged, &self.validator)
    }

    /// Submits a signed order (the envelope's bytes). What backs it is checked first, against
    /// the registry as it stands now ([`Market::with_standing`]); the registry is read, and a
    /// PostgreSQL one waited on, so call it off the async runtime's workers.
    pub fn submit(&self, bytes: &[u8]) -> Result<Submitted, MarketRequestError> {
        let (message, signer): (SubmitMessage, PublicKey) = pog_signed::decode(bytes, SUBMIT_KIND)?;
        self.check_validator(&message.validator)?;
        if message.order.owner() != signer {
            return Err(MarketRequestError::NotOwner {
                id: message.order.id().clone(),
                owner: message.order.owner().to_string(),
                signer,
            });
        }
        let Some(expires_at_ms) = message.expires_at_ms else {
            return Err(MarketRequestError::NoExpiry {
                id: message.order.id().clone(),
            });
        };
        // The registry is read before the book is locked (it may wait on a database).
        pog_market::backing::check_order(
            &message.order,
            expires_at_ms,
            self.clock.now_ms(),
            self.standing.as_ref(),
            &self.backing,
        )?;
        // A bid's deposit is read before the book is locked (the chain may be slow).
        let deposit = match (&self.deposits, message.order.side()) {
            (Some(deposits), pog_market::Side::Bid) => Some(
                deposits
                    .deposit_of(&signer)
                    .map_err(BackingError::DepositsUnavailable)?,
            ),
            _ => None,
        };
        let envelope = envelope(bytes)?;
        self.write(|inner, now| {
            if let Some(deposit) = deposit {
                // The open bids, the leases not yet paid for and a voucher not yet expired.
                let committed = inner.book.bid_commitment_of(signer.as_str())
                    + self.held_by_leases(inner, &signer)
                    + inner
                        .store
                        .withdrawal(&signer)?
                        .map_or(0, |w| u128::from(w.holds_at(self.clock.now_ms())));
                pog_market::backing::check_bid_covered(&message.order, committed, deposit)?;
            }
            // Orders expired by now no longer count against the limits.
            inner.book.expire(now);
            let open = inner.book.len();
            if open >= self.limits.max_open {
                return Err(MarketRequestError::BookFull { open });
            }
            let owned = inner.book.open_by(&signer);
            if owned >= self.limits.max_open_per_owner {
                return Err(MarketRequestError::OwnerFull {
                    owner: signer,
                    open: owned,
                });
            }
            let id = message.order.id().clone();
            let class = message.order.class().clone();
            let sequence = inner.book.submit(message.order, expires_at_ms, now)?;
            inner.dirty.insert(class);
            inner.stage("submit", Event::Submit { envelope });
            Ok(Submitted { id, sequence })
        })
    }

    /// Cancels an order on a signed request by its owner.
    pub fn cancel(&self, bytes: &[u8]) -> Result<Cancelled, MarketRequestError> {
        let (message, signer): (CancelMessage, PublicKey) = pog_signed::decode(bytes, CANCEL_KIND)?;
        self.check_validator(&message.validator)?;
        if message.sequence.is_none() {
            return Err(MarketRequestError::NoSequence { id: message.id });
        }
        let envelope = envelope(bytes)?;
        self.write(|inner, now| {
            let order = inner
                .book
                .cancel(&message.id, &signer, message.sequence, now)?;
            inner.dirty.insert(order.class().clone());
            inner.stage("cancel", Event::Cancel { envelope });
            Ok(Cancelled { order })
        })
    }

    /// Clears one class on the operator's signed request, once: the same request again (its
    /// nonce taken) is refused (409). First, the class's open asks whose GPUs no longer back
    /// them (a GPU released or re-registered elsewhere, its latest proof failed, not proving
    /// its model, or too old: [`pog_market::backing::check_gpus`]) are withdrawn, each a stored
    /// event, so that no ask trades on GPUs that stopped proving. The registry is read, so
    /// call it off the async runtime's workers.
    pub fn clear(&self, bytes: &[u8]) -> Result<ClearingRecord, MarketRequestError> {
        self.clear_if(bytes, false)
    }

    /// [`Market::clear`]; with `only_if_due`, refused ([`MarketRequestError::NotDue`]) unless
    /// the class, in the book caught up under the store's lock, changed since its last
    /// clearing and has bids and asks open: a scheduled clearing that another validator of
    /// the fleet made first leaves nothing due, so the same state is never cleared twice.
    fn clear_if(
        &self,
        bytes: &[u8],
        only_if_due: bool,
    ) -> Result<ClearingRecord, MarketRequestError> {
        let (message, signer): (ClearMessage, PublicKey) = pog_signed::decode(bytes, CLEAR_KIND)?;
        self.check_validator(&message.validator)?;
        if signer != self.validator {
            return Err(MarketRequestError::NotOperator);
        }
        let nonce = clear_nonce(&message)?;
        let envelope = envelope(bytes)?;
        self.check_clear_request(&self.read(), &message, nonce)?;
        let unbacked = self.unbacked_asks(&message.class);
        let record = self.write(|inner, now| {
            // Checked again: the same request may have cleared meanwhile.
            self.check_clear_request(inner, &message, nonce)?;
            if only_if_due && !inner.due(&message.class, now) {
                return Err(MarketRequestError::NotDue {
                    class: message.class.clone(),
                });
            }
            inner.withdraw(unbacked, now);
            // The book's time is when requests arrive (the request's own time only bounds
            // its age), so the book, and a replay of its store, see time move one way.
            let record = inner
                .book
                .clear(&message.class, message.mechanism, now)?
                .clone();
            inner.dirty.remove(&message.class);
            inner.stage("clear", Event::Clear { envelope });
            let book_ms = inner.book.now_ms();
            inner.taken.take(nonce.to_string(), message.at_ms, book_ms);
            Ok(record)
        })?;
        {
            let mut cleared = self.cleared.locked();
            cleared.0.insert(message.class.clone());
            if let Some(wake) = &cleared.1 {
                wake.notify_one();
            }
        }
        // The clearing is stored (its leases with it, made again by a replay): the leases
        // are then handed to the sink; a failure there is logged, the clearing stands, and
        // the next start hands them again ([`Market::hand_pending_leases`]).
        if let Err(e) = self.hand_pending_leases(Some(record.number)) {
            tracing::error!(clearing = record.number, error = %e, "logging the clearing's leases");
        }
        Ok(record)
    }

    /// Hands the sink the leases of every clearing after the last one it took (a clearing
    /// whose leases a crash or a failing ledger kept from the sink is handed again), one
    /// clearing at a time, each marked taken (`market_meta`: `leases_logged_through`) under
    /// the mark's lock: on PostgreSQL one validator of the fleet hands a clearing, once. The
    /// number of clearings handed; an error names the first the sink refused (it and those
    /// after are handed again next time). The first clearing handed may have been taken in
    /// part before a crash came between the sink and the mark, unless it is `just_made` by
    /// this validator alone: the sink is told so, to skip what it took.
    pub fn hand_pending_leases(&self, just_made: Option<u64>) -> Result<usize, String> {
        let Some(sink) = &self.lease_sink else {
            return Ok(0);
        };
        let _one_at_a_time = self.handing.locked();
        let mut handed = 0;
        let mut first = true;
        loop {
            let through = self
                .lock()
                .store
                .begin_handing()
                .map_err(|e| e.to_string())?;
            let after = through.map_or(0, |t| {
                usize::try_from(t).unwrap_or(usize::MAX).saturating_add(1)
            });
            let next = self.read().book.history().get(after).cloned();
            let Some(record) = next else {
                return self
                    .lock()
                    .store
                    .end_handing(true)
                    .map(|()| handed)
                    .map_err(|e| e.to_string());
            };
            let maybe_taken = first && (self.shared || just_made != Some(record.number));
            first = false;
            if !record.leases.is_empty() {
                if let Err(e) = sink.leased(&record.class, &record.leases, maybe_taken) {
                    let _ = self.lock().store.end_handing(false);
                    return Err(format!("clearing {}: {e}", record.number));
                }
                handed += 1;
            }
            // Taken: marked, so that no restart or other validator hands it again.
            let mut inner = self.lock();
            let marked = inner.store.mark_handed(record.number);
            inner
                .store
                .end_handing(marked.is_ok())
                .and(marked)
                .map_err(|e| e.to_string())?;
        }
    }

    /// Refuses a clearing request that is too old or ahead (by the clock, and by the book's
    /// time, which never goes back: after the clock steps back, a request whose nonce has been
    /// forgotten, see `TakenClears`, is still refused), or whose nonce was taken.
    fn check_clear_request(
        &self,
        inner: &Inner,
        message: &ClearMessage,
        nonce: &str,
    ) -> Result<(), MarketRequestError> {
        let now = self.clock.now_ms();
        let latest = now.max(inner.book.now_ms());
        if message.at_ms.saturating_add(CLEAR_MAX_AGE_MS) < latest
            || message.at_ms > now.saturating_add(CLEAR_MAX_AGE_MS)
        {
            return Err(MarketRequestError::Stale);
        }
        if inner.taken.contains(nonce) {
            return Err(MarketRequestError::Replayed {
                nonce: nonce.to_string(),
            });
        }
        Ok(())
    }

    /// Withdraws the open asks of `class` whose GPUs no longer back them (checked against the
    /// registry outside the book's lock; each still open then is cancelled on its owner's
    /// behalf and stored as a `withdraw` event, replayed as that cancellation). An ask is
    /// left alone while the registry cannot be read. Returns the asks withdrawn.
    pub fn withdraw_unbacked(&self, class: &GpuClass) -> Result<Vec<Order>, MarketRequestError> {
        let unbacked = self.unbacked_asks(class);
        self.write(|inner, now| Ok(inner.withdraw(unbacked, now)))
    }

    /// The open asks of `class` whose GPUs no longer back them, with their sequence numbers
    /// and why (none while the registry cannot be read).
    fn unbacked_asks(&self, class: &GpuClass) -> Vec<(u64, Order, String)> {
        let now = self.clock.now_ms();
        let asks: Vec<(u64, Order)> = {
            let inner = self.read();
            open_at(&inner.book, class, Side::Ask, now)
                .filter(|o| !o.order.gpus().is_empty())
                .map(|o| (o.sequence, o.order.clone()))
                .collect()
        };
        let mut unbacked = Vec::new();
        for (sequence, order) in asks {
            match pog_market::backing::check_gpus(
                &order,
                now,
                self.standing.as_ref(),
                &self.backing,
            ) {
                Ok(()) => {}
                Err(BackingError::Unavailable(e)) => {
                    tracing::warn!(error = %e, "open asks not checked before a clearing");
                    return Vec::new();
                }
                Err(why) => unbacked.push((sequence, order, why.to_string())),
            }
        }
        unbacked
    }

    /// Clears, signed by `operator` (the validator's own key), every class whose book changed
    /// since its last clearing and has both bids and asks open: what `pog validator
    /// --clear-every` runs. A class with one side empty, or unchanged since it was last
    /// cleared, would clear to the same nothing, so it is left alone (no empty clearings
    /// in the history). Returns each clearing made, or why one failed.
    pub fn clear_due(
        &self,
        operator: &Identity,
        mechanism: Mechanism,
    ) -> Vec<Result<ClearingRecord, MarketRequestError>> {
        let due: Vec<GpuClass> = {
            let now = self.clock.now_ms();
            let mut inner = self.read();
            let Inner { book, dirty, .. } = &mut *inner;
            let any = |c: &GpuClass, side| open_at(book, c, side, now).next().is_some();
            // A class whose book emptied (or expired) needs no clearing until an order comes.
            dirty.retain(|c| any(c, Side::Bid) || any(c, Side::Ask));
            let due = inner.dirty.iter().filter(|c| inner.due(c, now)).cloned();
            due.collect()
        };
        due.into_iter()
            .map(|class| {
                let message = ClearMessage {
                    validator: self.validator.clone(),
                    class,
                    mechanism,
                    at_ms: self.clock.now_ms(),
                    nonce: Some(fresh_clear_nonce()),
                };
                let envelope = operator.seal(CLEAR_KIND, &message)?;
                let bytes = serde_json::to_vec(&envelope).map_err(MarketRequestError::Encode)?;
                self.clear_if(&bytes, true)
            })
            .filter(|r| !matches!(r, Err(MarketRequestError::NotDue { .. })))
            .collect()
    }

    /// GPU-hours open in a class: (bids, asks).
    pub fn open_hours(&self, class: &GpuClass) -> (u64, u64) {
        let now = self.clock.now_ms();
        let inner = self.read();
        let hours = |side| {
            open_at(&inner.book, class, side, now)
                .map(|o| o.order.quantity())
                .fold(0u64, u64::saturating_add)
        };
        (hours(Side::Bid), hours(Side::Ask))
    }

    /// Wakes `wake` after every clearing from now on (the pricing, which re-quotes the class's
    /// GPUs: [`Market::take_cleared`]).
    pub fn notify_on_clearing(&self, wake: Arc<tokio::sync::Notify>) {
        self.cleared.locked().1 = Some(wake);
    }

    /// The classes cleared since the last call.
    pub fn take_cleared(&self) -> BTreeSet<GpuClass> {
        std::mem::take(&mut self.cleared.locked().0)
    }

    /// The leases of `class` that a price read at `now_ms` over a trailing window of
    /// `window_ms` can see (made in it, or running in it), each with its clearing's time: what
    /// the class's market signals are measured from ([`pog_market::signals`]).
    pub fn class_leases(
        &self,
        class: &GpuClass,
        now_ms: u64,
        window_ms: u64,
    ) -> Vec<(u64, pog_market::lease::Lease)> {
        let from = now_ms.saturating_sub(window_ms);
        let inner = self.read();
        inner
            .book
            .history()
            .iter()
            .filter(|r| &r.class == class)
            .flat_map(|r| r.leases.iter().map(move |l| (r.at_ms, l)))
            .filter(|(at_ms, l)| *at_ms > from || l.end_ms > from)
            .map(|(at_ms, l)| (at_ms, l.clone()))
            .collect()
    }

    /// Stores posted prices and, in the same transaction, that every registry record up to
    /// row `through` has been priced.
    pub fn post_prices(&self, points: &[PostedPrice], through: i64) -> Result<(), MarketError> {
        let rows = points
            .iter()
            .map(|point| {
                let text = serde_json::to_string(point).map_err(|e| MarketError::Corrupt {
                    seq: 0,
                    why: e.to_string(),
                })?;
                Ok((point.gpu_uuid.clone(), point.at_ms, text))
            })
            .collect::<Result<Vec<_>, MarketError>>()?;
        self.lock().store.post_prices(&rows, through)
    }

    /// The last registry record row the posted prices have taken in (0: none): this
    /// validator's, also in a fleet (each keeps its own views of the prices).
    pub fn priced_through(&self) -> Result<i64, MarketError> {
        Ok(self.lock().store.priced_through()?.unwrap_or(0))
    }

    /// A GPU's posted prices numbered above `after` (0: from the first), oldest first, at
    /// most `limit`.
    pub fn price_history(
        &self,
        gpu_uuid: &str,
        after: i64,
        limit: usize,
    ) -> Result<Vec<PostedPrice>, MarketError> {
        let rows = self.lock().store.prices(gpu_uuid, after, limit, false)?;
        rows.iter().map(|(seq, text)| point(*seq, text)).collect()
    }

    /// A GPU's latest posted price.
    pub fn latest_price(&self, gpu_uuid: &str) -> Result<Option<PostedPrice>, MarketError> {
        let rows = self.lock().store.prices(gpu_uuid, 0, 1, true)?;
        rows.first()
            .map(|(seq, text)| point(*seq, text))
            .transpose()
    }

    /// One page of the orders open now, of one class or of all: those with a sequence number
    /// above `after` (all with `None`), at most `limit` (1 to [`MAX_BOOK_PAGE`]); pages go
    /// in submission order (the cursor never skips an order), and each page lists its bids
    /// and asks by price ([`BookView::by_price`]), so a book of one page reads by price.
    pub fn book(&self, class: Option<&GpuClass>, after: Option<u64>, limit: usize) -> BookView {
        let now = self.clock.now_ms();
        let limit = limit.clamp(1, MAX_BOOK_PAGE);
        let inner = self.read();
        let classes: Vec<GpuClass> = match class {
            Some(c) => vec![c.clone()],
            None => inner.book.classes().cloned().collect(),
        };
        // Each class and side is in sequence order: the page is among the first `limit + 1`
        // after `after` of each, whatever the book's size.
        let mut open: Vec<OpenOrder> = classes
            .iter()
            .flat_map(|c| [Side::Bid, Side::Ask].map(|side| (c, side)))
            .flat_map(|(c, side)| open_after(&inner.book, c, side, after, now).take(limit + 1))
            .collect();
        open.sort_unstable_by_key(|o| o.sequence);
        let more = open.len() > limit;
        open.truncate(limit);
        let next_after = more.then(|| open.last().map(|o| o.sequence)).flatten();
        let (mut bids, mut asks) = (Vec::new(), Vec::new());
        for o in open {
            let entry = BookEntry {
                order: o.order.clone(),
                sequence: o.sequence,
                expires_at_ms: o.expires_at_ms,
            };
            match o.order.side() {
                Side::Bid => bids.push(entry),
                Side::Ask => asks.push(entry),
            }
        }
        BookView {
            bids,
            asks,
            next_after,
        }
        .by_price()
    }

    /// Clearings numbered above `after` (all with `None`), oldest first, at most `limit`.
    pub fn history(&self, after: Option<u64>, limit: usize) -> HistoryPage {
        let inner = self.read();
        let history = inner.book.history();
        let start = after
            .map_or(0, |a| (a as usize).saturating_add(1))
            .min(history.len());
        let limit = limit.clamp(1, MAX_HISTORY_PAGE);
        let page: Vec<ClearingRecord> = history[start..].iter().take(limit).cloned().collect();
        let next_after = (start + page.len() < history.len())
            .then(|| page.last().map(|r| r.number))
            .flatten();
        HistoryPage {
            clearings: page,
            next_after,
        }
    }

    /// The leases the clearings made that `filter` selects, the newest first.
    pub fn leases(&self, filter: &LeaseFilter) -> LeasePage {
        let inner = self.read();
        let now_ms = self.clock.now_ms();
        let party = filter.party.as_ref().map(|p| p.to_ascii_lowercase());
        let limit = filter.limit.unwrap_or(100).clamp(1, MAX_HISTORY_PAGE);
        let leases = inner
            .book
            .history()
            .iter()
            .rev()
            .flat_map(|r| r.leases.iter().rev().map(move |l| (r, l)))
            .filter(|(_, l)| {
                party.as_ref().is_none_or(|p| {
                    l.renter.eq_ignore_ascii_case(p) || l.provider.eq_ignore_ascii_case(p)
                }) && filter.gpu.as_ref().is_none_or(|g| l.gpu.as_str() == g)
                    && filter.id.as_ref().is_none_or(|id| &l.id == id)
            })
            .take(limit)
            .map(|(r, l)| LeaseView {
                lease: l.clone(),
                class: r.class.clone(),
                state: l.state_at(now_ms).to_string(),
            })
            .collect();
        LeasePage { now_ms, leases }
    }

    /// Whether the class is traded here.
    pub fn trades(&self, class: &GpuClass) -> bool {
        self.read().book.classes().any(|c| c == class)
    }

    fn check_validator(&self, named: &PublicKey) -> Result<(), MarketRequestError> {
        if !named.eq_ignore_ascii_case(&self.validator) {
            return Err(MarketRequestError::OtherValidator {
                named: named.clone(),
                ours: self.validator.clone(),
            });
        }
        Ok(())
    }
}

/// The orders of one class and side open at `now_ms` (the book drops expired orders at its
/// next operation; a reader in between leaves them out), with their expiry.
fn open_at<'b>(
    book: &'b Book,
    class: &GpuClass,
    side: Side,
    now_ms: u64,
) -> impl Iterator<Item = OpenOrder<'b>> {
    open_after(book, class, side, None, now_ms)
}

/// [`open_at`] from the first order after sequence `after`.
fn open_after<'b>(
    book: &'b Book,
    class: &GpuClass,
    side: Side,
    after: Option<u64>,
    now_ms: u64,
) -> impl Iterator<Item = OpenOrder<'b>> {
    book.resting(class, side, after)
        .filter(move |o| o.expires_at_ms > now_ms)
}

impl Inner {
    /// Opens the store's transaction for one request and catches the book up within it: the
    /// time to judge the request at (the database's for a fleet, else `clock_ms`).
    fn begin(&mut self, validator: &PublicKey, clock_ms: u64) -> Result<u64, MarketError> {
        let db_now = self.store.begin()?;
        if let Err(e) = self.catch_up(validator) {
            if let Err(end) = self.store.finish(false) {
                tracing::warn!(error = %end, "ending the market's transaction");
            }
            return Err(e);
        }
        Ok(db_now.unwrap_or(clock_ms))
    }

    /// Stages an event the book has just taken in, with the book's time then (replayed at the
    /// same time), to be stored when the request is accepted ([`Market::write`]).
    ///
    /// The book's time, not the clock's: a refused request lets time pass in the book without
    /// an event, and the clock may step back, so the book's time (never going back) is the
    /// time the event was really applied at. Replaying every stored event at its stored time
    /// then expires the same orders at the same points, whatever was refused in between.
    fn stage(&mut self, kind: &'static str, event: Event) {
        let at_ms = self.book.now_ms();
        self.pending.push((kind, event, at_ms));
    }

    /// Ends the request [`Inner::begin`] opened: stores and commits what it staged if it was
    /// accepted; rolls back if it was refused (a refusal after staging, or a store that fails,
    /// has the book rebuilt from the store).
    fn settle<T>(
        &mut self,
        judged: Result<T, MarketRequestError>,
        validator: &PublicKey,
    ) -> Result<T, MarketRequestError> {
        let pending = std::mem::take(&mut self.pending);
        let stored = judged.and_then(|value| {
            let mut last = self.applied;
            for (kind, event, at_ms) in &pending {
                let text = serde_json::to_string(event).map_err(MarketRequestError::Encode)?;
                last = self.store.append(kind, &text, *at_ms)?;
            }
            self.store.finish(true)?;
            Ok((value, last))
        });
        let (value, last) = match stored {
            Ok(stored) => stored,
            Err(e) => {
                if let Err(end) = self.store.finish(false) {
                    tracing::warn!(error = %end, "ending the market's transaction");
                }
                if !pending.is_empty() {
                    if let Err(again) = self.rebuild(validator) {
                        tracing::error!(error = %again, "the market's book could not be read back from its store: it is read again before its next use");
                    }
                }
                return Err(e);
            }
        };
        self.applied = last;
        if self.applied - self.snapshot_through >= self.snapshot_every as i64 {
            // The events are stored: a snapshot that fails now is tried again at the next one.
            if let Err(e) = self.snapshot() {
                tracing::error!(error = %e, "writing a snapshot of the market");
            }
        }
        Ok(value)
    }

    /// Applies the events stored after the last one the book holds (a shared store's, which
    /// other validators append to); a book behind a snapshot that dropped the events it
    /// lacks, or one that may hold what the store does not, is rebuilt.
    fn catch_up(&mut self, validator: &PublicKey) -> Result<(), MarketError> {
        if self.stale {
            return self.rebuild(validator);
        }
        if !self.store.shared() || self.apply_stored(validator)? {
            return Ok(());
        }
        self.rebuild(validator)
    }

    /// Applies the stored events after the last one the book holds; false, with nothing
    /// applied, when on a shared store they do not follow it (a snapshot dropped the events
    /// between).
    fn apply_stored(&mut self, validator: &PublicKey) -> Result<bool, MarketError> {
        let events = self.store.events_after(self.applied)?;
        let follows = events.first().is_none_or(|e| e.seq == self.applied + 1);
        if self.store.shared() && !follows {
            return Ok(false);
        }
        for event in events {
            self.apply(event, validator)?;
        }
        Ok(true)
    }

    /// Rebuilds the book, and the clearing requests taken still in their window, from the
    /// store's snapshot and the events after it, re-verifying each signed message (read
    /// again if another validator wrote a snapshot in between). The book is emptied first:
    /// whatever fails, it never holds what the store does not.
    fn rebuild(&mut self, validator: &PublicKey) -> Result<(), MarketError> {
        for _ in 0..REBUILD_TRIES {
            if self.rebuild_once(validator)? {
                return Ok(());
            }
        }
        Err(MarketError::Moving {
            tries: REBUILD_TRIES,
        })
    }

    /// [`Inner::rebuild`], once: false when a snapshot written meanwhile dropped events
    /// after the one it read.
    fn rebuild_once(&mut self, validator: &PublicKey) -> Result<bool, MarketError> {
        self.stale = true;
        self.book = Book::new(classes());
        self.taken = TakenClears::default();
        self.applied = 0;
        if let Some(snapshot) = self.store.snapshot()? {
            let corrupt = |why: String| MarketError::Corrupt {
                seq: snapshot.through,
                why: format!("the snapshot through this event: {why}"),
            };
            let book: pog_market::BookSnapshot =
                serde_json::from_str(&snapshot.book).map_err(|e| corrupt(e.to_string()))?;
            self.book = Book::from_snapshot(book).map_err(|e| corrupt(e.to_string()))?;
            self.taken =
                serde_json::from_str(&snapshot.taken).map_err(|e| corrupt(e.to_string()))?;
            self.applied = snapshot.through;
            self.snapshot_through = snapshot.through;
        }
        if !self.apply_stored(validator)? {
            return Ok(false);
        }
        // After a rebuild, any class with open orders may be due a clearing.
        let book = &self.book;
        self.dirty = book
            .classes()
            .filter(|c| {
                book.open(c, Side::Bid).next().is_some() || book.open(c, Side::Ask).next().is_some()
            })
            .cloned()
            .collect();
        self.stale = false;
        Ok(true)
    }

    /// Applies one stored event to the book, at the time it was stored with.
    fn apply(&mut self, stored: StoredEvent, validator: &PublicKey) -> Result<(), MarketError> {
        let StoredEvent { seq, event, at_ms } = stored;
        let corrupt = |why: String| MarketError::Corrupt { seq, why };
        let event: Event = serde_json::from_str(&event).map_err(|e| corrupt(e.to_string()))?;
        let bytes =
            |envelope: &Envelope| serde_json::to_vec(envelope).map_err(|e| corrupt(e.to_string()));
        let book = &mut self.book;
        match event {
            Event::Submit { envelope } => {
                let (m, _): (SubmitMessage, PublicKey) =
                    pog_signed::decode(&bytes(&envelope)?, SUBMIT_KIND)
                        .map_err(|e| corrupt(e.to_string()))?;
                // A submission stored before orders expired: open for the longest lifetime.
                let expires_at_ms = m
                    .expires_at_ms
                    .unwrap_or(at_ms.saturating_add(pog_market::MAX_ORDER_LIFETIME_MS));
                let class = m.order.class().clone();
                // Every submission stored was checked when it came (its backing against the
                // registry then); a store from before a key's orders were kept from crossing
                // replays as it was.
                book.restore(m.order, expires_at_ms, at_ms)
                    .map_err(|e| corrupt(e.to_string()))?;
                self.dirty.insert(class);
            }
            Event::Cancel { envelope } => {
                let (m, signer): (CancelMessage, PublicKey) =
                    pog_signed::decode(&bytes(&envelope)?, CANCEL_KIND)
                        .map_err(|e| corrupt(e.to_string()))?;
                let order = book
                    .cancel(&m.id, &signer, m.sequence, at_ms)
                    .map_err(|e| corrupt(e.to_string()))?;
                self.dirty.insert(order.class().clone());
            }
            Event::Withdraw {
                owner,
                id,
                sequence,
                ..
            } => {
                let order = book
                    .cancel(&id, &owner, Some(sequence), at_ms)
                    .map_err(|e| corrupt(e.to_string()))?;
                self.dirty.insert(order.class().clone());
            }
            Event::Clear { envelope } => {
                let (m, signer): (ClearMessage, PublicKey) =
                    pog_signed::decode(&bytes(&envelope)?, CLEAR_KIND)
                        .map_err(|e| corrupt(e.to_string()))?;
                // A clearing is signed by the validator it names: this one, or in a fleet's
                // shared book any of the fleet's.
                let ours = self.store.shared() || signer.eq_ignore_ascii_case(validator);
                if !signer.eq_ignore_ascii_case(&m.validator) || !ours {
                    return Err(corrupt("a clearing signed by another key".into()));
                }
                book.clear(&m.class, m.mechanism, at_ms)
                    .map_err(|e| corrupt(e.to_string()))?;
                self.dirty.remove(&m.class);
                // A clearing stored before requests carried nonces has none to remember.
                if let Some(nonce) = m.nonce {
                    self.taken.take(nonce, m.at_ms, book.now_ms());
                }
            }
        }
        self.applied = seq;
        Ok(())
    }

    /// Cancels, at `now`, each ask of `unbacked` still open on its owner's behalf, staged as
    /// a `withdraw` event; the asks withdrawn.
    fn withdraw(&mut self, unbacked: Vec<(u64, Order, String)>, now: u64) -> Vec<Order> {
        let mut withdrawn = Vec::new();
        for (sequence, order, why) in unbacked {
            // Gone meanwhile (filled, cancelled, expired): nothing to withdraw.
            let Ok(order) = self
                .book
                .cancel(order.id(), order.owner(), Some(sequence), now)
            else {
                continue;
            };
            tracing::warn!(id = %order.id(), owner = order.owner(), %why, "ask withdrawn: no longer backed");
            let event = Event::Withdraw {
                owner: order.owner().to_string(),
                id: order.id().clone(),
                sequence,
                why,
            };
            self.stage("withdraw", event);
            withdrawn.push(order);
        }
        withdrawn
    }

    /// Whether `class` changed since its last clearing and has bids and asks open at `now`.
    fn due(&self, class: &GpuClass, now: u64) -> bool {
        let any = |side| open_at(&self.book, class, side, now).next().is_some();
        self.dirty.contains(class) && any(Side::Bid) && any(Side::Ask)
    }

    /// Writes the book and the clearing requests taken as of the last event applied (the
    /// book is then exactly the state after it, so a snapshot of a fleet's book is the same
    /// whichever validator writes it), and deletes the events before it.
    fn snapshot(&mut self) -> Result<(), MarketError> {
        let corrupt = |e: serde_json::Error| MarketError::Corrupt {
            seq: 0,
            why: format!("writing a snapshot: {e}"),
        };
        let book = serde_json::to_string(&self.book.snapshot()).map_err(corrupt)?;
        let taken = serde_json::to_string(&self.taken).map_err(corrupt)?;
        self.store.write_snapshot(self.applied, &book, &taken)?;
        self.snapshot_through = self.applied;
        Ok(())
    }
}

/// A stored price point, numbered.
fn point(seq: i64, text: &str) -> Result<PostedPrice, MarketError> {
    let mut point: PostedPrice = serde_json::from_str(text).map_err(|e| MarketError::Corrupt {
        seq,
        why: format!("price point: {e}"),
    })?;
    point.seq = seq;
    Ok(point)
}

/// The clearing request's nonce, if it has one of the form [`ClearMessage::nonce`] asks.
fn clear_nonce(message: &ClearMessage) -> Result<&str, MarketRequestError> {
    let Some(nonce) = message.nonce.as_deref() else {
        return Err(MarketRequestError::NoNonce);
    };
    let plain = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    if nonce.is_empty() || nonce.len() > MAX_CLEAR_NONCE_LEN || !nonce.chars().all(plain) {
        return Err(MarketRequestError::BadNonce);
    }
    Ok(nonce)
}

/// The envelope as it arrived (already verified by `pog_signed::decode`), to store.
fn envelope(bytes: &[u8]) -> Result<Envelope, MarketRequestError> {
    serde_json::from_slice(bytes).map_err(MarketRequestError::Envelope)
}

/// What the API answers for each of the market's refusals and failures: the one place a
/// [`MarketRequestError`] becomes an HTTP status.
impl From<MarketRequestError> for ApiError {
    fn from(e: MarketRequestError) -> ApiError {
        use MarketRequestError as E;
        let status = match &e {
            E::Wire(wire) => pog_net::http::wire_status(wire),
            E::Envelope(_)
            | E::OtherValidator { .. }
            | E::NoExpiry { .. }
            | E::NoSequence { .. }
            | E::NoNonce
            | E::BadNonce
            | E::Stale => StatusCode::BAD_REQUEST,
            E::NotOwner { .. } | E::NotOperator => StatusCode::FORBIDDEN,
            E::TooManySubmissions { .. } | E::OwnerFull { .. } => StatusCode::TOO_MANY_REQUESTS,
            E::BookFull { .. } => StatusCode::SERVICE_UNAVAILABLE,
            E::Replayed { .. } | E::NotDue { .. } => StatusCode::CONFLICT,
            E::Book(book) => match book {
                BookError::UnknownClass(_)
                | BookError::DuplicateId(_)
                | BookError::Expired { .. }
                | BookError::LifetimeTooLong { .. } => StatusCode::BAD_REQUEST,
                BookError::UnknownOrder(_) => StatusCode::NOT_FOUND,
                BookError::NotOpen(_)
                | BookError::SelfTrade { .. }
                | BookError::GpuOffered { .. } => StatusCode::CONFLICT,
            },
            E::Backing(backing) => match backing {
                BackingError::NotHeld { .. } => StatusCode::FORBIDDEN,
                BackingError::Unavailable(_) | BackingError::DepositsUnavailable(_) => {
                    StatusCode::SERVICE_UNAVAILABLE
                }
                BackingError::BidNotCovered { .. } => StatusCode::PAYMENT_REQUIRED,
                _ => StatusCode::BAD_REQUEST,
            },
            // A database away is for a while: retry.
            E::Store(MarketError::Postgres(_) | MarketError::Moving { .. }) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            E::Encode(_) | E::Store(_) => StatusCode::INTERNAL_SERVER_ERROR,
            E::NoVouchers | E::VoucherUnavailable(_) | E::NoSettlements => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            E::UnknownLease(_) => StatusCode::NOT_FOUND,
            E::NotProvider { .. } => StatusCode::FORBIDDEN,
            E::BadUndelivered { .. } => StatusCode::BAD_REQUEST,
            E::SettlementStore(_) => StatusCode::INTERNAL_SERVER_ERROR,
            E::StaleWithdrawal => StatusCode::CONFLICT,
            E::WithdrawalNotCovered { .. } => StatusCode::PAYMENT_REQUIRED,
        };
        ApiError::new(status, e.to_string())
    }
}

/// The market's routes, for any router state (the market carries its own).
pub fn router<S: Clone + Send + Sync + 'static>(market: Arc<Market>) -> Router<S> {
    Router::new()
        .route("/v1/market/submit", post(submit_route))
        .route("/v1/market/cancel", post(cancel_route))
        .route("/v1/market/clear", post(clear_route))
        .route("/v1/market/info", get(info_route))
        .route("/v1/market/book", get(book_route))
        .route("/v1/market/history", get(history_route))
        .route("/v1/market/leases", get(leases_route))
        .route("/v1/market/settlements", get(settlements_route))
        .route("/v1/market/withdraw", post(withdraw_route))
        .route("/v1/market/undelivered", post(undelivered_route))
        .with_state(market)
}

/// Runs `work` off the async runtime's workers: it may wait on the store (a fleet's
/// PostgreSQL), the registry or the chain.
async fn off_workers<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
}

/// Runs `read` on the market caught up with its store, off the workers: a fleet's book holds
/// every order any of its validators took; a store away answers 503.
async fn caught_up<T: Send + 'static>(
    m: Arc<Market>,
    read: impl FnOnce(&Market) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    off_workers(move || {
        m.caught_up().map_err(MarketRequestError::from)?;
        read(&m)
    })
    .await
}

async fn submit_route(
    State(m): State<Arc<Market>>,
    ConnectInfo(source): ConnectInfo<std::net::SocketAddr>,
    body: Bytes,
) -> Result<Response, ApiError> {
    m.admit_submitter(source.ip())?;
    let submitted = off_workers(move || Ok(m.submit(&body)?)).await?;
    Ok(Json(submitted).into_response())
}

async fn cancel_route(State(m): State<Arc<Market>>, body: Bytes) -> Result<Response, ApiError> {
    Ok(Json(off_workers(move || Ok(m.cancel(&body)?)).await?).into_response())
}

async fn clear_route(State(m): State<Arc<Market>>, body: Bytes) -> Result<Response, ApiError> {
    Ok(Json(off_workers(move || Ok(m.clear(&body)?)).await?).into_response())
}

async fn info_route(State(m): State<Arc<Market>>) -> Response {
    let classes = m.lock().book.classes().cloned().collect();
    Json(MarketInfo {
        validator: m.validator.clone(),
        classes,
    })
    .into_response()
}

#[derive(Debug, Deserialize)]
struct BookQuery {
    class: Option<String>,
    after: Option<u64>,
    limit: Option<usize>,
}

async fn book_route(
    State(m): State<Arc<Market>>,
    Query(q): Query<BookQuery>,
) -> Result<Response, ApiError> {
    let class = match q.class {
        Some(name) => Some(
            GpuClass::new(name)
                .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.to_string()))?,
        ),
        None => None,
    };
    let limit = q.limit.unwrap_or(MAX_BOOK_PAGE);
    let view = caught_up(m, move |m| {
        if let Some(class) = class.as_ref().filter(|c| !m.trades(c)) {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                BookError::UnknownClass(class.clone()).to_string(),
            ));
        }
        Ok(m.book(class.as_ref(), q.after, limit))
    })
    .await?;
    Ok(Json(view).into_response())
}

#[derive(Debug, Deserialize)]
struct HistoryQuery {
    after: Option<u64>,
    limit: Option<usize>,
}

async fn history_route(
    State(m): State<Arc<Market>>,
    Query(q): Query<HistoryQuery>,
) -> Result<Response, ApiError> {
    let page = caught_up(m, move |m| Ok(m.history(q.after, q.limit.unwrap_or(100)))).await?;
    Ok(Json(page).into_response())
}

async fn leases_route(
    State(m): State<Arc<Market>>,
    Query(q): Query<LeaseFilter>,
) -> Result<Response, ApiError> {
    let envelope = caught_up(m, move |m| match m.signed_leases(&q) {
        Some(Ok(envelope)) => Ok(envelope),
        Some(Err(e)) => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            e.to_string(),
        )),
        None => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "this market signs no lease pages",
        )),
    })
    .await?;
    Ok(Json(envelope).into_response())
}

async fn withdraw_route(
    State(m): State<Arc<Market>>,
    ConnectInfo(source): ConnectInfo<std::net::SocketAddr>,
    body: Bytes,
) -> Result<Response, ApiError> {
    // Any key can sign a request, and each reads the chain: bounded per source as orders are.
    m.admit_submitter(source.ip())?;
    // The deposit and the account's nonce are read from the chain.
    let voucher = off_workers(move || Ok(m.withdraw(&body)?)).await?;
    Ok(Json(voucher).into_response())
}

async fn undelivered_route(
    State(m): State<Arc<Market>>,
    ConnectInfo(source): ConnectInfo<std::net::SocketAddr>,
    body: Bytes,
) -> Result<Response, ApiError> {
    m.admit_submitter(source.ip())?;
    let kept = off_workers(move || Ok(m.report_undelivered(&body)?)).await?;
    Ok(Json(serde_json::json!({ "undelivered_from_ms": kept })).into_response())
}

async fn settlements_route(
    State(m): State<Arc<Market>>,
    Query(q): Query<crate::settlement::SettlementFilter>,
) -> Result<Response, ApiError> {
    // The store is read from disk: off the workers.
    let page = tokio::task::spawn_blocking(move || m.signed_settlements(&q))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    match page {
        Some(Ok(envelope)) => Ok(Json(envelope).into_response()),
        Some(Err(e)) => Err(ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e)),
        None => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "this market settles no leases",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pog_market::Price;
    use pog_proof::timing::now_ms;

    fn validator() -> Identity {
        Identity::from_seed([1; 32])
    }

    /// The asks' ids the tests' GPUs are named for.
    const ASK_IDS: [&str; 3] = ["a1", "a2", "a3"];

    /// The GPUs an ask `id` of `owner` for `quantity` GPU-hours offers (open for an hour, one
    /// GPU per GPU-hour): `GPU-<owner's first hex digits>-<id>-<n>`.
    fn gpus_of(owner: &Identity, id: &str, quantity: u64) -> Vec<pog_signed::GpuUuid> {
        let key = owner.public_key();
        let who = &key.as_str()[..8];
        (0..quantity)
            .map(|n| pog_signed::GpuUuid::new(format!("GPU-{who}-{id}-{n}")).unwrap())
            .collect()
    }

    /// A registry in which the tests' owners (seeds 2 and 3) hold up to four H200s per ask
    /// id, each proven a minute ago by the clock.
    fn registry() -> std::collections::BTreeMap<pog_signed::GpuUuid, Standing> {
        let mut registry = std::collections::BTreeMap::new();
        for owner in [Identity::from_seed([2; 32]), Identity::from_seed([3; 32])] {
            for id in ASK_IDS {
                for gpu in gpus_of(&owner, id, 4) {
                    let standing = Standing {
                        agent: owner.public_key(),
                        model: "H200 SXM".into(),
                        simulated: false,
                        latest_proof: Some(pog_market::LatestProof {
                            record_id: 1,
                            accepted: true,
                            proves_model: true,
                            recorded_at_ms: now_ms() - 60_000,
                        }),
                    };
                    registry.insert(gpu, standing);
                }
            }
        }
        registry
    }

    /// Where a test's market is kept: a SQLite file, and a database of its own on the test
    /// PostgreSQL server where one is given (each [`Place::open`] there is a validator
    /// started anew on the fleet's database).
    enum Place {
        Sqlite(tempfile::TempDir),
        Postgres(String),
    }

    impl Place {
        /// A SQLite file, and a fresh PostgreSQL database where a test server is given.
        fn all() -> Vec<Place> {
            let mut places = vec![Place::Sqlite(tempfile::tempdir().unwrap())];
            places.extend(crate::postgres::testing::fresh_postgres_database().map(Place::Postgres));
            places
        }

        /// The market of the validator with key `v` here, its asks backed by [`registry`].
        fn open_as(&self, v: &PublicKey) -> Market {
            match self {
                Place::Sqlite(dir) => Market::open(Some(&dir.path().join("market.sqlite")), v),
                Place::Postgres(url) => {
                    Market::open_beside(&Registry::connect(url).unwrap(), None, v)
                }
            }
            .unwrap()
            .with_standing(Arc::new(registry()))
        }

        /// The tests' validator's market here.
        fn open(&self) -> Market {
            self.open_as(&validator().public_key())
        }
    }

    /// An order; an ask offers the GPUs [`gpus_of`] names for it.
    fn order(id: &str, owner: &Identity, side: Side, quantity: u64, usd: f64) -> Order {
        let order = Order::new(
            OrderId::new(id).unwrap(),
            owner.public_key(),
            side,
            GpuClass::new("H200 SXM").unwrap(),
            quantity,
            Price::from_usd(usd).unwrap(),
        )
        .unwrap();
        match side {
            Side::Ask => order.offering(gpus_of(owner, id, quantity)).unwrap(),
            Side::Bid => order,
        }
    }

    /// A sink that refuses its first `fail` calls and keeps what it took.
    struct Sink {
        fail: std::sync::atomic::AtomicUsize,
        took: std::sync::Mutex<Vec<(String, bool)>>,
    }

    impl LeaseSink for Sink {
        fn leased(
            &self,
            _: &GpuClass,
            leases: &[pog_market::lease::Lease],
            maybe_taken: bool,
        ) -> Result<(), String> {
            use std::sync::atomic::Ordering::SeqCst;
            if self.fail.load(SeqCst) > 0 {
                self.fail.fetch_sub(1, SeqCst);
                return Err("the ledger is away".into());
            }
            let mut took = self.took.lock().unwrap();
            took.extend(leases.iter().map(|l| (l.id.clone(), maybe_taken)));
            Ok(())
        }
    }

    /// A clearing's leases the sink could not take are handed again at the next start (told
    /// they may be taken in part), once; a clearing taken is never handed again, also after
    /// the store is reopened.
    #[test]
    fn leases_the_sink_missed_are_handed_again_at_the_next_start_once() {
        let v = validator();
        let (alice, bob) = (Identity::from_seed([2; 32]), Identity::from_seed([3; 32]));
        for place in Place::all() {
            let sink = Arc::new(Sink {
                fail: 1.into(),
                took: Default::default(),
            });
            let m = place.open().with_lease_sink(sink.clone());
            m.submit(&submit(
                &bob,
                &v.public_key(),
                order("a1", &bob, Side::Ask, 1, 2.0),
            ))
            .unwrap();
            m.submit(&submit(
                &alice,
                &v.public_key(),
                order("b1", &alice, Side::Bid, 1, 3.0),
            ))
            .unwrap();
            let record = m
                .clear(&clear_request(&v, now_ms(), Some(fresh_clear_nonce())))
                .unwrap();
            assert_eq!(record.leases.len(), 1, "the clearing stands");
            assert!(sink.took.lock().unwrap().is_empty(), "the sink refused");
            drop(m);
            let m = place.open().with_lease_sink(sink.clone());
            assert_eq!(m.hand_pending_leases(None), Ok(1));
            assert_eq!(
                *sink.took.lock().unwrap(),
                [(record.leases[0].id.clone(), true)]
            );
            assert_eq!(m.hand_pending_leases(None), Ok(0));
            drop(m);
            let m = place.open().with_lease_sink(sink.clone());
            assert_eq!(m.hand_pending_leases(None), Ok(0));
            assert_eq!(sink.took.lock().unwrap().len(), 1);
        }
    }

    #[test]
    fn the_book_reads_by_price_bids_highest_first_asks_lowest_first() {
        for place in Place::all() {
            let v = validator();
            let (alice, bob) = (Identity::from_seed([2; 32]), Identity::from_seed([3; 32]));
            let m = place.open();
            for (id, usd) in [("b1", 2.0), ("b2", 3.0), ("b3", 2.0)] {
                m.submit(&submit(
                    &alice,
                    &v.public_key(),
                    order(id, &alice, Side::Bid, 1, usd),
                ))
                .unwrap();
            }
            for (id, usd) in [("a1", 9.0), ("a2", 5.0), ("a3", 9.0)] {
                m.submit(&submit(
                    &bob,
                    &v.public_key(),
                    order(id, &bob, Side::Ask, 1, usd),
                ))
                .unwrap();
            }
            let book = m.book(None, None, MAX_BOOK_PAGE);
            let ids = |entries: &[BookEntry]| -> Vec<String> {
                entries.iter().map(|e| e.order.id().to_string()).collect()
            };
            // Ties in submission order: b1 before b3, a1 before a3.
            assert_eq!(ids(&book.bids), ["b2", "b1", "b3"]);
            assert_eq!(ids(&book.asks), ["a2", "a1", "a3"]);
        }
    }

    #[test]
    fn an_unbacked_ask_is_refused_and_changes_nothing() {
        for place in Place::all() {
            let v = validator();
            let (alice, bob) = (Identity::from_seed([2; 32]), Identity::from_seed([3; 32]));
            let m = place.open();
            let before = m.book(None, None, MAX_BOOK_PAGE);
            let refused = |order: Order| answer(m.submit(&submit(&bob, &v.public_key(), order)));
            // No GPUs named.
            let bare = Order::new(
                OrderId::new("a1").unwrap(),
                bob.public_key(),
                Side::Ask,
                GpuClass::new("H200 SXM").unwrap(),
                1,
                Price::from_usd(2.0).unwrap(),
            )
            .unwrap();
            let e = refused(bare.clone());
            assert_eq!(e.status, StatusCode::BAD_REQUEST, "{}", e.message);
            assert!(e.message.contains("names no GPUs"), "{}", e.message);
            // Alice's GPUs, in Bob's ask: not his to offer.
            let e = refused(bare.clone().offering(gpus_of(&alice, "a1", 1)).unwrap());
            assert_eq!(e.status, StatusCode::FORBIDDEN, "{}", e.message);
            assert!(
                e.message.contains("registered to another key"),
                "{}",
                e.message
            );
            // A GPU the validator does not know.
            let unknown = vec![pog_signed::GpuUuid::new("GPU-nowhere").unwrap()];
            let e = refused(bare.clone().offering(unknown).unwrap());
            assert!(
                e.message.contains("not registered at this validator"),
                "{}",
                e.message
            );
            // Two GPU-hours from one GPU open for an hour.
            let two = order("a1", &bob, Side::Ask, 2, 2.0);
            let one_gpu = two.clone().offering(gpus_of(&bob, "a1", 1)).unwrap();
            let e = refused(one_gpu);
            assert!(
                e.message.contains("have only 1 whole GPU-hours"),
                "{}",
                e.message
            );
            assert_eq!(m.book(None, None, MAX_BOOK_PAGE), before);
            // Backed, it rests; a second ask offering one of its GPUs is refused (409).
            m.submit(&submit(&bob, &v.public_key(), two)).unwrap();
            let again = order("a2", &bob, Side::Ask, 1, 3.0)
                .offering(gpus_of(&bob, "a1", 1))
                .unwrap();
            let e = refused(again);
            assert_eq!(e.status, StatusCode::CONFLICT, "{}", e.message);
            assert!(
                e.message.contains("already offered by ask a1"),
                "{}",
                e.message
            );
            // Bob's bid at or above his own ask would trade with it: refused (409).
            let e = refused(order("b1", &bob, Side::Bid, 1, 2.0));
            assert_eq!(e.status, StatusCode::CONFLICT, "{}", e.message);
            assert!(
                e.message.contains("never trades with itself"),
                "{}",
                e.message
            );
            assert_eq!(m.book(None, None, MAX_BOOK_PAGE).asks.len(), 1);
            assert!(m.book(None, None, MAX_BOOK_PAGE).bids.is_empty());
        }
    }

    /// A signed submission of `order`, open for an hour.
    fn submit(signer: &Identity, validator: &PublicKey, order: Order) -> Vec<u8> {
        submit_until(signer, validator, order, now_ms() + 3_600_000)
    }

    fn submit_until(
        signer: &Identity,
        validator: &PublicKey,
        order: Order,
        expires_at_ms: u64,
    ) -> Vec<u8> {
        v_seal(
            signer,
            SUBMIT_KIND,
            &SubmitMessage {
                validator: validator.clone(),
                order,
                expires_at_ms: Some(expires_at_ms),
            },
        )
    }

    /// The operator's signed request to clear the H200 SXM class, signed at `at_ms`.
    fn clear_request(v: &Identity, at_ms: u64, nonce: Option<String>) -> Vec<u8> {
        v_seal(
            v,
            CLEAR_KIND,
            &ClearMessage {
                validator: v.public_key(),
                class: GpuClass::new("H200 SXM").unwrap(),
                mechanism: Mechanism::UniformPrice,
                at_ms,
                nonce,
            },
        )
    }

    /// Appends `event` to the store of `m` as an older validator (or one whose clock ran
    /// elsewhere) stored it, at book time `at_ms`.
    fn store_as_of(m: &Market, kind: &str, event: &Event, at_ms: u64) {
        let mut inner = m.lock();
        inner.store.begin().unwrap();
        let text = serde_json::to_string(event).unwrap();
        inner.store.append(kind, &text, at_ms).unwrap();
        inner.store.finish(true).unwrap();
    }

    #[test]
    fn clearing_requests_from_the_far_past_or_future_are_refused_without_overflow() {
        for place in Place::all() {
            let v = validator();
            let m = place.open();
            for at_ms in [0, u64::MAX, u64::MAX - CLEAR_MAX_AGE_MS / 2] {
                let clear = clear_request(&v, at_ms, Some(fresh_clear_nonce()));
                let e = answer(m.clear(&clear));
                assert_eq!(e.status, StatusCode::BAD_REQUEST, "{at_ms}: {}", e.message);
            }
        }
    }

    #[test]
    fn the_store_replays_to_the_same_book_and_history() {
        for place in Place::all() {
            let v = validator();
            let (alice, bob) = (Identity::from_seed([2; 32]), Identity::from_seed([3; 32]));
            {
                let m = place.open();
                m.submit(&submit(
                    &alice,
                    &v.public_key(),
                    order("b1", &alice, Side::Bid, 3, 4.0),
                ))
                .unwrap();
                m.submit(&submit(
                    &bob,
                    &v.public_key(),
                    order("a1", &bob, Side::Ask, 2, 2.0),
                ))
                .unwrap();
                m.submit(&submit(
                    &bob,
                    &v.public_key(),
                    order("a2", &bob, Side::Ask, 1, 9.0),
                ))
                .unwrap();
                let cancel = v_seal(
                    &bob,
                    CANCEL_KIND,
                    &CancelMessage {
                        validator: v.public_key(),
                        id: OrderId::new("a2").unwrap(),
                        sequence: Some(2),
                    },
                );
                m.cancel(&cancel).unwrap();
                let clear = clear_request(&v, now_ms(), Some(fresh_clear_nonce()));
                assert_eq!(m.clear(&clear).unwrap().clearing.units, 2);
            }
            let m = place.open();
            let book = m.book(None, None, MAX_BOOK_PAGE);
            assert_eq!(book.bids.len(), 1);
            assert_eq!(book.bids[0].order.quantity(), 1);
            assert!(book.asks.is_empty());
            let history = m.history(None, 10);
            assert_eq!(history.clearings.len(), 1);
            assert_eq!(history.next_after, None);
            // The ids stay taken across the restart.
            let again = m.submit(&submit(
                &bob,
                &v.public_key(),
                order("a2", &bob, Side::Ask, 1, 1.0),
            ));
            assert_eq!(answer(again).status, StatusCode::BAD_REQUEST);
        }
    }

    #[test]
    fn a_restart_reads_the_last_snapshot_and_the_events_after_it_and_holds_the_same_book() {
        for place in Place::all() {
            let v = validator();
            let (alice, bob) = (Identity::from_seed([2; 32]), Identity::from_seed([3; 32]));
            let every = 10;
            let (book, leases, committed, events) = {
                let m = place.open().with_snapshot_every(every);
                // 33 events: 25 bids, 2 cancels, 3 asks, 3 clearings.
                for i in 0..25 {
                    let bid = order(&format!("b{i}"), &alice, Side::Bid, 1 + i % 3, 4.0);
                    m.submit(&submit(&alice, &v.public_key(), bid)).unwrap();
                }
                for (id, sequence) in [("b3", 3), ("b7", 7)] {
                    let cancel = CancelMessage {
                        validator: v.public_key(),
                        id: OrderId::new(id).unwrap(),
                        sequence: Some(sequence),
                    };
                    m.cancel(&v_seal(&alice, CANCEL_KIND, &cancel)).unwrap();
                }
                for (i, id) in ASK_IDS.iter().enumerate() {
                    let ask = order(id, &bob, Side::Ask, 2 + i as u64, 2.0);
                    m.submit(&submit(&bob, &v.public_key(), ask)).unwrap();
                    let clear = clear_request(&v, now_ms(), Some(fresh_clear_nonce()));
                    assert!(m.clear(&clear).unwrap().clearing.units > 0);
                }
                let leases = m.all_leases();
                let inner = m.lock();
                (
                    inner.book.clone(),
                    leases,
                    inner.book.bid_commitment_of(alice.public_key().as_str()),
                    33,
                )
            };
            assert_eq!(leases.len(), 2 + 3 + 4);
            let m = place.open();
            // The snapshot taken at the 30th event, and the events from it on.
            let stored = m.stored_events().unwrap();
            assert_eq!(stored, events - 30 + 1);
            assert!(stored <= every + 1);
            assert_eq!(m.all_leases(), leases);
            let inner = m.lock();
            assert_eq!(inner.book, book);
            assert_eq!(
                inner.book.bid_commitment_of(alice.public_key().as_str()),
                committed
            );
            drop(inner);
            // The clearing requests taken are remembered across it too, and the book goes on.
            let bid = order("b99", &alice, Side::Bid, 1, 4.0);
            m.submit(&submit(&alice, &v.public_key(), bid)).unwrap();
            assert_eq!(m.stored_events().unwrap(), stored + 1);
        }
    }

    #[test]
    fn the_price_history_keeps_its_latest_points_per_gpu() {
        for place in Place::all() {
            let m = place.open();
            let point = |gpu: &str, at_ms: u64| PostedPrice {
                seq: 0,
                gpu_uuid: gpu.into(),
                at_ms,
                cause: "test".into(),
                record_id: None,
                model: None,
                score: 0.0,
                gpu_worth: 0.0,
                price_micro_usd: Some(at_ms),
                unpriced: None,
                quote: None,
                signals: None,
            };
            let many: Vec<PostedPrice> = (1..=1005).map(|t| point("GPU-a", t)).collect();
            m.post_prices(&many, 1).unwrap();
            m.post_prices(&[point("GPU-b", 1)], 2).unwrap();
            let kept = m.price_history("GPU-a", 0, 2000).unwrap();
            assert_eq!(kept.len(), MAX_PRICE_POINTS_PER_GPU as usize);
            assert_eq!(kept[0].at_ms, 6);
            assert_eq!(m.latest_price("GPU-a").unwrap().unwrap().at_ms, 1005);
            assert_eq!(m.price_history("GPU-b", 0, 10).unwrap().len(), 1);
        }
    }

    #[test]
    fn orders_leave_at_their_expiry_and_a_replayed_submission_cannot_bring_one_back() {
        for place in Place::all() {
            let v = validator();
            let alice = Identity::from_seed([2; 32]);
            let soon = submit_until(
                &alice,
                &v.public_key(),
                order("b1", &alice, Side::Bid, 3, 4.0),
                now_ms() + 300,
            );
            {
                let m = place.open();
                m.submit(&soon).unwrap();
                m.submit(&submit(
                    &alice,
                    &v.public_key(),
                    order("b2", &alice, Side::Bid, 1, 4.0),
                ))
                .unwrap();
                assert_eq!(m.book(None, None, MAX_BOOK_PAGE).bids.len(), 2);
                std::thread::sleep(std::time::Duration::from_millis(400));
                // Out of the view at once, out of the book at the next request.
                assert_eq!(m.book(None, None, MAX_BOOK_PAGE).bids.len(), 1);
                assert_eq!(m.open_hours(&GpuClass::new("H200 SXM").unwrap()), (1, 0));
                let replayed = answer(m.submit(&soon));
                assert_eq!(replayed.status, StatusCode::BAD_REQUEST);
                assert!(
                    replayed.message.contains("not after now"),
                    "{}",
                    replayed.message
                );
                let far = submit_until(
                    &alice,
                    &v.public_key(),
                    order("b3", &alice, Side::Bid, 1, 4.0),
                    now_ms() + pog_market::MAX_ORDER_LIFETIME_MS + 60_000,
                );
                assert_eq!(answer(m.submit(&far)).status, StatusCode::BAD_REQUEST);
            }
            // The store replays at the times the requests came: the same book.
            let m = place.open();
            let book = m.book(None, None, MAX_BOOK_PAGE);
            assert_eq!(book.bids.len(), 1);
            assert_eq!(book.bids[0].order.id().as_str(), "b2");
            assert!(book.bids[0].expires_at_ms > now_ms());
        }
    }

    #[test]
    fn a_store_from_before_orders_expired_still_opens() {
        for place in Place::all() {
            let v = validator();
            let alice = Identity::from_seed([2; 32]);
            let old = v_seal(
                &alice,
                SUBMIT_KIND,
                &SubmitMessage {
                    validator: v.public_key(),
                    order: order("b1", &alice, Side::Bid, 1, 4.0),
                    expires_at_ms: None,
                },
            );
            let came = now_ms() - 1000;
            {
                let m = place.open();
                // Refused now: a new order must name its expiry.
                let refused = answer(m.submit(&old));
                assert!(
                    refused.message.contains("names no expiry"),
                    "{}",
                    refused.message
                );
                // As the store of an older validator held it.
                let event = Event::Submit {
                    envelope: serde_json::from_slice(&old).unwrap(),
                };
                store_as_of(&m, "submit", &event, came);
            }
            let m = place.open();
            let book = m.book(None, None, MAX_BOOK_PAGE);
            assert_eq!(book.bids.len(), 1);
            assert_eq!(
                book.bids[0].expires_at_ms,
                came + pog_market::MAX_ORDER_LIFETIME_MS
            );
        }
    }

    #[test]
    fn a_clearing_request_clears_once_even_after_a_restart() {
        for place in Place::all() {
            let v = validator();
            let (alice, bob) = (Identity::from_seed([2; 32]), Identity::from_seed([3; 32]));
            let request = clear_request(&v, now_ms(), Some(fresh_clear_nonce()));
            {
                let m = place.open();
                m.submit(&submit(
                    &alice,
                    &v.public_key(),
                    order("b1", &alice, Side::Bid, 3, 4.0),
                ))
                .unwrap();
                m.submit(&submit(
                    &bob,
                    &v.public_key(),
                    order("a1", &bob, Side::Ask, 1, 2.0),
                ))
                .unwrap();
                assert_eq!(m.clear(&request).unwrap().clearing.units, 1);
                for _ in 0..4 {
                    let e = m.clear(&request).unwrap_err();
                    assert!(
                        matches!(&e, MarketRequestError::Replayed { nonce } if nonce.len() == 32),
                        "{e}"
                    );
                    let e = ApiError::from(e);
                    assert_eq!(e.status, StatusCode::CONFLICT, "{}", e.message);
                    assert!(e.message.contains("taken already"), "{}", e.message);
                }
                assert_eq!(m.history(None, 10).clearings.len(), 1);
                // Another request for the same class is another clearing.
                m.clear(&clear_request(&v, now_ms(), Some(fresh_clear_nonce())))
                    .unwrap();
                for nonce in [
                    None,
                    Some(String::new()),
                    Some("n".repeat(65)),
                    Some("a b".into()),
                ] {
                    let e = answer(m.clear(&clear_request(&v, now_ms(), nonce)));
                    assert_eq!(e.status, StatusCode::BAD_REQUEST, "{}", e.message);
                    assert!(e.message.contains("nonce"), "{}", e.message);
                }
                assert_eq!(m.history(None, 10).clearings.len(), 2);
            }
            // The restarted market remembers the request from its store.
            let m = place.open();
            assert_eq!(answer(m.clear(&request)).status, StatusCode::CONFLICT);
            assert_eq!(m.history(None, 10).clearings.len(), 2);
        }
    }

    #[test]
    fn a_clock_stepped_back_cannot_bring_back_a_forgotten_clearing_request() {
        for place in Place::all() {
            let v = validator();
            let nonce = fresh_clear_nonce();
            let request = clear_request(&v, now_ms(), Some(nonce.clone()));
            {
                let m = place.open();
                m.clear(&request).unwrap();
                // The next clearing came six minutes later; the clock has since stepped back to now.
                let later = now_ms() + CLEAR_MAX_AGE_MS + 60_000;
                let next = clear_request(&v, later, Some(fresh_clear_nonce()));
                let event = Event::Clear {
                    envelope: serde_json::from_slice(&next).unwrap(),
                };
                store_as_of(&m, "clear", &event, later);
            }
            let m = place.open();
            // The first request is out of its window by the book's time: forgotten, and refused.
            assert!(!m.lock().taken.contains(&nonce));
            let e = answer(m.clear(&request));
            assert_eq!(e.status, StatusCode::BAD_REQUEST, "{}", e.message);
            assert!(e.message.contains("five minutes old"), "{}", e.message);
            assert_eq!(m.history(None, 10).clearings.len(), 2);
        }
    }

    #[test]
    fn a_store_from_before_clearing_requests_carried_nonces_still_opens() {
        for place in Place::all() {
            let v = validator();
            let old = clear_request(&v, now_ms(), None);
            {
                let m = place.open();
                let event = Event::Clear {
                    envelope: serde_json::from_slice(&old).unwrap(),
                };
                store_as_of(&m, "clear", &event, now_ms());
            }
            let m = place.open();
            assert_eq!(m.history(None, 10).clearings.len(), 1);
            // Sent now, the same request is refused: a new one must carry a nonce.
            let e = answer(m.clear(&old));
            assert_eq!(e.status, StatusCode::BAD_REQUEST, "{}", e.message);
            assert_eq!(m.history(None, 10).clearings.len(), 1);
        }
    }

    /// Two validators of one fleet (keys of seeds 1 and 9) on a fresh database of the test
    /// PostgreSQL server: their markets, and the database's URL; `None` without a server.
    fn fleet() -> Option<(Market, Market, String)> {
        let url = crate::postgres::testing::fresh_postgres_database()?;
        let place = Place::Postgres(url.clone());
        let (a, b) = (validator(), Identity::from_seed([9; 32]));
        Some((
            place.open_as(&a.public_key()),
            place.open_as(&b.public_key()),
            url,
        ))
    }

    fn cancel_at(owner: &Identity, at: &PublicKey, id: &str, sequence: u64) -> Vec<u8> {
        let cancel = CancelMessage {
            validator: at.clone(),
            id: OrderId::new(id).unwrap(),
            sequence: Some(sequence),
        };
        v_seal(owner, CANCEL_KIND, &cancel)
    }

    /// An order taken at one validator of a fleet is in the other's book, and its owner
    /// cancels it there (nobody else can).
    #[test]
    fn an_order_taken_at_one_validator_is_in_the_others_book_and_cancelled_there() {
        let Some((a, b, _)) = fleet() else { return };
        let (alice, bob) = (Identity::from_seed([2; 32]), Identity::from_seed([3; 32]));
        let (ka, kb) = (
            validator().public_key(),
            Identity::from_seed([9; 32]).public_key(),
        );
        let taken = a
            .submit(&submit(&alice, &ka, order("b1", &alice, Side::Bid, 2, 4.0)))
            .unwrap();
        let book = b.book(None, None, MAX_BOOK_PAGE);
        assert_eq!(book.bids.len(), 1);
        assert_eq!(book.bids[0].sequence, taken.sequence);
        // The same id again, at the other validator: the fleet's book has it already.
        let again = b.submit(&submit(&alice, &kb, order("b1", &alice, Side::Bid, 1, 4.0)));
        assert_eq!(answer(again).status, StatusCode::BAD_REQUEST);
        let refused = b.cancel(&cancel_at(&bob, &kb, "b1", taken.sequence));
        assert_eq!(answer(refused).status, StatusCode::NOT_FOUND);
        b.cancel(&cancel_at(&alice, &kb, "b1", taken.sequence))
            .unwrap();
        assert!(a.book(None, None, MAX_BOOK_PAGE).bids.is_empty());
        assert!(b.book(None, None, MAX_BOOK_PAGE).bids.is_empty());
    }

    /// Two asks offering one GPU, sent at once to two validators of a fleet from two threads:
    /// one is taken, the other refused (each request is judged under the sequence lock on
    /// the book with every event before it).
    #[test]
    fn two_asks_for_one_gpu_at_two_validators_at_once_one_is_taken() {
        let Some((a, b, _)) = fleet() else { return };
        let (a, b) = (Arc::new(a), Arc::new(b));
        let bob = Identity::from_seed([3; 32]);
        let keys = [
            validator().public_key(),
            Identity::from_seed([9; 32]).public_key(),
        ];
        for (round, gpu) in ASK_IDS
            .iter()
            .flat_map(|id| gpus_of(&bob, id, 4))
            .enumerate()
        {
            let start = Arc::new(std::sync::Barrier::new(2));
            let threads: Vec<_> = [a.clone(), b.clone()]
                .into_iter()
                .zip(keys.clone())
                .enumerate()
                .map(|(side, (market, key))| {
                    let (start, gpu, bob) =
                        (start.clone(), gpu.clone(), Identity::from_seed([3; 32]));
                    std::thread::spawn(move || {
                        let ask = Order::new(
                            OrderId::new(format!("r{round}-{side}")).unwrap(),
                            bob.public_key(),
                            Side::Ask,
                            GpuClass::new("H200 SXM").unwrap(),
                            1,
                            Price::from_usd(2.0).unwrap(),
                        )
                        .unwrap()
                        .offering(vec![gpu])
                        .unwrap();
                        let bytes = submit(&bob, &key, ask);
                        start.wait();
                        market.submit(&bytes)
                    })
                })
                .collect();
            let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
            let taken = results.iter().filter(|r| r.is_ok()).count();
            assert_eq!(taken, 1, "round {round}: {results:?}");
            let refused = results.into_iter().find_map(Result::err).unwrap();
            assert!(
                matches!(
                    refused,
                    MarketRequestError::Book(BookError::GpuOffered { .. })
                ),
                "{refused}"
            );
        }
        assert_eq!(a.book(None, None, MAX_BOOK_PAGE).asks.len(), 12);
        assert_eq!(b.book(None, None, MAX_BOOK_PAGE).asks.len(), 12);
    }

    /// Submissions from threads at two validators of a fleet at once: every one is taken,
    /// stored once with the next number (no gap), and both books, and a validator restarted on
    /// the database (from a snapshot one of them wrote), hold the same book.
    #[test]
    fn submissions_at_two_validators_at_once_are_sequenced_once_and_both_books_agree() {
        let Some((a, b, url)) = fleet() else { return };
        let (a, b) = (Arc::new(a.with_snapshot_every(1000)), Arc::new(b));
        let keys = [
            validator().public_key(),
            Identity::from_seed([9; 32]).public_key(),
        ];
        let threads: Vec<_> = (0..4u8)
            .map(|t| {
                let (market, key) = match t % 2 {
                    0 => (a.clone(), keys[0].clone()),
                    _ => (b.clone(), keys[1].clone()),
                };
                std::thread::spawn(move || {
                    let owner = Identity::from_seed([20 + t; 32]);
                    (0..10)
                        .map(|i| {
                            let bid = order(&format!("b{i}"), &owner, Side::Bid, 1, 4.0);
                            market.submit(&submit(&owner, &key, bid)).unwrap().sequence
                        })
                        .collect::<Vec<u64>>()
                })
            })
            .collect();
        let mut sequences: Vec<u64> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        sequences.sort();
        sequences.dedup();
        assert_eq!(sequences.len(), 40, "each order its own place in the book");
        let stored: Vec<i64> = {
            let mut inner = a.lock();
            inner
                .store
                .events_after(0)
                .unwrap()
                .iter()
                .map(|e| e.seq)
                .collect()
        };
        assert_eq!(stored, (1..=40).collect::<Vec<i64>>(), "no gap, none twice");
        a.caught_up().unwrap();
        b.caught_up().unwrap();
        assert_eq!(a.lock().book, b.lock().book);
        assert_eq!(a.book(None, None, MAX_BOOK_PAGE).bids.len(), 40);
        // More, with snapshots every 7 events written by either validator; then a restart.
        let b = Place::Postgres(url.clone())
            .open_as(&keys[1])
            .with_snapshot_every(7);
        let owner = Identity::from_seed([30; 32]);
        for i in 0..10 {
            let (market, key) = if i % 2 == 0 {
                (&*a, &keys[0])
            } else {
                (&b, &keys[1])
            };
            let bid = order(&format!("c{i}"), &owner, Side::Bid, 1, 4.0);
            market.submit(&submit(&owner, key, bid)).unwrap();
        }
        assert!(
            b.stored_events().unwrap() < 50,
            "a snapshot dropped the events before it"
        );
        let restarted = Place::Postgres(url).open_as(&keys[0]);
        a.caught_up().unwrap();
        b.caught_up().unwrap();
        assert_eq!(a.lock().book, b.lock().book);
        assert_eq!(restarted.lock().book, a.lock().book);
        assert_eq!(restarted.book(None, None, MAX_BOOK_PAGE).bids.len(), 50);
    }

    /// A clearing made at one validator of a fleet is in the other's history, its leases go to
    /// the fleet's ledger once, and a scheduled clearing run at both at once clears once.
    #[test]
    fn a_clearing_at_one_validator_is_the_fleets_once_with_its_leases_logged_once() {
        let Some((a, b, _)) = fleet() else { return };
        let sink = Arc::new(Sink {
            fail: 0.into(),
            took: Default::default(),
        });
        let (va, vb) = (validator(), Identity::from_seed([9; 32]));
        let a = Arc::new(a.with_lease_sink(sink.clone()));
        let b = Arc::new(b.with_lease_sink(sink.clone()));
        let (alice, bob) = (Identity::from_seed([2; 32]), Identity::from_seed([3; 32]));
        a.submit(&submit(
            &bob,
            &va.public_key(),
            order("a1", &bob, Side::Ask, 1, 2.0),
        ))
        .unwrap();
        b.submit(&submit(
            &alice,
            &vb.public_key(),
            order("b1", &alice, Side::Bid, 1, 3.0),
        ))
        .unwrap();
        let record = a
            .clear(&clear_request(&va, now_ms(), Some(fresh_clear_nonce())))
            .unwrap();
        assert_eq!(record.leases.len(), 1);
        assert_eq!(b.history(None, 10).clearings, std::slice::from_ref(&record));
        assert_eq!(b.hand_pending_leases(None), Ok(0));
        assert_eq!(sink.took.lock().unwrap().len(), 1, "logged once");
        // The same request at the other validator: it names the first, and is refused.
        let replay = b.clear(&clear_request(&va, now_ms(), Some(fresh_clear_nonce())));
        assert!(matches!(
            replay,
            Err(MarketRequestError::OtherValidator { .. })
        ));
        // New orders, and both validators' schedules clear at once: one clearing.
        a.submit(&submit(
            &bob,
            &va.public_key(),
            order("a2", &bob, Side::Ask, 1, 2.0),
        ))
        .unwrap();
        b.submit(&submit(
            &alice,
            &vb.public_key(),
            order("b2", &alice, Side::Bid, 1, 3.0),
        ))
        .unwrap();
        let start = Arc::new(std::sync::Barrier::new(2));
        let threads: Vec<_> = [(a.clone(), va), (b.clone(), vb)]
            .into_iter()
            .map(|(market, key)| {
                let start = start.clone();
                std::thread::spawn(move || {
                    market.caught_up().unwrap();
                    start.wait();
                    market.clear_due(&key, Mechanism::UniformPrice)
                })
            })
            .collect();
        let made: Vec<_> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .map(Result::unwrap)
            .collect();
        assert_eq!(made.len(), 1, "{made:?}");
        assert_eq!(a.history(None, 10).clearings.len(), 2);
        assert_eq!(b.history(None, 10).clearings.len(), 2);
        assert_eq!(sink.took.lock().unwrap().len(), 2, "each lease logged once");
    }

    /// A store that fails in the middle of a request leaves nothing of it in the book, and a
    /// database away answers 503; both come back once the database does.
    #[test]
    fn a_store_failing_or_away_is_a_503_and_leaves_nothing_half_applied() {
        let Some((a, _, url)) = fleet() else { return };
        let v = validator().public_key();
        let alice = Identity::from_seed([2; 32]);
        let bid = || submit(&alice, &v, order("b1", &alice, Side::Bid, 1, 4.0));
        let sql = crate::postgres::testing::on_server;
        // The event cannot be stored (after the book took it in).
        sql(
            &url,
            "ALTER TABLE market_events ADD CONSTRAINT no_submits CHECK (kind <> 'submit')",
        );
        let e = answer(a.submit(&bid()));
        assert_eq!(e.status, StatusCode::SERVICE_UNAVAILABLE, "{}", e.message);
        assert!(a.book(None, None, MAX_BOOK_PAGE).bids.is_empty());
        sql(&url, "ALTER TABLE market_events DROP CONSTRAINT no_submits");
        let taken = a.submit(&bid()).unwrap();
        // The database away: refused with what happened, and the book as it was.
        let name = url
            .rsplit('/')
            .next()
            .unwrap()
            .split('?')
            .next()
            .unwrap()
            .to_owned();
        let server = url.replace(&format!("/{name}"), "/postgres");
        sql(
            &server,
            &format!(
                "ALTER DATABASE {name} ALLOW_CONNECTIONS false; \
                 SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"
            ),
        );
        let cancel = cancel_at(&alice, &v, "b1", taken.sequence);
        let e = answer(a.cancel(&cancel));
        assert_eq!(e.status, StatusCode::SERVICE_UNAVAILABLE, "{}", e.message);
        assert!(e.message.contains("PostgreSQL"), "{}", e.message);
        assert!(a.caught_up().is_err());
        assert_eq!(a.book(None, None, MAX_BOOK_PAGE).bids.len(), 1);
        sql(
            &server,
            &format!("ALTER DATABASE {name} ALLOW_CONNECTIONS true"),
        );
        a.cancel(&cancel).unwrap();
        assert!(a.book(None, None, MAX_BOOK_PAGE).bids.is_empty());
    }

    /// The escrow as the withdrawal tests see it: each renter's deposit, and a settlement key
    /// that signs vouchers while `up`.
    struct Escrow {
        deposits: std::collections::BTreeMap<PublicKey, u128>,
        up: std::sync::atomic::AtomicBool,
    }

    impl Escrow {
        /// The escrow where each of `renters` deposited $10, signing vouchers.
        fn holding(renters: &[&Identity]) -> Arc<Escrow> {
            Arc::new(Escrow {
                deposits: renters
                    .iter()
                    .map(|r| (r.public_key(), 10_000_000))
                    .collect(),
                up: true.into(),
            })
        }

        /// `market` backing bids by these deposits and signing vouchers with this key.
        fn serve(self: &Arc<Escrow>, market: Market) -> Market {
            market
                .with_deposits(self.clone())
                .with_vouchers(self.clone())
        }
    }

    impl pog_market::backing::Deposits for Escrow {
        fn deposit_of(
            &self,
            owner: &PublicKey,
        ) -> Result<u128, pog_market::backing::DepositsUnavailable> {
            Ok(self.deposits.get(owner).copied().unwrap_or(0))
        }
    }

    impl crate::settlement::EscrowPayments for Escrow {
        fn sign(
            &self,
            _: &crate::settlement::EscrowTerms,
        ) -> Result<pog_records::EscrowPayment, crate::settlement::EscrowUnavailable> {
            Err(crate::settlement::EscrowUnavailable(
                "no settling here".into(),
            ))
        }

        fn deliver(
            &self,
            _: &crate::settlement::EscrowTerms,
            _: &pog_records::EscrowPayment,
        ) -> Result<bool, crate::settlement::EscrowUnavailable> {
            Err(crate::settlement::EscrowUnavailable(
                "no settling here".into(),
            ))
        }

        fn voucher(
            &self,
            renter: &PublicKey,
            amount_micro_usd: u64,
            expires_at_s: u64,
        ) -> Result<crate::settlement::Voucher, crate::settlement::EscrowUnavailable> {
            if !self.up.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(crate::settlement::EscrowUnavailable(
                    "the chain did not answer".into(),
                ));
            }
            Ok(crate::settlement::Voucher {
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

    /// `renter`'s request, signed at `at_ms`, for a voucher of `amount` µ$ from validator `at`.
    fn withdrawal(renter: &Identity, at: &PublicKey, amount: u64, at_ms: u64) -> Vec<u8> {
        let message = crate::settlement::WithdrawMessage {
            validator: at.clone(),
            amount_micro_usd: amount,
            at_ms,
        };
        v_seal(renter, crate::settlement::WITHDRAW_KIND, &message)
    }

    /// Whether the refusal is of a bid its deposit does not cover.
    fn bid_not_covered<T>(result: &Result<T, MarketRequestError>) -> bool {
        matches!(
            result,
            Err(MarketRequestError::Backing(
                BackingError::BidNotCovered { .. }
            ))
        )
    }

    /// A voucher signed at one validator of a fleet holds its amount from the renter's bids at
    /// any other: of a $10 deposit, after a $6 voucher at A, a $5 bid at B is refused and a $4
    /// one taken.
    #[test]
    fn a_voucher_at_one_validator_holds_the_deposit_from_bids_at_another() {
        let Some((a, b, _)) = fleet() else { return };
        let alice = Identity::from_seed([2; 32]);
        let escrow = Escrow::holding(&[&alice]);
        let (a, b) = (escrow.serve(a), escrow.serve(b));
        let (ka, kb) = (
            validator().public_key(),
            Identity::from_seed([9; 32]).public_key(),
        );
        let voucher = a
            .withdraw(&withdrawal(&alice, &ka, 6_000_000, now_ms()))
            .unwrap();
        assert_eq!(voucher.amount_micro_usd, 6_000_000);
        let over = b.submit(&submit(&alice, &kb, order("b1", &alice, Side::Bid, 1, 5.0)));
        assert!(bid_not_covered(&over), "{over:?}");
        b.submit(&submit(&alice, &kb, order("b2", &alice, Side::Bid, 1, 4.0)))
            .unwrap();
        // And the bid at B holds the rest from a voucher at A.
        let more = a.withdraw(&withdrawal(&alice, &ka, 1, now_ms() + 1));
        assert!(
            matches!(
                more,
                Err(MarketRequestError::WithdrawalNotCovered { available: 0, .. })
            ),
            "{more:?}"
        );
    }

    /// Two requests for a voucher of a renter's whole deposit, sent at once from two threads
    /// to two validators of a fleet: one is signed, the other refused (the holds are taken
    /// under the sequence lock, on the fleet's store).
    #[test]
    fn two_withdrawals_of_the_whole_deposit_at_two_validators_at_once_one_is_signed() {
        let Some((a, b, _)) = fleet() else { return };
        let renters: Vec<Identity> = (40..45u8).map(|s| Identity::from_seed([s; 32])).collect();
        let escrow = Escrow::holding(&renters.iter().collect::<Vec<_>>());
        let (a, b) = (Arc::new(escrow.serve(a)), Arc::new(escrow.serve(b)));
        let keys = [
            validator().public_key(),
            Identity::from_seed([9; 32]).public_key(),
        ];
        for renter in &renters {
            let start = Arc::new(std::sync::Barrier::new(2));
            let at_ms = now_ms();
            let threads: Vec<_> = [
                (a.clone(), &keys[0], at_ms),
                (b.clone(), &keys[1], at_ms + 1),
            ]
            .into_iter()
            .map(|(market, key, at_ms)| {
                let bytes = withdrawal(renter, key, 10_000_000, at_ms);
                let start = start.clone();
                std::thread::spawn(move || {
                    start.wait();
                    market.withdraw(&bytes)
                })
            })
            .collect();
            let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
            assert_eq!(
                results.iter().filter(|r| r.is_ok()).count(),
                1,
                "{results:?}"
            );
            let refused = results.into_iter().find_map(Result::err).unwrap();
            assert!(
                matches!(
                    refused,
                    MarketRequestError::WithdrawalNotCovered { .. }
                        | MarketRequestError::StaleWithdrawal
                ),
                "{refused}"
            );
        }
    }

    /// A withdrawal request taken at one validator of a fleet is refused at another: the same
    /// bytes name the first validator, and one signed for the other no later is stale (each
    /// renter's last request is the fleet's).
    #[test]
    fn a_withdrawal_request_taken_at_one_validator_is_stale_at_another() {
        let Some((a, b, _)) = fleet() else { return };
        let alice = Identity::from_seed([2; 32]);
        let escrow = Escrow::holding(&[&alice]);
        let (a, b) = (escrow.serve(a), escrow.serve(b));
        let (ka, kb) = (
            validator().public_key(),
            Identity::from_seed([9; 32]).public_key(),
        );
        let at_ms = now_ms();
        let taken = withdrawal(&alice, &ka, 1_000_000, at_ms);
        a.withdraw(&taken).unwrap();
        assert!(matches!(
            b.withdraw(&taken),
            Err(MarketRequestError::OtherValidator { .. })
        ));
        for at in [at_ms, at_ms - 1] {
            let again = b.withdraw(&withdrawal(&alice, &kb, 1_000_000, at));
            assert!(
                matches!(again, Err(MarketRequestError::StaleWithdrawal)),
                "{again:?}"
            );
        }
        // A newer one is taken, counting the first voucher: $9 of $10 is free.
        let over = b.withdraw(&withdrawal(&alice, &kb, 9_000_001, at_ms + 1));
        assert!(
            matches!(
                over,
                Err(MarketRequestError::WithdrawalNotCovered {
                    available: 9_000_000,
                    ..
                })
            ),
            "{over:?}"
        );
        b.withdraw(&withdrawal(&alice, &kb, 9_000_000, at_ms + 2))
            .unwrap();
    }

    /// A voucher's hold and the renter's last request are kept in the store: a validator
    /// restarted on it still refuses a bid the voucher leaves uncovered and the request
    /// replayed. A voucher that could not be signed (the chain away) holds nothing, and its
    /// request may be sent again.
    #[test]
    fn a_withdrawal_hold_survives_a_restart_and_a_failed_signing_holds_nothing() {
        for place in Place::all() {
            let v = validator().public_key();
            let alice = Identity::from_seed([2; 32]);
            let escrow = Escrow::holding(&[&alice]);
            let at_ms = now_ms();
            let request = withdrawal(&alice, &v, 6_000_000, at_ms);
            {
                let m = escrow.serve(place.open());
                escrow.up.store(false, std::sync::atomic::Ordering::SeqCst);
                let e = answer(m.withdraw(&request));
                assert_eq!(e.status, StatusCode::SERVICE_UNAVAILABLE, "{}", e.message);
                // Nothing held: the whole deposit backs a bid (cancelled again).
                let bid = m
                    .submit(&submit(&alice, &v, order("b0", &alice, Side::Bid, 1, 10.0)))
                    .unwrap();
                m.cancel(&cancel_at(&alice, &v, "b0", bid.sequence))
                    .unwrap();
                escrow.up.store(true, std::sync::atomic::Ordering::SeqCst);
                m.withdraw(&request).unwrap();
            }
            let m = escrow.serve(place.open());
            let over = m.submit(&submit(&alice, &v, order("b1", &alice, Side::Bid, 1, 5.0)));
            assert!(bid_not_covered(&over), "{over:?}");
            assert!(matches!(
                m.withdraw(&request),
                Err(MarketRequestError::StaleWithdrawal)
            ));
            m.submit(&submit(&alice, &v, order("b2", &alice, Side::Bid, 1, 4.0)))
                .unwrap();
        }
    }

    /// The API's answer to a refused request.
    fn answer<T: std::fmt::Debug>(result: Result<T, MarketRequestError>) -> ApiError {
        ApiError::from(result.unwrap_err())
    }

    fn v_seal<T: Serialize>(who: &Identity, kind: &str, message: &T) -> Vec<u8> {
        serde_json::to_vec(&who.seal(kind, message).unwrap()).unwrap()
    }
}
