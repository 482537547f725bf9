//! The real GPU through cudarc: a context and stream per device, raw device and pinned host
//! buffers, pog's NVRTC-built kernels, cuBLASLt GEMMs ([`gemm`]), copies ([`copy`]), and the
//! memory test and bandwidth sweep ([`memory`]), GPU-to-GPU transfers ([`fabric`]), and the
//! proof of GPU's commitments
//! ([`prove`]: seeded products hashed into a Merkle tree on the device).
//!
//! Raw driver calls are used where cudarc's safe layer would add work to timed loops (its
//! per-access event tracking is switched off); every one is wrapped so a failure becomes a
//! [`GpuError`] naming the step.

mod copy;
mod fabric;
mod gemm;
mod memory;
mod memproof;
mod prove;

pub use fabric::{apply_nccl_defaults, GpuFabric, NCCL_DEFAULTS};
pub use memproof::{Dataset, DatasetSpec, Key, Residency, WalkSpec, WalkTimings, Walked};
pub use prove::{CommitTimings, Committed, LeafOpening, ProductBatch};

use crate::compute::{
    Accelerator, CopyRequest, GemmRequest, GemmRun, GpuError, MemtestRequest, MemtestRun,
    SustainedRequest, SustainedRun, SweepPoint, SweepRequest,
};
use crate::during::During;
use crate::pci::BusId;
use cudarc::driver::result as drv;
use cudarc::driver::sys::{CUdevice_attribute as Attr, CUdeviceptr, CUevent_flags};
use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaStream, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};
use pog_matgen::Storage;
use std::sync::Arc;

/// pog's own kernels; compiled after pog_matgen's fill kernels in one NVRTC program.
const KERNELS_SOURCE: &str = include_str!("kernels.cu");
/// A launch of one thread (serial kernels: the copy gate, the pointer chase).
const ONE_THREAD: LaunchConfig = LaunchConfig {
    grid_dim: (1, 1, 1),
    block_dim: (1, 1, 1),
    shared_mem_bytes: 0,
};

/// The proofs' commitment hashes (BLAKE3's compression: leaves, tree levels), after
/// [`commitment_prelude`].
pub const COMMITMENT_SOURCE: &str = include_str!("blake3.cu");

/// The `#define`s [`COMMITMENT_SOURCE`] needs before it: the key every commitment hash starts
/// from, from `pog_merkle::commitment`, so the kernels cannot drift from the reference.
pub fn commitment_prelude() -> String {
    let words: Vec<String> = pog_merkle::commitment::key_words()
        .iter()
        .map(|w| format!("{w:#010x}u"))
        .collect();
    format!("#define POG_COMMIT_KEY_WORDS {}\n", words.join(", "))
}
/// The proof of memory's build and walk kernels (after the commitment's, whose types they use).
const MEMPROOF_SOURCE: &str = include_str!("memproof.cu");

/// One CUDA device, ready for benchmarks.
pub struct Gpu {
    /// First, so it is dropped (cuBLASLt handle, workspace) while the context still lives.
    gemm: Option<gemm::Lt>,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    kernels: Kernels,
    /// Where NVML finds this device (telemetry and health counters).
    bus_id: BusId,
    sm_count: u32,
    /// cuBLASLt algorithms chosen for proof shapes (precision, size), reused by later proofs.
    proof_algorithms:
        std::sync::Mutex<std::collections::HashMap<(pog_spec::Precision, u64), gemm::Chosen>>,
}

struct Kernels {
    fill_words: CudaFunction,
    fill_u64: CudaFunction,
    fill_u32: CudaFunction,
    fill_u16: CudaFunction,
    fill_u8: CudaFunction,
    pattern_write: CudaFunction,
    pattern_check: CudaFunction,
    read: CudaFunction,
    write: CudaFunction,
    compare: CudaFunction,
    wait: CudaFunction,
    leaf_hash: CudaFunction,
    leaf_hash_low16: CudaFunction,
    leaf_hash_bytes: CudaFunction,
    merkle_level: CudaFunction,
    gather_hashes: CudaFunction,
    chase: CudaFunction,
    mem_build: CudaFunction,
    mem_walk: CudaFunction,
}

impl Gpu {
    /// Opens CUDA device `ordinal`: checks the driver, NVRTC and cuBLASLt libraries are present
    /// (cudarc panics on a missing one), creates the context and builds pog's kernels for this
    /// device's architecture.
    pub fn open(ordinal: usize) -> Result<Gpu, GpuError> {
        if !crate::cuda::library_present() {
            return Err(GpuError::Unsupported(
                "CUDA driver library (libcuda.so) not found".into(),
            ));
        }
        // SAFETY: only tries to dlopen the library.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Err(GpuError::Unsupported(
                "NVRTC library (libnvrtc.so) not found: install the CUDA runtime".into(),
            ));
        }
        let ctx =
            CudaContext::new(ordinal).during(&format!("creating a context on GPU {ordinal}"))?;
        // SAFETY: pog synchronizes explicitly; cudarc's per-access events would only add work.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().during("creating a stream")?;
        let attr = |a: Attr| ctx.attribute(a).during(&format!("reading {a:?}"));
        let (major, minor) = (
            attr(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        );
        let source = format!(
            "{}\n{KERNELS_SOURCE}\n{}\n{COMMITMENT_SOURCE}\n{MEMPROOF_SOURCE}",
            pog_matgen::CUDA_SOURCE,
            commitment_prelude()
        );
        let options = CompileOptions {
            options: vec![format!("--gpu-architecture=sm_{major}{minor}")],
            ..Default::default()
        };
        let ptx = compile_ptx_with_opts(source, options)
            .during(&format!("compiling pog's kernels for sm_{major}{minor}"))?;
        let module = ctx.load_module(ptx).during("loading pog's kernels")?;
        let function = |name: &str| {
            module
                .load_function(name)
                .during(&format!("loading {name}"))
        };
        let kernels = Kernels {
            fill_words: function("pog_fill_words")?,
            fill_u64: function("pog_fill_u64")?,
            fill_u32: function("pog_fill_u32")?,
            fill_u16: function("pog_fill_u16")?,
            fill_u8: function("pog_fill_u8")?,
            pattern_write: function("pog_pattern_write")?,
            pattern_check: function("pog_pattern_check")?,
            read: function("pog_read")?,
            write: function("pog_write")?,
            compare: function("pog_compare")?,
            wait: function("pog_wait")?,
            leaf_hash: function("pog_leaf_hash")?,
            leaf_hash_low16: function("pog_leaf_hash_low16")?,
            leaf_hash_bytes: function("pog_leaf_hash_bytes")?,
            merkle_level: function("pog_merkle_level")?,
            gather_hashes: function("pog_gather_hashes")?,
            chase: function("pog_chase")?,
            mem_build: function("pog_mem_build")?,
            mem_walk: function("pog_mem_walk")?,
        };
        let bus_id = BusId::parse(&format!(
            "{:x}:{:x}:{:x}.0",
            attr(Attr::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)?,
            attr(Attr::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)?,
            attr(Attr::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)?
        ))
        .ok_or_else(|| GpuError::Unsupported("CUDA reported an impossible PCI address".into()))?;
        let sm_count = attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?.max(1) as u32;
        // SAFETY: only tries to dlopen the library.
        let gemm = if unsafe { cudarc::cublaslt::sys::is_culib_present() } {
            Some(gemm::Lt::new(&ctx)?)
        } else {
            None
        };
        Ok(Gpu {
            ctx,
            stream,
            kernels,
            gemm,
            bus_id,
            sm_count,
            proof_algorithms: Default::default(),
        })
    }

    fn bind(&self) -> Result<(), GpuError> {
        self.ctx.bind_to_thread().during("binding the CUDA context")
    }

    fn event(&self) -> Result<CudaEvent, GpuError> {
        self.ctx
            .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .during("creating an event")
    }

    /// Device memory in this GPU's context.
    fn alloc(&self, bytes: u64) -> Result<DeviceBuffer, GpuError> {
        DeviceBuffer::new(&self.ctx, bytes)
    }

    fn sync(&self) -> Result<(), GpuError> {
        self.stream.synchronize().during("waiting for the GPU")
    }

    /// Launch geometry for pog's grid-stride kernels over `n` items: 8 blocks of 256 threads
    /// per SM (enough to keep every SM's memory pipeline full), never more than the work.
    fn geometry(&self, n: u64) -> LaunchConfig {
        let blocks = (u64::from(self.sm_count) * 8).min(n.div_ceil(256)).max(1) as u32;
        LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    /// Runs `work` between two events on the stream and returns its milliseconds.
    fn time(&self, work: impl FnOnce() -> Result<(), GpuError>) -> Result<f64, GpuError> {
        let (start, end) = (self.event()?, self.event()?);
        start.record(&self.stream).during("recording an event")?;
        work()?;
        end.record(&self.stream).during("recording an event")?;
        end.synchronize().during("waiting for the GPU")?;
        Ok(f64::from(
            start.elapsed_ms(&end).during("reading an event timer")?,
        ))
    }

    /// Fills `buffer` with seeded elements of `storage` (pog_matgen's CUDA twin): whole hashes
    /// (8 bytes each) with the packed kernel, a tail of fewer elements one at a time.
    fn fill(&self, buffer: &DeviceBuffer, storage: Storage, seed: u64) -> Result<(), GpuError> {
        let bytes = storage.bytes() as u64;
        let n = buffer.bytes / bytes;
        let per = storage.per_hash();
        let words = n / per;
        let format = storage.format_code();
        if words > 0 {
            let mut launch = self.stream.launch_builder(&self.kernels.fill_words);
            launch.arg(&buffer.ptr).arg(&words).arg(&seed).arg(&format);
            // SAFETY: the kernel writes `words` u64 into buffer, which holds n >= words * per
            // elements of `bytes` bytes; cuMemAlloc aligns it for u64.
            unsafe { launch.launch(self.geometry(words)) }.during("launching the fill kernel")?;
        }
        let first = words * per;
        if first < n {
            let f = match bytes {
                8 => &self.kernels.fill_u64,
                4 => &self.kernels.fill_u32,
                2 => &self.kernels.fill_u16,
                _ => &self.kernels.fill_u8,
            };
            let mut launch = self.stream.launch_builder(f);
            launch
                .arg(&buffer.ptr)
                .arg(&first)
                .arg(&n)
                .arg(&seed)
                .arg(&format);
            // SAFETY: writes elements first..n of the storage width, inside buffer.
            unsafe { launch.launch(self.geometry(n - first)) }
                .during("launching the fill kernel")?;
        }
        Ok(())
    }

    /// Compares `elements` outputs of `a` with `b` bit for bit (pog_compare); returns
    /// [differing elements, NaNs in a].
    fn compare(
        &self,
        a: &DeviceBuffer,
        b: &DeviceBuffer,
        (elements, width, kind): (u64, i32, i32),
        counters: &DeviceBuffer,
    ) -> Result<[u64; 2], GpuError> {
        // SAFETY: counters holds 16 bytes.
        unsafe { drv::memset_d8_async(counters.ptr, 0, 16, self.stream.cu_stream()) }
            .during("clearing counters")?;
        let mut launch = self.stream.launch_builder(&self.kernels.compare);
        launch
            .arg(&a.ptr)
            .arg(&b.ptr)
            .arg(&elements)
            .arg(&width)
            .arg(&kind)
            .arg(&counters.ptr);
        // SAFETY: a and b hold `elements` items of `width` bytes; counters holds two u64.
        unsafe { launch.launch(self.geometry(elements)) }.during("launching the compare kernel")?;
        self.sync()?;
        read_counters(counters)
    }
}

/// Reads `N` u64 counters back (synchronously).
fn read_counters<const N: usize>(counters: &DeviceBuffer) -> Result<[u64; N], GpuError> {
    let mut out = [0u64; N];
    // SAFETY: counters holds at least N u64; the copy is synchronous.
    unsafe { drv::memcpy_dtoh_sync(&mut out[..], counters.ptr) }.during("reading counters")?;
    Ok(out)
}

impl Accelerator for Gpu {
    fn memory(&self) -> Result<(u64, u64), GpuError> {
        self.bind()?;
        let (free, total) = drv::mem_get_info().during("reading free memory")?;
        Ok((free as u64, total as u64))
    }

    fn gemm(&mut self, request: &GemmRequest) -> Result<GemmRun, GpuError> {
        self.bind()?;
        gemm::run(self, self.lt()?, request)
    }

    fn copy(&mut self, request: &CopyRequest) -> Result<Vec<f64>, GpuError> {
        self.bind()?;
        copy::run(self, request)
    }

    fn memtest(&mut self, request: &MemtestRequest) -> Result<MemtestRun, GpuError> {
        self.bind()?;
        memory::memtest(self, request)
    }

    fn sweep(&mut self, request: &SweepRequest) -> Result<Vec<SweepPoint>, GpuError> {
        self.bind()?;
        memory::sweep(self, request)
    }

    fn sustained(&mut self, request: &SustainedRequest) -> Result<SustainedRun, GpuError> {
        self.bind()?;
        gemm::sustained(self, self.lt()?, request)
    }
}

impl Gpu {
    fn lt(&self) -> Result<&gemm::Lt, GpuError> {
        self.gemm.as_ref().ok_or_else(|| {
            GpuError::Unsupported(
                "cuBLASLt library (libcublasLt.so) not found: install the CUDA runtime".into(),
            )
        })
    }
}

/// Device memory allocated with cuMemAlloc in one GPU's context, freed on drop in that same
/// context, whichever context the dropping thread has current then (a host with several GPUs
/// drops buffers of one while another's context is bound).
pub(crate) struct DeviceBuffer {
    pub ptr: CUdeviceptr,
    pub bytes: u64,
    ctx: Arc<CudaContext>,
}

impl DeviceBuffer {
    /// Allocates `bytes` in `ctx`, leaving `ctx` current on this thread.
    pub fn new(ctx: &Arc<CudaContext>, bytes: u64) -> Result<DeviceBuffer, GpuError> {
        ctx.bind_to_thread().during("binding the CUDA context")?;
        // SAFETY: plain allocation in the context just bound.
        let ptr = unsafe { drv::malloc_sync(bytes as usize) }
            .during(&format!("allocating {} MiB on the GPU", bytes >> 20))?;
        Ok(DeviceBuffer {
            ptr,
            bytes,
            ctx: ctx.clone(),
        })
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // The raw driver calls, not CudaContext::bind_to_thread: that one first takes (and
        // clears) an error cudarc recorded on the context, which must reach the next
        // Gpu::bind, and then would not bind at all.
        let own = self.ctx.cu_ctx();
        let previous = drv::ctx::get_current().ok().flatten();
        let switch = previous != Some(own);
        // SAFETY: own is a live context (self.ctx holds it alive).
        if switch && unsafe { drv::ctx::set_current(own) }.is_err() {
            return; // cannot reach the context: leave the memory to its teardown
        }
        // SAFETY: ptr came from malloc_sync in own, now current, and is freed once.
        let _ = unsafe { drv::free_sync(self.ptr) };
        if let (true, Some(previous)) = (switch, previous) {
            // SAFETY: a context that was current a moment ago; whoever made it current
            // holds it alive.
            let _ = unsafe { drv::ctx::set_current(previous) };
        }
    }
}

/// Page-locked host memory (cuMemHostAlloc, flags 0: cached, fast to read back), freed on drop.
pub(crate) struct PinnedBuffer {
    ptr: *mut u8,
    len: usize,
}

impl PinnedBuffer {
    pub fn new(bytes: u64) -> Result<PinnedBuffer, GpuError> {
        // SAFETY: plain allocation; flags 0 = portable default, not write-combined.
        let ptr = unsafe { drv::malloc_host(bytes as usize, 0) }
            .during(&format!("pinning {} MiB of host memory", bytes >> 20))?;
        let mut buffer = PinnedBuffer {
            ptr: ptr as *mut u8,
            len: bytes as usize,
        };
        buffer.as_mut_slice().fill(0x5a); // touch every page
        Ok(buffer)
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr holds len bytes for the buffer's life.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        // SAFETY: ptr came from malloc_host and is freed once.
        let _ = unsafe { drv::free_host(self.ptr as *mut std::ffi::c_void) };
    }
}
