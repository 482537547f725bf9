//! `pog validator`: registers agents and their GPUs, challenges a GPU through its agent,
//! verifies the answer (values, Merkle proofs, its own clock) and stores a signed record.

use crate::clock::now_ms;
use crate::http::{post_counted, ApiError, BuildClientError, ClientSettings};
use crate::locked::Locked;
use crate::registry::{Change, Registry, RegistryError, RECORD_VERSION};
use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post as post_route};
use axum::Router;
use pog_proof::challenge::CHALLENGE_VERSION;
use pog_proof::memory::{MemoryChallenge, MemoryPlan, MemoryRate};
use pog_proof::session::{Outcome, SpotChecked, ValidatorSession};
use pog_proof::wire::{
    self, kind, ChallengeMessage, Commitment, Identity, OpenRequest, Openings, Register,
};
use pog_proof::wire::{MemoryChallengeMessage, MemoryReady, WalkMessage};
use pog_proof::Challenge;
use pog_spec::{GpuSpec, Precision, SpecDb};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Where a challenge's shape and time bound come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanKind {
    /// Planned from the claimed model (`pog_proof::params::plan_in`): at least
    /// [`PLANNED_SECONDS`] of that model's work, in the precision that separates it from
    /// cheaper models, against a bound from its measured rate. The only plan that proves a
    /// model, and the default.
    PerModel,
    /// The fixed `size`, `batch` and `expected_ms` of the policy (`pog validator
    /// --test-plan`): for tests and demos with the CPU prover. It proves no model — one CPU
    /// core answers a small one in time — and every record made under it says so.
    Test,
}

/// How a GPU is challenged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Policy {
    /// Per-model (real) or a fixed test plan.
    pub plan: PlanKind,
    /// None: the precision `pog_proof::params::choose_precision` picks for the claimed model.
    pub precision: Option<Precision>,
    /// m = n = k of each GEMM (a per-model plan fills it in).
    pub size: u64,
    /// Independent GEMMs per challenge (a per-model plan fills it in).
    pub batch: u32,
    /// Output elements per Merkle leaf.
    pub leaf_elements: u32,
    /// The claimed model's expected time to commit.
    pub expected_ms: f64,
    /// Leaves spot-checked per challenge.
    pub samples: u32,
    /// How long the agent has to commit.
    pub expiry_ms: u64,
    /// The proof of memory each round (after the GEMM challenge).
    #[serde(default)]
    pub memory: MemoryPolicy,
}

/// Whether a round also proves memory, and (under a test plan) its fixed shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryPolicy {
    /// Whether a round proves memory at all.
    pub enabled: bool,
    /// Walkers spot-checked.
    pub samples: u32,
    /// A test plan's data set, walk and bound; a per-model plan takes them from the claimed
    /// model (`pog_proof::memory::plan`) and ignores these.
    pub items: u64,
    /// A test plan's walkers, each one 16-byte output.
    pub walkers: u64,
    /// A test plan's random steps per walker.
    pub steps: u32,
    /// A test plan's bound from walk nonce to commitment, ms.
    pub expected_ms: f64,
}

impl Default for MemoryPolicy {
    /// On, planned per model, with `pog_proof::memory::SAMPLES` spot checks.
    fn default() -> Self {
        MemoryPolicy {
            enabled: true,
            samples: pog_proof::memory::SAMPLES,
            items: 0,
            walkers: 0,
            steps: 0,
            expected_ms: 0.0,
        }
    }
}

impl MemoryPolicy {
    /// No memory proof.
    pub fn off() -> MemoryPolicy {
        MemoryPolicy {
            enabled: false,
            ..MemoryPolicy::default()
        }
    }

    /// A fixed small shape for test plans: 4096 items (512 KiB), 1024 walkers of 16 steps,
    /// which one CPU core answers in milliseconds. It proves no model.
    pub fn test_shape(expected_ms: f64) -> MemoryPolicy {
        MemoryPolicy {
            items: 4096,
            walkers: 1024,
            steps: 16,
            expected_ms,
            ..MemoryPolicy::default()
        }
    }
}

pub use pog_proof::params::PLANNED_SECONDS;

/// A challenge's shape for one claimed model, and the time that model should need.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Planned {
    /// The precision the challenge computes in.
    pub precision: Precision,
    /// m = n = k of each GEMM.
    pub size: u64,
    /// Independent GEMMs to compute.
    pub batch: u32,
    /// Output elements per Merkle leaf.
    pub leaf_elements: u32,
    /// The claimed model's expected time to commit, ms.
    pub expected_ms: f64,
    /// The claimed model's lead in this precision over the nearest slower model
    /// (`params::PrecisionChoice::advantage`; 1 where none was computed, 0 where a slower
    /// model catches up by emulation): at least `params::MIN_LEAD` for an accepted challenge
    /// to prove the model.
    pub lead: f64,
    /// Whether an accepted challenge of this plan proves the claimed model: a per-model plan
    /// in the precision the validator picks for the model (`params::choose_precision`), with
    /// a lead of at least `params::MIN_LEAD`. A precision forced by hand (`pog validator
    /// --precision`) proves nothing unless it is that pick: the pick is the one vetted
    /// against every cheaper model's emulations, and under another one a cheaper card may
    /// answer in time (split-BF16 products passed every FP32 challenge).
    pub proves_model: bool,
}

pub use pog_proof::challenge::Addressee;

impl Planned {
    /// The challenge of this shape for `to`, from `nonce`.
    pub fn challenge(&self, nonce: [u8; 32], to: Addressee) -> Challenge {
        Challenge {
            version: CHALLENGE_VERSION,
            nonce,
            gpu_uuid: to.gpu_uuid.into(),
            gpu_bus_id: to.gpu_bus_id.into(),
            agent_key: to.agent_key.into(),
            validator_key: to.validator_key.into(),
            precision: self.precision,
            size: self.size,
            batch: self.batch,
            leaf_elements: self.leaf_elements,
        }
    }
}

impl Policy {
    /// The policy `pog validator` runs with by default: each challenge planned from the
    /// claimed model, 1024-element leaves, 1024 spot checks, a minute to commit.
    pub fn per_model_default() -> Policy {
        Policy {
            plan: PlanKind::PerModel,
            precision: None,
            size: 0,
            batch: 0,
            leaf_elements: pog_proof::params::LEAF_ELEMENTS,
            expected_ms: 0.0,
            samples: 1024,
            expiry_ms: 60_000,
            memory: MemoryPolicy::default(),
        }
    }

    /// Whether records made under this policy say anything about the claimed model.
    pub fn proves_model(&self) -> bool {
        self.plan == PlanKind::PerModel
    }

    /// How a GPU claimed to be `spec` is challenged under this policy.
    pub fn plan_for(&self, spec: &GpuSpec) -> Result<Planned, ValidatorError> {
        let unknown = || ValidatorError::UnknownModel(spec.model.clone());
        if self.plan == PlanKind::PerModel {
            let db = SpecDb::embedded();
            let pick = pog_proof::params::choose_precision(spec, db).map(|c| c.precision);
            // Forced by hand, a precision is planned at the model's own rate in it and proves
            // nothing unless it is the pick.
            let precision = self.precision.or(pick).ok_or_else(unknown)?;
            let plan = pog_proof::params::plan_at(spec, db, precision).ok_or_else(|| {
                ValidatorError::Policy(format!(
                    "the {} has no {precision} rate to plan a challenge at",
                    spec.model
                ))
            })?;
            return Ok(Planned {
                precision: plan.choice.precision,
                size: plan.size,
                batch: plan.batch,
                leaf_elements: self.leaf_elements,
                expected_ms: plan.expected_ms,
                lead: plan.choice.advantage,
                proves_model: Some(plan.choice.precision) == pick
                    && plan.choice.advantage >= pog_proof::params::MIN_LEAD,
            });
        }
        let precision = match self.precision {
            Some(p) => p,
            None => pog_proof::params::choose_precision(spec, SpecDb::embedded())
                .map(|c| c.precision)
                .ok_or_else(unknown)?,
        };
        Ok(Planned {
            precision,
            size: self.size,
            batch: self.batch,
            leaf_elements: self.leaf_elements,
            expected_ms: self.expected_ms,
            lead: 1.0,
            proves_model: false,
        })
    }
}

/// What the validator signs and stores for each challenge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The record format's version.
    pub version: u32,
    /// The challenge's id.
    pub challenge_id: String,
    /// The GPU challenged.
    pub gpu_uuid: String,
    /// The agent the GPU is registered to (its public key).
    pub agent: String,
    /// The GPU's claimed model, as registered.
    pub model: String,
    /// The GPU is the simulated test double: this record proves nothing about any GPU.
    pub simulated: bool,
    /// The policy the challenge was planned and judged under (a test plan proves no model),
    /// as run: a per-model plan's size, batch and bound filled in.
    pub policy: Policy,
    /// Whether this record can speak for the claimed model at all: a per-model plan on a
    /// real GPU, in a precision where the model leads every slower one by at least
    /// `params::MIN_LEAD`.
    pub proves_model: bool,
    /// The claimed model's lead over the nearest slower model in the challenge's precision.
    pub lead: f64,
    /// The challenge as issued (nonce included), so anyone can recompute its products.
    pub challenge: Challenge,
    /// The claimed model's time bound for this challenge, ms.
    pub expected_ms: f64,
    /// Whether the outcome accepted the proof; false when the exchange failed.
    pub accepted: bool,
    /// The verdict when the exchange completed.
    pub outcome: Option<Outcome>,
    /// Why it did not, when it did not.
    pub failure: Option<Failure>,
    /// The secret the spot checks were drawn from (hex), revealed once they are done, so anyone
    /// can recompute which elements were checked.
    pub spot_check_secret: String,
    /// Bytes of the messages sent to the agent (challenge, open request).
    pub bytes_to_agent: usize,
    /// Bytes of the messages received from the agent (commitment, openings).
    pub bytes_from_agent: usize,
    /// When the validator stored this record (Unix ms).
    pub recorded_at_ms: u64,
}

/// What the validator signs and stores for each memory challenge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryRecord {
    /// The record format's version.
    pub version: u32,
    /// The challenge's id.
    pub challenge_id: String,
    /// The GPU challenged.
    pub gpu_uuid: String,
    /// The agent the GPU is registered to (its public key).
    pub agent: String,
    /// The GPU's claimed model, as registered.
    pub model: String,
    /// The GPU is the simulated test double: this record proves nothing about any GPU.
    pub simulated: bool,
    /// The policy it was planned and judged under, as run: the memory plan's items, walkers,
    /// steps and bound filled in.
    pub policy: Policy,
    /// Whether an accepted record speaks for the claimed model's memory: a per-model plan on
    /// a real GPU (the data set fills 90 % of the claimed capacity, the bound is the model's
    /// walk rate).
    pub proves_memory: bool,
    /// The challenge: the data set's shape and binding.
    pub memory_challenge: MemoryChallenge,
    /// The walk nonce (hex), sent once the agent reported the data set built.
    pub walk_nonce: String,
    /// The validator's clock from sending the challenge to the agent's "ready" (untimed by
    /// the bound, under the expiry).
    pub build_ms: Option<f64>,
    /// Where the bound's rate came from (measurement or datasheet).
    pub rate: Option<MemoryRate>,
    /// The claimed model's time from walk nonce to commitment, ms.
    pub expected_ms: f64,
    /// Whether the outcome accepted the proof; false when the exchange failed.
    pub accepted: bool,
    /// The verdict when the exchange completed.
    pub outcome: Option<Outcome>,
    /// Why it did not, when it did not.
    pub failure: Option<Failure>,
    /// The secret the spot checks were drawn from (hex), revealed once they are done.
    pub spot_check_secret: String,
    /// Bytes of the messages sent to the agent (challenge, walk nonce, open request).
    pub bytes_to_agent: usize,
    /// Bytes of the messages received from the agent (ready, commitment, openings).
    pub bytes_from_agent: usize,
    /// When the validator stored this record (Unix ms).
    pub recorded_at_ms: u64,
}

/// Why an exchange ended without a verdict, as a signed record tells it: a kind to act on
/// and a short message written by the validator. Nothing the agent sent is repeated beyond
/// what the validator's own checks say (a record is public; an agent must not be able to
/// publish text through it, nor learn what a URL inside the validator's network answers).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// What kind of failure, to act on.
    pub kind: FailureKind,
    /// What happened, in the validator's words.
    pub message: String,
}

/// The kinds of [`Failure`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// Nothing answered at the agent's endpoint.
    Unreachable,
    /// The agent did not answer a request in time.
    Timeout,
    /// The whole exchange ran past its deadline.
    Deadline,
    /// The connection broke part-way, or the answer was too large.
    Transport,
    /// The agent answered with an HTTP error.
    AgentRefused,
    /// The agent's answer was not a valid signed message of the right kind.
    BadMessage,
    /// A valid message that breaks the protocol (wrong challenge, signer or root).
    Protocol,
}

impl FailureKind {
    /// The agent could not be reached at all (as opposed to answering wrongly).
    pub fn is_unreachable(self) -> bool {
        matches!(
            self,
            FailureKind::Unreachable | FailureKind::Timeout | FailureKind::Deadline
        )
    }
}

/// Why one challenge exchange with an agent ended without a verdict.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ExchangeError {
    #[error(transparent)]
    Post(#[from] crate::http::PostError),
    #[error(transparent)]
    Wire(#[from] wire::WireError),
    #[error(transparent)]
    Protocol(#[from] pog_proof::session::ProtocolError),
    #[error("the exchange did not finish within {0} ms")]
    Deadline(u64),
    /// The validator's own verification task died (a bug, not the agent's doing).
    #[error("the validator's verification of the openings failed")]
    Verifier,
}

impl ExchangeError {
    /// The record's account of this error.
    pub(crate) fn failure(&self) -> Failure {
        use crate::http::PostError as P;
        let (kind, message) = match self {
            ExchangeError::Post(P::Unreachable { .. }) => (
                FailureKind::Unreachable,
                "nothing answered at the agent's endpoint".into(),
            ),
            ExchangeError::Post(P::Timeout { timeout, .. }) => (
                FailureKind::Timeout,
                format!("the agent did not answer within {} s", timeout.as_secs()),
            ),
            ExchangeError::Post(P::Transport { .. }) => (
                FailureKind::Transport,
                "the connection to the agent broke".into(),
            ),
            ExchangeError::Post(P::TooLarge { limit, .. }) => (
                FailureKind::Transport,
                format!("the agent's answer exceeded {limit} bytes"),
            ),
            ExchangeError::Post(P::Refused { status, .. }) => (
                FailureKind::AgentRefused,
                format!("the agent answered HTTP {}", status.as_u16()),
            ),
            ExchangeError::Post(P::Encode { .. }) => (
                FailureKind::Transport,
                "the request could not be encoded".into(),
            ),
            ExchangeError::Wire(e) => (FailureKind::BadMessage, wire_summary(e)),
            ExchangeError::Protocol(e) => (FailureKind::Protocol, protocol_summary(e)),
            ExchangeError::Deadline(_) => (FailureKind::Deadline, self.to_string()),
            ExchangeError::Verifier => (FailureKind::Protocol, self.to_string()),
        };
        Failure { kind, message }
    }
}

/// What broke the protocol, in the validator's words only (no value the agent chose).
fn protocol_summary(e: &pog_proof::session::ProtocolError) -> String {
    use pog_proof::session::ProtocolError as P;
    match e {
        P::WrongChallenge { expected, .. } => {
            format!("an answer for another challenge than {expected}")
        }
        P::WrongSigner { expected, .. } => {
            format!("signed by another key than the agent's, expected the agent {expected}")
        }
        P::OutOfOrder(what) => format!("{what} arrived out of order"),
        P::Expired {
            expires_at_ms,
            now_ms,
        } => {
            format!("the challenge expired at {expires_at_ms} ms; the answer came at {now_ms} ms")
        }
        P::WrongGpu { expected, .. } => format!("a commitment for another GPU than {expected}"),
        P::WrongLeafCount { expected, got } => {
            format!("a commitment of {got} leaves; the challenge has {expected}")
        }
        P::Root(_) => "the commitment's root is not 32 bytes in hex".into(),
        P::Opening(_) => "a malformed opening".into(),
    }
}

/// What was wrong with an agent's message, in the validator's words only.
fn wire_summary(e: &wire::WireError) -> String {
    use wire::WireError as W;
    match e {
        W::TooLarge(n) => format!("a message of {n} bytes, over the limit"),
        W::Envelope(_) => "the answer is not a signed message envelope".into(),
        W::Version(v) => format!("wire version {v}, not this validator's"),
        W::Kind { expected, .. } => format!("not a {expected} message"),
        W::Signature(_) => "the answer's signature does not verify".into(),
        // The kind has been checked against the expected one by now: the validator's word.
        W::Body { kind, .. } => format!("the {kind} message's body is malformed"),
        W::Encode(_) | W::Randomness(_) => "the validator could not handle the message".into(),
    }
}

/// Why a challenge could not be run at all.
#[derive(Debug, thiserror::Error)]
pub enum ValidatorError {
    /// No GPU of this UUID is registered.
    #[error("no registered GPU {0}")]
    UnknownGpu(String),
    /// The GPU's model is not in the spec database.
    #[error("GPU model {0:?} is not in the database")]
    UnknownModel(String),
    /// The registry could not be read or written.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// A message or record could not be signed.
    #[error("signing: {0}")]
    Wire(#[from] wire::WireError),
    /// The policy cannot plan a challenge (the reason).
    #[error("bad policy: {0}")]
    Policy(String),
    /// The challenge's task failed (the reason).
    #[error("the challenge's task failed: {0}")]
    Task(String),
    /// The ledger did not take the signed record durably: the record is refused (not stored).
    #[error("the ledger refused the record: {0}")]
    Ledger(#[from] crate::ledger::LedgerError),
    /// The hardened HTTP client could not be built: the validator does not start.
    #[error(transparent)]
    Client(#[from] BuildClientError),
}

impl Policy {
    /// Refuses policies no challenge can be built from.
    pub fn validate(&self) -> Result<(), ValidatorError> {
        if self.leaf_elements == 0 || self.samples == 0 || self.expiry_ms == 0 {
            return Err(ValidatorError::Policy(
                "leaf elements, samples and the expiry must all be at least 1".into(),
            ));
        }
        if self.memory.enabled && self.memory.samples == 0 {
            return Err(ValidatorError::Policy(
                "the memory proof needs at least 1 spot check".into(),
            ));
        }
        if self.plan == PlanKind::PerModel {
            return Ok(()); // the shape and bound come from the model
        }
        let m = &self.memory;
        if m.enabled
            && (m.items == 0
                || m.walkers == 0
                || m.steps == 0
                || !(m.expected_ms.is_finite() && m.expected_ms > 0.0))
        {
            return Err(ValidatorError::Policy(
                "a test plan's memory proof needs items, walkers, steps and a positive expected time".into(),
            ));
        }
        if self.size == 0 || self.batch == 0 {
            return Err(ValidatorError::Policy(
                "a test plan's size and batch must be at least 1".into(),
            ));
        }
        if !(self.expected_ms.is_finite() && self.expected_ms > 0.0) {
            return Err(ValidatorError::Policy(format!(
                "expected time {} ms is not a positive number",
                self.expected_ms
            )));
        }
        Ok(())
    }
}

/// What a validator allows, beyond the challenge policy.
#[derive(Debug, Clone)]
pub struct Config {
    /// GPUs of the simulated test double may register (tests and tours; their records say
    /// `simulated: true`).
    pub accept_simulated: bool,
    /// Agents may advertise loopback, private and link-local endpoints (tests and private
    /// deployments; see [`crate::endpoint`]).
    pub allow_private_endpoints: bool,
    /// The most GPUs one agent key may claim.
    pub max_gpus_per_agent: usize,
    /// Registrations each source address may make per minute (a burst of that many, then
    /// refilled evenly).
    pub registrations_per_minute: u32,
    /// KiB of new reports (agent-signed inspection and benchmark records, `POST /v1/reports`)
    /// each registered GPU may add per hour, whatever key or address sends them (a burst of
    /// that much, then refilled evenly; at least one report of
    /// [`crate::reports::MAX_REPORT_BYTES`]); content the validator holds already costs nothing.
    pub report_kib_per_gpu_per_hour: u32,
    /// KiB of new reports the GPUs reported from one source address (an IPv4 address or IPv6
    /// /64) may add per hour together: registrations are claims, so this bounds what one
    /// address's many (perhaps made-up) GPUs can add.
    pub report_kib_per_source_per_hour: u32,
}

impl Default for Config {
    /// Real GPUs on public endpoints only; 64 GPUs an agent (more than any host has); ten
    /// registrations a minute from one address; 64 KiB of new reports an hour per GPU, 8 MiB
    /// per address.
    fn default() -> Self {
        Config {
            accept_simulated: false,
            allow_private_endpoints: false,
            max_gpus_per_agent: 64,
            registrations_per_minute: 10,
            report_kib_per_gpu_per_hour: crate::reports::DEFAULT_REPORT_KIB_PER_GPU_PER_HOUR,
            report_kib_per_source_per_hour: crate::reports::DEFAULT_REPORT_KIB_PER_SOURCE_PER_HOUR,
        }
    }
}

/// The longest UUID, bus id or model name a registration may carry.
const MAX_FIELD_BYTES: usize = 128;

/// Source addresses a rate limiter remembers at once; beyond this, those with full buckets
/// are forgotten, and a new one waits while all are active.
const MAX_TRACKED_SOURCES: usize = 100_000;

/// Requests per source address (an IPv4 address or IPv6 /64) per minute, a token each
/// ([`crate::buckets::TokenBuckets`]).
pub(crate) struct RateLimiter(crate::buckets::TokenBuckets<std::net::IpAddr>);

impl RateLimiter {
    /// Buckets of `per_minute` tokens (the burst too), refilled evenly over a minute.
    pub(crate) fn per_minute(per_minute: f64) -> RateLimiter {
        RateLimiter(crate::buckets::TokenBuckets::new(
            per_minute.max(1.0),
            Duration::from_secs(60),
            MAX_TRACKED_SOURCES,
        ))
    }

    /// Takes a token for `source`; false when its bucket is empty, or when the limiter
    /// remembers as many sources as it may, all of them active.
    pub(crate) fn allow(&mut self, source: std::net::IpAddr) -> bool {
        self.0
            .take_one(&crate::serve::source_key(source), Instant::now())
    }
}

/// The validator.
pub struct Validator {
    pub(crate) identity: Identity,
    registry: Mutex<Registry>,
    pub(crate) client: reqwest::Client,
    config: Config,
    limiter: Mutex<RateLimiter>,
    /// Each GPU's last measured round trip, ms, credited to its next challenge.
    round_trips: Mutex<HashMap<String, f64>>,
    /// The transparency log every signed record is appended to before it is stored.
    ledger: Option<Arc<crate::ledger::ValidatorLedger>>,
    /// Agents' reports: their hourly budgets and the ones being stored (`crate::reports`).
    pub(crate) reports: crate::reports::ReportDesk,
}

/// The memory plan for a GPU claimed to be `spec` under `policy`: per model, or the test
/// plan's fixed shape.
fn memory_plan_for(policy: &Policy, spec: &GpuSpec) -> Result<MemoryPlan, ValidatorError> {
    let m = &policy.memory;
    if !m.enabled {
        return Err(ValidatorError::Policy(
            "the policy does not prove memory".into(),
        ));
    }
    let mut plan = pog_proof::memory::plan(spec, pog_proof::memory::WALK_SECONDS, None)
        .ok_or_else(|| ValidatorError::UnknownModel(spec.model.clone()))?;
    if policy.plan == PlanKind::Test {
        let per_leaf = u64::from(plan.walkers_per_leaf);
        plan.items = m.items / u64::from(plan.span) * u64::from(plan.span);
        plan.walkers = m.walkers.div_ceil(per_leaf) * per_leaf;
        plan.steps = m.steps;
        plan.expected_ms = m.expected_ms;
    }
    Ok(plan)
}

/// Checks an agent's "ready" against the challenge it answers.
fn check_ready(
    ready: &MemoryReady,
    signer: &str,
    id: &str,
    uuid: &str,
    agent: &str,
) -> Result<(), pog_proof::session::ProtocolError> {
    use pog_proof::session::ProtocolError as P;
    if ready.challenge_id != id {
        return Err(P::WrongChallenge {
            expected: id.into(),
            got: ready.challenge_id.clone(),
        });
    }
    if signer != agent {
        return Err(P::WrongSigner {
            expected: agent.into(),
            got: signer.into(),
        });
    }
    if ready.gpu_uuid != uuid {
        return Err(P::WrongGpu {
            expected: uuid.into(),
            got: ready.gpu_uuid.clone(),
        });
    }
    Ok(())
}

/// The largest commitment an agent may send (one is under a kilobyte).
const MAX_COMMITMENT_BYTES: usize = 64 << 10;

/// Time past twice the expected commit time that the validator still waits for a commitment.
const COMMIT_SLACK_MS: u64 = 5_000;

pub(crate) fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).expect("the operating system's randomness");
    bytes
}

/// A signed registration event: a GPU claimed, claimed anew (model, bus id, endpoint or
/// simulated flag changed) or released, stored among the GPU's records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegistrationRecord {
    /// The record format's version.
    pub version: u32,
    /// Which registration event.
    pub event: Change,
    /// The GPU claimed or released.
    pub gpu_uuid: String,
    /// The agent that claimed it (its public key).
    pub agent: String,
    /// The GPU's model, as claimed.
    pub model: String,
    /// The GPU's PCI bus id, as claimed.
    pub bus_id: String,
    /// The GPU is the simulated test double.
    pub simulated: bool,
    /// Why, for a release.
    pub reason: Option<String>,
    /// When the validator stored this record (Unix ms).
    pub recorded_at_ms: u64,
}

/// The envelope kind of a signed [`Record`].
pub const RECORD_KIND: &str = "record";

/// The envelope kind of a signed memory-proof record.
pub const MEMORY_RECORD_KIND: &str = "memory-record";

/// The envelope kind of a signed [`RegistrationRecord`].
pub const REGISTRATION_KIND: &str = "registration";

impl Validator {
    /// A validator with the default [`Config`]: real GPUs on public endpoints only.
    pub fn new(identity: Identity, registry: Registry) -> Result<Validator, ValidatorError> {
        Validator::with_config(identity, registry, Config::default())
    }

    /// A validator that allows what `config` says; an error when its hardened HTTP client
    /// cannot be built.
    pub fn with_config(
        identity: Identity,
        registry: Registry,
        config: Config,
    ) -> Result<Validator, ValidatorError> {
        // Redirects are refused (an agent's endpoint must not send the validator elsewhere);
        // names resolve to public addresses only, at every connection (DNS rebinding); a
        // proxy from the environment would be connected to instead of the endpoint, and the
        // resolver would vet only the proxy.
        let client = ClientSettings {
            connect_timeout: Some(Duration::from_secs(5)),
            proxy_from_env: false,
            resolver: Some(crate::endpoint::PublicResolver {
                allow_private: config.allow_private_endpoints,
            }),
            ..ClientSettings::new("challenge")
        }
        .build()?;
        Ok(Validator {
            identity,
            registry: Mutex::new(registry),
            client,
            round_trips: Mutex::new(HashMap::new()),
            limiter: Mutex::new(RateLimiter::per_minute(f64::from(
                config.registrations_per_minute,
            ))),
            reports: crate::reports::ReportDesk::new(
                config.report_kib_per_gpu_per_hour,
                config.report_kib_per_source_per_hour,
            ),
            config,
            ledger: None,
        })
    }

    /// This validator with a ledger: every record it signs from now on is appended to it
    /// durably before it is stored, and `/ledger/…` serves it.
    pub fn with_ledger(mut self, ledger: Arc<crate::ledger::ValidatorLedger>) -> Validator {
        self.ledger = Some(ledger);
        self
    }

    /// The validator's ledger, if it keeps one.
    pub fn ledger(&self) -> Option<&Arc<crate::ledger::ValidatorLedger>> {
        self.ledger.as_ref()
    }

    /// The validator's public key (hex), which signs its records.
    pub fn public_key(&self) -> String {
        self.identity.public_hex()
    }

    /// The registry (the schedule reads it; tests inspect it).
    pub fn registry(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.registry.locked()
    }

    /// Signs `body` as a `kind` message and stores it among `uuid`'s records under `id`; with a
    /// ledger, appends it there durably first (a record the ledger refuses is not stored).
    pub(crate) fn store<T: Serialize>(
        &self,
        kind: &str,
        id: &str,
        uuid: &str,
        accepted: bool,
        body: &T,
    ) -> Result<(), ValidatorError> {
        let envelope = self.identity.seal(kind, body)?;
        self.store_envelope(&envelope, id, uuid, accepted)
            .map(|_| ())
    }

    /// Stores a signed record exactly as its producer signed it (the validator's own, or an
    /// agent's report) among `uuid`'s records under `id`; with a ledger, appends it there
    /// durably first (a record the ledger refuses is not stored). Its log index, with a ledger.
    pub(crate) fn store_envelope(
        &self,
        envelope: &wire::Envelope,
        id: &str,
        uuid: &str,
        accepted: bool,
    ) -> Result<Option<u64>, ValidatorError> {
        let json = serde_json::to_string(envelope).map_err(wire::WireError::Encode)?;
        let index = match &self.ledger {
            Some(ledger) => Some(ledger.append(envelope)?),
            None => None,
        };
        self.registry().record(id, uuid, accepted, &json)?;
        Ok(index)
    }

    /// Signs and stores a registration event.
    fn record_registration(
        &self,
        agent: &str,
        gpu: &pog_proof::wire::GpuClaim,
        event: Change,
        reason: Option<String>,
    ) -> Result<(), ValidatorError> {
        let record = RegistrationRecord {
            version: RECORD_VERSION,
            event,
            gpu_uuid: gpu.uuid.clone(),
            agent: agent.into(),
            model: gpu.model.clone(),
            bus_id: gpu.bus_id.clone(),
            simulated: gpu.simulated,
            reason,
            recorded_at_ms: now_ms(),
        };
        let id = format!("registration-{}", hex::encode(random_bytes::<16>()));
        self.store(REGISTRATION_KIND, &id, &gpu.uuid, false, &record)
    }

    /// Takes a GPU off the registry for `reason`, bars its agent from claiming it again for
    /// `bar`, and records the release.
    pub fn release(&self, uuid: &str, reason: &str, bar: Duration) -> Result<(), ValidatorError> {
        let released = self
            .registry()
            .release(uuid, now_ms() + bar.as_millis() as u64)?;
        if let Some(gpu) = released {
            let claim = pog_proof::wire::GpuClaim {
                uuid: gpu.uuid,
                model: gpu.model,
                bus_id: gpu.bus_id,
                simulated: gpu.simulated,
            };
            self.record_registration(&gpu.agent, &claim, Change::Released, Some(reason.into()))?;
        }
        Ok(())
    }

    /// Challenges one registered GPU and records the result (accepted, rejected, or failed).
    /// The whole exchange runs under one deadline: the policy's expiry to commit, and as long
    /// again to open.
    pub async fn challenge(&self, uuid: &str, policy: &Policy) -> Result<Record, ValidatorError> {
        policy.validate()?;
        let gpu = self
            .registry()
            .gpu(uuid)?
            .ok_or_else(|| ValidatorError::UnknownGpu(uuid.into()))?;
        let spec = SpecDb::embedded()
            .by_model(&gpu.model)
            .ok_or_else(|| ValidatorError::UnknownModel(gpu.model.clone()))?;
        let planned = policy.plan_for(spec)?;
        let challenge = planned.challenge(
            random_bytes(),
            Addressee {
                gpu_uuid: uuid,
                gpu_bus_id: &gpu.bus_id,
                agent_key: &gpu.agent,
                validator_key: &self.identity.public_hex(),
            },
        );
        let expected_ms = planned.expected_ms;
        let id = hex::encode(random_bytes::<16>());
        let deadline_ms = policy.expiry_ms.saturating_mul(2);
        // A commitment later than this fails its time bound anyway (the bound, its 10 %, the
        // largest round-trip allowance, then slack), so the validator does not wait longer.
        let commit_wait = Duration::from_millis(
            policy
                .expiry_ms
                .min((2.0 * expected_ms) as u64 + COMMIT_SLACK_MS),
        );
        let started = Instant::now();
        // The round trip measured after this GPU's previous challenge: pinging here, before the
        // challenge, would let an agent delay its own challenges (answering pings slowly) and
        // so stagger the ones a round means to send at the same moment.
        let round_trip_ms = self.round_trips.locked().get(uuid).copied().unwrap_or(0.0);
        let issued_at_ms = now_ms();
        let message = ChallengeMessage {
            id: id.clone(),
            challenge: challenge.clone(),
            issued_at_ms,
            expires_at_ms: issued_at_ms + policy.expiry_ms,
        };
        let secret: [u8; 32] = random_bytes();
        let session = ValidatorSession::new(
            message.clone(),
            gpu.agent.clone(),
            expected_ms,
            secret,
            policy.samples,
        );
        let mut bytes = (0usize, 0usize); // to the agent, from the agent
        let remaining = || Duration::from_millis(deadline_ms).saturating_sub(started.elapsed());
        let exchange = async {
            let envelope = self.identity.seal(kind::CHALLENGE, &message)?;
            let asked = Asked {
                path: "/v1/challenge",
                envelope: &envelope,
                issued_at_ms,
                wait: commit_wait,
            };
            self.commit_and_verify(
                session,
                asked,
                &gpu.endpoint,
                round_trip_ms,
                &remaining,
                &mut bytes,
            )
            .await
        };
        let result = within(deadline_ms, remaining(), exchange).await;
        let record = Record {
            version: RECORD_VERSION,
            challenge_id: id.clone(),
            gpu_uuid: uuid.into(),
            agent: gpu.agent.clone(),
            model: gpu.model.clone(),
            simulated: gpu.simulated,
            // The policy as run: a per-model plan's shape and bound, not the zeros it was
            // configured with.
            policy: Policy {
                size: planned.size,
                batch: planned.batch,
                expected_ms,
                ..policy.clone()
            },
            proves_model: planned.proves_model && !gpu.simulated,
            lead: planned.lead,
            challenge,
            expected_ms,
            accepted: result.as_ref().is_ok_and(|o| o.accepted),
            failure: result.as_ref().err().map(ExchangeError::failure),
            outcome: result.ok(),
            spot_check_secret: hex::encode(secret),
            bytes_to_agent: bytes.0,
            bytes_from_agent: bytes.1,
            recorded_at_ms: now_ms(),
        };
        self.store(RECORD_KIND, &id, uuid, record.accepted, &record)?;
        if record.failure.is_none() {
            // For the next challenge's allowance (see above).
            let rtt = self.round_trip(&gpu.endpoint).await;
            self.round_trips.locked().insert(uuid.to_string(), rtt);
        }
        Ok(record)
    }

    /// Challenges one registered GPU's memory and records the result: the data set built under
    /// the policy's expiry, then the walk timed against the claimed model's bound.
    pub async fn challenge_memory(
        &self,
        uuid: &str,
        policy: &Policy,
    ) -> Result<MemoryRecord, ValidatorError> {
        policy.validate()?;
        let gpu = self
            .registry()
            .gpu(uuid)?
            .ok_or_else(|| ValidatorError::UnknownGpu(uuid.into()))?;
        let spec = SpecDb::embedded()
            .by_model(&gpu.model)
            .ok_or_else(|| ValidatorError::UnknownModel(gpu.model.clone()))?;
        let plan = memory_plan_for(policy, spec)?;
        let validator_key = self.identity.public_hex();
        let challenge = plan.challenge(
            random_bytes(),
            Addressee {
                gpu_uuid: uuid,
                gpu_bus_id: &gpu.bus_id,
                agent_key: &gpu.agent,
                validator_key: &validator_key,
            },
        );
        let id = hex::encode(random_bytes::<16>());
        let walk_nonce: [u8; 32] = random_bytes();
        let secret: [u8; 32] = random_bytes();
        let deadline_ms = policy.expiry_ms.saturating_mul(2);
        let started = Instant::now();
        let remaining = || Duration::from_millis(deadline_ms).saturating_sub(started.elapsed());
        let round_trip_ms = self.round_trips.locked().get(uuid).copied().unwrap_or(0.0);
        let mut bytes = (0usize, 0usize);
        let mut build_ms = None;
        let exchange = async {
            let issued_at_ms = now_ms();
            let message = MemoryChallengeMessage {
                id: id.clone(),
                challenge: challenge.clone(),
                issued_at_ms,
                expires_at_ms: issued_at_ms + policy.expiry_ms,
            };
            let envelope = self.identity.seal(kind::MEMORY_CHALLENGE, &message)?;
            let sent = Instant::now();
            let (n, answer) = post_counted(
                &self.client,
                &format!("{}/v1/memory/build", gpu.endpoint),
                &envelope,
                remaining().min(Duration::from_millis(policy.expiry_ms)),
                MAX_COMMITMENT_BYTES,
            )
            .await?;
            build_ms = Some(sent.elapsed().as_secs_f64() * 1e3);
            bytes = (bytes.0 + n, bytes.1 + answer.len());
            let (ready, signer): (MemoryReady, String) = wire::decode(&answer, kind::MEMORY_READY)?;
            check_ready(&ready, &signer, &id, uuid, &gpu.agent)?;

            let commit_wait = Duration::from_millis(
                policy
                    .expiry_ms
                    .min((2.0 * plan.expected_ms) as u64 + COMMIT_SLACK_MS),
            );
            let walk_issued_ms = now_ms();
            let walk = WalkMessage {
                challenge_id: id.clone(),
                walk_nonce,
                issued_at_ms: walk_issued_ms,
                expires_at_ms: walk_issued_ms + commit_wait.as_millis() as u64,
            };
            let session = ValidatorSession::timed(
                id.clone(),
                pog_proof::memory::Walk {
                    walk_key: challenge.walk_key(&walk_nonce),
                    challenge: challenge.clone(),
                },
                (walk.issued_at_ms, walk.expires_at_ms),
                gpu.agent.clone(),
                plan.expected_ms,
                secret,
                policy.memory.samples,
            );
            let envelope = self.identity.seal(kind::MEMORY_WALK, &walk)?;
            let asked = Asked {
                path: "/v1/memory/walk",
                envelope: &envelope,
                issued_at_ms: walk_issued_ms,
                wait: commit_wait,
            };
            self.commit_and_verify(
                session,
                asked,
                &gpu.endpoint,
                round_trip_ms,
                &remaining,
                &mut bytes,
            )
            .await
        };
        let result = within(deadline_ms, remaining(), exchange).await;
        let record = MemoryRecord {
            version: RECORD_VERSION,
            challenge_id: id.clone(),
            gpu_uuid: uuid.into(),
            agent: gpu.agent.clone(),
            model: gpu.model.clone(),
            simulated: gpu.simulated,
            // The policy as run: the memory plan's shape and bound.
            policy: Policy {
                memory: MemoryPolicy {
                    items: plan.items,
                    walkers: plan.walkers,
                    steps: plan.steps,
                    expected_ms: plan.expected_ms,
                    ..policy.memory.clone()
                },
                ..policy.clone()
            },
            proves_memory: policy.proves_model() && !gpu.simulated,
            memory_challenge: challenge,
            walk_nonce: hex::encode(walk_nonce),
            build_ms,
            rate: (policy.plan == PlanKind::PerModel).then(|| plan.rate.clone()),
            expected_ms: plan.expected_ms,
            accepted: result.as_ref().is_ok_and(|o| o.accepted),
            failure: result.as_ref().err().map(ExchangeError::failure),
            outcome: result.ok(),
            spot_check_secret: hex::encode(secret),
            bytes_to_agent: bytes.0,
            bytes_from_agent: bytes.1,
            recorded_at_ms: now_ms(),
        };
        self.store(MEMORY_RECORD_KIND, &id, uuid, record.accepted, &record)?;
        Ok(record)
    }

    /// Sends the message that asks for a commitment (`asked`), waits for the commitment (at
    /// most `asked.wait` and what is left of the exchange), notes when it arrived on the
    /// validator's clock, and finishes with [`Self::open_and_verify`].
    async fn commit_and_verify<C: SpotChecked + Send + 'static>(
        &self,
        session: ValidatorSession<C>,
        asked: Asked<'_>,
        endpoint: &str,
        round_trip_ms: f64,
        remaining: &impl Fn() -> Duration,
        bytes: &mut (usize, usize),
    ) -> Result<Outcome, ExchangeError> {
        let sent = Instant::now();
        let (n, answer) = post_counted(
            &self.client,
            &format!("{endpoint}{}", asked.path),
            asked.envelope,
            remaining().min(asked.wait),
            MAX_COMMITMENT_BYTES,
        )
        .await?;
        let arrived_ms = asked.issued_at_ms + sent.elapsed().as_millis() as u64;
        *bytes = (bytes.0 + n, bytes.1 + answer.len());
        self.open_and_verify(
            session,
            (&answer, arrived_ms, round_trip_ms),
            endpoint,
            remaining(),
            bytes,
        )
        .await
    }

    /// The rest of an exchange once the commitment has arrived (its bytes, the validator's
    /// clock when it did, the round trip to credit): the session takes it, the agent opens
    /// the leaves drawn, the openings are verified. Adds the messages' sizes to `bytes`.
    async fn open_and_verify<C: SpotChecked + Send + 'static>(
        &self,
        mut session: ValidatorSession<C>,
        (answer, arrived_ms, round_trip_ms): (&[u8], u64, f64),
        endpoint: &str,
        remaining: Duration,
        bytes: &mut (usize, usize),
    ) -> Result<Outcome, ExchangeError> {
        let (commitment, signer): (Commitment, String) = wire::decode(answer, kind::COMMITMENT)?;
        let request: OpenRequest =
            session.on_commitment(&commitment, &signer, arrived_ms, round_trip_ms)?;
        let open_envelope = self.identity.seal(kind::OPEN, &request)?;
        let (n, answer) = post_counted(
            &self.client,
            &format!("{endpoint}/v1/open"),
            &open_envelope,
            remaining,
            wire::MAX_MESSAGE_BYTES,
        )
        .await?;
        *bytes = (bytes.0 + n, bytes.1 + answer.len());
        // Decoding and recomputing the spot checks takes tens of ms of CPU: off the runtime's
        // workers, so other challenges' timings are not delayed by it.
        tokio::task::spawn_blocking(move || {
            let (openings, signer): (Openings, String) = wire::decode(&answer, kind::OPENINGS)?;
            Ok::<_, ExchangeError>(session.on_openings(&openings, &signer)?)
        })
        .await
        .map_err(|_| ExchangeError::Verifier)?
    }

    /// The fastest of three pings to the agent, in milliseconds (0 when it does not answer:
    /// the time bound then gets no allowance). The agent controls how fast it answers, so only
    /// the fastest counts, and `pog_proof::timing` caps what is credited. Each ping gets a
    /// second: a silent agent costs its challenge at most three.
    async fn round_trip(&self, endpoint: &str) -> f64 {
        let mut times = Vec::new();
        for _ in 0..3 {
            let started = Instant::now();
            let ok = self
                .client
                .get(format!("{endpoint}/v1/ping"))
                .timeout(Duration::from_secs(1))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if ok {
                times.push(started.elapsed().as_secs_f64() * 1e3);
            }
        }
        times.sort_by(f64::total_cmp);
        times.first().copied().unwrap_or(0.0)
    }
}

/// The signed message that asks an agent for a commitment: where it goes on the agent, when
/// it was issued (the validator's clock) and how long the commitment may take.
struct Asked<'a> {
    path: &'static str,
    envelope: &'a wire::Envelope,
    issued_at_ms: u64,
    wait: Duration,
}

/// `exchange`'s outcome, or [`ExchangeError::Deadline`] when `remaining` runs out first.
async fn within(
    deadline_ms: u64,
    remaining: Duration,
    exchange: impl std::future::Future<Output = Result<Outcome, ExchangeError>>,
) -> Result<Outcome, ExchangeError> {
    tokio::time::timeout(remaining, exchange)
        .await
        .unwrap_or(Err(ExchangeError::Deadline(deadline_ms)))
}

/// The validator's HTTP API: `POST /v1/register`, `POST /v1/reports`, `GET /v1/gpus`,
/// `GET /v1/records/{uuid}`, `GET /healthz`.
pub fn router(validator: Arc<Validator>) -> Router {
    Router::new()
        .route("/v1/register", post_route(register))
        .route("/v1/reports", post_route(crate::reports::post_report))
        .route("/v1/gpus", get(gpus))
        .route("/v1/records/{uuid}", get(records))
        .route("/healthz", get(|| async { "ok" }))
        .merge(crate::ledger::routes())
        .with_state(validator)
}

/// The validator's API with its order book for GPU-hours: [`router`]'s routes and
/// `/v1/market/*` ([`crate::market`]).
pub fn router_with_market(validator: Arc<Validator>, market: Arc<crate::market::Market>) -> Router {
    router(validator).merge(crate::market::router(market))
}

async fn register(
    State(v): State<Arc<Validator>>,
    ConnectInfo(source): ConnectInfo<std::net::SocketAddr>,
    body: Bytes,
) -> Result<Response, ApiError> {
    if !v.limiter.locked().allow(source.ip()) {
        return Err(ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "more than {} registrations a minute from {}",
                v.config.registrations_per_minute,
                source.ip()
            ),
        ));
    }
    let (reg, agent): (Register, String) = wire::decode(&body, kind::REGISTER)?;
    let bad = |message: String| Err(ApiError::new(StatusCode::BAD_REQUEST, message));
    let endpoint = match crate::endpoint::validate(&reg.endpoint, v.config.allow_private_endpoints)
    {
        Ok(endpoint) => endpoint,
        Err(e) => return bad(e.to_string()),
    };
    if reg.gpus.is_empty() || reg.gpus.len() > v.config.max_gpus_per_agent {
        return bad(format!(
            "a registration claims 1 to {} GPUs, not {}",
            v.config.max_gpus_per_agent,
            reg.gpus.len()
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for g in &reg.gpus {
        if [&g.uuid, &g.bus_id, &g.model]
            .iter()
            .any(|f| f.is_empty() || f.len() > MAX_FIELD_BYTES)
        {
            return bad(format!(
                "a GPU's UUID, bus id and model must be 1 to {MAX_FIELD_BYTES} bytes"
            ));
        }
        // The ledger names GPUs by printable ASCII UUIDs (no space): refused before anything
        // is registered, not when the registration record is logged.
        if !g.uuid.bytes().all(|b| b.is_ascii_graphic()) {
            return bad(format!(
                "GPU UUID {:?} is not printable ASCII without spaces",
                g.uuid
            ));
        }
        if !seen.insert(&g.uuid) {
            return bad(format!("GPU {} is claimed twice", g.uuid));
        }
        let Some(spec) = SpecDb::embedded().by_model(&g.model) else {
            return bad(format!("GPU {} claims unknown model {:?}", g.uuid, g.model));
        };
        if pog_proof::params::choose_precision(spec, SpecDb::embedded()).is_none() {
            return bad(format!(
                "GPU {} claims the {}, which no challenge can tell from a slower model",
                g.uuid, g.model
            ));
        }
        if g.simulated && !v.config.accept_simulated {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                format!(
                    "GPU {} is simulated (a test double, not a GPU): this validator accepts real GPUs only",
                    g.uuid
                ),
            ));
        }
    }
    let changes = v.registry().register(
        &agent,
        &endpoint,
        &reg.gpus,
        now_ms(),
        v.config.max_gpus_per_agent,
    );
    let changes = match changes {
        Ok(changes) => changes,
        Err(e @ RegistryError::ClaimedElsewhere { .. }) | Err(e @ RegistryError::Barred { .. }) => {
            return Err(ApiError::new(StatusCode::CONFLICT, e.to_string()))
        }
        Err(e @ RegistryError::TooManyGpus { .. }) => {
            return Err(ApiError::new(StatusCode::BAD_REQUEST, e.to_string()))
        }
        Err(e) => {
            return Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                e.to_string(),
            ))
        }
    };
    for (gpu, change) in reg.gpus.iter().zip(&changes) {
        if *change != Change::Same {
            v.record_registration(&agent, gpu, *change, None)
                .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
            tracing::info!(gpu = %gpu.uuid, %agent, model = %gpu.model, event = ?change, "registered");
        }
    }
    Ok((
        StatusCode::OK,
        axum::Json(serde_json::json!({ "registered": reg.gpus.len() })),
    )
        .into_response())
}

/// `GET /v1/gpus?after=UUID&limit=N`: a page of query parameters.
#[derive(Debug, Deserialize)]
struct GpuPage {
    #[serde(default)]
    after: String,
    limit: Option<usize>,
}

/// One registered GPU as the API lists it (its agent's endpoint is not published).
#[derive(Debug, Serialize, Deserialize)]
pub struct ListedGpu {
    /// The GPU's UUID.
    pub uuid: String,
    /// The GPU's model, as registered.
    pub model: String,
    /// The GPU's PCI bus id.
    pub bus_id: String,
    /// The agent it is registered to (its public key).
    pub agent: String,
    /// The GPU is the simulated test double.
    pub simulated: bool,
}

/// What `GET /v1/gpus` returns.
#[derive(Debug, Serialize, Deserialize)]
pub struct GpuList {
    /// This page's GPUs, in UUID order.
    pub gpus: Vec<ListedGpu>,
    /// Pass as `after` for the next page; absent on the last one.
    pub next_after: Option<String>,
}

async fn gpus(
    State(v): State<Arc<Validator>>,
    Query(page): Query<GpuPage>,
) -> Result<Response, ApiError> {
    let limit = page.limit.unwrap_or(100).clamp(1, MAX_RECORDS_PAGE);
    let found = v
        .registry()
        .gpus(&page.after, limit)
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let next_after = (found.len() == limit)
        .then(|| found.last().map(|g| g.uuid.clone()))
        .flatten();
    let gpus = found
        .into_iter()
        .map(|g| ListedGpu {
            uuid: g.uuid,
            model: g.model,
            bus_id: g.bus_id,
            agent: g.agent,
            simulated: g.simulated,
        })
        .collect();
    Ok(axum::Json(GpuList { gpus, next_after }).into_response())
}

/// The most records one page of `GET /v1/records/{uuid}` returns.
pub const MAX_RECORDS_PAGE: usize = 1000;

/// The most bytes of stored envelopes one page of `GET /v1/records/{uuid}` carries (the answer
/// is about twice this: each record also as a JSON object); a page cut short for it has a
/// `next_after`. An agent's reports are up to 16 KiB each: without this, a thousand of them
/// would make every page a 33 MB answer to a request of a few bytes.
pub const MAX_RECORDS_PAGE_BYTES: usize = 2 << 20;

/// `GET /v1/records/{uuid}?after=ID&limit=N`: a page of query parameters.
#[derive(Debug, Deserialize)]
struct Page {
    #[serde(default)]
    after: i64,
    limit: Option<usize>,
}

/// One stored record: its body as a JSON object (to read), and the envelope exactly as its
/// producer signed it — the validator, or for `inspection` and `benchmark` reports the GPU's
/// agent (to verify: its `body` string is the signed bytes).
#[derive(Debug, Serialize, Deserialize)]
pub struct StoredRecord {
    /// The record's id in the validator's store, as `after` takes it.
    pub id: i64,
    /// The record's body, as a JSON object.
    pub record: serde_json::Value,
    /// The envelope exactly as its producer signed it.
    pub envelope: wire::Envelope,
}

/// What `GET /v1/records/{uuid}` returns.
#[derive(Debug, Serialize, Deserialize)]
pub struct RecordPage {
    /// The GPU the records are of.
    pub gpu_uuid: String,
    /// This page's records, in store order (by `id`).
    pub records: Vec<StoredRecord>,
    /// Pass as `after` for the next page; absent on the last one.
    pub next_after: Option<i64>,
}

async fn records(
    State(v): State<Arc<Validator>>,
    Path(uuid): Path<String>,
    Query(page): Query<Page>,
) -> Result<Response, ApiError> {
    let limit = page.limit.unwrap_or(100).clamp(1, MAX_RECORDS_PAGE);
    let (rows, cut) = v
        .registry
        .locked()
        .records_within(&uuid, page.after, limit, MAX_RECORDS_PAGE_BYTES)
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    // The page goes on after its last row, even one that is left out below.
    let next_after = (cut || rows.len() == limit)
        .then(|| rows.last().map(|(id, _)| *id))
        .flatten();
    let records: Vec<StoredRecord> = rows
        .into_iter()
        .filter_map(|(id, json)| {
            let envelope: wire::Envelope = serde_json::from_str(&json).ok()?;
            let record = serde_json::from_str(&envelope.body).ok()?;
            Some(StoredRecord {
                id,
                record,
                envelope,
            })
        })
        .collect();
    Ok(axum::Json(RecordPage {
        gpu_uuid: uuid,
        records,
        next_after,
    })
    .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned(model: &str, precision: Option<Precision>) -> Planned {
        let spec = SpecDb::embedded().by_model(model).unwrap();
        Policy {
            precision,
            ..Policy::per_model_default()
        }
        .plan_for(spec)
        .unwrap()
    }

    /// Only the validator's own pick of precision proves a model: one forced by hand is
    /// planned and run, and its records say they prove nothing, as a test plan's do.
    #[test]
    fn a_precision_forced_by_hand_proves_no_model() {
        let pick = planned("H200 SXM", None);
        assert_eq!(pick.precision, Precision::Bf16);
        assert!(pick.proves_model && pick.lead >= pog_proof::params::MIN_LEAD);
        // Forcing the pick changes nothing.
        assert!(planned("H200 SXM", Some(Precision::Bf16)).proves_model);
        // FP32: an A100 does it faster from split BF16 products than the H200 natively, so
        // the H200 has no lead in it; planned at its own FP32 rate, proving nothing.
        let fp32 = planned("H200 SXM", Some(Precision::Fp32));
        assert_eq!((fp32.precision, fp32.lead), (Precision::Fp32, 0.0));
        assert!(!fp32.proves_model);
        // A lead in the forced precision is not enough either: INT8 leads by as much as BF16
        // on the H200, but only the pick was vetted.
        let int8 = planned("H200 SXM", Some(Precision::Int8));
        assert!(int8.lead >= pog_proof::params::MIN_LEAD && !int8.proves_model);
        // A T4's FP32 leads every model (none is slower), but the pick is FP16.
        assert!(!planned("T4", Some(Precision::Fp32)).proves_model);
        // A test plan proves nothing, whatever its precision.
        let test = Policy {
            plan: PlanKind::Test,
            precision: Some(Precision::Bf16),
            size: 32,
            batch: 2,
            expected_ms: 1000.0,
            ..Policy::per_model_default()
        };
        let spec = SpecDb::embedded().by_model("H200 SXM").unwrap();
        assert!(!test.plan_for(spec).unwrap().proves_model);
    }
}
