//! Settling leases for proven hours (issue 25, item 4; docs/market.md, "Deposits and
//! settlement"). Once a period of a lease has ended (and its grace passed, so that the rounds
//! around its end are on record), the [`Settler`] reads the leased GPU's rounds of the lease's
//! provider from the validator's own records, settles the period
//! ([`pog_market::settlement::settle`]: each hour paid by its share of proven rounds), logs a
//! `settlement` record into the ledger, keeps it in [`Settlements`], and, where the market
//! settles through an escrow, signs the payment for `GpuEscrow.settle` and sees it onto the
//! chain ([`EscrowPayments`]).
//!
//! What a lease holds of its renter's deposit ([`Settlements::held_by`]) counts against the
//! renter's next bids until its periods are paid on chain, so the money a lease will be paid
//! from cannot back another bid, or be withdrawn, in the meantime.
//!
//! - **No payee.** The escrow pays the EVM address the provider's agent named
//!   (`pog agent --token-owner`); while it names none, the settlement is logged and kept
//!   unsigned, its payment held, and signed at the first pass after one is named.
//! - **The chain down.** A signed payment not yet on chain is tried again at every pass; it
//!   never expires, and anyone may submit it (`GET /v1/market/settlements` serves it).
//! - **A crash** (kill -9) between logging a settlement and keeping it here settles the period
//!   again at the next start: nothing accepted is lost, the ledger may hold that period's
//!   record twice, and the escrow pays it once (a period is paid once by the contract, and the
//!   settler reads `settled` before submitting).
//! - **A validator that stops.** Nothing is paid without its signature; once the settlement
//!   key has been silent for the escrow's `abandonAfter`, each renter withdraws the whole
//!   account (the contract's rule).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pog_market::lease::Lease;
use pog_market::settlement::{is_due, periods, settle, Period, SettlementRules};
use pog_records::{EscrowPayment, SettlementRecord};
use pog_signed::{GpuUuid, PublicKey};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::registry::Registry;
use crate::settlement_store::{KeptRow, SettlementStore, SettlementStoreError};
use crate::store::RecordStore;

/// The kind a settlement page is signed under: the validator's answer to
/// `GET /v1/market/settlements`, an envelope whose body is a [`SettlementPage`].
pub const SETTLEMENTS_KIND: &str = "market-settlements";

/// How many of a GPU's latest records are read first to find a period's rounds; four times as
/// many each time the oldest read is not yet old enough, up to [`MAX_ROWS`].
const FIRST_ROWS: usize = 512;

/// The most records of one GPU read to settle one period (at a round a minute, a period of a
/// day is about 4,300 records of all kinds).
const MAX_ROWS: usize = 32_768;

/// Why settling failed (a pass stops at the first failure and is tried again at the next).
#[derive(Debug, thiserror::Error)]
pub enum SettlementError {
    /// The settlements' store failed.
    #[error("the settlements' store: {0}")]
    Store(#[from] SettlementStoreError),
    /// A stored settlement does not read back.
    #[error("a stored settlement does not read back: {0}")]
    Corrupt(#[from] serde_json::Error),
    /// The registry could not be read.
    #[error(transparent)]
    Registry(#[from] crate::registry_model::RegistryError),
    /// The record could not be signed or logged.
    #[error(transparent)]
    Log(#[from] crate::store::StoreError),
    /// A lease names a key that is not one.
    #[error("lease {lease}: {why}")]
    BadLease {
        /// The lease.
        lease: String,
        /// What is wrong.
        why: String,
    },
}

/// The chain's side of a settlement could not be done now (the node down or slow, a refusal).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EscrowUnavailable(pub String);

/// What the escrow contract is asked to pay: one period of one lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EscrowTerms {
    /// The lease's id in the validator's market.
    pub lease_id: String,
    /// The period's number.
    pub period: u64,
    /// The renter, whose account pays.
    pub renter: PublicKey,
    /// The provider's EVM address, `0x…`.
    pub payee: String,
    /// What is paid, micro-dollars (the stablecoin's units).
    pub paid_micro_usd: u64,
}

/// The escrow as the settlement needs it (`pog validator --escrow-key` implements it over
/// `pog_anchor::escrow`): a signer of payments, and a way to see one onto the chain.
pub trait EscrowPayments: Send + Sync {
    /// Signs `terms` for the escrow with the settlement key (offline).
    fn sign(&self, terms: &EscrowTerms) -> Result<EscrowPayment, EscrowUnavailable>;
    /// Sees a signed payment onto the chain: true once it is there (submitted now, or found
    /// settled already by whoever submitted it).
    fn deliver(
        &self,
        terms: &EscrowTerms,
        payment: &EscrowPayment,
    ) -> Result<bool, EscrowUnavailable>;
    /// Signs a withdrawal voucher with the settlement key: `amount_micro_usd` of `renter`'s
    /// account to the account's owner, as the account's next withdrawal (its nonce read from
    /// the chain), until `expires_at_s` (Unix seconds).
    fn voucher(
        &self,
        renter: &PublicKey,
        amount_micro_usd: u64,
        expires_at_s: u64,
    ) -> Result<Voucher, EscrowUnavailable>;
}

/// The kind a provider's agent signs an [`UndeliveredMessage`] under.
pub const UNDELIVERED_KIND: &str = "lease-undelivered";

/// The longest reason an [`UndeliveredMessage`] may give, in bytes.
pub const MAX_UNDELIVERED_REASON: usize = 512;

/// Provider's agent → validator (`POST /v1/market/undelivered`): its lease hook could not give
/// the renter access to the leased GPU from `at_ms` on, so no hour after it is to be paid.
/// Only the lease's provider may say so (it costs the provider, and only the provider knows);
/// the first report of a lease stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UndeliveredMessage {
    /// The validator told.
    pub validator: PublicKey,
    /// The lease.
    pub lease_id: String,
    /// Since when the renter has no access, ms since the Unix epoch (within the lease).
    pub at_ms: u64,
    /// Why, in the hook's words (at most [`MAX_UNDELIVERED_REASON`] bytes).
    pub reason: String,
}

/// The kind a renter signs a [`WithdrawMessage`] under.
pub const WITHDRAW_KIND: &str = "market-withdraw";

/// How long a withdrawal voucher is good for: what it asks is held from the renter's bids
/// that long (or until it is used and the balance shows it).
pub const VOUCHER_LIFETIME_MS: u64 = 10 * 60 * 1000;

/// Renter → validator (`POST /v1/market/withdraw`): a voucher to take `amount_micro_usd` out
/// of the escrow account of the key that signs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WithdrawMessage {
    /// The validator asked (a request signed for one cannot be used at another).
    pub validator: PublicKey,
    /// How much, micro-dollars.
    pub amount_micro_usd: u64,
    /// When the renter signed it, ms since the Unix epoch: taken only within five minutes of
    /// the validator's clock, and only after the renter's last request (a replay is refused).
    pub at_ms: u64,
}

/// A withdrawal voucher the validator's settlement key signed (`GpuEscrow.withdraw`): the
/// account's owner submits it from its own address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Voucher {
    /// The renter's key (its account).
    pub renter: PublicKey,
    /// How much, micro-dollars.
    pub amount_micro_usd: u64,
    /// The account's withdrawal it is (the contract takes them in order).
    pub nonce: u64,
    /// Until when it can be used, Unix seconds.
    pub expires_at_s: u64,
    /// The chain's id.
    pub chain_id: u64,
    /// The escrow contract, `0x…`.
    pub contract: String,
    /// The EIP-712 signature, `0x…` (65 bytes).
    pub signature: String,
}

/// Where one settled period stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SettlementState {
    /// Settled with no escrow (the market takes bids unbacked): the record is the account.
    Recorded,
    /// The provider named no address to pay: logged, its payment held, to be signed once it
    /// names one.
    AwaitingPayee,
    /// Signed for the escrow, not yet seen on chain: its payment held.
    Signed,
    /// Paid on chain.
    Paid,
}

impl SettlementState {
    fn code(self) -> i64 {
        match self {
            SettlementState::Recorded => 0,
            SettlementState::AwaitingPayee => 1,
            SettlementState::Signed => 2,
            SettlementState::Paid => 3,
        }
    }

    fn from_code(code: i64) -> SettlementState {
        match code {
            1 => SettlementState::AwaitingPayee,
            2 => SettlementState::Signed,
            3 => SettlementState::Paid,
            _ => SettlementState::Recorded,
        }
    }

    /// Whether the payment still sits in the renter's account, owed to the provider.
    fn holds_payment(self) -> bool {
        matches!(
            self,
            SettlementState::AwaitingPayee | SettlementState::Signed
        )
    }
}

/// One settled period as the validator keeps and serves it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptSettlement {
    /// The record logged (its latest form: with the escrow's payment once signed).
    #[serde(flatten)]
    pub record: SettlementRecord,
    /// Where it stands.
    pub state: SettlementState,
}

/// What `GET /v1/market/settlements` returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettlementPage {
    /// The validator's clock when it answered, ms since the Unix epoch.
    pub now_ms: u64,
    /// The settlements asked for, the newest first.
    pub settlements: Vec<KeptSettlement>,
}

/// Which settlements `GET /v1/market/settlements` lists.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettlementFilter {
    /// Only those whose renter or provider is this key (hex, any case).
    pub party: Option<String>,
    /// Only those of this lease.
    pub lease: Option<String>,
    /// At most this many (default 100, at most 1000).
    pub limit: Option<usize>,
}

/// The settled periods, in a SQLite file of their own beside the market's (or in memory), or
/// in a fleet's PostgreSQL database, with an index of what each holds.
pub struct Settlements {
    inner: Mutex<Kept>,
    rules: SettlementRules,
}

struct Kept {
    store: SettlementStore,
    /// (lease, period) → (paid, state), for [`Settlements::held_by`].
    index: BTreeMap<(String, u64), (u64, SettlementState)>,
    /// The version of the latest change the index holds (a shared store's).
    version: i64,
}

impl Kept {
    /// Brings the index up to the store: the periods others kept or changed (a fleet's).
    fn catch_up(&mut self) -> Result<(), SettlementError> {
        for (lease, period, paid, state, version) in self.store.changed_since(self.version)? {
            self.index
                .insert((lease, period), (paid, SettlementState::from_code(state)));
            self.version = self.version.max(version);
        }
        Ok(())
    }
}

impl Settlements {
    /// Opens (creating if needed) the store at `path` (`None`: in memory), settling by `rules`.
    pub fn open(
        path: Option<&Path>,
        rules: SettlementRules,
    ) -> Result<Settlements, SettlementError> {
        Settlements::on(SettlementStore::sqlite(path)?, rules)
    }

    /// Opens the settlements where `registry` is kept: in its PostgreSQL database, the fleet's
    /// (every validator reads what each lease holds from it), or else at `path`
    /// ([`Settlements::open`]).
    pub fn open_beside(
        registry: &Registry,
        path: Option<&Path>,
        rules: SettlementRules,
    ) -> Result<Settlements, SettlementError> {
        match registry.postgres() {
            Some(pg) => Settlements::on(SettlementStore::Postgres(pg.clone()), rules),
            None => Settlements::open(path, rules),
        }
    }

    fn on(store: SettlementStore, rules: SettlementRules) -> Result<Settlements, SettlementError> {
        let mut kept = Kept {
            store,
            index: BTreeMap::new(),
            version: 0,
        };
        kept.catch_up()?;
        Ok(Settlements {
            inner: Mutex::new(kept),
            rules,
        })
    }

    /// The rules it settles by.
    pub fn rules(&self) -> &SettlementRules {
        &self.rules
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        // A panic elsewhere while holding it leaves the index as it was: it is only ever
        // changed after its row is written.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Brings what each lease holds up to a fleet's store (the settlements its leader kept);
    /// nothing to do for a validator's own. The market calls it before it counts what a
    /// renter's leases hold; a store that does not answer is logged, and the index read as it
    /// stands.
    pub fn catch_up(&self) {
        let mut kept = self.lock();
        if kept.store.shared() {
            if let Err(e) = kept.catch_up() {
                tracing::warn!(error = %e, "the settlements could not catch up with the fleet's");
            }
        }
    }

    /// Whether a period was settled.
    pub fn is_settled(&self, lease_id: &str, period: u64) -> bool {
        self.lock()
            .index
            .contains_key(&(lease_id.to_string(), period))
    }

    /// What `lease` still holds of its renter's deposit, micro-dollars: each period not yet
    /// settled its whole value, each settled one whose payment is not yet on chain that
    /// payment.
    pub fn held_by(&self, lease: &Lease) -> u64 {
        let kept = self.lock();
        periods(lease, &self.rules)
            .iter()
            .map(|p| match kept.index.get(&(lease.id.clone(), p.index)) {
                None => lease.price_micro_usd.saturating_mul(p.hours()),
                Some((paid, state)) if state.holds_payment() => *paid,
                Some(_) => 0,
            })
            .fold(0u64, u64::saturating_add)
    }

    /// Keeps the provider's report that lease `lease_id`'s access was not delivered from
    /// `at_ms` on; the first report of a lease stands. Returns the time kept.
    pub fn report_undelivered(
        &self,
        lease_id: &str,
        at_ms: u64,
        reason: &str,
    ) -> Result<u64, SettlementError> {
        Ok(self
            .lock()
            .store
            .report_undelivered(lease_id, at_ms, reason)?)
    }

    /// Since when lease `lease_id`'s access was not delivered, as its provider reported.
    pub fn undelivered_from(&self, lease_id: &str) -> Result<Option<u64>, SettlementError> {
        Ok(self.lock().store.undelivered_from(lease_id)?)
    }

    /// Keeps a settled period (a new one, or a new state of one kept).
    fn keep(
        &self,
        record: &SettlementRecord,
        state: SettlementState,
    ) -> Result<(), SettlementError> {
        let json = serde_json::to_string(record)?;
        let mut kept = self.lock();
        kept.store.keep(KeptRow {
            lease_id: &record.lease_id,
            period: record.period,
            renter: record.renter.as_str().to_ascii_lowercase(),
            provider: record.provider.as_str().to_ascii_lowercase(),
            paid: record.paid_micro_usd,
            state: state.code(),
            record: json,
        })?;
        kept.index.insert(
            (record.lease_id.clone(), record.period),
            (record.paid_micro_usd, state),
        );
        Ok(())
    }

    /// The kept settlements in `state`, oldest first.
    fn in_state(&self, state: SettlementState) -> Result<Vec<SettlementRecord>, SettlementError> {
        let records = self.lock().store.in_state(state.code())?;
        Ok(records
            .iter()
            .map(|json| serde_json::from_str(json))
            .collect::<Result<_, _>>()?)
    }

    /// The settlements `filter` selects, the newest first.
    pub fn page(&self, filter: &SettlementFilter) -> Result<Vec<KeptSettlement>, SettlementError> {
        let limit = filter.limit.unwrap_or(100).clamp(1, 1000) as i64;
        let party = filter.party.as_ref().map(|p| p.to_ascii_lowercase());
        let rows = self.lock().store.page(party, filter.lease.clone(), limit)?;
        rows.into_iter()
            .map(|(json, state)| {
                Ok(KeptSettlement {
                    record: serde_json::from_str(&json)?,
                    state: SettlementState::from_code(state),
                })
            })
            .collect()
    }
}

/// What one pass of the [`Settler`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pass {
    /// Periods settled now.
    pub settled: usize,
    /// Payments signed now (new, or waiting for a payee until now).
    pub signed: usize,
    /// Payments seen onto the chain now.
    pub paid: usize,
    /// Payments the chain did not take now (tried again next pass), each with why.
    pub undelivered: Vec<String>,
}

/// Where the settler finds the leases to settle, and the schedule the leases under way: the
/// validator's order book ([`crate::market::Market`]), or a test's.
pub trait LeaseBook: Send + Sync {
    /// Every lease the book's clearings made, oldest first.
    fn all_leases(&self) -> Vec<Lease>;

    /// The leases under way at `now_ms` (started, not ended).
    fn active_at(&self, now_ms: u64) -> Vec<Lease>;

    /// Logs the leases of stored clearings that are not in the ledger yet (a validator of the
    /// fleet died between storing a clearing and logging its leases, or the ledger refused
    /// them): how many clearings' leases were handed now, or why not.
    fn log_pending_leases(&self) -> Result<usize, String>;
}

/// How often, between settlement passes, the validator leading the log looks for leases that
/// a validator of the fleet stored and died before logging ([`Settler::run`]).
pub const PENDING_LEASES_EVERY: Duration = Duration::from_secs(2);

/// Settles the market's leases as their periods end.
pub struct Settler {
    market: Arc<dyn LeaseBook>,
    records: Arc<RecordStore>,
    settlements: Arc<Settlements>,
    escrow: Option<Arc<dyn EscrowPayments>>,
}

impl Settler {
    /// A settler of `market`'s leases from `records`' rounds, keeping them in `settlements`
    /// and paying through `escrow` (`None`: recorded only).
    pub fn new(
        market: Arc<dyn LeaseBook>,
        records: Arc<RecordStore>,
        settlements: Arc<Settlements>,
        escrow: Option<Arc<dyn EscrowPayments>>,
    ) -> Settler {
        Settler {
            market,
            records,
            settlements,
            escrow,
        }
    }

    /// One pass (blocking: it reads the registry and may wait on the chain): settles every
    /// period due, signs what waited for a payee, and sees signed payments onto the chain.
    pub fn pass(&self) -> Result<Pass, SettlementError> {
        let mut pass = Pass::default();
        // In a fleet, the validator leading the log settles for all (its settlements are the
        // fleet's, in the database): each settling would log every period once per validator.
        // Leases first: a lease's periods are never settled unlogged.
        if !self.log_pending_leases() {
            return Ok(pass);
        }
        self.settlements.catch_up();
        let now_ms = self.records.now_ms();
        let rules = *self.settlements.rules();
        for lease in self.market.all_leases() {
            for period in periods(&lease, &rules) {
                if !is_due(&period, &rules, now_ms)
                    || self.settlements.is_settled(&lease.id, period.index)
                {
                    continue;
                }
                let signed = self.settle_period(&lease, &period)?;
                pass.settled += 1;
                pass.signed += usize::from(signed);
            }
        }
        if self.escrow.is_some() {
            for record in self.settlements.in_state(SettlementState::AwaitingPayee)? {
                if self.sign_and_keep(record)? {
                    pass.signed += 1;
                }
            }
            self.deliver(&mut pass)?;
        }
        Ok(pass)
    }

    /// Where this validator leads the log (alone: always), logs the leases of the clearings a
    /// validator of the fleet stored and died before logging (kill -9, a lost host), which
    /// would otherwise wait for that validator's restart or another's next clearing; false
    /// (and nothing done) where another validator leads. Cheap when none is pending: one
    /// short transaction on the leases' mark ([`LeaseBook::log_pending_leases`]).
    pub fn log_pending_leases(&self) -> bool {
        if self.records.ledger().is_some_and(|l| !l.leads()) {
            return false;
        }
        match self.market.log_pending_leases() {
            Ok(0) => {}
            Ok(n) => tracing::info!("logged the leases of {n} clearing(s) left unlogged"),
            Err(e) => tracing::error!(error = %e, "logging clearings' pending leases"),
        }
        true
    }

    /// Settles one period: logs its record and keeps it; true when it was signed for the
    /// escrow.
    fn settle_period(&self, lease: &Lease, period: &Period) -> Result<bool, SettlementError> {
        let key = |hex: &str| {
            PublicKey::try_from(hex.to_string()).map_err(|e| SettlementError::BadLease {
                lease: lease.id.clone(),
                why: e.to_string(),
            })
        };
        let (renter, provider) = (key(&lease.renter)?, key(&lease.provider)?);
        let rules = *self.settlements.rules();
        let rounds = self.rounds_around(&lease.gpu, &provider, period, &rules)?;
        let undelivered = self.settlements.undelivered_from(&lease.id)?;
        let s = settle(lease, period, &rounds, &rules, undelivered);
        let record = SettlementRecord {
            version: pog_records::settlement::SETTLEMENT_VERSION,
            lease_id: lease.id.clone(),
            gpu_uuid: lease.gpu.clone(),
            renter,
            provider,
            period: period.index,
            from_ms: period.from_ms,
            to_ms: period.to_ms,
            hours: s.hours,
            proven_hours_ppm: s.proven_hours_ppm,
            price_micro_usd: lease.price_micro_usd,
            value_micro_usd: s.value_micro_usd,
            paid_micro_usd: s.paid_micro_usd,
            refunded_micro_usd: s.refunded_micro_usd,
            unproven: s.unproven().join("; "),
            payee: None,
            escrow: None,
            recorded_at_ms: self.records.now_ms(),
        };
        tracing::info!(
            lease = %lease.id,
            period = period.index,
            "settled: {}",
            s.detail()
        );
        if self.escrow.is_none() {
            self.records.log(&record)?;
            self.settlements.keep(&record, SettlementState::Recorded)?;
            return Ok(false);
        }
        self.sign_and_keep(record)
    }

    /// Signs a settlement for the escrow where its provider named an address to pay, logs it
    /// and keeps it; true when it was signed. Without an address it is logged (once) and kept
    /// awaiting one.
    fn sign_and_keep(&self, mut record: SettlementRecord) -> Result<bool, SettlementError> {
        let Some(escrow) = &self.escrow else {
            return Ok(false);
        };
        let awaiting = self
            .settlements
            .lock()
            .index
            .get(&(record.lease_id.clone(), record.period))
            .is_some_and(|(_, s)| *s == SettlementState::AwaitingPayee);
        let payee = self.payee_of(&record.gpu_uuid, &record.provider)?;
        let Some(payee) = payee else {
            if !awaiting {
                self.records.log(&record)?;
                self.settlements
                    .keep(&record, SettlementState::AwaitingPayee)?;
            }
            return Ok(false);
        };
        let terms = terms_of(&record, &payee);
        let payment = match escrow.sign(&terms) {
            Ok(p) => p,
            Err(e) => {
                // Kept awaiting (and held): signed at a later pass.
                tracing::warn!(lease = %record.lease_id, period = record.period, error = %e, "signing a settlement");
                if !awaiting {
                    self.records.log(&record)?;
                    self.settlements
                        .keep(&record, SettlementState::AwaitingPayee)?;
                }
                return Ok(false);
            }
        };
        record.payee = Some(payee);
        record.escrow = Some(payment);
        record.recorded_at_ms = self.records.now_ms();
        // The signed form is logged too: it is what pays.
        self.records.log(&record)?;
        self.settlements.keep(&record, SettlementState::Signed)?;
        Ok(true)
    }

    /// Sees every signed payment onto the chain.
    fn deliver(&self, pass: &mut Pass) -> Result<(), SettlementError> {
        let Some(escrow) = &self.escrow else {
            return Ok(());
        };
        for record in self.settlements.in_state(SettlementState::Signed)? {
            let (Some(payee), Some(payment)) = (&record.payee, &record.escrow) else {
                continue;
            };
            match escrow.deliver(&terms_of(&record, payee), payment) {
                Ok(true) => {
                    self.settlements.keep(&record, SettlementState::Paid)?;
                    pass.paid += 1;
                }
                Ok(false) => pass.undelivered.push(format!(
                    "lease {} period {}: not yet on chain",
                    record.lease_id, record.period
                )),
                Err(e) => pass.undelivered.push(format!(
                    "lease {} period {}: {e}",
                    record.lease_id, record.period
                )),
            }
        }
        Ok(())
    }

    /// The address the provider's agent named for `gpu`, while the GPU is registered to it.
    fn payee_of(
        &self,
        gpu: &GpuUuid,
        provider: &PublicKey,
    ) -> Result<Option<String>, SettlementError> {
        let registered = self.records.registry().gpu(gpu)?;
        Ok(registered
            .filter(|g| g.agent == *provider)
            .and_then(|g| g.token_owner)
            .map(|a| a.to_string()))
    }

    /// The provider's rounds of `gpu` around `period` (from a bridge before its start on), as
    /// the settlement counts them.
    fn rounds_around(
        &self,
        gpu: &GpuUuid,
        provider: &PublicKey,
        period: &Period,
        rules: &SettlementRules,
    ) -> Result<Vec<pog_market::evidence::Round>, SettlementError> {
        let since_ms = period.from_ms.saturating_sub(rules.bridge_ms);
        let mut limit = FIRST_ROWS;
        let read = loop {
            let rows = self.records.registry().latest_records(gpu, limit)?;
            let complete = rows.len() < limit || limit >= MAX_ROWS;
            let read = crate::rows::read_rows(&rows);
            let oldest = read
                .records
                .iter()
                .map(|r| r.recorded_at_ms)
                .chain(read.missed_rounds.iter().map(|m| m.recorded_at_ms))
                .min();
            if complete || oldest.is_some_and(|t| t < since_ms) {
                break read;
            }
            limit = (limit * 4).min(MAX_ROWS);
        };
        for why in &read.unreadable {
            tracing::warn!(gpu = gpu.as_str(), "settling, left out: {why}");
        }
        let theirs =
            |agent: Option<&str>| agent.is_some_and(|a| a.eq_ignore_ascii_case(provider.as_str()));
        let proofs: Vec<_> = read
            .records
            .iter()
            .filter(|r| theirs(r.agent.as_deref()))
            .collect();
        let memory: Vec<_> = read
            .memory_records
            .iter()
            .filter(|r| theirs(r.agent.as_deref()))
            .collect();
        let missed = read
            .missed_rounds
            .iter()
            .filter(|m| theirs(Some(m.agent.as_str())));
        Ok(pog_market::appraisal::rounds_of(&proofs, &memory, missed)
            .into_iter()
            .map(|(_, round)| round)
            .collect())
    }

    /// Passes every `every` until `stop` turns true, each off the async workers; between
    /// them, every [`PENDING_LEASES_EVERY`], logs the leases a validator that died left
    /// unlogged ([`Settler::log_pending_leases`]), so that they reach the log within seconds
    /// of its death (or of this validator taking the log's lead over from it), not at the
    /// next pass.
    pub async fn run(self: Arc<Self>, every: Duration, mut stop: watch::Receiver<bool>) {
        loop {
            let next_pass = tokio::time::Instant::now() + every;
            self.clone().pass_now().await;
            loop {
                let now = tokio::time::Instant::now();
                if now >= next_pass {
                    break;
                }
                tokio::select! {
                    _ = tokio::time::sleep_until(next_pass.min(now + PENDING_LEASES_EVERY)) => {}
                    changed = stop.changed() => if changed.is_err() { return },
                }
                if *stop.borrow() {
                    return;
                }
                if tokio::time::Instant::now() < next_pass {
                    let settler = self.clone();
                    if let Err(e) =
                        tokio::task::spawn_blocking(move || settler.log_pending_leases()).await
                    {
                        tracing::error!(error = %e, "logging pending leases stopped");
                    }
                }
            }
        }
    }

    /// One pass, off the async workers, its outcome said in the log.
    async fn pass_now(self: Arc<Self>) {
        match tokio::task::spawn_blocking(move || self.pass()).await {
            Ok(Ok(pass)) => {
                if pass.settled + pass.signed + pass.paid > 0 {
                    tracing::info!(
                        settled = pass.settled,
                        signed = pass.signed,
                        paid = pass.paid,
                        "settlement pass"
                    );
                }
                for why in pass.undelivered {
                    tracing::warn!("settlement not on chain yet: {why}");
                }
            }
            Ok(Err(e)) => tracing::error!(error = %e, "settling leases"),
            Err(e) => tracing::error!(error = %e, "the settlement pass stopped"),
        }
    }
}

/// The escrow's terms of a kept settlement paid to `payee`.
fn terms_of(record: &SettlementRecord, payee: &str) -> EscrowTerms {
    EscrowTerms {
        lease_id: record.lease_id.clone(),
        period: record.period,
        renter: record.renter.clone(),
        payee: payee.to_string(),
        paid_micro_usd: record.paid_micro_usd,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease() -> Lease {
        Lease {
            id: "1.0.0".into(),
            gpu: GpuUuid::new("GPU-1ea5e000-0000-4000-8000-000000000001").unwrap(),
            renter: "aa".repeat(32),
            provider: "bb".repeat(32),
            start_ms: 1_800_000_000_000,
            end_ms: 1_800_007_200_000,
            hours: 2,
            price_micro_usd: 2_000_000,
            access: None,
        }
    }

    /// The lease's first period settled for `paid`.
    fn settled(lease: &Lease, rules: &SettlementRules, paid: u64) -> SettlementRecord {
        let period = &periods(lease, rules)[0];
        SettlementRecord {
            version: pog_records::settlement::SETTLEMENT_VERSION,
            lease_id: lease.id.clone(),
            gpu_uuid: lease.gpu.clone(),
            renter: PublicKey::try_from(lease.renter.clone()).unwrap(),
            provider: PublicKey::try_from(lease.provider.clone()).unwrap(),
            period: period.index,
            from_ms: period.from_ms,
            to_ms: period.to_ms,
            hours: period.hours(),
            proven_hours_ppm: 1_000_000,
            price_micro_usd: lease.price_micro_usd,
            value_micro_usd: paid,
            paid_micro_usd: paid,
            refunded_micro_usd: 0,
            unproven: String::new(),
            payee: None,
            escrow: None,
            recorded_at_ms: period.to_ms,
        }
    }

    /// What a lease holds, its settlements' pages and its delivery reports, on SQLite and on
    /// PostgreSQL; on PostgreSQL, what one validator kept is what another holds and serves
    /// once it catches up, and a restart reads it back.
    #[test]
    fn settlements_are_kept_on_both_stores_and_shared_by_a_fleet() {
        let rules = SettlementRules::default();
        let lease = lease();
        let whole = lease.price_micro_usd * lease.hours;
        for place in crate::registry::testing::Place::all() {
            let registry = place.open();
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("settlements.sqlite");
            let open = || Settlements::open_beside(&registry, Some(&path), rules).unwrap();
            let (a, b) = (open(), open());
            assert_eq!(a.held_by(&lease), whole);
            let record = settled(&lease, &rules, 1_000);
            a.keep(&record, SettlementState::Signed).unwrap();
            let first = lease.price_micro_usd * periods(&lease, &rules)[0].hours();
            assert_eq!(a.held_by(&lease), whole - first + 1_000, "{}", place.name());
            assert_eq!(a.report_undelivered(&lease.id, 7, "no route").unwrap(), 7);
            assert_eq!(a.report_undelivered(&lease.id, 9, "again").unwrap(), 7);
            if registry.is_postgres() {
                b.catch_up();
                assert_eq!(b.held_by(&lease), a.held_by(&lease));
                assert_eq!(b.undelivered_from(&lease.id).unwrap(), Some(7));
                a.keep(&record, SettlementState::Paid).unwrap();
                b.catch_up();
                assert_eq!(b.held_by(&lease), whole - first);
            }
            drop((a, b));
            let again = open();
            assert!(again.is_settled(&lease.id, record.period));
            let page = again.page(&SettlementFilter::default()).unwrap();
            assert_eq!(page.len(), 1);
            assert_eq!(page[0].record, record);
        }
    }
}
