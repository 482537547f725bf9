//! The command line: global options and one subcommand per job.

use clap::{Args, Parser, Subcommand};
use pog_signed::PublicKey;
use std::time::Duration;

/// Proof of GPU: check that a GPU is genuine, measure it, prove it to a remote validator.
#[derive(Debug, Parser)]
#[command(name = "pog", version, about, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,

    #[command(flatten)]
    pub global: Global,
}

/// Options every command takes.
#[derive(Debug, Args)]
pub struct Global {
    /// Print machine-readable JSON instead of tables.
    #[arg(long, global = true)]
    pub json: bool,

    /// The nvidia-smi to cross-check against (a bare name is looked up on PATH).
    #[arg(long, global = true, default_value = "nvidia-smi", value_name = "PATH")]
    pub nvidia_smi: String,

    /// Seconds to wait for nvidia-smi before giving up on it.
    #[arg(long, global = true, default_value = "20", value_name = "SECONDS", value_parser = parse_seconds)]
    pub nvidia_smi_timeout: Duration,

    /// Where pog keeps its keys and the validator's registry [default: $XDG_DATA_HOME/pog,
    /// else ~/.local/share/pog].
    #[arg(long, global = true, env = "POG_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<std::path::PathBuf>,

    /// Tour pog without a GPU: run against a simulated host instead of this machine. A test
    /// double: every line and record it produces says SIMULATED, and validators refuse its
    /// GPUs. PROFILE: models, then faults and an optional host number, e.g.
    /// "H200 SXM x2; ecc-off, host=7": hosts of different numbers have different GPU UUIDs and
    /// serials. Without host=N it is host 0, except that `pog agent` derives N from its key, so
    /// many simulated agents (each with its own --data-dir) can register with one validator.
    #[arg(long, global = true, env = "POG_SIMULATE", value_name = "PROFILE")]
    pub simulate: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The main job: everything a validator will check on this host, with one verdict.
    Check,
    /// Inventory every GPU, CPU, memory and disk, and cross-check what each source reports.
    Inspect,
    /// Measure every GPU (GEMM in every precision, copies) and the host (CPU, memory, storage).
    Bench(BenchArgs),
    /// Prove this host's GPUs as a validator would: a self-challenge, validator and agent in
    /// one process, with the time against the claimed model's bound and the spot checks.
    Prove(ProveArgs),
    /// Serve this host's GPUs to a validator: register, then answer its signed challenges.
    Agent(AgentArgs),
    /// Register agents, challenge their GPUs on a schedule, verify and record the results.
    Validator(ValidatorArgs),
    /// GPU health: sample every GPU through NVML with anomaly detection, alerts, history, /metrics
    /// and a dashboard (`run`), or replay the detectors over a recorded trace (`replay`).
    Monitor(crate::commands::monitor::MonitorArgs),
    /// The Proof-of-GPU score of this host (a fresh `pog check`) or of a saved report.
    Score(crate::commands::market::ScoreArgs),
    /// The price per GPU-hour of this host's GPUs (or of a model), from its score and the market.
    Price(crate::commands::market::PriceArgs),
    /// A validator's order book for GPU-hours: submit, cancel, book, clear, history.
    Market(crate::commands::market::MarketArgs),
    /// The validator's transparency log: append, checkpoint, prove, export one GPU's bundle.
    Ledger(crate::commands::ledger::LedgerArgs),
    /// Check one GPU's whole history offline from a proof bundle (`pog ledger export`).
    Verify(crate::commands::ledger::VerifyArgs),
    /// A witness: cosign a log's new checkpoint once it is consistent with the last one.
    Witness(crate::commands::ledger::WitnessArgs),
    /// List the GPU model database (or one model's full entry).
    Specs {
        /// A model name such as "H200 SXM" (as in the list).
        model: Option<String>,
    },
}

impl Command {
    /// The command's name, as its JSON schema names it.
    /// Whether the command is a long-running service (agent, validator, witness, monitor):
    /// one that must outlive a reader of its stdout going away.
    pub fn is_service(&self) -> bool {
        use crate::commands::ledger::WitnessAction;
        use crate::commands::monitor::MonitorCommand;
        match self {
            Command::Agent(_) | Command::Validator(_) => true,
            Command::Witness(w) => matches!(w.action, WitnessAction::Serve(_)),
            Command::Monitor(m) => matches!(m.command, MonitorCommand::Run(_)),
            _ => false,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Command::Check => "check",
            Command::Inspect => "inspect",
            Command::Bench(_) => "bench",
            Command::Prove(_) => "prove",
            Command::Agent(_) => "agent",
            Command::Validator(_) => "validator",
            Command::Monitor(_) => "monitor",
            Command::Score(_) => "score",
            Command::Price(_) => "price",
            Command::Market(args) => args.action.name(),
            Command::Ledger(args) => args.action.name(),
            Command::Verify(_) => "verify",
            Command::Witness(args) => args.action.name(),
            Command::Specs { .. } => "specs",
        }
    }
}

/// What `pog bench` runs.
#[derive(Debug, Args, Clone)]
pub struct BenchArgs {
    /// quick (about half a minute per GPU; what `pog check` runs), standard or full.
    #[arg(long, default_value = "standard")]
    pub suite: pog_bench::Suite,

    /// CUDA ordinals of the GPUs to measure, e.g. 0,2 (default: all).
    #[arg(long, value_delimiter = ',', value_name = "N,...")]
    pub gpus: Option<Vec<usize>>,

    /// Square GEMM sizes instead of the suite's, e.g. 4096,8192.
    #[arg(long, value_delimiter = ',', value_name = "N,...", value_parser = clap::value_parser!(u64).range(16..=65536))]
    pub sizes: Option<Vec<u64>>,

    /// Precisions instead of all the GPU has: fp64,fp32,tf32,fp16,bf16,fp8,int8.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "P,...",
        value_enum,
        ignore_case = true
    )]
    pub precisions: Option<Vec<pog_spec::Precision>>,

    /// Timed runs per figure instead of the suite's.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=10000))]
    pub iterations: Option<u32>,

    /// Copy size in MiB instead of the suite's.
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    pub copy_mib: Option<u64>,

    /// Seconds of sustained GEMM load instead of the suite's (0 skips it).
    #[arg(long, value_name = "SECONDS", value_parser = parse_sustained)]
    pub sustained_seconds: Option<f64>,

    /// Idle milliseconds before each GEMM's timed runs, after its algorithm is chosen
    /// (default 300): the figure is the burst rate from an idle card, as PyTorch's is.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u32).range(0..=60000))]
    pub gemm_rest_ms: Option<u32>,

    /// Skip the GPUs (host only).
    #[arg(long)]
    pub no_gpu: bool,

    /// Skip the host benchmarks.
    #[arg(long)]
    pub no_host: bool,

    /// Where the storage benchmark writes its test file (removed afterwards).
    #[arg(long, value_name = "DIR")]
    pub storage_dir: Option<std::path::PathBuf>,
}

/// What `pog prove` challenges (by default: the validator's plan for the claimed model).
#[derive(Debug, Args, Clone)]
pub struct ProveArgs {
    /// CUDA ordinals of the GPUs to prove, e.g. 0,2 (default: all).
    #[arg(long, value_delimiter = ',', value_name = "N,...")]
    pub gpus: Option<Vec<usize>>,
    /// Precision of the products [default: where the claimed model leads most].
    #[arg(long, value_enum, ignore_case = true)]
    pub precision: Option<pog_spec::Precision>,
    /// m = n = k of each product [default: the validator's plan].
    #[arg(long, value_parser = clap::value_parser!(u64).range(8..=65536))]
    pub size: Option<u64>,
    /// Products in the challenge [default: the validator's plan, at least 1 s of work].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100000))]
    pub batch: Option<u32>,
    /// Output elements per Merkle leaf.
    #[arg(long, default_value_t = pog_proof::params::LEAF_ELEMENTS, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub leaf_elements: u32,
    /// Output elements spot-checked.
    #[arg(long, default_value = "1024", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub samples: u32,
    /// The time bound, ms [default: the claimed model's expected time for this work].
    #[arg(long, value_parser = parse_milliseconds)]
    pub expected_ms: Option<f64>,
    /// Also compute the challenge on the CPU and compare roots (small challenges only).
    #[arg(long)]
    pub against_cpu: bool,
    /// Where the agent side computes: the GPU, or the CPU (small challenges only, no GPU
    /// needed).
    #[arg(long, value_enum, default_value = "auto")]
    pub prover: ProverKind,
    /// Which proofs to run: the GEMM challenge, the memory challenge, or both (a validator's
    /// round runs both).
    #[arg(long, value_enum, default_value = "all")]
    pub proof: ProofKind,
    /// Memory challenge: items of 128 bytes in the data set [default: 90 % of the claimed
    /// model's memory].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=(1u64 << 34)))]
    pub items: Option<u64>,
    /// Memory challenge: walkers, a multiple of 64 [default: 0.5 s of the claimed model's
    /// walk].
    #[arg(long, value_parser = clap::value_parser!(u64).range(64..=(1u64 << 36)))]
    pub walkers: Option<u64>,
    /// Memory challenge: random steps per walker, each reading 16 consecutive items
    /// [default: 4].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub steps: Option<u32>,
}

/// Which proofs `pog prove` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProofKind {
    /// The GEMM challenge only (compute).
    Gemm,
    /// The memory challenge only (capacity and bandwidth).
    Memory,
    /// Both, one after the other.
    All,
}

/// Which prover `pog agent` computes challenges with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProverKind {
    /// The GPU when CUDA works, else the CPU.
    Auto,
    Gpu,
    /// Small challenges only (tests, hosts without CUDA).
    Cpu,
}

impl From<ProverKind> for pog_local::hostproof::ProverChoice {
    fn from(kind: ProverKind) -> Self {
        match kind {
            ProverKind::Auto => Self::Auto,
            ProverKind::Gpu => Self::Gpu,
            ProverKind::Cpu => Self::Cpu,
        }
    }
}

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
}

/// What `pog validator` serves and how it challenges.
#[derive(Debug, Args, Clone)]
pub struct ValidatorArgs {
    /// Address to listen on: host:port, the host a name or an address.
    #[arg(long, default_value = "127.0.0.1:7071", value_name = "HOST:PORT")]
    pub listen: String,
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
    #[command(flatten)]
    pub market: crate::commands::market::ClearArgs,
    /// Seconds between two looks at the ledger (DATA_DIR/ledger): whenever it grew, a
    /// checkpoint is signed and sent to the --witness URLs.
    #[arg(long, default_value = "10", value_parser = parse_seconds, value_name = "SECONDS")]
    pub checkpoint_every: Duration,
    /// A witness (c2sp.org/tlog-witness, e.g. `pog witness serve`) by URL prefix: each new
    /// checkpoint is sent to PREFIX/add-checkpoint and its cosignature kept; repeatable.
    #[arg(long = "witness", value_name = "URL")]
    pub witnesses: Vec<String>,
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
    /// is retried at the next look.
    #[arg(long, default_value = "60", value_parser = parse_seconds, value_name = "SECONDS")]
    pub anchor_every: Duration,
}

/// An Ed25519 public key as 64 hex digits, refused if it is malformed or weak.
fn parse_key(s: &str) -> Result<PublicKey, String> {
    PublicKey::parse(s).map_err(|e| format!("{s:?} is not a usable validator key: {e}"))
}

fn parse_sustained(s: &str) -> Result<f64, String> {
    let secs: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !(0.0..=86_400.0).contains(&secs) {
        return Err(format!("{secs} s is outside 0-86400 s"));
    }
    Ok(secs)
}

/// A time bound: up to a day, in milliseconds.
fn parse_milliseconds(s: &str) -> Result<f64, String> {
    let ms: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of milliseconds"))?;
    if !(ms > 0.0 && ms <= 86_400_000.0) {
        return Err(format!("{ms} ms is outside 0-86400000 ms"));
    }
    Ok(ms)
}

pub(crate) fn parse_seconds(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !(0.1..=3600.0).contains(&secs) {
        return Err(format!("{secs} s is outside 0.1-3600 s"));
    }
    Ok(Duration::from_secs_f64(secs))
}
