//! What could sit between pog and the driver: preloaded libraries, an NVIDIA library loaded
//! from a place a user can write to, and virtualization (which is legitimate but must be known).

use super::Context;
use crate::finding::{Finding, Severity};
use pog_facts::LoadedLibrary;

/// `LD_PRELOAD` is set or `/etc/ld.so.preload` lists anything: a preloaded library can rewrite
/// every answer NVML and CUDA give.
pub const PRELOAD: &str = "env.preload";
/// libnvidia-ml or libcuda is mapped from outside the system library folders, not owned by root,
/// or writable by others: a user could have swapped it.
pub const LIBRARY: &str = "env.nvidia_library";
/// The host is a VM or a GPU is passed through or shared as a vGPU: legitimate, but it must be
/// known.
pub const VIRTUALIZATION: &str = "env.virtualization";

/// Directories drivers install libnvidia-ml and libcuda into: distribution library folders,
/// NVIDIA's container toolkit and GPU operator mounts, CUDA's folders and WSL.
const TRUSTED_LIBRARY_DIRS: [&str; 9] = [
    "/usr/lib/",
    "/usr/lib64/",
    "/usr/lib32/",
    "/lib/",
    "/lib64/",
    "/usr/local/nvidia/",
    "/usr/local/cuda",
    "/run/nvidia/driver/",
    "/usr/lib/wsl/",
];

/// Adds this module's findings about every GPU (or the host) in `ctx` to `out`.
pub fn check(ctx: &Context, out: &mut Vec<Finding>) {
    preload(ctx, out);
    libraries(ctx, out);
    virtualization(ctx, out);
}

fn preload(ctx: &Context, out: &mut Vec<Finding>) {
    let process = &ctx.inv.process;
    if let Some(preload) = &process.ld_preload {
        out.push(
            Finding::new(PRELOAD, Severity::Fail, None, "LD_PRELOAD is set: a preloaded library can rewrite every answer NVML and CUDA give")
                .with("LD_PRELOAD", preload),
        );
    }
    if let Some(entries) = process.ld_so_preload.value().filter(|e| !e.is_empty()) {
        out.push(
            Finding::new(
                PRELOAD,
                Severity::Fail,
                None,
                "/etc/ld.so.preload injects libraries into every process, pog included",
            )
            .with("/etc/ld.so.preload", entries.join(" ")),
        );
    }
}

fn libraries(ctx: &Context, out: &mut Vec<Finding>) {
    let Some(libs) = ctx.inv.process.nvidia_libraries.value() else {
        return;
    };
    let driver = ctx.inv.nvml.value().and_then(|n| n.driver_version.value());
    for lib in libs {
        library(lib, driver.map(String::as_str), out);
    }
    let nvml_mapped = libs
        .iter()
        .any(|l| file_name(&l.path).starts_with("libnvidia-ml"));
    if ctx.inv.nvml.value().is_some() && !nvml_mapped {
        out.push(Finding::new(
            LIBRARY,
            Severity::Warn,
            None,
            "NVML answered but no libnvidia-ml file is mapped into pog: which file answered cannot be shown",
        ));
    }
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn library(lib: &LoadedLibrary, driver: Option<&str>, out: &mut Vec<Finding>) {
    let path = lib.path.as_str();
    if !TRUSTED_LIBRARY_DIRS.iter().any(|dir| path.starts_with(dir)) {
        out.push(
            Finding::new(
                LIBRARY,
                Severity::Fail,
                None,
                "an NVIDIA library was loaded from outside the system library folders",
            )
            .with("loaded", path)
            .with("expected under", TRUSTED_LIBRARY_DIRS.join(" ")),
        );
    }
    if let Some(uid) = lib.owner_uid.value().filter(|uid| **uid != 0) {
        out.push(
            Finding::new(
                LIBRARY,
                Severity::Fail,
                None,
                "an NVIDIA library file is not owned by root: its owner can replace it",
            )
            .with("loaded", path)
            .with("owner uid", uid),
        );
    }
    if let Some(mode) = lib.mode.value().filter(|m| **m & 0o022 != 0) {
        out.push(
            Finding::new(
                LIBRARY,
                Severity::Fail,
                None,
                "an NVIDIA library file is writable by group or others",
            )
            .with("loaded", path)
            .with("mode", format!("{mode:o}")),
        );
    }
    // Driver libraries are installed as lib<name>.so.<driver version>.
    let version = file_name(path).split_once(".so.").map(|(_, v)| v);
    if let (Some(version), Some(driver)) = (version, driver) {
        if version.contains('.') && version != driver {
            out.push(
                Finding::new(
                    LIBRARY,
                    Severity::Warn,
                    None,
                    "an NVIDIA library's version is not the driver's",
                )
                .with("loaded", path)
                .with("driver", driver),
            );
        }
    }
}

fn virtualization(ctx: &Context, out: &mut Vec<Finding>) {
    if let Some(cpu) = ctx.inv.host.cpu.value().filter(|c| c.hypervisor) {
        out.push(
            Finding::new(
                VIRTUALIZATION,
                Severity::Info,
                None,
                "the host is a virtual machine (CPU hypervisor flag)",
            )
            .with("CPU", &cpu.model),
        );
    }
    for view in &ctx.views {
        let Some(mode) = view.nvml.and_then(|g| g.virtualization_mode.value()) else {
            continue;
        };
        let message = match mode.as_str() {
            "None" => continue,
            "Pass-Through" => "the GPU is passed through whole to this virtual machine",
            "VGPU" => "the GPU is a vGPU: a slice shared with other virtual machines",
            _ => "the GPU is managed by a hypervisor host",
        };
        out.push(
            Finding::new(VIRTUALIZATION, Severity::Info, view.bus_id, message)
                .with("NVML virtualization mode", mode),
        );
    }
}
