//! Telemetry during benchmarks, read through NVML: samples of clocks, power, temperature and clock-event
//! (throttle) reasons on a background thread, and the memory-health counters read before and
//! after a memory test.

use crate::nvml::NvmlInitError;
use crate::pci::BusId;
use crate::reading::Reading;
use nvml_wrapper::enum_wrappers::device::{Clock, EccCounter, MemoryError, TemperatureSensor};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;
pub use pog_facts::telemetry::{HealthCounters, TelemetrySample};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Why telemetry or health counters could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// NVML itself is unavailable.
    #[error(transparent)]
    Nvml(#[from] NvmlInitError),
    /// NVML is loaded but has no GPU at this bus id.
    #[error("NVML has no GPU at {bus_id}: {error}")]
    NoGpu {
        /// The bus id asked for.
        bus_id: BusId,
        /// NVML's answer.
        error: NvmlError,
    },
    /// The sampling thread panicked; its samples are lost.
    #[error("the telemetry thread panicked")]
    Panicked,
}

/// Samples one GPU on a background thread until stopped.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Result<Vec<TelemetrySample>, TelemetryError>>,
}

impl Sampler {
    /// Starts sampling the GPU at `bus_id` every `interval`.
    pub fn start(bus_id: BusId, interval: Duration) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let nvml = crate::nvml::init()?;
            let device = nvml
                .device_by_pci_bus_id(bus_id.to_string())
                .map_err(|error| TelemetryError::NoGpu { bus_id, error })?;
            let started = Instant::now();
            let mut samples = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                samples.push(TelemetrySample {
                    t_s: started.elapsed().as_secs_f64(),
                    sm_clock_mhz: device.clock_info(Clock::SM).ok(),
                    memory_clock_mhz: device.clock_info(Clock::Memory).ok(),
                    power_w: device.power_usage().ok().map(|mw| f64::from(mw) / 1000.0),
                    temperature_c: device.temperature(TemperatureSensor::Gpu).ok(),
                    clock_event_reasons: device.current_throttle_reasons().ok().map(|r| r.bits()),
                    gpu_utilization: device.utilization_rates().ok().map(|u| u.gpu),
                });
                std::thread::sleep(interval);
            }
            Ok(samples)
        });
        Sampler { stop, handle }
    }

    /// Stops sampling and returns the samples (or why there are none).
    pub fn stop(self) -> Reading<Vec<TelemetrySample>> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle
            .join()
            .unwrap_or(Err(TelemetryError::Panicked))
            .into()
    }
}

/// Reads the memory-health counters of the GPU at `bus_id`.
pub fn health_counters(nvml: &Nvml, bus_id: BusId) -> Result<HealthCounters, TelemetryError> {
    use nvml_wrapper::enum_wrappers::device::RetirementCause;
    let device = nvml
        .device_by_pci_bus_id(bus_id.to_string())
        .map_err(|error| TelemetryError::NoGpu { bus_id, error })?;
    let nv =
        |r: Result<u64, NvmlError>| -> Reading<u64> { r.map_err(|e| format!("NVML: {e}")).into() };
    let retired = |cause| device.retired_pages(cause).map(|p| p.len() as u64);
    Ok(HealthCounters {
        ecc_corrected_volatile: nv(
            device.total_ecc_errors(MemoryError::Corrected, EccCounter::Volatile)
        ),
        ecc_uncorrected_volatile: nv(
            device.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile)
        ),
        remapped_rows: crate::nvml::remapped_rows(nvml, &device),
        retired_pages: nv(retired(RetirementCause::MultipleSingleBitEccErrors)
            .and_then(|s| retired(RetirementCause::DoubleBitEccError).map(|d| s + d))),
    })
}
