//! The validator's scores and prices from its own signed records (issue 15), and its market
//! on a clock.
//!
//! - **Scores.** `GET /v1/scores` (a page of registered GPUs) and `GET /v1/scores/{uuid}`:
//!   each GPU assessed from its latest records in the registry
//!   ([`pog_market::appraisal::assess`]): proof records, memory records, missed rounds (its
//!   uptime) and health records (its anomalies); the score, every reason it is lower than its
//!   model would earn, and the price the validator last posted for it.
//! - **Prices as proofs come in.** The registry wakes [`Pricing::run`] after each record it
//!   stores; it re-assesses every GPU with new records and re-quotes its price per GPU-hour in
//!   the market of its class (utilization, demand and the clearing price from the GPU-hours
//!   its book leased over the trailing window, against the class's GPUs proven now:
//!   [`pog_market::signals`]; open orders count for nothing), and appends the price to the history in `market.sqlite` when it changed (its
//!   price, score or why it is not priced: a point per change, with its time, not one per
//!   record), with the row of the last record taken in, in one transaction: a restarted
//!   validator prices the records it has not seen yet and none twice. A clearing wakes it too:
//!   the proven GPUs of the class cleared are re-quoted at once. `GET /v1/prices/{uuid}/history` pages through it. With a
//!   ledger, each score and price that changed is also logged there first, as validator-signed
//!   `score` and `price` records naming the logged records the score was computed from.
//! - **Clearing on a clock.** [`clear_on_schedule`] clears every class whose book changed
//!   since its last clearing (`pog validator --clear-every`), signed by the validator's key
//!   like a manual clearing.

use crate::market::{Market, MarketError, PostedPrice};
use crate::registry::{NewRecord, RegistryError};
use crate::registry_model::RegisteredGpu;
use crate::rows::{read_rows, FullRounds, ReadRows};
use crate::store::{RecordStore, StoreError};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use pog_market::appraisal::{
    assess, model_base_usd, price, Assessment, GpuHistory, RELIABILITY_WINDOW,
};
use pog_market::signals::{class_state, ClassActivity, LeaseSample, MarketSignals, MarketState};
use pog_market::{Config, GpuClass, Mechanism};
use pog_net::http::ApiError;
use pog_net::locked::Locked;
use pog_records::reports as bodies;
use pog_records::{GpuState, StoredBody};
use pog_signed::RecordKind;
use pog_signed::{GpuUuid, Identity, WireError};
use pog_spec::SpecDb;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// Records read from the registry per batch when catching up.
const BATCH: usize = 1000;

/// A GPU's latest records read to assess it: a round stores up to three (proof, memory,
/// health) and a missed round one, so this holds the last [`RELIABILITY_WINDOW`] rounds.
const ROWS_READ: usize = 4 * RELIABILITY_WINDOW;

/// The ledger kinds of the records a score is computed from (its `inputs`).
const SCORED_KINDS: [RecordKind; 4] = [
    RecordKind::ProofRound,
    RecordKind::MemoryRound,
    RecordKind::HealthRound,
    RecordKind::RoundMissed,
];

/// The ledger kinds of the host's proofs a score counts (its `inputs` too), logged in the
/// history of the host's first GPU.
const HOST_KINDS: [RecordKind; 3] = [
    RecordKind::CpuRound,
    RecordKind::RamRound,
    RecordKind::StorageRound,
];

/// How far back through a GPU's ledger chain its score's inputs are looked for: the records
/// read ([`ROWS_READ`]) with scores, prices and the agent's reports between them.
const LEDGER_STEPS: usize = 8 * ROWS_READ;

/// The most scores or price points one page returns.
pub const MAX_PAGE: usize = 1000;

/// How often the pricing counts each class's proven GPUs from the whole registry again.
const RECOUNT: Duration = Duration::from_secs(600);

/// How often the pricing looks for records even without a wake-up (a safety net: every
/// stored record wakes it).
const IDLE_CHECK: Duration = Duration::from_secs(30);

/// How long the pricing lets records gather after a wake-up before it prices them: a round
/// stores each GPU's records (its GEMM, memory and health records, every GPU's at nearly the
/// same time), and gathered they are priced in one pass, each GPU assessed once rather than
/// once a record (in a fleet every validator assesses every GPU of the fleet: the load
/// harness counted 4 registry reads and 2.4 price-history reads a record before).
const GATHER: Duration = Duration::from_millis(500);

/// Why pricing failed.
#[derive(Debug, thiserror::Error)]
pub enum PricingError {
    /// The registry could not be read or written.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The market could not post a price.
    #[error(transparent)]
    Market(#[from] MarketError),
    /// A price could not be quoted.
    #[error(transparent)]
    Quote(#[from] pog_market::QuoteError),
    /// A score or price record could not be signed.
    #[error("signing a score or price record: {0}")]
    Sign(#[from] WireError),
    /// A score or price record was not logged.
    #[error("logging a score or price record: {0}")]
    Log(#[from] StoreError),
    /// A score view could not be written as JSON.
    #[error("writing a score view: {0}")]
    Encode(serde_json::Error),
    /// The ledger refused a score or price record.
    #[error(transparent)]
    Ledger(#[from] crate::ledger::LedgerError),
}

impl From<PricingError> for ApiError {
    fn from(e: PricingError) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
    }
}

/// The validator's scoring and pricing.
pub struct Pricing {
    records: Arc<RecordStore>,
    market: Arc<Market>,
    config: Config,
    wake: Arc<Notify>,
    /// Each GPU's score view as JSON, made when its records are taken in ([`Pricing::catch_up`])
    /// or, for a GPU without new records since the validator started, at its first read: a
    /// read serves these bytes. Assessing one GPU reads and parses its last rounds' records;
    /// at 1,000 GPUs a page assessed on every read cost a third of a second of CPU, which any
    /// unauthenticated client could ask for in a loop. One entry per registered GPU.
    views: std::sync::Mutex<std::collections::HashMap<GpuUuid, Arc<str>>>,
    /// Assessments made so far (each reads and parses a GPU's latest records).
    assessments: std::sync::atomic::AtomicU64,
    /// Each GPU's last `gpu-state` logged (its time zeroed), so that a state is logged when it
    /// changes even where the score does not (a new token owner); after a restart a GPU's is
    /// read back from the ledger at its first assessment ([`Pricing::logged_state`]).
    states: std::sync::Mutex<std::collections::HashMap<GpuUuid, GpuState>>,
    /// The GPUs proving their model at their latest assessment, with that model: each class's
    /// capacity, against which its leased hours are its utilization. Filled from the whole
    /// registry at the first catch-up and every [`RECOUNT`] after ([`Pricing::count_proven`]:
    /// a GPU that left the registry, and so has no records to be assessed by, leaves the
    /// count then), and kept as GPUs are assessed in between.
    proven: std::sync::Mutex<
        Option<(
            std::time::Instant,
            std::collections::HashMap<GpuUuid, String>,
        )>,
    >,
    /// Each leased GPU's last full round, which its lease's checks push out of the rows read.
    full_rounds: FullRounds,
}

/// One GPU's score as `GET /v1/scores` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoreView {
    /// The GPU the score is for.
    pub gpu_uuid: GpuUuid,
    /// The GPU's model, as registered; null when it is not known.
    pub model: Option<String>,
    /// The GPU is the simulated test double: its score is 0 and it is never priced.
    pub simulated: bool,
    /// The score the validator assessed from its own records.
    pub score: f64,
    /// Why the score is 0 or lower than its model would earn.
    pub reasons: Vec<String>,
    /// The price per GPU-hour the validator posted last (micro-dollars); null when it is not
    /// priced or not yet.
    pub price_micro_usd: Option<u64>,
    /// The posted price's point in the history, with every factor: the latest point, made
    /// when the price last changed (a record that leaves the price as it was adds none).
    pub posted: Option<PostedPrice>,
    /// The last registry record (its row) the score took in; null for a view made at a read,
    /// before the pricing took in any record of the GPU since the validator started.
    #[serde(default)]
    pub through_record: Option<i64>,
    /// How the score was made (parts, reliability, the GPU's figures).
    pub assessment: Assessment,
}

/// What `GET /v1/scores` returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScorePage {
    /// This page's scores, one per registered GPU.
    pub scores: Vec<ScoreView>,
    /// Pass as `after` for the next page; absent on the last one.
    pub next_after: Option<String>,
}

/// What `GET /v1/prices/{uuid}/history` returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PricePage {
    /// The GPU the history is of.
    pub gpu_uuid: String,
    /// This page's posted prices, in history order (by `seq`).
    pub points: Vec<PostedPrice>,
    /// Pass as `after` for the next page; absent on the last one.
    pub next_after: Option<i64>,
}

impl Pricing {
    /// Scores and prices `validator`'s GPUs into `market`'s history, with `config`; the
    /// registry wakes it from now on for every record stored, and the market for every
    /// clearing.
    pub fn new(records: Arc<RecordStore>, market: Arc<Market>, config: Config) -> Arc<Pricing> {
        let wake = Arc::new(Notify::new());
        records.registry().notify_on_record(wake.clone());
        market.notify_on_clearing(wake.clone());
        Arc::new(Pricing {
            records,
            market,
            config,
            wake,
            views: std::sync::Mutex::new(std::collections::HashMap::new()),
            assessments: std::sync::atomic::AtomicU64::new(0),
            states: std::sync::Mutex::new(std::collections::HashMap::new()),
            proven: std::sync::Mutex::new(None),
            full_rounds: FullRounds::default(),
        })
    }

    /// The first GPU of the host `uuid` is registered on (which carries the host's proofs);
    /// `None` once it left the registry.
    fn host_anchor_of(&self, uuid: &GpuUuid) -> Result<Option<String>, PricingError> {
        let registry = self.records.registry();
        match registry.gpu(uuid.as_str())? {
            Some(g) => Ok(registry.host_anchor(g.agent.as_str())?),
            None => Ok(None),
        }
    }

    /// Gives `read` (the rows of `uuid`, registered to `agent`) its host's proofs of CPU, RAM and
    /// storage where they are another GPU's: the schedule proves a host once a round, on the
    /// agent's first GPU by UUID, and every GPU of the host scores them.
    fn host_proofs_of_anchor(
        &self,
        registry: &crate::registry::Registry,
        uuid: &GpuUuid,
        agent: &str,
        read: &mut ReadRows,
    ) -> Result<(), PricingError> {
        if !(read.cpu_proofs.is_empty()
            && read.ram_proofs.is_empty()
            && read.storage_proofs.is_empty())
        {
            return Ok(());
        }
        let Some(anchor) = registry.host_anchor(agent)? else {
            return Ok(());
        };
        let Ok(anchor) = GpuUuid::new(anchor) else {
            return Ok(());
        };
        if anchor == *uuid {
            return Ok(());
        }
        let mut host = read_rows(&registry.latest_records(anchor.as_str(), ROWS_READ)?);
        self.full_rounds.complete(registry, &anchor, &mut host)?;
        read.cpu_proofs = host.cpu_proofs;
        read.ram_proofs = host.ram_proofs;
        read.storage_proofs = host.storage_proofs;
        Ok(())
    }

    /// A GPU's assessment from its latest records; `None` when the validator knows nothing of
    /// it (neither registered nor recorded). A health or missed-round record that cannot be
    /// read is left out, and the assessment says so among its reasons.
    pub fn assess(&self, uuid: &str) -> Result<Option<Assessment>, PricingError> {
        Ok(self.assess_registered(uuid)?.map(|(a, _)| a))
    }

    /// [`Pricing::assess`], with the GPU's registry row read for it (`None`: not registered),
    /// so that what follows the assessment (its state in the ledger, its view) reads it no
    /// more.
    fn assess_registered(
        &self,
        uuid: &str,
    ) -> Result<Option<(Assessment, Option<RegisteredGpu>)>, PricingError> {
        self.assessments
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // No record or registration names a GPU by anything but a `GpuUuid`.
        let Ok(uuid) = GpuUuid::new(uuid) else {
            return Ok(None);
        };
        let uuid = &uuid;
        let (gpu, read) = {
            let registry = self.records.registry();
            let gpu = registry.gpu(uuid)?;
            let rows = registry.latest_records(uuid, ROWS_READ)?;
            if gpu.is_none() && rows.is_empty() {
                return Ok(None);
            }
            let mut read = read_rows(&rows);
            self.full_rounds.complete(&registry, uuid, &mut read)?;
            // Only a host that claims cores, RAM or storage has proofs of them to read.
            if let Some(g) = gpu.as_ref().filter(|g| {
                g.host_cores.is_some() || g.host_ram.is_some() || g.host_storage.is_some()
            }) {
                self.host_proofs_of_anchor(&registry, uuid, g.agent.as_str(), &mut read)?;
            }
            (gpu, read)
        };
        let ReadRows {
            records,
            memory_records,
            missed_rounds,
            health,
            cpu_proofs,
            ram_proofs,
            storage_proofs,
            unreadable,
        } = read;
        let history = GpuHistory {
            uuid,
            registered_model: gpu.as_ref().map(|g| g.model.as_str()),
            registered_agent: gpu.as_ref().map(|g| g.agent.as_str()),
            simulated: gpu.as_ref().is_some_and(|g| g.simulated),
            records: &records,
            memory_records: &memory_records,
            missed_rounds: &missed_rounds,
            health: &health,
            cpu_proofs: &cpu_proofs,
            ram_proofs: &ram_proofs,
            storage_proofs: &storage_proofs,
        };
        let mut assessment = assess(&history, &self.config, SpecDb::embedded());
        for why in unreadable {
            tracing::warn!(gpu = uuid.as_str(), "{why}");
            assessment
                .reasons
                .push(format!("left out, unreadable: {why}"));
        }
        Ok(Some((assessment, gpu)))
    }

    /// The market of a model's class now, from the validator's own book: the leases of the
    /// trailing window against the class's GPUs proven now ([`pog_market::signals`]); open
    /// orders count for nothing. Balanced for a GPU of no known model.
    fn state(&self, model: Option<&str>) -> (MarketState, Option<MarketSignals>) {
        let balanced = (MarketState::balanced(&self.config), None);
        let Some((model, class)) = model.and_then(|m| Some((m, GpuClass::new(m).ok()?))) else {
            return balanced;
        };
        let Some(base_usd) = model_base_usd(model, &self.config, SpecDb::embedded()) else {
            return balanced;
        };
        let now = self.records.now_ms();
        let window_ms = self
            .config
            .price
            .window_hours
            .saturating_mul(pog_market::backing::HOUR_MS);
        let leases = self.market.class_leases(&class, now, window_ms);
        let samples: Vec<LeaseSample<'_>> = leases
            .iter()
            .map(|(at_ms, lease)| LeaseSample {
                lease,
                cleared_at_ms: *at_ms,
            })
            .collect();
        let proven_gpus = self.proven.locked().as_ref().map_or(0, |(_, p)| {
            p.values().filter(|m| m.as_str() == model).count()
        }) as u64;
        let activity = ClassActivity {
            leases: &samples,
            proven_gpus,
            base_usd,
        };
        let (state, signals) = class_state(&activity, now, &self.config);
        (state, Some(signals))
    }

    /// Counts `a`'s GPU among its class's proven GPUs, or not.
    fn note_proven(&self, a: &Assessment) {
        if let Some((_, proven)) = self.proven.locked().as_mut() {
            match (&a.model, a.proves_model && !a.simulated) {
                (Some(model), true) => proven.insert(a.gpu_uuid.clone(), model.clone()),
                _ => proven.remove(&a.gpu_uuid),
            };
        }
    }

    /// Assesses every registered GPU, to count each class's proven GPUs (at the first
    /// catch-up and every [`RECOUNT`] after; in between each assessment keeps the count).
    fn count_proven(&self) -> Result<(), PricingError> {
        if self
            .proven
            .locked()
            .as_ref()
            .is_some_and(|(at, _)| at.elapsed() < RECOUNT)
        {
            return Ok(());
        }
        let mut proven = std::collections::HashMap::new();
        let mut after = String::new();
        loop {
            let gpus = self.records.read(|r| r.gpus(&after, MAX_PAGE))?;
            for g in &gpus {
                if let Some(a) = self.assess(&g.uuid)? {
                    if let (Some(model), true) = (&a.model, a.proves_model && !a.simulated) {
                        proven.insert(a.gpu_uuid.clone(), model.clone());
                    }
                }
            }
            match gpus.last() {
                Some(last) if gpus.len() == MAX_PAGE => after = last.uuid.to_string(),
                _ => break,
            }
        }
        *self.proven.locked() = Some((std::time::Instant::now(), proven));
        Ok(())
    }

    /// A GPU's price now, from its assessment, as a point to post.
    fn quote(&self, a: &Assessment, cause: String) -> Result<PostedPrice, PricingError> {
        self.note_proven(a);
        let (state, signals) = self.state(a.model.as_deref());
        let pricing = price(a, &state, &self.config, SpecDb::embedded())?;
        Ok(PostedPrice {
            seq: 0,
            gpu_uuid: a.gpu_uuid.to_string(),
            at_ms: self.records.now_ms(),
            cause,
            record_id: a.latest_record,
            model: a.model.clone(),
            score: a.score,
            gpu_worth: a.gpu_worth,
            price_micro_usd: pricing.quote.as_ref().map(|q| q.price.micro_usd()),
            unpriced: pricing.unpriced,
            quote: pricing.quote,
            signals,
        })
    }

    /// Prices every GPU with records stored since the last catch-up, one point per GPU per
    /// batch; returns the points posted.
    pub fn catch_up(&self) -> Result<usize, PricingError> {
        self.count_proven()?;
        let mut posted = self.reprice_cleared()?;
        loop {
            let after = self.market.priced_through()?;
            let rows = self.records.registry().records_since(after, BATCH)?;
            let Some(through) = rows.last().map(|r| r.id) else {
                return Ok(posted);
            };
            // Per GPU: how many records came in and the last one.
            let mut touched: BTreeMap<&str, (usize, &NewRecord)> = BTreeMap::new();
            for row in &rows {
                let entry = touched.entry(&row.gpu_uuid).or_insert((0, row));
                *entry = (entry.0 + 1, row);
            }
            let mut points = Vec::with_capacity(touched.len());
            let mut assessed = Vec::with_capacity(touched.len());
            for (uuid, (count, last)) in touched {
                let last_id = last.id;
                let Some((a, gpu)) = self.assess_registered(uuid)? else {
                    continue;
                };
                let verdict = match (a.latest_record, a.latest_accepted) {
                    (Some(id), Some(accepted)) if id == last.id => format!(
                        "proof record {id} {}",
                        if accepted { "accepted" } else { "not accepted" }
                    ),
                    _ => format!(
                        "{} record {}",
                        // "health-record" reads "health record N", "round-missed" as it is.
                        match last.kind.as_deref() {
                            Some(kind) if kind == RecordKind::ProofRound.wire_kind() => "proof",
                            Some(kind) => kind.strip_suffix("-record").unwrap_or(kind),
                            None => "registry",
                        },
                        last.id
                    ),
                };
                let cause = if count > 1 {
                    format!("{verdict} (and {} earlier record(s))", count - 1)
                } else {
                    verdict
                };
                points.extend(self.point_if_changed(&a, gpu.as_ref(), cause)?);
                assessed.push((a, gpu.is_some(), last_id));
            }
            self.market.post_prices(&points, through)?;
            // The views of the GPUs re-assessed, with the points just posted (a GPU no longer
            // registered is dropped: the views are those of the registry's GPUs only).
            for (a, registered, through) in assessed {
                self.keep_view(a, registered, Some(through))?;
            }
            posted += points.len();
            if rows.len() < BATCH {
                return Ok(posted);
            }
        }
    }

    /// Quotes an assessed GPU, logs its score and price when they changed, and returns its
    /// point when its price, score or why it is not priced changed: a round's records, or a
    /// clearing, that leave them as they were add nothing, so the history grows with the
    /// prices, not with the rounds.
    fn point_if_changed(
        &self,
        a: &Assessment,
        gpu: Option<&RegisteredGpu>,
        cause: String,
    ) -> Result<Option<PostedPrice>, PricingError> {
        let point = self.quote(a, cause)?;
        let last = self.market.latest_price(&a.gpu_uuid)?;
        // Into the ledger first (append-only: a batch retried after a failure may log a score
        // twice, never lose one), then the market's history.
        self.log_if_changed(a, &point, last.as_ref(), gpu)?;
        let changed = last.is_none_or(|l| {
            l.price_micro_usd != point.price_micro_usd
                || l.unpriced != point.unpriced
                || l.score != point.score
        });
        Ok(changed.then_some(point))
    }

    /// Re-quotes the proven GPUs of every class the market cleared since the last pass (a
    /// clearing's leases and price move its class's market at once, not only at each GPU's
    /// next record); returns the points posted.
    fn reprice_cleared(&self) -> Result<usize, PricingError> {
        let cleared = self.market.take_cleared();
        if cleared.is_empty() {
            return Ok(0);
        }
        let gpus: Vec<(GpuUuid, String)> = self
            .proven
            .locked()
            .iter()
            .flat_map(|(_, p)| p.iter())
            .filter(|(_, model)| cleared.iter().any(|c| c.as_str() == model.as_str()))
            .map(|(uuid, model)| (uuid.clone(), model.clone()))
            .collect();
        let mut points = Vec::new();
        let mut assessed = Vec::new();
        for (uuid, model) in gpus {
            let Some((a, gpu)) = self.assess_registered(uuid.as_str())? else {
                continue;
            };
            points.extend(self.point_if_changed(
                &a,
                gpu.as_ref(),
                format!("a clearing of {model}"),
            )?);
            let row = self.records.registry().latest_records(&uuid, 1)?;
            assessed.push((a, gpu.is_some(), row.first().map(|(id, _)| *id)));
        }
        self.market
            .post_prices(&points, self.market.priced_through()?)?;
        for (a, registered, through) in assessed {
            self.keep_view(a, registered, through)?;
        }
        Ok(points.len())
    }

    /// Appends the GPU's score, and its price when it is priced, to the validator's ledger as
    /// signed `score` and `price` records, when either differs from the last point posted,
    /// then its `gpu-state` (the fixed form a contract reads, docs/ledger.md "Scores on
    /// chain") when that differs from the last one logged (nothing without a ledger). Only to
    /// the ledger: stored in the registry they would wake the pricing again. In a fleet, only
    /// the validator that leads the log logs them (every validator prices every GPU of the
    /// fleet: each logging would put one score per validator in the fleet's one log).
    /// `last` is the GPU's last point posted, `gpu` its registry row (`None`: not registered).
    fn log_if_changed(
        &self,
        a: &Assessment,
        point: &PostedPrice,
        last: Option<&PostedPrice>,
        gpu: Option<&RegisteredGpu>,
    ) -> Result<(), PricingError> {
        if !self.records.ledger().is_some_and(|l| l.leads()) {
            return Ok(());
        }
        let score_changed = !last
            .is_some_and(|l| l.score == point.score && l.price_micro_usd == point.price_micro_usd);
        let state = self.gpu_state(a, point, gpu);
        let untimed = GpuState {
            recorded_at_ms: 0,
            ..state.clone()
        };
        let last_state = match self.states.locked().get(&a.gpu_uuid).cloned() {
            Some(last) => Some(last),
            None => self.logged_state(&a.gpu_uuid)?,
        };
        let state_changed = last_state.as_ref() != Some(&untimed);
        if score_changed {
            self.log_score(a, point)?;
        }
        if score_changed || state_changed {
            self.records.log(&state)?;
            self.states.locked().insert(a.gpu_uuid.clone(), untimed);
        }
        Ok(())
    }

    /// The GPU's `gpu-state` now: its assessment, its posted price and the token owner its
    /// agent named (in its registry row `gpu`).
    fn gpu_state(
        &self,
        a: &Assessment,
        point: &PostedPrice,
        gpu: Option<&RegisteredGpu>,
    ) -> GpuState {
        GpuState {
            version: pog_records::state::STATE_VERSION,
            gpu_uuid: a.gpu_uuid.clone(),
            model: a.model.clone().unwrap_or_default(),
            proves_model: a.proves_model,
            proves_memory: a.proves_memory,
            score_ppm: GpuState::score_ppm_of(a.score),
            price_micro_usd: point.price_micro_usd.unwrap_or(0),
            owner: gpu
                .and_then(|g| g.token_owner)
                .unwrap_or(pog_signed::EvmAddress::ZERO),
            recorded_at_ms: point.at_ms,
        }
    }

    /// The GPU's last `gpu-state` in the ledger (its time zeroed), looked for among its last
    /// [`LEDGER_STEPS`] entries: what a restarted validator compares with before logging one
    /// again, so that a restart logs (and the chain is sent) no state that did not change.
    fn logged_state(&self, gpu: &GpuUuid) -> Result<Option<GpuState>, PricingError> {
        let Some(ledger) = self.records.ledger() else {
            return Ok(None);
        };
        let found = ledger
            .ledger()
            .gpu_latest_below(gpu.as_str(), RecordKind::GpuState, u64::MAX, LEDGER_STEPS)
            .map_err(crate::ledger::LedgerError::from)?;
        Ok(found
            .and_then(|(_, entry)| GpuState::read(entry.kind.wire_kind(), &entry.body).ok())
            .map(|s| GpuState {
                recorded_at_ms: 0,
                ..s
            }))
    }

    /// Logs the GPU's `score` record, and its `price` when it is priced.
    fn log_score(&self, a: &Assessment, point: &PostedPrice) -> Result<(), PricingError> {
        let Some(ledger) = self.records.ledger() else {
            return Ok(());
        };
        let recent = |uuid: &str, kinds: &[RecordKind], limit: usize| {
            ledger
                .ledger()
                .gpu_recent(uuid, kinds, limit, LEDGER_STEPS)
                .map_err(crate::ledger::LedgerError::from)
        };
        let mut inputs: Vec<u64> = recent(a.gpu_uuid.as_str(), &SCORED_KINDS, ROWS_READ)?
            .into_iter()
            .map(|(index, _)| index)
            .collect();
        // The host's latest proofs of CPU, RAM and storage, in its first GPU's history.
        if let Some(anchor) = self.host_anchor_of(&a.gpu_uuid)? {
            for kind in HOST_KINDS {
                inputs.extend(recent(&anchor, &[kind], 1)?.into_iter().map(|(i, _)| i));
            }
            inputs.sort_unstable();
            inputs.dedup();
        }
        let parts = &a.detail.parts;
        let score = bodies::Score {
            version: bodies::BODY_VERSION,
            gpu_uuid: a.gpu_uuid.clone(),
            model: a.model.clone(),
            score: a.score,
            components: [
                ("gpu", &parts.gpu),
                ("cpu", &parts.cpu),
                ("ram", &parts.ram),
                ("storage", &parts.storage),
            ]
            .into_iter()
            .map(|(name, part)| (name.to_string(), part.value, part.weight))
            .collect(),
            reliability: a.detail.reliability.factor,
            reasons: a.reasons.clone(),
            inputs,
            recorded_at_ms: point.at_ms,
        };
        let score_index = self.records.log(&score)?;
        if let Some(per_hour) = point.price_micro_usd {
            let price = bodies::Price {
                version: bodies::BODY_VERSION,
                gpu_uuid: a.gpu_uuid.clone(),
                per_hour,
                currency: "USD".into(),
                basis: "posted".into(),
                score_index,
                recorded_at_ms: point.at_ms,
            };
            self.records.log(&price)?;
        }
        Ok(())
    }

    /// Prices records as they are stored, until `stop` says so.
    pub async fn run(self: Arc<Self>, mut stop: tokio::sync::watch::Receiver<bool>) {
        loop {
            let pricing = self.clone();
            match tokio::task::spawn_blocking(move || pricing.catch_up()).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => tracing::error!(error = %e, "pricing the new records"),
                Err(e) => tracing::error!(error = %e, "the pricing task failed"),
            }
            tokio::select! {
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(IDLE_CHECK) => {}
                _ = stop.changed() => return,
            }
            tokio::select! {
                _ = tokio::time::sleep(GATHER) => {}
                _ = stop.changed() => return,
            }
        }
    }

    /// One GPU's score view as JSON, with the price posted last: (its UUID, the JSON).
    fn view_json(
        &self,
        a: Assessment,
        through_record: Option<i64>,
    ) -> Result<(GpuUuid, Arc<str>), PricingError> {
        let posted = self.market.latest_price(&a.gpu_uuid)?;
        let view = ScoreView {
            gpu_uuid: a.gpu_uuid.clone(),
            model: a.model.clone(),
            simulated: a.simulated,
            score: a.score,
            reasons: a.reasons.clone(),
            price_micro_usd: posted.as_ref().and_then(|p| p.price_micro_usd),
            posted,
            through_record,
            assessment: a,
        };
        let json = serde_json::to_string(&view).map_err(PricingError::Encode)?;
        Ok((view.gpu_uuid, json.into()))
    }

    /// Keeps the view of an assessment just made, if its GPU is `registered` (and drops the
    /// one kept of a GPU no longer registered): one view per registered GPU at most.
    fn keep_view(
        &self,
        a: Assessment,
        registered: bool,
        through: Option<i64>,
    ) -> Result<(), PricingError> {
        if !registered {
            self.views.locked().remove(&a.gpu_uuid);
            return Ok(());
        }
        let (uuid, json) = self.view_json(a, through)?;
        self.views.locked().insert(uuid, json);
        Ok(())
    }

    /// A GPU's score view as JSON: the one made when its records were last taken in, else
    /// made now (and kept, for a registered GPU); `None` when the validator knows nothing of
    /// it.
    pub fn score_json(&self, uuid: &str) -> Result<Option<Arc<str>>, PricingError> {
        if let Some(json) = self.views.locked().get(uuid) {
            return Ok(Some(json.clone()));
        }
        let Some((a, gpu)) = self.assess_registered(uuid)? else {
            return Ok(None);
        };
        let (uuid, json) = self.view_json(a, None)?;
        if gpu.is_none() {
            return Ok(Some(json));
        }
        // A view the catch-up made meanwhile is newer than this one: it stays.
        Ok(Some(
            self.views.locked().entry(uuid).or_insert(json).clone(),
        ))
    }

    /// How many assessments the pricing has made since it started: each reads and parses a
    /// GPU's latest records (reads of `GET /v1/scores` make none for a GPU already assessed).
    pub fn assessments(&self) -> u64 {
        self.assessments.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Clears the market every `every`, signed by `operator` (the validator's key), with
/// `mechanism`, until `stop` says so: only classes whose book changed since their last
/// clearing and that have bids and asks open ([`Market::clear_due`]).
pub async fn clear_on_schedule(
    market: Arc<Market>,
    operator: Identity,
    every: Duration,
    mechanism: Mechanism,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut clock = tokio::time::interval(every);
    clock.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    clock.tick().await; // the first tick is immediate: the first clearing comes after `every`
    loop {
        tokio::select! {
            _ = clock.tick() => {}
            _ = stop.changed() => return,
        }
        // A clearing reads the registry (the open asks' GPUs): off the workers.
        let (due, key) = (market.clone(), Identity::from_seed(operator.seed()));
        let results =
            match tokio::task::spawn_blocking(move || due.clear_due(&key, mechanism)).await {
                Ok(results) => results,
                Err(e) => {
                    tracing::error!(error = %e, "a scheduled clearing panicked");
                    continue;
                }
            };
        for result in results {
            match result {
                Ok(r) => tracing::info!(
                    class = %r.class,
                    number = r.number,
                    units = r.clearing.units,
                    "cleared on schedule"
                ),
                Err(e) => tracing::error!(error = %e, "a scheduled clearing failed"),
            }
        }
    }
}

/// The scores and prices: `/v1/scores`, `/v1/scores/{uuid}` and
/// `/v1/prices/{uuid}/history` (composed with the rest in [`crate::app::Api`]).
pub fn router(pricing: Arc<Pricing>) -> Router {
    Router::new()
        .route("/v1/scores", get(scores_route))
        .route("/v1/scores/{uuid}", get(score_route))
        .route("/v1/prices/{uuid}/history", get(history_route))
        .with_state(pricing)
}

#[derive(Debug, Deserialize)]
struct UuidPage {
    #[serde(default)]
    after: String,
    limit: Option<usize>,
}

async fn scores_route(
    State(p): State<Arc<Pricing>>,
    Query(q): Query<UuidPage>,
) -> Result<Response, ApiError> {
    let limit = q.limit.unwrap_or(100).clamp(1, MAX_PAGE);
    let page = tokio::task::spawn_blocking(move || -> Result<String, PricingError> {
        let gpus = p.records.read(|r| r.gpus(&q.after, limit))?;
        let next_after = (gpus.len() == limit)
            .then(|| gpus.last().map(|g| g.uuid.clone()))
            .flatten();
        let mut views = Vec::with_capacity(gpus.len());
        for g in gpus {
            views.extend(p.score_json(&g.uuid)?);
        }
        // A [`ScorePage`] written from the views' JSON as it is kept, not parsed again.
        let next_after = serde_json::to_string(&next_after).map_err(PricingError::Encode)?;
        Ok(format!(
            r#"{{"scores":[{}],"next_after":{next_after}}}"#,
            views.join(",")
        ))
    })
    .await
    .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))??;
    Ok(json_response(page))
}

/// A JSON body made elsewhere, as the API's answers are typed.
fn json_response(body: String) -> Response {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

async fn score_route(
    State(p): State<Arc<Pricing>>,
    Path(uuid): Path<String>,
) -> Result<Response, ApiError> {
    let view = tokio::task::spawn_blocking(move || p.score_json(&uuid))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))??;
    match view {
        Some(json) => Ok(json_response(json.to_string())),
        None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "no GPU of that UUID is registered or recorded here (see GET /v1/gpus)",
        )),
    }
}

#[derive(Debug, Deserialize)]
struct SeqPage {
    #[serde(default)]
    after: i64,
    limit: Option<usize>,
}

async fn history_route(
    State(p): State<Arc<Pricing>>,
    Path(uuid): Path<String>,
    Query(q): Query<SeqPage>,
) -> Result<Response, ApiError> {
    let limit = q.limit.unwrap_or(100).clamp(1, MAX_PAGE);
    let points = p
        .market
        .price_history(&uuid, q.after, limit)
        .map_err(PricingError::from)?;
    let next_after = (points.len() == limit)
        .then(|| points.last().map(|p| p.seq))
        .flatten();
    Ok(Json(PricePage {
        gpu_uuid: uuid,
        points,
        next_after,
    })
    .into_response())
}

#[cfg(test)]
mod tests {

    /// The market's default decay threshold is the validator's own for a contradiction.
    #[test]
    fn the_decay_threshold_is_the_validators() {
        assert_eq!(
            pog_market::config::DEFAULT_DECAY_THRESHOLD,
            crate::health::DECAY_CONTRADICTION
        );
        assert_eq!(
            pog_market::Config::embedded()
                .score
                .reliability
                .decay_threshold,
            crate::health::DECAY_CONTRADICTION
        );
    }
}
