//! The simulated platform: a test double that answers like a healthy host with the given GPU
//! models (figures from the spec database), into which inconsistencies and faults can be
//! injected. It exists so that CI can exercise every rule without a GPU. Its output is marked
//! [`Origin::Simulated`] and is never a result.

#![warn(missing_docs)]

use pog_facts::hostbench::{HostMeasurement, HostPlan, StorageBench};
use pog_facts::*;
use pog_spec::{GpuSpec, SpecDb};
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

/// Fraction of the datasheet peak the simulated GPUs and links run at.
pub const SIM_EFFICIENCY: f64 = 0.75;

/// The driver version every simulated source reports.
pub const SIM_DRIVER_VERSION: &str = "580.159.04";

/// Something wrong with a simulated host. Faults act on GPU 0 (and GPU 1 where two GPUs are
/// needed). Each one models a real attack or failure that inspection must catch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Every software source calls GPU 0 a different model; only the PCI device id is true.
    SpoofedName,
    /// nvidia-smi (a replaced binary) reports a different serial and memory size than NVML.
    SmiDisagrees,
    /// The CUDA driver library is absent.
    CudaMissing,
    /// The NVML library is absent.
    NvmlMissing,
    /// nvidia-smi is not installed.
    SmiMissing,
    /// CUDA lists one GPU fewer than NVML.
    HiddenFromCuda,
    /// GPU 1 reports GPU 0's UUID everywhere.
    DuplicateUuid,
    /// GPU 1 reports GPU 0's serial.
    DuplicateSerial,
    /// LD_PRELOAD is set.
    LdPreload,
    /// libnvidia-ml was loaded from a user-writable directory.
    ForeignNvml,
    /// ECC is off on GPU 0.
    EccOff,
    /// GPU 0 has a page retirement pending.
    RetirementPending,
    /// GPU 0 has a row remap pending.
    RemapPending,
    /// GPU 0's row remapper ran out of spare rows.
    RemapFailure,
    /// GPU 0's link runs one generation and half the lanes below its maximum.
    LinkDegraded,
    /// GPU 0 has fewer SMs than its model (a cut-down chip), consistently in every source.
    FewerSms,
    /// GPU 0 has less memory than its model, consistently in every source.
    LessMemory,
    /// sysfs sees a different PCI device id than NVML reports.
    SysfsDeviceId,
    /// The kernel module's version differs from what NVML reports.
    DriverVersionMismatch,
    /// The host is a VM with a vGPU.
    Hypervisor,
    /// NVML fails to read GPU 0's serial (an error on one field).
    NvmlFieldError,
    /// GPU 0's first NVLink counts CRC errors and its second is down.
    NvlinkErrors,
}

impl Fault {
    /// Every fault with its command-line name.
    pub const ALL: [(&'static str, Fault); 22] = [
        ("spoofed-name", Fault::SpoofedName),
        ("smi-disagrees", Fault::SmiDisagrees),
        ("cuda-missing", Fault::CudaMissing),
        ("nvml-missing", Fault::NvmlMissing),
        ("smi-missing", Fault::SmiMissing),
        ("hidden-from-cuda", Fault::HiddenFromCuda),
        ("duplicate-uuid", Fault::DuplicateUuid),
        ("duplicate-serial", Fault::DuplicateSerial),
        ("ld-preload", Fault::LdPreload),
        ("foreign-nvml", Fault::ForeignNvml),
        ("ecc-off", Fault::EccOff),
        ("retirement-pending", Fault::RetirementPending),
        ("remap-pending", Fault::RemapPending),
        ("remap-failure", Fault::RemapFailure),
        ("link-degraded", Fault::LinkDegraded),
        ("fewer-sms", Fault::FewerSms),
        ("less-memory", Fault::LessMemory),
        ("sysfs-device-id", Fault::SysfsDeviceId),
        ("driver-version-mismatch", Fault::DriverVersionMismatch),
        ("hypervisor", Fault::Hypervisor),
        ("nvml-field-error", Fault::NvmlFieldError),
        ("nvlink-errors", Fault::NvlinkErrors),
    ];

    /// The fault's command-line name, e.g. `"spoofed-name"`.
    pub fn name(self) -> &'static str {
        match self {
            Fault::SpoofedName => "spoofed-name",
            Fault::SmiDisagrees => "smi-disagrees",
            Fault::CudaMissing => "cuda-missing",
            Fault::NvmlMissing => "nvml-missing",
            Fault::SmiMissing => "smi-missing",
            Fault::HiddenFromCuda => "hidden-from-cuda",
            Fault::DuplicateUuid => "duplicate-uuid",
            Fault::DuplicateSerial => "duplicate-serial",
            Fault::LdPreload => "ld-preload",
            Fault::ForeignNvml => "foreign-nvml",
            Fault::EccOff => "ecc-off",
            Fault::RetirementPending => "retirement-pending",
            Fault::RemapPending => "remap-pending",
            Fault::RemapFailure => "remap-failure",
            Fault::LinkDegraded => "link-degraded",
            Fault::FewerSms => "fewer-sms",
            Fault::LessMemory => "less-memory",
            Fault::SysfsDeviceId => "sysfs-device-id",
            Fault::DriverVersionMismatch => "driver-version-mismatch",
            Fault::Hypervisor => "hypervisor",
            Fault::NvmlFieldError => "nvml-field-error",
            Fault::NvlinkErrors => "nvlink-errors",
        }
    }

    fn needs_two_gpus(self) -> bool {
        matches!(
            self,
            Fault::DuplicateUuid | Fault::DuplicateSerial | Fault::HiddenFromCuda
        )
    }
}

/// The command-line name.
impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.name())
    }
}

/// Parses a command-line name; surrounding spaces are ignored.
impl FromStr for Fault {
    type Err = ProfileError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Fault::ALL
            .iter()
            .find(|(name, _)| *name == s.trim())
            .map(|(_, f)| *f)
            .ok_or_else(|| ProfileError::UnknownFault(s.trim().to_string()))
    }
}

/// The host number of a profile without `host=N` (outside `pog agent`): its GPUs have the
/// UUIDs `GPU-00000051-0000-0000-0000-0000000000NN`.
pub const DEFAULT_HOST: u64 = 0;

/// The most GPUs of one model a profile may ask for (`xN`).
pub const MAX_SIM_GPUS: usize = 64;

/// Why a simulation profile could not be built. Each message names the part of the profile
/// at fault and what would be accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    /// A model the spec database does not know.
    #[error("unknown GPU model {0:?} in simulation profile; `pog specs` lists the known models")]
    UnknownModel(String),
    /// A fault name that is not in [`Fault::ALL`].
    #[error("unknown fault {name:?}; known: {known}", name = .0, known = fault_names())]
    UnknownFault(String),
    /// An `xN` count that is zero or too large.
    #[error(
        "bad GPU count x{count} for {model:?} in simulation profile; use x1 to x{MAX_SIM_GPUS}"
    )]
    BadCount {
        /// The model the count was given for.
        model: String,
        /// The count as written.
        count: String,
    },
    /// The fault acts on more GPUs than the host has (that NVML lists).
    #[error("fault {fault} needs at least {needed} simulated GPU(s) that NVML lists")]
    TooFewGpus {
        /// The fault asked for.
        fault: Fault,
        /// How many NVML-listed GPUs it needs.
        needed: usize,
    },
    /// A `host=N` whose N is not a whole number from 0 to 2^64 - 1.
    #[error("bad host number {0:?} in simulation profile; use host=N with N from 0 to {max}", max = u64::MAX)]
    BadHost(String),
    /// `host=N` given more than once.
    #[error("host=N is given twice in simulation profile; give it once")]
    HostTwice,
    /// The fault needs GPU 0 to have two readable NVLinks.
    #[error("fault {0} needs a simulated GPU with readable NVLinks (an SXM model)")]
    NoNvlink(Fault),
}

/// Every fault's name, for the error that lists them.
fn fault_names() -> String {
    let names: Vec<_> = Fault::ALL.iter().map(|(n, _)| *n).collect();
    names.join(", ")
}

/// A simulated host: every source's answer, stored and returned as is.
#[derive(Debug, Clone)]
pub struct SimPlatform {
    /// The profile it was made from (host number included), which rebuilds it.
    pub profile: String,
    /// What NVML reports.
    pub nvml: Reading<NvmlReport>,
    /// What the CUDA driver reports.
    pub cuda: Reading<CudaReport>,
    /// What `nvidia-smi -q -x` reports.
    pub nvidia_smi: Reading<SmiReport>,
    /// The kernel's PCI view of the GPUs.
    pub pci: Reading<Vec<PciGpu>>,
    /// What the NVIDIA kernel module reports under `/proc/driver/nvidia`.
    pub proc_driver: Reading<ProcDriver>,
    /// The process's environment (loaded libraries, preload, containers).
    pub process: ProcessEnv,
    /// The host: CPU, memory, storage, OS.
    pub host: HostInfo,
}

impl SimPlatform {
    /// Parses a profile such as `"H200 SXM x2; duplicate-uuid, ecc-off"`: comma-separated spec
    /// models (each optionally `xN`), then after `;` the faults to inject and, optionally,
    /// `host=N` (see [`SimPlatform::from_profile_or_host`]). An empty model list is a host
    /// without GPUs. Without `host=` it is host [`DEFAULT_HOST`].
    pub fn from_profile(profile: &str) -> Result<SimPlatform, ProfileError> {
        SimPlatform::from_profile_or_host(profile, DEFAULT_HOST)
    }

    /// Parses a profile as [`SimPlatform::from_profile`] does, building host number
    /// `default_host` when the profile has no `host=N`. The host number seeds every identity a
    /// validator keys on (GPU UUIDs, serial numbers, the hostname), so hosts of different
    /// numbers never share a GPU and the same number always gives the same GPUs. A host
    /// number taken from `default_host` (other than [`DEFAULT_HOST`]) is written into the
    /// profile the host reports, so that the profile alone rebuilds the host.
    pub fn from_profile_or_host(
        profile: &str,
        default_host: u64,
    ) -> Result<SimPlatform, ProfileError> {
        let (models, options) = profile.split_once(';').unwrap_or((profile, ""));
        let db = SpecDb::embedded();
        let mut specs = Vec::new();
        for item in models.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (model, count) = match item.rsplit_once(" x") {
                Some((m, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
                    let model = m.trim();
                    let count = n
                        .parse::<usize>()
                        .ok()
                        .filter(|c| (1..=MAX_SIM_GPUS).contains(c))
                        .ok_or_else(|| ProfileError::BadCount {
                            model: model.to_string(),
                            count: n.to_string(),
                        })?;
                    (model, count)
                }
                _ => (item, 1),
            };
            let spec = db
                .by_model(model)
                .ok_or_else(|| ProfileError::UnknownModel(model.to_string()))?;
            specs.extend(std::iter::repeat_n(spec, count));
        }
        let mut host = None;
        let mut faults = Vec::new();
        for item in options.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match item.strip_prefix("host=") {
                Some(_) if host.is_some() => return Err(ProfileError::HostTwice),
                Some(n) => {
                    let n = n.trim();
                    let parsed = n
                        .parse::<u64>()
                        .ok()
                        .filter(|_| n.bytes().all(|b| b.is_ascii_digit()));
                    host = Some(parsed.ok_or_else(|| ProfileError::BadHost(n.to_string()))?);
                }
                None => faults.push(item.parse::<Fault>()?),
            }
        }
        let mut sim = SimPlatform::healthy(&specs, host.unwrap_or(default_host));
        sim.profile = match host {
            None if default_host != DEFAULT_HOST => {
                let base = profile.trim().trim_end_matches(';').trim_end();
                let sep = if base.contains(';') { "," } else { ";" };
                format!("{base}{sep} host={default_host}")
            }
            _ => profile.trim().to_string(),
        };
        for fault in faults {
            sim.inject(fault)?;
        }
        Ok(sim)
    }

    /// A consistent, healthy bare-metal host with these GPUs, number `host` (which seeds the
    /// GPUs' UUIDs and serial numbers and the hostname).
    pub fn healthy(specs: &[&GpuSpec], host: u64) -> SimPlatform {
        let gpus: Vec<GpuFacts> = specs
            .iter()
            .enumerate()
            .map(|(i, s)| sim_gpu(host, i as u32, s))
            .collect();
        let smi_gpus = gpus
            .iter()
            .map(|g| GpuFacts {
                compute_capability: Reading::unavailable("not in nvidia-smi -q"),
                cuda_cores: Reading::unavailable("not in nvidia-smi -q"),
                memory_bus_bits: Reading::unavailable("not in nvidia-smi -q"),
                ..g.clone()
            })
            .collect();
        let cuda_devices = gpus
            .iter()
            .zip(specs)
            .map(|(g, s)| sim_cuda(g, s))
            .collect();
        let pci = gpus
            .iter()
            .map(|g| PciGpu {
                bus_id: *g.pci_bus_id.value().expect("sim bus id"),
                device_id: *g.pci_device_id.value().expect("sim device id"),
                subsystem_vendor: Reading::Value(0x10de),
                subsystem_device: g.pci_subsystem_id.as_ref().map(|s| (*s >> 16) as u16),
                class: 0x030200,
                current_link_speed: Reading::Value(gen_speed(
                    g.link.current_gen.value().copied().unwrap_or(1),
                )),
                current_link_width: g.link.current_width.clone(),
                max_link_speed: Reading::Value(gen_speed(
                    g.link.max_gen.value().copied().unwrap_or(1),
                )),
                max_link_width: g.link.max_width.clone(),
                driver: Reading::Value("nvidia".into()),
                numa_node: Reading::Value(0),
            })
            .collect();
        let proc_gpus = gpus
            .iter()
            .enumerate()
            .map(|(i, g)| ProcGpu {
                bus_id: *g.pci_bus_id.value().expect("sim bus id"),
                model: g.name.clone(),
                uuid: g.uuid.clone(),
                vbios: g.vbios_version.clone(),
                bus_type: Reading::Value("PCIe".into()),
                minor: Reading::Value(i as u32),
            })
            .collect();
        let lib = |path: &str| LoadedLibrary {
            path: path.into(),
            owner_uid: Reading::Value(0),
            mode: Reading::Value(0o644),
        };
        SimPlatform {
            profile: String::new(),
            nvml: Reading::Value(NvmlReport {
                driver_version: Reading::Value(SIM_DRIVER_VERSION.into()),
                cuda_driver_version: Reading::Value("13.0".into()),
                nvml_version: Reading::Value(format!("13.{SIM_DRIVER_VERSION}")),
                topology: sim_topology(specs),
                gpus,
            }),
            cuda: Reading::Value(CudaReport { driver_version: Reading::Value("13.0".into()), devices: cuda_devices }),
            nvidia_smi: Reading::Value(SmiReport {
                binary: "/usr/bin/nvidia-smi".into(),
                binary_resolved: Reading::Value("/usr/bin/nvidia-smi".into()),
                driver_version: Reading::Value(SIM_DRIVER_VERSION.into()),
                cuda_version: Reading::Value("13.0".into()),
                attached_gpus: Reading::Value(specs.len() as u32),
                gpus: smi_gpus,
            }),
            pci: Reading::Value(pci),
            proc_driver: Reading::Value(ProcDriver {
                version: Reading::Value(SIM_DRIVER_VERSION.into()),
                version_line: Reading::Value(format!("NVRM version: NVIDIA UNIX x86_64 Kernel Module  {SIM_DRIVER_VERSION}  (simulated)")),
                gpus: proc_gpus,
            }),
            process: ProcessEnv {
                ld_preload: None,
                ld_so_preload: Reading::Value(vec![]),
                nvidia_libraries: Reading::Value(if specs.is_empty() {
                    vec![]
                } else {
                    vec![
                        lib(&format!("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.{SIM_DRIVER_VERSION}")),
                        lib(&format!("/usr/lib/x86_64-linux-gnu/libcuda.so.{SIM_DRIVER_VERSION}")),
                    ]
                }),
            },
            host: HostInfo {
                hostname: Reading::Value(format!("simulated-host-{host}")),
                os: Reading::Value("Simulated Linux".into()),
                kernel: Reading::Value("6.8.0-sim".into()),
                cpu: Reading::Value(CpuInfo {
                    model: "Simulated CPU".into(),
                    vendor: "GenuineIntel".into(),
                    sockets: 2,
                    cores: 64,
                    threads: 128,
                    mhz_current: Reading::Value(2000.0),
                    mhz_max: Reading::Value(3800.0),
                    hypervisor: false,
                    flags: vec!["fpu".into(), "avx2".into(), "avx512f".into()],
                }),
                memory_total_bytes: Reading::Value(1 << 40),
                storage: Reading::Value(vec![StorageDevice {
                    name: "nvme0n1".into(),
                    model: Reading::Value("Simulated NVMe".into()),
                    size_bytes: Reading::Value(3_840_755_982_336),
                    rotational: Reading::Value(false),
                }]),
            },
        }
    }

    /// Injects one fault. Errors when the host lacks what the fault needs (GPUs, two GPUs).
    pub fn inject(&mut self, fault: Fault) -> Result<(), ProfileError> {
        let gpu_count = self.nvml.value().map_or(0, |n| n.gpus.len());
        let needed = if fault.needs_two_gpus() { 2 } else { 1 };
        let host_only = matches!(
            fault,
            Fault::LdPreload
                | Fault::Hypervisor
                | Fault::CudaMissing
                | Fault::NvmlMissing
                | Fault::SmiMissing
        );
        if !host_only && gpu_count < needed {
            return Err(ProfileError::TooFewGpus { fault, needed });
        }
        match fault {
            Fault::SpoofedName => {
                let current = self.nvml_gpu(0).name.value().cloned().unwrap_or_default();
                let fake = if current == "NVIDIA H200" {
                    "NVIDIA B200"
                } else {
                    "NVIDIA H200"
                };
                self.each_facts(0, |g| g.name = Reading::Value(fake.into()));
                self.cuda_gpu(0, |c| c.name = Reading::Value(fake.into()));
                self.proc_gpu(0, |p| p.model = Reading::Value(fake.into()));
            }
            Fault::SmiDisagrees => self.smi_gpu(0, |g| {
                g.serial = Reading::Value("0000000000001".into());
                g.memory_total_mib = g.memory_total_mib.clone().map(|m| m + 4096);
            }),
            Fault::CudaMissing => {
                self.cuda = Reading::unavailable("CUDA driver library (libcuda.so) not found")
            }
            Fault::NvmlMissing => {
                self.nvml =
                    Reading::unavailable("NVML library not found; is the NVIDIA driver installed?");
                if let Reading::Value(libs) = &mut self.process.nvidia_libraries {
                    libs.retain(|l| !l.path.contains("libnvidia-ml"));
                }
            }
            Fault::SmiMissing => {
                self.nvidia_smi = Reading::unavailable("nvidia-smi not found on PATH")
            }
            Fault::HiddenFromCuda => {
                if let Reading::Value(c) = &mut self.cuda {
                    c.devices.pop();
                }
            }
            Fault::DuplicateUuid => {
                let uuid = self.nvml_gpu(0).uuid.clone();
                self.each_facts(1, |g| g.uuid = uuid.clone());
                self.cuda_gpu(1, |c| c.uuid = uuid.clone());
                self.proc_gpu(1, |p| p.uuid = uuid.clone());
            }
            Fault::DuplicateSerial => {
                let serial = self.nvml_gpu(0).serial.clone();
                self.each_facts(1, |g| g.serial = serial.clone());
            }
            Fault::LdPreload => self.process.ld_preload = Some("/tmp/libgpufake.so".into()),
            Fault::ForeignNvml => {
                if let Reading::Value(libs) = &mut self.process.nvidia_libraries {
                    for l in libs.iter_mut().filter(|l| l.path.contains("libnvidia-ml")) {
                        l.path = "/home/provider/.local/lib/libnvidia-ml.so.1".into();
                        l.owner_uid = Reading::Value(1000);
                        l.mode = Reading::Value(0o775);
                    }
                }
            }
            Fault::EccOff => self.each_facts(0, |g| {
                g.ecc = Reading::Value(EccMode {
                    current: false,
                    pending: false,
                })
            }),
            Fault::RetirementPending => self.each_facts(0, |g| {
                g.retired_pages = Reading::Value(RetiredPages {
                    single_bit: 3,
                    double_bit: 1,
                    pending: true,
                })
            }),
            Fault::RemapPending => self.each_facts(0, |g| {
                g.remapped_rows = Reading::Value(RemappedRows {
                    correctable: 1,
                    uncorrectable: 1,
                    pending: true,
                    failure: false,
                })
            }),
            Fault::RemapFailure => self.each_facts(0, |g| {
                g.remapped_rows = Reading::Value(RemappedRows {
                    correctable: 0,
                    uncorrectable: 9,
                    pending: false,
                    failure: true,
                })
            }),
            Fault::LinkDegraded => {
                self.each_facts(0, |g| {
                    g.link.current_gen = g.link.max_gen.clone().map(|m| m.saturating_sub(1).max(1));
                    g.link.current_width = Reading::Value(8);
                });
                let gen = self
                    .nvml_gpu(0)
                    .link
                    .current_gen
                    .value()
                    .copied()
                    .unwrap_or(1);
                self.pci_gpu(0, |p| {
                    p.current_link_speed = Reading::Value(gen_speed(gen));
                    p.current_link_width = Reading::Value(8);
                });
            }
            Fault::FewerSms => {
                let sms = self.cuda_sm_count(0).saturating_sub(8);
                self.cuda_gpu(0, |c| c.sm_count = Reading::Value(sms));
                let per_sm = self
                    .nvml_gpu(0)
                    .compute_capability
                    .value()
                    .and_then(|cc| pog_spec::cores_per_sm(cc))
                    .unwrap_or(128);
                if let Reading::Value(n) = &mut self.nvml {
                    n.gpus[0].cuda_cores = Reading::Value(sms * per_sm);
                }
            }
            Fault::LessMemory => {
                let mib = self
                    .nvml_gpu(0)
                    .memory_total_mib
                    .value()
                    .copied()
                    .unwrap_or(0)
                    * 4
                    / 5;
                self.each_facts(0, |g| g.memory_total_mib = Reading::Value(mib));
                let reserved = self
                    .nvml_gpu(0)
                    .memory_reserved_mib
                    .value()
                    .copied()
                    .unwrap_or(0);
                self.cuda_gpu(0, |c| {
                    c.memory_total_bytes = Reading::Value((mib - reserved) << 20)
                });
            }
            Fault::SysfsDeviceId => self.pci_gpu(0, |p| p.device_id ^= 0x0004),
            Fault::DriverVersionMismatch => {
                if let Reading::Value(p) = &mut self.proc_driver {
                    p.version = Reading::Value("535.104.05".into());
                }
            }
            Fault::Hypervisor => {
                if let Reading::Value(cpu) = &mut self.host.cpu {
                    cpu.hypervisor = true;
                    cpu.flags.push("hypervisor".into());
                }
                if gpu_count > 0 {
                    self.each_facts(0, |g| g.virtualization_mode = Reading::Value("VGPU".into()));
                }
            }
            Fault::NvmlFieldError => {
                if let Reading::Value(n) = &mut self.nvml {
                    n.gpus[0].serial = Reading::unavailable("NVML: Unknown Error");
                }
            }
            Fault::NvlinkErrors => {
                if let Reading::Value(n) = &mut self.nvml {
                    let Reading::Value(links) = &mut n.gpus[0].nvlinks else {
                        return Err(ProfileError::NoNvlink(fault));
                    };
                    if links.len() < 2 {
                        return Err(ProfileError::NoNvlink(fault));
                    }
                    links[0].crc_flit_errors = Reading::Value(1_250);
                    links[0].replay_errors = Reading::Value(37);
                    links[1].active = false;
                }
            }
        }
        Ok(())
    }

    fn nvml_gpu(&self, i: usize) -> &GpuFacts {
        &self.nvml.value().expect("fault needs NVML").gpus[i]
    }

    fn cuda_sm_count(&self, i: usize) -> u32 {
        self.cuda
            .value()
            .and_then(|c| c.devices[i].sm_count.value().copied())
            .unwrap_or(0)
    }

    /// Applies a change to GPU `i` as both NVML and nvidia-smi report it.
    fn each_facts(&mut self, i: usize, f: impl Fn(&mut GpuFacts)) {
        if let Reading::Value(n) = &mut self.nvml {
            f(&mut n.gpus[i]);
        }
        self.smi_gpu(i, f);
    }

    fn smi_gpu(&mut self, i: usize, f: impl Fn(&mut GpuFacts)) {
        if let Reading::Value(s) = &mut self.nvidia_smi {
            f(&mut s.gpus[i]);
        }
    }

    fn cuda_gpu(&mut self, i: usize, f: impl Fn(&mut CudaGpu)) {
        if let Reading::Value(c) = &mut self.cuda {
            if let Some(d) = c.devices.get_mut(i) {
                f(d);
            }
        }
    }

    fn pci_gpu(&mut self, i: usize, f: impl Fn(&mut PciGpu)) {
        if let Reading::Value(p) = &mut self.pci {
            f(&mut p[i]);
        }
    }

    fn proc_gpu(&mut self, i: usize, f: impl Fn(&mut ProcGpu)) {
        if let Reading::Value(p) = &mut self.proc_driver {
            f(&mut p.gpus[i]);
        }
    }
}

impl Platform for SimPlatform {
    fn origin(&self) -> Origin {
        Origin::Simulated {
            profile: self.profile.clone(),
        }
    }
    fn nvml(&self) -> Reading<NvmlReport> {
        self.nvml.clone()
    }
    fn cuda(&self) -> Reading<CudaReport> {
        self.cuda.clone()
    }
    fn nvidia_smi(&self) -> Reading<SmiReport> {
        self.nvidia_smi.clone()
    }
    fn pci(&self) -> Reading<Vec<PciGpu>> {
        self.pci.clone()
    }
    fn proc_driver(&self) -> Reading<ProcDriver> {
        self.proc_driver.clone()
    }
    fn process(&self) -> ProcessEnv {
        self.process.clone()
    }
    fn host(&self) -> HostInfo {
        self.host.clone()
    }

    fn open_gpu(
        &self,
        ordinal: usize,
        model: Option<&'static GpuSpec>,
    ) -> Result<Box<dyn Accelerator>, GpuError> {
        let spec = model.ok_or_else(|| {
            GpuError::Unsupported(format!("simulated GPU {ordinal} is of no known model"))
        })?;
        Ok(Box::new(SimGpu::new(spec, SIM_EFFICIENCY)))
    }

    fn open_fabric(
        &self,
        count: usize,
        link_gbs: &dyn Fn(usize, usize) -> Option<f64>,
    ) -> Result<Box<dyn Fabric>, GpuError> {
        let rates = (0..count)
            .map(|s| {
                (0..count)
                    .map(|d| if s == d { None } else { link_gbs(s, d) })
                    .collect()
            })
            .collect();
        Ok(Box::new(SimFabric {
            rates,
            efficiency: SIM_EFFICIENCY,
            no_collectives: None,
        }))
    }

    /// Fixed figures of a modest host (no measurement: the simulated host has no CPU).
    fn measure_host(&self, plan: &HostPlan, storage_dir: &Path) -> HostMeasurement {
        let threads = self.host.cpu.value().map_or(1, |c| c.threads as usize);
        HostMeasurement {
            threads,
            cpu_gflops_single: 10.0,
            cpu_gflops_multi: 10.0 * threads as f64,
            cpu_fma: true,
            stream_triad_gbs: vec![50.0; plan.stream_repeats as usize],
            storage: Reading::Value(StorageBench {
                path: storage_dir.display().to_string(),
                bytes: plan.storage_bytes,
                direct_io: true,
                write_mbs: 1000.0,
                read_mbs: 1000.0,
                random_read_iops: 20_000.0,
            }),
        }
    }

    fn cutlass_sgemm(&self, _sizes: &[u64], _timeout: Duration) -> Reading<String> {
        Reading::unavailable("not run on a simulated host")
    }
}

/// sysfs's spelling of a PCIe generation's rate.
fn gen_speed(gen: u32) -> String {
    let gts = match gen {
        1 => "2.5",
        2 => "5.0",
        3 => "8.0",
        4 => "16.0",
        5 => "32.0",
        _ => "64.0",
    };
    format!("{gts} GT/s PCIe")
}

/// NVLink links per GPU of the simulated SXM parts (behind NVSwitches), none elsewhere.
fn sim_nvlink_count(spec: &GpuSpec) -> u32 {
    match spec.model.as_str() {
        "B200" | "H200 SXM" | "H100 SXM" => 18,
        m if m.starts_with("A100 SXM") => 12,
        m if m.starts_with("V100 SXM2") => 6,
        _ => 0,
    }
}

/// Simulated NVSwitch at the far end of every simulated link.
const SIM_NVSWITCH: BusId = BusId {
    domain: 0,
    bus: 0x0a,
    device: 0,
    function: 0,
};

fn sim_nvlinks(spec: &GpuSpec) -> Vec<NvLinkFacts> {
    (0..sim_nvlink_count(spec))
        .map(|link| NvLinkFacts {
            link,
            active: true,
            version: Reading::Value(4),
            remote_bus_id: Reading::Value(SIM_NVSWITCH),
            crc_flit_errors: Reading::Value(0),
            crc_data_errors: Reading::Value(0),
            replay_errors: Reading::Value(0),
            recovery_errors: Reading::Value(0),
        })
        .collect()
}

fn sim_topology(specs: &[&GpuSpec]) -> Vec<GpuPair> {
    let mut pairs = Vec::new();
    for a in 0..specs.len() {
        for b in a + 1..specs.len() {
            let links = sim_nvlink_count(specs[a]).min(sim_nvlink_count(specs[b]));
            pairs.push(GpuPair {
                a: a as u32,
                b: b as u32,
                path: Reading::Value("SYS".into()),
                nvlinks: links,
                p2p_read: Reading::Value("Ok".into()),
                p2p_write: Reading::Value("Ok".into()),
            });
        }
    }
    pairs
}

/// GPU `i` of simulated host number `host`. Its UUID is `GPU-00000051-` then the host number
/// (8 bytes) then `i` (4 bytes), and its serial number is the host number's digits before the
/// 13 digits of `1650000000000 + i`: host 0's GPUs keep the identities pinned in tests and
/// docs, and no two (host, GPU) pairs share a UUID or a serial.
fn sim_gpu(host: u64, i: u32, spec: &GpuSpec) -> GpuFacts {
    let mut uuid = [0u8; 16];
    uuid[..4].copy_from_slice(&0x51u32.to_be_bytes());
    uuid[4..12].copy_from_slice(&host.to_be_bytes());
    uuid[12..].copy_from_slice(&i.to_be_bytes());
    let serial = u128::from(host) * 10u128.pow(13) + 1_650_000_000_000 + u128::from(i);
    let memory_total_mib = (spec.memory_gib * 1024.0 * 0.996).round() as u64;
    GpuFacts {
        index: i,
        name: Reading::Value(spec.names[0].clone()),
        uuid: Reading::Value(format_uuid(&uuid)),
        serial: Reading::Value(format!("{serial:013}")),
        board_part_number: Reading::Value("692-SIM00-0000-000".into()),
        board_id: Reading::Value(0x100 + i),
        vbios_version: Reading::Value("96.00.00.00.01".into()),
        inforom_image: Reading::Value("G520.0000.00.01".into()),
        inforom_oem: Reading::Value("2.1".into()),
        inforom_ecc: Reading::Value("7.16".into()),
        gsp_firmware: Reading::Value(SIM_DRIVER_VERSION.into()),
        pci_bus_id: Reading::Value(BusId {
            domain: 0,
            bus: 0x18 + (i as u8) * 0x10,
            device: 0,
            function: 0,
        }),
        pci_device_id: Reading::Value(spec.pci_device_ids[0]),
        pci_subsystem_id: Reading::Value(0x18bf_10de),
        link: LinkFacts {
            current_gen: Reading::Value(spec.pcie_gen),
            max_gen: Reading::Value(spec.pcie_gen),
            current_width: Reading::Value(16),
            max_width: Reading::Value(16),
        },
        architecture: Reading::Value(spec.architecture.clone()),
        compute_capability: Reading::Value(spec.compute_capability.clone()),
        cuda_cores: Reading::Value(spec.sm_count * spec.cores_per_sm().unwrap_or(128)),
        memory_total_mib: Reading::Value(memory_total_mib),
        memory_reserved_mib: Reading::Value(616),
        memory_bus_bits: Reading::Value(spec.memory_bus_bits),
        ecc: Reading::Value(EccMode {
            current: true,
            pending: true,
        }),
        retired_pages: Reading::unavailable("NVML: not supported on this GPU"),
        remapped_rows: Reading::Value(RemappedRows {
            correctable: 0,
            uncorrectable: 0,
            pending: false,
            failure: false,
        }),
        max_sm_clock_mhz: Reading::Value(spec.boost_clock_mhz),
        max_memory_clock_mhz: Reading::unavailable("not simulated"),
        power_limit_w: Reading::Value(f64::from(spec.tdp_w)),
        max_power_limit_w: Reading::Value(f64::from(spec.tdp_w)),
        virtualization_mode: Reading::Value("None".into()),
        mig_enabled: Reading::Value(false),
        persistence_mode: Reading::Value(true),
        nvlinks: Reading::Value(sim_nvlinks(spec)),
    }
}

fn sim_cuda(g: &GpuFacts, spec: &GpuSpec) -> CudaGpu {
    let usable_mib = g.memory_total_mib.value().copied().unwrap_or(0)
        - g.memory_reserved_mib.value().copied().unwrap_or(0);
    CudaGpu {
        ordinal: g.index,
        name: g.name.clone(),
        uuid: g.uuid.clone(),
        pci_bus_id: g.pci_bus_id.clone(),
        sm_count: Reading::Value(spec.sm_count),
        memory_total_bytes: Reading::Value(usable_mib << 20),
        compute_capability: Reading::Value(spec.compute_capability.clone()),
        l2_cache_bytes: Reading::Value(50 << 20),
        clock_mhz: Reading::Value(spec.boost_clock_mhz),
        memory_bus_bits: Reading::Value(spec.memory_bus_bits),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pog_facts::collect;

    #[test]
    fn profiles_parse_and_build_consistent_hosts() {
        let sim = SimPlatform::from_profile("H200 SXM x2, L4").unwrap();
        let inv = collect(&sim);
        assert_eq!(inv.nvml.value().unwrap().gpus.len(), 3);
        assert_eq!(inv.cuda.value().unwrap().devices.len(), 3);
        assert_eq!(inv.pci.value().unwrap().len(), 3);
        assert!(matches!(inv.origin, Origin::Simulated { .. }));
        let empty = SimPlatform::from_profile("").unwrap();
        assert!(empty.nvml.value().unwrap().gpus.is_empty());
    }

    #[test]
    fn bad_profiles_are_errors() {
        let err = |profile: &str| SimPlatform::from_profile(profile).unwrap_err();
        assert_eq!(err("H900"), ProfileError::UnknownModel("H900".into()));
        assert!(err("H900")
            .to_string()
            .starts_with("unknown GPU model \"H900\" in simulation profile"));
        assert_eq!(
            err("H200 SXM; melt"),
            ProfileError::UnknownFault("melt".into())
        );
        assert!(err("H200 SXM; melt")
            .to_string()
            .starts_with("unknown fault \"melt\"; known: spoofed-name, "));
        assert_eq!(
            err("H200 SXM; duplicate-uuid").to_string(),
            "fault duplicate-uuid needs at least 2 simulated GPU(s) that NVML lists"
        );
        assert!(SimPlatform::from_profile("; ld-preload").is_ok());
        // A GPU fault after NVML is gone is an error, not a panic.
        assert_eq!(
            err("H200 SXM; nvml-missing, spoofed-name"),
            ProfileError::TooFewGpus {
                fault: Fault::SpoofedName,
                needed: 1
            }
        );
        assert_eq!(
            err("L4; nvlink-errors"),
            ProfileError::NoNvlink(Fault::NvlinkErrors)
        );
        // Counts of none or of more GPUs than any host has are refused, not allocated.
        for count in ["0", "99999999999999999999", "65"] {
            assert!(
                matches!(
                    err(&format!("H200 SXM x{count}")),
                    ProfileError::BadCount { .. }
                ),
                "x{count}"
            );
        }
        assert_eq!(
            err("H200 SXM x0").to_string(),
            "bad GPU count x0 for \"H200 SXM\" in simulation profile; use x1 to x64"
        );
    }

    /// Every GPU's UUID and serial as NVML reports them.
    fn identities(sim: &SimPlatform) -> Vec<(String, String)> {
        let nvml = sim.nvml.value().unwrap();
        let ids: Vec<_> = nvml
            .gpus
            .iter()
            .map(|g| {
                (
                    g.uuid.value().unwrap().clone(),
                    g.serial.value().unwrap().clone(),
                )
            })
            .collect();
        // Every source agrees with NVML, so the host stays genuine whatever its number.
        let cuda = sim.cuda.value().unwrap();
        assert!(cuda
            .devices
            .iter()
            .zip(&ids)
            .all(|(d, id)| d.uuid.value() == Some(&id.0)));
        ids
    }

    #[test]
    fn host_numbers_give_disjoint_identities_and_the_same_number_the_same() {
        let host = |profile: &str, default: u64| {
            identities(&SimPlatform::from_profile_or_host(profile, default).unwrap())
        };
        // The default host keeps the identities that tests and docs pin.
        let default = host("H200 SXM x2", DEFAULT_HOST);
        assert_eq!(default[0].0, "GPU-00000051-0000-0000-0000-000000000000");
        assert_eq!(default[1].0, "GPU-00000051-0000-0000-0000-000000000001");
        assert_eq!(default[0].1, "1650000000000");
        assert_eq!(default, host("H200 SXM x2; host=0", 99));
        let seven = host("H200 SXM x2; host=7", DEFAULT_HOST);
        assert_eq!(seven[1].0, "GPU-00000051-0000-0000-0000-000700000001");
        assert_eq!(seven, host("H200 SXM x2", 7));
        assert_eq!(seven, host("H200 SXM x2; host=7", DEFAULT_HOST));
        let mut seen = std::collections::BTreeSet::new();
        for n in [0, 1, 7, 10, 1 << 40, u64::MAX] {
            for (uuid, serial) in host("H200 SXM x2, L4; ecc-off", n) {
                assert!(seen.insert(uuid), "host {n}: a UUID seen on another host");
                assert!(
                    seen.insert(serial),
                    "host {n}: a serial seen on another host"
                );
            }
        }
        // A host number that came from the caller is written into the profile it reports.
        let sim = SimPlatform::from_profile_or_host("H200 SXM; ecc-off", 7).unwrap();
        assert_eq!(sim.profile, "H200 SXM; ecc-off, host=7");
        let sim = SimPlatform::from_profile_or_host("H200 SXM;", 7).unwrap();
        assert_eq!(sim.profile, "H200 SXM; host=7");
        assert_eq!(
            identities(&SimPlatform::from_profile(&sim.profile).unwrap()),
            identities(&sim)
        );
        let sim = SimPlatform::from_profile_or_host("L4; host=3", 7).unwrap();
        assert_eq!(sim.profile, "L4; host=3");
        assert_eq!(SimPlatform::from_profile("L4").unwrap().profile, "L4");
    }

    #[test]
    fn bad_host_numbers_are_errors() {
        let err = |profile: &str| SimPlatform::from_profile(profile).unwrap_err();
        for bad in ["", "-1", "+1", "x", "18446744073709551616"] {
            assert_eq!(
                err(&format!("L4; host={bad}")),
                ProfileError::BadHost(bad.into()),
                "host={bad}"
            );
        }
        assert!(err("L4; host=x")
            .to_string()
            .starts_with("bad host number \"x\" in simulation profile; use host=N"));
        assert_eq!(err("L4; host=1, host=2"), ProfileError::HostTwice);
    }

    #[test]
    fn fault_names_round_trip() {
        for (name, fault) in Fault::ALL {
            assert_eq!(fault.name(), name);
            assert_eq!(fault.to_string().parse::<Fault>(), Ok(fault));
        }
    }

    #[test]
    fn every_fault_applies_to_a_two_gpu_nvlink_host() {
        for (name, _) in Fault::ALL {
            SimPlatform::from_profile(&format!("H100 SXM x2; {name}"))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
}

/// Simulated GPUs of one host together, for the peer-to-peer tests: each ordered pair moves
/// data at `efficiency` of the link rate it is given (GB/s one way; `None` where the pair has
/// no peer access). A test double only.
#[derive(Debug, Clone)]
pub struct SimFabric {
    /// Link rate from GPU i to GPU j, GB/s one way; `None` where the pair has no peer access.
    pub rates: Vec<Vec<Option<f64>>>,
    /// Fraction of each link rate the simulated transfers reach.
    pub efficiency: f64,
    /// Why collectives cannot run, to simulate a host without NCCL.
    pub no_collectives: Option<String>,
}

impl Fabric for SimFabric {
    fn count(&self) -> usize {
        self.rates.len()
    }

    fn peer_access(&self, src: usize, dst: usize) -> Result<(), GpuError> {
        match self.rates.get(src).and_then(|r| r.get(dst)) {
            Some(Some(_)) if src != dst => Ok(()),
            _ => Err(GpuError::Unsupported("no simulated peer link".into())),
        }
    }

    fn peer_copy(&mut self, request: &PeerRequest) -> Result<Vec<f64>, GpuError> {
        self.peer_access(request.src, request.dst)?;
        let gbs = self.rates[request.src][request.dst].unwrap_or(0.0) * self.efficiency;
        let ms = request.bytes as f64 / (gbs * 1e9) * 1e3;
        Ok(vec![ms; request.iterations as usize])
    }

    fn peer_latency(
        &mut self,
        src: usize,
        dst: usize,
        iterations: u32,
    ) -> Result<Vec<f64>, GpuError> {
        self.peer_access(src, dst)?;
        Ok(vec![2000.0 / self.efficiency; iterations as usize])
    }

    fn collectives(&self) -> Result<(), GpuError> {
        self.no_collectives
            .clone()
            .map_or(Ok(()), |why| Err(GpuError::Unsupported(why)))
    }

    /// A ring at the slowest link: bus bandwidth = that link's rate × efficiency (pairs
    /// without peer access go through host memory, taken as 10 GB/s).
    fn all_reduce(
        &mut self,
        bytes: u64,
        _warmup: u32,
        iterations: u32,
    ) -> Result<Vec<f64>, GpuError> {
        const THROUGH_HOST_GBS: f64 = 10.0;
        let n = self.rates.len();
        let slowest = (0..n)
            .flat_map(|s| (0..n).filter(move |&d| d != s).map(move |d| (s, d)))
            .map(|(s, d)| self.rates[s][d].unwrap_or(THROUGH_HOST_GBS))
            .fold(f64::INFINITY, f64::min);
        let bus_bytes = bytes as f64 * 2.0 * (n as f64 - 1.0) / n as f64;
        let ms = bus_bytes / (slowest * self.efficiency * 1e9) * 1e3;
        Ok(vec![ms; iterations as usize])
    }
}

/// A simulated GPU for benchmark tests: times follow the model's datasheet peaks scaled by an
/// efficiency, outputs are the exact products (from `pog_matgen`), and it can be told to
/// return wrong results. A test double only: nothing it "measures" is a result.
#[derive(Debug, Clone)]
pub struct SimGpu {
    /// The model simulated (its datasheet peaks set the times).
    pub spec: GpuSpec,
    /// Fraction of the datasheet peak the simulated runs reach.
    pub efficiency: f64,
    /// When set, every sampled GEMM output is off by this much (a lazy or broken kernel).
    pub result_error: Option<f64>,
    /// Words the memory test finds bad in each pattern (a failing memory cell).
    pub bad_memory_words: u64,
    /// Elements that differ from the first result in every sustained iteration (an unstable GPU).
    pub unstable_elements: u64,
}

impl SimGpu {
    /// A healthy simulated GPU of this model running at `efficiency` of its peaks.
    pub fn new(spec: &GpuSpec, efficiency: f64) -> SimGpu {
        SimGpu {
            spec: spec.clone(),
            efficiency,
            result_error: None,
            bad_memory_words: 0,
            unstable_elements: 0,
        }
    }
}

impl Accelerator for SimGpu {
    fn memory(&self) -> Result<(u64, u64), GpuError> {
        let total = (self.spec.memory_gib * (1u64 << 30) as f64) as u64;
        Ok((total / 100 * 98, total))
    }

    fn gemm(&mut self, req: &GemmRequest) -> Result<GemmRun, GpuError> {
        let Some(peak) = self.spec.peak.get(req.precision) else {
            return Err(GpuError::Unsupported(format!(
                "{} has no {} path",
                self.spec.model, req.precision
            )));
        };
        let g = pog_matgen::SeededGemm {
            precision: req.precision,
            m: req.m,
            n: req.n,
            k: req.k,
            seed_a: req.seed_a,
            seed_b: req.seed_b,
            a_layout: pog_matgen::ALayout::KMajor,
        };
        let ms = g.flops() / (peak * 1e12 * self.efficiency) * 1e3;
        let samples = req
            .samples
            .iter()
            .map(|&(row, col)| g.reference(row, col).value + self.result_error.unwrap_or(0.0))
            .collect();
        // A small deterministic wobble so statistics have something to summarize.
        let times_ms = (0..req.iterations)
            .map(|i| ms * (1.0 + 0.002 * f64::from(i % 3)))
            .collect();
        Ok(GemmRun {
            times_ms,
            algorithm: "simulated".into(),
            a_layout: g.a_layout,
            candidates_timed: req.candidates.min(1),
            samples,
        })
    }

    fn copy(&mut self, req: &CopyRequest) -> Result<Vec<f64>, GpuError> {
        use CopyKind;
        // GB/s per direction: HBM for device copies, PCIe (about 3.5 GB/s per lane per generation step) for host copies.
        let pcie =
            0.98 * f64::from(1u32 << self.spec.pcie_gen.saturating_sub(1)) * 16.0 * 0.25 * 0.86;
        let gbs = match req.kind {
            CopyKind::DeviceToDevice => self.spec.memory_bandwidth_gbs * self.efficiency,
            CopyKind::HostToDevicePinned | CopyKind::DeviceToHostPinned => pcie,
            CopyKind::BidirectionalPinned => 1.6 * pcie,
            CopyKind::HostToDevicePageable | CopyKind::DeviceToHostPageable => pcie / 6.0,
        };
        let ms = req.kind.bytes_moved(req.bytes) as f64 / (gbs * 1e9) * 1e3;
        Ok(vec![ms; req.iterations as usize])
    }

    fn memtest(&mut self, req: &MemtestRequest) -> Result<MemtestRun, GpuError> {
        use {PatternResult, MEMORY_PATTERNS};
        let (free, _) = self.memory()?;
        let bytes = (free as f64 * req.fraction.max(0.95)) as u64 / 8 * 8;
        let ms = bytes as f64 / (self.spec.memory_bandwidth_gbs * self.efficiency * 1e9) * 1e3;
        let bad = self.bad_memory_words;
        let patterns = MEMORY_PATTERNS
            .iter()
            .map(|p| PatternResult {
                pattern: p.to_string(),
                bad_words: bad,
                bad_bits: bad,
                first_bad_offset: (bad > 0).then_some(4096),
                write_ms: ms,
                check_ms: ms,
            })
            .collect();
        let counters = pog_facts::telemetry::HealthCounters {
            ecc_corrected_volatile: Reading::Value(0),
            ecc_uncorrected_volatile: Reading::Value(0),
            remapped_rows: Reading::Value(RemappedRows {
                correctable: 0,
                uncorrectable: 0,
                pending: false,
                failure: false,
            }),
            retired_pages: Reading::unavailable("NVML: not supported on this GPU"),
        };
        Ok(MemtestRun {
            bytes_tested: bytes,
            free_bytes: free,
            patterns,
            health_before: Reading::Value(counters.clone()),
            health_after: Reading::Value(counters),
        })
    }

    fn sweep(&mut self, req: &SweepRequest) -> Result<Vec<SweepPoint>, GpuError> {
        // On-chip L2 (tens of MiB) runs about 2.5 times faster than the memory behind it.
        let hbm = self.spec.memory_bandwidth_gbs * self.efficiency;
        Ok(req
            .sizes
            .iter()
            .map(|&bytes| {
                let gbs = if bytes <= 32 << 20 { 2.5 * hbm } else { hbm };
                SweepPoint {
                    bytes,
                    read_gbs: gbs,
                    write_gbs: 0.9 * gbs,
                }
            })
            .collect())
    }

    fn sustained(&mut self, req: &SustainedRequest) -> Result<SustainedRun, GpuError> {
        let Some(peak) = self.spec.peak.get(req.precision) else {
            return Err(GpuError::Unsupported(format!(
                "{} has no {} path",
                self.spec.model, req.precision
            )));
        };
        let flops = 2.0 * (req.size as f64).powi(3);
        let ms = flops / (peak * 1e12 * self.efficiency) * 1e3;
        let runs = ((req.seconds * 1e3 / ms) as usize).clamp(2, 10_000);
        let telemetry = (0..(req.seconds * 1e3 / req.sample_interval_ms.max(1) as f64) as usize)
            .map(|i| pog_facts::telemetry::TelemetrySample {
                t_s: i as f64 * req.sample_interval_ms as f64 / 1e3,
                sm_clock_mhz: Some(self.spec.boost_clock_mhz),
                memory_clock_mhz: None,
                power_w: Some(f64::from(self.spec.tdp_w) * 0.95),
                temperature_c: Some(60),
                clock_event_reasons: Some(0x4),
                gpu_utilization: Some(100),
            })
            .collect();
        Ok(SustainedRun {
            times_ms: vec![ms; runs],
            elements: req.size * req.size,
            mismatched: vec![self.unstable_elements; runs - 1],
            nans: vec![0; runs - 1],
            telemetry: Reading::Value(telemetry),
        })
    }
}
