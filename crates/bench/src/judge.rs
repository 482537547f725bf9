//! Judgement: each figure as pass / warn / fail against what its model should reach: pog's own
//! medians of the model where it has them (pog-spec's `data/measured.toml`), the datasheet
//! otherwise, by the policy in `data/thresholds.toml`.

use pog_facts::CopyKind;
use pog_spec::{BenchMedians, GemmKey, GpuSpec, Precision, SpecDb};
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

const THRESHOLDS_TOML: &str = include_str!("../data/thresholds.toml");

/// How one figure compares with what its model should reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Reported, not judged (no threshold applies).
    Info,
    /// At or above the warn threshold.
    Pass,
    /// Below the warn threshold, or a condition that warns (e.g. thermal slowdown).
    Warn,
    /// Below the fail threshold, or a wrong result (GEMM element, memory word, sustained mismatch).
    Fail,
}

/// A verdict with the threshold it was judged against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Judgement {
    /// Pass, warn, fail, or info when not judged.
    pub verdict: Verdict,
    /// e.g. "71.4 % of the datasheet peak; warn below 50 %, fail below 30 %".
    pub reason: String,
    /// Where the threshold comes from (datasheet or a measured run).
    pub source: String,
}

impl Judgement {
    fn info(reason: impl Into<String>) -> Judgement {
        Judgement {
            verdict: Verdict::Info,
            reason: reason.into(),
            source: "none".into(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Defaults {
    source: String,
    gemm_warn_fraction: f64,
    gemm_fail_fraction: f64,
    copy_warn_fraction: f64,
    copy_fail_fraction: f64,
    /// Peer-to-peer transfers against their link's rate.
    peer_warn_fraction: f64,
    peer_fail_fraction: f64,
}

/// How far below pog's own median of a model (`pog_spec::BenchMedians`) a figure warns or
/// fails, as a ratio to that median.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MeasuredPolicy {
    warn_ratio: f64,
    fail_ratio: f64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Thresholds {
    default: Defaults,
    measured: MeasuredPolicy,
}

fn thresholds() -> &'static Thresholds {
    static T: OnceLock<Thresholds> = OnceLock::new();
    T.get_or_init(|| {
        toml::from_str(THRESHOLDS_TOML).expect("thresholds.toml is checked by the tests")
    })
}

/// pog's benchmark medians of `spec`'s model in `db`, if it has them.
fn medians<'a>(db: &'a SpecDb, spec: Option<&GpuSpec>) -> Option<&'a BenchMedians> {
    db.measurement(spec?)?.bench.as_ref()
}

/// The key of a copy figure in `BenchMedians::copy_gbs`.
fn copy_key(kind: CopyKind) -> String {
    kind.name().to_string()
}

/// Fail below `fail`, warn below `warn`, pass from there up.
fn ladder(ratio: f64, warn: f64, fail: f64) -> Verdict {
    if ratio < fail {
        Verdict::Fail
    } else if ratio < warn {
        Verdict::Warn
    } else {
        Verdict::Pass
    }
}

fn against_expected(
    value: f64,
    expected: f64,
    policy: &MeasuredPolicy,
    m: &BenchMedians,
    unit: &str,
) -> Judgement {
    let ratio = value / expected;
    Judgement {
        verdict: ladder(ratio, policy.warn_ratio, policy.fail_ratio),
        reason: format!(
            "{:.0} % of the {expected} {unit} this model measured; warn below {:.0} %, fail below {:.0} %",
            ratio * 100.0,
            policy.warn_ratio * 100.0,
            policy.fail_ratio * 100.0
        ),
        source: m.source.clone(),
    }
}

fn against_peak(value: f64, peak: f64, warn: f64, fail: f64) -> Judgement {
    let fraction = value / peak;
    Judgement {
        verdict: ladder(fraction, warn, fail),
        reason: format!(
            "{:.1} % of the datasheet peak {peak}; warn below {:.0} %, fail below {:.0} %",
            fraction * 100.0,
            warn * 100.0,
            fail * 100.0
        ),
        source: thresholds().default.source.clone(),
    }
}

/// A figure that could not be measured: a failure, with the reason.
pub fn failed(reason: impl Into<String>) -> Judgement {
    Judgement {
        verdict: Verdict::Fail,
        reason: reason.into(),
        source: "pog".into(),
    }
}

/// A figure reported without a verdict, and why.
pub fn not_judged(reason: impl Into<String>) -> Judgement {
    Judgement::info(reason)
}

/// What a GPU-to-GPU figure is: one peer transfer, or the all-reduce across the host, with
/// what its bandwidth depends on besides the links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerFigureKind {
    /// One peer transfer between two GPUs.
    Transfer {
        /// Which transfer: copy engine push or pull, SM write or read.
        kind: pog_facts::PeerKind,
        /// Bytes per transfer.
        bytes: u64,
    },
    /// NCCL's all-reduce across the host's GPUs.
    AllReduce {
        /// GPUs in the all-reduce group.
        gpus: usize,
        /// Bytes per GPU.
        bytes: u64,
    },
}

impl PeerFigureKind {
    /// Its key in a measured entry's `peer_gbs`.
    fn key(self) -> String {
        match self {
            PeerFigureKind::Transfer { kind, bytes } => format!("{}_{}", kind.name(), bytes >> 20),
            PeerFigureKind::AllReduce { gpus, bytes } => {
                format!("all_reduce_{gpus}gpus_{}", bytes >> 20)
            }
        }
    }
}

/// Judges a GPU-to-GPU figure (median GB/s) of GPUs of model `spec` (`None` when the host's
/// GPUs differ): against what pog measured on that SKU's hosts where pog-spec has it,
/// else against the rate of the link NVML reports between them (`link`, e.g. "NVLink ×18
/// (v4)", at `link_gbs` one way; the slowest link for an all-reduce).
pub fn peer(
    spec: Option<&GpuSpec>,
    figure: PeerFigureKind,
    gbs: f64,
    link_gbs: Option<f64>,
    link: &str,
) -> Judgement {
    peer_in(
        thresholds(),
        SpecDb::embedded(),
        spec,
        figure,
        gbs,
        link_gbs,
        link,
    )
}

/// [`peer`] with the policy and the measurements given.
fn peer_in(
    t: &Thresholds,
    db: &SpecDb,
    spec: Option<&GpuSpec>,
    figure: PeerFigureKind,
    gbs: f64,
    link_gbs: Option<f64>,
    link: &str,
) -> Judgement {
    if let Some(m) = medians(db, spec) {
        if let Some(expected) = m.peer_gbs.get(&figure.key()) {
            return against_expected(gbs, *expected, &t.measured, m, "GB/s");
        }
    }
    let Some(link_gbs) = link_gbs else {
        return Judgement::info("no link rate to judge against");
    };
    let d = &t.default;
    let fraction = gbs / link_gbs;
    Judgement {
        verdict: ladder(fraction, d.peer_warn_fraction, d.peer_fail_fraction),
        reason: format!(
            "{:.1} % of the {link_gbs:.0} GB/s of its link ({link}); warn below {:.0} %, fail below {:.0} %",
            fraction * 100.0,
            d.peer_warn_fraction * 100.0,
            d.peer_fail_fraction * 100.0
        ),
        source: "link rate from NVML's topology: NVLink links × 25 GB/s (50 from NVLink 5), or the PCIe link (datasheet rates)".into(),
    }
}

/// Judges a GEMM's median TFLOP/s.
pub fn gemm(spec: Option<&GpuSpec>, precision: Precision, size: u64, tflops: f64) -> Judgement {
    if let Some(m) = medians(SpecDb::embedded(), spec) {
        if let Some(expected) = m.gemm_tflops.get(&GemmKey { precision, size }) {
            return against_expected(tflops, *expected, &thresholds().measured, m, "TFLOP/s");
        }
    }
    match spec.and_then(|s| s.peak.get(precision)) {
        Some(peak) => against_peak(
            tflops,
            peak,
            thresholds().default.gemm_warn_fraction,
            thresholds().default.gemm_fail_fraction,
        ),
        None => Judgement::info("no datasheet peak for this model and precision"),
    }
}

/// The datasheet ceiling of a copy, GB/s as pog counts it, where one applies: HBM bandwidth for
/// device copies (read + write), the PCIe link for pinned host copies (each way, or both).
pub fn copy_peak_gbs(spec: &GpuSpec, kind: CopyKind) -> Option<f64> {
    // PCIe x16 per direction: 128b/130b coding from Gen3 on; Gen6 is 2x Gen5.
    let pcie = match spec.pcie_gen {
        1 => 4.0,
        2 => 8.0,
        3 => 15.75,
        4 => 31.5,
        5 => 63.0,
        _ => 126.0,
    };
    match kind {
        CopyKind::DeviceToDevice => Some(spec.memory_bandwidth_gbs),
        CopyKind::HostToDevicePinned | CopyKind::DeviceToHostPinned => Some(pcie),
        CopyKind::BidirectionalPinned => Some(2.0 * pcie),
        // Pageable copies go through a staging buffer: they measure the host as much as the GPU.
        CopyKind::HostToDevicePageable | CopyKind::DeviceToHostPageable => None,
    }
}

/// Judges a copy's median GB/s.
pub fn copy(spec: Option<&GpuSpec>, kind: CopyKind, gbs: f64) -> Judgement {
    if let Some(m) = medians(SpecDb::embedded(), spec) {
        if let Some(expected) = m.copy_gbs.get(&copy_key(kind)) {
            return against_expected(gbs, *expected, &thresholds().measured, m, "GB/s");
        }
    }
    match spec.and_then(|s| copy_peak_gbs(s, kind)) {
        Some(peak) => against_peak(
            gbs,
            peak,
            thresholds().default.copy_warn_fraction,
            thresholds().default.copy_fail_fraction,
        ),
        None => Judgement::info("not judged: pageable copies depend on the host's memory"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thresholds_file_parses_and_the_measured_keys_are_known() {
        let t = thresholds();
        assert!(t.default.gemm_fail_fraction < t.default.gemm_warn_fraction);
        assert!(t.measured.fail_ratio < t.measured.warn_ratio && t.measured.warn_ratio <= 1.0);
        // pog-spec checks the models and GEMM keys; copy and peer keys are named here.
        for m in SpecDb::embedded().measurements() {
            let Some(m) = &m.bench else { continue };
            for key in m.copy_gbs.keys() {
                assert!(CopyKind::ALL.iter().any(|k| copy_key(*k) == *key), "{key}");
            }
            for key in m.peer_gbs.keys() {
                let (name, number) = key.rsplit_once('_').unwrap_or_default();
                assert!(
                    number.parse::<u64>().is_ok()
                        && (pog_facts::PeerKind::ALL.iter().any(|k| k.name() == name)
                            || name
                                .strip_prefix("all_reduce_")
                                .and_then(|n| n.strip_suffix("gpus"))
                                .is_some_and(|n| n.parse::<usize>().is_ok())),
                    "{key}"
                );
            }
        }
        assert_eq!(
            copy_key(CopyKind::HostToDevicePinned),
            "host_to_device_pinned"
        );
    }

    #[test]
    fn peer_figures_use_the_skus_measurements_else_the_link() {
        let t = thresholds();
        let db = SpecDb::embedded()
            .clone()
            .with_measurements(
                r#"
[[gpu]]
model = "H200 SXM"
[gpu.bench]
source = "a test host"
[gpu.bench.peer_gbs]
copy_engine_write_1024 = 360.0
all_reduce_8gpus_1024 = 340.0
"#,
            )
            .unwrap();
        let db = &db;
        let h200 = db.by_model("H200 SXM");
        let h100 = db.by_model("H100 SXM");
        let transfer = |kind, bytes| PeerFigureKind::Transfer { kind, bytes };
        let write = transfer(pog_facts::PeerKind::CopyEngineWrite, 1 << 30);
        let read = transfer(pog_facts::PeerKind::SmRead, 1 << 30);
        let quick_write = transfer(pog_facts::PeerKind::CopyEngineWrite, 256 << 20);
        let all_reduce = |gpus| PeerFigureKind::AllReduce {
            gpus,
            bytes: 1 << 30,
        };
        let nvlink = Some(450.0);
        // 300 GB/s is 83 % of the H200's measured 360: a warning, from the SKU's figure.
        let j = peer_in(t, db, h200, write, 300.0, nvlink, "NVLink ×18 (v4)");
        assert_eq!(
            (j.verdict, j.source.as_str()),
            (Verdict::Warn, "a test host")
        );
        assert_eq!(
            peer_in(t, db, h200, all_reduce(8), 250.0, nvlink, "x").verdict,
            Verdict::Fail,
            "74 % of the measured all-reduce"
        );
        // No measurement of this figure, size, GPU count or model: against the link (67 %
        // passes).
        for (spec, figure) in [
            (h200, read),
            (h200, quick_write),
            (h200, all_reduce(4)),
            (h100, write),
            (None, write),
        ] {
            let j = peer_in(t, db, spec, figure, 300.0, nvlink, "NVLink ×18 (v4)");
            assert_eq!(j.verdict, Verdict::Pass, "{j:?}");
            assert!(j.reason.contains("of its link"), "{}", j.reason);
        }
        // Neither a measurement nor a link: reported only.
        assert_eq!(
            peer_in(t, db, None, write, 1.0, None, "").verdict,
            Verdict::Info
        );
    }

    #[test]
    fn measured_thresholds_for_the_h200() {
        let h200 = SpecDb::embedded().by_model("H200 SXM").unwrap();
        let judged = |t: f64| gemm(Some(h200), Precision::Fp16, 8192, t);
        assert_eq!(judged(768.0).verdict, Verdict::Pass);
        assert_eq!(judged(650.0).verdict, Verdict::Warn);
        assert_eq!(judged(500.0).verdict, Verdict::Fail);
        assert!(judged(768.0).source.contains("real H200"));
        // A size pog has not measured falls back to the datasheet.
        assert!(gemm(Some(h200), Precision::Fp16, 4096, 700.0)
            .source
            .contains("datasheet"));
        assert_eq!(
            copy(Some(h200), CopyKind::DeviceToDevice, 3000.0).verdict,
            Verdict::Fail
        );
    }

    #[test]
    fn datasheet_thresholds_for_unmeasured_models() {
        let l4 = SpecDb::embedded().by_model("L4").unwrap();
        assert_eq!(
            gemm(Some(l4), Precision::Fp16, 8192, 100.0).verdict,
            Verdict::Pass
        );
        assert_eq!(
            gemm(Some(l4), Precision::Fp16, 8192, 50.0).verdict,
            Verdict::Warn
        );
        assert_eq!(
            gemm(Some(l4), Precision::Fp16, 8192, 20.0).verdict,
            Verdict::Fail
        );
        assert_eq!(
            gemm(Some(l4), Precision::Fp16, 8192, 20.0).source,
            thresholds().default.source
        );
        assert_eq!(
            gemm(None, Precision::Fp16, 8192, 1.0).verdict,
            Verdict::Info
        );
        assert_eq!(
            copy(Some(l4), CopyKind::HostToDevicePinned, 25.0).verdict,
            Verdict::Pass
        );
        assert_eq!(
            copy(Some(l4), CopyKind::HostToDevicePinned, 10.0).verdict,
            Verdict::Fail
        );
        assert_eq!(
            copy(Some(l4), CopyKind::HostToDevicePageable, 1.0).verdict,
            Verdict::Info
        );
    }
}
