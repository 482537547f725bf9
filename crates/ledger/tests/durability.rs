//! Appends are durable before they are acknowledged, and a crash never corrupts the log: a
//! child process (this test binary, re-executed) appends batches and prints each size once
//! `append_batch` has returned; it is killed with SIGKILL at a random moment, over and over;
//! after each kill the log is reopened and must hold every acknowledged entry, byte for byte,
//! under a tree whose stored hashes match the entries.

use pog_ledger::store::Log;
use pog_merkle::{leaf_hash, verify_consistency, verify_inclusion, Tree};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHILD_ENV: &str = "POG_LEDGER_DURABILITY_CHILD";

/// Entry `i`'s bytes: its index and a length that varies (up to ~600 bytes), so that batches
/// straddle page boundaries.
fn entry(i: u64) -> Vec<u8> {
    let mut e = format!("entry {i};").into_bytes();
    e.resize(16 + (i as usize * 37) % 600, (i % 251) as u8);
    e
}

/// The child: append batches of 1–32 entries forever, announcing each acknowledged size.
fn child(dir: &str) {
    let log = Log::open(std::path::Path::new(dir)).expect("child opens the log");
    let mut next = log.size();
    let mut k = next;
    loop {
        let n = 1 + (k * 7919 % 32);
        k += 1;
        let batch: Vec<Vec<u8>> = (next..next + n).map(entry).collect();
        let slices: Vec<&[u8]> = batch.iter().map(|e| e.as_slice()).collect();
        log.append_batch(&slices).expect("append");
        next += n;
        println!("acked {next}");
    }
}

/// A small deterministic generator for the kill delays.
fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[test]
fn sigkill_never_loses_an_acknowledged_entry() {
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        child(&dir);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let started = Instant::now();
    let mut kills_mid_run = 0;
    let mut previous: Option<(u64, pog_merkle::Hash)> = None;
    let mut expected: Vec<pog_merkle::Hash> = Vec::new();
    for round in 0..120 {
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "sigkill_never_loses_an_acknowledged_entry",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(n) = line.strip_prefix("acked ") {
                    let _ = tx.send(n.parse::<u64>().unwrap());
                }
            }
        });
        // Wait for the first acknowledgement (the child is running and appending), then
        // kill it somewhere in the next 0–8 ms.
        let first = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the child appends");
        std::thread::sleep(Duration::from_micros(xorshift(&mut rng) % 8000));
        child.kill().unwrap(); // SIGKILL
        let status = child.wait().unwrap();
        assert!(!status.success());
        reader.join().unwrap();
        let acked = std::iter::once(first).chain(rx.try_iter()).max().unwrap();
        let log = Log::open(dir.path()).unwrap_or_else(|e| panic!("round {round}: {e}"));
        let size = log.size();
        assert!(
            size >= acked,
            "round {round}: acknowledged {acked}, reopened with {size}"
        );
        if size > acked {
            kills_mid_run += 1; // killed between writing and printing: durable, unannounced
        }
        // The entries written since the last round are there byte for byte (earlier ones
        // were checked before, and the root below covers them all).
        let from = previous.map_or(0, |(old, _)| old.saturating_sub(1));
        for (k, e) in log.entry_range(from, size).unwrap().iter().enumerate() {
            let i = from + k as u64;
            assert_eq!(*e, entry(i), "round {round}: entry {i}");
        }
        // The stored tree is the tree of exactly the entries the child wrote.
        while (expected.len() as u64) < size {
            expected.push(leaf_hash(&entry(expected.len() as u64)));
        }
        let tree = Tree::from_leaf_hashes(expected[..size as usize].to_vec());
        assert_eq!(log.root(), tree.root(), "round {round}");
        let last = size - 1;
        let proof = log.inclusion_proof(last, size).unwrap();
        assert!(verify_inclusion(
            &expected[last as usize],
            last,
            size,
            &proof,
            &tree.root()
        ));
        // Append-only across crashes: consistent with the tree after the previous kill.
        if let Some((old, old_root)) = previous {
            let proof = log.consistency_proof(old, size).unwrap();
            assert!(
                verify_consistency(old, size, &old_root, &tree.root(), &proof),
                "round {round}"
            );
        }
        previous = Some((size, tree.root()));
    }
    eprintln!(
        "120 SIGKILLs in {:.1} s; {} left durable entries past the last acknowledgement; final size {}",
        started.elapsed().as_secs_f64(),
        kills_mid_run,
        previous.unwrap().0
    );
}
