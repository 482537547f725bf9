//! The `/metrics` page: the latest sample of each GPU under dcgm-exporter's metric names,
//! types and labels (`gpu`, `UUID`, `pci_bus_id`, `device`, `modelName`, `Hostname`,
//! `DCGM_FI_DRIVER_VERSION`) so that dashboards built for dcgm-exporter work unchanged; pog's
//! own figures under a `pog_` prefix. Only DCGM field names go under `DCGM_FI_`. NVLink's
//! series (DCGM's per-link error counters, their totals and the bandwidth) appear only for a GPU
//! whose sample read its links: a GPU without NVLink has none.
//!
//! Two formats ([`Format`], chosen from the scraper's `Accept` header by
//! [`Format::from_accept`]): the Prometheus text format 0.0.4, dcgm-exporter's own, where
//! dcgm-exporter's counters are typed `counter` under their DCGM names; and OpenMetrics 1.0
//! (the default), where a counter's samples must end in `_total`: there dcgm-exporter's
//! counters keep their DCGM names (dashboards query them by those) and are typed `unknown`.
//! pog's own counters end in `_total` in both.

use crate::sample::{NvLinkSample, NvLinks, Sample};
use std::fmt::Write;

/// The content type of the OpenMetrics page.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The content type of the Prometheus text format 0.0.4 page.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Which exposition format `/metrics` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// OpenMetrics 1.0 (`application/openmetrics-text`): the default.
    #[default]
    OpenMetrics,
    /// The Prometheus text format 0.0.4 (`text/plain`), as dcgm-exporter writes it.
    Text,
}

impl Format {
    /// The format a scraper asks for in its `Accept` header: of the media types it names with
    /// a non-zero quality, the preferred one pog writes (`application/openmetrics-text` or
    /// `text/plain`; the first listed wins a tie); OpenMetrics when the header is absent,
    /// names neither, or only `*/*`.
    pub fn from_accept(accept: Option<&str>) -> Format {
        let mut best: Option<(f64, Format)> = None;
        for range in accept.unwrap_or_default().split(',') {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or_default().to_ascii_lowercase();
            let format = match media.as_str() {
                "application/openmetrics-text" => Format::OpenMetrics,
                "text/plain" => Format::Text,
                _ => continue,
            };
            let quality = parts
                .filter_map(|p| p.split_once('='))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
                .map_or(Some(1.0), |(_, q)| q.trim().parse::<f64>().ok())
                .filter(|q| q.is_finite() && *q > 0.0);
            if let Some(q) = quality {
                if best.is_none_or(|(b, _)| q > b) {
                    best = Some((q, format));
                }
            }
        }
        best.map_or(Format::OpenMetrics, |(_, f)| f)
    }

    /// The `Content-Type` of a page in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => CONTENT_TYPE,
            Format::Text => TEXT_CONTENT_TYPE,
        }
    }
}

/// Who a GPU is, as dcgm-exporter labels it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuIdentity {
    /// The GPU's index on its host (`gpu` label; `device` is `nvidia` and this index).
    pub index: u32,
    /// Its UUID, `GPU-…` (`UUID` label).
    pub uuid: String,
    /// Its model name as NVML gives it, e.g. "NVIDIA H200" (`modelName` label).
    pub model_name: String,
    /// The host's name (`Hostname` label).
    pub hostname: String,
    /// Its PCI bus id (`pci_bus_id` label, always written: empty when unknown, as for a
    /// recorded trace).
    pub pci_bus_id: Option<String>,
    /// The NVIDIA driver's version, e.g. "570.133.20" (`DCGM_FI_DRIVER_VERSION` label, always
    /// written: empty when unknown).
    pub driver_version: Option<String>,
}

/// A label value escaped as both formats require (`\\`, `\"`, `\n`).
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// A help text escaped for `format`: OpenMetrics escapes quotes too, 0.0.4 does not.
fn escape_help(help: &str, format: Format) -> String {
    match format {
        Format::OpenMetrics => escape(help),
        Format::Text => help.replace('\\', "\\\\").replace('\n', "\\n"),
    }
}

impl GpuIdentity {
    /// The labels of every series of this GPU, in dcgm-exporter's order, values unescaped.
    pub fn labels(&self) -> Vec<(&'static str, String)> {
        vec![
            ("gpu", self.index.to_string()),
            ("UUID", self.uuid.clone()),
            ("pci_bus_id", self.pci_bus_id.clone().unwrap_or_default()),
            ("device", format!("nvidia{}", self.index)),
            ("modelName", self.model_name.clone()),
            ("Hostname", self.hostname.clone()),
            (
                "DCGM_FI_DRIVER_VERSION",
                self.driver_version.clone().unwrap_or_default(),
            ),
        ]
    }
}

/// What `/metrics` shows of one GPU.
#[derive(Debug, Clone)]
pub struct GpuMetrics<'a> {
    /// The GPU.
    pub identity: &'a GpuIdentity,
    /// Its latest sample, if one was taken.
    pub sample: Option<&'a Sample>,
    /// XID errors seen since the sampler started (0 when clean).
    pub xid_total: u64,
    /// The last XID code seen, 0 when none (dcgm-exporter's `DCGM_FI_DEV_XID_ERRORS`).
    pub last_xid: u32,
    /// The multivariate detector's latest score, if it runs.
    pub anomaly_score: Option<f64>,
    /// Alerts raised and not yet cleared.
    pub alerts_firing: usize,
    /// The GPU's last proofs as the agent serving it timed them (`pog agent`; `None` on
    /// `pog monitor run`, which proves nothing).
    pub last_proof_ratio: Option<LastProofRatio>,
}

/// A GPU's last proof of each kind as the agent serving it timed them: its own time from taking
/// the challenge (the memory proof: the walk) to its commitment, over the time the protocol
/// plans for the claimed model (`pog_proof::timing::check`'s ratio, without the network). The
/// validator's figure, from its own clock, is the one that decides; it serves it on its own
/// `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LastProofRatio {
    /// The last GEMM proof's, if one was committed.
    pub gemm: Option<f64>,
    /// The last memory proof's, if a walk was committed.
    pub memory: Option<f64>,
}

/// The sampler's own health.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SamplerHealth {
    /// Samples taken, all GPUs.
    pub samples: u64,
    /// Fields found unsupported (each counted once, then skipped).
    pub fields_unsupported: u64,
    /// Readings that failed for another reason.
    pub errors: u64,
}

/// How a metric is typed, and so how its name is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A value that goes up and down.
    Gauge,
    /// A total that only grows (or resets), under a DCGM field name without `_total`, as
    /// dcgm-exporter types it: `counter` in the 0.0.4 format, `unknown` in OpenMetrics
    /// (whose counters' samples must end in `_total`).
    DcgmCounter,
    /// One of pog's own totals: family `NAME`, samples `NAME_total` (both formats).
    Counter,
}

/// A metric's name, its type, its help text, and what it reads from a [`Sample`].
type Reader = (&'static str, Kind, &'static str, ReadSample);

/// What a series reads from a [`Sample`] (`None`: the field was not read).
type ReadSample = fn(&Sample) -> Option<f64>;

/// The series read from a sample, in the order of the page.
const SAMPLE_SERIES: [Reader; 35] = [
    (
        "DCGM_FI_DEV_GPU_TEMP",
        Kind::Gauge,
        "GPU temperature (in C)",
        |s| s.temp_gpu_c,
    ),
    (
        "DCGM_FI_DEV_MEMORY_TEMP",
        Kind::Gauge,
        "Memory temperature (in C)",
        |s| s.temp_mem_c,
    ),
    (
        "DCGM_FI_DEV_POWER_USAGE",
        Kind::Gauge,
        "Power draw (in W)",
        |s| s.power_w,
    ),
    (
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        Kind::DcgmCounter,
        "Total energy consumption since the driver was loaded (in mJ)",
        |s| s.energy_mj,
    ),
    (
        "DCGM_FI_DEV_GPU_UTIL",
        Kind::Gauge,
        "GPU utilization (in %)",
        |s| s.util_gpu_pct,
    ),
    (
        "DCGM_FI_DEV_MEM_COPY_UTIL",
        Kind::Gauge,
        "Memory utilization (in %)",
        |s| s.util_mem_pct,
    ),
    (
        "DCGM_FI_DEV_FB_USED",
        Kind::Gauge,
        "Framebuffer memory used (in MiB)",
        |s| s.mem_used_mib,
    ),
    (
        "DCGM_FI_DEV_FB_FREE",
        Kind::Gauge,
        "Framebuffer memory free (in MiB)",
        |s| s.mem_free_mib,
    ),
    (
        "DCGM_FI_DEV_FB_RESERVED",
        Kind::Gauge,
        "Framebuffer memory reserved (in MiB)",
        |s| s.mem_reserved_mib,
    ),
    (
        "DCGM_FI_DEV_SM_CLOCK",
        Kind::Gauge,
        "SM clock frequency (in MHz)",
        |s| s.sm_clock_mhz,
    ),
    (
        "DCGM_FI_DEV_MEM_CLOCK",
        Kind::Gauge,
        "Memory clock frequency (in MHz)",
        |s| s.mem_clock_mhz,
    ),
    (
        "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
        Kind::Gauge,
        "Current clock-event (throttle) reasons, NVML bit mask",
        |s| s.clock_reasons.map(|r| r as f64),
    ),
    (
        "DCGM_FI_DEV_PCIE_TX_THROUGHPUT",
        Kind::Gauge,
        "PCIe transmit throughput (in KB/s)",
        |s| s.pcie_tx_kbs,
    ),
    (
        "DCGM_FI_DEV_PCIE_RX_THROUGHPUT",
        Kind::Gauge,
        "PCIe receive throughput (in KB/s)",
        |s| s.pcie_rx_kbs,
    ),
    (
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        Kind::DcgmCounter,
        "Total number of PCIe retries",
        |s| s.pcie_replay.map(|v| v as f64),
    ),
    (
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        Kind::DcgmCounter,
        "Total single-bit volatile ECC errors",
        |s| s.ecc_corr.map(|v| v as f64),
    ),
    (
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        Kind::DcgmCounter,
        "Total double-bit volatile ECC errors",
        |s| s.ecc_uncorr.map(|v| v as f64),
    ),
    (
        "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
        Kind::DcgmCounter,
        "Total single-bit persistent ECC errors",
        |s| s.ecc_corr_aggregate.map(|v| v as f64),
    ),
    (
        "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
        Kind::DcgmCounter,
        "Total double-bit persistent ECC errors",
        |s| s.ecc_uncorr_aggregate.map(|v| v as f64),
    ),
    (
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        Kind::DcgmCounter,
        "Number of remapped rows for correctable errors",
        |s| s.remapped_rows_correctable().map(|v| v as f64),
    ),
    (
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        Kind::DcgmCounter,
        "Number of remapped rows for uncorrectable errors",
        |s| s.remapped_rows_uncorrectable.map(|v| v as f64),
    ),
    (
        "DCGM_FI_DEV_FAN_SPEED",
        Kind::Gauge,
        "Fan speed (in %)",
        |s| s.fan_pct,
    ),
    (
        "pog_retired_pages",
        Kind::Gauge,
        "Retired memory pages: single-bit, double-bit and pending retirement together (older \
         GPUs; DCGM splits them into DCGM_FI_DEV_RETIRED_SBE, _DBE and _PENDING)",
        |s| s.retired_pages.map(|v| v as f64),
    ),
    (
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        Kind::Gauge,
        "Ratio of time the graphics engine is active (NVML GPM)",
        |s| s.profiling.as_ref().and_then(|p| p.gr_engine_active),
    ),
    (
        "DCGM_FI_PROF_SM_ACTIVE",
        Kind::Gauge,
        "The ratio of cycles an SM has at least 1 warp assigned (NVML GPM)",
        |s| s.profiling.as_ref().and_then(|p| p.sm_active),
    ),
    (
        "DCGM_FI_PROF_SM_OCCUPANCY",
        Kind::Gauge,
        "The ratio of number of warps resident on an SM (NVML GPM)",
        |s| s.profiling.as_ref().and_then(|p| p.sm_occupancy),
    ),
    (
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        Kind::Gauge,
        "Ratio of cycles the tensor (HMMA) pipe is active (NVML GPM)",
        |s| s.profiling.as_ref().and_then(|p| p.tensor_active),
    ),
    (
        "DCGM_FI_PROF_DRAM_ACTIVE",
        Kind::Gauge,
        "Ratio of cycles the device memory interface is active sending or receiving data (NVML GPM)",
        |s| s.profiling.as_ref().and_then(|p| p.dram_active),
    ),
    (
        "DCGM_FI_PROF_PIPE_FP64_ACTIVE",
        Kind::Gauge,
        "Ratio of cycles the fp64 pipes are active (NVML GPM)",
        |s| s.profiling.as_ref().and_then(|p| p.fp64_active),
    ),
    (
        "DCGM_FI_PROF_PIPE_FP32_ACTIVE",
        Kind::Gauge,
        "Ratio of cycles the fp32 pipes are active (NVML GPM)",
        |s| s.profiling.as_ref().and_then(|p| p.fp32_active),
    ),
    (
        "DCGM_FI_PROF_PIPE_FP16_ACTIVE",
        Kind::Gauge,
        "Ratio of cycles the fp16 pipes are active (NVML GPM)",
        |s| s.profiling.as_ref().and_then(|p| p.fp16_active),
    ),
    (
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        Kind::Gauge,
        "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second (NVML GPM)",
        |s| s.profiling.as_ref().and_then(|p| p.pcie_tx_bytes_s),
    ),
    (
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        Kind::Gauge,
        "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per second (NVML GPM)",
        |s| s.profiling.as_ref().and_then(|p| p.pcie_rx_bytes_s),
    ),
    (
        "DCGM_FI_PROF_NVLINK_TX_BYTES",
        Kind::Gauge,
        "The rate of data transmitted over NVLink, not including protocol headers, in bytes per second (NVML GPM)",
        |s| s.profiling.as_ref().and_then(|p| p.nvlink_tx_bytes_s),
    ),
    (
        "DCGM_FI_PROF_NVLINK_RX_BYTES",
        Kind::Gauge,
        "The rate of data received over NVLink, not including protocol headers, in bytes per second (NVML GPM)",
        |s| s.profiling.as_ref().and_then(|p| p.nvlink_rx_bytes_s),
    ),
];

/// One metric family being written: its samples, each a label set and a value.
struct Family {
    name: String,
    kind: Kind,
    help: &'static str,
    samples: Vec<(Vec<(&'static str, String)>, f64)>,
}

impl Family {
    fn new(name: impl Into<String>, kind: Kind, help: &'static str) -> Family {
        Family {
            name: name.into(),
            kind,
            help,
            samples: Vec::new(),
        }
    }

    fn write(&self, out: &mut String, format: Format) -> std::fmt::Result {
        let (family, sample, type_name) = match (self.kind, format) {
            (Kind::Gauge, _) => (self.name.clone(), self.name.clone(), "gauge"),
            (Kind::DcgmCounter, Format::Text) => (self.name.clone(), self.name.clone(), "counter"),
            (Kind::DcgmCounter, Format::OpenMetrics) => {
                (self.name.clone(), self.name.clone(), "unknown")
            }
            (Kind::Counter, Format::Text) => {
                let total = format!("{}_total", self.name);
                (total.clone(), total, "counter")
            }
            (Kind::Counter, Format::OpenMetrics) => {
                (self.name.clone(), format!("{}_total", self.name), "counter")
            }
        };
        writeln!(out, "# HELP {family} {}", escape_help(self.help, format))?;
        writeln!(out, "# TYPE {family} {type_name}")?;
        for (labels, value) in &self.samples {
            out.push_str(&sample);
            if !labels.is_empty() {
                out.push('{');
                for (i, (key, value)) in labels.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write!(out, "{key}=\"{}\"", escape(value))?;
                }
                out.push('}');
            }
            writeln!(out, " {}", number(*value))?;
        }
        Ok(())
    }
}

/// NVLink's error counters: DCGM's name stem (`_L<n>` per link, `_TOTAL` summed over the
/// links), dcgm-exporter's help for the total, and what it reads from a link.
type LinkCounter = (&'static str, &'static str, fn(&NvLinkSample) -> Option<u64>);

/// The four error counters DCGM defines per NVLink link, in dcgm-exporter's order.
const NVLINK_COUNTERS: [LinkCounter; 4] = [
    (
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT",
        "NVLink flow-control CRC errors",
        |l| l.crc_flit,
    ),
    (
        "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT",
        "NVLink data CRC errors",
        |l| l.crc_data,
    ),
    (
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT",
        "NVLink retries",
        |l| l.replay,
    ),
    (
        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT",
        "NVLink recovery errors",
        |l| l.recovery,
    ),
];

/// The NVLink families of every GPU that has NVLink: none at all when no GPU has (no empty
/// HELP and TYPE lines for 90 names a PCIe card never fills).
#[derive(Default)]
struct NvLinkFamilies {
    /// Keyed by (kind, link) as [`NvLinkFamilies::at`] says, and written in that order.
    families: std::collections::BTreeMap<(usize, u32), Family>,
}

impl NvLinkFamilies {
    /// The family at `key` ((kind, link): kind 0 the bandwidth, 1 the link states, 2..=5 a
    /// counter's total, 6..=9 a counter per link), made on first use.
    fn at(&mut self, key: (usize, u32), make: impl FnOnce() -> Family) -> &mut Family {
        self.families.entry(key).or_insert_with(make)
    }

    fn push(&mut self, labels: &[(&'static str, String)], links: &NvLinks) {
        if let Some(v) = links.bandwidth_mbs {
            self.at((0, 0), || {
                Family::new(
                    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
                    Kind::DcgmCounter,
                    "NVLink data received and transmitted, all links (in MB/s, as DCGM computes \
                     it: KiB per second over 1000)",
                )
            })
            .samples
            .push((labels.to_vec(), v));
        }
        for link in &links.links {
            let Some(active) = link.active else {
                continue;
            };
            let mut with_link = labels.to_vec();
            with_link.push(("link", link.link.to_string()));
            self.at((1, 0), || {
                Family::new(
                    "pog_nvlink_active",
                    Kind::Gauge,
                    "1 when the NVLink link (label link) is up, 0 when it is down",
                )
            })
            .samples
            .push((with_link, if active { 1.0 } else { 0.0 }));
        }
        for (i, &(stem, help, read)) in NVLINK_COUNTERS.iter().enumerate() {
            if let Some(total) = links.total(read) {
                self.at((2 + i, 0), || {
                    Family::new(format!("{stem}_TOTAL"), Kind::DcgmCounter, help)
                })
                .samples
                .push((labels.to_vec(), total as f64));
            }
            for link in &links.links {
                if let Some(v) = read(link) {
                    self.at((6 + i, link.link), || {
                        Family::new(format!("{stem}_L{}", link.link), Kind::DcgmCounter, help)
                    })
                    .samples
                    .push((labels.to_vec(), v as f64));
                }
            }
        }
    }
}

/// A value as both formats write it (`NaN`, `+Inf`, `-Inf`, integers without a fraction).
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

/// Renders the metrics of every GPU and of the sampler in `format`.
pub fn render(
    gpus: &[GpuMetrics<'_>],
    sampler: SamplerHealth,
    format: Format,
) -> Result<String, std::fmt::Error> {
    let mut from_sample: Vec<(Family, ReadSample)> = SAMPLE_SERIES
        .iter()
        .map(|&(name, kind, help, read)| (Family::new(name, kind, help), read))
        .collect();
    let mut last_xid = Family::new(
        "DCGM_FI_DEV_XID_ERRORS",
        Kind::Gauge,
        "Value of the last XID error encountered (0: none)",
    );
    let mut xid_total = Family::new(
        "pog_xid_errors",
        Kind::Counter,
        "XID errors since the sampler started (0 when clean)",
    );
    let mut score = Family::new(
        "pog_anomaly_score",
        Kind::Gauge,
        "Isolation-forest score of the latest sample (above its threshold: unlike healthy history)",
    );
    let mut firing = Family::new(
        "pog_alerts_firing",
        Kind::Gauge,
        "Alerts raised and not yet cleared",
    );
    let mut proof = Family::new(
        "pog_last_proof_ratio",
        Kind::Gauge,
        "The last proof (label proof) as the agent timed it (timed_by=\"agent\"): challenge to \
         commitment over the time planned for the claimed model; the validator's own clock \
         decides (its /metrics)",
    );
    let mut sampled = Family::new(
        "pog_gpu_sampled",
        Kind::Gauge,
        "1 when the GPU's latest sample was read",
    );
    let mut nvlink = NvLinkFamilies::default();
    for gpu in gpus {
        let labels = gpu.identity.labels();
        sampled
            .samples
            .push((labels.clone(), if gpu.sample.is_some() { 1.0 } else { 0.0 }));
        if let Some(s) = gpu.sample {
            for (family, read) in &mut from_sample {
                if let Some(v) = read(s) {
                    family.samples.push((labels.clone(), v));
                }
            }
            if let Some(links) = &s.nvlink {
                nvlink.push(&labels, links);
            }
        }
        last_xid
            .samples
            .push((labels.clone(), f64::from(gpu.last_xid)));
        xid_total
            .samples
            .push((labels.clone(), gpu.xid_total as f64));
        if let Some(v) = gpu.anomaly_score {
            score.samples.push((labels.clone(), v));
        }
        firing
            .samples
            .push((labels.clone(), gpu.alerts_firing as f64));
        let last = gpu.last_proof_ratio.unwrap_or_default();
        for (name, ratio) in [("gemm", last.gemm), ("memory", last.memory)] {
            if let Some(v) = ratio {
                let mut labels = labels.clone();
                labels.push(("proof", name.to_string()));
                labels.push(("timed_by", "agent".to_string()));
                proof.samples.push((labels, v));
            }
        }
    }
    let mut out = String::new();
    // A field no GPU reported (the profiling metrics of GPUs without GPM, say) is left out
    // whole, not listed empty.
    for (family, _) in from_sample.iter().filter(|(f, _)| !f.samples.is_empty()) {
        family.write(&mut out, format)?;
    }
    for family in nvlink.families.values() {
        family.write(&mut out, format)?;
    }
    for family in [&last_xid, &xid_total, &score, &firing, &proof, &sampled] {
        family.write(&mut out, format)?;
    }
    for (name, help, value) in [
        (
            "pog_sampler_samples",
            "Samples taken, all GPUs",
            sampler.samples,
        ),
        (
            "pog_sampler_fields_unsupported",
            "Fields a GPU does not support (reported once, then skipped)",
            sampler.fields_unsupported,
        ),
        ("pog_sampler_errors", "Readings that failed", sampler.errors),
    ] {
        let mut family = Family::new(name, Kind::Counter, help);
        family.samples.push((Vec::new(), value as f64));
        family.write(&mut out, format)?;
    }
    if format == Format::OpenMetrics {
        out.push_str("# EOF\n");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_parse::{SampleType, Scrape, Value};

    fn identity(index: u32) -> GpuIdentity {
        GpuIdentity {
            index,
            uuid: format!("GPU-0621aea7-000{index}"),
            model_name: "NVIDIA H200".into(),
            hostname: "h200-host".into(),
            pci_bus_id: Some(format!("00000000:1{index}:00.0")),
            driver_version: Some("570.133.20".into()),
        }
    }

    fn parse(text: &str) -> Scrape {
        Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("a valid exposition")
    }

    fn value(scrape: &Scrape, name: &str, gpu: &str) -> Option<f64> {
        scrape
            .samples
            .iter()
            .find(|s| s.metric == name && s.labels.get("gpu") == Some(gpu))
            .map(|s| match s.value {
                Value::Gauge(v) | Value::Counter(v) | Value::Untyped(v) => v,
                _ => f64::NAN,
            })
    }

    #[test]
    fn a_parser_reads_dcgm_names_labels_and_values() {
        let sample = crate::trace::parse_trace(include_str!("../tests/data/h200-healthy.csv"))
            .unwrap()
            .remove(100);
        let (a, b) = (identity(0), identity(1));
        let gpus = [
            GpuMetrics {
                identity: &a,
                sample: Some(&sample),
                xid_total: 0,
                last_xid: 0,
                anomaly_score: Some(0.47),
                alerts_firing: 0,
                last_proof_ratio: Some(LastProofRatio {
                    gemm: Some(0.96),
                    memory: None,
                }),
            },
            GpuMetrics {
                identity: &b,
                sample: None,
                xid_total: 2,
                last_xid: 79,
                anomaly_score: None,
                alerts_firing: 1,
                last_proof_ratio: None,
            },
        ];
        let text = render(
            &gpus,
            SamplerHealth {
                samples: 417,
                fields_unsupported: 3,
                errors: 0,
            },
            Format::OpenMetrics,
        )
        .unwrap();
        let scrape = parse(&text);
        assert_eq!(
            value(&scrape, "DCGM_FI_DEV_GPU_TEMP", "0"),
            sample.temp_gpu_c
        );
        assert_eq!(
            value(&scrape, "DCGM_FI_DEV_POWER_USAGE", "0"),
            sample.power_w
        );
        assert_eq!(
            value(&scrape, "DCGM_FI_DEV_SM_CLOCK", "0"),
            sample.sm_clock_mhz
        );
        assert_eq!(
            value(&scrape, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "0"),
            sample.clock_reasons.map(|r| r as f64)
        );
        // Not read: absent, never a made-up 0.
        assert_eq!(value(&scrape, "DCGM_FI_DEV_FAN_SPEED", "0"), None);
        assert_eq!(value(&scrape, "DCGM_FI_DEV_GPU_TEMP", "1"), None);
        assert_eq!(value(&scrape, "pog_gpu_sampled", "1"), Some(0.0));
        // XIDs: a counter that reads 0 when clean, and dcgm's last-XID gauge.
        assert_eq!(value(&scrape, "pog_xid_errors_total", "0"), Some(0.0));
        assert_eq!(value(&scrape, "pog_xid_errors_total", "1"), Some(2.0));
        assert_eq!(value(&scrape, "DCGM_FI_DEV_XID_ERRORS", "1"), Some(79.0));
        assert_eq!(value(&scrape, "pog_anomaly_score", "0"), Some(0.47));
        assert_eq!(value(&scrape, "pog_alerts_firing", "1"), Some(1.0));
        assert_eq!(value(&scrape, "pog_last_proof_ratio", "0"), Some(0.96));
        let proof = scrape
            .samples
            .iter()
            .filter(|s| s.metric == "pog_last_proof_ratio")
            .collect::<Vec<_>>();
        assert_eq!(proof.len(), 1, "no memory proof, no GPU 1 proof: absent");
        assert_eq!(proof[0].labels.get("proof"), Some("gemm"));
        assert_eq!(proof[0].labels.get("timed_by"), Some("agent"));
        let temp = scrape
            .samples
            .iter()
            .find(|s| s.metric == "DCGM_FI_DEV_GPU_TEMP")
            .unwrap();
        assert_eq!(temp.labels.get("UUID"), Some("GPU-0621aea7-0000"));
        assert_eq!(temp.labels.get("modelName"), Some("NVIDIA H200"));
        assert_eq!(temp.labels.get("Hostname"), Some("h200-host"));
        let unsupported = scrape
            .samples
            .iter()
            .find(|s| s.metric == "pog_sampler_fields_unsupported_total")
            .unwrap();
        assert!(
            matches!(unsupported.value, Value::Counter(v) | Value::Untyped(v) if v == 3.0),
            "{:?}",
            unsupported.value
        );
        assert!(matches!(
            scrape.docs.get("DCGM_FI_DEV_GPU_TEMP").map(String::as_str),
            Some(help) if help.contains("GPU temperature")
        ));
    }

    #[test]
    fn label_values_are_escaped() {
        let mut odd = identity(0);
        odd.model_name = "quote \" and \\ backslash\nnewline".into();
        let quiet = GpuMetrics {
            identity: &odd,
            sample: None,
            xid_total: 0,
            last_xid: 0,
            anomaly_score: None,
            alerts_firing: 0,
            last_proof_ratio: None,
        };
        let text = render(&[quiet], SamplerHealth::default(), Format::OpenMetrics).unwrap();
        let line = text
            .lines()
            .find(|l| l.starts_with("pog_gpu_sampled{"))
            .expect("one line per series: the newline is escaped");
        assert!(
            line.contains(r#"modelName="quote \" and \\ backslash\nnewline""#),
            "{line}"
        );
        // Spaces and non-ASCII in a label value reach a parser intact.
        let mut plain = identity(0);
        plain.model_name = "NVIDIA H200 NVL rev-2 \u{2713}".into();
        let gpu = GpuMetrics {
            identity: &plain,
            sample: None,
            xid_total: 0,
            last_xid: 0,
            anomaly_score: None,
            alerts_firing: 0,
            last_proof_ratio: None,
        };
        let scrape = parse(&render(&[gpu], SamplerHealth::default(), Format::Text).unwrap());
        let sampled = scrape
            .samples
            .iter()
            .find(|s| s.metric == "pog_gpu_sampled")
            .unwrap();
        assert_eq!(
            sampled.labels.get("modelName"),
            Some("NVIDIA H200 NVL rev-2 \u{2713}")
        );
    }

    /// Every DCGM field name the page may carry, with dcgm-exporter's type for it (the
    /// reference list the Grafana test reads too).
    fn dcgm() -> std::collections::HashMap<String, SampleType> {
        include_str!("../tests/data/dcgm-fields.csv")
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(|l| {
                let (name, kind) = l.split_once(',').expect("NAME, type");
                (name.trim().to_string(), SampleType::parse(kind.trim()))
            })
            .collect()
    }

    /// The DCGM fields a GPU with every field read carries, NVLink aside.
    const ALWAYS: [&str; 23] = [
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_MEMORY_TEMP",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_MEM_COPY_UTIL",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_FB_RESERVED",
        "DCGM_FI_DEV_SM_CLOCK",
        "DCGM_FI_DEV_MEM_CLOCK",
        "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
        "DCGM_FI_DEV_PCIE_TX_THROUGHPUT",
        "DCGM_FI_DEV_PCIE_RX_THROUGHPUT",
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
        "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_FAN_SPEED",
        "DCGM_FI_DEV_XID_ERRORS",
    ];

    /// A sample with every field read, remapped rows among them.
    fn full_sample() -> Sample {
        let mut s = crate::trace::parse_trace(include_str!("../tests/data/h200-healthy.csv"))
            .unwrap()
            .remove(100);
        s.energy_mj = Some(1.5e9);
        s.mem_free_mib = Some(1000.0);
        s.mem_reserved_mib = Some(500.0);
        s.ecc_corr_aggregate = Some(4);
        s.ecc_uncorr_aggregate = Some(1);
        s.retired_pages = Some(2);
        s.remapped_rows = Some(5);
        s.remapped_rows_uncorrectable = Some(2);
        s.fan_pct = Some(30.0);
        s.profiling = Some(crate::Profiling {
            sm_active: Some(0.985),
            tensor_active: Some(0.71),
            pcie_tx_bytes_s: Some(3.0 * 1_048_576.0),
            ..Default::default()
        });
        s.nvlink = Some(three_links());
        s
    }

    /// Three NVLink links: 0 up with errors, 1 down, 2 up and clean.
    fn three_links() -> NvLinks {
        let up = |link, errors| NvLinkSample {
            link,
            active: Some(true),
            crc_flit: Some(errors),
            crc_data: Some(0),
            replay: Some(errors / 10),
            recovery: Some(0),
        };
        NvLinks {
            links: vec![
                up(0, 1250),
                NvLinkSample {
                    active: Some(false),
                    ..up(1, 0)
                },
                up(2, 0),
            ],
            bandwidth_mbs: Some(4096.5),
        }
    }

    #[test]
    fn profiling_series_carry_dcgm_names_and_only_what_gpm_reported() {
        let scrape = parse(&page(Format::Text));
        let v = |name: &str| value(&scrape, name, "0");
        assert_eq!(v("DCGM_FI_PROF_SM_ACTIVE"), Some(0.985));
        assert_eq!(v("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"), Some(0.71));
        assert_eq!(v("DCGM_FI_PROF_PCIE_TX_BYTES"), Some(3_145_728.0));
        // Not reported by the GPU: no series, never a 0.
        assert_eq!(v("DCGM_FI_PROF_NVLINK_TX_BYTES"), None);
        assert_eq!(v("DCGM_FI_PROF_PIPE_FP64_ACTIVE"), None);
        // GPU 1 has no sample: none of its own.
        assert!(scrape
            .samples
            .iter()
            .filter(|s| s.metric.starts_with("DCGM_FI_PROF_"))
            .all(|s| s.labels.get("gpu") == Some("0")));
    }

    #[test]
    fn nvlink_series_carry_dcgm_names_per_link_and_in_total_and_only_where_read() {
        let scrape = parse(&page(Format::Text));
        let dcgm = dcgm();
        let nvlink: Vec<_> = scrape
            .samples
            .iter()
            .filter(|s| s.metric.contains("NVLINK") || s.metric.contains("nvlink"))
            .collect();
        // GPU 1 has no sample, so no NVLink series; GPU 0 has one per link read.
        assert!(nvlink.iter().all(|s| s.labels.get("gpu") == Some("0")));
        for s in nvlink.iter().filter(|s| s.metric.starts_with("DCGM_")) {
            assert_eq!(
                dcgm.get(&s.metric),
                Some(&SampleType::Counter),
                "{}",
                s.metric
            );
        }
        let v = |name: &str| value(&scrape, name, "0");
        assert_eq!(v("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"), Some(4096.5));
        assert_eq!(
            v("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_L0"),
            Some(1250.0)
        );
        assert_eq!(v("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_L0"), Some(125.0));
        assert_eq!(v("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_L2"), Some(0.0));
        assert_eq!(v("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_L1"), Some(0.0));
        assert_eq!(
            v("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"),
            Some(1250.0)
        );
        assert_eq!(
            v("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL"),
            Some(0.0)
        );
        let states: Vec<(String, f64)> = nvlink
            .iter()
            .filter(|s| s.metric == "pog_nvlink_active")
            .map(|s| {
                let Value::Gauge(v) = s.value else {
                    panic!("{:?}", s.value)
                };
                (s.labels.get("link").unwrap().to_string(), v)
            })
            .collect();
        assert_eq!(
            states,
            [("0".into(), 1.0), ("1".into(), 0.0), ("2".into(), 1.0)]
        );
        // A link whose counter failed: its other counters and the other links stay, the
        // total of that counter goes (a short sum would read as a reset).
        let mut failed = full_sample();
        if let Some(links) = &mut failed.nvlink {
            links.links[2].crc_flit = None;
        }
        let a = identity(0);
        let gpu = |sample| GpuMetrics {
            identity: &a,
            sample: Some(sample),
            xid_total: 0,
            last_xid: 0,
            anomaly_score: None,
            alerts_firing: 0,
            last_proof_ratio: None,
        };
        let scrape =
            parse(&render(&[gpu(&failed)], SamplerHealth::default(), Format::Text).unwrap());
        let v = |name: &str| value(&scrape, name, "0");
        assert_eq!(v("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"), None);
        assert_eq!(v("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_L2"), None);
        assert_eq!(
            v("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_L0"),
            Some(1250.0)
        );
        assert_eq!(
            v("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL"),
            Some(125.0)
        );
        assert_eq!(v("DCGM_FI_DEV_GPU_TEMP"), failed.temp_gpu_c);
        // A GPU sampled without NVLink: not one NVLink line, not even HELP.
        let mut plain = full_sample();
        plain.nvlink = None;
        plain.profiling = None;
        let text = render(
            &[gpu(&plain)],
            SamplerHealth::default(),
            Format::OpenMetrics,
        )
        .unwrap();
        assert!(!text.to_lowercase().contains("nvlink"), "{text}");
    }

    fn page(format: Format) -> String {
        let sample = full_sample();
        let a = identity(0);
        let mut b = identity(1);
        b.pci_bus_id = None;
        b.driver_version = None;
        let gpu = |identity, sample| GpuMetrics {
            identity,
            sample,
            xid_total: 1,
            last_xid: 79,
            anomaly_score: Some(0.5),
            alerts_firing: 0,
            last_proof_ratio: None,
        };
        render(
            &[gpu(&a, Some(&sample)), gpu(&b, None)],
            SamplerHealth {
                samples: 3,
                fields_unsupported: 1,
                errors: 0,
            },
            format,
        )
        .unwrap()
    }

    #[test]
    fn the_text_format_types_labels_and_names_every_series_as_dcgm_exporter_does() {
        let text = page(Format::Text);
        assert!(!text.contains("# EOF"), "0.0.4 has no EOF marker");
        let scrape = parse(&text);
        let dcgm = dcgm();
        let typed: std::collections::HashMap<String, SampleType> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .map(|l| {
                let (name, kind) = l.split_once(' ').unwrap();
                (name.to_string(), SampleType::parse(kind))
            })
            .collect();
        for s in &scrape.samples {
            // Every series has a TYPE line of its own name, and a HELP line.
            let kind = typed
                .get(&s.metric)
                .unwrap_or_else(|| panic!("{} has no TYPE line", s.metric));
            assert!(
                scrape.docs.contains_key(&s.metric),
                "{} has no HELP",
                s.metric
            );
            let value_kind = match s.value {
                Value::Counter(_) => SampleType::Counter,
                Value::Gauge(_) => SampleType::Gauge,
                _ => SampleType::Untyped,
            };
            assert_eq!(value_kind, *kind, "{}", s.metric);
            if s.metric.starts_with("DCGM_FI_") {
                assert_eq!(
                    dcgm.get(s.metric.as_str()),
                    Some(kind),
                    "{} is not DCGM's",
                    s.metric
                );
            } else {
                assert!(s.metric.starts_with("pog_"), "{}", s.metric);
                if *kind == SampleType::Counter {
                    assert!(s.metric.ends_with("_total"), "{}", s.metric);
                }
            }
            if s.metric.starts_with("pog_sampler_") {
                continue;
            }
            // Every GPU series carries dcgm-exporter's labels, pci_bus_id and the driver
            // version included (empty when unknown).
            let gpu = s.labels.get("gpu").expect("a gpu label");
            assert_eq!(
                s.labels.get("device"),
                Some(format!("nvidia{gpu}").as_str())
            );
            for label in ["UUID", "modelName", "Hostname"] {
                assert!(s.labels.get(label).is_some(), "{} lacks {label}", s.metric);
            }
            let (bus, driver) = if gpu == "0" {
                ("00000000:10:00.0", "570.133.20")
            } else {
                ("", "")
            };
            assert_eq!(s.labels.get("pci_bus_id").unwrap_or(""), bus);
            assert_eq!(s.labels.get("DCGM_FI_DRIVER_VERSION").unwrap_or(""), driver);
        }
        for name in ALWAYS {
            assert_eq!(typed.get(name), dcgm.get(name), "{name}");
        }
        // dcgm-exporter's label order.
        assert!(text.contains(
            "\npog_gpu_sampled{gpu=\"1\",UUID=\"GPU-0621aea7-0001\",pci_bus_id=\"\",\
             device=\"nvidia1\",modelName=\"NVIDIA H200\",Hostname=\"h200-host\",\
             DCGM_FI_DRIVER_VERSION=\"\"} 0\n"
        ));
        // Remapped rows split as DCGM splits them: 5 in all, 2 for uncorrectable errors.
        assert_eq!(
            value(&scrape, "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "0"),
            Some(3.0)
        );
        assert_eq!(
            value(&scrape, "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "0"),
            Some(2.0)
        );
        assert_eq!(value(&scrape, "DCGM_FI_DEV_RETIRED_PAGES", "0"), None);
        assert_eq!(value(&scrape, "pog_retired_pages", "0"), Some(2.0));
        assert_eq!(
            value(&scrape, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "0"),
            Some(1.5e9)
        );
        assert_eq!(value(&scrape, "pog_xid_errors_total", "1"), Some(1.0));
    }

    #[test]
    fn openmetrics_keeps_dcgm_names_and_ends_counters_in_total() {
        let text = page(Format::OpenMetrics);
        assert!(text.ends_with("# EOF\n"));
        assert!(text.contains("# TYPE DCGM_FI_DEV_PCIE_REPLAY_COUNTER unknown\n"));
        assert!(text.contains("# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n"));
        assert!(text.contains("# TYPE pog_xid_errors counter\n"));
        assert!(text.contains("\npog_xid_errors_total{gpu=\"0\""));
        assert!(text.contains("\npog_sampler_samples_total 3\n"));
        assert!(text.contains("\nDCGM_FI_DEV_PCIE_REPLAY_COUNTER{gpu=\"0\""));
        // The help's quotes are escaped in OpenMetrics, not in 0.0.4.
        assert!(text.contains(r#"(timed_by=\"agent\")"#));
        assert!(page(Format::Text).contains(r#"(timed_by="agent")"#));
        // The same series, by name and value, in both formats.
        let names = |text: &str| {
            let mut v: Vec<(String, String)> = parse(text)
                .samples
                .into_iter()
                .map(|s| {
                    let labels: std::collections::BTreeMap<_, _> = s.labels.iter().collect();
                    (s.metric.clone(), format!("{labels:?}"))
                })
                .collect();
            v.sort();
            v
        };
        assert_eq!(names(&text), names(&page(Format::Text)));
    }

    #[test]
    fn the_accept_header_picks_the_format() {
        let pick = |h| Format::from_accept(Some(h));
        assert_eq!(Format::from_accept(None), Format::OpenMetrics);
        assert_eq!(pick("*/*"), Format::OpenMetrics);
        assert_eq!(pick("text/plain;version=0.0.4"), Format::Text);
        assert_eq!(
            pick("application/openmetrics-text; version=1.0.0"),
            Format::OpenMetrics
        );
        // Prometheus 2's default: OpenMetrics preferred.
        assert_eq!(
            pick(
                "application/openmetrics-text;version=1.0.0,application/openmetrics-text;\
                 version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
            ),
            Format::OpenMetrics
        );
        // Preferred by quality, whatever the order; q=0 refuses.
        assert_eq!(
            pick("application/openmetrics-text;q=0.2, text/plain;q=0.9"),
            Format::Text
        );
        assert_eq!(
            pick("text/plain;q=0, application/openmetrics-text;q=0.1"),
            Format::OpenMetrics
        );
        assert_eq!(pick("TEXT/PLAIN"), Format::Text);
        assert_eq!(pick("text/plain;q=nonsense"), Format::OpenMetrics);
        assert_eq!(Format::Text.content_type(), TEXT_CONTENT_TYPE);
    }
}
