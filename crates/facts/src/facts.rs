//! What the device layer reports: one plain-data view per source, so that the inspection
//! logic can compare sources without touching hardware.
//!
//! NVML and `nvidia-smi` describe the same things and share [`GpuFacts`]: a shim that lies in
//! one and not the other shows up as a field-by-field difference.

use crate::pci::BusId;
use crate::reading::Reading;
use serde::{Deserialize, Serialize};

/// Everything collected from one host in one pass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Inventory {
    /// Where the facts came from: real hardware, or a simulated test double.
    pub origin: Origin,
    /// When the collection started (RFC 3339, UTC).
    pub collected_at: String,
    pub nvml: Reading<NvmlReport>,
    pub cuda: Reading<CudaReport>,
    pub nvidia_smi: Reading<SmiReport>,
    /// NVIDIA display-class devices on the PCI bus, as the kernel's sysfs lists them.
    pub pci: Reading<Vec<PciGpu>>,
    /// `/proc/driver/nvidia`: the kernel module's own view.
    pub proc_driver: Reading<ProcDriver>,
    pub process: ProcessEnv,
    pub host: HostInfo,
}

/// Real hardware, or the simulated double (which never produces a result anyone should trust).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    Hardware,
    Simulated { profile: String },
}

/// NVML's answers, library-wide and per GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NvmlReport {
    pub driver_version: Reading<String>,
    /// The CUDA version the driver supports, "major.minor".
    pub cuda_driver_version: Reading<String>,
    pub nvml_version: Reading<String>,
    pub gpus: Vec<GpuFacts>,
    /// Every pair of GPUs (a < b).
    #[serde(default)]
    pub topology: Vec<GpuPair>,
}

/// `nvidia-smi -q -x`, parsed, with the binary that answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SmiReport {
    /// The binary as found on PATH (or configured).
    pub binary: String,
    /// Where that path really leads (symlinks resolved).
    pub binary_resolved: Reading<String>,
    pub driver_version: Reading<String>,
    pub cuda_version: Reading<String>,
    pub attached_gpus: Reading<u32>,
    pub gpus: Vec<GpuFacts>,
}

/// One GPU as NVML or nvidia-smi describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuFacts {
    /// The source's own index (NVML index, or position in nvidia-smi's output).
    pub index: u32,
    pub name: Reading<String>,
    pub uuid: Reading<String>,
    pub serial: Reading<String>,
    pub board_part_number: Reading<String>,
    pub board_id: Reading<u32>,
    pub vbios_version: Reading<String>,
    pub inforom_image: Reading<String>,
    pub inforom_oem: Reading<String>,
    pub inforom_ecc: Reading<String>,
    pub gsp_firmware: Reading<String>,
    pub pci_bus_id: Reading<BusId>,
    /// 16-bit PCI device id (vendor stripped), e.g. 0x2335.
    pub pci_device_id: Reading<u16>,
    /// 32-bit subsystem id as NVML gives it: subsystem device << 16 | subsystem vendor.
    pub pci_subsystem_id: Reading<u32>,
    pub link: LinkFacts,
    pub architecture: Reading<String>,
    /// "major.minor".
    pub compute_capability: Reading<String>,
    pub cuda_cores: Reading<u32>,
    pub memory_total_mib: Reading<u64>,
    pub memory_reserved_mib: Reading<u64>,
    pub memory_bus_bits: Reading<u32>,
    pub ecc: Reading<EccMode>,
    pub retired_pages: Reading<RetiredPages>,
    pub remapped_rows: Reading<RemappedRows>,
    pub max_sm_clock_mhz: Reading<u32>,
    pub max_memory_clock_mhz: Reading<u32>,
    pub power_limit_w: Reading<f64>,
    pub max_power_limit_w: Reading<f64>,
    /// "None" (bare metal), "Pass-Through", "vGPU", "Host vGPU", "Host vSGA".
    pub virtualization_mode: Reading<String>,
    pub mig_enabled: Reading<bool>,
    pub persistence_mode: Reading<bool>,
    /// NVLink links, with state and error counters (NVML only).
    #[serde(default = "not_recorded")]
    pub nvlinks: Reading<Vec<NvLinkFacts>>,
}

/// For fields added after an inventory was saved: reading an older capture still works.
fn not_recorded<T>() -> Reading<T> {
    Reading::unavailable("not recorded in this inventory")
}

/// One NVLink link of a GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NvLinkFacts {
    pub link: u32,
    pub active: bool,
    pub version: Reading<u32>,
    /// The PCI address of the device at the other end (a GPU or an NVSwitch).
    pub remote_bus_id: Reading<BusId>,
    pub crc_flit_errors: Reading<u64>,
    pub crc_data_errors: Reading<u64>,
    pub replay_errors: Reading<u64>,
    pub recovery_errors: Reading<u64>,
}

/// How two GPUs reach each other (NVML's topology and P2P status), as `nvidia-smi topo -m`
/// names it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuPair {
    /// NVML indexes of the two GPUs.
    pub a: u32,
    pub b: u32,
    /// Common ancestor on the PCIe tree: "PIX", "PXB", "PHB", "NODE", "SYS" (or "X" on one board).
    pub path: Reading<String>,
    /// Active NVLink links from a that end at b.
    pub nvlinks: u32,
    /// NVML's P2P status for reads and writes ("OK" or why not).
    pub p2p_read: Reading<String>,
    pub p2p_write: Reading<String>,
}

/// PCIe link state: generation and lane count, now and at most.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkFacts {
    pub current_gen: Reading<u32>,
    pub max_gen: Reading<u32>,
    pub current_width: Reading<u32>,
    pub max_width: Reading<u32>,
}

/// ECC mode, now and after the next reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EccMode {
    pub current: bool,
    pub pending: bool,
}

/// Page retirement (pre-Ampere memory repair).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetiredPages {
    pub single_bit: u64,
    pub double_bit: u64,
    pub pending: bool,
}

/// Row remapping (Ampere and later memory repair).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemappedRows {
    pub correctable: u64,
    pub uncorrectable: u64,
    pub pending: bool,
    pub failure: bool,
}

/// CUDA's answers: the driver API, which is what a workload actually runs on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CudaReport {
    /// "major.minor" from cuDriverGetVersion.
    pub driver_version: Reading<String>,
    pub devices: Vec<CudaGpu>,
}

/// One CUDA device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CudaGpu {
    pub ordinal: u32,
    pub name: Reading<String>,
    pub uuid: Reading<String>,
    pub pci_bus_id: Reading<BusId>,
    pub sm_count: Reading<u32>,
    pub memory_total_bytes: Reading<u64>,
    pub compute_capability: Reading<String>,
    pub l2_cache_bytes: Reading<u64>,
    pub clock_mhz: Reading<u32>,
    pub memory_bus_bits: Reading<u32>,
}

/// One NVIDIA display-class PCI function from `/sys/bus/pci/devices`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PciGpu {
    pub bus_id: BusId,
    pub device_id: u16,
    pub subsystem_vendor: Reading<u16>,
    pub subsystem_device: Reading<u16>,
    /// 24-bit class code, 0x030000 (VGA) or 0x030200 (3D controller).
    pub class: u32,
    pub current_link_speed: Reading<String>,
    pub current_link_width: Reading<u32>,
    pub max_link_speed: Reading<String>,
    pub max_link_width: Reading<u32>,
    /// The kernel driver bound to the function ("nvidia", "vfio-pci", …).
    pub driver: Reading<String>,
    pub numa_node: Reading<i32>,
}

/// The NVIDIA kernel module's view, from `/proc/driver/nvidia`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcDriver {
    /// The driver version number parsed from the NVRM line, e.g. "580.159.04".
    pub version: Reading<String>,
    /// The whole NVRM line, for the record.
    pub version_line: Reading<String>,
    pub gpus: Vec<ProcGpu>,
}

/// One entry of `/proc/driver/nvidia/gpus/<bus id>/information`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcGpu {
    pub bus_id: BusId,
    pub model: Reading<String>,
    pub uuid: Reading<String>,
    pub vbios: Reading<String>,
    pub bus_type: Reading<String>,
    pub minor: Reading<u32>,
}

/// What could have been slipped between pog and the driver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessEnv {
    /// The `LD_PRELOAD` environment variable, if set.
    pub ld_preload: Option<String>,
    /// Libraries listed in `/etc/ld.so.preload` (preloaded into every process).
    pub ld_so_preload: Reading<Vec<String>>,
    /// NVIDIA libraries this process has mapped (`/proc/self/maps`), read after NVML and CUDA
    /// were loaded.
    pub nvidia_libraries: Reading<Vec<LoadedLibrary>>,
}

/// A shared library file mapped into this process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadedLibrary {
    pub path: String,
    pub owner_uid: Reading<u32>,
    /// Unix permission bits.
    pub mode: Reading<u32>,
}

/// The host around the GPUs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostInfo {
    pub hostname: Reading<String>,
    pub os: Reading<String>,
    pub kernel: Reading<String>,
    pub cpu: Reading<CpuInfo>,
    pub memory_total_bytes: Reading<u64>,
    pub storage: Reading<Vec<StorageDevice>>,
}

/// The CPUs, from `/proc/cpuinfo` and cpufreq.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuInfo {
    pub model: String,
    pub vendor: String,
    pub sockets: u32,
    /// Physical cores across all sockets.
    pub cores: u32,
    /// Hardware threads (logical CPUs).
    pub threads: u32,
    /// Mean of the current per-CPU frequencies.
    pub mhz_current: Reading<f64>,
    /// cpufreq's maximum (absent in most VMs).
    pub mhz_max: Reading<f64>,
    /// True when the CPU reports the `hypervisor` flag: this is a virtual machine.
    pub hypervisor: bool,
    pub flags: Vec<String>,
}

/// One block device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StorageDevice {
    pub name: String,
    pub model: Reading<String>,
    pub size_bytes: Reading<u64>,
    pub rotational: Reading<bool>,
}

/// Formats CUDA's 16 UUID bytes the way NVML prints them: `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
pub fn format_uuid(bytes: &[u8; 16]) -> String {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}
