//! The proof of storage on this host's disk, honest and attacked, at the default shape for
//! the NVMe class: builds a data set of SIZE MiB in DIR (a temporary directory under it,
//! removed at the end), then walks rounds of the default 1024 steps honestly (`O_DIRECT`),
//! through the page cache, with half the data set (the other half regenerated), with none
//! (everything regenerated), with the second half read as zeros (a sparse file), and from a
//! second host RTT µs away; each as its ratio to the class's bound and to the host's own
//! bound (twice its fastest honest walk a step, between the class's floor and read: what a
//! validator holds the host to once it has walked a round in time), a round passing at ≤ 1.1;
//! and the validator's costs. Run with
//! `cargo run --release -p pog-local --example storage_attacks -- DIR [SIZE_MIB] [RTT_US]`.

use pog_local::storage::{StorageHostError, StoredDataset};
use pog_proof::challenge::Addressee;
use pog_proof::storage::{
    ChunkOpening, DeviceClass, StorageDataset, StorageOpenings, StoragePlan, StorageRound,
    StorageWalk, AUDIT_SAMPLES, CHUNK_BYTES, REGENERATED,
};
use pog_proof::timing::TIME_TOLERANCE;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(base) = args.next() else {
        eprintln!("usage: storage_attacks DIR [SIZE_MIB] [RTT_US]");
        std::process::exit(2);
    };
    let mib: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(128);
    let rtt_us: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(100);
    let dir = tempfile::tempdir_in(&base).expect("a scratch directory in DIR");
    let class = DeviceClass::Nvme;
    let shape = class.shape(mib << 20).expect("a size of whole items");
    let to = Addressee::shape_only(&"GPU-bench".parse().expect("uuid"), "0");
    let dataset = StorageDataset::new([1; 32], to, shape);
    let stored = StoredDataset::build(dir.path(), &dataset).expect("built");
    let meta = stored.meta();
    println!(
        "data set: {mib} MiB ({} items of {} KiB) on {}, O_DIRECT {}; built in {:.2} s on {} threads ({:.0} MB/s)",
        shape.items,
        shape.item_bytes() / 1024,
        meta.filesystem,
        stored.direct(),
        meta.build_ms / 1e3,
        meta.build_threads,
        shape.bytes() as f64 / meta.build_ms / 1e3
    );
    let plan = StoragePlan::for_class(class);
    let mut nonce = 0u8;
    let mut round = || {
        nonce += 1;
        stored.round([nonce; 32], plan.steps)
    };
    let timed = |round: &StorageRound,
                 read: &mut dyn FnMut(u64) -> Result<Vec<u8>, StorageHostError>| {
        let t = Instant::now();
        let walk = round.walk(read).expect("walked");
        let ms = t.elapsed().as_secs_f64() * 1e3;
        (walk, ms / plan.expected_ms(), ms)
    };
    let half = shape.chunks() / 2;
    // The host's own pace: the fastest of its honest walks a step (as a validator keeps the
    // fastest accepted round), and the bound it then holds the host to.
    let honest: Vec<(StorageWalk, f64, f64)> = (0..5)
        .map(|_| timed(&round(), &mut |i| stored.read_chunk(i)))
        .collect();
    let best_step_us = honest
        .iter()
        .map(|(_, _, ms)| ms * 1e3 / f64::from(plan.steps))
        .fold(f64::INFINITY, f64::min);
    let host = StoragePlan::for_host(class, Some(best_step_us));
    println!(
        "host pace: {best_step_us:.1} µs a step (fastest of 5 honest walks) → its bound {:.0} µs a step ({:.1} ms), the class's {:.0} µs ({:.0} ms); a round passes at ≤ {:.2}",
        host.read_us,
        host.expected_ms(),
        plan.read_us,
        plan.expected_ms(),
        1.0 + TIME_TOLERANCE
    );
    println!(
        "| walk ({} steps) | ms | ratio to the class's bound | ratio to the host's bound | verdict (host's bound) |",
        plan.steps,
    );
    println!("|---|---|---|---|---|");
    let report = |what: &str, (_, ratio, ms): &(StorageWalk, f64, f64)| {
        let own = ms / host.expected_ms();
        let verdict = if own <= 1.0 + TIME_TOLERANCE {
            "pass"
        } else {
            "fail"
        };
        println!("| {what} | {ms:.1} | {ratio:.3} | {own:.3} | {verdict} |");
    };
    for walk in &honest {
        report("honest, O_DIRECT", walk);
    }
    // Through the page cache (the file was just written: most of it is cached).
    let cached = std::fs::File::open(dir.path().join("dataset.bin")).expect("open");
    let mut buffered = |i: u64| {
        let mut b = vec![0; CHUNK_BYTES];
        cached
            .read_exact_at(&mut b, i * CHUNK_BYTES as u64)
            .map_err(|e| StorageHostError::BadRequest(e.raw_os_error().unwrap_or(0) as u32))?;
        Ok(b)
    };
    report("through the page cache", &timed(&round(), &mut buffered));
    report(
        "half the data set, the rest regenerated",
        &timed(&round(), &mut |i| {
            if i < half {
                stored.read_chunk(i)
            } else {
                Ok(dataset.chunk(i))
            }
        }),
    );
    report(
        "no data set, every chunk regenerated",
        &timed(&round(), &mut |i| Ok(dataset.chunk(i))),
    );
    let r = round();
    let sparse = timed(&r, &mut |i| {
        if i < half {
            stored.read_chunk(i)
        } else {
            Ok(vec![0; CHUNK_BYTES])
        }
    });
    report("sparse: the second half zeros", &sparse);
    let secret = [7; 32];
    let request = r.draw(&sparse.0, &secret, plan.samples).expect("drawn");
    let openings = StorageOpenings {
        chunks: request
            .steps
            .iter()
            .map(|&t| {
                let index = r.chunk_at(&sparse.0, t).expect("in range");
                ChunkOpening {
                    index,
                    bytes: if index < half {
                        stored.read_chunk(index).expect("read")
                    } else {
                        vec![0; CHUNK_BYTES]
                    },
                    path: stored.path(index).expect("path"),
                }
            })
            .collect(),
    };
    println!(
        "sparse walk's openings: {:?}",
        r.check_openings(&sparse.0, &request, &openings, (&secret, REGENERATED))
            .err()
    );
    report(
        &format!("a second host {rtt_us} µs away (after the honest walks)"),
        &timed(&round(), &mut |i| {
            std::thread::sleep(Duration::from_micros(rtt_us));
            stored.read_chunk(i)
        }),
    );

    // The validator's costs: the audit, and one round's checks.
    let drawn = dataset.audit_draw(&meta.root, &secret, AUDIT_SAMPLES);
    let opened: Vec<ChunkOpening> = drawn
        .iter()
        .map(|&i| stored.open_chunk(i).expect("opened"))
        .collect();
    let t = Instant::now();
    for o in &opened {
        dataset.check_chunk(&meta.root, o).expect("honest");
    }
    let audit_ms = t.elapsed().as_secs_f64() * 1e3;
    let r = round();
    let (walk, _, _) = timed(&r, &mut |i| stored.read_chunk(i));
    let request = r.draw(&walk, &secret, plan.samples).expect("drawn");
    let t = Instant::now();
    let openings = stored.open_steps(&r, &walk, &request).expect("opened");
    let open_ms = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    r.check_openings(&walk, &request, &openings, (&secret, REGENERATED))
        .expect("honest");
    let verify_ms = t.elapsed().as_secs_f64() * 1e3;
    let bytes = serde_json::to_vec(&walk).map_or(0, |v| v.len())
        + serde_json::to_vec(&openings).map_or(0, |v| v.len());
    println!(
        "validator: audit of {AUDIT_SAMPLES} chunks {audit_ms:.0} ms (once a data set); a round's check of {} openings with {REGENERATED} items regenerated {verify_ms:.2} ms; agent: openings read in {open_ms:.1} ms; {:.0} KiB agent → validator (JSON)",
        request.steps.len(),
        bytes as f64 / 1024.0
    );
}
