//! Agents' reports (ledger kinds 2 `inspection` and 3 `benchmark`) over loopback: an agent's
//! signed records reach the validator's ledger with the agent's signature and a GPU's bundle
//! verifies; and each hostile report is refused with nothing appended — another agent's key,
//! a GPU not registered, malformed, oversized, unknown fields, a replay, the same content
//! again, a flood through many keys and addresses, many GPUs from one address. Each hostile
//! test fails without the defence it names.

mod common;

use common::{claim, loopback, Harness, Served};
use pog_ledger::bundle::{verify_bundle, Bundle, WitnessPolicy};
use pog_ledger::note::Verifier;
use pog_records::reports::ReportReceipt;
use pog_records::reports::{
    BenchmarkFigures, Figure, Finding, InspectionSummary, Provenance, BODY_VERSION,
};
use pog_signed::RecordKind;
use pog_signed::{Envelope, Identity};
use pog_validator::reports;
use pog_validator::validator::{Config, Validator};
use serde_json::Value;
use std::net::IpAddr;

const GPU_A: &str = "GPU-report-a";
const GPU_B: &str = "GPU-report-b";

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A validator with `config` keeping its ledger in `dir`, served on loopback, and agents of
/// seeds 31 (GPU A) and 32 (GPU B) registered with it.
async fn validator(dir: &std::path::Path, config: Config) -> Served {
    let h = Harness::new().config(config).with_ledger(dir).serve().await;
    for (seed, gpu) in [(31, GPU_A), (32, GPU_B)] {
        assert_eq!(h.agent(seed, vec![claim(gpu)]).await.status(), 200);
    }
    h
}

fn agent(seed: u8) -> Identity {
    Identity::from_seed([seed; 32])
}

fn summary(uuid: &str, recorded_at_ms: u64) -> InspectionSummary {
    InspectionSummary {
        version: BODY_VERSION,
        gpu_uuid: uuid.parse().unwrap(),
        model: "H200 SXM".into(),
        bus_id: "0000:00:06.0".into(),
        driver_version: "580.95.05".into(),
        verdict: "warn".into(),
        findings: vec![Finding {
            code: "pcie.link".into(),
            severity: "warning".into(),
            message: "the link trained at Gen4 x16, below its Gen5 x16".into(),
        }],
        provenance: Provenance::SelfReported,
        recorded_at_ms,
    }
}

fn figures(uuid: &str) -> BenchmarkFigures {
    BenchmarkFigures {
        version: BODY_VERSION,
        gpu_uuid: uuid.parse().unwrap(),
        suite: "quick".into(),
        figures: vec![Figure {
            name: "gemm_bf16_n8192_tflops".into(),
            value: 741.25,
            unit: "TFLOPS".into(),
            method: "8192³ BF16 GEMM, median of 10 timed runs after 3 warm-up".into(),
        }],
        provenance: Provenance::SelfReported,
        recorded_at_ms: now_ms(),
    }
}

/// Posts raw bytes to `/v1/reports` from `from` (a loopback address): the status, the JSON
/// answer and its `Retry-After` in seconds, if any.
async fn post_from(from: IpAddr, url: &str, body: Vec<u8>) -> (u16, Value, Option<u64>) {
    let r = reqwest::Client::builder()
        .local_address(from)
        .build()
        .unwrap()
        .post(format!("{url}/v1/reports"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let retry_after = r
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().parse().unwrap());
    (status, r.json().await.unwrap_or(Value::Null), retry_after)
}

/// Posts raw bytes to `/v1/reports` from 127.0.0.1: the status and the JSON answer.
async fn post(url: &str, body: Vec<u8>) -> (u16, Value) {
    let (status, answer, _) = post_from(LOCAL, url, body).await;
    (status, answer)
}

async fn post_envelope(url: &str, envelope: &Envelope) -> (u16, Value) {
    post(url, serde_json::to_vec(envelope).unwrap()).await
}

const LOCAL: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

/// An inspection of `uuid` padded with `findings` findings of `chars` characters, told apart
/// by `tag` (its findings' codes).
fn padded(uuid: &str, tag: u64, findings: usize, chars: usize) -> InspectionSummary {
    let mut s = summary(uuid, now_ms());
    s.findings = (0..findings)
        .map(|j| Finding {
            code: format!("padding.{tag}.{j}"),
            severity: "info".into(),
            message: "x".repeat(chars),
        })
        .collect();
    s
}

/// The bytes of the ledger's files (entries, hashes, index) in `dir`.
fn ledger_bytes(dir: &std::path::Path) -> u64 {
    ["entries", "hashes", "index"]
        .iter()
        .map(|f| {
            walk(dir)
                .into_iter()
                .filter(|p| p.file_name().is_some_and(|n| n == *f))
                .map(|p| std::fs::metadata(p).unwrap().len())
                .sum::<u64>()
        })
        .sum()
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// The ledger's size and the registry's records of both GPUs: what a refused report must not
/// change.
fn stored(v: &Validator) -> (u64, usize) {
    let records = [GPU_A, GPU_B]
        .iter()
        .map(|g| v.registry().records(g, 0, 1000).unwrap().len())
        .sum();
    (v.records().ledger().unwrap().ledger().log().size(), records)
}

/// GPU A's bundle against a fresh checkpoint, verified with the log key alone.
fn verified_bundle(v: &Validator) -> pog_ledger::bundle::BundleReport {
    let ledger = v.records().ledger().unwrap();
    let checkpoint = ledger.checkpoint_if_grown().unwrap().unwrap();
    let bundle = Bundle::export(ledger.ledger(), GPU_A, &checkpoint, None).unwrap();
    let bundle = Bundle::parse(bundle.to_json().as_bytes()).unwrap();
    let key = Verifier::parse(&ledger.vkey()).unwrap();
    verify_bundle(&bundle, &key, &WitnessPolicy::default(), None)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_reports_are_logged_with_its_signature_and_verify() {
    let dir = tempfile::tempdir().unwrap();
    let h = validator(dir.path(), loopback()).await;
    let (v, url) = (h.v.clone(), h.url.clone());
    let a = agent(31);
    let envelopes = vec![
        a.seal(
            RecordKind::Inspection.wire_kind(),
            &summary(GPU_A, now_ms()),
        )
        .unwrap(),
        a.seal(RecordKind::Benchmark.wire_kind(), &figures(GPU_A))
            .unwrap(),
    ];
    // What `pog agent` does after each registration.
    let sent = pog_agent::reports::send_reports(&url, &envelopes)
        .await
        .unwrap();
    let receipts: Vec<ReportReceipt> = sent.into_iter().map(Result::unwrap).collect();
    assert!(receipts.iter().all(|r| r.recorded), "{receipts:?}");
    assert_eq!(
        receipts.iter().map(|r| r.log_index).collect::<Vec<_>>(),
        [Some(2), Some(3)],
        "after the two registrations"
    );
    // In the ledger as the agent signed them, and in the registry's records (the API).
    let logged = v
        .records()
        .ledger()
        .unwrap()
        .ledger()
        .gpu_entries(GPU_A)
        .unwrap();
    let kinds: Vec<RecordKind> = logged.iter().map(|(_, e)| e.kind).collect();
    assert_eq!(
        kinds,
        [
            RecordKind::Registration,
            RecordKind::Inspection,
            RecordKind::Benchmark
        ]
    );
    for ((_, entry), envelope) in logged[1..].iter().zip(&envelopes) {
        assert_eq!(entry.signer_key(), a.public_key());
        assert_eq!(entry.body, envelope.body);
        assert_eq!(hex::encode(entry.signature), envelope.signature);
    }
    let page: pog_validator::validator::RecordPage =
        reqwest::get(format!("{url}/v1/records/{GPU_A}"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    let api: Vec<&Envelope> = page.records.iter().map(|r| &r.envelope).collect();
    assert_eq!(api[1..], envelopes.iter().collect::<Vec<_>>()[..]);
    assert_eq!(page.records[2].record["figures"][0]["value"], 741.25);

    // The GPU's bundle verifies: the records signed by the agent its registration names.
    let report = verified_bundle(&v);
    assert!(report.ok(), "{:?}", report.problems);
    let signed_by: Vec<(Option<RecordKind>, &str)> = report
        .records
        .iter()
        .map(|r| (r.kind, r.signed_by))
        .collect();
    assert_eq!(
        signed_by,
        [
            (Some(RecordKind::Registration), "validator"),
            (Some(RecordKind::Inspection), "agent"),
            (Some(RecordKind::Benchmark), "agent")
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_signed_by_another_agent_for_a_gpu_it_does_not_own_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let h = validator(dir.path(), loopback()).await;
    let (v, url) = (h.v.clone(), h.url.clone());
    let before = stored(&v);
    // Agent 32 holds GPU B, and reports on GPU A (agent 31's).
    let (status, answer) = post_envelope(
        &url,
        &agent(32)
            .seal(
                RecordKind::Inspection.wire_kind(),
                &summary(GPU_A, now_ms()),
            )
            .unwrap(),
    )
    .await;
    assert_eq!(status, 403, "{answer}");
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains(agent(31).public_key().as_str()),
        "{answer}"
    );
    // A key that holds nothing at all.
    let (status, _) = post_envelope(
        &url,
        &agent(33)
            .seal(RecordKind::Benchmark.wire_kind(), &figures(GPU_A))
            .unwrap(),
    )
    .await;
    assert_eq!(status, 403);
    assert_eq!(stored(&v), before, "nothing appended or stored");
    // Had it been logged, GPU A's bundle would hold a record by an unknown signer.
    let report = verified_bundle(&v);
    assert!(report.ok(), "{:?}", report.problems);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_for_a_gpu_not_registered_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let h = validator(dir.path(), loopback()).await;
    let (v, url) = (h.v.clone(), h.url.clone());
    let before = stored(&v);
    let (status, answer) = post_envelope(
        &url,
        &agent(31)
            .seal(
                RecordKind::Inspection.wire_kind(),
                &summary("GPU-never-registered", now_ms()),
            )
            .unwrap(),
    )
    .await;
    assert_eq!(status, 404, "{answer}");
    assert!(answer["error"]
        .as_str()
        .unwrap()
        .contains("GPU-never-registered is not registered"));
    assert_eq!(stored(&v), before);
    assert!(v
        .registry()
        .records("GPU-never-registered", 0, 10)
        .unwrap()
        .is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_and_oversized_reports_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let h = validator(dir.path(), loopback()).await;
    let (v, url) = (h.v.clone(), h.url.clone());
    let a = agent(31);
    let before = stored(&v);
    let sealed_body = |kind: &str, body: String| serde_json::to_vec(&a.seal_body(kind, body));
    let good = serde_json::to_string(&summary(GPU_A, now_ms())).unwrap();
    // Over the report's 16 KiB, under the 48 KiB it used to be (a ledger entry and the
    // request limit would take it: only the report's own cap refuses it).
    let long = a
        .seal(
            RecordKind::Inspection.wire_kind(),
            &padded(GPU_A, 0, 40, 500),
        )
        .unwrap();
    assert!(
        (16_384..30_000).contains(&long.body.len()),
        "{}",
        long.body.len()
    );
    let mut forged = a
        .seal(
            RecordKind::Inspection.wire_kind(),
            &summary(GPU_A, now_ms()),
        )
        .unwrap();
    forged.body = forged.body.replace("warn", "pass");
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        ("not JSON", b"\x00garbage".to_vec(), 400),
        ("not an envelope", br#"{"kind":"inspection"}"#.to_vec(), 400),
        (
            "another kind",
            sealed_body("register", good.clone()).unwrap(),
            400,
        ),
        (
            "a body that is not JSON",
            sealed_body(RecordKind::Inspection.wire_kind(), "{\"version\":1,".into()).unwrap(),
            400,
        ),
        (
            "an inspection under the benchmark kind",
            sealed_body(RecordKind::Benchmark.wire_kind(), good.clone()).unwrap(),
            400,
        ),
        (
            "a verdict of no kind",
            sealed_body(
                RecordKind::Inspection.wire_kind(),
                good.replace("\"warn\"", "\"great\""),
            )
            .unwrap(),
            400,
        ),
        (
            "claiming to be measured",
            sealed_body(
                RecordKind::Inspection.wire_kind(),
                good.replace("\"self_reported\"", "\"measured\""),
            )
            .unwrap(),
            400,
        ),
        (
            "a number out of range",
            sealed_body(
                RecordKind::Benchmark.wire_kind(),
                serde_json::to_string(&figures(GPU_A))
                    .unwrap()
                    .replace("741.25", "1e999"),
            )
            .unwrap(),
            400,
        ),
        ("forged", serde_json::to_vec(&forged).unwrap(), 403),
        ("oversized", serde_json::to_vec(&long).unwrap(), 413),
    ];
    for (what, body, expected) in cases {
        let (status, answer) = post(&url, body).await;
        assert_eq!(status, expected, "{what}: {answer}");
        assert!(answer["error"].is_string(), "{what}: {answer}");
    }
    assert_eq!(stored(&v), before, "nothing appended or stored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_with_unknown_fields_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let h = validator(dir.path(), loopback()).await;
    let (v, url) = (h.v.clone(), h.url.clone());
    let a = agent(31);
    let before = stored(&v);
    let mut top: Value = serde_json::to_value(summary(GPU_A, now_ms())).unwrap();
    top["score"] = 100.into();
    let mut nested: Value = serde_json::to_value(figures(GPU_A)).unwrap();
    nested["figures"][0]["verified"] = true.into();
    for (kind, body) in [
        (RecordKind::Inspection.wire_kind(), top),
        (RecordKind::Benchmark.wire_kind(), nested),
    ] {
        let (status, answer) = post_envelope(&url, &a.seal(kind, &body).unwrap()).await;
        assert_eq!(status, 400, "{kind}: {answer}");
        assert!(
            answer["error"].as_str().unwrap().contains("unknown field"),
            "{answer}"
        );
    }
    assert_eq!(stored(&v), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_report_is_recorded_once() {
    let dir = tempfile::tempdir().unwrap();
    let h = validator(dir.path(), loopback()).await;
    let (v, url) = (h.v.clone(), h.url.clone());
    let a = agent(31);
    let report = a
        .seal(
            RecordKind::Inspection.wire_kind(),
            &summary(GPU_A, now_ms()),
        )
        .unwrap();
    let (status, first) = post_envelope(&url, &report).await;
    assert_eq!((status, &first["recorded"]), (200, &true.into()), "{first}");
    let after_first = stored(&v);
    // The agent again after its next registration, a third party replaying it, and the same
    // report with its signer spelled in capitals: one record.
    let mut upper = report.clone();
    upper.signer = upper.signer.to_ascii_uppercase();
    for again in [&report, &report, &upper] {
        let (status, answer) = post_envelope(&url, again).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["recorded"], false, "{answer}");
        assert_eq!(answer["id"], first["id"]);
    }
    assert_eq!(stored(&v), after_first, "no duplicate entry");
    let inspections = v
        .records()
        .ledger()
        .unwrap()
        .ledger()
        .gpu_entries(GPU_A)
        .unwrap()
        .into_iter()
        .filter(|(_, e)| e.kind == RecordKind::Inspection)
        .count();
    assert_eq!(inspections, 1);
    // An inspection that says something new is a new record.
    let new = InspectionSummary {
        verdict: "fail".into(),
        ..summary(GPU_A, now_ms())
    };
    let (status, answer) = post_envelope(
        &url,
        &a.seal(RecordKind::Inspection.wire_kind(), &new).unwrap(),
    )
    .await;
    assert_eq!((status, &answer["recorded"]), (200, &true.into()));
    assert_eq!(stored(&v).0, after_first.0 + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_content_is_stored_once_whatever_its_time_or_spelling() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        report_kib_per_gpu_per_hour: 16,
        ..loopback()
    };
    let h = validator(dir.path(), config).await;
    let (v, url) = (h.v.clone(), h.url.clone());
    let a = agent(31);
    let t = now_ms();
    let first = a
        .seal(RecordKind::Inspection.wire_kind(), &summary(GPU_A, t))
        .unwrap();
    let (status, answer) = post_envelope(&url, &first).await;
    assert_eq!(
        (status, &answer["recorded"]),
        (200, &true.into()),
        "{answer}"
    );
    let held = stored(&v);
    let bytes = ledger_bytes(dir.path());
    // The agent restarting forty times (the same inspection made at another time), the same
    // content spelled with other whitespace, from another address: far past the GPU's 16 KiB
    // an hour if each cost its charge, and all held already.
    for i in 1..=40u64 {
        let again = summary(GPU_A, t + i);
        let envelope = if i % 2 == 0 {
            a.seal(RecordKind::Inspection.wire_kind(), &again).unwrap()
        } else {
            a.seal_body(
                RecordKind::Inspection.wire_kind(),
                serde_json::to_string_pretty(&again).unwrap(),
            )
        };
        let from = IpAddr::from([127, 0, 0, 1 + (i % 2) as u8]);
        let (status, answer, _) =
            post_from(from, &url, serde_json::to_vec(&envelope).unwrap()).await;
        assert_eq!(status, 200, "{i}: {answer}");
        assert_eq!(answer["recorded"], false, "{answer}");
        assert_eq!(answer["id"], answer_id(&v, &first));
    }
    assert_eq!(stored(&v), held, "nothing appended or stored");
    assert_eq!(ledger_bytes(dir.path()), bytes);
    let inspections = v
        .records()
        .ledger()
        .unwrap()
        .ledger()
        .gpu_entries(GPU_A)
        .unwrap()
        .into_iter()
        .filter(|(_, e)| e.kind == RecordKind::Inspection)
        .count();
    assert_eq!(inspections, 1);
}

/// The id the validator gives `envelope`'s content.
fn answer_id(v: &Validator, envelope: &Envelope) -> Value {
    let checked = reports::check_report(&serde_json::to_vec(envelope).unwrap(), now_ms(), |u| {
        Ok(v.registry().gpu(u)?.map(|g| g.agent))
    })
    .unwrap();
    checked.id.into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_keys_and_addresses_flooding_reports_cannot_pass_each_gpus_hourly_budget() {
    let dir = tempfile::tempdir().unwrap();
    // The defaults: 64 KiB an hour per GPU, 8 MiB per address.
    let h = validator(dir.path(), loopback()).await;
    let (v, url) = (h.v.clone(), h.url.clone());
    let budget = reports::DEFAULT_REPORT_KIB_PER_GPU_PER_HOUR as usize * 1024;
    // Five more keys, two GPUs each.
    let mut gpus = Vec::new();
    for seed in 41..46u8 {
        let mine: Vec<String> = (0..2).map(|g| format!("GPU-flood-{seed}-{g}")).collect();
        let claims = mine.iter().map(|g| claim(g)).collect();
        let status = h.agent(seed, claims).await.status();
        assert_eq!(status, 200);
        gpus.extend(mine.into_iter().map(|g| (seed, g)));
    }
    let before = ledger_bytes(dir.path());
    let started = std::time::Instant::now();
    // Each key floods its GPUs with distinct reports of about 10 KiB, from two addresses in
    // turn: twelve each, 120 in all.
    let mut recorded = std::collections::HashMap::<String, (usize, usize)>::new();
    let mut tag = 0;
    for round in 0..12 {
        for (seed, gpu) in &gpus {
            tag += 1;
            let envelope = agent(*seed)
                .seal(
                    RecordKind::Inspection.wire_kind(),
                    &padded(gpu, tag, 20, 440),
                )
                .unwrap();
            let bytes = serde_json::to_vec(&envelope).unwrap();
            let charge = bytes.len();
            assert!((9_000..12_000).contains(&charge), "{charge}");
            let from = IpAddr::from([127, 0, 0, 1 + (round % 2) as u8]);
            let (status, answer, retry_after) = post_from(from, &url, bytes).await;
            let (count, sum) = recorded.entry(gpu.clone()).or_default();
            match status {
                200 => {
                    assert_eq!(answer["recorded"], true, "{answer}");
                    *count += 1;
                    *sum += charge;
                }
                429 => {
                    let error = answer["error"].as_str().unwrap();
                    assert!(
                        error.contains(&format!(
                            "GPU {gpu} has used its budget of 64 KiB of new reports an hour"
                        )),
                        "{error}"
                    );
                    // Refused only when it did not fit, and told when it will.
                    assert!(*sum + charge > budget, "{gpu}: {sum} + {charge}");
                    let wait = retry_after.expect("a Retry-After header");
                    assert!((1..=3600).contains(&wait), "{wait}");
                    assert!(error.contains(&format!("fits in {wait} s")), "{error}");
                }
                other => panic!("{other}: {answer}"),
            }
        }
    }
    // What refilled meanwhile (64 KiB an hour) is a few bytes a second.
    let refill = (started.elapsed().as_secs_f64() * budget as f64 / 3600.0).ceil() as usize;
    for (gpu, (count, sum)) in &recorded {
        assert!(*sum <= budget + refill, "{gpu}: {sum} bytes stored");
        assert!((5..12).contains(count), "{gpu}: {count} reports stored");
        let records = v.registry().records(gpu, 0, 100).unwrap().len();
        assert_eq!(
            records,
            1 + count,
            "{gpu}: its registration and its reports"
        );
    }
    // The ledger grew by no more than the GPUs' budgets (each report's entry, hashes and
    // index take no more than its charge and 72 bytes).
    let reports: usize = recorded.values().map(|(n, _)| n).sum();
    let grown = ledger_bytes(dir.path()) - before;
    let bound = gpus.len() * (budget + refill) + reports * reports::LEDGER_OVERHEAD_BYTES;
    assert!(grown as usize <= bound, "{grown} > {bound}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_of_large_reports_are_bounded_in_bytes_and_still_reach_every_record() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        report_kib_per_gpu_per_hour: 1 << 20,
        ..loopback()
    };
    let h = validator(dir.path(), config).await;
    let (v, url) = (h.v.clone(), h.url.clone());
    let a = agent(31);
    // 200 reports of about 12 KiB each (three findings of 4,000 bytes): 2.5 MB stored.
    for i in 0..200u64 {
        let s = padded(GPU_A, i, 3, 4000);
        let (status, answer) = post_envelope(
            &url,
            &a.seal(RecordKind::Inspection.wire_kind(), &s).unwrap(),
        )
        .await;
        assert_eq!(status, 200, "{answer}");
    }
    let stored = v.registry().records(GPU_A, 0, 1000).unwrap().len();
    assert_eq!(stored, 201, "the registration and the reports");
    // A page asked for a thousand records is cut by its bytes, and says where to go on.
    let (mut seen, mut after, mut pages) = (0, 0i64, 0);
    loop {
        let r = reqwest::get(format!("{url}/v1/records/{GPU_A}?limit=1000&after={after}"))
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        let bytes = r.bytes().await.unwrap();
        assert!(bytes.len() < 6 << 20, "a page of {} bytes", bytes.len());
        let page: Value = serde_json::from_slice(&bytes).unwrap();
        seen += page["records"].as_array().unwrap().len();
        pages += 1;
        match page["next_after"].as_i64() {
            Some(next) => after = next,
            None => break,
        }
    }
    assert_eq!(seen, stored);
    assert!(pages > 1, "{pages}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_gpus_reported_from_one_address_share_its_hourly_budget() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        report_kib_per_source_per_hour: 16,
        ..loopback()
    };
    let h = validator(dir.path(), config).await;
    let (v, url) = (h.v.clone(), h.url.clone());
    let before = stored(&v).0;
    // Reports of about 6 KiB on GPU A (key 31) and GPU B (key 32), each far below its GPU's
    // 64 KiB: the third from one address passes the address's 16 KiB.
    let mut statuses = Vec::new();
    for (i, (seed, gpu)) in [(31, GPU_A), (32, GPU_B), (31, GPU_A)]
        .into_iter()
        .enumerate()
    {
        let report = agent(seed)
            .seal(
                RecordKind::Inspection.wire_kind(),
                &padded(gpu, i as u64, 12, 440),
            )
            .unwrap();
        let bytes = serde_json::to_vec(&report).unwrap();
        assert!((5_500..8_000).contains(&bytes.len()), "{}", bytes.len());
        let (status, answer, retry_after) = post_from(LOCAL, &url, bytes.clone()).await;
        if status == 429 {
            assert!(
                answer["error"].as_str().unwrap().contains(
                    "the GPUs reported from 127.0.0.1 have used its budget of 16 KiB of new reports an hour"
                ),
                "{answer}"
            );
            assert!(retry_after.is_some_and(|s| s > 0));
            // From another address, the same report is taken: its GPU has room.
            let other = IpAddr::from([127, 0, 0, 3]);
            let (status, answer, _) = post_from(other, &url, bytes).await;
            assert_eq!(
                (status, &answer["recorded"]),
                (200, &true.into()),
                "{answer}"
            );
        }
        statuses.push(status);
    }
    assert_eq!(statuses, [200, 200, 429]);
    assert_eq!(stored(&v).0, before + 3);
}
