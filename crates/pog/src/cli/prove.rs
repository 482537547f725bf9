//! The flags of `pog prove`, and the prover choice it shares with `pog agent`.

use super::parse::{parse_bytes, parse_milliseconds};
use clap::Args;
use std::path::PathBuf;

/// What `pog prove` challenges (by default: the validator's plan for the claimed model).
#[derive(Debug, Args, Clone)]
pub struct ProveArgs {
    /// CUDA ordinals of the GPUs to prove, e.g. 0,2 (default: all).
    #[arg(long, value_delimiter = ',', value_name = "N,...")]
    pub gpus: Option<Vec<usize>>,
    /// Precision of the products [default: where the claimed model leads most].
    #[arg(long, value_enum, ignore_case = true)]
    pub precision: Option<pog_spec::Precision>,
    /// m = n = k of each product [default: the validator's plan].
    #[arg(long, value_parser = clap::value_parser!(u64).range(8..=65536))]
    pub size: Option<u64>,
    /// Products in the challenge [default: the validator's plan, at least 1 s of work].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100000))]
    pub batch: Option<u32>,
    /// Output elements per Merkle leaf [default: the validator's plan, 256-byte leaves].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub leaf_elements: Option<u32>,
    /// Output elements spot-checked.
    #[arg(long, default_value = "1024", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub samples: u32,
    /// The time bound, ms [default: the claimed model's expected time for this work].
    #[arg(long, value_parser = parse_milliseconds)]
    pub expected_ms: Option<f64>,
    /// Also compute the challenge on the CPU and compare roots (small challenges only).
    #[arg(long)]
    pub against_cpu: bool,
    /// Where the agent side computes: the GPU, or the CPU (small challenges only, no GPU
    /// needed).
    #[arg(long, value_enum, default_value = "auto")]
    pub prover: ProverKind,
    /// Which proofs to run: the GEMM challenge, the memory challenge, or both (a validator's
    /// round runs both); or the proof of the host's CPU, RAM or storage.
    #[arg(long, value_enum, default_value = "all")]
    pub proof: ProofKind,
    /// Memory challenge: items of 128 bytes in the data set [default: 90 % of the claimed
    /// model's memory].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=(1u64 << 34)))]
    pub items: Option<u64>,
    /// Memory challenge: walkers, a multiple of 64 [default: 0.5 s of the claimed model's
    /// walk].
    #[arg(long, value_parser = clap::value_parser!(u64).range(64..=(1u64 << 36)))]
    pub walkers: Option<u64>,
    /// Memory challenge: random steps per walker, each reading 16 consecutive items
    /// [default: 4].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub steps: Option<u32>,
    /// Storage proof: a directory on the storage to prove; the data set is built there once
    /// and kept between runs (rebuilt after 30 days or for another size).
    #[arg(long, value_name = "DIR", required_if_eq("proof", "storage"))]
    pub storage_dir: Option<PathBuf>,
    /// Storage proof: the claimed size in bytes (K, M, G, T: powers of 1024), built in whole
    /// items of 256 KiB (1 MiB for `--storage-class ssd`).
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes, required_if_eq("proof", "storage"))]
    pub storage_size: Option<u64>,
    /// Storage proof: the claimed class of device, whose read time bounds the walk.
    #[arg(long, value_enum, default_value = "nvme")]
    pub storage_class: StorageClass,
    /// RAM proof: the RAM claimed, bytes (K, M, G, T: powers of 1024), 1 MiB to 2 TiB; 90 % of
    /// it is built in memory.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes, required_if_eq("proof", "ram"))]
    pub ram_size: Option<u64>,
    /// Storage proof: chunks the audit of the data set's root regenerates.
    #[arg(long, default_value = "256", value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub storage_audit: u32,
}

/// The device classes a storage proof may claim (`pog_proof::storage::DeviceClass`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StorageClass {
    /// A local NVMe SSD: 250 µs a dependent 4 KiB read at most.
    Nvme,
    /// A SATA/SAS SSD or a cloud block volume: 1 ms a read at most.
    Ssd,
}

impl From<StorageClass> for pog_proof::storage::DeviceClass {
    fn from(class: StorageClass) -> Self {
        match class {
            StorageClass::Nvme => Self::Nvme,
            StorageClass::Ssd => Self::Ssd,
        }
    }
}

/// Which proofs `pog prove` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProofKind {
    /// The GEMM challenge only (compute).
    Gemm,
    /// The memory challenge only (capacity and bandwidth).
    Memory,
    /// Both, one after the other.
    All,
    /// The host's cores only: one lane per hardware thread at once, timed against one lane
    /// alone (the proof of CPU).
    Cpu,
    /// The host's storage: a data set of `--storage-size` kept in `--storage-dir`, walked at
    /// data-dependent positions against the class's read time (the proof of storage).
    Storage,
    /// The host's RAM: a data set of 90 % of `--ram-size` built in memory on every thread,
    /// walked against the bound its build calibrates (the proof of RAM).
    Ram,
}

/// Which prover `pog agent` computes challenges with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProverKind {
    /// The GPU when CUDA works, else the CPU.
    Auto,
    Gpu,
    /// Small challenges only (tests, hosts without CUDA).
    Cpu,
}

impl From<ProverKind> for pog_local::hostproof::ProverChoice {
    fn from(kind: ProverKind) -> Self {
        match kind {
            ProverKind::Auto => Self::Auto,
            ProverKind::Gpu => Self::Gpu,
            ProverKind::Cpu => Self::Cpu,
        }
    }
}
