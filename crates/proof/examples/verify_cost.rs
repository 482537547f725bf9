//! Benchmark harness: the validator's CPU cost and the answer's bytes for one GEMM challenge
//! of each H200 plan (BF16, FP16, INT8 at the sizes and batches `params::plan_at` gives the
//! H200 SXM), 1024 spot checks, against the budgets of issue 23: 10 ms of one core and 1 MiB
//! each way. Per plan it measures
//! - the recomputation of the 1024 drawn elements (`SeededGemm::reference`);
//! - the openings as they travel today (wire v2: one hex leaf of 1024 elements and a hex
//!   inclusion proof per drawn element): decoding, leaf hashes, inclusion proofs, and the
//!   signed message's bytes;
//! - the compact layout (128-byte leaves, the opened leaves and one RFC 6962 multiproof,
//!   base64 in the JSON body): decoding, leaf hashes, the multiproof's verification, and the
//!   signed message's bytes;
//!
//! and then the proof of memory's per-model challenge of an H200 (128 walkers, each 64 items
//! recomputed). Openings are synthetic (random bytes and hashes, with the root they lead to):
//! the work and the bytes are those of real ones. Run with
//! `cargo run --release -p pog-proof --example verify_cost`.

use base64::Engine;
use pog_merkle::{leaf_hash, multiproof, node_hash, verify_inclusion, Hash};
use pog_proof::challenge::{Addressee, Challenge, CHALLENGE_VERSION};
use pog_proof::layout::output_bytes;
use pog_proof::prover::Opening;
use pog_proof::verify::draw_samples;
use pog_proof::wire::WireOpening;
use pog_spec::{Precision, SpecDb};
use std::time::Instant;

/// Validator CPU per GEMM challenge (issue 23, item 2).
const BUDGET_MS: f64 = 10.0;
/// Bytes each way per GEMM challenge (issue 23, item 3).
const BUDGET_BYTES: usize = 1 << 20;
/// The compact layout's leaf: 128 bytes (64 BF16/FP16 or 32 INT8 outputs).
const COMPACT_LEAF_BYTES: usize = 128;

fn addressee() -> Addressee {
    Addressee {
        gpu_uuid: "GPU-bench".parse().expect("a GPU UUID"),
        gpu_bus_id: "00000000:00:06.0".into(),
        agent_key: pog_signed::PublicKey::from([0xaa; 32]),
        validator_key: pog_signed::PublicKey::from([0xbb; 32]),
    }
}

/// The best of three runs of `f`, in ms (a VM's first pass also measures its clock ramping up).
fn best_of_three<T>(mut f: impl FnMut() -> T) -> (f64, T) {
    let mut best = f64::INFINITY;
    let mut out = None;
    for _ in 0..3 {
        let started = Instant::now();
        let value = f();
        best = best.min(started.elapsed().as_secs_f64() * 1e3);
        out = Some(value);
    }
    (best, out.expect("three runs"))
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
        let challenge = |leaf_elements: u32| Challenge {
            version: CHALLENGE_VERSION,
            nonce: [1; 32],
            to: addressee(),
            precision,
            size: plan.size,
            batch: plan.batch,
            leaf_elements,
        };
        let today = challenge(pog_proof::params::LEAF_ELEMENTS);
        let samples = draw_samples(
            &today,
            &[2; 32],
            &[3; 32],
            pog_proof::soundness::DEFAULT_SAMPLES,
        );
        let (recompute_ms, sink) = best_of_three(|| {
            samples
                .iter()
                .map(|p| today.gemm(p.gemm).reference(p.row, p.col).value)
                .sum::<f64>()
        });
        let (hex_ms, hex_bytes) = hex_openings(&today, &signer);
        let compact = challenge((COMPACT_LEAF_BYTES / output_bytes(precision)) as u32);
        let (compact_ms, compact_bytes) = compact_openings(&compact, &signer);
        let total = recompute_ms + compact_ms;
        println!(
            "{precision:?} n = {} ×{}: recompute {} elements {recompute_ms:.1} ms [{sink:.0}]; \
             wire v2 (hex, {} B leaves): openings {hex_ms:.1} ms, {} KiB; \
             compact ({COMPACT_LEAF_BYTES} B leaves, multiproof, base64): openings {compact_ms:.1} ms, {} KiB; \
             total {total:.1} ms ({:.2} of {BUDGET_MS} ms), {:.2} of 1 MiB",
            plan.size,
            plan.batch,
            samples.len(),
            today.leaf_len(0),
            hex_bytes / 1024,
            compact_bytes / 1024,
            total / BUDGET_MS,
            compact_bytes as f64 / BUDGET_BYTES as f64,
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

/// Today's openings (wire v2) of the leaves holding 1024 drawn elements: the signed message's
/// bytes, and the ms to decode the hex, hash each leaf and check each inclusion proof.
fn hex_openings(c: &Challenge, signer: &pog_signed::Identity) -> (f64, usize) {
    // A perfect tree as deep as the challenge's: most of its leaves' paths have this length
    // (the left-full part of an RFC 6962 tree).
    let depth = pog_merkle::level_sizes(c.leaf_count()).len() - 1;
    let leaves = 1u64 << depth;
    let mut wire = Vec::new();
    let mut roots = Vec::new();
    for i in 0..1024u64 {
        let bytes = noise(i, c.leaf_len(0));
        let proof: Vec<Hash> = (0..depth).map(|d| leaf_hash(&[d as u8, i as u8])).collect();
        // The root this leaf and proof lead to.
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
    let message = pog_proof::wire::Openings {
        challenge_id: "0123456789abcdef".into(),
        openings: wire.clone(),
    };
    let envelope = signer
        .seal(pog_proof::wire::kind::OPENINGS, &message)
        .expect("sealed");
    let bytes = serde_json::to_vec(&envelope).expect("JSON").len();
    let (ms, verified) = best_of_three(|| {
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
        verified
    });
    assert_eq!(verified, 1024, "every synthetic opening must verify");
    (ms, bytes)
}

/// The compact layout's openings of the leaves holding 1024 drawn elements: the opened leaves
/// end to end and one multiproof, each base64 in the signed JSON body. Returns the ms to
/// decode both, hash the leaves and verify the multiproof, and the signed message's bytes.
fn compact_openings(c: &Challenge, signer: &pog_signed::Identity) -> (f64, usize) {
    let size = c.leaf_count();
    let positions = draw_samples(c, &[2; 32], &[3; 32], 1024);
    let mut leaves: Vec<u64> = positions.iter().map(|p| c.leaf_of(*p).0).collect();
    leaves.sort_unstable();
    leaves.dedup();
    let hashes = multiproof::proof_len(size, &leaves).expect("a proof");
    let proof: Vec<Hash> = (0..hashes as u64)
        .map(|i| leaf_hash(&i.to_le_bytes()))
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
            Some((*l, leaf_hash(&bytes[*at - len..*at])))
        })
        .collect();
    let root = multiproof::root_of(size, &hashed, &proof).expect("the proof's root");
    let b64 = base64::engine::general_purpose::STANDARD;
    let message = serde_json::json!({
        "challenge_id": "0123456789abcdef",
        "leaves": b64.encode(&bytes),
        "proof": b64.encode(proof.concat()),
    });
    let envelope = signer
        .seal(pog_proof::wire::kind::OPENINGS, &message)
        .expect("sealed");
    let wire = serde_json::to_vec(&envelope).expect("JSON");
    let (ms, ok) = best_of_three(|| {
        let (message, _): (serde_json::Value, _) =
            pog_signed::decode(&wire, pog_proof::wire::kind::OPENINGS).expect("decoded");
        let field = |name: &str| b64.decode(message[name].as_str().expect("a string"));
        let bytes = field("leaves").expect("base64");
        let proof: Vec<Hash> = field("proof")
            .expect("base64")
            .chunks_exact(32)
            .map(|h| h.try_into().expect("32 bytes"))
            .collect();
        let mut at = 0;
        let hashed: Vec<(u64, Hash)> = leaves
            .iter()
            .map(|l| {
                let len = c.leaf_len(*l);
                at += len;
                (*l, leaf_hash(&bytes[at - len..at]))
            })
            .collect();
        multiproof::verify(size, &hashed, &proof, &root).is_ok()
    });
    assert!(ok, "the synthetic multiproof must verify");
    (ms, wire.len())
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
    let (recompute_ms, sink) = best_of_three(|| {
        let mut sink = 0u8;
        for w in 0..u64::from(SAMPLES) {
            sink ^= c.walker_output(&walk_key, w * 7919 % c.walkers)[0];
        }
        sink
    });
    println!(
        "memory: {SAMPLES} walkers of {} items at {} rounds recomputed in {recompute_ms:.1} ms [{sink}]",
        c.steps * c.span,
        c.item_rounds,
    );
}
