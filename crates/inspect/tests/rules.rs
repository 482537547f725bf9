//! Every rule fires on the fault it exists for and stays quiet on a healthy host.
//! Hosts are the simulated platform (a test double) plus the real H200 capture.

use pog_facts::{collect, Inventory, Reading};
use pog_inspect::rules::{environment, health, sources, spec, uniqueness};
use pog_inspect::{inspect, GpuVerdict, Inspection, Severity};
use pog_sim::SimPlatform;
use pog_spec::SpecDb;

fn run(sim: &SimPlatform) -> Inspection {
    inspect(&collect(sim), SpecDb::embedded())
}

fn profile(p: &str) -> Inspection {
    run(&SimPlatform::from_profile(p).unwrap())
}

/// The severities with which `rule` fired.
fn fired(insp: &Inspection, rule: &str) -> Vec<Severity> {
    insp.findings
        .iter()
        .filter(|f| f.rule == rule)
        .map(|f| f.severity)
        .collect()
}

fn assert_fires(p: &str, rule: &str, severity: Severity) -> Inspection {
    let insp = profile(p);
    assert!(
        fired(&insp, rule).contains(&severity),
        "{p}: expected {rule} at {severity}, got {:#?}",
        insp.findings
    );
    insp
}

#[test]
fn healthy_hosts_of_every_model_raise_nothing() {
    for model in SpecDb::embedded().all() {
        let insp = profile(&format!("{} x2", model.model));
        let loud: Vec<_> = insp
            .findings
            .iter()
            .filter(|f| f.severity >= Severity::Warn)
            .collect();
        assert!(loud.is_empty(), "{}: {loud:#?}", model.model);
        assert!(
            insp.gpus.iter().all(|g| g.verdict == GpuVerdict::Genuine),
            "{}",
            model.model
        );
        assert_eq!(insp.gpus[0].model.as_deref(), Some(model.model.as_str()));
    }
}

#[test]
fn the_real_h200_comes_out_genuine() {
    let text = include_str!("fixtures/h200-inventory.json");
    let inv: Inventory = serde_json::from_str(text).unwrap();
    let insp = inspect(&inv, SpecDb::embedded());
    assert!(!insp.failed(), "{:#?}", insp.findings);
    assert!(
        insp.findings.iter().all(|f| f.severity == Severity::Info),
        "{:#?}",
        insp.findings
    );
    assert_eq!(insp.gpus.len(), 1);
    let gpu = &insp.gpus[0];
    assert_eq!(gpu.verdict, GpuVerdict::Genuine);
    assert_eq!(gpu.model.as_deref(), Some("H200 SXM"));
    assert_eq!(
        gpu.seen_by,
        ["NVML", "CUDA", "nvidia-smi", "sysfs", "procfs"]
    );
    // It is a KVM guest with the GPU passed through: reported, as info.
    assert_eq!(
        fired(&insp, environment::VIRTUALIZATION),
        [Severity::Info, Severity::Info]
    );
}

#[test]
fn a_host_without_gpus_fails_with_the_host_still_reported() {
    // `pog inspect && …` must not accept a machine with no GPU.
    let insp = assert_fires("", sources::AVAILABLE, Severity::Fail);
    assert!(insp.failed());
    assert!(insp.gpus.is_empty());
    let mut bare = SimPlatform::from_profile("").unwrap();
    bare.nvml = Reading::unavailable("NVML library not found");
    bare.cuda = Reading::unavailable("libcuda not found");
    let insp = run(&bare);
    assert!(insp.failed());
    assert!(insp.findings[0].message.contains("no NVIDIA GPU"));
}

#[test]
fn spoofed_names_fail_against_the_pci_device_id() {
    let insp = assert_fires("H100 SXM; spoofed-name", spec::NAME, Severity::Fail);
    assert_eq!(insp.gpus[0].verdict, GpuVerdict::Suspect);
    assert_eq!(insp.gpus[0].model.as_deref(), Some("H100 SXM"));
    assert_fires("H200 SXM; spoofed-name", spec::NAME, Severity::Fail);
    // A name the database does not know is only a warning.
    let mut sim = SimPlatform::from_profile("L4").unwrap();
    if let Reading::Value(n) = &mut sim.nvml {
        n.gpus[0].name = Reading::Value("NVIDIA L4 Custom".into());
    }
    assert!(fired(&run(&sim), spec::NAME).contains(&Severity::Warn));
}

#[test]
fn a_replaced_nvidia_smi_is_caught() {
    let insp = assert_fires(
        "H200 SXM; smi-disagrees",
        sources::SMI_MATCHES_NVML,
        Severity::Fail,
    );
    assert_eq!(
        fired(&insp, sources::SMI_MATCHES_NVML).len(),
        2,
        "serial and memory"
    );
}

#[test]
fn missing_sources_are_named() {
    assert_fires("H200 SXM; cuda-missing", sources::AVAILABLE, Severity::Warn);
    assert_fires("H200 SXM; smi-missing", sources::AVAILABLE, Severity::Warn);
    let insp = assert_fires("H200 SXM; nvml-missing", sources::AVAILABLE, Severity::Fail);
    assert!(insp.gpus.iter().all(|g| g.verdict == GpuVerdict::Suspect));
}

#[test]
fn a_gpu_hidden_from_one_source_is_caught() {
    let insp = assert_fires(
        "A100 SXM 80GB x2; hidden-from-cuda",
        sources::COUNT,
        Severity::Fail,
    );
    assert_eq!(fired(&insp, sources::SEEN_BY_ALL), [Severity::Fail]);
}

#[test]
fn identities_must_be_unique() {
    assert_fires(
        "H100 SXM x2; duplicate-uuid",
        uniqueness::UUID,
        Severity::Fail,
    );
    assert_fires(
        "H100 SXM x2; duplicate-serial",
        uniqueness::SERIAL,
        Severity::Fail,
    );
    // Boards without serials all say "0": that is no duplicate.
    let mut sim = SimPlatform::from_profile("RTX 4090 x2").unwrap();
    if let Reading::Value(n) = &mut sim.nvml {
        for g in &mut n.gpus {
            g.serial = Reading::Value("0".into());
        }
    }
    if let Reading::Value(s) = &mut sim.nvidia_smi {
        for g in &mut s.gpus {
            g.serial = Reading::Value("0".into());
        }
    }
    assert!(fired(&run(&sim), uniqueness::SERIAL).is_empty());
}

#[test]
fn preloads_and_foreign_libraries_fail() {
    assert_fires("H200 SXM; ld-preload", environment::PRELOAD, Severity::Fail);
    let insp = assert_fires(
        "H200 SXM; foreign-nvml",
        environment::LIBRARY,
        Severity::Fail,
    );
    assert_eq!(
        fired(&insp, environment::LIBRARY).len(),
        3,
        "path, owner and mode"
    );
    let mut sim = SimPlatform::from_profile("H200 SXM").unwrap();
    sim.process.ld_so_preload = Reading::Value(vec!["/usr/lib/libshim.so".into()]);
    assert_eq!(fired(&run(&sim), environment::PRELOAD), [Severity::Fail]);
}

#[test]
fn library_version_and_mapping_problems_warn() {
    let mut sim = SimPlatform::from_profile("H200 SXM").unwrap();
    if let Reading::Value(libs) = &mut sim.process.nvidia_libraries {
        libs[0].path = "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.535.104.05".into();
    }
    assert_eq!(fired(&run(&sim), environment::LIBRARY), [Severity::Warn]);
    sim.process.nvidia_libraries = Reading::Value(vec![]);
    assert_eq!(fired(&run(&sim), environment::LIBRARY), [Severity::Warn]);
}

#[test]
fn virtualization_is_information() {
    let insp = assert_fires(
        "H200 SXM; hypervisor",
        environment::VIRTUALIZATION,
        Severity::Info,
    );
    assert_eq!(
        fired(&insp, environment::VIRTUALIZATION).len(),
        2,
        "CPU flag and vGPU mode"
    );
    assert!(!insp.failed());
}

#[test]
fn health_warnings() {
    assert_fires("H200 SXM; ecc-off", health::ECC, Severity::Warn);
    assert_fires(
        "V100 SXM2 32GB; retirement-pending",
        health::MEMORY_REPAIR,
        Severity::Warn,
    );
    assert_fires(
        "H200 SXM; remap-pending",
        health::MEMORY_REPAIR,
        Severity::Warn,
    );
    assert_fires(
        "H200 SXM; remap-failure",
        health::MEMORY_REPAIR,
        Severity::Fail,
    );
    let insp = assert_fires("H200 SXM; link-degraded", health::LINK, Severity::Warn);
    assert_eq!(fired(&insp, health::LINK).len(), 2, "generation and width");
    let mut sim = SimPlatform::from_profile("A100 SXM 80GB").unwrap();
    if let Reading::Value(n) = &mut sim.nvml {
        n.gpus[0].mig_enabled = Reading::Value(true);
        n.gpus[0].ecc = Reading::Value(pog_facts::EccMode {
            current: true,
            pending: false,
        });
    }
    let insp = run(&sim);
    assert_eq!(fired(&insp, health::MIG), [Severity::Info]);
    assert_eq!(fired(&insp, health::ECC), [Severity::Info]);
}

#[test]
fn nvlink_errors_and_down_links_warn() {
    let insp = assert_fires("H200 SXM x2; nvlink-errors", health::NVLINK, Severity::Warn);
    assert_eq!(
        fired(&insp, health::NVLINK).len(),
        2,
        "one down link, one link with errors"
    );
    // A card whose links are all idle (a single GPU in a VM) is only noted.
    let mut sim = SimPlatform::from_profile("H200 SXM").unwrap();
    if let Reading::Value(n) = &mut sim.nvml {
        if let Reading::Value(links) = &mut n.gpus[0].nvlinks {
            links.iter_mut().for_each(|l| l.active = false);
        }
    }
    assert_eq!(fired(&run(&sim), health::NVLINK), [Severity::Info]);
    assert!(SimPlatform::from_profile("L4; nvlink-errors")
        .unwrap_err()
        .to_string()
        .contains("NVLink"));
}

#[test]
fn resources_are_checked_against_the_datasheet() {
    assert_fires("H200 SXM; fewer-sms", spec::SM_COUNT, Severity::Fail);
    assert_fires("H200 SXM; less-memory", spec::MEMORY, Severity::Fail);
    let mut sim = SimPlatform::from_profile("H200 SXM").unwrap();
    if let Reading::Value(n) = &mut sim.nvml {
        let g = &mut n.gpus[0];
        g.architecture = Reading::Value("Ampere".into());
        g.max_sm_clock_mhz = Reading::Value(1410);
        g.link.max_gen = Reading::Value(4);
        g.link.current_gen = Reading::Value(4);
    }
    sim.nvidia_smi = Reading::unavailable("not installed");
    let insp = run(&sim);
    assert_eq!(fired(&insp, spec::ARCHITECTURE), [Severity::Fail]);
    assert_eq!(fired(&insp, spec::CLOCK), [Severity::Warn]);
    assert_eq!(fired(&insp, spec::PCIE), [Severity::Warn]);
    if let Reading::Value(n) = &mut sim.nvml {
        n.gpus[0].link.max_gen = Reading::Value(6);
    }
    assert!(fired(&run(&sim), spec::PCIE).contains(&Severity::Fail));
}

#[test]
fn unknown_models_are_unverified() {
    let mut sim = SimPlatform::from_profile("H200 SXM").unwrap();
    if let Reading::Value(p) = &mut sim.pci {
        p[0].device_id = 0x1234;
    }
    if let Reading::Value(n) = &mut sim.nvml {
        n.gpus[0].pci_device_id = Reading::Value(0x1234);
    }
    if let Reading::Value(s) = &mut sim.nvidia_smi {
        s.gpus[0].pci_device_id = Reading::Value(0x1234);
    }
    let insp = run(&sim);
    assert_eq!(fired(&insp, spec::MODEL), [Severity::Warn]);
    assert_eq!(insp.gpus[0].verdict, GpuVerdict::Unverified);
}

#[test]
fn sources_must_agree() {
    let insp = assert_fires("H200 SXM; sysfs-device-id", sources::AGREE, Severity::Fail);
    assert!(insp
        .findings
        .iter()
        .any(|f| f.message.contains("PCI device id")));
    assert_fires(
        "H200 SXM; driver-version-mismatch",
        sources::DRIVER_VERSION,
        Severity::Fail,
    );
    let mut sim = SimPlatform::from_profile("H200 SXM").unwrap();
    if let Reading::Value(c) = &mut sim.cuda {
        c.devices[0].compute_capability = Reading::Value("8.0".into());
    }
    let insp = run(&sim);
    assert!(insp
        .findings
        .iter()
        .any(|f| f.rule == sources::AGREE && f.message.contains("compute capability")));
}

#[test]
fn a_gpu_given_to_a_vm_is_noted_and_not_counted() {
    let mut sim = SimPlatform::from_profile("H200 SXM").unwrap();
    if let Reading::Value(p) = &mut sim.pci {
        let mut other = p[0].clone();
        other.bus_id = pog_facts::BusId::parse("0000:c1:00.0").unwrap();
        other.driver = Reading::Value("vfio-pci".into());
        p.push(other);
    }
    let insp = run(&sim);
    assert_eq!(fired(&insp, sources::NOT_DRIVEN), [Severity::Info]);
    assert!(fired(&insp, sources::COUNT).is_empty());
}

#[test]
fn an_unreadable_field_costs_only_that_field() {
    let insp = profile("H200 SXM; nvml-field-error");
    assert!(!insp.failed(), "{:#?}", insp.findings);
    assert_eq!(insp.gpus[0].serial, None);
    assert_eq!(insp.gpus[0].verdict, GpuVerdict::Genuine);
}
