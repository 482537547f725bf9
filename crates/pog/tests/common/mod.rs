//! Helpers of the binary tests (`ledger.rs`, `anchor.rs`): running pog, signed records,
//! witnesses and validators on loopback.
#![allow(dead_code)]

use assert_cmd::Command;
use pog_signed::Identity;
use serde_json::{json, Value};
use std::path::Path;

pub const GPU: &str = "GPU-0621aea7-1111-4000-8000-000000000001";
pub const VALIDATOR_SEED: [u8; 32] = [0x42; 32];

pub fn pog(data: &Path, args: &[&str]) -> std::process::Output {
    Command::cargo_bin("pog")
        .unwrap()
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .env_remove("POG_SIMULATE")
        .env_remove("POG_DATA_DIR")
        .output()
        .unwrap()
}

/// Runs pog, expects `status`, returns its JSON.
pub fn pog_json(data: &Path, args: &[&str], status: i32) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let out = pog(data, &all);
    assert_eq!(
        out.status.code(),
        Some(status),
        "pog {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

pub fn records(validator: &Identity, agent: &Identity, first: u64, n: u64) -> Vec<Value> {
    let mut out = Vec::new();
    if first == 0 {
        let body = json!({"version": 2, "event": "new", "gpu_uuid": GPU, "agent": agent.public_key(),
            "model": "H200 SXM", "bus_id": "0000:00:06.0", "simulated": false, "reason": null,
            "recorded_at_ms": 1_796_000_000_000u64});
        out.push(serde_json::to_value(validator.seal("registration", &body).unwrap()).unwrap());
    }
    for i in first..first + n {
        let round = json!({"version": 2, "challenge_id": format!("c{i}"), "gpu_uuid": GPU,
            "accepted": true, "recorded_at_ms": 1_796_000_000_000u64 + i});
        out.push(serde_json::to_value(validator.seal("record", &round).unwrap()).unwrap());
        let health = json!({"version": 1, "gpu_uuid": GPU, "window_start_ms": i * 60_000,
            "window_end_ms": (i + 1) * 60_000, "samples": 60, "temperature_max_c": 60.5});
        out.push(serde_json::to_value(agent.seal("health", &health).unwrap()).unwrap());
        let other = json!({"version": 2, "challenge_id": format!("o{i}"), "gpu_uuid": "GPU-other",
            "accepted": false});
        out.push(serde_json::to_value(validator.seal("record", &other).unwrap()).unwrap());
    }
    out
}

pub fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

/// A validator's data dir `root/name` with its key (seed [`VALIDATOR_SEED`], mode 600).
pub fn validator_dir(root: &Path, name: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let data = root.join(name);
    std::fs::create_dir_all(&data).unwrap();
    let key = data.join("validator.key");
    write(&key, &hex::encode(VALIDATOR_SEED));
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    data
}

/// A `pog witness serve` process, stopped when dropped.
pub struct Server {
    pub child: std::process::Child,
    pub url: String,
    pub vkey: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts a witness on a free loopback port, following the log `log_vkey`.
pub fn witness_server(data: &Path, log_vkey: &str) -> Server {
    use std::io::BufRead;
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("pog"))
        .arg("--data-dir")
        .arg(data)
        .args([
            "witness",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--log-key",
            log_vkey,
        ])
        .env_remove("POG_DATA_DIR")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    // "witness <vkey> listening on <addr>"
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words[2..4], ["listening", "on"], "{line}");
    Server {
        url: format!("http://{}", words[4]),
        vkey: words[1].to_string(),
        child,
    }
}

/// A `GET` over loopback with a plain socket: the status code and the body.
pub fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    s.read_to_string(&mut response).ok()?;
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    let (_, body) = response.split_once("\r\n\r\n")?;
    Some((status, body.to_string()))
}

/// A free loopback port (bound, then let go).
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// `pog --data-dir DATA ARGS…` running, on the simulated GPU `simulate` if given; stopped
/// when dropped.
pub fn spawn_pog(data: &Path, args: &[&[&str]], simulate: Option<&str>) -> Server {
    let mut command = std::process::Command::new(assert_cmd::cargo::cargo_bin("pog"));
    command
        .arg("--data-dir")
        .arg(data)
        .env_remove("POG_DATA_DIR");
    for a in args {
        command.args(*a);
    }
    match simulate {
        Some(model) => command.env("POG_SIMULATE", model),
        None => command.env_remove("POG_SIMULATE"),
    };
    let child = command
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    Server {
        child,
        url: String::new(),
        vkey: String::new(),
    }
}
