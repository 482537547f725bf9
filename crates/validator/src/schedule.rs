//! The validator's schedule: rounds of challenges that slow, silent or many-faced agents
//! cannot stall or game.
//!
//! - **Every GPU of a round at once.** A round challenges every registered GPU at the same
//!   moment (in a fresh random order, up to `max_concurrent` at a time), so one device
//!   registered under several UUIDs or agent keys must do all their work inside one time
//!   bound, and fails.
//! - **Rounds on a clock.** A round starts every `every`, whatever the last one is still
//!   waiting for; a GPU whose challenge is still running is skipped, not queued. Each
//!   challenge runs under its own deadline (`Validator::challenge`), so an agent that hangs
//!   or trickles costs only its own challenge, and an honest agent is challenged every
//!   `every` regardless. Rounds are counted on the validator's clock ([`Rounds`]), which a
//!   test sets and starts rounds by hand with.
//! - **Back-off and release.** A GPU whose agent cannot be reached is skipped for a growing
//!   number of rounds (1, 2, 4 … up to [`MAX_BACKOFF_ROUNDS`]); after `release_after`
//!   failed rounds in a row (unreachable or rejected) its registration is released, so a
//!   UUID squatted by a key that cannot prove it is freed for its owner.
//! - **The host after its GPUs.** Where an agent claims its host's cores, its first GPU (by
//!   UUID) carries the host's proof of CPU: once every GPU of that agent in the round has
//!   finished its own challenges, so that no GPU proof's work shares the cores being timed.
//!   Its proof of RAM follows, where it claims RAM (the data set built in the host's memory
//!   and walked on its CPU), then its proof of storage, where it claims storage
//!   (`crate::storage`).
//! - **Checks, not proofs, during a lease.** A GPU under a lease of its agent's
//!   ([`Rounds::with_leases`]) is only checked ([`Policy::for_lease`]): one small product
//!   against a loose bound, no proof of memory and none of its host's CPU, RAM or storage, so its tenant
//!   loses milliseconds a round. The rounds before the lease's start and after its end are
//!   full; the checks count for the settlement and never as the model's proof.
//! - **Missed rounds on record.** Each round a GPU is skipped in because its agent did not
//!   answer, the validator signs and stores a [`MissedRound`]: the GPU's uptime counts it as
//!   missed (`pog_market::evidence`), measured from records rather than assumed.

use pog_net::locked::Locked;
use pog_records::{
    Gemm, HostCpu, HostRam, Memory, MissedCause, MissedRound, Policy, ProofKind, ProofRecord,
    Record, RECORD_VERSION,
};

use crate::fleet;
use crate::registry_model::{AbandonedClaim, RegisteredGpu};
use crate::settlement::LeaseBook;
use crate::validator::{Validator, ValidatorError};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;

/// The most rounds an unreachable GPU is skipped for.
pub const MAX_BACKOFF_ROUNDS: u64 = 32;

/// How the schedule runs.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// Time between the starts of two rounds.
    pub every: Duration,
    /// The challenge policy each round applies.
    pub policy: Policy,
    /// Challenges in flight at once, across all agents.
    pub max_concurrent: usize,
    /// Failed rounds in a row after which a GPU's registration is released.
    pub release_after: u32,
    /// How long a released GPU's agent may not claim it again.
    pub release_bar: Duration,
    /// How far this validator's clock may be from its database server's before it stops
    /// taking a share of the fleet's slots (it would start them at another instant than the
    /// others); `None`: not checked (a test's clock, a validator alone).
    pub max_clock_skew: Option<Duration>,
    /// How long a host's accepted proof of RAM stands before its next one: each builds 90 % of
    /// the claimed RAM (about 0.9 s a GiB on 16 threads: docs/benchmarks.md), too much for
    /// every round. A failed or unanswered one is tried again at the host's next round.
    pub ram_every: Duration,
}

/// How long a host's accepted proof of RAM stands by default: a day.
pub const RAM_EVERY: Duration = Duration::from_secs(24 * 3600);

/// What `pog validator` allows between its clock and its database server's: well above what
/// NTP keeps servers to (a few ms), well below a proof's time.
pub const MAX_CLOCK_SKEW: Duration = Duration::from_millis(100);

impl Schedule {
    /// A round a minute under `policy`; up to 1024 challenges at once; a GPU released after
    /// five failed rounds in a row, its agent barred from it for an hour.
    pub fn every(every: Duration, policy: Policy) -> Schedule {
        Schedule {
            every,
            policy,
            max_concurrent: 1024,
            release_after: 5,
            release_bar: Duration::from_secs(3600),
            max_clock_skew: None,
            ram_every: RAM_EVERY,
        }
    }
}

impl Validator {
    /// Signs and stores a [`MissedRound`] for a registered GPU skipped this round after
    /// `failures` failed rounds in a row, the last one unanswered.
    pub fn record_missed_round(
        &self,
        uuid: &str,
        failures: u32,
    ) -> Result<MissedRound, ValidatorError> {
        let gpu = self
            .registry()
            .gpu(uuid)?
            .ok_or_else(|| ValidatorError::UnknownGpu(uuid.into()))?;
        let record = MissedRound {
            version: RECORD_VERSION,
            record_id: format!("missed-{}", hex::encode(pog_signed::random_bytes::<16>())),
            gpu_uuid: gpu.uuid,
            agent: gpu.agent,
            model: gpu.model,
            reason: format!(
                "not challenged this round: its agent did not answer its last challenge \
                 ({failures} failed round(s) in a row), so the validator backs off"
            ),
            cause: MissedCause::Agent,
            recorded_at_ms: self.records().now_ms(),
        };
        self.store((&record.record_id, None), false, &record)?;
        Ok(record)
    }

    /// Signs and stores the [`MissedRound`] of a slot that `claim`'s validator claimed and
    /// never finished: the fleet's fault, said so, under the one id of that slot and GPU
    /// ([`fleet::fleet_missed_id`]). Nothing for a GPU no longer registered.
    pub fn record_fleet_missed(
        &self,
        claim: &AbandonedClaim,
    ) -> Result<Option<MissedRound>, ValidatorError> {
        let Some(gpu) = self.registry().gpu(&claim.gpu_uuid)? else {
            return Ok(None);
        };
        let record = MissedRound {
            version: RECORD_VERSION,
            record_id: fleet::fleet_missed_id(claim.slot, &claim.gpu_uuid),
            gpu_uuid: gpu.uuid,
            agent: gpu.agent,
            model: gpu.model,
            reason: format!(
                "slot {}: validator {} claimed this GPU and stopped before its round was \
                 recorded: the fleet's fault, not the GPU's",
                claim.slot, claim.validator
            ),
            cause: MissedCause::Fleet,
            recorded_at_ms: self.records().now_ms(),
        };
        self.store((&record.record_id, None), false, &record)?;
        Ok(Some(record))
    }
}

/// A slot as this validator claimed its share ([`Rounds::claim_slot`]).
struct SlotClaim {
    /// The slot's number.
    slot: u64,
    /// The GPUs it holds in the slot.
    mine: Vec<String>,
    /// The live validators; `None` where its clock is too far off the database's to tell.
    live: Option<Vec<String>>,
}

/// What the schedule remembers of one GPU between rounds.
#[derive(Debug, Default, Clone, Copy)]
struct Standing {
    /// Failed rounds in a row.
    failures: u32,
    /// The first round it may be challenged in again.
    next_round: u64,
    /// It is backing off because its agent did not answer (not because the validator could
    /// not challenge it): the rounds it is skipped in are recorded as missed.
    unanswered: bool,
}

/// The schedule's state shared with its running challenges.
#[derive(Default)]
struct State {
    in_flight: HashSet<String>,
    standing: HashMap<String, Standing>,
    /// Claims whose rounds are recorded, finished in the store all at once when the next
    /// round starts (one round trip a slot, not one a GPU). Until then a claim reads unfinished, which
    /// is harmless: the sweep settles only claims with no record of their GPU stored since
    /// they were made ([`Registry::abandoned_claims`](crate::registry::Registry::abandoned_claims)).
    finished: Vec<(u64, String)>,
    /// When each host (by its first GPU) last had its RAM proven and accepted, on the
    /// validator's clock (kept in memory: a validator that restarts proves each host's RAM at
    /// its first round).
    ram_proven_ms: HashMap<String, u64>,
}

/// One GPU's round: the GEMM challenge, then (when the policy proves memory and the agent
/// answered) the memory challenge — one after the other, because the memory proof's data set
/// fills the GPU. Every round, not on a schedule of its own: a card swapped for a smaller one
/// between rounds must fail the next one. The memory record is stored and logged; the GPU's
/// standing (back-off, release) follows the GEMM challenge, which reaches the agent first.
/// Both records are the round of the fleet's `slot`, where it is one.
async fn prove_round(
    validator: &Validator,
    (gpu, slot): (&RegisteredGpu, Option<u64>),
    policy: &Policy,
) -> Result<Record, ValidatorError> {
    let uuid = gpu.uuid.as_str();
    let record = validator
        .challenge_registered::<Gemm>(gpu, policy, slot)
        .await?;
    let reached = !record
        .failure
        .as_ref()
        .is_some_and(|f| f.kind.is_unreachable());
    if policy.memory.enabled && reached {
        match validator
            .challenge_registered::<Memory>(gpu, policy, slot)
            .await
        {
            Ok(m) => tracing::info!(
                gpu = uuid,
                model = %m.model,
                accepted = m.accepted,
                gib_held = pog_net::rounding::for_log(
                    m.details.memory_challenge.dataset_bytes() as f64 / (1u64 << 30) as f64
                ),
                ratio_to_bound = m
                    .outcome
                    .as_ref()
                    .map(|o| pog_net::rounding::for_log(o.time.ratio)),
                failure = m.failure.as_ref().map(|f| f.message.as_str()),
                "memory challenged"
            ),
            Err(e) => tracing::warn!(gpu = uuid, error = %e, "memory not challenged"),
        }
    }
    if reached {
        crate::health::collect_logged(validator, gpu).await;
    }
    Ok(record)
}

/// Challenges the GPUs `uuids` all at once and waits for every result.
pub async fn challenge_together(
    validator: &Arc<Validator>,
    uuids: Vec<String>,
    policy: &Policy,
) -> Vec<(String, Result<Record, ValidatorError>)> {
    let mut round = tokio::task::JoinSet::new();
    for uuid in uuids {
        let (v, p) = (validator.clone(), policy.clone());
        round.spawn(async move {
            let gpu = v.records().unblocked(|| v.registry().gpu(&uuid)).await;
            let result = match gpu {
                Ok(Some(gpu)) => prove_round(&v, (&gpu, None), &p).await,
                Ok(None) => Err(ValidatorError::UnknownGpu(uuid.clone())),
                Err(e) => Err(e.into()),
            };
            (uuid, result)
        });
    }
    let mut results = Vec::new();
    while let Some(done) = round.join_next().await {
        match done {
            Ok(result) => results.push(result),
            Err(e) => tracing::error!(error = %e, "a challenge task failed"),
        }
    }
    results
}

/// The schedule's rounds, started one at a time: [`run`] starts one every `every`; a test
/// starts them by hand ([`Rounds::start`], [`Rounds::settled`]) with the validator's clock
/// where it wants it.
///
/// Rounds are numbered from 1 by the validator's clock
/// ([`RecordStore::now_ms`](crate::store::RecordStore::now_ms)): a round is one more than the
/// `every`s passed since the first round (to the nearest), and at least one more than the last
/// round. On time, that is one more each round; a round late by whole `every`s counts the
/// slots it missed, so that a back-off lasts the time it says; a clock that steps back never
/// numbers a round twice.
pub struct Rounds {
    validator: Arc<Validator>,
    schedule: Schedule,
    stop: tokio::sync::watch::Receiver<bool>,
    state: Arc<Mutex<State>>,
    permits: Arc<Semaphore>,
    running: tokio::task::JoinSet<()>,
    /// The clock's time at the first round, and the last round's number.
    first_ms: Option<u64>,
    last: u64,
    /// Where the leases under way are found (none: every round is full).
    leases: Option<Arc<dyn LeaseBook>>,
    /// How late the rounds' runtime woke [`probe_stalls`] since the last round started.
    stalls: Arc<Mutex<Stalls>>,
}

/// How late the rounds' runtime woke a task that slept ([`probe_stalls`]), in ms: an
/// exchange waiting for its agent's answer, or about to send its next step, waits as long.
#[derive(Debug, Default, Clone, Copy)]
struct Stalls {
    /// The latest wake-up.
    max_ms: u64,
    /// The wake-ups' lateness, summed.
    total_ms: u64,
}

/// How long [`probe_stalls`] sleeps between its wake-ups.
const PROBE_EVERY: Duration = Duration::from_millis(100);

/// Sleeps [`PROBE_EVERY`] again and again on the rounds' runtime, adding how late each
/// wake-up came to `stalls` (the round's start line logs them).
async fn probe_stalls(stalls: Arc<Mutex<Stalls>>) {
    loop {
        let asleep = tokio::time::Instant::now();
        tokio::time::sleep(PROBE_EVERY).await;
        let late_ms = asleep.elapsed().saturating_sub(PROBE_EVERY).as_millis() as u64;
        let mut noted = stalls.locked();
        noted.max_ms = noted.max_ms.max(late_ms);
        noted.total_ms = noted.total_ms.saturating_add(late_ms);
    }
}

impl Rounds {
    /// The rounds of `schedule` over `validator`'s registry, none started yet; a challenge
    /// waiting for its turn does not start once `stop` says so.
    pub fn new(
        validator: Arc<Validator>,
        schedule: Schedule,
        stop: tokio::sync::watch::Receiver<bool>,
    ) -> Rounds {
        Rounds {
            permits: Arc::new(Semaphore::new(schedule.max_concurrent.max(1))),
            validator,
            schedule,
            stop,
            state: Arc::new(Mutex::new(State::default())),
            running: tokio::task::JoinSet::new(),
            first_ms: None,
            last: 0,
            leases: None,
            stalls: Arc::default(),
        }
    }

    /// These rounds, checking rather than proving the GPUs under a lease of `leases`.
    pub fn with_leases(mut self, leases: Arc<dyn LeaseBook>) -> Rounds {
        self.leases = Some(leases);
        self
    }

    /// The GPUs of `groups` (every registered GPU, by agent) under a lease now whose provider
    /// is the agent they are registered to (a lease of a GPU's earlier holder is not its
    /// present agent's to deliver).
    fn leased_now(&self, groups: &[(String, Vec<String>)]) -> HashSet<String> {
        let Some(book) = &self.leases else {
            return HashSet::new();
        };
        let now = self.validator.records().now_ms();
        let agents: HashMap<&str, &str> = groups
            .iter()
            .flat_map(|(agent, uuids)| uuids.iter().map(move |u| (u.as_str(), agent.as_str())))
            .collect();
        book.active_at(now)
            .into_iter()
            .filter(|l| {
                agents
                    .get(l.gpu.as_str())
                    .is_some_and(|agent| agent.eq_ignore_ascii_case(&l.provider))
            })
            .map(|l| l.gpu.to_string())
            .collect()
    }

    /// The next round's number by the validator's clock now.
    fn next_round(&mut self) -> u64 {
        let now = self.validator.records().now_ms();
        let every_ms = u64::try_from(self.schedule.every.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        let first = *self.first_ms.get_or_insert(now);
        let passed = now.saturating_sub(first).saturating_add(every_ms / 2) / every_ms;
        self.last = passed.saturating_add(1).max(self.last + 1);
        self.last
    }

    /// Starts a round: every registered GPU not in flight and not backing off is challenged
    /// (up to `max_concurrent` at once), and each GPU skipped because its agent did not answer
    /// gets its missed round recorded. Returns the round's number without waiting for it.
    pub fn start(&mut self) -> u64 {
        let entered_ms = self.validator.records().now_ms();
        let round = self.next_round();
        while self.running.try_join_next().is_some() {}
        self.finish_claims();
        let groups = match self.validator.registry().gpus_by_agent() {
            Ok(groups) => groups,
            Err(e) => {
                tracing::error!(error = %e, "reading the registry");
                return round;
            }
        };
        // The fleet's share: the GPUs this validator is first for among the live validators,
        // claimed for the slot (a single validator is first for all of them).
        let SlotClaim { slot, mine, live } = match self.claim_slot(&groups) {
            Ok(claimed) => claimed,
            Err(e) => {
                tracing::error!(error = %e, "claiming the slot's GPUs");
                return round;
            }
        };
        self.sweep_abandoned(live.as_deref());
        match self.validator.record_releases() {
            Ok(0) => {}
            Ok(written) => tracing::info!(written, "recorded releases whose records were lost"),
            Err(e) => tracing::error!(error = %e, "recording releases whose records were lost"),
        }
        // The held GPUs' registry rows, read together (one query, not one a GPU); one that left
        // the registry since the claim is not challenged.
        let rows: HashMap<String, Arc<RegisteredGpu>> =
            match self.validator.registry().gpus_named(&mine) {
                Ok(rows) => rows
                    .into_iter()
                    .map(|g| (g.uuid.to_string(), Arc::new(g)))
                    .collect(),
                Err(e) => {
                    tracing::error!(error = %e, "reading the round's GPUs");
                    return round;
                }
            };
        let mine: Vec<String> = mine.into_iter().filter(|u| rows.contains_key(u)).collect();
        let (due, backing_off) = due(&self.state, mine, round);
        let leased = self.leased_now(&groups);
        let hosts = HostRound::for_round(slot, &groups, &due, &leased);
        tracing::debug!(
            round,
            challenged = due.len(),
            backing_off = backing_off.len(),
            "round"
        );
        for (uuid, failures) in backing_off {
            let v = self.validator.clone();
            self.running.spawn(async move {
                let recorded = v
                    .records()
                    .unblocked(|| v.record_missed_round(&uuid, failures))
                    .await;
                if let Err(e) = recorded {
                    tracing::error!(gpu = %uuid, error = %e, "recording a missed round");
                }
            });
        }
        let challenged = due.len();
        for uuid in due {
            let (v, schedule, state, permits) = (
                self.validator.clone(),
                self.schedule.clone(),
                self.state.clone(),
                self.permits.clone(),
            );
            let stop = self.stop.clone();
            let host = hosts.get(&uuid).cloned();
            let gpu = rows.get(&uuid).cloned();
            let policy = match leased.contains(&uuid) {
                true => schedule.policy.for_lease(),
                false => schedule.policy.clone(),
            };
            self.running.spawn(async move {
                // However this task ends (a panic included), the GPU leaves `in_flight`, and
                // its host's proof of CPU stops waiting for it.
                let _in_flight = InFlight {
                    state: state.clone(),
                    uuid: uuid.clone(),
                };
                let finished = host.as_ref().map(|h| h.finished_guard());
                let Ok(permit) = permits.clone().acquire_owned().await else {
                    return;
                };
                if *stop.borrow() {
                    return; // stopping: no new challenge after the permit wait
                }
                // Every due GPU has its row (`mine` was narrowed to them above).
                let Some(gpu) = gpu else {
                    return;
                };
                let result = prove_round(&v, (&gpu, Some(slot)), &policy).await;
                let reached = result
                    .as_ref()
                    .is_ok_and(|r| !r.failure.as_ref().is_some_and(|f| f.kind.is_unreachable()));
                v.records()
                    .unblocked(|| settle(&v, &schedule, &state, &uuid, round, result))
                    .await;
                state.locked().finished.push((slot, uuid.clone()));
                drop((permit, finished));
                if let Some(host) = host.filter(|h| h.anchor == uuid && reached) {
                    host.prove_cpu(&v, &permits, &stop, &schedule.policy).await;
                    host.prove_ram(&v, (&permits, &stop), &schedule, &state)
                        .await;
                    host.prove_storage(&v, &permits, &stop, &schedule.policy)
                        .await;
                }
            });
        }
        // When the round began after its slot's start, and how long its claims, reads and
        // dispatch took: a fleet's validators should start each slot within their clocks'
        // skew of each other (the load harness reads these lines).
        // And how late the rounds' runtime woke a sleeping task since the last round started
        // (its exchanges' steps waited as long).
        let now = self.validator.records().now_ms();
        let stalls = std::mem::take(&mut *self.stalls.locked());
        tracing::info!(
            target: "pog::round",
            slot,
            late_ms = entered_ms.saturating_sub(slot.saturating_mul(self.every_ms())),
            dispatched_ms = now.saturating_sub(entered_ms),
            challenged,
            stalled_max_ms = stalls.max_ms,
            stalled_ms = stalls.total_ms,
            "round started"
        );
        round
    }

    /// Finishes in the store the claims whose rounds were recorded since the last round
    /// started: one database round trip a slot. Ones that fail to finish stay unfinished, harmlessly
    /// (their records are stored), and are not tried again.
    fn finish_claims(&self) {
        let finished = std::mem::take(&mut self.state.locked().finished);
        let mut by_slot: std::collections::BTreeMap<u64, Vec<String>> = Default::default();
        for (slot, uuid) in finished {
            by_slot.entry(slot).or_default().push(uuid);
        }
        for (slot, uuids) in by_slot {
            if let Err(e) = self.validator.registry().finish_claims(slot, &uuids) {
                tracing::error!(slot, gpus = uuids.len(), error = %e, "finishing the slot's claims");
            }
        }
    }

    /// Claims this slot's share of `groups` (every registered GPU, by agent): the GPUs that
    /// rank this validator first among the live validators ([`fleet::assigned_to`]), leased
    /// for two slots.
    fn claim_slot(&self, groups: &[(String, Vec<String>)]) -> Result<SlotClaim, ValidatorError> {
        let now = self.validator.records().now_ms();
        let every_ms = self.every_ms();
        let slot = fleet::slot_at(now, every_ms);
        if let Some(off_ms) = clock_off(&self.validator, self.schedule.max_clock_skew)? {
            tracing::error!(
                slot,
                off_ms,
                "this validator's clock is {off_ms} ms off its database server's (at most {} ms \
                 allowed): it takes no share of the slot until its clock is set right",
                self.schedule.max_clock_skew.map_or(0, |d| d.as_millis())
            );
            return Ok(SlotClaim {
                slot,
                mine: Vec::new(),
                live: None,
            });
        }
        let me = self.validator.public_key().to_string();
        let mut registry = self.validator.registry();
        let seen = registry.heartbeat(&me, now)?;
        let mut live = fleet::live(&seen, now, every_ms);
        if !live.contains(&me) {
            // Its own heartbeat is in the rows it just wrote, unless its clock runs behind
            // the others' by more than the live horizon: it takes its share all the same.
            live.push(me.clone());
            live.sort();
        }
        let assigned: Vec<String> = groups
            .iter()
            .flat_map(|(_, uuids)| uuids)
            .filter(|uuid| fleet::assigned_to(uuid, &live) == Some(&me))
            .cloned()
            .collect();
        let lease_until = now.saturating_add(2 * every_ms);
        let held = registry.claim((slot, &me), &assigned, lease_until)?;
        Ok(SlotClaim {
            slot,
            mine: held,
            live: Some(live),
        })
    }

    /// Settles the claims that a validator made and never finished (it stopped in its slot):
    /// one missed round a claim, on the fleet, never on the GPU, stored by whichever validator
    /// settles it first. A claim whose lease ran out is not abandoned while its round still
    /// runs: this validator's own whose GPU is in flight here (a challenge may run its
    /// set-up's expiry and the policy's, longer than the lease's two slots; an agent holding
    /// its answers that long had its round settled as the fleet's fault, not its own, and on
    /// PostgreSQL its real record refused as late), nor another's that is among the `live`
    /// validators (its heartbeats say it runs; it settles its own). `live` is `None` where
    /// this validator cannot tell (its clock off the database's): only its own are settled.
    fn sweep_abandoned(&self, live: Option<&[String]>) {
        let now = self.validator.records().now_ms();
        let abandoned = match self.validator.registry().abandoned_claims(now) {
            Ok(abandoned) => abandoned,
            Err(e) => {
                tracing::error!(error = %e, "reading the fleet's abandoned claims");
                return;
            }
        };
        let me = self.validator.public_key().to_string();
        for claim in abandoned {
            let still_running = if claim.validator == me {
                self.state.locked().in_flight.contains(&claim.gpu_uuid)
            } else {
                live.is_none_or(|live| live.contains(&claim.validator))
            };
            if still_running {
                continue;
            }
            match self
                .validator
                .registry()
                .settle_claim(claim.slot, &claim.gpu_uuid)
            {
                Ok(true) => {}
                Ok(false) => continue, // another validator settled it
                Err(e) => {
                    tracing::error!(gpu = %claim.gpu_uuid, error = %e, "settling a claim");
                    continue;
                }
            }
            if let Err(e) = self.validator.record_fleet_missed(&claim) {
                // Not recorded: the claim goes back to the sweepers, so the next sweep (this
                // validator's or another's) records it.
                tracing::error!(gpu = %claim.gpu_uuid, error = %e, "recording a fleet-missed slot");
                if let Err(e) = self
                    .validator
                    .registry()
                    .reopen_claim(claim.slot, &claim.gpu_uuid)
                {
                    tracing::error!(gpu = %claim.gpu_uuid, error = %e, "reopening its claim");
                }
            }
        }
    }

    /// The slot's length, ms (at least 1).
    fn every_ms(&self) -> u64 {
        u64::try_from(self.schedule.every.as_millis())
            .unwrap_or(u64::MAX)
            .max(1)
    }

    /// Waits until every challenge and missed round started so far has ended (each challenge
    /// is bounded by its deadline).
    pub async fn settled(&mut self) {
        while self.running.join_next().await.is_some() {}
    }
}

/// How far (ms) `validator`'s clock is off its database server's beyond `allowed`, the
/// query's round trip given the benefit of the doubt; `None` when within it, not checked
/// (`allowed` is `None`), or the store has no server clock (SQLite).
fn clock_off(
    validator: &Validator,
    allowed: Option<Duration>,
) -> Result<Option<i64>, ValidatorError> {
    let Some(allowed) = allowed else {
        return Ok(None);
    };
    let clock = validator.records();
    let before = clock.now_ms() as i64;
    let Some(server) = validator.registry().server_time_ms()? else {
        return Ok(None);
    };
    let after = clock.now_ms() as i64;
    let off = server as i64 - (before + after) / 2;
    let doubt = (after - before) / 2;
    let beyond = off.abs() - doubt - allowed.as_millis() as i64;
    Ok((beyond > 0).then_some(off))
}

/// Says `validator` is alive every [`fleet::heartbeat_every_ms`] until `stop` says so, so that
/// the fleet drops it from the live set soon after it stops ([`fleet::live_horizon_ms`]), not
/// slots later. A validator whose clock is off its database server's by more than
/// `max_clock_skew` stays silent: it takes no share of the slots, and the others must not
/// count on it for one.
async fn heartbeats(
    validator: Arc<Validator>,
    (every_ms, max_clock_skew): (u64, Option<Duration>),
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let me = validator.public_key().to_string();
    let period = Duration::from_millis(fleet::heartbeat_every_ms(every_ms));
    loop {
        let (v, me) = (validator.clone(), me.clone());
        let beat = tokio::task::spawn_blocking(move || {
            if clock_off(&v, max_clock_skew)?.is_some() {
                return Ok(()); // said at each slot's start, by the round
            }
            let now = v.records().now_ms();
            v.registry().heartbeat(&me, now).map(|_| ())?;
            Ok::<(), ValidatorError>(())
        });
        match beat.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "saying this validator is alive"),
            Err(e) => tracing::error!(error = %e, "the heartbeat task failed"),
        }
        tokio::select! {
            _ = tokio::time::sleep(period) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Runs `rounds` until their `stop` says so, one at the start of each slot of `every` (a round
/// is started whatever the last one is still waiting for), saying between slots that this
/// validator is alive where it is one of a fleet ([`heartbeats`]); challenges already running
/// finish before this returns.
pub async fn run(mut rounds: Rounds) {
    let (validator, mut stop) = (rounds.validator.clone(), rounds.stop.clone());
    // Only a fleet's validators (on PostgreSQL) have others to tell. In a set, so that the
    // heartbeats and the stall probe end with this future, however it ends (dropped included).
    let mut heartbeat = tokio::task::JoinSet::new();
    heartbeat.spawn(probe_stalls(rounds.stalls.clone()));
    let records = validator.records();
    if records
        .unblocked(|| validator.registry().is_postgres())
        .await
    {
        heartbeat.spawn(heartbeats(
            validator.clone(),
            (rounds.every_ms(), rounds.schedule.max_clock_skew),
            stop.clone(),
        ));
    }
    // The first round at once, in the slot under way (what other validators of the fleet
    // claimed of it at its start stays theirs); then each at its slot's start on the
    // validator's clock, where the fleet's validators start theirs at the same instant
    // (within their clocks' skew). A round's start reads and claims in the registry: it
    // waits for it without holding a worker of the rounds (`RecordStore::unblocked`).
    records.unblocked(|| rounds.start()).await;
    loop {
        let now = validator.records().now_ms();
        let wait = fleet::next_slot_start(now, rounds.every_ms()).saturating_sub(now);
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(wait)) => {}
            _ = stop.changed() => break,
        }
        records.unblocked(|| rounds.start()).await;
    }
    heartbeat.abort_all();
    rounds.settled().await;
}

/// One agent's GPUs in a round, for its host's proof of CPU: the GPU that carries it, and
/// how many of the agent's GPUs in the round are still running their own challenges.
struct HostRound {
    /// The slot of the round: the host's records are its round.
    slot: u64,
    /// The agent's first GPU (by UUID), which the host's proof is addressed to.
    anchor: String,
    /// The agent's GPUs of this round still running.
    running: tokio::sync::watch::Sender<usize>,
}

impl HostRound {
    /// For each GPU due in this round whose agent's first GPU is due too, that agent's host
    /// round (shared by its GPUs); none for an agent with a GPU under a lease (`leased`):
    /// its tenant uses the host's cores too.
    fn for_round(
        slot: u64,
        groups: &[(String, Vec<String>)],
        due: &[String],
        leased: &HashSet<String>,
    ) -> HashMap<String, Arc<HostRound>> {
        let due: HashSet<&String> = due.iter().collect();
        let mut hosts = HashMap::new();
        for (_, uuids) in groups {
            let Some(anchor) = uuids.first().filter(|a| due.contains(a)) else {
                continue;
            };
            if uuids.iter().any(|u| leased.contains(u)) {
                continue;
            }
            let mine: Vec<&String> = uuids.iter().filter(|u| due.contains(u)).collect();
            let host = Arc::new(HostRound {
                slot,
                anchor: anchor.clone(),
                running: tokio::sync::watch::Sender::new(mine.len()),
            });
            for uuid in mine {
                hosts.insert(uuid.clone(), host.clone());
            }
        }
        hosts
    }

    /// Counts one GPU of the host finished when dropped, however its task ends.
    fn finished_guard(self: &Arc<Self>) -> HostFinished {
        HostFinished(self.clone())
    }

    /// Whether the host's registration (its first GPU's) makes the claim `claimed` reads; not
    /// when the registry cannot be read.
    async fn claims(
        &self,
        validator: &Validator,
        claimed: impl Fn(&crate::registry_model::RegisteredGpu) -> bool,
    ) -> bool {
        validator
            .records()
            .unblocked(|| validator.registry().gpu(&self.anchor))
            .await
            .ok()
            .flatten()
            .is_some_and(|g| claimed(&g))
    }

    /// A proof of kind `K` of the host, on its first GPU, once all its GPUs of the round are
    /// done, where the policy proves it (`enabled`) and the agent made the claim `claimed`
    /// reads; `None` where it does not run (off, unclaimed, or the round stopping).
    async fn challenge_host<K: ProofKind>(
        &self,
        validator: &Validator,
        (permits, stop): (&Arc<Semaphore>, &tokio::sync::watch::Receiver<bool>),
        (policy, enabled): (&Policy, bool),
        claimed: impl Fn(&crate::registry_model::RegisteredGpu) -> bool,
    ) -> Option<Result<ProofRecord<K::Details>, ValidatorError>> {
        if !enabled || !self.claims(validator, claimed).await {
            return None;
        }
        let _permit = self.turn(permits, stop).await?;
        Some(
            validator
                .challenge_in_slot::<K>(&self.anchor, policy, Some(self.slot))
                .await,
        )
    }

    /// The host's proof of CPU, on its first GPU, once all its GPUs of the round are done
    /// (the agent claimed cores and the policy proves them; a failure is logged, and does
    /// not count against the GPU's standing).
    async fn prove_cpu(
        &self,
        validator: &Validator,
        permits: &Arc<Semaphore>,
        stop: &tokio::sync::watch::Receiver<bool>,
        policy: &Policy,
    ) {
        let ran = self
            .challenge_host::<HostCpu>(
                validator,
                (permits, stop),
                (policy, policy.cpu.enabled),
                |g| g.host_cores.is_some(),
            )
            .await;
        match ran {
            Some(Ok(r)) => tracing::info!(
                gpu = %self.anchor,
                lanes = r.details.cpu_challenge.lanes,
                accepted = r.accepted,
                calibration_ms = r.details.calibration_ms.map(pog_net::rounding::for_log),
                steps_per_s = r
                    .details
                    .steps_per_s(r.outcome.as_ref())
                    .map(pog_net::rounding::for_log),
                ratio_to_bound = r
                    .outcome
                    .as_ref()
                    .map(|o| pog_net::rounding::for_log(o.time.ratio)),
                failure = r.failure.as_ref().map(|f| f.message.as_str()),
                "host CPU challenged"
            ),
            Some(Err(e)) => {
                tracing::warn!(gpu = %self.anchor, error = %e, "host CPU not challenged")
            }
            None => {}
        }
    }

    /// The host's proof of RAM, on its first GPU, after its proof of CPU (the agent claimed
    /// RAM and the policy proves it), unless one was accepted within the schedule's
    /// `ram_every`; a failure is recorded and logged, and does not count against the GPU's
    /// standing.
    async fn prove_ram(
        &self,
        validator: &Validator,
        (permits, stop): (&Arc<Semaphore>, &tokio::sync::watch::Receiver<bool>),
        schedule: &Schedule,
        state: &Mutex<State>,
    ) {
        let now = validator.records().now_ms();
        let stands = u64::try_from(schedule.ram_every.as_millis()).unwrap_or(u64::MAX);
        let proven = state.locked().ram_proven_ms.get(&self.anchor).copied();
        if proven.is_some_and(|at| now.saturating_sub(at) < stands) {
            return;
        }
        let policy = &schedule.policy;
        let ran = self
            .challenge_host::<HostRam>(
                validator,
                (permits, stop),
                (policy, policy.ram.enabled),
                |g| g.host_ram.is_some(),
            )
            .await;
        if matches!(&ran, Some(Ok(r)) if r.accepted) {
            state
                .locked()
                .ram_proven_ms
                .insert(self.anchor.clone(), now);
        }
        match ran {
            Some(Ok(r)) => tracing::info!(
                gpu = %self.anchor,
                items = r.details.ram_challenge.items,
                accepted = r.accepted,
                build_ms = r.details.build_ms.map(pog_net::rounding::for_log),
                walk_gbs = r
                    .details
                    .walk_gbs(r.outcome.as_ref())
                    .map(pog_net::rounding::for_log),
                ratio_to_bound = r
                    .outcome
                    .as_ref()
                    .map(|o| pog_net::rounding::for_log(o.time.ratio)),
                failure = r.failure.as_ref().map(|f| f.message.as_str()),
                "host RAM challenged"
            ),
            Some(Err(e)) => {
                tracing::warn!(gpu = %self.anchor, error = %e, "host RAM not challenged")
            }
            None => {}
        }
    }

    /// The host's proof of storage, on its first GPU, after its proof of CPU (the agent
    /// claimed storage and the policy proves it; a failure is recorded and logged, and does
    /// not count against the GPU's standing).
    async fn prove_storage(
        &self,
        validator: &Validator,
        permits: &Arc<Semaphore>,
        stop: &tokio::sync::watch::Receiver<bool>,
        policy: &Policy,
    ) {
        if !policy.storage.enabled || !self.claims(validator, |g| g.host_storage.is_some()).await {
            return;
        }
        let Some(_permit) = self.turn(permits, stop).await else {
            return;
        };
        match validator
            .prove_storage(&self.anchor, policy, Some(self.slot))
            .await
        {
            Ok(Some(r)) => tracing::info!(
                gpu = %self.anchor,
                bytes = r.claim.bytes,
                class = %r.claim.class,
                accepted = r.accepted,
                built = r.audit.is_some(),
                reads_per_s = r.reads_per_s().map(pog_net::rounding::for_log),
                ratio_to_bound = r
                    .round
                    .as_ref()
                    .map(|o| pog_net::rounding::for_log(o.time.ratio)),
                rejection = r
                    .round
                    .as_ref()
                    .and_then(|o| o.rejection.as_deref())
                    .or(r.audit.as_ref().and_then(|a| a.rejection.as_deref())),
                failure = r.failure.as_ref().map(|f| f.message.as_str()),
                "host storage challenged"
            ),
            Ok(None) => {}
            Err(e) => tracing::warn!(gpu = %self.anchor, error = %e, "host storage not challenged"),
        }
    }

    /// The host's turn once all its GPUs of the round are done: a permit of the round's
    /// concurrency, or `None` when the round is stopping.
    async fn turn(
        &self,
        permits: &Arc<Semaphore>,
        stop: &tokio::sync::watch::Receiver<bool>,
    ) -> Option<tokio::sync::OwnedSemaphorePermit> {
        let mut running = self.running.subscribe();
        running.wait_for(|n| *n == 0).await.ok()?;
        let permit = permits.clone().acquire_owned().await.ok()?;
        (!*stop.borrow()).then_some(permit)
    }
}

/// One GPU of a host round that has not finished yet; finished when dropped.
struct HostFinished(Arc<HostRound>);

impl Drop for HostFinished {
    fn drop(&mut self) {
        self.0.running.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// A GPU's place in `in_flight`, given up when its challenge task ends however it ends.
struct InFlight {
    state: Arc<Mutex<State>>,
    uuid: String,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.state.locked().in_flight.remove(&self.uuid);
    }
}

/// The GPUs of this round: registered, not in flight, not backing off; marked in flight, in
/// a random order (so no agent can count on being challenged before or after another). And
/// those skipped because their agent did not answer (with their failed rounds in a row):
/// their missed rounds are recorded.
fn due(state: &Mutex<State>, uuids: Vec<String>, round: u64) -> (Vec<String>, Vec<(String, u32)>) {
    let mut state = state.locked();
    let registered: HashSet<&String> = uuids.iter().collect();
    state.standing.retain(|uuid, _| registered.contains(uuid));
    let backing_off: Vec<(String, u32)> = uuids
        .iter()
        .filter(|uuid| !state.in_flight.contains(*uuid))
        .filter_map(|uuid| {
            let s = state.standing.get(uuid)?;
            (s.next_round > round && s.unanswered).then(|| (uuid.clone(), s.failures))
        })
        .collect();
    let mut due: Vec<String> = uuids
        .iter()
        .filter(|uuid| !state.in_flight.contains(*uuid))
        .filter(|uuid| {
            state
                .standing
                .get(*uuid)
                .is_none_or(|s| s.next_round <= round)
        })
        .cloned()
        .collect();
    for uuid in &due {
        state.in_flight.insert(uuid.clone());
    }
    shuffle(&mut due);
    (due, backing_off)
}

/// Fisher-Yates with the operating system's randomness.
fn shuffle(items: &mut [String]) {
    for i in (1..items.len()).rev() {
        let r = u64::from_le_bytes(pog_signed::random_bytes());
        items.swap(i, (r % (i as u64 + 1)) as usize);
    }
}

/// Records a challenge's end in the GPU's standing: backs it off when unreachable, releases
/// it after too many failures in a row, and logs one line.
fn settle(
    validator: &Validator,
    schedule: &Schedule,
    state: &Mutex<State>,
    uuid: &str,
    round: u64,
    result: Result<Record, ValidatorError>,
) {
    let mut release = false;
    {
        let mut state = state.locked();
        let standing = state.standing.entry(uuid.to_string()).or_default();
        match &result {
            Ok(record) if record.accepted => *standing = Standing::default(),
            Ok(record) => {
                standing.failures += 1;
                let unreachable = record
                    .failure
                    .as_ref()
                    .is_some_and(|f| f.kind.is_unreachable());
                if unreachable {
                    let skip = (1u64 << standing.failures.min(6)).min(MAX_BACKOFF_ROUNDS);
                    standing.next_round = round + skip;
                }
                standing.unanswered = unreachable;
                release = standing.failures >= schedule.release_after;
            }
            // Not challenged at all (no plan for its model, a registry error): backed off
            // and, if it persists, released like a GPU that fails.
            Err(_) => {
                standing.failures += 1;
                let skip = (1u64 << standing.failures.min(6)).min(MAX_BACKOFF_ROUNDS);
                standing.next_round = round + skip;
                standing.unanswered = false;
                release = standing.failures >= schedule.release_after;
            }
        }
        if release {
            state.standing.remove(uuid);
        }
    }
    match &result {
        Ok(r) => tracing::info!(
            gpu = uuid,
            model = %r.model,
            plan = ?r.policy.plan,
            precision = %r.details.challenge.precision,
            accepted = r.accepted,
            ratio_to_bound = r
                .outcome
                .as_ref()
                .map(|o| pog_net::rounding::for_log(o.time.ratio)),
            failure = r.failure.as_ref().map(|f| f.message.as_str()),
            "challenged"
        ),
        Err(e) => tracing::warn!(gpu = uuid, error = %e, "not challenged"),
    }
    if release {
        let reason = format!(
            "failed or unreachable in {} rounds in a row",
            schedule.release_after
        );
        match validator.release(uuid, &reason, schedule.release_bar) {
            Ok(()) => tracing::warn!(gpu = uuid, %reason, "registration released"),
            Err(e) => tracing::error!(gpu = uuid, error = %e, "releasing the registration"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validator::tests::{ran_while_the_registry_was_held, RoundTask};

    /// A round's start (its reads and claims in the registry), waiting for the registry (held
    /// meanwhile by another thread: a slow database write), holds no worker of the rounds'
    /// runtime: with two workers and two validators' rounds starting, another task of that
    /// runtime still runs. Told to stop beforehand, each ends after its first round.
    #[test]
    fn a_round_starting_while_the_registry_is_held_holds_no_worker_of_the_rounds() {
        let validator = Arc::new(
            Validator::new(
                pog_signed::Identity::from_seed([9; 32]),
                crate::registry::Registry::open(None).unwrap(),
            )
            .unwrap(),
        );
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let started = |v: &Arc<Validator>| -> RoundTask<()> {
            let schedule = Schedule::every(Duration::from_secs(60), Policy::per_model_default());
            Box::pin(run(Rounds::new(v.clone(), schedule, stopped.clone())))
        };
        let tasks = vec![started(&validator), started(&validator)];
        stop.send(true).unwrap();
        let (other_ran, _) = ran_while_the_registry_was_held(&validator, tasks);
        assert!(
            other_ran,
            "the rounds' runtime ran nothing else while a round's start waited for the registry"
        );
    }

    #[test]
    fn only_gpus_backing_off_for_an_unanswered_round_have_their_rounds_recorded_as_missed() {
        let state = Mutex::new(State::default());
        {
            let mut s = state.lock().unwrap();
            let standing = |failures, next_round, unanswered| Standing {
                failures,
                next_round,
                unanswered,
            };
            // Unanswered last round: backing off until round 12.
            s.standing
                .insert("GPU-silent".into(), standing(2, 12, true));
            // Not challenged for the validator's own reason: backing off, not the agent's doing.
            s.standing
                .insert("GPU-unplanned".into(), standing(1, 12, false));
            // Its back-off is over.
            s.standing.insert("GPU-back".into(), standing(1, 10, true));
            s.in_flight.insert("GPU-busy".into());
        }
        let uuids = [
            "GPU-silent",
            "GPU-unplanned",
            "GPU-back",
            "GPU-busy",
            "GPU-new",
        ]
        .map(String::from)
        .to_vec();
        let (mut due, backing_off) = due(&state, uuids, 10);
        due.sort();
        assert_eq!(due, vec!["GPU-back".to_string(), "GPU-new".to_string()]);
        assert_eq!(backing_off, vec![("GPU-silent".to_string(), 2)]);
        // The round its back-off ends, it is challenged again and nothing is missed.
        let (due, backing_off) = due_at(&state, 12);
        assert!(due.contains(&"GPU-silent".to_string()), "{due:?}");
        assert!(backing_off.is_empty());
    }

    fn due_at(state: &Mutex<State>, round: u64) -> (Vec<String>, Vec<(String, u32)>) {
        due(state, vec!["GPU-silent".into()], round)
    }
}
