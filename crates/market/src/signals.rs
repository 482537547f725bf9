//! The market's signals for one class, from backed GPU-hours leased over time (issue 25,
//! item 5): utilization, the trend of demand, and the pull of the trailing clearing price.
//! Open orders count for nothing here: a bid or an ask that never fills moves no price.
//!
//! Over a trailing window of `window_hours` ([`crate::config::PriceConfig`]) before `now`:
//!
//! - **Available** GPU-hours `A`: the class's proven GPUs (their latest proof accepted and
//!   proving the model, as the validator counts them) times the window.
//! - **Counted** hours: each lease's GPU-hours inside a span, summed per renter key, and each
//!   renter's sum capped at `max_renter_share × A` of that span's available hours. No renter
//!   counts for more than that share, however many hours it leases: the one-actor bound below
//!   rests on it.
//! - **Utilization** `u = min(1, counted hours in the window / A)`.
//! - **Demand trend** `t = (counted hours of the later half − of the earlier half) / (A / 2)`,
//!   in −1..1: leasing that grows raises the price, leasing that shrinks lowers it.
//! - **Clearing pull**: over the leases *made* in the window (by their clearing's time), each
//!   trade's price `p` against the class's formula price `P` (its model's base price times the
//!   utilization and demand factors), `x = ln(p / P)` held to `±ln(clearing_band)`, weighted
//!   by the renter's counted hours (spread over its leases), and divided by
//!   `max(counted hours, clearing_full_share × A)`: `pull = clearing_weight × Σ h x / max(C,
//!   κ A)`. The posted price is multiplied by `exp(pull)`: a step of weight `clearing_weight`
//!   toward the volume-weighted (geometric) clearing price, taken in full once the trades
//!   counted reach `κ` of the capacity and in proportion below, so a thin market's few trades
//!   pull little.
//!
//! Every lease here was a real trade: a backed ask's GPUs (asks name proven GPUs), a bid that
//! its deposit covered (with an escrow), never between one key's own orders.
//!
//! **One actor's bound** ([`one_actor_bound`]): an actor with one deposit has one key that can
//! bid (other keys have no deposit to cover a bid), and no GPUs (it adds no capacity). Its
//! counted hours are at most `β A` (β = `max_renter_share`) in any span, and it changes no
//! other renter's count, so it moves `u` and `t` by at most `β` each; the utilization and
//! demand factors by at most `s β / f_u,lo` and `d β / f_d,lo` in log (`s`, `d` their
//! sensitivities, `f_lo` the lowest each can be); and the pull by at most `w (δ + 2 β ln K /
//! κ)` with `δ` the two before (the honest trades are measured against a formula price it
//! moved). The posted price's log moves at most `B = (1 + w) δ + 2 w β ln K / κ`; the market
//! factor's final clamp only shrinks a move. An actor that outbids other renters for hours
//! they would have leased removes their hours from the counts too: that is demand it paid
//! for from its deposit, and adds to the bound in proportion ([`one_actor_bound`]).

use serde::{Deserialize, Serialize};

use crate::backing::HOUR_MS;
use crate::config::{Config, PriceConfig};
use crate::lease::Lease;

/// A lease as the signals read it: the lease and when its clearing was.
#[derive(Debug, Clone, Copy)]
pub struct LeaseSample<'a> {
    /// The lease.
    pub lease: &'a Lease,
    /// Its clearing's time (the book's), ms since the Unix epoch.
    pub cleared_at_ms: u64,
}

/// What a class's market is measured from.
#[derive(Debug, Clone, Copy)]
pub struct ClassActivity<'a> {
    /// The class's leases (any order; those outside the window count nothing).
    pub leases: &'a [LeaseSample<'a>],
    /// The class's GPUs proven now.
    pub proven_gpus: u64,
    /// The class's model's price per GPU-hour with no market and full reliability, dollars
    /// (its datasheet figures as the score counts them): what the trade prices are compared
    /// with, times the utilization and demand factors.
    pub base_usd: f64,
}

/// What was measured of a class, as a price point shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MarketSignals {
    /// The window's length, hours.
    pub window_hours: u64,
    /// The class's proven GPUs.
    pub proven_gpus: u64,
    /// GPU-hours they had in the window.
    pub available_hours: f64,
    /// GPU-hours leased in the window, all renters.
    pub leased_hours: f64,
    /// The same, each renter's capped at its share: what utilization counts.
    pub counted_hours: f64,
    /// Distinct renters with hours in the window.
    pub renters: usize,
    /// Counted GPU-hours leased in the later and the earlier half of the window.
    pub halves: [f64; 2],
    /// GPU-hours of the leases made in the window (by their clearing's time).
    pub traded_hours: f64,
    /// Their volume-weighted mean price per GPU-hour, micro-dollars; null without any.
    pub traded_vwap_micro_usd: Option<u64>,
    /// The class's formula price the trades are compared with, micro-dollars.
    pub formula_micro_usd: u64,
}

/// The market a class is priced in: what [`crate::quote::quote`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MarketState {
    /// Share of the class's proven GPU-hours leased over the window, 0–1.
    pub utilization: f64,
    /// The trend of the hours leased, −1 to 1 (0: steady).
    pub demand_trend: f64,
    /// The log of the clearing factor: the step toward the trailing clearing price, already
    /// weighted and bounded (0: none).
    pub clearing_pull: f64,
}

impl MarketState {
    /// A market at its target utilization, steady, with no trades to follow: factor 1.
    pub fn balanced(config: &Config) -> MarketState {
        MarketState {
            utilization: config.price.target_utilization,
            demand_trend: 0.0,
            clearing_pull: 0.0,
        }
    }
}

/// The utilization factor: `1 + s (u − target)`, within the market factor's bounds.
pub fn utilization_factor(utilization: f64, p: &PriceConfig) -> f64 {
    (1.0 + p.utilization_sensitivity * (utilization - p.target_utilization))
        .clamp(p.min_market_factor, p.max_market_factor)
}

/// The demand factor: `1 + d t`, within the market factor's bounds.
pub fn demand_factor(trend: f64, p: &PriceConfig) -> f64 {
    (1.0 + p.demand_sensitivity * trend).clamp(p.min_market_factor, p.max_market_factor)
}

/// GPU-hours of `lease` inside `[from, to)`.
fn hours_within(lease: &Lease, from: u64, to: u64) -> f64 {
    let start = lease.start_ms.max(from);
    let end = lease.end_ms.min(to);
    end.saturating_sub(start) as f64 / HOUR_MS as f64
}

/// Hours per renter in a span, each renter's capped at `cap`: (counted, uncapped, each
/// renter's uncapped).
fn counted_in<'a>(
    leases: &[LeaseSample<'a>],
    from: u64,
    to: u64,
    cap: f64,
) -> (f64, f64, std::collections::BTreeMap<&'a str, f64>) {
    let mut per_renter: std::collections::BTreeMap<&str, f64> = Default::default();
    for s in leases {
        let h = hours_within(s.lease, from, to);
        if h > 0.0 {
            *per_renter.entry(s.lease.renter.as_str()).or_default() += h;
        }
    }
    // Folded from +0.0: `Sum` for f64 starts at −0.0, which an empty market's records and
    // JSON then showed as "-0.0" hours.
    let raw = per_renter.values().fold(0.0, |sum, h| sum + h);
    let counted = per_renter.values().fold(0.0, |sum, h| sum + h.min(cap));
    (counted, raw, per_renter)
}

/// The class's market at `now_ms` from its leases and proven GPUs, and what was measured.
/// With no proven GPU (nothing to measure utilization against) the market is taken as
/// balanced.
pub fn class_state(
    activity: &ClassActivity<'_>,
    now_ms: u64,
    config: &Config,
) -> (MarketState, MarketSignals) {
    let p = &config.price;
    let window_ms = p.window_hours.saturating_mul(HOUR_MS);
    let from = now_ms.saturating_sub(window_ms);
    let middle = now_ms.saturating_sub(window_ms / 2);
    let available = activity.proven_gpus as f64 * p.window_hours as f64;
    let beta = p.max_renter_share;
    let (counted, leased, renters) = counted_in(activity.leases, from, now_ms, beta * available);
    let (earlier, _, _) = counted_in(activity.leases, from, middle, beta * available / 2.0);
    let (later, _, _) = counted_in(activity.leases, middle, now_ms, beta * available / 2.0);
    let balanced = MarketState::balanced(config);
    let (utilization, demand_trend) = if available > 0.0 {
        (
            (counted / available).min(1.0),
            ((later - earlier) / (available / 2.0)).clamp(-1.0, 1.0),
        )
    } else {
        (balanced.utilization, 0.0)
    };
    let formula_usd =
        activity.base_usd * utilization_factor(utilization, p) * demand_factor(demand_trend, p);
    // The trades of the window, each renter's hours capped and spread over its leases.
    let made: Vec<&LeaseSample<'_>> = activity
        .leases
        .iter()
        .filter(|s| s.cleared_at_ms > from && s.cleared_at_ms <= now_ms)
        .collect();
    let mut made_by: std::collections::BTreeMap<&str, f64> = Default::default();
    for s in &made {
        *made_by.entry(s.lease.renter.as_str()).or_default() += s.lease.hours as f64;
    }
    let (mut weight, mut pulled, mut value, mut traded) = (0.0, 0.0, 0.0, 0.0);
    let band = p.clearing_band.ln();
    for s in &made {
        let hours = s.lease.hours as f64;
        let total = made_by[s.lease.renter.as_str()];
        let h = if total > 0.0 {
            hours * (beta * available).min(total) / total
        } else {
            0.0
        };
        traded += hours;
        value += hours * s.lease.price_micro_usd as f64;
        if formula_usd > 0.0 && s.lease.price_micro_usd > 0 {
            let x = (s.lease.price_micro_usd as f64 / 1e6 / formula_usd)
                .ln()
                .clamp(-band, band);
            weight += h;
            pulled += h * x;
        } else if formula_usd > 0.0 {
            // A trade at zero: as low as the band lets a price count.
            weight += h;
            pulled -= h * band;
        }
    }
    let denominator = weight.max(p.clearing_full_share * available);
    let clearing_pull = if denominator > 0.0 {
        p.clearing_weight * pulled / denominator
    } else {
        0.0
    };
    let signals = MarketSignals {
        window_hours: p.window_hours,
        proven_gpus: activity.proven_gpus,
        available_hours: available,
        leased_hours: leased,
        counted_hours: counted,
        renters: renters.len(),
        halves: [later, earlier],
        traded_hours: traded,
        traded_vwap_micro_usd: (traded > 0.0).then(|| (value / traded).round() as u64),
        formula_micro_usd: (formula_usd * 1e6).round().max(0.0) as u64,
    };
    (
        MarketState {
            utilization,
            demand_trend,
            clearing_pull,
        },
        signals,
    )
}

/// The most one actor with one deposit and no GPUs can move a class's posted price, as a log
/// (the price stays within `exp(±B)` of what it would be without the actor), when the leases
/// it bought displaced `displaced_share` of the class's proven GPU-hours from other renters
/// (hours they would have leased had it not outbid them; the GPU-hours of those leases, over
/// `A`). With nothing displaced, `B = (1 + w) δ + 2 w β ln K / κ`, `δ = s β / f_u,lo + d β /
/// f_d,lo` (the module's doc derives it): open orders, cancellations, floods, trades among
/// its keys (refused) and its own leases. Each displaced hour `x` is real demand it paid for
/// at the clearing price or more from its deposit, so at most `deposit / (lowest clearing
/// price × A)` of the capacity; it adds `(1 + w) (s / f_u,lo + 2 d / f_d,lo) x + 2 w ln K x /
/// κ`, those renters' hours leaving the counts.
pub fn one_actor_bound(config: &Config, displaced_share: f64) -> f64 {
    let p = &config.price;
    let beta = p.max_renter_share;
    let x = displaced_share.max(0.0);
    let u_lo = utilization_factor(0.0, p);
    let d_lo = demand_factor(-1.0, p);
    let delta = p.utilization_sensitivity * beta / u_lo + p.demand_sensitivity * beta / d_lo;
    let delta_x = p.utilization_sensitivity * x / u_lo + 2.0 * p.demand_sensitivity * x / d_lo;
    let band = p.clearing_band.ln();
    (1.0 + p.clearing_weight) * (delta + delta_x)
        + 2.0 * p.clearing_weight * (beta + x) * band / p.clearing_full_share
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quote::market_factor;
    use proptest::prelude::*;

    const NOW: u64 = 100 * 24 * HOUR_MS;

    fn lease(renter: &str, start_h: f64, hours: u64, usd: f64) -> Lease {
        let start_ms = (NOW as f64 + start_h * HOUR_MS as f64) as u64;
        Lease {
            id: format!("{renter}.{start_h}"),
            gpu: pog_signed::GpuUuid::new("GPU-00000000-0000-0000-0000-000000000001").unwrap(),
            renter: renter.into(),
            provider: "provider".into(),
            start_ms,
            end_ms: start_ms + hours * HOUR_MS,
            hours,
            price_micro_usd: (usd * 1e6) as u64,
            access: None,
        }
    }

    fn state(leases: &[Lease], gpus: u64) -> (MarketState, MarketSignals) {
        let samples: Vec<LeaseSample<'_>> = leases
            .iter()
            .map(|l| LeaseSample {
                lease: l,
                cleared_at_ms: l.start_ms,
            })
            .collect();
        class_state(
            &ClassActivity {
                leases: &samples,
                proven_gpus: gpus,
                base_usd: 4.448264,
            },
            NOW,
            &Config::embedded(),
        )
    }

    #[test]
    fn a_market_without_leases_shows_zero_hours_not_negative_zero() {
        let (_, signals) = state(&[], 1);
        let json = serde_json::to_string(&signals).unwrap();
        assert!(!json.contains("-0.0"), "{json}");
    }

    #[test]
    fn utilization_is_leased_over_proven_hours_each_renter_capped() {
        // 100 GPUs, 2400 GPU-hours in the window; a renter counts at most 5 % (120 h).
        let many: Vec<Lease> = (0..80)
            .map(|i| lease(&format!("r{}", i % 20), -24.0, 24, 4.448264))
            .collect();
        let (s, signals) = state(&many, 100);
        assert_eq!(signals.leased_hours, 20.0 * 96.0);
        assert_eq!(signals.counted_hours, 20.0 * 96.0);
        assert!((s.utilization - 0.8).abs() < 1e-12);
        // Steady over the window: no trend.
        assert!(s.demand_trend.abs() < 1e-12);
        // One renter leasing everything counts its 5 %.
        let whale: Vec<Lease> = (0..100)
            .map(|_| lease("whale", -24.0, 24, 4.448264))
            .collect();
        let (one, signals) = state(&whale, 100);
        assert_eq!(signals.leased_hours, 2400.0);
        assert_eq!(signals.counted_hours, 120.0);
        assert!((one.utilization - 0.05).abs() < 1e-12);
        // Nothing proven: balanced.
        assert_eq!(
            state(&many, 0).0,
            MarketState::balanced(&Config::embedded())
        );
        // Hours outside the window count nothing; those ahead of now neither.
        let (outside, _) = state(
            &[lease("r", -100.0, 10, 1.0), lease("r", 1.0, 10, 1.0)],
            100,
        );
        assert_eq!(outside.utilization, 0.0);
    }

    #[test]
    fn demand_follows_the_trend_of_leased_hours() {
        // Twenty renters leasing only in the later half: rising.
        let rising: Vec<Lease> = (0..20)
            .map(|i| lease(&format!("r{i}"), -12.0, 12 * 2, 4.0))
            .collect();
        let (s, _) = state(&rising, 10);
        assert!(s.demand_trend > 0.0, "{s:?}");
        let falling: Vec<Lease> = (0..20)
            .map(|i| lease(&format!("r{i}"), -24.0, 12, 4.0))
            .collect();
        let (s, _) = state(&falling, 10);
        assert!(s.demand_trend < 0.0, "{s:?}");
    }

    #[test]
    fn trades_pull_the_price_toward_their_price_bounded() {
        let c = Config::embedded();
        // 20 renters leasing 60 % of 10 GPUs' day at twice the formula price.
        let formula = {
            let (s, sig) = state(&[], 10);
            assert_eq!(s.clearing_pull, 0.0);
            sig.formula_micro_usd as f64 / 1e6
        };
        let dear: Vec<Lease> = (0..20)
            .map(|i| lease(&format!("r{i}"), -1.0, 7, formula * 10.0))
            .collect();
        let (s, sig) = state(&dear, 10);
        assert!(s.clearing_pull > 0.0);
        assert!(s.clearing_pull <= c.price.clearing_weight * c.price.clearing_band.ln() + 1e-12);
        assert!(sig.traded_vwap_micro_usd.unwrap() > sig.formula_micro_usd);
        let cheap: Vec<Lease> = (0..20)
            .map(|i| lease(&format!("r{i}"), -1.0, 7, 0.0))
            .collect();
        assert!(state(&cheap, 10).0.clearing_pull < 0.0);
    }

    /// The posted market factor, as a log, for these leases.
    fn log_factor(leases: &[Lease], gpus: u64) -> f64 {
        let c = Config::embedded();
        let (s, _) = state(leases, gpus);
        market_factor(&s, &c).unwrap().3.ln()
    }

    fn honest() -> impl Strategy<Value = Vec<(u8, i16, u16, u32)>> {
        prop::collection::vec((0u8..30, -30i16..2, 1u16..200, 0u32..20_000_000), 0..40)
    }

    proptest! {
        /// One actor with one deposit (one key that can bid; no GPUs) moves the class's
        /// market factor by no more than [`one_actor_bound`], whatever it leases, when and at
        /// what price, against any honest market, and whichever honest leases it displaced.
        #[test]
        fn one_actor_moves_the_price_within_the_bound(
            honest in honest(),
            attack in prop::collection::vec((-30i16..2, 1u32..1_000_000, prop::sample::select(vec![0u64, 1, 1_000_000, 100_000_000, 1_000_000_000_000])), 1..10),
            gpus in 1u64..50,
            displaced in prop::collection::vec(prop::bool::weighted(0.2), 40),
        ) {
            let c = Config::embedded();
            let honest: Vec<Lease> = honest
                .iter()
                .map(|&(r, start, h, micro)| lease(&format!("r{r}"), f64::from(start), u64::from(h), f64::from(micro) / 1e6))
                .collect();
            // Some honest leases did not happen: the actor outbid their renters.
            let window = (NOW - Config::embedded().price.window_hours * HOUR_MS, NOW);
            let touches = |l: &Lease| l.end_ms > window.0 && l.start_ms <= window.1;
            let mut attacked: Vec<Lease> = honest
                .iter()
                .zip(&displaced)
                .filter(|(_, &gone)| !gone)
                .map(|(l, _)| l.clone())
                .collect();
            let displaced_hours: u64 = honest
                .iter()
                .zip(&displaced)
                .filter(|(l, &gone)| gone && touches(l))
                .map(|(l, _)| l.hours)
                .sum();
            let available = gpus as f64 * c.price.window_hours as f64;
            let bound = one_actor_bound(&c, displaced_hours as f64 / available);
            for &(start, hours, micro) in &attack {
                attacked.push(lease("actor", f64::from(start), u64::from(hours), micro as f64 / 1e6));
            }
            let moved = (log_factor(&attacked, gpus) - log_factor(&honest, gpus)).abs();
            prop_assert!(moved <= bound + 1e-9, "moved {moved} > bound {bound}");
        }

        /// More leased hours never lower the utilization; a renter's hours beyond its share
        /// change nothing.
        #[test]
        fn utilization_grows_with_leased_hours(hours in 1u64..500, more in 1u64..500, gpus in 1u64..20) {
            let (a, _) = state(&[lease("r", -24.0, hours, 1.0)], gpus);
            let (b, _) = state(&[lease("r", -24.0, hours, 1.0), lease("s", -24.0, more, 1.0)], gpus);
            prop_assert!(b.utilization >= a.utilization);
        }
    }

    #[test]
    fn the_default_bound_is_stated() {
        // docs/market.md states it: at most ×1.165 or ÷1.165.
        let b = one_actor_bound(&Config::embedded(), 0.0);
        assert!((b.exp() - 1.165).abs() < 0.001, "{}", b.exp());
    }
}
