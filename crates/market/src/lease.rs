//! Leases: what a trade becomes (issue 25, item 2). A trade of `q` GPU-hours on an ask that
//! named GPUs is spread over those GPUs, each from the time it is next free (the clearing's
//! time, or the end of its last lease), one hour at a time to the GPU that frees first, so the
//! renter has its hours as early and as parallel as the ask's GPUs allow; each GPU that got
//! hours is one [`Lease`]: that GPU, for the renter, from its start to its end.
//!
//! The allocation is pure and deterministic ([`allocate`]): the [`Book`](crate::Book) makes
//! the leases as it clears, so a replay of its store makes the same ones.

use std::collections::HashMap;

use pog_signed::GpuUuid;
use serde::{Deserialize, Serialize};

pub use crate::access::{Access, AccessError, MAX_ACCESS_LEN};
use crate::backing::HOUR_MS;

/// One GPU leased to a renter for a time, from one trade.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// `CLEARING.TRADE.GPU`: the clearing's number, the trade's index in it, the GPU's index
    /// among the ask's: unique in the book.
    pub id: String,
    /// The GPU.
    pub gpu: GpuUuid,
    /// The renter (the bid's owner key).
    pub renter: String,
    /// The provider (the ask's owner key).
    pub provider: String,
    /// When the lease starts, ms since the Unix epoch.
    pub start_ms: u64,
    /// When it ends.
    pub end_ms: u64,
    /// Its GPU-hours: (end − start) in hours.
    pub hours: u64,
    /// What the renter pays per GPU-hour, micro-dollars.
    pub price_micro_usd: u64,
    /// How the renter reaches the GPU (its bid's), for the provider's hook; `None`: the bid
    /// named none (the renter and the provider arrange it themselves).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<Access>,
}

impl Lease {
    /// Where the lease stands at `now_ms`: "pending" before its start, "active" until its
    /// end, "ended" after.
    pub fn state_at(&self, now_ms: u64) -> &'static str {
        if now_ms < self.start_ms {
            "pending"
        } else if now_ms < self.end_ms {
            "active"
        } else {
            "ended"
        }
    }
}

/// What one trade is, for [`allocate`].
#[derive(Debug, Clone, Copy)]
pub struct TradeTerms<'a> {
    /// The clearing's number.
    pub clearing: u64,
    /// The trade's index in the clearing.
    pub trade: usize,
    /// The renter's key.
    pub renter: &'a str,
    /// The provider's key.
    pub provider: &'a str,
    /// GPU-hours traded.
    pub quantity: u64,
    /// What the renter pays per GPU-hour, micro-dollars.
    pub price_micro_usd: u64,
    /// How the renter reaches the GPUs (its bid's access).
    pub access: Option<&'a Access>,
}

/// Spreads a trade's GPU-hours over the ask's `gpus`, each from the time it is next free
/// (`booked`, no earlier than `now_ms`), one hour at a time to the GPU that frees first (ties:
/// the earlier named); moves each leased GPU's `booked` to its lease's end. One lease per GPU
/// that got hours; none when the ask names no GPUs.
pub fn allocate(
    terms: TradeTerms<'_>,
    gpus: &[GpuUuid],
    booked: &mut HashMap<GpuUuid, u64>,
    now_ms: u64,
) -> Vec<Lease> {
    let starts: Vec<u64> = gpus
        .iter()
        .map(|g| booked.get(g).copied().unwrap_or(0).max(now_ms))
        .collect();
    let mut ends = starts.clone();
    let mut hours = vec![0u64; gpus.len()];
    for _ in 0..terms.quantity {
        let Some(next) = (0..gpus.len()).min_by_key(|&i| (ends[i], i)) else {
            break;
        };
        ends[next] = ends[next].saturating_add(HOUR_MS);
        hours[next] += 1;
    }
    let mut leases = Vec::new();
    for (i, gpu) in gpus.iter().enumerate() {
        if hours[i] == 0 {
            continue;
        }
        booked.insert(gpu.clone(), ends[i]);
        leases.push(Lease {
            id: format!("{}.{}.{i}", terms.clearing, terms.trade),
            gpu: gpu.clone(),
            renter: terms.renter.to_string(),
            provider: terms.provider.to_string(),
            start_ms: starts[i],
            end_ms: ends[i],
            hours: hours[i],
            price_micro_usd: terms.price_micro_usd,
            access: terms.access.cloned(),
        });
    }
    leases
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NOW: u64 = 1_800_000_000_000;

    fn gpus(n: usize) -> Vec<GpuUuid> {
        (0..n)
            .map(|i| GpuUuid::new(format!("GPU-{i}")).unwrap())
            .collect()
    }

    fn terms(quantity: u64) -> TradeTerms<'static> {
        TradeTerms {
            clearing: 4,
            trade: 1,
            renter: "renter",
            provider: "provider",
            quantity,
            price_micro_usd: 3_000_000,
            access: None,
        }
    }

    #[test]
    fn hours_go_to_the_gpu_that_frees_first_and_book_it() {
        let g = gpus(3);
        let mut booked = HashMap::new();
        // GPU-1 is leased until an hour from now already.
        booked.insert(g[1].clone(), NOW + HOUR_MS);
        let leases = allocate(terms(5), &g, &mut booked, NOW);
        let shown: Vec<(&str, u64, u64, u64)> = leases
            .iter()
            .map(|l| {
                (
                    l.gpu.as_str(),
                    (l.start_ms - NOW) / HOUR_MS,
                    (l.end_ms - NOW) / HOUR_MS,
                    l.hours,
                )
            })
            .collect();
        assert_eq!(
            shown,
            [("GPU-0", 0, 2, 2), ("GPU-1", 1, 2, 1), ("GPU-2", 0, 2, 2)]
        );
        assert_eq!(leases[0].id, "4.1.0");
        assert_eq!(booked[&g[1]], NOW + 2 * HOUR_MS);
        // The next trade starts where these end.
        let next = allocate(terms(1), &g, &mut booked, NOW);
        assert_eq!(next.len(), 1);
        assert_eq!(next[0].start_ms, NOW + 2 * HOUR_MS);
        assert_eq!(next[0].state_at(NOW), "pending");
        assert_eq!(next[0].state_at(NOW + 2 * HOUR_MS), "active");
        assert_eq!(next[0].state_at(NOW + 3 * HOUR_MS), "ended");
    }

    #[test]
    fn an_ask_without_gpus_makes_no_lease() {
        assert!(allocate(terms(5), &[], &mut HashMap::new(), NOW).is_empty());
        assert!(allocate(terms(0), &gpus(2), &mut HashMap::new(), NOW).is_empty());
    }

    proptest! {
        /// Every GPU-hour traded is leased once; no two leases of a GPU overlap; none starts
        /// before the clearing or before the GPU is free.
        #[test]
        fn every_hour_is_leased_once_without_overlap(
            n in 1usize..6,
            trades in proptest::collection::vec(0u64..40, 1..6),
            busy in proptest::collection::vec(0u64..5, 6),
        ) {
            let g = gpus(n);
            let mut booked: HashMap<GpuUuid, u64> =
                g.iter().zip(&busy).map(|(gpu, h)| (gpu.clone(), NOW + h * HOUR_MS)).collect();
            let mut all: Vec<Lease> = Vec::new();
            for (t, &q) in trades.iter().enumerate() {
                let before = booked.clone();
                let leases = allocate(TradeTerms { trade: t, ..terms(q) }, &g, &mut booked, NOW);
                prop_assert_eq!(leases.iter().map(|l| l.hours).sum::<u64>(), q);
                for l in &leases {
                    prop_assert!(l.start_ms >= NOW.max(before.get(&l.gpu).copied().unwrap_or(0)));
                    prop_assert_eq!(l.end_ms - l.start_ms, l.hours * HOUR_MS);
                }
                all.extend(leases);
            }
            for a in &all {
                for b in &all {
                    if a.id != b.id && a.gpu == b.gpu {
                        prop_assert!(a.end_ms <= b.start_ms || b.end_ms <= a.start_ms);
                    }
                }
            }
        }
    }
}
