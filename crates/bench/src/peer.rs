//! GPU to GPU: the peer-to-peer bandwidth matrix (copy engines and SMs, each way) and read
//! latency of every ordered pair, judged against the rate of the link NVML reports between
//! them (NVLink: links × the per-link rate of its version; else the PCIe link), and NCCL's
//! all-reduce bus bandwidth over a size sweep, judged against the slowest link.

use crate::judge::{self, Judgement, PeerFigureKind, Verdict};
use crate::plan::Suite;
use crate::stats::Summary;
use pog_facts::Inventory;
use pog_facts::{Fabric, PeerKind, PeerRequest};
use pog_spec::GpuSpec;
use serde::{Deserialize, Serialize};

/// One way, GB/s per NVLink link by NVLink version (NVLink 2–4: 25 GB/s, so 18 links of an
/// H100/H200 SXM make 450 GB/s each way; NVLink 5: 50).
fn nvlink_gbs_per_link(version: u32) -> f64 {
    if version >= 5 {
        50.0
    } else {
        25.0
    }
}

/// One way, GB/s of a PCIe link: gen 3/4/5/6 run 0.985/1.97/3.94/7.56 GB/s per lane.
fn pcie_gbs(generation: u32, lanes: u32) -> Option<f64> {
    let per_lane = match generation {
        3 => 0.985,
        4 => 1.969,
        5 => 3.938,
        6 => 7.563,
        _ => return None,
    };
    Some(per_lane * f64::from(lanes))
}

/// The link between two GPUs and its rate one way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Link {
    /// "NVLink ×18 (v4)" or "PCIe gen 5 x16".
    pub name: String,
    /// Its rate one way, GB/s (NVLink links × 25, × 50 from NVLink 5; else the PCIe link).
    pub gbs: f64,
}

/// The link between CUDA devices `src` and `dst` as NVML reports it (GPUs matched by PCI
/// address); `None` when NVML cannot tell.
pub fn link(inventory: &Inventory, src: usize, dst: usize) -> Option<Link> {
    let cuda = inventory.cuda.value()?;
    let nvml = inventory.nvml.value()?;
    let nvml_index = |ordinal: usize| {
        let bus = cuda.devices.get(ordinal)?.pci_bus_id.value()?;
        nvml.gpus.iter().find(|g| g.pci_bus_id.value() == Some(bus))
    };
    let (a, b) = (nvml_index(src)?, nvml_index(dst)?);
    let pair = nvml
        .topology
        .iter()
        .find(|p| (p.a, p.b) == (a.index, b.index) || (p.a, p.b) == (b.index, a.index))?;
    if pair.nvlinks > 0 {
        let version = a
            .nvlinks
            .value()
            .and_then(|links| links.iter().find_map(|l| l.version.value().copied()))
            .unwrap_or(4);
        return Some(Link {
            name: format!("NVLink ×{} (v{version})", pair.nvlinks),
            gbs: f64::from(pair.nvlinks) * nvlink_gbs_per_link(version),
        });
    }
    // Over PCIe, the slower of the two GPUs' links bounds the transfer.
    let pcie = |g: &pog_facts::GpuFacts| {
        let (generation, lanes) = (*g.link.current_gen.value()?, *g.link.current_width.value()?);
        Some((pcie_gbs(generation, lanes)?, generation, lanes))
    };
    let ((ga, gen_a, lanes_a), (gb, gen_b, lanes_b)) = (pcie(a)?, pcie(b)?);
    let (gbs, generation, lanes) = if ga <= gb {
        (ga, gen_a, lanes_a)
    } else {
        (gb, gen_b, lanes_b)
    };
    Some(Link {
        name: format!("PCIe gen {generation} x{lanes}"),
        gbs,
    })
}

/// What the peer benchmarks run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerPlan {
    /// Bytes per transfer.
    pub bytes: u64,
    /// Untimed transfers before the timed ones.
    pub warmup: u32,
    /// Timed transfers per pair and kind.
    pub iterations: u32,
    /// Timed runs of the latency pointer chase per pair.
    pub latency_iterations: u32,
    /// All-reduce sizes, bytes per GPU; the largest is judged.
    pub all_reduce_bytes: Vec<u64>,
}

/// The plan for a host of `gpus` GPUs; `None` with fewer than two.
pub fn plan(suite: Suite, gpus: usize) -> Option<PeerPlan> {
    (gpus >= 2).then_some(PeerPlan {
        bytes: match suite {
            Suite::Quick => 256 << 20,
            _ => 1 << 30,
        },
        warmup: 2,
        iterations: match suite {
            Suite::Full => 10,
            _ => 5,
        },
        latency_iterations: 5,
        all_reduce_bytes: match suite {
            Suite::Quick => vec![16 << 20, 256 << 20],
            Suite::Standard => vec![1 << 20, 16 << 20, 256 << 20, 1 << 30],
            Suite::Full => vec![1 << 20, 16 << 20, 256 << 20, 1 << 30, 4 << 30],
        },
    })
}

/// One ordered pair measured one way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerFigure {
    /// The CUDA ordinal of the source GPU.
    pub src: usize,
    /// The CUDA ordinal of the destination GPU.
    pub dst: usize,
    /// Which transfer: copy engine push or pull, SM write or read.
    pub kind: PeerKind,
    /// GB/s per timed run, summarized; `None` when it could not run.
    pub gbs: Option<Summary>,
    /// Judged against the link between the two.
    pub judgement: Judgement,
    /// Why the transfer did not run.
    pub error: Option<String>,
}

/// One ordered pair's read latency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerLatency {
    /// The CUDA ordinal of the GPU whose SMs read.
    pub src: usize,
    /// The CUDA ordinal of the GPU whose memory is read.
    pub dst: usize,
    /// Latency of one dependent 8-byte read per timed run, ns; `None` when it could not run.
    pub ns: Option<Summary>,
    /// Why the latency was not measured.
    pub error: Option<String>,
}

/// One all-reduce size: bus bandwidth (nccl-tests' measure: algorithm bandwidth × 2(n−1)/n,
/// what each link carries).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AllReduceFigure {
    /// Bytes per GPU.
    pub bytes: u64,
    /// Bus bandwidth per timed run, GB/s, summarized; `None` when it could not run.
    pub bus_gbs: Option<Summary>,
    /// Judged at the largest size against the slowest link; reported otherwise.
    pub judgement: Judgement,
    /// Why the all-reduce did not run at this size.
    pub error: Option<String>,
}

/// Everything measured between the GPUs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerBench {
    /// The sizes, runs and all-reduce sweep used.
    pub plan: PeerPlan,
    /// The link of each ordered pair measured, as NVML reports it.
    pub links: Vec<(usize, usize, Option<Link>)>,
    /// Every ordered pair's transfers, one per kind.
    pub figures: Vec<PeerFigure>,
    /// Every ordered pair's read latency.
    pub latencies: Vec<PeerLatency>,
    /// Pairs without peer access, and why: not measured, and judged a failure where NVML
    /// reports a link between them.
    pub unreachable: Vec<(usize, usize, String)>,
    /// NCCL's all-reduce, one per size.
    pub all_reduce: Vec<AllReduceFigure>,
    /// Why there is no all-reduce figure, when collectives cannot run here (no NCCL): reported,
    /// not judged, as that is the host's software, not its GPUs.
    pub all_reduce_unavailable: Option<String>,
}

impl PeerBench {
    /// The worst verdict among the figures; a pair NVML links that cannot reach its peer fails.
    pub fn verdict(&self) -> Verdict {
        let unreachable_linked = self.unreachable.iter().any(|(s, d, _)| {
            self.links
                .iter()
                .any(|(ls, ld, link)| (ls, ld) == (s, d) && link.is_some())
        });
        let worst = self
            .figures
            .iter()
            .map(|f| &f.judgement)
            .chain(self.all_reduce.iter().map(|a| &a.judgement))
            .map(|j| j.verdict)
            .max()
            .unwrap_or(Verdict::Info);
        if unreachable_linked {
            Verdict::Fail
        } else {
            worst
        }
    }
}

/// Measures every ordered pair of `fabric`'s GPUs, each way and by each engine, and judges
/// each figure against the model's measured figures (`spec`: the model every GPU of the host
/// is, `None` if they differ) or else its link (`link_of(src, dst)`).
pub fn run(
    fabric: &mut dyn Fabric,
    spec: Option<&GpuSpec>,
    plan: &PeerPlan,
    link_of: &dyn Fn(usize, usize) -> Option<Link>,
    progress: &mut dyn FnMut(String),
) -> PeerBench {
    let n = fabric.count();
    let mut bench = PeerBench {
        plan: plan.clone(),
        links: Vec::new(),
        figures: Vec::new(),
        latencies: Vec::new(),
        unreachable: Vec::new(),
        all_reduce: Vec::new(),
        all_reduce_unavailable: fabric.collectives().err().map(|e| e.to_string()),
    };
    for src in 0..n {
        for dst in (0..n).filter(|&d| d != src) {
            let link = link_of(src, dst);
            bench.links.push((src, dst, link.clone()));
            if let Err(why) = fabric.peer_access(src, dst) {
                bench.unreachable.push((src, dst, why.to_string()));
                continue;
            }
            for kind in PeerKind::ALL {
                progress(format!("GPU {src} → GPU {dst}: {}", kind.name()));
                let request = PeerRequest {
                    src,
                    dst,
                    kind,
                    bytes: plan.bytes,
                    warmup: plan.warmup,
                    iterations: plan.iterations,
                };
                let figure = match fabric.peer_copy(&request) {
                    Ok(times_ms) => {
                        let gbs: Vec<f64> = times_ms
                            .iter()
                            .map(|ms| plan.bytes as f64 / (ms * 1e-3) / 1e9)
                            .collect();
                        let summary = Summary::of(&gbs);
                        PeerFigure {
                            src,
                            dst,
                            kind,
                            judgement: match &summary {
                                Some(s) => judge::peer(
                                    spec,
                                    PeerFigureKind::Transfer {
                                        kind,
                                        bytes: plan.bytes,
                                    },
                                    s.median,
                                    link.as_ref().map(|l| l.gbs),
                                    link.as_ref().map_or("no link reported", |l| &l.name),
                                ),
                                None => judge::not_judged("no runs"),
                            },
                            gbs: summary,
                            error: None,
                        }
                    }
                    Err(e) => PeerFigure {
                        src,
                        dst,
                        kind,
                        gbs: None,
                        judgement: judge::failed(e.to_string()),
                        error: Some(e.to_string()),
                    },
                };
                bench.figures.push(figure);
            }
            progress(format!("GPU {src} → GPU {dst}: latency"));
            let latency = fabric.peer_latency(src, dst, plan.latency_iterations);
            bench.latencies.push(PeerLatency {
                src,
                dst,
                ns: latency.as_ref().ok().and_then(|ns| Summary::of(ns)),
                error: latency.err().map(|e| e.to_string()),
            });
        }
    }
    // The ring all-reduce runs at its slowest link.
    let slowest = bench
        .links
        .iter()
        .map(|(_, _, l)| l.as_ref().map(|l| (l.gbs, l.name.clone())))
        .collect::<Option<Vec<_>>>()
        .and_then(|links| links.into_iter().min_by(|a, b| a.0.total_cmp(&b.0)));
    let largest = plan.all_reduce_bytes.iter().copied().max();
    let sizes = if bench.all_reduce_unavailable.is_none() {
        plan.all_reduce_bytes.as_slice()
    } else {
        &[]
    };
    for &bytes in sizes {
        progress(format!("all-reduce of {} MiB", bytes >> 20));
        let bus = 2.0 * (n as f64 - 1.0) / n as f64;
        bench.all_reduce.push(
            match fabric.all_reduce(bytes, plan.warmup, plan.iterations) {
                Ok(times_ms) => {
                    let gbs: Vec<f64> = times_ms
                        .iter()
                        .map(|ms| bytes as f64 * bus / (ms * 1e-3) / 1e9)
                        .collect();
                    let bus_gbs = Summary::of(&gbs);
                    let judgement = match &bus_gbs {
                        Some(s) if Some(bytes) == largest => judge::peer(
                            spec,
                            PeerFigureKind::AllReduce { gpus: n, bytes },
                            s.median,
                            slowest.as_ref().map(|(rate, _)| *rate),
                            &slowest
                                .as_ref()
                                .map_or("no link rate for every pair".into(), |(_, name)| {
                                    format!("slowest link: {name}")
                                }),
                        ),
                        Some(_) => judge::not_judged("only the largest size is judged"),
                        None => judge::not_judged("no runs"),
                    };
                    AllReduceFigure {
                        bytes,
                        bus_gbs,
                        judgement,
                        error: None,
                    }
                }
                Err(e) => AllReduceFigure {
                    bytes,
                    bus_gbs: None,
                    judgement: judge::failed(e.to_string()),
                    error: Some(e.to_string()),
                },
            },
        );
    }
    bench
}

#[cfg(test)]
mod tests {
    use super::*;
    use pog_sim::SimFabric;

    fn rates(n: usize, gbs: Option<f64>) -> Vec<Vec<Option<f64>>> {
        (0..n)
            .map(|s| (0..n).map(|d| if s == d { None } else { gbs }).collect())
            .collect()
    }

    fn nvlink(_: usize, _: usize) -> Option<Link> {
        Some(Link {
            name: "NVLink ×18 (v4)".into(),
            gbs: 450.0,
        })
    }

    #[test]
    fn fewer_than_two_gpus_have_no_peers() {
        assert!(plan(Suite::Standard, 1).is_none());
        assert_eq!(plan(Suite::Quick, 2).unwrap().bytes, 256 << 20);
    }

    #[test]
    fn every_ordered_pair_is_measured_each_way_and_judged_against_its_link() {
        let mut fabric = SimFabric {
            rates: rates(3, Some(450.0)),
            efficiency: 0.85,
            no_collectives: None,
        };
        let p = plan(Suite::Quick, 3).unwrap();
        let bench = run(&mut fabric, None, &p, &nvlink, &mut |_| {});
        assert_eq!(bench.figures.len(), 3 * 2 * PeerKind::ALL.len());
        assert_eq!(bench.latencies.len(), 6);
        let f = &bench.figures[0];
        assert!((f.gbs.unwrap().median - 382.5).abs() < 0.1);
        assert_eq!(f.judgement.verdict, Verdict::Pass);
        // All-reduce: the bus bandwidth of a ring at the slowest link; only the largest size
        // is judged.
        assert_eq!(bench.all_reduce.len(), 2);
        let last = bench.all_reduce.last().unwrap();
        assert!((last.bus_gbs.unwrap().median - 382.5).abs() < 0.1);
        assert_eq!(last.judgement.verdict, Verdict::Pass);
        assert_eq!(bench.all_reduce[0].judgement.verdict, Verdict::Info);
        assert_eq!(bench.verdict(), Verdict::Pass);
    }

    #[test]
    fn a_slow_or_unreachable_link_fails() {
        let mut slow = SimFabric {
            rates: rates(2, Some(450.0)),
            efficiency: 0.2,
            no_collectives: None,
        };
        let p = plan(Suite::Quick, 2).unwrap();
        let bench = run(&mut slow, None, &p, &nvlink, &mut |_| {});
        assert_eq!(bench.verdict(), Verdict::Fail);
        assert!(bench.figures[0].judgement.reason.contains("NVLink ×18"));

        let mut cut = SimFabric {
            rates: rates(2, None),
            efficiency: 0.9,
            no_collectives: None,
        };
        let bench = run(&mut cut, None, &p, &nvlink, &mut |_| {});
        assert!(bench.figures.is_empty());
        assert_eq!(bench.unreachable.len(), 2);
        assert_eq!(
            bench.verdict(),
            Verdict::Fail,
            "NVML links them, yet no peer access"
        );
        let unlinked = run(&mut cut, None, &p, &|_, _| None, &mut |_| {});
        assert_eq!(
            unlinked.verdict(),
            Verdict::Info,
            "no link, no peer access: reported only"
        );
    }

    #[test]
    fn a_host_without_nccl_reports_it_and_still_measures_the_links() {
        let mut fabric = SimFabric {
            rates: rates(2, Some(450.0)),
            efficiency: 0.85,
            no_collectives: Some("NCCL library not found".into()),
        };
        let bench = run(
            &mut fabric,
            None,
            &plan(Suite::Quick, 2).unwrap(),
            &nvlink,
            &mut |_| {},
        );
        assert!(bench.all_reduce.is_empty());
        assert_eq!(
            bench.all_reduce_unavailable.as_deref(),
            Some("NCCL library not found")
        );
        assert_eq!(bench.figures.len(), 8);
        assert_eq!(
            bench.verdict(),
            Verdict::Pass,
            "missing software is not a GPU failure"
        );
    }

    #[test]
    fn links_come_from_nvmls_topology() {
        use pog_sim::SimPlatform;
        let sxm = pog_facts::collect(&SimPlatform::from_profile("H200 SXM x2").unwrap());
        let l = link(&sxm, 0, 1).unwrap();
        assert_eq!((l.name.as_str(), l.gbs), ("NVLink ×18 (v4)", 450.0));
        let pcie = pog_facts::collect(&SimPlatform::from_profile("L40S x2").unwrap());
        let l = link(&pcie, 1, 0).unwrap();
        assert!(l.name.starts_with("PCIe gen"), "{l:?}");
        assert!(link(&pcie, 0, 5).is_none(), "no such GPU");
    }

    #[test]
    fn link_rates_follow_nvlink_version_and_pcie_generation() {
        assert_eq!(nvlink_gbs_per_link(4) * 18.0, 450.0);
        assert_eq!(nvlink_gbs_per_link(5) * 18.0, 900.0);
        assert!((pcie_gbs(5, 16).unwrap() - 63.0).abs() < 0.1);
        assert!(pcie_gbs(2, 16).is_none());
    }
}
