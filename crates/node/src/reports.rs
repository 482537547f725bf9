//! Agent-signed records: the ledger's kinds 2 (`inspection`) and 3 (`benchmark`), each a
//! `pog_proof::wire` envelope signed with the agent's own key whose body is
//! `pog_records::reports::InspectionSummary` or `BenchmarkFigures`, self-reported.
//!
//! - The agent makes them once, when it starts ([`agent_reports`]): for each GPU it serves, a
//!   summary of the inspection it ran at start ([`inspection_summary`]), and the figures of a
//!   benchmark report it was given, when it was (`pog agent --bench-report FILE`: a saved
//!   `pog bench --json` or `pog check --json`, [`SavedBench`], [`benchmark_figures`]). It does
//!   not benchmark at start: that would hold the GPUs for minutes at every restart. It sends
//!   the same signed envelopes after every registration ([`send_reports`]).
//! - The validator takes them at `POST /v1/reports` ([`Validator::accept_report`]): only from
//!   the agent key the GPU is registered to, of one of the two kinds, with a body that parses
//!   strictly and holds sane values, at most [`MAX_REPORT_BYTES`]; a report whose content it
//!   holds already (the same signer, kind and body, whatever its `recorded_at_ms` or
//!   spelling: [`content_id`]) is answered again without a second record; new records are
//!   charged their bytes to an hourly budget of their GPU's and one of their source address's,
//!   so that what the log takes grows with registered GPUs, not with keys (which are free).
//!   Each is stored as it was signed (the agent's signature, never the validator's), the
//!   ledger first, then the registry.

use crate::clock::now_ms;
use crate::http::{ApiError, PostError};
use crate::locked::Locked;
use crate::validator::{Validator, ValidatorError};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use pog_bench::gpu::GpuBench;
use pog_facts::Inventory;
use pog_inspect::{GpuVerdict, InspectReport, Severity};
use pog_ledger::entry::{signed_bytes, Entry, EntryError};
use pog_proof::wire::GpuClaim;
use pog_records::reports::{
    BenchmarkFigures, Figure, Finding, InspectionSummary, Provenance, BODY_VERSION,
};
use pog_records::SignedBody;
use pog_signed::{Envelope, GpuUuid, Identity, PublicKey, RecordKind, WireError};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const _: () = assert!(RecordKind::Inspection as u8 == 2 && RecordKind::Benchmark as u8 == 3);

/// The largest report the validator takes: the envelope's JSON. A real H200's measure 0.8 KiB
/// (its inspection summary, two findings) and 6.7 KiB (the 25 figures of a standard
/// `pog bench`), so this leaves room for twice the figures or about thirty findings of full
/// length; the agent drops the least severe findings, or the last figures, to fit.
pub const MAX_REPORT_BYTES: usize = 16 << 10;

/// The least a new report is charged of its budgets, however small: a budget then bounds how
/// many records it buys (64 an hour per GPU at the default), not only their bytes.
pub const MIN_REPORT_CHARGE: usize = 1 << 10;

/// KiB of new reports each registered GPU may add per hour by default (a burst of that much,
/// refilled evenly). An agent's start costs each of its GPUs about 7.5 KiB (two records of
/// 16 KiB at most), and a restart that finds the same content costs nothing: eight starts
/// with new content an hour fit. At most 64 KiB × 25 = 1,600 KiB in any 24 hours per GPU.
pub const DEFAULT_REPORT_KIB_PER_GPU_PER_HOUR: u32 = 64;

/// KiB of new reports all the GPUs reported from one source address may add per hour by
/// default: about a thousand GPUs behind one address starting in the same hour (8 MiB).
pub const DEFAULT_REPORT_KIB_PER_SOURCE_PER_HOUR: u32 = 8 << 10;

/// How far in the future (validator's clock) a report's `recorded_at_ms` may be.
pub const CLOCK_SKEW_MS: u64 = crate::agent::CLOCK_SKEW_MS;

/// The most findings an inspection summary carries (most severe first; the rest counted).
pub const MAX_FINDINGS: usize = 64;
/// The most figures a benchmark record carries.
pub const MAX_FIGURES: usize = 256;
/// The longest finding message or figure method the agent writes, in characters.
const MAX_TEXT_CHARS: usize = 400;
/// The longest name, code, unit, model, bus id, driver version or suite the validator takes.
const MAX_FIELD_BYTES: usize = 128;
/// The longest message or method the validator takes.
const MAX_LONG_TEXT_BYTES: usize = 4096;

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
                "{}³ {} GEMM, median of {} timed runs after {} warm-up; {} sampled outputs checked against the f64 reference, none wrong; {}",
                m.size,
                m.precision,
                m.iterations,
                m.warmup,
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
) -> Result<Vec<Result<ReportReceipt, SendError>>, crate::http::BuildClientError> {
    let client = crate::http::ClientSettings::new("report").build()?;
    let url = format!("{}/v1/reports", validator_url.trim_end_matches('/'));
    let mut out = Vec::with_capacity(reports.len());
    for envelope in reports {
        let sent =
            crate::http::post_counted(&client, &url, envelope, Duration::from_secs(30), 64 << 10)
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

/// What the validator answers to a report it took (200).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportReceipt {
    /// The record's id among the GPU's records, from its content ([`content_id`]): the same
    /// content always has this id, whatever its `recorded_at_ms` or spelling.
    pub id: String,
    /// `inspection` or `benchmark`.
    pub kind: String,
    /// The GPU the record is about.
    pub gpu_uuid: GpuUuid,
    /// True when this request stored it; false when the validator already held it.
    pub recorded: bool,
    /// Its index in the validator's ledger, when this request appended it there.
    pub log_index: Option<u64>,
}

/// Why a report was refused. Each maps to an HTTP status ([`ReportError::status`]).
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The body is larger than [`MAX_REPORT_BYTES`] (its size in bytes).
    #[error("a report may be at most {MAX_REPORT_BYTES} bytes; this one is {0}")]
    TooLarge(usize),
    /// The body does not decode as an envelope.
    #[error("not a signed envelope: {0}")]
    Envelope(serde_json::Error),
    /// The envelope's kind is neither `inspection` nor `benchmark`.
    #[error("kind {0:?} is not a report: POST /v1/reports takes \"inspection\" and \"benchmark\" envelopes")]
    Kind(String),
    /// The envelope fails the wire checks (its signature, size or encoding).
    #[error(transparent)]
    Wire(WireError),
    /// A field of the body is out of bounds or malformed.
    #[error("the {kind} report's {field} {why}")]
    Invalid {
        /// The report's kind.
        kind: &'static str,
        /// The field refused.
        field: &'static str,
        /// What is wrong with it.
        why: String,
    },
    /// The GPU the report is about is not registered here.
    #[error("GPU {0} is not registered with this validator")]
    UnknownGpu(GpuUuid),
    /// The report is signed by another agent than the GPU's owner.
    #[error("GPU {uuid} is registered to agent {owner}, not to the report's signer {signer}")]
    NotOwner {
        /// The GPU.
        uuid: GpuUuid,
        /// The agent it is registered to.
        owner: PublicKey,
        /// The report's signer.
        signer: PublicKey,
    },
    /// The GPU has used its hourly budget of new reports.
    #[error("GPU {uuid} has used its budget of {kib_per_hour} KiB of new reports an hour; this one (charged {charge} bytes) fits in {retry_after_s} s: retry then")]
    GpuBudget {
        /// The GPU.
        uuid: GpuUuid,
        /// Its budget, KiB of new reports an hour.
        kib_per_hour: u64,
        /// What this report is charged, bytes.
        charge: usize,
        /// Seconds until the budget has room for it.
        retry_after_s: u64,
    },
    /// The GPUs reported from one address have used its hourly budget of new reports.
    #[error("the GPUs reported from {address} have used its budget of {kib_per_hour} KiB of new reports an hour; this one (charged {charge} bytes) fits in {retry_after_s} s: retry then")]
    SourceBudget {
        /// The source address reports came from.
        address: String,
        /// Its budget, KiB of new reports an hour.
        kib_per_hour: u64,
        /// What this report is charged, bytes.
        charge: usize,
        /// Seconds until the budget has room for it.
        retry_after_s: u64,
    },
    /// The budget table is full of budgets used within the hour: no new one can be tracked.
    #[error("the validator tracks the report budgets of {MAX_TRACKED} GPUs or addresses already, none unused for an hour: retry in {CROWDED_RETRY_S} s")]
    Crowded,
    /// Another request is recording the same report now.
    #[error("the same report is being recorded by another request")]
    InFlight,
    /// The report cannot be a ledger entry (too large for one, for instance).
    #[error("the report cannot be a ledger entry: {0}")]
    Entry(EntryError),
    /// The validator's store failed.
    #[error("storing the report failed: {0}")]
    Store(#[from] ValidatorError),
}

impl ReportError {
    /// The HTTP status that answers it.
    pub fn status(&self) -> StatusCode {
        match self {
            ReportError::TooLarge(_) | ReportError::Entry(EntryError::TooLarge(_)) => {
                StatusCode::PAYLOAD_TOO_LARGE
            }
            ReportError::Wire(WireError::Signature(_)) | ReportError::NotOwner { .. } => {
                StatusCode::FORBIDDEN
            }
            ReportError::Wire(WireError::TooLarge(_)) => StatusCode::PAYLOAD_TOO_LARGE,
            ReportError::UnknownGpu(_) => StatusCode::NOT_FOUND,
            ReportError::GpuBudget { .. } | ReportError::SourceBudget { .. } => {
                StatusCode::TOO_MANY_REQUESTS
            }
            ReportError::Crowded => StatusCode::SERVICE_UNAVAILABLE,
            ReportError::InFlight => StatusCode::CONFLICT,
            ReportError::Store(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ReportError::Envelope(_)
            | ReportError::Kind(_)
            | ReportError::Wire(_)
            | ReportError::Invalid { .. }
            | ReportError::Entry(_) => StatusCode::BAD_REQUEST,
        }
    }

    /// Seconds after which the same report may be taken (the `Retry-After` header), for a
    /// refusal that time undoes.
    pub fn retry_after_s(&self) -> Option<u64> {
        match self {
            ReportError::GpuBudget { retry_after_s, .. }
            | ReportError::SourceBudget { retry_after_s, .. } => Some(*retry_after_s),
            ReportError::Crowded => Some(CROWDED_RETRY_S),
            _ => None,
        }
    }
}

impl From<ReportError> for ApiError {
    fn from(e: ReportError) -> Self {
        ApiError::new(e.status(), e.to_string())
    }
}

/// Checks a text field: `min` to `max` bytes, no control characters.
fn text(
    kind: &'static str,
    field: &'static str,
    value: &str,
    allow_empty: bool,
    max: usize,
) -> Result<(), ReportError> {
    let invalid = |why: String| Err(ReportError::Invalid { kind, field, why });
    if value.is_empty() && !allow_empty {
        return invalid("is empty".into());
    }
    if value.len() > max {
        return invalid(format!("is {} bytes, over {max}", value.len()));
    }
    if value.chars().any(char::is_control) {
        return invalid("holds control characters".into());
    }
    Ok(())
}

fn common(
    kind: &'static str,
    version: u32,
    provenance: Provenance,
    recorded_at_ms: u64,
    now_ms: u64,
) -> Result<(), ReportError> {
    let invalid = |field, why: String| Err(ReportError::Invalid { kind, field, why });
    if version != BODY_VERSION {
        return invalid(
            "version",
            format!("is {version}; this validator reads version {BODY_VERSION}"),
        );
    }
    if provenance != Provenance::SelfReported {
        return invalid(
            "provenance",
            "is \"measured\": what an agent reports about its own host is self_reported".into(),
        );
    }
    if recorded_at_ms > now_ms.saturating_add(CLOCK_SKEW_MS) {
        return invalid(
            "recorded_at_ms",
            format!("{recorded_at_ms} is in the future (now {now_ms})"),
        );
    }
    Ok(())
}

/// Checks an inspection summary's values.
fn check_inspection(s: &InspectionSummary, now_ms: u64) -> Result<(), ReportError> {
    let k = RecordKind::Inspection.wire_kind();
    common(k, s.version, s.provenance, s.recorded_at_ms, now_ms)?;
    text(k, "model", &s.model, false, MAX_FIELD_BYTES)?;
    text(k, "bus_id", &s.bus_id, false, MAX_FIELD_BYTES)?;
    text(
        k,
        "driver_version",
        &s.driver_version,
        false,
        MAX_FIELD_BYTES,
    )?;
    if !["pass", "warn", "fail"].contains(&s.verdict.as_str()) {
        return Err(ReportError::Invalid {
            kind: k,
            field: "verdict",
            why: "is none of pass, warn, fail".into(),
        });
    }
    if s.findings.len() > 4 * MAX_FINDINGS {
        return Err(ReportError::Invalid {
            kind: k,
            field: "findings",
            why: format!("number {}, over {}", s.findings.len(), 4 * MAX_FINDINGS),
        });
    }
    for f in &s.findings {
        text(k, "finding code", &f.code, false, MAX_FIELD_BYTES)?;
        text(k, "finding message", &f.message, false, MAX_LONG_TEXT_BYTES)?;
        if !["info", "warning", "fail"].contains(&f.severity.as_str()) {
            return Err(ReportError::Invalid {
                kind: k,
                field: "finding severity",
                why: "is none of info, warning, fail".into(),
            });
        }
    }
    Ok(())
}

/// Checks benchmark figures' values.
fn check_benchmark(b: &BenchmarkFigures, now_ms: u64) -> Result<(), ReportError> {
    let k = RecordKind::Benchmark.wire_kind();
    common(k, b.version, b.provenance, b.recorded_at_ms, now_ms)?;
    text(k, "suite", &b.suite, false, MAX_FIELD_BYTES)?;
    if b.figures.is_empty() || b.figures.len() > MAX_FIGURES {
        return Err(ReportError::Invalid {
            kind: k,
            field: "figures",
            why: format!("number {}, not 1 to {MAX_FIGURES}", b.figures.len()),
        });
    }
    for f in &b.figures {
        text(k, "figure name", &f.name, false, MAX_FIELD_BYTES)?;
        text(k, "figure unit", &f.unit, false, MAX_FIELD_BYTES)?;
        text(k, "figure method", &f.method, false, MAX_LONG_TEXT_BYTES)?;
        if !f.value.is_finite() {
            return Err(ReportError::Invalid {
                kind: k,
                field: "figure value",
                why: format!("of {} is not a finite number", f.name),
            });
        }
    }
    Ok(())
}

/// A report that passed every check before the store: its envelope, signer, GPU, id and what
/// it is charged.
#[derive(Debug, Clone)]
pub struct CheckedReport {
    /// The signed envelope as received.
    pub envelope: Envelope,
    /// `inspection` or `benchmark`.
    pub kind: &'static str,
    /// The signer.
    pub signer: PublicKey,
    /// The GPU it is about.
    pub gpu_uuid: GpuUuid,
    /// `report-<hex content hash>` ([`content_id`]).
    pub id: String,
    /// What it costs of its GPU's and its source's hourly budgets: its bytes as received, at
    /// least [`MIN_REPORT_CHARGE`]. Never less than what the ledger takes for it (its entry,
    /// 64 bytes of hashes and 8 of index: [`LEDGER_OVERHEAD_BYTES`] more than the envelope at
    /// most).
    pub charge: usize,
}

/// What the ledger takes for an entry beyond its bytes: its leaf's and completed subtrees'
/// hashes (64 bytes an entry) and its index record (8). An entry (115 bytes of framing, the
/// UUID, the body) is never longer than the envelope it came in (at least 249 bytes around the
/// body), so a report takes at most its envelope and this much of the ledger's disk.
pub const LEDGER_OVERHEAD_BYTES: usize = 72;

/// A report's id: `report-` and the hex SHA-256 of 0x00 ‖ signer ‖ the signed bytes of its
/// kind and of its body as this validator encodes it with `recorded_at_ms` 0. Its content,
/// then: the same findings or figures sent again at another time (an agent restarting), or
/// with other whitespace, key order or number spelling, have the same id and are stored once.
pub fn content_id(signer: &[u8; 32], kind: RecordKind, timeless_body: &str) -> String {
    let mut content = signer.to_vec();
    content.extend_from_slice(&signed_bytes(kind, timeless_body));
    format!("report-{}", hex::encode(pog_merkle::leaf_hash(&content)))
}

/// A body's JSON as this validator encodes it (field order of the schema, no whitespace): the
/// canonical spelling [`content_id`] hashes.
fn canonical<T: Serialize>(body: &T) -> Result<String, ReportError> {
    serde_json::to_string(body).map_err(|e| ReportError::Wire(WireError::Encode(e)))
}

/// Checks a report's bytes as they arrive, before anything is stored: its size, the envelope,
/// its kind, the agent's signature (strict, weak keys refused), the body (parsed with unknown
/// fields refused, then its values), that `owner_of` (the registry) gives the GPU to the
/// signer, and that it makes a valid ledger entry; and names its content ([`content_id`]).
/// `now_ms` is the validator's clock.
pub fn check_report(
    bytes: &[u8],
    now_ms: u64,
    owner_of: impl FnOnce(&str) -> Result<Option<PublicKey>, ValidatorError>,
) -> Result<CheckedReport, ReportError> {
    if bytes.len() > MAX_REPORT_BYTES {
        return Err(ReportError::TooLarge(bytes.len()));
    }
    let envelope: Envelope = serde_json::from_slice(bytes).map_err(ReportError::Envelope)?;
    let (kind, gpu_uuid, signer, timeless) = match RecordKind::from_wire_kind(&envelope.kind) {
        Some(RecordKind::Inspection) => {
            let (mut s, signer): (InspectionSummary, PublicKey) =
                pog_signed::decode(bytes, RecordKind::Inspection.wire_kind())
                    .map_err(ReportError::Wire)?;
            check_inspection(&s, now_ms)?;
            s.recorded_at_ms = 0;
            let timeless = canonical(&s)?;
            (
                RecordKind::Inspection.wire_kind(),
                s.gpu_uuid,
                signer,
                timeless,
            )
        }
        Some(RecordKind::Benchmark) => {
            let (mut b, signer): (BenchmarkFigures, PublicKey) =
                pog_signed::decode(bytes, RecordKind::Benchmark.wire_kind())
                    .map_err(ReportError::Wire)?;
            check_benchmark(&b, now_ms)?;
            b.recorded_at_ms = 0;
            let timeless = canonical(&b)?;
            (
                RecordKind::Benchmark.wire_kind(),
                b.gpu_uuid,
                signer,
                timeless,
            )
        }
        _ => return Err(ReportError::Kind(envelope.kind.chars().take(64).collect())),
    };
    match owner_of(&gpu_uuid)? {
        None => return Err(ReportError::UnknownGpu(gpu_uuid)),
        Some(owner) if owner != signer => {
            return Err(ReportError::NotOwner {
                uuid: gpu_uuid,
                owner,
                signer,
            })
        }
        Some(_) => {}
    }
    let entry = Entry::from_envelope(&envelope).map_err(ReportError::Entry)?;
    let id = content_id(&entry.signer, entry.kind, &timeless);
    Ok(CheckedReport {
        envelope,
        kind,
        signer,
        gpu_uuid,
        id,
        charge: bytes.len().max(MIN_REPORT_CHARGE),
    })
}

/// Hourly budgets of report bytes: a token bucket per key (a GPU's UUID, or a source address
/// as text) holding at most an hour's budget, refilled evenly over the hour
/// ([`crate::buckets::TokenBuckets`], a token a byte).
struct Budgets(crate::buckets::TokenBuckets<String>);

/// GPUs (or addresses) a budget remembers at once; beyond this, full buckets (unused for an
/// hour) are forgotten first, and a report for a new one waits ([`ReportError::Crowded`]).
const MAX_TRACKED: usize = 100_000;

/// Seconds a report refused for [`ReportError::Crowded`] is told to wait.
const CROWDED_RETRY_S: u64 = 60;

impl Budgets {
    /// Budgets of `kib_per_hour` KiB an hour each, never less than one report of
    /// [`MAX_REPORT_BYTES`] (every report must fit some time).
    fn new(kib_per_hour: u32) -> Budgets {
        Budgets(crate::buckets::TokenBuckets::new(
            (f64::from(kib_per_hour) * 1024.0).max(MAX_REPORT_BYTES as f64),
            Duration::from_secs(3600),
            MAX_TRACKED,
        ))
    }

    /// The budget in KiB an hour, as refusals state it.
    fn kib_per_hour(&self) -> u64 {
        (self.0.capacity() / 1024.0) as u64
    }

    /// Whole seconds from `now` until `key` has `charge` bytes (0: it has them now); `None`
    /// when the budget tracks as many keys as it may and none can be forgotten.
    fn wait_s(&mut self, key: &str, charge: usize, now: Instant) -> Option<u64> {
        let wait = self.0.wait(&key.to_string(), charge as f64, now)?;
        Some(if wait.is_zero() {
            0
        } else {
            wait.as_secs_f64().ceil().max(1.0) as u64
        })
    }

    /// Spends `charge` bytes of `key`'s, which [`Budgets::wait_s`] found there.
    fn spend(&mut self, key: &str, charge: usize, now: Instant) {
        self.0.spend(&key.to_string(), charge as f64, now);
    }
}

/// Both budgets a new report is charged to.
struct ReportBudgets {
    /// Per registered GPU (by UUID): what the log takes grows with GPUs, not keys.
    gpus: Budgets,
    /// Per source address (an IPv4 address or IPv6 /64, as text): registered GPUs are claims,
    /// not proven hardware, so this bounds what one address's registrations can multiply.
    sources: Budgets,
}

/// The validator's state for reports: the hourly byte budgets per GPU and per source address,
/// and the reports being stored.
pub(crate) struct ReportDesk {
    budgets: Mutex<ReportBudgets>,
    in_flight: Mutex<HashSet<String>>,
}

impl ReportDesk {
    /// A desk whose budgets are `kib_per_gpu_hour` per GPU and `kib_per_source_hour` per source
    /// address ([`crate::validator::Config`]).
    pub(crate) fn new(kib_per_gpu_hour: u32, kib_per_source_hour: u32) -> ReportDesk {
        ReportDesk {
            budgets: Mutex::new(ReportBudgets {
                gpus: Budgets::new(kib_per_gpu_hour),
                sources: Budgets::new(kib_per_source_hour),
            }),
            in_flight: Mutex::new(HashSet::new()),
        }
    }
}

/// Forgets a report id from the in-flight set when the request handling it ends.
struct InFlight<'a> {
    set: &'a Mutex<HashSet<String>>,
    id: String,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.set.locked().remove(&self.id);
    }
}

impl Validator {
    /// Takes an agent's report (the bytes of a signed `inspection` or `benchmark` envelope):
    /// checked ([`check_report`]), then, unless the validator already holds its content,
    /// charged to its GPU's and its source address's hourly budgets and stored as the agent
    /// signed it (ledger first, then the registry, like the validator's own records). A report
    /// whose content is held already is answered with `recorded: false` and costs nothing: the
    /// agent sends its reports again after every registration, and again when it restarts.
    pub fn accept_report(
        &self,
        bytes: &[u8],
        source: std::net::IpAddr,
    ) -> Result<ReportReceipt, ReportError> {
        let checked = check_report(bytes, now_ms(), |uuid| {
            Ok(self.registry().gpu(uuid)?.map(|g| g.agent))
        })?;
        let receipt = |recorded, log_index| ReportReceipt {
            id: checked.id.clone(),
            kind: checked.kind.into(),
            gpu_uuid: checked.gpu_uuid.clone(),
            recorded,
            log_index,
        };
        let desk = &self.reports;
        if !desk.in_flight.locked().insert(checked.id.clone()) {
            return Err(ReportError::InFlight);
        }
        let _in_flight = InFlight {
            set: &desk.in_flight,
            id: checked.id.clone(),
        };
        if self
            .registry()
            .has_record(&checked.id)
            .map_err(ValidatorError::from)?
        {
            return Ok(receipt(false, None));
        }
        // Charged to both budgets or neither: a report one refuses costs the other nothing.
        let (now, charge) = (Instant::now(), checked.charge);
        let source = crate::serve::source_key(source).to_string();
        let mut budgets = desk.budgets.locked();
        let b = &mut *budgets;
        let (Some(gpu_wait), Some(source_wait)) = (
            b.gpus.wait_s(&checked.gpu_uuid, charge, now),
            b.sources.wait_s(&source, charge, now),
        ) else {
            return Err(ReportError::Crowded);
        };
        if gpu_wait > 0 && gpu_wait >= source_wait {
            return Err(ReportError::GpuBudget {
                uuid: checked.gpu_uuid.clone(),
                kib_per_hour: b.gpus.kib_per_hour(),
                charge,
                retry_after_s: gpu_wait,
            });
        }
        if source_wait > 0 {
            return Err(ReportError::SourceBudget {
                address: source,
                kib_per_hour: b.sources.kib_per_hour(),
                charge,
                retry_after_s: source_wait,
            });
        }
        b.gpus.spend(&checked.gpu_uuid, charge, now);
        b.sources.spend(&source, charge, now);
        drop(budgets);
        let log_index =
            self.store_envelope(&checked.envelope, &checked.id, &checked.gpu_uuid, false)?;
        tracing::info!(gpu = %checked.gpu_uuid, agent = %checked.signer, kind = checked.kind, charge, "recorded the agent's report");
        Ok(receipt(true, log_index))
    }
}

/// `POST /v1/reports`: an agent's signed report ([`Validator::accept_report`]); a refusal that
/// time undoes carries `Retry-After`.
pub(crate) async fn post_report(
    State(v): State<Arc<Validator>>,
    axum::extract::ConnectInfo(from): axum::extract::ConnectInfo<std::net::SocketAddr>,
    body: Bytes,
) -> Response {
    match v.accept_report(&body, from.ip()) {
        Ok(receipt) => (StatusCode::OK, axum::Json(receipt)).into_response(),
        Err(e) => {
            let retry_after = e.retry_after_s();
            let mut response = ApiError::from(e).into_response();
            if let Some(s) = retry_after {
                response
                    .headers_mut()
                    .insert(axum::http::header::RETRY_AFTER, s.into());
            }
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pog_bench::{BenchOptions, Suite};
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
            check_inspection(&s, 1_796_000_001_000).unwrap();
            let bytes = serde_json::to_vec(&envelope[1]).unwrap();
            let (b, _): (BenchmarkFigures, PublicKey) =
                pog_signed::decode(&bytes, RecordKind::Benchmark.wire_kind()).unwrap();
            assert_eq!(b.gpu_uuid, gpu.uuid);
            check_benchmark(&b, 1_796_000_001_000).unwrap();
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

    fn summary(uuid: &str) -> InspectionSummary {
        InspectionSummary {
            version: BODY_VERSION,
            gpu_uuid: uuid.parse().unwrap(),
            model: "H200 SXM".into(),
            bus_id: "0000:00:06.0".into(),
            driver_version: "580.95.05".into(),
            verdict: "pass".into(),
            findings: vec![],
            provenance: Provenance::SelfReported,
            recorded_at_ms: 1_000,
        }
    }

    #[test]
    fn reports_are_checked_before_anything_is_stored() {
        let agent = Identity::from_seed([3; 32]);
        let owner = |who: &Identity| {
            let key = who.public_key();
            move |uuid: &str| Ok((uuid == "GPU-1").then(|| key.clone()))
        };
        let bytes = |e: &Envelope| serde_json::to_vec(e).unwrap();
        let good = agent
            .seal(RecordKind::Inspection.wire_kind(), &summary("GPU-1"))
            .unwrap();
        let checked = check_report(&bytes(&good), 2_000, owner(&agent)).unwrap();
        assert_eq!(checked.signer, agent.public_key());
        assert!(checked.id.starts_with("report-") && checked.id.len() == 7 + 64);
        // The id is the content's: the same report spelled with an uppercase signer has it too.
        let mut upper = good.clone();
        upper.signer = upper.signer.to_ascii_uppercase();
        assert_eq!(
            check_report(&bytes(&upper), 2_000, owner(&agent))
                .unwrap()
                .id,
            checked.id
        );
        let status = |r: Result<CheckedReport, ReportError>| r.unwrap_err().status().as_u16();
        let other = Identity::from_seed([4; 32]);
        assert_eq!(
            status(check_report(&bytes(&good), 2_000, owner(&other))),
            403
        );
        let unknown = agent
            .seal(RecordKind::Inspection.wire_kind(), &summary("GPU-2"))
            .unwrap();
        assert_eq!(
            status(check_report(&bytes(&unknown), 2_000, owner(&agent))),
            404
        );
        let future = InspectionSummary {
            recorded_at_ms: 2_000 + CLOCK_SKEW_MS + 1,
            ..summary("GPU-1")
        };
        let mut bad = vec![
            future,
            InspectionSummary {
                version: 2,
                ..summary("GPU-1")
            },
            InspectionSummary {
                provenance: Provenance::Measured,
                ..summary("GPU-1")
            },
            InspectionSummary {
                verdict: "genuine".into(),
                ..summary("GPU-1")
            },
            InspectionSummary {
                model: String::new(),
                ..summary("GPU-1")
            },
            InspectionSummary {
                driver_version: "5\u{7}".into(),
                ..summary("GPU-1")
            },
        ];
        let mut f = summary("GPU-1");
        f.findings.push(Finding {
            code: "x".into(),
            severity: "severe".into(),
            message: "m".into(),
        });
        bad.push(f);
        for s in bad {
            let e = agent.seal(RecordKind::Inspection.wire_kind(), &s).unwrap();
            let err = check_report(&bytes(&e), 2_000, owner(&agent)).unwrap_err();
            assert!(matches!(err, ReportError::Invalid { .. }), "{s:?}: {err}");
            assert_eq!(err.status().as_u16(), 400);
        }
        let figures = |value: f64| BenchmarkFigures {
            version: BODY_VERSION,
            gpu_uuid: "GPU-1".parse().unwrap(),
            suite: "quick".into(),
            figures: vec![Figure {
                name: "hbm_read_gbs".into(),
                value,
                unit: "GB/s".into(),
                method: "m".into(),
            }],
            provenance: Provenance::SelfReported,
            recorded_at_ms: 1_000,
        };
        let e = agent
            .seal(RecordKind::Benchmark.wire_kind(), &figures(4000.0))
            .unwrap();
        check_report(&bytes(&e), 2_000, owner(&agent)).unwrap();
        let mut empty = figures(1.0);
        empty.figures.clear();
        let e = agent
            .seal(RecordKind::Benchmark.wire_kind(), &empty)
            .unwrap();
        assert_eq!(status(check_report(&bytes(&e), 2_000, owner(&agent))), 400);
        // A body of one kind under the other kind's name, another kind, forged, too large.
        let e = agent
            .seal(RecordKind::Benchmark.wire_kind(), &summary("GPU-1"))
            .unwrap();
        assert_eq!(status(check_report(&bytes(&e), 2_000, owner(&agent))), 400);
        let e = agent.seal("register", &summary("GPU-1")).unwrap();
        assert!(matches!(
            check_report(&bytes(&e), 2_000, owner(&agent)),
            Err(ReportError::Kind(_))
        ));
        let mut forged = good.clone();
        forged.body = forged.body.replace("580.95.05", "580.95.06");
        assert_eq!(
            status(check_report(&bytes(&forged), 2_000, owner(&agent))),
            403
        );
        let big = vec![b' '; MAX_REPORT_BYTES + 1];
        assert_eq!(status(check_report(&big, 2_000, owner(&agent))), 413);
        assert_eq!(status(check_report(b"\xff{", 2_000, owner(&agent))), 400);
    }

    /// What the size cap is measured against: a real H200's inspection (the captured
    /// inventory of our test machine) and the figures of a standard and a full `pog bench` of
    /// an H200 (the simulated double's: the same 25 figures, in the same words, as the real
    /// standard run of docs/captures has).
    #[test]
    fn an_h200s_reports_are_far_under_the_size_cap() {
        let inventory: Inventory = serde_json::from_str(include_str!(
            "../../inspect/tests/fixtures/h200-inventory.json"
        ))
        .unwrap();
        let inspection = pog_inspect::inspect(&inventory, pog_spec::SpecDb::embedded());
        let real = InspectReport {
            inventory,
            inspection,
        };
        let g = &real.inspection.gpus[0];
        let gpu = GpuClaim {
            uuid: g.uuid.clone().unwrap().parse().unwrap(),
            model: g.model.clone().unwrap(),
            bus_id: g.bus_id.unwrap().to_string(),
            simulated: false,
        };
        let agent = Identity::from_seed([3; 32]);
        let size = |e: &Envelope| serde_json::to_vec(e).unwrap().len();
        let made = agent_reports(&agent, &real, &[gpu], None, 1_796_000_001_000).unwrap();
        let inspection = size(&made.envelopes[0]);
        assert!((500..1_000).contains(&inspection), "{inspection} bytes");
        for suite in [Suite::Standard, Suite::Full] {
            let platform = SimPlatform::from_profile("H200 SXM").unwrap();
            let report = pog_inspect::run(&platform);
            let options = BenchOptions {
                no_host: true,
                ..BenchOptions::suite(suite)
            };
            let bench =
                pog_bench::measure(&platform, &report.inventory, &options, &mut ()).unwrap();
            let mut json = serde_json::to_value(&bench).unwrap();
            json["schema"] = "pog.bench/1".into();
            let saved =
                SavedBench::parse(&json.to_string().into_bytes(), Some(1_796_000_000_000)).unwrap();
            let g = &report.inspection.gpus[0];
            let gpu = GpuClaim {
                uuid: g.uuid.clone().unwrap().parse().unwrap(),
                model: g.model.clone().unwrap(),
                bus_id: g.bus_id.unwrap().to_string(),
                simulated: true,
            };
            let made =
                agent_reports(&agent, &report, &[gpu], Some(&saved), 1_796_000_001_000).unwrap();
            let (figures, _): (BenchmarkFigures, PublicKey) = pog_signed::decode(
                &serde_json::to_vec(&made.envelopes[1]).unwrap(),
                RecordKind::Benchmark.wire_kind(),
            )
            .unwrap();
            assert_eq!(figures.figures.len(), 25, "{suite:?}: nothing was trimmed");
            let benchmark = size(&made.envelopes[1]);
            assert!(
                (5_000..8_000).contains(&benchmark),
                "{suite:?}: {benchmark} bytes"
            );
            // Both records of a GPU's start fit in an eighth of its default hourly budget.
            let start = inspection.max(MIN_REPORT_CHARGE) + benchmark;
            assert!(8 * start <= DEFAULT_REPORT_KIB_PER_GPU_PER_HOUR as usize * 1024);
            assert!(2 * benchmark < MAX_REPORT_BYTES);
        }
    }

    #[test]
    fn the_hourly_budgets_charge_bytes_refill_and_say_when_to_retry() {
        let mut b = Budgets::new(16);
        assert_eq!(b.kib_per_hour(), 16);
        let t = Instant::now();
        let take = |b: &mut Budgets, key: &str, charge: usize, at: Instant| {
            let wait = b.wait_s(key, charge, at).unwrap();
            if wait == 0 {
                b.spend(key, charge, at);
            }
            wait
        };
        assert_eq!(take(&mut b, "a", 10 << 10, t), 0);
        assert_eq!(take(&mut b, "a", 6 << 10, t), 0);
        // Empty: 4 KiB more come in a quarter of an hour.
        assert_eq!(take(&mut b, "a", 4 << 10, t), 900);
        assert_eq!(take(&mut b, "b", 16 << 10, t), 0, "another key has its own");
        let quarter = t + Duration::from_secs(900);
        assert_eq!(take(&mut b, "a", 4 << 10, quarter), 0);
        assert_eq!(take(&mut b, "a", 1, quarter), 1);
        // Two hours on: full again, but never more than an hour's budget.
        let later = t + Duration::from_secs(7200);
        assert_eq!(take(&mut b, "a", 16 << 10, later), 0);
        assert_eq!(take(&mut b, "a", 1 << 10, later), 225);
        // A budget below one report of the largest size is raised to it.
        assert_eq!(
            Budgets::new(1).kib_per_hour(),
            (MAX_REPORT_BYTES >> 10) as u64
        );
    }

    #[test]
    fn a_reports_id_is_its_content_whatever_its_time_or_spelling() {
        let agent = Identity::from_seed([3; 32]);
        let owner = |uuid: &str| Ok((uuid == "GPU-1").then(|| agent.public_key()));
        let id = |e: &Envelope| {
            check_report(&serde_json::to_vec(e).unwrap(), 1_000_000, owner)
                .unwrap()
                .id
        };
        let first = id(&agent
            .seal(RecordKind::Inspection.wire_kind(), &summary("GPU-1"))
            .unwrap());
        let later = InspectionSummary {
            recorded_at_ms: 999_000,
            ..summary("GPU-1")
        };
        assert_eq!(
            id(&agent
                .seal(RecordKind::Inspection.wire_kind(), &later)
                .unwrap()),
            first
        );
        let spaced = serde_json::to_string_pretty(&later).unwrap();
        assert_eq!(
            id(&agent.seal_body(RecordKind::Inspection.wire_kind(), spaced)),
            first
        );
        let failed = InspectionSummary {
            verdict: "fail".into(),
            ..later
        };
        assert_ne!(
            id(&agent
                .seal(RecordKind::Inspection.wire_kind(), &failed)
                .unwrap()),
            first
        );
    }
}
