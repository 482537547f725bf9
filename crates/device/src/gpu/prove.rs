//! The proof of GPU's work on the device: a batch of seeded products committed to one Merkle
//! tree (RFC 6962's shape, `pog_merkle::Blake3`'s hashes), and leaves opened afterwards.
//!
//! Commit: for each product, fill A and B from its seeds (pog_matgen's generator), multiply
//! through cuBLASLt (TN, the layout the challenge fixes), and hash the output's leaves with
//! BLAKE3's compression on the GPU (`blake3.cu`), so that only the 32-byte root leaves the
//! device. The tree is built on the GPU level by level, with [`pog_merkle::level_sizes`] as the
//! layout.
//!
//! Open ([`Gpu::open_leaves`]): outputs are not kept (a batch can be far larger than memory). Opening recomputes each
//! product that holds a requested leaf with the same algorithm, which cuBLASLt runs bit for bit
//! the same, and checks every recomputed leaf against the committed hash before sending it.

use super::gemm::{Chosen, Prepared};
use super::{DeviceBuffer, Gpu};
use crate::compute::GpuError;
use crate::during::During;
use cudarc::driver::result as drv;
use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{CudaEvent, CudaFunction, LaunchConfig, PushKernelArg};
use pog_matgen::{committed_bytes, output_bytes, ALayout};
use pog_merkle::Hash;
use pog_spec::Precision;
use std::time::Instant;

/// cuBLASLt candidates timed when a shape is first prepared for proofs.
const PROOF_CANDIDATES: u32 = 8;

/// What to commit to: `seeds.len()` products of size × size × size in `precision`, each output
/// cut into leaves of `leaf_elements` elements (column-major), leaves of product 0 first, each
/// element as its committed bytes (`pog_matgen::committed_bytes`: INT8's low two of four).
#[derive(Debug, Clone, PartialEq)]
pub struct ProductBatch {
    /// The precision every product runs in.
    pub precision: Precision,
    /// m = n = k of every product.
    pub size: u64,
    /// Output elements per leaf.
    pub leaf_elements: u32,
    /// (seed of A, seed of B) per product.
    pub seeds: Vec<(u64, u64)>,
}

impl ProductBatch {
    /// Bytes of one product's output as the GEMM writes it.
    fn output_bytes(&self) -> u64 {
        self.size * self.size * output_bytes(self.precision) as u64
    }

    /// Bytes of one product's output as its leaves commit it.
    fn committed_output_bytes(&self) -> u64 {
        self.size * self.size * committed_bytes(self.precision) as u64
    }

    /// Committed bytes of a whole leaf.
    fn leaf_bytes(&self) -> u64 {
        u64::from(self.leaf_elements) * committed_bytes(self.precision) as u64
    }

    /// The committed bytes of leaf `within` of a product's output, from the GEMM's bytes of
    /// that output at `output` (on the device).
    fn read_leaf(
        &self,
        output: &DeviceBuffer,
        offset: u64,
        within: u64,
    ) -> Result<Vec<u8>, GpuError> {
        let (stored, kept) = (
            output_bytes(self.precision),
            committed_bytes(self.precision),
        );
        let elements = self.size * self.size;
        let first = within * u64::from(self.leaf_elements);
        let count = u64::from(self.leaf_elements).min(elements - first);
        let mut bytes = vec![0u8; (count * stored as u64) as usize];
        // SAFETY: the leaf's elements lie inside the product's output, which starts at
        // `offset` of `output`; the copy is synchronous.
        unsafe {
            drv::memcpy_dtoh_sync(&mut bytes[..], output.ptr + offset + first * stored as u64)
        }
        .during("reading back a leaf")?;
        if kept < stored {
            // Little-endian: an element's low bytes come first.
            bytes = bytes
                .chunks_exact(stored)
                .flat_map(|element| &element[..kept])
                .copied()
                .collect();
        }
        Ok(bytes)
    }

    /// Leaves per product (the last may be short).
    pub fn leaves_per_product(&self) -> u64 {
        (self.size * self.size).div_ceil(u64::from(self.leaf_elements))
    }

    /// Leaves in the whole commitment.
    pub fn leaf_count(&self) -> u64 {
        self.leaves_per_product() * self.seeds.len() as u64
    }
}

/// Where the time of a commitment went: the GPU's share by phase (CUDA events, summed over the
/// products) and the wall time of the whole commitment.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CommitTimings {
    /// Wall time of the whole [`Gpu::commit`] call, the algorithm choice included, in ms.
    pub wall_ms: f64,
    /// Wall time before the first product was queued (the tree's, inputs' and outputs'
    /// allocations, the algorithm's lookup, the first inputs' generation queued), in ms: the
    /// part of `wall_ms` that no event times.
    pub setup_ms: f64,
    /// GPU time generating A and B from the seeds, in ms.
    pub fill_ms: f64,
    /// GPU time of the multiplications, in ms.
    pub gemm_ms: f64,
    /// GPU time hashing the outputs into leaves, in ms.
    pub hash_ms: f64,
    /// GPU time building the tree above the leaves, in ms.
    pub tree_ms: f64,
}

/// A committed batch: the root, and the tree kept on the device for openings.
pub struct Committed {
    batch: ProductBatch,
    chosen: Chosen,
    /// Every level of the tree, leaves first, 32 bytes a node (as eight state words).
    nodes: DeviceBuffer,
    level_offsets: Vec<u64>,
    /// The Merkle root over every product's leaves.
    pub root: Hash,
    /// Where the commitment's time went.
    pub timings: CommitTimings,
    /// The cuBLASLt algorithm the products ran with.
    pub algorithm: String,
    /// Every product's output, end to end, when they fit beside everything else (then leaves
    /// open from them; else the products holding them are recomputed).
    outputs: Option<DeviceBuffer>,
}

/// Device memory left free beside a commitment's kept outputs (the runtime, later work).
const OUTPUTS_RESERVE: u64 = 4 << 30;

impl Committed {
    /// Frees the kept outputs (openings then recompute their products): room for work that
    /// needs the GPU's memory, such as the proof of memory's data set.
    pub fn release_outputs(&mut self) {
        self.outputs = None;
    }

    /// How many leaves the committed tree has.
    pub fn leaf_count(&self) -> u64 {
        self.batch.leaf_count()
    }
}

/// One opened leaf: its bytes and its inclusion proof.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafOpening {
    /// The leaf's index in the commitment.
    pub leaf: u64,
    /// The leaf's bytes, as hashed.
    pub bytes: Vec<u8>,
    /// The sibling hashes from the leaf's level up to the root.
    pub proof: Vec<Hash>,
}

/// Where each of a run of consecutive pieces of these lengths starts.
pub(super) fn starts(lengths: impl Iterator<Item = u64>) -> Vec<u64> {
    lengths
        .scan(0u64, |at, len| {
            let start = *at;
            *at += len;
            Some(start)
        })
        .collect()
}

/// A leaf length the hashing kernels take (at most one BLAKE3 chunk), as their argument.
fn hashable(leaf_bytes: u64) -> Result<u32, GpuError> {
    let max = pog_merkle::commitment::MAX_LEAF_BYTES;
    if leaf_bytes > max as u64 {
        return Err(GpuError::Unsupported(format!(
            "leaves of {leaf_bytes} bytes: a commitment hash takes at most {max}"
        )));
    }
    Ok(leaf_bytes as u32)
}

/// A hash as the kernels keep it (eight chaining-value words) into its bytes (the words
/// little-endian, as BLAKE3 writes them).
fn hash_from_words(words: &[u32]) -> Hash {
    let mut hash = [0u8; 32];
    for (chunk, word) in hash.chunks_exact_mut(4).zip(words) {
        chunk.copy_from_slice(&word.to_le_bytes());
    }
    hash
}

impl Gpu {
    /// Chooses (and remembers) the cuBLASLt algorithm for proofs of this shape, so that a
    /// commitment's timed window holds no algorithm search. Agents call it at start for the
    /// shape their validator will ask.
    pub fn prepare_proof(&self, precision: Precision, size: u64) -> Result<String, GpuError> {
        self.bind()?;
        let mut g = Prepared::new(
            self,
            self.lt()?,
            precision,
            (size, size, size),
            (1, 2),
            &[ALayout::KMajor],
        )?;
        let chosen = self.proof_algorithm(&mut g, precision, size)?;
        g.choose(chosen)?;
        Ok(g.algorithm())
    }

    /// The algorithm remembered for this shape, or the fastest of cuBLASLt's candidates.
    fn proof_algorithm(
        &self,
        g: &mut Prepared,
        precision: Precision,
        size: u64,
    ) -> Result<Chosen, GpuError> {
        // A map of choices: a panic while it was held leaves nothing half-made, so a poisoned
        // lock's map is taken as it is (as the services take theirs: pog_net::locked).
        let mut known = self
            .proof_algorithms
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(chosen) = known.get(&(precision, size)) {
            return Ok(*chosen);
        }
        g.choose_fastest(PROOF_CANDIDATES)?;
        let chosen = g
            .chosen()
            .ok_or_else(|| GpuError::Unsupported("no algorithm was chosen".into()))?;
        known.insert((precision, size), chosen);
        Ok(chosen)
    }

    /// Computes every product of `batch` and commits to the Merkle tree over their leaves.
    pub fn commit(&self, batch: &ProductBatch) -> Result<Committed, GpuError> {
        self.bind()?;
        let started = Instant::now();
        if batch.seeds.is_empty() || batch.size == 0 || batch.leaf_elements == 0 {
            return Err(GpuError::Unsupported(
                "a proof batch needs at least one product, a size and a leaf size".into(),
            ));
        }
        if batch.leaf_bytes() > u64::from(u32::MAX) {
            return Err(GpuError::Unsupported(format!(
                "leaves of {} bytes: the hashing kernels take leaves under 4 GiB",
                batch.leaf_bytes()
            )));
        }
        let sizes = pog_merkle::level_sizes(batch.leaf_count());
        let level_offsets = starts(sizes.iter().copied());
        let node_count: u64 = sizes.iter().sum();
        let nodes = self.alloc(node_count * 32).map_err(|e| {
            GpuError::Unsupported(format!(
                "{e} (the tree over {} leaves; a smaller batch or larger leaves fit)",
                batch.leaf_count()
            ))
        })?;
        let n = batch.size;
        let mut g = Prepared::new(
            self,
            self.lt()?,
            batch.precision,
            (n, n, n),
            batch.seeds[0],
            &[ALayout::KMajor],
        )?;
        let chosen = self.proof_algorithm(&mut g, batch.precision, n)?;
        g.choose(chosen)?;
        // Keep every output for the openings where they fit: opening then reads leaves
        // instead of recomputing nearly every product (1024 spot checks touch most of them),
        // which cost as much GPU time as the commitment (docs/protocol.md, "Cost").
        let output_bytes = batch.output_bytes();
        let all_outputs = output_bytes.saturating_mul(batch.seeds.len() as u64);
        let (free, _) = drv::mem_get_info().during("reading free memory")?;
        let outputs = if all_outputs.saturating_add(OUTPUTS_RESERVE) <= free as u64 {
            Some(self.alloc(all_outputs)?)
        } else {
            None
        };

        let setup_ms = started.elapsed().as_secs_f64() * 1e3;
        let mut phases: Vec<[CudaEvent; 4]> = Vec::with_capacity(batch.seeds.len());
        for (product, &seeds) in batch.seeds.iter().enumerate() {
            let events = [self.event()?, self.event()?, self.event()?, self.event()?];
            self.record(&events[0])?;
            // Only inputs whose seeds changed are generated: product 0's were when prepared
            // (before the events, inside the commitment's wall time), and a batch of challenge
            // version 7 shares one A, so later products generate B alone.
            g.refill(seeds)?;
            self.record(&events[1])?;
            // A kept output is computed in its place: no copy after the product.
            let output = match &outputs {
                Some(kept) => {
                    let offset = product as u64 * output_bytes;
                    g.run_into(kept, offset)?;
                    kept.ptr + offset
                }
                None => {
                    g.run()?;
                    g.d.ptr
                }
            };
            self.record(&events[2])?;
            let first_leaf = product as u64 * batch.leaves_per_product();
            self.hash_leaves(batch, output, &nodes, first_leaf)?;
            self.record(&events[3])?;
            phases.push(events);
        }
        let tree_start = self.event()?;
        self.record(&tree_start)?;
        self.build_tree(&nodes, &sizes, &level_offsets)?;
        let tree_end = self.event()?;
        self.record(&tree_end)?;
        let root = self.read_hashes(&nodes, &[*level_offsets.last().expect("a level")])?[0];
        let wall_ms = started.elapsed().as_secs_f64() * 1e3;

        let elapsed = |a: &CudaEvent, b: &CudaEvent| {
            a.elapsed_ms(b)
                .map(f64::from)
                .during("reading an event timer")
        };
        let mut timings = CommitTimings {
            wall_ms,
            setup_ms,
            tree_ms: elapsed(&tree_start, &tree_end)?,
            ..CommitTimings::default()
        };
        for [fill, gemm, hash, end] in &phases {
            timings.fill_ms += elapsed(fill, gemm)?;
            timings.gemm_ms += elapsed(gemm, hash)?;
            timings.hash_ms += elapsed(hash, end)?;
        }
        Ok(Committed {
            batch: batch.clone(),
            chosen,
            nodes,
            level_offsets,
            root,
            timings,
            algorithm: g.algorithm(),
            outputs,
        })
    }

    /// Opens `leaves` of a commitment: recomputes each product holding one, checks each leaf
    /// against its committed hash, and returns its bytes with its inclusion proof.
    pub fn open_leaves(
        &self,
        committed: &Committed,
        leaves: &[u64],
    ) -> Result<Vec<LeafOpening>, GpuError> {
        self.bind()?;
        let batch = &committed.batch;
        let total = batch.leaf_count();
        if let Some(bad) = leaves.iter().find(|&&l| l >= total) {
            return Err(GpuError::Unsupported(format!(
                "leaf {bad} asked, the commitment has {total}"
            )));
        }
        // Every hash needed, fetched in one gather: each leaf's own, then its proof's.
        let mut wanted = Vec::new();
        let mut proofs = Vec::with_capacity(leaves.len());
        for &leaf in leaves {
            wanted.push(leaf); // level 0 starts at offset 0
            let positions = pog_merkle::proof_positions(leaf, total).expect("checked in range");
            proofs.push(positions.len());
            wanted.extend(
                positions
                    .iter()
                    .map(|&(level, at)| committed.level_offsets[level] + at),
            );
        }
        let hashes = self.read_hashes(&committed.nodes, &wanted)?;
        let hash_at = starts(proofs.iter().map(|&len| 1 + len as u64));
        let leaf_proof = |i: usize, bytes: Vec<u8>| LeafOpening {
            leaf: leaves[i],
            bytes,
            proof: hashes[hash_at[i] as usize + 1..hash_at[i] as usize + 1 + proofs[i]].to_vec(),
        };
        let per_product = batch.leaves_per_product();
        if let Some(kept) = &committed.outputs {
            let mut openings = Vec::with_capacity(leaves.len());
            for (i, &leaf) in leaves.iter().enumerate() {
                let product = leaf / per_product;
                let bytes =
                    batch.read_leaf(kept, product * batch.output_bytes(), leaf % per_product)?;
                if <pog_merkle::Blake3 as pog_merkle::TreeHasher>::leaf(&bytes)
                    != hashes[hash_at[i] as usize]
                {
                    return Err(GpuError::Invalid(format!(
                        "leaf {leaf} read back from the kept outputs differs from its committed hash"
                    )));
                }
                openings.push(leaf_proof(i, bytes));
            }
            return Ok(openings);
        }

        let mut order: Vec<usize> = (0..leaves.len()).collect();
        order.sort_by_key(|&i| leaves[i]);
        let mut bytes: Vec<Vec<u8>> = vec![Vec::new(); leaves.len()];
        let n = batch.size;
        let mut g: Option<Prepared> = None;
        let mut current = None;
        for &i in &order {
            let product = (leaves[i] / per_product) as usize;
            if current != Some(product) {
                match g.as_mut() {
                    None => {
                        let mut p = Prepared::new(
                            self,
                            self.lt()?,
                            batch.precision,
                            (n, n, n),
                            batch.seeds[product],
                            &[ALayout::KMajor],
                        )?;
                        p.choose(committed.chosen)?;
                        g = Some(p);
                    }
                    Some(p) => p.refill(batch.seeds[product])?,
                }
                g.as_ref().expect("set above").run()?;
                self.sync()?;
                current = Some(product);
            }
            let within = leaves[i] % per_product;
            let prepared = g.as_ref().expect("set above");
            let leaf_bytes = batch.read_leaf(&prepared.d, 0, within)?;
            if <pog_merkle::Blake3 as pog_merkle::TreeHasher>::leaf(&leaf_bytes)
                != hashes[hash_at[i] as usize]
            {
                // Tell a GEMM that does not repeat from a commitment that was wrong.
                prepared.run()?;
                self.sync()?;
                let again = batch.read_leaf(&prepared.d, 0, within)?;
                return Err(GpuError::Unsupported(format!(
                    "leaf {} recomputed with {} differs from the committed one; {}",
                    leaves[i],
                    committed.algorithm,
                    if again == leaf_bytes {
                        "two recomputations agree, so the commitment itself was wrong"
                    } else {
                        "two recomputations differ: the GEMM does not repeat bit for bit"
                    }
                )));
            }
            bytes[i] = leaf_bytes;
        }

        Ok(bytes
            .into_iter()
            .enumerate()
            .map(|(i, leaf_bytes)| leaf_proof(i, leaf_bytes))
            .collect())
    }

    /// Hashes the leaves of one product's output at `d` into level 0 of `nodes`, from
    /// `first_leaf`.
    fn hash_leaves(
        &self,
        batch: &ProductBatch,
        d: CUdeviceptr,
        nodes: &DeviceBuffer,
        first_leaf: u64,
    ) -> Result<(), GpuError> {
        let leaf_bytes = batch.leaf_bytes();
        let total_bytes = batch.committed_output_bytes();
        let (stored, kept) = (
            output_bytes(batch.precision) as u32,
            committed_bytes(batch.precision) as u32,
        );
        let whole = total_bytes / leaf_bytes;
        let out = nodes.ptr + first_leaf * 32;
        // The fast kernels take whole leaves of a multiple of 64 bytes, committed whole or by
        // the low half of 4-byte elements; the rest go byte-wise.
        let kernel = match (stored, kept) {
            (s, k) if s == k => Some(&self.kernels.leaf_hash),
            (4, 2) => Some(&self.kernels.leaf_hash_low16),
            _ => None,
        };
        let fast = match kernel {
            Some(_) if leaf_bytes.is_multiple_of(64) => whole,
            _ => 0,
        };
        if let (Some(kernel), true) = (kernel, fast > 0) {
            self.launch_leaf_hash(kernel, d, fast, leaf_bytes, out)?;
        }
        let rest = batch.leaves_per_product() - fast;
        if rest > 0 {
            let leaf_bytes32 = hashable(leaf_bytes)?;
            let rest_out = out + fast * 32;
            let mut launch = self.stream.launch_builder(&self.kernels.leaf_hash_bytes);
            launch
                .arg(&d)
                .arg(&total_bytes)
                .arg(&leaf_bytes32)
                .arg(&fast)
                .arg(&rest)
                .arg(&stored)
                .arg(&kept)
                .arg(&rest_out);
            // SAFETY: leaves fast.. of d lie within the product's output (total_bytes committed,
            // stored / kept times as many read); their hashes fit in nodes.
            unsafe { launch.launch(self.geometry(rest)) }
                .during("launching the byte-wise leaf hash kernel")?;
        }
        Ok(())
    }

    /// Hashes `leaves` whole leaves of `leaf_bytes` (a multiple of 64) laid end to end in
    /// `data` into level 0 of `nodes`.
    pub(super) fn hash_whole_leaves(
        &self,
        data: &DeviceBuffer,
        leaves: u64,
        leaf_bytes: u64,
        nodes: &DeviceBuffer,
    ) -> Result<(), GpuError> {
        self.launch_leaf_hash(
            &self.kernels.leaf_hash,
            data.ptr,
            leaves,
            leaf_bytes,
            nodes.ptr,
        )
    }

    /// Launches a fast leaf-hash kernel (`pog_leaf_hash` or `pog_leaf_hash_low16`) over
    /// `leaves` whole leaves of `leaf_bytes` committed bytes at `data`, hashes to `out`.
    fn launch_leaf_hash(
        &self,
        kernel: &CudaFunction,
        data: u64,
        leaves: u64,
        leaf_bytes: u64,
        out: u64,
    ) -> Result<(), GpuError> {
        let leaf_bytes32 = hashable(leaf_bytes)?;
        let blocks = (u64::from(self.sm_count) * 8)
            .min(leaves.div_ceil(256))
            .max(1) as u32;
        let mut launch = self.stream.launch_builder(kernel);
        launch.arg(&data).arg(&leaves).arg(&leaf_bytes32).arg(&out);
        // SAFETY: callers pass `leaves` whole leaves at data (the low-16 kernel reads twice
        // their committed bytes) and room for their hashes at out.
        unsafe {
            launch.launch(LaunchConfig {
                grid_dim: (blocks, 1, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            })
        }
        .during("launching the leaf hash kernel")?;
        Ok(())
    }

    /// Builds the tree's upper levels in `nodes` from level 0 (layout `sizes`, `offsets`).
    pub(super) fn build_tree(
        &self,
        nodes: &DeviceBuffer,
        sizes: &[u64],
        offsets: &[u64],
    ) -> Result<(), GpuError> {
        for level in 1..sizes.len() {
            let below = nodes.ptr + offsets[level - 1] * 32;
            let above = nodes.ptr + offsets[level] * 32;
            let count = sizes[level - 1];
            let mut launch = self.stream.launch_builder(&self.kernels.merkle_level);
            launch.arg(&below).arg(&count).arg(&above);
            // SAFETY: `below` holds `count` hashes and `above` (count + 1) / 2, inside `nodes`.
            unsafe { launch.launch(self.geometry(count.div_ceil(2))) }
                .during("launching the Merkle level kernel")?;
        }
        Ok(())
    }

    /// Reads the hashes at node indices `at` of `nodes` (one gather kernel, one copy).
    pub(super) fn read_hashes(
        &self,
        nodes: &DeviceBuffer,
        at: &[u64],
    ) -> Result<Vec<Hash>, GpuError> {
        if at.is_empty() {
            return Ok(Vec::new());
        }
        let count = at.len() as u64;
        let index = self.alloc(count * 8)?;
        let out = self.alloc(count * 32)?;
        // Queued on the stream: a "synchronous" copy from pageable memory may return before its
        // DMA lands, and this stream does not wait for the legacy one (on the H100 that let
        // the gather read stale indices).
        // SAFETY: index holds count u64; `at` outlives the copy (the stream is synced below).
        unsafe { drv::memcpy_htod_async(index.ptr, at, self.stream.cu_stream()) }
            .during("sending node indices")?;
        let mut launch = self.stream.launch_builder(&self.kernels.gather_hashes);
        launch
            .arg(&nodes.ptr)
            .arg(&index.ptr)
            .arg(&count)
            .arg(&out.ptr);
        // SAFETY: every index lies inside nodes (callers take them from the level layout).
        unsafe { launch.launch(self.geometry(count)) }.during("launching the gather kernel")?;
        self.sync()?;
        let mut words = vec![0u32; at.len() * 8];
        // SAFETY: out holds count hashes; synchronous copy after the kernel finished.
        unsafe { drv::memcpy_dtoh_sync(&mut words[..], out.ptr) }.during("reading hashes back")?;
        Ok(words.chunks_exact(8).map(hash_from_words).collect())
    }

    fn record(&self, event: &CudaEvent) -> Result<(), GpuError> {
        event.record(&self.stream).during("recording an event")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_read_back_as_little_endian_words() {
        let words: Vec<u32> = (0..8).map(|i| 0x0102_0304 + i).collect();
        let hash = hash_from_words(&words);
        assert_eq!(&hash[..4], &[4, 3, 2, 1]);
        assert_eq!(&hash[28..], &[11, 3, 2, 1]);
    }

    #[test]
    fn pieces_start_where_the_previous_ones_end() {
        assert_eq!(starts([4, 2, 1].into_iter()), vec![0, 4, 6]);
        assert!(starts(std::iter::empty()).is_empty());
    }

    #[test]
    fn batches_count_their_leaves() {
        let batch = ProductBatch {
            precision: Precision::Bf16,
            size: 10,
            leaf_elements: 16,
            seeds: vec![(1, 2), (3, 4), (5, 6)],
        };
        assert_eq!(batch.leaves_per_product(), 7);
        assert_eq!(batch.leaf_count(), 21);
        assert_eq!(batch.leaf_bytes(), 32);
        assert_eq!(batch.output_bytes(), 200);
    }
}
