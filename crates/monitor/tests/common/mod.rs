//! A `/metrics` page with every series pog can write: a simulated host of two GPUs, the first
//! with every field read (its sample a row of the real H200 trace, the fields the trace lacks
//! filled in, 18 NVLink links, every GPM profiling metric, proofs timed), the second without
//! NVLink and unsampled; and where promtool is.

use pog_monitor::prometheus::{
    render, Format, GpuIdentity, GpuMetrics, LastProofRatio, SamplerHealth,
};
use pog_monitor::{parse_trace, NvLinkSample, NvLinks, Profiling, Sample};

fn identity(index: u32) -> GpuIdentity {
    GpuIdentity {
        index,
        uuid: format!("GPU-5e1a0000-000{index}"),
        model_name: "NVIDIA H200".into(),
        hostname: "sim-host".into(),
        pci_bus_id: Some(format!("00000000:1{index}:00.0")),
        driver_version: Some("570.133.20".into()),
    }
}

/// A sample with every field set.
pub fn every_field() -> Sample {
    let mut s = parse_trace(include_str!("../data/h200-healthy.csv"))
        .unwrap()
        .remove(100);
    s.temp_mem_c = Some(41.0);
    s.energy_mj = Some(1.5e9);
    s.mem_free_mib = Some(1000.0);
    s.mem_reserved_mib = Some(500.0);
    s.pcie_replay = Some(0);
    s.ecc_corr = Some(0);
    s.ecc_uncorr = Some(0);
    s.ecc_corr_aggregate = Some(4);
    s.ecc_uncorr_aggregate = Some(1);
    s.retired_pages = Some(2);
    s.remapped_rows = Some(5);
    s.remapped_rows_uncorrectable = Some(2);
    s.fan_pct = Some(30.0);
    s.nvlink = Some(NvLinks {
        links: (0..18)
            .map(|link| NvLinkSample {
                link,
                active: Some(link != 1),
                crc_flit: Some(u64::from(link == 0) * 1250),
                crc_data: Some(0),
                replay: Some(0),
                recovery: Some(0),
            })
            .collect(),
        bandwidth_mbs: Some(4096.0),
    });
    // An H200 at a BF16 GEMM, as GPM reports it in DCGM's units (ratios, bytes per second).
    s.profiling = Some(Profiling {
        gr_engine_active: Some(0.99),
        sm_active: Some(0.985),
        sm_occupancy: Some(0.125),
        tensor_active: Some(0.71),
        dram_active: Some(0.22),
        fp64_active: Some(0.0),
        fp32_active: Some(0.015),
        fp16_active: Some(0.0),
        pcie_tx_bytes_s: Some(3_145_728.0),
        pcie_rx_bytes_s: Some(2_097_152.0),
        nvlink_tx_bytes_s: Some(1.5e9),
        nvlink_rx_bytes_s: Some(1.4e9),
    });
    s
}

/// The page in `format`.
pub fn page(format: Format) -> String {
    let sample = every_field();
    let (a, b) = (identity(0), identity(1));
    let gpus = [
        GpuMetrics {
            identity: &a,
            sample: Some(&sample),
            xid_total: 1,
            last_xid: 79,
            anomaly_score: Some(0.5),
            alerts_firing: 1,
            last_proof_ratio: Some(LastProofRatio {
                gemm: Some(0.96),
                memory: Some(0.9),
            }),
        },
        GpuMetrics {
            identity: &b,
            sample: None,
            xid_total: 0,
            last_xid: 0,
            anomaly_score: None,
            alerts_firing: 0,
            last_proof_ratio: None,
        },
    ];
    let health = SamplerHealth {
        samples: 3,
        fields_unsupported: 1,
        errors: 0,
    };
    render(&gpus, health, format).unwrap()
}

/// promtool's path: `$POG_PROMTOOL`, else `promtool` on the PATH, else the copy
/// `scripts/promtool.sh` installs under target/.
pub fn promtool() -> Option<std::path::PathBuf> {
    if let Some(path) = std::env::var_os("POG_PROMTOOL") {
        return Some(path.into());
    }
    let installed = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/promtool/usr/bin/promtool");
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join("promtool"))
        .chain([installed])
        .find(|p| p.is_file())
}
