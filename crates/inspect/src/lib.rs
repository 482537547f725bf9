//! Inspection: joins every source's view of every GPU and cross-checks them against each
//! other and against the spec database, producing [`Finding`]s with evidence and a verdict per
//! GPU. Pure logic: it reads an [`Inventory`] and touches no hardware. [`run`] is the
//! pipeline `pog inspect` and `pog check` share: collect from a platform, then inspect.

#![warn(missing_docs)]

pub mod finding;
pub mod join;
pub mod rules;

pub use finding::{Evidence, Finding, Severity};
use pog_facts::{BusId, Inventory, Platform};
use pog_spec::SpecDb;
use serde::{Deserialize, Serialize};

/// What inspection concludes about one GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuVerdict {
    /// Every source agrees, and with the datasheet of a known model.
    Genuine,
    /// Nothing contradicts the reports, but the model is not in the database (or NVML could
    /// not read the GPU), so they could not be checked against a datasheet.
    Unverified,
    /// At least one failing finding concerns this GPU or the whole host.
    Suspect,
}

impl std::fmt::Display for GpuVerdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            GpuVerdict::Genuine => "genuine",
            GpuVerdict::Unverified => "unverified",
            GpuVerdict::Suspect => "SUSPECT",
        })
    }
}

/// One GPU's identity as pog settles it, with its verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSummary {
    /// PCI bus id; `None` when no source could read it.
    pub bus_id: Option<BusId>,
    /// NVML's device index, the number `nvidia-smi -i` takes.
    pub nvml_index: Option<u32>,
    /// The name the GPU reports (NVML, else CUDA, else nvidia-smi).
    pub name: Option<String>,
    /// The database model its PCI device id names.
    pub model: Option<String>,
    /// The UUID, from the first source that has one.
    pub uuid: Option<String>,
    /// The board serial number, as NVML reads it.
    pub serial: Option<String>,
    /// Total memory as NVML reports it, in MiB.
    pub memory_mib: Option<u64>,
    /// Streaming multiprocessors, as CUDA counts them.
    pub sm_count: Option<u32>,
    /// CUDA compute capability, e.g. "9.0" (CUDA first, else NVML).
    pub compute_capability: Option<String>,
    /// "Gen5 x16 (max Gen5 x16)".
    pub pcie_link: Option<String>,
    /// The sources that list this GPU ("NVML", "CUDA", "nvidia-smi", "sysfs", "procfs").
    pub seen_by: Vec<String>,
    /// What inspection concludes about it.
    pub verdict: GpuVerdict,
}

/// The whole result of inspecting one inventory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Inspection {
    /// Every GPU any source saw, by bus id.
    pub gpus: Vec<GpuSummary>,
    /// Most severe first.
    pub findings: Vec<Finding>,
}

impl Inspection {
    /// The most severe finding's severity (`Info` when there are none).
    pub fn worst(&self) -> Severity {
        self.findings
            .iter()
            .map(|f| f.severity)
            .max()
            .unwrap_or(Severity::Info)
    }

    /// True when any finding fails: the command must exit non-zero.
    pub fn failed(&self) -> bool {
        self.worst() == Severity::Fail
    }
}

/// What `pog inspect` reports: the raw facts and what pog concluded from them.
#[derive(Debug, Clone, Serialize)]
pub struct InspectReport {
    /// Everything every source reported, as collected.
    pub inventory: Inventory,
    /// The GPUs and findings concluded from the inventory.
    pub inspection: Inspection,
}

impl InspectReport {
    /// GPUs that came out genuine.
    pub fn genuine(&self) -> usize {
        self.inspection
            .gpus
            .iter()
            .filter(|g| g.verdict == GpuVerdict::Genuine)
            .count()
    }

    /// One line: how many GPUs are genuine, or why none are.
    pub fn summary(&self) -> String {
        let insp = &self.inspection;
        let count = |s: Severity| insp.findings.iter().filter(|f| f.severity == s).count();
        if insp.gpus.is_empty() {
            "no NVIDIA GPU found on this host".to_string()
        } else {
            format!(
                "{} of {} GPU(s) genuine; {} failing, {} warning finding(s)",
                self.genuine(),
                insp.gpus.len(),
                count(Severity::Fail),
                count(Severity::Warn)
            )
        }
    }
}

/// Collects every source of `platform` and inspects what they said.
pub fn run(platform: &dyn Platform) -> InspectReport {
    let inventory = pog_facts::collect(platform);
    let inspection = inspect(&inventory, SpecDb::embedded());
    InspectReport {
        inventory,
        inspection,
    }
}

/// Runs every rule over the inventory.
pub fn inspect(inv: &Inventory, db: &SpecDb) -> Inspection {
    let ctx = rules::Context {
        inv,
        views: join::join(inv),
        db,
    };
    let mut findings = Vec::new();
    rules::sources::check(&ctx, &mut findings);
    rules::spec::check(&ctx, &mut findings);
    rules::uniqueness::check(&ctx, &mut findings);
    rules::environment::check(&ctx, &mut findings);
    rules::health::check(&ctx, &mut findings);
    findings.sort_by(|a, b| b.severity.cmp(&a.severity).then(a.gpu.cmp(&b.gpu)));
    let host_failed = findings
        .iter()
        .any(|f| f.gpu.is_none() && f.severity == Severity::Fail);
    let gpus = ctx
        .views
        .iter()
        .map(|view| {
            let spec = rules::spec::device_id(view).and_then(|id| db.by_device_id(id));
            let failed = host_failed
                || findings.iter().any(|f| {
                    f.gpu.is_some() && f.gpu == view.bus_id && f.severity == Severity::Fail
                });
            let verdict = if failed {
                GpuVerdict::Suspect
            } else if spec.is_none() || view.nvml.is_none() {
                GpuVerdict::Unverified
            } else {
                GpuVerdict::Genuine
            };
            summarize(view, spec.map(|s| s.model.clone()), verdict)
        })
        .collect();
    Inspection { gpus, findings }
}

fn summarize(view: &join::GpuView, model: Option<String>, verdict: GpuVerdict) -> GpuSummary {
    let nvml = view.nvml;
    let pcie_link = nvml.and_then(|g| {
        let l = &g.link;
        Some(format!(
            "Gen{} x{} (max Gen{} x{})",
            l.current_gen.value()?,
            l.current_width.value()?,
            l.max_gen.value()?,
            l.max_width.value()?
        ))
    });
    GpuSummary {
        bus_id: view.bus_id,
        nvml_index: nvml.map(|g| g.index),
        name: rules::spec::reported_name(view).map(str::to_string),
        model,
        uuid: view.uuid().map(str::to_string),
        serial: nvml.and_then(|g| g.serial.value().cloned()),
        memory_mib: nvml.and_then(|g| g.memory_total_mib.value().copied()),
        sm_count: view.cuda.and_then(|c| c.sm_count.value().copied()),
        compute_capability: view
            .cuda
            .and_then(|c| c.compute_capability.value().cloned())
            .or_else(|| nvml.and_then(|g| g.compute_capability.value().cloned())),
        pcie_link,
        seen_by: view.seen_by().into_iter().map(str::to_string).collect(),
        verdict,
    }
}
