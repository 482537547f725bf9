//! The proof of memory: a challenge that only a GPU holding, in memory it reads at the claimed
//! model's bandwidth, a challenge-specific data set of 90 % of the claimed capacity answers in
//! time. The compute proof cannot tell an H200 from an H100 SXM (same SMs and clocks); this
//! one can (141 against 80 GB, 4.8 against 3.35 TB/s). The argument, with measured numbers,
//! is in docs/protocol.md ("Proof of memory").
//!
//! 1. **Build** (untimed, under a deadline). The validator sends a [`MemoryChallenge`]; the agent
//!    fills `items` 128-byte items, each two ChaCha blocks of `item_rounds` double rounds under
//!    a key derived from the nonce, the GPU's UUID and bus id and both parties' keys
//!    ([`MemoryChallenge::dataset_key`]). It answers "ready".
//! 2. **Walk** (timed by the validator). The validator sends a fresh walk nonce; `walkers`
//!    walkers each read `steps` items at data-dependent indices ([`arx::walk`]); their 16-byte
//!    outputs, `walkers_per_leaf` a leaf, are committed to a Merkle root (`pog_merkle::Blake3`). An honest GPU
//!    reads every item from memory: the window is memory traffic. A GPU that kept only part
//!    of the items must produce the rest when a walker asks for them — a full item generation
//!    (many times the cost of reading it) or a fetch over PCIe — and misses the bound.
//! 3. **Spot checks** as for the GEMM proof: after the commitment the validator draws walkers,
//!    the agent opens their leaves, and the validator recomputes each drawn walker from the
//!    key alone (`steps` item generations on its CPU: light verification, no data set).

pub mod arx;
mod plan;
mod prover;

pub use plan::{
    plan, unseparated, BeyondPlan, MemoryPlan, MemoryRate, DATASHEET_WALK_EFFICIENCY, FILL,
    ITEM_ROUNDS, SPAN, STEPS, WALKERS_PER_LEAF, WALK_SECONDS, WALK_SLACK,
};
pub use prover::{CpuDataset, CpuMemoryProver, MemoryBehaviour};

use crate::challenge::{bind, Addressee};
use crate::layout::Position;
use crate::verify::Rejection;
use arx::{ITEM_BYTES, OUTPUT_BYTES};
use pog_merkle::Hash;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Version of the memory challenge's encoding, derivations and answer; bumped on any change.
/// 2: the openings travel compact, as the GEMM proof's (`wire::Openings`); the derivations are
/// those of version 1. 3: the commitment's tree is hashed as the GEMM proof's of version 5
/// (`pog_merkle::Blake3`).
pub const MEMORY_VERSION: u32 = 3;

/// Walkers spot-checked per memory challenge. Every walker does the same work, so a prover
/// that saves a share f of the walk's time leaves at least that share of walkers wrong, and
/// 128 draws catch f = 10 % with probability 1 − 0.9¹²⁸ ≈ 1 − 1.4·10⁻⁶ (target 1 − 10⁻⁴;
/// 88 would do). Each check recomputes `steps` items on the validator's CPU.
pub const SAMPLES: u32 = 128;

/// The largest data set a challenge may ask for: 2³⁴ items (2 TiB).
pub const MAX_ITEMS: u64 = 1 << 34;
/// The most double rounds per item block.
pub const MAX_ITEM_ROUNDS: u32 = 1024;
/// The most walkers: 2³⁶ (1 TiB of outputs, far past any card).
pub const MAX_WALKERS: u64 = 1 << 36;
/// The most steps per walker.
pub const MAX_STEPS: u32 = 4096;
/// The most items read per step.
pub const MAX_SPAN: u32 = 1024;
/// The most walkers per leaf (1 MiB leaves).
pub const MAX_WALKERS_PER_LEAF: u32 = 1 << 16;

/// What the validator asks one GPU to hold and walk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryChallenge {
    /// [`MEMORY_VERSION`]; a challenge of another version is refused.
    pub version: u32,
    /// Fresh randomness from the validator, lowercase hex in JSON.
    #[serde(with = "hex::serde")]
    pub nonce: [u8; 32],
    /// Whom it is for and from, bound into the data set like the GEMM challenge's seeds.
    /// Flattened: its four fields sit in the challenge's JSON.
    #[serde(flatten)]
    pub to: Addressee,
    /// Items of 128 bytes in the data set.
    pub items: u64,
    /// ChaCha double rounds per 64-byte half of an item: what one item costs to produce.
    pub item_rounds: u32,
    /// Walkers, each one 16-byte output.
    pub walkers: u64,
    /// Random steps each walker takes.
    pub steps: u32,
    /// Consecutive items read at each step; `items` is a multiple of it.
    pub span: u32,
    /// Walker outputs per Merkle leaf; `walkers` is a multiple of it, and a leaf is a multiple
    /// of 64 bytes (the GPU's leaf hashing takes whole SHA-256 blocks).
    pub walkers_per_leaf: u32,
}

/// A memory challenge whose shape no prover should attempt.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "a memory challenge needs 1 ≤ items ≤ {MAX_ITEMS}, 1 ≤ item rounds ≤ {MAX_ITEM_ROUNDS}, \
     1 ≤ steps ≤ {MAX_STEPS}, a span of 1 to {MAX_SPAN} dividing the items, walkers per leaf a multiple of 4 up to {MAX_WALKERS_PER_LEAF}, and \
     a whole number of leaves up to {MAX_WALKERS} walkers; this one asks for {items} items, \
     {item_rounds} rounds, {walkers} walkers of {steps} steps of {span}, {walkers_per_leaf} a \
     leaf"
)]
pub struct BadMemoryShape {
    /// The data set's items asked for.
    pub items: u64,
    /// The double rounds per item block asked for.
    pub item_rounds: u32,
    /// The walkers asked for.
    pub walkers: u64,
    /// The steps per walker asked for.
    pub steps: u32,
    /// The items per step asked for.
    pub span: u32,
    /// The walkers per leaf asked for.
    pub walkers_per_leaf: u32,
}

impl MemoryChallenge {
    /// Refuses shapes that are empty, unbounded, or whose leaves do not divide the walkers.
    pub fn check_shape(&self) -> Result<(), BadMemoryShape> {
        let ok = (1..=MAX_ITEMS).contains(&self.items)
            && (1..=MAX_ITEM_ROUNDS).contains(&self.item_rounds)
            && (1..=MAX_STEPS).contains(&self.steps)
            && (1..=MAX_SPAN).contains(&self.span)
            && self.items.is_multiple_of(u64::from(self.span.max(1)))
            && (4..=MAX_WALKERS_PER_LEAF).contains(&self.walkers_per_leaf)
            && self.walkers_per_leaf.is_multiple_of(4)
            && (1..=MAX_WALKERS).contains(&self.walkers)
            && self
                .walkers
                .is_multiple_of(u64::from(self.walkers_per_leaf));
        if ok {
            Ok(())
        } else {
            Err(BadMemoryShape {
                items: self.items,
                item_rounds: self.item_rounds,
                walkers: self.walkers,
                steps: self.steps,
                span: self.span,
                walkers_per_leaf: self.walkers_per_leaf,
            })
        }
    }

    /// The data set's key: SHA-256("pog-memory v1" ‖ nonce ‖ uuid ‖ bus id ‖ agent key ‖
    /// validator key ‖ items ‖ item rounds), as eight LE words.
    pub fn dataset_key(&self) -> [u32; 8] {
        let mut h = Sha256::new();
        h.update(b"pog-memory v1");
        bind(&mut h, &self.nonce, &self.to);
        h.update(self.items.to_le_bytes());
        h.update(self.item_rounds.to_le_bytes());
        arx::key_words(&h.finalize().into())
    }

    /// The walk's key, from the data set's key and the walk nonce the validator sends once the
    /// data set is built: SHA-256("pog-memory walk v1" ‖ data-set key ‖ walk nonce ‖ walkers ‖
    /// steps), as eight LE words. Nothing about the walk is known while building.
    pub fn walk_key(&self, walk_nonce: &[u8; 32]) -> [u32; 8] {
        let mut h = Sha256::new();
        h.update(b"pog-memory walk v1");
        for word in self.dataset_key() {
            h.update(word.to_le_bytes());
        }
        h.update(walk_nonce);
        h.update(self.walkers.to_le_bytes());
        h.update(self.steps.to_le_bytes());
        h.update(self.span.to_le_bytes());
        arx::key_words(&h.finalize().into())
    }

    /// Bytes of the data set.
    pub fn dataset_bytes(&self) -> u64 {
        self.items * ITEM_BYTES
    }

    /// Bytes of all walker outputs.
    pub fn output_bytes(&self) -> u64 {
        self.walkers * OUTPUT_BYTES
    }

    /// Bytes of one leaf.
    pub fn leaf_bytes(&self) -> usize {
        self.walkers_per_leaf as usize * OUTPUT_BYTES as usize
    }

    /// Leaves in the commitment.
    pub fn leaf_count(&self) -> u64 {
        self.walkers / u64::from(self.walkers_per_leaf).max(1)
    }

    /// Item reads in the whole walk.
    pub fn reads(&self) -> u64 {
        self.walkers * u64::from(self.steps) * u64::from(self.span)
    }

    /// Walker `walker`'s output, recomputed from the keys alone (the validator's check). The
    /// walk reads a step's `span` items in order from the first; they are generated together
    /// at that first read ([`arx::items`]) and served from there.
    pub fn walker_output(&self, walk_key: &[u32; 8], walker: u64) -> [u8; OUTPUT_BYTES as usize] {
        let key = self.dataset_key();
        let mut span = vec![[0u32; arx::ITEM_WORDS]; self.span.max(1) as usize];
        let mut first = None;
        arx::walk(walk_key, walker, (self.steps, self.span), self.items, |i| {
            let at = i - i % span.len() as u64;
            if first != Some(at) {
                arx::items(&key, at, self.item_rounds, &mut span);
                first = Some(at);
            }
            span[(i - at) as usize]
        })
    }
}

/// A memory challenge with its walk: the checks a validator runs once it has sent the walk
/// nonce. It plugs into [`crate::session::ValidatorSession`] like the GEMM challenge (the
/// session implements its `SpotChecked` for it with the checks below).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Walk {
    /// The challenge the agent committed to.
    pub challenge: MemoryChallenge,
    /// The walk's key, derived from the walk nonce the validator sent after the data set was
    /// built: which items each walker reads is unknown until then.
    pub walk_key: [u32; 8],
}

impl Walk {
    /// Draws `count` walkers to check, uniform over all of them, from the validator's secret
    /// and the committed root; walker `w` is the position (product 0, row `w`, column 0).
    pub fn draw_walkers(&self, root: &Hash, secret: &[u8; 32], count: u32) -> Vec<Position> {
        (0..count)
            .map(|i| {
                let mut h = Sha256::new();
                h.update(b"pog-memory samples v1");
                h.update(secret);
                h.update(root);
                h.update(i.to_le_bytes());
                let d = h.finalize();
                let word = u64::from_le_bytes(d[..8].try_into().expect("32-byte digest"));
                Position {
                    gemm: 0,
                    row: word % self.challenge.walkers.max(1),
                    col: 0,
                }
            })
            .collect()
    }

    /// The leaf holding a drawn walker's output.
    pub fn leaf_of(&self, p: Position) -> u64 {
        p.row / u64::from(self.challenge.walkers_per_leaf).max(1)
    }

    /// Checks one drawn walker's output in `bytes`, the bytes of the leaf holding it
    /// ([`Walk::leaf_of`]), already proven to be that leaf of the committed tree (the session
    /// checks every opened leaf against the root with one multiproof): the leaf's length, then
    /// the output the validator recomputes from the keys.
    pub fn check_output(&self, p: Position, bytes: &[u8]) -> Result<(), Rejection> {
        let c = &self.challenge;
        let (walker, leaf) = (p.row, self.leaf_of(p));
        if bytes.len() != c.leaf_bytes() {
            return Err(Rejection::BadLength {
                leaf,
                expected: c.leaf_bytes(),
                got: bytes.len(),
            });
        }
        let at = (walker % u64::from(c.walkers_per_leaf)) as usize * OUTPUT_BYTES as usize;
        let got = &bytes[at..at + OUTPUT_BYTES as usize];
        let expected = c.walker_output(&self.walk_key, walker);
        if got == expected {
            Ok(())
        } else {
            Err(Rejection::WrongOutput {
                walker,
                got: hex::encode(got),
                expected: hex::encode(expected),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn small() -> MemoryChallenge {
        MemoryChallenge {
            version: MEMORY_VERSION,
            nonce: [3; 32],
            to: crate::challenge::Addressee {
                gpu_uuid: "GPU-1".parse().unwrap(),
                gpu_bus_id: "00000000:00:06.0".into(),
                agent_key: pog_signed::PublicKey::from([0xaa; 32]),
                validator_key: pog_signed::PublicKey::from([0xbb; 32]),
            },
            items: 1000,
            item_rounds: 4,
            walkers: 256,
            steps: 4,
            span: 2,
            walkers_per_leaf: 16,
        }
    }

    #[test]
    fn the_spot_checks_meet_the_soundness_target() {
        use crate::soundness::{catch_probability, samples_needed};
        assert!(catch_probability(0.10, SAMPLES) >= 1.0 - 1e-4);
        assert!(samples_needed(0.10, 1e-4) <= SAMPLES);
        assert_eq!(samples_needed(0.10, 1e-4), 88);
    }

    #[test]
    fn keys_bind_every_party_the_nonce_and_the_shape() {
        let c = small();
        let key = c.dataset_key();
        let changed = [
            MemoryChallenge {
                to: Addressee {
                    gpu_uuid: "GPU-2".parse().unwrap(),
                    ..small().to
                },
                ..small()
            },
            MemoryChallenge {
                to: Addressee {
                    gpu_bus_id: "00000000:00:07.0".into(),
                    ..small().to
                },
                ..small()
            },
            MemoryChallenge {
                to: Addressee {
                    agent_key: pog_signed::PublicKey::from([0xcc; 32]),
                    ..small().to
                },
                ..small()
            },
            MemoryChallenge {
                to: Addressee {
                    validator_key: pog_signed::PublicKey::from([0xcc; 32]),
                    ..small().to
                },
                ..small()
            },
            MemoryChallenge {
                nonce: [4; 32],
                ..small()
            },
            MemoryChallenge {
                items: 1001,
                ..small()
            },
            MemoryChallenge {
                item_rounds: 5,
                ..small()
            },
        ];
        for other in &changed {
            assert_ne!(other.dataset_key(), key, "{other:?}");
        }
        assert_ne!(c.walk_key(&[1; 32]), c.walk_key(&[2; 32]));
        assert_eq!(c.walk_key(&[1; 32]), small().walk_key(&[1; 32]));
    }

    /// A whole exchange through the validator's session with a CPU prover behaving so.
    fn exchange(
        behaviour: MemoryBehaviour,
        answered: &MemoryChallenge,
        samples: u32,
    ) -> crate::session::Outcome {
        use crate::prover::Prover;
        use crate::session::ValidatorSession;
        use crate::wire::{Commitment, Openings};
        let walk_nonce = [7u8; 32];
        let walk = Walk {
            challenge: small(),
            walk_key: small().walk_key(&walk_nonce),
        };
        let agent = pog_signed::Identity::from_seed([1; 32]).public_key();
        let mut s = ValidatorSession::timed(
            "m1".into(),
            walk,
            (1_000, 60_000),
            agent.clone(),
            1_000.0,
            [5; 32],
            samples,
        );
        let prover = CpuDataset::build(answered)
            .unwrap()
            .walk(&walk_nonce, behaviour);
        let commitment = Commitment {
            challenge_id: "m1".into(),
            gpu_uuid: "GPU-1".parse().unwrap(),
            root: hex::encode(prover.root()),
            leaf_count: prover.leaf_count(),
            agent_ms: 1.0,
        };
        let request = s.on_commitment(&commitment, &agent, 1_500, 1.0).unwrap();
        let openings = Openings::compact(
            "m1".into(),
            prover.leaf_count(),
            &prover.open(&request.leaves).unwrap(),
        )
        .unwrap();
        s.on_openings(&openings, &agent).unwrap()
    }

    #[test]
    fn an_honest_walk_passes_and_junk_or_another_data_set_is_caught() {
        let honest = exchange(MemoryBehaviour::Honest, &small(), 64);
        assert!(honest.accepted, "{honest:?}");
        assert_eq!(honest.checked, 64);
        let junk = exchange(MemoryBehaviour::Junk(0.2), &small(), 64);
        assert!(!junk.accepted);
        assert!(junk
            .rejected
            .iter()
            .all(|r| matches!(r, Rejection::WrongOutput { .. })));
        // A data set for another GPU (or any other binding) gives other outputs everywhere.
        let other = MemoryChallenge {
            to: Addressee {
                gpu_uuid: "GPU-2".parse().unwrap(),
                ..small().to
            },
            ..small()
        };
        let foreign = exchange(MemoryBehaviour::Honest, &other, 16);
        assert_eq!(foreign.wrong(), 16);
    }

    #[test]
    fn a_partly_held_data_set_regenerates_the_rest_to_the_same_walk() {
        use crate::prover::Prover;
        let c = small();
        let whole = CpuDataset::build(&c)
            .unwrap()
            .walk(&[7; 32], MemoryBehaviour::Honest);
        for share in [0.0, 0.5, 0.999] {
            let part = CpuDataset::build_holding(&c, share)
                .unwrap()
                .walk(&[7; 32], MemoryBehaviour::Honest);
            assert_eq!(part.root(), whole.root(), "{share}");
        }
        let other = CpuDataset::build(&c)
            .unwrap()
            .walk(&[8; 32], MemoryBehaviour::Honest);
        assert_ne!(other.root(), whole.root());
    }

    #[test]
    fn shapes_that_could_overflow_or_split_leaves_are_refused() {
        assert!(small().check_shape().is_ok());
        for bad in [
            MemoryChallenge {
                items: 0,
                ..small()
            },
            MemoryChallenge {
                items: MAX_ITEMS + 1,
                ..small()
            },
            MemoryChallenge {
                item_rounds: 0,
                ..small()
            },
            MemoryChallenge {
                steps: 0,
                ..small()
            },
            MemoryChallenge {
                walkers: 250,
                ..small()
            },
            MemoryChallenge { span: 3, ..small() },
            MemoryChallenge { span: 0, ..small() },
            MemoryChallenge {
                walkers_per_leaf: 6,
                walkers: 240,
                ..small()
            },
            MemoryChallenge {
                walkers: u64::MAX - 15,
                ..small()
            },
        ] {
            assert!(bad.check_shape().is_err(), "{bad:?}");
        }
        let largest = MemoryChallenge {
            items: MAX_ITEMS,
            walkers: MAX_WALKERS,
            steps: MAX_STEPS,
            span: MAX_SPAN,
            ..small()
        };
        assert!(largest.check_shape().is_ok());
        assert_eq!(
            largest.reads(),
            MAX_WALKERS * u64::from(MAX_STEPS) * u64::from(MAX_SPAN)
        );
        assert_eq!(largest.dataset_bytes(), MAX_ITEMS * 128);
    }
}
