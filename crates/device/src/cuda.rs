//! CUDA's driver API through cudarc (loaded at run time): what a workload actually sees.

use crate::facts::{CudaGpu, CudaReport};
use crate::pci::BusId;
use crate::reading::Reading;
use cudarc::driver::result::{self, device};
use cudarc::driver::sys::{self, CUdevice_attribute as Attr};
pub use pog_facts::format_uuid;

/// Whether libcuda can be loaded at all. cudarc panics on a missing library, so every CUDA
/// entry point in pog asks this first.
pub fn library_present() -> bool {
    // SAFETY: only tries to dlopen the library by its candidate names.
    unsafe { sys::is_culib_present() }
}

/// Reads every CUDA device's identity and resources. Never panics: a missing library or a
/// symbol an old driver lacks becomes an unavailable reading.
pub fn report() -> Reading<CudaReport> {
    if !library_present() {
        return Reading::unavailable("CUDA driver library (libcuda.so) not found");
    }
    match std::panic::catch_unwind(report_unguarded) {
        Ok(reading) => reading,
        Err(_) => Reading::unavailable(
            "the CUDA driver library lacks a function pog needs (driver too old?)",
        ),
    }
}

fn report_unguarded() -> Reading<CudaReport> {
    if let Err(e) = result::init() {
        return Reading::unavailable(format!("cuInit failed: {e}"));
    }
    let mut version = 0i32;
    // SAFETY: cuDriverGetVersion writes one int.
    let driver_version = match unsafe { sys::cuDriverGetVersion(&mut version) } {
        sys::CUresult::CUDA_SUCCESS => {
            Reading::Value(format!("{}.{}", version / 1000, (version % 1000) / 10))
        }
        e => Reading::unavailable(format!("cuDriverGetVersion: {e:?}")),
    };
    let count = match device::get_count() {
        Ok(n) => n,
        Err(e) => return Reading::unavailable(format!("cuDeviceGetCount: {e}")),
    };
    let devices = (0..count).map(|ordinal| cuda_gpu(ordinal as u32)).collect();
    Reading::Value(CudaReport {
        driver_version,
        devices,
    })
}

fn cuda_gpu(ordinal: u32) -> CudaGpu {
    let dev = match device::get(ordinal as i32) {
        Ok(dev) => dev,
        Err(e) => {
            let why = format!("cuDeviceGet({ordinal}): {e}");
            return CudaGpu {
                ordinal,
                name: Reading::unavailable(why.as_str()),
                uuid: Reading::unavailable(why.as_str()),
                pci_bus_id: Reading::unavailable(why.as_str()),
                sm_count: Reading::unavailable(why.as_str()),
                memory_total_bytes: Reading::unavailable(why.as_str()),
                compute_capability: Reading::unavailable(why.as_str()),
                l2_cache_bytes: Reading::unavailable(why.as_str()),
                clock_mhz: Reading::unavailable(why.as_str()),
                memory_bus_bits: Reading::unavailable(why.as_str()),
            };
        }
    };
    // SAFETY: `dev` is a valid device handle from cuDeviceGet.
    let attr = |a: Attr| -> Reading<i32> {
        unsafe { device::get_attribute(dev, a) }
            .map_err(|e| format!("{a:?}: {e}"))
            .into()
    };
    let cc_major = attr(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    let cc_minor = attr(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    let domain = attr(Attr::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID);
    let bus = attr(Attr::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID);
    let slot = attr(Attr::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID);
    let non_negative = |r: Reading<i32>| {
        r.and_then(|v| {
            u32::try_from(v)
                .map_err(|_| format!("negative value {v}"))
                .into()
        })
    };
    CudaGpu {
        ordinal,
        name: device::get_name(dev)
            .map_err(|e| format!("cuDeviceGetName: {e}"))
            .into(),
        uuid: device::get_uuid(dev)
            .map(|u| format_uuid(&u.bytes.map(|b| b as u8)))
            .map_err(|e| format!("cuDeviceGetUuid: {e}"))
            .into(),
        pci_bus_id: domain.and_then(|d| {
            bus.and_then(|b| {
                slot.and_then(|s| {
                    BusId::parse(&format!("{d:x}:{b:x}:{s:x}.0")).map_or_else(
                        || Reading::unavailable("CUDA PCI attributes out of range"),
                        Reading::Value,
                    )
                })
            })
        }),
        sm_count: non_negative(attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)),
        // SAFETY: valid device handle.
        memory_total_bytes: unsafe { device::total_mem(dev) }
            .map(|b| b as u64)
            .map_err(|e| format!("cuDeviceTotalMem: {e}"))
            .into(),
        compute_capability: cc_major.and_then(|maj| cc_minor.map(|min| format!("{maj}.{min}"))),
        l2_cache_bytes: non_negative(attr(Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)).map(u64::from),
        clock_mhz: non_negative(attr(Attr::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)).map(|khz| khz / 1000),
        memory_bus_bits: non_negative(attr(Attr::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_bytes_format_like_nvml() {
        let bytes = [
            0xf9, 0x8a, 0x5a, 0x30, 0xc0, 0x0c, 0x67, 0x06, 0xca, 0x38, 0x52, 0xde, 0x3b, 0xc7,
            0xbf, 0xa1,
        ];
        assert_eq!(
            format_uuid(&bytes),
            "GPU-f98a5a30-c00c-6706-ca38-52de3bc7bfa1"
        );
    }

    #[test]
    fn the_report_says_why_it_is_unavailable() {
        match report() {
            Reading::Value(_) => assert!(library_present(), "a report without the library"),
            Reading::Unavailable(why) if !library_present() => {
                assert!(why.contains("not found"), "{why}")
            }
            Reading::Unavailable(why) => assert!(!why.is_empty()),
        }
    }

    #[test]
    #[ignore = "needs a GPU: scripts/gpu-run.sh runs it with --ignored"]
    fn a_gpu_host_reports_every_device_with_its_identity() {
        let report = report();
        let devices = &report.value().expect("CUDA answers on a GPU host").devices;
        assert!(!devices.is_empty(), "no CUDA device");
        for d in devices {
            assert!(
                d.uuid.value().is_some_and(|u| u.starts_with("GPU-")),
                "{d:?}"
            );
            assert!(d.pci_bus_id.value().is_some(), "{d:?}");
        }
    }
}
