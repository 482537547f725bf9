//! The agent's signed reports: the ledger's kinds 2 (`inspection`) and 3 (`benchmark`), each
//! an envelope signed with the agent's own key whose body is
//! `pog_records::reports::InspectionSummary` or `BenchmarkFigures`, self-reported.
//!
//! The agent makes them once, when it starts ([`agent_reports`]): for each GPU it serves, a
//! summary of the inspection it ran at start ([`inspection_summary`]), and the figures of a
//! benchmark report it was given, when it was (`pog agent --bench-report FILE`: a saved
//! `pog bench --json` or `pog check --json`, [`SavedBench`], [`benchmark_figures`]). It does
//! not benchmark at start: that would hold the GPUs for minutes at every restart. It sends
//! the same signed envelopes after every registration ([`send_reports`]); the validator's
//! side is `pog_validator::reports`.

use pog_bench::gpu::GpuBench;
use pog_facts::Inventory;
use pog_inspect::{GpuVerdict, InspectReport, Severity};
use pog_net::http::PostError;
use pog_proof::wire::GpuClaim;
use pog_records::reports::{
    BenchmarkFigures, Figure, Finding, InspectionSummary, Provenance, BODY_VERSION,
};
use pog_records::SignedBody;
use pog_signed::{Envelope, GpuUuid, Identity, WireError};
use serde::Deserialize;
use std::time::Duration;

use pog_records::reports::{
    ReportReceipt, MAX_FIELD_BYTES, MAX_FIGURES, MAX_FINDINGS, MAX_REPORT_BYTES, MAX_TEXT_CHARS,
};

// ---------------------------------------------------------------------------------------------
// The agent: making the records.

/// A finding's severity as the body schema spells it.
fn severity_name(s: Severity) -> &'static str {
    match s {
        Severity::Info => "info",
        Severity::Warn => "warning",
        Severity::Fail => "fail",
    }
}

/// `text` cut to at most `max` characters (an ellipsis marks a cut).
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The summary of `report`'s inspection for the served GPU `gpu`: the model and bus id it was
/// registered with, the driver version (NVML's, else the kernel module's, else CUDA's), the
/// findings about this GPU or the whole host (most severe first, at most `max_findings`, at
/// least one, and never more than [`MAX_FINDINGS`]; past that, a last `report.truncated`
/// finding counts the rest), and a verdict: `fail` when inspection found the GPU suspect or a
/// failing finding concerns it, `warn` when it is unverified or a warning concerns it, `pass`
/// otherwise. The verdict weighs every finding, kept or counted.
pub fn inspection_summary(
    report: &InspectReport,
    gpu: &GpuClaim,
    max_findings: usize,
    recorded_at_ms: u64,
) -> InspectionSummary {
    let keep = max_findings.clamp(1, MAX_FINDINGS);
    let summary = report
        .inspection
        .gpus
        .iter()
        .find(|g| g.uuid.as_deref() == Some(gpu.uuid.as_str()));
    let concerns = |f: &&pog_inspect::Finding| {
        f.gpu
            .is_none_or(|bus| bus.to_string().eq_ignore_ascii_case(&gpu.bus_id))
    };
    let relevant: Vec<&pog_inspect::Finding> =
        report.inspection.findings.iter().filter(concerns).collect();
    let worst = relevant
        .iter()
        .map(|f| f.severity)
        .max()
        .unwrap_or(Severity::Info);
    let verdict = match (summary.map(|s| s.verdict), worst) {
        (Some(GpuVerdict::Suspect), _) | (None, _) | (_, Severity::Fail) => "fail",
        (Some(GpuVerdict::Unverified), _) | (_, Severity::Warn) => "warn",
        (Some(GpuVerdict::Genuine), Severity::Info) => "pass",
    };
    let mut findings: Vec<Finding> = relevant
        .iter()
        .take(keep)
        .map(|f| Finding {
            code: cut(&f.rule, MAX_FIELD_BYTES / 4),
            severity: severity_name(f.severity).into(),
            message: cut(&f.message, MAX_TEXT_CHARS),
        })
        .collect();
    if relevant.len() > keep {
        findings.pop();
        findings.push(truncated_finding(relevant.len() - findings.len()));
    }
    let inv = &report.inventory;
    let driver_version = inv
        .nvml
        .value()
        .and_then(|n| n.driver_version.value().cloned())
        .or_else(|| {
            inv.proc_driver
                .value()
                .and_then(|p| p.version.value().cloned())
        })
        .or_else(|| {
            inv.cuda
                .value()
                .and_then(|c| c.driver_version.value().map(|v| format!("CUDA {v}")))
        })
        .unwrap_or_else(|| "unknown".into());
    InspectionSummary {
        version: BODY_VERSION,
        gpu_uuid: gpu.uuid.clone(),
        model: gpu.model.clone(),
        bus_id: gpu.bus_id.clone(),
        driver_version: cut(&driver_version, MAX_FIELD_BYTES / 2),
        verdict: verdict.into(),
        findings,
        provenance: Provenance::SelfReported,
        recorded_at_ms,
    }
}

fn truncated_finding(left_out: usize) -> Finding {
    Finding {
        code: "report.truncated".into(),
        severity: "info".into(),
        message: format!(
            "{left_out} more finding(s) left out of this record: `pog inspect` on the host lists them all"
        ),
    }
}

/// A benchmark report the agent was given: a saved `pog bench --json` (or `pog check --json`,
/// whose `bench` it reads).
#[derive(Debug, Clone)]
pub struct SavedBench {
    /// The suite that ran ("quick", "standard", "full").
    pub suite: String,
    /// Whether it ran on the simulated test double.
    pub simulated: bool,
    /// Each GPU's figures, by CUDA ordinal (`GpuBench::index`).
    pub gpus: Vec<GpuBench>,
    /// When the report was saved (the file's modification time), Unix ms, when known.
    pub saved_at_ms: Option<u64>,
}

/// Why a saved benchmark report cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum BenchFileError {
    /// The file could not be read.
    #[error("cannot read the benchmark report {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The file is larger than a report can be (its size in bytes; at most 64 MiB is read).
    #[error("the benchmark report is {0} bytes; a saved `pog bench --json` is far smaller (at most 64 MiB is read)")]
    TooLarge(u64),
    /// The file is not JSON of a report.
    #[error("the benchmark report is not JSON of `pog bench --json`: {0}")]
    Json(#[from] serde_json::Error),
    /// The report is of another schema (named).
    #[error("the file is a {0:?} report, not `pog bench --json` (schema pog.bench/1) or `pog check --json` (pog.check/1)")]
    Schema(String),
    /// The saved run could not run and measured nothing (why is given).
    #[error("the saved run did not measure anything (pog could not run: {0})")]
    NotRun(String),
}

const MAX_BENCH_FILE_BYTES: u64 = 64 << 20;

impl SavedBench {
    /// Reads a saved report from `path`; its modification time is when it was saved.
    pub fn read(path: &std::path::Path) -> Result<SavedBench, BenchFileError> {
        let read_error = |source| BenchFileError::Read {
            path: path.display().to_string(),
            source,
        };
        let meta = std::fs::metadata(path).map_err(read_error)?;
        if meta.len() > MAX_BENCH_FILE_BYTES {
            return Err(BenchFileError::TooLarge(meta.len()));
        }
        let bytes = std::fs::read(path).map_err(read_error)?;
        let saved_at_ms = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as u64);
        SavedBench::parse(&bytes, saved_at_ms)
    }

    /// Parses a saved report's JSON.
    pub fn parse(bytes: &[u8], saved_at_ms: Option<u64>) -> Result<SavedBench, BenchFileError> {
        #[derive(Deserialize)]
        struct Head {
            schema: String,
            #[serde(default)]
            error: Option<String>,
            #[serde(default)]
            bench: Option<serde_json::Value>,
        }
        #[derive(Deserialize)]
        struct Report {
            suite: pog_bench::Suite,
            origin: pog_facts::Origin,
            gpus: Vec<GpuBench>,
        }
        let mut value: serde_json::Value = serde_json::from_slice(bytes)?;
        let head: Head = serde_json::from_value(value.clone())?;
        let is = |command: &str| {
            head.schema
                .strip_prefix(command)
                .is_some_and(|v| v.starts_with('/'))
        };
        if let Some(error) = head.error {
            return Err(BenchFileError::NotRun(error));
        }
        if is("pog.check") {
            value = head
                .bench
                .ok_or_else(|| BenchFileError::NotRun("no bench in the check report".into()))?;
        } else if !is("pog.bench") {
            return Err(BenchFileError::Schema(head.schema));
        }
        let report: Report = serde_json::from_value(value)?;
        Ok(SavedBench {
            suite: report.suite.to_string(),
            simulated: matches!(report.origin, pog_facts::Origin::Simulated { .. }),
            gpus: report.gpus,
            saved_at_ms,
        })
    }
}

/// Why a served GPU gets no benchmark record from a saved report.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoFigures {
    /// CUDA lists no device at the GPU's PCI address, so no ordinal of the report is its.
    #[error("GPU {uuid}: CUDA does not list a device at its bus id {bus_id}, so the saved report's figures cannot be matched to it")]
    NoCudaDevice {
        /// The served GPU.
        uuid: GpuUuid,
        /// Its PCI address as the agent claims it.
        bus_id: String,
    },
    /// The report has no figures for the GPU's CUDA ordinal.
    #[error("GPU {uuid}: the saved report has no figures for CUDA device {ordinal}")]
    NotMeasured {
        /// The served GPU.
        uuid: GpuUuid,
        /// Its CUDA ordinal.
        ordinal: u32,
    },
    /// The report measured another model at the GPU's CUDA ordinal.
    #[error("GPU {uuid}: the saved report's CUDA device {ordinal} is a {measured}, not the {claimed} this agent serves there (another host, or the devices were numbered differently)")]
    OtherModel {
        /// The served GPU.
        uuid: GpuUuid,
        /// Its CUDA ordinal.
        ordinal: u32,
        /// The model the report measured there.
        measured: String,
        /// The model the agent serves there.
        claimed: String,
    },
    /// Every figure the report holds for the GPU is without a value.
    #[error("GPU {uuid}: the saved report holds no figure with a value for it")]
    Empty {
        /// The served GPU.
        uuid: GpuUuid,
    },
}

/// A bench verdict as the figures' methods spell it.
fn verdict_name(v: pog_bench::Verdict) -> &'static str {
    match v {
        pog_bench::Verdict::Info => "not judged",
        pog_bench::Verdict::Pass => "judged pass",
        pog_bench::Verdict::Warn => "judged warn",
        pog_bench::Verdict::Fail => "judged FAIL",
    }
}

/// The figures of one GPU's benchmarks, with units and how each was measured: every GEMM
/// with a median and no wrong sampled output, every copy, the bandwidth sweep's plateaus, the
/// sustained run and the memory test.
fn figures_of(g: &GpuBench, provenance_note: &str) -> Vec<Figure> {
    let mut out = Vec::new();
    let mut push = |name: String, value: Option<f64>, unit: &str, method: String| {
        if let Some(value) = value.filter(|v| v.is_finite()) {
            out.push(Figure {
                name,
                value,
                unit: unit.into(),
                method: cut(&format!("{method}{provenance_note}"), MAX_TEXT_CHARS),
            });
        }
    };
    for m in &g.gemm {
        let Some(check) = m.check.as_ref().filter(|c| c.wrong == 0) else {
            continue; // a GEMM with wrong outputs (or none checked) measured nothing
        };
        let precision = m.precision.to_string().to_ascii_lowercase();
        let unit = if m.precision == pog_spec::Precision::Int8 {
            "TOPS"
        } else {
            "TFLOPS"
        };
        push(
            format!("gemm_{precision}_n{}_{}", m.size, unit.to_ascii_lowercase()),
            m.tflops_median,
            unit,
            format!(
                "{}³ {} GEMM, median of {} timed runs after {} warm-up{}; {} sampled outputs checked against the f64 reference, none wrong; {}",
                m.size,
                m.precision,
                m.iterations,
                m.warmup,
                if m.run_rest_ms > 0 {
                    format!(", each after a {} ms rest and one untimed run", m.run_rest_ms)
                } else {
                    String::new()
                },
                check.checked,
                verdict_name(m.judgement.verdict)
            ),
        );
    }
    for c in &g.copies {
        let kind = serde_json::to_value(c.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_else(|| "copy".into());
        push(
            format!("copy_{kind}_gbs"),
            c.gbs_median,
            "GB/s",
            format!(
                "{} MiB {}, median of {} timed runs; {}",
                c.bytes >> 20,
                kind.replace('_', " "),
                c.iterations,
                verdict_name(c.judgement.verdict)
            ),
        );
    }
    if let Some(s) = &g.sweep {
        push(
            "l2_read_gbs".into(),
            s.l2_read_gbs,
            "GB/s",
            "best read bandwidth of pog's sweep kernel over buffers of 16 MiB or less (L2)".into(),
        );
        push(
            "hbm_read_gbs".into(),
            s.hbm_read_gbs,
            "GB/s",
            "median read bandwidth of pog's sweep kernel over buffers of 1 GiB or more (HBM)"
                .into(),
        );
        push(
            "hbm_write_gbs".into(),
            s.hbm_write_gbs,
            "GB/s",
            "median write bandwidth of pog's sweep kernel over buffers of 1 GiB or more (HBM)"
                .into(),
        );
    }
    if let Some(s) = &g.sustained {
        let precision = s.precision.to_string().to_ascii_lowercase();
        push(
            format!("sustained_{precision}_n{}_tflops", s.size),
            s.tflops.map(|t| t.median),
            if s.precision == pog_spec::Precision::Int8 {
                "TOPS"
            } else {
                "TFLOPS"
            },
            format!(
                "{}³ {} GEMM back to back for {:.0} s, median of {} iterations; {} faulty iteration(s), {} NaN(s); {}",
                s.size,
                s.precision,
                s.seconds,
                s.iterations,
                s.faulty_iterations,
                s.nans,
                verdict_name(s.judgement.verdict)
            ),
        );
    }
    if let Some(run) = g
        .memtest
        .as_ref()
        .and_then(|m| m.run.as_ref().map(|r| (m, r)))
    {
        let (m, run) = run;
        let bad: u64 = run.patterns.iter().map(|p| p.bad_words).sum();
        push(
            "memtest_bad_words".into(),
            Some(bad as f64),
            "words",
            format!(
                "{} MiB of device memory written and read back with {} pattern(s); {}",
                run.bytes_tested >> 20,
                run.patterns.len(),
                verdict_name(m.judgement.verdict)
            ),
        );
    }
    out
}

/// The benchmark figures of `saved` for the served GPU `gpu`: the report's GPU whose CUDA
/// ordinal is the one this host's CUDA gives the GPU's bus id (`inventory`), which must have
/// measured the same model. At most [`MAX_FIGURES`].
pub fn benchmark_figures(
    saved: &SavedBench,
    inventory: &Inventory,
    gpu: &GpuClaim,
    recorded_at_ms: u64,
) -> Result<BenchmarkFigures, NoFigures> {
    let ordinal = inventory
        .cuda
        .value()
        .and_then(|c| {
            c.devices.iter().find(|d| {
                d.pci_bus_id
                    .value()
                    .is_some_and(|b| b.to_string().eq_ignore_ascii_case(&gpu.bus_id))
            })
        })
        .map(|d| d.ordinal)
        .ok_or_else(|| NoFigures::NoCudaDevice {
            uuid: gpu.uuid.clone(),
            bus_id: gpu.bus_id.clone(),
        })?;
    let measured = saved
        .gpus
        .iter()
        .find(|g| g.index == ordinal as usize)
        .ok_or_else(|| NoFigures::NotMeasured {
            uuid: gpu.uuid.clone(),
            ordinal,
        })?;
    if let Some(model) = measured.model.as_ref().filter(|m| **m != gpu.model) {
        return Err(NoFigures::OtherModel {
            uuid: gpu.uuid.clone(),
            ordinal,
            measured: model.clone(),
            claimed: gpu.model.clone(),
        });
    }
    let note = match saved.saved_at_ms {
        Some(at) => format!(
            " (pog bench, report saved {})",
            pog_market::evidence::utc(at)
        ),
        None => " (pog bench)".into(),
    };
    let mut figures = figures_of(measured, &note);
    figures.truncate(MAX_FIGURES);
    if figures.is_empty() {
        return Err(NoFigures::Empty {
            uuid: gpu.uuid.clone(),
        });
    }
    Ok(BenchmarkFigures {
        version: BODY_VERSION,
        gpu_uuid: gpu.uuid.clone(),
        suite: saved.suite.clone(),
        figures,
        provenance: Provenance::SelfReported,
        recorded_at_ms,
    })
}

/// Why the agent could not make its records.
#[derive(Debug, thiserror::Error)]
pub enum ReportBuildError {
    /// The report was measured on real GPUs and the agent serves simulated ones, or the
    /// other way round.
    #[error("the benchmark report was measured on {}, but this agent serves {}: a report of another kind of host says nothing about these GPUs", if *.bench_simulated { "the simulated test double" } else { "real GPUs" }, if *.bench_simulated { "real GPUs" } else { "the simulated test double" })]
    OriginMismatch {
        /// Whether the report was measured on the simulated test double.
        bench_simulated: bool,
    },
    /// A record could not be signed or encoded.
    #[error("signing a record: {0}")]
    Wire(#[from] WireError),
    /// A record stays larger than a report may be, even cut down.
    #[error("the {kind} record of GPU {uuid} does not fit in {MAX_REPORT_BYTES} bytes")]
    TooLarge {
        /// The record's kind (`inspection` or `benchmark`).
        kind: &'static str,
        /// The GPU it is about.
        uuid: GpuUuid,
    },
}

/// What the agent sends after each registration.
#[derive(Debug, Clone, Default)]
pub struct AgentReports {
    /// Signed envelopes: each served GPU's inspection summary, then its benchmark figures
    /// where there are some.
    pub envelopes: Vec<Envelope>,
    /// Served GPUs the saved benchmark report gave no figures for, and why.
    pub no_figures: Vec<NoFigures>,
}

/// Seals the first of `make(n)` for `n` from the end of `items` down to its start (a body
/// carrying that many findings or figures) whose envelope fits in [`MAX_REPORT_BYTES`]: the
/// agent drops the least severe findings, or the last figures, rather than be refused.
fn seal_fitting<T: SignedBody>(
    identity: &Identity,
    uuid: &GpuUuid,
    items: std::ops::RangeInclusive<usize>,
    make: impl Fn(usize) -> T,
) -> Result<Envelope, ReportBuildError> {
    let kind = T::KIND.wire_kind();
    for n in items.rev() {
        let envelope = identity.seal(kind, &make(n))?;
        let size = serde_json::to_vec(&envelope)
            .map_err(WireError::Encode)?
            .len();
        if size <= MAX_REPORT_BYTES {
            return Ok(envelope);
        }
    }
    Err(ReportBuildError::TooLarge {
        kind,
        uuid: uuid.clone(),
    })
}

/// The agent's signed records for the GPUs it serves, made at `now_ms` from its inspection
/// `report` and, when given, a saved benchmark report (which must come from the same kind of
/// host: simulated or real).
pub fn agent_reports(
    identity: &Identity,
    report: &InspectReport,
    gpus: &[GpuClaim],
    bench: Option<&SavedBench>,
    now_ms: u64,
) -> Result<AgentReports, ReportBuildError> {
    let simulated = matches!(report.inventory.origin, pog_facts::Origin::Simulated { .. });
    if let Some(b) = bench.filter(|b| b.simulated != simulated) {
        return Err(ReportBuildError::OriginMismatch {
            bench_simulated: b.simulated,
        });
    }
    let mut out = AgentReports::default();
    for gpu in gpus {
        out.envelopes
            .push(seal_fitting(identity, &gpu.uuid, 1..=MAX_FINDINGS, |n| {
                inspection_summary(report, gpu, n, now_ms)
            })?);
        let Some(bench) = bench else { continue };
        match benchmark_figures(bench, &report.inventory, gpu, now_ms) {
            Ok(all) => out.envelopes.push(seal_fitting(
                identity,
                &gpu.uuid,
                1..=all.figures.len(),
                |n| BenchmarkFigures {
                    figures: all.figures[..n].to_vec(),
                    ..all.clone()
                },
            )?),
            Err(why) => out.no_figures.push(why),
        }
    }
    Ok(out)
}

/// Why sending one report failed.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// Posting the report failed (see [`PostError`]).
    #[error(transparent)]
    Post(#[from] PostError),
    /// The validator answered 200 with something that does not decode as a [`ReportReceipt`].
    #[error("the validator's answer to a report is not a receipt: {0}")]
    Answer(serde_json::Error),
}

/// Sends each report to the validator at `validator_url` (`POST /v1/reports`), one after
/// another; the validator's receipt, or why there is none, for each. Nothing is sent when the
/// client (no redirects) cannot be built.
pub async fn send_reports(
    validator_url: &str,
    reports: &[Envelope],
) -> Result<Vec<Result<ReportReceipt, SendError>>, pog_net::http::BuildClientError> {
    let client = pog_net::http::ClientSettings::new("report").build()?;
    let url = format!("{}/v1/reports", validator_url.trim_end_matches('/'));
    let mut out = Vec::with_capacity(reports.len());
    for envelope in reports {
        let sent =
            pog_net::http::post_counted(&client, &url, envelope, Duration::from_secs(30), 64 << 10)
                .await;
        out.push(match sent {
            Ok((_, answer)) => serde_json::from_slice(&answer).map_err(SendError::Answer),
            Err(e) => Err(e.into()),
        });
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// The validator: taking them.

#[cfg(test)]
mod tests {
    use super::*;
    use pog_bench::{BenchOptions, Suite};
    use pog_ledger::entry::Entry;
    use pog_signed::{PublicKey, RecordKind};
    use pog_sim::SimPlatform;

    /// A simulated host: its inspection, the GPUs an agent serves, and `pog bench --json` of it.
    fn host(profile: &str) -> (InspectReport, Vec<GpuClaim>, Vec<u8>) {
        let platform = SimPlatform::from_profile(profile).unwrap();
        let report = pog_inspect::run(&platform);
        let gpus: Vec<GpuClaim> = report
            .inspection
            .gpus
            .iter()
            .map(|g| GpuClaim {
                uuid: g.uuid.clone().unwrap().parse().unwrap(),
                model: g.model.clone().unwrap(),
                bus_id: g.bus_id.unwrap().to_string(),
                simulated: true,
            })
            .collect();
        let options = BenchOptions {
            no_host: true,
            ..BenchOptions::suite(Suite::Quick)
        };
        let bench = pog_bench::measure(&platform, &report.inventory, &options, &mut ()).unwrap();
        let mut json = serde_json::to_value(&bench).unwrap();
        json["schema"] = "pog.bench/1".into();
        json["verdict"] = "pass".into();
        (report, gpus, serde_json::to_vec(&json).unwrap())
    }

    #[test]
    fn an_agent_reports_its_inspection_and_saved_figures_per_gpu() {
        let (report, gpus, bench) = host("H200 SXM x2");
        assert_eq!(gpus.len(), 2);
        let saved = SavedBench::parse(&bench, Some(1_796_000_000_000)).unwrap();
        assert!(saved.simulated);
        assert_eq!(saved.suite, "quick");
        let agent = Identity::from_seed([3; 32]);
        let made = agent_reports(&agent, &report, &gpus, Some(&saved), 1_796_000_001_000).unwrap();
        assert!(made.no_figures.is_empty(), "{:?}", made.no_figures);
        let kinds: Vec<&str> = made.envelopes.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(
            kinds,
            [
                RecordKind::Inspection.wire_kind(),
                RecordKind::Benchmark.wire_kind(),
                RecordKind::Inspection.wire_kind(),
                RecordKind::Benchmark.wire_kind()
            ]
        );
        for (envelope, gpu) in made.envelopes.chunks(2).zip(&gpus) {
            let bytes = serde_json::to_vec(&envelope[0]).unwrap();
            assert!(bytes.len() <= MAX_REPORT_BYTES);
            let (s, signer): (InspectionSummary, PublicKey) =
                pog_signed::decode(&bytes, RecordKind::Inspection.wire_kind()).unwrap();
            assert_eq!(signer, agent.public_key());
            assert_eq!(
                (&s.gpu_uuid, &s.model, &s.bus_id),
                (&gpu.uuid, &gpu.model, &gpu.bus_id)
            );
            assert_eq!(s.provenance, Provenance::SelfReported);
            assert!(["pass", "warn"].contains(&s.verdict.as_str()), "{s:?}");
            s.check(1_796_000_001_000).unwrap();
            let bytes = serde_json::to_vec(&envelope[1]).unwrap();
            let (b, _): (BenchmarkFigures, PublicKey) =
                pog_signed::decode(&bytes, RecordKind::Benchmark.wire_kind()).unwrap();
            assert_eq!(b.gpu_uuid, gpu.uuid);
            b.check(1_796_000_001_000).unwrap();
            let names: Vec<&str> = b.figures.iter().map(|f| f.name.as_str()).collect();
            assert!(names.contains(&"gemm_bf16_n8192_tflops"), "{names:?}");
            assert!(names.contains(&"copy_device_to_device_gbs"), "{names:?}");
            assert!(names.contains(&"hbm_read_gbs"), "{names:?}");
            let gemm = b
                .figures
                .iter()
                .find(|f| f.name == "gemm_bf16_n8192_tflops")
                .unwrap();
            assert_eq!(gemm.unit, "TFLOPS");
            assert!(gemm.value > 100.0, "{gemm:?}");
            assert!(
                gemm.method.contains("median of") && gemm.method.contains("2026-"),
                "{}",
                gemm.method
            );
            // Every record makes a ledger entry with the agent's signature.
            for e in envelope {
                let entry = Entry::from_envelope(e).unwrap();
                assert_eq!(entry.signer_key(), agent.public_key());
            }
        }
        // Without a saved report: inspection records only.
        let made = agent_reports(&agent, &report, &gpus, None, 1).unwrap();
        assert_eq!(made.envelopes.len(), 2);
    }

    #[test]
    fn a_gemm_timed_from_rest_says_so_in_its_method() {
        let platform = SimPlatform::from_profile("H200 SXM").unwrap();
        let report = pog_inspect::run(&platform);
        let mut options = BenchOptions {
            no_host: true,
            ..BenchOptions::suite(Suite::Quick)
        };
        options.overrides.sizes = Some(vec![4096, 16384]);
        options.overrides.precisions = Some(vec![pog_spec::Precision::Bf16]);
        options.overrides.sustained_seconds = Some(0.0);
        options.overrides.copy_bytes = Some(1 << 20);
        let bench = pog_bench::measure(&platform, &report.inventory, &options, &mut ()).unwrap();
        let figures = figures_of(&bench.gpus[0], "");
        let method = |name: &str| {
            figures
                .iter()
                .find(|f| f.name == name)
                .unwrap_or_else(|| panic!("{name} in {figures:?}"))
                .method
                .clone()
        };
        let long = method("gemm_bf16_n16384_tflops");
        assert!(
            long.contains("each after a 300 ms rest and one untimed run"),
            "{long}"
        );
        let short = method("gemm_bf16_n4096_tflops");
        assert!(!short.contains("rest"), "{short}");
    }

    #[test]
    fn a_saved_report_of_another_host_gives_no_figures() {
        let (report, gpus, bench) = host("H200 SXM");
        let mut saved = SavedBench::parse(&bench, None).unwrap();
        // Another kind of host altogether.
        saved.simulated = false;
        let agent = Identity::from_seed([3; 32]);
        assert!(matches!(
            agent_reports(&agent, &report, &gpus, Some(&saved), 1),
            Err(ReportBuildError::OriginMismatch {
                bench_simulated: false
            })
        ));
        saved.simulated = true;
        // Another model measured at the GPU's ordinal.
        saved.gpus[0].model = Some("H100 SXM".into());
        let made = agent_reports(&agent, &report, &gpus, Some(&saved), 1).unwrap();
        assert_eq!(made.envelopes.len(), 1, "the inspection only");
        assert!(matches!(made.no_figures[0], NoFigures::OtherModel { .. }));
        // No figures for the GPU's ordinal.
        saved.gpus.clear();
        let made = agent_reports(&agent, &report, &gpus, Some(&saved), 1).unwrap();
        assert!(matches!(
            made.no_figures[0],
            NoFigures::NotMeasured { ordinal: 0, .. }
        ));
    }

    #[test]
    fn saved_reports_are_read_with_clear_errors() {
        let (_, _, bench) = host("H200 SXM");
        let mut check: serde_json::Value = serde_json::json!({"schema": "pog.check/1"});
        check["bench"] = serde_json::from_slice(&bench).unwrap();
        let saved = SavedBench::parse(&serde_json::to_vec(&check).unwrap(), None).unwrap();
        assert_eq!(saved.gpus.len(), 1, "pog check's bench is read too");
        let inspect = br#"{"schema":"pog.inspect/1","verdict":"pass"}"#;
        assert!(matches!(
            SavedBench::parse(inspect, None),
            Err(BenchFileError::Schema(s)) if s == "pog.inspect/1"
        ));
        let failed = br#"{"schema":"pog.bench/1","verdict":"error","error":"--gpus 3: this host has 1 CUDA device(s)"}"#;
        assert!(
            matches!(SavedBench::parse(failed, None), Err(BenchFileError::NotRun(e)) if e.contains("--gpus 3"))
        );
        assert!(matches!(
            SavedBench::parse(b"{not json", None),
            Err(BenchFileError::Json(_))
        ));
        assert!(matches!(
            SavedBench::parse(br#"{"schema":"pog.bench/1","suite":"quick"}"#, None),
            Err(BenchFileError::Json(_))
        ));
        let missing = SavedBench::read(std::path::Path::new("/nonexistent/bench.json"))
            .unwrap_err()
            .to_string();
        assert!(missing.contains("/nonexistent/bench.json"), "{missing}");
    }

    #[test]
    fn long_inspections_are_trimmed_to_fit() {
        let (mut report, gpus, _) = host("H200 SXM");
        let bus = report.inspection.gpus[0].bus_id;
        for i in 0..200 {
            report.inspection.findings.push(pog_inspect::Finding::new(
                &format!("test.rule{i}"),
                Severity::Warn,
                if i % 2 == 0 { bus } else { None },
                "x".repeat(2000),
            ));
        }
        let relevant = 200
            + inspection_summary(&report, &gpus[0], MAX_FINDINGS, 1)
                .findings
                .len()
            - MAX_FINDINGS;
        let s = inspection_summary(&report, &gpus[0], MAX_FINDINGS, 1);
        assert_eq!(s.findings.len(), MAX_FINDINGS);
        assert_eq!(s.findings.last().unwrap().code, "report.truncated");
        assert_eq!(s.verdict, "warn");
        assert!(s.findings[0].message.chars().count() <= MAX_TEXT_CHARS);
        // Over the size cap, the agent keeps fewer findings, and still counts the rest.
        let made = agent_reports(&Identity::from_seed([3; 32]), &report, &gpus, None, 1).unwrap();
        let sealed = serde_json::to_vec(&made.envelopes[0]).unwrap();
        assert!(sealed.len() <= MAX_REPORT_BYTES, "{}", sealed.len());
        let (kept, _): (InspectionSummary, PublicKey) =
            pog_signed::decode(&sealed, RecordKind::Inspection.wire_kind()).unwrap();
        assert!(
            (24..MAX_FINDINGS).contains(&kept.findings.len()),
            "{}",
            kept.findings.len()
        );
        let last = kept.findings.last().unwrap();
        assert_eq!(last.code, "report.truncated");
        let left_out = relevant - (kept.findings.len() - 1);
        assert!(
            last.message
                .starts_with(&format!("{left_out} more finding(s)")),
            "{left_out}: {}",
            last.message
        );
        // A failing finding about another GPU does not fail this one; one about the host does.
        let mut other = report.clone();
        other.inspection.findings = vec![pog_inspect::Finding::new(
            "test.other",
            Severity::Fail,
            Some(pog_facts::BusId {
                domain: 0,
                bus: 0xee,
                device: 0,
                function: 0,
            }),
            "another GPU",
        )];
        assert_eq!(
            inspection_summary(&other, &gpus[0], MAX_FINDINGS, 1).verdict,
            "pass"
        );
        other.inspection.findings[0].gpu = None;
        assert_eq!(
            inspection_summary(&other, &gpus[0], MAX_FINDINGS, 1).verdict,
            "fail"
        );
    }
}
