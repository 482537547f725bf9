//! The GPU model database: what each NVIDIA model *is*, so that what a host *reports* can be
//! checked against it.
//!
//! The data lives in `data/gpus.toml` (embedded at build time, sources cited per entry). Lookups
//! go by PCI device id (what the kernel sees on the bus, hardest to fake) or by the marketing name
//! that NVML reports. What pog measured itself on real cards (benchmark medians, proof rates)
//! lives beside it in `data/measured.toml` ([`Measurements`], through [`SpecDb::measurement`]).

#![warn(missing_docs)]

mod measured;

pub use measured::{BadGemmKey, BenchMedians, GemmKey, Measurements, MemoryProofRate, ProofRate};

use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

/// The embedded database text, parsed on first use.
const GPUS_TOML: &str = include_str!("../data/gpus.toml");
/// The embedded measurements, parsed with the database.
const MEASURED_TOML: &str = include_str!("../data/measured.toml");

/// How far below the datasheet's nominal capacity a healthy card may report its memory:
/// ECC and firmware reservations take up to about 6.5 % (T4: 15360 MiB of "16 GB"; A10: 23028 MiB
/// of "24 GB"). Anything further below is a different model or a tampered report.
pub const MEMORY_TOLERANCE_BELOW: f64 = 0.08;
/// How far above nominal a report may be (nominal figures are rounded down by vendors).
pub const MEMORY_TOLERANCE_ABOVE: f64 = 0.03;

/// The numeric formats pog benchmarks, each with its own tensor-core (or CUDA-core) peak.
///
/// Two spellings: the lowercase name ([`Precision::name`], e.g. `bf16`) is what JSON, TOML and
/// command-line flags use, through serde, [`FromStr`](std::str::FromStr) (case-insensitive) and,
/// with the `clap` feature, `clap::ValueEnum` (give the argument `ignore_case = true` to take
/// "BF16" too); [`Display`](std::fmt::Display) gives the uppercase name tables show (`BF16`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// IEEE 754 double precision.
    Fp64,
    /// IEEE 754 single precision, on CUDA cores.
    Fp32,
    /// TensorFloat-32: FP32 storage, 10-bit mantissa products on tensor cores.
    Tf32,
    /// IEEE 754 half precision.
    Fp16,
    /// bfloat16: FP32's exponent range with an 8-bit mantissa.
    Bf16,
    /// 8-bit floating point (E4M3).
    Fp8,
    /// 8-bit integers, accumulated in 32 bits.
    Int8,
}

impl Precision {
    /// Every precision, in the order tables show them.
    pub const ALL: [Precision; 7] = [
        Precision::Fp64,
        Precision::Fp32,
        Precision::Tf32,
        Precision::Fp16,
        Precision::Bf16,
        Precision::Fp8,
        Precision::Int8,
    ];

    /// The lowercase name JSON and command-line flags use, e.g. `"bf16"`.
    pub const fn name(self) -> &'static str {
        match self {
            Precision::Fp64 => "fp64",
            Precision::Fp32 => "fp32",
            Precision::Tf32 => "tf32",
            Precision::Fp16 => "fp16",
            Precision::Bf16 => "bf16",
            Precision::Fp8 => "fp8",
            Precision::Int8 => "int8",
        }
    }
}

/// The uppercase name tables show, e.g. "BF16".
impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(match self {
            Precision::Fp64 => "FP64",
            Precision::Fp32 => "FP32",
            Precision::Tf32 => "TF32",
            Precision::Fp16 => "FP16",
            Precision::Bf16 => "BF16",
            Precision::Fp8 => "FP8",
            Precision::Int8 => "INT8",
        })
    }
}

/// Parses a precision's name in any case ("bf16", "BF16"), surrounding spaces ignored.
impl std::str::FromStr for Precision {
    type Err = UnknownPrecision;

    fn from_str(s: &str) -> Result<Precision, UnknownPrecision> {
        Precision::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| UnknownPrecision(s.to_string()))
    }
}

/// A precision name that is none of pog's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown precision {0:?}: use one of fp64, fp32, tf32, fp16, bf16, fp8, int8")]
pub struct UnknownPrecision(pub String);

/// Dense peak throughput per precision, TFLOP/s (TOP/s for INT8). `None`: no such path on the chip.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeakTflops {
    /// FP64 peak.
    pub fp64: Option<f64>,
    /// FP32 peak, on CUDA cores.
    pub fp32: Option<f64>,
    /// TF32 tensor-core peak.
    pub tf32: Option<f64>,
    /// FP16 tensor-core peak.
    pub fp16: Option<f64>,
    /// BF16 tensor-core peak.
    pub bf16: Option<f64>,
    /// FP8 (E4M3) tensor-core peak.
    pub fp8: Option<f64>,
    /// INT8 tensor-core peak, TOP/s.
    pub int8: Option<f64>,
}

impl PeakTflops {
    /// The peak for one precision, if the model has that path.
    pub fn get(&self, precision: Precision) -> Option<f64> {
        match precision {
            Precision::Fp64 => self.fp64,
            Precision::Fp32 => self.fp32,
            Precision::Tf32 => self.tf32,
            Precision::Fp16 => self.fp16,
            Precision::Bf16 => self.bf16,
            Precision::Fp8 => self.fp8,
            Precision::Int8 => self.int8,
        }
    }
}

/// One GPU model as its datasheet (checked on a real card, where `measured`) describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuSpec {
    /// Short model name used in pog's output, e.g. "H200 SXM".
    pub model: String,
    /// Exact names NVML reports for this model.
    pub names: Vec<String>,
    /// PCI device ids (vendor 0x10de) this model is sold under.
    pub pci_device_ids: Vec<u16>,
    /// Architecture family as NVIDIA names it, e.g. "Hopper".
    pub architecture: String,
    /// "major.minor", as CUDA reports it.
    pub compute_capability: String,
    /// Streaming multiprocessors enabled on this model (not on the full die).
    pub sm_count: u32,
    /// Nominal memory capacity, read as GiB.
    pub memory_gib: f64,
    /// Memory technology, e.g. "HBM3e" or "GDDR6".
    pub memory_type: String,
    /// Memory interface width in bits.
    pub memory_bus_bits: u32,
    /// Boost clock of the SMs, MHz.
    pub boost_clock_mhz: u32,
    /// Peak memory bandwidth, GB/s (decimal).
    pub memory_bandwidth_gbs: f64,
    /// Board power limit (TDP) as sold, watts.
    pub tdp_w: u32,
    /// Highest PCIe generation the card supports.
    pub pcie_gen: u32,
    /// Dense peak throughput per precision.
    pub peak: PeakTflops,
    /// Where every figure above comes from.
    pub sources: Vec<String>,
    /// True when pog has measured a real card of this model: it has an entry in
    /// `data/measured.toml` ([`SpecDb::measurement`]). Derived when the measurements load
    /// ([`SpecDb::with_measurements`]); never read from the database text.
    #[serde(skip_deserializing)]
    pub measured: bool,
}

impl GpuSpec {
    /// CUDA cores per SM for this model's compute capability (what NVML's core count should be
    /// divided by). `None` for a capability this table does not know.
    pub fn cores_per_sm(&self) -> Option<u32> {
        cores_per_sm(&self.compute_capability)
    }

    /// The memory range (MiB) a genuine card of this model may report as its total.
    pub fn memory_range_mib(&self) -> (f64, f64) {
        let nominal = self.memory_gib * 1024.0;
        (
            nominal * (1.0 - MEMORY_TOLERANCE_BELOW),
            nominal * (1.0 + MEMORY_TOLERANCE_ABOVE),
        )
    }
}

/// CUDA cores per SM by compute capability ("major.minor"), from NVIDIA's CUDA programming guide
/// (arithmetic-instruction throughput table).
pub fn cores_per_sm(compute_capability: &str) -> Option<u32> {
    match compute_capability {
        "7.0" | "7.5" | "8.0" => Some(64),
        "8.6" | "8.7" | "8.9" | "9.0" | "10.0" | "10.3" | "12.0" | "12.1" => Some(128),
        _ => None,
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SpecFile {
    gpu: Vec<GpuSpec>,
}

/// Why a database text could not be used. The parser's error is part of the message (not a
/// `source`, which error chains would print a second time).
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// The text is not TOML, or does not fit the schema.
    #[error("GPU database is not valid TOML for pog's schema: {0}")]
    Parse(toml::de::Error),
    /// One PCI device id is listed under two models, so a lookup by id would be ambiguous.
    #[error("GPU database: PCI device id {id:#06x} is listed for both {first} and {second}")]
    DuplicateDeviceId {
        /// The device id listed twice.
        id: u16,
        /// The model that lists it first.
        first: String,
        /// The model that lists it again.
        second: String,
    },
    /// One NVML name is listed under two models, so a lookup by name would be ambiguous.
    #[error("GPU database: name {name:?} is listed for both {first} and {second}")]
    DuplicateName {
        /// The name listed twice.
        name: String,
        /// The model that lists it first.
        first: String,
        /// The model that lists it again.
        second: String,
    },
    /// The measurements text does not parse into [`Measurements`].
    #[error("measured figures are not valid TOML for pog's schema: {0}")]
    MeasuredParse(toml::de::Error),
    /// A measurement names a model the database does not have (model names are exact).
    #[error("measured figures: {0:?} is not a model of the GPU database (names are exact)")]
    UnknownMeasuredModel(String),
    /// Two entries measure the same model.
    #[error("measured figures: {0} has two entries; give each model one")]
    DuplicateMeasuredModel(String),
    /// An entry with neither benchmark medians nor proof rates.
    #[error("measured figures: {0}'s entry has neither bench figures nor a proof rate")]
    EmptyMeasurement(String),
    /// One model has two proof rates for the same precision and size.
    #[error("measured figures: {model} has two proof rates for {precision} at n = {size}")]
    DuplicateProofRate {
        /// The model with the duplicate.
        model: String,
        /// The precision of both rates.
        precision: Precision,
        /// The matrix size n of both rates.
        size: u64,
    },
    /// A figure that is zero, negative or not a number, which nothing could be judged against.
    #[error("measured figures: {model}'s {figure} is {value}, not a positive number")]
    NotPositive {
        /// The model the figure belongs to.
        model: String,
        /// Which figure it is.
        figure: String,
        /// The value found.
        value: f64,
    },
}

/// The whole database, with lookups, and pog's own measurements of its models.
#[derive(Debug, Clone)]
pub struct SpecDb {
    gpus: Vec<GpuSpec>,
    measurements: Vec<Measurements>,
}

impl SpecDb {
    /// The database compiled into pog, with the measurements compiled into it.
    pub fn embedded() -> &'static SpecDb {
        static DB: OnceLock<SpecDb> = OnceLock::new();
        DB.get_or_init(|| {
            SpecDb::parse(GPUS_TOML)
                .and_then(|db| db.with_measurements(MEASURED_TOML))
                .expect("embedded GPU database and measurements are checked by the tests")
        })
    }

    /// Parses and validates a database text: every device id and every name must be unique,
    /// or lookups would be ambiguous. The result has no measurements (see
    /// [`SpecDb::with_measurements`]).
    pub fn parse(text: &str) -> Result<SpecDb, SpecError> {
        let file: SpecFile = toml::from_str(text).map_err(SpecError::Parse)?;
        for (i, a) in file.gpu.iter().enumerate() {
            for b in &file.gpu[..i] {
                if let Some(id) = a
                    .pci_device_ids
                    .iter()
                    .find(|id| b.pci_device_ids.contains(id))
                {
                    return Err(SpecError::DuplicateDeviceId {
                        id: *id,
                        first: b.model.clone(),
                        second: a.model.clone(),
                    });
                }
                if let Some(name) = a.names.iter().find(|n| b.names.contains(n)) {
                    return Err(SpecError::DuplicateName {
                        name: name.clone(),
                        first: b.model.clone(),
                        second: a.model.clone(),
                    });
                }
            }
        }
        Ok(SpecDb {
            gpus: file.gpu,
            measurements: Vec::new(),
        })
    }

    /// This database with the measurements of a `measured.toml` text in place of its own, and
    /// each model's [`GpuSpec::measured`] set to match. The text must name only models of this
    /// database, each once, with at most one proof rate per precision and size and only
    /// positive figures.
    pub fn with_measurements(mut self, text: &str) -> Result<SpecDb, SpecError> {
        self.measurements = measured::parse(text, &self.gpus)?;
        for g in &mut self.gpus {
            g.measured = self.measurements.iter().any(|m| m.model == g.model);
        }
        Ok(self)
    }

    /// Every model's measurements, in file order.
    pub fn measurements(&self) -> &[Measurements] {
        &self.measurements
    }

    /// What pog measured on a real card of `spec`'s model, if it has (matched by
    /// [`GpuSpec::model`]).
    pub fn measurement(&self, spec: &GpuSpec) -> Option<&Measurements> {
        self.measurements.iter().find(|m| m.model == spec.model)
    }

    /// Every model, in file order.
    pub fn all(&self) -> &[GpuSpec] {
        &self.gpus
    }

    /// The model sold under this PCI device id.
    pub fn by_device_id(&self, device_id: u16) -> Option<&GpuSpec> {
        self.gpus
            .iter()
            .find(|g| g.pci_device_ids.contains(&device_id))
    }

    /// The model NVML reports under this name (exact match, surrounding spaces ignored).
    pub fn by_name(&self, name: &str) -> Option<&GpuSpec> {
        let name = name.trim();
        self.gpus.iter().find(|g| g.names.iter().any(|n| n == name))
    }

    /// The model by pog's short model name ("H200 SXM"), case-insensitive.
    pub fn by_model(&self, model: &str) -> Option<&GpuSpec> {
        self.gpus
            .iter()
            .find(|g| g.model.eq_ignore_ascii_case(model.trim()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_database_parses_and_covers_the_required_models() {
        let db = SpecDb::embedded();
        for model in [
            "B200",
            "H200 SXM",
            "H100 SXM",
            "H100 PCIe",
            "H100 NVL",
            "A100 SXM 40GB",
            "A100 SXM 80GB",
            "A100 PCIe 40GB",
            "A100 PCIe 80GB",
            "L40S",
            "L40",
            "L4",
            "A10",
            "A40",
            "RTX 6000 Ada",
            "RTX A6000",
            "RTX 5090",
            "RTX 4090",
            "RTX 3090",
            "V100 SXM2 32GB",
            "T4",
        ] {
            let spec = db
                .by_model(model)
                .unwrap_or_else(|| panic!("{model} missing"));
            assert!(!spec.sources.is_empty(), "{model} has no source");
            assert!(spec.peak.fp32.is_some(), "{model} has no FP32 peak");
            assert!(spec.cores_per_sm().is_some(), "{model}: unknown capability");
        }
    }

    #[test]
    fn lookups_agree_for_the_h200() {
        let db = SpecDb::embedded();
        let by_id = db.by_device_id(0x2335).expect("H200 id");
        let by_name = db.by_name(" NVIDIA H200 ").expect("H200 name");
        assert_eq!(by_id, by_name);
        assert_eq!(by_id.sm_count, 132);
        // The real card reports 143771 MiB (../shared/fixtures/h200): inside the accepted range.
        let (lo, hi) = by_id.memory_range_mib();
        assert!(lo <= 143771.0 && 143771.0 <= hi);
        // An 80 GB H100 is not.
        assert!(81559.0 < lo);
        assert_eq!(by_id.peak.get(Precision::Fp8), Some(1978.9));
        assert_eq!(
            db.by_device_id(0x1EB8).unwrap().peak.get(Precision::Fp8),
            None
        );
    }

    #[test]
    fn precision_names_round_trip_in_every_spelling() {
        for p in Precision::ALL {
            assert_eq!(p.name().parse::<Precision>(), Ok(p));
            assert_eq!(p.to_string().parse::<Precision>(), Ok(p), "table name {p}");
            assert_eq!(p.to_string(), p.name().to_uppercase());
            // serde writes the same lowercase name.
            assert_eq!(toml::Value::try_from(p).unwrap().as_str(), Some(p.name()));
        }
        assert_eq!(" Int8 ".parse::<Precision>(), Ok(Precision::Int8));
        assert_eq!(format!("{:>5}", Precision::Fp8), "  FP8");
        let unknown = "fp4".parse::<Precision>().unwrap_err();
        let message = unknown.to_string();
        assert!(message.contains("\"fp4\""), "{message}");
        for p in Precision::ALL {
            assert!(message.contains(p.name()), "{message} lacks {}", p.name());
        }
    }

    #[cfg(feature = "clap")]
    #[test]
    fn clap_takes_the_lowercase_names() {
        use clap::ValueEnum;
        for p in Precision::ALL {
            let value = p.to_possible_value().expect("no variant is skipped");
            assert_eq!(value.get_name(), p.name());
            assert_eq!(Precision::from_str(&p.to_string(), true), Ok(p));
        }
        assert_eq!(Precision::value_variants(), Precision::ALL);
    }

    #[test]
    fn duplicate_ids_and_names_are_rejected() {
        let entry = |model: &str, id: u16, name: &str| {
            format!(
                "[[gpu]]\nmodel = \"{model}\"\nnames = [\"{name}\"]\npci_device_ids = [{id}]\n\
                 architecture = \"Hopper\"\ncompute_capability = \"9.0\"\nsm_count = 1\n\
                 memory_gib = 1\nmemory_type = \"x\"\nmemory_bus_bits = 1\nboost_clock_mhz = 1\n\
                 memory_bandwidth_gbs = 1\ntdp_w = 1\npcie_gen = 1\npeak = {{ fp32 = 1 }}\n\
                 sources = [\"s\"]\n"
            )
        };
        let ok = entry("A", 1, "a") + &entry("B", 2, "b");
        assert_eq!(SpecDb::parse(&ok).unwrap().all().len(), 2);
        let dup_id = entry("A", 1, "a") + &entry("B", 1, "b");
        assert!(matches!(
            SpecDb::parse(&dup_id),
            Err(SpecError::DuplicateDeviceId { id: 1, .. })
        ));
        let dup_name = entry("A", 1, "a") + &entry("B", 2, "a");
        assert!(matches!(
            SpecDb::parse(&dup_name),
            Err(SpecError::DuplicateName { .. })
        ));
        assert!(matches!(
            SpecDb::parse("[[gpu]]\nmodel = 3"),
            Err(SpecError::Parse(_))
        ));
    }

    #[test]
    fn embedded_measurements_name_known_models_and_set_the_flag() {
        let db = SpecDb::embedded();
        assert!(!db.measurements().is_empty());
        for m in db.measurements() {
            assert!(db.all().iter().any(|g| g.model == m.model), "{}", m.model);
        }
        for g in db.all() {
            assert_eq!(g.measured, db.measurement(g).is_some(), "{}", g.model);
        }
        let h200 = db.by_model("H200 SXM").unwrap();
        assert!(h200.measured);
        assert!(!db.by_model("H100 PCIe").unwrap().measured);
        // The H100 SXM's proofs were measured (2026-12-05), not yet its benchmarks.
        let h100 = db.by_model("H100 SXM").unwrap();
        assert!(h100.measured);
        let h100 = db.measurement(h100).unwrap();
        assert!(h100.bench.is_none());
        assert_eq!(
            h100.proof_rate(Precision::Fp16, 16384).unwrap().tflops,
            597.0
        );
        let m = db.measurement(h200).unwrap();
        let bf16 = m.proof_rate(Precision::Bf16, 16384).unwrap();
        assert_eq!(bf16.tflops, 600.0);
        assert!(bf16.source.contains("612.8"), "{}", bf16.source);
        assert_eq!(m.proof_rate(Precision::Int8, 16384).unwrap().tflops, 945.0);
        assert!(m.proof_rate(Precision::Bf16, 8192).is_none());
        let bench = m.bench.as_ref().unwrap();
        let key = GemmKey {
            precision: Precision::Fp16,
            size: 8192,
        };
        assert_eq!(bench.gemm_tflops.get(&key), Some(&789.2));
        assert_eq!(bench.copy_gbs.get("device_to_device"), Some(&4229.9));
        // The flag is derived, never read from the database text.
        let text = GPUS_TOML.replacen("sources = [", "measured = true\nsources = [", 1);
        assert!(matches!(SpecDb::parse(&text), Err(SpecError::Parse(_))));
        // New measurements replace the old, flags included.
        let none = db.clone().with_measurements("").unwrap();
        assert!(none.measurements().is_empty() && none.all().iter().all(|g| !g.measured));
    }

    #[test]
    fn measurements_of_unknown_models_or_given_twice_are_rejected() {
        let db = || SpecDb::parse(GPUS_TOML).unwrap();
        let entry = |model: &str| {
            format!(
                "[[gpu]]\nmodel = \"{model}\"\n[[gpu.proof_rate]]\nprecision = \"bf16\"\n\
                 size = 8192\ntflops = 1.5\nsource = \"s\"\n"
            )
        };
        let rejected = |text: &str| db().with_measurements(text).unwrap_err();
        let ok = entry("H100 SXM") + &entry("T4");
        let both = db().with_measurements(&ok).unwrap();
        assert_eq!(both.measurements().len(), 2);
        assert!(both.by_model("T4").unwrap().measured);

        let e = rejected(&entry("H900"));
        assert!(matches!(&e, SpecError::UnknownMeasuredModel(m) if m == "H900"));
        assert!(e.to_string().contains("\"H900\" is not a model"), "{e}");
        // Model names are exact: a lookup by `model` would never find this one.
        assert!(matches!(
            rejected(&entry("h100 sxm")),
            SpecError::UnknownMeasuredModel(_)
        ));
        let e = rejected(&(entry("T4") + &entry("H100 SXM") + &entry("T4")));
        assert!(matches!(&e, SpecError::DuplicateMeasuredModel(m) if m == "T4"));
        assert!(e.to_string().contains("T4 has two entries"), "{e}");
        let rate =
            "[[gpu.proof_rate]]\nprecision = \"bf16\"\nsize = 8192\ntflops = 2\nsource = \"t\"\n";
        let e = rejected(&(entry("T4") + rate));
        assert!(matches!(
            e,
            SpecError::DuplicateProofRate {
                precision: Precision::Bf16,
                size: 8192,
                ..
            }
        ));
        assert!(matches!(
            rejected("[[gpu]]\nmodel = \"T4\"\n"),
            SpecError::EmptyMeasurement(_)
        ));
        let e = rejected(&entry("T4").replace("tflops = 1.5", "tflops = 0.0"));
        assert!(
            e.to_string().contains("T4's proof_rate bf16 n=8192 is 0"),
            "{e}"
        );
        let bench =
            |body: &str| format!("[[gpu]]\nmodel = \"T4\"\n[gpu.bench]\nsource = \"s\"\n{body}");
        assert!(db()
            .with_measurements(&bench("[gpu.bench.gemm_tflops]\nint8_4096 = 100.0\n"))
            .is_ok());
        assert!(matches!(
            rejected(&bench("[gpu.bench.copy_gbs]\ndevice_to_device = -1.0\n")),
            SpecError::NotPositive { .. }
        ));
        // GEMM keys must be `<precision>_<n>` as written; thresholds are policy, not data.
        for bad in [
            "[gpu.bench.gemm_tflops]\nfp4_8192 = 1.0\n",
            "[gpu.bench.gemm_tflops]\nBF16_8192 = 1.0\n",
            "[gpu.bench.gemm_tflops]\nbf16_08192 = 1.0\n",
            "[gpu.bench.gemm_tflops]\nbf16 = 1.0\n",
            "warn_ratio = 0.88\n",
        ] {
            let e = rejected(&bench(bad));
            assert!(matches!(e, SpecError::MeasuredParse(_)), "{bad}: {e}");
        }
        let e = rejected(&bench("[gpu.bench.gemm_tflops]\nfp4_8192 = 1.0\n"));
        assert!(
            e.to_string()
                .contains("\"fp4_8192\" is not <precision>_<n>"),
            "{e}"
        );
    }
}
