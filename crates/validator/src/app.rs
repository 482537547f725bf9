//! The whole validator service, built in one place. [`Api`] composes every route the
//! validator serves; [`Settings`] says where its data lives and how often to do what;
//! [`ValidatorApp`] opens the key and the stores, then [`ValidatorApp::run`] starts the
//! background work (the schedule's rounds, the pricing, the clearings, the checkpoints, and one
//! task of the caller's such as the chain anchor), serves until the stop signal, and drains in
//! order. `pog validator` is this type with its flags; the tests build the same [`Api`].

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use pog_market::Mechanism;
use pog_net::clock::{SharedClock, SystemClock};
use pog_net::serve::Limits;
use pog_signed::{Identity, PublicKey};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::ledger::{LedgerError, ValidatorLedger};
use crate::market::{Market, MarketError, MarketLimits};
use crate::pricing::Pricing;
use crate::registry::{Registry, RegistryError};
use crate::reports::ReportDesk;
use crate::schedule::Schedule;
use crate::store::RecordStore;
use crate::validator::{Config, Validator, ValidatorError};

/// Every route of a validator, composed here and nowhere else: the challenger's
/// ([`crate::validator::router`]), the reports' intake ([`crate::reports::router`]), the
/// ledger's tiles ([`crate::ledger::router`]), and with a market its book
/// ([`crate::market::router`]) and the scores and prices ([`crate::pricing::router`]).
pub struct Api {
    validator: Arc<Validator>,
    reports: Arc<ReportDesk>,
    market: Option<Arc<Market>>,
    pricing: Option<Arc<Pricing>>,
}

impl Api {
    /// The API of `validator` without a market: its report budgets from its [`Config`].
    pub fn of(validator: Arc<Validator>) -> Api {
        let config = validator.config();
        let reports = Arc::new(ReportDesk::new(
            config.report_kib_per_gpu_per_hour,
            config.report_kib_per_source_per_hour,
        ));
        Api {
            validator,
            reports,
            market: None,
            pricing: None,
        }
    }

    /// This API with the order book `market` (`/v1/market/*`).
    pub fn with_market(mut self, market: Arc<Market>) -> Api {
        self.market = Some(market);
        self
    }

    /// This API with the scores and prices of `pricing` (`/v1/scores`, `/v1/prices/…`).
    pub fn with_pricing(mut self, pricing: Arc<Pricing>) -> Api {
        self.pricing = Some(pricing);
        self
    }

    /// The router serving all of it.
    pub fn router(&self) -> Router {
        let records = self.validator.records();
        let mut router = crate::validator::router(self.validator.clone())
            .merge(crate::reports::router(
                records.clone(),
                self.reports.clone(),
            ))
            .merge(crate::ledger::router(records.ledger().cloned()))
            .merge(crate::overview::router(self.validator.clone()));
        if let Some(market) = &self.market {
            router = router.merge(crate::market::router(market.clone()));
        }
        if let Some(pricing) = &self.pricing {
            router = router.merge(crate::pricing::router(pricing.clone()));
        }
        router
    }
}

/// The validator's leases signed into its ledger, one record per GPU leased.
struct LedgerLeases(Arc<crate::store::RecordStore>);

impl crate::market::LeaseSink for LedgerLeases {
    fn leased(
        &self,
        class: &pog_market::GpuClass,
        leases: &[pog_market::lease::Lease],
        maybe_taken: bool,
    ) -> Result<(), String> {
        for l in leases {
            if maybe_taken && self.logged(l)? {
                continue;
            }
            let key = |hex: &str| {
                pog_signed::PublicKey::try_from(hex.to_string()).map_err(|e| e.to_string())
            };
            let record = pog_records::LeaseRecord {
                version: pog_records::lease::LEASE_VERSION,
                lease_id: l.id.clone(),
                gpu_uuid: l.gpu.clone(),
                class: class.to_string(),
                renter: key(&l.renter)?,
                provider: key(&l.provider)?,
                start_ms: l.start_ms,
                end_ms: l.end_ms,
                hours: l.hours,
                price_micro_usd: l.price_micro_usd,
                recorded_at_ms: self.0.now_ms(),
            };
            self.0.log(&record).map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

impl LedgerLeases {
    /// Whether the lease's record is in its GPU's recent history already (the last
    /// [`LEASE_CHECK_STEPS`] entries of the GPU).
    fn logged(&self, lease: &pog_market::lease::Lease) -> Result<bool, String> {
        let Some(ledger) = self.0.ledger() else {
            return Ok(false);
        };
        // In a fleet, another validator may have logged it: the tree here catches up first.
        ledger.catch_up(None).map_err(|e| e.to_string())?;
        let logged = ledger
            .ledger()
            .gpu_recent(
                lease.gpu.as_str(),
                &[pog_signed::RecordKind::Lease],
                usize::MAX,
                LEASE_CHECK_STEPS,
            )
            .map_err(|e| e.to_string())?;
        Ok(logged.iter().any(|(_, e)| {
            serde_json::from_str::<pog_records::LeaseRecord>(&e.body)
                .is_ok_and(|r| r.lease_id == lease.id)
        }))
    }
}

/// How far back in a GPU's history a lease record is looked for after a restart (the crash it
/// follows came right after the clearing; the validator's rounds since add a few entries).
const LEASE_CHECK_STEPS: usize = 4096;

/// What a validator runs with.
pub struct Settings {
    /// Where its key (`validator.key`), registry, market and ledger live.
    pub data_dir: PathBuf,
    /// What it allows (simulated GPUs, private endpoints, the rate limits).
    pub config: Config,
    /// Its rounds: how often, under which policy, how many at once, when to release a GPU.
    pub schedule: Schedule,
    /// The caps of its HTTP server.
    pub limits: Limits,
    /// The caps of its order book.
    pub market: MarketLimits,
    /// How often the book is cleared and by which auction; `None`: only when asked.
    pub clearing: Option<(Duration, Mechanism)>,
    /// How often a checkpoint is signed when the log grew.
    pub checkpoint_every: Duration,
    /// The witnesses each checkpoint is sent to for a cosignature, each with its key.
    pub witnesses: Vec<crate::ledger::WitnessTarget>,
    /// Cosignatures a checkpoint needs before it is published (stored as the latest, served,
    /// exported, anchored); `None`: every witness's.
    pub witness_quorum: Option<usize>,
    /// Requests a minute to each witness, and the back-off after its failures.
    pub witness_budget: crate::ledger::WitnessBudget,
    /// The PostgreSQL database (`postgres://…`) its registry and records are kept in, shared
    /// with the fleet's other validators; `None`: `registry.sqlite` in the data dir.
    pub database: Option<String>,
    /// The key that signs the log's checkpoints, apart from the validator's own. A fleet
    /// (`database`) needs one, the same on every validator; alone, `None` signs with the
    /// validator's key.
    pub log_key: Option<LogKeySource>,
    /// Make this validator's log key the fleet's (`--rotate-log-key`: docs/ledger.md).
    pub rotate_log_key: bool,
    /// Make this validator's round length the fleet's (`--adopt-fleet-schedule`): a fleet's
    /// validators share their slots, and one with another `--challenge-every` is refused.
    pub adopt_fleet_schedule: bool,
    /// The escrow's deposits that back bids (`pog validator --escrow-contract`); `None`: bids
    /// are taken unbacked.
    pub deposits: Option<Arc<dyn pog_market::backing::Deposits + Send + Sync>>,
    /// How leases are settled for their proven hours, and how often the settler looks.
    pub settlement: (pog_market::settlement::SettlementRules, Duration),
    /// The escrow the settlements are signed for and paid through (`pog validator
    /// --escrow-key`); `None`: settlements are recorded only.
    pub escrow_payments: Option<Arc<dyn crate::settlement::EscrowPayments>>,
}

/// Where the log key comes from.
#[derive(Debug, Clone)]
pub enum LogKeySource {
    /// A key file (`--log-key-file`), created if missing (mode 0600).
    File(PathBuf),
    /// The key's 64 hex digits (`POG_LOG_KEY`, from a secret: Kubernetes makes a Secret's
    /// files group-readable, which a key file must not be).
    Hex(String),
}

impl LogKeySource {
    /// The key.
    fn load(&self) -> Result<Identity, AppError> {
        match self {
            LogKeySource::File(path) => {
                pog_net::keys::load_or_create(path).map_err(|cause| AppError::LogKey {
                    path: path.clone(),
                    cause,
                })
            }
            LogKeySource::Hex(hex) => hex::decode(hex.trim())
                .ok()
                .and_then(|b| <[u8; 32]>::try_from(b).ok())
                .map(Identity::from_seed)
                .ok_or(AppError::LogKeyHex),
        }
    }
}

/// Why the validator could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// The witness quorum exceeds the witnesses given.
    #[error("a witness quorum of {quorum} exceeds the {witnesses} witness(es) given")]
    Quorum {
        /// The quorum asked.
        quorum: usize,
        /// The witnesses given.
        witnesses: usize,
    },
    /// A fleet's validator was started without the fleet's log key.
    #[error(
        "a validator of a fleet (--database) signs the fleet's log with the fleet's log key: \
         give it --log-key-file (the same file on every validator of the fleet; the first \
         validator creates it) or POG_LOG_KEY"
    )]
    FleetWithoutLogKey,
    /// The log key could not be read or created.
    #[error("the log key {path}: {cause}")]
    LogKey {
        /// The key file.
        path: PathBuf,
        /// Why.
        cause: pog_net::keys::KeyError,
    },
    /// This validator's round length is not its fleet's.
    #[error(
        "this fleet's validators start their rounds every {fleet_ms} ms, this one every {ours_ms} \
         ms (--challenge-every): a fleet shares its slots (docs/protocol.md). Start it with \
         the fleet's --challenge-every, or make its length the fleet's with \
         --adopt-fleet-schedule and restart the others with it"
    )]
    FleetSchedule {
        /// The fleet's slot length, ms.
        fleet_ms: String,
        /// This validator's.
        ours_ms: u64,
    },
    /// `POG_LOG_KEY` is not a key.
    #[error("POG_LOG_KEY is not a pog key (64 hex digits)")]
    LogKeyHex,
    /// The fleet's log refused this validator (another fleet's log key, a tree of its own).
    #[error(transparent)]
    FleetLog(#[from] crate::fleet_log::FleetLogError),
    /// Two witnesses share a key.
    #[error(transparent)]
    Witnesses(#[from] crate::ledger::BadWitness),
    /// The key could not be read or made.
    #[error("the validator key {path}: {cause}")]
    Key {
        /// The key file.
        path: PathBuf,
        /// Why.
        cause: pog_net::keys::KeyError,
    },
    /// The registry could not be opened.
    #[error("opening {path}: {cause}")]
    Registry {
        /// The registry file.
        path: PathBuf,
        /// Why.
        cause: RegistryError,
    },
    /// The settlements' store could not be opened.
    #[error("opening {path}: {cause}")]
    Settlements {
        /// The store's file.
        path: PathBuf,
        /// Why.
        cause: crate::settlement::SettlementError,
    },
    /// The settlement rules are refused.
    #[error(transparent)]
    SettlementRules(#[from] pog_market::settlement::SettlementError),
    /// The market's store could not be opened.
    #[error("opening {path}: {cause}")]
    Market {
        /// The market's file, or its database's URL (without its password).
        path: PathBuf,
        /// Why.
        cause: MarketError,
    },
    /// The ledger could not be opened.
    #[error("opening the ledger in {path}: {cause}")]
    Ledger {
        /// The ledger's directory.
        path: PathBuf,
        /// Why.
        cause: LedgerError,
    },
    /// The policy or a hardened client is refused.
    #[error(transparent)]
    Validator(#[from] ValidatorError),
    /// The witnesses' hardened client could not be built.
    #[error(transparent)]
    Client(#[from] pog_net::http::BuildClientError),
    /// The schedule's runtime or thread could not be started.
    #[error("starting the schedule: {0}")]
    Schedule(std::io::Error),
    /// Serving failed.
    #[error("serving: {0}")]
    Serve(std::io::Error),
}

/// A background task of the caller's, started with the others and stopped after the last
/// checkpoint is signed (the chain anchor: its last look anchors the last checkpoint).
pub type AfterCheckpoints = Box<dyn FnOnce(watch::Receiver<bool>) -> JoinHandle<()> + Send>;

/// A validator, opened and ready to run.
pub struct ValidatorApp {
    settings: Settings,
    validator: Arc<Validator>,
    market: Arc<Market>,
    ledger: Arc<ValidatorLedger>,
    witness_client: reqwest::Client,
    /// The validator's key again, for the scheduled clearings it signs.
    clearer: Identity,
    /// What settles the leases.
    settler: Arc<crate::settlement::Settler>,
}

impl ValidatorApp {
    /// Opens (creating where needed) the key, the registry, the market and the ledger in
    /// `settings.data_dir`, and checks the policy and the hardened clients: whatever cannot
    /// be opened or built stops the validator here, before anything is served. Its records,
    /// schedule, health windows and market go by the system clock.
    pub fn open(settings: Settings) -> Result<ValidatorApp, AppError> {
        ValidatorApp::open_on(settings, SystemClock::shared())
    }

    /// [`ValidatorApp::open`] on `clock` instead of the system clock (a test's
    /// [`pog_net::clock::ManualClock`]): the records' stamps, the expiries, the release bars,
    /// the schedule's rounds, the health windows and the market's time all read it. The
    /// timings of an exchange do not: they are measured on the monotonic clock.
    pub fn open_on(settings: Settings, clock: SharedClock) -> Result<ValidatorApp, AppError> {
        settings
            .schedule
            .policy
            .validate()
            .map_err(ValidatorError::from)?;
        crate::ledger::WitnessTarget::check_distinct(&settings.witnesses)?;
        let quorum = settings.witness_quorum.unwrap_or(settings.witnesses.len());
        if quorum > settings.witnesses.len() {
            return Err(AppError::Quorum {
                quorum,
                witnesses: settings.witnesses.len(),
            });
        }
        let dir = &settings.data_dir;
        let key_path = dir.join("validator.key");
        let identity = pog_net::keys::load_or_create(&key_path).map_err(|cause| AppError::Key {
            path: key_path.clone(),
            cause,
        })?;
        // Where a store is kept, to name in an error: the database (its URL without the
        // password), or its file.
        let kept_at = |file: &PathBuf| match &settings.database {
            Some(url) => PathBuf::from(crate::postgres::redacted(url)),
            None => file.clone(),
        };
        let registry_path = dir.join("registry.sqlite");
        let mut registry = Registry::open_or_connect(settings.database.as_deref(), &registry_path)
            .map_err(|cause| AppError::Registry {
                path: kept_at(&registry_path),
                cause,
            })?;
        // A fleet's one book lives in its database; a validator alone keeps its own file.
        let market_path = dir.join("market.sqlite");
        let market = Market::open_beside(&registry, Some(&market_path), &identity.public_key())
            .map_err(|cause| AppError::Market {
                path: kept_at(&market_path),
                cause,
            })?
            .with_limits(settings.market)
            .with_clock(clock.clone());
        // Every record the validator signs goes into its transparency log first: its own, or
        // the fleet's (sequenced in the database, signed by the fleet's log key).
        let ledger_dir = dir.join("ledger");
        let ledger_error = |cause| AppError::Ledger {
            path: ledger_dir.clone(),
            cause,
        };
        let log_key = settings
            .log_key
            .as_ref()
            .map(LogKeySource::load)
            .transpose()?;
        // A fleet's validators share their slots: one round length for all.
        let every_ms = u64::try_from(settings.schedule.every.as_millis()).unwrap_or(u64::MAX);
        let other = registry
            .adopt_fleet_setting(
                "challenge_every_ms",
                &every_ms.to_string(),
                settings.adopt_fleet_schedule,
            )
            .map_err(|cause| AppError::Registry {
                path: registry_path.clone(),
                cause,
            })?;
        if let Some(fleet_ms) = other {
            return Err(AppError::FleetSchedule {
                fleet_ms,
                ours_ms: every_ms,
            });
        }
        let fleet_log = registry.fleet_log();
        let signer = match (&fleet_log, &log_key) {
            (Some(_), None) => return Err(AppError::FleetWithoutLogKey),
            (Some(db), Some(key)) => db.adopt_key(
                key.seed(),
                &crate::ledger::log_key_origin(&key.public_key()),
                settings.rotate_log_key,
            )?,
            (None, Some(key)) => {
                let name = crate::ledger::log_key_origin(&key.public_key());
                crate::ledger::log_signer(key, Some(&name)).map_err(ledger_error)?
            }
            (None, None) => crate::ledger::log_signer(&identity, None).map_err(ledger_error)?,
        };
        let ledger =
            pog_ledger::store::Ledger::open(&ledger_dir).map_err(|e| ledger_error(e.into()))?;
        let ledger = ValidatorLedger::new(ledger, signer)
            .with_quorum(quorum)
            .with_witness_budget(settings.witness_budget);
        let ledger = match fleet_log {
            // The log lease outlives two missed ticks.
            Some(db) => ledger
                .with_fleet(
                    db,
                    &identity.public_key(),
                    (settings.checkpoint_every * 3).max(Duration::from_secs(3)),
                )
                .map_err(ledger_error)?,
            None => ledger,
        };
        let ledger = Arc::new(ledger);
        let clearer = Identity::from_seed(identity.seed());
        let records = Arc::new(
            RecordStore::new(identity, registry)
                .with_ledger(ledger.clone())
                .with_clock(clock),
        );
        // Asks are backed by the GPUs of this registry (issue 25), whose proofs may be as old
        // as this schedule's rounds make them.
        let round_ms = u64::try_from(settings.schedule.every.as_millis()).unwrap_or(u64::MAX);
        let market = market
            .with_standing(Arc::new(crate::standing::RegistryStanding::new(
                records.clone(),
            )))
            .with_backing_rules(pog_market::BackingRules::for_rounds_every(round_ms));
        let market = match settings.deposits.clone() {
            Some(deposits) => market.with_deposits(deposits),
            None => market,
        };
        let (rules, _) = settings.settlement;
        rules.validate()?;
        let settlements_path = dir.join("settlements.sqlite");
        let settlements = Arc::new(
            crate::settlement::Settlements::open_beside(
                &records.registry(),
                Some(&settlements_path),
                rules,
            )
            .map_err(|cause| AppError::Settlements {
                path: kept_at(&settlements_path),
                cause,
            })?,
        );
        let market = match settings.escrow_payments.clone() {
            Some(escrow) => market.with_vouchers(escrow),
            None => market,
        };
        let market = market
            .with_lease_sink(Arc::new(LedgerLeases(records.clone())))
            .with_signer(Identity::from_seed(clearer.seed()))
            .with_settlements(settlements.clone());
        // Leases a crash or a failing ledger kept from the ledger, logged now.
        match market.hand_pending_leases(None) {
            Ok(0) => {}
            Ok(n) => tracing::info!("logged the leases of {n} earlier clearing(s)"),
            Err(e) => tracing::error!(error = %e, "logging earlier clearings' leases"),
        }
        let market = Arc::new(market);
        let settler = Arc::new(crate::settlement::Settler::new(
            market.clone(),
            records.clone(),
            settlements,
            settings.escrow_payments.clone(),
        ));
        let validator = Arc::new(Validator::over(records, settings.config.clone())?);
        Ok(ValidatorApp {
            validator,
            settler,
            market,
            ledger,
            witness_client: crate::ledger::witness_client()?,
            clearer,
            settings,
        })
    }

    /// The validator's public key (it signs its records and its log's checkpoints).
    pub fn public_key(&self) -> PublicKey {
        self.validator.public_key()
    }

    /// Where its registry is kept: the PostgreSQL database (its URL without a password), or
    /// its SQLite file.
    pub fn registry_place(&self) -> String {
        match &self.settings.database {
            Some(url) => crate::postgres::redacted(url),
            None => self.registry_path().display().to_string(),
        }
    }

    /// Its registry's file (unless it is kept on PostgreSQL).
    pub fn registry_path(&self) -> PathBuf {
        self.settings.data_dir.join("registry.sqlite")
    }

    /// Its ledger's directory.
    pub fn ledger_dir(&self) -> PathBuf {
        self.settings.data_dir.join("ledger")
    }

    /// Its ledger.
    pub fn ledger(&self) -> &Arc<ValidatorLedger> {
        &self.ledger
    }

    /// Runs the validator on `listener` until `stop_signal`: the pricing, the scheduled
    /// clearings, the checkpoints, `after_checkpoints` and the rounds start, the API is served
    /// (in-flight requests get 10 s to finish), then the rounds finish what is in flight, the
    /// pricing and the clearings stop, the checkpoints sign their last, and `after_checkpoints`
    /// is stopped last.
    pub async fn run(
        self,
        listener: tokio::net::TcpListener,
        stop_signal: impl Future<Output = ()>,
        after_checkpoints: Option<AfterCheckpoints>,
    ) -> Result<(), AppError> {
        let ValidatorApp {
            settings,
            validator,
            market,
            ledger,
            witness_client,
            clearer,
            settler,
        } = self;
        let (stop, stopped) = watch::channel(false);
        // Scores and prices from the validator's records, re-quoted as each record is stored.
        let pricing = Pricing::new(
            validator.records().clone(),
            market.clone(),
            pog_market::Config::embedded(),
        );
        let priced = tokio::spawn(pricing.clone().run(stopped.clone()));
        let settled = tokio::spawn(settler.run(settings.settlement.1, stopped.clone()));
        let cleared = settings.clearing.map(|(every, mechanism)| {
            tokio::spawn(crate::pricing::clear_on_schedule(
                market.clone(),
                clearer,
                every,
                mechanism,
                stopped.clone(),
            ))
        });
        // Stopped after the rounds, so that their last records get a checkpoint; the caller's
        // task after that, so that it sees the last checkpoint.
        let (checkpoint_stop, checkpoint_stopped) = watch::channel(false);
        let (after_stop, after_stopped) = watch::channel(false);
        let after = after_checkpoints.map(|start| start(after_stopped));
        let checkpoints = tokio::spawn(crate::ledger::checkpoint_on_schedule(
            ledger,
            settings.checkpoint_every,
            (witness_client, settings.witnesses.clone()),
            checkpoint_stopped,
        ));
        // The rounds run on a runtime of their own: a thousand challenges starting at once must
        // not queue the API's requests behind them (1000 GPUs on a 2-core machine: API p99
        // 190 ms on one shared runtime, 6 ms on two; docs/protocol.md, "Load").
        let rounds = {
            let rounds_rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("pog-rounds")
                .enable_all()
                .build()
                .map_err(AppError::Schedule)?;
            // A GPU under a lease of the market's is checked, not proven, in its rounds.
            let rounds =
                crate::schedule::Rounds::new(validator.clone(), settings.schedule, stopped)
                    .with_leases(market.clone());
            std::thread::Builder::new()
                .name("pog-schedule".into())
                .spawn(move || rounds_rt.block_on(crate::schedule::run(rounds)))
                .map_err(AppError::Schedule)?
        };
        let api = Api::of(validator).with_market(market).with_pricing(pricing);
        let served = pog_net::serve::serve(
            listener,
            api.router(),
            settings.limits,
            stop_signal,
            Duration::from_secs(10),
        )
        .await;
        tracing::info!("stopping: finishing the challenges in flight");
        let _ = stop.send(true);
        let _ = tokio::task::spawn_blocking(move || rounds.join()).await;
        let _ = priced.await;
        let _ = settled.await;
        let _ = checkpoint_stop.send(true);
        let _ = checkpoints.await;
        let _ = after_stop.send(true);
        if let Some(after) = after {
            let _ = after.await;
        }
        if let Some(cleared) = cleared {
            let _ = cleared.await;
        }
        served.map_err(AppError::Serve)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::market::LeaseSink;

    fn lease(id: &str) -> pog_market::lease::Lease {
        pog_market::lease::Lease {
            id: id.into(),
            gpu: pog_signed::GpuUuid::new("GPU-1ea5e000-0000-4000-8000-000000000001").unwrap(),
            renter: "aa".repeat(32),
            provider: "bb".repeat(32),
            start_ms: 1_800_000_000_000,
            end_ms: 1_800_007_200_000,
            hours: 2,
            price_micro_usd: 2_000_000,
            access: None,
        }
    }

    /// After a crash between logging a clearing's leases and marking it taken, the clearing is
    /// handed again as maybe taken: the leases already in the GPU's history are skipped, the
    /// others logged; handed as new, each is logged.
    #[test]
    fn leases_handed_again_after_a_crash_are_logged_once() {
        let dir = tempfile::tempdir().unwrap();
        let identity = Identity::from_seed([5; 32]);
        let ledger = Arc::new(ValidatorLedger::open(dir.path(), &identity, None).unwrap());
        let records = Arc::new(
            RecordStore::new(Identity::from_seed([5; 32]), Registry::open(None).unwrap())
                .with_ledger(ledger.clone()),
        );
        let sink = LedgerLeases(records);
        let class = pog_market::GpuClass::new("H200 SXM").unwrap();
        let logged = |n: usize| {
            let entries = ledger
                .ledger()
                .gpu_entries("GPU-1ea5e000-0000-4000-8000-000000000001")
                .unwrap();
            let ids: Vec<String> = entries
                .iter()
                .map(|(_, e)| {
                    serde_json::from_str::<pog_records::LeaseRecord>(&e.body)
                        .unwrap()
                        .lease_id
                })
                .collect();
            assert_eq!(ids.len(), n, "{ids:?}");
            ids
        };
        sink.leased(&class, &[lease("1.0.0")], false).unwrap();
        logged(1);
        // The same clearing again, maybe taken, with a lease the crash kept from the ledger.
        sink.leased(&class, &[lease("1.0.0"), lease("1.0.1")], true)
            .unwrap();
        assert_eq!(logged(2), ["1.0.0", "1.0.1"]);
        // Handed as new (no crash): logged as it comes.
        sink.leased(&class, &[lease("2.0.0")], false).unwrap();
        logged(3);
    }
}
