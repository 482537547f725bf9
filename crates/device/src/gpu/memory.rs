//! Memory integrity (pattern tests over most of the free memory, with NVML's health counters
//! before and after) and the read/write bandwidth sweep that shows the L2 and HBM plateaus.

use super::{read_counters, Gpu};
use crate::compute::{
    GpuError, MemtestRequest, MemtestRun, PatternResult, SweepPoint, SweepRequest, MEMORY_PATTERNS,
};
use crate::during::During;
use cudarc::driver::result as drv;
use cudarc::driver::PushKernelArg;

/// The largest share of free memory pog tries to take; it backs off in 1 % steps from here
/// down to the requested fraction if the allocation fails.
const MAX_FRACTION: f64 = 0.95;

pub(super) fn memtest(gpu: &Gpu, request: &MemtestRequest) -> Result<MemtestRun, GpuError> {
    let nvml = crate::nvml::init();
    let health = || match &nvml {
        Ok(nvml) => crate::telemetry::health_counters(nvml, gpu.bus_id).into(),
        Err(e) => crate::reading::Reading::unavailable(e.to_string()),
    };
    let health_before = health();
    let (free, _) = drv::mem_get_info().during("reading free memory")?;
    let free = free as u64;
    let mut fraction = MAX_FRACTION.max(request.fraction);
    let buffer = loop {
        let bytes = ((free as f64 * fraction) as u64) / 8 * 8;
        match gpu.alloc(bytes) {
            Ok(buffer) => break buffer,
            Err(e) if fraction - 0.01 < request.fraction => return Err(e),
            Err(_) => fraction -= 0.01,
        }
    };
    let words = buffer.bytes / 8;
    let counters = gpu.alloc(24)?;
    let mut patterns = Vec::new();
    for (pattern, name) in MEMORY_PATTERNS.iter().enumerate() {
        let pattern = pattern as i32;
        let write_ms = gpu.time(|| {
            let mut launch = gpu.stream.launch_builder(&gpu.kernels.pattern_write);
            launch
                .arg(&buffer.ptr)
                .arg(&words)
                .arg(&pattern)
                .arg(&request.seed);
            // SAFETY: the buffer holds `words` u64.
            unsafe { launch.launch(gpu.geometry(words)) }
                .map(|_| ())
                .during("launching the pattern writer")
        })?;
        // counters = [0, 0, u64::MAX]
        let init: [u64; 3] = [0, 0, u64::MAX];
        // On the stream: a pageable "synchronous" copy may land after later work on this
        // stream has started (see `prove::read_hashes`).
        // SAFETY: counters holds three u64; the copy is staged before this returns.
        unsafe { drv::memcpy_htod_async(counters.ptr, &init[..], gpu.stream.cu_stream()) }
            .during("clearing counters")?;
        let check_ms = gpu.time(|| {
            let mut launch = gpu.stream.launch_builder(&gpu.kernels.pattern_check);
            launch
                .arg(&buffer.ptr)
                .arg(&words)
                .arg(&pattern)
                .arg(&request.seed)
                .arg(&counters.ptr);
            // SAFETY: reads `words` u64 of the buffer, writes three u64 counters.
            unsafe { launch.launch(gpu.geometry(words)) }
                .map(|_| ())
                .during("launching the pattern checker")
        })?;
        let [bad_words, bad_bits, first] = read_counters::<3>(&counters)?;
        patterns.push(PatternResult {
            pattern: name.to_string(),
            bad_words,
            bad_bits,
            first_bad_offset: (first != u64::MAX).then_some(first * 8),
            write_ms,
            check_ms,
        });
    }
    drop(buffer);
    Ok(MemtestRun {
        bytes_tested: words * 8,
        free_bytes: free,
        patterns,
        health_before,
        health_after: health(),
    })
}

/// Bytes one launch of a probe should move, so launch overhead stays below 1 %.
const BYTES_PER_LAUNCH: u64 = 1 << 30;

pub(super) fn sweep(gpu: &Gpu, request: &SweepRequest) -> Result<Vec<SweepPoint>, GpuError> {
    let largest = request.sizes.iter().copied().max().unwrap_or(0).max(16);
    let buffer = gpu.alloc(largest)?;
    let sink = gpu.alloc(8)?;
    let mut points = Vec::new();
    for &bytes in &request.sizes {
        let vectors = (bytes / 16).max(1);
        let passes = (BYTES_PER_LAUNCH / (vectors * 16)).max(1);
        let value = 0x5a5a_5a5au32;
        let launch_probe = |read: bool, launches: u32| {
            gpu.time(|| {
                for _ in 0..launches {
                    let f = if read {
                        &gpu.kernels.read
                    } else {
                        &gpu.kernels.write
                    };
                    let mut launch = gpu.stream.launch_builder(f);
                    launch.arg(&buffer.ptr).arg(&vectors).arg(&passes);
                    if read {
                        launch.arg(&sink.ptr);
                    } else {
                        launch.arg(&value);
                    }
                    // SAFETY: the probes touch `vectors` 16-byte elements of the buffer (and one
                    // u64 of sink).
                    unsafe { launch.launch(gpu.geometry(vectors)) }
                        .during("launching a bandwidth probe")?;
                }
                Ok(())
            })
        };
        // Warm both, calibrate on one launch, then time enough launches to last min_ms.
        launch_probe(false, 1)?;
        let once = launch_probe(true, 1)?.max(1e-3);
        let launches = ((request.min_ms / once).ceil() as u32).clamp(1, 10_000);
        let moved = (vectors * 16 * passes) as f64 * f64::from(launches);
        let read_ms = launch_probe(true, launches)?;
        let write_ms = launch_probe(false, launches)?;
        points.push(SweepPoint {
            bytes: vectors * 16,
            read_gbs: moved / (read_ms * 1e-3) / 1e9,
            write_gbs: moved / (write_ms * 1e-3) / 1e9,
        });
    }
    Ok(points)
}
