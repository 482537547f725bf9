//! Prices per GPU-hour from verified performance, market utilization and demand, and
//! reliability (issue 15), and the history of every price quoted.
//!
//! `price = verified TFLOP/s × $ per TFLOP-hour of the GPU's class × market factor ×
//! reliability`, where
//!
//! - the verified TFLOP/s are the GPU's score in reference-GPU units times the reference GPU's
//!   tensor TFLOP/s: a GPU that counts 0.6 reference GPUs is priced as 0.6 × 829.9 TFLOP/s of
//!   reference work, whatever mix of compute, memory and bandwidth earned it the 0.6;
//! - the class ($ per TFLOP-hour) follows the memory type: data-centre HBM parts and GDDR
//!   workstation and consumer parts rent at different rates per TFLOP (`data/market.toml`);
//! - the market factor is `(1 + s (u − u*)) × (1 + d t) × exp(pull)`, kept within configured
//!   bounds, all three from backed GPU-hours leased over time ([`crate::signals`]), never from
//!   open orders: utilization `u` above the target `u*` raises prices, spare capacity lowers
//!   them; a rising trend `t` of leased hours raises them; and the pull steps toward the
//!   trailing clearing price of real trades;
//! - reliability is the score's multiplier (proof success, uptime, anomalies): an unreliable
//!   GPU-hour is worth less to a renter.
//!
//! A quote is a [`Price`] in micro-dollars, like every order's, so it can be posted as an ask.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::price::{Price, PriceError};
use crate::score::GpuScore;
pub use crate::signals::MarketState;
use crate::signals::{demand_factor, utilization_factor};

/// Why no price could be quoted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QuoteError {
    /// The GPU's memory type belongs to no price class.
    #[error("no price class lists memory type {0:?} (classes are configured in [[price.class]])")]
    NoClass(String),
    /// The class name is not configured.
    #[error("no price class named {0:?}")]
    UnknownClass(String),
    /// Utilization outside 0–1 or not a number.
    #[error("utilization must be a fraction from 0 to 1, not {0}")]
    BadUtilization(f64),
    /// A demand trend outside −1..1, or a clearing pull that is not a number.
    #[error(
        "the demand trend must be from -1 to 1 and the clearing pull a number, not {0} and {1}"
    )]
    BadSignal(f64, f64),
    /// A reliability factor outside 0–1 or not a number.
    #[error("reliability must be a fraction from 0 to 1, not {0}")]
    BadReliability(f64),
    /// The result is not a valid price.
    #[error(transparent)]
    Price(#[from] PriceError),
}

/// A price per GPU-hour with every factor that made it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Quote {
    /// The price class.
    pub class: String,
    /// The GPU's score in reference GPUs (before reliability).
    pub gpu_score: f64,
    /// `gpu_score × reference tensor TFLOP/s`.
    pub verified_tflops: f64,
    /// The class's $ per TFLOP-hour.
    pub usd_per_tflop_hour: f64,
    /// `verified_tflops × usd_per_tflop_hour`: the price in a balanced market, fully reliable.
    pub base_usd: f64,
    /// From utilization, within the bounds before demand is applied.
    pub utilization_factor: f64,
    /// From the trend of the GPU-hours leased (not from open orders).
    pub demand_factor: f64,
    /// The step toward the class's trailing clearing price (1: none).
    #[serde(default = "one")]
    pub clearing_factor: f64,
    /// The three together, within the configured bounds.
    pub market_factor: f64,
    /// The reliability multiplier applied.
    pub reliability: f64,
    /// The price per GPU-hour.
    #[serde(rename = "price_micro_usd")]
    pub price: Price,
}

fn one() -> f64 {
    1.0
}

/// The market factor for a state: (utilization factor, demand factor, clearing factor, all
/// three within the configured bounds).
pub fn market_factor(
    state: &MarketState,
    config: &Config,
) -> Result<(f64, f64, f64, f64), QuoteError> {
    let p = &config.price;
    if !(state.utilization.is_finite() && (0.0..=1.0).contains(&state.utilization)) {
        return Err(QuoteError::BadUtilization(state.utilization));
    }
    if !((-1.0..=1.0).contains(&state.demand_trend) && state.clearing_pull.is_finite()) {
        return Err(QuoteError::BadSignal(
            state.demand_trend,
            state.clearing_pull,
        ));
    }
    let utilization = utilization_factor(state.utilization, p);
    let demand = demand_factor(state.demand_trend, p);
    let band = p.clearing_weight * p.clearing_band.ln();
    let clearing = state.clearing_pull.clamp(-band, band).exp();
    let all = (utilization * demand * clearing).clamp(p.min_market_factor, p.max_market_factor);
    Ok((utilization, demand, clearing, all))
}

/// Quotes a GPU-hour of a GPU with score `gpu` (its potential counts: a GPU that is not
/// verified is not priced by this, the caller decides whether to list it) in `class`.
pub fn quote(
    gpu: &GpuScore,
    class: &str,
    state: &MarketState,
    reliability: f64,
    config: &Config,
) -> Result<Quote, QuoteError> {
    let class = config
        .class(class)
        .ok_or_else(|| QuoteError::UnknownClass(class.to_string()))?;
    if !(reliability.is_finite() && (0.0..=1.0).contains(&reliability)) {
        return Err(QuoteError::BadReliability(reliability));
    }
    let (utilization_factor, demand_factor, clearing_factor, market) =
        market_factor(state, config)?;
    let verified_tflops = gpu.potential * config.score.gpu.reference_tensor_tflops;
    let base_usd = verified_tflops * class.usd_per_tflop_hour;
    let price = Price::from_usd(base_usd * market * reliability)?;
    Ok(Quote {
        class: class.name.clone(),
        gpu_score: gpu.potential,
        verified_tflops,
        usd_per_tflop_hour: class.usd_per_tflop_hour,
        base_usd,
        utilization_factor,
        demand_factor,
        clearing_factor,
        market_factor: market,
        reliability,
        price,
    })
}

/// One price in the history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PricePoint {
    /// When it was quoted, milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// What was priced (a GPU UUID, or a model for a reference quote).
    pub subject: String,
    /// Why it was quoted again: a proof, health, a market change.
    pub cause: String,
    /// The price and every factor it was made of.
    pub quote: Quote,
}

/// The prices quoted per class, newest last, at most `history_per_class` each (the oldest
/// dropped first). Serializes as `{class: [points…]}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PriceHistory {
    classes: BTreeMap<String, VecDeque<PricePoint>>,
    #[serde(default)]
    limit: usize,
}

impl PriceHistory {
    /// An empty history keeping `limit` points per class (at least 1).
    pub fn new(limit: usize) -> PriceHistory {
        PriceHistory {
            classes: BTreeMap::new(),
            limit: limit.max(1),
        }
    }

    /// Records a quote. Points are kept in time order: one older than the newest of its class
    /// is refused (returns false), so a replayed or delayed update cannot rewrite the past.
    pub fn record(&mut self, point: PricePoint) -> bool {
        let limit = self.limit.max(1);
        let points = self.classes.entry(point.quote.class.clone()).or_default();
        if points.back().is_some_and(|last| point.at_ms < last.at_ms) {
            return false;
        }
        points.push_back(point);
        while points.len() > limit {
            points.pop_front();
        }
        true
    }

    /// A class's points, oldest first.
    pub fn points(&self, class: &str) -> impl Iterator<Item = &PricePoint> {
        self.classes.get(class).into_iter().flatten()
    }

    /// The latest price of a subject, if one was quoted.
    pub fn latest(&self, subject: &str) -> Option<&PricePoint> {
        self.classes
            .values()
            .flat_map(|points| points.iter())
            .filter(|p| p.subject == subject)
            .max_by_key(|p| p.at_ms)
    }

    /// Every class with points.
    pub fn classes(&self) -> impl Iterator<Item = &str> {
        self.classes.keys().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::spec_figures;
    use crate::score::gpu_score;
    use pog_spec::SpecDb;
    use proptest::prelude::*;

    fn model(name: &str) -> GpuScore {
        let c = Config::embedded();
        let db = SpecDb::embedded();
        gpu_score(
            &spec_figures(db.by_model(name).unwrap(), &c, db).unwrap(),
            &c.score,
        )
    }

    /// The reference GPU, fully reliable, in a balanced market.
    fn reference_quote() -> Quote {
        let c = Config::embedded();
        quote(
            &model("H200 SXM"),
            "datacenter",
            &MarketState::balanced(&c),
            1.0,
            &c,
        )
        .unwrap()
    }

    #[test]
    fn the_reference_gpu_in_a_balanced_market() {
        let q = reference_quote();
        assert!((q.verified_tflops - 829.9).abs() < 1e-6);
        assert_eq!(q.market_factor, 1.0);
        // 829.9 × $0.00536 = $4.448264.
        assert_eq!(q.price.micro_usd(), 4_448_264);
    }

    #[test]
    fn utilization_demand_clearing_and_reliability_move_the_price() {
        let c = Config::embedded();
        let h200 = model("H200 SXM");
        let at = |u: f64, trend: f64, pull: f64, r: f64| {
            quote(
                &h200,
                "datacenter",
                &MarketState {
                    utilization: u,
                    demand_trend: trend,
                    clearing_pull: pull,
                },
                r,
                &c,
            )
            .unwrap()
        };
        let base = at(0.7, 0.0, 0.0, 1.0).price;
        assert!(at(0.9, 0.0, 0.0, 1.0).price > base);
        assert!(at(0.3, 0.0, 0.0, 1.0).price < base);
        assert!(at(0.7, 0.5, 0.0, 1.0).price > base);
        assert!(at(0.7, -0.5, 0.0, 1.0).price < base);
        assert!(at(0.7, 0.0, 0.1, 1.0).price > base);
        assert!(at(0.7, 0.0, -0.1, 1.0).price < base);
        // The clearing factor is held to its band, whatever pull it is given.
        let band = (c.price.clearing_weight * c.price.clearing_band.ln()).exp();
        assert!((at(0.7, 0.0, 1e9, 1.0).clearing_factor - band).abs() < 1e-12);
        // An idle class: 1 + 0.5 × (0 − 0.7) = 0.65.
        assert!((at(0.0, 0.0, 0.0, 1.0).market_factor - 0.65).abs() < 1e-12);
        assert_eq!(
            at(0.7, 0.0, 0.0, 0.5).price.micro_usd(),
            base.micro_usd() / 2
        );
        assert_eq!(at(0.7, 0.0, 0.0, 0.0).price, Price::ZERO);
    }

    #[test]
    fn bad_inputs_are_refused() {
        let c = Config::embedded();
        let h200 = model("H200 SXM");
        let state = MarketState::balanced(&c);
        assert_eq!(
            quote(&h200, "quantum", &state, 1.0, &c),
            Err(QuoteError::UnknownClass("quantum".into()))
        );
        for r in [f64::NAN, -0.1, 1.5] {
            assert!(matches!(
                quote(&h200, "datacenter", &state, r, &c),
                Err(QuoteError::BadReliability(_))
            ));
        }
        for (trend, pull) in [
            (f64::NAN, 0.0),
            (1.5, 0.0),
            (0.0, f64::NAN),
            (0.0, f64::INFINITY),
        ] {
            let state = MarketState {
                demand_trend: trend,
                clearing_pull: pull,
                ..state
            };
            assert!(matches!(
                quote(&h200, "datacenter", &state, 1.0, &c),
                Err(QuoteError::BadSignal(..))
            ));
        }
        for u in [f64::NAN, -0.1, 1.01, f64::INFINITY] {
            let state = MarketState {
                utilization: u,
                ..state
            };
            assert!(matches!(
                quote(&h200, "datacenter", &state, 1.0, &c),
                Err(QuoteError::BadUtilization(_))
            ));
        }
    }

    #[test]
    fn history_keeps_order_and_its_limit() {
        let q = reference_quote();
        let mut h = PriceHistory::new(3);
        let point = |at_ms, subject: &str| PricePoint {
            at_ms,
            subject: subject.into(),
            cause: "proof".into(),
            quote: q.clone(),
        };
        for t in 1..=5 {
            assert!(h.record(point(t * 10, "GPU-a")));
        }
        assert!(
            !h.record(point(5, "GPU-a")),
            "a point older than the newest is refused"
        );
        let times: Vec<u64> = h.points("datacenter").map(|p| p.at_ms).collect();
        assert_eq!(times, [30, 40, 50]);
        assert_eq!(h.latest("GPU-a").unwrap().at_ms, 50);
        assert!(h.latest("GPU-b").is_none());
        let json = serde_json::to_string(&h).unwrap();
        let back: PriceHistory = serde_json::from_str(&json).unwrap();
        let prices = |h: &PriceHistory| -> Vec<(u64, u64)> {
            h.points("datacenter")
                .map(|p| (p.at_ms, p.quote.price.micro_usd()))
                .collect()
        };
        assert_eq!(prices(&back), prices(&h));
        assert_eq!(back.limit, 3);
    }

    proptest! {
        /// The price never falls as the score, utilization, demand trend, clearing pull or
        /// reliability rise, and is
        /// always a valid price.
        #[test]
        fn monotonic(score in 0.0f64..3.0, u in 0.0f64..1.0, trend in -1.0f64..0.5, pull in -1.0f64..1.0, r in 0.0f64..1.0, step in 0.0f64..0.5) {
            let c = Config::embedded();
            let mut gpu = model("H200 SXM");
            gpu.potential = score;
            let state = MarketState { utilization: u, demand_trend: trend, clearing_pull: pull };
            let base = quote(&gpu, "datacenter", &state, r, &c).unwrap().price;
            let mut better = gpu.clone();
            better.potential += step;
            prop_assert!(quote(&better, "datacenter", &state, r, &c).unwrap().price >= base);
            let busier = MarketState { utilization: (u + step).min(1.0), ..state };
            prop_assert!(quote(&gpu, "datacenter", &busier, r, &c).unwrap().price >= base);
            let wanted = MarketState { demand_trend: trend + step, ..state };
            prop_assert!(quote(&gpu, "datacenter", &wanted, r, &c).unwrap().price >= base);
            let dearer = MarketState { clearing_pull: pull + step, ..state };
            prop_assert!(quote(&gpu, "datacenter", &dearer, r, &c).unwrap().price >= base);
            prop_assert!(quote(&gpu, "datacenter", &state, (r + step).min(1.0), &c).unwrap().price >= base);
        }
    }
}
