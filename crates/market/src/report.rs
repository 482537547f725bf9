//! Filling [`HostFigures`] from what pog produces: a `pog check --json` report (saved, or
//! fresh), and the spec database for models pog has not measured.
//!
//! **Only verified figures count.** A check report's benchmark figures are the host's own
//! (self-reported, as far as a remote party is concerned); each is held to the datasheet of
//! the model the GPU was inspected and proven to be, so a modified agent can at most claim
//! its proven model's datasheet, never a better model's. A GEMM whose spot-checked elements
//! were wrong, or a sustained run with differing results or NaNs, counts nothing. A GPU
//! without an accepted proof counts nothing at all ([`crate::score`]).
//!
//! **Models pog has not measured** ([`spec_figures`]) are estimated from their datasheet,
//! each figure scaled by what the reference card reached of its own datasheet (the H200 SXM
//! reached 829.9 of 989.4 BF16 TFLOP/s, 0.839): an estimate, marked
//! [`FigureSource::SpecDatabase`] wherever it is shown.

use pog_spec::{GpuSpec, SpecDb};
use serde_json::Value;

use crate::config::Config;
use crate::score::{
    CpuFigures, FigureSource, GpuFigures, HostFigures, ProofStatus, RamFigures, ReliabilityFigures,
    StorageFigures,
};

/// Why a report could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReportError {
    /// Not a `pog check --json` report.
    #[error("not a `pog check --json` report: {0}")]
    NotACheckReport(String),
    /// The reference model of the configuration is not in the spec database.
    #[error("the reference model {0:?} is not in the spec database")]
    UnknownReference(String),
}

/// A check report's figures, with what the reader had to say about them.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckFigures {
    /// The figures the score reads.
    pub host: HostFigures,
    /// The report came from the simulated test double: nothing in it is a measurement.
    pub simulated: bool,
    /// What was clipped to a datasheet, left out, or assumed.
    pub notes: Vec<String>,
}

/// The better of a model's FP16 and BF16 dense tensor peaks, TFLOP/s.
fn tensor_peak(spec: &GpuSpec) -> Option<f64> {
    match (spec.peak.fp16, spec.peak.bf16) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// How far the reference card's measured figures reached of its datasheet, per figure
/// (tensor, FP32, memory, bandwidth, sustained against the tensor peak).
struct Attainment {
    tensor: f64,
    fp32: f64,
    memory: f64,
    bandwidth: f64,
    sustained: f64,
}

fn attainment(config: &Config, db: &SpecDb) -> Result<Attainment, ReportError> {
    let g = &config.score.gpu;
    let unknown = || ReportError::UnknownReference(g.reference_model.clone());
    let spec = db.by_model(&g.reference_model).ok_or_else(unknown)?;
    let tensor = tensor_peak(spec).ok_or_else(unknown)?;
    let fp32 = spec.peak.fp32.ok_or_else(unknown)?;
    Ok(Attainment {
        tensor: g.reference_tensor_tflops / tensor,
        fp32: g.reference_fp32_tflops / fp32,
        memory: g.reference_memory_gib / spec.memory_gib,
        bandwidth: g.reference_bandwidth_gbs / spec.memory_bandwidth_gbs,
        sustained: g.reference_sustained_tflops / tensor,
    })
}

/// A model's estimated figures from the spec database, for a GPU taken to be genuine and
/// proven (for worked examples and rankings; [`FigureSource::SpecDatabase`]).
pub fn spec_figures(
    spec: &GpuSpec,
    config: &Config,
    db: &SpecDb,
) -> Result<GpuFigures, ReportError> {
    let a = attainment(config, db)?;
    let tensor = tensor_peak(spec);
    Ok(GpuFigures {
        label: spec.model.clone(),
        model: Some(spec.model.clone()),
        tensor_tflops: tensor.map(|t| t * a.tensor),
        fp32_tflops: spec.peak.fp32.map(|t| t * a.fp32),
        memory_gib: Some(spec.memory_gib * a.memory),
        bandwidth_gbs: Some(spec.memory_bandwidth_gbs * a.bandwidth),
        sustained_tflops: tensor.map(|t| t * a.sustained),
        genuine: true,
        proof: ProofStatus::Accepted { proves_model: true },
        source: FigureSource::SpecDatabase,
    })
}

fn f(v: &Value, path: &[&str]) -> Option<f64> {
    get(v, path).and_then(Value::as_f64)
}

fn s<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    get(v, path).and_then(Value::as_str)
}

fn get<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, key| v.get(*key))
}

fn array<'a>(v: &'a Value, path: &[&str]) -> &'a [Value] {
    get(v, path)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// Reads a `pog check --json` report (schema `pog.check/1`).
pub fn check_figures(report: &Value, db: &SpecDb) -> Result<CheckFigures, ReportError> {
    let schema = s(report, &["schema"]).unwrap_or("");
    if !schema.starts_with("pog.check/") {
        return Err(ReportError::NotACheckReport(if schema.is_empty() {
            "it has no `schema` field".into()
        } else {
            format!("its schema is {schema:?}, not pog.check/1")
        }));
    }
    if get(report, &["inspect", "inspection", "gpus"]).is_none() {
        return Err(ReportError::NotACheckReport(
            "it has no inspect.inspection.gpus".into(),
        ));
    }
    let simulated = get(report, &["simulated"]).and_then(Value::as_bool) == Some(true);
    let mut notes = Vec::new();
    let devices = array(
        report,
        &["inspect", "inventory", "cuda", "value", "devices"],
    );
    let bench_gpus = array(report, &["bench", "gpus"]);
    let proofs = array(report, &["prove"]);
    let prove_stage = array(report, &["stages"])
        .iter()
        .find(|st| s(st, &["name"]) == Some("prove"));
    let mut gpus = Vec::new();
    let (mut proofs_passed, mut proofs_total) = (0, 0);
    for (position, g) in array(report, &["inspect", "inspection", "gpus"])
        .iter()
        .enumerate()
    {
        let uuid = s(g, &["uuid"]);
        let bus = s(g, &["bus_id"]);
        // The CUDA ordinal, which the benchmark and proof reports use: by PCI address.
        let ordinal = devices
            .iter()
            .find(|d| bus.is_some() && s(d, &["pci_bus_id", "value"]) == bus)
            .and_then(|d| get(d, &["ordinal"]).and_then(Value::as_u64))
            .unwrap_or(position as u64);
        let label = uuid
            .map(str::to_string)
            .unwrap_or_else(|| format!("GPU {ordinal}"));
        let model = s(g, &["model"]).map(str::to_string);
        let spec = model.as_deref().and_then(|m| db.by_model(m));
        let bench = bench_gpus
            .iter()
            .find(|b| get(b, &["index"]).and_then(Value::as_u64) == Some(ordinal));
        let mut figures = GpuFigures {
            label: label.clone(),
            model: model.clone(),
            tensor_tflops: None,
            fp32_tflops: None,
            memory_gib: f(g, &["memory_mib"]).map(|mib| mib / 1024.0),
            bandwidth_gbs: None,
            sustained_tflops: None,
            genuine: s(g, &["verdict"]) == Some("genuine"),
            proof: ProofStatus::Missing {
                reason: prove_stage
                    .and_then(|st| s(st, &["summary"]))
                    .unwrap_or("the report has no proof for it")
                    .to_string(),
            },
            source: FigureSource::Measured,
        };
        if let Some(b) = bench {
            read_bench(b, &mut figures, &label, &mut notes);
        } else {
            notes.push(format!("{label}: no benchmark figures in the report"));
        }
        if let Some(p) = proofs
            .iter()
            .find(|p| get(p, &["ordinal"]).and_then(Value::as_u64) == Some(ordinal))
        {
            proofs_total += 1;
            figures.proof = if let Some(error) = s(p, &["error"]) {
                ProofStatus::Failed {
                    reason: error.to_string(),
                }
            } else if get(p, &["check", "outcome", "accepted"]).and_then(Value::as_bool)
                == Some(true)
            {
                proofs_passed += 1;
                ProofStatus::Accepted { proves_model: true }
            } else {
                let ratio = f(p, &["check", "outcome", "time", "ratio"]);
                let wrong = array(p, &["check", "outcome", "rejected"]).len();
                ProofStatus::Failed {
                    reason: match ratio {
                        Some(r) if wrong == 0 => format!("rejected at {r:.2} of its time bound"),
                        _ => format!("rejected ({wrong} spot check(s) wrong)"),
                    },
                }
            };
        }
        match spec {
            Some(spec) => clip(&mut figures, spec, &label, &mut notes),
            None => {
                notes.push(format!(
                    "{label}: model {} is not in the spec database: its figures cannot be held to a datasheet",
                    model.as_deref().unwrap_or("unknown")
                ));
                figures.genuine = false;
            }
        }
        gpus.push(figures);
    }
    if proofs_total > 0 {
        notes.push(
            "proofs: the host's self-challenge (pog check), not a validator's records".into(),
        );
    }
    let host = get(report, &["bench", "host"]).filter(|h| !h.is_null());
    let cpu = host.and_then(|h| {
        let threads = get(h, &["threads"]).and_then(Value::as_u64)?;
        let multi = f(h, &["cpu_gflops_multi"])?;
        (threads > 0).then(|| CpuFigures::Measured {
            cores: threads.min(u32::MAX as u64) as u32,
            per_core_gflops: multi / threads as f64,
        })
    });
    let inventory_host = get(report, &["inspect", "inventory", "host"]);
    let ram = RamFigures::Measured {
        capacity_gib: inventory_host
            .and_then(|h| f(h, &["memory_total_bytes", "value"]))
            .map(|b| b / (1u64 << 30) as f64),
        bandwidth_gbs: host.and_then(|h| f(h, &["stream_triad_gbs"])),
    };
    let storage_bench = host.and_then(|h| get(h, &["storage", "value"]));
    let disks = inventory_host
        .map(|h| array(h, &["storage", "value"]))
        .unwrap_or(&[]);
    let capacity: f64 = disks
        .iter()
        .filter_map(|d| f(d, &["size_bytes", "value"]))
        .sum();
    let storage = StorageFigures::Measured {
        read_mbs: storage_bench.and_then(|st| f(st, &["read_mbs"])),
        write_mbs: storage_bench.and_then(|st| f(st, &["write_mbs"])),
        capacity_gb: (!disks.is_empty()).then_some(capacity / 1e9),
    };
    if storage_bench
        .and_then(|st| get(st, &["direct_io"]))
        .and_then(Value::as_bool)
        == Some(false)
    {
        notes.push(
            "storage: measured through the page cache (no O_DIRECT): its speed may be flattered"
                .into(),
        );
    }
    Ok(CheckFigures {
        host: HostFigures {
            gpus,
            cpu,
            ram: Some(ram),
            storage: Some(storage),
            reliability: ReliabilityFigures {
                proofs_passed,
                proofs_total,
                uptime: None,
                anomalies: None,
                uptime_detail: Some(
                    "a host's own report has no rounds: a validator measures it over its rounds".into(),
                ),
                anomaly_detail: Some(
                    "a host's own report has no health records: a validator counts them from its records".into(),
                ),
            },
        },
        simulated,
        notes,
    })
}

/// The benchmark figures of one GPU that can count: GEMMs whose spot checks all passed, the
/// HBM read plateau (else the device-to-device copy), a sustained run without a wrong result.
fn read_bench(b: &Value, figures: &mut GpuFigures, label: &str, notes: &mut Vec<String>) {
    let mut best = |precisions: &[&str]| -> Option<f64> {
        let mut best: Option<f64> = None;
        for gemm in array(b, &["gemm"]) {
            let precision = s(gemm, &["precision"]).unwrap_or("");
            if !precisions.contains(&precision) || !get(gemm, &["error"]).is_none_or(Value::is_null)
            {
                continue;
            }
            let wrong = f(gemm, &["check", "wrong"]).unwrap_or(0.0);
            if wrong > 0.0 {
                notes.push(format!(
                    "{label}: {precision} GEMM left out: {wrong} spot-checked element(s) wrong"
                ));
                continue;
            }
            if let Some(t) = f(gemm, &["tflops_median"]) {
                best = Some(best.map_or(t, |b: f64| b.max(t)));
            }
        }
        best
    };
    figures.tensor_tflops = best(&["fp16", "bf16"]);
    figures.fp32_tflops = best(&["fp32"]);
    let sweep = get(b, &["sweep"])
        .filter(|sw| get(sw, &["error"]).is_none_or(Value::is_null))
        .and_then(|sw| f(sw, &["hbm_read_gbs"]));
    let copy = array(b, &["copies"])
        .iter()
        .find(|c| {
            s(c, &["kind"]) == Some("device_to_device")
                && get(c, &["error"]).is_none_or(Value::is_null)
        })
        .and_then(|c| f(c, &["gbs_median"]));
    figures.bandwidth_gbs = sweep.or(copy);
    if let Some(sustained) = get(b, &["sustained"]).filter(|v| !v.is_null()) {
        let bad = ["faulty_iterations", "mismatched_elements", "nans"]
            .iter()
            .any(|k| f(sustained, &[k]).unwrap_or(0.0) > 0.0);
        if bad {
            notes.push(format!(
                "{label}: sustained throughput left out: the run produced wrong results"
            ));
        } else {
            figures.sustained_tflops = f(sustained, &["tflops", "median"]);
        }
    }
}

/// Holds each figure to the datasheet of the GPU's model (memory within the spec database's
/// tolerance above nominal), noting what was cut.
fn clip(figures: &mut GpuFigures, spec: &GpuSpec, label: &str, notes: &mut Vec<String>) {
    let limits = [
        (
            "FP16/BF16",
            &mut figures.tensor_tflops,
            tensor_peak(spec),
            "TFLOP/s",
        ),
        ("FP32", &mut figures.fp32_tflops, spec.peak.fp32, "TFLOP/s"),
        (
            "memory",
            &mut figures.memory_gib,
            Some(spec.memory_gib * (1.0 + pog_spec::MEMORY_TOLERANCE_ABOVE)),
            "GiB",
        ),
        (
            "bandwidth",
            &mut figures.bandwidth_gbs,
            Some(spec.memory_bandwidth_gbs),
            "GB/s",
        ),
        (
            "sustained",
            &mut figures.sustained_tflops,
            tensor_peak(spec),
            "TFLOP/s",
        ),
    ];
    for (name, value, limit, unit) in limits {
        if let (Some(v), Some(limit)) = (*value, limit) {
            if v > limit {
                notes.push(format!(
                    "{label}: {name} {v:.1} {unit} held to the {} datasheet's {limit:.1}",
                    spec.model
                ));
                *value = Some(limit);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::score::score;
    use serde_json::json;

    fn db() -> &'static SpecDb {
        SpecDb::embedded()
    }

    #[test]
    fn the_reference_model_from_the_database_is_the_reference() {
        let c = Config::embedded();
        let h200 = spec_figures(db().by_model("H200 SXM").unwrap(), &c, db()).unwrap();
        let g = crate::score::gpu_score(&h200, &c.score);
        assert!((g.score - 1.0).abs() < 1e-9, "{g:?}");
        assert_eq!(g.source, FigureSource::SpecDatabase);
        // The H100 SXM has the H200's compute but less and slower memory.
        let h100 = spec_figures(db().by_model("H100 SXM").unwrap(), &c, db()).unwrap();
        let g = crate::score::gpu_score(&h100, &c.score);
        assert!((g.tensor - 1.0).abs() < 1e-9);
        assert!(g.memory < 0.6 && g.bandwidth < 0.7, "{g:?}");
        let mut c2 = c.clone();
        c2.score.gpu.reference_model = "Z9000".into();
        assert_eq!(
            spec_figures(db().by_model("H100 SXM").unwrap(), &c2, db()),
            Err(ReportError::UnknownReference("Z9000".into()))
        );
    }

    /// A check report with one H200 as the real H200 host produced it (figures of
    /// docs/benchmarks.md), in the `pog check --json` shape.
    fn report() -> Value {
        json!({
            "schema": "pog.check/1", "verdict": "pass", "exit_status": 0, "summary": "",
            "simulated": false,
            "stages": [{"name": "prove", "status": "pass", "summary": "1 of 1 GPU(s) passed"}],
            "inspect": {
                "inventory": {
                    "cuda": {"value": {"devices": [{"ordinal": 0, "pci_bus_id": {"value": "0000:00:06.0"}}]}},
                    "host": {
                        "memory_total_bytes": {"value": 135_076_000_000u64},
                        "storage": {"value": [
                            {"name": "vda", "size_bytes": {"value": 275_000_000_000u64}},
                            {"name": "vdb", "size_bytes": {"value": 0}}
                        ]}
                    }
                },
                "inspection": {"gpus": [{
                    "bus_id": "0000:00:06.0", "uuid": "GPU-0621aea7", "model": "H200 SXM",
                    "memory_mib": 143771, "verdict": "genuine"
                }]}
            },
            "bench": {
                "gpus": [{
                    "index": 0, "model": "H200 SXM",
                    "gemm": [
                        {"precision": "bf16", "size": 8192, "tflops_median": 829.9, "error": null, "check": {"wrong": 0}},
                        {"precision": "fp16", "size": 8192, "tflops_median": 789.2, "error": null, "check": {"wrong": 0}},
                        {"precision": "fp32", "size": 8192, "tflops_median": 51.6, "error": null, "check": {"wrong": 0}},
                        {"precision": "int8", "size": 8192, "tflops_median": 1498.9, "error": null, "check": {"wrong": 0}}
                    ],
                    "copies": [{"kind": "device_to_device", "gbs_median": 4229.9, "error": null}],
                    "sweep": {"hbm_read_gbs": 4349.0, "error": null},
                    "sustained": {"tflops": {"median": 730.6}, "faulty_iterations": 0, "mismatched_elements": 0, "nans": 0}
                }],
                "host": {
                    "threads": 16, "cpu_gflops_multi": 85.8, "cpu_gflops_single": 8.6,
                    "stream_triad_gbs": 87.0,
                    "storage": {"value": {"read_mbs": 1173.0, "write_mbs": 1624.0, "direct_io": true}}
                }
            },
            "prove": [{"ordinal": 0, "model": "H200 SXM", "error": null,
                        "check": {"outcome": {"accepted": true, "rejected": [], "time": {"ratio": 0.95}}}}]
        })
    }

    #[test]
    fn a_check_report_of_the_reference_host_scores_about_one() {
        let c = Config::embedded();
        let read = check_figures(&report(), db()).unwrap();
        assert!(!read.simulated);
        let g = &read.host.gpus[0];
        assert_eq!(g.tensor_tflops, Some(829.9));
        assert_eq!(g.bandwidth_gbs, Some(4349.0));
        assert_eq!(g.proof, ProofStatus::Accepted { proves_model: true });
        assert!(matches!(
            read.host.cpu,
            Some(CpuFigures::Measured { cores: 16, .. })
        ));
        assert!(matches!(
            read.host.storage,
            Some(StorageFigures::Measured {
                capacity_gb: Some(c),
                ..
            }) if c == 275.0
        ));
        let s = score(&read.host, &c);
        // One proof, passed: reliability 1 (uptime and anomalies not known yet, not counted).
        assert!((s.reliability.factor - 1.0).abs() < 1e-12);
        assert!((s.score - 1.0).abs() < 0.01, "{}", s.score);
        assert!(read.notes.iter().any(|n| n.contains("self-challenge")));
    }

    #[test]
    fn figures_are_held_to_the_proven_models_datasheet() {
        let mut r = report();
        r["bench"]["gpus"][0]["gemm"][0]["tflops_median"] = json!(5000.0);
        r["bench"]["gpus"][0]["sweep"]["hbm_read_gbs"] = json!(9000.0);
        let read = check_figures(&r, db()).unwrap();
        assert_eq!(read.host.gpus[0].tensor_tflops, Some(989.4));
        assert_eq!(read.host.gpus[0].bandwidth_gbs, Some(4800.0));
        assert_eq!(
            read.notes
                .iter()
                .filter(|n| n.contains("held to the H200 SXM datasheet"))
                .count(),
            2
        );
    }

    #[test]
    fn wrong_results_and_failed_proofs_do_not_count() {
        let mut r = report();
        r["bench"]["gpus"][0]["gemm"][0]["check"]["wrong"] = json!(3);
        r["bench"]["gpus"][0]["sustained"]["nans"] = json!(1);
        r["bench"]["gpus"][0]["sweep"] = Value::Null;
        r["prove"][0]["check"]["outcome"]["accepted"] = json!(false);
        r["prove"][0]["check"]["outcome"]["time"]["ratio"] = json!(1.31);
        let read = check_figures(&r, db()).unwrap();
        let g = &read.host.gpus[0];
        assert_eq!(g.tensor_tflops, Some(789.2), "the FP16 figure still counts");
        assert_eq!(g.sustained_tflops, None);
        assert_eq!(
            g.bandwidth_gbs,
            Some(4229.9),
            "the copy stands in for the sweep"
        );
        assert_eq!(
            g.proof,
            ProofStatus::Failed {
                reason: "rejected at 1.31 of its time bound".into()
            }
        );
        let s = score(&read.host, &Config::embedded());
        assert_eq!(s.parts.gpu.value, 0.0);
        assert_eq!(s.reliability.proofs, 0.0);
        assert_eq!(s.score, 0.0);
    }

    #[test]
    fn an_unproven_or_suspect_or_unknown_gpu_counts_nothing() {
        let mut r = report();
        r["prove"] = json!([]);
        r["stages"][0]["summary"] = json!("skipped: a simulated host has no GPU to prove");
        r["simulated"] = json!(true);
        let read = check_figures(&r, db()).unwrap();
        assert!(read.simulated);
        assert_eq!(
            read.host.gpus[0].proof,
            ProofStatus::Missing {
                reason: "skipped: a simulated host has no GPU to prove".into()
            }
        );
        let mut r = report();
        r["inspect"]["inspection"]["gpus"][0]["verdict"] = json!("suspect");
        assert!(!check_figures(&r, db()).unwrap().host.gpus[0].genuine);
        let mut r = report();
        r["inspect"]["inspection"]["gpus"][0]["model"] = json!("Z9000");
        let read = check_figures(&r, db()).unwrap();
        assert!(!read.host.gpus[0].genuine);
        assert!(read
            .notes
            .iter()
            .any(|n| n.contains("not in the spec database")));
    }

    #[test]
    fn other_documents_are_refused() {
        for bad in [
            json!({}),
            json!({"schema": "pog.bench/1"}),
            json!({"schema": "pog.check/1"}),
            json!([1, 2]),
        ] {
            assert!(matches!(
                check_figures(&bad, db()),
                Err(ReportError::NotACheckReport(_))
            ));
        }
    }
}
