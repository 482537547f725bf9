//! Helpers of the binary tests: running pog, signed records, witnesses, and one harness of
//! `pog validator` and `pog agent` processes on loopback ([`Network`]).
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

/// Deploys a CheckpointRegistry through the binary (`pog ledger deploy-registry`, the bytecode
/// `scripts/evm-tools.sh` compiled); its address.
pub fn deploy_registry(data: &Path, rpc: &str, key: &Path) -> String {
    let bin = pog_anchor::testing::evm_tools().bin.to_str().unwrap();
    let deployed = pog_json(
        data,
        &[
            "ledger",
            "deploy-registry",
            "--rpc",
            rpc,
            "--key-file",
            key.to_str().unwrap(),
            "--bytecode",
            bin,
        ],
        0,
    );
    assert!(deployed["sent"]["gas_used"].as_u64().unwrap() > 100_000);
    deployed["address"].as_str().unwrap().to_string()
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

/// The flags of a validator whose rounds a simulated agent on loopback passes quickly: the
/// test plan's small challenge, simulated GPUs and private endpoints allowed.
pub const TEST_ROUNDS: &[&str] = &[
    "--test-plan",
    "--size",
    "32",
    "--samples",
    "128",
    "--accept-simulated",
    "--allow-private-endpoints",
];

/// The simulated H200 of host 0, whose GPU UUID ([`HOST0_GPU`]) tests pin (an agent otherwise
/// derives its host from its key).
pub const HOST0: &str = "H200 SXM; host=0";

/// The GPU UUID of [`HOST0`].
pub const HOST0_GPU: &str = "GPU-00000051-0000-0000-0000-000000000000";

/// How long a service has to say what a test waits for.
const SERVICE_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// What a service has printed so far, and whether its stdout has ended.
#[derive(Default)]
struct Printed {
    lines: Vec<String>,
    ended: bool,
}

/// A running `pog` service (`pog validator`, `pog agent`): its stdout lines kept as they come,
/// its stderr kept; killed when dropped, so a failing test leaves no process behind.
pub struct Service {
    pub child: std::process::Child,
    /// Its data dir.
    pub data: std::path::PathBuf,
    stdout: std::sync::Arc<(std::sync::Mutex<Printed>, std::sync::Condvar)>,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
    readers: Vec<std::thread::JoinHandle<()>>,
}

impl Service {
    /// `pog --data-dir DATA [--simulate PROFILE] ARGS…`, with neither `POG_DATA_DIR` nor
    /// `POG_SIMULATE` from the environment.
    pub fn spawn(data: &Path, args: &[&str], simulate: Option<&str>) -> Service {
        use std::io::{BufRead, Read};
        let mut command = std::process::Command::new(assert_cmd::cargo::cargo_bin("pog"));
        command
            .arg("--data-dir")
            .arg(data)
            .env_remove("POG_DATA_DIR")
            .env_remove("POG_SIMULATE");
        if let Some(profile) = simulate {
            command.args(["--simulate", profile]);
        }
        let mut child = command
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = std::sync::Arc::new((
            std::sync::Mutex::new(Printed::default()),
            std::sync::Condvar::new(),
        ));
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let out = child.stdout.take().unwrap();
        let printed = stdout.clone();
        let mut err = child.stderr.take().unwrap();
        let said = stderr.clone();
        let readers = vec![
            std::thread::spawn(move || {
                for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                    printed.0.lock().unwrap().lines.push(line);
                    printed.1.notify_all();
                }
                printed.0.lock().unwrap().ended = true;
                printed.1.notify_all();
            }),
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = err.read(&mut buf) {
                    said.lock()
                        .unwrap()
                        .push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            }),
        ];
        Service {
            child,
            data: data.to_path_buf(),
            stdout,
            stderr,
            readers,
        }
    }

    /// Every line it has printed so far.
    pub fn lines(&self) -> Vec<String> {
        self.stdout.0.lock().unwrap().lines.clone()
    }

    /// What it has written to stderr so far (all of it once it has ended: see
    /// [`Service::stop`], [`Service::kill`]).
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// The first line it prints that contains `text`; panics (with its stderr) when it ends or
    /// a minute passes first.
    pub fn line(&self, text: &str) -> String {
        let deadline = std::time::Instant::now() + SERVICE_WAIT;
        let (printed, more) = &*self.stdout;
        let mut printed = printed.lock().unwrap();
        loop {
            if let Some(line) = printed.lines.iter().find(|l| l.contains(text)) {
                return line.clone();
            }
            let now = std::time::Instant::now();
            if printed.ended || now > deadline {
                let ended = printed.ended;
                drop(printed);
                panic!(
                    "no line with {text:?} ({}): {:?}\n{}",
                    if ended { "it ended" } else { "a minute passed" },
                    self.lines(),
                    self.stderr()
                );
            }
            printed = more.wait_timeout(printed, deadline - now).unwrap().0;
        }
    }

    /// Panics (with its stderr) when it has ended.
    pub fn assert_running(&mut self) {
        if let Some(status) = self.child.try_wait().unwrap() {
            let stderr = self.finished();
            panic!("{} ended: {status}\n{stderr}", self.data.display());
        }
    }

    /// Stops it with SIGTERM; its exit status, once it has ended (within 20 s).
    pub fn stop(&mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        assert!(std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "still running 20 s after SIGTERM"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        };
        self.finished();
        status
    }

    /// Kills it; what it wrote to stderr.
    pub fn kill(&mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.finished()
    }

    /// Its stderr, whole, once it has ended.
    fn finished(&mut self) -> String {
        for reader in self.readers.drain(..) {
            let _ = reader.join();
        }
        self.stderr()
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A running `pog validator`.
pub struct ValidatorProcess {
    pub service: Service,
    /// Its URL (`http://ADDR`).
    pub url: String,
    /// The address it listens on.
    pub addr: String,
    /// Its public key, as it prints it.
    pub key: String,
}

impl ValidatorProcess {
    /// `pog validator FLAGS` with its data in `data`, on a free loopback port unless `flags`
    /// name one, once it listens.
    pub fn start(data: &Path, flags: &[&str]) -> ValidatorProcess {
        let mut args = vec!["validator"];
        if !flags.contains(&"--listen") {
            args.extend(["--listen", "127.0.0.1:0"]);
        }
        args.extend_from_slice(flags);
        let service = Service::spawn(data, &args, None);
        let key = service.line("validator key: ")["validator key: ".len()..].to_string();
        // "listening on ADDR, registry …"
        let listening = service.line("listening on ");
        let addr = listening["listening on ".len()..]
            .split(',')
            .next()
            .unwrap()
            .to_string();
        ValidatorProcess {
            url: format!("http://{addr}"),
            addr,
            key,
            service,
        }
    }

    /// Waits until the validator has started its first round (it logs "round started", at
    /// once when it starts): a GPU written into its registry after this is not in that
    /// round, and waits for the next slot. Panics (with its stderr) after a minute.
    pub fn wait_for_first_round(&self) {
        let deadline = std::time::Instant::now() + SERVICE_WAIT;
        while !self.service.stderr().contains("round started") {
            assert!(
                std::time::Instant::now() < deadline,
                "no round started: {}",
                self.service.stderr()
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// `pog agent` on the simulated host `profile` with its data in `data` and `flags`,
    /// serving on a free loopback port, trusting this validator and registering with it; once
    /// it serves (not yet registered: [`ValidatorProcess::wait_for_agents`]).
    pub fn agent(&self, data: &Path, profile: &str, flags: &[&str]) -> AgentProcess {
        AgentProcess::serving(self.spawn_agent(data, profile, flags))
    }

    /// [`ValidatorProcess::agent`], started.
    fn spawn_agent(&self, data: &Path, profile: &str, flags: &[&str]) -> Service {
        let mut args = vec!["agent", "--listen", "127.0.0.1:0"];
        args.extend(["--validator", &self.url, "--trust", &self.key]);
        args.extend_from_slice(flags);
        Service::spawn(data, &args, Some(profile))
    }

    /// The GPUs it lists (`GET /v1/gpus`).
    pub fn gpus(&self) -> Vec<Value> {
        let list: Value = http_get(&self.addr, "/v1/gpus")
            .and_then(|(_, body)| serde_json::from_str(&body).ok())
            .unwrap_or_default();
        list["gpus"].as_array().cloned().unwrap_or_default()
    }

    /// Waits until the GPUs of `n` agents are registered; its GPUs then.
    pub fn wait_for_agents(&mut self, n: usize) -> Vec<Value> {
        let deadline = std::time::Instant::now() + SERVICE_WAIT;
        loop {
            let gpus = self.gpus();
            let agents: std::collections::BTreeSet<&str> =
                gpus.iter().filter_map(|g| g["agent"].as_str()).collect();
            if agents.len() >= n {
                return gpus;
            }
            self.service.assert_running();
            assert!(
                std::time::Instant::now() < deadline,
                "{} of {n} agents registered within a minute: {gpus:#?}",
                agents.len()
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    /// Stops it with SIGTERM; its exit status.
    pub fn stop(&mut self) -> std::process::ExitStatus {
        self.service.stop()
    }
}

/// A running `pog agent`.
pub struct AgentProcess {
    pub service: Service,
    /// Its URL, as it registers it.
    pub url: String,
    /// The address its API listens on.
    pub addr: String,
    /// The simulated host it serves, as it names it (`PROFILE; host=N`).
    pub profile: Option<String>,
}

impl AgentProcess {
    /// `service`, once it says it serves: "[SIMULATED ]serving N GPU(s) at URL (listening on
    /// ADDR); proving on …".
    pub fn serving(service: Service) -> AgentProcess {
        let serving = service.line(" GPU(s) at ");
        let (url, addr) = serving
            .split_once(" GPU(s) at ")
            .and_then(|(_, rest)| rest.split_once(" (listening on "))
            .and_then(|(url, rest)| Some((url, rest.split_once(')')?.0)))
            .unwrap_or_else(|| panic!("{serving}"));
        // "SIMULATED host \"PROFILE\": …", printed before it serves.
        let profile = service
            .lines()
            .iter()
            .find(|l| l.starts_with("SIMULATED host "))
            .and_then(|l| l.split('"').nth(1))
            .map(str::to_string);
        AgentProcess {
            url: url.to_string(),
            addr: addr.to_string(),
            profile,
            service,
        }
    }
}

/// `pog validator` and `pog agent`s on simulated hosts against it, on loopback: each with its
/// own data dir (so its own key and, without `host=N`, its own GPUs), all registered once
/// [`Network::start`] returns, all killed when dropped.
pub struct Network {
    pub validator: ValidatorProcess,
    pub agents: Vec<AgentProcess>,
}

/// A [`Network`] to start.
pub struct NetworkSpec {
    root: std::path::PathBuf,
    flags: Vec<String>,
    agents: Vec<(String, Vec<String>)>,
}

impl Network {
    /// A validator with its data in `root/validator` (a dir made beforehand, e.g. by
    /// [`validator_dir`], is kept) and agents with theirs in `root/agent-N`.
    pub fn in_dir(root: &Path) -> NetworkSpec {
        NetworkSpec {
            root: root.to_path_buf(),
            flags: Vec::new(),
            agents: Vec::new(),
        }
    }
}

impl NetworkSpec {
    /// Flags of `pog validator` (more with each call).
    pub fn flags(mut self, flags: &[&str]) -> NetworkSpec {
        self.flags.extend(flags.iter().map(|f| f.to_string()));
        self
    }

    /// A `pog agent` on the simulated host `profile`, with `flags`.
    pub fn agent(mut self, profile: &str, flags: &[&str]) -> NetworkSpec {
        let flags = flags.iter().map(|f| f.to_string()).collect();
        self.agents.push((profile.to_string(), flags));
        self
    }

    /// Starts the validator, then the agents; returns once every agent is registered.
    ///
    /// Rounds start at the slot boundaries every validator derives alike (multiples of
    /// `--challenge-every` since the Unix epoch). A test that asks for rounds far apart (10
    /// minutes or more) counts on none starting while it runs, so it is started clear of the
    /// next boundary: within two minutes of one, this waits until it has passed.
    pub fn start(self) -> Network {
        let flags: Vec<&str> = self.flags.iter().map(String::as_str).collect();
        if let Some(every_s) = flags
            .iter()
            .position(|f| *f == "--challenge-every")
            .and_then(|i| flags.get(i + 1)?.parse::<f64>().ok())
            .filter(|every_s| *every_s >= 600.0)
        {
            wait_clear_of_slot_boundary(
                std::time::Duration::from_secs_f64(every_s),
                std::time::Duration::from_secs(120),
            );
        }
        let mut validator = ValidatorProcess::start(&self.root.join("validator"), &flags);
        let started: Vec<Service> = self
            .agents
            .iter()
            .enumerate()
            .map(|(i, (profile, flags))| {
                let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
                validator.spawn_agent(&self.root.join(format!("agent-{i}")), profile, &flags)
            })
            .collect();
        let agents: Vec<AgentProcess> = started.into_iter().map(AgentProcess::serving).collect();
        validator.wait_for_agents(agents.len());
        Network { validator, agents }
    }
}

/// The agent endpoint [`register_proven_h200`] registers: a port nothing listens on.
pub const NOWHERE: &str = "http://127.0.0.1:9";

/// Registers, at the validator whose data dir is `validator_data` (running or not, on its
/// SQLite registry), the agent key `agent` at [`NOWHERE`] holding the real H200 `uuid`, and
/// stores an accepted proof record of its model recorded now, signed by the validator's key:
/// what a per-model round of a real H200 leaves, and what an ask offering the GPU needs
/// (issue 25; a simulated GPU backs no ask). The GPU's next scheduled round fails (its
/// endpoint answers nothing): at the default pace, a minute after the validator started.
pub fn register_proven_h200(validator_data: &Path, agent: &pog_signed::PublicKey, uuid: &str) {
    let validator = pog_net::keys::load_or_create(&validator_data.join("validator.key")).unwrap();
    let mut registry =
        pog_validator::registry::Registry::open(Some(&validator_data.join("registry.sqlite")))
            .unwrap();
    register_proven_h200_in(&mut registry, &validator, agent, uuid);
}

/// [`register_proven_h200`] in `registry` (a fleet's, on PostgreSQL, say), the proof record
/// signed by `validator`.
pub fn register_proven_h200_in(
    registry: &mut pog_validator::registry::Registry,
    validator: &pog_signed::Identity,
    agent: &pog_signed::PublicKey,
    uuid: &str,
) {
    use pog_proof::challenge::{Addressee, CHALLENGE_VERSION};
    use pog_records::{GemmDetails, Policy, Record, RECORD_VERSION};
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let claim = pog_proof::wire::GpuClaim {
        uuid: uuid.parse().unwrap(),
        model: "H200 SXM".into(),
        bus_id: "0000:00:06.0".into(),
        simulated: false,
    };
    registry
        .register(
            agent,
            (NOWHERE, None),
            std::slice::from_ref(&claim),
            now_ms,
            64,
        )
        .unwrap();
    let id = format!("proven-{uuid}-{now_ms}");
    let record = Record {
        version: RECORD_VERSION,
        challenge_id: id.clone(),
        gpu_uuid: claim.uuid.clone(),
        agent: agent.clone(),
        model: claim.model.clone(),
        simulated: false,
        policy: Policy::per_model_default(),
        details: GemmDetails {
            proves_model: true,
            lead: 1.5,
            challenge: pog_proof::Challenge {
                version: CHALLENGE_VERSION,
                nonce: [7; 32],
                to: Addressee {
                    gpu_uuid: claim.uuid.clone(),
                    gpu_bus_id: claim.bus_id.clone(),
                    agent_key: agent.clone(),
                    validator_key: validator.public_key(),
                },
                precision: pog_spec::Precision::Bf16,
                size: 8192,
                batch: 4,
                leaf_elements: 1024,
            },
        },
        expected_ms: 1_000.0,
        accepted: true,
        outcome: None,
        failure: None,
        spot_check_secret: hex::encode([8; 32]),
        bytes_to_agent: 0,
        bytes_from_agent: 0,
        recorded_at_ms: now_ms,
    };
    let sealed = validator
        .seal(pog_signed::RecordKind::ProofRound.wire_kind(), &record)
        .unwrap();
    let sealed = serde_json::to_string(&sealed).unwrap();
    registry.record(&id, uuid, true, &sealed).unwrap();
}

/// Returns once the next boundary of slots of `every` (multiples since the Unix epoch) is at
/// least `margin` away, sleeping past it where it is nearer.
pub fn wait_clear_of_slot_boundary(every: std::time::Duration, margin: std::time::Duration) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let every_ms = every.as_millis().max(1);
    let to_next_ms = every_ms - now.as_millis() % every_ms;
    if to_next_ms < margin.as_millis() {
        let wait = std::time::Duration::from_millis(to_next_ms as u64 + 1_000);
        eprintln!("waiting {wait:?} for the round at the next slot boundary to pass");
        std::thread::sleep(wait);
    }
}

/// The clearing request of H200 SXM by `operator` (the validator's key), as sent.
pub fn clear_request(operator: &pog_signed::Identity) -> Vec<u8> {
    let message = pog_validator::market::ClearMessage {
        validator: operator.public_key(),
        class: pog_market::GpuClass::new("H200 SXM").unwrap(),
        mechanism: pog_market::Mechanism::UniformPrice,
        at_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64,
        nonce: Some(pog_validator::market::fresh_clear_nonce()),
    };
    let envelope = operator
        .seal(pog_validator::market::CLEAR_KIND, &message)
        .unwrap();
    serde_json::to_vec(&envelope).unwrap()
}

/// Sends `body` to `path` at `addr` as a JSON `POST` on a plain socket, read from it for the
/// answer.
pub fn post(addr: &str, path: &str, body: &[u8]) -> std::net::TcpStream {
    use std::io::Write;
    let mut socket = std::net::TcpStream::connect(addr).unwrap();
    write!(
        socket,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    socket.write_all(body).unwrap();
    socket
}

/// Every clearing the validator at `addr` lists, oldest first.
pub fn history(addr: &str) -> Vec<Value> {
    let (status, body) = http_get(addr, "/v1/market/history?limit=1000").unwrap();
    assert_eq!(status, 200, "{body}");
    let page: Value = serde_json::from_str(&body).unwrap();
    page["clearings"].as_array().unwrap().clone()
}

/// The ids of the lease records in the histories of `gpus` in the ledger of the validator
/// whose data dir is `data`, sorted (an id twice, when logged twice); why not, when the ledger
/// cannot be read.
pub fn ledger_leases(data: &std::path::Path, gpus: &[String]) -> Result<Vec<String>, String> {
    let ledger =
        pog_ledger::store::Ledger::open_reader(&data.join("ledger")).map_err(|e| e.to_string())?;
    let mut ids = Vec::new();
    for gpu in gpus {
        for (_, entry) in ledger.gpu_entries(gpu).map_err(|e| e.to_string())? {
            if entry.kind == pog_signed::RecordKind::Lease {
                let lease: pog_records::LeaseRecord =
                    serde_json::from_str(&entry.body).map_err(|e| e.to_string())?;
                ids.push(lease.lease_id);
            }
        }
    }
    ids.sort();
    Ok(ids)
}
