//! The validator against hostile agents and peers, over real sockets on loopback: one device
//! behind many keys, forged and squatted registrations, floods, slow and silent peers,
//! endpoints that point inside the network. Each test fails without the defence it names.

mod common;

use common::*;
use pog_agent::misbehaviour::Cheat;
use pog_net::serve::Limits;
use pog_proof::wire::{kind, GpuClaim, Register};
use pog_records::FailureKind;
use pog_records::Gemm;
use pog_signed::{Envelope, Identity};
use pog_validator::schedule::Schedule;
use pog_validator::validator::{Config, GpuList, Validator};
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Runs the schedule under `schedule` for `duration`, then stops it and waits for it.
async fn run_schedule_for(v: &Arc<Validator>, schedule: Schedule, duration: Duration) {
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let rounds = tokio::spawn(pog_validator::schedule::run(
        pog_validator::schedule::Rounds::new(v.clone(), schedule, stopped),
    ));
    tokio::time::sleep(duration).await;
    stop.send(true).unwrap();
    rounds.await.unwrap();
}

/// The challenge records (not registration events) among a GPU's records.
fn challenges(records: &[serde_json::Value]) -> Vec<&serde_json::Value> {
    records
        .iter()
        .filter(|r| r.get("challenge").is_some())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn one_device_behind_two_agent_keys_fails_in_a_round() {
    // Two agent keys, one GPU UUID each, one real device behind both: each challenge holds the
    // device 400 ms against a bound of 500 ms (+10 %). A round challenges both at once, so one
    // must wait for the other and misses its bound. (Challenging one agent after another, as
    // the schedule once did, let both pass; so did pinging each agent before its challenge,
    // which let the slow-pinging one push its challenge past the other's.)
    let h = Harness::new().serve().await;
    let (v, vurl) = (h.v.clone(), h.url.clone());
    let device = Arc::new(tokio::sync::Mutex::new(()));
    for (seed, uuid) in [(60u8, "GPU-face-1"), (61u8, "GPU-face-2")] {
        // The second key also answers pings slowly: were the validator to ping before each
        // challenge, this would send its challenge seconds after the first one's.
        let slow_pings = seed == 61;
        let agent = h
            .agent(seed, vec![claim(uuid)])
            .cheating(Cheat::OneDevice(400))
            .sharing_device(device.clone())
            .routed(move |router| {
                router.layer(axum::middleware::from_fn(
                    move |request: axum::extract::Request, next: axum::middleware::Next| async move {
                        if slow_pings && request.uri().path() == "/v1/ping" {
                            tokio::time::sleep(Duration::from_millis(900)).await;
                        }
                        next.run(request).await
                    },
                ))
            })
            .await;
        assert_eq!(agent.status(), 200);
    }
    // Slots of ten minutes: the schedule's first round starts at once, and the next slot's
    // start is unlikely to fall in the 200 ms the test runs it for.
    let schedule = Schedule::every(
        Duration::from_secs(600),
        pog_records::Policy {
            expected_ms: 500.0,
            ..policy()
        },
    );
    run_schedule_for(&v, schedule, Duration::from_millis(200)).await;
    let mut accepted = 0;
    for uuid in ["GPU-face-1", "GPU-face-2"] {
        let records = records_of(&vurl, uuid).await;
        let challenged = challenges(&records);
        assert_eq!(challenged.len(), 1, "one round: {records:?}");
        accepted += usize::from(challenged[0]["accepted"] == true);
    }
    assert!(
        accepted < 2,
        "one device passed as two agents' GPUs in one round"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn slow_and_silent_agents_do_not_stall_an_honest_one() {
    // Three hostile agents: one accepts connections and never answers, one trickles a byte a
    // second, one answers pings and hangs on challenges. An honest agent beside them must
    // still be challenged every round (each challenge runs under its own deadline, and
    // rounds start on a clock).
    let h = Harness::new().serve().await;
    let (v, vurl) = (h.v.clone(), h.url.clone());
    let status = h.agent(70, vec![claim("GPU-honest")]).await.status();
    assert_eq!(status, 200);
    // Silent: accepts and reads, never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("http://{}", silent.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in silent.incoming().flatten() {
            held.push(stream);
        }
    });
    // Trickling: one byte a second of a response that never ends.
    let trickle = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let trickle_url = format!("http://{}", trickle.local_addr().unwrap());
    std::thread::spawn(move || {
        for mut stream in trickle.incoming().flatten() {
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf);
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n");
                while stream.write_all(b"x").is_ok() {
                    std::thread::sleep(Duration::from_secs(1));
                }
            });
        }
    });
    // Pings fine, hangs on everything else.
    let ping_only = axum::Router::new()
        .route("/v1/ping", axum::routing::get(|| async { "pog agent" }))
        .fallback(|| async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            "never"
        });
    let (listener, ping_url) = listen().await;
    tokio::spawn(pog_net::http::serve(
        listener,
        ping_only,
        Limits::protocol_messages(),
    ));
    for (seed, url, uuid) in [
        (71u8, &silent_url, "GPU-silent"),
        (72, &trickle_url, "GPU-trickle"),
        (73, &ping_url, "GPU-ping"),
    ] {
        let (status, body) = register(
            &vurl,
            &Identity::from_seed([seed; 32]),
            url,
            vec![claim(uuid)],
        )
        .await;
        assert_eq!(status, 200, "{body}");
    }
    // Rounds every second for six seconds; the hostile agents' challenges run to a 4 s
    // deadline (expiry 2 s, as long again to open).
    let schedule = Schedule::every(
        Duration::from_secs(1),
        pog_records::Policy {
            expiry_ms: 2_000,
            ..policy()
        },
    );
    run_schedule_for(&v, schedule, Duration::from_millis(6_200)).await;
    let honest = records_of(&vurl, "GPU-honest").await;
    let honest = challenges(&honest);
    assert!(
        honest.len() >= 6,
        "the honest agent was challenged only {} times in 6 s",
        honest.len()
    );
    assert!(honest.iter().all(|r| r["accepted"] == true));
    // The hostile ones were cut off at their deadline, not waited for, and were backed off.
    for uuid in ["GPU-silent", "GPU-trickle", "GPU-ping"] {
        let records = records_of(&vurl, uuid).await;
        let hostile = challenges(&records);
        assert!(
            !hostile.is_empty() && hostile.len() <= 3,
            "{uuid}: {} challenges",
            hostile.len()
        );
        for r in hostile {
            let kind = r["failure"]["kind"].as_str().unwrap();
            assert!(
                ["timeout", "deadline", "transport"].contains(&kind),
                "{uuid}: {r}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_squatted_uuid_is_released_after_failed_rounds() {
    // A key claims a GPU it does not have (its endpoint is dead): it fails every round and is
    // released after `release_after` of them; its owner can then register, and the squatter
    // may not claim it again for a while.
    let h = Harness::new().serve().await;
    let (v, vurl) = (h.v.clone(), h.url.clone());
    let squatter = Identity::from_seed([80; 32]);
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    }; // closed when dropped: connection refused
    assert_eq!(
        register(&vurl, &squatter, &dead, vec![claim("GPU-wanted")])
            .await
            .0,
        200
    );
    let refused = h.agent(81, vec![claim("GPU-wanted")]).await.status();
    assert_eq!(refused, 409, "squatted");
    let schedule = Schedule {
        release_after: 2,
        ..Schedule::every(Duration::from_millis(300), policy())
    };
    // Unreachable: round 1 fails and backs off to round 3, which fails again: released.
    run_schedule_for(&v, schedule, Duration::from_millis(1_500)).await;
    assert!(
        v.registry().gpu("GPU-wanted").unwrap().is_none(),
        "released"
    );
    let records = records_of(&vurl, "GPU-wanted").await;
    assert!(
        records.iter().any(|r| r["event"] == "released"),
        "{records:?}"
    );
    let owner = h.agent(81, vec![claim("GPU-wanted")]).await.status();
    assert_eq!(owner, 200, "the owner gets its GPU");
    assert_eq!(
        register(&vurl, &squatter, &dead, vec![claim("GPU-other")])
            .await
            .0,
        200
    );
    let (status, body) = register(&vurl, &squatter, &dead, vec![claim("GPU-wanted")]).await;
    assert_eq!(status, 409, "{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn registrations_are_checked_bounded_and_recorded() {
    let h = Harness::new().serve().await;
    let vurl = h.url.clone();
    let key = Identity::from_seed([90; 32]);
    let (listener, agent_url) = listen().await;
    drop(listener);
    // A forged registration under the identity point (a weak key anyone can sign for).
    let identity_point = {
        let mut p = [0u8; 32];
        p[0] = 1;
        hex::encode(p)
    };
    let body = serde_json::to_string(&Register {
        endpoint: agent_url.clone(),
        gpus: vec![claim("GPU-forged")],
        host: None,
    })
    .unwrap();
    let forged = Envelope {
        version: pog_signed::WIRE_VERSION,
        kind: kind::REGISTER.into(),
        body,
        signer: identity_point,
        signature: format!("01{}", "00".repeat(63)),
    };
    let (status, text) = post_envelope(&vurl, &forged).await;
    assert_eq!(status, 403, "{text}");
    assert!(text.contains("weak"), "{text}");
    // Too many GPUs in one registration, none at all, one twice.
    let many: Vec<GpuClaim> = (0..65).map(|i| claim(&format!("GPU-{i}"))).collect();
    let (status, text) = register(&vurl, &key, &agent_url, many).await;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("1 to 64 GPUs"), "{text}");
    assert_eq!(register(&vurl, &key, &agent_url, vec![]).await.0, 400);
    assert_eq!(
        register(
            &vurl,
            &key,
            &agent_url,
            vec![claim("GPU-a"), claim("GPU-a")]
        )
        .await
        .0,
        400
    );
    // A change of PCI address by the same key is a new registration, and recorded.
    assert_eq!(
        register(&vurl, &key, &agent_url, vec![claim("GPU-a")])
            .await
            .0,
        200
    );
    assert_eq!(
        register(&vurl, &key, &agent_url, vec![claim("GPU-a")])
            .await
            .0,
        200
    );
    let moved = GpuClaim {
        bus_id: "0000:00:07.0".into(),
        ..claim("GPU-a")
    };
    assert_eq!(register(&vurl, &key, &agent_url, vec![moved]).await.0, 200);
    let events: Vec<String> = records_of(&vurl, "GPU-a")
        .await
        .iter()
        .filter_map(|r| r["event"].as_str().map(str::to_string))
        .collect();
    assert_eq!(
        events,
        ["new", "changed"],
        "the restart is not an event; the move is"
    );
    // The registry is listed, without the agents' endpoints.
    let list: GpuList = reqwest::get(format!("{vurl}/v1/gpus"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list.gpus.len(), 1);
    assert_eq!(list.gpus[0].bus_id, "0000:00:07.0");
    assert_eq!(
        reqwest::get(format!("{vurl}/healthz"))
            .await
            .unwrap()
            .status(),
        200
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn registrations_are_rate_limited_per_source() {
    let h = Harness::new()
        .config(Config {
            registrations_per_minute: 3,
            ..loopback()
        })
        .serve()
        .await;
    let vurl = h.url.clone();
    let (listener, agent_url) = listen().await;
    drop(listener);
    let mut statuses = Vec::new();
    for i in 0..5u8 {
        let key = Identity::from_seed([100 + i; 32]);
        statuses.push(
            register(&vurl, &key, &agent_url, vec![claim(&format!("GPU-r{i}"))])
                .await
                .0,
        );
    }
    assert_eq!(statuses, [200, 200, 200, 429, 429]);
}

#[tokio::test(flavor = "multi_thread")]
async fn endpoints_inside_the_network_are_refused_and_peer_text_is_not_published() {
    // A validator as deployed: no private endpoints.
    let h = Harness::new().config(Config::default()).serve().await;
    let key = Identity::from_seed([110; 32]);
    for endpoint in [
        "http://127.0.0.1:22",
        "http://169.254.169.254/latest",
        "http://10.1.2.3:8080",
        "http://[::1]:7070",
        "http://8.8.8.8/x?a=b",
        "http://user:pw@8.8.8.8",
        "gopher://8.8.8.8",
    ] {
        let (status, text) = register(&h.url, &key, endpoint, vec![claim("GPU-s")]).await;
        assert_eq!(status, 400, "{endpoint}: {text}");
    }
    // A name that resolves inside the network is accepted at registration (names are checked
    // when resolved) and refused at every connection.
    let h = Harness::new().config(Config::default()).serve().await;
    let (status, text) = register(&h.url, &key, "http://localhost:9", vec![claim("GPU-s")]).await;
    assert_eq!(status, 200, "{text}");
    let r = h.v.challenge::<Gemm>("GPU-s", &policy()).await.unwrap();
    assert_eq!(r.failure.unwrap().kind, FailureKind::Unreachable);
    // An agent's error text does not reach the signed record.
    let h = Harness::new().serve().await;
    let leaky = axum::Router::new()
        .route("/v1/ping", axum::routing::get(|| async { "pog agent" }))
        .fallback(|| async {
            (
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                r#"{"error":"SECRET internal banner"}"#,
            )
        });
    let (listener, leaky_url) = listen().await;
    tokio::spawn(pog_net::http::serve(
        listener,
        leaky,
        Limits::protocol_messages(),
    ));
    assert_eq!(
        register(&h.url, &key, &leaky_url, vec![claim("GPU-leak")])
            .await
            .0,
        200
    );
    let r = h.v.challenge::<Gemm>("GPU-leak", &policy()).await.unwrap();
    let failure = r.failure.unwrap();
    assert_eq!(failure.kind, FailureKind::AgentRefused);
    assert!(!failure.message.contains("SECRET"), "{failure:?}");
}

/// A GET over a fresh connection: the status line, within the time asked.
fn timed_get(addr: std::net::SocketAddr, path: &str) -> (String, Duration) {
    let started = Instant::now();
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: v\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    let _ = s.read_to_string(&mut response);
    (
        response.lines().next().unwrap_or("").to_string(),
        started.elapsed(),
    )
}

#[test]
fn floods_of_bodies_and_half_sent_requests_leave_the_api_answering() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let limits = Limits {
        max_connections: 64,
        max_connections_per_source: 16,
        header_timeout: Duration::from_secs(1),
        body_timeout: Duration::from_secs(1),
        max_connection_age: Duration::from_secs(3),
        max_body_bytes: 256 << 10,
        max_inflight_body_bytes_per_source: 1 << 20,
        max_inflight_body_bytes: 4 << 20,
        ..Limits::small_requests()
    };
    let h = rt.block_on(Harness::new().limits(limits).serve());
    let (vurl, addr) = (h.url.clone(), h.addr());
    // An oversized body is refused before it is read.
    let (status, _) = {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(
            s,
            "POST /v1/register HTTP/1.1\r\nHost: v\r\nContent-Length: 31000000\r\n\r\n"
        )
        .unwrap();
        let mut response = String::new();
        let _ = s.read_to_string(&mut response);
        (response.lines().next().unwrap_or("").to_string(), ())
    };
    assert!(status.contains("413"), "{status}");
    // Bodies that are declared and never sent hold the in-flight byte budget of their source
    // (1 MiB): its sixth of 200 KiB is refused at once rather than queued or buffered, while
    // another source still has its own share.
    let mut held = Vec::new();
    for _ in 0..5 {
        let mut s = connect_from(&rt, [127, 0, 0, 4], addr, None);
        write!(
            s,
            "POST /v1/register HTTP/1.1\r\nHost: v\r\nContent-Length: 204800\r\n\r\n"
        )
        .unwrap();
        held.push(s);
    }
    std::thread::sleep(Duration::from_millis(200));
    let mut sixth = connect_from(&rt, [127, 0, 0, 4], addr, None);
    sixth
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        sixth,
        "POST /v1/register HTTP/1.1\r\nHost: v\r\nContent-Length: 204800\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    let _ = sixth.read_to_string(&mut response);
    assert!(response.starts_with("HTTP/1.1 503"), "{response}");
    let (status, body) = rt.block_on(register(
        &vurl,
        &Identity::from_seed([120; 32]),
        "http://127.0.0.1:9",
        vec![claim("GPU-meanwhile")],
    ));
    assert_eq!(status, 200, "another source registers meanwhile: {body}");
    // Half-sent requests are cut off at the header deadline.
    let mut half = std::net::TcpStream::connect(addr).unwrap();
    half.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(half, "GET /healthz HTTP/1.1\r\nHost:").unwrap();
    let started = Instant::now();
    let mut rest = Vec::new();
    let _ = half.read_to_end(&mut rest);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "held {:?}",
        started.elapsed()
    );
    // A peer that sends requests and never reads the answers loses its connection at the
    // maximum age (3 s here) instead of holding it forever.
    let mut greedy = connect_from(&rt, [127, 0, 0, 5], addr, None);
    greedy
        .set_write_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let started = Instant::now();
    let closed = loop {
        if started.elapsed() > Duration::from_secs(15) {
            break false;
        }
        match greedy.write_all(b"GET /v1/gpus?limit=1000 HTTP/1.1\r\nHost: v\r\n\r\n") {
            Ok(()) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break true,
        }
    };
    assert!(closed, "a connection that never reads was never closed");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    // A flood of idle connections from one source takes only that source's share: the API
    // answers everyone else meanwhile.
    let flood: Vec<_> = (0..80)
        .map(|_| connect_from(&rt, [127, 0, 0, 3], addr, None))
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let (status, took) = timed_get(addr, "/healthz");
    assert!(status.contains("200"), "during the flood: {status}");
    assert!(took < Duration::from_secs(1), "{took:?}");
    drop((flood, held));
}
