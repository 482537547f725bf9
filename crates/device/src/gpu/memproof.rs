//! The proof of memory on the device (`memproof.cu`): the data set built into one allocation,
//! the timed walk, its outputs hashed into a commitment tree (`pog_merkle::Blake3`) on the device, leaves opened
//! afterwards from the kept outputs. The arithmetic is `pog_proof::memory::arx`'s, which the
//! GPU tests compare bit for bit.
//!
//! The data set is freed as soon as the walk is committed: only the outputs (16 bytes a
//! walker) and the tree stay until the leaves are opened.

use super::prove::{starts, LeafOpening};
use super::{DeviceBuffer, Gpu};
use crate::compute::GpuError;
use crate::during::During;
use cudarc::driver::result as drv;
use cudarc::driver::{DeviceRepr, LaunchConfig, PushKernelArg};
use pog_merkle::Hash;
use std::time::Instant;

/// Bytes of one item.
const ITEM_BYTES: u64 = 128;
/// Bytes of one walker's output.
const OUTPUT_BYTES: u64 = 16;
/// Memory left free beside the data set, outputs and tree when checking that a challenge fits:
/// the CUDA runtime's own allocations while the kernels run.
const RUNTIME_RESERVE: u64 = 256 << 20;

/// A 256-bit key as the kernels take it (eight words, by value).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key(pub [u32; 8]);

// SAFETY: a plain array of u32, laid out as the kernels' `PogKey`.
unsafe impl DeviceRepr for Key {}

/// The data set to build: `items` items of two ChaCha blocks of `rounds` double rounds under
/// `key`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatasetSpec {
    /// The key the items are generated under.
    pub key: Key,
    /// Items in the data set, 128 bytes each.
    pub items: u64,
    /// ChaCha double rounds per block.
    pub rounds: u32,
}

/// Where the items live. Honest provers hold them all on the device; the other two are the
/// cheats the proof must catch, for the GPU tests that show it does (feature `test-doubles`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Residency {
    /// Every item in device memory.
    Device,
    /// Only the first `resident` items in device memory; each other item is recomputed when
    /// a walker reads it (a card with less memory).
    #[cfg(feature = "test-doubles")]
    Recompute {
        /// Items held in device memory.
        resident: u64,
    },
    /// The first `resident` items in device memory, the rest in pinned host memory read over
    /// PCIe (a card with less memory that borrows the host's).
    #[cfg(feature = "test-doubles")]
    HostMemory {
        /// Items held in device memory.
        resident: u64,
    },
}

/// Pinned host memory mapped into the device's address space (the host-memory cheat).
#[cfg(feature = "test-doubles")]
struct MappedHost {
    ptr: *mut std::ffi::c_void,
    device: u64,
}

#[cfg(feature = "test-doubles")]
impl Drop for MappedHost {
    fn drop(&mut self) {
        // SAFETY: ptr came from malloc_host and is freed once.
        let _ = unsafe { drv::free_host(self.ptr) };
    }
}

// SAFETY: the mapping is only a pointer the kernels read; the host never touches it.
#[cfg(feature = "test-doubles")]
unsafe impl Send for MappedHost {}
#[cfg(feature = "test-doubles")]
unsafe impl Sync for MappedHost {}

/// A built data set, on the device (and, for the host-memory cheat, partly in host memory).
pub struct Dataset {
    spec: DatasetSpec,
    residency: Residency,
    /// Output and tree buffers reserved for a walk of (walkers, walkers per leaf), so the
    /// timed walk allocates nothing ([`Gpu::reserve_walk`]).
    reserved: Option<(u64, u32, DeviceBuffer, DeviceBuffer)>,
    data: DeviceBuffer,
    #[cfg(feature = "test-doubles")]
    spill: Option<MappedHost>,
    /// GPU time of the build (CUDA events).
    pub build_ms: f64,
}

impl Dataset {
    /// Items held in device memory.
    fn resident(&self) -> u64 {
        self.residency.resident(self.spec.items)
    }
}

impl Residency {
    /// Of `items`, how many are held in device memory.
    fn resident(self, items: u64) -> u64 {
        match self {
            Residency::Device => items,
            #[cfg(feature = "test-doubles")]
            Residency::Recompute { resident } | Residency::HostMemory { resident } => {
                resident.min(items)
            }
        }
    }
}

/// The walk to run over a data set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalkSpec {
    /// The key the walkers' starting states are generated under.
    pub key: Key,
    /// Walkers, each giving one 16-byte output.
    pub walkers: u64,
    /// Steps each walker takes.
    pub steps: u32,
    /// Consecutive items per step; divides the data set's items.
    pub span: u32,
    /// Walkers' outputs per Merkle leaf (a leaf is 16 bytes times this).
    pub walkers_per_leaf: u32,
}

impl WalkSpec {
    fn leaf_bytes(&self) -> u64 {
        u64::from(self.walkers_per_leaf) * OUTPUT_BYTES
    }

    fn leaf_count(&self) -> u64 {
        self.walkers / u64::from(self.walkers_per_leaf).max(1)
    }
}

/// Where a walk's time went (CUDA events) and its wall time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct WalkTimings {
    /// Wall time of the whole [`Gpu::walk`] call, in ms.
    pub wall_ms: f64,
    /// GPU time of the walk kernel, in ms.
    pub walk_ms: f64,
    /// GPU time hashing the outputs into leaves, in ms.
    pub hash_ms: f64,
    /// GPU time building the tree above the leaves, in ms.
    pub tree_ms: f64,
}

/// A committed walk: the outputs and the tree, kept for openings.
pub struct Walked {
    spec: WalkSpec,
    outputs: DeviceBuffer,
    nodes: DeviceBuffer,
    level_offsets: Vec<u64>,
    /// The Merkle root over the outputs' leaves.
    pub root: Hash,
    /// Where the walk's time went.
    pub timings: WalkTimings,
}

impl Walked {
    /// Leaves in the committed tree.
    pub fn leaf_count(&self) -> u64 {
        self.spec.leaf_count()
    }
}

impl Gpu {
    /// Device bytes an honest proof of this shape needs at its peak (data set, outputs, tree).
    pub fn memory_proof_bytes(dataset: &DatasetSpec, walk: &WalkSpec) -> u64 {
        let leaves = walk.leaf_count();
        dataset.items.saturating_mul(ITEM_BYTES)
            + walk.walkers.saturating_mul(OUTPUT_BYTES)
            + 2 * leaves.saturating_mul(32)
    }

    /// Refuses a proof this GPU cannot hold now (free memory less the runtime's reserve), with
    /// what it would need: before anything is allocated.
    pub fn check_memory_proof_fits(
        &self,
        dataset: &DatasetSpec,
        walk: &WalkSpec,
    ) -> Result<(), GpuError> {
        self.bind()?;
        let (free, total) = drv::mem_get_info().during("reading free memory")?;
        let needed = Gpu::memory_proof_bytes(dataset, walk);
        if needed.saturating_add(RUNTIME_RESERVE) > free as u64 {
            return Err(GpuError::Unsupported(format!(
                "the memory proof needs {} MiB on the GPU (data set, outputs, tree) and {} MiB \
                 of the {} MiB are free",
                needed >> 20,
                free >> 20,
                total >> 20
            )));
        }
        Ok(())
    }

    /// Builds the data set (honest residency: every item on the device).
    pub fn build_dataset(&self, spec: DatasetSpec) -> Result<Dataset, GpuError> {
        self.build_dataset_with(spec, Residency::Device)
    }

    /// Builds the data set with the given residency.
    pub fn build_dataset_with(
        &self,
        spec: DatasetSpec,
        residency: Residency,
    ) -> Result<Dataset, GpuError> {
        self.bind()?;
        if spec.items == 0 || spec.rounds == 0 {
            return Err(GpuError::Unsupported(
                "a data set needs at least one item and one round".into(),
            ));
        }
        if spec.items.checked_mul(ITEM_BYTES).is_none() {
            return Err(GpuError::Unsupported(format!(
                "{} items overflow a byte count",
                spec.items
            )));
        }
        let resident = residency.resident(spec.items);
        let mut dataset = Dataset {
            spec,
            residency,
            data: self.alloc((resident * ITEM_BYTES).max(ITEM_BYTES))?,
            reserved: None,
            #[cfg(feature = "test-doubles")]
            spill: None,
            build_ms: 0.0,
        };
        let data_ptr = dataset.data.ptr;
        dataset.build_ms = self.time(|| self.launch_build(data_ptr, 0, resident, &spec))?;
        #[cfg(feature = "test-doubles")]
        if let Residency::HostMemory { resident } = residency {
            let spilled = spec.items.saturating_sub(resident);
            if spilled > 0 {
                // Portable + device-mapped: the kernels read it through its device address.
                // SAFETY: plain allocation.
                let ptr = unsafe { drv::malloc_host((spilled * ITEM_BYTES) as usize, 0x1 | 0x2) }
                    .during(&format!(
                    "pinning {} MiB of host memory",
                    (spilled * ITEM_BYTES) >> 20
                ))?;
                let mut device = 0u64;
                // SAFETY: ptr is a mapped pinned allocation of this context.
                unsafe { cudarc::driver::sys::cuMemHostGetDevicePointer_v2(&mut device, ptr, 0) }
                    .result()
                    .during("mapping host memory into the device")?;
                let mapped = MappedHost { ptr, device };
                self.launch_build(mapped.device, resident, spilled, &spec)?;
                self.sync()?;
                dataset.spill = Some(mapped);
            }
        }
        Ok(dataset)
    }

    fn launch_build(
        &self,
        into: u64,
        first: u64,
        count: u64,
        spec: &DatasetSpec,
    ) -> Result<(), GpuError> {
        if count == 0 {
            return Ok(());
        }
        let mut launch = self.stream.launch_builder(&self.kernels.mem_build);
        launch
            .arg(&into)
            .arg(&first)
            .arg(&count)
            .arg(&spec.key)
            .arg(&spec.rounds);
        // SAFETY: `into` holds `count` items of 128 bytes (the kernel writes halves 0..2 count).
        unsafe { launch.launch(self.geometry(count * 2)) }.during("launching the build kernel")?;
        Ok(())
    }

    /// Allocates the outputs and tree of a walk of `walkers` walkers, `walkers_per_leaf` a
    /// leaf, ahead of it (outside the timed window).
    pub fn reserve_walk(
        &self,
        dataset: &mut Dataset,
        walkers: u64,
        walkers_per_leaf: u32,
    ) -> Result<(), GpuError> {
        let leaves = walkers / u64::from(walkers_per_leaf).max(1);
        let nodes: u64 = pog_merkle::level_sizes(leaves).iter().sum();
        let outputs = self.alloc(walkers.saturating_mul(OUTPUT_BYTES).max(OUTPUT_BYTES))?;
        let tree = self.alloc(nodes.max(1) * 32)?;
        dataset.reserved = Some((walkers, walkers_per_leaf, outputs, tree));
        Ok(())
    }

    /// Walks the data set and commits to the outputs' Merkle root, in buffers reserved for
    /// this walk if there are ones. The data set stays allocated until the caller drops it
    /// (after the commitment is out: freeing 100+ GB takes a while).
    pub fn walk(&self, dataset: &mut Dataset, spec: WalkSpec) -> Result<Walked, GpuError> {
        self.bind()?;
        let started = Instant::now();
        if spec.walkers == 0
            || spec.steps == 0
            || spec.span == 0
            || !dataset.spec.items.is_multiple_of(u64::from(spec.span))
            || spec.walkers_per_leaf == 0
            || !spec
                .walkers
                .is_multiple_of(u64::from(spec.walkers_per_leaf))
            || !spec.leaf_bytes().is_multiple_of(64)
        {
            return Err(GpuError::Unsupported(format!(
                "a walk needs walkers in whole leaves of a multiple of 64 bytes, steps, and a span \
                 dividing the items; got {} walkers of {} steps of {}, {} a leaf",
                spec.walkers, spec.steps, spec.span, spec.walkers_per_leaf
            )));
        }
        let leaves = spec.leaf_count();
        let sizes = pog_merkle::level_sizes(leaves);
        let level_offsets = starts(sizes.iter().copied());
        let (outputs, nodes) = match dataset.reserved.take() {
            Some((walkers, per_leaf, outputs, nodes))
                if walkers == spec.walkers && per_leaf == spec.walkers_per_leaf =>
            {
                (outputs, nodes)
            }
            _ => (
                self.alloc(spec.walkers * OUTPUT_BYTES)?,
                self.alloc(sizes.iter().sum::<u64>() * 32)?,
            ),
        };
        let (mode, spill): (u32, u64) = match dataset.residency {
            Residency::Device => (0, 0),
            #[cfg(feature = "test-doubles")]
            Residency::Recompute { .. } => (1, 0),
            #[cfg(feature = "test-doubles")]
            Residency::HostMemory { .. } => (2, dataset.spill.as_ref().map_or(0, |m| m.device)),
        };
        let resident = dataset.resident();
        let [start, walked, hashed, done] =
            [self.event()?, self.event()?, self.event()?, self.event()?];
        start.record(&self.stream).during("recording an event")?;
        let mut launch = self.stream.launch_builder(&self.kernels.mem_walk);
        launch
            .arg(&dataset.data.ptr)
            .arg(&dataset.spec.items)
            .arg(&resident)
            .arg(&spill)
            .arg(&mode)
            .arg(&dataset.spec.key)
            .arg(&dataset.spec.rounds)
            .arg(&spec.key)
            .arg(&spec.walkers)
            .arg(&spec.steps)
            .arg(&spec.span)
            .arg(&outputs.ptr);
        // Enough walkers in flight to hide the memory latency of their dependent reads: a
        // grid of 32 blocks of 256 threads (256 walkers) per SM, striding over the rest.
        let threads = spec.walkers.saturating_mul(8);
        let blocks = (u64::from(self.sm_count) * 32)
            .min(threads.div_ceil(256))
            .max(1) as u32;
        // SAFETY: data holds `resident` items, spill (mode 2) the rest; outputs holds one
        // 16-byte output per walker.
        unsafe {
            launch.launch(LaunchConfig {
                grid_dim: (blocks, 1, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            })
        }
        .during("launching the walk kernel")?;
        walked.record(&self.stream).during("recording an event")?;
        self.hash_whole_leaves(&outputs, leaves, spec.leaf_bytes(), &nodes)?;
        hashed.record(&self.stream).during("recording an event")?;
        self.build_tree(&nodes, &sizes, &level_offsets)?;
        done.record(&self.stream).during("recording an event")?;
        let root = self.read_hashes(&nodes, &[*level_offsets.last().expect("a level")])?[0];
        let elapsed = |a: &cudarc::driver::CudaEvent, b: &cudarc::driver::CudaEvent| {
            a.elapsed_ms(b)
                .map(f64::from)
                .during("reading an event timer")
        };
        let timings = WalkTimings {
            wall_ms: started.elapsed().as_secs_f64() * 1e3,
            walk_ms: elapsed(&start, &walked)?,
            hash_ms: elapsed(&walked, &hashed)?,
            tree_ms: elapsed(&hashed, &done)?,
        };
        Ok(Walked {
            spec,
            outputs,
            nodes,
            level_offsets,
            root,
            timings,
        })
    }

    /// Opens `leaves` of a committed walk: each leaf's bytes from the kept outputs, checked
    /// against its committed hash, with its inclusion proof.
    pub fn open_walk(&self, walked: &Walked, leaves: &[u64]) -> Result<Vec<LeafOpening>, GpuError> {
        self.bind()?;
        let total = walked.leaf_count();
        if let Some(bad) = leaves.iter().find(|&&l| l >= total) {
            return Err(GpuError::Unsupported(format!(
                "leaf {bad} asked, the commitment has {total}"
            )));
        }
        let mut wanted = Vec::new();
        let mut proof_lengths = Vec::with_capacity(leaves.len());
        for &leaf in leaves {
            wanted.push(leaf);
            let positions = pog_merkle::proof_positions(leaf, total).expect("checked in range");
            proof_lengths.push(positions.len());
            wanted.extend(
                positions
                    .iter()
                    .map(|&(level, at)| walked.level_offsets[level] + at),
            );
        }
        let hashes = self.read_hashes(&walked.nodes, &wanted)?;
        let leaf_bytes = walked.spec.leaf_bytes();
        let mut openings = Vec::with_capacity(leaves.len());
        let mut at = 0;
        for (&leaf, len) in leaves.iter().zip(proof_lengths) {
            let mut bytes = vec![0u8; leaf_bytes as usize];
            // SAFETY: the leaf lies inside outputs (checked in range); synchronous copy.
            unsafe {
                drv::memcpy_dtoh_sync(&mut bytes[..], walked.outputs.ptr + leaf * leaf_bytes)
            }
            .during("reading back a leaf")?;
            if <pog_merkle::Blake3 as pog_merkle::TreeHasher>::leaf(&bytes) != hashes[at] {
                return Err(GpuError::Invalid(format!(
                    "leaf {leaf} read back differs from its committed hash"
                )));
            }
            openings.push(LeafOpening {
                leaf,
                bytes,
                proof: hashes[at + 1..at + 1 + len].to_vec(),
            });
            at += 1 + len;
        }
        Ok(openings)
    }

    /// Reads walker outputs `first..first + count` back (for the tests that compare them
    /// with the CPU's).
    pub fn walk_outputs(
        &self,
        walked: &Walked,
        first: u64,
        count: u64,
    ) -> Result<Vec<u8>, GpuError> {
        self.bind()?;
        if first.saturating_add(count) > walked.spec.walkers {
            return Err(GpuError::Unsupported("walkers out of range".into()));
        }
        let mut bytes = vec![0u8; (count * OUTPUT_BYTES) as usize];
        // SAFETY: in range (checked); synchronous copy.
        unsafe { drv::memcpy_dtoh_sync(&mut bytes[..], walked.outputs.ptr + first * OUTPUT_BYTES) }
            .during("reading back outputs")?;
        Ok(bytes)
    }

    /// Reads items `first..first + count` of a device-resident data set back.
    pub fn dataset_items(
        &self,
        dataset: &Dataset,
        first: u64,
        count: u64,
    ) -> Result<Vec<u8>, GpuError> {
        self.bind()?;
        if first.saturating_add(count) > dataset.resident() {
            return Err(GpuError::Unsupported("items out of range".into()));
        }
        let mut bytes = vec![0u8; (count * ITEM_BYTES) as usize];
        // SAFETY: in range (checked); synchronous copy.
        unsafe { drv::memcpy_dtoh_sync(&mut bytes[..], dataset.data.ptr + first * ITEM_BYTES) }
            .during("reading back items")?;
        Ok(bytes)
    }
}
