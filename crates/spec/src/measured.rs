//! What pog measured itself on real cards, per model: the expected benchmark medians and the
//! end-to-end proof rates, each group with its provenance. The data lives in
//! `data/measured.toml`; [`SpecDb`](crate::SpecDb) loads it with the models and checks that it
//! names only models of the database, once each.

use crate::{GpuSpec, Precision, SpecError};
use serde::Deserialize;
use std::collections::BTreeMap;

/// The key of a GEMM benchmark figure: its precision and square size, written
/// `<precision>_<n>` in the file (`bf16_8192`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(try_from = "String")]
pub struct GemmKey {
    /// The GEMM's precision.
    pub precision: Precision,
    /// The product's size n (n × n times n × n).
    pub size: u64,
}

/// A GEMM benchmark key not spelled `<precision>_<n>` (the key as written).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("GEMM key {0:?} is not <precision>_<n>, e.g. \"bf16_8192\"")]
pub struct BadGemmKey(pub String);

/// Parses the file's spelling, `<precision>_<n>` with the lowercase precision name and n in
/// decimal; anything else (another case, a leading zero) is refused, so that every figure has
/// exactly one key.
impl TryFrom<String> for GemmKey {
    type Error = BadGemmKey;

    fn try_from(key: String) -> Result<GemmKey, BadGemmKey> {
        key.split_once('_')
            .and_then(|(precision, size)| {
                Some(GemmKey {
                    precision: precision.parse().ok()?,
                    size: size.parse().ok()?,
                })
            })
            .filter(|k| k.size > 0 && format!("{}_{}", k.precision.name(), k.size) == key)
            .ok_or(BadGemmKey(key))
    }
}

/// The median each benchmark figure reached in `pog bench` on a real card of the model: what
/// a result of that model is judged against (how far below warns or fails is pog-bench's
/// policy).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BenchMedians {
    /// Where the figures were measured: card, date, command (shown with every verdict).
    pub source: String,
    /// TFLOP/s (TOP/s for INT8) per GEMM precision and size.
    #[serde(default)]
    pub gemm_tflops: BTreeMap<GemmKey, f64>,
    /// GB/s per copy kind, keyed by `pog_facts::CopyKind`'s snake_case name.
    #[serde(default)]
    pub copy_gbs: BTreeMap<String, f64>,
    /// GB/s between GPUs of this model in one host, measured on a multi-GPU host of the SKU:
    /// a peer transfer by `pog_facts::PeerKind`'s name and MiB (`copy_engine_write_1024`), the
    /// all-reduce's bus bandwidth by GPU count and MiB per GPU (`all_reduce_8gpus_1024`).
    #[serde(default)]
    pub peer_gbs: BTreeMap<String, f64>,
}

/// An end-to-end proof rate measured on a real card (generation, GEMM, hashing and tree: the
/// time from challenge to commitment), which sets a proof's time bound.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProofRate {
    /// The proof's precision.
    pub precision: Precision,
    /// The product size n.
    pub size: u64,
    /// The rate the bound expects, TFLOP/s (TOP/s for INT8): a little below the measurement.
    pub tflops: f64,
    /// Where and how it was measured, with the measured rate.
    pub source: String,
}

/// The memory proof's walk rate measured on a real card: item bytes read per second from the
/// walk nonce to the commitment (walk, leaf hashing and tree), which sets the proof of
/// memory's time bound (`pog_proof::memory::plan`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryProofRate {
    /// GB/s (10⁹ bytes) of 128-byte item reads the bound expects: a little below the
    /// measurement.
    pub walk_gbs: f64,
    /// Where and how it was measured, with the measured rate.
    pub source: String,
}

/// Everything pog measured on one model.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Measurements {
    /// The model, exactly as [`GpuSpec::model`] spells it.
    pub model: String,
    /// The benchmark medians, if pog has benchmarked the model.
    pub bench: Option<BenchMedians>,
    /// The proof rates, one per precision and size (`[[gpu.proof_rate]]` in the file).
    #[serde(default, rename = "proof_rate")]
    pub proof_rates: Vec<ProofRate>,
    /// The proof of memory's walk rate (`[gpu.memory_proof]` in the file).
    #[serde(default)]
    pub memory_proof: Option<MemoryProofRate>,
}

impl Measurements {
    /// The measured proof rate in `precision` at product size `size`, if there is one.
    pub fn proof_rate(&self, precision: Precision, size: u64) -> Option<&ProofRate> {
        self.proof_rates
            .iter()
            .find(|r| r.precision == precision && r.size == size)
    }

    /// Every figure with its name in the file, for validation.
    fn figures(&self) -> impl Iterator<Item = (String, f64)> + '_ {
        let bench = self.bench.iter().flat_map(|b| {
            let gemm = b.gemm_tflops.iter().map(|(k, v)| {
                let name = format!("gemm_tflops.{}_{}", k.precision.name(), k.size);
                (name, *v)
            });
            let copy = b
                .copy_gbs
                .iter()
                .map(|(k, v)| (format!("copy_gbs.{k}"), *v));
            let peer = b
                .peer_gbs
                .iter()
                .map(|(k, v)| (format!("peer_gbs.{k}"), *v));
            gemm.chain(copy).chain(peer)
        });
        let proof = self.proof_rates.iter().map(|r| {
            let name = format!("proof_rate {} n={}", r.precision.name(), r.size);
            (name, r.tflops)
        });
        let memory = self
            .memory_proof
            .iter()
            .map(|m| ("memory_proof.walk_gbs".to_string(), m.walk_gbs));
        bench.chain(proof).chain(memory)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MeasuredFile {
    #[serde(default)]
    gpu: Vec<Measurements>,
}

/// Parses a measurements text and checks it against the database's models: every entry names
/// one of `gpus` exactly, no model or proof rate (precision and size) appears twice, every
/// entry measures something and every figure is a positive number.
pub(crate) fn parse(text: &str, gpus: &[GpuSpec]) -> Result<Vec<Measurements>, SpecError> {
    let file: MeasuredFile = toml::from_str(text).map_err(SpecError::MeasuredParse)?;
    for (i, m) in file.gpu.iter().enumerate() {
        if !gpus.iter().any(|g| g.model == m.model) {
            return Err(SpecError::UnknownMeasuredModel(m.model.clone()));
        }
        if file.gpu[..i].iter().any(|earlier| earlier.model == m.model) {
            return Err(SpecError::DuplicateMeasuredModel(m.model.clone()));
        }
        if m.bench.is_none() && m.proof_rates.is_empty() && m.memory_proof.is_none() {
            return Err(SpecError::EmptyMeasurement(m.model.clone()));
        }
        for (j, r) in m.proof_rates.iter().enumerate() {
            if m.proof_rates[..j]
                .iter()
                .any(|e| e.precision == r.precision && e.size == r.size)
            {
                return Err(SpecError::DuplicateProofRate {
                    model: m.model.clone(),
                    precision: r.precision,
                    size: r.size,
                });
            }
        }
        if let Some((figure, value)) = m.figures().find(|(_, v)| !(v.is_finite() && *v > 0.0)) {
            return Err(SpecError::NotPositive {
                model: m.model.clone(),
                figure,
                value,
            });
        }
    }
    Ok(file.gpu)
}
