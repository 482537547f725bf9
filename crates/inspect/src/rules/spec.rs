//! Is each GPU what its model really is? The PCI device id (the kernel's view, hardest to fake)
//! picks the model from the database; the reported name, SM count, memory, architecture,
//! clocks and PCIe generation must then match that model's datasheet.

use super::Context;
use crate::finding::{Finding, Severity};
use crate::join::GpuView;
use pog_spec::GpuSpec;

/// The PCI device id is not in the database, so nothing can be checked against a datasheet.
pub const MODEL: &str = "spec.model";
/// The reported name belongs to a different model than the PCI device id.
pub const NAME: &str = "spec.name";
/// CUDA's SM count, or NVML's core count, is not the model's.
pub const SM_COUNT: &str = "spec.sm_count";
/// Total memory is outside the model's nominal size (−8 % / +3 %).
pub const MEMORY: &str = "spec.memory";
/// The architecture or compute capability is not the model's.
pub const ARCHITECTURE: &str = "spec.architecture";
/// The maximum SM clock is more than 5 % from the datasheet boost clock.
pub const CLOCK: &str = "spec.clock";
/// The maximum PCIe generation is above what the model supports (or below it: the slot limits it).
pub const PCIE: &str = "spec.pcie";

/// How far the maximum SM clock may be from the datasheet boost clock before it is worth a
/// warning (OEM variants and power-capped SKUs differ a little).
const CLOCK_TOLERANCE: f64 = 0.05;

/// The model a view's PCI device id names: sysfs first (kernel), then NVML, then nvidia-smi.
pub fn device_id(view: &GpuView) -> Option<u16> {
    view.pci
        .map(|p| p.device_id)
        .or_else(|| view.nvml.and_then(|g| g.pci_device_id.value().copied()))
        .or_else(|| view.smi.and_then(|g| g.pci_device_id.value().copied()))
}

/// The name a view reports: NVML first, then CUDA, then nvidia-smi.
pub fn reported_name<'a>(view: &GpuView<'a>) -> Option<&'a str> {
    view.nvml
        .and_then(|g| g.name.value())
        .or_else(|| view.cuda.and_then(|c| c.name.value()))
        .or_else(|| view.smi.and_then(|g| g.name.value()))
        .map(String::as_str)
}

/// A reported figure that must equal the datasheet's: (rule, what, source, reported, expected).
type ExactCheck<'a> = (&'a str, &'a str, &'a str, Option<String>, Option<String>);

/// Adds this module's findings about every GPU (or the host) in `ctx` to `out`.
pub fn check(ctx: &Context, out: &mut Vec<Finding>) {
    for view in &ctx.views {
        let gpu = view.bus_id;
        let Some(id) = device_id(view) else { continue };
        let Some(spec) = ctx.db.by_device_id(id) else {
            out.push(
                Finding::new(MODEL, Severity::Warn, gpu, "PCI device id is not in pog's GPU database: the model cannot be checked against a datasheet")
                    .with("PCI device id", format!("{id:#06x}"))
                    .with("reported name", reported_name(view).unwrap_or("unknown")),
            );
            continue;
        };
        name(ctx, view, spec, id, out);
        resources(view, spec, out);
    }
}

fn name(ctx: &Context, view: &GpuView, spec: &GpuSpec, id: u16, out: &mut Vec<Finding>) {
    let Some(name) = reported_name(view) else {
        return;
    };
    if spec.names.iter().any(|n| n == name.trim()) {
        return;
    }
    let f = match ctx.db.by_name(name) {
        Some(other) => Finding::new(
            NAME,
            Severity::Fail,
            view.bus_id,
            format!(
                "name claims {} but the PCI device id belongs to {}",
                other.model, spec.model
            ),
        ),
        None => Finding::new(
            NAME,
            Severity::Warn,
            view.bus_id,
            format!("name is not one the database lists for {}", spec.model),
        ),
    };
    out.push(
        f.with("reported name", name)
            .with("PCI device id", format!("{id:#06x} ({})", spec.model))
            .with("names in database", spec.names.join(", ")),
    );
}

fn resources(view: &GpuView, spec: &GpuSpec, out: &mut Vec<Finding>) {
    let gpu = view.bus_id;
    let expected_source = format!(
        "{} ({})",
        spec.model,
        spec.sources.first().map_or("datasheet", String::as_str)
    );
    let per_sm = spec.cores_per_sm();
    let checks: [ExactCheck; 4] = [
        (
            SM_COUNT,
            "SM count",
            "CUDA",
            view.cuda
                .and_then(|c| c.sm_count.value())
                .map(u32::to_string),
            Some(spec.sm_count.to_string()),
        ),
        (
            SM_COUNT,
            "CUDA core count",
            "NVML",
            view.nvml
                .and_then(|g| g.cuda_cores.value())
                .map(u32::to_string),
            per_sm.map(|p| (spec.sm_count * p).to_string()),
        ),
        (
            ARCHITECTURE,
            "architecture",
            "NVML",
            view.nvml.and_then(|g| g.architecture.value()).cloned(),
            Some(spec.architecture.clone()),
        ),
        (
            ARCHITECTURE,
            "compute capability",
            "CUDA",
            view.cuda
                .and_then(|c| c.compute_capability.value())
                .or_else(|| view.nvml.and_then(|g| g.compute_capability.value()))
                .cloned(),
            Some(spec.compute_capability.clone()),
        ),
    ];
    for (rule, what, source, reported, expected) in checks {
        if let (Some(reported), Some(expected)) = (reported, expected) {
            if reported != expected {
                out.push(
                    Finding::new(
                        rule,
                        Severity::Fail,
                        gpu,
                        format!(
                            "{source} reports {what} {reported}; a {} has {expected}",
                            spec.model
                        ),
                    )
                    .with(source, &reported)
                    .with("spec", &expected_source),
                );
            }
        }
    }
    let memory = view
        .nvml
        .and_then(|g| g.memory_total_mib.value())
        .or_else(|| view.smi.and_then(|g| g.memory_total_mib.value()));
    if let Some(mib) = memory {
        let (lo, hi) = spec.memory_range_mib();
        if (*mib as f64) < lo || (*mib as f64) > hi {
            out.push(
                Finding::new(
                    MEMORY,
                    Severity::Fail,
                    gpu,
                    format!(
                        "{mib} MiB of memory is outside what a {} reports ({lo:.0}-{hi:.0} MiB)",
                        spec.model
                    ),
                )
                .with("reported", format!("{mib} MiB"))
                .with("spec", format!("{} GiB nominal", spec.memory_gib)),
            );
        }
    }
    if let Some(clock) = view.nvml.and_then(|g| g.max_sm_clock_mhz.value()) {
        let off =
            (f64::from(*clock) - f64::from(spec.boost_clock_mhz)) / f64::from(spec.boost_clock_mhz);
        if off.abs() > CLOCK_TOLERANCE {
            out.push(
                Finding::new(
                    CLOCK,
                    Severity::Warn,
                    gpu,
                    format!(
                        "maximum SM clock is {:+.0} % from the {}'s boost clock",
                        off * 100.0,
                        spec.model
                    ),
                )
                .with("NVML", format!("{clock} MHz"))
                .with("spec", format!("{} MHz", spec.boost_clock_mhz)),
            );
        }
    }
    if let Some(gen) = view.nvml.and_then(|g| g.link.max_gen.value()) {
        if *gen > spec.pcie_gen {
            out.push(
                Finding::new(
                    PCIE,
                    Severity::Fail,
                    gpu,
                    format!(
                        "link claims PCIe Gen{gen}; a {} supports at most Gen{}",
                        spec.model, spec.pcie_gen
                    ),
                )
                .with("NVML", format!("Gen{gen}"))
                .with("spec", format!("Gen{}", spec.pcie_gen)),
            );
        } else if *gen < spec.pcie_gen {
            out.push(
                Finding::new(
                    PCIE,
                    Severity::Warn,
                    gpu,
                    format!(
                        "the slot limits the link to PCIe Gen{gen}; a {} supports Gen{}",
                        spec.model, spec.pcie_gen
                    ),
                )
                .with("NVML", format!("Gen{gen}"))
                .with("spec", format!("Gen{}", spec.pcie_gen)),
            );
        }
    }
}
