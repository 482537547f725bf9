//! Copy benchmarks: device↔device, host↔device pinned and pageable, and both directions at
//! once. Timed the way nvbandwidth times them: each run is queued behind a kernel that blocks
//! the stream until the host releases it, between two CUDA events, so the copies start back to
//! back on the GPU and the host's enqueue latency stays out of the measurement.

use super::{Gpu, PinnedBuffer};
use crate::compute::{CopyKind, CopyRequest, GpuError};
use crate::during::During;
use cudarc::driver::result as drv;
use cudarc::driver::sys::{self, CUdeviceptr};
use cudarc::driver::PushKernelArg;

pub(super) fn run(gpu: &Gpu, request: &CopyRequest) -> Result<Vec<f64>, GpuError> {
    let bytes = request.bytes;
    let stream = gpu.stream.cu_stream();
    let src = gpu.alloc(bytes)?;
    let dst = gpu.alloc(bytes)?;
    let mut pinned = match request.kind {
        CopyKind::HostToDevicePinned
        | CopyKind::DeviceToHostPinned
        | CopyKind::BidirectionalPinned => Some(PinnedBuffer::new(bytes)?),
        _ => None,
    };
    let mut pinned_back = match request.kind {
        CopyKind::BidirectionalPinned => Some(PinnedBuffer::new(bytes)?),
        _ => None,
    };
    let mut pageable = match request.kind {
        CopyKind::HostToDevicePageable | CopyKind::DeviceToHostPageable => {
            vec![0x5au8; bytes as usize]
        }
        _ => Vec::new(),
    };
    let second = gpu.ctx.new_stream().during("creating a second stream")?;
    let (start, end, other_done) = (gpu.event()?, gpu.event()?, gpu.event()?);
    // A pageable copy blocks the host until it is done, so it cannot be queued behind a gate
    // the host opens afterwards: those are timed from the host's enqueue like cudaMemcpy is.
    let host_blocking = matches!(
        request.kind,
        CopyKind::HostToDevicePageable | CopyKind::DeviceToHostPageable
    );
    let gate = if host_blocking {
        None
    } else {
        Some(Gate::new()?)
    };
    let mut times = Vec::with_capacity(request.iterations as usize);
    for i in 0..request.warmup + request.iterations {
        if let Some(gate) = &gate {
            gate.hold(gpu)?;
        }
        start.record(&gpu.stream).during("recording an event")?;
        // SAFETY: every buffer holds `bytes` bytes and outlives the synchronize below.
        let issued = unsafe {
            match request.kind {
                CopyKind::DeviceToDevice => {
                    drv::memcpy_dtod_async(dst.ptr, src.ptr, bytes as usize, stream)
                }
                CopyKind::HostToDevicePinned => drv::memcpy_htod_async(
                    dst.ptr,
                    pinned.as_ref().map_or(&[][..], |p| p.as_slice()),
                    stream,
                ),
                CopyKind::DeviceToHostPinned => drv::memcpy_dtoh_async(
                    pinned.as_mut().map_or(&mut [][..], |p| p.as_mut_slice()),
                    src.ptr,
                    stream,
                ),
                CopyKind::HostToDevicePageable => {
                    drv::memcpy_htod_async(dst.ptr, &pageable, stream)
                }
                CopyKind::DeviceToHostPageable => {
                    drv::memcpy_dtoh_async(&mut pageable, src.ptr, stream)
                }
                CopyKind::BidirectionalPinned => {
                    // The second stream starts with the first and the first ends after both.
                    second.wait(&start).during("joining streams")?;
                    let up = drv::memcpy_htod_async(
                        dst.ptr,
                        pinned.as_ref().map_or(&[][..], |p| p.as_slice()),
                        stream,
                    );
                    let down = drv::memcpy_dtoh_async(
                        pinned_back
                            .as_mut()
                            .map_or(&mut [][..], |p| p.as_mut_slice()),
                        src.ptr,
                        second.cu_stream(),
                    );
                    other_done.record(&second).during("recording an event")?;
                    gpu.stream.wait(&other_done).during("joining streams")?;
                    up.and(down)
                }
            }
        };
        issued.during(&format!(
            "{} copy of {} MiB",
            request.kind.name(),
            bytes >> 20
        ))?;
        end.record(&gpu.stream).during("recording an event")?;
        if let Some(gate) = &gate {
            gate.release();
        }
        end.synchronize().during("waiting for a copy")?;
        if i >= request.warmup {
            times.push(f64::from(
                start.elapsed_ms(&end).during("reading an event timer")?,
            ));
        }
    }
    gpu.sync()?;
    Ok(times)
}

/// A flag in mapped pinned memory that `pog_wait` spins on.
struct Gate {
    host: *mut i32,
    device: CUdeviceptr,
}

/// How long `pog_wait` spins before giving up: about 5 s at 2 GHz, far longer than queuing a
/// copy takes, short enough that a lost release cannot hang the GPU.
const GATE_TIMEOUT_CYCLES: i64 = 10_000_000_000;

impl Gate {
    fn new() -> Result<Gate, GpuError> {
        // SAFETY: 4 bytes of page-locked memory, mapped into the device's address space.
        let host = unsafe { drv::malloc_host(4, sys::CU_MEMHOSTALLOC_DEVICEMAP) }
            .during("allocating the copy gate")? as *mut i32;
        let mut device: CUdeviceptr = 0;
        // SAFETY: host came from cuMemHostAlloc with DEVICEMAP.
        unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device, host as *mut std::ffi::c_void, 0) }
            .result()
            .during("mapping the copy gate")?;
        Ok(Gate { host, device })
    }

    /// Closes the gate and queues the kernel that waits on it.
    fn hold(&self, gpu: &Gpu) -> Result<(), GpuError> {
        // SAFETY: host points to 4 live bytes; the GPU is not reading them yet.
        unsafe { std::ptr::write_volatile(self.host, 0) };
        let mut launch = gpu.stream.launch_builder(&gpu.kernels.wait);
        launch.arg(&self.device).arg(&GATE_TIMEOUT_CYCLES);
        // SAFETY: the kernel reads one int through the mapped pointer.
        unsafe { launch.launch(super::ONE_THREAD) }
            .map(|_| ())
            .during("launching the copy gate")
    }

    /// Opens the gate: the queued copies start.
    fn release(&self) {
        // SAFETY: host points to 4 live bytes of mapped memory.
        unsafe { std::ptr::write_volatile(self.host, 1) };
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        // SAFETY: host came from malloc_host and is freed once.
        let _ = unsafe { drv::free_host(self.host as *mut std::ffi::c_void) };
    }
}
