//! The detectors' settings, with defaults for an H200 SXM.

use crate::alert::GateConfig;

/// Every threshold and window of the detectors.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Utilization (%) from which the GPU counts as fully loaded.
    pub busy_util_pct: f64,
    /// Seconds over which the recent maximum power (the load a temperature answers to) is
    /// taken.
    pub load_window_s: f64,
    /// Width of the power bins of the thermal envelope, W.
    pub envelope_bin_w: f64,
    /// Extrapolation of the envelope above the highest power seen, °C per W.
    pub envelope_slope_c_per_w: f64,
    /// The GPU temperature limit, °C. The H200 SXM's max operating temperature is 87 °C
    /// (`nvidia-smi -q` on our card: 37 °C current with 50 °C of T.Limit margin).
    pub thermal_limit_c: f64,
    /// The memory (HBM) temperature limit, °C (an assumption: set it from your GPU's data).
    pub mem_thermal_limit_c: f64,
    /// °C above the healthy envelope that raise a thermal warning.
    pub thermal_margin_c: f64,
    /// °C above the healthy envelope that are critical.
    pub thermal_critical_excess_c: f64,
    /// Seconds of history the temperature slope is fitted on.
    pub slope_window_s: f64,
    /// Consecutive samples a condition must hold before most detectors speak.
    pub persist_samples: usize,
    /// Fraction below the healthy SM clock at full load that counts as a drop.
    pub sm_clock_drop_fraction: f64,
    /// Fraction below the healthy memory clock that counts as a drop.
    pub mem_clock_drop_fraction: f64,
    /// Fraction below the GPU's own capped power that a power cap at full load must reach to
    /// count as a lowered limit.
    pub power_cap_drop_fraction: f64,
    /// Seconds memory must keep growing before it counts as a leak.
    pub leak_min_duration_s: f64,
    /// MiB memory must grow by before it counts as a leak.
    pub leak_min_increase_mib: f64,
    /// Total device memory, MiB, for the time-to-full of a leak (else used + free when read).
    pub mem_total_mib: Option<f64>,
    /// Seconds over which counter increases are summed.
    pub counter_window_s: f64,
    /// Corrected ECC errors within the window that make a burst.
    pub ecc_corrected_burst: u64,
    /// PCIe replays within the window that make a burst.
    pub pcie_replay_burst: u64,
    /// A temperature unchanged while power swung by this many W is frozen.
    pub frozen_power_swing_w: f64,
    /// Fraction of lost performance that raises a warning (a quarter more is critical).
    pub perf_decay_fraction: f64,
    /// Figures of a GPU's own that form its performance baseline when the training history
    /// has none.
    pub perf_baseline_points: usize,
    /// Trees of the isolation forest (0 turns the multivariate detector off).
    pub forest_trees: usize,
    /// Rows each tree is built on.
    pub forest_sample_size: usize,
    /// Seed of the forest's random splits.
    pub forest_seed: u64,
    /// Margin above the highest training score that counts as anomalous.
    pub forest_margin: f64,
    /// Consecutive anomalous samples before the multivariate detector speaks.
    pub forest_persist_samples: usize,
    /// De-duplication and cool-down.
    pub gate: GateConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            busy_util_pct: 90.0,
            load_window_s: 10.0,
            envelope_bin_w: 25.0,
            envelope_slope_c_per_w: 0.05,
            thermal_limit_c: 87.0,
            mem_thermal_limit_c: 95.0,
            thermal_margin_c: 4.0,
            thermal_critical_excess_c: 12.0,
            slope_window_s: 10.0,
            persist_samples: 2,
            sm_clock_drop_fraction: 0.05,
            mem_clock_drop_fraction: 0.02,
            power_cap_drop_fraction: 0.10,
            leak_min_duration_s: 60.0,
            leak_min_increase_mib: 1024.0,
            mem_total_mib: None,
            counter_window_s: 60.0,
            ecc_corrected_burst: 10,
            pcie_replay_burst: 5,
            frozen_power_swing_w: 200.0,
            perf_decay_fraction: 0.10,
            perf_baseline_points: 5,
            forest_trees: 100,
            forest_sample_size: 256,
            forest_seed: 0x5eed_0f9a_f0e5,
            forest_margin: 0.03,
            forest_persist_samples: 3,
            gate: GateConfig::default(),
        }
    }
}
