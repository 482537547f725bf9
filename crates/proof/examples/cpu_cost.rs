//! Benchmark harness for the proof of CPU on this host, at the default plan: the calibration
//! lane's time alone, the timed phase with one lane per hardware thread (honest) and with
//! twice as many (a host claiming twice its cores), each as a ratio to the calibration
//! against the allowance; the validator's cost of its spot checks; and the bytes of the
//! openings. Run with `cargo run --release -p pog-proof --example cpu_cost [-- runs]`.

use pog_proof::challenge::Addressee;
use pog_proof::cpu::{CpuBehaviour, CpuCalibrated, CpuPlan, CpuRun, ALL_CORE_ALLOWANCE, SAMPLES};
use pog_proof::prover::Prover;
use pog_proof::timing::TIME_TOLERANCE;
use std::time::Instant;

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(3);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    let limit = ALL_CORE_ALLOWANCE * (1.0 + TIME_TOLERANCE);
    println!("host: {threads} hardware threads; a run passes at ratio ≤ {limit:.3}");
    println!("| lanes | claim | calibration ms | timed ms | ratio | steps/s (timed) | ns/step/lane | verify ms | opened KiB |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for _ in 0..runs {
        for (lanes, claim) in [(threads, "honest"), (2 * threads, "twice the cores")] {
            let challenge = CpuPlan::for_cores(lanes).challenge(
                [1; 32],
                Addressee::shape_only(&"GPU-bench".parse().expect("uuid"), "0"),
            );
            let t = Instant::now();
            let calibrated = CpuCalibrated::run(&challenge);
            let calibration_ms = t.elapsed().as_secs_f64() * 1e3;
            let start = [2; 32];
            let t = Instant::now();
            let prover = calibrated.run_timed(&start, CpuBehaviour::Honest);
            let timed_ms = t.elapsed().as_secs_f64() * 1e3;
            let run = CpuRun::new(challenge.clone(), start);
            let root = prover.root();
            let drawn = run.draw(&root, &[3; 32], SAMPLES);
            let mut leaves: Vec<u64> = drawn.iter().map(|p| run.leaf_of(*p)).collect();
            leaves.sort_unstable();
            leaves.dedup();
            let openings = prover.open(&leaves).expect("leaves in range");
            let opened: usize = openings
                .iter()
                .map(|o| o.bytes.len() + 32 * o.proof.len())
                .sum();
            let t = Instant::now();
            for p in &drawn {
                let o = openings
                    .iter()
                    .find(|o| o.leaf == run.leaf_of(*p))
                    .expect("opened");
                run.check_segment(*p, &o.bytes)
                    .expect("an honest run checks out");
            }
            let verify_ms = t.elapsed().as_secs_f64() * 1e3;
            // The timed phase against the calibration, as the header's limit reads it.
            let ratio = timed_ms / calibration_ms;
            println!(
                "| {lanes} | {claim} | {calibration_ms:.1} | {timed_ms:.1} | {ratio:.3} ({}) | {:.3e} | {:.2} | {verify_ms:.2} | {:.0} |",
                if ratio <= limit { "pass" } else { "fail" },
                challenge.timed_steps() as f64 / (timed_ms / 1e3),
                calibration_ms * 1e6 / challenge.steps as f64,
                opened as f64 / 1024.0,
            );
        }
    }
}
