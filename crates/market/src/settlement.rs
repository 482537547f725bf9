//! Settlement of leases for proven hours (issue 25, item 4; docs/market.md, "Deposits and
//! settlement"): what the renter's deposit pays the provider for one period of a lease, from the
//! validator's own rounds of the leased GPU, and what stays with the renter.
//!
//! A lease is settled in periods ([`periods`]: [`SettlementRules::period_ms`] each from the
//! lease's start, the last cut at its end), so a long lease is paid as it goes and a provider
//! whose GPU stops answering stops being paid within a period. Each hour of a period is paid in
//! proportion to how well the validator could vouch for it ([`hour_vouched_ppm`]):
//!
//! - an hour in which the validator held rounds of the GPU is paid for the share of them that
//!   were proven (its proofs accepted); a round answered wrongly, unanswered, or skipped while
//!   the schedule backed off is a share of the hour nobody can vouch for, and goes back to the
//!   renter;
//! - an hour in which the validator held no round at all (it was down, or its schedule is
//!   slower than an hour) is the validator's gap, not the GPU's fault: it is paid whole when
//!   the last round before it and the first round after it were both proven and at most
//!   [`SettlementRules::bridge_ms`] apart, and not at all otherwise (a GPU that failed on
//!   either side of the gap may have been down throughout it; over a longer outage of the
//!   validator nobody can vouch for the GPU, and the renter keeps the money).
//!
//! The arithmetic is in integer micro-dollars: an hour's share is floored to parts per million,
//! the payment is `price × Σ shares / 10⁶` floored, the refund the rest of the period's value,
//! so `paid + refunded` is always the period's value and nothing is paid twice.
//! Pure: the validator's settlement task (`pog_validator::settlement`) reads the rounds, signs
//! and submits.

use serde::{Deserialize, Serialize};

use crate::backing::HOUR_MS;
use crate::evidence::Round;
use crate::lease::Lease;

/// Parts per million of an hour: an hour paid whole.
pub const WHOLE_HOUR_PPM: u64 = 1_000_000;

/// How leases are settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettlementRules {
    /// The length of a settlement period, ms (a whole number of hours): a lease is settled
    /// once per period, the last period ending with the lease.
    pub period_ms: u64,
    /// How long after a period's end it is settled, ms: the period's last rounds, and the
    /// first round after it (which vouches for a gap at its end), must be on record first.
    pub grace_ms: u64,
    /// The longest time, ms, between two proven rounds that vouch for the hours with no round
    /// between them (the validator's own gap).
    pub bridge_ms: u64,
}

impl Default for SettlementRules {
    fn default() -> Self {
        SettlementRules {
            period_ms: 24 * HOUR_MS,
            grace_ms: HOUR_MS,
            bridge_ms: 3 * HOUR_MS,
        }
    }
}

/// Why rules cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettlementError {
    /// The period is not a whole number of hours, at least one.
    #[error("a settlement period must be a whole number of hours, at least one (got {0} ms)")]
    Period(u64),
}

impl SettlementRules {
    /// Checks the rules: a period of whole hours.
    pub fn validate(&self) -> Result<(), SettlementError> {
        if self.period_ms == 0 || !self.period_ms.is_multiple_of(HOUR_MS) {
            return Err(SettlementError::Period(self.period_ms));
        }
        Ok(())
    }
}

/// One settlement period of a lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Period {
    /// Its number, from 0 at the lease's start (the escrow's `period`).
    pub index: u64,
    /// Its start, ms since the Unix epoch.
    pub from_ms: u64,
    /// Its end (exclusive).
    pub to_ms: u64,
}

impl Period {
    /// Its whole hours.
    pub fn hours(&self) -> u64 {
        (self.to_ms - self.from_ms) / HOUR_MS
    }
}

/// A lease's settlement periods, in order: `period_ms` each from its start, the last cut at its
/// end. `rules` must be valid ([`SettlementRules::validate`]).
pub fn periods(lease: &Lease, rules: &SettlementRules) -> Vec<Period> {
    let period = rules.period_ms.max(HOUR_MS);
    let mut out = Vec::new();
    let mut from = lease.start_ms;
    while from < lease.end_ms {
        let to = from.saturating_add(period).min(lease.end_ms);
        out.push(Period {
            index: out.len() as u64,
            from_ms: from,
            to_ms: to,
        });
        from = to;
    }
    out
}

/// Whether a period may be settled at `now_ms`: it ended at least the grace before.
pub fn is_due(period: &Period, rules: &SettlementRules, now_ms: u64) -> bool {
    now_ms >= period.to_ms.saturating_add(rules.grace_ms)
}

/// One hour of a period as it was paid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HourShare {
    /// Its start, ms since the Unix epoch.
    pub from_ms: u64,
    /// The validator's rounds of the GPU in it.
    pub rounds: u32,
    /// Of them, proven.
    pub proven: u32,
    /// The share of it paid, parts per million.
    pub paid_ppm: u64,
    /// Not paid because the provider reported the renter's access was not delivered.
    #[serde(default)]
    pub undelivered: bool,
}

/// One period of a lease, settled: what the renter's deposit pays the provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeriodSettlement {
    /// The lease.
    pub lease: String,
    /// The period.
    pub period: Period,
    /// Its GPU-hours.
    pub hours: u64,
    /// The hours proven, in parts per million of an hour (the sum of the hours' shares).
    pub proven_hours_ppm: u64,
    /// What the period's hours are worth at the lease's price, micro-dollars.
    pub value_micro_usd: u64,
    /// What the provider is paid.
    pub paid_micro_usd: u64,
    /// What stays with the renter (`value − paid`).
    pub refunded_micro_usd: u64,
    /// Each hour's share.
    pub by_hour: Vec<HourShare>,
}

impl PeriodSettlement {
    /// The hours not paid in full, each in words.
    pub fn unproven(&self) -> Vec<String> {
        self.by_hour
            .iter()
            .filter(|h| h.paid_ppm < WHOLE_HOUR_PPM)
            .map(|h| {
                let when = crate::evidence::utc(h.from_ms);
                if h.undelivered {
                    format!("{when}: the renter's access not delivered")
                } else if h.rounds == 0 {
                    format!("{when}: no round, not vouched for")
                } else {
                    format!("{when}: {} of {} rounds proven", h.proven, h.rounds)
                }
            })
            .collect()
    }

    /// The period in words: hours proven of hours, paid and refunded, and the hours not
    /// paid in full.
    pub fn detail(&self) -> String {
        let unproven = self.unproven();
        let mut text = format!(
            "{:.3} of {} GPU-hours proven: {} µ$ paid, {} µ$ refunded",
            self.proven_hours_ppm as f64 / WHOLE_HOUR_PPM as f64,
            self.hours,
            self.paid_micro_usd,
            self.refunded_micro_usd
        );
        if !unproven.is_empty() {
            text.push_str(&format!(" ({})", unproven.join("; ")));
        }
        text
    }
}

/// The share of the hour `[from_ms, from_ms + 1 h)` the validator vouches for, in parts per
/// million, from the GPU's rounds (any order; see the module's doc), with how many rounds fell
/// in it and how many were proven.
pub fn hour_vouched_ppm(from_ms: u64, rounds: &[Round], rules: &SettlementRules) -> HourShare {
    let to_ms = from_ms.saturating_add(HOUR_MS);
    let inside = rounds
        .iter()
        .filter(|r| (from_ms..to_ms).contains(&r.at_ms()));
    let (count, proven) = inside.fold((0u32, 0u32), |(n, p), r| {
        (n + 1, p + u32::from(matches!(r, Round::Proven { .. })))
    });
    let paid_ppm = if count > 0 {
        u64::from(proven) * WHOLE_HOUR_PPM / u64::from(count)
    } else {
        // The validator's gap: vouched for by proven rounds on both sides, near enough.
        let before = rounds
            .iter()
            .filter(|r| r.at_ms() < from_ms)
            .max_by_key(|r| r.at_ms());
        let after = rounds
            .iter()
            .filter(|r| r.at_ms() >= to_ms)
            .min_by_key(|r| r.at_ms());
        let vouched = match (before, after) {
            (Some(b @ Round::Proven { .. }), Some(a @ Round::Proven { .. })) => {
                a.at_ms() - b.at_ms() <= rules.bridge_ms
            }
            _ => false,
        };
        if vouched {
            WHOLE_HOUR_PPM
        } else {
            0
        }
    };
    HourShare {
        from_ms,
        rounds: count,
        proven,
        paid_ppm,
        undelivered: false,
    }
}

/// Settles one period of `lease` from the GPU's rounds around it (those of the lease's
/// provider; any order): what is paid and what is refunded. `undelivered_from`: when the
/// provider reported that it could not give the renter access (its lease hook failed); no hour
/// that ends after it is paid, however well the GPU was proven, because the renter could not
/// use it.
pub fn settle(
    lease: &Lease,
    period: &Period,
    rounds: &[Round],
    rules: &SettlementRules,
    undelivered_from: Option<u64>,
) -> PeriodSettlement {
    let hours = period.hours();
    let by_hour: Vec<HourShare> = (0..hours)
        .map(|h| {
            let from_ms = period.from_ms + h * HOUR_MS;
            let share = hour_vouched_ppm(from_ms, rounds, rules);
            match undelivered_from {
                Some(t) if from_ms + HOUR_MS > t => HourShare {
                    paid_ppm: 0,
                    undelivered: true,
                    ..share
                },
                _ => share,
            }
        })
        .collect();
    let proven_hours_ppm: u64 = by_hour.iter().map(|h| h.paid_ppm).sum();
    // A price is at most $10⁶ (10¹² µ$) and a period a few thousand hours: the value is far
    // inside a u64; were it not, it saturates, and the payment never exceeds it.
    let value_micro_usd = lease.price_micro_usd.saturating_mul(hours);
    let paid = u128::from(lease.price_micro_usd) * u128::from(proven_hours_ppm)
        / u128::from(WHOLE_HOUR_PPM);
    let paid_micro_usd = u64::try_from(paid).map_or(value_micro_usd, |p| p.min(value_micro_usd));
    PeriodSettlement {
        lease: lease.id.clone(),
        period: *period,
        hours,
        proven_hours_ppm,
        value_micro_usd,
        paid_micro_usd,
        refunded_micro_usd: value_micro_usd - paid_micro_usd,
        by_hour,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const START: u64 = 1_800_000_000_000;
    const MIN: u64 = 60_000;

    fn lease(hours: u64, price: u64) -> Lease {
        Lease {
            id: "7.0.1".into(),
            gpu: pog_signed::GpuUuid::new("GPU-11111111-2222-3333-4444-555555555555").unwrap(),
            renter: "aa".repeat(32),
            provider: "bb".repeat(32),
            start_ms: START,
            end_ms: START + hours * HOUR_MS,
            hours,
            price_micro_usd: price,
            access: None,
        }
    }

    /// A round every 10 minutes from `from` (5 minutes in) to `to`, each made by `kind`.
    fn every_ten_minutes(from: u64, to: u64, kind: impl Fn(u64) -> Round) -> Vec<Round> {
        (0..)
            .map(|i| from + 5 * MIN + i * 10 * MIN)
            .take_while(|&t| t < to)
            .map(kind)
            .collect()
    }

    fn proven(at_ms: u64) -> Round {
        Round::Proven { at_ms }
    }

    #[test]
    fn a_lease_is_cut_into_periods_of_whole_hours_the_last_at_its_end() {
        let rules = SettlementRules::default();
        let p = periods(&lease(50, 1), &rules);
        assert_eq!(p.len(), 3);
        assert_eq!((p[0].index, p[0].hours()), (0, 24));
        assert_eq!((p[2].index, p[2].hours()), (2, 2));
        assert_eq!(p[2].to_ms, START + 50 * HOUR_MS);
        assert!(!is_due(&p[2], &rules, p[2].to_ms));
        assert!(is_due(&p[2], &rules, p[2].to_ms + HOUR_MS));
        assert_eq!(
            SettlementRules {
                period_ms: HOUR_MS + 1,
                ..rules
            }
            .validate(),
            Err(SettlementError::Period(HOUR_MS + 1))
        );
    }

    #[test]
    fn every_round_proven_pays_the_whole_period() {
        let l = lease(3, 2_500_000);
        let p = periods(&l, &SettlementRules::default())[0];
        let rounds = every_ten_minutes(START, l.end_ms, proven);
        let s = settle(&l, &p, &rounds, &SettlementRules::default(), None);
        assert_eq!(s.value_micro_usd, 7_500_000);
        assert_eq!((s.paid_micro_usd, s.refunded_micro_usd), (7_500_000, 0));
        assert_eq!(s.proven_hours_ppm, 3 * WHOLE_HOUR_PPM);
    }

    #[test]
    fn a_gpu_that_stops_answering_is_paid_only_for_what_was_proven() {
        let l = lease(3, 6_000_000);
        let p = periods(&l, &SettlementRules::default())[0];
        // Proven through the first hour and two rounds of the second, then silent.
        let stop = START + HOUR_MS + 20 * MIN;
        let rounds = every_ten_minutes(START, l.end_ms, |t| {
            if t < stop {
                proven(t)
            } else {
                Round::Unanswered { at_ms: t }
            }
        });
        let s = settle(&l, &p, &rounds, &SettlementRules::default(), None);
        // 1 hour + 2/6 of the second: 1.333333 h at $6.
        assert_eq!(s.proven_hours_ppm, 1_333_333);
        assert_eq!(s.paid_micro_usd, 7_999_998);
        assert_eq!(s.refunded_micro_usd, 18_000_000 - 7_999_998);
        assert!(
            s.detail().contains("2 of 6 rounds proven"),
            "{}",
            s.detail()
        );
    }

    #[test]
    fn the_validators_own_gap_is_paid_when_proven_on_both_sides_and_not_otherwise() {
        let l = lease(4, 1_000_000);
        let p = periods(&l, &SettlementRules::default())[0];
        let gap = START + HOUR_MS..START + 3 * HOUR_MS;
        let around = |edge: fn(u64) -> Round| -> Vec<Round> {
            every_ten_minutes(START, l.end_ms, proven)
                .into_iter()
                .filter(|r| !gap.contains(&r.at_ms()))
                .map(|r| {
                    // The last round before the gap decides with the first after it.
                    if r.at_ms() == gap.start - 5 * MIN {
                        edge(r.at_ms())
                    } else {
                        r
                    }
                })
                .collect()
        };
        let rules = SettlementRules::default();
        let bridged = settle(&l, &p, &around(proven), &rules, None);
        assert_eq!(bridged.paid_micro_usd, 4_000_000, "{}", bridged.detail());
        // A failure right before the gap: the GPU may have been down through it.
        let failed = settle(
            &l,
            &p,
            &around(|t| Round::Failed { at_ms: t }),
            &rules,
            None,
        );
        // The first hour has 5 of 6 proven; both gap hours are unpaid.
        assert_eq!(failed.proven_hours_ppm, 833_333 + WHOLE_HOUR_PPM);
        assert!(failed.detail().contains("no round, not vouched for"));
        // A gap longer than the bridge is not vouched for either.
        let short_bridge = SettlementRules {
            bridge_ms: 2 * HOUR_MS,
            ..rules
        };
        let far = settle(&l, &p, &around(proven), &short_bridge, None);
        assert_eq!(far.proven_hours_ppm, 2 * WHOLE_HOUR_PPM, "{}", far.detail());
    }

    #[test]
    fn hours_after_the_provider_reported_the_access_undelivered_are_not_paid() {
        let l = lease(3, 1_000_000);
        let p = periods(&l, &SettlementRules::default())[0];
        let rounds = every_ten_minutes(START, l.end_ms, proven);
        // Reported 90 minutes in: the first hour paid, the second (ending after it) not.
        let s = settle(
            &l,
            &p,
            &rounds,
            &SettlementRules::default(),
            Some(START + 90 * MIN),
        );
        assert_eq!(
            (s.paid_micro_usd, s.refunded_micro_usd),
            (1_000_000, 2_000_000)
        );
        assert!(
            s.detail().contains("access not delivered"),
            "{}",
            s.detail()
        );
    }

    #[test]
    fn a_period_with_no_round_at_all_pays_nothing() {
        let l = lease(2, 1_000_000);
        let p = periods(&l, &SettlementRules::default())[0];
        let s = settle(&l, &p, &[], &SettlementRules::default(), None);
        assert_eq!((s.paid_micro_usd, s.refunded_micro_usd), (0, 2_000_000));
    }

    fn any_round() -> impl Strategy<Value = Round> {
        (0u8..4, 0u64..6 * HOUR_MS).prop_map(|(kind, offset)| {
            let at_ms = START - HOUR_MS + offset;
            match kind {
                0 => Round::Proven { at_ms },
                1 => Round::Failed { at_ms },
                2 => Round::Unanswered { at_ms },
                _ => Round::Skipped { at_ms },
            }
        })
    }

    proptest! {
        /// Paid and refunded always add up to the period's value; nothing is paid beyond it;
        /// and proving one more round never pays less.
        #[test]
        fn paid_and_refunded_add_up_and_more_proof_never_pays_less(
            rounds in proptest::collection::vec(any_round(), 0..60),
            price in 0u64..100_000_000,
            flip in any::<prop::sample::Index>(),
        ) {
            let l = lease(4, price);
            let rules = SettlementRules::default();
            let p = periods(&l, &rules)[0];
            let s = settle(&l, &p, &rounds, &rules, None);
            prop_assert_eq!(s.paid_micro_usd + s.refunded_micro_usd, s.value_micro_usd);
            prop_assert!(s.proven_hours_ppm <= 4 * WHOLE_HOUR_PPM);
            if !rounds.is_empty() {
                let mut better = rounds.clone();
                let i = flip.index(better.len());
                better[i] = Round::Proven { at_ms: better[i].at_ms() };
                let b = settle(&l, &p, &better, &rules, None);
                prop_assert!(b.paid_micro_usd >= s.paid_micro_usd);
            }
        }
    }
}
