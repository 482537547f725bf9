//! One reading of one GPU: every field the sampler can read, each `None` when it was not read
//! (unsupported by the GPU, an NVML error, or an empty cell in a trace).

use serde::{Deserialize, Serialize};

/// One sample of one GPU's telemetry at time `t`.
///
/// Units are in the field names: `_c` degrees Celsius, `_w` watts, `_mj` millijoules,
/// `_pct` percent, `_mib` MiB, `_mhz` MHz, `_kbs` KB/s. Counters (`pcie_replay`, `ecc_*`,
/// `retired_pages`, `remapped_rows`, `energy_mj`) are totals as NVML reports them; the
/// detectors look at their increases.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Seconds since the start of the trace (or any fixed origin).
    pub t: f64,
    /// A free label of what ran (a trace's `phase` column); never used by the detectors.
    pub phase: Option<String>,
    /// GPU (die) temperature.
    pub temp_gpu_c: Option<f64>,
    /// Memory (HBM) temperature.
    pub temp_mem_c: Option<f64>,
    /// Power draw.
    pub power_w: Option<f64>,
    /// Total energy consumed since the driver was loaded.
    pub energy_mj: Option<f64>,
    /// GPU utilization: percent of time a kernel ran.
    pub util_gpu_pct: Option<f64>,
    /// Memory utilization: percent of time memory was read or written.
    pub util_mem_pct: Option<f64>,
    /// Device memory in use.
    pub mem_used_mib: Option<f64>,
    /// Device memory free.
    pub mem_free_mib: Option<f64>,
    /// Device memory reserved by the driver.
    pub mem_reserved_mib: Option<f64>,
    /// SM clock.
    pub sm_clock_mhz: Option<f64>,
    /// Memory clock.
    pub mem_clock_mhz: Option<f64>,
    /// Clock-event (throttle) reasons, NVML's bit flags ([`reasons`]).
    pub clock_reasons: Option<u64>,
    /// PCIe transmit throughput.
    pub pcie_tx_kbs: Option<f64>,
    /// PCIe receive throughput.
    pub pcie_rx_kbs: Option<f64>,
    /// PCIe replay counter (total).
    pub pcie_replay: Option<u64>,
    /// ECC corrected errors, volatile (since the driver loaded).
    pub ecc_corr: Option<u64>,
    /// ECC uncorrected errors, volatile.
    pub ecc_uncorr: Option<u64>,
    /// ECC corrected errors, aggregate (over the GPU's life).
    pub ecc_corr_aggregate: Option<u64>,
    /// ECC uncorrected errors, aggregate.
    pub ecc_uncorr_aggregate: Option<u64>,
    /// Retired memory pages (older GPUs).
    pub retired_pages: Option<u64>,
    /// Remapped memory rows (Ampere and later), correctable plus uncorrectable.
    pub remapped_rows: Option<u64>,
    /// Of [`Sample::remapped_rows`], the rows remapped for uncorrectable errors, when the
    /// reading told them apart (the live sampler does; older traces did not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remapped_rows_uncorrectable: Option<u64>,
    /// Fan speed, where the GPU has a fan.
    pub fan_pct: Option<f64>,
    /// Number of processes using the GPU.
    pub processes: Option<u32>,
    /// XID error codes that arrived since the previous sample (NVML event sets). Empty when
    /// none arrived or XIDs are not watched.
    pub xid: Vec<u32>,
    /// A benchmark figure finished at this sample (TFLOP/s, higher is better), if any.
    pub bench_tflops: Option<f64>,
    /// A validator-timed proof finished at this sample: its time over its bound (lower is
    /// better), if any.
    pub proof_ratio: Option<f64>,
    /// Signals whose value is the last reading carried over from an earlier sample, not read
    /// at this one: the live sampler reads its costly fields only every few samples, and in
    /// between a sample shows the latest reading (so `/metrics` series stay continuous). A
    /// recorded trace leaves them empty (not read), and the frozen-sensor check does not
    /// count them as seen again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub carried: Vec<Signal>,
    /// The GPU's NVLink links, where it has NVLink and they were read (`None`: no NVLink, or
    /// not read; a recorded trace has no NVLink columns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink: Option<NvLinks>,
    /// Profiling metrics (NVML's GPM, Hopper and newer: dcgm-exporter's `DCGM_FI_PROF_*`) over
    /// the interval since the previous reading (`None`: no GPM, or not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profiling: Option<Profiling>,
}

/// A GPU's profiling metrics over an interval, as NVML's GPU performance monitoring (GPM)
/// computes them from two samples, in the units of dcgm-exporter's `DCGM_FI_PROF_*` fields:
/// activities as fractions of the interval (0 to 1), traffic in bytes per second. Each `None`
/// where the GPU does not report it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Profiling {
    /// Fraction of time the graphics or compute engine was active (`DCGM_FI_PROF_GR_ENGINE_ACTIVE`).
    pub gr_engine_active: Option<f64>,
    /// Fraction of time an SM had a warp resident, averaged over the SMs (`DCGM_FI_PROF_SM_ACTIVE`).
    pub sm_active: Option<f64>,
    /// Resident warps over the SMs' maximum, averaged (`DCGM_FI_PROF_SM_OCCUPANCY`).
    pub sm_occupancy: Option<f64>,
    /// Fraction of time any tensor pipe was active (`DCGM_FI_PROF_PIPE_TENSOR_ACTIVE`).
    pub tensor_active: Option<f64>,
    /// Fraction of the DRAM bandwidth used (`DCGM_FI_PROF_DRAM_ACTIVE`).
    pub dram_active: Option<f64>,
    /// Fraction of time the FP64 pipe was active (`DCGM_FI_PROF_PIPE_FP64_ACTIVE`).
    pub fp64_active: Option<f64>,
    /// Fraction of time the FP32 pipe was active (`DCGM_FI_PROF_PIPE_FP32_ACTIVE`).
    pub fp32_active: Option<f64>,
    /// Fraction of time the FP16 pipe was active (`DCGM_FI_PROF_PIPE_FP16_ACTIVE`).
    pub fp16_active: Option<f64>,
    /// PCIe bytes transmitted per second (`DCGM_FI_PROF_PCIE_TX_BYTES`).
    pub pcie_tx_bytes_s: Option<f64>,
    /// PCIe bytes received per second (`DCGM_FI_PROF_PCIE_RX_BYTES`).
    pub pcie_rx_bytes_s: Option<f64>,
    /// NVLink bytes transmitted per second, all links (`DCGM_FI_PROF_NVLINK_TX_BYTES`).
    pub nvlink_tx_bytes_s: Option<f64>,
    /// NVLink bytes received per second, all links (`DCGM_FI_PROF_NVLINK_RX_BYTES`).
    pub nvlink_rx_bytes_s: Option<f64>,
}

/// A GPU's NVLink links at one sample.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NvLinks {
    /// Each link NVML reports, in link order.
    pub links: Vec<NvLinkSample>,
    /// Data received and transmitted over all links together since the previous reading, in
    /// MB/s as DCGM computes `DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL` (the KiB counters' increase
    /// per second, over 1000); `None` at the first reading, after a counter went backwards, or
    /// when the counters could not be read.
    pub bandwidth_mbs: Option<f64>,
}

/// One NVLink link: whether it is up, and its error counters (totals since the driver loaded,
/// each `None` when its reading failed).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvLinkSample {
    /// The link's number on its GPU (0 to 17 on Hopper).
    pub link: u32,
    /// Whether the link is up (`None`: its state could not be read).
    pub active: Option<bool>,
    /// Flow-control (flit) CRC errors.
    pub crc_flit: Option<u64>,
    /// Data CRC errors.
    pub crc_data: Option<u64>,
    /// Replays (retransmissions).
    pub replay: Option<u64>,
    /// Link recoveries.
    pub recovery: Option<u64>,
}

impl NvLinks {
    /// The links that are up.
    pub fn active(&self) -> usize {
        self.links.iter().filter(|l| l.active == Some(true)).count()
    }

    /// One error counter summed over the links, when every link's was read (a partial sum
    /// would look like a counter reset to a scraper's `rate`).
    pub fn total(&self, counter: fn(&NvLinkSample) -> Option<u64>) -> Option<u64> {
        self.links.iter().map(counter).sum::<Option<u64>>()
    }
}

/// A reading's load is memory-bound when the memory's utilization is at least this (%): a copy
/// runs the HBM hotter at 400 W than a GEMM does at 480 W, so what the history says of the
/// memory's temperature at a power holds only for the kinds of load it ran there.
pub const MEMORY_BOUND_UTIL_PCT: f64 = 50.0;

impl Sample {
    /// Whether its load is memory-bound: the memory's utilization at least
    /// [`MEMORY_BOUND_UTIL_PCT`].
    pub fn memory_bound(&self) -> bool {
        self.util_mem_pct
            .is_some_and(|u| u >= MEMORY_BOUND_UTIL_PCT)
    }

    /// The rows remapped for correctable errors: [`Sample::remapped_rows`] less
    /// [`Sample::remapped_rows_uncorrectable`], when both were read.
    pub fn remapped_rows_correctable(&self) -> Option<u64> {
        let (total, uncorrectable) = self.remapped_rows.zip(self.remapped_rows_uncorrectable)?;
        Some(total.saturating_sub(uncorrectable))
    }

    /// A sample at `t` with nothing read.
    pub fn at(t: f64) -> Sample {
        Sample {
            t,
            ..Sample::default()
        }
    }

    /// The value of a signal only when it was read at this sample (not [`Sample::carried`]).
    pub fn read_now(&self, signal: Signal) -> Option<f64> {
        if self.carried.contains(&signal) {
            None
        } else {
            self.signal(signal)
        }
    }

    /// The value of a numeric signal by its trace-column name, if read.
    pub fn signal(&self, signal: Signal) -> Option<f64> {
        match signal {
            Signal::TempGpu => self.temp_gpu_c,
            Signal::TempMem => self.temp_mem_c,
            Signal::Power => self.power_w,
            Signal::Energy => self.energy_mj,
            Signal::UtilGpu => self.util_gpu_pct,
            Signal::UtilMem => self.util_mem_pct,
            Signal::MemUsed => self.mem_used_mib,
            Signal::SmClock => self.sm_clock_mhz,
            Signal::MemClock => self.mem_clock_mhz,
            Signal::PcieTx => self.pcie_tx_kbs,
            Signal::PcieRx => self.pcie_rx_kbs,
        }
    }
}

/// The continuous signals the detectors and the downsampler work on, named as trace columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Signal {
    /// `temp_gpu`, °C.
    TempGpu,
    /// `temp_mem`, °C.
    TempMem,
    /// `power_w`, W.
    Power,
    /// `energy_mj`, mJ.
    Energy,
    /// `util_gpu`, %.
    UtilGpu,
    /// `util_mem`, %.
    UtilMem,
    /// `mem_used_mib`, MiB.
    MemUsed,
    /// `sm_clock`, MHz.
    SmClock,
    /// `mem_clock`, MHz.
    MemClock,
    /// `pcie_tx_kbs`, KB/s.
    PcieTx,
    /// `pcie_rx_kbs`, KB/s.
    PcieRx,
}

impl Signal {
    /// Every signal, in trace-column order.
    pub const ALL: [Signal; 11] = [
        Signal::TempGpu,
        Signal::TempMem,
        Signal::Power,
        Signal::Energy,
        Signal::UtilGpu,
        Signal::UtilMem,
        Signal::MemUsed,
        Signal::SmClock,
        Signal::MemClock,
        Signal::PcieTx,
        Signal::PcieRx,
    ];

    /// The signal's trace-column name (also its name in alerts).
    pub fn name(self) -> &'static str {
        match self {
            Signal::TempGpu => "temp_gpu",
            Signal::TempMem => "temp_mem",
            Signal::Power => "power_w",
            Signal::Energy => "energy_mj",
            Signal::UtilGpu => "util_gpu",
            Signal::UtilMem => "util_mem",
            Signal::MemUsed => "mem_used_mib",
            Signal::SmClock => "sm_clock",
            Signal::MemClock => "mem_clock",
            Signal::PcieTx => "pcie_tx_kbs",
            Signal::PcieRx => "pcie_rx_kbs",
        }
    }
}

/// NVML's clock-event (throttle) reason bits (`nvmlClocksEventReason*` in `nvml.h`).
pub mod reasons {
    /// Nothing runs on the GPU; clocks drop to idle.
    pub const GPU_IDLE: u64 = 0x1;
    /// Clocks limited by the applications-clocks setting.
    pub const APPLICATIONS_CLOCKS: u64 = 0x2;
    /// Software power cap: the normal state of an H200 under full GEMM load.
    pub const SW_POWER_CAP: u64 = 0x4;
    /// Hardware slowdown (thermal or power brake, or an external signal).
    pub const HW_SLOWDOWN: u64 = 0x8;
    /// Sync boost (clocks held with other GPUs).
    pub const SYNC_BOOST: u64 = 0x10;
    /// Software thermal slowdown: the GPU or memory is above its operating limit.
    pub const SW_THERMAL: u64 = 0x20;
    /// Hardware thermal slowdown: the temperature is far too high.
    pub const HW_THERMAL: u64 = 0x40;
    /// Hardware power-brake slowdown: an external power brake (e.g. the PSU) asserted.
    pub const HW_POWER_BRAKE: u64 = 0x80;
    /// Clocks held by the display-clock setting.
    pub const DISPLAY_CLOCKS: u64 = 0x100;

    /// The reasons that mean the GPU is slowed by a fault (heat or hardware), as opposed to
    /// idling or the software power cap.
    pub const FAULTS: u64 = HW_SLOWDOWN | SW_THERMAL | HW_THERMAL | HW_POWER_BRAKE;

    /// The names of the bits set in `bits`, lowest bit first.
    pub fn names(bits: u64) -> Vec<&'static str> {
        [
            (GPU_IDLE, "gpu_idle"),
            (APPLICATIONS_CLOCKS, "applications_clocks"),
            (SW_POWER_CAP, "sw_power_cap"),
            (HW_SLOWDOWN, "hw_slowdown"),
            (SYNC_BOOST, "sync_boost"),
            (SW_THERMAL, "sw_thermal_slowdown"),
            (HW_THERMAL, "hw_thermal_slowdown"),
            (HW_POWER_BRAKE, "hw_power_brake"),
            (DISPLAY_CLOCKS, "display_clocks"),
        ]
        .into_iter()
        .filter(|(bit, _)| bits & bit != 0)
        .map(|(_, name)| name)
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reason_names_follow_nvml_bits() {
        assert_eq!(reasons::names(0x4), vec!["sw_power_cap"]);
        assert_eq!(
            reasons::names(0x1 | 0x20 | 0x80),
            vec!["gpu_idle", "sw_thermal_slowdown", "hw_power_brake"]
        );
        assert!(reasons::names(0).is_empty());
        assert_eq!(reasons::FAULTS & reasons::SW_POWER_CAP, 0);
    }

    #[test]
    fn signals_read_their_fields() {
        let mut s = Sample::at(1.0);
        s.sm_clock_mhz = Some(1980.0);
        assert_eq!(s.signal(Signal::SmClock), Some(1980.0));
        assert_eq!(s.signal(Signal::TempGpu), None);
        assert_eq!(Signal::ALL.len(), 11);
        assert_eq!(Signal::MemUsed.name(), "mem_used_mib");
    }
}
