//! Readers of the validator's log that request tiles and never read them (issue 20, item 3):
//! what their answers hold in memory is bounded by the server's response budget plus a
//! connection's buffers, each source gets only its share, and a reader that does not drain is
//! disconnected, freeing its share; small answers are never refused for it. Memory is measured by counting allocations (the test is
//! alone in this binary, so the count is the server's and its own).

mod common;

use common::{connect_from, Harness, VALIDATOR_SEED};
use pog_ledger::entry::Entry;
use pog_net::serve::{Limits, BUFFER_BYTES, PIECE_BYTES};
use pog_signed::Identity;
use pog_validator::ledger::ValidatorLedger;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The system allocator, counting the bytes allocated and not yet freed.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is passed on unchanged to the system allocator; only a counter is added.
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        std::alloc::System.alloc(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        std::alloc::System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, size: usize) -> *mut u8 {
        LIVE.fetch_add(size as isize - layout.size() as isize, Ordering::Relaxed);
        std::alloc::System.realloc(ptr, layout, size)
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// Bytes allocated and not freed, in MiB.
fn live_mib() -> f64 {
    LIVE.load(Ordering::Relaxed) as f64 / f64::from(1 << 20)
}

/// How long a reader whose socket is full has to take a piece: longer than the steps below
/// take while they count on the readers being connected.
const DRAIN: Duration = Duration::from_secs(6);

/// The entry bundle asked for: 160 entries of about 60 KB (9.2 MiB).
const BUNDLE: &str = "/ledger/tile/entries/000.p/160";

/// A reader from `from` that has asked for the bundle and reads nothing.
fn request_and_never_read(
    rt: &tokio::runtime::Runtime,
    from: [u8; 4],
    addr: SocketAddr,
) -> TcpStream {
    let stream = connect_from(rt, from, addr, Some(4096));
    write!(&stream, "GET {BUNDLE} HTTP/1.1\r\nHost: v\r\n\r\n").unwrap();
    stream
}

/// The bundle read whole from `from`: the status line and the body.
fn get(rt: &tokio::runtime::Runtime, from: [u8; 4], addr: SocketAddr) -> (String, Vec<u8>) {
    get_path(rt, from, addr, BUNDLE)
}

/// `path` read whole from `from`: the status line and the body.
fn get_path(
    rt: &tokio::runtime::Runtime,
    from: [u8; 4],
    addr: SocketAddr,
    path: &str,
) -> (String, Vec<u8>) {
    let stream = connect_from(rt, from, addr, None);
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        &stream,
        "GET {path} HTTP/1.1\r\nHost: v\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = Vec::new();
    (&stream).read_to_end(&mut response).unwrap();
    let head_end = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(response.len(), |p| p + 4);
    let status = String::from_utf8_lossy(&response[..head_end])
        .lines()
        .next()
        .unwrap_or("")
        .to_string();
    (status, response[head_end..].to_vec())
}

#[test]
fn readers_that_never_read_hold_a_bounded_share_and_are_dropped() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let identity = Identity::from_seed(VALIDATOR_SEED);
    let ledger = Arc::new(ValidatorLedger::open(dir.path(), &identity, None).unwrap());
    let entries: Vec<Entry> = (0..160)
        .map(|i| {
            let pad = "x".repeat(60_000);
            let body = format!(r#"{{"gpu_uuid":"GPU-big-{i}","pad":"{pad}"}}"#);
            Entry::from_envelope(&identity.seal_body("benchmark", body)).unwrap()
        })
        .collect();
    ledger.ledger().append(entries).unwrap();
    let bundle = ledger
        .ledger()
        .log()
        .tile(
            &pog_ledger::tiles::TileId::parse_path(BUNDLE.trim_start_matches("/ledger/")).unwrap(),
        )
        .unwrap();
    // Small budgets so that few readers fill them: 16 pieces a source (1 MiB), 64 in all. The
    // maximum connection age is out of the way: only the drain deadline disconnects.
    let limits = Limits {
        max_inflight_response_bytes: 64 * PIECE_BYTES,
        max_inflight_response_bytes_per_source: 16 * PIECE_BYTES,
        response_wait: Duration::from_millis(300),
        drain_timeout: DRAIN,
        max_connection_age: Duration::from_secs(600),
        ..Limits::small_requests()
    };
    let served = rt.block_on(Harness::new().with_ledger_of(ledger).limits(limits).serve());
    let addr = served.addr();
    let before = live_mib();

    // Source 127.0.0.2 fills its share with 16 readers that never read; its 17th request
    // waits its turn, then is told to come back, while another source reads the whole bundle.
    let first_idle = Instant::now();
    let mut idle: Vec<TcpStream> = (0..16)
        .map(|_| request_and_never_read(&rt, [127, 0, 0, 2], addr))
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let started = Instant::now();
    let (status, _) = get(&rt, [127, 0, 0, 2], addr);
    assert!(status.contains(" 503 "), "{status}");
    assert!(started.elapsed() >= Duration::from_millis(300));
    let (status, body) = get(&rt, [127, 0, 0, 9], addr);
    assert!(status.contains(" 200 "), "{status}");
    assert!(body == bundle, "the bundle read in pieces is the log's");
    drop(body);

    // Three more sources fill the server's whole budget: a fifth source is told to come back.
    for source in 3..6 {
        idle.extend((0..16).map(|_| request_and_never_read(&rt, [127, 0, 0, source], addr)));
    }
    std::thread::sleep(Duration::from_millis(500));
    let (status, _) = get(&rt, [127, 0, 0, 9], addr);
    assert!(status.contains(" 503 "), "{status}");
    // Small answers are never refused for the budget: the readers holding it delay the large
    // answers only, never the API (health checks, registrations, reports, orders).
    for path in ["/healthz", "/v1/gpus"] {
        let (status, _) = get_path(&rt, [127, 0, 0, 9], addr, path);
        assert!(status.contains(" 200 "), "{path}: {status}");
    }
    // 64 readers of a 9.2 MiB bundle: what they hold is the budget (4 MiB) and, per
    // connection, hyper's buffers (under 2 × 16 KiB + 64 KiB) — not 64 bundles (590 MiB).
    let held = live_mib() - before;
    let per_connection = 2 * BUFFER_BYTES + PIECE_BYTES;
    let bound = (64 * PIECE_BYTES + 64 * per_connection) as f64 / f64::from(1 << 20);
    assert!(
        held < bound + 2.0,
        "64 readers hold {held:.1} MiB (bound {bound:.1} MiB + 2 MiB of slack)"
    );

    assert!(
        first_idle.elapsed() < DRAIN,
        "the steps took too long to count on the readers"
    );
    // Past the drain deadline every reader that never read is disconnected: it gets what the
    // kernel already had, then the end, short of the bundle.
    std::thread::sleep(DRAIN + Duration::from_secs(1));
    for s in &idle {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut got = Vec::new();
        let end = (&*s).read_to_end(&mut got);
        assert!(
            end.is_ok()
                || end
                    .as_ref()
                    .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
            "a reader that never read is still connected: {end:?}"
        );
        assert!(got.len() < bundle.len(), "{} bytes", got.len());
    }
    drop(idle);
    let after = live_mib() - before;
    assert!(
        after < 2.0,
        "{after:.1} MiB still held after the readers were dropped"
    );
    // The budget is whole again.
    let (status, body) = get(&rt, [127, 0, 0, 2], addr);
    assert!(status.contains(" 200 ") && body == bundle, "{status}");
}
