//! The proof of storage: a host shows that it keeps a data set of the size it claims on
//! storage that answers random reads as fast as the class of device it claims, by walking the
//! data set from a fresh nonce while the validator's clock runs. The argument, with measured
//! figures, is in docs/protocol.md ("Proof of storage").
//!
//! 1. **The data set** (built once, kept between rounds, rebuilt when the validator sends a
//!    new [`StorageDataset`]: a fresh nonce, on the network's schedule). It is `items` items of
//!    `chunks_per_item` 4 KiB chunks; item `i` is [`item`] of the data set's key (bound to the
//!    nonce, the host's GPU and both parties' keys, like every challenge) and `i`. The host
//!    writes it to the claimed storage, commits to its chunks with a Merkle root
//!    (`pog_merkle::Blake3`, one leaf a chunk), and keeps the root and the tree.
//! 2. **The audit** (once per data set, untimed). The validator draws chunks from its secret
//!    and the root ([`StorageDataset::audit_draw`]); the host opens them with their paths;
//!    the validator regenerates each chunk's item and compares ([`StorageDataset::check_chunk`]).
//!    A root over chunks that are not the data set's (zeros, cheap junk: what a host keeps
//!    instead of storing) is caught here with probability 1 − (1 − m)^draws for a share m of
//!    false chunks, and a wrong chunk under the signed root is evidence forever.
//! 3. **A round** (timed). The validator sends a [`StorageRound`]'s nonce; the host walks
//!    `steps` steps: step t reads the chunk at [`position`]`(dₜ)` and hashes it into
//!    dₜ₊₁ = [`step`]`(dₜ, t, index, chunk)`, from d₀ = [`StorageRound::start`]. Each read's
//!    position depends on the bytes of the chunk before, so no read can be issued, batched
//!    or prefetched before the one before it is done. The host sends every dₜ (32 bytes a
//!    step: [`StorageWalk`]); the validator's clock stops there and the bound is `steps`
//!    times the claimed device class's read time ([`StoragePlan`]).
//! 4. **Spot checks** (untimed). From its secret and the walk the validator draws steps
//!    ([`StorageRound::draw`]); the host opens each drawn step's chunk with its path; the
//!    validator checks the position, the path against the kept root, and the link dₜ → dₜ₊₁
//!    ([`StorageRound::check_openings`]), and regenerates a few of the opened chunks' items.
//!
//! Why a host without the data set cannot answer in time: a chunk it does not hold it must
//! either **regenerate** — the whole item, whose [`item`] function is a sequential chain of
//! `(passes + 1) × cells` ChaCha permutations with data-dependent references (each cell
//! update waits for the one before, and which earlier cell it mixes in is known only once
//! that one is done), so no number of cores or a GPU shortens it: about 2 ms of a core for
//! a 256 KiB item, against 50–150 µs for a 4 KiB read from an NVMe SSD — or **skip** it,
//! writing a dₜ₊₁ it cannot compute, which breaks the link at step t: each drawn step catches
//! such a walk with probability at least the share of steps it skipped, and the default
//! [`SAMPLES`] draws catch a host missing 10 % of its chunks with probability 1 − 0.9⁶⁴ ≈
//! 0.9988 (a host missing half of them: 1 − 2⁻⁶⁴). Hence:
//! - a host claiming twice its disk holds half the chunks: half the steps regenerate (a walk
//!   several times past the bound) or skip (caught by the spot checks);
//! - a sparse file reads zeros from its holes: a zero chunk is not under the root (caught at
//!   the audit, or at a drawn step), and regenerating the holes is the case above (the agent
//!   also refuses a data set file whose allocated blocks fall short of its size);
//! - a compressed file system gains nothing: every chunk is ChaCha output, incompressible;
//! - answers from a second host pay a network round trip per step on top of its read, and
//!   answers regenerated on the fly pay a whole item per step.
//!
//! The bound is first the claimed class's, then the host's own ([`DeviceClass::host_read_us`]):
//! once a host has walked a round in time, its later rounds may take at most
//! [`HOST_PACE_MULTIPLE`] times its fastest accepted step, never less than the class's floor
//! ([`DeviceClass::floor_us`]) nor more than the class's read. A host that showed fast local
//! reads cannot later answer through a second host a network round trip away (100 µs a step
//! on top of a 45 µs read is past the NVMe floor's 110 µs), and has less time to regenerate
//! chunks it dropped: at the class's bound a host reading at 45 µs could regenerate about 10 %
//! of its chunks in time, at the floor about 3 %. A host slow on purpose from its first round
//! is held to the class's bound, as before, and its slowness is what the score counts.
//!
//! Why an item is generated as a whole, and not cell by cell: were the cells an independent
//! chain (cellⱼ from cellⱼ₋₁ alone), a host could keep every other cell of each chunk and
//! rebuild the rest one permutation each — half the disk, nearly no time. In a pass here each
//! cell is mixed with the cell just updated and with another one picked by that cell's value
//! (Argon2d's data-dependent addressing), so a cell of the last pass needs cells of
//! every pass below it; a host keeping part of an item plus checkpoints must recompute chains
//! whose every step waits for a reference computed after it is known. Its cheapest route is
//! regenerating the item. (This is an argument, not a proof: depth-robust graph labelling
//! gives provable bounds at far higher cost; docs/protocol.md says what an attacker could
//! still try.)
//!
//! The validator's side of the messages — a data set sent, built and audited; a round
//! issued, walked, opened and settled — is [`session`].
//!
//! What a page cache changes: reads served from RAM are faster than the device, never
//! slower, so the cache cannot make a missing chunk present; it only makes an honest host
//! look faster. The agent reads with `O_DIRECT` (or drops the pages it read) so its figure is
//! the device's; a host that keeps the whole data set in RAM holds its size all the same
//! (the proof of RAM, in the same round, claims that memory for itself).

pub mod session;

use crate::challenge::{bind, Addressee};
use crate::memory::arx;
use pog_merkle::{Blake3, Hash, TreeHasher};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Version of the storage proof's encoding, derivations and answer; bumped on any change.
pub const STORAGE_VERSION: u32 = 1;

/// Bytes of one chunk: the unit read at a step, and one Merkle leaf.
pub const CHUNK_BYTES: usize = 4096;
/// Bytes of one cell, the unit the item function mixes (one ChaCha state).
pub const CELL_BYTES: usize = 64;
/// Cells in a chunk.
pub const CELLS_PER_CHUNK: usize = CHUNK_BYTES / CELL_BYTES;

/// Chunks per item at the default shape (an NVMe claim): 256 KiB items, so a chunk a host
/// does not hold costs a 256 KiB item's chain while a step reads 4 KiB, and the build costs
/// one chain per 256 KiB. A slower class's items are longer ([`DeviceClass::chunks_per_item`]).
pub const CHUNKS_PER_ITEM: u32 = 64;
/// Mixing passes over an item after its first fill, at the default shape.
pub const PASSES: u32 = 3;
/// ChaCha double rounds per cell update at the default shape: with [`PASSES`], about 2 ms
/// of one core per 256 KiB item (docs/protocol.md, "Proof of storage": measured figures).
pub const DOUBLE_ROUNDS: u32 = 8;
/// Steps of a round at the default plan: 1024 reads, about 0.1 s on an NVMe SSD.
pub const STEPS: u32 = 1024;
/// Steps opened and checked per round.
pub const SAMPLES: u32 = 64;
/// Items regenerated per round among the opened steps' chunks (each one item's chain on the
/// validator's CPU).
pub const REGENERATED: u32 = 2;
/// Chunks drawn by the audit of a new data set.
pub const AUDIT_SAMPLES: u32 = 256;
/// How long a data set is walked before the validator's schedule sends a new one (a fresh
/// nonce, rebuilt by the host): 30 days.
pub const REBUILD_AFTER_MS: u64 = 30 * 24 * 3600 * 1000;

/// The most chunks a data set may have: 2⁴⁰ (4 PiB).
pub const MAX_CHUNKS: u64 = 1 << 40;
/// The most chunks per item (1 MiB items).
pub const MAX_CHUNKS_PER_ITEM: u32 = 256;
/// The most mixing passes.
pub const MAX_PASSES: u32 = 16;
/// The most double rounds per cell update.
pub const MAX_DOUBLE_ROUNDS: u32 = 64;
/// The most steps of a round.
pub const MAX_STEPS: u32 = 1 << 16;
/// The most steps opened per round.
pub const MAX_SAMPLES: u32 = 1024;

/// Domain tag of an item's first cell (word 14 of its ChaCha block).
const DOMAIN_ITEM: u32 = 0x7374_6f72; // "stor"

/// How a data set is laid out and what one item costs to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageShape {
    /// Items in the data set.
    pub items: u64,
    /// 4 KiB chunks per item.
    pub chunks_per_item: u32,
    /// Mixing passes after the first fill.
    pub passes: u32,
    /// ChaCha double rounds per cell update.
    pub double_rounds: u32,
}

/// A data set shape no host should build, or a size that makes none.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadStorageShape {
    /// A field outside the protocol's limits.
    #[error(
        "a storage data set needs 1 ≤ chunks ≤ {MAX_CHUNKS} in whole items of 1 to \
         {MAX_CHUNKS_PER_ITEM} chunks, 1 ≤ passes ≤ {MAX_PASSES} and 1 ≤ double rounds ≤ \
         {MAX_DOUBLE_ROUNDS}; this one has {items} items of {chunks_per_item} chunks, \
         {passes} passes of {double_rounds} double rounds"
    )]
    Limits {
        /// Items asked for.
        items: u64,
        /// Chunks per item asked for.
        chunks_per_item: u32,
        /// Passes asked for.
        passes: u32,
        /// Double rounds asked for.
        double_rounds: u32,
    },
    /// A size smaller than one item.
    #[error("{bytes} bytes hold no whole item of {item_bytes} bytes")]
    TooSmall {
        /// The size asked for.
        bytes: u64,
        /// Bytes of one item.
        item_bytes: u64,
    },
    /// A size past the largest data set ([`MAX_CHUNKS`] chunks).
    #[error("{bytes} bytes is past the largest data set ({} bytes)", MAX_CHUNKS * CHUNK_BYTES as u64)]
    TooLarge {
        /// The size asked for.
        bytes: u64,
    },
}

impl StorageShape {
    /// The default shape holding as many whole items as fit in `bytes`.
    pub fn for_bytes(bytes: u64) -> Result<StorageShape, BadStorageShape> {
        StorageShape {
            items: 1,
            chunks_per_item: CHUNKS_PER_ITEM,
            passes: PASSES,
            double_rounds: DOUBLE_ROUNDS,
        }
        .resized(bytes)
    }

    /// This shape's item function with as many whole items as fit in `bytes`.
    pub fn resized(self, bytes: u64) -> Result<StorageShape, BadStorageShape> {
        let item_bytes = self.item_bytes() as u64;
        if bytes / CHUNK_BYTES as u64 > MAX_CHUNKS {
            return Err(BadStorageShape::TooLarge { bytes });
        }
        let items = bytes / item_bytes.max(1);
        if items == 0 {
            return Err(BadStorageShape::TooSmall { bytes, item_bytes });
        }
        let shape = StorageShape { items, ..self };
        shape.validate()?;
        Ok(shape)
    }

    /// Checks the shape against the protocol's limits (a data set's size always fits a u64).
    pub fn validate(&self) -> Result<(), BadStorageShape> {
        let fits = (1..=MAX_CHUNKS_PER_ITEM).contains(&self.chunks_per_item)
            && (1..=MAX_PASSES).contains(&self.passes)
            && (1..=MAX_DOUBLE_ROUNDS).contains(&self.double_rounds)
            && self.items >= 1
            && self
                .items
                .checked_mul(u64::from(self.chunks_per_item))
                .is_some_and(|c| c <= MAX_CHUNKS);
        if fits {
            Ok(())
        } else {
            Err(BadStorageShape::Limits {
                items: self.items,
                chunks_per_item: self.chunks_per_item,
                passes: self.passes,
                double_rounds: self.double_rounds,
            })
        }
    }

    /// Chunks in the data set (leaves of its tree). Saturates on a shape that fails
    /// [`StorageShape::validate`].
    pub fn chunks(&self) -> u64 {
        self.items.saturating_mul(u64::from(self.chunks_per_item))
    }

    /// Bytes of the data set.
    pub fn bytes(&self) -> u64 {
        self.chunks().saturating_mul(CHUNK_BYTES as u64)
    }

    /// Bytes of one item.
    pub fn item_bytes(&self) -> usize {
        self.chunks_per_item as usize * CHUNK_BYTES
    }

    /// Cells of one item.
    pub fn cells_per_item(&self) -> usize {
        self.chunks_per_item as usize * CELLS_PER_CHUNK
    }

    /// Cell updates to generate one item: a sequential chain of this many permutations of
    /// `double_rounds` double rounds each.
    pub fn cell_updates_per_item(&self) -> u64 {
        (u64::from(self.passes) + 1) * self.cells_per_item() as u64
    }

    /// The item holding chunk `chunk`, and the chunk's place in it.
    pub fn item_of(&self, chunk: u64) -> (u64, usize) {
        let per = u64::from(self.chunks_per_item.max(1));
        (chunk / per, (chunk % per) as usize)
    }
}

/// What the validator asks a host to build and keep: a data set of `shape` under a fresh
/// nonce. A new one (a new nonce) is the schedule's rebuild.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StorageDataset {
    /// [`STORAGE_VERSION`]; a data set of another version is refused.
    pub version: u32,
    /// Fresh randomness from the validator, lowercase hex in JSON.
    #[serde(with = "hex::serde")]
    pub nonce: [u8; 32],
    /// Whom it is for and from, bound into the key. Flattened.
    #[serde(flatten)]
    pub to: Addressee,
    /// The data set's layout and item cost.
    pub shape: StorageShape,
}

impl StorageDataset {
    /// The data set of `shape` for `to`, from `nonce`.
    pub fn new(nonce: [u8; 32], to: Addressee, shape: StorageShape) -> StorageDataset {
        StorageDataset {
            version: STORAGE_VERSION,
            nonce,
            to,
            shape,
        }
    }

    /// Checks the version and the shape before anyone builds anything.
    pub fn validate(&self) -> Result<(), StorageError> {
        if self.version != STORAGE_VERSION {
            return Err(StorageError::Version {
                got: self.version,
                expected: STORAGE_VERSION,
            });
        }
        self.shape.validate().map_err(StorageError::Shape)
    }

    /// The data set's key: SHA-256("pog-storage v1" ‖ nonce ‖ whom it is for ‖ shape), as
    /// eight little-endian words.
    pub fn key(&self) -> [u32; 8] {
        let mut h = Sha256::new();
        h.update(b"pog-storage v1");
        bind(&mut h, &self.nonce, &self.to);
        h.update(self.shape.items.to_le_bytes());
        h.update(self.shape.chunks_per_item.to_le_bytes());
        h.update(self.shape.passes.to_le_bytes());
        h.update(self.shape.double_rounds.to_le_bytes());
        arx::key_words(&h.finalize().into())
    }

    /// Chunk `chunk` of the data set, regenerated (its whole item is).
    pub fn chunk(&self, chunk: u64) -> Vec<u8> {
        let (item_index, at) = self.shape.item_of(chunk);
        let mut bytes = item(&self.key(), &self.shape, item_index);
        bytes.truncate((at + 1) * CHUNK_BYTES);
        bytes.drain(..at * CHUNK_BYTES);
        bytes
    }

    /// `count` chunks for the audit of a data set committed to `root`, from the validator's
    /// secret: uniform over the chunks.
    pub fn audit_draw(&self, root: &Hash, secret: &[u8; 32], count: u32) -> Vec<u64> {
        (0..count)
            .map(|i| {
                let mut h = Sha256::new();
                h.update(b"pog-storage audit v1");
                h.update(secret);
                h.update(root);
                h.update(i.to_le_bytes());
                position(&h.finalize().into(), self.shape.chunks())
            })
            .collect()
    }

    /// Checks one opened chunk of the data set committed to `root`: its length, its path, and
    /// its bytes against the regenerated item.
    pub fn check_chunk(&self, root: &Hash, opening: &ChunkOpening) -> Result<(), StorageError> {
        opening.prove(&self.shape, root, None)?;
        if opening.bytes != self.chunk(opening.index) {
            return Err(StorageError::WrongChunk {
                chunk: opening.index,
            });
        }
        Ok(())
    }
}

/// One cell update: the ChaCha permutation of `x` (`rounds` double rounds) with its input
/// added back, so the update is not invertible.
#[inline]
fn mix(x: [u32; 16], rounds: u32) -> [u32; 16] {
    let mut s = x;
    arx::double_rounds(&mut s, rounds);
    for (w, i) in s.iter_mut().zip(x) {
        *w = w.wrapping_add(i);
    }
    s
}

/// Item `index` of the data set under `key`, `shape.item_bytes()` bytes.
///
/// The first pass fills the cells as a chain: cell 0 is a ChaCha block of the key and the
/// index, cell j the update of cell j − 1 (with j folded in). Each of the `passes` passes
/// after it updates every cell in order as cellⱼ ← mix(cellⱼ₋₁ ⊕ cellᵣ) ⊕ cellⱼ, where
/// cellⱼ₋₁ is the cell just updated (for j = 0 the last cell of the pass before) and r is
/// picked by cellⱼ₋₁'s first word: which cell is mixed in is known only once the cell before
/// is done. The item is every cell of the last pass, little-endian.
pub fn item(key: &[u32; 8], shape: &StorageShape, index: u64) -> Vec<u8> {
    let mut cells = first_pass(key, shape, index);
    mix_passes(&mut cells, shape);
    cells
        .iter()
        .flat_map(|cell| cell.iter().flat_map(|w| w.to_le_bytes()))
        .collect()
}

/// An item's cells after the first fill: a chain from a ChaCha block of the key and index.
fn first_pass(key: &[u32; 8], shape: &StorageShape, index: u64) -> Vec<[u32; 16]> {
    let mut c = arx::chacha_block(key, [index as u32, (index >> 32) as u32, DOMAIN_ITEM, 0], 2);
    (0..shape.cells_per_item())
        .map(|j| {
            if j > 0 {
                c[15] ^= j as u32;
                c = mix(c, shape.double_rounds);
            }
            c
        })
        .collect()
}

/// The `passes` data-dependent passes over an item's cells, in place.
fn mix_passes(cells: &mut [[u32; 16]], shape: &StorageShape) {
    let n = cells.len();
    for _ in 0..shape.passes {
        for j in 0..n {
            let prev = cells[(j + n - 1) % n];
            let r = ((u64::from(prev[0]) * n as u64) >> 32) as usize;
            let mut x = prev;
            for (w, v) in x.iter_mut().zip(cells[r]) {
                *w ^= v;
            }
            let updated = mix(x, shape.double_rounds);
            for (w, v) in cells[j].iter_mut().zip(updated) {
                *w ^= v;
            }
        }
    }
}

/// The chunk a walk reads from digest `d`: a multiply-high of its first 8 bytes onto
/// `chunks` (uniform to within 2⁻⁶⁴·chunks).
pub fn position(d: &Hash, chunks: u64) -> u64 {
    let x = u64::from_le_bytes(d[..8].try_into().expect("32-byte digest"));
    ((u128::from(x) * u128::from(chunks)) >> 64) as u64
}

/// One step of a walk: dₜ₊₁ = BLAKE3 keyed by dₜ over (t ‖ chunk index ‖ chunk bytes).
pub fn step(d: &Hash, t: u32, index: u64, chunk: &[u8]) -> Hash {
    let mut h = blake3::Hasher::new_keyed(d);
    h.update(&t.to_le_bytes());
    h.update(&index.to_le_bytes());
    h.update(chunk);
    *h.finalize().as_bytes()
}

/// A walk's round: the data set (its root kept by the validator since the audit), a fresh
/// nonce, and how many steps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StorageRound {
    /// The data set walked.
    pub dataset: StorageDataset,
    /// Its committed root, lowercase hex in JSON.
    #[serde(with = "hex::serde")]
    pub root: Hash,
    /// The round's nonce, lowercase hex in JSON.
    #[serde(with = "hex::serde")]
    pub nonce: [u8; 32],
    /// Steps to walk.
    pub steps: u32,
}

/// What the host sends when its walk is done (the validator's clock stops here): every
/// digest d₁ … d_steps, end to end as one base64 string in JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StorageWalk {
    /// The digests after each step, in order.
    #[serde(with = "hashes")]
    pub digests: Vec<Hash>,
}

/// One opened chunk: its index, bytes and inclusion path in the data set's tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkOpening {
    /// The chunk's index (its leaf).
    pub index: u64,
    /// Its bytes, base64 in JSON.
    #[serde(with = "b64")]
    pub bytes: Vec<u8>,
    /// Its inclusion path, bottom-up (RFC 6962's PATH), one base64 string in JSON.
    #[serde(with = "hashes")]
    pub path: Vec<Hash>,
}

impl ChunkOpening {
    /// Checks the opening's length, its index against `expected` (when a walk fixes it) and
    /// its path against `root`.
    fn prove(
        &self,
        shape: &StorageShape,
        root: &Hash,
        expected: Option<(u32, u64)>,
    ) -> Result<(), StorageError> {
        if let Some((step, index)) = expected {
            if self.index != index {
                return Err(StorageError::WrongPosition {
                    step,
                    expected: index,
                    got: self.index,
                });
            }
        }
        if self.bytes.len() != CHUNK_BYTES {
            return Err(StorageError::BadChunkLength {
                chunk: self.index,
                got: self.bytes.len(),
            });
        }
        let leaf = Blake3::leaf(&self.bytes);
        let chunks = shape.chunks();
        if !pog_merkle::verify_inclusion_in::<Blake3>(&leaf, self.index, chunks, &self.path, root) {
            return Err(StorageError::NotInTree { chunk: self.index });
        }
        Ok(())
    }
}

/// The validator's answer to a walk: which steps' chunks to open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StorageOpenRequest {
    /// Steps (0-based) to open, strictly increasing.
    pub steps: Vec<u32>,
}

/// The host's openings: one chunk per step asked, in the request's order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StorageOpenings {
    /// The chunks read at the steps asked.
    pub chunks: Vec<ChunkOpening>,
}

/// Why a data set, a walk or its openings are refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StorageError {
    /// The challenge is of another version.
    #[error("storage proof version {got}, this build speaks {expected}")]
    Version {
        /// The version received.
        got: u32,
        /// The version this build speaks.
        expected: u32,
    },
    /// The data set's shape is refused.
    #[error(transparent)]
    Shape(BadStorageShape),
    /// The round asks for a number of steps outside 1 to [`MAX_STEPS`].
    #[error("a round walks 1 to {MAX_STEPS} steps; this one asks for {0}")]
    Steps(u32),
    /// The walk has another number of digests than the round has steps.
    #[error("the walk has {got} digests, the round {expected} steps")]
    WrongStepCount {
        /// Steps of the round.
        expected: u32,
        /// Digests sent.
        got: usize,
    },
    /// The open request asks for steps out of order, repeated or past the walk.
    #[error("the open request's steps must rise strictly below {steps}")]
    BadRequest {
        /// Steps of the round.
        steps: u32,
    },
    /// The openings are not one per step asked.
    #[error("{got} chunks opened for {expected} steps asked")]
    WrongOpeningCount {
        /// Steps asked.
        expected: usize,
        /// Chunks opened.
        got: usize,
    },
    /// A chunk opened for a step is not the one the digest before it points to.
    #[error("step {step} reads chunk {expected}; chunk {got} was opened")]
    WrongPosition {
        /// The step.
        step: u32,
        /// The chunk its digest points to.
        expected: u64,
        /// The chunk opened.
        got: u64,
    },
    /// The audit's openings hold another chunk than the one asked at that place.
    #[error("chunk {got} was opened where chunk {expected} was asked")]
    NotAsked {
        /// The chunk asked.
        expected: u64,
        /// The chunk opened.
        got: u64,
    },
    /// An opened chunk is not 4 KiB.
    #[error("chunk {chunk} has {got} bytes, a chunk {CHUNK_BYTES}")]
    BadChunkLength {
        /// The chunk.
        chunk: u64,
        /// Its bytes.
        got: usize,
    },
    /// An opened chunk's path does not lead to the data set's root.
    #[error("chunk {chunk} is not in the committed data set")]
    NotInTree {
        /// The chunk.
        chunk: u64,
    },
    /// A step's digest is not the hash of the digest before and its chunk: the host did not
    /// read that chunk when it walked.
    #[error("step {step}'s digest does not follow from the chunk it read")]
    BrokenLink {
        /// The step.
        step: u32,
    },
    /// An opened chunk is under the root but is not the data set's chunk: the root commits
    /// to something else than the data set.
    #[error("chunk {chunk} differs from the data set's (regenerated)")]
    WrongChunk {
        /// The chunk.
        chunk: u64,
    },
}

impl StorageRound {
    /// Checks the data set and the number of steps.
    pub fn validate(&self) -> Result<(), StorageError> {
        self.dataset.validate()?;
        if !(1..=MAX_STEPS).contains(&self.steps) {
            return Err(StorageError::Steps(self.steps));
        }
        Ok(())
    }

    /// d₀: SHA-256("pog-storage walk v1" ‖ data set key ‖ root ‖ nonce ‖ steps).
    pub fn start(&self) -> Hash {
        let mut h = Sha256::new();
        h.update(b"pog-storage walk v1");
        for w in self.dataset.key() {
            h.update(w.to_le_bytes());
        }
        h.update(self.root);
        h.update(self.nonce);
        h.update(self.steps.to_le_bytes());
        h.finalize().into()
    }

    /// Walks the round: `read(index)` returns chunk `index` (from storage on the host; the
    /// attack tests' readers regenerate or skip). The digests, or `read`'s error.
    pub fn walk<E>(
        &self,
        mut read: impl FnMut(u64) -> Result<Vec<u8>, E>,
    ) -> Result<StorageWalk, E> {
        let chunks = self.dataset.shape.chunks();
        let mut d = self.start();
        let mut digests = Vec::with_capacity(self.steps as usize);
        for t in 0..self.steps {
            let index = position(&d, chunks);
            let chunk = read(index)?;
            d = step(&d, t, index, &chunk);
            digests.push(d);
        }
        Ok(StorageWalk { digests })
    }

    /// The digest before step `t` (d₀ for the first).
    fn before(&self, walk: &StorageWalk, t: u32) -> Hash {
        match t {
            0 => self.start(),
            t => walk.digests[t as usize - 1],
        }
    }

    /// The chunk step `t` of `walk` reads.
    pub fn chunk_at(&self, walk: &StorageWalk, t: u32) -> Option<u64> {
        if t >= self.steps || walk.digests.len() != self.steps as usize {
            return None;
        }
        Some(position(&self.before(walk, t), self.dataset.shape.chunks()))
    }

    /// Checks the walk's length, then draws `count` steps to open (strictly increasing, at
    /// most the round's steps) from the validator's secret and every digest of the walk.
    pub fn draw(
        &self,
        walk: &StorageWalk,
        secret: &[u8; 32],
        count: u32,
    ) -> Result<StorageOpenRequest, StorageError> {
        if walk.digests.len() != self.steps as usize {
            return Err(StorageError::WrongStepCount {
                expected: self.steps,
                got: walk.digests.len(),
            });
        }
        let mut seed = Sha256::new();
        seed.update(b"pog-storage draw v1");
        seed.update(secret);
        for d in &walk.digests {
            seed.update(d);
        }
        let seed: Hash = seed.finalize().into();
        let mut steps: Vec<u32> = (0..count.min(self.steps))
            .map(|i| {
                let mut h = Sha256::new();
                h.update(seed);
                h.update(i.to_le_bytes());
                position(&h.finalize().into(), u64::from(self.steps)) as u32
            })
            .collect();
        steps.sort_unstable();
        steps.dedup();
        Ok(StorageOpenRequest { steps })
    }

    /// Checks the openings of `request`'s steps: one a step, each the chunk its step's digest
    /// points to, under the root, and linking the digest before it to the digest after. Then
    /// regenerates the items of up to `regenerate` of them (picked from the secret) and
    /// compares. Returns how many items were regenerated.
    pub fn check_openings(
        &self,
        walk: &StorageWalk,
        request: &StorageOpenRequest,
        openings: &StorageOpenings,
        (secret, regenerate): (&[u8; 32], u32),
    ) -> Result<u32, StorageError> {
        if walk.digests.len() != self.steps as usize {
            return Err(StorageError::WrongStepCount {
                expected: self.steps,
                got: walk.digests.len(),
            });
        }
        let rising = request.steps.windows(2).all(|w| w[0] < w[1]);
        if !rising || request.steps.last().is_some_and(|&t| t >= self.steps) {
            return Err(StorageError::BadRequest { steps: self.steps });
        }
        if openings.chunks.len() != request.steps.len() {
            return Err(StorageError::WrongOpeningCount {
                expected: request.steps.len(),
                got: openings.chunks.len(),
            });
        }
        let chunks = self.dataset.shape.chunks();
        for (&t, opening) in request.steps.iter().zip(&openings.chunks) {
            let before = self.before(walk, t);
            let index = position(&before, chunks);
            opening.prove(&self.dataset.shape, &self.root, Some((t, index)))?;
            if step(&before, t, index, &opening.bytes) != walk.digests[t as usize] {
                return Err(StorageError::BrokenLink { step: t });
            }
        }
        // Distinct openings, picked from the secret (a partial Fisher–Yates shuffle).
        let n = openings.chunks.len();
        let mut order: Vec<usize> = (0..n).collect();
        let mut regenerated = 0;
        for i in 0..(regenerate as usize).min(n) {
            let mut h = Sha256::new();
            h.update(b"pog-storage regenerate v1");
            h.update(secret);
            h.update((i as u64).to_le_bytes());
            let j = i + position(&h.finalize().into(), (n - i) as u64) as usize;
            order.swap(i, j);
            let pick = &openings.chunks[order[i]];
            if pick.bytes != self.dataset.chunk(pick.index) {
                return Err(StorageError::WrongChunk { chunk: pick.index });
            }
            regenerated += 1;
        }
        Ok(regenerated)
    }
}

/// How many times its own fastest accepted step (the validator's clock) a host's later rounds
/// may take a step, before the time tolerance: honest walks on the GPU hosts' disks varied by
/// 1.22× between rounds (41–50 ms for 1024 steps), a busy disk more; a second host adds a
/// network round trip (≥ 100 µs in one data centre) to every step of 35–50 µs.
pub const HOST_PACE_MULTIPLE: f64 = 2.0;

/// The tightest per-step bound a host is held to, as a share of its class's read: 100 µs a
/// step for NVMe (the GPU hosts' disks read at 34–40 µs median, 62–93 µs at the 99th
/// percentile), 400 µs for SSD. It keeps an honest host whose fastest round was served from a
/// cache, or an unusually quiet disk, from being held to a bound its device cannot keep.
pub const HOST_FLOOR_SHARE: f64 = 0.4;

/// The time bound of a round: a read bound for one dependent 4 KiB read (with the step's
/// hashing), times the steps. The read bound is the claimed class's until the host has walked
/// a round in time, then its own ([`DeviceClass::host_read_us`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StoragePlan {
    /// The slowest dependent read allowed, µs: the claimed class's, or the host's own
    /// ([`DeviceClass::host_read_us`]).
    pub read_us: f64,
    /// Steps a round walks.
    pub steps: u32,
    /// Steps opened per round.
    pub samples: u32,
}

/// Device classes a host may claim, each with the slowest dependent 4 KiB read (queue depth
/// one, hash included) it is allowed, µs. The figures a class must beat are in
/// docs/protocol.md ("Proof of storage").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceClass {
    /// A local NVMe SSD: 80–120 µs typical at QD 1; allowed 250 µs.
    Nvme,
    /// A SATA/SAS SSD or a cloud block volume: allowed 1000 µs.
    Ssd,
}

impl std::fmt::Display for DeviceClass {
    /// Its name on the wire and in flags: `nvme`, `ssd`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DeviceClass::Nvme => "nvme",
            DeviceClass::Ssd => "ssd",
        })
    }
}

impl DeviceClass {
    /// The slowest dependent read the class is allowed, µs.
    pub fn read_us(self) -> f64 {
        match self {
            DeviceClass::Nvme => 250.0,
            DeviceClass::Ssd => 1000.0,
        }
    }

    /// The tightest per-step bound a host of this class is held to, however fast its reads
    /// were, µs ([`HOST_FLOOR_SHARE`] of the class's read).
    pub fn floor_us(self) -> f64 {
        self.read_us() * HOST_FLOOR_SHARE
    }

    /// The per-step bound of a host of this class whose fastest accepted round walked at
    /// `best_step_us` a step on the validator's clock (`None`: no round accepted yet):
    /// [`HOST_PACE_MULTIPLE`] times that, never below [`DeviceClass::floor_us`] nor above
    /// [`DeviceClass::read_us`], µs.
    pub fn host_read_us(self, best_step_us: Option<f64>) -> f64 {
        best_step_us
            .filter(|us| us.is_finite() && *us > 0.0)
            .map_or(self.read_us(), |us| {
                (us * HOST_PACE_MULTIPLE).clamp(self.floor_us(), self.read_us())
            })
    }

    /// Chunks per item of a data set for this class: an item takes several times the class's
    /// read to generate (about 2 ms at 64 chunks, 8 ms at 256, on one core of the dev VM).
    pub fn chunks_per_item(self) -> u32 {
        match self {
            DeviceClass::Nvme => CHUNKS_PER_ITEM,
            DeviceClass::Ssd => 4 * CHUNKS_PER_ITEM,
        }
    }

    /// The default shape for this class holding as many whole items as fit in `bytes`.
    pub fn shape(self, bytes: u64) -> Result<StorageShape, BadStorageShape> {
        StorageShape {
            items: 1,
            chunks_per_item: self.chunks_per_item(),
            passes: PASSES,
            double_rounds: DOUBLE_ROUNDS,
        }
        .resized(bytes)
    }
}

/// What a host claims of its storage (a registration's `host.storage`, `pog agent
/// --storage-size --storage-class`): the bytes of its data set and the device class its
/// reads are timed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageClaim {
    /// Bytes of the data set (whole items of the class's shape).
    pub bytes: u64,
    /// The device class claimed.
    pub class: DeviceClass,
}

impl StorageClaim {
    /// The claim for `bytes` of `class`, rounded down to whole items, or why none fits.
    pub fn new(bytes: u64, class: DeviceClass) -> Result<StorageClaim, BadStorageShape> {
        let shape = class.shape(bytes)?;
        Ok(StorageClaim {
            bytes: shape.bytes(),
            class,
        })
    }

    /// The data set's shape for this claim: whole items of the class's shape in its bytes.
    pub fn shape(&self) -> Result<StorageShape, BadStorageShape> {
        self.class.shape(self.bytes)
    }
}

impl StoragePlan {
    /// The default plan for `class`.
    pub fn for_class(class: DeviceClass) -> StoragePlan {
        StoragePlan {
            read_us: class.read_us(),
            steps: STEPS,
            samples: SAMPLES,
        }
    }

    /// The default plan for a host of `class` whose fastest accepted round walked at
    /// `best_step_us` a step (`None`: the class's bound).
    pub fn for_host(class: DeviceClass, best_step_us: Option<f64>) -> StoragePlan {
        StoragePlan {
            read_us: class.host_read_us(best_step_us),
            ..StoragePlan::for_class(class)
        }
    }

    /// The bound on the walk, ms.
    pub fn expected_ms(&self) -> f64 {
        f64::from(self.steps) * self.read_us / 1000.0
    }

    /// How many times the class's read one item's generation takes at `item_us` (the
    /// validator's measured time to generate one item): a plan is sound only where this is
    /// well above 1 + [`crate::timing::TIME_TOLERANCE`] over the share of chunks a cheater
    /// drops (docs/protocol.md).
    pub fn regeneration_margin(&self, item_us: f64) -> f64 {
        item_us / self.read_us
    }
}

/// Serde for bytes as one standard base64 string (padded), as the GEMM proof's openings
/// travel (`wire::Openings`): a third larger than the bytes, against hex's double.
mod b64 {
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(serde::de::Error::custom)
    }
}

/// Serde for a list of 32-byte hashes as one base64 string of the hashes end to end; a
/// length that is not a whole number of hashes is refused.
mod hashes {
    use pog_merkle::Hash;
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(hashes: &[Hash], s: S) -> Result<S::Ok, S::Error> {
        super::b64::serialize(hashes.concat().as_slice(), s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Hash>, D::Error> {
        let bytes = super::b64::deserialize(d)?;
        if bytes.len() % 32 != 0 {
            return Err(serde::de::Error::custom(format!(
                "{} bytes is not a whole number of 32-byte hashes",
                bytes.len()
            )));
        }
        Ok(bytes
            .chunks_exact(32)
            .map(|h| h.try_into().expect("32 bytes"))
            .collect())
    }
}

/// A data set held in memory with its tree: the pure model of the host for tests and small
/// sets (the agent's is on disk, `pog_local::storage`).
pub struct MemoryDataset {
    /// The data set.
    pub dataset: StorageDataset,
    chunks: Vec<Vec<u8>>,
    tree: pog_merkle::Tree,
}

impl MemoryDataset {
    /// Generates every item of `dataset` and its tree.
    pub fn build(dataset: &StorageDataset) -> MemoryDataset {
        let key = dataset.key();
        let chunks: Vec<Vec<u8>> = (0..dataset.shape.items)
            .flat_map(|i| {
                item(&key, &dataset.shape, i)
                    .chunks(CHUNK_BYTES)
                    .map(<[u8]>::to_vec)
                    .collect::<Vec<_>>()
            })
            .collect();
        MemoryDataset::from_chunks(dataset, chunks)
    }

    /// A data set whose chunks are `chunks` (the tests' cheats commit to other chunks).
    pub fn from_chunks(dataset: &StorageDataset, chunks: Vec<Vec<u8>>) -> MemoryDataset {
        let tree =
            pog_merkle::Tree::build::<Blake3>(chunks.iter().map(|c| Blake3::leaf(c)).collect());
        MemoryDataset {
            dataset: dataset.clone(),
            chunks,
            tree,
        }
    }

    /// The committed root.
    pub fn root(&self) -> Hash {
        self.tree.root()
    }

    /// Chunk `index`, if there is one.
    pub fn chunk(&self, index: u64) -> Option<&[u8]> {
        self.chunks
            .get(usize::try_from(index).ok()?)
            .map(Vec::as_slice)
    }

    /// Opens chunk `index`; `None` past the data set.
    pub fn open(&self, index: u64) -> Option<ChunkOpening> {
        Some(ChunkOpening {
            index,
            bytes: self.chunk(index)?.to_vec(),
            path: self.tree.inclusion_proof(index)?,
        })
    }

    /// Opens the chunks of `request`'s steps of `walk` in `round`.
    pub fn open_steps(
        &self,
        round: &StorageRound,
        walk: &StorageWalk,
        request: &StorageOpenRequest,
    ) -> Option<StorageOpenings> {
        let chunks = request
            .steps
            .iter()
            .map(|&t| self.open(round.chunk_at(walk, t)?))
            .collect::<Option<Vec<_>>>()?;
        Some(StorageOpenings { chunks })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_is_whole_items_and_a_class_is_named_as_on_the_wire() {
        for class in [DeviceClass::Nvme, DeviceClass::Ssd] {
            let wire = serde_json::to_value(class).unwrap();
            assert_eq!(wire.as_str(), Some(class.to_string().as_str()));
            let claim = StorageClaim::new((8 << 20) + 5, class).unwrap();
            assert_eq!(claim.bytes, 8 << 20);
            assert_eq!(claim.shape().unwrap().bytes(), claim.bytes);
        }
        assert!(StorageClaim::new(4096, DeviceClass::Nvme).is_err());
    }
    use pog_signed::PublicKey;
    use proptest::prelude::*;
    use std::convert::Infallible;

    fn to() -> Addressee {
        Addressee {
            gpu_uuid: "GPU-host".parse().unwrap(),
            gpu_bus_id: "00000000:00:06.0".into(),
            agent_key: PublicKey::from([0xaa; 32]),
            validator_key: PublicKey::from([0xbb; 32]),
        }
    }

    /// A small shape: 4 KiB items (one chunk), one pass of one double round — cheap to build
    /// in a debug test.
    fn small(items: u64) -> StorageShape {
        StorageShape {
            items,
            chunks_per_item: 1,
            passes: 1,
            double_rounds: 1,
        }
    }

    fn round(set: &MemoryDataset, steps: u32) -> StorageRound {
        StorageRound {
            dataset: set.dataset.clone(),
            root: set.root(),
            nonce: [4; 32],
            steps,
        }
    }

    /// Walks honestly, draws, opens and checks: the outcome.
    fn prove(
        set: &MemoryDataset,
        walk: &StorageWalk,
        r: &StorageRound,
    ) -> Result<u32, StorageError> {
        let secret = [9; 32];
        let request = r.draw(walk, &secret, SAMPLES)?;
        let openings = set.open_steps(r, walk, &request).expect("in range");
        r.check_openings(walk, &request, &openings, (&secret, REGENERATED))
    }

    #[test]
    fn an_honest_walk_passes() {
        let set = MemoryDataset::build(&StorageDataset::new([1; 32], to(), small(64)));
        let r = round(&set, 200);
        let walk = r
            .walk(|i| Ok::<_, Infallible>(set.chunk(i).unwrap().to_vec()))
            .unwrap();
        assert_eq!(prove(&set, &walk, &r), Ok(REGENERATED));
        // The audit of the root passes too.
        for index in set.dataset.audit_draw(&set.root(), &[5; 32], 16) {
            assert_eq!(
                set.dataset
                    .check_chunk(&set.root(), &set.open(index).unwrap()),
                Ok(())
            );
        }
    }

    #[test]
    fn an_item_is_its_regenerated_chunks_and_the_key_binds_everything() {
        let shape = StorageShape {
            items: 4,
            chunks_per_item: 2,
            passes: 2,
            double_rounds: 2,
        };
        let d = StorageDataset::new([1; 32], to(), shape);
        let set = MemoryDataset::build(&d);
        for c in 0..shape.chunks() {
            assert_eq!(set.chunk(c).unwrap(), d.chunk(c).as_slice());
        }
        let mut other = d.clone();
        other.to.agent_key = PublicKey::from([0xcc; 32]);
        assert_ne!(other.key(), d.key());
        let mut other = d.clone();
        other.nonce[0] ^= 1;
        assert_ne!(other.chunk(0), d.chunk(0));
        let mut other = d.clone();
        other.shape.passes = 3;
        assert_ne!(other.key(), d.key());
    }

    /// Bits of entropy per byte of `bytes`' histogram.
    fn entropy(bytes: &[u8]) -> f64 {
        let mut counts = [0u64; 256];
        for b in bytes {
            counts[*b as usize] += 1;
        }
        let n = bytes.len() as f64;
        counts
            .iter()
            .filter(|&&c| c > 0)
            .map(|&c| {
                let p = c as f64 / n;
                -p * p.log2()
            })
            .sum()
    }

    #[test]
    fn items_are_incompressible_and_unlike_each_other() {
        let shape = StorageShape {
            chunks_per_item: 16,
            ..StorageShape::for_bytes(1 << 20).unwrap()
        };
        let d = StorageDataset::new([2; 32], to(), shape);
        let a = item(&d.key(), &d.shape, 0);
        let b = item(&d.key(), &d.shape, 1);
        assert_eq!(a.len(), 65536);
        // A compressor cannot store 64 KiB of bytes at 7.99 bits each in much less.
        assert!(entropy(&a) > 7.99, "{}", entropy(&a));
        // No two chunks repeat and no cell is zero (a compressed file system's runs).
        let equal = a.iter().zip(&b).filter(|(x, y)| x == y).count();
        assert!(equal < 65536 / 128, "{equal} equal bytes of 65536");
        let chunks: std::collections::HashSet<&[u8]> = a.chunks(CHUNK_BYTES).collect();
        assert_eq!(chunks.len(), 16);
        assert!(a.chunks(CELL_BYTES).all(|c| c.iter().any(|&x| x != 0)));
    }

    #[test]
    fn every_chunk_of_an_item_changes_with_any_cell_of_the_first_pass() {
        // The item is generated as a whole: one bit flipped in any cell of the first fill (a
        // host that kept checkpoints of it and got one wrong, or skipped computing it) and
        // every cell of every chunk of the last pass changes.
        let shape = StorageShape {
            items: 1,
            chunks_per_item: 4,
            passes: 2,
            double_rounds: 1,
        };
        let first = first_pass(&[3; 8], &shape, 7);
        let mut whole = first.clone();
        mix_passes(&mut whole, &shape);
        for flipped in [0, 100, first.len() - 1] {
            let mut other = first.clone();
            other[flipped][5] ^= 1;
            mix_passes(&mut other, &shape);
            let differ = whole.iter().zip(&other).filter(|(a, b)| a != b).count();
            assert_eq!(differ, whole.len(), "flipped cell {flipped}");
        }
    }

    /// A host holding only the chunks `kept` says it holds: the rest it `regenerates`
    /// (counted) or skips, writing a digest it cannot compute.
    fn cheat(
        set: &MemoryDataset,
        r: &StorageRound,
        kept: impl Fn(u64) -> bool,
        regenerate: bool,
    ) -> (StorageWalk, u32) {
        let mut regenerated = 0;
        let chunks = set.dataset.shape.chunks();
        let mut d = r.start();
        let mut digests = Vec::new();
        for t in 0..r.steps {
            let index = position(&d, chunks);
            d = if kept(index) {
                step(&d, t, index, set.chunk(index).unwrap())
            } else if regenerate {
                regenerated += 1;
                step(&d, t, index, &set.dataset.chunk(index))
            } else {
                let mut junk = d;
                junk[0] ^= 0x5a;
                step(&junk, t, index, &[])
            };
            digests.push(d);
        }
        (StorageWalk { digests }, regenerated)
    }

    #[test]
    fn a_host_with_half_the_chunks_regenerates_half_the_steps_or_is_caught() {
        let set = MemoryDataset::build(&StorageDataset::new([1; 32], to(), small(256)));
        let r = round(&set, 512);
        // Regenerating: every answer right, but half the steps pay an item's generation.
        let (walk, regenerated) = cheat(&set, &r, |i| i % 2 == 0, true);
        assert_eq!(prove(&set, &walk, &r), Ok(REGENERATED));
        let share = f64::from(regenerated) / f64::from(r.steps);
        assert!((0.4..0.6).contains(&share), "{share}");
        // Time, per step, as the validator's bound sees it: a read at the class's bound for a
        // kept chunk, an item's generation for the others. With an item at 2 ms (the default
        // shape on the dev VM's core) against an NVMe's 250 µs, the walk takes
        // 0.5 + 0.5 × 8 = 4.5 times its bound; the agent's tests measure it on a real file.
        let plan = StoragePlan::for_class(DeviceClass::Nvme);
        let ratio = (1.0 - share) + share * plan.regeneration_margin(2000.0);
        assert!(ratio > 4.0, "{ratio}");
        // Skipping instead: a broken link at half the steps, caught by the draws.
        let (walk, _) = cheat(&set, &r, |i| i % 2 == 0, false);
        assert!(matches!(
            prove(&set, &walk, &r),
            Err(StorageError::BrokenLink { .. })
        ));
    }

    #[test]
    fn a_host_missing_a_tenth_of_its_chunks_is_caught_in_nearly_every_round() {
        let set = MemoryDataset::build(&StorageDataset::new([1; 32], to(), small(512)));
        let mut caught = 0;
        for n in 0..20u8 {
            let mut r = round(&set, 512);
            r.nonce = [n; 32];
            let (walk, _) = cheat(&set, &r, |i| i % 10 != 3, false);
            caught += u32::from(prove(&set, &walk, &r).is_err());
        }
        // 1 − 0.9⁶⁴ per round: 20 of 20 but for one round in 43.
        assert!(caught >= 19, "{caught}");
    }

    #[test]
    fn a_sparse_or_junk_data_set_is_caught_by_the_audit_and_the_walk() {
        let d = StorageDataset::new([1; 32], to(), small(64));
        let honest = MemoryDataset::build(&d);
        // Half the chunks are holes (zeros) in the file the root was computed over.
        let chunks: Vec<Vec<u8>> = (0..64)
            .map(|i| match i % 2 {
                0 => honest.chunk(i).unwrap().to_vec(),
                _ => vec![0; CHUNK_BYTES],
            })
            .collect();
        let sparse = MemoryDataset::from_chunks(&d, chunks);
        let audit = d.audit_draw(&sparse.root(), &[7; 32], 32);
        let failed = audit
            .iter()
            .filter(|&&i| {
                d.check_chunk(&sparse.root(), &sparse.open(i).unwrap())
                    .is_err()
            })
            .count();
        assert!(failed > 0);
        assert!(audit.iter().any(|&i| matches!(
            d.check_chunk(&sparse.root(), &sparse.open(i).unwrap()),
            Err(StorageError::WrongChunk { .. })
        )));
        // Walked against the honest root, a zero chunk is not in the tree.
        let r = round(&honest, 256);
        let walk = r
            .walk(|i| Ok::<_, Infallible>(sparse.chunk(i).unwrap().to_vec()))
            .unwrap();
        let secret = [9; 32];
        let request = r.draw(&walk, &secret, SAMPLES).unwrap();
        let openings = sparse.open_steps(&r, &walk, &request).unwrap();
        assert!(matches!(
            r.check_openings(&walk, &request, &openings, (&secret, REGENERATED)),
            Err(StorageError::NotInTree { .. })
        ));
    }

    #[test]
    fn malformed_walks_and_openings_get_their_error() {
        let set = MemoryDataset::build(&StorageDataset::new([1; 32], to(), small(32)));
        let r = round(&set, 64);
        let walk = r
            .walk(|i| Ok::<_, Infallible>(set.chunk(i).unwrap().to_vec()))
            .unwrap();
        let secret = [9; 32];
        let request = r.draw(&walk, &secret, 8).unwrap();
        let good = set.open_steps(&r, &walk, &request).unwrap();
        let check = |w: &StorageWalk, q: &StorageOpenRequest, o: &StorageOpenings| {
            r.check_openings(w, q, o, (&secret, 1))
        };
        assert_eq!(check(&walk, &request, &good), Ok(1));

        let short = StorageWalk {
            digests: walk.digests[1..].to_vec(),
        };
        assert!(matches!(
            r.draw(&short, &secret, 8),
            Err(StorageError::WrongStepCount { .. })
        ));
        assert!(matches!(
            check(&short, &request, &good),
            Err(StorageError::WrongStepCount { .. })
        ));

        let mut fewer = good.clone();
        fewer.chunks.pop();
        assert!(matches!(
            check(&walk, &request, &fewer),
            Err(StorageError::WrongOpeningCount { .. })
        ));

        let backwards = StorageOpenRequest { steps: vec![5, 3] };
        assert!(matches!(
            check(&walk, &backwards, &good),
            Err(StorageError::BadRequest { .. })
        ));
        let beyond = StorageOpenRequest { steps: vec![64] };
        assert!(matches!(
            check(&walk, &beyond, &good),
            Err(StorageError::BadRequest { .. })
        ));

        let mut moved = good.clone();
        moved.chunks[0].index = (moved.chunks[0].index + 1) % 32;
        assert!(matches!(
            check(&walk, &request, &moved),
            Err(StorageError::WrongPosition { .. })
        ));

        let mut cut = good.clone();
        cut.chunks[0].bytes.pop();
        assert!(matches!(
            check(&walk, &request, &cut),
            Err(StorageError::BadChunkLength { .. })
        ));

        let mut forged = good.clone();
        forged.chunks[0].bytes[100] ^= 1;
        assert!(matches!(
            check(&walk, &request, &forged),
            Err(StorageError::NotInTree { .. })
        ));

        let mut no_path = good.clone();
        no_path.chunks[0].path.clear();
        assert!(matches!(
            check(&walk, &request, &no_path),
            Err(StorageError::NotInTree { .. })
        ));

        let mut relinked = walk.clone();
        let t = request.steps[0] as usize;
        relinked.digests[t][3] ^= 1;
        let request2 = StorageOpenRequest {
            steps: vec![t as u32],
        };
        let opened = set.open_steps(&r, &walk, &request2).unwrap();
        assert!(matches!(
            check(&relinked, &request2, &opened),
            Err(StorageError::BrokenLink { .. })
        ));
    }

    #[test]
    fn regeneration_catches_a_root_over_junk_the_openings_cannot() {
        // A root over junk for every chunk: every path and link checks out (the host walked
        // its own junk), only regenerating an item shows it is not the data set's.
        let d = StorageDataset::new([1; 32], to(), small(16));
        let junk =
            MemoryDataset::from_chunks(&d, (0..16u8).map(|i| vec![i; CHUNK_BYTES]).collect());
        let r = round(&junk, 32);
        let walk = r
            .walk(|i| Ok::<_, Infallible>(junk.chunk(i).unwrap().to_vec()))
            .unwrap();
        let secret = [3; 32];
        let request = r.draw(&walk, &secret, 8).unwrap();
        let openings = junk.open_steps(&r, &walk, &request).unwrap();
        assert_eq!(
            r.check_openings(&walk, &request, &openings, (&secret, 0)),
            Ok(0)
        );
        assert!(matches!(
            r.check_openings(&walk, &request, &openings, (&secret, 1)),
            Err(StorageError::WrongChunk { .. })
        ));
        // Asking more regenerations than openings regenerates each opening once.
        let honest = MemoryDataset::build(&d);
        let r = round(&honest, 32);
        let walk = r
            .walk(|i| Ok::<_, Infallible>(honest.chunk(i).unwrap().to_vec()))
            .unwrap();
        let request = r.draw(&walk, &secret, 3).unwrap();
        let openings = honest.open_steps(&r, &walk, &request).unwrap();
        assert_eq!(
            r.check_openings(&walk, &request, &openings, (&secret, 100)),
            Ok(request.steps.len() as u32)
        );
    }

    #[test]
    fn shapes_and_sizes_beyond_the_limits_are_refused() {
        assert_eq!(StorageShape::for_bytes(1 << 20).unwrap().items, 4);
        assert_eq!(StorageShape::for_bytes((1 << 20) + 4096).unwrap().items, 4);
        assert_eq!(DeviceClass::Ssd.shape(1 << 20).unwrap().items, 1);
        assert!(matches!(
            StorageShape::for_bytes((1 << 18) - 1),
            Err(BadStorageShape::TooSmall { .. })
        ));
        assert!(matches!(
            StorageShape::for_bytes(u64::MAX),
            Err(BadStorageShape::TooLarge { .. })
        ));
        for bad in [
            StorageShape {
                items: 0,
                ..small(1)
            },
            StorageShape {
                chunks_per_item: 0,
                ..small(1)
            },
            StorageShape {
                chunks_per_item: MAX_CHUNKS_PER_ITEM + 1,
                ..small(1)
            },
            StorageShape {
                passes: 0,
                ..small(1)
            },
            StorageShape {
                double_rounds: MAX_DOUBLE_ROUNDS + 1,
                ..small(1)
            },
            StorageShape {
                items: u64::MAX,
                chunks_per_item: 2,
                ..small(1)
            },
            StorageShape {
                items: MAX_CHUNKS + 1,
                ..small(1)
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
            let d = StorageDataset::new([0; 32], to(), bad);
            assert!(matches!(d.validate(), Err(StorageError::Shape(_))));
        }
        let mut d = StorageDataset::new([0; 32], to(), small(1));
        d.version = 99;
        assert!(matches!(d.validate(), Err(StorageError::Version { .. })));
        let mut r = StorageRound {
            dataset: StorageDataset::new([0; 32], to(), small(1)),
            root: [0; 32],
            nonce: [0; 32],
            steps: 0,
        };
        assert_eq!(r.validate(), Err(StorageError::Steps(0)));
        r.steps = MAX_STEPS + 1;
        assert!(r.validate().is_err());
    }

    #[test]
    fn messages_round_trip_through_json_and_bad_hex_is_refused() {
        let set = MemoryDataset::build(&StorageDataset::new([1; 32], to(), small(4)));
        let r = round(&set, 4);
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<StorageRound>(&json).unwrap(), r);
        let walk = r
            .walk(|i| Ok::<_, Infallible>(set.chunk(i).unwrap().to_vec()))
            .unwrap();
        let json = serde_json::to_string(&walk).unwrap();
        assert_eq!(serde_json::from_str::<StorageWalk>(&json).unwrap(), walk);
        // A length that is not whole hashes, bad base64, the wrong type: refused.
        assert!(serde_json::from_str::<StorageWalk>(r#"{"digests":"AAAA"}"#).is_err());
        assert!(serde_json::from_str::<StorageWalk>(r#"{"digests":"!!"}"#).is_err());
        assert!(serde_json::from_str::<StorageWalk>(r#"{"digests":["00"]}"#).is_err());
        let empty: StorageWalk = serde_json::from_str(r#"{"digests":""}"#).unwrap();
        assert!(empty.digests.is_empty());
        let opening = set.open(1).unwrap();
        let json = serde_json::to_string(&opening).unwrap();
        assert_eq!(
            serde_json::from_str::<ChunkOpening>(&json).unwrap(),
            opening
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Whatever a host sends, checking it returns a verdict, never a panic, and a forged
        /// answer is never accepted.
        #[test]
        fn arbitrary_openings_never_panic_nor_pass(
            steps in prop::collection::vec(0u32..80, 0..6),
            index in any::<u64>(),
            len in 0usize..5000,
            path_len in 0usize..40,
            digests in 0usize..70,
        ) {
            let set = MemoryDataset::build(&StorageDataset::new([1; 32], to(), small(8)));
            let r = round(&set, 64);
            let walk = StorageWalk { digests: vec![[7; 32]; digests] };
            let request = StorageOpenRequest { steps: steps.clone() };
            let openings = StorageOpenings {
                chunks: steps.iter().map(|_| ChunkOpening {
                    index,
                    bytes: vec![1; len],
                    path: vec![[2; 32]; path_len],
                }).collect(),
            };
            let verdict = r.check_openings(&walk, &request, &openings, (&[0; 32], 2));
            prop_assert!(verdict.is_err() || steps.is_empty());
            let _ = r.draw(&walk, &[0; 32], 64);
            let _ = r.chunk_at(&walk, index as u32);
        }

        /// Any size gives a shape within the limits holding at most that many bytes, in whole
        /// items, with less than one item left over; or a typed refusal, never a panic.
        #[test]
        fn any_size_gives_whole_items_or_a_refusal(bytes in any::<u64>(), ssd in any::<bool>()) {
            let class = if ssd { DeviceClass::Ssd } else { DeviceClass::Nvme };
            match class.shape(bytes) {
                Ok(shape) => {
                    prop_assert!(shape.validate().is_ok());
                    prop_assert!(shape.bytes() <= bytes);
                    prop_assert!(bytes - shape.bytes() < shape.item_bytes() as u64);
                }
                Err(BadStorageShape::TooSmall { .. }) => {
                    prop_assert!(bytes < (class.chunks_per_item() as u64) * CHUNK_BYTES as u64);
                }
                Err(BadStorageShape::TooLarge { .. }) => {
                    prop_assert!(bytes / CHUNK_BYTES as u64 > MAX_CHUNKS);
                }
                Err(e) => prop_assert!(false, "{e}"),
            }
        }

        /// Positions are in range for any digest and data set size.
        #[test]
        fn positions_are_in_range(d in any::<[u8; 32]>(), chunks in 1u64..=MAX_CHUNKS) {
            prop_assert!(position(&d, chunks) < chunks);
        }
    }
}
