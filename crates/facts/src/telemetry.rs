//! Telemetry read during benchmarks: NVML samples of clocks, power, temperature and
//! clock-event (throttle) reasons, and the memory-health counters read before and after a
//! memory test. The sampler itself lives in `pog-device`.

use crate::facts::RemappedRows;
use crate::reading::Reading;
use serde::{Deserialize, Serialize};

/// One NVML reading. Fields NVML could not read are `None`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TelemetrySample {
    /// Seconds since sampling started.
    pub t_s: f64,
    /// SM clock, MHz.
    pub sm_clock_mhz: Option<u32>,
    /// Memory clock, MHz.
    pub memory_clock_mhz: Option<u32>,
    /// Power draw, watts.
    pub power_w: Option<f64>,
    /// GPU temperature, °C.
    pub temperature_c: Option<u32>,
    /// NVML clock-event ("throttle") reason bits: 0x4 software power cap, 0x8 hardware
    /// slowdown, 0x20 software thermal, 0x40 hardware thermal, 0x80 power brake.
    pub clock_event_reasons: Option<u64>,
    /// GPU utilization, percent.
    pub gpu_utilization: Option<u32>,
}

/// Memory-health counters, compared before and after a memory test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HealthCounters {
    /// ECC errors corrected since the driver loaded.
    pub ecc_corrected_volatile: Reading<u64>,
    /// ECC errors not corrected since the driver loaded.
    pub ecc_uncorrected_volatile: Reading<u64>,
    /// Row-remapping counters.
    pub remapped_rows: Reading<RemappedRows>,
    /// Pages retired for any cause (single-bit and double-bit errors).
    pub retired_pages: Reading<u64>,
}
