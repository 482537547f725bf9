//! Load test of one validator (a harness, not a test): the real `pog validator` process, and
//! N agents' GPUs on loopback in this process (CPU prover, the fixed test plan), a share of
//! them hostile (silent or answering junk). It measures what an operator needs to know: rounds
//! per minute, how far honest GPUs' challenge intervals drift from the schedule, the API's p99
//! latency while all this goes on, and the validator's CPU and memory.
//!
//! ```sh
//! cargo build --release && cargo run --release -p pog-validator --example load -- \
//!     --pog target/release/pog --agents 1000 --every 10 --seconds 60 [--attack]
//! ```
//!
//! `--readers N` has N clients read the largest `/v1/records` pages (about 2 MiB of a
//! thousand seeded records each) back to back while measuring: the API's p99 must hold (page
//! reads run off its workers, on connections of their own).
//!
//! `--attack` also floods the API while measuring: 8 source addresses, 60 connections each,
//! half sending request heads a byte every half second, half declaring bodies never sent,
//! each reopened a second after the validator closes it.
//!
//! Each agent registers from its own loopback address (127.0.x.y), as agents on separate hosts
//! would, so the validator's per-source limits apply to each one alone. The agents run in
//! processes of 2,000 (this example again, with `--serve-agents`): each holds a listening
//! socket and the validators' connections, and a process here may hold 20,000 descriptors.
//! `--expiry-ms MS` sets how long an agent has to commit (5000 by default; the test plan's bound
//! is as long).
//!
//! `--validators N --database postgres://…` runs a fleet (issue 22, item 7): N validator
//! processes on one PostgreSQL database, the agents registered with them in turn and trusting
//! them all. It also reports the slot-start skew across the validators (per slot, the spread
//! of the validators' round starts, from their `pog::round` log lines), when GEMM challenges
//! reach honest agents after their slot's start, the API's p99 on each, the database's commits
//! a second and its server processes' CPU, each validator's CPU and RSS; then it kills the
//! first validator and reports how long its GPUs wait until another validator proves them.
//! Each run gets a database of its own on the server of `--database`.
//! `--no-memory` leaves the proof of memory out of the rounds.
//!
//! It also reports what an exchange's next request waited on: at the agents, each request's
//! wait after the answer before it, by the two paths (`/v1/challenge>/v1/open` is a GEMM
//! exchange's next step); in each validator (its `pog::exchange` debug lines and its rounds'
//! start lines), its handling of an answer before the next request, its records' stores and
//! how late its rounds' runtime woke a sleeping task; and, with a database, the window's
//! honest records by outcome (a broken connection by how it broke).

use pog_agent::agent::Agent;
use pog_local::provers::CpuEngine;
use pog_net::serve::Limits;
use pog_proof::prover::Behaviour;
use pog_proof::wire::{kind, GpuClaim, Register};
use pog_signed::Identity;
use std::io::{BufRead, Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What to run.
struct Options {
    pog: String,
    agents: usize,
    every_s: u64,
    seconds: u64,
    /// Share of hostile agents (half silent, half answering junk).
    hostile: f64,
    /// Also attack the API while measuring: half-sent requests and never-finished bodies.
    attack: bool,
    /// Readers reading `/v1/records` pages (up to 1000 records each) back to back while
    /// measuring, each from its own address.
    readers: usize,
    /// Validator processes (more than one needs `database`).
    validators: usize,
    /// The PostgreSQL database the validators share.
    database: Option<String>,
    /// Leave the proof of memory out of the rounds.
    no_memory: bool,
    /// How long an agent has to commit, ms (`pog validator --expiry-ms`; the test plan's
    /// bound is as long).
    expiry_ms: u64,
}

/// The fleet's log key (a fixed test key, in the environment: each validator's data dir is
/// its own). Only a load run's fleet uses it.
const FLEET_LOG_KEY: &str = "6c6f61642d6861726e6573732d666c6565742d6c6f672d6b65792d3030303030";

fn options() -> Options {
    let mut o = Options {
        pog: "target/release/pog".into(),
        agents: 1000,
        every_s: 10,
        seconds: 60,
        hostile: 0.10,
        attack: false,
        readers: 0,
        validators: 1,
        database: None,
        no_memory: false,
        expiry_ms: 5000,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut args = args.into_iter().peekable();
    while let Some(flag) = args.next() {
        if flag == "--attack" {
            o.attack = true;
            continue;
        }
        if flag == "--no-memory" {
            o.no_memory = true;
            continue;
        }
        let value = args.next().unwrap_or_default();
        match flag.as_str() {
            "--pog" => o.pog = value,
            "--agents" => o.agents = value.parse().expect("--agents N"),
            "--every" => o.every_s = value.parse().expect("--every SECONDS"),
            "--seconds" => o.seconds = value.parse().expect("--seconds N"),
            "--hostile" => o.hostile = value.parse().expect("--hostile FRACTION"),
            "--readers" => o.readers = value.parse().expect("--readers N"),
            "--validators" => o.validators = value.parse().expect("--validators N"),
            "--database" => o.database = Some(value),
            "--expiry-ms" => o.expiry_ms = value.parse().expect("--expiry-ms MS"),
            other => panic!("unknown option {other}"),
        }
    }
    assert!(
        o.validators == 1 || o.database.is_some(),
        "--validators N needs --database postgres://…"
    );
    o
}

/// A running `pog validator` of the harness.
struct Running {
    child: std::process::Child,
    addr: std::net::SocketAddr,
    key: pog_signed::PublicKey,
    /// Its rounds' starts as it logs them (`pog::round`): (slot, ms after the slot's start,
    /// ms its claims and dispatch took).
    rounds: Arc<std::sync::Mutex<Vec<(u64, u64, u64)>>>,
    /// What its exchanges waited on, as it logs them.
    waits: Arc<std::sync::Mutex<Waits>>,
}

/// What a validator's exchanges waited on, from its log (`pog::exchange` at debug, and its
/// rounds' start lines): the validator's own handling between an answer in hand and the
/// next request, by the request's path (µs); how long storing each record took, the
/// registry's lock included (ms); per round, how late the rounds' runtime woke a sleeping
/// task at most and in all (ms, by slot).
#[derive(Default)]
struct Waits {
    handled_us: std::collections::BTreeMap<String, Vec<f64>>,
    stored_ms: Vec<f64>,
    stalls: Vec<(u64, u64, u64)>,
}

/// The text of `key=` in a log line.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|field| field.strip_prefix(key)?.strip_prefix('='))
}

/// The value of `key=` in a log line, as a number.
fn logged(line: &str, key: &str) -> Option<u64> {
    field(line, key)?.parse().ok()
}

/// Starts `pog validator` with its data in `data` (and on `o.database`, if given).
fn start_validator(o: &Options, data: &std::path::Path) -> Running {
    let every = o.every_s.to_string();
    let concurrent = (o.agents * 2).to_string();
    let expiry = o.expiry_ms.to_string();
    let mut args = vec![
        "validator",
        "--listen",
        "127.0.0.1:0",
        "--test-plan",
        "--size",
        "32",
        "--samples",
        "64",
        "--expiry-ms",
        &expiry,
        "--allow-private-endpoints",
        "--challenge-every",
        &every,
        "--max-concurrent-challenges",
        &concurrent,
    ];
    if let Some(url) = &o.database {
        args.extend(["--database", url]);
    }
    if o.no_memory {
        args.push("--no-memory-proof");
    }
    let mut child = std::process::Command::new(&o.pog)
        .args(args)
        .env("POG_DATA_DIR", data)
        .envs(o.database.as_ref().map(|_| ("POG_LOG_KEY", FLEET_LOG_KEY)))
        .env("POG_LOG", "warn,pog::round=info,pog::exchange=debug")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starting pog validator");
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let key = pog_signed::PublicKey::parse(
        lines
            .next()
            .unwrap()
            .unwrap()
            .trim_start_matches("validator key: "),
    )
    .expect("the validator's key");
    let listening = lines.next().unwrap().unwrap();
    let addr: std::net::SocketAddr = listening
        .trim_start_matches("listening on ")
        .split(',')
        .next()
        .unwrap()
        .parse()
        .expect("the validator's address");
    std::thread::spawn(move || for _ in lines {}); // keep draining stdout
    let rounds = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = std::io::BufReader::new(child.stderr.take().unwrap());
    let noted = rounds.clone();
    let waits = Arc::new(std::sync::Mutex::new(Waits::default()));
    let waited = waits.clone();
    std::thread::spawn(move || {
        for line in log.lines().map_while(Result::ok) {
            if let (Some(slot), Some(late), Some(dispatched)) = (
                logged(&line, "slot"),
                logged(&line, "late_ms"),
                logged(&line, "dispatched_ms"),
            ) {
                noted.lock().unwrap().push((slot, late, dispatched));
                if let (Some(max), Some(total)) =
                    (logged(&line, "stalled_max_ms"), logged(&line, "stalled_ms"))
                {
                    waited.lock().unwrap().stalls.push((slot, max, total));
                }
            } else if let (Some(step), Some(us)) =
                (field(&line, "step"), logged(&line, "handled_us"))
            {
                let mut w = waited.lock().unwrap();
                w.handled_us
                    .entry(step.to_string())
                    .or_default()
                    .push(us as f64);
            } else if let Some(ms) = logged(&line, "stored_ms") {
                waited.lock().unwrap().stored_ms.push(ms as f64);
            }
        }
    });
    Running {
        child,
        addr,
        key,
        rounds,
        waits,
    }
}

/// CPU seconds of every PostgreSQL server process on this machine.
fn postgres_cpu() -> f64 {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    procs
        .flatten()
        .filter_map(|p| p.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim() == "postgres")
        })
        .map(|pid| usage(pid).0)
        .sum()
}

/// A new, empty database on the server of `url` (`pog_load_<pid>`), and its URL: each run's
/// fleet starts with no registrations, whatever earlier runs left on the server.
fn fresh_database(rt: &tokio::runtime::Runtime, url: &str) -> String {
    let name = format!("pog_load_{}", std::process::id());
    rt.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .expect("the database");
        tokio::spawn(connection);
        for statement in [
            format!("DROP DATABASE IF EXISTS {name}"),
            format!("CREATE DATABASE {name}"),
        ] {
            client
                .batch_execute(&statement)
                .await
                .expect("a database for this run");
        }
    });
    let (server, _) = url.rsplit_once('/').expect("a URL ending in /DATABASE");
    format!("{server}/{name}")
}

/// The database's committed transactions so far.
fn commits(rt: &tokio::runtime::Runtime, url: &str) -> i64 {
    rt.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .expect("the database");
        tokio::spawn(connection);
        client
            .query_one(
                "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()",
                &[],
            )
            .await
            .expect("its statistics")
            .get(0)
    })
}

/// Attackers on the API, from `sources` loopback addresses other than the prober's: each
/// keeps `per_source` connections open, half of them sending a request head a byte at a time,
/// half declaring a 200 KiB body and never sending it; a closed connection is reopened.
fn attack(addr: std::net::SocketAddr, sources: u8, per_source: usize) {
    for source in 0..sources {
        for n in 0..per_source {
            let from = std::net::Ipv4Addr::new(127, 200, source, 1);
            std::thread::spawn(move || loop {
                let Ok(mut s) = connect_from(from, addr) else {
                    std::thread::sleep(Duration::from_millis(200));
                    continue;
                };
                if n % 2 == 0 {
                    for b in b"GET /healthz HTTP/1.1\r\nHost: v\r\n".iter().cycle() {
                        if s.write_all(&[*b]).is_err() {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(500));
                    }
                } else {
                    let head =
                        b"POST /v1/register HTTP/1.1\r\nHost: v\r\nContent-Length: 204800\r\n\r\n";
                    let _ = s.write_all(head);
                    let mut sink = [0u8; 1024];
                    let _ = s.read(&mut sink);
                }
                // Reconnect after a second: attackers that hold what they can, not a
                // reconnect storm (which would be a CPU contest on this one machine).
                std::thread::sleep(Duration::from_secs(1));
            });
        }
    }
}

/// A blocking TCP connection to `to` from the loopback address `from`.
fn connect_from(
    from: std::net::Ipv4Addr,
    to: std::net::SocketAddr,
) -> std::io::Result<std::net::TcpStream> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind((from, 0).into())?;
    let stream = rt.block_on(socket.connect(to))?.into_std()?;
    stream.set_nonblocking(false)?;
    Ok(stream)
}

/// Records of the GPUs the readers read (`GPU-read-N`, one per reader), written into the
/// registry before the validator starts: each gets a thousand real, signed records of about
/// 2 KB, so that every page a reader asks for is the largest the API serves.
fn seed_records(registry: &std::path::Path, gpus: usize) {
    let mut registry = pog_validator::registry::Registry::open(Some(registry)).unwrap();
    let signer = Identity::from_seed([0x5e; 32]);
    for g in 0..gpus {
        for n in 0..1000 {
            let body = pog_records::MissedRound {
                version: pog_records::RECORD_VERSION,
                record_id: format!("seed-{g}-{n}"),
                gpu_uuid: format!("GPU-read-{g}").parse().unwrap(),
                agent: signer.public_key(),
                model: "H200 SXM".into(),
                reason: "x".repeat(1800),
                cause: Default::default(),
                recorded_at_ms: n,
            };
            let envelope = signer
                .seal(pog_signed::RecordKind::RoundMissed.wire_kind(), &body)
                .unwrap();
            let json = serde_json::to_string(&envelope).unwrap();
            registry
                .record(&body.record_id, &body.gpu_uuid, false, &json)
                .unwrap();
        }
    }
}

/// The source address of agent `i`: 127.0.x.y, never 127.0.0.1 (the prober's).
fn source_of(i: usize) -> std::net::IpAddr {
    std::net::IpAddr::V4(std::net::Ipv4Addr::new(
        127,
        1 + (i / 250) as u8,
        0,
        1 + (i % 250) as u8,
    ))
}

/// CPU seconds (user + system) and resident bytes of process `pid`.
fn usage(pid: u32) -> (f64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks: f64 = fields
        .get(11)
        .and_then(|u| u.parse::<f64>().ok())
        .unwrap_or(0.0)
        + fields
            .get(12)
            .and_then(|s| s.parse::<f64>().ok())
            .unwrap_or(0.0);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss_kb: u64 = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0);
    (ticks / 100.0, rss_kb * 1024)
}

/// The q-quantile of `values` (sorted in place).
fn quantile(values: &mut [f64], q: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    values
        .get(((values.len() as f64 - 1.0) * q).round() as usize)
        .copied()
        .unwrap_or(f64::NAN)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, from, count, hb, hostile, fl, fleet] = args.as_slice() {
        if flag == "--serve-agents" && hb == "--hostile-below" && fl == "--fleet" {
            let number = |s: &str| s.parse::<usize>().expect("a number");
            return serve_agents(number(from), number(count), number(hostile), fleet);
        }
    }
    let mut o = options();
    let rt = tokio::runtime::Runtime::new().unwrap();
    if let Some(url) = &o.database {
        o.database = Some(fresh_database(&rt, url));
    }
    let data = tempfile::tempdir().expect("a temporary data dir");
    let mut fleet: Vec<Running> = (0..o.validators)
        .map(|n| {
            let dir = data.path().join(format!("validator-{n}"));
            std::fs::create_dir_all(&dir).unwrap();
            if o.readers > 0 && n == 0 {
                seed_records(&dir.join("registry.sqlite"), o.readers);
            }
            start_validator(&o, &dir)
        })
        .collect();
    let addr = fleet[0].addr;
    let vurl = format!("http://{addr}");
    let hostile = (o.agents as f64 * o.hostile).round() as usize;
    println!(
        "{} validator(s) (first at {vurl}); {} agents ({} hostile), a round every {} s, {} s",
        fleet.len(),
        o.agents,
        hostile,
        o.every_s,
        o.seconds
    );
    let started = Instant::now();
    let mut agent_processes = spawn_agent_processes(&o, &fleet, hostile);
    println!(
        "registered {} agents in {:.1} s",
        o.agents,
        started.elapsed().as_secs_f64()
    );
    if o.attack {
        attack(addr, 8, 60);
        println!("attacking the API from 8 sources, 60 connections each");
    }
    let pages_read = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let reading = Arc::new(std::sync::atomic::AtomicBool::new(true));
    for r in 0..o.readers {
        let (pages_read, reading) = (pages_read.clone(), reading.clone());
        std::thread::spawn(move || {
            let from = std::net::Ipv4Addr::new(127, 201, r as u8, 1);
            while reading.load(std::sync::atomic::Ordering::Relaxed) {
                let Ok(mut s) = connect_from(from, addr) else {
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                };
                let _ = write!(
                    s,
                    "GET /v1/records/GPU-read-{r}?limit=1000 HTTP/1.1\r\nHost: v\r\nConnection: close\r\n\r\n"
                );
                let mut answer = Vec::new();
                if s.read_to_end(&mut answer).is_ok() && answer.starts_with(b"HTTP/1.1 200") {
                    pages_read.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
        });
    }
    if o.readers > 0 {
        println!(
            "{} readers reading /v1/records pages back to back",
            o.readers
        );
    }
    // The prober: each validator's API latency every 50 ms while the rounds run.
    let pids: Vec<u32> = fleet.iter().map(|v| v.child.id()).collect();
    let cpu_before: Vec<f64> = pids.iter().map(|p| usage(*p).0).collect();
    let agent_pids: Vec<u32> = agent_processes.iter().map(|a| a.child.id()).collect();
    let agents_cpu = || agent_pids.iter().map(|p| usage(*p).0).sum::<f64>();
    let agents_cpu_before = agents_cpu();
    let (pg_cpu_before, commits_before) = match &o.database {
        Some(url) => (postgres_cpu(), commits(&rt, url)),
        None => (0.0, 0),
    };
    // What exchanges waited on, from the window's start.
    for agents in &mut agent_processes {
        agents.gaps();
    }
    for v in &fleet {
        *v.waits.lock().unwrap() = Waits::default();
    }
    let measuring = Instant::now();
    let window_start_ms = unix_ms();
    let mut latencies: Vec<Vec<f64>> = vec![Vec::new(); fleet.len()];
    let mut peak_rss = vec![0u64; fleet.len()];
    while measuring.elapsed() < Duration::from_secs(o.seconds) {
        for (n, v) in fleet.iter().enumerate() {
            for path in ["/healthz", "/v1/gpus?limit=100"] {
                let t = Instant::now();
                let Ok(mut s) = std::net::TcpStream::connect(v.addr) else {
                    latencies[n].push(f64::INFINITY);
                    continue;
                };
                write!(
                    s,
                    "GET {path} HTTP/1.1\r\nHost: v\r\nConnection: close\r\n\r\n"
                )
                .unwrap();
                let mut answer = Vec::new();
                let _ = s.read_to_end(&mut answer);
                latencies[n].push(t.elapsed().as_secs_f64() * 1e3);
            }
            peak_rss[n] = peak_rss[n].max(usage(pids[n]).1);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let cpu_after: Vec<f64> = pids.iter().map(|p| usage(*p).0).collect();
    let window_end_ms = unix_ms();
    // When each honest GPU's GEMM challenges arrived, after the start of their slot.
    let mut after_slot_start: Vec<f64> = agent_processes
        .iter_mut()
        .flat_map(AgentProcess::arrivals)
        .filter(|at| (window_start_ms..window_end_ms).contains(at))
        .map(|at| (at % (o.every_s * 1000)) as f64)
        .collect();
    let mut gaps: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
    for (paths, ms) in agent_processes.iter_mut().flat_map(AgentProcess::gaps) {
        gaps.entry(paths).or_default().push(ms as f64);
    }
    let agents_cpu_share = (agents_cpu() - agents_cpu_before) / measuring.elapsed().as_secs_f64();
    let wall = measuring.elapsed().as_secs_f64();
    let database_load = o.database.as_ref().map(|url| {
        (
            (commits(&rt, url) - commits_before) as f64 / wall,
            (postgres_cpu() - pg_cpu_before) / wall,
        )
    });
    let outcomes = o
        .database
        .as_ref()
        .map(|url| outcomes(&rt, url, window_start_ms..window_end_ms, hostile));
    reading.store(false, std::sync::atomic::Ordering::Relaxed);
    // Honest GPUs' challenge times, from the records.
    let honest: Vec<usize> = (hostile..o.agents)
        .step_by((o.agents - hostile).div_ceil(50).max(1))
        .collect();
    let mut intervals = Vec::new();
    let mut challenged = 0usize;
    let mut accepted = 0usize;
    let every_ms = o.every_s * 1000;
    for i in &honest {
        let url = format!("{vurl}/v1/records/GPU-load-{i:05}?limit=1000");
        let page: serde_json::Value =
            rt.block_on(async { reqwest::get(url).await.unwrap().json().await.unwrap() });
        let times: Vec<f64> = page["records"]
            .as_array()
            .unwrap_or_else(|| panic!("GPU-load-{i:05}: no records page: {page}"))
            .iter()
            .filter(|r| r["record"].get("challenge").is_some())
            // The measured window's: a validator's first round starts when it does, inside
            // a slot, and the registration's rounds are not the schedule's.
            .filter(|r| {
                r["record"]["recorded_at_ms"]
                    .as_u64()
                    .is_some_and(|at| at >= window_start_ms)
            })
            .inspect(|r| {
                challenged += 1;
                accepted += usize::from(r["record"]["accepted"] == true);
            })
            .filter_map(|r| r["record"]["recorded_at_ms"].as_f64())
            .collect();
        intervals.extend(times.windows(2).map(|w| (w[1] - w[0]) / 1e3));
    }
    // Score pages (issue 20, item 7): a page of up to 1,000 GPUs' scores, read 20 times; the
    // validator's CPU beyond what its rounds were using, per page.
    let baseline = (cpu_after[0] - cpu_before[0]) / wall;
    let (scores_cpu_before, _) = usage(pids[0]);
    let reading = Instant::now();
    let mut page_bytes = 0usize;
    for _ in 0..20 {
        let url = format!("{vurl}/v1/scores?limit=1000");
        page_bytes = rt.block_on(async {
            reqwest::get(url)
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap()
                .len()
        });
    }
    let read_s = reading.elapsed().as_secs_f64();
    let (scores_cpu_after, _) = usage(pids[0]);
    let per_page_ms =
        ((scores_cpu_after - scores_cpu_before) - baseline * read_s).max(0.0) / 20.0 * 1e3;
    // The fleet's slot starts, from the validators' own lines: per slot of the measured
    // window, the spread of the validators' round starts, and how long each round's claims,
    // reads and dispatch took.
    let mut by_slot: std::collections::HashMap<u64, Vec<u64>> = std::collections::HashMap::new();
    let mut dispatch: Vec<f64> = Vec::new();
    for v in &fleet {
        for (slot, late, dispatched) in v.rounds.lock().unwrap().iter() {
            if slot * every_ms >= window_start_ms && slot * every_ms < window_end_ms {
                by_slot.entry(*slot).or_default().push(*late);
                dispatch.push(*dispatched as f64);
            }
        }
    }
    let spreads: Vec<f64> = by_slot
        .values()
        .filter(|lates| lates.len() > 1)
        .map(|lates| (lates.iter().max().unwrap() - lates.iter().min().unwrap()) as f64)
        .collect();
    let lates: Vec<f64> = by_slot.values().flatten().map(|l| *l as f64).collect();
    // Kill the first validator: how long until its GPUs are proven by another.
    let takeover = (fleet.len() > 1).then(|| {
        let killed = fleet[0].key.to_string();
        let _ = fleet[0].child.kill();
        let _ = fleet[0].child.wait();
        let killed_at = unix_ms() as f64;
        // Poll the sampled GPUs the killed validator held until another has proven each
        // (the live set drops it after two slots), for at most five slots.
        let other = fleet[1].addr;
        let proofs_of = |i: usize| -> Vec<(f64, String)> {
            let url = format!("http://{other}/v1/records/GPU-load-{i:05}?limit=1000");
            let page: serde_json::Value =
                rt.block_on(async { reqwest::get(url).await.unwrap().json().await.unwrap() });
            page["records"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|r| r["record"].get("challenge").is_some())
                .map(|r| {
                    (
                        r["record"]["recorded_at_ms"].as_f64().unwrap_or(0.0),
                        r["record"]["challenge"]["validator_key"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string(),
                    )
                })
                .collect()
        };
        let held: Vec<usize> = honest
            .iter()
            .copied()
            .filter(|i| {
                proofs_of(*i)
                    .iter()
                    .rfind(|(at, _)| *at < killed_at)
                    .is_some_and(|(_, by)| *by == killed)
            })
            .collect();
        let mut waits = vec![f64::INFINITY; held.len()];
        let giving_up = Instant::now() + Duration::from_secs(5 * o.every_s);
        while waits.iter().any(|w| w.is_infinite()) && Instant::now() < giving_up {
            std::thread::sleep(Duration::from_secs(o.every_s.div_ceil(4).max(1)));
            for (n, i) in held.iter().enumerate() {
                if waits[n].is_finite() {
                    continue;
                }
                if let Some((at, _)) = proofs_of(*i).iter().find(|(at, _)| *at > killed_at) {
                    waits[n] = (at - killed_at) / 1e3;
                }
            }
        }
        waits
    });
    for v in &mut fleet {
        let _ = v.child.kill();
        let _ = v.child.wait();
    }
    for agents in &mut agent_processes {
        let _ = agents.child.kill();
        let _ = agents.child.wait();
    }
    let every = o.every_s as f64;
    let rounds_per_minute = if intervals.is_empty() {
        0.0
    } else {
        60.0 / (intervals.iter().sum::<f64>() / intervals.len() as f64)
    };
    let drift_p50 = (quantile(&mut intervals.clone(), 0.5) - every) / every;
    let drift_max = (intervals.iter().copied().fold(0.0, f64::max) - every) / every;
    println!();
    println!("| figure | measured | goal |");
    println!("|---|---|---|");
    println!(
        "| GPUs registered (hostile), validators | {} ({hostile}), {} | 10,000 (10 %), 3 |",
        o.agents,
        fleet.len()
    );
    println!(
        "| rounds per minute (honest GPUs) | {rounds_per_minute:.2} | {:.2} |",
        60.0 / every
    );
    println!(
        "| challenge interval drift, median / max | {:+.1} % / {:+.1} % | ≤ 10 % |",
        100.0 * drift_p50,
        100.0 * drift_max
    );
    println!("| honest challenges accepted | {accepted} of {challenged} | all |");
    if !after_slot_start.is_empty() {
        println!(
            "| GEMM challenges' arrival at honest agents after their slot's start, p50 / p99 / max ({} challenges) | {:.0} / {:.0} / {:.0} ms | p99 < 50 ms |",
            after_slot_start.len(),
            quantile(&mut after_slot_start, 0.5),
            quantile(&mut after_slot_start, 0.99),
            after_slot_start.iter().copied().fold(0.0, f64::max)
        );
    }
    if !spreads.is_empty() {
        println!(
            "| slot-start spread across validators (their rounds' starts), p50 / p99 / max ({} slots) | {:.0} / {:.0} / {:.0} ms | p99 < 50 ms |",
            spreads.len(),
            quantile(&mut spreads.clone(), 0.5),
            quantile(&mut spreads.clone(), 0.99),
            spreads.iter().copied().fold(0.0, f64::max)
        );
        println!(
            "| a round's start after its slot's, p50 / max; its claims, reads and dispatch, p50 / max | {:.0} / {:.0} ms; {:.0} / {:.0} ms | |",
            quantile(&mut lates.clone(), 0.5),
            lates.iter().copied().fold(0.0, f64::max),
            quantile(&mut dispatch.clone(), 0.5),
            dispatch.iter().copied().fold(0.0, f64::max)
        );
    }
    for (n, l) in latencies.iter_mut().enumerate() {
        let (p50, p99) = (quantile(l, 0.5), quantile(l, 0.99));
        println!(
            "| validator {n}: API p50 / p99, CPU, peak RSS | {p50:.1} / {p99:.1} ms, {:.0} % of a core, {:.0} MiB | p99 < 50 ms |",
            100.0 * (cpu_after[n] - cpu_before[n]) / wall,
            peak_rss[n] as f64 / (1u64 << 20) as f64
        );
    }
    println!(
        "| the agents' processes (their proving, on the same cores) | {:.0} % of a core | |",
        100.0 * agents_cpu_share
    );
    if let Some((commits, cpu)) = database_load {
        println!(
            "| database: commits a second, server CPU | {commits:.0}, {:.0} % of a core | |",
            100.0 * cpu
        );
    }
    if let Some(waits) = takeover {
        println!(
            "| the killed validator's GPUs (sampled): proven by another after, p50 / max | {} GPUs: {:.1} / {:.1} s | within a slot ({} s) after the live set drops it |",
            waits.len(),
            quantile(&mut waits.clone(), 0.5),
            waits.iter().copied().fold(0.0, f64::max),
            o.every_s
        );
    }
    println!(
        "| `GET /v1/scores?limit=1000`: CPU / wall per page, size | {per_page_ms:.1} ms / {:.1} ms, {:.2} MiB | |",
        read_s / 20.0 * 1e3,
        page_bytes as f64 / f64::from(1 << 20)
    );
    print_waits(
        &fleet,
        &gaps,
        wall,
        (window_start_ms, window_end_ms, every_ms),
    );
    if let Some(outcomes) = outcomes {
        println!();
        println!("| the window's records, honest GPUs: kind, outcome | count |");
        println!("|---|---|");
        for ((kind, outcome), n) in outcomes {
            println!("| {kind}, {outcome} | {n} |");
        }
    }
}

/// `p50 / p99 / max` of `values`, with `unit`, and how many.
fn spread(values: &mut [f64], unit: &str) -> String {
    if values.is_empty() {
        return "none".into();
    }
    let max = values.iter().copied().fold(0.0, f64::max);
    format!(
        "{:.1} / {:.1} / {max:.1} {unit} ({})",
        quantile(values, 0.5),
        quantile(values, 0.99),
        values.len()
    )
}

/// What an exchange's next step waited on in the measured window: at the agents, the wait
/// between an answer and the next request, by the two requests' paths (`gaps`); in each
/// validator, its handling of the answer, its record stores, and its rounds' runtime's
/// stalls (of the rounds started in the window and the one after).
fn print_waits(
    fleet: &[Running],
    gaps: &std::collections::BTreeMap<String, Vec<f64>>,
    wall: f64,
    (from_ms, to_ms, every_ms): (u64, u64, u64),
) {
    println!();
    println!("| what the next request waited on | p50 / p99 / max (count) | over 5 s |");
    println!("|---|---|---|");
    for (paths, waits) in gaps {
        let late = waits.iter().filter(|ms| **ms > 5000.0).count();
        println!(
            "| at the agents: {paths} | {} | {late} |",
            spread(&mut waits.clone(), "ms")
        );
    }
    for (n, v) in fleet.iter().enumerate() {
        let w = v.waits.lock().unwrap();
        for (step, us) in &w.handled_us {
            let mut ms: Vec<f64> = us.iter().map(|us| us / 1e3).collect();
            println!(
                "| validator {n}: its handling of the answer before {step} | {} | |",
                spread(&mut ms, "ms")
            );
        }
        println!(
            "| validator {n}: storing a record (the registry's lock included); their sum a second of the window | {}; {:.2} s/s | |",
            spread(&mut w.stored_ms.clone(), "ms"),
            w.stored_ms.iter().sum::<f64>() / 1e3 / wall
        );
        let (mut max, mut total): (Vec<f64>, Vec<f64>) = w
            .stalls
            .iter()
            .filter(|(slot, _, _)| (from_ms..to_ms + every_ms).contains(&(slot * every_ms)))
            .map(|(_, max, total)| (*max as f64, *total as f64))
            .unzip();
        println!(
            "| validator {n}: the rounds' runtime waking a task late, per round: latest; in all | {}; {} | |",
            spread(&mut max, "ms"),
            spread(&mut total, "ms")
        );
    }
}

/// The honest GPUs' records (the agents from `hostile` on) stored in `window` (ms since the
/// Unix epoch) on the database at `url`, counted by kind and outcome (accepted, rejected, or
/// the failure: a broken connection by how it broke, any other by its kind), counted by the
/// database (a 10,000-GPU run holds hundreds of MB of records).
fn outcomes(
    rt: &tokio::runtime::Runtime,
    url: &str,
    window: std::ops::Range<u64>,
    hostile: usize,
) -> std::collections::BTreeMap<(String, String), usize> {
    let rows = rt.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .expect("the database");
        tokio::spawn(connection);
        client
            .query(
                "WITH r AS (SELECT COALESCE(kind, '') AS kind, \
                     (envelope::json->>'body')::json AS body FROM records \
                     WHERE gpu_uuid LIKE 'GPU-load-%' \
                     AND substring(gpu_uuid FROM 10)::BIGINT >= $1) \
                 SELECT kind, CASE \
                     WHEN body->'failure' IS NULL OR json_typeof(body->'failure') = 'null' THEN \
                         CASE WHEN (body->>'accepted')::BOOLEAN THEN 'accepted' ELSE 'not accepted' END \
                     WHEN body->'failure'->>'kind' = 'transport' THEN body->'failure'->>'message' \
                     ELSE 'failed: ' || (body->'failure'->>'kind') END, COUNT(*) \
                 FROM r WHERE (body->>'recorded_at_ms')::BIGINT >= $2 \
                     AND (body->>'recorded_at_ms')::BIGINT < $3 \
                 GROUP BY 1, 2",
                &[
                    &(hostile as i64),
                    &(window.start as i64),
                    &(window.end as i64),
                ],
            )
            .await
            .expect("the records")
    });
    rows.iter()
        .map(|row| {
            let n: i64 = row.get(2);
            ((row.get(0), row.get(1)), n as usize)
        })
        .collect()
}

/// Agents per harness process: each agent holds a listening socket and the validators'
/// connections to it, and a process may hold 20,000 descriptors here.
const AGENTS_PER_PROCESS: usize = 2000;

/// A harness process serving agents, and its answers.
struct AgentProcess {
    child: std::process::Child,
    lines: std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
}

impl AgentProcess {
    /// When each GEMM challenge reached one of its honest agents, ms since the Unix epoch.
    fn arrivals(&mut self) -> Vec<u64> {
        let stdin = self.child.stdin.as_mut().expect("its stdin");
        writeln!(stdin, "arrivals").expect("asking an agents' process");
        stdin.flush().expect("asking an agents' process");
        let line = self.lines.next().and_then(Result::ok).unwrap_or_default();
        line.split_whitespace()
            .skip(1)
            .filter_map(|t| t.parse().ok())
            .collect()
    }

    /// Its honest agents' waits between an answer and the next request since it was last
    /// asked ([`note_arrival`]): (the two paths, ms).
    fn gaps(&mut self) -> Vec<(String, u64)> {
        let stdin = self.child.stdin.as_mut().expect("its stdin");
        writeln!(stdin, "gaps").expect("asking an agents' process");
        stdin.flush().expect("asking an agents' process");
        let line = self.lines.next().and_then(Result::ok).unwrap_or_default();
        line.split_whitespace()
            .skip(1)
            .filter_map(|t| {
                let (paths, ms) = t.rsplit_once('=')?;
                Some((paths.to_string(), ms.parse().ok()?))
            })
            .collect()
    }
}

/// Starts the agents in harness processes of their own (this example run with
/// `--serve-agents FROM COUNT`), [`AGENTS_PER_PROCESS`] each, and returns once every one has
/// registered; the children serve until their stdin closes (dropped with the handles).
fn spawn_agent_processes(o: &Options, fleet: &[Running], hostile: usize) -> Vec<AgentProcess> {
    let validators: Vec<String> = fleet
        .iter()
        .map(|v| format!("{}={}", v.addr, v.key))
        .collect();
    let me = std::env::current_exe().expect("this harness's path");
    let children: Vec<std::process::Child> = (0..o.agents)
        .step_by(AGENTS_PER_PROCESS)
        .map(|from| {
            let count = AGENTS_PER_PROCESS.min(o.agents - from);
            std::process::Command::new(&me)
                .args(["--serve-agents", &from.to_string(), &count.to_string()])
                .args(["--hostile-below", &hostile.to_string()])
                .args(["--fleet", &validators.join(",")])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .expect("starting a harness process for agents")
        })
        .collect();
    children
        .into_iter()
        .map(|mut child| {
            let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
            let line = lines.next().and_then(Result::ok).unwrap_or_default();
            assert!(
                line.starts_with("registered"),
                "an agents' process: {line:?}"
            );
            AgentProcess { child, lines }
        })
        .collect()
}

/// The times at which GEMM challenges reached honest agents (`/v1/challenge`), shared with
/// the middleware that notes them.
type Arrivals = Arc<std::sync::Mutex<Vec<u64>>>;

/// Each request's wait after the answer before it on the same agent, ms, by the two paths
/// (`/v1/challenge>/v1/open`: an exchange's next step), shared by an agents' process.
type Gaps = Arc<std::sync::Mutex<Vec<(String, u64)>>>;

/// What one honest agent's middleware notes: into the process's arrivals and gaps, and its
/// own last answer (when, to which path).
#[derive(Clone)]
struct Noted {
    arrivals: Arrivals,
    gaps: Gaps,
    last: Arc<std::sync::Mutex<Option<(Instant, String)>>>,
}

/// Notes when a GEMM challenge reaches an agent, before the agent reads it, and how long
/// after the agent's last answer each request came (the agent serves one validator's
/// requests of a GPU one after the other: an exchange's next step waits on the validator).
async fn note_arrival(
    axum::extract::State(noted): axum::extract::State<Noted>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let path = request.uri().path().to_string();
    if path == "/v1/challenge" {
        noted.arrivals.lock().unwrap().push(unix_ms());
    }
    if let Some((answered, before)) = noted.last.lock().unwrap().take() {
        let gap = answered.elapsed().as_millis() as u64;
        noted
            .gaps
            .lock()
            .unwrap()
            .push((format!("{before}>{path}"), gap));
    }
    let response = next.run(request).await;
    *noted.last.lock().unwrap() = Some((Instant::now(), path));
    response
}

/// A harness process serving agents `from..from + count` (`--serve-agents`): each its own
/// identity and loopback address, registered with the validators of `fleet` in turn
/// (`ADDR=KEY,…`) and trusting them all; agents below `hostile_below` are hostile (the first
/// half silent, the rest answering 5 % junk). Prints `registered` once all are, then serves
/// until its stdin closes; each `arrivals` line on its stdin is answered with one line, the
/// times its honest agents received GEMM challenges ([`AgentProcess::arrivals`]).
fn serve_agents(from: usize, count: usize, hostile_below: usize, fleet: &str) {
    let fleet: Vec<(std::net::SocketAddr, pog_signed::PublicKey)> = fleet
        .split(',')
        .map(|v| {
            let (addr, key) = v.split_once('=').expect("ADDR=KEY");
            (
                addr.parse().expect("an address"),
                pog_signed::PublicKey::parse(key).expect("a key"),
            )
        })
        .collect();
    let keys: Vec<pog_signed::PublicKey> = fleet.iter().map(|(_, k)| k.clone()).collect();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let arrivals = Arrivals::default();
    let gaps = Gaps::default();
    rt.block_on(async {
        let registering = Arc::new(tokio::sync::Semaphore::new(32));
        let mut registrations = tokio::task::JoinSet::new();
        for i in from..from + count {
            let identity = Identity::from_seed(seed(i));
            let claim = GpuClaim {
                uuid: format!("GPU-load-{i:05}").parse().expect("a GPU UUID"),
                model: "H200 SXM".into(),
                bus_id: "0000:00:06.0".into(),
                simulated: false,
            };
            let listener = tokio::net::TcpListener::bind((source_of(i), 0))
                .await
                .unwrap();
            let url = format!("http://{}", listener.local_addr().unwrap());
            if i < hostile_below / 2 {
                // Silent: accepts connections, never answers.
                tokio::spawn(async move {
                    let mut held = Vec::new();
                    while let Ok((s, _)) = listener.accept().await {
                        held.push(s);
                    }
                });
            } else {
                let behaviour = if i < hostile_below {
                    Behaviour::Junk(0.05)
                } else {
                    Behaviour::Honest
                };
                let agent = Arc::new(Agent::new(
                    identity,
                    keys.clone(),
                    vec![claim.clone()],
                    Arc::new(CpuEngine { behaviour }),
                ));
                let mut router = pog_agent::api::router(agent);
                if behaviour == Behaviour::Honest {
                    let noted = Noted {
                        arrivals: arrivals.clone(),
                        gaps: gaps.clone(),
                        last: Arc::default(),
                    };
                    router =
                        router.layer(axum::middleware::from_fn_with_state(noted, note_arrival));
                }
                tokio::spawn(pog_net::http::serve(
                    listener,
                    router,
                    Limits::protocol_messages(),
                ));
            }
            let envelope = Identity::from_seed(seed(i))
                .seal(
                    kind::REGISTER,
                    &Register {
                        endpoint: url,
                        gpus: vec![claim],
                        host: None,
                    },
                )
                .unwrap();
            let to = fleet[i % fleet.len()].0;
            let permit = registering.clone().acquire_owned().await.unwrap();
            registrations.spawn(async move {
                let client = reqwest::Client::builder()
                    .local_address(source_of(i))
                    .build()
                    .unwrap();
                let status = client
                    .post(format!("http://{to}/v1/register"))
                    .json(&envelope)
                    .send()
                    .await
                    .unwrap()
                    .status();
                assert!(status.is_success(), "registering agent {i}: {status}");
                drop(permit);
            });
        }
        while let Some(done) = registrations.join_next().await {
            done.expect("a registration");
        }
        println!("registered");
        // Serve until the harness closes this process's stdin, answering its questions.
        tokio::task::spawn_blocking(move || {
            for line in std::io::stdin().lines() {
                let Ok(line) = line else { break };
                if line.trim() == "arrivals" {
                    let times = arrivals.lock().unwrap().clone();
                    let times: Vec<String> = times.iter().map(u64::to_string).collect();
                    println!("arrivals {}", times.join(" "));
                }
                if line.trim() == "gaps" {
                    let gaps = std::mem::take(&mut *gaps.lock().unwrap());
                    let gaps: Vec<String> =
                        gaps.iter().map(|(p, ms)| format!("{p}={ms}")).collect();
                    println!("gaps {}", gaps.join(" "));
                }
            }
        })
        .await
        .ok();
    });
}

/// Now, ms since the Unix epoch.
fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Agent `i`'s key seed.
fn seed(i: usize) -> [u8; 32] {
    let mut s = [0xa0u8; 32];
    s[..8].copy_from_slice(&(i as u64).to_le_bytes());
    s
}
