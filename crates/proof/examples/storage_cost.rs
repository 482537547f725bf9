//! Benchmark harness for the proof of storage's CPU side on this host: one item's generation
//! (what a host without the chunk pays, and the validator per regenerated item) at the
//! default shape and at other double-round counts, against the classes' bounds and the NVMe
//! class's floor (the tightest per-host bound), the build's throughput on one core, a
//! walk step's hashing, and the validator's cost of checking a round's openings, with the
//! bytes on the wire. The reads themselves are the agent's (`pog prove --proof storage`).
//! Run with `cargo run --release -p pog-proof --example storage_cost [-- runs]`.

use pog_proof::challenge::Addressee;
use pog_proof::storage::{
    item, step, DeviceClass, MemoryDataset, StorageDataset, StoragePlan, StorageShape, CHUNK_BYTES,
    DOUBLE_ROUNDS, REGENERATED, SAMPLES,
};
use std::convert::Infallible;
use std::time::Instant;

/// Median of `xs` (sorted in place).
fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5);
    let to = Addressee::shape_only(&"GPU-bench".parse().expect("uuid"), "0");
    let floor = StoragePlan {
        read_us: DeviceClass::Nvme.floor_us(),
        ..StoragePlan::for_class(DeviceClass::Nvme)
    };
    println!("| double rounds | item KiB | item ms (median of {runs}) | build MB/s/core | × NVMe bound (250 µs) | × NVMe floor, a host's tightest bound ({:.0} µs) | × SSD bound (1 ms) |", floor.read_us);
    println!("|---|---|---|---|---|---|---|");
    for (class, rounds) in [
        (DeviceClass::Nvme, 4),
        (DeviceClass::Nvme, DOUBLE_ROUNDS),
        (DeviceClass::Nvme, 16),
        (DeviceClass::Ssd, DOUBLE_ROUNDS),
    ] {
        let shape = StorageShape {
            double_rounds: rounds,
            ..class.shape(1 << 20).expect("1 MiB")
        };
        let d = StorageDataset::new([1; 32], to.clone(), shape);
        let key = d.key();
        let mut ms: Vec<f64> = (0..runs as u64)
            .map(|i| {
                let t = Instant::now();
                std::hint::black_box(item(&key, &shape, i));
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        let item_ms = median(&mut ms);
        let mb_s = shape.item_bytes() as f64 / item_ms / 1e3;
        let nvme = StoragePlan::for_class(DeviceClass::Nvme).regeneration_margin(item_ms * 1e3);
        let ssd = StoragePlan::for_class(DeviceClass::Ssd).regeneration_margin(item_ms * 1e3);
        let tightest = floor.regeneration_margin(item_ms * 1e3);
        println!(
            "| {rounds} | {} | {item_ms:.3} | {mb_s:.1} | {nvme:.1} | {tightest:.1} | {ssd:.1} |",
            shape.item_bytes() / 1024
        );
    }

    // A walk step's hash of one chunk.
    let chunk = vec![7u8; CHUNK_BYTES];
    let n = 20_000;
    let t = Instant::now();
    let mut d = [0u8; 32];
    for i in 0..n {
        d = step(&d, i, u64::from(i), &chunk);
    }
    std::hint::black_box(d);
    println!(
        "walk step hash: {:.2} µs a 4 KiB chunk",
        t.elapsed().as_secs_f64() * 1e6 / f64::from(n)
    );

    // The validator's check of one round at the default plan on a 64 MiB set (the size
    // changes only the paths' length: 14 hashes here, 28 at 1 TiB).
    let shape = StorageShape::for_bytes(64 << 20).expect("64 MiB");
    let d = StorageDataset::new([1; 32], to, shape);
    let t = Instant::now();
    let set = MemoryDataset::build(&d);
    let build_s = t.elapsed().as_secs_f64();
    println!(
        "built 64 MiB in memory on one core in {build_s:.2} s ({:.1} MB/s, tree included)",
        64.0 * 1.048_576 / build_s
    );
    let plan = StoragePlan::for_class(DeviceClass::Nvme);
    let round = pog_proof::storage::StorageRound {
        dataset: d.clone(),
        root: set.root(),
        nonce: [5; 32],
        steps: plan.steps,
    };
    let t = Instant::now();
    let walk = round
        .walk(|i| Ok::<_, Infallible>(set.chunk(i).expect("in range").to_vec()))
        .expect("in memory");
    let walk_ms = t.elapsed().as_secs_f64() * 1e3;
    let secret = [6; 32];
    let mut verify = Vec::new();
    let mut bytes = 0;
    for _ in 0..runs {
        let t = Instant::now();
        let request = round.draw(&walk, &secret, SAMPLES).expect("drawn");
        let openings = set.open_steps(&round, &walk, &request).expect("opened");
        let open_ms = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        round
            .check_openings(&walk, &request, &openings, (&secret, REGENERATED))
            .expect("honest");
        verify.push(t.elapsed().as_secs_f64() * 1e3);
        bytes = serde_json::to_vec(&walk).expect("json").len()
            + serde_json::to_vec(&openings).expect("json").len();
        std::hint::black_box(open_ms);
    }
    println!(
        "round of {} steps from memory: walk {walk_ms:.1} ms (hashing only); validator check of {SAMPLES} openings with {REGENERATED} items regenerated: {:.2} ms (median of {runs}); agent → validator {:.0} KiB as JSON (base64)",
        plan.steps,
        median(&mut verify),
        bytes as f64 / 1024.0
    );
}
