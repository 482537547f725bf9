//! The `/metrics` page: the latest sample of each GPU in Prometheus's text exposition
//! (OpenMetrics, through the `prometheus-client` crate), under dcgm-exporter's metric names and
//! labels (`gpu`, `UUID`, `modelName`, `Hostname`) so that dashboards built for dcgm-exporter
//! work unchanged; pog's own figures under a `pog_` prefix.

use crate::sample::Sample;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

/// The content type of [`render`]'s output, for the HTTP response.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Who a GPU is, as dcgm-exporter labels it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuIdentity {
    /// The GPU's index on its host (`gpu` label).
    pub index: u32,
    /// Its UUID, `GPU-…` (`UUID` label).
    pub uuid: String,
    /// Its model name as NVML gives it, e.g. "NVIDIA H200" (`modelName` label).
    pub model_name: String,
    /// The host's name (`Hostname` label).
    pub hostname: String,
    /// Its PCI bus id (`pci_bus_id` label), when known.
    pub pci_bus_id: Option<String>,
}

/// A label value escaped as the text format requires (`\\`, `\"`, `\n`): prometheus-client
/// 0.24 writes label values verbatim, so a model or host name with a quote would break the
/// whole page.
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

impl GpuIdentity {
    fn labels(&self) -> Vec<(String, String)> {
        let mut labels = vec![
            ("gpu".to_string(), self.index.to_string()),
            ("UUID".to_string(), escape(&self.uuid)),
            ("modelName".to_string(), escape(&self.model_name)),
            ("Hostname".to_string(), escape(&self.hostname)),
        ];
        if let Some(bus) = &self.pci_bus_id {
            labels.push(("pci_bus_id".to_string(), escape(bus)));
        }
        labels
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

type Labels = Vec<(String, String)>;
type GaugeFamily = Family<Labels, Gauge<f64, AtomicU64>>;

/// A metric's name, its help text, and what it reads from a [`Sample`].
type Reader = (&'static str, &'static str, fn(&Sample) -> Option<f64>);

/// dcgm-exporter's gauges.
const DCGM_GAUGES: [Reader; 21] = [
    ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C)", |s| {
        s.temp_gpu_c
    }),
    (
        "DCGM_FI_DEV_MEMORY_TEMP",
        "Memory temperature (in C)",
        |s| s.temp_mem_c,
    ),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W)", |s| {
        s.power_w
    }),
    (
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "Total energy consumption since boot (in mJ)",
        |s| s.energy_mj,
    ),
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %)", |s| {
        s.util_gpu_pct
    }),
    (
        "DCGM_FI_DEV_MEM_COPY_UTIL",
        "Memory utilization (in %)",
        |s| s.util_mem_pct,
    ),
    (
        "DCGM_FI_DEV_FB_USED",
        "Framebuffer memory used (in MiB)",
        |s| s.mem_used_mib,
    ),
    (
        "DCGM_FI_DEV_FB_FREE",
        "Framebuffer memory free (in MiB)",
        |s| s.mem_free_mib,
    ),
    (
        "DCGM_FI_DEV_FB_RESERVED",
        "Framebuffer memory reserved (in MiB)",
        |s| s.mem_reserved_mib,
    ),
    ("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz)", |s| {
        s.sm_clock_mhz
    }),
    (
        "DCGM_FI_DEV_MEM_CLOCK",
        "Memory clock frequency (in MHz)",
        |s| s.mem_clock_mhz,
    ),
    (
        "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
        "Current clock-event (throttle) reasons, NVML bit mask",
        |s| s.clock_reasons.map(|r| r as f64),
    ),
    (
        "DCGM_FI_DEV_PCIE_TX_THROUGHPUT",
        "PCIe transmit throughput (in KB/s)",
        |s| s.pcie_tx_kbs,
    ),
    (
        "DCGM_FI_DEV_PCIE_RX_THROUGHPUT",
        "PCIe receive throughput (in KB/s)",
        |s| s.pcie_rx_kbs,
    ),
    (
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "Total number of PCIe retries",
        |s| s.pcie_replay.map(|v| v as f64),
    ),
    (
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "Total single-bit volatile ECC errors",
        |s| s.ecc_corr.map(|v| v as f64),
    ),
    (
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "Total double-bit volatile ECC errors",
        |s| s.ecc_uncorr.map(|v| v as f64),
    ),
    (
        "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
        "Total single-bit persistent ECC errors",
        |s| s.ecc_corr_aggregate.map(|v| v as f64),
    ),
    (
        "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
        "Total double-bit persistent ECC errors",
        |s| s.ecc_uncorr_aggregate.map(|v| v as f64),
    ),
    (
        "DCGM_FI_DEV_RETIRED_PAGES",
        "Retired memory pages (pog: SBE + DBE + pending)",
        |s| s.retired_pages.map(|v| v as f64),
    ),
    ("DCGM_FI_DEV_FAN_SPEED", "Fan speed (in %)", |s| s.fan_pct),
];

fn gauge(registry: &mut Registry, name: &str, help: &str) -> GaugeFamily {
    let family = GaugeFamily::default();
    registry.register(name, help, family.clone());
    family
}

/// Renders the metrics of every GPU and of the sampler.
pub fn render(gpus: &[GpuMetrics<'_>], sampler: SamplerHealth) -> Result<String, std::fmt::Error> {
    let mut registry = Registry::default();
    let dcgm: Vec<GaugeFamily> = DCGM_GAUGES
        .iter()
        .map(|(name, help, _)| gauge(&mut registry, name, help))
        .collect();
    let remapped = gauge(
        &mut registry,
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "Remapped rows (pog: correctable and uncorrectable together)",
    );
    let last_xid = gauge(
        &mut registry,
        "DCGM_FI_DEV_XID_ERRORS",
        "Value of the last XID error encountered (0: none)",
    );
    let xid_total = Family::<Labels, Counter>::default();
    registry.register(
        "pog_xid_errors",
        "XID errors since the sampler started (0 when clean)",
        xid_total.clone(),
    );
    let score = gauge(
        &mut registry,
        "pog_anomaly_score",
        "Isolation-forest score of the latest sample (above its threshold: unlike healthy history)",
    );
    let firing = gauge(
        &mut registry,
        "pog_alerts_firing",
        "Alerts raised and not yet cleared",
    );
    let proof = gauge(
        &mut registry,
        "pog_last_proof_ratio",
        "The last proof (label proof) as the agent timed it (timed_by=\"agent\"): challenge to \
         commitment over the time planned for the claimed model; the validator's own clock \
         decides (its /metrics)",
    );
    let up = gauge(
        &mut registry,
        "pog_gpu_sampled",
        "1 when the GPU's latest sample was read",
    );
    for gpu in gpus {
        let labels = gpu.identity.labels();
        up.get_or_create(&labels)
            .set(if gpu.sample.is_some() { 1.0 } else { 0.0 });
        if let Some(s) = gpu.sample {
            for (family, (_, _, read)) in dcgm.iter().zip(DCGM_GAUGES.iter()) {
                if let Some(v) = read(s) {
                    family.get_or_create(&labels).set(v);
                }
            }
            if let Some(rows) = s.remapped_rows {
                remapped.get_or_create(&labels).set(rows as f64);
            }
        }
        last_xid.get_or_create(&labels).set(f64::from(gpu.last_xid));
        xid_total.get_or_create(&labels).inc_by(gpu.xid_total);
        if let Some(v) = gpu.anomaly_score {
            score.get_or_create(&labels).set(v);
        }
        firing.get_or_create(&labels).set(gpu.alerts_firing as f64);
        let last = gpu.last_proof_ratio.unwrap_or_default();
        for (name, ratio) in [("gemm", last.gemm), ("memory", last.memory)] {
            if let Some(v) = ratio {
                let mut labels = labels.clone();
                labels.push(("proof".to_string(), name.to_string()));
                labels.push(("timed_by".to_string(), "agent".to_string()));
                proof.get_or_create(&labels).set(v);
            }
        }
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
        let counter: Counter = Counter::default();
        counter.inc_by(value);
        registry.register(name, help, counter);
    }
    let mut out = String::new();
    encode(&mut out, &registry)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_parse::{Scrape, Value};

    fn identity(index: u32) -> GpuIdentity {
        GpuIdentity {
            index,
            uuid: format!("GPU-0621aea7-000{index}"),
            model_name: "NVIDIA H200".into(),
            hostname: "h200-host".into(),
            pci_bus_id: Some(format!("00000000:1{index}:00.0")),
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
        let text = render(&[quiet], SamplerHealth::default()).unwrap();
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
        let scrape = parse(&render(&[gpu], SamplerHealth::default()).unwrap());
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
}
