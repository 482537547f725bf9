//! Benchmark harness for the proof of CPU on this host, at the default plan: for an honest
//! claim (one lane per hardware thread) and a host claiming twice its cores, the calibration
//! (half the claimed lanes at once, the set-up the validator times), the timed phase (every
//! claimed lane at once), their ratio and that ratio over the pass limit (`cpu::PASS_LIMIT`:
//! an honest run shows < 1, a claim of twice the cores > 1); beside it, the timed phase over
//! one lane alone, the rule of CPU version 2 (limit 1.485), for comparison; the validator's
//! cost of its spot checks and the bytes of the openings. A claim of twice the cores runs its
//! calibration on every thread the host has, as such a host must. Run with
//! `cargo run --release -p pog-proof --example cpu_cost [-- runs]`.

use pog_proof::challenge::Addressee;
use pog_proof::cpu::{CpuBehaviour, CpuCalibrated, CpuPlan, CpuRun, PASS_LIMIT, SAMPLES};
use pog_proof::prover::Prover;
use std::time::Instant;

/// Version 2's limit on the timed phase over one lane alone (1.35 × 1.1).
const V2_LIMIT: f64 = 1.485;

/// Milliseconds `f` took, and what it returned.
fn timed<T>(f: impl FnOnce() -> T) -> (f64, T) {
    let t = Instant::now();
    let out = f();
    (t.elapsed().as_secs_f64() * 1e3, out)
}

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(3);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    println!(
        "host: {threads} hardware threads; a run passes at timed / calibration ≤ {PASS_LIMIT:.3} \
         (ratio to the limit ≤ 1)"
    );
    println!("| run | lanes | claim | one lane alone ms | calibration ms (lanes) | timed ms | timed / calibration | to the limit | verdict | timed / one lane (v2, ≤ {V2_LIMIT}) | steps/s (timed) | verify ms | opened KiB |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for run in 1..=runs {
        for (lanes, claim) in [(threads, "honest"), (2 * threads, "twice the cores")] {
            let challenge = CpuPlan::for_cores(lanes).challenge(
                [run as u8; 32],
                Addressee::shape_only(&"GPU-bench".parse().expect("uuid"), "0"),
            );
            // Version 2's reference: one lane alone (the first lane of a one-lane claim).
            let one = CpuPlan::for_cores(1).challenge(challenge.nonce, challenge.to.clone());
            let (one_ms, _) = timed(|| CpuCalibrated::run(&one, CpuBehaviour::Honest));
            // The host has `threads`: a claim beyond them runs on them.
            let behaviour = CpuBehaviour::Threads(threads as usize);
            let (calibration_ms, calibrated) = timed(|| CpuCalibrated::run(&challenge, behaviour));
            let start = [2; 32];
            let (timed_ms, prover) = timed(|| calibrated.run_timed(&start));
            let run_of = CpuRun::new(challenge.clone(), start);
            let root = prover.root();
            let drawn = run_of.draw(&root, &[3; 32], SAMPLES);
            let mut leaves: Vec<u64> = drawn.iter().map(|p| run_of.leaf_of(*p)).collect();
            leaves.sort_unstable();
            leaves.dedup();
            let openings = prover.open(&leaves).expect("leaves in range");
            let opened: usize = openings
                .iter()
                .map(|o| o.bytes.len() + 32 * o.proof.len())
                .sum();
            let (verify_ms, ()) = timed(|| {
                for p in &drawn {
                    let o = openings
                        .iter()
                        .find(|o| o.leaf == run_of.leaf_of(*p))
                        .expect("opened");
                    run_of
                        .check_segment(*p, &o.bytes)
                        .expect("an honest run checks out");
                }
            });
            let ratio = timed_ms / calibration_ms;
            let to_limit = ratio / PASS_LIMIT;
            println!(
                "| {run} | {lanes} | {claim} | {one_ms:.1} | {calibration_ms:.1} ({}) | {timed_ms:.1} | {ratio:.3} | {to_limit:.3} | {} | {:.3} | {:.3e} | {verify_ms:.2} | {:.0} |",
                challenge.calibration_lanes(),
                if to_limit <= 1.0 { "pass" } else { "fail" },
                timed_ms / one_ms,
                challenge.timed_steps() as f64 / (timed_ms / 1e3),
                opened as f64 / 1024.0,
            );
        }
    }
}
