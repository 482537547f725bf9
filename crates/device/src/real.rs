//! [`RealPlatform`]: the [`Platform`] seam implemented by this machine's hardware.

use crate::compute::{Accelerator, Fabric, GpuError};
use crate::facts::{
    CudaReport, HostInfo, NvmlReport, Origin, PciGpu, ProcDriver, ProcessEnv, SmiReport,
};
use crate::gpu::{Gpu, GpuFabric};
use crate::reading::Reading;
use crate::{cuda, cutlass, exec, host, hostbench, nvml, procdriver, process, smi, sysfs};
use pog_facts::hostbench::{HostMeasurement, HostPlan};
use pog_facts::Platform;
use pog_spec::GpuSpec;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

/// Where the real platform reads from, and how long it waits for nvidia-smi.
#[derive(Debug, Clone)]
pub struct RealConfig {
    /// Where sysfs is mounted (`/sys`; a fixture tree in tests).
    pub sysfs_root: PathBuf,
    /// Where procfs is mounted (`/proc`).
    pub proc_root: PathBuf,
    /// Where the host's configuration lives (`/etc`).
    pub etc_root: PathBuf,
    /// The nvidia-smi to run: a bare name is looked up on PATH.
    pub nvidia_smi: String,
    /// How long nvidia-smi may take before it is killed.
    pub nvidia_smi_timeout: Duration,
}

impl Default for RealConfig {
    fn default() -> Self {
        RealConfig {
            sysfs_root: "/sys".into(),
            proc_root: "/proc".into(),
            etc_root: "/etc".into(),
            nvidia_smi: "nvidia-smi".into(),
            nvidia_smi_timeout: Duration::from_secs(20),
        }
    }
}

/// The machine pog runs on.
pub struct RealPlatform {
    config: RealConfig,
    /// NVML stays loaded for the platform's life (its mapping is part of the evidence, and
    /// monitoring will sample through the same handle).
    nvml: OnceLock<Result<nvml_wrapper::Nvml, nvml::NvmlInitError>>,
}

impl RealPlatform {
    /// The platform that reads from `config`'s roots. Nothing is read until asked.
    pub fn new(config: RealConfig) -> Self {
        RealPlatform {
            config,
            nvml: OnceLock::new(),
        }
    }
}

impl Platform for RealPlatform {
    fn origin(&self) -> Origin {
        Origin::Hardware
    }

    fn nvml(&self) -> Reading<NvmlReport> {
        match self.nvml.get_or_init(nvml::init) {
            Ok(handle) => Reading::Value(nvml::report(handle)),
            Err(why) => Reading::unavailable(why.to_string()),
        }
    }

    fn cuda(&self) -> Reading<CudaReport> {
        cuda::report()
    }

    fn nvidia_smi(&self) -> Reading<SmiReport> {
        match exec::find_program(&self.config.nvidia_smi) {
            Some(binary) => smi::query(&binary, self.config.nvidia_smi_timeout),
            None => Reading::unavailable(format!("{} not found on PATH", self.config.nvidia_smi)),
        }
    }

    fn pci(&self) -> Reading<Vec<PciGpu>> {
        sysfs::scan(&self.config.sysfs_root)
    }

    fn proc_driver(&self) -> Reading<ProcDriver> {
        procdriver::read(&self.config.proc_root)
    }

    fn process(&self) -> ProcessEnv {
        process::read(&self.config.etc_root, &self.config.proc_root.join("self"))
    }

    fn host(&self) -> HostInfo {
        host::read(&host::HostRoots {
            proc_root: &self.config.proc_root,
            sysfs_root: &self.config.sysfs_root,
            etc_root: &self.config.etc_root,
        })
    }

    fn open_gpu(
        &self,
        ordinal: usize,
        _model: Option<&'static GpuSpec>,
    ) -> Result<Box<dyn Accelerator>, GpuError> {
        Ok(Box::new(Gpu::open(ordinal)?))
    }

    fn open_fabric(
        &self,
        count: usize,
        _link_gbs: &dyn Fn(usize, usize) -> Option<f64>,
    ) -> Result<Box<dyn Fabric>, GpuError> {
        Ok(Box::new(GpuFabric::open(count)?))
    }

    fn measure_host(&self, plan: &HostPlan, storage_dir: &Path) -> HostMeasurement {
        hostbench::run(plan, storage_dir)
    }

    fn cutlass_sgemm(&self, sizes: &[u64], timeout: Duration) -> Reading<String> {
        match cutlass::find() {
            None => Reading::unavailable(format!("{} not on PATH", cutlass::PROGRAM)),
            Some(binary) => cutlass::run_sgemm(&binary, sizes, timeout).into(),
        }
    }
}
