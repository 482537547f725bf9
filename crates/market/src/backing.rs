//! What backs an order (issue 25, item 1). An ask offers named GPUs: each must be registered
//! at the validator to the ask's owner key (the agent key that signs the ask), be of the
//! ask's class, and hold a recent accepted proof record that proves its model; and the ask
//! offers no more GPU-hours than those GPUs have before the ask expires. Spam is then bounded
//! per proven GPU, not per address: the [`Book`](crate::Book) lets one ask at a time offer a
//! GPU (until that ask expires, or is cancelled before any of its hours traded).
//!
//! The market reads the validator's registry and records through one narrow interface,
//! [`GpuStanding`]: for a GPU UUID, the agent key it is registered to, its registered model and
//! its latest proof. The validator implements it over its stores; a map implements it for
//! tests and for the fuzzers. What the market decides from it ([`check_ask`]) is pure.
//!
//! A bid is backed by its owner's deposit in an escrow contract (`contracts/GpuEscrow.sol`),
//! where the validator is given one: [`Deposits`] reads an owner's balance, and
//! [`check_bid_covered`] refuses a bid whose price times GPU-hours, with what the owner's other
//! open bids could pay, exceeds it. Spam then costs deposit, not addresses.

use std::collections::{BTreeMap, HashMap};

use pog_signed::{GpuUuid, PublicKey};

use crate::order::{Order, Side};

/// One hour in milliseconds: a GPU-hour is one GPU for this long.
pub const HOUR_MS: u64 = 3_600_000;

/// How old a GPU's latest proof may be, by default, for the GPU to back an ask: an hour (a
/// validator challenges every GPU every minute by default, so this spans many rounds).
pub const DEFAULT_MAX_PROOF_AGE_MS: u64 = HOUR_MS;

/// How long, by default, an ask may take from its owner's clock to the market's
/// ([`BackingRules::transit_ms`]): a minute.
pub const DEFAULT_TRANSIT_MS: u64 = 60_000;

/// What the validator knows of one registered GPU, as [`GpuStanding`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Standing {
    /// The agent key the GPU is registered to at this validator.
    pub agent: PublicKey,
    /// The GPU's model as registered (a class name of the book, e.g. `H200 SXM`).
    pub model: String,
    /// The GPU is the simulated test double: it backs nothing.
    pub simulated: bool,
    /// The latest proof record of the GPU's model (a GEMM round), if it has one.
    pub latest_proof: Option<LatestProof>,
}

/// A GPU's latest proof record, as much of it as backing an ask needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LatestProof {
    /// The record's row in the validator's store.
    pub record_id: i64,
    /// The validator accepted the proof.
    pub accepted: bool,
    /// The record speaks for the claimed model (a per-model plan on a real GPU).
    pub proves_model: bool,
    /// When the validator stored it, ms since the Unix epoch.
    pub recorded_at_ms: u64,
}

/// The standing of a GPU could not be read (the validator's store failed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the GPU registry could not be read: {0}")]
pub struct StandingUnavailable(pub String);

/// The validator's registry and records, as the market sees them: for a GPU UUID, its
/// [`Standing`], or `None` for a GPU not registered here.
pub trait GpuStanding {
    /// The standing of `gpu` now.
    fn standing(&self, gpu: &GpuUuid) -> Result<Option<Standing>, StandingUnavailable>;
}

impl GpuStanding for BTreeMap<GpuUuid, Standing> {
    fn standing(&self, gpu: &GpuUuid) -> Result<Option<Standing>, StandingUnavailable> {
        Ok(self.get(gpu).cloned())
    }
}

impl GpuStanding for HashMap<GpuUuid, Standing> {
    fn standing(&self, gpu: &GpuUuid) -> Result<Option<Standing>, StandingUnavailable> {
        Ok(self.get(gpu).cloned())
    }
}

/// The rules an ask's backing is judged by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackingRules {
    /// How old (ms, by the market's clock) a GPU's latest proof may be.
    pub max_proof_age_ms: u64,
    /// The time an ask may take to arrive, counted to its GPUs' hours: an owner who signs
    /// 24 GPU-hours on one GPU open for 24 hours is not refused for the milliseconds the
    /// request spent on the way (so an ask may offer up to this much per GPU more than the
    /// GPUs have, a minute by default).
    pub transit_ms: u64,
}

impl BackingRules {
    /// The rules for a validator that challenges every GPU once every `round_ms`: a proof may
    /// be [`DEFAULT_MAX_PROOF_AGE_MS`] old, or three rounds where rounds are further apart
    /// (so a slow schedule still backs asks, and a GPU that misses two rounds in a row stops
    /// backing new ones).
    pub fn for_rounds_every(round_ms: u64) -> BackingRules {
        BackingRules {
            max_proof_age_ms: DEFAULT_MAX_PROOF_AGE_MS.max(round_ms.saturating_mul(3)),
            ..BackingRules::default()
        }
    }
}

impl Default for BackingRules {
    fn default() -> BackingRules {
        BackingRules {
            max_proof_age_ms: DEFAULT_MAX_PROOF_AGE_MS,
            transit_ms: DEFAULT_TRANSIT_MS,
        }
    }
}

/// Why an order is not backed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackingError {
    /// The ask names no GPUs.
    #[error("ask {id} names no GPUs: an ask offers the hours of GPUs registered to its key (name them, e.g. `--gpu GPU-…`)")]
    NoGpus {
        /// The ask's id.
        id: String,
    },
    /// The ask offers more GPU-hours than its GPUs have before it expires.
    #[error("ask {id} offers {quantity} GPU-hours, but its {gpus} GPU(s) have only {available} whole GPU-hours before it expires: offer fewer hours, name more GPUs, or let it stay open longer")]
    TooManyHours {
        /// The ask's id.
        id: String,
        /// The GPU-hours it offers.
        quantity: u64,
        /// The GPUs it names.
        gpus: usize,
        /// The whole GPU-hours they have between now and the ask's expiry.
        available: u64,
    },
    /// A GPU is not registered at this validator.
    #[error("GPU {gpu} is not registered at this validator: register its agent first")]
    NotRegistered {
        /// The GPU.
        gpu: GpuUuid,
    },
    /// A GPU is registered to another key than the ask's owner.
    #[error("GPU {gpu} is registered to another key ({holder}), not to the ask's owner {owner}: sign the ask with the key of the agent that holds it")]
    NotHeld {
        /// The GPU.
        gpu: GpuUuid,
        /// The agent key it is registered to.
        holder: PublicKey,
        /// The ask's owner.
        owner: String,
    },
    /// A GPU's registered model is not the ask's class.
    #[error("GPU {gpu} is registered as {model:?}, not of the ask's class {class:?}")]
    OtherClass {
        /// The GPU.
        gpu: GpuUuid,
        /// Its registered model.
        model: String,
        /// The ask's class.
        class: String,
    },
    /// A GPU is the simulated test double.
    #[error("GPU {gpu} is the simulated test double: it proves nothing and backs no ask")]
    Simulated {
        /// The GPU.
        gpu: GpuUuid,
    },
    /// A GPU has no proof record yet.
    #[error("GPU {gpu} has no proof record yet: wait for the validator's next round")]
    Unproven {
        /// The GPU.
        gpu: GpuUuid,
    },
    /// A GPU's latest proof failed.
    #[error("GPU {gpu}'s latest proof (record {record_id}) failed: it backs no ask until a proof is accepted again")]
    LastProofFailed {
        /// The GPU.
        gpu: GpuUuid,
        /// The failed record's row.
        record_id: i64,
    },
    /// A GPU's latest proof was accepted but does not prove its model.
    #[error("GPU {gpu}'s latest proof (record {record_id}) does not prove its model (a test plan, or a precision where the model does not lead): it backs no ask")]
    ModelNotProven {
        /// The GPU.
        gpu: GpuUuid,
        /// The record's row.
        record_id: i64,
    },
    /// A GPU's latest proof is older than [`BackingRules::max_proof_age_ms`].
    #[error("GPU {gpu}'s latest proof (record {record_id}) is {age_s} s old, more than the {max_age_s} s an ask's GPU may go unproven")]
    ProofTooOld {
        /// The GPU.
        gpu: GpuUuid,
        /// The record's row.
        record_id: i64,
        /// Its age, s.
        age_s: u64,
        /// The most allowed, s.
        max_age_s: u64,
    },
    /// The registry could not be read.
    #[error(transparent)]
    Unavailable(#[from] StandingUnavailable),
    /// The bid, with the owner's other open bids, could pay more than the owner's deposit.
    #[error("bid {id} could pay up to {needed} micro-dollars with {owner}'s other open bids, more than its deposit of {deposit} in the escrow: deposit more (or cancel bids) first")]
    BidNotCovered {
        /// The bid's id.
        id: String,
        /// The owner's key.
        owner: String,
        /// What the owner's open bids, this one with them, could pay at most (micro-dollars).
        needed: u128,
        /// The owner's deposit (micro-dollars).
        deposit: u128,
    },
    /// The escrow could not be read: nothing was accepted; try again.
    #[error(transparent)]
    DepositsUnavailable(#[from] DepositsUnavailable),
}

/// The escrow's deposits, as the market sees them: the balance backing an owner's bids.
pub trait Deposits {
    /// The deposit of `owner` now, in micro-dollars (0 when it never deposited).
    fn deposit_of(&self, owner: &PublicKey) -> Result<u128, DepositsUnavailable>;
}

/// The escrow could not be read (the chain did not answer).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the deposits could not be read from the escrow: {0}; nothing was accepted, try again")]
pub struct DepositsUnavailable(pub String);

impl Deposits for BTreeMap<PublicKey, u128> {
    fn deposit_of(&self, owner: &PublicKey) -> Result<u128, DepositsUnavailable> {
        Ok(self.get(owner).copied().unwrap_or(0))
    }
}

/// The most a bid could pay: its open GPU-hours at its price, in micro-dollars.
pub fn bid_value(order: &Order) -> u128 {
    u128::from(order.quantity()) * u128::from(order.price().micro_usd())
}

/// Checks that `bid`, beside what its owner's open bids could pay (`committed`, micro-dollars),
/// is covered by the owner's `deposit`.
pub fn check_bid_covered(bid: &Order, committed: u128, deposit: u128) -> Result<(), BackingError> {
    let needed = committed.saturating_add(bid_value(bid));
    if needed > deposit {
        return Err(BackingError::BidNotCovered {
            id: bid.id().as_str().to_string(),
            owner: bid.owner().to_string(),
            needed,
            deposit,
        });
    }
    Ok(())
}

/// Checks what backs `order`, submitted at `now_ms` and open until `expires_at_ms`: for an
/// ask, [`check_ask`]; a bid passes (its deposit is the seam issue 25 leaves for the escrow).
pub fn check_order(
    order: &Order,
    expires_at_ms: u64,
    now_ms: u64,
    standing: &dyn GpuStanding,
    rules: &BackingRules,
) -> Result<(), BackingError> {
    match order.side() {
        Side::Ask => check_ask(order, expires_at_ms, now_ms, standing, rules),
        Side::Bid => Ok(()),
    }
}

/// Checks that an ask, submitted at `now_ms` and open until `expires_at_ms`, is backed: it
/// names GPUs, offers no more GPU-hours than they have until it expires (quantity ≤ GPUs ×
/// hours to expiry, exactly, in milliseconds, the hours counted from
/// [`BackingRules::transit_ms`] before now), and each GPU is registered to the ask's owner,
/// of its class, not simulated, and its latest proof is accepted, proves its model and is at
/// most [`BackingRules::max_proof_age_ms`] old. The first failure found is returned (the
/// hours first, then the GPUs in the order named). Whether a GPU is already offered by
/// another ask is the [`Book`](crate::Book)'s to check.
pub fn check_ask(
    order: &Order,
    expires_at_ms: u64,
    now_ms: u64,
    standing: &dyn GpuStanding,
    rules: &BackingRules,
) -> Result<(), BackingError> {
    let id = order.id().as_str().to_string();
    let gpus = order.gpus();
    if gpus.is_empty() {
        return Err(BackingError::NoGpus { id });
    }
    let since_ms = now_ms.saturating_sub(rules.transit_ms);
    let open_ms = u128::from(expires_at_ms.saturating_sub(since_ms));
    let capacity_ms = open_ms * gpus.len() as u128;
    if u128::from(order.quantity()) * u128::from(HOUR_MS) > capacity_ms {
        return Err(BackingError::TooManyHours {
            id,
            quantity: order.quantity(),
            gpus: gpus.len(),
            available: u64::try_from(capacity_ms / u128::from(HOUR_MS)).unwrap_or(u64::MAX),
        });
    }
    check_gpus(order, now_ms, standing, rules)
}

/// Checks that each GPU an ask names still backs it at `now_ms`: registered to the ask's
/// owner as its class, not simulated, its latest proof accepted, proving its model and at
/// most [`BackingRules::max_proof_age_ms`] old ([`check_ask`] without the hours, which were
/// checked when the ask came: what the validator checks again of an open ask before each
/// clearing). An ask naming no GPU passes (there is nothing to check).
pub fn check_gpus(
    order: &Order,
    now_ms: u64,
    standing: &dyn GpuStanding,
    rules: &BackingRules,
) -> Result<(), BackingError> {
    for gpu in order.gpus() {
        let Some(s) = standing.standing(gpu)? else {
            return Err(BackingError::NotRegistered { gpu: gpu.clone() });
        };
        if !s.agent.as_str().eq_ignore_ascii_case(order.owner()) {
            return Err(BackingError::NotHeld {
                gpu: gpu.clone(),
                holder: s.agent,
                owner: order.owner().to_string(),
            });
        }
        if s.model != order.class().as_str() {
            return Err(BackingError::OtherClass {
                gpu: gpu.clone(),
                model: s.model,
                class: order.class().to_string(),
            });
        }
        if s.simulated {
            return Err(BackingError::Simulated { gpu: gpu.clone() });
        }
        let Some(proof) = s.latest_proof else {
            return Err(BackingError::Unproven { gpu: gpu.clone() });
        };
        if !proof.accepted {
            return Err(BackingError::LastProofFailed {
                gpu: gpu.clone(),
                record_id: proof.record_id,
            });
        }
        if !proof.proves_model {
            return Err(BackingError::ModelNotProven {
                gpu: gpu.clone(),
                record_id: proof.record_id,
            });
        }
        let age_ms = now_ms.saturating_sub(proof.recorded_at_ms);
        if age_ms > rules.max_proof_age_ms {
            return Err(BackingError::ProofTooOld {
                gpu: gpu.clone(),
                record_id: proof.record_id,
                age_s: age_ms / 1000,
                max_age_s: rules.max_proof_age_ms / 1000,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_bid_is_covered_while_its_owners_open_bids_with_it_fit_the_deposit() {
        let owner = "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c";
        let bid = Order::new(
            crate::OrderId::new("b1").unwrap(),
            owner,
            Side::Bid,
            crate::GpuClass::new("H200 SXM").unwrap(),
            3,
            crate::price::Price::from_usd(2.5).unwrap(),
        )
        .unwrap();
        assert_eq!(bid_value(&bid), 7_500_000);
        assert_eq!(check_bid_covered(&bid, 2_500_000, 10_000_000), Ok(()));
        assert_eq!(
            check_bid_covered(&bid, 2_500_001, 10_000_000),
            Err(BackingError::BidNotCovered {
                id: "b1".into(),
                owner: owner.into(),
                needed: 10_000_001,
                deposit: 10_000_000,
            })
        );
        // A committed sum past u128 (it cannot be, but saturates rather than wraps).
        assert!(check_bid_covered(&bid, u128::MAX, u128::MAX - 1).is_err());
    }

    use super::*;
    use crate::order::{GpuClass, OrderId};
    use crate::price::Price;

    const ALICE: &str = "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c";
    const BOB: &str = "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025";
    const NOW: u64 = 1_800_000_000_000;

    fn gpu(u: &str) -> GpuUuid {
        GpuUuid::new(u).unwrap()
    }

    fn proven(agent: &str) -> Standing {
        Standing {
            agent: PublicKey::parse(agent).unwrap(),
            model: "H200 SXM".into(),
            simulated: false,
            latest_proof: Some(LatestProof {
                record_id: 7,
                accepted: true,
                proves_model: true,
                recorded_at_ms: NOW - 60_000,
            }),
        }
    }

    fn ask(side: Side, quantity: u64, gpus: &[&str]) -> Order {
        Order::new(
            OrderId::new("a1").unwrap(),
            ALICE,
            side,
            GpuClass::new("H200 SXM").unwrap(),
            quantity,
            Price::from_usd(3.0).unwrap(),
        )
        .unwrap()
        .offering(gpus.iter().map(|u| gpu(u)).collect())
        .unwrap()
    }

    fn registry() -> BTreeMap<GpuUuid, Standing> {
        let mut r = BTreeMap::new();
        r.insert(gpu("GPU-a"), proven(ALICE));
        r.insert(gpu("GPU-b"), proven(ALICE));
        r.insert(gpu("GPU-bob"), proven(BOB));
        r
    }

    fn check(order: &Order, registry: &BTreeMap<GpuUuid, Standing>) -> Result<(), BackingError> {
        check_order(
            order,
            NOW + 10 * HOUR_MS,
            NOW,
            registry,
            &BackingRules::default(),
        )
    }

    #[test]
    fn an_open_asks_gpus_are_checked_again_without_its_hours() {
        let mut r = registry();
        // Late in its life an ask's hours exceed what is left of its window: that was checked
        // when it came, and is not again.
        let late = ask(Side::Ask, 20, &["GPU-a"]);
        let rules = BackingRules::default();
        assert_eq!(check_gpus(&late, NOW, &r, &rules), Ok(()));
        r.get_mut(&gpu("GPU-a")).unwrap().agent = PublicKey::parse(BOB).unwrap();
        assert!(matches!(
            check_gpus(&late, NOW, &r, &rules),
            Err(BackingError::NotHeld { .. })
        ));
        r.remove(&gpu("GPU-a"));
        assert!(matches!(
            check_gpus(&late, NOW, &r, &rules),
            Err(BackingError::NotRegistered { .. })
        ));
    }

    #[test]
    fn a_slow_schedule_allows_older_proofs() {
        assert_eq!(
            BackingRules::for_rounds_every(60_000),
            BackingRules::default()
        );
        assert_eq!(
            BackingRules::for_rounds_every(2 * HOUR_MS).max_proof_age_ms,
            6 * HOUR_MS
        );
        assert_eq!(
            BackingRules::for_rounds_every(u64::MAX).max_proof_age_ms,
            u64::MAX
        );
    }

    #[test]
    fn an_ask_of_proven_gpus_held_by_its_owner_is_backed() {
        assert_eq!(
            check(&ask(Side::Ask, 20, &["GPU-a", "GPU-b"]), &registry()),
            Ok(())
        );
        // A bid needs no GPUs (its deposit is not checked here yet).
        assert_eq!(check(&ask(Side::Bid, 1_000, &[]), &registry()), Ok(()));
    }

    #[test]
    fn an_ask_offers_no_more_hours_than_its_gpus_have_before_it_expires() {
        let r = registry();
        // Two GPUs for ten hours (and the minute on the way): 20 GPU-hours, not 21.
        assert_eq!(
            check(&ask(Side::Ask, 21, &["GPU-a", "GPU-b"]), &r),
            Err(BackingError::TooManyHours {
                id: "a1".into(),
                quantity: 21,
                gpus: 2,
                available: 20
            })
        );
        // Exact to the millisecond, with the minute an ask may spend on the way: one GPU open
        // for 59 minutes backs one GPU-hour, for 58:59.999 none; for 90 minutes not two.
        let one = ask(Side::Ask, 1, &["GPU-a"]);
        let backed = |o: &Order, open_ms: u64| {
            check_ask(o, NOW + open_ms, NOW, &r, &BackingRules::default())
        };
        assert_eq!(backed(&one, 59 * 60_000), Ok(()));
        assert!(matches!(
            backed(&one, 59 * 60_000 - 1),
            Err(BackingError::TooManyHours { available: 0, .. })
        ));
        assert!(matches!(
            backed(&ask(Side::Ask, 2, &["GPU-a"]), 90 * 60_000),
            Err(BackingError::TooManyHours { available: 1, .. })
        ));
        assert!(matches!(
            check(&ask(Side::Ask, 1, &[]), &r),
            Err(BackingError::NoGpus { .. })
        ));
    }

    #[test]
    fn an_ask_for_a_gpu_its_owner_does_not_hold_or_that_is_not_proven_is_refused() {
        let mut r = registry();
        let refused = |r: &BTreeMap<GpuUuid, Standing>, g: &str| {
            check(&ask(Side::Ask, 1, &["GPU-a", g]), r).unwrap_err()
        };
        assert_eq!(
            refused(&r, "GPU-zz"),
            BackingError::NotRegistered { gpu: gpu("GPU-zz") }
        );
        assert!(
            matches!(refused(&r, "GPU-bob"), BackingError::NotHeld { holder, .. } if holder.as_str() == BOB)
        );
        let edit = |r: &mut BTreeMap<GpuUuid, Standing>, f: &dyn Fn(&mut Standing)| {
            f(r.get_mut(&gpu("GPU-b")).unwrap())
        };
        edit(&mut r, &|s| s.model = "H100 SXM".into());
        assert!(matches!(
            refused(&r, "GPU-b"),
            BackingError::OtherClass { .. }
        ));
        edit(&mut r, &|s| *s = proven(ALICE));
        edit(&mut r, &|s| s.simulated = true);
        assert!(matches!(
            refused(&r, "GPU-b"),
            BackingError::Simulated { .. }
        ));
        edit(&mut r, &|s| *s = proven(ALICE));
        edit(&mut r, &|s| s.latest_proof = None);
        assert!(matches!(
            refused(&r, "GPU-b"),
            BackingError::Unproven { .. }
        ));
        edit(&mut r, &|s| *s = proven(ALICE));
        edit(&mut r, &|s| {
            s.latest_proof.as_mut().unwrap().accepted = false
        });
        assert!(matches!(
            refused(&r, "GPU-b"),
            BackingError::LastProofFailed { record_id: 7, .. }
        ));
        edit(&mut r, &|s| *s = proven(ALICE));
        edit(&mut r, &|s| {
            s.latest_proof.as_mut().unwrap().proves_model = false
        });
        assert!(matches!(
            refused(&r, "GPU-b"),
            BackingError::ModelNotProven { .. }
        ));
        edit(&mut r, &|s| *s = proven(ALICE));
        edit(&mut r, &|s| {
            s.latest_proof.as_mut().unwrap().recorded_at_ms = NOW - DEFAULT_MAX_PROOF_AGE_MS - 1
        });
        assert!(matches!(
            refused(&r, "GPU-b"),
            BackingError::ProofTooOld {
                age_s: 3600,
                max_age_s: 3600,
                ..
            }
        ));
        // At the limit it still backs.
        edit(&mut r, &|s| {
            s.latest_proof.as_mut().unwrap().recorded_at_ms = NOW - DEFAULT_MAX_PROOF_AGE_MS
        });
        assert_eq!(check(&ask(Side::Ask, 1, &["GPU-a", "GPU-b"]), &r), Ok(()));
    }
}
