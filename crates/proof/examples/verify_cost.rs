//! Benchmark harness: the validator's CPU cost of verifying one challenge (n = 16384, and
//! INT8's n = 32768; 1024 checked elements), against the 100 ms budget: recomputing the elements, and the rest of
//! the work per opening (decoding the hex leaf and proof, hashing the leaf, checking its
//! inclusion proof), and the same for the proof of memory's per-model challenge of an H200
//! (128 walkers, each 64 items recomputed). Run with
//! `cargo run --release -p pog-proof --example verify_cost`.

use pog_proof::challenge::{Challenge, CHALLENGE_VERSION};
use pog_proof::verify::draw_samples;
use pog_spec::Precision;
use std::time::Instant;

const BUDGET_MS: f64 = 100.0;

fn main() {
    // Each precision at n = 16384 (the target's size), and INT8 at the 32768 its plans use.
    for (precision, size) in [
        (Precision::Int8, 16384),
        (Precision::Int8, 32768),
        (Precision::Bf16, 16384),
        (Precision::Fp32, 16384),
    ] {
        let c = Challenge {
            version: CHALLENGE_VERSION,
            nonce: [1; 32],
            to: pog_proof::challenge::Addressee {
                gpu_uuid: "GPU-bench".parse().unwrap(),
                gpu_bus_id: "00000000:00:06.0".into(),
                agent_key: pog_signed::PublicKey::from([0xaa; 32]),
                validator_key: pog_signed::PublicKey::from([0xbb; 32]),
            },
            precision,
            size,
            batch: 8,
            leaf_elements: 1024,
        };
        let samples = draw_samples(
            &c,
            &[2; 32],
            &[3; 32],
            pog_proof::soundness::DEFAULT_SAMPLES,
        );
        // The best of three: a VM's first pass also measures its CPU clock ramping up.
        let mut sink = 0.0;
        let recompute_ms = (0..3)
            .map(|_| {
                let started = Instant::now();
                sink = samples
                    .iter()
                    .map(|p| c.gemm(p.gemm).reference(p.row, p.col).value)
                    .sum();
                started.elapsed().as_secs_f64() * 1e3
            })
            .fold(f64::INFINITY, f64::min);
        let leaf_bytes = c.leaf_elements as usize * pog_proof::layout::output_bytes(precision);
        let openings_ms = openings_cost(leaf_bytes, c.leaf_count());
        let total = recompute_ms + openings_ms;
        println!(
            "{precision:?}: {} elements of k = {} recomputed in {recompute_ms:.1} ms, {} openings of {leaf_bytes} bytes decoded, hashed and proven in {openings_ms:.1} ms: {total:.1} ms on one core ({:.2} of the {BUDGET_MS} ms budget) [{sink:.0}]",
            samples.len(),
            c.size,
            samples.len(),
            total / BUDGET_MS
        );
    }
    memory_cost();
}

/// The proof of memory's verification for the H200's per-model plan: every drawn walker
/// recomputed from the keys (its items generated on the CPU), plus the openings' decoding,
/// hashing and inclusion proofs (1 KiB leaves; 128 of them, measured as 1024 and scaled).
fn memory_cost() {
    use pog_proof::challenge::Addressee;
    use pog_proof::memory::{plan, SAMPLES, WALK_SECONDS};
    let h200 = pog_spec::SpecDb::embedded()
        .by_model("H200 SXM")
        .expect("in the database");
    let p = plan(h200, WALK_SECONDS, None).expect("an H200 plan");
    let c = p.challenge(
        [1; 32],
        Addressee {
            gpu_uuid: "GPU-bench".parse().expect("a GPU UUID"),
            gpu_bus_id: "00000000:00:06.0".into(),
            agent_key: pog_signed::PublicKey::from([0xaa; 32]),
            validator_key: pog_signed::PublicKey::from([0xbb; 32]),
        },
    );
    let walk_key = c.walk_key(&[2; 32]);
    let mut sink = 0u8;
    let recompute_ms = (0..3)
        .map(|_| {
            let started = Instant::now();
            for w in 0..u64::from(SAMPLES) {
                sink ^= c.walker_output(&walk_key, w * 7919 % c.walkers)[0];
            }
            started.elapsed().as_secs_f64() * 1e3
        })
        .fold(f64::INFINITY, f64::min);
    // The synthetic openings lie in a full tree: the largest power of two within the leaves.
    let full = 1u64 << c.leaf_count().ilog2();
    let openings_ms = openings_cost(c.leaf_bytes(), full) * f64::from(SAMPLES) / 1024.0;
    let total = recompute_ms + openings_ms;
    println!(
        "memory: {SAMPLES} walkers of {} items at {} rounds recomputed in {recompute_ms:.1} ms, their openings in {openings_ms:.1} ms: {total:.1} ms on one core ({:.2} of the {BUDGET_MS} ms budget) [{sink}]",
        c.steps * c.span,
        c.item_rounds,
        total / BUDGET_MS
    );
}

/// The work per opening besides the recomputation, for 1024 leaves of `leaf_bytes` in a tree
/// of `leaves` leaves: hex decoding (as they travel), leaf hash, inclusion proof. Returns ms.
fn openings_cost(leaf_bytes: usize, leaves: u64) -> f64 {
    use pog_merkle::{leaf_hash, node_hash, verify_inclusion};
    use pog_proof::prover::Opening;
    use pog_proof::wire::WireOpening;
    let depth = pog_merkle::level_sizes(leaves).len() - 1;
    let mut wire = Vec::new();
    let mut roots = Vec::new();
    for i in 0..1024u64 {
        let bytes: Vec<u8> = (0..leaf_bytes as u64)
            .map(|b| (pog_matgen::hash(i, b) >> 7) as u8)
            .collect();
        let proof: Vec<[u8; 32]> = (0..depth).map(|d| leaf_hash(&[d as u8, i as u8])).collect();
        // The root this leaf and proof lead to, at an index in the left-full part of the tree.
        let index = i * (leaves / 1024);
        let mut h = leaf_hash(&bytes);
        for (d, sibling) in proof.iter().enumerate() {
            h = if (index >> d) & 1 == 0 {
                node_hash(&h, sibling)
            } else {
                node_hash(sibling, &h)
            };
        }
        roots.push(h);
        wire.push(WireOpening::from(&Opening {
            leaf: index,
            bytes,
            proof,
        }));
    }
    let started = Instant::now();
    let mut verified = 0;
    for (w, root) in wire.iter().zip(&roots) {
        let o = Opening::try_from(w).expect("well-formed");
        verified += usize::from(verify_inclusion(
            &leaf_hash(&o.bytes),
            o.leaf,
            leaves,
            &o.proof,
            root,
        ));
    }
    let ms = started.elapsed().as_secs_f64() * 1e3;
    assert_eq!(verified, 1024, "every synthetic opening must verify");
    ms
}
