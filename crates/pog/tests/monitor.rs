//! `pog monitor replay` end to end: the real binary on the real H200 trace, a copy of it with
//! faults written in, and malformed input.

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;
use std::path::PathBuf;

const HEALTHY: &str = "../monitor/tests/data/h200-healthy.csv";

fn pog() -> Command {
    let mut cmd = Command::cargo_bin("pog").unwrap();
    cmd.env_remove("POG_SIMULATE");
    cmd
}

fn healthy_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(HEALTHY)
}

/// The healthy trace with `edit` applied to each data row's cells (by column name).
fn edited(dir: &std::path::Path, edit: impl Fn(f64, &mut Vec<String>, &[&str])) -> PathBuf {
    let text = std::fs::read_to_string(healthy_path()).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let mut out = vec![header.join(",")];
    for line in lines {
        let mut cells: Vec<String> = line.split(',').map(String::from).collect();
        let t: f64 = cells[0].parse().unwrap();
        edit(t, &mut cells, &header);
        out.push(cells.join(","));
    }
    let path = dir.join("trace.csv");
    std::fs::write(&path, out.join("\n") + "\n").unwrap();
    path
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
    let out = pog()
        .args(["monitor", "replay", "--json", "--train"])
        .arg(&healthy)
        .arg(&healthy)
        .output()
        .unwrap();
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
fn injected_faults_print_one_json_alert_per_line_and_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let trace = edited(dir.path(), |t, cells, header| {
        let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
        // Hardware thermal slowdown in the SGEMM phase, and an uncorrected ECC error later.
        if (95.0..100.0).contains(&t) {
            cells[col("clock_reasons")] = "64".into();
            cells[col("sm_clock")] = "1200".into();
        }
        if t >= 150.0 {
            cells[col("ecc_uncorr")] = "1".into();
        }
    });
    let out = pog()
        .args(["monitor", "replay", "--json", "--train"])
        .arg(healthy_path())
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
    let trace = edited(dir.path(), |t, cells, _| {
        if t == 1.1 {
            cells[2] = "hot".into();
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
