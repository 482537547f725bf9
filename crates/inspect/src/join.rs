//! Joins every source's view of each GPU into one [`GpuView`]: by PCI bus id first (the
//! kernel's address, which every source reports), then by UUID for a source whose bus id is
//! unreadable. Entries that match nothing stand alone, so a GPU only one source sees is kept
//! and reported rather than lost.

use pog_facts::{BusId, CudaGpu, GpuFacts, Inventory, PciGpu, ProcGpu};

/// The kernel driver whose GPUs NVML and CUDA can see; others (vfio-pci) belong to a VM.
pub const NVIDIA_DRIVER: &str = "nvidia";

/// All sources' records of one physical GPU.
#[derive(Debug, Default, Clone)]
pub struct GpuView<'a> {
    /// The PCI bus id the records were joined on; `None` when no source could read it.
    pub bus_id: Option<BusId>,
    /// NVML's record.
    pub nvml: Option<&'a GpuFacts>,
    /// nvidia-smi's record.
    pub smi: Option<&'a GpuFacts>,
    /// The CUDA runtime's record.
    pub cuda: Option<&'a CudaGpu>,
    /// The kernel's PCI record (sysfs), for a function bound to the nvidia driver.
    pub pci: Option<&'a PciGpu>,
    /// The nvidia kernel module's record (procfs).
    pub proc_gpu: Option<&'a ProcGpu>,
}

impl GpuView<'_> {
    /// The names of the sources that list this GPU.
    pub fn seen_by(&self) -> Vec<&'static str> {
        [
            (self.nvml.is_some(), "NVML"),
            (self.cuda.is_some(), "CUDA"),
            (self.smi.is_some(), "nvidia-smi"),
            (self.pci.is_some(), "sysfs"),
            (self.proc_gpu.is_some(), "procfs"),
        ]
        .into_iter()
        .filter_map(|(seen, name)| seen.then_some(name))
        .collect()
    }

    /// The UUID, from the first source that has one.
    pub fn uuid(&self) -> Option<&str> {
        self.nvml
            .and_then(|g| g.uuid.value())
            .or_else(|| self.cuda.and_then(|c| c.uuid.value()))
            .or_else(|| self.smi.and_then(|g| g.uuid.value()))
            .map(String::as_str)
    }
}

/// Joins the inventory's sources. sysfs functions bound to another driver than `nvidia`
/// (passed through to a VM) are left out: no userspace source can see them.
pub fn join(inv: &Inventory) -> Vec<GpuView<'_>> {
    let mut views: Vec<GpuView> = Vec::new();
    if let Some(nvml) = inv.nvml.value() {
        for g in &nvml.gpus {
            views.push(GpuView {
                bus_id: g.pci_bus_id.value().copied(),
                nvml: Some(g),
                ..GpuView::default()
            });
        }
    }
    if let Some(smi) = inv.nvidia_smi.value() {
        for g in &smi.gpus {
            let slot = find_slot(
                &mut views,
                g.pci_bus_id.value().copied(),
                g.uuid.value().map(String::as_str),
                |v| v.smi.is_none(),
            );
            slot.smi = Some(g);
        }
    }
    if let Some(cuda) = inv.cuda.value() {
        for c in &cuda.devices {
            let slot = find_slot(
                &mut views,
                c.pci_bus_id.value().copied(),
                c.uuid.value().map(String::as_str),
                |v| v.cuda.is_none(),
            );
            slot.cuda = Some(c);
        }
    }
    if let Some(pci) = inv.pci.value() {
        for p in pci.iter().filter(|p| driven_by_nvidia(p)) {
            let slot = find_slot(&mut views, Some(p.bus_id), None, |v| v.pci.is_none());
            slot.pci = Some(p);
        }
    }
    if let Some(proc_driver) = inv.proc_driver.value() {
        for p in &proc_driver.gpus {
            let slot = find_slot(
                &mut views,
                Some(p.bus_id),
                p.uuid.value().map(String::as_str),
                |v| v.proc_gpu.is_none(),
            );
            slot.proc_gpu = Some(p);
        }
    }
    views.sort_by_key(|v| v.bus_id);
    views
}

/// Whether a sysfs GPU is (or may be) bound to the nvidia driver.
pub fn driven_by_nvidia(p: &PciGpu) -> bool {
    p.driver.value().is_none_or(|d| d == NVIDIA_DRIVER)
}

/// The view this record belongs to (same bus id, else same UUID, among views whose slot for
/// this source is still free), or a new one.
fn find_slot<'v, 'a>(
    views: &'v mut Vec<GpuView<'a>>,
    bus_id: Option<BusId>,
    uuid: Option<&str>,
    free: impl Fn(&GpuView<'a>) -> bool,
) -> &'v mut GpuView<'a> {
    let by_bus = bus_id.and_then(|b| views.iter().position(|v| v.bus_id == Some(b) && free(v)));
    let by_uuid = || uuid.and_then(|u| views.iter().position(|v| v.uuid() == Some(u) && free(v)));
    match by_bus.or_else(by_uuid) {
        Some(i) => &mut views[i],
        None => {
            views.push(GpuView {
                bus_id,
                ..GpuView::default()
            });
            views.last_mut().expect("just pushed")
        }
    }
}
