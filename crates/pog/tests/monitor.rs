//! `pog monitor replay` end to end: the real binary on the real H200 trace, a copy of it with
//! faults written in, and malformed input.

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

const HEALTHY: &str = "../monitor/tests/data/h200-healthy.csv";

fn pog() -> Command {
    let mut cmd = Command::cargo_bin("pog").unwrap();
    cmd.env_remove("POG_SIMULATE");
    cmd
}

fn healthy_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(HEALTHY)
}

/// One data row of the healthy trace being edited: its cells, set by column name.
struct Row<'a> {
    header: &'a [&'a str],
    cells: Vec<String>,
}

impl Row<'_> {
    /// Writes `value` into the cell of `column`.
    fn set(&mut self, column: &str, value: impl Into<String>) {
        let at = self.header.iter().position(|h| *h == column);
        self.cells[at.unwrap_or_else(|| panic!("no column {column}"))] = value.into();
    }
}

/// The healthy trace with `edit` applied to each data row (given its time).
fn edited(dir: &std::path::Path, edit: impl Fn(f64, &mut Row)) -> PathBuf {
    let text = std::fs::read_to_string(healthy_path()).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let mut out = vec![header.join(",")];
    for line in lines {
        let cells: Vec<String> = line.split(',').map(String::from).collect();
        let t: f64 = cells[0].parse().unwrap();
        let mut row = Row {
            header: &header,
            cells,
        };
        edit(t, &mut row);
        out.push(row.cells.join(","));
    }
    let path = dir.join("trace.csv");
    std::fs::write(&path, out.join("\n") + "\n").unwrap();
    path
}

/// `pog monitor replay --json --train HISTORY TRACE`: its exit code, JSON lines and summary.
fn replay_trained(history: &std::path::Path, trace: &std::path::Path) -> std::process::Output {
    pog()
        .args(["monitor", "replay", "--json", "--train"])
        .arg(history)
        .arg(trace)
        .output()
        .unwrap()
}

fn alerts_of(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn the_healthy_trace_replays_without_alerts() {
    let healthy = healthy_path();
    let out = replay_trained(&healthy, &healthy);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("0 alert(s)"));
    // Without --train, the rule-based detectors alone, and a human summary.
    pog()
        .args(["monitor", "replay"])
        .arg(&healthy)
        .assert()
        .code(0)
        .stdout(predicate::str::contains("rule-based detectors only"));
}

#[test]
fn a_thin_history_is_said_once_and_judges_another_card_without_alarms() {
    // The 60-s bench recording (its die held one load 20 s or more) judging the fourth H200's
    // day: said once on stderr, with what it held, and nothing raised.
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../monitor/tests/data");
    let out = replay_trained(
        &data.join("h200-bench-load-2026-12-03.csv"),
        &data.join("h200-healthy-varied-2.csv"),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(stderr.matches("is thin").count(), 1, "{stderr}");
    assert!(stderr.contains("675-700 W for 21 s"), "{stderr}");
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // A history that covers its loads is not said to be thin.
    let healthy = healthy_path();
    let out = replay_trained(&healthy, &healthy);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("thin"));
}

#[test]
fn injected_faults_print_one_json_alert_per_line_and_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let trace = edited(dir.path(), |t, row| {
        // Hardware thermal slowdown in the SGEMM phase, and an uncorrected ECC error later.
        if (95.0..100.0).contains(&t) {
            row.set("clock_reasons", "64");
            row.set("sm_clock", "1200");
        }
        if t >= 150.0 {
            row.set("ecc_uncorr", "1");
        }
    });
    let out = replay_trained(&healthy_path(), &trace);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let alerts = alerts_of(&out.stdout);
    assert_eq!(alerts.len(), 2, "{alerts:#?}");
    let throttle = &alerts[0];
    assert_eq!(throttle["kind"], "throttling");
    assert_eq!(throttle["severity"], "critical");
    assert!(throttle["t"].as_f64().unwrap() >= 95.0);
    assert_eq!(throttle["signals"]["sm_clock"]["value"], 1200.0);
    assert_eq!(throttle["signals"]["sm_clock"]["baseline"], 1980.0);
    assert!(throttle["message"]
        .as_str()
        .unwrap()
        .contains("hw_thermal_slowdown"));
    for key in ["t", "kind", "severity", "signals", "message"] {
        assert!(alerts[1].get(key).is_some(), "{key} missing: {}", alerts[1]);
    }
    assert_eq!(alerts[1]["kind"], "ecc_uncorrected");
}

#[test]
fn a_malformed_trace_is_an_error_naming_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let trace = edited(dir.path(), |t, row| {
        if t == 1.1 {
            row.set("temp_gpu", "hot");
        }
    });
    pog()
        .args(["monitor", "replay"])
        .arg(&trace)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("line 4, column `temp_gpu`"));
    let out = pog()
        .args(["monitor", "replay", "--json"])
        .arg(dir.path().join("missing.csv"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let envelope: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(envelope["schema"], "pog.monitor/1");
    assert_eq!(envelope["verdict"], "error");
}

#[test]
fn a_clock_stepped_back_is_said_once_and_the_rows_after_it_are_judged() {
    // The recording's second half written as if its clock had been set back an hour (a
    // recorder restarted on another clock, two files joined), with an uncorrected ECC error
    // after the step: the replay says the step once and still judges what follows.
    let dir = tempfile::tempdir().unwrap();
    let trace = edited(dir.path(), |t, row| {
        if t >= 120.0 {
            row.set("t", format!("{}", t - 3600.0));
        }
        if t >= 180.0 {
            row.set("ecc_uncorr", "1");
        }
    });
    let out = replay_trained(&healthy_path(), &trace);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let alerts = alerts_of(&out.stdout);
    let kinds: Vec<&str> = alerts.iter().map(|a| a["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["sample_gap", "ecc_uncorrected"], "{alerts:#?}");
    assert!(
        alerts[0]["message"]
            .as_str()
            .unwrap()
            .contains("stepped back 3599.4 s"),
        "{}",
        alerts[0]
    );
    // The span counts the time the samples cover, not the step.
    assert!(stderr.contains("(229 s)"), "{stderr}");
    // A history to learn from must be in time order: refused, naming the row.
    pog()
        .args(["monitor", "replay", "--train"])
        .arg(&trace)
        .arg(healthy_path())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("comes before the previous row's"));
    // Fed live (`pog monitor run --from-trace`, the dashboard's replay), a clock set back a
    // second in: the same one line, and the rows after it sampled.
    let dir = tempfile::tempdir().unwrap();
    let early = edited(dir.path(), |t, row| {
        if t >= 1.0 {
            row.set("t", format!("{}", t - 3600.0));
        }
    });
    let out = pog()
        .args([
            "monitor",
            "run",
            "--no-history",
            "--interval",
            "0.1",
            "--duration",
            "1",
        ])
        .arg("--from-trace")
        .arg(&early)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert_eq!(stdout.matches("sample_gap").count(), 1, "{stdout}");
    assert!(stdout.contains("stepped back 3599"), "{stdout}");
    assert!(stdout.contains("1 alert(s)"), "{stdout}");
}

/// Starts `pog monitor run` with `args`, waits for its metrics address on stderr, and returns
/// the child and the address.
fn start_run(
    args: &[&std::ffi::OsStr],
) -> (std::process::Child, String, std::thread::JoinHandle<String>) {
    use std::io::BufRead;
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("pog"))
        .args(["monitor", "run", "--no-history"])
        .args(args)
        .env_remove("POG_SIMULATE")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let address = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split("/metrics").next())
        .unwrap_or_else(|| panic!("no metrics address in {line:?}"))
        .to_string();
    let rest = std::thread::spawn(move || {
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
        rest
    });
    (child, address, rest)
}

/// `GET path` over a plain socket: the response's head and body.
fn get(address: &str, path: &str) -> (String, String) {
    get_with(address, path, "")
}

/// `GET path` with `headers` (each line ending in `\r\n`): the response's head and body.
fn get_with(address: &str, path: &str, headers: &str) -> (String, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: pog\r\n{headers}Connection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    (head.to_string(), body.to_string())
}

/// `GET /metrics`: the body.
fn scrape(address: &str) -> String {
    let (head, body) = get(address, "/metrics");
    assert!(head.contains("application/openmetrics-text"), "{head}");
    body
}

/// The number of points of every chart line of every GPU in the dashboard's JSON.
fn plotted_points(dashboard: &Value) -> usize {
    dashboard["gpus"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|gpu| gpu["charts"].as_array().unwrap())
        .flat_map(|chart| chart["series"].as_array().unwrap())
        .map(|series| series["points"].as_array().unwrap().len())
        .sum()
}

#[test]
fn the_dashboard_serves_its_page_and_json_of_every_traced_gpu_and_new_points_arrive() {
    let healthy = healthy_path();
    let second = healthy.with_file_name("h200-healthy-2.csv");
    let (child, address, stderr) = start_run(&[
        "--from-trace".as_ref(),
        healthy.as_os_str(),
        "--from-trace".as_ref(),
        second.as_os_str(),
        "--trace-power-limit".as_ref(),
        "700".as_ref(),
        "--trace-slowdown-temp".as_ref(),
        "89".as_ref(),
        "--interval".as_ref(),
        "0.1".as_ref(),
        "--duration".as_ref(),
        "4".as_ref(),
        "--metrics-listen".as_ref(),
        "127.0.0.1:0".as_ref(),
    ]);
    let (head, page) = get(&address, "/");
    assert!(head.contains("text/html"), "{head}");
    assert!(page.contains("<script src=\"/dashboard.js\">"), "{page}");
    let (head, script) = get(&address, "/dashboard.js");
    assert!(head.contains("text/javascript"), "{head}");
    assert!(script.contains("/api/dashboard"));
    std::thread::sleep(std::time::Duration::from_millis(1200));
    let json = |path: &str| -> Value {
        let (head, body) = get(&address, path);
        assert!(head.contains("application/json"), "{head}");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"))
    };
    let first = json("/api/dashboard?window=600");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let second_answer = json("/api/dashboard?window=600");
    for answer in [&first, &second_answer] {
        let gpus = answer["gpus"].as_array().unwrap();
        assert_eq!(gpus.len(), 2, "one GPU per trace");
        for (i, gpu) in gpus.iter().enumerate() {
            assert_eq!(gpu["index"], i);
            assert_eq!(gpu["limits"]["power_limit_w"], 700.0);
            assert_eq!(gpu["limits"]["slowdown_c"], 89.0);
            assert!(gpu["latest"]["temp_gpu_c"].is_number(), "{gpu}");
            let ids: Vec<&str> = gpu["charts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["id"].as_str().unwrap())
                .collect();
            assert_eq!(
                ids,
                [
                    "temperature",
                    "power",
                    "utilization",
                    "memory",
                    "clocks",
                    "pcie",
                    "processes",
                    "fan",
                    "throttle"
                ]
            );
        }
        assert!(gpus[1]["uuid"]
            .as_str()
            .unwrap()
            .ends_with("h200-healthy-2.csv"));
        assert_eq!(answer["window_s"], 600.0);
        assert_eq!(answer["minute_means"], false);
        // The charts' clock is the wall clock (Unix ms), the latest sample at their right edge.
        let now = answer["now_ms"].as_f64().unwrap();
        assert!((now / 1000.0 - 1.7e9).abs() < 1e9, "{now}");
        assert_eq!(
            gpus[0]["charts"][1]["series"][0]["points"]
                .as_array()
                .unwrap()
                .last()
                .unwrap()[0]
                .as_f64(),
            gpus[0]["latest_ms"].as_f64()
        );
    }
    let (before, after) = (plotted_points(&first), plotted_points(&second_answer));
    assert!(
        after > before + 10,
        "points {before} then {after}: no new points arrived"
    );
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr.join().unwrap());
}

#[test]
fn trace_limits_need_a_trace_and_a_sensible_number() {
    for (args, said) in [
        (vec!["--trace-power-limit", "700"], "--from-trace"),
        (
            vec!["--from-trace", HEALTHY, "--trace-slowdown-temp=-3"],
            "-3 is out of range",
        ),
        (
            vec!["--from-trace", HEALTHY, "--trace-power-limit", "x"],
            "\"x\" is not a number",
        ),
    ] {
        pog()
            .args(["monitor", "run", "--duration", "1"])
            .args(&args)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(said));
    }
}

#[test]
fn run_serves_dcgm_metrics_records_the_trace_and_stops_on_time() {
    let dir = tempfile::tempdir().unwrap();
    let healthy = healthy_path();
    let record = dir.path().join("recorded.csv");
    let (child, address, stderr) = start_run(&[
        "--from-trace".as_ref(),
        healthy.as_os_str(),
        "--train".as_ref(),
        healthy.as_os_str(),
        "--interval".as_ref(),
        "0.1".as_ref(),
        "--duration".as_ref(),
        "3".as_ref(),
        "--record".as_ref(),
        record.as_os_str(),
        "--metrics-listen".as_ref(),
        "127.0.0.1:0".as_ref(),
        "--json".as_ref(),
    ]);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let body = scrape(&address);
    // A scraper asking for the 0.0.4 text format gets it, dcgm-exporter's counters typed
    // counter under their DCGM names, every series labelled as dcgm-exporter labels it.
    let (head, text) = get_with(
        &address,
        "/metrics",
        "Accept: text/plain;version=0.0.4;q=0.9,application/openmetrics-text;q=0.5\r\n",
    );
    assert!(head.contains("text/plain; version=0.0.4"), "{head}");
    assert!(!text.contains("# EOF"), "{text}");
    assert!(
        text.contains("# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"),
        "{text}"
    );
    assert!(text.contains("# TYPE DCGM_FI_DEV_PCIE_REPLAY_COUNTER counter\n"));
    let plain = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap();
    let energy = plain
        .samples
        .iter()
        .find(|s| s.metric == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")
        .unwrap_or_else(|| panic!("{text}"));
    assert!(matches!(energy.value, prometheus_parse::Value::Counter(_)));
    assert_eq!(energy.labels.get("device"), Some("nvidia0"));
    for label in ["pci_bus_id", "DCGM_FI_DRIVER_VERSION"] {
        assert!(
            text.contains(&format!("{label}=\"")),
            "{label} missing: {text}"
        );
    }
    let parsed = prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).unwrap();
    let temp = parsed
        .samples
        .iter()
        .find(|s| s.metric == "DCGM_FI_DEV_GPU_TEMP")
        .unwrap_or_else(|| panic!("{body}"));
    assert_eq!(temp.labels.get("gpu"), Some("0"));
    assert_eq!(temp.labels.get("modelName"), Some("recorded trace"));
    assert!(temp.labels.get("Hostname").is_some());
    for metric in [
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_SM_CLOCK",
        "pog_xid_errors_total",
        "pog_anomaly_score",
        "pog_sampler_samples_total",
    ] {
        assert!(
            parsed.samples.iter().any(|s| s.metric == metric),
            "{metric} missing:\n{body}"
        );
    }
    let out = child.wait_with_output().unwrap();
    let stderr = stderr.join().unwrap();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(stderr.contains("0 alert(s)"), "{stderr}");
    // The recorded trace is the rows fed, in the format replay reads.
    let recorded = pog_monitor::parse_trace(&std::fs::read_to_string(&record).unwrap()).unwrap();
    assert!(
        (20..=40).contains(&recorded.len()),
        "{} rows in 3 s at 0.1 s",
        recorded.len()
    );
    let original = pog_monitor::parse_trace(&std::fs::read_to_string(&healthy).unwrap()).unwrap();
    assert_eq!(recorded[..], original[..recorded.len()]);
}

#[test]
fn run_prints_live_alerts_with_the_gpu_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let trace = power_brake_trace(dir.path());
    let out = pog()
        .args([
            "monitor",
            "run",
            "--no-history",
            "--json",
            "--interval",
            "0.1",
            "--duration",
            "1",
            "--from-trace",
        ])
        .arg(&trace)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let alerts = alerts_of(&out.stdout);
    assert_eq!(alerts.len(), 1, "{alerts:#?}");
    assert_eq!(alerts[0]["gpu"], 0);
    assert_eq!(alerts[0]["kind"], "throttling");
    assert!(alerts[0]["message"]
        .as_str()
        .unwrap()
        .contains("hw_power_brake"));
}

#[test]
fn run_without_nvml_or_with_a_bad_interval_is_an_error() {
    if std::path::Path::new("/proc/driver/nvidia/version").exists() {
        return; // a GPU host samples for real
    }
    pog()
        .args(["monitor", "run", "--no-history", "--duration", "1"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("NVML library not found"));
    pog()
        .args(["monitor", "run", "--no-history", "--interval", "0.01"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("outside 0.1-3600 s"));
}

#[test]
fn run_on_the_simulated_host_refuses_before_serving_anything() {
    // The simulated host has no telemetry: refused at once, naming what to do instead, and
    // without announcing a metrics server first (on any host, NVML or not).
    pog()
        .args([
            "monitor",
            "run",
            "--simulate",
            "H200 SXM",
            "--no-history",
            "--metrics-listen",
            "127.0.0.1:0",
            "--duration",
            "1",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "the simulated host has no telemetry",
        ))
        .stderr(predicate::str::contains("--from-trace"))
        .stderr(predicate::str::contains("serving metrics").not());
    // Without a GPU the missing NVML is said before any metrics server is announced.
    if !std::path::Path::new("/proc/driver/nvidia/version").exists() {
        pog()
            .args([
                "monitor",
                "run",
                "--no-history",
                "--metrics-listen",
                "127.0.0.1:0",
                "--duration",
                "1",
            ])
            .assert()
            .code(2)
            .stderr(predicate::str::contains("NVML library not found"))
            .stderr(predicate::str::contains("serving metrics").not());
    }
    // A recorded trace is watched with --simulate too: the trace is what is sampled.
    pog()
        .args(["monitor", "run", "--simulate", "H200 SXM", "--no-history"])
        .arg("--from-trace")
        .arg(healthy_path())
        .args(["--interval", "0.1", "--duration", "0.5"])
        .assert()
        .code(0);
}

/// A webhook receiver on loopback: answers each POST with the next status of `statuses`
/// (200 once they run out) and keeps every body.
fn receiver(statuses: Vec<u16>) -> (String, Arc<Mutex<Vec<String>>>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let kept = bodies.clone();
    std::thread::spawn(move || {
        let mut statuses = statuses.into_iter();
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            loop {
                let mut length = 0usize;
                let mut line = String::new();
                let mut request_line = true;
                loop {
                    line.clear();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        break;
                    }
                    if request_line {
                        assert!(line.starts_with("POST /hook"), "{line}");
                        request_line = false;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap();
                    }
                    if line == "\r\n" {
                        break;
                    }
                }
                if request_line {
                    break; // the connection closed
                }
                let mut body = vec![0; length];
                reader.read_exact(&mut body).unwrap();
                kept.lock().unwrap().push(String::from_utf8(body).unwrap());
                let status = statuses.next().unwrap_or(200);
                let answer = format!("HTTP/1.1 {status} X\r\ncontent-length: 0\r\n\r\n");
                if stream.write_all(answer.as_bytes()).is_err() {
                    break;
                }
            }
        }
    });
    (address, bodies)
}

/// The healthy trace with the power brake's clock event (bit 128) set from 2 s on.
fn power_brake_trace(dir: &std::path::Path) -> PathBuf {
    edited(dir, |t, row| {
        if t >= 2.0 {
            row.set("clock_reasons", "128");
        }
    })
}

#[test]
fn alerts_go_to_the_webhook_and_a_failed_post_is_retried() {
    let dir = tempfile::tempdir().unwrap();
    let (address, bodies) = receiver(vec![500]);
    let out = pog()
        .args([
            "monitor",
            "run",
            "--no-history",
            "--json",
            "--interval",
            "0.1",
            "--duration",
            "1.5",
        ])
        .arg("--webhook")
        .arg(format!("http://{address}/hook?token=s3cret"))
        .arg("--from-trace")
        .arg(power_brake_trace(dir.path()))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("answered 500 Internal Server Error: retrying"),
        "{stderr}"
    );
    // The log names the receiver, not the URL's secret.
    assert!(
        stderr.contains(&format!("webhook http://{address}:")) && !stderr.contains("s3cret"),
        "{stderr}"
    );
    let bodies = bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 2, "{bodies:?}");
    assert_eq!(bodies[0], bodies[1]);
    let posted: Value = serde_json::from_str(&bodies[0]).unwrap();
    let printed = alerts_of(&out.stdout);
    assert_eq!(printed, vec![posted.clone()]);
    assert_eq!(posted["kind"], "throttling");
    assert_eq!(posted["gpu"], 0);
    assert!(posted["hostname"].is_string() && posted["uuid"].is_string());
}

#[test]
fn a_webhook_that_is_down_holds_up_neither_sampling_nor_the_stop() {
    let dir = tempfile::tempdir().unwrap();
    // A port nobody listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let record = dir.path().join("recorded.csv");
    let started = std::time::Instant::now();
    let out = pog()
        .args([
            "monitor",
            "run",
            "--no-history",
            "--interval",
            "0.1",
            "--duration",
            "2",
        ])
        .arg("--webhook")
        .arg(format!("http://{closed}/hook"))
        .arg("--record")
        .arg(&record)
        .arg("--from-trace")
        .arg(power_brake_trace(dir.path()))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("retrying in"), "{stderr}");
    assert!(stderr.contains("undelivered after 5s"), "{stderr}");
    assert!(started.elapsed() < std::time::Duration::from_secs(15));
    let rows = std::fs::read_to_string(&record).unwrap().lines().count() - 1;
    assert!(rows >= 15, "only {rows} samples in 2 s at 0.1 s");
}

#[test]
fn a_bad_webhook_url_is_an_error() {
    pog()
        .args([
            "monitor",
            "run",
            "--no-history",
            "--duration",
            "1",
            "--webhook",
            "ftp://x/",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("not an http or https URL"));
}

fn stored_samples(db: &std::path::Path) -> usize {
    let db = rusqlite::Connection::open(db).unwrap();
    db.query_row("SELECT COUNT(*) FROM samples", [], |r| r.get::<_, i64>(0))
        .unwrap() as usize
}

fn recorded_rows(trace: &std::path::Path) -> usize {
    std::fs::read_to_string(trace).unwrap().lines().count() - 1
}

#[test]
fn the_history_keeps_every_sample_through_a_clean_stop() {
    let dir = tempfile::tempdir().unwrap();
    let (db, record) = (
        dir.path().join("h/monitor.sqlite"),
        dir.path().join("t.csv"),
    );
    let healthy = healthy_path();
    let (child, stderr) = start_run_with_history(&[
        "--from-trace".as_ref(),
        healthy.as_os_str(),
        "--interval".as_ref(),
        "0.1".as_ref(),
        "--history".as_ref(),
        db.as_os_str(),
        "--record".as_ref(),
        record.as_os_str(),
    ]);
    std::thread::sleep(std::time::Duration::from_millis(2500));
    // SIGINT: the clean stop writes the batch in progress.
    let sent = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let out = child.wait_with_output().unwrap();
    let stderr = stderr.join().unwrap();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let rows = recorded_rows(&record);
    assert!(rows >= 15, "{rows}");
    assert_eq!(stored_samples(&db), rows, "{stderr}");
    let db = rusqlite::Connection::open(&db).unwrap();
    let minutes: i64 = db
        .query_row(
            "SELECT COUNT(*) FROM minutes WHERE signal = 'power_w'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(minutes >= 1);
}

#[test]
fn a_killed_monitor_loses_at_most_the_batch_in_progress() {
    let dir = tempfile::tempdir().unwrap();
    let (db, record) = (dir.path().join("monitor.sqlite"), dir.path().join("t.csv"));
    let healthy = healthy_path();
    let (mut child, _) = start_run_with_history(&[
        "--from-trace".as_ref(),
        healthy.as_os_str(),
        "--interval".as_ref(),
        "0.1".as_ref(),
        "--history".as_ref(),
        db.as_os_str(),
        "--history-flush-seconds".as_ref(),
        "1".as_ref(),
        "--record".as_ref(),
        record.as_os_str(),
    ]);
    std::thread::sleep(std::time::Duration::from_millis(3500));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let (rows, stored) = (recorded_rows(&record), stored_samples(&db));
    // At 0.1 s per sample and a write every second, at most about 11 samples wait.
    assert!(
        stored <= rows && stored + 12 >= rows,
        "stored {stored} of {rows}"
    );
    assert!(stored >= 20, "stored {stored}");
}

#[test]
fn a_corrupt_history_is_left_alone_and_sampling_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("monitor.sqlite");
    std::fs::write(&db, vec![0x42u8; 8192]).unwrap();
    let out = pog()
        .args([
            "monitor",
            "run",
            "--interval",
            "0.1",
            "--duration",
            "1",
            "--history",
        ])
        .arg(&db)
        .arg("--from-trace")
        .arg(healthy_path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("not a database"), "{stderr}");
    assert!(stderr.contains("keeping no history this run"), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("round(s)"));
    assert_eq!(std::fs::read(&db).unwrap(), vec![0x42u8; 8192]);
}

/// `pog monitor run` with history (and no metrics), its stderr read on a thread.
fn start_run_with_history(
    args: &[&std::ffi::OsStr],
) -> (std::process::Child, std::thread::JoinHandle<String>) {
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("pog"))
        .args(["monitor", "run"])
        .args(args)
        .env_remove("POG_SIMULATE")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let rest = std::thread::spawn(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut text).unwrap();
        text
    });
    (child, rest)
}

#[test]
fn the_slow_field_cadence_is_checked() {
    for bad in ["0", "3601", "x"] {
        pog()
            .args([
                "monitor",
                "run",
                &format!("--slow-every={bad}"),
                "--duration",
                "1",
            ])
            .assert()
            .code(2)
            .stderr(predicate::str::contains("--slow-every"));
    }
}
