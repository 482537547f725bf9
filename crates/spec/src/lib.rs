//! The GPU model database: what each NVIDIA model *is*, so that what a host *reports* can be
//! checked against it.
//!
//! The data lives in `data/gpus.toml` (embedded at build time, sources cited per entry). Lookups
//! go by PCI device id (what the kernel sees on the bus, hardest to fake) or by the marketing name
//! that NVML reports.

use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

/// The embedded database text, parsed on first use.
const GPUS_TOML: &str = include_str!("../data/gpus.toml");

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
    pub fp64: Option<f64>,
    pub fp32: Option<f64>,
    pub tf32: Option<f64>,
    pub fp16: Option<f64>,
    pub bf16: Option<f64>,
    pub fp8: Option<f64>,
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

/// One GPU model as its datasheet (or our own measurement, where `measured`) describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuSpec {
    /// Short model name used in pog's output, e.g. "H200 SXM".
    pub model: String,
    /// Exact names NVML reports for this model.
    pub names: Vec<String>,
    /// PCI device ids (vendor 0x10de) this model is sold under.
    pub pci_device_ids: Vec<u16>,
    pub architecture: String,
    /// "major.minor", as CUDA reports it.
    pub compute_capability: String,
    pub sm_count: u32,
    /// Nominal memory capacity, read as GiB.
    pub memory_gib: f64,
    pub memory_type: String,
    pub memory_bus_bits: u32,
    pub boost_clock_mhz: u32,
    pub memory_bandwidth_gbs: f64,
    pub tdp_w: u32,
    pub pcie_gen: u32,
    pub peak: PeakTflops,
    /// Where every figure above comes from.
    pub sources: Vec<String>,
    /// True when pog has checked these figures on a real card of this model.
    #[serde(default)]
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
    #[error("GPU database is not valid TOML for pog's schema: {0}")]
    Parse(toml::de::Error),
    #[error("GPU database: PCI device id {id:#06x} is listed for both {first} and {second}")]
    DuplicateDeviceId {
        id: u16,
        first: String,
        second: String,
    },
    #[error("GPU database: name {name:?} is listed for both {first} and {second}")]
    DuplicateName {
        name: String,
        first: String,
        second: String,
    },
}

/// The whole database, with lookups.
#[derive(Debug, Clone)]
pub struct SpecDb {
    gpus: Vec<GpuSpec>,
}

impl SpecDb {
    /// The database compiled into pog.
    pub fn embedded() -> &'static SpecDb {
        static DB: OnceLock<SpecDb> = OnceLock::new();
        DB.get_or_init(|| {
            SpecDb::parse(GPUS_TOML).expect("embedded GPU database is checked by the tests")
        })
    }

    /// Parses and validates a database text: every device id and every name must be unique,
    /// or lookups would be ambiguous.
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
        Ok(SpecDb { gpus: file.gpu })
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
}
