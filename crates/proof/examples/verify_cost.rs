//! Benchmark harness: the validator's CPU cost of recomputing the checked elements of one
//! challenge (n = 16384, 1024 elements), against the 100 ms budget. Run with
//! `cargo run --release -p pog-proof --example verify_cost`.

use pog_proof::challenge::{Challenge, CHALLENGE_VERSION};
use pog_proof::verify::draw_samples;
use pog_spec::Precision;
use std::time::Instant;

const BUDGET_MS: f64 = 100.0;

fn main() {
    for precision in [Precision::Int8, Precision::Bf16, Precision::Fp32] {
        let c = Challenge {
            version: CHALLENGE_VERSION,
            nonce: [1; 32],
            gpu_uuid: "GPU-bench".into(),
            precision,
            size: 16384,
            batch: 8,
            leaf_elements: 1024,
        };
        let samples = draw_samples(
            &c,
            &[2; 32],
            &[3; 32],
            pog_proof::soundness::DEFAULT_SAMPLES,
        );
        let started = Instant::now();
        let mut sink = 0.0;
        for p in &samples {
            sink += c.gemm(p.gemm).reference(p.row, p.col).value;
        }
        let ms = started.elapsed().as_secs_f64() * 1e3;
        println!(
            "{precision:?}: {} elements of k = {} recomputed in {ms:.1} ms on one core ({:.2} of the {BUDGET_MS} ms budget) [{sink:.0}]",
            samples.len(),
            c.size,
            ms / BUDGET_MS
        );
    }
}
