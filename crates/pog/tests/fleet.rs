//! A validator fleet on one PostgreSQL database, as real processes (issue 22, item 5): two
//! `pog validator`s and one agent on a simulated host, rounds every second. One validator is
//! killed with SIGKILL in the middle of its rounds: the other takes its GPUs over within a few
//! slots, every slot of a GPU holds at most one proof record, and nothing recorded before is
//! lost. Then the database itself goes away and comes back: the validator answers clear errors
//! meanwhile, does not die, and records again once it is back. The two keep one log (issue 22,
//! item 4): the killed validator led it, the survivor takes its lease over and signs on, and
//! every GPU's history verifies (`pog verify`) from the survivor alone, before and after the
//! outage, and the witness cosigns and the chain anchors the survivor's checkpoints. The test runs a PostgreSQL
//! cluster of its own (`scripts/postgres.sh`), to stop and start it.

mod common;

use common::{http_get, Service, ValidatorProcess, TEST_ROUNDS};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Now, ms since the Unix epoch.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The repository's `scripts/postgres.sh`.
fn postgres_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/postgres.sh")
}

/// A PostgreSQL cluster of the test's own, stopped and removed when dropped.
struct Cluster {
    dir: tempfile::TempDir,
    url: String,
}

impl Cluster {
    /// Starts one; `None` where PostgreSQL cannot run here and it is not required.
    fn start() -> Option<Cluster> {
        Cluster::start_with(&[])
    }

    /// [`Cluster::start`] with `env` for `scripts/postgres.sh` (its file-size limit, say).
    fn start_with(env: &[(&str, &str)]) -> Option<Cluster> {
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new("bash")
            .arg(postgres_script())
            .args(["start", dir.path().to_str().unwrap()])
            .envs(env.iter().copied())
            .output()
            .unwrap();
        if !out.status.success() {
            let required = std::env::var("POG_REQUIRE_POSTGRES").is_ok_and(|v| !v.is_empty());
            let why = String::from_utf8_lossy(&out.stderr);
            assert!(!required, "PostgreSQL did not start: {why}");
            eprintln!("skipped: PostgreSQL did not start here: {why}");
            return None;
        }
        let url = String::from_utf8(out.stdout).unwrap().trim().to_string();
        Some(Cluster { dir, url })
    }

    /// Runs `scripts/postgres.sh COMMAND` on it (pause, resume).
    fn run(&self, command: &str) {
        let status = std::process::Command::new("bash")
            .arg(postgres_script())
            .args([command, self.dir.path().to_str().unwrap()])
            .status()
            .unwrap();
        assert!(status.success(), "postgres.sh {command}");
    }

    /// Runs `sql` on its `postgres` database (`scripts/postgres.sh sql`), which must succeed.
    fn sql(&self, sql: &str) {
        use std::io::Write;
        let mut psql = std::process::Command::new("bash")
            .arg(postgres_script())
            .args(["sql", self.dir.path().to_str().unwrap()])
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        psql.stdin
            .take()
            .unwrap()
            .write_all(sql.as_bytes())
            .unwrap();
        let out = psql.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{sql}\n{stderr}");
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = std::process::Command::new("bash")
            .arg(postgres_script())
            .args(["stop", self.dir.path().to_str().unwrap()])
            .status();
    }
}

/// The GEMM proof records of `uuid`, as `addr` lists them (the `record` of each entry).
fn proofs(addr: &str, uuid: &str) -> Vec<Value> {
    let body = http_get(addr, &format!("/v1/records/{uuid}?limit=1000"))
        .map(|(_, body)| body)
        .unwrap_or_default();
    let page: Value = serde_json::from_str(&body).unwrap_or_default();
    page["records"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|r| r["record"].clone())
        .filter(|r| r.get("challenge").is_some())
        .collect()
}

/// Waits (up to `within`) until `done` holds of `uuid`'s proof records at `addr`; them then.
fn wait_for(
    addr: &str,
    uuid: &str,
    within: Duration,
    what: &str,
    done: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let deadline = Instant::now() + within;
    loop {
        let records = proofs(addr, uuid);
        if done(&records) {
            return records;
        }
        assert!(Instant::now() < deadline, "{what}: {records:#?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// What the fleet's validators share besides the database: the log key, a witness of the
/// log, and a chain to anchor it on (its CheckpointRegistry and the publisher's key).
struct Shared {
    log_key: PathBuf,
    /// The log's verifier key.
    vkey: String,
    witness: common::Server,
    anvil: pog_anchor::testing::Anvil,
    registry: String,
    publisher: PathBuf,
}

/// The fleet's log key file in `root` (`fleet-log.key`, mode 0600), of the key `seed`.
fn log_key_file(root: &Path, seed: [u8; 32]) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let file = root.join("fleet-log.key");
    std::fs::write(&file, hex::encode(seed)).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    file
}

impl Shared {
    fn start(root: &Path) -> Shared {
        let seed = [0x5e; 32];
        let log_key = log_key_file(root, seed);
        let public = pog_signed::Identity::from_seed(seed).public_key();
        let name = pog_validator::ledger::log_key_origin(&public);
        let vkey = pog_ledger::note::NoteSigner::new(&name, pog_ledger::note::ALG_ED25519, seed)
            .unwrap()
            .verifier()
            .to_vkey();
        let witness = common::witness_server(&root.join("witness"), &vkey);
        let anvil = pog_anchor::testing::Anvil::start();
        let publisher = pog_anchor::testing::dev_key_file(root, "publisher.key", 0);
        let deployer = root.join("deployer");
        std::fs::create_dir_all(&deployer).unwrap();
        let registry = common::deploy_registry(&deployer, &anvil.url, &publisher);
        Shared {
            log_key,
            vkey,
            witness,
            anvil,
            registry,
            publisher,
        }
    }

    /// The log's name (the checkpoints' origin, the chain's key for its anchors).
    fn origin(&self) -> &str {
        self.vkey.split('+').next().unwrap()
    }

    /// The size of the chain's latest anchor of the log (0 before the first).
    fn anchored(&self, rt: &tokio::runtime::Runtime) -> u64 {
        let chain = pog_anchor::Registry::reader(
            &pog_anchor::RpcUrl::parse(&self.anvil.url).unwrap(),
            pog_anchor::parse_address(&self.registry).unwrap(),
        )
        .unwrap();
        rt.block_on(chain.latest(self.origin()))
            .ok()
            .flatten()
            .map_or(0, |a| a.size)
    }
}

/// A validator of the fleet on `url`, with rounds and checkpoints every second: it signs the
/// fleet's log with the shared log key, has the witness cosign it and anchors it on the chain
/// (once it holds the log lease).
fn validator(root: &Path, name: &str, url: &str, shared: &Shared) -> ValidatorProcess {
    let witness = format!("{}={}", shared.witness.url, shared.witness.vkey);
    let mut flags = vec![
        "--database",
        url,
        "--log-key-file",
        shared.log_key.to_str().unwrap(),
        "--checkpoint-every",
        "1",
        "--witness",
        &witness,
        "--anchor-rpc",
        &shared.anvil.url,
        "--anchor-contract",
        &shared.registry,
        "--anchor-key-file",
        shared.publisher.to_str().unwrap(),
        "--anchor-every",
        "1",
        "--challenge-every",
        "1",
        "--no-memory-proof",
        "--no-cpu-proof",
    ];
    flags.extend_from_slice(TEST_ROUNDS);
    ValidatorProcess::start(&root.join(name), &flags)
}

/// The log's verifier key, as a validator announces it at start ("… (log VKEY): …").
fn log_vkey(v: &ValidatorProcess) -> String {
    let line = v.service.line("(log ");
    let from = line.find("(log ").unwrap() + "(log ".len();
    line[from..].split(')').next().unwrap().to_string()
}

/// Waits (up to 30 s) until `addr` serves a checkpoint larger than `size` that `witness`
/// cosigned.
fn cosigned_beyond(addr: &str, size: u64, witness: &str) {
    let name = witness.split('+').next().unwrap();
    until(&format!("no cosigned checkpoint beyond {size}"), || {
        let text = http_get(addr, "/ledger/checkpoint").map_or_else(String::new, |(_, t)| t);
        let grown = text.lines().nth(1).and_then(|l| l.parse::<u64>().ok()) > Some(size);
        grown && text.contains(&format!("\u{2014} {name} "))
    });
}

/// Waits (up to 30 s, looking every 200 ms) until `holds`; fails the test saying `what` if
/// it never does.
fn until(what: &str, mut holds: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !holds() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Waits (up to 30 s) until `v`'s log (stderr) says `text`.
fn said(v: &ValidatorProcess, text: &str) {
    until(&format!("never said {text:?}"), || {
        v.service.stderr().contains(text)
    });
}

/// The size of the checkpoint `addr` serves (0 before its first).
fn checkpoint_size(addr: &str) -> u64 {
    http_get(addr, "/ledger/checkpoint")
        .filter(|(status, _)| *status == 200)
        .and_then(|(_, text)| text.lines().nth(1)?.parse().ok())
        .unwrap_or(0)
}

/// `pog verify` of `uuid`'s whole history as the validator at `url` serves it, trusting the
/// log key `vkey`, the fleet's `validators` and the witness `witness`: it must pass.
fn verify_history(
    root: &Path,
    url: &str,
    uuid: &str,
    vkey: &str,
    validators: &[String],
    witness: &str,
) {
    let mut args = vec![
        "verify",
        "--validator",
        url,
        "--gpu",
        uuid,
        "--log-key",
        vkey,
        "--witness",
        witness,
    ];
    for key in validators {
        args.extend(["--validator-key", key]);
    }
    let out = common::pog(&root.join("holder"), &args);
    assert!(
        out.status.success(),
        "pog verify {uuid} at {url}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_fleet_survives_a_killed_validator_and_a_database_that_goes_away() {
    let Some(cluster) = Cluster::start() else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let shared = Shared::start(root.path());
    let rt = tokio::runtime::Runtime::new().unwrap();
    // a starts first and leads the fleet's log (it renews the lease every second).
    let mut a = validator(root.path(), "a", &cluster.url, &shared);
    let vkey = log_vkey(&a);
    assert_eq!(vkey, shared.vkey);
    let b = validator(root.path(), "b", &cluster.url, &shared);
    assert_eq!(log_vkey(&b), vkey, "one log key for the fleet");
    // One agent, trusting both, registered with the first.
    let agent = Service::spawn(
        &root.path().join("agent"),
        &[
            "agent",
            "--listen",
            "127.0.0.1:0",
            "--validator",
            &a.url,
            "--trust",
            &a.key,
            "--trust",
            &b.key,
        ],
        Some("H200 SXM x4; host=0"),
    );
    let _serving = agent.line(" GPU(s) at ");
    let gpus: Vec<String> = a
        .wait_for_agents(1)
        .iter()
        .map(|g| g["uuid"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(gpus.len(), 4);
    // The slot's GPUs are split between the live validators (by rendezvous hashing of the
    // GPU and the validator keys, so one may hold all four): wait until every GPU is proven.
    let deadline = Instant::now() + Duration::from_secs(60);
    let signers = loop {
        let records: Vec<Vec<Value>> = gpus.iter().map(|u| proofs(&b.addr, u)).collect();
        if records.iter().all(|r| !r.is_empty()) {
            break records
                .iter()
                .flatten()
                .filter_map(|r| r["challenge"]["validator_key"].as_str().map(str::to_string))
                .collect::<std::collections::HashSet<String>>();
        }
        assert!(Instant::now() < deadline, "GPUs unproven for a minute");
        std::thread::sleep(Duration::from_millis(200));
    };
    let before: usize = gpus.iter().map(|u| proofs(&b.addr, u).len()).sum();

    // SIGKILL the validator that leads the fleet's log, in the middle of its rounds: the
    // other takes the log lease over, and its GPUs (rendezvous hashing gives it none of the
    // four one time in sixteen: the survivor must prove all four after the kill either way).
    said(&a, "leads the fleet's log");
    eprintln!(
        "GPUs proven by {signers:?} before the kill; the leader is {}",
        a.key
    );
    // The leader's checkpoints are cosigned, served by both, and anchored.
    cosigned_beyond(&b.addr, 0, &shared.witness.vkey);
    until("the leader anchors nothing", || shared.anchored(&rt) > 0);
    let signed_before = checkpoint_size(&b.addr);
    let anchored_before = shared.anchored(&rt);
    let fleet_keys = [a.key.clone(), b.key.clone()];
    // Every GPU's whole history, as the validator at `url` serves it.
    let verify_histories = |url: &str| {
        for uuid in &gpus {
            verify_history(
                root.path(),
                url,
                uuid,
                &vkey,
                &fleet_keys,
                &shared.witness.vkey,
            );
        }
    };
    let mut victim = a;
    let mut survivor = b;
    victim.service.kill();
    let b = &mut survivor;
    let killed_at = now_ms();
    for uuid in &gpus {
        wait_for(
            &b.addr,
            uuid,
            Duration::from_secs(30),
            "proven again after the kill",
            |records| {
                records
                    .iter()
                    .any(|r| r["recorded_at_ms"].as_u64().unwrap_or(0) > killed_at + 3_000)
            },
        );
    }
    // Nothing recorded before is lost, and no GPU has two proof records in one slot.
    let after: usize = gpus.iter().map(|u| proofs(&b.addr, u).len()).sum();
    assert!(after > before, "{after} records after, {before} before");
    for uuid in &gpus {
        let mut slots = std::collections::HashMap::new();
        for r in proofs(&b.addr, uuid) {
            let recorded = r["recorded_at_ms"].as_u64().unwrap();
            *slots.entry(recorded / 1000).or_insert(0) += 1;
        }
        let twice: Vec<_> = slots.iter().filter(|(_, n)| **n > 1).collect();
        assert!(
            twice.is_empty(),
            "{uuid}: slots with two records: {twice:?}"
        );
    }

    // The log goes on under the survivor's checkpoints, and every GPU's history — the
    // records each validator signed, in one sequence — verifies from the survivor alone.
    until("no checkpoint after the leader's kill", || {
        checkpoint_size(&b.addr) > signed_before.max(after as u64)
    });
    said(b, "leads the fleet's log");
    // The witness cosigns the survivor's checkpoints of the same log, and the anchoring
    // resumes from the survivor.
    cosigned_beyond(&b.addr, signed_before, &shared.witness.vkey);
    until("no anchor after the leader's kill", || {
        shared.anchored(&rt) > signed_before.max(anchored_before)
    });
    verify_histories(&b.url);

    // The database goes away: the API says so, the validator keeps running.
    cluster.run("pause");
    std::thread::sleep(Duration::from_secs(3));
    let (status, body) = http_get(&b.addr, "/v1/gpus").expect("the API answers");
    assert!(status >= 500, "{status} {body}");
    b.service.assert_running();
    // It comes back: rounds are recorded again.
    cluster.run("resume");
    let back_at = now_ms();
    for uuid in &gpus {
        wait_for(
            &b.addr,
            uuid,
            Duration::from_secs(60),
            "proven again once the database is back",
            |records| {
                records
                    .iter()
                    .any(|r| r["recorded_at_ms"].as_u64().unwrap_or(0) > back_at)
            },
        );
    }
    b.service.assert_running();
    // Nothing accepted was lost or logged twice: the histories still verify, past the outage.
    let before_end = checkpoint_size(&b.addr);
    until("no checkpoint once the database is back", || {
        checkpoint_size(&b.addr) > before_end
    });
    verify_histories(&b.url);
    drop(agent);
    b.stop();
}

/// The strings of `v`, borrowed.
fn as_strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[test]
fn a_validator_with_another_round_length_or_log_key_does_not_join_the_fleet() {
    let Some(cluster) = Cluster::start() else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let key = |name: &str| {
        let path = root.path().join(name);
        path.to_str().unwrap().to_string()
    };
    let (fleet_key, other_key) = (key("fleet.key"), key("other.key"));
    let flags = |every: &str, log_key: &str| -> Vec<String> {
        let mut flags: Vec<String> = [
            "--database",
            &cluster.url,
            "--challenge-every",
            every,
            "--log-key-file",
            log_key,
        ]
        .map(str::to_string)
        .to_vec();
        flags.extend(TEST_ROUNDS.iter().map(|f| f.to_string()));
        flags
    };
    // The first validator makes the fleet: its round length and its log key.
    let mut first =
        ValidatorProcess::start(&root.path().join("a"), &as_strs(&flags("2", &fleet_key)));
    first.stop();
    // Refused, each with what to do: another round length, another log key, no log key.
    let refused = |data: &str, args: Vec<String>, says: &str| {
        let mut all = vec![
            "validator".to_string(),
            "--listen".into(),
            "127.0.0.1:0".into(),
        ];
        all.extend(args);
        let out = common::pog(&root.path().join(data), &as_strs(&all));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{data} started: {stderr}");
        assert!(stderr.contains(says), "{data}: {stderr}");
    };
    refused("b", flags("1", &fleet_key), "--adopt-fleet-schedule");
    refused("c", flags("2", &other_key), "--rotate-log-key");
    let mut keyless = flags("2", &fleet_key);
    keyless.truncate(4);
    refused("d", keyless, "POG_LOG_KEY");
    // With the fleet's settings it joins.
    let mut joined =
        ValidatorProcess::start(&root.path().join("e"), &as_strs(&flags("2", &fleet_key)));
    joined.stop();
}

/// A validator of a market fleet on `url` signing the fleet's log with `log_key`, its data in
/// `root/name`, started once its first round is done: rounds an hour apart (its first one at
/// its start: a round's GPUs are registered after it, since those at no endpoint would fail
/// and withdraw their asks), checkpoints every second, settlement passes an hour apart, so
/// that the leases a killed validator left unlogged reach the log only by the log's leader
/// looking for them every 2 s between passes (`settlement::PENDING_LEASES_EVERY`).
fn market_validator(root: &Path, name: &str, url: &str, log_key: &Path) -> ValidatorProcess {
    let flags = [
        "--database",
        url,
        "--log-key-file",
        log_key.to_str().unwrap(),
        "--challenge-every",
        "3600",
        "--checkpoint-every",
        "1",
        "--settle-every",
        "3600",
    ];
    let v = ValidatorProcess::start(&root.join(name), &flags);
    v.wait_for_first_round();
    v
}

/// `pog market --json --validator URL ARGS` from the data dir `dir`: its exit status and JSON.
fn market(url: &str, dir: &Path, args: &[&str]) -> (i32, Value) {
    let mut all = vec!["market", "--json", "--validator", url];
    all.extend_from_slice(args);
    let out = common::pog(dir, &all);
    let json: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap(), json)
}

/// The lease ids of the fleet's clearings, as the validator at `addr` lists them, sorted.
fn leased(addr: &str) -> Vec<String> {
    let mut ids: Vec<String> = common::history(addr)
        .iter()
        .flat_map(|c| c["leases"].as_array().unwrap().clone())
        .map(|l| l["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

/// The open orders of the book `addr` serves, with their quantities.
fn open(addr: &str) -> std::collections::BTreeMap<String, u64> {
    let (status, body) = http_get(addr, "/v1/market/book").unwrap();
    assert_eq!(status, 200, "{body}");
    let book: Value = serde_json::from_str(&body).unwrap();
    ["bids", "asks"]
        .iter()
        .flat_map(|side| book[side].as_array().unwrap().clone())
        .map(|o| {
            let id = o["id"].as_str().unwrap().to_string();
            (id, o["quantity"].as_u64().unwrap())
        })
        .collect()
}

/// A market round `tag` at the validator at `url`: `count` proven H200s registered (in
/// `registry`, by the fleet's `operator`) to a provider of its own (`root/provider-TAG`: a key
/// holds at most 64 GPUs), which asks them all at 3.00; the renter of the data dir `renter`
/// bids 4.00 for as many. The ask's and bid's ids, the GPUs and the provider's data dir.
fn offer_and_bid(
    (registry, operator): (
        &mut pog_validator::registry::Registry,
        &pog_signed::Identity,
    ),
    url: &str,
    (root, renter): (&Path, &Path),
    tag: &str,
    count: usize,
) -> (String, String, Vec<String>, PathBuf) {
    let provider = root.join(format!("provider-{tag}"));
    let provider_key = pog_net::keys::load_or_create(&provider.join("agent.key")).unwrap();
    let gpus: Vec<String> = (0..count)
        .map(|i| format!("GPU-fleet-crash-{tag}-{i}"))
        .collect();
    for gpu in &gpus {
        common::register_proven_h200_in(registry, operator, &provider_key.public_key(), gpu);
    }
    let (ask, bid) = (format!("a{tag}"), format!("b{tag}"));
    let quantity = count.to_string();
    let mut args = vec!["submit", "--id", &ask, "--side", "ask"];
    args.extend(["--class", "H200 SXM", "--quantity", &quantity]);
    args.extend(["--price", "3.00"]);
    for gpu in &gpus {
        args.extend(["--gpu", gpu]);
    }
    let (status, json) = market(url, &provider, &args);
    assert_eq!(status, 0, "the ask: {json}");
    let args = [
        "submit", "--id", &bid, "--side", "bid", "--class", "H200 SXM",
    ];
    let args = [&args[..], &["--quantity", &quantity, "--price", "4.00"]].concat();
    let (status, json) = market(url, renter, &args);
    assert_eq!(status, 0, "the bid: {json}");
    (ask, bid, gpus, provider)
}

/// Who signed the lease entries of `gpus` in the ledger of the validator whose data dir is
/// `data`: "the killed validator" (the key `killed`) or "the survivor", with how many each.
fn lease_signers(
    data: &Path,
    gpus: &[String],
    killed: &str,
) -> std::collections::BTreeMap<String, usize> {
    let ledger = pog_ledger::store::Ledger::open_reader(&data.join("ledger")).unwrap();
    let mut signers = std::collections::BTreeMap::<String, usize>::new();
    for gpu in gpus {
        for (_, entry) in ledger.gpu_entries(gpu).unwrap() {
            if entry.kind == pog_signed::RecordKind::Lease {
                let name = match hex::encode(entry.signer) {
                    k if k == killed => "the killed validator",
                    _ => "the survivor",
                };
                *signers.entry(name.to_string()).or_default() += 1;
            }
        }
    }
    signers
}

/// `pog verify` of `uuid`'s history as the validator at `url` serves it, checked against the
/// log's tiles after its last record (`--validator` reads the tail from the validator's
/// `/ledger/`, as `--log` does), trusting the log key `vkey` and the fleet's `validators` (no
/// witness: `--accept-unwitnessed`): it must pass.
fn verify_leased(root: &Path, url: &str, uuid: &str, vkey: &str, validators: &[String]) {
    let mut args = vec!["verify", "--validator", url, "--gpu", uuid];
    args.extend(["--log-key", vkey, "--accept-unwitnessed"]);
    for key in validators {
        args.extend(["--validator-key", key]);
    }
    let out = common::pog(&root.join("holder"), &args);
    assert!(
        out.status.success(),
        "pog verify {uuid}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// kill -9 of a fleet validator in the middle of a clearing (issue 22, item 5; the fleet's
/// version of `market.rs`'s `a_validator_killed_while_it_clears_loses_no_lease_and_logs_none_twice`):
/// two `pog validator`s on one PostgreSQL database, one book and one log. Each round a
/// provider asks 40 proven H200s and a renter bids for them at `a`, `a` is asked to clear and
/// is killed partway through its answer (before the clearing is stored, while its 40 leases go
/// to the log, after); round 0 only measures how long that answer takes. The first kill hits
/// the log's leader, the later ones a validator that does not lead. Then, before `a` comes
/// back, the survivor `b` carries on: every clearing of the fleet's book has each of its
/// leases in the log exactly once (the one that leads logs what the killed one left), and
/// the book holds the round's orders whole or not at all; once `a` is back, its book and its
/// tree say the same, and the leased GPUs' histories verify against the log's tiles
/// (`pog verify --validator`, which reads the log's tail as `--log` does).
#[test]
fn a_fleet_validator_killed_while_it_clears_loses_no_lease_and_logs_none_twice() {
    use std::collections::BTreeMap;
    const GPUS: usize = 40;
    let Some(cluster) = Cluster::start() else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    let log_key = log_key_file(root, [0x5f; 32]);
    common::wait_clear_of_slot_boundary(Duration::from_secs(3600), Duration::from_secs(240));
    let start = |name: &str| market_validator(root, name, &cluster.url, &log_key);
    let mut a = start("a");
    said(&a, "leads the fleet's log");
    let b = start("b");
    let vkey = log_vkey(&a);
    let fleet_keys = [a.key.clone(), b.key.clone()];
    let operator = pog_net::keys::load_or_create(&root.join("a/validator.key")).unwrap();
    let mut registry = pog_validator::registry::Registry::connect(&cluster.url).unwrap();
    let renter = root.join("renter");
    let mut all_gpus = Vec::new();
    let mut took = Duration::ZERO;
    let mut verified = Vec::new();
    let fractions = [
        None,
        Some(0.05),
        Some(0.3),
        Some(0.6),
        Some(0.75),
        Some(0.9),
        Some(0.97),
    ];
    for (round, fraction) in fractions.into_iter().enumerate() {
        let (ask, bid, gpus, provider) = offer_and_bid(
            (&mut registry, &operator),
            &a.url,
            (root, &renter),
            &format!("{round}"),
            GPUS,
        );
        all_gpus.extend(gpus.iter().cloned());
        let before = common::history(&b.addr).len();
        let request = common::clear_request(&operator);
        let sent = Instant::now();
        let mut socket = common::post(&a.addr, "/v1/market/clear", &request);
        let Some(fraction) = fraction else {
            let mut answer = String::new();
            std::io::Read::read_to_string(&mut socket, &mut answer).unwrap();
            assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
            took = sent.elapsed();
            verified.push(gpus[0].clone());
            continue;
        };
        std::thread::sleep(took.mul_f64(fraction));
        a.service.kill();
        let killed_after = sent.elapsed();

        // Without `a`: the survivor lists the clearing or not, and every lease of the fleet's
        // clearings reaches the log once, within seconds of the kill (the leader logs what `a`
        // left; the survivor leads once the killed leader's 3-s lease has run out).
        let stored = common::history(&b.addr).len() > before;
        let in_history = leased(&b.addr);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let logged = common::ledger_leases(&b.service.data, &all_gpus);
            if logged.as_ref() == Ok(&in_history) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "round {round}: the survivor's log holds {logged:?}, the clearings {in_history:?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        let logged_after = sent.elapsed() - killed_after;
        // Who logged the round's leases: the killed validator before it died, the survivor
        // after.
        let signers = lease_signers(&b.service.data, &gpus, &fleet_keys[0]);
        eprintln!(
            "round {round}: killed {killed_after:?} after the request (a clearing took \
             {took:?}): clearing stored: {stored}; its leases logged by {signers:?}, all in \
             the survivor's log {logged_after:?} after the kill"
        );
        let whole = BTreeMap::from([(ask.clone(), GPUS as u64), (bid.clone(), GPUS as u64)]);
        let expected = if stored {
            let clearing = common::history(&b.addr).last().cloned().unwrap();
            assert_eq!(
                clearing["leases"].as_array().unwrap().len(),
                GPUS,
                "{clearing}"
            );
            verified.push(gpus[0].clone());
            BTreeMap::new()
        } else {
            whole
        };
        assert_eq!(
            open(&b.addr),
            expected,
            "round {round}: the survivor's book"
        );

        // `a` comes back: the same book, its tree the same leases, each once.
        a = start("a");
        assert_eq!(open(&a.addr), expected, "round {round}: the restarted book");
        assert_eq!(leased(&a.addr), in_history, "round {round}");
        until(
            &format!("round {round}: the restarted validator's log"),
            || common::ledger_leases(&a.service.data, &all_gpus).as_ref() == Ok(&in_history),
        );
        if !stored {
            assert_eq!(market(&b.url, &provider, &["cancel", "--id", &ask]).0, 0);
            assert_eq!(market(&b.url, &renter, &["cancel", "--id", &bid]).0, 0);
        }
    }
    // The leased GPUs' histories (one GPU of each stored clearing), their leases with them,
    // verify, each against the log's tiles after its last record (`pog verify --validator`
    // reads the tail from the validator's `/ledger/`, as `--log` does).
    for uuid in &verified {
        verify_leased(root, &b.url, uuid, &vkey, &fleet_keys);
    }
}

/// kill -9 of the validator that leads the fleet's log while a clearing it stored waits to
/// have its leases logged (issue 22): the path where the validator that would log what a dead
/// one left is itself the dead one, so that the leases wait for another to take the log's
/// lease over. Two `pog validator`s on one database, `a` leading the log; the test holds the
/// row lock of the fleet's `leases_logged_through` mark in a transaction of its own, so that
/// `a` stores the clearing it is asked for and then waits to hand its leases to the log (as a
/// slow database would hold it); `a` is SIGKILLed there, and the lock let go. The survivor
/// `b` must take the log's lease over (`a`'s runs out after three checkpoint ticks), find the
/// clearing unlogged and log its leases, within 10 s, saying so ("logged the leases of 1
/// clearing(s) left unlogged": the takeover path, not `a`'s restart or a clearing of `b`'s);
/// every lease once, all signed by `b`; the book's orders taken by the clearing; once `a` is
/// back its tree the same; and a leased GPU's history verifies (`pog verify`).
#[test]
fn the_log_leader_killed_with_leases_waiting_leaves_them_to_the_next_leader_once() {
    const GPUS: usize = 8;
    let Some(cluster) = Cluster::start() else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    let log_key = log_key_file(root, [0x5c; 32]);
    common::wait_clear_of_slot_boundary(Duration::from_secs(3600), Duration::from_secs(240));
    let start = |name: &str| market_validator(root, name, &cluster.url, &log_key);
    let mut a = start("a");
    said(&a, "leads the fleet's log");
    let b = start("b");
    let vkey = log_vkey(&a);
    let fleet_keys = [a.key.clone(), b.key.clone()];
    let operator = pog_net::keys::load_or_create(&root.join("a/validator.key")).unwrap();
    let mut registry = pog_validator::registry::Registry::connect(&cluster.url).unwrap();
    let renter = root.join("renter");
    let (ask, bid, gpus, _provider) = offer_and_bid(
        (&mut registry, &operator),
        &a.url,
        (root, &renter),
        "leader",
        GPUS,
    );
    // The mark's row exists from the validators' starts (each hands what is pending then).
    let mark = pog_validator::postgres::testing::OpenTransaction::begin(
        &cluster.url,
        "SELECT value FROM market_meta WHERE key = 'leases_logged_through' FOR UPDATE",
    );
    let _answer = common::post(
        &a.addr,
        "/v1/market/clear",
        &common::clear_request(&operator),
    );
    until("the leader stores no clearing", || {
        common::history(&b.addr).len() == 1
    });
    let in_history = leased(&b.addr);
    assert_eq!(in_history.len(), GPUS);
    // Stored, its leases waiting for the mark: none is in the log yet.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        common::ledger_leases(&b.service.data, &gpus),
        Ok(vec![]),
        "the leases were logged while the mark was held"
    );
    assert!(
        !b.service.stderr().contains("leads the fleet's log"),
        "b led before the kill"
    );
    a.service.kill();
    drop(mark);
    let killed = Instant::now();
    let deadline = killed + Duration::from_secs(10);
    loop {
        let logged = common::ledger_leases(&b.service.data, &gpus);
        if logged.as_ref() == Ok(&in_history) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "10 s after the leader's kill the survivor's log holds {logged:?}, the clearing \
             {in_history:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let logged_after = killed.elapsed();
    said(&b, "leads the fleet's log");
    said(&b, "logged the leases of 1 clearing(s) left unlogged");
    let signers = lease_signers(&b.service.data, &gpus, &fleet_keys[0]);
    eprintln!(
        "the leader killed with {GPUS} leases waiting: logged by {signers:?}, all in the \
         survivor's log {logged_after:?} after the kill"
    );
    assert_eq!(
        signers,
        std::collections::BTreeMap::from([("the survivor".to_string(), GPUS)])
    );
    // The clearing took both orders whole.
    assert_eq!(
        open(&b.addr),
        std::collections::BTreeMap::new(),
        "{ask} {bid}"
    );

    // `a` comes back: the same leases in its tree, each once, and none logged again.
    a = start("a");
    assert_eq!(leased(&a.addr), in_history);
    until("the restarted validator's log", || {
        common::ledger_leases(&a.service.data, &gpus).as_ref() == Ok(&in_history)
    });
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        common::ledger_leases(&b.service.data, &gpus),
        Ok(in_history.clone())
    );
    verify_leased(root, &b.url, &gpus[0], &vkey, &fleet_keys);
    verify_leased(root, &a.url, &gpus[GPUS - 1], &vkey, &fleet_keys);
}

/// Pads the fleet's `records` table with the smallest rows until its file can grow no more,
/// in one transaction (what a database whose disk fills up leaves: the next record needs a
/// page the file cannot get); fails unless the padding stopped at "File too large".
const FILL_RECORDS: &str = r#"
DO $$
DECLARE
    base BIGINT;
    n BIGINT := 0;
    why TEXT;
BEGIN
    SELECT next_id INTO base FROM record_sequence FOR UPDATE;
    LOOP
        BEGIN
            INSERT INTO records (id, challenge_id, gpu_uuid, accepted, version, kind, envelope)
                VALUES (base + n, 'padding-' || n, 'GPU-padding', FALSE, 2, NULL, '{}');
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS why = MESSAGE_TEXT;
            EXIT;
        END;
        n := n + 1;
    END LOOP;
    IF why NOT LIKE '%File too large%' THEN
        RAISE EXCEPTION 'the padding stopped after % rows: %', n, why;
    END IF;
    UPDATE record_sequence SET next_id = base + n;
END $$;
"#;

/// The database's disk fills up in the middle of the rounds (issue 22, "Bad input and faults"):
/// the test's PostgreSQL runs under a file-size limit of 1 MiB (`POG_POSTGRES_FILE_LIMIT_KB`;
/// the write-ahead log in 1-MiB segments), and the `records` table is padded until its file
/// reaches it, so that every record after fails as on a full disk ("could not extend file …:
/// File too large", the server's hint "Check free disk space."). The validator keeps running
/// and serving what it holds, says why its rounds are not stored (the server's hint named),
/// loses none of the records it had stored, and stores its rounds again once the limit is
/// lifted (`scripts/postgres.sh unlimit`, as freeing space would), without a restart.
#[test]
fn a_database_whose_disk_fills_up_loses_nothing_and_the_validator_carries_on() {
    let Some(cluster) = Cluster::start_with(&[
        ("POG_POSTGRES_FILE_LIMIT_KB", "1024"),
        ("POG_POSTGRES_WAL_SEGSIZE_MB", "1"),
    ]) else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    let log_key = log_key_file(root, [0x5d; 32]);
    let mut flags = vec![
        "--database",
        &cluster.url,
        "--log-key-file",
        log_key.to_str().unwrap(),
        "--challenge-every",
        "1",
        "--checkpoint-every",
        "1",
        "--no-memory-proof",
        "--no-cpu-proof",
    ];
    flags.extend_from_slice(TEST_ROUNDS);
    let mut v = ValidatorProcess::start(&root.join("validator"), &flags);
    let agent = v.agent(&root.join("agent"), "H200 SXM x2; host=0", &[]);
    let gpus: Vec<String> = v
        .wait_for_agents(1)
        .iter()
        .map(|g| g["uuid"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(gpus.len(), 2);
    for uuid in &gpus {
        wait_for(&v.addr, uuid, Duration::from_secs(60), "proven", |r| {
            r.len() >= 2
        });
    }

    // The disk fills up.
    cluster.sql(FILL_RECORDS);
    let full_at = now_ms();
    let ids = |uuid: &str| -> Vec<String> {
        proofs(&v.addr, uuid)
            .iter()
            .map(|r| r["challenge_id"].to_string())
            .collect()
    };
    let before: Vec<Vec<String>> = gpus.iter().map(|u| ids(u)).collect();
    // The rounds go on and are not stored: the validator says why, and keeps serving.
    until("no round refused for the full disk", || {
        v.service.stderr().contains("Check free disk space")
    });
    // What it said, the server's two lines: the server's words, not a reachability check.
    let stderr = v.service.stderr();
    let lines: Vec<&str> = stderr.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains("Check free disk space"))
        .unwrap();
    let said = lines[at.saturating_sub(1)..=at].join("\n");
    eprintln!("the validator said: {said}");
    assert!(said.contains("File too large"), "{said}");
    assert!(!said.contains("check that the server is up"), "{said}");
    let (status, body) = http_get(&v.addr, &format!("/v1/records/{}", gpus[0])).unwrap();
    assert_eq!(status, 200, "{body}");
    let (status, body) = http_get(&v.addr, "/v1/gpus").unwrap();
    assert_eq!(status, 200, "{body}");
    v.service.assert_running();
    // Nothing stored before is lost.
    for (uuid, before) in gpus.iter().zip(&before) {
        let now = ids(uuid);
        assert!(
            before.iter().all(|id| now.contains(id)),
            "{uuid}: {before:?} then {now:?}"
        );
    }

    // Space again: the rounds are stored again, no restart needed, and nothing was lost.
    cluster.run("unlimit");
    let back_at = now_ms();
    for (uuid, before) in gpus.iter().zip(&before) {
        let records = wait_for(
            &v.addr,
            uuid,
            Duration::from_secs(60),
            "proven again once the disk has room",
            |records| {
                records
                    .iter()
                    .any(|r| r["recorded_at_ms"].as_u64().unwrap_or(0) > back_at)
            },
        );
        let now: Vec<String> = records
            .iter()
            .map(|r| r["challenge_id"].to_string())
            .collect();
        assert!(
            before.iter().all(|id| now.contains(id)),
            "{uuid}: {before:?} then {now:?}"
        );
    }
    eprintln!("disk full for {} ms", back_at.saturating_sub(full_at));
    v.service.assert_running();
    assert!(
        !v.service.stderr().contains("panicked"),
        "{}",
        v.service.stderr()
    );
    drop(agent);
    v.stop();
}
