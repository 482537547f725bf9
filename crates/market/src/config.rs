//! The score's and the price's parameters: weights, references, thresholds, caps and the price
//! curve, read from TOML. The defaults are embedded (`data/market.toml`, where each value is
//! explained and sourced); another file of the same shape may replace them, and every value is
//! checked when it loads, so a [`Config`] that exists is a usable one.

use serde::{Deserialize, Serialize};

/// The embedded defaults, as text.
pub const DEFAULT_TOML: &str = include_str!("../data/market.toml");

/// Everything the score and the price read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The score's weights, references, thresholds and reliability.
    pub score: ScoreConfig,
    /// The price curve and the classes' $ per TFLOP-hour.
    pub price: PriceConfig,
}

/// The score's parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScoreConfig {
    /// The four parts' shares of the score.
    pub weights: PartWeights,
    /// How a figure's ratio to its reference becomes what it counts.
    pub normalize: Normalize,
    /// One GPU: its figures' weights and the reference GPU.
    pub gpu: GpuConfig,
    /// How several GPUs in a host add up.
    pub multi_gpu: MultiGpu,
    /// The CPU part's reference.
    pub cpu: CpuConfig,
    /// The RAM part's weights and references.
    pub ram: RamConfig,
    /// The storage part's weights and references.
    pub storage: StorageConfig,
    /// The reliability multiplier's parameters.
    pub reliability: ReliabilityConfig,
}

/// The four parts' shares of the score; they sum to 1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartWeights {
    /// The GPUs' share (0.55 by default).
    pub gpu: f64,
    /// The CPU's share (0.20 by default).
    pub cpu: f64,
    /// The RAM's share (0.15 by default).
    pub ram: f64,
    /// The storage's share (0.10 by default).
    pub storage: f64,
}

/// How a figure's ratio to its reference becomes what it counts: nothing below `floor`, the
/// ratio up to 1, then `1 + above_slope (r − 1)` up to `cap`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Normalize {
    /// Below this ratio a figure counts nothing: too little to be of practical use.
    pub floor: f64,
    /// What each unit of ratio above 1 counts: a figure beyond the reference earns less.
    pub above_slope: f64,
    /// The most any figure counts, at least 1.
    pub cap: f64,
}

impl Normalize {
    /// What a figure counts, from its ratio to the reference (a ratio that is not a finite
    /// non-negative number counts nothing).
    pub fn apply(&self, ratio: f64) -> f64 {
        if !ratio.is_finite() || ratio < self.floor || ratio <= 0.0 {
            return 0.0;
        }
        if ratio <= 1.0 {
            return ratio.min(self.cap);
        }
        (1.0 + self.above_slope * (ratio - 1.0)).min(self.cap)
    }
}

/// One GPU's figures: their weights (summing to 1) and the reference GPU's values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuConfig {
    /// Weight of the FP16/BF16 tensor GEMM rate, the better of the two.
    pub tensor: f64,
    /// Weight of the FP32 GEMM rate.
    pub fp32: f64,
    /// Weight of the memory capacity.
    pub memory: f64,
    /// Weight of the memory bandwidth.
    pub bandwidth: f64,
    /// Weight of the sustained GEMM's median rate.
    pub sustained: f64,
    /// The reference GPU's model, as the spec database names it.
    pub reference_model: String,
    /// The reference GPU's FP16/BF16 tensor GEMM rate, TFLOP/s; also the verified TFLOP/s
    /// a GPU that counts 1 is priced as ([`crate::quote`]).
    pub reference_tensor_tflops: f64,
    /// The reference GPU's FP32 GEMM rate, TFLOP/s.
    pub reference_fp32_tflops: f64,
    /// The reference GPU's memory capacity, GiB (as the driver reports it).
    pub reference_memory_gib: f64,
    /// The reference GPU's memory bandwidth, GB/s.
    pub reference_bandwidth_gbs: f64,
    /// The reference GPU's sustained GEMM median, TFLOP/s.
    pub reference_sustained_tflops: f64,
}

/// Several GPUs in a host: the i-th best counts `decay^i`, at most `max_gpus` count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MultiGpu {
    /// What each next-best GPU counts relative to the one before, in (0, 1].
    pub decay: f64,
    /// The most GPUs that count in one host (8 by default: one HGX board).
    pub max_gpus: usize,
}

impl MultiGpu {
    /// The weights of the first `n` GPUs (best first), at most `max_gpus` of them.
    pub fn weights(&self, n: usize) -> impl Iterator<Item = f64> + '_ {
        (0..n.min(self.max_gpus)).map(|i| self.decay.powi(i as i32))
    }
}

/// The CPU part's reference: cores × per-core GFLOP/s, per GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuConfig {
    /// The reference host's all-core FP64 rate per GPU, GFLOP/s (a host's own benchmark is
    /// judged by it).
    pub reference_gflops: f64,
    /// The reference host's proof-of-CPU throughput per GPU, dependent steps a second over
    /// all its lanes on the validator's clock (a validator's `cpu-record` is judged by it).
    pub reference_steps_per_s: f64,
}

/// The RAM part: capacity and bandwidth weights (sum 1) and references, per GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RamConfig {
    /// Weight of the capacity.
    pub capacity: f64,
    /// Weight of the bandwidth.
    pub bandwidth: f64,
    /// The reference capacity per GPU, GiB.
    pub reference_gib: f64,
    /// The reference STREAM triad bandwidth per GPU, GB/s.
    pub reference_gbs: f64,
    /// The reference proof of RAM's walk per GPU, GB/s of item reads on the validator's
    /// clock (a `ram-record`): what a proven bandwidth counts against.
    pub reference_walk_gbs: f64,
}

/// The storage part: speed and capacity weights (sum 1) and references, per GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageConfig {
    /// Weight of the speed (the mean of the normalized read and write).
    pub speed: f64,
    /// Weight of the capacity.
    pub capacity: f64,
    /// The reference sequential read per GPU, MB/s (O_DIRECT).
    pub reference_read_mbs: f64,
    /// The reference sequential write per GPU, MB/s (O_DIRECT).
    pub reference_write_mbs: f64,
    /// The reference capacity per GPU, GB (10⁹ bytes).
    pub reference_gb: f64,
    /// The reference proof-of-storage walk per GPU, dependent 4 KiB reads a second on the
    /// validator's clock (a validator's `storage-record` is judged by it, speed alone).
    pub reference_reads_per_s: f64,
}

/// The reliability multiplier's parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReliabilityConfig {
    /// The proof factor of a GPU with no proof history yet: a newcomer is discounted, not
    /// zeroed.
    pub unknown_proof_rate: f64,
    /// A proof success rate at or below this counts 0; above it the factor rises linearly to 1.
    pub proof_floor: f64,
    /// An uptime at or below this counts 0; above it the factor rises linearly to 1.
    pub uptime_floor: f64,
    /// What each anomaly counted multiplies the reliability by.
    pub anomaly_factor: f64,
    /// The slow-down of a window's proofs against the GPU's earlier ones (`measured.decay` of
    /// a health record) above which the validator counts it as an anomaly.
    #[serde(default = "default_decay_threshold")]
    pub decay_threshold: f64,
    /// How many anomalies one such measured slow-down counts for (the agent's own alerts and
    /// XIDs count 1 each).
    #[serde(default = "default_measured_weight")]
    pub measured_weight: u32,
    /// XID codes that are not counted: faults of the renter's application, not of the GPU.
    #[serde(default = "default_ignored_xids")]
    pub ignored_xids: Vec<u32>,
}

/// The default of [`ReliabilityConfig::decay_threshold`]: 10 %, the validator's own threshold
/// for calling a quiet health report beside slower proofs a contradiction.
pub const DEFAULT_DECAY_THRESHOLD: f64 = 0.10;

fn default_decay_threshold() -> f64 {
    DEFAULT_DECAY_THRESHOLD
}

fn default_measured_weight() -> u32 {
    2
}

fn default_ignored_xids() -> Vec<u32> {
    vec![43, 45]
}

/// The price's parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceConfig {
    /// The utilization the market aims at: above it prices rise, below it they fall.
    pub target_utilization: f64,
    /// How strongly the distance from the target utilization moves the price:
    /// `1 + sensitivity × (u − target)`.
    pub utilization_sensitivity: f64,
    /// How strongly the trend of leased GPU-hours moves the price: `1 + sensitivity × trend`
    /// ([`crate::signals`]).
    pub demand_sensitivity: f64,
    /// The lowest the market factor (utilization × demand × clearing) may go, in (0, 1].
    pub min_market_factor: f64,
    /// The highest the market factor may go, in [1, 100].
    pub max_market_factor: f64,
    /// The trailing window the market's signals are measured over, hours (1 to 8,760).
    pub window_hours: u64,
    /// The most of a class's proven GPU-hours one renter key's leases count for in the
    /// signals, in (0, 1]: what bounds one actor's move ([`crate::signals::one_actor_bound`]).
    pub max_renter_share: f64,
    /// The weight of the step toward the trailing clearing price, in [0, 1]: 0 ignores the
    /// trades, 1 posts their (bounded) price.
    pub clearing_weight: f64,
    /// How far from the formula price one trade's price counts, a factor in [1, 100]: a
    /// trade at more than `band` times (or less than 1/`band` of) it counts as at the band.
    pub clearing_band: f64,
    /// The share of the class's proven GPU-hours traded in the window at which the step
    /// toward the clearing price is taken in full, in (0, 1]; below it, in proportion.
    pub clearing_full_share: f64,
    /// Price points kept per class in the [`PriceHistory`](crate::PriceHistory), oldest dropped
    /// first.
    pub history_per_class: usize,
    /// The price classes (`[[price.class]]` in TOML); a GPU's memory type picks one.
    #[serde(rename = "class")]
    pub classes: Vec<PriceClass>,
}

/// A class of GPUs priced alike: which memory types belong to it and its $ per TFLOP-hour.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceClass {
    /// Its name, as orders and quotes name the class (`datacenter`, `workstation`).
    pub name: String,
    /// The memory types (`HBM3e`, `GDDR6X`, …) whose GPUs belong to it, any case.
    pub memory_types: Vec<String>,
    /// Dollars per verified TFLOP-hour of reference work: the price of a GPU-hour is its
    /// verified TFLOP/s times this, before market and reliability.
    pub usd_per_tflop_hour: f64,
}

/// Why a configuration was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// Not TOML of the right shape.
    #[error("the market configuration is not valid TOML of the expected shape: {0}")]
    Parse(String),
    /// A value out of its range.
    #[error("market configuration: {0}")]
    Invalid(String),
}

impl Config {
    /// The embedded defaults (`data/market.toml`).
    pub fn embedded() -> Config {
        // Checked by a unit test: the embedded file always parses and validates.
        Config::parse(DEFAULT_TOML).expect("the embedded market configuration is valid")
    }

    /// Reads and checks a configuration.
    pub fn parse(text: &str) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| ConfigError::Parse(e.to_string()))?;
        config.validate()?;
        Ok(config)
    }

    /// The price class of a memory type (`HBM3e`, `GDDR6X`, …), if one lists it.
    pub fn class_for_memory(&self, memory_type: &str) -> Option<&PriceClass> {
        self.price.classes.iter().find(|c| {
            c.memory_types
                .iter()
                .any(|m| m.eq_ignore_ascii_case(memory_type))
        })
    }

    /// A price class by name.
    pub fn class(&self, name: &str) -> Option<&PriceClass> {
        self.price
            .classes
            .iter()
            .find(|c| c.name.eq_ignore_ascii_case(name))
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let bad = |what: String| Err(ConfigError::Invalid(what));
        let s = &self.score;
        let sums = [
            (
                "score.weights",
                s.weights.gpu + s.weights.cpu + s.weights.ram + s.weights.storage,
            ),
            (
                "score.gpu weights",
                s.gpu.tensor + s.gpu.fp32 + s.gpu.memory + s.gpu.bandwidth + s.gpu.sustained,
            ),
            ("score.ram weights", s.ram.capacity + s.ram.bandwidth),
            (
                "score.storage weights",
                s.storage.speed + s.storage.capacity,
            ),
        ];
        let weights = [
            s.weights.gpu,
            s.weights.cpu,
            s.weights.ram,
            s.weights.storage,
            s.gpu.tensor,
            s.gpu.fp32,
            s.gpu.memory,
            s.gpu.bandwidth,
            s.gpu.sustained,
            s.ram.capacity,
            s.ram.bandwidth,
            s.storage.speed,
            s.storage.capacity,
        ];
        if weights.iter().any(|w| !(w.is_finite() && *w >= 0.0)) {
            return bad("every weight must be a finite number ≥ 0".into());
        }
        for (name, sum) in sums {
            if (sum - 1.0).abs() > 1e-9 {
                return bad(format!("{name} sum to {sum}, not 1"));
            }
        }
        let references = [
            ("reference_tensor_tflops", s.gpu.reference_tensor_tflops),
            ("reference_fp32_tflops", s.gpu.reference_fp32_tflops),
            ("reference_memory_gib", s.gpu.reference_memory_gib),
            ("reference_bandwidth_gbs", s.gpu.reference_bandwidth_gbs),
            (
                "reference_sustained_tflops",
                s.gpu.reference_sustained_tflops,
            ),
            ("cpu.reference_gflops", s.cpu.reference_gflops),
            ("cpu.reference_steps_per_s", s.cpu.reference_steps_per_s),
            (
                "storage.reference_reads_per_s",
                s.storage.reference_reads_per_s,
            ),
            ("ram.reference_gib", s.ram.reference_gib),
            ("ram.reference_gbs", s.ram.reference_gbs),
            ("ram.reference_walk_gbs", s.ram.reference_walk_gbs),
            ("storage.reference_read_mbs", s.storage.reference_read_mbs),
            ("storage.reference_write_mbs", s.storage.reference_write_mbs),
            ("storage.reference_gb", s.storage.reference_gb),
        ];
        for (name, value) in references {
            if !(value.is_finite() && value > 0.0) {
                return bad(format!("{name} must be a finite number > 0, not {value}"));
            }
        }
        if s.gpu.reference_model.trim().is_empty() {
            return bad("score.gpu.reference_model is empty".into());
        }
        let n = &s.normalize;
        if !(n.floor.is_finite() && (0.0..1.0).contains(&n.floor)) {
            return bad(format!(
                "normalize.floor must be in [0, 1), not {}",
                n.floor
            ));
        }
        if !(n.above_slope.is_finite() && (0.0..=1.0).contains(&n.above_slope)) {
            return bad(format!(
                "normalize.above_slope must be in [0, 1], not {}",
                n.above_slope
            ));
        }
        if !(n.cap.is_finite() && (1.0..=100.0).contains(&n.cap)) {
            return bad(format!("normalize.cap must be in [1, 100], not {}", n.cap));
        }
        let m = &s.multi_gpu;
        if !(m.decay.is_finite() && m.decay > 0.0 && m.decay <= 1.0) {
            return bad(format!(
                "multi_gpu.decay must be in (0, 1], not {}",
                m.decay
            ));
        }
        if !(1..=1024).contains(&m.max_gpus) {
            return bad(format!(
                "multi_gpu.max_gpus must be 1 to 1024, not {}",
                m.max_gpus
            ));
        }
        let r = &s.reliability;
        let fractions = [
            ("reliability.unknown_proof_rate", r.unknown_proof_rate, true),
            ("reliability.proof_floor", r.proof_floor, false),
            ("reliability.uptime_floor", r.uptime_floor, false),
            ("reliability.anomaly_factor", r.anomaly_factor, true),
            (
                "price.target_utilization",
                self.price.target_utilization,
                true,
            ),
        ];
        for (name, value, one_allowed) in fractions {
            let ok =
                value.is_finite() && value >= 0.0 && (value < 1.0 || one_allowed && value == 1.0);
            if !ok {
                return bad(format!("{name} must be a fraction in [0, 1], not {value}"));
            }
        }
        if !(r.decay_threshold.is_finite() && r.decay_threshold > 0.0 && r.decay_threshold <= 10.0)
        {
            return bad(format!(
                "reliability.decay_threshold must be in (0, 10], not {}",
                r.decay_threshold
            ));
        }
        if !(1..=100).contains(&r.measured_weight) {
            return bad(format!(
                "reliability.measured_weight must be 1 to 100, not {}",
                r.measured_weight
            ));
        }
        if r.ignored_xids.len() > 1000 {
            return bad(format!(
                "reliability.ignored_xids lists {} codes, at most 1000",
                r.ignored_xids.len()
            ));
        }
        let p = &self.price;
        for (name, value) in [
            ("price.utilization_sensitivity", p.utilization_sensitivity),
            ("price.demand_sensitivity", p.demand_sensitivity),
        ] {
            if !(value.is_finite() && (0.0..=10.0).contains(&value)) {
                return bad(format!("{name} must be in [0, 10], not {value}"));
            }
        }
        if !(p.min_market_factor.is_finite()
            && p.max_market_factor.is_finite()
            && 0.0 < p.min_market_factor
            && p.min_market_factor <= 1.0
            && 1.0 <= p.max_market_factor
            && p.max_market_factor <= 100.0)
        {
            return bad(format!(
                "price.min_market_factor must be in (0, 1] and max_market_factor in [1, 100], not {} and {}",
                p.min_market_factor, p.max_market_factor
            ));
        }
        if !(1..=1_000_000).contains(&p.history_per_class) {
            return bad(format!(
                "price.history_per_class must be 1 to 1,000,000, not {}",
                p.history_per_class
            ));
        }
        if !(1..=8_760).contains(&p.window_hours) {
            return bad(format!(
                "price.window_hours must be 1 to 8,760, not {}",
                p.window_hours
            ));
        }
        for (name, value, low_open) in [
            ("price.max_renter_share", p.max_renter_share, true),
            ("price.clearing_weight", p.clearing_weight, false),
            ("price.clearing_full_share", p.clearing_full_share, true),
        ] {
            if !(value.is_finite() && value <= 1.0 && (value > 0.0 || (!low_open && value == 0.0)))
            {
                return bad(format!(
                    "{name} must be in (0, 1] (the weight in [0, 1]), not {value}"
                ));
            }
        }
        if !(p.clearing_band.is_finite() && (1.0..=100.0).contains(&p.clearing_band)) {
            return bad(format!(
                "price.clearing_band must be in [1, 100], not {}",
                p.clearing_band
            ));
        }
        if p.classes.is_empty() {
            return bad("price: at least one [[price.class]] is needed".into());
        }
        for (i, class) in p.classes.iter().enumerate() {
            if crate::GpuClass::new(class.name.clone()).is_err() {
                return bad(format!(
                    "price class name {:?} is not a valid GPU class name",
                    class.name
                ));
            }
            if p.classes[..i]
                .iter()
                .any(|c| c.name.eq_ignore_ascii_case(&class.name))
            {
                return bad(format!("price class {:?} appears twice", class.name));
            }
            if !(class.usd_per_tflop_hour.is_finite()
                && class.usd_per_tflop_hour > 0.0
                && class.usd_per_tflop_hour <= 100.0)
            {
                return bad(format!(
                    "price class {:?}: usd_per_tflop_hour must be in (0, 100], not {}",
                    class.name, class.usd_per_tflop_hour
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_defaults_load() {
        let c = Config::embedded();
        assert_eq!(c.score.weights.gpu, 0.55);
        assert_eq!(c.score.weights.cpu, 0.20);
        assert_eq!(c.score.weights.ram, 0.15);
        assert_eq!(c.score.weights.storage, 0.10);
        assert_eq!(c.class_for_memory("HBM3e").unwrap().name, "datacenter");
        assert_eq!(c.class_for_memory("gddr6x").unwrap().name, "workstation");
        assert!(c.class_for_memory("DDR4").is_none());
    }

    #[test]
    fn bad_values_are_refused() {
        let with = |from: &str, to: &str| {
            assert!(DEFAULT_TOML.contains(from), "{from}");
            Config::parse(&DEFAULT_TOML.replacen(from, to, 1))
        };
        assert!(matches!(
            with("gpu = 0.55", "gpu = 0.6"),
            Err(ConfigError::Invalid(_))
        ));
        assert!(matches!(
            with("gpu = 0.55", "gpu = nan"),
            Err(ConfigError::Invalid(_))
        ));
        assert!(matches!(
            with("reference_fp32_tflops = 51.6", "reference_fp32_tflops = 0"),
            Err(ConfigError::Invalid(_))
        ));
        assert!(matches!(
            with("cap = 2.0", "cap = 0.5"),
            Err(ConfigError::Invalid(_))
        ));
        assert!(matches!(
            with("decay = 0.95", "decay = 1.5"),
            Err(ConfigError::Invalid(_))
        ));
        assert!(matches!(
            with("max_gpus = 8", "max_gpus = 0"),
            Err(ConfigError::Invalid(_))
        ));
        assert!(matches!(
            with("proof_floor = 0.5", "proof_floor = 1.0"),
            Err(ConfigError::Invalid(_))
        ));
        assert!(matches!(
            with("usd_per_tflop_hour = 0.00536", "usd_per_tflop_hour = -1"),
            Err(ConfigError::Invalid(_))
        ));
        assert!(matches!(
            with("name = \"workstation\"", "name = \"datacenter\""),
            Err(ConfigError::Invalid(_))
        ));
        assert!(matches!(
            with("[score.cpu]", "[score.cpu]\nextra = 1"),
            Err(ConfigError::Parse(_))
        ));
        for (from, to) in [
            ("decay_threshold = 0.10", "decay_threshold = 0"),
            ("decay_threshold = 0.10", "decay_threshold = nan"),
            ("measured_weight = 2", "measured_weight = 0"),
            ("window_hours = 24", "window_hours = 0"),
            ("max_renter_share = 0.05", "max_renter_share = 0"),
            ("max_renter_share = 0.05", "max_renter_share = 1.5"),
            ("clearing_weight = 0.5", "clearing_weight = -0.1"),
            ("clearing_weight = 0.5", "clearing_weight = nan"),
            ("clearing_band = 2.0", "clearing_band = 0.5"),
            ("clearing_full_share = 0.5", "clearing_full_share = 0"),
            ("demand_sensitivity = 0.25", "demand_sensitivity = 11"),
        ] {
            assert!(
                matches!(with(from, to), Err(ConfigError::Invalid(_))),
                "{to}"
            );
        }
        assert!(matches!(
            with("measured_weight = 2", "measured_weight = -1"),
            Err(ConfigError::Parse(_))
        ));
    }

    #[test]
    fn a_file_without_the_anomaly_rules_gets_their_defaults() {
        let older = DEFAULT_TOML
            .lines()
            .filter(|l| {
                !["decay_threshold", "measured_weight", "ignored_xids"]
                    .iter()
                    .any(|k| l.starts_with(k))
            })
            .collect::<Vec<_>>()
            .join("\n");
        let c = Config::parse(&older).unwrap();
        assert_eq!(c, Config::embedded());
        assert_eq!(c.score.reliability.ignored_xids, vec![43, 45]);
        assert_eq!(c.score.reliability.decay_threshold, DEFAULT_DECAY_THRESHOLD);
    }

    #[test]
    fn normalization_has_a_floor_a_slope_and_a_cap() {
        let n = Config::embedded().score.normalize;
        assert_eq!(n.apply(0.04), 0.0);
        assert_eq!(n.apply(0.5), 0.5);
        assert_eq!(n.apply(1.0), 1.0);
        assert!((n.apply(1.5) - 1.25).abs() < 1e-12);
        assert_eq!(n.apply(3.0), 2.0);
        assert_eq!(n.apply(1e9), 2.0);
        assert_eq!(n.apply(f64::NAN), 0.0);
        assert_eq!(n.apply(f64::INFINITY), 0.0);
        assert_eq!(n.apply(-1.0), 0.0);
    }
}
