//! `pog ledger monitor` over real sockets: logs served on loopback by the validator's own
//! `/ledger/` router, the monitor binary following them with its state in a data dir. An
//! honest log raises nothing, growing or not; a fork (another tree of the same size signed by
//! the same key, and a larger one that does not contain the tree verified), a rollback, an
//! entry of an unknown kind, a record by an unknown signer and a silent GPU each raise their
//! alert (exit 1 with `--once`; a log line, the webhook and `/metrics` when it runs on); bad
//! input is an error (exit 2), never a panic.

mod common;

use common::*;
use pog_ledger::entry::Entry;
use pog_ledger::note::NoteSigner;
use pog_ledger::store::Ledger;
use pog_signed::Identity;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const MONITORED: &str = "GPU-monitored-0";

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn signer() -> NoteSigner {
    pog_validator::ledger::log_signer(&Identity::from_seed(VALIDATOR_SEED), None).unwrap()
}

fn vkey() -> String {
    signer().verifier().to_vkey()
}

fn entry(by: &Identity, kind: &str, body: Value) -> Entry {
    Entry::from_envelope(&by.seal(kind, &body).unwrap()).unwrap()
}

/// A GPU registered to `agent`, then `rounds` proof rounds and an agent's health summary, all
/// recorded at `at_ms` (+ i).
fn history(agent: &Identity, rounds: u64, at_ms: u64) -> Vec<Entry> {
    let validator = Identity::from_seed(VALIDATOR_SEED);
    let mut out = vec![entry(
        &validator,
        "registration",
        json!({"version": 2, "event": "new", "gpu_uuid": MONITORED, "agent": agent.public_key(),
            "model": "H200 SXM", "bus_id": "0000:00:06.0", "simulated": false, "reason": null,
            "recorded_at_ms": at_ms}),
    )];
    out.extend(rounds_of(rounds, 0, at_ms));
    out.push(entry(
        agent,
        "health",
        json!({"version": 1, "gpu_uuid": MONITORED, "samples": 60}),
    ));
    out
}

/// `n` proof rounds of the monitored GPU from round `first`, at `at_ms` (+ i).
fn rounds_of(n: u64, first: u64, at_ms: u64) -> Vec<Entry> {
    let validator = Identity::from_seed(VALIDATOR_SEED);
    (first..first + n)
        .map(|i| {
            entry(
                &validator,
                "record",
                json!({"version": 2, "challenge_id": format!("c{i}"), "gpu_uuid": MONITORED,
                    "accepted": true, "recorded_at_ms": at_ms + i}),
            )
        })
        .collect()
}

/// Appends `entries` (then the raw `raw` bytes) to the ledger in `dir` and signs a checkpoint
/// with the validator's key.
fn log_with(dir: &Path, entries: Vec<Entry>, raw: &[Vec<u8>]) {
    let ledger = Ledger::open(dir).unwrap();
    ledger.append(entries).unwrap();
    for bytes in raw {
        ledger.log().append(bytes).unwrap();
    }
    ledger.log().checkpoint(&signer()).unwrap();
}

/// A log served on loopback by the validator's `/ledger/` router; stopped when dropped.
struct Served {
    url: String,
    _runtime: tokio::runtime::Runtime,
}

/// Serves the ledger in `dir` as it is now.
fn serve(dir: &Path) -> Served {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let ledger =
        pog_validator::ledger::ValidatorLedger::new(Ledger::open_reader(dir).unwrap(), signer());
    let router = pog_validator::ledger::router(Some(Arc::new(ledger)));
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    runtime.spawn(pog_net::http::serve(
        listener,
        router,
        pog_net::serve::Limits::small_requests(),
    ));
    Served {
        url: format!("http://{addr}/ledger"),
        _runtime: runtime,
    }
}

/// Serves the log in `dir` as tlog-tiles from its files (`pog_ledger::serve::log_resource`),
/// the way a mirror does: the validator's router opens a ledger, which refuses entries of
/// kinds it does not know, and a log written by another version may hold them.
fn serve_files(dir: &Path) -> Served {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let log = Arc::new(pog_ledger::store::Log::open_reader(dir).unwrap());
    let router = axum::Router::new().route(
        "/ledger/{*path}",
        axum::routing::get(
            move |axum::extract::Path(path): axum::extract::Path<String>| {
                let log = log.clone();
                async move {
                    let found = if path == "checkpoint" {
                        log.latest_checkpoint()
                            .ok()
                            .flatten()
                            .map(String::into_bytes)
                    } else {
                        pog_ledger::tiles::TileId::parse_path(&path)
                            .ok()
                            .and_then(|id| log.tile(&id).ok())
                    };
                    match found {
                        Some(bytes) => (axum::http::StatusCode::OK, bytes),
                        None => (axum::http::StatusCode::NOT_FOUND, Vec::new()),
                    }
                }
            },
        ),
    );
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    runtime.spawn(pog_net::http::serve(
        listener,
        router,
        pog_net::serve::Limits::small_requests(),
    ));
    Served {
        url: format!("http://{addr}/ledger"),
        _runtime: runtime,
    }
}

/// `pog ledger monitor URL --once --allow-private --json` with the state in `data`, expecting
/// `status`.
fn monitor(data: &Path, url: &str, extra: &[&str], status: i32) -> Value {
    let key = vkey();
    let mut args = vec![
        "ledger",
        "monitor",
        url,
        "--log-key",
        &key,
        "--once",
        "--allow-private",
    ];
    args.extend_from_slice(extra);
    pog_json(data, &args, status)
}

fn kinds(report: &Value) -> Vec<String> {
    report["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["kind"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn an_honest_log_growing_raises_no_alert() {
    let tmp = tempfile::tempdir().unwrap();
    let (log, data) = (tmp.path().join("log"), tmp.path().join("monitor"));
    let agent = Identity::from_seed([0x43; 32]);
    log_with(&log, history(&agent, 3, now_ms()), &[]);
    let first = monitor(&data, &serve(&log).url, &[], 0);
    assert_eq!(first["schema"], "pog.ledger.monitor/1");
    assert_eq!(
        (first["size"].as_u64(), first["entries_read"].as_u64()),
        (Some(5), Some(5))
    );
    assert!(kinds(&first).is_empty(), "{first}");
    // It grows: the next pass reads only what is new, from the state it kept.
    log_with(&log, rounds_of(2, 3, now_ms()), &[]);
    let second = monitor(&data, &serve(&log).url, &[], 0);
    assert_eq!(
        (second["previous_size"].as_u64(), second["size"].as_u64()),
        (Some(5), Some(7))
    );
    assert_eq!(second["entries_read"], 2);
    assert!(kinds(&second).is_empty(), "{second}");
}

#[test]
fn a_fork_and_a_rollback_across_runs_are_alerted() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("monitor");
    let agent = Identity::from_seed([0x43; 32]);
    let now = now_ms();
    let honest = tmp.path().join("honest");
    log_with(&honest, history(&agent, 4, now), &[]);
    assert!(kinds(&monitor(&data, &serve(&honest).url, &[], 0)).is_empty());

    // Another tree of the same size (two rounds swapped), signed by the same key.
    let forked = tmp.path().join("forked");
    let mut entries = history(&agent, 4, now);
    entries.swap(1, 2);
    log_with(&forked, entries, &[]);
    let fork = monitor(&data, &serve(&forked).url, &[], 1);
    assert_eq!(kinds(&fork), ["fork"], "{fork}");
    assert_eq!(fork["size"], 6, "the fork is not taken");
    // It grows on: a larger tree that does not contain the one verified is a fork too.
    log_with(&forked, rounds_of(2, 4, now), &[]);
    assert_eq!(
        kinds(&monitor(&data, &serve(&forked).url, &[], 1)),
        ["fork"]
    );

    // A smaller tree: the log rolled back.
    let rolled = tmp.path().join("rolled");
    log_with(&rolled, history(&agent, 4, now)[..4].to_vec(), &[]);
    let rollback = monitor(&data, &serve(&rolled).url, &[], 1);
    assert_eq!(kinds(&rollback), ["rollback"], "{rollback}");
    assert_eq!(
        (
            rollback["alerts"][0]["seen_size"].as_u64(),
            rollback["alerts"][0]["size"].as_u64()
        ),
        (Some(6), Some(4))
    );

    // The honest log again: nothing to say.
    assert!(kinds(&monitor(&data, &serve(&honest).url, &[], 0)).is_empty());
}

/// A webhook receiver on loopback: every request's body, as it comes.
fn webhook() -> (String, std::sync::mpsc::Receiver<String>) {
    use std::io::{BufRead, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; length];
            if reader.read_exact(&mut body).is_ok() {
                let _ = tx.send(String::from_utf8_lossy(&body).into_owned());
            }
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        }
    });
    (url, rx)
}

#[test]
fn an_unknown_kind_and_an_unknown_signer_are_alerted_on_the_log_the_webhook_and_metrics() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("log");
    let agent = Identity::from_seed([0x43; 32]);
    let stranger = Identity::from_seed([0x77; 32]);
    let mut entries = history(&agent, 2, now_ms());
    // A proof round signed by a key that is not the validator's.
    entries.push(entry(
        &stranger,
        "record",
        json!({"version": 2, "challenge_id": "x", "gpu_uuid": MONITORED, "accepted": true,
            "recorded_at_ms": now_ms()}),
    ));
    // An entry whose kind byte is no record kind (the second byte of the framing).
    let mut unknown = rounds_of(1, 9, now_ms())[0].encode();
    unknown[1] = 200;
    log_with(&log, entries, &[unknown]);
    let served = serve_files(&log);

    let once = monitor(&tmp.path().join("once"), &served.url, &[], 1);
    assert_eq!(kinds(&once), ["unknown_signer", "unknown_kind"], "{once}");
    assert_eq!(once["alerts"][0]["index"], 4);
    assert_eq!(once["alerts"][0]["signer"], json!(stranger.public_key()));
    assert_eq!(
        (
            once["alerts"][1]["index"].as_u64(),
            once["alerts"][1]["code"].as_u64()
        ),
        (Some(5), Some(200))
    );

    // Running on: a log line, the webhook and /metrics.
    let (hook, posted) = webhook();
    let port = free_port().to_string();
    let listen = format!("127.0.0.1:{port}");
    let key = vkey();
    let mut running = Service::spawn(
        &tmp.path().join("running"),
        &[
            "ledger",
            "monitor",
            &served.url,
            "--log-key",
            &key,
            "--allow-private",
            "--every",
            "0.2",
            "--webhook",
            &hook,
            "--listen",
            &listen,
        ],
        None,
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let metrics = loop {
        if let Some((200, text)) = http_get(&listen, "/metrics") {
            if text.contains("pog_ledger_monitor_verified_size 6") {
                break text;
            }
        }
        running.assert_running();
        assert!(std::time::Instant::now() < deadline, "no metrics in time");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(
        metrics.contains("pog_ledger_monitor_alerts_total{kind=\"unknown_kind\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("pog_ledger_monitor_alerts_total{kind=\"unknown_signer\"} 1"),
        "{metrics}"
    );
    let mut delivered: Vec<Value> = Vec::new();
    while delivered.len() < 2 {
        let body = posted
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("the webhook got no alert");
        delivered.push(serde_json::from_str(&body).unwrap());
    }
    assert_eq!(delivered[0]["kind"], "unknown_signer");
    assert_eq!(delivered[1]["kind"], "unknown_kind");
    assert!(delivered[1]["message"]
        .as_str()
        .unwrap()
        .contains("unknown kind"));
    // Later passes see nothing new and say nothing more.
    std::thread::sleep(std::time::Duration::from_millis(600));
    assert!(posted.try_recv().is_err());
    let status = running.stop();
    assert_eq!(status.code(), Some(1));
    let said = running.stderr();
    assert!(
        said.contains("entry 5 is of an unknown kind (200)"),
        "{said}"
    );
}

#[test]
fn a_gpu_whose_rounds_stopped_is_alerted_once() {
    let tmp = tempfile::tempdir().unwrap();
    let (log, data) = (tmp.path().join("log"), tmp.path().join("monitor"));
    let agent = Identity::from_seed([0x43; 32]);
    // Its last round 20 minutes ago.
    log_with(&log, history(&agent, 3, now_ms() - 20 * 60_000), &[]);
    let served = serve(&log);
    let silent = monitor(&data, &served.url, &["--silent-after", "600"], 1);
    assert_eq!(kinds(&silent), ["silent_gpu"], "{silent}");
    assert_eq!(silent["alerts"][0]["gpu_uuid"], MONITORED);
    assert!(silent["alerts"][0]["silent_for_ms"].as_u64().unwrap() >= 20 * 60_000);
    // Once per silence: the next pass says nothing more; a new round ends the silence.
    assert!(kinds(&monitor(&data, &served.url, &["--silent-after", "600"], 0)).is_empty());
    log_with(&log, rounds_of(1, 3, now_ms()), &[]);
    assert!(kinds(&monitor(
        &data,
        &serve(&log).url,
        &["--silent-after", "600"],
        0
    ))
    .is_empty());
    // Within the allowed silence, nothing: a fresh state with a longer allowance.
    let patient = tmp.path().join("patient");
    let grown = serve(&log);
    assert!(kinds(&monitor(
        &patient,
        &grown.url,
        &["--silent-after", "3600"],
        0
    ))
    .is_empty());
}

/// A server on loopback answering every request with `head` and then `body`, or, when
/// `endless`, with `body` again and again until the reader goes away.
fn raw_server(head: &'static str, body: &'static str, endless: bool) -> String {
    use std::io::Write;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let _ = std::io::Read::read(&mut stream, &mut buf);
                let _ = stream.write_all(head.as_bytes());
                while stream.write_all(body.as_bytes()).is_ok() && endless {}
            });
        }
    });
    url
}

fn error_of(data: &Path, args: &[&str]) -> String {
    let report = pog_json(data, args, 2);
    assert_eq!(report["verdict"], "error");
    report["error"].as_str().unwrap().to_string()
}

#[test]
fn bad_input_is_an_error_never_a_panic() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("monitor");
    let key = vkey();
    // A log inside the network, without --allow-private.
    let inside = error_of(
        &data,
        &[
            "ledger",
            "monitor",
            "http://127.0.0.1:9/ledger",
            "--log-key",
            &key,
            "--once",
        ],
    );
    assert!(
        inside.contains("not a public address") && inside.contains("--allow-private"),
        "{inside}"
    );
    // Not a URL, another scheme.
    for url in ["not a url", "ftp://example.com/log"] {
        error_of(
            &data,
            &["ledger", "monitor", url, "--log-key", &key, "--once"],
        );
    }
    // A malformed checkpoint, and one without end.
    let garbage = raw_server(
        "HTTP/1.1 200 OK\r\ncontent-length: 12\r\nconnection: close\r\n\r\n",
        "not a note\n\n",
        false,
    );
    let malformed = error_of(
        &data,
        &[
            "ledger",
            "monitor",
            &garbage,
            "--log-key",
            &key,
            "--once",
            "--allow-private",
        ],
    );
    assert!(malformed.contains("malformed"), "{malformed}");
    let endless = raw_server(
        "HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n",
        "aaaaaaaaaaaaaaaa",
        true,
    );
    let long = error_of(
        &data,
        &[
            "ledger",
            "monitor",
            &endless,
            "--log-key",
            &key,
            "--once",
            "--allow-private",
        ],
    );
    assert!(long.contains("more than 65536 bytes"), "{long}");
    // A tile that is not a tile: the checkpoint is honest, its tiles are not.
    let log = tmp.path().join("log");
    log_with(
        &log,
        history(&Identity::from_seed([0x43; 32]), 1, now_ms()),
        &[],
    );
    let checkpoint: &'static str = Box::leak(
        Ledger::open_reader(&log)
            .unwrap()
            .log()
            .latest_checkpoint()
            .unwrap()
            .unwrap()
            .into_boxed_str(),
    );
    let lying = raw_server(
        "HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n",
        checkpoint,
        false,
    );
    let tiles = error_of(
        &data,
        &[
            "ledger",
            "monitor",
            &lying,
            "--log-key",
            &key,
            "--once",
            "--allow-private",
        ],
    );
    assert!(tiles.contains("tile"), "{tiles}");
    // A corrupt state file, named; a state of another log, named.
    // (No pass succeeded above, so there is no state yet: its name is the log key's id.)
    let state_dir: PathBuf = data.join("ledger-monitor");
    std::fs::create_dir_all(&state_dir).unwrap();
    let path = state_dir.join(format!("{:08x}.json", signer().verifier().key_id()));
    write(&path, "{ not json");
    let corrupt = error_of(
        &data,
        &[
            "ledger",
            "monitor",
            &lying,
            "--log-key",
            &key,
            "--once",
            "--allow-private",
        ],
    );
    assert!(
        corrupt.contains(path.to_str().unwrap()) && corrupt.contains("corrupt"),
        "{corrupt}"
    );
    let other = NoteSigner::new("pog.test/other", pog_ledger::note::ALG_ED25519, [5; 32]).unwrap();
    write(
        &path,
        &json!({"version": 1, "log_key": other.verifier().to_vkey(), "checkpoint": null, "gpus": {}})
            .to_string(),
    );
    let foreign = error_of(
        &data,
        &[
            "ledger",
            "monitor",
            &lying,
            "--log-key",
            &key,
            "--once",
            "--allow-private",
        ],
    );
    assert!(foreign.contains("another log"), "{foreign}");
}

/// A fleet's log carries records signed by each of its validators (issue 22): the monitor
/// takes those it is told of (`--validator-key`) as the validator's, and alerts on the others.
#[test]
fn a_fleets_validators_named_are_no_unknown_signers() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("log");
    let agent = Identity::from_seed([0x43; 32]);
    let peer = Identity::from_seed([0x78; 32]);
    let mut entries = history(&agent, 2, now_ms());
    entries.push(entry(
        &peer,
        "record",
        json!({"version": 2, "challenge_id": "p", "gpu_uuid": MONITORED, "accepted": true,
            "recorded_at_ms": now_ms()}),
    ));
    log_with(&log, entries, &[]);
    let served = serve_files(&log);
    let unnamed = monitor(&tmp.path().join("unnamed"), &served.url, &[], 1);
    assert_eq!(kinds(&unnamed), ["unknown_signer"], "{unnamed}");
    let peer_hex = peer.public_key().to_string();
    let named = monitor(
        &tmp.path().join("named"),
        &served.url,
        &["--validator-key", &peer_hex],
        0,
    );
    assert_eq!(kinds(&named), Vec::<String>::new(), "{named}");
}
