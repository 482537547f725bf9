//! End to end through the binary: `pog agent` on a simulated H200 with a saved `pog bench
//! --json` registers with a running `pog validator`; its signed inspection and benchmark
//! records reach the validator's ledger with the agent's signature, and the GPU's bundle from
//! `pog ledger export --gpu` passes `pog verify` with the log key alone.

mod common;

use common::*;
use serde_json::Value;
use std::time::{Duration, Instant};

const SIMULATED_GPU: &str = HOST0_GPU;

#[test]
fn an_agents_inspection_and_benchmark_records_reach_the_ledger_and_verify() {
    let tmp = tempfile::tempdir().unwrap();
    let data = validator_dir(tmp.path(), "validator");
    let log_vkey = pog_json(&data, &["ledger", "vkey"], 0)["vkey"]
        .as_str()
        .unwrap()
        .to_string();

    // The provider's saved benchmark of the host, as `pog bench --json` prints it.
    let agent_data = tmp.path().join("agent");
    let bench = pog(
        &agent_data,
        &[
            "--simulate",
            "H200 SXM",
            "bench",
            "--suite",
            "quick",
            "--no-host",
            "--json",
        ],
    );
    assert_eq!(bench.status.code(), Some(0), "{bench:?}");
    let bench_file = tmp.path().join("bench.json");
    std::fs::write(&bench_file, &bench.stdout).unwrap();

    let net = Network::in_dir(tmp.path())
        .flags(&["--challenge-every", "60", "--checkpoint-every", "0.5"])
        .flags(TEST_ROUNDS)
        .agent(HOST0, &["--bench-report", bench_file.to_str().unwrap()])
        .start();
    let addr = &net.validator.addr;

    // The registration, then the agent's two reports, among the GPU's records.
    let deadline = Instant::now() + Duration::from_secs(90);
    let stored = loop {
        let page: Value = http_get(addr, &format!("/v1/records/{SIMULATED_GPU}"))
            .and_then(|(_, body)| serde_json::from_str(&body).ok())
            .unwrap_or_default();
        let records = page["records"].as_array().cloned().unwrap_or_default();
        let has = |kind: &str| records.iter().any(|r| r["envelope"]["kind"] == kind);
        if has("inspection") && has("benchmark") {
            break records;
        }
        assert!(Instant::now() < deadline, "no reports: {page}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let agent_key = stored[0]["record"]["agent"].as_str().unwrap().to_string();
    assert_eq!(stored[0]["envelope"]["kind"], "registration");
    let inspection = stored
        .iter()
        .find(|r| r["envelope"]["kind"] == "inspection")
        .unwrap();
    let benchmark = stored
        .iter()
        .find(|r| r["envelope"]["kind"] == "benchmark")
        .unwrap();
    for r in [inspection, benchmark] {
        assert_eq!(r["envelope"]["signer"], agent_key.as_str(), "{r}");
        assert_eq!(r["record"]["provenance"], "self_reported");
        assert_eq!(r["record"]["gpu_uuid"], SIMULATED_GPU);
    }
    assert_eq!(inspection["record"]["model"], "H200 SXM");
    assert_eq!(benchmark["record"]["suite"], "quick");
    let figures = benchmark["record"]["figures"].as_array().unwrap();
    let bf16 = figures
        .iter()
        .find(|f| f["name"] == "gemm_bf16_n8192_tflops")
        .unwrap_or_else(|| panic!("{figures:?}"));
    // The figure the saved report holds for the GPU.
    let saved: Value = serde_json::from_slice(&bench.stdout).unwrap();
    let gemm = saved["gpus"][0]["gemm"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["precision"] == "bf16" && g["size"] == 8192)
        .unwrap();
    assert_eq!(bf16["value"], gemm["tflops_median"]);

    // A checkpoint covering them, then the GPU's bundle, exported beside the running
    // validator, verifies with the log key alone: the reports signed by the agent its
    // registration names.
    loop {
        if let Some((200, text)) = http_get(addr, "/ledger/checkpoint") {
            let size: u64 = text.lines().nth(1).unwrap().parse().unwrap();
            if size >= stored.len() as u64 {
                break;
            }
        }
        assert!(Instant::now() < deadline, "no checkpoint");
        std::thread::sleep(Duration::from_millis(200));
    }
    let bundle = tmp.path().join("bundle.json");
    let args = [
        "ledger",
        "export",
        "--gpu",
        SIMULATED_GPU,
        "-o",
        bundle.to_str().unwrap(),
    ];
    pog_json(&data, &args, 0);
    let holder = tmp.path().join("holder");
    let verify = |path: &std::path::Path, status| {
        let args = [
            "verify",
            path.to_str().unwrap(),
            "--log-key",
            &log_vkey,
            "--accept-unwitnessed",
        ];
        pog_json(&holder, &args, status)
    };
    let report = verify(&bundle, 0);
    assert_eq!(
        report["problems"].as_array().unwrap().len(),
        0,
        "{report:#}"
    );
    assert_eq!(report["verdict"], "warn", "{report:#}");
    let signed: Vec<(&str, &str)> = report["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["kind"].as_str().unwrap(),
                r["signed_by"].as_str().unwrap(),
            )
        })
        .collect();
    for expected in [
        ("registration", "validator"),
        ("inspection", "agent"),
        ("benchmark", "agent"),
    ] {
        assert!(signed.contains(&expected), "{signed:?}");
    }

    // A figure changed in the exported bundle no longer verifies.
    let mut b = pog_ledger::bundle::Bundle::parse(&std::fs::read(&bundle).unwrap()).unwrap();
    let at = b
        .records
        .iter()
        .position(|r| {
            pog_ledger::entry::Entry::parse(&r.entry).unwrap().kind
                == pog_signed::RecordKind::Benchmark
        })
        .unwrap();
    let entry = &mut b.records[at].entry;
    let value = bf16["value"].to_string();
    let offset = entry
        .windows(value.len())
        .position(|w| w == value.as_bytes())
        .unwrap();
    entry[offset] = if entry[offset] == b'9' { b'8' } else { b'9' };
    let changed = tmp.path().join("changed.json");
    write(&changed, &b.to_json());
    let report = verify(&changed, 1);
    let problems: Vec<&str> = report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["problem"].as_str().unwrap())
        .collect();
    assert_eq!(problems, ["not_included", "modified"], "{report:#}");
}
