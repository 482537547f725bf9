//! Ledger benchmark (a harness, not a timed test): durable appends per second, and proof
//! times from 10³ to 10⁶ records. Run in release:
//!
//! ```text
//! cargo run --release -p pog-ledger --example ledger_bench [-- DIR]
//! ```
//!
//! DIR (default: a fresh folder under the system temp dir, removed afterwards) must be on the
//! disk to measure: fsync costs are the disk's.

use ed25519_dalek::SigningKey;
use pog_ledger::entry::Entry;

use pog_ledger::store::{GroupCommit, Ledger, Log};
use pog_merkle::{leaf_hash, verify_consistency, verify_inclusion};
use pog_signed::RecordKind;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A proof-round record of realistic size (~600 bytes of JSON), signed.
fn record(key: &SigningKey, gpu: usize, n: usize) -> Entry {
    let body = format!(
        r#"{{"version":2,"challenge_id":"{n:032x}","gpu_uuid":"GPU-{gpu:08x}-0000-4000-8000-000000000000","agent":"{}","model":"H200 SXM","simulated":false,"accepted":true,"expected_ms":41.7,"outcome":{{"verdict":"pass","agent_ms":38.2,"round_trip_ms":39.9}},"spot_check_secret":"{}","bytes_to_agent":1432,"bytes_from_agent":38211,"recorded_at_ms":{}}}"#,
        "ab".repeat(32),
        "cd".repeat(32),
        1_796_000_000_000u64 + n as u64
    );
    Entry::sign(RecordKind::ProofRound, body, key).expect("valid record")
}

fn per_second(n: usize, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}

fn main() {
    let base = std::env::args()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::env::temp_dir().join(format!("pog-ledger-bench-{}", std::process::id()))
        });
    let cleanup = std::env::args().nth(1).is_none();
    let key = SigningKey::from_bytes(&[7; 32]);
    println!("pog-ledger bench, data in {}", base.display());

    // 1. Raw log appends, one fsync set (entries, hashes, index) per batch.
    let entry = record(&key, 0, 0).encode();
    println!(
        "\nraw appends ({}-byte entries), durable per batch:",
        entry.len()
    );
    for batch in [1usize, 10, 100, 1000] {
        let dir = base.join(format!("raw{batch}"));
        let log = Log::open(&dir).unwrap();
        let total = (batch * 200).clamp(500, 50_000);
        let slices: Vec<&[u8]> = vec![entry.as_slice(); batch];
        let t = Instant::now();
        let mut done = 0;
        while done < total {
            log.append_batch(&slices).unwrap();
            done += batch;
        }
        let d = t.elapsed();
        println!(
            "  batch {batch:>5}: {:>9.0} appends/s, {:>7.3} ms per durable batch",
            per_second(done, d),
            d.as_secs_f64() * 1e3 / (done / batch) as f64
        );
    }

    // 2. Typed appends through the group-commit writer: producers submit one record each and
    //    wait for durability; signature checked on append.
    println!("\ngroup commit (signature checked, one record per request, caller waits for fsync):");
    let records: Vec<Entry> = (0..40_000).map(|n| record(&key, n % 64, n)).collect();
    for producers in [1usize, 16, 64, 256] {
        let dir = base.join(format!("group{producers}"));
        let ledger = Arc::new(Ledger::open(&dir).unwrap());
        let writer = GroupCommit::start(ledger.clone());
        let per = if producers == 1 {
            500
        } else {
            records.len() / producers
        };
        let t = Instant::now();
        let threads: Vec<_> = (0..producers)
            .map(|p| {
                let h = writer.handle();
                let mine: Vec<Entry> = records[p * per..(p + 1) * per].to_vec();
                std::thread::spawn(move || {
                    for r in mine {
                        h.append(vec![r]).unwrap();
                    }
                })
            })
            .collect();
        for th in threads {
            th.join().unwrap();
        }
        let d = t.elapsed();
        drop(writer);
        println!(
            "  {producers:>3} producers: {:>9.0} appends/s ({} records in {:.2} s)",
            per_second(per * producers, d),
            per * producers,
            d.as_secs_f64()
        );
    }

    // 3. Proof times against trees of 10^3 .. 10^6 entries, from one log of 10^6.
    println!("\nproofs (reading stored hashes; median over 2000 random leaves):");
    let dir = base.join("million");
    let log = Log::open(&dir).unwrap();
    let small: Vec<Vec<u8>> = (0..10_000u32)
        .map(|i| format!("entry {i:08}").repeat(4).into_bytes())
        .collect();
    let t = Instant::now();
    while log.size() < 1_000_000 {
        let slices: Vec<&[u8]> = small.iter().map(|e| e.as_slice()).collect();
        log.append_batch(&slices).unwrap();
    }
    println!(
        "  (filled 10^6 entries in {:.1} s, {:.0} appends/s in batches of 10,000)",
        t.elapsed().as_secs_f64(),
        per_second(1_000_000, t.elapsed())
    );
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for size in [1_000u64, 10_000, 100_000, 1_000_000] {
        let root = log.root_at(size).unwrap();
        let mut prove = Vec::new();
        let mut verify = Vec::new();
        let mut consistency = Vec::new();
        let mut len = 0;
        for _ in 0..2000 {
            let index = next() % size;
            let t = Instant::now();
            let proof = log.inclusion_proof(index, size).unwrap();
            prove.push(t.elapsed());
            len = proof.len();
            let leaf = leaf_hash(&small[(index % 10_000) as usize]);
            let t = Instant::now();
            assert!(verify_inclusion(&leaf, index, size, &proof, &root));
            verify.push(t.elapsed());
            let old = 1 + next() % size;
            let t = Instant::now();
            let cproof = log.consistency_proof(old, size).unwrap();
            consistency.push(t.elapsed());
            if old < size {
                let old_root = log.root_at(old).unwrap();
                assert!(verify_consistency(old, size, &old_root, &root, &cproof));
            }
        }
        let median = |v: &mut Vec<Duration>| {
            v.sort();
            v[v.len() / 2].as_secs_f64() * 1e6
        };
        println!(
            "  size {size:>9}: inclusion proof {:>6.1} µs ({len} hashes), verify {:>6.1} µs, consistency proof {:>6.1} µs",
            median(&mut prove),
            median(&mut verify),
            median(&mut consistency)
        );
    }
    let bytes = |name: &str| {
        std::fs::metadata(dir.join(name))
            .map(|m| m.len())
            .unwrap_or(0)
    };
    println!(
        "  on disk for 10^6 entries: entries {:.1} MB, hashes {:.1} MB, index {:.1} MB",
        bytes("entries") as f64 / 1e6,
        bytes("hashes") as f64 / 1e6,
        bytes("index") as f64 / 1e6
    );
    drop(log);
    if cleanup {
        let _ = std::fs::remove_dir_all(&base);
    }
}
