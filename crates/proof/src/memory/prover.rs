//! The memory proof on the CPU: the whole data set in host memory, every walker walked, the
//! tree built, on every hardware thread. The GPU memory proof's prover for tests and CI's
//! end-to-end runs at small sizes (a GPU's data set is tens of GB), and the proof of RAM's
//! honest prover ([`crate::ram`]); it can also cheat the way the spot checks and the bound
//! must catch.

use super::arx::{self, ITEM_WORDS, OUTPUT_BYTES};
use super::MemoryChallenge;
use crate::prover::{OpenError, Opening, Prover};
use pog_merkle::{Blake3, Tree, TreeHasher};
use std::collections::TryReserveError;

/// How a CPU memory prover behaves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MemoryBehaviour {
    /// Builds the whole data set and walks every walker.
    Honest,
    /// Writes junk for this fraction of the walkers instead of walking them (saves that share
    /// of the reads).
    Junk(f64),
}

/// A data set built on the CPU, waiting for its walk: every item, or (a host claiming more
/// memory than it has) only the first share of them, the rest regenerated when a walker
/// reads one. Built and walked on every hardware thread this process may run on.
pub struct CpuDataset {
    challenge: MemoryChallenge,
    key: [u32; 8],
    /// The items held, `piece_items` to a piece (the last may be short).
    pieces: Vec<Box<[Item]>>,
    /// Items to a piece: [`PIECE_ITEMS`] (tests cut smaller ones).
    piece_items: usize,
}

/// One item of a data set: its words.
type Item = [u32; ITEM_WORDS];

/// Items in one piece of a data set's memory: 64 MiB. A data set of many GiB in one
/// allocation is handed back to the system in one `munmap`, which holds the process's
/// memory map for most of a second (a 6-GiB one 0.18 s on the development VM), and every
/// other thread that maps memory meanwhile (the next GEMM proof's set-up on an H100 host,
/// which then took 1.8 times its bound) waits that long; released in 64-MiB pieces, the same
/// 6 GiB stalled another thread's mapping at most 0.025 s.
const PIECE_ITEMS: usize = (64 << 20) / (ITEM_WORDS * 4);

/// The hardware threads this process may run on.
fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl CpuDataset {
    /// Builds every item (O(items) item generations, spread over the threads), or says why
    /// the memory for it could not be had.
    pub fn build(challenge: &MemoryChallenge) -> Result<CpuDataset, TryReserveError> {
        CpuDataset::build_holding(challenge, 1.0)
    }

    /// Builds and keeps only the first `share` (0 to 1) of the items: what a host with that
    /// share of the memory it claims can hold. The walk regenerates every other item it reads
    /// (an item generation in place of a read: the capacity argument's cheat). The memory is
    /// asked for first, and its refusal returned: a data set larger than the allocator gives
    /// is an error, never an abort.
    pub fn build_holding(
        challenge: &MemoryChallenge,
        share: f64,
    ) -> Result<CpuDataset, TryReserveError> {
        CpuDataset::build_in_pieces(challenge, share, PIECE_ITEMS)
    }

    /// [`CpuDataset::build_holding`] with `piece_items` items to a piece of memory.
    fn build_in_pieces(
        challenge: &MemoryChallenge,
        share: f64,
        piece_items: usize,
    ) -> Result<CpuDataset, TryReserveError> {
        let key = challenge.dataset_key();
        let held = ((challenge.items as f64 * share.clamp(0.0, 1.0)) as u64).min(challenge.items);
        let held = usize::try_from(held).unwrap_or(usize::MAX);
        let piece_items = piece_items.max(1);
        let mut pieces = Vec::with_capacity(held.div_ceil(piece_items));
        for first in (0..held).step_by(piece_items) {
            let mut piece = Vec::new();
            piece.try_reserve_exact((held - first).min(piece_items))?;
            piece.resize((held - first).min(piece_items), [0u32; ITEM_WORDS]);
            pieces.push(piece.into_boxed_slice());
        }
        // Each thread generates one run of consecutive items, cut where pieces end.
        let per = held.div_ceil(threads()).max(1);
        let mut shares: Vec<Vec<(u64, &mut [Item])>> = Vec::new();
        for (p, piece) in pieces.iter_mut().enumerate() {
            let (mut first, mut rest) = (p * piece_items, &mut piece[..]);
            while !rest.is_empty() {
                let thread = first / per;
                let take = ((thread + 1) * per - first).min(rest.len());
                let (now, later) = rest.split_at_mut(take);
                if shares.len() <= thread {
                    shares.resize_with(thread + 1, Vec::new);
                }
                shares[thread].push((first as u64, now));
                first += take;
                rest = later;
            }
        }
        let rounds = challenge.item_rounds;
        std::thread::scope(|s| {
            for share in shares {
                s.spawn(move || {
                    for (first, items) in share {
                        for (i, item) in items.iter_mut().enumerate() {
                            *item = arx::item(&key, first + i as u64, rounds);
                        }
                    }
                });
            }
        });
        Ok(CpuDataset {
            challenge: challenge.clone(),
            key,
            pieces,
            piece_items,
        })
    }

    /// Item `i`: read where it is held, regenerated where it is not.
    fn read(&self, i: u64) -> [u32; ITEM_WORDS] {
        let at = usize::try_from(i).unwrap_or(usize::MAX);
        match self
            .pieces
            .get(at / self.piece_items)
            .and_then(|piece| piece.get(at % self.piece_items))
        {
            Some(item) => *item,
            None => arx::item(&self.key, i, self.challenge.item_rounds),
        }
    }

    /// Walks it with the walk nonce's key (O(walkers · steps), the walkers spread over the
    /// threads).
    pub fn walk(&self, walk_nonce: &[u8; 32], behaviour: MemoryBehaviour) -> CpuMemoryProver {
        let challenge = &self.challenge;
        let walk_key = challenge.walk_key(walk_nonce);
        let width = OUTPUT_BYTES as usize;
        let mut outputs = vec![0u8; challenge.output_bytes() as usize];
        let per = challenge.walkers.div_ceil(threads() as u64).max(1) as usize;
        std::thread::scope(|s| {
            for (n, chunk) in outputs.chunks_mut(per * width).enumerate() {
                let walk_key = &walk_key;
                s.spawn(move || {
                    for (j, out) in chunk.chunks_mut(width).enumerate() {
                        let walker = (n * per + j) as u64;
                        out.copy_from_slice(&self.walker(walk_key, walker, behaviour));
                    }
                });
            }
        });
        let leaves: Vec<Vec<u8>> = outputs
            .chunks(challenge.leaf_bytes())
            .map(<[u8]>::to_vec)
            .collect();
        let tree = Tree::build::<Blake3>(leaves.iter().map(|l| Blake3::leaf(l)).collect());
        CpuMemoryProver { tree, leaves }
    }

    /// One walker's output, or junk where `behaviour` skips it.
    fn walker(
        &self,
        walk_key: &[u32; 8],
        walker: u64,
        behaviour: MemoryBehaviour,
    ) -> [u8; OUTPUT_BYTES as usize] {
        if let MemoryBehaviour::Junk(f) = behaviour {
            let h = pog_matgen::hash(walker, 0xbad);
            if (h as f64 / u64::MAX as f64) < f {
                let mut junk = [0u8; OUTPUT_BYTES as usize];
                junk[..8].copy_from_slice(&pog_matgen::hash(walker, 0xfeed).to_le_bytes());
                junk[8..].copy_from_slice(&pog_matgen::hash(walker, 0xf00d).to_le_bytes());
                return junk;
            }
        }
        let c = &self.challenge;
        arx::walk(walk_key, walker, (c.steps, c.span), c.items, |i| {
            self.read(i)
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Pieces of 7 items over 1000 (and a host holding 60 % of them): the same walk, item for
    /// item, as the data set in one piece, whatever piece and thread an item fell in.
    #[test]
    fn a_data_set_in_pieces_walks_as_one_in_one_piece() {
        let c = crate::memory::tests::small();
        let nonce = [9; 32];
        for share in [1.0, 0.6] {
            let whole = CpuDataset::build_in_pieces(&c, share, usize::MAX).unwrap();
            let cut = CpuDataset::build_in_pieces(&c, share, 7).unwrap();
            assert_eq!(
                cut.pieces.len(),
                (c.items as f64 * share / 7.0).ceil() as usize
            );
            assert!(cut.pieces.iter().all(|p| p.len() <= 7));
            for i in 0..c.items {
                assert_eq!(cut.read(i), whole.read(i), "item {i}");
            }
            let walked = |d: &CpuDataset| d.walk(&nonce, MemoryBehaviour::Honest).root();
            assert_eq!(walked(&cut), walked(&whole));
        }
    }
}
