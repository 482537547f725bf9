//! Every command's JSON shape, pinned: the key skeleton of its output on the simulated host
//! (keys, and the JSON type of each leaf) must equal the snapshot in `tests/shapes/`, so a
//! change to what scripts read is always deliberate. After such a change, regenerate the
//! snapshots with `POG_UPDATE_SHAPES=1 cargo test -p pog --test shapes` and review the diff
//! (and bump `JSON_SCHEMA` in `output.rs` when a consumer could break).

use assert_cmd::Command;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::PathBuf;

/// One line per path to a leaf, `path: type`; arrays collapse to `[]` (the union of their
/// elements' shapes), so the skeleton does not depend on how many GPUs or figures there are.
fn skeleton(value: &Value, path: &str, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, v) in map {
                skeleton(v, &format!("{path}.{key}"), out);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for item in items {
                skeleton(item, &format!("{path}[]"), out);
            }
        }
        leaf => {
            let kind = match leaf {
                Value::Null => "null",
                Value::Bool(_) => "bool",
                Value::Number(_) => "number",
                Value::String(_) => "string",
                Value::Array(_) => "empty array",
                Value::Object(_) => "empty object",
            };
            out.insert(format!("{path}: {kind}"));
        }
    }
}

/// Runs pog with `args`, and compares its JSON's skeleton with `tests/shapes/{name}.txt`.
fn pin(name: &str, args: &[&str], exit_status: i32) {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::cargo_bin("pog")
        .unwrap()
        .args(args)
        .env_remove("POG_SIMULATE")
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(exit_status), "pog {args:?}");
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    // The envelope every command shares.
    assert_eq!(
        json["schema"].as_str().unwrap(),
        format!("pog.{}/1", args[0])
    );
    assert_eq!(json["exit_status"], exit_status);
    assert!(json["verdict"].is_string() && json["summary"].is_string());
    let mut lines = BTreeSet::new();
    skeleton(&json, "", &mut lines);
    let actual: String = lines.into_iter().map(|l| l + "\n").collect();
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/shapes/{name}.txt"));
    if std::env::var_os("POG_UPDATE_SHAPES").is_some() {
        std::fs::write(&file, &actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&file).unwrap_or_default();
    assert!(
        actual == expected,
        "the JSON shape of `pog {}` changed (see tests/shapes.rs to accept it):\n{}",
        args.join(" "),
        diff(&expected, &actual)
    );
}

/// Lines only in `old` (-) and only in `new` (+).
fn diff(old: &str, new: &str) -> String {
    let (a, b): (BTreeSet<&str>, BTreeSet<&str>) = (old.lines().collect(), new.lines().collect());
    let gone = a.difference(&b).map(|l| format!("- {l}\n"));
    let added = b.difference(&a).map(|l| format!("+ {l}\n"));
    gone.chain(added).collect()
}

#[test]
fn inspect() {
    pin(
        "inspect",
        &["inspect", "--json", "--simulate", "H200 SXM x2"],
        0,
    );
}

#[test]
fn inspect_without_gpus() {
    pin(
        "inspect-no-gpu",
        &["inspect", "--json", "--simulate", ""],
        1,
    );
}

#[test]
fn bench() {
    pin(
        "bench",
        &[
            "bench",
            "--json",
            "--simulate",
            "H200 SXM x2",
            "--suite",
            "quick",
            "--sizes",
            "128",
            "--copy-mib",
            "1",
            "--iterations",
            "2",
            "--sustained-seconds",
            "1",
        ],
        0,
    );
}

#[test]
fn check() {
    pin("check", &["check", "--json", "--simulate", "L4"], 0);
}

#[test]
fn prove() {
    pin(
        "prove",
        &[
            "prove",
            "--json",
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
            "--items",
            "2048",
            "--walkers",
            "512",
        ],
        0,
    );
}

#[test]
fn prove_storage() {
    // A directory on the build's disk (the system's temporary directory may be a RAM file
    // system, which the proof refuses).
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let data = dir.path().join("storage");
    pin(
        "prove-storage",
        &[
            "prove",
            "--json",
            "--simulate",
            "H200 SXM",
            "--proof",
            "storage",
            "--storage-dir",
            data.to_str().unwrap(),
            "--storage-size",
            "1M",
            "--storage-audit",
            "4",
            // The SSD class's bound (1 ms a step): an honest pass on a busy machine.
            "--storage-class",
            "ssd",
        ],
        0,
    );
}

#[test]
fn specs() {
    pin("specs", &["specs", "--json", "H200 SXM"], 0);
}

#[test]
fn an_error() {
    pin(
        "error",
        &["bench", "--json", "--simulate", "L4", "--gpus", "7"],
        2,
    );
}

#[test]
fn score() {
    pin("score", &["score", "--json", "--simulate", "H200 SXM"], 0);
}

#[test]
fn price() {
    pin("price", &["price", "--json", "--model", "H100 SXM"], 0);
}

#[test]
fn verify() {
    use std::os::unix::fs::PermissionsExt;
    // A ledger with a registration, a proof round and an agent's health record, exported.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let key = data.join("validator.key");
    std::fs::write(&key, hex::encode([7u8; 32])).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let validator = pog_signed::Identity::from_seed([7; 32]);
    let agent = pog_signed::Identity::from_seed([8; 32]);
    let gpu = "GPU-shape";
    let records = serde_json::json!([
        validator
            .seal(
                "registration",
                &serde_json::json!({"event": "new", "gpu_uuid": gpu, "agent": agent.public_key()})
            )
            .unwrap(),
        validator
            .seal(
                "record",
                &serde_json::json!({"gpu_uuid": gpu, "accepted": true})
            )
            .unwrap(),
        agent
            .seal(
                "health",
                &serde_json::json!({"gpu_uuid": gpu, "samples": 60})
            )
            .unwrap(),
    ]);
    let file = dir.path().join("records.json");
    std::fs::write(&file, records.to_string()).unwrap();
    let bundle = dir.path().join("bundle.json");
    let pog = |args: &[&str]| {
        let out = Command::cargo_bin("pog")
            .unwrap()
            .arg("--data-dir")
            .arg(&data)
            .args(args)
            .env_remove("POG_DATA_DIR")
            .output()
            .unwrap();
        assert!(out.status.success(), "pog {args:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    pog(&["ledger", "append", file.to_str().unwrap()]);
    pog(&["ledger", "checkpoint"]);
    pog(&[
        "ledger",
        "export",
        "--gpu",
        gpu,
        "-o",
        bundle.to_str().unwrap(),
    ]);
    let vkey = pog(&["ledger", "vkey"]);
    pin(
        "verify",
        &[
            "verify",
            "--json",
            bundle.to_str().unwrap(),
            "--log-key",
            vkey.trim(),
            "--accept-unwitnessed",
        ],
        0,
    );
}
