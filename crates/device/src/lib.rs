//! The device layer: the only code in pog that touches hardware.
//!
//! Each source (NVML, CUDA, nvidia-smi, sysfs, procfs, the process itself, the host) has its
//! own module that turns what it reads into plain facts ([`facts`]). The [`Platform`] trait
//! puts them behind one seam; [`RealPlatform`] reads this machine and [`sim::SimPlatform`] is
//! a deterministic test double with injectable faults. Nothing here judges: that is the
//! inspection crate's job.

pub mod compute;
pub mod cuda;
pub mod cutlass;
mod exec;
pub mod facts;
pub mod gpu;
pub mod host;
pub mod nvml;
pub mod pci;
mod platform;
pub mod procdriver;
pub mod process;
pub mod reading;
pub mod sim;
pub mod smi;
pub mod sysfs;
pub mod telemetry;

pub use compute::*;
pub use facts::*;
pub use pci::BusId;
pub use platform::{collect, Platform, RealConfig, RealPlatform};
pub use reading::Reading;
