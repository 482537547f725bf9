//! The proof of RAM on this host, honest and attacked, at the default walk: builds a data set
//! for a claim of CLAIM MiB on every thread (the honest prover's build, timed), walks it
//! honestly with the prover, then walks the same challenge with the same walk function as a
//! host holding only half of it would: the other half regenerated, read back from a swap file
//! in DIR (`O_DIRECT`: a page-in from the disk per step), or fetched from a second host
//! (a TCP round trip on loopback per step, the least a second host costs). Each walk's time is
//! given as its ratio to the honest walk's and to the honest host's bound (the build's time
//! calibrating it, `ram::bound_after_build`; a host holding half builds half, and its own
//! bound is half as long), with the validator's cost of its spot checks. Run with
//! `cargo run --release -p pog-local --example ram_attacks -- [CLAIM_MIB] [DIR]`.

use pog_proof::memory::arx::{self, ITEM_BYTES, ITEM_WORDS};
use pog_proof::memory::{CpuDataset, MemoryBehaviour, MemoryChallenge, Walk, SAMPLES};
use pog_proof::prover::Prover;
use pog_proof::ram;
use std::io::{Read, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::time::Instant;

/// Bytes of a span (the items one step reads).
fn span_bytes(c: &MemoryChallenge) -> usize {
    c.span as usize * ITEM_BYTES as usize
}

/// Walks every walker of `c` under `walk_nonce` on every thread, reading a step's span with
/// `read_span` (its first item's index, the buffer to fill), and returns the seconds taken.
fn walk_with(
    c: &MemoryChallenge,
    walk_nonce: &[u8; 32],
    read_span: &(dyn Fn(u64, &mut [[u32; ITEM_WORDS]]) + Sync),
) -> f64 {
    let key = c.walk_key(walk_nonce);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    let per = c.walkers.div_ceil(threads);
    let started = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let key = &key;
            s.spawn(move || {
                let mut span = vec![[0u32; ITEM_WORDS]; c.span as usize];
                let mut first = u64::MAX;
                for w in t * per..((t + 1) * per).min(c.walkers) {
                    std::hint::black_box(arx::walk(key, w, (c.steps, c.span), c.items, |i| {
                        let at = i - i % u64::from(c.span);
                        if at != first {
                            read_span(at, &mut span);
                            first = at;
                        }
                        span[(i - at) as usize]
                    }));
                }
            });
        }
    });
    started.elapsed().as_secs_f64()
}

/// Item words as bytes (little-endian), and back.
fn to_bytes(items: &[[u32; ITEM_WORDS]]) -> Vec<u8> {
    items
        .iter()
        .flat_map(|it| it.iter().flat_map(|w| w.to_le_bytes()))
        .collect()
}
fn from_bytes(bytes: &[u8], out: &mut [[u32; ITEM_WORDS]]) {
    for (item, chunk) in out.iter_mut().zip(bytes.chunks_exact(ITEM_BYTES as usize)) {
        for (w, b) in item.iter_mut().zip(chunk.chunks_exact(4)) {
            *w = u32::from_le_bytes(b.try_into().expect("4 bytes"));
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mib: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1024);
    let dir = args.next().unwrap_or_else(|| ".".into());
    let plan = ram::plan(mib << 20, ram::WALKERS, ram::floor_rate()).expect("a claim in range");
    let to = pog_proof::challenge::Addressee::shape_only(&"GPU-bench".parse().expect("uuid"), "0");
    let c = plan.challenge([1; 32], to);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let t = Instant::now();
    let dataset = CpuDataset::build(&c).expect("the claim's data set in memory");
    let build_s = t.elapsed().as_secs_f64();
    println!(
        "claim {mib} MiB: {} items ({:.0} MiB) built in {:.2} s on {threads} threads \
         ({:.0} MB/s, {:.2} µs an item a thread)",
        c.items,
        (c.items * ITEM_BYTES) as f64 / (1 << 20) as f64,
        build_s,
        (c.items * ITEM_BYTES) as f64 / build_s / 1e6,
        build_s * threads as f64 / c.items as f64 * 1e6
    );
    let bytes_read = (c.reads() * ITEM_BYTES) as f64;
    let bound_ms = ram::bound_after_build(&plan, Some(build_s * 1e3));
    println!(
        "walk: {} walkers x {} steps x {} items = {:.0} MiB of reads; bound {bound_ms:.0} ms \
         ({} of the build's time per item read; {:.0} ms at the {} GB/s floor)",
        c.walkers,
        c.steps,
        c.span,
        bytes_read / (1 << 20) as f64,
        ram::BUILD_ALLOWANCE,
        plan.expected_ms,
        ram::RAM_WALK_GBS
    );
    // The prover's honest walk (the agent's: walk, leaves, tree), and the validator's checks.
    let nonce = [2; 32];
    let t = Instant::now();
    let walked = dataset.walk(&nonce, MemoryBehaviour::Honest);
    let prover_s = t.elapsed().as_secs_f64();
    let check = Walk {
        walk_key: c.walk_key(&nonce),
        challenge: c.clone(),
    };
    let t = Instant::now();
    let drawn = check.draw_walkers(&walked.root(), &[9; 32], SAMPLES);
    for p in &drawn {
        std::hint::black_box(c.walker_output(&check.walk_key, p.row));
    }
    let verify_ms = t.elapsed().as_secs_f64() * 1e3;
    println!(
        "honest prover: walk and commit {:.0} ms ({:.2} GB/s of reads; {:.2} of the bound); \
         validator's {SAMPLES} spot checks {verify_ms:.1} ms",
        prover_s * 1e3,
        bytes_read / prover_s / 1e9,
        prover_s * 1e3 / bound_ms
    );
    // The same walk through one read function, honest and attacked.
    let key = c.dataset_key();
    let span = span_bytes(&c);
    let half = c.items / 2 / u64::from(c.span) * u64::from(c.span);
    let memory: Vec<[u32; ITEM_WORDS]> = (0..c.items)
        .map(|i| arx::item(&key, i, c.item_rounds))
        .collect();
    let from_memory = |at: u64, out: &mut [[u32; ITEM_WORDS]]| {
        out.copy_from_slice(&memory[at as usize..at as usize + out.len()]);
    };
    let honest = walk_with(&c, &nonce, &from_memory);
    let regenerated = walk_with(&c, &nonce, &|at, out: &mut [[u32; ITEM_WORDS]]| {
        if at < half {
            from_memory(at, out)
        } else {
            for (j, item) in out.iter_mut().enumerate() {
                *item = arx::item(&key, at + j as u64, c.item_rounds);
            }
        }
    });
    // The upper half on disk, read back a span a step with O_DIRECT (a page-in).
    let swap_path = std::path::Path::new(&dir).join(format!("ram-swap-{}", std::process::id()));
    let swapped = (|| -> std::io::Result<f64> {
        std::fs::write(&swap_path, to_bytes(&memory[half as usize..]))?;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&swap_path)?;
        let page = 4096usize;
        Ok(walk_with(
            &c,
            &nonce,
            &|at, out: &mut [[u32; ITEM_WORDS]]| {
                if at < half {
                    return from_memory(at, out);
                }
                let offset = (at - half) * ITEM_BYTES;
                let aligned = offset / page as u64 * page as u64;
                let mut buffer = vec![0u8; 3 * page];
                let start = buffer.as_ptr().align_offset(page);
                let window = &mut buffer[start..start + 2 * page];
                let want = (offset - aligned) as usize + span;
                let len = want.div_ceil(page) * page;
                file.read_exact_at(&mut window[..len], aligned)
                    .expect("a page of the swap file");
                let from = (offset - aligned) as usize;
                from_bytes(&window[from..from + span], out);
            },
        ))
    })();
    let _ = std::fs::remove_file(&swap_path);
    // The upper half on a second host: one TCP round trip on loopback per step.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let address = listener.local_addr().expect("its address");
    let upper = &memory;
    let remote = std::thread::scope(|s| {
        s.spawn(move || {
            for stream in listener.incoming().take(threads) {
                let mut stream = stream.expect("a connection");
                s.spawn(move || {
                    let mut asked = [0u8; 8];
                    while stream.read_exact(&mut asked).is_ok() {
                        let at = u64::from_le_bytes(asked) as usize;
                        let bytes = to_bytes(&upper[at..at + c.span as usize]);
                        if stream.write_all(&bytes).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        let connections: Vec<_> = (0..threads)
            .map(|_| {
                let s = std::net::TcpStream::connect(address).expect("connected");
                s.set_nodelay(true).expect("no delay");
                std::sync::Mutex::new(s)
            })
            .collect();
        let next = std::sync::atomic::AtomicUsize::new(0);
        thread_local!(static MINE: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) });
        let seconds = walk_with(&c, &nonce, &|at, out: &mut [[u32; ITEM_WORDS]]| {
            if at < half {
                return from_memory(at, out);
            }
            let mine = MINE.with(|m| {
                if m.get() == usize::MAX {
                    m.set(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % threads);
                }
                m.get()
            });
            let mut stream = connections[mine].lock().expect("not poisoned");
            stream.write_all(&at.to_le_bytes()).expect("asked");
            let mut bytes = vec![0u8; span];
            stream.read_exact(&mut bytes).expect("answered");
            from_bytes(&bytes, out);
        });
        drop(connections);
        seconds
    });
    println!("| walk of the same challenge | ms | to the honest walk | to the bound |");
    println!("|---|---|---|---|");
    let row = |name: &str, s: f64| {
        println!(
            "| {name} | {:.0} | {:.2} | {:.2} |",
            s * 1e3,
            s / honest,
            s * 1e3 / bound_ms
        )
    };
    row("honest (all held)", honest);
    row("half held, half regenerated", regenerated);
    match swapped {
        Ok(s) => row("half held, half swapped to DIR (O_DIRECT)", s),
        Err(e) => println!("| half swapped to DIR | not run: {e} | | |"),
    }
    row("half held, half on a second host (loopback TCP)", remote);
}
