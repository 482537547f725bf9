//! The agent's health monitor over real sockets on loopback: `/metrics` read back by a
//! Prometheus text parser, and the validator's signed health records (the agent's summary of
//! a recorded H200 trace with an XID injected, beside the validator's own proof pace), with
//! the requests an agent must refuse.

mod common;

use common::*;
use pog_monitor::inject::{inject, Fault};
use pog_monitor::prometheus::GpuIdentity;
use pog_monitor::{Replay, Sample};
use pog_records::Gemm;
use pog_records::{FailureKind, HealthRecord};

use pog_agent::watch::Watch;
use pog_proof::wire::{kind, HealthRequest};
use pog_signed::{Envelope, Identity, PublicKey, RecordKind};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

const TRACE: &str = include_str!("../../monitor/tests/data/h200-healthy.csv");
const AGENT_SEED: u8 = 31;

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The recorded H200 trace as GPU `GPU-h`, an XID 79 injected 100 s in.
fn trace_rows() -> Vec<Sample> {
    let healthy = pog_monitor::parse_trace(TRACE).unwrap();
    inject(&healthy, &Fault::Xid { code: 79 }, 100.0)
}

/// The trace played back as the agent's one GPU.
fn replayed() -> Replay {
    Replay::new(
        GpuIdentity {
            index: 0,
            uuid: "GPU-h".parse().unwrap(),
            model_name: "NVIDIA H200".into(),
            hostname: "loopback".into(),
            pci_bus_id: Some("0000:00:06.0".into()),
            driver_version: None,
        },
        trace_rows(),
    )
}

/// Starts an agent serving `GPU-h` with a health monitor that has sampled the whole trace,
/// registers it with `validator`; returns its URL.
async fn start_watched_agent(validator: &Served) -> String {
    let watch = Arc::new(Watch::new(Vec::new(), false));
    let fed = watch.clone();
    tokio::task::spawn_blocking(move || {
        let mut source = replayed();
        fed.run(
            &mut source,
            Duration::from_millis(1),
            &AtomicBool::new(false),
        );
    })
    .await
    .unwrap();
    let agent = validator
        .agent(AGENT_SEED, vec![claim("GPU-h")])
        .watching(watch)
        .await;
    assert_eq!(agent.status(), 200);
    agent.url
}

fn value(scrape: &prometheus_parse::Scrape, name: &str) -> f64 {
    use prometheus_parse::Value;
    let sample = scrape
        .samples
        .iter()
        .find(|s| s.metric == name && s.labels.get("UUID") == Some("GPU-h"))
        .unwrap_or_else(|| panic!("no {name} for GPU-h"));
    match sample.value {
        Value::Gauge(v) | Value::Counter(v) | Value::Untyped(v) => v,
        _ => panic!("{name} is not a number"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_agent_serves_metrics_and_the_validator_records_signed_health() {
    let h = Harness::new().serve().await;
    let v = &h.v;
    let url = start_watched_agent(&h).await;
    let rows = trace_rows();
    let last = rows.last().unwrap();

    // /metrics on the API's port, parsed by a Prometheus text parser.
    let response = reqwest::get(format!("{url}/metrics")).await.unwrap();
    assert!(response.status().is_success());
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    let text = response.text().await.unwrap();
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string())))
        .expect("a valid exposition");
    assert_eq!(
        value(&scrape, "DCGM_FI_DEV_GPU_TEMP"),
        last.temp_gpu_c.unwrap()
    );
    assert_eq!(
        value(&scrape, "DCGM_FI_DEV_POWER_USAGE"),
        last.power_w.unwrap()
    );
    assert_eq!(value(&scrape, "DCGM_FI_DEV_XID_ERRORS"), 79.0);
    assert_eq!(value(&scrape, "pog_xid_errors_total"), 1.0);
    assert_eq!(value(&scrape, "pog_gpu_sampled"), 1.0);

    // Two proofs, then the first health record: the agent's summary of the whole trace.
    for _ in 0..2 {
        assert!(
            v.challenge::<Gemm>("GPU-h", &policy())
                .await
                .unwrap()
                .accepted
        );
    }
    let first: HealthRecord = v.collect_health("GPU-h").await.unwrap();
    assert_eq!(first.failure, None);
    let reported = first.reported.as_ref().expect("a report");
    assert_eq!(reported.samples, rows.len() as u64);
    let temp = reported.signals["temp_gpu"];
    let temps: Vec<f64> = rows.iter().filter_map(|s| s.temp_gpu_c).collect();
    assert_eq!(temp.n, temps.len() as u64);
    assert_eq!(temp.max, temps.iter().copied().fold(f64::MIN, f64::max));
    assert_eq!(temp.min, temps.iter().copied().fold(f64::MAX, f64::min));
    assert_eq!((reported.xids.clone(), reported.xid_total), (vec![79], 1));
    assert!(
        reported
            .alerts
            .iter()
            .any(|a| a.kind == "xid" && a.severity == "critical"),
        "{:?}",
        reported.alerts
    );
    assert_eq!(first.measured.ratios.len(), 2, "{:?}", first.measured);
    assert_eq!(first.measured.baseline_ratio, None);
    assert!(
        first.contradictions.is_empty(),
        "{:?}",
        first.contradictions
    );
    assert!(!first.simulated);

    // Stored beside the proof records, signed by the validator.
    let stored = v.registry().latest_records("GPU-h", 10).unwrap();
    let (_, json) = stored.last().unwrap();
    let bytes = json.as_bytes();
    let (body, signer): (HealthRecord, PublicKey) =
        pog_signed::decode(bytes, RecordKind::HealthRound.wire_kind()).unwrap();
    assert_eq!(signer, v.public_key());
    assert_eq!(body, first);

    // The fleet's overview lists the GPU with this record: reported and measured apart, the
    // XID making it critical; its page asks for it.
    let overview: serde_json::Value = reqwest::get(format!("{}/v1/overview", h.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let listed = &overview["gpus"][0];
    assert_eq!(listed["uuid"], "GPU-h", "{overview:#}");
    let health = &listed["health"];
    assert_eq!(health["status"], "critical", "{health:#}");
    assert_eq!(health["to_ms"], first.to_ms);
    assert_eq!(health["xid_total"], 1);
    assert_eq!(health["temp_gpu_c"]["max"], temp.max);
    assert_eq!(health["samples"], rows.len() as u64);
    assert_eq!(health["median_ratio"], first.measured.median_ratio.unwrap());
    assert!(
        health["alerts"]["critical"].as_u64() >= Some(1),
        "{health:#}"
    );
    let page = reqwest::get(format!("{}/overview", h.url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("/v1/overview"), "{page}");

    // A proof later, the next window starts where the first ended: no telemetry in it
    // (the trace is over) while the GPU proved, measured against the two earlier proofs.
    assert!(
        v.challenge::<Gemm>("GPU-h", &policy())
            .await
            .unwrap()
            .accepted
    );
    let second = v.collect_health("GPU-h").await.unwrap();
    assert_eq!(second.from_ms, first.to_ms);
    let reported = second.reported.as_ref().expect("a report");
    assert_eq!((reported.samples, reported.xid_total), (0, 0));
    assert_eq!(second.measured.ratios.len(), 1);
    assert!(second.measured.baseline_ratio.is_some());
    assert!(second.measured.decay.is_some());
    // The silence contradicts the proofs. (On a loaded machine the CPU prover's third proof
    // can also run slow enough for the decay contradiction: that one is real too.)
    let (silent, other): (Vec<&String>, Vec<&String>) = second
        .contradictions
        .iter()
        .partition(|c| c.contains("no telemetry"));
    assert_eq!(silent.len(), 1, "{:?}", second.contradictions);
    assert!(
        other.iter().all(|c| c.contains("slower")),
        "{:?}",
        second.contradictions
    );
}

async fn ask(url: &str, signer: &Identity, request: &HealthRequest) -> (u16, String) {
    let response = reqwest::Client::new()
        .post(format!("{url}/v1/health"))
        .json(&signer.seal(kind::HEALTH_REQUEST, request).unwrap())
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_agent_refuses_health_requests_it_should_not_answer() {
    let h = Harness::new().serve().await;
    let url = start_watched_agent(&h).await;
    let validator = Identity::from_seed(VALIDATOR_SEED);
    let now = now_ms();
    let good = HealthRequest {
        id: "aa".into(),
        gpu_uuid: "GPU-h".parse().unwrap(),
        agent_key: Identity::from_seed([AGENT_SEED; 32]).public_key(),
        from_ms: now - 60_000,
        to_ms: now,
        issued_at_ms: now,
    };
    let (status, body) = ask(&url, &validator, &good).await;
    assert_eq!(status, 200, "{body}");
    let envelope: Envelope = serde_json::from_str(&body).unwrap();
    assert_eq!(envelope.kind, kind::HEALTH_SUMMARY);

    let stranger = Identity::from_seed([77; 32]);
    let cases: Vec<(u16, &str, Identity, HealthRequest)> = vec![
        (403, "does not trust", stranger, good.clone()),
        (
            403,
            "addressed to agent",
            Identity::from_seed(VALIDATOR_SEED),
            HealthRequest {
                agent_key: stranger_key(),
                ..good.clone()
            },
        ),
        (
            404,
            "no GPU",
            Identity::from_seed(VALIDATOR_SEED),
            HealthRequest {
                gpu_uuid: "GPU-other".parse().unwrap(),
                ..good.clone()
            },
        ),
        (
            400,
            "at most",
            Identity::from_seed(VALIDATOR_SEED),
            HealthRequest {
                from_ms: now - 2 * pog_proof::wire::MAX_HEALTH_WINDOW_MS,
                ..good.clone()
            },
        ),
        (
            410,
            "issued at",
            Identity::from_seed(VALIDATOR_SEED),
            HealthRequest {
                issued_at_ms: now - 3_600_000,
                ..good.clone()
            },
        ),
    ];
    for (expected, says, signer, request) in cases {
        let (status, body) = ask(&url, &signer, &request).await;
        assert_eq!(status, expected, "{says}: {body}");
        assert!(body.contains(says), "{says}: {body}");
    }
    // The answered request again, as someone who captured it would send it: no fresh summary.
    let (status, body) = ask(&url, &validator, &good).await;
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("already answered"), "{body}");
}

fn stranger_key() -> PublicKey {
    Identity::from_seed([78; 32]).public_key()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_without_a_monitor_gets_a_record_of_its_failure() {
    let h = Harness::new().serve().await;
    let v = &h.v;
    h.agent(32, vec![claim("GPU-n")]).await;
    assert!(
        v.challenge::<Gemm>("GPU-n", &policy())
            .await
            .unwrap()
            .accepted
    );
    let record = v.collect_health("GPU-n").await.unwrap();
    assert_eq!(record.reported, None);
    let failure = record.failure.expect("a failure");
    assert_eq!(failure.kind, FailureKind::AgentRefused);
    assert_eq!(record.measured.ratios.len(), 1, "{:?}", record.measured);
    // Its /metrics: none on this port.
    let status = reqwest::get(format!(
        "{}/metrics",
        v.registry().gpu("GPU-n").unwrap().unwrap().endpoint
    ))
    .await
    .unwrap()
    .status();
    assert_eq!(status.as_u16(), 404);
}
