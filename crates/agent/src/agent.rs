//! `pog agent`: answers challenges for its GPUs. It runs only challenges signed by a validator
//! it trusts, for a GPU it has, computes the product, commits to the root and opens leaves on
//! request. Proofs are computed by a [`ProverEngine`]: the GPU engine on a GPU host, the CPU
//! engine for CI's end-to-end runs and the attack tests. The attack tests' dishonest agents
//! (`crate::misbehaviour`) exist only with the `test-doubles` feature. Even a validator it
//! trusts cannot pin its memory: one memory data set per GPU, memory challenges no larger than
//! the protocol plans for the claimed model, and nothing held past [`MEMORY_HOLD`] between the
//! validator's messages.

use crate::own_timing::Step;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use pog_local::provers::{ProverEngine, ProverError, SetUp};
use pog_net::clock::{SharedClock, SystemClock};
use pog_net::http::{envelope_response, ApiError};
use pog_net::locked::Locked;
use pog_proof::challenge::Addressee;
use pog_proof::memory::{self, MemoryChallenge};
use pog_proof::prover::Prover;
use pog_proof::task::Task;
use pog_proof::timing::CLOCK_SKEW_MS;
use pog_proof::wire::{
    self, kind, BadOpenRequest, ChallengeMessage, Commitment, GpuClaim, OpenRequest, Openings,
};
use pog_proof::wire::{CpuChallengeMessage, MemoryChallengeMessage, MemoryReady, WalkMessage};
use pog_proof::Challenge;
use pog_signed::{GpuUuid, Identity, PublicKey};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// The most leaves one open request may ask for (the validator asks for at most 1024).
pub const MAX_OPENINGS: usize = 4096;

/// How long the agent holds what a challenge leaves between two of the validator's messages:
/// a built data set until its walk, a walk's or a GEMM challenge's commitment until its open.
/// An honest validator sends each right after the agent's answer; a hostile one that never
/// does pins the memory no longer than this, whatever expiry it signed.
pub const MEMORY_HOLD: Duration = Duration::from_secs(30);

/// The longest id of a challenge or health request the agent takes (the validator's are 32
/// or 48 characters).
pub const MAX_ID_BYTES: usize = 128;

/// The longest a challenge may live from now, by its signed expiry (`pog validator
/// --expiry-ms` is at most an hour): its id is remembered that long.
pub const MAX_LIFETIME_MS: u64 = 3_600_000;

/// The most ids the agent remembers at once (each within its lifetime): at most about 20 MiB.
/// An honest validator sends a few a round per GPU.
pub const MAX_IDS_KEPT: usize = 100_000;

/// How many times the work of the protocol's plan for a GPU's claimed model a GEMM challenge
/// may ask (`Agent::check_planned_gemm`): a validator may plan from another measured rate, and
/// the bound's slack lets the honest model take up to 1.1 times its expected time.
pub const GEMM_WORK_SLACK: f64 = 4.0;

/// The most GEMM commitments the agent keeps for one GPU, waiting to be opened: a newer one
/// drops the oldest. An honest validator has one challenge in flight per GPU; a hostile one
/// (trusted) could otherwise pin a result per challenge it sends.
pub const GEMM_COMMITMENTS_KEPT: usize = 4;

/// A computed challenge waiting to be opened.
struct Computed {
    prover: Arc<dyn Prover>,
    /// The challenge's expiry (validator clock, ms).
    expires_at_ms: u64,
    issuer: PublicKey,
    /// The GPU whose memory walk this commits to (none for a GEMM challenge): the GPU's next
    /// build drops it, and it is dropped after [`MEMORY_HOLD`] unopened.
    walk_of: Option<GpuUuid>,
    /// The GPU whose GEMM challenge this commits to (none for a walk), and when it was kept:
    /// at most [`GEMM_COMMITMENTS_KEPT`] are kept a GPU, each for [`MEMORY_HOLD`] unopened.
    gemm_of: Option<(GpuUuid, std::time::Instant)>,
}

/// A built memory data set waiting for its walk nonce.
struct Built {
    challenge_id: String,
    dataset: Box<dyn SetUp>,
    issuer: PublicKey,
}

/// What one GPU's memory slot holds: at most one data set, so a validator cannot make the
/// agent hold two for one GPU.
enum MemorySlot {
    /// A build or a walk is running: another build for the GPU is refused until it ends.
    Busy,
    /// A data set waiting for its walk.
    Built(Built),
}

/// A GPU's memory slot taken for a build or a walk, held by the blocking work itself (so the
/// slot stays taken until the work really ends, even when the request is gone). Dropped, it
/// leaves its built data set in the slot (freed after the hold unless walked), or the slot
/// empty.
struct SlotWork {
    agent: Arc<Agent>,
    gpu: GpuUuid,
    built: Option<Built>,
    runtime: tokio::runtime::Handle,
}

impl SlotWork {
    /// Leaves `built` in the slot when the work ends.
    fn keep(&mut self, built: Built) {
        self.built = Some(built);
    }
}

impl Drop for SlotWork {
    fn drop(&mut self) {
        let mut slots = self.agent.memory.locked();
        let Some(built) = self.built.take() else {
            slots.remove(&self.gpu);
            return;
        };
        let (gpu, id) = (self.gpu.clone(), built.challenge_id.clone());
        slots.insert(self.gpu.clone(), MemorySlot::Built(built));
        drop(slots);
        self.agent.after_hold(&self.runtime, move |agent| {
            let mut slots = agent.memory.locked();
            let unwalked =
                matches!(slots.get(&gpu), Some(MemorySlot::Built(b)) if b.challenge_id == id);
            let freed = unwalked.then(|| slots.remove(&gpu));
            drop(slots);
            drop(freed);
        });
    }
}

/// A GEMM computation counted against its GPU ([`Agent::start_gemm`]) until dropped.
struct Computing {
    agent: Arc<Agent>,
    gpu: GpuUuid,
}

impl Drop for Computing {
    fn drop(&mut self) {
        let mut computing = self.agent.computing.locked();
        if let Some(running) = computing.get_mut(&self.gpu) {
            *running = running.saturating_sub(1);
            if *running == 0 {
                computing.remove(&self.gpu);
            }
        }
    }
}

/// The agent's state.
pub struct Agent {
    identity: Identity,
    trusted_validators: Vec<PublicKey>,
    gpus: Vec<GpuClaim>,
    pub(crate) engine: Arc<dyn ProverEngine>,
    /// Computed challenges by id, kept until opened.
    provers: Mutex<HashMap<String, Computed>>,
    /// Each GPU's memory slot, by UUID: its one data set, built or in use.
    memory: Mutex<HashMap<GpuUuid, MemorySlot>>,
    /// How long a data set waits for its walk and a commitment for its open.
    memory_hold: Duration,
    /// Every challenge id taken, with its expiry (validator clock), until it can no longer be
    /// replayed: a captured challenge cannot make the agent compute twice.
    answered: Mutex<HashMap<String, u64>>,
    /// GEMM computations running, by GPU: at most [`GEMM_COMMITMENTS_KEPT`] a GPU.
    computing: Mutex<HashMap<GpuUuid, usize>>,
    /// The health monitor of its GPUs (`crate::watch`), and whether `/metrics` is served on
    /// the API's port.
    watch: Option<(Arc<crate::watch::Watch>, bool)>,
    /// The wall clock expiries and health requests are judged by (the system clock; a test's
    /// clock in tests).
    clock: SharedClock,
    /// The storage it proves (`pog agent --storage-dir`), if it claims any.
    pub(crate) storage: Option<Arc<crate::storage::HostStorage>>,
    /// The RAM it proves, bytes (`pog agent --ram-claim`), if it claims any: no proof of RAM
    /// asks more of it than this claim's plan.
    ram: Option<u64>,
    /// The proofs the validator times, while they run: a storage build in the background
    /// makes way for them (`pog_local::storage::Foreground`).
    pub(crate) foreground: pog_local::storage::Foreground,
    /// A test agent's misbehaviour (never in a release build).
    #[cfg(feature = "test-doubles")]
    pub(crate) cheating: Option<crate::misbehaviour::Cheating>,
}

impl Agent {
    /// An honest agent proving with `engine`.
    pub fn new(
        identity: Identity,
        trusted_validators: Vec<PublicKey>,
        gpus: Vec<GpuClaim>,
        engine: Arc<dyn ProverEngine>,
    ) -> Agent {
        Agent {
            identity,
            trusted_validators,
            gpus,
            engine,
            provers: Mutex::new(HashMap::new()),
            memory: Mutex::new(HashMap::new()),
            memory_hold: MEMORY_HOLD,
            answered: Mutex::new(HashMap::new()),
            computing: Mutex::new(HashMap::new()),
            watch: None,
            clock: SystemClock::shared(),
            storage: None,
            ram: None,
            foreground: Default::default(),
            #[cfg(feature = "test-doubles")]
            cheating: None,
        }
    }

    /// The same agent judging expiries and health requests by `clock` (a test's clock).
    pub fn with_clock(mut self, clock: SharedClock) -> Agent {
        self.clock = clock;
        self
    }

    /// Proves `storage` (`/v1/storage/*`): the data set the validator asks for, built and
    /// kept in its directory.
    pub fn with_storage(mut self, storage: crate::storage::HostStorage) -> Agent {
        self.storage = Some(Arc::new(storage));
        self
    }

    /// Proves `bytes` of the host's RAM (`/v1/ram/*`): a data set sized from this claim, no
    /// larger, built in the host's memory each round.
    pub fn with_ram(mut self, bytes: u64) -> Agent {
        self.ram = Some(bytes);
        self
    }

    /// Answers health requests from `watch` (`POST /v1/health`), and serves its metrics at
    /// `GET /metrics` on the API's port when `metrics_here`.
    pub fn watching(mut self, watch: Arc<crate::watch::Watch>, metrics_here: bool) -> Agent {
        self.watch = Some((watch, metrics_here));
        self
    }

    /// Holds a data set unwalked, or a commitment unopened, for `hold` instead of
    /// [`MEMORY_HOLD`] (tests use a short hold).
    pub fn holding_memory_for(mut self, hold: Duration) -> Agent {
        self.memory_hold = hold;
        self
    }

    /// The agent's public key (hex), which names it to validators.
    pub fn public_key(&self) -> PublicKey {
        self.identity.public_key()
    }

    /// The GPUs the agent offers.
    pub fn gpus(&self) -> &[GpuClaim] {
        &self.gpus
    }

    /// The identity answers are signed with.
    pub(crate) fn signer(&self) -> &Identity {
        #[cfg(feature = "test-doubles")]
        if let Some(cheating) = &self.cheating {
            return cheating.signer(&self.identity);
        }
        &self.identity
    }

    /// Refuses a challenge (of either kind) not addressed to this agent by its signer, or for a
    /// GPU it does not have: work done for another agent's key would be credited to that agent
    /// (a relay), work for another issuer is not asked by it.
    pub(crate) fn check_addressed(
        &self,
        signer: &PublicKey,
        to: &Addressee,
    ) -> Result<(), ApiError> {
        self.check_trusted(signer, "challenge")?;
        if self.identity.public_key() != to.agent_key {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                format!(
                    "challenge addressed to agent {}, not to this agent ({})",
                    to.agent_key,
                    self.identity.public_key()
                ),
            ));
        }
        if to.validator_key != *signer {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                format!(
                    "challenge issued for validator {} but signed by {signer}",
                    to.validator_key
                ),
            ));
        }
        if !self
            .gpus
            .iter()
            .any(|g| g.uuid == to.gpu_uuid && g.bus_id == to.gpu_bus_id)
        {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                format!("this agent has no GPU {} at {}", to.gpu_uuid, to.gpu_bus_id),
            ));
        }
        Ok(())
    }

    /// Refuses a storage round that walks a kept data set not sent to this agent, for one of
    /// its GPUs, by a validator it trusts (the data set's `to`), or that is signed by a
    /// validator it does not trust. The round's signer may be another trusted validator than
    /// the data set's sender: a fleet's validator that takes the host up from the fleet's
    /// records walks the data set another sent, rather than have the host rebuild it.
    pub(crate) fn check_kept_round(
        &self,
        signer: &PublicKey,
        to: &Addressee,
    ) -> Result<(), ApiError> {
        self.check_addressed(&to.validator_key, to)?;
        self.check_trusted(signer, "storage round")
    }

    /// Refuses (403) a `what` signed by a validator this agent does not trust.
    pub(crate) fn check_trusted(&self, signer: &PublicKey, what: &str) -> Result<(), ApiError> {
        if self.trusted_validators.contains(signer) {
            return Ok(());
        }
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!("{what} signed by {signer}, which this agent does not trust"),
        ))
    }

    /// The wall clock expiries are judged by.
    pub(crate) fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Takes a challenge id (before any work, so two copies of one challenge cannot both
    /// run), refusing an expired or already answered one; forgets what can no longer be opened
    /// or replayed.
    pub(crate) fn take_id(&self, id: &str, expires_at_ms: u64) -> Result<(), ApiError> {
        // Ids are kept until their expiry: both are bounded, or a trusted but hostile
        // validator could pin memory with long ids that never expire.
        check_id(id)?;
        let now = self.clock.now_ms();
        if now > expires_at_ms.saturating_add(CLOCK_SKEW_MS) {
            return Err(ApiError::new(
                StatusCode::GONE,
                format!("{id} expired at {expires_at_ms} ms (now {now} ms)"),
            ));
        }
        if expires_at_ms > now.saturating_add(MAX_LIFETIME_MS + CLOCK_SKEW_MS) {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!(
                    "{id} expires more than {} s from now: a challenge lives at most that long",
                    MAX_LIFETIME_MS / 1000
                ),
            ));
        }
        let horizon = now.saturating_sub(CLOCK_SKEW_MS);
        self.provers
            .locked()
            .retain(|_, computed| computed.expires_at_ms >= horizon);
        let mut answered = self.answered.locked();
        answered.retain(|_, expires| *expires >= horizon);
        if answered.len() >= MAX_IDS_KEPT {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("{MAX_IDS_KEPT} challenges are within their lifetime: retry later"),
            ));
        }
        if answered.insert(id.to_string(), expires_at_ms).is_some() {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                format!("{id} was already answered"),
            ));
        }
        Ok(())
    }

    /// The model the agent claims `gpu` is ("" for a GPU it does not serve).
    fn claimed_model(&self, gpu: &str) -> &str {
        self.gpus
            .iter()
            .find(|g| g.uuid == gpu)
            .map_or("", |g| g.model.as_str())
    }

    /// Notes a step of a proof to its health monitor, which times the proofs it commits for
    /// its `/metrics` (`crate::own_timing`).
    fn timed(&self, step: Step<'_>) {
        if let Some((watch, _)) = &self.watch {
            watch.timed(self.claimed_model(step.gpu()), step);
        }
    }

    /// Refuses (400) a GEMM challenge that asks for more than the protocol plans for the GPU's
    /// claimed model in the challenge's precision (`params::plan_at`): a larger product, or
    /// more than [`GEMM_WORK_SLACK`] times the plan's work (a validator may plan from another
    /// measured rate). A hostile validator could otherwise hold the GPU for as long as it
    /// likes with one challenge.
    fn check_planned_gemm(&self, c: &Challenge) -> Result<(), Inadmissible> {
        let model = self.claimed_model(&c.to.gpu_uuid);
        let plan = pog_spec::SpecDb::embedded()
            .by_model(model)
            .and_then(|spec| {
                pog_proof::params::plan_at(spec, pog_spec::SpecDb::embedded(), c.precision)
            })
            .ok_or_else(|| Inadmissible::NoGemmPlan {
                precision: c.precision,
                model: model.to_string(),
            })?;
        let work = |size: u64, batch: u32| f64::from(batch) * (size as f64).powi(3);
        if c.size > plan.size {
            return Err(Inadmissible::GemmSize {
                gpu: c.to.gpu_uuid.clone(),
                model: model.to_string(),
                precision: c.precision,
                size: c.size,
                planned: plan.size,
            });
        }
        let limit = GEMM_WORK_SLACK * work(plan.size, plan.batch);
        if work(c.size, c.batch) > limit {
            return Err(Inadmissible::GemmWork {
                gpu: c.to.gpu_uuid.clone(),
                model: model.to_string(),
                precision: c.precision,
                asked: (c.batch, c.size),
                planned: (plan.batch, plan.size),
            });
        }
        Ok(())
    }

    /// Refuses (400) a memory challenge that asks for more than the protocol plans for the
    /// GPU's claimed model (`MemoryPlan::admits`), or for a model it plans none for.
    fn check_planned(&self, c: &MemoryChallenge) -> Result<(), Inadmissible> {
        let model = self.claimed_model(&c.to.gpu_uuid);
        let plan = pog_spec::SpecDb::embedded()
            .by_model(model)
            .and_then(|spec| memory::plan(spec, memory::WALK_SECONDS, None))
            .ok_or_else(|| Inadmissible::NoMemoryPlan {
                model: model.to_string(),
            })?;
        plan.admits(c)
            .map_err(|cause| Inadmissible::BeyondMemoryPlan {
                gpu: c.to.gpu_uuid.clone(),
                model: model.to_string(),
                cause,
            })
    }

    /// Refuses (400) a RAM challenge from an agent that claims no RAM, or one that asks more
    /// than the plan for its claim (`pog_proof::ram::admissible`): a larger data set, a longer
    /// walk.
    fn check_ram_planned(&self, c: &MemoryChallenge) -> Result<(), Inadmissible> {
        let claim = self.ram.ok_or(Inadmissible::NoRamClaim)?;
        pog_proof::ram::admissible(claim)
            .map_err(Inadmissible::RamClaim)?
            .admits(c)
            .map_err(|cause| Inadmissible::BeyondRamClaim { claim, cause })
    }

    /// Takes `gpu`'s memory slot for a new build by `issuer`: the data set it built there
    /// before, and its walk's commitment not yet opened, are dropped first (their memory is
    /// free before the new one is allocated); a build or walk still running there, or another
    /// validator's data set or unopened walk (held at most the hold), refuses it (409).
    fn slot_for_build(
        self: &Arc<Self>,
        gpu: &GpuUuid,
        issuer: &PublicKey,
    ) -> Result<SlotWork, ApiError> {
        let previous = {
            let mut slots = self.memory.locked();
            let busy = |why: &str| {
                Err(ApiError::new(
                    StatusCode::CONFLICT,
                    format!("GPU {gpu} {why}: one at a time"),
                ))
            };
            match slots.get(gpu) {
                Some(MemorySlot::Busy) => return busy("is building or walking a data set"),
                // Another validator's data set stays until its walk or the hold: one trusted
                // validator cannot make the agent fail another's round.
                Some(MemorySlot::Built(b)) if b.issuer != *issuer => {
                    return busy("holds another validator's data set")
                }
                _ => {}
            }
            let provers = self.provers.locked();
            if provers
                .values()
                .any(|c| c.walk_of.as_ref() == Some(gpu) && c.issuer != *issuer)
            {
                return busy("holds another validator's walk, not yet opened");
            }
            drop(provers);
            slots.insert(gpu.clone(), MemorySlot::Busy)
        };
        let walked: Vec<_> = self
            .provers
            .locked()
            .extract_if(|_, c| c.walk_of.as_ref() == Some(gpu))
            .collect();
        drop((previous, walked));
        Ok(self.slot_work(gpu))
    }

    /// Takes the data set built for `challenge_id` out of its GPU's slot for its walk (the
    /// slot stays taken until the walk ends): 404 if none is held, 403 if `signer` did not
    /// issue it (the data set stays for its issuer).
    fn slot_for_walk(
        self: &Arc<Self>,
        challenge_id: &str,
        signer: &str,
    ) -> Result<(Built, SlotWork), ApiError> {
        let not_held = || {
            ApiError::new(
                StatusCode::NOT_FOUND,
                format!(
                    "no data set held for challenge {challenge_id} (unknown, replaced by a newer \
                     build, not walked in time or already walked)"
                ),
            )
        };
        let mut slots = self.memory.locked();
        let held = slots.iter_mut().find(
            |(_, slot)| matches!(slot, MemorySlot::Built(b) if b.challenge_id == challenge_id),
        );
        match held {
            None => Err(not_held()),
            Some((_, MemorySlot::Built(b))) if b.issuer != signer => Err(ApiError::new(
                StatusCode::FORBIDDEN,
                format!("challenge {challenge_id} was issued by another validator"),
            )),
            Some((gpu, slot)) => match std::mem::replace(slot, MemorySlot::Busy) {
                MemorySlot::Built(built) => Ok((built, self.slot_work(gpu))),
                MemorySlot::Busy => Err(not_held()),
            },
        }
    }

    /// The work that has taken `gpu`'s slot (the caller set it busy), run on this runtime.
    fn slot_work(self: &Arc<Self>, gpu: &GpuUuid) -> SlotWork {
        SlotWork {
            agent: self.clone(),
            gpu: gpu.clone(),
            built: None,
            runtime: tokio::runtime::Handle::current(),
        }
    }

    /// Counts a GEMM computation for `gpu` until the returned guard is dropped; 503 when
    /// [`GEMM_COMMITMENTS_KEPT`] are running there already (each holds its product in memory
    /// until it ends: the commitments kept bound only those that have ended).
    fn start_gemm(self: &Arc<Self>, gpu: &GpuUuid) -> Result<Computing, ApiError> {
        let mut computing = self.computing.locked();
        let running = computing.entry(gpu.clone()).or_default();
        if *running >= GEMM_COMMITMENTS_KEPT {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("GPU {gpu} is computing {GEMM_COMMITMENTS_KEPT} challenges: retry later"),
            ));
        }
        *running += 1;
        Ok(Computing {
            agent: self.clone(),
            gpu: gpu.clone(),
        })
    }

    /// Keeps the commitment `prover` to GEMM challenge `id` for `gpu`, issued by `issuer`,
    /// until it is opened: the oldest of the GPU's beyond [`GEMM_COMMITMENTS_KEPT`] is dropped,
    /// and this one after the hold if still unopened (the validator opens right after the
    /// commitment arrives).
    fn keep_gemm(
        self: &Arc<Self>,
        (id, gpu): (&str, &GpuUuid),
        prover: Arc<dyn Prover>,
        (expires_at_ms, issuer): (u64, PublicKey),
    ) {
        let computed = Computed {
            prover,
            expires_at_ms,
            issuer,
            walk_of: None,
            gemm_of: Some((gpu.clone(), std::time::Instant::now())),
        };
        let dropped = {
            let mut provers = self.provers.locked();
            provers.insert(id.to_string(), computed);
            let mut kept: Vec<(std::time::Instant, String)> = provers
                .iter()
                .filter_map(|(id, c)| match &c.gemm_of {
                    Some((of, at)) if of == gpu => Some((*at, id.clone())),
                    _ => None,
                })
                .collect();
            kept.sort();
            let excess = kept.len().saturating_sub(GEMM_COMMITMENTS_KEPT);
            kept[..excess]
                .iter()
                .filter_map(|(_, id)| provers.remove(id))
                .collect::<Vec<_>>()
        };
        drop(dropped); // freed outside the lock
        let id = id.to_string();
        self.after_hold(&tokio::runtime::Handle::current(), move |agent| {
            let unopened = agent.provers.locked().remove(&id);
            drop(unopened);
        });
    }

    /// Runs `free` on this agent after [`Self::memory_hold`], unless the agent is gone.
    pub(crate) fn after_hold(
        self: &Arc<Self>,
        runtime: &tokio::runtime::Handle,
        free: impl FnOnce(&Agent) + Send + 'static,
    ) {
        let agent: Weak<Agent> = Arc::downgrade(self);
        let hold = self.memory_hold;
        runtime.spawn(async move {
            tokio::time::sleep(hold).await;
            if let Some(agent) = agent.upgrade() {
                free(&agent);
            }
        });
    }

    /// Computes a GEMM challenge with the engine (timed from the challenge: nothing to set
    /// up, no start nonce).
    fn compute(&self, challenge: &Challenge) -> Result<Arc<dyn Prover>, ProverError> {
        let gemm = |c: &Challenge| {
            let proved = self.engine.set_up(Task::Gemm(c))?.run(&[0; 32])?;
            Ok::<_, ProverError>(proved.prover)
        };
        #[cfg(feature = "test-doubles")]
        if let Some(cheating) = &self.cheating {
            if let Some(substitute) = cheating.substitute(challenge) {
                return Ok(substitute);
            }
            let prover = gemm(&cheating.target(challenge))?;
            cheating.computed(&prover);
            return Ok(prover);
        }
        gemm(challenge)
    }
}

/// The attack tests' agents: the same agent computing or answering dishonestly
/// ([`crate::misbehaviour`]); never in a release build.
#[cfg(feature = "test-doubles")]
impl Agent {
    /// The same agent computing dishonestly on the CPU (tests of the validator).
    pub fn misbehaving(
        mut self,
        behaviour: pog_proof::prover::Behaviour,
        cheat: Option<crate::misbehaviour::Cheat>,
    ) -> Agent {
        self.engine = Arc::new(pog_local::provers::CpuEngine { behaviour });
        self.cheating = cheat.map(crate::misbehaviour::Cheating::new);
        self
    }

    /// Makes this agent's `Cheat::OneDevice` the same device as other agents': one device
    /// behind several agent keys.
    pub fn sharing_device(mut self, device: Arc<tokio::sync::Mutex<()>>) -> Agent {
        if let Some(cheating) = &mut self.cheating {
            cheating.share_device(device);
        }
        self
    }
}

/// Why a challenge is refused (400) before any work: its shape, or more than the protocol
/// plans for the GPU's claimed model (`Agent::check_planned_gemm`, `Agent::check_planned`).
#[derive(Debug, thiserror::Error)]
enum Inadmissible {
    /// A GEMM challenge of a shape no prover should attempt.
    #[error(transparent)]
    Shape(#[from] pog_proof::challenge::BadShape),
    /// A memory challenge of a shape no prover should attempt.
    #[error(transparent)]
    MemoryShape(#[from] memory::BadMemoryShape),
    /// A CPU challenge of a shape no prover should attempt.
    #[error(transparent)]
    CpuShape(#[from] pog_proof::cpu::BadCpuShape),
    /// The protocol plans no GEMM challenge in this precision for the claimed model.
    #[error("the protocol plans no {precision} challenge for a {model:?}")]
    NoGemmPlan {
        /// The challenge's precision.
        precision: pog_spec::Precision,
        /// The GPU's claimed model ("" for a GPU the agent does not serve).
        model: String,
    },
    /// A product larger than the plan's.
    #[error("GPU {gpu} (claimed {model}): size {size} is beyond the {planned} the protocol plans in {precision}")]
    GemmSize {
        /// The GPU challenged.
        gpu: GpuUuid,
        /// Its claimed model.
        model: String,
        /// The challenge's precision.
        precision: pog_spec::Precision,
        /// The size asked.
        size: u64,
        /// The size planned.
        planned: u64,
    },
    /// More than [`GEMM_WORK_SLACK`] times the plan's work: (batch, size) asked and planned.
    #[error(
        "GPU {gpu} (claimed {model}): {} products of n = {} are beyond {GEMM_WORK_SLACK} \
         times the {} of n = {} the protocol plans in {precision}",
        .asked.0, .asked.1, .planned.0, .planned.1
    )]
    GemmWork {
        /// The GPU challenged.
        gpu: GpuUuid,
        /// Its claimed model.
        model: String,
        /// The challenge's precision.
        precision: pog_spec::Precision,
        /// The products and their size asked.
        asked: (u32, u64),
        /// The products and their size planned.
        planned: (u32, u64),
    },
    /// The protocol plans no memory proof for the claimed model.
    #[error("the protocol plans no memory proof for a {model:?}")]
    NoMemoryPlan {
        /// The GPU's claimed model ("" for a GPU the agent does not serve).
        model: String,
    },
    /// More than the memory proof's plan for the claimed model.
    #[error("GPU {gpu} (claimed {model}): {cause}")]
    BeyondMemoryPlan {
        /// The GPU challenged.
        gpu: GpuUuid,
        /// Its claimed model.
        model: String,
        /// What is beyond the plan.
        #[source]
        cause: memory::BeyondPlan,
    },
    /// A RAM challenge to an agent that claims no RAM.
    #[error("this agent claims no RAM to prove (pog agent --ram-claim)")]
    NoRamClaim,
    /// The agent's own claim is out of the proof's range.
    #[error(transparent)]
    RamClaim(pog_proof::ram::BadRamClaim),
    /// More than the plan for the claimed RAM.
    #[error("beyond this host's RAM claim of {claim} bytes: {cause}")]
    BeyondRamClaim {
        /// The agent's claim, bytes.
        claim: u64,
        /// What is beyond the claim's plan.
        #[source]
        cause: memory::BeyondPlan,
    },
}

/// Refuses (400) an id that is not 1 to [`MAX_ID_BYTES`] printable ASCII characters.
pub(crate) fn check_id(id: &str) -> Result<(), ApiError> {
    if id.is_empty() || id.len() > MAX_ID_BYTES || !id.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("an id is 1 to {MAX_ID_BYTES} printable ASCII characters"),
        ));
    }
    Ok(())
}

/// Refuses a challenge this agent cannot take as asked: a malformed shape or more than the
/// plan (400), a version (got, spoken, what) it does not speak (400), or work its prover
/// refuses (413, the reason; asked only of a well-shaped challenge, whose sizes cannot
/// overflow).
fn admit(
    shape: Result<(), Inadmissible>,
    (version, spoken, what): (u32, u32, &str),
    refused: impl FnOnce() -> Option<String>,
) -> Result<(), ApiError> {
    if let Err(e) = shape {
        return Err(ApiError::new(StatusCode::BAD_REQUEST, e.to_string()));
    }
    if version != spoken {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("unsupported {what} version {version}"),
        ));
    }
    match refused() {
        Some(reason) => Err(ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, reason)),
        None => Ok(()),
    }
}

pub(crate) async fn challenge(
    State(agent): State<Arc<Agent>>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let (message, signer): (ChallengeMessage, PublicKey) =
        pog_signed::decode(&body, kind::CHALLENGE)?;
    let c = &message.challenge;
    agent.check_addressed(&signer, &c.to)?;
    admit(
        c.check_shape()
            .map_err(Inadmissible::from)
            .and_then(|()| agent.check_planned_gemm(c)),
        (
            c.version,
            pog_proof::challenge::CHALLENGE_VERSION,
            "challenge",
        ),
        || agent.engine.refuses(Task::Gemm(c)),
    )?;
    let computing = agent.start_gemm(&c.to.gpu_uuid)?;
    agent.take_id(&message.id, message.expires_at_ms)?;
    let started = std::time::Instant::now();
    let worker = agent.clone();
    let challenge = c.clone();
    let what = format!("the {} prover failed", agent.engine.name());
    // The computation counts against its GPU until it ends, even if the request is gone.
    let prover = blocking(what, move || {
        let _computing = computing;
        let _timed = worker.foreground.begin();
        worker.compute(&challenge)
    })
    .await?;
    #[cfg(feature = "test-doubles")]
    if let Some(cheating) = &agent.cheating {
        cheating.before_commit().await;
    }
    let commitment = Commitment {
        challenge_id: message.id.clone(),
        gpu_uuid: c.to.gpu_uuid.clone(),
        root: hex::encode(prover.root()),
        leaf_count: prover.leaf_count(),
        agent_ms: started.elapsed().as_secs_f64() * 1e3,
    };
    agent.timed(Step::Gemm(c, commitment.agent_ms));
    agent.keep_gemm(
        (&message.id, &c.to.gpu_uuid),
        prover,
        (message.expires_at_ms, signer),
    );
    Ok(envelope_response(
        agent.signer().seal(kind::COMMITMENT, &commitment)?,
    ))
}

/// What a walk proof's set-up is of: the GPU's memory, or the host's RAM. Both are a
/// [`MemoryChallenge`] built and walked alike; their messages, plans and prover tasks differ.
struct WalkKind {
    /// The challenge's and the answer's message kinds.
    kinds: (&'static str, &'static str),
    /// What a refusal calls the challenge.
    name: &'static str,
    /// The agent's check that the challenge is within its plan for it.
    planned: fn(&Agent, &MemoryChallenge) -> Result<(), Inadmissible>,
    /// The prover's task for it.
    task: for<'a> fn(&'a MemoryChallenge) -> Task<'a>,
}

/// Builds a walk proof's data set and answers "ready" (signed): the challenge must be within
/// the agent's plan for its kind; the data set takes its GPU's slot (one set-up a GPU,
/// replacing the one held before, freed if not walked within the hold). The answer, and the
/// challenge's message.
async fn build_walk(
    agent: &Arc<Agent>,
    body: &Bytes,
    walk: WalkKind,
) -> Result<(Response, MemoryChallengeMessage), ApiError> {
    let (challenge_kind, ready_kind) = walk.kinds;
    let (message, signer): (MemoryChallengeMessage, PublicKey) =
        pog_signed::decode(body, challenge_kind)?;
    let c = &message.challenge;
    agent.check_addressed(&signer, &c.to)?;
    admit(
        c.check_shape()
            .map_err(Inadmissible::from)
            .and_then(|()| (walk.planned)(agent, c)),
        (c.version, pog_proof::memory::MEMORY_VERSION, walk.name),
        || agent.engine.refuses((walk.task)(c)),
    )?;
    let challenge = c.clone();
    let task = walk.task;
    let ready = set_up_in_slot(
        agent,
        (&message.id, message.expires_at_ms, &signer),
        &c.to.gpu_uuid,
        move |engine| engine.set_up(task(&challenge)),
    )
    .await?;
    let answer = envelope_response(agent.signer().seal(ready_kind, &ready)?);
    Ok((answer, message))
}

/// Builds a memory challenge's data set on the GPU and answers "ready" (signed): the
/// challenge must be within what the protocol plans for the GPU's claimed model.
pub(crate) async fn memory_build(
    State(agent): State<Arc<Agent>>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let walk = WalkKind {
        kinds: (kind::MEMORY_CHALLENGE, kind::MEMORY_READY),
        name: "memory challenge",
        planned: Agent::check_planned,
        task: |c| Task::Memory(c),
    };
    let (answer, message) = build_walk(&agent, &body, walk).await?;
    agent.timed(Step::Built(&message.id, &message.challenge));
    Ok(answer)
}

/// Runs a CPU challenge's calibration lanes (the set-up the validator times) and answers
/// "ready" (signed). The challenge must be within the protocol's limits and this host's
/// hardware threads; it takes its GPU's slot like a memory data set (one set-up a GPU).
pub(crate) async fn cpu_calibrate(
    State(agent): State<Arc<Agent>>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let (message, signer): (CpuChallengeMessage, PublicKey) =
        pog_signed::decode(&body, kind::CPU_CHALLENGE)?;
    let c = &message.challenge;
    agent.check_addressed(&signer, &c.to)?;
    admit(
        c.validate().map_err(Inadmissible::from),
        (c.version, pog_proof::cpu::CPU_VERSION, "CPU challenge"),
        || agent.engine.refuses(Task::Cpu(c)),
    )?;
    let challenge = c.clone();
    let ready = set_up_in_slot(
        &agent,
        (&message.id, message.expires_at_ms, &signer),
        &c.to.gpu_uuid,
        move |engine| engine.set_up(Task::Cpu(&challenge)),
    )
    .await?;
    Ok(envelope_response(
        agent.signer().seal(kind::CPU_READY, &ready)?,
    ))
}

/// Builds a proof of RAM's data set in the host's memory on its CPU and answers "ready"
/// (signed): the challenge must be within the plan for the agent's RAM claim.
pub(crate) async fn ram_build(
    State(agent): State<Arc<Agent>>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let walk = WalkKind {
        kinds: (kind::RAM_CHALLENGE, kind::RAM_READY),
        name: "RAM challenge",
        planned: Agent::check_ram_planned,
        task: |c| Task::Ram(c),
    };
    Ok(build_walk(&agent, &body, walk).await?.0)
}

/// The set-up phase of a kind that sets up first, in `gpu`'s slot (one at a time, held at
/// most the hold unless started): challenge `id` taken (each once, until it expires), the
/// engine's set-up run off the async threads, and the "ready" to sign.
async fn set_up_in_slot(
    agent: &Arc<Agent>,
    (id, expires_at_ms, signer): (&str, u64, &PublicKey),
    gpu: &GpuUuid,
    set_up: impl FnOnce(&dyn ProverEngine) -> Result<Box<dyn SetUp>, ProverError> + Send + 'static,
) -> Result<MemoryReady, ApiError> {
    agent.take_id(id, expires_at_ms)?;
    let mut work = agent.slot_for_build(gpu, signer)?;
    let started = std::time::Instant::now();
    let (challenge_id, issuer) = (id.to_string(), signer.clone());
    let what = format!("setting up on the {} prover failed", agent.engine.name());
    blocking(what, move || {
        let _timed = work.agent.foreground.begin();
        let dataset = set_up(work.agent.engine.as_ref())?;
        work.keep(Built {
            challenge_id,
            dataset,
            issuer,
        });
        Ok::<_, ProverError>(())
    })
    .await?;
    Ok(MemoryReady {
        challenge_id: id.to_string(),
        gpu_uuid: gpu.clone(),
        build_ms: started.elapsed().as_secs_f64() * 1e3,
    })
}

/// Walks a built data set with the validator's walk nonce and commits (the timed phase).
pub(crate) async fn memory_walk(
    State(agent): State<Arc<Agent>>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let commitment = timed_from_slot(&agent, &body, kind::MEMORY_WALK).await?;
    agent.timed(Step::Walked(
        &commitment.challenge_id,
        &commitment.gpu_uuid,
        commitment.agent_ms,
    ));
    Ok(envelope_response(
        agent.signer().seal(kind::COMMITMENT, &commitment)?,
    ))
}

/// Walks a built RAM data set with the validator's walk nonce and commits (the timed phase).
pub(crate) async fn ram_walk(
    State(agent): State<Arc<Agent>>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let commitment = timed_from_slot(&agent, &body, kind::RAM_WALK).await?;
    Ok(envelope_response(
        agent.signer().seal(kind::COMMITMENT, &commitment)?,
    ))
}

/// Runs a calibrated CPU challenge's lanes from the validator's start nonce and commits (the
/// timed phase).
pub(crate) async fn cpu_start(
    State(agent): State<Arc<Agent>>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let commitment = timed_from_slot(&agent, &body, kind::CPU_START).await?;
    Ok(envelope_response(
        agent.signer().seal(kind::COMMITMENT, &commitment)?,
    ))
}

/// The timed phase of a kind that set up first: the start message (`start_kind`) checked
/// against its expiry, what was set up for its challenge taken out of its GPU's slot (only by
/// the validator that issued it, once), run from the start nonce, and the commitment kept
/// for opening (dropped after the hold, or by the GPU's next set-up, if never opened).
async fn timed_from_slot(
    agent: &Arc<Agent>,
    body: &Bytes,
    start_kind: &str,
) -> Result<Commitment, ApiError> {
    let (message, signer): (WalkMessage, PublicKey) = pog_signed::decode(body, start_kind)?;
    let now = agent.clock.now_ms();
    if now > message.expires_at_ms.saturating_add(CLOCK_SKEW_MS) {
        return Err(ApiError::new(
            StatusCode::GONE,
            format!(
                "start of {} expired at {} ms (now {now} ms)",
                message.challenge_id, message.expires_at_ms
            ),
        ));
    }
    // Run once, and only for the validator that issued the challenge: a refused request
    // leaves what was set up for the issuer.
    let (built, work) = agent.slot_for_walk(&message.challenge_id, &signer)?;
    let started = std::time::Instant::now();
    let nonce = message.walk_nonce;
    let id = message.challenge_id.clone();
    let expires_at_ms = message.expires_at_ms;
    let what = format!(
        "the timed phase on the {} prover failed",
        agent.engine.name()
    );
    // The commitment is kept before the slot is given back, so the GPU's next set-up finds
    // and drops it if it is never opened.
    let (gpu_uuid, root, leaf_count) = blocking(what, move || {
        let _timed = work.agent.foreground.begin();
        let ran = built.dataset.run(&nonce)?;
        let kept = (work.gpu.clone(), ran.prover.root(), ran.prover.leaf_count());
        work.agent.provers.locked().insert(
            id.clone(),
            Computed {
                prover: ran.prover,
                expires_at_ms,
                issuer: signer,
                walk_of: Some(work.gpu.clone()),
                gemm_of: None,
            },
        );
        work.agent.after_hold(&work.runtime, move |agent| {
            let unopened = agent.provers.locked().remove(&id);
            drop(unopened);
        });
        Ok::<_, ProverError>(kept)
    })
    .await?;
    Ok(Commitment {
        challenge_id: message.challenge_id,
        gpu_uuid,
        root: hex::encode(root),
        leaf_count,
        agent_ms: started.elapsed().as_secs_f64() * 1e3,
    })
}

/// `POST /v1/open`: the issuing validator's request to open a computed challenge, answered
/// once with the leaves asked and one multiproof of them ([`Openings::compact`]), as a frame
/// ([`Openings::seal`]). A request
/// for no leaves, too many, leaves past the commitment or not strictly increasing is refused
/// before anything is opened, and leaves the challenge to its issuer.
pub(crate) async fn open(
    State(agent): State<Arc<Agent>>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let (request, signer): (OpenRequest, PublicKey) = pog_signed::decode(&body, kind::OPEN)?;
    agent.check_trusted(&signer, "open request")?;
    if request.leaves.len() > MAX_OPENINGS {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "{} leaves asked, at most {MAX_OPENINGS}",
                request.leaves.len()
            ),
        ));
    }
    // Opened once, and only by the validator that issued it: a valid request takes the
    // computed challenge out (a refused one leaves it for the issuer).
    let prover = {
        let mut provers = agent.provers.locked();
        let Some(Computed { prover, issuer, .. }) = provers.get(&request.challenge_id) else {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                format!(
                    "unknown or already opened challenge {}",
                    request.challenge_id
                ),
            ));
        };
        if *issuer != signer {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                format!(
                    "challenge {} was issued by another validator",
                    request.challenge_id
                ),
            ));
        }
        // Leaves in range, strictly increasing (one multiproof proves them), at least one.
        if let Err(bad) = request.check(prover.leaf_count(), MAX_OPENINGS) {
            let status = match bad {
                BadOpenRequest::TooMany { .. } => StatusCode::PAYLOAD_TOO_LARGE,
                _ => StatusCode::BAD_REQUEST,
            };
            return Err(ApiError::new(status, bad.to_string()));
        }
        provers
            .remove(&request.challenge_id)
            .map(|computed| computed.prover)
            .expect("present: checked under the same lock")
    };
    // The leaves with their paths, the paths merged into one multiproof (wire::Openings).
    let leaves = request.leaves;
    let id = request.challenge_id;
    let answer = blocking("opening leaves failed".into(), move || {
        let opened = prover.open(&leaves).map_err(|e| e.to_string())?;
        Openings::compact(id, prover.leaf_count(), &opened).map_err(|e| e.to_string())
    })
    .await?;
    let frame = answer.seal(agent.signer())?;
    Ok((
        [(axum::http::header::CONTENT_TYPE, "application/octet-stream")],
        frame,
    )
        .into_response())
}

/// The Prometheus metrics of the agent's GPUs, when it serves them on this port.
pub(crate) async fn metrics(
    State(agent): State<Arc<Agent>>,
    headers: axum::http::HeaderMap,
) -> Result<Response, ApiError> {
    match &agent.watch {
        Some((watch, true)) => Ok(crate::watch::render_metrics(watch, &headers)),
        _ => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "this agent serves no metrics on this port",
        )),
    }
}

/// A trusted validator's request for one GPU's health over a window, answered with the
/// agent's signed summary of it (self-reported telemetry).
pub(crate) async fn health(
    State(agent): State<Arc<Agent>>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let (request, signer): (wire::HealthRequest, PublicKey) =
        pog_signed::decode(&body, kind::HEALTH_REQUEST)?;
    agent.check_trusted(&signer, "health request")?;
    if request.agent_key != agent.identity.public_key() {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!("health request addressed to agent {}", request.agent_key),
        ));
    }
    let now = agent.clock.now_ms();
    if now.abs_diff(request.issued_at_ms) > CLOCK_SKEW_MS {
        return Err(ApiError::new(
            StatusCode::GONE,
            format!(
                "health request issued at {} ms, now {now} ms",
                request.issued_at_ms
            ),
        ));
    }
    request
        .check()
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.to_string()))?;
    if !agent.gpus.iter().any(|g| g.uuid == request.gpu_uuid) {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("this agent has no GPU {}", request.gpu_uuid),
        ));
    }
    let Some((watch, _)) = &agent.watch else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "this agent runs no health monitor",
        ));
    };
    // Each request is answered once: a captured one replayed within the clock skew gets no
    // fresh signed summary.
    agent.take_id(
        &format!("health-{}", request.id),
        request.issued_at_ms.saturating_add(CLOCK_SKEW_MS),
    )?;
    let summary = watch.summary(&request).ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            format!("the health monitor does not watch GPU {}", request.gpu_uuid),
        )
    })?;
    Ok(envelope_response(
        agent.signer().seal(kind::HEALTH_SUMMARY, &summary)?,
    ))
}

/// Runs prover work off the async runtime (it can take seconds); its failure, or a panic, is a
/// 500 that says `what` failed.
pub(crate) async fn blocking<T: Send + 'static, E: std::fmt::Display + Send + 'static>(
    what: String,
    work: impl FnOnce() -> Result<T, E> + Send + 'static,
) -> Result<T, ApiError> {
    let failed = |e: &dyn std::fmt::Display| {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("{what}: {e}"))
    };
    match tokio::task::spawn_blocking(work).await {
        Ok(Ok(done)) => Ok(done),
        Ok(Err(e)) => Err(failed(&e)),
        Err(panicked) => Err(failed(&panicked)),
    }
}

/// Why registering with a validator failed.
#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    /// The registration could not be signed or encoded: nothing is sent.
    #[error(transparent)]
    Wire(#[from] pog_signed::WireError),
    /// The validator refused the registration, or the post failed other than by its being
    /// unreachable.
    #[error(transparent)]
    Post(#[from] pog_net::http::PostError),
    /// The client (no redirects) could not be built: nothing is sent.
    #[error(transparent)]
    Client(#[from] pog_net::http::BuildClientError),
}

/// The longest wait between two registration attempts.
pub const MAX_REGISTER_BACKOFF: std::time::Duration = std::time::Duration::from_secs(30);

/// The host's claim as an agent registers it: the hardware threads this process may run on
/// (the lanes of its proof of CPU), the address its owner names for its GPUs' tokens, the
/// storage it proves (`pog agent --storage-size`) and the RAM it proves (`--ram-claim`).
pub fn host_claim(
    token_owner: Option<pog_signed::EvmAddress>,
    storage: Option<pog_proof::storage::StorageClaim>,
    ram: Option<u64>,
) -> wire::HostClaim {
    wire::HostClaim {
        cores: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
        token_owner,
        storage,
        ram,
    }
}

/// Registers with the validator at `validator_url`. While nothing answers there (it is down
/// or starting), it says so through `on_retry` at once and tries again, waiting twice as long
/// each time up to [`MAX_REGISTER_BACKOFF`]; any answer from the validator, a refusal
/// included, ends it.
pub async fn register(
    validator_url: &str,
    identity: &Identity,
    (endpoint, host): (&str, Option<wire::HostClaim>),
    gpus: &[GpuClaim],
    mut on_retry: impl FnMut(&pog_net::http::PostError, std::time::Duration),
) -> Result<(), RegisterError> {
    let envelope = identity.seal(
        kind::REGISTER,
        &wire::Register {
            endpoint: endpoint.to_string(),
            gpus: gpus.to_vec(),
            host,
        },
    )?;
    // No redirects: the signed registration goes to the validator named, nowhere else.
    let client = pog_net::http::ClientSettings::new("registration").build()?;
    let mut wait = std::time::Duration::from_millis(250);
    loop {
        match pog_net::http::post(
            &client,
            &format!("{validator_url}/v1/register"),
            &envelope,
            std::time::Duration::from_secs(30),
        )
        .await
        {
            Ok(_) => return Ok(()),
            Err(e) if e.is_unreachable() => {
                on_retry(&e, wait);
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(MAX_REGISTER_BACKOFF);
            }
            Err(e) => return Err(e.into()),
        }
    }
}
