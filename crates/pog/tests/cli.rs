//! The `pog` binary end to end: real processes, real files, real exit codes.
//! Runs on hosts without a GPU (CI); GPU hosts are exercised through `--simulate` and the
//! H200 run recorded in docs/.

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

mod common;

use common::{free_port, Network, Service, ValidatorProcess, HOST0, HOST0_GPU, TEST_ROUNDS};

const H200_XML: &str = include_str!("../../device/tests/fixtures/nvidia-smi-q.xml");

fn pog() -> Command {
    let mut cmd = Command::cargo_bin("pog").unwrap();
    cmd.env_remove("POG_SIMULATE");
    cmd
}

fn json_of(cmd: &mut Command) -> (Value, i32) {
    let out = cmd.output().unwrap();
    let code = out.status.code().unwrap();
    let value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    (value, code)
}

/// A fake nvidia-smi: a shell script with the given body.
fn fake_smi(dir: &Path, body: &str) -> PathBuf {
    let path = dir.join("nvidia-smi");
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// Whether this machine has the NVIDIA driver: tests of the real platform assert what each
/// kind of host must show.
fn host_has_nvidia_driver() -> bool {
    Path::new("/proc/driver/nvidia/version").exists()
}

#[test]
fn check_fails_a_host_without_gpus_and_still_reports_the_host() {
    // `pog check && …` must not accept a machine with no GPU. The simulated bare host shows it
    // anywhere; the real platform shows it on a host without the NVIDIA driver (CI), and on a
    // GPU host its inspection must find the GPUs instead.
    let (json, code) = json_of(pog().args(["inspect", "--json", "--simulate", ""]));
    assert_eq!((code, &json["verdict"]), (1, &Value::from("fail")));
    if host_has_nvidia_driver() {
        let (json, _) = json_of(pog().args(["inspect", "--json"]));
        assert!(
            !json["inspection"]["gpus"].as_array().unwrap().is_empty(),
            "a host with the NVIDIA driver and no GPU found: {json:#}"
        );
        return;
    }
    pog()
        .arg("check")
        .assert()
        .code(1)
        .stdout(predicate::str::contains("No NVIDIA GPU found"))
        .stdout(predicate::str::contains("sockets / cores / threads"))
        .stdout(predicate::str::contains("verdict: FAIL"));
    let (json, code) = json_of(pog().args(["check", "--json"]));
    assert_eq!(code, 1);
    assert_eq!(json["verdict"], "fail");
    assert_eq!(json["exit_status"], 1);
    assert_eq!(json["stages"][0]["name"], "inspect");
    assert_eq!(json["stages"][0]["status"], "fail");
    assert_eq!(
        json["stages"][2]["status"], "skipped",
        "nothing to prove is not a pass"
    );
    assert!(
        json["inspect"]["inventory"]["host"]["cpu"]["value"]["threads"]
            .as_u64()
            .unwrap()
            >= 1
    );
    assert_eq!(json["inspect"]["inventory"]["origin"], "hardware");
}

#[test]
fn a_simulated_healthy_h200_host_is_genuine() {
    let (json, code) = json_of(pog().args(["inspect", "--json", "--simulate", "H200 SXM x2"]));
    assert_eq!(code, 0);
    let gpus = json["inspection"]["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 2);
    assert!(gpus
        .iter()
        .all(|g| g["verdict"] == "genuine" && g["model"] == "H200 SXM"));
    assert_eq!(
        json["inventory"]["origin"]["simulated"]["profile"],
        "H200 SXM x2"
    );
    pog()
        .args(["check"])
        .env("POG_SIMULATE", "H200 SXM")
        .assert()
        .success()
        .stdout(predicate::str::contains("SIMULATED HOST"))
        .stdout(predicate::str::contains("1 of 1 GPU(s) genuine"));
}

#[test]
fn inspect_prints_the_gpu_topology_of_multi_gpu_hosts() {
    pog()
        .args(["inspect", "--simulate", "H100 SXM x4"])
        .assert()
        .success()
        .stdout(predicate::str::contains("NV18"))
        .stdout(predicate::str::contains("18/18 active"));
    let (json, _) = json_of(pog().args(["inspect", "--json", "--simulate", "A100 SXM 80GB x3"]));
    assert_eq!(
        json["inventory"]["nvml"]["value"]["topology"]
            .as_array()
            .unwrap()
            .len(),
        3,
        "three pairs"
    );
}

#[test]
fn a_failing_finding_exits_non_zero_with_its_evidence() {
    let (json, code) =
        json_of(pog().args(["inspect", "--json", "--simulate", "H100 SXM; spoofed-name"]));
    assert_eq!(code, 1);
    let findings = json["inspection"]["findings"].as_array().unwrap();
    let name = findings.iter().find(|f| f["rule"] == "spec.name").unwrap();
    assert_eq!(name["severity"], "fail");
    assert!(name["evidence"].to_string().contains("0x2330"));
    pog()
        .args(["check", "--simulate", "H200 SXM; ld-preload"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("env.preload"))
        .stdout(predicate::str::contains("FAIL"));
}

#[test]
fn warnings_alone_do_not_fail() {
    let (json, code) = json_of(pog().args([
        "check",
        "--json",
        "--simulate",
        "H200 SXM; ecc-off, link-degraded",
    ]));
    assert_eq!(code, 0);
    assert_eq!(json["stages"][0]["status"], "warn");
}

#[test]
fn a_fake_nvidia_smi_claiming_a_gpu_the_kernel_lacks_fails() {
    // Without the driver the kernel sees no GPU at all; on a GPU host the capture is another
    // card's (its UUID and serial differ from what NVML reads). Either way: exit 1.
    let dir = tempfile::tempdir().unwrap();
    let xml = dir.path().join("h200.xml");
    std::fs::write(&xml, H200_XML).unwrap();
    let smi = fake_smi(dir.path(), &format!("cat {}", xml.display()));
    let (json, code) = json_of(pog().args(["inspect", "--json", "--nvidia-smi"]).arg(&smi));
    assert_eq!(code, 1, "{json:#}");
    let rules: Vec<&str> = json["inspection"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["rule"].as_str())
        .collect();
    let expected = if host_has_nvidia_driver() {
        "sources.smi_matches_nvml"
    } else {
        "sources.available"
    };
    assert!(rules.contains(&expected), "{rules:?}");
    assert_eq!(
        json["inventory"]["nvidia_smi"]["value"]["binary"],
        smi.display().to_string()
    );
}

#[test]
fn a_hanging_nvidia_smi_is_cut_off_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let smi = fake_smi(dir.path(), "sleep 60");
    let started = std::time::Instant::now();
    let (json, _) = json_of(
        pog()
            .args([
                "inspect",
                "--json",
                "--nvidia-smi-timeout",
                "0.5",
                "--nvidia-smi",
            ])
            .arg(&smi),
    );
    assert!(started.elapsed().as_secs() < 30);
    let why = json["inventory"]["nvidia_smi"]["unavailable"]
        .as_str()
        .unwrap();
    assert!(why.contains("did not answer within 0.5 s"), "{why}");
}

#[test]
fn malformed_nvidia_smi_output_is_reported_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let smi = fake_smi(dir.path(), "echo '<nvidia_smi_log><gpu>'");
    let (json, _) = json_of(pog().args(["inspect", "--json", "--nvidia-smi"]).arg(&smi));
    let why = json["inventory"]["nvidia_smi"]["unavailable"]
        .as_str()
        .unwrap();
    assert!(why.contains("malformed XML"), "{why}");
    let smi = fake_smi(dir.path(), "echo broken >&2; exit 9");
    let (json, _) = json_of(pog().args(["inspect", "--json", "--nvidia-smi"]).arg(&smi));
    let why = json["inventory"]["nvidia_smi"]["unavailable"]
        .as_str()
        .unwrap();
    assert!(why.contains("broken"), "{why}");
}

#[test]
fn bad_flags_and_profiles_are_clear_errors() {
    pog()
        .args(["inspect", "--nvidia-smi-timeout", "soon"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("not a number of seconds"));
    pog()
        .args(["inspect", "--simulate", "H900"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("unknown GPU model \"H900\""));
    pog()
        .args(["inspect", "--simulate", "H200 SXM; overheat"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("unknown fault"));
    pog().arg("frobnicate").assert().code(2);
}

#[test]
fn prove_runs_the_validators_challenge_and_checks_its_flags() {
    // The CPU prover takes a small challenge on a simulated two-GPU host: both GPUs at once,
    // every spot check passed, the CPU root equal to itself recomputed.
    let (json, code) = json_of(pog().args([
        "--json",
        "prove",
        "--simulate",
        "H200 SXM x2",
        "--prover",
        "cpu",
        "--size",
        "32",
        "--batch",
        "2",
        "--expected-ms",
        "60000",
        "--against-cpu",
        "--items",
        "4096",
        "--walkers",
        "1024",
        "--steps",
        "16",
    ]));
    assert_eq!(code, 0, "{json:#}");
    assert_eq!(json["verdict"], "pass");
    assert_eq!(json["simulated"], true);
    let proofs = json["proofs"].as_array().unwrap();
    assert_eq!(proofs.len(), 2);
    for p in proofs {
        assert_eq!(p["check"]["outcome"]["accepted"], true, "{p:#}");
        assert_eq!(p["cpu_root_matches"], true);
        assert!(p["check"]["challenge"]["gpu_bus_id"].is_string());
        // Binary values are hex.
        assert_eq!(p["check"]["challenge"]["nonce"].as_str().unwrap().len(), 64);
        // The memory challenge ran too, at the small shape asked for.
        assert_eq!(p["memory"]["outcome"]["accepted"], true, "{p:#}");
        assert_eq!(p["memory"]["dataset_bytes"], 4096 * 128);
        assert_eq!(p["memory"]["walk_nonce"].as_str().unwrap().len(), 64);
        assert!(p["memory_error"].is_null());
    }
    // Either proof alone.
    let (json, code) = json_of(pog().args([
        "--json",
        "prove",
        "--simulate",
        "H200 SXM",
        "--prover",
        "cpu",
        "--proof",
        "memory",
        "--items",
        "2048",
        "--walkers",
        "512",
        "--expected-ms",
        "60000",
    ]));
    assert_eq!(code, 0, "{json:#}");
    assert!(json["proofs"][0]["check"].is_null());
    assert_eq!(json["proofs"][0]["memory"]["outcome"]["accepted"], true);
    // The per-model challenge is beyond the CPU prover: a clear per-GPU error, exit 1.
    pog()
        .args(["prove", "--simulate", "H200 SXM"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("beyond this agent's CPU prover"));
    pog()
        .args(["prove", "--simulate", "H200 SXM", "--prover", "gpu"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("the GPU prover needs a real GPU"));
    pog()
        .args(["prove", "--size", "4", "--simulate", "H200 SXM"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--size"));
    for bound in ["inf", "0", "-5", "NaN"] {
        pog()
            .args([
                "prove",
                "--simulate",
                "H200 SXM",
                &format!("--expected-ms={bound}"),
            ])
            .assert()
            .code(2)
            .stderr(predicate::str::contains("--expected-ms"));
    }
    pog()
        .args(["prove", "--leaf-elements", "0"])
        .assert()
        .code(2);
    pog()
        .args([
            "agent",
            "--prover",
            "quantum",
            "--validator",
            "http://x",
            "--trust",
            "k",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--prover"));
}

#[test]
fn the_readmes_cpu_prove_tour_passes_with_the_memory_proof_sized_for_the_cpu() {
    // The README's tour, word for word: no memory flags. The per-model memory plan fills an
    // H200's 141 GB, beyond the CPU prover; pog sizes it down and says so.
    let tour = [
        "prove",
        "--simulate",
        "H200 SXM",
        "--prover",
        "cpu",
        "--size",
        "32",
        "--batch",
        "2",
        "--expected-ms",
        "60000",
    ];
    pog()
        .args(tour)
        .assert()
        .code(0)
        .stdout(predicate::str::contains(
            "memory challenge sized for the CPU prover",
        ))
        .stdout(predicate::str::contains("proves no model"));
    let (json, code) = json_of(pog().arg("--json").args(tour));
    assert_eq!(code, 0, "{json:#}");
    let p = &json["proofs"][0];
    assert_eq!(p["memory"]["outcome"]["accepted"], true, "{p:#}");
    assert_eq!(p["memory"]["dataset_bytes"], 4096 * 128);
    assert!(p["memory_note"]
        .as_str()
        .is_some_and(|n| n.contains("H200 SXM's plan is")));
    // A shape given in full is the user's: no note.
    let (json, code) = json_of(pog().arg("--json").args(tour).args([
        "--items",
        "2048",
        "--walkers",
        "512",
        "--steps",
        "4",
    ]));
    assert_eq!(code, 0, "{json:#}");
    assert_eq!(json["proofs"][0]["memory"]["dataset_bytes"], 2048 * 128);
    assert!(json["proofs"][0]["memory_note"].is_null());
}

#[test]
fn specs_lists_and_details_the_database() {
    pog()
        .arg("specs")
        .assert()
        .success()
        .stdout(predicate::str::contains("H200 SXM"))
        .stdout(predicate::str::contains("0x2335"));
    let (json, code) = json_of(pog().args(["specs", "NVIDIA H200", "--json"]));
    assert_eq!(code, 0);
    assert_eq!(json["models"][0]["sm_count"], 132);
    assert_eq!(json["models"][0]["measured"], true);
    pog()
        .args(["specs", "H900"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("known models"));
}

#[test]
fn bench_on_a_simulated_gpu_checks_and_judges_every_figure() {
    let (json, code) = json_of(pog().args([
        "bench",
        "--json",
        "--simulate",
        "H100 SXM",
        "--sizes",
        "128",
        "--copy-mib",
        "1",
        "--iterations",
        "2",
        "--no-host",
    ]));
    assert_eq!(code, 0, "{json:#}");
    let gpu = &json["gpus"][0];
    assert_eq!(gpu["model"], "H100 SXM");
    let gemms = gpu["gemm"].as_array().unwrap();
    assert_eq!(gemms.len(), 7);
    for g in gemms {
        assert_eq!(g["check"]["wrong"], 0, "{g:#}");
        assert_eq!(g["judgement"]["verdict"], "pass", "{g:#}");
    }
    assert_eq!(gpu["copies"].as_array().unwrap().len(), 6);
    assert!(json["host"].is_null());
}

#[test]
fn bench_measures_every_gpu_pair_of_a_multi_gpu_host() {
    let (json, code) = json_of(pog().args([
        "--json",
        "bench",
        "--simulate",
        "H200 SXM x2",
        "--suite",
        "quick",
        "--no-host",
        "--sustained-seconds",
        "0",
    ]));
    assert!(code == 0, "{json:#}");
    let peers = &json["peers"]["value"];
    assert_eq!(peers["links"].as_array().unwrap().len(), 2, "{peers:#}");
    assert_eq!(peers["links"][0][2]["name"], "NVLink ×18 (v4)");
    let figures = peers["figures"].as_array().unwrap();
    assert_eq!(figures.len(), 2 * 4);
    assert!(figures.iter().all(|f| f["judgement"]["verdict"] == "pass"));
    assert_eq!(peers["latencies"].as_array().unwrap().len(), 2);
    let all_reduce = peers["all_reduce"].as_array().unwrap();
    assert_eq!(all_reduce.len(), 2, "the quick suite's two sizes");
    assert_eq!(all_reduce[1]["judgement"]["verdict"], "pass");
    // One GPU: no pairs.
    let (single, _) = json_of(pog().args([
        "--json",
        "bench",
        "--simulate",
        "H200 SXM",
        "--suite",
        "quick",
        "--no-host",
        "--sustained-seconds",
        "0",
    ]));
    assert!(single["peers"].is_null());
}

#[test]
fn bench_flags_are_validated() {
    // A storage directory that does not exist fails the run, not just the figure.
    pog()
        .args([
            "bench",
            "--simulate",
            "L4",
            "--no-gpu",
            "--storage-dir",
            "/nonexistent",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--storage-dir /nonexistent"));
    // With --json, a script reads the error where it reads every verdict.
    let (json, code) = json_of(pog().args([
        "bench",
        "--json",
        "--simulate",
        "L4",
        "--no-gpu",
        "--storage-dir",
        "/nonexistent",
    ]));
    assert_eq!(code, 2);
    assert_eq!(json["verdict"], "error");
    assert_eq!(json["exit_status"], 2);
    assert_eq!(json["schema"], "pog.bench/1");
    assert!(json["error"]
        .as_str()
        .unwrap()
        .contains("no such directory"));
    pog()
        .args(["bench", "--suite", "huge"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("unknown suite"));
    pog()
        .args(["bench", "--precisions", "fp4"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("possible values: fp64"));
    pog().args(["bench", "--sizes", "0"]).assert().code(2);
    pog()
        .args(["bench", "--simulate", "L4", "--gpus", "3", "--no-host"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("this host has 1 CUDA device"));
}

#[test]
fn check_runs_the_quick_bench_and_prove_stages() {
    let dir = tempfile::tempdir().unwrap();
    let (json, code) = json_of(
        pog()
            .args(["check", "--json", "--simulate", "L4"])
            .env("TMPDIR", dir.path()),
    );
    assert_eq!(code, 0, "{json:#}");
    let stages: Vec<&str> = json["stages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(stages, ["inspect", "bench", "prove"]);
    // No real GPU to prove on a simulated host: the stage says it was skipped.
    assert_eq!(json["stages"][2]["status"], "skipped");
    assert!(json["stages"][2]["summary"]
        .as_str()
        .unwrap()
        .starts_with("skipped: a simulated host"));
    assert_eq!(json["verdict"], "pass");
    assert_eq!(json["simulated"], true);
    assert_eq!(json["bench"]["suite"], "quick");
    // The L4 has 24 GB: the quick suite uses 4096 for it.
    assert!(json["bench"]["gpus"][0]["gemm"]
        .as_array()
        .unwrap()
        .iter()
        .all(|g| g["size"] == 4096));
    assert!(json["bench"]["host"]["cpu_gflops_single"].as_f64().unwrap() > 0.0);
}

/// GET over plain HTTP/1.1, returning the body.
fn http_get(addr: &str, path: &str) -> Option<String> {
    common::http_get(addr, path).map(|(_, body)| body)
}

#[test]
fn validator_and_agent_processes_prove_a_gpu_over_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let net = Network::in_dir(dir.path())
        .flags(&["--challenge-every", "1"])
        .flags(TEST_ROUNDS)
        .agent(HOST0, &[])
        .start();
    let (vaddr, key) = (&net.validator.addr, net.validator.key.clone());
    // The simulated H200's UUID; the validator challenges it every second once registered.
    let uuid = HOST0_GPU;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let records = loop {
        let body = http_get(vaddr, &format!("/v1/records/{uuid}")).unwrap_or_default();
        let page: Value = serde_json::from_str(&body).unwrap_or_default();
        // Challenge records, past the registration event.
        let records: Vec<Value> = page["records"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|r| r["record"].get("challenge").is_some())
            .collect();
        if !records.is_empty() || std::time::Instant::now() > deadline {
            break records;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert!(!records.is_empty(), "no record within a minute");
    assert_eq!(records[0]["envelope"]["signer"], Value::String(key));
    let record = &records[0]["record"];
    assert_eq!(record["accepted"], true, "{record:#}");
    assert_eq!(record["model"], "H200 SXM");
    assert_eq!(
        record["simulated"], true,
        "a simulated GPU's record says so"
    );
    // Keys persist in the data dirs, owner-only.
    use std::os::unix::fs::PermissionsExt;
    let (v, a) = (&net.validator.service.data, &net.agents[0].service.data);
    let mode = std::fs::metadata(v.join("validator.key"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    assert!(v.join("registry.sqlite").exists());
    assert!(a.join("agent.key").exists());
}

#[test]
fn two_simulated_agents_register_distinct_gpus_with_one_validator() {
    let dir = tempfile::tempdir().unwrap();
    // Two agents with the same kind of profile and no host=N, each with its own data dir (so
    // its own key): each prints the profile it serves, with the host number from its key.
    let net = Network::in_dir(dir.path())
        .flags(&["--challenge-every", "3600", "--no-memory-proof"])
        .flags(TEST_ROUNDS)
        .agent("H200 SXM x2", &[])
        .agent("H200 SXM", &[])
        .start();
    let served = |i: usize| -> String {
        net.agents[i]
            .profile
            .clone()
            .expect("a simulated agent names the host it simulates")
    };
    let (profile_a, profile_b) = (served(0), served(1));
    assert!(profile_a.starts_with("H200 SXM x2; host="), "{profile_a}");
    assert!(profile_b.starts_with("H200 SXM; host="), "{profile_b}");
    let gpus = net.validator.gpus();
    assert_eq!(gpus.len(), 3, "both agents' GPUs are listed: {gpus:#?}");
    let uuids: std::collections::BTreeSet<&str> =
        gpus.iter().map(|g| g["uuid"].as_str().unwrap()).collect();
    let agents: std::collections::BTreeSet<&str> =
        gpus.iter().map(|g| g["agent"].as_str().unwrap()).collect();
    assert_eq!((uuids.len(), agents.len()), (3, 2), "{gpus:#?}");
    assert!(gpus.iter().all(|g| g["simulated"] == true));
    assert!(!uuids.contains(HOST0_GPU));
    // The profile an agent printed rebuilds its GPUs exactly: same key, same UUIDs.
    for profile in [&profile_a, &profile_b] {
        let (json, code) = json_of(pog().args(["inspect", "--json", "--simulate", profile]));
        assert_eq!(code, 0);
        for g in json["inspection"]["gpus"].as_array().unwrap() {
            assert!(
                uuids.contains(g["uuid"].as_str().unwrap()),
                "{profile}: {g:#}"
            );
        }
    }
}

/// `POG_LOG` turns a target's debug lines on: a validator run with
/// `pog_validator::schedule=debug` prints its first round's debug line. The formatter's own
/// default maximum level (info) once dropped every debug event before `POG_LOG` was asked.
#[test]
fn pog_log_turns_debug_lines_on() {
    let dir = tempfile::tempdir().unwrap();
    let output = pog()
        .args(["validator", "--listen", "127.0.0.1:0", "--test-plan"])
        .env("POG_DATA_DIR", dir.path())
        .env("POG_LOG", "error,pog_validator::schedule=debug")
        // Stopped after: its first round starts at once.
        .timeout(std::time::Duration::from_secs(8))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("DEBUG pog_validator::schedule"), "{stderr}");
}

#[test]
fn services_check_their_flags_and_ports_before_announcing_anything() {
    let dir = tempfile::tempdir().unwrap();
    // A busy port is the first thing reported: no key, no banner.
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    pog()
        .args(["validator", "--listen", &format!("127.0.0.1:{port}")])
        .env("POG_DATA_DIR", dir.path())
        .assert()
        .code(2)
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::contains(format!(
            "cannot listen on 127.0.0.1:{port}"
        )));
    // A fixed plan only with --test-plan; validator keys are checked at start.
    pog()
        .args(["validator", "--size", "32"])
        .env("POG_DATA_DIR", dir.path())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--test-plan"));
    let weak = format!("01{}", "00".repeat(31));
    for key in ["nothex", weak.as_str()] {
        pog()
            .args(["agent", "--validator", "http://127.0.0.1:9", "--trust", key])
            .env("POG_DATA_DIR", dir.path())
            .assert()
            .code(2)
            .stderr(predicate::str::contains("not a usable validator key"));
    }
}

#[test]
fn an_agent_says_at_once_that_the_validator_is_down_and_keeps_trying() {
    let dir = tempfile::tempdir().unwrap();
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let key = pog_signed::Identity::from_seed([7; 32]).public_key();
    let validator = format!("http://127.0.0.1:{closed}");
    let args = [
        "agent",
        "--listen",
        "localhost:0",
        "--validator",
        &validator,
        "--trust",
        &key,
    ];
    let mut agent = Service::spawn(dir.path(), &args, Some("H200 SXM"));
    std::thread::sleep(std::time::Duration::from_secs(3));
    let stderr = agent.kill();
    assert!(stderr.contains("cannot connect"), "{stderr}");
    assert!(stderr.matches("retrying in").count() >= 2, "{stderr}");
    assert!(stderr.contains("SIMULATED"), "{stderr}");
}

#[test]
fn a_validator_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let mut validator = ValidatorProcess::start(dir.path(), &["--listen", "localhost:0"]);
    let lines = validator.service.lines();
    assert!(lines[0].starts_with("validator key: "), "{lines:?}");
    assert!(lines[1].starts_with("listening on "), "{lines:?}");
    let status = validator.stop();
    assert_eq!(status.code(), Some(0), "a clean stop");
    let stderr = validator.service.stderr();
    assert!(stderr.contains("stopping"), "{stderr}");
}

#[test]
fn a_simulated_agent_serves_labelled_metrics_and_its_validator_records_its_health() {
    let dir = tempfile::tempdir().unwrap();
    let metrics = format!("127.0.0.1:{}", free_port());
    let net = Network::in_dir(dir.path())
        .flags(&["--challenge-every", "1", "--no-memory-proof"])
        .flags(TEST_ROUNDS)
        .agent(HOST0, &["--metrics-listen", &metrics])
        .start();
    let (vaddr, aaddr) = (&net.validator.addr, &net.agents[0].addr);
    let key = net.validator.key.clone();
    let uuid = HOST0_GPU;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let health = loop {
        let body = http_get(vaddr, &format!("/v1/records/{uuid}")).unwrap_or_default();
        let page: Value = serde_json::from_str(&body).unwrap_or_default();
        let found = page["records"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .find(|r| r["envelope"]["kind"] == "health-record");
        if let Some(found) = found {
            break found;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no health record within a minute"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert_eq!(health["envelope"]["signer"], Value::String(key));
    let record = &health["record"];
    assert_eq!(record["simulated"], true, "{record:#}");
    assert_eq!(record["reported"]["simulated"], true, "{record:#}");
    assert_eq!(record["reported"]["samples"], 0, "{record:#}");
    assert_eq!(record["failure"], Value::Null, "{record:#}");
    assert!(record["measured"]["ratios"].is_array(), "{record:#}");

    // The metrics on --metrics-listen, read by a Prometheus text parser: the GPU labelled
    // SIMULATED, never sampled; none on the API's port.
    let text = http_get(&metrics, "/metrics").expect("the metrics answer");
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string())))
        .expect("a valid exposition");
    let sampled = scrape
        .samples
        .iter()
        .find(|s| s.metric == "pog_gpu_sampled")
        .expect("pog_gpu_sampled");
    assert_eq!(sampled.labels.get("UUID"), Some(uuid));
    assert_eq!(sampled.labels.get("modelName"), Some("SIMULATED H200 SXM"));
    assert!(matches!(sampled.value, prometheus_parse::Value::Gauge(v) if v == 0.0));
    assert!(!scrape
        .samples
        .iter()
        .any(|s| s.metric == "DCGM_FI_DEV_GPU_TEMP"));
    let api = http_get(aaddr, "/metrics").unwrap_or_default();
    assert!(api.contains("no metrics on this port"), "{api}");
    // The same port serves the monitor's dashboard: its JSON lists the GPU, not sampled.
    let body = http_get(&metrics, "/api/dashboard").expect("the dashboard answers");
    let dashboard: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert_eq!(dashboard["gpus"][0]["uuid"], uuid, "{dashboard:#}");
    assert_eq!(dashboard["gpus"][0]["status"], "no data", "{dashboard:#}");
    assert!(http_get(&metrics, "/")
        .unwrap_or_default()
        .contains("/dashboard.js"));
}

#[test]
fn output_into_a_closed_pipe_ends_quietly_not_in_a_panic() {
    use std::os::unix::process::ExitStatusExt;
    // The reading end is gone before pog writes a byte (`pog specs | true`, deterministic).
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("pog"))
        .arg("specs")
        .env_remove("POG_SIMULATE")
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    const SIGPIPE: i32 = 13;
    assert_eq!(out.status.signal(), Some(SIGPIPE), "{:?}", out.status);
}

/// `pog prove --proof storage`: an honest small data set passes and is kept; the same file
/// made sparse (half its blocks punched out) or cut to half its size is never walked, but
/// rebuilt, and the report says why; a directory that cannot hold the claim is an error
/// (exit 2) that leaves nothing behind.
#[test]
fn the_storage_proof_keeps_its_data_set_and_never_walks_a_sparse_or_short_one() {
    use std::os::unix::io::AsRawFd;
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let data = dir.path().join("storage");
    let prove = |size: &str| {
        json_of(pog().args([
            "prove",
            "--json",
            "--simulate",
            "H200 SXM",
            "--proof",
            "storage",
            "--storage-dir",
            data.to_str().unwrap(),
            "--storage-size",
            size,
            "--storage-audit",
            "4",
            // The SSD class's bound (1 ms a step): this test is about what is kept, and an
            // honest walk beside the other CLI tests read at 145 µs median (1.5× the NVMe
            // bound in a debug build).
            "--storage-class",
            "ssd",
        ]))
    };
    let (first, code) = prove("2M");
    assert_eq!(code, 0, "{first}");
    assert_eq!(first["storage"]["built"], true);
    assert_eq!(first["storage"]["bytes"], 2 << 20);
    let (second, code) = prove("2M");
    assert_eq!(code, 0, "{second}");
    assert_eq!(second["storage"]["built"], false);
    assert_eq!(second["storage"]["root"], first["storage"]["root"]);
    // The bound a validator would hold its later rounds to: twice this walk's step, between
    // the SSD class's floor (400 µs a step) and its read (1 ms).
    let host_ms = second["storage"]["host_bound_ms"].as_f64().unwrap();
    let steps = second["storage"]["steps"].as_f64().unwrap();
    assert!(
        (0.4 * steps..=steps).contains(&host_ms),
        "{host_ms} ms for {steps} steps"
    );

    // Half the file's blocks punched out: sparse, refused, rebuilt.
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(data.join("dataset.bin"))
        .unwrap();
    // SAFETY: a valid descriptor and range.
    let punched = unsafe {
        libc::fallocate(
            file.as_raw_fd(),
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            1 << 20,
            1 << 20,
        )
    };
    if punched == 0 {
        let (third, code) = prove("2M");
        assert_eq!(code, 0, "{third}");
        assert_eq!(third["storage"]["built"], true);
        let why = third["storage"]["rebuilt_because"].as_str().unwrap();
        assert!(why.contains("sparse"), "{why}");
    }
    // Cut to half its size: refused, rebuilt.
    std::fs::OpenOptions::new()
        .write(true)
        .open(data.join("dataset.bin"))
        .unwrap()
        .set_len(1 << 20)
        .unwrap();
    let (fourth, code) = prove("2M");
    assert_eq!(code, 0, "{fourth}");
    let why = fourth["storage"]["rebuilt_because"].as_str().unwrap();
    assert!(why.contains("bytes"), "{why}");

    // More than the disk holds: exit 2, nothing created.
    let (error, code) = json_of(pog().args([
        "prove",
        "--json",
        "--simulate",
        "H200 SXM",
        "--proof",
        "storage",
        "--storage-dir",
        dir.path().join("huge").to_str().unwrap(),
        "--storage-size",
        "1000T",
    ]));
    assert_eq!(code, 2);
    assert!(error["error"].as_str().unwrap().contains("free"), "{error}");
    assert!(!dir.path().join("huge").exists());
}
