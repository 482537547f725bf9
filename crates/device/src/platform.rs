//! The [`Platform`] seam: every source of facts behind one trait, with the real hardware
//! implementation here and the simulated test double in [`crate::sim`]. [`collect`] gathers one
//! [`Inventory`] from either.

use crate::facts::{
    CudaReport, HostInfo, Inventory, NvmlReport, Origin, PciGpu, ProcDriver, ProcessEnv, SmiReport,
};
use crate::reading::Reading;
use crate::{cuda, exec, host, nvml, procdriver, process, smi, sysfs};
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

/// One source of facts per method. Implementations must never panic and never block for long:
/// a failing source answers with an unavailable reading.
pub trait Platform: Sync {
    fn origin(&self) -> Origin;
    fn nvml(&self) -> Reading<NvmlReport>;
    fn cuda(&self) -> Reading<CudaReport>;
    fn nvidia_smi(&self) -> Reading<SmiReport>;
    fn pci(&self) -> Reading<Vec<PciGpu>>;
    fn proc_driver(&self) -> Reading<ProcDriver>;
    /// Read after NVML and CUDA were loaded, so the mapped libraries are visible.
    fn process(&self) -> ProcessEnv;
    fn host(&self) -> HostInfo;
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

/// Where the real platform reads from, and how long it waits for nvidia-smi.
#[derive(Debug, Clone)]
pub struct RealConfig {
    pub sysfs_root: PathBuf,
    pub proc_root: PathBuf,
    pub etc_root: PathBuf,
    /// The nvidia-smi to run: a bare name is looked up on PATH.
    pub nvidia_smi: String,
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
    nvml: OnceLock<Result<nvml_wrapper::Nvml, String>>,
}

impl RealPlatform {
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
            Err(why) => Reading::unavailable(why.clone()),
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
}
