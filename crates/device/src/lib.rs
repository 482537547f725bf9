//! The device layer: the only code in pog that touches hardware.
//!
//! Each source (NVML, CUDA, nvidia-smi, sysfs, procfs, the process itself, the host) has its
//! own module that turns what it reads into the plain facts of `pog-facts`; [`RealPlatform`]
//! puts them behind its [`Platform`] seam, with the GPU benchmarks ([`gpu`]) and the host's
//! CPU, memory and storage measurements ([`hostbench`]). Nothing here judges: that is the
//! inspection and benchmark crates' job.

#![warn(missing_docs)]

pub mod cuda;
pub mod cutlass;
mod during;
mod exec;
pub mod gpm;
pub mod gpu;
pub mod host;
pub mod hostbench;
pub mod monitor;
pub mod nvlink;
pub mod nvml;
pub mod procdriver;
pub mod process;
mod real;
pub mod smi;
pub mod sysfs;
pub mod telemetry;

// The fact types, under the paths this crate's modules use.
use pog_facts::{compute, facts, pci, reading};

pub use exec::ExecError;
pub use pog_facts::{collect, Platform};
pub use real::{RealConfig, RealPlatform};
