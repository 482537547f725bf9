//! NVML through nvml-wrapper, loaded at run time: the driver's management view of each GPU.

use crate::facts::{
    EccMode, GpuFacts, GpuPair, LinkFacts, NvLinkFacts, NvmlReport, RemappedRows, RetiredPages,
};
use crate::pci::BusId;
use crate::reading::Reading;
use nvml_wrapper::enum_wrappers::device::{Clock, GpuVirtualizationMode, InfoRom, RetirementCause};
use nvml_wrapper::enums::device::DeviceArchitecture;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};

/// Turns an NVML result into a reading whose reason names NVML.
fn nv<T>(result: Result<T, NvmlError>) -> Reading<T> {
    match result {
        Ok(v) => Reading::Value(v),
        Err(NvmlError::NotSupported) => Reading::unavailable("NVML: not supported on this GPU"),
        Err(e) => Reading::unavailable(format!("NVML: {e}")),
    }
}

/// Why NVML could not be loaded. The message says which, and what to check.
#[derive(Debug, thiserror::Error)]
pub enum NvmlInitError {
    /// libnvidia-ml.so.1 could not be loaded: no NVIDIA driver, or not on the loader path.
    #[error(
        "NVML library not found ({}); is the NVIDIA driver installed?",
        loader_message(.0)
    )]
    LibraryMissing(NvmlError),
    /// The library loaded but `nvmlInit` failed (driver not loaded, version mismatch, …).
    #[error("NVML failed to initialize: {0}")]
    Failed(NvmlError),
}

/// The loader's own words for a library that would not load, without nvml-wrapper's prefix.
fn loader_message(e: &NvmlError) -> String {
    match e {
        NvmlError::LibloadingError(inner) => inner.to_string(),
        other => other.to_string(),
    }
}

/// Loads NVML (libnvidia-ml.so.1 from the loader path). Keep the handle alive while the
/// process maps are read, or the library is unloaded again.
pub fn init() -> Result<Nvml, NvmlInitError> {
    Nvml::init().map_err(|e| match e {
        NvmlError::LibloadingError(_) => NvmlInitError::LibraryMissing(e),
        other => NvmlInitError::Failed(other),
    })
}

/// Reads every GPU NVML knows.
pub fn report(nvml: &Nvml) -> NvmlReport {
    let count = nvml.device_count();
    let gpus = match count {
        Ok(n) => (0..n)
            .map(|i| match nvml.device_by_index(i) {
                Ok(device) => gpu_facts(nvml, i, &device),
                Err(e) => unreadable_gpu(i, &format!("NVML: cannot open GPU {i}: {e}")),
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    let topology = topology(nvml, gpus.len() as u32);
    NvmlReport {
        driver_version: nv(nvml.sys_driver_version()),
        cuda_driver_version: nv(nvml.sys_cuda_driver_version())
            .map(|v| format!("{}.{}", v / 1000, (v % 1000) / 10)),
        nvml_version: nv(nvml.sys_nvml_version()),
        gpus,
        topology,
    }
}

/// NVML's links per GPU: Hopper and Blackwell have 18, older parts fewer; NVML answers
/// "invalid argument" past the last.
const MAX_NVLINKS: u32 = 18;

/// Every link NVML reports for a GPU.
fn nvlinks(d: &Device) -> Reading<Vec<NvLinkFacts>> {
    use nvml_wrapper::enum_wrappers::nv_link::ErrorCounter;
    let mut links = Vec::new();
    for link in 0..MAX_NVLINKS {
        let l = d.link_wrapper_for(link);
        let active = match l.is_active() {
            Ok(active) => active,
            Err(NvmlError::NotSupported) if link == 0 => return Reading::Value(vec![]), // no NVLink on this GPU
            Err(NvmlError::NotSupported | NvmlError::InvalidArg) => break,
            Err(e) => return Reading::unavailable(format!("NVML: link {link}: {e}")),
        };
        links.push(NvLinkFacts {
            link,
            active,
            version: nv(l.version()),
            remote_bus_id: nv(l.remote_pci_info()).and_then(|p| {
                BusId::parse(&p.bus_id).map_or_else(
                    || Reading::unavailable(format!("bad bus id {:?}", p.bus_id)),
                    Reading::Value,
                )
            }),
            crc_flit_errors: nv(l.error_counter(ErrorCounter::DlCrcFlit)),
            crc_data_errors: nv(l.error_counter(ErrorCounter::DlCrcData)),
            replay_errors: nv(l.error_counter(ErrorCounter::DlReplay)),
            recovery_errors: nv(l.error_counter(ErrorCounter::DlRecovery)),
        });
    }
    Reading::Value(links)
}

/// Paths and P2P status between every pair of GPUs.
fn topology(nvml: &Nvml, count: u32) -> Vec<GpuPair> {
    use nvml_wrapper::enum_wrappers::device::{P2pCapabilitiesIndex, TopologyLevel};
    let mut pairs = Vec::new();
    for a in 0..count {
        for b in a + 1..count {
            let (Ok(da), Ok(db)) = (nvml.device_by_index(a), nvml.device_by_index(b)) else {
                continue;
            };
            let path = nv(nvml
                .device_by_index(b)
                .and_then(|other| da.topology_common_ancestor(other)))
            .map(|level| {
                match level {
                    TopologyLevel::Internal => "X",
                    TopologyLevel::Single => "PIX",
                    TopologyLevel::Multiple => "PXB",
                    TopologyLevel::HostBridge => "PHB",
                    TopologyLevel::Node => "NODE",
                    TopologyLevel::System => "SYS",
                }
                .to_string()
            });
            // NVLink between the pair: links that end at b, or, behind NVSwitches (remote ends
            // are switches), all of a's active links when NVML reports NVLink P2P as OK.
            let remote = db.pci_info().ok().and_then(|p| BusId::parse(&p.bus_id));
            let nvlink_p2p = matches!(
                da.p2p_status(&db, P2pCapabilitiesIndex::NvLink),
                Ok(nvml_wrapper::enum_wrappers::device::P2pStatus::Ok)
            );
            let links = match nvlinks(&da) {
                Reading::Value(links) => {
                    let direct = links
                        .iter()
                        .filter(|l| {
                            l.active
                                && remote.is_some()
                                && l.remote_bus_id.value() == remote.as_ref()
                        })
                        .count();
                    let active = links.iter().filter(|l| l.active).count();
                    (if direct > 0 {
                        direct
                    } else if nvlink_p2p {
                        active
                    } else {
                        0
                    }) as u32
                }
                Reading::Unavailable(_) => 0,
            };
            let p2p = |index| nv(da.p2p_status(&db, index)).map(|s| format!("{s:?}"));
            pairs.push(GpuPair {
                a,
                b,
                path,
                nvlinks: links,
                p2p_read: p2p(P2pCapabilitiesIndex::Read),
                p2p_write: p2p(P2pCapabilitiesIndex::Write),
            });
        }
    }
    pairs
}

fn gpu_facts(nvml: &Nvml, index: u32, d: &Device) -> GpuFacts {
    let pci = nv(d.pci_info());
    let memory = nv(d.memory_info());
    let mib = |bytes: u64| bytes / (1 << 20);
    let single = nv(d.retired_pages(RetirementCause::MultipleSingleBitEccErrors));
    let double = nv(d.retired_pages(RetirementCause::DoubleBitEccError));
    let pending = nv(d.are_pages_pending_retired());
    GpuFacts {
        index,
        name: nv(d.name()),
        uuid: nv(d.uuid()),
        serial: nv(d.serial()),
        board_part_number: nv(d.board_part_number()),
        board_id: nv(d.board_id()),
        vbios_version: nv(d.vbios_version()),
        inforom_image: nv(d.info_rom_image_version()),
        inforom_oem: nv(d.info_rom_version(InfoRom::OEM)),
        inforom_ecc: nv(d.info_rom_version(InfoRom::ECC)),
        gsp_firmware: nv(d.gsp_firmware_version()),
        pci_bus_id: pci.as_ref().and_then(|p| {
            BusId::parse(&p.bus_id).map_or_else(
                || Reading::unavailable(format!("bad bus id {:?}", p.bus_id)),
                Reading::Value,
            )
        }),
        pci_device_id: pci.as_ref().map(|p| (p.pci_device_id >> 16) as u16),
        pci_subsystem_id: pci.as_ref().and_then(|p| {
            p.pci_sub_system_id.map_or_else(
                || Reading::unavailable("NVML: no subsystem id"),
                Reading::Value,
            )
        }),
        link: LinkFacts {
            current_gen: nv(d.current_pcie_link_gen()),
            max_gen: nv(d.max_pcie_link_gen()),
            current_width: nv(d.current_pcie_link_width()),
            max_width: nv(d.max_pcie_link_width()),
        },
        architecture: nv(d.architecture()).map(architecture_name),
        compute_capability: nv(d.cuda_compute_capability())
            .map(|c| format!("{}.{}", c.major, c.minor)),
        cuda_cores: nv(d.num_cores()),
        memory_total_mib: memory.as_ref().map(|m| mib(m.total)),
        memory_reserved_mib: memory.as_ref().map(|m| mib(m.reserved)),
        memory_bus_bits: nv(d.memory_bus_width()),
        ecc: nv(d.is_ecc_enabled()).map(|e| EccMode {
            current: e.currently_enabled,
            pending: e.pending_enabled,
        }),
        retired_pages: single.and_then(|s| {
            double.and_then(|db| {
                pending.map(|p| RetiredPages {
                    single_bit: s.len() as u64,
                    double_bit: db.len() as u64,
                    pending: p,
                })
            })
        }),
        remapped_rows: remapped_rows(nvml, d),
        max_sm_clock_mhz: nv(d.max_clock_info(Clock::SM)),
        max_memory_clock_mhz: nv(d.max_clock_info(Clock::Memory)),
        power_limit_w: nv(d.enforced_power_limit()).map(|mw| f64::from(mw) / 1000.0),
        max_power_limit_w: nv(d.power_management_limit_constraints())
            .map(|c| f64::from(c.max_limit) / 1000.0),
        virtualization_mode: nv(d.virtualization_mode())
            .map(|m| virtualization_name(&m).to_string()),
        mig_enabled: nv(d.mig_mode()).map(|m| m.current == 1),
        persistence_mode: nv(d.is_in_persistent_mode()),
        nvlinks: nvlinks(d),
    }
}

/// nvml-wrapper has no binding for nvmlDeviceGetRemappedRows; call the loaded symbol.
pub(crate) fn remapped_rows(nvml: &Nvml, d: &Device) -> Reading<RemappedRows> {
    let Ok(sym) = nvml.lib().nvmlDeviceGetRemappedRows.as_ref() else {
        return Reading::unavailable("NVML: nvmlDeviceGetRemappedRows not in this driver");
    };
    let (mut corr, mut unc, mut pending, mut failure) = (0u32, 0u32, 0u32, 0u32);
    // SAFETY: the handle belongs to `nvml`, which is alive; the out-pointers are valid u32s.
    let status = unsafe { sym(d.handle(), &mut corr, &mut unc, &mut pending, &mut failure) };
    match status {
        0 => Reading::Value(RemappedRows {
            correctable: corr.into(),
            uncorrectable: unc.into(),
            pending: pending != 0,
            failure: failure != 0,
        }),
        3 => Reading::unavailable("NVML: not supported on this GPU"),
        code => Reading::unavailable(format!("NVML: nvmlDeviceGetRemappedRows returned {code}")),
    }
}

/// Architecture names as nvidia-smi and the spec database spell them.
fn architecture_name(a: DeviceArchitecture) -> String {
    match a {
        DeviceArchitecture::Ada => "Ada Lovelace".to_string(),
        other => format!("{other:?}"),
    }
}

/// Virtualization modes as nvidia-smi spells them.
fn virtualization_name(m: &GpuVirtualizationMode) -> &'static str {
    match m {
        GpuVirtualizationMode::Bare => "None",
        GpuVirtualizationMode::PassThrough => "Pass-Through",
        GpuVirtualizationMode::Vgpu => "VGPU",
        GpuVirtualizationMode::HostVgpu => "Host VGPU",
        GpuVirtualizationMode::HostVsga => "Host VSGA",
    }
}

/// A GPU whose handle could not be opened: every field carries the same reason.
pub fn unreadable_gpu(index: u32, why: &str) -> GpuFacts {
    GpuFacts {
        index,
        name: Reading::unavailable(why),
        uuid: Reading::unavailable(why),
        serial: Reading::unavailable(why),
        board_part_number: Reading::unavailable(why),
        board_id: Reading::unavailable(why),
        vbios_version: Reading::unavailable(why),
        inforom_image: Reading::unavailable(why),
        inforom_oem: Reading::unavailable(why),
        inforom_ecc: Reading::unavailable(why),
        gsp_firmware: Reading::unavailable(why),
        pci_bus_id: Reading::unavailable(why),
        pci_device_id: Reading::unavailable(why),
        pci_subsystem_id: Reading::unavailable(why),
        link: LinkFacts {
            current_gen: Reading::unavailable(why),
            max_gen: Reading::unavailable(why),
            current_width: Reading::unavailable(why),
            max_width: Reading::unavailable(why),
        },
        architecture: Reading::unavailable(why),
        compute_capability: Reading::unavailable(why),
        cuda_cores: Reading::unavailable(why),
        memory_total_mib: Reading::unavailable(why),
        memory_reserved_mib: Reading::unavailable(why),
        memory_bus_bits: Reading::unavailable(why),
        ecc: Reading::unavailable(why),
        retired_pages: Reading::unavailable(why),
        remapped_rows: Reading::unavailable(why),
        max_sm_clock_mhz: Reading::unavailable(why),
        max_memory_clock_mhz: Reading::unavailable(why),
        power_limit_w: Reading::unavailable(why),
        max_power_limit_w: Reading::unavailable(why),
        virtualization_mode: Reading::unavailable(why),
        mig_enabled: Reading::unavailable(why),
        persistence_mode: Reading::unavailable(why),
        nvlinks: Reading::unavailable(why),
    }
}
