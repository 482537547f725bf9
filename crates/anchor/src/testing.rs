//! Test support (feature `testing`): a real local EVM node for tests. [`evm_tools`] runs
//! `scripts/evm-tools.sh` once per process (it installs anvil and solc from npm into `.tools/evm/`
//! on first use and compiles the contracts into `target/contracts/`), [`Anvil::start`] starts
//! anvil on a free loopback port and kills it when dropped, [`dev_key_file`] writes one of
//! anvil's well-known development keys to a private key file.
//!
//! These helpers panic with a message when the tools cannot be had: they serve tests only.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// anvil's first development accounts' private keys (public knowledge: every anvil and
/// hardhat node funds them). Never use them on a real chain.
pub const DEV_KEYS: [&str; 3] = [
    "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
    "59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
    "5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
];

/// Every function, event and error of an ABI with its full signature (names, types, indexed
/// parameters, outputs, mutability, selectors): what a test compares between solc's ABI and a
/// `sol!` interface.
pub fn abi_signatures(abi: &alloy::json_abi::JsonAbi) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    for f in abi.functions() {
        out.insert(format!(
            "{} {:?} selector {}",
            f.full_signature(),
            f.state_mutability,
            f.selector()
        ));
    }
    for e in abi.events() {
        out.insert(format!("{} topic {}", e.full_signature(), e.selector()));
    }
    for e in abi.errors() {
        let names: Vec<String> = e
            .inputs
            .iter()
            .map(|p| format!("{} {}", p.ty, p.name))
            .collect();
        out.insert(format!(
            "error {}({}) selector {}",
            e.name,
            names.join(", "),
            e.selector()
        ));
    }
    out
}

/// What `scripts/evm-tools.sh` installed and compiled.
#[derive(Debug, Clone)]
pub struct EvmTools {
    /// The anvil binary.
    pub anvil: PathBuf,
    /// The registry's ABI, as solc wrote it.
    pub abi: PathBuf,
    /// The registry's creation bytecode (hex).
    pub bin: PathBuf,
    /// The folder of every contract's ABI (`NAME.abi.json`) and bytecode (`NAME.bin`).
    pub contracts: PathBuf,
}

impl EvmTools {
    /// The ABI file of contract `name` (e.g. "GpuScores").
    pub fn abi_of(&self, name: &str) -> PathBuf {
        self.contracts.join(format!("{name}.abi.json"))
    }

    /// The creation bytecode file of contract `name`.
    pub fn bin_of(&self, name: &str) -> PathBuf {
        self.contracts.join(format!("{name}.bin"))
    }
}

/// The workspace's root directory.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root")
}

/// Runs `scripts/evm-tools.sh` (once per process) and returns the paths it printed.
pub fn evm_tools() -> &'static EvmTools {
    static TOOLS: OnceLock<EvmTools> = OnceLock::new();
    TOOLS.get_or_init(|| {
        let script = workspace_root().join("scripts/evm-tools.sh");
        let out = Command::new("bash")
            .arg(&script)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("running {}: {e}", script.display()));
        assert!(
            out.status.success(),
            "{} failed ({}): {}",
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let get = |key: &str| -> PathBuf {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{key}=")))
                .map(PathBuf::from)
                .unwrap_or_else(|| panic!("{} printed no {key}=: {text}", script.display()))
        };
        EvmTools {
            anvil: get("anvil"),
            abi: get("abi"),
            bin: get("bin"),
            contracts: get("contracts"),
        }
    })
}

/// A running anvil on a loopback port, killed when dropped.
#[derive(Debug)]
pub struct Anvil {
    child: Child,
    /// Its JSON-RPC URL (`http://127.0.0.1:PORT`).
    pub url: String,
}

impl Anvil {
    /// Starts anvil on a free loopback port (it picks one: `--port 0`) and waits until it
    /// listens. Blocks are mined on every transaction.
    pub fn start() -> Anvil {
        let tools = evm_tools();
        let mut child = Command::new(&tools.anvil)
            .args(["--host", "127.0.0.1", "--port", "0", "--accounts", "3"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", tools.anvil.display()));
        let stdout = child.stdout.take().expect("piped");
        let (tx, rx) = std::sync::mpsc::channel();
        // Reads anvil's output until it says where it listens, then drains it.
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if !sent {
                    if let Some(addr) = line.trim().strip_prefix("Listening on ") {
                        let _ = tx.send(addr.to_string());
                        sent = true;
                    }
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        let addr = loop {
            if let Ok(addr) = rx.recv_timeout(Duration::from_millis(100)) {
                break addr;
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("anvil exited at start: {status}");
            }
            assert!(Instant::now() < deadline, "anvil did not start in 30 s");
        };
        Anvil {
            child,
            url: format!("http://{addr}"),
        }
    }
}

impl Drop for Anvil {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes anvil's development key number `index` (of [`DEV_KEYS`]) to `dir/name`, mode 0600.
pub fn dev_key_file(dir: &Path, name: &str, index: usize) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("0x{}\n", DEV_KEYS[index])).expect("writing the key file");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
        .expect("chmod 600 the key file");
    path
}

/// The first `count` of anvil's development keys (of [`DEV_KEYS`]), each written to a private
/// key file `dir/k{i}` and read back as a [`crate::PublisherKey`].
pub fn dev_keys(dir: &Path, count: usize) -> Vec<crate::PublisherKey> {
    (0..count)
        .map(|i| {
            crate::PublisherKey::from_file(&dev_key_file(dir, &format!("k{i}"), i))
                .expect("a development key file")
        })
        .collect()
}

/// Mints `amount` of the test stablecoin (`contracts/TestUsd.sol`, anyone may) at `token` to
/// `to`, sent by anvil's development key `index`; waits for the receipt.
pub async fn mint_test_usd(
    rpc: &str,
    token: alloy::primitives::Address,
    index: usize,
    to: alloy::primitives::Address,
    amount: u128,
) {
    use alloy::providers::ProviderBuilder;
    let signer = alloy::signers::local::PrivateKeySigner::from_bytes(
        &alloy::primitives::B256::from_slice(&hex::decode(DEV_KEYS[index]).expect("hex")),
    )
    .expect("a development key");
    let provider = ProviderBuilder::new()
        .wallet(alloy::network::EthereumWallet::from(signer))
        .connect_http(rpc.parse().expect("an RPC URL"));
    crate::contract::IStablecoin::new(token, provider)
        .mint(to, alloy::primitives::U256::from(amount))
        .send()
        .await
        .expect("sending the mint")
        .get_receipt()
        .await
        .expect("the mint's receipt");
}
