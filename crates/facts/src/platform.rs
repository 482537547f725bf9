//! The [`Platform`] seam: every source of facts, and every way of measuring, behind one
//! trait. `pog_device::RealPlatform` reads this machine; `pog_sim::SimPlatform` is the
//! deterministic test double. [`collect`] gathers one [`Inventory`] from either.

use crate::compute::{Accelerator, Fabric, GpuError};
use crate::facts::{
    CudaReport, HostInfo, Inventory, NvmlReport, Origin, PciGpu, ProcDriver, ProcessEnv, SmiReport,
};
use crate::hostbench::{HostMeasurement, HostPlan};
use crate::reading::Reading;
use pog_spec::GpuSpec;
use std::path::Path;
use std::time::Duration;

/// One source of facts per method, then the measurements. Implementations must never panic
/// and never block for long: a failing source answers with an unavailable reading.
pub trait Platform: Sync {
    /// Real hardware or the simulated double; every report carries it.
    fn origin(&self) -> Origin;
    /// NVML's report.
    fn nvml(&self) -> Reading<NvmlReport>;
    /// The CUDA driver API's report.
    fn cuda(&self) -> Reading<CudaReport>;
    /// `nvidia-smi`'s report.
    fn nvidia_smi(&self) -> Reading<SmiReport>;
    /// NVIDIA display-class devices on the PCI bus.
    fn pci(&self) -> Reading<Vec<PciGpu>>;
    /// The kernel module's view, from `/proc/driver/nvidia`.
    fn proc_driver(&self) -> Reading<ProcDriver>;
    /// Read after NVML and CUDA were loaded, so the mapped libraries are visible.
    fn process(&self) -> ProcessEnv;
    /// The host around the GPUs.
    fn host(&self) -> HostInfo;

    /// Opens CUDA device `ordinal` (of model `model`, where known) for benchmarks.
    fn open_gpu(
        &self,
        ordinal: usize,
        model: Option<&'static GpuSpec>,
    ) -> Result<Box<dyn Accelerator>, GpuError>;
    /// Opens the first `count` GPUs together for GPU-to-GPU benchmarks; `link_gbs(src, dst)`
    /// is the rate of the link between two of them as the inventory reports it.
    fn open_fabric(
        &self,
        count: usize,
        link_gbs: &dyn Fn(usize, usize) -> Option<f64>,
    ) -> Result<Box<dyn Fabric>, GpuError>;
    /// Measures the host's CPU, memory and the storage under `storage_dir`.
    fn measure_host(&self, plan: &HostPlan, storage_dir: &Path) -> HostMeasurement;
    /// cutlass_profiler's SGEMM sweep over `sizes` as CSV, or why it did not run.
    fn cutlass_sgemm(&self, sizes: &[u64], timeout: Duration) -> Reading<String>;
}

/// Collects every source once. nvidia-smi (the slow one, about a second) runs on its own
/// thread while the in-process sources are read.
pub fn collect(platform: &dyn Platform) -> Inventory {
    let collected_at = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    std::thread::scope(|scope| {
        let smi = scope.spawn(|| platform.nvidia_smi());
        let nvml = platform.nvml();
        let cuda = platform.cuda();
        let pci = platform.pci();
        let proc_driver = platform.proc_driver();
        let process = platform.process();
        let host = platform.host();
        let nvidia_smi = smi
            .join()
            .unwrap_or_else(|_| Reading::unavailable("nvidia-smi reader panicked"));
        Inventory {
            origin: platform.origin(),
            collected_at,
            nvml,
            cuda,
            nvidia_smi,
            pci,
            proc_driver,
            process,
            host,
        }
    })
}
