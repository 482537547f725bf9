//! Conditions that make a genuine GPU worth less: ECC off, memory repair pending or exhausted,
//! a PCIe link running below its maximum, MIG partitioning.

use super::Context;
use crate::finding::{Finding, Severity};
use crate::join::GpuView;

/// ECC is off (memory errors go undetected), or changes at the next reset.
pub const ECC: &str = "health.ecc";
/// A page retirement or row remap is pending, or row remapping has failed (no spare rows left).
pub const MEMORY_REPAIR: &str = "health.memory_repair";
/// The PCIe link runs below its maximum width or generation.
pub const LINK: &str = "health.pcie_link";
/// MIG partitioning is enabled.
pub const MIG: &str = "health.mig";
/// An NVLink link is down while others are up, or counts CRC, replay or recovery errors.
pub const NVLINK: &str = "health.nvlink";

/// Adds this module's findings about every GPU (or the host) in `ctx` to `out`.
pub fn check(ctx: &Context, out: &mut Vec<Finding>) {
    for view in &ctx.views {
        let gpu = view.bus_id;
        let Some(nvml) = view.nvml else { continue };
        if let Some(ecc) = nvml.ecc.value() {
            if !ecc.current {
                out.push(
                    Finding::new(
                        ECC,
                        Severity::Warn,
                        gpu,
                        "ECC is off: memory errors go undetected",
                    )
                    .with("NVML", "ECC disabled"),
                );
            }
            if ecc.current != ecc.pending {
                out.push(
                    Finding::new(
                        ECC,
                        Severity::Info,
                        gpu,
                        "ECC mode changes at the next reset",
                    )
                    .with("current", ecc.current)
                    .with("pending", ecc.pending),
                );
            }
        }
        if let Some(pages) = nvml.retired_pages.value().filter(|p| p.pending) {
            out.push(
                Finding::new(
                    MEMORY_REPAIR,
                    Severity::Warn,
                    gpu,
                    "a page retirement is pending: reset the GPU to apply it",
                )
                .with(
                    "retired (single-bit / double-bit)",
                    format!("{} / {}", pages.single_bit, pages.double_bit),
                ),
            );
        }
        if let Some(rows) = nvml.remapped_rows.value() {
            let evidence = format!(
                "correctable {}, uncorrectable {}",
                rows.correctable, rows.uncorrectable
            );
            if rows.failure {
                out.push(
                    Finding::new(
                        MEMORY_REPAIR,
                        Severity::Fail,
                        gpu,
                        "row remapping failed: the memory has no spare rows left for new errors",
                    )
                    .with("remapped rows", evidence),
                );
            } else if rows.pending {
                out.push(
                    Finding::new(
                        MEMORY_REPAIR,
                        Severity::Warn,
                        gpu,
                        "a row remap is pending: reset the GPU to apply it",
                    )
                    .with("remapped rows", evidence),
                );
            }
        }
        link(view, out);
        nvlinks(view, out);
        if nvml.mig_enabled.value() == Some(&true) {
            out.push(
                Finding::new(
                    MIG,
                    Severity::Info,
                    gpu,
                    "MIG is enabled: the GPU is partitioned into instances",
                )
                .with("NVML", "MIG enabled"),
            );
        }
    }
}

fn link(view: &GpuView, out: &mut Vec<Finding>) {
    let Some(nvml) = view.nvml else { return };
    let l = &nvml.link;
    let (Some(cur_gen), Some(max_gen), Some(cur_w), Some(max_w)) = (
        l.current_gen.value(),
        l.max_gen.value(),
        l.current_width.value(),
        l.max_width.value(),
    ) else {
        return;
    };
    if cur_w < max_w {
        out.push(
            Finding::new(
                LINK,
                Severity::Warn,
                view.bus_id,
                format!("PCIe link runs at x{cur_w} of x{max_w}: host-device bandwidth is cut"),
            )
            .with(
                "NVML",
                format!("Gen{cur_gen} x{cur_w} (max Gen{max_gen} x{max_w})"),
            ),
        );
    }
    if cur_gen < max_gen {
        out.push(
            Finding::new(
                LINK,
                Severity::Warn,
                view.bus_id,
                format!("PCIe link runs at Gen{cur_gen} of Gen{max_gen}; idle GPUs may step down to save power, so recheck under load (pog bench)"),
            )
            .with("NVML", format!("Gen{cur_gen} x{cur_w} (max Gen{max_gen} x{max_w})")),
        );
    }
}

fn nvlinks(view: &GpuView, out: &mut Vec<Finding>) {
    let Some(links) = view.nvml.and_then(|g| g.nvlinks.value()) else {
        return;
    };
    let active = links.iter().filter(|l| l.active).count();
    if links.is_empty() {
        return;
    }
    if active == 0 {
        out.push(Finding::new(
            NVLINK,
            Severity::Info,
            view.bus_id,
            format!(
                "{} NVLink links, none active (no peer on this host)",
                links.len()
            ),
        ));
        return;
    }
    for l in links.iter().filter(|l| !l.active) {
        out.push(
            Finding::new(
                NVLINK,
                Severity::Warn,
                view.bus_id,
                format!(
                    "NVLink {} is down while {active} others are up: peer bandwidth is cut",
                    l.link
                ),
            )
            .with("NVML", format!("{active} of {} links active", links.len())),
        );
    }
    for l in links.iter().filter(|l| l.active) {
        let count = |r: &pog_facts::Reading<u64>| r.value().copied().unwrap_or(0);
        let (flit, data, replay, recovery) = (
            count(&l.crc_flit_errors),
            count(&l.crc_data_errors),
            count(&l.replay_errors),
            count(&l.recovery_errors),
        );
        if flit + data + replay + recovery > 0 {
            out.push(
                Finding::new(
                    NVLINK,
                    Severity::Warn,
                    view.bus_id,
                    format!("NVLink {} counts transmission errors", l.link),
                )
                .with(
                    "CRC flit / CRC data / replay / recovery",
                    format!("{flit} / {data} / {replay} / {recovery}"),
                ),
            );
        }
    }
}
