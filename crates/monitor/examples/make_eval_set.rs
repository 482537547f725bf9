//! Builds the labeled evaluation set in `crates/monitor/eval/` from the real H200 trace:
//! healthy episodes (the trace twice, with a different ambient temperature and power noise
//! each), episodes with one fault injected at a random place, and healthy episodes with an
//! allocation pattern of real work (a training step's rise and fall, a large free, a job's
//! start-up staircase) from a random place. Deterministic: the same seed
//! writes the same files.
//!
//! `cargo run -p pog-monitor --example make_eval_set [-- OUT_DIR]`

use pog_monitor::forest::SplitMix;
use pog_monitor::inject::{allocate, inject, repeat, Allocation, Fault};
use pog_monitor::sample::reasons;
use pog_monitor::trace::{Columns, TraceWriter};
use pog_monitor::{parse_trace, Sample, Signal};
use std::fmt::Write as _;
use std::path::PathBuf;

const HEALTHY: &str = include_str!("../tests/data/h200-healthy.csv");
const SEED: u64 = 20261203;
const HEALTHY_EPISODES: usize = 20;
const PER_KIND: usize = 8;

fn between(rng: &mut SplitMix, lo: f64, hi: f64) -> f64 {
    lo + rng.unit() * (hi - lo)
}

fn pick<T: Copy>(rng: &mut SplitMix, items: &[T]) -> T {
    items[rng.below(items.len())]
}

/// A healthy day that is not the training day: the room 2 °C colder to 2 °C warmer, power
/// readings with ±0.5 % noise.
fn perturb(samples: &[Sample], rng: &mut SplitMix) -> (Vec<Sample>, i32) {
    let offset = rng.below(5) as i32 - 2;
    let out = samples
        .iter()
        .map(|s| {
            let mut s = s.clone();
            s.temp_gpu_c = s.temp_gpu_c.map(|t| t + f64::from(offset));
            s.temp_mem_c = s.temp_mem_c.map(|t| t + f64::from(offset));
            s.power_w = s
                .power_w
                .map(|p| (p * (1.0 + between(rng, -0.005, 0.005)) * 1000.0).round() / 1000.0);
            s
        })
        .collect();
    (out, offset)
}

/// A random fault of `kind` and where it may start (the samples at which it is observable).
fn fault(kind: &str, rng: &mut SplitMix) -> Fault {
    match kind {
        "thermal_runaway" => Fault::ThermalRunaway {
            rate_c_per_s: between(rng, 0.05, 1.0),
        },
        "throttle" => Fault::Throttle {
            reasons: pick(
                rng,
                &[
                    reasons::SW_THERMAL,
                    reasons::HW_THERMAL,
                    reasons::HW_SLOWDOWN,
                    reasons::HW_POWER_BRAKE,
                    reasons::HW_SLOWDOWN | reasons::HW_THERMAL,
                ],
            ),
            clock_factor: between(rng, 0.5, 0.85),
            duration_s: between(rng, 5.0, 60.0),
        },
        "clock_drop" => Fault::ClockDrop {
            memory: rng.below(2) == 0,
            factor: between(rng, 0.6, 0.9),
            duration_s: between(rng, 10.0, 60.0),
        },
        "memory_leak" => Fault::MemoryLeak {
            rate_mib_per_s: between(rng, 10.0, 200.0),
        },
        "ecc_uncorrected" => Fault::EccUncorrected {
            count: 1 + rng.below(4) as u64,
        },
        "ecc_corrected_burst" => Fault::EccCorrectedBurst {
            count: 20 + rng.below(480) as u64,
            over_s: between(rng, 5.0, 60.0),
        },
        "pcie_replay_burst" => Fault::PcieReplayBurst {
            count: 10 + rng.below(990) as u64,
            over_s: between(rng, 5.0, 60.0),
        },
        "xid" => Fault::Xid {
            code: pick(rng, &[13, 31, 43, 48, 63, 74, 79, 92, 94, 95, 119]),
        },
        "stuck_sensor" => Fault::StuckSensor {
            signal: pick(rng, &[Signal::TempGpu, Signal::Power, Signal::Energy]),
            duration_s: between(rng, 30.0, 120.0),
        },
        "power_drift" => Fault::PowerDrift {
            factor: between(rng, 0.5, 0.8),
            duration_s: between(rng, 20.0, 60.0),
        },
        // The power sensor alone (the mixed kind above drew none): the case that read as a
        // thermal runaway when the load rose under a reading held at a low power.
        "stuck_power" => Fault::StuckSensor {
            signal: Signal::Power,
            duration_s: between(rng, 30.0, 120.0),
        },
        other => unreachable!("unknown kind {other}"),
    }
}

// New kinds go at the end: the episodes of the others stay the same files.
const KINDS: [&str; 11] = [
    "thermal_runaway",
    "throttle",
    "clock_drop",
    "memory_leak",
    "ecc_uncorrected",
    "ecc_corrected_burst",
    "pcie_replay_burst",
    "xid",
    "stuck_sensor",
    "power_drift",
    "stuck_power",
];

// Allocation patterns of healthy work, after the faults (the files before stay the same).
const PATTERNS: [&str; 3] = [
    "alloc_training_sawtooth",
    "alloc_large_free",
    "alloc_startup_staircase",
];

/// A random allocation pattern of `kind`.
fn pattern(kind: &str, rng: &mut SplitMix) -> Allocation {
    match kind {
        "alloc_training_sawtooth" => Allocation::TrainingSawtooth {
            period_s: between(rng, 2.0, 8.0),
            rise_mib: between(rng, 1024.0, 8192.0),
            duration_s: between(rng, 60.0, 150.0),
        },
        "alloc_large_free" => Allocation::LargeFree {
            size_mib: between(rng, 4096.0, 40960.0),
            hold_s: between(rng, 10.0, 60.0),
            refill_after_s: between(rng, 5.0, 30.0),
        },
        "alloc_startup_staircase" => Allocation::StartupStaircase {
            step_mib: between(rng, 256.0, 2048.0),
            every_s: between(rng, 1.0, 3.0),
            steps: 5 + rng.below(16) as u32,
        },
        other => unreachable!("unknown pattern {other}"),
    }
}

fn main() {
    let out = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("eval"));
    let episodes_dir = out.join("episodes");
    std::fs::create_dir_all(&episodes_dir).expect("creating the output folder");
    let base = repeat(&parse_trace(HEALTHY).expect("the fixture parses"), 2);
    let last_t = base.last().expect("non-empty").t;
    let mut rng = SplitMix::new(SEED);
    let mut labels = String::from("episode,kind,start_t,end_t,temp_offset_c,fault\n");
    let write = |name: &str, samples: &[Sample]| {
        let file = std::fs::File::create(episodes_dir.join(format!("{name}.csv"))).expect("create");
        let mut w =
            TraceWriter::new(std::io::BufWriter::new(file), Columns::Extended).expect("header");
        for s in samples {
            w.write(s).expect("row");
        }
        w.finish().expect("flush");
    };
    for i in 0..HEALTHY_EPISODES {
        let name = format!("healthy-{i:02}");
        let (samples, offset) = perturb(&base, &mut rng);
        write(&name, &samples);
        writeln!(labels, "{name},healthy,,,{offset},").unwrap();
    }
    for kind in KINDS {
        for i in 0..PER_KIND {
            let name = format!("{kind}-{i:02}");
            let (samples, offset) = perturb(&base, &mut rng);
            let f = fault(kind, &mut rng);
            // Where the fault can start: anywhere after the first 30 s, leaving a leak two
            // minutes to grow; an SM clock drop only where the GPU is fully loaded without the
            // power cap (anywhere else nothing holds the SM clock up to see it drop).
            let eligible: Vec<f64> = samples
                .iter()
                .filter(|s| s.t >= 30.0)
                .filter(|s| match &f {
                    Fault::MemoryLeak { .. } => s.t <= last_t - 150.0,
                    Fault::ClockDrop { memory: false, .. } => {
                        s.util_gpu_pct.is_some_and(|u| u >= 90.0)
                            && s.clock_reasons
                                .is_some_and(|r| r & reasons::SW_POWER_CAP == 0)
                            && s.t <= last_t - 20.0
                    }
                    _ => s.t <= last_t - 30.0,
                })
                .map(|s| s.t)
                .collect();
            let start = eligible[rng.below(eligible.len())];
            let end = f.duration_s().map_or(last_t, |d| (start + d).min(last_t));
            let faulty = inject(&samples, &f, start);
            write(&name, &faulty);
            let json = serde_json::to_string(&f).expect("fault serializes");
            writeln!(
                labels,
                "{name},{kind},{start},{end:.3},{offset},\"{}\"",
                json.replace('"', "\"\"")
            )
            .unwrap();
        }
    }
    for kind in PATTERNS {
        for i in 0..PER_KIND {
            let name = format!("{kind}-{i:02}");
            let (samples, offset) = perturb(&base, &mut rng);
            let p = pattern(kind, &mut rng);
            let eligible: Vec<f64> = samples
                .iter()
                .filter(|s| s.t >= 30.0 && s.t <= last_t - 60.0)
                .map(|s| s.t)
                .collect();
            let start = eligible[rng.below(eligible.len())];
            write(&name, &allocate(&samples, &p, start));
            let json = serde_json::to_string(&p).expect("pattern serializes");
            writeln!(
                labels,
                "{name},{kind},{start},{last_t:.3},{offset},\"{}\"",
                json.replace('"', "\"\"")
            )
            .unwrap();
        }
    }
    std::fs::write(out.join("labels.csv"), labels).expect("writing labels");
    println!(
        "wrote {} episodes to {}",
        HEALTHY_EPISODES + (KINDS.len() + PATTERNS.len()) * PER_KIND,
        out.display()
    );
}
