//! The memory proof on the CPU: the whole data set in host memory, every walker walked, the
//! tree built. For tests and CI's end-to-end runs at small sizes (a real data set is tens of
//! GB); it can also cheat the way the spot checks must catch.

use super::arx::{self, ITEM_WORDS};
use super::MemoryChallenge;
use crate::prover::{OpenError, Opening, Prover};
use pog_merkle::{Blake3, Tree, TreeHasher};

/// How a CPU memory prover behaves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MemoryBehaviour {
    /// Builds the whole data set and walks every walker.
    Honest,
    /// Writes junk for this fraction of the walkers instead of walking them (saves that share
    /// of the reads).
    Junk(f64),
}

/// A data set built on the CPU, waiting for its walk.
pub struct CpuDataset {
    challenge: MemoryChallenge,
    data: Vec<[u32; ITEM_WORDS]>,
}

impl CpuDataset {
    /// Builds every item (O(items): keep sizes small).
    pub fn build(challenge: &MemoryChallenge) -> CpuDataset {
        let key = challenge.dataset_key();
        let data = (0..challenge.items)
            .map(|i| arx::item(&key, i, challenge.item_rounds))
            .collect();
        CpuDataset {
            challenge: challenge.clone(),
            data,
        }
    }

    /// Walks it with the walk nonce's key (O(walkers · steps)).
    pub fn walk(&self, walk_nonce: &[u8; 32], behaviour: MemoryBehaviour) -> CpuMemoryProver {
        let challenge = &self.challenge;
        let walk_key = challenge.walk_key(walk_nonce);
        let mut outputs = Vec::with_capacity(challenge.output_bytes() as usize);
        for walker in 0..challenge.walkers {
            let junk = match behaviour {
                MemoryBehaviour::Honest => false,
                MemoryBehaviour::Junk(f) => {
                    let h = pog_matgen::hash(walker, 0xbad);
                    (h as f64 / u64::MAX as f64) < f
                }
            };
            if junk {
                outputs.extend(pog_matgen::hash(walker, 0xfeed).to_le_bytes());
                outputs.extend(pog_matgen::hash(walker, 0xf00d).to_le_bytes());
            } else {
                outputs.extend(arx::walk(
                    &walk_key,
                    walker,
                    (challenge.steps, challenge.span),
                    challenge.items,
                    |i| self.data[i as usize],
                ));
            }
        }
        let leaves: Vec<Vec<u8>> = outputs
            .chunks(challenge.leaf_bytes())
            .map(<[u8]>::to_vec)
            .collect();
        let tree = Tree::build::<Blake3>(leaves.iter().map(|l| Blake3::leaf(l)).collect());
        CpuMemoryProver { tree, leaves }
    }
}

/// A walked memory challenge, kept whole in memory.
pub struct CpuMemoryProver {
    tree: Tree,
    leaves: Vec<Vec<u8>>,
}

impl Prover for CpuMemoryProver {
    fn root(&self) -> pog_merkle::Hash {
        self.tree.root()
    }

    fn leaf_count(&self) -> u64 {
        self.tree.size()
    }

    fn open(&self, leaves: &[u64]) -> Result<Vec<Opening>, OpenError> {
        crate::prover::open_from(&self.tree, &self.leaves, leaves)
    }
}
