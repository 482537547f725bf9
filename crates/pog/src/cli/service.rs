//! The flags of the long-running services, `pog agent` and `pog validator`.

use super::market::ClearArgs;
use super::parse::{parse_bytes, parse_milliseconds, parse_seconds};
use super::prove::{ProverKind, StorageClass};
use clap::Args;
use pog_signed::PublicKey;
use std::time::Duration;

/// What `pog agent` serves.
#[derive(Debug, Args, Clone)]
pub struct AgentArgs {
    /// Address to listen on: host:port, the host a name or an address.
    #[arg(long, default_value = "127.0.0.1:7070", value_name = "HOST:PORT")]
    pub listen: String,
    /// The URL the validator reaches this agent at [default: http://LISTEN].
    #[arg(long, value_name = "URL")]
    pub advertise: Option<String>,
    /// The validator's URL (http or https).
    #[arg(long, value_name = "URL")]
    pub validator: String,
    /// Public key (64 hex digits) of a validator allowed to challenge this agent; repeat for
    /// several. Challenges signed by any other key, or addressed to another agent, are
    /// refused.
    #[arg(long = "trust", value_name = "KEY", required = true, value_parser = parse_key)]
    pub trust: Vec<PublicKey>,
    /// Where challenges are computed.
    #[arg(long, value_enum, default_value = "auto")]
    pub prover: ProverKind,
    /// Serve the GPUs' Prometheus metrics (dcgm-exporter's names) at http://HOST:PORT/metrics
    /// instead of at /metrics on the API's address.
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics_listen: Option<String>,
    /// A saved `pog bench --json` (or `pog check --json`) of this host: its figures are sent
    /// to the validator, signed by the agent as self-reported benchmark records, beside the
    /// inspection the agent runs at start. Without it no benchmark record is sent (the agent
    /// does not benchmark at start: that would hold the GPUs at every restart).
    #[arg(long, value_name = "FILE")]
    pub bench_report: Option<std::path::PathBuf>,
    /// The EVM address (0x and 40 hex digits) to hold this host's GPU tokens: the validator
    /// writes it into each GPU's `gpu-state` record, and the token contract mints to it
    /// (docs/ledger.md, "Scores on chain"). Without it no token can be minted for these GPUs.
    #[arg(long, value_name = "ADDRESS")]
    pub token_owner: Option<pog_signed::EvmAddress>,
    /// Deliver this host's GPU leases through this program: `PROGRAM grant` when a lease
    /// starts and `PROGRAM revoke` when it ends, the lease as JSON on its stdin; 30 s each, its
    /// exit status decides (docs/market.md, "Leases"). Without it leases are not delivered.
    #[arg(long, value_name = "PROGRAM")]
    pub lease_hook: Option<std::path::PathBuf>,
    /// Prove this host's storage: a directory on it where the validator's data set is built
    /// (in the background, on its request) and kept between rounds and across restarts
    /// (docs/protocol.md, "Proof of storage"). Without it the agent claims no storage.
    #[arg(long, value_name = "DIR", requires = "storage_size")]
    pub storage_dir: Option<std::path::PathBuf>,
    /// The storage claimed, bytes (K, M, G, T: powers of 1024), in whole items of 256 KiB
    /// (1 MiB for `--storage-class ssd`); the directory's file system needs that much free,
    /// its tree (1/64 of it) and 64 MiB.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes, requires = "storage_dir")]
    pub storage_size: Option<u64>,
    /// The class of device claimed, whose read time bounds each round's walk.
    #[arg(long, value_enum, default_value = "nvme", requires = "storage_dir")]
    pub storage_class: StorageClass,
    /// The RAM this host proves: bytes (K, M, G, T: powers of 1024), or `all` for the host's
    /// total memory as its inventory reads it. Each round's proof of RAM builds a data set of
    /// 90 % of it in memory, on every thread, then walks it (docs/protocol.md, "Proof of
    /// RAM": about 5 s a GiB on two threads), so it is claimed only when asked. At most the
    /// host's memory [default: none, no proof of RAM].
    #[arg(long, value_name = "BYTES|all", value_parser = parse_ram_claim)]
    pub ram_claim: Option<RamClaim>,
}

/// `--ram-claim`: what the agent claims of its host's RAM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RamClaim {
    /// The host's total memory, as its inventory reads it.
    All,
    /// This many bytes.
    Bytes(u64),
}

/// `--ram-claim`: `all`, or bytes as `parse_bytes` reads them.
fn parse_ram_claim(s: &str) -> Result<RamClaim, String> {
    match s.trim() {
        "all" => Ok(RamClaim::All),
        bytes => parse_bytes(bytes).map(RamClaim::Bytes),
    }
}

/// What `pog validator` serves and how it challenges.
#[derive(Debug, Args, Clone)]
pub struct ValidatorArgs {
    /// Address to listen on: host:port, the host a name or an address.
    #[arg(long, default_value = "127.0.0.1:7071", value_name = "HOST:PORT")]
    pub listen: String,
    /// Keep the registry and the records in this PostgreSQL database
    /// (postgres://user:password@host:port/database?sslmode=verify-full&sslrootcert=CA-FILE;
    /// another host than this one needs sslmode, or sslmode=disable to go in the clear),
    /// shared with the fleet's other validators [default: registry.sqlite in the data dir].
    #[arg(long, env = "POG_DATABASE", value_name = "URL")]
    pub database: Option<String>,
    /// The key that signs the ledger's checkpoints, apart from the validator's own key
    /// (created if missing). Every validator of a fleet (--database) needs it, the same file
    /// on each, or the key's hex in the environment variable POG_LOG_KEY [default: alone, the
    /// validator's key signs].
    #[arg(long, env = "POG_LOG_KEY_FILE", value_name = "FILE")]
    pub log_key_file: Option<std::path::PathBuf>,
    /// Make --log-key-file's key the fleet's log key in place of the one the database holds
    /// (a key rotation: docs/ledger.md, "Rotating the fleet's log key").
    #[arg(long, requires = "database")]
    pub rotate_log_key: bool,
    /// Make --challenge-every the fleet's round length in place of the one the database holds
    /// (every validator of a fleet starts its rounds at the same instants; the others must be
    /// restarted with it).
    #[arg(long, requires = "database")]
    pub adopt_fleet_schedule: bool,
    /// Seconds between the starts of two rounds of challenges to every registered GPU.
    #[arg(long, default_value = "60", value_parser = parse_seconds)]
    pub challenge_every: Duration,
    /// Precision of the challenges [default: the one that separates the claimed model from
    /// cheaper ones].
    #[arg(long, value_enum, ignore_case = true)]
    pub precision: Option<pog_spec::Precision>,
    /// Output elements checked per challenge.
    #[arg(long, default_value = "1024", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub samples: u32,
    /// How long an agent has to commit, ms (as long again to open).
    #[arg(long, default_value = "60000", value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub expiry_ms: u64,
    /// Skip the proof of memory in each round (it follows the GEMM challenge by default: the
    /// only proof that tells an H200 from an H100).
    #[arg(long)]
    pub no_memory_proof: bool,
    /// Skip the proof of the host's CPU (by default it follows the host's GPU challenges in
    /// each round wherever the agent claims its host's cores).
    #[arg(long)]
    pub no_cpu_proof: bool,
    /// Steps of each lane of the proof of CPU: what a round costs the host (at about 7 ns a
    /// step, 2^25 is a quarter second alone, then a quarter second of every core); a multiple
    /// of its 1024 segments, 2^16 to 2^28 [default: 2^25; 2^22 under --test-plan].
    #[arg(long, value_parser = parse_lane_steps)]
    pub cpu_lane_steps: Option<u64>,
    /// Skip the proof of the host's RAM (by default it follows the proof of CPU wherever the
    /// agent claims RAM, once every --ram-every-hours).
    #[arg(long)]
    pub no_ram_proof: bool,
    /// Hours a host's accepted proof of RAM stands before the next (each builds 90 % of the
    /// claimed RAM: about 0.9 s a GiB on 16 threads); a failed one is tried again at the
    /// host's next round.
    #[arg(long, default_value = "24", value_parser = clap::value_parser!(u64).range(0..=8760))]
    pub ram_every_hours: u64,
    /// Walkers of each round's walk of the host's RAM, each 4 steps of 2 KiB: what a round's
    /// walk costs the host beside its build (16384: 128 MiB of reads) [default: 16384; 1024
    /// under --test-plan].
    #[arg(long, value_parser = clap::value_parser!(u64).range(64..=65536))]
    pub ram_walkers: Option<u64>,
    /// The slowest RAM walk accepted, GB/s of item reads: the bound's ceiling, which the
    /// host's own build time tightens (docs/protocol.md, "Proof of RAM").
    #[arg(long, default_value_t = pog_proof::ram::RAM_WALK_GBS, value_parser = parse_rate)]
    pub ram_walk_gbs: f64,
    /// The slowest RAM build waited for, GiB of data set a second per claimed hardware
    /// thread: a large claim's build is given that long past --expiry-ms (at most 50 minutes;
    /// docs/protocol.md, "Proof of RAM").
    #[arg(long, default_value_t = pog_proof::ram::SLOWEST_BUILD_GIBS_PER_THREAD, value_parser = parse_rate)]
    pub ram_build_gibs_per_thread: f64,
    /// Skip the proof of the host's storage (by default it follows the proof of CPU in each
    /// round wherever the agent claims storage).
    #[arg(long)]
    pub no_storage_proof: bool,
    /// Dependent 4 KiB reads each round's walk of the host's storage takes: what a round
    /// costs the host (1024: about 0.05 s on an NVMe SSD, at most 0.26 s at the NVMe bound)
    /// [default: 1024; 128 under --test-plan].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub storage_steps: Option<u32>,
    /// Days a host's storage data set is walked before the validator sends a new one, which
    /// the host rebuilds (minutes of every core and a write of the claimed size).
    #[arg(long, default_value = "30", value_parser = clap::value_parser!(u64).range(1..=3650))]
    pub storage_rebuild_days: u64,
    /// TEST MODE: challenge with a fixed --size, --batch and --expected-ms instead of the
    /// claimed model's plan (and a fixed small memory proof: 4096 items, 1024 walkers). A CPU answers a small one in time, so such records prove no
    /// model; each says so (`proves_model: false`). For tests and demos only.
    #[arg(long)]
    pub test_plan: bool,
    /// m = n = k of each product (with --test-plan).
    #[arg(long, default_value = "64", requires = "test_plan", value_parser = clap::value_parser!(u64).range(8..=65536))]
    pub size: u64,
    /// Products per challenge (with --test-plan).
    #[arg(long, default_value = "2", requires = "test_plan", value_parser = clap::value_parser!(u32).range(1..=100000))]
    pub batch: u32,
    /// The time bound, ms (with --test-plan).
    #[arg(long, default_value = "5000", requires = "test_plan", value_parser = parse_milliseconds)]
    pub expected_ms: f64,
    /// Let GPUs of the simulated test double (`pog agent --simulate`) register, for tests and
    /// tours: their records say `simulated: true` and prove nothing.
    #[arg(long)]
    pub accept_simulated: bool,
    /// Let agents advertise loopback, private and link-local endpoints (tests and private
    /// networks). Without it the validator only connects to public addresses.
    #[arg(long)]
    pub allow_private_endpoints: bool,
    /// Challenges in flight at once. A round challenges every GPU at the same moment up to
    /// this many; keep it above the number of registered GPUs.
    #[arg(long, default_value = "1024", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub max_concurrent_challenges: u64,
    /// Failed rounds in a row after which a GPU's registration is released.
    #[arg(long, default_value = "5", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub release_after: u32,
    /// Open connections the API accepts at once.
    #[arg(long, default_value = "1024", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_connections: u64,
    /// Open connections the API accepts at once from one source address.
    #[arg(long, default_value = "64", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_connections_per_source: u64,
    /// Seconds a client has to send a request's head (and, again, its body).
    #[arg(long, default_value = "5", value_parser = parse_seconds)]
    pub request_timeout: Duration,
    /// MiB of request bodies held in memory at once, across all requests.
    #[arg(long, default_value = "32", value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub max_inflight_body_mib: u64,
    /// Registrations one source address may make per minute.
    #[arg(long, default_value = "10", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub registrations_per_minute: u32,
    /// GPUs one agent key may claim.
    #[arg(long, default_value = "64", value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub max_gpus_per_agent: u64,
    /// KiB of new reports (the agent-signed inspection and benchmark records of POST
    /// /v1/reports, each charged its size, at least 1 KiB) each registered GPU may add per hour,
    /// whatever keys send them; content the validator holds already costs nothing. At least 16
    /// (one report of the largest size).
    #[arg(long, default_value = "64", value_parser = clap::value_parser!(u32).range(16..=1_000_000))]
    pub report_kib_per_gpu_per_hour: u32,
    /// KiB of new reports the GPUs reported from one source address (IPv4, or IPv6 /64) may
    /// add per hour together (registrations are claims: one address must not fill the log
    /// through many made-up GPUs).
    #[arg(long, default_value = "8192", value_parser = clap::value_parser!(u32).range(16..=100_000_000))]
    pub report_kib_per_source_per_hour: u32,
    /// The order book's scheduled clearings and limits.
    #[command(flatten)]
    pub market: ClearArgs,
    /// Seconds between two looks at the ledger (DATA_DIR/ledger): whenever it grew, a
    /// checkpoint is signed and sent to the --witness URLs.
    #[arg(long, default_value = "10", value_parser = parse_seconds, value_name = "SECONDS")]
    pub checkpoint_every: Duration,
    /// A witness (c2sp.org/tlog-witness, e.g. `pog witness serve`) by URL prefix and
    /// cosignature key (`pog witness vkey`), as URL=VKEY: each new checkpoint is sent to
    /// URL/add-checkpoint and the cosignature that verifies under VKEY kept; repeatable.
    #[arg(long = "witness", value_name = "URL=VKEY")]
    pub witnesses: Vec<pog_validator::ledger::WitnessTarget>,
    /// Cosignatures a checkpoint needs before it is published (served at /ledger/checkpoint,
    /// exported, anchored); until then the previous one stays the latest [default: every
    /// --witness].
    #[arg(long, value_name = "N")]
    pub witness_quorum: Option<usize>,
    /// Requests a minute to each witness (a minute's worth at once); a witness that fails (no
    /// answer in time, 429, 5xx, a refusal) is left alone 10 s, doubling up to 10 minutes.
    #[arg(long, value_name = "N", default_value_t = 12,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub witness_requests_per_minute: u32,
    /// An EVM node's JSON-RPC URL (http or https): the ledger's checkpoints are anchored in the
    /// CheckpointRegistry at --anchor-contract there, paid for by --anchor-key-file's account.
    #[arg(long, value_name = "URL", requires_all = ["anchor_contract", "anchor_key_file"])]
    pub anchor_rpc: Option<String>,
    /// The CheckpointRegistry's address (`pog ledger deploy-registry`).
    #[arg(long, value_name = "ADDRESS", requires = "anchor_rpc")]
    pub anchor_contract: Option<String>,
    /// A file holding the publisher's secp256k1 private key (64 hex digits, chmod 600). The
    /// key itself is never a command-line value: others on the host could read it there.
    #[arg(long, value_name = "FILE", requires = "anchor_rpc")]
    pub anchor_key_file: Option<std::path::PathBuf>,
    /// Seconds between two looks at the latest checkpoint: when it is larger than the last
    /// anchored, it is anchored (the log's origin registered first if no one has). A failure
    /// is retried a minute later. The hourly default costs about 1.99 M gas a day (24 anchors
    /// of 82,977 gas, measured on anvil): docs/ledger.md "Gas".
    #[arg(long, default_value = "3600", value_parser = parse_seconds, value_name = "SECONDS")]
    pub anchor_every: Duration,
    /// After each anchoring, prove the GPUs' new gpu-state records to the GpuScores contract
    /// at this address (`pog ledger deploy-scores`), paid by --anchor-key-file: about 72 k gas
    /// a GPU whose state changed (docs/ledger.md, "Scores on chain"). Off by default: anyone
    /// can publish with `pog ledger publish-scores`.
    #[arg(long, value_name = "ADDRESS", requires_all = ["anchor_rpc", "anchor_key_file"])]
    pub scores_contract: Option<String>,
    /// Back bids by deposits in the GpuEscrow contract at this address (on --escrow-rpc): a bid
    /// is taken only while what its owner's open bids could pay, with it, is covered by the
    /// owner key's deposit (docs/market.md, "Deposits and settlement"). Without it, bids are
    /// taken unbacked (the validator says so at start).
    #[arg(long, value_name = "ADDRESS", requires = "escrow_rpc")]
    pub escrow_contract: Option<String>,
    /// The EVM node's JSON-RPC URL (http or https) the escrow is read on.
    #[arg(long, value_name = "URL", requires = "escrow_contract")]
    pub escrow_rpc: Option<String>,
    /// A file holding the escrow's settlement key (secp256k1, 64 hex digits, chmod 600: the
    /// contract's `settler`). With it the validator signs each lease period's settlement for
    /// the hours it proved and submits it, paying the gas from this key's account; without it
    /// settlements are recorded but nothing is paid (docs/market.md, "Deposits and
    /// settlement").
    #[arg(long, value_name = "FILE", requires = "escrow_contract")]
    pub escrow_key_file: Option<std::path::PathBuf>,
    /// Hours in one settlement period of a lease: a lease is paid once per period for the
    /// hours proven in it, its last period ending with it.
    #[arg(long, default_value = "24", value_name = "HOURS", value_parser = clap::value_parser!(u64).range(1..=8760))]
    pub settlement_period_hours: u64,
    /// Seconds between two looks for lease periods to settle and payments to submit.
    #[arg(long, default_value = "60", value_parser = parse_seconds, value_name = "SECONDS")]
    pub settle_every: Duration,
}

/// An Ed25519 public key as 64 hex digits, refused if it is malformed or weak.
fn parse_key(s: &str) -> Result<PublicKey, String> {
    PublicKey::parse(s).map_err(|e| format!("{s:?} is not a usable validator key: {e}"))
}

/// `--ram-walk-gbs`, `--ram-build-gibs-per-thread`: a finite rate above 0.
fn parse_rate(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(rate) if rate.is_finite() && rate > 0.0 => Ok(rate),
        _ => Err(format!("{s:?} is not a rate above 0")),
    }
}

/// `--cpu-lane-steps`: 2^16 to 2^28 (what an agent runs), a multiple of the proof's segments.
fn parse_lane_steps(text: &str) -> Result<u64, String> {
    let steps: u64 = text.parse().map_err(|e| format!("{e}"))?;
    let segments = u64::from(pog_proof::cpu::SEGMENTS);
    if !(1 << 16..=1 << 28).contains(&steps) || !steps.is_multiple_of(segments) {
        return Err(format!(
            "{steps} steps: a lane takes 65536 to 268435456 steps, a multiple of {segments}"
        ));
    }
    Ok(steps)
}
