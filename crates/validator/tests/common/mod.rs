//! What the node's integration tests share: a test policy, and one harness that serves a
//! validator on loopback (with its ledger, market and pricing as a test asks) and starts agents,
//! honest or misbehaving, registered with it.
//!
//! ```ignore
//! let h = Harness::new().with_ledger(dir).with_pricing().serve().await;
//! let agent = h.agent(7, vec![claim("GPU-a")]).cheating(Cheat::ReplayFirst).await;
//! assert_eq!(agent.status(), 200);
//! h.v.challenge::<Gemm>("GPU-a", &policy()).await?;
//! ```

#![allow(dead_code)] // each test file uses its own share of these

use pog_agent::misbehaviour::Cheat;
use pog_agent::watch::Watch;
use pog_local::provers::CpuEngine;
use pog_net::clock::{SharedClock, SystemClock};
use pog_net::serve::Limits;
use pog_proof::prover::Behaviour;
use pog_proof::wire::{kind, GpuClaim, Register};
use pog_records::{PlanKind, Policy};
use pog_signed::{Envelope, Identity, PublicKey, RecordKind};
use pog_spec::Precision;
use pog_validator::ledger::ValidatorLedger;
use pog_validator::market::{Market, MarketLimits};
use pog_validator::pricing::Pricing;
use pog_validator::registry::Registry;
use pog_validator::standing::RegistryStanding;
use pog_validator::store::RecordStore;
use pog_validator::validator::{Config, Validator};
use std::future::{Future, IntoFuture};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

pub const VALIDATOR_SEED: [u8; 32] = [1; 32];

pub fn policy() -> Policy {
    Policy {
        plan: PlanKind::Test,
        precision: Some(Precision::Int8),
        size: 32,
        batch: 2,
        leaf_elements: None,
        expected_ms: 2_000.0,
        samples: 256,
        expiry_ms: 10_000,
        memory: pog_records::MemoryPolicy::off(),
        cpu: pog_records::CpuPolicy::test_shape(),
        ram: pog_records::RamPolicy::test_shape(),
        lease_check: false,
        storage: pog_records::StoragePolicy::test_shape(),
    }
}

/// A validator's configuration for loopback tests: agents listen on 127.0.0.1.
pub fn loopback() -> Config {
    Config {
        allow_private_endpoints: true,
        ..Config::default()
    }
}

pub fn claim(uuid: &str) -> GpuClaim {
    GpuClaim {
        uuid: uuid.parse().expect("a GPU UUID"),
        model: "H200 SXM".into(),
        bus_id: "0000:00:06.0".into(),
        simulated: false,
    }
}

/// The public key of the validator of [`VALIDATOR_SEED`], which agents trust by default.
pub fn validator_key() -> PublicKey {
    Identity::from_seed(VALIDATOR_SEED).public_key()
}

pub async fn listen() -> (tokio::net::TcpListener, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    (listener, url)
}

/// Where the validator's ledger comes from.
enum LedgerOf {
    /// Opened (created) in this directory.
    Dir(PathBuf),
    /// Made by the test (filled beforehand, read-only, with a witness deadline, …).
    Given(Arc<ValidatorLedger>),
}

/// Whether the pricing takes records in by itself.
#[derive(Clone, Copy, PartialEq)]
enum PricingRun {
    Off,
    Running,
    ByHand,
}

/// A validator to serve on loopback, built up: by default the key of [`VALIDATOR_SEED`],
/// [`loopback`]'s configuration, [`Limits::small_requests`], its registry in memory, and no
/// ledger, market or pricing. [`Harness::serve`] serves its whole API ([`pog_validator::app::Api`]).
pub struct Harness {
    seed: [u8; 32],
    config: Config,
    limits: Limits,
    database: Option<String>,
    dir: Option<PathBuf>,
    registry: Option<PathBuf>,
    ledger: Option<LedgerOf>,
    market: Option<Option<PathBuf>>,
    market_limits: Option<MarketLimits>,
    deposits: Option<Arc<dyn pog_market::backing::Deposits + Send + Sync>>,
    settlements: Option<pog_market::settlement::SettlementRules>,
    vouchers: Option<Arc<dyn pog_validator::settlement::EscrowPayments>>,
    pricing: PricingRun,
    /// The scores' and prices' configuration (the embedded one unless a test sets another).
    market_config: Option<pog_market::Config>,
    clock: SharedClock,
    /// Whether the test gave the clock (a market beside a PostgreSQL registry would go by the
    /// database's clock instead: it is kept in memory then).
    manual_clock: bool,
}

impl Default for Harness {
    fn default() -> Harness {
        Harness::new()
    }
}

impl Harness {
    pub fn new() -> Harness {
        Harness {
            seed: VALIDATOR_SEED,
            config: loopback(),
            limits: Limits::small_requests(),
            database: None,
            dir: None,
            registry: None,
            ledger: None,
            market: None,
            market_limits: None,
            deposits: None,
            settlements: None,
            vouchers: None,
            pricing: PricingRun::Off,
            market_config: None,
            clock: SystemClock::shared(),
            manual_clock: false,
        }
    }

    /// Its records, schedule, health windows and market on `clock` (a
    /// [`pog_net::clock::ManualClock`] the test moves) instead of the system clock.
    pub fn clock(mut self, clock: SharedClock) -> Harness {
        self.clock = clock;
        self.manual_clock = true;
        self
    }

    /// The validator's key from `seed` (another validator than the agents trust by default).
    pub fn key(mut self, seed: [u8; 32]) -> Harness {
        self.seed = seed;
        self
    }

    /// What the validator allows.
    pub fn config(mut self, config: Config) -> Harness {
        self.config = config;
        self
    }

    /// The caps of its HTTP server.
    pub fn limits(mut self, limits: Limits) -> Harness {
        self.limits = limits;
        self
    }

    /// Its registry, and its market if it has one, stored in `dir` as `pog validator` lays
    /// them out (`registry.sqlite`, `market.sqlite`).
    pub fn stored_in(mut self, dir: &Path) -> Harness {
        self.dir = Some(dir.to_path_buf());
        self
    }

    /// Its registry and records in the PostgreSQL database at `url`, shared with the other
    /// validators of a test's fleet.
    pub fn on_database(mut self, url: &str) -> Harness {
        self.database = Some(url.to_string());
        self
    }

    /// Its registry stored in the file `path`.
    pub fn with_registry_at(mut self, path: &Path) -> Harness {
        self.registry = Some(path.to_path_buf());
        self
    }

    /// Its ledger opened (created) in `dir`: every record is logged before it is stored.
    pub fn with_ledger(mut self, dir: &Path) -> Harness {
        self.ledger = Some(LedgerOf::Dir(dir.to_path_buf()));
        self
    }

    /// The ledger `ledger`, made by the test.
    pub fn with_ledger_of(mut self, ledger: Arc<ValidatorLedger>) -> Harness {
        self.ledger = Some(LedgerOf::Given(ledger));
        self
    }

    /// An order book (`/v1/market/*`), in memory unless [`Harness::stored_in`] says where.
    pub fn with_market(mut self) -> Harness {
        self.market.get_or_insert(None);
        self
    }

    /// An order book stored in the file `path`.
    pub fn with_market_at(mut self, path: &Path) -> Harness {
        self.market = Some(Some(path.to_path_buf()));
        self
    }

    /// Bids backed by `deposits` (with a market).
    pub fn with_deposits(
        mut self,
        deposits: Arc<dyn pog_market::backing::Deposits + Send + Sync>,
    ) -> Harness {
        self.deposits = Some(deposits);
        self
    }

    /// Its leases settled by `rules` (with a market; the settlements in memory): what a lease
    /// holds counts against its renter's bids, and `/v1/market/settlements` serves them.
    pub fn with_settlements(mut self, rules: pog_market::settlement::SettlementRules) -> Harness {
        self.settlements = Some(rules);
        self.with_market()
    }

    /// Withdrawal vouchers signed by `escrow` (with a market and deposits).
    pub fn with_vouchers(
        mut self,
        escrow: Arc<dyn pog_validator::settlement::EscrowPayments>,
    ) -> Harness {
        self.vouchers = Some(escrow);
        self.with_market()
    }

    /// The order book's caps (with a market).
    pub fn market_limits(mut self, limits: MarketLimits) -> Harness {
        self.market_limits = Some(limits);
        self
    }

    /// Scores and prices (`/v1/scores`, `/v1/prices/…`) over the market (one in memory if none
    /// was asked for), the pricing taking every record in as it is stored, until the served
    /// validator is dropped.
    pub fn with_pricing(mut self) -> Harness {
        self.pricing = PricingRun::Running;
        self.with_market()
    }

    /// [`Harness::with_pricing`], but nothing takes records in until the test calls
    /// [`Pricing::catch_up`].
    pub fn with_pricing_by_hand(mut self) -> Harness {
        self.pricing = PricingRun::ByHand;
        self.with_market()
    }

    /// Its pricing scoring and pricing by `config` instead of the embedded configuration
    /// (references a test host can reach).
    pub fn market_config(mut self, config: pog_market::Config) -> Harness {
        self.market_config = Some(config);
        self
    }

    /// Builds the validator and serves its API on a free loopback port.
    pub async fn serve(self) -> Served {
        let identity = Identity::from_seed(self.seed);
        let in_dir = |name: &str| self.dir.as_ref().map(|d| d.join(name));
        let registry_path = self.registry.clone().or_else(|| in_dir("registry.sqlite"));
        let registry = match &self.database {
            Some(url) => Registry::connect(url).unwrap(),
            None => registry(registry_path),
        };
        let mut records = RecordStore::new(Identity::from_seed(self.seed), registry)
            .with_clock(self.clock.clone());
        match self.ledger {
            Some(LedgerOf::Dir(dir)) => {
                let ledger = ValidatorLedger::open(&dir, &identity, None).unwrap();
                records = records.with_ledger(Arc::new(ledger));
            }
            Some(LedgerOf::Given(ledger)) => records = records.with_ledger(ledger),
            None => {}
        }
        let v = Arc::new(Validator::over(Arc::new(records), self.config).unwrap());
        let market = self.market.map(|path| {
            // A market given no file is kept beside the registry: in memory, or in the
            // registry's PostgreSQL database (POG_TEST_STORE=postgres, or a fleet's), unless
            // it goes by the test's clock (a fleet's book goes by the database's).
            let path = path.or_else(|| in_dir("market.sqlite"));
            let key = identity.public_key();
            let mut market = match &path {
                Some(path) => Market::open(Some(path), &key),
                None if self.manual_clock => Market::open(None, &key),
                None => Market::open_beside(&v.records().registry(), None, &key),
            }
            .unwrap()
            .with_signer(Identity::from_seed(identity.seed()))
            .with_clock(self.clock.clone())
            .with_standing(Arc::new(RegistryStanding::new(v.records().clone())));
            if let Some(limits) = self.market_limits {
                market = market.with_limits(limits);
            }
            if let Some(deposits) = self.deposits.clone() {
                market = market.with_deposits(deposits);
            }
            if let Some(escrow) = self.vouchers.clone() {
                market = market.with_vouchers(escrow);
            }
            if let Some(rules) = self.settlements {
                market = market.with_settlements(Arc::new(
                    pog_validator::settlement::Settlements::open_beside(
                        &v.records().registry(),
                        None,
                        rules,
                    )
                    .unwrap(),
                ));
            }
            Arc::new(market)
        });
        let pricing = match (self.pricing, &market) {
            (PricingRun::Off, _) | (_, None) => None,
            (_, Some(market)) => Some(Pricing::new(
                v.records().clone(),
                market.clone(),
                self.market_config
                    .clone()
                    .unwrap_or_else(pog_market::Config::embedded),
            )),
        };
        // The pricing runs until the served validator is dropped (its sender with it).
        let pricing_stop = match (&pricing, self.pricing) {
            (Some(pricing), PricingRun::Running) => {
                let (stop, stopped) = tokio::sync::watch::channel(false);
                tokio::spawn(pricing.clone().run(stopped));
                Some(stop)
            }
            _ => None,
        };
        let mut api = pog_validator::app::Api::of(v.clone());
        if let Some(market) = &market {
            api = api.with_market(market.clone());
        }
        if let Some(pricing) = &pricing {
            api = api.with_pricing(pricing.clone());
        }
        let (listener, url) = listen().await;
        tokio::spawn(pog_net::http::serve(listener, api.router(), self.limits));
        Served {
            v,
            url,
            market,
            pricing,
            _pricing_stop: pricing_stop,
        }
    }
}

/// A validator served on loopback: it, its URL, and its market and pricing if it has them.
pub struct Served {
    pub v: Arc<Validator>,
    pub url: String,
    pub market: Option<Arc<Market>>,
    pub pricing: Option<Arc<Pricing>>,
    _pricing_stop: Option<tokio::sync::watch::Sender<bool>>,
}

impl Served {
    /// The address it listens on.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.url.trim_start_matches("http://").parse().unwrap()
    }

    /// Its order book.
    pub fn market(&self) -> &Arc<Market> {
        self.market.as_ref().expect("a validator with a market")
    }

    /// Its pricing.
    pub fn pricing(&self) -> &Arc<Pricing> {
        self.pricing.as_ref().expect("a validator with a pricing")
    }

    /// An agent with the key of `[seed; 32]` serving `gpus`, trusting this validator and
    /// registered with it once started (`.await`).
    pub fn agent(&self, seed: u8, gpus: Vec<GpuClaim>) -> AgentSpec {
        AgentSpec {
            register_at: Some(self.url.clone()),
            trusted: vec![self.v.public_key()],
            ..agent(seed, gpus)
        }
    }
}

/// An agent with the key of `[seed; 32]` serving `gpus`, honest, trusting the validator of
/// [`VALIDATOR_SEED`], registered nowhere: [`AgentSpec::serve`] starts it.
pub fn agent(seed: u8, gpus: Vec<GpuClaim>) -> AgentSpec {
    AgentSpec {
        seed,
        gpus,
        behaviour: Behaviour::Honest,
        cheat: None,
        trusted: vec![validator_key()],
        host: None,
        watch: None,
        hold: None,
        device: None,
        routed: None,
        register_at: None,
        clock: None,
        storage: None,
        ram: None,
    }
}

type Reroute = Box<dyn FnOnce(axum::Router) -> axum::Router + Send>;

/// An agent to start on loopback (pog_agent's `Agent` over the CPU prover), built up.
pub struct AgentSpec {
    seed: u8,
    gpus: Vec<GpuClaim>,
    behaviour: Behaviour,
    cheat: Option<Cheat>,
    trusted: Vec<PublicKey>,
    watch: Option<Arc<Watch>>,
    hold: Option<Duration>,
    device: Option<Arc<tokio::sync::Mutex<()>>>,
    routed: Option<Reroute>,
    register_at: Option<String>,
    clock: Option<SharedClock>,
    host: Option<pog_proof::wire::HostClaim>,
    storage: Option<pog_agent::storage::HostStorage>,
    ram: Option<u64>,
}

impl AgentSpec {
    /// Its prover answers as `behaviour` says (junk, a lower precision, …).
    pub fn behaving(mut self, behaviour: Behaviour) -> AgentSpec {
        self.behaviour = behaviour;
        self
    }

    /// It claims `cores` hardware threads for its host when it registers (its rounds then
    /// prove its CPU).
    pub fn claiming_cores(mut self, cores: u32) -> AgentSpec {
        self.host = Some(pog_proof::wire::HostClaim {
            cores,
            token_owner: None,
            storage: None,
            ram: None,
        });
        self
    }

    /// It proves `holds` bytes of its host's RAM (`Agent::with_ram`; none: it claims no RAM
    /// itself) and claims `claims` at registration, with one hardware thread: the same when
    /// honest.
    pub fn proving_ram(mut self, holds: Option<u64>, claims: u64) -> AgentSpec {
        self.host = Some(pog_proof::wire::HostClaim {
            cores: 1,
            token_owner: None,
            storage: None,
            ram: Some(claims),
        });
        self.ram = holds;
        self
    }

    /// It proves `storage` (a directory of the test's), claiming `claim` for its host at
    /// registration with one hardware thread: `storage.claim()` when honest, more when it
    /// claims more than it holds.
    pub fn proving_storage(
        mut self,
        storage: pog_agent::storage::HostStorage,
        claim: pog_proof::storage::StorageClaim,
    ) -> AgentSpec {
        self.host = Some(pog_proof::wire::HostClaim {
            cores: 1,
            token_owner: None,
            storage: Some(claim),
            ram: None,
        });
        self.storage = Some(storage);
        self
    }

    /// Its host names `owner` (an EVM address) for its GPUs' tokens and lease payments, and
    /// claims two hardware threads.
    pub fn paid_to(mut self, owner: pog_signed::EvmAddress) -> AgentSpec {
        self.host = Some(pog_proof::wire::HostClaim {
            cores: 2,
            token_owner: Some(owner),
            storage: None,
            ram: None,
        });
        self
    }

    /// It cheats as `cheat` says (pog_agent's test doubles).
    pub fn cheating(mut self, cheat: Cheat) -> AgentSpec {
        self.cheat = Some(cheat);
        self
    }

    /// It trusts the validators `keys` (instead of the one it registers with).
    pub fn trusting(mut self, keys: Vec<PublicKey>) -> AgentSpec {
        self.trusted = keys;
        self
    }

    /// It answers health requests from `watch`, and serves its metrics on the API's port.
    pub fn watching(mut self, watch: Arc<Watch>) -> AgentSpec {
        self.watch = Some(watch);
        self
    }

    /// It holds a data set unwalked, or a commitment unopened, for `hold`.
    pub fn holding_memory_for(mut self, hold: Duration) -> AgentSpec {
        self.hold = Some(hold);
        self
    }

    /// Its `Cheat::OneDevice` is the same device as other agents'.
    pub fn sharing_device(mut self, device: Arc<tokio::sync::Mutex<()>>) -> AgentSpec {
        self.device = Some(device);
        self
    }

    /// It judges expiries and health requests by `clock` instead of the system clock.
    pub fn on_clock(mut self, clock: SharedClock) -> AgentSpec {
        self.clock = Some(clock);
        self
    }

    /// Its router changed by `reroute` (a middleware in front of its API).
    pub fn routed(
        mut self,
        reroute: impl FnOnce(axum::Router) -> axum::Router + Send + 'static,
    ) -> AgentSpec {
        self.routed = Some(Box::new(reroute));
        self
    }

    /// Serves the agent on loopback and, when it came from [`Served::agent`], registers it
    /// (one signed registration of its endpoint and GPUs).
    pub async fn serve(self) -> TestAgent {
        let key = Identity::from_seed([self.seed; 32]);
        let mut agent = pog_agent::agent::Agent::new(
            Identity::from_seed([self.seed; 32]),
            self.trusted,
            self.gpus.clone(),
            Arc::new(CpuEngine {
                behaviour: Behaviour::Honest,
            }),
        )
        .misbehaving(self.behaviour, self.cheat);
        if let Some(device) = self.device {
            agent = agent.sharing_device(device);
        }
        if let Some(watch) = self.watch {
            agent = agent.watching(watch, true);
        }
        if let Some(hold) = self.hold {
            agent = agent.holding_memory_for(hold);
        }
        if let Some(clock) = self.clock {
            agent = agent.with_clock(clock);
        }
        if let Some(storage) = self.storage {
            agent = agent.with_storage(storage);
        }
        if let Some(bytes) = self.ram {
            agent = agent.with_ram(bytes);
        }
        assert_eq!(agent.public_key(), key.public_key());
        let mut router = pog_agent::api::router(Arc::new(agent));
        if let Some(reroute) = self.routed {
            router = reroute(router);
        }
        let (listener, url) = listen().await;
        // Stopped when told to; a dropped handle leaves it serving until the test ends.
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(pog_net::serve::serve(
            listener,
            router,
            Limits::protocol_messages(),
            async {
                if stopped.await.is_err() {
                    std::future::pending::<()>().await;
                }
            },
            Duration::from_secs(1),
        ));
        let status = match self.register_at {
            Some(validator_url) => {
                let register = Register {
                    endpoint: url.clone(),
                    gpus: self.gpus,
                    host: self.host,
                };
                let response = reqwest::Client::new()
                    .post(format!("{validator_url}/v1/register"))
                    .json(&key.seal(kind::REGISTER, &register).unwrap())
                    .send()
                    .await
                    .unwrap();
                Some(response.status().as_u16())
            }
            None => None,
        };
        TestAgent {
            url,
            status,
            stop: Some(stop),
        }
    }
}

impl IntoFuture for AgentSpec {
    type Output = TestAgent;
    type IntoFuture = Pin<Box<dyn Future<Output = TestAgent> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.serve())
    }
}

/// An agent serving on loopback.
pub struct TestAgent {
    /// Its URL.
    pub url: String,
    status: Option<u16>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl TestAgent {
    /// The HTTP status its registration was answered with.
    pub fn status(&self) -> u16 {
        self.status.expect("an agent registered with a validator")
    }

    /// Stops it: its listener and connections closed, as an agent that went away.
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// A raw TCP connection to `addr` from the loopback address `from` (127.0.0.0/8 is all
/// loopback on Linux: distinct sources without a network), with a receive buffer of
/// `recv_buffer` bytes when given (so the kernel takes little of what is sent to it).
pub fn connect_from(
    rt: &tokio::runtime::Runtime,
    from: [u8; 4],
    addr: std::net::SocketAddr,
    recv_buffer: Option<u32>,
) -> std::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    if let Some(bytes) = recv_buffer {
        socket.set_recv_buffer_size(bytes).unwrap();
    }
    socket
        .bind((std::net::Ipv4Addr::from(from), 0).into())
        .unwrap();
    let stream = rt
        .block_on(socket.connect(addr))
        .unwrap()
        .into_std()
        .unwrap();
    stream.set_nonblocking(false).unwrap();
    stream
}

/// A test validator's registry: in the SQLite file `path`, or where none is given, in memory
/// or, with `POG_TEST_STORE=postgres` (`scripts/test.sh` runs the suite so once more), in a
/// database of its own on the test PostgreSQL server.
pub fn registry(path: Option<PathBuf>) -> Registry {
    if path.is_none() && std::env::var("POG_TEST_STORE").as_deref() == Ok("postgres") {
        let url = pog_validator::postgres::testing::fresh_postgres_database()
            .expect("POG_TEST_STORE=postgres needs POG_TEST_POSTGRES_URL");
        return Registry::connect(&url).unwrap();
    }
    Registry::open(path.as_deref()).unwrap()
}

/// Posts a registration of `gpus` at `endpoint`, signed by `key`; returns the HTTP status and
/// the body.
pub async fn register(
    vurl: &str,
    key: &Identity,
    endpoint: &str,
    gpus: Vec<GpuClaim>,
) -> (u16, String) {
    let envelope = key
        .seal(
            kind::REGISTER,
            &Register {
                endpoint: endpoint.into(),
                gpus,
                host: None,
            },
        )
        .unwrap();
    post_envelope(vurl, &envelope).await
}

/// Posts a signed registration envelope; returns the HTTP status and the body.
pub async fn post_envelope(vurl: &str, envelope: &pog_signed::Envelope) -> (u16, String) {
    let r = reqwest::Client::new()
        .post(format!("{vurl}/v1/register"))
        .json(envelope)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// Every record of a GPU, from the API.
pub async fn records_of(vurl: &str, uuid: &str) -> Vec<serde_json::Value> {
    let page: pog_validator::validator::RecordPage =
        reqwest::get(format!("{vurl}/v1/records/{uuid}?limit=1000"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    page.records.into_iter().map(|r| r.record).collect()
}

/// Stores, signed by the validator's key, a copy of a real record of `uuid` changed by
/// `edit`: what a per-model challenge of a real H200 stores (a loopback agent proves on the
/// CPU under the test plan, whose records prove no model).
pub fn store_edited(v: &Validator, uuid: &str, edit: impl FnOnce(&mut serde_json::Value)) {
    let envelope = v
        .registry()
        .latest_records(uuid, 16)
        .unwrap()
        .into_iter()
        .rev()
        .map(|(_, json)| serde_json::from_str::<Envelope>(&json).unwrap())
        .find(|e| e.kind == RecordKind::ProofRound.wire_kind())
        .expect("a proof record");
    let mut body: serde_json::Value = serde_json::from_str(&envelope.body).unwrap();
    edit(&mut body);
    let id = format!("edited-{uuid}-{}", body["recorded_at_ms"]);
    body["challenge_id"] = id.clone().into();
    let accepted = body["accepted"].as_bool().unwrap();
    let sealed = Identity::from_seed(VALIDATOR_SEED)
        .seal(RecordKind::ProofRound.wire_kind(), &body)
        .unwrap();
    v.registry()
        .record(
            &id,
            uuid,
            accepted,
            &serde_json::to_string(&sealed).unwrap(),
        )
        .unwrap();
}

/// Makes `uuid`'s latest proof record prove its model: a copy of it, re-signed by the
/// validator, with `proves_model` set (see [`store_edited`]).
pub fn prove_model(v: &Validator, uuid: &str) {
    store_edited(v, uuid, |r| {
        r["proves_model"] = true.into();
        r["recorded_at_ms"] = (r["recorded_at_ms"].as_u64().unwrap() + 1).into();
    });
}

/// A provider at `h` whose GPUs back asks (issue 25): an agent with the key of `[seed; 32]`
/// registered holding the H200s `uuids`, each challenged once for real under the test plan,
/// then given a copy of that record made to prove its model ([`prove_model`]). Its asks are
/// signed by `Identity::from_seed([seed; 32])`. Keep the agent returned while it must answer.
pub async fn proven_provider(h: &Served, seed: u8, uuids: &[&str]) -> TestAgent {
    let agent = h
        .agent(seed, uuids.iter().map(|u| claim(u)).collect())
        .await;
    assert_eq!(agent.status(), 200, "the provider's registration");
    for uuid in uuids {
        h.v.challenge::<pog_records::Gemm>(uuid, &policy())
            .await
            .expect("a proof exchange");
        prove_model(&h.v, uuid);
    }
    agent
}

/// An ask `id` of `owner` for `quantity` GPU-hours of H200 at `usd` per GPU-hour, offering
/// `gpus`.
pub fn ask(
    id: &str,
    owner: &Identity,
    quantity: u64,
    usd: f64,
    gpus: &[&str],
) -> pog_market::Order {
    pog_market::Order::new(
        pog_market::OrderId::new(id).unwrap(),
        owner.public_key(),
        pog_market::Side::Ask,
        pog_market::GpuClass::new("H200 SXM").unwrap(),
        quantity,
        pog_market::Price::from_usd(usd).unwrap(),
    )
    .unwrap()
    .offering(gpus.iter().map(|g| g.parse().unwrap()).collect())
    .unwrap()
}
