//! Markets for GPU-hours, as pure logic: checked orders and prices, two clearing rules, and an
//! order book (issue 15's auctions; scores, prices and the validator's API build on it).
//!
//! - [`price`]: [`Price`], a price per GPU-hour in integer micro-dollars, from 0 to
//!   $1,000,000; NaN, infinities, negatives and absurd values are refused with a
//!   [`PriceError`].
//! - [`order`]: [`Order`]s (bids from renters, asks from providers) for a quantity of
//!   GPU-hours of one [`GpuClass`], owned by an Ed25519 key. Every part is checked when it is
//!   made, so an order that exists is valid and a bad one never reaches a book.
//! - [`auction`]: the clearing rules for one class. [`uniform_price`] trades every efficient
//!   unit at one market-clearing price (the middle of the interval of such prices);
//!   [`mcafee`] is McAfee's trade-reduction double auction, truthful for one-unit orders at
//!   the cost of at most one trade. Both return a [`Clearing`] of [`Trade`]s.
//! - [`book`]: the [`Book`] of open orders per class: submit, cancel (owner only), clear with
//!   either rule, expiry (every order is open until a time its owner signed, at most
//!   [`MAX_ORDER_LIFETIME_MS`] ahead), and the history of [`ClearingRecord`]s. A refused
//!   request changes nothing but the time. A [`BookSnapshot`] holds its whole state, so a
//!   store replays the events after one, not all.
//!
//! - [`backing`]: what backs an ask: GPUs registered to its owner key with a recent accepted,
//!   model-proving record, and no more GPU-hours than they have before the ask expires, read
//!   through the [`GpuStanding`] interface the validator implements over its stores.
//!
//! - [`score`]: the Proof-of-GPU [`Score`] of a host from verified figures only (GPU 55 %, CPU
//!   20 %, RAM 15 %, storage 10 %, normalized against a reference host, multi-GPU aggregated,
//!   times reliability), with its parameters in [`config`] (embedded defaults in
//!   `data/market.toml`) and its inputs read from reports by [`report`].
//! - [`quote`]: a price per GPU-hour from the score, the class's $ per verified TFLOP-hour,
//!   the market and reliability, and the [`PriceHistory`] of every quote; [`signals`]: the
//!   market of a class from backed GPU-hours leased over time (utilization, the trend of
//!   demand, the pull of the trailing clearing price; never open orders), and the bound on
//!   one actor's move of a price.
//!
//! - [`appraisal`]: a registered GPU's score and price from the validator's own signed
//!   records: the latest proof decides whether its GPU part counts, the window's pass rate
//!   its reliability, the proofs' measured pace its compute figures; [`evidence`] reads its
//!   rounds and health records into the uptime and the anomalies that reliability counts.
//! - [`lease`]: what a trade becomes (GPUs for a time), with the renter's [`access`];
//!   [`settlement`]: what each period of a
//!   lease pays the provider, for the hours the validator's rounds proved, and refunds the
//!   renter.
//!
//! Everything serializes with serde in snake_case; amounts are integers named `*_micro_usd`.

#![warn(missing_docs)]

pub mod access;
pub mod appraisal;
pub mod auction;
pub mod backing;
pub mod book;
pub mod config;
pub mod evidence;
pub mod lease;
pub mod order;
pub mod price;
pub mod quote;
pub mod report;
pub mod score;
pub mod settlement;
pub mod signals;

pub use auction::{mcafee, uniform_price, ClearError, Clearing, Mechanism, Trade};
pub use backing::{BackingError, BackingRules, GpuStanding, LatestProof, Standing};
pub use book::{
    Book, BookError, BookSnapshot, ClearingRecord, OpenOrder, SnapshotError, MAX_ORDER_LIFETIME_MS,
};
pub use config::{Config, ConfigError};
pub use order::{GpuClass, Order, OrderError, OrderId, Side};
pub use price::{Price, PriceError};
pub use quote::{quote, MarketState, PriceHistory, PricePoint, Quote, QuoteError};
pub use score::{score, simulated, HostFigures, Score, SIMULATED};
