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
    /// NVML's report.
    pub nvml: Reading<NvmlReport>,
    /// The CUDA driver API's report.
    pub cuda: Reading<CudaReport>,
    /// `nvidia-smi`'s report.
    pub nvidia_smi: Reading<SmiReport>,
    /// NVIDIA display-class devices on the PCI bus, as the kernel's sysfs lists them.
    pub pci: Reading<Vec<PciGpu>>,
    /// `/proc/driver/nvidia`: the kernel module's own view.
    pub proc_driver: Reading<ProcDriver>,
    /// The environment of this process: preloads and mapped NVIDIA libraries.
    pub process: ProcessEnv,
    /// The host around the GPUs.
    pub host: HostInfo,
}

/// Real hardware, or the simulated double (which never produces a result anyone should trust).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// Read from this machine's hardware.
    Hardware,
    /// Produced by the simulated double.
    Simulated {
        /// The simulated profile's name.
        profile: String,
    },
}

/// NVML's answers, library-wide and per GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NvmlReport {
    /// The driver version, e.g. "580.159.04".
    pub driver_version: Reading<String>,
    /// The CUDA version the driver supports, "major.minor".
    pub cuda_driver_version: Reading<String>,
    /// NVML's own version.
    pub nvml_version: Reading<String>,
    /// One entry per GPU, in NVML index order.
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
    /// The driver version nvidia-smi reports.
    pub driver_version: Reading<String>,
    /// The CUDA version nvidia-smi reports.
    pub cuda_version: Reading<String>,
    /// How many GPUs nvidia-smi says are attached.
    pub attached_gpus: Reading<u32>,
    /// One entry per GPU, in nvidia-smi's order.
    pub gpus: Vec<GpuFacts>,
}

/// One GPU as NVML or nvidia-smi describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuFacts {
    /// The source's own index (NVML index, or position in nvidia-smi's output).
    pub index: u32,
    /// Marketing name, e.g. "NVIDIA H200".
    pub name: Reading<String>,
    /// "GPU-" followed by the UUID, as NVML prints it.
    pub uuid: Reading<String>,
    /// Board serial number.
    pub serial: Reading<String>,
    /// Board part number.
    pub board_part_number: Reading<String>,
    /// Board id.
    pub board_id: Reading<u32>,
    /// VBIOS version.
    pub vbios_version: Reading<String>,
    /// InfoROM image version.
    pub inforom_image: Reading<String>,
    /// InfoROM OEM object version.
    pub inforom_oem: Reading<String>,
    /// InfoROM ECC object version.
    pub inforom_ecc: Reading<String>,
    /// GSP firmware version.
    pub gsp_firmware: Reading<String>,
    /// PCI address of the GPU.
    pub pci_bus_id: Reading<BusId>,
    /// 16-bit PCI device id (vendor stripped), e.g. 0x2335.
    pub pci_device_id: Reading<u16>,
    /// 32-bit subsystem id as NVML gives it: subsystem device << 16 | subsystem vendor.
    pub pci_subsystem_id: Reading<u32>,
    /// PCIe link generation and width.
    pub link: LinkFacts,
    /// Architecture name, e.g. "Hopper".
    pub architecture: Reading<String>,
    /// "major.minor".
    pub compute_capability: Reading<String>,
    /// CUDA core count.
    pub cuda_cores: Reading<u32>,
    /// Total memory, MiB.
    pub memory_total_mib: Reading<u64>,
    /// Memory the driver reserves for itself, MiB.
    pub memory_reserved_mib: Reading<u64>,
    /// Memory interface width in bits.
    pub memory_bus_bits: Reading<u32>,
    /// ECC mode.
    pub ecc: Reading<EccMode>,
    /// Retired pages (pre-Ampere memory repair).
    pub retired_pages: Reading<RetiredPages>,
    /// Remapped rows (Ampere and later memory repair).
    pub remapped_rows: Reading<RemappedRows>,
    /// Highest SM clock, MHz.
    pub max_sm_clock_mhz: Reading<u32>,
    /// Highest memory clock, MHz.
    pub max_memory_clock_mhz: Reading<u32>,
    /// Power limit in force, watts.
    pub power_limit_w: Reading<f64>,
    /// Highest power limit that can be set, watts.
    pub max_power_limit_w: Reading<f64>,
    /// "None" (bare metal), "Pass-Through", "vGPU", "Host vGPU", "Host vSGA".
    pub virtualization_mode: Reading<String>,
    /// Whether MIG mode is on.
    pub mig_enabled: Reading<bool>,
    /// Whether persistence mode is on.
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
    /// Link number on this GPU.
    pub link: u32,
    /// Whether the link is up.
    pub active: bool,
    /// NVLink version of the link.
    pub version: Reading<u32>,
    /// The PCI address of the device at the other end (a GPU or an NVSwitch).
    pub remote_bus_id: Reading<BusId>,
    /// CRC errors in flits.
    pub crc_flit_errors: Reading<u64>,
    /// CRC errors in data.
    pub crc_data_errors: Reading<u64>,
    /// Replay errors.
    pub replay_errors: Reading<u64>,
    /// Recovery errors.
    pub recovery_errors: Reading<u64>,
}

/// How two GPUs reach each other (NVML's topology and P2P status), as `nvidia-smi topo -m`
/// names it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuPair {
    /// NVML index of the first GPU.
    pub a: u32,
    /// The second GPU's NVML index (a < b).
    pub b: u32,
    /// Common ancestor on the PCIe tree: "PIX", "PXB", "PHB", "NODE", "SYS" (or "X" on one board).
    pub path: Reading<String>,
    /// Active NVLink links from a that end at b.
    pub nvlinks: u32,
    /// NVML's P2P read status ("OK" or why not).
    pub p2p_read: Reading<String>,
    /// NVML's P2P write status.
    pub p2p_write: Reading<String>,
}

/// PCIe link state: generation and lane count, now and at most.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkFacts {
    /// Current PCIe generation.
    pub current_gen: Reading<u32>,
    /// Highest PCIe generation the link supports.
    pub max_gen: Reading<u32>,
    /// Current lane count.
    pub current_width: Reading<u32>,
    /// Highest lane count the link supports.
    pub max_width: Reading<u32>,
}

/// ECC mode, now and after the next reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EccMode {
    /// Whether ECC is on now.
    pub current: bool,
    /// Whether ECC will be on after the next reset.
    pub pending: bool,
}

/// Page retirement (pre-Ampere memory repair).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetiredPages {
    /// Pages retired for repeated single-bit errors.
    pub single_bit: u64,
    /// Pages retired for double-bit errors.
    pub double_bit: u64,
    /// Whether a retirement waits for the next reset.
    pub pending: bool,
}

/// Row remapping (Ampere and later memory repair).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemappedRows {
    /// Rows remapped for correctable errors.
    pub correctable: u64,
    /// Rows remapped for uncorrectable errors.
    pub uncorrectable: u64,
    /// Whether a remapping waits for the next reset.
    pub pending: bool,
    /// Whether a remapping failed: the GPU has run out of spare rows.
    pub failure: bool,
}

/// CUDA's answers: the driver API, which is what a workload actually runs on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CudaReport {
    /// "major.minor" from cuDriverGetVersion.
    pub driver_version: Reading<String>,
    /// One entry per CUDA device, in ordinal order.
    pub devices: Vec<CudaGpu>,
}

/// One CUDA device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CudaGpu {
    /// CUDA device ordinal.
    pub ordinal: u32,
    /// Device name.
    pub name: Reading<String>,
    /// "GPU-" followed by the UUID, formatted as NVML prints it ([`format_uuid`]).
    pub uuid: Reading<String>,
    /// PCI address of the device.
    pub pci_bus_id: Reading<BusId>,
    /// Streaming multiprocessors.
    pub sm_count: Reading<u32>,
    /// Total memory, bytes.
    pub memory_total_bytes: Reading<u64>,
    /// "major.minor".
    pub compute_capability: Reading<String>,
    /// L2 cache size, bytes.
    pub l2_cache_bytes: Reading<u64>,
    /// Peak SM clock, MHz.
    pub clock_mhz: Reading<u32>,
    /// Memory interface width in bits.
    pub memory_bus_bits: Reading<u32>,
}

/// One NVIDIA display-class PCI function from `/sys/bus/pci/devices`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PciGpu {
    /// PCI address of the function.
    pub bus_id: BusId,
    /// PCI device id (vendor 0x10de).
    pub device_id: u16,
    /// Subsystem vendor id.
    pub subsystem_vendor: Reading<u16>,
    /// Subsystem device id.
    pub subsystem_device: Reading<u16>,
    /// 24-bit class code, 0x030000 (VGA) or 0x030200 (3D controller).
    pub class: u32,
    /// Current link speed, as sysfs spells it (e.g. "32.0 GT/s PCIe").
    pub current_link_speed: Reading<String>,
    /// Current lane count.
    pub current_link_width: Reading<u32>,
    /// Highest link speed, as sysfs spells it.
    pub max_link_speed: Reading<String>,
    /// Highest lane count.
    pub max_link_width: Reading<u32>,
    /// The kernel driver bound to the function ("nvidia", "vfio-pci", …).
    pub driver: Reading<String>,
    /// NUMA node the device is attached to (-1: none).
    pub numa_node: Reading<i32>,
}

/// The NVIDIA kernel module's view, from `/proc/driver/nvidia`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcDriver {
    /// The driver version number parsed from the NVRM line, e.g. "580.159.04".
    pub version: Reading<String>,
    /// The whole NVRM line, for the record.
    pub version_line: Reading<String>,
    /// One entry per GPU the module lists.
    pub gpus: Vec<ProcGpu>,
}

/// One entry of `/proc/driver/nvidia/gpus/<bus id>/information`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcGpu {
    /// PCI address, from the directory name.
    pub bus_id: BusId,
    /// The "Model" line.
    pub model: Reading<String>,
    /// The "GPU UUID" line.
    pub uuid: Reading<String>,
    /// The "Video BIOS" line.
    pub vbios: Reading<String>,
    /// The "Bus Type" line.
    pub bus_type: Reading<String>,
    /// The "Device Minor" line: the N of `/dev/nvidiaN`.
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
    /// Path of the library file.
    pub path: String,
    /// Numeric user id of the file's owner.
    pub owner_uid: Reading<u32>,
    /// Unix permission bits.
    pub mode: Reading<u32>,
}

/// The host around the GPUs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostInfo {
    /// Host name.
    pub hostname: Reading<String>,
    /// Operating system, from `/etc/os-release`.
    pub os: Reading<String>,
    /// Kernel release.
    pub kernel: Reading<String>,
    /// The CPUs.
    pub cpu: Reading<CpuInfo>,
    /// Total memory, bytes.
    pub memory_total_bytes: Reading<u64>,
    /// Block devices.
    pub storage: Reading<Vec<StorageDevice>>,
}

/// The CPUs, from `/proc/cpuinfo` and cpufreq.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuInfo {
    /// Model name.
    pub model: String,
    /// Vendor id string, e.g. "GenuineIntel".
    pub vendor: String,
    /// Physical CPU packages.
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
    /// Feature flags, from `/proc/cpuinfo`.
    pub flags: Vec<String>,
}

/// One block device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StorageDevice {
    /// Kernel name, e.g. "nvme0n1".
    pub name: String,
    /// Model string the device reports.
    pub model: Reading<String>,
    /// Capacity, bytes.
    pub size_bytes: Reading<u64>,
    /// Whether the device is rotational (a spinning disk).
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
