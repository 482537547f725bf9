//! The real GPU through cudarc: a context and stream per device, raw device and pinned host
//! buffers, the NVRTC-built fill kernels, cuBLASLt GEMMs ([`gemm`]) and copies ([`copy`]).
//!
//! Raw driver calls are used where cudarc's safe layer would add work to timed loops (its
//! per-access event tracking is switched off); every one is wrapped so a failure becomes a
//! [`GpuError`] naming the step.

mod copy;
mod gemm;

use crate::compute::{Accelerator, CopyRequest, GemmRequest, GemmRun, GpuError};
use cudarc::driver::result as drv;
use cudarc::driver::sys::{CUdeviceptr, CUevent_flags};
use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaStream, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};
use pog_matgen::Storage;
use std::sync::Arc;

/// One CUDA device, ready for benchmarks.
pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    fill: FillKernels,
    gemm: Option<gemm::Lt>,
}

struct FillKernels {
    u64: CudaFunction,
    u32: CudaFunction,
    u16: CudaFunction,
    u8: CudaFunction,
}

impl Gpu {
    /// Opens CUDA device `ordinal`: checks the driver, NVRTC and cuBLASLt libraries are present
    /// (cudarc panics on a missing one), creates the context and builds the fill kernels for
    /// this device's architecture.
    pub fn open(ordinal: usize) -> Result<Gpu, GpuError> {
        if !crate::cuda::library_present() {
            return Err(GpuError(
                "CUDA driver library (libcuda.so) not found".into(),
            ));
        }
        // SAFETY: only tries to dlopen the libraries.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Err(GpuError(
                "NVRTC library (libnvrtc.so) not found: install the CUDA runtime".into(),
            ));
        }
        let ctx = CudaContext::new(ordinal)
            .map_err(|e| GpuError::during(&format!("creating a context on GPU {ordinal}"), e))?;
        // SAFETY: pog synchronizes explicitly; cudarc's per-access events would only add work.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx
            .new_stream()
            .map_err(|e| GpuError::during("creating a stream", e))?;
        let (major, minor) = ctx
            .compute_capability()
            .map_err(|e| GpuError::during("reading the compute capability", e))?;
        let ptx = compile_ptx_with_opts(
            pog_matgen::CUDA_SOURCE,
            CompileOptions {
                options: vec![format!("--gpu-architecture=sm_{major}{minor}")],
                ..Default::default()
            },
        )
        .map_err(|e| {
            GpuError::during(
                &format!("compiling the fill kernels for sm_{major}{minor}"),
                e,
            )
        })?;
        let module = ctx
            .load_module(ptx)
            .map_err(|e| GpuError::during("loading the fill kernels", e))?;
        let function = |name: &str| {
            module
                .load_function(name)
                .map_err(|e| GpuError::during(&format!("loading {name}"), e))
        };
        let fill = FillKernels {
            u64: function("pog_fill_u64")?,
            u32: function("pog_fill_u32")?,
            u16: function("pog_fill_u16")?,
            u8: function("pog_fill_u8")?,
        };
        // SAFETY: only tries to dlopen the library.
        let gemm = if unsafe { cudarc::cublaslt::sys::is_culib_present() } {
            Some(gemm::Lt::new(&ctx)?)
        } else {
            None
        };
        Ok(Gpu {
            ctx,
            stream,
            fill,
            gemm,
        })
    }

    /// Number of CUDA devices (0 when there is no driver).
    pub fn count() -> usize {
        if !crate::cuda::library_present() {
            return 0;
        }
        CudaContext::device_count().map_or(0, |n| n.max(0) as usize)
    }

    fn bind(&self) -> Result<(), GpuError> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| GpuError::during("binding the CUDA context", e))
    }

    fn event(&self) -> Result<CudaEvent, GpuError> {
        self.ctx
            .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(|e| GpuError::during("creating an event", e))
    }

    fn sync(&self) -> Result<(), GpuError> {
        self.stream
            .synchronize()
            .map_err(|e| GpuError::during("waiting for the GPU", e))
    }

    /// Fills `buffer` with seeded elements of `storage` (pog_matgen's CUDA twin).
    fn fill(&self, buffer: &DeviceBuffer, storage: Storage, seed: u64) -> Result<(), GpuError> {
        let n = buffer.bytes / storage.bytes() as u64;
        let f = match storage.bytes() {
            8 => &self.fill.u64,
            4 => &self.fill.u32,
            2 => &self.fill.u16,
            _ => &self.fill.u8,
        };
        let format = storage.format_code();
        let config = LaunchConfig {
            grid_dim: (4096, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut launch = self.stream.launch_builder(f);
        launch.arg(&buffer.ptr).arg(&n).arg(&seed).arg(&format);
        // SAFETY: the kernel writes n elements of the storage width into buffer, which holds them.
        unsafe { launch.launch(config) }
            .map_err(|e| GpuError::during("launching the fill kernel", e))?;
        Ok(())
    }
}

impl Accelerator for Gpu {
    fn memory(&self) -> Result<(u64, u64), GpuError> {
        self.bind()?;
        let (free, total) =
            drv::mem_get_info().map_err(|e| GpuError::during("reading free memory", e))?;
        Ok((free as u64, total as u64))
    }

    fn gemm(&mut self, request: &GemmRequest) -> Result<GemmRun, GpuError> {
        self.bind()?;
        let Some(lt) = &self.gemm else {
            return Err(GpuError(
                "cuBLASLt library (libcublasLt.so) not found: install the CUDA runtime".into(),
            ));
        };
        gemm::run(self, lt, request)
    }

    fn copy(&mut self, request: &CopyRequest) -> Result<Vec<f64>, GpuError> {
        self.bind()?;
        copy::run(self, request)
    }
}

/// Device memory allocated with cuMemAlloc, freed on drop.
pub(crate) struct DeviceBuffer {
    pub ptr: CUdeviceptr,
    pub bytes: u64,
}

impl DeviceBuffer {
    pub fn new(bytes: u64) -> Result<DeviceBuffer, GpuError> {
        // SAFETY: plain allocation in the current context.
        let ptr = unsafe { drv::malloc_sync(bytes as usize) }.map_err(|e| {
            GpuError::during(&format!("allocating {} MiB on the GPU", bytes >> 20), e)
        })?;
        Ok(DeviceBuffer { ptr, bytes })
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // SAFETY: ptr came from malloc_sync and is freed once.
        let _ = unsafe { drv::free_sync(self.ptr) };
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
        let ptr = unsafe { drv::malloc_host(bytes as usize, 0) }.map_err(|e| {
            GpuError::during(&format!("pinning {} MiB of host memory", bytes >> 20), e)
        })?;
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
