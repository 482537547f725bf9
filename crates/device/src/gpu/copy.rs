//! Copy benchmarks: device↔device, host↔device pinned and pageable, and both directions at
//! once, each run timed with CUDA events on the stream that does the work.

use super::{DeviceBuffer, Gpu, PinnedBuffer};
use crate::compute::{CopyKind, CopyRequest, GpuError};
use cudarc::driver::result as drv;

pub(super) fn run(gpu: &Gpu, request: &CopyRequest) -> Result<Vec<f64>, GpuError> {
    let bytes = request.bytes;
    let stream = gpu.stream.cu_stream();
    let src = DeviceBuffer::new(bytes)?;
    let dst = DeviceBuffer::new(bytes)?;
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
    let second = gpu
        .ctx
        .new_stream()
        .map_err(|e| GpuError::during("creating a second stream", e))?;
    let (start, end, other_done) = (gpu.event()?, gpu.event()?, gpu.event()?);
    let mut times = Vec::with_capacity(request.iterations as usize);
    for i in 0..request.warmup + request.iterations {
        start
            .record(&gpu.stream)
            .map_err(|e| GpuError::during("recording an event", e))?;
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
                    second
                        .wait(&start)
                        .map_err(|e| GpuError::during("joining streams", e))?;
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
                    other_done
                        .record(&second)
                        .map_err(|e| GpuError::during("recording an event", e))?;
                    gpu.stream
                        .wait(&other_done)
                        .map_err(|e| GpuError::during("joining streams", e))?;
                    up.and(down)
                }
            }
        };
        issued.map_err(|e| {
            GpuError::during(
                &format!("{:?} copy of {} MiB", request.kind, bytes >> 20),
                e,
            )
        })?;
        end.record(&gpu.stream)
            .map_err(|e| GpuError::during("recording an event", e))?;
        end.synchronize()
            .map_err(|e| GpuError::during("waiting for a copy", e))?;
        if i >= request.warmup {
            times.push(f64::from(
                start
                    .elapsed_ms(&end)
                    .map_err(|e| GpuError::during("reading an event timer", e))?,
            ));
        }
    }
    gpu.sync()?;
    Ok(times)
}
