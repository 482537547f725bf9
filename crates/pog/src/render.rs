//! Human output of the host's pipelines: the inspection, benchmark, proof and spec-database
//! reports as tables on stdout (`output::table`). JSON output never goes through here.

use crate::output::table;
use comfy_table::Table;
use pog_facts::{HostInfo, Inventory, Origin, Reading};
use pog_inspect::{Finding, Inspection, Severity};
use pog_local::check::Stage;
use pog_local::hostproof::{GpuProof, GpuProofError};
use pog_spec::{GpuSpec, Precision};

fn show<T: std::fmt::Display>(r: &Reading<T>) -> String {
    match r {
        Reading::Value(v) => v.to_string(),
        Reading::Unavailable(_) => "–".to_string(),
    }
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

/// A byte count in the largest binary unit it fills (B, KiB, MiB, GiB), one decimal.
fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 => gib(b),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

/// Whether the facts came from the simulated test double.
pub fn is_simulated(origin: &Origin) -> bool {
    matches!(origin, Origin::Simulated { .. })
}

/// Says loudly when the host is the simulated test double.
pub fn origin_banner(origin: &Origin) {
    if let Origin::Simulated { profile } = origin {
        println!("SIMULATED HOST (profile {profile:?}): a test double for pog's own tests, not a measurement of any GPU\n");
    }
}

/// The host's table: name, OS, CPU, memory and disks.
pub fn host(host: &HostInfo) {
    let mut t = table(["Host", ""]);
    t.add_row(vec!["hostname".to_string(), show(&host.hostname)]);
    t.add_row(vec![
        "OS / kernel".to_string(),
        format!("{} / {}", show(&host.os), show(&host.kernel)),
    ]);
    match &host.cpu {
        Reading::Value(cpu) => {
            t.add_row(vec!["CPU".to_string(), cpu.model.clone()]);
            let mhz = match (&cpu.mhz_current, &cpu.mhz_max) {
                (Reading::Value(cur), Reading::Value(max)) => {
                    format!(", {cur:.0} MHz (max {max:.0})")
                }
                (Reading::Value(cur), _) => format!(", {cur:.0} MHz"),
                _ => String::new(),
            };
            t.add_row(vec![
                "sockets / cores / threads".to_string(),
                format!(
                    "{} / {} / {}{mhz}{}",
                    cpu.sockets,
                    cpu.cores,
                    cpu.threads,
                    if cpu.hypervisor {
                        ", virtual machine"
                    } else {
                        ""
                    }
                ),
            ]);
        }
        Reading::Unavailable(why) => {
            t.add_row(vec!["CPU".to_string(), format!("unavailable: {why}")]);
        }
    }
    t.add_row(vec![
        "memory".to_string(),
        host.memory_total_bytes
            .value()
            .map_or("–".into(), |b| gib(*b)),
    ]);
    match &host.storage {
        Reading::Value(disks) => {
            for d in disks {
                let kind = match d.rotational {
                    Reading::Value(true) => "HDD",
                    Reading::Value(false) => "SSD",
                    Reading::Unavailable(_) => "disk",
                };
                let size = d
                    .size_bytes
                    .value()
                    .map_or("–".into(), |b| format!("{:.0} GB", *b as f64 / 1e9));
                t.add_row(vec![
                    format!("storage {}", d.name),
                    format!("{} {kind}, {size}", show(&d.model)),
                ]);
            }
        }
        Reading::Unavailable(why) => {
            t.add_row(vec!["storage".to_string(), format!("unavailable: {why}")]);
        }
    }
    println!("{t}");
}

/// One row per GPU: its identity, figures, link and verdict.
pub fn gpus(insp: &Inspection) {
    if insp.gpus.is_empty() {
        println!("No NVIDIA GPU found on this host.");
        return;
    }
    let mut t = table([
        "#",
        "bus id",
        "name",
        "model",
        "memory",
        "SMs",
        "CC",
        "PCIe link",
        "UUID",
        "verdict",
    ]);
    for g in &insp.gpus {
        let opt = |o: Option<String>| o.unwrap_or_else(|| "–".into());
        t.add_row(vec![
            opt(g.nvml_index.map(|i| i.to_string())),
            opt(g.bus_id.map(|b| b.to_string())),
            opt(g.name.clone()),
            opt(g.model.clone()),
            opt(g.memory_mib.map(|m| format!("{m} MiB"))),
            opt(g.sm_count.map(|s| s.to_string())),
            opt(g.compute_capability.clone()),
            opt(g.pcie_link.clone()),
            opt(g.uuid.clone()),
            g.verdict.to_string(),
        ]);
    }
    println!("{t}");
}

/// What each source of facts answered (NVML, CUDA, nvidia-smi, sysfs, procfs, libraries).
pub fn sources(inv: &Inventory) {
    let mut t = table(["source", "status", "detail"]);
    let row = |t: &mut Table, name: &str, reading: Reading<String>| {
        let (status, detail) = match reading {
            Reading::Value(detail) => ("ok", detail),
            Reading::Unavailable(why) => ("unavailable", why),
        };
        t.add_row(vec![name.to_string(), status.to_string(), detail]);
    };
    let nvml = inv.nvml.as_ref().map(|n| {
        format!(
            "driver {}, CUDA {}, {} GPU(s)",
            show(&n.driver_version),
            show(&n.cuda_driver_version),
            n.gpus.len()
        )
    });
    row(&mut t, "NVML", nvml);
    let cuda = inv.cuda.as_ref().map(|c| {
        format!(
            "driver API {}, {} device(s)",
            show(&c.driver_version),
            c.devices.len()
        )
    });
    row(&mut t, "CUDA", cuda);
    let smi = inv.nvidia_smi.as_ref().map(|s| {
        format!(
            "{} (-> {}), {} GPU(s)",
            s.binary,
            show(&s.binary_resolved),
            s.gpus.len()
        )
    });
    row(&mut t, "nvidia-smi", smi);
    let pci = inv
        .pci
        .as_ref()
        .map(|p| format!("{} NVIDIA display function(s)", p.len()));
    row(&mut t, "sysfs", pci);
    let procfs = inv.proc_driver.as_ref().map(|p| {
        format!(
            "kernel module {}, {} GPU(s)",
            show(&p.version),
            p.gpus.len()
        )
    });
    row(&mut t, "procfs", procfs);
    let libs = inv.process.nvidia_libraries.as_ref().map(|libs| {
        if libs.is_empty() {
            "none mapped".to_string()
        } else {
            libs.iter()
                .map(|l| l.path.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        }
    });
    row(&mut t, "libraries", libs);
    println!("{t}");
}

/// Findings at or above `min`.
pub fn findings(findings: &[Finding], min: Severity) {
    let shown: Vec<&Finding> = findings.iter().filter(|f| f.severity >= min).collect();
    if shown.is_empty() {
        return;
    }
    let mut t = table(["", "rule", "GPU", "finding", "evidence"]);
    for f in shown {
        let evidence: Vec<String> = f
            .evidence
            .iter()
            .map(|e| format!("{}: {}", e.source, e.value))
            .collect();
        t.add_row(vec![
            f.severity.to_string(),
            f.rule.clone(),
            f.gpu.map_or("host".into(), |b| b.to_string()),
            f.message.clone(),
            evidence.join("\n"),
        ]);
    }
    println!("{t}");
}

/// `pog check`'s stages, one row each.
pub fn stages(stages: &[Stage]) {
    let mut t = table(["stage", "result", "summary"]);
    for s in stages {
        t.add_row(vec![
            s.name.to_string(),
            s.status.to_string(),
            s.summary.clone(),
        ]);
    }
    println!("{t}");
}

fn peak(spec: &GpuSpec, p: Precision) -> String {
    spec.peak.get(p).map_or("–".into(), |v| format!("{v}"))
}

/// The GPU model database, one row per model.
pub fn spec_list(specs: &[GpuSpec]) {
    let mut t = table([
        "model", "PCI id", "arch", "SMs", "memory", "GB/s", "FP64", "FP32", "TF32", "FP16", "BF16",
        "FP8", "INT8", "TDP",
    ]);
    for s in specs {
        let ids: Vec<String> = s
            .pci_device_ids
            .iter()
            .map(|id| format!("{id:#06x}"))
            .collect();
        let mut row = vec![
            s.model.clone(),
            ids.join(" "),
            s.architecture.clone(),
            s.sm_count.to_string(),
            format!("{} GB {}", s.memory_gib, s.memory_type),
            s.memory_bandwidth_gbs.to_string(),
        ];
        row.extend(Precision::ALL.iter().map(|p| peak(s, *p)));
        row.push(format!("{} W", s.tdp_w));
        t.add_row(row);
    }
    println!("{t}");
    println!(
        "Dense peak TFLOP/s (INT8: TOP/s), FP32 accumulation. `pog specs MODEL` shows sources."
    );
}

/// One model's full entry, with its sources.
pub fn spec_detail(s: &GpuSpec) {
    let mut t = table([s.model.as_str(), ""]);
    let ids: Vec<String> = s
        .pci_device_ids
        .iter()
        .map(|id| format!("{id:#06x}"))
        .collect();
    for (k, v) in [
        ("NVML names", s.names.join(", ")),
        ("PCI device ids", ids.join(", ")),
        (
            "architecture",
            format!(
                "{} (compute capability {})",
                s.architecture, s.compute_capability
            ),
        ),
        ("SMs", s.sm_count.to_string()),
        (
            "memory",
            format!(
                "{} GB {}, {}-bit, {} GB/s",
                s.memory_gib, s.memory_type, s.memory_bus_bits, s.memory_bandwidth_gbs
            ),
        ),
        ("boost clock", format!("{} MHz", s.boost_clock_mhz)),
        ("TDP", format!("{} W", s.tdp_w)),
        ("PCIe", format!("Gen{}", s.pcie_gen)),
    ] {
        t.add_row(vec![k.to_string(), v]);
    }
    for p in Precision::ALL {
        t.add_row(vec![format!("peak {p}"), peak(s, p)]);
    }
    t.add_row(vec!["sources".to_string(), s.sources.join("\n")]);
    t.add_row(vec![
        "checked on a real card".to_string(),
        s.measured.to_string(),
    ]);
    println!("{t}");
}

fn verdict_word(v: pog_bench::Verdict) -> &'static str {
    match v {
        pog_bench::Verdict::Info => "info",
        pog_bench::Verdict::Pass => "pass",
        pog_bench::Verdict::Warn => "warn",
        pog_bench::Verdict::Fail => "FAIL",
    }
}

fn percent(value: Option<f64>, peak: Option<f64>) -> String {
    match (value, peak) {
        (Some(v), Some(p)) if p > 0.0 => format!("{:.1} %", 100.0 * v / p),
        _ => "–".into(),
    }
}

fn num(v: Option<f64>, digits: usize) -> String {
    v.map_or("–".into(), |v| format!("{v:.digits$}"))
}

/// `pog bench`'s report: per GPU its GEMM and copy tables and the memory, sweep and
/// sustained lines; then GPU to GPU, cutlass_profiler and the host.
pub fn bench(report: &pog_bench::BenchReport) {
    for e in &report.gpu_errors {
        println!("FAIL GPU {}: {}", e.ordinal, e.error);
    }
    for g in &report.gpus {
        println!(
            "GPU {} ({}), {} suite, seed {:#x}",
            g.index,
            g.model.as_deref().unwrap_or("unknown model"),
            report.suite,
            g.seed
        );
        let mut t = table([
            "GEMM",
            "n",
            "median TFLOP/s",
            "best",
            "% of peak",
            "spread",
            "runs",
            "checked",
            "verdict",
            "why",
        ]);
        for r in &g.gemm {
            let check = r.check.as_ref().map_or("–".into(), |c| {
                format!("{}/{} ok", c.checked - c.wrong, c.checked)
            });
            t.add_row(vec![
                r.precision.to_string(),
                r.size.to_string(),
                num(r.tflops_median, 1),
                num(r.tflops_best, 1),
                percent(r.tflops_median, r.peak_tflops),
                r.time_ms
                    .map_or("–".into(), |t| format!("{:.1} %", 100.0 * t.spread)),
                if r.run_rest_ms > 0 {
                    // Each run a burst from rest (see `GemmPlan::run_rest_ms`).
                    format!("{} apart", r.iterations)
                } else {
                    r.iterations.to_string()
                },
                check,
                verdict_word(r.judgement.verdict).to_string(),
                r.error
                    .clone()
                    .unwrap_or_else(|| r.judgement.reason.clone()),
            ]);
        }
        println!("{t}");
        let mut t = table([
            "copy",
            "MiB",
            "median GB/s",
            "best",
            "% of peak",
            "spread",
            "verdict",
            "why",
        ]);
        for c in &g.copies {
            t.add_row(vec![
                c.kind.name().replace('_', " "),
                (c.bytes >> 20).to_string(),
                num(c.gbs_median, 1),
                num(c.gbs_best, 1),
                percent(c.gbs_median, c.peak_gbs),
                c.time_ms
                    .map_or("–".into(), |t| format!("{:.1} %", 100.0 * t.spread)),
                verdict_word(c.judgement.verdict).to_string(),
                c.error
                    .clone()
                    .unwrap_or_else(|| c.judgement.reason.clone()),
            ]);
        }
        println!("{t}");
        if let Some(m) = &g.memtest {
            let detail = match &m.run {
                Some(run) => {
                    let bad: u64 = run.patterns.iter().map(|p| p.bad_words).sum();
                    let ms: f64 = run.patterns.iter().map(|p| p.write_ms + p.check_ms).sum();
                    format!(
                        "{} patterns over {:.1} GiB ({:.1} % of free), {bad} bad words, {ms:.0} ms",
                        run.patterns.len(),
                        run.bytes_tested as f64 / (1u64 << 30) as f64,
                        100.0 * run.bytes_tested as f64 / run.free_bytes.max(1) as f64
                    )
                }
                None => m.error.clone().unwrap_or_default(),
            };
            println!(
                "memory test: {} ({detail}): {}",
                verdict_word(m.judgement.verdict),
                m.judgement.reason
            );
        }
        if let Some(s) = &g.sweep {
            match &s.error {
                Some(e) => println!("bandwidth sweep: not run: {e}"),
                None => println!(
                    "bandwidth sweep ({} sizes, 1 MiB-{} MiB): L2 read {} GB/s, HBM read {} GB/s, HBM write {} GB/s",
                    s.points.len(),
                    s.points.last().map_or(0, |p| p.bytes >> 20),
                    num(s.l2_read_gbs, 0),
                    num(s.hbm_read_gbs, 0),
                    num(s.hbm_write_gbs, 0)
                ),
            }
        }
        if let Some(e) = &g.sustained_error {
            println!("sustained load: FAIL, did not run: {e}");
        }
        if let Some(s) = &g.sustained {
            let tel = match &s.telemetry {
                Reading::Value(t) => format!(
                    "; SM clock {}-{} MHz, power {}-{} W, max {} C, power-capped {:.0} % of samples, {} clock drops",
                    num(t.sm_clock_mhz.map(|c| c.min), 0),
                    num(t.sm_clock_mhz.map(|c| c.max), 0),
                    num(t.power_w.map(|p| p.min), 0),
                    num(t.power_w.map(|p| p.max), 0),
                    num(t.temperature_c.map(|c| c.max), 0),
                    100.0 * t.power_capped_fraction,
                    t.clock_drops
                ),
                Reading::Unavailable(e) => format!("; no telemetry: {e}"),
            };
            println!(
                "sustained {} n={} for {:.0} s: {} iterations, median {} TFLOP/s ({} of peak, {} of burst), first {} TFLOP/s, variation {}; {} faulty elements, {} NaNs{tel}: {}: {}",
                s.precision,
                s.size,
                s.seconds,
                s.iterations,
                num(s.tflops.map(|t| t.median), 1),
                s.vs_peak.map_or("–".into(), |v| format!("{:.1} %", v * 100.0)),
                s.vs_burst.map_or("–".into(), |v| format!("{:.1} %", v * 100.0)),
                num(s.first_iteration_tflops, 1),
                s.variation.map_or("–".into(), |v| format!("{:.2} %", v * 100.0)),
                s.mismatched_elements,
                s.nans,
                verdict_word(s.judgement.verdict),
                s.judgement.reason
            );
        }
        for s in &g.skipped {
            println!("skipped: {s}");
        }
    }
    match &report.peers {
        None => {}
        Some(Reading::Unavailable(e)) => println!("FAIL GPU to GPU: {e}"),
        Some(Reading::Value(p)) => peers(p),
    }
    match &report.cutlass {
        Reading::Value(figures) => {
            let mut t = table(["cutlass_profiler SGEMM", "m x n x k", "TFLOP/s", "ms"]);
            for f in figures {
                t.add_row(vec![
                    f.kernel.clone(),
                    format!("{}x{}x{}", f.m, f.n, f.k),
                    format!("{:.1}", f.tflops),
                    format!("{:.2}", f.runtime_ms),
                ]);
            }
            println!("{t}");
        }
        Reading::Unavailable(why) => println!("cutlass_profiler: {why}"),
    }
    if let Some(h) = &report.host {
        let mut t = table(["host", ""]);
        t.add_row(vec![
            "CPU FP64 GFLOP/s, 1 thread".to_string(),
            format!(
                "{:.1}{}",
                h.cpu_gflops_single,
                if h.cpu_fma { " (AVX2+FMA)" } else { "" }
            ),
        ]);
        t.add_row(vec![
            format!("CPU FP64 GFLOP/s, {} threads", h.threads),
            format!("{:.1}", h.cpu_gflops_multi),
        ]);
        t.add_row(vec![
            "memory, STREAM triad GB/s (best)".to_string(),
            format!("{:.1}", h.stream_triad_gbs),
        ]);
        match &h.storage {
            Reading::Value(s) => {
                let how = if s.direct_io {
                    "O_DIRECT"
                } else {
                    "buffered: page cache may flatter"
                };
                t.add_row(vec![
                    format!("storage in {} ({} MiB, {how})", s.path, s.bytes >> 20),
                    format!(
                        "write {:.0} MB/s, read {:.0} MB/s, {:.0} random 4 KiB reads/s",
                        s.write_mbs, s.read_mbs, s.random_read_iops
                    ),
                ]);
            }
            Reading::Unavailable(e) => {
                t.add_row(vec!["storage".to_string(), format!("not measured: {e}")]);
            }
        }
        println!("{t}");
    }
    let overall = match report.verdict() {
        pog_bench::Verdict::Info => "nothing judged",
        v => verdict_word(v),
    };
    println!("bench verdict: {overall}");
}

/// The GPU-to-GPU matrix, as `nvidia-smi topo -m` prints it: `NV<n>` for n NVLink links,
/// else the PCIe path (PIX, PXB, PHB, NODE, SYS); and each GPU's active NVLink links.
pub fn topology(inv: &Inventory) {
    let Some(nvml) = inv.nvml.value() else { return };
    let n = nvml.gpus.len();
    if n < 2 {
        return;
    }
    let mut header: Vec<String> = vec![String::new()];
    header.extend((0..n).map(|i| format!("GPU{i}")));
    header.push("NVLink".into());
    let mut t = table(header);
    for a in 0..n {
        let mut row = vec![format!("GPU{a}")];
        for b in 0..n {
            let cell = if a == b {
                "X".to_string()
            } else {
                let (lo, hi) = (a.min(b) as u32, a.max(b) as u32);
                nvml.topology
                    .iter()
                    .find(|p| p.a == lo && p.b == hi)
                    .map_or("?".into(), |p| {
                        if p.nvlinks > 0 {
                            format!("NV{}", p.nvlinks)
                        } else {
                            show(&p.path)
                        }
                    })
            };
            row.push(cell);
        }
        row.push(match &nvml.gpus[a].nvlinks {
            Reading::Value(links) if links.is_empty() => "none".into(),
            Reading::Value(links) => format!(
                "{}/{} active",
                links.iter().filter(|l| l.active).count(),
                links.len()
            ),
            Reading::Unavailable(_) => "–".into(),
        });
        t.add_row(row);
    }
    println!("{t}");
}

/// `pog prove`: one table per kind of proof, one row per GPU with the time against its bound
/// and the spot checks.
pub fn proofs(proofs: &[GpuProof]) {
    proofs_table(
        ["GEMM challenge", "commit / bound", "GEMM", "overhead"],
        proofs,
        gemm_row,
    );
    proofs_table(
        [
            "memory challenge",
            "walk + commit / bound",
            "walk rate",
            "build",
        ],
        proofs,
        memory_row,
    );
    for p in proofs {
        if let Some(note) = &p.memory_note {
            println!("GPU {} ({}): {note}", p.ordinal, p.model);
        }
    }
}

/// A GPU's row in the GEMM proofs' table, or why its proof could not run.
fn gemm_row(p: &GpuProof) -> (Option<ProofRow<'_>>, Option<&GpuProofError>) {
    let row = p.check.as_ref().map(|c| {
        let mut note = String::new();
        if let Some(same) = p.cpu_root_matches {
            note = if same {
                "; CPU root equal"
            } else {
                "; CPU root DIFFERS"
            }
            .into();
        }
        ProofRow {
            challenge: format!(
                "{} n={} ×{}, {} checks",
                c.precision, c.size, c.batch, c.measured.outcome.checked
            ),

            own: [
                c.device
                    .as_ref()
                    .map_or("–".into(), |d| format!("{:.0} ms", d.gemm_ms)),
                c.device.as_ref().map_or("– (CPU prover)".into(), |d| {
                    format!(
                        "{:.1} % (fill {:.0}, hash {:.0}, tree {:.1} ms)",
                        100.0 * d.overhead,
                        d.fill_ms,
                        d.hash_ms,
                        d.tree_ms
                    )
                }),
            ],
            measured: &c.measured,
            note,
        }
    });
    (row, p.error.as_ref())
}

/// A GPU's row in the memory proofs' table, or why its proof could not run.
fn memory_row(p: &GpuProof) -> (Option<ProofRow<'_>>, Option<&GpuProofError>) {
    let row = p.memory.as_ref().map(|m| ProofRow {
        challenge: format!(
            "{} held, {} read, {} checks",
            size(m.dataset_bytes),
            size(m.read_bytes),
            m.measured.outcome.checked
        ),

        own: [
            m.device.as_ref().map_or("– (CPU prover)".into(), |d| {
                format!("{:.0} GB/s (walk {:.0} ms)", d.walk_gbs, d.walk_ms)
            }),
            format!("{:.0} ms", m.build_ms),
        ],
        measured: &m.measured,
        note: String::new(),
    });
    (row, p.memory_error.as_ref())
}

/// What a proofs table shows of one self-challenge, of any kind: the challenge, the kind's
/// own two cells, what every kind measures (the timed phase against the bound, the spot
/// checks' cost, the bytes, the verdict) and a note to the verdict.
struct ProofRow<'a> {
    challenge: String,
    own: [String; 2],
    measured: &'a pog_local::selfcheck::Measured,
    note: String,
}

/// One table of one kind of proof (`headings`: the challenge, the timed phase and the kind's
/// two cells), a row per GPU that ran it or could not (`row` gives either); no table when no
/// GPU did either.
/// The proof of the host's cores: the lanes, the calibration against the timed phase, the
/// throughput, the spot checks and the verdict.
pub fn cpu_proof(p: &pog_local::hostproof::HostCpuProof) {
    let m = &p.check.measured;
    let mut t = table([
        "lanes",
        "calibration (half the lanes)",
        "all lanes / bound",
        "throughput",
        "per lane at half load",
        "verify",
        "bytes to / from",
        "verdict",
    ]);
    t.add_row(vec![
        match p.host_threads {
            Some(host) if host != p.lanes => format!("{} (of {host} on the host)", p.lanes),
            _ => p.lanes.to_string(),
        },
        format!("{:.1} ms", p.check.calibration_ms),
        format!(
            "{:.1} / {:.1} ms ({:.3})",
            m.commit_ms,
            m.expected_ms,
            m.time_ratio()
        ),
        format!("{:.3e} steps/s", p.check.steps_per_s),
        format!("{:.3e} steps/s", p.check.lane_steps_per_s),
        format!("{:.1} ms", m.verify_ms),
        format!("{} / {}", m.bytes_to_agent, m.bytes_from_agent),
        if m.outcome.accepted {
            "accepted".into()
        } else {
            format!("rejected ({} wrong)", m.outcome.wrong())
        },
    ]);
    println!("{t}");
}

/// `pog prove --proof ram`: the data set built, the walk against the bound its build
/// calibrated, the checks.
pub fn ram_proof(p: &pog_local::hostproof::HostRamProof) {
    let c = &p.check;
    let m = &c.measured;
    let mut t = table([
        "claim",
        "data set",
        "built",
        "walk / bound",
        "reads",
        "verify",
        "bytes to / from",
        "verdict",
    ]);
    t.add_row(vec![
        gib(p.claim_bytes),
        gib(c.dataset_bytes),
        format!("{:.0} ms", c.build_ms),
        format!(
            "{:.1} / {:.1} ms ({:.3})",
            m.commit_ms,
            m.expected_ms,
            m.time_ratio()
        ),
        format!(
            "{:.0} MiB, {:.2} GB/s",
            c.read_bytes as f64 / (1u64 << 20) as f64,
            c.read_bytes as f64 / (m.commit_ms.max(f64::MIN_POSITIVE) * 1e6)
        ),
        format!("{:.1} ms", m.verify_ms),
        format!("{} / {}", m.bytes_to_agent, m.bytes_from_agent),
        if m.outcome.accepted {
            "accepted".into()
        } else {
            format!("rejected ({} wrong)", m.outcome.wrong())
        },
    ]);
    println!("{t}");
}

/// `pog prove --proof storage`: the data set, the walk against its bound, the checks.
pub fn storage_proof(p: &pog_local::storage::HostStorageProof) {
    let mut t = table([
        "data set",
        "built",
        "walk / bound",
        "read (median, p99)",
        "audit",
        "openings",
        "verify",
        "bytes to / from",
        "verdict",
    ]);
    t.add_row(vec![
        format!(
            "{:.1} MiB in {} ({}, {})",
            p.bytes as f64 / f64::from(1u32 << 20),
            p.dir.display(),
            p.filesystem,
            if p.direct_io {
                "O_DIRECT"
            } else {
                "page cache dropped"
            }
        ),
        if p.built {
            format!(
                "now, in {:.1} s on {} threads",
                p.build_ms / 1e3,
                p.build_threads
            )
        } else {
            format!(
                "kept: {:.1} h ago, in {:.1} s on {} threads",
                p.age_ms as f64 / 3.6e6,
                p.build_ms / 1e3,
                p.build_threads
            )
        },
        format!(
            "{:.1} / {:.1} ms ({:.3}, {} steps; later rounds ≤ {:.1} ms)",
            p.time.measured_ms, p.time.expected_ms, p.time.ratio, p.steps, p.host_bound_ms
        ),
        format!("{:.0} µs, {:.0} µs", p.read_us_median, p.read_us_p99),
        match &p.audit.error {
            None => format!("{} ok ({:.0} ms)", p.audit.samples, p.audit.verify_ms),
            Some(e) => e.clone(),
        },
        match &p.error {
            None => format!("{} ok, {} regenerated", p.opened, p.regenerated),
            Some(e) => e.clone(),
        },
        format!("{:.1} ms", p.verify_ms),
        format!("{} / {}", p.bytes_to_agent, p.bytes_from_agent),
        if p.passed() {
            "accepted".into()
        } else {
            "rejected".into()
        },
    ]);
    println!("{t}");
}

fn proofs_table<'a>(
    headings: [&str; 4],
    proofs: &'a [GpuProof],
    row: fn(&'a GpuProof) -> (Option<ProofRow<'a>>, Option<&'a GpuProofError>),
) {
    let [challenge, timed, first, second] = headings;
    let mut t = table([
        "GPU",
        challenge,
        timed,
        first,
        second,
        "open",
        "verify",
        "bytes to / from",
        "verdict",
    ]);
    let mut rows = 0;
    for p in proofs {
        let gpu = format!("{} ({})", p.ordinal, p.model);
        match row(p) {
            (Some(r), _) => {
                let [own_first, own_second] = r.own;
                t.add_row(vec![
                    gpu,
                    r.challenge,
                    format!(
                        "{:.0} / {:.0} ms ({:.0} %)",
                        r.measured.commit_ms,
                        r.measured.expected_ms,
                        100.0 * r.measured.time_ratio()
                    ),
                    own_first,
                    own_second,
                    format!("{:.0} ms", r.measured.open_ms),
                    format!("{:.1} ms", r.measured.verify_ms),
                    bytes_cell(r.measured.bytes_to_agent, r.measured.bytes_from_agent),
                    proof_verdict(&r.measured.outcome) + &r.note,
                ]);
            }
            (None, Some(error)) => {
                t.add_row(error_row(gpu, 9, &error.to_string()));
            }
            (None, None) => continue,
        }
        rows += 1;
    }
    if rows > 0 {
        println!("{t}");
    }
}

/// A proof's verdict cell: pass, too slow, or how many spot checks failed.
fn proof_verdict(outcome: &pog_proof::session::Outcome) -> String {
    if outcome.accepted {
        "pass".to_string()
    } else if !outcome.time.accepted {
        "FAIL: too slow".to_string()
    } else {
        format!("FAIL: {} of {} checks", outcome.wrong(), outcome.checked)
    }
}

/// Signed bytes each way.
fn bytes_cell(to_agent: usize, from_agent: usize) -> String {
    format!("{} / {}", size(to_agent as u64), size(from_agent as u64))
}

/// A row of `columns` cells for a GPU whose proof could not run: its name, dashes, the error.
fn error_row(gpu: String, columns: usize, error: &str) -> Vec<String> {
    let mut row = vec![gpu];
    row.extend(std::iter::repeat_n("–".to_string(), columns - 2));
    row.push(format!("ERROR: {error}"));
    row
}

/// The GPU-to-GPU matrix: one row per ordered pair, GB/s per engine and direction (median of
/// the timed runs), the read latency and the worst verdict.
fn peers(p: &pog_bench::peer::PeerBench) {
    use pog_facts::PeerKind;
    println!(
        "GPU to GPU: {} MiB per transfer, median of {} runs",
        p.plan.bytes >> 20,
        p.plan.iterations
    );
    let mut t = table([
        "pair",
        "link (one way)",
        "CE write GB/s",
        "CE read GB/s",
        "SM write GB/s",
        "SM read GB/s",
        "latency",
        "verdict",
    ]);
    for (src, dst, link) in &p.links {
        let figures: Vec<_> = p
            .figures
            .iter()
            .filter(|f| (f.src, f.dst) == (*src, *dst))
            .collect();
        let cell = |kind: PeerKind| {
            figures
                .iter()
                .find(|f| f.kind == kind)
                .map_or("–".to_string(), |f| num(f.gbs.map(|s| s.median), 1))
        };
        let latency = p
            .latencies
            .iter()
            .find(|l| (l.src, l.dst) == (*src, *dst))
            .and_then(|l| l.ns)
            .map_or("–".to_string(), |ns| format!("{:.2} µs", ns.median / 1e3));
        let verdict = match p.unreachable.iter().find(|(s, d, _)| (s, d) == (src, dst)) {
            Some((_, _, why)) => format!("no peer access: {why}"),
            None => figures
                .iter()
                .map(|f| f.judgement.verdict)
                .max()
                .map_or("–", verdict_word)
                .to_string(),
        };
        t.add_row(vec![
            format!("{src} → {dst}"),
            link.as_ref().map_or("unknown".to_string(), |l| {
                format!("{} ({:.0} GB/s)", l.name, l.gbs)
            }),
            cell(PeerKind::CopyEngineWrite),
            cell(PeerKind::CopyEngineRead),
            cell(PeerKind::SmWrite),
            cell(PeerKind::SmRead),
            latency,
            verdict,
        ]);
    }
    println!("{t}");
    if let Some(why) = &p.all_reduce_unavailable {
        println!("NCCL all-reduce: not measured: {why}");
    }
    if !p.all_reduce.is_empty() {
        let mut t = table(["NCCL all-reduce (FP32 sum)", "bus GB/s", "verdict", "why"]);
        for a in &p.all_reduce {
            t.add_row(vec![
                format!("{} MiB per GPU", a.bytes >> 20),
                num(a.bus_gbs.map(|s| s.median), 1),
                verdict_word(a.judgement.verdict).to_string(),
                a.error
                    .clone()
                    .unwrap_or_else(|| a.judgement.reason.clone()),
            ]);
        }
        println!("{t}");
    }
}
