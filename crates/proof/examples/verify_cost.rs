//! Benchmark harness: the validator's CPU cost and the answer's bytes for one GEMM challenge
//! of each H200 plan (BF16, FP16, INT8 at the sizes and batches `params::plan_at` gives the
//! H200 SXM), 1024 spot checks, against the budgets of issue 23: 10 ms of one core and 1 MiB
//! each way. Per plan it measures
//! - the recomputation of the 1024 drawn elements (`SeededGemm::reference`);
//! - the openings as they travel (challenge version 8, `wire::Openings`: 256-byte leaves, INT8's
//!   outputs by their low 16 bits, the opened leaves end to end and one multiproof, raw bytes
//!   after a signed BLAKE3 digest): the frame's head and its signature, the bytes' digest, the
//!   leaf hashes, the multiproof's verification, and the frame's bytes;
//!
//! and then the proof of memory's per-model challenge of an H200 (128 walkers, each 64 items
//! recomputed). Openings are synthetic (random bytes and hashes, with the root they lead to):
//! the work and the bytes are those of real ones (a frame's length depends only on the
//! leaves asked and the tree's size). Run with
//! `cargo run --release -p pog-proof --example verify_cost`.

use pog_merkle::{multiproof, Blake3, Hash, TreeHasher};
use pog_proof::challenge::{Addressee, Challenge, CHALLENGE_VERSION};
use pog_proof::verify::draw_samples;
use pog_proof::wire::Openings;
use pog_spec::{Precision, SpecDb};
use std::time::Instant;

/// Validator CPU per GEMM challenge (issue 23, item 2).
const BUDGET_MS: f64 = 10.0;
/// Bytes each way per GEMM challenge (issue 23, item 3).
const BUDGET_BYTES: usize = 1 << 20;

fn addressee() -> Addressee {
    Addressee {
        gpu_uuid: "GPU-bench".parse().expect("a GPU UUID"),
        gpu_bus_id: "00000000:00:06.0".into(),
        agent_key: pog_signed::PublicKey::from([0xaa; 32]),
        validator_key: pog_signed::PublicKey::from([0xbb; 32]),
    }
}

/// Three runs of `f`: the first one's ms (what a validator verifying one challenge cold pays:
/// `pog prove`'s in-process verification is such a run), the best one's (the steady cost of
/// a validator verifying challenge after challenge; a VM's first pass also measures its clock
/// ramping up), and the last run's value.
fn three_runs<T>(mut f: impl FnMut() -> T) -> (f64, f64, T) {
    let mut times = [0.0; 3];
    let mut out = None;
    for time in &mut times {
        let started = Instant::now();
        out = Some(f());
        *time = started.elapsed().as_secs_f64() * 1e3;
    }
    let best = times.iter().copied().fold(f64::INFINITY, f64::min);
    (times[0], best, out.expect("three runs"))
}

fn main() {
    let db = SpecDb::embedded();
    let h200 = db.by_model("H200 SXM").expect("in the database");
    let signer = pog_signed::Identity::from_seed([1; 32]);
    println!(
        "budgets: {BUDGET_MS} ms of one core, {} KiB each way",
        BUDGET_BYTES / 1024
    );
    for precision in [Precision::Bf16, Precision::Fp16, Precision::Int8] {
        let plan = pog_proof::params::plan_at(h200, db, precision).expect("an H200 plan");
        let challenge = Challenge {
            version: CHALLENGE_VERSION,
            nonce: [1; 32],
            to: addressee(),
            precision,
            size: plan.size,
            batch: plan.batch,
            leaf_elements: pog_proof::params::leaf_elements(precision),
        };
        let samples = draw_samples(
            &challenge,
            &[2; 32],
            &[3; 32],
            pog_proof::soundness::DEFAULT_SAMPLES,
        );
        let (recompute_first_ms, recompute_ms, sink) = three_runs(|| {
            samples
                .iter()
                .map(|p| challenge.gemm(p.gemm).reference(p.row, p.col).value)
                .sum::<f64>()
        });
        let (openings_first_ms, openings_ms, bytes) = openings_cost(&challenge, &signer);
        let total = recompute_ms + openings_ms;
        let first = recompute_first_ms + openings_first_ms;
        println!(
            "{precision:?} n = {} ×{}: recompute {} elements {recompute_ms:.1} ms [{sink:.0}]; \
             openings ({} B leaves, multiproof, frame) {openings_ms:.1} ms, {} KiB; \
             total {total:.1} ms ({:.2} of {BUDGET_MS} ms; the first of three runs {first:.1} ms), \
             {:.2} of 1 MiB",
            plan.size,
            plan.batch,
            samples.len(),
            challenge.leaf_len(0),
            bytes / 1024,
            total / BUDGET_MS,
            bytes as f64 / BUDGET_BYTES as f64,
        );
    }
    memory_cost();
}

/// Random bytes, reproducibly.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|b| (pog_matgen::hash(seed, b) >> 7) as u8)
        .collect()
}

/// The openings of the leaves holding 1024 drawn elements, as `wire::Openings` carries them.
/// Returns the ms (the first of three runs, and the best) to open the frame (its signed head, the bytes' BLAKE3), split both fields,
/// hash the leaves and verify the multiproof (what `ValidatorSession::on_openings` does
/// besides the values' checks), and the frame's bytes.
fn openings_cost(c: &Challenge, signer: &pog_signed::Identity) -> (f64, f64, usize) {
    let size = c.leaf_count();
    let positions = draw_samples(c, &[2; 32], &[3; 32], 1024);
    let mut leaves: Vec<u64> = positions.iter().map(|p| c.leaf_of(*p).0).collect();
    leaves.sort_unstable();
    leaves.dedup();
    let hashes = multiproof::proof_len(size, &leaves).expect("a proof");
    let proof: Vec<Hash> = (0..hashes as u64)
        .map(|i| Blake3::leaf(&i.to_le_bytes()))
        .collect();
    let bytes: Vec<u8> = leaves
        .iter()
        .flat_map(|l| noise(*l, c.leaf_len(*l)))
        .collect();
    let hashed: Vec<(u64, Hash)> = leaves
        .iter()
        .scan(0, |at, l| {
            let len = c.leaf_len(*l);
            *at += len;
            Some((*l, Blake3::leaf(&bytes[*at - len..*at])))
        })
        .collect();
    let root = multiproof::root_of::<Blake3>(size, &hashed, &proof).expect("the proof's root");
    let message = Openings {
        challenge_id: "0123456789abcdef".into(),
        leaves: bytes.clone(),
        proof: proof.concat(),
    };
    let wire = message.seal(signer).expect("sealed");
    let (first_ms, ms, ok) = three_runs(|| {
        let (message, _) = Openings::open(&wire).expect("a frame");
        let (bytes, proof) = message.split(bytes.len(), hashes).expect("well-formed");
        let mut at = 0;
        let hashed: Vec<(u64, Hash)> = leaves
            .iter()
            .map(|l| {
                let len = c.leaf_len(*l);
                at += len;
                (*l, Blake3::leaf(&bytes[at - len..at]))
            })
            .collect();
        multiproof::verify::<Blake3>(size, &hashed, &proof, &root).is_ok()
    });
    assert!(ok, "the synthetic multiproof must verify");
    (first_ms, ms, wire.len())
}

/// The proof of memory's verification for the H200's per-model plan: every drawn walker
/// recomputed from the keys (its items generated on the CPU).
fn memory_cost() {
    use pog_proof::memory::{plan, SAMPLES, WALK_SECONDS};
    let h200 = SpecDb::embedded()
        .by_model("H200 SXM")
        .expect("in the database");
    let p = plan(h200, WALK_SECONDS, None).expect("an H200 plan");
    let c = p.challenge([1; 32], addressee());
    let walk_key = c.walk_key(&[2; 32]);
    let (recompute_first_ms, recompute_ms, sink) = three_runs(|| {
        let mut sink = 0u8;
        for w in 0..u64::from(SAMPLES) {
            sink ^= c.walker_output(&walk_key, w * 7919 % c.walkers)[0];
        }
        sink
    });
    println!(
        "memory: {SAMPLES} walkers of {} items at {} rounds recomputed in {recompute_ms:.1} ms \
         (the first of three runs {recompute_first_ms:.1} ms) [{sink}]",
        c.steps * c.span,
        c.item_rounds,
    );
}
