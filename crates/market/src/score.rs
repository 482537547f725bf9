//! The Proof-of-GPU score of a host, from verified figures only (issue 15): 55 % GPU, 20 % CPU,
//! 15 % RAM, 10 % storage, each part normalized against a reference host (the H200 SXM host
//! pog measured), with thresholds and caps, several GPUs aggregated with diminishing returns,
//! and the whole multiplied by reliability.
//!
//! The input is a plain [`HostFigures`] that the caller fills from its reports (a saved
//! `pog check --json`, the validator's records, or the spec database for a model pog has not
//! measured: [`crate::report`]). The computation is pure: the same figures and [`Config`]
//! always give the same [`Score`].
//!
//! The formula, with `norm` the configured threshold-slope-cap curve
//! ([`Normalize::apply`](crate::config::Normalize::apply)):
//!
//! - one GPU: `g = Σ w_f · norm(figure_f / reference_f)` over tensor (FP16/BF16), FP32,
//!   memory capacity, memory bandwidth and sustained throughput; `g = 0` with a reason when the
//!   GPU is not genuine or its latest proof failed or is missing.
//! - GPUs: sorted best first, `G = Σ decay^i · g_i` over at most `max_gpus`; `N = Σ decay^i`
//!   over the same slots (the host's effective GPU count, whatever the GPUs scored).
//! - host parts, per GPU counted (`n` = GPUs counted, at least 1): `C = N · norm(cpu / (n ·
//!   ref))`, `R = N · (w_c norm(capacity) + w_b norm(bandwidth))`, `S = N · (w_s norm(speed) +
//!   w_c norm(capacity))`.
//! - `score = reliability · (0.55 G + 0.20 C + 0.15 R + 0.10 S)`.
//!
//! The reference host (one reference GPU with the reference CPU, RAM and storage) scores 1.0.

use serde::{Deserialize, Serialize};

use crate::config::{Config, ScoreConfig};

/// Where a GPU's figures come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FigureSource {
    /// Measured on this GPU (`pog bench`, `pog check`), within the proven model's datasheet.
    Measured,
    /// Not measured here: a model's datasheet figures from the spec database, scaled by what
    /// pog measured against the datasheet on its reference card ([`crate::report`]). Marked
    /// as such wherever shown.
    SpecDatabase,
    /// The proven model's figures (from the spec database) scaled by what the validator
    /// measured on its own clock: the GEMM proof's pace (compute) and the memory proof's walk
    /// (bandwidth), each at most the model's ([`crate::appraisal::MeasuredWork`]).
    ValidatorMeasured,
}

/// What the latest proof of a GPU says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "status")]
pub enum ProofStatus {
    /// Accepted within the claimed model's time bound. `proves_model` is false for a test plan
    /// or a precision in which the model does not lead its slower neighbours (the validator's
    /// `Record::proves_model`).
    Accepted {
        /// The proof speaks for the model, so the GPU's figures count.
        proves_model: bool,
    },
    /// Rejected, or the exchange failed.
    Failed {
        /// Why, in words.
        reason: String,
    },
    /// No proof ran (why, e.g. a simulated host).
    Missing {
        /// Why no proof ran, in words.
        reason: String,
    },
}

/// One GPU's figures, as the caller read them from its reports. A figure that is missing,
/// negative, NaN or infinite counts nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuFigures {
    /// How the GPU is named in the output (its UUID, or an ordinal).
    pub label: String,
    /// The model as inspected (and proven), if known.
    pub model: Option<String>,
    /// FP16/BF16 tensor GEMM, the better of the two, TFLOP/s.
    pub tensor_tflops: Option<f64>,
    /// FP32 GEMM, TFLOP/s.
    pub fp32_tflops: Option<f64>,
    /// Memory capacity, GiB.
    pub memory_gib: Option<f64>,
    /// Memory bandwidth, GB/s.
    pub bandwidth_gbs: Option<f64>,
    /// The sustained GEMM's median throughput, TFLOP/s.
    pub sustained_tflops: Option<f64>,
    /// The inspection found it genuine.
    pub genuine: bool,
    /// Its latest proof.
    pub proof: ProofStatus,
    /// Measured here, or from the spec database.
    pub source: FigureSource,
}

/// The host's CPU: measured on the host (`pog check`: cores × per-core FP64 GFLOP/s, every
/// core loaded), or proven to the validator (its `cpu-record`: the timed lanes' throughput
/// on its own clock). Either is judged against the reference host's figure of its kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CpuFigures {
    /// The host's own benchmark.
    Measured {
        /// Cores measured, all loaded at once.
        cores: u32,
        /// FP64 GFLOP/s per core, measured with every core loaded.
        per_core_gflops: f64,
    },
    /// The validator's proof of CPU.
    Proven {
        /// Lanes run at once: the hardware threads the host claimed and proved.
        lanes: u32,
        /// Dependent steps a second over all lanes, on the validator's clock.
        steps_per_s: f64,
    },
}

impl CpuFigures {
    /// The host's CPU over the reference host's (a usable figure only).
    fn over_reference(&self, c: &crate::config::CpuConfig) -> Option<f64> {
        match *self {
            CpuFigures::Measured {
                cores,
                per_core_gflops,
            } => usable(Some(per_core_gflops))
                .filter(|_| cores > 0)
                .map(|g| cores as f64 * g / c.reference_gflops),
            CpuFigures::Proven { lanes, steps_per_s } => usable(Some(steps_per_s))
                .filter(|_| lanes > 0)
                .map(|s| s / c.reference_steps_per_s),
        }
    }
}

/// The host's memory: measured on the host (`pog check`: the inventory's capacity, STREAM
/// triad), or proven to the validator (its `ram-record`: the claim the data set filled, the
/// walk's reads on its own clock).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RamFigures {
    /// The validator's proof of RAM (first: its fields are required, so the host's own
    /// figures, all optional, never read as one).
    Proven {
        /// The walk's item reads, GB/s, on the validator's clock.
        walk_gbs: f64,
        /// The RAM the data set proved, GiB.
        capacity_gib: f64,
    },
    /// The host's own benchmark and inventory.
    Measured {
        /// Capacity, GiB.
        capacity_gib: Option<f64>,
        /// STREAM triad, GB/s.
        bandwidth_gbs: Option<f64>,
    },
}

impl RamFigures {
    /// (capacity GiB, bandwidth) with the bandwidth's reference: STREAM triad against
    /// `reference_gbs`, or the proof's walk against `reference_walk_gbs`.
    fn parts(&self, c: &crate::config::RamConfig) -> (Option<f64>, Option<f64>, f64) {
        match *self {
            RamFigures::Measured {
                capacity_gib,
                bandwidth_gbs,
            } => (capacity_gib, bandwidth_gbs, c.reference_gbs),
            RamFigures::Proven {
                walk_gbs,
                capacity_gib,
            } => (Some(capacity_gib), Some(walk_gbs), c.reference_walk_gbs),
        }
    }
}

/// The host's storage: measured on the host (`pog check`: sequential O_DIRECT reads and
/// writes, the disks' sizes), or proven to the validator (its `storage-record`: the data
/// set's size and the walk's dependent reads on its own clock).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum StorageFigures {
    /// The host's own benchmark and inventory.
    Measured {
        /// Sequential reads, MB/s (O_DIRECT).
        read_mbs: Option<f64>,
        /// Sequential writes, MB/s.
        write_mbs: Option<f64>,
        /// Capacity, GB (10⁹ bytes).
        capacity_gb: Option<f64>,
    },
    /// The validator's proof of storage.
    Proven {
        /// Dependent 4 KiB reads a second over the round's walk, on the validator's clock.
        reads_per_s: f64,
        /// The data set kept, GB (10⁹ bytes).
        capacity_gb: f64,
    },
}

/// What is known of the host's reliability: counts and fractions (the validator's records are
/// read into them by [`crate::evidence`]), and in words what they were made of, for the notes.
/// What is not known does not count against the host, except a missing proof history
/// (`unknown_proof_rate`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReliabilityFigures {
    /// Proofs accepted over the validator's window (counted up to `proofs_total`).
    pub proofs_passed: u64,
    /// Proofs answered over the validator's window; 0 when there is no history
    /// (`unknown_proof_rate` counts instead).
    pub proofs_total: u64,
    /// Fraction of the validator's rounds in which the host answered its challenges, 0–1;
    /// `None` when not known (no round yet, or a host's own report).
    pub uptime: Option<f64>,
    /// Anomalies counted in the window (weighted: see [`crate::evidence`]); `None` when not
    /// known (no health record yet, or a host's own report).
    pub anomalies: Option<u32>,
    /// What the uptime was measured over, or why it is not known, in words.
    #[serde(default)]
    pub uptime_detail: Option<String>,
    /// Which signals the anomalies are, or why they are not known, in words.
    #[serde(default)]
    pub anomaly_detail: Option<String>,
}

/// Everything the score reads about one host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostFigures {
    /// Each GPU's figures, in any order (the score sorts them best first).
    pub gpus: Vec<GpuFigures>,
    /// The CPU; `None` when not measured (the CPU part counts 0).
    pub cpu: Option<CpuFigures>,
    /// The RAM; `None` when not measured (the RAM part counts 0).
    pub ram: Option<RamFigures>,
    /// The storage; `None` when not measured (the storage part counts 0).
    pub storage: Option<StorageFigures>,
    /// What is known of the host's reliability.
    pub reliability: ReliabilityFigures,
}

/// One GPU's score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuScore {
    /// The GPU's name in the output ([`GpuFigures::label`]).
    pub label: String,
    /// The model as inspected (and proven), if known.
    pub model: Option<String>,
    /// Measured here, or from the spec database.
    pub source: FigureSource,
    /// The tensor figure after normalization, 0 to the cap.
    pub tensor: f64,
    /// The FP32 figure after normalization, 0 to the cap.
    pub fp32: f64,
    /// The memory capacity after normalization, 0 to the cap.
    pub memory: f64,
    /// The memory bandwidth after normalization, 0 to the cap.
    pub bandwidth: f64,
    /// The sustained throughput after normalization, 0 to the cap.
    pub sustained: f64,
    /// The weighted sum of the figures: what the GPU would count if verified.
    pub potential: f64,
    /// What it counts: `potential`, or 0 when `zeroed` says why.
    pub score: f64,
    /// Why the GPU counts nothing, if it does not.
    pub zeroed: Option<String>,
    /// Its weight in the host's aggregate (`decay^rank`; 0 beyond `max_gpus`).
    pub weight: f64,
}

/// One of the four parts of the score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Part {
    /// Its share of the score (0.55, 0.20, 0.15, 0.10 by default).
    pub weight: f64,
    /// Its value in reference hosts' worth, before the weight.
    pub value: f64,
    /// `weight × value`.
    pub weighted: f64,
    /// Why it is 0, or what is missing, when something is.
    pub note: Option<String>,
}

/// The four parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Parts {
    /// The GPUs: `Σ decay^i · g_i` over the GPUs counted.
    pub gpu: Part,
    /// The CPU, judged per GPU counted.
    pub cpu: Part,
    /// The RAM (capacity and bandwidth), judged per GPU counted.
    pub ram: Part,
    /// The storage (speed and capacity), judged per GPU counted.
    pub storage: Part,
}

/// The reliability multiplier and its factors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reliability {
    /// `proofs × uptime × anomalies`, 0–1: what the score is multiplied by.
    pub factor: f64,
    /// From the proof success rate: 0 at or below `proof_floor`, rising linearly to 1 at a
    /// rate of 1; `unknown_proof_rate` without a history.
    pub proofs: f64,
    /// From the uptime, mapped likewise from `uptime_floor`; 1 when not known.
    pub uptime: f64,
    /// `anomaly_factor^anomalies`; 1 when not known.
    pub anomalies: f64,
    /// What was assumed for what was not known.
    pub notes: Vec<String>,
}

/// A host's score with everything it was made of.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Score {
    /// The score: `reliability × Σ parts`, in reference hosts' worth.
    pub score: f64,
    /// `Σ parts`, before reliability.
    pub before_reliability: f64,
    /// GPUs counted towards the aggregate (at most `max_gpus`).
    pub gpus_counted: usize,
    /// `Σ decay^i` over the GPUs counted: the host's effective GPU count.
    pub effective_gpus: f64,
    /// The four parts, each weighted.
    pub parts: Parts,
    /// The multiplier applied to `before_reliability`, and its factors.
    pub reliability: Reliability,
    /// Per GPU, best first.
    pub gpus: Vec<GpuScore>,
}

impl Score {
    /// The best GPU's score (the first of [`Score::gpus`], which are sorted best first): its
    /// verified worth in reference GPUs *before* reliability; a GPU-hour's price multiplies in
    /// [`Reliability::factor`] ([`crate::quote`]).
    pub fn best_gpu(&self) -> Option<&GpuScore> {
        self.gpus.first()
    }
}

/// Why everything of a simulated host or GPU counts 0: the simulated device is a test double,
/// and its figures must never look like measurements.
pub const SIMULATED: &str =
    "SIMULATED: figures of the simulated test double, not measurements: nothing counts";

/// The score of a simulated host (or GPU): every figure, part, multiplier and the whole 0,
/// each with the reason [`SIMULATED`], so a test double never shows a figure that looks real.
/// What is left is the shape: which GPUs there were, their models, and the weights.
pub fn simulated(mut s: Score) -> Score {
    s.score = 0.0;
    s.before_reliability = 0.0;
    for part in [
        &mut s.parts.gpu,
        &mut s.parts.cpu,
        &mut s.parts.ram,
        &mut s.parts.storage,
    ] {
        part.value = 0.0;
        part.weighted = 0.0;
        part.note = Some(SIMULATED.into());
    }
    s.reliability = Reliability {
        factor: 0.0,
        proofs: 0.0,
        uptime: 0.0,
        anomalies: 0.0,
        notes: vec![SIMULATED.into()],
    };
    for g in &mut s.gpus {
        g.tensor = 0.0;
        g.fp32 = 0.0;
        g.memory = 0.0;
        g.bandwidth = 0.0;
        g.sustained = 0.0;
        g.potential = 0.0;
        g.score = 0.0;
        g.zeroed = Some(SIMULATED.into());
    }
    s
}

/// A figure as a usable number: finite and non-negative, else nothing.
fn usable(x: Option<f64>) -> Option<f64> {
    x.filter(|v| v.is_finite() && *v >= 0.0)
}

/// Scores a host.
pub fn score(host: &HostFigures, config: &Config) -> Score {
    let c = &config.score;
    let mut gpus: Vec<GpuScore> = host.gpus.iter().map(|g| gpu_score(g, c)).collect();
    // Best first; ties keep the caller's order (stable sort).
    gpus.sort_by(|a, b| b.score.total_cmp(&a.score));
    let slot_weights: Vec<f64> = c.multi_gpu.weights(gpus.len()).collect();
    for (gpu, weight) in gpus
        .iter_mut()
        .zip(slot_weights.iter().copied().chain(std::iter::repeat(0.0)))
    {
        gpu.weight = weight;
    }
    let gpus_counted = slot_weights.len();
    let gpu_value: f64 = gpus.iter().map(|g| g.weight * g.score).sum();
    // The host parts are judged per GPU counted; a host without GPUs is judged as one slot.
    let per = gpus_counted.max(1) as f64;
    let effective: f64 = if gpus_counted == 0 {
        1.0
    } else {
        slot_weights.iter().sum()
    };
    let n = &c.normalize;

    let gpu_note = if host.gpus.is_empty() {
        Some("no GPU".to_string())
    } else if gpus.iter().all(|g| g.zeroed.is_some()) {
        Some("no verified GPU: every GPU counts 0".to_string())
    } else {
        None
    };
    let (cpu_value, cpu_note) = match host.cpu.as_ref().and_then(|f| f.over_reference(&c.cpu)) {
        Some(ratio) => (effective * n.apply(ratio / per), None),
        None => (0.0, Some("CPU not measured".to_string())),
    };
    let (ram_value, ram_note) = match &host.ram {
        Some(ram) => {
            let (capacity_gib, bandwidth_gbs, reference_gbs) = ram.parts(&c.ram);
            let capacity = usable(capacity_gib)
                .map(|v| n.apply(v / (per * c.ram.reference_gib)))
                .unwrap_or(0.0);
            let bandwidth = usable(bandwidth_gbs)
                .map(|v| n.apply(v / (per * reference_gbs)))
                .unwrap_or(0.0);
            let missing = missing(&[("capacity", capacity_gib), ("bandwidth", bandwidth_gbs)]);
            (
                effective * (c.ram.capacity * capacity + c.ram.bandwidth * bandwidth),
                missing,
            )
        }
        None => (0.0, Some("RAM not measured".to_string())),
    };
    let normalized = |x: Option<f64>, reference: f64| {
        usable(x)
            .map(|v| n.apply(v / (per * reference)))
            .unwrap_or(0.0)
    };
    let (storage_value, storage_note) = match &host.storage {
        Some(StorageFigures::Measured {
            read_mbs,
            write_mbs,
            capacity_gb,
        }) => {
            // Speed: the mean of the read and write ratios, each normalized.
            let speed = (normalized(*read_mbs, c.storage.reference_read_mbs)
                + normalized(*write_mbs, c.storage.reference_write_mbs))
                / 2.0;
            let capacity = normalized(*capacity_gb, c.storage.reference_gb);
            let missing = missing(&[
                ("read speed", *read_mbs),
                ("write speed", *write_mbs),
                ("capacity", *capacity_gb),
            ]);
            (
                effective * (c.storage.speed * speed + c.storage.capacity * capacity),
                missing,
            )
        }
        Some(StorageFigures::Proven {
            reads_per_s,
            capacity_gb,
        }) => {
            let speed = normalized(Some(*reads_per_s), c.storage.reference_reads_per_s);
            let capacity = normalized(Some(*capacity_gb), c.storage.reference_gb);
            let missing = missing(&[
                ("read speed", Some(*reads_per_s)),
                ("capacity", Some(*capacity_gb)),
            ]);
            (
                effective * (c.storage.speed * speed + c.storage.capacity * capacity),
                missing,
            )
        }
        None => (0.0, Some("storage not measured".to_string())),
    };
    let part = |weight: f64, value: f64, note: Option<String>| Part {
        weight,
        value,
        weighted: weight * value,
        note,
    };
    let parts = Parts {
        gpu: part(c.weights.gpu, gpu_value, gpu_note),
        cpu: part(c.weights.cpu, cpu_value, cpu_note),
        ram: part(c.weights.ram, ram_value, ram_note),
        storage: part(c.weights.storage, storage_value, storage_note),
    };
    let before =
        parts.gpu.weighted + parts.cpu.weighted + parts.ram.weighted + parts.storage.weighted;
    let reliability = reliability(&host.reliability, c);
    Score {
        score: before * reliability.factor,
        before_reliability: before,
        gpus_counted,
        effective_gpus: if gpus_counted == 0 { 0.0 } else { effective },
        parts,
        reliability,
        gpus,
    }
}

/// "capacity, bandwidth not measured" for the figures that are missing or unusable.
fn missing(figures: &[(&str, Option<f64>)]) -> Option<String> {
    let names: Vec<&str> = figures
        .iter()
        .filter(|(_, v)| usable(*v).is_none())
        .map(|(name, _)| *name)
        .collect();
    (!names.is_empty()).then(|| format!("{} not measured", names.join(", ")))
}

/// One GPU's normalized figures and whether they count.
pub fn gpu_score(g: &GpuFigures, c: &ScoreConfig) -> GpuScore {
    let n = &c.normalize;
    let figure =
        |x: Option<f64>, reference: f64| usable(x).map(|v| n.apply(v / reference)).unwrap_or(0.0);
    let tensor = figure(g.tensor_tflops, c.gpu.reference_tensor_tflops);
    let fp32 = figure(g.fp32_tflops, c.gpu.reference_fp32_tflops);
    let memory = figure(g.memory_gib, c.gpu.reference_memory_gib);
    let bandwidth = figure(g.bandwidth_gbs, c.gpu.reference_bandwidth_gbs);
    let sustained = figure(g.sustained_tflops, c.gpu.reference_sustained_tflops);
    let potential = c.gpu.tensor * tensor
        + c.gpu.fp32 * fp32
        + c.gpu.memory * memory
        + c.gpu.bandwidth * bandwidth
        + c.gpu.sustained * sustained;
    let zeroed = if !g.genuine {
        Some("the inspection did not find it genuine".to_string())
    } else {
        match &g.proof {
            ProofStatus::Accepted { proves_model: true } => None,
            ProofStatus::Accepted { proves_model: false } => Some(
                "its proof was accepted under a plan that does not prove the model (test plan, or a precision where the model does not lead)".to_string(),
            ),
            ProofStatus::Failed { reason } => Some(format!("its latest proof failed: {reason}")),
            ProofStatus::Missing { reason } => Some(format!("no accepted proof: {reason}")),
        }
    };
    GpuScore {
        label: g.label.clone(),
        model: g.model.clone(),
        source: g.source,
        tensor,
        fp32,
        memory,
        bandwidth,
        sustained,
        potential,
        score: if zeroed.is_some() { 0.0 } else { potential },
        zeroed,
        weight: 0.0,
    }
}

/// A factor as the notes show it: `×0.81`, `×0.729`.
pub fn times(f: f64) -> String {
    let text = format!("{f:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("×{text}")
}

/// The reliability multiplier: `proofs × uptime × anomalies`. Each factor below 1 gets a note
/// saying what moved it; each one not known, a note saying what was assumed.
pub fn reliability(r: &ReliabilityFigures, c: &ScoreConfig) -> Reliability {
    let rc = &c.reliability;
    let ramp = |x: f64, floor: f64| ((x - floor) / (1.0 - floor)).clamp(0.0, 1.0);
    let mut notes = Vec::new();
    let proofs = if r.proofs_total == 0 {
        notes.push(format!(
            "no proof history yet: counted as {}",
            rc.unknown_proof_rate
        ));
        rc.unknown_proof_rate
    } else {
        let passed = r.proofs_passed.min(r.proofs_total);
        let rate = passed as f64 / r.proofs_total as f64;
        let factor = ramp(rate, rc.proof_floor);
        if factor < 1.0 {
            notes.push(format!(
                "proofs: {passed} of {} passed: {}",
                r.proofs_total,
                times(factor)
            ));
        }
        factor
    };
    let detail = |d: &Option<String>| d.as_ref().map_or(String::new(), |d| format!(" ({d})"));
    let uptime = match r.uptime {
        Some(u) if u.is_finite() && (0.0..=1.0).contains(&u) => {
            let factor = ramp(u, rc.uptime_floor);
            if factor < 1.0 {
                notes.push(format!(
                    "uptime {u:.3}{}: {}",
                    detail(&r.uptime_detail),
                    times(factor)
                ));
            }
            factor
        }
        Some(u) => {
            notes.push(format!("uptime {u} is not a fraction: counted as 0"));
            0.0
        }
        None => {
            notes.push(format!(
                "uptime not known{}: not counted",
                detail(&r.uptime_detail)
            ));
            1.0
        }
    };
    let anomalies = match r.anomalies {
        Some(count) => {
            let factor = rc.anomaly_factor.powi(count.min(10_000) as i32);
            if count > 0 {
                notes.push(format!(
                    "{count} anomal{}{}: {}",
                    if count == 1 { "y" } else { "ies" },
                    detail(&r.anomaly_detail),
                    times(factor)
                ));
            }
            factor
        }
        None => {
            notes.push(format!(
                "anomalies not known{}: not counted",
                detail(&r.anomaly_detail)
            ));
            1.0
        }
    };
    Reliability {
        factor: proofs * uptime * anomalies,
        proofs,
        uptime,
        anomalies,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn config() -> Config {
        Config::embedded()
    }

    /// The reference GPU, proven.
    fn reference_gpu(label: &str) -> GpuFigures {
        let g = &config().score.gpu;
        GpuFigures {
            label: label.into(),
            model: Some("H200 SXM".into()),
            tensor_tflops: Some(g.reference_tensor_tflops),
            fp32_tflops: Some(g.reference_fp32_tflops),
            memory_gib: Some(g.reference_memory_gib),
            bandwidth_gbs: Some(g.reference_bandwidth_gbs),
            sustained_tflops: Some(g.reference_sustained_tflops),
            genuine: true,
            proof: ProofStatus::Accepted { proves_model: true },
            source: FigureSource::Measured,
        }
    }

    /// The reference host with `n` reference GPUs and n times its host resources, perfectly
    /// reliable.
    fn reference_host(n: usize) -> HostFigures {
        let c = config().score;
        let k = n.max(1) as f64;
        HostFigures {
            gpus: (0..n).map(|i| reference_gpu(&format!("GPU-{i}"))).collect(),
            cpu: Some(CpuFigures::Measured {
                cores: 16 * n.max(1) as u32,
                per_core_gflops: c.cpu.reference_gflops / 16.0,
            }),
            ram: Some(RamFigures::Measured {
                capacity_gib: Some(k * c.ram.reference_gib),
                bandwidth_gbs: Some(k * c.ram.reference_gbs),
            }),
            storage: Some(StorageFigures::Measured {
                read_mbs: Some(k * c.storage.reference_read_mbs),
                write_mbs: Some(k * c.storage.reference_write_mbs),
                capacity_gb: Some(k * c.storage.reference_gb),
            }),
            reliability: ReliabilityFigures {
                proofs_passed: 10,
                proofs_total: 10,
                uptime: Some(1.0),
                anomalies: Some(0),
                ..ReliabilityFigures::default()
            },
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn the_reference_host_scores_one_in_every_part() {
        let s = score(&reference_host(1), &config());
        assert!(close(s.score, 1.0), "{}", s.score);
        for part in [&s.parts.gpu, &s.parts.cpu, &s.parts.ram, &s.parts.storage] {
            assert!(close(part.value, 1.0), "{part:?}");
            assert_eq!(part.note, None);
        }
        assert!(close(s.parts.gpu.weighted, 0.55));
        assert!(close(s.reliability.factor, 1.0));
        assert_eq!(s.gpus[0].zeroed, None);
    }

    #[test]
    fn several_gpus_add_up_with_diminishing_returns_to_eight() {
        let one = score(&reference_host(1), &config()).score;
        let two = score(&reference_host(2), &config()).score;
        let eight = score(&reference_host(8), &config()).score;
        let sixteen = score(&reference_host(16), &config()).score;
        assert!(close(two, 1.95), "{two}");
        let expected: f64 = (0..8).map(|i| 0.95f64.powi(i)).sum();
        assert!(close(eight, expected), "{eight} vs {expected}");
        assert!(one < two && two < eight);
        // Beyond max_gpus a GPU adds nothing, and the host parts are judged over the GPUs
        // counted: 16 GPUs with 16 hosts' worth of CPU score as 8 with 8 hosts' worth, capped.
        let s = score(&reference_host(16), &config());
        assert!(close(sixteen, s.score));
        // Twice the reference CPU per GPU counted: 1 + 0.5 × (2 − 1) = 1.5 per slot.
        assert!(
            close(s.parts.cpu.value, 1.5 * expected),
            "{}",
            s.parts.cpu.value
        );
        assert_eq!(s.gpus_counted, 8);
        assert_eq!(s.gpus.iter().filter(|g| g.weight == 0.0).count(), 8);
        assert!(close(s.parts.gpu.value, expected));
    }

    #[test]
    fn a_failed_proof_or_a_suspect_gpu_counts_nothing_with_a_reason() {
        let mut host = reference_host(2);
        host.gpus[0].proof = ProofStatus::Failed {
            reason: "too slow: 1.31 of its time bound".into(),
        };
        host.gpus[1].genuine = false;
        let s = score(&host, &config());
        assert_eq!(s.parts.gpu.value, 0.0);
        assert_eq!(
            s.parts.gpu.note.as_deref(),
            Some("no verified GPU: every GPU counts 0")
        );
        let reasons: Vec<&str> = s
            .gpus
            .iter()
            .map(|g| g.zeroed.as_deref().unwrap())
            .collect();
        assert!(reasons.contains(&"its latest proof failed: too slow: 1.31 of its time bound"));
        assert!(reasons.contains(&"the inspection did not find it genuine"));
        // The figures are still shown, and the host parts still count.
        assert!(s.gpus.iter().all(|g| close(g.potential, 1.0)));
        assert!(close(s.score, 0.45 * 1.95));
        for proof in [
            ProofStatus::Missing {
                reason: "simulated host".into(),
            },
            ProofStatus::Accepted {
                proves_model: false,
            },
        ] {
            let mut host = reference_host(1);
            host.gpus[0].proof = proof;
            let s = score(&host, &config());
            assert_eq!(s.gpus[0].score, 0.0);
            assert!(s.gpus[0].zeroed.is_some());
        }
    }

    #[test]
    fn a_simulated_host_scores_zero_in_everything_with_the_reason() {
        let s = simulated(score(&reference_host(2), &config()));
        assert_eq!(
            (s.score, s.before_reliability, s.reliability.factor),
            (0.0, 0.0, 0.0)
        );
        for part in [&s.parts.gpu, &s.parts.cpu, &s.parts.ram, &s.parts.storage] {
            assert_eq!((part.value, part.weighted), (0.0, 0.0));
            assert_eq!(part.note.as_deref(), Some(SIMULATED));
        }
        for g in &s.gpus {
            assert_eq!(
                (g.tensor, g.memory, g.potential, g.score),
                (0.0, 0.0, 0.0, 0.0)
            );
            assert_eq!(g.zeroed.as_deref(), Some(SIMULATED));
        }
        assert_eq!(s.gpus.len(), 2);
    }

    #[test]
    fn bad_and_missing_figures_count_nothing() {
        let mut host = reference_host(1);
        host.gpus[0].tensor_tflops = Some(f64::NAN);
        host.gpus[0].fp32_tflops = Some(-5.0);
        host.gpus[0].memory_gib = Some(f64::INFINITY);
        host.gpus[0].bandwidth_gbs = None;
        host.cpu = Some(CpuFigures::Measured {
            cores: 0,
            per_core_gflops: 5.0,
        });
        host.ram = None;
        host.storage = Some(StorageFigures::Measured {
            read_mbs: None,
            write_mbs: Some(f64::NAN),
            capacity_gb: Some(275.0),
        });
        let s = score(&host, &config());
        let g = &s.gpus[0];
        assert_eq!(
            (g.tensor, g.fp32, g.memory, g.bandwidth),
            (0.0, 0.0, 0.0, 0.0)
        );
        assert!(close(g.sustained, 1.0));
        assert!(close(s.parts.gpu.value, 0.15));
        assert_eq!(s.parts.cpu.value, 0.0);
        assert_eq!(s.parts.ram.note.as_deref(), Some("RAM not measured"));
        assert_eq!(
            s.parts.storage.note.as_deref(),
            Some("read speed, write speed not measured")
        );
        assert!(close(s.parts.storage.value, 0.3));
        assert!(s.score.is_finite());
    }

    #[test]
    fn reliability_multiplies() {
        let c = config().score;
        let r = |passed, total, uptime, anomalies| {
            reliability(
                &ReliabilityFigures {
                    proofs_passed: passed,
                    proofs_total: total,
                    uptime,
                    anomalies,
                    ..ReliabilityFigures::default()
                },
                &c,
            )
        };
        assert!(close(r(9, 10, Some(1.0), Some(0)).factor, 0.8));
        assert!(close(r(10, 10, Some(0.75), Some(0)).factor, 0.5));
        assert!(close(r(10, 10, None, Some(2)).factor, 0.81));
        assert_eq!(r(5, 10, Some(1.0), Some(0)).factor, 0.0);
        assert_eq!(r(10, 10, Some(f64::NAN), None).factor, 0.0);
        let new = r(0, 0, None, None);
        assert!(close(new.factor, 0.9));
        assert_eq!(new.notes.len(), 3);
        assert!(
            new.notes[1].starts_with("uptime not known"),
            "{:?}",
            new.notes
        );
        // Out of range is not clamped: counted as 0, with the reason.
        let bad = r(10, 10, Some(1.5), Some(0));
        assert_eq!(bad.factor, 0.0);
        assert!(bad.notes[0].contains("not a fraction"), "{:?}", bad.notes);
        // Each factor below 1 says what moved it.
        let moved = reliability(
            &ReliabilityFigures {
                proofs_passed: 9,
                proofs_total: 10,
                uptime: Some(0.9),
                anomalies: Some(2),
                uptime_detail: Some("18 of 20 rounds answered".into()),
                anomaly_detail: Some("xid 79, thermal_runaway alert".into()),
            },
            &c,
        );
        assert_eq!(
            moved.notes,
            vec![
                "proofs: 9 of 10 passed: ×0.8".to_string(),
                "uptime 0.900 (18 of 20 rounds answered): ×0.8".to_string(),
                "2 anomalies (xid 79, thermal_runaway alert): ×0.81".to_string(),
            ]
        );
        assert!(close(moved.factor, 0.8 * 0.8 * 0.81));
        assert!(r(10, 10, Some(1.0), Some(0)).notes.is_empty());
        assert_eq!(times(1.0), "×1");
        assert_eq!(times(0.729), "×0.729");
        // More passes than runs cannot push the rate above 1.
        assert!(close(r(20, 10, Some(1.0), Some(0)).factor, 1.0));
        let mut host = reference_host(1);
        host.reliability = ReliabilityFigures {
            proofs_passed: 9,
            proofs_total: 10,
            uptime: Some(1.0),
            anomalies: Some(0),
            ..ReliabilityFigures::default()
        };
        let s = score(&host, &config());
        assert!(close(s.score, 0.8) && close(s.before_reliability, 1.0));
    }

    #[test]
    fn extreme_hosts_are_capped() {
        let mut host = reference_host(1);
        let g = &mut host.gpus[0];
        for figure in [
            &mut g.tensor_tflops,
            &mut g.fp32_tflops,
            &mut g.memory_gib,
            &mut g.bandwidth_gbs,
            &mut g.sustained_tflops,
        ] {
            *figure = Some(1e12);
        }
        if let Some(CpuFigures::Measured { cores, .. }) = host.cpu.as_mut() {
            *cores = 100_000;
        }
        host.ram = Some(RamFigures::Measured {
            capacity_gib: Some(1e9),
            bandwidth_gbs: Some(1e9),
        });
        let s = score(&host, &config());
        let cap = config().score.normalize.cap;
        assert!(close(s.gpus[0].score, cap));
        assert!(close(s.parts.cpu.value, cap) && close(s.parts.ram.value, cap));
        assert!(s.score <= cap * (1.0 + 1e-9));
    }

    /// A GPU's figure by index, for the property tests.
    fn figure(g: &mut GpuFigures, i: usize) -> &mut Option<f64> {
        match i {
            0 => &mut g.tensor_tflops,
            1 => &mut g.fp32_tflops,
            2 => &mut g.memory_gib,
            3 => &mut g.bandwidth_gbs,
            _ => &mut g.sustained_tflops,
        }
    }

    fn any_host() -> impl Strategy<Value = HostFigures> {
        let gpu = (prop::collection::vec(0.0f64..3.0, 5), any::<bool>(), 0u8..3).prop_map(
            |(ratios, genuine, proof)| {
                let mut g = reference_gpu("GPU");
                for (i, r) in ratios.into_iter().enumerate() {
                    let value = figure(&mut g, i).unwrap();
                    *figure(&mut g, i) = Some(value * r);
                }
                g.genuine = genuine || proof == 0;
                g.proof = match proof {
                    0 | 1 => ProofStatus::Accepted { proves_model: true },
                    _ => ProofStatus::Failed {
                        reason: "rejected".into(),
                    },
                };
                g
            },
        );
        (
            prop::collection::vec(gpu, 0..12),
            1u32..256,
            0.0f64..20.0,
            prop::collection::vec(0.0f64..4000.0, 5),
            0u64..20,
            0u64..20,
            prop::option::of(0.0f64..1.0),
            prop::option::of(0u32..5),
        )
            .prop_map(
                |(gpus, cores, per_core, host, passed, extra, uptime, anomalies)| HostFigures {
                    gpus,
                    cpu: Some(CpuFigures::Measured {
                        cores,
                        per_core_gflops: per_core,
                    }),
                    ram: Some(RamFigures::Measured {
                        capacity_gib: Some(host[0]),
                        bandwidth_gbs: Some(host[1] / 10.0),
                    }),
                    storage: Some(StorageFigures::Measured {
                        read_mbs: Some(host[2]),
                        write_mbs: Some(host[3]),
                        capacity_gb: Some(host[4]),
                    }),
                    reliability: ReliabilityFigures {
                        proofs_passed: passed,
                        proofs_total: passed + extra,
                        uptime,
                        anomalies,
                        ..ReliabilityFigures::default()
                    },
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Raising any verified GPU figure never lowers the score; nor does a better CPU, RAM
        /// or storage figure.
        #[test]
        fn monotonic_in_every_figure(host in any_host(), gpu in 0usize..12, which in 0usize..5, factor in 1.0f64..4.0) {
            let c = config();
            let before = score(&host, &c);
            let mut better = host.clone();
            if let Some(g) = better.gpus.get_mut(gpu) {
                let f = figure(g, which);
                *f = f.map(|v| v * factor);
            }
            let after = score(&better, &c);
            prop_assert!(after.score >= before.score - 1e-9, "{} -> {}", before.score, after.score);
            let mut better = host.clone();
            match which {
                0 => if let Some(CpuFigures::Measured { per_core_gflops, .. }) = better.cpu.as_mut() {
                    *per_core_gflops *= factor;
                },
                1 => if let Some(RamFigures::Measured { capacity_gib, .. }) = better.ram.as_mut() {
                    *capacity_gib = capacity_gib.map(|v| v * factor);
                },
                2 => if let Some(RamFigures::Measured { bandwidth_gbs, .. }) = better.ram.as_mut() {
                    *bandwidth_gbs = bandwidth_gbs.map(|v| v * factor);
                },
                3 => if let Some(StorageFigures::Measured { read_mbs, .. }) = better.storage.as_mut() {
                    *read_mbs = read_mbs.map(|v| v * factor);
                },
                _ => if let Some(StorageFigures::Measured { capacity_gb, .. }) = better.storage.as_mut() {
                    *capacity_gb = capacity_gb.map(|v| v * factor);
                },
            }
            let after = score(&better, &c);
            prop_assert!(after.score >= before.score - 1e-9);
        }

        /// Capped: no host scores above `cap × Σ decay^i` over at most `max_gpus` slots, and
        /// every score is finite and non-negative.
        #[test]
        fn bounded(host in any_host()) {
            let c = config();
            let s = score(&host, &c);
            let slots: f64 = c.score.multi_gpu.weights(host.gpus.len().max(1)).sum();
            prop_assert!(s.score.is_finite() && s.score >= 0.0);
            prop_assert!(s.score <= c.score.normalize.cap * slots + 1e-9);
            prop_assert!(s.score <= s.before_reliability + 1e-12);
        }

        /// A GPU whose proof failed, or that is not genuine, adds nothing to the GPU part,
        /// whatever its figures; failing one never raises the score.
        #[test]
        fn unverified_gpus_add_nothing(host in any_host(), gpu in 0usize..12) {
            let c = config();
            prop_assume!(gpu < host.gpus.len());
            let mut failed = host.clone();
            failed.gpus[gpu].proof = ProofStatus::Failed { reason: "rejected".into() };
            failed.gpus[gpu].genuine = true;
            let s = score(&failed, &c);
            let g = s.gpus.iter().find(|g| g.zeroed.as_deref() == Some("its latest proof failed: rejected")).unwrap();
            prop_assert_eq!(g.score, 0.0);
            prop_assert!(s.score <= score(&host, &c).score + 1e-9);
            let mut unproven = failed.clone();
            for g in &mut unproven.gpus {
                g.genuine = false;
            }
            prop_assert_eq!(score(&unproven, &c).parts.gpu.value, 0.0);
        }

        /// Adding a GPU never lowers the GPU part (it may lower CPU, RAM and storage, which are
        /// judged per GPU).
        #[test]
        fn another_gpu_never_lowers_the_gpu_part(host in any_host()) {
            let c = config();
            let before = score(&host, &c).parts.gpu.value;
            let mut more = host.clone();
            more.gpus.push(reference_gpu("extra"));
            prop_assert!(score(&more, &c).parts.gpu.value >= before - 1e-9);
        }
    }
}
