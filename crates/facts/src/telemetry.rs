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
    pub sm_clock_mhz: Option<u32>,
    pub memory_clock_mhz: Option<u32>,
    pub power_w: Option<f64>,
    pub temperature_c: Option<u32>,
    /// NVML clock-event ("throttle") reason bits: 0x4 software power cap, 0x8 hardware
    /// slowdown, 0x20 software thermal, 0x40 hardware thermal, 0x80 power brake.
    pub clock_event_reasons: Option<u64>,
    pub gpu_utilization: Option<u32>,
}

/// Memory-health counters, compared before and after a memory test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HealthCounters {
    pub ecc_corrected_volatile: Reading<u64>,
    pub ecc_uncorrected_volatile: Reading<u64>,
    pub remapped_rows: Reading<RemappedRows>,
    pub retired_pages: Reading<u64>,
}
