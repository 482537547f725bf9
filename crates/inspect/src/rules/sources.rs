//! Do the sources agree? Availability, GPU counts, which source sees which GPU, and every
//! identity field that two or more sources report (name, UUID, PCI ids, memory, capability,
//! driver versions). A disagreement is the signature of a shim or a spoofed report.

use super::Context;
use crate::finding::{Finding, Severity};
use crate::join::{driven_by_nvidia, GpuView};
use pog_facts::{BusId, Reading};

/// No source lists a GPU, or a source could not be read (NVML unreadable fails; others warn).
pub const AVAILABLE: &str = "sources.available";
/// The available sources list different numbers of GPUs.
pub const COUNT: &str = "sources.gpu_count";
/// A GPU is missing from an available source.
pub const SEEN_BY_ALL: &str = "sources.seen_by_all";
/// Two sources differ on an identity field (name, UUID, PCI ids, memory, capability, …).
pub const AGREE: &str = "sources.agree";
/// nvidia-smi differs from NVML on a field both read from the driver.
pub const SMI_MATCHES_NVML: &str = "sources.smi_matches_nvml";
/// The sources disagree on the driver or CUDA version.
pub const DRIVER_VERSION: &str = "sources.driver_version";
/// An NVIDIA GPU on the bus is bound to another driver (e.g. vfio-pci for a VM).
pub const NOT_DRIVEN: &str = "sources.not_driven_by_nvidia";

/// MiB of slack between memory figures: sources round differently (NVML 615 MiB reserved
/// where nvidia-smi prints 616 on the same H200).
const MEMORY_SLACK_MIB: u64 = 2;

/// Adds this module's findings about every GPU (or the host) in `ctx` to `out`.
pub fn check(ctx: &Context, out: &mut Vec<Finding>) {
    availability(ctx, out);
    counts(ctx, out);
    for view in &ctx.views {
        seen_by_all(ctx, view, out);
        identity(view, out);
    }
    driver_versions(ctx, out);
}

/// The number of GPUs a source lists, or `None` when the source is unavailable.
fn source_counts(ctx: &Context) -> Vec<(&'static str, Option<usize>)> {
    let inv = ctx.inv;
    vec![
        ("NVML", inv.nvml.value().map(|n| n.gpus.len())),
        ("CUDA", inv.cuda.value().map(|c| c.devices.len())),
        ("nvidia-smi", inv.nvidia_smi.value().map(|s| s.gpus.len())),
        (
            "sysfs",
            inv.pci
                .value()
                .map(|p| p.iter().filter(|g| driven_by_nvidia(g)).count()),
        ),
        ("procfs", inv.proc_driver.value().map(|p| p.gpus.len())),
    ]
}

fn availability(ctx: &Context, out: &mut Vec<Finding>) {
    let inv = ctx.inv;
    let reasons: Vec<(&str, Option<&String>)> = vec![
        ("NVML", reason(&inv.nvml)),
        ("CUDA", reason(&inv.cuda)),
        ("nvidia-smi", reason(&inv.nvidia_smi)),
        ("sysfs", reason(&inv.pci)),
        ("procfs", reason(&inv.proc_driver)),
    ];
    let any_gpu = source_counts(ctx).iter().any(|(_, n)| n.unwrap_or(0) > 0);
    if !any_gpu {
        let mut f = Finding::new(
            AVAILABLE,
            Severity::Fail,
            None,
            "no NVIDIA GPU found on this host: there is nothing to verify (the host is still reported)",
        );
        for (source, why) in &reasons {
            f = f.with(
                source,
                why.map_or("available, lists no GPU".to_string(), |w| {
                    format!("unavailable: {w}")
                }),
            );
        }
        out.push(f);
        return;
    }
    for (source, why) in reasons {
        let Some(why) = why else { continue };
        let (severity, consequence) = match source {
            "NVML" => (Severity::Fail, "GPUs are present but the driver's management library cannot be read: nothing about them can be verified"),
            "CUDA" => (Severity::Warn, "CUDA's view cannot be cross-checked and no GPU work (benchmarks, proofs) can run"),
            _ => (Severity::Warn, "one cross-check source is missing"),
        };
        out.push(
            Finding::new(
                AVAILABLE,
                severity,
                None,
                format!("{source} unavailable: {consequence}"),
            )
            .with(source, why),
        );
    }
    if let Some(pci) = inv.pci.value() {
        for p in pci.iter().filter(|p| !driven_by_nvidia(p)) {
            out.push(
                Finding::new(NOT_DRIVEN, Severity::Info, Some(p.bus_id), "NVIDIA GPU on the bus is bound to another driver (passed to a VM?) and is not inspected")
                    .with("sysfs driver", &p.driver),
            );
        }
    }
}

fn reason<T>(r: &Reading<T>) -> Option<&String> {
    match r {
        Reading::Value(_) => None,
        Reading::Unavailable(why) => Some(why),
    }
}

fn counts(ctx: &Context, out: &mut Vec<Finding>) {
    let counts: Vec<(&str, usize)> = source_counts(ctx)
        .into_iter()
        .filter_map(|(s, n)| Some((s, n?)))
        .collect();
    if counts.windows(2).any(|w| w[0].1 != w[1].1) {
        let mut f = Finding::new(
            COUNT,
            Severity::Fail,
            None,
            "sources disagree on how many GPUs this host has",
        );
        for (source, n) in counts {
            f = f.with(source, n);
        }
        out.push(f);
    }
}

fn seen_by_all(ctx: &Context, view: &GpuView, out: &mut Vec<Finding>) {
    let inv = ctx.inv;
    let expected = [
        ("NVML", inv.nvml.value().is_some(), view.nvml.is_some()),
        ("CUDA", inv.cuda.value().is_some(), view.cuda.is_some()),
        (
            "nvidia-smi",
            inv.nvidia_smi.value().is_some(),
            view.smi.is_some(),
        ),
        ("sysfs", inv.pci.value().is_some(), view.pci.is_some()),
        (
            "procfs",
            inv.proc_driver.value().is_some(),
            view.proc_gpu.is_some(),
        ),
    ];
    let missing: Vec<&str> = expected
        .iter()
        .filter(|(_, available, seen)| *available && !seen)
        .map(|(s, _, _)| *s)
        .collect();
    if !missing.is_empty() {
        out.push(
            Finding::new(
                SEEN_BY_ALL,
                Severity::Fail,
                view.bus_id,
                format!("GPU is missing from {}", missing.join(", ")),
            )
            .with("seen by", view.seen_by().join(", "))
            .with("UUID", view.uuid().unwrap_or("unknown")),
        );
    }
}

/// One field as each source reports it; `None` where the source lacks the GPU or the field.
struct FieldValues {
    field: &'static str,
    values: Vec<(&'static str, Option<String>)>,
}

impl FieldValues {
    fn new(field: &'static str) -> Self {
        FieldValues {
            field,
            values: Vec::new(),
        }
    }

    fn add<T: ToString>(mut self, source: &'static str, value: Option<&Reading<T>>) -> Self {
        self.values.push((
            source,
            value.and_then(|r| r.value()).map(ToString::to_string),
        ));
        self
    }

    fn add_value(mut self, source: &'static str, value: Option<String>) -> Self {
        self.values.push((source, value));
        self
    }

    /// Emits a finding when two present values differ under `same`. nvidia-smi against NVML
    /// gets its own rule id: a replaced nvidia-smi is a specific, common spoof.
    fn compare(
        &self,
        gpu: Option<BusId>,
        same: impl Fn(&str, &str) -> bool,
        out: &mut Vec<Finding>,
    ) {
        let present: Vec<(&str, &str)> = self
            .values
            .iter()
            .filter_map(|(s, v)| Some((*s, v.as_deref()?)))
            .collect();
        let Some((_, first)) = present.first() else {
            return;
        };
        if present.iter().all(|(_, v)| same(first, v)) {
            return;
        }
        let smi_vs_nvml = {
            let get = |src: &str| present.iter().find(|(s, _)| *s == src).map(|(_, v)| *v);
            matches!((get("NVML"), get("nvidia-smi")), (Some(a), Some(b)) if !same(a, b))
        };
        let (rule, message) = if smi_vs_nvml {
            (
                SMI_MATCHES_NVML,
                format!("nvidia-smi and NVML disagree on the {}", self.field),
            )
        } else {
            (AGREE, format!("sources disagree on the {}", self.field))
        };
        let mut f = Finding::new(rule, Severity::Fail, gpu, message);
        for (source, value) in present {
            f = f.with(source, value);
        }
        out.push(f);
    }
}

fn exact(a: &str, b: &str) -> bool {
    a == b
}

fn ignoring_case(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

fn within_mib(a: &str, b: &str) -> bool {
    match (a.parse::<u64>(), b.parse::<u64>()) {
        (Ok(a), Ok(b)) => a.abs_diff(b) <= MEMORY_SLACK_MIB,
        _ => a == b,
    }
}

fn identity(view: &GpuView, out: &mut Vec<Finding>) {
    let gpu = view.bus_id;
    let (nvml, smi, cuda, pci, proc_gpu) =
        (view.nvml, view.smi, view.cuda, view.pci, view.proc_gpu);
    FieldValues::new("name")
        .add("NVML", nvml.map(|g| &g.name))
        .add("CUDA", cuda.map(|c| &c.name))
        .add("nvidia-smi", smi.map(|g| &g.name))
        .add("procfs", proc_gpu.map(|p| &p.model))
        .compare(gpu, exact, out);
    FieldValues::new("UUID")
        .add("NVML", nvml.map(|g| &g.uuid))
        .add("CUDA", cuda.map(|c| &c.uuid))
        .add("nvidia-smi", smi.map(|g| &g.uuid))
        .add("procfs", proc_gpu.map(|p| &p.uuid))
        .compare(gpu, exact, out);
    FieldValues::new("PCI bus id")
        .add("NVML", nvml.map(|g| &g.pci_bus_id))
        .add("CUDA", cuda.map(|c| &c.pci_bus_id))
        .add("nvidia-smi", smi.map(|g| &g.pci_bus_id))
        .add_value("sysfs", pci.map(|p| p.bus_id.to_string()))
        .add_value("procfs", proc_gpu.map(|p| p.bus_id.to_string()))
        .compare(gpu, exact, out);
    let hex16 = |r: &Reading<u16>| r.value().map(|v| format!("{v:#06x}"));
    FieldValues::new("PCI device id")
        .add_value("NVML", nvml.and_then(|g| hex16(&g.pci_device_id)))
        .add_value("nvidia-smi", smi.and_then(|g| hex16(&g.pci_device_id)))
        .add_value("sysfs", pci.map(|p| format!("{:#06x}", p.device_id)))
        .compare(gpu, exact, out);
    let subsystem = |r: &Reading<u32>| r.value().map(|v| format!("{v:#010x}"));
    let sysfs_subsystem = pci.and_then(|p| {
        let (dev, ven) = (p.subsystem_device.value()?, p.subsystem_vendor.value()?);
        Some(format!(
            "{:#010x}",
            (u32::from(*dev) << 16) | u32::from(*ven)
        ))
    });
    FieldValues::new("PCI subsystem id")
        .add_value("NVML", nvml.and_then(|g| subsystem(&g.pci_subsystem_id)))
        .add_value(
            "nvidia-smi",
            smi.and_then(|g| subsystem(&g.pci_subsystem_id)),
        )
        .add_value("sysfs", sysfs_subsystem)
        .compare(gpu, exact, out);
    // CUDA reports the memory left after the driver's reservation.
    let usable_mib =
        nvml.and_then(|g| Some(g.memory_total_mib.value()? - g.memory_reserved_mib.value()?));
    FieldValues::new("usable memory (MiB)")
        .add_value("NVML", usable_mib.map(|m| m.to_string()))
        .add_value(
            "CUDA",
            cuda.and_then(|c| c.memory_total_bytes.value())
                .map(|b| (b >> 20).to_string()),
        )
        .compare(gpu, within_mib, out);
    FieldValues::new("compute capability")
        .add("NVML", nvml.map(|g| &g.compute_capability))
        .add("CUDA", cuda.map(|c| &c.compute_capability))
        .compare(gpu, exact, out);
    // NVML's core count must be CUDA's SM count times the cores per SM of the capability.
    let cores_from_cuda = cuda.and_then(|c| {
        let per_sm = pog_spec::cores_per_sm(c.compute_capability.value()?)?;
        Some((c.sm_count.value()? * per_sm).to_string())
    });
    FieldValues::new("CUDA core count")
        .add("NVML", nvml.map(|g| &g.cuda_cores))
        .add_value("CUDA (SMs x cores per SM)", cores_from_cuda)
        .compare(gpu, exact, out);
    FieldValues::new("VBIOS version")
        .add("NVML", nvml.map(|g| &g.vbios_version))
        .add("nvidia-smi", smi.map(|g| &g.vbios_version))
        .add("procfs", proc_gpu.map(|p| &p.vbios))
        .compare(gpu, ignoring_case, out);
    smi_only_fields(view, out);
}

/// Fields only NVML and nvidia-smi both report. Volatile state (current link, clocks, power
/// draw, error counters) is left out: it may change between the two reads.
fn smi_only_fields(view: &GpuView, out: &mut Vec<Finding>) {
    let (Some(nvml), Some(smi)) = (view.nvml, view.smi) else {
        return;
    };
    let gpu = view.bus_id;
    macro_rules! pair {
        ($label:expr, $field:ident) => {
            FieldValues::new($label)
                .add("NVML", Some(&nvml.$field))
                .add("nvidia-smi", Some(&smi.$field))
                .compare(gpu, exact, out)
        };
    }
    pair!("serial number", serial);
    pair!("board part number", board_part_number);
    pair!("board id", board_id);
    pair!("InfoROM image version", inforom_image);
    pair!("GSP firmware version", gsp_firmware);
    pair!("architecture", architecture);
    pair!("maximum SM clock (MHz)", max_sm_clock_mhz);
    pair!("maximum power limit (W)", max_power_limit_w);
    pair!("virtualization mode", virtualization_mode);
    FieldValues::new("maximum PCIe generation")
        .add("NVML", Some(&nvml.link.max_gen))
        .add("nvidia-smi", Some(&smi.link.max_gen))
        .compare(gpu, exact, out);
    FieldValues::new("maximum PCIe width")
        .add("NVML", Some(&nvml.link.max_width))
        .add("nvidia-smi", Some(&smi.link.max_width))
        .compare(gpu, exact, out);
    FieldValues::new("total memory (MiB)")
        .add("NVML", Some(&nvml.memory_total_mib))
        .add("nvidia-smi", Some(&smi.memory_total_mib))
        .compare(gpu, within_mib, out);
    FieldValues::new("ECC mode")
        .add_value("NVML", nvml.ecc.value().map(|e| e.current.to_string()))
        .add_value("nvidia-smi", smi.ecc.value().map(|e| e.current.to_string()))
        .compare(gpu, exact, out);
}

fn driver_versions(ctx: &Context, out: &mut Vec<Finding>) {
    let inv = ctx.inv;
    let mut found = Vec::new();
    FieldValues::new("driver version")
        .add("NVML", inv.nvml.value().map(|n| &n.driver_version))
        .add(
            "nvidia-smi",
            inv.nvidia_smi.value().map(|s| &s.driver_version),
        )
        .add(
            "procfs (kernel module)",
            inv.proc_driver.value().map(|p| &p.version),
        )
        .compare(None, exact, &mut found);
    FieldValues::new("CUDA driver version")
        .add("NVML", inv.nvml.value().map(|n| &n.cuda_driver_version))
        .add("CUDA", inv.cuda.value().map(|c| &c.driver_version))
        .add(
            "nvidia-smi",
            inv.nvidia_smi.value().map(|s| &s.cuda_version),
        )
        .compare(None, exact, &mut found);
    for mut finding in found {
        finding.rule = DRIVER_VERSION.to_string();
        out.push(finding);
    }
}
