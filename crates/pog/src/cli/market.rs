//! The flags of `pog score`, `pog price` and `pog market`, and the order-book flags of
//! `pog validator`.

use clap::{Args, Subcommand};
use pog_market::{Mechanism, Side};
use pog_validator::market::MarketLimits;
use std::path::PathBuf;
use std::time::Duration;

/// Where the figures come from: a fresh `pog check` of this host, or a saved report.
#[derive(Debug, Args, Clone)]
pub struct ReportArgs {
    /// A saved `pog check --json` output to score instead of checking this host now.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Score and price parameters instead of the embedded defaults (the shape of
    /// crates/market/data/market.toml).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// `pog score`.
#[derive(Debug, Args, Clone)]
pub struct ScoreArgs {
    /// Where the figures come from.
    #[command(flatten)]
    pub source: ReportArgs,
}

/// `pog price`.
#[derive(Debug, Args, Clone)]
pub struct PriceArgs {
    /// Where the figures come from.
    #[command(flatten)]
    pub source: ReportArgs,
    /// Price a model from the spec database (estimated, taken as proven) instead of a host.
    #[arg(long, value_name = "MODEL", conflicts_with = "report")]
    pub model: Option<String>,
    /// The class's utilization (leased over proven GPU-hours), 0-1 [default: the configured
    /// target, a neutral market].
    #[arg(long, value_name = "FRACTION")]
    pub utilization: Option<f64>,
    /// The trend of the class's leased GPU-hours, -1 to 1 (0: steady).
    #[arg(
        long,
        value_name = "TREND",
        default_value = "0",
        allow_hyphen_values = true
    )]
    pub demand_trend: f64,
    /// Show the prices a validator posted for its GPUs, from its own records, instead of
    /// pricing this host.
    #[arg(long, value_name = "URL", conflicts_with_all = ["report", "model", "utilization", "demand_trend"])]
    pub validator: Option<String>,
    /// With --validator: one GPU's score, price and price history.
    #[arg(long, value_name = "UUID", requires = "validator")]
    pub gpu: Option<String>,
}

/// `pog validator`'s order-book flags.
#[derive(Debug, Args, Clone)]
pub struct ClearArgs {
    /// Seconds between scheduled clearings of the order book: each clears every class whose
    /// book changed since it was last cleared and has bids and asks open (0: none, only
    /// `pog market clear`). A minute is short against the hour a GPU-hour lasts, and long
    /// enough to gather orders into one price (docs/market.md).
    #[arg(long, default_value = "60", value_name = "SECONDS", value_parser = parse_clear_every)]
    pub clear_every: Duration,
    /// The rule scheduled clearings use: uniform_price or mcafee.
    #[arg(long, default_value = "uniform_price", value_parser = parse_mechanism)]
    pub clear_mechanism: Mechanism,
    /// Open orders one owner key may have; more are refused (429).
    #[arg(long, default_value_t = MarketLimits::default().max_open_per_owner as u32, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub market_max_open_per_owner: u32,
    /// Open orders the whole book may hold; more are refused (503) until some fill, are
    /// cancelled or expire.
    #[arg(long, default_value_t = MarketLimits::default().max_open as u32, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub market_max_open: u32,
    /// Order submissions one source address (IPv4, or IPv6 /64) may make a minute; more are
    /// refused (429) before they are read.
    #[arg(long, default_value_t = MarketLimits::default().submits_per_minute_per_source as u32, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub market_submits_per_minute: u32,
}

impl ClearArgs {
    /// The book's limits these flags set.
    pub fn limits(&self) -> MarketLimits {
        MarketLimits {
            max_open_per_owner: self.market_max_open_per_owner as usize,
            max_open: self.market_max_open as usize,
            submits_per_minute_per_source: f64::from(self.market_submits_per_minute),
        }
    }
}

/// The period of scheduled clearings: 0 (none), or 0.1 s to a day.
fn parse_clear_every(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if secs == 0.0 {
        return Ok(Duration::ZERO);
    }
    if !(0.1..=86_400.0).contains(&secs) {
        return Err(format!(
            "{secs} s is outside 0.1-86400 s (0 turns scheduled clearing off)"
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// `pog market`: the order book of a validator.
#[derive(Debug, Args, Clone)]
pub struct MarketArgs {
    /// The validator's URL.
    #[arg(long, global = true, value_name = "URL", env = "POG_VALIDATOR")]
    pub validator: Option<String>,
    /// The request to the order book.
    #[command(subcommand)]
    pub action: MarketAction,
}

/// `pog market`'s subcommands.
#[derive(Debug, Subcommand, Clone)]
pub enum MarketAction {
    /// Submit an order signed with this host's key (the data dir's agent.key, or --key); an
    /// ask names the GPUs it offers (--gpu).
    Submit {
        /// The order's id, unique among your orders until it expires [default: a random one,
        /// printed].
        #[arg(long)]
        id: Option<String>,
        /// bid (rent GPU-hours) or ask (sell them).
        #[arg(long, value_parser = parse_side)]
        side: Side,
        /// The GPU class: a model of `pog specs`, e.g. "H200 SXM".
        #[arg(long)]
        class: String,
        /// GPU-hours.
        #[arg(long)]
        quantity: u64,
        /// $ per GPU-hour, e.g. 3.49.
        #[arg(long)]
        price: String,
        /// Hours the order stays open unless it fills (up to 720, 30 days); then it leaves
        /// the book.
        #[arg(long, default_value = "24", value_name = "HOURS", value_parser = parse_lifetime_hours)]
        lifetime_hours: f64,
        /// The key file to sign with [default: DATA_DIR/agent.key].
        #[arg(long, value_name = "FILE")]
        key: Option<PathBuf>,
        /// An ask's GPU (repeat for each, up to 64): its UUID as registered at the validator
        /// to the signing key (the agent's), with a recent accepted proof of its model. An ask
        /// offers at most one GPU-hour per GPU per hour it stays open; a bid names none.
        #[arg(long = "gpu", value_name = "UUID")]
        gpus: Vec<String>,
        /// A bid's access for the renter: this OpenSSH public key file (e.g.
        /// ~/.ssh/id_ed25519.pub) is handed to each leased GPU's provider, whose lease hook
        /// authorizes it for the lease's hours.
        #[arg(long, value_name = "FILE", conflicts_with = "container")]
        ssh_key: Option<PathBuf>,
        /// A bid's access for the renter: the container image each leased GPU's provider
        /// starts for the lease's hours (e.g. ghcr.io/org/trainer:1.2).
        #[arg(long, value_name = "IMAGE")]
        container: Option<String>,
    },
    /// Cancel one of your orders.
    Cancel {
        #[arg(long)]
        id: String,
        #[arg(long, value_name = "FILE")]
        key: Option<PathBuf>,
    },
    /// The open orders (of one class).
    Book {
        #[arg(long)]
        class: Option<String>,
    },
    /// Clear one class now (the validator's operator: signed with DATA_DIR/validator.key).
    Clear {
        #[arg(long)]
        class: String,
        /// uniform_price or mcafee.
        #[arg(long, default_value = "uniform_price", value_parser = parse_mechanism)]
        mechanism: Mechanism,
    },
    /// The clearings so far, or one GPU's posted prices (--gpu).
    History {
        /// Only clearings (or price points) numbered above this.
        #[arg(long)]
        after: Option<u64>,
        /// The price history of this GPU instead of the clearings.
        #[arg(long, value_name = "UUID")]
        gpu: Option<String>,
        #[arg(long, default_value = "100")]
        limit: usize,
    },
    /// The leases the clearings made (a trade's GPU-hours on the ask's GPUs), the newest
    /// first, with their state: this host's key's (as renter or provider) unless --party or
    /// --all says otherwise.
    Leases {
        /// Only this key's (hex) leases, as renter or provider.
        #[arg(long, value_name = "KEY", conflicts_with = "all")]
        party: Option<String>,
        /// Every party's leases.
        #[arg(long)]
        all: bool,
        /// Only this GPU's leases.
        #[arg(long, value_name = "UUID")]
        gpu: Option<String>,
        /// At most this many (1 to 1000).
        #[arg(long, default_value = "100")]
        limit: usize,
        /// The key whose leases to list [default: DATA_DIR/agent.key].
        #[arg(long, value_name = "FILE")]
        key: Option<PathBuf>,
    },
    /// One lease by its id (as `leases` lists it): its GPU, parties, times, price and state.
    Lease {
        /// The lease's id (`CLEARING.TRADE.GPU`).
        id: String,
    },
    /// The leases' settlements, signed by the validator, the newest first: the hours proven,
    /// what was paid and refunded, and whether it is paid on chain; this host's key's (as
    /// renter or provider) unless --party, --lease or --all says otherwise.
    Settlements {
        /// Only this key's (hex) settlements, as renter or provider.
        #[arg(long, value_name = "KEY", conflicts_with = "all")]
        party: Option<String>,
        /// Only this lease's.
        #[arg(long, value_name = "ID")]
        lease: Option<String>,
        /// Every party's.
        #[arg(long)]
        all: bool,
        /// At most this many (1 to 1000).
        #[arg(long, default_value = "100")]
        limit: usize,
        /// The key whose settlements to list [default: DATA_DIR/agent.key].
        #[arg(long, value_name = "FILE")]
        key: Option<PathBuf>,
    },
    /// A voucher to withdraw USD from this key's escrow account (what its open bids, leases and
    /// last voucher leave), signed by the validator's settlement key for the account's owner
    /// to submit from its wallet within ten minutes.
    Withdraw {
        /// How much, in dollars (the stablecoin's units are micro-dollars).
        #[arg(long, value_name = "USD")]
        amount: f64,
        /// The account's key [default: DATA_DIR/agent.key].
        #[arg(long, value_name = "FILE")]
        key: Option<PathBuf>,
    },
}

impl MarketAction {
    /// The action's name, as its JSON schema names it.
    pub fn name(&self) -> &'static str {
        match self {
            MarketAction::Submit { .. } => "market.submit",
            MarketAction::Cancel { .. } => "market.cancel",
            MarketAction::Book { .. } => "market.book",
            MarketAction::Clear { .. } => "market.clear",
            MarketAction::History { .. } => "market.history",
            MarketAction::Leases { .. } => "market.leases",
            MarketAction::Lease { .. } => "market.lease",
            MarketAction::Settlements { .. } => "market.settlements",
            MarketAction::Withdraw { .. } => "market.withdraw",
        }
    }
}

/// An order's side: bid or ask.
fn parse_side(s: &str) -> Result<Side, String> {
    match s.to_ascii_lowercase().as_str() {
        "bid" => Ok(Side::Bid),
        "ask" => Ok(Side::Ask),
        _ => Err(format!("{s:?} is neither bid nor ask")),
    }
}

/// A clearing rule: uniform_price (or uniform) or mcafee.
fn parse_mechanism(s: &str) -> Result<Mechanism, String> {
    match s.to_ascii_lowercase().as_str() {
        "uniform_price" | "uniform" => Ok(Mechanism::UniformPrice),
        "mcafee" => Ok(Mechanism::McAfee),
        _ => Err(format!("{s:?} is neither uniform_price nor mcafee")),
    }
}

/// An order's lifetime: more than 0 and at most the book's longest, in hours.
fn parse_lifetime_hours(s: &str) -> Result<f64, String> {
    let hours: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of hours"))?;
    let most = pog_market::MAX_ORDER_LIFETIME_MS as f64 / 3_600_000.0;
    if !(hours > 0.0 && hours <= most) {
        return Err(format!("{hours} hours is outside 0-{most} hours"));
    }
    Ok(hours)
}
